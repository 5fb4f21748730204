"""Helpers shared by both sides' scripts (NumPy only: imported by the taylorformer venv and
by the reference venv alike)."""
import datetime
import json
import math
import os
import subprocess

import numpy as np

BATCH_KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik", "gt_loglik_joint")
#: the authors' optimizer settings (Table 3): Adam, lr 3e-4, batch 32, no clipping, no decay
LEARNING_RATE = 3e-4


def load(path):
    """``(arrays, meta)`` of a dump_data.py file."""
    data = np.load(path)
    return data, json.loads(str(data["meta"]))


def split_batches(data, split, limit=None):
    """The batches of ``split`` as a list of dicts of NumPy arrays."""
    n = data[f"{split}_xc"].shape[0] if limit is None else limit
    arrays = {k: data[f"{split}_{k}"] for k in BATCH_KEYS}
    return [{k: v[i] for k, v in arrays.items()} for i in range(n)]


def provenance():
    """``{"commit", "device", "date"}`` of a run: this repository's HEAD, the CPU model and
    cores, the UTC date (the replication rows' record of where a run ran)."""
    here = os.path.dirname(os.path.abspath(__file__))
    head = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"commit": head.stdout.strip() or "unknown", "device": f"{model} ({os.cpu_count()} cores)",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}


def mean_stderr(values):
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))


def forecasting_batch(batch_size=32, nc=96, nt=720, seed=0):
    """The paper's largest forecasting layout (context 96, horizon 720; x rescaled to
    [-1, 1] per window, context then targets in time order) with a smooth random series:
    the same arrays for both sides (``[B, N, 1]`` float32, masks all ones)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(-1.0, 1.0, nc + nt, dtype=np.float32)[None, :, None].repeat(batch_size, 0)
    phase = rng.uniform(0, 2 * np.pi, (batch_size, 1, 1))
    y = (np.sin(6 * x + phase) + 0.05 * rng.standard_normal(x.shape)).astype(np.float32)
    return {"xc": x[:, :nc], "yc": y[:, :nc], "xt": x[:, nc:], "yt": y[:, nc:],
            "mask_c": np.ones((batch_size, nc), np.float32), "mask_t": np.ones((batch_size, nt), np.float32)}
