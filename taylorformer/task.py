"""Base class of task plugins (kind ``task``).

A task turns a configuration into ``tf.data`` streams of batches (see
:mod:`taylorformer.batch`). A registered task object is a callable returning a task
instance (usually the class itself, or a ``functools.partial`` for a named preset).

Protocol every task follows:

* ``dim_x``, ``dim_y`` attributes;
* ``dataset(split, batch_size, seed=0, num_batches=None, start=0)`` ->
  ``tf.data.Dataset`` of batch dicts; ``split`` is ``"train"`` (infinite, seeded by
  ``seed``; training batch ``i`` depends only on ``(seed, i)``, and ``start`` skips to
  batch ``start`` so a resumed run continues the same stream) or ``"val"``/``"test"``
  (finite, fixed seeds: identical in every run);
* ``get_config()`` -> JSON-serialisable dict that rebuilds the task.

Simulated tasks subclass :class:`Task` and implement :meth:`Task.sample`; tasks
reading finite data (e.g. CSV series) override :meth:`Task.dataset`. ``sample`` runs on
several ``tf.data`` threads at once, so it must not change the task's state.
"""
import numpy as np

from taylorformer.errors import SpecError

#: fixed seeds of the evaluation splits: the same batches in every run
SPLIT_SEEDS = {"train": 0, "val": 1_000_003, "test": 2_000_003}
DEFAULT_EVAL_BATCHES = {"val": 8, "test": 32}


def make_task(name, config=None):
    """The registered task ``name`` built with its ``config`` dict; unknown keys and bad
    values are a :class:`SpecError` naming the task and its valid options."""
    from taylorformer import components

    if config is not None and not isinstance(config, dict):
        raise SpecError(f"task {name!r}: the config must be a dict, got {type(config).__name__}")
    return components.build("task", {"name": name, **(config or {})}, "task config")


def check_dim_x(dim_x, owner="task"):
    """Reject a ``dim_x`` that is not an int >= 1."""
    if not (isinstance(dim_x, int) and not isinstance(dim_x, bool) and dim_x >= 1):
        raise SpecError(f"{owner} 'dim_x' must be an int >= 1, got {dim_x!r}")


def count_range(field, spec, low, owner="task"):
    """``(lo, hi)`` integers from an int or ``[lo, hi]`` with ``low <= lo <= hi``."""
    values = [spec, spec] if isinstance(spec, int) and not isinstance(spec, bool) else spec
    if not (isinstance(values, (list, tuple)) and len(values) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            and low <= values[0] <= values[1]):
        raise SpecError(f"{owner} {field!r} must be an int or [lo, hi] of ints with "
                        f"{low} <= lo <= hi, got {spec!r}")
    return int(values[0]), int(values[1])


def choice(owner, field, value, allowed):
    """``value`` if it is one of ``allowed``, else a :class:`SpecError` naming them."""
    if value not in allowed:
        raise SpecError(f"{owner} task {field!r} must be one of {allowed}, got {value!r}")
    return value


def split_names(field, spec, owner="task"):
    """Tuple of split names from one name or a list; unknown names are a :class:`SpecError`."""
    splits = [spec] if isinstance(spec, str) else list(spec)
    bad = [s for s in splits if s not in SPLIT_SEEDS]
    if bad:
        raise SpecError(f"{owner} {field!r} has unknown split(s) {bad}; splits: {sorted(SPLIT_SEEDS)}")
    return tuple(splits)


def input_shift(shift, dim_x, owner="task"):
    """``(shift [Dx] float64, its config value)`` from a number or ``dim_x`` numbers."""
    try:
        arr = np.asarray(shift, np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.shape not in ((), (dim_x,)):
        raise SpecError(f"{owner} 'shift' must be a number or {dim_x} numbers, got {shift!r}")
    return np.broadcast_to(arr, (dim_x,)), (float(arr) if arr.ndim == 0 else arr.tolist())


def box_config(box):
    """Config value of a ``[Dx, 2]`` box (inverse of :func:`input_box`): ``[lo, hi]`` when
    every dim has the same bounds, else the per-dim pairs."""
    return box[0].tolist() if np.all(box == box[0]) else box.tolist()


def input_box(field, spec, dim_x, owner="task"):
    """``[Dx, 2]`` bounds from ``[lo, hi]`` (every dim) or ``[[lo, hi], ...]`` (per dim).

    Raises :class:`SpecError` naming ``owner`` and ``field`` when ``spec`` is not a box
    with ``lo < hi`` in every dimension.
    """
    try:
        box = np.asarray(spec, np.float64)
    except (TypeError, ValueError):
        box = None
    if box is not None and box.shape == (2,):
        box = np.tile(box, (dim_x, 1))
    if box is None or box.shape != (dim_x, 2) or not np.all(box[:, 0] < box[:, 1]):
        raise SpecError(f"{owner} {field!r} must be [lo, hi] or {dim_x} pairs [[lo, hi], ...] "
                        f"with lo < hi, got {spec!r}")
    return box


class Task:
    """Simulated task: subclasses implement :meth:`sample` (NumPy)."""

    name = "task"
    dim_x = 1
    dim_y = 1

    def sample(self, rng, batch_size, split):
        """One batch dict of float32 NumPy arrays (shapes in :mod:`taylorformer.batch`)."""
        raise NotImplementedError

    def extra_signature(self):
        """``tf.TensorSpec`` of optional batch keys this task emits (e.g. ``gt_loglik``)."""
        return {}

    def get_config(self):
        return {}

    def signature(self, batch_size):
        """``tf.TensorSpec`` dict of this task's batches. Where the task pads every batch to
        ``max_context`` / ``max_target`` points (attributes), the sizes are static: XLA
        compiles the step once and attention picks dense or tiled when it is traced."""
        import tensorflow as tf

        from taylorformer.batch import batch_signature

        sizes = {"c": getattr(self, "max_context", None), "t": getattr(self, "max_target", None)}
        out = {}
        for key, spec in batch_signature(self.dim_x, self.dim_y, self.extra_signature()).items():
            shape = spec.shape.as_list()
            if shape:
                shape[0] = batch_size
            side = key[-1] if key in ("xc", "yc", "sc", "tc", "mask_c", "xt", "yt", "st", "tt", "mask_t") else None
            if side and len(shape) > 1 and sizes[side] is not None:
                shape[1] = sizes[side]
            out[key] = tf.TensorSpec(shape, spec.dtype)
        return out

    def dataset(self, split="train", batch_size=16, seed=0, num_batches=None, start=0):
        """``tf.data.Dataset`` of batches; see the module docstring.

        Batch ``i`` is ``sample(default_rng([SPLIT_SEEDS[split], seed or 0, i]))``, sampled
        on ``tf.data``'s thread pool (several batches at once) and delivered in order.
        """
        import tensorflow as tf

        if split not in SPLIT_SEEDS:
            raise SpecError(f"split must be one of {sorted(SPLIT_SEEDS)}, got {split!r}")
        if split != "train" and num_batches is None:
            num_batches = DEFAULT_EVAL_BATCHES[split]
        signature = self.signature(batch_size)
        keys = list(signature)
        stream = seed if split == "train" else 0

        def sample(i):
            # a generator per batch index: batch i of a split never depends on how many
            # batches were read before it, nor on the thread that samples it
            batch = self.sample(np.random.default_rng([SPLIT_SEEDS[split], stream, int(i)]),
                                batch_size, split)
            if set(batch) != set(keys):
                raise ValueError(f"task {self.name!r}: sample() returned keys {sorted(batch)}, "
                                 f"its signature has {sorted(keys)}")
            return [np.asarray(batch[k], signature[k].dtype.as_numpy_dtype) for k in keys]

        def load(i):
            values = tf.numpy_function(sample, [i], [signature[k].dtype for k in keys], stateful=False)
            return {k: tf.ensure_shape(v, signature[k].shape) for k, v in zip(keys, values)}

        indices = (tf.data.Dataset.counter(int(start)) if num_batches is None
                   else tf.data.Dataset.range(int(start), int(start) + int(num_batches)))
        ds = indices.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return ds.prefetch(tf.data.AUTOTUNE)
