"""Sampling in bounded memory: per-(window, sample) random streams, memory budgets and chunk plans.

:meth:`taylorformer.models.AutoregressiveNP.sample` draws ``S`` joint paths for ``B``
windows as ``S x B`` *rows* (one row = one (window, sample) pair). Every row holds its own
key/value caches (:mod:`taylorformer.models.decoding`), so memory grows with ``S x B``; this
module splits the rows into chunks that fit a memory budget and makes the draws
independent of that split:

* **Row streams.** Each row's randomness comes from a counter-based hash
  (SplitMix64's finaliser on uint64) of ``(seed, global window index, sample index)``,
  then of ``(step, element)``: :func:`row_keys`, :func:`row_uniforms`. A row's draws do
  not depend on which other rows share its chunk, so any chunking (and any batch size of
  ``evaluate``) gives the same samples for a seed, and so does XLA (integer ops only).
* **Draws from uniforms.** :func:`draw` turns a row's uniforms into a draw of the
  step's conditional by inversion (Normal, Student-t, mixtures of Normals, Bernoulli,
  Categorical: every built-in likelihood); a distribution of another family falls back
  to ``dist.sample(seed)`` keyed by the chunk's first row, whose draws then depend on
  the chunking (named in :func:`draw`'s docstring).
* **Budgets.** :func:`parse_memory` reads ``"2GB"``, ``"512MiB"`` or a byte count (at
  most the machine's memory); :func:`default_budget` is this process's resident memory
  plus :data:`DEFAULT_ROOM` (less where the system has less available). A budget bounds
  the whole process: the room for a chunk is the budget minus what the process holds (its
  resident memory after handing freed heap pages back, or at an earlier sampling call if
  less: :func:`held_bytes`), minus the outputs and a fixed :data:`FIXED_BYTES` for the
  loop itself.
* **Estimates.** :func:`row_bytes` is the peak memory one row adds while it is decoded:
  the bytes of its caches (read off a one-row ``start_cache``, so any encoder with the
  cached-decoding protocol is measured, not guessed) times :data:`CACHE_COPIES`, plus the
  context pass's attention scores (heads x Nc x Nc floats per layer, the largest
  transient). benchmarks/README.md ("bounded_sampling.py") checks it against measured peaks.
"""
import math
import os
import re

import numpy as np
import tensorflow as tf

from taylorformer.checks import available_memory, machine_memory
from taylorformer.errors import SpecError

#: SplitMix64 constants (Steele, Lea & Flood 2014): the golden-ratio increment and the
#: two multipliers of its finaliser
_GOLDEN = 0x9E3779B97F4A7C15
_MUL1, _MUL2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
#: the stream of a row's random target order (steps use 0 .. Nt - 1)
ORDER_STREAM = 2**40
#: the stream of a conditional model's independent draws
INDEPENDENT_STREAM = 2**40 + 1
#: a cache is held about this many times at the peak of a decoding loop: the loop state
#: and the buffers a settle writes into, plus TensorFlow's working copies (measured on
#: the taylorformer preset, benchmarks/README.md, "bounded_sampling.py")
CACHE_COPIES = 3.0
#: the attention scores of the context pass: scores, softmax and their copies
SCORE_COPIES = 3.0
#: held once per call whatever the rows: the decoding loop's first trace and TensorFlow's
#: working buffers (measured on the taylorformer preset: benchmarks/README.md)
FIXED_BYTES = 300 * 10**6
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


# ----------------------------------------------------------------------------- row streams
def _u64(value):
    return tf.constant(value, tf.uint64) if isinstance(value, int) else tf.cast(value, tf.uint64)


def _mix(z):
    """SplitMix64's finaliser of ``z`` (uint64): a bijection whose output bits all depend
    on every input bit."""
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(30))) * _u64(_MUL1)
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(27))) * _u64(_MUL2)
    return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(31)))


def _combine(key, value):
    """A new uint64 key from ``key`` and ``value`` (broadcast)."""
    return _mix(tf.bitwise.bitwise_xor(key, _mix(_u64(value) + _u64(_GOLDEN))))


def row_keys(seed, windows, samples):
    """uint64 keys ``[len(samples) * len(windows)]`` of the rows (sample-major, as
    :func:`~taylorformer.models.target_order.tile_batch` lays them out) of ``windows`` (global
    window indices) x ``samples`` (sample indices), from ``seed`` (an int32 pair)."""
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    base = _combine(_combine(_u64(0), seed[0]), seed[1])
    windows = tf.cast(tf.convert_to_tensor(windows), tf.int64)
    samples = tf.cast(tf.convert_to_tensor(samples), tf.int64)
    keys = _combine(_combine(base, windows)[None, :], samples[:, None])  # [S, W]
    return tf.reshape(keys, [-1])


def row_uniforms(keys, stream, count):
    """float64 uniforms in (0, 1), ``[R, count]``: element ``j`` of ``stream`` (an int, or
    a scalar int tensor: the step) of each row key ``[R]``. 53 random bits each."""
    stream_keys = _combine(keys, tf.cast(stream, tf.int64))  # [R]
    bits = _combine(stream_keys[:, None], tf.range(count, dtype=tf.int64)[None, :])
    return (tf.cast(tf.bitwise.right_shift(bits, _u64(11)), tf.float64) + 0.5) * 2.0**-53


def random_orders(keys, num_targets):
    """One uniformly random permutation of the targets per row key: int32 ``[R, Nt]``."""
    return tf.argsort(row_uniforms(keys, ORDER_STREAM, num_targets), axis=1, stable=True)


def _inverse_categorical(probs, u):
    """The index k with cdf(k - 1) < u <= cdf(k): ``probs [..., K]``, ``u [...]``."""
    below = tf.reduce_sum(tf.cast(tf.cumsum(tf.cast(probs, tf.float64), axis=-1) < u[..., None], tf.int32), -1)
    return tf.minimum(below, tf.shape(probs)[-1] - 1)


def _normal(loc, scale, u):
    return tf.cast(tf.cast(loc, tf.float64) + tf.cast(scale, tf.float64) * tf.math.ndtri(u), tf.float32)


def _uniforms_like(keys, step, shape, copies=1):
    """Uniforms ``[copies, *shape]`` (``shape`` = ``[R, ...]``) from each row's stream at ``step``."""
    count = tf.reduce_prod(shape[1:])
    u = tf.reshape(row_uniforms(keys, step, copies * count), tf.concat([[shape[0], copies], shape[1:]], 0))
    return tf.unstack(u, copies, axis=1) if copies > 1 else [u[:, 0]]


def draw(dist, keys, step):
    """One draw of ``dist`` (batch shape ``[R, ...]``, e.g. ``[R, Dy]``) from the rows'
    streams ``keys [R]`` at ``step`` (int or scalar tensor): float32 of the batch shape.

    By inversion of the row's uniforms, so row r's draw depends only on its key and the
    step: Normal (``loc + scale * ndtri(u)`` in float64), Student-t (its quantile),
    mixtures of Normals (component by the inverse CDF of its weights, then a Normal),
    Bernoulli, Categorical. Other families: ``dist.sample(seed)`` with a seed from the
    first row's key, which depends on the chunking (same seed and chunks: same draws).
    """
    tfd = _tfd()
    shape = dist.batch_shape_tensor()
    if isinstance(dist, tfd.Normal):
        return _normal(dist.loc, dist.scale, _uniforms_like(keys, step, shape)[0])
    if isinstance(dist, tfd.StudentT):
        u = tf.clip_by_value(_uniforms_like(keys, step, shape)[0], 2.0**-24, 1 - 2.0**-24)
        return tf.cast(dist.quantile(tf.cast(u, tf.float32)), tf.float32)
    if isinstance(dist, tfd.Bernoulli):
        return tf.cast(_uniforms_like(keys, step, shape)[0] < tf.cast(dist.probs_parameter(), tf.float64),
                       tf.float32)
    if isinstance(dist, tfd.Categorical):
        u = _uniforms_like(keys, step, shape)[0]
        return tf.cast(_inverse_categorical(dist.probs_parameter(), u), tf.float32)
    if isinstance(dist, tfd.MixtureSameFamily) and isinstance(dist.components_distribution, tfd.Normal):
        weights = dist.mixture_distribution.probs_parameter()  # [R, ..., K]
        pick, u = _uniforms_like(keys, step, shape, copies=2)
        k = _inverse_categorical(weights, pick)[..., None]  # [R, ..., 1]
        normal = dist.components_distribution
        rank = weights.shape.rank - 1
        at = lambda x: tf.gather(tf.broadcast_to(x, tf.shape(weights)), k, batch_dims=rank)[..., 0]  # noqa: E731
        return _normal(at(normal.loc), at(normal.scale), u)
    first = tf.bitcast(keys[0], tf.int32)  # [2]
    seed = tf.random.experimental.stateless_fold_in(first, tf.cast(step, tf.int32))
    return tf.cast(dist.sample(seed=seed), tf.float32)


def independent_samples(dist, seed, window_ids, num_samples):
    """``num_samples`` draws ``[S, B, ...]`` of a factorised predictive ``dist`` (batch shape
    ``[B, ...]``: a conditional model's), window ``b`` and sample ``s`` from the stream of
    ``(seed, window_ids[b], s)``: a window's samples do not depend on the other windows."""
    return tf.stack([draw(dist, row_keys(seed, window_ids, [s]), INDEPENDENT_STREAM)
                     for s in range(num_samples)])


def _tfd():
    import tensorflow_probability as tfp

    return tfp.distributions


# ----------------------------------------------------------------------------- budgets
def parse_memory(value, what="memory_budget"):
    """Bytes (int) of ``value``: an int (bytes) or a string ``"<number><unit>"`` with unit
    B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB or K/M/G/T (powers of 1024);
    :class:`SpecError` otherwise, when not positive or when more than the machine's
    memory (:func:`taylorformer.checks.machine_memory`)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        number, unit = float(value), ""
    elif isinstance(value, str) and (match := re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*",
                                                           value.lower())):
        number, unit = float(match.group(1)), match.group(2)
    else:
        number, unit = None, None
    if number is None or unit not in _UNITS or not math.isfinite(number) or number * _UNITS[unit] < 1:
        raise SpecError(f"{what} must be a positive size such as 2GB, 512MiB or a number of bytes, "
                        f"got {value!r}")
    total = machine_memory()
    if total is not None and number * _UNITS[unit] > total:
        raise SpecError(f"{what} must be at most this machine's memory ({format_bytes(total)}), got {value!r}")
    return int(number * _UNITS[unit])


def format_bytes(count):
    """``count`` bytes as a short decimal size: ``'1.5 GB'``."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{int(count)} B"


def release_free_memory():
    """Hand the heap's free pages back to the system (glibc ``malloc_trim``; a no-op
    elsewhere), so that the resident memory counts what the process holds, not what an
    earlier call freed."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def resident_bytes():
    """This process's resident memory now (Linux ``/proc/self/statm``; 0 elsewhere), after
    :func:`release_free_memory`."""
    release_free_memory()
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


#: the most room the default budget gives the sampler beside what the process holds: the
#: chunks of a larger budget are no faster per window, and 64 windows x 100 paths of the
#: taylorformer preset stay under 4 GB (benchmarks/README.md, "bounded_sampling.py")
DEFAULT_ROOM = 2 * 10**9


def default_budget():
    """This process's resident memory plus :data:`DEFAULT_ROOM`, or plus half of the memory
    the system has available where that is less (leaving the rest to other work)."""
    room = available_memory()
    return resident_bytes() + (DEFAULT_ROOM if room is None else min(DEFAULT_ROOM, room // 2))


def resolve_budget(memory_budget):
    """Bytes of ``memory_budget`` (see :func:`parse_memory`); ``None``: :func:`default_budget`."""
    return default_budget() if memory_budget is None else parse_memory(memory_budget)


# ----------------------------------------------------------------------------- estimates
def _nest_bytes_per_row(nest):
    """Bytes per batch row of the tensors in ``nest`` (rank >= 1; batch axis first)."""
    return sum(int(np.prod(t.shape[1:])) * t.dtype.size for t in tf.nest.flatten(nest)
               if isinstance(t, tf.Tensor) and t.shape.rank)


def _encoder_size(model, key, default):
    entry = model.spec["encoder"]
    return int(entry.get(key, default)) if isinstance(entry, dict) else default


def row_bytes(model, batch, cache):
    """Estimated peak bytes one (window, sample) row adds while it is decoded, for a
    prepared ``batch`` (its shapes: ``[B, Nc, .]``, ``[B, Nt, .]``) of ``model``.

    Cached decoding (``cache=True``): the bytes of the row's caches, read off a one-row
    :meth:`start_cache` (encoder and wrapper), times :data:`CACHE_COPIES`, plus the
    context pass's attention scores (``heads x Nc x Nc`` float32 times
    :data:`SCORE_COPIES`). Reference path: one full pass over ``L = Nc + Nt`` points
    per step, ``layers x heads x L x L`` scores times :data:`SCORE_COPIES`."""
    nc, nt = int(batch["xc"].shape[1]), int(batch["xt"].shape[1])
    heads = _encoder_size(model, "num_heads", 8)
    if not cache:
        return int(SCORE_COPIES * _encoder_size(model, "layers", 4) * heads * (nc + nt) ** 2 * 4) + 1
    from taylorformer.models import decoding
    from taylorformer.batch import fully_observed

    one = {key: value[:1] for key, value in batch.items()}
    held = 0
    features = None
    if model.wrapper is not None:
        state, features = model.wrapper.start_cache(fully_observed(one))
        held += _nest_bytes_per_row(state)
    inputs, kwargs = model._encoder_inputs(decoding.context_only(one), features)
    held += _nest_bytes_per_row(model.encoder.start_cache({**inputs, "mask_t": one["mask_t"]}, **kwargs))
    scores = SCORE_COPIES * heads * max(nc, 1) ** 2 * 4
    return int(CACHE_COPIES * held + scores) + 1


def plan_chunks(num_windows, num_samples, rows_per_chunk):
    """``(windows per chunk, samples per chunk)`` with at most ``rows_per_chunk`` rows:
    every sample of as many windows as fit, else some samples of one window."""
    if rows_per_chunk >= num_samples:
        return min(num_windows, rows_per_chunk // num_samples), num_samples
    return 1, rows_per_chunk


#: the least resident memory seen when a sampling call started (see :func:`held_bytes`)
_least_resident = None


def held_bytes():
    """What this process holds apart from the sampler: its resident memory now, or when an
    earlier sampling call started if that was less. Memory an earlier call freed stays
    resident (allocators keep some of it) but is reused by the next call, so it is not
    counted twice."""
    global _least_resident
    resident = resident_bytes()
    _least_resident = resident if _least_resident is None else min(_least_resident, resident)
    return _least_resident


def rows_per_chunk(budget, per_row, output_bytes, owner="sample"):
    """How many rows of ``per_row`` bytes fit in ``budget`` beside what this process holds
    (:func:`held_bytes`) and ``output_bytes``; :class:`SpecError` when not even one does."""
    resident = held_bytes()
    room = budget - resident - output_bytes - FIXED_BYTES
    if room < per_row:
        raise SpecError(
            f"{owner}: a memory budget of {format_bytes(budget)} leaves no room for one (window, sample): "
            f"this process already holds {format_bytes(resident)}, the outputs need "
            f"{format_bytes(output_bytes)}, the decoding loop about {format_bytes(FIXED_BYTES)} and one "
            f"(window, sample) about {format_bytes(per_row)}; raise the budget to at least "
            f"{format_bytes(resident + output_bytes + FIXED_BYTES + per_row)}")
    return int(room // per_row)
