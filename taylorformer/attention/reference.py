"""What attention computes: the dense reference, the specification of every other path.

Every path of this package (tiled, compiled, in query chunks, lane by lane, from a
decoding cache) computes what :func:`dense_attend` computes, and the tests check each
against it (tests/core/test_attention_paths.py). The semantics::

    score_fn(q [B,H,Nq,dq], k [B,H,Nk,dk], q_pos, k_pos, q_valid, k_valid) -> s [B,H,Nq,Nk]
    allowed[b, n, m] = key_mask[b, m] and pair_mask_fn(n, m)       (each True if not given)
    a[b, h, n, :]    = softmax of s[b, h, n, :] over the allowed keys m     (float32)
                       (a row with no allowed key, e.g. an empty context: all zeros)
    out[b, h, n]     = sum_m a[b, h, n, m] v[b, h, m]                  [B,H,Nq,dv], v's dtype
    update[b, n]     = mean over allowed m of update_fn(a, q_pos, k_pos)[b, n, m]
                       (0 for a row with no allowed key)                 [B,Nq,U] float32

``q_pos``/``k_pos`` are tensors ``[B, N, ...]`` or nests of them (``None``: no positions);
a tiled path hands the score the rows of one tile. ``q_valid [B,Nq]`` / ``k_valid [B,Nk]``
are the masks as bool (``None`` when not given): hints that let a score skip work on
padding, whose logits are masked (keys) or never read (queries). ``key_mask [B,Nk]`` and
``query_mask [B,Nq]``: 1/True = real point (the output of a padded query is unspecified);
``pair_mask_fn(q_index [tq], k_index [tk]) -> bool [tq,tk]`` takes GLOBAL int32 indices
(True = allowed), e.g. causal. Softmax statistics are float32 for every input dtype.
"""
import math

import tensorflow as tf

from taylorformer.attention.tiling import dims

#: finite stand-in for -inf: masked logits (exp(_NEG - max) is exactly 0) and the initial
#: running max of the online softmax
NEG = -1e30


def mha_score(q_tile, k_tile, *_):
    """Standard attention logits q.k/sqrt(dq): [B,H,tq,dq], [B,H,tk,dq] -> [B,H,tq,tk]."""
    d = q_tile.shape[-1]
    scale = 1.0 / math.sqrt(d) if d is not None else tf.math.rsqrt(
        tf.cast(tf.shape(q_tile)[-1], q_tile.dtype))
    return tf.matmul(q_tile, k_tile, transpose_b=True) * tf.cast(scale, q_tile.dtype)


def as_bool(mask):
    """A 0/1 or bool mask as bool; ``None`` stays ``None``."""
    return None if mask is None else tf.cast(mask, tf.bool)


def key_validity(key_mask, k):
    """[B,Nk] bool (True = real key) for keys ``k [B,H,Nk,d]``."""
    if key_mask is None:
        return tf.ones(dims(k)[:1] + dims(k)[2:3], tf.bool)
    return tf.cast(key_mask, tf.bool)


def pair_validity(key_valid, pair_mask_fn, q_index, k_index):
    """Allowed (query, key) pairs: [B,1,1|tq,tk] bool from key validity and structure."""
    valid = key_valid[:, None, None, :]
    if pair_mask_fn is not None:
        valid = tf.logical_and(valid, pair_mask_fn(q_index, k_index)[None, None])
    return valid


def softmax_values(s, valid, values):
    """Masked softmax of logits ``s [B,H,Nq,Nk]`` (float32; ``valid`` broadcastable bool, or
    None for no mask) times the values, given as blocks ``[B,H,Lb,dv]`` splitting Nk:
    ``(out [B,H,Nq,dv] float32, e, z)``, ``e`` the unnormalised weights, ``z`` their row sums."""
    if valid is not None:
        s = tf.where(valid, s, NEG)
    e = tf.exp(s - tf.stop_gradient(tf.reduce_max(s, -1, keepdims=True)))
    # normalised after the matmul, as the tiled path does; the row max contributes 1, so
    # z >= 1 unless there are no keys at all (Nk = 0: an empty context gives 0)
    z = tf.reduce_sum(e, -1, keepdims=True)
    parts = tf.split(e, [dims(v)[2] for v in values], -1) if len(values) > 1 else [e]
    out = tf.add_n([tf.matmul(p, tf.cast(v, tf.float32)) for p, v in zip(parts, values)])
    out = tf.math.divide_no_nan(out, z)
    if valid is not None:  # a row with no allowed key is uniform over NEG logits: zero it
        out *= tf.cast(tf.reduce_any(valid, -1, keepdims=True), out.dtype)
    return out, e, z


def dense_attend(score_fn, q, k, v, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                 query_mask=None, position_grads=True, update_fn=None):
    """The module docstring's semantics on full ``[B,H,Nq,Nk]`` logits.

    ``position_grads=False``: positions are data (no gradient to them). Returns ``out
    [B,H,Nq,dv]``, or ``(out, update [B,Nq,U])`` with ``update_fn``."""
    if not position_grads:
        q_pos, k_pos = (None if p is None else tf.nest.map_structure(tf.stop_gradient, p)
                        for p in (q_pos, k_pos))
    s = tf.cast(score_fn(q, k, q_pos, k_pos, as_bool(query_mask), as_bool(key_mask)), tf.float32)
    masked = key_mask is not None or pair_mask_fn is not None
    valid = None  # [B,1,1|Nq,Nk]
    if masked or update_fn is not None:
        valid = pair_validity(key_validity(key_mask, k), pair_mask_fn,
                              tf.range(tf.shape(q)[2]), tf.range(tf.shape(k)[2]))
    out, e, z = softmax_values(s, valid if masked else None, [v])
    out = tf.cast(out, v.dtype)
    if update_fn is None:
        return out
    shape = tf.shape(s)
    valid = tf.broadcast_to(valid[:, 0], tf.stack([shape[0], shape[2], shape[3]]))  # [B,Nq,Nk]
    weights = tf.where(valid[:, None], tf.math.divide_no_nan(e, z), 0.0)
    allowed = tf.cast(valid, tf.float32)
    per_pair = tf.cast(update_fn(weights, q_pos, k_pos), tf.float32) * allowed[..., None]
    return out, tf.reduce_sum(per_pair, 2) / tf.maximum(tf.reduce_sum(allowed, -1), 1.0)[..., None]
