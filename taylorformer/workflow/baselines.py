"""Baselines of the replication rows, scored on the same tasks or windows as the model.

Each baseline gives one value per evaluation task (float64 ``[n]``), in the row's metric,
so the row's value and its baseline are summarised the same way (:func:`summarise`):

* ``persistence`` (forecasting, :func:`forecast_values`): each target step is predicted
  by the true value one step earlier (the one-step, teacher-forced forecast the rows
  score); for the NLL a Gaussian whose variance is the mean squared one-step change
  ``mean((y_t - y_{t-1})^2)`` over the *training* rows (standardised units).
* ``seasonal-naive`` (forecasting on data with a season of ``s`` steps): the same with the
  value ``s`` steps earlier and the training rows' mean squared ``s``-step change.
* ``exact-gp`` (GP tasks): the exact GP predictive under the task's true hyperparameters
  (the batch's ``gt_loglik_joint`` for autoregressive models, scored teacher-forced as a
  joint density, and ``gt_loglik`` otherwise): a ceiling, not a baseline to beat.
* ``context-frequency`` (SIR): each target cell's state drawn from the frequencies of the
  three states among the task's context cells, with add-one smoothing.
* ``context-mean`` (any task with Gaussian outputs and no GP behind it: images, station
  data; :class:`ContextMean`): every target value of a task predicted by a Gaussian per
  output (channel), with the mean and the standard deviation of that output's observed
  context values, scored by the model's own metric function on the model's evaluation
  tasks. The standard deviation is floored (a context of one colour, e.g. a few black
  pixels, has none); the floor is the one of :data:`CONTEXT_MEAN_FLOORS` that scores best on
  the first tasks of the *validation* split (:func:`fit_context_mean_floor`), never the test.

Error bars (:func:`summarise`): tasks drawn independently get the standard error of the
mean (``iid``); forecasting windows taken at a stride below their length overlap, so
their values are dependent and get the batch-means standard error over blocks of
consecutive windows as long as one window (``batch means``, :func:`block_stderr`).
"""
import math

import numpy as np

from taylorformer.errors import TaskError

#: baseline name -> what it is
BASELINES = {
    "persistence": "the last observed value (one step earlier); NLL: a Gaussian with the training "
                   "rows' mean squared one-step change as its variance",
    "seasonal-naive": "the value one season earlier; NLL: a Gaussian with the training rows' mean "
                      "squared seasonal change as its variance",
    "exact-gp": "the exact GP predictive under the task's true hyperparameters (a ceiling)",
    "context-frequency": "each target's state from its context's state frequencies (add-one smoothing)",
    "context-mean": "a Gaussian per task and output with the observed context values' mean and standard "
                    "deviation (floored)",
}
#: candidate least standard deviations of the ``context-mean`` Gaussian, in the task's output units
CONTEXT_MEAN_FLOORS = (0.003, 0.01, 0.03, 0.1, 0.3)
#: validation tasks the floor is chosen on
CONTEXT_MEAN_FIT_TASKS = 64
_LOG_2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------- error bars
def iid_stderr(values):
    """Standard error of the mean of independent ``values`` (NaN for fewer than two)."""
    values = np.asarray(values, np.float64)
    return float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else float("nan")


def block_stderr(values, block):
    """Batch-means standard error of the mean of the dependent series ``values [n]``.

    The first ``b * block`` values (``b = n // block`` blocks of ``block`` consecutive
    values) are averaged per block; the result is the standard deviation of the block
    means over ``sqrt(b)``. Values more than ``block`` apart must be (nearly) independent:
    for forecasting windows, ``block`` is the number of windows one window overlaps. NaN
    for fewer than two blocks; ``block = 1`` is :func:`iid_stderr`.
    """
    values = np.asarray(values, np.float64)
    block = int(block)
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    count = values.size // block
    if count < 2:
        return float("nan")
    means = values[:count * block].reshape(count, block).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(count))


def overlap_block(task):
    """Windows of ``task`` one evaluation window overlaps (its block for :func:`block_stderr`):
    ``ceil((context + horizon) / eval_stride)`` for a forecasting task, 1 otherwise."""
    if not hasattr(task, "window_starts"):
        return 1
    return math.ceil((task.context_length + task.horizon) / task.eval_stride)


def summarise(values, block=1):
    """``(mean, stderr, stderr_method)`` of per-task ``values``: iid for ``block == 1``,
    else :func:`block_stderr` (named with its block length)."""
    values = np.asarray(values, np.float64)
    if block <= 1:
        return float(values.mean()), iid_stderr(values), "iid"
    method = f"batch means, blocks of {block} consecutive windows"
    if values.size < 2 * block:  # the windows hold fewer than two independent blocks
        method += f" ({values.size} windows: fewer than two blocks, no error bar)"
    return float(values.mean()), block_stderr(values, block), method


# ----------------------------------------------------------------------------- forecasting
def forecast_values(task, metric, split="test", lag=1, num_tasks=None):
    """Per-window ``metric`` (``"mse"`` or ``"nll"``) of the lag-``lag`` naive forecast
    (``lag = 1``: persistence; the season: seasonal naive) on the windows of ``split`` of
    the forecasting ``task`` (:class:`taylorformer.tasks.csv_series.CSVSeriesTask`), in its
    standardised units, teacher-forced: target row ``t`` is predicted by the true value of
    row ``t - lag``. ``[n]`` float64 over the first ``num_tasks`` windows with an observed
    target; per window the mean over observed target values (MSE: mean over outputs too;
    NLL: per target step, summed over outputs). The NLL's variance per output is the mean
    squared ``lag``-step change over the training rows.
    """
    if metric not in ("mse", "nll"):
        raise TaskError(f"forecast baselines score 'mse' or 'nll', not {metric!r}")
    if not 1 <= lag <= task.context_length:
        raise TaskError(f"lag {lag} must be in [1, context_length = {task.context_length}]")
    y = np.asarray(task.scaled, np.float64)                     # [N, Dy]
    lo, hi = task.split_bounds["train"]
    change = y[lo + lag:hi] - y[lo:hi - lag]
    variance = np.nanmean(change ** 2, axis=0)                  # [Dy]
    starts = task.window_starts(split)
    if num_tasks is not None:
        starts = starts[:num_tasks]
    rows = starts[:, None] + task.context_length + np.arange(task.horizon)[None]   # [n, H]
    truth, guess = y[rows], y[rows - lag]                       # [n, H, Dy]
    error = truth - guess
    observed = ~np.isnan(error)
    if metric == "mse":
        per_step = np.where(observed, error ** 2, 0.0).sum(-1) / np.maximum(observed.sum(-1), 1)
    else:
        nll = 0.5 * (_LOG_2PI + np.log(variance) + error ** 2 / variance)
        per_step = np.where(observed, nll, 0.0).sum(-1)
    step_seen = observed.any(-1)                                # [n, H]
    seen = step_seen.any(-1)
    values = (per_step * step_seen).sum(-1) / np.maximum(step_seen.sum(-1), 1)
    return values[seen]


# ----------------------------------------------------------------------------- task batches
def task_batches(task, split, batch_size, num_tasks):
    """The evaluation's batches: those :func:`taylorformer_replication.replication.task_values` scores
    (``batch_size`` at a time, ``num_tasks`` in all; None: the whole split)."""
    if num_tasks is not None:
        batch_size = min(batch_size, num_tasks)
    num_batches = None if num_tasks is None else math.ceil(num_tasks / batch_size)
    return task.dataset(split, batch_size=batch_size, num_batches=num_batches)


def exact_gp_values(task, split, batch_size, num_tasks, joint):
    """Per-task exact GP log-likelihood per target point (``[n]``, the batches'
    ``gt_loglik_joint`` when ``joint`` else ``gt_loglik``) of the evaluation's tasks."""
    key = "gt_loglik_joint" if joint else "gt_loglik"
    values = []
    for batch in task_batches(task, split, batch_size, num_tasks):
        if key not in batch:
            raise TaskError(f"task {task.name!r} carries no exact GP log-likelihood ({key})")
        values.append(np.asarray(batch[key], np.float64))
    values = np.concatenate(values)
    return values if num_tasks is None else values[:num_tasks]


def context_frequency_values(task, split, batch_size, num_tasks, classes=3, smoothing=1.0):
    """Per-task categorical NLL per target point (``[n]``) of predicting every target's
    class by the smoothed class frequencies of the task's context:
    ``p_k = (count_k + smoothing) / (Nc + classes * smoothing)``."""
    values = []
    for batch in task_batches(task, split, batch_size, num_tasks):
        yc = np.asarray(batch["yc"])[..., 0].astype(int)
        yt = np.asarray(batch["yt"])[..., 0].astype(int)
        mc, mt = np.asarray(batch["mask_c"]) > 0.5, np.asarray(batch["mask_t"]) > 0.5
        counts = np.stack([((yc == k) & mc).sum(1) for k in range(classes)], -1)     # [B, K]
        prob = (counts + smoothing) / (mc.sum(1, keepdims=True) + classes * smoothing)
        nll = -np.log(np.take_along_axis(prob, np.clip(yt, 0, classes - 1), axis=1))  # [B, Nt]
        values.append(np.where(mt, nll, 0.0).sum(1) / np.maximum(mt.sum(1), 1))
    values = np.concatenate(values)
    return values if num_tasks is None else values[:num_tasks]


# ----------------------------------------------------------------------------- images
class ContextMean:
    """The ``context-mean`` baseline as a model: :meth:`distribution` of a batch is a
    Gaussian that predicts every target point of task ``b`` and output ``d`` by the mean
    and the (population) standard deviation of the task's observed context values
    ``yc[b, :, d]`` (a missing value, NaN, is not observed), the standard deviation floored
    at ``floor``; an output with no observed context value gets ``N(0, 1)``. It ignores the
    inputs, so :func:`taylorformer_replication.replication.metric_function` scores it like any model
    (the same log-likelihood per target point over its observed outputs, teacher forcing
    does not apply)."""

    causal = False

    def __init__(self, floor):
        if not (isinstance(floor, (int, float)) and math.isfinite(floor) and floor > 0):
            raise ValueError(f"context-mean floor must be a positive number, got {floor!r}")
        self.floor = float(floor)

    def distribution(self, batch, training=False):
        """``tfd.Normal`` of ``batch["yt"]``'s shape ``[B, Nt, Dy]`` (float32)."""
        import tensorflow as tf
        import tensorflow_probability as tfp

        from taylorformer.batch import with_masks

        batch = with_masks(batch)
        observed = tf.cast(batch["observed_c"], tf.float64)                          # [B, Nc, Dy]
        yc = tf.cast(batch["yc"], tf.float64) * observed
        seen = tf.reduce_sum(observed, 1, keepdims=True)                            # [B, 1, Dy]
        count = tf.maximum(seen, 1.0)
        mean = tf.reduce_sum(yc, 1, keepdims=True) / count
        var = tf.reduce_sum(observed * (yc - mean) ** 2, 1, keepdims=True) / count
        scale = tf.where(seen > 0, tf.maximum(tf.sqrt(var), self.floor), 1.0)
        shape = tf.shape(batch["yt"])
        return tfp.distributions.Normal(tf.cast(tf.broadcast_to(mean, shape), tf.float32),
                                        tf.cast(tf.broadcast_to(scale, shape), tf.float32))


def fit_context_mean_floor(task, metric, score, num_tasks=CONTEXT_MEAN_FIT_TASKS, floors=CONTEXT_MEAN_FLOORS):
    """The floor of :data:`CONTEXT_MEAN_FLOORS` whose :class:`ContextMean` scores best in
    ``metric`` on the first ``num_tasks`` tasks of ``task``'s validation split;
    ``score(model, task, metric, split, num_tasks)`` gives the per-task values (the models'
    scorer, :func:`taylorformer_replication.replication.task_values`)."""
    sign = -1.0 if metric in ("nll", "mse") else 1.0
    means = [sign * float(np.mean(score(ContextMean(f), task, metric, "val", num_tasks))) for f in floors]
    return floors[int(np.argmax(means))]
