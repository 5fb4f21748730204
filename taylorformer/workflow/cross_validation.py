"""K-fold cross-validation of a point model on one real survey, beside kriging and IDW.

A run trained on simulated tasks (``fitted-gp``: tasks drawn from a GP prior fitted to the
survey) is scored by its test split on those simulations; what a surveyor needs is how it
predicts the survey's own held-out points. :func:`cross_validate` splits the survey's
points into ``folds`` random folds (fixed by ``seed``); for each fold the model is
conditioned on the other folds and predicts the held-out points, in the data's units
(:func:`taylorformer.prediction.query.predict_data`), and so do two baselines refitted on
the same other folds:

* ``kriging``: ordinary kriging, the GP prior (kernel family among EQ and Matern-1/2,
  3/2, 5/2, one lengthscale, signal and noise variance) fitted by maximum marginal
  likelihood to the other folds (:func:`taylorformer.tasks.fitted_gp.select_prior`, as
  the ``fitted-gp`` task fits the whole survey) and its predictive with the constant
  mean's estimation variance (:func:`taylorformer.tasks.gaussian_process.kriging_predictive`);
* ``idw``: inverse-distance weighting, power 2, with the leave-one-out spread
  (:func:`taylorformer.workflow.predictive_baselines.idw_baseline`).

Every method is scored per held-out point and output by the same functions as
``evaluate``'s comparison (:func:`~taylorformer.workflow.predictive_baselines.gaussian_point_metrics`):
CRPS, error, NLL, 95% interval coverage. The points are the unit of the error bars
(independent standard errors), and the paired differences (model minus baseline, point
by point) decide the verdict (:func:`~taylorformer.workflow.predictive_baselines.verdict`).
"""
import math

import numpy as np

from taylorformer.checks import check_int
from taylorformer.errors import BatchError, SpecError
from taylorformer.workflow.baselines import summarise
from taylorformer.workflow.predictive_baselines import gaussian_point_metrics, idw_baseline, verdict

#: the baselines of a cross-validation -> what they predict
CROSS_VALIDATION_BASELINES = {
    "kriging": "ordinary kriging: a GP prior (EQ or Matern family, lengthscale, variances) fitted by "
               "maximum marginal likelihood to the other folds",
    "idw": "inverse-distance weighting (power 2) of the other folds; sd: leave-one-out residuals",
}
#: least points per fold's training part a kriging fit needs
MIN_TRAINING_POINTS = 5


def fold_indices(n, folds, seed=0):
    """``folds`` disjoint index arrays covering ``range(n)``: a permutation drawn with
    ``seed``, cut into near-equal parts."""
    return np.array_split(np.random.default_rng(seed).permutation(n), folds)


def cross_validate(model, x, y, folds=5, seed=0, baselines=True, source="survey"):
    """Cross-validation JSON dict of ``model`` (a model with a normaliser: raw units in and
    out) on the survey ``x [N, Dx]``, ``y [N, Dy]`` (data units; NaN: not observed).

    Returns ``{"cross_validation": {folds, seed, points, source}, "data_units": scores,
    "baselines": {name: scores}, "paired": {name: {crps, nll}}, "verdict": text}``; each
    ``scores`` is ``{crps, nll: {mean, stderr, n, stderr_method}, mae, rmse, coverage95}``
    over the held-out points (:func:`point_scores`)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
        raise BatchError(f"{source}: cross-validation needs inputs [N, Dx] and outputs [N, Dy] of one N, "
                         f"got {x.shape} and {y.shape}")
    folds = check_int("cross-validation", "folds", folds, 2, len(y))
    parts = fold_indices(len(y), folds, seed)
    if len(y) - max(len(p) for p in parts) < MIN_TRAINING_POINTS:
        raise SpecError(f"{source}: {len(y)} points in {folds} folds leave fewer than {MIN_TRAINING_POINTS} "
                        "points to condition on; use fewer folds")
    names = ["model"] + (list(CROSS_VALIDATION_BASELINES) if baselines else [])
    predictions = {name: (np.full(y.shape, np.nan), np.full(y.shape, np.nan)) for name in names}
    for held in parts:
        keep = np.setdiff1d(np.arange(len(y)), held)
        for name, (mean, sd) in fold_predictions(model, x[keep], y[keep], x[held], names).items():
            predictions[name][0][held], predictions[name][1][held] = mean, sd
    observed = ~np.isnan(y)
    scores = {name: point_scores(*predictions[name], y, observed) for name in names}
    normaliser = getattr(model, "normaliser", None)
    units = [] if normaliser is None else list(normaliser.y_units)
    result = {"cross_validation": {"folds": folds, "seed": seed, "points": int(observed.any(1).sum()),
                                   "source": str(source)},
              "data_units": summary(scores["model"])}
    if not baselines:
        return result
    result["baselines"] = {name: {"what": CROSS_VALIDATION_BASELINES[name], **summary(scores[name])}
                           for name in CROSS_VALIDATION_BASELINES}
    result["paired"] = {name: {key: _mean(scores["model"][key] - scores[name][key]) for key in ("crps", "nll")}
                        for name in CROSS_VALIDATION_BASELINES}
    unit = units[0] if len(units) == 1 and units[0] else ""
    result["verdict"] = verdict(float(scores["model"]["crps"].mean()),
                                {k: v["crps"]["mean"] for k, v in result["baselines"].items()},
                                {k: v["crps"] for k, v in result["paired"].items()}, unit,
                                result["cross_validation"]["points"], item="held-out point")
    return result


def fold_predictions(model, xc, yc, xt, names):
    """``{name: (mean, sd)}`` ``[Nt, Dy]`` in the data's units at ``xt`` given ``(xc, yc)``
    for each of ``names`` (``model``, ``kriging``, ``idw``)."""
    from taylorformer.prediction.query import predict_data
    from taylorformer.tasks.fitted_gp import select_prior
    from taylorformer.tasks.gaussian_process import kriging_predictive

    out = {}
    if "model" in names:
        predicted = predict_data(model, xc, yc, xt)
        out["model"] = (predicted["mean"], predicted["stddev"])
    if "kriging" in names:
        mean, sd = np.full((len(xt), yc.shape[1]), np.nan), np.full((len(xt), yc.shape[1]), np.nan)
        for j in range(yc.shape[1]):
            seen = ~np.isnan(yc[:, j])
            prior = select_prior(xc[seen], yc[seen, j])[0]
            mean[:, j], sd[:, j] = kriging_predictive(xc[seen], yc[seen, j], xt, prior, ordinary=True)
        out["kriging"] = (mean, sd)
    if "idw" in names:
        mean, sd = idw_baseline(xc[None], yc[None], xt[None])
        out["idw"] = (mean[0], sd[0])
    return out


def point_scores(mean, sd, y, observed):
    """Per held-out point (a point with an observed output): ``crps`` and ``nll`` (the
    mean over its observed outputs), ``error`` ``[n_values]`` and ``inside95`` (all its
    observed outputs inside the central 95% interval)."""
    filled = np.where(observed, y, 0.0)
    metrics = gaussian_point_metrics(np.where(observed, mean, 0.0), np.where(observed, sd, 1.0), filled)
    points = observed.any(1)
    count = np.maximum(observed.sum(1), 1)
    return {"crps": ((metrics["crps"] * observed).sum(1) / count)[points],
            "nll": ((metrics["nll"] * observed).sum(1) / count)[points],
            "error": metrics["error"][observed],
            "inside95": (metrics["inside95"] | ~observed).all(1)[points]}


def summary(scores):
    """``{crps, nll: {mean, stderr, n, stderr_method}, mae, rmse, coverage95}`` of
    :func:`point_scores` (the held-out points independent)."""
    error = scores["error"]
    return {"crps": _mean(scores["crps"]), "nll": _mean(scores["nll"]),
            "mae": float(np.abs(error).mean()), "rmse": float(math.sqrt((error ** 2).mean())),
            "coverage95": float(scores["inside95"].mean())}


def _mean(values):
    mean, stderr, method = summarise(values)
    return {"mean": mean, "stderr": stderr, "n": int(np.size(values)), "stderr_method": method}
