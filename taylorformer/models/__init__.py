"""NP models: :class:`ConditionalNP`, :class:`AutoregressiveNP` (on the shared
:class:`NeuralProcess`), and :func:`build_model` / :func:`load_model`."""
from taylorformer.models.autoregressive import AutoregressiveNP
from taylorformer.models.base import NeuralProcess, dtype_policy_scope
from taylorformer.models.build import MODEL_CLASSES, build_model, load_model
from taylorformer.models.conditional import ConditionalNP

__all__ = ["AutoregressiveNP", "ConditionalNP", "NeuralProcess", "MODEL_CLASSES", "build_model",
           "dtype_policy_scope", "load_model"]
