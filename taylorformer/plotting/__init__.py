"""Prediction plots, one module per kind of data.

Every function builds its figure with matplotlib's object-oriented API
(``matplotlib.figure.Figure``), so importing or calling it never changes the user's
backend or pyplot state; each returns the Figure and draws into the axes it is given.
A task picks its plot through :meth:`taylorformer.task.Task.plot` (what
``taylorformer plot RUN_DIR`` and the prediction images of training call).

- :mod:`~taylorformer.plotting.functions`: 1-D predictive bands on a dense grid, 2-D maps.
- :mod:`~taylorformer.plotting.images`: image completion: context, mean, stddev and samples.
- :mod:`~taylorformer.plotting.forecasts`: forecasts against dates (history, truth, paths, quantile bands).
- :mod:`~taylorformer.plotting.calibration`: PIT histogram and reliability diagram of a calibration report.
- :mod:`~taylorformer.plotting.fields`: maps of a predicted field (truth, mean, stddev) on its coordinates.
"""
from taylorformer.plotting.functions import plot_predictions

__all__ = ["plot_predictions"]
