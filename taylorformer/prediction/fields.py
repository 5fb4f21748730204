"""Fields in and out on their coordinates: predict a gridded field from scattered points or
another field, patch by patch, streamed to netCDF in the data's units.

:func:`predict_field` (``taylorformer predict RUN --grid FIELD.nc --context POINTS``):

- **grid**: an ``xarray.Dataset``/``DataArray`` or a netCDF path whose coordinates define
  the targets: one cell per point of the grid variable's dims (or, with no data variable,
  of its coordinates' dims). The model's inputs are coordinates of the grid, by name
  (``inputs``; latitude/longitude found by CF names, units or ``standard_name``: ``lat``,
  ``latitude``, ``degrees_north``, ...); by default the model's normaliser says which (a
  ``gridded``-task model: its latitude and longitude, and a fixed time input), else the
  grid dims' coordinates in order. Cells where the grid variable is NaN (a masked value: land
  in a sea-surface field) are not predicted and written as NaN.
- **context**: scattered points (a CSV path or ``pandas.DataFrame``, one row per point,
  columns named as the input coordinates and a value column) or another field (an
  ``xarray`` object or ``.nc`` path: its observed cells); raw units.
- **output**: a netCDF file (``output``) on the grid's own coordinates, names and
  attributes: ``<var>_mean``, ``<var>_stddev`` and ``<var>_quantiles`` (dims ``quantile``
  and the grid's; how they were computed: its ``quantile_method``), in the data's units,
  plus the grid variable itself (the truth, where the grid has it), and the context
  points' coordinates, ``context_<coordinate>`` over dim ``context`` (up to
  :data:`MAX_RECORDED_CONTEXT` points: the stations a map draws). The output is in the
  grid field's units (else the context's, else the model's), converted from the model's
  where they differ (:func:`convert_units`). Written patch by patch
  (atomically: a temp file renamed at the end), never the whole result in memory.

Patches: the grid is cut into tiles of ``patch`` cells per dim; a tile's targets are
predicted from the context inside its *window*, the tile's coordinate box widened by
``padding`` (coordinate units) on every side. Only the tile's own cells are written: each
cell gets exactly one predictive, a conditional model's predictive given the context near
it, whose mean, stddev and quantiles belong together (a blend of overlapping patches'
predictives would be a mixture whose quantiles are no blend of the patches' quantiles).
No seam shows where the model ignores context farther than ``padding``: what a cell sees
then does not depend on the tile it falls in. Where every window holds all the context,
the result equals the unpatched prediction (tests/core/test_fields.py). The default
``padding`` is half the span of the inputs the model was trained on (the normaliser's
``coordinates["span"]``), the
default tile half that span: a cell at a tile's edge sees context half a training region
away on every side, as the centre of a training task does, in windows of 1.5 training spans
(bounded, whatever the grid's size); without a known span, the window is the whole context.
Seams measured for a trained TNP-D: docs/fields.md.

The normaliser (raw units to the model's, and what the grid's coordinates are to the
model: :func:`field_inputs`) is the model's own, ``model.normaliser``, saved in its model
file (:mod:`taylorformer.normaliser`); a model without one (a file written before
normalisers were saved) is refused with an error naming what is missing: the grid's
coordinates and values are in the data's units, which such a model cannot map.
"""
import contextlib
import dataclasses
import functools
import math
import os
import re
import sys
import tempfile
import time
import warnings

import numpy as np

from taylorformer.checks import available_memory, check_int
from taylorformer.coordinates import LAT_UNITS, LON_UNITS, coordinate_role
from taylorformer.errors import BatchError
from taylorformer.files import atomic_path, check_output_path, not_a_file
from taylorformer.normaliser import Normaliser, default_names, latlon_to_xyz
from taylorformer.prediction.calibration import apply_spread_scale
from taylorformer.prediction.query import DEFAULT_LEVELS, MAX_MAGNITUDE, predict_query, read_csv

#: the most cells a grid may have (``predict_field(max_cells=...)`` lowers it)
MAX_GRID_CELLS = 10**8
#: the most context points (a field given as the context: its observed cells)
MAX_CONTEXT_POINTS = 10**8
#: tile side (cells per dim) when the training span is unknown, and the largest default side
DEFAULT_PATCH_SIDE, MAX_PATCH_SIDE = 128, 1024
#: smallest padded context size; sizes are powers of two (few compiled shapes)
MIN_BUCKET = 16
#: the most context points whose coordinates the output records (stations to draw, not a field)
MAX_RECORDED_CONTEXT = 10_000


# ----------------------------------------------------------------------------- names
def _find(names, wanted, attrs_of, where, what):
    """The one of ``names`` that is ``wanted``: the same name, else the same lat/lon role."""
    if wanted in names:
        return wanted
    lowered = {str(n).lower(): n for n in names}
    if str(wanted).lower() in lowered:
        return lowered[str(wanted).lower()]
    role = coordinate_role(wanted)
    matches = [n for n in names if role is not None and coordinate_role(n, attrs_of(n)) == role]
    if len(matches) == 1:
        return matches[0]
    raise BatchError(f"{where}: no {what} {wanted!r}"
                     + (f" (nor one {role}itude coordinate: found {matches})" if role and matches else "")
                     + f"; it has {sorted(map(str, names))}")


# ----------------------------------------------------------------------------- model inputs
class FieldInputs:
    """How grid coordinates become the model's inputs.

    ``names``: the coordinates read per point (None: the grid dims' coordinates, in order);
    ``to_x(coords [N, k]) -> [N, dim_x]`` data-unit model inputs; ``groups(x [B, N, dim_x])``:
    the feature groups (``s``, ``t``) of a model that takes them, keyed ``"s"``/``"t"``;
    ``span``: the span of the training inputs per input coordinate, in coordinate units,
    and ``extent`` their ``[lo, hi]`` (None: unknown)."""

    def __init__(self, dim_x, names=None, to_x=None, groups=None, span=None, extent=None):
        self.dim_x, self.names, self.span, self.extent = dim_x, names, span, extent
        self.to_x = to_x or (lambda coords: coords)
        self.groups = groups or (lambda x: {})


def field_inputs(normaliser, dim_x, names=None, time_input=None):
    """The :class:`FieldInputs` of a model with ``normaliser`` (its ``coordinates``, see
    :mod:`taylorformer.normaliser`). Inputs ``[space, window time]`` with groups ``s``/``t``
    (a ``gridded``-task model: ``space`` and ``time_input`` recorded): the two spatial
    coordinates (unit vectors where ``space_inputs`` is ``"xyz"`` on a geographic grid) and
    the window-time input fixed at ``time_input`` (default the recorded one: the most recent
    step). Otherwise the grid's coordinates are the inputs as they are: those named as the
    training inputs (the normaliser's ``x_names``), in that order, whatever the grid's dim
    order (the grid's dims in order only for a model whose inputs have default names, ``x0,
    x1``); a model taking other feature groups is refused."""
    coordinates = normaliser.coordinates or {}
    span, extent = coordinates.get("span"), coordinates.get("extent")
    if normaliser.groups and coordinates.get("space") is not None:
        space = list(coordinates["space"])
        t = coordinates.get("time_input") if time_input is None else time_input
        if t is None:
            raise BatchError("predict_field: the model's normaliser records no window-time input (a model file "
                             "written before it did): give the time input (time_input=, --time-input)")
        t = float(t)
        if not (np.isfinite(t) and abs(t) <= MAX_MAGNITUDE):
            raise BatchError(f"predict_field 'time_input' must be a finite number, got {time_input!r}")
        spherical = coordinates.get("geographic") and coordinates.get("space_inputs") == "xyz"
        if names is not None and len(names) != len(space):
            raise BatchError(f"predict_field: this model takes {len(space)} input coordinates "
                             f"({', '.join(space)}), got {list(names)}")
        if (3 if spherical else len(space)) + 1 != dim_x:
            raise BatchError(f"predict_field: the model's normaliser describes {len(space)} spatial coordinates "
                             f"and a time input, which do not make its {dim_x} inputs")

        def to_x(coords):
            inputs = latlon_to_xyz(coords) if spherical else coords
            return np.concatenate([inputs, np.full((len(coords), 1), t)], -1)

        return FieldInputs(dim_x, list(names or space), to_x,
                           lambda x: {"s": x[..., :-1], "t": x[..., -1:]}, span, extent)
    if normaliser.groups:
        raise BatchError(f"predict_field cannot build the inputs of this model: it takes the feature groups "
                         f"{normaliser.groups} (space/time positions) besides x, and its normaliser does not "
                         "say how a grid's coordinates make them")
    if names is not None and len(names) != dim_x:
        raise BatchError(f"predict_field: {len(names)} input coordinate(s) {list(names)} given but the "
                         f"model takes {dim_x} inputs")
    if names is None and list(normaliser.x_names) != default_names("x", dim_x):
        names = normaliser.x_names  # the training inputs by name, never the grid's dim order
    return FieldInputs(dim_x, None if names is None else list(names), span=span, extent=extent)


# ----------------------------------------------------------------------------- units
#: CF/UDUNITS spellings of temperature units that pint does not read, by their pint names
UNIT_ALIASES = {**dict.fromkeys(("degree_c", "degrees_c", "deg_c", "degreec", "degreesc", "degrees_celsius",
                                 "degree_celsius"), "degC"),
                **dict.fromkeys(("degree_f", "degrees_f", "deg_f", "degreef", "degreesf", "degrees_fahrenheit",
                                 "degree_fahrenheit"), "degF"),
                **dict.fromkeys(("degree_k", "degrees_k", "deg_k", "degreek", "degreesk"), "K")}


@functools.lru_cache(maxsize=1)
def _unit_registry():
    import pint

    return pint.UnitRegistry()


def _pint_units(text):
    """pint's reading of the CF units ``text``: aliases (``degree_C``), exponents written
    after the name (``m s-1`` -> ``m * s**-1``)."""
    alias = UNIT_ALIASES.get(text.strip().lower().replace(" ", "_"))
    if alias:
        return alias
    tokens = [re.sub(r"^([A-Za-z_]+)(-?\d+)$", r"\1**\2", t) for t in text.split()]
    return " * ".join(tokens)


def convert_units(values, source, target, where, target_is="the units the model was trained on"):
    """``values`` (float64) in the units ``source`` as values in ``target`` (pint: affine
    maps such as K <-> degC <-> degF included, so ``K -> degC`` is ``x - 273.15``); the
    values as they are where either unit is unknown (None or empty) or both are the same
    text. A BatchError naming both units and ``where`` when no conversion exists."""
    values = np.asarray(values, np.float64)
    source, target = str(source or "").strip(), str(target or "").strip()
    if not source or not target or source == target:
        return values
    registry = _unit_registry()
    try:
        return np.asarray(registry.Quantity(values, _pint_units(source)).to(_pint_units(target)).magnitude,
                          np.float64)
    except Exception as exc:  # noqa: BLE001 pint raises parse, undefined-unit and dimensionality errors
        reason = "they measure different things" if type(exc).__name__ == "DimensionalityError" else \
            f"{type(exc).__name__}: {exc}"
        raise BatchError(f"{where}: its units {source!r} cannot be converted to {target!r}, {target_is} "
                         f"({reason}); give the values in {target!r}") from None


def in_units(normaliser, units, where):
    """``normaliser`` with its output in ``units`` (the affine unit map composed with its
    own: ``y_offset``/``y_scale`` through :func:`convert_units`), or itself where
    ``units`` is unknown or already the model's."""
    model_units = normaliser.y_units[0]
    if not units or not model_units or str(units).strip() == str(model_units).strip():
        return normaliser
    # model = c * units + d, so units = (model - d) / c
    d, c_plus_d = convert_units([0.0, 1.0], units, model_units, where)
    c = c_plus_d - d
    if not (np.isfinite(c) and c > 0):
        raise BatchError(f"{where}: its units {units!r} map to the model's {model_units!r} with a factor {c:g}, not "
                         "a positive one; give the values in the model's units")
    return dataclasses.replace(normaliser, y_offset=(normaliser.y_offset - d) / c, y_scale=normaliser.y_scale / c,
                               y_units=[str(units)])


# ----------------------------------------------------------------------------- coordinate checks
#: units texts that say a coordinate is in degrees, and in radians
DEGREE_UNITS = LAT_UNITS + LON_UNITS + ("degree", "degrees", "deg", "degrees_true")
RADIAN_UNITS = ("rad", "radian", "radians")


def _extent(values):
    return float(np.min(values)), float(np.max(values))


def check_geography(box, roles, units, span, where, reference=None):
    """Refuse (BatchError naming ``where``) the coordinates of a grid or context whose box
    ``[(lo, hi)]`` per coordinate is no geography in degrees: a latitude beyond +-90; a
    latitude/longitude in radians (``units``, one text or None per coordinate, says so; or,
    unlabelled, every value within the radian range while the model's training ``span``
    in degrees was far wider). ``reference``: the grid's box, which a context lying inside
    it is taken to share the units of."""
    geo = [i for i, r in enumerate(roles) if r in ("lat", "lon")]
    for i in geo:
        lo, hi = box[i]
        if roles[i] == "lat" and max(abs(lo), abs(hi)) > 90:
            raise BatchError(f"{where}: latitude coordinate {i} ranges {lo:g} .. {hi:g}: a latitude lies within "
                             "+-90 degrees (swapped latitude and longitude, or not degrees?)")
        text = str(units[i] or "").strip().lower().replace(" ", "_")
        if text in RADIAN_UNITS:
            raise BatchError(f"{where}: the {roles[i]}itude coordinate is in radians (units {units[i]!r}); the model "
                             "takes degrees: convert it (numpy.degrees)")
    labelled = [i for i in geo if str(units[i] or "").strip().lower().replace(" ", "_") in DEGREE_UNITS]
    if labelled or not geo or span is None:  # a degree label speaks for the grid
        return
    limit = {"lat": np.pi / 2, "lon": 2 * np.pi}
    radian_like = all(max(abs(box[i][0]), abs(box[i][1])) <= limit[roles[i]] for i in geo)
    # a training span wider than the radian range was in degrees; a box that small is radians
    wide = all(span[i] > 2 * limit[roles[i]] and box[i][1] - box[i][0] <= span[i] / 20 for i in geo)
    overlaps = reference is not None and all(box[i][0] <= reference[i][1] and box[i][1] >= reference[i][0]
                                             for i in geo)
    if radian_like and wide and not overlaps:
        ranges = ", ".join(f"{roles[i]} {box[i][0]:.3g} .. {box[i][1]:.3g}" for i in geo)
        raise BatchError(f"{where}: the coordinates ({ranges}) look like radians, while the model was trained on "
                         f"degrees over spans of {', '.join(f'{span[i]:g}' for i in geo)}: convert them "
                         "(numpy.degrees), or, if they are degrees, say so with a units attribute "
                         "(degrees_north / degrees_east)")


def longitude_start(extent, lon_values):
    """The start (-180 or 0) of the longitude convention: the training data's (``extent``
    ``(lo, hi)``, None when the model file does not record it), else the grid's."""
    lo = extent[0] if extent is not None else float(np.min(lon_values))
    return -180.0 if lo < 0 else 0.0


def wrap_longitude(values, start):
    """``(values, moved)``: longitudes (degrees) outside ``[start, start + 360]`` wrapped
    into ``[start, start + 360)``, and how many were."""
    values = np.asarray(values, np.float64)
    outside = (values < start) | (values > start + 360)
    return np.where(outside, np.mod(values - start, 360.0) + start, values), int(outside.sum())


def check_unique_points(coords, names, where):
    """Refuse (BatchError naming ``where`` and the first pair) ``coords [N, k]`` with a
    point given twice: two values at one place are no field."""
    if len(coords) < 2:
        return
    order = np.lexsort(coords.T[::-1])
    same = np.all(coords[order[1:]] == coords[order[:-1]], axis=1)
    if same.any():
        first = int(np.argmax(same))
        a, b = sorted((int(order[first]), int(order[first + 1])))
        raise BatchError(f"{where}: {int(same.sum())} duplicated point(s): points {a} and {b} are both at "
                         f"{dict(zip(names, coords[a].tolist()))}; give one value per place (average them)")


# ----------------------------------------------------------------------------- the size of a grid
#: a rough prediction rate (cells per second) behind the time of :func:`estimate_grid`: the
#: order of a default-size TNP-D's on two CPU cores with a few hundred context points (an
#: accelerator is far faster); an order of magnitude, not a promise
CELLS_PER_SECOND = 1e3


def bytes_text(nbytes):
    """``nbytes`` as text in binary units (``1.5 GiB``)."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{int(nbytes)} bytes" if unit == "bytes" else f"{nbytes:.3g} {unit}"
        nbytes /= 1024


@dataclasses.dataclass
class GridEstimate:
    """What predicting a grid takes, known from its shape before any work: ``cells``,
    ``output_bytes`` (the float32 netCDF: mean, stddev, quantiles and the truth),
    ``memory_bytes`` (the peak: one tile's arrays and forward pass, plus the whole result
    where it is returned in memory) and ``seconds`` (at :data:`CELLS_PER_SECOND`)."""

    cells: int
    output_bytes: int
    memory_bytes: int
    seconds: float

    def describe(self):
        hours = self.seconds / 3600
        time_text = f"{hours:.3g} h" if hours >= 1 else f"{self.seconds / 60:.2g} min"
        return (f"{self.cells:,} cells, {bytes_text(self.output_bytes)} of output, about {bytes_text(self.memory_bytes)} "
                f"of memory and roughly {time_text} at ~{CELLS_PER_SECOND:g} cells/s")


def estimate_grid(shape, levels=DEFAULT_LEVELS, tile=None, inputs=2, chunk_size=4096, context=0,
                  in_memory=False):
    """The :class:`GridEstimate` of a grid of ``shape`` (dims' sizes: Python ints, nothing
    allocated), predicted in tiles of ``tile`` cells per dim (default: the whole grid),
    ``inputs`` coordinates per cell, ``chunk_size`` targets per forward pass against at
    most ``context`` points per window, with the result returned in memory
    (``in_memory``) or written to a file."""
    cells = math.prod(int(n) for n in shape)
    per_cell = 3 + len(levels)  # mean, stddev, truth, quantiles
    tile_cells = cells if tile is None else math.prod(min(int(t), int(n)) for t, n in zip(tile, shape))
    # a tile's coordinates and outputs (float64, twice: model and data units) and one chunk's
    # padded window of context (the attention executor bounds the scores themselves)
    memory = 2 * 8 * tile_cells * (inputs + per_cell) + 8 * min(chunk_size, tile_cells) * _bucket(max(context, 1))
    output = 4 * cells * per_cell
    if in_memory:
        memory += output
    return GridEstimate(cells, output, memory, cells / CELLS_PER_SECOND)


# ----------------------------------------------------------------------------- the grid
def _open(source, what):
    import xarray as xr

    if isinstance(source, xr.DataArray):
        return source.to_dataset(name=source.name if source.name is not None else "field"), "the given DataArray"
    if isinstance(source, xr.Dataset):
        return source, f"the given {what} Dataset"
    if not isinstance(source, (str, os.PathLike)):
        raise BatchError(f"{what} must be an xarray Dataset/DataArray or a netCDF path, got {type(source).__name__}")
    if reason := not_a_file(source):
        raise BatchError(f"{what} file {source} {reason}")
    try:
        return xr.open_dataset(source), str(source)
    except Exception as exc:  # noqa: BLE001 the netCDF backends raise many types
        raise BatchError(f"cannot read {what} file {source} as netCDF: {type(exc).__name__}: {exc}") from None


def _numeric(values, where, name):
    values = np.asarray(values)
    if values.dtype.kind not in "fiu":
        raise BatchError(f"{where}: coordinate {name!r} holds {values.dtype} values, not real numbers "
                         "(a model input must be a number)")
    values = values.astype(np.float64)
    bad = ~np.isfinite(values) | (np.abs(values) > MAX_MAGNITUDE)
    if bad.any():
        raise BatchError(f"{where}: coordinate {name!r} has {int(bad.sum())} NaN/inf or huge value(s): a "
                         "point without a place cannot be predicted")
    return values


class Grid:
    """The targets of :func:`predict_field`: a grid's cells, their coordinates and (where
    the grid has a variable) the mask of defined cells and the truth.

    ``dims``/``shape``: the grid's dims; ``names``: the input coordinates (one per input
    column of :class:`FieldInputs`); ``variable``: the field's name or None."""

    def __init__(self, source, names=None, variable=None, num_inputs=None, max_cells=None):
        max_cells = MAX_GRID_CELLS if max_cells is None else max_cells
        ds, self.where = _open(source, "grid")
        self.dataset = ds
        data_vars = [str(v) for v in ds.data_vars]
        if variable is None and len(data_vars) > 1:
            raise BatchError(f"grid {self.where} has {len(data_vars)} variables {data_vars}: name the field "
                             "(variable=, --variable)")
        if variable is not None and variable not in data_vars:
            raise BatchError(f"grid {self.where} has no variable {variable!r}; variables: {data_vars}")
        self.variable = variable if variable is not None else (data_vars[0] if data_vars else None)
        field = None
        if self.variable is not None:
            field = ds[self.variable]
            if field.dtype.kind not in "fiu":
                raise BatchError(f"grid {self.where}: variable {self.variable!r} holds {field.dtype} values, "
                                 "not real numbers")
            field = field.squeeze(drop=False) if field.ndim > 1 else field
        coord_names = [str(c) for c in ds.coords]
        if names is None:
            dims = list(field.dims) if field is not None else [d for d in ds.dims if d in ds.coords]
            missing = [d for d in dims if d not in ds.coords]
            if missing or not dims:
                raise BatchError(f"grid {self.where}: dim(s) {missing or dims} have no coordinate values; the "
                                 "targets are the grid's coordinates: give each dim a coordinate variable")
            names = dims
        else:
            names = [_find(coord_names, n, lambda c: ds[c].attrs, f"grid {self.where}", "coordinate")
                     for n in names]
        if num_inputs is not None and len(names) != num_inputs:
            raise BatchError(f"grid {self.where} has {len(names)} coordinate dim(s) {names} but the model takes "
                             f"{num_inputs} input coordinate(s): give a grid with {num_inputs} dims, or name the "
                             "input coordinates (inputs=, --x-columns)")
        coord_dims = []
        for n in names:
            coord_dims += [d for d in ds[n].dims if d not in coord_dims]
        dims = list(field.dims) if field is not None else coord_dims
        outside = [d for d in coord_dims if d not in dims]
        unused = [d for d in dims if d not in coord_dims]
        if outside or unused or not dims:
            raise BatchError(f"grid {self.where}: the input coordinates {names} span dims {coord_dims} but the "
                             f"field {self.variable!r} has dims {dims}: they must match (select one value of "
                             "any other dim)")
        self.names, self.dims = names, tuple(dims)
        self.shape = tuple(int(ds.sizes[d]) for d in self.dims)
        estimate = estimate_grid(self.shape)  # from the sizes alone: nothing read or allocated yet
        if estimate.cells > max_cells:
            raise BatchError(f"grid {self.where} has {estimate.cells} cells ({' x '.join(map(str, self.shape))}), "
                             f"more than the {max_cells} predict_field takes ({estimate.describe()}); predict a "
                             "region at a time (a sub-grid), in tiles of --patch cells")
        self.field = field
        self.coords = [ds[n] for n in names]
        self.roles = [coordinate_role(n, ds[n].attrs) for n in names]
        self.units = [ds[n].attrs.get("units") for n in names]
        self.box = []
        for n, c in zip(names, self.coords):
            values = _numeric(c.values, f"grid {self.where}", n)
            self.box.append(_extent(values) if values.size else (0.0, 0.0))
            if c.ndim == 1 and np.unique(values).size < values.size:
                twice = np.unique(values, return_counts=True)
                raise BatchError(f"grid {self.where}: coordinate {n!r} holds {int((twice[1] > 1).sum())} value(s) "
                                 f"more than once (first {twice[0][np.argmax(twice[1] > 1)]:g}): a cell per place")
        if field is not None:
            self._check_cells()

    def _check_cells(self):
        """Refuse a field with an infinite or huge cell (it would be written back as the
        truth) or no defined cell at all; read in slabs of the first dim, never whole."""
        rows = max(1, 2**22 // max(1, int(np.prod(self.shape[1:], dtype=np.int64))))
        defined = 0
        for start in range(0, self.shape[0], rows):
            slab = np.asarray(self.field.isel({self.dims[0]: slice(start, start + rows)}).values, np.float64)
            bad = np.isinf(slab) | (np.abs(slab) > MAX_MAGNITUDE)
            if bad.any():
                index = np.argwhere(bad)[0]
                index[0] += start
                raise BatchError(f"grid {self.where}: variable {self.variable!r} has an infinite or huge value "
                                 f"{slab[tuple(np.argwhere(bad)[0])]:g} at {dict(zip(self.dims, index.tolist()))} "
                                 "(NaN marks a cell not to predict; inf is no value)")
            defined += int(np.count_nonzero(~np.isnan(slab)))
        if not defined:
            raise BatchError(f"grid {self.where}: every cell of {self.variable!r} is NaN: nothing to predict (NaN "
                             "marks a masked cell); drop the variable to predict at every cell")

    def blocks(self, patch):
        """Tuples of slices (one per dim) tiling the grid, ``patch[d]`` cells per dim."""
        import itertools

        starts = [range(0, n, p) for n, p in zip(self.shape, patch)]
        for corner in itertools.product(*starts):
            yield tuple(slice(a, min(a + p, n)) for a, p, n in zip(corner, patch, self.shape))

    def inputs(self, block):
        """``[cells, k]`` float64 input coordinates of the block's cells (C order)."""
        index = dict(zip(self.dims, block))
        shape = tuple(s.stop - s.start for s in block)
        columns = []
        for c in self.coords:
            part = c.isel({d: index[d] for d in c.dims}).transpose(*[d for d in self.dims if d in c.dims])
            values = np.asarray(part.values, np.float64)
            expand = tuple(slice(None) if d in c.dims else None for d in self.dims)
            columns.append(np.broadcast_to(values[expand], shape).reshape(-1))
        return np.stack(columns, -1)

    def values(self, block):
        """The field's float64 values of the block (None without a field)."""
        if self.field is None:
            return None
        return np.asarray(self.field.isel(dict(zip(self.dims, block))).transpose(*self.dims).values, np.float64)

    def spacing(self, name):
        """Median cell spacing of a 1-D coordinate ``name`` (None when not 1-D)."""
        c = self.dataset[name]
        if c.ndim != 1 or c.size < 2:
            return None
        step = np.median(np.abs(np.diff(np.asarray(c.values, np.float64))))
        return float(step) if step > 0 else None

    def close(self):
        self.dataset.close()


# ----------------------------------------------------------------------------- the context
def read_context(source, names, value=None, where_grid=None):
    """``(coords [N, k] float64, values [N] float64, attrs, name)`` of the observed context
    points: a CSV path or DataFrame (columns ``names`` or their lat/lon aliases, and the
    value column ``value``, default ``y``) or a field (xarray object or ``.nc`` path: its
    variable ``value`` or its only one, every non-NaN cell). Rows with a NaN value are
    unobserved and dropped; a NaN coordinate or an infinite value is an error."""
    import pandas as pd
    import xarray as xr

    if isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(".csv"):
        if reason := not_a_file(source):
            raise BatchError(f"context file {source} {reason}")
        source, where = read_csv(source), str(source)
    else:
        where = "the context DataFrame" if isinstance(source, pd.DataFrame) else None
    if isinstance(source, pd.DataFrame):
        columns = [str(c) for c in source.columns]
        frame = source.set_axis(columns, axis=1)
        found = [_find(columns, n, lambda c: {}, where, "column") for n in names]
        value = value or ("y" if "y" in columns else None)
        if value is None or value not in columns:
            raise BatchError(f"{where}: no value column {value or 'y'!r}; columns are {columns} (name it, "
                             "--y-columns)")
        if not len(frame):
            raise BatchError(f"{where} has no rows (a header only): the context needs one row per observed point")
        coords = np.stack([_numeric(frame[c].to_numpy(), where, c) for c in found], -1)
        values = frame[value].to_numpy()
        attrs = {"units": str(frame.attrs["units"])} if frame.attrs.get("units") else {}
    else:
        ds, where = _open(source, "context")
        variables = [str(v) for v in ds.data_vars]
        if value is None and len(variables) == 1:
            value = variables[0]
        if value not in variables:
            raise BatchError(f"context {where}: no variable {value!r}; variables: {variables} (name it, "
                             "--y-columns)")
        field = ds[value].squeeze(drop=False)
        found = [_find([str(c) for c in ds.coords], n, lambda c: ds[c].attrs, f"context {where}", "coordinate")
                 for n in names]
        size = int(field.size)
        if size > MAX_CONTEXT_POINTS:
            raise BatchError(f"context {where}: {size} cells, more than {MAX_CONTEXT_POINTS} context points")
        dims = [d for n in found for d in ds[n].dims]
        extra = [d for d in field.dims if d not in dims]
        if extra:
            raise BatchError(f"context {where}: variable {value!r} has dims {list(field.dims)} beyond those of "
                             f"the input coordinates {found}: select one value of {extra}")
        grid = xr.broadcast(*[ds[n] for n in found], field)
        coords = np.stack([_numeric(g.transpose(*field.dims).values.reshape(-1), f"context {where}", n)
                           for g, n in zip(grid[:-1], found)], -1)
        values, attrs = field.values.reshape(-1), dict(field.attrs)
    values = np.asarray(values)
    if values.dtype.kind not in "fiu":
        raise BatchError(f"{where}: the values {value!r} hold {values.dtype} values, not real numbers")
    values = values.astype(np.float64)
    bad = np.isinf(values) | (np.abs(values) > MAX_MAGNITUDE)
    if bad.any():
        raise BatchError(f"{where}: {int(bad.sum())} infinite or huge value(s) of {value!r}, the first at "
                         f"point {int(np.argmax(bad))} (NaN means not observed; inf is not a value)")
    keep = ~np.isnan(values)
    if not keep.any():
        raise BatchError(f"{where}: no observed context point (every value of {value!r} is NaN, or none given)")
    check_unique_points(coords[keep], found, where)
    return coords[keep], values[keep], attrs, value


# ----------------------------------------------------------------------------- output
class _Writer:
    """The output netCDF: the grid's coordinates and attributes, the context points'
    coordinates ``context [N, k]`` on ``names`` (when at most :data:`MAX_RECORDED_CONTEXT`),
    then the predictions (and the truth) written block by block through h5netcdf."""

    def __init__(self, path, grid, name, levels, attrs, options, names, context):
        import h5netcdf
        import xarray as xr

        ds = grid.dataset
        keep = {c: ds[c] for c in ds.coords if set(ds[c].dims) <= set(grid.dims)}
        recorded = {} if len(context) > MAX_RECORDED_CONTEXT else {
            f"context_{n}": ("context", context[:, i],
                             {"long_name": f"{n} of the context points",
                              **({"units": ds[n].attrs["units"]} if n in ds.variables and "units" in ds[n].attrs
                                 else {})})
            for i, n in enumerate(names)}
        skeleton = xr.Dataset(coords={**keep, "quantile": ("quantile", np.asarray(levels, np.float64),
                                                           {"long_name": "quantile level"}), **recorded},
                              attrs={**ds.attrs, **options})
        skeleton.to_netcdf(path, engine="h5netcdf")
        self.file = h5netcdf.File(path, "a")
        chunks = tuple(min(n, 256) for n in grid.shape)
        label = attrs.get("long_name", name)
        units = {"units": attrs["units"]} if "units" in attrs else {}
        self.variables = {}
        specs = {f"{name}_mean": (grid.dims, {"long_name": f"predictive mean of {label}", **units}),
                 f"{name}_stddev": (grid.dims, {"long_name": f"predictive standard deviation of {label}", **units}),
                 f"{name}_quantiles": (("quantile",) + grid.dims,
                                       {"long_name": f"predictive quantiles of {label}", **units})}
        if grid.field is not None:
            specs[grid.variable] = (grid.dims, dict(grid.field.attrs))
        for key, (dims, var_attrs) in specs.items():
            var = self.file.create_variable(key, dims, "f4", fillvalue=np.float32(np.nan),
                                            chunks=((len(levels),) if dims[0] == "quantile" else ()) + chunks)
            for k, v in var_attrs.items():
                var.attrs[k] = v
            self.variables[key] = var

    def write(self, key, block, values):
        index = (slice(None),) * (values.ndim - len(block)) + block
        self.variables[key][index] = values.astype(np.float32)

    def close(self):
        self.file.close()


class _Progress:
    """One stderr line: cells done of the total, elapsed and remaining time; redrawn in
    place on a terminal, a new line every 10% otherwise; nothing when not ``enabled``."""

    def __init__(self, total, enabled, stream=None):
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.start, self.shown = time.monotonic(), -1

    def add(self, n):
        self.done += n
        if not self.enabled:
            return
        tenth = 10 * self.done // self.total
        if not self.tty and tenth == self.shown:
            return
        self.shown = tenth
        elapsed = time.monotonic() - self.start
        left = elapsed * (self.total - self.done) / max(self.done, 1)
        line = (f"predict_field: {self.done}/{self.total} cells ({100 * self.done / self.total:.0f}%), "
                f"{elapsed:.0f}s elapsed, ~{left:.0f}s left")
        self.stream.write(("\r" + line + ("\n" if self.done >= self.total else "")) if self.tty else line + "\n")
        self.stream.flush()


# ----------------------------------------------------------------------------- predicting
def _bucket(n):
    """The padded size of ``n`` context points: the next power of two >= :data:`MIN_BUCKET`."""
    return max(MIN_BUCKET, 1 << int(np.ceil(np.log2(max(n, 1)))))


def _per_input(owner, key, value, names, default):
    """``value`` (a number or one per name) as a float64 ``[k]`` array; ``default`` when None."""
    if value is None:
        return np.asarray(default, np.float64)
    if isinstance(value, dict):
        unknown = [n for n in value if n not in names]
        if unknown:
            raise BatchError(f"{owner} {key!r} names {unknown}; the input coordinates are {names}")
        value = [value.get(n, d) for n, d in zip(names, default)]
    array = np.broadcast_to(np.asarray(value, np.float64), (len(names),)) if np.ndim(value) == 0 else \
        np.asarray(value, np.float64)
    if array.shape != (len(names),):
        raise BatchError(f"{owner} {key!r} must be one number or one per input coordinate {names}, got {value!r}")
    return array


def predict_field(model, context, grid, output=None, *, normaliser=None, inputs=None,
                  variable=None, value=None, time_input=None, padding=None, patch=None,
                  levels=DEFAULT_LEVELS, chunk_size=4096, spread_scale=None, max_cells=None,
                  memory_budget=None, progress=True, seed=0):
    """Predict the field of ``grid`` from ``context`` with ``model``; returns the
    ``xarray.Dataset`` of ``output`` (opened lazily: close it) or, with ``output`` None, the
    result loaded in memory (small grids). See the module docstring.

    ``normaliser``: a :class:`~taylorformer.normaliser.Normaliser` (default
    ``model.normaliser``, the model file's): the units, the inputs (:func:`field_inputs`)
    and the training span behind the default ``padding``/``patch``; a BatchError naming
    what is missing where there is none (``Normaliser.identity(dim_x, dim_y)`` for a model
    that works in the data's own units). ``inputs``: the grid coordinates that are the
    model's inputs, in order; ``variable``: the grid's field; ``value``: the context's value
    column/variable (default the grid variable's name, else ``y``); ``time_input``: the
    window-time input of a gridded-task model (default the normaliser's).
    ``padding``: coordinate units added on every side of a tile for its window (one
    number or one per input coordinate; ``float("inf")``: the whole context); ``patch``:
    tile cells per grid dim. ``levels``: quantile levels; ``chunk_size``: targets per
    forward pass; ``spread_scale``: a recalibration ``[Dy]`` (:mod:`taylorformer.prediction.calibration`);
    ``max_cells``: refuse a larger grid (default :data:`MAX_GRID_CELLS`); ``memory_budget``:
    bytes the prediction may hold (default the memory available), checked against
    :func:`estimate_grid` before any work, as is the output's size against the free disk.

    Checked before any work (a BatchError naming the file otherwise): the grid's cells
    finite (NaN: masked) and not all NaN, its axes and the context's points without
    duplicates, latitudes within +-90 and no radians where the model was trained on
    degrees (:func:`check_geography`). Longitudes are wrapped to the training convention
    (:func:`_wrap_longitudes`) and the values converted between the units of the grid,
    the context and the model (:func:`_output_units`); the file's attributes say so."""
    check_int("predict_field", "chunk_size", chunk_size)
    max_cells = check_int("predict_field", "max_cells", MAX_GRID_CELLS if max_cells is None else max_cells)
    check_int("predict_field", "memory_budget", memory_budget, optional=True)
    levels = tuple(float(q) for q in levels)
    if not (levels and all(0.0 < q < 1.0 for q in levels)):
        raise BatchError(f"predict_field 'levels' must be probabilities in (0, 1), got {list(levels)}")
    if model.dim_y != 1:
        raise BatchError(f"predict_field predicts one variable; this model has {model.dim_y} outputs")
    normaliser = getattr(model, "normaliser", None) if normaliser is None else normaliser
    if not isinstance(normaliser, Normaliser):
        raise BatchError(
            "predict_field: the model has no normaliser (a model file written before taylorformer saved one, or "
            "a model built without a task): the grid's coordinates and the context's values are in the data's "
            "units, which it cannot map to the model's; train it again, or pass normaliser="
            "Normaliser.identity(dim_x, dim_y) for a model that works in the data's own units"
            if normaliser is None else f"predict_field 'normaliser' must be a Normaliser, got "
                                       f"{type(normaliser).__name__}")
    if (normaliser.dim_x, normaliser.dim_y) != (model.dim_x, model.dim_y):
        raise BatchError(f"predict_field: the normaliser has dims x {normaliser.dim_x}, y {normaliser.dim_y}; the "
                         f"model has {model.dim_x}, {model.dim_y}")
    spec = field_inputs(normaliser, model.dim_x, inputs, time_input)
    if output is not None:
        if not str(output).lower().endswith(".nc"):
            raise BatchError(f"predict_field output {output} must be a netCDF file (.nc)")
        check_output_path(output, "output",
                          reads=[s for s in (grid, context) if isinstance(s, (str, os.PathLike))])
    target = Grid(grid, spec.names, variable, num_inputs=None if spec.names else model.dim_x, max_cells=max_cells)
    try:
        names = target.names
        coords, values, ctx_attrs, value_name = read_context(context, names, value or target.variable, target.where)
        context_where = f"context {context}" if isinstance(context, (str, os.PathLike)) else "the context"
        name = target.variable or value_name  # the outputs' prefix: the field's name
        attrs = dict(target.field.attrs) if target.field is not None else ctx_attrs
        span = spec.span  # one per input coordinate, in the order of names
        known = span is not None and len(span) == len(names) and all(s > 0 for s in span)
        check_geography(target.box, target.roles, target.units, span if known else None, f"grid {target.where}")
        check_geography([_extent(c) if len(c) else (0.0, 0.0) for c in coords.T], target.roles, [None] * len(names),
                        span if known else None, context_where, reference=target.box)
        recorded = coords.copy()  # the context as the file records it: in the grid's own convention
        notes = _wrap_longitudes(target, coords, recorded, spec, context_where)
        normaliser, values, note = _output_units(normaliser, attrs, ctx_attrs, values, target, context_where)
        notes.update(note)
        pad = _per_input("predict_field", "padding", padding, names,
                         [s / 2 for s in span] if known else [np.inf] * len(names))
        if np.any(np.isnan(pad)) or np.any(pad < 0):
            raise BatchError(f"predict_field 'padding' must be >= 0 (coordinate units), got {padding!r}")
        default_patch = []
        for d in target.dims:
            owner = next((i for i, c in enumerate(target.coords) if c.dims == (d,)), None)
            step = target.spacing(names[owner]) if owner is not None else None
            side = DEFAULT_PATCH_SIDE
            if known and step is not None and np.isfinite(pad[owner]):
                side = int(np.clip(round(span[owner] / 2 / step), 1, MAX_PATCH_SIDE))
            default_patch.append(side)
        if patch is None:
            tiles = default_patch
        else:
            tiles = [int(p) for p in np.broadcast_to(np.asarray(patch), (len(target.dims),))] \
                if np.ndim(patch) == 0 else [int(p) for p in patch]
            if len(tiles) != len(target.dims) or any(p < 1 for p in tiles):
                raise BatchError(f"predict_field 'patch' must be one int >= 1 or one per grid dim "
                                 f"{list(target.dims)}, got {patch!r}")
        check_grid_estimate(estimate_grid(target.shape, levels, tiles, len(names), chunk_size, len(coords),
                                          in_memory=output is None), target.where, output, memory_budget)
        options = {"taylorformer_inputs": ",".join(names), "taylorformer_padding": ",".join(f"{p:g}" for p in pad),
                   "taylorformer_patch": ",".join(map(str, tiles)), **notes}
        with contextlib.ExitStack() as stack:
            path = stack.enter_context(atomic_path(output)) if output is not None else \
                os.path.join(stack.enter_context(tempfile.TemporaryDirectory()), "field.nc")
            writer = _Writer(path, target, name, levels, attrs, options, names, recorded)
            try:
                _predict_blocks(model, target, writer, name, coords, values, spec, pad, tiles, levels,
                                chunk_size, seed, progress, normaliser, spread_scale)
            finally:
                writer.close()
            if output is None:
                import xarray as xr

                return xr.load_dataset(path)
    finally:
        target.close()
    import xarray as xr

    return xr.open_dataset(output)


def _wrap_longitudes(grid, coords, recorded, spec, context_where):
    """Wrap the longitudes of ``grid`` (its input coordinates, not its written ones) and of
    the context ``coords [N, k]`` (in place) to one convention, the training data's where
    the model records it (:func:`longitude_start`), and those of ``recorded [N, k]`` (the
    context points the file records, drawn on the grid's map) to the grid's own; the output
    attributes that say so."""
    lon = [i for i, role in enumerate(grid.roles) if role == "lon"]
    if len(lon) != 1:
        return {}
    i = lon[0]
    extent = spec.extent[i] if spec.extent is not None and len(spec.extent) == len(grid.names) else None
    start = longitude_start(extent, grid.box[i])
    wrapped, moved_grid = wrap_longitude(grid.coords[i].values, start)
    if moved_grid:
        grid.coords[i] = grid.coords[i].copy(data=wrapped)
    coords[:, i], moved_context = wrap_longitude(coords[:, i], start)
    recorded[:, i] = wrap_longitude(recorded[:, i], longitude_start(None, grid.box[i]))[0]
    if moved_context:
        check_unique_points(coords, grid.names, context_where)
    if not (moved_grid or moved_context):
        return {}
    return {"taylorformer_longitude_wrapped": (
        f"{grid.names[i]} wrapped to [{start:g}, {start + 360:g}] (the "
        f"{'training data' if extent is not None else 'grid'}'s convention) before predicting: {moved_grid} grid "
        f"value(s), {moved_context} context point(s); the grid's and the context points' coordinates are written "
        "in the grid's own convention")}


def _output_units(normaliser, attrs, context_attrs, values, grid, context_where):
    """``(normaliser, values, notes)``: the output in the grid field's units (else the
    context's, else the model's): ``normaliser`` with its output in those units
    (:func:`in_units`), the context ``values`` converted to them (a context without units
    is in the model's), the output attributes that say what was converted. ``attrs``
    gets the output units."""
    model_units = normaliser.y_units[0]
    units = attrs.get("units") or model_units
    if units:
        attrs["units"] = units
    from_grid = grid.field is not None and bool(grid.field.attrs.get("units"))
    where = f"grid {grid.where} (variable {grid.variable!r})" if from_grid else context_where
    converted = in_units(normaliser, units, where)
    given = context_attrs.get("units") or model_units
    if not context_attrs.get("units") and model_units and units and str(units).strip() != str(model_units).strip():
        warnings.warn(f"{context_where} gives no units: its values are taken in the model's units {model_units!r} "
                      f"and the predictions written in the grid's {units!r}", stacklevel=3)
    values = convert_units(values, given, units, context_where,
                           "the units of the grid" if model_units is None else "the output's units")
    notes = {}
    if converted is not normaliser:
        notes["taylorformer_units"] = (f"predicted in {model_units!r} (the model's units), written in {units!r} "
                                       f"(the {'grid' if from_grid else 'context'}'s)")
    if given and units and str(given).strip() != str(units).strip():
        notes["taylorformer_context_units"] = f"context values converted from {given!r} to {units!r}"
    return converted, values, notes


def check_grid_estimate(estimate, where, output, memory_budget=None):
    """Refuse (BatchError naming ``where``, the estimate and the way out) a grid whose
    :class:`GridEstimate` needs more memory than ``memory_budget`` bytes (default the
    memory available) or more disk than is free where ``output`` goes."""
    budget = memory_budget if memory_budget is not None else available_memory()
    if budget is not None and estimate.memory_bytes > budget:
        raise BatchError(f"grid {where}: predicting it needs about {bytes_text(estimate.memory_bytes)} of memory, "
                         f"more than the {bytes_text(budget)} {'budget' if memory_budget else 'available'} "
                         f"({estimate.describe()}); use smaller tiles (--patch N){'' if output else ', write to a file (output=)'}"
                         " or a larger memory budget (--memory-budget, memory_budget=)")
    if output is not None:
        import shutil

        free = shutil.disk_usage(os.path.dirname(os.path.abspath(output))).free
        if estimate.output_bytes > free:
            raise BatchError(f"grid {where}: its output needs about {bytes_text(estimate.output_bytes)}, more than "
                             f"the {bytes_text(free)} free where {output} goes ({estimate.describe()}); predict a "
                             "region at a time, or write elsewhere")


def _predict_blocks(model, grid, writer, name, coords, values, spec, pad, tiles, levels, chunk_size, seed,
                    progress, normaliser, spread_scale):
    """Predict and write every tile of ``grid`` (see :func:`predict_field`); the model sees
    ``normaliser``'s model units, the file gets the data's (its scales are > 0, so the
    quantile levels map to themselves)."""
    yc_all = normaliser.y_to_model(values[:, None])[:, 0].astype(np.float32)
    bar = _Progress(int(np.prod(grid.shape, dtype=np.int64)), progress)
    # every tile's targets padded to a full tile's (in whole chunks): one compiled target shape
    full = int(np.prod([min(t, n) for t, n in zip(tiles, grid.shape)]))
    t_size = -(-full // chunk_size) * chunk_size if full > chunk_size else full
    for block in grid.blocks(tiles):
        shape = tuple(s.stop - s.start for s in block)
        truth = grid.values(block)
        defined = np.ones(shape, bool) if truth is None else ~np.isnan(truth)
        if truth is not None:
            writer.write(name if grid.variable is None else grid.variable, block, truth)
        if not defined.any():
            bar.add(int(np.prod(shape)))
            continue  # every output there stays NaN (the file's fill value)
        cells = grid.inputs(block)[defined.reshape(-1)]
        lo, hi = cells.min(0) - pad, cells.max(0) + pad
        inside = np.all((coords >= lo) & (coords <= hi), axis=1)
        to_model = lambda c: normaliser.x_to_model(spec.to_x(c)).astype(np.float32)  # noqa: E731
        xt, xc, yc = to_model(cells), to_model(coords[inside]), yc_all[inside]
        # padded (masked context, repeated targets): one compiled forward pass per bucket, not per tile
        nc, nt = len(xc), len(xt)
        if nc:
            size = _bucket(nc)
            xc = np.concatenate([xc, np.repeat(xc[:1], size - nc, 0)])
            yc = np.concatenate([yc, np.full(size - nc, np.nan, np.float32)])  # NaN: not observed
        xt = np.concatenate([xt, np.repeat(xt[:1], t_size - nt, 0)])
        query = {"xc": xc[None], "yc": yc[None, :, None], "xt": xt[None]}
        for key, part in spec.groups(query["xc"]).items():
            query[key + "c"] = part
        for key, part in spec.groups(query["xt"]).items():
            query[key + "t"] = part
        out = predict_query(model, query, levels=levels, chunk_size=chunk_size, seed=seed, verbose=0)
        if spread_scale is not None:
            out = apply_spread_scale(out, spread_scale)
        mean = normaliser.y_from_model(out["mean"][0, :nt])[:, 0]
        stddev = normaliser.spread_from_model(out["stddev"][0, :nt])[:, 0]
        quantiles = normaliser.y_from_model(out["quantiles"][:, 0, :nt])[..., 0]
        for key, result in ((f"{name}_mean", mean), (f"{name}_stddev", stddev)):
            full = np.full(shape, np.nan, np.float64)
            full[defined] = result
            writer.write(key, block, full)
        full = np.full((len(levels),) + shape, np.nan, np.float64)
        full[:, defined] = quantiles
        writer.write(f"{name}_quantiles", block, full)
        writer.variables[f"{name}_quantiles"].attrs["quantile_method"] = out["quantile_method"]
        bar.add(int(np.prod(shape)))
