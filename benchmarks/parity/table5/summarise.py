"""Tabulate ``results/*.json`` of the Table 5 comparison as the Markdown of README.md.

Run with the taylorformer venv (the paper's values come from the replication rows)::

    python summarise.py            # per model: a line per side and seed, the mean +- se over
                                   # seeds per side, the exact GP and the paper, at each shift
"""
import glob
import json
import os
import sys

import numpy as np

import common


def load(model, side):
    runs = []
    for path in sorted(glob.glob(os.path.join(common.RESULTS, f"{model}-{side}-seed*.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    return runs


def over_seeds(runs, key):
    values = np.array([r["shifts"][key]["loglik"] for r in runs])
    if len(values) < 2:
        return f"{values.mean():.3f}" if len(values) else ""
    return f"**{values.mean():.3f} +- {values.std(ddof=1) / np.sqrt(len(values)):.3f}**"


def main():
    from taylorformer_replication.papers.te_tnp import GP_MODELS, TABLE5

    keys = [f"{s:g}" for s in common.SHIFTS]
    with open(os.path.join(common.RESULTS, "exact-gp.json")) as f:
        ceiling = json.load(f)["shifts"]
    header = "| model | side | seed | params | CPU s/step | " + " | ".join(f"Delta {k}" for k in keys) + " |"
    print(header)
    print("|" + "---|" * (5 + len(keys)))
    for model in common.MODELS:
        for side in ("ours", "authors"):
            runs = load(model, side)
            for r in runs:
                cells = [f"{r['shifts'][k]['loglik']:.3f} +- {r['shifts'][k]['stderr']:.3f}" for k in keys]
                print(f"| {model} | {side} | {r['seed']} | {r['parameters']:,} | {r['cpu_s_per_step']:.3f} | "
                      + " | ".join(cells) + " |")
            if runs:
                print(f"| {model} | {side} | mean +- se ({len(runs)} seeds) | | | "
                      + " | ".join(over_seeds(runs, k) for k in keys) + " |")
        paper = TABLE5[GP_MODELS[model][0]]
        print(f"| {model} | paper (Table 5) | | | | "
              + " | ".join(f"{paper[s][0]:.2f} +- {paper[s][1]:.2f}" for s in common.SHIFTS) + " |")
    print("| exact GP | ceiling | | | | " + " | ".join(
        f"{ceiling[k]['loglik']:.3f} +- {ceiling[k]['stderr']:.3f}" for k in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
