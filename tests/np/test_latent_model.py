"""The latent model kind with the NP / ANP presets: the KL and log densities against
tensorflow-probability, the ELBO, the importance-weighted objective and the predictive
log-likelihood against NumPy evaluations with the same weights and draws, the presets'
sizes, training through the library, and the refusals."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfp = pytest.importorskip("tensorflow_probability")

import taylorformer as tfm  # noqa: E402
from taylorformer.batch import with_masks  # noqa: E402
from taylorformer.errors import SpecError  # noqa: E402
from taylorformer.models.latent import PREDICTIVE_SEED, gaussian_kl, gaussian_log_density  # noqa: E402

SMALL = {"width": 16, "latent_dim": 4, "num_heads": 2, "eval_samples": 5}


def small(preset, **encoder):
    return tfm.build_model({"preset": preset, "encoder": {**SMALL, **encoder}, "head": {"width": 16}})


def randomise(model, seed):
    rng = np.random.default_rng(seed)
    for v in model.trainable_variables:
        v.assign(rng.normal(0, 0.3, v.shape).astype("float32"))


def padded_batch(seed):
    """3 tasks; the last has two padded targets and a missing (NaN) target value."""
    rng = np.random.default_rng(seed)
    b, nc, nt = 3, 5, 4
    batch = {"xc": rng.normal(size=(b, nc, 1)), "yc": rng.normal(size=(b, nc, 1)),
             "xt": rng.normal(size=(b, nt, 1)), "yt": rng.normal(size=(b, nt, 1)),
             "mask_c": np.ones((b, nc)), "mask_t": np.ones((b, nt))}
    batch["mask_t"][2, 2:] = 0
    batch["mask_c"][1, 3:] = 0
    batch["yt"][0, 1, 0] = np.nan
    return {k: v.astype("float32") for k, v in batch.items()}


def np_head(model, inputs):
    x = inputs
    for dense in model.head.hidden:
        x = np.maximum(x @ dense.kernel.numpy() + dense.bias.numpy(), 0)
    raw = x @ model.head.out.kernel.numpy() + model.head.out.bias.numpy()
    loc, pre = np.split(raw, 2, -1)
    return loc, 0.1 + 0.9 * np.log1p(np.exp(pre))  # np-normal, min_scale 0.1


def np_normal_logpdf(y, loc, scale):
    return -0.5 * ((y - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)


def per_draw_loglik(model, batch, z):
    """NumPy: log p(yt_i | z_k) per draw and target ``[K, B, Nt]`` (observed values only),
    from the encoder's decoder inputs and the head in NumPy."""
    prepared = with_masks(batch)
    inputs = model.encoder(prepared, tf.constant(z)).numpy()
    loc, scale = np_head(model, inputs)
    y = np.nan_to_num(batch["yt"])[None]
    observed = prepared["observed_t"].numpy()[None]
    return (np_normal_logpdf(y, loc, scale) * observed).sum(-1)


def test_kl_and_log_density_match_tfp():
    rng = np.random.default_rng(0)
    q_loc, p_loc = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    q_scale, p_scale = rng.uniform(0.1, 2, (2, 3, 5)), rng.uniform(0.1, 2, (2, 3, 5))
    q, p = tfp.distributions.Normal(q_loc, q_scale), tfp.distributions.Normal(p_loc, p_scale)
    np.testing.assert_allclose(gaussian_kl(q_loc, q_scale, p_loc, p_scale).numpy(),
                               tfp.distributions.kl_divergence(q, p).numpy().sum(-1), rtol=1e-10)
    z = rng.normal(size=(2, 3, 5))
    np.testing.assert_allclose(gaussian_log_density(z, q_loc, q_scale).numpy(), q.log_prob(z).numpy().sum(-1),
                               rtol=1e-10)


@pytest.mark.parametrize("preset, objective, reconstruct", [("np", "elbo", False), ("anp", "iwae", False),
                                                              ("np", "iwae", True), ("anp", "elbo", True)])
def test_training_objective_matches_numpy(preset, objective, reconstruct):
    """With ``reconstruct_context`` the targets are the context and targets together and q
    is computed from that set (NumPy: a batch built that way by hand)."""
    model = small(preset, objective=objective, reconstruct_context=reconstruct)
    randomise(model, 1)
    batch = padded_batch(2)
    eps = np.random.default_rng(3).normal(size=(3, 3, 4)).astype("float32")  # S=3 draws
    got = model.objective(with_masks(batch), tf.constant(eps)).numpy()

    prepared = with_masks(batch)
    p_loc, p_scale = (t.numpy().astype(np.float64) for t in model.latent(prepared))
    q_loc, q_scale = (t.numpy().astype(np.float64) for t in model.latent(prepared, posterior=True))
    real = 4 + 3 + 2  # mask_t is 0 at padding and at the point whose only value is missing
    if reconstruct:
        batch = {**batch, "xt": np.concatenate([batch["xc"], batch["xt"]], 1),
                 "yt": np.concatenate([batch["yc"], batch["yt"]], 1),
                 "mask_t": np.concatenate([batch["mask_c"], batch["mask_t"]], 1)}
        prepared = with_masks(batch)
        q_loc, q_scale = (t.numpy().astype(np.float64) for t in model.encoder.latent_parameters(
            prepared["xt"], prepared["yt"], prepared["mask_t"]))
        real += 5 + 3 + 5
    z = q_loc + q_scale * eps
    logp = per_draw_loglik(model, batch, z.astype("float32"))  # [S, B, Nt]
    mask = prepared["mask_t"].numpy()
    assert mask.sum() == real
    recon = (logp * mask[None]).sum(-1)  # [S, B]
    count = mask.sum(-1)
    if objective == "elbo":
        kl = 0.5 * ((q_scale / p_scale) ** 2 + ((q_loc - p_loc) / p_scale) ** 2 - 1
                    - 2 * np.log(q_scale / p_scale)).sum(-1)
        want = (recon.mean(0) - kl) / count
    else:
        log_w = (recon + np_normal_logpdf(z, p_loc, p_scale).sum(-1) - np_normal_logpdf(z, q_loc, q_scale).sum(-1))
        top = log_w.max(0)
        want = (top + np.log(np.exp(log_w - top).mean(0))) / count
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    assert model.latent(prepared, posterior=True)[0].shape == (3, 4)


def test_predictive_loglik_is_the_mixture_over_prior_draws():
    """loglik = mean over real targets of log (1/K) sum_k p(yt | z_k), z_k = prior loc +
    scale * the fixed stateless draws; mean and stddev are the mixture's."""
    model = small("anp")
    randomise(model, 4)
    batch = padded_batch(5)
    prepared = with_masks(batch)
    loc, scale = (t.numpy() for t in model.latent(prepared))
    eps = tf.random.stateless_normal([5, 3, 4], PREDICTIVE_SEED).numpy()
    z = loc + scale * eps
    logp = per_draw_loglik(model, batch, z.astype("float32"))  # [K, B, Nt]
    top = logp.max(0)
    mixture = top + np.log(np.exp(logp - top).mean(0))
    mask = prepared["mask_t"].numpy()
    want = (mixture * mask).sum(-1) / mask.sum(-1)
    np.testing.assert_allclose(tfm.loglik(model, batch).numpy(), want, rtol=1e-5, atol=1e-5)
    inputs = model.encoder(prepared, tf.constant(z.astype("float32"))).numpy()
    locs, scales = np_head(model, inputs)
    pred = tfm.predict(model, {k: v for k, v in batch.items() if k != "yt"})
    np.testing.assert_allclose(pred["mean"].numpy(), locs.mean(0), rtol=1e-4, atol=1e-5)
    second = (scales ** 2 + locs ** 2).mean(0) - locs.mean(0) ** 2
    np.testing.assert_allclose(pred["stddev"].numpy(), np.sqrt(second), rtol=1e-4, atol=1e-5)


def test_presets_have_the_papers_sizes():
    """Count the NP's weights by hand from App. A.1 of the Taylorformer paper (width 128,
    z 128; latent path 3 + 2 dense layers, deterministic 4, decoder 4 on [r, z, x])."""
    dense = lambda n_in, n_out: n_in * n_out + n_out  # noqa: E731
    w = 128
    deterministic = dense(2, w) + 3 * dense(w, w)
    latent = dense(2, w) + 2 * dense(w, w) + dense(w, w) + dense(w, 2 * w)
    decoder = dense(2 * w + 1, w) + 2 * dense(w, w) + dense(w, 2)
    model = tfm.build_model("np")
    assert model.spec["kind"] == "latent" and type(model).__name__ == "LatentNP"
    assert sum(int(np.prod(v.shape)) for v in model.trainable_variables) == deterministic + latent + decoder
    anp = tfm.build_model("anp")
    assert anp.encoder.self_attention and anp.encoder.num_heads == 8 and anp.spec["encoder"]["name"] == "anp"


@pytest.mark.parametrize("preset", ["np", "anp"])
def test_presets_train_and_loss_goes_down(preset):
    """A few Adam steps on one fixed GP batch lower the training objective."""
    from taylorformer.task import make_task

    model = small(preset)
    task = make_task("gp", {"num_context": [8, 8], "num_target": 8})
    batch = next(iter(task.dataset("train", batch_size=8, seed=0)))
    batch = {k: v for k, v in batch.items() if k in ("xc", "yc", "xt", "yt")}
    model.compile(optimizer="adam")
    model.optimizer.learning_rate.assign(5e-3)
    before = float(model.np_loss(batch)[0])
    model.fit(tf.data.Dataset.from_tensors(batch).repeat(30), epochs=1, verbose=0)
    after = float(model.np_loss(batch)[0])
    assert np.isfinite(after) and after < before - 0.05


@pytest.mark.slow
def test_train_evaluate_by_name_and_reload(tmp_path):
    """``train`` builds the preset by name, evaluates, and the saved model loads back with
    the same log-likelihood. Slow: the training workflow's fixed cost (run directory,
    checkpoints, tracing), about 15 s on a 2-core CPU."""
    from taylorformer.workflow import training

    spec = {"preset": "np", "encoder": SMALL, "head": {"width": 16}}
    trainer = training.train(spec, "gp", {"num_context": [3, 8], "num_target": 8}, out_dir=str(tmp_path / "run"),
                             steps=2, batch_size=4, val_every=2, val_batches=1, verbose=0, eval_batches=1)
    assert np.isfinite(trainer.evaluation["loglik"]["mean"])
    path = str(tmp_path / "m.keras")
    trainer.model.save(path)
    batch = padded_batch(6)
    np.testing.assert_allclose(tfm.load_model(path).distribution(batch).log_prob(np.nan_to_num(batch["yt"])),
                               trainer.model.distribution(batch).log_prob(np.nan_to_num(batch["yt"])), rtol=1e-6)


@pytest.mark.parametrize("override, message", [
    ({"encoder": "deepset"}, "not a latent encoder"),
    ({"likelihood": "student-t"}, "Gaussian likelihood"),
    ({"wrapper": "local-taylor"}, "takes no wrapper"),
    ({"encoder": {"objective": "ml"}}, "objective"),
])
def test_refusals(override, message):
    with pytest.raises(SpecError, match=message):
        tfm.build_model({"preset": "np", **override})


def test_window_standardisation_is_affine_equivariant():
    """With ``standardise: window`` the network reads each window in its own units, so
    mapping every y to a + c y changes the training objective and the predictive
    log-likelihood per point by exactly -log c."""
    model = tfm.build_model({"preset": "np", "standardise": "window", "encoder": SMALL, "head": {"width": 16}})
    randomise(model, 7)
    batch = padded_batch(8)
    moved = {**batch, "yc": 100.0 + 30.0 * batch["yc"], "yt": 100.0 + 30.0 * batch["yt"]}
    eps = tf.constant(np.random.default_rng(9).normal(size=(2, 3, 4)).astype("float32"))
    base, out = (model.objective(with_masks(b), eps).numpy() for b in (batch, moved))
    np.testing.assert_allclose(out, base - np.log(30.0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tfm.loglik(model, moved).numpy(), tfm.loglik(model, batch).numpy() - np.log(30.0),
                               rtol=1e-4, atol=1e-4)
