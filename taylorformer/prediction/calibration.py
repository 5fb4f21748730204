"""Calibration: PIT, coverage (reliability), CRPS and sharpness of any model's predictions,
and post-hoc spread-scale recalibration fitted on a validation split.

A model's predictions on a batch become per-point *marginals* at the observed target
values (NaN targets and padding are left out), one of:

- :class:`NormalMarginals`: a Gaussian predictive: PIT, intervals, CRPS and NLL in closed form;
- :class:`DistributionMarginals`: any other ``tfp`` family (Student-t, mixtures, discrete):
  PIT from its CDF (randomised for a discrete family), intervals from its quantile
  function where it has one (else from draws), CRPS from draws;
- :class:`SampleMarginals`: draws, e.g. the multi-step forecasts of an autoregressive
  model (:meth:`~taylorformer.models.AutoregressiveNP.sample`): randomised rank PIT,
  empirical quantiles, the fair ensemble CRPS.

:func:`summarize` pools them into the report: a PIT histogram (uniform when calibrated),
the coverage of central intervals at :data:`LEVELS` read off the PIT (u inside
``[(1 - a) / 2, (1 + a) / 2]``: the reliability diagram), CRPS, sharpness (mean predictive
stddev and mean interval width) and, where the marginals have a density, the NLL.

Recalibration: a spread scale ``s [Dy]`` maps each predictive ``Y`` to ``m + s (Y - m)``
about its mean ``m`` (a Gaussian's stddev times ``s``; quantiles and draws moved away from
or towards the mean). :func:`fit_spread_scale` picks, per output, the ``s`` minimising
the validation NLL (CRPS for draws, which have no density). ``taylorformer evaluate RUN
--recalibrate`` stores it in ``RUN_DIR/calibration.json`` (:func:`save_recalibration`)
and ``predict`` applies it (:func:`apply_spread_scale`).
"""
import hashlib
import json
import os

import numpy as np
from scipy import optimize, special, stats

from taylorformer.checks import check_int
from taylorformer.errors import RunDirectoryError, SpecError

#: central interval masses whose coverage is reported (the reliability diagram)
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
#: bins of the PIT histogram
PIT_BINS = 10
#: joint forecast paths per window for an autoregressive model (multi-step)
DEFAULT_SAMPLES = 100
#: draws per point for the CRPS of a non-Gaussian family (kept as float32 until the report)
DEFAULT_DRAWS = 200
#: the recalibration file of a run directory (one entry per checkpoint)
RECALIBRATION_FILE = "calibration.json"
#: modes: a conditional model's predictive, an autoregressive model's multi-step samples
#: or (asked for) its teacher-forced conditionals
MODES = ("predictive", "sampled", "teacher-forced")
#: the spread scales :func:`fit_spread_scale` can produce (its search range); a stored
#: scale outside it was not fitted here and is refused (:func:`load_recalibration`)
SPREAD_SCALE_RANGE = (1e-3, 1e3)


# ----------------------------------------------------------------------------- scores
def gaussian_crps(y, loc, scale):
    """Closed-form CRPS of ``Normal(loc, scale)`` at ``y`` (elementwise):
    ``scale * (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))``, ``z = (y - loc) / scale``."""
    z = (np.asarray(y, np.float64) - loc) / scale
    return scale * (z * (2 * special.ndtr(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))


def ensemble_crps(samples, y, fair=True):
    """CRPS estimate from draws ``samples [S, ...]`` at ``y [...]``: ``E|X - y| - E|X - X'| / 2``
    from the sorted draws, ``sum_i (2i - S - 1) x_(i)`` (all pairs in O(S log S)). ``fair``:
    ``E|X - X'|`` over the ``S (S - 1)`` ordered pairs of distinct draws (unbiased); else
    over all ``S^2`` pairs (the plain ensemble estimator; lower by
    ``E|X - X'| / 2S``)."""
    samples = np.asarray(samples, np.float64)
    s = samples.shape[0]
    if fair and s < 2:
        raise SpecError(f"the fair CRPS from draws needs at least 2 draws, got {s}")
    weights = (2 * np.arange(1, s + 1) - s - 1).reshape((s,) + (1,) * (samples.ndim - 1))
    spread = 2.0 / (s * (s - 1) if fair else s * s) * (weights * np.sort(samples, axis=0)).sum(0)
    return np.abs(samples - np.asarray(y, np.float64)).mean(0) - 0.5 * spread


def randomized_rank_pit(samples, y, rng):
    """PIT of ``y`` among draws ``samples [S, ...]``: ``(#{x < y} + V (#{x = y} + 1)) / (S + 1)``
    with ``V ~ U(0, 1)``: exactly uniform when ``y`` is exchangeable with the draws."""
    samples = np.asarray(samples)
    below = (samples < y).sum(0)
    ties = (samples == y).sum(0)
    return (below + rng.uniform(size=below.shape) * (ties + 1)) / (samples.shape[0] + 1)


# ----------------------------------------------------------------------------- marginals
class Marginals:
    """Predictive marginals of one batch at its real target points.

    ``y``/``observed [N, Dy]`` (float64 / bool; an unobserved value is 0 and left out of
    every metric), ``mean [N, Dy]``, ``scale [Dy]`` the spread scale applied (ones: as
    predicted). Subclasses give ``pit``, ``crps``, ``intervals``, ``stddev`` and ``nll``
    (None where there is no density), all ``[N, Dy]`` (``intervals``: ``[2, L, N, Dy]``).
    """

    has_density = True
    can_scale = True

    def __init__(self, y, observed, mean, scale=None):
        self.y, self.observed, self.mean = y, observed, mean
        self.scale = np.ones(y.shape[-1]) if scale is None else np.asarray(scale, np.float64)

    @property
    def dim_y(self):
        return self.y.shape[-1]

    def with_scale(self, scale):
        """The same marginals with the spread scale ``scale [Dy]`` (instead of this one's)."""
        scale = np.asarray(scale, np.float64)
        if scale.shape != (self.dim_y,) or not np.all(np.isfinite(scale) & (scale > 0)):
            raise SpecError(f"spread scale must be {self.dim_y} finite number(s) > 0, got {scale.tolist()}")
        if not self.can_scale and not np.all(scale == 1):
            raise SpecError(f"{type(self).__name__} of a discrete family cannot be spread-scaled")
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.scale = scale
        return other

    def _spread(self, x):
        """``x`` moved about the mean by the spread scale: ``m + s (x - m)``."""
        return self.mean + self.scale * (x - self.mean)


class NormalMarginals(Marginals):
    """Gaussian marginals ``Normal(loc, sd)``: every quantity in closed form."""

    def __init__(self, y, observed, loc, sd, scale=None):
        super().__init__(y, observed, loc, scale)
        self.sd = sd

    def _sd(self):
        return self.sd * self.scale

    def pit(self, rng=None):
        return special.ndtr((self.y - self.mean) / self._sd())

    def crps(self):
        return gaussian_crps(self.y, self.mean, self._sd())

    def intervals(self, levels):
        z = special.ndtri((1 + np.asarray(levels, np.float64)) / 2).reshape(-1, 1, 1)
        return np.stack([self.mean - z * self._sd(), self.mean + z * self._sd()])

    def stddev(self):
        return self._sd()

    def nll(self):
        sd = self._sd()
        return 0.5 * np.log(2 * np.pi) + np.log(sd) + 0.5 * ((self.y - self.mean) / sd) ** 2


class DistributionMarginals(Marginals):
    """Marginals of any ``tfp`` distribution ``dist`` with batch shape ``[B, Nt, Dy]``,
    at the real points ``points [B, Nt]`` (bool); ``draws [M, N, Dy]`` from it give the
    CRPS (and the intervals of a family without a quantile function)."""

    def __init__(self, y, observed, dist, points, draws, discrete=False, scale=None):
        mean = np.asarray(dist.mean(), np.float64)[points]
        super().__init__(y, observed, mean, scale)
        self.dist, self.points, self.draws = dist, points, draws
        self.discrete = discrete
        self.has_density = self.can_scale = not discrete

    def _at(self, fn, values):
        """``fn(dist)(full)[points]``: ``fn`` at ``values [N, Dy]`` placed in a full
        ``[B, Nt, Dy]`` array (zeros at the padding)."""
        import tensorflow as tf

        full = np.zeros(self.points.shape + (self.dim_y,), np.float64)
        full[self.points] = values
        return np.asarray(fn(tf.constant(full, self.dist.dtype)), np.float64)[self.points]

    def pit(self, rng):
        if not self.discrete:
            return self._at(self.dist.cdf, self.mean + (self.y - self.mean) / self.scale)
        # randomised PIT of an integer-valued family: uniform on [F(y - 1), F(y)]
        upper = self._at(self.dist.cdf, self.y)
        lower = self._at(self.dist.cdf, self.y - 1)
        return lower + rng.uniform(size=upper.shape) * (upper - lower)

    def crps(self):
        return ensemble_crps(self._spread(self.draws), self.y)

    def intervals(self, levels):
        import tensorflow as tf

        probs = [(1 - np.asarray(levels)) / 2, (1 + np.asarray(levels)) / 2]
        base = getattr(self.dist, "distribution", self.dist)
        try:
            bounds = np.stack([[np.asarray(base.quantile(tf.cast(p, base.dtype)), np.float64)[self.points]
                                for p in side] for side in probs])
        except NotImplementedError:
            return self._spread(np.stack([np.quantile(self.draws, p, axis=0) for p in probs]))
        return self._spread(bounds)

    def stddev(self):
        return self.scale * np.asarray(self.dist.stddev(), np.float64)[self.points]

    def nll(self):
        if self.discrete:
            return -self._at(self.dist.log_prob, self.y)
        logp = self._at(self.dist.log_prob, self.mean + (self.y - self.mean) / self.scale)
        return np.log(self.scale) - logp


class SampleMarginals(Marginals):
    """Marginals given by draws ``samples [S, N, Dy]`` (joint forecast paths, read per point)."""

    has_density = False

    def __init__(self, y, observed, samples, scale=None):
        samples = np.asarray(samples, np.float64)
        super().__init__(y, observed, samples.mean(0), scale)
        self.samples = samples

    def pit(self, rng):
        return randomized_rank_pit(self._spread(self.samples), self.y, rng)

    def crps(self):
        return ensemble_crps(self._spread(self.samples), self.y)

    def intervals(self, levels):
        probs = [(1 - np.asarray(levels)) / 2, (1 + np.asarray(levels)) / 2]
        x = self._spread(self.samples)
        return np.stack([np.quantile(x, p, axis=0) for p in probs])

    def stddev(self):
        return self.scale * self.samples.std(0)

    def nll(self):
        return None


def _is_discrete(dist, likelihood=None):
    import tensorflow_probability as tfp

    tfd = tfp.distributions
    base = getattr(dist, "distribution", dist)
    return (getattr(likelihood, "support", None) is not None
            or isinstance(base, (tfd.Bernoulli, tfd.Categorical, tfd.Poisson, tfd.Binomial))
            or not dist.dtype.is_floating)


def marginals_of_distribution(dist, y, observed, points, num_draws=DEFAULT_DRAWS, seed=0, likelihood=None):
    """The :class:`Marginals` of a ``tfp`` distribution ``dist`` (batch shape ``[B, Nt, Dy]``)
    at the real points ``points [B, Nt]`` of ``y``/``observed [B, Nt, Dy]``: Gaussian in
    closed form, any other family through its CDF and ``num_draws`` draws."""
    import tensorflow_probability as tfp

    y, observed = np.asarray(y, np.float64)[points], np.asarray(observed, bool)[points]
    if isinstance(dist, tfp.distributions.Normal):
        return NormalMarginals(y, observed, np.asarray(dist.loc, np.float64)[points],
                               np.asarray(dist.scale, np.float64)[points])
    draws = np.asarray(dist.sample(num_draws, seed=seed), np.float32)[:, points]
    return DistributionMarginals(y, observed, dist, points, draws, _is_discrete(dist, likelihood))


def check_mode(model, teacher_forced):
    """The calibration mode of ``model``: ``predictive`` (conditional), ``sampled``
    (autoregressive, multi-step) or ``teacher-forced`` (autoregressive, when asked)."""
    autoregressive = getattr(model, "causal", False)
    if teacher_forced and not autoregressive:
        raise SpecError(f"calibration 'teacher_forced' applies to autoregressive models only; "
                        f"{model.name!r} is a conditional model")
    return "teacher-forced" if teacher_forced else "sampled" if autoregressive else "predictive"


def batch_marginals(model, batch, mode, num_samples=DEFAULT_SAMPLES, num_draws=DEFAULT_DRAWS, seed=0):
    """:class:`Marginals` of ``model`` on ``batch`` in ``mode`` (:func:`check_mode`)."""
    from taylorformer.batch import with_masks

    masked = with_masks(batch)
    points = np.asarray(masked["mask_t"]) > 0.5
    y, observed = np.asarray(masked["yt"], np.float64), np.asarray(masked["observed_t"]) > 0.5
    if mode == "sampled":
        samples = np.asarray(model.sample(batch, num_samples, seed=seed), np.float64)
        return SampleMarginals(y[points], observed[points], samples[:, points])
    dist = model.distribution(batch)  # a conditional predictive, or teacher-forced conditionals
    return marginals_of_distribution(dist, y, observed, points, num_draws, seed, model.likelihood)


def collect(model, task, split="test", mode=None, batch_size=16, num_batches=None,
            num_samples=DEFAULT_SAMPLES, num_draws=DEFAULT_DRAWS, seed=0):
    """The :class:`Marginals` of every batch of ``task``'s ``split`` (a list)."""
    mode = check_mode(model, False) if mode is None else mode
    check_int("calibration", "num_samples", num_samples, minimum=2)
    check_int("calibration", "num_draws", num_draws, minimum=2)
    out = [batch_marginals(model, batch, mode, num_samples, num_draws, seed=[seed, i])
           for i, batch in enumerate(task.dataset(split, batch_size=batch_size, num_batches=num_batches))]
    if not out:
        raise ValueError(f"task split {split!r} produced no batches")
    return out


# ----------------------------------------------------------------------------- the report
def summarize(marginals, levels=LEVELS, bins=PIT_BINS, seed=0, units=None):
    """The calibration report of a list of :class:`Marginals`, pooled over every observed
    value: ``num_values``, ``pit`` (``counts`` per bin of ``[0, 1]``, the ``mean``: 0.5 when
    calibrated, below where the forecasts run high, above where they run low; the Kolmogorov-Smirnov
    statistic and p-value against U(0, 1): only indicative, values of one task are
    correlated), ``coverage`` (``levels``, ``observed`` fractions inside the central
    intervals, their ``mean_abs_error``), ``crps``, ``sharpness`` (``mean_stddev``,
    ``mean_width`` per level) and ``nll`` (mean per value; None without a density).
    ``units [Dy]``: the factors ``s`` from model to data units (a normaliser's ``y_scale``):
    CRPS and sharpness are multiplied by them and each value's NLL gains ``log s`` (change
    of variables ``y = offset + s z``), so every figure is in data units; PIT and coverage
    have none."""
    rng = np.random.default_rng(seed)
    levels = [float(a) for a in levels]
    pits, crps, sds, widths, nlls = [], [], [], [], []
    unit = np.ones(marginals[0].dim_y) if units is None else np.asarray(units, np.float64)
    for m in marginals:
        obs = m.observed
        pits.append(m.pit(rng)[obs])
        crps.append((m.crps() * unit)[obs])
        sds.append((m.stddev() * unit)[obs])
        lo, hi = m.intervals(levels)
        widths.append(((hi - lo) * unit)[:, obs])
        nll = m.nll() if m.has_density else None
        nlls.append(None if nll is None else (nll + np.log(unit))[obs])
    pit = np.concatenate(pits)
    if pit.size == 0:
        raise ValueError("no observed target values to assess calibration on")
    covered = [float(np.mean((pit >= (1 - a) / 2) & (pit <= (1 + a) / 2))) for a in levels]
    ks = stats.kstest(pit, "uniform")
    return {
        "num_values": int(pit.size),
        "pit": {"bins": bins, "counts": np.histogram(pit, bins, (0.0, 1.0))[0].tolist(),
                "mean": float(pit.mean()), "ks_statistic": float(ks.statistic), "ks_pvalue": float(ks.pvalue)},
        "coverage": {"levels": levels, "observed": covered,
                     "mean_abs_error": float(np.mean(np.abs(np.subtract(covered, levels))))},
        "crps": float(np.concatenate(crps).mean()),
        "sharpness": {"mean_stddev": float(np.concatenate(sds).mean()),
                      "mean_width": np.concatenate(widths, 1).mean(1).tolist()},
        "nll": None if any(n is None for n in nlls) else float(np.concatenate(nlls).mean()),
    }


# ----------------------------------------------------------------------------- recalibration
def _criterion(marginals):
    if not all(m.can_scale for m in marginals):
        raise SpecError("spread-scale recalibration needs a continuous predictive; this model's "
                        "likelihood is discrete")
    return "nll" if all(m.has_density for m in marginals) else "crps"


def fit_spread_scale(marginals):
    """``(scale [Dy], criterion)``: per output, the spread scale ``s`` in
    :data:`SPREAD_SCALE_RANGE` minimising the mean NLL over the observed values of ``marginals`` (the mean CRPS for
    draws, which have no density). Outputs never observed keep ``s = 1``."""
    criterion = _criterion(marginals)
    dim_y = marginals[0].dim_y
    scale = np.ones(dim_y)
    for d in range(dim_y):
        if not any(m.observed[:, d].any() for m in marginals):
            continue

        def loss(log_s, d=d):
            s = np.ones(dim_y)
            s[d] = np.exp(log_s)
            total = count = 0.0
            for m in marginals:
                obs = m.observed[:, d]
                scaled = m.with_scale(s)
                values = (scaled.nll() if criterion == "nll" else scaled.crps())[:, d][obs]
                total, count = total + values.sum(), count + obs.sum()
            return total / count

        found = optimize.minimize_scalar(loss, bounds=np.log(SPREAD_SCALE_RANGE), method="bounded",
                                         options={"xatol": 1e-5})
        scale[d] = float(np.clip(np.exp(found.x), *SPREAD_SCALE_RANGE))  # exp(log(b)) may round past b
    return scale, criterion


def apply_spread_scale(result, scale):
    """A :func:`taylorformer.prediction.query.predict_query` result with the spread scale ``scale [Dy]``
    applied about its ``mean``: ``stddev * s``, ``quantiles`` and ``samples`` moved to
    ``mean + s (x - mean)``; ``spread_scale [Dy]`` records it. Exact for any continuous
    predictive (an affine map keeps quantiles quantiles)."""
    scale = np.asarray(scale, np.float32)
    mean = np.asarray(result["mean"])
    out = dict(result)
    out["stddev"] = np.asarray(result["stddev"]) * scale
    for key in ("quantiles", "samples"):
        if key in result:
            out[key] = mean + scale * (np.asarray(result[key]) - mean)
    out["spread_scale"] = scale
    return out


def model_fingerprint(path):
    """sha256 of the model file a recalibration was fitted on (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _outputs_of(run_dir):
    """The model's number of outputs (``dim_y``) as the run's ``spec.json`` records it;
    None where the run has no readable spec.json (its model file is checked on loading)."""
    try:
        with open(os.path.join(run_dir, "spec.json"), encoding="utf-8") as fh:
            dim_y = json.load(fh).get("dim_y")
    except (OSError, ValueError, AttributeError):
        return None
    return dim_y if isinstance(dim_y, int) and not isinstance(dim_y, bool) else None


def _read_file(run_dir):
    path = os.path.join(run_dir, RECALIBRATION_FILE)
    if not os.path.lexists(path):
        return path, {}
    if not os.path.isfile(path):
        raise RunDirectoryError(f"{path} is not a file (a directory, or a link to nothing); remove it, "
                                "or fit the recalibration again (taylorformer evaluate RUN --recalibrate)")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise RunDirectoryError(f"{path} is corrupt: {exc}") from None
    if not isinstance(data, dict):
        raise RunDirectoryError(f"{path} is corrupt: holds a JSON {type(data).__name__}, expected an object")
    return path, data


def save_recalibration(run_dir, checkpoint, record, to=None):
    """Store ``record`` as the recalibration of ``checkpoint`` in ``RUN_DIR/calibration.json``
    (atomically; the other checkpoint's entry is kept), or write that file's new text to
    ``to`` (a temp name that :class:`taylorformer.files.Outputs` renames into place). Returns
    the path."""
    from taylorformer.files import atomic_write_text

    path, data = _read_file(run_dir)
    data[checkpoint] = record
    atomic_write_text(path if to is None else to, json.dumps(data, indent=2, allow_nan=False) + "\n")
    return path


def load_recalibration(run_dir, checkpoint):
    """The recalibration record of ``checkpoint`` (None where none is stored). A
    :class:`RunDirectoryError` names the file when it is not a file, when the record is
    malformed (a scale outside :data:`SPREAD_SCALE_RANGE`, which no fit produces) or was
    fitted on another model file than the run's ``{checkpoint}.keras`` now (retrained or
    resumed)."""
    path, data = _read_file(run_dir)
    record = data.get(checkpoint)
    if record is None:
        return None
    scale = record.get("scale") if isinstance(record, dict) else None
    low, high = SPREAD_SCALE_RANGE
    if not (isinstance(scale, list) and scale and all(isinstance(s, (int, float)) and not isinstance(s, bool)
                                                      and low <= s <= high for s in scale)):
        raise RunDirectoryError(f"{path} is corrupt: entry {checkpoint!r} needs 'scale', a list of "
                                f"numbers in [{low:g}, {high:g}] (the range a fit produces), got {scale!r}")
    dim_y = _outputs_of(run_dir)
    if dim_y is not None and len(scale) != dim_y:
        raise RunDirectoryError(f"{path} is corrupt: entry {checkpoint!r} holds {len(scale)} scale(s) for the "
                                f"model's {dim_y} output(s); a fit gives one per output")
    model_path = os.path.join(run_dir, f"{checkpoint}.keras")
    if not os.path.isfile(model_path) or model_fingerprint(model_path) != record.get("model_sha256"):
        raise RunDirectoryError(
            f"{path}: the recalibration of {checkpoint!r} was fitted on another {checkpoint}.keras than "
            f"the one in {run_dir} now; fit it again (taylorformer evaluate {run_dir} --recalibrate) "
            "or predict without it (--no-recalibration)")
    return record


def data_units(normaliser):
    """``(factors [Dy], "data")``: the per-output spread factors from model units to data
    units (a :class:`~taylorformer.normaliser.Normaliser`'s ``y_scale``) for
    :func:`summarize`, whose CRPS, sharpness and NLL are then in data units; ``(None,
    "model")`` without a normaliser or for an identity one."""
    if normaliser is None or normaliser.identity_y:
        return None, "model"
    return np.asarray(normaliser.y_scale, np.float64), "data"
