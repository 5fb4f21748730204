"""Training loop, run directory, CLI train/evaluate/plot, mirrored strategy on 2 CPUs."""
import csv
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taylorformer import cli
from taylorformer.workflow import training
from taylorformer.errors import SpecError
from taylorformer.workflow.training import resolve_jit_compile as JIT_RULE

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
                             val_batches=1, verbose=0, evaluate=False)
    lr = float(trainer.optimizer.learning_rate.numpy())
    expect = 2e-5 + 0.5 * (1e-3 - 2e-5) * (1 + np.cos(np.pi * 4 / 4))  # the end of the decay
    np.testing.assert_allclose(lr, expect, rtol=1e-4)


def test_mixed_bfloat16_training_step_leaves_the_global_policy_alone(tmp_path):
    import keras

    trainer = training.train(TINY, "gp", task_config=TASK, out_dir=str(tmp_path / "r"), steps=3,
                             batch_size=4, dtype_policy="mixed_bfloat16", val_every=3,
                             val_batches=1, verbose=0, evaluate=False)
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


def test_python_train_ends_as_the_cli_train_does(tmp_path, capsys):
    """``tfm.train`` and ``taylorformer train`` with the same options leave the same final
    evaluation in the best model's card, a ``predictions.png`` and the printed summary."""
    import taylorformer as tfm
    from taylorformer.model_card import read_model_file

    options = {"steps": 2, "batch_size": 4, "val_every": 2, "val_batches": 1, "tensorboard": False}
    trainer = tfm.train(TINY, "gp", TASK, out_dir=str(tmp_path / "py"), eval_batches=1, **options)
    printed = capsys.readouterr().out
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(TINY))
    assert cli.main(["train", "--model", str(spec), "--task", "gp", "--task-config", json.dumps(TASK),
                     "--steps", "2", "--batch-size", "4", "--val-every", "2", "--val-batches", "1",
                     "--no-tensorboard", "--eval-batches", "1", "--out", str(tmp_path / "cli")]) == 0
    cli_printed = capsys.readouterr().out
    cards = {name: read_model_file(tmp_path / name / "best.keras")["card"] for name in ("py", "cli")}
    assert cards["py"]["evaluation"]["loglik"] == trainer.evaluation["loglik"]
    assert set(cards["py"]["evaluation"]) == set(cards["cli"]["evaluation"])
    np.testing.assert_allclose(cards["py"]["evaluation"]["loglik"]["mean"],
                               cards["cli"]["evaluation"]["loglik"]["mean"], rtol=1e-5)
    for name, text in (("py", printed), ("cli", cli_printed)):
        png = tmp_path / name / "predictions.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"run directory: {tmp_path / name}" in text and f"plot: {png}" in text
        assert "exact GP ceiling" in text
    quiet = training.train(resume=str(tmp_path / "py"), steps=3, evaluate=False, verbose=0)
    assert quiet.evaluation is None and capsys.readouterr().out == ""


def test_time_budget_s_reads_as_time_budget_with_a_warning(tmp_path):
    """The CLI's ``--time-budget`` is ``time_budget`` (seconds) in Python; the old
    ``time_budget_s`` (an option, a run's config.json) still reads, warning with the new name."""
    with pytest.raises(SpecError, match="both 'time_budget_s' and 'time_budget'"):
        training.train(TINY, "gp", TASK, out_dir=str(tmp_path / "both"), time_budget=5, time_budget_s=5)
    run = tmp_path / "run"
    options = {"steps": 2, "batch_size": 4, "val_every": 2, "val_batches": 1, "tensorboard": False,
               "evaluate": False, "verbose": 0}
    with pytest.warns(DeprecationWarning, match="'time_budget_s' is now 'time_budget'"):
        training.train(TINY, "gp", TASK, out_dir=str(run), time_budget_s=600, **options)
    config = json.loads((run / "config.json").read_text())
    assert config["train"]["time_budget"] == 600 and "time_budget_s" not in config["train"]
    config["train"]["time_budget_s"] = config["train"].pop("time_budget")  # a run written before
    (run / "config.json").write_text(json.dumps(config))
    with pytest.warns(DeprecationWarning, match="config.json: train config option 'time_budget_s'"):
        resumed = training.train(resume=str(run), steps=3, evaluate=False, verbose=0)
    assert resumed.cfg.time_budget == 600 and resumed.steps_done == 3


def test_cli_train_without_model_is_the_main_job(tmp_path):
    """No --model: TNP-D with MAIN_JOB_MODEL's layers for MAIN_JOB_STEPS steps (a time
    budget stops it early here); --model alone keeps the library's 2000 steps."""
    run = tmp_path / "main"
    assert cli.main(["train", "--out", str(run), "--no-eval", "--no-xla", "--no-tensorboard",
                     "--time-budget", "0.5", "--val-every", "2", "--val-batches", "1"]) == 0
    spec = json.loads((run / "spec.json").read_text())
    config = json.loads((run / "config.json").read_text())
    assert spec["encoder"]["layers"] == cli.MAIN_JOB_MODEL["encoder"]["layers"] == 2
    assert spec["encoder"]["width"] == 128 and spec["kind"] == "conditional"  # TNP-D otherwise
    assert config["task"] == "gp" and config["train"]["steps"] == cli.MAIN_JOB_STEPS == 6500
    other = tmp_path / "cnp"
    assert cli.main(["train", "--model", "cnp", "--out", str(other), "--no-eval", "--no-xla",
                     "--no-tensorboard", "--time-budget", "0.5", "--val-every", "2",
                     "--val-batches", "1"]) == 0
    assert json.loads((other / "config.json").read_text())["train"]["steps"] == 2000


MIRRORED = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from taylorformer.workflow import training
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

    one_device = tf.distribute.get_strategy()
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    # the library's rule (imported before the suite's fixture turns "auto" off for speed)
    assert JIT_RULE("auto", one_device) is True and JIT_RULE(False, one_device) is False
    assert JIT_RULE("auto", mirrored) is False
    with pytest.raises(SpecError, match="distribution strategy"):
        JIT_RULE(True, mirrored)


# ------------------------------------------------------------------ argument checks
POSITIVE_INTS = ["steps", "batch_size", "val_every", "val_batches", "checkpoint_every",
                 "keep_checkpoints"]
POSITIVE_FLOATS = ["learning_rate", "clip_norm", "time_budget"]
NON_NEGATIVE_FLOATS = ["weight_decay", "min_learning_rate"]


def _bad_train_option():
    """(key, value) pairs that a TrainConfig must reject: one defect each."""
    not_a_number = st.sampled_from(["1", [1], True, False])
    bad_int = st.one_of(st.integers(max_value=0), st.floats(), not_a_number)
    non_finite = st.sampled_from([float("inf"), float("-inf"), float("nan")])
    return st.one_of(
        st.tuples(st.sampled_from(POSITIVE_INTS), bad_int),
        st.tuples(st.just("num_permutations"), st.one_of(st.integers(max_value=-1), not_a_number)),
        st.tuples(st.just("seed"), st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32))),
        st.tuples(st.sampled_from(POSITIVE_FLOATS),
                  st.one_of(st.floats(max_value=0), non_finite, st.sampled_from(["1e-3", True]))),
        st.tuples(st.sampled_from(NON_NEGATIVE_FLOATS),
                  st.one_of(st.floats(max_value=-1e-12), non_finite, st.just("0"))),
        st.tuples(st.just("warmup_steps"), st.one_of(st.integers(max_value=-1),
                                                     st.integers(min_value=100), st.just(1.5))),
        st.tuples(st.sampled_from(["schedule", "strategy", "budget_clock", "nan_policy"]),
                  st.text(max_size=8).filter(lambda t: t not in {"cosine", "constant", "default",
                                                                "mirrored", "wall", "cpu", "stop",
                                                                "skip"})),
        st.tuples(st.just("jit_compile"), st.sampled_from(["yes", "on", 2, None])),
        st.tuples(st.just("tensorboard"), st.sampled_from(["yes", 1, None])),
    )


@settings(max_examples=300, deadline=None, database=None)
@given(_bad_train_option())
def test_train_config_rejects_every_bad_value_naming_the_key_and_value(option):
    key, value = option
    with pytest.raises(SpecError) as info:
        training.TrainConfig(**{"steps": 100, key: value})
    assert f"'{key}'" in str(info.value) and f"got {value!r}" in str(info.value)


def test_bad_train_values_fail_before_training_not_as_floating_point_errors(tmp_path):
    for options, key in [({"learning_rate": float("inf")}, "learning_rate"),
                         ({"time_budget": -5}, "time_budget"),
                         ({"time_budget": float("nan")}, "time_budget"),
                         ({"num_permutations": -1}, "num_permutations"),
                         ({"eval_batches": 0}, "eval_batches"), ({"evaluate": "yes"}, "evaluate")]:
        with pytest.raises(SpecError, match=f"'{key}' must be"):
            training.train(TINY, "gp", TASK, out_dir=str(tmp_path / key), steps=2, verbose=0, **options)
        assert not (tmp_path / key).exists()
    with pytest.raises(SpecError, match="unknown train config option 'learnig_rate'"):
        training.train(TINY, "gp", TASK, out_dir=str(tmp_path / "x"), learnig_rate=1e-3)


@pytest.mark.parametrize("options,key", [
    ({"num_batches": 0}, "num_batches"), ({"batch_size": -3}, "batch_size"),
    ({"batch_size": 0}, "batch_size"), ({"num_samples": -1}, "num_samples"),
    ({"consistency": -2}, "consistency"), ({"consistency": 1}, "consistency"),
    ({"num_batches": 1.5}, "num_batches"),
])
def test_evaluate_run_checks_its_options_before_reading_the_run(tmp_path, options, key):
    from taylorformer.workflow import runs
    value = next(iter(options.values()))
    with pytest.raises(SpecError, match=f"evaluate '{key}' .*got {value}"):
        runs.evaluate_run(str(tmp_path / "no-run-here"), **options)


@pytest.mark.parametrize("options,key", [({"num_tasks": 0}, "num_tasks"),
                                         ({"num_samples": -1}, "num_samples")])
def test_plot_run_checks_its_options(tmp_path, options, key):
    from taylorformer.workflow import runs
    with pytest.raises(SpecError, match=f"plot '{key}' .*got {next(iter(options.values()))}"):
        runs.plot_run(str(tmp_path / "no-run-here"), **options)


def test_sampling_options_on_a_conditional_model_are_refused():
    from taylorformer.workflow.evaluation import evaluate
    from taylorformer.models import build_model
    from taylorformer.task import make_task

    model = build_model({**TINY, "dim_x": 1, "dim_y": 1})
    assert not model.causal
    task = make_task("gp", TASK)
    for option in ("num_samples", "consistency"):
        with pytest.raises(SpecError, match=f"'{option}' = 3 applies to autoregressive models"):
            evaluate(model, task, num_batches=1, batch_size=2, **{option: 3})
    assert evaluate(model, task, num_batches=1, batch_size=2)["num_tasks"] == 2
