"""The default forecaster against persistence, seasonal naive and ridge-ar on real series
(results: benchmarks/README.md, "series_baselines.py"; the table: docs/forecasting-quality.md).

For each series, trains what ``taylorformer train --task T --task-config C --time-budget B``
trains (the command line's default model, the task's default context and horizon), then
scores the run with ``taylorformer evaluate``'s scorer (:func:`taylorformer.evaluate_run`:
the model and the baselines on the same test windows, CRPS in the data's units with
error bars that treat overlapping windows as dependent) and adds the one-step error: the
mean absolute error of the predictive mean at lead 1 against persistence's (the last
context value), in the data's units::

    python benchmarks/series_baselines.py --out runs/series_baselines --time-budget 900
    python benchmarks/series_baselines.py --out runs/series_baselines --score-only   # runs already there

Series (``--series``): ``ett`` (ETTh1 oil temperature, hourly), ``exchange-rate`` (daily,
no dates: no seasonal naive), ``electricity`` (hourly, the last client; fetched on first
use) and ``co2`` (weekly Mauna Loa CO2, 1958-2001, 59 missing weeks: statsmodels'
``co2.csv``, public domain; ``pip download statsmodels --no-deps`` and unzip
``statsmodels/datasets/co2/co2.csv``, then ``--co2 PATH``; its ``yyyymmdd`` dates are
rewritten as ISO dates into ``--out``). ``--data DIR`` reads ETTh1 and the exchange rates
from ``DIR/ett/ETTh1.csv`` and ``DIR/exchange_rate/exchange_rate.txt.gz`` instead of
fetching the named datasets. Training runs one at a time under ``nice``; ``--extra``
passes more ``train`` options (e.g. ``--model spec.json``) to every run.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SERIES = ("ett", "exchange-rate", "electricity", "co2")


def co2_csv(source, out):
    """``out/co2.csv``: statsmodels' weekly CO2 file ``source`` with ISO dates."""
    import pandas as pd

    frame = pd.read_csv(source, dtype={"date": str})
    frame["date"] = pd.to_datetime(frame["date"], format="%Y%m%d").dt.strftime("%Y-%m-%d")
    path = Path(out) / "co2.csv"
    frame.to_csv(path, index=False)
    return path


def task_of(name, data, out, co2=None, lead_input=True):
    """``(task name, task config)`` of series ``name``, with the task option ``lead_input``."""
    lead = {"lead_input": True} if lead_input else {}
    if name == "ett":
        return "ett", {**({"path": str(Path(data) / "ett" / "ETTh1.csv")} if data else {}), **lead}
    if name == "exchange-rate":
        return "exchange-rate", {**({"path": str(Path(data) / "exchange_rate" / "exchange_rate.txt.gz")}
                                    if data else {}), **lead}
    if name == "electricity":
        return "electricity", lead
    if co2 is None:
        raise ValueError("series co2 needs --co2 PATH (statsmodels' co2.csv)")
    return "csv", {"path": str(co2_csv(co2, out)), "date_column": "date", "target_columns": ["co2"], **lead}


def lead_errors(run_dir, split="test", checkpoint="best", every=1):
    """Per lead, in the data's units, over the windows of ``split`` with an observed
    target (every ``every``-th batch of 64): ``model`` and ``persistence``, the mean
    absolute error of the run's model's predictive mean and of the last context value;
    ``offset``, the mean of ``|predictive mean - last context value|`` (how far the model
    departs from the last observation)."""
    from taylorformer.workflow.runs import load_run

    model, task, _ = load_run(run_dir, checkpoint)
    scale = np.asarray(task.std, np.float64)  # the task's standardisation: data = z * std + mean
    sums = {"model": 0.0, "persistence": 0.0, "offset": 0.0}
    counts = 0.0
    for i, batch in enumerate(task.dataset(split, batch_size=64)):
        if i % every:
            continue
        mean = model.distribution(batch).mean().numpy().astype(np.float64)  # [B, H, Dy]
        yt = np.asarray(batch["yt"], np.float64)
        last = np.broadcast_to(np.asarray(batch["yc"], np.float64)[:, -1:, :], yt.shape)
        seen = ~np.isnan(yt) & ~np.isnan(last)
        for name, value in (("model", mean - yt), ("persistence", last - yt), ("offset", mean - last)):
            sums[name] = sums[name] + np.where(seen, np.abs(value) * scale, 0.0).sum((0, 2))
        counts = counts + seen.sum((0, 2))
    return {name: (value / np.maximum(counts, 1)).tolist() for name, value in sums.items()}


def train(name, data, out, budget, extra, co2=None, lead_input=True):
    task, config = task_of(name, data, out, co2, lead_input)
    if "path" not in config:  # a named dataset: fetched (or its error raised) before training
        from taylorformer.tasks import datasets

        datasets.fetch(task)
    run_dir = Path(out) / name
    if (run_dir / "best.keras").exists():
        return run_dir
    command = ["nice", "-n", "10", str(Path(sys.executable).with_name("taylorformer")), "train",
               "--task", task, "--task-config", json.dumps(config), "--time-budget", str(budget),
               "--no-eval", "--no-tensorboard", "--out", str(run_dir), *extra]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)
    return run_dir


def score(run_dir):
    import taylorformer as tfm

    result = tfm.evaluate_run(str(run_dir))
    units = result.get("data_units", result)
    row = {"model": units["crps"]}
    row.update({name: scores["crps"] for name, scores in result["baselines"].items()})
    row["paired"] = {name: gap["crps"] for name, gap in result["paired"].items()}
    row["verdict"] = result["verdict"]
    row["lead_mae"] = lead_errors(run_dir)
    steps = [line.split(",")[0] for line in (Path(run_dir) / "metrics.csv").read_text().splitlines()[1:]]
    row["epochs"] = len(steps)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--series", nargs="+", default=list(SERIES), choices=SERIES)
    p.add_argument("--out", required=True, help="folder of the runs (one per series)")
    p.add_argument("--data", default=os.environ.get("TAYLORFORMER_SHARED_DATA"),
                   help="folder holding ett/ETTh1.csv and exchange_rate/ (default: fetch the named datasets)")
    p.add_argument("--co2", default=None, help="statsmodels' co2.csv (series co2)")
    p.add_argument("--time-budget", type=float, default=900.0, help="training seconds per series")
    p.add_argument("--no-lead-input", action="store_true",
                   help="train without the csv task's lead input (and so with standardise: window)")
    p.add_argument("--score-only", action="store_true", help="score the runs already in --out")
    p.add_argument("--extra", default="", help="more `taylorformer train` options, one string")
    args = p.parse_args(argv)
    from taylorformer.errors import TaylorformerError

    Path(args.out).mkdir(parents=True, exist_ok=True)
    table = {}
    for name in args.series:
        run_dir = Path(args.out) / name
        try:
            if not args.score_only:
                run_dir = train(name, args.data, args.out, args.time_budget, args.extra.split(), args.co2,
                                not args.no_lead_input)
            table[name] = score(run_dir)
        except (subprocess.CalledProcessError, OSError, ValueError, TaylorformerError) as exc:
            table[name] = {"error": str(exc).splitlines()[-1] if str(exc) else type(exc).__name__}
        print(name, json.dumps(table[name]), flush=True)
    print_table(table)
    (Path(args.out) / "series_baselines.json").write_text(json.dumps(table, indent=1))


def print_table(table):
    fmt = lambda s: "-" if s is None else f"{s['mean']:.4g} ± {s['stderr']:.2g}"  # noqa: E731
    print("| series | model | persistence | seasonal naive | ridge-ar | lead-1 MAE model / persistence |")
    print("|---|---|---|---|---|---|")
    for name, row in table.items():
        if "error" in row:
            print(f"| {name} | not run: {row['error']} | | | | |")
            continue
        lead = row["lead_mae"]
        print(f"| {name} | {fmt(row['model'])} | {fmt(row.get('persistence'))} | {fmt(row.get('seasonal-naive'))} "
              f"| {fmt(row.get('ridge-ar'))} | {lead['model'][0]:.4g} / {lead['persistence'][0]:.4g} |")


if __name__ == "__main__":
    main()
