"""ConvCNP (plugin ``builtin-convcnp``): the SetConv maps, grids and CNNs against dense NumPy
computations with the same weights, the CNNs' receptive fields, translation equivariance
on the lattice grid (an exact property), the ``convcnp`` preset's training and XLA.

Equivariance uses inputs on the dyadic grid 1/64 and shifts that are multiples of the
grid spacing 1/8, so the shifted float32 inputs are exact and the grid moves by whole points.
"""
import numpy as np
import pytest
import tensorflow as tf

from taylorformer import loglik, registry, testing
from taylorformer.batch import with_masks
from taylorformer.errors import BatchError, SpecError
from taylorformer.models import build_model
from taylorformer.plugins.convcnp.cnn import GridCNN, resize_linear, unet_channels
from taylorformer.plugins.convcnp.encoder import ConvCNPEncoder
from taylorformer.plugins.convcnp.setconv import data_bounds, fixed_grid, lattice_grid

PPU = 8.0
TOL = 2e-5


def padded_batch(rng, dim_x, b=2, nc=(5, 9), nt=(4, 7), lim=2.0, dyadic=False):
    """Padded batch (NumPy, float32): row i has nc[i] context and nt[i] target points;
    padding carries garbage that masks must hide."""
    def draw(shape):
        x = rng.uniform(-lim, lim, shape)
        return np.round(x * 64) / 64 if dyadic else x
    mc, mt = max(nc), max(nt)
    batch = {"xc": draw((b, mc, dim_x)), "yc": rng.normal(size=(b, mc, 1)),
             "xt": draw((b, mt, dim_x)), "yt": rng.normal(size=(b, mt, 1)),
             "mask_c": np.zeros((b, mc)), "mask_t": np.zeros((b, mt))}
    for i in range(b):
        batch["mask_c"][i, :nc[i]], batch["mask_t"][i, :nt[i]] = 1, 1
        batch["xc"][i, nc[i]:] = 50.0  # far away: a padded point that leaked would show
        batch["yc"][i, nc[i]:] = 1e3
    return {k: v.astype(np.float32) for k, v in batch.items()}


def tensors(batch):
    return {k: tf.constant(v) for k, v in with_masks(batch).items()}


def np_eq(xq, xp, ls):
    """Dense EQ weights ``[Q, P]`` for one row."""
    d = (xq[:, None, :] - xp[None, :, :]) / ls
    return np.exp(-0.5 * (d ** 2).sum(-1))


def np_conv_same(h, kernel, bias):
    """Cross-correlation with zero 'same' padding, channels last: ``h [*grid, Cin]``,
    ``kernel [*k, Cin, Cout]`` -> ``[*grid, Cout]`` (1-D or 2-D), by explicit sums."""
    k = kernel.shape[:-2]
    pads = [(s // 2, s // 2) for s in k] + [(0, 0)]
    hp = np.pad(h, pads)
    out = np.zeros(h.shape[:-1] + (kernel.shape[-1],))
    for idx in np.ndindex(*h.shape[:-1]):
        window = hp[tuple(slice(i, i + s) for i, s in zip(idx, k))]
        out[idx] = np.tensordot(window, kernel, axes=(list(range(len(k) + 1)), list(range(len(k) + 1)))) + bias
    return out


# ------------------------------------------------------------------ grids
def test_fixed_grid_is_the_meshgrid():
    points, shape = fixed_grid([[-1.0, 1.0], [0.0, 3.0]], [5, 4])
    a, b = np.meshgrid(np.linspace(-1, 1, 5), np.linspace(0, 3, 4), indexing="ij")
    np.testing.assert_allclose(points.numpy()[0], np.stack([a.ravel(), b.ravel()], -1), atol=1e-6)
    assert shape == [5, 4]


def test_data_bounds_ignore_padding():
    batch = padded_batch(np.random.default_rng(0), 2)
    low, high = data_bounds([batch["xc"], batch["xt"]], [batch["mask_c"], batch["mask_t"]])
    for i, (nc, nt) in enumerate([(5, 4), (9, 7)]):
        real = np.concatenate([batch["xc"][i, :nc], batch["xt"][i, :nt]])
        np.testing.assert_array_equal(low.numpy()[i], real.min(0))
        np.testing.assert_array_equal(high.numpy()[i], real.max(0))


def test_lattice_grid_covers_the_data_with_its_margin():
    low, high = tf.constant([[-1.3, 0.2], [0.05, -2.0]]), tf.constant([[0.71, 0.9], [0.4, -1.1]])
    points, shape = lattice_grid(low, high, PPU, margin=0.25)
    points = points.numpy()
    n0 = max(np.ceil((h + 0.25) * PPU) - np.floor((lo - 0.25) * PPU) + 1 for lo, h in zip(low[:, 0].numpy(), high[:, 0].numpy()))
    assert int(shape[0]) == n0
    for i in range(2):
        for d in range(2):
            axis = np.unique(points[i, :, d])
            np.testing.assert_allclose(axis * PPU, np.round(axis * PPU), atol=1e-5)  # on the lattice
            np.testing.assert_allclose(np.diff(axis), 1 / PPU, atol=1e-6)
            assert axis[0] <= low[i, d] - 0.25 < axis[0] + 1 / PPU  # starts at the margin, rounded down
            assert axis[-1] >= high[i, d] + 0.25


def test_lattice_grid_of_fixed_size_is_centred_per_row():
    low, high = tf.constant([[-1.3], [10.0]]), tf.constant([[0.7], [12.0]])
    points, shape = lattice_grid(low, high, PPU, grid_points=[33])
    assert shape == [33]
    for i, centre in enumerate([-0.3, 11.0]):
        axis = points.numpy()[i, :, 0]
        assert axis[16] == pytest.approx(np.round(centre * PPU) / PPU, abs=1e-6)
        np.testing.assert_allclose(np.diff(axis), 1 / PPU, atol=1e-5)


# ------------------------------------------------------------------ SetConv and the whole encoder against NumPy
def small_encoder(dim_x, **options):
    opts = {"channels": 3, "cnn": "conv", "layers": 1, "kernel_size": 3, "points_per_unit": PPU,
            "grid_points": 40, "embed_hidden_layers": 0, "init_lengthscale": 0.3, **options}
    return ConvCNPEncoder(dim_x, 1, **opts)


@pytest.mark.parametrize("dim_x", [1, 2])
@pytest.mark.parametrize("normalise", [True, False])
def test_encoder_matches_a_dense_numpy_forward(dim_x, normalise):
    """Grid, SetConv with density channel and masks, the embedding, one conv block and the
    SetConv decoder, recomputed densely in NumPy from the layer's weights."""
    rng = np.random.default_rng(1)
    batch = padded_batch(rng, dim_x)
    enc = small_encoder(dim_x, normalise=normalise, points_per_unit=PPU / dim_x)
    out = enc(tensors(batch)).numpy()
    for layer in (enc.setconv_in, enc.setconv_out):  # distinct lengthscales per dimension
        layer.raw_lengthscale.assign(rng.uniform(-1.5, -0.5, dim_x))
    out = enc(tensors(batch)).numpy()
    x_grid, shape = enc.grid(tensors(batch))
    x_grid, shape = x_grid.numpy(), [int(s) for s in shape]
    ls_in, ls_out = enc.setconv_in.lengthscale.numpy(), enc.setconv_out.lengthscale.numpy()
    (w_emb, b_emb), conv = [v.numpy() for v in enc.embed.out.weights], enc.cnn.stack[0].conv
    kernel, bias = conv.kernel.numpy(), conv.bias.numpy()
    for i, (nc, nt) in enumerate([(5, 4), (9, 7)]):
        xc, yc, xt = batch["xc"][i, :nc], batch["yc"][i, :nc], batch["xt"][i, :nt]
        # the grid: centred lattice of the row's real inputs
        real = np.concatenate([xc, xt])
        ppu = PPU / dim_x
        centre = np.round((real.min(0) + real.max(0)) / 2 * ppu)
        n = shape[0]
        axes = [(centre[d] - (n - 1) // 2 + np.arange(n)) / ppu for d in range(dim_x)]
        grid = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], -1)
        np.testing.assert_allclose(x_grid[i], grid, atol=1e-6)
        w = np_eq(grid, xc.astype(np.float64), ls_in)  # [G, Nc]: padded points left out
        density = w.sum(1, keepdims=True)
        values = w @ yc
        if normalise:
            values = values / (density + 1e-8)
        h = np.concatenate([values, density], -1) @ w_emb + b_emb
        h = np_conv_same(np.maximum(h.reshape(shape + [-1]), 0), kernel, bias).reshape(len(grid), -1)
        expected = np_eq(xt.astype(np.float64), grid, ls_out) @ h
        np.testing.assert_allclose(out[i, :nt], expected, rtol=2e-4, atol=2e-5)


def test_encoder_passes_the_author_kit():
    testing.check_encoder("convcnp", channels=4, layers=2, kernel_size=3, grid_points=40, points_per_unit=PPU)
    testing.check_encoder("convcnp", dim_x=2, channels=4, layers=1, kernel_size=3, grid_points=20,
                          points_per_unit=PPU / 2, cnn="resconv")


def test_bad_options_are_spec_errors():
    for options, words in [({"dim_x": 3}, "1-D or 2-D"), ({"kernel_size": 4}, "odd"),
                           ({"cnn": "unet", "layers": 4}, "odd"), ({"cnn": "resnet"}, "cnn"),
                           ({"grid_range": [[0, 1]], "dim_x": 2}, "grid_range"),
                           ({"grid_points": [8, 8]}, "grid_points"), ({"grid_range": 3}, "grid_range"),
                           ({"grid_points": 5000, "dim_x": 2}, "more than"),
                           ({"embed_hidden_layers": -1}, "embed_hidden_layers")]:
        dim_x = options.pop("dim_x", 1)
        with pytest.raises(SpecError, match=words):
            ConvCNPEncoder(dim_x, 1, **options)


def test_a_grid_sized_by_the_data_is_bounded():
    enc = small_encoder(1, grid_points=None)
    batch = padded_batch(np.random.default_rng(0), 1)
    batch["xt"][0, 0, 0] = 1e6  # 8e6 grid points at 8 per unit
    with pytest.raises(BatchError, match="more grid points than"):
        enc(tensors(batch))


def test_a_fixed_grid_warns_when_the_data_outrun_it():
    enc = small_encoder(1, grid_points=9)
    batch = padded_batch(np.random.default_rng(0), 1, lim=3.0)
    with pytest.warns(RuntimeWarning, match="beyond its grid"):
        enc(tensors(batch))


# ------------------------------------------------------------------ CNNs
@pytest.mark.parametrize("kind, blocks, convs_per_block", [("conv", 3, 1), ("resconv", 2, 2)])
def test_receptive_field(kind, blocks, convs_per_block):
    """An output point depends on exactly 1 + convs * (k - 1) input points around it
    (positive weights and inputs: every ReLU passes, so no gradient vanishes by chance)."""
    k, n = 5, 41
    cnn = GridCNN(1, kind, 4, blocks, k)
    rng = np.random.default_rng(0)
    h = tf.constant(rng.uniform(0.5, 1.5, (1, n, 4)), tf.float32)
    cnn(h)
    for weight in cnn.weights:
        weight.assign(rng.uniform(0.1, 1.0, weight.shape))
    with tf.GradientTape() as tape:
        tape.watch(h)
        y = tf.reduce_sum(cnn(h)[0, n // 2])
    grad = np.abs(tape.gradient(y, h).numpy()[0]).sum(-1)
    seen = np.nonzero(grad > 0)[0]
    width = 1 + blocks * convs_per_block * (k - 1)
    assert seen[0] == n // 2 - width // 2 and seen[-1] == n // 2 + width // 2


@pytest.mark.parametrize("shape", [[37], [64], [13, 20]])
def test_unet_keeps_the_grid_shape(shape):
    cnn = GridCNN(len(shape), "unet", 4, 5, 3, max_channels=12)
    out = cnn(tf.random.normal([2] + shape + [4]))
    assert out.shape == (2, *shape, 4)
    # the reference's channels: 4, 8, 16 down, capped at 12, mirrored
    assert unet_channels(4, 5, 12) == [8, 12, 12, 8, 4]
    assert [b.conv.kernel.shape[-2:] for b in cnn.stack][3:] == [(24, 8), (16, 4)]  # concatenated skips


def test_resize_linear_is_align_corners_interpolation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 5, 7, 2)).astype(np.float32)
    out = resize_linear(tf.constant(x), [9, 13]).numpy()
    i, j = np.linspace(0, 4, 9), np.linspace(0, 6, 13)
    rows = np.stack([np.stack([np.interp(i, np.arange(5), x[0, :, c, k]) for c in range(7)], 1)
                     for k in range(2)], -1)  # [9, 7, 2]
    want = np.stack([np.stack([np.interp(j, np.arange(7), rows[r, :, k]) for r in range(9)], 0)
                     for k in range(2)], -1)
    np.testing.assert_allclose(out[0], want, atol=1e-5)


# ------------------------------------------------------------------ translation equivariance
@pytest.mark.parametrize("dim_x, cnn, grid_points", [(1, "unet", 40), (1, "conv", None), (2, "resconv", 24)])
def test_translation_equivariance_on_the_lattice(dim_x, cnn, grid_points):
    """Shifting every input by a multiple of the spacing leaves the predictions unchanged."""
    model = build_model("convcnp", dim_x=dim_x, head={"width": 8, "hidden_layers": 1},
                        encoder={"channels": 4, "cnn": cnn, "layers": 3 if cnn == "unet" else 2,
                                 "kernel_size": 3, "points_per_unit": PPU / dim_x, "grid_points": grid_points})
    batch = padded_batch(np.random.default_rng(2), dim_x, dyadic=True)
    out = model(batch)
    for shift in (0.75, -13.0, 250.25):  # multiples of the spacing 1/4 (2-D) and 1/8 (1-D)
        moved = {**batch, "xc": batch["xc"] + np.float32(shift), "xt": batch["xt"] + np.float32(shift)}
        got = model(moved)
        for key in ("loc", "scale"):
            np.testing.assert_allclose(got[key], out[key], atol=TOL, err_msg=f"{key}, shift {shift}")


# ------------------------------------------------------------------ the preset
def test_preset_size_and_registration():
    assert registry.get("encoder", "convcnp") is ConvCNPEncoder
    model = build_model("convcnp", dim_x=2)
    assert model.count_params() == 482_310  # presets.py: the BSA-TNP paper's ~507K with batch norms


def test_preset_saves_loads_and_ignores_padding(tmp_path):
    testing.check_model({"preset": "convcnp", "dim_x": 2, "encoder": {"channels": 4, "layers": 1, "kernel_size": 3},
                         "head": {"width": 8, "hidden_layers": 1}}, directory=str(tmp_path))


def test_preset_trains_and_the_loss_goes_down(tmp_path):
    from taylorformer import Trainer, TrainConfig
    from taylorformer.task import make_task

    task = make_task("gp", {"num_context": [3, 20], "num_target": 20})
    spec = {"preset": "convcnp", "encoder": {"channels": 8, "layers": 1, "grid_points": 40, "points_per_unit": PPU},
            "head": {"width": 16, "hidden_layers": 1}}
    cfg = TrainConfig(steps=40, batch_size=8, learning_rate=3e-3, schedule="constant", warmup_steps=0,
                      tensorboard=False, jit_compile=False)
    trainer = Trainer(spec, task, cfg, str(tmp_path), task_name="gp")
    step = trainer.compiled_step()
    data = list(task.dataset("train", batch_size=8, seed=0, num_batches=4))
    held = next(iter(task.dataset("val", batch_size=8, seed=1, num_batches=1)))
    before = float(tf.reduce_mean(loglik(trainer.model, held)))
    for _ in range(4):
        for b in data:
            step(b)
    assert float(tf.reduce_mean(loglik(trainer.model, held))) > before + 0.05


def test_the_fixed_size_grid_compiles_with_xla():
    """The default training compiles with XLA, which needs the grid's size fixed: the
    compiled forward pass gives the eager one's predictions."""
    model = build_model("convcnp", dim_x=2, head={"width": 8, "hidden_layers": 1},
                        encoder={"channels": 4, "layers": 1, "kernel_size": 3, "points_per_unit": PPU / 2,
                                 "grid_points": 24})
    batch = tensors(padded_batch(np.random.default_rng(3), 2))
    compiled = tf.function(lambda b: model(b), jit_compile=True)(batch)
    np.testing.assert_allclose(compiled["loc"], model(batch)["loc"], atol=1e-5)
