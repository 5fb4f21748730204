"""Registry: discovery through entry points, conflicts, aliases, broken plugins."""
import json
import subprocess
import sys

import pytest

from taylorformer import cli, registry
from taylorformer.errors import PluginLoadError, RegistryConflictError, UnknownComponentError
from taylorformer.registry import Registry

TOY = '''
from taylorformer.hookspecs import hookimpl

class ToyAttention:
    """A toy attention block."""

@hookimpl
def register_attention(register):
    register("toy-attn", ToyAttention, aliases=["toy"])

@hookimpl
def register_tasks(register):
    register("toy-task", dict, description="A toy task.")
'''


def test_discovers_fake_distribution_with_version(fake_dist):
    fake_dist("fakeplug", "1.2", {"fakeplug_mod": TOY}, {"fakeplug": "fakeplug_mod"})
    reg = Registry.from_entry_points(strict=True)
    entry = reg.entry("attention", "toy-attn")
    assert (entry.distribution, entry.version, entry.plugin) == ("fakeplug", "1.2", "fakeplug")
    assert entry.description == "A toy attention block."
    assert reg.get("attention", "toy") is entry.obj  # alias
    assert reg.entry("task", "toy-task").description == "A toy task."
    # built-ins come through the same entry-point group
    assert any(e.distribution == "taylorformer" for e in reg.entries())


def _dup(name, override=False):
    return f'''
from taylorformer.hookspecs import hookimpl
class Attn{name}:
    """From {name}."""
@hookimpl
def register_attention(register):
    register("dup", Attn{name}, override={override})
'''


def test_conflict_is_rejected_and_the_first_holder_keeps_the_name(fake_dist):
    fake_dist("dist-a", "1.0", {"dup_a": _dup("A")}, {"dup-a": "dup_a"})
    fake_dist("dist-b", "2.0", {"dup_b": _dup("B")}, {"dup-b": "dup_b"})
    with pytest.warns(RuntimeWarning, match="dist-a"):
        reg = Registry.from_entry_points(strict=False)
    assert reg.get("attention", "dup").__name__ == "AttnA"
    (failure,) = reg.failures()
    assert (failure.plugin, failure.stage) == ("dup-b", "conflict")
    assert "dist-a" in failure.error and "dist-b" in failure.error and "'dup'" in failure.error
    with pytest.raises(RegistryConflictError, match="dist-b"):
        Registry.from_entry_points(strict=True)


def test_explicit_override_wins(fake_dist):
    fake_dist("dist-a", "1.0", {"dup_a": _dup("A")}, {"dup-a": "dup_a"})
    fake_dist("dist-b", "2.0", {"dup_b": _dup("B", override=True)}, {"dup-b": "dup_b"})
    reg = Registry.from_entry_points(strict=True)
    assert reg.get("attention", "dup").__name__ == "AttnB"
    assert reg.failures() == []


def test_broken_import_is_isolated_and_reported(fake_dist):
    fake_dist("goodplug", "1.0", {"good_mod": TOY}, {"good": "good_mod"})
    fake_dist("badplug", "0.1", {"bad_mod": "import not_a_module_xyz\n"}, {"bad": "bad_mod"})
    with pytest.warns(RuntimeWarning, match="badplug"):
        reg = Registry.from_entry_points(strict=False)
    assert reg.get("attention", "toy-attn")
    (failure,) = reg.failures()
    assert (failure.plugin, failure.distribution, failure.stage) == ("bad", "badplug", "import")
    assert "not_a_module_xyz" in failure.error
    with pytest.raises(PluginLoadError, match="badplug"):
        Registry.from_entry_points(strict=True)


def test_hook_that_raises_rolls_back_the_whole_plugin(fake_dist):
    source = '''
from taylorformer.hookspecs import hookimpl
@hookimpl
def register_tasks(register):  # runs before register_models
    register("fine-task", dict, description="registered by a hook that ran without error")
@hookimpl
def register_models(register):
    register("half-done", {"encoder": "transformer"})
    raise RuntimeError("boom in hook")
'''
    fake_dist("raiser", "1.0", {"raiser_mod": source}, {"raiser": "raiser_mod"})
    with pytest.warns(RuntimeWarning, match="boom in hook"):
        reg = Registry.from_entry_points(strict=False)
    assert "half-done" not in reg.names("model")
    assert "fine-task" not in reg.names("task")  # all or nothing: the earlier hook's too
    assert reg.failures()[0].stage == "hook:register_models"


def test_misspelled_hook_fails_loudly_with_suggestion(fake_dist):
    source = '''
from taylorformer.hookspecs import hookimpl
@hookimpl
def register_atention(register):
    register("never", object)
'''
    fake_dist("typo", "1.0", {"typo_mod": source}, {"typo": "typo_mod"})
    with pytest.warns(RuntimeWarning, match="register_atention"):
        reg = Registry.from_entry_points(strict=False)
    (failure,) = reg.failures()
    assert "did you mean 'register_attention'" in failure.error
    with pytest.raises(PluginLoadError, match="register_atention"):
        Registry.from_entry_points(strict=True)


def test_strict_and_block_environment_variables(fake_dist, monkeypatch):
    fake_dist("badplug", "0.1", {"bad_mod": "raise ImportError('nope')\n"}, {"bad": "bad_mod"})
    monkeypatch.setenv(registry.STRICT_ENV, "1")
    with pytest.raises(PluginLoadError, match="nope"):
        Registry.from_entry_points()
    monkeypatch.setenv(registry.BLOCK_ENV, "badplug")  # by distribution name
    reg = Registry.from_entry_points()
    assert reg.failures() == [] and reg.blocked_plugins == ["bad"]
    monkeypatch.setenv(registry.BLOCK_ENV, "bad")  # by entry-point name
    assert Registry.from_entry_points().blocked_plugins == ["bad"]


def test_unknown_name_suggests_close_matches(fake_dist):
    fake_dist("fakeplug", "1.2", {"fakeplug_mod": TOY}, {"fakeplug": "fakeplug_mod"})
    reg = Registry.from_entry_points(strict=True)
    with pytest.raises(UnknownComponentError) as err:
        reg.get("attention", "toy-atn")
    message = str(err.value)
    assert "unknown attention 'toy-atn'" in message and "did you mean 'toy-attn'" in message
    with pytest.raises(UnknownComponentError, match="component kind"):
        reg.get("atention", "toy-attn")


def test_keras_layers_become_serializable_under_registry_name(fake_dist):
    import keras

    source = '''
import keras
from taylorformer.hookspecs import hookimpl
class ToyLayer(keras.layers.Layer):
    """Toy Keras layer."""
    def call(self, x):
        return 2 * x
@hookimpl
def register_attention(register):
    register("toy-layer", ToyLayer)
'''
    fake_dist("kerasplug", "1.0", {"kerasplug_mod": source}, {"kerasplug": "kerasplug_mod"})
    reg = Registry.from_entry_points(strict=True)
    cls = reg.get("attention", "toy-layer")
    assert keras.saving.get_registered_name(cls) == "taylorformer>attention.toy-layer"
    config = keras.saving.serialize_keras_object(cls())
    assert type(keras.saving.deserialize_keras_object(config)) is cls


def test_cli_text_and_json(fake_dist, capsys, monkeypatch):
    fake_dist("fakeplug", "1.2", {"fakeplug_mod": TOY}, {"fakeplug": "fakeplug_mod"})
    fake_dist("badplug", "0.1", {"bad_mod": "raise ImportError('nope')\n"}, {"bad": "bad_mod"})
    monkeypatch.delenv(registry.STRICT_ENV, raising=False)
    with pytest.warns(RuntimeWarning):
        registry.reload()
    try:
        assert cli.main(["plugins"]) == 0
        text = capsys.readouterr().out
        assert "toy-attn (toy)" in text and "fakeplug" in text and "1.2" in text
        assert "Failed plugins (1)" in text and "bad [badplug 0.1] import" in text
        assert cli.main(["plugins", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        row = next(r for r in data["components"] if r["name"] == "toy-attn")
        assert {"kind": "attention", "distribution": "fakeplug", "version": "1.2"}.items() <= row.items()
        assert data["failures"][0]["distribution"] == "badplug" and "nope" in data["failures"][0]["error"]
    finally:
        registry.reload()


def test_console_script_lists_builtins():
    out = subprocess.run([sys.executable, "-m", "taylorformer.cli", "plugins", "--json"],
                         capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert data["failures"] == []
    kinds = {(r["kind"], r["name"]) for r in data["components"]}
    assert ("task", "gp") in kinds and ("model", "tnp-d") in kinds
