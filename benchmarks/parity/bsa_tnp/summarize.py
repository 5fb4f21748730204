"""Table of a learning-parity run: test log-likelihood per side, seed and step (mean +- se
over the test tasks), the mean +- se over seeds, and the training speed.

    python3 summarize.py results/learning-main.jsonl      # any python 3 with NumPy
"""
import json
import math
import sys

import numpy as np


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    sides = [s for s in ("taylorformer", "dl4bi") if any(r["impl"] == s for r in rows)]
    steps = sorted({r["step"] for r in rows})
    print("| side | seed | " + " | ".join(f"step {s}" for s in steps) + " |")
    print("|---|---|" + "---|" * len(steps))
    for side in sides:
        seeds = sorted({r["seed"] for r in rows if r["impl"] == side})
        for seed in seeds:
            cell = {r["step"]: r for r in rows if r["impl"] == side and r["seed"] == seed}
            print(f"| {side} | {seed} | " + " | ".join(
                f"{cell[s]['test_loglik_mean']:.3f} +- {cell[s]['test_loglik_stderr']:.3f}" if s in cell else "not run"
                for s in steps) + " |")
        cells = []
        for s in steps:
            v = [r["test_loglik_mean"] for r in rows if r["impl"] == side and r["step"] == s]
            cells.append(f"{np.mean(v):.3f} +- {np.std(v, ddof=1) / math.sqrt(len(v)):.3f} (n={len(v)})"
                         if len(v) > 1 else (f"{v[0]:.3f} (n=1)" if v else ""))
        print(f"| {side} | mean +- se over seeds | " + " | ".join(cells) + " |")
    print()
    for r in rows:
        if r.get("final"):
            print(f"{r['impl']} seed {r['seed']}: steady {r['steady_steps_per_s']} steps/s, "
                  f"train wall {r['train_seconds']} s, CPU {r['cpu_seconds']} s "
                  f"({r['cpu_seconds'] / r['step'] * 1000:.0f} ms CPU per step incl. the first), "
                  f"first step {r['first_step_seconds']} s, load {r['load_avg_1m']}, "
                  f"{r['num_params']} parameters" + (f", basis spread {r['basis_spread_within_head']}"
                                                     if "basis_spread_within_head" in r else ""))


if __name__ == "__main__":
    main(sys.argv[1])
