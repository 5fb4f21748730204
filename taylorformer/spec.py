"""The model spec: merge, validation and provenance (this module imports no model).

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
distribution provided each component, nested ones included (``provenance``); the
resolved spec is the model's Keras config, so ``model.save`` /
:func:`taylorformer.load_model` rebuild it exactly. A component option that names a
nested component is called after its kind: ``attention`` or ``attention_<role>``.
"""
import copy
import json
import os

from taylorformer import components, registry
from taylorformer.errors import SpecError, UnknownComponentError, close_matches
from taylorformer.hookspecs import KINDS

MODEL_KINDS = ("conditional", "autoregressive")

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
    """Complete, validated spec dict (JSON-serialisable) from any accepted form.

    A spec saved with a model (it carries ``provenance``) that names a component no
    installed plugin provides raises :class:`UnknownComponentError` naming the
    distribution and version that provided it.
    """
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if isinstance(spec, str):
        spec = load_spec_file(spec) if spec.endswith((".json", ".yaml", ".yml")) else {"preset": spec}
    if not isinstance(spec, dict):
        raise SpecError(f"a model spec must be a preset name, a dict or a JSON/YAML path, got {type(spec).__name__}")
    try:
        return _resolve(spec, overrides)
    except UnknownComponentError as exc:
        raise _with_plugin_hint(exc, spec.get("provenance") or []) from None


def _resolve(spec, overrides):
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
    for field in COMPONENT_FIELDS:
        if resolved.get(field) is not None:
            resolved[field] = components.normalize(resolved[field], field)
    resolved["provenance"] = provenance(resolved)
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


def nested_components(entry, field):
    """``(field, kind, entry)`` of the components named inside a component entry: the
    options called after a kind (``attention``) or ``<kind>_<role>`` (``attention_x``)."""
    for key, value in entry.items():
        if value is None or key == "name":
            continue
        kind = next((k for k in KINDS if key == k or key.startswith(k + "_")), None)
        if kind is not None:
            yield f"{field}.{key}", kind, components.normalize(value, f"{field}.{key}")


def provenance(spec):
    """Who provided each named component, nested ones too: a list of dicts with the
    field, kind, the name as written (``name``, possibly an alias), the registered
    (canonical) name, distribution and version."""
    found = []

    def visit(field, kind, entry):
        e = registry.entry(kind, entry["name"])
        found.append({"field": field, "kind": kind, "name": entry["name"], "canonical": e.name,
                      "distribution": e.distribution, "version": e.version})
        for item in nested_components(entry, field):
            visit(*item)

    for field, kind in COMPONENT_FIELDS.items():
        if spec.get(field) is not None:
            visit(field, kind, spec[field])
    return found


def _with_plugin_hint(exc, saved):
    """``exc`` with the distribution that provided the missing component when ``saved``
    (a saved spec's provenance) lists it under that name or as an alias."""
    for item in saved:
        names = {item.get("name"), item.get("canonical")}
        if item.get("kind") == exc.kind and exc.name in names:
            where = f" (spec field {item['field']})" if item.get("field") else ""
            return UnknownComponentError(
                exc.kind, exc.name, exc.known,
                f"This model was saved with {exc.kind} {exc.name!r}{where} from the distribution "
                f"{item['distribution']!r} (version {item['version']}); install that plugin "
                f"package to load it.")
    return exc
