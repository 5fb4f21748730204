"""Calibration plot: PIT histogram and reliability diagram of a calibration report.

Draws a report of :func:`taylorformer.prediction.calibration.summarize` (or
:func:`~taylorformer.workflow.runs.calibrate_run`, whose ``recalibrated`` part is drawn
beside the raw one) with matplotlib's object-oriented API, so the user's backend and
pyplot state are left alone::

    fig = plot_calibration(report)
    fig.savefig("calibration.png")
"""
import numpy as np
from matplotlib.figure import Figure


def _describe(report):
    width = dict(zip(report["coverage"]["levels"], report["sharpness"]["mean_width"])).get(0.9)
    text = f"CRPS {report['crps']:.3g}, mean sd {report['sharpness']['mean_stddev']:.3g}"
    return text + (f", 90% width {width:.3g}" if width is not None else "")


def plot_calibration(report, title=None, axes=None):
    """PIT histogram (left; density 1 is calibrated) and reliability diagram (right:
    observed coverage of central intervals against their nominal mass; the diagonal is
    calibrated), with CRPS and sharpness in the titles. A ``recalibrated`` report inside
    ``report`` is drawn beside it. ``axes``: two axes to draw into. Returns the Figure."""
    if axes is None:
        fig = Figure(figsize=(9, 3.6), layout="constrained")
        axes = fig.subplots(1, 2)
    elif len(axes) != 2:
        raise ValueError(f"plot_calibration draws into 2 axes, got {len(axes)}")
    hist, rel = axes
    parts = [("as predicted", report, "tab:blue")]
    if "recalibrated" in report:
        scale = ", ".join(f"{s:.3g}" for s in report["recalibrated"]["scale"])
        parts.append((f"recalibrated (s = {scale})", report["recalibrated"], "tab:orange"))
    bins = report["pit"]["bins"]
    edges = np.linspace(0.0, 1.0, bins + 1)
    for k, (label, part, color) in enumerate(parts):
        counts = np.asarray(part["pit"]["counts"], np.float64)
        density = counts * bins / max(counts.sum(), 1.0)
        offset = (k - (len(parts) - 1) / 2) * 0.9 / (bins * len(parts))
        hist.bar(edges[:-1] + 0.5 / bins + offset, density, width=0.9 / (bins * len(parts)),
                 color=color, alpha=0.85, label=label)
        rel.plot(part["coverage"]["levels"], part["coverage"]["observed"], marker="o", ms=4,
                 color=color, label=f"{label}: {_describe(part)}")
    hist.axhline(1.0, color="black", lw=0.8, ls="--", label="uniform")
    hist.set_xlim(0, 1)
    hist.set_xlabel("PIT")
    hist.set_ylabel("density")
    hist.set_title(f"PIT histogram ({report['num_values']} values)", fontsize=9)
    hist.legend(fontsize=7)
    rel.plot([0, 1], [0, 1], color="black", lw=0.8, ls="--", label="_calibrated")
    rel.set_xlim(0, 1)
    rel.set_ylim(0, 1)
    rel.set_xlabel("nominal central interval mass")
    rel.set_ylabel("observed coverage")
    rel.set_title("reliability: " + _describe(report), fontsize=9)
    rel.legend(fontsize=6, loc="upper left")
    fig = hist.figure
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
