"""The transformer encoder's ``update_order`` (and ``final_norm``) against a NumPy statement
of each order.

The reference below writes the residual layers out in NumPy (LayerNorm, ReLU MLPs, the
final norm) and calls only the encoder's attention layers, which are checked against
their own dense references elsewhere; so it checks what ``update_order`` changes: which
context the targets attend to in each layer (the layer's input for ``"parallel"``, the
layer's updated context for ``"context-first"``, as the authors' TE-TNP code runs it),
the shared weights, and the moved locations of an attention that moves them.
"""
import numpy as np
import pytest

from taylorformer.errors import SpecError
from taylorformer.models import build_model


def layer_norm(x, norm):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * norm.gamma.numpy() + norm.beta.numpy()


def mlp(x, net):
    for dense in net.hidden:
        x = np.maximum(x @ dense.kernel.numpy() + dense.bias.numpy(), 0.0)
    return x @ net.out.kernel.numpy() + net.out.bias.numpy()


def reference_layers(enc, ctx, tgt, pc, pt, mask_c, order):
    """Target representations ``[B, Nt, D]`` (float64 arithmetic around the attention calls)."""
    def attend(i, queries, keys, q_pos, k_pos):
        out = enc.attn[i](queries.astype(np.float32), keys.astype(np.float32), q_pos=q_pos, k_pos=k_pos,
                          key_mask=mask_c)
        if enc.attn[i].updates_positions:
            out, q_pos = out
            return np.asarray(out, np.float64), np.asarray(q_pos)
        return np.asarray(out, np.float64), q_pos

    ctx, tgt = ctx.astype(np.float64), tgt.astype(np.float64)
    for i in range(enc.num_layers):
        n1, n2, ffn = enc.norm1[i], enc.norm2[i], enc.ffn[i]
        if order == "parallel":  # both attend to this layer's input context
            keys = layer_norm(ctx, n1)
            out_c, new_pc = attend(i, keys, keys, pc, pc)
            out_t, pt = attend(i, layer_norm(tgt, n1), keys, pt, pc)
        else:  # the context's block first, then the targets against the updated context
            keys = layer_norm(ctx, n1)
            out_c, new_pc = attend(i, keys, keys, pc, pc)
            updated = ctx + out_c
            updated = updated + mlp(layer_norm(updated, n2), ffn)
            out_t, pt = attend(i, layer_norm(tgt, n1), layer_norm(updated, n1), pt, new_pc)
        ctx = ctx + out_c
        ctx = ctx + mlp(layer_norm(ctx, n2), ffn)
        tgt = tgt + out_t
        tgt = tgt + mlp(layer_norm(tgt, n2), ffn)
        pc = new_pc
    return layer_norm(tgt, enc.norm_out) if enc.final_norm else tgt


def small_model(name, order, attention=None, final_norm=True):
    enc = {"layers": 3, "width": 16, "num_heads": 2, "head_dim": 8, "update_order": order, "final_norm": final_norm}
    if attention is not None:
        enc["attention"] = attention
    return build_model(name, encoder=enc, head={"width": 16, "hidden_layers": 1})


@pytest.mark.parametrize("name,attention,final_norm", [
    ("tnp-d", None, True),
    ("te-tnp", {"kernel_width": 16}, False),
    ("te-tnp", {"kernel_width": 16, "location_update": True}, True),
], ids=["mha-xy", "te-no-final-norm", "te-location-update"])
@pytest.mark.parametrize("order", ["parallel", "context-first"])
def test_layers_match_the_numpy_statement_of_each_order(name, attention, final_norm, order):
    rng = np.random.default_rng(3)
    b, nc, nt = 2, 7, 5
    batch = {"xc": rng.uniform(-2, 2, (b, nc, 1)).astype(np.float32),
             "yc": rng.normal(size=(b, nc, 1)).astype(np.float32),
             "xt": rng.uniform(-3, 3, (b, nt, 1)).astype(np.float32),
             "yt": np.zeros((b, nt, 1), np.float32),
             "mask_c": np.array([[1.0] * nc, [1.0] * 4 + [0.0] * 3], np.float32),
             "mask_t": np.ones((b, nt), np.float32)}
    model = small_model(name, order, attention, final_norm)
    model(batch)
    enc = model.encoder
    ctx, tgt = (np.asarray(t) for t in enc.tokens(batch))
    pc, pt = batch["xc"], batch["xt"]
    if not enc.embed_x:  # the encoder centres locations at the masked context mean
        mask = batch["mask_c"][..., None]
        ref = ((pc * mask).sum(1) / mask.sum(1))[:, None, :]
        pc, pt = pc - ref, pt - ref
    got = np.asarray(enc.run_layers(ctx, tgt, pc, pt, batch["mask_c"]))
    np.testing.assert_allclose(got, reference_layers(enc, ctx, tgt, pc, pt, batch["mask_c"], order),
                               rtol=1e-4, atol=1e-4)
    assert got.shape == (b, nt, 16)


def test_the_orders_differ_and_the_presets_choose():
    """Same weights, other order: other outputs; te-tnp runs context-first (App. F.1's
    self- and cross-attention blocks, the authors' code), tnp-d its paper's parallel
    masked transformer; an unknown order is a spec error naming the choices."""
    rng = np.random.default_rng(0)
    batch = {"xc": rng.normal(size=(1, 6, 1)).astype(np.float32), "yc": rng.normal(size=(1, 6, 1)).astype(np.float32),
             "xt": rng.normal(size=(1, 4, 1)).astype(np.float32), "yt": np.zeros((1, 4, 1), np.float32)}
    first, parallel = small_model("tnp-d", "context-first"), small_model("tnp-d", "parallel")
    first(batch), parallel(batch)
    parallel.set_weights(first.get_weights())
    assert np.abs(np.asarray(first(batch)["loc"]) - np.asarray(parallel(batch)["loc"])).max() > 1e-4
    assert build_model("te-tnp").encoder.update_order == "context-first"
    assert build_model("tnp-d").encoder.update_order == "parallel"
    with pytest.raises(SpecError, match="update_order.*parallel.*context-first"):
        small_model("tnp-d", "sequential")
