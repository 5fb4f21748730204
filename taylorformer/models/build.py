"""Build and load NP models: spec (preset name | dict | JSON/YAML file) -> keras.Model."""
from taylorformer import registry
from taylorformer.models.autoregressive import AutoregressiveNP
from taylorformer.models.conditional import ConditionalNP
from taylorformer.models.latent import LatentNP
from taylorformer.spec import resolve_spec

#: spec ``kind`` -> model class
MODEL_CLASSES = {"conditional": ConditionalNP, "autoregressive": AutoregressiveNP, "latent": LatentNP}


def build_model(spec, name=None, **overrides):
    """Build an NP ``keras.Model`` from a preset name, dict or JSON/YAML file.

    ``overrides`` are deep-merged into the spec (e.g. ``dim_x=2``,
    ``encoder={"layers": 2}``). Raises :class:`SpecError` or
    :class:`UnknownComponentError` (with close matches) on a bad spec, and names the
    missing distribution when a saved spec needs a plugin that is not installed.
    """
    resolved = resolve_spec(spec, **overrides)
    return MODEL_CLASSES[resolved["kind"]].from_spec(resolved, name=name)


def load_model(path):
    """Load a ``.keras`` model saved by taylorformer (plugins load on demand)."""
    import keras

    registry.default()
    return keras.models.load_model(path)
