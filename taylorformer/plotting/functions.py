"""Function plots: 1-D predictive bands on a dense grid, 2-D mean/stddev maps.

Figures are built with matplotlib's object-oriented API (``matplotlib.figure.Figure``),
so importing or calling this module never changes the user's backend or pyplot state.
Every function returns the Figure and draws into the axes it is given, if any::

    fig = plot_predictions(model, batch, num_tasks=4)
    fig.savefig("predictions.png")
    plot_predictions(model, batch, num_tasks=2, axes=my_axes)  # into a figure of yours
"""
import numpy as np
from matplotlib.figure import Figure

from taylorformer.batch import with_masks, with_targets
from taylorformer.checks import check_int
from taylorformer.models.inference import predict

#: 95% central interval of a Gaussian
Z95 = 1.96


def plot_predictions(model, batch, num_tasks=4, num_samples=0, title=None, axes=None,
                     grid_points=200, seed=0, reference=None):
    """Plot the first ``num_tasks`` tasks of ``batch``; returns the Figure.

    1-D inputs (one row of axes per task): context points, true targets, and the
    predictive mean with its 95% band. A conditional model is evaluated on a dense grid
    of ``grid_points`` inputs spanning the task's context and targets (its predictive at
    any input); an autoregressive model at the target inputs, from joint samples (a
    sample on a dense grid would take one step per grid point). ``num_samples``: sample
    paths to draw (joint paths for autoregressive models, independent per-point draws,
    shown as dots, for conditional ones). 2-D inputs: maps of the predictive mean and
    stddev at the targets (two axes per task), context locations marked.
    ``axes``: ``num_tasks`` axes (1-D) or ``num_tasks x 2`` (2-D) to draw into.
    ``reference``: for 1-D, a function ``(i, x [G, 1]) -> (mean [G], stddev [G])`` of a
    known predictive (e.g. the exact GP of a GP task), drawn dashed beside the model's.

    Drawn in the data's units where the model has a normaliser (``model.normaliser``,
    :mod:`taylorformer.normaliser`: ``batch`` is in the model's units, as a task gives
    it), axes labelled with the variables' names and units; a 2-D map whose inputs are
    (latitude, longitude) puts longitude on the horizontal axis.
    """
    check_int("plot", "num_tasks", num_tasks)
    check_int("plot", "num_samples", num_samples, minimum=0)
    check_int("plot", "grid_points", grid_points, minimum=2)
    batch = {k: np.asarray(v) for k, v in with_masks(batch).items()}
    n = min(num_tasks, batch["xt"].shape[0])
    batch = {k: v[:n] for k, v in batch.items()}
    dim_x = batch["xt"].shape[-1]
    if dim_x not in (1, 2):
        raise ValueError(f"plots support 1-D and 2-D inputs; this batch has dim_x={dim_x}")
    fig, axes = _figure(axes, n, dim_x)
    units = _Units(getattr(model, "normaliser", None), dim_x, batch["yt"].shape[-1])
    if dim_x == 1:
        causal = getattr(model, "causal", False)
        xs = batch["xt"] if causal else dense_grid(batch, grid_points)
        query = with_targets(batch, xt=xs, yt=np.zeros(xs.shape[:2] + batch["yt"].shape[2:], np.float32),
                             mask_t=batch["mask_t"] if causal else np.ones(xs.shape[:2], np.float32))
        out = {k: np.asarray(v) for k, v in predict(model, query, num_samples=num_samples, seed=seed).items()}
        shown, query, out = units.batch(batch), units.batch(query), units.result(out)
        for i in range(n):
            _plot_1d(axes[i][0], shown, query, out, i, joint=causal, labels=units.labels)
            if reference is not None:
                _plot_reference(axes[i][0], query, i, units.reference(reference))
    else:
        out = units.result({k: np.asarray(v) for k, v in predict(model, batch).items()})
        shown = units.batch(batch)
        for i in range(n):
            _plot_2d(fig, axes[i], shown, out, i, labels=units.labels, swap=units.lon_lat)
    if title:
        fig.suptitle(title)
    return fig


class _Units:
    """The maps of a plot from the model's units to the data's (identity without a
    normaliser) and the axis labels: ``labels = (x labels, y labels)``."""

    def __init__(self, normaliser, dim_x, dim_y):
        if normaliser is not None and (normaliser.dim_x, normaliser.dim_y) != (dim_x, dim_y):
            normaliser = None
        self.normaliser = normaliser
        if normaliser is None:
            self.labels = (["x"] if dim_x == 1 else [f"x{i + 1}" for i in range(dim_x)],
                           ["y"] if dim_y == 1 else [f"y{j}" for j in range(dim_y)])
        else:
            self.labels = (normaliser.x_labels(), normaliser.y_labels())
        names = [n.lower() for n in (normaliser.x_names if normaliser else ())]
        self.lon_lat = len(names) >= 2 and names[0].startswith("lat") and names[1].startswith("lon")

    def batch(self, batch):
        if self.normaliser is None:
            return batch
        out = dict(batch)
        for key in ("xc", "xt"):
            out[key] = self.normaliser.x_from_model(batch[key])
        for key in ("yc", "yt"):
            out[key] = self.normaliser.y_from_model(batch[key])
        return out

    def result(self, out):
        if self.normaliser is None:
            return out
        mapped = {k: self.normaliser.y_from_model(v) for k, v in out.items() if k in ("mean", "samples")}
        return {**out, **mapped, "stddev": self.normaliser.spread_from_model(out["stddev"])}

    def reference(self, reference):
        """``reference`` (model units) taking and giving the data's units."""
        if self.normaliser is None:
            return reference
        norm = self.normaliser

        def mapped(i, xs):
            mean, std = reference(i, norm.x_to_model(xs).astype(np.float32))
            return (norm.y_from_model(np.asarray(mean)[:, None])[:, 0],
                    norm.spread_from_model(np.asarray(std)[:, None])[:, 0])

        return mapped


def dense_grid(batch, grid_points):
    """``[B, G, 1]`` evenly spaced inputs per task over its real context and target
    inputs, widened by 5% on each side."""
    grids = []
    for i in range(batch["xt"].shape[0]):
        xs = np.concatenate([batch["xc"][i, batch["mask_c"][i] > 0, 0], batch["xt"][i, batch["mask_t"][i] > 0, 0]])
        lo, hi = xs.min(), xs.max()
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        grids.append(np.linspace(lo - pad, hi + pad, grid_points))
    return np.stack(grids)[..., None].astype(np.float32)


def _figure(axes, n, dim_x):
    """``(figure, rows of axes)``: the given axes' figure, or a new Figure."""
    cols = 1 if dim_x == 1 else 2
    if axes is None:
        fig = Figure(figsize=(9, 2.6 * n) if dim_x == 1 else (10, 4.2 * n), layout="tight")
        return fig, fig.subplots(n, cols, squeeze=False)
    rows = np.asarray(axes, dtype=object).reshape(-1, cols)
    if len(rows) < n:
        raise ValueError(f"plot_predictions: {n} task(s) need {n * cols} axes, got {rows.size}")
    return rows[0, 0].figure, rows


def _plot_1d(ax, batch, query, out, i, joint, labels=(["x"], ["y"])):
    mc, mt, mq = batch["mask_c"][i] > 0, batch["mask_t"][i] > 0, query["mask_t"][i] > 0
    xq = query["xt"][i, mq, 0]
    order = np.argsort(xq)
    xs = xq[order]
    mean, std = out["mean"][i, mq, 0][order], out["stddev"][i, mq, 0][order]
    ax.fill_between(xs, mean - Z95 * std, mean + Z95 * std, color="tab:blue", alpha=0.25,
                    label="95% band")
    ax.plot(xs, mean, color="tab:blue", lw=1.5, label="predictive mean")
    for s in out.get("samples", np.zeros((0,)))[:5]:
        if joint:
            ax.plot(xs, s[i, mq, 0][order], color="tab:purple", lw=0.6, alpha=0.7)
        else:
            ax.scatter(xs, s[i, mq, 0][order], s=2, color="tab:purple", alpha=0.5)
    ax.scatter(batch["xt"][i, mt, 0], batch["yt"][i, mt, 0], s=8, color="tab:gray", label="targets")
    ax.scatter(batch["xc"][i, mc, 0], batch["yc"][i, mc, 0], s=18, color="black", label="context",
               zorder=3)
    ax.set_xlabel(labels[0][0])
    ax.set_ylabel(labels[1][0])
    ax.legend(loc="upper right", fontsize=7, ncol=4)


def _plot_reference(ax, query, i, reference):
    """The known predictive of task ``i`` on its query grid: dashed mean and 95% band."""
    xs = np.sort(query["xt"][i, query["mask_t"][i] > 0, 0])
    mean, std = reference(i, xs[:, None])
    ax.plot(xs, mean, color="tab:red", lw=1.2, ls="--", label="exact GP")
    ax.plot(xs, mean - Z95 * std, color="tab:red", lw=0.7, ls=":")
    ax.plot(xs, mean + Z95 * std, color="tab:red", lw=0.7, ls=":")
    ax.legend(loc="upper right", fontsize=7, ncol=5)


def _surface(ax, h, v, values):
    """Filled contours of ``values [N]`` at the points ``(h, v)``; the points coloured by
    value where they cannot be triangulated (fewer than 3, or all on one line)."""
    try:
        return ax.tricontourf(h, v, values, levels=20, cmap="viridis")
    except (ValueError, RuntimeError):  # matplotlib's refusal of too few / collinear points
        return ax.scatter(h, v, c=values, s=40, cmap="viridis")


def _plot_2d(fig, axes, batch, out, i, labels=(["x1", "x2"], ["y"]), swap=False):
    """Mean and stddev maps of task ``i``; ``swap``: inputs are (latitude, longitude), drawn
    with longitude horizontal."""
    h, v = (1, 0) if swap else (0, 1)
    mc, mt = batch["mask_c"][i] > 0, batch["mask_t"][i] > 0
    xt = batch["xt"][i, mt]
    for ax, key, label in ((axes[0], "mean", "predictive mean"), (axes[1], "stddev", "predictive stddev")):
        image = _surface(ax, xt[:, h], xt[:, v], out[key][i, mt, 0])
        ax.scatter(batch["xc"][i, mc, h], batch["xc"][i, mc, v], s=6, color="white",
                   edgecolors="black", linewidths=0.3, label="context")
        ax.set_title(f"{label}, {labels[1][0]}")
        ax.set_xlabel(labels[0][h])
        ax.set_ylabel(labels[0][v])
        fig.colorbar(image, ax=ax, label=labels[1][0])
