"""Forecast a series from its recent history with a run's model: ``taylorformer forecast``
and :func:`forecast` (``tfm.forecast``).

The history is a CSV file (or a ``pandas.DataFrame``) laid out as the data the run's csv
series task (:class:`~taylorformer.tasks.csv_series.CSVSeriesTask` and its presets) read,
and read by the same code (:func:`~taylorformer.tasks.csv_series.read_series`): the same
date column, target and covariate columns, ``column_names`` for a file without a header,
and missing-value rule. Everything else comes from the run's model file alone (its
normaliser: the task's options, standardisation, time zone and frequency), never from the
training data:

* **Context**: the last ``context_length`` rows that hold a target value (fewer is an error
  saying how many are needed). Rows at the end of the file whose targets are all empty are
  **future rows**: they give the covariates of the forecast steps, which a model trained
  with ``covariate_columns`` needs (one future row per step; none is an error saying so).
* **Dates**: the forecast steps continue the history's dates at its frequency, the one
  pandas infers from the history's dates (``pandas.infer_freq``), else the run's recorded
  one; a recorded frequency that differs, or context dates that are not regular at it, is
  an error naming the file and the first irregular row. With a time zone, the dates are read in
  the run's zone (the zone its calendar features were computed in) and written in it: an
  hourly series steps by absolute hours across a daylight-saving change, a daily or
  monthly one by calendar days or months. Naive dates for a zoned run, or zoned dates for
  a naive one, are refused.
* **Horizon**: at most the run's ``horizon`` ``H``; the model's inputs are those of the
  task's window (:func:`~taylorformer.tasks.csv_series.window_positions`: position
  ``-1 + 2 j / (C + H - 1)`` of window row ``j``, then the covariates and calendar
  features), the first ``horizon`` target rows of it.
* **Output**: one row per forecast step: the date (the step number ``step`` for a run
  without dates), then per target ``mean_<col>``, ``stddev_<col>``, ``q<level>_<col>``,
  ``sample<k>_<col>`` (with ``num_samples``) and ``quantile_method``, in the data's units.
  A conditional model's mean, standard deviation and quantiles are its predictive's own
  (analytic) and its samples independent draws per step; an autoregressive model's are
  Monte Carlo estimates over ``max(num_samples, DEFAULT_PATHS)`` joint paths, of which
  the first ``num_samples`` are written. The numbers equal
  :meth:`~taylorformer.tasks.csv_series.CSVSeriesTask.forecast_frame`'s for the window
  that ends with the same history, with the same seed.
"""
import functools
import os
import re
import warnings

import numpy as np

from taylorformer.checks import check_int
from taylorformer.errors import TaskError
from taylorformer.files import Outputs, atomic_path, not_a_file
from taylorformer.workflow.runs import check_levels, load_model_file

#: joint paths an autoregressive model draws for its mean, stddev and quantiles (at least)
DEFAULT_PATHS = 200
#: draws of a conditional model's predictive behind the plot's bands (at least)
PLOT_DRAWS = 100
#: sampled paths drawn on the plot (at most)
PLOT_PATHS = 5


def run_normaliser(run_dir, checkpoint):
    """The normaliser in the model file of ``checkpoint`` in ``run_dir`` (else the other
    checkpoint's), read from the archive without loading the model, so a history is checked
    before the model loads; a run :func:`load_model_file` cannot load raises its error."""
    from taylorformer.errors import ModelFileError
    from taylorformer.model_card import read_model_file

    for name in (checkpoint, "model" if checkpoint == "best" else "best"):
        path = os.path.join(run_dir, f"{name}.keras")
        if os.path.isfile(path):
            try:
                return read_model_file(path)["normaliser"]
            except ModelFileError:
                break
    return load_model_file(run_dir, checkpoint).normaliser


def run_layout(normaliser, run_dir):
    """The csv task options of the run whose model file holds ``normaliser``
    (:func:`~taylorformer.tasks.series_inputs.series_layout`); a TaskError naming the run
    for a model file without a normaliser or one not trained on a csv series task."""
    from taylorformer.tasks.series_inputs import series_layout

    if normaliser is None:
        raise TaskError(f"run {run_dir}: its model file has no normaliser (written before taylorformer saved one): "
                        "forecast needs the task's columns and standardisation it records; train the run again")
    layout = series_layout(normaliser)
    if layout is None:
        name = (normaliser.task or {}).get("name")
        raise TaskError(f"run {run_dir}: its model was trained on the task {name!r} with inputs "
                        f"{normaliser.x_names}, not a csv series task's (csv, ett, exchange-rate, ... or "
                        "from_dataframe): forecast needs a series run; taylorformer predict takes any inputs")
    return layout


def read_history(history, options, horizon):
    """The history ``history`` (a CSV file or a DataFrame) read with the run's ``options``
    (:func:`run_layout`) for ``horizon`` steps: a dict ``where``, ``y [C, Dy]``
    (context targets, NaN missing), ``covariates [C + horizon, K]`` (data units),
    ``context_dates`` ``[C]`` and ``dates`` ``[horizon]`` (``DatetimeIndex`` in the output
    zone; None without dates), ``date_format`` (the strftime format of the file's date
    text, None where it is not plain text)."""
    import pandas as pd

    from taylorformer.tasks.csv_series import read_series, read_table

    in_memory = isinstance(history, pd.DataFrame)
    df, where = read_table(history, None if in_memory else options["column_names"], label="history file")
    if in_memory:
        where = "history DataFrame"
    targets, covariates = options["target_columns"], options["covariate_columns"]
    date_column = options["date_column"] if options["dated"] else None
    future = 0  # trailing rows whose targets are all empty: the forecast steps' covariates and dates
    if set(targets) <= set(df.columns):
        observed = np.flatnonzero(df[targets].notna().any(axis=1).to_numpy())
        future = len(df) - (int(observed[-1]) + 1 if observed.size else 0)
    read = functools.partial(read_series, target_columns=targets, covariate_columns=covariates,
                             date_column=date_column, in_memory=in_memory,
                             header_hint=options["column_names"] is None and not in_memory)
    past = read(df.iloc[:len(df) - future], where, missing=options["missing"])
    ahead = read(df.iloc[len(df) - future:], f"{where} (its future rows, targets empty, counted from the first)",
                 missing="mask") if future else None
    c = options["context_length"]
    if len(past["values"]) < c:
        raise TaskError(f"{where} has {len(past['values'])} row(s) of history"
                        + (f" (after missing={options['missing']!r})" if options["missing"] == "drop" else "")
                        + f"; the model forecasts from the last context_length = {c} rows: give at least {c}")
    if covariates and future < horizon:
        raise TaskError(f"{where}: the model needs future covariates {covariates} for each of the {horizon} "
                        f"forecast steps, and the file gives {future} future row(s): add {horizon} rows after "
                        "the history with the covariates filled in and the targets empty")
    dy = len(targets)
    out = {"where": where, "y": past["values"][-c:, :dy],
           "covariates": (np.concatenate([past["values"][-c:, dy:], ahead["values"][:horizon, dy:]])
                          if covariates else np.zeros((c + horizon, 0))),
           "context_dates": None, "dates": None, "date_format": None}
    if not options["dated"]:
        return out
    if past["dates"] is None:
        raise TaskError(f"{where} has no dates, and the run's series had them "
                        + (f"in the column {date_column!r}" if date_column else
                           "as a DataFrame's DatetimeIndex: pass a DataFrame with one"))
    zone = output_zone(past["timezone"], options["timezone"], where)
    local = to_zone(past["dates"], zone)
    frequency = series_frequency(local, past["file_rows"], options["frequency"], where, c)
    dates = pd.date_range(local[-1], periods=horizon + 1, freq=frequency)[1:]
    if future:
        given = to_zone(ahead["dates"], output_zone(ahead["timezone"], options["timezone"], where))
        check_continues(given, pd.date_range(local[-1], periods=future + 1, freq=frequency)[1:], where)
    raw = df[date_column] if date_column else None
    out.update(context_dates=local[-c:], dates=dates.rename(date_column or "date"),
               date_format=None if raw is None else text_format(raw.iloc[past["file_rows"]], local))
    return out


def output_zone(history_zone, run_zone, where):
    """The zone the dates are read and written in: the run's (that of its calendar
    features) when both have one; None (naive) when neither has; a TaskError otherwise."""
    if (history_zone is None) != (run_zone is None):
        given = "no time zone" if history_zone is None else f"the zone {history_zone}"
        raise TaskError(f"{where}: its dates have {given} "
                        f"but the run's dates had {f'the zone {run_zone}' if run_zone else 'none'}: give "
                        + ("each date its UTC offset or zone" if history_zone is None else
                           "dates without a zone, in the local time the run was trained on"))
    return run_zone


def to_zone(dates, zone):
    """``DatetimeIndex`` of stored ``dates [n]`` (UTC datetime64 where zoned) in ``zone``."""
    import pandas as pd

    index = pd.DatetimeIndex(dates)
    return index if zone is None else index.tz_localize("UTC").tz_convert(zone)


def series_frequency(local, file_rows, recorded, where, context_length):
    """The frequency (a pandas alias) of the history's dates ``local`` (rows ``file_rows``
    of the file): the one pandas infers from them all, else from the last
    ``context_length``, else the run's ``recorded`` one; a TaskError naming ``where`` when
    there is none, it differs from a recorded alias, or a date of the context is not where
    the frequency puts it (rows dropped by ``missing="drop"`` keep their place)."""
    import pandas as pd
    from pandas.tseries.frequencies import to_offset

    def offset(text):
        try:
            return to_offset(text)
        except (TypeError, ValueError):
            return None

    def infer(dates):
        if len(dates) < 3:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas 3's note on infer_freq's future return type
            return pd.infer_freq(dates)

    inferred = infer(local) or infer(local[-context_length:])
    run = offset(recorded) if isinstance(recorded, str) else None
    frequency = inferred or (recorded if run is not None else None)
    if frequency is None:
        raise TaskError(f"{where}: its dates are irregular (pandas infers no frequency from {len(local)} dates, "
                        f"{local[0]} .. {local[-1]}, and the run records {recorded!r}): the forecast continues "
                        "the dates at the series' frequency; give dates one step apart")
    if inferred and run is not None and offset(inferred) != run:
        raise TaskError(f"{where}: its dates step by {inferred!r} but the run was trained on dates "
                        f"stepping by {recorded!r}")
    rows, context = file_rows[-context_length:], local[-context_length:]
    steps = rows - rows[0]
    expected = pd.date_range(context[0], periods=int(steps[-1]) + 1, freq=frequency)[steps]
    wrong = np.flatnonzero(expected != context)
    if wrong.size:
        i = int(wrong[0])
        raise TaskError(f"{where}: its dates are irregular at frequency {frequency!r}: row {int(rows[i])} "
                        f"(0-based, header excluded) is {context[i]}, where {expected[i]} continues the rows "
                        "before; the context needs one row per step")
    return frequency


def check_continues(given, expected, where):
    """TaskError naming ``where`` unless the future rows' dates ``given`` are ``expected``."""
    wrong = np.flatnonzero(given != expected)
    if wrong.size:
        i = int(wrong[0])
        raise TaskError(f"{where}: future row {i} (0-based, after the history) is dated {given[i]}, "
                        f"not {expected[i]}, the next step of the history's dates")


def text_format(raw, local):
    """The strftime format that writes the dates ``local`` as the text ``raw`` (a column of
    the file) gives them, or None (the dates were not text, or no format reproduces them):
    pandas' guess from the first date, checked on every date. An offset written
    ``+01:00`` is kept so."""
    from pandas.tseries.api import guess_datetime_format

    texts = [str(v) for v in raw]
    if not texts or not all(isinstance(v, str) for v in raw):
        return None
    guess = guess_datetime_format(texts[0])
    if guess is None:
        return None
    fmt = guess + ("|colon" if "%z" in guess and re.search(r"[+-]\d\d:\d\d$", texts[0]) else "")
    return fmt if list(format_dates(local, fmt)) == texts else None


def format_dates(dates, fmt):
    """The text of ``dates`` in ``fmt`` (:func:`text_format`'s; ``|colon``: ``+HH:MM`` offsets)."""
    base, colon = fmt.removesuffix("|colon"), fmt.endswith("|colon")
    texts = dates.strftime(base)
    return [re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", t) for t in texts] if colon else list(texts)


def _predict(model, layout, history, horizon, levels, draws, seed, memory_budget, progress):
    """``(mean, std [H, Dy], quantiles [Q, H, Dy], samples [S, H, Dy], quantile_method)`` in
    the data's units for the history ``history`` (:func:`read_history`): ``draws`` samples
    of a conditional model, at least :data:`DEFAULT_PATHS` paths of an autoregressive one."""
    from taylorformer.models.inference import (monte_carlo_quantiles, predict, predictive_quantiles,
                                               with_unknown_targets)
    from taylorformer.prediction.query import to_model_units
    from taylorformer.tasks.series_inputs import window_inputs

    normaliser, causal = model.normaliser, getattr(model, "causal", False)
    c = layout["context_length"]
    dates = None if history["dates"] is None else history["context_dates"].append(history["dates"])
    x = window_inputs(layout, history["covariates"], dates, horizon)[None]  # [1, C + H, Dx], data units
    query = to_model_units({"xc": x[:, :c], "yc": history["y"][None], "xt": x[:, c:]}, normaliser,
                           f"forecast {history['where']}")
    batch = with_unknown_targets({**query, "mask_c": np.ones((1, c), np.float32),
                                  "mask_t": np.ones((1, horizon), np.float32)}, model.dim_y)
    out = predict(model, batch, num_samples=max(draws, DEFAULT_PATHS) if causal else draws, seed=seed,
                  memory_budget=memory_budget, window_ids=[0], progress=progress)
    samples = normaliser.y_from_model(out.get("samples", np.zeros((0, 1, horizon, model.dim_y))))[:, 0]  # [S, H, Dy]
    if causal:
        quantiles = np.quantile(samples, levels, axis=0)
        method = monte_carlo_quantiles(len(samples), "sampled paths")
    else:
        quantiles, method = predictive_quantiles(model.distribution(batch), levels, seed)
        quantiles = normaliser.y_from_model(quantiles)[:, 0]
    return (normaliser.y_from_model(out["mean"])[0], normaliser.spread_from_model(out["stddev"])[0],
            quantiles, samples, method)


def forecast(run_dir, history, horizon=None, num_samples=0, quantiles=None, seed=0, checkpoint="best",
             memory_budget=None, progress=None):
    """Forecast the ``horizon`` steps after ``history`` with the model of the run
    ``run_dir`` (module docstring); returns a ``pandas.DataFrame``, one row per step.

    Args:
        history: a CSV file (path) or a DataFrame, laid out as the run's task data.
        horizon: steps to forecast, at most the run's (default: the run's).
        num_samples: sampled paths to add as columns ``sample<k>_<col>``.
        quantiles: levels in (0, 1) (default 0.05, 0.5, 0.95, as ``predict``).
        seed: the random streams of the samples (and Monte Carlo quantiles).
        checkpoint: ``best`` or ``model``; ``memory_budget``, ``progress``: as in
            :meth:`~taylorformer.tasks.csv_series.CSVSeriesTask.forecast`.

    The frame's columns: the date (named as the run's date column, with the history's
    time zone as the module docstring says) or ``step``, then per target ``mean_<col>``,
    ``stddev_<col>``, ``q<level>_<col>``, the samples and ``quantile_method``. Its
    ``attrs``: ``quantile_method``, ``date_format`` (the file's date text format, or
    None), ``targets``, ``joint`` (the samples are joint paths), ``layout`` (the run's csv task
    options, :func:`run_layout`), and for :func:`forecast_run`'s plot ``context_dates``,
    ``context`` ``[C, Dy]`` and ``paths`` ``[S, H, Dy]``.
    """
    return _forecast(run_dir, history, horizon, num_samples, quantiles, seed, checkpoint, memory_budget,
                     progress)


def _forecast(run_dir, history, horizon=None, num_samples=0, quantiles=None, seed=0, checkpoint="best",
              memory_budget=None, progress=None, draws=0):
    """:func:`forecast`, its conditional model drawing ``max(num_samples, draws)`` samples
    (``attrs["paths"]``; the plot's bands need some)."""
    import pandas as pd

    from taylorformer.prediction.query import DEFAULT_LEVELS

    check_int("forecast", "num_samples", num_samples, minimum=0)
    levels = check_levels(DEFAULT_LEVELS if quantiles is None else quantiles)
    if not isinstance(history, (pd.DataFrame, str, os.PathLike)):
        raise TaskError(f"forecast history must be a CSV file name or a pandas DataFrame, got {type(history).__name__}")
    if not isinstance(history, pd.DataFrame) and not os.path.isfile(history):
        raise TaskError(f"history file {os.fspath(history)!r} does not exist or is not a file")
    layout = run_layout(run_normaliser(run_dir, checkpoint), run_dir)
    trained = layout["horizon"]
    horizon = trained if horizon is None else check_int("forecast", "horizon", horizon)
    if horizon > trained:
        raise TaskError(f"forecast horizon {horizon} is longer than run {run_dir}'s: its model was trained to forecast "
                        f"{trained} steps (the window's position inputs stop there); ask for at most {trained}")
    read = read_history(history, layout, horizon)
    model = load_model_file(run_dir, checkpoint)
    mean, std, quants, samples, method = _predict(model, layout, read, horizon,
                                                  levels, max(num_samples, draws), seed, memory_budget, progress)
    columns = {read["dates"].name: read["dates"]} if read["dates"] is not None else {
        "step": np.arange(1, horizon + 1)}
    for j, col in enumerate(layout["target_columns"]):
        columns[f"mean_{col}"], columns[f"stddev_{col}"] = mean[:, j], std[:, j]
        columns.update({f"q{level:g}_{col}": q[:, j] for level, q in zip(levels, quants)})
        columns.update({f"sample{k}_{col}": path[:, j] for k, path in enumerate(samples[:num_samples])})
    columns["quantile_method"] = method
    frame = pd.DataFrame(columns)
    frame.attrs.update(quantile_method=method, date_format=read["date_format"], targets=layout["target_columns"],
                       layout=layout,
                       context_dates=read["context_dates"], context=read["y"], paths=samples,
                       joint=bool(getattr(model, "causal", False)))
    return frame


def write_forecast(frame, output):
    """Write ``frame`` (:func:`forecast`'s) to the CSV file ``output``, its dates as the
    history's text gave them (``attrs["date_format"]``; else pandas' ISO text)."""
    import pandas as pd

    fmt, date = frame.attrs.get("date_format"), frame.columns[0]
    table = frame if fmt is None else frame.assign(**{date: format_dates(pd.DatetimeIndex(frame[date]), fmt)})
    with atomic_path(output) as tmp:
        table.to_csv(tmp, index=False)
    return output


def read_truth(truth, frame):
    """``[H, Dy]`` observed values (NaN: not given) of the run's targets at ``frame``'s
    (:func:`forecast`'s, its ``attrs["layout"]`` the run's options) forecast steps, from the
    CSV file or DataFrame ``truth`` laid out as the history (its
    date column, matched by date; undated: its first rows in order). A file that gives
    none of the forecast steps is a TaskError naming it."""
    import pandas as pd

    from taylorformer.tasks.csv_series import read_series, read_table

    layout = frame.attrs["layout"]
    in_memory = isinstance(truth, pd.DataFrame)
    if not in_memory and (reason := not_a_file(truth)):
        raise TaskError(f"truth file {os.fspath(truth)!r} {reason}")
    df, where = read_table(truth, None if in_memory else layout["column_names"], label="truth file")
    if in_memory:
        where = "truth DataFrame"
    dated = frame.columns[0] != "step"
    read = read_series(df, where, layout["target_columns"], date_column=frame.columns[0] if dated else None,
                       missing="mask", in_memory=in_memory)
    values = read["values"][:, :len(layout["target_columns"])]
    out = np.full((len(frame), values.shape[1]), np.nan)
    if dated:
        steps = pd.DatetimeIndex(frame.iloc[:, 0])
        given = to_zone(read["dates"], output_zone(read["timezone"], layout["timezone"], where))
        rows = pd.Index(given).get_indexer(steps)
        out[rows >= 0] = values[rows[rows >= 0]]
    else:
        n = min(len(values), len(frame))
        out[:n] = values[:n]
    if np.isnan(out).all():
        raise TaskError(f"{where} gives no observed value at the forecast's {len(frame)} step(s)"
                        + (f" ({frame.iloc[0, 0]} to {frame.iloc[-1, 0]})" if dated else ""))
    return out


def truth_scores(frame, truth):
    """``{"steps", "mae", "persistence_mae"}`` per target over the forecast steps with an
    observed truth: the mean absolute error of the forecast's mean, and of persistence
    (the last observed history value) beside it, in the data's units."""
    scores = {}
    for j, col in enumerate(frame.attrs["targets"]):
        seen = ~np.isnan(truth[:, j])
        context = frame.attrs["context"][:, j]
        last = context[~np.isnan(context)][-1] if (~np.isnan(context)).any() else np.nan
        scores[col] = {"steps": int(seen.sum()),
                       "mae": float(np.abs(frame[f"mean_{col}"].to_numpy()[seen] - truth[seen, j]).mean()),
                       "persistence_mae": float(np.abs(last - truth[seen, j]).mean())}
    return scores


def plot_forecast_file(frame, path, title=None, truth=None):
    """Draw the history, mean, 50% and 90% bands and, for an autoregressive model, a few of
    its joint paths (a conditional model's draws are independent per step, not paths) of
    ``frame`` (:func:`forecast`'s) to ``path``
    (:func:`taylorformer.plotting.forecasts.plot_forecast`), one panel per target, with
    ``truth [H, Dy]`` (:func:`read_truth`) where given."""
    import pandas as pd
    from matplotlib.figure import Figure

    from taylorformer.plotting.forecasts import plot_forecast
    from taylorformer.plotting.saving import save_figure

    targets = frame.attrs["targets"]
    dated = frame.columns[0] != "step"
    context = frame.attrs["context"]
    if dated:
        when = pd.DatetimeIndex(frame.iloc[:, 0])
        past = frame.attrs["context_dates"]
        when, past = (when.tz_localize(None), past.tz_localize(None)) if when.tz is not None else (when, past)
    else:
        when, past = frame["step"].to_numpy(), np.arange(1 - len(context), 1)
    fig = Figure(figsize=(9, 2.8 * len(targets)), layout="tight")
    axes = fig.subplots(len(targets), 1, squeeze=False)[:, 0]
    for j, (ax, col) in enumerate(zip(axes, targets)):
        plot_forecast(np.asarray(past), context[:, j], np.asarray(when), frame.attrs["paths"][:, :, j],
                      mean=frame[f"mean_{col}"].to_numpy(), num_paths=PLOT_PATHS if frame.attrs["joint"] else 0,
                      truth=None if truth is None else truth[:, j],
                      ax=ax, label=col,
                      time_label="date" if dated else "step")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def forecast_run(run_dir, history, output, horizon=None, num_samples=0, quantiles=None, seed=0,
                 checkpoint="best", plot=None, memory_budget=None, progress=None, truth=None):
    """``taylorformer forecast``: :func:`forecast` written to the CSV file ``output`` and,
    with ``plot``, drawn to that image; both checked before any work (never the history
    or the run's files) and put in place together (:class:`taylorformer.files.Outputs`).
    ``truth``: the observed values of the forecast steps (:func:`read_truth`), drawn on the
    plot and scored (:func:`truth_scores`, in ``frame.attrs["truth_scores"]``).
    Returns the frame."""
    from taylorformer.plotting.saving import image_formats

    with Outputs(reads=(history,) + ((truth,) if isinstance(truth, (str, os.PathLike)) else ()),
                 run_dir=run_dir) as outputs:
        table = outputs.file(output, "--output", (".csv",))
        image = outputs.file(plot, "--plot", image_formats())
        frame = _forecast(run_dir, history, horizon=horizon, num_samples=num_samples, quantiles=quantiles,
                          seed=seed, checkpoint=checkpoint, memory_budget=memory_budget, progress=progress,
                          draws=PLOT_DRAWS if plot is not None else 0)
        observed = None
        if truth is not None:
            observed = read_truth(truth, frame)
            frame.attrs["truth_scores"] = truth_scores(frame, observed)
        write_forecast(frame, table)
        if image is not None:
            plot_forecast_file(frame, image, title=f"forecast of {os.path.basename(str(history))}", truth=observed)
    return frame
