"""The normaliser inside the model file (:mod:`taylorformer.normaliser`,
:mod:`taylorformer.model_card`): it round-trips through the saved file and a copy of the
file alone; raw data in gives raw units out (predict, ``predict_data``, evaluate, plot),
equal to the standardised prediction mapped back by hand with the task's own mean and
std (NumPy); ``taylorformer info`` prints the card and normaliser; a model file written
before normalisers were saved loads and behaves as before."""
import io
import json
import os
import shutil
import warnings
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pandas as pd
import pytest

from taylorformer.workflow import training
from taylorformer.cli import main
from taylorformer.errors import ModelFileError, SpecError
from taylorformer.model_card import read_model_file, run_info
from taylorformer.models import build_model, load_model
from taylorformer.normaliser import Normaliser
from taylorformer.prediction.query import predict_data, predict_query
from taylorformer.workflow.runs import evaluate_run, load_run, record_evaluation

LAYERS = {"encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}, "head": {"width": 16}}
TINY = {"preset": "tnp-d", **LAYERS}
OLD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "saved_v0_1",
                   "tnp-d.keras")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A briefly trained TNP-D on a CSV series far from zero (CO2-like, ~400) with a raw
    covariate (temperature, ~285), both standardised by the task."""
    root = tmp_path_factory.mktemp("normaliser")
    t = np.arange(200)
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=200, freq="D"),
                          "co2": 400.0 + 0.05 * t + 3.0 * np.sin(2 * np.pi * t / 30),
                          "temp": 285.0 + 4.0 * np.cos(2 * np.pi * t / 50)})
    frame.to_csv(root / "series.csv", index=False)
    config = {"path": str(root / "series.csv"), "target_columns": "co2", "date_column": "date",
              "covariate_columns": ["temp"], "context_length": 12, "horizon": 4, "split": [0.6, 0.2, 0.2],
              "lead_input": False}  # the inputs below are built by hand: position and covariate
    training.train(TINY, "csv", task_config=config, out_dir=str(root / "run"), steps=2, batch_size=4,
                   val_every=2, val_batches=1, checkpoint_every=2, tensorboard=False, verbose=0)
    return root / "run"


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _random_normaliser(rng, dx=2, dy=3):
    return Normaliser(rng.normal(size=dx), rng.uniform(0.1, 5, dx), rng.normal(size=dy) * 100,
                      rng.uniform(0.1, 5, dy), ["lat", "lon"], ["t2m", "sst", "u"], ["degrees_north", None],
                      ["K", "K", "m s-1"], time={"origin": "2020-01-01", "frequency": "D"},
                      coordinates={"space": ["lat", "lon"]}, task={"name": "gridded", "config": {"a": 1}})


def test_maps_and_json_round_trip():
    rng = np.random.default_rng(0)
    norm = _random_normaliser(rng)
    again = Normaliser.from_dict(json.loads(json.dumps(norm.to_dict())))
    for key in ("x_offset", "x_scale", "y_offset", "y_scale"):
        np.testing.assert_array_equal(getattr(again, key), getattr(norm, key))
    assert again.to_dict() == norm.to_dict() and again.y_labels() == ["t2m [K]", "sst [K]", "u [m s-1]"]
    x, y = rng.normal(size=(4, 5, 2)) * 50, rng.normal(size=(4, 5, 3)) * 300
    np.testing.assert_allclose(norm.x_to_model(x), (x - norm.x_offset) / norm.x_scale)
    np.testing.assert_allclose(norm.x_from_model(norm.x_to_model(x)), x, rtol=1e-12)
    np.testing.assert_allclose(norm.y_from_model(norm.y_to_model(y)), y, rtol=1e-12)
    np.testing.assert_allclose(norm.spread_from_model(np.ones((2, 3))), np.tile(norm.y_scale, (2, 1)))


@pytest.mark.parametrize("change, field", [({"y_scale": [1.0, 0.0, 2.0]}, "y_scale"),
                                           ({"x_offset": [float("nan"), 0.0]}, "x_offset"),
                                           ({"y_names": ["a"]}, "y_names"),
                                           ({"x_units": [1, 2]}, "x_units"),
                                           ({"format": 99}, "format"),
                                           ({"coordinates": {"span": [1.0, -2.0]}}, "span"),
                                           ({"coordinates": {"span": "wide"}}, "span"),
                                           ({"coordinates": {"space": "lat"}}, "space"),
                                           ({"coordinates": {"geographic": "yes"}}, "geographic"),
                                           ({"coordinates": {"time_input": float("inf")}}, "time_input")])
def test_bad_saved_normaliser_is_refused(change, field):
    data = {**_random_normaliser(np.random.default_rng(1)).to_dict(), **change}
    with pytest.raises(SpecError, match=field):
        Normaliser.from_dict(data, where="model file m.keras: normaliser")


def test_model_file_holds_the_task_normaliser_and_card(run, tmp_path):
    """The saved normaliser equals the task's own statistics (read from the task, NumPy),
    and travels with a copy of the model file alone."""
    _, task, _ = load_run(str(run))
    found = read_model_file(run / "best.keras")
    norm = found["normaliser"]
    np.testing.assert_allclose(norm.y_offset, task.mean, rtol=1e-12)
    np.testing.assert_allclose(norm.y_scale, task.std, rtol=1e-12)
    np.testing.assert_allclose(norm.x_offset, [0.0, task.covariate_mean[0]], rtol=1e-12)
    np.testing.assert_allclose(norm.x_scale, [1.0, task.covariate_std[0]], rtol=1e-12)
    assert norm.x_names == ["position", "temp"] and norm.y_names == ["co2"]
    assert norm.time["origin"].startswith("2021-01-01") and norm.time["frequency"] == "D"
    assert norm.task["name"] == "csv" and norm.task["config"]["covariate_columns"] == ["temp"]
    card = found["card"]
    assert card["data"]["split_sizes"] == {"train": 120, "val": 40, "test": 40}
    assert card["data"]["checksum"].startswith("sha256:") and card["metrics"]["step"] == 2
    assert card["versions"]["tensorflow"] and card["versions"]["python"]
    copy = tmp_path / "elsewhere.keras"
    shutil.copy(run / "best.keras", copy)
    model = load_model(str(copy))
    assert model.normaliser.to_dict() == norm.to_dict() and model.model_card == card


def test_raw_units_in_raw_units_out(run, tmp_path):
    """predict (CLI, CSV files named by the variables) and predict_data on raw CO2 and
    temperature equal predict_query on the query standardised by hand, mapped back by hand."""
    model, task, _ = load_run(str(run))
    rng = np.random.default_rng(0)
    xc = np.stack([np.linspace(-1, 0.4, 12), 285 + 3 * rng.normal(size=12)], -1)
    yc = 405 + 2 * rng.normal(size=(12, 1))
    xt = np.stack([np.linspace(0.6, 1, 4), 285 + 3 * rng.normal(size=4)], -1)
    z = {"xc": np.stack([xc[:, 0], (xc[:, 1] - task.covariate_mean[0]) / task.covariate_std[0]], -1)[None],
         "yc": ((yc - task.mean) / task.std)[None], "xt": np.stack(
             [xt[:, 0], (xt[:, 1] - task.covariate_mean[0]) / task.covariate_std[0]], -1)[None]}
    ref = predict_query(model, {k: v.astype(np.float32) for k, v in z.items()}, verbose=0)
    mean, std = ref["mean"] * task.std + task.mean, ref["stddev"] * task.std
    quantiles = ref["quantiles"] * task.std + task.mean
    out = predict_data(model, xc, yc, xt)
    np.testing.assert_allclose(out["mean"], mean[0], rtol=1e-5)  # one task in, one task out
    np.testing.assert_allclose(out["stddev"], std[0], rtol=1e-5)
    np.testing.assert_allclose(out["quantiles"], quantiles[:, 0], rtol=1e-5)
    assert out["y_names"] == ["co2"] and out["mean"].min() > 300  # ppm, not z-scores

    pd.DataFrame({"position": xc[:, 0], "temp": xc[:, 1], "co2": yc[:, 0]}).to_csv(tmp_path / "ctx.csv", index=False)
    pd.DataFrame({"position": xt[:, 0], "temp": xt[:, 1]}).to_csv(tmp_path / "in.csv", index=False)
    code, _, err = _cli("predict", str(run), "--input", str(tmp_path / "in.csv"), "--context",
                        str(tmp_path / "ctx.csv"), "--output", str(tmp_path / "out.csv"))
    assert code == 0, err
    written = pd.read_csv(tmp_path / "out.csv")
    assert list(written.columns[:4]) == ["position", "temp", "mean_co2", "stddev_co2"]
    np.testing.assert_allclose(written["mean_co2"], mean[0, :, 0], rtol=1e-5)
    np.testing.assert_allclose(written["stddev_co2"], std[0, :, 0], rtol=1e-5)


def test_evaluate_reports_data_units(run):
    """data_units: RMSE of the mean mapped back against the raw test values (by hand, on
    the same first batch), and the log-likelihood less log(std) (change of variables)."""
    model, task, _ = load_run(str(run))
    result = evaluate_run(str(run), num_batches=1, batch_size=8)
    batch = next(iter(task.dataset("test", batch_size=8, num_batches=1)))
    mean = np.asarray(model.predict_distribution(batch).mean())
    raw_err = task.to_original_units(mean) - task.to_original_units(batch["yt"].numpy())
    data = result["data_units"]
    np.testing.assert_allclose(data["outputs"]["co2"]["rmse"], np.sqrt(np.mean(raw_err ** 2)), rtol=1e-5)
    np.testing.assert_allclose(data["outputs"]["co2"]["mae"], np.mean(np.abs(raw_err)), rtol=1e-5)
    np.testing.assert_allclose(data["loglik"]["mean"], result["loglik"]["mean"] - np.log(task.std[0]),
                               rtol=1e-9)
    assert "standardised" in result["units"]


def test_info_prints_card_and_normaliser(run, tmp_path):
    code, text, _ = _cli("info", str(run))
    assert code == 0
    assert "co2" in text and "offset 40" in text and "sha256:" in text and "tensorflow" in text
    assert "frequency D" in text and "splits (rows): train 120, val 40, test 40" in text
    code, text, _ = _cli("info", str(run / "model.keras"), "--json")
    info = json.loads(text)
    assert code == 0 and info["normaliser"]["y_names"] == ["co2"] and info["card"]["data"]["task"] == "csv"
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip at all")
    for target in (tmp_path / "missing.keras", bad, tmp_path):
        code, text, err = _cli("info", str(target))
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and str(target) in err


def test_final_evaluation_recorded_in_the_card(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    before = load_model(str(copy / "best.keras"))
    result = evaluate_run(str(copy), num_batches=1)
    assert record_evaluation(str(copy), result) == [str(copy / "best.keras")]
    card = read_model_file(copy / "best.keras")["card"]
    assert card["evaluation"]["loglik"] == result["loglik"]
    after = load_model(str(copy / "best.keras"))  # the weights are untouched
    for a, b in zip(before.weights, after.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    text = _cli("info", str(copy))[1]
    assert "final evaluation (test split; loglik, rmse in the model's standardised units)" in text
    assert "in the data's units: loglik" in text


def test_predict_data_keeps_the_inputs_unbatched(run):
    """Unbatched raw inputs give unbatched predictions: a leave-one-out loop with ``yc [N]``
    gives one mean per point, ``[N]``, equal to predict_query on each point's context
    standardised and mapped back by hand (NumPy); ``[N, D]`` inputs give ``[Nt, Dy]``,
    batched ones ``[B, Nt, Dy]``."""
    model, task, _ = load_run(str(run))
    rng = np.random.default_rng(1)
    n = 6
    x = np.stack([np.linspace(-1, 0.4, n), 285 + 3 * rng.normal(size=n)], -1)
    y = 405 + 2 * rng.normal(size=n)
    mean, std = float(np.ravel(task.mean)[0]), float(np.ravel(task.std)[0])

    def model_x(a):
        return np.stack([a[:, 0], (a[:, 1] - task.covariate_mean[0]) / task.covariate_std[0]], -1)[None]

    by_hand = [predict_query(model, {"xc": model_x(np.delete(x, i, 0)).astype(np.float32),
                                     "yc": ((np.delete(y, i) - mean) / std)[None, :, None].astype(np.float32),
                                     "xt": model_x(x[i:i + 1]).astype(np.float32)}, verbose=0)["mean"][0, 0, 0]
               for i in range(n)]
    loo = np.concatenate([predict_data(model, np.delete(x, i, 0), np.delete(y, i), x[i:i + 1])["mean"]
                          for i in range(n)])
    assert loo.shape == (n,) and (y - loo).shape == (n,)
    np.testing.assert_allclose(loo, np.array(by_hand) * std + mean, rtol=1e-5)

    out = predict_data(model, x[:4], y[:4, None], x[4:], num_samples=3)
    assert out["mean"].shape == out["stddev"].shape == (2, 1)
    assert out["quantiles"].shape == (3, 2, 1) and out["samples"].shape == (3, 2, 1)
    assert predict_data(model, x[:4], y[:4], x[4:], num_samples=3)["samples"].shape == (3, 2)
    batched = predict_data(model, np.stack([x[:4]] * 2), np.stack([y[:4, None]] * 2), x[4:])
    assert batched["mean"].shape == (2, 2, 1) and batched["quantiles"].shape == (3, 2, 2, 1)
    np.testing.assert_allclose(batched["mean"][1], out["mean"], rtol=1e-6)


def test_old_model_file_loads_without_normaliser():
    """A file of taylorformer 0.1.0 (before normalisers): loads, says so, predicts in its
    own units (predict_data warns and equals predict_query)."""
    model = load_model(OLD)
    assert model.normaliser is None and model.model_card is None
    info = run_info(OLD)
    assert info["normaliser"] is None and "no normaliser saved" in info["notes"][0]
    rng = np.random.default_rng(0)
    xc, yc, xt = rng.normal(size=(5, 1)), rng.normal(size=(5, 1)), rng.normal(size=(3, 1))
    with pytest.warns(UserWarning, match="no saved normaliser"):
        out = predict_data(model, xc, yc, xt)
    ref = predict_query(model, {"xc": xc[None].astype(np.float32), "yc": yc[None].astype(np.float32),
                                "xt": xt[None].astype(np.float32)}, verbose=0)
    np.testing.assert_allclose(out["mean"], ref["mean"][0], rtol=1e-6)
    assert "note: no normaliser saved" in _cli("info", OLD)[1]


def test_plot_draws_in_data_units_with_labels():
    """The default plot of a model with a normaliser: axes named with units, the context
    drawn at its raw values (x_from_model / y_from_model of the batch, NumPy)."""
    model = build_model(TINY, dim_x=1, dim_y=1)
    model.normaliser = Normaliser([10.0], [2.0], [280.0], [5.0], ["depth"], ["temperature"], ["m"], ["K"])
    from taylorformer.plotting import plot_predictions

    rng = np.random.default_rng(0)
    batch = {"xc": rng.normal(size=(1, 6, 1)).astype(np.float32), "yc": rng.normal(size=(1, 6, 1)).astype(np.float32),
             "xt": rng.normal(size=(1, 4, 1)).astype(np.float32), "yt": rng.normal(size=(1, 4, 1)).astype(np.float32)}
    fig = plot_predictions(model, batch, num_tasks=1)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "depth [m]" and ax.get_ylabel() == "temperature [K]"
    context = next(c for c in ax.collections if c.get_label() == "context").get_offsets()
    np.testing.assert_allclose(context[:, 0], 10 + 2 * batch["xc"][0, :, 0], rtol=1e-6)
    np.testing.assert_allclose(context[:, 1], 280 + 5 * batch["yc"][0, :, 0], rtol=1e-6)


def test_export_reads_the_saved_normaliser(run, tmp_path):
    """A run whose data file is gone exports with the model file's normaliser (the task is
    not rebuilt)."""
    import tensorflow as tf

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    os.rename(run.parent / "series.csv", run.parent / "moved.csv")
    try:
        code, _, err = _cli("export", str(copy), "--output", str(tmp_path / "served"))
    finally:
        os.rename(run.parent / "moved.csv", run.parent / "series.csv")
    assert code == 0, err
    saved = json.loads(tf.saved_model.load(str(tmp_path / "served")).normaliser_json.numpy().decode())
    expected = read_model_file(copy / "best.keras")["normaliser"]
    assert saved["y_offset"] == expected.y_offset.tolist() and saved["x_scale"] == expected.x_scale.tolist()


def test_model_normaliser_dims_checked():
    model = build_model(TINY, dim_x=1, dim_y=1)
    with pytest.raises(SpecError, match="dims"):
        model.normaliser = Normaliser.identity(2, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.normaliser = None  # no normaliser: allowed
    with pytest.raises(ModelFileError):
        read_model_file(OLD + ".missing")


def test_gridded_names_units_and_coordinates_from_netcdf_attributes(tmp_path):
    """A field's variable and coordinate ``units`` attributes, its dims and its time axis
    reach the normaliser; y's offset and scale are the task's mean and std."""
    import xarray as xr

    from taylorformer.tasks.gridded import GriddedTask

    rng = np.random.default_rng(0)
    times = pd.date_range("2020-01-01", periods=20, freq="6h")
    field = xr.Dataset({"t2m": (("time", "latitude", "longitude"), 280 + 5 * rng.normal(size=(20, 4, 5)),
                                {"units": "K"})},
                       coords={"time": times, "latitude": ("latitude", [50.0, 51.0, 52.0, 53.0],
                                                           {"units": "degrees_north"}),
                               "longitude": ("longitude", np.arange(5.0), {"units": "degrees_east"})})
    field.to_netcdf(tmp_path / "field.nc")
    task = GriddedTask(path=str(tmp_path / "field.nc"), num_context=(2, 4), num_target=4)
    norm = Normaliser.from_task(task, task.dim_x, task.dim_y)
    assert norm.y_labels() == ["t2m [K]"]
    assert norm.x_labels() == ["latitude [degrees_north]", "longitude [degrees_east]", "window_position"]
    assert norm.coordinates["space"] == ["latitude", "longitude"] and norm.coordinates["time"] == "time"
    assert norm.time["frequency"].lower() == "6h" and norm.time["origin"].startswith("2020-01-01")
    assert norm.groups == ["sc", "tc", "st", "tt"] and norm.identity_x
    # what predict_field needs from the model file alone: the training span and the time input
    assert norm.coordinates["span"] == [3.0, 4.0] and norm.coordinates["space_inputs"] == task.space
    assert norm.coordinates["time_input"] == float(task.time_inputs()[-1])
    np.testing.assert_allclose([norm.y_offset[0], norm.y_scale[0]],
                               [np.ravel(task.mean)[0], np.ravel(task.std)[0]], rtol=1e-12)


def test_span_of_a_simulated_task_and_latlon_to_xyz():
    """A task without a description records its context box's span; unit vectors of
    latitude/longitude (one definition, which the sphere task imports)."""
    from taylorformer.normaliser import latlon_to_xyz
    from taylorformer.task import make_task
    from taylorformer.tasks import sphere

    assert Normaliser.from_task(make_task("gp-2d-bsa"), 2, 1).coordinates == {"span": [4.0, 4.0]}
    assert sphere.latlon_to_xyz is latlon_to_xyz
    np.testing.assert_allclose(latlon_to_xyz(np.array([[0.0, 0.0], [0.0, 90.0], [90.0, 0.0]])), np.eye(3),
                               atol=1e-15)


def _rewrite_config(path, change):
    """Rewrite the model file ``path`` with ``change(model config dict)`` applied to the
    ``config`` of its config.json (weights untouched)."""
    import zipfile

    with zipfile.ZipFile(path) as source:
        items = [(item, source.read(item)) for item in source.infolist()]
    with zipfile.ZipFile(path, "w") as target:
        for item, data in items:
            if item.filename == "config.json":
                config = json.loads(data)
                change(config["config"])
                data = json.dumps(config).encode()
            target.writestr(item, data)


def _rewrite_normaliser(path, change):
    """Rewrite the model file ``path`` with ``change(normaliser dict)`` applied to its
    saved normaliser."""
    _rewrite_config(path, lambda config: change(config["normaliser"]))


def test_evaluate_takes_data_units_from_the_model_file(run, tmp_path):
    """evaluate's data units are the model file's normaliser's, not the task's: a model
    file whose y scale is doubled reports twice the RMSE in data units, the same model-unit
    metrics."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    _rewrite_normaliser(copy / "best.keras", lambda n: n.update(y_scale=[2 * n["y_scale"][0]]))
    before = evaluate_run(str(run), num_batches=1, batch_size=8)
    after = evaluate_run(str(copy), num_batches=1, batch_size=8)
    assert after["rmse"] == before["rmse"]
    np.testing.assert_allclose(after["data_units"]["outputs"]["co2"]["rmse"],
                               2 * before["data_units"]["outputs"]["co2"]["rmse"], rtol=1e-9)


def _strip_to_old_format(path):
    """Rewrite the model file ``path`` as the code before normalisers wrote it: its
    config.json without ``normaliser`` and ``model_card`` (weights untouched)."""
    def strip(config):
        for key in ("normaliser", "model_card"):
            config.pop(key)

    _rewrite_config(path, strip)


def test_old_format_run_directory_behaves_as_before(run, tmp_path):
    """A run directory whose model files predate normalisers: info says so; predict takes
    and writes the model's units (a warning says so), equal to predict_query."""
    old = tmp_path / "old"
    shutil.copytree(run, old)
    for name in ("best.keras", "model.keras"):
        _strip_to_old_format(old / name)
    code, text, _ = _cli("info", str(old))
    assert code == 0 and "note: no normaliser saved" in text and "normaliser:" not in text
    model, _, _ = load_run(str(old))
    assert model.normaliser is None
    # evaluate: the data's units from the run's task, as the model file's would give
    old_units = evaluate_run(str(old), num_batches=1, batch_size=8)["data_units"]
    new_units = evaluate_run(str(run), num_batches=1, batch_size=8)["data_units"]
    np.testing.assert_equal(old_units, new_units)  # NaN-aware: a missing error bar is NaN on both
    rng = np.random.default_rng(1)
    z = {"xc": rng.normal(size=(1, 6, 2)).astype(np.float32), "yc": rng.normal(size=(1, 6, 1)).astype(np.float32),
         "xt": rng.normal(size=(1, 3, 2)).astype(np.float32)}
    np.savez(tmp_path / "query.npz", **z)
    with pytest.warns(UserWarning, match="no saved normaliser"):
        code, _, err = _cli("predict", str(old), "--input", str(tmp_path / "query.npz"), "--output",
                            str(tmp_path / "out.npz"))
    assert code == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["mean"], predict_query(model, z, verbose=0)["mean"],
                               rtol=1e-5)
