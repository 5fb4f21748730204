"""Image completion task (tasks/image.py) and its plot (plotting/images.py), offline:
scikit-learn's bundled 8x8 digits written as .npy/.npz and a PNG folder, and
tensorflow-datasets' mock data for the tfds: sources and the presets. Pixels and
coordinates are checked against independent NumPy computations."""
import numpy as np
import pytest

from taylorformer import registry
from taylorformer.errors import TaskError
from taylorformer.task import make_task, plot_task
from taylorformer.tasks.image import pixel_coordinates, pixel_indices

sklearn_datasets = pytest.importorskip("sklearn.datasets")
Image = pytest.importorskip("PIL.Image")

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
SMALL = {"num_context": [3, 20], "num_target": [1, 30]}


@pytest.fixture(scope="module")
def digits():
    """``(uint8 images [N, 8, 8], labels [N])``: the 0..16 digits scaled to 0..255."""
    data = sklearn_datasets.load_digits()
    return np.rint(data.images * 255 / 16).astype(np.uint8), data.target


@pytest.fixture(scope="module")
def files(digits, tmp_path_factory):
    """The digits as .npy (uint8), .npz (float [N, 8, 8, 1] in [0, 1] + labels) and a
    folder of the first 40 as grey PNGs."""
    images, labels = digits
    root = tmp_path_factory.mktemp("digits")
    np.save(root / "digits.npy", images)
    np.savez(root / "digits.npz", images=(images / 255.0)[..., None], labels=labels)
    (root / "png").mkdir()
    for k in range(40):
        Image.fromarray(images[k], mode="L").save(root / "png" / f"{k:03d}.png")
    return root


def scaled(values):
    """uint8 intensities -> the default value range [-0.5, 0.5]."""
    return values / 255.0 - 0.5


def pixels_of(x, shape):
    """(rows, cols) of inputs ``x [N, 2]``, by the documented formula (not the task's code)."""
    return (np.rint((x[:, 0] + 1) / 2 * (shape[0] - 1)).astype(int),
            np.rint((x[:, 1] + 1) / 2 * (shape[1] - 1)).astype(int))


# ----------------------------------------------------------------------------- mapping
def test_pixel_coordinates_and_their_inverse():
    x = pixel_coordinates((3, 5)).reshape(3, 5, 2)
    np.testing.assert_allclose(x[..., 0], np.array([[-1.0] * 5, [0.0] * 5, [1.0] * 5]))
    np.testing.assert_allclose(x[..., 1], np.tile([-1.0, -0.5, 0.0, 0.5, 1.0], (3, 1)))
    np.testing.assert_array_equal(pixel_indices(x.reshape(-1, 2), (3, 5)), np.arange(15))
    with pytest.raises(ValueError, match="outside"):
        pixel_indices(np.array([[2.0, 0.0]]), (3, 5))


def test_context_and_targets_are_the_pixels_of_the_image(digits, files):
    images, _ = digits
    task = make_task("image", {"source": str(files / "digits.npy"), "num_context": [0, 10],
                               "num_target": "rest"})
    assert (task.dim_x, task.dim_y, task.canvas_shape) == (2, 1, (8, 8))
    assert (task.max_context, task.max_target) == (10, 64)
    first_val = int(np.floor(0.8 * len(images)))
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("val", batch_size=8))).items()}
    for k in range(8):
        image = scaled(images[first_val + k].astype(np.float64))
        mc, mt = batch["mask_c"][k] > 0, batch["mask_t"][k] > 0
        assert 0 <= mc.sum() <= 10 and mc.sum() + mt.sum() == 64
        rc, cc = pixels_of(batch["xc"][k, mc], (8, 8))
        rt, ct = pixels_of(batch["xt"][k, mt], (8, 8))
        np.testing.assert_allclose(batch["yc"][k, mc, 0], image[rc, cc], atol=1e-6)
        np.testing.assert_allclose(batch["yt"][k, mt, 0], image[rt, ct], atol=1e-6)
        covered = np.zeros((8, 8), int)
        np.add.at(covered, (np.concatenate([rc, rt]), np.concatenate([cc, ct])), 1)
        assert (covered == 1).all()  # context and targets split the image
        assert not batch["xc"][k, ~mc].any() and not batch["yt"][k, ~mt].any()  # padding is 0


def test_array_npy_npz_and_png_sources_give_the_same_images(digits, files):
    images, _ = digits
    expected = scaled(images[:32].astype(np.float64))[..., None]
    for source in (images, str(files / "digits.npy"), files / "digits.npz", str(files / "png")):
        task = make_task("image", {"source": source, **SMALL})
        got = np.stack([task.canvas("train", k) for k in range(32)])
        np.testing.assert_allclose(got, expected, atol=0.51 / 255 if "npz" in str(source) else 1e-6)
    assert make_task("image", {"source": str(files / "png"), **SMALL}).num_images("train") == 32


def test_translation_places_each_image_on_a_black_canvas(digits, files):
    images, _ = digits
    config = {"source": str(files / "digits.npy"), "max_shift": [3, 2], "num_context": [2, 5],
              "num_target": "all"}
    task = make_task("image", config)
    assert task.canvas_shape == (14, 12)
    shifts = task.shifts["test"]
    assert shifts[:, 0].min() == -3 and shifts[:, 0].max() == 3 and np.abs(shifts[:, 1]).max() == 2
    np.testing.assert_array_equal(make_task("image", config).shifts["test"], shifts)  # fixed per image
    first_test = int(np.floor(0.9 * len(images)))
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("test", batch_size=4))).items()}
    for k in range(4):
        dr, dc = shifts[k]
        padded = np.pad(images[first_test + k].astype(np.float64), ((3, 3), (2, 2)))
        expected = scaled(np.roll(padded, (dr, dc), axis=(0, 1)))
        rows, cols = pixels_of(batch["xt"][k], (14, 12))
        np.testing.assert_allclose(batch["yt"][k, :, 0], expected[rows, cols], atol=1e-6)
    # one image, six tasks: one placement when fixed per image, several when drawn per task
    rngs = [np.random.default_rng(s) for s in range(6)]
    fixed = task.make_batch("test", [0] * 6, rngs)["yt"]
    assert all(np.array_equal(fixed[0], f) for f in fixed)
    per_task = make_task("image", {**config, "shift_per_task": True})
    moved = per_task.make_batch("test", [0] * 6, [np.random.default_rng(s) for s in range(6)])["yt"]
    assert len({m.tobytes() for m in moved}) > 1
    for m in moved:  # each is the digit at some shift within the bounds
        assert any(np.allclose(m[:, 0], scaled(np.roll(np.pad(images[first_test].astype(np.float64),
                                                               ((3, 3), (2, 2))), (dr, dc), (0, 1))).ravel(), atol=1e-6)
                   for dr in range(-3, 4) for dc in range(-2, 3))


def test_evaluation_splits_hold_every_image_once_whatever_the_batch_size(digits, files):
    task = make_task("image", {"source": str(files / "digits.npy"), **SMALL})
    n = task.num_images("test")
    runs = [list(task.dataset("test", batch_size=b)) for b in (16, 7)]
    assert [len(r) for r in runs] == [-(-n // 16), -(-n // 7)]
    for key in ("xc", "yc", "xt", "yt", "mask_c"):
        first, second = (np.concatenate([batch[key].numpy() for batch in run]) for run in runs)
        assert len(first) == n
        np.testing.assert_array_equal(first, second)
    assert len(list(task.dataset("test", batch_size=16, num_batches=2))) == 2


def test_training_batch_i_depends_only_on_seed_and_i(files):
    task = make_task("image", {"source": str(files / "digits.npy"), **SMALL})
    stream = list(task.dataset("train", batch_size=4, seed=3, num_batches=3))
    resumed = next(iter(task.dataset("train", batch_size=4, seed=3, start=2, num_batches=1)))
    other = next(iter(task.dataset("train", batch_size=4, seed=4, num_batches=1)))
    np.testing.assert_array_equal(resumed["yc"].numpy(), stream[2]["yc"].numpy())
    assert not np.array_equal(other["yc"].numpy(), stream[0]["yc"].numpy())


def test_classes_keep_only_those_labels(digits, files):
    _, labels = digits
    task = make_task("image", {"source": str(files / "digits.npz"), "classes": [0, 1],
                               "test_classes": [7], **SMALL})
    cut = int(np.floor(0.8 * len(labels)))
    assert task.num_images("train") == np.isin(labels[:cut], [0, 1]).sum()
    assert set(task.labels["train"]) == {0, 1} and set(task.labels["test"]) == {7}
    assert task.num_images("test") == (labels[int(np.floor(0.9 * len(labels))):] == 7).sum()


def test_channels_resize_and_transpose(digits):
    images, _ = digits
    unit = images[:20] / 255.0
    grey = make_task("image", {"source": unit.astype(np.float32), "transpose": True,
                               "image_size": [4, 4], "num_context": [1, 3], "num_target": [1, 4]})
    blocks = unit.transpose(0, 2, 1).reshape(20, 4, 2, 4, 2).mean(axis=(2, 4))  # 2x2 area means
    np.testing.assert_allclose(np.stack([grey.canvas("train", k)[..., 0] for k in range(16)]),
                               blocks[:16] - 0.5, atol=1e-6)
    rgb = np.stack([images[:20], images[20:40], images[40:60]], axis=-1)
    task = make_task("image", {"source": rgb, "channels": 1, **SMALL})
    luma = np.clip(np.rint(rgb @ np.array([0.299, 0.587, 0.114])), 0, 255)
    np.testing.assert_allclose(task.canvas("train", 3)[..., 0], scaled(luma[3]), atol=1e-6)
    colour = make_task("image", {"source": images[:20], "channels": 3, "value_range": [0, 1], **SMALL})
    assert colour.dim_y == 3
    np.testing.assert_allclose(colour.canvas("train", 5), np.repeat(images[5, ..., None] / 255.0, 3, -1), atol=1e-6)


# ----------------------------------------------------------------------------- errors
def _write(path, maker):
    maker(path)
    return str(path)


@pytest.mark.parametrize("case,match", [
    ("missing file", "not found"),
    ("text as npy", "cannot read image file .*bad.npy"),
    ("npz without images", r"no key 'images'.*\['pixels'\]"),
    ("2-d array", r"shape \[N, H, W\] or \[N, H, W, C\].*\(5, 64\)"),
    ("4 channels", r"C = 1 or 3.*\(5, 8, 8, 4\)"),
    ("complex dtype", "dtype complex128"),
    ("int out of range", r"outside integers in \[0, 255\], the first 300 at .*\[2, 1, 3, 0\]"),
    ("nan", r"outside floats in \[0, 1\].*nan at .*\[1, 4, 0, 0\]"),
    ("labels wrong length", "key 'labels' of image file .* must be 5 integer labels"),
    ("empty folder", "has no PNG/JPEG files"),
    ("corrupt png", r"cannot read image file .*001.png"),
    ("mixed sizes", r"001.png.* has shape \(9, 8\).*000.png"),
    ("palette png", r"000.png.* mode 'P'"),
    ("csv suffix", "must be .npy or .npz"),
])
def test_bad_sources_name_the_file_and_the_field(tmp_path, case, match):
    ok = np.zeros((5, 8, 8), np.uint8)
    folder = tmp_path / "folder"
    folder.mkdir()
    if case == "missing file":
        source = str(tmp_path / "nope.npz")
    elif case == "text as npy":
        source = _write(tmp_path / "bad.npy", lambda p: p.write_text("not numpy"))
    elif case == "npz without images":
        source = _write(tmp_path / "x.npz", lambda p: np.savez(p, pixels=ok))
    elif case in ("2-d array", "4 channels", "complex dtype", "int out of range", "nan", "labels wrong length"):
        arrays = {"2-d array": np.zeros((5, 64)), "4 channels": np.zeros((5, 8, 8, 4)),
                  "complex dtype": np.zeros((5, 8, 8), complex), "int out of range": ok.astype(int),
                  "nan": np.zeros((5, 8, 8, 1)), "labels wrong length": ok}
        array = arrays[case]
        if case == "int out of range":
            array[2, 1, 3] = 300
        if case == "nan":
            array[1, 4, 0, 0] = np.nan
        labels = np.arange(3) if case == "labels wrong length" else np.arange(5)
        source = _write(tmp_path / "x.npz", lambda p: np.savez(p, images=array, labels=labels))
    elif case == "empty folder":
        (folder / "notes.txt").write_text("no images here")
        source = str(folder)
    elif case in ("corrupt png", "mixed sizes", "palette png"):
        Image.fromarray(np.zeros((8, 8), np.uint8), mode="L" if case != "palette png" else "P").save(folder / "000.png")
        if case == "corrupt png":
            (folder / "001.png").write_bytes(b"\x89PNG truncated")
        if case == "mixed sizes":
            Image.fromarray(np.zeros((9, 8), np.uint8), mode="L").save(folder / "001.png")
        source = str(folder)
    else:
        source = _write(tmp_path / "x.csv", lambda p: p.write_text("1,2\n"))
    with pytest.raises(TaskError, match=match):
        make_task("image", {"source": source, **SMALL, **({"missing": "error"} if case == "nan" else {})})


@pytest.mark.parametrize("config,match", [
    ({}, "needs source="),
    ({"source": 3}, "'source' must be an array"),
    ({"split": [0.5, 0.5]}, "'split' must be three positive ratios"),
    ({"split": {"train": "train"}}, "'split' must be three positive ratios"),
    ({"download": False}, "data_dir and download apply to tfds: sources only"),
    ({"classes": [0]}, "'classes' needs labels, but the train split of image source file"),
    ({"num_context": [3, 60], "num_target": [1, 10]}, "do not fit on the 8 x 8 canvas"),
    ({"num_context": [3, 64], "num_target": "rest"}, "leave no target pixel"),
    ({"num_context": [3, 10], "context_fraction": [0.1, 0.2]}, "not both"),
    ({"context_fraction": [0.3, 0.31]}, "'context_fraction' must be"),
    ({"num_target": "some"}, "'num_target' must be one of 'rest', 'all'"),
    ({"value_range": [1, 1]}, "'value_range' must be"),
    ({"channels": 2}, "'channels' must be one of None, 1, 3"),
    ({"max_shift": -1}, "'max_shift' must be an int or two ints"),
    ({"image_size": [1, 8]}, "'image_size' must be"),
    ({"source": np.zeros((10, 8, 8)), "split": [0.9, 0.05, 0.05]},
     r"the val split of image source the array \(images \[9, 9\) of 10.*holds no images"),
    ({"source": "NPZ", "test_classes": [99]}, r"the test split of .*digits.npz.* holds no images with labels "
                                              r"test_classes=\[99\]"),
])
def test_bad_configs_name_the_key(files, config, match):
    if config:
        base = {"source": str(files / "digits.npy"), **SMALL}
        if "context_fraction" in config and "num_context" not in config:
            del base["num_context"]
        config = {**base, **config}
        if isinstance(config["source"], str) and config["source"] == "NPZ":
            config["source"] = str(files / "digits.npz")
    with pytest.raises(TaskError, match=match):
        make_task("image", config)


def test_tfds_source_without_tensorflow_datasets_names_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tensorflow_datasets", None)
    with pytest.raises(TaskError, match=r"needs tensorflow-datasets.*taylorformer\[images\]"):
        make_task("mnist")


# ----------------------------------------------------------------------------- tfds
def test_presets_through_tensorflow_datasets_mock_data(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=6):
        direct = {name: list(tfds.as_numpy(tfds.load(name, split="test").batch(100)))[0]
                  for name in ("mnist", "emnist/balanced")}
        tasks = {name: make_task(name) for name in ("mnist", "emnist-unseen", "celeba", "t-cifar10")}
        with pytest.raises(TaskError, match=r"cannot load image source 'tfds:no_such_set'"):
            make_task("image", {"source": "tfds:no_such_set"})
    with pytest.raises(TaskError, match=r"tfds:mnist.*could not find data.*`tfds build mnist`.*data_dir"):
        make_task("mnist", {"download": False, "data_dir": str(tmp_path)})  # offline: no download tried
    shapes = {name: (t.canvas_shape, t.dim_y) for name, t in tasks.items()}
    assert shapes == {"mnist": ((28, 28), 1), "emnist-unseen": ((28, 28), 1), "celeba": ((32, 32), 3),
                      "t-cifar10": ((64, 64), 3)}
    np.testing.assert_array_equal(tasks["mnist"].images["test"], direct["mnist"]["image"])
    np.testing.assert_array_equal(tasks["mnist"].labels["test"], direct["mnist"]["label"])
    # emnist-unseen tests on the letters (labels 10-46), stored transposed by tfds: swapped back
    letters = np.isin(direct["emnist/balanced"]["label"], range(10, 47))
    assert letters.any()
    np.testing.assert_array_equal(tasks["emnist-unseen"].images["test"],
                                  direct["emnist/balanced"]["image"][letters].transpose(0, 2, 1, 3))
    assert set(tasks["emnist-unseen"].labels["train"]) <= set(range(10))
    assert tasks["t-cifar10"].num_context == (0, 64 * 64 // 3) and tasks["t-cifar10"].num_target == "rest"
    assert tasks["celeba"].split == {"train": "train", "val": "validation", "test": "test"}
    presets = {name: registry.get("task", name).keywords for name in ("mnist", "emnist", "cifar10", "t-mnist")}
    assert presets["emnist"]["classes"] == list(range(10)) and presets["emnist"]["transpose"]
    assert presets["t-mnist"]["max_shift"] == 14 and presets["cifar10"]["source"] == "tfds:cifar10"


# ----------------------------------------------------------------------------- fit and plot
def test_fit_evaluate_and_plot_on_the_digits(files):
    import keras
    import tensorflow as tf
    from matplotlib.figure import Figure

    import taylorformer as tfm
    from taylorformer.workflow.evaluation import evaluate
    from taylorformer.models.inference import predict
    from taylorformer.plotting.images import MASK_COLOUR

    task = make_task("image", {"source": str(files / "digits.npy"), "context_fraction": [0.0, 0.25],
                               "num_target": "rest"})
    model = tfm.build_model({**TINY, "dim_x": task.dim_x, "dim_y": task.dim_y})
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=False)
    history = model.fit(task.dataset("train", batch_size=4), steps_per_epoch=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    metrics = evaluate(model, task, "test", batch_size=32)
    assert metrics["num_tasks"] == task.num_images("test") and np.isfinite(metrics["loglik"]["mean"])

    batch = next(iter(task.dataset("val", batch_size=3)))
    fig = plot_task(task, model, batch, num_tasks=2, num_samples=2)
    assert isinstance(fig, Figure) and len([a for a in fig.axes if a.get_title()]) == 2 * 6
    axes = Figure().subplots(2, 6)
    assert task.plot(model, batch, num_tasks=2, num_samples=2, axes=axes) is axes[0, 0].figure
    context = axes[0, 0].get_images()[0].get_array()  # [8, 8, 3]
    mean = axes[0, 2].get_images()[0].get_array()
    b = {k: v.numpy() for k, v in batch.items()}
    mc = b["mask_c"][0] > 0
    rows, cols = pixels_of(b["xc"][0, mc], (8, 8))
    in_context = np.zeros((8, 8), bool)
    in_context[rows, cols] = True
    np.testing.assert_allclose(context[rows, cols, 0], b["yc"][0, mc, 0] + 0.5, atol=1e-6)
    np.testing.assert_allclose(context[~in_context], np.tile(MASK_COLOUR, ((~in_context).sum(), 1)))
    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 8), np.linspace(-1, 1, 8), indexing="ij"), -1).reshape(1, 64, 2)
    query = {**{k: v[:1] for k, v in b.items()}, "xt": tf.constant(grid, tf.float32),
             "yt": tf.zeros([1, 64, 1]), "mask_t": tf.ones([1, 64])}
    expected = np.clip(predict(model, query)["mean"].numpy()[0, :, 0] + 0.5, 0, 1).reshape(8, 8)
    np.testing.assert_allclose(mean[..., 0], expected, atol=1e-5)


def test_plot_of_an_autoregressive_model_shows_the_targets_only(files):
    """A causal model is asked for joint samples at the batch's targets (not the whole grid);
    the mean panel holds their average there and the mask colour elsewhere."""
    from taylorformer.plotting.images import MASK_COLOUR, plot_image_completion

    class Causal:  # joint samples 0.1 * (s + 1) at every target: mean 0.2 for 3 samples
        causal = True

        def sample(self, batch, num_samples, seed=None, **chunking):  # memory_budget, window_ids, ...
            self.queried = np.asarray(batch["xt"])
            return np.stack([np.full(np.shape(batch["yt"]), 0.1 * (s + 1), np.float32) for s in range(num_samples)])

    task = make_task("image", {"source": str(files / "digits.npy"), **SMALL})
    batch = task.sample(np.random.default_rng(0), 2, "train")
    model = Causal()
    fig = plot_image_completion(model, batch, (8, 8), num_tasks=1, num_samples=3)
    np.testing.assert_array_equal(model.queried, batch["xt"][:1])
    mean = fig.axes[2].get_images()[0].get_array()
    mt = batch["mask_t"][0] > 0
    rows, cols = pixels_of(batch["xt"][0, mt], (8, 8))
    at_targets = np.zeros((8, 8), bool)
    at_targets[rows, cols] = True
    np.testing.assert_allclose(mean[at_targets], 0.7, atol=1e-6)  # 0.2 in [-0.5, 0.5] -> 0.7
    np.testing.assert_allclose(mean[~at_targets], np.tile(MASK_COLOUR, ((~at_targets).sum(), 1)))
    with pytest.raises(ValueError, match=r"1 task\(s\) need 1 x 7 axes, got 4"):
        plot_image_completion(model, batch, (8, 8), num_tasks=1, num_samples=3,
                              axes=np.array(fig.axes[:4]))


# ----------------------------------------------------------------------------- missing pixels
def test_missing_pixels_are_nan_outputs_never_observed_and_plotted(digits, tmp_path):
    import keras
    from matplotlib.figure import Figure

    import taylorformer as tfm
    from taylorformer.workflow.evaluation import evaluate
    from taylorformer.plotting.images import MISSING_COLOUR

    images, labels = digits
    rng = np.random.default_rng(0)
    missing = rng.uniform(size=images.shape) < 0.05
    missing[::10, 3] = True  # a scratch across row 3 of every 10th image
    gappy = np.where(missing, np.nan, images / 255.0)
    np.savez(tmp_path / "gaps.npz", images=gappy, labels=labels)
    config = {"source": str(tmp_path / "gaps.npz"), "num_context": [5, 20], "num_target": "all"}
    task = make_task("image", config)
    assert task.get_config()["missing"] == "mask"
    first_val = int(np.floor(0.8 * len(images)))
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("val", batch_size=10))).items()}
    for k in range(10):
        expected, gaps = gappy[first_val + k] - 0.5, missing[first_val + k]
        for side in ("c", "t"):
            real = batch["mask_" + side][k] > 0
            rows, cols = pixels_of(batch["x" + side][k, real], (8, 8))
            np.testing.assert_allclose(batch["y" + side][k, real, 0], expected[rows, cols], atol=1e-6)
            np.testing.assert_array_equal(np.isnan(batch["y" + side][k, real, 0]), gaps[rows, cols])
    # num_target="all": every pixel is a target, NaN as many times as the image misses one
    np.testing.assert_array_equal(np.isnan(batch["yt"][..., 0]).sum(1), missing[first_val:first_val + 10].sum((1, 2)))
    scratched = -first_val % 10  # the first val image with the scratch (row 3 missing)
    assert missing[first_val + scratched, 3].all()

    model = tfm.build_model({**TINY, "dim_x": task.dim_x, "dim_y": task.dim_y})
    assert np.isfinite(tfm.loglik(model, batch).numpy()).all()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=False)
    history = model.fit(task.dataset("train", batch_size=4), steps_per_epoch=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    metrics = evaluate(model, task, "val", batch_size=64, num_batches=1)
    assert np.isfinite(metrics["loglik"]["mean"]) and np.isfinite(metrics["rmse"])

    # the plot: drawn pixels whose value is missing in the missing colour (num_target="all":
    # every pixel is drawn), the others as their value
    axes = Figure().subplots(1, 4, squeeze=False)
    one = {key: value[scratched:scratched + 1] for key, value in batch.items()}
    task.plot(model, one, num_tasks=1, axes=axes)
    observed = axes[0, 1].get_images()[0].get_array()
    gaps = missing[first_val + scratched]
    np.testing.assert_allclose(observed[gaps], np.tile(MISSING_COLOUR, (gaps.sum(), 1)))
    np.testing.assert_allclose(observed[~gaps][:, 0], gappy[first_val + scratched][~gaps], atol=1e-6)
    context = axes[0, 0].get_images()[0].get_array()
    mc = one["mask_c"][0] > 0
    rows, cols = pixels_of(one["xc"][0, mc], (8, 8))
    lost = gaps[rows, cols]  # context pixels whose value is missing
    assert lost.any()
    np.testing.assert_allclose(context[rows[lost], cols[lost]], np.tile(MISSING_COLOUR, (lost.sum(), 1)))
    assert "missing" in axes[0, 1].get_title()

    first = tuple(int(i) for i in np.argwhere(missing)[0])
    with pytest.raises(TaskError, match=rf"key 'images' of image file .*gaps.npz.* has {missing.sum()} pixel "
                                        rf"value\(s\) outside floats in \[0, 1\].*first nan at \[image, row, "
                                        rf"column, channel\] = \[{first[0]}, {first[1]}, {first[2]}, 0\]"):
        make_task("image", {**config, "missing": "error"})


def test_resizing_and_grey_conversion_leave_missing_pixels_out():
    rng = np.random.default_rng(1)
    rgb = rng.uniform(size=(10, 4, 6, 3)).astype(np.float32)
    rgb[0, 0, 1, 1] = np.nan  # one channel of one pixel
    rgb[1, :2, :3] = np.nan  # every pixel under output pixel (0, 0) of image 1
    rgb[2, 1, 4] = np.nan  # a whole pixel
    options = {"source": rgb, "image_size": [2, 2], "num_context": [0, 1], "num_target": [1, 2]}
    task = make_task("image", options)
    # the centred 4 x 4 box (columns 1..4), 2 x 2 blocks: the mean of their observed pixels
    blocks = rgb[:8, :, 1:5].reshape(8, 2, 2, 2, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(8, 2, 2, 4, 3)
    seen = ~np.isnan(blocks)
    count = seen.sum(3)
    expected = np.where(count > 0, np.where(seen, blocks, 0).sum(3) / np.maximum(count, 1), np.nan)
    np.testing.assert_allclose(task.images["train"], expected, rtol=1e-5)
    assert np.isnan(task.images["train"][1, 0, 0]).all() and not np.isnan(task.images["train"][0]).any()
    grey = make_task("image", {**options, "channels": 1})  # BT.601 luma: NaN where a channel is
    luma = rgb[:8].astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    blocks = luma[:, :, 1:5].reshape(8, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4).reshape(8, 2, 2, 4)
    seen = ~np.isnan(blocks)
    expected = np.where(seen.any(3), np.where(seen, blocks, 0).sum(3) / np.maximum(seen.sum(3), 1), np.nan)
    np.testing.assert_allclose(grey.images["train"][..., 0], expected, rtol=1e-5)
    # uint8 sources hold no NaN: the policy changes nothing
    ints = np.rint(np.nan_to_num(rgb) * 255).astype(np.uint8)
    a, b = (make_task("image", {**options, "source": ints, "missing": p}) for p in ("mask", "error"))
    for key, value in a.sample(np.random.default_rng(3), 4, "train").items():
        np.testing.assert_array_equal(value, b.sample(np.random.default_rng(3), 4, "train")[key])
    infinite = rgb.copy()
    infinite[3, 0, 0, 2] = np.inf
    with pytest.raises(TaskError, match=r"image source array has 1 pixel value\(s\) outside floats in \[0, 1\] or "
                                        r"NaN \(a missing pixel; inf is not a value\), the first inf at \[image, "
                                        r"row, column, channel\] = \[3, 0, 0, 2\]"):
        make_task("image", {**options, "source": infinite})
    dark = np.full((10, 4, 6, 1), np.nan, np.float32)
    dark[9] = 0.5  # only a test image is observed
    with pytest.raises(TaskError, match=r"the train split of image source the array .* has no observed pixel"):
        make_task("image", {**options, "source": dark})
