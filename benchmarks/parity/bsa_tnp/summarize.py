"""Table of learning-parity runs: test log-likelihood per side, seed and step (mean +- se
over the test tasks), the mean +- se over seeds, and the training speed.

    python3 summarize.py results/learning-main.jsonl results/learning-seed2.jsonl
    python3 summarize.py results/*.jsonl          # any python 3 with NumPy

A side is the implementation plus its flags (``dl4bi --relu`` ...): runs of the reference
with flags are listed apart from the reference as published. A (side, seed) given in two
files keeps the later file's rows.
"""
import json
import math
import sys

import numpy as np


def side_of(row):
    flags = row.get("flags") or []
    init = f" --init-from {row['init_from']}" if row.get("init_from") else ""
    return row["impl"] + "".join(f" --{f}" for f in flags) + init


def load(paths):
    """Rows by (side, seed, step), later files replacing earlier ones' (side, seed)."""
    cells = {}
    for path in paths:
        rows = [json.loads(line) for line in open(path) if line.startswith("{")]
        # a run's evaluation lines may lack "flags": take them from its final line
        finals = {(r["impl"], r["seed"]): r for r in rows if r.get("final")}
        for r in rows:
            for k in ("flags", "init_from"):
                r.setdefault(k, finals.get((r["impl"], r["seed"]), {}).get(k))
        for key in {(side_of(r), r["seed"]) for r in rows}:
            for k in [k for k in cells if k[:2] == key]:
                del cells[k]
        for r in rows:
            cells[(side_of(r), r["seed"], r["step"])] = r
    return cells


def main(paths):
    cells = load(paths)
    sides = sorted({k[0] for k in cells}, key=lambda s: (not s.startswith("taylorformer"), s))
    steps = sorted({k[2] for k in cells})
    print("| side | seed | " + " | ".join(f"step {s}" for s in steps) + " |")
    print("|---|---|" + "---|" * len(steps))
    for side in sides:
        seeds = sorted({k[1] for k in cells if k[0] == side})
        for seed in seeds:
            print(f"| {side} | {seed} | " + " | ".join(
                f"{cells[side, seed, s]['test_loglik_mean']:.3f} +- {cells[side, seed, s]['test_loglik_stderr']:.3f}"
                if (side, seed, s) in cells else "not run" for s in steps) + " |")
        if len(seeds) > 1:
            out = []
            for s in steps:
                v = [cells[side, seed, s]["test_loglik_mean"] for seed in seeds if (side, seed, s) in cells]
                out.append(f"{np.mean(v):.3f} +- {np.std(v, ddof=1) / math.sqrt(len(v)):.3f} "
                           f"[{min(v):.3f}, {max(v):.3f}]" if len(v) > 1 else "")
            print(f"| {side} | mean +- se over seeds [min, max] | " + " | ".join(out) + " |")
    print()
    for key in sorted(k for k in cells if cells[k].get("final")):
        r = cells[key]
        print(f"{key[0]} seed {r['seed']}: steady {r['steady_steps_per_s']} steps/s, "
              f"train wall {r['train_seconds']} s, CPU {r['cpu_seconds']} s "
              f"({r['cpu_seconds'] / r['step'] * 1000:.0f} ms CPU per step incl. the first), "
              f"first step {r['first_step_seconds']} s, load {r['load_avg_1m']}, "
              f"{r['num_params']} parameters" + (f", basis spread {r['basis_spread_within_head']}"
                                                 if "basis_spread_within_head" in r else ""))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
