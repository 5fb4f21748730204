"""Sensor placement: choose where to observe next, greedily, with any model.

:func:`place` picks ``k`` of the candidate inputs ``[N, Dx]``, one at a time, each the
candidate whose observation most reduces the uncertainty about a target *region* ``[Nr, Dx]``
(by default the candidates themselves) given the context and the points already chosen.
Two criteria (``criterion=``):

``"variance"`` (any model)
    The summed predictive variance over the region (over its points and outputs). A
    candidate's value is not known before it is observed, so it enters the context with a
    *pseudo-observation*: the model's predictive mean there (``pseudo_draws=0``, as
    deepsensor does), or the average over ``pseudo_draws`` values drawn from the
    predictive. All remaining candidates are scored in one batch dimension (rows
    ``[candidate x draw]``), ``max_points`` tokens per forward pass, so a step costs
    ``ceil(N x draws x (Nc + k + Nr) / max_points)`` model calls, not ``N``. Conditional
    models give the variances in closed form; autoregressive models estimate them from
    ``num_samples`` joint samples per row (common random numbers: the same seed for every
    candidate). The context has ``k`` unobserved slots (NaN outputs) from the start, filled
    one per step, so every pass has one shape and the forward pass is traced once.

``"region-mean"`` / ``"region-total"`` (models that sample jointly: autoregressive ones)
    The variance of the region's mean (or total) over its points, per output, summed over
    outputs. One call draws ``num_samples`` joint samples of the candidates and the region
    together; the expected variance left after observing candidate ``c`` is estimated from
    them by linear (Gaussian) conditioning, ``Var(Z) - Cov(Z, y_c) Var(y_c)^-1 Cov(y_c, Z)``,
    exact when the joint is Gaussian (a GP), the best linear estimate otherwise; the chosen
    candidate's column is then regressed out of every column of the samples, which
    conditions them on it for the next step. No value is imagined and no further model call
    is made. A conditional NP's targets are independent given the context, so it cannot
    say how one observation informs another target: it has no such criterion.

The result (:class:`Placement`) has the locations in order with their acquisition value
(the reduction of the criterion) and the criterion left after each; its per-point region
variances before and after placement draw the map
(:func:`taylorformer.plotting.placement.plot_placement`). :func:`place_files` is ``taylorformer
place`` (:func:`taylorformer.workflow.runs.place_run` loads the run's model): files as
``taylorformer predict`` reads them (:mod:`taylorformer.prediction.query`).

Units: :func:`place` works in the model's units (inputs, context values and the variances
it reports), as the model computes. :func:`place_files` takes the files in the data's units
when the model carries a normaliser (:mod:`taylorformer.normaliser`): it maps them to
the model's units, places, and reports the chosen points as given and the variances in the
data's units (:func:`placement_in_data_units`).
"""
import dataclasses
import os
import warnings

import numpy as np

from taylorformer.checks import check_choice, check_int
from taylorformer.errors import BatchError, SpecError

CRITERIA = ("variance", "region-mean", "region-total")
#: tokens (rows x (context + targets)) per forward pass when scoring candidates
DEFAULT_MAX_POINTS = 1 << 16
#: the table's columns after the inputs
TABLE_COLUMNS = ("order", "candidate", "acquisition", "remaining")
#: joint samples per row (autoregressive models)
DEFAULT_SAMPLES = 64
#: :attr:`Placement.units` of variances in the model's own units
MODEL_UNITS = "model units"
#: what :func:`write_placement` writes
OUTPUT_FORMATS = (".npz", ".nc", ".csv")


@dataclasses.dataclass
class Placement:
    """What :func:`place` chose and why.

    ``table``: one row per chosen location in order: the inputs (``x_names``), ``order``
    (1, 2, ...), ``acquisition`` (reduction of the criterion by that point) and
    ``remaining`` (the criterion after it); ``initial``: the criterion before any.
    ``region [Nr, Dx]`` with ``variance_before`` / ``variance_after [Nr]`` (predictive
    variance summed over outputs, before any and after all chosen points, pseudo-observed
    or conditioned on), ``candidates [N, Dx]``, ``context_x [Nc, Dx]`` and
    ``first_acquisition [N]``: every candidate's acquisition value at the first step.
    ``candidates`` are the distinct ones given, in order: ``candidate_rows [N]`` says the
    row of each in the given array (the table's ``candidate``), and ``duplicates`` how many
    given rows repeated an earlier location and were dropped (each place is scored, and
    picked, once). ``units``: what the variances (``initial``, ``acquisition``, ``remaining``, the
    per-point variances) are in: ``"model units"`` from :func:`place`, the data's squared
    units after :func:`placement_in_data_units`."""

    table: object
    criterion: str
    initial: float
    x_names: list
    region: np.ndarray
    variance_before: np.ndarray
    variance_after: np.ndarray
    candidates: np.ndarray
    context_x: np.ndarray
    first_acquisition: np.ndarray
    units: str = MODEL_UNITS
    candidate_rows: np.ndarray = None
    duplicates: int = 0


# ----------------------------------------------------------------------------- inputs
def _points(name, value, dim, where="place"):
    """``value`` as float32 ``[N, dim]`` (``[N]`` for dim 1, or ``[1, N, dim]``: one task)."""
    array = np.asarray(value, np.float32) if value is not None else None
    if array is None or array.dtype.kind != "f":
        raise BatchError(f"{where}: {name} must be a numeric array, got {type(value).__name__}")
    if array.ndim == 3:
        if array.shape[0] != 1:
            raise BatchError(f"{where}: {name} holds {array.shape[0]} tasks; placement is for one task "
                             "at a time ([N, D] or [1, N, D])")
        array = array[0]
    if array.ndim == 1 and dim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[1] != dim:
        raise BatchError(f"{where}: {name} must be [n_points, {dim}], got shape {np.shape(value)}")
    bad = ~np.isfinite(array) if name != "context yc" else np.isinf(array)
    if bad.any():
        raise BatchError(f"{where}: {name} has {int(bad.sum())} non-finite value(s), first at index "
                         f"{tuple(int(i) for i in np.argwhere(bad)[0])}")
    return array


def _context(context, dim_x, dim_y):
    """``(xc [Nc, Dx], yc [Nc, Dy])`` of ``context``: None, ``(xc, yc)`` or a dict with them."""
    if context is None:
        return np.zeros((0, dim_x), np.float32), np.zeros((0, dim_y), np.float32)
    if isinstance(context, dict):
        missing = [k for k in ("xc", "yc") if k not in context]
        if missing:
            raise BatchError(f"place: the context dict has no {missing}")
        context = (context["xc"], context["yc"])
    xc, yc = (_points(f"context {k}", v, d) for k, v, d in zip(("xc", "yc"), context, (dim_x, dim_y)))
    if len(xc) != len(yc):
        raise BatchError(f"place: the context has {len(xc)} inputs but {len(yc)} outputs")
    return xc, yc


def distinct_points(points):
    """``(points[rows] [M, D], rows [M])``: the first occurrence of each location of
    ``points [N, D]``, in the given order, and its row."""
    if not len(points):
        return points, np.zeros(0, np.int64)
    _, first = np.unique(points, axis=0, return_index=True)
    rows = np.sort(first)
    return points[rows], rows


# ----------------------------------------------------------------------------- model calls
def _joint(model):
    """Does ``model`` predict through joint samples (``model.sample``)?"""
    return bool(getattr(model, "causal", False))


def _region_variances(model, ctx_x, ctx_y, slot, points, values, region, rows_per_pass, num_samples,
                      seed):
    """Predictive variance ``[R, Nr]`` (summed over outputs) over ``region`` given the
    context with ``points [R, Dx]`` observed as ``values [R, Dy]`` in context slot ``slot``,
    ``rows_per_pass`` rows per forward pass (the last pass padded to that size: one shape).
    Conditional models: closed form; autoregressive ones: the variance of ``num_samples``
    joint samples per row, drawn with the same seed for every row."""
    out = []
    for start in range(0, len(points), rows_per_pass):
        x, y = points[start:start + rows_per_pass], values[start:start + rows_per_pass]
        n = len(x)
        if n < rows_per_pass:  # pad with copies of the last row: every pass has one shape
            x = np.concatenate([x, np.repeat(x[-1:], rows_per_pass - n, 0)])
            y = np.concatenate([y, np.repeat(y[-1:], rows_per_pass - n, 0)])
        xc = np.repeat(ctx_x[None], rows_per_pass, 0)
        yc = np.repeat(ctx_y[None], rows_per_pass, 0)
        xc[:, slot], yc[:, slot] = x, y
        xt = np.repeat(region[None], rows_per_pass, 0)
        batch = {"xc": xc, "yc": yc, "xt": xt, "yt": np.zeros(xt.shape[:2] + (ctx_y.shape[1],), np.float32)}
        if _joint(model):
            variance = np.asarray(model.sample(batch, num_samples, seed=seed), np.float64).var(0)
        else:
            variance = np.asarray(model.compiled_distribution(batch).variance(), np.float64)
        out.append(variance.sum(-1)[:n])
    return np.concatenate(out)


# ----------------------------------------------------------------------------- criteria
def _place_by_variance(model, candidates, xc, yc, region, k, pseudo_draws, num_samples, max_points,
                       seed, bar):
    """Greedy choice by the summed predictive variance over ``region`` with
    pseudo-observations (see the module docstring)."""
    from taylorformer.prediction.query import predict_query

    nc, dim_y = len(xc), yc.shape[1]
    # k unobserved slots (NaN outputs) after the context, filled one per step: one shape
    ctx_x = np.concatenate([xc, np.zeros((k, xc.shape[1]), np.float32)])
    ctx_y = np.concatenate([yc, np.full((k, dim_y), np.nan, np.float32)])
    draws = max(1, pseudo_draws)
    per_row = (nc + k + len(region)) * (num_samples if _joint(model) else 1)
    rows_per_pass = max(1, min(max_points // per_row, len(candidates) * draws))
    # the predictive at every candidate and region point (one shape for all steps), through
    # predict's path: conditional models in chunks of targets, autoregressive ones sampled
    everywhere = np.concatenate([candidates, region])[None]
    available = np.ones(len(candidates), bool)
    rows, first = [], None
    for step in range(k):
        idx = np.flatnonzero(available)
        now = predict_query(model, {"xc": ctx_x[None], "yc": ctx_y[None], "xt": everywhere}, levels=(0.5,),
                            num_samples=max(num_samples, pseudo_draws) if _joint(model) else pseudo_draws,
                            chunk_size=max(1, max_points - nc - k), seed=seed, verbose=0)
        mean = now["mean"][0]
        if step == 0:
            before = after = (np.asarray(now["stddev"][0, len(candidates):], np.float64) ** 2).sum(-1)  # [Nr]
            current = float(before.sum())
        # pseudo-observations [len(idx), draws, Dy]: the predictive mean, or values drawn from it
        pseudo = mean[idx, None] if not pseudo_draws else np.moveaxis(now["samples"][:pseudo_draws, 0, idx], 0, 1)
        points = np.repeat(candidates[idx], draws, 0)
        variances = _region_variances(model, ctx_x, ctx_y, nc + step, points,
                                      pseudo.reshape(-1, dim_y).astype(np.float32), region,
                                      rows_per_pass, num_samples, seed)
        variances = variances.reshape(len(idx), draws, -1).mean(1)  # [len(idx), Nr]
        totals = variances.sum(-1)
        best = int(np.argmin(totals))
        if first is None:
            first = np.full(len(candidates), np.nan)
            first[idx] = current - totals
        chosen = idx[best]
        rows.append((chosen, current - totals[best], totals[best]))
        current, after = float(totals[best]), variances[best]
        available[chosen] = False
        ctx_x[nc + step], ctx_y[nc + step] = candidates[chosen], mean[chosen]
        if bar is not None:
            bar.add(1)
    return rows, float(before.sum()), before, after, first


def _place_by_region_statistic(model, candidates, xc, yc, region, k, statistic, num_samples, seed,
                               bar):
    """Greedy choice by the variance of the region's mean or total, from joint samples of
    the candidates and the region conditioned linearly (see the module docstring)."""
    if not _joint(model):
        raise SpecError(f"place: criterion 'region-{statistic}' needs joint samples of the targets (an "
                        f"autoregressive model's `sample`); {type(model).__name__} predicts each "
                        "target independently given the context: use criterion 'variance'")
    n, dim_y = len(candidates), yc.shape[1]
    xt = np.concatenate([candidates, region])
    batch = {"xc": xc[None], "yc": yc[None], "xt": xt[None],
             "yt": np.zeros((1, len(xt), dim_y), np.float32)}
    samples = np.asarray(model.sample(batch, num_samples, seed=seed), np.float64)[:, 0]  # [S, N+Nr, Dy]
    samples = samples - samples.mean(0)
    obs = samples[:, :n]                                         # [S, N, Dy]
    reduce = np.mean if statistic == "mean" else np.sum
    # the columns conditioned together: every candidate, the region's points, the statistic
    cols = np.concatenate([obs, samples[:, n:], reduce(samples[:, n:], axis=1, keepdims=True)], 1)

    def cov(a, b):  # [S, ..., Dy] x [S, ..., Dy] -> [..., Dy, Dy] (ddof 0)
        return np.einsum("s...i,s...j->...ij", a, b) / len(a)

    # a ridge for candidates whose remaining variance is ~0 (a location already explained)
    ridge = 1e-9 * max(float(np.mean(obs ** 2)), 1e-30) * np.eye(dim_y)

    def after_each(cols, idx):
        """Variance of the statistic (trace over outputs) after observing each candidate in idx."""
        z, c = cols[:, -1], cols[:, idx]                          # [S, Dy], [S, M, Dy]
        var_z = np.trace(cov(z, z))
        c_zc = np.einsum("si,smj->mij", z, c) / len(z)            # Cov(Z, y_c) [M, Dy, Dy]
        c_cc = cov(c, c) + ridge                                  # [M, Dy, Dy]
        explained = np.einsum("mij,mji->m", c_zc, np.linalg.solve(c_cc, np.swapaxes(c_zc, 1, 2)))
        return var_z - explained

    before = cols[:, n:-1].var(0).sum(-1)
    current = float(np.trace(cov(cols[:, -1], cols[:, -1])))
    initial, rows, first = current, [], None
    available = np.ones(n, bool)
    for _ in range(k):
        idx = np.flatnonzero(available)
        totals = after_each(cols, idx)
        best = int(np.argmin(totals))
        if first is None:
            first = np.full(n, np.nan)
            first[idx] = current - totals
        chosen = idx[best]
        rows.append((chosen, current - totals[best], totals[best]))
        current = float(totals[best])
        available[chosen] = False
        c = cols[:, chosen]                                       # regress y_c out of every column
        beta = np.linalg.solve(cov(c, c) + ridge, np.einsum("si,smj->mij", c, cols) / len(c))  # [M, Dy, Dy]
        cols = cols - np.einsum("si,mij->smj", c, beta)
        if bar is not None:
            bar.add(1)
    return rows, initial, before, cols[:, n:-1].var(0).sum(-1), first


def place(model, candidates, context=None, region=None, k=1, criterion="variance", pseudo_draws=0,
          num_samples=DEFAULT_SAMPLES, max_points=DEFAULT_MAX_POINTS, seed=0, x_names=None, verbose=0):
    """Choose ``k`` of ``candidates [N, Dx]`` greedily to observe; returns a :class:`Placement`.

    ``context``: None (no observations yet), ``(xc [Nc, Dx], yc [Nc, Dy])`` or a dict with
    ``xc``/``yc`` (a NaN output is unobserved). ``region [Nr, Dx]``: where the uncertainty
    counts (default: the candidates). ``criterion``: ``"variance"`` (any model),
    ``"region-mean"`` or ``"region-total"`` (joint samples) -- see the module docstring, as
    for ``pseudo_draws`` (0: the predictive mean is the imagined observation),
    ``num_samples`` (joint samples, autoregressive models) and ``max_points`` (the memory
    bound). ``x_names``: the inputs' names (table columns, map axes). ``verbose``: a
    progress bar over the ``k`` steps. Everything is in the model's units (a model with a
    normaliser: map raw data with ``model.normaliser`` first, as :func:`place_files` does, and
    the result back with :func:`placement_in_data_units`).
    """
    check_choice("place", "criterion", criterion, CRITERIA)
    k = check_int("place", "k", k)
    pseudo_draws = check_int("place", "pseudo_draws", pseudo_draws, minimum=0, maximum=1000)
    num_samples = check_int("place", "num_samples", num_samples, minimum=2, maximum=100_000)
    max_points = check_int("place", "max_points", max_points)
    dim_x, dim_y = int(model.dim_x), int(model.dim_y)
    given = _points("candidates", candidates, dim_x)
    candidates, rows_of = distinct_points(given)
    duplicates = len(given) - len(candidates)
    if duplicates:
        warnings.warn(f"place: {duplicates} candidate row(s) repeat an earlier location and are dropped: each "
                      f"location is scored and picked once ({len(candidates)} distinct of {len(given)})",
                      stacklevel=2)
    region = candidates if region is None else _points("region", region, dim_x)
    xc, yc = _context(context, dim_x, dim_y)
    if not len(candidates) or not len(region):
        raise BatchError(f"place: no {'candidates' if not len(candidates) else 'region points'} given")
    if k > len(candidates):
        raise BatchError(f"place: k={k} locations asked of {len(candidates)} distinct candidate(s)"
                         + (f" ({duplicates} duplicated row(s) dropped)" if duplicates else ""))
    names = list(x_names) if x_names is not None else (["x"] if dim_x == 1 else [f"x{i}" for i in range(dim_x)])
    if len(names) != dim_x or len(set(names)) != dim_x or set(names) & set(TABLE_COLUMNS):
        raise BatchError(f"place: x_names must be {dim_x} distinct name(s), none of {list(TABLE_COLUMNS)}, "
                         f"got {names}")
    bar = None
    if verbose:
        import keras

        bar = keras.utils.Progbar(k, verbose=verbose, unit_name="location")
    if criterion == "variance":
        rows, initial, before, after, first = _place_by_variance(
            model, candidates, xc, yc, region, k, pseudo_draws, num_samples, max_points, seed, bar)
    else:
        rows, initial, before, after, first = _place_by_region_statistic(
            model, candidates, xc, yc, region, k, criterion.split("-")[1], num_samples, seed, bar)
    import pandas as pd

    chosen = np.array([r[0] for r in rows])
    table = pd.DataFrame({**{name: candidates[chosen, i] for i, name in enumerate(names)},
                          "order": np.arange(1, k + 1), "candidate": rows_of[chosen],
                          "acquisition": [float(r[1]) for r in rows],
                          "remaining": [float(r[2]) for r in rows]})
    return Placement(table=table, criterion=criterion, initial=float(initial), x_names=names,
                     region=region, variance_before=np.asarray(before), variance_after=np.asarray(after),
                     candidates=candidates, context_x=xc, first_acquisition=first, candidate_rows=rows_of,
                     duplicates=duplicates)


# ----------------------------------------------------------------------------- files
def write_placement(path, placement):
    """Write ``placement`` to ``path``: ``.csv`` (its table), ``.npz`` (arrays ``x [k, Dx]``,
    ``order``, ``candidate``, ``acquisition``, ``remaining``, ``initial``, ``units``) or
    ``.nc`` (the same over dimensions ``rank`` and ``input``, ``units`` an attribute of the
    dataset and of ``acquisition``/``remaining``). Written to a temporary file, then renamed."""
    from taylorformer.prediction.query import check_format
    from taylorformer.files import atomic_path

    ext = check_format(path, OUTPUT_FORMATS)
    table = placement.table
    arrays = {"x": table[placement.x_names].to_numpy(), "initial": np.float64(placement.initial),
              **{key: table[key].to_numpy() for key in TABLE_COLUMNS}}
    with atomic_path(path) as tmp:
        if ext == ".csv":
            table.to_csv(tmp, index=False)
        elif ext == ".npz":
            with open(tmp, "wb") as f:
                np.savez(f, **arrays, units=np.str_(placement.units))
        else:
            import xarray as xr

            data = xr.Dataset({"x": (("rank", "input"), arrays["x"]),
                               **{key: ("rank", arrays[key]) for key in TABLE_COLUMNS}},
                              coords={"input": placement.x_names},
                              attrs={"criterion": placement.criterion, "initial": placement.initial,
                                     "units": placement.units})
            for key in ("acquisition", "remaining"):
                data[key].attrs["units"] = placement.units
            data.to_netcdf(tmp)
    return path


def read_points(path, x_columns=None, x_names=None, dtype=np.float32):
    """The inputs ``[N, Dx]`` of a file as ``taylorformer predict`` reads its ``--input``
    (:func:`taylorformer.prediction.query.read_inputs`); one task."""
    from taylorformer.prediction.query import read_inputs

    xt = read_inputs(path, x_columns=x_columns, x_names=x_names, dtype=dtype)
    if xt.shape[0] != 1:
        raise BatchError(f"{path}: holds {xt.shape[0]} tasks; placement is for one task at a time")
    return xt[0]


def variance_units(normaliser):
    """``(factor, units)``: a variance summed over outputs in model units times ``factor``
    is in the data's units ``units`` (``y_scale**2``, every output on one scale), or
    ``(1.0, "model units ...")`` where the outputs' scales differ (a sum over outputs in
    different units has no data unit: it stays in the standardised units the criterion used)."""
    scales = normaliser.y_scale
    if not np.all(scales == scales[0]):
        return 1.0, f"{MODEL_UNITS} (outputs {', '.join(normaliser.y_names)} on different scales)"
    units = set(normaliser.y_units)
    unit = units.pop() if len(units) == 1 else None
    return float(scales[0]) ** 2, f"({unit})^2" if unit else "squared data units"


def placement_in_data_units(placement, normaliser, candidates, region, context_x):
    """``placement`` (from :func:`place` on inputs mapped by ``normaliser``) in the data's
    units: the chosen points and the map's points from the raw ``candidates [N, Dx]``,
    ``region [Nr, Dx]`` and ``context_x [Nc, Dx]`` exactly as given (the candidates' rows
    :attr:`Placement.candidate_rows` of ``candidates``), the variances times
    ``y_scale**2`` (:func:`variance_units`; the offsets do not change a variance)."""
    factor, units = variance_units(normaliser)
    table = placement.table.copy()
    chosen = table["candidate"].to_numpy()
    for i, name in enumerate(placement.x_names):
        table[name] = candidates[chosen, i]
    table["acquisition"] = table["acquisition"] * factor
    table["remaining"] = table["remaining"] * factor
    return dataclasses.replace(
        placement, table=table, initial=placement.initial * factor, region=region,
        variance_before=placement.variance_before * factor, variance_after=placement.variance_after * factor,
        candidates=candidates if placement.candidate_rows is None else candidates[placement.candidate_rows],
        context_x=context_x, first_acquisition=placement.first_acquisition * factor,
        units=units)


def place_files(model, candidates, output, context=None, region=None, k=1, criterion="variance",
                pseudo_draws=0, num_samples=DEFAULT_SAMPLES, max_points=DEFAULT_MAX_POINTS,
                x_columns=None, y_columns=None, seed=0, plot=None, verbose=1, run_dir=None):
    """``taylorformer place``: choose ``k`` of the inputs of the file ``candidates`` with
    ``model`` given the context (the file ``context``, or ``xc``/``yc`` in an
    ``.npz``/``.nc`` candidates file; none: no observations yet) and write the
    :class:`Placement` table to ``output`` (:func:`write_placement`) and its map to the image
    ``plot``. Files are read as ``taylorformer predict`` reads them; ``region``: a file of
    inputs where the uncertainty counts (default the candidates). With a normaliser in the
    model file, the files are in the data's units and so is the result
    (:func:`placement_in_data_units`); without one (an old model file), the model's units,
    with a warning. Both outputs are checked before any work (never a file it reads or a
    file of the run ``run_dir``, the model's where it came from one) and put in place
    together (:class:`taylorformer.files.Outputs`). Returns the :class:`Placement`."""
    from taylorformer.files import Outputs
    from taylorformer.plotting.saving import image_formats, save_figure

    with Outputs(reads=(candidates, context, region), run_dir=run_dir) as outputs:
        table = outputs.file(output, "--output", OUTPUT_FORMATS)
        image = outputs.file(plot, "--plot", image_formats())
        placement = _place_from_files(model, candidates, context, region, k, criterion, pseudo_draws, num_samples,
                                      max_points, x_columns, y_columns, seed, verbose, run_dir)
        write_placement(table, placement)
        if image is not None:
            from taylorformer.plotting.placement import plot_placement

            name = str(model.spec.get("description") or model.name).rstrip(".")
            save_figure(plot_placement(placement, title=f"{name}: {k} location(s) by {criterion}"), image)
    return placement


def _place_from_files(model, candidates, context, region, k, criterion, pseudo_draws, num_samples, max_points,
                      x_columns, y_columns, seed, verbose, run_dir):
    """The :class:`Placement` of :func:`place_files`, read from its files and in the data's
    units (where the model has a normaliser)."""
    from taylorformer.prediction import query as q

    normaliser = getattr(model, "normaliser", None)
    names = (None, None) if normaliser is None else (normaliser.x_names, normaliser.y_names)
    dtype = np.float32 if normaliser is None else np.float64  # raw data: mapped before float32
    has_context = context is not None or (
        os.path.isfile(candidates) and os.path.splitext(candidates)[1].lower() in (".npz", ".nc")
        and {"xc", "yc"} <= set(q.read_arrays(candidates, ("xc", "yc"))))
    if has_context:
        query = q.read_query(candidates, context, x_columns=x_columns, y_columns=y_columns, names=names,
                             dtype=dtype)
    else:
        query = {"xt": q.read_inputs(candidates, x_columns=x_columns, x_names=names[0], dtype=dtype)}
    if query["xt"].shape[0] != 1:
        raise BatchError(f"{candidates}: holds {query['xt'].shape[0]} tasks; placement is for one task at a time")
    raw = {k: v[0] for k, v in query.items()}
    if region is not None:
        raw["region"] = read_points(region, x_columns, x_names=names[0], dtype=dtype)
    if normaliser is None:
        warnings.warn(f"{run_dir or model.name}: its model file has no saved normaliser (written before taylorformer saved "
                      "one): candidates, context and region are taken, and variances written, in the model's "
                      "units", stacklevel=2)
        mapped = raw
    else:
        mapped = {k: v[0] for k, v in q.to_model_units(
            {k: v[None] for k, v in raw.items() if k != "region"}, normaliser, f"place {candidates}").items()}
        if region is not None:
            mapped["region"] = q.to_model_units({"xt": raw["region"][None]}, normaliser,
                                                f"place --region {region}")["xt"][0]
        if x_columns is None and len(set(normaliser.x_names)) == normaliser.dim_x \
                and not set(normaliser.x_names) & set(TABLE_COLUMNS):
            x_columns = normaliser.x_names
    placement = place(model, mapped["xt"], context=(mapped["xc"], mapped["yc"]) if has_context else None,
                      region=mapped.get("region"), k=k, criterion=criterion, pseudo_draws=pseudo_draws,
                      num_samples=num_samples, max_points=max_points, seed=seed, x_names=x_columns,
                      verbose=verbose)
    if normaliser is not None:
        placement = placement_in_data_units(
            placement, normaliser, raw["xt"],
            raw["region"] if region is not None else raw["xt"][placement.candidate_rows],
            raw["xc"] if has_context else np.zeros((0, raw["xt"].shape[1])))
    return placement
