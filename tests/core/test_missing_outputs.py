"""Several outputs (Dy > 1) with some values missing: the observed ones still count.

A token carries a per-output observed flag (spec ``observed_flags``, on by default when
Dy > 1), the loss and the metrics sum over the observed output values only (checked
against NumPy), a missing value's number never matters, and LocalTaylor's neighbours are
the points with every output observed (checked against removing the others).
"""
import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

import taylorformer as tfm
from taylorformer import registry
from taylorformer.batch import fully_observed, with_masks
from taylorformer.errors import SpecError
from taylorformer.workflow.evaluation import batch_metrics
from taylorformer.spec import resolve_spec

PRESETS = registry.names("model")
PARTIAL = [1, 4]  # context points with output 1 missing (output 0 observed)


def make_batch(seed=0, b=2, nc=7, nt=5, dim_x=1):
    rng = np.random.default_rng(seed)
    batch = {"xc": rng.uniform(-2, 2, (b, nc, dim_x)), "yc": rng.normal(size=(b, nc, 2)),
             "xt": rng.uniform(-2, 2, (b, nt, dim_x)), "yt": rng.normal(size=(b, nt, 2))}
    batch = {k: v.astype(np.float32) for k, v in batch.items()}
    batch["xc"][:, PARTIAL] = batch["xt"][:, :1] + np.float32(1e-3)  # nearest to target 0
    return batch


def two_output_model(preset, **spec):
    return tfm.build_model({"preset": preset, "dim_y": 2, "encoder": {"layers": 1}, **spec})


@pytest.fixture(scope="module")
def models():
    return {preset: two_output_model(preset) for preset in PRESETS}


def params(model, batch):
    return {k: np.asarray(v) for k, v in model(batch).items()}


def assert_params_close(a, b):
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-5, err_msg=key)


def test_the_flags_are_on_for_several_outputs_and_off_in_specs_saved_before_them(tmp_path):
    assert resolve_spec({"preset": "tnp-d", "dim_y": 2})["observed_flags"] is True
    assert resolve_spec({"preset": "tnp-d"})["observed_flags"] is False
    assert resolve_spec({"preset": "tnp-d", "dim_y": 2, "observed_flags": False})["observed_flags"] is False
    saved = resolve_spec({"preset": "tnp-d", "dim_y": 2})
    del saved["observed_flags"]  # a resolved spec (it has provenance) from before the flags
    assert resolve_spec(saved)["observed_flags"] is False
    with pytest.raises(SpecError, match="observed_flags"):
        resolve_spec({"preset": "tnp-d", "observed_flags": "yes"})
    # the encoder reads [y, flags]: its first layer is Dy wider than without flags
    on = two_output_model("cnp")
    off = two_output_model("cnp", observed_flags=False)
    assert on.count_params() - off.count_params() == 2 * on.spec["encoder"]["width"]
    batch = make_batch()
    batch["yc"][:, PARTIAL, 1] = np.nan
    on.save(tmp_path / "m.keras")
    assert_params_close(params(tfm.load_model(tmp_path / "m.keras"), batch), params(on, batch))


@pytest.mark.parametrize("preset", PRESETS)
def test_a_partly_observed_context_point_informs_its_observed_output(preset, models):
    model = models[preset]
    batch = make_batch(dim_x=model.dim_x)
    nan = {**batch, "yc": batch["yc"].copy()}
    nan["yc"][:, PARTIAL, 1] = np.nan
    got = params(model, nan)
    # the missing value's number never matters: any value flagged unobserved gives the same
    flagged = {**batch, "observed_c": np.ones_like(batch["yc"])}
    flagged["observed_c"][:, PARTIAL, 1] = 0.0
    assert_params_close(got, params(model, flagged))
    # ... yet the point is there: not the same as removing it, nor as observing a 0
    keep = np.setdiff1d(np.arange(batch["xc"].shape[1]), PARTIAL)
    gone = params(model, {**batch, "xc": batch["xc"][:, keep], "yc": batch["yc"][:, keep]})
    zero = {**batch, "yc": np.nan_to_num(nan["yc"])}
    for other in (gone, params(model, zero)):
        assert max(np.abs(got[k] - other[k]).max() for k in got) > 1e-4
    # a point with every output missing is removed
    both = {**batch, "yc": batch["yc"].copy()}
    both["yc"][:, PARTIAL] = np.nan
    assert_params_close(params(model, both), gone)


@pytest.mark.parametrize("preset", ["tnp-d", "taylorformer"])
def test_the_loglik_sums_the_observed_output_values_only(preset, models):
    """NumPy reference: Normal log densities of the observed target values, summed over
    outputs, averaged over the points with at least one observed output."""
    model, batch = models[preset], make_batch(1)
    batch["yt"][0, 1, 0] = np.nan  # one output missing
    batch["yt"][1, 3, :] = np.nan  # both: the point leaves the mean
    batch["yt"][1, 0, 1] = np.nan
    p = params(model, batch)  # conditionals given the observed earlier targets (autoregressive)
    observed = ~np.isnan(batch["yt"])
    logp = np.where(observed, scipy.stats.norm.logpdf(np.nan_to_num(batch["yt"]), p["loc"], p["scale"]), 0.0)
    points = observed.any(-1)
    expect = logp.sum(-1).sum(1) / points.sum(1)
    np.testing.assert_allclose(tfm.loglik(model, batch), expect, rtol=1e-5)
    loss, _, _ = model.np_loss(batch)
    np.testing.assert_allclose(float(loss), -expect.mean(), rtol=1e-5)
    # evaluate's per-point metrics: squared error over the observed outputs, coverage of them
    m = batch_metrics(model, batch)
    sq = np.where(observed, (p["loc"] - np.nan_to_num(batch["yt"])) ** 2, 0.0)
    np.testing.assert_allclose(m["sq_err"], (sq.sum(-1) / np.maximum(observed.sum(-1), 1))[points], rtol=1e-5)
    z = np.abs(np.nan_to_num(batch["yt"]) - p["loc"]) / p["scale"]
    inside = ((z <= scipy.stats.norm.ppf(0.975)) | ~observed).all(-1)
    np.testing.assert_array_equal(m["inside95"], inside[points])


def test_local_taylor_neighbours_are_points_with_every_output_observed(models):
    model = models["taylorformer"]
    batch = make_batch(2)
    nan = {**batch, "yc": batch["yc"].copy()}
    nan["yc"][:, PARTIAL, 1] = np.nan
    keep = np.setdiff1d(np.arange(batch["xc"].shape[1]), PARTIAL)
    gone = {**batch, "xc": batch["xc"][:, keep], "yc": batch["yc"][:, keep]}
    got = model.wrapper.features(fully_observed(with_masks(nan)), causal=True)
    expect = model.wrapper.features(with_masks(gone), causal=True)
    nc, nc_gone = batch["xc"].shape[1], len(keep)
    for group in ("x", "seen", "own"):  # the targets' features: the partial points are no neighbours
        np.testing.assert_allclose(got.group(group)[:, nc:], expect.group(group)[:, nc_gone:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.mean_t, expect.mean_t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("preset", ["taylorformer", "tnp-a"])
def test_samples_with_partly_observed_context_match_the_reference_decoding(preset, models):
    model = models[preset]
    batch = make_batch(3, dim_x=model.dim_x)
    batch["yc"][:, PARTIAL, 1] = np.nan
    batch["yt"][:] = np.nan  # never read
    cached = model.sample(batch, 3, seed=4, cache=True)
    full = model.sample(batch, 3, seed=4, cache=False)
    assert np.isfinite(cached).all()
    np.testing.assert_allclose(cached, full, rtol=1e-4, atol=1e-4)


def test_fit_under_xla_with_some_outputs_missing():
    model = two_output_model("tnp-d")
    rng = np.random.default_rng(5)
    batches = []
    for seed in range(3):
        b = make_batch(seed, b=4)
        b["yc"][rng.uniform(size=b["yc"].shape) < 0.3] = np.nan
        b["yt"][rng.uniform(size=b["yt"].shape) < 0.3] = np.nan
        batches.append(b)
    data = tf.data.Dataset.from_tensor_slices({k: np.concatenate([b[k] for b in batches]) for k in batches[0]}).batch(4)
    model.compile(optimizer="adam", jit_compile=True)
    history = model.fit(data, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    with tf.GradientTape() as tape:
        loss, _, _ = model.np_loss(batches[0])
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(np.isfinite(g.numpy()).all() for g in grads if g is not None)
