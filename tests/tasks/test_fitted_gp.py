"""The ``fitted-gp`` task (tasks/fitted_gp.py): a GP prior fitted to one survey by marginal
likelihood, tasks simulated from it, and a run that predicts in the survey's units."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from taylorformer.errors import TaskError
from taylorformer.task import make_task
from taylorformer.tasks import fitted_gp
from taylorformer.tasks.gaussian_process import fit_gp_prior

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}


def dense_kernel(kind, x1, x2, lengthscale, variance):
    """The radial kernel from the ``[N1, N2, D]`` differences (NumPy reference)."""
    r = np.linalg.norm((x1[:, None, :] - x2[None, :, :]) / lengthscale, axis=-1)
    return variance * {"eq": lambda: np.exp(-0.5 * r * r), "matern12": lambda: np.exp(-r),
                       "matern32": lambda: (1 + math.sqrt(3) * r) * np.exp(-math.sqrt(3) * r),
                       "matern52": lambda: (1 + math.sqrt(5) * r + 5 * r * r / 3) * np.exp(-math.sqrt(5) * r)}[kind]()


def reference_log_marginal(kind, x, y, lengthscale, variance, noise_variance):
    """``log N(y; m 1, K)`` with the GLS mean ``m`` (scipy's multivariate normal density)."""
    k = dense_kernel(kind, x, x, lengthscale, variance) + noise_variance * np.eye(len(y))
    ones = np.ones(len(y))
    m = ones @ np.linalg.solve(k, y) / (ones @ np.linalg.solve(k, ones))
    return stats.multivariate_normal(m * ones, k).logpdf(y)


def simulated_survey(rng, kind, n, lengthscale=1.5, variance=1.0, noise_variance=0.05, mean=3.0, extent=10.0,
                     dim=2):
    x = rng.uniform(0.0, extent, (n, dim))
    k = dense_kernel(kind, x, x, lengthscale, variance) + noise_variance * np.eye(n)
    return x, mean + np.linalg.cholesky(k) @ rng.standard_normal(n)


def write_survey(path, x, y):
    pd.DataFrame({"easting": x[:, 0], "northing": x[:, 1], "zinc": y}).to_csv(path, index=False)
    return str(path)


CONFIG = {"x_columns": ["easting", "northing"], "target_columns": ["zinc"]}


def test_fit_recovers_the_hyperparameters_at_a_maximum_of_the_reference_likelihood():
    rng = np.random.default_rng(0)
    x, y = simulated_survey(rng, "matern52", 300)
    prior = fit_gp_prior(x, y, "matern52", per_input=False, maxiter=200)
    ls = prior["lengthscale"][0]
    assert 1.5 / 1.25 < ls < 1.5 * 1.25                        # lengthscale within 25%
    assert 0.05 / 1.5 < prior["noise_variance"] < 0.05 * 1.5
    assert 1.0 / 2 < prior["variance"] < 1.0 * 2                 # weakly identified on 7 lengthscales
    best = reference_log_marginal("matern52", x, y, ls, prior["variance"], prior["noise_variance"])
    assert prior["log_marginal"] == pytest.approx(best, abs=1e-5)
    for i, key in enumerate(("lengthscale", "variance", "noise_variance")):
        for factor in (0.95, 1.05):                              # a maximum: every nearby point is lower
            params = [ls, prior["variance"], prior["noise_variance"]]
            params[i] *= factor
            assert reference_log_marginal("matern52", x, y, *params) < best, (key, factor)
    ones = np.ones(300)
    k = dense_kernel("matern52", x, x, ls, prior["variance"]) + prior["noise_variance"] * np.eye(300)
    assert prior["mean"] == pytest.approx(ones @ np.linalg.solve(k, y) / (ones @ np.linalg.solve(k, ones)))


def test_auto_picks_the_family_of_the_draws():
    """A smooth and a rough family told apart where the points are dense on the lengthscale
    (150 points along 7 lengthscales; 2-D surveys: benchmarks/fitted_gp.py)."""
    rng = np.random.default_rng(1)
    for kind in ("eq", "matern12"):
        x, y = simulated_survey(rng, kind, 150, noise_variance=0.01, dim=1)
        prior, tried = fitted_gp.select_prior(x, y)
        assert set(tried) == {"eq", "matern12", "matern32", "matern52"}
        assert prior["kernel"] == kind and tried[kind] == max(tried.values())


def test_simulated_tasks_have_the_fitted_covariance_in_data_units(tmp_path):
    """Every task's context at all 12 survey locations: over 2500 tasks the context values'
    empirical mean and covariance (mapped to data units) match the prior's within
    Monte-Carlo error; the targets' variance is the prior's everywhere in the domain."""
    rng = np.random.default_rng(2)
    x, y = simulated_survey(rng, "eq", 12, extent=4.0)
    given = {"kernel": "eq", "lengthscale": [1.2], "variance": 2.0, "noise_variance": 0.1, "mean": 5.0}
    task = make_task("fitted-gp", {"path": write_survey(tmp_path / "s.csv", x, y), **CONFIG, "prior": given,
                                   "num_context": 12, "num_target": 4, "survey_context": 1.0})
    batch = task.sample(np.random.default_rng(0), 2500, "train")
    xc = batch["xc"].astype(np.float64) * task.x_scale + task.x_offset   # [B, 12, 2] data units
    order = np.argmin(((xc[:, :, None] - x[None, None]) ** 2).sum(-1), axis=-1)   # survey point of each slot
    assert np.abs(xc - x[order]).max() < 1e-4 * np.abs(x).max()
    values = np.zeros((2500, 12))
    np.put_along_axis(values, order, task.to_original_units(batch["yc"][..., 0]), axis=1)
    expected = dense_kernel("eq", x, x, 1.2, 2.0) + 0.1 * np.eye(12)
    sd = np.sqrt(np.diag(expected))
    assert np.abs(values.mean(0) - 5.0).max() < 4.5 * sd.max() / math.sqrt(2500)
    cov = np.cov(values.T)
    se = np.sqrt((expected ** 2 + np.outer(np.diag(expected), np.diag(expected))) / 2500)   # normal theory
    assert np.abs(cov - expected).max() < 4.5 * se.max()
    targets = task.to_original_units(batch["yt"][..., 0])
    assert targets.var() == pytest.approx(2.1, rel=4.5 * math.sqrt(2 / targets.size) / 0.5)
    lo, hi = x.min(0) - 0.2 * np.ptp(x, 0), x.max(0) + 0.2 * np.ptp(x, 0)   # the padded domain
    xt = batch["xt"].reshape(-1, 2) * task.x_scale + task.x_offset
    assert (xt >= lo - 1e-4).all() and (xt <= hi + 1e-4).all() and (xt < x.min(0)).any() and (xt > x.max(0)).any()
    assert np.isfinite(batch["gt_loglik"]).all()


@pytest.mark.parametrize("case,words", [
    ("missing file", ["nowhere.csv", "not found"]),
    ("missing column", ["survey.csv", "'zinc'", "did you mean 'zink'"]),
    ("too few points", ["survey.csv", "9 point(s)", "at least 10"]),
    ("NaN", ["survey.csv", "'northing'", "row(s) [3]"]),
    ("inf", ["survey.csv", "'zinc'", "infinite", "row(s) [0, 5]"]),
    ("text", ["survey.csv", "'zinc'", "non-numeric", "'about 3'", "row(s) [2]"]),
])
def test_bad_surveys_are_one_error_naming_the_file(tmp_path, case, words):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"easting": rng.uniform(size=20), "northing": rng.uniform(size=20),
                          "zinc": rng.normal(size=20)})
    if case == "missing column":
        frame = frame.rename(columns={"zinc": "zink"})
    elif case == "too few points":
        frame = frame.iloc[:9]
    elif case == "NaN":
        frame.loc[3, "northing"] = np.nan
    elif case == "inf":
        frame.loc[[0, 5], "zinc"] = np.inf
    elif case == "text":
        frame["zinc"] = frame["zinc"].astype(object)
        frame.loc[2, "zinc"] = "about 3"
    frame.to_csv(tmp_path / "survey.csv", index=False)
    path = tmp_path / ("nowhere.csv" if case == "missing file" else "survey.csv")
    with pytest.raises(TaskError) as info:
        make_task("fitted-gp", {"path": str(path), **CONFIG})
    assert all(w in str(info.value) for w in words), str(info.value)


def test_cli_bad_survey_is_one_error_line(tmp_path, capsys):
    from taylorformer import cli

    pd.DataFrame({"easting": [1.0, 2.0], "northing": [0.0, 1.0], "zinc": [1.0, 2.0]}).to_csv(
        tmp_path / "survey.csv", index=False)
    config = '{"path": "%s", "x_columns": ["easting", "northing"], "target_columns": ["zinc"]}' % (
        tmp_path / "survey.csv")
    code = cli.main(["train", "--model", "tnp-d", "--task", "fitted-gp", "--task-config", config, "--steps", "1",
                     "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and "survey.csv" in err[0], err


def test_trained_run_predicts_at_survey_points_in_data_units(tmp_path, capsys):
    """3 training steps, then ``predict RUN --input POINTS.csv --context SURVEY.csv``: the
    survey's column names come back, and the values are the model's predictive at the
    standardised inputs mapped by the fitted mean and scale (data units). The slowest test
    here (a tiny model built, trained 3 steps and reloaded): the one end-to-end check of
    the task, the normaliser and ``predict`` together."""
    import taylorformer as tfm
    from taylorformer import cli
    from taylorformer.model_card import read_model_file
    from taylorformer.workflow import training

    rng = np.random.default_rng(4)
    x, y = simulated_survey(rng, "matern32", 30, extent=1000.0, lengthscale=300.0, mean=400.0, variance=900.0,
                            noise_variance=30.0)
    survey = write_survey(tmp_path / "survey.csv", x, y)
    task = make_task("fitted-gp", {"path": survey, **CONFIG, "units": {"zinc": "mg/kg", "easting": "m"}})
    assert "fitted-gp: survey.csv (30 points): kernel" in capsys.readouterr().err
    rebuilt = make_task("fitted-gp", task.get_config())                   # the recorded prior: no second fit
    assert capsys.readouterr().err == "" and rebuilt.get_config() == task.get_config()
    training.train(TINY, task, out_dir=str(tmp_path / "run"), steps=3, batch_size=4, val_every=3,
                   val_batches=1, verbose=0, tensorboard=False, jit_compile=False, evaluate=False)
    points = pd.DataFrame({"easting": [-100.0, 500.0, 1200.0], "northing": [50.0, 500.0, 900.0]})
    points.to_csv(tmp_path / "points.csv", index=False)
    code = cli.main(["predict", str(tmp_path / "run"), "--input", str(tmp_path / "points.csv"), "--context", survey,
                     "--output", str(tmp_path / "out.csv")])
    assert code == 0
    out = pd.read_csv(tmp_path / "out.csv")
    np.testing.assert_allclose(out[["easting", "northing"]].to_numpy(), points.to_numpy())
    model_file = str(tmp_path / "run" / "best.keras")
    batch = {"xc": ((x - task.x_offset) / task.x_scale)[None].astype(np.float32),
             "yc": ((y - task.y_offset) / task.y_scale)[None, :, None].astype(np.float32),
             "xt": ((points.to_numpy() - task.x_offset) / task.x_scale)[None].astype(np.float32)}
    predictive = tfm.predict(tfm.load_model(model_file), batch)
    np.testing.assert_allclose(out["mean_zinc"], predictive["mean"].numpy()[0, :, 0] * task.y_scale + task.y_offset,
                               rtol=1e-4)
    np.testing.assert_allclose(out["stddev_zinc"], predictive["stddev"].numpy()[0, :, 0] * task.y_scale, rtol=1e-4)
    saved = read_model_file(model_file)
    assert saved["normaliser"].y_units == ["mg/kg"] and saved["normaliser"].x_names == ["easting", "northing"]
    assert saved["card"]["data"]["task_config"]["prior"] == task.get_config()["prior"]


@pytest.mark.long
def test_trained_model_reaches_the_exact_gp_on_held_out_tasks(tmp_path):
    """The done-when target: after 3000 steps of TNP-D (batch 16) on a 40-point simulated
    survey's fitted prior, the test tasks' log-likelihood per target point is within 0.1
    nats of the exact GP posterior's (``gt_loglik``: the prior's own)."""
    import taylorformer as tfm

    rng = np.random.default_rng(5)
    x, y = simulated_survey(rng, "matern52", 40)
    task = make_task("fitted-gp", {"path": write_survey(tmp_path / "survey.csv", x, y), **CONFIG})
    tfm.train(model="tnp-d", task=task, out_dir=str(tmp_path / "run"), steps=3000, batch_size=16, verbose=0,
              evaluate=False, tensorboard=False)
    result = tfm.evaluate_run(str(tmp_path / "run"), baselines=False)
    assert result["gap_to_gt"]["mean"] < 0.1, result["gap_to_gt"]


def reference_ordinary_kriging(kind, x, y, xq, prior):
    """Ordinary kriging in NumPy from the dense kernel: the GLS mean, the posterior mean
    and the predictive variance of a new observation with the mean's estimation error."""
    k = dense_kernel(kind, x, x, prior["lengthscale"], prior["variance"]) + prior["noise_variance"] * np.eye(len(y))
    kq = dense_kernel(kind, xq, x, prior["lengthscale"], prior["variance"])
    inv = np.linalg.inv(k)
    ones = np.ones(len(y))
    m = ones @ inv @ y / (ones @ inv @ ones)
    var = (prior["variance"] + prior["noise_variance"] - np.einsum("qi,ij,qj->q", kq, inv, kq)
           + (1 - kq @ inv @ ones) ** 2 / (ones @ inv @ ones))
    return m + kq @ inv @ (y - m), np.sqrt(var)


def test_cross_validation_scores_the_survey_beside_kriging_and_idw(tmp_path, capsys):
    """``evaluate RUN --cross-validate 3`` on a 30-point survey: the model's held-out
    predictions equal its predictive given the other folds (mapped to data units by hand),
    kriging's equal a dense NumPy ordinary kriging under the prior fitted to those folds,
    IDW's a NumPy inverse-distance weighting; CRPS (scipy's normal), coverage and errors
    are recomputed from them; a 3-step model loses to kriging and the verdict says so."""
    import json

    import taylorformer as tfm
    from taylorformer import cli
    from taylorformer.workflow import training

    rng = np.random.default_rng(7)
    x, y = simulated_survey(rng, "matern52", 30, extent=100.0, lengthscale=30.0, mean=10.0, variance=4.0,
                            noise_variance=0.05)
    survey = write_survey(tmp_path / "survey.csv", x, y)
    task = make_task("fitted-gp", {"path": survey, **CONFIG, "units": {"zinc": "mg/kg"}})
    training.train(TINY, task, out_dir=str(tmp_path / "run"), steps=3, batch_size=4, val_every=3,
                   val_batches=1, verbose=0, tensorboard=False, jit_compile=False, evaluate=False)
    capsys.readouterr()
    assert cli.main(["evaluate", str(tmp_path / "run"), "--cross-validate", "3"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    model = tfm.load_model(str(tmp_path / "run" / "best.keras"))
    folds = np.array_split(np.random.default_rng(0).permutation(30), 3)
    predicted = {name: (np.zeros(30), np.zeros(30)) for name in ("model", "kriging", "idw")}
    for held in folds:
        keep = np.setdiff1d(np.arange(30), held)
        batch = {"xc": ((x[keep] - task.x_offset) / task.x_scale)[None].astype(np.float32),
                 "yc": ((y[keep] - task.y_offset) / task.y_scale)[None, :, None].astype(np.float32),
                 "xt": ((x[held] - task.x_offset) / task.x_scale)[None].astype(np.float32)}
        p = tfm.predict(model, batch)
        predicted["model"][0][held] = p["mean"].numpy()[0, :, 0] * task.y_scale + task.y_offset
        predicted["model"][1][held] = p["stddev"].numpy()[0, :, 0] * task.y_scale
        prior = fitted_gp.select_prior(x[keep], y[keep])[0]
        mean, sd = reference_ordinary_kriging(prior["kernel"], x[keep], y[keep], x[held],
                                              {**prior, "lengthscale": float(np.ravel(prior["lengthscale"])[0])})
        predicted["kriging"][0][held], predicted["kriging"][1][held] = mean, sd
        w = 1.0 / ((x[held][:, None] - x[keep][None]) ** 2).sum(-1)
        predicted["idw"][0][held] = (w * y[keep]).sum(1) / w.sum(1)
        d2 = ((x[keep][:, None] - x[keep][None]) ** 2).sum(-1)
        loo_w = np.where(np.eye(len(keep), dtype=bool), 0.0, 1.0 / np.where(d2 > 0, d2, 1.0))
        loo = (loo_w * y[keep]).sum(1) / loo_w.sum(1)
        predicted["idw"][1][held] = np.sqrt(((loo - y[keep]) ** 2).mean())
    for name, (mean, sd) in predicted.items():
        got = result["data_units"] if name == "model" else result["baselines"][name]
        z = (y - mean) / sd
        crps = sd * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / math.sqrt(math.pi))
        np.testing.assert_allclose(got["crps"]["mean"], crps.mean(), rtol=1e-4, err_msg=name)
        np.testing.assert_allclose(got["mae"], np.abs(mean - y).mean(), rtol=1e-4, err_msg=name)
        np.testing.assert_allclose(got["coverage95"], (np.abs(z) <= 1.959964).mean(), err_msg=name)
        assert got["crps"]["n"] == 30 and got["crps"]["stderr_method"] == "iid"
    gap = result["paired"]["kriging"]["crps"]
    assert gap["mean"] > 2 * gap["stderr"] > 0
    assert result["verdict"].startswith("kriging beats the model on CRPS") and "30 held-out points" in result["verdict"]
    assert err.strip().splitlines()[-1] == f"verdict: {result['verdict']}"
    assert result["cross_validation"] == {"folds": 3, "seed": 0, "points": 30, "source": survey}
    assert cli.main(["evaluate", str(tmp_path / "run"), "--cross-validate", "31"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "folds" in err[0] and "31" in err[0], err


@pytest.mark.parametrize("argv, words", [
    (["--cross-validate", "3", "--calibration"], "--calibration do not go with --cross-validate"),
    (["--survey", "s.csv"], "--survey go with --cross-validate K only"),
])
def test_cross_validation_option_errors_are_one_line(tmp_path, capsys, argv, words):
    """Options that mean nothing together are one error line, before any run is read."""
    from taylorformer import cli

    code = cli.main(["evaluate", str(tmp_path / "no-run"), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and words in err[0], err
