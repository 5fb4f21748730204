"""LocalTaylor wrapper: neighbour features vs an independent NumPy reference."""
import numpy as np
import pytest
import tensorflow as tf

from taylorformer.errors import SpecError
from taylorformer.plugins.taylorformer.local_taylor import LocalTaylor


# ------------------------------------------------------------------ NumPy reference
def reference(batch, causal, k, p, min_dx=1e-6, max_slope=200.0, min_sin=0.5):
    """Loop-by-loop LocalTaylor: nearest already-seen neighbours, slopes, Taylor term."""
    xc, yc, xt, yt = (np.asarray(batch[key], np.float32) for key in ("xc", "yc", "xt", "yt"))
    x, y = np.concatenate([xc, xt], 1), np.concatenate([yc, yt], 1)
    valid = np.concatenate([batch["mask_c"], batch["mask_t"]], 1) > 0.5
    bsz, n, dx_ = x.shape
    dy_ = y.shape[2]
    nc = xc.shape[1]
    m = k + dx_ - 1
    nbs = np.zeros((bsz, n, m), int)
    cnt = np.zeros((bsz, n), int)
    slope = np.zeros((bsz, n, dx_, dy_))
    flag = np.zeros((bsz, n))
    for b in range(bsz):
        for i in range(n):
            seen = [j for j in range(n) if valid[b, j] and j != i
                    and (j < nc or (causal and i >= nc and j < i))]
            # float32 distances (as the model computes them); ties -> lowest index
            dist = {j: np.sum(np.square(x[b, i] - x[b, j], dtype=np.float32), dtype=np.float32) for j in seen}
            order = sorted(seen, key=lambda j: (dist[j], j))[:1 if dx_ == 2 else k]
            if dx_ == 2 and order:  # then the nearest points at an angle to the first
                a = x[b, i] - x[b, order[0]]

                def angled(j):
                    c = x[b, i] - x[b, j]
                    return abs(a[0] * c[1] - a[1] * c[0]) > min_sin * np.linalg.norm(a) * np.linalg.norm(c)

                order += sorted([j for j in seen if j != order[0] and angled(j)], key=lambda j: (dist[j], j))[:k]
            cnt[b, i] = len(order)
            nbs[b, i, :len(order)] = order
            estimates = []
            for r in range(k):
                if dx_ == 1:
                    if r >= len(order):
                        continue
                    j = order[r]
                    step = float(x[b, i, 0] - x[b, j, 0])
                    if abs(step) <= min_dx:
                        continue
                    est = (y[b, i] - y[b, j]) / step
                    est = est[None, :]
                else:
                    if r + 1 >= len(order):
                        continue
                    ja, jb = order[0], order[r + 1]
                    a, c = x[b, i] - x[b, ja], x[b, i] - x[b, jb]
                    na, nb = np.linalg.norm(a), np.linalg.norm(c)
                    det = a[0] * c[1] - a[1] * c[0]
                    if na <= min_dx or nb <= min_dx or abs(det) <= min_sin * na * nb:
                        continue
                    est = np.linalg.solve(np.stack([a, c]).astype(np.float64),
                                          np.stack([y[b, i] - y[b, ja], y[b, i] - y[b, jb]]).astype(np.float64))
                if np.all(np.abs(est) <= max_slope):
                    estimates.append(est)
            if estimates:
                slope[b, i] = np.mean(estimates, 0)
            flag[b, i] = float(len(estimates) < k)
    has = cnt > 0
    nb0 = nbs[..., 0]
    take = lambda a: np.take_along_axis(a, nb0.reshape(bsz, n, *([1] * (a.ndim - 2))), 1)  # noqa: E731
    x_n = np.where(has[..., None], take(x), x)
    y_n = take(y) * has[..., None]
    slope_n = take(slope) * has[..., None, None]
    flag_n = np.where(has, take(flag[..., None])[..., 0], 1.0)
    mean = y_n + (np.sum((x - x_n)[..., :, None] * slope_n, -2) if p == 1 else 0.0)
    return {"idx": np.where(has, nb0, 0), "found": has, "x_n": x_n, "y_n": y_n, "slope": slope,
            "flag": flag, "slope_n": slope_n, "flag_n": flag_n, "mean": mean}


def random_batch(rng, b=3, nc=7, nt=6, dx=1, dy=1, grid=None, pad=True):
    """Random batch; ``grid`` draws x from few values (many duplicate x values)."""
    def xs(n):
        if grid is not None:
            return rng.choice(grid, size=(b, n, dx)).astype(np.float32)
        return rng.uniform(-2, 2, size=(b, n, dx)).astype(np.float32)

    batch = {"xc": xs(nc), "yc": rng.normal(size=(b, nc, dy)).astype(np.float32),
             "xt": xs(nt), "yt": rng.normal(size=(b, nt, dy)).astype(np.float32),
             "mask_c": np.ones((b, nc), np.float32), "mask_t": np.ones((b, nt), np.float32)}
    if pad:
        batch["mask_c"][0, -2:] = 0.0
        batch["mask_t"][1, 2] = 0.0  # a padded target in the middle
        batch["mask_c"][2, :] = 0.0  # empty context: the first target has no neighbour
    return batch


def check_against_reference(batch, causal, k, p, dim_x, dim_y, atol=1e-5):
    lt = LocalTaylor(dim_x, dim_y, p=p, q=1, k=k)
    got = {key: np.asarray(v) for key, v in lt.neighbour_terms({key: tf.constant(v) for key, v in batch.items()},
                                                        causal).items()}
    ref = reference(batch, causal, k, p)
    np.testing.assert_array_equal(got["found"], ref["found"])
    np.testing.assert_array_equal(got["idx"], ref["idx"])
    for key in ("y_n", "slope", "flag", "slope_n", "flag_n", "mean"):
        np.testing.assert_allclose(got[key], ref[key], atol=atol, rtol=1e-4, err_msg=key)
    # feature groups: x-only, seen-y and own-y pieces
    g = dim_x * dim_y
    np.testing.assert_allclose(got["x"][..., :dim_x], ref["x_n"], atol=atol)
    np.testing.assert_allclose(got["seen"][..., :dim_y], ref["y_n"], atol=atol)
    np.testing.assert_allclose(got["own"][..., dim_y:dim_y + g],
                               ref["slope"].reshape(*ref["slope"].shape[:2], g), atol=atol, rtol=1e-4)
    return got, ref


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_1d_features_match_reference_with_duplicates(causal, k):
    rng = np.random.default_rng(10 + k + 2 * causal)
    batch = random_batch(rng, grid=np.linspace(-1, 1, 6))  # 13 points on 6 values: many ties
    got, ref = check_against_reference(batch, causal, k, p=1, dim_x=1, dim_y=1)
    # duplicates are neighbours at distance 0 (never the point itself) and flag the slope
    x = np.concatenate([batch["xc"], batch["xt"]], 1)[..., 0]
    n = x.shape[1]
    assert np.all(got["idx"][got["found"]] != np.broadcast_to(np.arange(n), got["idx"].shape)[got["found"]])
    dup = got["found"] & (np.take_along_axis(x, got["idx"], 1) == x)
    assert dup.any() and np.all(got["flag"][dup] == 1.0)
    if k == 1:
        assert np.all(got["slope"][dup] == 0.0)


def test_1d_features_match_reference_continuous_multi_output():
    rng = np.random.default_rng(3)
    check_against_reference(random_batch(rng, dy=2, nc=9, nt=8), causal=True, k=2, p=1, dim_x=1, dim_y=2)


@pytest.mark.parametrize("causal", [False, True])
def test_2d_features_match_reference(causal):
    rng = np.random.default_rng(5 + causal)
    batch = random_batch(rng, dx=2, dy=1, nc=8, nt=6)
    batch["xc"][0, 1] = batch["xc"][0, 3]  # an exact duplicate location
    check_against_reference(batch, causal, k=2, p=1, dim_x=2, dim_y=1, atol=2e-4)


def test_2d_partials_of_linear_function_are_exact():
    rng = np.random.default_rng(7)
    batch = random_batch(rng, dx=2, nc=10, nt=6, pad=False)
    a, c = np.array([1.5, -0.7], np.float32), 0.3
    for key in ("c", "t"):
        batch["y" + key] = (batch["x" + key] @ a + c)[..., None]
    lt = LocalTaylor(2, 1, p=1, q=1, k=2)
    f = {key: np.asarray(v) for key, v in lt.neighbour_terms({k_: tf.constant(v) for k_, v in batch.items()}, True).items()}
    ok = f["flag"] == 0.0
    assert ok.mean() > 0.8
    np.testing.assert_allclose(f["slope"][ok][..., 0], np.broadcast_to(a, (ok.sum(), 2)), atol=1e-3)
    # p=1: y_n + dx . grad(n) reproduces a linear function wherever the neighbour's slope is valid
    y = np.concatenate([batch["yc"], batch["yt"]], 1)
    good = f["found"] & (f["flag_n"] == 0.0)
    np.testing.assert_allclose(f["mean"][good], y[good], atol=1e-3)


def test_2d_partials_of_quadratic_on_fine_grid():
    """Two-neighbour finite differences approximate the gradient of a quadratic."""
    g = np.linspace(-1, 1, 21, dtype=np.float32)
    xx = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(1, -1, 2)
    rng = np.random.default_rng(0)
    xx = xx + rng.uniform(-0.01, 0.01, xx.shape).astype(np.float32)  # break exact collinearity
    f = lambda x: x[..., 0] ** 2 + 3 * x[..., 0] * x[..., 1] - x[..., 1] ** 2  # noqa: E731
    grad = lambda x: np.stack([2 * x[..., 0] + 3 * x[..., 1], 3 * x[..., 0] - 2 * x[..., 1]], -1)  # noqa: E731
    batch = {"xc": xx, "yc": f(xx)[..., None].astype(np.float32), "xt": xx[:, :3], "yt": f(xx[:, :3])[..., None],
             "mask_c": np.ones(xx.shape[:2], np.float32), "mask_t": np.ones((1, 3), np.float32)}
    lt = LocalTaylor(2, 1, p=0, q=1, k=1)
    out = lt.neighbour_terms({key: tf.constant(v, tf.float32) for key, v in batch.items()}, False)
    slope, flag = np.asarray(out["slope"])[0, :441, :, 0], np.asarray(out["flag"])[0, :441]
    ok = flag == 0
    assert ok.mean() > 0.9
    err = np.abs(slope[ok] - grad(xx[0])[ok])
    # first-order differences on a spacing h = 0.1 grid: O(h) error with |H| <= 3
    assert np.median(err) < 0.2 and err.max() < 0.6


def test_no_neighbour_and_blow_up_flags():
    batch = {"xc": np.zeros((1, 0, 1), np.float32), "yc": np.zeros((1, 0, 1), np.float32),
             "xt": np.array([[[0.5], [0.5], [0.9]]], np.float32),
             "yt": np.array([[[1.0], [2.0], [3.0]]], np.float32),
             "mask_c": np.zeros((1, 0), np.float32), "mask_t": np.ones((1, 3), np.float32)}
    lt = LocalTaylor(1, 1, p=1, q=1, k=1)
    f = {key: np.asarray(v) for key, v in lt.neighbour_terms({key: tf.constant(v) for key, v in batch.items()}, True).items()}
    np.testing.assert_array_equal(f["found"][0], [False, True, True])
    assert f["x"][0, 0, 2] == 1.0 and f["mean"][0, 0, 0] == 0.0  # no neighbour: flag, term 0
    assert f["flag"][0, 1] == 1.0 and f["slope"][0, 1, 0, 0] == 0.0  # dx = 0 (duplicate x)
    assert f["idx"][0, 1] == 0 and f["idx"][0, 2] == 0  # tie of the two 0.5's -> lowest index
    np.testing.assert_allclose(f["slope"][0, 2, 0, 0], (3.0 - 1.0) / 0.4, rtol=1e-5)
    # p=1 at target 2 uses the slope AT the neighbour (none: 0, flagged): term = y_n
    np.testing.assert_allclose(f["mean"][0, 2, 0], 1.0)
    assert f["flag_n"][0, 2] == 1.0
    # with target 1 first (order swapped), the neighbour of 0.9 is the earlier duplicate
    f2 = lt.neighbour_terms({**{key: tf.constant(v) for key, v in batch.items()},
                      "yt": tf.constant([[[2.0], [1.0], [3.0]]])}, True)
    np.testing.assert_allclose(np.asarray(f2["mean"])[0, 2, 0], 2.0)


def test_fold_and_adjust():
    rng = np.random.default_rng(1)
    batch = {key: tf.constant(v) for key, v in random_batch(rng, pad=False).items()}
    lt = LocalTaylor(1, 1, p=0, q=1)
    dims = lt.feature_dims
    features = lt.features(batch, causal=False)
    terms = lt.neighbour_terms(batch, causal=False)
    nc = batch["xc"].shape[1]
    folded = lt.fold(batch, features)
    assert folded["xt"].shape[-1] == 1 + dims["x"] + dims["seen"] == lt.folded_dims()[0]
    assert folded["yc"].shape[-1] == 1 + dims["own"] == lt.folded_dims()[1]
    np.testing.assert_array_equal(folded["xt"][..., 1:1 + dims["x"]], terms["x"][:, nc:])
    np.testing.assert_array_equal(folded["yc"][..., 1:], terms["own"][:, :nc])
    np.testing.assert_array_equal(folded["xc"][..., :1], batch["xc"])
    assert features.own.shape[-1] == dims["own"] and features.mean_t.shape == (3, 6, 1)
    params = {"loc": tf.zeros([3, 6, 1]), "scale": tf.ones([3, 6, 1])}
    out = lt.adjust(params, features)
    np.testing.assert_allclose(out["loc"], terms["mean"][:, nc:])
    mix = lt.adjust({"locs": tf.zeros([3, 6, 1, 4])}, features)
    assert mix["locs"].shape == (3, 6, 1, 4)
    assert LocalTaylor(1, 1, q=0).feature_dims == {"x": 0, "seen": 0, "own": 0}


@pytest.mark.parametrize("options", [{"p": 2}, {"q": 3}, {"k": 0}, {"dim_x": 3}])
def test_bad_options(options):
    args = {"dim_x": 1, "dim_y": 1, **options}
    with pytest.raises(SpecError):
        LocalTaylor(**args)
