"""Grids and contexts checked where they enter ``predict_field`` (``predict --grid``): units
converted (pint) against NumPy's arithmetic, or refused naming both; latitudes within +-90
and no radians under a model trained on degrees; duplicated axes and points, infinite or
all-NaN fields refused; longitudes wrapped to the training convention (the predictions
equal those on the grid given in that convention); the size of a grid estimated from its
dims before anything is read (the estimate's output size equals a written file's). An
untrained tiny model: every check is about the inputs, whatever the weights."""
import time

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from taylorformer.errors import BatchError
from taylorformer.models import build_model
from taylorformer.normaliser import Normaliser
from taylorformer.prediction import fields

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}


def normaliser(names=("x0", "x1"), units="K", coordinates=None):
    """Raw inputs, outputs standardised around 280 (scale 7) in ``units``."""
    return Normaliser(np.zeros(2), np.ones(2), np.array([280.0]), np.array([7.0]), list(names), ["t"],
                      [None, None], [units], coordinates=coordinates)


@pytest.fixture(scope="module")
def model():
    return build_model({**TINY, "dim_x": 2, "dim_y": 1})


def plane(values=None, units="K", x0=None, x1=None):
    x0 = np.linspace(-2, 2, 6) if x0 is None else np.asarray(x0, float)
    x1 = np.linspace(-1, 1, 5) if x1 is None else np.asarray(x1, float)
    values = 280 + np.add.outer(np.sin(x0), np.cos(x1)) if values is None else values
    return xr.Dataset({"t": (("x0", "x1"), values, {"units": units} if units else {})},
                      coords={"x0": x0, "x1": x1})


def points(n=12, seed=0, offset=0.0, units=None):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x0": rng.uniform(-2, 2, n), "x1": rng.uniform(-1, 1, n)})
    frame["t"] = 280 + rng.normal(size=n) + offset
    if units:
        frame.attrs["units"] = units
    return frame


def predict(model, context, grid, norm, **options):
    return fields.predict_field(model, context, grid, normaliser=norm, padding=np.inf, progress=False, **options)


# ----------------------------------------------------------------------------- units
def test_unit_conversions_equal_the_arithmetic_and_refuse_what_has_none():
    x = np.array([250.77, 273.15, 300.1, 1e-3])
    np.testing.assert_array_equal(fields.convert_units(x, "K", "degC", "f"), x - 273.15)
    np.testing.assert_array_equal(fields.convert_units(x, "degree_C", "K", "f"), x + 273.15)
    np.testing.assert_allclose(fields.convert_units(x, "degC", "degF", "f"), x * 9 / 5 + 32, rtol=1e-14)
    np.testing.assert_allclose(fields.convert_units(x, "m s-1", "km h-1", "f"), x * 3.6, rtol=1e-14)
    np.testing.assert_array_equal(fields.convert_units(x, "K", None, "f"), x)  # unknown: as they are
    with pytest.raises(BatchError, match=r"grid g.nc: its units 'm' cannot be converted to 'K'.*different things"):
        fields.convert_units(x, "m", "K", "grid g.nc")
    with pytest.raises(BatchError, match="'furlong_fortnights' cannot be converted to 'K'"):
        fields.convert_units(x, "furlong_fortnights", "K", "grid g.nc")


def test_grid_and_context_in_other_units_are_converted_and_labelled(model):
    """A model trained in kelvin: a grid in degC with a context in degF gives the kelvin
    predictions minus 273.15, labelled degC; an inconvertible grid is refused."""
    norm, grid, context = normaliser(), plane(), points()
    kelvin = predict(model, context, grid, norm)
    assert kelvin.t_mean.attrs["units"] == "K" and "taylorformer_units" not in kelvin.attrs
    celsius_grid = plane(grid.t.values - 273.15, "degC")
    fahrenheit = points(offset=0.0)
    fahrenheit["t"] = (fahrenheit["t"] - 273.15) * 9 / 5 + 32
    fahrenheit.attrs["units"] = "degF"
    out = predict(model, fahrenheit, celsius_grid, norm)
    np.testing.assert_allclose(out.t_mean.values, kelvin.t_mean.values - 273.15, atol=1e-4)
    np.testing.assert_allclose(out.t_stddev.values, kelvin.t_stddev.values, rtol=1e-5)
    np.testing.assert_allclose(out.t_quantiles.values, kelvin.t_quantiles.values - 273.15, atol=1e-4)
    np.testing.assert_array_equal(out.t.values, celsius_grid.t.values.astype(np.float32))  # the truth as given
    assert out.t_mean.attrs["units"] == "degC" and "written in 'degC'" in out.attrs["taylorformer_units"]
    assert "from 'degF' to 'degC'" in out.attrs["taylorformer_context_units"]
    # a context without units is in the model's: said, and converted to the grid's
    with pytest.warns(UserWarning, match="gives no units.*'K'.*'degC'"):
        same = predict(model, context, celsius_grid, norm)
    np.testing.assert_allclose(same.t_mean.values, out.t_mean.values, atol=1e-4)
    with pytest.raises(BatchError, match=r"grid the given grid Dataset \(variable 't'\): its units 'm' cannot be "
                                         r"converted to 'K'"):
        predict(model, context, plane(units="m"), norm)


# ----------------------------------------------------------------------------- coordinates
def geo_grid(lat, lon, attrs=None, values=None):
    attrs = attrs or {}
    shape = (len(lat), len(lon))
    values = 280 + np.zeros(shape) if values is None else values
    return xr.Dataset({"t": (("lat", "lon"), values, {"units": "K"})},
                      coords={"lat": ("lat", np.asarray(lat, float), attrs.get("lat", {})),
                              "lon": ("lon", np.asarray(lon, float), attrs.get("lon", {}))})


def geo_points(lat, lon, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"lat": np.asarray(lat, float), "lon": np.asarray(lon, float),
                         "t": 280 + rng.normal(size=len(lat))})


GEO = dict(names=("lat", "lon"), coordinates={"span": [60.0, 120.0]})


def test_latitudes_beyond_90_and_radians_are_refused(model):
    norm = normaliser(**GEO)
    context = geo_points([30, 40, 50], [100, 120, 150])
    with pytest.raises(BatchError, match=r"grid the given grid Dataset: latitude .* -100 \.\. 300"):
        predict(model, context, geo_grid(np.linspace(-100, 300, 5), [100, 130]), norm)
    with pytest.raises(BatchError, match="context: latitude .* 30 .. 120"):
        predict(model, geo_points([30, 120, 50], [100, 120, 150]), geo_grid([30, 60], [100, 130]), norm)
    lat, lon = np.radians([30.0, 40.0, 50.0]), np.radians([100.0, 120.0, 150.0])
    rad_context = geo_points(lat, lon)
    with pytest.raises(BatchError, match="look like radians.*spans of 60, 120.*numpy.degrees"):
        predict(model, rad_context, geo_grid(lat, lon), norm)
    with pytest.raises(BatchError, match="latitude coordinate is in radians"):
        predict(model, rad_context, geo_grid(lat, lon, {"lat": {"units": "radians"}}), norm)
    # a grid in degrees: a context in radians lies nowhere near it
    with pytest.raises(BatchError, match="context: the coordinates .* look like radians"):
        predict(model, rad_context, geo_grid([30, 45, 60], [100, 130]), norm)
    # the same small box labelled degrees is taken as degrees; so is any box without a training span
    degrees = {"lat": {"units": "degrees_north"}, "lon": {"units": "degrees_east"}}
    assert predict(model, rad_context, geo_grid(lat, lon, degrees), norm).t_mean.notnull().all()
    assert predict(model, rad_context, geo_grid(lat, lon), normaliser(names=("lat", "lon"))).t_mean.notnull().all()


def test_duplicates_and_bad_cells_are_refused(model):
    norm = normaliser()
    with pytest.raises(BatchError, match="coordinate 'x1' holds 1 value.* more than once .first 0."):
        predict(model, points(), plane(x1=[-1, 0, 0, 0.5, 1]), norm)
    twice = points()
    twice.loc[7, ["x0", "x1"]] = twice.loc[2, ["x0", "x1"]]
    with pytest.raises(BatchError, match="the context DataFrame: 1 duplicated point.*points 2 and 7"):
        predict(model, twice, plane(), norm)
    values = plane().t.values.copy()
    values[3, 2] = np.inf
    with pytest.raises(BatchError, match=r"infinite or huge value inf at \{'x0': 3, 'x1': 2\}"):
        predict(model, points(), plane(values), norm)
    values[3, 2] = 1e30
    with pytest.raises(BatchError, match="infinite or huge value 1e\\+30"):
        predict(model, points(), plane(values), norm)
    with pytest.raises(BatchError, match="every cell of 't' is NaN"):
        predict(model, points(), plane(np.full((6, 5), np.nan)), norm)


def test_a_header_only_context_says_it_has_no_rows(model, tmp_path):
    pd.DataFrame(columns=["x0", "x1", "t"]).to_csv(tmp_path / "empty.csv", index=False)
    with pytest.raises(BatchError, match="empty.csv has no rows"):
        predict(model, str(tmp_path / "empty.csv"), plane(), normaliser())


def test_longitudes_are_wrapped_to_the_training_convention(model):
    """A model trained on longitudes 0 .. 350: a grid and a context given in -180 .. 180
    predict what the same places given in 0 .. 360 do; the file keeps the grid's own
    longitudes and says what was wrapped. Without a recorded extent, the grid's
    convention: the context is wrapped to it."""
    norm = normaliser(names=("lat", "lon"), coordinates={"span": [60.0, 350.0], "extent": [[-30, 30], [0, 350]]})
    lat, lon = np.array([-20.0, 0.0, 20.0]), np.arange(-170.0, 180.0, 40.0)
    east = np.mod(lon, 360)
    order = np.argsort(east)
    values = 280 + np.add.outer(np.cos(np.radians(lat)), np.sin(np.radians(lon)))
    context = geo_points([-10, 5, 15, 25], [-150, -30, 10, 170])
    context_east = context.assign(lon=np.mod(context.lon, 360))
    given = predict(model, context, geo_grid(lat, lon, values=values), norm)
    reference = predict(model, context_east, geo_grid(lat, east[order], values=values[:, order]), norm)
    np.testing.assert_allclose(given.t_mean.values[:, order], reference.t_mean.values, rtol=1e-6)
    np.testing.assert_allclose(given.t_stddev.values[:, order], reference.t_stddev.values, rtol=1e-6)
    np.testing.assert_array_equal(given.lon.values, lon)
    note = given.attrs["taylorformer_longitude_wrapped"]
    assert "[0, 360]" in note and "training data" in note and "5 grid value(s), 2 context point(s)" in note
    assert "taylorformer_longitude_wrapped" not in reference.attrs
    # no recorded extent: the context follows the grid's -180 .. 180
    plain = normaliser(names=("lat", "lon"), coordinates={"span": [60.0, 350.0]})
    own = predict(model, context_east, geo_grid(lat, lon, values=values), plain)
    np.testing.assert_allclose(own.t_mean.values, predict(model, context, geo_grid(lat, lon, values=values),
                                                          plain).t_mean.values, rtol=1e-6)
    assert "the grid's convention" in own.attrs["taylorformer_longitude_wrapped"]
    # the context points the file records (drawn on the grid's map) are in the grid's convention
    np.testing.assert_allclose(own.context_lon.values, context.lon.values)
    np.testing.assert_allclose(given.context_lon.values, context.lon.values)


# ----------------------------------------------------------------------------- size
def test_a_huge_grid_is_refused_from_its_dims_before_any_work(model, tmp_path):
    """20000 x 20000 coordinates (a small file): refused in well under a second, with the
    cells, the output size and the way out; nothing of the grid is allocated."""
    n = 20000
    xr.Dataset(coords={"x0": np.linspace(-2, 2, n), "x1": np.linspace(-2, 2, n)}).to_netcdf(
        tmp_path / "huge.nc", engine="h5netcdf")
    start = time.perf_counter()
    with pytest.raises(BatchError, match=r"huge.nc has 400000000 cells \(20000 x 20000\), more than the 100000000.*"
                                         r"8.94 GiB of output.*predict a region at a time.*--patch"):
        predict(model, points(), str(tmp_path / "huge.nc"), normaliser())
    assert time.perf_counter() - start < 1.0


def test_the_estimate_is_the_written_file_and_the_memory_budget_is_kept(model, tmp_path):
    norm, grid = normaliser(), plane()
    out = predict(model, points(), grid, norm, output=str(tmp_path / "out.nc"))
    written = sum(out[v].size * out[v].dtype.itemsize for v in ("t", "t_mean", "t_stddev", "t_quantiles"))
    out.close()
    estimate = fields.estimate_grid(grid.t.shape, levels=fields.DEFAULT_LEVELS)
    assert estimate.cells == 30 and estimate.output_bytes == written
    assert estimate.seconds == pytest.approx(30 / fields.CELLS_PER_SECOND)
    in_memory = fields.estimate_grid(grid.t.shape, in_memory=True)
    assert in_memory.memory_bytes == estimate.memory_bytes + written
    with pytest.raises(BatchError, match="needs about .* of memory, more than the 1000 bytes budget.*--patch"):
        predict(model, points(), grid, norm, memory_budget=1000)


def test_a_grid_is_read_by_the_training_input_names_whatever_its_dim_order(model):
    """A model trained on inputs named ``x``, ``y``: a grid stored ``(y, x)`` gives the same
    predictions as the same grid stored ``(x, y)`` (transposed), never swapped inputs; a
    grid without those coordinates is refused naming them."""
    norm, context = normaliser(names=("x", "y")), points().rename(columns={"x0": "x", "x1": "y"})
    grid = plane().rename({"x0": "x", "x1": "y"})
    by_xy = predict(model, context, grid, norm)
    by_yx = predict(model, context, grid.transpose("y", "x"), norm)
    np.testing.assert_allclose(by_yx.t_mean.transpose("x", "y").values, by_xy.t_mean.values, rtol=1e-5)
    with pytest.raises(BatchError, match="x"):
        predict(model, points(), plane(), norm)
