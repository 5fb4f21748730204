"""NP models: :class:`ConditionalNP`, :class:`AutoregressiveNP`, :class:`LatentNP` (on the shared
:class:`NeuralProcess`), and :func:`build_model` / :func:`load_model`.

The family, one role per module: ``base`` (the shared model), ``conditional``,
``autoregressive`` and ``latent`` (the three kinds), ``build`` (a spec to a model, loading), ``fitting`` (the
NP loss and Keras' train/test steps), ``layers`` (encoder building blocks: MLP, masked
pooling), ``inference`` (``loglik`` and ``predict``), ``decoding`` (cached autoregressive
sampling: the protocol encoders implement), ``bounded_sampling`` (sampling in bounded memory)
and ``target_order`` (target permutations)."""
from taylorformer.models.autoregressive import AutoregressiveNP
from taylorformer.models.base import NeuralProcess, dtype_policy_scope
from taylorformer.models.build import MODEL_CLASSES, build_model, load_model
from taylorformer.models.conditional import ConditionalNP
from taylorformer.models.latent import LatentNP

__all__ = ["AutoregressiveNP", "ConditionalNP", "LatentNP", "NeuralProcess", "MODEL_CLASSES", "build_model",
           "dtype_policy_scope", "load_model"]
