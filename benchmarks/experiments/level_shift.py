"""Does a forecaster's validation score depend on the series' level? A measurement for the
exchange-rate replication runs (docs/replication.md).

The exchange-rate task z-scores the series with the training split's statistics (the
paper's protocol). The rates drift: the validation windows' context means lie at z-scores
the training windows never reach. This script scores a run's model on the validation (or
test) windows twice, teacher-forced one step as the replication rows are (log-likelihood and
squared error of the predictive mean, per target point):

* ``as is``: the windows as the task gives them;
* ``level-shifted``: each window (context and targets) minus its context mean in z-units,
  plus the training windows' median context mean, so that every window sits at a level
  seen in training. A shift of y changes no log-density Jacobian, so the two log-
  likelihoods are comparable: a model that forecasts changes, not levels, scores the same
  (the squared error too: the shift is undone on the mean and the target alike).

A gap between the two is the part of the score that comes from the level the model has
never seen. Usage (the exchange-rate data found through ``TAYLORFORMER_DATA_MIRROR`` where
there is no network)::

    python benchmarks/experiments/level_shift.py RUN_DIR [RUN_DIR ...] \
        [--checkpoint best|STEP_DIR] [--split val] [--windows 64]

``--checkpoint`` a ``checkpoints/step-N`` directory of the run scores that step's weights
(loaded into the architecture of ``best.keras``).
"""
import argparse
import os

import numpy as np
import tensorflow as tf

from taylorformer.workflow.evaluation import batch_metrics
from taylorformer.workflow.runs import load_run


def context_means(task, starts):
    """``[n]`` mean z-scored context value of the windows starting at ``starts``."""
    c = task.context_length
    return np.array([task.scaled[s:s + c, 0].mean() for s in starts])


def shifted(batch, shift):
    """``batch`` with ``yc`` and ``yt`` minus ``shift [B]`` (z-units)."""
    s = tf.constant(shift, tf.float32)[:, None, None]
    return {**batch, "yc": batch["yc"] - s, "yt": batch["yt"] - s}


def load_weights(model, run_dir, checkpoint):
    """Restore ``run_dir/checkpoint/ckpt`` (a training checkpoint) into ``model``."""
    path = os.path.join(run_dir, checkpoint, "ckpt")
    tf.train.Checkpoint(model=model).read(path).expect_partial()


def score(run_dir, checkpoint, split, num_windows, batch_size=32):
    model, task, _ = load_run(run_dir, "best")
    if checkpoint != "best":
        load_weights(model, run_dir, checkpoint)
    starts = task.window_starts(split)
    starts = starts[np.linspace(0, len(starts) - 1, min(num_windows, len(starts))).astype(int)]
    train_levels = context_means(task, task.window_starts("train"))
    train_level = np.median(train_levels)
    levels = context_means(task, starts)
    # per variant: loglik [B] and squared error [B * Nt] of each batch
    out = {name: {"loglik": [], "sq_err": []} for name in ("as is", "level-shifted")}
    for i in range(0, len(starts), batch_size):
        batch = task.batch(starts[i:i + batch_size])
        shift = levels[i:i + batch_size] - train_level
        for name, b in (("as is", batch), ("level-shifted", shifted(batch, shift))):
            metrics = batch_metrics(model, b)
            for key, values in out[name].items():
                values.append(metrics[key])
    print(f"{run_dir} [{checkpoint}], {len(starts)} {split} windows: context-mean z "
          f"{levels.min():.2f}..{levels.max():.2f} (training windows {train_levels.min():.2f}.."
          f"{train_levels.max():.2f}, median {train_level:.2f})")
    for name, values in out.items():
        v = np.concatenate(values["loglik"])
        print(f"  {name:14s} loglik per point: mean {v.mean():9.3f}  median {np.median(v):9.3f}  "
              f"min {v.min():9.3f}  mse {np.concatenate(values['sq_err']).mean():.6g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--split", default="val")
    parser.add_argument("--windows", type=int, default=64)
    args = parser.parse_args()
    for run in args.runs:
        score(run, args.checkpoint, args.split, args.windows)


if __name__ == "__main__":
    main()
