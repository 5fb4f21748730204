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
* ``get_config()`` -> JSON-serialisable dict that rebuilds the task;
* optionally ``model_defaults``: a dict of spec values a model trained on the task takes
  where its spec leaves them open (the forecasting tasks: ``{"standardise": "window"}``);
* optionally ``changed_defaults``: ``{option: earlier default}`` for options whose default
  changed between releases. A run records such an option where its value differs from
  the earlier default, and a run's stored config without it is rebuilt with the earlier
  default (:func:`taylorformer.workflow.runs.stored_task_config`), so runs saved before
  the change load with the inputs they were trained on.

Simulated tasks subclass :class:`Task` and implement :meth:`Task.sample`; tasks
reading finite data (e.g. CSV series) override :meth:`Task.dataset`. ``sample`` runs on
several ``tf.data`` threads at once, so it must not change the task's state.

Every config value is checked in the task's constructor with the helpers below; a bad
one is a :class:`TaskError` naming the task, the key, the value and what is allowed.
A task whose batches would need more memory than the process can get says so before
allocating (:meth:`Task.check_memory`).
"""
import functools
import numbers
import os
import warnings

import numpy as np

from taylorformer import checks
from taylorformer.errors import SpecError, TaskError
from taylorformer.plugin_api import draws_from_sample

#: fixed seeds of the evaluation splits: the same batches in every run
SPLIT_SEEDS = {"train": 0, "val": 1_000_003, "test": 2_000_003}
DEFAULT_EVAL_BATCHES = {"val": 8, "test": 32}
#: largest input dimension a task accepts
MAX_DIM = 1024
#: largest count (set size, grid cells, ...): tensor dimensions are int32
MAX_COUNT = 2**31 - 1
#: largest |coordinate| of an input box or shift: float32 inputs keep 7 digits there
MAX_INPUT = 1e6


def make_task(name, config=None):
    """The registered task ``name`` built with its ``config`` dict; unknown keys (with
    close-match suggestions) and bad values are a :class:`TaskError` naming the task,
    the key and what is allowed; an unknown task is an ``UnknownComponentError``."""
    from taylorformer import components

    if config is not None and not isinstance(config, dict):
        raise TaskError(f"task {name!r}: the config must be a dict, got {type(config).__name__}")
    if config and "nan_policy" in config and "missing" not in config:
        # the option's earlier name, in the task configs that runs recorded
        warnings.warn(f"task {name!r}: 'nan_policy' is now called 'missing'", DeprecationWarning, stacklevel=2)
        config = {("missing" if key == "nan_policy" else key): value for key, value in config.items()}
    try:
        return components.build("task", {"name": name, **(config or {})}, "task config")
    except TaskError:
        raise
    except SpecError as exc:  # the builder's option check and wrapped TypeError/ValueError
        raise TaskError(str(exc)) from exc


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: the checks of :mod:`taylorformer.checks`, raising :class:`TaskError`
check_int = functools.partial(checks.check_int, error=TaskError)
check_number = functools.partial(checks.check_number, error=TaskError)
check_choice = functools.partial(checks.check_choice, error=TaskError)
check_bool = functools.partial(checks.check_bool, error=TaskError)


def check_dim_x(dim_x, owner="task"):
    """Reject a ``dim_x`` that is not an int in ``[1, MAX_DIM]``."""
    check_int(owner, "dim_x", dim_x, 1, MAX_DIM)


def real_pair(field, spec, low, high, owner="task", ordered=True, open_low=False):
    """``(a, b)`` floats from ``[a, b]``, both finite in ``[low, high]`` (``(low, high]`` with
    ``open_low``) and ``a <= b`` when ``ordered``; else a :class:`TaskError`."""
    bracket = "(" if open_low else "["
    rule = (f"[a, b] of finite numbers in {bracket}{low:g}, {high:g}]"
            + (" with a <= b" if ordered else ""))
    if not (isinstance(spec, (list, tuple)) and len(spec) == 2):
        raise TaskError(f"{owner} {field!r} must be {rule}, got {spec!r}")
    try:
        a, b = (check_number(owner, field, v, low, high, low_open=open_low) for v in spec)
    except TaskError:
        raise TaskError(f"{owner} {field!r} must be {rule}, got {spec!r}") from None
    if ordered and a > b:
        raise TaskError(f"{owner} {field!r} must be {rule}, got {spec!r} (a > b)")
    return a, b


def count_range(field, spec, low, owner="task"):
    """``(lo, hi)`` integers from an int or ``[lo, hi]`` with ``low <= lo <= hi <= MAX_COUNT``."""
    values = [spec, spec] if checks.is_int(spec) else spec
    if not (isinstance(values, (list, tuple)) and len(values) == 2
            and all(checks.is_int(v) for v in values) and low <= values[0] <= values[1] <= MAX_COUNT):
        raise TaskError(f"{owner} {field!r} must be an int or [lo, hi] of ints with "
                        f"{low} <= lo <= hi <= {MAX_COUNT}, got {spec!r}")
    return int(values[0]), int(values[1])


def scaled_range(lo, hi, n, reference, least=0):
    """``(lo, hi)`` of a default count ``U{lo..hi}`` set for ``reference`` points, on ``n``
    points (a canvas's pixels, a window's cells, a split's rows): as given from
    ``n >= reference`` up; on fewer, ``hi`` scaled by ``n / reference`` (floor, at least
    ``least``) and ``lo`` capped at it. Defaults whose ``hi`` sum to at most ``reference``
    so keep fitting ``n`` points together (beyond the ``least`` ones)."""
    top = max(least, min(hi, hi * n // reference))
    return min(lo, top), top


def split_names(field, spec, owner="task"):
    """Tuple of split names from one name or a list; unknown names are a :class:`TaskError`."""
    splits = [spec] if isinstance(spec, str) else spec
    if not isinstance(splits, (list, tuple)):
        raise TaskError(f"{owner} {field!r} must be a split name or a list of them "
                        f"({sorted(SPLIT_SEEDS)}), got {spec!r}")
    bad = [s for s in splits if not (isinstance(s, str) and s in SPLIT_SEEDS)]
    if bad:
        raise TaskError(f"{owner} {field!r} has unknown split(s) {bad}; splits: {sorted(SPLIT_SEEDS)}")
    return tuple(splits)


def _numbers(spec):
    """True where ``spec`` is a real number (not a bool) or nested lists/tuples of them."""
    return all(_numbers(v) for v in spec) if isinstance(spec, (list, tuple)) else _is_real(spec)


def _float_array(spec):
    """``spec`` as a float64 array, or None where it is not (rectangular) numbers."""
    try:
        return np.asarray(spec, np.float64) if _numbers(spec) else None
    except ValueError:  # ragged nesting
        return None


def input_shift(shift, dim_x, owner="task"):
    """``(shift [Dx] float64, its config value)`` from a number or ``dim_x`` numbers, each
    finite with ``|shift| <= MAX_INPUT``."""
    arr = _float_array(shift)
    if (arr is None or arr.shape not in ((), (dim_x,)) or not np.all(np.isfinite(arr))
            or np.any(np.abs(arr) > MAX_INPUT)):
        raise TaskError(f"{owner} 'shift' must be a finite number or {dim_x} numbers with "
                        f"|shift| <= {MAX_INPUT:g}, got {shift!r}")
    return np.broadcast_to(arr, (dim_x,)), (float(arr) if arr.ndim == 0 else arr.tolist())


def box_config(box):
    """Config value of a ``[Dx, 2]`` box (inverse of :func:`input_box`): ``[lo, hi]`` when
    every dim has the same bounds, else the per-dim pairs."""
    return box[0].tolist() if np.all(box == box[0]) else box.tolist()


def input_box(field, spec, dim_x, owner="task"):
    """``[Dx, 2]`` bounds from ``[lo, hi]`` (every dim) or ``[[lo, hi], ...]`` (per dim).

    Raises :class:`TaskError` naming ``owner`` and ``field`` when ``spec`` is not a box
    of finite bounds with ``-MAX_INPUT <= lo < hi <= MAX_INPUT`` in every dimension.
    """
    box = _float_array(spec)
    if box is not None and box.shape == (2,):
        box = np.tile(box, (dim_x, 1))
    if (box is None or box.shape != (dim_x, 2) or not np.all(np.isfinite(box))
            or not np.all(box[:, 0] < box[:, 1]) or np.any(np.abs(box) > MAX_INPUT)):
        raise TaskError(f"{owner} {field!r} must be [lo, hi] or {dim_x} pairs [[lo, hi], ...] "
                        f"of finite numbers with {-MAX_INPUT:g} <= lo < hi <= {MAX_INPUT:g}, "
                        f"got {spec!r}")
    return box


def dataset_args(batch_size, num_batches, start, seed=0):
    """Check the arguments of ``dataset``: ``batch_size`` an int >= 1, ``num_batches`` None
    or an int >= 0, ``start`` an int >= 0 and ``seed`` an int (:class:`TaskError`)."""
    check_int("dataset", "batch_size", batch_size)
    check_int("dataset", "num_batches", num_batches, minimum=0, optional=True)
    check_int("dataset", "start", start, minimum=0)
    if seed is not None and not checks.is_int(seed):
        checks.fail("dataset", "seed", seed, "an int or None", TaskError)


# ----------------------------------------------------------------------------- memory
def window_starts_dataset(split, batch_size, seed, start, num_batches, first, num_windows,
                          eval_starts):
    """``tf.data`` stream of ``[batch_size]`` int64 first rows of windows, for tasks that
    cut windows from one table. ``train``: uniform over ``first + [0, num_windows)``, batch
    ``i`` depending only on ``(seed, i)`` and the stream starting at batch ``start``
    (resuming continues it); otherwise ``eval_starts`` in order, once. ``num_batches``
    caps the stream."""
    import tensorflow as tf

    if split == "train":
        seed = int(seed)

        def draw(i):
            return first + tf.random.stateless_uniform(
                [batch_size], seed=tf.stack([tf.constant(seed, tf.int64), i]),
                minval=0, maxval=num_windows, dtype=tf.int64)

        ds = tf.data.Dataset.counter(start=int(start)).map(draw)
    else:
        ds = tf.data.Dataset.from_tensor_slices(eval_starts).batch(batch_size)
    return ds if num_batches is None else ds.take(int(num_batches))


def available_memory():
    """``(bytes, source)``: memory this process can still get. ``MemAvailable`` of
    ``/proc/meminfo`` (physical memory, ``SC_PHYS_PAGES * SC_PAGE_SIZE``, where that is
    unreadable), lowered to the room left under a cgroup v2 limit
    (``/sys/fs/cgroup/memory.max`` minus ``memory.current``) where one is set."""
    limit, source = None, None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limit, source = int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
    except (OSError, ValueError, IndexError):
        pass
    if limit is None:
        try:
            limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            source = "physical memory"
        except (OSError, ValueError, AttributeError):
            pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            cap = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if cap != "max" and (limit is None or int(cap) - used < limit):
            limit, source = max(int(cap) - used, 0), "room left under the cgroup limit /sys/fs/cgroup/memory.max"
    except (OSError, ValueError):
        pass
    return limit, source


def plot_task(task, model, batch, **kwargs):
    """``task.plot(model, batch, **kwargs)``, or the default plot of
    :meth:`Task.plot` for a task object that is not a :class:`Task` (a third-party task may
    only provide ``dataset``); returns the Figure."""
    plot = task.plot if hasattr(task, "plot") else functools.partial(Task.plot, task)
    return plot(model, batch, **kwargs)


def can_plot(task):
    """Whether :func:`plot_task` can draw ``task``'s batches."""
    return task.can_plot() if hasattr(task, "can_plot") else Task.can_plot(task)


def gib(nbytes):
    """``nbytes`` as text in GiB (MiB below 1 GiB)."""
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


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

    def can_plot(self):
        """Whether :meth:`plot` draws this task's batches (the default: 1-D and 2-D inputs)."""
        return self.dim_x in (1, 2)

    def plot(self, model, batch, num_tasks=4, num_samples=0, title=None, axes=None):
        """A ``matplotlib.figure.Figure`` of ``model``'s predictions on ``batch``: the plot
        ``taylorformer plot`` and the training's prediction images show. The default is
        :func:`taylorformer.plotting.plot_predictions`; tasks whose data call for another
        picture (images, forecasts against dates, the exact GP beside the model) override it."""
        from taylorformer.plotting import plot_predictions

        return plot_predictions(model, batch, num_tasks=num_tasks, num_samples=num_samples,
                                title=title, axes=axes)

    def memory_estimate(self, batch_size):
        """``(bytes, formula)``: peak memory of sampling one batch. Here the padded float32
        batch, ``4 B (Nc + Nt)(Dx + Dy + 1)`` with ``Nc``/``Nt`` = ``max_context``/``max_target``
        (0 where the task does not pad); subclasses add their working set."""
        n = (getattr(self, "max_context", None) or 0) + (getattr(self, "max_target", None) or 0)
        nbytes = 4 * batch_size * n * (self.dim_x + self.dim_y + 1)
        return nbytes, (f"padded batch 4 B (Nc + Nt)(Dx + Dy + 1) bytes with B = {batch_size}, "
                        f"Nc + Nt = {n}, Dx = {self.dim_x}, Dy = {self.dim_y}")

    def check_memory(self, batch_size=1):
        """:class:`TaskError` stating the estimate and the limit where sampling one batch of
        ``batch_size`` tasks would need more memory than the process can get
        (:func:`available_memory`). Called before anything of that size is allocated."""
        needed, formula = self.memory_estimate(batch_size)
        limit, source = available_memory()
        if limit is not None and needed > limit:
            raise TaskError(f"task {self.name!r}: one batch of {batch_size} task(s) needs about "
                            f"{gib(needed)} ({needed} bytes = {formula}) but this process can get "
                            f"at most {gib(limit)} ({limit} bytes, {source}); lower num_context / "
                            f"num_target (or the batch size)")

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

    @draws_from_sample
    def dataset(self, split="train", batch_size=16, seed=0, num_batches=None, start=0):
        """``tf.data.Dataset`` of batches; see the module docstring.

        Batch ``i`` is ``sample(default_rng([SPLIT_SEEDS[split], seed or 0, i]))``, sampled
        on ``tf.data``'s thread pool (several batches at once) and delivered in order.
        """
        import tensorflow as tf

        if not (isinstance(split, str) and split in SPLIT_SEEDS):
            raise TaskError(f"split must be one of {sorted(SPLIT_SEEDS)}, got {split!r}")
        dataset_args(batch_size, num_batches, start, seed)
        self.check_memory(batch_size)
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
        # No autotuning thread: freeing an iterator waits for that thread, which sleeps up to
        # its optimisation period (growing to a minute) before it sees the cancellation; a
        # long training stream freed after ``fit`` blocked the main job for ~50 s (gdb:
        # ``RootDataset::Iterator`` destructor waiting, ``Model::OptimizeLoop`` in a timed
        # wait). Without it, the AUTOTUNE values stay at tf.data's defaults, untuned (the
        # main job's step rate is unchanged).
        options = tf.data.Options()
        options.autotune.enabled = False
        return ds.prefetch(tf.data.AUTOTUNE).with_options(options)
