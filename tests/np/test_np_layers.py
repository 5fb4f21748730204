"""NP / ANP layers against a NumPy statement of the same computation with the same weights:
the attention block, the latent path (masked mean, scale link), both encoders' decoder
inputs, and padding."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from taylorformer.plugins.np.encoders import ANPEncoder, NPEncoder  # noqa: E402
from taylorformer.plugins.np.latent_path import LatentPath  # noqa: E402
from taylorformer.plugins.np.mab import MultiheadAttentionBlock  # noqa: E402


def randomise(layer, seed):
    """Every weight of ``layer`` drawn N(0, 0.3^2) (biases included, so they are tested)."""
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in layer.get_weights()])


def np_mlp(mlp, x):
    """The taylorformer MLP: ReLU hidden Dense layers, linear output."""
    for dense in mlp.hidden:
        x = np.maximum(x @ dense.kernel.numpy() + dense.bias.numpy(), 0)
    return x @ mlp.out.kernel.numpy() + mlp.out.bias.numpy()


def np_layer_norm(x, norm):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * norm.gamma.numpy() + norm.beta.numpy()


def np_mab(block, q, k, v, mask):
    """Set Transformer MAB, one head at a time, invalid keys left out of the softmax."""
    q, k, v = q @ block.q.kernel.numpy(), k @ block.k.kernel.numpy(), v @ block.v.kernel.numpy()
    width, heads = block.width, block.num_heads
    dh = width // heads
    out = np.zeros_like(q)
    for b in range(q.shape[0]):
        valid = mask[b] > 0
        for h in range(heads):
            cols = slice(h * dh, (h + 1) * dh)
            if not valid.any():
                continue
            logits = q[b, :, cols] @ k[b][valid][:, cols].T / np.sqrt(width)
            w = np.exp(logits - logits.max(-1, keepdims=True))
            out[b, :, cols] = (w / w.sum(-1, keepdims=True)) @ v[b][valid][:, cols]
    hidden = np_layer_norm(q + out, block.norm1)
    return np_layer_norm(hidden + np.maximum(hidden @ block.out.kernel.numpy() + block.out.bias.numpy(), 0),
                         block.norm2)


def np_masked_mean(h, mask):
    return (h * mask[..., None]).sum(1) / np.maximum(mask.sum(1), 1)[:, None]


def np_latent_path(path, x, y, mask):
    h = np_mlp(path.pre, np.concatenate([x, y], -1))
    if path.attention is not None:
        h = np.maximum(h, 0)
        h = np_mab(path.attention, h, h, h, mask)
    loc, raw = np.split(np_mlp(path.post, np_masked_mean(h, mask)), 2, -1)
    return loc, 0.1 + 0.9 / (1 + np.exp(-raw))


def batch_with_padding(seed, b=3, nc=6, nt=4, dx=1, dy=1):
    """A batch whose context rows have 6, 4 and 1 valid points (the rest padding with
    garbage values)."""
    rng = np.random.default_rng(seed)
    mask_c = np.zeros((b, nc), "float32")
    for i, n in enumerate([6, 4, 1][:b]):
        mask_c[i, :n] = 1
    return {"xc": rng.normal(size=(b, nc, dx)).astype("float32"),
            "yc": rng.normal(size=(b, nc, dy)).astype("float32"),
            "xt": rng.normal(size=(b, nt, dx)).astype("float32"),
            "yt": rng.normal(size=(b, nt, dy)).astype("float32"),
            "mask_c": mask_c, "mask_t": np.ones((b, nt), "float32")}


def test_attention_block_matches_numpy_with_masked_keys():
    rng = np.random.default_rng(0)
    block = MultiheadAttentionBlock(width=8, num_heads=2)
    q, k, v = (rng.normal(size=s).astype("float32") for s in ((3, 5, 3), (3, 6, 4), (3, 6, 4)))
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 0, 1, 0, 0, 1], [0, 0, 0, 0, 0, 0]], "float32")
    block(q, k, v, key_mask=mask)
    randomise(block, 1)
    got = block(q, k, v, key_mask=mask).numpy()
    np.testing.assert_allclose(got, np_mab(block, q, k, v, mask), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("self_attention", [False, True])
def test_latent_path_matches_numpy(self_attention):
    batch = batch_with_padding(2)
    path = LatentPath(width=8, latent_dim=3, layers=2, post_layers=2, self_attention=self_attention, num_heads=2)
    path(batch["xc"], batch["yc"], batch["mask_c"])
    randomise(path, 3)
    loc, scale = (t.numpy() for t in path(batch["xc"], batch["yc"], batch["mask_c"]))
    ref_loc, ref_scale = np_latent_path(path, batch["xc"], batch["yc"], batch["mask_c"])
    np.testing.assert_allclose(loc, ref_loc, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(scale, ref_scale, rtol=1e-4, atol=1e-6)
    assert (scale > 0.1).all() and (scale < 1.0).all()


def decoder_inputs(encoder, batch, z):
    return encoder(batch, tf.constant(z)).numpy()


def test_np_encoder_matches_numpy():
    batch = batch_with_padding(4)
    enc = NPEncoder(1, 1, width=8, latent_dim=3, latent_layers=2, latent_post_layers=1, num_heads=2,
                    layers=3, deterministic_post_layers=2)
    z = np.random.default_rng(5).normal(size=(2, 3, 3)).astype("float32")  # K=2 draws
    decoder_inputs(enc, batch, z)
    randomise(enc, 6)
    got = decoder_inputs(enc, batch, z)
    r = np_mlp(enc.post, np_masked_mean(np_mlp(enc.pre, np.concatenate([batch["xc"], batch["yc"]], -1)),
                                        batch["mask_c"]))
    nt = batch["xt"].shape[1]
    for k in range(2):
        want = np.concatenate([np.repeat(r[:, None], nt, 1), np.repeat(z[k][:, None], nt, 1), batch["xt"]], -1)
        np.testing.assert_allclose(got[k], want, rtol=1e-4, atol=1e-5)
    assert got.shape == (2, 3, nt, enc.output_dim) and enc.output_dim == 8 + 3 + 1


def test_anp_encoder_matches_numpy():
    batch = batch_with_padding(7)
    enc = ANPEncoder(1, 1, width=8, latent_dim=3, latent_layers=2, latent_post_layers=2, num_heads=2,
                     layers=2, query_layers=2)
    z = np.random.default_rng(8).normal(size=(1, 3, 3)).astype("float32")
    decoder_inputs(enc, batch, z)
    randomise(enc, 9)
    got = decoder_inputs(enc, batch, z)
    mask = batch["mask_c"]
    v = np_mlp(enc.values, np.concatenate([batch["xc"], batch["yc"]], -1))
    v = np_mab(enc.attention, v, v, v, mask)
    r = np_mab(enc.cross_attention, np_mlp(enc.queries, batch["xt"]), np_mlp(enc.queries, batch["xc"]), v, mask)
    nt = batch["xt"].shape[1]
    want = np.concatenate([r, np.repeat(z[0][:, None], nt, 1), batch["xt"]], -1)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
    loc, scale = (t.numpy() for t in enc.latent_parameters(batch["xc"], batch["yc"], mask))
    ref_loc, ref_scale = np_latent_path(enc.latent_path, batch["xc"], batch["yc"], mask)
    np.testing.assert_allclose(loc, ref_loc, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(scale, ref_scale, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("cls", [NPEncoder, ANPEncoder])
def test_padding_changes_nothing(cls):
    """Extra padded context points with garbage values leave the decoder inputs and the
    latent distribution unchanged; without z the encoder gives the prior mean's inputs."""
    batch = batch_with_padding(10)
    enc = cls(1, 1, width=8, latent_dim=2, latent_layers=2, num_heads=2)
    z = np.ones((1, 3, 2), "float32")
    base = decoder_inputs(enc, batch, z)
    rng = np.random.default_rng(11)
    padded = dict(batch)
    for key in ("xc", "yc"):
        padded[key] = np.concatenate([batch[key], rng.normal(size=(3, 5, 1)).astype("float32") * 100], 1)
    padded["mask_c"] = np.concatenate([batch["mask_c"], np.zeros((3, 5), "float32")], 1)
    np.testing.assert_allclose(decoder_inputs(enc, padded, z), base, rtol=1e-5, atol=1e-5)
    loc, _ = enc.latent_parameters(batch["xc"], batch["yc"], batch["mask_c"])
    np.testing.assert_allclose(enc(batch).numpy(), decoder_inputs(enc, batch, loc.numpy()[None])[0], atol=1e-6)
