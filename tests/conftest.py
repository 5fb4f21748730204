"""Shared fixtures: fake installed distributions for registry tests, TF settings, an
offline mirror of the named datasets, and synthetic station files in the UCI Beijing format."""
import csv
import importlib
import os
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small Cholesky factorisations in tasks


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """Write a fake installed distribution (``*.dist-info`` + modules) onto ``sys.path``.

    ``fake_dist(name, version, modules={"mod": "source"}, entry_points={"ep": "mod"})``
    """
    monkeypatch.syspath_prepend(str(tmp_path))
    created = []

    def make(name, version="1.0", modules=None, entry_points=None):
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        lines = ["[taylorformer]"] + [f"{ep} = {target}" for ep, target in (entry_points or {}).items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for mod, source in (modules or {}).items():
            (tmp_path / f"{mod}.py").write_text(textwrap.dedent(source))
            created.append(mod)
        importlib.invalidate_caches()
        return info

    yield make
    for mod in created:
        sys.modules.pop(mod, None)
    importlib.invalidate_caches()


@pytest.fixture(autouse=True)
def _no_xla_unless_asked(monkeypatch):
    """Training runs in tests use XLA only where a test asks for it (``jit_compile=True``):
    compiling the train and eval steps of every short run would double the suite's time.
    The ``"auto"`` rule itself is tested in ``tests/core/test_training.py``."""
    from taylorformer.workflow import training

    rule = training.resolve_jit_compile
    monkeypatch.setattr(training, "resolve_jit_compile",
                        lambda value, strategy: rule(False if value == "auto" else value, strategy))


#: the real data files beside this checkout (in CI too, never on a user's machine)
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
#: mirror file name -> its place in SHARED_DATA
MIRRORED = {"ETTh1.csv": "ett/ETTh1.csv", "exchange_rate.txt.gz": "exchange_rate/exchange_rate.txt.gz"}


@pytest.fixture
def shared_data():
    """:data:`SHARED_DATA` (skips the test where this checkout has none beside it)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("no ../shared/data beside this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def data_mirror(tmp_path_factory):
    """Named datasets come from a flat ``file://`` mirror of SHARED_DATA into a fresh cache,
    for this process and its subprocesses: tests never touch the network, and the
    download-and-check path runs on the real files."""
    from taylorformer.tasks.datasets import CACHE_ENV, MIRROR_ENV

    mirror = tmp_path_factory.mktemp("mirror")
    for name, place in MIRRORED.items():
        if (SHARED_DATA / place).is_file():
            (mirror / name).symlink_to(SHARED_DATA / place)
    saved = {key: os.environ.get(key) for key in (MIRROR_ENV, CACHE_ENV)}
    os.environ[MIRROR_ENV] = mirror.as_uri()
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("cache"))
    yield mirror
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


#: the synthetic station files: three of the UCI stations, 120 hours each
UCI_STATIONS = ("Aotizhongxin", "Dongsi", "Huairou")
UCI_HOURS = 120
UCI_COLUMNS = ["No", "year", "month", "day", "hour", "PM2.5", "PM10", "SO2", "NO2", "CO", "O3", "TEMP",
               "PRES", "DEWP", "RAIN", "wd", "WSPM", "station"]
WIND = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"]


def uci_station_frame(k, station, hours=UCI_HOURS):
    """Rows of one station in the UCI columns; values are simple functions of the hour ``t``
    and the station number ``k``."""
    import pandas as pd

    t = np.arange(hours)
    times = pd.date_range("2013-03-01", periods=hours, freq="h")
    return pd.DataFrame({
        "No": t + 1, "year": times.year, "month": times.month, "day": times.day, "hour": times.hour,
        "PM2.5": 10.0 + 3 * k + (t % 17) * 1.5, "PM10": 20.0 + k + (t % 11) * 2.0,
        "SO2": 5.0 + t % 3, "NO2": 7.0, "CO": 300.0, "O3": 70.0 + k,
        "TEMP": -5.0 + 0.1 * t + k, "PRES": 1020.0 - 0.01 * t, "DEWP": -18.0 + 0.05 * t,
        "RAIN": np.where(t % 23 == 0, 0.5, 0.0), "wd": [WIND[(i + k) % len(WIND)] for i in t],
        "WSPM": 1.0 + (t % 5) * 0.3, "station": station})


def write_uci_station(folder, frame):
    """Write ``frame`` as the UCI files are written (quoted text, ``NA``, CRLF line ends)
    under the UCI file name of its station; returns the path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"PRSA_Data_{frame['station'].iat[0]}_20130301-20170228.csv"
    frame[UCI_COLUMNS].to_csv(path, index=False, na_rep="NA", quoting=csv.QUOTE_NONNUMERIC, lineterminator="\r\n")
    return path


@pytest.fixture(scope="session")
def uci_format():
    """The writers of synthetic UCI-format station files (``frame``, ``write``) and their
    ``stations``, ``hours`` and ``wind`` directions."""
    return types.SimpleNamespace(frame=uci_station_frame, write=write_uci_station, stations=UCI_STATIONS,
                                 hours=UCI_HOURS, wind=WIND)


@pytest.fixture(scope="session")
def station_configs(tmp_path_factory):
    """Valid configs of the station tasks (``stations``, ``beijing-air``) on a folder of
    synthetic UCI-format files (never modify it: the session shares it)."""
    from taylorformer.tasks.stations import BEIJING_COORDINATES

    folder = tmp_path_factory.mktemp("uci-stations")
    for k, station in enumerate(UCI_STATIONS):
        write_uci_station(folder, uci_station_frame(k, station))
    small = {"path": str(folder), "num_context": 18, "num_target": 6, "eval_stride": 3}
    generic = {**small, "target_columns": "PM2.5", "calendar": ["hour", "day_of_week"],
               "covariate_columns": ["TEMP"],
               "coordinates": {s: list(BEIJING_COORDINATES[s]) for s in UCI_STATIONS}}
    return {"beijing-air": small, "stations": generic}


@pytest.fixture(scope="session")
def gridded_configs(tmp_path_factory):
    """A valid config of the ``gridded`` task on a small synthetic ERA5-style netCDF file
    (30 days, 5 x 6 cells; never modify it: the session shares it)."""
    import pandas as pd
    import xarray as xr

    path = tmp_path_factory.mktemp("gridded") / "field.nc"
    field = np.random.default_rng(0).normal(size=(30, 5, 6))
    xr.Dataset({"t2m": (("time", "latitude", "longitude"), field)},
               coords={"time": pd.date_range("2020-01-01", periods=30, freq="D"),
                       "latitude": np.linspace(60, -60, 5), "longitude": np.arange(0, 360, 60.0)}
               ).to_netcdf(path, engine="h5netcdf")
    return {"gridded": {"path": str(path), "window_length": 2, "num_context": [4, 8], "num_target": 6}}


#: the columns of ETTm2.csv after its date
ETT_COLUMNS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]


@pytest.fixture
def ettm2_csv(tmp_path):
    """A function ``(rows=2000, seed=0) -> path`` writing a CSV in ETTm2.csv's format
    (``date`` every 15 minutes, six loads and the oil temperature OT: a daily cycle of 96
    steps plus a random walk) into ``tmp_path``; ETTm2 itself is not available offline."""
    import pandas as pd

    def write(rows=2_000, seed=0):
        rng = np.random.default_rng(seed)
        t = np.arange(rows)
        frame = pd.DataFrame({"date": pd.date_range("2016-07-01", periods=rows, freq="15min")
                              .strftime("%Y-%m-%d %H:%M:%S")})
        for j, column in enumerate(ETT_COLUMNS):
            frame[column] = np.round(20 + 5 * np.sin(2 * np.pi * t / 96 + j)
                                     + np.cumsum(rng.normal(0, 0.3, rows)), 3)
        path = tmp_path / f"ETTm2-{rows}-{seed}.csv"
        frame.to_csv(path, index=False)
        return str(path)

    return write


#: the client columns of the synthetic UCI electricity file (the paper's MT_323 among them)
UCI_ELECTRICITY_CLIENTS = ("MT_001", "MT_322", "MT_323")


def write_uci_electricity(path, start="2014-01-01", days=80, clients=UCI_ELECTRICITY_CLIENTS, seed=0):
    """Write a file in the format of the UCI ``LD2011_2014.txt``: a quoted empty header
    cell then the quoted client names, ``;``-separated; one row per quarter-hour stamped at
    its end (the first ``start 00:15:00``, the last ``start + days 00:00:00``), quoted time
    stamps, kW values with a ``,`` decimal mark and plain ``0`` where a client uses nothing
    (the first client is zero for the first day, as clients created late are in the file).
    Values: a daily cycle of 96 quarter-hours plus noise, different per client. Returns
    ``(path, kW [rows, clients] float64)`` as written."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    stamps = pd.date_range(pd.Timestamp(start) + pd.Timedelta(minutes=15), periods=days * 96, freq="15min")
    t = np.arange(len(stamps))
    kw = np.stack([np.round(50 + 10 * k + 20 * np.sin(2 * np.pi * t / 96 + k) + rng.gamma(2.0, 2.0, len(t)), 6)
                   for k in range(len(clients))], 1)
    kw[:96, 0] = 0.0
    text = np.char.replace(kw.astype(str), ".", ",")
    text[kw == 0] = "0"
    lines = [";".join(['""'] + [f'"{c}"' for c in clients])]
    lines += [f'"{s}";' + ";".join(row) for s, row in zip(stamps.strftime("%Y-%m-%d %H:%M:%S"), text)]
    Path(path).write_text("\n".join(lines) + "\n")
    return str(path), kw


@pytest.fixture(scope="session")
def uci_electricity_config(tmp_path_factory):
    """A valid ``uci-electricity`` config on a synthetic file (:func:`write_uci_electricity`,
    80 days from 2014-01-01): its path and the period it holds."""
    path, _ = write_uci_electricity(tmp_path_factory.mktemp("uci") / "LD2011_2014.txt")
    return {"path": str(path), "start": "2014-01-01", "end": "2014-03-22"}


@pytest.fixture
def uci_electricity_txt(tmp_path):
    """A function ``(**options) -> (path, kW)`` writing a synthetic UCI electricity file
    (:func:`write_uci_electricity`) into ``tmp_path``; the real file is not available offline."""
    def write(name="LD2011_2014.txt", **options):
        return write_uci_electricity(tmp_path / name, **options)

    return write
