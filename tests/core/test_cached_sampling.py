"""Cached (incremental) autoregressive sampling: the same draws as one full pass per step.

References: ``sample(..., cache=False)`` (a teacher-forced pass of the whole sequence per
step), the teacher-forced conditionals ``model(batch)`` given the drawn values, and a NumPy
softmax attention for the executor's block entry point.
"""
import numpy as np
import pytest
import tensorflow as tf

import taylorformer as tfm
from taylorformer import attention
from taylorformer.models import decoding
from taylorformer.errors import SpecError
from taylorformer.models.target_order import gather_targets, tile_batch

TINY_TF = {"encoder": {"layers": 2, "width": 8, "num_heads": 2, "head_dim": 4, "enc_dim": 4,
                       "dropout": 0.0}, "head": {"width": 8}}
TINY_TNPA = {"encoder": {"layers": 2, "width": 8, "num_heads": 2, "head_dim": 4, "ffn_width": 8},
             "head": {"width": 8, "hidden_layers": 1}}


def one_layer(spec, **encoder):
    return {**spec, "encoder": {**spec["encoder"], "layers": 1, **encoder}}


#: every autoregressive preset (2 layers where a target's later-layer keys come from its
#: own earlier outputs, 1 layer elsewhere: tracing dominates the run time) and the other
#: paths: 2-D inputs with k = 2 neighbours and a first-order Taylor term (on the MHA-XY
#: ablation), TNP-A with LocalTaylor folded into its tokens; the MHA-X ablation runs
#: with an empty context (test_empty_context)
TAYLOR_2D = {"name": "local-taylor", "p": 1, "q": 1, "k": 2}
MODELS = {
    "taylorformer": ("taylorformer", TINY_TF, 1),
    "taylorformer-xy-2d-k2": ("taylorformer-xy", {**one_layer(TINY_TF, enc_dim=8), "dim_x": 2,
                                                  "wrapper": TAYLOR_2D}, 2),
    "tnp-a": ("tnp-a", TINY_TNPA, 1),
    "tnp-a-local-taylor": ("tnp-a", {**one_layer(TINY_TNPA), "wrapper": {**TAYLOR_2D, "k": 3}}, 1),
    "taylorformer-x": ("taylorformer-x", one_layer(TINY_TF), 1),
}
COMPARED = ["taylorformer", "taylorformer-xy-2d-k2", "tnp-a", "tnp-a-local-taylor"]
_built = {}


def model_of(name):
    if name not in _built:
        preset, overrides, _ = MODELS[name]
        tf.keras.utils.set_random_seed(0)
        _built[name] = tfm.build_model(preset, **overrides)
    return _built[name]


def padded_batch(dim_x, seed=0, b=2, nc=5, nt=6):
    """A batch whose padded context/target points (two of each) carry huge garbage values."""
    rng = np.random.default_rng(seed)
    batch = {"xc": rng.uniform(-1, 1, (b, nc, dim_x)), "yc": rng.normal(size=(b, nc, 1)),
             "xt": rng.uniform(-1, 1, (b, nt, dim_x)), "yt": rng.normal(size=(b, nt, 1)),
             "mask_c": np.ones((b, nc)), "mask_t": np.ones((b, nt))}
    if nc and nt:
        batch["mask_c"][0, 1] = batch["mask_c"][1, nc - 1] = 0
        batch["mask_t"][0, nt // 2] = batch["mask_t"][1, nt - 1] = 0
    for side in "ct":
        pad = batch["mask_" + side] == 0
        batch["x" + side][pad], batch["y" + side][pad] = 50.0, 1e3
    return {key: value.astype(np.float32) for key, value in batch.items()}


@pytest.mark.parametrize("name", COMPARED)
def test_cached_samples_equal_full_pass_samples(name):
    model, dim_x = model_of(name), MODELS[name][2]
    batch = padded_batch(dim_x)
    for order in ("given", "random"):
        full, info_full = model.sample(batch, 3, order=order, seed=7, return_info=True, cache=False)
        cached, info = model.sample(batch, 3, order=order, seed=7, return_info=True)
        np.testing.assert_allclose(cached, full, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(info["order"], info_full["order"])
        for key in info_full["params"]:
            np.testing.assert_allclose(info["params"][key], info_full["params"][key], rtol=1e-4, atol=1e-4)
        assert np.all(np.asarray(cached)[:, batch["mask_t"] == 0] == 0)  # padded targets are 0


@pytest.mark.parametrize("name", ["taylorformer", "tnp-a-local-taylor", "taylorformer-xy-2d-k2"])
def test_cached_conditionals_equal_teacher_forcing_on_the_drawn_values(name):
    """Each draw's parameters = the teacher-forced pass on the samples, in generation order."""
    model, dim_x = model_of(name), MODELS[name][2]
    batch = padded_batch(dim_x, seed=1)
    samples, info = model.sample(batch, 3, order="random", seed=3, return_info=True)  # 3: traced above
    s, b, nt = np.asarray(info["order"]).shape
    order = np.asarray(info["order"]).reshape(s * b, nt)
    rows = tile_batch(batch, s)
    rows["yt"] = np.asarray(samples).reshape(s * b, nt, 1)
    teacher = model(gather_targets(rows, order))  # conditionals in generation order
    mask = np.take_along_axis(rows["mask_t"].numpy(), order, 1) > 0
    for key, value in teacher.items():
        drawn = np.take_along_axis(np.asarray(info["params"][key]).reshape(s * b, nt, -1), order[..., None], 1)
        np.testing.assert_allclose(drawn[mask], np.asarray(value)[mask], rtol=1e-4, atol=1e-5)


def test_empty_context():
    model = model_of("taylorformer-x")
    batch = padded_batch(1, seed=2, nc=0, nt=3)
    full = model.sample(batch, 2, seed=1, cache=False)
    np.testing.assert_allclose(model.sample(batch, 2, seed=1), full, rtol=1e-4, atol=1e-4)
    assert full.shape == (2, 2, 3, 1)


def test_sample_rejects_non_bool_cache():
    with pytest.raises(SpecError, match="cache must be a bool or None"):
        model_of("tnp-a").sample(padded_batch(1), cache="yes")


def softmax_attention(q, k, v, valid):
    """NumPy reference: q [B,H,Nq,d], k/v [B,H,Nk,d], valid [B,Nk]; rows without keys -> 0."""
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(valid[:, None, None, :], s, -np.inf)
    with np.errstate(invalid="ignore"):
        w = np.exp(s - s.max(-1, keepdims=True))
        w = np.nan_to_num(w / w.sum(-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", w, v)


def test_attend_blocks_and_key_value_cache_against_numpy():
    rng = np.random.default_rng(0)
    b, h, d, n_ctx, nt = 3, 2, 4, 3, 7
    k, v = (tf.constant(rng.normal(size=(b, h, n_ctx + nt, d)), tf.float32) for _ in range(2))
    key_mask = rng.uniform(size=(b, n_ctx + nt)) > 0.3
    key_mask[2, :] = False  # a row with no valid key
    q = rng.normal(size=(b, h, 2, d)).astype(np.float32)
    cache = decoding.KeyValueCache.start(k[:, :, :n_ctx], v[:, :, :n_ctx], nt)  # 3 recent slots
    for t in range(nt):
        index = tf.constant(n_ctx + t)
        cache = cache.write(index, k[:, :, n_ctx + t:n_ctx + t + 1], v[:, :, n_ctx + t:n_ctx + t + 1])
        if (t + 1) % decoding.recent_slots(nt) == 0:
            cache = cache.settle()
        length = n_ctx + t + 1
        got = attention.attend_blocks(attention.mha_score, tf.constant(q), cache.blocks(length, key_mask))
        want = softmax_attention(q, k[:, :, :length].numpy(), v[:, :, :length].numpy(), key_mask[:, :length])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(got)[2] == 0)


def test_encoder_without_cached_decoding(monkeypatch):
    """cache=True names what is missing; the default falls back to the reference path (a
    third-party causal encoder without the methods still samples)."""
    model = model_of("tnp-a")
    batch = padded_batch(1)
    monkeypatch.delattr(type(model.encoder), "cached_query")
    with pytest.raises(SpecError, match="TNPAEncoder has no cached decoding .*cached_query.*cache=False"):
        model.sample(batch, seed=0, cache=True)
    np.testing.assert_array_equal(model.sample(batch, 2, seed=3), model.sample(batch, 2, seed=3, cache=False))
