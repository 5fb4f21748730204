"""Dump the Table 5 comparison's batches: training batches and the test tasks at each shift.

Run with the taylorformer virtualenv::

    python dump_shifts.py        # data/train-seed0-2000.npz, data/test-shift<D>.npz, results/exact-gp.json

Every file is ``../tnp_d/dump_data.py``'s output for the ``gp-te-tnp`` task with
``common.task_config(Delta)`` (the rows' three kernels, Nc ~ U{1..32}, Nt = 32, the test
split shifted by Delta; training is never shifted). The training file holds the 2000
batches both sides train on, in the order ``taylorformer train`` draws them; each shift's
file its 32 test batches of 16 tasks. Checks, before anything is written to ``results/``:
the shifts and kernels are the replication rows' (``te_tnp.SHIFTS``, ``GP_TASK_CONFIG``);
each shift's test batches are the Delta = 0 tasks moved by Delta (``common.shifted_mismatch``:
inputs within float32 rounding of u + Delta, outputs and exact log-likelihoods within
Cholesky round-off); the first test batch equals the task's own draw. Then the exact GP
ceiling per shift (``taylorformer.workflow.baselines.exact_gp_values``, the replication
rows' ``exact-gp`` baseline) on the same 512 tasks goes to ``results/exact-gp.json``.
"""
import json
import os
import sys

import numpy as np

import common

KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik")
#: tolerances of the moved-by-Delta check: float32 rounding of inputs up to |x| = 4, and
#: outputs drawn through a Cholesky factor of covariances at the moved float32 inputs
INPUT_TOL, OUTPUT_TOL = 1e-6, 1e-3


def check_rows():
    from taylorformer_replication.papers import te_tnp

    if tuple(te_tnp.SHIFTS) != common.SHIFTS:
        raise SystemExit(f"common.SHIFTS {common.SHIFTS} differ from the rows' {te_tnp.SHIFTS}")
    if {**common.task_config(), **te_tnp.GP_TASK_CONFIG} != common.task_config():
        raise SystemExit(f"common.task_config() differs from the rows' GP_TASK_CONFIG {te_tnp.GP_TASK_CONFIG}")


def main():
    from taylorformer.task import make_task
    from taylorformer.workflow.baselines import exact_gp_values

    check_rows()
    dump = common.load_script("tnp_d", "dump_data").main
    seed, steps = str(common.SEED_DATA), str(common.STEPS)
    if not os.path.exists(common.train_path()):
        dump(["--task", common.TASK, "--task-config", json.dumps(common.task_config()), "--seed", seed,
              "--steps", steps, "--out", common.train_path()])
    base = common.test_arrays(common.train_path(), KEYS)
    ceiling = {}
    for shift in common.SHIFTS:
        path = common.shift_path(shift)
        if not os.path.exists(path):
            dump(["--task", common.TASK, "--task-config", json.dumps(common.task_config(shift)), "--seed", seed,
                  "--steps", "1", "--out", path])
        shifted = common.test_arrays(path, KEYS)
        mismatch = common.shifted_mismatch(base, shifted, shift)
        tol = {k: INPUT_TOL if k in ("xc", "xt") else 0.0 if k.startswith("mask") else OUTPUT_TOL for k in KEYS}
        if any(mismatch[k] > tol[k] for k in KEYS):
            raise SystemExit(f"{path}: not the Delta = 0 test tasks moved by {shift:g}: {mismatch}")
        task = make_task(common.TASK, common.task_config(shift))
        first = next(iter(task.dataset("test", batch_size=16, num_batches=None)))
        if any(not np.array_equal(first[k].numpy(), shifted[k][0]) for k in KEYS):
            raise SystemExit(f"{path}: test batch 0 differs from the task's own with shift {shift:g}")
        values = exact_gp_values(task, "test", 16, None, False)
        if not np.allclose(values, shifted["gt_loglik"].reshape(-1), rtol=0, atol=1e-6):
            raise SystemExit(f"{path}: the exact GP baseline differs from the dumped gt_loglik")
        ceiling[f"{shift:g}"] = {**common.shift_record(values), "moved_by_delta_max_abs": mismatch}
        print(json.dumps({"shift": shift, **ceiling[f"{shift:g}"]}), flush=True)
    os.makedirs(common.RESULTS, exist_ok=True)
    where = common.provenance()
    record = {"model": "exact-gp", "side": "ceiling", "task": common.TASK, "task_config": common.task_config(),
              "note": "exact GP predictive log-likelihood per target point under each task's true kernel and "
                      "noise, on the test tasks of every run (taylorformer.workflow.baselines.exact_gp_values)",
              "commit": where["commit"], "command": "python dump_shifts.py", "device": where["device"],
              "shifts": ceiling}
    with open(os.path.join(common.RESULTS, "exact-gp.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
