"""Hourly measurements at fixed stations as a spatio-temporal task (plugin ``builtin-stations``).

``stations`` (:class:`StationsTask`)
    Files with one row per station and hour (a folder of CSV files, one per station, or
    one long CSV), read with pandas. Every row is one point: space = the station's
    coordinates (``sc``/``st``), time = hours since the first timestamp (``tc``/``tt``),
    ``x`` = fixed effects: the ``calendar`` features of the row's timestamp
    (:data:`CALENDAR`), the numeric ``covariate_columns`` (weather) and the one-hot
    ``categorical_columns`` (e.g. wind direction; categories from the training rows, in
    sorted order), in that order; ``y`` = the ``target_columns``.

    Protocol (the BSA-TNP authors' code, ``MLGlobalHealth/dl4bi``,
    ``benchmarks/meta_learning/beijing_air_quality.py``):

    * missing values are handled by ``missing`` (:data:`MISSING_POLICIES`), then the rows are
      sorted by time (stations in name order within an hour: the reference leaves that
      order to an unstable sort). ``"mask"`` (default) keeps a row with a missing target
      value, which stays NaN in ``yc``/``yt``: the model leaves that value out, as context
      and as a scored target (:func:`taylorformer.batch.with_masks`; with several targets
      a point keeps its observed ones, flagged per output). Inputs cannot
      be missing: a missing covariate or categorical value is an error naming the file,
      column and rows, and so is a missing station or time (the ``"drop"``, ``"drop-any"``
      and ``"interpolate"`` policies drop such a row). ``"interpolate-mask"`` masks missing targets like ``"mask"`` and fills
      missing covariates like ``"interpolate"``: linearly in time between the station's
      neighbouring rows (categorical ones: the previous, else the next value).
      ``"interpolate"`` fills covariates the same way but drops a row with a missing
      target; ``"drop"`` drops a row with a missing value in a column the task uses,
      ``"drop-any"`` in any column (the reference's ``dropna()``); ``"error"`` refuses them;
    * split in temporal order by rows, with ratios ``(a, b, c)`` of the ``N`` rows:
      test = the last ``floor(c N)`` rows, validation the ``floor(b N)`` before them,
      training the first ``floor(a N)`` rows (rounding leaves at most two rows unused);
    * ``scaling`` of the inputs (calendar, covariates, time, and space with
      ``space="scaled"``) and of the targets with statistics of the training rows:
      ``"minmax"`` ``(v - min) / (max - min)`` (the reference's scikit-learn
      ``MinMaxScaler``; a constant input is only shifted, as there) or ``"zscore"``
      ``(v - mean) / std`` (ddof 0); one-hot columns stay 0/1; a target's statistics are
      those of its observed training values (a target with none is an error);
    * a task is ``num_context + num_target`` consecutive rows of one split: the first
      ``num_context`` rows are the context, the rest the targets (a forecast: every target
      is later than, or as late as, every context point). Left out, they are derived from
      what a window can hold, the ``m`` rows of the smallest split, by the images' rule
      (:func:`taylorformer.task.scaled_range`, :data:`DEFAULT_COUNTS`): 624 and 84 rows
      (the reference's 52 and 7 hours of 12 stations) where ``m >= 708``; on fewer rows each
      scaled by ``m / 708`` (floor, at least 1), so every split holds a window. Given
      counts that a split cannot hold are an error naming them and the files.

    ``space``: ``"scaled"`` (latitude, longitude in degrees, scaled like the other inputs:
    the reference), ``"latlon"`` (degrees, unscaled: for the BSA-TNP bias with
    ``distance="geodesic"``, ``coords="latlon"``) or ``"xyz"`` (unit vectors on the sphere,
    :func:`taylorformer.tasks.sphere.latlon_to_xyz`). Training windows start at random
    (batch ``i`` depends only on ``(seed, i)``); val/test windows start at every
    ``eval_stride``-th row of the split, in order.

    ``groups_in_x=True`` appends space and time to x (``x = [fixed effects, s, t]``, no
    ``sc``/``st``/``tc``/``tt``): for models that take every input in x, as the BSA-TNP
    authors' TNP-D and TE-TNP do (``safe_stack(x, s, t)``, MLGlobalHealth/dl4bi
    ``dl4bi/meta_learning/tnp_d.py`` line 79, ``te_tnp.py`` line 56).

    Batch: ``xc [B, C, Dx]``, ``yc [B, C, Dy]``, ``xt [B, H, Dx]``, ``yt [B, H, Dy]``,
    ``sc``/``st`` ``[B, C|H, 2|3]``, ``tc``/``tt`` ``[B, C|H, 1]``, masks (all ones; ``yc``/
    ``yt`` are NaN where a target value is missing, which the model masks) and
    ``window_start [B]`` int64 (row of :attr:`StationsTask.table` of the first context
    point). :meth:`StationsTask.to_original_units` undoes the target scaling.

``beijing-air`` (preset; BSA-TNP Sec. 5.4 / App. B): the named dataset ``beijing-air``
    (UCI Beijing Multi-Site Air Quality, 12 stations, March 2013 to February 2017), targets
    PM2.5 and PM10, covariates TEMP, PRES, DEWP, RAIN, WSPM and wind direction ``wd``
    (one-hot), calendar year, month, day, hour, day of week, is weekend, station
    coordinates of :data:`BEIJING_COORDINATES`, split 80/10/10, min-max scaling, 624
    context rows and 84 target rows, rows with any missing value dropped
    (``missing="drop-any"``). ``docs/tasks.md`` lists where the paper is silent.
"""
import functools
import math
import os
from pathlib import Path

import numpy as np

from taylorformer.errors import TaskError, close_matches
from taylorformer.hookspecs import hookimpl
from taylorformer.task import (MAX_COUNT, Task, check_choice, check_int, check_number, dataset_args,
                               scaled_range, window_starts_dataset)
from taylorformer.tasks import datasets
from taylorformer.tasks.csv_series import DataFileNotFoundError, check_not_boolean, listed_rows, parse_dates
from taylorformer.tasks.sphere import latlon_to_xyz

#: calendar features of a row's timestamp: the reference's year, month, day, hour and the
#: generated "day of week" (0 = Monday) and "is weekend" (Saturday, Sunday = 1)
CALENDAR = ("year", "month", "day", "hour", "day_of_week", "is_weekend")
#: missing values (module docstring): a missing target stays NaN (``"mask"``, ``"interpolate-mask"``),
#: is refused (``"error"``) or its row dropped; a missing covariate is refused (``"mask"``,
#: ``"error"``), interpolated (``"interpolate-mask"``, ``"interpolate"``) or its row dropped
MISSING_POLICIES = ("mask", "interpolate-mask", "error", "drop", "drop-any", "interpolate")
SPACES = ("scaled", "latlon", "xyz")
SCALINGS = ("minmax", "zscore")
SPLITS = ("train", "val", "test")
#: (latitude, longitude) in degrees of the 12 UCI stations, as the BSA-TNP authors' code
#: gives them (MLGlobalHealth/dl4bi@fb31d9e3, benchmarks/meta_learning/beijing_air_quality.py,
#: ``load_coords``); the UCI files hold no coordinates
BEIJING_COORDINATES = {
    "Aotizhongxin": (39.982, 116.397), "Changping": (40.217, 116.230),
    "Dingling": (40.292, 116.220), "Dongsi": (39.929, 116.417),
    "Guanyuan": (39.929, 116.339), "Gucheng": (39.914, 116.184),
    "Huairou": (40.328, 116.628), "Nongzhanguan": (39.937, 116.461),
    "Shunyi": (40.127, 116.655), "Tiantan": (39.886, 116.407),
    "Wanliu": (39.987, 116.287), "Wanshouxigong": (39.878, 116.352),
}
OWNER = "stations task"
#: ``(num_context, num_target)`` rows where the smallest split holds them (the reference's;
#: module docstring: scaled down on fewer rows)
DEFAULT_COUNTS = (624, 84)


def _names(key, value, allow_empty=True):
    """List of column names from one name or a list of names (distinct strings)."""
    names = [value] if isinstance(value, str) else value
    if not (isinstance(names, (list, tuple)) and all(isinstance(c, str) and c for c in names)
            and len(set(names)) == len(names) and (allow_empty or names)):
        allowed = "a column name or a list of distinct names" + ("" if allow_empty else " (at least one)")
        raise TaskError(f"{OWNER} {key!r} must be {allowed}, got {value!r}")
    return list(names)


def _coordinates(value):
    """``{station: (lat, lon)}`` from a dict, or ``[lat column, lon column]``."""
    if isinstance(value, (list, tuple)):
        return _names("coordinates", value, allow_empty=False) if len(value) == 2 else _bad_coordinates(value)
    if not isinstance(value, dict) or not value:
        _bad_coordinates(value)
    out = {}
    for station, pair in value.items():
        ok = isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pair)
        if not (ok and -90 <= pair[0] <= 90 and -180 <= pair[1] <= 360):
            raise TaskError(f"{OWNER} 'coordinates' of station {station!r} must be [latitude, longitude] "
                            f"in degrees (latitude in [-90, 90], longitude in [-180, 360]), got {pair!r}")
        out[str(station)] = (float(pair[0]), float(pair[1]))
    return out


def _bad_coordinates(value):
    raise TaskError(f"{OWNER} 'coordinates' must be a dict {{station: [latitude, longitude]}} (degrees) "
                    f"or [latitude column, longitude column], got {value!r}")


def _split(value):
    """Three positive ratios (train, val, test) summing to 1."""
    rule = "three positive ratios (train, val, test) summing to 1"
    if not (isinstance(value, (list, tuple)) and len(value) == 3):
        raise TaskError(f"{OWNER} 'split' must be {rule}, got {value!r}")
    try:
        ratios = tuple(check_number(OWNER, "split", r, 0.0, 1.0, low_open=True) for r in value)
    except TaskError:
        ratios = None
    if ratios is None or abs(sum(ratios) - 1.0) > 1e-6:
        raise TaskError(f"{OWNER} 'split' must be {rule}, got {value!r}")
    return ratios


def station_files(path):
    """Sorted CSV files of ``path``: a folder (its ``*.csv``), one file, or a list of files."""
    paths = path if isinstance(path, (list, tuple)) else [path]
    if not paths or not all(isinstance(p, (str, os.PathLike)) and str(p) for p in paths):
        raise TaskError(f"{OWNER} 'path' must be a folder of CSV files, a CSV file or a list of "
                        f"them, got {path!r}")
    files = []
    for p in paths:
        found = Path(p).expanduser().resolve()
        if found.is_dir():
            inside = sorted(found.glob("*.csv"))
            if not inside:
                raise DataFileNotFoundError(f"{OWNER} 'path': folder {str(p)!r} ({found}) holds no *.csv file")
            files += inside
        elif found.is_file():
            files.append(found)
        else:
            raise DataFileNotFoundError(f"{OWNER} 'path': data file or folder {str(p)!r} not found (looked "
                                        f"for {found}). Pass path= existing files, or dataset= a "
                                        f"named dataset ({', '.join(sorted(datasets.DATASETS))}).")
    return files


class StationsTask(Task):
    """Forecast station measurements from the previous hours of every station; see the
    module docstring. ``table`` (a ``pandas.DataFrame``: ``file``, ``file_row`` (0-based,
    header excluded), ``station``, ``time``) describes the rows after NaN handling and
    sorting, in the order ``window_start`` counts them."""

    name = "stations"

    def __init__(self, *, path=None, dataset=None, target_columns=None, covariate_columns=(),
                 categorical_columns=(), calendar=(), coordinates=None, station_column="station",
                 time_columns=("year", "month", "day", "hour"), space="scaled", scaling="minmax",
                 split=(0.8, 0.1, 0.1), num_context=None, num_target=None, eval_stride=12,
                 missing="mask", groups_in_x=False):
        if path is None and dataset is None:
            raise TaskError(f"{OWNER} needs path= (station CSV files or a folder of them) or dataset= "
                            f"(a named dataset: {', '.join(sorted(datasets.DATASETS))})")
        if path is None and not isinstance(dataset, str):
            raise TaskError(f"{OWNER} 'dataset' must be a dataset name, got {dataset!r}")
        if target_columns is None:
            raise TaskError(f"{OWNER} needs target_columns= (one or more columns)")
        self.target_columns = _names("target_columns", target_columns, allow_empty=False)
        self.covariate_columns = _names("covariate_columns", covariate_columns)
        self.categorical_columns = _names("categorical_columns", categorical_columns)
        self.calendar = _names("calendar", calendar)
        for feature in self.calendar:
            check_choice(OWNER, "calendar", feature, CALENDAR)
        self.station_column = _names("station_column", station_column, allow_empty=False)[0]
        self.time_columns = _names("time_columns", time_columns, allow_empty=False)
        if coordinates is None:
            raise TaskError(f"{OWNER} needs coordinates= ({{station: [latitude, longitude]}} or "
                            f"[latitude column, longitude column]); the files of many data sets hold none")
        self.coordinates = _coordinates(coordinates)
        used = [c for cols in self._column_roles().values() for c in cols]
        twice = sorted({c for c in used if used.count(c) > 1})
        if twice:
            raise TaskError(f"{OWNER}: column(s) {twice} are named in more than one role "
                            f"(targets, covariates, categorical, station, time, coordinates)")
        if not (self.calendar or self.covariate_columns or self.categorical_columns):
            raise TaskError(f"{OWNER} needs at least one fixed-effect input (calendar, covariate_columns "
                            f"or categorical_columns): x must not be empty")
        self.space = check_choice(OWNER, "space", space, SPACES)
        self.scaling = check_choice(OWNER, "scaling", scaling, SCALINGS)
        self.split = _split(split)
        given = tuple(None if value is None else check_int(OWNER, key, value, 1, MAX_COUNT)
                      for key, value in (("num_context", num_context), ("num_target", num_target)))
        self.eval_stride = check_int(OWNER, "eval_stride", eval_stride, 1, MAX_COUNT)
        self.missing = check_choice(OWNER, "missing", missing, MISSING_POLICIES)
        if not isinstance(groups_in_x, bool):
            raise TaskError(f"{OWNER} 'groups_in_x' must be true or false, got {groups_in_x!r}")
        self.groups_in_x = groups_in_x
        self.files = station_files(path) if path is not None else self._dataset_files(dataset)
        self.path = None if path is None else (
            [str(p) for p in path] if isinstance(path, (list, tuple)) else str(path))
        self.dataset_name = None if path is not None else dataset
        self._load(given)

    def _column_roles(self):
        """``{config key: [column names]}`` of every column the task reads."""
        return {"target_columns": self.target_columns, "covariate_columns": self.covariate_columns,
                "categorical_columns": self.categorical_columns, "station_column": [self.station_column],
                "time_columns": self.time_columns,
                "coordinates": self.coordinates if isinstance(self.coordinates, list) else []}

    @staticmethod
    def _dataset_files(name):
        """The checked files of the named dataset (an archive's members, in name order)."""
        found = datasets.fetch(name)
        entry = datasets.DATASETS[name]
        return [found / m for m in sorted(entry.members)] if isinstance(entry, datasets.DataArchive) else [found]

    # ------------------------------------------------------------------ loading
    def _read(self):
        """Concatenated files with their ``file`` and 0-based ``file_row``."""
        import pandas as pd

        wanted = [(c, key) for key, cols in self._column_roles().items() for c in cols]
        frames = []
        for file in self.files:
            try:
                df = pd.read_csv(file, low_memory=False)
            except (ValueError, OSError) as exc:  # pandas parser errors are ValueErrors
                raise TaskError(f"cannot read data file {str(file)!r} as CSV: {exc}") from exc
            df.columns = [str(c) for c in df.columns]
            for col, key in wanted:
                if col not in df.columns:
                    close = close_matches(col, df.columns)
                    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                    raise TaskError(f"data file {str(file)!r} has no column {col!r} (named by {key}){hint} "
                                    f"Columns: {list(df.columns)}")
            for col in self.target_columns:
                check_not_boolean(df[col], f"target column {col!r} of data file {str(file)!r}")
            frames.append(df.assign(file=str(file), file_row=np.arange(len(df))))
        return pd.concat(frames, ignore_index=True)

    def _numeric(self, df, columns):
        """``df[columns]`` as float64 (NaN where missing); non-numeric entries and infinite
        values are errors naming the file, column and row."""
        import pandas as pd

        out = np.empty((len(df), len(columns)))
        for j, col in enumerate(columns):
            values = pd.to_numeric(df[col], errors="coerce")
            bad = np.flatnonzero((values.isna() & df[col].notna()).to_numpy() | np.isinf(values.to_numpy()))
            if bad.size:
                i = bad[0]
                raise TaskError(f"data file {df['file'].iat[i]!r}: column {col!r} holds {bad.size} "
                                f"non-numeric or infinite value(s), the first {df[col].iat[i]!r} in row "
                                f"{df['file_row'].iat[i]} (0-based, header excluded)")
            out[:, j] = values.to_numpy(np.float64)
        return out

    def _handle_nan(self, df):
        """Rows kept by ``missing`` (:data:`MISSING_POLICIES`), covariates interpolated with
        ``"interpolate"``/``"interpolate-mask"``; a missing target stays NaN with ``"mask"``/
        ``"interpolate-mask"``."""
        inputs = self.covariate_columns + self.categorical_columns
        places = [self.station_column] + self.time_columns
        used = self.target_columns + inputs + places
        if self.missing == "drop-any":
            return df[~df.drop(columns=["file", "file_row"]).isna().any(axis=1)]
        if self.missing == "drop":
            return df[~df[used].isna().any(axis=1)]
        if self.missing == "error":
            self._refuse_missing(df, used, "Clean the files or pass missing='mask' (missing targets), "
                                           "'interpolate-mask' (and covariates filled), 'drop', 'drop-any' "
                                           "or 'interpolate'")
            return df
        if self.missing == "interpolate":
            df = self._interpolate(df)
            return df[~df[self.target_columns + places].isna().any(axis=1)]
        # "mask", "interpolate-mask": a missing target stays NaN, every input must be there
        self._refuse_missing(df, places, "A row without its station or time has no place: clean the files "
                                         "or pass missing='drop'")
        if self.missing == "interpolate-mask":
            return self._interpolate(df)
        self._refuse_missing(df, inputs, "These inputs cannot be missing (missing='mask' keeps missing "
                                         "target values only): clean the files or pass missing="
                                         "'interpolate-mask' (fills them in time per station), 'interpolate' "
                                         "or 'drop'")
        return df

    @staticmethod
    def _refuse_missing(df, columns, advice):
        """A TaskError naming the first file, the ``columns`` and that file's rows where one of
        ``columns`` is missing, followed by ``advice``; nothing if none is."""
        missing = df[columns].isna()
        cols = [c for c in columns if missing[c].any()]
        if not cols:
            return
        first = df[missing[cols[0]]]
        first = first[first["file"] == first["file"].iat[0]]
        raise TaskError(f"data file {first['file'].iat[0]!r}: column(s) {cols} hold missing values "
                        f"({int(missing.any(axis=1).sum())} row(s) in all files); column "
                        f"{cols[0]!r} in rows {listed_rows(first['file_row'])} of that file (0-based, header "
                        f"excluded). {advice}")

    def _interpolate(self, df):
        """``df`` with the covariates interpolated linearly in time between the station's
        neighbouring rows (categorical ones: the previous, else the next value); a TaskError
        where a station has no value of one."""
        df = df.sort_values("_time", kind="stable")
        df[self.covariate_columns] = self._numeric(df, self.covariate_columns)  # names bad entries
        inputs = self.covariate_columns + self.categorical_columns
        groups = df.groupby(self.station_column, sort=False)
        for col in self.covariate_columns:
            df[col] = groups[col].transform(lambda s: s.interpolate(limit_direction="both"))
        for col in self.categorical_columns:
            df[col] = groups[col].transform(lambda s: s.ffill().bfill())
        empty = df[inputs].isna().any(axis=1)
        if empty.any():
            i = int(np.flatnonzero(empty.to_numpy())[0])
            col = next(c for c in inputs if df[c].isna().iat[i])
            raise TaskError(f"data file {df['file'].iat[i]!r}: covariate {col!r} of station "
                            f"{df[self.station_column].iat[i]!r} has no value to interpolate from "
                            f"(missing={self.missing!r}); drop the column or the station")
        return df.sort_index()

    def _times(self, df):
        """``datetime64`` of every row from ``time_columns`` (date parts or one date column)."""
        import pandas as pd

        parts = df[self.time_columns]
        try:
            if len(self.time_columns) == 1:
                files = list(dict.fromkeys(df["file"]))
                where = f"data file {files[0]!r}" if len(files) == 1 else f"data files {files}"
                times = parse_dates(parts.iloc[:, 0], f"time column {self.time_columns[0]!r} of {where}")
                times.index = parts.index
                if times.dt.tz is not None:  # one fixed offset: its wall-clock time (calendar
                    times = times.dt.tz_localize(None)  # inputs are local); offsets that differ: UTC
            else:
                times = pd.to_datetime(parts.rename(columns=str.lower), errors="coerce")
        except (ValueError, TypeError) as exc:
            raise TaskError(f"{OWNER}: time_columns {self.time_columns} do not form timestamps ({exc}); "
                            f"give one date column, or year/month/day[/hour] columns") from None
        bad = times.isna() & parts.notna().all(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise TaskError(f"data file {df['file'].iat[i]!r}: time_columns {self.time_columns} give no "
                            f"valid timestamp in row {df['file_row'].iat[i]} (0-based, header excluded): "
                            f"{parts.iloc[i].tolist()}")
        return times

    def _load(self, given):
        """Reads, cleans and scales the rows; ``given`` ``(num_context, num_target)``, None
        where left out."""
        df = self._read()
        df["_time"] = self._times(df)
        df = self._handle_nan(df)
        df[self.station_column] = df[self.station_column].astype(str)
        if isinstance(self.coordinates, dict):
            unknown = sorted(set(df[self.station_column]) - set(self.coordinates))
            if unknown:
                i = int(np.flatnonzero(df[self.station_column].isin(unknown).to_numpy())[0])
                raise TaskError(f"data file {df['file'].iat[i]!r}: station(s) {unknown[:10]} have no "
                                f"coordinates; 'coordinates' knows {sorted(self.coordinates)}")
        dup = df.duplicated([self.station_column, "_time"], keep=False)
        if dup.any():
            rows = df[dup]
            raise TaskError(f"data file {rows['file'].iat[0]!r}: {int(dup.sum())} rows repeat a (station, "
                            f"time) pair, e.g. station {rows[self.station_column].iat[0]!r} at "
                            f"{rows['_time'].iat[0]} in rows {listed_rows(rows['file_row'][:2])} (0-based, header "
                            f"excluded)")
        df = df.sort_values(["_time", self.station_column], kind="stable").reset_index(drop=True)
        targets = self._numeric(df, self.target_columns)
        inputs = np.concatenate([self._calendar(df["_time"]), self._numeric(df, self.covariate_columns)], 1)
        hours = ((df["_time"] - df["_time"].iloc[0]) / np.timedelta64(1, "h")).to_numpy(np.float64)[:, None]
        latlon = self._latlon(df)
        self._split_rows(len(df), given)
        lo, hi = self.split_bounds["train"]
        self.y_offset, self.y_scale = self._statistics(targets[lo:hi], self.target_columns, targets=True)
        scaled = [self._scale(inputs, self._statistics(inputs[lo:hi], self.input_names)),
                  self._onehot(df)]
        self.x = np.concatenate(scaled, 1).astype(np.float32)
        self.t = self._scale(hours, self._statistics(hours[lo:hi], ["time"])).astype(np.float32)
        if self.space == "scaled":
            self.s = self._scale(latlon, self._statistics(latlon[lo:hi], ["latitude", "longitude"]))
        else:
            self.s = latlon if self.space == "latlon" else latlon_to_xyz(latlon)
        self.s = self.s.astype(np.float32)
        self.y = self._scale(targets, (self.y_offset, self.y_scale)).astype(np.float32)
        self.table = df[["file", "file_row", self.station_column, "_time"]].rename(
            columns={self.station_column: "station", "_time": "time"})
        if self.groups_in_x:
            self.x = np.concatenate([self.x, self.s, self.t], 1)
        self.dim_x, self.dim_y = self.x.shape[1], self.y.shape[1]
        observed = ~np.isnan(targets)  # a missing target stays NaN
        for names, values, known in ((self.input_names, self.x, True), (self.target_columns, self.y, observed)):
            bad = np.argwhere(~np.isfinite(values) & known)  # one-hot: finite
            if bad.size:
                i, j = bad[0]
                raise TaskError(f"data file {df['file'].iat[i]!r}: column {names[j]!r} is not finite once "
                                f"scaled with the training statistics (row {df['file_row'].iat[i]}, 0-based, "
                                f"header excluded; values near the float range overflow): rescale the column")

    @property
    def input_names(self):
        """Names of the scaled input columns of ``x`` (the one-hot columns follow them)."""
        return list(self.calendar) + self.covariate_columns

    def _calendar(self, times):
        """``[N, len(calendar)]`` float64 calendar features."""
        dt = times.dt
        values = {"year": dt.year, "month": dt.month, "day": dt.day, "hour": dt.hour,
                  "day_of_week": dt.dayofweek, "is_weekend": dt.dayofweek >= 5}
        return np.stack([values[f].to_numpy(np.float64) for f in self.calendar], 1) if self.calendar \
            else np.zeros((len(times), 0))

    def _latlon(self, df):
        """``[N, 2]`` float64 (latitude, longitude) of every row, checked."""
        if isinstance(self.coordinates, dict):
            return np.stack([df[self.station_column].map({k: v[j] for k, v in self.coordinates.items()})
                             .to_numpy(np.float64) for j in (0, 1)], 1)
        latlon = self._numeric(df, self.coordinates)
        bad = np.flatnonzero(np.isnan(latlon).any(1) | (np.abs(latlon[:, 0]) > 90)
                             | (latlon[:, 1] < -180) | (latlon[:, 1] > 360))
        if bad.size:
            i = bad[0]
            raise TaskError(f"data file {df['file'].iat[i]!r}: coordinates {self.coordinates} in row "
                            f"{df['file_row'].iat[i]} (0-based, header excluded) are {latlon[i].tolist()}; "
                            f"latitude must lie in [-90, 90] and longitude in [-180, 360] degrees")
        return latlon

    def _onehot(self, df):
        """``[N, sum of categories]`` one-hot columns; categories of the training rows, sorted."""
        import pandas as pd

        lo, hi = self.split_bounds["train"]
        blocks, self.categories = [], {}
        for col in self.categorical_columns:
            values = df[col].astype(str)
            cats = sorted(values.iloc[lo:hi].unique())
            codes = pd.Categorical(values, categories=cats).codes
            unseen = np.flatnonzero(codes < 0)
            if unseen.size:
                i = unseen[0]
                raise TaskError(f"data file {df['file'].iat[i]!r}: categorical column {col!r} holds "
                                f"{values.iat[i]!r} in row {df['file_row'].iat[i]} (0-based, header excluded), "
                                f"a category the training rows never show ({cats})")
            self.categories[col] = cats
            blocks.append(np.eye(len(cats))[codes])
        return np.concatenate(blocks, 1) if blocks else np.zeros((len(df), 0))

    def _statistics(self, train, names, targets=False):
        """``(offset, scale)`` ``[D]`` of ``scaling`` from the observed (non-NaN) values of the
        training rows ``train [n, D]``. A constant input gets scale 1 (shifted only); a
        constant target, or a column without an observed training value, is an error."""
        empty = [names[j] for j in np.flatnonzero(np.isnan(train).all(0))]
        if empty:
            raise TaskError(f"{OWNER}: {'target ' if targets else ''}column(s) {empty} of {self._source} have "
                            f"no observed (non-NaN) value in the {len(train)} training rows: cannot scale them")
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked in _load
            if self.scaling == "minmax":
                offset, scale = np.nanmin(train, 0), np.nanmax(train, 0) - np.nanmin(train, 0)
            else:
                offset, scale = np.nanmean(train, 0), np.nanstd(train, 0)
        flat = np.flatnonzero(scale == 0)
        if flat.size and targets:
            raise TaskError(f"{OWNER}: target column(s) {[names[j] for j in flat]} of {self._source} are "
                            f"constant over the training rows: cannot scale them")
        return offset, np.where(scale == 0, 1.0, scale)

    @staticmethod
    def _scale(values, stats):
        offset, scale = stats
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked in _load
            return (values - offset) / scale

    @property
    def _source(self):
        return f"dataset {self.dataset_name!r}" if self.path is None else f"path {self.path!r}"

    def _split_rows(self, n, given):
        """``split_bounds`` of the ``n`` rows and the counts: ``given`` ``(num_context,
        num_target)``, each None derived from the smallest split (module docstring)."""
        n_test, n_val = (math.floor(n * r + 1e-9) for r in self.split[2:0:-1])
        n_train = min(math.floor(n * self.split[0] + 1e-9), n - n_test - n_val)
        self.split_bounds = {"train": (0, n_train), "val": (n - n_test - n_val, n - n_test),
                             "test": (n - n_test, n)}
        smallest = min(hi - lo for lo, hi in self.split_bounds.values())
        self.num_context, self.num_target = (
            scaled_range(d, d, smallest, sum(DEFAULT_COUNTS), least=1)[1] if g is None else g
            for g, d in zip(given, DEFAULT_COUNTS))
        self.max_context, self.max_target = self.num_context, self.num_target
        window = self.num_context + self.num_target
        for s, (lo, hi) in self.split_bounds.items():
            if hi - lo < window:
                raise TaskError(f"{OWNER}: the {s} split of {self._source} has {hi - lo} rows (rows {lo}.."
                                f"{hi - 1} of {n} after missing={self.missing!r}, split {self.split}) "
                                f"but one task needs num_context + num_target = {self.num_context} + "
                                f"{self.num_target} = {window} rows")

    # ------------------------------------------------------------------ queries
    def to_original_units(self, y):
        """Undo the target scaling: ``[..., Dy]`` -> ``[..., Dy]`` float64 in file units."""
        return np.asarray(y, np.float64) * self.y_scale + self.y_offset

    def data_description(self):
        """What the model's numbers mean (:class:`taylorformer.normaliser.Normaliser`): ``x``
        the scaled fixed effects as built, the targets' and inputs' column names, the
        coordinates (space, time), source and split sizes (rows)."""
        onehot = [f"{col}={cat}" for col in self.categorical_columns for cat in self.categories.get(col, [])]
        groups = ([f"space_{j}" for j in range(self.s.shape[1])] + ["time"]) if self.groups_in_x else []
        names = list(self.input_names) + onehot + groups
        return {"x_names": names if len(names) == self.dim_x else None,
                "x_is": f"calendar and covariate inputs scaled ({self.scaling}) with the training rows' "
                        "statistics, then one-hot categories" + (", then space and time" if self.groups_in_x else ""),
                "y_names": list(self.target_columns),
                "coordinates": {"station": self.station_column, "space": ["latitude", "longitude"],
                                "space_inputs": self.space, "time": "hours since the first timestamp",
                                "time_columns": list(self.time_columns)},
                "source": self.path or f"dataset {self.dataset_name!r}",
                "split_sizes": {s: hi - lo for s, (lo, hi) in self.split_bounds.items()},
                "split_unit": "rows"}

    @property
    def context_length(self):
        """Rows of a window's context (``num_context``; the name forecasting tasks use, which
        :func:`taylorformer.workflow.baselines.overlap_block` reads)."""
        return self.num_context

    @property
    def horizon(self):
        """Rows of a window's targets (``num_target``)."""
        return self.num_target

    def window_starts(self, split):
        """``[n]`` int64 evaluation window starts of ``split`` (every ``eval_stride``-th row)."""
        if not (isinstance(split, str) and split in self.split_bounds):
            raise TaskError(f"split must be one of {list(SPLITS)}, got {split!r}")
        lo, hi = self.split_bounds[split]
        return np.arange(lo, hi - self.num_context - self.num_target + 1, self.eval_stride, dtype=np.int64)

    def get_config(self):
        return {"path": self.path, "dataset": self.dataset_name, "target_columns": self.target_columns,
                "covariate_columns": self.covariate_columns, "categorical_columns": self.categorical_columns,
                "calendar": self.calendar,
                "coordinates": ({k: list(v) for k, v in self.coordinates.items()}
                                if isinstance(self.coordinates, dict) else self.coordinates),
                "station_column": self.station_column, "time_columns": self.time_columns,
                "space": self.space, "scaling": self.scaling, "split": list(self.split),
                "num_context": self.num_context, "num_target": self.num_target,
                "eval_stride": self.eval_stride, "missing": self.missing, "groups_in_x": self.groups_in_x}

    def extra_signature(self):
        import tensorflow as tf

        ds = self.s.shape[1]
        if self.groups_in_x:
            return {"window_start": tf.TensorSpec([None], tf.int64)}
        return {"sc": tf.TensorSpec([None, None, ds], tf.float32), "st": tf.TensorSpec([None, None, ds], tf.float32),
                "tc": tf.TensorSpec([None, None, 1], tf.float32), "tt": tf.TensorSpec([None, None, 1], tf.float32),
                "window_start": tf.TensorSpec([None], tf.int64)}

    def can_plot(self):
        return True

    def plot(self, model, batch, num_tasks=4, num_samples=0, title=None, axes=None):
        """Forecasts of the first ``num_tasks`` windows of ``batch`` against time, in the data's
        units (:func:`taylorformer.plotting.forecasts.plot_forecast`): per window, the
        station of its first target and each target column, that station's context rows as
        history, its target rows' truth (missing values are gaps), quantile bands from
        ``max(num_samples, 100)`` predictive samples and ``min(num_samples, 5)`` sampled paths."""
        from matplotlib.figure import Figure

        from taylorformer.models.inference import predict
        from taylorformer.plotting.forecasts import plot_forecast

        check_int("plot", "num_tasks", num_tasks)
        check_int("plot", "num_samples", num_samples, minimum=0)
        batch = {k: np.asarray(v)[:num_tasks] for k, v in batch.items()}
        out = predict(model, batch, num_samples=max(num_samples, 100), seed=0)
        samples = self.to_original_units(out["samples"])  # [S, B, H, Dy]
        n, c, h = len(batch["window_start"]), self.num_context, self.num_target
        if axes is None:
            fig = Figure(figsize=(9, 2.6 * n), layout="tight")
            axes = fig.subplots(n, self.dim_y, squeeze=False)
        axes = np.asarray(axes, dtype=object).reshape(-1, self.dim_y)
        if len(axes) < n:
            raise TaskError(f"plot: {n} window(s) x {self.dim_y} target(s) need {n * self.dim_y} axes, "
                            f"got {axes.size}")
        for i, start in enumerate(batch["window_start"]):
            rows = self.table.iloc[int(start):int(start) + c + h]
            station = rows["station"].iat[c]
            mine = (rows["station"] == station).to_numpy()
            past, future = np.flatnonzero(mine[:c]), np.flatnonzero(mine[c:])
            truth = self.to_original_units(np.concatenate([batch["yc"][i], batch["yt"][i]]))
            times = rows["time"].to_numpy()
            for j, col in enumerate(self.target_columns):
                plot_forecast(times[past], truth[past, j], times[c + future], samples[:, i, future, j],
                              truth=truth[c + future, j], mean=self.to_original_units(out["mean"][i])[future, j],
                              num_paths=min(num_samples, 5), ax=axes[i, j], label=f"{col} at {station}",
                              time_label="time")
        fig = axes[0, 0].figure
        if title:
            fig.suptitle(title)
        return fig

    # ------------------------------------------------------------------ data
    def dataset(self, split="train", batch_size=16, seed=0, num_batches=None, start=0):
        """Batches (module docstring); ``train`` infinite unless ``num_batches``, ``val``/``test``
        every ``eval_stride``-th window once (``num_batches`` caps the count)."""
        import tensorflow as tf

        starts = self.window_starts(split)
        lo, _ = self.split_bounds[split]
        dataset_args(batch_size, num_batches, start, seed)
        c, h = self.num_context, self.num_target
        columns = {"x": tf.constant(self.x), "y": tf.constant(self.y), "s": tf.constant(self.s),
                   "t": tf.constant(self.t)}
        offsets = tf.range(c + h, dtype=tf.int64)

        def make_batch(first):
            b = tf.shape(first)[0]
            v = {k: tf.gather(col, first[:, None] + offsets[None]) for k, col in columns.items()}
            out = {"xc": v["x"][:, :c], "yc": v["y"][:, :c], "xt": v["x"][:, c:], "yt": v["y"][:, c:],
                   "mask_c": tf.ones([b, c]), "mask_t": tf.ones([b, h]), "window_start": first}
            if not self.groups_in_x:
                out.update(sc=v["s"][:, :c], st=v["s"][:, c:], tc=v["t"][:, :c], tt=v["t"][:, c:])
            return out

        ds = window_starts_dataset(split, batch_size, seed, start, num_batches, lo, len(starts), starts)
        return ds.map(make_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


#: the BSA-TNP protocol on the UCI Beijing data (see the module docstring)
BEIJING_AIR = {"dataset": "beijing-air", "target_columns": ["PM2.5", "PM10"],
               "covariate_columns": ["TEMP", "PRES", "DEWP", "RAIN", "WSPM"],
               "categorical_columns": ["wd"], "calendar": list(CALENDAR),
               "coordinates": {k: list(v) for k, v in BEIJING_COORDINATES.items()},
               "split": [0.8, 0.1, 0.1], "num_context": 624, "num_target": 84,
               "scaling": "minmax", "space": "scaled", "missing": "drop-any"}


@hookimpl
def register_tasks(register):
    register("stations", StationsTask,
             description="Hourly station data: space = station lat/lon, time = hours, x = calendar + "
                         "weather covariates; windows of consecutive rows")
    register("beijing-air", functools.partial(StationsTask, **BEIJING_AIR),
             description="UCI Beijing air quality (BSA-TNP): PM2.5 and PM10 at 12 stations, 624 context "
                         "rows, 84 targets, split 80/10/10")
