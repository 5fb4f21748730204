"""Calibration (``taylorformer.prediction.calibration``): PIT of draws from the predictive is uniform,
closed-form CRPS equals the draws' estimate and numeric integration, a correctly
specified predictive covers at the nominal rate, spread-scale recalibration recovers a
known under-dispersion, and a recalibrated ``predict`` is the manual scaling."""
import json

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from matplotlib.figure import Figure
from scipy import integrate, stats

from taylorformer.prediction import calibration as cal
from taylorformer import cli
from taylorformer.errors import RunDirectoryError, SpecError
from taylorformer.plotting.calibration import plot_calibration

tfd = tfp.distributions
N = 20000
TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
TINY_AR = {"preset": "tnp-a", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8,
                                          "ffn_width": 16}, "head": {"width": 16, "hidden_layers": 1}}
TASK = {"num_context": [3, 10], "num_target": 10}


def _uniform(pit, bins=10):
    """Chi-square p-value of the PIT histogram against U(0, 1)."""
    counts = np.histogram(pit, bins, (0, 1))[0]
    return stats.chisquare(counts).pvalue


def _gaussian(n=N, factor=1.0, seed=0):
    """Predictive N(loc, sd) per point; truths drawn with stddev ``factor * sd``."""
    rng = np.random.default_rng(seed)
    loc, sd = rng.normal(size=(n, 1)), np.exp(0.3 * rng.normal(size=(n, 1)))
    return loc, sd, loc + factor * sd * rng.normal(size=(n, 1))


def _observed(y):
    return np.ones(y.shape, bool)


# ----------------------------------------------------------------------------- PIT
def test_pit_of_draws_from_the_predictive_is_uniform():
    rng = np.random.default_rng(1)
    loc, sd, y = _gaussian()
    normal = cal.NormalMarginals(y, _observed(y), loc, sd)
    assert _uniform(normal.pit()) > 0.01 and stats.kstest(normal.pit(), "uniform").pvalue > 0.01
    # draws: the truth is one more draw, so its rank among 99 others is uniform
    draws = loc + sd * rng.normal(size=(99, N, 1))
    sampled = cal.SampleMarginals(y, _observed(y), draws)
    assert _uniform(sampled.pit(rng)) > 0.01
    # a tfp family without a closed form here: Student-t through its CDF
    dist = tfd.StudentT(3.0, tf.zeros([4, N // 4, 1]), 2.0)
    y_t = np.asarray(dist.sample(seed=3), np.float64)
    points = np.ones((4, N // 4), bool)
    student = cal.marginals_of_distribution(dist, y_t, _observed(y_t), points, num_draws=20)
    assert isinstance(student, cal.DistributionMarginals)
    assert _uniform(student.pit(rng)) > 0.01
    # a discrete family: the randomised PIT is uniform too (a plain CDF is not)
    bern = tfd.Bernoulli(logits=tf.fill([4, N // 4, 1], 0.7), dtype=tf.float32)
    y_b = np.asarray(bern.sample(seed=4), np.float64)
    disc = cal.marginals_of_distribution(bern, y_b, _observed(y_b), points, num_draws=20)
    assert disc.discrete and _uniform(disc.pit(rng)) > 0.01
    assert _uniform(np.asarray(bern.cdf(y_b)).ravel()) < 1e-6
    report = cal.summarize([disc])  # a discrete family has a report but no spread scale
    np.testing.assert_allclose(report["coverage"]["observed"], cal.LEVELS, atol=0.02)
    with pytest.raises(SpecError, match="discrete"):
        cal.fit_spread_scale([disc])


def test_miscalibration_shows_in_the_pit_and_the_coverage():
    loc, sd, y = _gaussian(factor=2.0)
    report = cal.summarize([cal.NormalMarginals(y, _observed(y), loc, sd)])
    counts = report["pit"]["counts"]
    assert counts[0] > 2 * counts[5] and counts[-1] > 2 * counts[5]  # U-shaped: too narrow
    assert all(o < a - 0.05 for o, a in zip(report["coverage"]["observed"][2:], report["coverage"]["levels"][2:]))


# ----------------------------------------------------------------------------- CRPS
def test_gaussian_crps_equals_the_draws_estimate_and_numeric_integration():
    rng = np.random.default_rng(2)
    for loc, scale, y in [(0.0, 1.0, 0.3), (1.5, 0.4, -0.2), (-2.0, 3.0, 4.0)]:
        closed = float(cal.gaussian_crps(y, loc, scale))
        # CRPS = integral of (F(x) - 1{x >= y})^2 dx
        lo, hi = loc - 12 * scale, loc + 12 * scale
        left = integrate.quad(lambda x: stats.norm.cdf(x, loc, scale) ** 2, lo, y)[0]
        right = integrate.quad(lambda x: stats.norm.sf(x, loc, scale) ** 2, y, hi)[0]
        assert closed == pytest.approx(left + right, rel=1e-6)
        draws = rng.normal(loc, scale, size=(200000,))
        assert float(cal.ensemble_crps(draws, y)) == pytest.approx(closed, rel=0.01)
    # the fair estimator is unbiased even for few draws: average over many small ensembles
    small = rng.normal(size=(5, 40000))
    assert cal.ensemble_crps(small, 0.3).mean() == pytest.approx(float(cal.gaussian_crps(0.3, 0, 1)), rel=0.01)


def test_crps_of_other_families_from_draws_matches_numeric_integration():
    mix = tfd.MixtureSameFamily(tfd.Categorical(logits=tf.constant([[[[0.0, 0.5]]]])),
                                tfd.Normal(tf.constant([[[[-1.0, 2.0]]]]), tf.constant([[[[0.5, 1.0]]]])))
    y = np.array([[[0.4]]])
    m = cal.marginals_of_distribution(mix, y, _observed(y), np.ones((1, 1), bool), num_draws=200000, seed=5)
    weights = np.exp([0.0, 0.5]) / np.exp([0.0, 0.5]).sum()
    cdf = lambda x: weights @ stats.norm.cdf(x, [-1.0, 2.0], [0.5, 1.0])  # noqa: E731  the mixture's, in SciPy
    exact = integrate.quad(lambda x: cdf(x) ** 2, -10, 0.4)[0] + integrate.quad(lambda x: (1 - cdf(x)) ** 2, 0.4, 12)[0]
    assert float(m.crps()[0, 0]) == pytest.approx(exact, rel=0.02)


# ----------------------------------------------------------------------------- coverage
def test_coverage_of_a_correctly_specified_predictive_is_nominal():
    loc, sd, y = _gaussian()
    report = cal.summarize([cal.NormalMarginals(y, _observed(y), loc, sd)])
    np.testing.assert_allclose(report["coverage"]["observed"], cal.LEVELS, atol=0.012)
    # sharpness: the mean stddev and the Gaussian interval widths 2 z sd
    assert report["sharpness"]["mean_stddev"] == pytest.approx(sd.mean())
    np.testing.assert_allclose(report["sharpness"]["mean_width"],
                               2 * stats.norm.ppf((1 + np.array(cal.LEVELS)) / 2) * sd.mean(), rtol=1e-9)
    assert report["nll"] == pytest.approx(-stats.norm.logpdf(y, loc, sd).mean())


def test_crps_sharpness_and_nll_in_data_units_for_a_standardising_task():
    from taylorformer.normaliser import Normaliser

    standardised = Normaliser.from_dict({"x_offset": [0.0], "x_scale": [1.0], "y_offset": [7.0], "y_scale": [3.0]})
    units, label = cal.data_units(standardised)
    loc, sd, y = _gaussian(n=1000)
    m = cal.NormalMarginals(y, _observed(y), loc, sd)
    plain, scaled = cal.summarize([m]), cal.summarize([m], units=units)
    assert label == "data" and cal.data_units(None) == (None, "model")
    assert cal.data_units(Normaliser.identity(1, 1)) == (None, "model")
    assert scaled["crps"] == pytest.approx(3 * plain["crps"])
    assert scaled["sharpness"]["mean_stddev"] == pytest.approx(3 * plain["sharpness"]["mean_stddev"])
    assert scaled["pit"] == plain["pit"]
    # the density of y = 7 + 3 z is the density of z over 3 (SciPy, in data units)
    assert scaled["nll"] == pytest.approx(-stats.norm.logpdf(7 + 3 * y, 7 + 3 * loc, 3 * sd).mean())


def test_unobserved_and_padded_targets_are_left_out():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(2, 5, 2))
    y[0, 1, 0] = np.nan  # one output missing
    y[1, 2] = np.nan     # a whole point missing
    mask = np.ones((2, 5), np.float32)
    mask[1, 4] = 0       # padding
    dist = tfd.Normal(tf.zeros([2, 5, 2]), tf.ones([2, 5, 2]))
    from taylorformer.batch import with_masks

    batch = with_masks({"xc": np.zeros((2, 1, 1), np.float32), "yc": np.zeros((2, 1, 2), np.float32),
                        "xt": np.zeros((2, 5, 1), np.float32), "yt": y.astype(np.float32), "mask_t": mask})
    points = np.asarray(batch["mask_t"]) > 0.5
    m = cal.marginals_of_distribution(dist, np.asarray(batch["yt"]), np.asarray(batch["observed_t"]) > 0.5, points)
    report = cal.summarize([m])
    assert report["num_values"] == 2 * 5 * 2 - 1 - 2 - 2
    keep = ~np.isnan(y) & (mask[..., None] > 0)
    assert report["crps"] == pytest.approx(cal.gaussian_crps(y[keep], 0, 1).mean(), rel=1e-5)


# ----------------------------------------------------------------------------- recalibration
def test_spread_scale_recovers_a_known_under_dispersion():
    loc, sd, y = _gaussian(factor=1.7)
    scale, criterion = cal.fit_spread_scale([cal.NormalMarginals(y, _observed(y), loc, sd)])
    # the NLL minimiser of a Gaussian scale in closed form: sqrt(mean z^2)
    assert criterion == "nll" and scale[0] == pytest.approx(np.sqrt(np.mean(((y - loc) / sd) ** 2)), rel=1e-4)
    assert scale[0] == pytest.approx(1.7, rel=0.02)
    rng = np.random.default_rng(4)
    draws = cal.SampleMarginals(y[:5000], _observed(y[:5000]), loc[:5000] + sd[:5000] * rng.normal(size=(100, 5000, 1)))
    scale, criterion = cal.fit_spread_scale([draws])
    assert criterion == "crps" and scale[0] == pytest.approx(1.7, rel=0.05)
    after = cal.summarize([draws.with_scale(scale)])
    np.testing.assert_allclose(after["coverage"]["observed"], cal.LEVELS, atol=0.03)
    # two outputs, each its own factor; a Student-t through the generic NLL search
    dist = tfd.StudentT(5.0, tf.zeros([1, 8000, 2]), tf.constant([1.0, 2.0]))
    truth = np.asarray(tfd.StudentT(5.0, 0.0, tf.constant([0.5, 6.0])).sample([1, 8000], seed=6), np.float64)
    m = cal.marginals_of_distribution(dist, truth, _observed(truth), np.ones((1, 8000), bool), num_draws=4)
    scale, _ = cal.fit_spread_scale([m])
    np.testing.assert_allclose(scale, [0.5, 3.0], rtol=0.05)


def test_spread_scale_moves_quantiles_and_draws_about_the_mean():
    result = {"mean": np.array([[[1.0], [2.0]]]), "stddev": np.array([[[0.5], [1.0]]]),
              "quantiles": np.array([[[[0.5], [1.0]]], [[[1.5], [3.0]]]]),
              "samples": np.array([[[[0.0], [4.0]]]]), "levels": np.array([0.1, 0.9])}
    out = cal.apply_spread_scale(result, [2.0])
    np.testing.assert_allclose(out["stddev"], [[[1.0], [2.0]]])
    np.testing.assert_allclose(out["quantiles"], [[[[0.0], [0.0]]], [[[2.0], [4.0]]]])
    np.testing.assert_allclose(out["samples"], [[[[-1.0], [6.0]]]])
    assert out["mean"] is result["mean"] and out["spread_scale"].tolist() == [2.0]


def test_plot_has_the_pit_histogram_and_the_reliability_curve():
    loc, sd, y = _gaussian(n=2000, factor=1.5)
    m = cal.NormalMarginals(y, _observed(y), loc, sd)
    report = cal.summarize([m])
    report["recalibrated"] = {"scale": [1.5], **cal.summarize([m.with_scale([1.5])])}
    fig = plot_calibration(report, title="t")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    hist, rel = fig.axes
    assert len(hist.patches) == 2 * cal.PIT_BINS
    np.testing.assert_allclose(rel.lines[0].get_ydata(), report["coverage"]["observed"])
    with pytest.raises(ValueError, match="2 axes"):
        plot_calibration(report, axes=[hist])


# ----------------------------------------------------------------------------- runs and the CLI
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run directory as training leaves it (spec, config, best.keras), of an untrained model."""
    from taylorformer.models import build_model
    from taylorformer.workflow.run_dir import RunDirectory

    out = tmp_path_factory.mktemp("cal") / "run"
    out.mkdir()
    model = build_model({**TINY, "dim_x": 1, "dim_y": 1})
    run_dir = RunDirectory(str(out))
    run_dir.write_definition(model.spec, {"train": {"batch_size": 4}, "task": "gp", "task_config": TASK})
    run_dir.save_model(model, "best.keras")
    return out


def test_calibration_of_a_run_with_a_normaliser_is_in_data_units(run, tmp_path):
    """The same weights with a normaliser of ``y_scale`` s: the report says data units and
    its NLL is the model-unit NLL plus log s (change of variables), its CRPS s times."""
    from taylorformer.normaliser import Normaliser
    from taylorformer.workflow.run_dir import RunDirectory
    from taylorformer.workflow.runs import calibrate_run

    scaled = tmp_path / "scaled"
    scaled.mkdir()
    for name in ("spec.json", "config.json"):
        (scaled / name).write_bytes((run / name).read_bytes())
    model = RunDirectory(str(run)).load_model()
    model.normaliser = Normaliser([0.0], [1.0], [5.0], [4.0], ["x"], ["y"], [""], [""])
    RunDirectory(str(scaled)).save_model(model, "best.keras")
    options = {"num_batches": 2, "batch_size": 4, "use_stored": False}
    plain, data = calibrate_run(str(run), **options), calibrate_run(str(scaled), **options)
    assert plain["units"] == "model" and data["units"] == "data"
    assert data["nll"] == pytest.approx(plain["nll"] + np.log(4.0), rel=1e-6)
    assert data["crps"] == pytest.approx(4.0 * plain["crps"], rel=1e-6)


def test_cli_evaluate_calibration_recalibrate_and_predict(run, tmp_path, capsys):
    png = tmp_path / "cal.png"
    assert cli.main(["evaluate", str(run), "--batches", "2", "--batch-size", "4", "--calibration",
                     "--calibration-plot", str(png)]) == 0
    result = json.loads(capsys.readouterr().out)
    report = result["calibration"]
    assert report["mode"] == "predictive" and report["num_values"] == 80 and "recalibrated" not in report
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (run / "calibration.json").exists()  # --calibration alone writes no recalibration
    assert cli.main(["evaluate", str(run), "--batches", "2", "--batch-size", "4", "--recalibrate"]) == 0
    report = json.loads(capsys.readouterr().out)["calibration"]
    stored = json.loads((run / "calibration.json").read_text())["best"]
    assert report["recalibrated"]["scale"] == stored["scale"] and stored["criterion"] == "nll"
    assert stored["validation"]["after"]["nll"] <= stored["validation"]["before"]["nll"]
    assert (run / "calibration-test.png").exists()
    # predict applies it: the stddev and quantiles are the Gaussian's with stddev s * sd
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.uniform(-2, 2, 6), "y": rng.normal(size=6)}).to_csv(tmp_path / "c.csv", index=False)
    pd.DataFrame({"x": np.linspace(-2, 2, 5)}).to_csv(tmp_path / "q.csv", index=False)
    common = ["predict", str(run), "--input", str(tmp_path / "q.csv"), "--context", str(tmp_path / "c.csv")]
    assert cli.main(common + ["--output", str(tmp_path / "raw.csv"), "--no-recalibration"]) == 0
    assert cli.main(common + ["--output", str(tmp_path / "cal.csv")]) == 0
    raw, out = pd.read_csv(tmp_path / "raw.csv"), pd.read_csv(tmp_path / "cal.csv")
    s = stored["scale"][0]
    assert "spread_scale_y" not in raw and np.allclose(out["spread_scale_y"], s)
    np.testing.assert_allclose(out["mean_y"], raw["mean_y"], rtol=1e-6)
    np.testing.assert_allclose(out["stddev_y"], s * raw["stddev_y"], rtol=1e-5)
    for q in (0.05, 0.5, 0.95):
        np.testing.assert_allclose(out[f"q{q:g}_y"], stats.norm.ppf(q, raw["mean_y"], s * raw["stddev_y"]),
                                   rtol=1e-4, atol=1e-5)
    assert cli.main(common + ["--output", str(tmp_path / "cal.npz"), "--samples", "3"]) == 0
    with np.load(tmp_path / "cal.npz") as arrays:
        assert arrays["spread_scale"].tolist() == pytest.approx([s])
        np.testing.assert_allclose(arrays["stddev"][0, :, 0], out["stddev_y"], rtol=1e-6)
    capsys.readouterr()
    # one-line errors: teacher forcing needs an autoregressive model; the plot is a PNG
    assert cli.main(["evaluate", str(run), "--batches", "1", "--calibration", "--teacher-forced"]) == 2
    assert "autoregressive models only" in capsys.readouterr().err
    assert cli.main(["evaluate", str(run), "--batches", "1", "--calibration", "--calibration-plot",
                     str(run / "config.json")]) == 2
    assert "must be a .png path" in capsys.readouterr().err


def test_a_recalibration_of_another_model_file_is_refused(tmp_path, run):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / "calibration.json").write_text(json.dumps({"best": {"method": "spread-scale", "scale": [2.0],
                                                                "model_sha256": "0" * 64}}))
    with pytest.raises(RunDirectoryError, match="fitted on another best.keras"):
        cal.load_recalibration(str(copy), "best")
    (copy / "calibration.json").write_text(json.dumps({"best": {"scale": [-1]}}))
    with pytest.raises(RunDirectoryError, match="corrupt"):
        cal.load_recalibration(str(copy), "best")
    assert cal.load_recalibration(str(copy), "model") is None


def test_autoregressive_models_are_sampled_multi_step_unless_teacher_forced(tmp_path):
    from taylorformer.models import build_model
    from taylorformer.task import make_task

    model = build_model({**TINY_AR, "dim_x": 1, "dim_y": 1})
    task = make_task("gp", TASK)
    sampled = cal.collect(model, task, "test", batch_size=2, num_batches=1, num_samples=8)
    assert isinstance(sampled[0], cal.SampleMarginals) and sampled[0].samples.shape == (8, 20, 1)
    forced = cal.collect(model, task, "test", mode=cal.check_mode(model, True), batch_size=2, num_batches=1)
    assert isinstance(forced[0], cal.NormalMarginals)
    report = cal.summarize(sampled)
    assert report["nll"] is None and report["num_values"] == 20
    with pytest.raises(SpecError, match="autoregressive models only"):
        cal.check_mode(build_model({**TINY, "dim_x": 1, "dim_y": 1}), True)
