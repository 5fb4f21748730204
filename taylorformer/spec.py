"""The model spec: merge, validation and provenance (this module imports no model).

A spec names registry components::

    {"preset": "tnp-d",                      # optional: start from a registered preset
     "kind": "conditional",                  # model class (see MODEL_KINDS)
     "dim_x": 1, "dim_y": 1,
     "encoder": {"name": "transformer", "attention": "mha-xy", "layers": 5, ...},
     "head": {"width": 128, "hidden_layers": 2},
     "likelihood": {"name": "normal", "min_scale": 0.001},
     "wrapper": null,                        # e.g. {"name": "local-taylor", ...}
     "dtype_policy": null,                   # e.g. "mixed_bfloat16" for the network
     "observed_flags": null,                 # per-output observed flags in the tokens
                                             # (null: on when dim_y > 1)
     "standardise": null,                    # "global" | "window" | "last": outputs standardised
     "standardise_min_scale": 0.01,          # by each window's context ("last": shifted by its
                                             # last value; null: the task's default, else
                                             # "global"; window_standardisation)
     "init": "keras"}                        # initial linear weights: "keras" | "fan-in-uniform"
                                             # (models.initialisation)

:func:`resolve_spec` fills defaults, validates keys and types, and records which
distribution provided each component, nested ones included (``provenance``); the
resolved spec is the model's Keras config, so ``model.save`` /
:func:`taylorformer.load_model` rebuild it exactly. A component option that names a
nested component is called after its kind: ``attention`` or ``attention_<role>``. A key
renamed since a spec was written (:data:`RENAMED_KEYS`: ``normalise`` is now
``standardise``, so that "normalise" names only the data units of
:class:`taylorformer.normaliser.Normaliser`) is read under its new name with a
``DeprecationWarning``.
"""
import copy
import functools
import json
import os
import re
import warnings

from taylorformer import components, registry
from taylorformer.checks import check_choice, check_size, check_size_bounds, check_widths
from taylorformer.errors import SpecError, UnknownComponentError, close_matches
from taylorformer.hookspecs import KINDS

MODEL_KINDS = ("conditional", "autoregressive", "latent")

#: spec ``standardise``: the network's output units (:mod:`taylorformer.models.window_standardisation`)
STANDARDISE_MODES = ("global", "window", "last")
#: the default floor of a window's scale (spec ``standardise_min_scale``), in the batch's units
#: (a task's z-scores: 1% of the training rows' std), so a constant context stays finite
DEFAULT_MIN_SCALE = 0.01
#: the floors allowed, in the same units: a window's scale divides its targets and
#: multiplies the predicted scales in float32; at 1e-6 a target 1e6 z-scores from a
#: constant context stays finite, above 1e6 the floor would be every window's scale (no
#: per-window standardisation left), and near float32's limit the predictions overflow
MIN_SCALE_RANGE = (1e-6, 1e6)

DEFAULTS = {
    "kind": "conditional",
    "dim_x": 1,
    "dim_y": 1,
    "head": {"width": 128, "hidden_layers": 2},
    "likelihood": {"name": "normal"},
    "wrapper": None,
    "dtype_policy": None,
    "observed_flags": None,
    "standardise": None,
    "standardise_min_scale": DEFAULT_MIN_SCALE,
    "init": "keras",
    "description": "",
}
#: spec ``init`` (:mod:`taylorformer.models.initialisation`, which imports Keras)
INIT_SCHEMES = ("keras", "fan-in-uniform")
TOP_LEVEL_KEYS = set(DEFAULTS) | {"encoder", "preset", "provenance"}
COMPONENT_FIELDS = {"encoder": "encoder", "likelihood": "likelihood", "wrapper": "wrapper"}
HEAD_KEYS = {"width", "hidden_layers", "activation"}
#: spec keys renamed, earlier name -> current; specs written before (files, saved models,
#: task defaults) are read under the current name with a DeprecationWarning
RENAMED_KEYS = {"normalise": "standardise", "normalise_min_scale": "standardise_min_scale"}
#: Keras dtype policies a network may run under (``dtype_policy``, ``--dtype-policy``)
DTYPE_POLICIES = ("float32", "float64", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


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


def load_spec_file(path, what="spec file"):
    """Read a JSON or YAML mapping (YAML without Python tags: ``yaml.safe_load``); a file
    that cannot be read or parsed is a :class:`SpecError` naming it (``what``) and the line."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{what} {path}: cannot read it ({exc})") from exc
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
            if isinstance(exc, yaml.constructor.ConstructorError):
                problem += "; only plain YAML data is read: Python tags such as !!python/object are refused"
            raise SpecError(f"{what} {path}{where}: invalid YAML ({problem})") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{what} {path} line {exc.lineno}: invalid JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{what} {path} must hold a mapping, got {type(data).__name__}")
    return data


def resolve_spec(spec, task_defaults=None, **overrides):
    """Complete, validated spec dict (JSON-serialisable) from any accepted form.

    ``task_defaults``: values a task prefers for keys the spec leaves at null (e.g. a
    forecasting task's ``{"standardise": "window"}``); the spec and ``overrides`` win.

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
        return _resolve(spec, overrides, task_defaults or {})
    except UnknownComponentError as exc:
        raise _with_plugin_hint(exc, spec.get("provenance") or []) from None


def current_keys(spec, owner="spec"):
    """``spec`` with each key of :data:`RENAMED_KEYS` under its current name, with a
    ``DeprecationWarning`` naming it; giving both names is a :class:`SpecError`."""
    earlier = [key for key in RENAMED_KEYS if key in spec]
    if not earlier:
        return spec
    spec = dict(spec)
    for key in earlier:
        new = RENAMED_KEYS[key]
        if new in spec:
            raise SpecError(f"{owner} gives both {key!r} and {new!r}; {key!r} is the earlier name of "
                            f"{new!r}: keep {new!r} only")
        warnings.warn(f"{owner}: {key!r} is now called {new!r}; write {new!r}", DeprecationWarning, stacklevel=4)
        spec[new] = spec.pop(key)
    return spec


def _resolve(spec, overrides, task_defaults):
    spec = deep_merge(current_keys(spec), current_keys(overrides, "spec overrides"))
    task_defaults = current_keys(task_defaults, "task model defaults")
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
        spec = deep_merge(current_keys(base, f"model preset {name!r}"), spec)
    saved = spec.pop("provenance", None) is not None
    if saved:  # a spec resolved before observed flags existed (a saved model or run) had none
        spec.setdefault("observed_flags", False)
    resolved = deep_merge(DEFAULTS, spec)
    _check_types(resolved)
    if resolved["observed_flags"] is None:
        resolved["observed_flags"] = resolved["dim_y"] > 1
    if resolved["standardise"] is None:
        resolved["standardise"] = task_defaults.get("standardise") or "global"
    check_standardise_options(resolved["standardise"], resolved["standardise_min_scale"], saved=saved)
    for field in COMPONENT_FIELDS:
        if resolved.get(field) is not None:
            resolved[field] = components.normalize(resolved[field], field)
    resolved["provenance"] = provenance(resolved)
    return resolved


def _check_types(spec):
    if "encoder" not in spec:
        raise SpecError("spec has no 'encoder'; name one (e.g. 'transformer') or use a preset")
    check_choice("spec", "kind", spec["kind"], MODEL_KINDS)
    for key in ("dim_x", "dim_y"):
        check_size("spec", key, spec[key])
    head = spec["head"]
    if not isinstance(head, dict) or set(head) - HEAD_KEYS:
        raise SpecError(f"spec 'head' must be a dict with keys from {sorted(HEAD_KEYS)}, got {head!r}")
    check_widths("spec 'head'", "width", head.get("width", 128))
    check_size("spec 'head'", "hidden_layers", head.get("hidden_layers", 2), minimum=0)
    check_activation("spec 'head'", "activation", head.get("activation", "relu"))
    check_dtype_policy("spec", "dtype_policy", spec["dtype_policy"])
    check_choice("spec", "init", spec["init"], INIT_SCHEMES)
    if not (spec["observed_flags"] is None or isinstance(spec["observed_flags"], bool)):
        raise SpecError(f"spec: observed_flags must be true, false or null (on when dim_y > 1), "
                        f"got {spec['observed_flags']!r}")
    if not isinstance(spec["description"], str):
        raise SpecError(f"spec: description must be a string, got {spec['description']!r}")


def check_standardise_options(mode, min_scale, owner="spec", saved=False):
    """SpecError unless ``mode`` is one of :data:`STANDARDISE_MODES` and ``min_scale`` a
    number in :data:`MIN_SCALE_RANGE`, and, with ``global`` (which uses no floor), the
    default :data:`DEFAULT_MIN_SCALE`. A ``saved`` spec (a model file's, with ``global``)
    keeps whatever floor it was saved with: it has no effect, and the file loads."""
    if mode not in STANDARDISE_MODES:
        raise SpecError(f"{owner}: standardise must be one of {list(STANDARDISE_MODES)} (window: each window "
                        f"standardised by its own context; last: shifted by its last context value), got {mode!r}")
    if mode == "global" and saved:
        return
    low, high = MIN_SCALE_RANGE
    if isinstance(min_scale, bool) or not isinstance(min_scale, (int, float)) or not low <= min_scale <= high:
        raise SpecError(f"{owner}: standardise_min_scale must be a number in [{low:g}, {high:g}] (the floor of "
                        f"a window's std, in the batch's units), got {min_scale!r}")
    if mode == "global" and min_scale != DEFAULT_MIN_SCALE:
        raise SpecError(f"{owner}: standardise_min_scale {min_scale!r} has no effect with standardise 'global' "
                        "(only a window's own std is floored): set standardise 'window' or leave "
                        "standardise_min_scale out")


def check_saved_spec(spec, owner):
    """SpecError (naming ``owner``) where a resolved spec (a model file's) fails a check
    that loading applies and that needs no component: kind, dims, the standardise options
    and every size option (:func:`taylorformer.checks.check_size_bounds`), so that
    ``taylorformer info`` never shows a spec that loading refuses."""
    spec = current_keys(spec, owner)
    check_choice(owner, "kind", spec.get("kind", DEFAULTS["kind"]), MODEL_KINDS)
    for key in ("dim_x", "dim_y"):
        check_size(owner, key, spec.get(key, DEFAULTS[key]))
    check_standardise_options(spec.get("standardise") or "global",
                              spec.get("standardise_min_scale", DEFAULT_MIN_SCALE), owner, saved=True)
    check_size_bounds(owner, spec)


# ---------------------------------------------------------------- option value checks
# (the generic ones are in taylorformer.checks)

@functools.lru_cache(maxsize=None)
def activation_names():
    """Names of the Keras activations (``keras.activations.get`` accepts them)."""
    import keras

    return tuple(sorted(n for n in dir(keras.activations) if not n.startswith("_")
                  and n not in ("get", "serialize", "deserialize") and callable(getattr(keras.activations, n))))


def check_activation(owner, key, value):
    """A Keras activation name, or None (linear)."""
    return None if value is None else check_choice(owner, key, value, activation_names())


def check_dtype_policy(owner, key, value):
    """None (the global policy) or one of :data:`DTYPE_POLICIES`."""
    return None if value is None else check_choice(owner, key, value, DTYPE_POLICIES)


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


# What a saved provenance may contribute to a message: a PEP 508 distribution name, a
# version and a spec field. Anything else is never printed (it could be shell advice).
DISTRIBUTION_NAME = r"([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])"
VERSION = r"[A-Z0-9][A-Z0-9.+!_-]*"
FIELD = r"[A-Z0-9_.]+"


def _printable(pattern, value):
    """Whether ``value`` is a string that matches ``pattern`` in full (case-insensitive)."""
    return isinstance(value, str) and re.fullmatch(pattern, value, re.IGNORECASE) is not None


def _with_plugin_hint(exc, saved):
    """``exc`` with the distribution that provided the missing component when ``saved``
    (a saved spec's provenance) lists it under that name or as an alias. A distribution
    name that is not valid (PEP 508) is reported as invalid provenance, never as advice."""
    for item in saved if isinstance(saved, list) else []:
        if not isinstance(item, dict) or item.get("kind") != exc.kind \
                or exc.name not in (item.get("name"), item.get("canonical")):
            continue
        field, dist, version = item.get("field"), item.get("distribution"), item.get("version")
        where = f" (spec field {field})" if _printable(FIELD, field) else ""
        if not _printable(DISTRIBUTION_NAME, dist):
            hint = (f"The model's saved provenance for {exc.kind} {exc.name!r}{where} is invalid: "
                    f"it does not name a valid distribution (PEP 508), so the file may be "
                    f"corrupt or tampered with; no install advice is given.")
        else:
            hint = (f"This model was saved with {exc.kind} {exc.name!r}{where} from the "
                    f"distribution {dist!r}" + (f" (version {version})" if _printable(VERSION, version) else "")
                    + "; install that plugin package to load it.")
        return UnknownComponentError(exc.kind, exc.name, exc.known, hint)
    return exc
