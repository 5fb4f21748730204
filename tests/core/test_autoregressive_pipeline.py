"""Autoregressive models through the trainer, evaluation (sampled + consistency) and CLI."""
import json

import numpy as np
import pytest

from taylorformer import cli
from taylorformer.workflow import training
from taylorformer.errors import SpecError
from taylorformer.workflow.evaluation import sample_metrics

TINY_AR = {"preset": "taylorformer", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}}
TASK = {"num_context": [3, 8], "num_target": 6}


def test_sample_metrics_against_closed_forms():
    rng = np.random.default_rng(0)
    yt = rng.normal(size=(2, 3, 1))
    samples = yt[None] + rng.normal(size=(4000, 2, 3, 1))  # N(y, 1) predictive around the truth
    m = sample_metrics(samples, yt, np.ones((2, 3)))
    few = samples[:50, :1, :1]  # the fair CRPS: the spread over the S (S - 1) pairs of distinct samples
    pairs = np.abs(few[:, None] - few[None]).sum((0, 1)) / (50 * 49)
    np.testing.assert_allclose(sample_metrics(few, yt[:1, :1], np.ones((1, 1)))["crps"],
                               (np.abs(few - yt[None, :1, :1]).mean(0) - 0.5 * pairs).ravel())
    # CRPS of N(mu, 1) at y = mu is (sqrt(2) - 1) / sqrt(pi) ~ 0.2337
    np.testing.assert_allclose(m["crps"].mean(), (np.sqrt(2) - 1) / np.sqrt(np.pi), atol=0.01)
    assert m["inside95"].all() and m["sq_err"].max() < 0.01


def test_train_with_permutations_evaluate_and_plot(tmp_path, capsys):
    run = tmp_path / "ar"
    spec = tmp_path / "ar.json"
    spec.write_text(json.dumps(TINY_AR))
    code = cli.main(["train", "--model", str(spec), "--task", "gp", "--task-config", json.dumps(TASK),
                     "--steps", "4", "--batch-size", "4", "--val-every", "4", "--val-batches", "1",
                     "--num-permutations", "2", "--out", str(run), "--no-eval"])
    assert code == 0
    capsys.readouterr()
    assert cli.main(["evaluate", str(run), "--batches", "1", "--batch-size", "4", "--samples", "8",
                     "--consistency", "3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"rmse", "mse", "coverage95"} <= set(result["teacher_forced"])  # labelled, not the headline
    assert result["gt_loglik"]["kind"].startswith("joint")
    assert {"mse", "crps", "coverage95"} <= set(result) and result["sampled"]["num_samples"] == 8
    assert result["consistency"]["k"] == 3 and result["consistency"]["num_tasks"] == 4
    assert result["consistency"]["lower"] <= result["consistency"]["mean"] <= result["consistency"]["upper"]
    assert cli.main(["plot", str(run), "--samples", "3", "--num-tasks", "2"]) == 0
    assert (run / "predictions.png").exists()


def test_permutations_rejected_for_conditional_models(tmp_path):
    with pytest.raises(SpecError, match="num_permutations"):
        training.train("cnp", "gp", TASK, out_dir=str(tmp_path / "c"), steps=1, num_permutations=2, verbose=0)
