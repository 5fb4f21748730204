"""The plugin registry: one table per component kind, filled through entry points.

Every plugin, built-in or third-party, is a module named by an entry point in the
group ``taylorformer``. Loading a plugin means: import it, register it with a pluggy
``PluginManager``, validate its hook names (``check_pending``), then call each of its
hooks with a ``register`` callback bound to the plugin's distribution.

A plugin that fails (import error, exception in a hook, misspelled hook) is recorded
in :func:`failures` and skipped; other plugins and the CLI keep working.

Environment variables:

``TAYLORFORMER_STRICT_PLUGINS=1``
    any plugin failure or name conflict raises :class:`PluginLoadError` at load time.
``TAYLORFORMER_BLOCK_PLUGINS=a,b``
    skip the plugins whose entry-point name or distribution name is listed.

Python API (module level, on a lazily loaded default registry)::

    registry.get("attention", "mha")      # the component, or UnknownComponentError
    registry.entry("task", "gp")          # Entry with distribution/version/description
    registry.names("likelihood")          # sorted names (aliases excluded)
    registry.entries()                    # every Entry
    registry.failures()                   # list of PluginFailure
"""
import dataclasses
import importlib.metadata as importlib_metadata
import os
import traceback
import warnings

import pluggy

from taylorformer import hookspecs
from taylorformer.errors import (
    PluginLoadError,
    RegistryConflictError,
    UnknownComponentError,
    close_matches,
)

ENTRY_POINT_GROUP = "taylorformer"
STRICT_ENV = "TAYLORFORMER_STRICT_PLUGINS"
BLOCK_ENV = "TAYLORFORMER_BLOCK_PLUGINS"
KERAS_PACKAGE = "taylorformer"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One registered component."""

    kind: str
    name: str
    obj: object
    plugin: str
    distribution: str
    version: str
    description: str
    aliases: tuple = ()
    override: bool = False

    def as_dict(self):
        """JSON-friendly summary (without the object itself)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "aliases": list(self.aliases),
            "plugin": self.plugin,
            "distribution": self.distribution,
            "version": self.version,
            "description": self.description,
        }


@dataclasses.dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded, or a conflict between two plugins."""

    plugin: str
    distribution: str
    version: str
    stage: str  # "import", "hooks", "hook:<name>", "conflict"
    error: str
    details: str = ""

    def as_dict(self):
        return dataclasses.asdict(self)


def _description(obj, given):
    """One-line description: the given text, a preset's "description", or the docstring."""
    if not given:
        given = obj.get("description") if isinstance(obj, dict) else getattr(obj, "__doc__", None)
    lines = (given or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def _make_keras_serializable(kind, name, obj):
    """Register Keras layer/model classes under ``taylorformer>{kind}.{name}``."""
    if not isinstance(obj, type):
        return
    import keras  # local import: listing plugins must not require Keras first

    if issubclass(obj, keras.layers.Layer):
        keras.saving.register_keras_serializable(package=KERAS_PACKAGE, name=f"{kind}.{name}")(obj)


class Registry:
    """Component tables filled from a list of plugins (modules with hook impls)."""

    def __init__(self, strict=None, blocked=None):
        self.strict = _env_flag(STRICT_ENV) if strict is None else strict
        self.blocked = _env_list(BLOCK_ENV) if blocked is None else set(blocked)
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._tables = {kind: {} for kind in hookspecs.KINDS}
        self._aliases = {kind: {} for kind in hookspecs.KINDS}
        self._conflicts = {}  # (kind, name) -> RegistryConflictError
        self._failures = []
        self._plugin_dist = {}  # plugin name -> (distribution, version)
        self.blocked_plugins = []

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_entry_points(cls, strict=None, blocked=None):
        """Registry of every plugin declared in the ``taylorformer`` entry-point group."""
        reg = cls(strict=strict, blocked=blocked)
        eps = sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=_ep_sort_key)
        for ep in eps:
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else "unknown"
            version = dist.version if dist is not None else "unknown"
            if ep.name in reg.blocked or dist_name in reg.blocked:
                reg.blocked_plugins.append(ep.name)
                continue
            try:
                module = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure is reported
                reg._fail(ep.name, dist_name, version, "import", exc)
                continue
            reg.add_plugin(module, ep.name, dist_name, version)
        return reg

    def add_plugin(self, module, plugin_name, distribution="unknown", version="unknown"):
        """Register one plugin module and run its hooks; failures are recorded."""
        if plugin_name in self._plugin_dist:
            other = self._plugin_dist[plugin_name][0]
            self._fail(plugin_name, distribution, version, "hooks", PluginLoadError(
                f"plugin name {plugin_name!r} is already used by {other}; rename the entry point"))
            return
        try:
            self.pm.register(module, name=plugin_name)
            self.pm.check_pending()
        except Exception as exc:  # noqa: BLE001 - pluggy validation errors and others
            if self.pm.is_registered(module):
                self.pm.unregister(module)
            self._fail(plugin_name, distribution, version, "hooks", exc, _hook_hint(module))
            return
        self._plugin_dist[plugin_name] = (distribution, version)
        for hook_name, kind in hookspecs.HOOK_KINDS.items():
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                if impl.plugin_name != plugin_name:
                    continue
                added = []
                register = self._register_callback(kind, plugin_name, distribution, version, added)
                try:
                    impl.function(register)
                except RegistryConflictError:
                    raise  # only raised in strict mode; already names both plugins
                except Exception as exc:  # noqa: BLE001 - a broken hook must not break others
                    for name in added:
                        self._remove(kind, name, plugin_name)
                    self._fail(plugin_name, distribution, version, f"hook:{hook_name}", exc)

    def _register_callback(self, kind, plugin, distribution, version, added):
        def register(name, obj, *, description=None, aliases=(), override=False):
            if not isinstance(name, str) or not name:
                raise TypeError(f"{kind} name must be a non-empty string, got {name!r}")
            entry = Entry(kind, name, obj, plugin, distribution, version,
                          _description(obj, description), tuple(aliases), bool(override))
            self._insert(entry)
            added.append(name)
            _make_keras_serializable(kind, name, obj)
            return obj

        return register

    def _insert(self, entry):
        table = self._tables[entry.kind]
        old = table.get(entry.name)
        if old is not None and old.plugin != entry.plugin:
            if entry.override and not old.override:
                pass  # the newcomer replaces the old component
            elif old.override and not entry.override:
                return  # the existing override stays
            else:
                err = RegistryConflictError(
                    f"{entry.kind} {entry.name!r} is registered by two plugins: "
                    f"{old.distribution} (plugin {old.plugin!r}) and {entry.distribution} "
                    f"(plugin {entry.plugin!r}); uninstall one, block one with "
                    f"{BLOCK_ENV}, or pass override=True in the intended one")
                self._conflicts[(entry.kind, entry.name)] = err
                self._failures.append(PluginFailure(entry.plugin, entry.distribution, entry.version,
                                                    "conflict", str(err)))
                if self.strict:
                    raise err
                warnings.warn(str(err), RuntimeWarning, stacklevel=4)
                return
        table[entry.name] = entry
        for alias in entry.aliases:
            self._aliases[entry.kind][alias] = entry.name

    def _remove(self, kind, name, plugin):
        entry = self._tables[kind].get(name)
        if entry is not None and entry.plugin == plugin:
            del self._tables[kind][name]
            for alias in entry.aliases:
                self._aliases[kind].pop(alias, None)

    def _fail(self, plugin, distribution, version, stage, exc, hint=""):
        details = "".join(traceback.format_exception(exc))
        message = f"{type(exc).__name__}: {exc}{hint}"
        failure = PluginFailure(plugin, distribution, version, stage, message, details)
        self._failures.append(failure)
        text = f"taylorformer plugin {plugin!r} from {distribution} {version} failed ({stage}): {message}"
        if self.strict:
            raise PluginLoadError(text) from exc
        warnings.warn(text, RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ queries
    def entry(self, kind, name):
        """The :class:`Entry` registered as ``name`` (or an alias) of ``kind``."""
        if kind not in self._tables:
            raise UnknownComponentError("component kind", kind, self._tables)
        if (kind, name) in self._conflicts:
            raise self._conflicts[(kind, name)]
        canonical = self._aliases[kind].get(name, name)
        try:
            return self._tables[kind][canonical]
        except KeyError:
            raise UnknownComponentError(kind, name, self._known(kind), self._failure_hint()) from None

    def get(self, kind, name):
        """The registered component object."""
        return self.entry(kind, name).obj

    def names(self, kind):
        return sorted(self._tables[kind])

    def entries(self, kind=None):
        kinds = [kind] if kind else hookspecs.KINDS
        return [self._tables[k][n] for k in kinds for n in sorted(self._tables[k])]

    def failures(self):
        return list(self._failures)

    def distribution_of(self, kind, name):
        entry = self.entry(kind, name)
        return entry.distribution, entry.version

    def _known(self, kind):
        return list(self._tables[kind]) + list(self._aliases[kind])

    def _failure_hint(self):
        if not self._failures:
            return ""
        names = ", ".join(sorted({f.plugin for f in self._failures}))
        return f"(Some plugins failed to load: {names}; run `taylorformer plugins`.)"


def _env_flag(var):
    return os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}


def _env_list(var):
    return {item.strip() for item in os.environ.get(var, "").split(",") if item.strip()}


def _ep_sort_key(ep):
    dist = getattr(ep, "dist", None)
    # built-ins first so that third-party overrides apply on top of them
    builtin = dist is not None and dist.metadata["Name"] == "taylorformer"
    return (not builtin, ep.name)


def _hook_hint(module):
    """Suggest the right hook name for misspelled hook implementations."""
    hints = []
    for attr in dir(module):
        fn = getattr(module, attr)
        if callable(fn) and hasattr(fn, hookspecs.PROJECT + "_impl") and attr not in hookspecs.HOOK_KINDS:
            match = close_matches(attr, hookspecs.HOOK_KINDS)
            if match:
                hints.append(f"{attr!r} -> did you mean {match[0]!r}?")
    return ("; " + "; ".join(hints)) if hints else ""


# ---------------------------------------------------------------------- default
_default = None


def default():
    """The process-wide registry, loaded from entry points on first use."""
    global _default
    if _default is None:
        _default = Registry.from_entry_points()
    return _default


def reload(strict=None, blocked=None):
    """Rebuild the default registry (after installing a plugin, or in tests)."""
    global _default
    _default = Registry.from_entry_points(strict=strict, blocked=blocked)
    return _default


def get(kind, name):
    return default().get(kind, name)


def entry(kind, name):
    return default().entry(kind, name)


def names(kind):
    return default().names(kind)


def entries(kind=None):
    return default().entries(kind)


def failures():
    return default().failures()
