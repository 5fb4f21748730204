"""GP task plugin: kernels, sampling, exact log-likelihoods, padding, shift, presets.

References are written independently here (kernel formulas, posterior by hand,
scipy.stats.multivariate_normal); they share only the documented JITTER constant.
"""
import json

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import cdist

from taylorformer import registry
from taylorformer.errors import SpecError
from taylorformer.task import make_task
from taylorformer.tasks import gaussian_process as gp
from taylorformer.tasks.gp import GPTask

ALL_KERNELS = ["eq", "matern12", "matern32", "matern52", "periodic"]
PARAMS = {"lengthscale": 0.4, "scale": 0.8, "period": 0.7}


def ref_kernel(kind, x1, x2, lengthscale, scale, period):
    """Textbook kernels (Rasmussen & Williams ch. 4; periodic of MacKay, summed over dims)."""
    d = cdist(x1, x2)
    if kind == "periodic":
        s = sum(np.sin(np.pi * np.abs(x1[:, [k]] - x2[:, k][None]) / period) ** 2
                for k in range(x1.shape[1]))
        return scale**2 * np.exp(-2 * s / lengthscale**2)
    r = d / lengthscale
    base = {
        "eq": np.exp(-r**2 / 2),
        "matern12": np.exp(-r),
        "matern32": (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r),
        "matern52": (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r),
    }[kind]
    return scale**2 * base


def ref_loglik(kind, params, noise, noise_on, xc, yc, xt, yt):
    """(marginal, joint) per target point, from the posterior computed by hand."""
    noise_t = noise if noise_on == "both" else 0.0
    kcc = ref_kernel(kind, xc, xc, **params) + (noise**2 + gp.JITTER) * np.eye(len(xc))
    ktc = ref_kernel(kind, xt, xc, **params)
    ktt = ref_kernel(kind, xt, xt, **params) + (noise_t**2 + gp.JITTER) * np.eye(len(xt))
    if len(xc):
        mean = ktc @ np.linalg.solve(kcc, yc)
        cov = ktt - ktc @ np.linalg.solve(kcc, ktc.T)
    else:
        mean, cov = np.zeros(len(xt)), ktt
    marginal = stats.norm(mean, np.sqrt(np.diag(cov))).logpdf(yt).mean()
    joint = stats.multivariate_normal(mean, cov).logpdf(yt) / len(yt)
    return marginal, joint


def real_points(batch, i):
    """Unpadded float64 (xc, yc, xt, yt) of task i."""
    nc, nt = int(batch["mask_c"][i].sum()), int(batch["mask_t"][i].sum())
    return (batch["xc"][i, :nc].astype(np.float64), batch["yc"][i, :nc, 0].astype(np.float64),
            batch["xt"][i, :nt].astype(np.float64), batch["yt"][i, :nt, 0].astype(np.float64))


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("kind", ALL_KERNELS + ["rbf"])
def test_kernel_matrix_matches_reference(kind):
    rng = np.random.default_rng(0)
    x1, x2 = rng.normal(size=(5, 2)), rng.normal(size=(4, 2))
    expected = ref_kernel("eq" if kind == "rbf" else kind, x1, x2, **PARAMS)
    np.testing.assert_allclose(gp.kernel_matrix(kind, x1, x2, **PARAMS), expected, rtol=1e-12)


@pytest.mark.parametrize("kind", ALL_KERNELS)
def test_empirical_covariance_matches_kernel_plus_noise(kind):
    rng = np.random.default_rng(1)
    xc, xt = np.array([[-1.0], [0.0], [0.3]]), np.array([[0.1], [0.9], [1.5]])
    noise, n = 0.3, 3000
    draws = np.array([np.concatenate(gp.sample_gp(rng, xc, xt, kind, **PARAMS, noise=noise)[:2])
                      for _ in range(n)])
    x = np.concatenate([xc, xt])
    expected = ref_kernel(kind, x, x, **PARAMS) + noise**2 * np.eye(6)
    empirical = np.cov(draws, rowvar=False)
    stderr = np.sqrt((np.outer(np.diag(expected), np.diag(expected)) + expected**2) / n)
    assert np.all(np.abs(empirical - expected) < 5 * stderr)
    assert np.all(np.abs(draws.mean(0)) < 5 * np.sqrt(np.diag(expected) / n))


# ----------------------------------------------------------------------------- gt loglik
@pytest.mark.parametrize("kind,noise_on,dim_x", [
    ("eq", "both", 1), ("matern32", "context", 1), ("periodic", "both", 1),
    ("matern12", "both", 2), ("matern52", "context", 2)])
def test_gt_loglik_matches_scipy_posterior(kind, noise_on, dim_x):
    task = GPTask(dim_x=dim_x, kernel=kind, **PARAMS, noise=0.1, noise_on=noise_on,
                  num_context=[0, 6], num_target=[1, 5])
    batch = task.sample(np.random.default_rng(2), 24, "train")
    sizes_c = batch["mask_c"].sum(1)
    assert (sizes_c == 0).any() and (sizes_c < 6).any() and (batch["mask_t"].sum(1) < 5).any()
    for i in range(24):
        marginal, joint = ref_loglik(kind, PARAMS, 0.1, noise_on, *real_points(batch, i))
        np.testing.assert_allclose(batch["gt_loglik"][i], marginal, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batch["gt_loglik_joint"][i], joint, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,noise_on,nc", [("eq", "both", 5), ("matern52", "context", 3),
                                            ("periodic", "both", 4), ("matern12", "both", 0)])
def test_gp_predictive_matches_the_posterior_by_hand(kind, noise_on, nc):
    rng = np.random.default_rng(4)
    xc, yc, xq = rng.uniform(-2, 2, (nc, 1)), rng.normal(size=nc), rng.uniform(-3, 3, (7, 1))
    mean, std = gp.gp_predictive(xc, yc, xq, kind, **PARAMS, noise=0.1, noise_on=noise_on)
    for j in range(7):  # one target at a time: its marginal density is N(y; mean_j, std_j^2)
        y = rng.normal()
        marginal, _ = ref_loglik(kind, PARAMS, 0.1, noise_on, xc, yc, xq[j:j + 1], np.array([y]))
        np.testing.assert_allclose(stats.norm(mean[j], std[j]).logpdf(y), marginal, rtol=1e-6, atol=1e-6)


def test_batches_carry_each_tasks_true_hyperparameters():
    task = GPTask(kernel=["eq", "matern32", "periodic"], lengthscale={"uniform": [0.2, 1.0]},
                  scale={"uniform": [0.5, 1.5]}, period={"uniform": [0.5, 1.0]}, noise=0.1,
                  num_context=[2, 6], num_target=4)
    batch = task.sample(np.random.default_rng(5), 12, "train")
    assert len(set(batch["gp_kernel"])) > 1
    for i in range(12):  # the recorded hyperparameters reproduce the task's exact ceiling
        kind = ALL_KERNELS[int(batch["gp_kernel"][i])]
        params = {k: float(batch["gp_" + k][i]) for k in PARAMS}
        marginal, joint = ref_loglik(kind, params, 0.1, "both", *real_points(batch, i))
        np.testing.assert_allclose(batch["gt_loglik"][i], marginal, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(batch["gt_loglik_joint"][i], joint, rtol=1e-4, atol=1e-4)


def test_gp_posterior_loglik_function_and_empty_context():
    rng = np.random.default_rng(3)
    xc, xt = rng.uniform(-2, 2, (4, 1)), rng.uniform(-2, 2, (3, 1))
    yc, yt = rng.normal(size=4), rng.normal(size=3)
    for x_c, y_c in ((xc, yc), (np.zeros((0, 1)), np.zeros(0))):
        got = gp.gp_posterior_loglik(x_c, y_c, xt, yt, "eq", **PARAMS, noise=0.2)
        np.testing.assert_allclose(got, ref_loglik("eq", PARAMS, 0.2, "both", x_c, y_c, xt, yt),
                                   rtol=1e-9)


def test_joint_loglik_is_chain_rule_of_conditionals():
    rng = np.random.default_rng(4)
    xc, xt = rng.uniform(-2, 2, (3, 1)), rng.uniform(-2, 2, (4, 1))
    yc, yt = rng.normal(size=3), rng.normal(size=4)
    joint = gp.gp_posterior_loglik(xc, yc, xt, yt, "matern32", noise=0.1)[1] * 4
    steps = [gp.gp_posterior_loglik(np.concatenate([xc, xt[:k]]), np.concatenate([yc, yt[:k]]),
                                    xt[k:k + 1], yt[k:k + 1], "matern32", noise=0.1)[0]
             for k in range(4)]
    np.testing.assert_allclose(joint, sum(steps), rtol=1e-9)


# ----------------------------------------------------------------------------- batches
def test_masks_padding_and_sizes():
    task = GPTask(num_context=[2, 9], num_target=[3, 7], context_range=[1.0, 2.0],
                  target_range=[-3.0, -1.0])
    batch = task.sample(np.random.default_rng(5), 64, "train")
    assert batch["xc"].shape == (64, 9, 1) and batch["xt"].shape == (64, 7, 1)
    assert all(v.dtype == np.float32 for v in batch.values())
    for key_x, key_y, key_m, (lo, hi) in (("xc", "yc", "mask_c", (2, 9)),
                                          ("xt", "yt", "mask_t", (3, 7))):
        mask, sizes = batch[key_m], batch[key_m].sum(1).astype(int)
        assert sizes.min() >= lo and sizes.max() <= hi and len(set(sizes)) > 3
        np.testing.assert_array_equal(mask, np.arange(mask.shape[1])[None] < sizes[:, None])
        for key in (key_x, key_y):
            assert np.all(batch[key][mask == 0] == 0)
    real_xc, real_xt = batch["xc"][batch["mask_c"] == 1], batch["xt"][batch["mask_t"] == 1]
    assert real_xc.min() >= 1.0 and real_xc.max() <= 2.0
    assert real_xt.min() >= -3.0 and real_xt.max() <= -1.0


def test_two_dimensional_inputs_with_per_dim_boxes():
    task = GPTask(dim_x=2, kernel=["eq", "periodic"], context_range=[[0.0, 1.0], [-5.0, -4.0]])
    batch = task.sample(np.random.default_rng(6), 8, "train")
    assert batch["xc"].shape[2] == 2 and batch["xt"].shape[2] == 2 and batch["yc"].shape[2] == 1
    x = np.concatenate([batch["xc"][batch["mask_c"] == 1], batch["xt"][batch["mask_t"] == 1]])
    assert np.all((x >= [0.0, -5.0]) & (x <= [1.0, -4.0]))
    assert np.all(np.isfinite(batch["gt_loglik"])) and np.all(np.isfinite(batch["gt_loglik_joint"]))


@pytest.mark.parametrize("shift", [0.7, [0.5, -1.0]])
def test_shift_moves_inputs_and_keeps_gt_loglik(shift):
    base = dict(dim_x=2, kernel=["eq", "matern52"], noise=0.2, num_context=[1, 8], num_target=8)
    plain = GPTask(**base).sample(np.random.default_rng(7), 16, "test")
    shifted_task = GPTask(**base, shift=shift)
    shifted = shifted_task.sample(np.random.default_rng(7), 16, "test")
    delta = np.broadcast_to(np.asarray(shift, np.float32), (2,))
    for key, mask in (("xc", "mask_c"), ("xt", "mask_t")):
        np.testing.assert_array_equal(plain[mask], shifted[mask])
        expected = np.where(plain[mask][..., None] == 1, plain[key] + delta, 0.0)
        np.testing.assert_allclose(shifted[key], expected, atol=1e-6)
    for key in ("gt_loglik", "gt_loglik_joint", "yc", "yt"):
        np.testing.assert_allclose(shifted[key], plain[key], rtol=1e-4, atol=1e-4)
    # other splits are not shifted by default
    train = shifted_task.sample(np.random.default_rng(7), 16, "train")
    np.testing.assert_array_equal(train["xc"], GPTask(**base).sample(
        np.random.default_rng(7), 16, "train")["xc"])


def test_priors_sample_in_their_ranges():
    task = GPTask(kernel="periodic", lengthscale={"loguniform": [0.25, 4.0]},
                  scale={"beta": [3.0, 7.0]}, period={"uniform": [0.5, 1.0]})
    rng = np.random.default_rng(8)
    draws = [task.sample_hyperparameters(rng)[1] for _ in range(4000)]
    ls, sc, pe = (np.array([d[k] for d in draws]) for k in ("lengthscale", "scale", "period"))
    assert ls.min() >= 0.25 and ls.max() <= 4.0 and abs(np.log(ls).mean()) < 0.05
    assert 0 < sc.min() and sc.max() < 1 and abs(sc.mean() - 0.3) < 0.01
    assert pe.min() >= 0.5 and pe.max() <= 1.0 and abs(pe.mean() - 0.75) < 0.01


# ----------------------------------------------------------------------------- datasets
def test_dataset_splits_reproducible_and_seeded():
    task = GPTask(num_context=[1, 4], num_target=3)

    def take(split, n, **kw):
        return [{k: v.numpy() for k, v in b.items()} for b in task.dataset(split, 4, **kw).take(n)]

    def same(a, b):
        return all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x)

    val = take("val", 10)
    assert len(val) == 8 and same(val, take("val", 10))  # finite, identical across calls
    assert same(take("test", 2, seed=5), take("test", 2, seed=9))
    assert not same(val[:2], take("test", 2))
    train0 = take("train", 20, seed=0)
    assert len(train0) == 20  # infinite
    assert same(train0[:3], take("train", 3, seed=0)) and not same(train0[:3], take("train", 3, seed=1))
    assert set(val[0]) >= {"gt_loglik", "gt_loglik_joint", "mask_c", "mask_t"}


# ----------------------------------------------------------------------------- registry
def test_registry_lists_presets_that_build_and_rebuild():
    reg = registry.reload()
    names = set(reg.names("task"))
    assert {"gp", "gp-taylorformer", "gp-te-tnp", "gp-tnp"} <= names
    for name in ("gp", "gp-taylorformer", "gp-te-tnp", "gp-tnp"):
        assert reg.entry("task", name).description
        task = registry.get("task", name)()
        config = json.loads(json.dumps(task.get_config()))
        assert GPTask(**config).get_config() == task.get_config()
        batch = task.sample(np.random.default_rng(0), 2, "test")
        assert np.all(np.isfinite(batch["gt_loglik_joint"]))


def test_preset_protocols():
    tf_task = registry.get("task", "gp-taylorformer")(kernel="matern52")
    batch = tf_task.sample(np.random.default_rng(0), 32, "train")
    total = batch["mask_c"].sum(1) + batch["mask_t"].sum(1)
    assert np.all(total == 100) and batch["mask_c"].sum(1).min() >= 3
    assert tf_task.sample_hyperparameters(np.random.default_rng(0))[1]["scale"] == 1.0

    tnp = registry.get("task", "gp-tnp")().sample(np.random.default_rng(0), 64, "train")
    nc, nt = tnp["mask_c"].sum(1), tnp["mask_t"].sum(1)
    assert nc.min() >= 3 and nc.max() <= 46 and nt.min() >= 3 and np.all(nc + nt <= 49)

    te = registry.get("task", "gp-te-tnp")(shift=0.5)
    assert te.max_context == 64 and te.max_target == 128
    test = te.sample(np.random.default_rng(0), 4, "test")
    assert np.all(test["mask_t"] == 1)
    xt = test["xt"][test["mask_t"] == 1]
    assert xt.min() >= -2.5 and xt.max() <= 3.5 and xt.max() > 3.0


@pytest.mark.parametrize("config,words", [
    ({"num_contexts": [1, 2]}, ["task 'gp'", "num_contexts", "did you mean 'num_context'", "Valid options"]),
    ({"lengthscale": {"normal": [0, 1]}}, ["lengthscale", "uniform"]),
    ({"scale": {"beta": [0.0, 2.0]}}, ["scale", "beta"]),
    ({"period": -1.0}, ["period", "positive"]),
    ({"kernel": "matern"}, ["matern", "matern52"]),
    ({"kernel": ["eq", "matern52"], "lengthscale": {"eq": 0.5}}, ["lengthscale", "matern52"]),
    ({"num_target": [0, 3]}, ["num_target"]),
    ({"num_context": [5, 60], "num_target": [3, 10], "num_total": [1, 50]}, ["Nc = 60"]),
    ({"context_range": [2.0, 1.0]}, ["context_range"]),
    ({"dim_x": 2, "shift": [1.0, 2.0, 3.0]}, ["shift"]),
    ({"noise_on": "target"}, ["noise_on"]),
    ({"shift_splits": ["tset"]}, ["tset"]),
])
def test_bad_config_raises_clear_error(config, words):
    with pytest.raises(SpecError) as info:
        make_task("gp", config)
    assert all(w in str(info.value) for w in words)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", ["gp", "gp-2d-bsa", "sawtooth"])
def test_padded_tasks_declare_static_batch_shapes(name):
    """Batches padded to max_context / max_target have static shapes in the tf.data stream
    (so a compiled step sees them: XLA compiles once, attention stays on its dense path)."""
    task = registry.get("task", name)()
    spec = task.dataset("train", batch_size=3).element_spec
    assert spec["xc"].shape.as_list() == [3, task.max_context, task.dim_x]
    assert spec["yt"].shape.as_list() == [3, task.max_target, task.dim_y]
    assert spec["mask_t"].shape.as_list() == [3, task.max_target]
    batch = next(iter(task.dataset("val", batch_size=3, num_batches=1)))
    assert all(batch[k].shape.as_list() == spec[k].shape.as_list() for k in spec)
