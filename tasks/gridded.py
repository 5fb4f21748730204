"""Gridded fields (netCDF, zarr, xarray, NumPy) as spatio-temporal tasks (plugin
``builtin-gridded``, kind ``task``).

``gridded`` (:class:`GriddedTask`)
    One variable of a dataset with a time dimension and two spatial dimensions: an
    ERA5-style ``(time, latitude, longitude)`` field (space on the sphere) or a field on
    a regular planar grid such as a Kolmogorov flow ``[time, y, x]``.

Protocol, for the selected ``T`` time steps (``time_range``) and ``Ny x Nx`` cells
(``region``), windows of ``W = window_length`` consecutive steps:

* Split: chronological by time step, ratios ``(a, b, c)`` as the csv task: training
  steps ``[0, floor(a T))``, validation up to ``floor((a + b) T)``, test the rest; a
  window lies inside one split.
* Standardisation: ``(y - mean) / std`` with the mean and population std (ddof 0) of
  every observed (non-NaN) training cell, computed in one streamed pass over the selection.
* A task: a window start drawn uniformly in the split (val/test: fixed seeds, the same
  tasks in every run), then ``Nc`` context and ``Nt`` target cells drawn without
  replacement among the ``W Ny Nx`` cells of the window (``targets="any"``), or the
  targets from the last step and the context from the earlier ones (``targets="last"``:
  forecasting the next field).
* Default counts (:data:`DEFAULT_COUNTS`, the images' rule,
  :func:`taylorformer.task.scaled_range`): ``num_context = [64, 256]`` and
  ``num_target = 256`` where the cells a task draws from hold them (``W Ny Nx >= 512``;
  ``targets="last"``: 256 cells in the earlier steps for the context, 256 in the last step
  for the targets); on fewer ``n`` cells each upper count is scaled by ``n / 512`` (by
  ``n / 256`` on its own pool with ``targets="last"``; floor, at least 1 target) and each
  lower count capped at its upper, so a window of any size holds them (a 1 x 9 x 11
  window: ``[49, 49]`` and ``[49, 49]``). With ``missing="drop"`` ``n`` is the median
  number of observed cells of the training windows (per pool with ``targets="last"``).
  Given counts that a window cannot hold are an error naming them and the file.
* Missing values (NaN cells: land in a sea-surface field, clouds in a satellite product),
  ``missing``: ``"mask"`` (default) keeps them as NaN outputs in the batches: such a
  cell is never an observed context point nor a scored target
  (:func:`taylorformer.batch.with_masks`). ``"drop"`` draws the context and target cells
  only among the observed cells of the window (a window with fewer than
  ``num_context[0] + num_target[0]`` of them, per side with ``targets="last"``, is never
  drawn; ``Nt`` then ``Nc`` are cut to what a window holds, ``Nt`` never below its
  minimum). ``"error"`` refuses a selection with a NaN cell, naming the count and the
  first one. An infinite cell, and a NaN/NaT coordinate or time, are errors whatever the
  policy.
* Inputs ``x = [space, t]``: space is ``(lat, lon)`` in degrees (``space="latlon"``:
  what the BSA-TNP geodesic bias reads, ``coords="latlon"``) or unit vectors
  (``space="xyz"``), or the planar grid's ``(y, x)`` coordinate values; longitudes are
  given in the convention of ``region`` (so a region across the date line is
  continuous), else as stored. ``t = -1 + 2 j / (W - 1)`` for step ``j`` of the window
  (0 when ``W = 1``). Dimensions without coordinate values (and NumPy arrays) get
  ``-1 + 2 i / (n - 1)`` along their axis.

Batch: ``xc [B, Nc, Ds + 1]``, ``yc [B, Nc, 1]``, ``xt``, ``yt``, ``mask_c``/``mask_t``
(padded to the largest ``Nc``/``Nt``), the groups ``sc``/``st`` (space ``[B, N, Ds]``) and
``tc``/``tt`` (``t``, ``[B, N, 1]``), and ``window_start [B]`` int64: the first selected
time step of each task's window (an index into :attr:`GriddedTask.times`).

Reading is lazy: only the coordinates are read at construction, then the selection is
streamed once (statistics, observed cells per time step and the NaN/inf check) in blocks
of time steps, and each task reads its window of the selected region.
"""
import os
from pathlib import Path

import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.coordinates import LAT_NAMES, LON_NAMES
from taylorformer.errors import TaskError, close_matches
from taylorformer.hookspecs import hookimpl
from taylorformer.task import MAX_COUNT, Task, check_choice, check_int, count_range, real_pair, scaled_range
from taylorformer.tasks.csv_series import (RESOLUTION, DataFileNotFoundError, check_not_boolean, check_split, maps_back,
                                              split_cuts)
from taylorformer.tasks.sphere import latlon_to_xyz, xyz_to_latlon

OWNER = "gridded task"
SPACES = ("latlon", "xyz")
TARGETS = ("any", "last")
MISSING_POLICIES = ("mask", "drop", "error")
#: float64 values read per block of the streamed statistics pass
BLOCK_VALUES = 2**22
#: ``(num_context, num_target)`` ``(lo, hi)`` defaults where the cells drawn from hold them
#: (module docstring; scaled down on a smaller window)
DEFAULT_COUNTS = ((64, 256), (256, 256))


def _describe(source):
    return f"data file {str(source)!r}" if isinstance(source, (str, os.PathLike)) else "the given data"


def open_data(path, engine=None):
    """The xarray object of ``path``: a netCDF file (``engine``: xarray's choice among
    the installed ones: h5netcdf reads netCDF4/HDF5, scipy netCDF3), a zarr store (a
    ``.zarr`` folder; needs the ``zarr`` package), an ``xarray.Dataset``/``DataArray``, or
    a NumPy array ``[time, y, x]`` (dims named so, coordinates left out). Lazy: no
    variable is read."""
    import xarray as xr

    if isinstance(path, (xr.Dataset, xr.DataArray)):
        return path
    if isinstance(path, np.ndarray):
        if path.ndim != 3:
            raise TaskError(f"{OWNER}: a NumPy array must be [time, y, x], got shape {path.shape}")
        return xr.DataArray(path, dims=("time", "y", "x"), name="field")
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TaskError(f"{OWNER} 'path' must be a netCDF file, a zarr store, an xarray Dataset/"
                        f"DataArray or a NumPy array [time, y, x], got {type(path).__name__}")
    found = Path(path).expanduser().resolve()
    if not found.exists():
        raise DataFileNotFoundError(f"data file {str(path)!r} not found (looked for {found}); pass "
                                    "path= an existing netCDF file or zarr store")
    if found.is_dir() or found.suffix == ".zarr":
        try:
            return xr.open_zarr(found)
        except ImportError as exc:
            raise TaskError(f"{_describe(path)} is a zarr store: install zarr (pip install zarr) "
                            f"to read it ({exc})") from exc
        except (ValueError, OSError, KeyError) as exc:
            raise TaskError(f"cannot read {_describe(path)} as a zarr store: {exc}") from exc
    try:
        return xr.open_dataset(found, engine=engine)
    except (ValueError, OSError) as exc:
        raise TaskError(f"cannot read {_describe(path)} as netCDF (engine {engine or 'auto'}): {exc}. "
                        "netCDF4/HDF5 files need h5netcdf, netCDF3 files scipy") from exc


def _axis(values, n):
    """Coordinate values of a dimension (float64 or datetime64), or ``-1 + 2 i / (n - 1)``."""
    if values is None:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    values = np.asarray(values)
    return values if np.issubdtype(values.dtype, np.datetime64) else values.astype(np.float64)


class GriddedTask(Task):
    """A gridded field as a spatio-temporal task; see the module docstring.

    Args:
        path: netCDF file, zarr store, ``xarray.Dataset``/``DataArray`` or NumPy array
            ``[time, y, x]`` (objects: ``rebuildable`` is False, see
            :func:`taylorformer.tasks.from_xarray`).
        variable: the data variable (optional where the dataset has one).
        region: ``{dim: [lo, hi]}`` per spatial dim (inclusive; ``"lat"``/``"lon"`` name
            the latitude/longitude dims); longitudes in 0..360 or -180..180 either way,
            ``lo > hi`` wraps across the date line/0 meridian.
        time_range: ``[first, last]`` (inclusive; dates as text, or coordinate values).
        select: ``{dim: value}`` for other dims (e.g. ``{"level": 500}``), by label.
        window_length: time steps per task ``W``.
        num_context, num_target: cells per task (int or ``[lo, hi]``; None: derived from
            what a window holds, see "Default counts" in the module docstring).
        targets: ``"any"`` or ``"last"`` (see the module docstring).
        split: chronological train/val/test ratios of the time steps.
        space: ``"latlon"`` or ``"xyz"`` on the sphere (ignored on a planar grid).
        engine: xarray engine for a netCDF file (None: xarray's choice).
        time_dim: name of the time dimension (default: ``time``, else the datetime one).
        missing: NaN cells: ``"mask"``, ``"drop"`` or ``"error"`` (module docstring).
    """

    name = "gridded"
    dim_y = 1

    def __init__(self, path=None, variable=None, region=None, time_range=None, select=None,
                 window_length=1, num_context=None, num_target=None, targets="any",
                 split=(0.7, 0.1, 0.2), space="latlon", engine=None, time_dim=None, missing="mask"):
        if path is None:
            raise TaskError(f"{OWNER} needs path= (a netCDF file or zarr store, or an xarray/NumPy object)")
        self.path = str(path) if isinstance(path, (str, os.PathLike)) else None
        self.rebuildable = self.path is not None
        self.where = _describe(path)
        self.window_length = check_int(OWNER, "window_length", window_length, 1, MAX_COUNT)
        given = (None if num_context is None else count_range("num_context", num_context, 0, owner=OWNER),
                 None if num_target is None else count_range("num_target", num_target, 1, owner=OWNER))
        self.targets = check_choice(OWNER, "targets", targets, TARGETS)
        self.space = check_choice(OWNER, "space", space, SPACES)
        self.missing = check_choice(OWNER, "missing", missing, MISSING_POLICIES)
        self.split = check_split(split, OWNER)
        if engine is not None and not isinstance(engine, str):
            raise TaskError(f"{OWNER} 'engine' must be None or an xarray engine name, got {engine!r}")
        self.engine = engine
        if time_dim is not None and not (isinstance(time_dim, str) and time_dim):
            raise TaskError(f"{OWNER} 'time_dim' must be None or a dim name, got {time_dim!r}")
        for key, value in (("region", region), ("select", select)):
            if value is not None and not isinstance(value, dict):
                raise TaskError(f"{OWNER} {key!r} must be a dict {{dim: ...}} or None, got {value!r}")
        self.region, self.select = dict(region or {}), dict(select or {})
        if targets == "last" and window_length < 2:
            raise TaskError(f"{OWNER}: targets='last' takes the context from the earlier steps of "
                            f"the window and needs window_length >= 2, got {window_length}")
        field = self._variable(open_data(path, engine), variable)
        field = self._dims(field, time_dim)
        self.variable = field.name
        if time_range is not None and not (isinstance(time_range, (list, tuple)) and len(time_range) == 2):
            raise TaskError(f"{OWNER} 'time_range' must be [first, last] or None, got {time_range!r}")
        self.time_range = None if time_range is None else list(time_range)
        self.data = self._select(field)  # lazy [T, Ny, Nx]
        self.split_bounds = split_cuts(len(self.times), self.split)
        for s, (lo, hi) in self.split_bounds.items():
            if hi - lo < self.window_length:
                raise TaskError(f"the {s} split of {self.where} (variable {self.variable!r}) has "
                                f"{hi - lo} time steps (steps {lo}..{hi - 1} of {len(self.times)}, "
                                f"split {self.split}) but a window needs window_length = {self.window_length}")
        self.mean, self.std, observed = self._scan()
        defaults = self._default_counts(observed)
        self.num_context, self.num_target = (d if g is None else g for g, d in zip(given, defaults))
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]
        self._check_counts()
        self.starts = self._window_starts(observed)
        self.dim_x = self.space_inputs.shape[-1] + 1
        self.check_memory()

    # ------------------------------------------------------------------ opening
    def _variable(self, data, variable):
        import xarray as xr

        if isinstance(data, xr.DataArray):
            if variable is not None and variable != data.name:
                raise TaskError(f"{OWNER}: the given DataArray is {data.name!r}, not variable {variable!r}")
            return self._numeric(data if data.name is not None else data.rename("field"))
        names = [str(v) for v in data.data_vars]
        if variable is None:
            if len(names) != 1:
                raise TaskError(f"{self.where} has {len(names)} variables {names}: pass variable= one of them")
            variable = names[0]
        if not isinstance(variable, str) or variable not in names:
            close = close_matches(variable, names)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise TaskError(f"{self.where} has no variable {variable!r}{hint} Variables: {names}")
        return self._numeric(data[variable])

    def _numeric(self, field):
        """``field`` if its values are real numbers; text, dates, durations, complex or
        boolean values are a TaskError naming the variable and the source."""
        check_not_boolean(field, f"variable {field.name!r} of {self.where}")
        kind = field.dtype.kind
        if kind not in "fiu":
            what = {"U": "text", "S": "text", "O": "Python objects (e.g. text)", "M": "dates",
                    "m": "durations", "c": "complex numbers"}.get(kind, f"dtype {field.dtype}")
            raise TaskError(f"variable {field.name!r} of {self.where} holds {what} (dtype {field.dtype}), "
                            f"not real numbers: the gridded task models a numeric field")
        return field

    def _dims(self, field, time_dim):
        """``field`` with the ``select`` dims fixed and ``(time, space0, space1)`` dims
        found: sets ``time_dim``, ``space_dims`` and ``geographic``."""
        for dim, value in self.select.items():
            if dim not in field.dims:
                raise TaskError(f"{OWNER} 'select' names dim {dim!r} but variable {field.name!r} of "
                                f"{self.where} has dims {list(field.dims)}")
            try:
                field = field.sel({dim: value})
            except KeyError as exc:
                raise TaskError(f"{OWNER} 'select': {dim!r} has no value {value!r} in {self.where} "
                                f"({exc})") from None
        dims = [str(d) for d in field.dims]
        need = ("the gridded task needs a time dim and two spatial dims (e.g. time, latitude, "
                "longitude); select= one value of any other dim")
        if time_dim is None:
            dated = [d for d in dims if d in field.coords and np.issubdtype(field[d].dtype, np.datetime64)]
            time_dim = "time" if "time" in dims else (dated[0] if dated else None)
        if time_dim not in dims:
            raise TaskError(f"variable {field.name!r} of {self.where} has dims {dims}: no time dim "
                            f"{'(time_dim=' + repr(time_dim) + ') ' if time_dim else ''}; {need}")
        lat = next((d for d in dims if d in LAT_NAMES), None)
        lon = next((d for d in dims if d in LON_NAMES), None)
        space = [lat, lon] if lat and lon else [d for d in dims if d != time_dim]
        if len(dims) != 3 or len(space) != 2:
            raise TaskError(f"variable {field.name!r} of {self.where} has dims {dims}; {need}")
        self.time_dim, self.space_dims, self.geographic = time_dim, space, bool(lat and lon)
        return field.transpose(time_dim, *space)

    # ------------------------------------------------------------------ selection
    def _coords(self, field, dim):
        """``[n]`` values of ``dim`` (:func:`_axis`); a NaN/NaT/inf one is a TaskError."""
        values = _axis(field[dim].values if dim in field.coords else None, field.sizes[dim])
        bad = np.isnat(values) if np.issubdtype(values.dtype, np.datetime64) else ~np.isfinite(values)
        if bad.any():
            raise TaskError(f"coordinate {dim!r} of {self.where} has {int(bad.sum())} NaN/NaT/inf value(s), "
                            f"the first at index {int(np.argmax(bad))}: a value without a place or time "
                            f"cannot be used")
        return values

    def _region_index(self, field, dim, values):
        """Indices along spatial ``dim`` inside ``region`` and the coordinates there."""
        aliases = {dim} | (set(LAT_NAMES) if dim in LAT_NAMES else set()) | (set(LON_NAMES) if dim in LON_NAMES else set())
        keys = [k for k in self.region if k in aliases]
        if not keys:
            return np.arange(len(values)), values
        lo, hi = real_pair(f"region[{keys[0]!r}]", self.region[keys[0]], -1e6, 1e6, OWNER,
                           ordered=not (self.geographic and dim in LON_NAMES))
        if self.geographic and dim in LON_NAMES:  # compare on the circle
            shifted = lo + np.mod(values - lo, 360.0)
            span = 360.0 if hi - lo >= 360.0 else np.mod(hi - lo, 360.0)
            index = np.flatnonzero(shifted - lo <= span + 1e-9)
            return index, shifted[index]
        index = np.flatnonzero((values >= lo) & (values <= hi))
        return index, values[index]

    def _time_index(self, times):
        if self.time_range is None:
            return np.arange(len(times))
        try:
            if np.issubdtype(times.dtype, np.datetime64):
                lo, hi = (np.datetime64(str(t)) for t in self.time_range)
            else:
                lo, hi = (float(t) for t in self.time_range)
        except (TypeError, ValueError) as exc:
            raise TaskError(f"{OWNER} 'time_range' {self.time_range!r} cannot be compared with the "
                            f"time coordinate of {self.where} ({times.dtype}): {exc}") from None
        return np.flatnonzero((times >= lo) & (times <= hi))

    def _select(self, field):
        """Lazy ``[T, Ny, Nx]`` selection; sets ``times``, ``space_inputs`` and the grid."""
        times = self._coords(field, self.time_dim)
        if len(times) > 1 and not np.all(times[1:] > times[:-1]):
            raise TaskError(f"the time coordinate {self.time_dim!r} of {self.where} is not increasing")
        unknown = [k for k in self.region if k not in self.space_dims
                   and not (self.geographic and k in ("lat", "lon", "latitude", "longitude"))]
        if unknown:
            raise TaskError(f"{OWNER} 'region' names {unknown}; the spatial dims of variable "
                            f"{field.name!r} are {self.space_dims}")
        t_index = self._time_index(times)
        (y_index, ys), (x_index, xs) = (self._region_index(field, d, self._coords(field, d))
                                        for d in self.space_dims)
        for label, index in (("time_range", t_index), ("region", y_index), ("region", x_index)):
            if index.size == 0:
                raise TaskError(f"{OWNER}: the {label} {self.time_range if label == 'time_range' else self.region!r} "
                                f"selects nothing of variable {field.name!r} in {self.where} "
                                f"(time {times[0]}..{times[-1]}; "
                                + ", ".join(f"{d} {self._coords(field, d).min():g}..{self._coords(field, d).max():g}"
                                            for d in self.space_dims) + ")")
        self.times = times[t_index]
        self.grid = (ys, xs)
        yy, xx = np.meshgrid(ys, xs, indexing="ij")
        space = np.stack([yy, xx], -1)  # [Ny, Nx, 2]
        if self.geographic and self.space == "xyz":
            space = latlon_to_xyz(space)
        self.space_inputs = space.astype(np.float32)
        steps = slice(int(t_index[0]), int(t_index[-1]) + 1)  # increasing times: contiguous
        return field.isel({self.time_dim: steps, self.space_dims[0]: y_index, self.space_dims[1]: x_index})

    def _default_counts(self, observed):
        """``(num_context, num_target)`` ``(lo, hi)`` defaults: :data:`DEFAULT_COUNTS` scaled
        (:func:`~taylorformer.task.scaled_range`) on the cells a task draws from, a window's
        ``W Ny Nx`` (``targets="last"``: its earlier steps' for the context, its last step's
        for the targets), or with ``missing="drop"`` the median over the training windows of
        their observed cells (``observed [T]`` per step)."""
        ny, nx = self.space_inputs.shape[:2]
        w, cells = self.window_length, ny * nx
        earlier, last = (w - 1) * cells, cells
        if self.missing == "drop":
            lo, hi = self.split_bounds["train"]
            starts, csum = np.arange(lo, hi - w + 1), np.concatenate([[0], np.cumsum(observed)])
            earlier = int(np.median(csum[starts + w - 1] - csum[starts]))
            last = int(np.median(observed[starts + w - 1]))
        (c_lo, c_hi), (t_lo, t_hi) = DEFAULT_COUNTS
        if self.targets == "last":
            pools, references = (earlier, last), (c_hi, t_hi)
        else:
            pools, references = (earlier + last,) * 2, (c_hi + t_hi,) * 2
        return (scaled_range(c_lo, c_hi, pools[0], references[0]),
                scaled_range(t_lo, t_hi, pools[1], references[1], least=1))

    def _check_counts(self):
        ny, nx = self.space_inputs.shape[:2]
        w, cells = self.window_length, ny * nx
        if self.targets == "last":
            pools = {"num_context": (w - 1) * cells, "num_target": cells}
            for key, pool in pools.items():
                high = getattr(self, key)[1]
                if high > pool:
                    raise TaskError(f"{OWNER} {key!r} allows {high} cells but targets='last' leaves "
                                    f"{pool} ({'earlier steps' if key == 'num_context' else 'last step'} "
                                    f"of a window of {w} steps on {ny} x {nx} cells of {self.where})")
        elif self.max_context + self.max_target > w * cells:
            raise TaskError(f"{OWNER}: num_context + num_target allow {self.max_context} + "
                            f"{self.max_target} cells but a window has {w} x {ny} x {nx} = {w * cells} "
                            f"in {self.where}; lower them, or leave them out to derive them from the window")

    def _cell(self, index):
        """Text naming selected cell ``index = (step, row, column)`` by its coordinates."""
        t, i, j = index
        return (f"{self.time_dim}={self.times[t]}, {self.space_dims[0]}={self.grid[0][i]:g}, "
                f"{self.space_dims[1]}={self.grid[1][j]:g}")

    def _scan(self):
        """One streamed pass over the selection: ``(mean, std, observed)``, the training
        statistics over the observed cells (Chan et al.'s pairwise combination of block
        statistics) and ``observed [T]``, the non-NaN cells of every time step. NaN cells are
        a TaskError with ``missing="error"``, infinite cells always."""
        n_steps, cells = self.data.shape[0], int(np.prod(self.data.shape[1:]))
        step = max(1, BLOCK_VALUES // max(cells, 1))
        lo, hi = self.split_bounds["train"]
        count, mean, m2 = 0, 0.0, 0.0
        low, high = np.inf, -np.inf  # over every split: the standardised range must fit float32
        observed = np.zeros(n_steps, np.int64)
        bad = {"non-finite": [0, None], "infinite": [0, None]}  # kind -> [count, first cell]
        for a in range(0, n_steps, step):
            block = np.asarray(self.data[a:a + step].values, np.float64)
            finite = np.isfinite(block)
            observed[a:a + len(block)] = finite.reshape(len(block), -1).sum(1)
            for kind, flags in (("non-finite", ~finite), ("infinite", np.isinf(block))):
                if flags.any():
                    if bad[kind][1] is None:
                        first = np.argwhere(flags)[0]
                        bad[kind][1] = (a + int(first[0]), int(first[1]), int(first[2]))
                    bad[kind][0] += int(flags.sum())
            if finite.any():
                low, high = min(low, block[finite].min()), max(high, block[finite].max())
            train = block[max(lo - a, 0):max(min(hi - a, len(block)), 0)]
            train = train[np.isfinite(train)]
            if train.size:
                with np.errstate(over="ignore", invalid="ignore"):  # checked below
                    n_b, mean_b = train.size, train.mean()
                    m2_b = ((train - mean_b) ** 2).sum()
                    delta, total = mean_b - mean, count + n_b
                    mean += delta * n_b / total
                    m2 += m2_b + delta ** 2 * count * n_b / total
                count = total
        if self.missing == "error" and bad["non-finite"][0]:
            raise TaskError(
                f"variable {self.variable!r} of {self.where} has {bad['non-finite'][0]} NaN/inf cell(s) in the "
                f"selection, the first at {self._cell(bad['non-finite'][1])} (missing='error'): choose a "
                f"region/time_range without them, or pass missing='mask' or 'drop' for missing values")
        if bad["infinite"][0]:
            raise TaskError(f"variable {self.variable!r} of {self.where} has {bad['infinite'][0]} infinite "
                            f"cell(s) in the selection, the first at {self._cell(bad['infinite'][1])}: inf is "
                            f"not a value (a NaN cell is a missing value, missing={self.missing!r})")
        if count == 0:
            raise TaskError(f"variable {self.variable!r} of {self.where} has no observed (non-NaN) cell in "
                            f"the {hi - lo} training steps (steps {lo}..{hi - 1} of the selection): "
                            f"cannot standardise; choose another region/time_range or split")
        std = float(np.sqrt(m2 / count))
        if not (np.isfinite(mean) and np.isfinite(std) and maps_back(mean, std)):
            raise TaskError(f"variable {self.variable!r} of {self.where}: standardising it overflows float64 "
                            f"(training mean {mean:g}, std {std:g}; values from {low:g} to {high:g}): "
                            f"rescale the variable")
        if not std > RESOLUTION * max(abs(low), abs(high)):
            raise TaskError(f"variable {self.variable!r} of {self.where} is constant over the training "
                            f"steps (up to float64 rounding): cannot standardise")
        widest = max(abs(low - mean), abs(high - mean)) / std
        if not widest <= np.finfo(np.float32).max:
            raise TaskError(f"variable {self.variable!r} of {self.where} has values (from {low:g} to {high:g}) "
                            f"beyond the float32 range once standardised with the training mean {mean:g} "
                            f"and std {std:g}: rescale the variable")
        return float(mean), std, observed

    def _window_starts(self, observed):
        """``{split: [n] int64}`` first steps of the windows a task may use: every window
        inside the split; with ``missing="drop"`` only those whose observed cells
        (``observed [T]`` per step) allow the smallest counts."""
        w, csum = self.window_length, np.concatenate([[0], np.cumsum(observed)])
        starts = {}
        for s, (lo, hi) in self.split_bounds.items():
            index = np.arange(lo, hi - w + 1)
            if self.missing == "drop":
                if self.targets == "last":
                    ok = ((csum[index + w - 1] - csum[index] >= self.num_context[0])
                          & (observed[index + w - 1] >= self.num_target[0]))
                    need = (f"num_context[0] = {self.num_context[0]} observed cells in its first {w - 1} "
                            f"step(s) and num_target[0] = {self.num_target[0]} in its last")
                else:
                    ok = csum[index + w] - csum[index] >= self.num_context[0] + self.num_target[0]
                    need = f"num_context[0] + num_target[0] = {self.num_context[0] + self.num_target[0]} observed cells"
                if not ok.any():
                    raise TaskError(f"no window of the {s} split of {self.where} (variable {self.variable!r}, "
                                    f"steps {lo}..{hi - 1}, window_length {w}) has {need} "
                                    f"(missing='drop'); lower the minimum counts or use missing='mask'")
                index = index[ok]
            starts[s] = index
        return starts

    # ------------------------------------------------------------------ queries
    def get_config(self):
        """The options (JSON); ``path`` is None for a task on an in-memory object."""
        return {"path": self.path, "variable": self.variable, "region": self.region or None,
                "time_range": None if self.time_range is None else [str(t) for t in self.time_range],
                "select": self.select or None, "window_length": self.window_length,
                "num_context": list(self.num_context), "num_target": list(self.num_target),
                "targets": self.targets, "split": list(self.split), "space": self.space,
                "engine": self.engine, "time_dim": self.time_dim, "missing": self.missing}

    def to_original_units(self, y):
        """Undo the standardisation: float64 in the variable's units."""
        return np.asarray(y, np.float64) * self.std + self.mean

    def data_description(self):
        """What the model's numbers mean (:class:`taylorformer.normaliser.Normaliser`):
        ``x`` = [space as stored (degrees) or unit vectors, window position] (no affine
        map), the variable's and coordinates' names and netCDF ``units``, the time axis,
        source and split sizes (time steps)."""
        from taylorformer.normaliser import series_time

        def units(obj):
            unit = getattr(obj, "attrs", {}).get("units")
            return str(unit) if unit is not None else None

        space = list(self.space_dims)
        space_units = [units(self.data[d]) if d in self.data.coords else None for d in space]
        if self.geographic and self.space == "xyz":
            space, space_units = ["x_unit", "y_unit", "z_unit"], [None] * 3
        times = self.times if np.issubdtype(np.asarray(self.times).dtype, np.datetime64) else None
        return {"x_names": space + ["window_position"], "x_units": space_units + [None],
                "x_is": (f"{'unit vectors on the sphere' if self.space == 'xyz' and self.geographic else 'coordinates as stored'}"
                         f" ({', '.join(self.space_dims)}), then the position of the time step in "
                         f"a window of {self.window_length} (-1 .. +1)"),
                "y_names": [str(self.variable)], "y_units": [units(self.data)],
                "time": series_time(times, column=self.time_dim, window_length=self.window_length),
                "coordinates": {"space": list(self.space_dims), "time": self.time_dim, "space_inputs": self.space,
                                "geographic": self.geographic, "span": [float(np.ptp(g)) for g in self.grid],
                                "extent": [[float(np.min(g)), float(np.max(g))] for g in self.grid],
                                "time_input": float(self.time_inputs()[-1])},
                "source": self.path or self.where,
                "split_sizes": {s: hi - lo for s, (lo, hi) in self.split_bounds.items()},
                "split_unit": "time steps"}

    def time_inputs(self):
        """``[W]`` float32 time inputs of a window's steps: ``-1 + 2 j / (W - 1)`` (0 for W = 1)."""
        w = self.window_length
        return (np.linspace(-1.0, 1.0, w) if w > 1 else np.zeros(1)).astype(np.float32)

    def read_window(self, start):
        """``[W, Ny, Nx]`` float64 raw values of the window starting at selected step ``start``."""
        return np.asarray(self.data[start:start + self.window_length].values, np.float64)

    def extra_signature(self):
        import tensorflow as tf

        ds = self.dim_x - 1
        return {"sc": tf.TensorSpec([None, None, ds], tf.float32), "st": tf.TensorSpec([None, None, ds], tf.float32),
                "tc": tf.TensorSpec([None, None, 1], tf.float32), "tt": tf.TensorSpec([None, None, 1], tf.float32),
                "window_start": tf.TensorSpec([None], tf.int64)}

    def memory_estimate(self, batch_size):
        """The padded batch (with its groups) plus one window read as float64."""
        n = self.max_context + self.max_target
        ny, nx = self.space_inputs.shape[:2]
        nbytes = 4 * batch_size * n * (2 * self.dim_x + 2) + 8 * self.window_length * ny * nx
        return nbytes, (f"padded batch and groups 4 B (Nc + Nt)(2 Dx + 2) + one window 8 W Ny Nx bytes "
                        f"with B = {batch_size}, Nc + Nt = {n}, W = {self.window_length}, {ny} x {nx} cells")

    # ------------------------------------------------------------------ plots
    def can_plot(self):
        return True

    def plot(self, model, batch, num_tasks=4, num_samples=0, title=None, axes=None):
        """Maps of the first ``num_tasks`` tasks of ``batch`` in the variable's units: the
        true values, the predictive mean and std at the target cells of one time step (the
        one with the most targets), context cells of that step marked; one row of three
        axes per task (``axes``: ``num_tasks x 3``); longitude across, axes and colour bars
        labelled with names and units (where the file gives them). Missing (NaN) target cells are gaps in
        the truth map (the predictive maps fill them); missing context cells are not marked.
        ``num_samples`` is unused (maps show the marginal predictive)."""
        from matplotlib.figure import Figure

        from taylorformer.models.inference import predict

        check_int("plot", "num_tasks", num_tasks)
        check_int("plot", "num_samples", num_samples, minimum=0)
        batch = {k: np.asarray(v) for k, v in batch.items()}
        n = min(num_tasks, len(batch["xt"]))
        out = predict(model, batch)
        mean, std = self.to_original_units(out["mean"])[..., 0], np.asarray(out["stddev"])[..., 0] * self.std
        if axes is None:
            fig = Figure(figsize=(12, 3.4 * n), layout="tight")
            axes = fig.subplots(n, 3, squeeze=False)
        axes = np.asarray(axes, dtype=object).reshape(-1, 3)
        if len(axes) < n:
            raise TaskError(f"plot: {n} task(s) need {3 * n} axes, got {axes.size}")
        names = [self._label(d, n) for d, n in zip(self.space_dims, ["latitude", "longitude"] if self.geographic
                                                    else self.space_dims)]
        value_label = self._label(None, self.variable)
        for i in range(n):
            real_t, real_c = batch["mask_t"][i] > 0, batch["mask_c"][i] > 0
            t_steps, c_steps = batch["xt"][i, :, -1], batch["xc"][i, :, -1]
            values, counts = np.unique(t_steps[real_t], return_counts=True)
            step = values[np.argmax(counts)]
            pick = real_t & (t_steps == step)
            ctx = real_c & (c_steps == step) & ~np.isnan(batch["yc"][i, :, 0])
            seen = ~np.isnan(batch["yt"][i, pick, 0])  # the observed targets of the step

            def where(x):  # [N, 2] (row coordinate, column coordinate) of space inputs
                return xyz_to_latlon(x[:, :3].astype(np.float64)) if self.dim_x == 4 else x[:, :2]

            target, context = where(batch["xt"][i, pick]), where(batch["xc"][i, ctx])
            truth = self.to_original_units(batch["yt"][i, pick, 0][seen])
            j = int(round((step + 1) * (self.window_length - 1) / 2)) if self.window_length > 1 else 0
            when = self.times[int(batch["window_start"][i]) + j] if "window_start" in batch else f"step {j}"
            if np.issubdtype(np.asarray(when).dtype, np.datetime64):
                when = np.datetime_as_string(when, unit="m")
            both = np.concatenate([truth, mean[i, pick]])  # truth and mean share one colour scale
            for ax, cells, data, label, scale in (
                    (axes[i, 0], target[seen], truth, "truth", (both.min(), both.max())),
                    (axes[i, 1], target, mean[i, pick], "predictive mean", (both.min(), both.max())),
                    (axes[i, 2], target, std[i, pick], "predictive std", (None, None))):
                image = ax.scatter(cells[:, 1], cells[:, 0], c=data, s=18, cmap="viridis", marker="s",
                                   vmin=scale[0], vmax=scale[1])
                ax.scatter(context[:, 1], context[:, 0], s=10, facecolors="none", edgecolors="red",
                           linewidths=0.6, label="context")
                ax.set_title(f"{label}, {self.variable} at {when}", fontsize=8)
                ax.set_xlabel(names[1])
                ax.set_ylabel(names[0])
                ax.figure.colorbar(image, ax=ax, label=value_label)
        fig = axes[0, 0].figure
        if title:
            fig.suptitle(title)
        return fig

    def _label(self, dim, name):
        """``name [units]`` of a coordinate ``dim`` (None: the variable), units where given."""
        attrs = self.data.attrs if dim is None else (self.data[dim].attrs if dim in self.data.coords else {})
        return f"{name} [{attrs['units']}]" if attrs.get("units") else str(name)

    # ------------------------------------------------------------------ data
    def sample(self, rng, batch_size, split):
        ny, nx = self.space_inputs.shape[:2]
        cells, w, ds = ny * nx, self.window_length, self.dim_x - 1
        out = empty_batch(batch_size, self.max_context, self.max_target, self.dim_x, 1)
        for key, n, width in (("sc", self.max_context, ds), ("st", self.max_target, ds),
                              ("tc", self.max_context, 1), ("tt", self.max_target, 1)):
            out[key] = np.zeros((batch_size, n, width), np.float32)
        out["window_start"] = np.zeros(batch_size, np.int64)
        space, times = self.space_inputs.reshape(cells, ds), self.time_inputs()
        starts = self.starts[split]
        for b in range(batch_size):
            start = int(starts[rng.integers(len(starts))])
            values = ((self.read_window(start) - self.mean) / self.std).reshape(-1)  # [W * cells]
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            nt = int(rng.integers(self.num_target[0], self.num_target[1] + 1))
            # the cells a task may draw: all, or the observed ones with missing="drop"
            pool = np.flatnonzero(~np.isnan(values)) if self.missing == "drop" else np.arange(w * cells)
            if self.targets == "last":
                earlier = np.searchsorted(pool, (w - 1) * cells)
                nc, nt = min(nc, earlier), min(nt, len(pool) - earlier)
                context = rng.choice(pool[:earlier], nc, replace=False)
                target = rng.choice(pool[earlier:], nt, replace=False)
            else:
                nt = max(min(nt, len(pool) - nc), self.num_target[0])
                nc = min(nc, len(pool) - nt)
                cells_drawn = pool[rng.permutation(len(pool))[:nc + nt]]
                context, target = cells_drawn[:nc], cells_drawn[nc:]
            for side, index, n in (("c", context, nc), ("t", target, nt)):
                s, t = space[index % cells], times[index // cells, None]
                out["x" + side][b, :n] = np.concatenate([s, t], -1)
                out["y" + side][b, :n, 0] = values[index]
                out["s" + side][b, :n], out["t" + side][b, :n] = s, t
                out["mask_" + side][b, :n] = 1.0
            out["window_start"][b] = start
        return out


@hookimpl
def register_tasks(register):
    register("gridded", GriddedTask,
             description="A gridded field (netCDF/zarr/xarray; lat/lon on the sphere or a planar grid): "
                         "random context/target cells of time windows, split by time.")
