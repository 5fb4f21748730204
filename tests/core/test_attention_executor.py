"""Executor vs an independent float64 NumPy reference and vs ``dense_attend``: values and
gradients (q, k, v, positions, score variables), ragged tiles, masks, tf.function, XLA."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import taylorformer.attention_executor as ex
from taylorformer.attention_executor import attend, dense_attend, mha_score, tiled_attend

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


def numpy_weights(score, q, k, qp, kp, valid):
    """Float64 masked softmax weights p [B,H,Nq,Nk] of the RBF-biased score, with the
    pair differences [B,Nq,Nk,P], squared distances and RBF terms [B,H,Nq,Nk,F]."""
    q, k, qp, kp = (np.asarray(x, np.float64) for x in (q, k, qp, kp))
    a, b = (np.asarray(w.numpy(), np.float64) for w in (score.a, score.b))
    diff = qp[:, :, None] - kp[:, None]  # [B,Nq,Nk,P]
    r2 = (diff ** 2).sum(-1)
    rbf = np.exp(-b[None, :, None, None] * r2[:, None, ..., None])  # [B,H,Nq,Nk,F]
    s = q @ k.swapaxes(-1, -2) / np.sqrt(D) + (a[None, :, None, None] * rbf).sum(-1)
    s = np.where(valid, s, -np.inf)
    m = s.max(-1, keepdims=True)
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


def make_inputs(seed=0, nq=NQ, nk=NK):
    rng = np.random.default_rng(seed)
    t = lambda *shape: tf.constant(rng.normal(size=shape), tf.float32)  # noqa: E731
    return rng, dict(q=t(B, H, nq, D), k=t(B, H, nk, D), v=t(B, H, nk, DV),
                     q_pos=t(B, nq, P), k_pos=t(B, nk, P)), t(B, H, nq, DV)


def value_and_grads(fn, score_vars, x, dout, **kw):
    """fn(**x, **kw) and its VJP with dout w.r.t. q, k, v, q_pos, k_pos and score_vars."""
    with tf.GradientTape() as tape:
        tape.watch(list(x.values()))
        out = fn(**x, **kw)
    grads = tape.gradient(out, list(x.values()) + list(score_vars), output_gradients=dout)
    return out, grads


def run_mode(mode, f):
    return f() if mode == "eager" else tf.function(f, jit_compile=mode == "xla")()


def key_mask_with_empty_element(nk=NK, seed=1):
    mask = np.random.default_rng(seed).random((B, nk)) > 0.3
    mask[1] = False  # every query of batch element 1 has no key at all
    return tf.constant(mask)


MASKS = {
    "none": dict(),
    "key_mask": dict(key_mask=key_mask_with_empty_element()),
    "causal_and_key_mask": dict(
        key_mask=tf.constant(np.random.default_rng(2).random((B, NK)) > 0.3, tf.float32),
        pair_mask_fn=causal),
}


def allowed(kw, nq=NQ, nk=NK):
    valid = np.ones((B, 1, nq, nk), bool)
    if "key_mask" in kw:
        valid &= np.asarray(kw["key_mask"], bool)[:, None, None, :]
    if "pair_mask_fn" in kw:
        valid &= np.tril(np.ones((nq, nk), bool))
    return valid


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mask", list(MASKS))
def test_tiled_and_dense_match_numpy_reference(mode, mask):
    rng, x, dout = make_inputs()
    score = RBFBiasScore(rng)
    kw = MASKS[mask]
    ref_out, ref_grads = numpy_reference(score, *x.values(), allowed(kw), dout)
    tiled = run_mode(mode, lambda: value_and_grads(
        tiled_attend, [score.a, score.b], x, dout, score_fn=score, tile_q=TILE, tile_k=TILE, **kw))
    dense = run_mode(mode, lambda: value_and_grads(
        dense_attend, [score.a, score.b], x, dout, score_fn=score, **kw))
    for out, grads in (tiled, dense):
        np.testing.assert_allclose(out, ref_out, atol=2e-5, rtol=1e-4)
        for g, ref in zip(grads, ref_grads):
            assert np.all(np.isfinite(g))
            np.testing.assert_allclose(g, ref, atol=5e-5, rtol=1e-4)
    if mask == "key_mask":
        assert np.all(tiled[0].numpy()[1] == 0.0)


@pytest.mark.parametrize("mode", MODES)
def test_positions_as_data_get_no_gradient(mode):
    """position_grads=False: positions are constants (gradient None); every other gradient
    still matches the NumPy reference."""
    rng, x, dout = make_inputs(seed=5)
    score = RBFBiasScore(rng)
    kw = MASKS["key_mask"]
    ref_out, ref_grads = numpy_reference(score, *x.values(), allowed(kw), dout)
    for fn, extra in ((tiled_attend, dict(tile_q=TILE, tile_k=TILE)), (dense_attend, {})):
        out, grads = run_mode(mode, lambda: value_and_grads(
            fn, [score.a, score.b], x, dout, score_fn=score, position_grads=False, **extra, **kw))
        np.testing.assert_allclose(out, ref_out, atol=2e-5, rtol=1e-4)
        assert grads[3] is None and grads[4] is None
        for i in (0, 1, 2, 5, 6):
            np.testing.assert_allclose(grads[i], ref_grads[i], atol=5e-5, rtol=1e-4)


class MLPScore:
    """TE-style score: MLP([q.k/sqrt(d) per head, x_q - x_k]) -> H logits (unbuilt Keras MLP)."""

    def __init__(self):
        self.mlp = keras.Sequential([keras.layers.Dense(16, activation="gelu"),
                                     keras.layers.Dense(H)])

    def __call__(self, q, k, q_pos, k_pos, q_valid=None, k_valid=None):
        feats = tf.concat([tf.transpose(mha_score(q, k), [0, 2, 3, 1]),
                           q_pos[:, :, None] - k_pos[:, None]], -1)  # [B,tq,tk,H+P]
        return tf.transpose(self.mlp(feats), [0, 3, 1, 2])


@pytest.mark.parametrize("mode", MODES)
def test_keras_mlp_score_gradients_match_dense(mode):
    _, x, dout = make_inputs(seed=3)
    score = MLPScore()
    kw = dict(score_fn=score, key_mask=MASKS["causal_and_key_mask"]["key_mask"],
              pair_mask_fn=causal)

    def both():  # tiled first: the MLP is built inside the tiled loops
        tiled = value_and_grads(tiled_attend, [], x, dout, tile_q=TILE, tile_k=TILE, **kw)
        variables = score.mlp.trainable_variables
        tiled = value_and_grads(tiled_attend, variables, x, dout, tile_q=TILE, tile_k=TILE, **kw)
        return tiled, value_and_grads(dense_attend, variables, x, dout, **kw)

    (out_t, grads_t), (out_d, grads_d) = run_mode(mode, both)
    assert len(grads_t) == 5 + 4
    np.testing.assert_allclose(out_t, out_d, atol=2e-5, rtol=1e-4)
    for g_t, g_d in zip(grads_t, grads_d):
        np.testing.assert_allclose(g_t, g_d, atol=5e-5, rtol=1e-4)
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
        np.testing.assert_allclose(a, b, atol=1e-3, rtol=1e-3)


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
    np.testing.assert_allclose(out, ref_out, atol=2e-5, rtol=1e-4)
    for a, b in zip(g, ref_g[:3]):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4)


@pytest.mark.parametrize("nq,nk", [(0, 5), (3, 0), (0, 0)])
def test_empty_axes_with_dynamic_shapes(nq, nk):
    """No queries, or an empty context, with every size unknown when tracing: no queries
    give an empty output; no keys give zeros (the prior case), with zero gradients."""
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


def test_attend_dispatch(monkeypatch):
    _, x, _ = make_inputs(seed=7, nq=9, nk=11)
    calls = []
    real = ex.tiled_attend
    monkeypatch.setattr(ex, "tiled_attend", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    small = attend(mha_score, x["q"], x["k"], x["v"])
    assert calls == []
    forced = attend(mha_score, x["q"], x["k"], x["v"], tile=4)
    # 2^30 floats per pair: the dense block would be far over the dense budget
    by_size = attend(mha_score, x["q"], x["k"], x["v"], pair_floats=1 << 30)
    assert [(c["tile_q"], c["tile_k"]) for c in calls] == [(4, 4), (16, 16)]
    np.testing.assert_allclose(forced, small, atol=1e-5)
    np.testing.assert_allclose(by_size, small, atol=1e-5)  # tile clamped to the 9 / 11 rows


def test_tiling_rule_from_block_memory():
    def qk(b, h, nq, nk):
        return tf.zeros([b, h, nq, 1]), tf.zeros([b, h, nk, 1])

    # on a CPU: dense while B * Nq * Nk * pair_floats * 4 bytes <= 2^27 (BUDGETS["CPU"])
    assert ex.choose_tile(*qk(1, 8, 2048, 2048)) is None  # 2^22 pairs x 8 floats = 2^27 bytes
    assert ex.choose_tile(*qk(2, 8, 2048, 2048)) == (256, 256)  # 2^23 / (32 * 2) = 2^17 pairs per block
    assert ex.choose_tile(*qk(16, 8, 2000, 1000)) == (128, 128)  # TNP-D at Nc = Nt = 1000, batch 16
    assert ex.choose_tile(*qk(1, 8, 2000, 5000), pair_floats=136) == (128, 128)  # TE attention
    assert ex.choose_tile(*qk(1, 4, 5000, 5000), pair_floats=24) == (256, 256)  # BSA-TNP, batch 1
    assert ex.choose_tile(*qk(8, 4, 1536, 512), pair_floats=24) == (128, 128)  # BSA-TNP, batch 8
    assert ex.choose_tile(*qk(1, 8, 10, 10), tile_size=3) == (3, 3)  # explicit tile
    assert ex.choose_tile(*qk(1, 8, 10, 10), dense_pairs=99) == (512, 512)  # explicit dense limit
    # inference compiled with XLA on a CPU: tiles up to 128 get key tiles half as long
    assert ex.choose_tile(*qk(16, 8, 2000, 1000), compiled_inference=True) == (128, 64)
    assert ex.choose_tile(*qk(1, 4, 5000, 5000), pair_floats=24, compiled_inference=True) == (256, 256)
    assert ex.choose_tile(*qk(8, 8, 4000, 4000), compiled_inference=True, device="GPU") == (512, 512)
    seen = []
    tf.function(lambda: seen.append(ex.choose_tile(*qk(16, 8, 2000, 1000))) or tf.constant(0))()
    assert seen == [(128, 64)]  # a tf.function with no tape: the tiled loop runs under XLA
    tf.function(lambda: seen.append(ex.choose_tile(*qk(16, 8, 2000, 1000))) or tf.constant(0),
                jit_compile=True)()
    assert seen[1] == (128, 128)  # inside the caller's XLA function: square tiles
    unknown = tf.TensorSpec([None, 8, None, 1]), tf.TensorSpec([None, 8, None, 1])
    assert ex.choose_tile(*unknown) == (256, 256)  # unknown sizes: tiled, B counted as 8


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
        np.testing.assert_allclose(tf.cast(out, tf.float32), ref, atol=5e-2)
        assert all(np.all(np.isfinite(tf.cast(g, tf.float32))) for g in grads)


class PairUpdate:
    """update_fn: (x_q - x_k) * tanh(sum_h c_h a_h) with trainable c [H]."""

    def __init__(self, rng):
        self.c = tf.Variable(rng.normal(size=(H,)), dtype=tf.float32)

    def __call__(self, weights, q_pos, k_pos):
        phi = tf.tanh(tf.einsum("bhqk,h->bqk", weights, self.c))
        return (q_pos[:, :, None] - k_pos[:, None]) * phi[..., None]


def numpy_update(score, update, q, k, qp, kp, valid):
    """Float64 mean over allowed keys of update(softmax weights): [B, Nq, P]."""
    p, diff, _, _ = numpy_weights(score, q, k, qp, kp, valid)
    phi = np.tanh(np.einsum("bhqk,h->bqk", p, update.c.numpy().astype(np.float64)))
    vm = np.broadcast_to(valid[:, 0], phi.shape)
    total = (diff * (phi * vm)[..., None]).sum(2)
    return total / np.maximum(vm.sum(-1), 1.0)[..., None]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mask", list(MASKS))
def test_position_update_tiled_and_dense_match(mode, mask):
    """update_fn: values against a NumPy reference; the tiled custom gradient (w.r.t. q, k,
    v, positions, the score's and the update's variables) against autodiff of the dense
    path, with the attention output and the update both used downstream."""
    rng, x, dout = make_inputs(seed=11)
    score, update = RBFBiasScore(rng), PairUpdate(rng)
    kw = MASKS[mask]
    dupd = tf.constant(rng.normal(size=(B, NQ, P)), tf.float32)
    variables = [score.a, score.b, update.c]

    def run(fn, **extra):
        with tf.GradientTape() as tape:
            tape.watch(list(x.values()))
            out, upd = fn(score_fn=score, update_fn=update, **x, **kw, **extra)
            loss = tf.reduce_sum(out * dout) + tf.reduce_sum(upd * dupd)
        return out, upd, tape.gradient(loss, list(x.values()) + variables)

    tiled = run_mode(mode, lambda: run(tiled_attend, tile_q=TILE, tile_k=TILE))
    dense = run_mode(mode, lambda: run(dense_attend))
    ref = numpy_update(score, update, x["q"], x["k"], x["q_pos"], x["k_pos"], allowed(kw))
    np.testing.assert_allclose(dense[1], ref, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(tiled[1], ref, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(tiled[0], dense[0], atol=2e-5, rtol=1e-4)
    for i, (gt, gd) in enumerate(zip(tiled[2], dense[2])):
        assert np.all(np.isfinite(gt)), i
        np.testing.assert_allclose(gt, gd, atol=5e-5, rtol=1e-3, err_msg=f"gradient {i}")


def test_nested_positions_reach_the_score_per_tile():
    """Positions may be a nest (e.g. one tensor per bias group): each leaf is tiled."""
    rng, x, dout = make_inputs(seed=12)
    score = RBFBiasScore(rng)
    nested = lambda q, k, qp, kp, *_: score(q, k, qp["a"] + qp["b"], kp["a"] + kp["b"])  # noqa: E731
    half = {n: {"a": 0.5 * x[n], "b": 0.5 * x[n]} for n in ("q_pos", "k_pos")}
    args = dict(q=x["q"], k=x["k"], v=x["v"], key_mask=MASKS["key_mask"]["key_mask"])
    want = dense_attend(score, q_pos=x["q_pos"], k_pos=x["k_pos"], **args)
    for fn, extra in ((tiled_attend, dict(tile_q=TILE, tile_k=TILE)), (dense_attend, {})):
        with tf.GradientTape() as tape:
            tape.watch(tf.nest.flatten(half))
            out = fn(nested, **half, **args, **extra)
        grads = tape.gradient(out, tf.nest.flatten(half), output_gradients=dout)
        np.testing.assert_allclose(out, want, atol=2e-5)
        assert all(g is not None and np.all(np.isfinite(g)) for g in grads)


@pytest.mark.parametrize("xla,chunks", [("auto", 1), ("auto", 2), (False, "auto"), (True, 2)])
@pytest.mark.parametrize("mask", list(MASKS))
def test_inference_forward_with_or_without_xla_matches_numpy(xla, chunks, mask):
    """The tiled forward pass as inference runs it (a tf.function, no tape): compiled with
    XLA ("auto" and True) or not, in one call or two query chunks (the second overlapping
    the first), with masks and a position update, against NumPy."""
    rng, x, _ = make_inputs(seed=13)
    score, update = RBFBiasScore(rng), PairUpdate(rng)
    kw = MASKS[mask]
    with ex.options(xla=xla, query_chunks=chunks):
        out, upd = tf.function(lambda: tiled_attend(
            score, **x, **kw, tile_q=TILE, tile_k=TILE, update_fn=update))()
    p = numpy_weights(score, x["q"], x["k"], x["q_pos"], x["k_pos"], allowed(kw))[0]
    np.testing.assert_allclose(out, p @ np.asarray(x["v"], np.float64), atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(upd, numpy_update(score, update, x["q"], x["k"], x["q_pos"],
                                                 x["k_pos"], allowed(kw)), atol=2e-5, rtol=1e-4)


def test_xla_for_the_tiled_loop_only_in_graph_inference():
    """options(xla="auto"): compiled inside a non-XLA tf.function with no tape recording;
    not eagerly, not under a tape (training), not inside an XLA function (already compiled)."""
    seen = {}

    def record(name):
        seen[name] = ex._compile_tiles()
        return tf.constant(0.0)

    def taped(name):
        with tf.GradientTape():
            return record(name)

    record("eager")
    tf.function(lambda: record("graph"))()
    tf.function(lambda: taped("graph+tape"))()
    tf.function(lambda: record("xla"), jit_compile=True)()
    with ex.options(xla=False):
        tf.function(lambda: record("graph, xla=False"))()
    with ex.options(xla=True):
        record("eager, xla=True")
        tf.function(lambda: taped("graph+tape, xla=True"))()
    assert seen == {"eager": False, "graph": True, "graph+tape": False, "xla": False,
                    "graph, xla=False": False, "eager, xla=True": True,
                    "graph+tape, xla=True": True}


def test_options_override_the_tiling_rule_and_layer_tiles():
    q, k = tf.zeros([16, 8, 2000, 1]), tf.zeros([16, 8, 1000, 1])
    small = tf.zeros([1, 8, 10, 1])
    with ex.options(tile=None):
        assert ex.choose_tile(q, k) is None and ex.choose_tile(q, k, tile_size=64) is None
    with ex.options(tile=(32, 16)):
        assert ex.choose_tile(small, small) == (32, 16)
    with ex.options(tile=32):
        assert ex.choose_tile(small, small) == (32, 32)
        with ex.options():  # the innermost block wins; leaving it restores the outer one
            assert ex.choose_tile(small, small) is None
        assert ex.choose_tile(small, small) == (32, 32)
    assert ex.choose_tile(q, k) == (128, 128)
    for bad in (dict(tile=0), dict(tile="dense"), dict(tile=True), dict(tile=(32,)), dict(tile=(8, 0)),
                dict(xla="yes")):
        with pytest.raises(ValueError, match="options: (tile|xla) must be"):
            with ex.options(**bad):
                pass


def test_query_chunks_rule(monkeypatch):
    """One query chunk per core on a CPU, one call on a GPU; never more chunks than query
    tiles; an options() count wins; a length unknown at trace time runs as one call."""
    monkeypatch.setattr(ex, "_usable_cores", lambda: 4)
    assert ex.query_chunks(2000, 128, "CPU") == 4
    assert ex.query_chunks(2000, 128, "CPU", shared=False) == 1  # a score with weights: asked for only
    assert ex.query_chunks(300, 128, "CPU") == 2  # two whole tiles
    assert ex.query_chunks(100, 128, "CPU") == 1
    assert ex.query_chunks(2000, 128, "GPU") == 1
    assert ex.query_chunks(None, 128, "CPU") == 1
    with ex.options(query_chunks=3):
        assert ex.query_chunks(2000, 128, "GPU") == 3 and ex.query_chunks(300, 128, "CPU") == 2
        assert ex.query_chunks(2000, 128, "CPU", shared=False) == 3
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="options: query_chunks must be"):
            with ex.options(query_chunks=bad):
                pass


def test_lane_tiles_rule():
    """Lane tiles cut a query chunk and the keys into equal whole tiles within the CPU's
    bounds (2048 x 256); a GPU runs no lanes; a size unknown at trace time gets the bound."""
    assert ex.lane_tiles(2000, 1000, 2) == (1000, 250)  # TNP-D at Nc = Nt = 1000 on 2 cores
    assert ex.lane_tiles(5000, 5000, 2) == (1250, 250)  # 2 tiles per chunk of 2500 rows
    assert ex.lane_tiles(10, 3, 4) == (3, 3)
    assert ex.lane_tiles(None, tf.constant(7), 2) == (2048, 256)
    assert ex.lane_tiles(2000, 1000, 2, "GPU") is None
    for n, parts, bound in [(2000, 2, 1024), (5000, 2, 1024), (1000, 1, 256), (999, 4, 64), (1, 3, 8)]:
        t = ex.balanced_tile(n, parts, bound)
        rows = -(-n // parts)
        tiles = -(-rows // t)
        assert t <= bound and tiles == -(-rows // bound) and tiles * t - rows < tiles


def test_tiling_rule_per_device():
    """A GPU runs one large block rather than a loop of small ones: dense up to its budget."""
    q, k = tf.zeros([16, 8, 2000, 1]), tf.zeros([16, 8, 1000, 1])  # 2^30 bytes of logits less 5%
    assert ex.choose_tile(q, k, device="CPU") == (128, 128)
    assert ex.choose_tile(q, k, device="GPU") is None
    big = tf.zeros([8, 8, 4000, 1])  # 4 GiB of logits
    assert ex.choose_tile(big, big, device="GPU") == (512, 512)  # 2^26 / (32 * 8) = 2^18 pairs per block
    with tf.device("/CPU:0"):
        assert ex.device_kind(tf.zeros([1])) == "CPU"


def small_1d_batch(rng):
    """A batch of 2 tasks, 21 context and 17 target points, 1-D x and y."""
    return {k: tf.constant(rng.normal(size=(2, n, 1)), tf.float32)
            for k, n in (("xc", 21), ("yc", 21), ("xt", 17), ("yt", 17))}


def test_model_forward_same_under_every_executor_option(monkeypatch):
    """A TNP-D forward (tf.function, inference) is the same dense, tiled, tiled with the
    loop compiled by XLA, and lane by lane in query chunks (the CPU's rule for a layer's
    ``tile_size``, lane tiles shrunk to 8 x 6 so that a batch this small needs several): the options change how,
    not what, the model computes, with padded context and target points."""
    import taylorformer as tfm

    model = tfm.build_model("tnp-d", encoder={"layers": 2, "attention": {"name": "mha-xy", "tile_size": 8}})
    rng = np.random.default_rng(3)
    batch = small_1d_batch(rng)
    batch["mask_c"] = tf.constant(rng.random((2, 21)) > 0.2, tf.float32)
    batch["mask_t"] = tf.constant(rng.random((2, 17)) > 0.2, tf.float32)
    monkeypatch.setitem(ex.LANE_TILES, "CPU", (8, 6))
    ex._SHARED_FORWARDS.clear()
    results = []
    for opts in (dict(tile=None), dict(tile=8, xla=False), dict(tile=8, xla=True), dict(query_chunks=2)):
        with ex.options(**opts):
            results.append(tf.function(lambda b: model.predict_distribution(b).mean())(batch).numpy())
    assert any(plan.lanes for plan in ex._SHARED_FORWARDS)
    real = batch["mask_t"].numpy() > 0
    for other in results[1:]:
        np.testing.assert_allclose(other[real], results[0][real], atol=2e-5)


def test_compiled_forward_is_shared_by_weight_free_scores_only():
    """Inference compiles the tiled loop once per plan and shapes, not once per layer:
    every layer of a TNP-D (the plain ``mha_score``) calls one XLA function. A score with
    weights, a closure or a structural mask gets a function of its own."""
    import taylorformer as tfm

    ex._SHARED_FORWARDS.clear()
    model = tfm.build_model("tnp-d", encoder={"layers": 3})
    rng = np.random.default_rng(4)
    batch = small_1d_batch(rng)
    with ex.options(tile=8):
        tf.function(lambda b: model.predict_distribution(b).mean())(batch)
    (plan, forward), = ex._SHARED_FORWARDS.items()
    assert plan.score_fn is mha_score and forward.experimental_get_tracing_count() == 1
    plan_of = lambda score, mask=None, q_pos=None: ex._Plan(  # noqa: E731
        score, mask, None, 16, 16, True, False, False, q_pos, q_pos)
    x = tf.zeros([2, 5, 1])
    assert plan_of(mha_score, q_pos=x).shareable()
    assert not plan_of(RBFBiasScore(rng)).shareable()  # weights
    assert not plan_of(lambda q, k, *_: mha_score(q, k) * x[0, 0, 0]).shareable()  # a closure
    assert not plan_of(mha_score, mask=causal).shareable()
    assert not plan_of(mha_score, q_pos={"a": x}).shareable()  # a nest of positions


@pytest.mark.parametrize("nq,nk", [(NQ, NK), (5, 3), (NQ, 0)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("chunks", [1, 2])
@pytest.mark.parametrize("lanes", [True, False])
def test_shared_forward_over_slices_matches_numpy(nq, nk, masked, chunks, lanes, monkeypatch):
    """Inference with a weight-free score runs one XLA loop over slices of the inputs (the
    last tile overlaps the one before), in one call or two query chunks of one length (the
    second overlapping the first; both calls trace one function), lane by lane (a CPU's
    rule, here with lane tiles of 7 x 5) or over blocks of every row and head (an
    ``options`` tile): against NumPy for sizes not a multiple of the tile, shorter than a
    tile and an empty context, with and without a key mask (an element with no key at
    all gives 0)."""
    _, x, _ = make_inputs(seed=15, nq=nq, nk=nk)
    kw = dict(key_mask=key_mask_with_empty_element(nk)) if masked else {}
    ex._SHARED_FORWARDS.clear()
    monkeypatch.setitem(ex.LANE_TILES, "CPU", (7, 5))
    with ex.options(query_chunks=chunks, **({} if lanes else dict(tile=TILE))):
        out = tf.function(lambda: tiled_attend(mha_score, **x, **kw, tile_q=TILE, tile_k=TILE))()
    (plan, forward), = ex._SHARED_FORWARDS.items()  # the sliced path ran
    assert forward.experimental_get_tracing_count() == 1
    assert plan.lanes == lanes and (plan.tq <= 7 and plan.tk <= 5 if lanes else plan.tq == min(TILE, nq))
    q, k, v = (np.asarray(x[n], np.float64) for n in "qkv")
    valid = np.broadcast_to(allowed(kw, nq, nk), (B, H, nq, nk))
    s = np.where(valid, q @ k.swapaxes(-1, -2) / np.sqrt(D), -np.inf)
    m = np.max(s, -1, keepdims=True, initial=-np.inf)
    e = np.where(valid, np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    z = e.sum(-1, keepdims=True)
    expected = np.divide(e, z, out=np.zeros_like(e), where=z > 0) @ v
    np.testing.assert_allclose(out, expected, atol=2e-5, rtol=1e-4)
