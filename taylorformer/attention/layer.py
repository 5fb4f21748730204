"""The attention layer and its contract: projections + a score function + the shared executor.

An attention plugin (kind ``attention``) is a Keras layer class that subclasses
:class:`Attention` and overrides only the methods of the contract below; :meth:`call`
(projections, heads, the executor, the output projection) is shared, so every plugin
gets dense or tiled constant-memory attention, masks, mixed precision and XLA for free.

The contract (all optional except ``score`` for a new kind of attention)::

    score(q, k, q_pos, k_pos, q_valid, k_valid) -> logits [B, H, tq, tk]
        q [B, H, tq, d], k [B, H, tk, d]: one tile of projected queries / keys;
        q_pos / k_pos: the tile's rows of position_features(positions) (None without
        positions); q_valid [B, tq] / k_valid [B, tk]: bool, False = padding (None when
        the caller gave no mask). Default: q.k / sqrt(d) (TNP's ``mha-xy``).
    position_features(positions [B, N, P] | None) -> tensor [B, N, ...] or a nest of them
        computed once per call, before tiling (e.g. unit vectors, per-group columns).
    build_score(q_pos_shape)            create the score's weights ([B, Nq, P] or None).
    pair_floats() -> int                floats the score materialises per (query, key)
                                        pair (default H); sizes dense blocks and tiles.
    position_gradients (attribute)      False: positions are data (no gradient to them).
    updates_positions (attribute) and position_update(weights, q_pos, k_pos) -> [B, tq, tk, P]
        the layer also moves its query positions: new_q_pos = q_pos + the mean over the
        keys each query may attend to of position_update (weights: the attention
        weights [B, H, tq, tk]); the executor runs it tile by tile too.

Call protocol (what encoders rely on)::

    out = layer(queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
                values=None, query_mask=None)
    # queries [B, Nq, Dq], keys [B, Nk, Dk], values [B, Nk, Dv] (default: keys)
    # q_pos [B, Nq, P], k_pos [B, Nk, P]: locations (used by location-aware scores)
    # key_mask [B, Nk] / query_mask [B, Nq]: 1 = real point; pair_mask_fn: structural
    # mask from global indices (see taylorformer.attention.reference)
    # out [B, Nq, output_dim]; (out, new_q_pos) when ``updates_positions`` is True.

Incremental decoding (autoregressive sampling, :mod:`taylorformer.models.decoding`) uses the
same projections and score: ``key_value_heads(keys, values=None)`` gives the heads a
:class:`~taylorformer.models.decoding.KeyValueCache` stores, ``attend_cache(queries, cache,
length, key_mask)`` attends new query rows to its first ``length`` slots through
:func:`taylorformer.attention.executor.attend_blocks`. Nothing to override.
"""
import keras
import tensorflow as tf

from taylorformer.attention.executor import attend, attend_blocks
from taylorformer.attention.policy import choose_tile
from taylorformer.attention.reference import mha_score
from taylorformer.errors import SpecError
from taylorformer.checks import MAX_WIDTH, check_size


class Attention(keras.layers.Layer):
    """Multi-head scaled dot-product attention, q.k/sqrt(d) (TNP ``mha-xy``).

    Options shared by every attention: ``num_heads``, ``head_dim``, ``tile_size`` (None:
    the executor's rule; an int forces tiles of that size) and ``dense_pairs`` (None: the
    rule; an int: dense while ``B * Nq * Nk`` is at most this).
    """

    updates_positions = False
    position_gradients = True

    def __init__(self, output_dim, num_heads=8, head_dim=16, tile_size=None, dense_pairs=None,
                 **kwargs):
        super().__init__(**kwargs)
        kind = type(self).__name__
        num_heads, head_dim = check_size(kind, "num_heads", num_heads), check_size(kind, "head_dim", head_dim)
        tile_size = check_size(kind, "tile_size", tile_size, optional=True)
        dense_pairs = check_size(kind, "dense_pairs", dense_pairs, optional=True)
        self.output_dim, self.num_heads, self.head_dim = output_dim, num_heads, head_dim
        self.tile_size, self.dense_pairs = tile_size, dense_pairs
        inner = num_heads * head_dim
        if inner > MAX_WIDTH:  # the width of the q/k/v projections
            raise SpecError(f"{kind} 'num_heads' x 'head_dim' must be at most {MAX_WIDTH}, got "
                            f"{num_heads} x {head_dim} = {inner}")
        self.q_proj = keras.layers.Dense(inner, use_bias=False, name="q")
        self.k_proj = keras.layers.Dense(inner, use_bias=False, name="k")
        self.v_proj = keras.layers.Dense(inner, use_bias=False, name="v")
        self.out_proj = keras.layers.Dense(output_dim, name="out")

    # ------------------------------------------------------------------ the contract
    #: ``score(q, k, q_pos, k_pos, q_valid, k_valid)``: logits ``[B, H, tq, tk]`` of query
    #: tile ``q [B, H, tq, d]`` vs key tile ``k``. Here a plain function of the tiles (it
    #: reads no weights), so every layer's tiled forward pass can share one compiled loop
    #: (:mod:`taylorformer.attention.speedups`); a subclass overrides it with a method.
    score = staticmethod(mha_score)

    def position_features(self, positions):
        """What ``score`` receives as positions (here: the positions unchanged)."""
        return positions

    def build_score(self, q_pos_shape):
        """Create the score's weights; ``q_pos_shape`` is ``[B, Nq, P]`` or None."""

    def pair_floats(self):
        """float32 values the score materialises per (query, key) pair: the logits."""
        return self.num_heads

    def position_update(self, weights, q_pos, k_pos):
        """Per-pair position change ``[B, tq, tk, P]`` (layers with ``updates_positions``)."""
        raise NotImplementedError(f"{type(self).__name__} sets updates_positions but has no "
                                  "position_update")

    # ------------------------------------------------------------------ helpers for plugins
    def position_dim(self, q_pos_shape):
        """Static location dim ``P`` of ``q_pos [B, Nq, P]``; an error if positions are missing."""
        if q_pos_shape is None or q_pos_shape[-1] is None:
            raise SpecError(f"{type(self).__name__} needs query and key positions (q_pos, k_pos) "
                            "with a static last dimension")
        return int(q_pos_shape[-1])

    # ------------------------------------------------------------------ shared machinery
    def build(self, queries_shape, keys_shape=None, q_pos_shape=None, k_pos_shape=None,
              values_shape=None):
        keys_shape = keys_shape or queries_shape
        self.q_proj.build(queries_shape)
        self.k_proj.build(keys_shape)
        self.v_proj.build(values_shape or keys_shape)
        self.out_proj.build(tuple(queries_shape[:-1]) + (self.num_heads * self.head_dim,))
        self.build_score(q_pos_shape)

    def _heads(self, x):
        b, n = tf.shape(x)[0], tf.shape(x)[1]
        return tf.transpose(tf.reshape(x, [b, n, self.num_heads, self.head_dim]), [0, 2, 1, 3])

    def merge_heads(self, heads):
        """``[B, H, Nq, d] -> [B, Nq, output_dim]`` through the output projection."""
        b, n = tf.shape(heads)[0], tf.shape(heads)[2]
        merged = tf.reshape(tf.transpose(heads, [0, 2, 1, 3]), [b, n, self.num_heads * self.head_dim])
        return self.out_proj(merged)

    def key_value_heads(self, keys, values=None):
        """Key and value heads ``[B, H, Nk, d]`` of ``keys`` and ``values`` (default: the
        keys): what an incremental-decoding cache stores per layer."""
        values = keys if values is None else values
        return self._heads(self.k_proj(keys)), self._heads(self.v_proj(values))

    def call(self, queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
             values=None, query_mask=None):
        q = self._heads(self.q_proj(queries))
        k, v = self.key_value_heads(keys, values)
        tile = choose_tile(q, k, self.pair_floats(), self.tile_size, self.dense_pairs)
        update = self.position_update if self.updates_positions else None
        result = attend(
            self.score, q, k, v, self.position_features(q_pos), self.position_features(k_pos),
            key_mask=key_mask, query_mask=query_mask, pair_mask_fn=pair_mask_fn, tile=tile,
            position_grads=self.position_gradients, update_fn=update)
        if update is None:
            return self.merge_heads(result)
        heads, change = result
        return self.merge_heads(heads), tf.cast(q_pos, change.dtype) + change

    def attend_cache(self, queries, cache, length, key_mask=None):
        """Incremental decoding: ``queries [B, Nq, Dq]`` against the slots below ``length``
        of a :class:`taylorformer.models.decoding.KeyValueCache` (heads from
        :meth:`key_value_heads`) whose ``key_mask [B, Nc + Nt]`` is 1 -> ``[B, Nq,
        output_dim]``. Position-free: a layer that moves positions cannot decode from a cache."""
        if self.updates_positions:
            raise SpecError(f"{type(self).__name__} moves positions: it cannot run from a "
                            "key/value cache; sample with cache=False")
        q = self._heads(self.q_proj(queries))
        out = attend_blocks(self.score, q, cache.blocks(length, key_mask))
        return self.merge_heads(out)

    def get_config(self):
        return {**super().get_config(), "output_dim": self.output_dim, "num_heads": self.num_heads,
                "head_dim": self.head_dim, "tile_size": self.tile_size,
                "dense_pairs": self.dense_pairs}
