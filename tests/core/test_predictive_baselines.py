"""Predictive baselines of an evaluation (taylorformer.workflow.predictive_baselines), each
against an independent NumPy statement of it: the last value and a loop over the training
changes (persistence, seasonal naive), ``numpy.linalg.lstsq`` on the ridge-augmented lag
matrix (ridge AR), a dense GP posterior at the fitted hyperparameters (GP), a double loop
(IDW), numerical integration (Gaussian CRPS); the verdict on an AR(2) series, where the
ridge AR must beat a model that predicts the training distribution.
"""
import math
import types

import numpy as np
import pytest
from scipy import integrate, stats

from taylorformer.prediction import calibration as cal
from taylorformer.workflow import predictive_baselines as pb


# ----------------------------------------------------------------------------- scores
def test_ensemble_crps_matches_all_pairs():
    rng = np.random.default_rng(0)
    samples, y = rng.normal(size=(7, 3)), rng.normal(size=3)
    pairs = np.abs(samples[:, None] - samples[None]).mean((0, 1))
    assert cal.ensemble_crps(samples, y, fair=False) == pytest.approx(np.abs(samples - y).mean(0) - 0.5 * pairs)


def test_gaussian_point_metrics():
    out = pb.gaussian_point_metrics(np.array([1.0, 1.0]), np.array([2.0, 2.0]), np.array([2.0, 5.0]))
    assert out["nll"] == pytest.approx(-stats.norm(1.0, 2.0).logpdf([2.0, 5.0]))
    assert out["error"].tolist() == [-1.0, -4.0] and out["inside95"].tolist() == [True, False]


def test_model_point_metrics_of_a_student_t_predictive():
    """A non-Normal predictive: its own log density and CDF, and the CRPS of its draws near
    the integral of its CDF."""
    import tensorflow_probability as tfp

    dist = tfp.distributions.StudentT(4.0, np.zeros((1, 1, 2), np.float32), np.ones((1, 1, 2), np.float32))
    y = np.array([[[0.5, 3.5]]])
    out = pb.model_point_metrics(dist, y, num_samples=20000)
    truth = stats.t(4.0)
    assert out["nll"][0, 0] == pytest.approx(-truth.logpdf([0.5, 3.5]), rel=1e-5)
    assert out["inside95"][0, 0].tolist() == [True, False]
    for j, value in enumerate((0.5, 3.5)):
        below, _ = integrate.quad(lambda z: truth.cdf(z) ** 2, -np.inf, value)
        above, _ = integrate.quad(lambda z: (1 - truth.cdf(z)) ** 2, value, np.inf)
        assert out["crps"][0, 0, j] == pytest.approx(below + above, rel=0.03)


# ----------------------------------------------------------------------------- series
def series_task(y, context=12, horizon=5, train=(0, 300), season=None):
    """The attributes :class:`SeriesBaselines` reads of a forecasting task."""
    return types.SimpleNamespace(scaled=np.asarray(y, np.float32)[:, None], split_bounds={"train": train},
                                 context_length=context, horizon=horizon, season=season, dates=None,
                                 window_starts=None)


def rms_change(z, lag):
    pairs = [(z[t + lag] - z[t]) ** 2 for t in range(len(z) - lag) if not np.isnan(z[t + lag] - z[t])]
    return math.sqrt(sum(pairs) / len(pairs))


def test_persistence_and_seasonal_naive():
    rng = np.random.default_rng(0)
    z = np.sin(np.arange(400) * 2 * np.pi / 6) + 0.3 * rng.normal(size=400)
    z[[40, 41, 77]] = np.nan
    task = series_task(z, season=6)
    fitted = pb.SeriesBaselines(task)
    z32 = z.astype(np.float32).astype(np.float64)[:300]
    yc = np.stack([z[300:312], z[320:332]])[..., None]
    yc[1, -1, 0] = np.nan  # a missing last value: the one before is carried forward
    out = fitted.predict(yc)
    mean, sd = out["persistence"]
    assert mean[:, :, 0].tolist() == [[z[311]] * 5, [z[330]] * 5]
    assert sd[0, :, 0] == pytest.approx([rms_change(z32, h) for h in range(1, 6)], rel=1e-9)
    mean, sd = out["seasonal-naive"]
    for h in range(5):  # lead h + 1 <= season: the value one season before the target row
        assert mean[0, h, 0] == yc[0, 12 + h - 6, 0]
    assert sd[0, :, 0] == pytest.approx([rms_change(z32, 6)] * 5, rel=1e-9)
    longer = pb.SeriesBaselines(series_task(z, horizon=9, season=4)).predict(yc[:1])["seasonal-naive"][0]
    assert longer[0, :, 0].tolist() == [yc[0, 8 + h % 4, 0] for h in range(9)]  # the last season repeated


def test_season_from_dates():
    import pandas as pd

    def season(freq):
        return pb.season_of(types.SimpleNamespace(dates=pd.date_range("2020", periods=50, freq=freq).to_numpy()))

    assert [season(f) for f in ("h", "15min", "D", "W", "MS", "QS", "7h")] == [24, 96, 7, 52, 12, 4, None]
    assert pb.season_of(types.SimpleNamespace(season=10, dates=None)) == 10


def test_ridge_ar_matches_lstsq_on_the_augmented_lag_matrix():
    rng = np.random.default_rng(1)
    z = rng.normal(size=400).cumsum() * 0.1
    task = series_task(z, context=12, horizon=3)
    fitted = pb.SeriesBaselines(task, lags=4, ridge=2.5)
    train = z.astype(np.float32).astype(np.float64)[:300]
    rows = [np.r_[1.0, train[t - 4:t]] for t in range(4, 298)]
    targets = [train[t:t + 3] for t in range(4, 298)]
    x, y = np.array(rows), np.array(targets)
    augmented = np.vstack([x, math.sqrt(2.5) * np.eye(5)[1:]])           # the intercept unpenalised
    w, *_ = np.linalg.lstsq(augmented, np.vstack([y, np.zeros((4, 3))]), rcond=None)
    assert fitted.weights[0] == pytest.approx(w, rel=1e-6, abs=1e-9)
    resid = y - x @ w
    assert fitted.ar_sd[:, 0] == pytest.approx(np.sqrt((resid ** 2).sum(0) / (len(x) - 5)), rel=1e-6)
    yc = z[300:312][None, :, None]
    mean, _ = fitted.predict(yc)["ridge-ar"]
    assert mean[0, :, 0] == pytest.approx(np.r_[1.0, z[308:312]] @ w, rel=1e-9)


# ----------------------------------------------------------------------------- points
def dense_matern(x1, x2, ls, s2):
    out = np.empty((len(x1), len(x2)))
    for i in range(len(x1)):
        for j in range(len(x2)):
            r = math.sqrt((((x1[i] - x2[j]) / ls) ** 2).sum())
            out[i, j] = s2 * (1 + math.sqrt(5) * r + 5 * r * r / 3) * math.exp(-math.sqrt(5) * r)
    return out


def test_gp_predictive_matches_a_dense_posterior_at_the_fitted_hyperparameters():
    rng = np.random.default_rng(2)
    x = rng.uniform(-2, 2, (30, 2))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] + 0.1 * rng.normal(size=30)
    xq = rng.uniform(-2, 2, (7, 2))
    ls, s2, n2 = pb.fit_gp(x, y)
    mean, sd = pb.gp_predict(x, y, xq, ls, s2, n2)
    k = dense_matern(x, x, ls, s2) + (n2 + pb.GP_JITTER) * np.eye(30)
    ones = np.ones(30)
    m = ones @ np.linalg.solve(k, y) / (ones @ np.linalg.solve(k, ones))  # GLS constant mean
    kq = dense_matern(xq, x, ls, s2)
    assert mean == pytest.approx(m + kq @ np.linalg.solve(k, y - m), rel=1e-6, abs=1e-9)
    var = s2 + n2 - np.einsum("ij,ji->i", kq, np.linalg.solve(k, kq.T))
    assert sd == pytest.approx(np.sqrt(var), rel=1e-6)
    batch_mean, batch_sd = pb.gp_baseline(x[None], y[None, :, None], xq[None])
    assert batch_mean[0, :, 0] == pytest.approx(mean) and batch_sd[0, :, 0] == pytest.approx(sd)


def test_gp_gradient_and_recovered_hyperparameters():
    from scipy.optimize import check_grad

    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (300, 1))
    k = pb.matern52(x, x, np.array([0.5]), 1.5) + 0.05 * np.eye(300)
    y = 0.7 + np.linalg.cholesky(k) @ rng.normal(size=300)
    start = np.log([0.7, 1.0, 0.1])
    assert check_grad(lambda p: pb.gp_objective(p, x, y)[0], lambda p: pb.gp_objective(p, x, y)[1],
                      start) < 1e-3 * np.abs(pb.gp_objective(start, x, y)[1]).max()
    ls, s2, n2 = pb.fit_gp(x, y)
    assert 0.5 / 1.5 < ls[0] < 0.5 * 1.5   # lengthscale within a factor 1.5
    assert 0.05 / 1.25 < n2 < 0.05 * 1.25  # noise variance within 25%
    assert 1.5 / 3 < s2 < 1.5 * 3          # signal variance (weakly identified) within a factor 3


def test_idw_matches_a_double_loop():
    rng = np.random.default_rng(3)
    xc, xt = rng.uniform(size=(2, 6, 2)), rng.uniform(size=(2, 4, 2))
    yc = rng.normal(size=(2, 6, 1))
    yc[1, 2, 0] = np.nan
    xt[0, 1] = xc[0, 3]  # a target at a context point takes its value
    mean, sd = pb.idw_baseline(xc, yc, xt)

    def idw(xs, ys, q):
        d = np.sqrt(((xs - q) ** 2).sum(-1))
        if (d == 0).any():
            return ys[d == 0].mean()
        return (ys / d ** 2).sum() / (1 / d ** 2).sum()

    for b in range(2):
        seen = ~np.isnan(yc[b, :, 0])
        xs, ys = xc[b, seen], yc[b, seen, 0]
        assert mean[b, :, 0] == pytest.approx([idw(xs, ys, q) for q in xt[b]])
        loo = [idw(np.delete(xs, i, 0), np.delete(ys, i), xs[i]) for i in range(len(ys))]
        assert sd[b, :, 0] == pytest.approx(np.sqrt(np.mean((np.array(loo) - ys) ** 2)))
    assert mean[0, 1, 0] == yc[0, 3, 0]


def test_point_inputs_count_a_repeated_column_once():
    """x = [s, t] repeated in the groups counts once; a column equal to another among the
    context points alone (two one-hot columns both 0 there) is kept on both sides."""
    x = np.arange(12.0).reshape(1, 4, 3)
    batch = {"xc": x, "sc": x[..., :2], "tc": np.ones((1, 4, 1)),
             "xt": x[:, :2], "st": x[:, :2, :2], "tt": np.zeros((1, 2, 1))}
    xc, xt = pb.point_inputs(batch)
    assert xc.shape == (1, 4, 4) and xt.shape == (1, 2, 4)
    onehot = {"xc": np.zeros((1, 3, 2)), "xt": np.array([[[0.0, 1.0]]])}
    assert [a.shape[-1] for a in pb.point_inputs(onehot)] == [2, 2]


# ----------------------------------------------------------------------------- verdict
def ar2_task():
    from taylorformer.tasks import from_arrays

    rng = np.random.default_rng(4)
    z = np.zeros(1500)
    for t in range(2, 1500):
        z[t] = 1.5 * z[t - 1] - 0.75 * z[t - 2] + rng.normal()
    return from_arrays(y=10.0 + 2.0 * z, context_length=24, horizon=4, eval_stride=2)


def test_verdict_names_ridge_ar_on_an_ar2_series():
    """The model predicts the training distribution (standard normal in standardised
    units) at every lead; on an AR(2) series the ridge AR must beat it, and the verdict
    says so."""
    import tensorflow_probability as tfp

    from taylorformer.normaliser import Normaliser

    task = ar2_task()
    comparison = pb.Comparison(task, Normaliser.from_task(task, task.dim_x, task.dim_y))
    for batch in task.dataset("test", batch_size=32):
        comparison.add(batch, tfp.distributions.Normal(np.zeros(batch["yt"].shape, np.float32), 1.0))
    out = comparison.result()
    assert set(out["baselines"]) == {"persistence", "ridge-ar"}
    ar = out["paired"]["ridge-ar"]["crps"]
    assert ar["mean"] > 4 * ar["stderr"] > 0 and "batch means" in ar["stderr_method"]
    assert out["verdict"].startswith("ridge-ar beats the model on CRPS by")
    assert out["baselines"]["ridge-ar"]["crps"]["mean"] < out["baselines"]["persistence"]["crps"]["mean"]
    assert out["baselines"]["ridge-ar"]["coverage95"] == pytest.approx(0.95, abs=0.03)


def test_verdict_sentences():
    gap = {"a": {"mean": -0.5, "stderr": 0.1}, "b": {"mean": 0.05, "stderr": 0.1}}
    assert pb.verdict(1.0, {"a": 1.5, "b": 0.95}, gap, "degC").startswith(
        "The model and b (the best baseline) tie on CRPS: they differ by 0.05 degC (standard error 0.1), "
        "within two standard errors; CRPS 1 for the model, 0.95 for b.")
    gap["b"] = {"mean": -0.4, "stderr": 0.1}
    assert pb.verdict(1.0, {"a": 1.5, "b": 1.4}, gap).startswith(
        "The model beats the best baseline, b, on CRPS by 0.4 (standard error 0.1); CRPS")


# ----------------------------------------------------------------------------- end to end
TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
TRAIN = ["--steps", "4", "--batch-size", "8", "--val-every", "2", "--val-batches", "1", "--eval-batches", "2"]
BASELINE_KEYS = {"crps", "nll", "mae", "rmse", "coverage95", "outputs"}


def check_evaluation(result, names):
    assert set(result["baselines"]) == names and set(result["paired"]) == names
    for name in names:
        assert BASELINE_KEYS <= set(result["baselines"][name])
        assert {"mean", "stderr", "stderr_method"} <= set(result["paired"][name]["crps"])
    assert result["verdict"].endswith((" task.", " tasks.")) and "CRPS" in result["verdict"]


def test_evaluate_series_run_prints_and_stores_baselines(tmp_path, capsys):
    """A forecasting run on a CSV file: ``train`` evaluates it beside persistence, seasonal
    naive (hourly dates: a season of 24 rows) and ridge AR and stores the verdict in the
    model card; ``evaluate`` prints the JSON and one verdict line; ``--no-baselines`` drops them."""
    import json

    import pandas as pd

    from taylorformer import cli
    from taylorformer.model_card import read_model_file

    rng = np.random.default_rng(5)
    t = np.arange(600)
    y = 20 + 3 * np.sin(2 * np.pi * t / 24) + rng.normal(size=600)
    data = tmp_path / "load.csv"
    pd.DataFrame({"date": pd.date_range("2022-01-01", periods=600, freq="h").astype(str), "load": y}).to_csv(
        data, index=False)
    spec, run = tmp_path / "tiny.json", tmp_path / "run"
    spec.write_text(json.dumps(TINY))
    config = {"path": str(data), "target_columns": "load", "date_column": "date", "context_length": 48,
              "horizon": 6, "eval_stride": 3}
    assert cli.main(["train", "--model", str(spec), "--task", "csv", "--task-config", json.dumps(config),
                     *TRAIN, "--out", str(run)]) == 0
    printed = capsys.readouterr().out
    assert sum(line.startswith("verdict: ") for line in printed.splitlines()) == 1
    card = read_model_file(run / "best.keras")["card"]
    assert card["evaluation"]["verdict"] in printed
    assert cli.main(["info", str(run)]) == 0
    assert f"  verdict: {card['evaluation']['verdict']}" in capsys.readouterr().out.splitlines()
    assert cli.main(["evaluate", str(run), "--batches", "3", "--batch-size", "8"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    check_evaluation(result, {"persistence", "seasonal-naive", "ridge-ar"})
    assert "crps" in result["data_units"] and "crps" in result["data_units"]["outputs"]["load"]
    assert [line for line in err.splitlines() if line.startswith("verdict: ")] == [f"verdict: {result['verdict']}"]
    assert cli.main(["evaluate", str(run), "--batches", "1", "--no-baselines"]) == 0
    out, err = capsys.readouterr()
    assert "baselines" not in json.loads(out) and "verdict" not in err


def test_evaluate_run_of_points_has_gp_and_idw(tmp_path):
    """Sets of points (``from_arrays``): ``evaluate_run`` scores the GP fitted per task and
    inverse-distance weighting beside the model, in the data's units."""
    import taylorformer as tfm
    from taylorformer.tasks import from_arrays

    rng = np.random.default_rng(6)
    x = rng.uniform(-2, 2, (400, 2))
    y = 5.0 + 2.0 * np.sin(x[:, 0]) * np.cos(x[:, 1]) + 0.1 * rng.normal(size=400)
    groups = np.repeat(np.arange(20), 20)
    task = from_arrays(x, y, groups=groups, num_context=(5, 12), num_target=6, split=(0.6, 0.2, 0.2))
    tfm.train(TINY, task, out_dir=str(tmp_path / "run"), steps=3, batch_size=4, val_every=3, val_batches=1,
              verbose=0)
    result = tfm.evaluate_run(str(tmp_path / "run"), task=task, num_batches=2, batch_size=4)
    check_evaluation(result, {"gp", "idw"})
    assert result["baseline_tasks"] == 8 and result["paired"]["gp"]["crps"]["stderr_method"] == "iid"


SPATIAL = {"num_context": [8, 16], "num_target": 8}
KINDS = {"gp": ({"num_target": 8}, {"gp", "idw"}), "gp-2d-bsa": (SPATIAL, {"gp", "idw"}),
         "sphere-gp": (SPATIAL, {"gp", "idw"}), "sawtooth": ({"num_target": 8}, {"gp", "idw"}),
         "generic-spatial": ({"num_context": [4, 8], "num_target": 8}, {"gp", "idw"}),
         "image": ({"source": np.random.default_rng(0).integers(0, 256, (12, 8, 8), dtype=np.uint8),
                    "num_context": [2, 8], "num_target": [1, 8]}, {"gp", "idw"}),
         "stations": (None, {"gp", "idw"}), "gridded": (None, {"gp", "idw"}), "sir": ({**SPATIAL, "grid": 16}, set())}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_evaluate_every_task_kind_has_baselines_and_a_verdict(name, station_configs, gridded_configs):
    """Each task kind, with an untrained model: the baselines its outputs allow (none for
    SIR's discrete states, which the verdict says) and a verdict."""
    import taylorformer as tfm
    from taylorformer.spec import resolve_spec
    from taylorformer.task import make_task
    from taylorformer.workflow.evaluation import evaluate

    config, names = KINDS[name]
    task = make_task(name, config or {**station_configs, **gridded_configs}[name])
    spec = {**TINY, **({"likelihood": {"name": "categorical", "classes": 3}} if name == "sir" else {})}
    model = tfm.build_model(resolve_spec(spec, task_defaults=getattr(task, "model_defaults", None),
                                         dim_x=task.dim_x, dim_y=task.dim_y))
    result = evaluate(model, task, batch_size=3, num_batches=1)
    assert set(result["baselines"]) == names and isinstance(result["verdict"], str)
    if names:
        check_evaluation(result, names)
    else:
        assert result["verdict"] == "No baseline compared: the model's outputs are discrete (Categorical)."


def test_an_autoregressive_model_is_compared_by_its_samples_where_drawn():
    """Teacher-forced without samples (the verdict and the note say so); with samples (the
    default), the model's CRPS is that of its multi-step paths, the same number the headline
    ``crps`` reports (times the output's scale: the data's units)."""
    import taylorformer as tfm
    from taylorformer.workflow.evaluation import evaluate

    task = ar2_task()
    model = tfm.build_model("taylorformer", dim_x=task.dim_x, dim_y=task.dim_y,
                            encoder={"layers": 2, "width": 8, "num_heads": 2, "head_dim": 4, "enc_dim": 4})
    forced = evaluate(model, task, batch_size=4, num_batches=1, num_samples=0)
    assert "(teacher-forced)" in forced["verdict"] and "teacher-forced" in forced["baselines_note"]
    sampled = evaluate(model, task, batch_size=4, num_batches=1, num_samples=16)
    assert "teacher-forced" not in sampled["verdict"] and "sampled forecasts" in sampled["baselines_note"]
    scale = model.normaliser.y_scale[0] if model.normaliser is not None else task.std[0]
    assert sampled["data_units"]["crps"]["mean"] == pytest.approx(scale * sampled["crps"], rel=1e-5)
