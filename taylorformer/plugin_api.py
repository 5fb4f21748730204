"""The versioned plugin contract, checked when a plugin registers a component.

``PLUGIN_API_VERSION`` is the contract this taylorformer implements (``docs/plugins.md``,
"Changes by version"). A plugin says which version it was written for with a module
attribute of its entry-point module::

    TAYLORFORMER_PLUGIN_API = 2      # optional; unspecified means the current version

A version outside :data:`SUPPORTED_VERSIONS` refuses the plugin. Every registered component
is then checked against its kind's contract (:func:`check_component`): the methods its
kind calls must exist and accept the arguments taylorformer passes, read with
``inspect.signature`` (no instance is built, nothing runs). A component that breaks the
contract refuses the plugin at load time, with an error naming the plugin, its
distribution, the component, the method, the expected signature and the version, instead
of a ``TypeError`` on the first batch.

Version 1 attention scores, ``score(self, q, k, q_pos, k_pos)``, are adapted: the registry
registers a subclass (same name, module and docstring, so Keras saves it under the usual
``taylorformer>attention.NAME``) whose ``score`` takes the version 2 arguments and calls
the plugin's with those it accepts; the mask hints ``q_valid`` / ``k_valid`` are simply
not given (they are hints: masked pairs are excluded by the executor either way).

Importing this module imports no TensorFlow; the checks import the attention base class
(and Keras) when they run, which is when plugins load.
"""
import functools
import inspect
import json

#: the plugin API this taylorformer implements
PLUGIN_API_VERSION = 2
#: the versions a plugin may declare (older ones are adapted where :func:`check_component` can)
SUPPORTED_VERSIONS = (1, 2)
#: the module attribute a plugin declares its version with
VERSION_ATTRIBUTE = "TAYLORFORMER_PLUGIN_API"

#: the version 2 attention score, argument by argument, as the executor passes them
SCORE_ARGS = ("q", "k", "q_pos", "k_pos", "q_valid", "k_valid")
SCORE_SIGNATURE = "score(self, q, k, q_pos, k_pos, q_valid, k_valid) -> logits [B, H, tq, tk]"
#: the version 1 score, which :func:`check_component` adapts
SCORE_SIGNATURE_V1 = "score(self, q, k, q_pos, k_pos)"

#: the methods of cached decoding (:mod:`taylorformer.models.decoding`) an encoder implements, all or none
ENCODER_METHODS = ("start_cache", "cached_query", "cached_append")
#: the same for a wrapper
WRAPPER_METHODS = ("start_cache", "query_features", "append")


class ContractProblem(Exception):
    """What is wrong with a component (the registry adds the plugin and distribution)."""


class ExperimentRecord:
    """Base class of what a plugin registers as kind ``experiment``: a published number and
    the protocol that reproduces it, such as the taylorformer-replication package's
    ``taylorformer_replication.Row``. It lives in the contract so that the registry checks
    the kind without importing any plugin's records."""


def declared_version(module):
    """The plugin API version ``module`` declares (:data:`VERSION_ATTRIBUTE`; default the
    current one); :class:`ContractProblem` for a value that is not a supported version."""
    version = getattr(module, VERSION_ATTRIBUTE, PLUGIN_API_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ContractProblem(f"{VERSION_ATTRIBUTE} must be an int (a plugin API version), got {version!r}")
    if version > PLUGIN_API_VERSION:
        raise ContractProblem(
            f"the plugin is written for plugin API {version}; this taylorformer implements plugin API "
            f"{PLUGIN_API_VERSION} (versions {SUPPORTED_VERSIONS[0]}-{SUPPORTED_VERSIONS[-1]} load): "
            f"upgrade taylorformer")
    if version not in SUPPORTED_VERSIONS:
        raise ContractProblem(
            f"the plugin is written for plugin API {version}; this taylorformer loads versions "
            f"{SUPPORTED_VERSIONS[0]}-{SUPPORTED_VERSIONS[-1]} (docs/plugins.md, 'Changes by version')")
    return version


def draws_from_sample(dataset):
    """Mark a task base class's ``dataset`` method as drawing its batches from
    ``self.sample(rng, batch_size, split)`` (:meth:`taylorformer.task.Task.dataset`): the
    task contract then asks a class that inherits this ``dataset`` to implement ``sample``."""
    dataset.draws_from_sample = True
    return dataset


def check_component(kind, obj, version=PLUGIN_API_VERSION):
    """``obj`` as the registry should hold it: unchanged, or adapted from an older contract
    (attention scores of version 1). :class:`ContractProblem` says what breaks the contract
    of ``kind`` for a plugin written for ``version``."""
    check = _CHECKS.get(kind)
    return obj if check is None else check(obj, version)


# ----------------------------------------------------------------------------- helpers
def _signature(cls, method):
    """``(signature without self, shown text)`` of ``cls.method``; ``None`` where Python
    cannot read it (a builtin): such a method is not checked."""
    static = inspect.getattr_static(cls, method)
    func = getattr(cls, method)
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if not isinstance(static, (staticmethod, classmethod)) and params:
        params = params[1:]  # self
    shown = f"{cls.__name__}.{method}{sig}"
    return sig.replace(parameters=params), shown


def _binds(sig, *args, **kwargs):
    try:
        sig.bind(*args, **kwargs)
        return True
    except TypeError:
        return False


def _require(cls, method, expected, version, *args, **kwargs):
    """``cls.method`` exists, is callable and accepts ``args`` / ``kwargs``, else a
    :class:`ContractProblem` naming the method, what it is and the ``expected`` signature."""
    if not callable(getattr(cls, method, None)):
        raise ContractProblem(f"{cls.__name__} has no method {method!r}: plugin API {version} expects "
                              f"{expected}")
    read = _signature(cls, method)
    if read is not None and not _binds(read[0], *args, **kwargs):
        raise ContractProblem(f"{read[1]} does not accept the arguments taylorformer passes: plugin API "
                              f"{version} expects {expected}")


def _flag(cls, name):
    value = getattr(cls, name, False)
    if not isinstance(value, bool):
        raise ContractProblem(f"{cls.__name__}.{name} must be True or False, got {value!r}")
    return value


def _constructor(cls, version, **fixed):
    """The class accepts the builder-supplied keyword arguments ``fixed``."""
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return
    try:
        sig.bind_partial(**fixed)
    except TypeError:
        raise ContractProblem(f"{cls.__name__}{sig} cannot be built with {', '.join(fixed)} (plugin API "
                              f"{version}: the builder passes them as keywords)") from None


# ----------------------------------------------------------------------------- per kind
def _attention(cls, version):
    from taylorformer.attention import Attention

    if not issubclass(cls, Attention):
        raise ContractProblem(f"{cls.__name__} must subclass taylorformer.attention.Attention (plugin API "
                              f"{version}: an attention overrides the contract's methods only)")
    cls = _adapted_score(cls, version)
    _require(cls, "position_features", "position_features(self, positions)", version, None)
    _require(cls, "build_score", "build_score(self, q_pos_shape)", version, None)
    _require(cls, "pair_floats", "pair_floats(self) -> int", version)
    _flag(cls, "position_gradients")
    if _flag(cls, "updates_positions"):
        _require(cls, "position_update", "position_update(self, weights, q_pos, k_pos) -> [B, tq, tk, P]",
                 version, None, None, None)
    return cls


def score_call(sig):
    """How to call a score of signature ``sig`` (self excluded) with :data:`SCORE_ARGS`:
    ``(n positional, names given by keyword)``; ``None`` if no call fits. A score that takes
    six positional arguments is called as it is; otherwise its first four get ``q, k, q_pos,
    k_pos`` (version 1), a mask hint only a parameter of its name (``q_valid``, ``k_valid``,
    or ``**kwargs``), and any other parameter must have a default."""
    params = list(sig.parameters.values())
    if _binds(sig, *SCORE_ARGS):
        return len(SCORE_ARGS), ()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    n = min(len(positional), 4)  # version 1 passed four, whatever their names
    while n < len(SCORE_ARGS) and n < len(positional) and positional[n].name == SCORE_ARGS[n]:
        n += 1  # a mask hint it takes in its place, by its name
    by_name = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    open_kwargs = any(p.kind == p.VAR_KEYWORD for p in params)
    keywords = tuple(a for a in SCORE_ARGS[n:] if a in by_name or open_kwargs)
    if n < 4 or not _binds(sig, *SCORE_ARGS[:n], **{a: a for a in keywords}):
        return None
    return n, keywords


def _adapted_score(cls, version):
    read = _signature(cls, "score") if callable(getattr(cls, "score", None)) else None
    if read is None:
        raise ContractProblem(f"{cls.__name__}.score is not a readable method: plugin API {version} "
                              f"expects {SCORE_SIGNATURE}")
    sig, shown = read
    call = score_call(sig)
    if call is None:
        raise ContractProblem(
            f"{shown} does not accept the arguments the attention executor passes: plugin API "
            f"{PLUGIN_API_VERSION} expects {SCORE_SIGNATURE} (plugin API 1: {SCORE_SIGNATURE_V1}, "
            f"which is adapted)")
    if call == (len(SCORE_ARGS), ()):
        return cls
    return _score_adapter(cls, *call)


def _score_adapter(cls, positional, keywords):
    """A subclass of ``cls`` whose ``score`` takes the version 2 arguments and calls
    ``cls``'s with the first ``positional`` of them and ``keywords`` by name."""
    def score(self, q, k, q_pos=None, k_pos=None, q_valid=None, k_valid=None):
        given = (q, k, q_pos, k_pos, q_valid, k_valid)
        named = dict(zip(SCORE_ARGS, given))
        return super(adapted, self).score(*given[:positional], **{a: named[a] for a in keywords})

    score.__doc__ = (f"The plugin's score called as plugin API {PLUGIN_API_VERSION} calls it (only the "
                     f"arguments it accepts; see taylorformer.plugin_api).")
    adapted = type(cls)(cls.__name__, (cls,), {
        "score": score, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__, "adapted_score": (positional, keywords)})
    return adapted


def _encoder(cls, version):
    import keras

    if not issubclass(cls, keras.layers.Layer):
        raise ContractProblem(f"{cls.__name__} must be a Keras layer class (plugin API {version})")
    _constructor(cls, version, dim_x=1, dim_y=1)
    features = _flag(cls, "reads_wrapper_features")
    _flag(cls, "causal")
    _require(cls, "call", "call(self, batch" + (", features=None)" if features else ")"), version, {},
             **({"features": None} if features else {}))
    present = [m for m in ENCODER_METHODS if callable(getattr(cls, m, None))]
    if present and len(present) < len(ENCODER_METHODS):
        missing = [m for m in ENCODER_METHODS if m not in present]
        raise ContractProblem(f"{cls.__name__} implements {', '.join(present)} of cached decoding but not "
                              f"{', '.join(missing)} (plugin API {version}: all of "
                              f"{', '.join(ENCODER_METHODS)}, or none)")
    return cls


def _wrapper(cls, version):
    _constructor(cls, version, dim_x=1, dim_y=1)
    _require(cls, "features", "features(self, batch, causal) -> features", version, {}, False)
    _require(cls, "fold", "fold(self, batch, features) -> batch", version, {}, None)
    _require(cls, "folded_dims", "folded_dims(self) -> (dim_x, dim_y)", version)
    _require(cls, "adjust", "adjust(self, params, features) -> params", version, {}, None)
    _require(cls, "get_config", "get_config(self) -> dict", version)
    return cls


def _likelihood(cls, version):
    _require(cls, "num_params", "num_params(self, dim_y) -> int", version, 1)
    _require(cls, "parameters", "parameters(self, raw [B, N, P]) -> dict", version, None)
    _require(cls, "distribution", "distribution(self, params) -> tfd.Distribution", version, {})
    _require(cls, "get_config", "get_config(self) -> dict", version)
    return cls


def _defined_by(cls, name):
    """The class in ``cls``'s MRO whose body defines ``name`` (None: none does)."""
    return next((klass for klass in getattr(cls, "__mro__", ()) if name in vars(klass)), None)


def _task(obj, version):
    cls = obj.func if isinstance(obj, functools.partial) else obj
    if isinstance(obj, functools.partial):
        try:
            inspect.signature(cls).bind_partial(*obj.args, **obj.keywords)
        except (TypeError, ValueError) as exc:
            raise ContractProblem(f"the preset's arguments do not fit {cls.__name__}: {exc}") from None
    _require(cls, "dataset", "dataset(self, split, batch_size, seed=0, num_batches=None, start=0)", version,
             "train", 1, seed=0, num_batches=None, start=0)
    _require(cls, "get_config", "get_config(self) -> dict", version)
    base = _defined_by(cls, "dataset")
    if getattr(cls.dataset, "draws_from_sample", False):  # Task.dataset (see draws_from_sample)
        if _defined_by(cls, "sample") is base:
            raise ContractProblem(f"{cls.__name__} subclasses {base.__module__}.{base.__qualname__} but "
                                  f"implements neither sample() nor dataset(): plugin API {version} expects "
                                  f"sample(self, rng, batch_size, split)")
        _require(cls, "sample", "sample(self, rng, batch_size, split)", version, None, 1, "train")
    return obj


def _model(spec, version):
    bad = [key for key in spec if not isinstance(key, str)]
    if bad:
        raise ContractProblem(f"a model preset's keys must be strings, got {bad[0]!r}")
    for key, value in spec.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ContractProblem(f"a model preset is JSON data (plugin API {version}); its {key!r} is not: "
                                  f"{exc}") from None
    if "description" in spec and not isinstance(spec["description"], str):
        raise ContractProblem(f"a model preset's 'description' must be a string, got {spec['description']!r}")
    return spec


_CHECKS = {"attention": _attention, "encoder": _encoder, "wrapper": _wrapper, "likelihood": _likelihood,
           "task": _task, "model": _model}
