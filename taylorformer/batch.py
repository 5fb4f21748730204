"""The batch: the one structure every task produces and every model consumes.

A batch is a plain ``dict`` of tensors (so it flows through ``tf.data`` and
``tf.distribute`` unchanged):

=============  ===================  ===============================================
key            shape                meaning
=============  ===================  ===============================================
``xc``         ``[B, Nc, Dx]``      context inputs (float32)
``yc``         ``[B, Nc, Dy]``      context outputs
``xt``         ``[B, Nt, Dx]``      target inputs
``yt``         ``[B, Nt, Dy]``      target outputs (zeros if unknown, e.g. prediction)
``mask_c``     ``[B, Nc]``          1.0 for a real context point, 0.0 for padding
``mask_t``     ``[B, Nt]``          1.0 for a real target point, 0.0 for padding
``gt_loglik``  ``[B]`` (optional)   exact GP predictive log-lik per target point
=============  ===================  ===============================================

A NaN output value means "not observed"; models call :func:`with_masks`, which adds
``observed_c``/``observed_t`` ``[B, N, Dy]`` (1 where an output value is observed) and
zeroes the masks of points with no observed output.

Optional feature groups (spatio-temporal models): ``sc``/``st`` space ``[B, N, Ds]``,
``tc``/``tt`` time ``[B, N, Dt]``. Variable set sizes inside one batch are padding
plus masks; a padded point must change nothing. ``Nc`` may be 0 (empty context).
"""
import numpy as np

from taylorformer.errors import BatchError

REQUIRED = ("xc", "yc", "xt", "yt")
PAIRS = (("xc", "yc", "mask_c"), ("xt", "yt", "mask_t"))
#: per-output observed flags :func:`with_masks` adds, one per pair
OBSERVED_KEYS = ("observed_c", "observed_t")


def with_masks(batch):
    """Return ``batch`` with its masks and per-output observed flags.

    ``mask_c``/``mask_t`` (``[B, N]``): all ones where missing, then 0 at every point none
    of whose ``Dy`` outputs is observed (NaN means "not observed"), so such a point takes
    no part in attention, pooling, neighbour search, the loss or any metric.
    ``observed_c``/``observed_t`` (float ``[B, N, Dy]``): 1 where an output value is
    observed at a real point, else 0; an unobserved value becomes 0 (whatever it was), so
    nothing downstream sees a NaN. Idempotent: flags already in ``batch`` are kept (a
    value zeroed by an earlier call stays unobserved).
    """
    import tensorflow as tf

    out = dict(batch)
    for (x_key, y_key, m_key), o_key in zip(PAIRS, OBSERVED_KEYS):
        y = tf.convert_to_tensor(out[y_key])
        if m_key not in out:
            out[m_key] = tf.ones(tf.shape(tf.convert_to_tensor(out[x_key]))[:2], dtype=tf.float32)
        mask = tf.convert_to_tensor(out[m_key])
        observed = tf.ones(tf.shape(y), tf.float32)
        if o_key in out:
            observed *= tf.cast(out[o_key], tf.float32)
        if y.dtype.is_floating:
            observed *= 1.0 - tf.cast(tf.math.is_nan(y), tf.float32)
            out[y_key] = tf.where(observed > 0.5, y, tf.zeros_like(y))
        observed *= tf.cast(mask, tf.float32)[..., None]  # padding is not observed
        out[o_key] = observed
        out[m_key] = mask * tf.cast(tf.reduce_any(observed > 0.5, -1), mask.dtype)
    return out


def with_targets(batch, **targets):
    """``batch`` with new target-side arrays (``xt=..., yt=..., mask_t=...``) and without
    the observed flags of the old targets (:func:`with_masks` makes them anew)."""
    out = {key: value for key, value in batch.items() if key != "observed_t"}
    out.update(targets)
    return out


def append_observed_flags(batch, dim_y):
    """``yc``/``yt`` ``[B, N, D]`` -> ``[B, N, D + dim_y]``: each point's values followed by
    its per-output observed flags (``observed_c``/``observed_t`` of :func:`with_masks`;
    ones where absent, e.g. a drawn target)."""
    import tensorflow as tf

    out = dict(batch)
    for (_, y_key, _), o_key in zip(PAIRS, OBSERVED_KEYS):
        y = tf.cast(out[y_key], tf.float32)
        flags = out.get(o_key)
        if flags is None:
            flags = tf.ones(tf.concat([tf.shape(y)[:2], [dim_y]], 0))
        out[y_key] = tf.concat([y, tf.cast(flags, tf.float32)], -1)
    return out


def fully_observed(batch):
    """``batch`` (after :func:`with_masks`) with ``mask_c``/``mask_t`` at 1 only where
    every output is observed: the points whose values can stand in for the whole point
    (LocalTaylor's neighbours)."""
    import tensorflow as tf

    out = dict(batch)
    for (_, _, m_key), o_key in zip(PAIRS, OBSERVED_KEYS):
        if o_key in out:
            full = tf.reduce_all(tf.cast(out[o_key], tf.float32) > 0.5, -1)
            out[m_key] = out[m_key] * tf.cast(full, out[m_key].dtype)
    return out


def observed_tasks(batch):
    """float ``[B]``: 1 for a task with at least one observed real target, else 0 (a
    batch after :func:`with_masks`)."""
    import tensorflow as tf

    return tf.cast(tf.reduce_any(batch["mask_t"] > 0.5, 1), tf.float32)


def validate_batch(batch, dim_x=None, dim_y=None, where="batch"):
    """Check ranks, matching sizes, masks and finiteness; raise :class:`BatchError`.

    Works on NumPy arrays or eager tensors. Padded points (mask 0) may hold anything
    finite. A NaN in ``yc``/``yt`` means "not observed" (:func:`with_masks`); an infinite
    output value, or a NaN/inf input location, is an error. A ``mask_t`` passed in must
    give each task a real target; after :func:`with_masks` (``observed_t`` present) a task
    whose targets are all unobserved has an all-zero ``mask_t`` and is left to the metrics
    to skip. ``dim_x``/``dim_y`` (if given)
    are the dims a model was built for.
    """
    if not isinstance(batch, dict):
        raise BatchError(f"{where} must be a dict with keys {REQUIRED}, got {type(batch).__name__}")
    missing = [k for k in REQUIRED if k not in batch]
    if missing:
        raise BatchError(f"{where} is missing {missing}; a batch needs {REQUIRED}")
    arrays = {k: np.asarray(v) for k, v in batch.items() if v is not None}
    for k in REQUIRED:
        if arrays[k].ndim != 3:
            raise BatchError(f"{where}[{k!r}] must be [batch, n_points, dim], got shape {arrays[k].shape}")
    b = arrays["xc"].shape[0]
    for x_key, y_key, m_key in PAIRS:
        x, y = arrays[x_key], arrays[y_key]
        if x.shape[:2] != y.shape[:2]:
            raise BatchError(f"{where}: {x_key} {x.shape} and {y_key} {y.shape} disagree in [batch, n_points]")
        if x.shape[0] != b:
            raise BatchError(f"{where}: batch size of {x_key} {x.shape} differs from xc {arrays['xc'].shape}")
        if m_key in arrays and arrays[m_key].shape != x.shape[:2]:
            raise BatchError(f"{where}[{m_key!r}] must have shape {x.shape[:2]}, got {arrays[m_key].shape}")
    if arrays["xc"].shape[2] != arrays["xt"].shape[2]:
        raise BatchError(f"{where}: xc dim {arrays['xc'].shape[2]} != xt dim {arrays['xt'].shape[2]}")
    if arrays["yc"].shape[2] != arrays["yt"].shape[2]:
        raise BatchError(f"{where}: yc dim {arrays['yc'].shape[2]} != yt dim {arrays['yt'].shape[2]}")
    if dim_x is not None and arrays["xt"].shape[2] != dim_x:
        raise BatchError(f"{where}: model expects inputs of dim {dim_x}, xt has shape {arrays['xt'].shape}")
    if dim_y is not None and arrays["yt"].shape[2] != dim_y:
        raise BatchError(f"{where}: model expects outputs of dim {dim_y}, yt has shape {arrays['yt'].shape}")
    if arrays["xt"].shape[1] == 0:
        raise BatchError(f"{where}: the target set is empty (Nt = 0); at least one target is needed")
    for key, arr in arrays.items():
        if arr.dtype.kind != "f":
            continue
        is_output = key in ("yc", "yt")
        bad = np.isinf(arr) if is_output else ~np.isfinite(arr)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            what = ("infinite value(s) (a NaN output means 'not observed'; inf is not a value)"
                    if is_output else "non-finite value(s) (NaN/inf): an input without a place cannot be used")
            raise BatchError(f"{where}[{key!r}] has {int(bad.sum())} {what}, "
                             f"first at index {idx}: {arr[idx]}")
    for _, _, m_key in PAIRS:
        if m_key in arrays and not np.isin(arrays[m_key], (0.0, 1.0)).all():
            raise BatchError(f"{where}[{m_key!r}] must hold only 0.0 and 1.0")
    # a mask the caller passed must leave each task a target; one derived by with_masks
    # (observed_t present) is 0 for a task with no observed target: scored as skipped
    if "mask_t" in arrays and "observed_t" not in arrays and (arrays["mask_t"].sum(axis=1) == 0).any():
        row = int(np.argmax(arrays["mask_t"].sum(axis=1) == 0))
        raise BatchError(f"{where}: task {row} has no real target point (mask_t is all zero)")
    return batch


def pad_tasks(tasks):
    """Stack variable-size tasks into one padded batch with masks (NumPy).

    ``tasks`` is a list of dicts with ``xc [Nc_i, Dx]``, ``yc``, ``xt [Nt_i, Dx]``, ``yt``
    (and optionally any of the group keys). Returns a batch dict of float32 arrays.
    """
    if not tasks:
        raise BatchError("pad_tasks needs at least one task")
    out = {}
    for (x_key, y_key, m_key), groups in zip(PAIRS, (("sc", "tc"), ("st", "tt"))):
        n_max = max(np.asarray(t[x_key]).shape[0] for t in tasks)
        for key in [x_key, y_key] + [g for g in groups if g in tasks[0]]:
            dim = np.asarray(tasks[0][key]).shape[-1]
            arr = np.zeros((len(tasks), n_max, dim), np.float32)
            for i, t in enumerate(tasks):
                v = np.asarray(t[key], np.float32).reshape(-1, dim)
                arr[i, : len(v)] = v
            out[key] = arr
        mask = np.zeros((len(tasks), n_max), np.float32)
        for i, t in enumerate(tasks):
            mask[i, : np.asarray(t[x_key]).shape[0]] = 1.0
        out[m_key] = mask
    return out


def empty_batch(b, nc, nt, dim_x, dim_y, per_task=()):
    """All-zero float32 batch ``[b, nc|nt, ...]`` with zero masks, for simulators to fill;
    ``per_task`` names extra ``[b]`` keys (e.g. ``gt_loglik``)."""
    out = {"xc": np.zeros((b, nc, dim_x), np.float32), "yc": np.zeros((b, nc, dim_y), np.float32),
           "xt": np.zeros((b, nt, dim_x), np.float32), "yt": np.zeros((b, nt, dim_y), np.float32),
           "mask_c": np.zeros((b, nc), np.float32), "mask_t": np.zeros((b, nt), np.float32)}
    for key in per_task:
        out[key] = np.zeros((b,), np.float32)
    return out


def batch_signature(dim_x, dim_y, extra_keys=()):
    """``tf.TensorSpec`` dict of a ``tf.data`` stream of batches (sizes left open)."""
    import tensorflow as tf

    sig = {
        "xc": tf.TensorSpec([None, None, dim_x], tf.float32),
        "yc": tf.TensorSpec([None, None, dim_y], tf.float32),
        "xt": tf.TensorSpec([None, None, dim_x], tf.float32),
        "yt": tf.TensorSpec([None, None, dim_y], tf.float32),
        "mask_c": tf.TensorSpec([None, None], tf.float32),
        "mask_t": tf.TensorSpec([None, None], tf.float32),
    }
    for key, spec in dict(extra_keys).items():
        sig[key] = spec
    return sig
