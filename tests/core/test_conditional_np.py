"""ConditionalNP (cnp, tnp-d): shapes, masks, invariances, likelihood, save/load, specs."""
import json

import numpy as np
import pytest
import scipy.stats
import yaml

import taylorformer as tfm
from taylorformer.batch import pad_tasks
from taylorformer.errors import BatchError, SpecError, UnknownComponentError

SMALL = {"encoder": {"layers": 2, "width": 32, "num_heads": 4, "head_dim": 8},
         "head": {"width": 32}}


def small(preset, **kw):
    overrides = SMALL if preset == "tnp-d" else {"encoder": {"width": 32}, "head": {"width": 32}}
    return tfm.build_model({"preset": preset, **overrides, **kw})


def random_batch(rng, b=3, nc=6, nt=5, dx=1, dy=1):
    f = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    return {"xc": f(b, nc, dx), "yc": f(b, nc, dy), "xt": f(b, nt, dx), "yt": f(b, nt, dy)}


@pytest.mark.parametrize("likelihood,keys", [("normal", {"loc", "scale"}),
                                             ("student-t", {"loc", "scale", "df"}),
                                             ({"name": "mixture", "components": 3}, {"logits", "locs", "scales"})])
def test_shapes_for_each_likelihood(likelihood, keys):
    rng = np.random.default_rng(0)
    model = small("tnp-d", dim_x=2, dim_y=3, likelihood=likelihood)
    batch = random_batch(rng, dx=2, dy=3)
    params = model(batch)
    assert set(params) == keys
    out = tfm.predict(model, batch, num_samples=4)
    assert out["mean"].shape == (3, 5, 3) and out["stddev"].shape == (3, 5, 3)
    assert out["samples"].shape == (4, 3, 5, 3)
    ll = tfm.loglik(model, batch)
    assert ll.shape == (3,) and ll.dtype.name == "float64" and np.isfinite(ll).all()


@pytest.mark.parametrize("preset", ["cnp", "tnp-d"])
def test_padded_points_change_nothing(preset):
    rng = np.random.default_rng(1)
    model = small(preset)
    tasks = [{"xc": rng.normal(size=(n, 1)), "yc": rng.normal(size=(n, 1)),
              "xt": rng.normal(size=(m, 1)), "yt": rng.normal(size=(m, 1))} for n, m in [(2, 4), (7, 6), (4, 1)]]
    batch = pad_tasks(tasks)
    # garbage in the padded slots must not matter
    noisy = {k: v.copy() for k, v in batch.items()}
    for x_key, m_key in (("xc", "mask_c"), ("yc", "mask_c"), ("xt", "mask_t"), ("yt", "mask_t")):
        pad = noisy[m_key] == 0
        noisy[x_key][pad] = rng.normal(size=noisy[x_key][pad].shape) * 50
    for i, task in enumerate(tasks):
        alone = pad_tasks([task])
        expect = model(alone)["loc"].numpy()[0]
        for b in (batch, noisy):
            got = model(b)["loc"].numpy()[i, : len(task["xt"])]
            np.testing.assert_allclose(got, expect, atol=2e-5)
        np.testing.assert_allclose(tfm.loglik(model, noisy).numpy()[i], tfm.loglik(model, alone).numpy()[0],
                                   atol=2e-5)


@pytest.mark.parametrize("preset", ["cnp", "tnp-d"])
def test_context_permutation_invariance_and_empty_context(preset):
    rng = np.random.default_rng(2)
    model = small(preset)
    batch = random_batch(rng)
    perm = rng.permutation(batch["xc"].shape[1])
    shuffled = {**batch, "xc": batch["xc"][:, perm], "yc": batch["yc"][:, perm]}
    np.testing.assert_allclose(model(shuffled)["loc"], model(batch)["loc"], atol=2e-5)
    empty = {**batch, "xc": batch["xc"][:, :0], "yc": batch["yc"][:, :0]}
    fully_masked = {**batch, "mask_c": np.zeros(batch["xc"].shape[:2], np.float32)}
    out_empty = model(empty)["loc"].numpy()
    assert np.isfinite(out_empty).all()
    np.testing.assert_allclose(model(fully_masked)["loc"], out_empty, atol=2e-5)


def test_loglik_matches_scipy_on_masked_targets():
    rng = np.random.default_rng(3)
    model = small("tnp-d", dim_y=2)
    batch = random_batch(rng, dy=2)
    batch["mask_t"] = np.array([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]], np.float32)
    p = {k: v.numpy().astype(np.float64) for k, v in model(batch).items()}
    logp = scipy.stats.norm.logpdf(batch["yt"], p["loc"], p["scale"]).sum(-1)
    expect = (logp * batch["mask_t"]).sum(1) / batch["mask_t"].sum(1)
    np.testing.assert_allclose(tfm.loglik(model, batch).numpy(), expect, rtol=1e-5)


def test_save_load_identical_predictions_from_json_and_yaml_specs(tmp_path):
    rng = np.random.default_rng(4)
    spec = {"preset": "tnp-d", **SMALL, "likelihood": {"name": "student-t", "min_scale": 0.01}}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    batch = random_batch(rng)
    for path in ("s.json", "s.yaml"):
        model = tfm.build_model(str(tmp_path / path))
        assert model.spec["likelihood"] == {"name": "student-t", "min_scale": 0.01}
        model.save(tmp_path / "m.keras")
        import keras

        for loaded in (tfm.load_model(tmp_path / "m.keras"), keras.models.load_model(tmp_path / "m.keras")):
            for key, value in model(batch).items():
                np.testing.assert_array_equal(loaded(batch)[key], value)


def test_spec_errors_name_the_problem():
    with pytest.raises(SpecError, match="unknown key 'encodr'.*did you mean 'encoder'"):
        tfm.build_model({"preset": "tnp-d", "encodr": {}})
    with pytest.raises(UnknownComponentError, match="unknown attention 'mha-yx'.*did you mean"):
        tfm.build_model({"preset": "tnp-d", "encoder": {"attention": "mha-yx"}})
    with pytest.raises(UnknownComponentError, match="unknown model 'tnp-e'.*'tnp-d'"):
        tfm.build_model("tnp-e")
    with pytest.raises(SpecError, match=r"'dim_x' must be an int in \[1, 4096\]"):
        tfm.build_model("tnp-d", dim_x="2")
    with pytest.raises(SpecError, match="has no option 'layer'.*did you mean 'layers'"):
        tfm.build_model({"preset": "tnp-d", "encoder": {"layer": 2}})


def test_bad_batches_raise_clear_errors():
    rng = np.random.default_rng(5)
    model = small("cnp")
    batch = random_batch(rng)
    with pytest.raises(BatchError, match=r"xt.*\[batch, n_points, dim\]"):
        model({**batch, "xt": batch["xt"][0]})
    nan = batch["xc"].copy()
    nan[1, 2, 0] = np.nan  # an input without a place (a NaN output is a missing value)
    with pytest.raises(BatchError, match=r"xc.*NaN.*\(1, 2, 0\)"):
        model({**batch, "xc": nan})
    with pytest.raises(BatchError, match="model expects inputs of dim 1"):
        model(random_batch(rng, dx=2))


def test_mixed_bfloat16_policy_keeps_float32_likelihood_and_stays_with_the_model(tmp_path):
    import keras

    model = small("tnp-d", dtype_policy="mixed_bfloat16")
    assert keras.config.dtype_policy().name == "float32"  # the process default is untouched
    params = model(random_batch(np.random.default_rng(6)))
    assert params["loc"].dtype.name == "float32"
    assert model.encoder.attn[0].compute_dtype == "bfloat16"
    assert small("tnp-d").encoder.attn[0].compute_dtype == "float32"  # built afterwards
    model.save(tmp_path / "mixed.keras")
    loaded = tfm.load_model(tmp_path / "mixed.keras")
    assert loaded.encoder.attn[0].compute_dtype == "bfloat16"
    assert keras.config.dtype_policy().name == "float32"


def test_pad_tasks_pads_feature_groups_with_their_set():
    tasks = [{"xc": np.ones((n, 1)), "yc": np.ones((n, 1)), "sc": np.full((n, 2), 3.0),
              "xt": np.ones((4, 1)), "yt": np.ones((4, 1)), "st": np.full((4, 2), 5.0)} for n in (2, 3)]
    batch = pad_tasks(tasks)
    assert batch["sc"].shape == (2, 3, 2) and batch["st"].shape == (2, 4, 2)
    np.testing.assert_array_equal(batch["sc"][0, :, 0], [3.0, 3.0, 0.0])
    np.testing.assert_array_equal(batch["mask_c"], [[1, 1, 0], [1, 1, 1]])


def test_bernoulli_loglik_and_predictive_match_numpy():
    rng = np.random.default_rng(3)
    model = small("tnp-d", dim_x=1, dim_y=2, likelihood="bernoulli")
    batch = random_batch(rng, dy=2)
    batch = {**batch, "yc": (batch["yc"] > 0).astype(np.float32), "yt": (batch["yt"] > 0).astype(np.float32)}
    logits = np.asarray(model(batch)["logits"], np.float64)  # [B, Nt, 2]
    p = 1.0 / (1.0 + np.exp(-logits))
    y = batch["yt"].astype(np.float64)
    expected = (y * np.log(p) + (1 - y) * np.log1p(-p)).sum(-1).mean(-1)  # per task, per target point
    np.testing.assert_allclose(np.asarray(tfm.loglik(model, batch)), expected, rtol=1e-5)
    out = tfm.predict(model, batch)
    np.testing.assert_allclose(out["mean"], p, rtol=1e-5)
    np.testing.assert_allclose(out["stddev"], np.sqrt(p * (1 - p)), rtol=1e-4)


def test_categorical_loglik_and_predictive_match_numpy():
    rng = np.random.default_rng(4)
    model = small("tnp-d", dim_x=1, dim_y=2, likelihood={"name": "categorical", "classes": 4})
    batch = random_batch(rng, dy=2)
    labels = lambda y: np.floor(np.clip(y + 2.0, 0.0, 3.99)).astype(np.float32)  # noqa: E731 - classes 0..3
    batch = {**batch, "yc": labels(batch["yc"]), "yt": labels(batch["yt"])}
    logits = np.asarray(model(batch)["logits"], np.float64)  # [B, Nt, 2, 4]
    assert logits.shape == (3, 5, 2, 4)
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    y = batch["yt"].astype(int)
    expected = np.log(np.take_along_axis(p, y[..., None], -1)[..., 0]).sum(-1).mean(-1)
    np.testing.assert_allclose(np.asarray(tfm.loglik(model, batch)), expected, rtol=1e-5)
    k = np.arange(4.0)
    mean = p @ k
    out = tfm.predict(model, batch, num_samples=2000, seed=1)
    np.testing.assert_allclose(out["mean"], mean, rtol=1e-5)
    np.testing.assert_allclose(out["stddev"], np.sqrt(p @ k**2 - mean**2), rtol=1e-4)
    samples = np.asarray(out["samples"])
    assert set(np.unique(samples)) <= set(k)
    freq = (samples[..., None] == k).mean(0)  # [B, Nt, 2, 4] sample frequencies
    np.testing.assert_allclose(freq, p, atol=0.05)


def test_categorical_rejects_fewer_than_two_classes():
    with pytest.raises(SpecError, match="'classes'"):
        small("tnp-d", likelihood={"name": "categorical", "classes": 1})
