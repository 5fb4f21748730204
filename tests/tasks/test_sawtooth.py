"""Sawtooth task plugin: values, directions (full / restricted), rotation, shift, padding."""
import json

import numpy as np
import pytest

from taylorformer import registry
from taylorformer.errors import SpecError
from taylorformer.task import make_task
from taylorformer.tasks.sawtooth import SawtoothTask, rotation_matrix, sawtooth


def test_registered_presets():
    names = registry.names("task")
    for name in ("sawtooth", "sawtooth-2d", "sawtooth-2d-restricted", "sawtooth-2d-rotated"):
        assert name in names
    assert registry.get("task", "sawtooth")().dim_x == 1
    task = registry.get("task", "sawtooth-2d-rotated")()
    assert task.dim_x == 2 and task.restricted and task.rotation == "random"


def test_sawtooth_function():
    x = np.array([[0.0], [0.1], [0.25], [0.5]])
    np.testing.assert_allclose(sawtooth(x, [1.0], 4.0, 0.0), [0.0, 0.4, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(sawtooth(x, [-1.0], 2.0, 0.5), np.mod(-2 * x[:, 0] - 0.5, 1.0))
    assert np.all((sawtooth(np.random.default_rng(0).normal(size=(50, 1)), [1.0], 3.3, 0.2) >= 0))


def test_noiseless_samples_lie_on_the_sawtooth():
    task = SawtoothTask(noise=0.0, num_context=(5, 10), num_target=20)
    rng = np.random.default_rng(1)
    batch = task.sample(rng, 4, "train")
    replay = np.random.default_rng(1)
    for i in range(4):
        direction, freq, phase = task.sample_function(replay)
        nc = int(replay.integers(5, 11))
        nt = int(replay.integers(20, 21))
        replay.uniform(size=(nc, 1)), replay.uniform(size=(nt, 1))
        replay.standard_normal(nc + nt)
        assert batch["mask_c"][i].sum() == nc and batch["mask_t"][i].sum() == nt
        x = np.concatenate([batch["xc"][i, :nc], batch["xt"][i, :nt]]).astype(np.float64)
        y = np.concatenate([batch["yc"][i, :nc, 0], batch["yt"][i, :nt, 0]])
        f = sawtooth(x, direction, freq, phase)
        # float32 rounding of x can flip values at a jump from ~1 to ~0
        err = np.minimum(np.abs(y - f), 1.0 - np.abs(y - f))
        assert err.max() < 1e-4
        assert np.all(batch["xc"][i, nc:] == 0) and np.all(batch["mask_c"][i, nc:] == 0)


def test_directions_full_and_restricted():
    rng = np.random.default_rng(2)
    full = SawtoothTask(dim_x=2)
    dirs = np.array([full.sample_function(rng)[0] for _ in range(400)])
    np.testing.assert_allclose(np.linalg.norm(dirs, axis=1), 1.0)
    angles = np.degrees(np.arctan2(dirs[:, 1], dirs[:, 0])) % 90
    assert np.abs(angles - 45).max() > 30  # not only the diagonals
    restricted = SawtoothTask(dim_x=2, restricted=True)
    dirs = np.array([restricted.sample_function(rng)[0] for _ in range(200)])
    np.testing.assert_allclose(np.abs(dirs), np.sqrt(0.5))  # x1 = x2 or x1 = -x2
    assert len({tuple(np.sign(d)) for d in dirs}) == 4
    freqs = [full.sample_function(rng)[1] for _ in range(200)]
    assert 3.0 <= min(freqs) and max(freqs) <= 5.0


def test_rotated_test_split_is_a_rotation_of_the_same_draw():
    base = SawtoothTask(dim_x=2, restricted=True, num_context=(4, 8), num_target=16)
    rotated = SawtoothTask(dim_x=2, restricted=True, num_context=(4, 8), num_target=16,
                           rotation=30.0)
    b0 = base.sample(np.random.default_rng(3), 3, "test")
    b1 = rotated.sample(np.random.default_rng(3), 3, "test")
    r = rotation_matrix(30.0)
    for key in ("yc", "yt", "mask_c", "mask_t"):
        np.testing.assert_array_equal(b1[key], b0[key])
    for key in ("xc", "xt"):
        np.testing.assert_allclose(b1[key], (b0[key].astype(np.float64) @ r.T), atol=1e-5)
    b2 = rotated.sample(np.random.default_rng(3), 3, "train")  # train split is not rotated
    np.testing.assert_array_equal(b2["xc"], b0["xc"])


def test_random_rotation_makes_restricted_directions_full():
    task = registry.get("task", "sawtooth-2d-rotated")(noise=0.0, num_context=(64, 64), num_target=1)
    batch = task.sample(np.random.default_rng(4), 8, "test")
    # the rotated inputs no longer span the axis-aligned box [-2, 2]^2
    assert np.abs(batch["xc"]).max() > 2.0 + 1e-3


def test_shift_applies_to_shift_splits_only():
    a = SawtoothTask(num_context=(3, 6), num_target=5)
    b = SawtoothTask(num_context=(3, 6), num_target=5, shift=1000.0)
    t0, t1 = a.sample(np.random.default_rng(5), 2, "test"), b.sample(np.random.default_rng(5), 2, "test")
    m = t0["mask_c"][..., None] > 0
    np.testing.assert_allclose(np.where(m, t1["xc"] - 1000.0, 0), np.where(m, t0["xc"], 0), atol=1e-4)
    np.testing.assert_array_equal(t1["yc"], t0["yc"])
    v0, v1 = a.sample(np.random.default_rng(5), 2, "val"), b.sample(np.random.default_rng(5), 2, "val")
    np.testing.assert_array_equal(v1["xc"], v0["xc"])


def test_dataset_and_config_round_trip():
    task = registry.get("task", "sawtooth-2d-rotated")()
    config = json.loads(json.dumps(task.get_config()))
    assert SawtoothTask(**config).get_config() == config
    batch = next(iter(SawtoothTask(num_context=(2, 4), num_target=3).dataset("val", batch_size=2)))
    assert batch["xc"].shape == (2, 4, 1) and batch["yt"].shape == (2, 3, 1)


@pytest.mark.parametrize("kwargs,match", [
    ({"restricted": True}, "dim_x = 2"),
    ({"dim_x": 2, "rotation": "sideways"}, "rotation"),
    ({"num_context": [5, 2]}, "num_context"),
    ({"frequency": 3}, "task 'sawtooth' has no option 'frequency'"),
    ({"shift_splits": ["holdout"]}, "unknown split"),
])
def test_bad_config(kwargs, match):
    with pytest.raises(SpecError, match=match):
        make_task("sawtooth", kwargs)
