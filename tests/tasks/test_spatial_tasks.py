"""Spatial tasks of BSA-TNP (tasks/spatial_gp.py, sir.py, sphere.py): shapes, masks, domains, exact ceilings, SIR dynamics."""
import numpy as np
import pytest

from taylorformer import registry
from taylorformer.models import build_model
from taylorformer.models.inference import loglik, predict
from taylorformer.tasks.gaussian_process import gp_posterior_loglik
from taylorformer.tasks.sir import SIRTask, simulate_sir, sir_offsets
from taylorformer.tasks.spatial_gp import GP2DTask
from taylorformer.tasks.sphere import euler_yxz, great_circle, latlon_to_xyz, random_rotation, xyz_to_latlon

SMALL_GP = {"num_context": [10, 20], "num_target": 16}


def recording(task, method):
    """Wrap ``task.method`` to record what it returns, in call order."""
    seen, original = [], getattr(task, method)

    def wrapped(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append(out)
        return out

    setattr(task, method, wrapped)
    return seen


def check_masks(batch, nc_range, nt_range):
    for m, (lo, hi) in (("mask_c", nc_range), ("mask_t", nt_range)):
        n = batch[m].sum(1)
        assert np.all((n >= lo) & (n <= hi)), (m, n)
        for row, k in zip(batch[m], n.astype(int)):  # real points first, then padding
            assert row[:k].all() and not row[k:].any()
    for key, m in (("xc", "mask_c"), ("yc", "mask_c"), ("xt", "mask_t"), ("yt", "mask_t")):
        assert np.all(batch[key][batch[m] == 0] == 0)


def test_registered():
    for name in ("gp-2d-bsa", "sir", "generic-spatial", "sphere-gp"):
        assert registry.entry("task", name).name == name


# ---------------------------------------------------------------------- 2-D GP
def test_gp2d_defaults_follow_the_paper():
    task = GP2DTask()
    assert (task.num_context, task.num_target, task.noise, task.noise_on) == ((128, 511), (1024, 1024), 0.1, "context")
    assert task.get_config()["lengthscale"] == {"beta": [3.0, 7.0]}
    scaled = GP2DTask(domain="scaled")
    assert (scaled.num_context, scaled.num_target) == ((512, 2044), (4096, 4096))
    ls = [GP2DTask().sample_hyperparameters(np.random.default_rng(i))[1]["lengthscale"] for i in range(2000)]
    assert abs(np.mean(ls) - 0.3) < 0.01  # Beta(3, 7) has mean 0.3
    with pytest.raises(Exception, match="domain"):
        GP2DTask(domain="moon")


@pytest.mark.parametrize("domain,box,target_box", [
    ("train", (-2, 2), (-2, 2)), ("shifted", (8, 12), (8, 12)), ("scaled", (-4, 4), (-4, 4)),
    ("multires", (-1.5, 1.5), (-0.5, 0.5))])
def test_gp2d_domains_shapes_and_ceiling(domain, box, target_box):
    task = GP2DTask(domain=domain, **SMALL_GP)
    hypers = recording(task, "sample_hyperparameters")
    batch = task.sample(np.random.default_rng(0), 3, "test")
    f = 4 if domain == "scaled" else 1
    assert batch["xc"].shape == (3, 20 * f, 2) and batch["yt"].shape == (3, 16 * f, 1)
    check_masks(batch, (10 * f, 20 * f), (16 * f, 16 * f))
    for i, (kind, params) in enumerate(hypers):
        nc, nt = int(batch["mask_c"][i].sum()), int(batch["mask_t"][i].sum())
        xc, xt = batch["xc"][i, :nc], batch["xt"][i, :nt]
        assert xc.min() >= box[0] and xc.max() <= box[1]
        assert xt.min() >= target_box[0] and xt.max() <= target_box[1]
        if domain == "multires":  # half of the context in the fine inner box
            inner = np.all(np.abs(xc) <= 0.5, axis=1).sum()
            assert inner >= nc // 2
        marginal, joint = gp_posterior_loglik(xc, batch["yc"][i, :nc, 0], xt, batch["yt"][i, :nt, 0],
                                              kind, **params, noise=0.1, noise_on="context")
        np.testing.assert_allclose(batch["gt_loglik"][i], marginal, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batch["gt_loglik_joint"][i], joint, rtol=1e-5, atol=1e-5)


def test_gp2d_dataset_and_config_roundtrip():
    task = registry.get("task", "gp-2d-bsa")(domain="shifted", **SMALL_GP)
    again = GP2DTask(**task.get_config())
    a = task.sample(np.random.default_rng(1), 2, "val")
    b = again.sample(np.random.default_rng(1), 2, "val")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    batch = next(iter(task.dataset("val", batch_size=2, num_batches=1)))
    assert set(batch) >= {"xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik"}


def test_gp2d_multires_pool_follows_the_authors_split():
    """multires_targets='pool' (MLGlobalHealth/dl4bi multiscale_2d_gp.py, batch_BLD): a pool of
    max_context + max_target locations, half in [-0.5, 0.5]^2 and half in [-1.5, 1.5]^2, in
    random order; the context is the first Nc of its first max_context, the targets the next
    max_target. Checked against the same draws made by hand, and by the inner share."""
    task = GP2DTask(domain="multires", multires_targets="pool", num_context=[64, 127], num_target=128)
    assert (task.max_context, task.max_target) == (127, 128)
    rng, again = np.random.default_rng(5), np.random.default_rng(5)
    xc, xt = task.locations(rng, 100, 128, "test")
    pool = np.concatenate([again.uniform(-0.5, 0.5, (127, 2)), again.uniform(-1.5, 1.5, (128, 2))])
    pool = pool[again.permutation(255)].astype(np.float32)
    np.testing.assert_array_equal(xc, pool[:100])
    np.testing.assert_array_equal(xt, pool[127:])
    inner_share = []
    for seed in range(40):
        xc, xt = task.locations(np.random.default_rng(seed), 100, 128, "train")
        both = np.concatenate([xc, xt])
        assert np.abs(both).max() <= 1.5 and len(np.unique(both, axis=0)) == 228  # no point in both sets
        inner_share.append(np.all(np.abs(both) <= 0.5, axis=1).mean())
    # half of the pool is inner, and a ninth of the outer box lies inside the inner one
    assert abs(np.mean(inner_share) - (0.5 + 0.5 / 9)) < 0.02
    batch = task.sample(np.random.default_rng(0), 2, "test")
    check_masks(batch, (64, 127), (128, 128))
    assert GP2DTask(**task.get_config()).get_config() == task.get_config()
    with pytest.raises(Exception, match="multires_targets"):
        GP2DTask(domain="multires", multires_targets="half")


# ---------------------------------------------------------------------- SIR
def test_sir_simulator_conservation_and_monotone_recoveries():
    rng = np.random.default_rng(0)
    b, g, steps = 6, 32, 25
    beta = rng.beta(2, 8, b)
    gamma = 0.4 / rng.gamma(5, 1, b)
    initial = rng.integers(1, 5, b)
    states = simulate_sir(rng, beta, gamma, initial, grid=g, steps=steps, radius=3.0)
    assert states.shape == (steps + 1, b, g, g) and states.dtype == np.int8
    counts = np.stack([(states == s).sum((2, 3)) for s in range(3)], -1)  # [T+1, B, 3]
    assert np.all(counts.sum(-1) == g * g)  # S + I + R constant
    assert np.all(np.diff(counts[..., 2], axis=0) >= 0)  # R monotone (count)
    assert np.all(np.diff(counts[..., 0], axis=0) <= 0)  # S never grows
    np.testing.assert_array_equal(counts[0, :, 1], initial)
    assert np.all(np.diff(states.astype(int), axis=0) >= 0)  # per cell only S -> I -> R
    assert np.all(np.diff(states.astype(int), axis=0) <= 1)  # (no jump S -> R)
    assert counts[-1, :, 2].sum() > 0 and (counts[-1, :, 1] + counts[-1, :, 2] > initial).any()
    # a new infection needs an infected cell within the contact radius one step earlier
    offs, _ = sir_offsets(3.0)
    for t in range(steps):
        new = (states[t] == 0) & (states[t + 1] == 1)
        infected = np.pad(states[t] == 1, ((0, 0), (3, 3), (3, 3)))
        near = np.zeros_like(new)
        for dy, dx in offs:
            near |= infected[:, 3 + dy:3 + dy + g, 3 + dx:3 + dx + g]
        assert not (new & ~near).any()


@pytest.mark.parametrize("domain,lim,cells", [("train", 2, 64), ("shifted", (8, 12), 64), ("scaled", 4, 128)])
def test_sir_task_batches(domain, lim, cells):
    lo, hi = (-lim, lim) if np.isscalar(lim) else lim
    task = SIRTask(domain=domain, steps=8, num_context=[12, 20], num_target=30, encoding="onehot")
    assert (task.dim_x, task.dim_y) == (2, 3) and task.cells == cells
    batch = task.sample(np.random.default_rng(0), 3, "train")
    f = 4 if domain == "scaled" else 1
    assert batch["xc"].shape == (3, 20 * f, 2) and batch["yt"].shape == (3, 20 * f + 30 * f, 3)
    check_masks(batch, (12 * f, 20 * f), (42 * f, 50 * f))
    step = (hi - lo) / cells
    for i in range(3):
        nc, nt = int(batch["mask_c"][i].sum()), int(batch["mask_t"][i].sum())
        assert nt == nc + 30 * f
        # the context points are among the targets (first nc), with the same values
        np.testing.assert_array_equal(batch["xt"][i, :nc], batch["xc"][i, :nc])
        np.testing.assert_array_equal(batch["yt"][i, :nc], batch["yc"][i, :nc])
        xt = batch["xt"][i, :nt]
        assert len(np.unique(xt, axis=0)) == nt  # distinct cells
        assert xt.min() > lo and xt.max() < hi
        np.testing.assert_allclose((xt - lo) / step % 1, 0.5, atol=1e-4)  # cell centres
        np.testing.assert_array_equal(batch["yt"][i, :nt].sum(-1), 1.0)  # one-hot
    # the default (the paper's categorical states): the class label of the same cells
    state = SIRTask(domain=domain, steps=8, num_context=[12, 20], num_target=30)
    assert state.encoding == "state" and state.dim_y == 1
    labels = state.sample(np.random.default_rng(0), 3, "train")
    np.testing.assert_array_equal(labels["xt"], batch["xt"])
    np.testing.assert_array_equal(labels["yt"][..., 0], np.argmax(batch["yt"], -1) * batch["mask_t"])


def test_sir_states_through_the_categorical_likelihood():
    """The paper's SIR likelihood: log P(y = state) = log_softmax(logits)[state] per cell,
    against NumPy; the predictive mean is the expected class index."""
    task = SIRTask(steps=4, grid=16, num_context=[5, 9], num_target=8)
    model = build_model("bsa-tnp", dim_x=2, dim_y=1, likelihood={"name": "categorical", "classes": 3},
                        encoder={"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8,
                                 "embed_widths": [16], "ffn_width": 16})
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("val", batch_size=2, num_batches=1))).items()}
    logits = np.asarray(model(batch)["logits"], np.float64)  # [B, Nt, 1, 3]
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    y = batch["yt"][..., 0].astype(int)
    per_point = np.take_along_axis(log_p[:, :, 0], y[..., None], -1)[..., 0]  # [B, Nt]
    mask = batch["mask_t"]
    np.testing.assert_allclose(loglik(model, batch).numpy(), (per_point * mask).sum(1) / mask.sum(1), rtol=1e-5)
    p = np.exp(log_p[:, :, 0])
    np.testing.assert_allclose(predict(model, batch)["mean"][..., 0], p @ np.arange(3.0), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- generic spatial
def test_generic_spatial_batches_and_ceiling():
    task = registry.get("task", "generic-spatial")()
    assert (task.dim_x, task.dim_y) == (10, 1)
    params = recording(task, "sample_parameters")
    batch = task.sample(np.random.default_rng(0), 3, "test")
    assert batch["xc"].shape == (3, 64, 10) and batch["sc"].shape == (3, 64, 2)
    assert batch["xt"].shape == (3, 64, 10) and batch["st"].shape == (3, 64, 2)
    check_masks(batch, (13, 64), (64, 64))
    for i, (ell, coef, sigma) in enumerate(params):
        nc = int(batch["mask_c"][i].sum())
        rc = batch["yc"][i, :nc, 0] - batch["xc"][i, :nc].astype(np.float64) @ coef
        rt = batch["yt"][i, :, 0] - batch["xt"][i].astype(np.float64) @ coef
        marginal, joint = gp_posterior_loglik(batch["sc"][i, :nc], rc, batch["st"][i], rt, "eq",
                                              lengthscale=ell, noise=sigma)
        np.testing.assert_allclose(batch["gt_loglik"][i], marginal, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batch["gt_loglik_joint"][i], joint, rtol=1e-5, atol=1e-5)
    # the fixed effects explain a large part of y (linear effect, coefficients ~ N(0, 1))
    assert np.var(batch["yt"]) > 2.0
    ds = next(iter(task.dataset("val", batch_size=2, num_batches=1)))
    assert ds["sc"].shape[-1] == 2 and ds["st"].shape[-1] == 2


def test_generic_spatial_noise_std_prior_and_space_in_x():
    """noise_std_scale: sigma ~ HalfNormal(scale) (E sigma = scale sqrt(2 / pi)); groups_in_x: the
    same batch with x = [fixed effects, s] and no sc/st."""
    task = registry.get("task", "generic-spatial")(noise_std_scale=0.1)
    sigmas = np.array([task.sample_parameters(np.random.default_rng(i))[2] for i in range(4000)])
    assert abs(sigmas.mean() - 0.1 * np.sqrt(2 / np.pi)) < 0.003 and sigmas.min() >= 0
    config = {"noise_std_scale": 0.1, "num_context": [13, 63]}
    apart = registry.get("task", "generic-spatial")(**config)
    joined = registry.get("task", "generic-spatial")(**config, groups_in_x=True)
    assert (apart.dim_x, joined.dim_x) == (10, 12) and joined.get_config()["groups_in_x"] is True
    a, b = apart.sample(np.random.default_rng(3), 2, "test"), joined.sample(np.random.default_rng(3), 2, "test")
    assert "sc" not in b and "st" not in b
    for x, s in (("xc", "sc"), ("xt", "st")):
        np.testing.assert_array_equal(b[x], np.concatenate([a[x], a[s]], -1))
    for key in ("yc", "yt", "mask_c", "mask_t", "gt_loglik"):
        np.testing.assert_array_equal(a[key], b[key])
    ds = next(iter(joined.dataset("val", batch_size=2, num_batches=1)))
    assert ds["xc"].shape[-1] == 12 and "sc" not in ds
    with pytest.raises(Exception, match="groups_in_x"):
        registry.get("task", "generic-spatial")(groups_in_x="yes")


# ---------------------------------------------------------------------- sphere
def test_rotations_and_coordinates():
    rng = np.random.default_rng(0)
    for rot in (random_rotation(rng), euler_yxz([-60, 30, 20])):
        np.testing.assert_allclose(rot @ rot.T, np.eye(3), atol=1e-12)
        assert abs(np.linalg.det(rot) - 1) < 1e-12
    # Ry(-60) moves (lat 0, lon 0) 60 degrees north
    np.testing.assert_allclose(xyz_to_latlon(euler_yxz([-60, 0, 0]) @ latlon_to_xyz(np.zeros(2))), [60, 0], atol=1e-9)
    pts = np.stack([rng.uniform(-80, 80, 20), rng.uniform(-180, 180, 20)], -1)
    np.testing.assert_allclose(xyz_to_latlon(latlon_to_xyz(pts)), pts, atol=1e-9)
    u = latlon_to_xyz(pts)
    r = random_rotation(rng)
    np.testing.assert_allclose(great_circle(u @ r.T, u @ r.T), great_circle(u, u), atol=1e-6)
    np.testing.assert_allclose(great_circle(latlon_to_xyz(np.array([[0.0, 0.0]])),
                                            latlon_to_xyz(np.array([[0.0, 90.0]]))), [[90.0]])


@pytest.mark.parametrize("rotation", [None, [-60, 30, 20], "random"])
def test_sphere_gp_batches_and_ceiling(rotation):
    task = registry.get("task", "sphere-gp")(num_context=[10, 20], num_target=15, rotation=rotation)
    ells = recording(task, "sample_lengthscale")
    batch = task.sample(np.random.default_rng(0), 3, "test")
    assert batch["xc"].shape == (3, 20, 2) and batch["xt"].shape == (3, 15, 2)
    check_masks(batch, (10, 20), (15, 15))
    for i, ell in enumerate(ells):
        nc = int(batch["mask_c"][i].sum())
        x = np.concatenate([batch["xc"][i, :nc], batch["xt"][i]]).astype(np.float64)
        if rotation is None:
            assert np.abs(x).max() <= 10.0 + 1e-4
        elif rotation != "random":
            assert x[:, 0].mean() > 40  # rotated 60 degrees north
        # independent ceiling: exponential kernel of the haversine distance (degrees)
        lat, lon = np.radians(x[:, 0]), np.radians(x[:, 1])
        hav = (np.sin((lat[:, None] - lat[None]) / 2) ** 2
               + np.cos(lat)[:, None] * np.cos(lat)[None] * np.sin((lon[:, None] - lon[None]) / 2) ** 2)
        d = np.degrees(2 * np.arcsin(np.sqrt(np.clip(hav, 0, 1))))
        cov = np.exp(-d / ell) + np.diag(np.r_[np.full(nc, 0.01), np.zeros(15)] + 1e-8)
        y = np.concatenate([batch["yc"][i, :nc, 0], batch["yt"][i, :, 0]])
        k_cc, k_tc = cov[:nc, :nc], cov[nc:, :nc]
        mean = k_tc @ np.linalg.solve(k_cc, y[:nc])
        var = np.diag(cov[nc:, nc:] - k_tc @ np.linalg.solve(k_cc, k_tc.T))
        want = -0.5 * np.mean(np.log(2 * np.pi * var) + (y[nc:] - mean) ** 2 / var)
        np.testing.assert_allclose(batch["gt_loglik"][i], want, rtol=1e-4, atol=1e-4)
    # the train split is never rotated
    train = task.sample(np.random.default_rng(0), 1, "train")
    assert np.abs(train["xc"][0, :int(train["mask_c"][0].sum())]).max() <= 10.0 + 1e-4


def test_sphere_gp_xyz_coords():
    task = registry.get("task", "sphere-gp")(num_context=5, num_target=5, coords="xyz")
    batch = task.sample(np.random.default_rng(0), 2, "train")
    assert task.dim_x == 3
    np.testing.assert_allclose(np.linalg.norm(batch["xc"], axis=-1), 1.0, atol=1e-6)


# ---------------------------------------------------------------------- end to end
@pytest.mark.parametrize("name,config,encoder", [
    ("gp-2d-bsa", SMALL_GP, {}),
    ("sir", {"steps": 4, "num_context": [5, 9], "num_target": 8}, {}),
    ("generic-spatial", {"num_context": [5, 9], "num_target": 7}, {}),
    ("sphere-gp", {"num_context": [5, 9], "num_target": 7, "rotation": "random"},
     {"attention": {"groups": [{"name": "space", "distance": "geodesic"}]}}),
])
def test_bsa_tnp_runs_on_every_task(name, config, encoder):
    task = registry.get("task", name)(**config)
    model = build_model("bsa-tnp", dim_x=task.dim_x, dim_y=task.dim_y,
                        encoder={"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8,
                                 "embed_widths": [16], "ffn_width": 16, **encoder})
    batch = next(iter(task.dataset("val", batch_size=2, num_batches=1)))
    ll = loglik(model, batch).numpy()
    assert ll.shape == (2,) and np.all(np.isfinite(ll))
