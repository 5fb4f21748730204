"""Image completion plots: context, observed pixels, predictive mean, stddev and samples.

Inputs are pixel coordinates in ``[-1, 1]^2`` on an ``H x W`` grid (row-major; ``x[..., 0]``
the row, ``x[..., 1]`` the column: :func:`taylorformer.pixel_grid.pixel_coordinates` and
its inverse :func:`~taylorformer.pixel_grid.pixel_indices`); outputs ``C`` = 1 (grey) or 3
(RGB) intensities in ``value_range``; a NaN output is a missing pixel value
(:func:`taylorformer.batch.with_masks`), drawn in :data:`MISSING_COLOUR`.
Built with matplotlib's object-oriented API: importing or calling this never changes the
user's backend::

    fig = plot_image_completion(model, batch, (28, 28), num_tasks=3, num_samples=2)
    fig.savefig("completion.png")
"""
import numpy as np
from matplotlib.figure import Figure

from taylorformer.batch import with_masks, with_targets
from taylorformer.checks import check_int
from taylorformer.models.inference import predict
from taylorformer.pixel_grid import pixel_coordinates, pixel_indices

#: RGB of pixels a panel has no value for (not in the context / not observed): a muted
#: blue that no grey intensity takes
MASK_COLOUR = (0.42, 0.55, 0.72)
#: RGB of pixels drawn as context or target whose value is missing (NaN): orange
MISSING_COLOUR = (0.93, 0.45, 0.13)
FIXED_PANELS = ("context", "observed", "predictive mean", "predictive stddev")


def to_rgb(values, known, shape, value_range, missing=None):
    """``[H, W, 3]`` RGB in [0, 1] of pixel values ``[H * W, C]`` in ``value_range`` (clipped),
    :data:`MASK_COLOUR` where ``known [H * W]`` is false and :data:`MISSING_COLOUR` where
    ``missing [H * W]`` (optional) is true."""
    lo, hi = value_range
    unit = np.clip((np.asarray(values, np.float64) - lo) / (hi - lo), 0.0, 1.0)
    rgb = np.repeat(unit, 3, axis=-1) if unit.shape[-1] == 1 else unit
    rgb = np.where(known[:, None], rgb, np.asarray(MASK_COLOUR))
    if missing is not None:
        rgb = np.where(missing[:, None], np.asarray(MISSING_COLOUR), rgb)
    return rgb.reshape(shape[0], shape[1], 3)


def plot_image_completion(model, batch, image_shape, num_tasks=4, num_samples=0,
                          value_range=(-0.5, 0.5), title=None, axes=None, seed=0):
    """Per task (one row), side by side: the context (pixels outside it in
    :data:`MASK_COLOUR`), the observed pixels (context and targets; in both panels a
    drawn pixel whose value is missing, NaN, in :data:`MISSING_COLOUR`), the predictive mean,
    the predictive stddev (mean over channels, its own colour scale) and ``num_samples``
    samples; returns the Figure.

    A conditional model is queried at every pixel of the ``image_shape = (H, W)`` grid
    (its predictive is defined anywhere); an autoregressive one (``model.causal``) at the
    batch's targets only, from joint samples (the other pixels in the mask colour).
    ``axes``: ``num_tasks x (4 + num_samples)`` axes to draw into.
    """
    check_int("plot", "num_tasks", num_tasks)
    check_int("plot", "num_samples", num_samples, minimum=0)
    shape = tuple(check_int("plot", "image_shape", s, minimum=2) for s in image_shape)
    raw = {k: np.asarray(v) for k, v in batch.items()}
    batch = {k: np.asarray(v) for k, v in with_masks(batch).items()}
    n = min(num_tasks, batch["xt"].shape[0])
    # [n, N] real points whose value is missing: with_masks set their masks to 0
    missing = {side: (np.isnan(raw[y_key]).any(-1) & (raw.get(m_key, 1.0) > 0))[:n]
               for side, y_key, m_key in (("c", "yc", "mask_c"), ("t", "yt", "mask_t"))}
    batch = {k: v[:n] for k, v in batch.items()}
    if batch["xt"].shape[-1] != 2:
        raise ValueError(f"plot_image_completion needs 2-D pixel inputs; this batch has dim_x={batch['xt'].shape[-1]}")
    causal = getattr(model, "causal", False)
    if causal:
        query = batch
    else:
        grid = np.broadcast_to(pixel_coordinates(shape), (n, shape[0] * shape[1], 2))
        query = with_targets(batch, xt=np.ascontiguousarray(grid),
                             yt=np.zeros(grid.shape[:2] + batch["yt"].shape[2:], np.float32),
                             mask_t=np.ones(grid.shape[:2], np.float32))
    out = {k: np.asarray(v) for k, v in predict(model, query, num_samples=num_samples, seed=seed).items()}
    fig, rows = _figure(axes, n, len(FIXED_PANELS) + num_samples)
    for i in range(n):
        _plot_task(fig, rows[i], batch, query, out, missing, i, shape, value_range, num_samples)
    if title:
        fig.suptitle(title)
    return fig


def _scatter(x, y, mask, shape, dim_y):
    """``(values [H * W, C], known [H * W])`` with the real points of one task written in."""
    values = np.zeros((shape[0] * shape[1], dim_y))
    known = np.zeros(shape[0] * shape[1], bool)
    idx = pixel_indices(x[mask > 0], shape)
    values[idx], known[idx] = y[mask > 0], True
    return values, known


def _pixels(x, flags, shape):
    """``[H * W]`` bool: the pixels at the inputs ``x [N, 2]`` where ``flags [N]`` is true."""
    out = np.zeros(shape[0] * shape[1], bool)
    out[pixel_indices(x[flags], shape)] = True
    return out


def _plot_task(fig, row, batch, query, out, missing, i, shape, value_range, num_samples):
    dim_y = batch["yc"].shape[-1]
    context = _scatter(batch["xc"][i], batch["yc"][i], batch["mask_c"][i], shape, dim_y)
    targets = _scatter(batch["xt"][i], batch["yt"][i], batch["mask_t"][i], shape, dim_y)
    observed = (np.where(context[1][:, None], context[0], targets[0]), context[1] | targets[1])
    missing_c = _pixels(batch["xc"][i], missing["c"][i], shape)
    missing_all = missing_c | _pixels(batch["xt"][i], missing["t"][i], shape)
    panels = [("context", context, missing_c), ("observed", observed, missing_all),
              ("predictive mean", _scatter(query["xt"][i], out["mean"][i], query["mask_t"][i], shape, dim_y), None)]
    panels += [(f"sample {s + 1}", _scatter(query["xt"][i], out["samples"][s, i], query["mask_t"][i], shape, dim_y),
                None) for s in range(num_samples)]
    extent = (-1.0, 1.0, 1.0, -1.0)  # columns left to right, rows top to bottom
    for ax, (label, (values, known), gaps) in zip(list(row[:3]) + list(row[4:]), panels):
        ax.imshow(to_rgb(values, known, shape, value_range, gaps), extent=extent, interpolation="nearest")
        _label(ax, label + (" (orange: missing)" if gaps is not None and gaps.any() else ""))
    std, known = _scatter(query["xt"][i], out["stddev"][i], query["mask_t"][i], shape, dim_y)
    std = np.ma.masked_array(std.mean(-1), ~known).reshape(shape)
    image = row[3].imshow(std, extent=extent, interpolation="nearest", cmap="viridis")
    _label(row[3], "predictive stddev" + (" (mean of channels)" if dim_y > 1 else ""))
    fig.colorbar(image, ax=row[3], fraction=0.046, pad=0.04)


def _label(ax, title):
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("x[1] (column)", fontsize=7)
    ax.set_ylabel("x[0] (row)", fontsize=7)
    ax.tick_params(labelsize=6)


def _figure(axes, n, cols):
    """``(figure, rows of axes)``: the given axes' figure, or a new Figure."""
    if axes is None:
        fig = Figure(figsize=(2.3 * cols, 2.3 * n), layout="tight")
        return fig, fig.subplots(n, cols, squeeze=False)
    rows = np.asarray(axes, dtype=object).reshape(-1, cols) if np.size(axes) % cols == 0 else None
    if rows is None or len(rows) < n:
        raise ValueError(f"plot_image_completion: {n} task(s) need {n} x {cols} axes, got {np.size(axes)}")
    return rows[0, 0].figure, rows
