"""Record the parity folders' learning comparisons as the replication rows' comparisons
with the authors' code (the packaged CSV of ``taylorformer_replication.authors_code``).

Each comparison ran ours and the authors' code on the same dumped training batches and
test tasks, several seeds per side; this script takes each run's final test score and
writes one line per run for the table row it matches:

* ``table5/results/<model>-<side>-seed<S>.json``: TE-TNP Table 5, rows
  ``<model>-gp-shift-<Delta>`` (TNP-D, TE-TNP, CNP against cambridge-mlg/tnp and tetnp);
* ``taylorformer/results/learning-{ours,ref}[-<kernel>]-seed<S>-2000.jsonl``: Taylorformer
  Table 1, rows ``taylorformer-gp-<kernel>`` (against oremnirv/Taylorformer);
* ``bsa_tnp/results/domains-<side>-seed<S>.json``: BSA-TNP Table 1, rows
  ``bsa-tnp-gp2d-{train,shifted,scaled}`` (against MLGlobalHealth/dl4bi; NLL).

A run records the row's protocol version it ran under, so a later change of a row's
protocol leaves it out: the Taylorformer runs' from their task's noise (protocol 1 had noise
1e-3), the Table 5 and BSA-TNP runs' the row's version when they are recorded.

    python benchmarks/parity/record_authors_code.py            # write the packaged CSV
    python benchmarks/parity/record_authors_code.py --check    # exit 1 where it differs
"""
import argparse
import csv
import glob
import io
import json
import os
import re
import sys

from taylorformer_replication.authors_code import COLUMNS, RECORDED_COMPARISONS
from taylorformer_replication.replication import get_row

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
#: where the runs of the folders committed before the CPU model was recorded ran
UNRECORDED_DEVICE = "CPU: 2-core x86-64, shared (model not recorded)"
TAYLORFORMER_SETTING = ("the preset unchanged; batches of 8 tasks of 40 points (Nc ~ U{3..37}; the paper: 32 of "
                        "100); the authors' Adam 3e-4 without clipping on both sides; 512 test tasks")


def relative(path):
    return os.path.relpath(path, ROOT)


def final_lines(path):
    """The last JSON line of each run (its largest step) in the JSON-lines file ``path``,
    keyed by (implementation, seed)."""
    last = {}
    for text in open(path, encoding="utf-8"):
        line = json.loads(text)
        key = (line["impl"], line["seed"])
        if key not in last or line["step"] >= last[key]["step"]:
            last[key] = line
    return last


def scored_runs(pattern, scores, row_id, metric):
    """One line per score of each run file (JSON) matching ``pattern`` under this folder:
    ``run[scores]`` maps a name (a shift, a domain) to ``{metric: mean, "stderr", "num_tasks"}``;
    ``row_id(run, name)`` is the row it scores."""
    lines = []
    for path in sorted(glob.glob(os.path.join(HERE, pattern))):
        run = json.load(open(path, encoding="utf-8"))
        for name, score in run[scores].items():
            row = get_row(row_id(run, name))
            lines.append({"row": row.id, "side": run["side"], "seed": run["seed"], "steps": run["steps"],
                          "protocol": row.protocol_version, "metric": metric, "value": score[metric],
                          "stderr": score["stderr"], "num_tasks": score["num_tasks"],
                          "authors_code": run["reference"], "setting": run["setting"], "source": relative(path),
                          "device": run["device"], "commit": run["commit"], "date": run.get("date", "")})
    return lines


def table5_lines():
    return scored_runs(os.path.join("table5", "results", "*-seed*.json"), "shifts",
                       lambda run, shift: f"{run['model']}-gp-shift-{float(shift):g}", "loglik")


def taylorformer_lines():
    lines = []
    pattern = re.compile(r"learning-(ours|ref)(?:-(eq|matern52|periodic))?(-noise0)?-seed(\d+)-2000\.jsonl$")
    for path in sorted(glob.glob(os.path.join(HERE, "taylorformer", "results", "learning-*-seed*-2000.jsonl"))):
        match = pattern.search(os.path.basename(path))
        if match is None:  # the diagnostics (the reference with flags) are no comparison
            continue
        side, kernel = ("ours" if match[1] == "ours" else "authors"), match[2] or "eq"
        for line in final_lines(path).values():
            if line["step"] != 2000:  # a run still going, or cut short
                continue
            noise = line.get("task_config", {}).get("noise", 1e-3)
            lines.append({"row": f"taylorformer-gp-{kernel}", "side": side, "seed": line["seed"],
                          "steps": line["step"], "protocol": 2 if noise == 0 else 1, "metric": "loglik",
                          "value": line["test_loglik_mean"], "stderr": line["test_loglik_stderr"], "num_tasks": 512,
                          "authors_code": "oremnirv/Taylorformer@dfd0e1d", "setting": TAYLORFORMER_SETTING,
                          "source": relative(path), "device": line.get("device", UNRECORDED_DEVICE),
                          "commit": line.get("commit", "2554e46"), "date": line.get("date", "")})
    return lines


def bsa_lines():
    return scored_runs(os.path.join("bsa_tnp", "results", "domains-*-seed*.json"), "domains",
                       lambda run, domain: f"bsa-tnp-gp2d-{domain}", "nll")


def render(lines):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(sorted(lines, key=lambda ln: (ln["row"], ln["side"], ln["seed"], ln["steps"])))
    return buffer.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the packaged CSV; exit 1 where it differs")
    parser.add_argument("--out", default=RECORDED_COMPARISONS, help="the CSV to write (default: the packaged one)")
    args = parser.parse_args(argv)
    text = render(table5_lines() + taylorformer_lines() + bsa_lines())
    if args.check:
        current = open(args.out, encoding="utf-8").read() if os.path.exists(args.out) else ""
        if current != text:
            print(f"{args.out} differs from the parity results: run {relative(__file__)}", file=sys.stderr)
            return 1
        return 0
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"{args.out}: {text.count(chr(10)) - 1} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
