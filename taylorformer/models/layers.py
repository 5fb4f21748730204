"""Small Keras building blocks shared by encoders: MLP and masked set pooling."""
import keras
import tensorflow as tf


class MLP(keras.layers.Layer):
    """Dense stack ``[..., d_in] -> [..., output_dim]`` with ReLU hidden layers.

    ``width`` is one hidden width used ``hidden_layers`` times, or a list of widths (one
    hidden layer each, ``hidden_layers`` then ignored).
    """

    def __init__(self, output_dim, width=128, hidden_layers=2, activation="relu",
                 output_dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.output_dim, self.width, self.hidden_layers, self.activation = (
            output_dim, width, hidden_layers, activation)
        widths = list(width) if isinstance(width, (list, tuple)) else [width] * hidden_layers
        self.hidden = [keras.layers.Dense(w, activation=activation, name=f"hidden_{i}")
                       for i, w in enumerate(widths)]
        # output_dtype="float32" keeps a likelihood head exact under mixed precision
        self.out = keras.layers.Dense(output_dim, name="out", dtype=output_dtype)
        self.output_dtype = output_dtype

    def call(self, x):
        for layer in self.hidden:
            x = layer(x)
        return self.out(x)

    def get_config(self):
        return {**super().get_config(), "output_dim": self.output_dim, "width": self.width,
                "hidden_layers": self.hidden_layers, "activation": self.activation,
                "output_dtype": self.output_dtype}


def masked_mean(values, mask):
    """Mean over points of ``values [B, N, D]`` weighted by ``mask [B, N]`` (0 if empty)."""
    mask = tf.cast(mask, values.dtype)[..., None]
    count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
    return tf.reduce_sum(values * mask, axis=1) / count
