"""ConditionalNP: targets independent given the context (CNP, TNP-D, TE-TNP, BSA-TNP)."""
import keras

from taylorformer.models.inference import with_unknown_targets
from taylorformer.models.base import NeuralProcess


@keras.saving.register_keras_serializable(package="taylorformer", name="ConditionalNP")
class ConditionalNP(NeuralProcess):
    """Factorised predictive: p(yt | xt, context) = prod_i p(yt_i | xt_i, context)."""

    def predict_distribution(self, batch, training=False):
        """Predictive ``tfp`` distribution over ``yt``, batch shape ``[B, Nt, Dy]``, of a
        batch with ``xc``, ``yc``, ``xt`` (and optional masks); ``yt`` is not read and may
        be left out."""
        return self.distribution(with_unknown_targets(batch, self.dim_y), training=training)
