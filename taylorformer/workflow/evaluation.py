"""Evaluation metrics: log-likelihood (mean +- stderr), RMSE, 95% coverage, GP ceiling.

For autoregressive models the headline ``rmse``, ``mse``, ``mae``, ``crps`` and
``coverage95`` are those of sampled multi-step forecasts (:data:`DEFAULT_SAMPLES` joint
paths per window on at most :data:`DEFAULT_SAMPLED_TASKS` windows, spread over the
split; ``sampled`` says how many): what a user of the forecasts gets. The
log-likelihood is the joint one by the chain rule (each target's density given the true
earlier targets: the Taylorformer paper's metric, exact for the joint distribution the
paths are drawn from). The teacher-forced point metrics (each target predicted from the
true earlier targets, not a forecast) appear only under ``teacher_forced``.
``consistency`` is the std of the log-likelihood over K target orders (mean and 95%
interval over tasks).
"""
import math
import sys

import keras
import numpy as np
import tensorflow as tf

from taylorformer.batch import with_masks
from taylorformer.models.bounded_sampling import resolve_budget
from taylorformer.checks import check_int, check_memory
from taylorformer.errors import SpecError, TaskError
from taylorformer.models.inference import loglik, masked_point_mean, observed_log_prob
from taylorformer.models.target_order import permute_targets
from taylorformer.workflow.predictive_baselines import Comparison, sample_point_metrics

#: forecast paths per window an autoregressive model's evaluation samples by default
DEFAULT_SAMPLES = 32
#: windows whose forecasts an evaluation samples by default, at most (spread over the split)
DEFAULT_SAMPLED_TASKS = 64


def check_evaluate_options(batch_size, num_batches, num_samples, consistency, model=None,
                           sampled_tasks=DEFAULT_SAMPLED_TASKS):
    """The options of :func:`evaluate` (SpecError naming the option and value): batch_size
    >= 1, num_batches >= 1 or None (the whole split), num_samples None (the default), 0
    (no sampled forecasts) or >= 2, consistency 0 or >= 2, sampled_tasks >= 1 or None (every
    window); with ``model``, num_samples and consistency need an autoregressive model."""
    check_int("evaluate", "batch_size", batch_size)
    check_int("evaluate", "num_batches", num_batches, optional=True)
    check_int("evaluate", "num_samples", num_samples, minimum=0, optional=True)
    check_int("evaluate", "consistency", consistency, minimum=0)
    check_int("evaluate", "sampled_tasks", sampled_tasks, optional=True)
    if num_samples == 1:
        raise SpecError("evaluate 'num_samples' is the number of forecast paths per window: 0 (none) or "
                        "at least 2 (their spread gives the CRPS and the 95% interval), got 1")
    if consistency == 1:
        raise SpecError("evaluate 'consistency' is the number K of target orders: 0 (off) or "
                        "K >= 2, got 1")
    if model is not None and not getattr(model, "causal", False):
        for option, value in (("num_samples", num_samples), ("consistency", consistency)):
            if value:
                raise SpecError(f"evaluate {option!r} = {value} applies to autoregressive models "
                                f"only; {model.name!r} is a conditional model (use 0)")


def order_consistency(model, batch, k=40, seed=0):
    """Per task, the std over ``k`` target permutations of the teacher-forced log-likelihood.

    The log-likelihood is :func:`taylorformer.loglik` (mean per real target point). Returns
    float64 ``[B]``; population std (``ddof=0``, as ``np.std``). A target-equivariant model
    gives 0. Summarise with :func:`summarize_consistency`.
    """
    if not isinstance(k, int) or k < 2:
        raise SpecError(f"consistency needs k >= 2 permutations, got {k!r}")
    lls = [loglik(model, permute_targets(batch, seed=(seed, i))) for i in range(k)]
    return tf.math.reduce_std(tf.stack(lls, 0), axis=0)


def summarize_consistency(stds):
    """Mean of the per-task stds and their 2.5% / 97.5% percentiles (the paper's interval)."""
    stds = np.asarray(stds, np.float64).ravel()
    return {"mean": float(stds.mean()), "lower": float(np.percentile(stds, 2.5)),
            "upper": float(np.percentile(stds, 97.5)), "num_tasks": int(stds.size)}


def batch_metrics(model, batch, log_scale=None):
    """Per-task ``loglik`` [B], ``observed`` [B] (a task has an observed target) and
    per-point squared errors (mean over the observed outputs) / coverage hits (every
    observed output inside) at the observed targets (NumPy); ``errors [N, Dy]`` the
    per-output errors ``mean - y`` at the real targets (NaN where not observed). With
    ``log_scale [Dy]`` (a normaliser's ``log(y_scale)``), ``log_jacobian [B]``: the mean
    over real targets of the summed ``log_scale`` of the observed outputs, what a log
    density in data units loses against the model's (change of variables). ``dist``: the
    model's predictive distribution of the batch."""
    batch = with_masks(batch)
    dist = model.distribution(batch)
    yt = tf.cast(batch["yt"], tf.float32)
    mask = batch["mask_t"].numpy().astype(bool)
    observed = batch["observed_t"].numpy() > 0.5
    cdf = dist.cdf(yt).numpy()  # central 95% interval <=> 0.025 <= F(y) <= 0.975
    inside = ((cdf >= 0.025) & (cdf <= 0.975)) | ~observed
    err = dist.mean().numpy().astype(np.float64) - yt.numpy()
    out = {
        "loglik": masked_point_mean(observed_log_prob(dist, batch), batch["mask_t"]).numpy(),
        "observed": mask.any(1),  # [B]: tasks without an observed target have no loglik
        "sq_err": _observed_mean(err ** 2, observed)[mask],
        "inside95": inside.all(-1)[mask],
        "errors": np.where(observed, err, np.nan)[mask],
        "dist": dist,
    }
    if log_scale is not None:
        per_point = (observed * np.asarray(log_scale, np.float64)).sum(-1)  # [B, Nt]
        out["log_jacobian"] = masked_point_mean(per_point, batch["mask_t"]).numpy()
    return out


def data_unit_metrics(normaliser, errors, lls, log_jacobians):
    """The ``data_units`` entry of :func:`evaluate`: ``loglik`` in the data's units (the
    model's minus the log-Jacobian, per task) and per output, keyed ``"name [unit]"``,
    ``rmse`` and ``mae`` of the predictive mean (the model-unit errors times the output's
    scale) and the output's ``offset`` and ``scale``."""
    errors = np.concatenate(errors)  # [N, Dy], NaN: not observed
    outputs = {}
    for j, name in enumerate(normaliser.y_labels()):
        e = errors[:, j][~np.isnan(errors[:, j])] * normaliser.y_scale[j]
        outputs[name] = {"rmse": float(np.sqrt(np.mean(e ** 2))) if e.size else None,
                         "mae": float(np.mean(np.abs(e))) if e.size else None, "n": int(e.size),
                         "offset": float(normaliser.y_offset[j]), "scale": float(normaliser.y_scale[j])}
    return {"loglik": _mean_stderr(lls - np.concatenate(log_jacobians)), "outputs": outputs,
            "note": "in the data's units (the model's normaliser: y = offset + scale * model y); "
                    "loglik is per target point, summed over its observed outputs"}


def _observed_mean(values, observed):
    """Mean over the observed outputs of ``values [..., Dy]`` (0 where none is)."""
    return (values * observed).sum(-1) / np.maximum(observed.sum(-1), 1)


def sample_metrics(samples, yt, mask_t, observed_t=None):
    """Per real target point of multi-step forecast paths ``samples [S, B, Nt, Dy]`` at
    ``yt [B, Nt, Dy]``: ``sq_err`` / ``abs_err`` of the paths' mean, ``crps`` (the fair
    ensemble estimator) and ``inside95`` (every observed output inside the paths' central
    95% interval), each averaged over the observed outputs (``observed_t [B, Nt, Dy]``, all
    by default), from :func:`taylorformer.workflow.predictive_baselines.sample_point_metrics`
    (NumPy)."""
    mask = np.asarray(mask_t).astype(bool)
    observed = np.ones(np.shape(yt), bool) if observed_t is None else np.asarray(observed_t) > 0.5
    point = sample_point_metrics(samples, yt)
    return {"sq_err": _observed_mean(point["error"] ** 2, observed)[mask],
            "abs_err": _observed_mean(np.abs(point["error"]), observed)[mask],
            "crps": _observed_mean(point["crps"], observed)[mask],
            "inside95": (point["inside95"] | ~observed).all(-1)[mask]}


def resolve_samples(model, num_samples):
    """Forecast paths per window :func:`evaluate` samples: ``num_samples`` where given,
    else :data:`DEFAULT_SAMPLES` for an autoregressive model and 0 for a conditional one."""
    if num_samples is not None:
        return num_samples
    return DEFAULT_SAMPLES if getattr(model, "causal", False) else 0


def sampling_stride(task, split, batch_size, num_batches, sampled_tasks):
    """Every how many tasks of ``split`` :func:`evaluate` samples forecasts: the split's
    tasks (a forecasting task's windows, or ``num_batches`` batches) over
    ``sampled_tasks``, so that the sampled windows spread over the split (consecutive
    windows overlap and tell little new); 1 where the count is not known (independent
    tasks) or ``sampled_tasks`` is None (every task)."""
    if sampled_tasks is None:
        return 1
    total = len(task.window_starts(split)) if callable(getattr(task, "window_starts", None)) else None
    if num_batches is not None:
        total = min(total or math.inf, num_batches * batch_size)
    return 1 if total is None else max(1, int(total) // sampled_tasks)


def take_tasks(batch, rows):
    """The tasks ``rows`` (``[k]`` ints) of ``batch``: every entry with a batch axis."""
    size = int(np.shape(batch["xt"])[0])
    return {k: tf.gather(v, rows) if np.ndim(v) and np.shape(v)[0] == size else v for k, v in batch.items()}


def units_normaliser(task, model):
    """The normaliser that maps the model's units to the data's: the model file's
    (``model.normaliser``), else, for a model file written before normalisers were saved,
    ``task``'s (:meth:`taylorformer.normaliser.Normaliser.from_task`; None where the
    task's map is not affine)."""
    from taylorformer.normaliser import Normaliser

    if getattr(model, "normaliser", None) is not None:
        return model.normaliser
    try:
        return Normaliser.from_task(task, model.dim_x, model.dim_y)
    except SpecError:
        return None


def _mean_stderr(values):
    values = np.asarray(values, np.float64)
    stderr = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    return {"mean": float(values.mean()), "stderr": float(stderr), "n": int(len(values))}


def evaluate(model, task, split="test", batch_size=16, num_batches=None, num_samples=None,
             consistency=0, seed=0, memory_budget=None, progress=None, baselines=True,
             sampled_tasks=DEFAULT_SAMPLED_TASKS):
    """Metrics over a fixed evaluation split of ``task``.

    Returns ``{"loglik": {mean, stderr, n}, "rmse", "mse", "coverage95", "num_tasks",
    "num_tasks_skipped"}`` and, when the task provides the exact GP predictive, ``gt_loglik`` and
    ``gap_to_gt`` (gt minus model; 0 is the ceiling); ``consistency = K`` adds the
    order-consistency metric of an autoregressive model.

    An autoregressive model's ``rmse``, ``mse``, ``mae``, ``crps`` and ``coverage95`` are
    those of ``num_samples`` (default :data:`DEFAULT_SAMPLES`) sampled multi-step forecast
    paths per window (rmse and mae of the paths' mean; crps the fair ensemble estimator;
    the paths' central 95% interval), on every ``stride``-th window of the split, at most
    ``sampled_tasks`` of them (None: every window; :func:`sampling_stride`), said by
    ``sampled`` (``num_samples``, ``num_tasks``, ``stride``, ``seed``). Its teacher-forced
    point metrics (each target given the true earlier ones) are under ``teacher_forced``
    only; ``num_samples=0`` leaves the forecasts out (then ``teacher_forced`` alone has
    point metrics). ``loglik`` is the joint log-likelihood by the chain rule over every
    task. ``num_samples`` and ``consistency`` are a SpecError for a conditional model.

    A task with no observed target (every target value NaN, e.g. a forecasting window
    over a gap in the data) has nothing to score: it is left out of every metric and
    counted in ``num_tasks_skipped``; a split where no task has one is a TaskError.

    The samples are drawn within ``memory_budget`` (:meth:`AutoregressiveNP.sample
    <taylorformer.models.AutoregressiveNP.sample>`), window ``k`` of the split from its own
    random stream, so they do not depend on ``batch_size``; ``progress`` (default: stdout
    is a terminal) shows a bar over the batches while sampling.

    ``baselines`` (default on) scores the task's predictive baselines on the same tasks
    (:class:`taylorformer.workflow.predictive_baselines.Comparison`; an autoregressive
    model's sampled windows) beside the model's predictive (its sampled forecasts where
    drawn, else its teacher-forced predictive, which the verdict names): it adds
    ``baselines``, ``paired`` (the model minus each, with error bars), ``verdict``,
    ``baseline_tasks`` and ``baselines_note``, and the model's ``crps`` to ``data_units``
    (to the top level where the metrics are already in the data's units).
    """
    check_evaluate_options(batch_size, num_batches, num_samples, consistency, model, sampled_tasks)
    autoregressive = getattr(model, "causal", False)
    num_samples = resolve_samples(model, num_samples)
    normaliser = units_normaliser(task, model)
    log_scale = None if normaliser is None else normaliser.log_scale()
    lls, sq, inside, gts, sampled, stds, errors, jacobians = [], [], [], [], [], [], [], []
    skipped = 0
    gt_key = "gt_loglik_joint" if autoregressive else "gt_loglik"
    sampling = autoregressive and num_samples > 0
    stride = sampling_stride(task, split, batch_size, num_batches, sampled_tasks) if sampling else 1
    if sampling:
        budget = resolve_budget(memory_budget)  # a bad budget fails before any work
    bar = (keras.utils.Progbar(num_batches, unit_name="batch")
           if sampling and (sys.stdout.isatty() if progress is None else progress) else None)
    first = sampled_windows = 0
    comparison = (Comparison(task, normaliser, teacher_forced=autoregressive and not sampling,
                             baselines=baselines, window_stride=stride) if baselines or sampling else None)
    for i, batch in enumerate(task.dataset(split, batch_size=batch_size, num_batches=num_batches)):
        m = batch_metrics(model, batch, log_scale)
        lls.append(m["loglik"][m["observed"]])  # tasks with nothing observed to score drop out
        errors.append(m["errors"])
        if log_scale is not None:
            jacobians.append(m["log_jacobian"][m["observed"]])
        skipped += int((~m["observed"]).sum())
        sq.append(m["sq_err"])
        inside.append(m["inside95"])
        if gt_key in batch:
            gts.append(batch[gt_key].numpy()[m["observed"]])
        offset = first  # the split's index of the batch's first task
        ids = offset + np.arange(int(batch["xt"].shape[0]))
        first += len(ids)
        if sampling:
            if i == 0:  # [S, B, Nt, Dy] draws, as float64 about 4 times over in sample_metrics
                shape = np.shape(batch["yt"])
                check_memory("evaluate", f"{num_samples} samples of {shape[0]} task(s) x {shape[1]} "
                             "target(s)", 5 * 8 * num_samples * int(np.prod(shape)),
                             "ask for fewer samples (--samples) or a smaller --batch-size")
            ids = ids[ids % stride == 0]
            if sampled_tasks is not None:
                ids = ids[ids // stride < sampled_tasks]
            if ids.size:
                part = take_tasks(batch, ids - offset)
                samples = model.sample(part, num_samples, seed=seed, memory_budget=budget, progress=False,
                                       window_ids=ids)
                observed = with_masks(part)  # unobserved (NaN) targets leave the metrics
                sampled.append(sample_metrics(samples, observed["yt"], observed["mask_t"], observed["observed_t"]))
                sampled_windows += int((observed["observed_t"].numpy() > 0.5).any((1, 2)).sum())
                comparison.add(part, m["dist"], samples)
        elif comparison is not None:  # the model's predictive (teacher-forced for an AR model)
            comparison.add(batch, m["dist"])
        if autoregressive and consistency:
            stds.append(np.asarray(order_consistency(model, batch, k=consistency, seed=seed + i))[m["observed"]])
        if bar is not None:
            bar.add(1)
    if not lls:
        raise ValueError(f"task split {split!r} produced no batches")
    lls = np.concatenate(lls)
    if not lls.size:
        raise TaskError(f"no task of split {split!r} has an observed target: all {skipped} task(s) "
                        "have only missing (NaN) target values, so there is nothing to score")
    sq = np.concatenate(sq)
    point = {"rmse": float(np.sqrt(sq.mean())), "mse": float(sq.mean()),
             "coverage95": float(np.concatenate(inside).mean())}
    out = {"split": split, "num_tasks": int(len(lls)), "num_tasks_skipped": skipped, "loglik": _mean_stderr(lls)}
    with_units = normaliser is not None and (not normaliser.identity_y or autoregressive)
    if not autoregressive:
        out.update(point)
    else:
        out["loglik"]["kind"] = "joint (chain rule), per target point"
        if sampled:
            joined = {k: np.concatenate([s[k] for s in sampled]) for k in sampled[0]}
            out.update(rmse=float(np.sqrt(joined["sq_err"].mean())), mse=float(joined["sq_err"].mean()),
                       mae=float(joined["abs_err"].mean()), crps=float(joined["crps"].mean()),
                       coverage95=float(joined["inside95"].mean()))
            out["sampled"] = {
                "num_samples": num_samples, "num_tasks": sampled_windows, "stride": stride, "seed": seed,
                "note": (f"rmse, mse, mae, crps and coverage95 are those of {num_samples} sampled multi-step "
                         "forecast paths per window (rmse, mae: of the paths' mean; crps: fair ensemble "
                         "estimator; coverage95: the paths' central 95% interval), on one window in every "
                         f"{stride} of the split; teacher_forced has the teacher-forced ones")}
        out["teacher_forced"] = {
            **point, "note": "teacher-forced: each target predicted from the true earlier targets, which a "
                             "forecast does not have (not a forecast's error)"}
    if with_units:
        out["units"] = ("loglik" + (", rmse, mse, mae, crps" if sampled else "") + (", gt_loglik" if gts else "")
                        + (", teacher_forced's rmse, mse" if autoregressive else "")
                        + " are in the model's standardised units (z = (y - offset) / scale); data_units has "
                        "them in the data's units")
        units = out["data_units"] = data_unit_metrics(normaliser, errors, lls, jacobians)
        if autoregressive:  # its outputs' errors are teacher-forced: under that label
            out["teacher_forced"]["data_units"] = {"outputs": {
                name: {k: v for k, v in values.items() if k in ("rmse", "mae", "n")}
                for name, values in units.pop("outputs").items()}}
        if sampled and comparison.records["model"]:  # the sampled forecasts' scores in the data's units
            scores = comparison.scores("model")
            units.update({k: scores[k] for k in ("crps", "rmse", "mae", "coverage95")})
            units["outputs"] = {name: {**scores["outputs"][name], "offset": float(normaliser.y_offset[j]),
                                       "scale": float(normaliser.y_scale[j])}
                                for j, name in enumerate(normaliser.y_labels())}
    elif normaliser is not None:
        out["units"] = "the data's own units (the normaliser is the identity)"
    else:
        out["units"] = "the model's units (no normaliser)"
    if gts:
        gts = np.concatenate(gts)
        out["gt_loglik"] = _mean_stderr(gts)
        out["gap_to_gt"] = _mean_stderr(gts - lls)
        if autoregressive:
            out["gt_loglik"]["kind"] = "joint (chain rule), per target point"
    if stds:
        out["consistency"] = {"k": consistency, **summarize_consistency(np.concatenate(stds))}
    if baselines:
        out.update(comparison.result())
        if out["baselines"] and not sampled:
            model_scores = comparison.scores("model")
            if autoregressive:  # the teacher-forced predictive's, under its label
                forced = out["teacher_forced"].get("data_units", out["teacher_forced"])
                forced["crps"] = model_scores["crps"]
                for name, values in forced.get("outputs", {}).items():
                    values["crps"] = model_scores["outputs"][name]["crps"]
            else:
                units = out.get("data_units", out)
                units["crps"] = model_scores["crps"]
                for name, values in units.get("outputs", {}).items():
                    values["crps"] = model_scores["outputs"][name]["crps"]
    return out
