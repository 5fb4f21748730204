"""Per-window standardisation (spec ``standardise: window``, :mod:`taylorformer.models.window_standardisation`)
against NumPy: the context statistics (masked and NaN points left out, the floor), the
parameters mapped back, the log-likelihood's change of variables; the model's predictive is
equivariant to ``y -> a y + b`` and to a shift of one window (conditional and autoregressive,
both decoding paths); the spec option, a task's default, saving, export; the training range
and its warning."""
import json
import math
import warnings
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from taylorformer.models import window_standardisation as wn
from taylorformer.batch import with_masks
from taylorformer.errors import SpecError
from taylorformer.models.inference import loglik, predict
from taylorformer.models import build_model, load_model
from taylorformer.spec import resolve_spec

LAYERS = {"encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}, "head": {"width": 16}}
TINY = {"preset": "tnp-d", **LAYERS, "standardise": "window"}
TINY_AR = {"preset": "taylorformer", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
           "head": {"width": 16}, "standardise": "window"}


def _batch(seed=0, b=3, nc=7, nt=4, dim_y=1, level=0.0):
    rng = np.random.default_rng(seed)
    return {"xc": rng.uniform(-1, 1, (b, nc, 1)).astype(np.float32),
            "yc": (level + rng.normal(size=(b, nc, dim_y))).astype(np.float32),
            "xt": rng.uniform(-1, 1, (b, nt, 1)).astype(np.float32),
            "yt": (level + rng.normal(size=(b, nt, dim_y))).astype(np.float32)}


def _affine(batch, a, b):
    """``batch`` with every output value ``a y + b`` (``b`` a number or one per window)."""
    b = np.reshape(np.asarray(b, np.float32), (-1, 1, 1))
    return {**batch, "yc": a * batch["yc"] + b, "yt": a * batch["yt"] + b}


def test_context_statistics_match_numpy_leaving_out_padding_and_nan():
    rng = np.random.default_rng(1)
    yc = rng.normal(3.0, 2.0, (4, 6, 2)).astype(np.float32)
    mask = np.ones((4, 6), np.float32)
    mask[0, 4:] = 0  # padding, holding values that must not count
    yc[1, 2, 0] = np.nan  # an unobserved value of one output
    yc[2, :, 1] = 5.0  # a constant context: the floor
    yc[3, 1:, 0] = np.nan  # one observed value: scale 1
    yc[3, :, 1] = np.nan  # none: shift 0, scale 1
    batch = with_masks({"xc": np.zeros((4, 6, 1), np.float32), "yc": yc, "mask_c": mask,
                        "xt": np.zeros((4, 2, 1), np.float32), "yt": np.zeros((4, 2, 2), np.float32)})
    shift, scale = (v.numpy()[:, 0] for v in wn.context_statistics(batch, min_scale=0.05))
    for w in range(4):
        for d in range(2):
            values = yc[w, mask[w] > 0, d].astype(np.float64)
            values = values[~np.isnan(values)]
            if values.size == 0:
                want = (0.0, 1.0)
            elif values.size == 1:
                want = (values[0], 1.0)
            else:
                want = (values.mean(), max(values.std(), 0.05))
            np.testing.assert_allclose([shift[w, d], scale[w, d]], want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("likelihood", ["normal", "student-t", "mixture"])
def test_parameters_map_back_to_the_distribution_of_shift_plus_scale_z(likelihood):
    """mean and stddev of the mapped-back distribution = m + s mean_z and s std_z; its log
    density = log p_z((y - m) / s) - log s (the change of variables)."""
    model = build_model({**TINY, "likelihood": {"name": likelihood}, "dim_y": 2})
    rng = np.random.default_rng(2)
    raw = tf.constant(rng.normal(size=(2, 3, model.likelihood.num_params(2))), tf.float32)
    params = model.likelihood.parameters(raw)
    shift = rng.normal(0, 50, (2, 1, 2))
    scale = rng.uniform(0.1, 20, (2, 1, 2))
    z_dist = model.likelihood.distribution(params)
    y_dist = model.likelihood.distribution(wn.to_original_units(params, shift, scale))
    np.testing.assert_allclose(y_dist.mean(), shift + scale * z_dist.mean().numpy(), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(y_dist.stddev(), scale * z_dist.stddev().numpy(), rtol=1e-5)
    y = rng.normal(shift, scale, (2, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(y_dist.log_prob(y), z_dist.log_prob(((y - shift) / scale).astype(np.float32))
                               - np.log(scale), rtol=1e-4, atol=1e-4)


def test_reported_loglik_is_the_window_unit_loglik_minus_log_scale_in_numpy():
    """taylorformer.loglik of a window model = the mean over targets of the network's
    Normal log density of (y - m) / s (NumPy) minus sum_d log s_d, m, s from NumPy."""
    model = build_model({**TINY, "dim_y": 2})
    batch = _batch(3, dim_y=2, level=40.0)
    batch["yc"] = batch["yc"] * np.array([1.0, 8.0], np.float32)
    prepared = with_masks(batch)
    yc = batch["yc"].astype(np.float64)
    m, s = yc.mean(1, keepdims=True), np.maximum(yc.std(1, keepdims=True), wn.DEFAULT_MIN_SCALE)
    z_batch = {**batch, "yc": ((yc - m) / s).astype(np.float32), "yt": ((batch["yt"] - m) / s).astype(np.float32)}
    params = model.network(with_masks(z_batch))
    loc, sd = params["loc"].numpy().astype(np.float64), params["scale"].numpy().astype(np.float64)
    z = (batch["yt"] - m) / s
    logp = -0.5 * ((z - loc) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi) - np.log(s)
    np.testing.assert_allclose(loglik(model, prepared).numpy(), logp.sum(-1).mean(1), rtol=1e-4)


@pytest.mark.parametrize("a, b", [(3.0, 100.0), (0.25, -7.0), (1.0, [5.0, -300.0, 2e3])])
def test_conditional_predictive_is_equivariant_to_affine_maps_of_y(a, b):
    """Same predictive in original units for y and a y + b (b per window: a constant added
    to each window), and log-likelihood lower by log a."""
    model = build_model(TINY)
    batch = _batch(4)
    mapped = _affine(batch, a, b)
    d, d2 = model.predict_distribution(batch), model.predict_distribution(mapped)
    shift = np.reshape(np.asarray(b, np.float32), (-1, 1, 1))
    np.testing.assert_allclose(d2.mean(), a * d.mean().numpy() + shift, rtol=1e-5, atol=2e-3 * a)
    np.testing.assert_allclose(d2.stddev(), a * d.stddev().numpy(), rtol=1e-4)
    np.testing.assert_allclose(loglik(model, mapped), loglik(model, batch).numpy() - math.log(a), atol=1e-3)


def test_autoregressive_samples_are_equivariant_on_both_decoding_paths():
    """Joint samples for a y + b (b per window) = a x the samples for y + b, cached and
    reference decoding alike; the teacher-forced log-likelihood (which reads yt in window
    units) lower by log a."""
    model = build_model(TINY_AR)
    batch = _batch(5, b=2, nt=3)
    mapped = _affine(batch, 2.0, [50.0, -10.0])
    s1 = model.sample(batch, 3, seed=7, cache=True).numpy()
    want = 2.0 * s1 + np.array([50.0, -10.0], np.float32)[None, :, None, None]
    for cache in (True, False):
        np.testing.assert_allclose(model.sample(mapped, 3, seed=7, cache=cache), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(loglik(model, mapped), loglik(model, batch).numpy() - math.log(2.0),
                               rtol=1e-5, atol=1e-3)


def test_masked_and_nan_context_points_change_nothing():
    model = build_model(TINY)
    batch = _batch(7, nc=5)
    padded = {**batch, "xc": np.concatenate([batch["xc"], np.full((3, 2, 1), 0.5, np.float32)], 1),
              "yc": np.concatenate([batch["yc"], np.full((3, 2, 1), 1e4, np.float32)], 1),
              "mask_c": np.concatenate([np.ones((3, 5)), np.zeros((3, 2))], 1).astype(np.float32)}
    nan = {**padded, "yc": np.concatenate([batch["yc"], np.full((3, 2, 1), np.nan, np.float32)], 1)}
    nan.pop("mask_c")
    base = model.predict_distribution(batch)
    for other in (padded, nan):
        d = model.predict_distribution(other)
        np.testing.assert_allclose(d.mean(), base.mean(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(d.stddev(), base.stddev(), rtol=1e-5, atol=1e-5)


def test_a_constant_context_stays_finite():
    model = build_model(TINY)
    batch = {**_batch(8), "yc": np.full((3, 7, 1), 12.5, np.float32)}
    out = predict(model, batch)
    assert np.isfinite(out["mean"]).all() and np.isfinite(out["stddev"]).all()


def test_spec_option_defaults_and_refusals():
    assert resolve_spec("tnp-d")["standardise"] == "global"
    assert resolve_spec("tnp-d", task_defaults={"standardise": "window"})["standardise"] == "window"
    assert resolve_spec({"preset": "tnp-d", "standardise": "global"},
                        task_defaults={"standardise": "window"})["standardise"] == "global"
    with pytest.raises(SpecError, match="standardise must be one of"):
        resolve_spec("tnp-d", standardise="per-window")
    with pytest.raises(SpecError, match="standardise_min_scale"):
        resolve_spec("tnp-d", standardise_min_scale=0)
    with pytest.raises(SpecError, match="discrete"):
        build_model({**TINY, "likelihood": {"name": "bernoulli"}})


def test_saved_model_keeps_the_option_and_training_range(tmp_path):
    model = build_model(TINY)
    batch = _batch(9, level=5.0)
    model.training_range.update(model.network_inputs(with_masks(batch)))
    model.save(tmp_path / "m.keras")
    loaded = load_model(tmp_path / "m.keras")
    assert loaded.spec["standardise"] == "window"
    np.testing.assert_array_equal(loaded.training_range.low.numpy(), model.training_range.low.numpy())
    np.testing.assert_array_equal(loaded.training_range.high.numpy(), model.training_range.high.numpy())
    np.testing.assert_allclose(loaded.predict_distribution(batch).mean(), model.predict_distribution(batch).mean(),
                               rtol=1e-6)


def test_the_earlier_option_names_are_read_with_a_warning(tmp_path):
    """``normalise`` / ``normalise_min_scale`` (before ``normalise`` named only the data
    units of the Normaliser) in a spec dict, a spec file, a task's defaults and a saved
    model are read as ``standardise`` / ``standardise_min_scale``; both names is an error."""
    with pytest.warns(DeprecationWarning, match="'normalise' is now called 'standardise'"):
        old = resolve_spec({"preset": "tnp-d", **LAYERS, "normalise": "window", "normalise_min_scale": 0.5})
    assert old == resolve_spec({**TINY, "standardise_min_scale": 0.5})
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"preset": "tnp-d", "normalise": "window"}))
    with pytest.warns(DeprecationWarning, match="'standardise'"):
        assert resolve_spec(str(path))["standardise"] == "window"
    with pytest.warns(DeprecationWarning, match="task model defaults: 'normalise'"):
        assert resolve_spec("tnp-d", task_defaults={"normalise": "window"})["standardise"] == "window"
    with pytest.raises(SpecError, match="both 'normalise' and 'standardise'"):
        resolve_spec({**TINY, "normalise": "global"})

    model = build_model(TINY)
    model.save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as source, \
            zipfile.ZipFile(tmp_path / "old.keras", "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                spec = config["config"]["spec"]
                config["config"]["spec"] = {("normalise" if k == "standardise" else k): v for k, v in spec.items()}
                data = json.dumps(config).encode()
            target.writestr(item, data)
    with pytest.warns(DeprecationWarning, match="'normalise' is now called 'standardise'"):
        loaded = load_model(tmp_path / "old.keras")
    assert loaded.spec == model.spec and loaded.standardise == "window"


def test_training_records_the_range_and_inference_warns_far_outside_it():
    """A global model trained on levels near 0 warns on a context at level 50; the same
    context shifted into range does not; a window model sees window units and does not."""
    import keras

    def fit(spec):
        model = build_model(spec)
        model.compile(optimizer=keras.optimizers.AdamW(1e-3))
        model.train_step(_batch(10))  # what fit runs per step (eagerly here: no tracing)
        return model

    model = fit({**TINY, "standardise": "global"})
    low, high = model.training_range.low.numpy(), model.training_range.high.numpy()
    batch = _batch(10)
    np.testing.assert_allclose(low, [batch["xc"].min(), batch["yc"].min()], rtol=1e-6)
    np.testing.assert_allclose(high, [batch["xc"].max(), batch["yc"].max()], rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wn.TrainingRangeWarning)
        model.predict_distribution(batch)  # inside: quiet
    with pytest.warns(wn.TrainingRangeWarning, match=r"context outputs y0 .* standardise 'window'"):
        model.predict_distribution(_affine(batch, 1.0, 50.0))
    window = fit(TINY)
    assert window.training_range.high.numpy()[1] < 3  # z-scores of the windows
    with warnings.catch_warnings():
        warnings.simplefilter("error", wn.TrainingRangeWarning)
        window.predict_distribution(_affine(batch, 1.0, 50.0))


def test_export_serves_a_window_model_at_two_context_sizes(tmp_path):
    """The SavedModel's serving signature normalises each window inside: it equals the
    Keras model's predictive (an identity global normaliser) at Nc = 5 and 11."""
    from taylorformer.prediction.export import export_model

    model = build_model(TINY)
    export_model(model, tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    for nc in (5, 11):
        batch = _affine(_batch(11, nc=nc), 4.0, 250.0)
        out = loaded.signatures["serving_default"](xc=batch["xc"], yc=batch["yc"], xt=batch["xt"])
        dist = model.predict_distribution(batch)
        np.testing.assert_allclose(out["mean"], dist.mean(), rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(out["stddev"], dist.stddev(), rtol=1e-5, atol=1e-5)


def test_the_command_line_prints_the_warning_as_one_line(capsys):
    from taylorformer.cli import one_line_warnings

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with one_line_warnings(wn.TrainingRangeWarning):
            warnings.warn(wn.TrainingRangeWarning("context outputs y0 reach [5, 6]"))
    assert capsys.readouterr().err == "warning: context outputs y0 reach [5, 6]\n"


def test_forecasting_tasks_default_to_their_standardisation_unless_the_spec_says_global():
    import pandas as pd

    from taylorformer import registry
    from taylorformer.workflow import training

    frame = pd.DataFrame({"y": np.linspace(0.0, 50.0, 80) + np.sin(np.arange(80))})
    cfg = training.TrainConfig(steps=1, batch_size=2, tensorboard=False)
    spec = {"preset": "tnp-d", **LAYERS}
    for lead_input, default in ((True, "last"), (False, "window")):
        task = registry.get("task", "csv")(path=frame, target_columns="y", context_length=8, horizon=4,
                                           split=(0.6, 0.2, 0.2), lead_input=lead_input)
        assert training.Trainer(spec, task, cfg, out_dir=None).spec["standardise"] == default
        assert training.Trainer({**spec, "standardise": "global"}, task, cfg,
                                out_dir=None).spec["standardise"] == "global"
