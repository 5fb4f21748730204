"""The executor's entry points: :func:`attend` picks the dense or the tiled path and runs
a score function; :func:`attend_blocks` runs one step of incremental decoding."""
import tensorflow as tf

from taylorformer.attention.overrides import AUTO, check_tile
from taylorformer.attention.policy import choose_tile
from taylorformer.attention.reference import as_bool, dense_attend, softmax_values
from taylorformer.attention.tiled import tiled_attend


def attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
           query_mask=None, tile=AUTO, pair_floats=None, position_grads=True, update_fn=None):
    """Multi-head attention with a pluggable score function, as
    :mod:`~taylorformer.attention.reference` specifies it.

    q: [B,H,Nq,dq], k: [B,H,Nk,dk], v: [B,H,Nk,dv]; q_pos / k_pos: ``[B, N, ...]`` tensors
    or nests of them (handed to ``score_fn`` tile by tile). ``tile``: ``"auto"``
    (:func:`~taylorformer.attention.policy.choose_tile` with ``pair_floats``), ``None``
    (dense), an int (square tiles of that size) or a pair ``(tile_q, tile_k)``.
    ``position_grads=False``: positions are data (their gradient is ``None``), which spares
    the tiled backward pass the score's derivative w.r.t. them. Returns ``[B,H,Nq,dv]``, or
    ``(out, update [B,Nq,U])`` with ``update_fn``.
    """
    tile = choose_tile(q, k, pair_floats) if isinstance(tile, str) and tile == AUTO \
        else check_tile("attend", tile)
    args = (score_fn, q, k, v, q_pos, k_pos, key_mask, pair_mask_fn, query_mask)
    if tile is None:
        return dense_attend(*args, position_grads=position_grads, update_fn=update_fn)
    return tiled_attend(*args, tile_q=tile[0], tile_k=tile[1], position_grads=position_grads,
                        update_fn=update_fn)


def attend_blocks(score_fn, q, blocks, query_mask=None):
    """Incremental decoding's entry point: new query rows against keys/values kept in blocks.

    q: [B,H,Nq,dq] (the few rows of one decoding step); ``blocks``: a list of ``(k
    [B,H,Lb,dk], v [B,H,Lb,dv], valid [B,Lb] bool)``, e.g. the buffers of a key/value
    cache (:class:`taylorformer.models.decoding.KeyValueCache`), which then need no
    concatenation. The reference's softmax over the valid keys of all blocks, as if they
    were one key axis with ``key_mask`` = their ``valid``; no positions, no structural
    mask (the blocks' ``valid`` holds it). A row with no valid key returns 0.
    Dense: [B,H,Nq,sum Lb] logits. Returns [B,H,Nq,dv] in the values' dtype.
    """
    qv = as_bool(query_mask)
    s = tf.concat([tf.cast(score_fn(q, k, None, None, qv, valid), tf.float32) for k, _, valid in blocks], -1)
    valid = tf.concat([valid for _, _, valid in blocks], -1)[:, None, None, :]
    values = [v for _, v, _ in blocks]
    return tf.cast(softmax_values(s, valid, values)[0], values[0].dtype)
