"""The tiled path: online softmax over ``[tile_q, tile_k]`` blocks, with a backward pass
that recomputes every block (flash-attention style), so memory is O(tile^2) per head.

Same values and gradients (w.r.t. q, k, v, positions and the variables the score and
update read) as :func:`~taylorformer.attention.reference.dense_attend`. The gradient is a
``tf.custom_gradient`` that keeps only the inputs, the outputs and the per-row logsumexp.
"""
import functools

import tensorflow as tf

from taylorformer.attention import speedups
from taylorformer.attention.blocks import Blocks, Plan, sweep
from taylorformer.attention.overrides import compile_tiles
from taylorformer.attention.reference import NEG
from taylorformer.attention.tiling import dims, loop, tensor_array, tile_axis, tile_len, untile_axis
from taylorformer.tf_compat import stop_recording


def tiled_attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                 query_mask=None, tile_q=512, tile_k=512, position_grads=True, update_fn=None):
    """Memory-efficient path (args as :func:`~taylorformer.attention.executor.attend`).

    Sizes need not be multiples of the tiles (padded with masked keys / dropped query
    rows); a tile longer than a static N is shrunk to N. Loops are tf.while_loops with
    static tile sizes, so Nq, Nk (and B) may be dynamic. Works eagerly, in ``tf.function``
    and under XLA (``jit_compile=True``). With ``update_fn`` the forward pass runs a second
    sweep per query tile (the weights need the row's logsumexp) and the backward pass one
    more (the rows' softmax correction ``sum_m a * da``) before the usual one.
    """
    qp_flat = [] if q_pos is None else tf.nest.flatten(q_pos)
    kp_flat = [] if k_pos is None else tf.nest.flatten(k_pos)
    plan = Plan(score_fn, pair_mask_fn, update_fn, tile_len(tile_q, dims(q)[2]),
                tile_len(tile_k, dims(k)[2]), position_grads, key_mask is not None,
                query_mask is not None, q_pos, k_pos,
                None if update_fn is None else _update_width(update_fn, q, k, q_pos, k_pos))
    fast = speedups.fast_forward(plan, q, k)  # None: no speed-up applies (or switched off)
    compile_forward = compile_tiles()
    # the differentiable inputs, flat: [q, *q positions], [k, *k positions], v
    n_qp, n_kp = (len(qp_flat), len(kp_flat)) if position_grads else (0, 0)

    def split(xs):  # run's inputs -> (q, k, v, q positions, k positions)
        qp = list(xs[1:1 + n_qp]) if position_grads else qp_flat
        kp = list(xs[2 + n_qp:2 + n_qp + n_kp]) if position_grads else kp_flat
        return xs[0], xs[1 + n_qp], xs[-1], qp, kp

    @tf.custom_gradient
    def run(*xs):
        q, k, v, qp, kp = split(xs)
        with stop_recording():
            tiles = stacked = None
            if fast is not None:
                results = fast(q, k, v, qp, kp, key_mask, query_mask)
            else:  # inputs cut into tiles here (kept for the backward pass)
                tiles = Blocks(plan, q, k, v, qp, kp, key_mask, query_mask)
                forward = functools.partial(sweep, tiles, q, v)
                stacked = tf.function(forward, jit_compile=True)() if compile_forward else forward()
                results = tiles.untile(stacked, dims(q)[2])
        # results: out [B,H,Nq,dv] f32, lse [B,H,Nq] (+ update [B,Nq,U], count [B,Nq])

        def grad(dout, dupdate=None, variables=None):
            t = tiles or Blocks(plan, q, k, v, qp, kp, key_mask, query_mask)
            d_in, dvar = _Backward(t, q, k, results, stacked, list(variables or [])).run(dout, dupdate)
            d_in = [tf.cast(d, x.dtype) for d, x in zip(d_in, xs)]
            if not variables:
                return d_in
            return d_in, [tf.cast(d, w.dtype) for d, w in zip(dvar, variables)]

        out = tf.cast(results[0], v.dtype)
        return (out if update_fn is None else (out, results[2])), grad

    q_side = [q] + (qp_flat if position_grads else [])
    k_side = [k] + (kp_flat if position_grads else [])
    return run(*q_side, *k_side, v)


class _Backward:
    """The recomputing backward pass over the tiles of :class:`Blocks` ``t``.

    ``q``, ``k``: the forward pass's inputs (for their sizes); ``results``: its rows (out,
    lse, and with an update: update, count); ``stacked``: the same per query tile when the
    forward pass ran on ``t``'s tiles, else ``None``; ``variables``: the ones the score and
    the update read. Loops: an optional correction sweep (with an update), then over key
    tiles j, and in each over query tiles i, the block's VJP (:meth:`query_tile`)."""

    def __init__(self, t, q, k, results, stacked, variables):
        self.t, self.plan, self.variables = t, t.plan, variables
        self.nq, self.nk = dims(q)[2], dims(k)[2]
        self.out_shape = dims(q)[:3] + [t.v_dim]
        tq, nqt = t.tq, t.nqt
        has_update = self.plan.update_fn is not None
        if stacked is not None:  # the forward pass ran on these tiles: its results as they are
            self.out_t, self.lse_t = stacked[:2]
            self.cnt_t = stacked[3] if has_update else None
        else:  # the forward pass returned rows; padded query rows get lse = -NEG, so that
            # p = exp(s - lse) is 0 there
            self.out_t = tile_axis(results[0], 2, tq, nqt)
            self.lse_t = tile_axis(results[1], 2, tq, nqt, pad_value=-NEG)
            self.cnt_t = tile_axis(results[3], 1, tq, nqt) if has_update else None
        self.update_rows = results[2] if has_update else None
        self.n_q, self.n_src = len(t.qs_t), len(t.qs_t) + len(t.ks_t)

    def run(self, dout, dupdate):
        """Gradients w.r.t. ``[q, *q positions, k, *k positions, v]`` (float32, as rows) and
        w.r.t. the variables."""
        t = self.t
        if dout is None:  # only the update is used downstream
            dout = tf.zeros(self.out_shape)
        self.do_t = tile_axis(tf.cast(dout, tf.float32), 2, t.tq, t.nqt)
        self.delta = tf.reduce_sum(self.do_t * self.out_t, -1)  # rowsum(dO * O): [nqt,B,H,tq]
        dvar = [tf.zeros(w.shape) for w in self.variables]
        dq_init = [tf.zeros(dims(x)) for x in t.qs_t]
        dk_direct = [None] * len(t.ks_t)  # update_fn's own gradients w.r.t. key positions
        if self.plan.update_fn is not None:
            if dupdate is None:
                dupdate = tf.zeros_like(self.update_rows)
            # d update / d (per-pair value) is dupdate / count, the same for every key
            self.w_t = (tile_axis(tf.cast(dupdate, tf.float32), 1, t.tq, t.nqt)
                        / tf.maximum(self.cnt_t, 1.0)[..., None])
            self.r_t, dq_pos, dk_pos, dvar = self.correction_sweep(dvar)
            dq_init = dq_init[:1] + dq_pos
            dk_direct = [None] + dk_pos
        dq_acc, dk_tas, dv_ta, dvar = loop(t.nkt, self.key_tile, (
            dq_init, [tensor_array(t.nkt, x.shape[1:]) for x in t.ks_t],
            tensor_array(t.nkt, t.v_t.shape[1:]), dvar))
        dk = [ta.stack() if extra is None else ta.stack() + extra for ta, extra in zip(dk_tas, dk_direct)]
        d_in = ([untile_axis(d, 2 if a == 0 else 1, self.nq) for a, d in enumerate(dq_acc)]
                + [untile_axis(d, 2 if a == 0 else 1, self.nk) for a, d in enumerate(dk)]
                + [untile_axis(dv_ta.stack(), 2, self.nk)])
        return d_in, dvar

    # ------------------------------------------------------------------ the update's terms
    def update_vjp(self, p, qi, kj, i, j, wrt):
        """Gradients of ``sum(w_i * block_update)`` w.r.t. ``p`` and ``wrt``."""
        with tf.GradientTape() as tape:
            tape.watch([p] + wrt)
            g, _ = self.t.block_update(p, qi, kj, i, j)
        return tape.gradient(g, [p] + wrt, output_gradients=tf.broadcast_to(
            self.w_t[i][:, :, None, :], tf.shape(g)), unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def correction_sweep(self, dvar):
        """Per query tile: the softmax correction ``r = sum_m a * da`` [nqt,B,H,tq], and
        update_fn's direct gradients w.r.t. the positions (query tiles, key tiles) and its
        variables (added to ``dvar``)."""
        t = self.t
        r_ta, dq_tas, dk_pos, dvar = loop(t.nqt, self.correction_row, (
            tensor_array(t.nqt, t.qs_t[0].shape[1:4]),
            [tensor_array(t.nqt, x.shape[1:]) for x in t.qs_t[1:]],
            [tf.zeros(dims(x)) for x in t.ks_t[1:]], dvar))
        return r_ta.stack(), [ta.stack() for ta in dq_tas], dk_pos, dvar

    def correction_row(self, i, r_ta, dq_tas, dk_pos, dvar):
        t = self.t
        r, dq_pos, dk_pos, dvar = loop(t.nkt, functools.partial(self.correction_step, i), (
            tf.zeros(t.rows), [tf.zeros(dims(x)[1:]) for x in t.qs_t[1:]], dk_pos, dvar))
        return r_ta.write(i, r), [ta.write(i, x) for ta, x in zip(dq_tas, dq_pos)], dk_pos, dvar

    def correction_step(self, i, j, r, dq_pos, dk_pos, dvar):
        t, n_q, n_src = self.t, self.n_q, self.n_src
        qi, kj = t.tiles(i, j)
        p = tf.exp(t.masked(t.score(qi, kj, i, j), i, j) - self.lse_t[i][..., None])
        g = self.update_vjp(p, qi, kj, i, j, qi[1:] + kj[1:] + self.variables)
        gq, gk, gvar = g[1:n_q], g[n_q:n_src - 1], g[n_src - 1:]
        return (r + tf.reduce_sum(p * g[0], -1), [a + b for a, b in zip(dq_pos, gq)],
                [tf.tensor_scatter_nd_add(a, [[j]], b[None]) for a, b in zip(dk_pos, gk)],
                [a + b for a, b in zip(dvar, gvar)])

    # ------------------------------------------------------------------ the main sweep
    def key_tile(self, j, dq_acc, dk_tas, dv_ta, dvar):
        """Key tile j over every query tile: its dk, dv; adds to dq and the variables'."""
        # dV^T = dO^T P, accumulated as [B,H,dv,tk] and transposed once per key tile:
        # XLA:CPU runs P^T dO (transposing the large [tq,tk] operand) at about half the
        # speed (benchmarks/block_matmul_rates.py)
        t = self.t
        dv_t_shape = dims(t.v_t)[1:3] + [dims(t.v_t)[4], dims(t.v_t)[3]]  # [B,H,dv,tk]
        dk, dv_t, dvar, dq_tas = loop(t.nqt, functools.partial(self.query_tile, j), (
            [tf.zeros(dims(x)[1:]) for x in t.ks_t], tf.zeros(dv_t_shape), dvar,
            [tensor_array(t.nqt, x.shape[1:]) for x in t.qs_t]))
        return ([a + ta.stack() for a, ta in zip(dq_acc, dq_tas)],
                [ta.write(j, x) for ta, x in zip(dk_tas, dk)],
                dv_ta.write(j, tf.linalg.matrix_transpose(dv_t)), dvar)

    def query_tile(self, j, i, dk, dv_t, dvar, dq_tas):
        """Block (i, j): recompute the weights, then the VJP of the score."""
        t, n_q, n_src = self.t, self.n_q, self.n_src
        qi, kj = t.tiles(i, j)
        sources = qi + kj  # not the constant positions
        with tf.GradientTape() as tape:
            tape.watch(sources)
            s_raw = t.score(qi, kj, i, j)
        p = tf.exp(t.masked(s_raw, i, j) - self.lse_t[i][..., None])  # 0 where masked
        ds = p * (tf.matmul(self.do_t[i], t.v_t[j], transpose_b=True) - self.delta[i][..., None])
        if self.plan.update_fn is not None:
            ds += p * (self.update_vjp(p, qi, kj, i, j, [])[0] - self.r_t[i][..., None])
        g = tape.gradient(s_raw, sources + self.variables, output_gradients=tf.cast(ds, s_raw.dtype),
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
        g = [tf.cast(tf.convert_to_tensor(x), tf.float32) for x in g]
        gq, gk, gvar = g[:n_q], g[n_q:n_src], g[n_src:]
        return ([a + b for a, b in zip(dk, gk)],
                dv_t + tf.matmul(self.do_t[i], p, transpose_a=True),
                [a + b for a, b in zip(dvar, gvar)],
                [ta.write(i, x) for ta, x in zip(dq_tas, gq)])


def _update_width(update_fn, q, k, q_pos, k_pos):
    """Static last dim of ``update_fn``'s output, from one (query, key) pair."""
    first = lambda p: None if p is None else tf.nest.map_structure(lambda x: x[:, :1], p)  # noqa: E731
    weights = tf.zeros(dims(q)[:2] + [1, 1])
    width = update_fn(weights, first(q_pos), first(k_pos)).shape[-1]
    if width is None:
        raise ValueError("attend: update_fn must return a static last dimension")
    return int(width)
