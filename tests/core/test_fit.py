"""Keras-native training: compile/fit/evaluate with the NP loss, checked against a dense
reference (a GradientTape over -mean taylorformer.loglik) and NumPy statistics."""
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import taylorformer as tfm
from taylorformer.workflow import training
from taylorformer.errors import SpecError
from taylorformer.models.target_order import permute_targets
from taylorformer.task import make_task

TINY = {"tnp-d": {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
                  "head": {"width": 16}},
        "taylorformer": {"preset": "taylorformer", "encoder": {"layers": 1, "width": 16, "num_heads": 2,
                                                               "head_dim": 8, "dropout": 0.0},
                         "head": {"width": 16}}}
TASK = {"num_context": [3, 10], "num_target": 10}


def _batches(n, batch_size=4, split="train"):
    return list(make_task("gp", TASK).dataset(split, batch_size=batch_size, num_batches=n))


def _reference_step(model, batch, lr, num_permutations=0, seed=0):
    """Weights after one SGD step on -mean loglik, by hand (GradientTape, no Keras fit)."""
    if num_permutations:
        batch = permute_targets(batch, tf.constant([seed, 0], tf.int64), num_permutations)
    with tf.GradientTape() as tape:
        loss = -tf.reduce_mean(tfm.loglik(model, batch, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    return [v.numpy() - lr * (0 if g is None else g.numpy())
            for v, g in zip(model.trainable_variables, grads)], float(loss)


@pytest.mark.parametrize("preset,permutations", [("tnp-d", 0), ("taylorformer", 0), ("taylorformer", 2)])
def test_one_fit_step_equals_the_gradient_of_the_np_loss(preset, permutations):
    batch = _batches(1)[0]
    model = tfm.build_model(TINY[preset])
    expected, loss = _reference_step(model, batch, 0.1, permutations, seed=7)
    model.compile(optimizer=keras.optimizers.SGD(0.1), num_permutations=permutations, permutation_seed=7)
    history = model.fit(tf.data.Dataset.from_tensors(batch), epochs=1, verbose=0)
    np.testing.assert_allclose(history.history["loss"][0], loss, rtol=1e-5)
    for got, want in zip(model.trainable_variables, expected):
        # the compiled step and the eager reference sum float32 terms in other orders: near-zero
        # weights differ by ~2e-6 on TF 2.19 (one SGD step of 0.1 on gradients of order 1)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # XLA-compiled training runs (tf219 stays lean)
@pytest.mark.parametrize("preset", ["tnp-d", "taylorformer"])
def test_fit_lowers_the_loss_and_evaluate_is_the_mean_loglik(preset):
    model = tfm.build_model(TINY[preset])
    model.compile(optimizer=keras.optimizers.AdamW(3e-3, global_clipnorm=1.0), jit_compile=True)
    task = make_task("gp", TASK)
    history = model.fit(task.dataset("train", batch_size=8), steps_per_epoch=25, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0] - 0.05
    val = _batches(3, batch_size=8, split="val")
    result = model.evaluate(task.dataset("val", batch_size=8, num_batches=3), return_dict=True, verbose=0)
    lls = np.concatenate([tfm.loglik(model, b).numpy() for b in val])
    gt_key = "gt_loglik_joint" if model.causal else "gt_loglik"
    gts = np.concatenate([b[gt_key].numpy() for b in val])
    np.testing.assert_allclose(result["loglik"], lls.mean(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(result["loss"], -lls.mean(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(result["loglik_stderr"], lls.std(ddof=1) / np.sqrt(len(lls)), rtol=1e-3)
    np.testing.assert_allclose(result["gt_loglik"], gts.mean(), rtol=1e-5)
    np.testing.assert_allclose(result["gap_to_gt"], (gts - lls).mean(), rtol=1e-4, atol=1e-5)


def test_mixed_precision_fit_keeps_float32_weights_and_finite_loss():
    model = tfm.build_model(TINY["tnp-d"], dtype_policy="mixed_bfloat16")
    model.compile(optimizer="adamw")
    history = model.fit(make_task("gp", TASK).dataset("train", batch_size=4), steps_per_epoch=3,
                        epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert keras.config.dtype_policy().name == "float32"


def test_compile_and_fit_reject_what_the_np_loss_cannot_use():
    model = tfm.build_model(TINY["tnp-d"])
    with pytest.raises(SpecError, match="own negative log-likelihood"):
        model.compile(optimizer="adam", loss="mse")
    with pytest.raises(SpecError, match="num_permutations applies to autoregressive"):
        model.compile(optimizer="adam", num_permutations=2)
    model.compile(optimizer="adam")
    with pytest.raises(SpecError, match="datasets of batch dicts"):
        model.fit(np.zeros((4, 3)), np.zeros((4, 1)), verbose=0)


def test_autoregressive_prediction_api_is_unambiguous():
    model = tfm.build_model(TINY["taylorformer"])
    batch = _batches(1)[0]
    with pytest.raises(TypeError, match="model.sample"):
        model.predict_distribution(batch)
    # the teacher-forced conditionals change with the yt passed in: named as such
    a = model.teacher_forced_distribution(batch).mean().numpy()
    b = model.teacher_forced_distribution({**batch, "yt": batch["yt"] + 1.0}).mean().numpy()
    assert not np.allclose(a[:, 1:], b[:, 1:])


@pytest.mark.slow  # a training run with TensorBoard logs and images
def test_train_composes_user_callbacks_and_writes_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    class Recorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epochs = []

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append(dict(logs))

    recorder = Recorder()
    out = tmp_path / "run"
    training.train(TINY["tnp-d"], "gp", TASK, out_dir=str(out), steps=6, batch_size=4, val_every=3,
                   val_batches=1, verbose=0, callbacks=[recorder], evaluate=False)
    assert len(recorder.epochs) == 2 and {"loss", "val_loglik", "val_gap_to_gt"} <= set(recorder.epochs[0])
    assert (out / "best.keras").exists() and (out / "checkpoints" / "latest").exists()
    train_events = EventAccumulator(str(out / "tensorboard" / "train")).Reload()
    val_events = EventAccumulator(str(out / "tensorboard" / "validation"), size_guidance={"images": 0}).Reload()
    train_tags = set(train_events.Tags()["tensors"]) | set(train_events.Tags()["scalars"])
    val_tags = set(val_events.Tags()["tensors"]) | set(val_events.Tags()["scalars"])
    assert {"epoch_loss", "epoch_learning_rate"} <= train_tags
    assert {"epoch_loglik", "epoch_gt_loglik", "epoch_gap_to_gt"} <= val_tags
    assert "predictions" in val_tags | set(val_events.Tags()["images"])
    loss_events = train_events.Tensors("epoch_loss")
    assert len(loss_events) == 2
    np.testing.assert_allclose([tf.make_ndarray(e.tensor_proto) for e in loss_events],
                               [e["loss"] for e in recorder.epochs], rtol=1e-6)


LOAD_WITH_KERAS = """
import sys
import keras
import taylorformer  # registers the model classes with Keras
model = keras.models.load_model(sys.argv[1])
print(type(model).__name__, model.compiled)
"""


@pytest.mark.slow
def test_plain_keras_load_model_after_importing_the_package(tmp_path):
    model = tfm.build_model(TINY["tnp-d"])
    model.compile(optimizer="adamw")
    model.fit(make_task("gp", TASK).dataset("train", batch_size=4), steps_per_epoch=2, epochs=1, verbose=0)
    path = str(tmp_path / "m.keras")
    model.save(path)
    result = subprocess.run([sys.executable, "-c", LOAD_WITH_KERAS, path], capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["ConditionalNP", "True"]


def test_cli_version_and_strict_json(tmp_path, capsys):
    from taylorformer import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"taylorformer {tfm.__version__}"
    run = tmp_path / "run"
    assert cli.main(["train", "--model", "cnp", "--task", "gp",
                     "--task-config", json.dumps(TASK), "--steps", "2", "--batch-size", "2",
                     "--val-every", "2", "--val-batches", "1", "--no-eval", "--no-tensorboard",
                     "--out", str(run)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b[" not in printed  # not a terminal: Keras' one-line-per-epoch log, no escape codes
    assert not (run / "tensorboard").exists()
    # one task: its stderr is undefined and prints as null (strict JSON), not NaN
    assert cli.main(["evaluate", str(run), "--batches", "1", "--batch-size", "1"]) == 0
    result = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert result["loglik"]["stderr"] is None and result["num_tasks"] == 1
    assert os.path.exists(run / "model.keras")
