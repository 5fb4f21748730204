"""Checkpoints, resume, NaN handling, kill safety of run directories."""
import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from taylorformer.workflow import training
from taylorformer.errors import RunDirectoryError
from taylorformer.workflow.run_dir import RunDirectory
from taylorformer.task import make_task

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
TASK = {"num_context": [3, 8], "num_target": 8}
COMMON = dict(batch_size=4, val_every=10, val_batches=1, checkpoint_every=10, schedule="cosine",
              learning_rate=2e-3, verbose=0)


def weights(model):
    return [v.numpy() for v in model.trainable_variables]


class Crash(RuntimeError):
    pass


@pytest.mark.slow
def test_interrupted_then_resumed_run_matches_uninterrupted(tmp_path):
    full = training.train(TINY, "gp", TASK, out_dir=str(tmp_path / "full"), steps=40, **COMMON)

    # same run, crashing after step 25 (after the checkpoint at step 20)
    class CrashAt25(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.batches = 0

        def on_train_batch_end(self, batch, logs=None):
            self.batches += 1
            if self.batches == 25:
                raise Crash("simulated crash")

    with pytest.raises(Crash):
        training.train(TINY, "gp", TASK, out_dir=str(tmp_path / "cut"), steps=40,
                       callbacks=[CrashAt25()], **COMMON)
    cut = tmp_path / "cut"
    assert (cut / "checkpoints" / "latest").read_text() == "step-00000020"

    resumed = training.train(resume=str(cut), verbose=0, evaluate=False)
    assert int(resumed.step.numpy()) == 40
    for a, b in zip(weights(full.model), weights(resumed.model)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(resumed.optimizer.iterations.numpy()) == int(full.optimizer.iterations.numpy())
    steps = [json.loads(json.dumps(r))["step"] for r in resumed.run_dir.metrics_rows()]
    assert steps == ["10", "20", "30", "40"]
    assert sorted(os.listdir(cut / "checkpoints")) == ["latest", "step-00000030", "step-00000040"]


@pytest.mark.slow
def test_non_finite_loss_stops_and_leaves_checkpoints_untouched(tmp_path):
    out = tmp_path / "run"
    trainer = training.train(TINY, "gp", TASK, out_dir=str(out), steps=10, **COMMON)
    snapshot = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "metrics.csv"}
    assert not [p for p in snapshot if ".tmp" in str(p.relative_to(out))]  # no temp file left
    with pytest.raises(FloatingPointError, match="checkpoints .* still hold the last good weights"):
        training.train(resume=str(out), steps=60, learning_rate=1e9, verbose=0, evaluate=False)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "metrics.csv"}
    changed = [p.name for p in snapshot if p in after and after[p] != snapshot[p]]
    assert set(changed) <= {"config.json"}  # only the (new) config was rewritten
    restored = training.train(resume=str(out), steps=10, verbose=0, evaluate=False)
    for a, b in zip(weights(trainer.model), weights(restored.model)):
        np.testing.assert_array_equal(a, b)


def test_skip_policy_drops_non_finite_steps(tmp_path):
    class PoisonedGP:
        """GP batches with infinite targets in every 3rd training batch (a NaN would be an
        unobserved value, which the loss leaves out)."""

        def __init__(self):
            self.inner = make_task("gp", TASK)
            self.dim_x, self.dim_y = 1, 1

        def dataset(self, split, batch_size, seed=0, num_batches=None, start=0):
            import tensorflow as tf

            ds = self.inner.dataset(split, batch_size, seed, num_batches, start)
            if split != "train":
                return ds
            counter = tf.data.Dataset.counter(start=start)

            def poison(i, b):
                bad = tf.equal(i % 3, 2)
                return {**b, "yt": tf.where(bad, tf.fill(tf.shape(b["yt"]), np.inf), b["yt"])}

            return tf.data.Dataset.zip(counter, ds).map(poison)

    cfg = training.TrainConfig(steps=9, nan_policy="skip", batch_size=4, val_every=9,
                               checkpoint_every=9, val_batches=1)
    trainer = training.Trainer(TINY, PoisonedGP(), cfg, str(tmp_path / "r"), task_name="gp")
    trainer.fit(verbose=0)
    assert int(trainer.skipped.numpy()) == 3 and int(trainer.optimizer.iterations.numpy()) == 6
    assert all(np.isfinite(w).all() for w in weights(trainer.model))


KILLING = dict(batch_size=4, checkpoint_every=1, keep_checkpoints=2, schedule="constant",
               warmup_steps=0, tensorboard=False, jit_compile=False, verbose=0)
KILLED = """
import os, sys
from taylorformer.workflow import training
if os.path.exists(os.path.join(sys.argv[1], "config.json")):
    training.train(resume=sys.argv[1], verbose=0)
else:
    training.train({spec}, "gp", {task}, out_dir=sys.argv[1], steps=100000, val_every=100000, **{common})
"""


@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume_equals_an_uninterrupted_run(tmp_path):
    out = tmp_path / "killed"
    script = KILLED.format(spec=repr(TINY), task=repr(TASK), common=repr(KILLING))
    rng = np.random.default_rng(0)
    for attempt in range(2):  # the second attempt resumes the killed run
        latest = out / "checkpoints" / "latest"
        before = latest.read_text() if latest.exists() else None
        proc = subprocess.Popen([sys.executable, "-c", script, str(out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 240
        while (not latest.exists() or latest.read_text() == before) and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(rng.uniform(0.5, 3.0))  # kill somewhere inside the checkpoint cycle
        if attempt == 0:  # while it trains, the run is locked against a second process
            assert proc.poll() is None
            with pytest.raises(RunDirectoryError, match=f"in use by another process \\(pid {proc.pid}"):
                with RunDirectory(str(out)).open_run(resume=True):
                    pass
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        config = {k: v for k, v in KILLING.items() if k != "verbose"}
        trainer = training.Trainer(TINY, make_task("gp", TASK),
                                   training.TrainConfig(steps=100000, **config), str(out))
        step = trainer.restore_latest()
        assert step >= 1 and all(np.isfinite(w).all() for w in weights(trainer.model))
    # the killed run, resumed for 3 more steps, ends where an uninterrupted run does
    resumed = training.train(resume=str(out), steps=step + 3, verbose=0, evaluate=False)
    assert int(resumed.step.numpy()) == step + 3
    full = training.train(TINY, "gp", TASK, out_dir=str(tmp_path / "full"), steps=step + 3,
                          val_every=100000, **KILLING)
    for a, b in zip(weights(full.model), weights(resumed.model)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
