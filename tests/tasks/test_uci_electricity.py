"""The UCI electricity task (taylorformer.tasks.uci_electricity) and the Taylorformer paper's
electricity rows, on synthetic files in the format of LD2011_2014.txt (the real file is not
available offline): hourly aggregation against NumPy, the named dataset from a mirror's zip,
the rows end to end (load, windows, training, the row's metric) and their baselines against
a NumPy reference."""
import hashlib
import math
import zipfile

import numpy as np
import pytest

from taylorformer import registry, testing
from taylorformer_replication import replication
from taylorformer.errors import TaskError
from taylorformer.task import make_task
from taylorformer.tasks import datasets
from taylorformer.tasks.uci_electricity import PAPER_CLIENT, UCI_FILE

#: 80 days from 2014-01-01: 1,920 hours, enough for context 96 + horizon 96 in every split
DAYS = 80
PERIOD = {"start": "2014-01-01", "end": "2014-03-22"}


def hourly(kw):
    """NumPy reference: the mean of each run of four quarter-hours ``[hours, clients]``."""
    return kw.reshape(-1, 4, kw.shape[1]).mean(1)


def test_hours_are_means_of_their_four_quarter_hours(uci_electricity_txt):
    path, kw = uci_electricity_txt(days=DAYS)
    task = make_task("uci-electricity", {"path": path, **PERIOD})
    assert PAPER_CLIENT == "MT_323" and task.target_columns == ["MT_323"]
    np.testing.assert_allclose(task.values[:, 0], hourly(kw)[:, 2], rtol=1e-12)
    assert len(task.values) == DAYS * 24
    dates = task.series()["dates"]
    assert str(dates[0])[:19] == "2014-01-01T00:00:00" and np.all(np.diff(dates) == np.timedelta64(1, "h"))
    n = DAYS * 24
    assert task.split_bounds == {"train": (0, int(0.69 * n)), "val": (int(0.69 * n), int(0.8 * n)),
                                 "test": (int(0.8 * n), n)}
    train = hourly(kw)[:int(0.69 * n), 2]
    assert task.mean[0] == pytest.approx(train.mean()) and task.std[0] == pytest.approx(train.std())
    # a client that used nothing reads as zeros; another period keeps only its hours
    first = make_task("uci-electricity", {"path": path, "client": "MT_001", "start": "2014-01-01",
                                          "end": "2014-01-31", "context_length": 24, "horizon": 24})
    np.testing.assert_allclose(first.values[:24, 0], 0.0)
    np.testing.assert_allclose(first.values[:, 0], hourly(kw)[:30 * 24, 0], rtol=1e-12)
    # the config rebuilds the same task
    again = make_task("uci-electricity", task.get_config())
    np.testing.assert_array_equal(again.values, task.values)
    assert task.get_config()["client"] == "MT_323" and again.get_config() == task.get_config()
    # the paper's inputs (no lead input), recorded by a run as given and rebuilt from it
    from taylorformer.workflow import runs

    config = {"path": path, **PERIOD}
    assert task.dim_x == 1 and runs.recorded_task_config("uci-electricity", config, task) == config
    assert runs.stored_task_config("uci-electricity", config) == config


def test_the_task_contract(uci_electricity_txt):
    path, _ = uci_electricity_txt(days=DAYS)
    testing.check_task("uci-electricity", batch_size=2, path=path, context_length=24, horizon=12, **PERIOD)


@pytest.mark.parametrize("config, pattern", [
    ({"client": "MT_324"}, r"no client column 'MT_324'; did you mean 'MT_32[23]'"),
    ({"client": 323}, "client must be a column name"),
    ({"start": "2013-01-01"}, r"does not hold the four quarter-hours of every hour in \[2013-01-01"),
    ({"end": "2014-01-01"}, "end '2014-01-01' must be after start"),
    ({"start": "soon"}, "start 'soon' is not a date"),
])
def test_bad_options_name_the_problem(uci_electricity_txt, config, pattern):
    path, _ = uci_electricity_txt(days=DAYS)
    with pytest.raises(TaskError, match=pattern):
        make_task("uci-electricity", {"path": path, **PERIOD, **config})


def test_bad_files_name_the_file_and_row(tmp_path, uci_electricity_txt):
    path, _ = uci_electricity_txt(days=DAYS)
    lines = open(path).read().splitlines()
    gap = tmp_path / "gap.txt"  # one quarter-hour missing
    gap.write_text("\n".join(lines[:101] + lines[102:]) + "\n")
    with pytest.raises(TaskError, match=r"gap.txt.*1 of 1920 hours have another count, the first 2014-01-02 01:00"):
        make_task("uci-electricity", {"path": str(gap), **PERIOD})
    word = tmp_path / "word.txt"
    word.write_text("\n".join(lines[:5] + [lines[5].rsplit(";", 1)[0] + ";n/a"] + lines[6:]) + "\n")
    with pytest.raises(TaskError, match=r"word.txt.*'MT_323' holds 1 non-numeric value\(s\), the first 'n/a' in data row 4"):
        make_task("uci-electricity", {"path": str(word), **PERIOD})
    swapped = tmp_path / "swapped.txt"
    swapped.write_text("\n".join(lines[:3] + [lines[4], lines[3]] + lines[5:]) + "\n")
    with pytest.raises(TaskError, match=r"swapped.txt': the time stamps do not increase after data row 2 "):
        make_task("uci-electricity", {"path": str(swapped), **PERIOD})
    with pytest.raises(TaskError, match="not found"):
        make_task("uci-electricity", {"path": str(tmp_path / "none.txt")})


def test_named_dataset_from_a_mirrors_zip(tmp_path, uci_electricity_txt, monkeypatch):
    path, kw = uci_electricity_txt(days=DAYS)
    entry = datasets.DATASETS["uci-electricity"]
    assert entry.url == "https://archive.ics.uci.edu/static/public/321/electricityloaddiagrams20112014.zip"
    assert list(entry.members) == [UCI_FILE] and len(entry.members[UCI_FILE]) == len("sha256:") + 64
    mirror, cache = tmp_path / "mirror", tmp_path / "cache"
    mirror.mkdir()
    with zipfile.ZipFile(mirror / entry.filename, "w") as z:  # the UCI layout, with its __MACOSX folder
        z.write(path, UCI_FILE)
        z.writestr(f"__MACOSX/._{UCI_FILE}", b"\0")
    digest = "sha256:" + hashlib.sha256(open(path, "rb").read()).hexdigest()
    monkeypatch.setitem(datasets.DATASETS, "uci-electricity", datasets.DataArchive(entry.filename, entry.url,
                                                                                  {UCI_FILE: digest}))
    monkeypatch.setenv(datasets.MIRROR_ENV, mirror.as_uri())
    monkeypatch.setenv(datasets.CACHE_ENV, str(cache))
    task = make_task("uci-electricity", PERIOD)
    assert task.resolved_path == cache / "datasets" / "uci-electricity"
    np.testing.assert_allclose(task.values[:, 0], hourly(kw)[:, 2], rtol=1e-12)
    assert task.get_config()["path"] is None
    # the pinned digest refuses another file, naming both digests
    monkeypatch.setitem(datasets.DATASETS, "uci-electricity", entry)
    with pytest.raises(TaskError, match=f"has sha256 {digest[7:]}, expected {entry.members[UCI_FILE][7:]}"):
        make_task("uci-electricity", PERIOD)


# ----------------------------------------------------------------------------- the paper's rows
def test_the_rows_follow_sec_4_2_and_table_3():
    """Tables 2 and 4: context 96, horizons 96..720, both models; Table 3: 6 / 4 heads, dropout
    0.25, about 200K parameters; baselines persistence and one day earlier (24 hours)."""
    import taylorformer as tfm

    mse = {"taylorformer": (0.036, 0.037, 0.040, 0.039), "tnp-a": (0.042, 0.045, 0.048, 0.048)}
    nll = {"taylorformer": (-0.53, -0.50, -0.41, -0.44), "tnp-a": (-0.42, -0.40, -0.28, -0.25)}
    sizes = {}
    for model in mse:
        for h, m, n in zip((96, 192, 336, 720), mse[model], nll[model]):
            rows = {metric: replication.get_row(f"{model}-electricity-{h}-{metric}") for metric in ("mse", "nll")}
            assert (rows["mse"].paper_value, rows["nll"].paper_value) == (m, n)
            for row in rows.values():
                assert row.task == "uci-electricity" and row.task_config == {"horizon": h, "client": "MT_323"}
                assert row.baselines == ("persistence", "seasonal-naive:24") and row.run_name == f"{model}-electricity-{h}"
                assert row.training.batch_size == (16 if h == 720 else 32) and row.training.steps == 40_000
                test_rows = 17_520 - int(0.8 * 17_520)
                assert row.paper_scale == pytest.approx((test_rows - 96 - h) / test_rows)
        spec = {**replication.get_row(f"{model}-electricity-96-mse").model_spec(), "dim_x": 1, "dim_y": 1}
        assert spec["encoder"]["dropout"] == 0.25 and spec["encoder"]["num_heads"] == (6 if model == "taylorformer" else 4)
        sizes[model] = tfm.build_model(spec).count_params()
    assert sizes == {"taylorformer": 196_132, "tnp-a": 212_674}  # the numbers the rows' notes give
    assert registry.get("task", "uci-electricity") is not None


def _persistence_reference(kw, horizon, lag, metric):
    """NumPy reference of the naive forecast's per-window metric on the hourly MT_323 series."""
    y = hourly(kw)[:, 2]
    n = len(y)
    train = y[:int(0.69 * n)]
    z = (y - train.mean()) / train.std()
    variance = np.mean((z[lag:int(0.69 * n)] - z[:int(0.69 * n) - lag]) ** 2)
    values = []
    for start in range(int(0.8 * n), n - 96 - horizon + 1):
        t = np.arange(start + 96, start + 96 + horizon)
        error = z[t] - z[t - lag]
        values.append(np.mean(error ** 2) if metric == "mse"
                      else np.mean(0.5 * (np.log(2 * np.pi * variance) + error ** 2 / variance)))
    return np.asarray(values)


@pytest.mark.parametrize("metric", ["mse", "nll"])
def test_baselines_match_numpy(uci_electricity_txt, metric):
    path, kw = uci_electricity_txt(days=DAYS)
    records = replication.score_baselines(f"taylorformer-electricity-96-{metric}", results=None, verbose=0,
                                          task_config={"path": path, **PERIOD})
    for record, lag in zip(records, (1, 24)):
        reference = _persistence_reference(kw, 96, lag, metric)
        assert record["num_tasks"] == len(reference) == 384 - 192 + 1
        assert record["value"] == pytest.approx(reference.mean(), rel=1e-5)
        # 193 windows hold fewer than two blocks of 192, which the label says
        assert record["stderr_method"].startswith("batch means, blocks of 192 consecutive windows")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["taylorformer", pytest.param("tnp-a", marks=pytest.mark.long)])
def test_the_rows_run_end_to_end(tmp_path, uci_electricity_txt, model):
    """Load -> windows -> 3 training steps -> the NLL and MSE rows evaluated from one run
    (tnp-a: ``long``, its forecasting path runs in tests/replication/test_replication.py)."""
    path, _ = uci_electricity_txt(days=DAYS)
    out, results = str(tmp_path / "run"), str(tmp_path / "results.csv")
    for metric in ("nll", "mse"):
        record = replication.replicate(f"{model}-electricity-96-{metric}", budget=3, out=out, results=results,
                                       eval_tasks=4, task_config={"path": path, **PERIOD}, verbose=0,
                                       batch_size=2, model_overrides={"encoder": {"layers": 1}}, jit_compile=False)
        assert (record["metric"], record["steps"], record["num_tasks"]) == (metric, 3, 4)
        assert math.isfinite(record["value"]) and (metric == "nll" or record["value"] > 0)
    lines = replication.read_results(results)
    assert [line["row"] for line in lines] == [f"{model}-electricity-96-nll", f"{model}-electricity-96-mse"]


def test_an_empty_field_makes_its_hour_missing(tmp_path, uci_electricity_txt):
    path, kw = uci_electricity_txt(days=DAYS)
    lines = open(path).read().splitlines()
    lines[6] = lines[6].rsplit(";", 1)[0] + ";"  # data row 5: the second hour's second quarter of MT_323
    holed = tmp_path / "holed.txt"
    holed.write_text("\n".join(lines) + "\n")
    task = make_task("uci-electricity", {"path": str(holed), **PERIOD})
    assert np.isnan(task.values[1, 0]) and np.isnan(task.values[:, 0]).sum() == 1
    np.testing.assert_allclose(np.delete(task.values[:, 0], 1), np.delete(hourly(kw)[:, 2], 1), rtol=1e-12)
    with pytest.raises(TaskError, match="NaN"):
        make_task("uci-electricity", {"path": str(holed), "missing": "error", **PERIOD})
