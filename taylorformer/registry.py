"""The plugin registry: one table per component kind, filled through entry points.

Every plugin, built-in or third-party, is a module named by an entry point in the
group ``taylorformer``. Loading a plugin means: import it, read the plugin API version it
declares (:mod:`taylorformer.plugin_api`), register it with a pluggy ``PluginManager``,
validate its hook names (``check_pending``), then call each of its hooks with a
``register`` callback bound to the plugin's distribution; each component registered is
checked against its kind's contract there (an attention score written for plugin API 1
is adapted), not on its first batch.

Loading a plugin is all or nothing: its registrations are staged and committed only
when the import and every hook succeeded. Any exception (``SystemExit`` included) or
a rejected registration (a name conflict, an object of the wrong type) leaves the
tables and Keras' serialization registrations exactly as before; the plugin is
recorded in :func:`failures` and the other plugins and the CLI keep working. A
``KeyboardInterrupt`` is rolled back too, then re-raised.

Names and aliases share one namespace per kind: a name or alias that another
component already holds is a conflict, and the holder keeps it. ``override=True``
replaces the component registered under that canonical name by another plugin (the
newcomer takes its aliases too).

Environment variables:

``TAYLORFORMER_STRICT_PLUGINS=1``
    a plugin failure raises :class:`PluginLoadError`, a name conflict
    :class:`RegistryConflictError`, a broken contract :class:`PluginContractError` (a
    ``PluginLoadError``), at load time.
``TAYLORFORMER_BLOCK_PLUGINS=a,b``
    skip the plugins whose entry-point name or distribution name is listed (command
    plugins too: :func:`command_plugins`).

Python API (module level, on a lazily loaded default registry)::

    registry.get("attention", "mha")      # the component, or UnknownComponentError
    registry.entry("task", "gp")          # Entry with distribution/version/description
    registry.names("likelihood")          # sorted names (aliases excluded)
    registry.entries()                    # every Entry
    registry.failures()                   # list of PluginFailure
"""
import dataclasses
import functools
import importlib.metadata as importlib_metadata
import os
import traceback
import warnings

import pluggy

from taylorformer import hookspecs, plugin_api
from taylorformer.errors import (
    PluginContractError,
    PluginLoadError,
    RegistryConflictError,
    UnknownComponentError,
    close_matches,
)

ENTRY_POINT_GROUP = "taylorformer"
#: the modules that add commands to the command line (hook ``register_commands``): apart
#: from the components' group, because the command line imports them to build its parser
COMMANDS_GROUP = "taylorformer.commands"
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
    plugin_api: int = plugin_api.PLUGIN_API_VERSION  # the version its plugin was written for

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
            "plugin_api": self.plugin_api,
        }


@dataclasses.dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded, or that was rejected for a name conflict."""

    plugin: str
    distribution: str
    version: str
    stage: str  # "import", "contract", "hooks", "hook:<name>", "conflict"
    error: str
    details: str = ""

    def as_dict(self):
        return dataclasses.asdict(self)


class _Rejected(Exception):
    """A registration the registry refuses: ``error`` is what the user sees, ``stage`` the
    failure stage to report (``None``: the hook that made it)."""

    def __init__(self, error, stage):
        super().__init__(str(error))
        self.error, self.stage = error, stage


def _description(obj, given):
    """One-line description: the given text, a preset's "description", or the docstring."""
    if not given:
        given = obj.get("description") if isinstance(obj, dict) else getattr(obj, "__doc__", None)
    lines = (given or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def _type_problem(kind, obj):
    """What is wrong with ``obj`` as a component of ``kind`` (``None`` when it fits)."""
    if kind == "model":
        return None if isinstance(obj, dict) else "a model preset must be a spec dict"
    if kind == "experiment":
        return None if isinstance(obj, plugin_api.ExperimentRecord) else \
            "an experiment must be a taylorformer.plugin_api.ExperimentRecord (taylorformer_replication.Row)"
    if kind == "task":
        cls = obj.func if isinstance(obj, functools.partial) else obj
        return None if isinstance(cls, type) else "a task must be a class or a functools.partial of one"
    return None if isinstance(obj, type) else f"{kind} components must be classes"


def _keras_maps():
    """Keras' global serialization maps: registered name -> object, object -> name
    (imported here: the registry itself loads without TensorFlow, for a fast CLI)."""
    from taylorformer.tf_compat import keras_serialization_maps

    return keras_serialization_maps()


def _make_keras_serializable(entry):
    """Register a Keras layer class under ``taylorformer>{kind}.{name}``. A class already
    registered under another name keeps it: a plugin cannot rename a built-in class."""
    import keras

    obj, key = entry.obj, f"{KERAS_PACKAGE}>{entry.kind}.{entry.name}"
    if isinstance(obj, type) and issubclass(obj, keras.layers.Layer) and _keras_maps()[1].get(obj, key) == key:
        keras.saving.register_keras_serializable(package=KERAS_PACKAGE, name=f"{entry.kind}.{entry.name}")(obj)


class _Staging:
    """One plugin's registrations, checked against the committed tables and kept apart
    from them until the whole plugin has loaded."""

    def __init__(self, registry, plugin, distribution, version, api_version=plugin_api.PLUGIN_API_VERSION):
        self.registry, self.plugin = registry, plugin
        self.distribution, self.version, self.api_version = distribution, version, api_version
        self.tables = {kind: dict(t) for kind, t in registry._tables.items()}
        self.aliases = {kind: dict(a) for kind, a in registry._aliases.items()}
        self.added = []  # entries this plugin added or that replaced another's
        self.rejected = None  # the first _Rejected, kept even if a hook swallows it

    def callback(self, kind):
        def register(name, obj, *, description=None, aliases=(), override=False):
            try:
                return self._register(kind, name, obj, description, aliases, override)
            except _Rejected as exc:
                self.rejected = self.rejected or exc
                raise exc.error from None

        return register

    def _register(self, kind, name, obj, description, aliases, override):
        where = f"plugin {self.plugin!r} ({self.distribution})"
        names = [name, *([] if isinstance(aliases, str) else list(aliases))]
        if isinstance(aliases, str) or not all(isinstance(n, str) and n for n in names):
            raise _Rejected(PluginLoadError(
                f"{where} registered {kind} name {name!r} with aliases {aliases!r}: the name and "
                f"each alias must be a non-empty string (aliases a list of them)"), None)
        problem = _type_problem(kind, obj)
        if problem:
            raise _Rejected(PluginLoadError(
                f"{where} registered {kind} {name!r} as {type(obj).__name__} {obj!r}: {problem}"), None)
        table, alias_map = self.tables[kind], self.aliases[kind]
        old = table.get(name)
        foreign = old is not None and old.plugin != self.plugin
        if foreign and old.override and not override:
            return obj  # another plugin overrides this name: its component stays
        replaced = old if foreign and override and not old.override else None
        inherited = tuple(a for a, target in alias_map.items() if replaced and target == name)
        free = {name, *inherited} if replaced else set()
        for i, item in enumerate(names):
            holder = table.get(item) or table.get(alias_map.get(item))
            if item in names[:i] or (holder is not None and item not in free):
                self._conflict(kind, name, item, holder)
        try:  # the kind's contract (an older attention score comes back adapted)
            obj = plugin_api.check_component(kind, obj, self.api_version)
        except plugin_api.ContractProblem as exc:
            raise _Rejected(PluginContractError(f"{where} registered {kind} {name!r}: {exc}"), None) from None
        entry = Entry(kind, name, obj, self.plugin, self.distribution, self.version,
                      _description(obj, description), tuple(dict.fromkeys(names[1:] + list(inherited))),
                      bool(override), self.api_version)
        table[name] = entry
        for alias in entry.aliases:
            alias_map[alias] = name
        self.added.append(entry)
        return obj

    def _conflict(self, kind, name, item, holder):
        what = "name" if item == name else "alias"
        held = (f"is already taken by {holder.distribution} (plugin {holder.plugin!r}) as "
                f"{kind} {holder.name!r}" if holder is not None else "is given twice")
        raise _Rejected(RegistryConflictError(
            f"{kind} {what} {item!r} of plugin {self.plugin!r} ({self.distribution}) {held}; "
            f"names and aliases share one namespace per kind. Rename it, uninstall one plugin, "
            f"block one with {BLOCK_ENV}, or pass override=True to replace a component by its "
            f"canonical name"), "conflict")

    def commit(self):
        for entry in self.added:
            _make_keras_serializable(entry)
        self.registry._tables, self.registry._aliases = self.tables, self.aliases


class Registry:
    """Component tables filled from a list of plugins (modules with hook impls)."""

    def __init__(self, strict=None, blocked=None):
        self.strict = _env_flag(STRICT_ENV) if strict is None else strict
        self.blocked = _env_list(BLOCK_ENV) if blocked is None else set(blocked)
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._tables = {kind: {} for kind in hookspecs.KINDS}
        self._aliases = {kind: {} for kind in hookspecs.KINDS}
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
            reg.load_plugin(ep.load, ep.name, dist_name, version)
        return reg

    def add_plugin(self, module, plugin_name, distribution="unknown", version="unknown"):
        """Register an imported plugin module and run its hooks, all or nothing."""
        self.load_plugin(lambda: module, plugin_name, distribution, version)

    def load_plugin(self, load, plugin_name, distribution="unknown", version="unknown"):
        """Import a plugin (``load()`` returns its module) and run its hooks, all or nothing:
        on any failure the tables and Keras' registrations are restored and it is recorded."""
        if plugin_name in self._plugin_dist:
            other = self._plugin_dist[plugin_name][0]
            self._fail(plugin_name, distribution, version, "hooks", PluginLoadError(
                f"plugin name {plugin_name!r} is already used by {other}; rename the entry point"))
            return
        keras_objects, keras_names = _keras_maps()
        saved = dict(keras_objects), dict(keras_names)
        stage, module, staging = "import", None, None
        try:
            module = load()
            stage = "contract"
            try:
                api_version = plugin_api.declared_version(module)
            except plugin_api.ContractProblem as exc:
                raise PluginContractError(f"plugin {plugin_name!r} ({distribution}): {exc}") from None
            stage = "hooks"
            self.pm.register(module, name=plugin_name)
            self.pm.check_pending()
            staging = _Staging(self, plugin_name, distribution, version, api_version)
            for hook_name, kind in hookspecs.HOOK_KINDS.items():
                stage = f"hook:{hook_name}"
                for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                    if impl.plugin_name == plugin_name:
                        impl.function(staging.callback(kind))
                if staging.rejected:
                    raise staging.rejected
            stage = "keras"
            _check_keras_untouched(saved)
            staging.commit()
        except BaseException as exc:  # noqa: BLE001 - all or nothing, SystemExit included
            self._rollback(module, saved)
            if isinstance(exc, KeyboardInterrupt):
                raise
            rejected = exc if isinstance(exc, _Rejected) else staging and staging.rejected
            if rejected:
                stage, exc = rejected.stage or stage, rejected.error
            hint = _hook_hint(module) if stage == "hooks" and module is not None else ""
            self._fail(plugin_name, distribution, version, stage, exc, hint)
            return
        self._plugin_dist[plugin_name] = (distribution, version)

    def _rollback(self, module, saved_keras):
        if module is not None and self.pm.is_registered(module):
            self.pm.unregister(module)
        for live, before in zip(_keras_maps(), saved_keras):
            live.clear()
            live.update(before)

    def _fail(self, plugin, distribution, version, stage, exc, hint=""):
        details = "".join(traceback.format_exception(exc))
        message = f"{type(exc).__name__}: {exc}{hint}"
        self._failures.append(PluginFailure(plugin, distribution, version, stage, message, details))
        text = f"taylorformer plugin {plugin!r} from {distribution} {version} failed ({stage}): {message}"
        if self.strict:
            error = next((cls for cls in (RegistryConflictError, PluginContractError) if isinstance(exc, cls)),
                         PluginLoadError)
            raise error(text) from exc
        warnings.warn(text, RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ queries
    def entry(self, kind, name):
        """The :class:`Entry` registered as ``name`` (a canonical name, else an alias)."""
        if kind not in self._tables:
            raise UnknownComponentError("component kind", kind, self._tables)
        table = self._tables[kind]
        found = table.get(name) or table.get(self._aliases[kind].get(name))
        if found is None:
            raise UnknownComponentError(kind, name, self._known(kind), self._failure_hint())
        return found

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


def _check_keras_untouched(saved):
    """Reject a plugin that replaced or removed an existing Keras serialization
    registration at import or in a hook (``override=True`` components take theirs over
    at commit, after this check)."""
    missing = object()
    live_objects, live_names = _keras_maps()
    before_objects, before_names = saved
    changed = [key for key, obj in before_objects.items() if live_objects.get(key, missing) is not obj]
    changed += [name for obj, name in before_names.items() if live_names.get(obj, missing) != name]
    if changed:
        raise _Rejected(RegistryConflictError(
            f"the plugin replaced the Keras serialization registration {sorted(changed)[0]!r} "
            f"of another component; register components through the hooks instead"), "conflict")


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
        if (callable(fn) and hasattr(fn, hookspecs.PROJECT + "_impl") and attr not in hookspecs.HOOK_KINDS
                and attr != hookspecs.COMMAND_HOOK):
            match = close_matches(attr, hookspecs.HOOK_KINDS)
            if match:
                hints.append(f"{attr!r} -> did you mean {match[0]!r}?")
    return ("; " + "; ".join(hints)) if hints else ""


def command_plugins(blocked=None):
    """``(plugin, distribution, version, load)`` of each module of the entry-point group
    :data:`COMMANDS_GROUP`, by plugin name, without importing it (``load()`` does), less
    those :data:`BLOCK_ENV` (or ``blocked``) names by plugin or distribution."""
    blocked = _env_list(BLOCK_ENV) if blocked is None else set(blocked)
    found = []
    for ep in sorted(importlib_metadata.entry_points(group=COMMANDS_GROUP), key=lambda ep: ep.name):
        dist = getattr(ep, "dist", None)
        name, version = (dist.metadata["Name"], dist.version) if dist is not None else ("unknown", "unknown")
        if ep.name not in blocked and name not in blocked:
            found.append((ep.name, name, version, ep.load))
    return found


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
