"""Shared attention executor: every attention plugin writes a score function, this runs it.

A score function maps one (query tile, key tile) pair to logits::

    score_fn(q [B,H,tq,dq], k [B,H,tk,dk], q_pos [B,tq,P] | None, k_pos [B,tk,P] | None)
        -> logits [B,H,tq,tk]

It may read trainable ``tf.Variable``s (e.g. the MLP of a Keras layer). ``attend`` runs it
densely for small problems and tile by tile (online softmax, recomputation in the backward
pass, memory O(tile^2) per head in forward and backward) for large ones; both paths give
the same values and gradients (w.r.t. q, k, v, positions and the score's variables).

Conventions: ``key_mask`` [B,Nk] (1/True = real key); ``pair_mask_fn(q_index [tq],
k_index [tk]) -> bool [tq,tk]`` from GLOBAL int32 indices (True = allowed), e.g. causal.
A query row with no allowed key returns exactly 0. Softmax statistics are float32 for
every input dtype; the output has ``v``'s dtype.
"""
import math

import tensorflow as tf
# stop_recording keeps an active tape from storing the tiled forward's intermediates
# (what tf.recompute_grad does); the custom gradient recomputes them tile by tile.
from tensorflow.python.eager import record

DEFAULT_TILE = 512  # tiled_attend's default
#: attend() picking its own tile: about this many (query, key) pairs per [B, tile, tile]
#: block: 512 at B = 1, 128 at B = 16. TNP-D forward at Nc = Nt = 1000, batch 16, 2-core
#: CPU, XLA, three alternating runs each: 1.18-1.28 s with tiles of 128 vs 1.24-1.44 s
#: with 512, and 1.45 instead of 1.7 GB peak RSS.
DEFAULT_TILE_PAIRS = 1 << 18
DEFAULT_DENSE_THRESHOLD = 1 << 20
_NEG = -1e30  # finite stand-in for -inf: masked logits and the initial running max


def mha_score(q_tile, k_tile, *_):
    """Standard attention logits q.k/sqrt(dq): [B,H,tq,dq], [B,H,tk,dq] -> [B,H,tq,tk]."""
    d = q_tile.shape[-1]
    scale = 1.0 / math.sqrt(d) if d is not None else tf.math.rsqrt(
        tf.cast(tf.shape(q_tile)[-1], q_tile.dtype))
    return tf.matmul(q_tile, k_tile, transpose_b=True) * tf.cast(scale, q_tile.dtype)


def attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
           tile_size=None, dense_threshold=DEFAULT_DENSE_THRESHOLD, position_grads=True):
    """Multi-head attention with a pluggable score function.

    q: [B,H,Nq,dq], k: [B,H,Nk,dk], v: [B,H,Nk,dv]; q_pos: [B,Nq,P] | None,
    k_pos: [B,Nk,P] | None (locations handed to ``score_fn``); key_mask: [B,Nk] float/bool,
    1 = real key (None = all real); pair_mask_fn: callable(q_index [tq] int32, k_index [tk]
    int32) -> bool [tq,tk], True = allowed (global indices, e.g. causal).
    score_fn(q_tile, k_tile, q_pos_tile | None, k_pos_tile | None) -> logits [B,H,tq,tk].
    Returns [B,H,Nq,dv]; a query row whose keys are all masked is exactly 0 (never NaN).
    tile_size=None: dense when the static Nq*Nk <= dense_threshold, else (also when Nq or
    Nk is not static) tiled, with a tile from the batch size (``DEFAULT_TILE_PAIRS``); an
    int forces tiling with that tile.
    position_grads=False: the positions are data (no gradient flows to them: ``None``), which
    spares the tiled backward pass the score's derivative w.r.t. them.
    """
    if tile_size is None:
        nq, nk = q.shape[2], k.shape[2]
        if nq is None or nk is None or nq * nk > dense_threshold:
            tile_size = choose_tile(q, k, dense_pairs=-1, tile_pairs=DEFAULT_TILE_PAIRS)
    return attend_with_tile(score_fn, q, k, v, q_pos, k_pos, key_mask, pair_mask_fn,
                            tile=tile_size, position_grads=position_grads)


def attend_with_tile(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                     tile=None, position_grads=True):
    """``dense_attend`` when ``tile`` is None, else ``tiled_attend`` with square tiles of
    ``tile`` (args as ``attend``): for plugins that pick the path with :func:`choose_tile`."""
    if tile is None:
        return dense_attend(score_fn, q, k, v, q_pos, k_pos, key_mask, pair_mask_fn,
                            position_grads=position_grads)
    return tiled_attend(score_fn, q, k, v, q_pos, k_pos, key_mask, pair_mask_fn,
                        tile_q=tile, tile_k=tile, position_grads=position_grads)


def choose_tile(q, k, tile_size=None, dense_pairs=DEFAULT_DENSE_THRESHOLD, tile_pairs=1 << 20,
                min_tile=16, max_tile=1024):
    """``None`` (run dense) or a tile size for ``q [B,H,Nq,d]``, ``k [B,H,Nk,d]``.

    Dense while the static ``B * Nq * Nk <= dense_pairs``; otherwise a power-of-two tile
    with about ``tile_pairs`` (query, key) pairs per ``[B, tile, tile]`` block, clipped to
    ``[min_tile, max_tile]`` (an unknown B counts as 8). An explicit ``tile_size`` wins.
    ``attend`` uses it with ``DEFAULT_TILE_PAIRS``; plugins whose score is costly per pair
    (e.g. an MLP) pass their own budgets, so that block memory stays bounded.
    """
    if tile_size is not None:
        return tile_size
    b, nq, nk = q.shape[0], q.shape[2], k.shape[2]
    if None not in (b, nq, nk) and b * nq * nk <= dense_pairs:
        return None
    tile = 2 ** round(math.log2(math.sqrt(tile_pairs / (b or 8))))
    return int(min(max_tile, max(min_tile, tile)))


def dense_attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                 position_grads=True):
    """Reference path: full [B,H,Nq,Nk] logits and a masked softmax (args as ``attend``)."""
    if not position_grads:
        q_pos, k_pos = (None if p is None else tf.stop_gradient(p) for p in (q_pos, k_pos))
    s = tf.cast(score_fn(q, k, q_pos, k_pos), tf.float32)
    masked = key_mask is not None or pair_mask_fn is not None
    if masked:
        valid = pair_validity(key_validity(key_mask, k), pair_mask_fn,
                       tf.range(tf.shape(q)[2]), tf.range(tf.shape(k)[2]))
        s = tf.where(valid, s, _NEG)  # exp(-1e30 - max) is exactly 0
    e = tf.exp(s - tf.stop_gradient(tf.reduce_max(s, -1, keepdims=True)))
    # normalise after the matmul, like the tiled path; the row max contributes 1, so the sum
    # is >= 1 unless there are no keys at all (Nk = 0: empty context -> 0)
    out = tf.math.divide_no_nan(tf.matmul(e, tf.cast(v, tf.float32)), tf.reduce_sum(e, -1, keepdims=True))
    if masked:  # a row with no valid key is uniform over -1e30 logits: zero it
        out *= tf.cast(tf.reduce_any(valid, -1, keepdims=True), out.dtype)
    return tf.cast(out, v.dtype)


def tiled_attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                 tile_q=DEFAULT_TILE, tile_k=DEFAULT_TILE, position_grads=True):
    """Memory-efficient path (args as ``attend``): [tile_q, tile_k] blocks, online softmax.

    Sizes need not be multiples of the tiles (padded with masked keys / dropped query
    rows); a tile longer than a static N is shrunk to N. Loops are tf.while_loops with
    static tile sizes, so Nq, Nk (and B) may be dynamic. The gradient is a
    ``tf.custom_gradient`` that keeps only the inputs, the output and the per-row
    logsumexp, and recomputes every block (flash-attention style), taking the VJP of
    ``score_fn`` per block for q, k, positions and the variables it reads.
    Works eagerly, in ``tf.function`` and under XLA (``jit_compile=True``).
    """
    nq, nk = dims(q)[2], dims(k)[2]
    tq, tk = tile_len(tile_q, nq), tile_len(tile_k, nk)
    nqt, nkt = num_tiles(nq, tq), num_tiles(nk, tk)
    kv_t = tile_axis(key_validity(key_mask, k), 1, tk, nkt)  # [nkt,B,tk], padding is False
    key_add_t = tf.where(kv_t, 0.0, _NEG)  # additive key mask per key tile
    has_qp, has_kp = q_pos is not None, k_pos is not None
    # differentiable score inputs per side; positions without gradients are constants
    q_side = [q] + ([q_pos] if has_qp and position_grads else [])
    k_side = [k] + ([k_pos] if has_kp and position_grads else [])
    qp_t = tile_axis(q_pos, 1, tq, nqt) if has_qp and not position_grads else None
    kp_t = tile_axis(k_pos, 1, tk, nkt) if has_kp and not position_grads else None

    @tf.custom_gradient
    def run(*xs):
        qs_t = [tile_axis(x, a, tq, nqt) for x, a in zip(xs[:len(q_side)], (2, 1))]
        ks_t = [tile_axis(x, a, tk, nkt) for x, a in zip(xs[len(q_side):-1], (2, 1))]
        v_t = tile_axis(tf.cast(xs[-1], tf.float32), 2, tk, nkt)
        rows = dims(q)[:2] + [tq]  # [B,H,tq]

        def tiles(i, j):  # score inputs of block (i, j): [q_i, (q_pos_i)], [k_j, (k_pos_j)]
            return ([x[i] for x in qs_t] + ([qp_t[i]] if qp_t is not None else []),
                    [x[j] for x in ks_t] + ([kp_t[j]] if kp_t is not None else []))

        def score(qi, kj):
            return score_fn(qi[0], kj[0], qi[1] if has_qp else None, kj[1] if has_kp else None)

        def masked(s_raw, i, j):  # f32 logits; masked entries pushed to about _NEG
            # additive (0 / _NEG per key and per structural pair), cheaper than a select
            # on every [B,H,tq,tk] block; exp(masked - max) is exactly 0 once a row has
            # seen an allowed key, and rows that never do are zeroed at the end
            add = key_add_t[j][:, None, None, :]
            if pair_mask_fn is not None:
                allowed = pair_mask_fn(i * tq + tf.range(tq), j * tk + tf.range(tk))
                add = add + tf.where(allowed, 0.0, _NEG)[None, None]
            return tf.cast(s_raw, tf.float32) + add

        def forward_row(i):  # online softmax of query tile i over all key tiles
            def step(j, m, l, acc):
                s = masked(score(*tiles(i, j)), i, j)
                m_new = tf.maximum(m, tf.reduce_max(s, -1))
                p = tf.exp(s - m_new[..., None])
                alpha = tf.exp(m - m_new)
                return (m_new, l * alpha + tf.reduce_sum(p, -1),
                        acc * alpha[..., None] + tf.matmul(p, v_t[j]))

            m, l, acc = loop(nkt, step, (tf.fill(rows, _NEG), tf.zeros(rows),
                                         tf.zeros(rows + [dims(v)[3]])))
            seen = m > 0.5 * _NEG  # the row has an allowed key (then l >= 1); else it is 0
            lse = tf.where(seen, m + tf.math.log(tf.where(seen, l, 1.0)), 0.0)
            return tf.where(seen[..., None], tf.math.divide_no_nan(acc, l[..., None]), 0.0), lse

        def forward():
            def step(i, out_ta, lse_ta):
                o, lse = forward_row(i)
                return out_ta.write(i, o), lse_ta.write(i, lse)

            row_shape = q.shape[:2] + [tq]
            tas = loop(nqt, step, (tensor_array(nqt, row_shape + v.shape[3:]), tensor_array(nqt, row_shape)))
            return [ta.stack() for ta in tas]

        with record.stop_recording():
            out_t, lse_t = forward()  # [nqt,B,H,tq,dv], [nqt,B,H,tq]

        def grad(dout, variables=None):
            variables = list(variables or [])
            do_t = tile_axis(tf.cast(dout, tf.float32), 2, tq, nqt)
            delta = tf.reduce_sum(do_t * out_t, -1)  # rowsum(dO * O): [nqt,B,H,tq]

            def key_tile(j, dq_acc, dk_tas, dv_ta, dvar):
                # dV^T = dO^T P, accumulated as [B,H,dv,tk] and transposed once per key
                # tile: XLA:CPU runs P^T dO (transposing the large [tq,tk] operand) at
                # about half the speed (benchmarks/block_matmul_rates.py)
                def query_tile(i, dk, dv_t, dvar, dq_tas):
                    qi, kj = tiles(i, j)
                    sources = qi[:len(qs_t)] + kj[:len(ks_t)]  # not the constant positions
                    with tf.GradientTape() as tape:
                        tape.watch(sources)
                        s_raw = score(qi, kj)
                    p = tf.exp(masked(s_raw, i, j) - lse_t[i][..., None])  # 0 where masked
                    ds = p * (tf.matmul(do_t[i], v_t[j], transpose_b=True) - delta[i][..., None])
                    g = tape.gradient(s_raw, sources + variables,
                                      output_gradients=tf.cast(ds, s_raw.dtype),
                                      unconnected_gradients=tf.UnconnectedGradients.ZERO)
                    g = [tf.cast(tf.convert_to_tensor(x), tf.float32) for x in g]
                    gq, gk, gvar = g[:len(qs_t)], g[len(qs_t):len(sources)], g[len(sources):]
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
                [tf.zeros(dims(x)) for x in qs_t],
                [tensor_array(nkt, x.shape[1:]) for x in ks_t], tensor_array(nkt, v_t.shape[1:]),
                [tf.zeros(w.shape) for w in variables]))
            d_in = ([untile_axis(d, a, nq) for d, a in zip(dq_acc, (2, 1))]
                    + [untile_axis(ta.stack(), a, nk) for ta, a in zip(dk_tas, (2, 1))]
                    + [untile_axis(dv_ta.stack(), 2, nk)])
            d_in = [tf.cast(d, x.dtype) for d, x in zip(d_in, xs)]
            if not variables:
                return d_in
            return d_in, [tf.cast(d, w.dtype) for d, w in zip(dvar, variables)]

        return tf.cast(untile_axis(out_t, 2, nq), v.dtype), grad

    return run(*q_side, *k_side, v)


# ------------------------------------------------------------------- tiling helpers
# Public so that plugins with their own tiled passes (e.g. the TE location update) reuse
# them instead of copying.
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


def tile_axis(x, axis, t, nt):
    """Pad ``axis`` to nt*t (zeros / False) and split it into tiles first: [nt, ..., t, ...]."""
    shape = dims(x)
    pad = [[0, 0]] * len(shape)
    pad[axis] = [0, nt * t - shape[axis]]
    x = tf.pad(x, pad)
    x = tf.reshape(x, shape[:axis] + [nt, t] + shape[axis + 1:])
    return tf.transpose(x, [axis] + list(range(axis)) + list(range(axis + 1, len(shape) + 1)))


def untile_axis(x, axis, n):
    """Inverse of ``tile_axis``: [nt, ..., t, ...] -> [..., n, ...] (drops the padding)."""
    rank = len(x.shape)
    x = tf.transpose(x, list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank)))
    shape = dims(x)
    x = tf.reshape(x, shape[:axis] + [shape[axis] * shape[axis + 1]] + shape[axis + 2:])
    return x[(slice(None),) * axis + (slice(0, n),)]


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
