"""Instantiate registered components from spec entries, with option validation.

A component entry in a spec is either a registry name (``"mha-xy"``) or a dict
``{"name": "mha-xy", **options}``. Options are checked against the component's
constructor so that a typo is an error naming the component and its valid options.
"""
import inspect

from taylorformer import registry
from taylorformer.errors import SpecError, close_matches


def normalize(entry, field):
    """``"name"`` or ``{"name": ...}`` -> ``{"name": ..., **options}`` (a new dict)."""
    if isinstance(entry, str):
        return {"name": entry}
    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
        return dict(entry)
    raise SpecError(f"{field} must be a registry name or a dict with a 'name' key, got {entry!r}")


def accepted_options(cls):
    """Keyword names the constructor of ``cls`` accepts, following ``**kwargs`` up the MRO.

    The walk stops at Keras' own classes: their generic kwargs (name, dtype, ...) are
    not spec options.
    """
    names = []
    for klass in cls.__mro__ if isinstance(cls, type) else [cls]:
        init = klass.__dict__.get("__init__") if isinstance(cls, type) else klass
        if init is None:
            continue
        if isinstance(cls, type) and klass.__module__.split(".")[0] in {"keras", "builtins"}:
            break
        params = inspect.signature(init).parameters
        names += [n for n, p in params.items()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self" and n not in names]
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            break
    return names


def check_options(kind, name, cls, options, field, fixed=()):
    """Raise :class:`SpecError` for options the component's constructor does not take."""
    valid = [n for n in accepted_options(cls) if n not in fixed and n != "self"]
    for key in options:
        if key not in valid:
            hint = close_matches(key, valid)
            raise SpecError(f"{field}: {kind} {name!r} has no option {key!r}"
                            + (f"; did you mean {hint[0]!r}?" if hint else "")
                            + f" Valid options: {', '.join(valid)}.")


def build(kind, entry, field, **fixed):
    """Instantiate the component named by ``entry``; ``fixed`` are builder-supplied args."""
    spec = normalize(entry, field)
    name = spec.pop("name")
    cls = registry.get(kind, name)
    check_options(kind, name, cls, spec, field, fixed)
    try:
        return cls(**fixed, **spec)
    except SpecError:
        raise
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{field}: cannot build {kind} {name!r} with {spec}: {exc}") from exc
