"""Missing outputs in ``from_arrays`` (tasks/user_data.py, issue 18): ``missing`` "mask"
(default), "drop" and "error", checked against NumPy on the source arrays."""
import numpy as np
import pytest

import taylorformer as tfm
from taylorformer.workflow import training
from taylorformer.errors import TaskError
from taylorformer.workflow.evaluation import evaluate
from taylorformer.tasks import from_arrays

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}


def points_with_gaps(seed=0, n_groups=12, per_group=10):
    """``(x [N, 2], y [N, 2], groups [N], missing [N, 2])``: distinct x rows, NaN in ~15% of
    y's entries (both columns, independently)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_groups * per_group, 2))
    groups = np.repeat(np.arange(n_groups), per_group)
    y = np.stack([np.sin(2 * x[:, 0]) + groups / 10, x[:, 1] ** 2], 1)
    missing = rng.uniform(size=y.shape) < 0.15
    return x, np.where(missing, np.nan, y), groups, missing


def collect(task, split, batch_size=4, num_batches=3):
    batches = [{k: v.numpy() for k, v in b.items()}
               for b in task.dataset(split, batch_size=batch_size, num_batches=num_batches)]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def source_rows(batch_x, x, x_mean, x_std):
    """``[M]`` rows of ``x`` whose standardised values are ``batch_x [M, 2]``."""
    z = (x - x_mean) / x_std
    distance = np.abs(batch_x[:, None, :] - z[None].astype(np.float32)).max(-1)
    assert (distance.min(1) < 1e-5).all()
    return distance.argmin(1)


def test_mask_keeps_nan_outputs_and_standardises_over_observed_values(tmp_path):
    x, y, groups, missing = points_with_gaps()
    task = from_arrays(x, y, groups=groups, num_context=(3, 6), num_target=(3, 5), split=(0.5, 0.25, 0.25))
    assert task.get_config()["missing"] == "mask"
    train = np.concatenate(task.groups["train"])  # rows of the training groups
    np.testing.assert_allclose(task.mean, np.nanmean(y[train], 0), rtol=1e-12)
    np.testing.assert_allclose(task.std, np.nanstd(y[train], 0), rtol=1e-12)
    assert np.isnan(y[train]).any(0).all()  # both columns have gaps in training
    nan_points = 0
    for split in ("train", "val", "test"):
        batch = collect(task, split)
        for side in ("c", "t"):
            real = batch["mask_" + side] > 0
            rows = source_rows(batch["x" + side][real], x, task.x_mean, task.x_std)
            expected = (y[rows] - task.mean) / task.std  # NaN exactly where the source is
            np.testing.assert_allclose(batch["y" + side][real], expected, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(np.isnan(batch["y" + side][real]), missing[rows])
            nan_points += int(np.isnan(batch["y" + side][real]).any(-1).sum())
    assert nan_points > 0
    model = tfm.build_model({**TINY, "dim_x": 2, "dim_y": 2})
    batch = collect(task, "val", num_batches=1)
    assert np.isfinite(tfm.loglik(model, batch).numpy()).all()
    trainer = training.train(TINY, task, out_dir=str(tmp_path / "run"), steps=3, batch_size=4, val_every=3,
                             val_batches=1, verbose=0, tensorboard=False, jit_compile=False)
    metrics = evaluate(trainer.model, task, "test", batch_size=4, num_batches=2)
    assert np.isfinite(metrics["loglik"]["mean"]) and np.isfinite(metrics["rmse"])


def test_drop_removes_the_points_with_a_nan_output():
    x, y, groups, missing = points_with_gaps(seed=1)
    task = from_arrays(x, y, groups=groups, num_context=(2, 4), num_target=2, missing="drop")
    kept = np.flatnonzero(~missing.any(1))
    np.testing.assert_array_equal(task.rows, kept)
    pooled = np.sort(np.concatenate([g for s in ("train", "val", "test") for g in task.groups[s]]))
    np.testing.assert_array_equal(pooled, np.arange(len(kept)))  # the kept points, each once
    for pool in task.groups["train"] + task.groups["val"] + task.groups["test"]:
        assert len(set(groups[kept[pool]])) == 1  # a pool is one group's kept points
    train = kept[np.concatenate(task.groups["train"])]
    np.testing.assert_allclose(task.mean, y[train].mean(0), rtol=1e-12)
    np.testing.assert_allclose(task.std, y[train].std(0), rtol=1e-12)
    batch = collect(task, "test")
    for side in ("c", "t"):
        real = batch["mask_" + side] > 0
        rows = source_rows(batch["x" + side][real], x, task.x_mean, task.x_std)
        assert np.isin(rows, kept).all()
        np.testing.assert_allclose(batch["y" + side][real], (y[rows] - task.mean) / task.std, rtol=1e-5, atol=1e-5)
    # without groups the kept points are shuffled into three pools
    flat = from_arrays(x, y[:, 0], missing="drop", num_context=(2, 4), num_target=2)
    np.testing.assert_array_equal(flat.rows, np.flatnonzero(~missing[:, 0]))
    assert sum(len(flat.groups[s][0]) for s in ("train", "val", "test")) == len(flat.rows)


def test_error_policy_and_bad_values_name_the_array_and_row():
    x, y, groups, missing = points_with_gaps(seed=2)
    row, col = (int(i) for i in np.argwhere(missing)[0])
    with pytest.raises(TaskError, match=rf"y holds {int(missing.sum())} NaN/inf value\(s\), the first at "
                                        rf"row {row}, column {col}"):
        from_arrays(x, y, groups=groups, missing="error")
    series = np.sin(np.arange(60.0))
    series[7] = np.nan
    with pytest.raises(TaskError, match=r"y holds 1 NaN/inf value\(s\), the first at row 7, column 0"):
        from_arrays(y=series, missing="error", context_length=5, horizon=3)
    for policy in ("mask", "drop", "error"):  # a point without a place: an error whatever the policy
        bad_x = x.copy()
        bad_x[9, 1] = np.inf if policy == "drop" else np.nan
        with pytest.raises(TaskError, match=r"x holds 1 NaN/inf value\(s\), the first at row 9, column 1"):
            from_arrays(bad_x, y, groups=groups, missing=policy)
    infinite = y.copy()
    infinite[5, 0] = -np.inf
    with pytest.raises(TaskError, match=r"y holds 1 infinite value\(s\), the first at row 5, column 0"):
        from_arrays(x, infinite, groups=groups)
    unobserved = y.copy()
    unobserved[:, 1] = np.nan
    with pytest.raises(TaskError, match=r"column\(s\) \[1\] of y have no observed \(non-NaN\) value"):
        from_arrays(x, unobserved, groups=groups)
    with pytest.raises(TaskError, match=r"every one of the 120 points has a NaN in y"):
        from_arrays(x, unobserved, groups=groups, missing="drop")
    with pytest.raises(TaskError, match=r"'missing' must be one of 'mask', 'drop', 'error', got 'fill'"):
        from_arrays(x, y, groups=groups, missing="fill")
