"""The versioned plugin contract (issue 39, item 3): checked at registration, a version 1
attention score adapted, a broken one refused with a message that names everything.

The plugins here are third-party plugins as the registry sees them: modules of a fake
installed distribution, found through the ``taylorformer`` entry-point group.
"""
import inspect

import numpy as np
import pytest

import taylorformer as tfm
from taylorformer import plugin_api, registry
from taylorformer.errors import PluginContractError
from taylorformer.registry import Registry

#: the same attention written for plugin API 1 (score without the mask hints) and for 2
DECAY = '''
import tensorflow as tf
from taylorformer.attention import Attention

class Decay{v}(Attention):
    """q.k/sqrt(d) - exp(r_h) |x_q - x_k|."""

    def build_score(self, q_pos_shape):
        self.position_dim(q_pos_shape)
        self.log_rate = self.add_weight(name="log_rate", shape=(self.num_heads, 1, 1), initializer="zeros")

    def position_features(self, positions):
        return tf.cast(positions, tf.float32)

    def {signature}:
        diff = q_pos[:, :, None, :] - k_pos[:, None, :, :]
        dist = tf.sqrt(tf.reduce_sum(tf.square(diff), -1) + 1e-12)
        return super().score({call}) - tf.exp(self.log_rate)[None] * dist[:, None]
'''
LEGACY = "from taylorformer.hookspecs import hookimpl\nTAYLORFORMER_PLUGIN_API = 1\n" + DECAY.format(
    v="V1", signature="score(self, q, k, q_pos, k_pos)", call="q, k, q_pos, k_pos") + '''
@hookimpl
def register_attention(register):
    register("decay-v1", DecayV1)
'''
CURRENT = "from taylorformer.hookspecs import hookimpl\n" + DECAY.format(
    v="V2", signature="score(self, q, k, q_pos, k_pos, q_valid, k_valid)",
    call="q, k, q_pos, k_pos, q_valid, k_valid") + '''
@hookimpl
def register_attention(register):
    register("decay-v2", DecayV2)
'''


@pytest.fixture
def keras_maps_restored():
    """Keras' serialization maps as they were before the test (plugins register classes)."""
    from taylorformer.tf_compat import keras_serialization_maps

    maps = keras_serialization_maps()
    saved = tuple(dict(m) for m in maps)
    yield
    for live, before in zip(maps, saved):
        live.clear()
        live.update(before)


@pytest.fixture
def decay_plugins(fake_dist, monkeypatch, keras_maps_restored):
    """The default registry with the version 1 and version 2 plugins installed."""
    fake_dist("decay-legacy", "0.9", {"decay_legacy": LEGACY}, {"decay-legacy": "decay_legacy"})
    fake_dist("decay-current", "1.0", {"decay_current": CURRENT}, {"decay-current": "decay_current"})
    reg = Registry.from_entry_points(strict=True)
    monkeypatch.setattr(registry, "_default", reg)
    return reg


def _spec(attention, tile_size):
    return {"preset": "tnp-d", "encoder": {
        "attention": {"name": attention, "tile_size": tile_size}, "embed_x": False, "layers": 1,
        "width": 16, "num_heads": 2, "head_dim": 8}, "head": {"width": 16}}


def _batch():
    from taylorformer.task import make_task

    return next(iter(make_task("gp", {"num_context": [5, 9], "num_target": 7}).dataset("train", batch_size=3)))


def test_a_version_1_score_is_adapted_at_registration(decay_plugins):
    import keras

    entry = decay_plugins.entry("attention", "decay-v1")
    cls = entry.obj
    original = __import__("decay_legacy").DecayV1
    assert issubclass(cls, original) and cls is not original
    assert (cls.__name__, cls.__module__, cls.__doc__) == ("DecayV1", "decay_legacy", original.__doc__)
    assert cls.adapted_score == (4, ())
    assert entry.plugin_api == 1 and entry.as_dict()["plugin_api"] == 1
    assert decay_plugins.entry("attention", "decay-v2").obj is __import__("decay_current").DecayV2
    assert keras.saving.get_registered_name(cls) == "taylorformer>attention.decay-v1"


@pytest.mark.parametrize("tile_size", [None, 3], ids=["dense", "tiled"])
def test_a_version_1_plugin_trains_and_predicts_as_its_version_2_twin(decay_plugins, tile_size, tmp_path):
    import keras
    import tensorflow as tf

    batch = _batch()
    legacy, current = (tfm.build_model(_spec(name, tile_size)) for name in ("decay-v1", "decay-v2"))
    for model in (legacy, current):
        model(batch)
    current.set_weights(legacy.get_weights())
    np.testing.assert_allclose(tfm.loglik(legacy, batch), tfm.loglik(current, batch), rtol=1e-5, atol=1e-5)

    data = tf.data.Dataset.from_tensors(batch).repeat()
    initial = legacy.get_weights()
    for model in (legacy, current):  # one training step each, same batch, same optimizer
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1))
        model.fit(data, steps_per_epoch=1, epochs=1, verbose=0)
    assert any(not np.allclose(a, b) for a, b in zip(initial, legacy.get_weights()))  # it trained
    for a, b in zip(legacy.get_weights(), current.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    after = tfm.predict(legacy, batch)
    np.testing.assert_allclose(after["mean"], tfm.predict(current, batch)["mean"], rtol=1e-5, atol=1e-5)

    path = str(tmp_path / "legacy.keras")  # saved and loaded under its registry name
    legacy.save(path)
    loaded = tfm.load_model(path)
    np.testing.assert_allclose(tfm.predict(loaded, batch)["mean"], after["mean"], rtol=1e-5, atol=1e-5)


BROKEN = '''
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl

class BrokenAttention(Attention):
    """Scores without positions."""
    def score(self, q, k):
        return super().score(q, k)

@hookimpl
def register_attention(register):
    register("broken", BrokenAttention)
'''


def test_a_score_that_cannot_be_adapted_is_refused_at_registration(fake_dist, monkeypatch):
    fake_dist("broken-dist", "2.3", {"broken_attn": BROKEN}, {"broken-plugin": "broken_attn"})
    with pytest.warns(RuntimeWarning, match="broken-dist"):
        reg = Registry.from_entry_points(strict=False)
    assert "broken" not in reg.names("attention")
    (failure,) = reg.failures()
    assert failure.stage == "hook:register_attention"
    for part in ("PluginContractError", "plugin 'broken-plugin' (broken-dist)", "attention 'broken'",
                 "BrokenAttention.score(self, q, k)", "plugin API 2",
                 "score(self, q, k, q_pos, k_pos, q_valid, k_valid)", "plugin API 1: score(self, q, k, q_pos, k_pos)"):
        assert part in failure.error, (part, failure.error)
    monkeypatch.setenv(registry.STRICT_ENV, "1")
    with pytest.raises(PluginContractError, match="BrokenAttention.score"):
        Registry.from_entry_points()


@pytest.mark.parametrize("declared,said", [
    ("3", "written for plugin API 3; this taylorformer implements plugin API 2"),
    ("0", "written for plugin API 0; this taylorformer loads versions 1-2"),
    ("'2'", "must be an int"),
])
def test_a_plugin_api_version_this_taylorformer_does_not_load_is_refused(fake_dist, declared, said):
    source = f"TAYLORFORMER_PLUGIN_API = {declared}\n" + CURRENT
    fake_dist("future-dist", "5.0", {"future_mod": source}, {"future": "future_mod"})
    with pytest.warns(RuntimeWarning, match="future-dist"):
        reg = Registry.from_entry_points(strict=False)
    (failure,) = reg.failures()
    assert failure.stage == "contract" and said in failure.error and "plugin 'future' (future-dist)" in failure.error
    assert "decay-v2" not in reg.names("attention")


# ---------------------------------------------------------------- the other kinds
LIKELIHOOD_BASE = '''
class Lik:
    """A likelihood."""
    def num_params(self, dim_y):
        return 2 * dim_y
    def parameters(self, raw):
        return {}
    def distribution(self, params):
        return None
    def get_config(self):
        return dict()
'''


@pytest.mark.parametrize("hook,body,said", [
    ("register_likelihoods", LIKELIHOOD_BASE.replace("    def distribution(self, params):\n        return None\n", "")
     + "\nOBJ = Lik", "Lik has no method 'distribution'"),
    ("register_likelihoods", LIKELIHOOD_BASE.replace("num_params(self, dim_y)", "num_params(self)") + "\nOBJ = Lik",
     "Lik.num_params(self) does not accept"),
    ("register_encoders", '''
import keras
class Enc(keras.layers.Layer):
    """No dim_x."""
    def __init__(self, width=8):
        super().__init__()
    def call(self, batch):
        return batch
OBJ = Enc''', "cannot be built with dim_x, dim_y"),
    ("register_encoders", '''
import keras
class Enc(keras.layers.Layer):
    """Half a cache."""
    def __init__(self, dim_x, dim_y, **kwargs):
        super().__init__(**kwargs)
    def call(self, batch):
        return batch
    def start_cache(self, batch, features=None):
        return None
OBJ = Enc''', "implements start_cache of cached decoding but not cached_query, cached_append"),
    ("register_wrappers", '''
class Wrap:
    """No adjust."""
    def __init__(self, dim_x, dim_y):
        pass
    def features(self, batch, causal=False):
        return None
    def fold(self, batch, features):
        return batch
    def folded_dims(self):
        return 1, 1
    def get_config(self):
        return dict()
OBJ = Wrap''', "Wrap has no method 'adjust'"),
    ("register_tasks", '''
import functools
from taylorformer.tasks.gp import GPTask
OBJ = functools.partial(GPTask, kernal="rbf")''', "the preset's arguments do not fit GPTask"),
    ("register_tasks", '''
from taylorformer.task import Task
class Empty(Task):
    """Neither sample nor dataset."""
OBJ = Empty''', "implements neither sample() nor dataset()"),
    ("register_models", "OBJ = {'preset': 'tnp-d', 'encoder': {'layers': {1, 2}}}", "its 'encoder' is not"),
])
def test_each_kind_is_checked_at_registration(fake_dist, hook, body, said):
    source = body + f'''
from taylorformer.hookspecs import hookimpl
@hookimpl
def {hook}(register):
    register("bad-component", OBJ)
'''
    fake_dist("bad-kind-dist", "1.0", {"bad_kind": source}, {"bad-kind": "bad_kind"})
    with pytest.warns(RuntimeWarning, match="bad-kind-dist"):
        reg = Registry.from_entry_points(strict=False)
    (failure,) = reg.failures()
    assert failure.stage == f"hook:{hook}" and "PluginContractError" in failure.error
    assert said in failure.error and "plugin 'bad-kind' (bad-kind-dist)" in failure.error, failure.error


def test_every_builtin_follows_the_current_contract_unadapted():
    reg = Registry.from_entry_points(strict=True)
    assert reg.failures() == []
    for entry in reg.entries():
        assert entry.plugin_api == plugin_api.PLUGIN_API_VERSION
        assert not hasattr(entry.obj, "adapted_score"), entry.name


def _sig(text):
    namespace = {}
    exec(f"def f{text}: pass", namespace)  # noqa: S102 - a signature written in the test
    return inspect.signature(namespace["f"])


@pytest.mark.parametrize("signature,call", [
    ("(q, k, q_pos, k_pos, q_valid, k_valid)", (6, ())),
    ("(q, k, q_pos, k_pos, q_valid=None, k_valid=None, extra=1)", (6, ())),
    ("(q_tile, k_tile, *_)", (6, ())),
    ("(q, k, q_pos, k_pos)", (4, ())),
    ("(q, k, q_pos, k_pos, q_valid)", (5, ())),
    ("(q, k, q_pos, k_pos, *, k_valid=None)", (4, ("k_valid",))),
    ("(q, k, q_pos, k_pos, **hints)", (4, ("q_valid", "k_valid"))),
    ("(q, k)", None),
    ("(q, k, q_pos, k_pos, scale)", None),
    ("(q, k, q_pos, k_pos, *, temperature)", None),
])
def test_how_a_score_is_called(signature, call):
    assert plugin_api.score_call(_sig(signature)) == call
