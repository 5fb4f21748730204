"""Base class of attention plugins: projections + a score function + the executor.

An attention plugin (kind ``attention``) is a Keras layer class. Subclasses usually
override only :meth:`Attention.score`; the shared executor
(:mod:`taylorformer.attention_executor`) runs it densely or in tiles with an online
softmax, so every plugin gets constant-memory attention.

Call protocol (what encoders rely on)::

    out = layer(queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None)
    # queries [B, Nq, Dq], keys [B, Nk, Dk] (values are projected from keys)
    # q_pos [B, Nq, P], k_pos [B, Nk, P]: locations (used by location-aware scores)
    # key_mask [B, Nk]: 1 = real key; pair_mask_fn: structural mask from indices
    # out [B, Nq, output_dim]; layers with ``updates_positions = True`` return
    # (out, new_q_pos) instead.
"""
import keras
import tensorflow as tf

from taylorformer import attention_executor


class Attention(keras.layers.Layer):
    """Multi-head scaled dot-product attention, q.k/sqrt(d) (TNP ``mha-xy``)."""

    updates_positions = False

    def __init__(self, output_dim, num_heads=8, head_dim=16, tile_size=None, **kwargs):
        super().__init__(**kwargs)
        self.output_dim, self.num_heads, self.head_dim, self.tile_size = (
            output_dim, num_heads, head_dim, tile_size)
        inner = num_heads * head_dim
        self.q_proj = keras.layers.Dense(inner, use_bias=False, name="q")
        self.k_proj = keras.layers.Dense(inner, use_bias=False, name="k")
        self.v_proj = keras.layers.Dense(inner, use_bias=False, name="v")
        self.out_proj = keras.layers.Dense(output_dim, name="out")

    def build(self, queries_shape, keys_shape=None, q_pos_shape=None, k_pos_shape=None):
        keys_shape = keys_shape or queries_shape
        self.q_proj.build(queries_shape)
        self.k_proj.build(keys_shape)
        self.v_proj.build(keys_shape)
        self.out_proj.build(tuple(queries_shape[:-1]) + (self.num_heads * self.head_dim,))

    def position_dim(self, q_pos_shape):
        """Static location dim ``P`` of ``q_pos [B, Nq, P]``; an error if positions are missing."""
        if q_pos_shape is None or q_pos_shape[-1] is None:
            raise ValueError(f"{type(self).__name__} needs query and key positions (q_pos, k_pos) "
                             "with a static last dimension")
        return int(q_pos_shape[-1])

    def score(self, q, k, q_pos, k_pos):
        """Logits ``[B, H, tq, tk]`` of query tile ``q [B, H, tq, d]`` vs key tile ``k``."""
        return attention_executor.mha_score(q, k, q_pos, k_pos)

    def _heads(self, x):
        b, n = tf.shape(x)[0], tf.shape(x)[1]
        return tf.transpose(tf.reshape(x, [b, n, self.num_heads, self.head_dim]), [0, 2, 1, 3])

    def attend(self, queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None):
        """Attention output per head, ``[B, H, Nq, head_dim]``."""
        q, k, v = self._heads(self.q_proj(queries)), self._heads(self.k_proj(keys)), self._heads(self.v_proj(keys))
        return attention_executor.attend(self.score, q, k, v, q_pos=q_pos, k_pos=k_pos,
                                         key_mask=key_mask, pair_mask_fn=pair_mask_fn,
                                         tile_size=self.tile_size)

    def merge_heads(self, heads):
        """``[B, H, Nq, d] -> [B, Nq, output_dim]`` through the output projection."""
        b, n = tf.shape(heads)[0], tf.shape(heads)[2]
        merged = tf.reshape(tf.transpose(heads, [0, 2, 1, 3]), [b, n, self.num_heads * self.head_dim])
        return self.out_proj(merged)

    def call(self, queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None):
        return self.merge_heads(self.attend(queries, keys, q_pos, k_pos, key_mask, pair_mask_fn))

    def get_config(self):
        return {**super().get_config(), "output_dim": self.output_dim, "num_heads": self.num_heads,
                "head_dim": self.head_dim, "tile_size": self.tile_size}
