"""Missing observations: a NaN output value means "not observed" (taylorformer.batch.with_masks).

The reference is the same task with those points removed: every preset must give the same
predictive distribution and the same log-likelihood, keep its gradients finite with none,
some or all points missing, and (autoregressive) draw the same samples.
"""
import numpy as np
import pytest
import tensorflow as tf

import taylorformer as tfm
from taylorformer import registry
from taylorformer.batch import validate_batch
from taylorformer.errors import BatchError

PRESETS = registry.names("model")
MISSING_C, MISSING_T = [1, 4], [2]


def one_layer(preset):
    return tfm.build_model({"preset": preset, "encoder": {"layers": 1}})


@pytest.fixture(scope="module")
def models():
    return {preset: one_layer(preset) for preset in PRESETS}


def make_batch(seed=0, b=2, nc=7, nt=5):
    rng = np.random.default_rng(seed)
    batch = {"xc": rng.uniform(-2, 2, (b, nc, 1)), "yc": rng.normal(size=(b, nc, 1)),
             "xt": rng.uniform(-2, 2, (b, nt, 1)), "yt": rng.normal(size=(b, nt, 1))}
    batch = {k: v.astype(np.float32) for k, v in batch.items()}
    # the unobserved context points sit next to the first target: a neighbour search that
    # looked at them would pick them
    batch["xc"][:, MISSING_C] = batch["xt"][:, :1] + np.float32(1e-3)
    return batch


def with_nan(batch, key, index):
    out = {k: v.copy() for k, v in batch.items()}
    out[key][:, index] = np.nan
    return out


def removed(batch, pair, index):
    x_key, y_key = pair
    keep = np.setdiff1d(np.arange(batch[x_key].shape[1]), index)
    return {**batch, x_key: batch[x_key][:, keep], y_key: batch[y_key][:, keep]}


def params(model, batch):
    return {k: np.asarray(v) for k, v in model(batch).items()}


@pytest.mark.parametrize("preset", PRESETS)
def test_unobserved_context_points_equal_removed_ones(preset, models):
    model, batch = models[preset], make_batch()
    got, expect = params(model, with_nan(batch, "yc", MISSING_C)), params(model, removed(batch, ("xc", "yc"), MISSING_C))
    for key in expect:
        np.testing.assert_allclose(got[key], expect[key], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tfm.loglik(model, with_nan(batch, "yc", MISSING_C)),
                               tfm.loglik(model, removed(batch, ("xc", "yc"), MISSING_C)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("preset", PRESETS)
def test_unobserved_targets_leave_the_loss_as_if_removed(preset, models):
    model, batch = models[preset], make_batch(1)
    keep = np.setdiff1d(np.arange(batch["xt"].shape[1]), MISSING_T)
    gone = removed(batch, ("xt", "yt"), MISSING_T)
    np.testing.assert_allclose(tfm.loglik(model, with_nan(batch, "yt", MISSING_T)), tfm.loglik(model, gone),
                               rtol=1e-5, atol=1e-6)
    got, expect = params(model, with_nan(batch, "yt", MISSING_T)), params(model, gone)
    for key in expect:  # the other targets' (teacher-forced) conditionals are unchanged
        np.testing.assert_allclose(got[key][:, keep], expect[key], rtol=1e-5, atol=1e-5)


def loss_and_grads(model, batch):
    with tf.GradientTape() as tape:
        loss, ll, observed = model.np_loss(batch, training=False)
    return loss, tape.gradient(loss, model.trainable_variables), observed


@pytest.mark.parametrize("preset", PRESETS)
def test_gradients_stay_finite_with_none_some_or_all_missing(preset, models):
    model, batch = models[preset], make_batch(2)
    nc, nt = batch["xc"].shape[1], batch["xt"].shape[1]
    cases = {"none": batch, "some": with_nan(with_nan(batch, "yc", MISSING_C), "yt", MISSING_T),
             "all context": with_nan(batch, "yc", list(range(nc))),
             "all targets": with_nan(batch, "yt", list(range(nt)))}
    for name, case in cases.items():
        loss, grads, observed = loss_and_grads(model, case)
        assert np.isfinite(loss.numpy()), name
        assert all(g is None or np.isfinite(g.numpy()).all() for g in grads), name
        if name == "all targets":  # nothing to score: the batch changes nothing
            assert loss.numpy() == 0.0 and not observed.numpy().any()
            assert all(g is None or not g.numpy().any() for g in grads)
    # no observed context at all: the model's prior, as with an empty context set
    empty = params(model, removed(batch, ("xc", "yc"), list(range(nc))))
    got = params(model, cases["all context"])
    for key in empty:
        np.testing.assert_allclose(got[key], empty[key], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("preset", [p for p in PRESETS if registry.get("model", p)["kind"] == "autoregressive"])
def test_samples_skip_unobserved_context_and_never_read_the_targets(preset, models):
    model, batch = models[preset], make_batch(3)
    expect = model.sample(removed(batch, ("xc", "yc"), MISSING_C), num_samples=3, seed=4)
    unknown_targets = with_nan(with_nan(batch, "yc", MISSING_C), "yt", list(range(batch["xt"].shape[1])))
    got = model.sample(unknown_targets, num_samples=3, seed=4)
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)
    assert np.isfinite(np.asarray(got)).all()


def test_fit_and_evaluate_with_missing_values_under_xla():
    model = tfm.build_model("tnp-d", encoder={"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
                            head={"width": 16, "hidden_layers": 1})
    model.compile(optimizer="adam", jit_compile=True)
    batch = with_nan(with_nan(make_batch(5, b=3), "yc", MISSING_C), "yt", MISSING_T)
    batch["yt"][0] = np.nan  # task 0 has no observed target: evaluate leaves it out
    data = tf.data.Dataset.from_tensors(batch).repeat()
    history = model.fit(data, steps_per_epoch=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    logs = model.evaluate(tf.data.Dataset.from_tensors(batch), return_dict=True, verbose=0)
    per_task = tfm.loglik(model, batch).numpy()
    np.testing.assert_allclose(logs["loglik"], per_task[1:].mean(), rtol=1e-5)
    np.testing.assert_allclose(logs["loss"], -per_task[1:].mean(), rtol=1e-5)


def test_inputs_stay_errors_and_infinite_outputs_too():
    batch = make_batch()
    validate_batch(with_nan(batch, "yc", [0]))  # a NaN output is a missing value
    for key in ("xc", "xt"):
        with pytest.raises(BatchError, match=rf"\['{key}'\] has 2 non-finite .*without a place"):
            validate_batch(with_nan(batch, key, [0]))
    inf = {**batch, "yt": batch["yt"].copy()}
    inf["yt"][0, 0] = np.inf
    with pytest.raises(BatchError, match=r"\['yt'\] has 1 infinite value"):
        validate_batch(inf)
