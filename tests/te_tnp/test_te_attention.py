"""TE attention, TE-TNP and TE-PT-TNP: exact properties, not loss curves.

Equivariance tests use inputs on a dyadic grid (multiples of 1/64) and shifts on the
same grid, |shift| <= 1e3, so that the shifted float32 inputs represent the shifted
values exactly; any difference then comes from the model's arithmetic (differences
x_q - x_k are formed per pair, and the encoders centre locations at the masked context
mean). With generic float inputs the shifted inputs themselves are rounded (half an ulp
at 1e3 is 3e-5), which bounds what any float32 model can achieve.
"""
import numpy as np
import pytest
import tensorflow as tf

from taylorformer import registry
from taylorformer.models import build_model
from taylorformer.plugins.te_tnp.attention import TEAttention

TOL = 2e-5  # float32 equivariance tolerance (outputs are O(1))
SHIFTS = [0.515625, -37.25, 1000.0]  # on the 1/64 grid


def small(name, dim_x=1, **encoder):
    enc = {"layers": 2, "width": 16, "num_heads": 2, "head_dim": 8, **encoder}
    if name != "tnp-d":
        enc["attention"] = {"kernel_width": 16, **encoder.get("attention", {})}
    if name == "te-pt-tnp":
        enc.setdefault("num_pseudo", 5)
    return build_model(name, dim_x=dim_x, encoder=enc, head={"width": 16, "hidden_layers": 1})


def grid_batch(rng, b=2, nc=9, nt=6, dim_x=1):
    grid = lambda n, lim: (rng.integers(-lim * 64, lim * 64, (b, n, dim_x)) / 64).astype(np.float32)  # noqa: E731
    return {"xc": grid(nc, 2), "yc": rng.normal(size=(b, nc, 1)).astype(np.float32),
            "xt": grid(nt, 3), "yt": np.zeros((b, nt, 1), np.float32)}


def moved(batch, fn):
    out = dict(batch)
    out["xc"], out["xt"] = fn(batch["xc"]), fn(batch["xt"])
    return out


def params(model, batch):
    out = model(batch)
    return np.concatenate([np.asarray(out["loc"]), np.asarray(out["scale"])], -1)


MODELS = [
    ("te-tnp", {}),
    ("te-tnp", {"attention": {"form": "pre", "relative": "rbf"}}),
    ("te-tnp", {"attention": {"location_update": True}}),
    ("te-pt-tnp", {}),
    ("te-pt-tnp", {"style": "perceiver", "init": "attention", "attention": {"location_update": True}}),
    ("te-tnp", {"update_order": "parallel", "attention": {"location_update": True}}),  # the preset before issue 35
]


def test_registered():
    assert registry.get("attention", "te") is TEAttention
    for name in ("te-tnp", "te-pt-tnp"):
        spec = registry.get("model", name)
        assert spec["encoder"]["attention"]["name"] == "te"
    assert registry.entry("encoder", "pseudo-token").name == "pseudo-token"


@pytest.mark.parametrize("name,encoder", MODELS)
def test_translation_equivariance(name, encoder):
    rng = np.random.default_rng(0)
    model = small(name, dim_x=2, **encoder)
    batch = grid_batch(rng, dim_x=2)
    base = params(model, batch)
    for s in SHIFTS:
        shift = (np.float32(s) * rng.choice([-1, 1], 2)).astype(np.float32)
        out = params(model, moved(batch, lambda x: x + shift))
        np.testing.assert_allclose(out, base, atol=TOL, rtol=TOL, err_msg=f"shift {shift}")


def test_equivariance_test_fails_for_tnp_d():
    rng = np.random.default_rng(0)
    model = small("tnp-d", dim_x=2)
    batch = grid_batch(rng, dim_x=2)
    base = params(model, batch)
    for s in SHIFTS:
        err = np.abs(params(model, moved(batch, lambda x: x + np.float32(s))) - base).max()
        assert err > 1e3 * TOL, f"tnp-d unexpectedly equivariant at shift {s}: {err}"


def rotation(deg):
    t = np.deg2rad(deg)
    return np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]], np.float32)


def test_rotation_invariance_of_norm_variant():
    rng = np.random.default_rng(1)
    batch = grid_batch(rng, dim_x=2)
    norm = small("te-tnp", dim_x=2, attention={"distance": "norm", "location_update": True})
    diff = small("te-tnp", dim_x=2)
    base_n, base_d = params(norm, batch), params(diff, batch)
    worst_d = 0.0
    for deg in rng.uniform(0, 360, 3):
        rot = lambda x: (x @ rotation(deg).T).astype(np.float32)  # noqa: E731
        np.testing.assert_allclose(params(norm, moved(batch, rot)), base_n, atol=1e-4, rtol=1e-4)
        worst_d = max(worst_d, np.abs(params(diff, moved(batch, rot)) - base_d).max())
    assert worst_d > 1e-4  # the difference variant is not rotation invariant (float32 noise: ~1e-6)


@pytest.mark.parametrize("name,encoder", [MODELS[0], MODELS[2], MODELS[4]])
def test_context_permutation_invariance(name, encoder):
    rng = np.random.default_rng(2)
    model = small(name, **encoder)
    batch = grid_batch(rng)
    perm = rng.permutation(batch["xc"].shape[1])
    permuted = dict(batch, xc=batch["xc"][:, perm], yc=batch["yc"][:, perm])
    np.testing.assert_allclose(params(model, permuted), params(model, batch), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,encoder", [MODELS[0], MODELS[2], MODELS[3], MODELS[4]])
def test_padding_invariance(name, encoder):
    """Padded context points (mask 0, arbitrary finite values) change nothing."""
    rng = np.random.default_rng(3)
    model = small(name, **encoder)
    batch = grid_batch(rng, b=1, nc=7)
    pad = 5
    padded = dict(batch)
    padded["xc"] = np.concatenate([batch["xc"], rng.normal(0, 50, (1, pad, 1))], 1).astype(np.float32)
    padded["yc"] = np.concatenate([batch["yc"], rng.normal(0, 50, (1, pad, 1))], 1).astype(np.float32)
    padded["mask_c"] = np.concatenate([np.ones((1, 7)), np.zeros((1, pad))], 1).astype(np.float32)
    np.testing.assert_allclose(params(model, padded), params(model, batch), atol=1e-5, rtol=1e-5)
    # padded targets too: the real targets' predictions do not move
    nt = batch["xt"].shape[1]
    padded["xt"] = np.concatenate([batch["xt"], rng.normal(0, 50, (1, 3, 1))], 1).astype(np.float32)
    padded["yt"] = np.zeros((1, nt + 3, 1), np.float32)
    padded["mask_t"] = np.concatenate([np.ones((1, nt)), np.zeros((1, 3))], 1).astype(np.float32)
    np.testing.assert_allclose(params(model, padded)[:, :nt], params(model, batch), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------- layer level
LAYERS = [
    {},
    {"form": "pre", "relative": "identity"},
    {"form": "pre", "relative": "mlp", "distance": "norm"},
    {"location_update": True},
    {"location_update": True, "distance": "norm", "form": "pre", "relative": "rbf"},
]


def layer_inputs(rng, b=2, nq=13, nk=11, p=2):
    zq = tf.constant(rng.normal(size=(b, nq, 12)).astype(np.float32))
    zk = tf.constant(rng.normal(size=(b, nk, 12)).astype(np.float32))
    xq = tf.constant(rng.uniform(-2, 2, (b, nq, p)).astype(np.float32))
    xk = tf.constant(np.concatenate([xq.numpy()[:, :3], rng.uniform(-2, 2, (b, nk - 3, p))], 1)
                     .astype(np.float32))  # some coincident locations (norm at 0)
    mask = np.ones((b, nk), np.float32)
    mask[-1, -4:] = 0.0
    return zq, zk, xq, xk, tf.constant(mask)


def value_and_grads(layer, zq, zk, xq, xk, mask, pair_mask_fn=None):
    with tf.GradientTape() as tape:
        tape.watch([zq, zk, xq, xk])
        out = layer(zq, zk, q_pos=xq, k_pos=xk, key_mask=mask, pair_mask_fn=pair_mask_fn)
        outs = out if isinstance(out, tuple) else (out,)
        weights = [tf.constant(np.random.default_rng(9).normal(size=o.shape).astype(np.float32))
                   for o in outs]
        loss = sum(tf.reduce_sum(o * w) for o, w in zip(outs, weights))
    grads = tape.gradient(loss, [zq, zk, xq, xk] + layer.trainable_variables)
    return [np.asarray(o) for o in outs], [np.asarray(g) for g in grads]


@pytest.mark.parametrize("options", LAYERS)
def test_tiled_matches_dense_values_and_gradients(options):
    rng = np.random.default_rng(4)
    inputs = layer_inputs(rng)
    dense = TEAttention(12, num_heads=2, head_dim=4, kernel_width=8, dense_pairs=1 << 40, **options)
    tiled = TEAttention(12, num_heads=2, head_dim=4, kernel_width=8, tile_size=4, **options)
    dense(*inputs[:2], q_pos=inputs[2], k_pos=inputs[3])
    tiled(*inputs[:2], q_pos=inputs[2], k_pos=inputs[3])
    tiled.set_weights(dense.get_weights())
    causal = lambda i, j: i[:, None] >= j[None, :]  # noqa: E731 - a structural mask too
    for pair_mask_fn in (None, causal):
        out_d, grad_d = value_and_grads(dense, *inputs, pair_mask_fn=pair_mask_fn)
        out_t, grad_t = value_and_grads(tiled, *inputs, pair_mask_fn=pair_mask_fn)
        assert len(grad_d) == len(grad_t) >= 8
        for a, b in zip(out_t, out_d):
            np.testing.assert_allclose(a, b, atol=2e-5, rtol=2e-5)
        for i, (a, b) in enumerate(zip(grad_t, grad_d)):
            assert np.abs(b).max() > 0 or i >= 4
            np.testing.assert_allclose(a, b, atol=5e-5, rtol=5e-4, err_msg=f"gradient {i}")


def test_tiled_logits_match_dense_logits():
    rng = np.random.default_rng(5)
    zq, zk, xq, xk, _ = layer_inputs(rng)
    layer = TEAttention(12, num_heads=2, head_dim=4, kernel_width=8)
    layer(zq, zk, q_pos=xq, k_pos=xk)
    q, k = layer._heads(layer.q_proj(zq)), layer._heads(layer.k_proj(zk))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([q, k, xq, xk])
        full = layer.score(q, k, xq, xk, None, None)
        blocks = tf.concat([tf.concat([layer.score(q[:, :, i:i + 4], k[:, :, j:j + 4],
                                                   xq[:, i:i + 4], xk[:, j:j + 4], None, None)
                                       for j in range(0, 11, 4)], -1) for i in range(0, 13, 4)], -2)
        w = tf.constant(rng.normal(size=full.shape).astype(np.float32))
        loss_full, loss_blocks = tf.reduce_sum(full * w), tf.reduce_sum(blocks * w)
    np.testing.assert_allclose(blocks.numpy(), full.numpy(), atol=1e-6, rtol=1e-6)
    for a, b in zip(tape.gradient(loss_blocks, [q, k, xq, xk]), tape.gradient(loss_full, [q, k, xq, xk])):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, rtol=1e-5)


def test_location_update_rows_without_keys_stay_put():
    rng = np.random.default_rng(6)
    zq, zk, xq, xk, _ = layer_inputs(rng, b=1, nq=5, nk=6)
    for tile in (None, 2):
        layer = TEAttention(12, num_heads=2, head_dim=4, kernel_width=8, location_update=True,
                            tile_size=tile)
        out, moved = layer(zq, zk, q_pos=xq, k_pos=xk, key_mask=tf.zeros([1, 6]))
        assert np.all(moved.numpy() == xq.numpy()) and np.all(out.numpy() == layer.out_proj.bias.numpy())


def test_options_validated_and_config_round_trip():
    with pytest.raises(ValueError, match="form"):
        TEAttention(8, form="sideways")
    with pytest.raises(ValueError, match="needs form='pre'"):
        TEAttention(8, relative="rbf")
    layer = TEAttention(8, num_heads=2, head_dim=4, form="pre", relative="rbf", distance="norm",
                        location_update=True)
    clone = TEAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config() and clone.updates_positions


def test_te_tnp_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    model = small("te-pt-tnp", attention={"location_update": True})
    batch = grid_batch(rng)
    path = str(tmp_path / "m.keras")
    model.save(path)
    from taylorformer.models import load_model

    np.testing.assert_allclose(params(load_model(path), batch), params(model, batch), atol=1e-6)


@pytest.mark.parametrize("tile", [None, 4])
def test_skipping_masked_pairs_changes_nothing(tile):
    """The pair MLP on real keys only (gather/scatter) = the MLP on all pairs, values and grads."""
    rng = np.random.default_rng(8)
    inputs = layer_inputs(rng)
    kw = dict(num_heads=2, head_dim=4, kernel_width=8, tile_size=tile, location_update=True)
    skip, full = TEAttention(12, **kw), TEAttention(12, skip_masked_pairs=False, **kw)
    skip(*inputs[:2], q_pos=inputs[2], k_pos=inputs[3])
    full(*inputs[:2], q_pos=inputs[2], k_pos=inputs[3])
    full.set_weights(skip.get_weights())
    (out_s, grad_s), (out_f, grad_f) = value_and_grads(skip, *inputs), value_and_grads(full, *inputs)
    for a, b in zip(out_s + grad_s, out_f + grad_f):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("tile", [None, 4])
def test_skipping_padded_queries_changes_no_real_row(tile):
    rng = np.random.default_rng(12)
    zq, zk, xq, xk, mask = layer_inputs(rng)
    qmask = np.ones((2, 13), np.float32)
    qmask[0, 9:] = 0.0
    real = tf.constant(qmask[..., None])
    kw = dict(num_heads=2, head_dim=4, kernel_width=8, tile_size=tile)
    skip, full = TEAttention(12, **kw), TEAttention(12, skip_masked_pairs=False, **kw)
    skip(zq, zk, q_pos=xq, k_pos=xk)
    full(zq, zk, q_pos=xq, k_pos=xk)
    full.set_weights(skip.get_weights())
    results = []
    for layer, extra in ((skip, {"query_mask": tf.constant(qmask)}), (full, {})):
        with tf.GradientTape() as tape:
            tape.watch([zq, zk, xq, xk])
            out = layer(zq, zk, q_pos=xq, k_pos=xk, key_mask=mask, **extra) * real
            loss = tf.reduce_sum(out * tf.constant(rng.normal(size=out.shape).astype(np.float32)))
        results.append([out] + tape.gradient(loss, [zq, zk, xq, xk] + layer.trainable_variables))
        rng = np.random.default_rng(12)  # the same loss weights for both
        layer_inputs(rng)
    for a, b in zip(*results):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5)


def test_model_tiled_matches_dense():
    rng = np.random.default_rng(10)
    batch = grid_batch(rng, nc=11, nt=6)
    batch["mask_c"] = np.ones((2, 11), np.float32)
    batch["mask_c"][0, 8:] = 0.0
    dense = small("te-tnp", attention={"dense_pairs": 1 << 40})
    tiled = small("te-tnp", attention={"tile_size": 4})
    tiled.set_weights(dense.get_weights())
    np.testing.assert_allclose(params(tiled, batch), params(dense, batch), atol=2e-5, rtol=2e-5)


def test_bfloat16_kernel_is_still_exactly_equivariant():
    rng = np.random.default_rng(11)
    model = small("te-tnp", attention={"kernel_dtype": "bfloat16"})
    batch = grid_batch(rng)
    base = params(model, batch)
    out = params(model, moved(batch, lambda x: x + np.float32(1000.0)))
    np.testing.assert_allclose(out, base, atol=TOL, rtol=TOL)


@pytest.mark.slow
def test_training_with_location_update(tmp_path):
    """The last layer's moved positions are read by nothing, so its phi gets no gradient:
    training must still run (that gradient counts as zero) and train the other layers'."""
    from taylorformer.workflow import training

    spec = {"preset": "te-tnp", "encoder": {"layers": 2, "width": 16, "num_heads": 2, "head_dim": 8,
                                            "attention": {"kernel_width": 8, "location_update": True}},
            "head": {"width": 16}}
    trainer = training.train(spec, "gp", {"num_context": [3, 8], "num_target": 8},
                             out_dir=str(tmp_path / "run"), steps=1, batch_size=4, val_every=1,
                             val_batches=1, verbose=0, evaluate=False)
    first = trainer.model.encoder.attn[0].phi.trainable_variables  # w0, b0, w_out, b_out
    before = [v.numpy().copy() for v in first]
    trainer.cfg.steps = 3
    trainer.fit(verbose=0)
    assert len(first) == 4 and all(not np.array_equal(b, v.numpy()) for b, v in zip(before, first))
    assert np.isfinite(trainer.model(grid_batch(np.random.default_rng(0)))["loc"]).all()
