"""Prediction plots: 1-D bands over context/targets, 2-D mean/stddev maps."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from taylorformer.batch import with_masks  # noqa: E402
from taylorformer.inference import predict  # noqa: E402
from taylorformer.checks import check_int  # noqa: E402


def plot_predictions(model, batch, path, num_tasks=4, num_samples=0, title=None):
    """Write a PNG of the first ``num_tasks`` tasks of ``batch`` to ``path``.

    1-D inputs: context points, true targets, predictive mean, 95% band (and sample
    paths if ``num_samples``). 2-D inputs: maps of the predictive mean and stddev at
    the target locations with the context locations marked.
    """
    check_int("plot", "num_tasks", num_tasks)
    check_int("plot", "num_samples", num_samples, minimum=0)
    batch = {k: np.asarray(v) for k, v in with_masks(batch).items()}
    out = {k: np.asarray(v) for k, v in predict(model, batch, num_samples=num_samples).items()}
    n = min(num_tasks, batch["xt"].shape[0])
    dim_x = batch["xt"].shape[-1]
    if dim_x == 1:
        fig, axes = plt.subplots(n, 1, figsize=(9, 2.6 * n), squeeze=False)
        for i in range(n):
            _plot_1d(axes[i, 0], batch, out, i)
    elif dim_x == 2:
        fig, axes = plt.subplots(n, 2, figsize=(10, 4.2 * n), squeeze=False)
        for i in range(n):
            _plot_2d(fig, axes[i], batch, out, i)
    else:
        raise ValueError(f"plots support 1-D and 2-D inputs; this batch has dim_x={dim_x}")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_1d(ax, batch, out, i):
    mc, mt = batch["mask_c"][i] > 0, batch["mask_t"][i] > 0
    xt = batch["xt"][i, mt, 0]
    order = np.argsort(xt)
    xs = xt[order]
    mean = out["mean"][i, mt, 0][order]
    std = out["stddev"][i, mt, 0][order]
    ax.fill_between(xs, mean - 1.96 * std, mean + 1.96 * std, color="tab:blue", alpha=0.25,
                    label="95% band")
    ax.plot(xs, mean, color="tab:blue", lw=1.5, label="predictive mean")
    for s in out.get("samples", np.zeros((0,)))[:5]:
        ax.plot(xs, s[i, mt, 0][order], color="tab:purple", lw=0.6, alpha=0.7)
    ax.scatter(xt, batch["yt"][i, mt, 0], s=8, color="tab:gray", label="targets")
    ax.scatter(batch["xc"][i, mc, 0], batch["yc"][i, mc, 0], s=18, color="black", label="context",
               zorder=3)
    ax.legend(loc="upper right", fontsize=7, ncol=4)


def _plot_2d(fig, axes, batch, out, i):
    mc, mt = batch["mask_c"][i] > 0, batch["mask_t"][i] > 0
    xt = batch["xt"][i, mt]
    for ax, key, label in ((axes[0], "mean", "predictive mean"), (axes[1], "stddev", "predictive stddev")):
        image = ax.tricontourf(xt[:, 0], xt[:, 1], out[key][i, mt, 0], levels=20, cmap="viridis")
        ax.scatter(batch["xc"][i, mc, 0], batch["xc"][i, mc, 1], s=6, color="white",
                   edgecolors="black", linewidths=0.3, label="context")
        ax.set_title(label)
        fig.colorbar(image, ax=ax)
