"""Time-series forecasting tasks read from CSV files (plugin ``builtin-csv``).

Registers the task ``csv`` (:class:`CSVSeriesTask`) and presets following the
Taylorformer forecasting protocol (paper Sec. 4.2) on the named datasets of
:mod:`taylorformer.tasks.datasets` (fetched on first use): ``ett`` (= ``etth1``),
``etth2``, ``ettm1``, ``ettm2`` (target oil temperature ``OT``), ``exchange-rate`` and
``electricity`` (Lai et al. 2018; target: the last column, named ``OT``).

Protocol, for a series of ``N`` rows (after NaN handling) and one window of
``W = context_length + horizon`` consecutive rows:

* Missing values (``missing``): ``"mask"`` (default) keeps a NaN target value as NaN in
  ``yc``/``yt``: the model leaves that value out, as context and as a scored target
  (:func:`taylorformer.batch.with_masks`; with several targets a step keeps its observed
  ones, flagged per output). Covariates are inputs: with ``"mask"`` a NaN there is an
  error naming the column and rows. ``"error"`` refuses every NaN, ``"drop"`` drops the
  rows, ``"ffill"`` carries the last value forward (targets and covariates alike).

* Split: chronological; with ratios ``(a, b, c)`` the training rows are
  ``[0, floor(a N))``, validation ``[floor(a N), floor((a + b) N))``, test the rest.
  Every window lies entirely inside one split (a split needs at least ``W`` rows).
* Standardisation: ``(y - mean) / std`` per target column, with ``mean`` and the
  population ``std`` (ddof 0) of the *training rows only* (their observed values: NaN
  left out; a target column with none is an error).
* Model default: a model trained on this task standardises each window by its own context
  (``model_defaults``: spec ``standardise: window``, :mod:`taylorformer.models.window_standardisation`;
  with ``lead_input``, ``standardise: last``: shifted by the last context value)
  unless its spec says otherwise (e.g. ``standardise: global``): a series whose level drifts out of the
  training rows' range is forecast relative to its recent past (benchmarks/README.md,
  "window_standardisation.py"). The global standardisation above still applies first.
* Inputs: every row is one time step (date gaps are ignored). The W rows of a window
  get the position ``x_j = -1 + 2 j / (W - 1)``, ``j = 0..W-1``: the first context row
  maps to -1, the last target row to +1, the same for every window. After it come, per
  row, the ``covariate_columns`` (z-scores with the training mean and std, like the
  targets; known at the target rows too, e.g. a weather forecast or a price schedule)
  and the ``calendar_features`` of the row's date (:data:`CALENDAR_FEATURES`), so
  ``dim_x = 1 + len(covariate_columns) + (2 or 1) * len(calendar_features)``; with
  ``lead_input`` (the ``csv`` task's default; the named presets leave it out, as the
  papers' protocol does) one more, last: the row's log-scaled distance to the last context row
  (:func:`window_leads`: 0 there, -1 or 1 at the furthest row), which tells a model the first
  leads apart where the position changes by only ``2 / (W - 1)`` per row.
* Windows: ``train`` draws window starts uniformly at random (infinite, seeded by
  ``seed`` and the batch index); ``val``/``test`` give every valid start of the split in
  increasing order (every ``eval_stride``-th), the last batch possibly smaller.

Batch (see :mod:`taylorformer.batch`): ``xc [B, C, Dx]``, ``yc [B, C, Dy]``,
``xt [B, H, Dx]``, ``yt [B, H, Dy]`` (NaN where a target value is missing),
``mask_c [B, C]``, ``mask_t [B, H]`` (all ones: the model masks the NaN steps),
``window_start [B]`` int64: series row of the first context point (see :meth:`window`).

The series comes from a CSV file (``path``), a named dataset (``dataset``) or an
in-memory ``pandas.DataFrame`` (``path=df``, or :func:`taylorformer.tasks.from_dataframe`):
both go through the same reading code. :meth:`CSVSeriesTask.forecast_frame` turns a
model's forecasts into a DataFrame indexed by target date in the data's units, and
:meth:`CSVSeriesTask.plot` draws them against dates
(:func:`taylorformer.plotting.forecasts.plot_forecast`).
"""
import datetime
import functools
import math
import os
import warnings
from pathlib import Path

import numpy as np

from taylorformer.errors import TaskError, close_matches
from taylorformer.hookspecs import hookimpl
from taylorformer.task import (MAX_COUNT, Task, check_choice, check_int, check_number, dataset_args,
                               window_starts_dataset)
from taylorformer.tasks import datasets

MISSING_POLICIES = ("mask", "error", "drop", "ffill")
SPLITS = ("train", "val", "test")
MAX_LISTED = 10  # rows/values quoted in an error message
#: a column whose training std is at most this fraction of its largest magnitude varies only
#: in the last bits of float64: standardising it would amplify rounding noise (refused as constant)
RESOLUTION = 8 * np.finfo(np.float64).eps


class DataFileNotFoundError(TaskError, FileNotFoundError):
    """A task's data file does not exist."""


def resolve_path(path):
    """Absolute path of the file ``path`` (absolute, or relative to the cwd)."""
    found = Path(path).expanduser().resolve()
    if not found.is_file():
        raise DataFileNotFoundError(
            f"data file {str(path)!r} not found (looked for {found}). Pass path= an existing file, "
            f"or dataset= a named dataset ({', '.join(sorted(datasets.DATASETS))}), fetched on first use.")
    return found


def listed_rows(index):
    """Short text listing row numbers (at most MAX_LISTED)."""
    index = [int(i) for i in index]
    more = f" and {len(index) - MAX_LISTED} more" if len(index) > MAX_LISTED else ""
    return f"{index[:MAX_LISTED]}{more}"


def _nan_rows(where, values, columns, role):
    """Start of an error message: which of ``columns`` (``role``) of ``values [n, K]`` hold
    NaN, in how many rows, and which (0-based data rows)."""
    nan = np.isnan(values)
    rows = np.flatnonzero(nan.any(axis=1))
    cols = [c for j, c in enumerate(columns) if nan[:, j].any()]
    return (f"{where}: {role} column(s) {cols} hold NaN in {rows.size} row(s): {listed_rows(rows)} "
            f"(0-based, header excluded)")


def _names(field, value, allow_one=True):
    """List of column names (str; ints are read as their text) from a list, or one name."""
    one = isinstance(value, (str, int)) and not isinstance(value, bool)
    names = [value] if allow_one and one else value
    if not (isinstance(names, (list, tuple))
            and all(isinstance(c, (str, int)) and not isinstance(c, bool) for c in names)):
        raise TaskError(f"csv task: {field} must be {'a column name or ' if allow_one else ''}a list of "
                        f"column names, got {value!r}")
    return [str(c) for c in names]


#: calendar inputs: name -> (pandas attribute of the dates, offset subtracted, period);
#: a period of None is the row's own (days in its month / year)
CALENDAR_FEATURES = {"minute": ("minute", 0, 60), "hour": ("hour", 0, 24),
                     "day_of_week": ("dayofweek", 0, 7), "day_of_month": ("day", 1, None),
                     "day_of_year": ("dayofyear", 1, None), "month": ("month", 1, 12)}
#: ``"sincos"``: (sin, cos) of ``2 pi v / period``; ``"linear"``: ``v / (P - 1) - 0.5`` with
#: the fixed P of Informer/Autoformer's "timeF" features (day of month P = 31, day of year 366)
CALENDAR_ENCODINGS = ("sincos", "linear")
LINEAR_PERIODS = {"minute": 60, "hour": 24, "day_of_week": 7, "day_of_month": 31,
                  "day_of_year": 366, "month": 12}


def calendar_inputs(dates, features, encoding="sincos"):
    """``[n, F]`` float64 calendar inputs of ``dates [n]`` (datetime64), per feature of
    ``features`` (names of :data:`CALENDAR_FEATURES`) two columns (sin, cos) or one
    (``encoding="linear"``), in the order given."""
    import pandas as pd

    index = pd.DatetimeIndex(dates)
    columns = []
    for name in features:
        attr, offset, period = CALENDAR_FEATURES[name]
        value = getattr(index, attr).to_numpy(np.float64) - offset
        if encoding == "linear":
            columns.append(value / (LINEAR_PERIODS[name] - 1) - 0.5)
            continue
        if period is None:
            period = np.asarray(index.days_in_month if name == "day_of_month"
                                else 365 + np.asarray(index.is_leap_year, int), np.float64)
        angle = 2 * np.pi * value / period
        columns += [np.sin(angle), np.cos(angle)]
    return np.stack(columns, -1) if columns else np.zeros((len(index), 0))


def column_stats(values):
    """``(mean, std)`` ``[K]`` (population std) of the non-NaN entries of ``values [n, K]``,
    computed in units of each column's largest magnitude: finite and accurate for any
    finite values (no overflow near 1e308, no underflow near 1e-308)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        scale = np.nanmax(np.abs(values), axis=0)
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        unit = values / scale
        return np.nanmean(unit, axis=0) * scale, np.nanstd(unit, axis=0) * scale


def maps_back(mean, std):
    """``[K]`` bool: every float32 standardised value ``z`` maps back to a finite float64
    ``z * std + mean`` (predictions in original units cannot overflow)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.isfinite(float(np.finfo(np.float32).max) * np.asarray(std, np.float64) + np.abs(mean))


def check_not_boolean(values, what):
    """``values`` (an array, a pandas Series, an xarray DataArray) unless they hold booleans
    (a bool dtype, or True/False among other objects): a :class:`TaskError` naming
    ``what`` (the column or variable and its file or object). Every reader's targets pass
    through it: taking True/False as 0/1 is the user's explicit choice."""
    kind = getattr(getattr(values, "dtype", None), "kind", None)
    if kind == "b" or (kind == "O" and any(isinstance(v, (bool, np.bool_)) for v in np.asarray(values).ravel())):
        raise TaskError(f"{what} holds booleans (True/False), not real numbers; convert them explicitly "
                        "first (e.g. astype(float) for 0/1, with a 'bernoulli' likelihood for a yes/no outcome)")
    return values


def check_one_zone_kind(series, where, strings=False):
    """TaskError naming ``where`` when the dates ``series`` (objects) mix ones without a
    time zone and ones with a zone or UTC offset: nothing says which zone the naive ones
    are in. Datetime objects are checked; date strings too with ``strings`` (each parsed
    alone: only where the dates as a whole had several zones)."""
    import pandas as pd

    def zoned(value):
        if strings and isinstance(value, str):
            try:
                value = pd.Timestamp(value)
            except (ValueError, TypeError, OverflowError):
                return None
        if isinstance(value, datetime.datetime) and value is not pd.NaT:
            return value.tzinfo is not None
        return None

    kinds = {value: zoned(value) for value in pd.unique(series[series.notna()])}
    naive = next((v for v, z in kinds.items() if z is False), None)
    aware = next((v for v, z in kinds.items() if z), None)
    if naive is not None and aware is not None:
        raise TaskError(f"{where} mixes dates without a time zone (e.g. {str(naive)!r}) and dates with one "
                        f"(e.g. {str(aware)!r}); say which zone the others are in: give every date a zone or "
                        "UTC offset (e.g. tz_localize), or none")


def parse_dates(values, where):
    """``pandas.Series`` of the dates ``values`` (strings, datetimes or datetime64; naive, or
    with a time zone/UTC offset). Offsets that differ (e.g. across a daylight-saving change)
    are converted to UTC; an entry that does not parse like the others (garbage) is NaT,
    for the caller to report by row. Numbers, durations or dates with and without a zone
    (:func:`check_one_zone_kind`) are a :class:`TaskError` naming ``where``."""
    import pandas as pd

    series = pd.Series(values).reset_index(drop=True)
    if series.dtype.kind == "M":
        return series
    if series.dtype.kind in "mcfiub":
        raise TaskError(f"{where} holds {series.dtype} values, not dates")
    check_one_zone_kind(series, where)

    def parse(**options):  # the format inferred from the first date; else each date alone
        dates = pd.to_datetime(series, errors="coerce", **options)
        if (dates.isna() & series.notna()).any():
            alone = pd.to_datetime(series, errors="coerce", format="mixed", **options)
            dates = alone if alone.isna().sum() < dates.isna().sum() else dates
        return dates

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "could not infer format": each entry parsed alone
        try:
            dates = parse()
        except (ValueError, TypeError):  # "Mixed timezones detected": several offsets, or some none
            dates = None
        except OverflowError as exc:
            raise TaskError(f"{where}: cannot read the dates: {exc}") from None
        if dates is not None and not (dates.isna() & series.notna()).any():
            return dates
        # several zones (text: an error; datetimes: NaT), some none, or garbage
        check_one_zone_kind(series, where, strings=True)
        try:
            utc = parse(utc=True)
        except (ValueError, TypeError, OverflowError) as exc:
            if dates is None:
                raise TaskError(f"{where}: cannot read the dates: {exc}") from None
            return dates
        return utc if dates is None or utc.isna().sum() < dates.isna().sum() else dates


def split_cuts(n, ratios):
    """Chronological split of ``n`` steps by ``ratios`` (a, b, c): ``{split: (lo, hi)}`` with
    cuts at ``floor(a n)`` and ``floor((a + b) n)``."""
    cuts = [0, math.floor(n * ratios[0] + 1e-9), math.floor(n * (ratios[0] + ratios[1]) + 1e-9), n]
    return {s: (cuts[i], cuts[i + 1]) for i, s in enumerate(SPLITS)}


def window_positions(context_length, horizon):
    """``[C + H]`` float32 position input of a window's rows: ``x_j = -1 + 2 j / (C + H - 1)``,
    ``j = 0 .. C + H - 1`` (the first context row -1, the last target row +1)."""
    return np.linspace(-1.0, 1.0, context_length + horizon, dtype=np.float32)


def window_leads(context_length, horizon):
    """``[C + H]`` float32 lead input of a window's rows: ``sign(k) log(1 + |k|) / log(1 +
    max(C - 1, H))`` with ``k = j - (C - 1)`` the row's steps after the last context row
    (0 there, -1 or 1 at the furthest row): one step near that row is a large change of input."""
    k = np.arange(context_length + horizon, dtype=np.float64) - (context_length - 1)
    return (np.sign(k) * np.log1p(np.abs(k)) / np.log1p(max(context_length - 1, horizon, 1))).astype(np.float32)


def read_table(source, column_names=None, label="data file"):
    """``(DataFrame with str column names, where)``: the CSV file ``source`` read with pandas
    (``column_names``: the names of a file without a header row), or a shallow copy of the
    DataFrame ``source``; ``where`` names it in error messages (``label`` and the file)."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        df, where = source.copy(deep=False), "DataFrame"
        if column_names is not None:
            raise TaskError("csv task: column_names applies to CSV files without a header row; "
                            "a DataFrame has its own column names")
    else:
        where = f"{label} {str(source)!r}"
        header = "infer" if column_names is None else None
        try:
            df = pd.read_csv(source, header=header)
        except (ValueError, OSError) as exc:  # pandas parser errors are ValueErrors
            raise TaskError(f"cannot read {where} as CSV: {exc}") from exc
        if column_names is not None:
            if len(column_names) != df.shape[1]:
                raise TaskError(f"{where} has {df.shape[1]} columns but column_names names "
                                f"{len(column_names)}: {column_names}")
            df.columns = column_names
    df.columns = [str(c) for c in df.columns]
    repeated = sorted(set(df.columns[df.columns.duplicated()]))
    if repeated:
        raise TaskError(f"{where} has duplicate column name(s) {repeated} (compared as text): "
                        f"each column needs its own name")
    return df, where


def numeric_columns(df, columns, role, where):
    """``[n, len(columns)]`` float64 values of numeric columns (``role``: "target" or
    "covariate", for messages); non-numeric or infinite entries are a TaskError."""
    import pandas as pd

    values = np.empty((len(df), len(columns)), np.float64)
    for j, col in enumerate(columns):
        if role == "target":
            check_not_boolean(df[col], f"target column {col!r} of {where}")
        kind = df[col].dtype.kind
        if kind in "mMc" or (kind == "O" and df[col].map(lambda v: isinstance(v, complex)).any()):
            what = {"m": "durations (timedelta)", "M": "dates (datetime)"}.get(kind, "complex numbers")
            raise TaskError(f"{role} column {col!r} of {where} holds {what}, dtype {df[col].dtype}: "
                            f"not real numbers; convert it explicitly (e.g. to hours or to its real "
                            f"part) before building the task")
        numeric = pd.to_numeric(df[col], errors="coerce")
        bad = np.flatnonzero(numeric.isna().to_numpy() & df[col].notna().to_numpy())
        if bad.size:
            examples = ", ".join(f"row {i}: {df[col].iloc[i]!r}" for i in bad[:3])
            raise TaskError(f"{role} column {col!r} of {where} is not numeric "
                            f"({bad.size} non-numeric entries; {examples}; rows are 0-based, "
                            f"header excluded)")
        values[:, j] = numeric.to_numpy(np.float64)
        inf = np.flatnonzero(np.isinf(values[:, j]))
        if inf.size:
            examples = ", ".join(f"row {i}: {float(values[i, j])}" for i in inf[:3])
            raise TaskError(f"{where}: {role} column {col!r} holds {inf.size} infinite value(s) "
                            f"({examples}; rows are 0-based, header excluded); a model cannot "
                            f"train on them: clean the {'DataFrame' if where.endswith('DataFrame') else 'file'}")
    return values


def series_dates(df, file_rows, where, date_column=None):
    """``(dates, timezone)``: datetime64 ``[n]`` of the kept ``file_rows`` of ``df`` (from
    ``date_column``, or a DataFrame's DatetimeIndex or index of datetimes in several zones),
    checked strictly increasing (:func:`parse_dates`: one kind of zone), and their zone;
    ``(None, None)`` without dates. Dates with a UTC offset or time zone are UTC instants and
    ``timezone`` their zone's name (calendar features use the local time; output dates
    carry the zone)."""
    import pandas as pd

    if date_column:
        label = f"date column {date_column!r} (date_column)"
        dates = parse_dates(df[date_column].iloc[file_rows], f"{label} of {where}")
    elif isinstance(df.index, pd.DatetimeIndex):
        dates, label = pd.Series(df.index[file_rows]), "the DatetimeIndex"
    elif len(df.index) and all(isinstance(v, datetime.datetime) for v in df.index):  # several zones
        label = "the index"
        dates = parse_dates(df.index[file_rows], f"{label} of {where}")
    else:
        return None, None
    bad = np.flatnonzero(dates.isna().to_numpy())
    if bad.size:
        raise TaskError(f"{label} of {where} has missing or unparseable dates in rows {listed_rows(file_rows[bad])}")
    timezone = None
    if dates.dt.tz is not None:
        timezone = str(dates.dt.tz)
        dates = dates.dt.tz_convert("UTC").dt.tz_localize(None)
    dates = dates.to_numpy()
    gaps = np.diff(dates)
    steps = np.flatnonzero(gaps < np.timedelta64(0))
    if steps.size:
        raise TaskError(f"{where} is not in chronological order: {label} decreases after rows "
                        f"{listed_rows(file_rows[steps])}")
    repeats = np.flatnonzero(gaps == np.timedelta64(0))
    if repeats.size:
        i = int(repeats[0])
        raise TaskError(f"{label} of {where} repeats dates: {repeats.size} row(s) have the date of the "
                        f"row before, the first {pd.Timestamp(dates[i + 1])} in rows {file_rows[i]} and "
                        f"{file_rows[i + 1]} (0-based, header excluded); one row per time step: "
                        f"aggregate or drop the duplicates")
    return dates, timezone


def read_series(df, where, target_columns, covariate_columns=(), date_column=None, missing="mask",
                in_memory=False, header_hint=False):
    """The series in the table ``df`` (from :func:`read_table`; ``where`` names it) as the csv
    task reads it (module docstring, "Missing values"): a dict ``values [n, Dy + K]`` float64
    (the targets, then the covariates; NaN a missing target value with ``missing="mask"``),
    ``file_rows [n]`` (0-based data rows kept), ``dates``, ``timezone`` (:func:`series_dates`).
    A missing column, a non-numeric entry or a NaN the policy refuses is a TaskError naming
    ``where``; ``in_memory`` (a DataFrame) and ``header_hint`` (a file read with a header
    row: mention ``column_names``) shape its advice."""
    import pandas as pd

    target_columns, covariate_columns = list(target_columns), list(covariate_columns)
    wanted = ([(c, "target_columns") for c in target_columns]
              + [(c, "covariate_columns") for c in covariate_columns]
              + ([(date_column, "date_column")] if date_column else []))
    for col, key in wanted:
        if col not in df.columns:
            close = close_matches(col, df.columns)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise TaskError(f"{where} has no column {col!r}{hint} Columns: {list(df.columns)} "
                            f"(check {key}" + (", and column_names if the file has no header row)"
                                               if header_hint else ")"))
    if date_column in target_columns + covariate_columns:
        raise TaskError(f"column {date_column!r} is both the date column and a target or covariate")
    columns = target_columns + covariate_columns
    values = np.concatenate([numeric_columns(df, target_columns, "target", where),
                             numeric_columns(df, covariate_columns, "covariate", where)], 1)
    file_rows = np.arange(len(df))
    nan = np.isnan(values).any(axis=1)
    fix = "clean the DataFrame" if in_memory else "clean the file"
    if nan.any() and missing == "error":
        cols = [c for j, c in enumerate(columns) if np.isnan(values[:, j]).any()]
        role = ("target" if set(cols) <= set(target_columns) else
                "covariate" if set(cols) <= set(covariate_columns) else "target/covariate")
        raise TaskError(f"{_nan_rows(where, values, columns, role)}; {fix} or pass missing="
                        f"'drop' or 'ffill'" + (" (or 'mask': missing target values)" if role == "target" else ""))
    covariates = values[:, len(target_columns):]
    if missing == "mask" and np.isnan(covariates).any():
        raise TaskError(f"{_nan_rows(where, covariates, covariate_columns, 'covariate')}; "
                        f"covariates are inputs and cannot be missing (missing='mask' masks "
                        f"target values only): {fix}, or pass missing='ffill' (carry the last "
                        f"value forward) or 'drop' (drop the rows)")
    if missing == "ffill":
        values = pd.DataFrame(values).ffill().to_numpy()
        lead = np.flatnonzero(np.isnan(values).any(axis=1))
        if lead.size:
            raise TaskError(f"{where}: rows {listed_rows(lead)} hold NaN with no earlier value to "
                            f"carry forward (missing='ffill'); use missing='drop'")
    elif missing == "drop":
        values, file_rows = values[~nan], file_rows[~nan]
    dates, timezone = series_dates(df, file_rows, where, date_column)
    return {"values": values, "file_rows": file_rows, "dates": dates, "timezone": timezone}


class CSVSeriesTask(Task):
    """Forecast the next ``horizon`` rows of CSV columns from the previous ``context_length``.

    Args:
        path: CSV file (``.gz`` etc. decompressed by pandas; relative to the cwd), or a
            ``pandas.DataFrame`` holding the series (its rows in time order). A task on a
            DataFrame cannot be rebuilt from its config (``rebuildable`` is False).
        dataset: a named dataset of :mod:`taylorformer.tasks.datasets` (downloaded and
            checked on first use, then read from the cache); ``path`` wins if both are given.
        target_columns: column name or list of names; ``dim_y`` is their count.
        date_column: optional column parsed as dates (strictly increasing; a time zone or
            UTC offset is kept, see :meth:`date_index`). A DataFrame
            with a ``DatetimeIndex`` uses its index when ``date_column`` is None.
        column_names: names for a file without a header row (one per column); ``None``
            reads the first row as the header. Column names are compared as strings.
        split: chronological train/val/test ratios, positive, summing to 1.
        context_length, horizon: window sizes ``C`` and ``H`` (positive integers; the
            paper uses C = 96 and H in 96/192/336/720).
        eval_stride: step between consecutive val/test window starts.
        missing: NaN in target or covariate columns: ``"mask"`` (default: a NaN target
            value stays NaN in the batches, a missing observation the model masks; a NaN
            covariate is an error), ``"error"``, ``"drop"`` the rows, or ``"ffill"`` (carry
            the last value forward).
        covariate_columns: columns given as inputs at every row, context and target
            (values known in advance), standardised with their training mean and std.
        calendar_features: names of :data:`CALENDAR_FEATURES` computed from the dates
            (needs dates) as inputs, e.g. ``["hour", "day_of_week", "month"]``.
        calendar_encoding: ``"sincos"`` (two inputs per feature) or ``"linear"`` (one).
        lead_input: append the lead input (:func:`window_leads`) after the others: the
            log-scaled distance of each row to the last context row, so a model resolves
            the first leads (the position input moves 2 / (C + H - 1) per row). On by
            default; the named presets (``ett``, ``exchange-rate``, ...) follow the
            papers' protocol and turn it off.
        mirror: each training window is mirrored (its values negated about the training
            mean, context and targets alike) with probability 1/2, so a model learns no
            preferred direction of change: for a series without one (an exchange rate, a
            price, an anomaly), where a drift of the training years would not hold later.
    """

    name = "csv"
    rebuildable = True
    #: ``lead_input`` was off by default before; a run saved then records no value
    changed_defaults = {"lead_input": False}
    @property
    def model_defaults(self):
        """Spec values a model trained on this task takes where its spec leaves them open:
        ``standardise: window``; with ``lead_input``, ``last`` (anchored on the last
        observation, which the lead input lets the network depart from lead by lead)."""
        return {"standardise": "last" if self.lead_input else "window"}

    def __init__(self, path=None, dataset=None, target_columns=None, date_column=None, column_names=None,
                 split=(0.69, 0.11, 0.20), context_length=96, horizon=96, eval_stride=1,
                 missing="mask", covariate_columns=None, calendar_features=None,
                 calendar_encoding="sincos", lead_input=True, mirror=False):
        import pandas as pd

        frame = path if isinstance(path, pd.DataFrame) else None
        self.in_memory = frame is not None  # the series came as a DataFrame
        if path is not None:  # a local copy wins over a preset's dataset name
            dataset = None
        elif dataset is None:
            raise TaskError("csv task needs path= (a CSV file or a pandas DataFrame) or dataset= (a "
                            f"named dataset: {', '.join(sorted(datasets.DATASETS))})")
        if frame is None and path is not None and (not isinstance(path, (str, os.PathLike)) or not str(path)):
            raise TaskError(f"csv task: path must be a CSV file name or a pandas DataFrame, got {path!r}")
        if dataset is not None and not isinstance(dataset, str):
            raise TaskError(f"csv task: dataset must be a dataset name, got {dataset!r}")
        self.context_length = check_int("csv task", "context_length", context_length, 1, MAX_COUNT)
        self.horizon = check_int("csv task", "horizon", horizon, 1, MAX_COUNT)
        self.eval_stride = check_int("csv task", "eval_stride", eval_stride, 1, MAX_COUNT)
        self.missing = check_choice("csv task", "missing", missing, MISSING_POLICIES)
        self.split = check_split(split)
        self.path = None if path is None or self.in_memory else str(path)
        self.dataset_name, self.rebuildable = dataset, not self.in_memory
        self.resolved_path = None
        self.column_names = None if column_names is None else _names("column_names", column_names, False)
        if not (date_column is None or isinstance(date_column, str)
                or (isinstance(date_column, int) and not isinstance(date_column, bool))):
            raise TaskError(f"csv task: date_column must be None or one column name, got {date_column!r}")
        self.date_column = None if date_column is None else str(date_column)
        if target_columns is None:
            raise TaskError(f"csv task on {self.source!r} needs target_columns= (one or more columns)")
        self.target_columns = _names("target_columns", target_columns)
        if not self.target_columns or len(set(self.target_columns)) != len(self.target_columns):
            raise TaskError(f"csv task: target_columns must be one or more distinct names, got {target_columns!r}")
        self.covariate_columns = [] if covariate_columns is None else _names("covariate_columns", covariate_columns)
        both = sorted(set(self.covariate_columns) & set(self.target_columns))
        if both or len(set(self.covariate_columns)) != len(self.covariate_columns):
            raise TaskError(f"csv task: covariate_columns must be distinct and not targets, got "
                            f"{covariate_columns!r}" + (f" ({both} are target_columns)" if both else ""))
        features = [] if calendar_features is None else _names("calendar_features", calendar_features)
        for name in features:
            check_choice("csv task", "calendar_features", name, tuple(CALENDAR_FEATURES))
        self.calendar_features = features
        self.calendar_encoding = check_choice("csv task", "calendar_encoding", calendar_encoding,
                                              CALENDAR_ENCODINGS)
        self.dim_y = len(self.target_columns)
        if not isinstance(lead_input, bool):
            raise TaskError(f"csv task: lead_input must be true or false, got {lead_input!r}")
        self.lead_input = lead_input
        if not isinstance(mirror, bool):
            raise TaskError(f"csv task: mirror must be true or false, got {mirror!r}")
        self.mirror = mirror
        self.dim_x = (1 + len(self.covariate_columns) + len(features) * (2 if calendar_encoding == "sincos" else 1)
                      + int(lead_input))
        if not self.in_memory:
            self.resolved_path = resolve_path(self.path) if dataset is None else datasets.fetch(dataset)
        self._load(frame)

    @property
    def source(self):
        """What the series was read from, for messages: the file or ``"DataFrame"``."""
        if self.in_memory:
            return "DataFrame"
        return str(self.resolved_path) if self.resolved_path is not None else (self.path or self.dataset_name)

    # ------------------------------------------------------------------ loading
    def _read_table(self, frame):
        """``(DataFrame with str column names, where)``: the file read with pandas, or a
        shallow copy of ``frame`` (:func:`read_table`)."""
        return read_table(self.resolved_path if frame is None else frame, self.column_names)

    def _load(self, frame):
        df, where = self._read_table(frame)
        read = read_series(df, where, self.target_columns, self.covariate_columns, self.date_column,
                           self.missing, in_memory=self.in_memory,
                           header_hint=self.column_names is None and not self.in_memory)
        values, file_rows = read["values"], read["file_rows"]
        self.dates, self.timezone = read["dates"], read["timezone"]
        if self.calendar_features and self.dates is None:
            raise TaskError(f"csv task on {where}: calendar_features {self.calendar_features} need dates: "
                            "pass date_column= (or a DataFrame with a DatetimeIndex)")
        self.values, self.covariates = values[:, :self.dim_y], values[:, self.dim_y:]
        self.file_rows = file_rows
        self._split_rows()
        self.mean, self.std, self.scaled = self._standardise(self.values, self.target_columns, "target", where)
        cov_mean, cov_std, cov_scaled = self._standardise(self.covariates, self.covariate_columns,
                                                          "covariate", where)
        self.covariate_mean, self.covariate_std = cov_mean, cov_std
        calendar = (calendar_inputs(self.date_index(self.dates), self.calendar_features, self.calendar_encoding)
                    if self.calendar_features else np.zeros((len(values), 0)))
        #: ``[N, dim_x - 1]`` float32 inputs after the position: covariates, calendar
        self.features = np.concatenate([cov_scaled, calendar.astype(np.float32)], 1)

    def date_index(self, dates):
        """``pandas.DatetimeIndex`` of stored ``dates [n]`` (UTC datetime64 when the data have a
        time zone) in the data's zone (:attr:`timezone`; naive without one)."""
        import pandas as pd

        index = pd.DatetimeIndex(dates)
        if self.timezone is None or index.tz is not None:
            return index
        return index.tz_localize("UTC").tz_convert(self.timezone)

    def _standardise(self, values, columns, role, where):
        """``(mean, std, scaled float32)`` of ``values [N, K]`` (NaN: missing, stays NaN) from
        the observed values of the training rows; a :class:`TaskError` naming the column
        (and row) where a column has no observed training value, the statistics overflow
        float64, a column is constant, or a standardised value (any split) overflows float32."""
        lo, hi = self.split_bounds["train"]
        train = values[lo:hi]
        empty = [col for j, col in enumerate(columns) if np.isnan(train[:, j]).all()]
        if empty:
            raise TaskError(f"{where}: {role} column(s) {empty} have no observed (non-NaN) value in the "
                            f"{hi - lo} training rows (file rows {self.file_rows[lo]}..{self.file_rows[hi - 1]}, "
                            f"0-based, header excluded): cannot standardise them")
        mean, std = column_stats(train)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            scaled = (values - mean) / std
        for j in np.flatnonzero(~maps_back(mean, std)):
            i = lo + int(np.nanargmax(np.abs(train[:, j])))
            raise TaskError(f"{where}: standardising {role} column {columns[j]!r} overflows float64 "
                            f"(training mean {mean[j]:g}, std {std[j]:g}: standardised values would not "
                            f"map back to finite numbers); its largest training value is "
                            f"{values[i, j]:g} in row {self.file_rows[i]} (0-based, header excluded): "
                            f"rescale the column")
        flat = np.flatnonzero(std <= RESOLUTION * np.nanmax(np.abs(train), axis=0))
        if flat.size:
            raise TaskError(f"{role} column(s) {[columns[j] for j in flat]} of {where} "
                            f"are constant over the training rows (up to float64 rounding): cannot standardise")
        big = np.abs(scaled) > np.finfo(np.float32).max
        for j, col in enumerate(columns):
            rows = np.flatnonzero(big[:, j])
            if rows.size:
                i = int(rows[0])
                split = next(s for s, (a, b) in self.split_bounds.items() if a <= i < b)
                raise TaskError(f"{where}: {role} column {col!r} has {rows.size} value(s) beyond the "
                                f"float32 range once standardised with the training mean {mean[j]:g} "
                                f"and std {std[j]:g}, the first {values[i, j]:g} in row "
                                f"{self.file_rows[i]} ({split} split; 0-based, header excluded): "
                                f"rescale the column")
        return mean, std, scaled.astype(np.float32)

    def _split_rows(self):
        n, window = len(self.values), self.context_length + self.horizon
        self.split_bounds = split_cuts(n, self.split)
        for s, (lo, hi) in self.split_bounds.items():
            if hi - lo < window:
                source = "DataFrame" if self.in_memory else f"data file {str(self.resolved_path)!r}"
                raise TaskError(
                    f"the {s} split of {source} has {hi - lo} rows "
                    f"(rows {lo}..{hi - 1} of {n}, split {self.split}) but one window needs "
                    f"context_length + horizon = {self.context_length} + {self.horizon} = {window} rows")

    # ------------------------------------------------------------------ queries
    def get_config(self):
        """The options (JSON); ``path`` is None for a task on a DataFrame (not rebuildable)."""
        return {"path": self.path, "dataset": self.dataset_name, "target_columns": list(self.target_columns),
                "date_column": self.date_column, "column_names": self.column_names,
                "split": list(self.split), "context_length": self.context_length,
                "horizon": self.horizon, "eval_stride": self.eval_stride,
                "missing": self.missing, "covariate_columns": list(self.covariate_columns),
                "calendar_features": list(self.calendar_features),
                "calendar_encoding": self.calendar_encoding, "lead_input": self.lead_input,
                "mirror": self.mirror}

    def extra_signature(self):
        import tensorflow as tf

        return {"window_start": tf.TensorSpec([None], tf.int64)}

    def data_description(self):
        """What the model's numbers mean (:class:`taylorformer.normaliser.Normaliser`):
        ``x`` = [window position, covariates (z-scores of the training rows), calendar
        features], so the covariates map back affinely and the rest are as built; names
        from the columns (a CSV gives no units); the series' dates; source and split sizes."""
        from taylorformer.normaliser import series_time

        per = 2 if self.calendar_encoding == "sincos" else 1
        calendar = [f"{f}_{part}" for f in self.calendar_features
                    for part in (("sin", "cos") if per == 2 else ("linear",))]
        k = len(self.covariate_columns)
        lead = ["lead"] if self.lead_input else []
        return {"x_offset": np.concatenate([[0.0], self.covariate_mean, np.zeros(len(calendar) + len(lead))]),
                "x_scale": np.concatenate([[1.0], self.covariate_std, np.ones(len(calendar) + len(lead))]),
                "x_names": ["position"] + list(self.covariate_columns) + calendar + lead,
                "x_is": (f"position in the window (-1 first context row, +1 last target row; "
                         f"{self.context_length} context + {self.horizon} target rows)"
                         + (", covariates in the data's units" if k else "")
                         + (f", calendar features ({self.calendar_encoding})" if calendar else "")
                         + (", lead (log-scaled distance to the last context row)" if lead else "")),
                "y_names": list(self.target_columns),
                "time": series_time(self.dates, self.timezone, self.date_column,
                                    context_length=self.context_length, horizon=self.horizon),
                "source": self.source, "split_sizes": {s: hi - lo for s, (lo, hi) in self.split_bounds.items()},
                "split_unit": "rows"}

    @property
    def x(self):
        """``[C + H]`` float32 position input of every window (:func:`window_positions`)."""
        return window_positions(self.context_length, self.horizon)

    @property
    def leads(self):
        """``[C + H, 1]`` float32 lead input of every window (:func:`window_leads`), or
        ``[C + H, 0]`` without ``lead_input``."""
        leads = window_leads(self.context_length, self.horizon)[:, None]
        return leads if self.lead_input else leads[:, :0]

    def window_starts(self, split):
        """``[n]`` int64 evaluation window starts of ``split``, increasing (every ``eval_stride``-th)."""
        lo, hi = self._bounds(split)
        return np.arange(lo, hi - self.context_length - self.horizon + 1, self.eval_stride, dtype=np.int64)

    def to_original_units(self, y):
        """Undo the standardisation: ``[..., Dy]`` -> ``[..., Dy]`` float64 in file units."""
        return np.asarray(y, np.float64) * self.std + self.mean

    def series(self, split=None):
        """Raw series of ``split`` (or all rows): dict ``index [n]`` series rows, ``file_rows [n]``
        (0-based data rows of the file), ``dates [n]`` datetime64 (a tz-aware
        ``DatetimeIndex`` when the dates have a zone, :attr:`timezone`) or None, ``y [n, Dy]`` float64
        (NaN where a value is missing, ``missing="mask"``)."""
        return self._raw(*((0, len(self.values)) if split is None else self._bounds(split)))

    def window(self, start):
        """The true series of the window starting at series row ``start`` (a ``window_start``).

        Returns the :meth:`series` dict for its ``C + H`` rows plus ``x [C + H]`` (the
        position input) and ``inputs [C + H, dim_x]`` (every input the model sees); the
        first ``context_length`` rows are the context, the rest the targets.
        """
        size = self.context_length + self.horizon
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) \
                or not 0 <= start <= len(self.values) - size:
            raise TaskError(f"window start {start} out of range [0, {len(self.values) - size}]")
        lo = int(start)
        inputs = np.concatenate([self.x[:, None], self.features[lo:lo + size], self.leads], 1)
        return {**self._raw(lo, lo + size), "x": self.x, "inputs": inputs}

    def _raw(self, lo, hi):
        return {"index": np.arange(lo, hi, dtype=np.int64), "file_rows": self.file_rows[lo:hi],
                "dates": None if self.dates is None else self.dates[lo:hi] if self.timezone is None
                else self.date_index(self.dates[lo:hi]), "y": self.values[lo:hi]}

    def _bounds(self, split):
        if not (isinstance(split, str) and split in self.split_bounds):
            raise TaskError(f"split must be one of {list(SPLITS)}, got {split!r}")
        return self.split_bounds[split]

    # ------------------------------------------------------------------ data
    def batch(self, starts):
        """The batch of the windows starting at series rows ``starts`` (``[B]`` ints, or
        one int): the same tensors :meth:`dataset` yields for those windows."""
        import tensorflow as tf

        starts = np.atleast_1d(np.asarray(starts))
        if starts.ndim != 1 or starts.size == 0:
            raise TaskError(f"window starts must be one int or a non-empty list of them, got {starts!r}")
        for start in starts:
            self.window(start.item() if isinstance(start, np.generic) else start)  # range check
        return self._make_batch(tf.constant(starts, tf.int64))

    def _make_batch(self, starts):
        """Batch of window ``starts [B]`` int64 (TF ops: eager, or inside ``tf.data``)."""
        import tensorflow as tf

        c, h = self.context_length, self.horizon
        offsets = tf.range(c + h, dtype=tf.int64)
        rows = starts[:, None] + offsets[None]  # [B, C + H]
        b = tf.shape(starts)[0]
        y = tf.gather(tf.constant(self.scaled), rows)  # [B, C + H, Dy]
        xs = tf.broadcast_to(tf.constant(self.x)[None, :, None], [b, c + h, 1])
        if self.features.shape[1]:
            xs = tf.concat([xs, tf.gather(tf.constant(self.features), rows)], -1)
        if self.lead_input:
            xs = tf.concat([xs, tf.broadcast_to(tf.constant(self.leads)[None], [b, c + h, 1])], -1)
        return {"xc": xs[:, :c], "yc": y[:, :c], "xt": xs[:, c:], "yt": y[:, c:],
                "mask_c": tf.ones([b, c]), "mask_t": tf.ones([b, h]), "window_start": starts}

    def dataset(self, split="train", batch_size=16, seed=0, num_batches=None, start=0):
        """Batches (module docstring); ``train`` infinite unless ``num_batches``, ``val``/``test``
        every window once (``num_batches`` caps the count). ``start``: index of the first
        training batch (resuming a run continues the same stream)."""
        import tensorflow as tf

        lo, hi = self._bounds(split)
        dataset_args(batch_size, num_batches, start, seed)
        c, h = self.context_length, self.horizon
        ds = window_starts_dataset(split, batch_size, seed, start, num_batches, lo, hi - lo - c - h + 1,
                                   None if split == "train" else self.window_starts(split))
        if split == "train" and self.mirror:  # batch i's signs depend only on (seed, i), as its windows
            ds = ds.enumerate(start=int(start)).map(lambda i, starts: self._mirrored(self._make_batch(starts), seed, i),
                                                    num_parallel_calls=tf.data.AUTOTUNE)
            return ds.prefetch(tf.data.AUTOTUNE)
        return ds.map(self._make_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    @staticmethod
    def _mirrored(batch, seed, index):
        """``batch`` with each window's ``yc`` and ``yt`` negated (mirrored about the
        training mean: they are z-scores) with probability 1/2, drawn from ``(seed, index)``."""
        import tensorflow as tf

        draw = tf.random.stateless_uniform(tf.shape(batch["yc"])[:1], seed=tf.stack(
            [tf.constant(int(seed) + MIRROR_SEED_OFFSET, tf.int64), tf.cast(index, tf.int64)]))
        sign = tf.where(draw < 0.5, -1.0, 1.0)[:, None, None]
        return {**batch, "yc": batch["yc"] * sign, "yt": batch["yt"] * sign}

    # ------------------------------------------------------------------ forecasts
    def forecast(self, model, windows, num_samples=200, seed=0, memory_budget=None, progress=None):
        """Forecasts of ``model`` for ``windows`` in the data's units.

        ``windows``: a batch of this task (its ``window_start``), one window start or a
        list of them. Returns a dict: ``starts [B]``, ``mean``/``std [B, H, Dy]`` (the
        predictive's; Monte Carlo estimates for an autoregressive model) and ``samples
        [S, B, H, Dy]`` (joint forecast paths for an autoregressive model, independent
        per-step draws for a conditional one), all float64 in original units.
        An autoregressive model samples in chunks that fit ``memory_budget`` (e.g.
        ``"2GB"``; default: :func:`taylorformer.models.bounded_sampling.default_budget`), each
        window from its own random stream keyed by its start, so a window's paths are the
        same for a seed whatever the budget and the other windows; ``progress`` (default:
        on a terminal) shows a progress bar (:meth:`AutoregressiveNP.sample
        <taylorformer.models.AutoregressiveNP.sample>`).
        """
        from taylorformer.models.inference import predict

        check_int("forecast", "num_samples", num_samples, minimum=0)
        starts = np.asarray(windows["window_start"]) if isinstance(windows, dict) else windows
        batch = self.batch(starts)
        out = predict(model, batch, num_samples=num_samples, seed=seed, memory_budget=memory_budget,
                      window_ids=batch["window_start"].numpy(), progress=progress)
        samples = out.get("samples")
        return {"starts": batch["window_start"].numpy(),
                "mean": self.to_original_units(out["mean"]),
                "std": np.asarray(out["stddev"], np.float64) * self.std,
                "samples": None if samples is None else self.to_original_units(samples)}

    def forecast_frame(self, model, windows, num_samples=200, quantiles=(0.05, 0.5, 0.95), seed=0,
                       memory_budget=None, progress=None):
        """``model``'s forecasts as a ``pandas.DataFrame`` in the data's units.

        Rows: the target steps, indexed by date (``date``; the series row ``row`` where
        the data have no dates); for several windows a MultiIndex ``(window_start, date)``.
        Columns: a MultiIndex ``(target column, statistic)`` with ``truth`` (the observed
        value; NaN where it is missing), ``mean``, ``std`` and one ``q<level>`` column per
        quantile level (e.g. ``q0.05``). How the quantiles were computed is the frame's
        ``attrs["quantile_method"]``, as ``predict`` computes them
        (:func:`~taylorformer.models.inference.predictive_quantiles`): a conditional model's are its
        predictive's own quantiles (``"analytic (the predictive's own quantile)"``), an
        autoregressive model's are estimated from its ``num_samples`` joint forecast paths
        (``"Monte Carlo over S sampled paths"``; they need ``num_samples >= 1``).
        ``windows``: as in :meth:`forecast`; one int gives the single-window (date-indexed)
        frame. ``memory_budget``, ``progress``: as in :meth:`forecast`.
        """
        import pandas as pd

        from taylorformer.models.inference import monte_carlo_quantiles, predictive_quantiles

        levels = [check_number("forecast_frame", "quantiles", q, 0.0, 1.0) for q in np.atleast_1d(quantiles)]
        causal = getattr(model, "causal", False)
        if levels and causal and not num_samples:
            raise TaskError(f"forecast_frame: an autoregressive model's quantiles {levels} are estimated "
                            "from its forecast paths; pass num_samples >= 1 (or quantiles=())")
        out = self.forecast(model, windows, num_samples=num_samples, seed=seed, memory_budget=memory_budget,
                            progress=progress)
        if not levels:
            quants, method = np.zeros((0,) + out["mean"].shape), None  # [Q, B, H, Dy]
        elif causal:
            quants = np.quantile(out["samples"], levels, axis=0)
            method = monte_carlo_quantiles(num_samples, "sampled paths")
        else:
            quants, method = predictive_quantiles(model.distribution(self.batch(out["starts"])), levels, seed)
            quants = self.to_original_units(quants)
        frames = []
        for i, start in enumerate(out["starts"]):
            truth = self.window(int(start))
            rows = slice(self.context_length, None)
            index = (self.date_index(truth["dates"][rows]).rename("date") if self.dates is not None
                     else pd.Index(truth["index"][rows], name="row"))
            data = {}
            for j, col in enumerate(self.target_columns):
                data[(col, "truth")] = truth["y"][rows, j]
                data[(col, "mean")], data[(col, "std")] = out["mean"][i, :, j], out["std"][i, :, j]
                for q, level in zip(quants, levels):
                    data[(col, f"q{level:g}")] = q[i, :, j]
            frames.append(pd.DataFrame(data, index=index))
        frame = (frames[0] if np.ndim(windows) == 0 and not isinstance(windows, dict)
                 else pd.concat(frames, keys=[int(s) for s in out["starts"]], names=["window_start"]))
        frame.attrs["quantile_method"] = method
        return frame

    def can_plot(self):
        return True

    def plot(self, model, batch, num_tasks=4, num_samples=0, title=None, axes=None):
        """Forecasts of the first ``num_tasks`` windows of ``batch`` against dates in the
        data's units (:func:`taylorformer.plotting.forecasts.plot_forecast`): the context
        as history, the truth (missing values are gaps in both), quantile bands from
        ``max(num_samples, 100)`` samples and ``min(num_samples, 5)`` sampled paths; one row
        per window, one column per target."""
        from taylorformer.plotting.forecasts import plot_forecast

        check_int("plot", "num_tasks", num_tasks)
        check_int("plot", "num_samples", num_samples, minimum=0)
        starts = np.asarray(batch["window_start"])[:num_tasks]
        out = self.forecast(model, starts, num_samples=max(num_samples, 100))
        c = self.context_length
        if axes is None:
            from matplotlib.figure import Figure

            fig = Figure(figsize=(9, 2.6 * len(starts)), layout="tight")
            axes = fig.subplots(len(starts), self.dim_y, squeeze=False)
        axes = np.asarray(axes, dtype=object).reshape(-1, self.dim_y)
        if len(axes) < len(starts):
            raise TaskError(f"plot: {len(starts)} window(s) x {self.dim_y} target(s) need "
                            f"{len(starts) * self.dim_y} axes, got {axes.size}")
        for i, start in enumerate(starts):
            truth = self.window(int(start))
            when = (self.date_index(truth["dates"]).tz_localize(None) if self.dates is not None
                    else truth["index"])  # local wall-clock time on the axis
            for j, col in enumerate(self.target_columns):
                plot_forecast(when[:c], truth["y"][:c, j], when[c:], out["samples"][:, i, :, j],
                              truth=truth["y"][c:, j], mean=out["mean"][i, :, j],
                              num_paths=min(num_samples, 5), ax=axes[i, j], label=col,
                              time_label="date" if self.dates is not None else "series row")
        fig = axes[0, 0].figure
        if title:
            fig.suptitle(title)
        return fig


def check_split(split, owner="csv task"):
    """``split`` as three floats: positive train/val/test ratios summing to 1 (TaskError)."""
    ratios = list(split) if isinstance(split, (list, tuple)) else None
    if not (ratios and len(ratios) == 3 and all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                and math.isfinite(r) and r > 0 for r in ratios)
            and abs(sum(ratios) - 1.0) <= 1e-6):
        raise TaskError(f"{owner}: split must be three positive ratios (train, val, test) summing "
                        f"to 1, got {split!r}")
    return tuple(float(r) for r in ratios)


#: added to a run's seed for the signs of mirrored training windows (``mirror``), so they
#: are not the window draws' random numbers
MIRROR_SEED_OFFSET = 7919


#: ETT (Zhou et al. 2021): ETTh1/ETTh2 hourly (17,420 rows), ETTm1/ETTm2 every 15 min;
#: target oil temperature OT.
ETT_PRESET = {"date_column": "date", "target_columns": ["OT"], "lead_input": False}
#: Lai et al. (2018): exchange rates of 8 countries (daily, 7,588 rows) and electricity
#: use of 321 clients (hourly), no header, no dates. Columns are named as in the
#: Autoformer CSVs ("0", "1", ..., "OT"): the target OT is the last column (for exchange
#: rates Singapore, the series the Taylorformer paper calls "OT").
LAI_COLUMNS = {"exchange-rate": 8, "electricity": 321}


def lai_preset(name):
    """Preset options of the Lai et al. (2018) series ``name``."""
    n = LAI_COLUMNS[name]
    return {"dataset": name, "target_columns": ["OT"], "column_names": [str(i) for i in range(n - 1)] + ["OT"],
            "lead_input": False}


@hookimpl
def register_tasks(register):
    register("csv", CSVSeriesTask,
             description="Forecasting task on CSV columns: chronological split, train-stat z-scores, x in [-1, 1]")
    register("ett", functools.partial(CSVSeriesTask, dataset="etth1", **ETT_PRESET),
             description="ETTh1 oil temperature (OT) forecasting, split 69/11/20, context 96, horizon 96")
    for name in ("etth2", "ettm1", "ettm2"):
        register(name, functools.partial(CSVSeriesTask, dataset=name, **ETT_PRESET),
                 description=f"{name[:3].upper()}{name[3:]} oil temperature (OT) forecasting, as 'ett'")
    register("exchange-rate", functools.partial(CSVSeriesTask, **lai_preset("exchange-rate")),
             description="Daily exchange rate (last column, OT) forecasting, split 69/11/20, context 96, horizon 96")
    register("electricity", functools.partial(CSVSeriesTask, **lai_preset("electricity")),
             description="Hourly electricity use (last client, OT) forecasting, split 69/11/20, context 96, horizon 96")
