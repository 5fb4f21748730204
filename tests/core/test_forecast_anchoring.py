"""Forecasts anchored on the last observation.

Anchored standardisation (spec ``standardise: last``,
:mod:`taylorformer.models.window_standardisation`): the shift is each window's last observed
context value (against NumPy, with padding, NaN and a context out of time order); a network
whose location output is 0 predicts that value exactly (persistence); the scale is the
window's; the spec accepts the mode and an autoregressive model's draws shift with the data.
The ``csv`` task's lead input, which comes with it: tests/tasks/test_csv_lead_input.py."""
import numpy as np
import tensorflow as tf

from taylorformer.batch import with_masks
from taylorformer.models import build_model
from taylorformer.models import window_standardisation as wn
from taylorformer.spec import resolve_spec

LAYERS = {"encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}, "head": {"width": 16}}


def _context(seed=0, b=4, nc=6, dim_y=2):
    """A batch whose context is out of time order, with padding and NaN values."""
    rng = np.random.default_rng(seed)
    xc = np.stack([rng.permutation(np.linspace(-1, 0, nc)) for _ in range(b)])[..., None].astype(np.float32)
    yc = rng.normal(5.0, 2.0, (b, nc, dim_y)).astype(np.float32)
    mask = np.ones((b, nc), np.float32)
    latest = np.argmax(xc[..., 0], 1)
    mask[0, latest[0]] = 0  # the latest point is padding: the next latest counts
    yc[1, latest[1], 0] = np.nan  # output 0's latest value is missing; output 1's is not
    yc[2, :, 1] = np.nan  # output 1 never observed: shift 0
    return {"xc": xc, "yc": yc, "mask_c": mask, "xt": np.zeros((b, 3, 1), np.float32),
            "yt": rng.normal(size=(b, 3, dim_y)).astype(np.float32)}


def _numpy_last(batch):
    """``[B, Dy]``: the observed context value at the largest ``xc[..., 0]`` (0: none)."""
    xc, yc = (np.asarray(batch[k], np.float64) for k in ("xc", "yc"))
    mask = np.asarray(batch["mask_c"]) > 0
    out = np.zeros((yc.shape[0], yc.shape[2]))
    for w in range(yc.shape[0]):
        for d in range(yc.shape[2]):
            seen = mask[w] & ~np.isnan(yc[w, :, d])
            if seen.any():
                k = np.flatnonzero(seen)[np.argmax(xc[w, seen, 0])]
                out[w, d] = yc[w, k, d]
    return out


def test_last_context_value_matches_numpy_with_padding_nan_and_shuffled_order():
    raw = _context()
    batch = with_masks(raw)
    np.testing.assert_allclose(wn.last_context_value(batch).numpy()[:, 0], _numpy_last(raw), rtol=1e-7)
    shift, scale = wn.context_statistics(batch, mode="last")
    _, window_scale = wn.context_statistics(batch)
    np.testing.assert_allclose(shift.numpy()[:, 0], _numpy_last(raw), rtol=1e-7)
    np.testing.assert_array_equal(scale.numpy(), window_scale.numpy())  # the scale is the window's


def test_a_zero_network_output_predicts_the_last_context_value_exactly():
    """With the head's output layer zeroed the network's location is 0 in window units:
    the predictive mean is the last observed context value (persistence) at every target,
    its scale the window's std times the likelihood's scale of a zero output."""
    model = build_model({"preset": "tnp-d", **LAYERS, "dim_y": 2, "standardise": "last"})
    model.head.out.kernel.assign(tf.zeros_like(model.head.out.kernel))
    model.head.out.bias.assign(tf.zeros_like(model.head.out.bias))
    batch = _context(seed=3)
    params = model(batch)
    want = np.broadcast_to(_numpy_last(batch)[:, None, :], params["loc"].shape)
    np.testing.assert_allclose(params["loc"].numpy(), want, rtol=1e-6, atol=1e-6)
    unit = model.likelihood.parameters(tf.zeros([1, 1, 4]))["scale"].numpy()[0, 0, 0]
    _, scale = wn.context_statistics(with_masks(batch))
    np.testing.assert_allclose(params["scale"].numpy(), np.broadcast_to(unit * scale.numpy(), want.shape),
                               rtol=1e-5)


def test_spec_accepts_last_and_autoregressive_draws_follow_a_shift_of_the_data():
    assert resolve_spec({"preset": "tnp-d", "standardise": "last"})["standardise"] == "last"
    model = build_model({"preset": "tnp-a", **LAYERS, "standardise": "last"})
    rng = np.random.default_rng(4)
    batch = {"xc": np.sort(rng.uniform(-1, 0, (2, 5, 1)), 1).astype(np.float32),
             "yc": rng.normal(size=(2, 5, 1)).astype(np.float32),
             "xt": np.sort(rng.uniform(0, 1, (2, 3, 1)), 1).astype(np.float32),
             "yt": np.zeros((2, 3, 1), np.float32)}
    shifted = {**batch, "yc": batch["yc"] + 100.0}
    draws = model.sample(batch, 4, seed=1, cache=False, progress=False)
    moved = model.sample(shifted, 4, seed=1, cache=False, progress=False)
    np.testing.assert_allclose(moved - 100.0, draws, atol=2e-4)

