"""Biased attention, KRBlocks and BSA-TNP: exact properties, not loss curves.

Invariance tests use locations on a dyadic grid (multiples of 1/64) and shifts on the
same grid, |shift| <= 1e3, so the shifted float32 inputs represent the shifted values
exactly; any difference then comes from the model's arithmetic. (With generic floats the
shifted inputs themselves are rounded: half an ulp at 1e3 is 3e-5.)
"""
import numpy as np
import pytest
import tensorflow as tf

from taylorformer import registry
from taylorformer.models import build_model, load_model
from taylorformer.plugins.bsa_tnp.attention import BiasedAttention, rbf_bias
from taylorformer.plugins.bsa_tnp.geometry import chord_to_geodesic_sq, unit_vectors
from taylorformer.plugins.bsa_tnp import KRBlockEncoder

TOL = 2e-5
SHIFTS = [0.515625, -37.25, 1000.0]  # on the 1/64 grid
SPACE_TIME = [{"name": "space", "dims": [0, 1], "basis": 5}, {"name": "time", "dims": [2], "basis": 3}]


def small(name="bsa-tnp", dim_x=2, attention=None, **encoder):
    enc = {"layers": 2, "width": 16, "num_heads": 2, "head_dim": 8, "ffn_width": 32,
           "embed_widths": [32], **encoder}
    if name == "bsa-tnp" and attention:
        enc["attention"] = attention
    if name == "tnp-d":
        enc = {"layers": 2, "width": 16, "num_heads": 2, "head_dim": 8}
    return build_model(name, dim_x=dim_x, encoder=enc, head={"width": 16, "hidden_layers": 1})


def grid(rng, shape, lim):
    return (rng.integers(-lim * 64, lim * 64, shape) / 64).astype(np.float32)


def gp_batch(rng, b=2, nc=9, nt=6, dim_x=2):
    return {"xc": grid(rng, (b, nc, dim_x), 2), "yc": rng.normal(size=(b, nc, 1)).astype(np.float32),
            "xt": grid(rng, (b, nt, dim_x), 3), "yt": np.zeros((b, nt, 1), np.float32)}


def st_batch(rng, b=2, nc=9, nt=6, fixed=3):
    """Space (sc/st, 2-D), time (tc/tt, 1-D) and fixed effects x."""
    out = {"xc": rng.normal(size=(b, nc, fixed)).astype(np.float32),
           "xt": rng.normal(size=(b, nt, fixed)).astype(np.float32),
           "yc": rng.normal(size=(b, nc, 1)).astype(np.float32), "yt": np.zeros((b, nt, 1), np.float32),
           "sc": grid(rng, (b, nc, 2), 2), "st": grid(rng, (b, nt, 2), 2),
           "tc": grid(rng, (b, nc, 1), 1), "tt": grid(rng, (b, nt, 1), 1)}
    return out


def params(model, batch):
    out = model(batch)
    return np.concatenate([np.asarray(out["loc"]), np.asarray(out["scale"])], -1)


def moved(batch, keys, fn):
    return {**batch, **{k: fn(batch[k]) for k in keys}}


# ---------------------------------------------------------------------- registry
def test_registered():
    assert registry.get("attention", "biased") is BiasedAttention
    assert registry.get("encoder", "kr-block") is KRBlockEncoder
    spec = registry.get("model", "bsa-tnp")
    enc = spec["encoder"]
    assert (enc["layers"], enc["width"], enc["num_heads"], enc["head_dim"]) == (6, 64, 4, 32)
    assert enc["attention"]["groups"][0]["basis"] == 5 and not enc["embed_positions"]


def test_preset_size_and_save_load(tmp_path):
    model = build_model("bsa-tnp", dim_x=2)
    assert 4.4e5 < model.count_params() < 5.0e5  # paper: about 0.48M
    batch = gp_batch(np.random.default_rng(0))
    path = str(tmp_path / "bsa.keras")
    model.save(path)
    np.testing.assert_allclose(params(load_model(path), batch), params(model, batch), atol=1e-6)


def numpy_bsa_tnp(model, batch):
    """The paper's BSA-TNP forward (Sec. 4, App. A) in float64 NumPy with ``model``'s
    weights: tokens MLP([y, observed flag]) (locations only in the bias), pre-norm KRBlocks
    (ctx += Attn(LN ctx, LN ctx); tgt += Attn(LN tgt, LN ctx); the same FFN on both),
    logits q.k/sqrt(d) + sum_f a_f exp(-b_f |s - s'|^2) per head (eq. 4), padded context
    keys masked; final LayerNorm, head MLP, scale = 1e-3 + softplus. Returns [loc, scale]."""
    enc = model.encoder
    relu = lambda x: np.maximum(x, 0)  # noqa: E731

    def dense(layer, x):
        w = [np.asarray(v, np.float64) for v in layer.get_weights()]
        return x @ w[0] + (w[1] if len(w) > 1 else 0)

    def mlp(m, x):
        for h in m.hidden:
            x = relu(dense(h, x))
        return dense(m.out, x)

    def ln(layer, x):
        g, b = (np.asarray(v, np.float64) for v in layer.get_weights())
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + layer.epsilon) * g + b

    def attn(layer, q_in, k_in, pq, pk, mask):
        h, d = layer.num_heads, layer.head_dim
        split = lambda x: x.reshape(*x.shape[:2], h, d).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(dense(layer.q_proj, q_in)), split(dense(layer.k_proj, k_in)), split(dense(layer.v_proj, k_in))
        a = np.asarray(layer.a_space, np.float64)
        b = np.exp(np.asarray(layer.log_b_space, np.float64))
        d2 = ((pq[:, :, None, :] - pk[:, None, :, :]) ** 2).sum(-1)  # [B, Nq, Nk]
        bias = (a[None, :, :, None, None] * np.exp(-b[None, :, :, None, None] * d2[:, None, None])).sum(2)
        logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
        logits = np.where(mask[:, None, None, :] > 0, logits, -np.inf)
        w = np.exp(logits - logits.max(-1, keepdims=True))
        out = (w / w.sum(-1, keepdims=True)) @ v  # [B, H, Nq, d]
        return dense(layer.out_proj, out.transpose(0, 2, 1, 3).reshape(*q_in.shape[:2], h * d))

    f64 = {k: np.asarray(v, np.float64) for k, v in batch.items()}
    yc, xc, xt, mask = f64["yc"], f64["xc"], f64["xt"], f64["mask_c"]
    zx = lambda x: np.zeros_like(x)  # noqa: E731  (the x slot: locations are not embedded)
    ctx = mlp(enc.embed, np.concatenate([zx(xc), yc, np.zeros_like(yc)], -1))
    tgt = mlp(enc.embed, np.concatenate([zx(xt), np.zeros(xt.shape[:2] + (1,)), np.ones(xt.shape[:2] + (1,))], -1))
    for i in range(enc.num_layers):
        lc, lt = ln(enc.norm1[i], ctx), ln(enc.norm1[i], tgt)
        ctx, tgt = (ctx + attn(enc.attn[i], lc, lc, xc, xc, mask),
                    tgt + attn(enc.attn[i], lt, lc, xt, xc, mask))
        ctx = ctx + mlp(enc.ffn[i], ln(enc.norm2[i], ctx))
        tgt = tgt + mlp(enc.ffn[i], ln(enc.norm2[i], tgt))
    raw = mlp(model.head, ln(enc.norm_out, tgt))
    return np.concatenate([raw[..., :1], 1e-3 + np.logaddexp(0, raw[..., 1:])], -1)


def test_preset_matches_numpy_forward_of_the_paper():
    """The shipped preset computes the paper's BSA-TNP (App. A sizes, head 256-64-2) on a
    padded batch: against a float64 NumPy forward with the same weights."""
    model = build_model("bsa-tnp", dim_x=2)
    assert [d.units for d in model.head.hidden] == [256, 64] and model.head.out.units == 2
    assert [d.units for d in model.encoder.embed.hidden] == [256, 128] and model.encoder.width == 64
    rng = np.random.default_rng(5)
    batch = gp_batch(rng, b=2, nc=7, nt=5)
    batch["mask_c"] = np.array([[1] * 7, [1] * 5 + [0] * 2], np.float32)
    batch["xc"][1, 5:] = 100.0  # padded points: far away and random values, must not matter
    batch["yc"][1, 5:] = 7.0
    np.testing.assert_allclose(params(model, batch), numpy_bsa_tnp(model, batch), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- invariances
def test_translation_invariance_of_preset():
    """The paper-size preset, locations in x (GP tasks): shifts change nothing."""
    rng = np.random.default_rng(0)
    model = build_model("bsa-tnp", dim_x=2)
    batch = gp_batch(rng)
    base = params(model, batch)
    for s in SHIFTS:
        shift = (np.float32(s) * rng.choice([-1, 1], 2)).astype(np.float32)
        out = params(model, moved(batch, ("xc", "xt"), lambda x: x + shift))
        np.testing.assert_allclose(out, base, atol=TOL, rtol=TOL, err_msg=f"shift {shift}")


@pytest.mark.parametrize("keys", [("sc", "st"), ("tc", "tt"), ("sc", "st", "tc", "tt")])
def test_translation_invariance_in_space_and_time(keys):
    """Feature groups: x = fixed effects (embedded), space and time feed the bias only."""
    rng = np.random.default_rng(1)
    model = small(dim_x=3, attention={"groups": SPACE_TIME}, positions="groups")
    batch = st_batch(rng)
    base = params(model, batch)
    for s in SHIFTS:
        out = params(model, moved(batch, keys, lambda x: x + np.float32(s)))
        np.testing.assert_allclose(out, base, atol=TOL, rtol=TOL, err_msg=f"shift {s} of {keys}")
    # the fixed effects do matter
    other = params(model, moved(batch, ("xc",), lambda x: x + np.float32(0.5)))
    assert np.abs(other - base).max() > 1e-3


def test_auto_positions_use_groups_when_present():
    """positions='auto': grouped batches use sc/tc; the builder's dummy batch (no groups)
    builds the same layers."""
    rng = np.random.default_rng(2)
    model = small(dim_x=3)  # default bias group: all position dims
    batch = st_batch(rng)
    base = params(model, batch)
    out = params(model, moved(batch, ("sc", "st", "tc", "tt"), lambda x: x - np.float32(37.25)))
    np.testing.assert_allclose(out, base, atol=TOL, rtol=TOL)


def test_tnp_d_fails_the_shift_test():
    rng = np.random.default_rng(0)
    model = small("tnp-d", dim_x=2)
    batch = gp_batch(rng)
    base = params(model, batch)
    for s in SHIFTS:
        err = np.abs(params(model, moved(batch, ("xc", "xt"), lambda x: x + np.float32(s))) - base).max()
        assert err > 1e3 * TOL, f"tnp-d unexpectedly invariant at shift {s}: {err}"


def test_embed_positions_breaks_invariance_on_purpose():
    rng = np.random.default_rng(3)
    model = small(dim_x=3, attention={"groups": SPACE_TIME}, positions="groups", embed_positions=True)
    batch = st_batch(rng)
    base = params(model, batch)
    err = np.abs(params(model, moved(batch, ("sc", "st"), lambda x: x + np.float32(5))) - base).max()
    assert err > 1e-3


def random_rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else q[:, [1, 0, 2]]


def to_latlon(u):
    return np.degrees(np.stack([np.arcsin(np.clip(u[..., 2], -1, 1)), np.arctan2(u[..., 1], u[..., 0])], -1))


def sphere_batch(rng, b=2, nc=12, nt=7):
    """Points in a +-10 degree lat/lon box around (0, 0), as unit vectors."""
    lat, lon = np.radians(rng.uniform(-10, 10, (2, b, nc + nt)))
    u = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)
    return u, {"yc": rng.normal(size=(b, nc, 1)).astype(np.float32), "yt": np.zeros((b, nt, 1), np.float32)}


@pytest.mark.parametrize("coords", ["latlon", "xyz"])
def test_rotation_invariance_with_geodesic_bias(coords):
    rng = np.random.default_rng(4)
    nc = 12
    u, ys = sphere_batch(rng, nc=nc)
    dim = 2 if coords == "latlon" else 3
    geo = small(dim_x=dim, attention={"groups": [{"name": "space", "distance": "geodesic", "basis": 5}],
                                      "b_init": 4.0})
    rbf = small(dim_x=dim, attention={"b_init": 4.0 if coords == "xyz" else 0.01})  # degrees

    def batch(rot):
        v = u @ rot.T
        x = (to_latlon(v) if coords == "latlon" else v).astype(np.float32)
        return {**ys, "xc": x[:, :nc], "xt": x[:, nc:]}

    base_g, base_r = params(geo, batch(np.eye(3))), params(rbf, batch(np.eye(3)))
    worst_r = 0.0
    for _ in range(4):
        rot = random_rotation(rng)
        np.testing.assert_allclose(params(geo, batch(rot)), base_g, atol=1e-4, rtol=1e-4)
        worst_r = max(worst_r, np.abs(params(rbf, batch(rot)) - base_r).max())
    if coords == "latlon":  # a euclidean bias on (lat, lon) is not SO(3) invariant (on xyz
        assert worst_r > 1e-2  # points it is: chords are rotation invariant too)


def test_padding_invariance_tiled_and_dense():
    rng = np.random.default_rng(5)
    for att in ({"tile_size": 4}, {}):
        model = small(dim_x=2, attention=att)
        batch = gp_batch(rng, b=1, nc=7, nt=5)
        pc, pt = 6, 3
        padded = dict(batch)
        for key, n, m in (("xc", pc, "mask_c"), ("xt", pt, "mask_t")):
            y = "yc" if key == "xc" else "yt"
            padded[key] = np.concatenate([batch[key], rng.normal(0, 50, (1, n, 2))], 1).astype(np.float32)
            padded[y] = np.concatenate([batch[y], rng.normal(0, 50, (1, n, 1))], 1).astype(np.float32)
            real = batch[key].shape[1]
            padded[m] = np.concatenate([np.ones((1, real)), np.zeros((1, n))], 1).astype(np.float32)
        out = params(model, padded)[:, :batch["xt"].shape[1]]
        np.testing.assert_allclose(out, params(model, batch), atol=1e-5, rtol=1e-5)


def test_targets_do_not_attend_to_each_other():
    """A target's prediction does not depend on the other targets."""
    rng = np.random.default_rng(6)
    model = small(dim_x=2)
    batch = gp_batch(rng, b=1, nt=6)
    full = params(model, batch)
    single = params(model, {**batch, "xt": batch["xt"][:, 2:3], "yt": batch["yt"][:, 2:3]})
    np.testing.assert_allclose(single, full[:, 2:3], atol=1e-5, rtol=1e-5)


def test_model_tiled_matches_dense_and_xla():
    rng = np.random.default_rng(7)
    batch = {k: tf.constant(v) for k, v in gp_batch(rng, nc=21, nt=10).items()}
    dense = small(dim_x=2, attention={"dense_pairs": 1 << 40})
    tiled = small(dim_x=2, attention={"tile_size": 8})
    tiled.set_weights(dense.get_weights())

    def loss_and_grads(model):
        with tf.GradientTape() as tape:
            out = model(batch)
            loss = tf.reduce_sum(out["loc"] * 1.3 + out["scale"] * 0.7)
        return params(model, batch), tape.gradient(loss, model.trainable_variables)

    (pd, gd), (pt, gt) = loss_and_grads(dense), loss_and_grads(tiled)
    np.testing.assert_allclose(pt, pd, atol=2e-5, rtol=2e-5)
    for a, b, v in zip(gt, gd, dense.trainable_variables):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=5e-4, err_msg=v.path)
    xla = tf.function(lambda b: tiled(b), jit_compile=True)(batch)
    np.testing.assert_allclose(np.concatenate([xla["loc"], xla["scale"]], -1), pt, atol=2e-5, rtol=2e-5)


# ---------------------------------------------------------------------- layer level
def layer_inputs(rng, b=2, nq=19, nk=13, p=3):
    zq = tf.constant(rng.normal(size=(b, nq, 12)).astype(np.float32))
    zk = tf.constant(rng.normal(size=(b, nk, 12)).astype(np.float32))
    xq = tf.constant(rng.uniform(-2, 2, (b, nq, p)).astype(np.float32))
    xk = tf.constant(np.concatenate([xq.numpy()[:, :3], rng.uniform(-2, 2, (b, nk - 3, p))], 1)
                     .astype(np.float32))  # some coincident locations (distance 0)
    mask = np.ones((b, nk), np.float32)
    mask[-1, -4:] = 0.0
    mask[0] = 0.0  # batch element 0 has no real key: its rows must be 0, not NaN
    return zq, zk, xq, xk, tf.constant(mask)


def value_and_grads(layer, zq, zk, xq, xk, mask, pair_mask_fn=None):
    with tf.GradientTape() as tape:
        tape.watch([zq, zk, xq, xk])
        out = layer(zq, zk, q_pos=xq, k_pos=xk, key_mask=mask, pair_mask_fn=pair_mask_fn)
        w = tf.constant(np.random.default_rng(9).normal(size=out.shape).astype(np.float32))
        loss = tf.reduce_sum(out * w)
    grads = tape.gradient(loss, [zq, zk, xq, xk] + layer.trainable_variables)
    return out, grads


LAYERS = [
    {"groups": [{"name": "space", "dims": [0, 1], "basis": 5}, {"name": "time", "dims": [2], "basis": 3}]},
    {"groups": [{"name": "sphere", "dims": [0, 1, 2], "distance": "geodesic", "basis": 4}]},
    {"groups": None, "b_init": 1.0},
]


@pytest.mark.parametrize("options,mode", [(o, "eager") for o in LAYERS] + [(LAYERS[0], "xla")])
def test_tiled_matches_dense_values_and_gradients(options, mode):
    """Ragged sizes (19 x 13 with tiles of 4), key masks (one element fully masked),
    a causal structural mask; gradients w.r.t. inputs, positions and every weight,
    the bias parameters a and log b included."""
    rng = np.random.default_rng(4)
    inputs = layer_inputs(rng)
    dense = BiasedAttention(12, num_heads=2, head_dim=4, dense_pairs=1 << 40, position_gradients=True,
                            **options)
    tiled = BiasedAttention(12, num_heads=2, head_dim=4, tile_size=4, position_gradients=True, **options)
    dense(*inputs[:2], q_pos=inputs[2], k_pos=inputs[3])
    tiled(*inputs[:2], q_pos=inputs[2], k_pos=inputs[3])
    weights = dense.get_weights()
    weights = [w + rng.normal(0, 0.3, w.shape).astype(np.float32) if w.ndim == 2 and w.shape[0] == 2 else w
               for w in weights]  # move a and log b off their initial values
    dense.set_weights(weights)
    tiled.set_weights(weights)
    names = [v.name for v in dense.trainable_variables]
    assert any(n.startswith("a_") for n in names) and any(n.startswith("log_b_") for n in names)
    causal = lambda i, j: i[:, None] >= j[None, :]  # noqa: E731
    run = (lambda f: f()) if mode == "eager" else (lambda f: tf.function(f, jit_compile=True)())
    for pair_mask_fn in (None, causal) if mode == "eager" else (causal,):
        out_d, grad_d = run(lambda: value_and_grads(dense, *inputs, pair_mask_fn=pair_mask_fn))
        out_t, grad_t = run(lambda: value_and_grads(tiled, *inputs, pair_mask_fn=pair_mask_fn))
        out_d, out_t = np.asarray(out_d), np.asarray(out_t)
        grad_d, grad_t = [np.asarray(g) for g in grad_d], [np.asarray(g) for g in grad_t]
        assert np.all(out_d[0] == 0) and np.all(np.isfinite(out_d))
        np.testing.assert_allclose(out_t, out_d, atol=2e-5, rtol=2e-5)
        for i, (a, b) in enumerate(zip(grad_t, grad_d)):
            name = (["zq", "zk", "xq", "xk"] + names)[i]
            assert np.all(np.isfinite(a)), name
            if name.startswith(("a_", "log_b_")):
                assert np.abs(b).max() > 1e-6, f"no gradient reaches {name}"
            np.testing.assert_allclose(a, b, atol=5e-5, rtol=5e-4, err_msg=name)


@pytest.mark.parametrize("d2_grad", [True, False])
def test_rbf_bias_gradient_matches_autodiff(d2_grad):
    """The one-pass backward of ``rbf_bias`` against TF autodiff of the plain formula."""
    rng = np.random.default_rng(2)
    d2 = tf.constant(rng.uniform(0, 6, (2, 7, 5)).astype(np.float32))
    a = tf.constant(rng.normal(size=(3, 4)).astype(np.float32))
    b = tf.constant(np.exp(rng.normal(size=(3, 4))).astype(np.float32))
    g = tf.constant(rng.normal(size=(2, 3, 7, 5)).astype(np.float32))

    def grads(fn):
        with tf.GradientTape() as tape:
            tape.watch([d2, a, b])
            out = fn(d2, a, b)
        return out, tape.gradient(out, [d2, a, b], output_gradients=g)

    plain = lambda d2, a, b: tf.reduce_sum(  # noqa: E731
        a[None, :, :, None, None] * tf.exp(-b[None, :, :, None, None] * d2[:, None, None]), 2)
    out, got = grads(lambda *x: rbf_bias(*x, d2_grad=d2_grad))
    ref_out, ref = grads(plain)
    np.testing.assert_allclose(out, ref_out, rtol=1e-6, atol=1e-6)
    for name, x, y in zip(("d2", "a", "b"), got, ref):
        if name == "d2" and not d2_grad:
            assert x is None
            continue
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("tile_size", [None, 4])
def test_positions_are_data_by_default(tile_size):
    """Default ``position_gradients=False``: no gradient flows to the positions (None, not
    a silent zero); the weights still get theirs."""
    zq, zk, xq, xk, mask = layer_inputs(np.random.default_rng(1))
    layer = BiasedAttention(12, num_heads=2, head_dim=4, tile_size=tile_size)
    _, grads = value_and_grads(layer, zq, zk, xq, xk, mask)
    assert grads[2] is None and grads[3] is None
    assert all(g is not None for g in grads[:2] + grads[4:])


def test_bias_matches_numpy_formula():
    rng = np.random.default_rng(8)
    layer = BiasedAttention(8, num_heads=3, head_dim=4, groups=LAYERS[0]["groups"])
    zq, zk, xq, xk, _ = layer_inputs(rng)
    layer(zq, zk, q_pos=xq, k_pos=xk)
    fq, fk = layer.position_features(xq), layer.position_features(xk)
    got = layer.bias(fq, fk).numpy()
    xq, xk = xq.numpy().astype(np.float64), xk.numpy().astype(np.float64)
    want = 0.0
    for name, dims in (("space", [0, 1]), ("time", [2])):
        a, b = (np.asarray(t, np.float64) for t in layer.bias_parameters(name))
        d2 = ((xq[:, :, None, dims] - xk[:, None, :, dims]) ** 2).sum(-1)  # [B,Nq,Nk]
        want = want + (a[None, :, None, None] * np.exp(-b[None, :, None, None] * d2[:, None, ..., None])).sum(-1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the logits are q.k/sqrt(d) + that bias
    q, k = layer._heads(layer.q_proj(zq)), layer._heads(layer.k_proj(zk))
    dots = np.einsum("bhqd,bhkd->bhqk", q.numpy(), k.numpy()) / np.sqrt(4)
    np.testing.assert_allclose(layer.score(q, k, fq, fk, None, None).numpy(), dots + want, rtol=1e-5, atol=1e-5)
    # spread init: a = 1, b = 4^(f - 2) for F = 5 (geometric mean 1)
    a, b = layer.bias_parameters("space")
    np.testing.assert_allclose(a, 1.0)
    np.testing.assert_allclose(b[0], 4.0 ** (np.arange(5) - 2.0), rtol=1e-6)


def test_geodesic_distance_and_its_gradient_at_zero():
    rng = np.random.default_rng(9)
    latlon = np.stack([rng.uniform(-89, 89, 50), rng.uniform(-180, 180, 50)], -1)
    u = unit_vectors(tf.constant(latlon, tf.float32), "latlon").numpy().astype(np.float64)
    lat, lon = np.radians(latlon[:, 0]), np.radians(latlon[:, 1])
    cos_d = (np.sin(lat)[:, None] * np.sin(lat)[None] + np.cos(lat)[:, None] * np.cos(lat)[None]
             * np.cos(lon[:, None] - lon[None]))
    want = np.arccos(np.clip(cos_d, -1, 1)) ** 2
    chord = tf.constant(((u[:, None] - u[None]) ** 2).sum(-1), tf.float32)
    np.testing.assert_allclose(chord_to_geodesic_sq(chord).numpy(), want, atol=2e-5, rtol=1e-4)
    c = tf.constant([0.0, 1e-6, 1e-3, 3.9], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(c)
        d2 = chord_to_geodesic_sq(c)
    g = tape.gradient(d2, c).numpy()
    assert np.all(np.isfinite(g)) and abs(g[0] - 1.0) < 1e-6
    # xyz input is normalised; lonlat swaps the columns
    np.testing.assert_allclose(unit_vectors(tf.constant([[0.0, 0.0, 2.0]]), "xyz"), [[0, 0, 1]], atol=1e-7)
    np.testing.assert_allclose(unit_vectors(tf.constant([[90.0, 0.0]]), "lonlat"), [[0, 1, 0]], atol=1e-6)


def test_bad_groups_are_clear_errors():
    with pytest.raises(ValueError, match="distance"):
        BiasedAttention(8, groups=[{"name": "s", "distance": "manhattan"}])
    with pytest.raises(ValueError, match="unique"):
        BiasedAttention(8, groups=[{"name": "s"}, {"name": "s"}])
    layer = BiasedAttention(8, groups=[{"name": "s", "dims": [0, 3]}])
    z = tf.zeros([1, 2, 4])
    with pytest.raises(ValueError, match="only 2 dims"):
        layer(z, z, q_pos=tf.zeros([1, 2, 2]), k_pos=tf.zeros([1, 2, 2]))
