"""The figure of docs/replication.md (the `--time-budget` runs): validation
log-likelihood per point against training step of `replicate` runs, one line per run.

Each run directory's `metrics.csv` (written by training every `val_every` steps) gives the
curve and its standard error; the marker is the best validation step, the checkpoint a
paper-budget row is scored at. With `--persistence` (forecasting runs) the dashed line is
one-step persistence (`taylorformer.workflow.baselines.forecast_values`) on the same
validation windows, the first `val_batches x batch_size` of the split. The y axis is
symmetric-log: a collapsing run (TNP-A on the exchange rate reaches about -560 per point)
and the +1..+2 of a good one fit on one axis.

    python docs/figures/replication_curves.py RUN_DIR... [--persistence]
        [--out docs/figures/exchange-rate-runs.png]
"""
import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def read_curve(run_dir):
    """``(label, metrics)``: the run directory's name and its validation rows (`step`,
    `val_loglik`, `val_loglik_stderr`)."""
    run_dir = Path(run_dir)
    metrics = pd.read_csv(run_dir / "metrics.csv").dropna(subset=["val_loglik"])
    if metrics.empty:
        raise SystemExit(f"error: {run_dir / 'metrics.csv'} has no validation rows")
    return run_dir.name, metrics


def persistence_loglik(run_dir):
    """Mean log-likelihood per point of one-step persistence on the validation windows the
    run's training scores (its `config.json`: task, `val_batches`, `batch_size`)."""
    from taylorformer.task import make_task
    from taylorformer.workflow.baselines import forecast_values

    config = json.loads((Path(run_dir) / "config.json").read_text())
    task = make_task(config["task"], config["task_config"])
    windows = config["train"]["val_batches"] * config["train"]["batch_size"]
    return -forecast_values(task, "nll", "val", num_tasks=windows).mean(), windows


def plot_curves(curves, ax):
    """One line per ``(label, metrics)`` with a band of +-2 standard errors and the best step
    marked."""
    for label, metrics in curves:
        step, value = metrics["step"], metrics["val_loglik"]
        error = 2 * metrics["val_loglik_stderr"].fillna(0)
        line, = ax.plot(step, value, lw=1, label=label)
        ax.fill_between(step, value - error, value + error, color=line.get_color(), alpha=0.25, lw=0)
        best = metrics.loc[value.idxmax()]
        ax.plot(best["step"], best["val_loglik"], "o", color=line.get_color(),
                label=f"best: {best['val_loglik']:.3f} at step {int(best['step']):,}")
    ax.set_yscale("symlog", linthresh=2)
    ax.axhline(0, color="0.7", lw=0.5)
    ax.set_xlabel("training step")
    ax.set_ylabel("validation log-likelihood per point (symlog)")
    ax.legend(fontsize=8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="replicate run directories (each with metrics.csv)")
    parser.add_argument("--persistence", action="store_true",
                        help="draw one-step persistence on the first run's validation windows")
    parser.add_argument("--out", default="docs/figures/exchange-rate-runs.png")
    parser.add_argument("--title", default="Exchange rate, horizon 96, paper budget (40K steps)")
    args = parser.parse_args()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    plot_curves([read_curve(run) for run in args.runs], ax)
    if args.persistence:
        value, windows = persistence_loglik(args.runs[0])
        ax.axhline(value, color="k", ls="--", lw=1,
                   label=f"persistence: {value:.3f} ({windows} validation windows)")
        ax.legend(fontsize=8)
    ax.set_title(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
