"""CSV forecasting task (tasks/csv_series.py) against independent computations."""
import hashlib
import inspect
import json
import subprocess

import numpy as np
import pandas as pd
import pytest

from taylorformer import registry
from taylorformer.errors import SpecError, TaskError
from taylorformer.task import make_task
from taylorformer.tasks import datasets
from taylorformer.tasks.csv_series import CSVSeriesTask, DataFileNotFoundError


def write_csv(tmp_path, n=100, name="series.csv", **columns):
    """CSV with an hourly ``date`` column, ``y = t`` and ``z = 10 t^2 + 3``, plus ``columns``."""
    t = np.arange(n)
    df = pd.DataFrame({"date": pd.date_range("2020-01-01", periods=n, freq="h"),
                       "y": t.astype(float), "z": 10.0 * t**2 + 3.0, **columns})
    path = tmp_path / name
    df.to_csv(path, index=False)
    return path


def make(path, **kw):
    opts = {"target_columns": "y", "date_column": "date", "split": (0.6, 0.2, 0.2),
            "context_length": 5, "horizon": 3, "lead_input": False}  # the lead input: test_csv_lead_input.py
    return make_task("csv", {"path": str(path), **opts, **kw})


def collect(ds):
    batches = [{k: v.numpy() for k, v in b.items()} for b in ds]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_registry_lists_csv_tasks():
    names = registry.names("task")
    assert {"csv", "ett", "exchange-rate"} <= set(names)
    for name in ("csv", "ett", "exchange-rate"):
        assert registry.entry("task", name).description


def test_split_boundaries_are_chronological_floor_of_ratios(tmp_path):
    # 0.69 + 0.11 == 0.7999999999999999 in floats: the val/test cut must still be row 80
    task = make(write_csv(tmp_path, n=100), split=(0.69, 0.11, 0.20))
    assert task.split_bounds == {"train": (0, 69), "val": (69, 80), "test": (80, 100)}
    task = make(write_csv(tmp_path, n=1001), split=(0.7, 0.1, 0.2))
    assert task.split_bounds == {"train": (0, 700), "val": (700, 800), "test": (800, 1001)}


def test_standardisation_uses_training_rows_only(tmp_path):
    task = make(write_csv(tmp_path, n=100), target_columns=["y", "z"])
    t = np.arange(60.0)  # training rows 0..59
    for j, col in enumerate([t, 10 * t**2 + 3]):
        mean = col.sum() / len(col)
        std = np.sqrt(((col - mean) ** 2).sum() / len(col))
        assert task.mean[j] == pytest.approx(mean, rel=1e-12)
        assert task.std[j] == pytest.approx(std, rel=1e-12)
    assert task.dim_y == 2
    full = np.arange(100.0)
    np.testing.assert_allclose(task.scaled[:, 0], (full - 29.5) / np.sqrt((t - 29.5).var()), rtol=1e-6)


def test_windows_hold_exactly_the_right_rows_and_rescaled_x(tmp_path):
    task = make(write_csv(tmp_path, n=100), target_columns=["y", "z"])
    c, h = 5, 3
    for split in ("train", "test"):
        b = next(iter(task.dataset(split, batch_size=6, seed=4)))
        assert b["xc"].shape == (6, c, 1) and b["yc"].shape == (6, c, 2)
        assert b["xt"].shape == (6, h, 1) and b["yt"].shape == (6, h, 2)
        assert b["window_start"].dtype.name == "int64"
        np.testing.assert_array_equal(b["mask_c"], np.ones((6, c)))
        np.testing.assert_array_equal(b["mask_t"], np.ones((6, h)))
        for i, start in enumerate(b["window_start"].numpy()):
            rows = np.arange(start, start + c + h, dtype=float)
            yc, yt = task.to_original_units(b["yc"][i]), task.to_original_units(b["yt"][i])
            np.testing.assert_allclose(yc[:, 0], rows[:c], atol=1e-4)
            np.testing.assert_allclose(yt[:, 0], rows[c:], atol=1e-4)
            np.testing.assert_allclose(yt[:, 1], 10 * rows[c:] ** 2 + 3, rtol=1e-6)
    # x: first context row -> -1, last target row -> +1, uniform steps of 2 / (C + H - 1)
    expected = -1 + 2 * np.arange(c + h) / (c + h - 1)
    np.testing.assert_allclose(b["xc"][0, :, 0], expected[:c], atol=1e-7)
    np.testing.assert_allclose(b["xt"][0, :, 0], expected[c:], atol=1e-7)
    assert b["xc"][0, 0, 0] == -1.0 and b["xt"][0, -1, 0] == 1.0


def test_eval_windows_complete_ordered_and_identical_across_calls(tmp_path):
    task = make(write_csv(tmp_path, n=100))  # val rows 60..79, test rows 80..99, window 8
    first = collect(task.dataset("test", batch_size=4))
    np.testing.assert_array_equal(first["window_start"], np.arange(80, 93))
    second = collect(task.dataset("test", batch_size=4))
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
    val = collect(task.dataset("val", batch_size=5))
    np.testing.assert_array_equal(val["window_start"], np.arange(60, 73))
    capped = collect(task.dataset("test", batch_size=4, num_batches=2))
    np.testing.assert_array_equal(capped["window_start"], np.arange(80, 88))
    strided = make(write_csv(tmp_path, n=100), eval_stride=3)
    np.testing.assert_array_equal(collect(strided.dataset("test", batch_size=2))["window_start"],
                                  [80, 83, 86, 89, 92])
    with pytest.raises(SpecError, match="split must be one of .*'tset'"):
        task.dataset("tset")


def test_training_windows_seeded_in_range_and_infinite(tmp_path):
    import tensorflow as tf

    task = make(write_csv(tmp_path, n=100))
    a = collect(task.dataset("train", batch_size=8, seed=1, num_batches=5))
    b = collect(task.dataset("train", batch_size=8, seed=1, num_batches=5))
    c = collect(task.dataset("train", batch_size=8, seed=2, num_batches=5))
    np.testing.assert_array_equal(a["window_start"], b["window_start"])
    np.testing.assert_array_equal(a["yt"], b["yt"])
    assert not np.array_equal(a["window_start"], c["window_start"])
    assert a["window_start"].min() >= 0 and a["window_start"].max() <= 60 - 8
    endless = task.dataset("train", batch_size=2, seed=1)
    assert endless.cardinality().numpy() == tf.data.INFINITE_CARDINALITY
    assert len(list(endless.take(40))) == 40
    # every training start 0..52 is drawn (800 draws)
    many = collect(task.dataset("train", batch_size=8, seed=0, num_batches=100))["window_start"]
    assert set(many) == set(range(53))


def test_window_and_series_give_raw_values_and_dates(tmp_path):
    task = make(write_csv(tmp_path, n=100))
    start = int(collect(task.dataset("test", batch_size=4))["window_start"][3])
    win = task.window(start)
    np.testing.assert_array_equal(win["y"][:, 0], np.arange(start, start + 8))
    np.testing.assert_array_equal(win["dates"], pd.date_range("2020-01-01", periods=100, freq="h")
                                  [start:start + 8].to_numpy())
    np.testing.assert_array_equal(win["x"], task.x)
    test = task.series("test")
    np.testing.assert_array_equal(test["index"], np.arange(80, 100))
    np.testing.assert_array_equal(test["y"][:, 0], np.arange(80, 100))
    with pytest.raises(SpecError, match="out of range"):
        task.window(93)


def test_get_config_json_roundtrip_rebuilds_same_task(tmp_path):
    task = make(write_csv(tmp_path, n=100), target_columns=["y", "z"], eval_stride=2, missing="drop")
    config = json.loads(json.dumps(task.get_config()))
    assert set(config) == set(inspect.signature(CSVSeriesTask).parameters)
    again = CSVSeriesTask(**config)
    assert again.get_config() == task.get_config()
    a, b = collect(task.dataset("val", batch_size=3)), collect(again.dataset("val", batch_size=3))
    np.testing.assert_array_equal(a["yt"], b["yt"])


def test_nan_policies(tmp_path):
    y = np.arange(100.0)
    y[[3, 7]] = np.nan
    path = write_csv(tmp_path, n=100, w=y)
    with pytest.raises(SpecError, match=r"NaN in 2 row\(s\): \[3, 7\].*missing.*'mask'") as err:
        make(path, target_columns="w", missing="error")
    assert str(path) in str(err.value)
    dropped = make(path, target_columns="w", missing="drop")
    assert len(dropped.values) == 98
    np.testing.assert_array_equal(dropped.series()["file_rows"][:8], [0, 1, 2, 4, 5, 6, 8, 9])
    filled = make(path, target_columns="w", missing="ffill")
    np.testing.assert_array_equal(filled.values[[3, 7], 0], [2.0, 6.0])
    y[0] = np.nan
    with pytest.raises(SpecError, match=r"rows \[0\].*no earlier value"):
        make(write_csv(tmp_path, n=100, name="lead.csv", w=y), target_columns="w", missing="ffill")


@pytest.mark.parametrize("kw, pattern", [
    ({"target_columns": "yy"}, r"no column 'yy'; did you mean 'y'"),
    ({"date_column": "dat"}, r"no column 'dat'; did you mean 'date'"),
    ({"target_columns": "s"}, r"target column 's' .* not numeric .*row 2: 'abc'"),
    ({"horizon": 0}, r"'horizon' must be an int in \[1, 2147483647\], got 0"),
    ({"context_length": -4}, r"'context_length' must be an int in \[1, 2147483647\], got -4"),
    ({"split": (0.5, 0.2, 0.2)}, "summing to 1"),
    ({"split": (0.9, -0.1, 0.2)}, "three positive ratios"),
    ({"split": (0.8, 0.2)}, "three positive ratios"),
    ({"missing": "zero"}, "'missing' must be one of 'mask', 'error', 'drop', 'ffill', got 'zero'"),
    ({"horizon": 30}, r"val split .* has 20 rows .* needs context_length \+ horizon = 5 \+ 30 = 35 rows"),
    ({"target_columns": None}, "needs target_columns"),
    ({"target_columns": ["y", "y"]}, "distinct"),
    ({"contxt_length": 3}, r"task 'csv' has no option 'contxt_length'; did you mean 'context_length'"),
    ({"column_names": ["a", "b"]}, "has 4 columns but column_names names 2"),
])
def test_errors_name_the_problem(tmp_path, kw, pattern):
    s = np.array(["1.0", "2.0", "abc"] + ["3.0"] * 97)
    path = write_csv(tmp_path, n=100, s=s)
    with pytest.raises(SpecError, match=pattern) as err:
        make(path, **kw)
    if "unknown" in pattern:
        assert all(k in str(err.value) for k in inspect.signature(CSVSeriesTask).parameters)


def test_constant_and_unordered_series_are_rejected(tmp_path):
    with pytest.raises(SpecError, match=r"\['c'\] .* constant over the training rows"):
        make(write_csv(tmp_path, n=100, c=np.ones(100)), target_columns="c")
    path = write_csv(tmp_path, n=100)
    df = pd.read_csv(path)
    df.loc[[10, 11], "date"] = df.loc[[11, 10], "date"].to_numpy()
    df.to_csv(path, index=False)
    with pytest.raises(SpecError, match=r"not in chronological order.*after rows \[10\]"):
        make(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataFileNotFoundError, match="nope.csv") as err:
        make(tmp_path / "nope.csv")
    assert "dataset=" in str(err.value) and isinstance(err.value, FileNotFoundError)


def test_a_local_path_overrides_a_presets_dataset(tmp_path):
    other = write_csv(tmp_path, n=100, name="other.csv", OT=np.cos(np.arange(100.0)))
    ett = registry.get("task", "ett")(path=str(other), context_length=4, horizon=2)
    assert ett.resolved_path == other and ett.split_bounds["train"] == (0, 69)
    assert make_task("ett", ett.get_config()).resolved_path == other


def test_named_dataset_is_fetched_from_the_mirror_checked_and_cached(tmp_path, monkeypatch, shared_data):
    source = shared_data / "ett" / "ETTh1.csv"
    mirror, cache = tmp_path / "mirror", tmp_path / "cache"
    mirror.mkdir()
    (mirror / "ETTh1.csv").write_bytes(source.read_bytes())
    monkeypatch.setenv(datasets.MIRROR_ENV, str(mirror))  # a plain folder works as a mirror
    monkeypatch.setenv(datasets.CACHE_ENV, str(cache))
    path = datasets.fetch("etth1")
    assert path == cache / "datasets" / "ETTh1.csv"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(source.read_bytes()).hexdigest()
    (mirror / "ETTh1.csv").unlink()  # from now on only the cache has it
    assert registry.get("task", "ett")().resolved_path == path


def test_a_corrupt_download_is_refused_and_removed(tmp_path, monkeypatch):
    (tmp_path / "ETTh1.csv").write_text("date,OT\n2020-01-01,1\n")
    monkeypatch.setenv(datasets.MIRROR_ENV, (tmp_path).as_uri())
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(TaskError, match="sha256 .* expected f18de3ad.*removed"):
        datasets.fetch("etth1")
    assert not (tmp_path / "cache" / "datasets" / "ETTh1.csv").exists()


def test_offline_without_a_copy_names_the_url_and_where_to_put_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.MIRROR_ENV, (tmp_path / "empty").as_uri())
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(TaskError) as err:
        make_task("exchange-rate")
    message = str(err.value)
    assert (tmp_path / "empty" / "exchange_rate.txt.gz").as_uri() in message
    assert str(tmp_path / "cache" / "datasets") in message and datasets.MIRROR_ENV in message


def test_git_blob_digest_matches_git(tmp_path):
    path = write_csv(tmp_path, n=50)
    expected = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    assert datasets.digest_of(path, "git-blob") == expected.stdout.strip()


def test_unknown_dataset_suggests_a_name():
    with pytest.raises(TaskError, match="unknown dataset 'etth3'; did you mean 'etth[12]'"):
        datasets.fetch("etth3")


# Rows per split at context 96, horizon 96 (split 69/11/20, windows inside a split).
REAL = {"ett": (17420, {"train": (0, 12019), "val": (12019, 13936), "test": (13936, 17420)}),
        "exchange-rate": (7588, {"train": (0, 5235), "val": (5235, 6070), "test": (6070, 7588)})}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_presets_load(name, shared_data):
    task = registry.get("task", name)()  # through the test mirror (tests/conftest.py)
    rows, bounds = REAL[name]
    assert len(task.values) == rows and task.split_bounds == bounds and task.dim_y == 1
    b = next(iter(task.dataset("test", batch_size=2)))
    assert b["yc"].shape == (2, 96, 1) and b["yt"].shape == (2, 96, 1)
    raw = task.window(int(b["window_start"][1]))["y"][:, 0]
    np.testing.assert_allclose(task.to_original_units(b["yc"][1])[:, 0], raw[:96], rtol=1e-5, atol=1e-5 * task.std[0])
    train = task.series("train")["y"][:, 0]
    assert task.mean[0] == pytest.approx(train.mean()) and task.std[0] == pytest.approx(train.std())


# ----------------------------------------------------------------- covariates and calendar
def test_covariates_and_calendar_features_are_inputs(tmp_path):
    import datetime

    n = 100
    cov = np.cos(np.arange(n) / 5.0) * 4 + 2
    dates = pd.date_range("2020-02-27 20:00", periods=n, freq="7h")  # crosses a leap day and months
    path = tmp_path / "cov.csv"
    pd.DataFrame({"date": dates, "y": np.sin(np.arange(n) / 3.0), "c": cov}).to_csv(path, index=False)
    task = make(path, covariate_columns=["c"], calendar_features=["hour", "day_of_week", "day_of_month",
                                                                  "day_of_year", "month"])
    assert task.dim_x == 1 + 1 + 2 * 5
    train = cov[:60]
    b = next(iter(task.dataset("test", batch_size=3)))
    for i, start in enumerate(b["window_start"].numpy()):
        x = np.concatenate([b["xc"][i], b["xt"][i]])  # [C + H, Dx]
        rows = np.arange(start, start + 8)
        np.testing.assert_allclose(x[:, 0], -1 + 2 * np.arange(8) / 7, atol=1e-7)
        np.testing.assert_allclose(x[:, 1], (cov[rows] - train.mean()) / train.std(), rtol=1e-5)
        for k, row in enumerate(rows):
            d = dates[row].to_pydatetime()
            leap = d.year % 4 == 0 and (d.year % 100 != 0 or d.year % 400 == 0)
            days_in_month = ((d.replace(day=28) + datetime.timedelta(days=4)).replace(day=1)
                             - datetime.timedelta(days=1)).day
            expected = []
            for value, period in ((d.hour, 24), (d.weekday(), 7), (d.day - 1, days_in_month),
                                  (d.timetuple().tm_yday - 1, 366 if leap else 365), (d.month - 1, 12)):
                expected += [np.sin(2 * np.pi * value / period), np.cos(2 * np.pi * value / period)]
            np.testing.assert_allclose(x[k, 2:], expected, atol=1e-6)
        np.testing.assert_allclose(task.window(int(start))["inputs"], x, atol=1e-7)
    linear = make(path, calendar_features=["hour", "month"], calendar_encoding="linear")
    x = next(iter(linear.dataset("val", batch_size=1)))["xc"][0]
    start = int(linear.window_starts("val")[0])
    d = dates[start:start + 5]
    np.testing.assert_allclose(x[:, 1], d.hour / 23 - 0.5, atol=1e-6)  # Informer's timeF
    np.testing.assert_allclose(x[:, 2], (d.month - 1) / 11 - 0.5, atol=1e-6)


@pytest.mark.parametrize("kw, pattern", [
    ({"covariate_columns": ["y"]}, r"covariate_columns must be distinct and not targets.*\['y'\] are target_columns"),
    ({"covariate_columns": ["zz"]}, r"no column 'zz'; did you mean 'z'.*check covariate_columns"),
    ({"covariate_columns": ["w"]}, r": covariate column\(s\) \['w'\] hold NaN in 1 row\(s\): \[4\].*"
                                   r"cannot be missing.*'ffill'"),
    ({"covariate_columns": ["w"], "missing": "error"},
     r": covariate column\(s\) \['w'\] hold NaN in 1 row\(s\): \[4\].*'drop' or 'ffill'$"),
    ({"calendar_features": ["hours"]}, r"'calendar_features' must be one of .*got 'hours'; did you mean 'hour'"),
    ({"calendar_features": ["hour"], "date_column": None}, "calendar_features \\['hour'\\] need dates"),
    ({"calendar_encoding": "onehot"}, "'calendar_encoding' must be one of 'sincos', 'linear'"),
])
def test_bad_covariates_and_calendar_features_are_named(tmp_path, kw, pattern):
    w = np.arange(100.0)
    w[4] = np.nan
    with pytest.raises(TaskError, match=pattern):
        make(write_csv(tmp_path, n=100, w=w), **kw)


# ----------------------------------------------------------------- forecasts
TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}
TINY_AR = {"preset": "tnp-a", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8,
                                          "ffn_width": 16}, "head": {"width": 16, "hidden_layers": 1}}


def test_forecast_frame_is_indexed_by_target_date_in_original_units(tmp_path):
    from scipy import stats

    import taylorformer as tfm

    task = make(write_csv(tmp_path, n=100), target_columns=["y", "z"], calendar_features=["hour"])
    model = tfm.build_model(TINY, dim_x=task.dim_x, dim_y=2)
    start = int(task.window_starts("test")[2])
    frame = task.forecast_frame(model, start, num_samples=2000, quantiles=(0.1, 0.5, 0.9), seed=3)
    dates = pd.date_range("2020-01-01", periods=100, freq="h")
    assert list(frame.index) == list(dates[start + 5:start + 8]) and frame.index.name == "date"
    assert list(frame.columns) == [(c, s) for c in ("y", "z") for s in ("truth", "mean", "std", "q0.1", "q0.5", "q0.9")]
    t = np.arange(start + 5, start + 8, dtype=float)
    np.testing.assert_array_equal(frame[("y", "truth")], t)
    np.testing.assert_array_equal(frame[("z", "truth")], 10 * t**2 + 3)
    # the model's standardised predictive mapped back with the training mean and std
    dist = model.distribution(task.batch([start]))
    mean_z, std_z = dist.mean().numpy()[0, :, 1], dist.stddev().numpy()[0, :, 1]
    train = 10 * np.arange(60.0) ** 2 + 3
    np.testing.assert_allclose(frame[("z", "mean")], mean_z * train.std() + train.mean(), rtol=1e-5)
    np.testing.assert_allclose(frame[("z", "std")], std_z * train.std(), rtol=1e-5)
    # a conditional model's quantiles are its Gaussian predictive's own, mapped back:
    # the predictive's quantile function, and SciPy's Normal at the mapped mean and std
    assert frame.attrs["quantile_method"] == "analytic (the predictive's own quantile)"
    for level in (0.1, 0.5, 0.9):
        own = dist.quantile(level).numpy()[0, :, 1] * train.std() + train.mean()
        np.testing.assert_allclose(frame[("z", f"q{level:g}")], own, rtol=1e-5)
        np.testing.assert_allclose(frame[("z", f"q{level:g}")],
                                   stats.norm.ppf(level, frame[("z", "mean")], frame[("z", "std")]), rtol=1e-4)
    several = task.forecast_frame(model, next(iter(task.dataset("test", batch_size=2))), num_samples=0)
    assert several.index.names == ["window_start", "date"]
    assert list(several.index.get_level_values(0).unique()) == [80, 81]
    assert several.attrs["quantile_method"] == frame.attrs["quantile_method"]
    with pytest.raises(TaskError, match="window start 99 out of range"):
        task.forecast_frame(model, 99)


def test_forecast_frame_of_an_autoregressive_model_labels_monte_carlo_quantiles(tmp_path):
    """An autoregressive model's quantiles are the empirical quantiles of its forecast
    paths (NumPy, on the same paths), labelled with their number; none without paths."""
    import taylorformer as tfm

    task = make(write_csv(tmp_path, n=100))
    model = tfm.build_model(TINY_AR, dim_x=task.dim_x, dim_y=1)
    start = int(task.window_starts("test")[0])
    frame = task.forecast_frame(model, start, num_samples=8, quantiles=(0.1, 0.9), seed=2)
    assert frame.attrs["quantile_method"] == "Monte Carlo over 8 sampled paths"
    paths = task.forecast(model, start, num_samples=8, seed=2)["samples"][:, 0, :, 0]  # [S, H]
    np.testing.assert_allclose(frame[("y", "q0.9")], np.quantile(paths, 0.9, axis=0), rtol=1e-12)
    with pytest.raises(TaskError, match="estimated from its forecast paths; pass num_samples >= 1"):
        task.forecast_frame(model, start, num_samples=0)


def test_forecast_plot_draws_history_truth_and_bands_against_dates(tmp_path):
    import taylorformer as tfm
    from matplotlib.figure import Figure

    from taylorformer.plotting.forecasts import plot_forecast

    task = make(write_csv(tmp_path, n=100))
    model = tfm.build_model(TINY, dim_x=1, dim_y=1)
    batch = next(iter(task.dataset("test", batch_size=3)))
    fig = task.plot(model, batch, num_tasks=2, num_samples=3, title="t")
    axes = fig.axes
    assert isinstance(fig, Figure) and len(axes) == 2
    dates = pd.date_range("2020-01-01", periods=100, freq="h")
    for ax, start in zip(axes, (80, 81)):
        assert ax.get_xlabel() == "date" and ax.get_ylabel() == "y"
        lines = {line.get_label(): line for line in ax.get_lines()}
        np.testing.assert_array_equal(lines["history"].get_ydata(), np.arange(start, start + 5))
        np.testing.assert_array_equal(lines["truth"].get_ydata(), np.arange(start + 5, start + 8))
        assert pd.Timestamp(lines["truth"].get_xdata()[0]) == dates[start + 5]
        paths = [line for line in ax.get_lines() if line.get_label().endswith("sampled paths")]
        assert len(paths) == 3
        assert {"90% interval", "50% interval"} <= {t.get_text() for t in ax.get_legend().get_texts()}
    own = Figure()
    ax = own.subplots()
    assert plot_forecast(np.arange(3), np.zeros(3), np.arange(3, 5), np.ones((4, 2)), ax=ax) is own
    with pytest.raises(ValueError, match=r"samples must be \[num_samples >= 1, 2\]"):
        plot_forecast(np.arange(3), np.zeros(3), np.arange(3, 5), np.ones((4, 3)))


# ----------------------------------------------------------------- missing values
#: rows (0-based) where the targets a and b of :func:`gappy_series` are missing: in the
#: training rows (0..59), the validation rows (60..79) and the test rows (80..99)
MISSING = {"a": [2, 7, 8, 41, 66, 83, 97], "b": [7, 30, 85]}


def gappy_series(tmp_path):
    """CSV of 100 hourly rows with targets ``a``, ``b`` (NaN at :data:`MISSING`) and a complete
    covariate ``c``; returns the path and the raw targets ``[100, 2]``."""
    t = np.arange(100.0)
    raw = np.stack([3 * np.sin(t / 4) + t / 10, np.cos(t / 3) + 5], 1)
    for j, col in enumerate("ab"):
        raw[MISSING[col], j] = np.nan
    return write_csv(tmp_path, n=100, a=raw[:, 0], b=raw[:, 1], c=np.sqrt(t)), raw


def test_mask_keeps_missing_targets_as_nan_scaled_with_the_observed_training_values(tmp_path):
    path, raw = gappy_series(tmp_path)
    task = make(path, target_columns=["a", "b"], covariate_columns=["c"])  # missing="mask": the default
    assert task.missing == "mask" and len(task.values) == 100  # no row dropped
    mean, std = np.nanmean(raw[:60], 0), np.nanstd(raw[:60], 0)
    np.testing.assert_allclose(task.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(task.std, std, rtol=1e-12)
    assert np.isfinite(task.features).all()  # inputs are never missing
    batches = [collect(task.dataset(s, batch_size=5)) for s in ("val", "test")]
    batches.append({k: v.numpy() for k, v in task.batch(np.arange(53)).items()})  # every training window
    for b in batches:
        for i, start in enumerate(b["window_start"]):
            y = np.concatenate([b["yc"][i], b["yt"][i]])  # [C + H, 2]
            expect = raw[start:start + 8]
            np.testing.assert_array_equal(np.isnan(y), np.isnan(expect))
            np.testing.assert_allclose(y, (expect - mean) / std, rtol=1e-5, atol=1e-6)  # NaN == NaN
            np.testing.assert_array_equal(b["mask_t"][i], 1.0)  # the model masks the NaN, not the task
    seen = np.concatenate([np.arange(s, s + 8) for b in batches for s in b["window_start"]])
    assert set(seen) == set(range(100))  # every row, missing values in every split included
    np.testing.assert_array_equal(np.isnan(task.series("test")["y"]), np.isnan(raw[80:]))


def test_mask_refuses_missing_inputs_and_targets_never_observed_in_training(tmp_path):
    path, raw = gappy_series(tmp_path)
    c = np.sqrt(np.arange(100.0))
    c[[12, 70]] = np.nan
    bad_cov = write_csv(tmp_path, n=100, name="cov.csv", a=raw[:, 0], c=c)
    with pytest.raises(TaskError, match=r"covariate column\(s\) \['c'\] hold NaN in 2 row\(s\): \[12, 70\].*"
                                        r"cannot be missing.*missing='ffill'") as err:
        make(bad_cov, target_columns="a", covariate_columns=["c"])
    assert str(bad_cov) in str(err.value)
    late = raw[:, 1].copy()
    late[:60] = np.nan  # b observed only after the training rows
    never = write_csv(tmp_path, n=100, name="late.csv", a=raw[:, 0], b=late)
    with pytest.raises(TaskError, match=r"late.csv.*target column\(s\) \['b'\] have no observed \(non-NaN\) value "
                                        r"in the 60 training rows"):
        make(never, target_columns=["a", "b"])
    df = pd.read_csv(path)
    df.loc[4, "date"] = None  # a time step without a date
    with pytest.raises(TaskError, match=r"missing or unparseable dates in rows \[4\]"):
        CSVSeriesTask(path=df, target_columns=["a", "b"], date_column="date", split=(0.6, 0.2, 0.2),
                      context_length=5, horizon=3)


def test_forecasts_and_plots_show_missing_truth_as_gaps(tmp_path):
    import io

    import taylorformer as tfm

    path, raw = gappy_series(tmp_path)
    task = make(path, target_columns=["a", "b"])
    model = tfm.build_model(TINY, dim_x=1, dim_y=2)
    batch = task.batch([80, 81])  # a is missing at context row 83, b at target row 85
    assert np.isfinite(tfm.loglik(model, batch).numpy()).all()
    frame = task.forecast_frame(model, 80, num_samples=20, quantiles=(0.5,))
    np.testing.assert_array_equal(frame[("b", "truth")], raw[85:88, 1])  # NaN where missing
    assert np.isnan(frame[("b", "truth")].iat[0]) and np.isfinite(frame[("b", "truth")].iat[1])
    stats = frame.drop(columns=[("a", "truth"), ("b", "truth")]).to_numpy()
    assert np.isfinite(stats).all()  # a forecast of every step, observed or not
    fig = task.plot(model, batch, num_tasks=1, num_samples=2)
    lines = [{line.get_label(): np.asarray(line.get_ydata(), float) for line in ax.get_lines()} for ax in fig.axes]
    np.testing.assert_array_equal(lines[0]["history"], raw[80:85, 0])  # a gap at row 83
    np.testing.assert_array_equal(lines[1]["truth"], raw[85:88, 1])  # a gap at row 85
    fig.savefig(io.BytesIO(), format="png")  # the gaps render
