"""The Table 5 parity's shifted test tasks (``benchmarks/parity/table5``) are our task's.

``common.shifted_mismatch`` is what ``dump_shifts.py`` asserts before any run is scored:
each shift's dumped test batches are the Delta = 0 tasks with every real context and
target input moved by Delta. Here the same check against ``gp-te-tnp`` drawn directly
with ``task_config["shift"] = Delta`` (the rows' evaluation), with a NumPy statement of
"moved" beside it, and the check is shown to catch a wrong Delta. The comparison's task
and shifts are the replication rows'.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from taylorformer.task import make_task
from taylorformer_replication.papers import te_tnp

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik")


def table5_common():
    spec = importlib.util.spec_from_file_location("table5_common", ROOT / "benchmarks/parity/table5/common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw(common, shift):
    task = make_task(common.TASK, common.task_config(shift))
    return {k: np.asarray(v) for k, v in task.sample(np.random.default_rng([2, 0, 7]), 8, "test").items()
            if k in KEYS}


def test_the_comparison_runs_the_rows_task_and_shifts():
    common = table5_common()
    assert common.SHIFTS == tuple(te_tnp.SHIFTS)
    assert {**common.task_config(0.4), **te_tnp.GP_TASK_CONFIG, "shift": 0.4} == common.task_config(0.4)
    assert set(common.MODELS) <= set(te_tnp.GP_MODELS)


@pytest.mark.parametrize("shift", [0.2, 1.0])
def test_shifted_batches_are_the_base_tasks_moved_by_delta(shift):
    common = table5_common()
    base, shifted = draw(common, 0.0), draw(common, shift)
    mismatch = common.shifted_mismatch(base, shifted, shift)
    assert mismatch["mask_c"] == mismatch["mask_t"] == 0.0
    assert max(mismatch["xc"], mismatch["xt"]) < 1e-6
    assert max(mismatch["yc"], mismatch["yt"], mismatch["gt_loglik"]) < 1e-3
    # NumPy statement: on real points the shifted inputs are base + Delta; padding stays 0
    real = base["mask_c"] > 0.5
    np.testing.assert_allclose(shifted["xc"][real], base["xc"][real] + shift, atol=1e-6)
    assert not shifted["xc"][~real].any()
    assert np.ptp(shifted["xt"] - base["xt"]) < 1e-6 and abs(float((shifted["xt"] - base["xt"]).mean()) - shift) < 1e-6


def test_the_check_catches_a_wrong_shift():
    common = table5_common()
    mismatch = common.shifted_mismatch(draw(common, 0.0), draw(common, 0.6), 0.4)
    assert mismatch["xc"] == pytest.approx(0.2, abs=1e-6) and mismatch["xt"] == pytest.approx(0.2, abs=1e-6)
