"""Time-series forecasting tasks read from CSV files (plugin ``builtin-csv``).

Registers the task ``csv`` (:class:`CSVSeriesTask`) and presets following the
Taylorformer forecasting protocol (paper Sec. 4.2) on the named datasets of
:mod:`taylorformer.tasks.datasets` (fetched on first use): ``ett`` (= ``etth1``),
``etth2``, ``ettm1``, ``ettm2`` (target oil temperature ``OT``), ``exchange-rate`` and
``electricity`` (Lai et al. 2018; target: the last column, named ``OT``).

Protocol, for a series of ``N`` rows (after NaN handling) and one window of
``W = context_length + horizon`` consecutive rows:

* Split: chronological; with ratios ``(a, b, c)`` the training rows are
  ``[0, floor(a N))``, validation ``[floor(a N), floor((a + b) N))``, test the rest.
  Every window lies entirely inside one split (a split needs at least ``W`` rows).
* Standardisation: ``(y - mean) / std`` per target column, with ``mean`` and the
  population ``std`` (ddof 0) of the *training rows only*.
* Inputs: every row is one time step (date gaps are ignored). The W rows of a window
  get ``x_j = -1 + 2 j / (W - 1)``, ``j = 0..W-1``: the first context row maps to -1,
  the last target row to +1, so ``x`` is the same for every window.
* Windows: ``train`` draws window starts uniformly at random (infinite, seeded by
  ``seed`` and the batch index); ``val``/``test`` give every valid start of the split in
  increasing order (every ``eval_stride``-th), the last batch possibly smaller.

Batch (see :mod:`taylorformer.batch`): ``xc [B, C, 1]``, ``yc [B, C, Dy]``,
``xt [B, H, 1]``, ``yt [B, H, Dy]``, ``mask_c [B, C]``, ``mask_t [B, H]`` (all ones),
``window_start [B]`` int64: series row of the first context point (see :meth:`window`).
"""
import functools
import math
import os
from pathlib import Path

import numpy as np

from taylorformer.errors import TaskError, close_matches
from taylorformer.hookspecs import hookimpl
from taylorformer.task import MAX_COUNT, Task, check_choice, check_int, dataset_args
from taylorformer.tasks import datasets

NAN_POLICIES = ("error", "drop", "ffill")
SPLITS = ("train", "val", "test")
MAX_LISTED = 10  # rows/values quoted in an error message


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


def _rows(index):
    """Short text listing row numbers (at most MAX_LISTED)."""
    index = [int(i) for i in index]
    more = f" and {len(index) - MAX_LISTED} more" if len(index) > MAX_LISTED else ""
    return f"{index[:MAX_LISTED]}{more}"


def _names(field, value, allow_one=True):
    """List of column names (str; ints are read as their text) from a list, or one name."""
    one = isinstance(value, (str, int)) and not isinstance(value, bool)
    names = [value] if allow_one and one else value
    if not (isinstance(names, (list, tuple))
            and all(isinstance(c, (str, int)) and not isinstance(c, bool) for c in names)):
        raise TaskError(f"csv task: {field} must be {'a column name or ' if allow_one else ''}a list of "
                        f"column names, got {value!r}")
    return [str(c) for c in names]


class CSVSeriesTask(Task):
    """Forecast the next ``horizon`` rows of CSV columns from the previous ``context_length``.

    Args:
        path: CSV file (``.gz`` etc. decompressed by pandas; relative to the cwd).
        dataset: a named dataset of :mod:`taylorformer.tasks.datasets` (downloaded and
            checked on first use, then read from the cache); ``path`` wins if both are given.
        target_columns: column name or list of names; ``dim_y`` is their count.
        date_column: optional column parsed as dates (must be non-decreasing).
        column_names: names for a file without a header row (one per column); ``None``
            reads the first row as the header. Column names are compared as strings.
        split: chronological train/val/test ratios, positive, summing to 1.
        context_length, horizon: window sizes ``C`` and ``H`` (positive integers; the
            paper uses C = 96 and H in 96/192/336/720).
        eval_stride: step between consecutive val/test window starts.
        nan_policy: NaN in target columns: ``"error"``, ``"drop"`` the rows, or
            ``"ffill"`` (carry the last value forward).
    """

    name = "csv"
    dim_x = 1

    def __init__(self, path=None, dataset=None, target_columns=None, date_column=None, column_names=None,
                 split=(0.69, 0.11, 0.20), context_length=96, horizon=96, eval_stride=1,
                 nan_policy="error"):
        if path is not None:  # a local copy wins over a preset's dataset name
            dataset = None
        elif dataset is None:
            raise TaskError("csv task needs path= (a CSV file) or dataset= (a named dataset: "
                            f"{', '.join(sorted(datasets.DATASETS))})")
        if path is not None and (not isinstance(path, (str, os.PathLike)) or not str(path)):
            raise TaskError(f"csv task: path must be a CSV file name, got {path!r}")
        if dataset is not None and not isinstance(dataset, str):
            raise TaskError(f"csv task: dataset must be a dataset name, got {dataset!r}")
        self.context_length = check_int("csv task", "context_length", context_length, 1, MAX_COUNT)
        self.horizon = check_int("csv task", "horizon", horizon, 1, MAX_COUNT)
        self.eval_stride = check_int("csv task", "eval_stride", eval_stride, 1, MAX_COUNT)
        self.nan_policy = check_choice("csv task", "nan_policy", nan_policy, NAN_POLICIES)
        self.split = _check_split(split)
        self.path, self.dataset_name = None if path is None else str(path), dataset
        self.column_names = None if column_names is None else _names("column_names", column_names, False)
        if not (date_column is None or isinstance(date_column, str)
                or (isinstance(date_column, int) and not isinstance(date_column, bool))):
            raise TaskError(f"csv task: date_column must be None or one column name, got {date_column!r}")
        self.date_column = None if date_column is None else str(date_column)
        if target_columns is None:
            raise TaskError(f"csv task on {self.path or self.dataset_name!r} needs target_columns= (one or more columns)")
        self.target_columns = _names("target_columns", target_columns)
        if not self.target_columns or len(set(self.target_columns)) != len(self.target_columns):
            raise TaskError(f"csv task: target_columns must be one or more distinct names, got {target_columns!r}")
        self.dim_y = len(self.target_columns)
        self.resolved_path = resolve_path(self.path) if dataset is None else datasets.fetch(dataset)
        self._load()

    # ------------------------------------------------------------------ loading
    def _load(self):
        import pandas as pd

        where = f"data file {str(self.resolved_path)!r}"
        header = "infer" if self.column_names is None else None
        try:
            df = pd.read_csv(self.resolved_path, header=header)
        except (ValueError, OSError) as exc:  # pandas parser errors are ValueErrors
            raise TaskError(f"cannot read {where} as CSV: {exc}") from exc
        if self.column_names is not None:
            if len(self.column_names) != df.shape[1]:
                raise TaskError(f"{where} has {df.shape[1]} columns but column_names names "
                                f"{len(self.column_names)}: {self.column_names}")
            df.columns = self.column_names
        df.columns = [str(c) for c in df.columns]
        wanted = [(c, "target_columns") for c in self.target_columns] + (
            [(self.date_column, "date_column")] if self.date_column else [])
        for col, key in wanted:
            if col not in df.columns:
                close = close_matches(col, df.columns)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                raise TaskError(f"{where} has no column {col!r}{hint} Columns: {list(df.columns)} "
                                f"(check {key}" + (", and column_names if the file has no header row)"
                                                   if self.column_names is None else ")"))
        if self.date_column in self.target_columns:
            raise TaskError(f"column {self.date_column!r} is both the date column and a target")
        values = np.empty((len(df), self.dim_y), np.float64)
        for j, col in enumerate(self.target_columns):
            numeric = pd.to_numeric(df[col], errors="coerce")
            bad = np.flatnonzero(numeric.isna().to_numpy() & df[col].notna().to_numpy())
            if bad.size:
                examples = ", ".join(f"row {i}: {df[col].iloc[i]!r}" for i in bad[:3])
                raise TaskError(f"target column {col!r} of {where} is not numeric "
                                f"({bad.size} non-numeric entries; {examples}; rows are 0-based, "
                                f"header excluded)")
            values[:, j] = numeric.to_numpy(np.float64)
        file_rows = np.arange(len(df))
        for j, col in enumerate(self.target_columns):
            inf = np.flatnonzero(np.isinf(values[:, j]))
            if inf.size:
                examples = ", ".join(f"row {i}: {float(values[i, j])}" for i in inf[:3])
                raise TaskError(f"{where}: target column {col!r} holds {inf.size} infinite value(s) "
                                f"({examples}; rows are 0-based, header excluded); a model cannot "
                                f"train on them: clean the file")
        nan = np.isnan(values).any(axis=1)
        if nan.any() and self.nan_policy == "error":
            cols = [c for j, c in enumerate(self.target_columns) if np.isnan(values[:, j]).any()]
            raise TaskError(f"{where}: target column(s) {cols} hold NaN in {int(nan.sum())} "
                            f"row(s): {_rows(np.flatnonzero(nan))} (0-based, header excluded); "
                            f"clean the file or pass nan_policy='drop' or 'ffill'")
        if self.nan_policy == "ffill":
            values = pd.DataFrame(values).ffill().to_numpy()
            lead = np.flatnonzero(np.isnan(values).any(axis=1))
            if lead.size:
                raise TaskError(f"{where}: rows {_rows(lead)} hold NaN with no earlier value to "
                                f"carry forward (nan_policy='ffill'); use nan_policy='drop'")
        elif self.nan_policy == "drop":
            values, file_rows = values[~nan], file_rows[~nan]
        self.dates = None
        if self.date_column:
            dates = pd.to_datetime(df[self.date_column].iloc[file_rows], errors="coerce")
            bad = np.flatnonzero(dates.isna().to_numpy())
            if bad.size:
                raise TaskError(f"date column {self.date_column!r} (date_column) of {where} has missing or "
                                f"unparseable dates in rows {_rows(file_rows[bad])}")
            steps = np.flatnonzero(np.diff(dates.to_numpy()) < np.timedelta64(0))
            if steps.size:
                raise TaskError(f"{where} is not in chronological order: date column "
                                f"{self.date_column!r} (date_column) decreases after rows {_rows(file_rows[steps])}")
            self.dates = dates.to_numpy()
        self.values, self.file_rows = values, file_rows
        self._split_rows()
        self.mean, self.std, self.scaled = self._standardise(where)

    def _standardise(self, where):
        """``(mean, std, scaled float32 series)`` from the training rows; a :class:`TaskError`
        naming the column and row where the statistics overflow float64, a column is constant,
        or a standardised value (any split) overflows float32."""
        lo, hi = self.split_bounds["train"]
        train = self.values[lo:hi]
        with np.errstate(over="ignore", invalid="ignore"):
            mean, std = train.mean(axis=0), train.std(axis=0)
            scaled = (self.values - mean) / std
        for j, col in enumerate(self.target_columns):
            if not (np.isfinite(mean[j]) and np.isfinite(std[j])):
                i = lo + int(np.argmax(np.abs(train[:, j])))
                raise TaskError(f"{where}: standardising target column {col!r} overflows float64 "
                                f"(training mean {mean[j]:g}, std {std[j]:g}); its largest training "
                                f"value is {self.values[i, j]:g} in row {self.file_rows[i]} (0-based, "
                                f"header excluded): rescale the column")
        flat = np.flatnonzero(std == 0)
        if flat.size:
            raise TaskError(f"target column(s) {[self.target_columns[j] for j in flat]} of {where} "
                            f"are constant over the training rows: cannot standardise")
        big = np.abs(scaled) > np.finfo(np.float32).max
        for j, col in enumerate(self.target_columns):
            rows = np.flatnonzero(big[:, j])
            if rows.size:
                i = int(rows[0])
                split = next(s for s, (a, b) in self.split_bounds.items() if a <= i < b)
                raise TaskError(f"{where}: target column {col!r} has {rows.size} value(s) beyond the "
                                f"float32 range once standardised with the training mean {mean[j]:g} "
                                f"and std {std[j]:g}, the first {self.values[i, j]:g} in row "
                                f"{self.file_rows[i]} ({split} split; 0-based, header excluded): "
                                f"rescale the column")
        return mean, std, scaled.astype(np.float32)

    def _split_rows(self):
        n, window = len(self.values), self.context_length + self.horizon
        cuts = [0, math.floor(n * self.split[0] + 1e-9),
                math.floor(n * (self.split[0] + self.split[1]) + 1e-9), n]
        self.split_bounds = {s: (cuts[i], cuts[i + 1]) for i, s in enumerate(SPLITS)}
        for s, (lo, hi) in self.split_bounds.items():
            if hi - lo < window:
                raise TaskError(
                    f"the {s} split of data file {str(self.resolved_path)!r} has {hi - lo} rows "
                    f"(rows {lo}..{hi - 1} of {n}, split {self.split}) but one window needs "
                    f"context_length + horizon = {self.context_length} + {self.horizon} = {window} rows")

    # ------------------------------------------------------------------ queries
    def get_config(self):
        return {"path": self.path, "dataset": self.dataset_name, "target_columns": list(self.target_columns),
                "date_column": self.date_column, "column_names": self.column_names,
                "split": list(self.split), "context_length": self.context_length,
                "horizon": self.horizon, "eval_stride": self.eval_stride,
                "nan_policy": self.nan_policy}

    def extra_signature(self):
        import tensorflow as tf

        return {"window_start": tf.TensorSpec([None], tf.int64)}

    @property
    def x(self):
        """``[C + H]`` float32 inputs of every window: ``-1 + 2 j / (C + H - 1)``."""
        return np.linspace(-1.0, 1.0, self.context_length + self.horizon, dtype=np.float32)

    def window_starts(self, split):
        """``[n]`` int64 evaluation window starts of ``split``, increasing (every ``eval_stride``-th)."""
        lo, hi = self._bounds(split)
        return np.arange(lo, hi - self.context_length - self.horizon + 1, self.eval_stride, dtype=np.int64)

    def to_original_units(self, y):
        """Undo the standardisation: ``[..., Dy]`` -> ``[..., Dy]`` float64 in file units."""
        return np.asarray(y, np.float64) * self.std + self.mean

    def series(self, split=None):
        """Raw series of ``split`` (or all rows): dict ``index [n]`` series rows, ``file_rows [n]``
        (0-based data rows of the file), ``dates [n]`` datetime64 or None, ``y [n, Dy]`` float64."""
        return self._raw(*((0, len(self.values)) if split is None else self._bounds(split)))

    def window(self, start):
        """The true series of the window starting at series row ``start`` (a ``window_start``).

        Returns the :meth:`series` dict for its ``C + H`` rows plus ``x [C + H]``; the
        first ``context_length`` rows are the context, the rest the targets.
        """
        size = self.context_length + self.horizon
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) \
                or not 0 <= start <= len(self.values) - size:
            raise TaskError(f"window start {start} out of range [0, {len(self.values) - size}]")
        return {**self._raw(int(start), int(start) + size), "x": self.x}

    def _raw(self, lo, hi):
        return {"index": np.arange(lo, hi, dtype=np.int64), "file_rows": self.file_rows[lo:hi],
                "dates": None if self.dates is None else self.dates[lo:hi], "y": self.values[lo:hi]}

    def _bounds(self, split):
        if not (isinstance(split, str) and split in self.split_bounds):
            raise TaskError(f"split must be one of {list(SPLITS)}, got {split!r}")
        return self.split_bounds[split]

    # ------------------------------------------------------------------ data
    def dataset(self, split="train", batch_size=16, seed=0, num_batches=None, start=0):
        """Batches (module docstring); ``train`` infinite unless ``num_batches``, ``val``/``test``
        every window once (``num_batches`` caps the count). ``start``: index of the first
        training batch (resuming a run continues the same stream)."""
        import tensorflow as tf

        lo, hi = self._bounds(split)
        dataset_args(batch_size, num_batches, start, seed)
        c, h = self.context_length, self.horizon
        series = tf.constant(self.scaled)
        x = tf.constant(self.x)[None, :, None]
        offsets = tf.range(c + h, dtype=tf.int64)

        def make_batch(starts):
            b = tf.shape(starts)[0]
            y = tf.gather(series, starts[:, None] + offsets[None])  # [B, C + H, Dy]
            xs = tf.broadcast_to(x, [b, c + h, 1])
            return {"xc": xs[:, :c], "yc": y[:, :c], "xt": xs[:, c:], "yt": y[:, c:],
                    "mask_c": tf.ones([b, c]), "mask_t": tf.ones([b, h]), "window_start": starts}

        if split == "train":
            n_windows = hi - lo - c - h + 1
            seed = int(seed)

            def draw(i):  # batch i depends only on (seed, i)
                return lo + tf.random.stateless_uniform(
                    [batch_size], seed=tf.stack([tf.constant(seed, tf.int64), i]),
                    minval=0, maxval=n_windows, dtype=tf.int64)

            ds = tf.data.Dataset.counter(start=int(start)).map(draw)
        else:
            ds = tf.data.Dataset.from_tensor_slices(self.window_starts(split)).batch(batch_size)
        if num_batches is not None:
            ds = ds.take(int(num_batches))
        return ds.map(make_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _check_split(split):
    ratios = list(split) if isinstance(split, (list, tuple)) else None
    if not (ratios and len(ratios) == 3 and all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                and math.isfinite(r) and r > 0 for r in ratios)
            and abs(sum(ratios) - 1.0) <= 1e-6):
        raise TaskError(f"csv task: split must be three positive ratios (train, val, test) summing "
                        f"to 1, got {split!r}")
    return tuple(float(r) for r in ratios)


#: ETT (Zhou et al. 2021): ETTh1/ETTh2 hourly (17,420 rows), ETTm1/ETTm2 every 15 min;
#: target oil temperature OT.
ETT_PRESET = {"date_column": "date", "target_columns": ["OT"]}
#: Lai et al. (2018): exchange rates of 8 countries (daily, 7,588 rows) and electricity
#: use of 321 clients (hourly), no header, no dates. Columns are named as in the
#: Autoformer CSVs ("0", "1", ..., "OT"): the target OT is the last column (for exchange
#: rates Singapore, the series the Taylorformer paper calls "OT").
LAI_COLUMNS = {"exchange-rate": 8, "electricity": 321}


def lai_preset(name):
    """Preset options of the Lai et al. (2018) series ``name``."""
    n = LAI_COLUMNS[name]
    return {"dataset": name, "target_columns": ["OT"], "column_names": [str(i) for i in range(n - 1)] + ["OT"]}


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
