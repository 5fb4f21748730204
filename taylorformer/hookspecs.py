"""pluggy hook specifications: how a plugin adds components to the registry.

Each hook receives a ``register`` callback::

    register(name, obj, *, description=None, aliases=(), override=False)

``name`` is the registry name (lower-case, dashes), ``obj`` the component (a class for
attention, encoder, wrapper and likelihood; a class or a ``functools.partial`` of one
for a task; a spec dict for a model preset; a
:class:`taylorformer.plugin_api.ExperimentRecord`, such as ``taylorformer_replication.Row``,
for an experiment), ``description`` a one-line summary
(defaults to the first docstring line), ``aliases`` a list of extra names, and
``override=True`` replaces the component another plugin registered under that
canonical name. Names and aliases share one namespace per kind: one that is already
taken is a conflict that rejects the plugin. A plugin loads all or nothing: a rejected
registration or any exception in its import or hooks leaves the registry unchanged.
The protocol each kind must follow is documented in ``docs/plugins.md`` and checked when
a component registers (:mod:`taylorformer.plugin_api`: a plugin module may declare
``TAYLORFORMER_PLUGIN_API = N``, the contract version it is written for).

:func:`register_commands` is the one hook of another kind: it adds commands to the command
line, from the modules of the entry-point group ``taylorformer.commands``
(:data:`taylorformer.registry.COMMANDS_GROUP`), which the command line imports to build its
parser, before TensorFlow.
"""
import pluggy

PROJECT = "taylorformer"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_attention(register):
    """Register attention layers (kind ``attention``)."""


@hookspec
def register_encoders(register):
    """Register encoders: how tokens flow through attention (kind ``encoder``)."""


@hookspec
def register_wrappers(register):
    """Register model wrappers such as LocalTaylor (kind ``wrapper``)."""


@hookspec
def register_likelihoods(register):
    """Register likelihood heads (kind ``likelihood``)."""


@hookspec
def register_tasks(register):
    """Register task loaders and simulators (kind ``task``)."""


@hookspec
def register_models(register):
    """Register model presets: name -> spec dict (kind ``model``)."""


@hookspec
def register_experiments(register):
    """Register published table rows to replicate: id -> a
    :class:`taylorformer.plugin_api.ExperimentRecord` (kind ``experiment``; the
    taylorformer-replication package's ``Row``, and its ``register_rows`` for a list)."""


@hookspec
def register_commands(add_command):
    """Add commands to the ``taylorformer`` command line (a module of the entry-point group
    ``taylorformer.commands``). ``add_command(name, help=None, **parser_options)`` returns
    the command's ``argparse`` parser: add its arguments and ``set_defaults(func=run)``,
    where ``run(args)`` returns the exit code. A plugin's commands are added all or none."""


#: hook name -> registry kind
HOOK_KINDS = {
    "register_attention": "attention",
    "register_encoders": "encoder",
    "register_wrappers": "wrapper",
    "register_likelihoods": "likelihood",
    "register_tasks": "task",
    "register_models": "model",
    "register_experiments": "experiment",
}
KINDS = tuple(HOOK_KINDS.values())
#: the hook of the command plugins (not a registry kind)
COMMAND_HOOK = "register_commands"
