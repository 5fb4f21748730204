"""A GP prior fitted to one survey, and tasks simulated from it (plugin ``builtin-fitted-gp``,
kind ``task``).

``fitted-gp`` (:class:`FittedGPTask`) is for a single spatial survey, a CSV file of a few
dozen to a few hundred points (input columns ``x_columns``, one output
``target_columns``): too few sets to meta-train on the survey itself, which a model then
memorises. Instead:

1. A GP prior is fitted to the survey by maximum marginal likelihood
   (:func:`taylorformer.tasks.gaussian_process.fit_gp_prior`): a radial kernel
   (``kernel``: one of :data:`~taylorformer.tasks.gaussian_process.RADIAL_KERNELS`, or
   ``"auto"``, the one whose maximised marginal likelihood is largest), one lengthscale
   (or one per input, ``per_input``), the signal and noise variances (the noise at least
   ``noise_floor`` of the survey's variance) and a constant mean. ``prior`` gives those
   values instead of fitting them; :meth:`FittedGPTask.get_config` records the fitted ones
   there, so a run rebuilds the same task without fitting again.
2. Each task is a draw of that prior: ``Nc ~ U{num_context}`` context points (with
   probability ``survey_context`` a random subset of the survey's own locations, else
   uniform in the padded domain) and ``Nt ~ U{num_target}`` targets uniform in the padded
   domain: the survey's bounding box widened by ``pad`` of its extent on every side.
   Batches carry the exact GP ceilings ``gt_loglik`` / ``gt_loglik_joint`` of
   :mod:`taylorformer.tasks.gp`; val/test batches use fixed seeds.
3. The model works in standardised units, recorded in its normaliser: ``x_model = (x -
   centre) / x_scale`` with the padded box's centre and one scale for every input (half
   its largest half-width, so the box lies within [-2, 2] and an isotropic kernel stays
   isotropic), ``y_model = (y - mean) / sqrt(variance + noise variance)``. The inputs and
   output keep the survey's column names (and ``units``), so ``taylorformer predict RUN
   --input POINTS.csv --context SURVEY.csv`` (or ``--grid``) conditions on the survey in
   its own units.
"""
import math
import sys
from pathlib import Path

import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError, close_matches
from taylorformer.hookspecs import hookimpl
from taylorformer.task import MAX_INPUT, Task, check_bool, check_choice, check_number, count_range
from taylorformer.tasks.csv_series import listed_rows, resolve_path
from taylorformer.tasks.gaussian_process import (KERNEL_ALIASES, RADIAL_KERNELS, canonical_kernel, fit_gp_prior,
                                                  sample_gp)
from taylorformer.tasks.gp import CEILING_KEYS, ceiling_signature, gp_memory_estimate

#: fewest survey points a prior is fitted to (a lengthscale, two variances and a mean)
MIN_POINTS = 10
#: targets per simulated task by default
DEFAULT_TARGETS = 64
#: keys of a given ``prior`` (data units; ``lengthscale`` a number or one per input)
PRIOR_KEYS = ("kernel", "lengthscale", "variance", "noise_variance", "mean")
OWNER = "fitted-gp task"


def read_survey(path, x_columns, target_columns):
    """``(x [n, D], y [n], resolved path)`` float64 of the survey CSV ``path``; a
    :class:`TaskError` naming the file for a missing file or column, non-numeric or
    non-finite values (with their rows) or fewer than :data:`MIN_POINTS` points."""
    import pandas as pd

    if not isinstance(path, str) or not path:
        raise TaskError(f"{OWNER} 'path' must be the survey's CSV file name, got {path!r}")
    found = resolve_path(path)
    try:
        frame = pd.read_csv(found)
    except pd.errors.EmptyDataError:
        raise TaskError(f"{OWNER}: survey file {path} is empty: it needs a header row and one row per point") from None
    except (ValueError, OSError) as exc:
        raise TaskError(f"{OWNER}: cannot read survey file {path} as CSV: {type(exc).__name__}: {exc}") from None
    frame.columns = [str(c) for c in frame.columns]
    columns = {}
    for role, names in (("x_columns", x_columns), ("target_columns", target_columns)):
        for name in names:
            if name not in frame.columns:
                close = close_matches(name, list(frame.columns))
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                raise TaskError(f"{OWNER}: survey file {path} has no column {name!r} ({role}){hint} "
                                f"Columns: {list(frame.columns)}")
            values = pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64)
            text = np.flatnonzero(np.isnan(values) & frame[name].notna().to_numpy())
            if text.size:
                raise TaskError(f"{OWNER}: survey file {path} column {name!r} holds {text.size} non-numeric "
                                f"value(s), the first {frame[name].iloc[text[0]]!r}, in row(s) {listed_rows(text)} "
                                "(0-based, header excluded)")
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                raise TaskError(f"{OWNER}: survey file {path} column {name!r} holds {bad.size} missing or "
                                f"infinite value(s), in row(s) {listed_rows(bad)} (0-based, header excluded); "
                                "drop or fill those rows first")
            columns[name] = values
    if len(frame) < MIN_POINTS:
        raise TaskError(f"{OWNER}: survey file {path} has {len(frame)} point(s); fitting a GP prior needs at "
                        f"least {MIN_POINTS}")
    x = np.stack([columns[c] for c in x_columns], -1)
    if np.abs(x).max() > MAX_INPUT:
        raise TaskError(f"{OWNER}: survey file {path} has coordinates beyond +-{MAX_INPUT:g}: shift or rescale "
                        "them (float32 inputs keep 7 digits)")
    if not np.ptp(x, 0).max() > 0:
        raise TaskError(f"{OWNER}: every point of survey file {path} is at the same place: no spatial extent "
                        "to fit a lengthscale to")
    if not np.ptp(columns[target_columns[0]]) > 0:
        raise TaskError(f"{OWNER}: column {target_columns[0]!r} of survey file {path} is constant: no "
                        "variation to fit a GP prior to")
    return x, columns[target_columns[0]], found


def _column_names(key, value):
    names = [value] if isinstance(value, str) else value
    if not (isinstance(names, (list, tuple)) and names and all(isinstance(c, str) and c for c in names)):
        raise TaskError(f"{OWNER} {key!r} must be a column name or a non-empty list of them, got {value!r}")
    if len(set(names)) != len(names):
        raise TaskError(f"{OWNER} {key!r} names a column twice: {list(names)}")
    return list(names)


def _given_prior(prior, dim_x):
    """The ``prior`` dict of the config checked (:data:`PRIOR_KEYS`), lengthscale as ``[1]``
    or ``[Dx]``."""
    if not (isinstance(prior, dict) and set(PRIOR_KEYS) <= set(prior) <= set(PRIOR_KEYS) | {"log_marginal"}):
        raise TaskError(f"{OWNER} 'prior' must be a dict with keys {list(PRIOR_KEYS)} (data units; optionally "
                        f"'log_marginal'), got {prior!r:.200}")
    kernel = canonical_kernel(prior["kernel"])
    if kernel not in RADIAL_KERNELS:
        raise TaskError(f"{OWNER} 'prior' kernel must be one of {list(RADIAL_KERNELS)}, got {prior['kernel']!r}")
    ls = prior["lengthscale"]
    ls = [ls] if not isinstance(ls, (list, tuple)) else list(ls)
    if len(ls) not in (1, dim_x):
        raise TaskError(f"{OWNER} 'prior' lengthscale must be one number or {dim_x} (one per input), got {ls!r}")
    out = {"kernel": kernel,
           "lengthscale": np.array([check_number(OWNER, "prior: lengthscale", v, 0.0, None, low_open=True)
                                    for v in ls]),
           "variance": check_number(OWNER, "prior: variance", prior["variance"], 0.0, None, low_open=True),
           "noise_variance": check_number(OWNER, "prior: noise_variance", prior["noise_variance"], 0.0, None,
                                          low_open=True),
           "mean": check_number(OWNER, "prior: mean", prior["mean"])}
    if "log_marginal" in prior:
        out["log_marginal"] = prior["log_marginal"]
    return out


def select_prior(x, y, kernel="auto", per_input=False, noise_floor=1e-2):
    """``(prior, {kernel: log marginal likelihood})``: the GP prior of ``kernel`` fitted to
    ``y [n]`` at ``x [n, D]`` (:func:`~taylorformer.tasks.gaussian_process.fit_gp_prior`),
    or for ``"auto"`` the best of :data:`RADIAL_KERNELS` by maximised marginal likelihood
    (each has the same number of parameters)."""
    kernels = RADIAL_KERNELS if kernel == "auto" else (canonical_kernel(kernel),)
    fits = {k: fit_gp_prior(x, y, k, per_input=per_input, noise_floor=noise_floor, maxiter=200) for k in kernels}
    best = max(fits, key=lambda k: fits[k]["log_marginal"])
    return fits[best], {k: fit["log_marginal"] for k, fit in fits.items()}


def describe_prior(prior, names, tried=None):
    """One line: the prior's kernel, lengthscale(s) per input name, variances, mean (data
    units) and, where ``tried``, the log marginal likelihood of each kernel tried."""
    ls = np.asarray(prior["lengthscale"]).reshape(-1)
    scales = (f"lengthscale {ls[0]:.4g}" if ls.size == 1
              else "lengthscales " + ", ".join(f"{n} {v:.4g}" for n, v in zip(names, ls)))
    text = (f"kernel {prior['kernel']}, {scales}, variance {prior['variance']:.4g}, noise variance "
            f"{prior['noise_variance']:.4g}, mean {prior['mean']:.4g}")
    if tried:
        text += " (log marginal likelihood " + ", ".join(f"{k} {v:.2f}" for k, v in tried.items()) + ")"
    return text


class FittedGPTask(Task):
    """Tasks simulated from a GP prior fitted to one survey (see the module docstring).

    Config: ``path`` (CSV), ``x_columns`` (the inputs, e.g. ``["x", "y"]``),
    ``target_columns`` (one output column), ``units`` (``{column: unit}``, optional),
    ``kernel`` (``"auto"`` or a radial kernel), ``per_input`` (one lengthscale per input),
    ``noise_floor`` (least noise variance, a share of the survey's variance), ``prior``
    (the hyperparameters in data units instead of a fit), ``pad`` (share of the survey's
    extent added on every side of the domain), ``num_context`` (default ``[1, n]``, ``n``
    the survey's points), ``num_target`` (default :data:`DEFAULT_TARGETS`) and
    ``survey_context`` (probability that a task's context sits at survey locations).
    """

    name = "fitted-gp"
    dim_y = 1

    def __init__(self, *, path, x_columns, target_columns, units=None, kernel="auto", per_input=False,
                 noise_floor=1e-2, prior=None, pad=0.2, num_context=None, num_target=DEFAULT_TARGETS,
                 survey_context=0.5):
        self.x_columns = _column_names("x_columns", x_columns)
        self.target_columns = _column_names("target_columns", target_columns)
        if len(self.target_columns) != 1:
            raise TaskError(f"{OWNER} 'target_columns' must name one column (one GP per output), got "
                            f"{self.target_columns}")
        overlap = set(self.x_columns) & set(self.target_columns)
        if overlap:
            raise TaskError(f"{OWNER}: column(s) {sorted(overlap)} are in both x_columns and target_columns")
        columns = self.x_columns + self.target_columns
        if units is not None and not (isinstance(units, dict) and set(units) <= set(columns)
                                      and all(isinstance(u, str) for u in units.values())):
            raise TaskError(f"{OWNER} 'units' must map column names of {columns} to unit texts, got {units!r:.200}")
        self.units = dict(units or {})
        self.kernel = check_choice(OWNER, "kernel", KERNEL_ALIASES.get(kernel, kernel) if isinstance(kernel, str)
                                   else kernel, ("auto",) + RADIAL_KERNELS)
        self.per_input = check_bool(OWNER, "per_input", per_input)
        self.noise_floor = check_number(OWNER, "noise_floor", noise_floor, 0.0, 1.0, low_open=True)
        self.pad = check_number(OWNER, "pad", pad, 0.0, 10.0)
        self.survey_context = check_number(OWNER, "survey_context", survey_context, 0.0, 1.0)
        self.dim_x = len(self.x_columns)
        self.path = str(path)
        x, y, self.resolved_path = read_survey(path, self.x_columns, self.target_columns)
        self.num_points = len(y)
        if prior is None:
            self.prior, tried = select_prior(x, y, self.kernel, self.per_input, self.noise_floor)
            print(f"fitted-gp: {Path(self.path).name} ({self.num_points} points): "
                  f"{describe_prior(self.prior, self.x_columns, tried)}", file=sys.stderr)
        else:
            self.prior = _given_prior(prior, self.dim_x)
        lo, hi = x.min(0), x.max(0)
        width = hi - lo
        self.domain = np.stack([lo - self.pad * width, hi + self.pad * width], -1)   # [Dx, 2] data units
        self.x_offset = self.domain.mean(-1)
        self.x_scale = float((self.domain[:, 1] - self.domain[:, 0]).max()) / 4.0
        self.y_offset = self.prior["mean"]
        self.y_scale = math.sqrt(self.prior["variance"] + self.prior["noise_variance"])
        self.survey_x = ((x - self.x_offset) / self.x_scale).astype(np.float32)
        self.context_box = ((self.domain - self.x_offset[:, None]) / self.x_scale)   # [Dx, 2] model units
        ls = np.asarray(self.prior["lengthscale"], np.float64) / self.x_scale
        self.model_prior = {"kernel": self.prior["kernel"], "lengthscale": float(ls[0]) if ls.size == 1 else ls,
                            "scale": math.sqrt(self.prior["variance"]) / self.y_scale,
                            "noise": math.sqrt(self.prior["noise_variance"]) / self.y_scale}
        self.num_context = (count_range("num_context", num_context, 0, owner=OWNER) if num_context is not None
                            else (1, self.num_points))
        self.num_target = count_range("num_target", num_target, 1, owner=OWNER)
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]
        if self.survey_context > 0 and self.max_context > self.num_points:
            raise TaskError(f"{OWNER}: num_context {list(self.num_context)} exceeds the survey's {self.num_points} "
                            "points, which a context at survey locations draws from (lower it, or set "
                            "survey_context 0)")
        self.check_memory()

    def locations(self, rng, nc, nt):
        """float32 ``xc [nc, Dx]``, ``xt [nt, Dx]`` of one task (model units)."""
        if rng.uniform() < self.survey_context:
            xc = self.survey_x[rng.permutation(self.num_points)[:nc]]
        else:
            xc = rng.uniform(self.context_box[:, 0], self.context_box[:, 1], (nc, self.dim_x)).astype(np.float32)
        xt = rng.uniform(self.context_box[:, 0], self.context_box[:, 1], (nt, self.dim_x)).astype(np.float32)
        return xc, xt

    def sample(self, rng, batch_size, split):
        """Batch dict (model units): ``xc [B, maxNc, Dx]``, ``yc``, ``xt [B, maxNt, Dx]``,
        ``yt``, masks, ``gt_loglik [B]``, ``gt_loglik_joint [B]``; draws of the fitted prior."""
        out = empty_batch(batch_size, self.max_context, self.max_target, self.dim_x, 1, CEILING_KEYS)
        for i in range(batch_size):
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            nt = int(rng.integers(self.num_target[0], self.num_target[1] + 1))
            xc, xt = self.locations(rng, nc, nt)
            yc, yt, marginal, joint = sample_gp(rng, xc, xt, **self.model_prior)
            out["xc"][i, :nc], out["yc"][i, :nc, 0], out["mask_c"][i, :nc] = xc, yc, 1.0
            out["xt"][i, :nt], out["yt"][i, :nt, 0], out["mask_t"][i, :nt] = xt, yt, 1.0
            out["gt_loglik"][i], out["gt_loglik_joint"][i] = marginal, joint
        return out

    def extra_signature(self):
        return ceiling_signature()

    def memory_estimate(self, batch_size):
        """The padded batch plus one task's exact-GP working set."""
        return gp_memory_estimate(self, batch_size, self.dim_x)

    def to_original_units(self, y):
        return np.asarray(y, np.float64) * self.y_scale + self.y_offset

    def data_description(self):
        """The x standardisation, names and units of the survey's columns, the padded
        domain's extent (``coordinates["span"]``, data units), the prior
        (``coordinates["gp_prior"]``: a run's normaliser records it whatever config the run
        was started with) and the source file."""
        return {"x_offset": self.x_offset, "x_scale": np.full(self.dim_x, self.x_scale), "x_is": "raw inputs",
                "x_names": list(self.x_columns), "y_names": list(self.target_columns),
                "x_units": [self.units.get(c) for c in self.x_columns],
                "y_units": [self.units.get(c) for c in self.target_columns],
                "coordinates": {"span": (self.domain[:, 1] - self.domain[:, 0]).tolist(),
                                "gp_prior": self.get_config()["prior"]},
                "source": str(self.resolved_path),
                "split_sizes": {"survey": self.num_points}, "split_unit": "points"}

    def get_config(self):
        """The config, with ``prior`` the fitted hyperparameters (data units)."""
        prior = {"kernel": self.prior["kernel"],
                 "lengthscale": [float(v) for v in np.asarray(self.prior["lengthscale"]).reshape(-1)],
                 **{k: float(self.prior[k]) for k in ("variance", "noise_variance", "mean")}}
        if "log_marginal" in self.prior:
            prior["log_marginal"] = float(self.prior["log_marginal"])
        return {"path": self.path, "x_columns": list(self.x_columns), "target_columns": list(self.target_columns),
                "units": dict(self.units) or None, "kernel": self.kernel, "per_input": self.per_input,
                "noise_floor": self.noise_floor, "prior": prior, "pad": self.pad,
                "num_context": list(self.num_context), "num_target": list(self.num_target),
                "survey_context": self.survey_context}


@hookimpl
def register_tasks(register):
    register("fitted-gp", FittedGPTask,
             description="GP prior fitted to one survey CSV by marginal likelihood; tasks simulated from it.")
