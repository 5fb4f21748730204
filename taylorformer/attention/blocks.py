"""One tiled attention problem: its plan, its inputs cut into tiles, and the block steps.

:class:`Plan` holds what a tiled attention computes apart from its input tensors (the
functions, the tile sizes, which masks are given). :class:`Blocks` cuts the inputs into
tiles and runs the steps on block (query tile i, key tile j) that both the forward pass
(:func:`sweep`: an online softmax over the key tiles of each query tile) and the backward
pass's recomputation (:mod:`taylorformer.attention.tiled`) use.
"""
import dataclasses
import inspect

import tensorflow as tf

from taylorformer.attention.reference import NEG, as_bool, key_validity, pair_validity
from taylorformer.attention.tiling import (dims, loop, num_tiles, tensor_array, tile_axis,
                                           untile_axis)


@dataclasses.dataclass(frozen=True)
class Plan:
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


def differentiable_count(plan, positions_flat):
    """How many of ``[x, *positions_flat]`` are differentiable inputs: positions count
    only with ``plan.position_grads`` (else they are constants)."""
    return 1 + (len(positions_flat) if plan.position_grads else 0)


class Blocks:
    """The inputs cut into tiles once, padded to whole tiles (``qs_t``, ``ks_t``, ``v_t``:
    ``[n_tiles, ...]``), and the steps on one block. The backward pass's accumulators
    follow these tiles. ``q_offset``: the index of ``q``'s first row among all queries
    (a query chunk), for ``pair_mask_fn``.

    ``qs_t`` / ``ks_t`` are the differentiable tiles ``[q, *q positions]`` / ``[k, *k
    positions]`` (without position gradients, only ``[q]`` / ``[k]``; the positions are
    then constants, ``qp_const_t`` / ``kp_const_t``)."""

    def __init__(self, plan, q, k, v, q_pos_flat, k_pos_flat, key_mask, query_mask, q_offset=0):
        self._setup(plan, q, k, v, q_offset)
        kv = key_validity(key_mask, k)  # [B,Nk], padding is False
        qv = as_bool(query_mask)
        n_qs, n_ks = differentiable_count(plan, q_pos_flat), differentiable_count(plan, k_pos_flat)
        tq, tk = self.tq, self.tk
        self.kv_t = tile_axis(kv, 1, tk, self.nkt)  # [nkt,B,tk]
        self.key_add_t = tf.where(self.kv_t, 0.0, NEG)  # additive key mask per key tile
        self.qv_t = None if qv is None else tile_axis(qv, 1, tq, self.nqt)
        qs_t = [tile_axis(x, 2 if a == 0 else 1, tq, self.nqt) for a, x in enumerate([q] + q_pos_flat)]
        ks_t = [tile_axis(x, 2 if a == 0 else 1, tk, self.nkt) for a, x in enumerate([k] + k_pos_flat)]
        self.qs_t, self.qp_const_t = qs_t[:n_qs], qs_t[n_qs:]
        self.ks_t, self.kp_const_t = ks_t[:n_ks], ks_t[n_ks:]
        self.v_t = tile_axis(tf.cast(v, tf.float32), 2, tk, self.nkt)

    def _setup(self, plan, q, k, v, q_offset):
        self.plan, self.q_offset = plan, q_offset
        self.tq, self.tk = plan.tq, plan.tk
        self.nqt, self.nkt = num_tiles(dims(q)[2], self.tq), num_tiles(dims(k)[2], self.tk)
        self.rows = dims(q)[:2] + [self.tq]  # [B,H,tq]
        self.v_dim = dims(v)[3]

    # ------------------------------------------------------------------ tile access
    def q_start(self, i):
        return i * self.tq

    def k_start(self, j):
        return j * self.tk

    def q_index(self, i):
        """Global indices of query tile i's rows (``q`` is rows ``q_offset..`` of all): [tq]."""
        return self.q_offset + self.q_start(i) + tf.range(self.tq)

    def k_index(self, j):
        return self.k_start(j) + tf.range(self.tk)

    def tiles(self, i, j):
        """Differentiable inputs of block (i, j): [q_i, *pos_i], [k_j, *pos_j]."""
        return [x[i] for x in self.qs_t], [x[j] for x in self.ks_t]

    def const_positions(self, i, j):
        """The positions of block (i, j) that get no gradient: [*pos_i], [*pos_j]."""
        return [x[i] for x in self.qp_const_t], [x[j] for x in self.kp_const_t]

    def values(self, j):
        """v of key tile j: [B,H,tk,dv] float32."""
        return self.v_t[j]

    def key_valid(self, j):
        """[B,tk] bool: the real keys of tile j."""
        return self.kv_t[j]

    def key_add(self, j):
        """[B,tk] float32: 0 for a real key of tile j, about NEG otherwise."""
        return self.key_add_t[j]

    def query_valid(self, i):
        return None if self.qv_t is None else self.qv_t[i]

    def untile(self, stacked, nq):
        """:func:`sweep`'s results as rows: out [B,H,Nq,dv] float32, lse [B,H,Nq] (+ update
        [B,Nq,U], count [B,Nq])."""
        return [untile_axis(x, 2 if a < 2 else 1, nq) for a, x in enumerate(stacked)]

    # ------------------------------------------------------------------ block steps
    def positions(self, qi, kj, i, j):
        """The block's positions as handed to score/update (nests packed back)."""
        qc, kc = self.const_positions(i, j)
        pack = lambda structure, flat: None if structure is None else tf.nest.pack_sequence_as(structure, flat)  # noqa: E731
        return pack(self.plan.q_pos, qi[1:] + qc), pack(self.plan.k_pos, kj[1:] + kc)

    def score(self, qi, kj, i, j):
        qp, kp = self.positions(qi, kj, i, j)
        return self.plan.score_fn(qi[0], kj[0], qp, kp, self.query_valid(i),
                                  self.key_valid(j) if self.plan.has_key_mask else None)

    def allowed(self, i, j):
        """[B,1,1|tq,tk] bool."""
        return pair_validity(self.key_valid(j), self.plan.pair_mask_fn, self.q_index(i), self.k_index(j))

    def masked(self, s_raw, i, j):
        """f32 logits; masked entries pushed to about NEG."""
        # additive (0 / NEG per key and per structural pair), cheaper than a select on
        # every [B,H,tq,tk] block; exp(masked - max) is exactly 0 once a row has seen an
        # allowed key, and rows that never do are zeroed at the end
        add = self.key_add(j)[:, None, None, :]
        if self.plan.pair_mask_fn is not None:
            ok = self.plan.pair_mask_fn(self.q_index(i), self.k_index(j))
            add = add + tf.where(ok, 0.0, NEG)[None, None]
        return tf.cast(s_raw, tf.float32) + add

    def block_update(self, p, qi, kj, i, j):
        """update_fn on block (i, j), zero outside the allowed pairs: [B,tq,tk,U]; and the
        allowed pairs as float [B,tq,tk]."""
        vm = tf.cast(tf.broadcast_to(self.allowed(i, j)[:, 0], tf.stack(self.rows[:1] + [self.tq, self.tk])),
                     tf.float32)
        qp, kp = self.positions(qi, kj, i, j)
        return tf.cast(self.plan.update_fn(p, qp, kp), tf.float32) * vm[..., None], vm

    def forward_step(self, i, j, m, l, acc):
        """One online-softmax step of query tile i over key tile j: running max ``m``, sum
        ``l`` [B,H,tq] and unnormalised output ``acc`` [B,H,tq,dv]."""
        s = self.masked(self.score(*self.tiles(i, j), i, j), i, j)
        m_new = tf.maximum(m, tf.reduce_max(s, -1))
        p = tf.exp(s - m_new[..., None])
        alpha = tf.exp(m - m_new)
        return (m_new, l * alpha + tf.reduce_sum(p, -1),
                acc * alpha[..., None] + tf.matmul(p, self.values(j)))

    def forward_row(self, i):
        """Online softmax of query tile i over all key tiles: out [B,H,tq,dv], lse [B,H,tq]."""
        m, l, acc = loop(self.nkt, lambda j, *state: self.forward_step(i, j, *state),
                         (tf.fill(self.rows, NEG), tf.zeros(self.rows), tf.zeros(self.rows + [self.v_dim])))
        seen = m > 0.5 * NEG  # the row has an allowed key (then l >= 1); else it is 0
        lse = tf.where(seen, m + tf.math.log(tf.where(seen, l, 1.0)), 0.0)
        return tf.where(seen[..., None], tf.math.divide_no_nan(acc, l[..., None]), 0.0), lse

    def update_step(self, i, lse, j, acc, cnt):
        """Adds block (i, j)'s allowed update_fn values and their count to ``acc``, ``cnt``."""
        qi, kj = self.tiles(i, j)
        p = tf.exp(self.masked(self.score(qi, kj, i, j), i, j) - lse[..., None])  # 0 where masked
        g, vm = self.block_update(p, qi, kj, i, j)
        return acc + tf.reduce_sum(g, 2), cnt + tf.reduce_sum(vm, -1)

    def update_row(self, i, lse):
        """Mean over allowed keys of update_fn, and their count: [B,tq,U], [B,tq]."""
        batch = self.rows[:1] + [self.tq]
        acc, cnt = loop(self.nkt, lambda j, *state: self.update_step(i, lse, j, *state),
                        (tf.zeros(batch + [self.plan.update_dim]), tf.zeros(batch)))
        return acc / tf.maximum(cnt, 1.0)[..., None], cnt


def sweep(t, q, v):
    """The forward pass over the query tiles of :class:`Blocks` ``t``, stacked:
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
