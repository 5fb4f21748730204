"""Shared attention executor: every attention plugin writes a score function, this runs it.

A score function maps one (query tile, key tile) pair to logits::

    score_fn(q [B,H,tq,dq], k [B,H,tk,dk], q_pos, k_pos, q_valid, k_valid) -> [B,H,tq,tk]

``q_pos``/``k_pos`` are the tile's rows of the positions handed to :func:`attend` (a
tensor ``[B, N, ...]`` or any nest of them, e.g. a dict of per-group features; ``None``
if none were given). ``q_valid [B,tq]`` / ``k_valid [B,tk]`` are bool (False = padded
query / key) or ``None`` when no ``query_mask`` / ``key_mask`` was given. A score may skip
work on invalid pairs: their logits are masked (keys) or never read (queries). It may
read trainable ``tf.Variable``s (e.g. the MLP of a Keras layer).

An optional update function averages per-pair values over the keys a query may attend
to, with the attention weights as input (TE-TNP's location update)::

    update_fn(weights [B,H,tq,tk] float32, q_pos, k_pos) -> [B,tq,tk,U]
    update[b, n] = mean over allowed keys m of update_fn(...)[b, n, m]        [B,Nq,U]

:func:`attend` runs both densely or tile by tile (online softmax; the backward pass
recomputes every block, flash-attention style, so memory is O(tile^2) per head), with
the same values and gradients (w.r.t. q, k, v, positions and the variables read).
:func:`choose_tile` is the one rule that picks the path from the memory a block of
pairs takes and the device; a compiled inference pass of a weight-free score on a CPU
runs one (batch row, head) lane at a time in the tiles of :func:`lane_tiles` instead.
:func:`options` overrides both (and whether the tiled loop is compiled with XLA) for
every attention run inside a ``with`` block. :func:`attend_blocks`
is the entry point of incremental decoding: a few new query rows against keys/values
kept in the blocks of a cache.

Conventions: ``key_mask`` [B,Nk] (1/True = real key); ``query_mask`` [B,Nq] (1/True =
real query; a hint for the score, the output of a padded query is unspecified);
``pair_mask_fn(q_index [tq], k_index [tk]) -> bool [tq,tk]`` from GLOBAL int32 indices
(True = allowed), e.g. causal. A query row with no allowed key returns exactly 0 (and a
0 update). Softmax statistics are float32 for every input dtype; the output has ``v``'s
dtype, the update float32.
"""
import contextlib
import dataclasses
import functools
import inspect
import math
import os
import threading

import tensorflow as tf

from taylorformer.tf_compat import could_record_gradients, in_xla_context, stop_recording

#: the tiling rule (:func:`choose_tile`) per device kind: dense while the dense block of
#: pair values takes at most ``dense_bytes``; otherwise tiles whose [B, tile, tile] blocks
#: take about ``tile_bytes``. CPU, measured: with ``pair_floats`` = the floats a score
#: materialises per (query, key) pair, these reproduce the measured choices of every
#: built-in: tiles of 512 at B = 1 and 128 at B = 16 for 8-head dot-product attention
#: (2^18 pairs; TNP-D forward at Nc = Nt = 1000, batch 16, XLA: 1.18-1.28 s with 128 vs
#: 1.24-1.44 s with 512), 128 at B = 1 for TE attention's pair MLP (136 floats per pair)
#: and 256 at B = 1 / 128 at B = 8 for BSA-TNP's biases (24 floats per pair;
#: docs/benchmarks.md). GPU, not yet measured (no GPU with TensorFlow so far): dense up
#: to 1 GiB of logits, as a GPU runs one large block far faster than a loop of small
#: ones and has the memory for it; tiles 8x larger than on the CPU.
BUDGETS = {"CPU": {"dense_bytes": 1 << 27, "tile_bytes": 1 << 23},
           "GPU": {"dense_bytes": 1 << 30, "tile_bytes": 1 << 26}}
#: the blocks of the lane layout (:func:`lane_tiles`), per device kind: a compiled
#: inference forward pass of a weight-free score runs one (batch row, head) lane at a time,
#: in blocks of at most ``(tile_q, tile_k)`` query rows x keys (``None``: no lane layout). CPU,
#: measured on TNP-D at batch 16, Nc = Nt = 1000 (2 cores, in one process): 1000 x 250
#: lane blocks 0.64-0.65 s against 0.71-0.73 s for 128 x 64 blocks of every row and head
#: at once, 0.66 s for 1000 x 500, 0.70-0.71 s for 1000 x 125 and 0.80 s for 500 x 500;
#: one layer at batch 1-4 (Nq = Nk = 2000-4000) was as fast as before with a whole query
#: chunk per tile (up to 2048 rows) and up to 20% slower with half a chunk
#: (docs/benchmarks.md, run G). A long query tile lets one product [tq, d] x [d, tk] run
#: at a time instead of B x H small ones. GPU: the [B, H] blocks (a GPU wants few large
#: kernels).
LANE_TILES = {"CPU": (2048, 256), "GPU": None}
#: how many query chunks a compiled inference forward pass runs as independent calls
#: (:func:`query_chunks`), per device kind: on a CPU one per core, so TensorFlow's
#: inter-op threads keep every core busy with one long call each (TNP-D at batch 16,
#: Nc = Nt = 1000 on 2 cores: 0.70-0.75 s in every call, against 0.84-1.6 s as one call,
#: whose short parallel sections leave a core idle: docs/benchmarks.md, run E); on a GPU
#: one call.
CHUNKS_PER_CORE = {"CPU": 1, "GPU": 0}
MIN_TILE, MAX_TILE = 16, 1024
_NEG = -1e30  # finite stand-in for -inf: masked logits and the initial running max
_AUTO = "auto"
_overrides = threading.local()  # the innermost options() of this thread: {"tile": .., "xla": .., ..}


@contextlib.contextmanager
def options(tile=_AUTO, xla=_AUTO, query_chunks=_AUTO):
    """Override the executor for every attention run (or traced, inside ``tf.function``) in
    the ``with`` block, e.g. ``with options(tile=None): model(batch)`` runs every layer dense.

    ``tile``: ``"auto"`` (:func:`choose_tile`'s rule and each layer's ``tile_size``, and the
    lanes of :func:`lane_tiles`), ``None`` (dense), an int (square tiles of that size) or a
    pair ``(tile_q, tile_k)`` (blocks of every batch row and head: no lanes); it wins over
    a layer's ``tile_size``.
    ``xla``: whether the tiled path's forward loop is compiled with XLA. ``"auto"``: when it
    runs inside a ``tf.function`` that is not itself XLA-compiled and no gradient is being
    recorded (inference: a fixed shape is compiled once; with the query chunks below, TNP-D
    at batch 16, Nc = Nt = 1000 ran in 0.74-0.75 s against 1.38-1.52 s for the earlier
    uncompiled loop in the same run on a 2-core CPU, for 13 MiB more steady memory:
    docs/benchmarks.md, run E);
    ``True``: also eagerly and in training; ``False``: never.
    ``query_chunks``: into how many query chunks a compiled forward pass with no gradient
    is cut, run as independent calls (:func:`query_chunks`); ``"auto"`` (one per CPU core
    for weight-free scores, else one) or a positive int (1: one call).
    Settings apply when a function is traced, so a ``tf.function`` traced earlier keeps the
    options it was traced with.
    """
    if tile != _AUTO:
        tile = _check_tile("options", tile)
    if xla not in (_AUTO, True, False):
        raise ValueError(f"options: xla must be 'auto', True or False, got {xla!r}")
    if query_chunks != _AUTO and not (isinstance(query_chunks, int) and not isinstance(query_chunks, bool)
                                      and query_chunks > 0):
        raise ValueError(f"options: query_chunks must be 'auto' or a positive int, got {query_chunks!r}")
    previous = getattr(_overrides, "value", None)
    _overrides.value = {"tile": tile, "xla": xla, "query_chunks": query_chunks}
    try:
        yield
    finally:
        _overrides.value = previous


def _check_tile(where, tile):
    """``None``, a positive int or a pair of them -> ``None`` or ``(tile_q, tile_k)``."""
    if tile is None:
        return None
    pair = tile if isinstance(tile, (tuple, list)) and len(tile) == 2 else (tile, tile)
    if not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in pair):
        raise ValueError(f"{where}: tile must be 'auto', None, a positive int or a pair "
                         f"(tile_q, tile_k) of them, got {tile!r}")
    return tuple(pair)


def _override(name):
    return (getattr(_overrides, "value", None) or {}).get(name, _AUTO)


def device_kind(x):
    """``"GPU"`` or ``"CPU"``: where ``x`` lives, or (unplaced, as while tracing) where
    TensorFlow places new ops by default: a visible GPU wins."""
    device = getattr(x, "device", "") or ""
    if "GPU" in device.upper():
        return "GPU"
    if "CPU" in device.upper():
        return "CPU"
    return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"


def mha_score(q_tile, k_tile, *_):
    """Standard attention logits q.k/sqrt(dq): [B,H,tq,dq], [B,H,tk,dq] -> [B,H,tq,tk]."""
    d = q_tile.shape[-1]
    scale = 1.0 / math.sqrt(d) if d is not None else tf.math.rsqrt(
        tf.cast(tf.shape(q_tile)[-1], q_tile.dtype))
    return tf.matmul(q_tile, k_tile, transpose_b=True) * tf.cast(scale, q_tile.dtype)


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
    B counts as 8). On a CPU, for a forward pass with no gradient whose tiled loop this
    module compiles with XLA (``compiled_inference``; default: whether the current trace is
    one), tiles of at most 128 get key tiles half as long: measured faster for TNP-D (128 x
    64 vs 128 x 128, batch 16) and TE-TNP (batch 1), the same for BSA-TNP at batch 8, while
    BSA-TNP's 256 x 128 at batch 1 was slower than 256 x 256. In that compiled inference a
    weight-free score (TNP-D's) runs the lanes of :func:`lane_tiles` instead unless an
    :func:`options` tile is set, so for it these tiles (and a layer's ``tile_size``) serve
    training and the other paths. Inside a caller's XLA
    function (``jit_compile=True``) tiles stay square: there TNP-D's 128 x 64 took 1.7 s
    against 1.3-1.45 s for 128 x 128 (docs/benchmarks.md, run F). Training keeps square
    tiles. An explicit ``tile_size`` (square) wins, and an :func:`options` tile over both.
    """
    forced = _override("tile")
    if forced != _AUTO:
        return forced
    if tile_size is not None:
        return (int(tile_size), int(tile_size))
    device = device or device_kind(q)
    budget = BUDGETS[device]
    b, h, nq, nk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    floats = pair_floats or h or 8
    if None not in (b, nq, nk):
        pairs = b * nq * nk
        limit = dense_pairs if dense_pairs is not None else budget["dense_bytes"] / (4 * floats)
        if pairs <= limit:
            return None
    tile = 2 ** round(math.log2(math.sqrt(budget["tile_bytes"] / (4 * floats * (b or 8)))))
    tile = int(min(MAX_TILE, max(MIN_TILE, tile)))
    if device == "CPU" and tile <= 128 and (
            _compiled_inference() if compiled_inference is None else compiled_inference):
        return (tile, max(MIN_TILE, tile // 2))
    return (tile, tile)


def query_chunks(nq, tile_q, device="CPU", shared=True):
    """How many query chunks a compiled forward pass with no gradient runs as independent
    calls. For a ``shared`` loop (a weight-free score, :meth:`_Plan.shareable`: the chunks
    read one copy of the inputs), :data:`CHUNKS_PER_CORE` of ``device`` times the usable
    cores; otherwise 1, since each chunk would cut its own tiles of the keys (TE-TNP and
    BSA-TNP ran 1.4-1.6x faster in 2 chunks for about 100 MiB more memory:
    docs/benchmarks.md, run E). An :func:`options` ``query_chunks`` wins. Always at most
    one chunk per query tile and at least 1 (also for an ``nq`` unknown at trace time)."""
    if nq is None:
        return 1
    forced = _override("query_chunks")
    if forced == _AUTO:
        forced = CHUNKS_PER_CORE[device] * _usable_cores() if shared else 1
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


def _usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _in_query_chunks(forward, n, tile_q, q, qp, query_mask):
    """``forward(q, qp, query_mask, first_row)`` over at most ``n`` query chunks,
    concatenated: its results are a list whose first two have rows on axis 2 (out
    ``[B,H,Nq,dv]``, lse ``[B,H,Nq]``) and the others on axis 1. Every chunk has one length
    ``L``, the whole tiles that ``n`` chunks need, rows ``[min(i L, Nq - L), + L)`` (the last
    overlaps the one before; the overlap's rows are kept once), so one compiled function
    serves them all. The calls do not depend on each other: in a graph, TensorFlow runs
    them at once."""
    if n <= 1:
        return forward(q, qp, query_mask, 0)
    nq = dims(q)[2]
    length = tile_q * -(-nq // (n * tile_q))
    parts = []
    for i in range(-(-nq // length)):
        start = min(i * length, nq - length)
        rows = lambda x, axis: _Blocks._rows(x, axis, start, length)  # noqa: E731
        res = forward(rows(q, 2), [rows(x, 1) for x in qp],
                      None if query_mask is None else rows(query_mask, 1), start)
        keep = i * length - start  # rows of the overlap, already computed by chunk i - 1
        parts.append([r[:, :, keep:] if a < 2 else r[:, keep:] for a, r in enumerate(res)])
    return [tf.concat(xs, 2 if a < 2 else 1) for a, xs in enumerate(zip(*parts))]


def attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
           query_mask=None, tile="auto", pair_floats=None, position_grads=True, update_fn=None):
    """Multi-head attention with a pluggable score function (see the module docstring).

    q: [B,H,Nq,dq], k: [B,H,Nk,dk], v: [B,H,Nk,dv]; q_pos / k_pos: ``[B, N, ...]`` tensors
    or nests of them (handed to ``score_fn`` tile by tile); masks as in the module
    docstring. ``tile``: ``"auto"`` (:func:`choose_tile` with ``pair_floats``), ``None``
    (dense), an int (square tiles of that size) or a pair ``(tile_q, tile_k)``.
    ``position_grads=False``: positions are data (their gradient is ``None``), which spares the tiled backward pass the
    score's derivative w.r.t. them. Returns ``[B,H,Nq,dv]``, or ``(out, update
    [B,Nq,U])`` with ``update_fn``.
    """
    tile = choose_tile(q, k, pair_floats) if isinstance(tile, str) and tile == _AUTO \
        else _check_tile("attend", tile)
    args = (score_fn, q, k, v, q_pos, k_pos, key_mask, pair_mask_fn, query_mask)
    if tile is None:
        return dense_attend(*args, position_grads=position_grads, update_fn=update_fn)
    return tiled_attend(*args, tile_q=tile[0], tile_k=tile[1], position_grads=position_grads,
                        update_fn=update_fn)


def attend_blocks(score_fn, q, blocks, query_mask=None):
    """Incremental decoding's entry point: new query rows against keys/values kept in blocks.

    q: [B,H,Nq,dq] (the few rows of one decoding step); ``blocks``: a list of ``(k
    [B,H,Lb,dk], v [B,H,Lb,dv], valid [B,Lb] bool)``, e.g. the buffers of a key/value
    cache (:class:`taylorformer.decoding.KeyValueCache`), which then need no
    concatenation. One softmax over the valid keys of all blocks; no positions, no
    structural mask (the blocks' ``valid`` holds it). A row with no valid key returns 0.
    Dense: [B,H,Nq,sum Lb] logits. Returns [B,H,Nq,dv] in the values' dtype.
    """
    qv = _as_bool(query_mask)
    s = tf.concat([tf.cast(score_fn(q, k, None, None, qv, valid), tf.float32) for k, _, valid in blocks], -1)
    valid = tf.concat([valid for _, _, valid in blocks], -1)[:, None, None, :]
    values = [v for _, v, _ in blocks]
    return tf.cast(_softmax_values(s, valid, values)[0], values[0].dtype)


def _softmax_values(s, valid, values):
    """Masked softmax of logits ``s`` [B,H,Nq,Nk] (float32; ``valid`` broadcastable bool,
    or None) times the values, given as blocks splitting Nk: ``(out [B,H,Nq,dv] float32,
    e, z)`` with ``e`` the unnormalised weights and ``z`` their row sums."""
    if valid is not None:
        s = tf.where(valid, s, _NEG)  # exp(-1e30 - max) is exactly 0
    e = tf.exp(s - tf.stop_gradient(tf.reduce_max(s, -1, keepdims=True)))
    # normalise after the matmul, like the tiled path; the row max contributes 1, so the sum
    # is >= 1 unless there are no keys at all (Nk = 0: empty context -> 0)
    z = tf.reduce_sum(e, -1, keepdims=True)
    parts = tf.split(e, [v.shape[2] if v.shape[2] is not None else tf.shape(v)[2] for v in values], -1) \
        if len(values) > 1 else [e]
    out = tf.add_n([tf.matmul(p, tf.cast(v, tf.float32)) for p, v in zip(parts, values)])
    out = tf.math.divide_no_nan(out, z)
    if valid is not None:  # a row with no valid key is uniform over -1e30 logits: zero it
        out *= tf.cast(tf.reduce_any(valid, -1, keepdims=True), out.dtype)
    return out, e, z


def dense_attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                 query_mask=None, position_grads=True, update_fn=None):
    """Reference path: full [B,H,Nq,Nk] logits and a masked softmax (args as ``attend``)."""
    if not position_grads:
        q_pos, k_pos = (None if p is None else tf.nest.map_structure(tf.stop_gradient, p)
                        for p in (q_pos, k_pos))
    s = tf.cast(score_fn(q, k, q_pos, k_pos, _as_bool(query_mask), _as_bool(key_mask)), tf.float32)
    masked = key_mask is not None or pair_mask_fn is not None
    valid = None
    if masked or update_fn is not None:
        valid = pair_validity(key_validity(key_mask, k), pair_mask_fn,
                              tf.range(tf.shape(q)[2]), tf.range(tf.shape(k)[2]))
    out, e, z = _softmax_values(s, valid if masked else None, [v])
    out = tf.cast(out, v.dtype)
    if update_fn is None:
        return out
    shape = tf.shape(s)
    valid = tf.broadcast_to(valid[:, 0], tf.stack([shape[0], shape[2], shape[3]]))  # [B,Nq,Nk]
    weights = tf.where(valid[:, None], tf.math.divide_no_nan(e, z), 0.0)
    vm = tf.cast(valid, tf.float32)
    g = tf.cast(update_fn(weights, q_pos, k_pos), tf.float32) * vm[..., None]
    return out, tf.reduce_sum(g, 2) / tf.maximum(tf.reduce_sum(vm, -1), 1.0)[..., None]


def tiled_attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                 query_mask=None, tile_q=512, tile_k=512, position_grads=True, update_fn=None):
    """Memory-efficient path (args as ``attend``): [tile_q, tile_k] blocks, online softmax.

    Sizes need not be multiples of the tiles (padded with masked keys / dropped query
    rows); a tile longer than a static N is shrunk to N. Loops are tf.while_loops with
    static tile sizes, so Nq, Nk (and B) may be dynamic. The gradient is a
    ``tf.custom_gradient`` that keeps only the inputs, the outputs and the per-row
    logsumexp, and recomputes every block, taking the VJP of ``score_fn`` (and of
    ``update_fn``) per block for q, k, positions and the variables they read.
    With ``update_fn`` the forward pass runs a second sweep per query tile (the weights
    need the row's logsumexp) and the backward pass one more (the rows' softmax
    correction ``sum_m a * da``) before the usual one.
    Works eagerly, in ``tf.function`` and under XLA (``jit_compile=True``). The forward
    loop compiled on its own (:func:`options`) is one XLA function of the inputs, shared by
    every call with the same weight-free score and shapes (e.g. every layer of a TNP-D).
    """
    qp_flat = [] if q_pos is None else tf.nest.flatten(q_pos)
    kp_flat = [] if k_pos is None else tf.nest.flatten(k_pos)
    plan = _Plan(score_fn, pair_mask_fn, update_fn, tile_len(tile_q, dims(q)[2]),
                 tile_len(tile_k, dims(k)[2]), position_grads, key_mask is not None,
                 query_mask is not None, q_pos, k_pos,
                 None if update_fn is None else _update_width(update_fn, q, k, q_pos, k_pos))
    # differentiable inputs: [q, *q positions], [k, *k positions], v
    n_qp, n_kp = (len(qp_flat), len(kp_flat)) if position_grads else (0, 0)
    compile_forward = _compile_tiles()
    # inference: independent query chunks (a backward pass would re-tile the inputs); a
    # weight-free score runs lane by lane on a CPU, unless options() sets the tiles
    inference, forward_plan, device = _compiled_inference(), plan, device_kind(q)
    if inference and plan.shareable() and _override("tile") == _AUTO:
        parts = query_chunks(q.shape[2], 1, device)  # the chunks, were every row a tile
        lane = lane_tiles(dims(q)[2], dims(k)[2], parts, device)
        if lane is not None:
            forward_plan = dataclasses.replace(plan, tq=lane[0], tk=lane[1], lanes=True)
    n_chunks = query_chunks(q.shape[2], forward_plan.tq, device, plan.shareable()) if inference else 1

    def split(xs):  # run's inputs -> (q, k, v, q positions, k positions)
        qp = list(xs[1:1 + n_qp]) if position_grads else qp_flat
        kp = list(xs[2 + n_qp:2 + n_qp + n_kp]) if position_grads else kp_flat
        return xs[0], xs[1 + n_qp], xs[-1], qp, kp

    @tf.custom_gradient
    def run(*xs):
        q, k, v, qp, kp = split(xs)
        with stop_recording():
            # out [B,H,Nq,dv] f32, lse [B,H,Nq] (+ update [B,Nq,U], count [B,Nq])
            if compile_forward and plan.shareable():  # one XLA function over slices
                tiles = stacked = None
                forward = _shared_forward(forward_plan)
                results = _in_query_chunks(lambda qc, qpc, qmc, _: forward(qc, k, v, qpc, kp, key_mask, qmc),
                                           n_chunks, forward_plan.tq, q, qp, query_mask)
            elif n_chunks > 1:  # inference, asked for: each chunk cut into tiles, its sweep
                tiles = stacked = None  # compiled on its own (the tiles are per chunk)

                def chunk_forward(qc, qpc, qmc, first_row):
                    t = _Blocks(plan, qc, k, v, qpc, kp, key_mask, qmc, q_offset=first_row)
                    return _untile(t, tf.function(functools.partial(_sweep, t, qc, v), jit_compile=True)(),
                                   dims(qc)[2])
                results = _in_query_chunks(chunk_forward, n_chunks, plan.tq, q, qp, query_mask)
            else:  # inputs cut into tiles here (kept for the backward pass)
                tiles = _Blocks(plan, q, k, v, qp, kp, key_mask, query_mask)
                sweep = functools.partial(_sweep, tiles, q, v)
                stacked = tf.function(sweep, jit_compile=True)() if compile_forward else sweep()
                results = _untile(tiles, stacked, dims(q)[2])
        out, lse = results[:2]

        def grad(dout, dupdate=None, variables=None):
            t = tiles or _Blocks(plan, q, k, v, qp, kp, key_mask, query_mask)
            qs_t, ks_t, v_t, tq, nqt, nkt = t.qs_t, t.ks_t, t.v_t, t.tq, t.nqt, t.nkt
            if stacked is not None:  # the forward pass ran on these tiles: its results as they are
                out_t, lse_t = stacked[:2]
                cnt_t = stacked[3] if plan.update_fn is not None else None
            else:  # the shared forward returned rows; padded query rows get lse = -_NEG,
                # so that p = exp(s - lse) is 0 there
                out_t, lse_t = tile_axis(out, 2, tq, nqt), tile_axis(lse, 2, tq, nqt, pad_value=-_NEG)
                cnt_t = tile_axis(results[3], 1, tq, nqt) if plan.update_fn is not None else None
            variables = list(variables or [])
            n_q, n_src = len(qs_t), len(qs_t) + len(ks_t)
            if dout is None:  # only the update is used downstream
                dout = tf.zeros(dims(q)[:3] + [dims(v)[3]])
            do_t = tile_axis(tf.cast(dout, tf.float32), 2, tq, nqt)
            delta = tf.reduce_sum(do_t * out_t, -1)  # rowsum(dO * O): [nqt,B,H,tq]
            zeros_var = [tf.zeros(w.shape) for w in variables]
            dq_init = [tf.zeros(dims(x)) for x in qs_t]
            dk_direct = [None] * len(ks_t)  # update_fn's own gradients w.r.t. key positions
            if plan.update_fn is not None:
                if dupdate is None:
                    dupdate = tf.zeros_like(results[2])
                # d update / d (per-pair value) is dupdate / count, the same for every key
                w_t = tile_axis(tf.cast(dupdate, tf.float32), 1, tq, nqt) / tf.maximum(cnt_t, 1.0)[..., None]

                def update_vjp(p, qi, kj, i, j, wrt):
                    """Gradients of sum(w_i * block_update) w.r.t. p and ``wrt``."""
                    with tf.GradientTape() as tape:
                        tape.watch([p] + wrt)
                        g, _ = t.block_update(p, qi, kj, i, j)
                    return tape.gradient(g, [p] + wrt, output_gradients=tf.broadcast_to(
                        w_t[i][:, :, None, :], tf.shape(g)),
                        unconnected_gradients=tf.UnconnectedGradients.ZERO)

                # sweep 1, per query tile: the softmax correction r = sum_m a * da, and
                # update_fn's direct gradients (positions, its variables)
                def correction_row(i, r_ta, dq_ta, dk_pos, dvar):
                    def step(j, r, dq_pos, dk_pos, dvar):
                        qi, kj = t.tiles(i, j)
                        p = tf.exp(t.masked(t.score(qi, kj, i, j), i, j) - lse_t[i][..., None])
                        g = update_vjp(p, qi, kj, i, j, qi[1:] + kj[1:] + variables)
                        gq, gk, gvar = g[1:n_q], g[n_q:n_src - 1], g[n_src - 1:]
                        return (r + tf.reduce_sum(p * g[0], -1), [a + b for a, b in zip(dq_pos, gq)],
                                [tf.tensor_scatter_nd_add(a, [[j]], b[None]) for a, b in zip(dk_pos, gk)],
                                [a + b for a, b in zip(dvar, gvar)])

                    r, dq_pos, dk_pos, dvar = loop(nkt, step, (
                        tf.zeros(t.rows), [tf.zeros(dims(x)[1:]) for x in qs_t[1:]], dk_pos, dvar))
                    return r_ta.write(i, r), [ta.write(i, x) for ta, x in zip(dq_ta, dq_pos)], dk_pos, dvar

                r_ta, dq_tas, dk_pos, zeros_var = loop(nqt, correction_row, (
                    tensor_array(nqt, q.shape[:2] + [tq]),
                    [tensor_array(nqt, x.shape[1:]) for x in qs_t[1:]],
                    [tf.zeros(dims(x)) for x in ks_t[1:]], zeros_var))
                r_t = r_ta.stack()
                dq_init = dq_init[:1] + [ta.stack() for ta in dq_tas]
                dk_direct = [None] + dk_pos

            def key_tile(j, dq_acc, dk_tas, dv_ta, dvar):
                # dV^T = dO^T P, accumulated as [B,H,dv,tk] and transposed once per key
                # tile: XLA:CPU runs P^T dO (transposing the large [tq,tk] operand) at
                # about half the speed (benchmarks/block_matmul_rates.py)
                def query_tile(i, dk, dv_t, dvar, dq_tas):
                    qi, kj = t.tiles(i, j)
                    sources = qi + kj  # not the constant positions
                    with tf.GradientTape() as tape:
                        tape.watch(sources)
                        s_raw = t.score(qi, kj, i, j)
                    p = tf.exp(t.masked(s_raw, i, j) - lse_t[i][..., None])  # 0 where masked
                    ds = p * (tf.matmul(do_t[i], v_t[j], transpose_b=True) - delta[i][..., None])
                    if plan.update_fn is not None:
                        ds += p * (update_vjp(p, qi, kj, i, j, [])[0] - r_t[i][..., None])
                    g = tape.gradient(s_raw, sources + variables,
                                      output_gradients=tf.cast(ds, s_raw.dtype),
                                      unconnected_gradients=tf.UnconnectedGradients.ZERO)
                    g = [tf.cast(tf.convert_to_tensor(x), tf.float32) for x in g]
                    gq, gk, gvar = g[:n_q], g[n_q:n_src], g[n_src:]
                    return ([a + b for a, b in zip(dk, gk)],
                            dv_t + tf.matmul(do_t[i], p, transpose_a=True),
                            [a + b for a, b in zip(dvar, gvar)],
                            [ta.write(i, x) for ta, x in zip(dq_tas, gq)])

                dv_t_shape = dims(v_t)[1:3] + [dims(v_t)[4], dims(v_t)[3]]  # [B,H,dv,tk]
                dk, dv_t, dvar, dq_tas = loop(nqt, query_tile, (
                    [tf.zeros(dims(x)[1:]) for x in ks_t], tf.zeros(dv_t_shape), dvar,
                    [tensor_array(nqt, x.shape[1:]) for x in qs_t]))
                return ([a + ta.stack() for a, ta in zip(dq_acc, dq_tas)],
                        [ta.write(j, x) for ta, x in zip(dk_tas, dk)],
                        dv_ta.write(j, tf.linalg.matrix_transpose(dv_t)), dvar)

            dq_acc, dk_tas, dv_ta, dvar = loop(nkt, key_tile, (
                dq_init, [tensor_array(nkt, x.shape[1:]) for x in ks_t],
                tensor_array(nkt, v_t.shape[1:]), zeros_var))
            nq, nk = dims(q)[2], dims(k)[2]
            d_in = ([untile_axis(d, 2 if a == 0 else 1, nq) for a, d in enumerate(dq_acc)]
                    + [untile_axis(ta.stack() if extra is None else ta.stack() + extra,
                                   2 if a == 0 else 1, nk)
                       for a, (ta, extra) in enumerate(zip(dk_tas, dk_direct))]
                    + [untile_axis(dv_ta.stack(), 2, nk)])
            d_in = [tf.cast(d, x.dtype) for d, x in zip(d_in, xs)]
            if not variables:
                return d_in
            return d_in, [tf.cast(d, w.dtype) for d, w in zip(dvar, variables)]

        if plan.update_fn is None:
            return tf.cast(out, v.dtype), grad
        return (tf.cast(out, v.dtype), results[2]), grad

    q_side = [q] + (qp_flat if position_grads else [])
    k_side = [k] + (kp_flat if position_grads else [])
    return run(*q_side, *k_side, v)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a tiled attention computes, apart from its input tensors: the functions, the
    tile sizes, which masks are given, the position structures (``q_pos``/``k_pos`` as
    passed: only their nest structure is used) and the width of the update."""

    score_fn: object
    pair_mask_fn: object
    update_fn: object
    tq: int
    tk: int
    position_grads: bool
    has_key_mask: bool
    has_query_mask: bool
    q_pos: object = dataclasses.field(compare=False)
    k_pos: object = dataclasses.field(compare=False)
    update_dim: object = None
    lanes: bool = False  # the forward pass runs one (batch row, head) at a time
    position_kinds: tuple = dataclasses.field(init=False)

    def __post_init__(self):
        kind = lambda p: None if p is None else "tensor" if tf.is_tensor(p) else "nest"  # noqa: E731
        object.__setattr__(self, "position_kinds", (kind(self.q_pos), kind(self.k_pos)))

    def shareable(self):
        """Whether one compiled forward may serve every call with this plan: a plain
        function as the score (no layer, so no weights, and no closure, so nothing
        captured), positions that are single tensors or none, no structural mask and no
        update."""
        plain = lambda f: inspect.isfunction(f) and f.__closure__ is None  # noqa: E731
        return (plain(self.score_fn) and self.pair_mask_fn is None and self.update_fn is None
                and "nest" not in self.position_kinds)


class _Blocks:
    """One tiled attention problem: the per-block steps of the forward pass and of its
    recomputation in the backward pass, over tiles of the inputs.

    ``sliced=False`` (the backward pass): the inputs are cut into tiles once
    (``qs_t``, ``ks_t``, ``v_t``: ``[n_tiles, ...]``, padded to whole tiles), which the
    backward pass's accumulators follow. ``sliced=True`` (the forward pass): no copy of
    the inputs; tile i is the slice of rows ``[start(i), start(i) + tile)`` with
    ``start(i) = min(i * tile, N - tile)``, so the last tile overlaps the one before it
    (its keys already seen are masked; its queries are computed twice and kept once, see
    :func:`untile_rows`). Inputs shorter than a tile are padded to one tile. ``q_offset``:
    the index of ``q``'s first row among all queries (a query chunk), for ``pair_mask_fn``.
    """

    def __init__(self, plan, q, k, v, q_pos_flat, k_pos_flat, key_mask, query_mask, sliced=False,
                 q_offset=0):
        self.plan, self.sliced, self.q_offset = plan, sliced, q_offset
        nq, nk = dims(q)[2], dims(k)[2]
        tq, tk = self.tq, self.tk = plan.tq, plan.tk
        self.nqt, self.nkt = num_tiles(nq, tq), num_tiles(nk, tk)
        self.rows = dims(q)[:2] + [tq]  # [B,H,tq]
        self.v_dim = dims(v)[3]
        kv = key_validity(key_mask, k)  # [B,Nk], padding is False
        qv = _as_bool(query_mask)
        n_qs = 1 + (len(q_pos_flat) if plan.position_grads else 0)
        n_ks = 1 + (len(k_pos_flat) if plan.position_grads else 0)
        if sliced:
            # every input at least one tile long on its row axis (2 for q, k and v; 1 for
            # positions and masks); differentiable [q, *positions] first, as below
            qs = [at_least(x, 2 if a == 0 else 1, tq) for a, x in enumerate([q] + q_pos_flat)]
            ks = [at_least(x, 2 if a == 0 else 1, tk) for a, x in enumerate([k] + k_pos_flat)]
            self.kv_src, self.v_src = at_least(kv, 1, tk), at_least(tf.cast(v, tf.float32), 2, tk)
            self.qv_src = None if qv is None else at_least(qv, 1, tq)
            self.q_len, self.k_len = dims(qs[0])[2], dims(ks[0])[2]
            self.qs_src, self.qp_const_src = qs[:n_qs], qs[n_qs:]
            self.ks_src, self.kp_const_src = ks[:n_ks], ks[n_ks:]
            return
        self.kv_t = tile_axis(kv, 1, tk, self.nkt)  # [nkt,B,tk]
        self.key_add_t = tf.where(self.kv_t, 0.0, _NEG)  # additive key mask per key tile
        self.qv_t = None if qv is None else tile_axis(qv, 1, tq, self.nqt)
        qs_t = [tile_axis(x, 2 if a == 0 else 1, tq, self.nqt) for a, x in enumerate([q] + q_pos_flat)]
        ks_t = [tile_axis(x, 2 if a == 0 else 1, tk, self.nkt) for a, x in enumerate([k] + k_pos_flat)]
        # differentiable tiles [q, *q positions], [k, *k positions]; positions without
        # gradients are constants
        self.qs_t, self.qp_const_t = qs_t[:n_qs], qs_t[n_qs:]
        self.ks_t, self.kp_const_t = ks_t[:n_ks], ks_t[n_ks:]
        self.v_t = tile_axis(tf.cast(v, tf.float32), 2, tk, self.nkt)

    # ------------------------------------------------------------------ tile access
    def q_start(self, i):
        return tf.minimum(i * self.tq, self.q_len - self.tq) if self.sliced else i * self.tq

    def k_start(self, j):
        return tf.minimum(j * self.tk, self.k_len - self.tk) if self.sliced else j * self.tk

    def q_index(self, i):
        """Global indices of query tile i's rows (``q`` is rows ``q_offset..`` of all): [tq]."""
        return self.q_offset + self.q_start(i) + tf.range(self.tq)

    def k_index(self, j):
        return self.k_start(j) + tf.range(self.tk)

    @staticmethod
    def _rows(x, axis, start, length):
        """Rows ``[start, start + length)`` of ``axis``: a slice of static length (XLA:
        a dynamic-slice)."""
        begin, size = [0] * len(x.shape), dims(x)
        begin[axis], size[axis] = start, length
        return tf.slice(x, begin, size)

    def tiles(self, i, j):
        """Differentiable inputs of block (i, j): [q_i, *pos_i], [k_j, *pos_j]."""
        if not self.sliced:
            return [x[i] for x in self.qs_t], [x[j] for x in self.ks_t]
        sq, sk = self.q_start(i), self.k_start(j)
        q, *qp = self.qs_src
        k, *kp = self.ks_src
        return ([self._rows(q, 2, sq, self.tq)] + [self._rows(x, 1, sq, self.tq) for x in qp],
                [self._rows(k, 2, sk, self.tk)] + [self._rows(x, 1, sk, self.tk) for x in kp])

    def values(self, j):
        """v of key tile j: [B,H,tk,dv] float32."""
        return self._rows(self.v_src, 2, self.k_start(j), self.tk) if self.sliced else self.v_t[j]

    def key_valid(self, j):
        """[B,tk] bool: real keys of tile j not already seen in an earlier tile."""
        if not self.sliced:
            return self.kv_t[j]
        fresh = self.k_index(j) >= j * self.tk  # the overlap of the last tile was seen
        return tf.logical_and(self._rows(self.kv_src, 1, self.k_start(j), self.tk), fresh[None])

    def query_valid(self, i):
        if self.sliced:
            return None if self.qv_src is None else self._rows(self.qv_src, 1, self.q_start(i), self.tq)
        return None if self.qv_t is None else self.qv_t[i]

    def positions(self, qi, kj, i, j):
        """The block's positions as handed to score/update."""
        if self.sliced:
            qc = [self._rows(x, 1, self.q_start(i), self.tq) for x in self.qp_const_src]
            kc = [self._rows(x, 1, self.k_start(j), self.tk) for x in self.kp_const_src]
        else:
            qc, kc = [x[i] for x in self.qp_const_t], [x[j] for x in self.kp_const_t]
        pack = lambda structure, flat: None if structure is None else tf.nest.pack_sequence_as(structure, flat)  # noqa: E731
        return pack(self.plan.q_pos, qi[1:] + qc), pack(self.plan.k_pos, kj[1:] + kc)

    # ------------------------------------------------------------------ block steps
    def score(self, qi, kj, i, j):
        qp, kp = self.positions(qi, kj, i, j)
        return self.plan.score_fn(qi[0], kj[0], qp, kp, self.query_valid(i),
                                  self.key_valid(j) if self.plan.has_key_mask else None)

    def allowed(self, i, j):
        """[B,1,1|tq,tk] bool."""
        return pair_validity(self.key_valid(j), self.plan.pair_mask_fn, self.q_index(i), self.k_index(j))

    def masked(self, s_raw, i, j):
        """f32 logits; masked entries pushed to about _NEG."""
        # additive (0 / _NEG per key and per structural pair), cheaper than a select on
        # every [B,H,tq,tk] block; exp(masked - max) is exactly 0 once a row has seen an
        # allowed key, and rows that never do are zeroed at the end
        add = (tf.where(self.key_valid(j), 0.0, _NEG) if self.sliced else self.key_add_t[j])[:, None, None, :]
        if self.plan.pair_mask_fn is not None:
            ok = self.plan.pair_mask_fn(self.q_index(i), self.k_index(j))
            add = add + tf.where(ok, 0.0, _NEG)[None, None]
        return tf.cast(s_raw, tf.float32) + add

    def block_update(self, p, qi, kj, i, j):
        """update_fn on block (i, j), zero outside the allowed pairs: [B,tq,tk,U]; and the
        allowed pairs as float [B,tq,tk]."""
        vm = tf.cast(tf.broadcast_to(self.allowed(i, j)[:, 0], tf.stack(self.rows[:1] + [self.tq, self.tk])),
                     tf.float32)
        qp, kp = self.positions(qi, kj, i, j)
        return tf.cast(self.plan.update_fn(p, qp, kp), tf.float32) * vm[..., None], vm

    def forward_row(self, i):
        """Online softmax of query tile i over all key tiles: out [B,H,tq,dv], lse [B,H,tq]."""
        def step(j, m, l, acc):
            s = self.masked(self.score(*self.tiles(i, j), i, j), i, j)
            m_new = tf.maximum(m, tf.reduce_max(s, -1))
            p = tf.exp(s - m_new[..., None])
            alpha = tf.exp(m - m_new)
            return (m_new, l * alpha + tf.reduce_sum(p, -1),
                    acc * alpha[..., None] + tf.matmul(p, self.values(j)))

        m, l, acc = loop(self.nkt, step, (tf.fill(self.rows, _NEG), tf.zeros(self.rows),
                                          tf.zeros(self.rows + [self.v_dim])))
        seen = m > 0.5 * _NEG  # the row has an allowed key (then l >= 1); else it is 0
        lse = tf.where(seen, m + tf.math.log(tf.where(seen, l, 1.0)), 0.0)
        return tf.where(seen[..., None], tf.math.divide_no_nan(acc, l[..., None]), 0.0), lse

    def update_row(self, i, lse):
        """Sum over allowed keys of update_fn, and their count: [B,tq,U], [B,tq]."""
        def step(j, acc, cnt):
            qi, kj = self.tiles(i, j)
            p = tf.exp(self.masked(self.score(qi, kj, i, j), i, j) - lse[..., None])  # 0 where masked
            g, vm = self.block_update(p, qi, kj, i, j)
            return acc + tf.reduce_sum(g, 2), cnt + tf.reduce_sum(vm, -1)

        batch = self.rows[:1] + [self.tq]
        acc, cnt = loop(self.nkt, step, (tf.zeros(batch + [self.plan.update_dim]), tf.zeros(batch)))
        return acc / tf.maximum(cnt, 1.0)[..., None], cnt


def _sweep(t, q, v):
    """The forward pass over the query tiles of :class:`_Blocks` ``t``, stacked:
    [out [nqt,B,H,tq,dv], lse [nqt,B,H,tq]] (+ [update [nqt,B,tq,U], count [nqt,B,tq]])."""
    has_update = t.plan.update_fn is not None

    def step(i, *tas):
        o, lse = t.forward_row(i)
        new = [o, lse] + (list(t.update_row(i, lse)) if has_update else [])
        return [ta.write(i, x) for ta, x in zip(tas, new)]

    row_shape = q.shape[:2] + [t.tq]
    shapes = [row_shape + v.shape[3:], row_shape]
    if has_update:
        shapes += [q.shape[:1] + [t.tq, t.plan.update_dim], q.shape[:1] + [t.tq]]
    return [ta.stack() for ta in loop(t.nqt, step, [tensor_array(t.nqt, s) for s in shapes])]


def _untile(t, stacked, nq):
    """:func:`_sweep`'s results as rows: out [B,H,Nq,dv] float32, lse [B,H,Nq] (+ update
    [B,Nq,U], count [B,Nq])."""
    if t.sliced:
        return [untile_rows(x, 2 if a < 2 else 1, nq, t.q_len) for a, x in enumerate(stacked)]
    return [untile_axis(x, 2 if a < 2 else 1, nq) for a, x in enumerate(stacked)]


def _forward_over_slices(plan, q, k, v, q_pos_flat, k_pos_flat, key_mask, query_mask):
    """The forward pass over slices of the inputs (no tiled copies of them): out
    [B,H,Nq,dv] float32, lse [B,H,Nq]. The function that :func:`_shared_forward` compiles.
    With ``plan.lanes``, a loop over the B x H (batch row, head) lanes runs the tiles of
    one lane at a time (blocks [1,1,tq,tk]); else every block holds all rows and heads."""
    if not plan.lanes:
        t = _Blocks(plan, q, k, v, q_pos_flat, k_pos_flat, key_mask, query_mask, sliced=True)
        return _untile(t, _sweep(t, q, v), dims(q)[2])
    b, h, nq = dims(q)[:3]

    def lane(i, out_ta, lse_ta):
        row, head = i // h, i % h
        lane_of = lambda x: tf.slice(x, [row, head, 0, 0], [1, 1] + dims(x)[2:])  # noqa: E731
        row_of = lambda x: None if x is None else _Blocks._rows(x, 0, row, 1)  # noqa: E731
        q_lane, v_lane = lane_of(q), lane_of(v)
        t = _Blocks(plan, q_lane, lane_of(k), v_lane, [row_of(x) for x in q_pos_flat],
                    [row_of(x) for x in k_pos_flat], row_of(key_mask), row_of(query_mask), sliced=True)
        out, lse = _untile(t, _sweep(t, q_lane, v_lane), nq)
        return out_ta.write(i, out[0, 0]), lse_ta.write(i, lse[0, 0])

    out_ta, lse_ta = loop(b * h, lane, (tensor_array(b * h, q.shape[2:3] + v.shape[3:]),
                                        tensor_array(b * h, q.shape[2:3])))
    return [tf.reshape(out_ta.stack(), [b, h, nq, dims(v)[3]]), tf.reshape(lse_ta.stack(), [b, h, nq])]


#: XLA-compiled forward passes of shareable plans (:meth:`_Plan.shareable`), one per plan:
#: XLA compiles each once per input signature, not once per attention layer
_SHARED_FORWARDS = {}


def _shared_forward(plan):
    """The one XLA-compiled :func:`_forward_over_slices` of a shareable ``plan``."""
    if plan not in _SHARED_FORWARDS:
        _SHARED_FORWARDS[plan] = tf.function(functools.partial(_forward_over_slices, plan),
                                             jit_compile=True)
    return _SHARED_FORWARDS[plan]


def _compile_tiles():
    """Whether the tiled forward loop is compiled with XLA (see :func:`options`)."""
    xla = _override("xla")
    if xla != _AUTO:
        return xla
    return tf.inside_function() and not in_xla_context() and not could_record_gradients()


def _compiled_inference():
    """Whether the attention being traced is a forward pass with no gradient whose tiled
    loop this module compiles with XLA (not a caller's XLA function)."""
    return not could_record_gradients() and _compile_tiles()


def _update_width(update_fn, q, k, q_pos, k_pos):
    """Static last dim of ``update_fn``'s output, from one (query, key) pair."""
    first = lambda p: None if p is None else tf.nest.map_structure(lambda x: x[:, :1], p)  # noqa: E731
    weights = tf.zeros(dims(q)[:2] + [1, 1])
    width = update_fn(weights, first(q_pos), first(k_pos)).shape[-1]
    if width is None:
        raise ValueError("attend: update_fn must return a static last dimension")
    return int(width)


# ------------------------------------------------------------------- tiling helpers
def dims(x):
    """Static dims as ints, unknown ones as scalar tensors."""
    return [d if d is not None else tf.shape(x)[i] for i, d in enumerate(x.shape)]


def tile_len(tile, n):
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
    """Inverse of the sliced tiling of :class:`_Blocks`: ``[nt, ..., t, ...] -> [..., n,
    ...]``, where tile i holds rows ``[min(i t, length - t), ... + t)`` of an axis of
    ``length >= t`` rows (the last tile overlaps the one before; ``n <= length``)."""
    nt, t = dims(x)[0], dims(x)[axis + 1]
    flat = untile_axis(x[:-1], axis, (nt - 1) * t)  # the tiles before the last: whole rows
    last = x[-1][(slice(None),) * axis + (slice(nt * t - length, None),)]  # its new rows
    return tf.concat([flat, last], axis)[(slice(None),) * axis + (slice(0, n),)]


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
    return tf.TensorArray(tf.float32, size=n, element_shape=element_shape)


def loop(n, body, state):
    """``for i in range(n): state = body(i, *state)`` as a tf.while_loop; returns state.

    parallel_iterations=1: in graph mode TF would otherwise run up to 10 iterations of
    each (nested) loop at once: up to 100 live blocks (N=4000, tile 512: +700 MiB RSS
    in forward+backward instead of +60 MiB).
    """
    return tf.while_loop(lambda i, *_: i < n, lambda i, *s: (i + 1, *body(i, *s)),
                         (tf.constant(0), *state), parallel_iterations=1)[1:]


def key_validity(key_mask, k):
    """[B,Nk] bool (True = real key)."""
    if key_mask is None:
        return tf.ones(dims(k)[:1] + dims(k)[2:3], tf.bool)
    return tf.cast(key_mask, tf.bool)


def pair_validity(key_valid, pair_mask_fn, q_index, k_index):
    """Allowed (query, key) pairs: [B,1,1|tq,tk] bool from key validity and structure."""
    valid = key_valid[:, None, None, :]
    if pair_mask_fn is not None:
        valid = tf.logical_and(valid, pair_mask_fn(q_index, k_index)[None, None])
    return valid


def _as_bool(mask):
    return None if mask is None else tf.cast(mask, tf.bool)
