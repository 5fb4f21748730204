"""Multi-worker training (MultiWorkerMirroredStrategy over TF_CONFIG): two worker
processes on localhost give the weights of one process on the same global batch."""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
TASK = {"num_context": [3, 10], "num_target": 10}
WORKER = """
import json, sys
from taylorformer.workflow import training
spec, task, out, strategy = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
trainer = training.train(spec, "gp", task, out_dir=out, steps=4, batch_size=8, strategy=strategy,
                         val_every=2, val_batches=1, tensorboard=False, jit_compile=False,
                         verbose=0, seed=3)
print(json.dumps({"chief": trainer.chief, "replicas": trainer.strategy.num_replicas_in_sync}))
"""


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(out, strategy, tf_config=None):
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(TINY), json.dumps(TASK), str(out),
                             strategy], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=300):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"worker timed out:\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_two_workers_on_localhost_match_one_worker_on_the_same_global_batch(tmp_path):
    import taylorformer as tfm

    cluster = {"worker": [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]}
    workers = [_start(tmp_path / f"w{i}", "multi-worker",
                      {"cluster": cluster, "task": {"type": "worker", "index": i}}) for i in range(2)]
    infos = [_finish(p) for p in workers]
    single = _finish(_start(tmp_path / "single", "default"))
    assert [i["chief"] for i in infos] == [True, False] and infos[0]["replicas"] == 2
    assert single["replicas"] == 1
    assert not (tmp_path / "w1").exists()  # only the chief writes the run directory
    two = tfm.load_model(str(tmp_path / "w0" / "model.keras"))
    one = tfm.load_model(str(tmp_path / "single" / "model.keras"))
    for a, b in zip(two.trainable_variables, one.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    rows = [(tmp_path / d / "metrics.csv").read_text().splitlines() for d in ("w0", "single")]
    assert rows[0][0] == rows[1][0] and len(rows[0]) == 3  # header + a row per validation
    for a, b in zip(rows[0][1:], rows[1][1:]):  # step, loss, val loglik (+ stderr over both workers), gt
        np.testing.assert_allclose([float(v) for v in a.split(",")[:5]], [float(v) for v in b.split(",")[:5]],
                                   rtol=1e-5)
