"""Summarise the learning runs of run_learning.sh (any Python with NumPy)::

    python summarize.py 2000              # reads results/learning-{ours,ref}[-KERNEL]-seed*-2000.jsonl
    python summarize.py 200 out           # another folder (run_learning.sh's OUT)

Per kernel (eq: ``learning-<side>-seed*``; matern52, periodic, eq-noise0:
``learning-<side>-<kernel>-seed*``)
prints, per side and evaluation step, the test log-likelihood of every seed (+- its
standard error over the test tasks) and the mean +- standard error over seeds; then the
steady training speed (steps/s wall, CPU seconds per step) per run and the ratios. Ends
with one table of the final step over kernels.
"""
import glob
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


#: the data tags of run_learning.sh (KERNEL): EQ at noise 1e-3 (untagged), Table 1's rows at noise 0
KERNELS = ("eq", "matern52", "periodic", "eq-noise0")


def mean_se(values):
    """Mean and standard error over seeds (nan for one seed)."""
    m = np.array(values, np.float64)
    return m.mean(), (m.std(ddof=1) / math.sqrt(len(m)) if len(m) > 1 else float("nan"))


def load_runs(folder, kernel, steps):
    """``{side: [run lines]}`` of the finished runs of ``kernel``."""
    tag = "" if kernel == "eq" else f"-{kernel}"
    runs = {}
    for side in ("ours", "ref"):
        for path in sorted(glob.glob(os.path.join(folder, f"learning-{side}{tag}-seed*-{steps}.jsonl"))):
            lines = [json.loads(l) for l in open(path) if l.strip()]
            if lines and "steady_steps_per_s" in lines[-1]:  # finished runs only
                runs.setdefault(side, []).append(lines)
    return runs


def print_kernel(kernel, runs):
    print(f"### {kernel}\n")
    evals = sorted({l["step"] for rs in runs.values() for r in rs for l in r})
    print("| step | side | per seed (test log-lik. +- se over tasks) | mean +- se over seeds |")
    print("|---|---|---|---|")
    for step in evals:
        for side, rs in runs.items():
            vals = [(r[-1]["seed"], l["test_loglik_mean"], l["test_loglik_stderr"])
                    for r in rs for l in r if l["step"] == step]
            mean, se = mean_se([v[1] for v in vals])
            per = ", ".join(f"s{s}: {v:.3f} +- {e:.3f}" for s, v, e in vals)
            print(f"| {step} | {side} | {per} | {mean:.3f} +- {se:.3f} (n={len(vals)}) |")
    print()
    for side, rs in runs.items():
        for r in rs:
            f = r[-1]
            print(f"{side} seed {f['seed']}: steady {f['steady_steps_per_s']} steps/s wall, "
                  f"{f['steady_cpu_seconds_per_step']} CPU s/step, params {f['num_params']}, "
                  f"task {f.get('task_config', 'gp-taylorformer defaults (eq, noise 1e-3)')}")
    if len(runs) == 2:
        o, r = (np.array([(x[-1]["steady_steps_per_s"], x[-1]["steady_cpu_seconds_per_step"])
                          for x in runs[s]]) for s in ("ours", "ref"))
        print(f"ratio ours/ref: steps/s wall {o[:, 0].mean() / r[:, 0].mean():.2f}x, "
              f"CPU time per step {r[:, 1].mean() / o[:, 1].mean():.2f}x faster")
    print()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    steps = argv[0] if argv else "2000"
    folder = argv[1] if len(argv) > 1 else os.path.join(HERE, "results")
    finals = []
    for kernel in KERNELS:
        runs = load_runs(folder, kernel, steps)
        if not runs:
            continue
        print_kernel(kernel, runs)
        for side, rs in runs.items():
            last = [r[-1] for r in sorted(rs, key=lambda r: r[-1]["seed"])]
            mean, se = mean_se([f["test_loglik_mean"] for f in last])
            noise = last[0].get("task_config", {}).get("noise", 1e-3)  # the task's default before the tag
            finals.append((kernel, f"{noise:g}", side, ", ".join(f"s{f['seed']}: {f['test_loglik_mean']:.3f}" for f in last),
                           f"{mean:.3f} +- {se:.3f} (n={len(last)})", f"{last[0]['gt_loglik_joint_mean']:.2f}",
                           f"{np.mean([f['steady_steps_per_s'] for f in last]):.2f}",
                           f"{np.mean([f['steady_cpu_seconds_per_step'] for f in last]):.4f}"))
    print(f"### final step ({steps}), all kernels\n")
    print("| kernel | noise | side | per seed (test log-lik.) | mean +- se over seeds | exact GP (joint) "
          "| steps/s wall | CPU s/step |")
    print("|---|---|---|---|---|---|---|---|")
    for row in finals:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
