"""Plugin commands (hook ``register_commands``, entry-point group ``taylorformer.commands``):
a plugin adds a command that parses and runs like a built-in one, its errors follow the
command line's convention, a broken plugin adds none of its commands and leaves the others
working, and ``replicate`` without its package names the package to install.

In-process: the plugins are modules built here, handed to the command line through
:func:`taylorformer.registry.command_plugins` (its entry-point discovery is checked on a
fake installed distribution).
"""
import importlib
import types

import pytest

from taylorformer import cli, registry
from taylorformer.errors import SpecError
from taylorformer.hookspecs import hookimpl


def command_plugin(name, *commands, fail=None):
    """A plugin module whose hook adds ``commands`` (``(name, run)`` pairs, each with an
    argument ``who`` and an option ``--times``), then raises ``fail`` if given."""
    module = types.ModuleType(name)

    def register_commands(add_command):
        for command, run in commands:
            p = add_command(command, help=f"the {command} command")
            p.add_argument("who")
            p.add_argument("--times", type=cli.positive_int, default=1)
            if run is not None:
                p.set_defaults(func=run)
        if fail is not None:
            raise fail

    module.register_commands = hookimpl(register_commands)
    return module


def use(monkeypatch, *modules):
    """Make ``modules`` the installed command plugins (each its own distribution)."""
    def load(module):
        if isinstance(module, Exception):
            def fail():
                raise module
            return fail
        return lambda: module

    plugins = [(f"plugin-{i}", f"dist-{i}", "1.0", load(module)) for i, module in enumerate(modules)]
    monkeypatch.setattr(registry, "command_plugins", lambda: plugins)


def run_cli(argv, capsys):
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse: --help, a bad argument
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def hello(args):
    print(" ".join([f"hello {args.who}"] * args.times))
    return 0


def test_a_plugin_command_parses_runs_and_is_listed(monkeypatch, capsys):
    use(monkeypatch, command_plugin("hello_plugin", ("hello", hello)))
    assert run_cli(["hello", "you", "--times", "2"], capsys) == (0, "hello you hello you\n", "")
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0 and "hello" in out and "the hello command" in out
    code, out, _ = run_cli(["hello", "--help"], capsys)
    assert code == 0 and "--times" in out and "--debug" in out  # the built-in commands' --debug too


@pytest.mark.parametrize("raised, code, text", [
    (SpecError("bad value for the hello command"), 2, "error: bad value for the hello command"),
    (OSError("no such file: x.csv"), 2, "error: no such file: x.csv"),
    (RuntimeError("boom"), 1, "error: unexpected RuntimeError: boom in a command of plugin 'plugin-0' "
                              "(dist-0 1.0)"),
])
def test_a_plugin_commands_errors_are_one_line(monkeypatch, capsys, raised, code, text):
    def failing(args):
        raise raised

    use(monkeypatch, command_plugin("failing_plugin", ("fails", failing)))
    got, out, err = run_cli(["fails", "you"], capsys)
    assert got == code and out == ""
    assert err.strip().splitlines() == [err.strip()] and err.startswith(text), err
    got, _, err = run_cli(["fails", "you", "--times", "-1"], capsys)  # argparse's error, as for built-ins
    assert got == 2 and err == ("error: taylorformer fails: argument --times: must be a positive int, got '-1' "
                                "(see taylorformer fails --help)\n")


@pytest.mark.parametrize("broken, why", [
    (ImportError("No module named 'missing_dependency'"), "ImportError: No module named 'missing_dependency'"),
    (command_plugin("half", ("half-added", hello), fail=ValueError("the hook broke")), "ValueError: the hook broke"),
    (command_plugin("taker", ("hello-two", hello), ("train", hello)), "command 'train' is already taken"),
    (command_plugin("twice", ("hello", hello)), "command 'hello' is already taken"),
    (command_plugin("no_func", ("no-func", None)), "command 'no-func' sets no func"),
    (command_plugin("bad_name", ("Bad Name", hello)), "command name 'Bad Name' must be lower-case words"),
])
def test_a_broken_plugin_adds_no_command_and_the_others_work(monkeypatch, capsys, broken, why):
    use(monkeypatch, command_plugin("hello_plugin", ("hello", hello)), broken)
    code, out, err = run_cli(["hello", "you"], capsys)
    assert (code, out) == (0, "hello you\n")
    assert err.startswith("warning: command plugin 'plugin-1' (dist-1 1.0) failed, its commands are left out: ")
    assert why in err and len(err.strip().splitlines()) == 1, err
    parser = cli.build_parser()
    assert set(parser.commands) >= {"hello", "train", "plugins", "info"}
    assert not set(parser.commands) & {"half-added", "hello-two", "no-func"}  # all or none
    assert parser.commands["train"].get_default("func") is not hello  # a built-in keeps its name


def test_command_plugins_come_from_their_entry_point_group(tmp_path, monkeypatch):
    info = tmp_path / "greeter_dist-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greeter-dist\nVersion: 2.0\n")
    (info / "entry_points.txt").write_text("[taylorformer.commands]\ngreeter = greeter_commands\n")
    (tmp_path / "greeter_commands.py").write_text(
        "from taylorformer import hookimpl\n\n\n"
        "@hookimpl\ndef register_commands(add_command):\n"
        "    add_command('greet').set_defaults(func=lambda args: print('hi') or 0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    found = {plugin: (dist, version, load) for plugin, dist, version, load in registry.command_plugins()}
    assert found["greeter"][:2] == ("greeter-dist", "2.0")
    assert found["greeter"][2]().__name__ == "greeter_commands"
    parser = cli.build_parser()
    assert "greet" in parser.commands and parser.plugin_failures == []
    assert "greeter" not in {p for p, *_ in registry.command_plugins(blocked={"greeter-dist"})}
    monkeypatch.setenv(registry.BLOCK_ENV, "greeter")
    assert "greeter" not in {p for p, *_ in registry.command_plugins()}


def test_replicate_without_its_package_names_the_package(monkeypatch, capsys):
    use(monkeypatch)
    for argv in (["replicate", "--list"], ["--debug", "replicate", "taylorformer-gp-eq"]):
        code, out, err = run_cli(argv, capsys)
        assert (code, out) == (2, "")
        assert err == ("error: taylorformer replicate: the command comes with the taylorformer-replication "
                       "package: pip install -e plugins/replication (docs/replication.md)\n")
