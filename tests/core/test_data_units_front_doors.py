"""Data units from the model file alone, through every front door.

For each way in (``from_arrays`` with sets of points and with a series, ``from_xarray``,
``from_dataframe``, a ``csv`` task and a named dataset, ``ettm2`` on a local copy), a tiny
TNP-D is trained two steps from Python; then ``info``, ``predict --input`` / ``predict --grid``, ``place``, ``export`` and ``plot``
run through the command line in a fresh process, which has only the run directory. Every
number written is checked in the data's units against an independent computation: the
model's own prediction on inputs standardised with the training split's mean and std
computed here with NumPy, mapped back by hand. Runs trained on task objects (in-memory
data) work with every command but ``plot``, which needs their data and says so.

A model file without a normaliser (written before they were saved) is never read as data
units: ``predict --grid`` refuses it (tests/core/test_fields.py), ``predict --input`` and
``export`` warn and label their outputs as the model's units.
"""
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from taylorformer.cli import main
from taylorformer.models import build_model, load_model
from taylorformer.prediction.placement import place
from taylorformer.prediction.query import predict_query

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}
TRAIN = {"evaluate": False, "steps": 2, "batch_size": 2, "val_every": 2, "val_batches": 1, "checkpoint_every": 2,
         "tensorboard": False, "verbose": 0}
SERIES = {"context_length": 12, "horizon": 4, "lead_input": False}  # the inputs below: the position alone

#: the fresh process: the command line on argv lists, each command's code and output as JSON
DRIVER = textwrap.dedent("""
    import contextlib, io, json, sys
    from taylorformer.cli import main

    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        results.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
    print("RESULTS " + json.dumps(results))
""")


def run_cli(commands):
    """Run the ``taylorformer`` argv lists in one fresh Python process; their results."""
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(commands)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULTS ")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(line[len("RESULTS "):])


def train_run(task, out, task_config=None):
    from taylorformer.workflow import training

    training.train(TINY, task, task_config=task_config, out_dir=str(out), **TRAIN)
    return out


# ----------------------------------------------------------------------------- the data
def level_frame(n=240):
    """A daily series far from zero (mean ~404, std ~3): z-units could not pass for it."""
    t = np.arange(n)
    return pd.DataFrame({"date": pd.date_range("2021-01-01", periods=n, freq="D"),
                         "level": 400.0 + 0.05 * t + 3.0 * np.sin(2 * np.pi * t / 30)})


def ett_frame(rows=2000):
    """A CSV in ETTm2.csv's format (``date`` every 15 minutes, six loads, the target OT)."""
    rng = np.random.default_rng(0)
    t = np.arange(rows)
    frame = pd.DataFrame({"date": pd.date_range("2016-07-01", periods=rows, freq="15min")
                          .strftime("%Y-%m-%d %H:%M:%S")})
    for j, column in enumerate(["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]):
        frame[column] = np.round(20 + 5 * np.sin(2 * np.pi * t / 96 + j) + np.cumsum(rng.normal(0, 0.3, rows)), 3)
    return frame


def series_files(root, values, name):
    """Context (the last 12 values, positions -1 ..) and inputs (the 4 next positions) CSVs
    of a series model, raw units; returns ``(xc [12, 1], yc [12, 1], xt [4, 1])``."""
    positions = np.linspace(-1.0, 1.0, SERIES["context_length"] + SERIES["horizon"])
    xc, xt = positions[:12, None], positions[12:, None]
    yc = np.asarray(values[-12:], np.float64)[:, None]
    pd.DataFrame({"position": xc[:, 0], name: yc[:, 0]}).to_csv(root / "context.csv", index=False)
    pd.DataFrame({"position": xt[:, 0]}).to_csv(root / "inputs.csv", index=False)
    return xc, yc, xt


def population(values):
    """Mean and population std per column, NumPy's, of the training values ``[n, k]``."""
    return np.mean(values, 0), np.std(values, 0)


# ----------------------------------------------------------------------------- front doors
def door_arrays(root):
    from taylorformer.tasks import from_arrays

    rng = np.random.default_rng(1)
    x = np.c_[100 + 10 * rng.normal(size=300), -50 + 5 * rng.normal(size=300)]
    y = 6.0 + 0.8 * np.sin(x[:, :1] / 10) + 0.1 * rng.normal(size=(300, 1))
    task = from_arrays(x, y, num_context=(3, 10), num_target=(1, 10))
    train = np.concatenate(task.groups["train"])
    (x_mean, x_std), (y_mean, y_std) = population(x[train]), population(y[train])
    xc, yc, xt = x[:20], y[:20], x[280:290]
    pd.DataFrame({"x0": xc[:, 0], "x1": xc[:, 1], "y": yc[:, 0]}).to_csv(root / "context.csv", index=False)
    pd.DataFrame({"x0": xt[:, 0], "x1": xt[:, 1]}).to_csv(root / "inputs.csv", index=False)
    return {"run": train_run(task, root / "run"), "rebuildable": False, "names": (["x0", "x1"], ["y"]),
            "x": (x_mean, x_std), "y": (y_mean, y_std), "query": (xc, yc, xt)}


def _series_door(root, task, task_config, values, name, train_rows):
    y_mean, y_std = population(np.asarray(values[:train_rows], np.float64)[:, None])
    return {"run": train_run(task, root / "run", task_config), "rebuildable": task_config is not None,
            "names": (["position"], [name]), "x": (np.zeros(1), np.ones(1)), "y": (y_mean, y_std),
            "query": series_files(root, values, name)}


def door_dataframe(root):
    from taylorformer.tasks import from_dataframe

    frame = level_frame()
    task = from_dataframe(frame, "level", date_column="date", split=[0.6, 0.2, 0.2], **SERIES)
    return _series_door(root, task, None, frame["level"].to_numpy(), "level", math.floor(0.6 * len(frame)))


def door_arrays_series(root):
    """``from_arrays(y=series, dates=...)``: the csv task on arrays held in memory."""
    from taylorformer.tasks import from_arrays

    frame = level_frame()
    values = frame["level"].to_numpy()
    task = from_arrays(y=values, dates=frame["date"].to_numpy(), names=["level"], split=[0.6, 0.2, 0.2], **SERIES)
    return _series_door(root, task, None, values, "level", math.floor(0.6 * len(frame)))


def door_csv(root):
    frame = level_frame()
    frame.to_csv(root / "series.csv", index=False)
    config = {"path": str(root / "series.csv"), "target_columns": "level", "date_column": "date",
              "split": [0.6, 0.2, 0.2], **SERIES}
    return _series_door(root, "csv", config, frame["level"].to_numpy(), "level", math.floor(0.6 * len(frame)))


def door_named(root):
    """The named dataset ``ettm2`` on a local copy (never the network); its preset's split
    is the task's, read from a task built here."""
    from taylorformer.task import make_task

    frame = ett_frame()
    frame.to_csv(root / "ETTm2.csv", index=False)
    config = {"path": str(root / "ETTm2.csv"), **SERIES}
    _, train_rows = make_task("ettm2", config).split_bounds["train"]
    return _series_door(root, "ettm2", config, frame["OT"].to_numpy(), "OT", train_rows)


def door_xarray(root):
    """A gridded field in kelvin (mean ~280, std ~5) held in memory."""
    from taylorformer.tasks import from_xarray

    rng = np.random.default_rng(0)
    lat, lon = np.linspace(60, -60, 5), np.arange(0, 360, 60.0)
    values = 280.0 + 5 * rng.normal(size=(30, 5, 6))
    data = xr.Dataset({"t2m": (("time", "latitude", "longitude"), values, {"units": "K"})},
                      coords={"time": pd.date_range("2020-01-01", periods=30, freq="D"),
                              "latitude": ("latitude", lat, {"units": "degrees_north"}),
                              "longitude": ("longitude", lon, {"units": "degrees_east"})})
    task = from_xarray(data, variable="t2m", window_length=2, num_context=[4, 8], num_target=6)
    lo, hi = task.split_bounds["train"]
    grid_lat, grid_lon = np.linspace(50, -50, 4), np.arange(20.0, 340.0, 80.0)
    truth = 280.0 + 10 * np.cos(np.radians(grid_lat))[:, None] + np.sin(np.radians(grid_lon))[None]
    xr.Dataset({"t2m": (("latitude", "longitude"), truth, {"units": "K", "long_name": "2 m temperature"})},
               coords={"latitude": ("latitude", grid_lat, {"units": "degrees_north"}),
                       "longitude": ("longitude", grid_lon, {"units": "degrees_east"})}
               ).to_netcdf(root / "grid.nc", engine="h5netcdf")
    points = pd.DataFrame({"lat": rng.uniform(-60, 60, 15), "lon": rng.uniform(0, 300, 15)})
    points["t2m"] = 280 + 5 * rng.normal(size=15)
    points.to_csv(root / "points.csv", index=False)
    return {"run": train_run(task, root / "run"), "rebuildable": False, "names": (None, ["t2m"]),
            "y": (np.array([values[lo:hi].mean()]), np.array([values[lo:hi].std()])), "points": points,
            "grid": (grid_lat, grid_lon)}


DOORS = {"from_arrays": door_arrays, "from_arrays_series": door_arrays_series, "from_dataframe": door_dataframe, "csv": door_csv, "named": door_named,
         "from_xarray": door_xarray}


# ----------------------------------------------------------------------------- checks
def expected_prediction(model, door):
    """The model's predictive mean and stddev ``[Nt, Dy]`` on the query standardised here,
    mapped back to the data's units by hand."""
    (xo, xs), (yo, ys) = door["x"], door["y"]
    xc, yc, xt = door["query"]
    z = {"xc": ((xc - xo) / xs)[None].astype(np.float32), "yc": ((yc - yo) / ys)[None].astype(np.float32),
         "xt": ((xt - xo) / xs)[None].astype(np.float32)}
    out = predict_query(model, z, verbose=0)
    return out["mean"][0] * ys + yo, out["stddev"][0] * ys, z


def check_series_or_sets(door, root, results):
    """info, predict --input, place, export and plot of a non-gridded run, in data units."""
    info, predicted, placed, exported, plotted = results
    model = load_model(os.path.join(door["run"], "best.keras"))
    x_names, y_names = door["names"]
    (yo, ys) = door["y"]
    # info: the model file's normaliser, the training split's statistics
    assert info["code"] == 0, info["err"]
    normaliser = json.loads(info["out"])["normaliser"]
    assert normaliser["x_names"] == x_names and normaliser["y_names"] == y_names
    np.testing.assert_allclose(normaliser["y_offset"], yo, rtol=1e-9)
    np.testing.assert_allclose(normaliser["y_scale"], ys, rtol=1e-9)
    np.testing.assert_allclose(normaliser["x_offset"], door["x"][0], rtol=1e-9, atol=1e-12)
    # predict --input: raw units in and out, columns named by the variables
    assert predicted["code"] == 0, predicted["err"]
    mean, std, z = expected_prediction(model, door)
    written = pd.read_csv(root / "pred.csv")
    name = y_names[0]
    np.testing.assert_allclose(written[f"mean_{name}"], mean[:, 0], rtol=1e-4)
    np.testing.assert_allclose(written[f"stddev_{name}"], std[:, 0], rtol=1e-4)
    np.testing.assert_allclose(written[x_names].to_numpy(), door["query"][2], rtol=1e-6)
    lo, hi = door["query"][1].min(), door["query"][1].max()
    assert lo - 10 * (hi - lo) < written[f"mean_{name}"].mean() < hi + 10 * (hi - lo)  # data units, not z
    # place: the chosen candidates as given, variances in the data's squared units
    assert placed["code"] == 0, placed["err"]
    table = pd.read_csv(root / "place.csv")
    reference = place(model, z["xt"][0], (z["xc"][0], z["yc"][0]), k=2)
    np.testing.assert_array_equal(table["candidate"], reference.table["candidate"])
    np.testing.assert_allclose(table["acquisition"], reference.table["acquisition"] * ys[0] ** 2, rtol=1e-3)
    np.testing.assert_allclose(table[x_names].to_numpy(), door["query"][2][table["candidate"]], rtol=1e-6)
    # export: the SavedModel serves raw units
    assert exported["code"] == 0, exported["err"]
    import tensorflow as tf

    served = tf.saved_model.load(str(root / "saved")).signatures["serving_default"](
        **{k: tf.constant(v[None], tf.float32) for k, v in zip(("xc", "yc", "xt"), door["query"])})
    np.testing.assert_allclose(served["mean"].numpy()[0], mean, rtol=1e-4)
    np.testing.assert_allclose(served["stddev"].numpy()[0], std, rtol=1e-4)
    # plot: needs the training data, which only a rebuildable task gives back
    if door["rebuildable"]:
        assert plotted["code"] == 0 and (root / "plot.png").stat().st_size > 0, plotted["err"]
    else:
        assert plotted["code"] == 2 and "pass the same task object" in plotted["err"], plotted["err"]
        assert plotted["err"].startswith("error: ") and plotted["err"].count("\n") == 1


def check_gridded(door, root, results):
    """info, predict --grid (in kelvin), export (refused: feature groups) and plot (needs
    the in-memory data) of a gridded run trained on an xarray object."""
    info, field, exported, plotted = results
    assert info["code"] == 0, info["err"]
    normaliser = json.loads(info["out"])["normaliser"]
    assert normaliser["y_names"] == ["t2m"] and normaliser["y_units"] == ["K"]
    assert normaliser["coordinates"]["time_input"] == 1.0 and normaliser["coordinates"]["span"] == [120.0, 300.0]
    assert field["code"] == 0, field["err"]
    model = load_model(os.path.join(door["run"], "best.keras"))
    (yo, ys), points = door["y"], door["points"]
    np.testing.assert_allclose(normaliser["y_offset"], yo, rtol=1e-9)
    lat, lon = door["grid"]
    cells = np.stack(np.meshgrid(lat, lon, indexing="ij"), -1).reshape(-1, 2)
    xt = np.c_[cells, np.ones(len(cells))].astype(np.float32)[None]
    xc = np.c_[points[["lat", "lon"]].to_numpy(), np.ones(len(points))].astype(np.float32)[None]
    batch = {"xc": xc, "yc": ((points[["t2m"]].to_numpy() - yo) / ys).astype(np.float32)[None], "xt": xt,
             "sc": xc[..., :2], "tc": xc[..., 2:], "st": xt[..., :2], "tt": xt[..., 2:],
             "yt": np.zeros((1, len(cells), 1), np.float32)}
    dist = model.distribution(batch)
    with xr.open_dataset(root / "field.nc") as out:
        np.testing.assert_allclose(out.t2m_mean.values.reshape(-1), np.asarray(dist.mean())[0, :, 0] * ys + yo,
                                   rtol=1e-5)
        np.testing.assert_allclose(out.t2m_stddev.values.reshape(-1), np.asarray(dist.stddev())[0, :, 0] * ys,
                                   rtol=1e-4)
        assert out.t2m_mean.attrs["units"] == "K" and 200 < float(out.t2m_mean.mean()) < 360
    assert exported["code"] == 2 and "feature groups" in exported["err"], exported["err"]
    assert plotted["code"] == 2 and "pass the same task object" in plotted["err"], plotted["err"]


#: doors marked ``long`` (CI time): the first two make the CSV series task that the ``csv``
#: door makes, from a DataFrame or arrays whose readers tests/tasks/test_front_doors.py covers;
#: ``named`` is the ``ettm2`` preset on a local copy: the ``csv`` door's reading code with the
#: preset's options (tests/tasks/test_csv_task.py builds the presets)
LONG_DOORS = {"from_dataframe", "from_arrays_series", "named"}


@pytest.mark.slow  # trains a tiny model, then a fresh process runs the command line
@pytest.mark.parametrize("door", [pytest.param(d, marks=pytest.mark.long) if d in LONG_DOORS else d for d in DOORS])
def test_every_front_door_predicts_places_and_exports_in_data_units(door, tmp_path):
    found = DOORS[door](tmp_path)
    run = str(found["run"])
    if door == "from_xarray":
        results = run_cli([["info", run, "--json"],
                           ["predict", run, "--grid", str(tmp_path / "grid.nc"), "--context",
                            str(tmp_path / "points.csv"), "--output", str(tmp_path / "field.nc"), "--padding", "inf",
                            "--quiet"],
                           ["export", run, "--output", str(tmp_path / "saved")],
                           ["plot", run, "--out", str(tmp_path / "plot.png")]])
        check_gridded(found, tmp_path, results)
        return
    results = run_cli([["info", run, "--json"],
                       ["predict", run, "--input", str(tmp_path / "inputs.csv"), "--context",
                        str(tmp_path / "context.csv"), "--output", str(tmp_path / "pred.csv"), "--quiet"],
                       ["place", run, "--candidates", str(tmp_path / "inputs.csv"), "--context",
                        str(tmp_path / "context.csv"), "--k", "2", "--output", str(tmp_path / "place.csv")],
                       ["export", run, "--output", str(tmp_path / "saved")],
                       ["plot", run, "--out", str(tmp_path / "plot.png")]])
    check_series_or_sets(found, tmp_path, results)


def test_a_model_file_without_a_normaliser_is_labelled_as_the_models_units(tmp_path, capsys):
    """An old model file (no normaliser): ``predict --input`` warns and writes the model's
    units under the generic names, never a variable's; ``export`` warns and the SavedModel's
    normaliser is the identity named ``x``/``y``."""
    model = build_model({**TINY, "dim_x": 1, "dim_y": 1})
    run = tmp_path / "old"
    run.mkdir()
    model.save(run / "model.keras")
    pd.DataFrame({"x": [-1.0, 0.0], "y": [0.3, -0.2]}).to_csv(tmp_path / "context.csv", index=False)
    pd.DataFrame({"x": [0.5]}).to_csv(tmp_path / "inputs.csv", index=False)
    with pytest.warns(UserWarning, match="no saved normaliser.*in the model's units"):
        code = main(["predict", str(run), "--checkpoint", "model", "--input", str(tmp_path / "inputs.csv"),
                     "--context", str(tmp_path / "context.csv"), "--output", str(tmp_path / "pred.nc"), "--quiet"])
    assert code == 0, capsys.readouterr().err
    with xr.open_dataset(tmp_path / "pred.nc") as out:
        assert out.attrs["units"].startswith("the model's units") and "units" not in out["mean"].attrs
        z = predict_query(model, {"xc": np.array([[[-1.0], [0.0]]], np.float32),
                                  "yc": np.array([[[0.3], [-0.2]]], np.float32),
                                  "xt": np.array([[[0.5]]], np.float32)}, verbose=0)
        np.testing.assert_allclose(out["mean"].values, z["mean"], rtol=1e-5)
    with pytest.warns(UserWarning, match="no saved normaliser.*the model's own units"):
        code = main(["export", str(run), "--checkpoint", "model", "--output", str(tmp_path / "saved")])
    assert code == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "saved" / "assets" / "normaliser.json").read_text())
    assert record["y_names"] == ["y"] and record["y_offset"] == [0.0] and record["y_scale"] == [1.0]
