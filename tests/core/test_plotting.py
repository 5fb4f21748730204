"""Prediction plots: the backend is left alone, Figures are returned, axes are honoured, and
the 1-D band of a conditional model is its predictive on a dense grid."""
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.figure import Figure

from taylorformer.models import build_model
from taylorformer.plotting import plot_predictions
from taylorformer.task import make_task

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}, "dim_x": 1, "dim_y": 1}


@pytest.fixture(scope="module")
def model_and_batch():
    task = make_task("gp", {"num_context": [3, 8], "num_target": 6})
    batch = {k: np.asarray(v) for k, v in next(iter(task.dataset("test", batch_size=3, num_batches=1))).items()}
    return build_model(TINY), batch


def test_importing_and_plotting_never_change_the_backend():
    code = ("import matplotlib; matplotlib.use('svg'); import taylorformer.plotting, taylorformer.workflow.runs, "
            "taylorformer.prediction.calibration, taylorformer.plotting.calibration; "
            "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_conditional_band_is_the_predictive_on_a_dense_grid(model_and_batch):
    model, batch = model_and_batch
    fig = plot_predictions(model, batch, num_tasks=2, grid_points=50)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    for i, ax in enumerate(fig.axes):
        xs, mean = ax.lines[0].get_xydata().T
        real = np.concatenate([batch["xc"][i, batch["mask_c"][i] > 0, 0], batch["xt"][i, batch["mask_t"][i] > 0, 0]])
        assert len(xs) == 50 and np.allclose(np.diff(xs), np.diff(xs)[0], rtol=1e-4)
        assert xs[0] < real.min() and xs[-1] > real.max()
        # the model's own predictive at those inputs, for task i alone
        one = {k: batch[k][i:i + 1] for k in ("xc", "yc", "mask_c")}
        query = {**one, "xt": xs[None, :, None].astype(np.float32), "yt": np.zeros((1, 50, 1), np.float32)}
        dist = model.predict_distribution(query)
        np.testing.assert_allclose(mean, np.asarray(dist.mean())[0, :, 0], rtol=1e-4, atol=1e-5)
        band = ax.collections[0].get_paths()[0].vertices[:, 1]
        assert np.isclose(band.max(), np.max(np.asarray(dist.mean() + 1.96 * dist.stddev())), rtol=1e-4)
        assert ax.get_xlabel() == "x" and ax.get_ylabel() == "y"


def test_draws_into_given_axes(model_and_batch):
    model, batch = model_and_batch
    mine = Figure()
    axes = mine.subplots(2, 1)
    assert plot_predictions(model, batch, num_tasks=2, axes=axes, num_samples=2) is mine
    assert all(ax.lines for ax in axes)
    with pytest.raises(ValueError, match="3 task\\(s\\) need 3 axes, got 2"):
        plot_predictions(model, batch, num_tasks=3, axes=axes)


def test_gp_task_plot_draws_the_exact_gp_beside_the_model(model_and_batch):
    from taylorformer.tasks.gaussian_process import gp_predictive

    model, batch = model_and_batch
    task = make_task("gp", {"num_context": [3, 8], "num_target": 6})
    fig = task.plot(model, batch, num_tasks=2)
    for i, ax in enumerate(fig.axes):
        exact = [line for line in ax.lines if line.get_label() == "exact GP"]
        assert len(exact) == 1 and ax.get_xlabel() == "x" and ax.get_ylabel() == "y"
        xs, mean = exact[0].get_xydata().T
        mc = batch["mask_c"][i] > 0
        expected, _ = gp_predictive(batch["xc"][i, mc], batch["yc"][i, mc, 0], xs[:, None], "eq",
                                    lengthscale=float(batch["gp_lengthscale"][i]), noise=0.05)
        np.testing.assert_allclose(mean, expected, rtol=1e-5, atol=1e-5)



@pytest.mark.parametrize("num_target", [2, 3])
def test_a_2d_task_with_too_few_targets_to_triangulate_is_drawn_as_points(num_target):
    """Two targets (or three on one line) cannot be contoured: each map shows them as points
    coloured by the model's own mean and stddev."""
    model = build_model({**TINY, "dim_x": 2})
    rng = np.random.default_rng(0)
    xt = np.zeros((1, num_target, 2), np.float32)
    xt[0, :, 0] = np.arange(num_target)  # on one line: no triangle
    batch = {"xc": rng.normal(size=(1, 5, 2)).astype(np.float32), "yc": rng.normal(size=(1, 5, 1)).astype(np.float32),
             "xt": xt, "yt": np.zeros((1, num_target, 1), np.float32),
             "mask_c": np.ones((1, 5), np.float32), "mask_t": np.ones((1, num_target), np.float32)}
    fig = plot_predictions(model, batch, num_tasks=1)
    dist = model.predict_distribution(batch)
    for ax, expected in zip(fig.axes[:2], (dist.mean(), dist.stddev())):  # the maps; the colour bars follow
        points = ax.collections[0]
        np.testing.assert_allclose(points.get_offsets(), xt[0])
        np.testing.assert_allclose(points.get_array(), np.asarray(expected)[0, :, 0], rtol=1e-5)
