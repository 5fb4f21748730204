"""Sampling in bounded memory (issue 38): chunked draws equal unchunked ones for a seed, one
trace for any number of rows, clear errors for budgets too small, and per-row draws that
follow their distributions.

References: the same call without chunks (one chunk of every row), sampling a window alone,
scipy.stats' CDFs (Kolmogorov-Smirnov) and the exact probabilities of discrete laws.
"""
import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
import tensorflow_probability as tfp

import taylorformer as tfm
from taylorformer.models import bounded_sampling
from taylorformer.errors import SpecError
from taylorformer.models.inference import predict

tfd = tfp.distributions
TINY_TF = {"encoder": {"layers": 2, "width": 8, "num_heads": 2, "head_dim": 4, "enc_dim": 4,
                       "dropout": 0.0}, "head": {"width": 8}}
TINY_TNPD = {"encoder": {"layers": 1, "width": 8, "num_heads": 2, "head_dim": 4},
             "head": {"width": 8, "hidden_layers": 1}}
_built = {}


def model_of(name):
    if name not in _built:
        tf.keras.utils.set_random_seed(0)
        _built[name] = tfm.build_model(name, **(TINY_TF if name == "taylorformer" else TINY_TNPD))
    return _built[name]


def batch_of(b=3, nc=4, nt=5, seed=0):
    rng = np.random.default_rng(seed)
    batch = {"xc": rng.uniform(-1, 1, (b, nc, 1)), "yc": rng.normal(size=(b, nc, 1)),
             "xt": rng.uniform(-1, 1, (b, nt, 1)), "yt": np.zeros((b, nt, 1)),
             "mask_c": np.ones((b, nc)), "mask_t": np.ones((b, nt))}
    batch["mask_t"][min(1, b - 1), -1] = 0  # a padded target
    return {key: value.astype(np.float32) for key, value in batch.items()}


@pytest.fixture
def rows_per_chunk(monkeypatch):
    """Force chunks of ``rows`` rows whatever the budget (the plan's output)."""
    def force(rows):
        monkeypatch.setattr(bounded_sampling, "rows_per_chunk", lambda *args, **kwargs: rows)
    return force


@pytest.mark.parametrize("order", [pytest.param("given", marks=pytest.mark.long), "random"])  # long: CI time
def test_chunked_samples_equal_unchunked_samples(order, rows_per_chunk):
    model, batch = model_of("taylorformer"), batch_of()
    whole, info = model.sample(batch, 4, order=order, seed=3, return_info=True)
    for rows in (1, 3, 5):  # one row; part of a window's samples; every sample of one window
        rows_per_chunk(rows)
        chunked, chunked_info = model.sample(batch, 4, order=order, seed=3, return_info=True)
        np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(chunked_info["order"], info["order"])
        for key, value in info["params"].items():
            np.testing.assert_allclose(chunked_info["params"][key], value, rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(whole)[:, 1, -1] == 0)  # padded target stays 0
    assert model.tracing_count() == 1  # every chunk size and row count: one trace


def test_reference_path_chunked_equals_unchunked(rows_per_chunk):
    model, batch = model_of("taylorformer"), batch_of(b=2, nt=3)
    whole = model.sample(batch, 2, seed=1, cache=False)
    rows_per_chunk(1)
    np.testing.assert_allclose(model.sample(batch, 2, seed=1, cache=False), whole, rtol=1e-5, atol=1e-5)


def test_a_window_draws_the_same_alone_or_in_a_batch():
    """Streams are keyed by window id: window 2 sampled alone (id 2) = in the batch."""
    model, batch = model_of("taylorformer"), batch_of()
    together = model.sample(batch, 3, seed=5)
    alone = model.sample({k: v[2:] for k, v in batch.items()}, 3, seed=5, window_ids=[2])
    np.testing.assert_allclose(alone[:, 0], together[:, 2], rtol=1e-5, atol=1e-5)
    # more samples: the first ones are unchanged
    np.testing.assert_allclose(model.sample(batch, 5, seed=5)[:3], together, rtol=1e-5, atol=1e-5)
    assert not np.allclose(model.sample(batch, 3, seed=6), together)  # another seed, other draws


def test_no_retrace_for_new_sample_or_window_counts():
    model = model_of("taylorformer")
    for samples, windows in ((2, 3), (7, 3), (1, 1), (5, 2)):
        model.sample(batch_of(b=windows), samples, seed=0)
    assert model.tracing_count() == 1  # the first call traced (here or in an earlier test), no other


def test_budget_with_no_room_for_one_row_is_a_clear_error():
    with pytest.raises(SpecError, match=r"memory budget of 1 MB leaves no room for one \(window, sample\).*"
                                        r"raise the budget to at least"):
        model_of("taylorformer").sample(batch_of(), 2, memory_budget="1MB")


def test_a_real_small_budget_gives_the_same_samples():
    """A budget with room for about 3 rows (several chunks) against an ample one."""
    model, batch = model_of("taylorformer"), batch_of()
    ample = model.sample(batch, 4, seed=2, memory_budget="3GB")
    per_row = model._estimated_row_bytes(model.prepare(batch), True)
    tight = (bounded_sampling.held_bytes() + bounded_sampling.FIXED_BYTES + 4 * per_row)
    np.testing.assert_allclose(model.sample(batch, 4, seed=2, memory_budget=tight), ample, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value, expected", [("2GB", 2 * 10**9), ("512MiB", 512 * 2**20), ("1.5g", int(1.5 * 2**30)),
                                             (4096, 4096), (" 10 kb ", 10**4)])
def test_parse_memory(value, expected):
    assert bounded_sampling.parse_memory(value) == expected


@pytest.mark.parametrize("value", ["", "2 parsecs", "-1GB", "0", 0, True, 1.5, "nan", None])
def test_parse_memory_rejects(value):
    with pytest.raises(SpecError, match="memory_budget must be a positive size"):
        bounded_sampling.parse_memory(value)


def test_sample_rejects_a_bad_budget_and_window_ids():
    model, batch = model_of("taylorformer"), batch_of()
    with pytest.raises(SpecError, match="memory_budget must be a positive size"):
        model.sample(batch, 2, memory_budget="lots")
    with pytest.raises(SpecError, match="window_ids must be 3 non-negative ints"):
        model.sample(batch, 2, window_ids=[0, 1])


def test_row_uniforms_are_uniform_and_independent_of_the_other_rows():
    keys = bounded_sampling.row_keys([1, 2], tf.range(50), tf.range(40))  # 2000 rows
    u = bounded_sampling.row_uniforms(keys, 3, 10).numpy()
    assert u.min() > 0 and u.max() < 1
    assert scipy.stats.kstest(u.ravel(), "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.05
    np.testing.assert_array_equal(bounded_sampling.row_uniforms(keys[7:9], 3, 10), u[7:9])
    assert len(np.unique(keys.numpy())) == keys.shape[0]


def _ks(draws, cdf):
    return scipy.stats.kstest(np.ravel(draws), cdf).pvalue


def test_draws_follow_their_distributions():
    """Inversion draws of every built-in likelihood's family against scipy / exact laws."""
    n = 4000
    keys = bounded_sampling.row_keys([0, 9], tf.range(n), [0])
    shape = [n, 1]
    normal = bounded_sampling.draw(tfd.Normal(tf.fill(shape, 1.5), tf.fill(shape, 2.0)), keys, 4)
    assert _ks(normal, scipy.stats.norm(1.5, 2.0).cdf) > 1e-3
    student = bounded_sampling.draw(tfd.StudentT(tf.fill(shape, 3.0), tf.fill(shape, -1.0), tf.fill(shape, 0.5)),
                                    keys, 4)
    assert _ks(student, scipy.stats.t(3.0, -1.0, 0.5).cdf) > 1e-3
    weights, locs, scales = np.array([0.2, 0.5, 0.3]), np.array([-4.0, 0.0, 5.0]), np.array([0.5, 1.0, 2.0])
    logits = tf.broadcast_to(np.log(weights).astype(np.float32), shape + [3])
    mixture = tfd.MixtureSameFamily(tfd.Categorical(logits=logits),
                                    tfd.Normal(tf.broadcast_to(locs.astype(np.float32), shape + [3]),
                                               tf.broadcast_to(scales.astype(np.float32), shape + [3])))
    mix_cdf = lambda x: sum(w * scipy.stats.norm(m, s).cdf(x) for w, m, s in zip(weights, locs, scales))  # noqa: E731
    assert _ks(bounded_sampling.draw(mixture, keys, 4), mix_cdf) > 1e-3
    coins = bounded_sampling.draw(tfd.Bernoulli(probs=tf.fill(shape, 0.3)), keys, 4).numpy()
    assert set(np.unique(coins)) <= {0.0, 1.0} and abs(coins.mean() - 0.3) < 4 * np.sqrt(0.21 / n)
    probs = np.array([0.1, 0.6, 0.3], np.float32)
    labels = bounded_sampling.draw(tfd.Categorical(probs=tf.broadcast_to(probs, shape + [3])), keys, 4).numpy()
    chi2 = scipy.stats.chisquare(np.bincount(labels.astype(int).ravel(), minlength=3), n * probs)
    assert chi2.pvalue > 1e-3


def test_conditional_samples_are_keyed_by_window():
    model, batch = model_of("tnp-d"), batch_of()
    together = predict(model, batch, num_samples=6, seed=4)["samples"]
    alone = predict(model, {k: v[1:2] for k, v in batch.items()}, num_samples=6, seed=4, window_ids=[1])["samples"]
    np.testing.assert_allclose(alone[:, 0], together[:, 1], rtol=1e-6)
    dist = model.distribution(batch)  # the draws standardise to N(0, 1)
    z = (np.asarray(together) - dist.mean().numpy()) / dist.stddev().numpy()
    assert _ks(z, scipy.stats.norm.cdf) > 1e-3


def _series_task(tmp_path):
    import pandas as pd

    from taylorformer.task import make_task

    t = np.arange(120)
    pd.DataFrame({"date": pd.date_range("2020-01-01", periods=120, freq="h"),
                  "y": np.sin(t / 5.0) + 0.01 * t}).to_csv(tmp_path / "s.csv", index=False)
    return make_task("csv", {"path": str(tmp_path / "s.csv"), "target_columns": "y", "date_column": "date",
                             "split": (0.6, 0.2, 0.2), "context_length": 4, "horizon": 5, "lead_input": False})


def test_forecasts_are_the_same_whatever_the_budget_and_the_other_windows(tmp_path, rows_per_chunk):
    task, model = _series_task(tmp_path), model_of("taylorformer")
    starts = task.window_starts("test")[:3]
    whole = task.forecast(model, starts, num_samples=4, seed=1, memory_budget="3GB")
    alone = task.forecast(model, int(starts[2]), num_samples=4, seed=1)  # keyed by the window's start
    np.testing.assert_allclose(alone["samples"][:, 0], whole["samples"][:, 2], rtol=1e-5)
    rows_per_chunk(2)
    frame = task.forecast_frame(model, starts, num_samples=4, seed=1, memory_budget="3GB", quantiles=(0.5,))
    np.testing.assert_allclose(frame[("y", "q0.5")].to_numpy().reshape(3, 5),
                               np.median(whole["samples"][..., 0], 0), rtol=1e-5)


def test_evaluate_samples_do_not_depend_on_the_batch_size(tmp_path):
    from taylorformer.workflow.evaluation import evaluate

    task, model = _series_task(tmp_path), model_of("taylorformer")
    one = evaluate(model, task, batch_size=4, num_batches=1, num_samples=3, memory_budget="3GB")
    two = evaluate(model, task, batch_size=2, num_batches=2, num_samples=3)
    for key in ("mse", "crps", "coverage95"):
        assert one[key] == pytest.approx(two[key], rel=1e-5)
    with pytest.raises(SpecError, match="memory_budget must be a positive size"):
        evaluate(model, task, num_batches=1, num_samples=3, memory_budget="-2GB")


def test_cli_evaluate_rejects_a_bad_memory_budget_in_one_line(tmp_path, capsys):
    from taylorformer.cli import main

    assert main(["evaluate", str(tmp_path), "--samples", "10", "--memory-budget", "lots"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    assert "memory budget must be a positive size" in err and "'lots'" in err


@pytest.mark.slow
def test_xla_draws_the_same_samples():
    """The row streams are integer hashes: the XLA-compiled loop draws the same paths."""
    model, batch = model_of("taylorformer"), batch_of()
    np.testing.assert_allclose(model.sample(batch, 3, seed=2, jit_compile=True), model.sample(batch, 3, seed=2),
                               rtol=1e-4, atol=1e-4)
