"""``options()``: per-``with``-block overrides of how attention runs (never of what it computes).

The settings of the innermost ``with options(...)`` block of the current thread are read
when an attention is run or traced; a ``tf.function`` traced earlier keeps the settings
it was traced with.
"""
import contextlib
import os
import threading

import tensorflow as tf

from taylorformer.tf_compat import could_record_gradients, in_xla_context

AUTO = "auto"
#: environment variable that switches the forward-pass speed-ups off for a whole process
#: (``0``), as ``options(speedups=False)`` does for a ``with`` block
SPEEDUPS_ENV = "TAYLORFORMER_ATTENTION_SPEEDUPS"
_overrides = threading.local()  # the innermost options() of this thread: {"tile": .., ..}


@contextlib.contextmanager
def options(tile=AUTO, xla=AUTO, query_chunks=AUTO, speedups=AUTO):
    """Override the executor for every attention run (or traced, inside ``tf.function``) in
    the ``with`` block, e.g. ``with options(tile=None): model(batch)`` runs every layer dense.

    ``tile``: ``"auto"`` (:func:`~taylorformer.attention.policy.choose_tile`'s rule and each
    layer's ``tile_size``, and the lanes of :mod:`~taylorformer.attention.speedups`),
    ``None`` (dense), an int (square tiles of that size) or a pair ``(tile_q, tile_k)``
    (blocks of every batch row and head: no lanes); it wins over a layer's ``tile_size``.
    ``xla``: whether the tiled path's forward loop is compiled with XLA. ``"auto"``: when it
    runs inside a ``tf.function`` that is not itself XLA-compiled and no gradient is being
    recorded (inference: a fixed shape is compiled once and runs far faster than the
    uncompiled loop); ``True``: also eagerly and in training; ``False``: never.
    ``query_chunks``: into how many query chunks a compiled forward pass with no gradient
    is cut, run as independent calls; ``"auto"`` (one per CPU core for weight-free scores,
    else one) or a positive int (1: one call).
    ``speedups``: ``False`` switches off every forward-pass speed-up of
    :mod:`~taylorformer.attention.speedups` (the shared compiled loop, query chunks,
    lanes; ``query_chunks`` is then ignored); results are the same, only slower on a CPU.
    ``"auto"``/``True``: on, unless the environment variable
    ``TAYLORFORMER_ATTENTION_SPEEDUPS=0`` is set.
    """
    if tile != AUTO:
        tile = check_tile("options", tile)
    if xla not in (AUTO, True, False):
        raise ValueError(f"options: xla must be 'auto', True or False, got {xla!r}")
    if query_chunks != AUTO and not (isinstance(query_chunks, int) and not isinstance(query_chunks, bool)
                                     and query_chunks > 0):
        raise ValueError(f"options: query_chunks must be 'auto' or a positive int, got {query_chunks!r}")
    if speedups not in (AUTO, True, False):
        raise ValueError(f"options: speedups must be 'auto', True or False, got {speedups!r}")
    previous = getattr(_overrides, "value", None)
    _overrides.value = {"tile": tile, "xla": xla, "query_chunks": query_chunks, "speedups": speedups}
    try:
        yield
    finally:
        _overrides.value = previous


def check_tile(where, tile):
    """``None``, a positive int or a pair of them -> ``None`` or ``(tile_q, tile_k)``."""
    if tile is None:
        return None
    pair = tile if isinstance(tile, (tuple, list)) and len(tile) == 2 else (tile, tile)
    if not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in pair):
        raise ValueError(f"{where}: tile must be 'auto', None, a positive int or a pair "
                         f"(tile_q, tile_k) of them, got {tile!r}")
    return tuple(pair)


def override(name):
    """The innermost :func:`options` setting ``name``, or ``"auto"``."""
    return (getattr(_overrides, "value", None) or {}).get(name, AUTO)


def speedups_enabled():
    """Whether :mod:`~taylorformer.attention.speedups` may run: an :func:`options` setting
    wins, else the environment variable (``0`` = off, ``1`` or unset = on)."""
    setting = override("speedups")
    if setting != AUTO:
        return setting
    value = os.environ.get(SPEEDUPS_ENV, "1").strip()
    if value not in ("0", "1", ""):
        raise ValueError(f"{SPEEDUPS_ENV} must be 0 or 1, got {value!r}")
    return value != "0"


def compile_tiles():
    """Whether the tiled forward loop is compiled with XLA (see :func:`options`)."""
    xla = override("xla")
    if xla != AUTO:
        return xla
    return tf.inside_function() and not in_xla_context() and not could_record_gradients()


def compiled_inference():
    """Whether the attention being traced is a forward pass with no gradient whose tiled
    loop this package compiles with XLA (not a caller's XLA function)."""
    return not could_record_gradients() and compile_tiles()
