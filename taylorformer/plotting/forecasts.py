"""Forecast plots: history, truth, sampled paths and quantile bands against dates.

Data-agnostic: the caller passes the series in the units it wants drawn (a forecasting
task converts them back to the data's units first, see
:meth:`taylorformer.tasks.csv_series.CSVSeriesTask.plot`)::

    fig = plot_forecast(history_dates, history, target_dates, samples, truth=truth)
    plot_forecast(..., ax=my_ax)   # into a figure of yours
"""
import numpy as np
from matplotlib.figure import Figure

from taylorformer.checks import check_int

#: central intervals drawn as bands (outer first), as probability mass
BANDS = (0.9, 0.5)


def plot_forecast(history_time, history, target_time, samples, truth=None, mean=None,
                  bands=BANDS, num_paths=5, ax=None, label="y", time_label="date", title=None):
    """Draw one forecast into ``ax`` (or a new Figure); returns the Figure.

    Args:
        history_time, history: ``[n]`` times (datetime64 or numbers) and values of the
            observed past (the context).
        target_time: ``[H]`` times of the forecast steps.
        samples: ``[S, H]`` forecast samples (``S >= 1``); the bands are their central
            quantile intervals and the median is drawn dashed.
        truth: ``[H]`` observed values at the forecast steps, if known.
        mean: ``[H]`` predictive mean (drawn solid), if given.
        bands: central interval masses in (0, 1), e.g. ``(0.9, 0.5)``.
        num_paths: sample paths drawn as thin lines (at most ``S``).
        label: name of the series (the y-axis label); ``time_label``: the x-axis label.
    """
    samples = np.asarray(samples, np.float64)
    target_time = np.asarray(target_time)
    if samples.ndim != 2 or samples.shape[1] != len(target_time) or samples.shape[0] < 1:
        raise ValueError(f"plot_forecast: samples must be [num_samples >= 1, {len(target_time)}] "
                         f"(one row per sample, one column per target time), got shape {samples.shape}")
    check_int("plot_forecast", "num_paths", num_paths, minimum=0)
    bands = sorted((float(b) for b in bands), reverse=True)
    if any(not 0.0 < b < 1.0 for b in bands):
        raise ValueError(f"plot_forecast: bands must be central interval masses in (0, 1), got {bands}")
    if ax is None:
        fig = Figure(figsize=(9, 3), layout="tight")
        ax = fig.subplots()
    ax.plot(history_time, history, color="black", lw=1.2, label="history")
    for k, mass in enumerate(bands):
        lo, hi = np.quantile(samples, [(1 - mass) / 2, (1 + mass) / 2], axis=0)
        ax.fill_between(target_time, lo, hi, color="tab:blue", alpha=0.18 + 0.12 * k, lw=0,
                        label=f"{mass:.0%} interval")
    ax.plot(target_time, np.median(samples, 0), color="tab:blue", lw=1.0, ls="--", label="median")
    if mean is not None:
        ax.plot(target_time, mean, color="tab:blue", lw=1.5, label="mean")
    for k, path in enumerate(samples[:num_paths]):
        ax.plot(target_time, path, color="tab:purple", lw=0.6, alpha=0.7,
                label="sampled paths" if k == 0 else "_sampled paths")
    if truth is not None:
        ax.plot(target_time, truth, color="tab:gray", lw=1.2, marker=".", ms=3, label="truth")
    ax.axvline(target_time[0], color="gray", lw=0.6, ls=":", label="_forecast start")
    ax.set_xlabel(time_label)
    ax.set_ylabel(label)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize=7, ncol=3)
    if np.issubdtype(target_time.dtype, np.datetime64):
        for tick in ax.get_xticklabels():
            tick.set_rotation(20)
    return ax.figure
