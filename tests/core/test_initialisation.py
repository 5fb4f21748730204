"""Spec ``init``: the initial weights of a model's linear maps, checked against the
distribution each scheme states (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for kernels and
biases under "fan-in-uniform"; Glorot kernels and zero biases under "keras")."""
import math

import keras
import numpy as np
import pytest

from taylorformer.errors import SpecError
from taylorformer.models import build_model, load_model
from taylorformer.models.initialisation import linear_maps

SMALL_TE = {"layers": 2, "width": 64, "num_heads": 4, "head_dim": 16,
            "attention": {"kernel_width": 64, "location_update": True}}


def te_model(init):
    keras.utils.set_random_seed(0)
    return build_model("te-tnp", init=init, encoder=SMALL_TE, head={"width": 64})


def test_fan_in_uniform_draws_every_linear_map_from_its_bound():
    model = te_model("fan-in-uniform")
    maps = list(linear_maps(model))
    # embedding 3, per layer q/k/v/out 4 + kernel MLP 3 + location update phi 2 + FFN 2, head 3
    assert len(maps) == 3 + 2 * (4 + 3 + 2 + 2) + 3
    for kernel, bias in maps:
        bound = 1.0 / math.sqrt(kernel.shape[0])
        for weight in (kernel, bias) if bias is not None else (kernel,):
            w = np.asarray(weight)
            assert np.abs(w).max() <= bound and (w.size < 16 or np.abs(w).max() > 0.5 * bound)
            if w.size >= 4096:  # U(-b, b): std b / sqrt(3)
                assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    for norm in model.encoder.norm1:  # norms keep their initialisers
        np.testing.assert_array_equal(np.asarray(norm.gamma), 1.0)


def test_keras_init_keeps_the_layers_own_initialisers():
    model = te_model("keras")
    dense = model.encoder.ffn[0].hidden[0]
    assert not np.any(np.asarray(dense.bias))
    fan_in, fan_out = dense.kernel.shape
    assert np.abs(np.asarray(dense.kernel)).max() <= math.sqrt(6.0 / (fan_in + fan_out))
    assert model.spec["init"] == "keras"


def test_the_draw_is_seeded_and_loading_keeps_the_saved_weights(tmp_path):
    first, second = te_model("fan-in-uniform"), te_model("fan-in-uniform")
    for a, b in zip(first.get_weights(), second.get_weights()):
        np.testing.assert_array_equal(a, b)
    path = str(tmp_path / "m.keras")
    first.save(path)
    loaded = load_model(path)
    assert loaded.spec["init"] == "fan-in-uniform"
    for a, b in zip(first.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_an_unknown_scheme_is_a_spec_error():
    with pytest.raises(SpecError, match="init.*keras.*fan-in-uniform"):
        build_model("tnp-d", init="torch")


def test_identical_initial_layers_start_as_layer_0_and_the_te_tnp_preset_uses_them():
    model = te_model("fan-in-uniform")  # the small model keeps the preset's encoder options
    enc = model.encoder
    assert enc.identical_initial_layers and model.spec["init"] == "fan-in-uniform"
    for group in (enc.attn, enc.norm1, enc.norm2, enc.ffn):
        for a, b in zip(group[0].get_weights(), group[1].get_weights()):
            np.testing.assert_array_equal(a, b)
    keras.utils.set_random_seed(0)
    other = build_model("te-tnp", init="fan-in-uniform", encoder={**SMALL_TE, "identical_initial_layers": False},
                        head={"width": 64})
    assert not np.array_equal(other.encoder.ffn[0].get_weights()[0], other.encoder.ffn[1].get_weights()[0])
