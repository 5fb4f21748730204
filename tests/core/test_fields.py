"""Fields in and out on their coordinates (``taylorformer.prediction.fields``, ``predict --grid``,
``plot-field``): patchwise prediction against the model's direct forward pass (all the
context, or each patch's window computed here with NumPy), raw units against standardised
predictions mapped back by hand, coordinates and attributes kept, NaN cells skipped, the
map's axes, and one-line CLI errors for bad grids. The units, inputs and training span
come from the model's normaliser alone (a model file without one is refused). A tiny model
trained two steps on the gridded fixture; an untrained one of 2-D inputs (identity
normaliser) for the patch tests."""
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from taylorformer.prediction import fields
from taylorformer.workflow import training
from taylorformer.cli import main
from taylorformer.errors import BatchError
from taylorformer.models import build_model
from taylorformer.normaliser import Normaliser
from taylorformer.workflow.runs import load_run

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}
TRAIN = {"evaluate": False, "steps": 2, "batch_size": 2, "val_every": 2, "val_batches": 1, "checkpoint_every": 2,
         "tensorboard": False, "verbose": 0}


@pytest.fixture(scope="module")
def gp_model():
    """A model of 2-D inputs (as the 2-D GP task's) in the data's own units (identity
    normaliser, no training span); untrained: patchwise equality is a property of the
    windows, whatever the weights."""
    model = build_model({**TINY, "dim_x": 2, "dim_y": 1})
    model.normaliser = Normaliser.identity(2, 1)
    return model


@pytest.fixture(scope="module")
def gp_run(gp_model, tmp_path_factory):
    """A directory with the model file alone (predict's model-only run)."""
    path = tmp_path_factory.mktemp("gp-run")
    gp_model.save(path / "model.keras")
    return path


@pytest.fixture(scope="module")
def gridded_run(tmp_path_factory, gridded_configs):
    out = tmp_path_factory.mktemp("gridded") / "run"
    training.train(TINY, "gridded", task_config=gridded_configs["gridded"], out_dir=str(out), **TRAIN)
    return out


def plane_grid(nx=13, ny=11, masked=((0, 0), (0, 1), (4, 7))):
    """A field ``z (x0, x1)`` on [-2, 2]^2 with coordinate and variable attributes; NaN at
    ``masked`` cells."""
    x0, x1 = np.linspace(-2, 2, nx), np.linspace(-2, 2, ny)
    z = np.sin(x0)[:, None] + np.cos(x1)[None]
    for cell in masked:
        z[cell] = np.nan
    return xr.Dataset({"z": (("x0", "x1"), z, {"units": "m", "long_name": "height"})},
                      coords={"x0": ("x0", x0, {"units": "km"}), "x1": ("x1", x1, {"units": "km"})},
                      attrs={"title": "plane"})


def scattered(n=40, seed=0, columns=("x0", "x1"), value="z"):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({columns[0]: rng.uniform(-2, 2, n), columns[1]: rng.uniform(-2, 2, n)})
    frame[value] = np.sin(frame[columns[0]]) + np.cos(frame[columns[1]])
    return frame


def direct(model, xc, yc, xt):
    """The model's predictive (mean, stddev) ``[Nt]`` of one forward pass: no padding,
    no chunks."""
    dist = model.distribution({"xc": np.asarray(xc, np.float32)[None], "yc": np.asarray(yc, np.float32)[None, :, None],
                               "xt": np.asarray(xt, np.float32)[None],
                               "yt": np.zeros((1, len(xt), 1), np.float32)})
    return np.asarray(dist.mean())[0, :, 0], np.asarray(dist.stddev())[0, :, 0]


def cells_of(grid):
    return np.stack(np.meshgrid(grid.x0.values, grid.x1.values, indexing="ij"), -1).reshape(-1, 2)


@pytest.mark.parametrize("patch,padding", [((3, 4), np.inf), (5, 4.0), ((13, 11), 0.0)])
def test_patchwise_equals_unpatched_when_windows_hold_all_context(gp_model, patch, padding):
    """Windows that hold every context point (padding >= the domain, or one patch whose
    box spans the context): each cell equals the one forward pass over all cells."""
    grid, context = plane_grid(), scattered()
    if padding == 0.0:  # one patch, no padding: its box is the grid's, which holds the context
        context = context[(context.x0.abs() <= 2) & (context.x1.abs() <= 2)]
    out = fields.predict_field(gp_model, context, grid, patch=patch, padding=padding, progress=False)
    mean, std = direct(gp_model, context[["x0", "x1"]], context["z"], cells_of(grid))
    defined = ~np.isnan(grid.z.values.reshape(-1))
    np.testing.assert_allclose(out.z_mean.values.reshape(-1)[defined], mean[defined], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.z_stddev.values.reshape(-1)[defined], std[defined], rtol=1e-5, atol=1e-5)
    # the NaN cells of the grid are not predicted: NaN in every output, the truth kept
    for key in ("z_mean", "z_stddev"):
        assert np.array_equal(np.isnan(out[key].values), np.isnan(grid.z.values))
    assert np.isnan(out.z_quantiles.values[:, ~defined.reshape(grid.z.shape)]).all()
    np.testing.assert_array_equal(out.z.values, grid.z.values.astype(np.float32))
    # Gaussian quantiles from the same predictive
    from scipy import stats

    for q, values in zip(out["quantile"].values, out.z_quantiles.values):
        np.testing.assert_allclose(values.reshape(-1)[defined], mean[defined] + std[defined] * stats.norm.ppf(q),
                                   rtol=1e-4, atol=1e-4)
    # coordinates, names and attributes survive
    assert out.z_mean.dims == ("x0", "x1") and out.x0.attrs["units"] == "km" and out.attrs["title"] == "plane"
    np.testing.assert_array_equal(out.x1.values, grid.x1.values)
    assert out.z_mean.attrs["units"] == "m" and "height" in out.z_mean.attrs["long_name"]


def test_defaults_come_from_the_training_span(gp_model):
    """The 2-D GP task trains on [-2, 2]^2 (span 4): padding 2 (half the span), tiles of
    half the span (2 / 0.333 = 6 cells along x0, 2 / 0.4 = 5 along x1), recorded in the
    task's normaliser. Without a known span: the whole context, the unpatched prediction."""
    from taylorformer.task import make_task

    grid, context = plane_grid(), scattered()
    normaliser = Normaliser.from_task(make_task("gp-2d-bsa"), 2, 1)
    assert normaliser.coordinates["span"] == [4.0, 4.0]
    out = fields.predict_field(gp_model, context, grid, normaliser=normaliser, progress=False)
    assert out.attrs["taylorformer_padding"] == "2,2" and out.attrs["taylorformer_patch"] == "6,5"
    bare = fields.predict_field(gp_model, context, grid, progress=False)
    assert bare.attrs["taylorformer_padding"] == "inf,inf" and bare.attrs["taylorformer_patch"] == "128,128"
    mean, _ = direct(gp_model, context[["x0", "x1"]], context["z"], cells_of(grid))
    defined = ~np.isnan(grid.z.values.reshape(-1))
    np.testing.assert_allclose(bare.z_mean.values.reshape(-1)[defined], mean[defined], rtol=1e-5, atol=1e-5)


def test_each_patch_is_predicted_from_its_padded_window(gp_model):
    """Small windows: every tile's cells equal a forward pass with exactly the context
    inside the tile's box widened by the padding (selected here with NumPy)."""
    grid, context = plane_grid(masked=()), scattered(60, seed=1)
    patch, padding = (4, 3), (0.5, 0.8)
    out = fields.predict_field(gp_model, context, grid, patch=patch, padding=padding, progress=False)
    xy, z = context[["x0", "x1"]].to_numpy(), context["z"].to_numpy()
    x0, x1 = grid.x0.values, grid.x1.values
    differs = 0
    for a in range(0, len(x0), patch[0]):
        for b in range(0, len(x1), patch[1]):
            cells = np.stack(np.meshgrid(x0[a:a + patch[0]], x1[b:b + patch[1]], indexing="ij"), -1).reshape(-1, 2)
            lo, hi = cells.min(0) - padding, cells.max(0) + padding
            inside = np.all((xy >= lo) & (xy <= hi), 1)
            mean, std = direct(gp_model, xy[inside], z[inside], cells)
            got = out.z_mean.values[a:a + patch[0], b:b + patch[1]].reshape(-1)
            np.testing.assert_allclose(got, mean, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(out.z_stddev.values[a:a + patch[0], b:b + patch[1]].reshape(-1), std,
                                       rtol=1e-5, atol=1e-5)
            differs += inside.sum() < len(xy)
    assert differs > 0  # the windows did cut the context


def era5_grid(tmp_path):
    """A (latitude, longitude) field in kelvin on other cells than the training file's,
    one NaN (land) cell, and 25 scattered points; written to ``grid.nc``/``points.csv``."""
    lat, lon = np.linspace(50, -50, 6), np.arange(10.0, 350.0, 40.0)  # lon 10..330 (9)
    truth = 280.0 + 10 * np.cos(np.radians(lat))[:, None] + np.sin(np.radians(lon))[None]
    truth[2, 3] = np.nan
    grid = xr.Dataset({"t2m": (("latitude", "longitude"), truth, {"units": "K", "long_name": "2 m temperature"})},
                      coords={"latitude": ("latitude", lat, {"units": "degrees_north"}),
                              "longitude": ("longitude", lon, {"units": "degrees_east"})},
                      attrs={"source": "test"})
    grid.to_netcdf(tmp_path / "grid.nc", engine="h5netcdf")
    rng = np.random.default_rng(2)
    points = pd.DataFrame({"lat": rng.uniform(-60, 60, 25), "lon": rng.uniform(0, 300, 25)})
    points["t2m"] = 280 + 5 * rng.normal(size=25)
    points.to_csv(tmp_path / "points.csv", index=False)
    return grid, points


def check_gridded_field(out, model, task, grid, points):
    """``out`` on the grid's coordinates and attributes; its mean and stddev (kelvin) equal
    the model's predictive on standardised values (the task's mean and std) mapped back
    by hand; inputs ``[lat, lon, t]`` with ``t`` the window's last step, groups ``s``/``t``."""
    assert out.t2m_mean.dims == ("latitude", "longitude") and out.attrs["source"] == "test"
    assert out.latitude.attrs["units"] == "degrees_north" and out.t2m_mean.attrs["units"] == "K"
    cells = np.stack(np.meshgrid(grid.latitude.values, grid.longitude.values, indexing="ij"), -1).reshape(-1, 2)
    assert task.window_length == 2  # t of the last step: 1
    xt = np.concatenate([cells, np.ones((len(cells), 1))], -1)
    xc = np.concatenate([points[["lat", "lon"]].to_numpy(), np.ones((len(points), 1))], -1)
    batch = {"xc": xc[None], "yc": ((points[["t2m"]].to_numpy() - task.mean) / task.std)[None], "xt": xt[None]}
    batch = {k: v.astype(np.float32) for k, v in batch.items()}
    groups = {"sc": batch["xc"][..., :2], "tc": batch["xc"][..., 2:], "st": batch["xt"][..., :2],
              "tt": batch["xt"][..., 2:], "yt": np.zeros((1, len(cells), 1), np.float32)}
    dist = model.distribution({**batch, **groups})
    mean = np.asarray(dist.mean())[0, :, 0] * task.std + task.mean
    std = np.asarray(dist.stddev())[0, :, 0] * task.std
    defined = ~np.isnan(grid.t2m.values.reshape(-1))
    np.testing.assert_allclose(out.t2m_mean.values.reshape(-1)[defined], mean[defined], rtol=1e-5)
    np.testing.assert_allclose(out.t2m_stddev.values.reshape(-1)[defined], std[defined], rtol=1e-4)
    assert np.isnan(out.t2m_mean.values[2, 3]) and np.isnan(out.t2m.values[2, 3])
    assert abs(float(np.nanmean(out.t2m_mean.values)) - task.mean) < 50 * task.std  # kelvin, not z-units


def test_gridded_task_field_in_raw_units(gridded_configs, tmp_path):
    """A model of the gridded task's inputs, the task's normaliser: raw units in and out;
    a field as the context equals the same points as a CSV."""
    from taylorformer.task import make_task

    task = make_task("gridded", gridded_configs["gridded"])
    task.mean, task.std = 280.0, 7.5  # a normaliser far from the identity
    model = build_model({**TINY, "dim_x": 3, "dim_y": 1})
    model.normaliser = Normaliser.from_task(task, 3, 1)  # what training saves in the model file
    grid, points = era5_grid(tmp_path)
    out = fields.predict_field(model, tmp_path / "points.csv", tmp_path / "grid.nc", padding=np.inf,
                               progress=False)
    check_gridded_field(out, model, task, grid, points)
    field = xr.Dataset({"t2m": (("station",), points["t2m"].to_numpy())},
                       coords={"latitude": ("station", points["lat"].to_numpy(), {"units": "degrees_north"}),
                               "longitude": ("station", points["lon"].to_numpy())})
    again = fields.predict_field(model, field, grid, padding=np.inf, progress=False)
    np.testing.assert_allclose(again.t2m_mean.values, out.t2m_mean.values, rtol=1e-6, equal_nan=True)
    # a model file from before the window-time input was recorded: the time input is asked for
    old = model.normaliser.to_dict()
    del old["coordinates"]["time_input"]
    with pytest.raises(BatchError, match="records no window-time input.*--time-input"):
        fields.predict_field(model, field, grid, normaliser=Normaliser.from_dict(old), padding=np.inf,
                             progress=False)
    given = fields.predict_field(model, field, grid, normaliser=Normaliser.from_dict(old), time_input=1.0,
                                 padding=np.inf, progress=False)
    np.testing.assert_allclose(given.t2m_mean.values, out.t2m_mean.values, rtol=1e-6, equal_nan=True)


def test_a_model_without_a_normaliser_is_refused_never_labelled_as_data(tmp_path, capsys):
    """A model file written before normalisers were saved: ``predict --grid`` prints one
    ``error:`` line naming the missing normaliser and writes nothing (never z-units under
    the grid variable's name); the API says what to pass."""
    model = build_model({**TINY, "dim_x": 2, "dim_y": 1})
    assert model.normaliser is None
    with pytest.raises(BatchError, match="no normaliser.*Normaliser.identity"):
        fields.predict_field(model, scattered(), plane_grid(), progress=False)
    run = tmp_path / "old"
    run.mkdir()
    model.save(run / "model.keras")
    plane_grid().to_netcdf(tmp_path / "grid.nc", engine="h5netcdf")
    scattered().to_csv(tmp_path / "points.csv", index=False)
    err = _error(capsys, ["predict", str(run), "--checkpoint", "model", "--grid", str(tmp_path / "grid.nc"),
                          "--context", str(tmp_path / "points.csv"), "--output", str(tmp_path / "out.nc")])
    assert "model file has no normaliser" in err
    assert not (tmp_path / "out.nc").exists()


@pytest.mark.long  # trains a run (about 30 s on a busy 2-core machine); the fast siblings: the tests above
def test_trained_gridded_run_cli_field_in_raw_units(gridded_run, tmp_path, capsys):
    """``predict RUN --grid`` on a trained gridded-task run: the run's normaliser and inputs."""
    model, task, _ = load_run(str(gridded_run), "best")
    grid, points = era5_grid(tmp_path)
    code = main(["predict", str(gridded_run), "--grid", str(tmp_path / "grid.nc"), "--context",
                 str(tmp_path / "points.csv"), "--output", str(tmp_path / "out.nc"), "--padding", "inf", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # the only message: the 280 K points lie far outside the fixture's N(0, 1) training values
    assert all(line.startswith("warning: context outputs") for line in captured.err.splitlines()), captured.err
    assert "54 cell(s)" in captured.out
    with xr.open_dataset(tmp_path / "out.nc") as out:
        check_gridded_field(out, model, task, grid, points)


def test_cli_predict_grid_with_plot_and_plot_field(gp_model, gp_run, tmp_path, capsys):
    """``predict RUN --grid ... --plot`` writes what ``predict_field`` returns, and the map;
    ``plot-field`` draws the file again; progress goes to stderr (``--quiet``: the long test)."""
    plane_grid().to_netcdf(tmp_path / "grid.nc", engine="h5netcdf")
    scattered().to_csv(tmp_path / "points.csv", index=False)
    argv = ["predict", str(gp_run), "--checkpoint", "model", "--grid", str(tmp_path / "grid.nc"), "--context",
            str(tmp_path / "points.csv"), "--patch", "4", "--padding", "1.5", "--quantiles", "0.1", "0.9"]
    assert main(argv + ["--output", str(tmp_path / "out.nc"), "--plot", str(tmp_path / "map.png")]) == 0
    captured = capsys.readouterr()
    assert "field of 143 cell(s) written" in captured.out and "143/143 cells (100%)" in captured.err
    assert (tmp_path / "map.png").stat().st_size > 0
    expected = fields.predict_field(gp_model, scattered(), plane_grid(), patch=4, padding=1.5, levels=(0.1, 0.9),
                                    progress=False)
    with xr.open_dataset(tmp_path / "out.nc") as out:
        for key in ("z_mean", "z_stddev", "z_quantiles", "z"):
            np.testing.assert_allclose(out[key].values, expected[key].values, rtol=1e-6, equal_nan=True)
        assert out.attrs["taylorformer_padding"] == "1.5,1.5" and out.attrs["taylorformer_patch"] == "4,4"
    assert main(["plot-field", str(tmp_path / "out.nc")]) == 0
    assert (tmp_path / "out.png").stat().st_size > 0


def test_map_puts_longitude_across_with_truth_beside_the_prediction(gp_model, tmp_path):
    """A grid stored (lon, lat): the map still puts longitude on the horizontal axis,
    labels carry names and units, the truth panel comes first and NaN cells are blank."""
    from taylorformer.plotting.fields import plot_field

    grid = plane_grid().rename({"x0": "lon", "x1": "lat"})
    grid.lon.attrs.update(units="degrees_east", long_name="longitude")
    grid.lat.attrs.update(units="degrees_north")
    context = scattered(columns=("lon", "lat"))
    out = fields.predict_field(gp_model, context, grid, padding=np.inf, progress=False)
    fig = plot_field(out)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["truth", "predictive mean", "predictive stddev"]
    assert all(ax.get_xlabel() == "longitude [degrees_east]" and ax.get_ylabel() == "lat [degrees_north]"
               for ax in axes)
    colourbars = [ax.get_ylabel() for ax in fig.axes if not ax.get_title()]
    assert colourbars[0] == "height [m]" and "predictive mean of height [m]" in colourbars
    image = axes[1].collections[0].get_array()  # [lat, lon]: transposed from the stored (lon, lat)
    assert image.shape == (11, 13) and image.mask[0, 0] and image.mask[7, 4] and image.mask.sum() == 3


@pytest.mark.parametrize("east, north, attrs", [
    ("easting", "northing", {}), ("x", "y", {}),
    ("e", "n", {"e": {"standard_name": "projection_x_coordinate"}, "n": {"standard_name": "projection_y_coordinate"}}),
])
def test_map_of_a_projected_grid_puts_easting_across_and_draws_the_stations(gp_model, east, north, attrs):
    """A projected grid stored (easting, northing), in metres far from 0: easting across and
    northing up (read back from the Axes), at most MAX_TICKS x tick labels whose drawn boxes
    do not overlap, and the context points the output records drawn on every map."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PathCollection

    from taylorformer.plotting.fields import MAX_TICKS, plot_field

    grid = plane_grid().rename({"x0": east, "x1": north})
    for name in (east, north):
        grid[name].attrs.update(units="m", **attrs.get(name, {}))
    context = scattered(columns=(east, north))
    out = fields.predict_field(gp_model, context, grid, padding=np.inf, progress=False)
    assert out[f"context_{east}"].dims == ("context",) and out[f"context_{north}"].attrs["units"] == "m"
    assert out["z_quantiles"].attrs["quantile_method"] == "analytic (the predictive's own quantile)"
    metres = {name: out[name] * 1e4 + origin for name, origin in ((east, 4e5), (north, 5.6e6))}
    out = out.assign_coords({**{n: v.assign_attrs(out[n].attrs) for n, v in metres.items()},
                             f"context_{east}": out[f"context_{east}"] * 1e4 + 4e5,
                             f"context_{north}": out[f"context_{north}"] * 1e4 + 5.6e6})
    fig = plot_field(out)
    FigureCanvasAgg(fig).draw()
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == 3
    for ax in panels:
        for limits, coord in ((ax.get_xlim(), metres[east].values), (ax.get_ylim(), metres[north].values)):
            step = coord[1] - coord[0]  # cells are centred on the coordinates: half a cell beyond
            np.testing.assert_allclose(limits, (coord.min() - step / 2, coord.max() + step / 2), rtol=1e-9)
        labels = [t for t in ax.get_xticklabels() if t.get_text() and ax.get_xlim()[0] <= t.get_position()[0]
                  <= ax.get_xlim()[1]]
        assert 2 <= len(labels) <= MAX_TICKS
        boxes = sorted((t.get_window_extent() for t in labels), key=lambda b: b.x0)
        assert all(a.x1 <= b.x0 or a.y1 <= b.y0 for a, b in zip(boxes, boxes[1:])), [t.get_text() for t in labels]
        stations = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert len(stations) == 1
        np.testing.assert_allclose(stations[0].get_offsets(),
                                   np.stack([context[east] * 1e4 + 4e5, context[north] * 1e4 + 5.6e6], 1))
    # given points are drawn where the file records none
    bare = out.drop_vars([f"context_{east}", f"context_{north}"])
    assert not any(isinstance(c, PathCollection) for ax in plot_field(bare).axes for c in ax.collections)
    given = plot_field(bare, context={east: context[east][:7] * 1e4 + 4e5, north: context[north][:7] * 1e4 + 5.6e6})
    assert [len(c.get_offsets()) for ax in given.axes for c in ax.collections if isinstance(c, PathCollection)] \
        == [7, 7, 7]


def test_output_is_written_atomically_and_never_over_its_inputs(gp_model, tmp_path):
    grid_path = tmp_path / "grid.nc"
    plane_grid().to_netcdf(grid_path, engine="h5netcdf")
    with pytest.raises(Exception, match="the file the command reads"):
        fields.predict_field(gp_model, scattered(), str(grid_path), str(grid_path), progress=False)
    with pytest.raises(BatchError, match="netCDF"):
        fields.predict_field(gp_model, scattered(), str(grid_path), str(tmp_path / "out.csv"), progress=False)
    out = fields.predict_field(gp_model, scattered(), str(grid_path), str(tmp_path / "out.nc"), patch=4,
                               progress=False)
    out.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.nc", "out.nc"]  # no temp file left


def _error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_cli_errors_for_bad_grids(gp_run, tmp_path, capsys, monkeypatch):
    scattered().to_csv(tmp_path / "points.csv", index=False)
    base = ["predict", str(gp_run), "--checkpoint", "model", "--context", str(tmp_path / "points.csv"),
            "--output", str(tmp_path / "o.nc")]
    # dims without coordinate values
    xr.Dataset({"z": (("a", "b"), np.zeros((3, 4)))}).to_netcdf(tmp_path / "bare.nc", engine="h5netcdf")
    assert "no coordinate values" in _error(capsys, base + ["--grid", str(tmp_path / "bare.nc")])
    # three dims for a model of two inputs
    three = xr.Dataset({"z": (("x0", "x1", "x2"), np.zeros((2, 3, 4)))},
                       coords={"x0": np.arange(2.0), "x1": np.arange(3.0), "x2": np.arange(4.0)})
    three.to_netcdf(tmp_path / "three.nc", engine="h5netcdf")
    assert "the model takes 2 input" in _error(capsys, base + ["--grid", str(tmp_path / "three.nc")])
    # more cells than the bound
    plane_grid().to_netcdf(tmp_path / "grid.nc", engine="h5netcdf")
    monkeypatch.setattr(fields, "MAX_GRID_CELLS", 100)
    assert "143 cells (13 x 11), more than the 100" in _error(capsys, base + ["--grid", str(tmp_path / "grid.nc")])
    # options that do not go with --grid, or only with it (refused before any work)
    assert "--samples cannot go with --grid" in _error(capsys, base + ["--grid", str(tmp_path / "grid.nc"),
                                                                         "--samples", "3"])
    assert "--padding go with --grid" in _error(capsys, ["predict", str(gp_run), "--input", "x.csv", "--output",
                                                         str(tmp_path / "o.csv"), "--padding", "1"])
    assert "--memory-budget go with --grid" in _error(capsys, ["predict", str(gp_run), "--input", "x.csv",
                                                               "--output", str(tmp_path / "o.csv"),
                                                               "--memory-budget", "1GB"])
    # a memory budget the grid's estimate exceeds (refused before any work, naming the way out)
    monkeypatch.setattr(fields, "MAX_GRID_CELLS", 10**8)
    err = _error(capsys, base + ["--grid", str(tmp_path / "grid.nc"), "--memory-budget", "1kB"])
    assert "more than the 1000 bytes budget" in err and "--memory-budget" in err, err
    assert not (tmp_path / "o.nc").exists()


def test_api_errors_name_the_problem(gp_model, tmp_path):
    grid = plane_grid()
    with pytest.raises(BatchError, match="no coordinate 'lat'"):
        fields.predict_field(gp_model, scattered(), grid, inputs=["lat", "lon"], progress=False)
    pd.DataFrame({"a": [1.0], "z": [2.0]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(BatchError, match="bad.csv: no column 'x0'"):
        fields.predict_field(gp_model, str(tmp_path / "bad.csv"), grid, progress=False)
    with pytest.raises(BatchError, match="no value column 'y'"):
        fields.predict_field(gp_model, scattered(value="height"), grid.drop_vars("z"), progress=False)
    nan_x = scattered()
    nan_x.loc[3, "x1"] = np.nan
    with pytest.raises(BatchError, match="coordinate 'x1' has 1 NaN"):
        fields.predict_field(gp_model, nan_x, grid, progress=False)
    with pytest.raises(BatchError, match="'padding' must be one number or one per input"):
        fields.predict_field(gp_model, scattered(), grid, padding=[1, 2, 3], progress=False)
    with pytest.raises(BatchError, match="'patch' must be one int >= 1 or one per grid dim"):
        fields.predict_field(gp_model, scattered(), grid, patch=[0, 2], progress=False)
    # a coordinates-only grid: every cell predicted, the value column named
    out = fields.predict_field(gp_model, scattered(value="height"), grid.drop_vars("z"), value="height",
                               progress=False)
    assert list(out.data_vars) == ["height_mean", "height_stddev", "height_quantiles"]
    assert not np.isnan(out.height_mean.values).any()
