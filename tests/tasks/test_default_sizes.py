"""Default context/target sizes derived from what a window holds (issue 49): gridded fields,
stations and point sets on tiny data made here, each checked against the rule computed from
the data's shape (the defaults where the data hold them, scaled down by the data's size over
the size the defaults were set for), and a tiny netCDF file trained from the CLI."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from taylorformer import cli
from taylorformer.errors import TaskError
from taylorformer.task import make_task
from taylorformer.tasks import from_arrays, from_xarray
from taylorformer.workflow import runs, training

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}
#: gridded defaults: num_context U{64..256}, num_target 256, which a window of 512 cells holds
GRIDDED_CONTEXT, GRIDDED_TARGET = (64, 256), 256
#: stations defaults: 624 context and 84 target rows, which a split of 708 rows holds
STATION_CONTEXT, STATION_TARGET = 624, 84
#: point-set defaults: num_context U{3..32}, num_target U{1..32}, which a set of 64 points holds
SET_CONTEXT, SET_TARGET = (3, 32), (1, 32)


def field(steps, ny, nx, seed=0):
    """``[steps, ny, nx]`` float64 random values on lat/lon coordinates."""
    values = np.random.default_rng(seed).normal(size=(steps, ny, nx))
    return xr.DataArray(values, dims=("time", "latitude", "longitude"), name="sst",
                        coords={"time": pd.date_range("2021-01-01", periods=steps, freq="D"),
                                "latitude": np.linspace(40.0, 20.0, ny), "longitude": np.linspace(-30.0, -10.0, nx)})


def tiny_netcdf(tmp_path, steps=12, ny=9, nx=11, values=None):
    data = field(steps, ny, nx)
    if values is not None:
        data = data.copy(data=values)
    path = tmp_path / "tiny.nc"
    data.to_dataset().to_netcdf(path, engine="h5netcdf")
    return path


def sample(task, batch_size=3):
    return task.sample(np.random.default_rng(0), batch_size, "train")


# ---------------------------------------------------------------------- gridded
def test_gridded_defaults_fit_a_9_x_11_window_and_batches_have_those_sizes(tmp_path):
    task = make_task("gridded", {"path": str(tiny_netcdf(tmp_path))})
    cells = 1 * 9 * 11  # window_length 1
    half = cells * GRIDDED_CONTEXT[1] // (GRIDDED_CONTEXT[1] + GRIDDED_TARGET)  # each count's share
    assert task.num_context == (min(GRIDDED_CONTEXT[0], half), half) and task.num_target == (half, half)
    assert task.max_context + task.max_target <= cells
    batch = sample(task)
    assert batch["xc"].shape == (3, half, 3) and batch["xt"].shape == (3, half, 3)
    assert batch["mask_c"].sum(1).tolist() == [half] * 3 and batch["mask_t"].sum(1).tolist() == [half] * 3
    assert task.get_config()["num_context"] == [half, half]  # recorded as derived: rebuilt the same


def test_gridded_defaults_are_unchanged_on_a_window_that_holds_them():
    cells = 2 * 16 * 16  # 512: the smallest window holding 256 + 256 cells
    task = from_xarray(field(10, 16, 16), window_length=2, split=(0.6, 0.2, 0.2))
    assert task.num_context == GRIDDED_CONTEXT and task.num_target == (GRIDDED_TARGET, GRIDDED_TARGET)
    assert task.max_context + task.max_target == cells


def test_gridded_defaults_with_targets_last_fit_each_pool():
    task = from_xarray(field(12, 9, 11), window_length=3, targets="last", split=(0.5, 0.25, 0.25))
    earlier, last = 2 * 9 * 11, 9 * 11  # context from the first two steps, targets from the last
    assert task.num_context == (GRIDDED_CONTEXT[0], min(GRIDDED_CONTEXT[1], earlier))
    assert task.num_target == (last, last)
    batch = sample(task)
    assert batch["xc"].shape[1] == earlier and batch["xt"].shape[1] == last
    assert (batch["xt"][..., -1] == 1.0).all()  # the last step's time input


def test_gridded_defaults_with_missing_drop_count_the_observed_cells():
    values = field(12, 9, 11).values
    values[:, :4, :5] = np.nan  # land: 20 of the 99 cells of every step
    task = from_xarray(field(12, 9, 11).copy(data=values), missing="drop")
    observed = 9 * 11 - 4 * 5
    half = observed * GRIDDED_CONTEXT[1] // (GRIDDED_CONTEXT[1] + GRIDDED_TARGET)
    assert task.num_context == (min(GRIDDED_CONTEXT[0], half), half) and task.num_target == (half, half)
    batch = sample(task)
    assert not np.isnan(batch["yc"]).any() and not np.isnan(batch["yt"]).any()
    assert len(task.starts["train"]) == task.split_bounds["train"][1]  # every window can be drawn


def test_given_sizes_a_window_cannot_hold_name_the_numbers_and_the_file(tmp_path):
    path = tiny_netcdf(tmp_path)
    with pytest.raises(TaskError, match=r"allow 64 \+ 256 cells but a window has 1 x 9 x 11 = 99") as err:
        make_task("gridded", {"path": str(path), "num_context": [1, 64], "num_target": 256})
    assert str(path) in str(err.value)


def test_cli_trains_on_a_tiny_netcdf_with_the_defaults(tmp_path, capsys):
    path = tiny_netcdf(tmp_path)
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps(TINY))
    run = tmp_path / "run"
    code = cli.main(["train", "--model", str(spec), "--task", "gridded", "--task-config",
                     json.dumps({"path": str(path)}), "--steps", "2", "--batch-size", "2", "--val-every", "2",
                     "--val-batches", "1", "--out", str(run), "--no-xla", "--no-tensorboard"])
    assert code == 0, capsys.readouterr().err
    _, task, _ = runs.load_run(str(run))  # the run's task, rebuilt from its recorded config
    half = 9 * 11 * GRIDDED_CONTEXT[1] // (GRIDDED_CONTEXT[1] + GRIDDED_TARGET)
    assert task.num_context == (half, half) == task.num_target


# ---------------------------------------------------------------------- stations
def station_csv(tmp_path, stations, hours):
    """One long CSV: ``stations x hours`` rows of a value and a temperature per station and hour."""
    rng = np.random.default_rng(1)
    times = pd.date_range("2022-03-01", periods=hours, freq="h")
    rows = [{"station": f"s{k}", "year": t.year, "month": t.month, "day": t.day, "hour": t.hour,
             "value": rng.normal(), "temp": rng.normal()} for t in times for k in range(stations)]
    path = tmp_path / f"stations_{stations}x{hours}.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    coordinates = {f"s{k}": [30.0 + k, 100.0 + k] for k in range(stations)}
    return {"path": str(path), "target_columns": "value", "covariate_columns": ["temp"],
            "calendar": ["hour"], "coordinates": coordinates}


def smallest_split(rows, split=(0.8, 0.1, 0.1)):
    """Rows of the smallest split: val and test take ``floor(r N)`` rows, train the rest up to its share."""
    val, test = (math.floor(rows * r + 1e-9) for r in split[1:])
    return min(min(math.floor(rows * split[0] + 1e-9), rows - val - test), val, test)


def test_stations_defaults_fit_a_handful_of_stations(tmp_path):
    task = make_task("stations", station_csv(tmp_path, stations=3, hours=40))
    m = smallest_split(3 * 40)
    scale = m / (STATION_CONTEXT + STATION_TARGET)
    expected = (max(1, math.floor(STATION_CONTEXT * scale + 1e-9)), max(1, math.floor(STATION_TARGET * scale + 1e-9)))
    assert (task.num_context, task.num_target) == expected and sum(expected) <= m
    batch = next(iter(task.dataset("test", batch_size=2)))
    assert batch["xc"].shape[1] == expected[0] and batch["yt"].shape[1] == expected[1]
    trainer = training.train(TINY, task, out_dir=str(tmp_path / "run"), steps=2, batch_size=2, val_every=2,
                             val_batches=1, verbose=0, tensorboard=False, jit_compile=False)
    assert trainer.model is not None


def test_stations_defaults_are_the_references_where_every_split_holds_them(tmp_path):
    config = station_csv(tmp_path, stations=12, hours=600)
    assert smallest_split(12 * 600) >= STATION_CONTEXT + STATION_TARGET
    task = make_task("stations", config)
    assert (task.num_context, task.num_target) == (STATION_CONTEXT, STATION_TARGET)


def test_stations_given_sizes_a_split_cannot_hold_name_them(tmp_path):
    config = station_csv(tmp_path, stations=3, hours=40)
    with pytest.raises(TaskError, match=r"the val split of path .*stations_3x40.csv.* has 12 rows .* "
                                        r"needs num_context \+ num_target = 10 \+ 5 = 15 rows"):
        make_task("stations", {**config, "num_context": 10, "num_target": 5})


# ---------------------------------------------------------------------- point sets
def point_sets(sizes, seed=2):
    """``x [N, 2]``, ``y [N]`` and ``groups [N]`` for sets of the given sizes."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.normal(size=(len(groups), 2))
    return x, np.sin(x[:, 0]) + 0.1 * groups, groups


def set_rule(largest, smallest):
    """The point-set defaults for sets of ``smallest..largest`` points, stated directly."""
    reference = SET_CONTEXT[1] + SET_TARGET[1]
    c_hi = math.floor(SET_CONTEXT[1] * min(largest, reference) / reference)
    t_hi = max(1, math.floor(SET_TARGET[1] * min(largest, reference) / reference))
    t_lo = min(SET_TARGET[0], t_hi)
    c_lo = max(0, min(SET_CONTEXT[0], c_hi, smallest - t_lo))  # both minimums fit the smallest set
    return (c_lo, c_hi), (t_lo, t_hi)


@pytest.mark.parametrize("sizes", [[5, 6, 7, 8, 9, 5, 6, 7, 8, 9], [2] * 20, [3, 40, 70, 12, 9, 100, 4, 30, 5, 8]])
def test_point_set_defaults_fit_a_few_small_sets(sizes):
    x, y, groups = point_sets(sizes)
    task = from_arrays(x, y, groups=groups)
    context, target = set_rule(max(sizes), min(sizes))
    assert task.num_context == context and task.num_target == target
    for split in ("train", "val", "test"):
        batch = task.sample(np.random.default_rng(0), 4, split)
        assert batch["xc"].shape[1] == context[1] and batch["xt"].shape[1] == target[1]
        assert (batch["mask_c"].sum(1) >= context[0]).all() and (batch["mask_t"].sum(1) >= target[0]).all()


def test_point_set_defaults_without_groups_use_the_split_pools(tmp_path):
    x, y, _ = point_sets([12])
    task = from_arrays(x, y)
    pools = [len(task.groups[s][0]) for s in ("train", "val", "test")]
    assert (task.num_context, task.num_target) == set_rule(max(pools), min(pools))
    trainer = training.train(TINY, task, out_dir=str(tmp_path / "run"), steps=2, batch_size=2, val_every=2,
                             val_batches=1, verbose=0, tensorboard=False, jit_compile=False, evaluate=False)
    assert trainer.model is not None


def test_point_set_given_sizes_a_set_cannot_hold_are_refused():
    x, y, groups = point_sets([2] * 20)
    with pytest.raises(TaskError, match=r"has 2 point\(s\) but num_context \+ num_target need at least 4"):
        from_arrays(x, y, groups=groups, num_context=SET_CONTEXT, num_target=SET_TARGET)
