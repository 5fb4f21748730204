"""Predictions for new inputs: query files in, predictive summaries out, in bounded memory.

A *query* is a dict of NumPy arrays in the batch layout of :mod:`taylorformer.batch`:
context ``xc [B, Nc, Dx]``, ``yc [B, Nc, Dy]`` and the inputs to predict at,
``xt [B, Nt, Dx]`` (plus ``sc``/``tc``/``st``/``tt`` for spatio-temporal models).
:func:`predict_query` returns the predictive ``mean``/``stddev`` ``[B, Nt, Dy]``, the
``quantiles`` ``[Q, B, Nt, Dy]`` at ``levels`` and optionally ``samples [S, B, Nt, Dy]``.

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

#: batch keys of the context and of the targets (``yt`` is filled with zeros)
CONTEXT_KEYS = ("xc", "yc", "sc", "tc")
TARGET_KEYS = ("xt", "st", "tt")
FORMATS = (".npz", ".nc", ".csv", ".npy")
#: quantile levels reported by default: the median and the central 90% interval
DEFAULT_LEVELS = (0.05, 0.5, 0.95)


# ----------------------------------------------------------------------------- reading
def check_format(path, allowed=FORMATS):
    """The extension of ``path``; :class:`BatchError` unless it is one of ``allowed``."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in allowed:
        raise BatchError(f"{path}: unsupported file type {ext or '(none)'!r}; use one of {', '.join(allowed)}")
    return ext


def _columns(frame, path, names, prefix):
    """The ``[N, D]`` float array of ``names`` (default ``prefix`` or ``prefix0, prefix1, ...``)."""
    if names is None:
        names = [prefix] if prefix in frame.columns else sorted(
            (c for c in frame.columns if c[len(prefix):].isdigit() and c.startswith(prefix)),
            key=lambda c: int(c[len(prefix):]))
    missing = [c for c in names if c not in frame.columns]
    if missing or not names:
        raise BatchError(f"{path}: no column(s) {missing or prefix!r}; columns are {list(frame.columns)} "
                         f"(name them {prefix!r} or {prefix}0, {prefix}1, ..., or pass the names)")
    try:
        return frame[names].to_numpy(np.float64)
    except ValueError as exc:
        raise BatchError(f"{path}: columns {names} must be numeric: {exc}") from None


def _read_arrays(path, keys):
    """``{key: array}`` of those ``keys`` present in an ``.npz``/``.nc`` file."""
    if check_format(path, (".npz", ".nc")) == ".npz":
        with np.load(path, allow_pickle=False) as data:
            return {k: np.asarray(data[k]) for k in keys if k in data.files}
    import xarray as xr

    with xr.open_dataset(path) as data:
        return {k: np.asarray(data[k].values) for k in keys if k in data.variables}


def read_query(path, context=None, x_columns=None, y_columns=None):
    """The query dict of the inputs file ``path`` (and the ``context`` file, if given;
    an ``.npz``/``.nc`` inputs file may hold the context itself). Arrays are float32
    ``[B, N, D]``; every value is checked finite, naming the file and the key."""
    if not os.path.isfile(path):
        raise BatchError(f"inputs file {path} does not exist")
    if context is not None and not os.path.isfile(context):
        raise BatchError(f"context file {context} does not exist")
    ext = check_format(path)
    if ext == ".csv":
        import pandas as pd

        query = {"xt": _columns(pd.read_csv(path), path, x_columns, "x")}
    elif ext == ".npy":
        query = {"xt": np.load(path, allow_pickle=False)}
    else:
        query = _read_arrays(path, CONTEXT_KEYS + TARGET_KEYS)
    if context is not None:
        if check_format(context, (".npz", ".nc", ".csv")) == ".csv":
            import pandas as pd

            frame = pd.read_csv(context)
            found = {"xc": _columns(frame, context, x_columns, "x"), "yc": _columns(frame, context, y_columns, "y")}
        else:
            found = _read_arrays(context, CONTEXT_KEYS)
        query.update(found)
    missing = [k for k in ("xc", "yc", "xt") if k not in query]
    if missing:
        raise BatchError(f"{path}{' and ' + context if context else ''}: no {missing}; a query needs the "
                         f"context (xc, yc) and the inputs to predict at (xt)")
    return _as_batch(query, path)


def _as_batch(query, where):
    out = {}
    for key, value in query.items():
        value = np.asarray(value)
        if value.dtype.kind not in "fiu":
            raise BatchError(f"{where}: {key!r} must be numeric, got dtype {value.dtype}")
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
        out[key] = value.astype(np.float32)
    sizes = {k: v.shape[0] for k, v in out.items()}
    if len(set(sizes.values())) > 1:
        if set(sizes.values()) - {1, max(sizes.values())}:
            raise BatchError(f"{where}: the arrays disagree in batch size: {sizes}")
        out = {k: np.repeat(v, max(sizes.values()), 0) if v.shape[0] == 1 else v for k, v in out.items()}
    return out


# ----------------------------------------------------------------------------- predicting
def _quantiles(dist, levels, seed):
    """``[Q, ...]`` quantiles of a factorised predictive: exact where the per-point family
    has a quantile function, else empirical from 1000 draws."""
    import tensorflow as tf

    base = getattr(dist, "distribution", dist)  # tfd.Independent wraps the per-point family
    try:
        return np.stack([np.asarray(base.quantile(tf.cast(q, base.dtype))) for q in levels])
    except NotImplementedError:
        return np.quantile(np.asarray(dist.sample(1000, seed=seed)), levels, axis=0)


def predict_query(model, query, levels=DEFAULT_LEVELS, num_samples=0, chunk_size=4096, seed=0,
                  verbose=1):
    """``{"mean", "stddev", "quantiles", "levels"[, "samples"]}`` of ``model`` at the
    query's targets (see the module docstring). Conditional models: ``chunk_size`` targets
    per forward pass, with a Keras progress bar when ``verbose`` (1: live bar, 2: one line
    per update, for logs); each chunk's forward pass is compiled
    (:meth:`~taylorformer.models.base.NeuralProcess.compiled_distribution`: at most two
    traces, the full chunk and the last). Autoregressive models:
    ``num_samples`` joint samples (50 when 0) in one pass over all targets."""
    import keras

    check_int("predict", "chunk_size", chunk_size)
    check_int("predict", "num_samples", num_samples, minimum=0)
    levels = tuple(float(q) for q in levels)
    if not (levels and all(0.0 < q < 1.0 for q in levels)):
        raise BatchError(f"predict 'levels' must be probabilities in (0, 1), got {list(levels)}")
    context = {k: v for k, v in query.items() if k in CONTEXT_KEYS}
    targets = {k: v for k, v in query.items() if k in TARGET_KEYS}
    dim_y = query["yc"].shape[-1]

    def batch_of(chunk):
        return {**context, **chunk, "yt": np.zeros(chunk["xt"].shape[:2] + (dim_y,), np.float32)}

    if getattr(model, "causal", False):
        samples = np.asarray(model.sample(batch_of(targets), num_samples or 50, seed=seed))
        return {"mean": samples.mean(0), "stddev": samples.std(0),
                "quantiles": np.quantile(samples, levels, axis=0), "levels": np.asarray(levels),
                **({"samples": samples} if num_samples else {})}
    nt = targets["xt"].shape[1]
    pieces = []
    bar = (keras.utils.Progbar(-(-nt // chunk_size), verbose=verbose, unit_name="chunk")
           if verbose else None)
    for start in range(0, nt, chunk_size):
        dist = model.compiled_distribution(batch_of({k: v[:, start:start + chunk_size] for k, v in targets.items()}))
        part = {"mean": np.asarray(dist.mean()), "stddev": np.asarray(dist.stddev()),
                "quantiles": _quantiles(dist, levels, seed)}
        if num_samples:
            part["samples"] = np.asarray(dist.sample(num_samples, seed=seed))
        pieces.append(part)
        if bar is not None:
            bar.add(1)
    axis = {"mean": 1, "stddev": 1, "quantiles": 2, "samples": 2}
    out = {k: np.concatenate([p[k] for p in pieces], axis[k]) for k in pieces[0]}
    return {**out, "levels": np.asarray(levels)}


# ----------------------------------------------------------------------------- writing
def write_predictions(path, query, result):
    """Write ``result`` of :func:`predict_query` (with the query's ``xt``) to ``path``:
    ``.npz`` (arrays by name), ``.nc`` (xarray Dataset over ``task, point, output, level,
    sample``) or ``.csv`` (one task: columns ``x*``, then ``mean_y*``, ``stddev_y*``,
    ``q<level>_y*``, ``sample<k>_y*`` per output). Written to a temporary file, then renamed."""
    from taylorformer.run_dir import atomic_path

    ext = check_format(path, (".npz", ".nc", ".csv"))
    arrays = {"xt": query["xt"], **result}
    with atomic_path(path) as tmp:
        if ext == ".npz":
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
        elif ext == ".nc":
            _dataset(arrays).to_netcdf(tmp)
        else:
            _frame(arrays, path).to_csv(tmp, index=False)
    return path


def _names(prefix, n):
    return [prefix] if n == 1 else [f"{prefix}{i}" for i in range(n)]


def _frame(arrays, path):
    import pandas as pd

    if arrays["xt"].shape[0] != 1:
        raise BatchError(f"{path}: a CSV holds one task; this query has {arrays['xt'].shape[0]} "
                         "(write .npz or .nc)")
    ys = _names("y", arrays["mean"].shape[-1])
    columns = dict(zip(_names("x", arrays["xt"].shape[-1]), arrays["xt"][0].T))
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
    return pd.DataFrame(columns)


def _dataset(arrays):
    import xarray as xr

    dims = {"xt": ("task", "point", "input"), "mean": ("task", "point", "output"),
            "stddev": ("task", "point", "output"), "quantiles": ("level", "task", "point", "output"),
            "samples": ("sample", "task", "point", "output")}
    return xr.Dataset({k: (dims[k], v) for k, v in arrays.items() if k in dims},
                      coords={"level": arrays["levels"]})
