"""Initial weights of a model's linear maps (spec ``init``).

* ``"keras"`` (default): each layer keeps its own initialisers (Keras ``Dense``:
  Glorot-uniform kernels, zero biases).
* ``"fan-in-uniform"``: every linear map's kernel ``[fan_in, fan_out]`` and its bias are
  drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's ``nn.Linear`` default, which
  the TE-TNP authors' code trains from (with its layers starting identical: the transformer
  encoder's ``identical_initial_layers``). On the same batches the reference given Keras'
  initialisers learns like ours did with them, and ours given both like the reference
  (``docs/parity.md``, TE-TNP).

Linear maps are the model's Keras ``Dense`` layers and the ``(kernel, bias)`` pairs a
layer with weights of its own lists in a ``linear_weights()`` method (bias may be None);
other weights (norms, pseudo-tokens, kernel amplitudes) keep their initialisers. Then
every layer with a ``finish_initialisation()`` method has it called (e.g. to copy weights
between its sublayers), whatever the scheme.
"""
import math

import keras


def linear_maps(model):
    """The ``(kernel [fan_in, fan_out], bias [fan_out] or None)`` pairs of ``model``."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Dense):
            yield layer.kernel, layer.bias
        elif callable(getattr(layer, "linear_weights", None)):
            yield from layer.linear_weights()


def initialise(model, scheme):
    """Re-draw the linear maps of the built ``model`` under ``scheme`` (spec ``init``,
    :data:`taylorformer.spec.INIT_SCHEMES`),
    from Keras' global random state (``keras.utils.set_random_seed``), then finish each
    layer's initialisation."""
    if scheme == "fan-in-uniform":
        for kernel, bias in linear_maps(model):
            bound = 1.0 / math.sqrt(kernel.shape[0])
            for weight in (kernel, bias):
                if weight is not None:
                    weight.assign(keras.random.uniform(weight.shape, -bound, bound, dtype=weight.dtype))
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if callable(getattr(layer, "finish_initialisation", None)):
            layer.finish_initialisation()
