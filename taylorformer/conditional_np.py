"""ConditionalNP: targets independent given the context (CNP, TNP-D, TE-TNP, BSA-TNP).

encoder (registered) -> target representations [B, Nt, Dz] -> head MLP -> raw
parameters [B, Nt, P] (float32) -> likelihood (registered) -> parameter dict ->
``tfp.distributions.Distribution`` with batch shape [B, Nt, Dy].
The model's Keras config is its resolved spec, so save/load rebuilds it exactly.
"""
import keras
import tensorflow as tf

from taylorformer import components
from taylorformer.batch import validate_batch, with_masks
from taylorformer.layers import MLP


class NeuralProcess(keras.Model):
    """Shared plumbing of NP models: spec as config, likelihood, head, build for loading."""

    def __init__(self, spec, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec
        self.dim_x, self.dim_y = spec["dim_x"], spec["dim_y"]
        self.likelihood = components.build("likelihood", spec["likelihood"], "likelihood")
        self.head = MLP(self.likelihood.num_params(self.dim_y), output_dtype="float32",
                        name="head", **spec["head"])

    def prepare(self, batch):
        """Add default masks; validate the batch when running eagerly."""
        batch = with_masks(batch)
        if tf.executing_eagerly():
            validate_batch(batch, self.dim_x, self.dim_y)
        return batch

    def predict_distribution(self, batch, training=False):
        """``tfp`` distribution over ``yt`` with batch shape ``[B, Nt, Dy]``."""
        return self.likelihood.distribution(self(batch, training=training))

    def dummy_batch(self, nc=3, nt=2):
        zeros = lambda n, d: tf.zeros([1, n, d])  # noqa: E731
        return {"xc": zeros(nc, self.dim_x), "yc": zeros(nc, self.dim_y),
                "xt": zeros(nt, self.dim_x), "yt": zeros(nt, self.dim_y)}

    def get_config(self):
        return {"spec": self.spec, "name": self.name}

    @classmethod
    def from_config(cls, config):
        from taylorformer.builder import build_model

        return build_model(config["spec"], name=config.get("name"))

    def get_build_config(self):
        return {"dim_x": self.dim_x, "dim_y": self.dim_y}

    def build_from_config(self, config):
        self(self.dummy_batch())


@keras.saving.register_keras_serializable(package="taylorformer", name="ConditionalNP")
class ConditionalNP(NeuralProcess):
    """Factorised predictive: p(yt | xt, context) = prod_i p(yt_i | xt_i, context)."""

    def __init__(self, spec, **kwargs):
        super().__init__(spec, **kwargs)
        self.encoder = components.build("encoder", spec["encoder"], "encoder",
                                        dim_x=self.dim_x, dim_y=self.dim_y)

    def call(self, batch, training=None):
        """Distribution parameters (dict of float32 ``[B, Nt, Dy]`` tensors)."""
        batch = self.prepare(batch)
        return self.likelihood.parameters(self.head(self.encoder(batch)))
