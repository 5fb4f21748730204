"""What both sides of the Table 5 comparison share: the task, the sizes, the file names and
the result record. NumPy only, so that the taylorformer venv and the reference venv both
import it (``train_ours.py``, ``train_authors.py``, ``dump_shifts.py``).
"""
import importlib.util
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
RESULTS = os.path.join(HERE, "results")
#: Table 5's test shifts Delta (the replication plugin's ``te_tnp.SHIFTS``; dump_shifts.py checks)
SHIFTS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
#: the rows' task (``gp-te-tnp`` with GP_TASK_CONFIG's three kernels) at the reduced sizes
TASK = "gp-te-tnp"
SMALL = {"num_context": [1, 32], "num_target": 32}
STEPS = 2000
SEED_DATA = 0
#: the rows' optimizer (GP_TRAINING: AdamW lr 5e-4, weight decay 0.01, batch 16) with the
#: parity scripts' global-norm clip 0.5 and Keras' epsilon placement on both sides
LEARNING_RATE, WEIGHT_DECAY, CLIP = 5e-4, 0.01, 0.5
#: model sizes per model (both sides): TNP-D and the CNP at the rows' (the paper's) sizes, TE-TNP
#: at ../te_tnp's learning sizes (at the paper's, a step costs too much for 2000 steps x 6 runs)
SIZES = {
    "tnp-d": {"width": 128, "layers": 5, "heads": 8, "head_dim": 16},
    "te-tnp": {"width": 64, "layers": 2, "heads": 4, "head_dim": 16, "kernel_width": 64},
    "cnp": {"width": 128, "layers": 5},
}
MODELS = tuple(SIZES)
REFERENCE = {"tnp-d": "cambridge-mlg/tnp@e2adb62", "cnp": "cambridge-mlg/tnp@e2adb62",
             "te-tnp": "cambridge-mlg/tetnp@9f1f38d on cambridge-mlg/tnp@e2adb62"}
SETTING = {
    "tnp-d": "the row's size (Dz 128, 5 layers, 8 heads x 16)",
    "te-tnp": "Dz 64, 2 layers, 4 heads x 16, kernel MLP 2 x 64 (row: 128, 5, 8 x 16, 2 x 128)",
    "cnp": "the row's size (Dz 128, 5 hidden layers)",
}


def load_script(folder, name):
    """The module of ``../<folder>/<name>.py`` (another parity folder's script), by path."""
    path = os.path.join(HERE, os.pardir, folder, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"{folder}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_path():
    """The dumped training batches (and the Delta = 0 test batches) of every run."""
    return os.path.join(DATA, f"train-seed{SEED_DATA}-{STEPS}.npz")


def shift_path(shift):
    """The dumped test batches at ``shift`` (the ``gp-te-tnp`` task with ``shift = Delta``)."""
    return os.path.join(DATA, f"test-shift{shift:g}.npz")


def task_config(shift=0.0):
    """The ``gp-te-tnp`` options of the runs: the rows' kernels, the reduced Nc/Nt, ``shift``."""
    from_rows = {"kernel": ["eq", "periodic", "matern52"]}  # te_tnp.GP_TASK_CONFIG (dump_shifts.py checks)
    return {**from_rows, **SMALL, "shift": shift}


def setting(model, steps):
    return (f"{SETTING[model]}; Nc ~ U{{1..32}}, Nt = 32 (row: U{{1..64}}, 128); {steps} steps at batch 16 "
            f"(row: 500,000); 512 test tasks per shift (row: 80,000); one thread")


def test_arrays(path, keys):
    """``{key: [K, B, ...]}`` of the test batches of a dumped .npz."""
    data = np.load(path)
    return {k: data[f"test_{k}"] for k in keys}


def mean_stderr(values):
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))


def shift_record(per_task):
    """``{"loglik", "stderr", "num_tasks"}`` of per-task log-likelihoods ``[n]``."""
    mean, err = mean_stderr(per_task)
    return {"loglik": mean, "stderr": err, "num_tasks": int(len(per_task))}


def score_shifts(task_loglik, keys, at_zero):
    """``{Delta: shift_record}`` of a trained model on each shift's dumped test batches.

    ``task_loglik(batch)``: per-task log-likelihoods ``[B]`` (NumPy) of one batch of NumPy
    arrays ``{key: [B, ...]}``; ``at_zero``: the training loop's own Delta = 0 score, which
    the Delta = 0 record must repeat (the same model, batches and scoring)."""
    shifts = {}
    for shift in SHIFTS:
        test = test_arrays(shift_path(shift), keys)
        shifts[shift] = shift_record(np.concatenate(
            [task_loglik({k: v[j] for k, v in test.items()}) for j in range(len(test["xc"]))]))
    if abs(shifts[0.0]["loglik"] - at_zero) > 1e-9:
        raise SystemExit("the Delta = 0 score differs from the training loop's own evaluation")
    return shifts


def provenance():
    """``{"commit", "device", "date"}`` of a run: ../taylorformer/common.py's ``provenance``."""
    return load_script("taylorformer", "common").provenance()


def write_result(model, side, seed, steps, parameters, wall_s, cpu_s_per_step, shifts, extra=None):
    """``results/<model>-<side>-seed<S>.json`` in the schema the replication plugin reads."""
    where = provenance()
    record = {
        "model": model, "side": side, "seed": seed, "steps": steps, "reference": REFERENCE[model],
        "setting": setting(model, steps), "parameters": int(parameters), "wall_s": round(float(wall_s), 1),
        "cpu_s_per_step": round(float(cpu_s_per_step), 5), "commit": where["commit"],
        "command": " ".join([os.path.basename(sys.executable)] + [os.path.relpath(sys.argv[0], HERE)]
                            + sys.argv[1:]),
        "device": where["device"], "shifts": {f"{s:g}": shifts[s] for s in SHIFTS},
    }
    record.update(extra or {})
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(RESULTS, f"{model}-{side}-seed{seed}.json")
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return out


def shifted_mismatch(base, shifted, delta):
    """Largest deviation of ``shifted`` from the batches ``base`` moved by ``delta``.

    ``base`` and ``shifted``: ``{key: [..., B, N, D]}`` arrays of the same tasks (padded as
    dumped: padded entries 0). Moved = real context and target inputs plus ``delta``, outputs,
    masks and exact GP log-likelihoods unchanged. Returns ``{key: max abs difference}``; the
    inputs differ by float32 rounding of ``u + delta`` against ``u``, the outputs by the
    round-off of a Cholesky factor of covariances at the moved inputs.
    """
    out = {}
    for key in ("mask_c", "mask_t"):
        out[key] = float(np.abs(base[key] - shifted[key]).max())
    for key, mask in (("xc", "mask_c"), ("xt", "mask_t")):
        moved = base[key].astype(np.float64) + delta * base[mask][..., None]
        out[key] = float(np.abs(moved - shifted[key]).max())
    for key in ("yc", "yt", "gt_loglik"):
        out[key] = float(np.abs(base[key].astype(np.float64) - shifted[key]).max())
    return out
