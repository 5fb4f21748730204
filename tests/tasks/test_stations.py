"""Station task and the beijing-air dataset (tasks/stations.py, tasks/datasets.py) on small
synthetic files in the UCI format, against independent NumPy/pandas computations."""
import hashlib
import io
import math
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from taylorformer import registry, testing
from taylorformer.errors import TaskError
from taylorformer.workflow.evaluation import evaluate
from taylorformer.task import make_task
from taylorformer.tasks import datasets
from taylorformer.tasks.stations import BEIJING_COORDINATES, CALENDAR, MISSING_POLICIES
from taylorformer.workflow.training import TrainConfig, Trainer

SMALL = {"num_context": 18, "num_target": 6, "eval_stride": 3}  # 6 h of 3 stations -> 2 h


@pytest.fixture
def uci_folder(station_configs):
    """The session's folder of three synthetic UCI station files, 120 hours each (360 rows)."""
    return Path(station_configs["beijing-air"]["path"])


def stations(folder, **config):
    return make_task("beijing-air", {"path": str(folder), **SMALL, **config})


def expected_table(folder):
    """The files' rows sorted by (time, station), read independently of the task."""
    df = pd.concat([pd.read_csv(p) for p in sorted(folder.glob("*.csv"))], ignore_index=True)
    df["time"] = pd.to_datetime(df[["year", "month", "day", "hour"]])
    return df.sort_values(["time", "station"], kind="stable").reset_index(drop=True)


def collect(ds):
    batches = [{k: v.numpy() for k, v in b.items()} for b in ds]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def haversine_deg(a, b):
    """Great-circle distance in degrees between (lat, lon) degree pairs ``[N, 2]`` (haversine)."""
    la, lb = np.radians(a[:, 0]), np.radians(b[:, 0])
    dlat, dlon = lb - la, np.radians(b[:, 1] - a[:, 1])
    h = np.sin(dlat / 2) ** 2 + np.cos(la) * np.cos(lb) * np.sin(dlon / 2) ** 2
    return np.degrees(2 * np.arcsin(np.sqrt(h)))


# ---------------------------------------------------------------------- protocol
def test_registered():
    for name in ("stations", "beijing-air"):
        assert registry.entry("task", name).description


def test_split_sizes_and_windows_follow_the_reference_protocol(uci_folder, uci_format):
    task = stations(uci_folder)
    n = 3 * uci_format.hours
    n_test, n_val = math.floor(0.1 * n), math.floor(0.1 * n)  # last 10 %, the 10 % before
    assert task.split_bounds == {"train": (0, math.floor(0.8 * n)), "val": (n - n_test - n_val, n - n_test),
                                 "test": (n - n_test, n)}
    assert (task.dim_x, task.dim_y) == (len(CALENDAR) + 5 + len(uci_format.wind), 2)
    test = collect(task.dataset("test", batch_size=2))
    lo, hi = task.split_bounds["test"]
    np.testing.assert_array_equal(test["window_start"], np.arange(lo, hi - 24 + 1, 3))
    assert test["xc"].shape[1:] == (18, task.dim_x) and test["yt"].shape[1:] == (6, 2)
    assert test["sc"].shape[1:] == (18, 2) and test["tt"].shape[1:] == (6, 1)
    assert test["mask_c"].all() and test["mask_t"].all()
    # a window: context = the 18 rows from its start (the last 6 hours of the 3 stations),
    # targets = the next 6 rows (the next 2 hours), in time order
    table = expected_table(uci_folder)
    for i, start in enumerate(test["window_start"]):
        rows = table.iloc[start:start + 24]
        np.testing.assert_array_equal(task.table["station"].iloc[start:start + 24], rows["station"])
        assert rows["time"].iloc[:18].max() <= rows["time"].iloc[18:].min()
        raw = task.to_original_units(np.concatenate([test["yc"][i], test["yt"][i]]))
        np.testing.assert_allclose(raw, rows[["PM2.5", "PM10"]].to_numpy(), rtol=1e-5)
    train = next(iter(task.dataset("train", batch_size=8, seed=3)))["window_start"].numpy()
    assert train.min() >= 0 and train.max() <= task.split_bounds["train"][1] - 24


@pytest.mark.parametrize("scaling", ["minmax", "zscore"])
def test_inputs_and_targets_scaled_with_training_statistics(uci_folder, uci_format, scaling):
    task = stations(uci_folder, scaling=scaling)
    table = expected_table(uci_folder)
    n_train = task.split_bounds["train"][1]
    times = table["time"]
    calendar = np.stack([times.dt.year, times.dt.month, times.dt.day, times.dt.hour, times.dt.dayofweek,
                         (times.dt.dayofweek >= 5)], 1).astype(float)
    raw = np.concatenate([calendar, table[["TEMP", "PRES", "DEWP", "RAIN", "WSPM"]].to_numpy(float)], 1)
    hours = ((times - times.iloc[0]).dt.total_seconds().to_numpy() / 3600.0)[:, None]
    latlon = np.array([BEIJING_COORDINATES[s] for s in table["station"]])

    def scaled(v, constant_ok=True):
        train = v[:n_train]
        if scaling == "minmax":
            offset, scale = train.min(0), train.max(0) - train.min(0)
        else:
            offset = train.sum(0) / len(train)
            scale = np.sqrt(((train - offset) ** 2).sum(0) / len(train))
        return (v - offset) / np.where(scale == 0, 1.0, scale)

    lo = task.split_bounds["val"][0]
    val = collect(task.dataset("val", batch_size=4))
    for i, start in enumerate(val["window_start"]):
        rows = slice(start, start + 18)
        np.testing.assert_allclose(val["xc"][i, :, :11], scaled(raw)[rows], atol=1e-5)
        np.testing.assert_allclose(val["tc"][i], scaled(hours)[rows], atol=1e-5)
        np.testing.assert_allclose(val["sc"][i], scaled(latlon)[rows], atol=1e-5)
        np.testing.assert_allclose(val["yc"][i], scaled(table[["PM2.5", "PM10"]].to_numpy(float))[rows],
                                   atol=1e-5)
        onehot = val["xc"][i, :, 11:]
        np.testing.assert_array_equal(onehot.sum(1), 1.0)
        np.testing.assert_array_equal(np.array(sorted(uci_format.wind))[onehot.argmax(1)], table["wd"].iloc[rows])
    assert lo == val["window_start"][0]
    if scaling == "minmax":  # the training rows span [0, 1] exactly
        assert task.y[:n_train].min() == 0.0 and task.y[:n_train].max() == 1.0


def test_space_options_and_the_great_circle(uci_folder, uci_format):
    latlon = stations(uci_folder, space="latlon")
    table = expected_table(uci_folder)
    np.testing.assert_allclose(latlon.s, [BEIJING_COORDINATES[s] for s in table["station"]], rtol=1e-6)
    xyz = stations(uci_folder, space="xyz")
    np.testing.assert_allclose(np.linalg.norm(xyz.s, axis=1), 1.0, atol=1e-6)
    a, b = xyz.s[:3].astype(np.float64), xyz.s[3:6].astype(np.float64)  # 3 stations, then the next hour
    d = np.degrees(2 * np.arcsin(np.linalg.norm(a[:, None] - b[None], axis=-1) / 2))  # from the chord
    pairs = np.array([BEIJING_COORDINATES[s] for s in uci_format.stations])
    ref = haversine_deg(np.repeat(pairs, 3, 0), np.tile(pairs, (3, 1))).reshape(3, 3)
    np.testing.assert_allclose(d, ref, atol=1e-4)  # float32 unit vectors: ~1e-5 degrees
    assert ref[0, 1] > 0.05  # distinct stations (about 6 km apart)


# ---------------------------------------------------------------------- missing values
def write_with_gaps(tmp_path, uci):
    """Station 0 misses PM2.5 at hour 5, TEMP at hour 9 and SO2 (unused) at hour 14."""
    folder = tmp_path / "gaps"
    frames = [uci.frame(k, s) for k, s in enumerate(uci.stations)]
    frames[0].loc[5, "PM2.5"] = np.nan
    frames[0].loc[9, "TEMP"] = np.nan
    frames[0].loc[14, "SO2"] = np.nan
    for f in frames:
        uci.write(folder, f)
    return folder, frames[0]


def test_nan_policies(tmp_path, uci_format):
    folder, first = write_with_gaps(tmp_path, uci_format)
    with pytest.raises(TaskError) as err:
        stations(folder, missing="error")
    msg = str(err.value)
    assert "PRSA_Data_Aotizhongxin" in msg and "'PM2.5'" in msg and "'TEMP'" in msg and "[5]" in msg
    assert "missing" in msg

    def kept(task):
        rows = task.table[task.table["station"] == "Aotizhongxin"]["file_row"].to_numpy()
        return set(range(uci_format.hours)) - set(rows)

    assert kept(stations(folder, missing="drop")) == {5, 9}  # SO2 is not used
    assert kept(stations(folder, missing="drop-any")) == {5, 9, 14}  # the reference's dropna()
    # "mask" (the default) keeps missing targets but refuses a missing input, naming it
    with pytest.raises(TaskError, match=r"PRSA_Data_Aotizhongxin.*column\(s\) \['TEMP'\] hold missing values "
                                        r"\(1 row\(s\) in all files\); column 'TEMP' in rows \[9\].*"
                                        r"'interpolate-mask'"):
        stations(folder, missing="mask")
    for policy, dropped in (("interpolate", {5}), ("interpolate-mask", set())):
        task = stations(folder, missing=policy)
        assert kept(task) == dropped  # a missing target is never invented: dropped, or kept as NaN
        row = int(np.flatnonzero((task.table["station"] == "Aotizhongxin") & (task.table["file_row"] == 9))[0])
        temps = first["TEMP"].to_numpy()
        n_train = task.split_bounds["train"][1]
        table = expected_table(folder)
        if dropped:
            table = table.dropna(subset=["PM2.5"]).reset_index(drop=True)
        col = table["TEMP"].to_numpy().copy()
        col[row] = (temps[8] + temps[10]) / 2  # linear in time between its neighbours
        lo, hi = col[:n_train].min(), col[:n_train].max()
        assert task.x[row, len(CALENDAR)] == pytest.approx((col[row] - lo) / (hi - lo), abs=1e-6)
    missing = np.argwhere(np.isnan(task.y))  # interpolate-mask: the one missing target value
    assert missing.tolist() == [[3 * 5, 0]]  # hour 5 of the first station (rows: 3 stations an hour)


#: (station number, hour, target) of the missing values of :func:`write_missing_targets`:
#: training rows (hours 0..95), validation (96..107) and test (108..119); the first
#: station's hour 112 and 114 fall in the first test window (context, target)
MISSING_TARGETS = [(0, 5, "PM2.5"), (0, 40, "PM2.5"), (0, 40, "PM10"), (1, 17, "PM10"), (2, 100, "PM10"),
                   (0, 112, "PM2.5"), (0, 114, "PM10")]


def write_missing_targets(tmp_path, uci, missing=MISSING_TARGETS):
    folder = tmp_path / "missing-targets"
    frames = [uci.frame(k, s) for k, s in enumerate(uci.stations)]
    for k, hour, col in missing:
        frames[k].loc[hour, col] = np.nan
    for f in frames:
        uci.write(folder, f)
    return folder


@pytest.mark.parametrize("scaling", ["minmax", "zscore"])
def test_mask_keeps_missing_targets_as_nan_scaled_with_the_observed_training_values(tmp_path, uci_format,
                                                                                     scaling):
    folder = write_missing_targets(tmp_path, uci_format)
    task = stations(folder, missing="mask", scaling=scaling)
    table = expected_table(folder)
    raw = table[["PM2.5", "PM10"]].to_numpy(float)
    assert len(task.table) == len(table) == 3 * uci_format.hours  # no row dropped
    assert sorted(map(tuple, np.argwhere(np.isnan(raw)).tolist())) == sorted(
        (3 * hour + k, ["PM2.5", "PM10"].index(col)) for k, hour, col in MISSING_TARGETS)
    train = table[["PM2.5", "PM10"]].iloc[:task.split_bounds["train"][1]]  # pandas skips NaN
    if scaling == "minmax":
        offset, scale = train.min().to_numpy(), (train.max() - train.min()).to_numpy()
    else:
        offset, scale = np.nanmean(train.to_numpy(), 0), np.nanstd(train.to_numpy(), 0)
    np.testing.assert_allclose(task.y_offset, offset, rtol=1e-12)
    np.testing.assert_allclose(task.y_scale, scale, rtol=1e-12)
    np.testing.assert_array_equal(np.isnan(task.y), np.isnan(raw))
    np.testing.assert_allclose(task.y, (raw - offset) / scale, rtol=1e-5, atol=1e-6)
    assert np.isfinite(task.x).all() and np.isfinite(task.s).all() and np.isfinite(task.t).all()
    for split in ("val", "test"):
        b = collect(task.dataset(split, batch_size=4))
        for i, start in enumerate(b["window_start"]):
            y = np.concatenate([b["yc"][i], b["yt"][i]])
            np.testing.assert_array_equal(np.isnan(y), np.isnan(raw[start:start + 24]))
            np.testing.assert_allclose(y, (raw[start:start + 24] - offset) / scale, rtol=1e-5, atol=1e-6)


def test_missing_targets_train_evaluate_and_plot_as_gaps(tmp_path, uci_format):
    import io

    import taylorformer as tfm

    folder = write_missing_targets(tmp_path, uci_format)
    task = stations(folder, missing="mask")
    test = next(iter(task.dataset("test", batch_size=2, num_batches=1)))
    assert int(test["window_start"][0]) == 324 and np.isnan(test["yc"][0]).any() and np.isnan(test["yt"][0]).any()
    spec = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
            "head": {"width": 16}}
    cfg = TrainConfig(steps=3, batch_size=4, val_every=3, val_batches=1, tensorboard=False, warmup_steps=0)
    trainer = Trainer(spec, task, cfg, out_dir=str(tmp_path / "run"))
    log = trainer.fit(verbose=0)
    assert int(log[-1]["step"]) == 3 and np.isfinite(float(log[-1]["val_loglik"]))
    assert np.isfinite(tfm.loglik(trainer.model, test).numpy()).all()
    result = evaluate(trainer.model, task, "test", batch_size=4)
    assert result["num_tasks"] == 5 and np.isfinite(result["loglik"]["mean"])
    fig = task.plot(trainer.model, test, num_tasks=1, num_samples=2)
    rows = expected_table(folder).iloc[324:348]  # the first test window; its first target: Aotizhongxin
    mine = (rows["station"] == "Aotizhongxin").to_numpy()
    history = fig.axes[0].get_lines()[0].get_ydata()  # PM2.5, the station's 6 context hours 108..113
    np.testing.assert_allclose(history, rows["PM2.5"].to_numpy()[:18][mine[:18]], rtol=1e-5)
    assert np.isnan(history[4]) and np.isfinite(np.delete(history, 4)).all()  # hour 112: a gap
    truth = {line.get_label(): line.get_ydata() for line in fig.axes[1].get_lines()}["truth"]  # PM10
    np.testing.assert_allclose(truth, rows["PM10"].to_numpy()[18:][mine[18:]], rtol=1e-5)
    assert np.isnan(truth[0]) and np.isfinite(truth[1])  # hour 114: a gap
    fig.savefig(io.BytesIO(), format="png")  # the gaps render


def test_mask_refuses_missing_inputs_and_targets_never_observed_in_training(tmp_path, uci_format):
    never = write_missing_targets(tmp_path, uci_format, [(k, h, "PM10") for k in range(3) for h in range(100)])
    with pytest.raises(TaskError, match=r"target column\(s\) \['PM10'\] of path .* have no observed \(non-NaN\) "
                                        r"value in the 288 training rows"):
        stations(never, missing="mask")
    for col, words in (("hour", r"A row without its station or time has no place.*'drop'"),
                       ("wd", r"These inputs cannot be missing.*'interpolate-mask'")):
        folder = tmp_path / f"no-{col}"
        frames = [uci_format.frame(k, s) for k, s in enumerate(uci_format.stations)]
        frames[1].loc[[12, 30], col] = np.nan
        for f in frames:
            uci_format.write(folder, f)
        for policy in ("mask", "interpolate-mask") if col == "hour" else ("mask",):
            with pytest.raises(TaskError, match=rf"PRSA_Data_Dongsi.*column\(s\) \['{col}'\] hold missing values "
                                                rf"\(2 row\(s\) in all files\); column '{col}' in rows \[12, 30\].*"
                                                rf"{words}"):
                stations(folder, missing=policy)


# ---------------------------------------------------------------------- bad input
def test_bad_files_and_columns_name_the_file_and_field(tmp_path, uci_folder, uci_format):
    with pytest.raises(TaskError, match="not found"):
        stations(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TaskError, match="holds no"):
        stations(empty)
    with pytest.raises(TaskError, match=r"no column 'PM25'.*did you mean 'PM2.5'"):
        stations(uci_folder, target_columns=["PM25"])
    bad = tmp_path / "bad"
    frame = uci_format.frame(0, "Dongsi")
    frame["WSPM"] = frame["WSPM"].astype(object)
    frame.loc[7, "WSPM"] = "calm"
    path = uci_format.write(bad, frame)
    with pytest.raises(TaskError) as err:
        stations(bad)
    assert str(path) in str(err.value) and "'WSPM'" in str(err.value) and "'calm'" in str(err.value) \
        and "row 7" in str(err.value)
    huge = tmp_path / "huge"
    frame = uci_format.frame(0, "Dongsi")
    frame.loc[[3, 4], "TEMP"] = [1e308, -1e308]  # the training range overflows float64
    path = uci_format.write(huge, frame)
    with pytest.raises(TaskError, match=f"{path.name}': column 'TEMP' is not finite once scaled .*row 3"):
        stations(huge, num_context=6, num_target=2)
    odd = tmp_path / "odd"
    uci_format.write(odd, uci_format.frame(0, "Atlantis"))
    with pytest.raises(TaskError, match=r"PRSA_Data_Atlantis.*station\(s\) \['Atlantis'\] have no coordinates"):
        stations(odd)
    twice = tmp_path / "twice"
    uci_format.write(twice, uci_format.frame(0, "Dongsi"))
    (twice / "copy.csv").write_bytes(next(twice.glob("PRSA*")).read_bytes())
    with pytest.raises(TaskError, match="repeat a \\(station, time\\) pair"):
        stations(twice)
    with pytest.raises(TaskError, match="the val split of .* has 36 rows .* needs .* = 40 \\+ 10 = 50"):
        stations(uci_folder, num_context=40, num_target=10)
    for key, value, words in [("space", "mercator", "'space'"), ("scaling", "robust", "'scaling'"),
                              ("split", [0.8, 0.3, 0.1], "'split'"), ("num_context", 0, "'num_context'"),
                              ("missing", "zero", "'missing'"), ("calendar", ["week"], "'calendar'"),
                              ("coordinates", {"Dongsi": [95.0, 0.0]}, "latitude"),
                              ("covariate_columns", ["TEMP", "PM10"], "more than one role")]:
        with pytest.raises(TaskError, match=words):
            stations(uci_folder, **{key: value})


@pytest.mark.parametrize("policy", MISSING_POLICIES)
def test_infinite_targets_are_refused_whatever_the_missing(tmp_path, uci_format, policy):
    folder = tmp_path / "inf"
    frame = uci_format.frame(0, "Dongsi")
    frame.loc[3, "PM10"] = np.inf
    path = uci_format.write(folder, frame)
    with pytest.raises(TaskError) as err:
        make_task("stations", {"path": str(path), "target_columns": "PM10", "calendar": ["hour"],
                               "coordinates": {"Dongsi": [39.929, 116.417]}, "num_context": 3,
                               "num_target": 1, "missing": policy})
    assert str(path) in str(err.value) and "'PM10'" in str(err.value) and "row 3" in str(err.value)


# ---------------------------------------------------------------------- named dataset
def uci_zip(folder, target):
    """The UCI archive's layout: an outer zip holding PRSA2017_Data_20130301-20170228.zip,
    which holds the folder PRSA_Data_20130301-20170228/ of station files."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        for p in sorted(folder.glob("*.csv")):
            z.write(p, f"PRSA_Data_20130301-20170228/{p.name}")
    with zipfile.ZipFile(target, "w") as z:
        z.writestr("PRSA2017_Data_20130301-20170228.zip", inner.getvalue())
    return target


def test_named_dataset_from_a_file_mirror(tmp_path, uci_folder, monkeypatch):
    mirror, cache = tmp_path / "mirror", tmp_path / "cache"
    mirror.mkdir()
    entry = datasets.DATASETS["beijing-air"]
    uci_zip(uci_folder, mirror / entry.filename)
    members = {p.name: "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in uci_folder.glob("*.csv")}
    monkeypatch.setitem(datasets.DATASETS, "beijing-air", datasets.DataArchive(
        entry.filename, entry.url, members, inner=entry.inner))
    monkeypatch.setenv(datasets.MIRROR_ENV, mirror.as_uri())
    monkeypatch.setenv(datasets.CACHE_ENV, str(cache))
    task = make_task("beijing-air", SMALL)
    folder = cache / "datasets" / "beijing-air"
    assert sorted(p.name for p in folder.iterdir()) == sorted(members)
    assert not (cache / "datasets" / entry.filename).exists()  # the archive is removed once checked
    from_path = stations(uci_folder)
    np.testing.assert_array_equal(task.y, from_path.y)
    np.testing.assert_array_equal(task.x, from_path.x)
    # a corrupt cached member is removed with an error naming it
    victim = folder / sorted(members)[1]
    victim.write_bytes(victim.read_bytes().replace(b"Dongsi", b"Dongsj", 1))
    with pytest.raises(TaskError, match=f"{victim.name}.*has sha256 .*expected"):
        make_task("beijing-air", SMALL)
    assert not victim.exists()
    make_task("beijing-air", SMALL)  # extracted again from the mirror's archive
    assert victim.is_file()
    # offline, no copy: the error names the URL and the folder for the file
    monkeypatch.setenv(datasets.MIRROR_ENV, (tmp_path / "empty-mirror").as_uri())
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache2"))
    with pytest.raises(TaskError) as err:
        make_task("beijing-air", SMALL)
    assert f"empty-mirror/{entry.filename}" in str(err.value) and str(tmp_path / "cache2" / "datasets") in str(err.value)


def test_pinned_archive_entry():
    entry = datasets.DATASETS["beijing-air"]
    assert entry.url.startswith("https://archive.ics.uci.edu/") and entry.inner.endswith(".zip")
    assert sorted(entry.members) == sorted(f"PRSA_Data_{s}_20130301-20170228.csv" for s in BEIJING_COORDINATES)
    assert all(d.startswith("sha256:") and len(d) == 71 for d in entry.members.values())


# ---------------------------------------------------------------------- end to end
@pytest.mark.parametrize("name", ["stations", "beijing-air"])
def test_task_contract(station_configs, name):
    testing.check_task(name, batch_size=2, **station_configs[name])


def test_groups_in_x_appends_space_and_time_to_x(uci_folder):
    """groups_in_x (TNP-D and PT-TE-TNP take every input in x, as the BSA-TNP authors' code):
    x = [fixed effects, s, t] of the same rows, no sc/st/tc/tt; the windows' sizes are the
    context_length and horizon overlap_block reads."""
    apart, joined = stations(uci_folder), stations(uci_folder, groups_in_x=True)
    assert joined.dim_x == apart.dim_x + 3 and joined.get_config()["groups_in_x"] is True
    assert (joined.context_length, joined.horizon) == (SMALL["num_context"], SMALL["num_target"])
    a = next(iter(apart.dataset("test", batch_size=3, num_batches=1)))
    b = next(iter(joined.dataset("test", batch_size=3, num_batches=1)))
    assert not {"sc", "st", "tc", "tt"} & set(b)
    for x, s, t in (("xc", "sc", "tc"), ("xt", "st", "tt")):
        np.testing.assert_array_equal(b[x].numpy(), np.concatenate([a[x], a[s], a[t]], -1))
    for key in ("yc", "yt", "window_start"):
        np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
    names = joined.data_description()["x_names"]
    assert names[-3:] == ["space_0", "space_1", "time"] and len(names) == joined.dim_x
    testing.check_task("beijing-air", batch_size=2, path=str(uci_folder), groups_in_x=True, **SMALL)
    with pytest.raises(TaskError, match="groups_in_x"):
        stations(uci_folder, groups_in_x=1)


def test_build_fit_evaluate_with_a_geodesic_bias(uci_folder, tmp_path):
    task = stations(uci_folder, space="latlon")
    spec = {"preset": "bsa-tnp", "encoder": {
        "layers": 1, "width": 16, "num_heads": 2, "head_dim": 8, "embed_widths": [16], "ffn_width": 16,
        "positions": "groups", "attention": {"name": "biased", "groups": [
            {"name": "space", "dims": [0, 1], "distance": "geodesic", "coords": "latlon"},
            {"name": "time", "dims": [2]}]}}, "head": {"width": 16}}
    cfg = TrainConfig(steps=1, batch_size=4, val_every=1, val_batches=1, checkpoint_every=1,
                      tensorboard=False, warmup_steps=0)
    trainer = Trainer(spec, task, cfg, out_dir=str(tmp_path / "run"))
    rows = trainer.fit(verbose=0)
    assert int(rows[-1]["step"]) == 1
    assert np.isfinite(float(rows[-1]["train_loss"])) and np.isfinite(float(rows[-1]["val_loglik"]))
    result = evaluate(trainer.model, task, "test", batch_size=4, num_batches=2)
    assert result["num_tasks"] == len(task.window_starts("test")) == 5  # windows at rows 324, 327, ..., 336
    assert np.isfinite(result["loglik"]["mean"])
    assert 0.0 <= result["coverage95"] <= 1.0


def test_plot_draws_one_station_per_window_in_original_units(uci_folder):
    from taylorformer import build_model

    task = stations(uci_folder)
    model = build_model("tnp-d", dim_x=task.dim_x, dim_y=task.dim_y,
                        encoder={"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}, head={"width": 16})
    batch = next(iter(task.dataset("test", batch_size=2, num_batches=1)))
    fig = task.plot(model, batch, num_tasks=2)
    axes = fig.get_axes()
    assert len(axes) == 2 * 2  # 2 windows x (PM2.5, PM10)
    start = int(batch["window_start"][0])
    rows = expected_table(uci_folder).iloc[start:start + 24]
    station = rows["station"].iat[18]
    assert axes[0].get_ylabel() == f"PM2.5 at {station}" and axes[0].get_xlabel() == "time"
    history = axes[0].get_lines()[0].get_ydata()  # the station's context rows, in file units
    np.testing.assert_allclose(history, rows["PM2.5"].iloc[:18][rows["station"].iloc[:18] == station], rtol=1e-5)


def test_a_time_column_with_utc_offsets_gives_the_same_task(tmp_path, uci_folder):
    """One date column with "+08:00" offsets instead of year/month/day/hour: the same
    rows, times and calendar inputs (the offset's wall-clock time), so the same batches."""
    folder = tmp_path / "offsets"
    folder.mkdir()
    for path in sorted(uci_folder.glob("*.csv")):
        frame = pd.read_csv(path)
        when = pd.to_datetime(frame[["year", "month", "day", "hour"]]).dt.tz_localize("+08:00")
        frame.insert(1, "when", [t.isoformat() for t in when])
        frame.to_csv(folder / path.name, index=False)
    plain, offsets = stations(uci_folder), stations(folder, time_columns=["when"])
    for split in ("val", "test"):  # every window once
        a, b = collect(plain.dataset(split, batch_size=4)), collect(offsets.dataset(split, batch_size=4))
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
