"""Gaussian-process regression tasks (plugin ``builtin-gp``, kind ``task``).

Registered names:

``gp``
    :class:`GPTask`, configurable. Its defaults are the quick 1-D demo task: EQ kernel,
    lengthscale ~ U[0.3, 1], scale 1, noise 0.05, x ~ U[-2, 2], Nc ~ U{3..32}, Nt = 32.
``gp-taylorformer``
    Taylorformer paper (Appendix A): x ~ U[-2, 2], Nc ~ U{3..97}, Nt = 100 - Nc, one
    kernel per task family chosen by ``kernel`` ("eq" default, "matern52", "periodic").
``gp-te-tnp``
    TE-TNP paper (Sec. F.1): kernel per task from EQ, Matern-1/2, -3/2, -5/2, periodic;
    lengthscale (periodic: period) log-U[0.25, 4]; noise 0.2; Nc ~ U{1..64}, Nt = 128,
    xc ~ U[-2, 2], xt ~ U[-3, 3]; ``shift`` = the test-time Delta.
``gp-tnp``
    TNP (Nguyen & Grover 2022) public code, inherited from Lee et al. (2020): x ~ U[-2, 2],
    Nc ~ U{3..46}, Nt ~ U{3..49 - Nc}, EQ l ~ U[0.1, 0.6], s ~ U[0.1, 1], noise 0.02.

Sampling is NumPy float64 (:mod:`taylorformer.tasks.gaussian_process`: Cholesky of the
joint covariance plus a jitter); the batch is float32. Each batch also carries the exact GP log-likelihood of its targets
under the task's true hyperparameters, per real target point: ``gt_loglik`` (product
of marginals, the ceiling of conditional NPs) and ``gt_loglik_joint`` (joint density,
the ceiling of autoregressive NPs).
"""
import functools
import math

import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError
from taylorformer.hookspecs import hookimpl
from taylorformer.task import (Task, box_config, check_dim_x, check_number, count_range, input_box,
                               input_shift, real_pair, split_names)
from taylorformer.tasks.gaussian_process import KERNEL_ALIASES, KERNELS, canonical_kernel, gp_predictive, sample_gp

#: prior families: ``{"uniform": [a, b]}``, ``{"loguniform": [a, b]}``, ``{"beta": [a, b]}``
PRIORS = ("uniform", "loguniform", "beta")
#: hyperparameters with a prior, and the kernels that use each
HYPERPARAMETERS = {"lengthscale": KERNELS, "scale": KERNELS, "period": ("periodic",)}


# ----------------------------------------------------------------------------- config
#: allowed values of a hyperparameter (fixed, or the support of a uniform/loguniform prior):
#: positive, and small enough that scale^2 and the draws stay far inside float32
HYPERPARAMETER_RANGE = (1e-6, 1e6)
#: allowed parameters a, b of a beta prior (smaller ones draw exact zeros)
BETA_RANGE = (0.1, 1e6)
#: largest observation noise std
MAX_NOISE = 1e6


def _prior(field, spec, owner):
    """Validated prior: a number in :data:`HYPERPARAMETER_RANGE` (fixed) or ``{family: [a, b]}``."""
    low, high = HYPERPARAMETER_RANGE
    fixed = isinstance(spec, (int, float)) and not isinstance(spec, bool)
    if not (fixed and math.isfinite(spec) and low <= spec <= high) and not (
            isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in PRIORS):
        raise TaskError(f"{owner} {field!r} must be a positive number in [{low:g}, {high:g}] or a "
                        f"dict with one key of {list(PRIORS)} and value [a, b], got {spec!r}")
    if fixed:
        return float(spec)
    family, bounds = next(iter(spec.items()))
    if family == "beta":
        return {family: list(real_pair(f"{field}: beta", bounds, *BETA_RANGE, owner, ordered=False))}
    return {family: list(real_pair(f"{field}: {family}", bounds, low, high, owner))}


def _priors(field, spec, kernels, owner):
    """``(config value, {kernel: prior})``; ``spec`` may map kernel names to priors."""
    used = [k for k in kernels if k in HYPERPARAMETERS[field]]
    if isinstance(spec, dict) and spec and all(k in KERNELS or k in KERNEL_ALIASES for k in spec):
        per_kernel = {canonical_kernel(k): _prior(f"{field}[{k!r}]", v, owner) for k, v in spec.items()}
        missing = [k for k in used if k not in per_kernel]
        if missing:
            raise TaskError(f"{owner} {field!r} gives no prior for kernel(s) {missing}")
        return per_kernel, per_kernel
    prior = _prior(field, spec, owner)
    return prior, {k: prior for k in used}


def _draw(prior, rng):
    if isinstance(prior, float):
        return prior
    (family, (a, b)), = prior.items()
    if family == "uniform":
        return float(rng.uniform(a, b))
    if family == "loguniform":
        return float(math.exp(rng.uniform(math.log(a), math.log(b))))
    return float(rng.beta(a, b))


# ----------------------------------------------------------------------------- task
#: per-task exact-GP ceilings a GP-style batch carries, each ``[B]`` float32
CEILING_KEYS = ("gt_loglik", "gt_loglik_joint")


#: per-task hyperparameters a :class:`GPTask` batch carries, each ``[B]`` float32 (the
#: kernel as its index in :data:`KERNELS`): what the exact GP beside a plot needs
HYPERPARAMETER_KEYS = ("gp_kernel", "gp_lengthscale", "gp_scale", "gp_period")


def gp_memory_estimate(task, batch_size, dim):
    """``Task.memory_estimate`` of an exact-GP task with ``dim``-dimensional kernel inputs:
    the padded batch plus ``8 (Nc + Nt)^2 (2 dim + 4)`` bytes, the float64 ``N x N`` arrays
    alive at once while one task is drawn (pairwise differences and their squares, ``2 dim``;
    the covariance, its Cholesky factor and two temporaries)."""
    batch, formula = Task.memory_estimate(task, batch_size)
    n = task.max_context + task.max_target
    return batch + 8 * n * n * (2 * dim + 4), (f"{formula}, plus the exact-GP working set "
                                               f"8 (Nc + Nt)^2 (2 D + 4) bytes with D = {dim}")


def ceiling_signature():
    """``tf.TensorSpec`` of the per-task ceilings (:data:`CEILING_KEYS`)."""
    import tensorflow as tf

    return {key: tf.TensorSpec([None], tf.float32) for key in CEILING_KEYS}


class GPTask(Task):
    """Samples from a zero-mean GP prior with random hyperparameters, one draw per task.

    Config (keyword arguments; every one is in :meth:`get_config`):

    * ``dim_x``: input dimension (``dim_y`` is 1);
    * ``kernel``: a name of :data:`KERNELS` (``"rbf"`` = ``"eq"``) or a list, one chosen
      uniformly per task;
    * ``lengthscale`` (default U[0.3, 1]), ``scale``, ``period``: a positive float
      (fixed), a prior ``{"uniform" | "loguniform" | "beta": [a, b]}``, or a dict
      kernel name -> either (``period`` is used by ``periodic`` only);
    * ``noise``: observation noise std; ``noise_on``: ``"both"`` or ``"context"``;
    * ``num_context`` (``lo >= 0``), ``num_target`` (``lo >= 1``): int or ``[lo, hi]``;
      ``num_total``: optional int or ``[lo, hi]`` bounding ``Nc + Nt``. ``Nt`` is uniform
      over the values allowed by both (``num_total=100`` gives ``Nt = 100 - Nc``);
    * ``context_range``, ``target_range``: input boxes, ``[lo, hi]`` for every dim or one
      pair per dim (``target_range=None`` copies ``context_range``);
    * ``shift``: scalar or ``[Dx]`` Delta added to all inputs in ``shift_splits``.

    Batches are padded to the largest ``Nc``/``Nt`` the config allows (static shapes)
    with ``mask_c``/``mask_t``; padded entries are 0.

    Allowed values: hyperparameters (and uniform/loguniform bounds) in
    :data:`HYPERPARAMETER_RANGE`, beta parameters in :data:`BETA_RANGE`, ``noise`` in
    ``[0, MAX_NOISE]``, finite boxes and shifts within ``MAX_INPUT``; anything else is a
    :class:`TaskError` at construction, as is a size whose exact GP cannot fit in memory.
    """

    name = "gp"
    dim_y = 1

    def __init__(self, *, dim_x=1, kernel="eq", lengthscale=None, scale=1.0, period=1.0,
                 noise=0.05, noise_on="both", num_context=(3, 32), num_target=32,
                 num_total=None, context_range=(-2.0, 2.0), target_range=None, shift=0.0,
                 shift_splits=("test",)):
        owner = f"{self.name} task"
        check_dim_x(dim_x, owner=owner)
        self.dim_x = dim_x
        names = [kernel] if isinstance(kernel, str) else kernel
        if not (isinstance(names, (list, tuple)) and names and all(isinstance(k, str) for k in names)):
            raise TaskError(f"{owner} 'kernel' must be a kernel name or a non-empty list of them "
                            f"({', '.join(KERNELS)}), got {kernel!r}")
        self.kernels = [canonical_kernel(k) for k in names]
        if lengthscale is None:
            lengthscale = {"uniform": [0.3, 1.0]}
        self._config = {}
        self._priors = {}
        for field, spec in (("lengthscale", lengthscale), ("scale", scale), ("period", period)):
            self._config[field], self._priors[field] = _priors(field, spec, self.kernels, owner)
        self.noise = check_number(owner, "noise", noise, 0.0, MAX_NOISE)
        if noise_on not in ("both", "context"):
            raise TaskError(f"{owner} 'noise_on' must be 'both' or 'context', got {noise_on!r}")
        self.noise_on = noise_on
        self.num_context = count_range("num_context", num_context, 0, owner=owner)
        self.num_target = count_range("num_target", num_target, 1, owner=owner)
        self.num_total = None if num_total is None else count_range("num_total", num_total, 1, owner=owner)
        self.max_context = self.num_context[1]
        for nc in self.num_context:  # Nt bounds are linear in Nc: checking the ends suffices
            if self._target_bounds(nc)[0] > self._target_bounds(nc)[1]:
                raise TaskError(f"{owner}: no Nt fits num_target={list(self.num_target)} and "
                                f"num_total={list(self.num_total)} when Nc = {nc} "
                                f"(num_context={list(self.num_context)})")
        self.max_target = self._target_bounds(self.num_context[0])[1]
        self.context_box = input_box("context_range", context_range, dim_x, owner=owner)
        self.target_box = self.context_box if target_range is None else input_box(
            "target_range", target_range, dim_x, owner=owner)
        self.shift, self._shift_config = input_shift(shift, dim_x, owner=owner)
        self.shift_splits = split_names("shift_splits", shift_splits, owner=owner)
        self.check_memory()

    def _target_bounds(self, nc):
        """Allowed ``[lo, hi]`` of ``Nt`` given ``Nc`` (both bounds decrease with ``Nc``)."""
        t_lo, t_hi = self.num_target
        if self.num_total is not None:
            t_lo, t_hi = max(t_lo, self.num_total[0] - nc), min(t_hi, self.num_total[1] - nc)
        return t_lo, t_hi

    def sample_hyperparameters(self, rng):
        """``(kernel, {"lengthscale", "scale", "period"})`` of one task."""
        kind = self.kernels[rng.integers(len(self.kernels))]
        params = {"lengthscale": 1.0, "scale": 1.0, "period": 1.0}
        for field, priors in self._priors.items():
            if kind in priors:
                params[field] = _draw(priors[kind], rng)
        return kind, params

    def locations(self, rng, nc, nt, split):
        """float32 ``xc [nc, Dx]``, ``xt [nt, Dx]`` of one task (uniform in the boxes, shifted
        on the shifted splits). The GP is evaluated on exactly these float32 values."""
        shift = self.shift if split in self.shift_splits else 0.0
        xc = rng.uniform(self.context_box[:, 0], self.context_box[:, 1], (nc, self.dim_x)) + shift
        xt = rng.uniform(self.target_box[:, 0], self.target_box[:, 1], (nt, self.dim_x)) + shift
        return xc.astype(np.float32), xt.astype(np.float32)

    def sample(self, rng, batch_size, split):
        """Batch dict: ``xc [B, maxNc, Dx]``, ``yc``, ``xt [B, maxNt, Dx]``, ``yt``, masks,
        ``gt_loglik [B]``, ``gt_loglik_joint [B]`` and the hyperparameters
        (:data:`HYPERPARAMETER_KEYS`, ``[B]``), all float32."""
        b = batch_size
        out = empty_batch(b, self.max_context, self.max_target, self.dim_x, 1,
                          CEILING_KEYS + HYPERPARAMETER_KEYS)
        for i in range(b):
            kind, params = self.sample_hyperparameters(rng)
            out["gp_kernel"][i] = KERNELS.index(kind)
            for field, value in params.items():
                out["gp_" + field][i] = value
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            t_lo, t_hi = self._target_bounds(nc)
            nt = int(rng.integers(t_lo, t_hi + 1))
            xc, xt = self.locations(rng, nc, nt, split)
            yc, yt, marginal, joint = sample_gp(rng, xc, xt, kind, **params, noise=self.noise,
                                                noise_on=self.noise_on)
            out["xc"][i, :nc], out["yc"][i, :nc, 0], out["mask_c"][i, :nc] = xc, yc, 1.0
            out["xt"][i, :nt], out["yt"][i, :nt, 0], out["mask_t"][i, :nt] = xt, yt, 1.0
            out["gt_loglik"][i], out["gt_loglik_joint"][i] = marginal, joint
        return out

    def extra_signature(self):
        import tensorflow as tf

        return {**ceiling_signature(), **{key: tf.TensorSpec([None], tf.float32) for key in HYPERPARAMETER_KEYS}}

    def exact_predictive(self, batch, i, xq):
        """The exact GP predictive ``(mean [G], stddev [G])`` at ``xq [G, Dx]`` of task ``i``
        of ``batch`` (NumPy arrays), under the task's true hyperparameters."""
        mc = np.asarray(batch["mask_c"][i]) > 0
        params = {field: float(batch["gp_" + field][i]) for field in ("lengthscale", "scale", "period")}
        return gp_predictive(np.asarray(batch["xc"][i])[mc], np.asarray(batch["yc"][i, :, 0])[mc], xq,
                             KERNELS[int(batch["gp_kernel"][i])], **params, noise=self.noise,
                             noise_on=self.noise_on)

    def plot(self, model, batch, num_tasks=4, num_samples=0, title=None, axes=None):
        """1-D tasks: the model's predictive with the exact GP predictive drawn beside it
        (dashed); otherwise :meth:`Task.plot`."""
        from taylorformer.plotting import plot_predictions

        exact = (functools.partial(self.exact_predictive, batch)
                 if self.dim_x == 1 and "gp_kernel" in batch else None)
        return plot_predictions(model, batch, num_tasks=num_tasks, num_samples=num_samples,
                                title=title, axes=axes, reference=exact)

    def memory_estimate(self, batch_size):
        """The padded batch plus one task's exact-GP working set (tasks are drawn one at a time)."""
        return gp_memory_estimate(self, batch_size, self.dim_x)

    def get_config(self):
        return {
            "dim_x": self.dim_x,
            "kernel": self.kernels[0] if len(self.kernels) == 1 else list(self.kernels),
            **self._config,
            "noise": self.noise,
            "noise_on": self.noise_on,
            "num_context": list(self.num_context),
            "num_target": list(self.num_target),
            "num_total": None if self.num_total is None else list(self.num_total),
            "context_range": box_config(self.context_box),
            "target_range": box_config(self.target_box),
            "shift": self._shift_config,
            "shift_splits": list(self.shift_splits),
        }


# ----------------------------------------------------------------------------- presets
#: Taylorformer Appendix A priors per kernel (periodic with the standard |x - x'|, where
#: the paper prints |x - x'|^2). The paper gives no noise level but reports 4.13 (EQ)
#: and 3.87 (Matern) per target point; our exact joint ceilings are 5.0 / 4.3 with
#: noise 1e-3 and 4.4 / 3.9 with 2e-3, so we use 1e-3.
TAYLORFORMER = {
    "kernel": "eq",
    "lengthscale": {"eq": {"uniform": [0.1, 0.6]}, "matern52": {"uniform": [0.3, 1.0]},
                    "periodic": {"uniform": [0.1, 0.6]}},
    "scale": {"eq": {"uniform": [0.1, 1.0]}, "matern52": 1.0, "periodic": 1.0},
    "period": {"uniform": [0.5, 1.0]},
    "noise": 1e-3,
    "num_context": [3, 97],
    "num_target": [3, 97],
    "num_total": 100,
    "context_range": [-2.0, 2.0],
}

#: TE-TNP Sec. F.1 with the kernel set of its public code (cambridge-mlg/tnp). There the
#: periodic kernel takes the sampled value as its period and keeps gpytorch's default
#: lengthscale (ln 2 in gpytorch's parametrisation, i.e. sqrt(ln 2) here).
_TE_TNP_LENGTHSCALE = {"loguniform": [0.25, 4.0]}
TE_TNP = {
    "kernel": list(KERNELS),
    "lengthscale": {**{k: _TE_TNP_LENGTHSCALE for k in KERNELS[:-1]},
                    "periodic": math.sqrt(math.log(2.0))},
    "scale": 1.0,
    "period": _TE_TNP_LENGTHSCALE,
    "noise": 0.2,
    "num_context": [1, 64],
    "num_target": 128,
    "context_range": [-2.0, 2.0],
    "target_range": [-3.0, 3.0],
    "shift": 0.0,
}

#: TNP-pytorch ``regression/data/gp.py`` (``GPSampler(RBFKernel())``, max_num_points=50):
#: Nc = randint(3, 47), Nt = randint(3, 50 - Nc) (upper bounds exclusive).
TNP = {
    "kernel": "eq",
    "lengthscale": {"uniform": [0.1, 0.6]},
    "scale": {"uniform": [0.1, 1.0]},
    "noise": 0.02,
    "num_context": [3, 46],
    "num_target": [3, 46],
    "num_total": [6, 49],
    "context_range": [-2.0, 2.0],
}


@hookimpl
def register_tasks(register):
    register("gp", GPTask, description="Configurable GP regression task (default: quick 1-D EQ demo).")
    register("gp-taylorformer", functools.partial(GPTask, **TAYLORFORMER),
             description="Taylorformer 1-D GP protocol; kernel='eq'|'matern52'|'periodic'.")
    register("gp-te-tnp", functools.partial(GPTask, **TE_TNP),
             description="TE-TNP 1-D GP protocol (5 kernels, noise 0.2); shift=Delta on test.")
    register("gp-tnp", functools.partial(GPTask, **TNP),
             description="TNP (Nguyen & Grover) 1-D EQ GP protocol, Nc+Nt <= 49.")
