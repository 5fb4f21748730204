"""Incremental (cached) decoding of autoregressive NPs: the protocol and its buffer helpers.

:meth:`taylorformer.models.AutoregressiveNP.sample` (``cache=None`` or ``True``) draws target t
from the context and the targets before it without re-running the whole sequence:
every layer keeps the keys and values of the points already seen in fixed-size buffers
(capacity L = Nc + Nt, static shapes, so one trace serves every step), and step t runs
only target t's token through the layers, attending to the first ``nc + t`` slots.

The sequence is ``[context; targets in generation order]``; ``index = nc + t`` is target
t's slot. A causal encoder (``causal = True``) that supports the cache implements::

    cache = encoder.start_cache(batch, features=None)
        # batch: context (xc, yc, mask_c) and mask_t [B, Nt] of the targets to come
        # (their x and y are not read); features: the wrapper's features of the
        # context (encoders with reads_wrapper_features). Runs the context through every
        # layer; returns a nest of tensors (the loop state).
    rep, pending = encoder.cached_query(cache, point, index, features=None)
        # point: a one-target batch (xc/yc/mask_c with 0 points; xt, yt [B, 1, .], mask_t
        # [B, 1]) whose yt is unknown (zeros): target t's representation [B, 1, D] from
        # the context and the targets before it; pending: what cached_append reuses.
    cache = encoder.cached_append(cache, point, index, pending, features=None)
        # the same point with its drawn yt: writes its keys/values into every layer's
        # slot ``index``.

A wrapper with cached decoding (``local-taylor``) implements ``start_cache(batch) ->
(state, context features)``, ``query_features(state, index) -> (features, pending)``
(the point's features before its y is known) and ``append(state, index, y, features,
pending) -> (state, features)`` (stores y, fills in the features that read it).

Keys and values at a slot never change once written, and a token's representation
depends only on the slots before it, so the result equals the teacher-forced pass on
the drawn values (tested against it and against ``cache=False``). The protocols' method
names are part of the plugin contract: :data:`taylorformer.plugin_api.ENCODER_METHODS` and
:data:`~taylorformer.plugin_api.WRAPPER_METHODS`.
"""
import math
import typing

import tensorflow as tf

from taylorformer.models.target_order import TARGET_KEYS


def recent_slots(num_targets):
    """Size C of a cache's recent block for ``num_targets`` steps: about sqrt(Nt), which
    balances the per-step write into the recent block (C rows) against moving the block
    into the main buffer every C steps (Nc + Nt rows)."""
    return max(1, round(math.sqrt(num_targets)))


class KeyValueCache(typing.NamedTuple):
    """One attention layer's key/value heads of the points seen so far, in two blocks.

    ``keys``/``values [B, H, Nc + Nt + C, d]``: the main buffer, valid below ``settled``
    (scalar int32); ``recent_keys``/``recent_values [B, H, C, d]``: slots ``settled ..
    settled + C - 1``, where each step writes. Writing one row copies only the recent
    block (a TensorFlow scatter copies its input unless it can reuse it); every C steps
    :meth:`settle` moves the block into the main buffer. Attention reads both blocks in
    place (:func:`taylorformer.attention.attend_blocks`). A named tuple, so it
    is part of a ``tf.while_loop`` state.
    """

    keys: tf.Tensor
    values: tf.Tensor
    recent_keys: tf.Tensor
    recent_values: tf.Tensor
    settled: tf.Tensor

    @classmethod
    def start(cls, keys, values, num_targets):
        """A cache holding ``keys``/``values [B, H, n, d]`` (slots 0..n-1) with room for
        ``num_targets`` (static int) more."""
        extra = recent_slots(num_targets)
        recent = [tf.zeros(tf.concat([tf.shape(x)[:2], [extra], tf.shape(x)[3:]], 0), x.dtype)
                  for x in (keys, values)]
        return cls(pad_slots(keys, num_targets + extra, 2), pad_slots(values, num_targets + extra, 2),
                   recent[0], recent[1], tf.shape(keys)[2])

    def write(self, index, keys, values):
        """The cache with ``keys``/``values [B, H, 1, d]`` at slot ``index`` (in the recent block)."""
        at = index - self.settled
        return self._replace(recent_keys=write_at(self.recent_keys, at, keys, 2),
                             recent_values=write_at(self.recent_values, at, values, 2))

    def settle(self):
        """The cache with its recent block moved into the main buffer (and emptied)."""
        return self._replace(keys=write_at(self.keys, self.settled, self.recent_keys, 2),
                             values=write_at(self.values, self.settled, self.recent_values, 2),
                             settled=self.settled + tf.shape(self.recent_keys)[2])

    def blocks(self, length, key_mask):
        """``[(k, v, valid [B, slots])]`` of the slots below ``length`` whose ``key_mask
        [B, Nc + Nt]`` is 1, for :func:`~taylorformer.attention.attend_blocks`."""
        key_mask = tf.cast(key_mask, tf.bool)
        n = tf.shape(key_mask)[1]
        main = tf.range(tf.shape(self.keys)[2])
        recent = self.settled + tf.range(tf.shape(self.recent_keys)[2])

        def valid(slots, limit):
            real = tf.gather(key_mask, tf.minimum(slots, n - 1), axis=1) & (slots < n)[None]
            return real & (slots < limit)[None]

        return [(self.keys, self.values, valid(main, tf.minimum(length, self.settled))),
                (self.recent_keys, self.recent_values, valid(recent, length))]


def settle_all(cache):
    """Every :class:`KeyValueCache` in the nest ``cache`` (dicts, lists, tuples) settled."""
    if isinstance(cache, KeyValueCache):
        return cache.settle()
    if isinstance(cache, dict):
        return {key: settle_all(value) for key, value in cache.items()}
    if isinstance(cache, (list, tuple)):
        return type(cache)(settle_all(value) for value in cache)
    return cache


def context_only(batch):
    """``batch`` with no targets: every target-side key cut to 0 points."""
    return {key: value[:, :0] if key in TARGET_KEYS else value for key, value in batch.items()}


def one_target(batch, index, yt=None):
    """The one-target batch of target ``index`` (scalar int32, 0-based among the targets)
    with an empty context: ``xt [B, 1, Dx]``, ``yt`` (given ``[B, 1, Dy]``, else zeros),
    ``mask_t [B, 1]``, and ``xc``/``yc``/``mask_c`` with 0 points."""
    point = {key: tf.gather(batch[key], index[None], axis=1) for key in ("xt", "mask_t")}
    point["yt"] = tf.zeros_like(tf.gather(tf.cast(batch["yt"], tf.float32), index[None], axis=1)) \
        if yt is None else yt
    point.update({key: batch[key][:, :0] for key in ("xc", "yc", "mask_c")})
    return point


def write_at(buffer, index, rows, axis=1):
    """``buffer`` with ``rows`` written at positions ``index, index + 1, ...`` of ``axis``
    (``rows`` has the buffer's shape except along ``axis``; ``index`` a scalar int32).
    One scatter of ``rows`` (XLA updates the loop's buffer in place)."""
    shape = tf.shape(rows)
    ranges = [tf.range(shape[a]) for a in range(axis)] + [index + tf.range(shape[axis])]
    indices = tf.stack(tf.meshgrid(*ranges, indexing="ij"), -1)
    return tf.tensor_scatter_nd_update(buffer, indices, tf.cast(rows, buffer.dtype))


def pad_slots(values, count, axis=1):
    """``values`` with ``count`` zero slots appended along ``axis`` (a buffer's free slots)."""
    pad = [[0, 0]] * values.shape.rank
    pad[axis] = [0, count]
    return tf.pad(values, pad)
