"""Tasks on the user's own data (tasks/user_data.py) and train(task=<task object>)."""
import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from taylorformer.workflow import runs, training
from taylorformer.errors import SpecError, TaskError
from taylorformer.workflow.evaluation import evaluate
from taylorformer.task import make_task
from taylorformer.tasks import from_arrays, from_dataframe, from_xarray

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}
OPTS = {"split": (0.6, 0.2, 0.2), "context_length": 5, "horizon": 3}


def series_frame(n=100):
    t = np.arange(n, dtype=float)
    return pd.DataFrame({"date": pd.date_range("2020-01-01", periods=n, freq="h"), "y": np.sin(t / 4) + t / 50,
                         "z": np.cos(t / 3)})


def collect(ds):
    batches = [{k: v.numpy() for k, v in b.items()} for b in ds]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_a_dataframe_gives_the_same_task_as_its_csv_file(tmp_path):
    df = series_frame()
    path = tmp_path / "s.csv"
    df.to_csv(path, index=False)
    from_file = make_task("csv", {"path": str(path), "target_columns": ["y", "z"], "date_column": "date", **OPTS})
    in_memory = from_dataframe(df, ["y", "z"], date_column="date", **OPTS)
    as_path = make_task("csv", {"path": df, "target_columns": ["y", "z"], "date_column": "date", **OPTS})
    indexed = from_dataframe(df.set_index("date"), ["y", "z"], **OPTS)  # the DatetimeIndex as dates
    a = collect(from_file.dataset("test", batch_size=4))
    for task in (in_memory, as_path, indexed):
        b = collect(task.dataset("test", batch_size=4))
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
        np.testing.assert_array_equal(task.dates, df["date"].to_numpy())
        assert not task.rebuildable and task.get_config()["path"] is None
    with pytest.raises(TaskError, match="needs a pandas DataFrame, got ndarray"):
        from_dataframe(df.to_numpy(), "y")
    with pytest.raises(TaskError, match=r"DataFrame has no column 'yy'; did you mean 'y'"):
        from_dataframe(df, "yy", **OPTS)
    bad = df.assign(y=df["y"].where(df.index != 7))
    with pytest.raises(TaskError, match=r"DataFrame: target column\(s\) \['y'\] hold NaN in 1 row\(s\): \[7\]"):
        from_dataframe(bad, "y", missing="error", **OPTS)


def test_a_dataframe_with_missing_targets_trains_and_evaluates(tmp_path):
    import taylorformer as tfm

    df = series_frame().set_index("date")
    rng = np.random.default_rng(0)
    for col in ("y", "z"):  # about 15% of each target missing, in every split
        df.loc[df.index[rng.random(len(df)) < 0.15], col] = np.nan
    task = from_dataframe(df, ["y", "z"], **OPTS)  # missing="mask": the default
    raw = df[["y", "z"]].to_numpy()
    np.testing.assert_allclose(task.mean, np.nanmean(raw[:60], 0), rtol=1e-12)
    np.testing.assert_allclose(task.std, np.nanstd(raw[:60], 0), rtol=1e-12)
    test = collect(task.dataset("test", batch_size=13))
    for i, start in enumerate(test["window_start"]):
        y = np.concatenate([test["yc"][i], test["yt"][i]])
        np.testing.assert_allclose(y, (raw[start:start + 8] - task.mean) / task.std, rtol=1e-5, atol=1e-6)
    assert np.isnan(test["yt"]).any() and np.isnan(test["yc"]).any()
    trainer = training.train(TINY, task, out_dir=str(tmp_path / "run"), steps=3, batch_size=4, val_every=3,
                             val_batches=1, verbose=0, tensorboard=False, jit_compile=False)
    ll = tfm.loglik(trainer.model, task.batch(test["window_start"])).numpy()
    assert np.isfinite(ll).all()
    # a window whose targets are all missing (a step is observed when y and z both are) is not scored
    observed = ~np.isnan(raw).any(1)
    scored = np.array([observed[s + 5:s + 8].any() for s in test["window_start"]])
    result = evaluate(trainer.model, task, "test", batch_size=4)
    assert result["num_tasks"] == scored.sum() >= 10
    assert result["loglik"]["mean"] == pytest.approx(ll[scored].mean(), rel=1e-5)


def test_arrays_as_a_series_equal_the_dataframe_task():
    df = series_frame()
    task = from_arrays(y=df[["y", "z"]].to_numpy(), dates=df["date"], names=["y", "z"], **OPTS)
    ref = from_dataframe(df, ["y", "z"], date_column="date", **OPTS)
    a, b = collect(task.dataset("val", batch_size=4)), collect(ref.dataset("val", batch_size=4))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(task.dates, df["date"].to_numpy())
    one = from_arrays(y=df["y"].to_numpy(), **OPTS)  # [T]: one column named y0, no dates
    assert one.target_columns == ["y0"] and one.dates is None and one.dim_y == 1


def grouped_points(n_groups=20, per_group=15, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_groups * per_group, 2)) * [1.0, 5.0] + [3.0, -1.0]
    groups = np.repeat(np.arange(n_groups) * 7, per_group)  # labels need not be 0..G-1
    y = np.stack([np.sin(x[:, 0]) + groups / 100, x[:, 1] ** 2], 1)
    return x, y, groups


def test_point_sets_split_by_group_standardised_and_drawn_from_one_group():
    x, y, groups = grouped_points()
    task = from_arrays(x, y, groups=groups, num_context=(2, 6), num_target=(3, 5), split=(0.6, 0.2, 0.2))
    assert (task.dim_x, task.dim_y, task.max_context, task.max_target) == (2, 2, 6, 5)
    members = {s: [set(groups[g]) for g in task.groups[s]] for s in ("train", "val", "test")}
    assert [len(members[s]) for s in ("train", "val", "test")] == [12, 4, 4]
    labels = {s: {next(iter(m)) for m in members[s]} for s in members}
    assert all(len(m) == 1 for s in members for m in members[s])  # a pool is one group
    assert labels["train"].isdisjoint(labels["val"]) and labels["val"].isdisjoint(labels["test"])
    assert labels["train"] | labels["val"] | labels["test"] == set(groups)
    train = np.isin(groups, sorted(labels["train"]))
    for raw, mean, std in ((x, task.x_mean, task.x_std), (y, task.mean, task.std)):
        np.testing.assert_allclose(mean, raw[train].mean(0), rtol=1e-12)
        np.testing.assert_allclose(std, np.sqrt(((raw[train] - raw[train].mean(0)) ** 2).mean(0)), rtol=1e-12)
    for split in ("train", "test"):
        b = collect(task.dataset(split, batch_size=8, num_batches=3))
        for i in range(len(b["xc"])):
            nc, nt = int(b["mask_c"][i].sum()), int(b["mask_t"][i].sum())
            assert 2 <= nc <= 6 and 3 <= nt <= 5
            points = np.concatenate([b["xc"][i, :nc], b["xt"][i, :nt]]) * task.x_std + task.x_mean
            rows = [int(np.argmin(np.abs(x - p).sum(1))) for p in points]
            np.testing.assert_allclose(x[rows], points, atol=1e-4)
            assert len(set(rows)) == nc + nt and len(set(groups[rows])) == 1  # distinct, one group
            assert groups[rows[0]] in labels[split]
            outputs = np.concatenate([b["yc"][i, :nc], b["yt"][i, :nt]])
            np.testing.assert_allclose(task.to_original_units(outputs), y[rows], rtol=1e-5, atol=1e-4)
    a, again = collect(task.dataset("val", batch_size=4)), collect(task.dataset("val", batch_size=4))
    np.testing.assert_array_equal(a["yt"], again["yt"])


def test_point_sets_without_groups_partition_the_points():
    x, y, _ = grouped_points()
    task = from_arrays(x, y[:, 0], split=(0.8, 0.1, 0.1))
    pools = [task.groups[s][0] for s in ("train", "val", "test")]
    assert [len(p) for p in pools] == [240, 30, 30]
    assert sorted(np.concatenate(pools)) == list(range(300))


@pytest.mark.parametrize("kwargs, pattern", [
    ({"x": np.ones((5, 2)), "y": np.ones(4)}, r"y has 4 rows but x has 5"),
    ({"x": np.ones((5, 2, 2)), "y": np.ones(5)}, r"x must be \[N, D\] \(or \[N\]\) .* got shape \(5, 2, 2\)"),
    ({"x": [[0.0], [np.nan], [1.0]], "y": [1.0, 2.0, 3.0]}, r"x holds 1 NaN/inf value\(s\), the first at row 1, column 0"),
    ({"x": np.arange(6.0), "y": np.arange(6.0), "groups": [0, 1]}, r"groups must be \[N\] = \[6\] labels"),
    ({"x": np.arange(40.0), "y": np.arange(40.0), "groups": np.arange(40) // 2, "num_context": (3, 32)},
     r"has 2 point\(s\) but num_context"),
    ({"x": np.arange(40.0), "y": np.ones(40)}, r"column\(s\) \[0\] of y are constant"),
    ({"y": np.arange(5.0), "groups": [0] * 5}, "groups are for sets of points"),
    ({"x": np.arange(5.0)}, "needs y"),
])
def test_bad_arrays_name_the_array_and_the_problem(kwargs, pattern):
    with pytest.raises(TaskError, match=pattern):
        from_arrays(**kwargs)


def test_train_on_a_task_object_records_it_and_evaluating_needs_it_again(tmp_path):
    x, y, groups = grouped_points()
    task = from_arrays(x, y, groups=groups, num_context=(2, 6), num_target=4)
    out = tmp_path / "run"
    trainer = training.train(TINY, task, out_dir=str(out), steps=2, batch_size=4, val_every=2,
                             val_batches=1, verbose=0, tensorboard=False, jit_compile=False)
    saved = json.loads((out / "config.json").read_text())
    assert saved["task"] == "arrays" and saved["task_config"] == task.get_config()
    assert saved["task_object"] == {"class": "taylorformer.tasks.user_data.ArraySetTask", "rebuildable": False}
    with pytest.raises(TaskError, match=r"trained on a task object .*ArraySetTask.* pass the same task object"):
        runs.evaluate_run(str(out))
    result = runs.evaluate_run(str(out), task=task, num_batches=2, checkpoint="model")
    direct = evaluate(trainer.model, task, batch_size=4, num_batches=2)
    assert result["task"] == "arrays" and result["loglik"] == pytest.approx(direct["loglik"])
    with pytest.raises(TaskError, match="resume it with the same object"):
        training.train(resume=str(out), steps=3, verbose=0)
    with pytest.raises(TaskError, match="task_config applies to a registered task name"):
        training.train(TINY, task, task_config={"num_target": 3}, out_dir=str(tmp_path / "other"))
    with pytest.raises(TaskError, match=r"a task object \(with dataset, dim_x, dim_y\), got int"):
        training.train(TINY, 42, out_dir=str(tmp_path / "other"))
    wrong = from_arrays(x[:, :1], y, groups=groups)
    with pytest.raises(SpecError, match="model expects inputs of dim 2 and outputs of dim 2, but the task gives dim_x=1"):
        runs.load_run(str(out), task=wrong)


def test_xarray_objects_and_paths(tmp_path):
    rng = np.random.default_rng(0)
    da = xr.DataArray(rng.normal(size=(20, 4, 5)), dims=("time", "latitude", "longitude"), name="sst",
                      coords={"time": pd.date_range("2020", periods=20, freq="D"),
                              "latitude": [10.0, 5.0, 0.0, -5.0], "longitude": [0.0, 5.0, 10.0, 15.0, 20.0]})
    task = from_xarray(da, num_context=4, num_target=4)
    assert task.variable == "sst" and task.geographic and not task.rebuildable
    record = runs.task_record(task)
    assert record["task_object"]["rebuildable"] is False and record["task_config"]["path"] is None
    path = tmp_path / "sst.nc"
    da.to_dataset().to_netcdf(path, engine="h5netcdf")
    from_path = from_xarray(str(path), "sst", num_context=4, num_target=4)
    assert runs.task_record(from_path) == {"task": "gridded", "task_config": from_path.get_config()}
    assert from_path.mean == pytest.approx(task.mean) and from_path.std == pytest.approx(task.std)
