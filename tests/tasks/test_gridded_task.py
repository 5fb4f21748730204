"""Gridded-field task (tasks/gridded.py) against NumPy computations on small synthetic
netCDF files written in the test."""
import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import taylorformer as tfm
from taylorformer.workflow import runs, training
from taylorformer.errors import TaskError
from taylorformer.workflow.evaluation import evaluate
from taylorformer.task import make_task
from taylorformer.tasks import from_xarray
from taylorformer.tasks import gridded
from taylorformer.tasks.csv_series import DataFileNotFoundError

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}
TIMES = pd.date_range("2020-01-01", periods=40, freq="6h")
LAT = np.linspace(60.0, -60.0, 9)  # descending, as in ERA5
LON = np.arange(0.0, 360.0, 30.0)  # 0..330


def era5_field():
    """``[40, 9, 12]`` float64: a different value in every cell (time, lat, lon)."""
    t, i, j = np.meshgrid(np.arange(40), np.arange(9), np.arange(12), indexing="ij")
    return np.sin(0.3 * t) + 0.1 * i + 0.01 * j * (1 + t % 3)


def write_era5(tmp_path, name="era5.nc", field=None, **extra):
    data = {"t2m": (("time", "latitude", "longitude"), era5_field() if field is None else field), **extra}
    ds = xr.Dataset(data, coords={"time": TIMES, "latitude": LAT, "longitude": LON})
    path = tmp_path / name
    ds.to_netcdf(path, engine="h5netcdf")
    return path


def collect(task, split, batch_size=4, num_batches=2):
    batches = [{k: v.numpy() for k, v in b.items()}
               for b in task.dataset(split, batch_size=batch_size, num_batches=num_batches)]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def check_cells(task, batch, field, times, lats, lons):
    """Every real point of ``batch`` holds the standardised value of the cell its inputs
    name: time step j of the window (t = -1 + 2j/(W-1)) and the grid cell (lat, lon); NaN
    where that cell is NaN."""
    w = task.window_length
    for b in range(len(batch["window_start"])):
        start = batch["window_start"][b]
        seen = set()
        for side in ("c", "t"):
            real = batch["mask_" + side][b] > 0
            x, y = batch["x" + side][b, real], batch["y" + side][b, real, 0]
            np.testing.assert_array_equal(batch["s" + side][b, real], x[:, :2])
            np.testing.assert_array_equal(batch["t" + side][b, real, 0], x[:, 2])
            for (lat, lon, t), value in zip(x, y):
                j = int(round((t + 1) * (w - 1) / 2)) if w > 1 else 0
                i_lat = int(np.flatnonzero(np.isclose(lats, lat, atol=1e-4))[0])
                i_lon = int(np.flatnonzero(np.isclose(np.mod(lons - lon, 360.0), 0.0, atol=1e-4)
                                           | np.isclose(np.mod(lons - lon, 360.0), 360.0, atol=1e-4))[0])
                raw = field[times[start + j], i_lat, i_lon]
                assert value == pytest.approx((raw - task.mean) / task.std, abs=1e-5, nan_ok=True)
                seen.add((j, i_lat, i_lon))
        assert len(seen) == int(batch["mask_c"][b].sum() + batch["mask_t"][b].sum())  # disjoint cells


def test_region_time_range_split_standardisation_and_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(gridded, "BLOCK_VALUES", 2 * 4 * 3)  # two steps per block: a streamed pass
    path = write_era5(tmp_path)
    task = make_task("gridded", {"path": str(path), "variable": "t2m", "region": {"lat": [-35, 40], "lon": [-40, 40]},
                                 "time_range": ["2020-01-02", "2020-01-09 18:00"], "window_length": 3,
                                 "num_context": [2, 6], "num_target": 5, "split": [0.5, 0.25, 0.25]})
    field = era5_field()
    steps = np.flatnonzero((TIMES >= "2020-01-02") & (TIMES <= "2020-01-09 18:00"))
    lat_rows = np.flatnonzero((LAT >= -35) & (LAT <= 40))
    lon_cols = np.array([0, 1, 11])  # 0, 30 and 330 (= -30) degrees
    assert len(task.times) == len(steps) == 32
    np.testing.assert_array_equal(task.times, TIMES[steps].to_numpy())
    np.testing.assert_allclose(task.grid[0], LAT[lat_rows])
    np.testing.assert_allclose(np.sort(task.grid[1]), [-30.0, 0.0, 30.0])  # the region's convention
    assert task.split_bounds == {"train": (0, 16), "val": (16, 24), "test": (24, 32)}
    train = field[steps[:16]][:, lat_rows][:, :, lon_cols]
    assert task.mean == pytest.approx(train.mean(), rel=1e-12)
    assert task.std == pytest.approx(np.sqrt(((train - train.mean()) ** 2).mean()), rel=1e-12)
    assert task.dim_x == 3 and task.dim_y == 1
    for split in ("train", "val", "test"):
        batch = collect(task, split)
        lo, hi = task.split_bounds[split]
        assert batch["window_start"].min() >= lo and batch["window_start"].max() <= hi - 3
        assert batch["xc"].shape == (8, 6, 3) and batch["xt"].shape == (8, 5, 3)
        assert set(batch["mask_c"].sum(1)) <= set(range(2, 7)) and (batch["mask_t"].sum(1) == 5).all()
        check_cells(task, batch, field, steps, LAT, np.where(LON > 180, LON - 360, LON))
    first, again = collect(task, "test"), collect(task, "test")
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])


def test_a_region_of_a_large_file_is_read_lazily(tmp_path):
    """Building the task and sampling from a 10 x 10 degree region of a 1-degree global
    file (26 MB) allocates well under a megabyte: only the region's cells are read."""
    import tracemalloc

    lat, lon = np.linspace(90, -90, 181), np.arange(0.0, 360.0, 1.0)
    field = np.random.default_rng(0).normal(size=(100, 181, 360)).astype(np.float32)
    xr.Dataset({"t2m": (("time", "latitude", "longitude"), field)},
               coords={"time": pd.date_range("2020", periods=100, freq="h"), "latitude": lat,
                       "longitude": lon}).to_netcdf(tmp_path / "global.nc", engine="h5netcdf")
    del field
    tracemalloc.start()
    try:
        task = from_xarray(str(tmp_path / "global.nc"), "t2m", region={"lat": [40, 49], "lon": [-5, 4]},
                           window_length=3, num_context=10, num_target=10)
        task.sample(np.random.default_rng(0), 8, "train")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert task.data.shape == (100, 10, 10)
    assert peak < 2**20, f"peak {peak} bytes: the whole variable (26 MB) or more than the region was read"


def test_xyz_space_are_unit_vectors_of_lat_lon(tmp_path):
    task = make_task("gridded", {"path": str(write_era5(tmp_path)), "space": "xyz", "num_context": 4,
                                 "num_target": 4})
    lat, lon = np.meshgrid(np.radians(LAT), np.radians(LON), indexing="ij")
    expected = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)
    np.testing.assert_allclose(task.space_inputs, expected, atol=1e-6)
    assert task.dim_x == 4
    b = next(iter(task.dataset("val", batch_size=2)))
    np.testing.assert_allclose(np.linalg.norm(b["xc"][..., :3], axis=-1), 1.0, atol=1e-6)


def test_targets_last_forecasts_the_final_step(tmp_path):
    task = make_task("gridded", {"path": str(write_era5(tmp_path)), "window_length": 4, "targets": "last",
                                 "num_context": 20, "num_target": 10})
    b = collect(task, "train")
    assert (b["xt"][..., 2] == 1.0).all()
    earlier = b["xc"][..., 2].ravel()
    assert np.isclose(earlier[:, None], [-1.0, -1 / 3, 1 / 3]).any(1).all()  # steps 0..2 of 4
    check_cells(task, b, era5_field(), np.arange(40), LAT, LON)


def test_planar_kolmogorov_arrays(tmp_path):
    rng = np.random.default_rng(3)
    flow = rng.normal(size=(30, 6, 8))
    task = from_xarray(flow, window_length=2, num_context=(5, 10), num_target=6, split=(0.6, 0.2, 0.2))
    assert not task.geographic and task.space_dims == ["y", "x"] and not task.rebuildable
    ys, xs = np.linspace(-1, 1, 6), np.linspace(-1, 1, 8)
    np.testing.assert_allclose(task.space_inputs[..., 0], np.repeat(ys[:, None], 8, 1), atol=1e-7)
    np.testing.assert_allclose(task.space_inputs[..., 1], np.repeat(xs[None], 6, 0), atol=1e-7)
    assert task.mean == pytest.approx(flow[:18].mean()) and task.std == pytest.approx(flow[:18].std())
    b = collect(task, "val")
    check_cells(task, b, flow, np.arange(30), ys, xs)
    # a DataArray with coordinate values: those are the inputs, a region selects by them
    da = xr.DataArray(flow, dims=("time", "y", "x"), coords={"time": np.arange(30.0), "y": np.arange(6.0) * 0.5,
                                                             "x": np.arange(8.0)}, name="vorticity")
    task = from_xarray(da, region={"x": [2, 5]}, time_range=[3, 26], num_context=3, num_target=3)
    np.testing.assert_allclose(task.grid[1], [2, 3, 4, 5])
    np.testing.assert_allclose(task.times, np.arange(3.0, 27.0))
    assert task.variable == "vorticity"


def test_select_fixes_an_extra_dim():
    field = np.stack([era5_field(), 100 + era5_field()], 1)  # [time, level, lat, lon]
    ds = xr.Dataset({"z": (("time", "level", "latitude", "longitude"), field)},
                    coords={"time": TIMES, "level": [500, 850], "latitude": LAT, "longitude": LON})
    with pytest.raises(TaskError, match=r"dims \['time', 'level', 'latitude', 'longitude'\].*select="):
        from_xarray(ds, "z")
    task = from_xarray(ds, "z", select={"level": 850}, num_context=4, num_target=4)
    assert task.mean == pytest.approx(100 + era5_field()[:28].mean())
    with pytest.raises(TaskError, match="'level' has no value 700"):
        from_xarray(ds, "z", select={"level": 700})


@pytest.mark.parametrize("config, pattern", [
    ({"variable": "t2n"}, r"has no variable 't2n'; did you mean 't2m'"),
    ({"variable": "mask"}, r"variable 'mask' .* has dims \['latitude', 'longitude'\]: no time dim"),
    ({"variable": "t2m", "region": {"lat": [70, 80]}}, "region .* selects nothing of variable 't2m'"),
    ({"variable": "t2m", "time_range": ["2021-01-01", "2021-02-01"]}, "time_range .* selects nothing"),
    ({"variable": "t2m", "region": {"depth": [0, 1]}}, r"'region' names \['depth'\]"),
    ({"variable": "t2m", "window_length": 9}, r"val split .* has 4 time steps .* window_length = 9"),
    ({"variable": "t2m", "num_context": 500, "num_target": 600}, "allow 500 \\+ 600 cells but a window has"),
    ({"variable": "t2m", "targets": "last"}, "needs window_length >= 2"),
    ({"variable": "t2m", "space": "polar"}, "'space' must be one of 'latlon', 'xyz', got 'polar'"),
    ({}, r"has 2 variables \['t2m', 'mask'\]: pass variable="),
])
def test_bad_configs_name_the_file_and_field(tmp_path, config, pattern):
    path = write_era5(tmp_path, mask=(("latitude", "longitude"), np.ones((9, 12))))
    with pytest.raises(TaskError, match=pattern) as err:
        make_task("gridded", {"path": str(path), **config})
    if "variable" in pattern or "selects nothing" in pattern or "allow" in pattern:
        assert str(path) in str(err.value)


def test_missing_file_and_nan_cells_are_named(tmp_path):
    with pytest.raises(DataFileNotFoundError, match="nope.nc"):
        make_task("gridded", {"path": str(tmp_path / "nope.nc")})
    field = era5_field()
    field[5, 2, 3] = field[30, 0, 0] = np.nan
    path = write_era5(tmp_path, name="nan.nc", field=field)
    with pytest.raises(TaskError, match=r"variable 't2m' of data file .*nan.nc.* has 2 NaN/inf cell\(s\)"
                                        r".*first at time=2020-01-02T06:00.*latitude=30, longitude=90"):
        make_task("gridded", {"path": str(path), "num_context": 4, "num_target": 4, "missing": "error"})
    task = make_task("gridded", {"path": str(path), "time_range": ["2020-01-03", "2020-01-07"],
                                 "num_context": 4, "num_target": 4, "missing": "error"})  # a range without them
    assert len(task.times) == 17
    (tmp_path / "junk.nc").write_text("not a netCDF file")
    with pytest.raises(TaskError, match="cannot read data file .*junk.nc.* as netCDF"):
        make_task("gridded", {"path": str(tmp_path / "junk.nc")})


def test_train_by_name_evaluate_rebuilds_the_task(tmp_path):
    path = write_era5(tmp_path)
    config = {"path": str(path), "window_length": 2, "num_context": [4, 8], "num_target": 6}
    out = tmp_path / "run"
    trainer = training.train(TINY, make_task("gridded", config), out_dir=str(out), steps=2, batch_size=2,
                   val_every=2, val_batches=1, verbose=0, tensorboard=False, jit_compile=False)
    saved = json.loads((out / "config.json").read_text())
    assert saved["task"] == "gridded" and "task_object" not in saved  # rebuildable from its config
    result = runs.evaluate_run(str(out), num_batches=1, batch_size=2)
    assert result["task"] == "gridded" and np.isfinite(result["loglik"]["mean"])
    assert saved["task_config"] == make_task("gridded", config).get_config()
    # the plot: truth / mean / std maps of the targets at one step, in the variable's units
    task = make_task("gridded", config)
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("test", batch_size=2))).items()}
    fig = task.plot(trainer.model, batch, num_tasks=2)
    maps = [ax for ax in fig.axes if ax.get_xlabel()]  # not the colour bars
    assert len(maps) == 6 and all((ax.get_xlabel(), ax.get_ylabel()) == ("longitude", "latitude") for ax in maps)
    truth = maps[0].collections[0]
    lon, lat = truth.get_offsets().T
    steps, counts = np.unique(batch["xt"][0, :, 2], return_counts=True)
    j = int(steps[np.argmax(counts)] > 0)  # the step with the most targets (t = -1 or 1)
    assert len(lat) == counts.max()
    expected = [era5_field()[int(batch["window_start"][0]) + j, LAT == a, LON == np.mod(b, 360)][0]
                for a, b in zip(lat, lon)]
    np.testing.assert_allclose(truth.get_array(), expected, atol=1e-4)


#: tiny BSA-TNP whose bias reads x: great-circle distance of x[:, :2] (lat, lon), time x[:, 2]
GEODESIC_BSA_TNP = {"preset": "bsa-tnp", "encoder": {
    "layers": 1, "width": 16, "num_heads": 2, "head_dim": 8, "ffn_width": 16, "embed_widths": [16],
    "positions": "x", "attention": {"name": "biased", "b_init": 16.0, "groups": [
        {"name": "space", "dims": [0, 1], "distance": "geodesic", "coords": "latlon", "basis": 2},
        {"name": "time", "dims": [2], "basis": 2}]}},
    "head": {"width": 16, "hidden_layers": 1}}


def test_geodesic_bias_reads_the_lat_lon_inputs(tmp_path):
    """The geodesic bias turns x[:, :2] into the unit vectors of the cells' (lat, lon), and
    BSA-TNP's log-likelihood is unchanged when the targets' longitudes move by 360 degrees
    (the same points on the sphere)."""
    from taylorformer.plugins.bsa_tnp.geometry import unit_vectors

    task = make_task("gridded", {"path": str(write_era5(tmp_path)), "window_length": 2,
                                 "num_context": [4, 8], "num_target": 6})
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("val", batch_size=2))).items()}
    lat, lon = np.radians(task.grid[0])[:, None], np.radians(task.grid[1])[None]
    cells = np.stack(np.broadcast_arrays(np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)), -1)
    got = unit_vectors(batch["xt"][..., :2], "latlon").numpy()[batch["mask_t"] > 0]
    distance = np.linalg.norm(got[:, None] - cells.reshape(-1, 3)[None], axis=-1).min(1)
    assert distance.max() < 1e-5  # every target sits on a grid cell of the sphere
    model = tfm.build_model(GEODESIC_BSA_TNP, dim_x=task.dim_x, dim_y=1)
    moved = {**batch, "xt": batch["xt"] + np.array([0, 360, 0], np.float32)}
    np.testing.assert_allclose(tfm.loglik(model, moved), tfm.loglik(model, batch), rtol=0, atol=1e-6)


def test_zarr_stores_read_with_zarr_or_say_what_to_install(tmp_path):
    import importlib.util

    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), era5_field())},
                    coords={"time": TIMES, "latitude": LAT, "longitude": LON})
    store = tmp_path / "era5.zarr"
    if importlib.util.find_spec("zarr") is None:
        store.mkdir()
        with pytest.raises(TaskError, match=r"era5.zarr' is a zarr store: install zarr"):
            from_xarray(str(store))
        return
    ds.to_zarr(store)
    task = from_xarray(str(store), num_context=4, num_target=4)
    assert task.mean == pytest.approx(era5_field()[:28].mean()) and task.rebuildable


# ----------------------------------------------------------------------------- missing cells
def field_with_gaps():
    """``(field [40, 9, 12], missing)``: "land" (two columns of cells NaN at every step), a
    "cloud" (a 3 x 4 block NaN for steps 10..14) and step 33 wholly NaN."""
    field = era5_field()
    missing = np.zeros(field.shape, bool)
    missing[:, :, 4:6] = True
    missing[10:15, 2:5, 6:10] = True
    missing[33] = True
    return np.where(missing, np.nan, field), missing


def test_nan_cells_are_masked_outputs_standardised_over_observed_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(gridded, "BLOCK_VALUES", 3 * 9 * 12)  # three steps per block: a streamed pass
    field, missing = field_with_gaps()
    path = write_era5(tmp_path, name="gaps.nc", field=field)
    task = make_task("gridded", {"path": str(path), "window_length": 2, "num_context": [10, 30],
                                 "num_target": 40})
    assert task.missing == "mask" and task.get_config()["missing"] == "mask"
    train = field[:28]  # split 0.7 of 40 steps
    assert task.mean == pytest.approx(np.nanmean(train), rel=1e-12)
    assert task.std == pytest.approx(np.nanstd(train), rel=1e-12)
    nan_points = 0
    for split in ("train", "test"):
        batch = collect(task, split)
        check_cells(task, batch, field, np.arange(40), LAT, LON)  # NaN exactly at the NaN cells
        nan_points += sum(int(np.isnan(batch["y" + s][batch["mask_" + s] > 0]).sum()) for s in ("c", "t"))
    assert nan_points > 0
    batch = collect(task, "val", num_batches=1)
    model = tfm.build_model({**TINY, "dim_x": task.dim_x, "dim_y": 1})
    assert np.isfinite(tfm.loglik(model, batch).numpy()).all()
    trainer = training.train(TINY, task, out_dir=str(tmp_path / "run"), steps=3, batch_size=2, val_every=3,
                             val_batches=1, verbose=0, tensorboard=False, jit_compile=False)
    metrics = evaluate(trainer.model, task, "test", batch_size=2, num_batches=2)
    assert np.isfinite(metrics["loglik"]["mean"]) and np.isfinite(metrics["rmse"])
    # the plot: missing target cells are gaps in the truth map, the predictive maps fill them
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("test", batch_size=2))).items()}
    batch["yt"][0, :10, 0] = np.nan  # more gaps, whatever the cells drawn
    fig = task.plot(trainer.model, batch, num_tasks=1)
    truth, mean = fig.axes[0].collections[0], fig.axes[1].collections[0]
    steps, counts = np.unique(batch["xt"][0, :, 2], return_counts=True)
    step = steps[np.argmax(counts)]
    at_step = batch["xt"][0, :, 2] == step
    seen = at_step & ~np.isnan(batch["yt"][0, :, 0])
    assert len(truth.get_offsets()) == seen.sum() < at_step.sum() == len(mean.get_offsets())
    np.testing.assert_allclose(truth.get_offsets(), batch["xt"][0, seen][:, [1, 0]])
    np.testing.assert_allclose(truth.get_array(), task.to_original_units(batch["yt"][0, seen, 0]), rtol=1e-6)
    assert np.isfinite(mean.get_array()).all()


def test_missing_drop_draws_only_observed_cells(tmp_path):
    field, missing = field_with_gaps()
    path = write_era5(tmp_path, name="gaps.nc", field=field)
    task = make_task("gridded", {"path": str(path), "window_length": 1, "num_context": [50, 60],
                                 "num_target": [30, 48], "missing": "drop"})
    # step 33 (test split, steps 32..39) has no observed cell: never a window
    assert 33 not in task.starts["test"] and len(task.starts["test"]) == 7
    batch = collect(task, "test", batch_size=8, num_batches=2)
    assert 33 not in batch["window_start"]
    check_cells(task, batch, field, np.arange(40), LAT, LON)
    for side in ("c", "t"):
        real = batch["mask_" + side] > 0
        assert not np.isnan(batch["y" + side][real]).any()
    # a step holds 9 x 10 = 90 observed cells: Nc + Nt (up to 108) are cut to them, Nt first
    totals = batch["mask_c"].sum(1) + batch["mask_t"].sum(1)
    assert totals.max() <= 90 and (batch["mask_t"].sum(1) >= 30).all() and (batch["mask_c"].sum(1) >= 50).all()
    # the cloudy steps 10..14 hold 78 observed cells, fewer than the minimum 50 + 30
    assert (~missing[10:15]).sum((1, 2)).tolist() == [78] * 5
    np.testing.assert_array_equal(task.starts["train"], np.setdiff1d(np.arange(28), np.arange(10, 15)))
    train = collect(task, "train", batch_size=8, num_batches=4)
    check_cells(task, train, field, np.arange(40), LAT, LON)
    assert not np.isnan(train["yc"]).any() and not np.isnan(train["yt"]).any()
    # targets="last": the targets' step needs 90 observed cells (not a cloudy one), the context 20
    last = make_task("gridded", {"path": str(path), "window_length": 3, "targets": "last", "num_context": 20,
                                 "num_target": 90, "missing": "drop"})
    np.testing.assert_array_equal(last.starts["train"], np.setdiff1d(np.arange(26), np.arange(8, 13)))
    batch = collect(last, "train")
    assert (batch["mask_t"].sum(1) == 90).all() and not np.isnan(batch["yt"]).any()
    check_cells(last, batch, field, np.arange(40), LAT, LON)
    with pytest.raises(TaskError, match=r"no window of the train split of data file .*gaps.nc.* \(variable 't2m', "
                                        r"steps 0..27, window_length 1\) has num_context\[0\] \+ num_target\[0\] "
                                        r"= 100 observed cells \(missing='drop'\)"):
        make_task("gridded", {"path": str(path), "num_context": 60, "num_target": 40, "missing": "drop"})


def test_missing_errors_name_the_file_variable_and_cell(tmp_path):
    field, _ = field_with_gaps()
    path = write_era5(tmp_path, name="gaps.nc", field=field)
    counts = {"num_context": 4, "num_target": 4}
    with pytest.raises(TaskError, match=r"'missing' must be one of 'mask', 'drop', 'error', got 'skip'"):
        make_task("gridded", {"path": str(path), "missing": "skip"})
    infinite = era5_field()
    infinite[3, 1, 2] = np.inf
    with pytest.raises(TaskError, match=r"variable 't2m' of data file .*inf.nc.* has 1 infinite cell\(s\).*first at "
                                        r"time=2020-01-01T18:00.*latitude=45, longitude=60"):
        make_task("gridded", {"path": str(write_era5(tmp_path, name="inf.nc", field=infinite)), **counts})
    unobserved = era5_field()
    unobserved[:28] = np.nan
    with pytest.raises(TaskError, match=r"variable 't2m' of data file .*dark.nc.* has no observed \(non-NaN\) cell "
                                        r"in the 28 training steps"):
        make_task("gridded", {"path": str(write_era5(tmp_path, name="dark.nc", field=unobserved)), **counts})
    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), era5_field())},
                    coords={"time": TIMES, "latitude": np.where(np.arange(9) == 4, np.nan, LAT), "longitude": LON})
    with pytest.raises(TaskError, match=r"coordinate 'latitude' of the given data has 1 NaN/NaT/inf value\(s\), "
                                        r"the first at index 4"):
        from_xarray(ds, **counts)
    times = TIMES.to_numpy().copy()
    times[6] = np.datetime64("NaT")
    with pytest.raises(TaskError, match=r"coordinate 'time' of the given data has 1 NaN/NaT/inf value\(s\), "
                                        r"the first at index 6"):
        from_xarray(ds.assign_coords(latitude=LAT, time=times), **counts)
