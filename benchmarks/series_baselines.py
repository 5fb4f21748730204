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
use), ``co2`` (weekly Mauna Loa CO2, 1958-2001, 59 missing weeks: statsmodels'
``co2.csv``, public domain; ``pip download statsmodels --no-deps`` and unzip
``statsmodels/datasets/co2/co2.csv``, then ``--co2 PATH``; its ``yyyymmdd`` dates are
rewritten as ISO dates into ``--out``) and ``demand`` (half-hourly electricity demand of
England and Wales in MW, 5 June to 27 August 2000, 4032 values, Taylor 2003: pmdarima's
``load_taylor``, MIT licence; ``pip download pmdarima --no-deps`` and unzip
``pmdarima/datasets/taylor.py``, then ``--demand PATH``; its values are written with their
half-hourly dates into ``--out``). ``--data DIR`` reads ETTh1 and the exchange rates
from ``DIR/ett/ETTh1.csv`` and ``DIR/exchange_rate/exchange_rate.txt.gz`` instead of
fetching the named datasets. ``--mirror SERIES`` adds the task option ``"mirror": true``
to those series, ``--seeds`` trains each series once per seed (``OUT/SERIES/seedK``).
Training runs one at a time under ``nice``; ``--extra`` passes more ``train`` options
(e.g. ``--model spec.json``) to every run.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SERIES = ("ett", "exchange-rate", "electricity", "co2", "demand")
#: the first half-hour of pmdarima's ``load_taylor`` (Monday 5 June 2000; Taylor 2003)
DEMAND_START = "2000-06-05 00:00"


def co2_csv(source, out):
    """``out/co2.csv``: statsmodels' weekly CO2 file ``source`` with ISO dates."""
    import pandas as pd

    frame = pd.read_csv(source, dtype={"date": str})
    frame["date"] = pd.to_datetime(frame["date"], format="%Y%m%d").dt.strftime("%Y-%m-%d")
    path = Path(out) / "co2.csv"
    frame.to_csv(path, index=False)
    return path


def demand_csv(source, out):
    """``out/demand.csv``: the half-hourly demand values (MW) of pmdarima's
    ``datasets/taylor.py`` (``source``; the one list literal it holds, read without
    importing pmdarima) with their dates."""
    import ast

    import pandas as pd

    lists = [node for node in ast.walk(ast.parse(Path(source).read_text())) if isinstance(node, ast.List)]
    values = [ast.literal_eval(node) for node in lists if len(node.elts) > 1000]
    if len(values) != 1:
        raise ValueError(f"{source}: expected one list of demand values (pmdarima's datasets/taylor.py)")
    dates = pd.date_range(DEMAND_START, periods=len(values[0]), freq="30min")
    path = Path(out) / "demand.csv"
    pd.DataFrame({"date": dates.strftime("%Y-%m-%d %H:%M"), "demand_mw": values[0]}).to_csv(path, index=False)
    return path


def task_of(name, data, out, sources, lead_input=True, mirror=False):
    """``(task name, task config)`` of series ``name``, with the task options ``lead_input``
    and ``mirror``; ``sources``: ``{"co2": path, "demand": path}`` for those series."""
    lead = {"lead_input": True} if lead_input else {}
    if mirror:
        lead["mirror"] = True
    if name == "ett":
        return "ett", {**({"path": str(Path(data) / "ett" / "ETTh1.csv")} if data else {}), **lead}
    if name == "exchange-rate":
        return "exchange-rate", {**({"path": str(Path(data) / "exchange_rate" / "exchange_rate.txt.gz")}
                                    if data else {}), **lead}
    if name == "electricity":
        return "electricity", lead
    option = {"co2": "--co2 PATH (statsmodels' co2.csv)", "demand": "--demand PATH (pmdarima's taylor.py)"}[name]
    if sources.get(name) is None:
        raise ValueError(f"series {name} needs {option}")
    write, column = (co2_csv, "co2") if name == "co2" else (demand_csv, "demand_mw")
    return "csv", {"path": str(write(sources[name], out)), "date_column": "date", "target_columns": [column],
                   **lead}


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


def volatility_check(name, data, out, sources):
    """Whether a persistence forecast with each window's own volatility beats the
    ``persistence`` baseline's spread (the rms h-step change over the training rows) on the
    test windows of series ``name``: the CRPS in the data's units, per window the mean over
    its leads, of ``N(last context value, sd_h)`` with ``sd_h`` the baseline's and with
    ``sd_h = v sqrt(h)``, ``v`` the window's rms one-step change over its context (a random
    walk with the window's volatility); the paired gap (window-volatility minus baseline)
    with its batch-means standard error."""
    from taylorformer.prediction.calibration import gaussian_crps
    from taylorformer.task import make_task
    from taylorformer.workflow.baselines import overlap_block, summarise
    from taylorformer.workflow.predictive_baselines import SeriesBaselines, carried_forward

    task = make_task(*task_of(name, data, out, sources))
    baselines = SeriesBaselines(task)
    scale = np.asarray(task.std, np.float64)
    root_leads = np.sqrt(np.arange(1, task.horizon + 1))[None, :, None]
    fixed, own = [], []
    for batch in task.dataset("test", batch_size=64):
        yc, yt = (np.asarray(batch[k], np.float64) for k in ("yc", "yt"))
        mean, sd = baselines.predict(yc)["persistence"]
        steps = np.diff(carried_forward(yc), axis=1)
        volatility = np.sqrt(np.mean(steps ** 2, axis=1, keepdims=True))  # [B, 1, Dy]
        seen = ~np.isnan(yt)
        for values, spread in ((fixed, sd), (own, volatility * root_leads)):
            crps = np.where(seen, gaussian_crps(np.where(seen, yt, 0.0), mean, np.maximum(spread, 1e-12)), 0.0)
            values.extend(((crps * scale).sum((1, 2)) / np.maximum(seen.sum((1, 2)), 1)).tolist())
    block = overlap_block(task)
    fixed, own = np.asarray(fixed), np.asarray(own)
    return {"persistence": summarise(fixed, block)[:2], "window_volatility": summarise(own, block)[:2],
            "gap": summarise(own - fixed, block)[:2], "windows": len(fixed)}


def train(task, config, run_dir, budget, extra, seed=0):
    """``run_dir`` trained on ``task`` with ``config`` (:func:`task_of`) unless it holds a model."""
    if "path" not in config:  # a named dataset: fetched (or its error raised) before training
        from taylorformer.tasks import datasets

        datasets.fetch(task)
    run_dir = Path(run_dir)
    if (run_dir / "best.keras").exists():
        return
    command = ["nice", "-n", "10", str(Path(sys.executable).with_name("taylorformer")), "train",
               "--task", task, "--task-config", json.dumps(config), "--time-budget", str(budget),
               "--seed", str(seed), "--no-eval", "--no-tensorboard", "--out", str(run_dir), *extra]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)


def score(run_dir):
    import taylorformer as tfm

    result = tfm.evaluate_run(str(run_dir))
    units = result.get("data_units", result)
    row = {"model": units["crps"]}
    row.update({name: scores["crps"] for name, scores in result["baselines"].items()})
    row["paired"] = {name: gap["crps"] for name, gap in result["paired"].items()}
    row["verdict"] = result["verdict"]
    row["coverage95"] = {"model": units.get("coverage95"),
                         **{name: scores.get("coverage95") for name, scores in result["baselines"].items()}}
    row["lead_mae"] = lead_errors(run_dir)
    last = (Path(run_dir) / "metrics.csv").read_text().splitlines()[-1].split(",")
    row["steps"], row["train_seconds"] = int(last[0]), float(last[-1])
    return row


def over_seeds(rows):
    """The seeds' rows of one series summarised: per baseline its CRPS (the same test
    windows for every seed), the model's CRPS per seed, their mean and its standard error
    over seeds (ddof 1), and per baseline the paired gaps (model minus baseline, with their
    window standard errors) per seed and their mean."""
    baselines = list(rows[0]["paired"])
    model = [row["model"]["mean"] for row in rows]
    out = {"seeds": len(rows), "model_per_seed": model, "model_mean": float(np.mean(model)),
           "model_seed_stderr": float(np.std(model, ddof=1) / np.sqrt(len(model))) if len(model) > 1 else None,
           "steps": [row["steps"] for row in rows], "baselines": {}}
    for name in baselines:
        gaps = [row["paired"][name] for row in rows]
        out["baselines"][name] = {"crps": rows[0][name]["mean"], "crps_stderr": rows[0][name]["stderr"],
                                  "gap_per_seed": [(g["mean"], g["stderr"]) for g in gaps],
                                  "gap_mean": float(np.mean([g["mean"] for g in gaps]))}
    out["lead1_mae"] = {"model": float(np.mean([row["lead_mae"]["model"][0] for row in rows])),
                        "persistence": rows[0]["lead_mae"]["persistence"][0]}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--series", nargs="+", default=list(SERIES), choices=SERIES)
    p.add_argument("--out", required=True, help="folder of the runs (OUT/SERIES/seedK)")
    p.add_argument("--data", default=os.environ.get("TAYLORFORMER_SHARED_DATA"),
                   help="folder holding ett/ETTh1.csv and exchange_rate/ (default: fetch the named datasets)")
    p.add_argument("--co2", default=None, help="statsmodels' co2.csv (series co2)")
    p.add_argument("--demand", default=None, help="pmdarima's datasets/taylor.py (series demand)")
    p.add_argument("--mirror", nargs="*", default=[], choices=SERIES,
                   help="series trained with the task option \"mirror\": true")
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="training seeds (one run each)")
    p.add_argument("--time-budget", type=float, default=900.0, help="training seconds per run")
    p.add_argument("--no-lead-input", action="store_true",
                   help="train without the csv task's lead input (and so with standardise: window)")
    p.add_argument("--score-only", action="store_true", help="score the runs already in --out")
    p.add_argument("--volatility-check", action="store_true",
                   help="train nothing: score persistence with each window's own volatility against the "
                        "persistence baseline (volatility_check)")
    p.add_argument("--extra", default="", help="more `taylorformer train` options, one string")
    args = p.parse_args(argv)
    from taylorformer.errors import TaylorformerError

    Path(args.out).mkdir(parents=True, exist_ok=True)
    sources = {"co2": args.co2, "demand": args.demand}
    table = {}
    if args.volatility_check:
        for name in args.series:
            print(name, json.dumps(volatility_check(name, args.data, args.out, sources)), flush=True)
        return
    for name in args.series:
        rows = []
        try:
            if not args.score_only:  # the task (and any data file it needs) once per series
                task, config = task_of(name, args.data, args.out, sources, not args.no_lead_input,
                                       name in args.mirror)
            for seed in args.seeds:
                run_dir = Path(args.out) / name / f"seed{seed}"
                if not args.score_only:
                    train(task, config, run_dir, args.time_budget, args.extra.split(), seed)
                rows.append(score(run_dir))
                print(name, seed, json.dumps(rows[-1]), flush=True)
            table[name] = {"runs": rows, "summary": over_seeds(rows)}
        except (subprocess.CalledProcessError, OSError, ValueError, TaylorformerError) as exc:
            table[name] = {"error": str(exc).splitlines()[-1] if str(exc) else type(exc).__name__}
            print(name, json.dumps(table[name]), flush=True)
    print_table(table)
    (Path(args.out) / "series_baselines.json").write_text(json.dumps(table, indent=1))


def print_table(table):
    """The markdown table: per series the model's CRPS (mean over seeds ± its seed standard
    error), each baseline's, the model minus the best baseline (mean over seeds; per seed
    with its window standard error) and the lead-1 MAE."""
    print("| series | seeds (steps) | model | persistence | seasonal naive | ridge-ar "
          "| model minus the best baseline, per seed | lead-1 MAE model / persistence |")
    print("|---|---|---|---|---|---|---|---|")
    for name, entry in table.items():
        if "error" in entry:
            print(f"| {name} | not run: {entry['error']} | | | | | | |")
            continue
        row = entry["summary"]
        spread = "" if row["model_seed_stderr"] is None else f" ± {row['model_seed_stderr']:.2g}"
        base = row["baselines"]
        cell = lambda b: "-" if b not in base else f"{base[b]['crps']:.4g} ± {base[b]['crps_stderr']:.2g}"  # noqa: E731
        best = min(base, key=lambda b: base[b]["crps"])
        gaps = ", ".join(f"{m:+.3g} ± {e:.2g}" for m, e in base[best]["gap_per_seed"])
        print(f"| {name} | {row['seeds']} ({', '.join(map(str, row['steps']))}) | {row['model_mean']:.4g}{spread} "
              f"| {cell('persistence')} | {cell('seasonal-naive')} | {cell('ridge-ar')} | {best}: {gaps} "
              f"| {row['lead1_mae']['model']:.4g} / {row['lead1_mae']['persistence']:.4g} |")


if __name__ == "__main__":
    main()
