"""Predictive baselines beside every evaluation of a user's data, scored as the model is.

Each baseline maps a batch to a Gaussian predictive ``(mean, sd)`` ``[B, Nt, Dy]`` in the
model's units (the batch's) for every target point; the model's predictive and the
baselines' are scored by the same functions (:func:`gaussian_point_metrics`,
:class:`Comparison`) and mapped to the data's units by the same normaliser, task by task
on the same tasks, so their differences are paired. (The replication's baselines,
:mod:`taylorformer.workflow.baselines`, give one published metric per task instead; their
error bars, :func:`summarise`, serve both.)

Forecasting tasks (a series cut into windows of ``C = context_length`` rows followed by
``H = horizon`` target rows; a task with ``scaled``, ``split_bounds`` and
``window_starts``, :class:`SeriesBaselines`, fitted on the training rows):

* ``persistence``: every lead predicted by the last observed context value; the sd at
  lead ``h = 1..H`` is the root mean square ``h``-step change over the training rows.
* ``seasonal-naive``: the value one season of ``s`` rows before, the last observed season
  repeated (lead ``h`` takes context row ``C - s + ((h - 1) mod s)``); the sd at lead
  ``h``: the rms change over ``s * ceil(h / s)`` rows in training. The season is the
  task's ``season`` where it has one, else the dates' step's (:func:`season_of`); the
  baseline is left out without one, or where it exceeds ``C``.
* ``ridge-ar``: per output, a linear regression of each lead on the last ``p = min(C,
  max(MIN_LAGS, s), MAX_LAGS)`` values and an intercept (direct multi-step: one
  regression per lead, sharing the lag matrix, so no forecast is fed back), fitted in
  closed form with a ridge penalty ``RIDGE`` (not on the intercept) on the training
  windows; the sd per lead: the rms training residual.

Every other task (sets of points, stations, gridded fields, images, GP tasks; GP tasks
also keep the exact GP ceiling of the evaluation):

* ``gp``: per task and output, a Gaussian process fitted to the task's observed context
  points by maximising the log marginal likelihood (kriging): constant mean (its
  generalised least squares estimate), Matern-5/2 kernel with one lengthscale per input,
  signal and noise variances (the noise at least :data:`GP_NOISE_FLOOR` of the context's
  variance); L-BFGS-B on the log-parameters with the analytic gradient from
  :data:`GP_RESTARTS` starts. Its posterior predictive (noise included) at the targets.
* ``idw``: inverse-distance weighting (power 2) of the observed context values (a target
  at a context point takes the mean of the points there); the sd: the rms
  leave-one-out residual of the same weighting over the context.

Inputs: ``x`` with the feature groups ``sc``/``tc`` (``st``/``tt`` for targets) where a
task has them, columns repeated across them counted once (:func:`point_inputs`); ``idw``
uses the space group alone where there is one. Missing values (NaN) are never used as
context nor scored; a series' missing context value is carried forward (the training
mean, 0, before the first).

Work is bounded: a GP sees at most :data:`MAX_GP_CONTEXT` context points per task and
output (the last observed ones: the latest where a context is in time order, as a
station task's), the ridge fit at most :data:`MAX_FIT_WINDOWS` training windows (evenly
spaced), and :func:`task_limit` caps the tasks a comparison with a GP covers.
"""
import math

import numpy as np
from scipy import linalg

from taylorformer.prediction.calibration import ensemble_crps, gaussian_crps
from taylorformer.tasks.gaussian_process import fit_gp_prior, kernel_matrix, kriging_predictive, negative_log_marginal
from taylorformer.workflow.baselines import overlap_block, summarise

#: baseline name -> what it predicts (the evaluation JSON's ``baselines`` keys)
PREDICTIVE_BASELINES = {
    "persistence": "the last observed context value; sd per lead: rms h-step change in training",
    "seasonal-naive": "the value one season earlier; sd per lead: rms seasonal change in training",
    "ridge-ar": "ridge regression of each lead on the last p values (direct), fitted on the training rows",
    "gp": "a Matern-5/2 GP fitted to each task's context by maximum marginal likelihood (kriging)",
    "idw": "inverse-distance weighting (power 2) of the context; sd: leave-one-out residuals",
}
#: lags of ``ridge-ar``: ``min(context_length, max(MIN_LAGS, season))``, at most ``MAX_LAGS``
MIN_LAGS, MAX_LAGS = 16, 168
#: ridge penalty of ``ridge-ar`` on the lag weights (standardised units, summed squares)
RIDGE = 1.0
#: training windows the ridge fit and the series spreads use at most
MAX_FIT_WINDOWS = 5000
#: context points per task and output a ``gp`` is fitted to, at most
MAX_GP_CONTEXT = 100
#: starts of the marginal-likelihood search (lengthscale multipliers of the first guess)
GP_RESTARTS = (1.0, 0.3, 3.0)
#: iterations of each L-BFGS-B search, and the jitter added to the kernel's diagonal
GP_MAXITER, GP_JITTER = 50, 1e-8
#: least noise variance of a ``gp``, as a share of its context values' variance: maximum
#: likelihood on a few points otherwise interpolates them without noise, overconfidently
GP_NOISE_FLOOR = 1e-2
#: tasks a comparison with a GP baseline covers by default (the first ones)
MAX_GP_TASKS = 128
_DAY = 86400.0  # seconds
_Z95 = 1.959963984540054
_LOG_2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------- scores
def gaussian_point_metrics(mean, sd, y):
    """Per value of ``[B, Nt, Dy]`` (model units): ``crps``, ``error`` (mean - y), ``nll``
    (negative log density) and ``inside95`` (y in the central 95% interval) of
    ``N(mean, sd^2)``."""
    mean, sd, y = (np.asarray(a, np.float64) for a in (mean, sd, y))
    z = (y - mean) / sd
    return {"crps": gaussian_crps(y, mean, sd), "error": mean - y,
            "nll": 0.5 * (_LOG_2PI + z ** 2) + np.log(sd), "inside95": np.abs(z) <= _Z95}


def model_point_metrics(dist, yt, num_samples=128, seed=0):
    """:func:`gaussian_point_metrics` of a model's predictive ``dist`` (a per-value
    distribution of ``yt [B, Nt, Dy]``'s shape): closed form for a Normal; for another
    continuous one, its mean, log density and CDF, and the CRPS of ``num_samples`` draws."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    yt = np.asarray(yt, np.float64)
    if isinstance(dist, tfp.distributions.Normal):
        return gaussian_point_metrics(dist.mean().numpy(), dist.stddev().numpy(), yt)
    y32 = tf.constant(yt, tf.float32)
    cdf = dist.cdf(y32).numpy()
    draws = dist.sample(num_samples, seed=seed).numpy()
    return {"crps": ensemble_crps(draws, yt, fair=False), "error": dist.mean().numpy().astype(np.float64) - yt,
            "nll": -dist.log_prob(y32).numpy().astype(np.float64),
            "inside95": (cdf >= 0.025) & (cdf <= 0.975)}


def sample_point_metrics(samples, yt):
    """:func:`gaussian_point_metrics` of a model's multi-step forecast paths ``samples [S >= 2,
    B, Nt, Dy]`` at ``yt [B, Nt, Dy]``: the samples' fair CRPS (unbiased for the paths'
    distribution, as the baselines' closed-form CRPS is for theirs), mean and central 95%
    interval (their 2.5% and 97.5% quantiles), and the log density of the Gaussian with
    their mean and standard deviation."""
    samples, yt = np.asarray(samples, np.float64), np.asarray(yt, np.float64)
    mean, sd = samples.mean(0), np.maximum(samples.std(0, ddof=1), GP_JITTER)
    lo, hi = np.quantile(samples, [0.025, 0.975], axis=0)
    return {"crps": ensemble_crps(samples, yt, fair=True), "error": mean - yt,
            "nll": gaussian_point_metrics(mean, sd, yt)["nll"], "inside95": (yt >= lo) & (yt <= hi)}


# ----------------------------------------------------------------------------- series
def season_of(task):
    """Rows per season of a series task: its ``season`` attribute where set, else from the
    median step of its ``dates``: a day's rows for a step within a day (hourly 24, 15-min
    96), 7 for daily, 52 for weekly, 12 for monthly, 4 for quarterly data; None otherwise."""
    season = getattr(task, "season", None)
    if season:
        return int(season)
    dates = getattr(task, "dates", None)
    if dates is None or len(dates) < 2:
        return None
    step = float(np.median(np.diff(np.asarray(dates, "datetime64[s]")).astype(np.float64)))
    if 0 < step < _DAY and (_DAY / step).is_integer():
        return int(_DAY / step)
    for days, season in ((1, 7), (7, 52), (30.4, 12), (91.3, 4)):
        if abs(step / _DAY - days) <= 0.1 * days:
            return season
    return None


def carried_forward(values):
    """``values [B, C, Dy]`` (NaN: missing) with each missing value replaced by the last
    observed one before it, and 0 (the training mean) before the first."""
    values = np.asarray(values, np.float64)
    seen = ~np.isnan(values)
    index = np.where(seen, np.arange(values.shape[1])[None, :, None], -1)
    index = np.maximum.accumulate(index, axis=1)
    filled = np.take_along_axis(values, np.maximum(index, 0), axis=1)
    return np.where(index >= 0, filled, 0.0)


def change_sd(y, lags):
    """``[len(lags), Dy]`` root mean square change ``y[t + lag] - y[t]`` of the series
    ``y [N, Dy]`` (NaN: missing, left out) per lag; NaN where no pair is observed."""
    y = np.asarray(y, np.float64)
    out = np.full((len(lags), y.shape[1]), np.nan)
    for i, lag in enumerate(lags):
        if lag < len(y):
            change = y[lag:] - y[:-lag]
            seen = ~np.isnan(change)
            out[i] = np.sqrt((np.where(seen, change, 0.0) ** 2).sum(0) / np.maximum(seen.sum(0), 1))
            out[i][~seen.any(0)] = np.nan
    return out


def lag_windows(z, lags, horizon, max_windows=MAX_FIT_WINDOWS):
    """``(X [n, 1 + lags], Y [n, horizon])``: the training windows of the series ``z [N]``,
    a 1 (intercept) and ``lags`` consecutive values (oldest first), then the next
    ``horizon`` values; windows with a missing value are left out, at most
    ``max_windows`` of them, evenly spaced."""
    z = np.asarray(z, np.float64)
    if len(z) < lags + horizon:
        return np.zeros((0, 1 + lags)), np.zeros((0, horizon))
    windows = np.lib.stride_tricks.sliding_window_view(z, lags + horizon)
    windows = windows[~np.isnan(windows).any(1)]
    if len(windows) > max_windows:
        windows = windows[np.linspace(0, len(windows) - 1, max_windows).round().astype(int)]
    return np.concatenate([np.ones((len(windows), 1)), windows[:, :lags]], 1), windows[:, lags:]


def ridge_fit(x, y, ridge=RIDGE):
    """``W [1 + p, H]`` minimising ``|Y - X W|^2 + ridge |W[1:]|^2`` (the intercept, column
    0 of ``X [n, 1 + p]``, unpenalised): ``(X'X + ridge D)^-1 X'Y``, D = diag(0, 1, ..., 1)."""
    penalty = ridge * np.eye(x.shape[1])
    penalty[0, 0] = 0.0
    return linalg.solve(x.T @ x + penalty, x.T @ y, assume_a="pos")


class SeriesBaselines:
    """``persistence``, ``seasonal-naive`` and ``ridge-ar`` of a forecasting task, fitted on
    its training rows (``task.scaled [N, Dy]`` between ``task.split_bounds["train"]``).
    :meth:`predict` gives each one's ``(mean, sd)`` ``[B, H, Dy]`` from a batch's context."""

    def __init__(self, task, season=None, lags=None, ridge=RIDGE):
        lo, hi = task.split_bounds["train"]
        train = np.asarray(task.scaled, np.float64)[lo:hi]
        c, h = task.context_length, task.horizon
        self.horizon = h
        self.season = season_of(task) if season is None else int(season)
        if self.season is not None and not 1 <= self.season <= c:
            self.season = None  # a season longer than the context has no value to repeat
        self.lags = lags or min(c, MAX_LAGS, max(MIN_LAGS, self.season or 0))
        leads = np.arange(1, h + 1)
        self.persistence_sd = _spread(change_sd(train, leads))
        if self.season is not None:
            self.seasonal_sd = _spread(change_sd(train, self.season * np.ceil(leads / self.season).astype(int)))
        self.weights, self.ar_sd = [], []  # per output: [1 + p, H], [H]
        for j in range(train.shape[1]):
            x, y = lag_windows(train[:, j], self.lags, h)
            if len(x) <= x.shape[1]:
                self.weights = None  # too few complete training windows for the regression
                break
            w = ridge_fit(x, y, ridge)
            self.weights.append(w)
            self.ar_sd.append(np.sqrt(((y - x @ w) ** 2).sum(0) / (len(x) - x.shape[1])))
        if self.weights is not None:
            self.ar_sd = _spread(np.stack(self.ar_sd, -1))

    @property
    def names(self):
        return (["persistence"] + (["seasonal-naive"] if self.season is not None else [])
                + (["ridge-ar"] if self.weights is not None else []))

    def predict(self, yc):
        """``{name: (mean, sd)}`` ``[B, H, Dy]`` from the context values ``yc [B, C, Dy]``
        (NaN: missing), in the task's standardised units."""
        filled = carried_forward(yc)
        b, c, dy = filled.shape
        shape = (b, self.horizon, dy)
        out = {"persistence": (np.broadcast_to(filled[:, -1:], shape), np.broadcast_to(self.persistence_sd, shape))}
        if self.season is not None:
            rows = c - self.season + np.arange(self.horizon) % self.season
            out["seasonal-naive"] = (filled[:, rows], np.broadcast_to(self.seasonal_sd, shape))
        if self.weights is not None:
            lags = np.concatenate([np.ones((b, 1, dy)), filled[:, c - self.lags:]], 1)   # [B, 1 + p, Dy]
            mean = np.stack([lags[:, :, j] @ w for j, w in enumerate(self.weights)], -1)  # [B, H, Dy]
            out["ridge-ar"] = (mean, np.broadcast_to(self.ar_sd, shape))
        return out


def _spread(sd):
    """``sd [H, Dy]`` with a missing (NaN) or zero spread replaced by sqrt(2), the spread
    of the change between two independent standardised values."""
    return np.where(np.isfinite(sd) & (sd > 0), sd, math.sqrt(2.0))


# ----------------------------------------------------------------------------- points
def matern52(x1, x2, lengthscales, variance):
    """Matern-5/2 kernel ``[n1, n2]`` of ``x1 [n1, D]``, ``x2 [n2, D]``:
    ``s^2 (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)``, ``r^2 = sum_d ((x1_d - x2_d) / l_d)^2``
    (:func:`taylorformer.tasks.gaussian_process.kernel_matrix`)."""
    return kernel_matrix("matern52", x1, x2, np.asarray(lengthscales, np.float64), math.sqrt(variance))


def gp_objective(log_params, x, y):
    """``(negative log marginal likelihood, gradient)`` of ``y [n]`` at ``x [n, D]`` under a
    GP with log-parameters ``[log l_1..l_D, log s^2, log noise^2]`` and a constant mean at
    its GLS estimate (:func:`taylorformer.tasks.gaussian_process.negative_log_marginal`,
    Matern-5/2)."""
    return negative_log_marginal(log_params, x, y, "matern52")


def fit_gp(x, y, restarts=GP_RESTARTS, maxiter=GP_MAXITER):
    """``(lengthscales [D], signal variance, noise variance)`` of a Matern-5/2 GP maximising
    the marginal likelihood of ``y [n]`` at ``x [n, D]``
    (:func:`taylorformer.tasks.gaussian_process.fit_gp_prior`, one lengthscale per input,
    the noise variance at least :data:`GP_NOISE_FLOOR` ``var(y)``)."""
    prior = fit_gp_prior(x, y, "matern52", per_input=True, noise_floor=GP_NOISE_FLOOR, restarts=restarts,
                         maxiter=maxiter)
    return prior["lengthscale"], prior["variance"], prior["noise_variance"]


def gp_predict(x, y, xq, lengthscales, variance, noise):
    """``(mean, sd)`` ``[m]`` of the GP posterior predictive of a new observation (noise
    included) at ``xq [m, D]`` given ``y [n]`` at ``x [n, D]``, with the constant mean at
    its GLS estimate (:func:`taylorformer.tasks.gaussian_process.kriging_predictive`)."""
    return kriging_predictive(x, y, xq, {"kernel": "matern52", "lengthscale": lengthscales,
                                         "variance": variance, "noise_variance": noise})


def point_inputs(batch):
    """``(xc [B, Nc, D], xt [B, Nt, D])`` float64 inputs of the context and target points:
    ``x`` and the feature groups ``s``, ``t`` where present, a column equal to an earlier
    one on both sides left out."""
    sides = [np.concatenate([np.asarray(batch[key + side], np.float64) for key in ("x", "s", "t")
                             if key + side in batch], -1) for side in "ct"]
    keep = [j for j in range(sides[0].shape[-1])
            if not any(all(np.array_equal(x[..., j], x[..., i]) for x in sides) for i in range(j))]
    return tuple(x[..., keep] for x in sides)


def gp_baseline(xc, yc, xt, max_context=MAX_GP_CONTEXT):
    """``(mean, sd)`` ``[B, Nt, Dy]`` of ``gp``: per task and output a GP fitted
    (:func:`fit_gp`) to the last ``max_context`` observed context values of ``yc [B, Nc,
    Dy]`` (NaN: not observed) at ``xc [B, Nc, D]``, predicting at ``xt [B, Nt, D]``. With
    fewer than 3 observed values: their mean (0 with none) and sd 1."""
    b, nt, dy = xt.shape[0], xt.shape[1], yc.shape[-1]
    mean, sd = np.zeros((b, nt, dy)), np.ones((b, nt, dy))
    for i in range(b):
        for j in range(dy):
            seen = np.flatnonzero(~np.isnan(yc[i, :, j]))[-max_context:]
            if seen.size < 3:
                mean[i, :, j] = yc[i, seen, j].mean() if seen.size else 0.0
                continue
            x, y = xc[i, seen], yc[i, seen, j]
            mean[i, :, j], sd[i, :, j] = gp_predict(x, y, xt[i], *fit_gp(x, y))
    return mean, sd


def idw_baseline(xc, yc, xt, power=2.0):
    """``(mean, sd)`` ``[B, Nt, Dy]`` of ``idw``: weights ``1 / d^power`` over the observed
    context values of ``yc [B, Nc, Dy]`` (NaN: not observed) at ``xc [B, Nc, D]``; a target
    at a context point (``d = 0``) takes the mean of the values there. sd: the rms
    leave-one-out residual over the context; with fewer than 2 observed values, their mean
    (0 with none) and sd 1. One task at a time: the weights take ``[Nt, Nc, Dy]``."""
    parts = [_idw_task(xc[i:i + 1], yc[i:i + 1], xt[i:i + 1], power) for i in range(len(xc))]
    return tuple(np.concatenate(part, 0) for part in zip(*parts))


def _idw_task(xc, yc, xt, power):
    """:func:`idw_baseline` of a batch of one task (``[1, N, ...]``)."""
    seen = ~np.isnan(yc)                                                     # [B, Nc, Dy]
    values = np.where(seen, yc, 0.0)
    mean = _idw(xc, values, seen, xt, power)
    loo = _idw(xc, values, seen, xc, power, exclude=np.eye(xc.shape[1], dtype=bool)[None])
    res2 = np.where(seen, (loo - values) ** 2, 0.0)
    count = seen.sum(1)                                                      # [B, Dy]
    sd = np.sqrt(res2.sum(1) / np.maximum(count, 1))
    sd = np.where((count < 2) | ~(sd > 0), 1.0, sd)
    return mean, np.broadcast_to(sd[:, None], mean.shape).copy()


def _idw(xc, values, seen, xq, power, exclude=None):
    """IDW means ``[B, Nq, Dy]`` at ``xq [B, Nq, D]`` (:func:`idw_baseline`); ``exclude
    [1|B, Nq, Nc]`` True drops a context point for a query point (leave-one-out)."""
    d2 = ((xq[:, :, None] - xc[:, None]) ** 2).sum(-1)                       # [B, Nq, Nc]
    use = seen[:, None] if exclude is None else seen[:, None] & ~exclude[..., None]   # [B, Nq, Nc, Dy]
    at = (d2 <= 1e-24)[..., None] & use
    with np.errstate(divide="ignore"):
        w = np.where(use, np.power(np.maximum(d2, 1e-300), -power / 2.0)[..., None], 0.0)
    w = np.where(at.any(2, keepdims=True), at.astype(np.float64), w)
    total = w.sum(2)
    weighted = (w * values[:, None]).sum(2) / np.where(total > 0, total, 1.0)
    fallback = (values * seen).sum(1, keepdims=True) / np.maximum(seen.sum(1, keepdims=True), 1)
    return np.where(total > 0, weighted, fallback)


# ----------------------------------------------------------------------------- comparison
def is_series(task):
    """Whether ``task`` is a forecasting task :class:`SeriesBaselines` fits (a standardised
    series ``scaled`` with ``split_bounds``, cut into ``window_starts``)."""
    return all(hasattr(task, a) for a in ("scaled", "split_bounds", "window_starts", "context_length", "horizon"))


def task_limit(task):
    """Tasks a comparison covers (the first ones): every one for a series, at most
    :data:`MAX_GP_TASKS` where a GP is fitted per task."""
    return None if is_series(task) else MAX_GP_TASKS


class Comparison:
    """The model beside the predictive baselines of ``task``, on the same tasks, in the
    data's units (``normaliser``: :class:`taylorformer.normaliser.Normaliser`, or None:
    the model's units).

    :meth:`add` takes each evaluation batch with the model's predictive distribution of
    it; :meth:`result` gives the model's scores, each baseline's, the paired differences
    (model minus baseline, task by task, error bars by :func:`summarise` with the task's
    :func:`overlap_block`) and the verdict. The baselines see the first ``max_tasks``
    tasks with an observed target (None: all); the model's scores cover every task.
    ``teacher_forced``: the model's predictive of a target is given the true earlier
    targets (an autoregressive model's without samples), which the baselines' forecasts
    are not (the note and the verdict say so). ``baselines=False`` scores the model alone
    (:meth:`scores` of "model"). ``window_stride``: the tasks added are every
    ``window_stride``-th window of the split (an evaluation that samples spread-out
    windows), so fewer of them overlap (the error bars' block shrinks by that factor).
    """

    def __init__(self, task, normaliser=None, max_tasks="auto", season=None, teacher_forced=False,
                 baselines=True, window_stride=1):
        self.series = SeriesBaselines(task, season=season) if baselines and is_series(task) else None
        self.names = ([] if not baselines else self.series.names if self.series is not None else ["gp", "idw"])
        self.block = math.ceil(overlap_block(task) / window_stride)
        self.max_tasks = task_limit(task) if max_tasks == "auto" else max_tasks
        self.normaliser = normaliser
        self.records = {name: [] for name in ["model"] + self.names}
        self.discrete = None
        self.teacher_forced = teacher_forced
        self.sampled = False

    def add(self, batch, dist, samples=None):
        """Score the model's ``dist`` (its multi-step forecast paths ``samples [S, B, Nt,
        Dy]`` instead where given: :func:`sample_point_metrics`) and every baseline on
        ``batch`` (a task's batch; its NaN outputs are not observed)."""
        import tensorflow_probability as tfp

        from taylorformer.batch import with_masks

        if isinstance(dist, (tfp.distributions.Bernoulli, tfp.distributions.Categorical)):
            self.discrete = type(dist).__name__
            return
        batch = {k: np.asarray(v) for k, v in with_masks(batch).items()}
        observed = batch["observed_t"] > 0.5                                  # [B, Nt, Dy]
        self.sampled = samples is not None
        self._collect("model", model_point_metrics(dist, batch["yt"]) if samples is None
                      else sample_point_metrics(samples, batch["yt"]), observed)
        if not self.names:
            return
        seen = sum(int(r["tasks"]) for r in self.records[self.names[0]])
        room = len(observed) if self.max_tasks is None else self.max_tasks - seen
        keep = np.flatnonzero(observed.any((1, 2)))[:max(room, 0)]
        if not keep.size:
            return
        part = {k: v[keep] for k, v in batch.items() if np.ndim(v) and len(v) == len(observed)}
        yc = np.where(part["observed_c"] > 0.5, part["yc"], np.nan)
        if self.series is not None:
            predictions = self.series.predict(yc)
        else:
            xc, xt = point_inputs(part)
            space = ("sc", "st") if "sc" in part else ("xc", "xt")
            predictions = {"gp": gp_baseline(xc, yc, xt),
                           "idw": idw_baseline(np.asarray(part[space[0]], np.float64), yc,
                                               np.asarray(part[space[1]], np.float64))}
        for name in self.names:
            mean, sd = predictions[name]
            self._collect(name, gaussian_point_metrics(mean, sd, part["yt"]), observed[keep])

    def _collect(self, name, metrics, observed):
        """Keep the per-task and per-value scores of ``metrics`` (model units, ``[B, Nt,
        Dy]``) in the data's units, for the tasks with an observed target."""
        scale = np.ones(observed.shape[-1]) if self.normaliser is None else self.normaliser.y_scale
        crps, error = metrics["crps"] * scale, metrics["error"] * scale
        nll = metrics["nll"] + np.log(scale)
        points = observed.any(-1)                                             # [B, Nt]
        tasks = points.any(1)
        self.records[name].append({
            "tasks": tasks.sum(),
            "crps": ((crps * observed).sum((1, 2)) / np.maximum(observed.sum((1, 2)), 1))[tasks],
            "nll": ((nll * observed).sum((1, 2)) / np.maximum(points.sum(1), 1))[tasks],
            "inside95": (metrics["inside95"] | ~observed).all(-1)[points],
            "outputs": [(crps[..., j][observed[..., j]], error[..., j][observed[..., j]])
                        for j in range(observed.shape[-1])]})

    def _joined(self, name):
        records = self.records[name]
        crps = np.concatenate([r["crps"] for r in records])
        nll = np.concatenate([r["nll"] for r in records])
        inside = np.concatenate([r["inside95"] for r in records])
        outputs = [tuple(np.concatenate([r["outputs"][j][k] for r in records]) for k in range(2))
                   for j in range(len(records[0]["outputs"]))]
        return crps, nll, inside, outputs

    def scores(self, name):
        """``{crps, nll: {mean, stderr, n}, mae, rmse, coverage95, outputs: {label: {crps,
        mae, rmse, n}}}`` of ``name`` ("model" or a baseline) in the data's units: CRPS per
        task the mean over its observed values, NLL per task the mean over its target
        points of the summed negative log density of their observed outputs; mae, rmse
        over every observed value; coverage95 the share of target points whose observed
        outputs all lie in the central 95% interval."""
        crps, nll, inside, outputs = self._joined(name)
        errors = np.concatenate([e for _, e in outputs])
        labels = (self.normaliser.y_labels() if self.normaliser is not None
                  else [f"y{j}" for j in range(len(outputs))])
        return {"crps": self._mean(crps), "nll": self._mean(nll),
                "mae": float(np.abs(errors).mean()), "rmse": float(np.sqrt((errors ** 2).mean())),
                "coverage95": float(inside.mean()),
                "outputs": {label: {"crps": float(c.mean()) if c.size else None,
                                    "mae": float(np.abs(e).mean()) if e.size else None,
                                    "rmse": float(np.sqrt((e ** 2).mean())) if e.size else None, "n": int(e.size)}
                            for label, (c, e) in zip(labels, outputs)}}

    def _mean(self, values):
        mean, stderr, method = summarise(values, self.block)
        return {"mean": mean, "stderr": stderr, "n": int(values.size), "stderr_method": method}

    def paired(self, name):
        """``{crps, nll: {mean, stderr, n, stderr_method}}``: the model's per-task score minus
        baseline ``name``'s on the same tasks (negative: the model is better)."""
        base_crps, base_nll, _, _ = self._joined(name)
        model_crps, model_nll, _, _ = self._joined("model")
        n = base_crps.size
        return {"crps": self._mean(model_crps[:n] - base_crps), "nll": self._mean(model_nll[:n] - base_nll)}

    def unit(self):
        """The data's unit of the one output (empty without one, or with several)."""
        units = [] if self.normaliser is None else self.normaliser.y_units
        return units[0] if len(units) == 1 and units[0] else ""

    def result(self):
        """``{"baselines": {name: scores}, "paired": {name: gaps}, "verdict": text,
        "baseline_tasks": n, "baselines_note": text}`` (:meth:`scores`, :meth:`paired`,
        :func:`verdict`); without baselines (discrete outputs), ``baselines`` is empty and
        the verdict says why."""
        if self.discrete is not None or not self.records["model"]:
            why = (f"the model's outputs are discrete ({self.discrete})" if self.discrete
                   else "no batch was scored")
            return {"baselines": {}, "paired": {}, "verdict": f"No baseline compared: {why}."}
        baselines = {name: {"what": PREDICTIVE_BASELINES[name], **self.scores(name)} for name in self.names}
        paired = {name: self.paired(name) for name in self.names}
        model_crps = self._joined("model")[0]
        n = baselines[self.names[0]]["crps"]["n"]
        units = "the model's units (no normaliser)" if self.normaliser is None else "the data's units"
        note = (f"baselines in {units}, on the first {n} evaluation task(s) with an observed target; "
                "paired: the model's per-task score minus the baseline's (negative: the model is better)"
                + ("; the model's predictive is teacher-forced (each target given the true earlier "
                   "targets), the baselines forecast from the context alone" if self.teacher_forced else "")
                + ("; the model's scores are those of its sampled forecasts (nll: the Gaussian with "
                   "their mean and standard deviation)" if self.sampled else ""))
        return {"baselines": baselines, "paired": paired, "baseline_tasks": n, "baselines_note": note,
                "verdict": verdict(float(model_crps[:n].mean()),
                                   {k: v["crps"]["mean"] for k, v in baselines.items()},
                                   {k: v["crps"] for k, v in paired.items()}, self.unit(), n,
                                   "teacher-forced" if self.teacher_forced else "")}


def verdict(model_crps, baseline_crps, gaps, unit="", num_tasks=None, model_note="", item="task"):
    """One sentence naming the best method on CRPS and its margin: the model against the
    best baseline (lowest mean CRPS), the paired difference ``gaps[name]`` (``{mean,
    stderr}``, model minus baseline) with its standard error; a difference within two
    standard errors is a tie. ``model_note`` qualifies the model's CRPS (e.g.
    "teacher-forced"); ``item``: what the ``num_tasks`` scored units are called."""
    best = min(baseline_crps, key=baseline_crps.get)
    gap, stderr = gaps[best]["mean"], gaps[best]["stderr"]
    unit = f" {unit}" if unit else ""
    margin = f"{abs(gap):.3g}{unit}" + (f" (standard error {stderr:.2g})" if math.isfinite(stderr)
                                        else f" (no error bar: too few independent {item}s)")
    where = f" over {num_tasks} {item}{'s' * (num_tasks != 1)}" if num_tasks else ""
    note = f" ({model_note})" if model_note else ""
    scores = f"CRPS {model_crps:.4g} for the model{note}, {baseline_crps[best]:.4g} for {best}{where}"
    if math.isfinite(stderr) and abs(gap) <= 2 * stderr:
        return (f"The model and {best} (the best baseline) tie on CRPS: they differ by {margin}, "
                f"within two standard errors; {scores}.")
    if gap > 0:
        return f"{best} beats the model on CRPS by {margin}; {scores}."
    return f"The model beats the best baseline, {best}, on CRPS by {margin}; {scores}."
