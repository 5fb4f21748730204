"""The domain-transfer table of the ``results/domains-<side>-seed<S>.json`` runs: NLL per
target point per domain, per seed and mean +- standard error over seeds, both sides, with
the exact-GP ceiling and the paper's values (BSA-TNP Table 1).

    python summarize_domains.py                                  # the markdown table
    python summarize_domains.py --exact-gp data/gp2d-nc63-nt64-seed0-2000.npz
        # first writes results/domains-exact-gp.json: the exact GP predictive NLL per target
        # point (the dump's gt_loglik, true lengthscale and noise) on each domain's test tasks

The paper's values come from the replication plugin (``taylorformer_replication``) where it
is installed.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import domains  # noqa: E402


def write_exact_gp(data_path, out):
    data = np.load(data_path)
    scores = {}
    for domain in domains.DOMAINS:
        key = f"{domains.prefix(domain)}gt_loglik"
        if key in data.files:
            scores[domain] = domains.nll_record(data[key].reshape(-1))
    if "test_shifted_xc" in data.files:  # the same draws as the train domain's, inputs moved by a constant
        real = data["test_mask_c"] > 0
        offset = float(np.median(data["test_shifted_xc"][real] - data["test_xc"][real]))
        deviation = {}
        for key in ("xc", "xt", "yc", "yt", "gt_loglik"):
            moved = data[f"test_{key}"].astype(np.float64)
            if key in ("xc", "xt"):
                moved = moved + offset * data[f"test_mask_{key[1]}"][..., None]
            deviation[key] = float(np.abs(data[f"test_shifted_{key}"] - moved).max())
        scores["shifted"]["same_tasks_as_train"] = {"input_offset": offset, "max_abs_deviation": deviation}
    meta = json.loads(str(data["meta"]))
    where = domains.provenance()
    record = {"model": "exact-gp", "side": "ceiling", "task": meta["task"], "task_config": meta["task_config"],
              "test_domains": meta.get("test_domains", {}),
              "note": "exact GP predictive NLL per target point under each task's true lengthscale and noise "
                      "(the dump's gt_loglik), on the test tasks of every run; the scaled domain's tasks have "
                      "4x the context and target points",
              "data": os.path.relpath(data_path, HERE), "commit": where["commit"],
              "command": " ".join(["python", os.path.basename(__file__)] + sys.argv[1:]),
              "device": where["device"], "domains": scores}
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return record


def paper_values():
    try:
        from taylorformer_replication.papers.bsa_tnp import GP_VALUES
    except ImportError:
        return {}
    return GP_VALUES


def fmt(score):
    return f"{score['nll']:.3f} +- {score['stderr']:.3f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=domains.RESULTS)
    ap.add_argument("--exact-gp", default=None, metavar="NPZ",
                    help="write results/domains-exact-gp.json from this dump_data.py file first")
    args = ap.parse_args(argv)
    exact_path = os.path.join(args.results, "domains-exact-gp.json")
    if args.exact_gp:
        write_exact_gp(args.exact_gp, exact_path)
    runs = {}
    for path in sorted(glob.glob(os.path.join(args.results, "domains-*-seed*.json"))):
        run = json.load(open(path))
        runs.setdefault(run["side"], {})[run["seed"]] = run
    print("| side | seed | " + " | ".join(domains.DOMAINS) + " | CPU s/step |")
    print("|---|---|" + "---|" * len(domains.DOMAINS) + "---|")
    for side in ("ours", "authors"):
        seeds = runs.get(side, {})
        for seed, run in sorted(seeds.items()):
            cells = [fmt(run["domains"][d]) if d in run["domains"] else "-" for d in domains.DOMAINS]
            print(f"| {side} | {seed} | " + " | ".join(cells) + f" | {run['cpu_s_per_step']:.3f} |")
        if len(seeds) > 1:
            cells = []
            for d in domains.DOMAINS:
                values = np.array([r["domains"][d]["nll"] for r in seeds.values() if d in r["domains"]])
                cells.append(f"**{values.mean():.3f} +- {values.std(ddof=1) / np.sqrt(len(values)):.3f}**"
                             if len(values) > 1 else "-")
            cpu = np.mean([r["cpu_s_per_step"] for r in seeds.values()])
            print(f"| {side} | mean of {len(seeds)} | " + " | ".join(cells) + f" | {cpu:.3f} |")
    if os.path.exists(exact_path):
        exact = json.load(open(exact_path))["domains"]
        print("| exact GP | - | " + " | ".join(fmt(exact[d]) if d in exact else "-" for d in domains.DOMAINS)
              + " | - |")
    paper = paper_values()
    if paper:
        print("| paper (Table 1; Nc ~ U[128, 512], Nt = 1024) | - | "
              + " | ".join(f"{paper[d][0]:.2f} +- {paper[d][1]:.2f}" for d in domains.DOMAINS) + " | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
