"""The Set Transformer's multihead attention block (MAB; Lee et al. 2019), the attention of
the NP/ANP code of Lee et al. (2020) and Nguyen & Grover (2022) that the ANP preset follows."""
import keras
import tensorflow as tf

from taylorformer.checks import check_size
from taylorformer.errors import SpecError


class MultiheadAttentionBlock(keras.layers.Layer):
    """``MAB(q, k, v)``: ``Q = q Wq``, ``K = k Wk``, ``V = v Wv`` (no biases, ``width`` each,
    split into ``num_heads`` heads of ``width / num_heads`` columns); per head
    ``softmax(Q_h K_h^T / sqrt(width)) V_h`` over the valid keys (scaled by the full width,
    as the Set Transformer's code does); ``H = LN(Q + heads)``, output ``LN(H + relu(H Wo + bo))``.

    ``q [B, Nq, Dq]``, ``k [B, Nk, Dk]``, ``v [B, Nk, Dv]``, ``key_mask [B, Nk]`` (1 valid) ->
    ``[B, Nq, width]``; a query with no valid key gets zero attention output. Dense: it
    holds the ``[B, H, Nq, Nk]`` logits, sized for NP tasks of hundreds of points.
    """

    def __init__(self, width=128, num_heads=8, **kwargs):
        super().__init__(**kwargs)
        self.width = check_size("attention block", "width", width)
        self.num_heads = check_size("attention block", "num_heads", num_heads)
        if self.width % self.num_heads:
            raise SpecError(f"attention block: width {self.width} must be a multiple of num_heads {self.num_heads}")
        self.q = keras.layers.Dense(self.width, use_bias=False, name="q")
        self.k = keras.layers.Dense(self.width, use_bias=False, name="k")
        self.v = keras.layers.Dense(self.width, use_bias=False, name="v")
        self.out = keras.layers.Dense(self.width, name="out")
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm2")

    def heads(self, x):
        """``[B, N, width] -> [B, H, N, width / H]``."""
        shape = tf.shape(x)
        x = tf.reshape(x, tf.concat([shape[:2], [self.num_heads, self.width // self.num_heads]], 0))
        return tf.transpose(x, [0, 2, 1, 3])

    def call(self, q, k, v, key_mask=None):
        q, k, v = self.q(q), self.k(k), self.v(v)
        logits = tf.matmul(self.heads(q), self.heads(k), transpose_b=True) / tf.sqrt(float(self.width))
        if key_mask is None:
            weights = tf.nn.softmax(logits, -1)
        else:
            valid = tf.cast(key_mask, tf.bool)[:, None, None, :]  # [B, 1, 1, Nk]
            logits = tf.where(valid, logits, tf.constant(-1e30, logits.dtype))
            weights = tf.where(valid, tf.nn.softmax(logits, -1), tf.zeros_like(logits))
        attended = tf.transpose(tf.matmul(weights, self.heads(v)), [0, 2, 1, 3])  # [B, Nq, H, dh]
        h = self.norm1(q + tf.reshape(attended, tf.shape(q)))
        return self.norm2(h + tf.nn.relu(self.out(h)))

    def get_config(self):
        return {**super().get_config(), "width": self.width, "num_heads": self.num_heads}
