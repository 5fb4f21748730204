"""Log-likelihood and prediction front doors (in the spirit of neuralprocesses)."""
import tensorflow as tf

from taylorformer.batch import with_masks


def masked_point_mean(values, mask):
    """Mean over real points of ``values [B, N]`` (float64) -> ``[B]``."""
    mask = tf.cast(mask, tf.float64)
    return tf.reduce_sum(tf.cast(values, tf.float64) * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1.0)


def loglik(model, batch, training=False):
    """Mean log-likelihood per real target point, ``[B]`` float64.

    Log densities are summed over output dims, accumulated in float64 and averaged
    over the points with ``mask_t == 1``. For autoregressive models this is the
    teacher-forced chain-rule log-likelihood.
    """
    dist = model.predict_distribution(batch, training=training)  # validates the batch
    batch = with_masks(batch)
    logp = tf.reduce_sum(tf.cast(dist.log_prob(tf.cast(batch["yt"], tf.float32)), tf.float64), -1)
    return masked_point_mean(logp, batch["mask_t"])


def predict(model, batch, num_samples=0):
    """Predictive ``mean``, ``stddev`` ``[B, Nt, Dy]`` and ``samples`` ``[S, B, Nt, Dy]``.

    Models with their own ``sample`` method (autoregressive NPs) draw joint samples
    through it; conditional NPs sample each target independently.
    """
    dist = model.predict_distribution(batch)  # validates the batch
    batch = with_masks(batch)
    out = {"mean": dist.mean(), "stddev": dist.stddev()}
    if num_samples:
        sampler = getattr(model, "sample", None)
        out["samples"] = sampler(batch, num_samples) if sampler else dist.sample(num_samples)
    return out
