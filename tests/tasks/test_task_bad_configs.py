"""Bad task configs and data: a TaskError naming the key (or file, column and row), before
anything is sampled or trained; accepted configs give finite batches."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from taylorformer import components, registry
from taylorformer import task as task_module
from taylorformer.errors import TaskError
from taylorformer.task import available_memory, make_task
from taylorformer.tasks.csv_series import LAI_COLUMNS, DataFileNotFoundError

BUILTIN_TASKS = sorted(n for n in registry.names("task") if registry.entry("task", n).plugin.startswith("builtin-"))
INF, NAN = float("inf"), float("nan")
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: values that are wrong (or at an edge) for most keys: non-finite, huge, negative,
#: fractional, wrong types, empty, reversed or degenerate ranges
BAD_VALUES = [NAN, INF, -INF, 1e200, -1e308, -1, -5, 0, 2.5, 10**12, True, None, "abc", "",
              [], [1], [0, 0], [5, 1], [NAN, 1], [1, INF], [[1, 2], [3]], {"uniform": [0, 0]},
              {"uniform": [NAN, 1]}, {"bogus": 1}]


def options(name):
    return components.accepted_options(registry.get("task", name))


@pytest.fixture(scope="module")
def csv_files(tmp_path_factory, station_configs, gridded_configs, uci_electricity_config):
    """Valid files for the CSV tasks (2000 rows: every split holds a 96 + 96 window), the
    image tasks, and the station and gridded tasks (synthetic files, tests/conftest.py)."""
    root = tmp_path_factory.mktemp("csv")
    t = np.arange(2000.0)
    series = np.sin(t / 10.0) + t / 1000.0
    pd.DataFrame({"date": pd.date_range("2020-01-01", periods=2000, freq="h"), "OT": series,
                  "y": series}).to_csv(root / "ett.csv", index=False)
    files = {"csv": {"path": str(root / "ett.csv"), "target_columns": "y"}}
    for name in ("ett", "etth2", "ettm1", "ettm2"):  # local copies instead of the named datasets
        files[name] = {"path": str(root / "ett.csv")}
    for name, columns in LAI_COLUMNS.items():
        pd.DataFrame(np.stack([series + i for i in range(columns)], 1)).to_csv(
            root / f"{name}.csv", index=False, header=False)
        files[name] = {"path": str(root / f"{name}.csv")}
    # image tasks: 24 x 24 (the presets' counts fit); digits in train/val, a digit (emnist)
    # and a letter (emnist-unseen) in test; the presets read this local copy, not tfds
    np.savez(root / "images.npz", images=np.random.default_rng(0).integers(0, 256, (20, 24, 24), dtype=np.uint8),
             labels=np.r_[np.arange(10), np.arange(6), 0, 1, 3, 12])
    files["image"] = {"source": str(root / "images.npz")}
    for name in ("mnist", "emnist", "emnist-unseen", "celeba", "cifar10", "t-mnist", "t-cifar10"):
        files[name] = {"source": str(root / "images.npz"), "split": None}
    # a 20-point survey with its prior given (no fit per generated case)
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.uniform(size=20), "y": rng.uniform(size=20), "v": rng.normal(size=20)}).to_csv(
        root / "survey.csv", index=False)
    files["fitted-gp"] = {"path": str(root / "survey.csv"), "x_columns": ["x", "y"], "target_columns": ["v"],
                          "prior": {"kernel": "eq", "lengthscale": 0.3, "variance": 1.0, "noise_variance": 0.1,
                                    "mean": 0.0}}
    files["uci-electricity"] = uci_electricity_config  # a local file: the named dataset is not fetched
    return {**files, **station_configs, **gridded_configs}


def assert_finite_batch(task):
    """A task that was accepted produces finite data."""
    if task.name == "csv":
        assert np.all(np.isfinite(task.scaled))
        return
    if task.name == "stations":
        assert all(np.all(np.isfinite(a)) for a in (task.x, task.y, task.s, task.t))
        return
    batch = task.sample(np.random.default_rng(0), 1, "train")
    for key, value in batch.items():
        assert np.all(np.isfinite(value)), key


# ----------------------------------------------------------------------------- property tests
@SETTINGS
@given(st.sampled_from(BUILTIN_TASKS).flatmap(
    lambda n: st.tuples(st.just(n), st.sampled_from(options(n)), st.sampled_from(BAD_VALUES))))
def test_generated_bad_values_raise_task_errors_naming_the_key(csv_files, case):
    """Every (built-in task, key, bad value): a TaskError whose message names the key, or a
    task whose batches are finite. No other exception escapes."""
    name, key, value = case
    config = {**csv_files.get(name, {}), key: value}
    try:
        task = make_task(name, config)
    except TaskError as exc:
        event("TaskError")
        assert key in str(exc), (name, key, value, str(exc))
        return
    event("accepted")
    assert_finite_batch(task)


@SETTINGS
@given(st.sampled_from(BUILTIN_TASKS),
       st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12), st.data())
def test_generated_unknown_keys_raise_task_errors_with_suggestions(csv_files, name, junk, data):
    valid = options(name)
    if junk not in valid:
        with pytest.raises(TaskError, match=f"task {name!r} has no option {junk!r}.*Valid options"):
            make_task(name, {**csv_files.get(name, {}), junk: 1})
    key = data.draw(st.sampled_from([k for k in valid if len(k) >= 4]))
    typo = data.draw(st.integers(0, len(key) - 1).map(lambda i: key[:i] + key[i + 1:]))
    if typo not in valid:
        with pytest.raises(TaskError, match=f"has no option {typo!r}; did you mean"):
            make_task(name, {**csv_files.get(name, {}), typo: 1})


# ----------------------------------------------------------------------------- the cases
@pytest.mark.parametrize("name,config,words", [
    ("gp", {"scale": 1e200}, ["'scale'", "1e+200", "1e+06"]),
    ("gp", {"noise": INF}, ["'noise'", "inf", "finite"]),
    ("gp", {"lengthscale": [0, 0]}, ["'lengthscale'", "[0, 0]"]),
    ("gp", {"lengthscale": {"uniform": [0, 0]}}, ["'lengthscale: uniform'", "[0, 0]", "1e-06"]),
    ("gp", {"context_range": [-INF, 2.0]}, ["'context_range'", "-inf", "finite"]),
    ("gp", {"target_range": [0.0, NAN]}, ["'target_range'", "nan"]),
    ("gp", {"num_context": [-3, 5]}, ["'num_context'", "[-3, 5]"]),
    ("gp", {"num_target": 2.5}, ["'num_target'", "2.5"]),
    ("gp", {"num_context": [9, 4]}, ["'num_context'", "lo <= hi"]),
    ("gp", {"kernel": ["eq", 3]}, ["'kernel'", "3"]),
    ("gp", {"shift": INF}, ["'shift'", "inf"]),
    ("gp-2d-bsa", {"noise": -0.1}, ["gp-2d-bsa task 'noise'", "-0.1"]),
    ("gp-2d-bsa", {"lengthscale": 0}, ["'lengthscale'", "0"]),
    ("sphere-gp", {"extent": NAN}, ["'extent'", "nan", "(0, 90]"]),
    ("sphere-gp", {"rotation": [0, INF, 0]}, ["'rotation'", "inf"]),
    ("sir", {"initial": [3, 3]}, ["'initial'", "hi exclusive"]),
    ("sir", {"radius": 1e9}, ["'radius'", "1000000000.0", "[1, 64]"]),
    ("generic-spatial", {"space_range": [1.0, 1.0]}, ["'space_range'", "lo < hi"]),
    ("sawtooth", {"freq": INF}, ["'freq'", "inf"]),
    ("sawtooth-2d", {"restricted": "yes"}, ["'restricted'", "yes"]),
])
def test_bad_values_named_in_the_error(name, config, words):
    with pytest.raises(TaskError) as info:
        make_task(name, config)
    assert all(w in str(info.value) for w in words), str(info.value)


@pytest.mark.parametrize("name", ["gp-2d-bsa", "generic-spatial", "sphere-gp", "sir"])
def test_spatial_unknown_key_is_a_task_error_with_suggestion(name):
    with pytest.raises(TaskError, match=rf"task '{name}' has no option 'num_contxt'; did you mean "
                                        rf"'num_context'\? Valid options: .*num_target"):
        make_task(name, {"num_contxt": 3})


def test_gp_with_100k_targets_refused_before_allocating(monkeypatch):
    """The exact GP of Nc + Nt = 100,032 points needs 8 N^2 (2 Dx + 4) bytes; the error states
    the estimate (formula computed here) and the limit, at construction."""
    n = 32 + 100_000
    expected = 4 * n * 3 + 8 * n * n * (2 * 1 + 4)
    limit, source = available_memory()  # MemAvailable moves between two reads: hold it fixed
    monkeypatch.setattr(task_module, "available_memory", lambda: (limit, source))
    with pytest.raises(TaskError) as info:
        make_task("gp", {"num_target": 100_000})
    message = str(info.value)
    assert f"{expected} bytes" in message and "8 (Nc + Nt)^2 (2 D + 4)" in message
    assert "at most" in message and f"{limit} bytes" in message and source in message


def test_memory_checked_at_the_first_batch_request(monkeypatch):
    """A task that fits one draw but not a huge batch is refused by dataset(), before sampling."""
    import taylorformer.task as task_module

    task = make_task("sawtooth")  # Nc + Nt <= 192: 4 * 192 * 3 bytes per task
    monkeypatch.setattr(task_module, "available_memory", lambda: (10**6, "test limit"))
    with pytest.raises(TaskError, match=rf"{4 * 1000 * 192 * 3} bytes = .* at most .*\(1000000 bytes, test limit\)"):
        task.dataset("train", batch_size=1000)
    assert next(iter(task.dataset("train", batch_size=4)))["xc"].shape == (4, 64, 1)


def test_available_memory_is_within_physical_memory():
    limit, source = available_memory()
    assert isinstance(limit, int) and 0 < limit <= _physical_memory() and source


def _physical_memory():
    import os

    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("kwargs,key", [
    ({"batch_size": 0}, "batch_size"), ({"batch_size": -3}, "batch_size"),
    ({"batch_size": 2.0}, "batch_size"), ({"num_batches": -1}, "num_batches"),
    ({"start": -2}, "start"), ({"seed": "x"}, "seed")])
@pytest.mark.parametrize("name", ["gp", "csv"])
def test_dataset_arguments_checked(csv_files, name, kwargs, key):
    task = make_task(name, csv_files.get(name, {}))
    with pytest.raises(TaskError, match=f"'{key}' must be"):
        task.dataset("train", **{"batch_size": 2, **kwargs})


# ----------------------------------------------------------------------------- CSV data
def write(tmp_path, y, name="data.csv"):
    path = tmp_path / name
    pd.DataFrame({"t": np.arange(len(y)), "y": y}).to_csv(path, index=False)
    return path


def make_csv(path, **kw):
    return make_task("csv", {"path": str(path), "target_columns": "y", "split": [0.6, 0.2, 0.2],
                             "context_length": 5, "horizon": 3, **kw})


def test_csv_split_ratio_nan_is_a_task_error(tmp_path):
    path = write(tmp_path, np.arange(100.0))
    with pytest.raises(TaskError, match=r"split must be three positive ratios .* got \[nan, 0.5, 0.5\]"):
        make_csv(path, split=[NAN, 0.5, 0.5])


@pytest.mark.parametrize("row,split", [(10, "train"), (65, "val"), (90, "test")])
def test_csv_nan_in_any_split_names_file_column_and_row(tmp_path, row, split):
    y = np.arange(100.0)
    y[row] = np.nan
    path = write(tmp_path, y)
    with pytest.raises(TaskError) as info:
        make_csv(path, missing="error")  # the default 'mask' keeps it as a missing value
    assert all(w in str(info.value) for w in (str(path), "['y']", f"[{row}]", "NaN"))


@pytest.mark.parametrize("value", [INF, -INF])
@pytest.mark.parametrize("row", [3, 70, 95])
def test_csv_infinite_value_in_any_split_names_file_column_and_row(tmp_path, value, row):
    y = np.arange(100.0)
    y[row] = value
    path = write(tmp_path, y)
    before = path.read_bytes()
    for policy in ("error", "drop", "ffill"):
        with pytest.raises(TaskError) as info:
            make_csv(path, missing=policy)
        assert all(w in str(info.value) for w in (str(path), "'y'", f"row {row}: {value}")), str(info.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("big", [1e308, 1e300])
def test_csv_values_near_the_float_range_are_refused_naming_column_and_row(tmp_path, big):
    """+-1e308 / 1e300 in the training rows: the std overflows float64 (the scaled series would
    be all zero); the error names the column and the row of the largest value."""
    y = np.arange(100.0)
    y[7], y[8] = big, -big
    path = write(tmp_path, y)
    with pytest.raises(TaskError) as info:
        make_csv(path)
    message = str(info.value)
    assert all(w in message for w in (str(path), "'y'", "overflows float64", "row 7")), message


def test_csv_test_value_beyond_float32_once_scaled_names_split_and_row(tmp_path):
    y = np.arange(100.0)
    y[91] = 1e300  # finite float64 statistics over train, but 1e300 / std overflows float32
    path = write(tmp_path, y)
    with pytest.raises(TaskError, match=r"'y' has 1 value\(s\) beyond the float32 range .* row 91 \(test split"):
        make_csv(path)


def test_csv_moderate_values_still_accepted(tmp_path):
    y = np.arange(100.0) * 1e30  # large but standardisable
    task = make_csv(write(tmp_path, y))
    assert np.all(np.isfinite(task.scaled)) and np.ptp(task.scaled) > 1


def test_csv_missing_file_stays_a_file_not_found_task_error(tmp_path):
    with pytest.raises(DataFileNotFoundError) as info:
        make_csv(tmp_path / "nope.csv")
    assert isinstance(info.value, TaskError) and isinstance(info.value, FileNotFoundError)


def test_non_dict_config_is_a_task_error():
    with pytest.raises(TaskError, match="config must be a dict"):
        make_task("gp", [("noise", 1)])


def test_a_recorded_config_with_the_old_nan_policy_name_still_builds(tmp_path):
    """Runs recorded the tasks' ``missing`` option as ``nan_policy`` before it had its name."""
    y = np.arange(100.0)
    y[10] = np.nan
    path = write(tmp_path, y)
    with pytest.warns(DeprecationWarning, match="'missing'"):
        assert make_csv(path, nan_policy="drop").missing == "drop"
    with pytest.warns(DeprecationWarning), pytest.raises(TaskError, match=r"\[10\]"):
        make_csv(path, nan_policy="error")
