"""The map of a sensor placement (:class:`taylorformer.prediction.placement.Placement`).

1-D inputs: the predictive variance over the region before and after the chosen points,
the context, the candidates and the chosen points numbered in order. 2-D (and more: the
first two input dimensions): the region coloured by the variance before and after, side
by side on one colour scale, with the context and the numbered chosen points::

    fig = plot_placement(place(model, candidates, context, k=5))
    fig.savefig("placement.png")
"""
import numpy as np
from matplotlib.figure import Figure


def plot_placement(placement, title=None, ax=None):
    """Draw ``placement`` into ``ax`` (1-D; 2-D: a pair of axes) or a new Figure; returns
    the Figure. Axis labels are the placement's ``x_names``."""
    region = np.asarray(placement.region)
    chosen = placement.table[placement.x_names].to_numpy()
    label = f"predictive variance [{placement.units}]"  # summed over outputs (Placement.variance_before)
    if region.shape[1] == 1:
        fig, ax = _axes(ax, (9, 3.4), 1)
        order = np.argsort(region[:, 0])
        xs = region[order, 0]
        ax.plot(xs, placement.variance_before[order], color="tab:blue", lw=1.5, label="before")
        ax.plot(xs, placement.variance_after[order], color="tab:orange", lw=1.5,
                label=f"after {len(chosen)} point(s)")
        ax.plot(placement.candidates[:, 0], np.zeros(len(placement.candidates)), "|", color="gray", ms=8,
                label="candidates")
        if len(placement.context_x):
            ax.plot(placement.context_x[:, 0], np.zeros(len(placement.context_x)), "kx", ms=6,
                    label="context")
        for rank, x in enumerate(chosen[:, 0], 1):
            ax.axvline(x, color="tab:red", lw=0.7, ls=":")
            ax.annotate(str(rank), (x, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                        color="tab:red", fontsize=8)
        ax.plot([], [], color="tab:red", lw=0.7, ls=":", label="chosen (in order)")
        ax.set_xlabel(placement.x_names[0])
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        if title:
            ax.set_title(title, fontsize=9, pad=14)
        return fig
    fig, axes = _axes(ax, (10, 4.2), 2)
    top = float(max(np.max(placement.variance_before), np.max(placement.variance_after)))
    for panel, values, name in zip(axes, (placement.variance_before, placement.variance_after),
                                   ("before", f"after {len(chosen)} point(s)")):
        dots = panel.scatter(region[:, 0], region[:, 1], c=values, s=14, cmap="viridis", vmin=0, vmax=top)
        if len(placement.context_x):
            panel.plot(placement.context_x[:, 0], placement.context_x[:, 1], "kx", ms=5, label="context")
        panel.plot(chosen[:, 0], chosen[:, 1], "*", color="tab:red", ms=10, mec="white", mew=0.5,
                   label="chosen")
        for rank, (x0, x1) in enumerate(chosen[:, :2], 1):
            panel.annotate(str(rank), (x0, x1), xytext=(4, 4), textcoords="offset points", color="tab:red",
                           fontsize=8)
        panel.set_xlabel(placement.x_names[0])
        panel.set_ylabel(placement.x_names[1])
        panel.set_title(name, fontsize=9)
    axes[1].legend(fontsize=7, loc="upper right")
    fig.colorbar(dots, ax=list(axes), label=label, shrink=0.85)
    if title:
        fig.suptitle(title + ("" if region.shape[1] == 2 else f" (first 2 of {region.shape[1]} input dims)"),
                     fontsize=9)
    return fig


def _axes(ax, size, count):
    """``(figure, axes)``: those given (``count`` of them), or new ones."""
    if ax is not None:
        axes = np.atleast_1d(ax)
        if len(axes) != count:
            raise ValueError(f"plot_placement: this map needs {count} axes, got {len(axes)}")
        return axes[0].figure, (axes[0] if count == 1 else axes)
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(1, count)
    return fig, axes
