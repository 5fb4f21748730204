"""Array helpers for cutting an axis into tiles and looping over them.

Every helper accepts static sizes (ints) or sizes known only when the graph runs (scalar
tensors), so the tiled paths work with dynamic ``B``, ``Nq`` and ``Nk``.
"""
import tensorflow as tf


def dims(x):
    """Static dims as ints, unknown ones as scalar tensors."""
    return [d if d is not None else tf.shape(x)[i] for i, d in enumerate(x.shape)]


def tile_len(tile, n):
    """The tile length for an axis of ``n`` rows: ``tile``, shrunk to a static ``n > 0``."""
    return min(tile, n) if isinstance(n, int) and n > 0 else tile


def num_tiles(n, t):
    """Tiles of ``t`` covering ``n`` (static int or scalar tensor); at least one, so that an
    empty axis (no queries, or an empty context) is one fully padded tile, not an empty
    loop whose TensorArray cannot be stacked when the batch size is dynamic."""
    return max(-(-n // t), 1) if isinstance(n, int) else tf.maximum((n + t - 1) // t, 1)


def tile_axis(x, axis, t, nt, pad_value=0):
    """Pad ``axis`` to nt*t (``pad_value``, zeros / False by default) and split it into
    tiles first: [nt, ..., t, ...]."""
    shape = dims(x)
    pad = [[0, 0]] * len(shape)
    pad[axis] = [0, nt * t - shape[axis]]
    x = tf.pad(x, pad, constant_values=pad_value)
    x = tf.reshape(x, shape[:axis] + [nt, t] + shape[axis + 1:])
    return tf.transpose(x, [axis] + list(range(axis)) + list(range(axis + 1, len(shape) + 1)))


def untile_axis(x, axis, n):
    """Inverse of ``tile_axis``: [nt, ..., t, ...] -> [..., n, ...] (drops the padding)."""
    rank = len(x.shape)
    x = tf.transpose(x, list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank)))
    shape = dims(x)
    x = tf.reshape(x, shape[:axis] + [shape[axis] * shape[axis + 1]] + shape[axis + 2:])
    return x[(slice(None),) * axis + (slice(0, n),)]


def untile_rows(x, axis, n, length):
    """Inverse of tiling by overlapping slices: ``[nt, ..., t, ...] -> [..., n, ...]``,
    where tile i holds rows ``[min(i t, length - t), ... + t)`` of an axis of ``length >=
    t`` rows (the last tile overlaps the one before; ``n <= length``)."""
    nt, t = dims(x)[0], dims(x)[axis + 1]
    flat = untile_axis(x[:-1], axis, (nt - 1) * t)  # the tiles before the last: whole rows
    last = x[-1][(slice(None),) * axis + (slice(nt * t - length, None),)]  # its new rows
    return tf.concat([flat, last], axis)[(slice(None),) * axis + (slice(0, n),)]


def rows(x, axis, start, length):
    """Rows ``[start, start + length)`` of ``axis``: a slice of static length (XLA: a
    dynamic-slice)."""
    begin, size = [0] * len(x.shape), dims(x)
    begin[axis], size[axis] = start, length
    return tf.slice(x, begin, size)


def at_least(x, axis, t):
    """``x`` padded (zeros / False) at the end of ``axis`` to at least ``t`` rows; ``x``
    itself, without a copy, when its static length already is."""
    n = dims(x)[axis]
    if isinstance(n, int) and n >= t:
        return x
    pad = [[0, 0]] * len(x.shape)
    pad[axis] = [0, tf.maximum(t - n, 0)]
    return tf.pad(x, pad)


def tensor_array(n, element_shape=None):
    """A float32 ``tf.TensorArray`` of ``n`` elements."""
    return tf.TensorArray(tf.float32, size=n, element_shape=element_shape)


def loop(n, body, state):
    """``for i in range(n): state = body(i, *state)`` as a tf.while_loop; returns state.

    ``parallel_iterations=1``: in graph mode TensorFlow would otherwise run up to 10
    iterations of each (nested) loop at once, keeping up to 100 blocks alive at a time
    (benchmarks/README.md, "Loops run one iteration at a time").
    """
    return tf.while_loop(lambda i, *_: i < n, lambda i, *s: (i + 1, *body(i, *s)),
                         (tf.constant(0), *state), parallel_iterations=1)[1:]
