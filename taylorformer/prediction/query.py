"""Predictions for new inputs: query files in, predictive summaries out, in bounded memory.

A *query* is a dict of NumPy arrays in the batch layout of :mod:`taylorformer.batch`:
context ``xc [B, Nc, Dx]``, ``yc [B, Nc, Dy]`` and the inputs to predict at,
``xt [B, Nt, Dx]`` (plus ``sc``/``tc``/``st``/``tt`` for spatio-temporal models).
:func:`predict_query` returns the predictive ``mean``/``stddev`` ``[B, Nt, Dy]``, the
``quantiles`` ``[Q, B, Nt, Dy]`` at ``levels``, their ``quantile_method`` (how they were
computed: :func:`~taylorformer.models.inference.predictive_quantiles`) and optionally
``samples [S, B, Nt, Dy]``.

Conditional models predict each target independently given the context, so the targets go
through the model ``chunk_size`` at a time (the attention executor tiles inside each
chunk): a 100K-point query never holds more than one chunk's activations. Autoregressive
models predict through joint samples of all targets at once (their targets depend on
each other); their summaries are Monte Carlo estimates.

Files (:func:`read_query` / :func:`write_predictions`, chosen by extension):

- ``.npz`` / ``.nc`` (NetCDF, through xarray): arrays named by batch key, each
  ``[N, D]`` (one task) or ``[B, N, D]``;
- ``.csv``: one task, one row per point; input columns ``x`` or ``x0, x1, ...`` and, in a
  context file, output columns ``y`` or ``y0, y1, ...`` (or the names given);
- ``.npy`` (queries only): ``xt`` as ``[N, Dx]`` or ``[B, N, Dx]``.
"""
import os

import numpy as np

from taylorformer.checks import check_int
from taylorformer.errors import BatchError
from taylorformer.files import not_a_file

#: batch keys of the context and of the targets (``yt`` is filled with zeros)
CONTEXT_KEYS = ("xc", "yc", "sc", "tc")
TARGET_KEYS = ("xt", "st", "tt")
FORMATS = (".npz", ".nc", ".csv", ".npy")
#: largest query value magnitude: its square is the largest finite float32 (3.4e38)
MAX_MAGNITUDE = float(np.sqrt(np.finfo(np.float32).max))
#: quantile levels reported by default: the median and the central 90% interval
DEFAULT_LEVELS = (0.05, 0.5, 0.95)


# ----------------------------------------------------------------------------- reading
def check_format(path, allowed=FORMATS):
    """The extension of ``path``; :class:`BatchError` unless it is one of ``allowed``."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in allowed:
        raise BatchError(f"{path}: unsupported file type {ext or '(none)'!r}; use one of {', '.join(allowed)}")
    return ext


def _columns(frame, path, names, prefix, fallback=None):
    """The ``[N, D]`` float array of ``names`` (default: the ``fallback`` names, e.g. a
    model's variable names, where the frame has them all, else ``prefix`` or ``prefix0,
    prefix1, ...``)."""
    if names is None and fallback and all(c in frame.columns for c in fallback):
        names = list(fallback)
    if names is None:
        names = [prefix] if prefix in frame.columns else sorted(
            (c for c in frame.columns if c[len(prefix):].isdigit() and c.startswith(prefix)),
            key=lambda c: int(c[len(prefix):]))
    missing = [c for c in names if c not in frame.columns]
    if missing or not names:
        raise BatchError(f"{path}: no column(s) {missing or prefix!r}; columns are {list(frame.columns)} "
                         f"(name them {prefix!r} or {prefix}0, {prefix}1, ..., or pass the names)")
    refused = [c for c in names if frame[c].dtype.kind in "mMcb"]
    if refused:
        raise BatchError(f"{path}: column(s) {refused} hold {frame[refused[0]].dtype} values, not real "
                         "numbers")
    try:
        return frame[names].to_numpy(np.float64)
    except (ValueError, TypeError) as exc:
        raise BatchError(f"{path}: columns {names} must be numeric: {exc}") from None


#: first bytes of a ``.npy`` file and of a zip archive (an ``.npz``)
NPY_MAGIC, ZIP_MAGIC = b"\x93NUMPY", b"PK\x03\x04"


def _load_numpy(path, expect):
    """The array of an ``.npy`` file (``expect=".npy"``) or ``{name: array}`` of an ``.npz``
    archive, read without pickle; :class:`BatchError` naming ``path`` when the file is
    empty, truncated, not that format, or holds pickled Python objects."""
    import zipfile
    import zlib

    with open(path, "rb") as f:
        head = f.read(6)
    if not head:
        raise BatchError(f"{path} is empty (0 bytes): not a valid {expect} file")
    if not head.startswith(ZIP_MAGIC if expect == ".npz" else NPY_MAGIC):
        kind = "a NumPy archive (zip)" if expect == ".npz" else "a NumPy array"
        raise BatchError(f"{path} is not a valid {expect} file: it does not start like {kind} "
                         f"(first bytes {head!r})")
    try:
        if expect == ".npy":
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as data:
            return {k: np.asarray(data[k]) for k in data.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise BatchError(f"{path}: holds pickled Python objects (dtype object), which are never "
                             f"loaded; save plain numeric arrays (numpy.save/savez)") from None
        raise BatchError(f"{path} is not a valid {expect} file (truncated or corrupt): {exc}") from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        raise BatchError(f"{path} is not a valid {expect} file (truncated or corrupt): "
                         f"{type(exc).__name__}: {exc}") from None
    except MemoryError:
        raise BatchError(f"{path}: its header asks for more memory than this machine has "
                         f"(corrupt, or too large to load at once)") from None
    except Exception as exc:  # noqa: BLE001 zipfile/zlib/struct raise many types on corrupt bytes
        raise BatchError(f"{path} is not a valid {expect} file (corrupt): {type(exc).__name__}: {exc}") from None


def read_csv(path):
    """The DataFrame of the CSV file ``path``; :class:`BatchError` naming it when it is
    empty, holds a header only, or cannot be parsed."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise BatchError(f"{path} is empty: a CSV file needs a header row and one row per point") from None
    except (ValueError, OSError) as exc:  # parser errors, undecodable bytes
        raise BatchError(f"cannot read {path} as CSV: {type(exc).__name__}: {exc}") from None
    frame.columns = [str(c) for c in frame.columns]
    if frame.empty:
        raise BatchError(f"{path} has no rows (a header only): a CSV file needs one row per point")
    return frame


def read_arrays(path, keys):
    """``{key: array}`` of those ``keys`` present in an ``.npz``/``.nc`` file."""
    if check_format(path, (".npz", ".nc")) == ".npz":
        return {k: v for k, v in _load_numpy(path, ".npz").items() if k in keys}
    import xarray as xr

    try:
        with xr.open_dataset(path) as data:
            return {k: np.asarray(data[k].values) for k in keys if k in data.variables}
    except Exception as exc:  # noqa: BLE001 the netCDF backends (h5py, scipy) raise many types
        raise BatchError(f"cannot read {path} as netCDF: {type(exc).__name__}: {exc}") from None


def read_query(path, context=None, x_columns=None, y_columns=None, names=None, dtype=np.float32):
    """The query dict of the inputs file ``path`` (and the ``context`` file, if given;
    an ``.npz``/``.nc`` inputs file may hold the context itself). Arrays are ``dtype``
    (float32; float64 for raw data a normaliser maps first) ``[B, N, D]``; every value is
    checked finite, naming the file and the key. ``names``: ``(x names, y names)`` a CSV's
    columns default to where it has them all (a model's variable names)."""
    if context is not None and (reason := not_a_file(context)):
        raise BatchError(f"context file {context} {reason}")
    x_names, y_names = names or (None, None)
    query = _read_inputs_file(path, x_columns, CONTEXT_KEYS + TARGET_KEYS, x_names)
    if context is not None:
        if check_format(context, (".npz", ".nc", ".csv")) == ".csv":
            frame = read_csv(context)
            found = {"xc": _columns(frame, context, x_columns, "x", x_names),
                     "yc": _columns(frame, context, y_columns, "y", y_names)}
        else:
            found = read_arrays(context, CONTEXT_KEYS)
        query.update(found)
    missing = [k for k in ("xc", "yc", "xt") if k not in query]
    if missing:
        raise BatchError(f"{path}{' and ' + context if context else ''}: no {missing}; a query needs the "
                         f"context (xc, yc) and the inputs to predict at (xt)")
    batch = _as_batch(query, path if context is None else f"{path} and {context}", dtype)
    if batch["xt"].shape[1] == 0:
        raise BatchError(f"{path}: no points to predict at ('xt' has shape {batch['xt'].shape}: "
                         f"0 points); give at least one input row")
    return batch


def read_inputs(path, x_columns=None, x_names=None, dtype=np.float32):
    """The inputs ``xt`` ``[B, N, Dx]`` (``dtype``) of the file ``path`` alone, read as
    :func:`read_query` reads its inputs file (for a caller with no context, e.g.
    ``taylorformer place``'s candidates; ``x_names``: the CSV columns by default where it
    has them all)."""
    found = _read_inputs_file(path, x_columns, ("xt",), x_names)
    if "xt" not in found:
        raise BatchError(f"{path}: no 'xt' (the inputs)")
    return _as_batch(found, path, dtype)["xt"]


def _read_inputs_file(path, x_columns, keys, x_names=None):
    """``{key: array}`` of an inputs file: ``xt`` from a ``.csv`` (its x columns) or
    ``.npy``; those of ``keys`` present in an ``.npz``/``.nc``."""
    if reason := not_a_file(path):
        raise BatchError(f"inputs file {path} {reason}")
    ext = check_format(path)
    if ext == ".csv":
        return {"xt": _columns(read_csv(path), path, x_columns, "x", x_names)}
    if ext == ".npy":
        return {"xt": _load_numpy(path, ".npy")}
    return read_arrays(path, keys)


def _as_batch(query, where, dtype=np.float32):
    out = {}
    for key, value in query.items():
        value = np.asarray(value)
        if value.dtype.kind not in "fiu":
            kind = "text" if value.dtype.kind in "USO" else str(value.dtype)
            raise BatchError(f"{where}: {key!r} must be real numbers, got {kind} (dtype {value.dtype})")
        value = value[None] if value.ndim == 2 else value[None, :, None] if value.ndim == 1 else value
        if value.ndim != 3:
            raise BatchError(f"{where}: {key!r} must be [n_points, dim] or [batch, n_points, dim], "
                             f"got shape {np.shape(query[key])}")
        # a NaN context value is an unobserved point (taylorformer.batch.with_masks)
        bad = np.isinf(value) if key == "yc" else ~np.isfinite(value)
        if bad.any():
            raise BatchError(f"{where}: {key!r} has {int(bad.sum())} non-finite value(s), first at "
                             f"index {tuple(int(i) for i in np.argwhere(bad)[0])}"
                             + (" (NaN means not observed; inf is not a value)" if key == "yc" else ""))
        big = np.abs(value) > MAX_MAGNITUDE  # NaN compares False
        if big.any():
            first = tuple(int(i) for i in np.argwhere(big)[0])
            raise BatchError(f"{where}: {key!r} has {int(big.sum())} value(s) beyond +-{MAX_MAGNITUDE:.2g}, "
                             f"first {value[first]:g} at index {first}: a float32 model squares its inputs "
                             f"(distances, variances), which overflows beyond that; rescale the data as "
                             f"the model was trained (e.g. standardised)")
        out[key] = value.astype(dtype)
    sizes = {k: v.shape[0] for k, v in out.items()}
    if len(set(sizes.values())) > 1:
        if set(sizes.values()) - {1, max(sizes.values())}:
            raise BatchError(f"{where}: the arrays disagree in batch size: {sizes}")
        out = {k: np.repeat(v, max(sizes.values()), 0) if v.shape[0] == 1 else v for k, v in out.items()}
    return out


# ----------------------------------------------------------------------------- predicting
def predict_query(model, query, levels=DEFAULT_LEVELS, num_samples=0, chunk_size=4096, seed=0,
                  verbose=1):
    """``{"mean", "stddev", "quantiles", "levels", "quantile_method"[, "samples"]}`` of
    ``model`` at the query's targets (see the module docstring). Conditional models: the
    predictive's own quantiles (:func:`~taylorformer.models.inference.predictive_quantiles`),
    ``chunk_size`` targets per forward pass, with a Keras progress bar when ``verbose`` (1:
    live bar, 2: one line per update, for logs); each chunk's forward pass is compiled
    (:meth:`~taylorformer.models.base.NeuralProcess.compiled_distribution`: at most two
    traces, the full chunk and the last). Autoregressive models:
    ``num_samples`` joint samples (50 when 0) in one pass over all targets, their quantiles
    Monte Carlo estimates over those paths."""
    import keras

    from taylorformer.models.inference import ANALYTIC_QUANTILES, monte_carlo_quantiles, predictive_quantiles

    check_int("predict", "chunk_size", chunk_size)
    check_int("predict", "num_samples", num_samples, minimum=0)
    levels = tuple(float(q) for q in levels)
    if not (levels and all(0.0 < q < 1.0 for q in levels)):
        raise BatchError(f"predict 'levels' must be probabilities in (0, 1), got {list(levels)}")
    if np.shape(query["xt"])[1] == 0:
        raise BatchError(f"predict: no points to predict at ('xt' has shape {np.shape(query['xt'])})")
    context = {k: v for k, v in query.items() if k in CONTEXT_KEYS}
    targets = {k: v for k, v in query.items() if k in TARGET_KEYS}
    dim_y = query["yc"].shape[-1]

    def batch_of(chunk):
        return {**context, **chunk, "yt": np.zeros(chunk["xt"].shape[:2] + (dim_y,), np.float32)}

    if getattr(model, "causal", False):
        samples = np.asarray(model.sample(batch_of(targets), num_samples or 50, seed=seed))
        return {"mean": samples.mean(0), "stddev": samples.std(0),
                "quantiles": np.quantile(samples, levels, axis=0), "levels": np.asarray(levels),
                "quantile_method": monte_carlo_quantiles(len(samples), "sampled paths"),
                **({"samples": samples} if num_samples else {})}
    nt = targets["xt"].shape[1]
    pieces, method = [], ANALYTIC_QUANTILES
    bar = (keras.utils.Progbar(-(-nt // chunk_size), verbose=verbose, unit_name="chunk")
           if verbose else None)
    for start in range(0, nt, chunk_size):
        dist = model.compiled_distribution(batch_of({k: v[:, start:start + chunk_size] for k, v in targets.items()}))
        part = {"mean": np.asarray(dist.mean()), "stddev": np.asarray(dist.stddev())}
        part["quantiles"], method = predictive_quantiles(dist, levels, seed)
        if num_samples:
            part["samples"] = np.asarray(dist.sample(num_samples, seed=seed))
        pieces.append(part)
        if bar is not None:
            bar.add(1)
    axis = {"mean": 1, "stddev": 1, "quantiles": 2, "samples": 2}
    out = {k: np.concatenate([p[k] for p in pieces], axis[k]) for k in pieces[0]}
    return {**out, "levels": np.asarray(levels), "quantile_method": method}


# ----------------------------------------------------------------------------- data units
def to_model_units(query, normaliser, where="predict"):
    """The query (data units, any float dtype) in the model's units, float32: ``xc``, ``xt``
    through ``normaliser.x_to_model``, ``yc`` through ``y_to_model`` (NaN stays NaN); other
    keys unchanged. A width that is not the normaliser's, or a value that leaves the float32
    range once mapped, is a BatchError naming the key."""
    out = dict(query)
    for key, dim, names, to_model in (("xc", normaliser.dim_x, normaliser.x_names, normaliser.x_to_model),
                                      ("xt", normaliser.dim_x, normaliser.x_names, normaliser.x_to_model),
                                      ("yc", normaliser.dim_y, normaliser.y_names, normaliser.y_to_model)):
        if key not in query:
            continue
        if np.shape(query[key])[-1] != dim:
            raise BatchError(f"{where}: {key!r} has {np.shape(query[key])[-1]} column(s) but the model takes "
                             f"{dim} ({', '.join(names)})")
        with np.errstate(over="ignore", invalid="ignore"):
            value = to_model(query[key])
        big = np.abs(value) > MAX_MAGNITUDE  # NaN compares False
        if big.any():
            first = tuple(int(i) for i in np.argwhere(big)[0])
            raise BatchError(f"{where}: {key!r} has {int(big.sum())} value(s) beyond +-{MAX_MAGNITUDE:.2g} in "
                             f"the model's units once normalised, first at index {first}: far outside the "
                             f"data the model was trained on")
        out[key] = value.astype(np.float32)
    return out


def to_data_units(result, normaliser):
    """:func:`predict_query`'s ``result`` (model units) in the data's units: ``mean``,
    ``quantiles`` and ``samples`` through ``normaliser.y_from_model``, ``stddev`` times
    ``y_scale`` (float64). The scales are positive, so quantiles keep their levels."""
    out = dict(result)
    for key in ("mean", "quantiles", "samples"):
        if key in result:
            out[key] = normaliser.y_from_model(result[key])
    if "stddev" in result:
        out["stddev"] = normaliser.spread_from_model(result["stddev"])
    return out


def predict_data(model, xc, yc, xt, levels=DEFAULT_LEVELS, num_samples=0, chunk_size=4096, seed=0,
                 verbose=0, **groups):
    """Predict from raw data: the context ``xc [Nc, Dx]``, ``yc [Nc, Dy]`` and the inputs
    ``xt [Nt, Dx]`` (NaN in ``yc``: not observed) in the data's units, as a model file's
    normaliser describes them (``model.normaliser``, :mod:`taylorformer.normaliser`).
    Returns :func:`predict_query`'s dict in the data's units, float64, with ``y_names``
    and ``y_units``, shaped as the inputs were given, so that a loop over single tasks
    (e.g. leave-one-out) gets one value per point, not a silent broadcast:

    - unbatched (every array ``[N, D]`` or ``[N]``, a 1-D array one column):
      ``mean``/``stddev [Nt, Dy]``, ``quantiles [Q, Nt, Dy]``, ``samples [S, Nt, Dy]``;
      with ``yc`` given as ``[Nc]``, ``[Nt]`` (``[Q, Nt]``, ``[S, Nt]``);
    - batched (any array ``[B, N, D]``; ``[N, D]`` ones shared by the batch):
      ``[B, Nt, Dy]`` (``[Q, B, Nt, Dy]``, ``[S, B, Nt, Dy]``).

    A model without a normaliser (a file written before they were saved) predicts in its
    own units, with a warning. ``groups``: ``sc``/``tc``/``st``/``tt`` for spatio-temporal
    models, passed as they are."""
    import warnings

    from taylorformer.normaliser import Normaliser

    arrays = {"xc": xc, "yc": yc, "xt": xt, **groups}
    unbatched = all(np.ndim(v) <= 2 for v in arrays.values())
    query = _as_batch(arrays, "predict_data", np.float64)
    normaliser = getattr(model, "normaliser", None)
    if normaliser is None:
        warnings.warn(f"model {model.name!r} has no saved normaliser (a model file written before "
                      "taylorformer saved one): its inputs and predictions are in the model's own units",
                      stacklevel=2)
        normaliser = Normaliser.identity(model.dim_x, model.dim_y)
    result = to_data_units(predict_query(model, to_model_units(query, normaliser, "predict_data"),
                                         levels=levels, num_samples=num_samples, chunk_size=chunk_size,
                                         seed=seed, verbose=verbose), normaliser)
    if unbatched:  # the task axis: 0 of mean/stddev, 1 of quantiles/samples
        squeeze_y = np.ndim(yc) == 1
        for key, axis in (("mean", 0), ("stddev", 0), ("quantiles", 1), ("samples", 1)):
            if key in result:
                value = np.squeeze(result[key], axis)
                result[key] = value[..., 0] if squeeze_y else value
    return {**result, "y_names": list(normaliser.y_names), "y_units": list(normaliser.y_units)}


# ----------------------------------------------------------------------------- writing
def write_predictions(path, query, result, normaliser=None):
    """Write ``result`` of :func:`predict_query` (with the query's ``xt``) to ``path``:
    ``.npz`` (arrays by name), ``.nc`` (xarray Dataset over ``task, point, output, level,
    sample``) or ``.csv`` (one task: columns ``x*``, then ``mean_y*``, ``stddev_y*``,
    ``q<level>_y*``, ``sample<k>_y*`` per output). A recalibrated result's ``spread_scale
    [Dy]`` is written too (``.csv``: a ``spread_scale_y*`` column per output), and so is the
    ``quantile_method`` (``.nc``: an attribute of ``quantiles``; ``.csv``: a column). Written to a
    temporary file, then renamed. With the ``normaliser`` the result is in the data's units
    of (:func:`to_data_units`): the CSV columns take its variable names (``mean_<name>``),
    the ``.nc`` its names as ``input``/``output`` coordinates and ``units`` attributes, the
    ``.npz`` ``x_names``, ``y_names`` and ``y_units``."""
    from taylorformer.files import atomic_path

    ext = check_format(path, (".npz", ".nc", ".csv"))
    arrays = {"xt": query["xt"], **result}
    dx, dy = np.shape(query["xt"])[-1], np.shape(result["mean"])[-1]
    names = (normaliser.x_names, normaliser.y_names, normaliser.y_units) if normaliser is not None \
        else (_names("x", dx), _names("y", dy), [None] * dy)
    with atomic_path(path) as tmp:
        if ext == ".npz":
            extra = {} if normaliser is None else {"x_names": np.array(names[0]), "y_names": np.array(names[1]),
                                                   "y_units": np.array([u or "" for u in names[2]])}
            with open(tmp, "wb") as f:
                np.savez(f, **arrays, **extra)
        elif ext == ".nc":
            _dataset(arrays, names if normaliser is not None else None).to_netcdf(tmp)
        else:
            _frame(arrays, path, names).to_csv(tmp, index=False)
    return path


def _names(prefix, n):
    return [prefix] if n == 1 else [f"{prefix}{i}" for i in range(n)]


def _frame(arrays, path, names=None):
    import pandas as pd

    if arrays["xt"].shape[0] != 1:
        raise BatchError(f"{path}: a CSV holds one task; this query has {arrays['xt'].shape[0]} "
                         "(write .npz or .nc)")
    x_names, ys = (names[0], names[1]) if names else (_names("x", arrays["xt"].shape[-1]),
                                                      _names("y", arrays["mean"].shape[-1]))
    columns = dict(zip(x_names, arrays["xt"][0].T))
    for key in ("mean", "stddev"):
        columns.update({f"{key}_{y}": v for y, v in zip(ys, arrays[key][0].T)})
    for q, values in zip(arrays["levels"], arrays["quantiles"]):
        columns.update({f"q{q:g}_{y}": v for y, v in zip(ys, values[0].T)})
    for k, values in enumerate(arrays.get("samples", ())):
        columns.update({f"sample{k}_{y}": v for y, v in zip(ys, values[0].T)})
    expected = arrays["xt"].shape[-1] + len(ys) * (2 + len(arrays["levels"]) + len(arrays.get("samples", ())))
    if len(columns) != expected:  # two levels printing alike (0.1, 0.1000001) would share a column
        raise BatchError(f"{path}: quantile levels {list(arrays['levels'])} do not give distinct CSV "
                         "columns q<level> (6 significant digits); give distinct levels")
    if "spread_scale" in arrays:  # a recalibrated prediction (taylorformer.prediction.calibration)
        columns.update({f"spread_scale_{y}": s for y, s in zip(ys, arrays["spread_scale"])})
    if "quantile_method" in arrays:
        columns["quantile_method"] = arrays["quantile_method"]
    return pd.DataFrame(columns)


def _dataset(arrays, names=None):
    """The Dataset of :func:`write_predictions`; with ``names`` (x names, y names, y units)
    the ``input``/``output`` coordinates are the names, the outputs carry ``units`` (each
    variable where the outputs share one; ``output_units`` per output always)."""
    import xarray as xr

    dims = {"xt": ("task", "point", "input"), "mean": ("task", "point", "output"),
            "stddev": ("task", "point", "output"), "quantiles": ("level", "task", "point", "output"),
            "samples": ("sample", "task", "point", "output"), "spread_scale": ("output",)}
    coords = {"level": arrays["levels"]}
    if names is not None:
        coords.update(input=list(names[0]), output=list(names[1]),
                      output_units=("output", [u or "" for u in names[2]]))
    data = xr.Dataset({k: (dims[k], v) for k, v in arrays.items() if k in dims}, coords=coords)
    if "quantile_method" in arrays:
        data["quantiles"].attrs["quantile_method"] = str(arrays["quantile_method"])
    if names is not None:
        units = set(names[2])
        for key in ("mean", "stddev", "quantiles", "samples"):
            if key in data and len(units) == 1 and None not in units:
                data[key].attrs["units"] = names[2][0]
        data.attrs["units"] = "the data's units (the model file's normaliser)"
    else:
        data.attrs["units"] = "the model's units (the model file holds no normaliser)"
    return data
