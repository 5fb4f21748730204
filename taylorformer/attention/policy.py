"""The tiling policy: dense or tiled, which tiles, how many query chunks, which lanes.

Three tables, one entry per device kind, and the rules that read them. Each entry says
where it comes from: ``MEASURED`` points every measured entry at the benchmark section
that tuned it; every other entry is a guess. **No GPU entry is measured**: they follow
the reasoning in their comments and are the first thing to measure on a GPU
(``benchmarks/conditional_inference.py``, ``benchmarks/attention_executor_bench.py``).
The rules change only speed and memory, never a result.
"""
import math
import os

import tensorflow as tf

from taylorformer.attention.overrides import AUTO, override
from taylorformer.attention.overrides import compiled_inference as tracing_compiled_inference

#: (table, device kind) -> the benchmark section (path from the repository root, then the
#: heading's anchor) that tuned the entry; an entry not listed here is unmeasured
MEASURED = {
    ("BUDGETS", "CPU"): "benchmarks/README.md#budgets",
    ("LANE_TILES", "CPU"): "benchmarks/README.md#lane_tiles",
    ("CHUNKS_PER_CORE", "CPU"): "benchmarks/README.md#chunks_per_core",
}

#: dense while the dense block of pair values takes at most ``dense_bytes``; otherwise
#: tiles whose ``[B, tile, tile]`` blocks take about ``tile_bytes`` (:func:`choose_tile`)
BUDGETS = {
    # measured: reproduces the fastest tiles found for every built-in attention
    "CPU": {"dense_bytes": 1 << 27, "tile_bytes": 1 << 23},
    # UNMEASURED guess: a GPU runs one large block far faster than a loop of small ones
    # and has the memory for it, so dense up to 1 GiB of logits, tiles 8x larger
    "GPU": {"dense_bytes": 1 << 30, "tile_bytes": 1 << 26},
}
#: the blocks ``(tile_q, tile_k)`` (query rows x keys, at most) of the lane layout
#: (:func:`lane_tiles`): a compiled inference forward pass of a weight-free score runs one
#: (batch row, head) lane at a time, so that one long product ``[tq, d] x [d, tk]`` runs at
#: a time instead of ``B x H`` small ones; ``None``: no lanes
LANE_TILES = {
    "CPU": (2048, 256),  # measured
    "GPU": None,  # UNMEASURED guess: a GPU wants few large kernels, the [B, H] blocks
}
#: query chunks per usable core that a compiled inference forward pass of a weight-free
#: score runs as independent calls (:func:`query_chunks`); 0: one call
CHUNKS_PER_CORE = {
    # measured: TensorFlow's inter-op threads keep every core busy with one long call
    # each, where one call's short parallel sections leave a core idle
    "CPU": 1,
    "GPU": 0,  # UNMEASURED guess: one call (the GPU is one device)
}
MIN_TILE, MAX_TILE = 16, 1024


def is_measured(table, device):
    """Whether the ``table`` entry (``"BUDGETS"``, ``"LANE_TILES"``, ``"CHUNKS_PER_CORE"``)
    of ``device`` comes from a measurement (see :data:`MEASURED`)."""
    return (table, device) in MEASURED


def device_kind(x):
    """``"GPU"`` or ``"CPU"``: where ``x`` lives, or (unplaced, as while tracing) where
    TensorFlow places new ops by default: a visible GPU wins."""
    device = getattr(x, "device", "") or ""
    if "GPU" in device.upper():
        return "GPU"
    if "CPU" in device.upper():
        return "CPU"
    return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"


def choose_tile(q, k, pair_floats=None, tile_size=None, dense_pairs=None, device=None,
                compiled_inference=None):
    """The tiling rule: ``None`` (run dense) or tiles ``(tile_q, tile_k)`` for ``q [B,H,Nq,d]``,
    ``k [B,H,Nk,d]``.

    ``pair_floats``: float32 values the score materialises per (query, key) pair (default
    H, the logits). With the :data:`BUDGETS` of ``device`` (``"CPU"``/``"GPU"``; default
    :func:`device_kind` of ``q``): dense while the static ``B * Nq * Nk * pair_floats * 4``
    bytes are at most ``dense_bytes`` (or ``B * Nq * Nk <= dense_pairs`` when given);
    otherwise (also for sizes unknown at trace time) power-of-two tiles whose ``[B, tile,
    tile]`` blocks take about ``tile_bytes``, clipped to ``[MIN_TILE, MAX_TILE]`` (an unknown
    B counts as 8).

    On a CPU, in a forward pass with no gradient whose tiled loop this package compiles
    with XLA (``compiled_inference``; default: whether the current trace is one), tiles of
    at most 128 get key tiles half as long (measured faster for those; not for larger
    tiles, nor inside a caller's own XLA function, nor in training, which keep square
    tiles). There a weight-free score runs the lanes of :func:`lane_tiles` instead, unless
    an :func:`~taylorformer.attention.options` tile is set. An explicit ``tile_size``
    (square) wins, and an :func:`~taylorformer.attention.options` tile over both.
    """
    forced = override("tile")
    if forced != AUTO:
        return forced
    if tile_size is not None:
        return (int(tile_size), int(tile_size))
    device = device or device_kind(q)
    budget = BUDGETS[device]
    b, h, nq, nk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    floats = pair_floats or h or 8
    if None not in (b, nq, nk):
        limit = dense_pairs if dense_pairs is not None else budget["dense_bytes"] / (4 * floats)
        if b * nq * nk <= limit:
            return None
    tile = 2 ** round(math.log2(math.sqrt(budget["tile_bytes"] / (4 * floats * (b or 8)))))
    tile = int(min(MAX_TILE, max(MIN_TILE, tile)))
    if device == "CPU" and tile <= 128 and (
            tracing_compiled_inference() if compiled_inference is None else compiled_inference):
        return (tile, max(MIN_TILE, tile // 2))
    return (tile, tile)


def query_chunks(nq, tile_q, device="CPU", shared=True):
    """How many query chunks a compiled forward pass with no gradient runs as independent
    calls. For a ``shared`` loop (a weight-free score: the chunks read one copy of the
    inputs), :data:`CHUNKS_PER_CORE` of ``device`` times the usable cores; otherwise 1,
    since each chunk would cut its own tiles of the keys (faster, but for more memory).
    An :func:`~taylorformer.attention.options` ``query_chunks`` wins. Always at most one
    chunk per query tile and at least 1 (also for an ``nq`` unknown at trace time)."""
    if nq is None:
        return 1
    forced = override("query_chunks")
    if forced == AUTO:
        forced = CHUNKS_PER_CORE[device] * usable_cores() if shared else 1
    return max(1, min(forced, nq // tile_q))


def lane_tiles(nq, nk, parts, device="CPU"):
    """Tiles ``(tile_q, tile_k)`` of the lane layout for ``nq`` queries in ``parts`` query
    chunks and ``nk`` keys, or ``None`` where ``device`` runs none (:data:`LANE_TILES`).
    Each is the longest tile within the device's bound that cuts its axis (a chunk's rows,
    the keys) into equal whole tiles, e.g. 1000 x 250 for Nq = 2000 in 2 chunks and Nk =
    1000 on a CPU; a size unknown at trace time gets the bound."""
    bounds = LANE_TILES[device]
    if bounds is None:
        return None
    return (balanced_tile(nq, parts, bounds[0]), balanced_tile(nk, 1, bounds[1]))


def balanced_tile(n, parts, bound):
    """The longest tile of at most ``bound`` rows that cuts ``ceil(n / parts)`` rows into
    equal whole tiles (the last may be short by less than one row per tile); ``bound``
    when ``n`` is not a static int."""
    if not isinstance(n, int):
        return bound
    rows = max(1, -(-n // parts))
    return -(-rows // -(-rows // bound))


def usable_cores():
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
