"""Tasks on the user's own data, without writing a plugin.

Each function returns a task object that trains and evaluates like a registered task
(``taylorformer.train(model="tnp-d", task=task)``, ``evaluate(model, task)``,
``task.plot(model, batch)``)::

    from taylorformer.tasks import from_arrays, from_dataframe, from_xarray
    task = from_dataframe(df, target_columns="load", calendar_features=["hour"])
    task = from_xarray("era5.nc", variable="t2m", region={"lat": [30, 60], "lon": [-10, 30]})
    task = from_arrays(x, y, groups=subject_ids)       # sets of points: random context/targets
    task = from_arrays(y=series, dates=dates, context_length=48, horizon=24)  # a series

A task holding in-memory data (a DataFrame, arrays, an xarray object) cannot be rebuilt
from a run directory: pass the same object again to evaluate or plot the run
(:mod:`taylorformer.workflow.runs`). A task from a file path (``from_xarray("file.nc")``) is
recorded by its registered name and config like any other.
"""
import warnings

import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError
from taylorformer.task import MAX_COUNT, Task, check_bool, check_choice, check_int, count_range, scaled_range
from taylorformer.tasks.csv_series import (RESOLUTION, SPLITS, CSVSeriesTask, check_not_boolean, check_split,
                                              column_stats, maps_back, parse_dates, split_cuts)
from taylorformer.tasks.gridded import GriddedTask


def from_dataframe(df, target_columns, **options):
    """The csv forecasting task (:class:`~taylorformer.tasks.csv_series.CSVSeriesTask`) on
    a ``pandas.DataFrame`` whose rows are time steps in order: ``target_columns`` and the
    csv task's options (``date_column``, or the frame's ``DatetimeIndex``,
    ``covariate_columns``, ``calendar_features``, ``context_length``, ``horizon``,
    ``split``, ``missing``, ...)."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise TaskError(f"from_dataframe needs a pandas DataFrame, got {type(df).__name__}")
    return CSVSeriesTask(path=df, target_columns=target_columns, **options)


def from_xarray(data, variable=None, **options):
    """The ``gridded`` task (:class:`~taylorformer.tasks.gridded.GriddedTask`) on an
    ``xarray.Dataset``/``DataArray``, a NumPy array ``[time, y, x]``, or the path of a
    netCDF file/zarr store, with its options (``region``, ``time_range``,
    ``window_length``, ``num_context``, ``num_target``, ``targets``, ``split``, ...)."""
    return GriddedTask(path=data, variable=variable, **options)


#: NaN in the outputs of :class:`ArraySetTask`: kept as missing values, points dropped, or an error
MISSING_POLICIES = ("mask", "drop", "error")
#: ``(num_context, num_target)`` ``(lo, hi)`` defaults of :class:`ArraySetTask` where the
#: largest set holds both upper counts (scaled down on smaller sets)
DEFAULT_SET_COUNTS = ((3, 32), (1, 32))


def _array(name, value, rows=None, missing=False, target=False):
    """``value`` as a float64 ``[N, D]`` array (``[N]`` -> ``[N, 1]``), finite or (``missing``)
    NaN where a value is missing; TaskError naming the array, its shape or the row and
    column of its first refused entry (NaN/inf, or inf with ``missing``), or booleans in a
    ``target`` (:func:`~taylorformer.tasks.csv_series.check_not_boolean`)."""
    if target:
        check_not_boolean(value if hasattr(value, "dtype") else np.asarray(value, object), f"from_arrays: {name}")
    try:
        kind = np.dtype((value if hasattr(value, "dtype") else np.asarray(value)).dtype).kind
    except (TypeError, ValueError):  # ragged lists, pandas extension dtypes: left to the conversion
        kind = "O"
    if kind in "mMcUSV":
        what = {"m": "durations (timedelta64)", "M": "dates (datetime64)", "c": "complex numbers"}.get(kind, "text")
        raise TaskError(f"from_arrays: {name} holds {what}, not real numbers; convert it explicitly "
                        f"(e.g. to hours, or its real part) first")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            arr = np.asarray(value, np.float64)
    except np.exceptions.ComplexWarning:
        raise TaskError(f"from_arrays: {name} holds complex numbers, not real numbers; convert it "
                        f"explicitly (e.g. its real part) first") from None
    except (TypeError, ValueError) as exc:
        raise TaskError(f"from_arrays: {name} must be numbers, got {type(value).__name__} ({exc})") from None
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise TaskError(f"from_arrays: {name} must be [N, D] (or [N]) with N, D >= 1, got shape {arr.shape}")
    if rows is not None and arr.shape[0] != rows:
        raise TaskError(f"from_arrays: {name} has {arr.shape[0]} rows but x has {rows}")
    bad = np.isinf(arr) if missing else ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        if missing:
            raise TaskError(f"from_arrays: {name} holds {int(bad.sum())} infinite value(s), the first at "
                            f"row {row}, column {col}: inf is not a value (NaN marks a missing one)")
        raise TaskError(f"from_arrays: {name} holds {int(bad.sum())} NaN/inf value(s), the first at "
                        f"row {row}, column {col}; drop or fill them first")
    return arr


def from_arrays(x=None, y=None, groups=None, dates=None, names=None, **options):
    """A task from NumPy arrays.

    * Sets of points (``x`` given): ``x [N, Dx]`` inputs and ``y [N, Dy]`` outputs (``[N]``
      is one dim), optionally ``groups [N]`` labels (one function per group: a subject,
      a station, a curve). See :class:`ArraySetTask` for the options (``num_context``,
      ``num_target``, ``split``, ``standardise``, ``split_seed``, ``missing``).
    * A series (``x`` None): ``y [T, Dy]`` (or ``[T]``) rows in time order, optionally
      ``dates [T]`` and column ``names``: the csv forecasting task on it (see
      :func:`from_dataframe` for the options; ``target_columns`` are all the columns; its
      ``missing`` handles NaN in ``y``).

    NaN in ``y`` is a missing value (``missing``); NaN or inf in ``x`` and inf in ``y``
    are errors naming the array, row and column.
    """
    import pandas as pd

    if y is None:
        raise TaskError("from_arrays needs y (outputs [N, Dy], or a series [T, Dy] without x)")
    if x is not None:
        if dates is not None or names is not None:
            raise TaskError("from_arrays: dates and names are for a series (x=None), not sets of points")
        return ArraySetTask(x, y, groups=groups, **options)
    if groups is not None:
        raise TaskError("from_arrays: groups are for sets of points (with x), not a series")
    values = _array("y", y, missing=options.get("missing") != "error", target=True)
    names = [f"y{j}" for j in range(values.shape[1])] if names is None else [str(n) for n in np.atleast_1d(names)]
    if len(names) != values.shape[1]:
        raise TaskError(f"from_arrays: names has {len(names)} entries for {values.shape[1]} columns of y")
    index = None
    if dates is not None:
        if np.ndim(dates) != 1 or len(dates) != len(values):
            raise TaskError(f"from_arrays: dates must be [T] = [{len(values)}] dates (one per row of y), "
                            f"got shape {np.shape(dates)}")
        parsed = parse_dates(np.asarray(dates), "from_arrays: dates")
        bad = np.flatnonzero(parsed.isna().to_numpy())
        if bad.size:
            raise TaskError(f"from_arrays: dates has {bad.size} missing or unparseable entries, the first "
                            f"{str(np.asarray(dates)[bad[0]])!r} at row {bad[0]}")
        index = pd.DatetimeIndex(parsed)
    return from_dataframe(pd.DataFrame(values, columns=names, index=index), target_columns=names, **options)


class ArraySetTask(Task):
    """Random context/target sets drawn from arrays of points (:func:`from_arrays`).

    Split: with ``groups``, whole groups go to train/val/test (shuffled with
    ``split_seed``, ratios of the groups: evaluation on unseen groups, the usual
    meta-learning protocol); without, the points are shuffled and cut by the ratios and
    the single "function" is the split's pool. A task picks a group of its split
    (uniformly), then ``Nc ~ U{num_context}`` context and ``Nt ~ U{num_target}`` target
    points without replacement among that group's points; a group with fewer than
    ``Nc + Nt`` points gives all of them (``Nt`` is cut first, never below its minimum).
    Left out, the counts are derived from the points per set by the images' rule
    (:func:`taylorformer.task.scaled_range`, :data:`DEFAULT_SET_COUNTS`): ``[3, 32]``
    context and ``[1, 32]`` target points where the largest set holds ``n >= 64`` points;
    on fewer each upper count scaled by ``n / 64`` (floor, at least 1 target) and each
    lower count capped at its upper; the context minimum is then lowered where the
    smallest set could not hold both minimums.
    ``standardise``: z-scores of x and y with the training points' mean and std (of the
    observed values of y: NaN left out; ``to_original_units`` undoes them for y). Batches
    are padded to the largest ``Nc``/``Nt``; val/test batches use fixed seeds (the same
    tasks in every run).

    ``missing`` for NaN in ``y`` (missing values; x must be finite): ``"mask"``
    (default) keeps such points with their NaN outputs in the batches: a point with a NaN
    in any output is never an observed context point nor a scored target
    (:func:`taylorformer.batch.with_masks`). ``"drop"`` removes them before the split
    (:attr:`rows`: the rows of the given arrays that were kept). ``"error"`` refuses them.
    A y column without an observed training value is an error.
    """

    name = "arrays"
    rebuildable = False  # the arrays live in memory

    def __init__(self, x, y, groups=None, num_context=None, num_target=None,
                 split=(0.8, 0.1, 0.1), standardise=True, split_seed=0, missing="mask"):
        owner = "arrays task"
        self.missing = check_choice(owner, "missing", missing, MISSING_POLICIES)
        self.x_raw = _array("x", x)
        self.y_raw = _array("y", y, rows=len(self.x_raw), missing=self.missing != "error", target=True)
        if groups is not None and np.shape(groups) != (len(self.x_raw),):
            raise TaskError(f"from_arrays: groups must be [N] = [{len(self.x_raw)}] labels, got shape "
                            f"{np.shape(groups)}")
        self.rows = np.flatnonzero(~np.isnan(self.y_raw).any(1)) if self.missing == "drop" \
            else np.arange(len(self.x_raw))
        if self.rows.size == 0:
            raise TaskError(f"from_arrays: every one of the {len(self.x_raw)} points has a NaN in y "
                            f"(missing='drop' leaves none)")
        self.x_raw, self.y_raw = self.x_raw[self.rows], self.y_raw[self.rows]
        self.dim_x, self.dim_y = self.x_raw.shape[1], self.y_raw.shape[1]
        given = (None if num_context is None else count_range("num_context", num_context, 0, owner=owner),
                 None if num_target is None else count_range("num_target", num_target, 1, owner=owner))
        self.split = check_split(split, owner)
        self.standardise = check_bool(owner, "standardise", standardise)
        self.split_seed = check_int(owner, "split_seed", split_seed, 0, MAX_COUNT)
        rng = np.random.default_rng(self.split_seed)
        if groups is None:
            order = rng.permutation(len(self.x_raw))
            self.groups = {s: [order[lo:hi]] for s, (lo, hi) in split_cuts(len(order), self.split).items()}
        else:
            labels = np.asarray(groups)[self.rows]
            names, inverse = np.unique(labels, return_inverse=True)
            members = [np.flatnonzero(inverse == g) for g in range(len(names))]
            order = rng.permutation(len(names))
            self.groups = {s: [members[g] for g in order[lo:hi]]
                           for s, (lo, hi) in split_cuts(len(names), self.split).items()}
        for s in SPLITS:
            if not self.groups[s]:
                raise TaskError(f"from_arrays: the {s} split has no {'group' if groups is not None else 'point'} "
                                f"(split {self.split} of {len(self.x_raw) if groups is None else len(names)})")
        self.num_target = self._default_target() if given[1] is None else given[1]
        self.num_context = self._default_context() if given[0] is None else given[0]
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]
        need = self.num_context[0] + self.num_target[0]
        for s in SPLITS:
            small = min(len(g) for g in self.groups[s])
            if small < need:
                raise TaskError(f"from_arrays: a {s} {'group' if groups is not None else 'split'} has "
                                f"{small} point(s) but num_context + num_target need at least {need}")
        train = np.concatenate(self.groups["train"])
        self.x_mean, self.x_std = self._stats(self.x_raw[train], "x")
        self.mean, self.std = self._stats(self.y_raw[train], "y")
        self.x = self._scaled(self.x_raw, self.x_mean, self.x_std, "x")
        self.y = self._scaled(self.y_raw, self.mean, self.std, "y")
        self._options = {"num_context": list(self.num_context), "num_target": list(self.num_target),
                         "split": list(self.split), "standardise": self.standardise,
                         "split_seed": self.split_seed, "missing": self.missing}
        self.check_memory()

    def _set_sizes(self):
        """``[n]`` points of every set of every split."""
        return [len(g) for s in SPLITS for g in self.groups[s]]

    def _default_target(self):
        """``(lo, hi)`` default ``num_target`` (class docstring): scaled on the largest set."""
        (_, c_hi), (t_lo, t_hi) = DEFAULT_SET_COUNTS
        return scaled_range(t_lo, t_hi, max(self._set_sizes()), c_hi + t_hi, least=1)

    def _default_context(self):
        """``(lo, hi)`` default ``num_context`` (class docstring): scaled on the largest set,
        its minimum lowered so that the smallest set holds it and ``num_target``'s."""
        (c_lo, c_hi), (_, t_hi) = DEFAULT_SET_COUNTS
        sizes = self._set_sizes()
        lo, hi = scaled_range(c_lo, c_hi, max(sizes), c_hi + t_hi)
        return max(0, min(lo, min(sizes) - self.num_target[0])), hi

    def _stats(self, values, name):
        """``(mean, std)`` per column of the training points' observed (non-NaN) values (0 and
        1 without ``standardise``); a column with none is a TaskError."""
        empty = np.flatnonzero(np.isnan(values).all(0))
        if empty.size:
            raise TaskError(f"from_arrays: column(s) {empty.tolist()} of {name} have no observed (non-NaN) "
                            f"value among the {len(values)} training points")
        if not self.standardise:
            return np.zeros(values.shape[1]), np.ones(values.shape[1])
        mean, std = column_stats(values)
        for j in np.flatnonzero(~maps_back(mean, std)):
            i = int(np.nanargmax(np.abs(values[:, j])))
            raise TaskError(f"from_arrays: standardising column {j} of {name} overflows float64 "
                            f"(training mean {mean[j]:g}, std {std[j]:g}: standardised values would not "
                            f"map back to finite numbers); its largest training value is "
                            f"{values[i, j]:g}: rescale it")
        flat = np.flatnonzero(std <= RESOLUTION * np.nanmax(np.abs(values), 0))
        if flat.size:
            raise TaskError(f"from_arrays: column(s) {flat.tolist()} of {name} are constant over the "
                            "training points (up to float64 rounding): cannot standardise (pass "
                            "standardise=False)")
        return mean, std

    def _scaled(self, values, mean, std, name):
        """float32 ``(values - mean) / std``; a value beyond the float32 range is a TaskError
        naming the array, row and column."""
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = (values - mean) / std
        big = np.argwhere(np.abs(scaled) > np.finfo(np.float32).max)  # NaN (missing) compares False
        if big.size:
            row, col = (int(i) for i in big[0])
            raise TaskError(f"from_arrays: {name} holds {len(big)} value(s) beyond the float32 range once "
                            f"standardised (mean {mean[col]:g}, std {std[col]:g}), the first "
                            f"{values[row, col]:g} at row {self.rows[row]}, column {col}: rescale it")
        return scaled.astype(np.float32)

    def get_config(self):
        """The options (JSON, without the arrays: not rebuildable from it)."""
        return dict(self._options)

    def to_original_units(self, y):
        return np.asarray(y, np.float64) * self.std + self.mean

    def data_description(self):
        """The x standardisation (:class:`taylorformer.normaliser.Normaliser`), the source
        and the split sizes (points)."""
        return {"x_offset": self.x_mean, "x_scale": self.x_std, "x_is": "raw inputs",
                "source": "arrays (in memory)",
                "split_sizes": {s: int(sum(len(g) for g in self.groups[s])) for s in SPLITS},
                "split_unit": "points"}

    def sample(self, rng, batch_size, split):
        out = empty_batch(batch_size, self.max_context, self.max_target, self.dim_x, self.dim_y)
        pools = self.groups[split]
        for b in range(batch_size):
            pool = pools[int(rng.integers(len(pools)))]
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            nt = int(rng.integers(self.num_target[0], self.num_target[1] + 1))
            nt = max(min(nt, len(pool) - nc), self.num_target[0])
            nc = min(nc, len(pool) - nt)
            drawn = pool[rng.permutation(len(pool))[:nc + nt]]
            for side, index in (("c", drawn[:nc]), ("t", drawn[nc:])):
                out["x" + side][b, :len(index)] = self.x[index]
                out["y" + side][b, :len(index)] = self.y[index]
                out["mask_" + side][b, :len(index)] = 1.0
        return out
