"""An example third-party taylorformer plugin.

It adds two attention blocks (``cosine``, which only changes how tokens are compared,
and ``distance-decay``, a location-aware attention) and one task (``sine``) through the
``taylorformer`` entry-point group declared in this package's ``setup.cfg``::

    [options.entry_points]
    taylorformer =
        example = taylorformer_example_plugin

It declares the plugin API it is written for (``docs/plugins.md``, "Changes by version"):
a taylorformer that implements a later contract adapts it or refuses it with a clear
message at load time, never on the first batch.
"""
import keras
import numpy as np
import tensorflow as tf

from taylorformer import hookimpl
from taylorformer.attention import Attention
from taylorformer.errors import SpecError
from taylorformer.task import Task

TAYLORFORMER_PLUGIN_API = 2


class CosineAttention(Attention):
    """Cosine-similarity attention with a learned temperature per head."""

    def __init__(self, output_dim, **kwargs):
        super().__init__(output_dim, **kwargs)
        self.log_temperature = self.add_weight(
            name="log_temperature", shape=(self.num_heads, 1, 1),
            initializer=keras.initializers.Constant(np.log(10.0)))

    def score(self, q, k, q_pos, k_pos, q_valid, k_valid):
        """``[B, H, tq, tk]`` = exp(t_h) * cos(q, k)."""
        q = tf.math.l2_normalize(q, axis=-1)
        k = tf.math.l2_normalize(k, axis=-1)
        return tf.exp(tf.cast(self.log_temperature, q.dtype)) * tf.matmul(q, k, transpose_b=True)


class DistanceDecayAttention(Attention):
    """q.k/sqrt(d) - exp(r_h) |x_q - x_k|: attention that decays with distance."""

    def build_score(self, q_pos_shape):
        self.position_dim(q_pos_shape)  # a clear error when positions are missing
        self.log_rate = self.add_weight(name="log_rate", shape=(self.num_heads, 1, 1),
                                        initializer="zeros")

    def position_features(self, positions):
        if positions is None:
            raise SpecError("distance-decay attention needs positions (q_pos, k_pos)")
        return tf.cast(positions, tf.float32)

    def score(self, q, k, q_pos, k_pos, q_valid, k_valid):
        diff = q_pos[:, :, None, :] - k_pos[:, None, :, :]  # [B, tq, tk, P]
        dist = tf.sqrt(tf.reduce_sum(tf.square(diff), -1) + 1e-12)  # [B, tq, tk]
        penalty = tf.exp(self.log_rate)[None] * dist[:, None]  # [B, H, tq, tk]
        return super().score(q, k, q_pos, k_pos, q_valid, k_valid) - tf.cast(penalty, q.dtype)


class SineTask(Task):
    """Random sine waves y = a sin(w x + phase) + noise on x in [-3, 3]."""

    name = "sine"

    def __init__(self, num_context=(3, 20), num_target=30, noise=0.05):
        self.num_context, self.num_target, self.noise = tuple(num_context), int(num_target), float(noise)

    def sample(self, rng, batch_size, split):
        nc_max = self.num_context[1]
        nc = rng.integers(self.num_context[0], nc_max + 1, size=batch_size)
        amp = rng.uniform(0.5, 2.0, (batch_size, 1, 1))
        freq = rng.uniform(0.5, 2.0, (batch_size, 1, 1))
        phase = rng.uniform(0, 2 * np.pi, (batch_size, 1, 1))
        x = rng.uniform(-3, 3, (batch_size, nc_max + self.num_target, 1))
        y = amp * np.sin(freq * x + phase) + self.noise * rng.standard_normal(x.shape)
        mask_c = (np.arange(nc_max)[None] < nc[:, None]).astype(np.float32)
        return {"xc": x[:, :nc_max].astype(np.float32) * mask_c[..., None],
                "yc": y[:, :nc_max].astype(np.float32) * mask_c[..., None],
                "xt": x[:, nc_max:].astype(np.float32), "yt": y[:, nc_max:].astype(np.float32),
                "mask_c": mask_c, "mask_t": np.ones((batch_size, self.num_target), np.float32)}

    def get_config(self):
        return {"num_context": list(self.num_context), "num_target": self.num_target,
                "noise": self.noise}


@hookimpl
def register_attention(register):
    register("cosine", CosineAttention)
    register("distance-decay", DistanceDecayAttention, aliases=["decay"])


@hookimpl
def register_tasks(register):
    register("sine", SineTask)
