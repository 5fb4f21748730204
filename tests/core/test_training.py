"""Training loop, run directory, CLI train/evaluate/plot, mirrored strategy on 2 CPUs."""
import csv
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from taylorformer import cli, training
from taylorformer.training import resolve_jit_compile as JIT_RULE

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
TASK = {"num_context": [3, 10], "num_target": 10}


def test_short_training_run_loss_falls_and_run_dir_is_complete(tmp_path):
    out = tmp_path / "run"
    trainer = training.train(TINY, "gp", task_config=TASK, out_dir=str(out), steps=120,
                             batch_size=8, learning_rate=3e-3, val_every=40, val_batches=4,
                             verbose=0)
    with open(out / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == [40, 80, 120]
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"]) - 0.1
    assert float(rows[-1]["val_loglik"]) > float(rows[0]["val_loglik"])
    assert all(float(r["val_gt_loglik"]) > float(r["val_loglik"]) for r in rows)  # the GP ceiling
    for name in ("spec.json", "config.json", "best.keras", "model.keras"):
        assert (out / name).exists(), name
    assert not [p for p in os.listdir(out) if "tmp" in p]
    spec = json.loads((out / "spec.json").read_text())
    assert spec["encoder"]["width"] == 16 and spec["provenance"][0]["distribution"] == "taylorformer"
    config = json.loads((out / "config.json").read_text())
    assert config["task"] == "gp" and config["train"]["steps"] == 120
    assert trainer.model.spec == spec


def test_xla_and_cosine_schedule(tmp_path):
    trainer = training.train(TINY, "gp", task_config=TASK, out_dir=str(tmp_path / "r"), steps=4,
                             batch_size=4, jit_compile=True, schedule="cosine", val_every=4,
                             val_batches=1, verbose=0)
    lr = float(trainer.optimizer.learning_rate.numpy())
    expect = 2e-5 + 0.5 * (1e-3 - 2e-5) * (1 + np.cos(np.pi * 4 / 4))  # the end of the decay
    np.testing.assert_allclose(lr, expect, rtol=1e-4)


def test_mixed_bfloat16_training_step_leaves_the_global_policy_alone(tmp_path):
    import keras

    trainer = training.train(TINY, "gp", task_config=TASK, out_dir=str(tmp_path / "r"), steps=3,
                             batch_size=4, dtype_policy="mixed_bfloat16", val_every=3,
                             val_batches=1, verbose=0)
    assert trainer.model.encoder.attn[0].compute_dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
    assert keras.config.dtype_policy().name == "float32"
    with open(tmp_path / "r" / "metrics.csv") as fh:
        assert np.isfinite(float(list(csv.DictReader(fh))[-1]["train_loss"]))


def test_cli_train_evaluate_plot(tmp_path, capsys):
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(TINY))
    run = tmp_path / "run"
    code = cli.main(["train", "--model", str(spec), "--task", "gp", "--task-config", json.dumps(TASK),
                     "--steps", "6", "--batch-size", "4", "--val-every", "3", "--val-batches", "1",
                     "--eval-batches", "1", "--out", str(run)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "exact GP ceiling" in printed and (run / "predictions.png").exists()
    assert cli.main(["evaluate", str(run), "--batches", "2", "--batch-size", "4"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["num_tasks"] == 8 and {"loglik", "rmse", "coverage95", "gt_loglik"} <= set(result)
    assert 0 <= result["coverage95"] <= 1 and result["loglik"]["stderr"] > 0
    png = tmp_path / "p.png"
    assert cli.main(["plot", str(run), "--out", str(png), "--task-config", json.dumps({**TASK, "dim_x": 2}),
                     "--num-tasks", "2"]) == 2  # the model was trained on 1-D inputs
    assert "model expects inputs of dim 1" in capsys.readouterr().err
    assert cli.main(["plot", str(run), "--out", str(png), "--samples", "3"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["evaluate", str(tmp_path / "nowhere")]) == 2


MIRRORED = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from taylorformer import training
    from taylorformer.task import make_task

    spec, task_cfg = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    weights = {}
    for name in ("default", "mirrored"):
        cfg = training.TrainConfig(steps=2, batch_size=8, strategy=name, seed=3, val_every=2,
                                   val_batches=1, tensorboard=False)
        trainer = training.Trainer(spec, make_task("gp", task_cfg), cfg, out_dir=sys.argv[3] + name)
        rows = trainer.fit(verbose=0)
        weights[name] = [v.numpy() for v in trainer.model.trainable_variables]
        print(name, trainer.strategy.num_replicas_in_sync, rows[-1]["train_loss"])
    diff = max(float(np.abs(a - b).max()) for a, b in zip(weights["default"], weights["mirrored"]))
    print("max weight difference", diff)
    assert diff < 1e-5, diff
''')


@pytest.mark.slow
def test_mirrored_strategy_on_two_logical_cpus_matches_one_device(tmp_path):
    result = subprocess.run([sys.executable, "-c", MIRRORED, json.dumps(TINY), json.dumps(TASK),
                             str(tmp_path / "r-")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines())
    assert lines["mirrored"].split()[0] == "2" and lines["default"].split()[0] == "1"
    # one global batch split over two replicas gives the same loss and updates (the
    # gradient is clipped after the all-reduce, not per replica)
    np.testing.assert_allclose(float(lines["mirrored"].split()[1]), float(lines["default"].split()[1]),
                               rtol=1e-5)


def test_warmup_then_cosine_and_constant_schedules():
    cfg = training.TrainConfig(steps=100, warmup_steps=10, learning_rate=1e-3, min_learning_rate=1e-5)
    lr = lambda schedule, step: float(training.learning_rate_schedule(schedule)(step))  # noqa: E731
    cosine = lambda s: 1e-5 + 0.5 * (1e-3 - 1e-5) * (1 + np.cos(np.pi * (s - 10) / 90))  # noqa: E731
    np.testing.assert_allclose([lr(cfg, s) for s in (0, 5, 10, 55, 100)],
                               [0.0, 5e-4, 1e-3, cosine(55), 1e-5], rtol=1e-5, atol=1e-9)
    constant = training.TrainConfig(steps=100, warmup_steps=10, learning_rate=1e-3, schedule="constant")
    np.testing.assert_allclose([lr(constant, s) for s in (5, 10, 100)], [5e-4, 1e-3, 1e-3], rtol=1e-5)
    assert training.TrainConfig(steps=2000).warmup_steps == 100  # default: 5% of the steps


def test_auto_jit_compile_is_xla_on_one_device_only():
    import tensorflow as tf

    from taylorformer.errors import SpecError

    one_device = tf.distribute.get_strategy()
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    # the library's rule (imported before the suite's fixture turns "auto" off for speed)
    assert JIT_RULE("auto", one_device) is True and JIT_RULE(False, one_device) is False
    assert JIT_RULE("auto", mirrored) is False
    with pytest.raises(SpecError, match="distribution strategy"):
        JIT_RULE(True, mirrored)
