"""Summarise learning runs: ``python summarise.py [RESULTS_DIR]`` (default ``results`` here).

Reads ``<side>-seed<S>.jsonl`` (the output of ``train_ours.py`` / ``train_ref.py``, one JSON
line per evaluation, the last one with the run's totals) and prints, per side, the test
log-likelihood of every seed at every evaluated step, the mean +- standard error over
seeds (ddof 1), and the steady steps per second and CPU seconds per step of finished
runs. Unfinished runs show the steps they reached. Only the standard library is needed.
"""
import glob
import json
import math
import os
import re
import statistics
import sys


def load(directory):
    runs = {}
    for path in sorted(glob.glob(os.path.join(directory, "*-seed*.jsonl"))):
        match = re.match(r"(.+)-seed(\d+)\.jsonl$", os.path.basename(path))
        with open(path) as fh:
            lines = [json.loads(line) for line in fh if line.startswith("{")]
        for line in lines:  # ../tnp_d's trainers end with "steps" only
            line.setdefault("step", line.get("steps"))
        if match and lines:
            runs.setdefault(match.group(1), {})[int(match.group(2))] = lines
    return runs


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    directory = argv[0] if argv else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    for side, seeds in load(directory).items():
        steps = sorted({line["step"] for lines in seeds.values() for line in lines if "step" in line})
        print(f"{side}:")
        for step in steps:
            values = {s: line["test_loglik_mean"] for s, lines in seeds.items()
                      for line in lines if line.get("step") == step}
            cells = "  ".join(f"seed {s}: {v:+.4f}" for s, v in sorted(values.items()))
            summary = ""
            if len(values) > 1:
                vals = list(values.values())
                summary = (f"  | mean {statistics.mean(vals):+.4f} +- "
                           f"{statistics.stdev(vals) / math.sqrt(len(vals)):.4f} (n={len(vals)})")
            print(f"  step {step:5d}  {cells}{summary}")
        for s, lines in sorted(seeds.items()):
            last = lines[-1]
            if "steady_steps_per_s" in last:
                print(f"  seed {s}: steady {last['steady_steps_per_s']} steps/s, "
                      f"{last['cpu_seconds'] / last['steps']:.3f} CPU s/step, "
                      f"{last['num_params']} params, gt {last['gt_loglik_mean']:+.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
