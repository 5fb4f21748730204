"""The inputs of a model trained on a csv series task, from its model file alone.

A model trained on :class:`~taylorformer.tasks.csv_series.CSVSeriesTask` (``csv`` and its
presets ``ett``, ``exchange-rate``, ...) takes per window row ``j = 0 .. C + H - 1`` (``C``
context rows, then ``H`` target rows) the inputs, in this order:

* ``position``: ``x_j = -1 + 2 j / (C + H - 1)``
  (:func:`~taylorformer.tasks.csv_series.window_positions`): -1 at the first context row,
  +1 at the last target row, the same for every window whatever its dates;
* the ``covariate_columns``, in the data's units (the normaliser standardises them);
* the ``calendar_features`` of the row's date in the data's time zone
  (:func:`~taylorformer.tasks.csv_series.calendar_inputs`): ``sincos`` gives
  ``sin(2 pi v / P)``, ``cos(2 pi v / P)`` per feature, ``linear`` ``v / (P - 1) - 0.5``;
* ``lead``, where the task had ``lead_input``.

:func:`series_layout` reads the task's options back from the model file's normaliser (its
recorded task name and config, over the registered preset's and the class's defaults), so
``taylorformer forecast`` (:mod:`taylorformer.workflow.forecasting`) builds the inputs of a
user's history and ``taylorformer export`` records them (:func:`export_record`) without the
training data.
"""
import functools
import inspect

import numpy as np

#: the csv task's options that lay out its inputs and read its data
OPTIONS = ("target_columns", "covariate_columns", "date_column", "column_names", "missing",
           "calendar_features", "calendar_encoding", "context_length", "horizon", "lead_input")
#: what each calendar encoding computes from a feature's value ``v`` and period ``P``
ENCODINGS = {"sincos": "sin(2 pi v / P), cos(2 pi v / P)", "linear": "v / (P - 1) - 0.5"}


def series_layout(normaliser):
    """The csv task options of a model whose file holds ``normaliser`` (a dict: the
    :data:`OPTIONS`, plus ``timezone`` and ``frequency`` of its dates and ``dated``), or
    None when the normaliser records no csv series task or inputs not laid out as one's."""
    from taylorformer import registry
    from taylorformer.errors import UnknownComponentError
    from taylorformer.tasks.csv_series import CSVSeriesTask

    info = (normaliser.task or {}) if normaliser is not None else {}
    name = info.get("name")
    try:
        built = registry.get("task", name) if isinstance(name, str) else None
    except UnknownComponentError:
        return None
    keywords = {}
    while isinstance(built, functools.partial):  # presets: the outer partial's keywords win
        keywords = {**built.keywords, **keywords}
        built = built.func
    if not (isinstance(built, type) and issubclass(built, CSVSeriesTask)):
        return None
    defaults = {k: p.default for k, p in inspect.signature(built.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    defaults.update(getattr(built, "changed_defaults", None) or {})  # a config records the newer values
    given = {**defaults, **keywords, **(info.get("config") or {})}
    layout = {"column_names": None, "missing": "mask", "calendar_encoding": "sincos", "lead_input": False,
              **{k: v for k, v in given.items() if k in OPTIONS and v is not None}}
    time = normaliser.time or {}
    layout.update(target_columns=list(normaliser.y_names), date_column=time.get("column"),
                  covariate_columns=list(layout.get("covariate_columns") or []),
                  calendar_features=list(layout.get("calendar_features") or []),
                  timezone=time.get("timezone"), frequency=time.get("frequency"), dated=bool(time))
    names = input_names(layout)
    return layout if names == list(normaliser.x_names) else None


def input_names(layout):
    """The names of the inputs, in order, as the task's normaliser names them."""
    per = ("sin", "cos") if layout["calendar_encoding"] == "sincos" else ("linear",)
    return (["position"] + list(layout["covariate_columns"])
            + [f"{f}_{part}" for f in layout["calendar_features"] for part in per]
            + (["lead"] if layout["lead_input"] else []))


def window_inputs(layout, covariates, dates, horizon):
    """``[C + horizon, Dx]`` float64 inputs, in the data's units, of a window whose
    ``C + horizon`` rows have ``covariates [C + horizon, K]`` (data units) and ``dates``
    (a ``DatetimeIndex`` in the data's zone, or None without calendar features); the
    target rows are the window's first ``horizon`` (at most the task's ``H``)."""
    from taylorformer.tasks import csv_series

    c, h = layout["context_length"], layout["horizon"]
    parts = [csv_series.window_positions(c, h)[:c + horizon, None], np.asarray(covariates, np.float64)]
    if layout["calendar_features"]:
        parts.append(csv_series.calendar_inputs(dates, layout["calendar_features"], layout["calendar_encoding"]))
    if layout["lead_input"]:
        parts.append(csv_series.window_leads(c, h)[:c + horizon, None])
    return np.concatenate([np.asarray(p, np.float64) for p in parts], 1)


def export_record(layout):
    """The JSON an exported forecaster records (``series_inputs`` of its
    ``normaliser.json``): how to build ``xc`` and ``xt`` for a history."""
    from taylorformer.tasks import csv_series

    c, h = layout["context_length"], layout["horizon"]
    positions = csv_series.window_positions(c, h).astype(np.float64)
    calendar = {"features": list(layout["calendar_features"]), "encoding": layout["calendar_encoding"],
                "computes": ENCODINGS[layout["calendar_encoding"]],
                "of": "each row's date" + (f" in the zone {layout['timezone']}" if layout["timezone"] else "")}
    for feature in calendar["features"]:  # v and P of each feature
        attr, offset, period = csv_series.CALENDAR_FEATURES[feature]
        if layout["calendar_encoding"] == "linear":
            period = csv_series.LINEAR_PERIODS[feature]
        calendar[feature] = {"v": f"date.{attr}" + (f" - {offset}" if offset else ""),
                             "P": period or f"days in the date's {'month' if feature == 'day_of_month' else 'year'}"}
    record = {"context_length": c, "horizon": h, "columns": input_names(layout),
              "position": (f"x_j = -1 + 2 j / (C + H - 1) with C = {c}, H = {h}, for window row j = 0 .. C + H - 1: "
                           "rows 0 .. C - 1 are the context (xc: the last C observed rows), rows C .. C + H - 1 "
                           "the forecast steps (xt; h < H steps take the first h)"),
              "context_positions": positions[:c].tolist(), "target_positions": positions[c:].tolist(),
              "covariates": {"columns": list(layout["covariate_columns"]),
                             "units": "the data's (the SavedModel standardises them); known at the forecast steps"},
              "calendar": calendar, "lead": bool(layout["lead_input"]), "targets": list(layout["target_columns"]),
              "date_column": layout["date_column"], "frequency": layout["frequency"]}
    if layout["lead_input"]:
        leads = csv_series.window_leads(c, h).astype(np.float64)
        record.update(context_leads=leads[:c].tolist(), target_leads=leads[c:].tolist())
    return record
