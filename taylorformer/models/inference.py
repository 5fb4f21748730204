"""Log-likelihood and prediction front doors (in the spirit of neuralprocesses)."""
import numpy as np
import tensorflow as tf

from taylorformer.batch import with_masks
from taylorformer.models.bounded_sampling import independent_samples
from taylorformer.models.target_order import seed_pair

#: the ``quantile_method`` of quantiles read off the predictive's own quantile function
ANALYTIC_QUANTILES = "analytic (the predictive's own quantile)"
#: draws per point for the quantiles of a per-point family without a quantile function
QUANTILE_DRAWS = 1000


def with_unknown_targets(batch, dim_y):
    """``batch`` with ``yt`` zeros ``[B, Nt, dim_y]`` where it has none: prediction needs
    only the context and the target inputs (a conditional model never reads ``yt``; an
    autoregressive one samples it). A dict without ``xt`` is returned unchanged (the
    batch check then names what is missing)."""
    if not isinstance(batch, dict) or "yt" in batch or "xt" not in batch:
        return batch
    shape = tf.concat([tf.shape(tf.convert_to_tensor(batch["xt"]))[:2], [dim_y]], 0)
    return {**batch, "yt": tf.zeros(shape, tf.float32)}


def masked_point_mean(values, mask):
    """Mean over real points of ``values [B, N]`` (float64) -> ``[B]``."""
    mask = tf.cast(mask, tf.float64)
    return tf.reduce_sum(tf.cast(values, tf.float64) * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1.0)


def loglik(model, batch, training=False):
    """Mean log-likelihood per real target point, ``[B]`` float64.

    Log densities are summed over the observed output dims (``observed_t``: a NaN target
    value is not scored), accumulated in float64 and averaged over the points with
    ``mask_t == 1`` (at least one observed output). For autoregressive models this is
    the teacher-forced chain-rule log-likelihood.
    """
    dist = model.distribution(batch, training=training)  # validates the batch
    batch = with_masks(batch)
    return masked_point_mean(observed_log_prob(dist, batch), batch["mask_t"])


def observed_log_prob(dist, batch):
    """float64 ``[B, Nt]``: the log density of each target point's observed output values
    (``batch`` after :func:`~taylorformer.batch.with_masks`)."""
    logp = tf.cast(dist.log_prob(tf.cast(batch["yt"], tf.float32)), tf.float64)
    return tf.reduce_sum(logp * tf.cast(batch["observed_t"], tf.float64), -1)


def predict(model, batch, num_samples=0, seed=None, memory_budget=None, window_ids=None, progress=None):
    """Predictive ``mean``, ``stddev`` ``[B, Nt, Dy]`` and ``samples`` ``[S, B, Nt, Dy]``.

    Conditional NPs: mean/stddev of the factorised predictive; samples drawn per target
    independently. Autoregressive NPs (``model.causal``): joint samples drawn step by
    step (``model.sample``), and mean/stddev are Monte Carlo estimates from them
    (``num_samples`` defaults to 50), since the teacher-forced conditionals would
    condition on the unknown ``yt``. Every (window, sample) draws from its own random
    stream (:mod:`taylorformer.models.bounded_sampling`), keyed by ``seed`` and ``window_ids``
    (``[B]`` ints, default ``0 .. B-1``). ``memory_budget`` and ``progress`` go to
    :meth:`AutoregressiveNP.sample <taylorformer.models.AutoregressiveNP.sample>`
    (autoregressive samples in chunks that fit the budget, the same for a seed whatever
    the chunks). ``batch`` needs no ``yt`` (:func:`with_unknown_targets`).
    """
    if isinstance(batch, dict) and "yt" not in batch:
        batch = with_unknown_targets(batch, model.dim_y)
    if getattr(model, "causal", False):
        samples = model.sample(batch, num_samples or 50, seed=seed, memory_budget=memory_budget,
                               window_ids=window_ids, progress=progress)
        out = {"mean": tf.reduce_mean(samples, 0), "stddev": tf.math.reduce_std(samples, 0)}
        if num_samples:
            out["samples"] = samples
        return out
    dist = model.distribution(batch)  # validates the batch
    out = {"mean": dist.mean(), "stddev": dist.stddev()}
    if num_samples:
        b = int(batch["xt"].shape[0])
        ids = tf.range(b, dtype=tf.int64) if window_ids is None else tf.constant(window_ids, tf.int64)
        out["samples"] = independent_samples(dist, seed_pair(seed), ids, num_samples)
    return out


def monte_carlo_quantiles(num, what):
    """The ``quantile_method`` of quantiles estimated from ``num`` draws (``what``: "sampled
    paths" for an autoregressive model's joint forecasts, "draws per point" otherwise)."""
    return f"Monte Carlo over {num} {what}"


def predictive_quantiles(dist, levels, seed):
    """``(quantiles [Q, ...], quantile_method)`` of a factorised predictive ``dist`` at
    ``levels``: exact from the per-point family's own ``quantile``
    (:data:`ANALYTIC_QUANTILES`), else empirical from :data:`QUANTILE_DRAWS` draws per point."""
    base = getattr(dist, "distribution", dist)  # tfd.Independent wraps the per-point family
    try:
        return np.stack([np.asarray(base.quantile(tf.cast(q, base.dtype))) for q in levels]), ANALYTIC_QUANTILES
    except NotImplementedError:
        return (np.quantile(np.asarray(dist.sample(QUANTILE_DRAWS, seed=seed)), levels, axis=0),
                monte_carlo_quantiles(QUANTILE_DRAWS, "draws per point"))
