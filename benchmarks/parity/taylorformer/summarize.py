"""Summarise the learning runs of run_learning.sh (any Python with NumPy)::

    python summarize.py 2000              # reads results/learning-{ours,ref}-seed*-2000.jsonl
    python summarize.py 200 out           # another folder (run_learning.sh's OUT)

Prints, per side and evaluation step, the test log-likelihood of every seed (+- its
standard error over the test tasks) and the mean +- standard error over seeds; then the
steady training speed (steps/s wall, CPU seconds per step) per run and the ratios.
"""
import glob
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    steps = argv[0] if argv else "2000"
    folder = argv[1] if len(argv) > 1 else os.path.join(HERE, "results")
    runs = {}
    for side in ("ours", "ref"):
        for path in sorted(glob.glob(os.path.join(folder, f"learning-{side}-seed*-{steps}.jsonl"))):
            lines = [json.loads(l) for l in open(path) if l.strip()]
            if lines and "steady_steps_per_s" in lines[-1]:  # finished runs only
                runs.setdefault(side, []).append(lines)
    evals = sorted({l["step"] for rs in runs.values() for r in rs for l in r})
    print("| step | side | per seed (test log-lik. +- se over tasks) | mean +- se over seeds |")
    print("|---|---|---|---|")
    for step in evals:
        for side, rs in runs.items():
            vals = [(r[-1]["seed"], l["test_loglik_mean"], l["test_loglik_stderr"])
                    for r in rs for l in r if l["step"] == step]
            m = np.array([v[1] for v in vals])
            se = m.std(ddof=1) / math.sqrt(len(m)) if len(m) > 1 else float("nan")
            per = ", ".join(f"s{s}: {v:.3f} +- {e:.3f}" for s, v, e in vals)
            print(f"| {step} | {side} | {per} | {m.mean():.3f} +- {se:.3f} (n={len(m)}) |")
    print()
    speed = {}
    for side, rs in runs.items():
        for r in rs:
            f = r[-1]
            speed.setdefault(side, []).append((f["steady_steps_per_s"], f["steady_cpu_seconds_per_step"]))
            print(f"{side} seed {f['seed']}: steady {f['steady_steps_per_s']} steps/s wall, "
                  f"{f['steady_cpu_seconds_per_step']} CPU s/step, params {f['num_params']}")
    if len(speed) == 2:
        o, r = (np.array(speed[s]) for s in ("ours", "ref"))
        print(f"ratio ours/ref: steps/s wall {o[:, 0].mean() / r[:, 0].mean():.2f}x, "
              f"CPU time per step {r[:, 1].mean() / o[:, 1].mean():.2f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
