"""Per-window standardisation: each window's outputs in the units of its own context.

The spec option ``"standardise"`` (saved with the model, so it holds for every preset and
plugin model) says what units the network works in:

* ``"global"``: the units the batch arrives in (a task's standardised units, e.g. the
  z-scores of its training rows). A level or spread outside what training saw is
  extrapolation for the network.
* ``"window"``: per window ``b`` and output ``d``, from the observed context values only
  (``mask_c`` and NaN aware)::

      m[b, d] = mean of yc[b, :, d]         s[b, d] = max(std(yc[b, :, d]), min_scale)

  (population std; ``min_scale`` = spec ``standardise_min_scale``; a window with no
  observed context value for ``d`` keeps ``m = 0, s = 1``, one with a single value
  ``m`` = that value and ``s = 1``). The network reads ``(yc - m) / s`` and, for the
  teacher forcing of an autoregressive model, ``(yt - m) / s``; it predicts the
  distribution of ``z = (y - m) / s``, and the model returns the distribution of
  ``y = m + s z``: locations ``m + s loc``, scales ``s scale``, shape parameters
  (``df``, mixture ``logits``) unchanged. Its log density is therefore
  ``log p_z((y - m) / s) - sum_d log s_d``: the change of variables is in every reported
  log-likelihood. Statistics come from the context alone, so a target never informs its
  own standardisation (autoregressive models stay causal).

  The inputs ``x`` are not standardised: the forecasting tasks already give window-relative
  positions, and a spatial model's inputs are coordinates whose absolute value matters.
* ``"last"``: as ``"window"`` (the same scale ``s``), but the shift is each window's last
  observed context value: ``m[b, d] = yc[b, k, d]`` with ``k`` the observed context point
  of largest first input ``xc[b, k, 0]`` (a forecasting task's time position; ties: the
  first in context order). The network predicts ``z = (y - y_last) / s``: a network
  output of location 0 is persistence exactly, so a forecaster starts anchored on the
  last observation instead of having to find it by attention (benchmarks/README.md,
  "series_baselines.py").

With per-window standardisation a model's predictive distribution (in the batch's units) is
equivariant to ``y -> a y + b`` for ``a > 0`` (while the context std stays above the floor
``min_scale``), and the same for any shift of a window: what the network sees does not
change.

A likelihood is rescaled through its parameter names (:data:`LOCATIONS`, :data:`SCALES`,
:data:`SHAPES`) or, for a plugin likelihood with other parameters, its own
``affine_parameters(params, shift, scale)`` (the parameters of ``shift + scale * Y``);
discrete likelihoods (with a ``support``) cannot be standardised and are refused.

The training range (:class:`TrainingRange`): while a model trains, the smallest and
largest value of each input the network reads (``x`` per input dim over the real context
points, ``y`` per output over the observed context values, after this standardisation)
are recorded in the model and saved with it (its Keras config). At inference a context
with a value more than :data:`RANGE_MARGIN` times the width of that range beyond either
end issues a :class:`TrainingRangeWarning` (once per input per model).
"""
import warnings

import numpy as np
import tensorflow as tf

from taylorformer.errors import SpecError, TrainingRangeWarning
from taylorformer.spec import DEFAULT_MIN_SCALE

#: likelihood parameters that are locations, scales, or unchanged by an affine map of y
LOCATIONS = ("loc", "locs")
SCALES = ("scale", "scales")
SHAPES = ("df", "logits")
#: a context value further than this many training-range widths beyond the range warns
RANGE_MARGIN = 0.25


def check_likelihood(likelihood, dim_y, name):
    """SpecError unless the outputs of ``likelihood`` can be mapped back from window units."""
    if getattr(likelihood, "support", None) is not None:
        raise SpecError(f"spec: standardise 'window' needs a continuous likelihood; {name!r} has discrete "
                        "outputs, whose values a shift and scale would change: use standardise 'global'")
    if callable(getattr(likelihood, "affine_parameters", None)):
        return
    names = likelihood.parameters(tf.zeros([1, 1, likelihood.num_params(dim_y)]))
    unknown = sorted(set(names) - set(LOCATIONS + SCALES + SHAPES))
    if unknown:
        raise SpecError(f"spec: standardise 'window' cannot map the parameters {unknown} of likelihood "
                        f"{name!r} back to the data's units: give the likelihood an "
                        "affine_parameters(params, shift, scale) method or use standardise 'global'")


#: spec ``standardise`` modes that standardise each window (the others: ``"global"``)
WINDOW_MODES = ("window", "last")


def context_statistics(batch, min_scale=DEFAULT_MIN_SCALE, mode="window"):
    """``(shift, scale)`` float64 ``[B, 1, Dy]`` of each window's observed context outputs
    (``batch`` after :func:`taylorformer.batch.with_masks`): mean (``mode="last"``: the
    last observed value, :func:`last_context_value`) and floored population std (see the
    module docstring for windows with fewer than two observed values)."""
    yc = tf.cast(batch["yc"], tf.float64)
    observed = tf.cast(batch["observed_c"], tf.float64)  # 0 at padding and NaN values
    count = tf.reduce_sum(observed, 1, keepdims=True)  # [B, 1, Dy]
    mean = tf.reduce_sum(yc * observed, 1, keepdims=True) / tf.maximum(count, 1.0)
    var = tf.reduce_sum(tf.square(yc - mean) * observed, 1, keepdims=True) / tf.maximum(count, 1.0)
    scale = tf.where(count > 1.5, tf.maximum(tf.sqrt(var), tf.cast(min_scale, tf.float64)),
                     tf.ones_like(var))
    if mode == "last":
        return last_context_value(batch), scale
    return mean, scale


def last_context_value(batch):
    """``[B, 1, Dy]`` float64: per window and output, the observed context value at the
    largest first input ``xc[..., 0]`` (ties: the first in context order); 0 where no
    context value of that output is observed."""
    yc = tf.cast(batch["yc"], tf.float64)
    observed = batch["observed_c"] > 0.5                                   # [B, C, Dy]
    time = tf.cast(batch["xc"][..., :1], tf.float64)                       # [B, C, 1]
    score = tf.where(observed, tf.broadcast_to(time, tf.shape(yc)), tf.constant(-np.inf, tf.float64))
    last = tf.argmax(score, axis=1)                                        # [B, Dy]
    value = tf.gather(tf.transpose(yc, [0, 2, 1]), last[..., None], batch_dims=2)[..., 0]  # [B, Dy]
    value = tf.where(tf.reduce_any(observed, 1), value, tf.zeros_like(value))
    return value[:, None, :]


def to_window_units(batch, shift, scale):
    """``batch`` (after ``with_masks``) with ``yc`` and ``yt`` as ``(y - shift) / scale``
    (float32; unobserved values stay 0)."""
    out = dict(batch)
    for key, flags in (("yc", "observed_c"), ("yt", "observed_t")):
        z = (tf.cast(batch[key], tf.float64) - shift) / scale
        out[key] = tf.cast(tf.where(batch[flags] > 0.5, z, tf.zeros_like(z)), tf.float32)
    return out


def to_original_units(params, shift, scale, likelihood=None):
    """The parameters of ``shift + scale * Z`` from those of ``Z`` (``params``: dict of
    float32 ``[B, N, Dy]``, or ``[B, N, Dy, K]`` for a mixture's components;
    ``shift``/``scale`` ``[B, 1, Dy]``): see the module docstring."""
    shift, scale = tf.cast(shift, tf.float32), tf.cast(scale, tf.float32)
    if likelihood is not None and callable(getattr(likelihood, "affine_parameters", None)):
        return likelihood.affine_parameters(params, shift, scale)
    out = {}
    for name, value in params.items():
        m, s = (shift, scale) if value.shape.rank == 3 else (shift[..., None], scale[..., None])
        if name in LOCATIONS:
            value = m + s * value
        elif name in SCALES:
            value = s * value
        out[name] = value
    return out


def samples_to_original_units(samples, shift, scale):
    """Draws ``[..., B, N, Dy]`` in window units -> the batch's units."""
    return tf.cast(tf.cast(samples, tf.float64) * scale + shift, tf.float32)


# ---------------------------------------------------------------- the training range

def input_range(batch):
    """Per input of the network, the smallest and largest value over the real context
    points: ``(low, high)`` float32 ``[Dx + Dy]`` (x dims, then y outputs over their
    observed values; +inf / -inf where there is none). ``batch`` as the network reads it."""
    mask = tf.cast(batch["mask_c"], tf.bool)[..., None]
    x = tf.cast(batch["xc"], tf.float32)
    observed = tf.cast(batch["observed_c"], tf.bool) & mask
    y = tf.cast(batch["yc"], tf.float32)
    values = tf.concat([x, y], -1)
    real = tf.concat([tf.broadcast_to(mask, tf.shape(x)), observed], -1)
    inf = tf.constant(np.inf, tf.float32)
    low = tf.reduce_min(tf.where(real, values, inf), [0, 1])
    high = tf.reduce_max(tf.where(real, values, -inf), [0, 1])
    return low, high


class TrainingRange:
    """The range of the network's inputs seen in training (:func:`input_range`), kept in
    two non-trainable ``tf.Variable`` ``[Dx + Dy]`` outside the Keras weights (so model
    files written before it load unchanged); saved in the model's config."""

    def __init__(self, dim_x, dim_y):
        self.dim_x, self.dim_y = dim_x, dim_y
        n = dim_x + dim_y
        # ONLY_FIRST_REPLICA: under a strategy with several replicas the first one's batches are recorded
        aggregation = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.low = tf.Variable(tf.fill([n], np.inf), trainable=False, aggregation=aggregation,
                               name="trained_input_low", dtype=tf.float32)
        self.high = tf.Variable(tf.fill([n], -np.inf), trainable=False, aggregation=aggregation,
                                name="trained_input_high", dtype=tf.float32)
        self.warned = set()

    def update(self, batch):
        """Widen the range to the inputs of ``batch`` (as the network reads it)."""
        low, high = input_range(batch)
        self.low.assign(tf.minimum(self.low, low))
        self.high.assign(tf.maximum(self.high, high))

    def names(self):
        return [f"x{i}" for i in range(self.dim_x)] + [f"y{i}" for i in range(self.dim_y)]

    def get_config(self):
        """``{"low": [...], "high": [...]}`` (None where nothing was recorded), or None."""
        low, high = self.low.numpy(), self.high.numpy()
        if not np.isfinite(low).any():
            return None
        clean = lambda v: [float(a) if np.isfinite(a) else None for a in v]  # noqa: E731
        return {"low": clean(low), "high": clean(high)}

    def set_config(self, config):
        """Restore a recorded range (:meth:`get_config`); a malformed one is a SpecError."""
        if config is None:
            return
        n = self.dim_x + self.dim_y
        try:
            low = np.array([np.inf if v is None else float(v) for v in config["low"]], np.float32)
            high = np.array([-np.inf if v is None else float(v) for v in config["high"]], np.float32)
        except (TypeError, KeyError, ValueError) as exc:
            raise SpecError(f"model config 'trained_range' must be {{'low': [...], 'high': [...]}}: {exc}") from None
        if low.shape != (n,) or high.shape != (n,) or np.isnan(low).any() or np.isnan(high).any():
            raise SpecError(f"model config 'trained_range' must hold {n} numbers (or null) in 'low' and 'high'")
        self.low.assign(low)
        self.high.assign(high)

    def check(self, batch, mode):
        """Warn (:class:`TrainingRangeWarning`) about each input whose context values in
        ``batch`` (as the network reads it) lie more than :data:`RANGE_MARGIN` range widths
        beyond the training range; once per input. Eager only; returns the inputs warned about."""
        if not tf.executing_eagerly():
            return []
        low, high = self.low.numpy().astype(np.float64), self.high.numpy().astype(np.float64)
        if not np.isfinite(low).any():
            return []  # never trained here
        seen_low, seen_high = (v.numpy().astype(np.float64) for v in input_range(batch))
        width = np.where(np.isfinite(high - low), high - low, 0.0)
        margin = RANGE_MARGIN * width
        warned = []
        for i, name in enumerate(self.names()):
            if not np.isfinite(low[i]) or name in self.warned:
                continue
            below, above = seen_low[i] < low[i] - margin[i], seen_high[i] > high[i] + margin[i]
            if not (below or above):
                continue
            self.warned.add(name)
            warned.append(name)
            what = "context outputs" if i >= self.dim_x else "context inputs"
            units = " (in window units)" if i >= self.dim_x and mode in WINDOW_MODES else ""
            warnings.warn(TrainingRangeWarning(
                f"{what} {name}{units} reach [{seen_low[i]:.4g}, {seen_high[i]:.4g}], far outside the "
                f"range the model was trained on, [{low[i]:.4g}, {high[i]:.4g}] (more than "
                f"{RANGE_MARGIN:g} x its width beyond it): its predictions there are extrapolation"
                + ("; a non-stationary series needs per-window standardisation (spec standardise 'window')"
                   if i >= self.dim_x and mode not in WINDOW_MODES else "")), stacklevel=3)
        return warned
