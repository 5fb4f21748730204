"""The dense reference is the specification: it is checked against float64 NumPy, and every
other path of taylorformer.attention (tiled with its custom gradient, eagerly, in a
tf.function and under XLA; the tiled loop compiled on its own; query chunks; lanes; the
shared compiled loop; the speed-ups switched off; cached decoding) against it, with masks,
empty rows and contexts, ragged sizes and position-updating scores (TE-style)."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from taylorformer.attention import (Attention, attend, attend_blocks, dense_attend, mha_score, options,
                                    policy, speedups, tiled_attend)
from taylorformer.attention.overrides import SPEEDUPS_ENV

B, H, NQ, NK, D, DV, P, F = 2, 3, 37, 53, 8, 5, 2, 3
TILE = 16
MODES = ["eager", "function", "xla"]


def causal(q_index, k_index):
    return q_index[:, None] >= k_index[None, :]


class RBFBiasScore:
    """q.k/sqrt(d) + sum_f a[h,f] exp(-b[h,f] |x_q - x_k|^2) with trainable a, b [H,F]."""

    def __init__(self, rng):
        self.a = tf.Variable(rng.normal(size=(H, F)), dtype=tf.float32)
        self.b = tf.Variable(rng.uniform(0.5, 2.0, size=(H, F)), dtype=tf.float32)

    def __call__(self, q, k, q_pos, k_pos, q_valid=None, k_valid=None):
        r2 = tf.reduce_sum((q_pos[:, :, None] - k_pos[:, None]) ** 2, -1)  # [B,tq,tk]
        rbf = tf.exp(-self.b[None, :, None, None] * r2[:, None, ..., None])  # [B,H,tq,tk,F]
        return mha_score(q, k) + tf.reduce_sum(self.a[None, :, None, None] * rbf, -1)


class PairUpdate:
    """update_fn: (x_q - x_k) * tanh(sum_h c_h a_h) with trainable c [H] (TE-TNP-like)."""

    def __init__(self, rng):
        self.c = tf.Variable(rng.normal(size=(H,)), dtype=tf.float32)

    def __call__(self, weights, q_pos, k_pos):
        phi = tf.tanh(tf.einsum("bhqk,h->bqk", weights, self.c))
        return (q_pos[:, :, None] - k_pos[:, None]) * phi[..., None]


class MLPScore:
    """TE-style score: MLP([q.k/sqrt(d) per head, x_q - x_k]) -> H logits (unbuilt Keras MLP)."""

    def __init__(self):
        self.mlp = keras.Sequential([keras.layers.Dense(16, activation="gelu"),
                                     keras.layers.Dense(H)])

    def __call__(self, q, k, q_pos, k_pos, q_valid=None, k_valid=None):
        feats = tf.concat([tf.transpose(mha_score(q, k), [0, 2, 3, 1]),
                           q_pos[:, :, None] - k_pos[:, None]], -1)  # [B,tq,tk,H+P]
        return tf.transpose(self.mlp(feats), [0, 3, 1, 2])


# ---------------------------------------------------------------------- NumPy (float64)
def numpy_weights(score, q, k, qp, kp, valid):
    """Float64 masked softmax weights p [B,H,Nq,Nk] of ``score`` (``mha_score`` or an
    RBFBiasScore), with the pair differences [B,Nq,Nk,P], squared distances and RBF terms."""
    q, k, qp, kp = (np.asarray(x, np.float64) for x in (q, k, qp, kp))
    diff = qp[:, :, None] - kp[:, None]  # [B,Nq,Nk,P]
    r2 = (diff ** 2).sum(-1)
    s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    rbf = None
    if score is not mha_score:
        a, b = (np.asarray(w.numpy(), np.float64) for w in (score.a, score.b))
        rbf = np.exp(-b[None, :, None, None] * r2[:, None, ..., None])  # [B,H,Nq,Nk,F]
        s = s + (a[None, :, None, None] * rbf).sum(-1)
    s = np.where(valid, s, -np.inf)
    m = np.max(s, -1, keepdims=True, initial=-np.inf)
    e = np.where(valid, np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    z = e.sum(-1, keepdims=True)
    return np.divide(e, z, out=np.zeros_like(e), where=z > 0), diff, r2, rbf


def numpy_reference(score, q, k, v, qp, kp, valid, dout):
    """Float64 forward and hand-derived backward of masked softmax attention with the
    RBF-biased score. valid: [B,1|H,Nq,Nk] bool. Returns out, (dq, dk, dv, dqp, dkp, da, db)."""
    p, diff, r2, rbf = numpy_weights(score, q, k, qp, kp, valid)
    q, k, v, dout = (np.asarray(x, np.float64) for x in (q, k, v, dout))
    a, b = (np.asarray(w.numpy(), np.float64) for w in (score.a, score.b))
    out = p @ v
    dp = dout @ v.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k / np.sqrt(D)
    dk = ds.swapaxes(-1, -2) @ q / np.sqrt(D)
    dv = p.swapaxes(-1, -2) @ dout
    da = np.einsum("bhqk,bhqkf->hf", ds, rbf)
    db = np.einsum("bhqk,bhqkf,bqk->hf", ds, -a[None, :, None, None] * rbf, r2)
    dr2 = np.einsum("bhqk,bhqkf->bqk", ds, -(a * b)[None, :, None, None] * rbf)
    dqp = np.einsum("bqk,bqkp->bqp", dr2, 2 * diff)
    dkp = -np.einsum("bqk,bqkp->bkp", dr2, 2 * diff)
    return out, (dq, dk, dv, dqp, dkp, da, db)


def numpy_update(score, update, q, k, qp, kp, valid):
    """Float64 mean over allowed keys of update(softmax weights): [B, Nq, P]."""
    p, diff, _, _ = numpy_weights(score, q, k, qp, kp, valid)
    phi = np.tanh(np.einsum("bhqk,h->bqk", p, update.c.numpy().astype(np.float64)))
    vm = np.broadcast_to(valid[:, 0], phi.shape)
    total = (diff * (phi * vm)[..., None]).sum(2)
    return total / np.maximum(vm.sum(-1), 1.0)[..., None]


# ---------------------------------------------------------------------- inputs
def make_inputs(seed=0, nq=NQ, nk=NK):
    rng = np.random.default_rng(seed)
    t = lambda *shape: tf.constant(rng.normal(size=shape), tf.float32)  # noqa: E731
    return rng, dict(q=t(B, H, nq, D), k=t(B, H, nk, D), v=t(B, H, nk, DV),
                     q_pos=t(B, nq, P), k_pos=t(B, nk, P)), t(B, H, nq, DV)


def key_mask_with_empty_element(nk=NK, seed=1):
    mask = np.random.default_rng(seed).random((B, nk)) > 0.3
    mask[1] = False  # every query of batch element 1 has no key at all
    return tf.constant(mask)


def masks(name, nk=NK):
    """The mask cases: none; a key mask whose element 1 has no key; causal + a 0/1 key mask."""
    if name == "none":
        return {}
    if name == "key_mask":
        return dict(key_mask=key_mask_with_empty_element(nk))
    return dict(key_mask=tf.constant(np.random.default_rng(2).random((B, nk)) > 0.3, tf.float32),
                pair_mask_fn=causal)


MASKS = ["none", "key_mask", "causal_and_key_mask"]


def allowed(kw, nq=NQ, nk=NK):
    valid = np.ones((B, 1, nq, nk), bool)
    if "key_mask" in kw:
        valid &= np.asarray(kw["key_mask"], bool)[:, None, None, :]
    if "pair_mask_fn" in kw:
        valid &= np.tril(np.ones((nq, nk), bool))
    return valid


def value_and_grads(fn, score_vars, x, dout, **kw):
    """fn(**x, **kw) and its VJP with dout w.r.t. q, k, v, q_pos, k_pos and score_vars."""
    with tf.GradientTape() as tape:
        tape.watch(list(x.values()))
        out = fn(**x, **kw)
    grads = tape.gradient(out, list(x.values()) + list(score_vars), output_gradients=dout)
    return out, grads


def run_mode(mode, f):
    return f() if mode == "eager" else tf.function(f, jit_compile=mode == "xla")()


def assert_close(got, want, atol=2e-5, rtol=1e-4, **kw):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=atol, rtol=rtol, **kw)


# ====================================================================== the reference
@pytest.mark.parametrize("mask", MASKS)
def test_reference_matches_numpy_values_and_gradients(mask):
    rng, x, dout = make_inputs()
    score = RBFBiasScore(rng)
    kw = masks(mask)
    ref_out, ref_grads = numpy_reference(score, *x.values(), allowed(kw), dout)
    out, grads = value_and_grads(dense_attend, [score.a, score.b], x, dout, score_fn=score, **kw)
    assert_close(out, ref_out)
    for g, ref in zip(grads, ref_grads):
        assert_close(g, ref, atol=5e-5)
    if mask == "key_mask":
        assert np.all(out.numpy()[1] == 0.0)  # no allowed key: exactly 0


@pytest.mark.parametrize("mask", MASKS)
def test_reference_position_update_matches_numpy(mask):
    rng, x, _ = make_inputs(seed=11)
    score, update = RBFBiasScore(rng), PairUpdate(rng)
    kw = masks(mask)
    out, upd = dense_attend(score, **x, **kw, update_fn=update)
    assert_close(upd, numpy_update(score, update, x["q"], x["k"], x["q_pos"], x["k_pos"], allowed(kw)))
    p = numpy_weights(score, x["q"], x["k"], x["q_pos"], x["k_pos"], allowed(kw))[0]
    assert_close(out, p @ np.asarray(x["v"], np.float64))


@pytest.mark.parametrize("nq,nk", [(0, 5), (3, 0), (0, 0)])
def test_reference_empty_axes(nq, nk):
    """No queries: an empty output; an empty context: zeros, with zero gradients."""
    rng = np.random.default_rng(0)
    q, k, v = (tf.constant(rng.normal(size=(B, H, n, D)), tf.float32) for n in (nq, nk, nk))
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        out = dense_attend(mha_score, q, k, v)
        loss = tf.reduce_sum(out * out) + tf.reduce_sum(out)
    assert out.shape == (B, H, nq, D) and np.all(out.numpy() == 0.0)
    for x, g in zip((q, k, v), tape.gradient(loss, [q, k, v])):
        assert g is None or (g.shape == x.shape and np.all(g.numpy() == 0.0))


# ====================================================================== paths with gradients
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mask", MASKS)
def test_tiled_matches_reference_values_and_gradients(mode, mask):
    """tiled_attend (custom gradient, recomputed blocks) eagerly, in a tf.function and
    inside a caller's XLA function: values and gradients w.r.t. q, k, v, positions and the
    score's variables, ragged tiles (37 x 53 in tiles of 16)."""
    rng, x, dout = make_inputs()
    score = RBFBiasScore(rng)
    kw = masks(mask)
    variables = [score.a, score.b]
    dense = value_and_grads(dense_attend, variables, x, dout, score_fn=score, **kw)
    tiled = run_mode(mode, lambda: value_and_grads(
        tiled_attend, variables, x, dout, score_fn=score, tile_q=TILE, tile_k=TILE, **kw))
    assert_close(tiled[0], dense[0])
    for g, ref in zip(tiled[1], dense[1]):
        assert np.all(np.isfinite(g))
        assert_close(g, ref, atol=5e-5)


@pytest.mark.parametrize("speedups_on", [True, False])
@pytest.mark.parametrize("score_name", ["mha", "rbf"])
def test_tiled_loop_compiled_in_training_matches_reference(score_name, speedups_on):
    """options(xla=True) under a tape: the forward loop compiled on its own (the shared
    loop over slices for a weight-free score, whose backward pass re-tiles the rows it
    returns; per call otherwise), with the speed-ups on or off."""
    rng, x, dout = make_inputs(seed=21)
    score = mha_score if score_name == "mha" else RBFBiasScore(rng)
    variables = [] if score_name == "mha" else [score.a, score.b]
    kw = masks("key_mask")
    dense = value_and_grads(dense_attend, variables, x, dout, score_fn=score, **kw)
    speedups.SHARED_FORWARDS.clear()
    with options(xla=True, speedups=speedups_on):
        tiled = value_and_grads(tiled_attend, variables, x, dout, score_fn=score, tile_q=TILE,
                                tile_k=TILE, **kw)
    assert bool(speedups.SHARED_FORWARDS) == (speedups_on and score_name == "mha")
    assert_close(tiled[0], dense[0])
    for g, ref in zip(tiled[1], dense[1]):
        if ref is not None:
            assert_close(g, ref, atol=5e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mask", MASKS)
def test_tiled_position_update_matches_reference(mode, mask):
    """update_fn (TE's position update): the tiled values and custom gradient (w.r.t. q, k,
    v, positions, the score's and the update's variables) against autodiff of the
    reference, with the attention output and the update both used downstream."""
    rng, x, dout = make_inputs(seed=11)
    score, update = RBFBiasScore(rng), PairUpdate(rng)
    kw = masks(mask)
    dupd = tf.constant(rng.normal(size=(B, NQ, P)), tf.float32)
    variables = [score.a, score.b, update.c]

    def run(fn, **extra):
        with tf.GradientTape() as tape:
            tape.watch(list(x.values()))
            out, upd = fn(score_fn=score, update_fn=update, **x, **kw, **extra)
            loss = tf.reduce_sum(out * dout) + tf.reduce_sum(upd * dupd)
        return out, upd, tape.gradient(loss, list(x.values()) + variables)

    tiled = run_mode(mode, lambda: run(tiled_attend, tile_q=TILE, tile_k=TILE))
    dense = run(dense_attend)
    assert_close(tiled[0], dense[0])
    assert_close(tiled[1], dense[1])
    for i, (gt, gd) in enumerate(zip(tiled[2], dense[2])):
        assert np.all(np.isfinite(gt)), i
        assert_close(gt, gd, atol=5e-5, rtol=1e-3, err_msg=f"gradient {i}")


@pytest.mark.parametrize("mode", MODES)
def test_positions_as_data_get_no_gradient(mode):
    """position_grads=False: positions are constants (gradient None) on both paths; every
    other gradient is the reference's."""
    rng, x, dout = make_inputs(seed=5)
    score = RBFBiasScore(rng)
    kw = masks("key_mask")
    ref_out, ref_grads = value_and_grads(dense_attend, [score.a, score.b], x, dout, score_fn=score, **kw)
    for fn, extra in ((tiled_attend, dict(tile_q=TILE, tile_k=TILE)), (dense_attend, {})):
        out, grads = run_mode(mode, lambda: value_and_grads(
            fn, [score.a, score.b], x, dout, score_fn=score, position_grads=False, **extra, **kw))
        assert_close(out, ref_out)
        assert grads[3] is None and grads[4] is None
        for i in (0, 1, 2, 5, 6):
            assert_close(grads[i], ref_grads[i], atol=5e-5)


@pytest.mark.parametrize("mode", MODES)
def test_keras_mlp_score_gradients_match_reference(mode):
    _, x, dout = make_inputs(seed=3)
    score = MLPScore()
    kw = dict(score_fn=score, **masks("causal_and_key_mask"))

    def both():  # tiled first: the MLP is built inside the tiled loops
        tiled = value_and_grads(tiled_attend, [], x, dout, tile_q=TILE, tile_k=TILE, **kw)
        variables = score.mlp.trainable_variables
        tiled = value_and_grads(tiled_attend, variables, x, dout, tile_q=TILE, tile_k=TILE, **kw)
        return tiled, value_and_grads(dense_attend, variables, x, dout, **kw)

    (out_t, grads_t), (out_d, grads_d) = run_mode(mode, both)
    assert len(grads_t) == 5 + 4
    assert_close(out_t, out_d)
    for g_t, g_d in zip(grads_t, grads_d):
        assert_close(g_t, g_d, atol=5e-5)
    assert np.abs(grads_t[3]).max() > 0  # positions get gradients through the MLP


def test_fully_masked_rows_are_zero_with_finite_gradients():
    _, x, dout = make_inputs(seed=4)
    key_mask = np.ones((B, NK), bool)
    key_mask[:, :20] = False  # with causal masking, queries 0..19 have no allowed key
    for fn, kw in ((tiled_attend, dict(tile_q=TILE, tile_k=TILE)), (dense_attend, {})):
        out, grads = value_and_grads(fn, [], x, dout, score_fn=mha_score,
                                     key_mask=tf.constant(key_mask), pair_mask_fn=causal, **kw)
        assert np.all(out.numpy()[:, :, :20] == 0.0)
        assert np.abs(out.numpy()[:, :, 20:]).min() > 0
        assert all(np.all(np.isfinite(g)) for g in grads[:3])
        assert np.all(grads[0].numpy()[:, :, :20] == 0.0)


def test_large_logits_give_finite_matching_gradients():
    _, x, dout = make_inputs(seed=5)
    x["q"] = x["q"] * 3e3  # logits ~ 1e4
    tiled = value_and_grads(tiled_attend, [], x, dout, score_fn=mha_score, tile_q=TILE, tile_k=TILE)
    dense = value_and_grads(dense_attend, [], x, dout, score_fn=mha_score)
    for a, b in zip([tiled[0]] + tiled[1][:3], [dense[0]] + dense[1][:3]):
        assert np.all(np.isfinite(a))
        assert_close(a, b, atol=1e-3, rtol=1e-3)


def test_dynamic_shapes_in_tf_function():
    _, x, dout = make_inputs(seed=6)
    spec = tf.TensorSpec([None, H, None, None], tf.float32)

    @tf.function(input_signature=[spec, spec, spec])
    def grads(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = attend(mha_score, q, k, v, tile=TILE)
        return out, tape.gradient(out, [q, k, v], output_gradients=dout)

    out, g = grads(x["q"], x["k"], x["v"])
    ref_out, ref_g = value_and_grads(dense_attend, [], x, dout, score_fn=mha_score)
    assert_close(out, ref_out)
    for a, b in zip(g, ref_g[:3]):
        assert_close(a, b, atol=5e-5)


@pytest.mark.parametrize("nq,nk", [(0, 5), (3, 0), (0, 0)])
def test_tiled_empty_axes_with_dynamic_shapes(nq, nk):
    """No queries, or an empty context, with every size unknown when tracing: as the
    reference, an empty output or zeros, with zero gradients."""
    spec = tf.TensorSpec([None, H, None, D], tf.float32)

    @tf.function(input_signature=[spec, spec, spec])
    def grads(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = tiled_attend(mha_score, q, k, v, tile_q=TILE, tile_k=TILE)
            loss = tf.reduce_sum(out * out) + tf.reduce_sum(out)
        return out, tape.gradient(loss, [q, k, v])

    rng = np.random.default_rng(0)
    q, k, v = (tf.constant(rng.normal(size=(B, H, n, D)), tf.float32) for n in (nq, nk, nk))
    out, g = grads(q, k, v)
    assert out.shape == (B, H, nq, D) and np.all(out.numpy() == 0.0)
    for x, grad in zip((q, k, v), g):
        assert grad.shape == x.shape and np.all(grad.numpy() == 0.0)


def test_half_precision_inputs_keep_dtype_and_accuracy():
    _, x, dout = make_inputs(seed=8)
    ref = dense_attend(mha_score, x["q"], x["k"], x["v"])
    for dtype in (tf.bfloat16, tf.float16):
        q, k, v = (tf.cast(x[n], dtype) for n in "qkv")
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = tiled_attend(mha_score, q, k, v, tile_q=TILE, tile_k=TILE)
        grads = tape.gradient(out, [q, k, v], output_gradients=tf.cast(dout, dtype))
        assert out.dtype == dtype and all(g.dtype == dtype for g in grads)
        assert_close(tf.cast(out, tf.float32), ref, atol=5e-2, rtol=0)
        assert all(np.all(np.isfinite(tf.cast(g, tf.float32))) for g in grads)


def test_nested_positions_reach_the_score_per_tile():
    """Positions may be a nest (e.g. one tensor per bias group): each leaf is tiled."""
    rng, x, dout = make_inputs(seed=12)
    score = RBFBiasScore(rng)
    nested = lambda q, k, qp, kp, *_: score(q, k, qp["a"] + qp["b"], kp["a"] + kp["b"])  # noqa: E731
    half = {n: {"a": 0.5 * x[n], "b": 0.5 * x[n]} for n in ("q_pos", "k_pos")}
    args = dict(q=x["q"], k=x["k"], v=x["v"], **masks("key_mask"))
    want = dense_attend(score, q_pos=x["q_pos"], k_pos=x["k_pos"], **args)
    for fn, extra in ((tiled_attend, dict(tile_q=TILE, tile_k=TILE)), (dense_attend, {})):
        with tf.GradientTape() as tape:
            tape.watch(tf.nest.flatten(half))
            out = fn(nested, **half, **args, **extra)
        grads = tape.gradient(out, tf.nest.flatten(half), output_gradients=dout)
        assert_close(out, want, rtol=0)
        assert all(g is not None and np.all(np.isfinite(g)) for g in grads)


# ====================================================================== inference paths
#: forward passes with no gradient, as inference runs them (a tf.function, no tape)
INFERENCE = {
    "compiled (default: speed-ups)": dict(),
    "speed-ups off": dict(speedups=False),
    "not compiled": dict(xla=False),
    "2 query chunks": dict(query_chunks=2),
    "2 query chunks, speed-ups off": dict(query_chunks=2, speedups=False),
    "blocks of every row and head": dict(tile=TILE),
}


@pytest.mark.parametrize("path", list(INFERENCE))
@pytest.mark.parametrize("mask", MASKS)
def test_inference_with_position_update_matches_reference(path, mask):
    """A score with weights and a position update (TE-like): compiled per call, in query
    chunks (each cutting its own tiles), or with the speed-ups off, against the reference."""
    rng, x, _ = make_inputs(seed=13)
    score, update = RBFBiasScore(rng), PairUpdate(rng)
    kw = masks(mask)
    want_out, want_upd = dense_attend(score, **x, **kw, update_fn=update)
    with options(**INFERENCE[path]):
        out, upd = tf.function(lambda: tiled_attend(
            score, **x, **kw, tile_q=TILE, tile_k=TILE, update_fn=update))()
    assert_close(out, want_out)
    assert_close(upd, want_upd)


@pytest.mark.parametrize("nq,nk,mask", [(NQ, NK, "none"), (NQ, NK, "key_mask"), (5, 3, "key_mask"),
                                         (NQ, 0, "key_mask")])
@pytest.mark.parametrize("path", list(INFERENCE))
def test_weight_free_inference_paths_match_reference(path, mask, nq, nk, monkeypatch):
    """A weight-free score (TNP-D's): the shared compiled loop over slices of the inputs
    (the last tile overlapping the one before), lane by lane (lane tiles shrunk to 7 x 5
    so that these sizes need several), in query chunks of one length (the second
    overlapping the first), over blocks of every row and head (an options tile), or with
    the speed-ups off: sizes not a multiple of a tile, shorter than a tile, an empty
    context; a batch element with no key gives 0."""
    _, x, _ = make_inputs(seed=15, nq=nq, nk=nk)
    kw = masks(mask, nk)
    want = dense_attend(mha_score, **x, **kw)
    speedups.SHARED_FORWARDS.clear()
    monkeypatch.setitem(policy.LANE_TILES, "CPU", (7, 5))
    opts = INFERENCE[path]
    with options(**opts):
        out = tf.function(lambda: tiled_attend(mha_score, **x, **kw, tile_q=TILE, tile_k=TILE))()
    assert_close(out, want)
    shared = opts.get("speedups", True) and opts.get("xla", True)
    assert bool(speedups.SHARED_FORWARDS) == shared  # the path the case names ran
    if shared:
        (plan, forward), = speedups.SHARED_FORWARDS.items()
        assert forward.experimental_get_tracing_count() == 1  # every chunk: one function
        assert plan.lanes == ("tile" not in opts)


def small_1d_batch(rng):
    """A batch of 2 tasks, 21 context and 17 target points, 1-D x and y."""
    return {k: tf.constant(rng.normal(size=(2, n, 1)), tf.float32)
            for k, n in (("xc", 21), ("yc", 21), ("xt", 17), ("yt", 17))}


def test_model_forward_same_under_every_executor_option(monkeypatch):
    """A TNP-D forward (tf.function, inference) is the same dense, tiled, tiled with the
    loop compiled by XLA, lane by lane in query chunks (the CPU's rule for a layer's
    ``tile_size``, lane tiles shrunk to 8 x 6), and with the speed-ups switched off by
    option or by the environment variable: the options change how, not what, the model
    computes, with padded context and target points."""
    import taylorformer as tfm

    model = tfm.build_model("tnp-d", encoder={"layers": 2, "attention": {"name": "mha-xy", "tile_size": 8}})
    rng = np.random.default_rng(3)
    batch = small_1d_batch(rng)
    batch["mask_c"] = tf.constant(rng.random((2, 21)) > 0.2, tf.float32)
    batch["mask_t"] = tf.constant(rng.random((2, 17)) > 0.2, tf.float32)
    monkeypatch.setitem(policy.LANE_TILES, "CPU", (8, 6))
    speedups.SHARED_FORWARDS.clear()

    def forward(**opts):
        with options(**opts):
            return tf.function(lambda b: model.predict_distribution(b).mean())(batch).numpy()

    results = [forward(tile=None), forward(tile=8, xla=False), forward(tile=8, xla=True),
               forward(query_chunks=2)]
    assert any(plan.lanes for plan in speedups.SHARED_FORWARDS)
    speedups.SHARED_FORWARDS.clear()
    results.append(forward(speedups=False))
    monkeypatch.setenv(SPEEDUPS_ENV, "0")
    results.append(forward())
    assert not speedups.SHARED_FORWARDS  # switched off: the shared loop never ran
    real = batch["mask_t"].numpy() > 0
    for other in results[1:]:
        assert_close(other[real], results[0][real], rtol=0)


def test_speedups_switch_validates_the_environment_variable(monkeypatch):
    monkeypatch.setenv(SPEEDUPS_ENV, "off")
    _, x, _ = make_inputs(seed=1, nq=5, nk=3)
    with pytest.raises(ValueError, match=f"{SPEEDUPS_ENV} must be 0 or 1, got 'off'"):
        tf.function(lambda: tiled_attend(mha_score, x["q"], x["k"], x["v"], tile_q=4, tile_k=4))()
    with options(speedups=True):  # an options() setting wins over the environment
        tf.function(lambda: tiled_attend(mha_score, x["q"], x["k"], x["v"], tile_q=4, tile_k=4))()
    with pytest.raises(ValueError, match="options: speedups must be"):
        with options(speedups="no"):
            pass


def test_compiled_forward_is_shared_by_weight_free_scores_only():
    """Inference compiles the tiled loop once per plan and shapes, not once per layer:
    every layer of a TNP-D (the plain ``mha_score``) calls one XLA function. A score with
    weights, a closure or a structural mask gets a function of its own."""
    import taylorformer as tfm
    from taylorformer.attention.blocks import Plan

    speedups.SHARED_FORWARDS.clear()
    model = tfm.build_model("tnp-d", encoder={"layers": 3})
    rng = np.random.default_rng(4)
    batch = small_1d_batch(rng)
    with options(tile=8):
        tf.function(lambda b: model.predict_distribution(b).mean())(batch)
    (plan, forward), = speedups.SHARED_FORWARDS.items()
    assert plan.score_fn is mha_score and forward.experimental_get_tracing_count() == 1
    plan_of = lambda score, mask=None, q_pos=None: Plan(  # noqa: E731
        score, mask, None, 16, 16, True, False, False, q_pos, q_pos)
    x = tf.zeros([2, 5, 1])
    assert plan_of(mha_score, q_pos=x).shareable()
    assert not plan_of(RBFBiasScore(rng)).shareable()  # weights
    assert not plan_of(lambda q, k, *_: mha_score(q, k) * x[0, 0, 0]).shareable()  # a closure
    assert not plan_of(mha_score, mask=causal).shareable()
    assert not plan_of(mha_score, q_pos={"a": x}).shareable()  # a nest of positions


# ====================================================================== cached decoding
def test_attend_blocks_matches_reference():
    """Keys and values in blocks (one empty, one ragged), with a row that has no valid key:
    attend_blocks is the reference on the concatenated keys with their ``valid`` as mask."""
    rng = np.random.default_rng(7)
    sizes = (6, 0, 4)
    blocks = []
    for n in sizes:
        valid = rng.random((B, n)) > 0.3
        valid[1] = False  # batch element 1: no valid key anywhere
        blocks.append((tf.constant(rng.normal(size=(B, H, n, D)), tf.float32),
                       tf.constant(rng.normal(size=(B, H, n, DV)), tf.float32), tf.constant(valid)))
    q = tf.constant(rng.normal(size=(B, H, 3, D)), tf.float32)
    k, v = tf.concat([blk[0] for blk in blocks], 2), tf.concat([blk[1] for blk in blocks], 2)
    valid = tf.concat([blk[2] for blk in blocks], 1)
    want = dense_attend(mha_score, q, k, v, key_mask=valid)
    got = attend_blocks(mha_score, q, blocks)
    assert_close(got, want)
    assert np.all(got.numpy()[1] == 0.0)


def test_attend_cache_matches_the_layer_call():
    """Attention.attend_cache on a KeyValueCache (a main block and a recent block, settled
    as sampling does) gives the layer's own call on the keys written so far, with a key mask."""
    from taylorformer.models import decoding

    rng = np.random.default_rng(8)
    layer = Attention(output_dim=4, num_heads=H, head_dim=D)
    n_ctx, nt = 5, 4
    keys = tf.constant(rng.normal(size=(B, n_ctx + nt, 6)), tf.float32)
    queries = tf.constant(rng.normal(size=(B, 2, 6)), tf.float32)
    key_mask = rng.random((B, n_ctx + nt)) > 0.3
    layer(queries, keys)  # build
    k_heads, v_heads = layer.key_value_heads(keys)
    cache = decoding.KeyValueCache.start(k_heads[:, :, :n_ctx], v_heads[:, :, :n_ctx], nt)
    for t in range(nt):
        at = n_ctx + t
        cache = cache.write(tf.constant(at), k_heads[:, :, at:at + 1], v_heads[:, :, at:at + 1])
        if (t + 1) % decoding.recent_slots(nt) == 0:  # the recent block is full: settle it
            cache = cache.settle()
        length = at + 1
        got = layer.attend_cache(queries, cache, length, key_mask)
        want = layer(queries, keys[:, :length], key_mask=tf.constant(key_mask[:, :length]))
        assert_close(got, want)
