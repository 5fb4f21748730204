"""An autoregressive model's headline metrics are those of its sampled multi-step forecasts:
``evaluate``, ``train``'s final evaluation (its summary and ``best.keras``'s card) and
``info`` report them, each equal to a NumPy statement over paths drawn with ``model.sample``
(same seed, same windows); the teacher-forced figures appear only under ``teacher_forced``.
A conditional model's evaluation is what it was."""
import json

import numpy as np
import pandas as pd
import pytest

import taylorformer as tfm
from taylorformer import cli
from taylorformer.batch import with_masks
from taylorformer.errors import SpecError
from taylorformer.model_card import evaluation_headline, format_info, run_info
from taylorformer.tasks import from_dataframe
from taylorformer.workflow.evaluation import DEFAULT_SAMPLES, evaluate
from taylorformer.workflow.runs import load_run

LAYERS = {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}
TNP_A = {"preset": "tnp-a", "encoder": LAYERS}
CNP_LIKE = {"preset": "tnp-d", "encoder": LAYERS, "head": {"width": 16}}
N = 240  # rows; the test split (the last 20%) holds 48 rows: 9 windows of 16 at stride 4
OPTIONS = {"context_length": 12, "horizon": 4, "eval_stride": 4}


def series():
    """A daily-cycle temperature: offset about 10, scale about 3.5 (the normaliser is not the identity)."""
    t = np.arange(N, dtype=np.float64)
    y = 10.0 + 5.0 * np.sin(2 * np.pi * t / 24.0) + 0.5 * np.cos(t / 5.0)
    return pd.DataFrame({"date": pd.date_range("2021-01-01", periods=N, freq="h").astype(str), "temp": y})


@pytest.fixture(scope="module")
def task():
    return from_dataframe(series(), "temp", date_column="date", **OPTIONS)


@pytest.fixture(scope="module")
def model(task):
    """An untrained autoregressive model (its decoding loop traced once for the module)."""
    return tfm.build_model({**TNP_A, "dim_x": task.dim_x, "dim_y": task.dim_y})


def fair_crps(paths, y):
    """The fair ensemble CRPS of ``paths [S, ...]`` at ``y``: E|X - y| - sum_{i != j} |X_i -
    X_j| / (2 S (S - 1)), all pairs written out."""
    s = paths.shape[0]
    pairs = np.abs(paths[:, None] - paths[None]).sum((0, 1)) / (s * (s - 1))
    return np.abs(paths - y).mean(0) - 0.5 * pairs


def reference(model, task, windows, num_samples, batch_size, seed=0):
    """NumPy headline of the windows ``windows`` (indices in the test split): the paths'
    rmse, mae (of their mean), fair CRPS and central-95% coverage, in model and data units,
    and the teacher-forced rmse over every window."""
    tasks = [{k: v[i] for k, v in batch.items()} for batch in task.dataset("test", batch_size=batch_size)
             for i in range(int(batch["xt"].shape[0]))]
    scale = float(np.asarray(task.std).ravel()[0])  # the task's standardisation: y = mean + std * z
    err, crps, inside, forced = [], [], [], []
    for k, one in enumerate(tasks):
        one = {key: np.asarray(v)[None] for key, v in one.items()}
        y = one["yt"][0, :, 0].astype(np.float64)
        forced.append(np.asarray(model.distribution(one).mean())[0, :, 0] - y)
        if k not in windows:
            continue
        paths = np.asarray(model.sample(one, num_samples, seed=seed, window_ids=[k]), np.float64)[:, 0, :, 0]
        err.append(paths.mean(0) - y)
        crps.append(fair_crps(paths, y))
        lo, hi = np.quantile(paths, [0.025, 0.975], axis=0)
        inside.append((y >= lo) & (y <= hi))
    err, crps, inside, forced = (np.concatenate(a) for a in (err, crps, inside, forced))
    return {"rmse": np.sqrt((err ** 2).mean()), "mae": np.abs(err).mean(), "crps": crps.mean(),
            "coverage95": inside.mean(), "scale": scale, "num_tasks": len(tasks),
            "forced_rmse": np.sqrt((forced ** 2).mean())}


def test_evaluate_headline_is_the_sampled_forecasts(task, model):
    assert model.causal
    total = len(task.window_starts("test"))
    got = evaluate(model, task, batch_size=4, num_samples=5, sampled_tasks=3)
    stride = total // 3  # three windows spread over the split: 0, stride, 2 stride
    ref = reference(model, task, {0, stride, 2 * stride}, 5, batch_size=4)
    assert got["sampled"]["num_samples"] == 5 and got["sampled"]["num_tasks"] == 3
    assert got["sampled"]["stride"] == stride and got["num_tasks"] == total == ref["num_tasks"]
    for key in ("rmse", "mae", "crps", "coverage95"):  # the model's units, then the data's
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-5, err_msg=key)
        expect = ref[key] * (1.0 if key == "coverage95" else ref["scale"])
        units = got["data_units"][key]
        np.testing.assert_allclose(units["mean"] if key == "crps" else units, expect, rtol=1e-5, err_msg=key)
    (label,) = got["data_units"]["outputs"]
    np.testing.assert_allclose(got["data_units"]["outputs"][label]["rmse"], ref["rmse"] * ref["scale"], rtol=1e-5)
    # the teacher-forced figures: only under their label, over every window
    np.testing.assert_allclose(got["teacher_forced"]["rmse"], ref["forced_rmse"], rtol=1e-5)
    assert "teacher-forced" in got["teacher_forced"]["note"] and "teacher-forced" not in got["verdict"]
    np.testing.assert_allclose(got["teacher_forced"]["data_units"]["outputs"][label]["rmse"],
                               ref["forced_rmse"] * ref["scale"], rtol=1e-5)
    # the baselines are scored on the same three windows, against the same sampled CRPS
    for name, values in got["baselines"].items():
        assert values["crps"]["n"] == 3
        np.testing.assert_allclose(got["paired"][name]["crps"]["mean"],
                                   got["data_units"]["crps"]["mean"] - values["crps"]["mean"], rtol=1e-6, atol=1e-9)
    assert "sampled forecasts" in got["baselines_note"]
    headline = evaluation_headline(got)
    assert headline.startswith("sampled forecasts (5 paths per window, 3 windows) in the data's units: rmse ")


def test_no_samples_leaves_only_teacher_forced_point_metrics(task, model):
    got = evaluate(model, task, batch_size=4, num_batches=1, num_samples=0)
    assert not {"rmse", "mse", "mae", "crps", "coverage95", "sampled"} & set(got)
    assert "outputs" not in got["data_units"] and "(teacher-forced)" in got["verdict"]
    forced = got["teacher_forced"]
    assert {"rmse", "mse", "coverage95"} <= set(forced) and "crps" in forced["data_units"]
    assert evaluation_headline(got).startswith("no sampled forecasts: the point metrics are teacher-forced only")
    with pytest.raises(SpecError, match="'num_samples' is the number of forecast paths per window.*got 1"):
        evaluate(model, task, num_batches=1, num_samples=1)


def test_a_conditional_model_is_unchanged(task):
    model = tfm.build_model({**CNP_LIKE, "dim_x": task.dim_x, "dim_y": task.dim_y})
    got = evaluate(model, task, batch_size=4)
    assert not {"teacher_forced", "sampled", "mae"} & set(got) and evaluation_headline(got) is None
    errors = []
    for batch in task.dataset("test", batch_size=4):
        batch = with_masks(batch)
        errors.append((np.asarray(model.distribution(batch).mean()) - batch["yt"].numpy()).ravel())
    np.testing.assert_allclose(got["rmse"], np.sqrt((np.concatenate(errors) ** 2).mean()), rtol=1e-5)
    (outputs,) = got["data_units"]["outputs"].values()
    assert "crps" in outputs


def test_train_summary_card_and_info_report_the_sampled_headline(tmp_path, capsys):
    path = tmp_path / "temp.csv"
    series().to_csv(path, index=False)
    config = json.dumps({"path": str(path), "target_columns": "temp", "date_column": "date", **OPTIONS})
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(TNP_A))
    run = tmp_path / "run"
    code = cli.main(["train", "--model", str(spec), "--task", "csv", "--task-config", config, "--steps", "2",
                     "--batch-size", "4", "--val-every", "2", "--val-batches", "1", "--out", str(run),
                     "--no-xla", "--no-tensorboard"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    printed = captured.out
    final = json.loads(printed[printed.index("{"):printed.rindex("}") + 1])
    model, task, _ = load_run(str(run))
    total = len(task.window_starts("test"))  # fewer than the default windows: every one is sampled
    ref = reference(model, task, set(range(total)), DEFAULT_SAMPLES, batch_size=4)
    assert final["sampled"] == {**final["sampled"], "num_samples": DEFAULT_SAMPLES, "num_tasks": total, "stride": 1}
    for key in ("rmse", "crps"):
        np.testing.assert_allclose(final[key], ref[key], rtol=1e-5)
    np.testing.assert_allclose(final["teacher_forced"]["rmse"], ref["forced_rmse"], rtol=1e-5)
    line = next(x for x in printed.splitlines() if x.startswith("sampled forecasts"))
    assert line.startswith(f"sampled forecasts ({DEFAULT_SAMPLES} paths per window, {total} windows) in the data's")
    card = run_info(str(run))["card"]["evaluation"]
    assert card["rmse"] == final["rmse"] and card["data_units"]["crps"] == final["data_units"]["crps"]
    assert card["teacher_forced"]["rmse"] == final["teacher_forced"]["rmse"]
    assert cli.main(["info", str(run)]) == 0
    text = capsys.readouterr().out
    assert f"sampled forecasts, {DEFAULT_SAMPLES} paths per window on {total} windows" in text
    assert f"rmse {final['rmse']:.4g}" in text and "teacher-forced (each target given the true earlier" in text
    assert cli.main(["evaluate", str(run), "--batch-size", "4", "--samples", "0", "--sampled-windows", "2"]) == 0
    again = capsys.readouterr()  # no forecasts sampled (a second trace of the decoding loop): labelled so
    assert "rmse" not in json.loads(again.out) and "no sampled forecasts" in again.err


def test_a_card_written_before_sampled_headlines_still_prints():
    """An older card: an autoregressive model's point metrics flagged ``teacher_forced: true``
    and the sampled ones in ``sampled``; both print, each under its label."""
    evaluation = {"split": "test", "num_tasks": 8, "loglik": {"mean": -1.0, "stderr": 0.1, "n": 8},
                  "rmse": 1.2, "mse": 1.44, "coverage95": 0.9, "teacher_forced": True,
                  "sampled": {"num_samples": 8, "mse": 34.8, "crps": 3.17, "coverage95": 0.5},
                  "data_units": {"loglik": {"mean": -2.0, "stderr": 0.1, "n": 8},
                                 "outputs": {"t [degC]": {"rmse": 1.2, "mae": 1.0, "n": 96}}}}
    info = {"file": "best.keras", "saved": None, "normaliser": None, "notes": [],
            "model": {"class": "AutoregressiveNP", "preset": "tnp-a", "kind": "autoregressive", "dim_x": 1,
                      "dim_y": 1, "likelihood": "normal"},
            "card": {"data": {"task": "csv"}, "evaluation": evaluation, "versions": {}}}
    text = format_info(info)
    assert "point metrics teacher-forced (each target given the true earlier ones)" in text
    assert "t [degC] (teacher-forced): rmse 1.2" in text
    assert "sampled forecasts (8 paths per window): mse 34.8, crps 3.17, coverage95 0.5" in text
    assert evaluation_headline(evaluation).startswith("no sampled forecasts")
