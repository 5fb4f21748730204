"""The normaliser of a model's data: the map between the data's units and the model's.

A model sees ``x_model = (x - x_offset) / x_scale`` and ``y_model = (y - y_offset) /
y_scale`` (per input and output dimension; ``[Dx]`` and ``[Dy]`` float64) and predicts in
those units; :class:`Normaliser` holds that affine map with what the numbers mean:
variable names and units, what ``x`` is (raw inputs, or inputs the task builds, such as a
window position), the date origin and frequency of a time series, the coordinate names of
a field or of stations, and the task (name and config) it came from.

It is saved inside the model file (the ``.keras`` file's ``config.json``, next to the
spec: :meth:`taylorformer.models.base.NeuralProcess.get_config`), so a model file copied
alone still maps raw data in to raw units out, and it is read without building the task
or the model (:func:`taylorformer.model_card.read_model_file`). A model file written
before normalisers were saved has none (``model.normaliser is None``): it works in the
model's units, as before.

Built from a task by :meth:`Normaliser.from_task`: ``y`` from ``task.to_original_units``
(checked affine), everything else from the task's optional ``data_description()`` (a
dict with any of ``x_offset``, ``x_scale``, ``x_names``, ``x_units``, ``x_is``,
``y_names``, ``y_units``, ``time``, ``coordinates``); a task without either (a simulated
task) gets the identity in its own units.

``coordinates`` also says how a field's grid coordinates become the model's inputs
(:func:`taylorformer.prediction.fields.field_inputs` reads it, never the task): ``span``,
the extent of the training inputs per input coordinate (coordinate units; a task's
``context_box`` where its description gives none) and ``extent``, their ``[lo, hi]`` (the
longitude convention a grid is wrapped to); and for inputs ``[space, window
time]`` with feature groups ``s``/``t`` (the ``gridded`` task): ``space`` (the spatial
coordinate names), ``space_inputs`` (``"xyz"``: latitude/longitude as unit vectors,
:func:`latlon_to_xyz`), ``geographic`` and ``time_input`` (the window-time input of the
most recent step). These entries are checked when read (:data:`FIELD_KEYS`).
"""
import dataclasses
import json
import math

import numpy as np

from taylorformer.errors import SpecError

#: the ``format`` of a saved normaliser dict (:meth:`Normaliser.to_dict`)
FORMAT = 1
#: what ``x`` is, for a task that gives no x normaliser
X_AS_BUILT = "the model's inputs as the task builds them (no affine map)"
#: batch keys of feature groups besides x (space/time positions) a task may give a model
GROUP_KEYS = ("sc", "tc", "st", "tt")
#: largest name/unit/description text kept, and the most dims a saved normaliser holds
MAX_TEXT = 1000
MAX_DIM = 4096
#: the ``coordinates`` entries predict_field reads, checked on every normaliser
FIELD_KEYS = ("span", "extent", "space", "space_inputs", "geographic", "time_input")


def latlon_to_xyz(latlon):
    """``[..., 2]`` (lat, lon) degrees -> ``[..., 3]`` unit vectors (float64): the inputs of
    a model trained with ``space="xyz"``."""
    latlon = np.asarray(latlon, np.float64)
    lat, lon = np.radians(latlon[..., 0]), np.radians(latlon[..., 1])
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)


def _check_field_entries(coordinates):
    """SpecError unless the :data:`FIELD_KEYS` of ``coordinates`` (where present) are:
    ``span`` 1 to MAX_DIM finite numbers >= 0 (0: one cell), ``extent`` as many finite
    ``[lo, hi]`` pairs with ``lo <= hi``, ``space`` 1 to MAX_DIM names, ``space_inputs``
    a text, ``geographic`` a bool, ``time_input`` a finite number."""
    def bad(key, what):
        raise SpecError(f"normaliser coordinates {key!r} must be {what}, got {coordinates[key]!r:.200}")

    span, space = coordinates.get("span"), coordinates.get("space")
    if span is not None:
        try:
            values = np.asarray(span, np.float64)
        except (TypeError, ValueError):
            bad("span", "a list of numbers >= 0")
        if values.ndim != 1 or not 1 <= values.size <= MAX_DIM or not np.all(np.isfinite(values)) \
                or np.any(values < 0):
            bad("span", "a list of finite numbers >= 0")
    extent = coordinates.get("extent")
    if extent is not None:
        try:
            pairs = np.asarray(extent, np.float64)
        except (TypeError, ValueError):
            bad("extent", "a list of [lo, hi] pairs")
        if pairs.ndim != 2 or pairs.shape[1] != 2 or not 1 <= len(pairs) <= MAX_DIM \
                or not np.all(np.isfinite(pairs)) or np.any(pairs[:, 0] > pairs[:, 1]):
            bad("extent", "a list of finite [lo, hi] pairs with lo <= hi")
    if space is not None and not (isinstance(space, list) and 1 <= len(space) <= MAX_DIM and all(
            isinstance(n, str) and 0 < len(n) <= MAX_TEXT for n in space)):
        bad("space", "a list of coordinate names")
    if coordinates.get("space_inputs") is not None and not (
            isinstance(coordinates["space_inputs"], str) and len(coordinates["space_inputs"]) <= MAX_TEXT):
        bad("space_inputs", "a text")
    if coordinates.get("geographic") is not None and not isinstance(coordinates["geographic"], bool):
        bad("geographic", "true or false")
    t = coordinates.get("time_input")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t)):
        bad("time_input", "a finite number")


def _probe_affine(to_units, dim, where):
    """``(offset, scale)`` float64 ``[dim]`` of the map ``to_units([..., dim])``, read at 0,
    1 and 2 and checked affine with nonzero finite scales; a SpecError otherwise."""
    zero = np.asarray(to_units(np.zeros((1, dim))), np.float64).reshape(-1)
    one = np.asarray(to_units(np.ones((1, dim))), np.float64).reshape(-1)
    two = np.asarray(to_units(np.full((1, dim), 2.0)), np.float64).reshape(-1)
    scale = one - zero
    if zero.shape != (dim,) or not np.allclose(two, zero + 2 * scale, rtol=1e-9, atol=1e-12) \
            or not np.all(np.isfinite(scale)) or np.any(scale == 0):
        raise SpecError(f"{where}: to_original_units is not an invertible affine map per output "
                        "(y * scale + offset)")
    return zero, scale


def default_names(prefix, dim):
    """``[prefix]`` for one dim, else ``prefix0, prefix1, ...`` (the query files' names)."""
    return [prefix] if dim == 1 else [f"{prefix}{i}" for i in range(dim)]


def label(name, unit):
    """``"name [unit]"``, or the name alone without a unit."""
    return f"{name} [{unit}]" if unit else str(name)


@dataclasses.dataclass
class Normaliser:
    """The affine map between data units and model units, with names and units.

    ``x_offset``, ``x_scale`` ``[Dx]``; ``y_offset``, ``y_scale`` ``[Dy]`` (float64, finite,
    scales > 0); ``x_names``/``y_names`` one text per dim; ``x_units``/``y_units`` one text
    or None per dim; ``x_is`` what the inputs are; ``time`` (a series' ``origin``,
    ``frequency``, ...) and ``coordinates`` (a field's or stations' coordinate names) dicts
    or None; ``task`` ``{"name", "config"}`` or None.
    """

    x_offset: np.ndarray
    x_scale: np.ndarray
    y_offset: np.ndarray
    y_scale: np.ndarray
    x_names: list
    y_names: list
    x_units: list
    y_units: list
    x_is: str = "raw inputs"
    time: dict = None
    coordinates: dict = None
    task: dict = None
    groups: list = None

    def __post_init__(self):
        for key in ("x_offset", "x_scale", "y_offset", "y_scale"):
            value = np.asarray(getattr(self, key), np.float64).reshape(-1)
            if not np.all(np.isfinite(value)) or ("scale" in key and np.any(value <= 0)):
                raise SpecError(f"normaliser {key!r} must be finite numbers"
                                f"{' > 0' if 'scale' in key else ''}, got {value.tolist()!r:.200}")
            setattr(self, key, value)
        for side in "xy":
            dim = getattr(self, f"{side}_offset").size
            if not 1 <= dim <= MAX_DIM or getattr(self, f"{side}_scale").size != dim:
                raise SpecError(f"normaliser {side}_offset and {side}_scale must be 1 to {MAX_DIM} numbers "
                                f"each, got {dim} and {getattr(self, f'{side}_scale').size}")
            names = getattr(self, f"{side}_names")
            units = getattr(self, f"{side}_units")
            if not (isinstance(names, (list, tuple)) and len(names) == dim
                    and all(isinstance(n, str) and 0 < len(n) <= MAX_TEXT for n in names)):
                raise SpecError(f"normaliser {side}_names must be {dim} non-empty names, got {names!r:.200}")
            if not (isinstance(units, (list, tuple)) and len(units) == dim
                    and all(u is None or (isinstance(u, str) and len(u) <= MAX_TEXT) for u in units)):
                raise SpecError(f"normaliser {side}_units must be {dim} unit texts or None, got {units!r:.200}")
            setattr(self, f"{side}_names", [str(n) for n in names])
            setattr(self, f"{side}_units", [u or None for u in units])
        if not (isinstance(self.x_is, str) and len(self.x_is) <= MAX_TEXT):
            raise SpecError(f"normaliser x_is must be a text, got {self.x_is!r:.200}")
        for key in ("time", "coordinates", "task"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, dict):
                raise SpecError(f"normaliser {key!r} must be a dict or None, got {value!r:.200}")
        if self.coordinates:
            _check_field_entries(self.coordinates)
        groups = list(self.groups or [])
        if not all(g in GROUP_KEYS for g in groups):
            raise SpecError(f"normaliser groups must be among {list(GROUP_KEYS)}, got {self.groups!r:.200}")
        self.groups = groups

    # ------------------------------------------------------------------ dims
    @property
    def dim_x(self):
        return int(self.x_offset.size)

    @property
    def dim_y(self):
        return int(self.y_offset.size)

    @property
    def identity_x(self):
        """Whether the model's inputs are the data's (offset 0, scale 1)."""
        return bool(np.all(self.x_offset == 0) and np.all(self.x_scale == 1))

    @property
    def identity_y(self):
        """Whether the model's outputs are in the data's units (offset 0, scale 1)."""
        return bool(np.all(self.y_offset == 0) and np.all(self.y_scale == 1))

    # ------------------------------------------------------------------ the maps
    def x_to_model(self, x):
        """``[..., Dx]`` data inputs -> model inputs ``(x - x_offset) / x_scale`` (float64)."""
        return (np.asarray(x, np.float64) - self.x_offset) / self.x_scale

    def x_from_model(self, x):
        """``[..., Dx]`` model inputs -> data inputs ``x * x_scale + x_offset`` (float64)."""
        return np.asarray(x, np.float64) * self.x_scale + self.x_offset

    def y_to_model(self, y):
        """``[..., Dy]`` data values -> model values ``(y - y_offset) / y_scale`` (float64;
        NaN, a missing value, stays NaN)."""
        return (np.asarray(y, np.float64) - self.y_offset) / self.y_scale

    def y_from_model(self, y):
        """``[..., Dy]`` model values (means, quantiles, samples) -> data units (float64)."""
        return np.asarray(y, np.float64) * self.y_scale + self.y_offset

    def spread_from_model(self, s):
        """``[..., Dy]`` model-unit spreads (standard deviations, absolute errors) -> data
        units: ``s * y_scale`` (float64)."""
        return np.asarray(s, np.float64) * self.y_scale

    def log_scale(self):
        """``[Dy]`` ``log(y_scale)``: a log density in data units is the model's minus the
        sum of these over the observed outputs (change of variables)."""
        return np.log(self.y_scale)

    # ------------------------------------------------------------------ labels
    def x_labels(self):
        """``"name [unit]"`` per input."""
        return [label(n, u) for n, u in zip(self.x_names, self.x_units)]

    def y_labels(self):
        """``"name [unit]"`` per output."""
        return [label(n, u) for n, u in zip(self.y_names, self.y_units)]

    # ------------------------------------------------------------------ JSON
    def to_dict(self):
        """JSON-ready dict (lists of floats): what the model file holds. Its ``x_offset``,
        ``x_scale``, ``y_offset``, ``y_scale``, ``x_names``, ``y_names`` and ``x_is`` are
        those SavedModels written by :func:`taylorformer.prediction.export.export_model` hold."""
        return {"format": FORMAT, "x_offset": self.x_offset.tolist(), "x_scale": self.x_scale.tolist(),
                "y_offset": self.y_offset.tolist(), "y_scale": self.y_scale.tolist(),
                "x_names": list(self.x_names), "y_names": list(self.y_names),
                "x_units": list(self.x_units), "y_units": list(self.y_units), "x_is": self.x_is,
                "time": self.time, "coordinates": self.coordinates, "task": self.task,
                "groups": list(self.groups)}

    @classmethod
    def from_dict(cls, data, where="normaliser"):
        """The normaliser of a :meth:`to_dict` dict (read from a file: every field checked,
        a SpecError naming ``where`` and the field otherwise). Missing names and units
        get the defaults."""
        if not isinstance(data, dict):
            raise SpecError(f"{where}: must be a JSON object, got {type(data).__name__}")
        if data.get("format", FORMAT) != FORMAT:
            raise SpecError(f"{where}: format {data.get('format')!r} is not one this taylorformer reads "
                            f"({FORMAT}); upgrade taylorformer")
        try:
            arrays = {k: np.asarray(data[k], np.float64).reshape(-1)
                      for k in ("x_offset", "x_scale", "y_offset", "y_scale")}
        except KeyError as exc:
            raise SpecError(f"{where}: no {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where}: offsets and scales must be lists of numbers ({exc})") from None
        dx, dy = arrays["x_offset"].size, arrays["y_offset"].size
        if max(dx, dy) > MAX_DIM:
            raise SpecError(f"{where}: more than {MAX_DIM} dims")
        try:
            return cls(**arrays,
                       x_names=data.get("x_names") or default_names("x", dx),
                       y_names=data.get("y_names") or default_names("y", dy),
                       x_units=data.get("x_units") or [None] * dx, y_units=data.get("y_units") or [None] * dy,
                       x_is=data.get("x_is", "raw inputs"), time=data.get("time"),
                       coordinates=data.get("coordinates"), task=data.get("task"),
                       groups=data.get("groups"))
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None

    # ------------------------------------------------------------------ building
    @classmethod
    def identity(cls, dim_x, dim_y, task=None):
        """Data units are model units: offsets 0, scales 1, default names, no units."""
        return cls(np.zeros(dim_x), np.ones(dim_x), np.zeros(dim_y), np.ones(dim_y),
                   default_names("x", dim_x), default_names("y", dim_y), [None] * dim_x, [None] * dim_y,
                   x_is=X_AS_BUILT, task=task)

    @classmethod
    def from_task(cls, task, dim_x, dim_y):
        """The normaliser of ``task``'s data (see the module docstring); the identity for
        ``task=None``."""
        if task is None:
            return cls.identity(dim_x, dim_y)
        where = f"task {getattr(task, 'name', type(task).__name__)!r}"
        task_info = task_info_of(task)
        if callable(getattr(task, "to_original_units", None)):
            y_offset, y_scale = _probe_affine(task.to_original_units, dim_y, where)
        else:
            y_offset, y_scale = np.zeros(dim_y), np.ones(dim_y)
        if np.any(y_scale < 0):
            raise SpecError(f"{where}: to_original_units flips the sign of an output (scale "
                            f"{y_scale.tolist()}); a normaliser needs positive scales")
        info = task.data_description() if callable(getattr(task, "data_description", None)) else {}
        x_offset = np.asarray(info.get("x_offset", np.zeros(dim_x)), np.float64)
        x_scale = np.asarray(info.get("x_scale", np.ones(dim_x)), np.float64)
        if x_offset.shape != (dim_x,) or x_scale.shape != (dim_x,):
            raise SpecError(f"{where}: data_description() x_offset/x_scale must be [{dim_x}], got "
                            f"{x_offset.shape} and {x_scale.shape}")
        x_is = info.get("x_is", "raw inputs" if "x_offset" in info else X_AS_BUILT)
        extra = task.extra_signature() if callable(getattr(task, "extra_signature", None)) else {}
        groups = [k for k in GROUP_KEYS if k in extra]
        coordinates = dict(info.get("coordinates") or {})
        box = getattr(task, "context_box", None)
        if "span" not in coordinates and box is not None and np.shape(box) == (dim_x, 2):
            coordinates["span"] = [float(hi - lo) for lo, hi in np.asarray(box, np.float64)]
        return cls(x_offset, x_scale, y_offset, y_scale,
                   x_names=info.get("x_names") or default_names("x", dim_x),
                   y_names=info.get("y_names") or default_names("y", dim_y),
                   x_units=info.get("x_units") or [None] * dim_x, y_units=info.get("y_units") or [None] * dim_y,
                   x_is=x_is, time=jsonable(info.get("time")), coordinates=jsonable(coordinates or None),
                   task=jsonable(task_info), groups=groups)

    # ------------------------------------------------------------------ text
    def describe(self):
        """Plain-text lines: one per input and output (name, unit, offset, scale), then
        what x is, the time axis and the coordinates."""
        lines = ["inputs (model x = (x - offset) / scale):"]
        for name, unit, o, s in zip(self.x_names, self.x_units, self.x_offset, self.x_scale):
            lines.append(f"  {label(name, unit):<32} offset {o:<12.6g} scale {s:.6g}")
        lines.append(f"  x is: {self.x_is}")
        lines.append("outputs (model y = (y - offset) / scale):")
        for name, unit, o, s in zip(self.y_names, self.y_units, self.y_offset, self.y_scale):
            lines.append(f"  {label(name, unit):<32} offset {o:<12.6g} scale {s:.6g}")
        if self.time:
            lines.append("time: " + ", ".join(f"{k} {v}" for k, v in self.time.items() if v is not None))
        if self.coordinates:
            lines.append("coordinates: " + ", ".join(f"{k} {v}" for k, v in self.coordinates.items()
                                                     if v is not None))
        if self.groups:
            lines.append(f"feature groups besides x: {', '.join(self.groups)} (space/time positions)")
        if self.task:
            lines.append(f"task: {self.task.get('name')} {json.dumps(self.task.get('config'), default=str)}")
        return lines


def task_info_of(task):
    """``{"name", "config"}`` of a task object: its ``name`` (else its class name) and its
    ``get_config()`` where that is JSON (None otherwise: in-memory data)."""
    config = task.get_config() if callable(getattr(task, "get_config", None)) else None
    try:
        json.dumps(config)
    except (TypeError, ValueError):
        config = None
    return {"name": getattr(task, "name", None) or type(task).__name__, "config": config}


def jsonable(value):
    """``value`` through a JSON round trip (NumPy numbers and dates as text); None stays None."""
    if value is None:
        return None

    def default(v):
        if isinstance(v, np.generic):
            return v.item() if not isinstance(v, np.datetime64) else str(v)
        if isinstance(v, np.ndarray):
            return v.tolist()
        return str(v)

    return json.loads(json.dumps(value, default=default, allow_nan=True),
                      parse_constant=lambda c: None)


def series_time(dates, timezone=None, column=None, **extra):
    """The ``time`` dict of a series with ``dates [n]`` (datetime64, UTC where ``timezone``):
    ``origin`` (first date), ``end`` (last), ``frequency`` (pandas' inferred frequency, else
    the median step), ``timezone``, ``column`` and ``extra`` entries; None without dates."""
    import pandas as pd

    if dates is None or len(dates) == 0:
        return None
    index = pd.DatetimeIndex(dates)
    frequency = None
    if len(index) >= 3:
        try:
            frequency = pd.infer_freq(index)
        except (TypeError, ValueError):
            frequency = None
    if frequency is None and len(index) >= 2:
        step = pd.Series(index).diff().median()
        frequency = None if pd.isna(step) else str(pd.Timedelta(step))
    out = {"origin": str(index[0]), "end": str(index[-1]), "frequency": frequency,
           "timezone": timezone, "column": column, **extra}
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}
