"""ConditionalNP: targets independent given the context (CNP, TNP-D, TE-TNP, BSA-TNP).

encoder (registered) -> target representations [B, Nt, Dz] -> head MLP -> raw
parameters [B, Nt, P] (float32) -> likelihood (registered) -> parameter dict ->
``tfp.distributions.Distribution`` with batch shape [B, Nt, Dy].
The model's Keras config is its resolved spec, so save/load rebuilds it exactly.

A spec ``"wrapper"`` (kind ``wrapper``, e.g. ``local-taylor``) wraps the network:
``wrapper.augment(batch, causal, fold)`` runs before the encoder and
``wrapper.adjust(params, batch)`` after the likelihood's ``parameters`` (protocol in
``taylorformer/plugins/local_taylor.py``). Encoders that do not declare
``reads_wrapper_features = True`` get the wrapper's features folded into x and y and are
built for ``wrapper.folded_dims()``.
"""
import keras
import tensorflow as tf

from taylorformer import components, registry
from taylorformer.batch import validate_batch, with_masks
from taylorformer.layers import MLP


class NeuralProcess(keras.Model):
    """Shared plumbing of NP models: spec as config, likelihood, head, build for loading."""

    #: may target i condition on targets before it? (picks the wrapper's neighbour sets)
    causal = False

    def __init__(self, spec, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec
        self.dim_x, self.dim_y = spec["dim_x"], spec["dim_y"]
        self.likelihood = components.build("likelihood", spec["likelihood"], "likelihood")
        self.head = MLP(self.likelihood.num_params(self.dim_y), output_dtype="float32",
                        name="head", **spec["head"])
        self.wrapper = None
        if spec.get("wrapper") is not None:
            self.wrapper = components.build("wrapper", spec["wrapper"], "wrapper",
                                            dim_x=self.dim_x, dim_y=self.dim_y)
        self._fold = True

    def build_encoder(self):
        """The spec's encoder, built for the wrapper's folded dims unless it reads them itself."""
        entry = components.normalize(self.spec["encoder"], "encoder")
        cls = registry.get("encoder", entry["name"])
        self._fold = not getattr(cls, "reads_wrapper_features", False)
        dim_x, dim_y = self.dim_x, self.dim_y
        if self.wrapper is not None and self._fold:
            dim_x, dim_y = self.wrapper.folded_dims()
        return components.build("encoder", entry, "encoder", dim_x=dim_x, dim_y=dim_y)

    def augment(self, batch):
        """``wrapper.augment`` (identity without a wrapper)."""
        if self.wrapper is None:
            return batch
        return self.wrapper.augment(batch, causal=self.causal, fold=self._fold)

    def adjust(self, params, batch):
        """``wrapper.adjust`` (identity without a wrapper)."""
        return params if self.wrapper is None else self.wrapper.adjust(params, batch)

    def prepare(self, batch):
        """Add default masks; validate the batch when running eagerly."""
        if tf.executing_eagerly():
            validate_batch(batch, self.dim_x, self.dim_y)
        return with_masks(batch)

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
        self.encoder = self.build_encoder()

    def call(self, batch, training=None):
        """Distribution parameters (dict of float32 ``[B, Nt, Dy]`` tensors)."""
        batch = self.augment(self.prepare(batch))
        return self.adjust(self.likelihood.parameters(self.head(self.encoder(batch))), batch)
