"""A run directory belongs to one run: refusal of a second run, exclusive names, the
writer lock across processes, exclusive fsynced temp files, a confined ``latest``, resume
from the newest intact checkpoint, corrupt files named."""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

from taylorformer import files
from taylorformer.workflow import runs, training
from taylorformer.errors import RunDirectoryError
from taylorformer.workflow.run_dir import RunDirectory
from taylorformer.task import make_task

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
TASK = {"num_context": [3, 8], "num_target": 8}
SHORT = dict(steps=4, batch_size=4, val_every=2, val_batches=1, checkpoint_every=2,
             keep_checkpoints=3, schedule="constant", warmup_steps=0, tensorboard=False,
             jit_compile=False, verbose=0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished 4-step run with checkpoints at steps 2 and 4 (copied by ``run``)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    training.train(TINY, "gp", TASK, out_dir=str(out), **SHORT)
    return out


@pytest.fixture
def run(trained, tmp_path):
    """A private copy of the trained run, free to damage."""
    return shutil.copytree(trained, tmp_path / "run", symlinks=True)


def snapshot(path):
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file() and p.name != ".lock"}


def weights(model):
    return [v.numpy() for v in model.weights]


# ------------------------------------------------------------------ one run per directory
def test_a_new_run_into_a_directory_holding_a_run_is_refused_and_changes_nothing(run):
    before = snapshot(run)
    with pytest.raises(RunDirectoryError, match=r"already holds a run .*--resume") as info:
        training.train(TINY, "gp", TASK, out_dir=str(run), **{**SHORT, "seed": 7})
    assert str(run) in str(info.value) and "spec.json" in str(info.value)
    assert snapshot(run) == before


def test_out_naming_an_existing_file_is_refused(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    with pytest.raises(RunDirectoryError, match="existing file, not a directory") as info:
        training.train(TINY, "gp", TASK, out_dir=str(target), **SHORT)
    assert str(target) in str(info.value) and target.read_text() == "keep me"


def test_an_empty_or_missing_directory_is_a_new_run(tmp_path):
    for path in (tmp_path / "empty", tmp_path / "missing" / "deeper"):
        if path.name == "empty":
            path.mkdir()
        with RunDirectory(str(path)).open_run() as run:
            run.write_definition({"a": 1}, {"train": {}, "task": "gp", "task_config": {}})
        assert json.loads((path / "spec.json").read_text()) == {"a": 1}


def test_default_run_names_never_collide(tmp_path):
    base = str(tmp_path / "runs" / "tnp-d-gp-20240101-000000")
    made, threads = [], []
    for _ in range(8):
        threads.append(threading.Thread(target=lambda: made.append(RunDirectory.create_new(base).path)))
        threads[-1].start()
    for thread in threads:
        thread.join()
    assert sorted(made) == sorted([base] + [f"{base}-{n}" for n in range(2, 9)])
    assert all(os.path.isdir(p) and not os.listdir(p) for p in made)


# ------------------------------------------------------------------ the writer lock
HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.ftruncate(fd, 0)
os.write(fd, str(os.getpid()).encode())
print("locked", flush=True)
time.sleep(600)
"""


def test_a_second_process_is_refused_until_the_holder_is_killed(run):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(run / ".lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(run)
        with pytest.raises(RunDirectoryError, match=f"in use by another process \\(pid {holder.pid}"):
            training.train(resume=str(run), steps=6, verbose=0, evaluate=False)
        assert snapshot(run) == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with RunDirectory(str(run)).open_run(resume=True):  # the kernel dropped the dead holder's lock
        assert (run / ".lock").read_text().strip() == str(os.getpid())


def test_the_lock_is_held_for_the_whole_training(tmp_path):
    seen = []

    class Probe(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            try:
                with RunDirectory(str(tmp_path / "r")).lock():
                    seen.append("free")
            except RunDirectoryError:
                seen.append("locked")

    training.train(TINY, "gp", TASK, out_dir=str(tmp_path / "r"), callbacks=[Probe()],
                   **{**SHORT, "steps": 2})
    # flock locks belong to the open file: a second open in the same process is refused too
    assert seen == ["locked", "locked"]
    with RunDirectory(str(tmp_path / "r")).lock():
        pass


# ------------------------------------------------------------------ atomic, durable writes
def test_writes_never_follow_planted_symlinks_and_are_fsynced(tmp_path, monkeypatch):
    path = tmp_path / "r"
    (path / "checkpoints").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    old_fixed_names = ["spec.json.tmp", "config.json.tmp", "metrics.csv.tmp", ".tmp-best.keras",
                       "checkpoints/latest.tmp", "checkpoints/.tmp-step-00000003"]
    for name in old_fixed_names:
        os.symlink(victim, path / name)
    synced = []
    monkeypatch.setattr(files, "fsync_dir", lambda d: synced.append(os.path.abspath(d)))
    run = RunDirectory(str(path))

    run.write_definition({"s": 1}, {"train": {}, "task": "gp", "task_config": {}})
    run.write_metrics([{"step": 1, "val_loglik": 0.5}])
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    run.save_model(model, "best.keras")
    run.save_checkpoint(tf.train.Checkpoint(v=tf.Variable(3.0)), 3, keep=2)

    assert victim.read_text() == "precious"
    assert all((path / n).is_symlink() for n in old_fixed_names)  # untouched, not followed
    assert json.loads((path / "spec.json").read_text()) == {"s": 1}
    assert run.metrics_rows()[0]["step"] == "1"
    np.testing.assert_array_equal(keras.models.load_model(path / "best.keras").get_weights()[0],
                                  model.get_weights()[0])
    assert (path / "checkpoints" / "latest").read_text() == "step-00000003"
    leftovers = [p.name for p in path.rglob("*") if ".tmp" in p.name and not p.is_symlink()]
    assert leftovers == []
    root, ckpts = str(path), str(path / "checkpoints")
    # each rename is followed by an fsync of its directory (spec, config, metrics, model;
    # the checkpoint's own directory, the checkpoints directory, latest)
    assert synced.count(root) == 4 and synced.count(ckpts) == 2
    assert any(os.path.dirname(d) == ckpts and ".tmp-step-00000003" in d for d in synced)
    assert oct((path / "spec.json").stat().st_mode & 0o777) == oct(0o666 & ~files.UMASK)


def test_opening_a_run_removes_temp_files_of_a_killed_writer_only(tmp_path):
    path = tmp_path / "r"
    (path / "checkpoints" / ".tmp-step-00000003-x1y2").mkdir(parents=True)
    (path / "checkpoints" / ".tmp-step-00000003-x1y2" / "ckpt.index").write_text("half")
    (path / ".tmp-spec.json-abc").write_text("{")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("precious")
    os.symlink(victim, path / ".tmp-best.keras-q")
    (path / "notes.txt").write_text("mine")
    with RunDirectory(str(path)).open_run(resume=True):
        pass
    assert sorted(p.name for p in path.rglob("*")) == [".lock", "checkpoints", "notes.txt"]
    assert (victim / "keep").read_text() == "precious"


def test_pruning_deletes_only_this_runs_older_checkpoints(tmp_path):
    path = tmp_path / "r"
    outside = tmp_path / "other-run" / "step-00000001"
    outside.mkdir(parents=True)
    (outside / "data").write_text("other run")
    (path / "checkpoints" / "step-00000500").mkdir(parents=True)  # newer: left by a fallback
    (path / "checkpoints" / "notes").mkdir()
    os.symlink(outside, path / "checkpoints" / "step-00000001")
    run, ckpt = RunDirectory(str(path)), tf.train.Checkpoint(v=tf.Variable(1.0))
    for step in (10, 20, 30):
        run.save_checkpoint(ckpt, step, keep=2)
    assert sorted(os.listdir(path / "checkpoints")) == [
        "latest", "notes", "step-00000001", "step-00000020", "step-00000030", "step-00000500"]
    assert (path / "checkpoints" / "latest").read_text() == "step-00000030"
    assert (outside / "data").read_text() == "other run"


# ------------------------------------------------------------------ latest and resume
@pytest.mark.parametrize("pointer", ["../../other-run/checkpoints/step-00000002", "/tmp/step-00000002",
                                     "step-2", "step-00000002/../step-00000002", "symlink"])
def test_latest_naming_anything_but_this_runs_checkpoint_is_refused(tmp_path, pointer):
    other = tmp_path / "other-run" / "checkpoints" / "step-00000002"
    other.mkdir(parents=True)
    run = RunDirectory(str(tmp_path / "r"))
    run.save_checkpoint(tf.train.Checkpoint(v=tf.Variable(1.0)), 1, keep=2)
    latest = tmp_path / "r" / "checkpoints" / "latest"
    if pointer == "symlink":
        os.symlink(other, tmp_path / "r" / "checkpoints" / "step-00000002")
        pointer = "step-00000002"
    latest.write_text(pointer)
    with pytest.raises(RunDirectoryError, match="not a checkpoint of this run") as info:
        run.restore_latest(tf.train.Checkpoint(v=tf.Variable(0.0)))
    assert str(latest) in str(info.value) and repr(pointer) in str(info.value)


def test_resume_falls_back_past_a_truncated_latest_checkpoint(run):
    ckpts = run / "checkpoints"
    assert (ckpts / "latest").read_text() == "step-00000004"
    config = json.loads((run / "config.json").read_text())
    cfg = training.TrainConfig(**config["train"])
    spec = json.loads((run / "spec.json").read_text())

    def fresh():
        return training.Trainer(spec, make_task("gp", TASK), cfg, str(run), task_name="gp")

    older = fresh()
    older.checkpoint.read(str(ckpts / "step-00000002" / "ckpt")).assert_existing_objects_matched()
    data = next(ckpts.glob("step-00000004/ckpt.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])

    resumed = fresh()
    with pytest.warns(UserWarning, match=r"step-00000004 is missing or corrupt"):
        assert resumed.restore_latest() == 2
    for a, b in zip(weights(older.model), weights(resumed.model)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(older.optimizer.variables, resumed.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    resumed.fit(verbose=0)  # redoes steps 3-4, replacing the corrupt checkpoint
    assert int(resumed.step.numpy()) == 4
    assert [r["step"] for r in resumed.run_dir.metrics_rows()] == ["2", "4"]
    assert fresh().restore_latest() == 4


def test_resume_from_a_run_without_checkpoints_is_refused(tmp_path):
    run = RunDirectory(str(tmp_path))
    with pytest.raises(RunDirectoryError, match="no checkpoint to resume from"):
        run.restore_latest(tf.train.Checkpoint(v=tf.Variable(0.0)))


# ------------------------------------------------------------------ corrupt files
@pytest.mark.parametrize("name,damage", [
    ("config.json", b'{"train": {"steps": 4'), ("config.json", b"[1, 2]"),
    ("spec.json", b"\xff\xfe garbage"), ("spec.json", b""),
])
def test_corrupt_config_or_spec_is_named(run, name, damage):
    (run / name).write_bytes(damage)
    with pytest.raises(RunDirectoryError, match=f"{name} is corrupt"):
        training.train(resume=str(run), verbose=0, evaluate=False)
    if name == "config.json":
        with pytest.raises(RunDirectoryError, match=f"{name} is corrupt"):
            runs.evaluate_run(str(run), num_batches=1)


@pytest.mark.parametrize("damage", [b"step,val_loglik\n2,-1.0\n4", b"step,val_loglik\nfour,-1\n",
                                    b"\x00\x01\x02", b"wrong,header\n1,2\n"])
def test_corrupt_metrics_csv_is_named(run, damage):
    (run / "metrics.csv").write_bytes(damage)
    with pytest.raises(RunDirectoryError, match="metrics.csv is corrupt"):
        RunDirectory(str(run)).metrics_rows()


def test_corrupt_metrics_csv_stops_a_resume_before_training(run):
    (run / "metrics.csv").write_bytes(b"step,val_loglik\n2,-1.0\n4")
    before = snapshot(run)
    with pytest.raises(RunDirectoryError, match="metrics.csv is corrupt: line 3"):
        training.train(resume=str(run), steps=6, verbose=0, evaluate=False)
    assert snapshot(run) == before


def test_evaluate_falls_back_to_model_keras_when_best_keras_is_corrupt(run):
    expected = runs.evaluate_run(str(run), num_batches=1, checkpoint="model")
    best = run / "best.keras"
    best.write_bytes(best.read_bytes()[:1000])
    with pytest.warns(UserWarning, match=r"best.keras is corrupt .*; using .*model.keras"):
        result = runs.evaluate_run(str(run), num_batches=1)
    assert result["loglik"] == expected["loglik"]
    (run / "model.keras").write_bytes(b"not a zip")
    with pytest.raises(RunDirectoryError, match="best.keras is corrupt.*model.keras is corrupt"):
        runs.evaluate_run(str(run), num_batches=1)
