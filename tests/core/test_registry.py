"""Registry: discovery through entry points, conflicts, aliases, broken plugins."""
import functools
import json
import subprocess
import sys

import pytest

from taylorformer import cli, registry
from taylorformer.errors import PluginLoadError, RegistryConflictError, UnknownComponentError
from taylorformer.registry import Registry

#: the smallest task the task contract accepts (registration checks it, taylorformer.plugin_api)
TOY_TASK = '''
class ToyTask:
    """Yields no batches."""
    dim_x = dim_y = 1
    def dataset(self, split, batch_size, seed=0, num_batches=None, start=0):
        return iter(())
    def get_config(self):
        return dict()
'''

TOY = '''
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl

class ToyAttention(Attention):
    """A toy attention block."""
''' + TOY_TASK + '''
@hookimpl
def register_attention(register):
    register("toy-attn", ToyAttention, aliases=["toy"])

@hookimpl
def register_tasks(register):
    register("toy-task", ToyTask, description="A toy task.")
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
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl
class Attn{name}(Attention):
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
''' + TOY_TASK + '''
@hookimpl
def register_tasks(register):  # runs before register_models
    register("fine-task", ToyTask, description="registered by a hook that ran without error")
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
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl
class ToyLayer(Attention):
    """Toy Keras layer."""
@hookimpl
def register_attention(register):
    register("toy-layer", ToyLayer)
'''
    fake_dist("kerasplug", "1.0", {"kerasplug_mod": source}, {"kerasplug": "kerasplug_mod"})
    reg = Registry.from_entry_points(strict=True)
    cls = reg.get("attention", "toy-layer")
    assert keras.saving.get_registered_name(cls) == "taylorformer>attention.toy-layer"
    config = keras.saving.serialize_keras_object(cls(4))
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


# ---------------------------------------------------------------- hardening: all or nothing
def _state(reg):
    """An independent snapshot of what a registry and Keras resolve: every (kind, name or
    alias) -> (canonical name, the object), and copies of Keras' serialization maps."""
    import keras

    resolved = {}
    for entry in reg.entries():
        for label in (entry.name, *entry.aliases):
            found = reg.entry(entry.kind, label)
            obj = found.obj  # a task preset's partial is made anew by each load: compare its parts
            parts = (obj.func, obj.args, obj.keywords) if isinstance(obj, functools.partial) else obj
            resolved[(entry.kind, label)] = (found.name, parts)
    classes = [e.obj for e in reg.entries() if isinstance(e.obj, type)]
    names = {cls: keras.saving.get_registered_name(cls) for cls in classes}
    return resolved, dict(keras.saving.get_custom_objects()), names


@pytest.fixture
def keras_maps_restored():
    """Keras' global serialization maps as they were before the test (a successful
    override plugin would otherwise leave its class registered for later tests)."""
    from taylorformer.tf_compat import keras_serialization_maps

    maps = keras_serialization_maps()
    saved = tuple(dict(m) for m in maps)
    yield
    for live, before in zip(maps, saved):
        live.clear()
        live.update(before)


# Module-level Keras registrations (one new, one replacing a built-in's) then a failure.
HIJACK_KERAS = '''
import keras
from taylorformer.hookspecs import hookimpl

class Evil(keras.layers.Layer):
    """Replaces built-ins (and has a likelihood's methods, to be registered as one)."""
    def num_params(self, dim_y):
        return 2 * dim_y
    def parameters(self, raw):
        return {}
    def distribution(self, params):
        return None

keras.saving.register_keras_serializable(package="taylorformer", name="encoder.transformer")(Evil)
keras.saving.register_keras_serializable(package="evil", name="Evil")(Evil)
'''

RAISES = {  # id -> (the failing statement, how the failure is reported)
    "SystemExit": ("raise SystemExit(3)", "SystemExit: 3"),
    "sys.exit": ("import sys; sys.exit(3)", "SystemExit: 3"),
    "GeneratorExit": ("raise GeneratorExit()", "GeneratorExit"),
    "RuntimeError": ("raise RuntimeError('broken plugin')", "RuntimeError: broken plugin"),
}

OVERRIDE_THEN = '''
@hookimpl
def register_likelihoods(register):  # runs before register_models
    register("normal", Evil, override=True, aliases=["evil-normal"])
    register("evil-lik", Evil)
@hookimpl
def register_models(register):
    register("cnp", {{"encoder": "transformer"}}, override=True)
    {raise_}
'''


@pytest.mark.parametrize("raise_,reported", RAISES.values(), ids=RAISES.keys())
@pytest.mark.parametrize("where", ["import", "hook"])
def test_any_failure_leaves_registry_and_keras_exactly_as_before(fake_dist, where, raise_, reported):
    before = _state(Registry.from_entry_points(strict=True))
    source = HIJACK_KERAS + (raise_ + "\n" if where == "import" else OVERRIDE_THEN.format(raise_=raise_))
    fake_dist("evil-dist", "6.6", {"evil_mod": source}, {"evil": "evil_mod"})
    with pytest.warns(RuntimeWarning, match="evil-dist"):
        reg = Registry.from_entry_points(strict=False)
    assert _state(reg) == before
    (failure,) = reg.failures()
    assert (failure.plugin, failure.distribution, failure.version) == ("evil", "evil-dist", "6.6")
    assert failure.stage == ("import" if where == "import" else "hook:register_models")
    assert failure.error.startswith(reported)
    with pytest.raises(PluginLoadError, match="evil-dist"):
        Registry.from_entry_points(strict=True)
    assert _state(reg) == before


def test_override_then_raise_keeps_the_builtins_usable(fake_dist, monkeypatch):
    import taylorformer as tfm
    from taylorformer.spec import resolve_spec

    source = HIJACK_KERAS + OVERRIDE_THEN.format(raise_="raise RuntimeError('after override')")
    fake_dist("evil-dist", "6.6", {"evil_mod": source}, {"evil": "evil_mod"})
    monkeypatch.delenv(registry.STRICT_ENV, raising=False)
    try:
        with pytest.warns(RuntimeWarning, match="after override"):
            registry.reload()
        assert registry.entry("likelihood", "normal").distribution == "taylorformer"
        assert registry.entry("likelihood", "gaussian").name == "normal"
        assert resolve_spec("cnp")["likelihood"]["name"] == "normal"
        assert tfm.build_model("cnp").spec["encoder"]["name"] == "deepset"
    finally:
        registry.reload()


def test_keyboard_interrupt_is_rolled_back_then_reraised():
    reg = Registry.from_entry_points(strict=True)
    before = _state(reg)

    class Interrupting:
        @staticmethod
        @registry.hookspecs.hookimpl
        def register_attention(register):
            from taylorformer.attention import Attention

            register("ki-attn", type("KIAttention", (Attention,), {}))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        reg.add_plugin(Interrupting, "ki", "ki-dist", "1.0")
    assert _state(reg) == before and reg.failures() == []
    assert not reg.pm.has_plugin("ki")


# ------------------------------------------------------------------ one namespace per kind
ALIAS_HIJACK = '''
import keras
from taylorformer.hookspecs import hookimpl

class Hijacker(keras.layers.Layer):
    """Takes over built-in encoders."""

@hookimpl
def register_encoders(register):
    register({name!r}, Hijacker, aliases={aliases!r})

''' + TOY_TASK + '''
@hookimpl
def register_tasks(register):
    register("hijack-task", ToyTask)
'''


@pytest.mark.parametrize("name,aliases,taken", [
    ("hijacker", ["transformer", "deepset"], "transformer"),  # alias == a built-in's name
    ("hijacker", ["bsa"], "bsa"),                              # alias == a built-in's alias
    ("krblock", [], "krblock"),                                # name == a built-in's alias
    ("transformer", [], "transformer"),                        # name == a built-in's name
    ("hijacker", ["twice", "twice"], "twice"),                 # the same alias twice
])
def test_name_or_alias_already_taken_is_a_conflict_and_the_holder_keeps_it(
        fake_dist, monkeypatch, name, aliases, taken):
    import keras

    before = _state(Registry.from_entry_points(strict=True))
    fake_dist("hijack-dist", "1.0", {"hijack_mod": ALIAS_HIJACK.format(name=name, aliases=aliases)},
              {"hijack": "hijack_mod"})
    with pytest.warns(RuntimeWarning, match="conflict"):
        reg = Registry.from_entry_points(strict=False)
    assert _state(reg) == before  # the holder keeps its name, Keras keeps its class
    assert "hijack-task" not in reg.names("task") and "hijacker" not in reg.names("encoder")
    assert keras.saving.get_custom_objects()["taylorformer>encoder.transformer"].__name__ == "TransformerEncoder"
    (failure,) = reg.failures()
    assert failure.stage == "conflict" and repr(taken) in failure.error and "hijack-dist" in failure.error
    monkeypatch.setenv(registry.STRICT_ENV, "1")
    with pytest.raises(RegistryConflictError, match=f"'{taken}'.*hijack-dist"):
        Registry.from_entry_points()


def test_lookup_prefers_canonical_names():
    reg = Registry.from_entry_points(strict=True)
    reg._aliases["encoder"]["transformer"] = "deepset"  # a stale alias cannot shadow a name
    assert reg.entry("encoder", "transformer").name == "transformer"


def test_override_takes_over_name_and_aliases(fake_dist, keras_maps_restored):
    import keras

    source = '''
import keras
from taylorformer.hookspecs import hookimpl
from taylorformer.plugins.likelihoods import StudentT
class BetterTransformer(keras.layers.Layer):
    """A better transformer."""
@hookimpl
def register_likelihoods(register):
    register("normal", StudentT, override=True)
@hookimpl
def register_encoders(register):
    register("transformer", BetterTransformer, override=True)
'''
    fake_dist("better", "1.0", {"better_mod": source}, {"better": "better_mod"})
    reg = Registry.from_entry_points(strict=True)
    from taylorformer.plugins.likelihoods import StudentT

    assert reg.get("likelihood", "gaussian") is StudentT  # the built-in's alias follows the name
    assert reg.entry("likelihood", "normal").aliases == ("gaussian",)
    cls = reg.get("encoder", "transformer")
    assert keras.saving.get_custom_objects()["taylorformer>encoder.transformer"] is cls


def test_a_plugin_cannot_rename_a_builtin_keras_class(fake_dist):
    import keras

    source = '''
from taylorformer.hookspecs import hookimpl
from taylorformer.plugins.tnp.encoders import TransformerEncoder
@hookimpl
def register_encoders(register):
    register("same-class", TransformerEncoder)
'''
    fake_dist("renamer", "1.0", {"renamer_mod": source}, {"renamer": "renamer_mod"})
    reg = Registry.from_entry_points(strict=True)
    assert reg.get("encoder", "same-class") is reg.get("encoder", "transformer")
    assert keras.saving.get_registered_name(reg.get("encoder", "transformer")) == "taylorformer>encoder.transformer"
    assert "taylorformer>encoder.same-class" not in keras.saving.get_custom_objects()


def test_keras_registration_replaced_at_import_rejects_the_plugin(fake_dist):
    before = _state(Registry.from_entry_points(strict=True))
    fake_dist("evil-dist", "6.6", {"evil_mod": HIJACK_KERAS}, {"evil": "evil_mod"})
    with pytest.warns(RuntimeWarning, match="taylorformer>encoder.transformer"):
        reg = Registry.from_entry_points(strict=False)
    assert _state(reg) == before and reg.failures()[0].stage == "conflict"


# ------------------------------------------------------------------ wrong types
@pytest.mark.parametrize("hook,kind,obj,allowed", [
    ("register_tasks", "task", "42", "a class or a functools.partial"),
    ("register_tasks", "task", "lambda **kw: None", "a class or a functools.partial"),
    ("register_models", "model", "'tnp-d'", "spec dict"),
    ("register_attention", "attention", "object()", "must be classes"),
])
def test_registration_of_the_wrong_type_is_rejected(fake_dist, monkeypatch, hook, kind, obj, allowed):
    source = f'''
from taylorformer.hookspecs import hookimpl
@hookimpl
def {hook}(register):
    register("wrong-type", {obj})
'''
    fake_dist("wrong-dist", "1.0", {"wrong_mod": source}, {"wrong": "wrong_mod"})
    with pytest.warns(RuntimeWarning):
        reg = Registry.from_entry_points(strict=False)
    assert "wrong-type" not in reg.names(kind)
    (failure,) = reg.failures()
    assert failure.stage == f"hook:{hook}"
    for part in ("'wrong'", "wrong-dist", f"{kind} 'wrong-type'", allowed):
        assert part in failure.error
    monkeypatch.setenv(registry.STRICT_ENV, "1")
    with pytest.raises(PluginLoadError, match=f"{kind} 'wrong-type'"):
        Registry.from_entry_points()


def test_a_hook_that_swallows_a_rejection_is_still_rejected(fake_dist):
    source = '''
from taylorformer.hookspecs import hookimpl
@hookimpl
def register_encoders(register):
    try:
        register("quiet", dict, aliases=["transformer"])
    except Exception:
        pass
'''
    fake_dist("quiet-dist", "1.0", {"quiet_mod": source}, {"quiet": "quiet_mod"})
    with pytest.warns(RuntimeWarning, match="'transformer'"):
        reg = Registry.from_entry_points(strict=False)
    assert "quiet" not in reg.names("encoder") and reg.failures()[0].stage == "conflict"


# ------------------------------------------------------------------ the CLI survives
def test_cli_plugins_survives_sys_exit_at_import(fake_dist, tmp_path):
    info = fake_dist("exit-dist", "0.3", {"exit_mod": "import sys\nsys.exit(3)\n"}, {"exiter": "exit_mod"})
    env = {k: v for k, v in __import__("os").environ.items() if k != registry.STRICT_ENV}
    env["PYTHONPATH"] = str(info.parent)
    done = subprocess.run([sys.executable, "-m", "taylorformer.cli", "plugins"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Failed plugins (1)" in done.stdout
    assert "exiter [exit-dist 0.3] import: SystemExit: 3" in done.stdout
    assert "transformer" in done.stdout and "normal (gaussian)" in done.stdout


# ------------------------------------------------------------------ provenance advice
def _unknown_with_provenance(distribution, version="1.0"):
    from taylorformer.spec import resolve_spec

    saved = [{"field": "encoder.attention", "kind": "attention", "name": "gone", "canonical": "gone",
              "distribution": distribution, "version": version}]
    with pytest.raises(UnknownComponentError) as err:
        resolve_spec({"preset": "tnp-d", "encoder": {"attention": "gone"}, "provenance": saved})
    return str(err.value)


@pytest.mark.parametrize("distribution", [
    "evil-dist; pip install evil", "evil dist", "-evil", "evil-", "", None, 42, "a\nb", "évil"])
def test_invalid_provenance_distribution_is_never_install_advice(distribution):
    message = _unknown_with_provenance(distribution)
    assert "unknown attention 'gone'" in message and "provenance" in message and "invalid" in message
    assert "install that plugin" not in message and "pip" not in message and "evil" not in message


@pytest.mark.parametrize("distribution", ["a", "Good_Dist.2-x", "taylorformer-example-plugin"])
def test_valid_provenance_distribution_is_install_advice(distribution):
    message = _unknown_with_provenance(distribution, version="1.0; rm -rf /")
    assert f"from the distribution {distribution!r}; install that plugin package" in message
    assert "rm -rf" not in message  # a malformed version is left out
