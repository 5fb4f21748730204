"""Does a forecaster beat persistence? The paired comparison for the exchange-rate
replication runs (docs/replication.md; results: benchmarks/experiments/README.md).

The rows' status compares our mean with the baseline's as two independent numbers, each
with its own block error bar. Both are scored on the same windows, so the difference per
window is far less noisy than either score: this script scores a run's model with the
rows' scorer (:func:`taylorformer_replication.replication.task_values`, one step ahead, teacher-forced)
and one-step persistence (:func:`taylorformer.workflow.baselines.forecast_values`) on
every window of a split, and reports the mean of ``model - persistence`` per window with
its batch-means standard error over blocks of one window's length (the windows overlap).
Usage (the exchange-rate data found through ``TAYLORFORMER_DATA_MIRROR`` where there is
no network)::

    python benchmarks/experiments/paired_persistence.py RUN_DIR [RUN_DIR ...] \
        [--checkpoint best|checkpoints/step-N] [--split test] [--metric nll]

``--checkpoint`` a ``checkpoints/step-N`` directory scores that step's weights (loaded into
the architecture of ``best.keras``).
"""
import argparse
import os

import tensorflow as tf

from taylorformer.workflow.baselines import block_stderr, forecast_values, overlap_block
from taylorformer.workflow.runs import load_run
from taylorformer_replication.replication import task_values


def paired_gap(run_dir, checkpoint="best", split="test", metric="nll"):
    """``{name: (mean, block stderr)}`` for ``model``, ``persistence`` and ``model -
    persistence`` over every window of ``split``."""
    model, task, _ = load_run(run_dir, "best")
    if checkpoint != "best":
        tf.train.Checkpoint(model=model).read(os.path.join(run_dir, checkpoint, "ckpt")).expect_partial()
    ours = task_values(model, task, metric, split, batch_size=32)
    persistence = forecast_values(task, metric, split)
    if ours.shape != persistence.shape:
        raise SystemExit(f"error: {run_dir}: {ours.size} model windows, {persistence.size} persistence windows")
    block = overlap_block(task)
    return {name: (float(v.mean()), block_stderr(v, block))
            for name, v in (("model", ours), ("persistence", persistence), ("model - persistence", ours - persistence))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--split", default="test")
    parser.add_argument("--metric", default="nll", choices=("nll", "mse"))
    args = parser.parse_args()
    for run in args.runs:
        print(f"{run} [{args.checkpoint}], {args.metric} on every {args.split} window "
              "(mean +- batch-means standard error):")
        for name, (mean, se) in paired_gap(run, args.checkpoint, args.split, args.metric).items():
            print(f"  {name:20s} {mean:+.5f} +- {se:.5f}")


if __name__ == "__main__":
    main()
