"""Maps of a predicted field (:func:`taylorformer.prediction.fields.predict_field`'s output): the truth
(where the file has the field) beside the predictive mean, then the predictive stddev.

Longitude or easting (or the grid's ``X`` axis) is horizontal, latitude or northing
vertical, identified by CF names, units and attributes
(:func:`taylorformer.coordinates.map_axis`); cells where the field is undefined (NaN: land
in a sea-surface field) are left blank; axes and colour bars carry the coordinates' and the
variable's names and units, with at most :data:`MAX_TICKS` ticks a side (long projected
coordinates do not overlap). The context points (stations) are drawn on every map: those
the file records (``context_<coordinate>``) or those given. A grid larger than
``max_side`` cells per dim is drawn at a stride (read that way: the file is never loaded
whole). Built with matplotlib's object-oriented API (no pyplot state)::

    fig = plot_field("out.nc")
    fig.savefig("out.png")
"""
import os

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from taylorformer.coordinates import map_axis
from taylorformer.errors import BatchError

#: most tick labels per map axis
MAX_TICKS = 5


def _label(var, fallback):
    name = var.attrs.get("long_name") or var.attrs.get("standard_name") or fallback
    units = var.attrs.get("units")
    return f"{name} [{units}]" if units else str(name)


def _axes_order(ds, dims):
    """``(horizontal dim, vertical dim)`` of a 2-D variable: longitude/easting across,
    latitude/northing up (:func:`~taylorformer.coordinates.map_axis`); else the last dim
    that is not vertical across."""
    axes = {d: map_axis(d, ds[d].attrs if d in ds.coords else {}) for d in dims}
    across = [d for d in dims if axes[d] == "X"] or [d for d in dims if axes[d] != "Y"][-1:]
    horizontal = across[0] if across else dims[-1]
    return horizontal, next(d for d in dims if d != horizontal)


def _stations(ds, horizontal, vertical, context, where):
    """``(x [N], y [N])`` of the context points to draw: ``context`` (a ``DataFrame``, a
    mapping or a CSV path, with columns named as the two coordinates), else the ones the
    file records (``context_<coordinate>``); None where neither has them."""
    if context is None:
        keys = [f"context_{horizontal}", f"context_{vertical}"]
        return tuple(np.asarray(ds[k].values, np.float64) for k in keys) if all(k in ds.variables for k in keys) \
            else None
    if isinstance(context, (str, os.PathLike)):
        import pandas as pd

        context = pd.read_csv(context)
    missing = [n for n in (horizontal, vertical) if n not in context]
    if missing:
        raise BatchError(f"{where}: the context points to draw have no column(s) {missing} (the map's coordinates)")
    return tuple(np.asarray(context[n], np.float64) for n in (horizontal, vertical))


def plot_field(source, variable=None, max_side=1000, title=None, context=None):
    """The Figure of the maps of ``source`` (a path or ``xarray.Dataset`` written by
    :func:`~taylorformer.prediction.fields.predict_field`); ``variable``: the field's name (default:
    the one with a ``_mean`` variable); ``context``: the points to mark (:func:`_stations`;
    default: those the file records)."""
    import xarray as xr

    if isinstance(source, (str, os.PathLike)):
        try:
            ds = xr.open_dataset(source)
        except Exception as exc:  # noqa: BLE001 the netCDF backends raise many types
            raise BatchError(f"cannot read {source} as netCDF: {type(exc).__name__}: {exc}") from None
    else:
        ds = source
    where = str(source) if isinstance(source, (str, os.PathLike)) else "the dataset"
    try:
        means = [str(v)[:-5] for v in ds.data_vars if str(v).endswith("_mean")]
        if variable is None:
            if len(means) != 1:
                raise BatchError(f"{where}: {len(means)} predicted fields (variables *_mean: {means}); name one")
            variable = means[0]
        if f"{variable}_mean" not in ds.data_vars:
            raise BatchError(f"{where} has no predicted field {variable!r} (no {variable}_mean); fields: {means}")
        mean = ds[f"{variable}_mean"]
        if mean.ndim != 2:
            raise BatchError(f"{where}: {variable}_mean has dims {list(mean.dims)}; a map needs a 2-D grid")
        if not np.isfinite(mean.values).any():
            raise BatchError(f"{where}: every cell of {variable}_mean is NaN or infinite: no map to draw")
        horizontal, vertical = _axes_order(ds, list(mean.dims))
        stride = {d: max(1, -(-ds.sizes[d] // max_side)) for d in mean.dims}
        pick = {d: slice(None, None, s) for d, s in stride.items()}
        panels = [(variable, "truth")] if variable in ds.data_vars and ds[variable].dims == mean.dims else []
        panels += [(f"{variable}_mean", "predictive mean"), (f"{variable}_stddev", "predictive stddev")]
        fig = Figure(figsize=(5.2 * len(panels), 4.2), layout="constrained")
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        arrays = {key: ds[key].isel(pick).transpose(vertical, horizontal) for key, _ in panels}
        shared = [np.asarray(arrays[k].values, np.float64) for k, _ in panels if not k.endswith("_stddev")]
        finite = np.concatenate([a[np.isfinite(a)] for a in shared]) if shared else np.zeros(0)
        limits = (finite.min(), finite.max()) if finite.size else (None, None)
        x = ds[horizontal].isel({horizontal: pick[horizontal]}) if horizontal in ds.coords else None
        y = ds[vertical].isel({vertical: pick[vertical]}) if vertical in ds.coords else None
        stations = _stations(ds, horizontal, vertical, context, where) if x is not None and y is not None else None
        for ax, (key, label) in zip(axes, panels):
            values = np.ma.masked_invalid(np.asarray(arrays[key].values, np.float64))  # blank where undefined
            scale = (None, None) if key.endswith("_stddev") else limits
            image = ax.pcolormesh(np.arange(values.shape[1]) if x is None else np.asarray(x.values),
                                  np.arange(values.shape[0]) if y is None else np.asarray(y.values),
                                  values, shading="auto", cmap="magma" if key.endswith("_stddev") else "viridis",
                                  vmin=scale[0], vmax=scale[1])
            ax.set_title(label, fontsize=9)
            ax.set_xlabel(_label(x, horizontal) if x is not None else horizontal)
            ax.set_ylabel(_label(y, vertical) if y is not None else vertical)
            ax.xaxis.set_major_locator(MaxNLocator(MAX_TICKS - 1))  # nbins: at most MAX_TICKS ticks
            ax.yaxis.set_major_locator(MaxNLocator(MAX_TICKS - 1))
            ax.tick_params(axis="x", labelrotation=30)
            if stations is not None:  # on the grid's extent: points outside it are not drawn
                limits_xy = ax.get_xlim(), ax.get_ylim()
                ax.scatter(*stations, s=12, c="white", edgecolors="black", linewidths=0.6, zorder=3,
                           label=f"context ({len(stations[0])} points)")
                ax.set(xlim=limits_xy[0], ylim=limits_xy[1])
            fig.colorbar(image, ax=ax, label=_label(ds[key], key))
        if any(s > 1 for s in stride.values()):
            fig.text(0.01, 0.01, "drawn every " + ", ".join(f"{stride[d]} {d}" for d in mean.dims) + " cells",
                     fontsize=7)
        if title:
            fig.suptitle(title)
        return fig
    finally:
        if isinstance(source, (str, os.PathLike)):
            ds.close()


def save_field_plot(source, out, variable=None, max_side=1000):
    """Draw :func:`plot_field` to the image ``out`` (``.png``, or another type of
    :func:`~taylorformer.plotting.saving.image_formats`; written atomically); returns ``out``."""
    from taylorformer.files import check_extension
    from taylorformer.plotting.saving import image_formats, save_figure

    check_extension(out, "field plot", image_formats())
    return save_figure(plot_field(source, variable, max_side), out)
