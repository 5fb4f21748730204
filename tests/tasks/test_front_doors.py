"""The data front doors under generated and hostile input (issue 37, items 4, 5, 7; issue 50:
time zones and booleans).

Property: every generated input to ``from_arrays`` / ``from_dataframe`` / ``from_xarray``
ends in a correct task (checked against NumPy: standardised values finite and mapping
back to the input, dates and time zones surviving, the input objects untouched) or in a
:class:`~taylorformer.errors.TaskError` naming the problem; a valid input is never
refused. No model is trained here.
"""
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taylorformer.errors import TaskError
from taylorformer.tasks import from_arrays, from_dataframe, from_xarray
from taylorformer.tasks.image import ImageTask, default_counts
from taylorformer.task import make_task

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: magnitudes a column is scaled to: tiny, ordinary, large, and beyond what standardising survives
SCALES = [1e-300, 1e-8, 1.0, 1e8, 1e150, 1e200, 1e307]
MODEST = (1e-100, 1e100)  # columns scaled inside this range must be accepted


def _back(scaled, mean, std):
    return np.asarray(scaled, np.float64) * std + mean


def _close(back, raw, std):
    """``back`` equals ``raw`` to float32 resolution of the standardised value."""
    ok = np.isnan(raw) | (np.abs(back - raw) <= 1e-5 * (np.abs(raw - np.nanmean(raw, 0)) + std))
    return bool(ok.all())


@st.composite
def point_arrays(draw):
    n, dx, dy = draw(st.integers(12, 40)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.normal(size=(n, dx)) * np.array([draw(st.sampled_from(SCALES)) for _ in range(dx)])
    y = rng.normal(size=(n, dy)) * np.array([draw(st.sampled_from(SCALES)) for _ in range(dy)])
    defect = draw(st.sampled_from(["none", "nan_y", "nan_x", "inf", "huge", "complex", "datetime",
                                   "timedelta", "text", "constant", "int"]))
    i, j = draw(st.integers(0, n - 1)), 0
    if defect == "nan_y":
        y[i, j] = np.nan
    elif defect == "nan_x":
        x[i, j] = np.nan
    elif defect == "inf":
        (x if draw(st.booleans()) else y)[i, j] = draw(st.sampled_from([np.inf, -np.inf]))
    elif defect == "huge":
        (x if draw(st.booleans()) else y)[i, j] = draw(st.sampled_from([1.7e308, -1e300, 9e307]))
    elif defect == "complex":
        x = x + 1j
    elif defect == "datetime":
        x = np.datetime64("2020-01-01") + np.arange(n * dx).reshape(n, dx).astype("timedelta64[h]")
    elif defect == "timedelta":
        y = np.arange(n * dy).reshape(n, dy).astype("timedelta64[m]")
    elif defect == "text":
        y = y.astype(str)
    elif defect == "constant":
        x[:, 0] = draw(st.sampled_from([3.0, 1e20]))
    elif defect == "int":
        x = (x * 1000).astype(np.int64) if np.all(np.abs(x) < 1e15) else x
    return x, y, defect


@SETTINGS
@given(point_arrays())
def test_from_arrays_gives_finite_standardised_values_that_map_back_or_a_task_error(case):
    x, y, defect = case
    x_copy, y_copy = x.copy(), y.copy()
    try:
        task = from_arrays(x, y, num_context=(1, 3), num_target=(1, 3), split=(0.5, 0.25, 0.25))
    except TaskError as exc:
        assert "from_arrays" in str(exc)
        clean = defect in ("none", "nan_y", "int") and all(
            (MODEST[0] <= np.nanmax(np.abs(a), 0)).all() and (np.nanmax(np.abs(a), 0) <= MODEST[1]).all()
            for a in (x.astype(float), y.astype(float)))
        assert not clean, f"a valid input was refused: {exc}"
    else:
        assert defect not in ("nan_x", "inf", "complex", "datetime", "timedelta", "text")
        assert np.isfinite(task.x).all() and not np.isinf(task.y).any()
        assert np.array_equal(np.isnan(task.y), np.isnan(task.y_raw))  # NaN (missing) stays NaN
        assert _close(_back(task.x, task.x_mean, task.x_std), task.x_raw, task.x_std)
        assert _close(task.to_original_units(task.y), task.y_raw, task.std)
        assert np.isfinite(task.to_original_units(task.y)[~np.isnan(task.y)]).all()
    np.testing.assert_array_equal(x, x_copy)  # the caller's arrays are not modified
    np.testing.assert_array_equal(y, y_copy)


@st.composite
def frames(draw):
    n = draw(st.integers(60, 90))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    zone = draw(st.sampled_from([None, "UTC", "Europe/Berlin", "America/New_York"]))
    dates = pd.date_range("2021-03-27", periods=n, freq="h", tz=zone)  # across a DST change
    values = rng.normal(size=n) * draw(st.sampled_from(SCALES))
    defect = draw(st.sampled_from(["none", "offset_strings", "duplicate_dates", "garbage_date",
                                   "unsorted", "duplicate_columns", "datetime_target",
                                   "timedelta_target", "complex_target", "text_target"]))
    frame = pd.DataFrame({"load": values, "other": rng.normal(size=n)})
    date_column = None
    if defect == "offset_strings":
        frame["when"], date_column = [d.isoformat() for d in dates], "when"
    else:
        frame.index = dates
    if defect == "duplicate_dates":
        frame.index = dates.where(np.arange(n) != 5, dates[4])
    elif defect == "garbage_date":
        frame["when"] = [str(d) for d in dates]
        row = frame.index[draw(st.integers(0, n - 1))]
        frame.loc[row, "when"] = draw(st.sampled_from(["garbage", "", "2021-13-45"]))
        date_column = "when"
    elif defect == "unsorted":
        frame = frame.iloc[::-1]
    elif defect == "duplicate_columns":
        frame.columns = ["load", "load"]
    elif defect == "datetime_target":
        frame["load"] = dates
    elif defect == "timedelta_target":
        frame["load"] = pd.to_timedelta(np.arange(n), unit="m")
    elif defect == "complex_target":
        frame["load"] = values + 1j
    elif defect == "text_target":
        frame["load"] = values.astype(str)  # numbers as text are read as numbers
    return frame, date_column, zone, defect


@SETTINGS
@given(frames())
def test_from_dataframe_keeps_dates_and_zone_or_gives_a_task_error(case):
    frame, date_column, zone, defect = case
    before = frame.copy(deep=True)
    try:
        task = from_dataframe(frame, "load", date_column=date_column, context_length=4, horizon=2)
    except TaskError as exc:
        assert "DataFrame" in str(exc)
        scale = np.nanmax(np.abs(pd.to_numeric(frame.iloc[:, 0], errors="coerce"))) \
            if frame.iloc[:, 0].dtype.kind in "fiO" else np.nan
        assert not (defect in ("none", "offset_strings", "text_target") and MODEST[0] <= scale <= MODEST[1]), \
            f"a valid input was refused: {exc}"
    else:
        assert defect in ("none", "offset_strings", "text_target")
        dates = task.series()["dates"]
        expected = frame.index if date_column is None else pd.DatetimeIndex(
            pd.to_datetime(frame[date_column], utc=zone is not None))
        assert (pd.DatetimeIndex(dates).tz is None) == (zone is None)  # the zone is kept
        assert (pd.DatetimeIndex(dates) == expected).all()  # the same instants
        raw = pd.to_numeric(frame["load"]).to_numpy()
        np.testing.assert_allclose(task.series()["y"][:, 0], raw)
        assert np.isfinite(task.scaled).all()
        assert _close(task.to_original_units(task.scaled)[:, 0], raw, task.std[0])
    pd.testing.assert_frame_equal(frame, before)


def test_tz_aware_forecast_frame_keeps_the_zone_and_calendar_uses_local_time():
    dates = pd.date_range("2021-03-27", periods=80, freq="h", tz="Europe/Berlin")
    frame = pd.DataFrame({"load": np.sin(np.arange(80.0))}, index=dates)
    task = from_dataframe(frame, "load", context_length=4, horizon=2, calendar_features=["hour"])
    assert task.timezone == "Europe/Berlin"
    hour = task.features[:, 0:2]  # sin, cos of 2 pi hour / 24 in local time
    np.testing.assert_allclose(hour[:, 0], np.sin(2 * np.pi * dates.hour / 24), atol=1e-6)
    window = task.window(10)
    assert window["dates"].tz is not None and (window["dates"] == dates[10:16]).all()
    from taylorformer.models import build_model

    model = build_model({"preset": "tnp-d", "dim_x": task.dim_x, "dim_y": 1, "head": {"width": 8},
                         "encoder": {"layers": 1, "width": 8, "num_heads": 1, "head_dim": 8}})
    forecast = task.forecast_frame(model, 30, num_samples=3)
    assert str(forecast.index.tz) == "Europe/Berlin" and (forecast.index == dates[34:36]).all()


def test_mixed_offsets_are_converted_to_utc():
    strings = ["2021-03-28T00:00:00+01:00", "2021-03-28T01:00:00+01:00", "2021-03-28T03:00:00+02:00"]
    frame = pd.DataFrame({"when": strings * 1, "load": [1.0, 2.0, 4.0]})
    frame = pd.concat([frame] + [frame.assign(when=pd.to_datetime(frame["when"], utc=True)
                                              + pd.Timedelta(hours=3 * k)).astype({"when": str})
                                 for k in range(1, 20)], ignore_index=True)
    frame["load"] = np.arange(len(frame), dtype=float) ** 1.5
    task = from_dataframe(frame, "load", date_column="when", context_length=3, horizon=2)
    assert task.timezone == "UTC"
    assert pd.DatetimeIndex(task.series()["dates"])[2] == pd.Timestamp("2021-03-28T01:00:00Z")


@st.composite
def fields(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    values = rng.normal(size=(12, 3, 4)) * draw(st.sampled_from(SCALES))
    defect = draw(st.sampled_from(["none", "nan", "inf", "text", "complex", "bool", "huge"]))
    if defect == "nan":
        values[draw(st.integers(0, 11)), 1, 2] = np.nan
    elif defect == "inf":
        values[3, 0, 0] = np.inf
    elif defect == "huge":
        values[draw(st.integers(0, 11)), 0, 1] = 1.7e308
    elif defect == "text":
        values = values.astype(str)
    elif defect == "complex":
        values = values + 1j
    elif defect == "bool":
        values = values > 0
    data = xr.Dataset({"t2m": (("time", "lat", "lon"), values)},
                      coords={"time": pd.date_range("2000", periods=12, freq="D"),
                              "lat": [10.0, 20.0, 30.0], "lon": [0.0, 5.0, 10.0, 15.0]})
    return data, defect


@SETTINGS
@given(fields())
def test_from_xarray_gives_finite_statistics_or_a_task_error(case):
    data, defect = case
    before = data.copy(deep=True)
    try:
        task = from_xarray(data, num_context=[1, 4], num_target=[1, 4], window_length=1)
    except TaskError as exc:
        assert "t2m" in str(exc) or "variable" in str(exc)
        scale = np.nanmax(np.abs(data["t2m"].values)) if data["t2m"].dtype.kind == "f" else np.nan
        assert not (defect in ("none", "nan") and MODEST[0] <= scale <= MODEST[1]), f"refused: {exc}"
    else:
        assert defect in ("none", "nan", "huge")
        values = data["t2m"].values[:task.split_bounds["train"][1]]
        np.testing.assert_allclose(task.mean, np.nanmean(values), rtol=1e-9, atol=1e-12 * task.std)
        np.testing.assert_allclose(task.std, np.nanstd(values), rtol=1e-9)
        batch = task.sample(np.random.default_rng(0), 3, "test")
        assert np.isfinite(batch["xc"]).all() and not np.isinf(batch["yc"]).any()
    xr.testing.assert_identical(data, before)


def test_a_netcdf_text_variable_is_a_task_error_naming_the_file(tmp_path):
    path = tmp_path / "labels.nc"
    xr.Dataset({"s": (("time", "y", "x"), np.full((10, 4, 4), "ab"))}).to_netcdf(path)
    data = path.read_bytes()
    with pytest.raises(TaskError, match=r"variable 's' of .*labels.nc.* holds text"):
        from_xarray(str(path))
    assert path.read_bytes() == data


def test_from_arrays_large_values_named_not_silently_zeroed():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 1)), rng.normal(size=(50, 1))
    with pytest.raises(TaskError, match=r"column 0 of x overflows float64"):
        from_arrays(x * 1e300, y)  # a float32 standardised value times the std would overflow
    with pytest.raises(TaskError, match=r"from_arrays: y"), np.errstate(over="ignore"):
        from_arrays(x, y * 9e307)  # the largest products are inf, the rest overflow the mean
    with pytest.raises(TaskError, match=r"column 0 of y overflows float64"):
        from_arrays(x, np.clip(y, -1.5, 1.5) * 9e307)
    with pytest.raises(TaskError, match=r"x holds complex numbers"):
        from_arrays(x + 1j, y)
    with pytest.raises(TaskError, match=r"dates has 1 missing or unparseable entries, the first 'soon' at row 3"):
        from_arrays(y=y[:, 0], dates=[str(d) for d in pd.date_range("2020", periods=3)] + ["soon"]
                    + [str(d) for d in pd.date_range("2021", periods=46)], context_length=3, horizon=2)
    for scale in (1e200, 1e-300):  # large or tiny but representable: standardised exactly, not to 0
        task = from_arrays(x * scale, y)
        train = np.concatenate(task.groups["train"])
        np.testing.assert_allclose(task.x[:, 0], (x[:, 0] - x[train, 0].mean()) / x[train, 0].std(), atol=1e-5)


# ----------------------------------------------------------------------------- issue 50: zones, booleans
def _series_config(**config):
    return {"context_length": 3, "horizon": 2, **config}


@SETTINGS
@given(n=st.integers(40, 60), data=st.data())
def test_dates_with_and_without_a_zone_are_refused_by_every_reader(tmp_path_factory, n, data):
    """One date of the other kind (naive among zoned, or zoned among naive), anywhere, as
    text or datetime objects, in a DataFrame's index or date column, a CSV file's date
    column or from_arrays' dates: a TaskError naming the column and the object or file."""
    odd = data.draw(st.integers(0, n - 1))
    zoned_majority = data.draw(st.booleans())
    naive = pd.date_range("2021-01-01", periods=n, freq="h")
    stamps = [d.tz_localize("UTC") if (i != odd) == zoned_majority else d for i, d in enumerate(naive)]
    reader = data.draw(st.sampled_from(["index", "date_column", "csv_file", "from_arrays"]))
    as_text = reader != "index" and data.draw(st.booleans())  # an index of text holds no dates
    dates = [d.isoformat() for d in stamps] if as_text else stamps
    frame = pd.DataFrame({"load": np.sin(np.arange(n, dtype=float))})
    if reader == "index":
        frame.index = pd.Index(dates, dtype=object)
        call, words = lambda: from_dataframe(frame, "load", **_series_config()), ["the index", "DataFrame"]
    elif reader == "date_column":
        frame["when"] = pd.Series(dates, dtype=object)
        call = lambda: from_dataframe(frame, "load", date_column="when", **_series_config())  # noqa: E731
        words = ["date column 'when'", "DataFrame"]
    elif reader == "csv_file":
        path = tmp_path_factory.mktemp("zones") / "series.csv"
        frame.assign(when=[str(d) for d in stamps]).to_csv(path, index=False)
        call = lambda: make_task("csv", _series_config(path=str(path), target_columns="load",  # noqa: E731
                                                       date_column="when"))
        words = ["date column 'when'", str(path)]
    else:
        call = lambda: from_arrays(y=frame["load"].to_numpy(), dates=np.asarray(dates, object),  # noqa: E731
                                   **_series_config())
        words = ["from_arrays: dates"]
    with pytest.raises(TaskError, match="mixes dates without a time zone") as err:
        call()
    assert all(word in str(err.value) for word in words), (words, str(err.value))


def test_dates_with_one_kind_of_zone_are_still_read():
    paris = pd.date_range("2021-03-27", periods=40, freq="h", tz="Europe/Paris")
    frame = pd.DataFrame({"load": np.sin(np.arange(40.0))},
                         index=pd.Index([d if i % 2 else d.tz_convert("UTC") for i, d in enumerate(paris)],
                                        dtype=object))  # two zones: an object index, read as UTC
    task = from_dataframe(frame, "load", **_series_config())
    assert task.timezone == "UTC" and (pd.DatetimeIndex(task.series()["dates"]) == paris).all()
    naive = from_arrays(y=np.arange(40.0) ** 1.5, dates=paris.tz_localize(None).to_numpy(), **_series_config())
    assert naive.timezone is None


def _stations_file(folder, **columns):
    folder.mkdir(exist_ok=True)
    n = 24
    frame = pd.DataFrame({"station": "A", "when": [str(d) for d in pd.date_range("2021", periods=n, freq="h")],
                          "PM10": np.arange(n, dtype=float), **columns})
    frame.to_csv(folder / "a.csv", index=False)
    return folder / "a.csv"


def _stations(path):
    return make_task("stations", {"path": str(path), "target_columns": "PM10", "time_columns": ["when"], "calendar": ["hour"],
                                  "coordinates": {"A": [40.0, 116.0]}, "num_context": 3, "num_target": 1})


def test_a_stations_file_mixing_zones_is_refused_naming_it(tmp_path):
    when = [str(d) for d in pd.date_range("2021", periods=24, freq="h")]
    when[5] += "+00:00"
    path = _stations_file(tmp_path / "mixed", when=when)
    with pytest.raises(TaskError, match=r"time column 'when' of data file .*a\.csv.* mixes dates"):
        _stations(path)


@pytest.mark.parametrize("reader", ["dataframe", "dataframe_objects", "csv_file", "stations_file",
                                    "array_series", "array_points", "xarray", "netcdf_file"])
def test_boolean_targets_are_refused_by_every_reader(tmp_path, reader):
    """True/False as a target is never taken as 0/1 silently: a TaskError naming the column
    (or variable) and the object or file, the same words from every reader."""
    n = 40
    flags = np.arange(n) % 3 == 0
    frame = pd.DataFrame({"load": flags, "other": np.arange(n, dtype=float)},
                         index=pd.date_range("2021", periods=n, freq="D"))
    if reader == "dataframe":
        call, words = lambda: from_dataframe(frame, "load", **_series_config()), ["'load'", "DataFrame"]
    elif reader == "dataframe_objects":  # True among numbers (an object column)
        frame["load"] = pd.Series([True] + list(np.arange(1.0, n)), index=frame.index, dtype=object)
        call, words = lambda: from_dataframe(frame, "load", **_series_config()), ["'load'", "DataFrame"]
    elif reader == "csv_file":
        frame.to_csv(tmp_path / "s.csv", index_label="date")
        call = lambda: make_task("csv", _series_config(path=str(tmp_path / "s.csv"),  # noqa: E731
                                                       target_columns="load", date_column="date"))
        words = ["'load'", str(tmp_path / "s.csv")]
    elif reader == "stations_file":
        path = _stations_file(tmp_path / "st", PM10=flags[:24])
        call, words = lambda: _stations(path), ["'PM10'", str(path)]
    elif reader == "array_series":
        call, words = lambda: from_arrays(y=flags, **_series_config()), ["from_arrays: y"]
    elif reader == "array_points":
        call, words = lambda: from_arrays(np.arange(n, dtype=float), list(flags)), ["from_arrays: y"]
    else:
        data = xr.Dataset({"wet": (("time", "lat", "lon"), np.random.default_rng(0).random((12, 3, 4)) > 0.5)},
                          coords={"time": pd.date_range("2000", periods=12, freq="D"),
                                  "lat": [10.0, 20.0, 30.0], "lon": [0.0, 5.0, 10.0, 15.0]})
        words = ["variable 'wet'"]
        if reader == "netcdf_file":
            data.to_netcdf(tmp_path / "wet.nc")
            data, words = str(tmp_path / "wet.nc"), words + [str(tmp_path / "wet.nc")]
        call = lambda: from_xarray(data, num_context=[1, 4], num_target=[1, 4], window_length=1)  # noqa: E731
    with pytest.raises(TaskError, match=r"holds booleans \(True/False\), not real numbers") as err:
        call()
    assert all(word in str(err.value) for word in words), (words, str(err.value))


def test_the_same_data_as_numbers_is_read():
    n = 40
    frame = pd.DataFrame({"load": (np.arange(n) % 3 == 0).astype(float) + np.arange(n) / 100},
                         index=pd.date_range("2021", periods=n, freq="D"))
    task = from_dataframe(frame, "load", **_series_config())
    np.testing.assert_allclose(task.series()["y"][:, 0], frame["load"])


# ----------------------------------------------------------------------------- images
@given(st.integers(4, 200_000))
@settings(max_examples=60, deadline=None)
def test_default_pixel_counts_fit_every_canvas_and_are_the_papers_from_28x28(n):
    (c_lo, c_hi), (t_lo, t_hi) = default_counts(n)
    assert 0 <= c_lo <= c_hi and 1 <= t_lo <= t_hi and c_hi + t_hi <= n
    if n >= 784:
        assert ((c_lo, c_hi), (t_lo, t_hi)) == ((6, 200), (3, 197))


def test_small_image_folder_uses_scaled_defaults(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(10):
        Image.fromarray((rng.random((18, 18)) * 255).astype(np.uint8)).save(tmp_path / f"{i}.png")
    task = ImageTask(source=str(tmp_path))
    assert task.num_context == (6, 82) and task.num_target == (3, 81)  # floor(324 * 200 / 784) ...
    batch = task.sample(np.random.default_rng(0), 2, "train")
    assert batch["xc"].shape == (2, 82, 2) and batch["xt"].shape == (2, 81, 2)


def _png_header_only(path, width, height):
    """A grey PNG whose header claims ``width x height`` pixels, with a few bytes of data."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("side", [60_000, 5_000])  # over Pillow's bomb limit; under it but over MAX_SIDE
def test_decompression_bomb_png_is_refused_from_its_header(tmp_path, side):
    _png_header_only(tmp_path / "bomb.png", side, side)
    data = (tmp_path / "bomb.png").read_bytes()
    with pytest.raises(TaskError, match=r"image file .*bomb.png"):
        ImageTask(source=str(tmp_path))
    assert (tmp_path / "bomb.png").read_bytes() == data
