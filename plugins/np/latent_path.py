"""The latent path of NP and ANP: a set of points -> the diagonal Gaussian over z."""
import keras
import tensorflow as tf

from taylorformer.models.layers import MLP, masked_mean

from .mab import MultiheadAttentionBlock

#: the floor and range of the latent scale, sigma = 0.1 + 0.9 sigmoid(raw) (Le et al. 2018)
MIN_LATENT_SCALE = 0.1


def dense_stack(output_dim, width, layers, name):
    """``layers`` dense layers (ReLU between them, the last linear) ``[..., d] -> [..., output_dim]``."""
    return MLP(output_dim, width, layers - 1, name=name)


class LatentPath(keras.layers.Layer):
    """``(x [B, N, Dx], y [B, N, Dy], mask [B, N]) -> (loc, scale)`` ``[B, latent_dim]``:
    ``layers`` dense layers on ``[x, y]`` (with ``self_attention``: then a ReLU and a
    :class:`MultiheadAttentionBlock` over the valid points), the masked mean over points,
    ``post_layers`` dense layers to ``[loc, raw]``, ``scale = 0.1 + 0.9 sigmoid(raw)``."""

    def __init__(self, width, latent_dim, layers, post_layers, self_attention=False, num_heads=8, **kwargs):
        super().__init__(**kwargs)
        self.width, self.latent_dim, self.num_layers, self.post_layers = width, latent_dim, layers, post_layers
        self.self_attention, self.num_heads = self_attention, num_heads
        self.pre = dense_stack(width, width, layers, "pre")
        self.attention = MultiheadAttentionBlock(width, num_heads, name="self_attention") if self_attention else None
        self.post = dense_stack(2 * latent_dim, width, post_layers, "post")

    def call(self, x, y, mask):
        h = self.pre(tf.concat([tf.cast(x, tf.float32), tf.cast(y, tf.float32)], -1))
        if self.attention is not None:
            h = tf.nn.relu(h)
            h = self.attention(h, h, h, key_mask=mask)
        loc, raw = tf.split(self.post(masked_mean(h, mask)), 2, -1)
        return loc, MIN_LATENT_SCALE + (1.0 - MIN_LATENT_SCALE) * tf.sigmoid(raw)

    def get_config(self):
        return {**super().get_config(), "width": self.width, "latent_dim": self.latent_dim,
                "layers": self.num_layers, "post_layers": self.post_layers,
                "self_attention": self.self_attention, "num_heads": self.num_heads}
