"""Optional forward-pass speed-ups of the tiled path.

Nothing here changes a result: switch it off with ``options(speedups=False)`` or
``TAYLORFORMER_ATTENTION_SPEEDUPS=0`` (the tests check both give the same values), or
delete this module together with its one call in :func:`taylorformer.attention.tiled.tiled_attend`
(and the lane and chunk rules of :mod:`~taylorformer.attention.policy`, which only it uses).
Without it, a tiled forward pass runs :func:`~taylorformer.attention.blocks.sweep` over
tiles copied from the inputs, compiled with XLA per call where ``options(xla=...)`` says so.

Three speed-ups, each for a forward pass whose loop this package compiles with XLA:

- **the shared compiled loop** (any device, also training with ``options(xla=True)``): a
  weight-free score (:meth:`~taylorformer.attention.blocks.Plan.shareable`) gets ONE XLA
  function per plan, reading slices of the inputs (:class:`SlicedBlocks`: no tiled copies),
  so every layer of a model with the same shapes shares one compilation;
- **query chunks** (inference): the queries are cut into chunks run as independent calls
  (:func:`~taylorformer.attention.policy.query_chunks`: one per CPU core), which
  TensorFlow's inter-op threads run at once;
- **lanes** (inference on a CPU, weight-free score, no ``options`` tile): the loop runs one
  (batch row, head) lane at a time in long tiles
  (:func:`~taylorformer.attention.policy.lane_tiles`).

Why they pay, and by how much: benchmarks/README.md, "Attention policy: where the settings
come from" (the lane and chunk tables of :mod:`~taylorformer.attention.policy` were tuned there).
"""
import dataclasses
import functools

import tensorflow as tf

from taylorformer.attention.blocks import Blocks, differentiable_count, sweep
from taylorformer.attention.overrides import (AUTO, compile_tiles, compiled_inference, override,
                                            speedups_enabled)
from taylorformer.attention.policy import device_kind, lane_tiles, query_chunks
from taylorformer.attention.reference import NEG, as_bool, key_validity
from taylorformer.attention.tiling import at_least, dims, loop, rows, tensor_array, untile_rows


def fast_forward(plan, q, k):
    """The speed-ups' forward pass for a tiled attention of ``plan`` on ``q [B,H,Nq,d]``,
    ``k [B,H,Nk,d]``, or ``None`` where none applies (or they are switched off).

    Decided when the attention is traced (whether a gradient is recorded is known only
    then); the result is a function ``(q, k, v, q_pos_flat, k_pos_flat, key_mask,
    query_mask) -> [out [B,H,Nq,dv] float32, lse [B,H,Nq]] (+ [update, count])``."""
    if not speedups_enabled():
        return None
    shared, inference, device = plan.shareable(), compiled_inference(), device_kind(q)
    forward_plan = plan
    if inference and shared and override("tile") == AUTO:
        parts = query_chunks(q.shape[2], 1, device)  # the chunks, were every row a tile
        lane = lane_tiles(dims(q)[2], dims(k)[2], parts, device)
        if lane is not None:
            forward_plan = dataclasses.replace(plan, tq=lane[0], tk=lane[1], lanes=True)
    n_chunks = query_chunks(q.shape[2], forward_plan.tq, device, shared) if inference else 1

    if compile_tiles() and shared:
        forward = shared_forward(forward_plan)

        def run_shared(q, k, v, qp, kp, key_mask, query_mask):
            return in_query_chunks(lambda qc, qpc, qmc, _: forward(qc, k, v, qpc, kp, key_mask, qmc),
                                   n_chunks, forward_plan.tq, q, qp, query_mask)
        return run_shared
    if n_chunks > 1:  # a score with weights: each chunk cuts its own tiles

        def run_chunks(q, k, v, qp, kp, key_mask, query_mask):
            def chunk_forward(qc, qpc, qmc, first_row):
                t = Blocks(plan, qc, k, v, qpc, kp, key_mask, qmc, q_offset=first_row)
                return t.untile(tf.function(functools.partial(sweep, t, qc, v), jit_compile=True)(),
                                dims(qc)[2])
            return in_query_chunks(chunk_forward, n_chunks, plan.tq, q, qp, query_mask)
        return run_chunks
    return None


class SlicedBlocks(Blocks):
    """:class:`~taylorformer.attention.blocks.Blocks` without a copy of the inputs: tile i
    is the slice of rows ``[start(i), start(i) + tile)`` with ``start(i) = min(i * tile, N
    - tile)``, so the last tile overlaps the one before it (its keys already seen are
    masked; its queries are computed twice and kept once, see
    :func:`~taylorformer.attention.tiling.untile_rows`). Inputs shorter than a tile are
    padded to one tile. Forward pass only."""

    def __init__(self, plan, q, k, v, q_pos_flat, k_pos_flat, key_mask, query_mask):
        self._setup(plan, q, k, v, 0)
        tq, tk = self.tq, self.tk
        qv = as_bool(query_mask)
        n_qs, n_ks = differentiable_count(plan, q_pos_flat), differentiable_count(plan, k_pos_flat)
        # every input at least one tile long on its row axis (2 for q, k and v; 1 for
        # positions and masks); differentiable [q, *positions] first, as in Blocks
        qs = [at_least(x, 2 if a == 0 else 1, tq) for a, x in enumerate([q] + q_pos_flat)]
        ks = [at_least(x, 2 if a == 0 else 1, tk) for a, x in enumerate([k] + k_pos_flat)]
        self.kv_src, self.v_src = at_least(key_validity(key_mask, k), 1, tk), at_least(tf.cast(v, tf.float32), 2, tk)
        self.qv_src = None if qv is None else at_least(qv, 1, tq)
        self.q_len, self.k_len = dims(qs[0])[2], dims(ks[0])[2]
        self.qs_src, self.qp_const_src = qs[:n_qs], qs[n_qs:]
        self.ks_src, self.kp_const_src = ks[:n_ks], ks[n_ks:]

    def q_start(self, i):
        return tf.minimum(i * self.tq, self.q_len - self.tq)

    def k_start(self, j):
        return tf.minimum(j * self.tk, self.k_len - self.tk)

    def tiles(self, i, j):
        sq, sk = self.q_start(i), self.k_start(j)
        q, *qp = self.qs_src
        k, *kp = self.ks_src
        return ([rows(q, 2, sq, self.tq)] + [rows(x, 1, sq, self.tq) for x in qp],
                [rows(k, 2, sk, self.tk)] + [rows(x, 1, sk, self.tk) for x in kp])

    def const_positions(self, i, j):
        return ([rows(x, 1, self.q_start(i), self.tq) for x in self.qp_const_src],
                [rows(x, 1, self.k_start(j), self.tk) for x in self.kp_const_src])

    def values(self, j):
        return rows(self.v_src, 2, self.k_start(j), self.tk)

    def key_valid(self, j):
        """[B,tk] bool: real keys of tile j not already seen in an earlier tile."""
        fresh = self.k_index(j) >= j * self.tk  # the overlap of the last tile was seen
        return tf.logical_and(rows(self.kv_src, 1, self.k_start(j), self.tk), fresh[None])

    def key_add(self, j):
        return tf.where(self.key_valid(j), 0.0, NEG)

    def query_valid(self, i):
        return None if self.qv_src is None else rows(self.qv_src, 1, self.q_start(i), self.tq)

    def untile(self, stacked, nq):
        return [untile_rows(x, 2 if a < 2 else 1, nq, self.q_len) for a, x in enumerate(stacked)]


def forward_over_slices(plan, q, k, v, q_pos_flat, k_pos_flat, key_mask, query_mask):
    """The forward pass over slices of the inputs: out [B,H,Nq,dv] float32, lse [B,H,Nq].
    The function that :func:`shared_forward` compiles. With ``plan.lanes``, a loop over
    the B x H (batch row, head) lanes runs the tiles of one lane at a time (blocks
    [1,1,tq,tk]); else every block holds all rows and heads."""
    if not plan.lanes:
        t = SlicedBlocks(plan, q, k, v, q_pos_flat, k_pos_flat, key_mask, query_mask)
        return t.untile(sweep(t, q, v), dims(q)[2])
    b, h, nq = dims(q)[:3]

    def lane(i, out_ta, lse_ta):
        row, head = i // h, i % h
        lane_of = lambda x: tf.slice(x, [row, head, 0, 0], [1, 1] + dims(x)[2:])  # noqa: E731
        row_of = lambda x: None if x is None else rows(x, 0, row, 1)  # noqa: E731
        q_lane, v_lane = lane_of(q), lane_of(v)
        t = SlicedBlocks(plan, q_lane, lane_of(k), v_lane, [row_of(x) for x in q_pos_flat],
                         [row_of(x) for x in k_pos_flat], row_of(key_mask), row_of(query_mask))
        out, lse = t.untile(sweep(t, q_lane, v_lane), nq)
        return out_ta.write(i, out[0, 0]), lse_ta.write(i, lse[0, 0])

    out_ta, lse_ta = loop(b * h, lane, (tensor_array(b * h, q.shape[2:3] + v.shape[3:]),
                                        tensor_array(b * h, q.shape[2:3])))
    return [tf.reshape(out_ta.stack(), [b, h, nq, dims(v)[3]]), tf.reshape(lse_ta.stack(), [b, h, nq])]


#: XLA-compiled forward passes of shareable plans, one per plan: XLA compiles each once
#: per input signature, not once per attention layer
SHARED_FORWARDS = {}


def shared_forward(plan):
    """The one XLA-compiled :func:`forward_over_slices` of a shareable ``plan``."""
    if plan not in SHARED_FORWARDS:
        SHARED_FORWARDS[plan] = tf.function(functools.partial(forward_over_slices, plan),
                                            jit_compile=True)
    return SHARED_FORWARDS[plan]


def in_query_chunks(forward, n, tile_q, q, qp, query_mask):
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
        chunk = lambda x, axis: rows(x, axis, start, length)  # noqa: E731
        res = forward(chunk(q, 2), [chunk(x, 1) for x in qp],
                      None if query_mask is None else chunk(query_mask, 1), start)
        keep = i * length - start  # rows of the overlap, already computed by chunk i - 1
        parts.append([r[:, :, keep:] if a < 2 else r[:, keep:] for a, r in enumerate(res)])
    return [tf.concat(xs, 2 if a < 2 else 1) for a, xs in enumerate(zip(*parts))]
