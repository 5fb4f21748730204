"""Evaluation with missing values (issue 37, item 1): a window whose targets are all NaN
has nothing to score. ``evaluate()``, ``model.evaluate``, the CLI ``evaluate`` and
``train``'s final evaluation leave it out and count it (``num_tasks_skipped``); the
metrics equal those computed (NumPy) over the remaining windows alone."""
import json

import numpy as np
import pandas as pd
import pytest

import taylorformer as tfm
from taylorformer import cli
from taylorformer.errors import TaskError
from taylorformer.workflow.evaluation import evaluate
from taylorformer.workflow.runs import load_run
from taylorformer.tasks import from_dataframe

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
N, GAP = 400, slice(330, 350)  # the test split starts at 320: the gap covers whole windows
OPTIONS = {"context_length": 12, "horizon": 4, "eval_stride": 2}


def series():
    t = np.arange(N, dtype=np.float64)
    y = np.sin(t / 7.0) + 0.1 * np.cos(t / 3.0)
    y[GAP] = np.nan
    return pd.DataFrame({"date": pd.date_range("2021-01-01", periods=N, freq="h").astype(str), "y": y})


@pytest.fixture(scope="module")
def task():
    return from_dataframe(series(), "y", date_column="date", **OPTIONS)


@pytest.fixture(scope="module")
def model(task):
    return tfm.build_model({**TINY, "dim_x": task.dim_x, "dim_y": task.dim_y})


def reference(model, task, batch_size):
    """Log-likelihood per window and squared errors of the windows with an observed target,
    each batch cut down to those windows (NumPy indexing) before the model sees it."""
    lls, sq, skipped = [], [], 0
    for batch in task.dataset("test", batch_size=batch_size):
        batch = {k: v.numpy() for k, v in batch.items()}
        keep = ~np.isnan(batch["yt"]).all(axis=(1, 2))
        skipped += int((~keep).sum())
        if not keep.any():
            continue
        sub = {k: v[keep] for k, v in batch.items()}
        lls.append(tfm.loglik(model, sub).numpy())
        mean = np.asarray(model.distribution(sub).mean())[..., 0]
        y = sub["yt"][..., 0]
        sq.append(((mean - y) ** 2)[~np.isnan(y)])
    return np.concatenate(lls), np.concatenate(sq), skipped


def test_evaluate_skips_and_counts_windows_without_an_observed_target(model, task):
    lls, sq, skipped = reference(model, task, batch_size=5)
    assert skipped >= 3 and lls.size >= 10  # the fixture has both kinds of window
    got = evaluate(model, task, batch_size=5)
    assert got["num_tasks"] == lls.size and got["num_tasks_skipped"] == skipped
    np.testing.assert_allclose(got["loglik"]["mean"], lls.mean(), rtol=1e-5)
    np.testing.assert_allclose(got["loglik"]["stderr"], lls.std(ddof=1) / np.sqrt(lls.size), rtol=1e-4)
    np.testing.assert_allclose(got["mse"], sq.mean(), rtol=1e-4)


def test_keras_evaluate_skips_and_counts_them_too(model, task):
    lls, _, skipped = reference(model, task, batch_size=5)
    model.compile(optimizer="adam")
    logs = model.evaluate(task.dataset("test", batch_size=5), return_dict=True, verbose=0)
    assert logs["num_tasks_skipped"] == skipped
    np.testing.assert_allclose(logs["loglik"], lls.mean(), rtol=1e-5)
    np.testing.assert_allclose(logs["loss"], -lls.mean(), rtol=1e-5)


def test_a_split_with_nothing_observed_is_a_named_error(model):
    frame = series()
    frame.loc[300:, "y"] = np.nan
    task = from_dataframe(frame, "y", date_column="date", **OPTIONS)
    with pytest.raises(TaskError, match="no task of split 'test' has an observed target"):
        evaluate(model, task, batch_size=8)


def test_cli_train_final_evaluation_and_evaluate_skip_them(tmp_path, capsys):
    path = tmp_path / "series.csv"
    series().to_csv(path, index=False)
    config = json.dumps({"path": str(path), "target_columns": "y", "date_column": "date", **OPTIONS})
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(TINY))
    run = tmp_path / "run"
    code = cli.main(["train", "--model", str(spec), "--task", "csv", "--task-config", config, "--steps", "2",
                     "--batch-size", "4", "--val-every", "2", "--val-batches", "1", "--out", str(run),
                     "--no-xla", "--no-tensorboard"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    printed = captured.out
    final = json.loads(printed[printed.index("{"):printed.rindex("}") + 1])
    model, task, _ = load_run(str(run))
    lls, _, skipped = reference(model, task, batch_size=4)
    assert final["num_tasks_skipped"] == skipped > 0 and final["num_tasks"] == lls.size
    np.testing.assert_allclose(final["loglik"]["mean"], lls.mean(), rtol=1e-5)
    assert cli.main(["evaluate", str(run), "--batch-size", "4"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["num_tasks_skipped"] == skipped
