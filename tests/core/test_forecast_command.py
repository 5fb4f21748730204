"""``taylorformer forecast`` and ``tfm.forecast`` (:mod:`taylorformer.workflow.forecasting`).

References: the csv task's own :meth:`forecast_frame` / :meth:`forecast` on the window that
ends with the same history (mean, stddev, quantiles; an autoregressive model's paths with
the same seed), pandas' ``date_range`` continuation of the history's dates, and the
export's recorded position convention served through the SavedModel. One tiny TNP-D run
is trained per module; the other runs are untrained tiny models saved with their task's
normaliser (a run directory holding only a model file).
"""
import json
import os

import numpy as np
import pandas as pd
import pytest

import taylorformer as tfm
from taylorformer import cli
from taylorformer.normaliser import Normaliser
from taylorformer.tasks.csv_series import CSVSeriesTask
from taylorformer.tasks.user_data import from_dataframe
from taylorformer.workflow import runs, training

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16, "hidden_layers": 1}}
TINY_AR = {"preset": "tnp-a", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8,
                                          "ffn_width": 16}, "head": {"width": 16, "hidden_layers": 1}}
C, H, N = 6, 3, 60
OPTIONS = {"target_columns": ["load"], "date_column": "date", "covariate_columns": ["temp"],
           "calendar_features": ["hour"], "context_length": C, "horizon": H, "split": [0.5, 0.25, 0.25]}


def series_frame(dates):
    t = np.arange(len(dates), dtype=float)
    return pd.DataFrame({"date": dates, "load": 10 + np.sin(t / 3) + 0.05 * t, "temp": np.cos(t / 5)})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``(series CSV, run directory)``: TNP-D trained 2 steps on an hourly series with a
    covariate and the hour of day as inputs."""
    folder = tmp_path_factory.mktemp("forecast")
    path = folder / "series.csv"
    series_frame(pd.date_range("2024-01-01", periods=N, freq="h")).to_csv(path, index=False)
    run = folder / "run"
    training.train(model=TINY, task="csv", task_config={"path": str(path), **OPTIONS}, out_dir=str(run),
                   steps=2, batch_size=2, val_every=2, val_batches=1, verbose=0, tensorboard=False,
                   jit_compile=False, evaluate=False)
    return path, run


def saved_run(folder, task, spec):
    """A directory holding an untrained ``spec`` model with ``task``'s normaliser as best.keras."""
    model = tfm.build_model(spec, dim_x=task.dim_x, dim_y=task.dim_y)
    model.distribution(task.batch([0]))  # builds the weights
    model.normaliser = Normaliser.from_task(task, task.dim_x, task.dim_y)
    os.makedirs(folder, exist_ok=True)
    model.save(os.path.join(folder, "best.keras"))
    return folder


def history_for(source, start, out, future=H):
    """The rows of the CSV ``source`` up to the context end of the window at ``start``, then
    ``future`` rows with the targets emptied (their covariates kept), written to ``out``."""
    df = pd.read_csv(source, dtype={"date": str})
    end = start + C
    pd.concat([df.iloc[:end], df.iloc[end:end + future].assign(load=np.nan)]).to_csv(out, index=False)
    return out


def run_cli(argv, capsys):
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_forecast_equals_the_tasks_forecast_frame_on_the_same_window(trained, tmp_path, capsys):
    path, run = trained
    model, task, _ = runs.load_run(str(run))
    start = int(task.window_starts("test")[-1])
    history = history_for(path, start, tmp_path / "history.csv")
    output = tmp_path / "forecast.csv"
    code, out, err = run_cli(["forecast", run, "--history", history, "--output", output, "--samples", 4,
                              "--quantiles", 0.1, 0.5, 0.9, "--plot", tmp_path / "forecast.png"], capsys)
    assert code == 0, err
    written = pd.read_csv(output, dtype={"date": str})
    frame = task.forecast_frame(model, start, num_samples=0, quantiles=(0.1, 0.5, 0.9))
    stats = ["mean", "stddev", "q0.1", "q0.5", "q0.9"]
    assert list(written.columns) == (["date"] + [f"{s}_load" for s in stats]
                                     + [f"sample{k}_load" for k in range(4)] + ["quantile_method"])
    # the dates as the history writes them, continued
    assert list(written["date"]) == [d.strftime("%Y-%m-%d %H:%M:%S") for d in frame.index]
    for ours, theirs in zip(stats, ["mean", "std", "q0.1", "q0.5", "q0.9"]):
        np.testing.assert_allclose(written[f"{ours}_load"], frame[("load", theirs)], rtol=1e-5, err_msg=ours)
    assert set(written["quantile_method"]) == {frame.attrs["quantile_method"]}
    assert frame.attrs["quantile_method"].startswith("analytic")
    assert os.path.getsize(tmp_path / "forecast.png") > 0
    # the Python front door gives the table the file holds
    api = tfm.forecast(str(run), str(history), num_samples=4, quantiles=(0.1, 0.5, 0.9))
    assert list(api.columns) == list(written.columns)
    np.testing.assert_allclose(api[[f"{s}_load" for s in stats]], written[[f"{s}_load" for s in stats]], rtol=1e-12)
    # a shorter horizon forecasts the window's first steps
    short = tfm.forecast(str(run), str(history), horizon=2)
    np.testing.assert_allclose(short["mean_load"], frame[("load", "mean")][:2], rtol=1e-5)


def test_truth_is_matched_by_date_drawn_and_scored_beside_persistence(trained, tmp_path, capsys):
    """``--truth``: the rows of the forecast steps (with rows before and after them),
    matched by date; the printed errors equal NumPy's of the written
    mean and of the last history value; a file with none of the steps is one error line."""
    path, run = trained
    _, task, _ = runs.load_run(str(run))
    start = int(task.window_starts("test")[-1])
    history = history_for(path, start, tmp_path / "history.csv")
    source = pd.read_csv(path, dtype={"date": str})
    steps = source.iloc[start + C:start + C + H]
    source.iloc[start + C - 2:start + C + H + 1].to_csv(tmp_path / "truth.csv", index=False)   # a row more each side
    output = tmp_path / "forecast.csv"
    code, out, err = run_cli(["forecast", run, "--history", history, "--output", output, "--truth",
                              tmp_path / "truth.csv", "--plot", tmp_path / "forecast.png"], capsys)
    assert code == 0, err
    mean = pd.read_csv(output)["mean_load"].to_numpy()
    observed = steps["load"].to_numpy()
    last = source["load"].to_numpy()[start + C - 1]
    line = [t for t in out.splitlines() if t.startswith("against the truth")]
    assert line == [f"against the truth (load, {H} step(s)): mean absolute error {np.abs(mean - observed).mean():.4g}; "
                    f"persistence (the last history value) {np.abs(last - observed).mean():.4g}"]
    source.iloc[:H].to_csv(tmp_path / "early.csv", index=False)
    code, _, err = run_cli(["forecast", run, "--history", history, "--output", tmp_path / "other.csv", "--truth",
                            tmp_path / "early.csv"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "early.csv" in lines[0] and "no observed value" in lines[0], err
    assert not os.path.exists(tmp_path / "other.csv")


def test_an_autoregressive_forecast_draws_the_tasks_paths_with_the_same_seed(trained, tmp_path, monkeypatch):
    """The forecast's paths are those of the task's window keyed 0 (the window at row 0),
    so the same seed gives the same paths; mean, stddev and quantiles are Monte Carlo over
    DEFAULT_PATHS of them (20 here, for time), as forecast_frame's."""
    from taylorformer.workflow import forecasting

    monkeypatch.setattr(forecasting, "DEFAULT_PATHS", 20)
    drawn = forecasting.DEFAULT_PATHS
    path, _ = trained
    task = CSVSeriesTask(path=str(path), **OPTIONS)
    run = saved_run(tmp_path / "ar", task, TINY_AR)
    history = history_for(path, 0, tmp_path / "history.csv")
    frame = tfm.forecast(str(run), str(history), num_samples=3, seed=5)
    model = runs.load_model_file(str(run))
    paths = task.forecast(model, 0, num_samples=drawn, seed=5)["samples"][:, 0, :, 0]  # [S, H]
    np.testing.assert_allclose(frame[[f"sample{k}_load" for k in range(3)]].to_numpy().T, paths[:3], rtol=1e-4)
    for column, statistic in (("mean_load", paths.mean(0)), ("stddev_load", paths.std(0)),
                              ("q0.05_load", np.quantile(paths, 0.05, axis=0)),
                              ("q0.95_load", np.quantile(paths, 0.95, axis=0))):
        np.testing.assert_allclose(frame[column], statistic, rtol=1e-4, err_msg=column)
    assert frame.attrs["quantile_method"] == f"Monte Carlo over {drawn} sampled paths"


PARIS = pd.date_range("2024-10-25 05:00", periods=N, freq="h", tz="Europe/Paris")


@pytest.mark.parametrize("frequency, dates, text, calendar", [
    ("hourly", pd.date_range("2024-01-01", periods=N, freq="h"), "%Y-%m-%d %H:%M:%S", "hour"),
    ("daily", pd.date_range("2023-12-01", periods=N, freq="D"), "%Y-%m-%d", "day_of_week"),
    ("monthly", pd.date_range("2019-01-01", periods=N, freq="MS"), "%Y-%m", "month"),
    # the history ends at 01:00 CEST on 27 October: an hour later the clocks go back, so the
    # steps are 02:00+02:00, 02:00+01:00 (the same wall-clock hour again), 03:00+01:00
    ("hourly in Europe/Paris across the DST change", PARIS, None, "hour"),
])
def test_dates_round_trip_and_continue_as_pandas_date_range(frequency, dates, text, calendar, tmp_path, capsys):
    frame = series_frame(dates).drop(columns="temp")
    options = {**OPTIONS, "covariate_columns": [], "calendar_features": [calendar]}
    csv = tmp_path / "series.csv"
    written = frame.assign(date=dates.strftime(text)) if text else frame
    written.to_csv(csv, index=False)
    if dates.tz is not None:  # the zone's name comes with a DataFrame (a CSV holds offsets)
        task = from_dataframe(frame, **options)
    else:
        task = CSVSeriesTask(path=str(csv), **options)
    run = saved_run(tmp_path / "run", task, TINY)
    start = int(np.flatnonzero(dates == pd.Timestamp("2024-10-27 01:00", tz="Europe/Paris"))[0]) - C + 1 \
        if dates.tz is not None else 20
    history = tmp_path / "history.csv"
    pd.read_csv(csv, dtype={"date": str}).iloc[:start + C].to_csv(history, index=False)
    output = tmp_path / "forecast.csv"
    code, _, err = run_cli(["forecast", run, "--history", history, "--output", output], capsys)
    assert code == 0, err
    got = pd.read_csv(output, dtype={"date": str})["date"]
    expected = pd.date_range(dates[start + C - 1], periods=H + 1, freq=dates.freq)[1:]
    assert list(expected) == list(dates[start + C:start + C + H])
    if text:
        assert list(got) == list(expected.strftime(text)), frequency
    else:  # pandas' text of zoned dates: the offset of each
        assert list(got) == [str(d) for d in expected]
        assert list(got) == ["2024-10-27 02:00:00+02:00", "2024-10-27 02:00:00+01:00", "2024-10-27 03:00:00+01:00"]
        in_memory = tfm.forecast(str(run), frame.iloc[:start + C])  # a DataFrame keeps its zone
        assert str(in_memory["date"].dt.tz) == "Europe/Paris"
        assert list(in_memory["date"]) == list(expected)
    # the calendar inputs are the task's: the same forecast as its window's
    reference = task.forecast_frame(runs.load_model_file(str(run)), start, num_samples=0)
    np.testing.assert_allclose(pd.read_csv(output)["mean_load"], reference[("load", "mean")], rtol=1e-5)


def bad_histories(path, folder):
    """``{case: (history file, extra arguments, text the error holds)}``."""
    def write(name, frame):
        frame.to_csv(folder / name, index=False)
        return folder / name

    full = pd.read_csv(history_for(path, 30, folder / "good.csv"), dtype={"date": str})
    past, future = full.iloc[:-H], full.iloc[-H:]
    return {
        "fewer rows than the context": (write("short.csv", full.iloc[-H - C + 1:]), [],
                                        "last context_length = 6 rows: give at least 6"),
        "irregular dates": (write("gap.csv", full.drop(index=full.index[-H - 3])), [], "irregular"),
        "a missing column": (write("no_temp.csv", full.drop(columns="temp")), [], "has no column 'temp'"),
        "no future covariates": (write("no_future.csv", past), [], "needs future covariates ['temp']"),
        "future dates that do not continue": (
            write("late.csv", pd.concat([past, future.assign(date=future["date"].str.replace("-02 ", "-05 "))])),
            [], "not 2024-01-02"),
        "dates with a zone for a run without": (write("zoned.csv", full.assign(date=full["date"] + "+01:00")), [],
                                                "its dates have the zone UTC+01:00 but the run's dates had none"),
        "a horizon longer than the run's": (folder / "good.csv", ["--horizon", H + 1], "trained to forecast 3 steps"),
    }


def test_bad_histories_exit_2_with_one_error_line_naming_the_file(trained, tmp_path, capsys):
    path, run = trained
    for case, (history, extra, text) in bad_histories(path, tmp_path).items():
        output = tmp_path / "out.csv"
        code, out, err = run_cli(["forecast", run, "--history", history, "--output", output, *extra], capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (case, err)
        named = str(run) if "horizon" in case else os.path.basename(history)
        assert named in lines[0] and text in lines[0], (case, lines[0])
        assert not output.exists(), case
    history = tmp_path / "good.csv"
    before = history.read_bytes()
    code, _, err = run_cli(["forecast", run, "--history", history, "--output", history], capsys)
    assert code == 2 and "is the file the command reads" in err and str(history) in err
    assert history.read_bytes() == before


def test_the_export_records_the_position_convention_a_user_can_build_inputs_from(trained, tmp_path):
    """Inputs built from the export's ``series_inputs`` alone (positions, covariates in data
    units, the hour's sin/cos computed here with NumPy, the lead input as documented) served by the SavedModel give the
    task's forecast of the window."""
    import tensorflow as tf

    path, run = trained
    model, task, _ = runs.load_run(str(run))
    served = runs.export_run(str(run), str(tmp_path / "served"))
    with open(os.path.join(served, "assets", "normaliser.json")) as f:
        layout = json.load(f)["series_inputs"]
    assert layout["columns"] == ["position", "temp", "hour_sin", "hour_cos", "lead"]   # the csv task's default
    assert layout["calendar"]["hour"] == {"v": "date.hour", "P": 24}
    start = int(task.window_starts("test")[0])
    np.testing.assert_array_equal(layout["context_positions"] + layout["target_positions"], task.window(start)["x"])
    rows = pd.read_csv(path).iloc[start:start + C + H]
    hour = pd.DatetimeIndex(rows["date"]).hour.to_numpy()
    k = np.arange(C + H) - (C - 1)                      # rows after the last context row
    leads = np.sign(k) * np.log1p(np.abs(k)) / np.log1p(max(C - 1, H))
    np.testing.assert_allclose(layout["context_leads"] + layout["target_leads"], leads, rtol=1e-6)  # float32
    x = np.stack([layout["context_positions"] + layout["target_positions"], rows["temp"],
                  np.sin(2 * np.pi * hour / 24), np.cos(2 * np.pi * hour / 24),
                  layout["context_leads"] + layout["target_leads"]], -1).astype(np.float32)
    yc = rows["load"].to_numpy(np.float32)[:C, None]
    out = tf.saved_model.load(served).signatures["serving_default"](
        xc=tf.constant(x[None, :C]), yc=tf.constant(yc[None]), xt=tf.constant(x[None, C:]))
    frame = task.forecast_frame(model, start, num_samples=0, quantiles=())
    np.testing.assert_allclose(out["mean"].numpy()[0, :, 0], frame[("load", "mean")], rtol=1e-4)
