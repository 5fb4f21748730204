"""The model builder: spec (preset name | dict | JSON/YAML file) -> keras.Model.

A spec names registry components::

    {"preset": "tnp-d",                      # optional: start from a registered preset
     "kind": "conditional",                  # model class (see MODEL_KINDS)
     "dim_x": 1, "dim_y": 1,
     "encoder": {"name": "transformer", "attention": "mha-xy", "layers": 5, ...},
     "head": {"width": 128, "hidden_layers": 2},
     "likelihood": {"name": "normal", "min_scale": 0.001},
     "wrapper": null,                        # e.g. {"name": "local-taylor", ...}
     "dtype_policy": null}                   # e.g. "mixed_bfloat16" for the network

:func:`resolve_spec` fills defaults, validates keys and types, and records which
distribution provided each component (``provenance``); the resolved spec is the
model's Keras config, so ``model.save`` / :func:`load_model` rebuild it exactly.
"""
import contextlib
import copy
import json
import os

from taylorformer import components, registry
from taylorformer.errors import SpecError, UnknownComponentError, close_matches

MODEL_KINDS = {"conditional": "taylorformer.conditional_np:ConditionalNP",
               "autoregressive": "taylorformer.autoregressive_np:AutoregressiveNP"}

DEFAULTS = {
    "kind": "conditional",
    "dim_x": 1,
    "dim_y": 1,
    "head": {"width": 128, "hidden_layers": 2},
    "likelihood": {"name": "normal"},
    "wrapper": None,
    "dtype_policy": None,
    "description": "",
}
TOP_LEVEL_KEYS = set(DEFAULTS) | {"encoder", "preset", "provenance"}
COMPONENT_FIELDS = {"encoder": "encoder", "likelihood": "likelihood", "wrapper": "wrapper"}
HEAD_KEYS = {"width", "hidden_layers", "activation"}


def deep_merge(base, override):
    """Recursive dict merge; ``override`` wins; a string replaces a component dict."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and "name" not in value:
            out[key] = deep_merge(out[key], value)
        elif isinstance(value, dict) and isinstance(out.get(key), dict) and value.get("name") == out[key].get("name"):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_spec_file(path):
    """Read a JSON or YAML spec file."""
    with open(path) as fh:
        text = fh.read()
    if path.endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"spec file {path}: invalid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SpecError(f"spec file {path} must hold a mapping, got {type(data).__name__}")
    return data


def resolve_spec(spec, **overrides):
    """Complete, validated spec dict (JSON-serialisable) from any accepted form."""
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if isinstance(spec, str):
        spec = load_spec_file(spec) if spec.endswith((".json", ".yaml", ".yml")) else {"preset": spec}
    if not isinstance(spec, dict):
        raise SpecError(f"a model spec must be a preset name, a dict or a JSON/YAML path, got {type(spec).__name__}")
    spec = deep_merge(spec, overrides)
    unknown = set(spec) - TOP_LEVEL_KEYS
    if unknown:
        key = sorted(unknown)[0]
        hint = close_matches(key, TOP_LEVEL_KEYS)
        raise SpecError(f"spec has unknown key {key!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                        + f" Valid keys: {', '.join(sorted(TOP_LEVEL_KEYS))}.")
    if "preset" in spec:
        name = spec.pop("preset")
        base = registry.get("model", name)
        if not isinstance(base, dict):
            raise SpecError(f"model preset {name!r} must be a spec dict, got {type(base).__name__}")
        spec = deep_merge(deep_merge(base, {}), spec)
    spec.pop("provenance", None)
    resolved = deep_merge(DEFAULTS, spec)
    _check_types(resolved)
    for field, kind in COMPONENT_FIELDS.items():
        if resolved.get(field) is not None:
            resolved[field] = components.normalize(resolved[field], field)
    resolved["provenance"] = _provenance(resolved)
    return resolved


def _check_types(spec):
    if "encoder" not in spec:
        raise SpecError("spec has no 'encoder'; name one (e.g. 'transformer') or use a preset")
    if spec["kind"] not in MODEL_KINDS:
        hint = close_matches(spec["kind"], MODEL_KINDS)
        raise SpecError(f"spec 'kind' {spec['kind']!r} is not a model kind"
                        + (f"; did you mean {hint[0]!r}?" if hint else "")
                        + f" Known: {', '.join(sorted(MODEL_KINDS))}.")
    for key in ("dim_x", "dim_y"):
        if not isinstance(spec[key], int) or isinstance(spec[key], bool) or spec[key] < 1:
            raise SpecError(f"spec {key!r} must be a positive int, got {spec[key]!r}")
    head = spec["head"]
    if not isinstance(head, dict) or set(head) - HEAD_KEYS:
        raise SpecError(f"spec 'head' must be a dict with keys from {sorted(HEAD_KEYS)}, got {head!r}")
    if spec["dtype_policy"] is not None and not isinstance(spec["dtype_policy"], str):
        raise SpecError(f"spec 'dtype_policy' must be a Keras policy name, got {spec['dtype_policy']!r}")


def _provenance(spec):
    """(kind, name) -> distribution/version of every named component, nested ones too."""
    found = []

    def visit(kind, entry):
        e = registry.entry(kind, entry["name"])
        found.append({"kind": kind, "name": e.name, "distribution": e.distribution, "version": e.version})
        for key, value in entry.items():  # nested components such as an encoder's attention
            if key in registry.hookspecs.KINDS and value is not None:
                visit(key, components.normalize(value, f"{kind}.{key}"))

    for field, kind in COMPONENT_FIELDS.items():
        if spec.get(field) is not None:
            visit(kind, spec[field])
    return found


def _model_class(kind):
    import importlib

    module, cls = MODEL_KINDS[kind].split(":")
    return getattr(importlib.import_module(module), cls)


def build_model(spec, name=None, **overrides):
    """Build an NP ``keras.Model`` from a preset name, dict or JSON/YAML file.

    ``overrides`` are deep-merged into the spec (e.g. ``dim_x=2``,
    ``encoder={"layers": 2}``). Raises :class:`SpecError` or
    :class:`UnknownComponentError` (with close matches) on a bad spec, and names the
    missing distribution when a saved spec needs a plugin that is not installed.
    """
    resolved = _resolve_with_plugin_hint(spec, overrides)
    cls = _model_class(resolved["kind"])
    kwargs = {"name": name} if name else {}
    with dtype_policy_scope(resolved["dtype_policy"]):
        model = cls(resolved, **kwargs)
        model(model.dummy_batch())  # create the variables now: summaries and loading need them
    return model


@contextlib.contextmanager
def dtype_policy_scope(policy):
    """Keras' global dtype policy set to ``policy`` (a name such as ``"mixed_bfloat16"``;
    ``None``: unchanged) inside the block, restored after it. Each layer keeps the policy
    it was created with, so a model built inside the block keeps it, and models built
    later in the process are not affected."""
    if not policy:
        yield
        return
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _resolve_with_plugin_hint(spec, overrides):
    try:
        return resolve_spec(spec, **overrides)
    except UnknownComponentError as exc:
        saved = spec.get("provenance", []) if isinstance(spec, dict) else []
        for item in saved:
            if (item["kind"], item["name"]) == (exc.kind, exc.name):
                raise UnknownComponentError(
                    exc.kind, exc.name, exc.known,
                    f"This model was saved with {exc.kind} {exc.name!r} from the distribution "
                    f"{item['distribution']!r} (version {item['version']}); install that plugin "
                    f"package to load it.") from None
        raise


def load_model(path):
    """Load a ``.keras`` model saved by taylorformer (plugins load on demand)."""
    import keras

    registry.default()
    from taylorformer import autoregressive_np, conditional_np  # noqa: F401 - registers the model classes

    return keras.models.load_model(path)
