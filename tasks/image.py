"""Image completion (plugin ``builtin-image``, kind ``task``).

Registers the task ``image`` (:class:`ImageTask`) and presets for the papers' protocols.
A task is one image: its pixels are inputs, their intensities outputs; a random subset of
pixels is the context and the model predicts the others.

Data
    ``source`` is a NumPy array ``[N, H, W]`` or ``[N, H, W, C]`` (C = 1 or 3), a ``.npy``
    file of one, a ``.npz`` file with key ``images`` (and optionally ``labels [N]``), a
    folder of PNG/JPEG files (read in name order with Pillow), or ``tfds:NAME`` (a
    tensorflow-datasets dataset, e.g. ``tfds:mnist``; needs the optional extra
    ``taylorformer[images]``; features ``image`` and, where present, ``label``). Pixel
    values are uint8 (any integer array with values in ``[0, 255]``) or floats in
    ``[0, 1]``. ``transpose`` swaps rows and columns (tfds stores EMNIST transposed),
    ``channels`` converts grey <-> RGB (BT.601 luma ``0.299 R + 0.587 G + 0.114 B``),
    ``image_size = [h, w]`` crops the largest centred box of that aspect ratio and
    resizes it by area averaging (Pillow ``BOX``).
Missing pixels
    A NaN in a float source is a missing pixel value. ``missing="mask"`` (default)
    keeps it as a NaN output in the batches: such a value is never observed context
    nor a scored target (:func:`taylorformer.batch.with_masks`; an RGB pixel keeps its
    observed channels, flagged per channel); resizing averages the observed pixels of a
    box only (NaN where the whole box is missing), RGB -> grey is NaN where a channel is.
    ``missing="error"`` refuses them, naming the file and the first
    ``[image, row, column, channel]``. Infinite values are always errors; uint8 sources
    hold no NaN.
Splits
    A local source is cut in file order by ``split = [a, b, c]`` ratios (train, val,
    test; default 0.8/0.1/0.1): the first ``floor(a N)`` images train, the next
    ``floor((a + b) N) - floor(a N)`` validate, the rest test. A ``tfds:`` source maps
    each split to a tfds split expression, ``split = {"train": "train[:90%]", "val":
    "train[90%:]", "test": "test"}`` by default. With labels, ``classes`` keeps only
    those labels in train/val and ``test_classes`` (default ``classes``) in test.
Inputs and outputs
    On an ``H x W`` canvas pixel (row ``i``, column ``j``) has input
    ``x = (-1 + 2 i / (H - 1), -1 + 2 j / (W - 1))`` (:func:`pixel_coordinates`): the
    top-left pixel is ``(-1, -1)``, the bottom-right ``(1, 1)``. Outputs are the ``C``
    intensities mapped linearly from ``[0, 1]`` (uint8: ``v / 255``) to ``value_range``
    (default ``[-0.5, 0.5]``, the Taylorformer's scaling), ``dim_y = C``.
Translation (TE-TNP)
    ``max_shift = s`` (or ``[s_rows, s_cols]``) places each ``h x w`` image on a canvas of
    ``(h + 2 s_rows) x (w + 2 s_cols)`` black pixels (intensity 0) at offset
    ``(s_rows + dr, s_cols + dc)`` with integer ``dr, dc ~ U{-s..s}``. The shift is fixed
    per image (the paper's "single random translation applied to each image", seeded by
    split and image index) or drawn per task with ``shift_per_task``.
Context and targets
    ``Nc ~ U{lo..hi}`` from ``num_context = [lo, hi]`` (default ``[6, 200]``, scaled down on
    a canvas under 784 pixels: :func:`default_counts`) or, with
    ``context_fraction = [a, b]``, ``Nc ~ U{ceil(a N)..floor(b N)}`` for ``N`` canvas
    pixels; the context is a uniformly random set of ``Nc`` pixels. ``num_target``:
    ``[lo, hi]`` (``Nt ~ U{lo..hi}`` random pixels outside the context; default
    ``[3, 197]``, scaled the same way), ``"rest"`` (every pixel outside the context) or ``"all"`` (every
    pixel, the context included, in row-major order).
Batches
    ``xc [B, Nc_max, 2]``, ``yc [B, Nc_max, C]``, ``xt [B, Nt_max, 2]``,
    ``yt [B, Nt_max, C]``, ``mask_c``, ``mask_t``; padded to the largest counts the
    config allows (static shapes), padding 0. ``train`` draws images uniformly with
    replacement (batch ``i`` depends only on ``(seed, i)``); ``val``/``test`` give every
    image of the split once, in order (the last batch possibly smaller), and image
    ``k``'s context and targets depend only on ``(split, k)``, not on the batch size.

Presets (any key can be overridden; the papers are silent where "our choice" is said):

* ``mnist``, ``cifar10``: ``tfds:mnist`` (28x28 grey) / ``tfds:cifar10`` (32x32 RGB) with
  the Taylorformer's protocol (Nc ~ U{6..200}, Nt ~ U{3..197} outside the context,
  y in [-0.5, 0.5]); validation = last 10% of the official training set (our choice).
* ``emnist``: Taylorformer Sec. 4.1 / App. A.2: ``tfds:emnist/balanced`` (transposed
  back upright), classes 0-9 (digits) in every split; ``emnist-unseen``: the same with
  the test split on the unseen classes 10-46 (letters), to evaluate a model trained on
  ``emnist``.
* ``celeba``: ``tfds:celeb_a`` (official train/validation/test), the centred 178x178
  square resized to 32x32 RGB (the Taylorformer follows the TNP's 32x32 CelebA; the
  crop is our choice).
* ``t-mnist``, ``t-cifar10``: TE-TNP App. F.2: MNIST on a 56x56 canvas
  (``max_shift = 14``), CIFAR-10 on 64x64 (``max_shift = 16``), one fixed random
  translation per image in every split (the test images are placed at shifts the
  model never saw with those images); ``Nc ~ U{0..floor(N/3)}`` (App. F.2: "Nc ~
  U(N/3)", lower bound unstated; Sec. 4.2 bounds it by N/2), the rest of the pixels as
  targets (App. F.2; Sec. 4.2 says all pixels: ``num_target="all"``). The paper does
  not state the output scaling; we keep [-0.5, 0.5] with the padding black
  (intensity 0 -> -0.5).
"""
import functools
import math
import os
import warnings
from pathlib import Path

import numpy as np

from taylorformer import checks
from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError
from taylorformer.hookspecs import hookimpl
from taylorformer.pixel_grid import pixel_coordinates, pixel_indices  # noqa: F401 - public here too
from taylorformer.task import (SPLIT_SEEDS, Task, check_bool, check_choice, count_range, dataset_args,
                               real_pair, scaled_range)
from taylorformer.tasks.csv_series import DataFileNotFoundError

OWNER = "image task"
SPLITS = ("train", "val", "test")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
DEFAULT_SPLIT = (0.8, 0.1, 0.1)
DEFAULT_TFDS_SPLIT = {"train": "train[:90%]", "val": "train[90%:]", "test": "test"}
TFDS_PREFIX = "tfds:"
#: seed of the fixed per-image translations (``max_shift`` without ``shift_per_task``)
TRANSLATION_SEED = 7_000_003
#: BT.601 luma weights (Pillow's RGB -> L)
LUMA = np.array([0.299, 0.587, 0.114])
MAX_SIDE = 4096
TFDS_CHUNK = 1024
MISSING_POLICIES = ("mask", "error")


# ----------------------------------------------------------------------------- reading
#: the default counts (Taylorformer App. A.2 on 28 x 28 = 784 pixels), scaled down on a smaller canvas
DEFAULT_COUNTS, DEFAULT_CANVAS = ((6, 200), (3, 197)), 784


def default_counts(n):
    """``(num_context, num_target)`` defaults on a canvas of ``n`` pixels: ``[6, 200]`` and
    ``[3, 197]`` from 784 pixels (28 x 28) up; on a smaller canvas each upper count is
    scaled by ``n / 784`` (floor; at least 1 target) and each lower count capped at its
    upper (:func:`taylorformer.task.scaled_range`), so context + targets always fit (they
    take at most about half the pixels)."""
    return tuple(list(scaled_range(lo, hi, n, DEFAULT_CANVAS, least))
                 for (lo, hi), least in zip(DEFAULT_COUNTS, (0, 1)))


def check_images(array, where, missing=False):
    """``[N, H, W, C]`` uint8 or float32 images from ``array`` (``[N, H, W]`` or
    ``[N, H, W, C]``, C = 1 or 3; integers in [0, 255] or finite floats in [0, 1], or NaN
    for a missing pixel value with ``missing``); any other shape, dtype or value is a
    :class:`TaskError` naming ``where`` and the index."""
    array = np.asarray(array)
    if array.ndim == 3:
        array = array[..., None]
    if array.ndim != 4 or array.shape[-1] not in (1, 3):
        raise TaskError(f"{where} must have shape [N, H, W] or [N, H, W, C] with C = 1 or 3, "
                        f"got shape {array.shape}")
    n, h, w, _ = array.shape
    if n == 0:
        raise TaskError(f"{where} holds no images (shape {array.shape})")
    if not (2 <= h <= MAX_SIDE and 2 <= w <= MAX_SIDE):
        raise TaskError(f"{where}: images must be between 2 and {MAX_SIDE} pixels high and wide, "
                        f"got {h} x {w}")
    kind = array.dtype.kind
    if kind in "ui":
        bad = (array < 0) | (array > 255)
        rule = "integers in [0, 255]"
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            bad = (np.isinf(array) if missing else ~np.isfinite(array)) | (array < 0) | (array > 1)
        rule = ("floats in [0, 1] or NaN (a missing pixel; inf is not a value)" if missing
                else "floats in [0, 1] (NaN and inf are not pixel values; missing='mask' keeps NaN "
                     "as missing pixels)")
    else:
        raise TaskError(f"{where} has dtype {array.dtype}; pixel values must be uint8 (or integers "
                        f"in [0, 255]) or floats in [0, 1]")
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise TaskError(f"{where} has {int(bad.sum())} pixel value(s) outside {rule}, the first "
                        f"{array[idx].item()!r} at [image, row, column, channel] = {list(idx)}")
    return array.astype(np.uint8) if kind in "ui" else array.astype(np.float32)


def check_labels(labels, n, where):
    """``[n]`` int64 labels, or a :class:`TaskError` naming ``where``."""
    labels = np.asarray(labels)
    if labels.shape != (n,) or labels.dtype.kind not in "ui":
        raise TaskError(f"{where} must be {n} integer labels (one per image), got dtype "
                        f"{labels.dtype} and shape {labels.shape}")
    return labels.astype(np.int64)


def read_array_file(path, missing=False):
    """``(images, labels or None)`` of a ``.npy`` file or a ``.npz`` file (keys ``images``,
    optional ``labels``), checked by :func:`check_images` (``missing``: NaN allowed)."""
    where = f"image file {str(path)!r}"
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise TaskError(f"cannot read {where} as NumPy data: {exc}") from exc
    if isinstance(data, np.ndarray):
        return check_images(data, where, missing), None
    with data:
        if "images" not in data.files:
            raise TaskError(f"{where} has no key 'images'; keys: {sorted(data.files)} (an .npz source "
                            f"stores its images under 'images' and optionally labels under 'labels')")
        images = check_images(data["images"], f"key 'images' of {where}", missing)
        labels = (check_labels(data["labels"], len(images), f"key 'labels' of {where}")
                  if "labels" in data.files else None)
    return images, labels


def read_folder(folder):
    """``[N, H, W, C]`` uint8 images of the PNG/JPEG files in ``folder``, in name order.

    Grey files (Pillow mode ``L``) give C = 1, ``RGB`` files C = 3; any other mode
    (palette, alpha, 16-bit), an unreadable file or a size or channel count that differs
    from the first file's is a :class:`TaskError` naming the file."""
    from PIL import Image, UnidentifiedImageError

    files = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise TaskError(f"image folder {str(folder)!r} has no PNG/JPEG files "
                        f"({', '.join(IMAGE_SUFFIXES)}; subfolders are not read)")
    images = []
    for path in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(path) as image:  # reads the header only
                    w, h = image.size
                    if not (2 <= h <= MAX_SIDE and 2 <= w <= MAX_SIDE):
                        raise TaskError(f"image file {str(path)!r} is {w} x {h} pixels (width x height, "
                                        f"from its header; not decoded): images must be between 2 and "
                                        f"{MAX_SIDE} pixels high and wide")
                    mode, array = image.mode, np.asarray(image)
        except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombWarning,
                Image.DecompressionBombError) as exc:
            raise TaskError(f"cannot read image file {str(path)!r}: {type(exc).__name__}: {exc}") from exc
        if mode not in ("L", "RGB"):
            raise TaskError(f"image file {str(path)!r} has Pillow mode {mode!r}; the image task "
                            f"reads grey ('L') or RGB files: convert it (e.g. Image.convert('RGB'))")
        if images and array.shape != images[0].shape:
            raise TaskError(f"image file {str(path)!r} has shape {array.shape} (rows, columns"
                            f"{', channels' if array.ndim == 3 else ''}) but {str(files[0])!r} has "
                            f"{images[0].shape}: every image of a folder must have the same size "
                            f"and channels")
        images.append(array)
    return check_images(np.stack(images), f"image folder {str(folder)!r}")


def read_local(source, missing=False):
    """``(images, labels or None, description)`` of an array, ``.npy``/``.npz`` file or folder
    (``missing``: NaN pixel values allowed)."""
    if isinstance(source, np.ndarray):
        return check_images(source, "image source array", missing), None, "the array"
    path = Path(source).expanduser()
    if path.is_dir():
        return read_folder(path), None, f"folder {str(source)!r}"
    if not path.is_file():
        raise DataFileNotFoundError(f"image source {str(source)!r} not found (looked for {path.resolve()}); "
                                    f"pass an .npy/.npz file, a folder of PNG/JPEG files, or tfds:NAME")
    if path.suffix.lower() not in (".npy", ".npz"):
        raise TaskError(f"image source {str(source)!r}: a file source must be .npy or .npz (a folder "
                        f"for PNG/JPEG files), got suffix {path.suffix!r}")
    images, labels = read_array_file(path, missing)
    return images, labels, f"file {str(source)!r}"


def import_tfds(source):
    """The ``tensorflow_datasets`` module, or a :class:`TaskError` naming the extra."""
    try:
        import tensorflow_datasets
    except ImportError as exc:
        raise TaskError(f"image source {source!r} needs tensorflow-datasets, which is not installed: "
                        f"pip install 'taylorformer[images]'") from exc
    return tensorflow_datasets


def read_tfds(source, tfds_split, prepare, data_dir=None, download=True, missing=False):
    """``(images, labels or None)`` of the tfds split expression ``tfds_split`` of
    ``source`` (``tfds:NAME``), read in chunks and passed through ``prepare`` chunk by
    chunk (so a dataset of large images is resized before it is all in memory).
    ``data_dir``: tfds' data folder (None: ``$TFDS_DATA_DIR`` or ``~/tensorflow_datasets``);
    ``download``: let tfds download and prepare a dataset it does not find there;
    ``missing``: NaN pixel values allowed."""
    tfds = import_tfds(source)
    name = source[len(TFDS_PREFIX):]
    where = f"image source {source!r} (tfds split {tfds_split!r})"
    try:
        ds = tfds.load(name, split=tfds_split, data_dir=data_dir, download=download)
    except Exception as exc:  # tfds raises many types (DatasetNotFoundError, download errors, ...)
        raise TaskError(f"cannot load {where}: {type(exc).__name__}: {str(exc).rstrip('.')}. tensorflow-datasets "
                        f"downloads and prepares {name!r} into its data folder on first use; offline, "
                        f"prepare it on a machine with network (`tfds build {name}`) and copy its folder "
                        f"into data_dir (or $TFDS_DATA_DIR)") from exc
    features = set(ds.element_spec)
    if "image" not in features:
        raise TaskError(f"{where} has no feature 'image'; features: {sorted(features)}")
    keys = ["image"] + (["label"] if "label" in features else [])
    images, labels = [], []
    try:
        for chunk in tfds.as_numpy(ds.map(lambda ex: {k: ex[k] for k in keys}).batch(TFDS_CHUNK)):
            images.append(prepare(check_images(chunk["image"], where, missing)))
            if "label" in chunk:
                labels.append(chunk["label"])
    except TaskError:
        raise
    except Exception as exc:  # tf.errors (corrupt records, images of different sizes)
        raise TaskError(f"cannot read {where}: {type(exc).__name__}: {exc} (the image task reads "
                        f"datasets whose images all have one size)") from exc
    if not images:
        raise TaskError(f"{where} holds no images")
    images = np.concatenate(images)
    return images, (check_labels(np.concatenate(labels), len(images), f"labels of {where}") if labels else None)


# ----------------------------------------------------------------------------- transforms
def convert_channels(images, channels):
    """``[N, H, W, C]`` -> ``[N, H, W, channels]``: grey -> RGB repeats, RGB -> grey is the
    BT.601 luma (rounded for uint8); ``channels`` None keeps them."""
    if channels is None or images.shape[-1] == channels:
        return images
    if channels == 3:
        return np.repeat(images, 3, axis=-1)
    grey = images.astype(np.float64) @ LUMA
    grey = np.clip(np.rint(grey), 0, 255).astype(np.uint8) if images.dtype == np.uint8 else grey.astype(np.float32)
    return grey[..., None]


def resize(images, size):
    """``[N, H, W, C]`` -> ``[N, h, w, C]``: the largest centred box of aspect ``h : w``,
    resized by area averaging (Pillow ``BOX``, per channel in float32; uint8 rounded).
    Missing (NaN) pixels are left out of the averages: an output pixel is NaN only where
    every pixel under it is."""
    from PIL import Image

    n, height, width, c = images.shape
    h, w = size
    if (height, width) == (h, w):
        return images
    scale = min(height / h, width / w)
    box_h, box_w = h * scale, w * scale
    top, left = (height - box_h) / 2, (width - box_w) / 2
    box = (left, top, left + box_w, top + box_h)

    def area_average(plane):
        return np.asarray(Image.fromarray(plane, mode="F").resize((w, h), Image.Resampling.BOX, box=box))

    out = np.empty((n, h, w, c), np.float32)
    for k in range(n):
        for ch in range(c):
            plane = images[k, :, :, ch].astype(np.float32)
            gaps = np.isnan(plane)
            if gaps.any():  # the mean of the observed pixels: averaged values / averaged weights
                weight = area_average((~gaps).astype(np.float32))
                total = area_average(np.where(gaps, np.float32(0), plane))
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[k, :, :, ch] = np.where(weight > 0, total / weight, np.nan)
            else:
                out[k, :, :, ch] = area_average(plane)
    if images.dtype == np.uint8:
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)
    return np.clip(out, 0.0, 1.0)


# ----------------------------------------------------------------------------- config checks
def split_ratios(split):
    """Three positive ratios summing to 1 (train, val, test)."""
    ok = (isinstance(split, (list, tuple)) and len(split) == 3
          and all(checks.is_int(r) or (isinstance(r, float) and math.isfinite(r)) for r in split)
          and all(r > 0 for r in split) and abs(sum(split) - 1.0) <= 1e-6)
    if not ok:
        checks.fail(OWNER, "split", split, "three positive ratios [train, val, test] summing to 1 "
                    "(a tfds: source takes a dict split -> tfds split)", TaskError)
    return [float(r) for r in split]


def tfds_splits(split):
    """``{"train": expr, "val": expr, "test": expr}`` of tfds split expressions."""
    if not (isinstance(split, dict) and set(split) == set(SPLITS)
            and all(isinstance(v, str) and v for v in split.values())):
        checks.fail(OWNER, "split", split, "for a tfds: source, a dict with keys 'train', 'val', "
                    "'test' -> tfds split expressions (e.g. 'train[:90%]')", TaskError)
    return {s: split[s] for s in SPLITS}


def class_list(key, classes):
    """None, or a sorted list of distinct int labels."""
    if classes is None:
        return None
    if not (isinstance(classes, (list, tuple)) and classes and all(checks.is_int(c) for c in classes)
            and len(set(classes)) == len(classes)):
        checks.fail(OWNER, key, classes, "None or a non-empty list of distinct int labels", TaskError)
    return sorted(int(c) for c in classes)


def pair_of_ints(key, value, minimum, maximum):
    """``(a, b)`` from an int or two ints in ``[minimum, maximum]``."""
    values = [value, value] if checks.is_int(value) else value
    if not (isinstance(values, (list, tuple)) and len(values) == 2
            and all(checks.is_int(v) and minimum <= v <= maximum for v in values)):
        checks.fail(OWNER, key, value, f"an int or two ints in [{minimum}, {maximum}]", TaskError)
    return int(values[0]), int(values[1])


class ImageTask(Task):
    """Image completion on ``source`` (see the module docstring for the protocol).

    Args:
        source: array, ``.npy``/``.npz`` file, folder of PNG/JPEG, or ``tfds:NAME``.
        split: ratios ``[train, val, test]`` (local sources) or a dict split -> tfds split
            expression (``tfds:`` sources); None for the default of the source's kind.
        classes, test_classes: labels kept in train/val and in test (needs labels).
        channels: None (as stored), 1 or 3. ``image_size``: None or ``[h, w]``.
        transpose: swap rows and columns of every image.
        value_range: ``[lo, hi]`` the intensities 0 and 1 map to.
        num_context: ``[lo, hi]`` context counts (default :func:`default_counts`: ``[6, 200]``
            from 28 x 28 up), or
        context_fraction: ``[a, b]`` fractions of the canvas pixels (not both).
        data_dir, download: where tfds keeps datasets and whether it may download one
            (``tfds:`` sources only).
        num_target: ``[lo, hi]`` counts outside the context (default :func:`default_counts`:
            ``[3, 197]`` from 28 x 28 up), ``"rest"`` or ``"all"``.
        max_shift: int or ``[rows, cols]`` translation bound in pixels (canvas grows by twice it).
        shift_per_task: draw the translation per task instead of once per image.
        missing: NaN pixel values of a float source: ``"mask"`` (missing pixels) or
            ``"error"`` (see the module docstring).
    """

    name = "image"
    dim_x = 2

    def __init__(self, source=None, split=None, classes=None, test_classes=None, channels=None,
                 image_size=None, transpose=False, value_range=(-0.5, 0.5), num_context=None,
                 context_fraction=None, num_target=None, max_shift=0, shift_per_task=False,
                 data_dir=None, download=True, missing="mask"):
        if source is None:
            raise TaskError(f"{OWNER} needs source= (an array, an .npy/.npz file, a folder of "
                            f"PNG/JPEG files, or 'tfds:NAME')")
        is_tfds = isinstance(source, str) and source.startswith(TFDS_PREFIX)
        if not (isinstance(source, (np.ndarray, os.PathLike)) or (isinstance(source, str) and source)):
            checks.fail(OWNER, "source", source, "an array, a file or folder name, or 'tfds:NAME'", TaskError)
        if is_tfds and not source[len(TFDS_PREFIX):]:
            checks.fail(OWNER, "source", source, "'tfds:NAME' with a dataset name", TaskError)
        self.source = source
        self.split = (tfds_splits(DEFAULT_TFDS_SPLIT if split is None else split) if is_tfds
                      else split_ratios(DEFAULT_SPLIT if split is None else split))
        self.classes = class_list("classes", classes)
        self.test_classes = class_list("test_classes", test_classes)
        self.channels = check_choice(OWNER, "channels", channels, (None, 1, 3))
        self.image_size = None if image_size is None else pair_of_ints("image_size", image_size, 2, MAX_SIDE)
        self.transpose = check_bool(OWNER, "transpose", transpose)
        self.value_range = real_pair("value_range", value_range, -1e6, 1e6, owner=OWNER)
        if self.value_range[0] == self.value_range[1]:
            checks.fail(OWNER, "value_range", value_range, "[lo, hi] with lo < hi", TaskError)
        self.max_shift = pair_of_ints("max_shift", max_shift, 0, MAX_SIDE)
        self.shift_per_task = check_bool(OWNER, "shift_per_task", shift_per_task)
        self.download = check_bool(OWNER, "download", download)
        if not (data_dir is None or (isinstance(data_dir, (str, os.PathLike)) and str(data_dir))):
            checks.fail(OWNER, "data_dir", data_dir, "None or a folder name", TaskError)
        if not is_tfds and (data_dir is not None or not download):
            raise TaskError(f"{OWNER}: data_dir and download apply to tfds: sources only, got "
                            f"data_dir={data_dir!r}, download={download!r} with a local source")
        self.data_dir = None if data_dir is None else str(data_dir)
        self.missing = check_choice(OWNER, "missing", missing, MISSING_POLICIES)
        self._load(is_tfds)
        h, w = self.image_shape
        self.canvas_shape = (h + 2 * self.max_shift[0], w + 2 * self.max_shift[1])
        self.num_pixels = n = self.canvas_shape[0] * self.canvas_shape[1]
        self._counts(num_context, context_fraction, num_target, n)
        self.coordinates = pixel_coordinates(self.canvas_shape)
        self.check_memory()

    # ------------------------------------------------------------------ loading
    def _prepare(self, images):
        """Transpose, channel conversion and resizing of ``[N, H, W, C]`` images."""
        if self.transpose:
            images = images.transpose(0, 2, 1, 3)
        images = convert_channels(images, self.channels)
        return images if self.image_size is None else resize(images, self.image_size)

    def _load(self, is_tfds):
        """``self.images[split]`` ``[n, h, w, C]``, ``self.labels[split]`` and ``self.shifts[split]``."""
        nan_allowed = self.missing == "mask"
        if is_tfds:
            parts = {s: read_tfds(self.source, self.split[s], self._prepare, self.data_dir, self.download,
                                  nan_allowed) for s in SPLITS}
            described = {s: f"image source {self.source!r} (tfds split {self.split[s]!r})" for s in SPLITS}
        else:
            images, labels, what = read_local(self.source, nan_allowed)
            images = self._prepare(images)
            cuts = [0, math.floor(len(images) * self.split[0] + 1e-9),
                    math.floor(len(images) * (self.split[0] + self.split[1]) + 1e-9), len(images)]
            parts = {s: (images[cuts[k]:cuts[k + 1]], None if labels is None else labels[cuts[k]:cuts[k + 1]])
                     for k, s in enumerate(SPLITS)}
            described = {s: f"the {s} split of image source {what} (images [{cuts[k]}, {cuts[k + 1]}) of "
                            f"{len(images)}, split ratios {self.split})" for k, s in enumerate(SPLITS)}
        self.images, self.labels = {}, {}
        for s in SPLITS:
            images, labels = parts[s]
            keep = self.test_classes if (s == "test" and self.test_classes is not None) else self.classes
            key = "test_classes" if (s == "test" and self.test_classes is not None) else "classes"
            if keep is not None:
                if labels is None:
                    raise TaskError(f"{OWNER} {key!r} needs labels, but {described[s]} has none (an .npz "
                                    f"source stores them under 'labels'; tfds datasets under 'label')")
                chosen = np.isin(labels, keep)
                images, labels = images[chosen], labels[chosen]
            if len(images) == 0:
                raise TaskError(f"{described[s]} holds no images"
                                + (f" with labels {key}={keep}" if keep is not None else ""))
            self.images[s], self.labels[s] = images, labels
        shapes = {s: self.images[s].shape[1:] for s in SPLITS}
        if len(set(shapes.values())) > 1:
            raise TaskError(f"the splits of image source {self.source!r} hold images of different "
                            f"[H, W, C]: {shapes}; pass image_size= and channels= to make them agree")
        train = self.images["train"]
        if train.dtype.kind == "f" and np.isnan(train).any(-1).all():
            raise TaskError(f"{described['train']} has no observed pixel: every pixel holds a NaN "
                            f"(a missing value) in some channel")
        self.image_shape = shapes["train"][:2]
        self.dim_y = shapes["train"][2]
        self.shifts = {s: self._fixed_shifts(s) for s in SPLITS}

    def _fixed_shifts(self, split):
        """``[n, 2]`` int translations of the images of ``split`` (zeros without ``max_shift``)."""
        rng = np.random.default_rng([TRANSLATION_SEED, SPLITS.index(split)])
        return self._draw_shift(rng, len(self.images[split]))

    def _draw_shift(self, rng, n):
        high = np.asarray(self.max_shift)
        return rng.integers(-high, high + 1, (n, 2))

    def _counts(self, num_context, context_fraction, num_target, n):
        """``self.num_context`` ``(lo, hi)``, ``self.num_target`` and the padded sizes."""
        if context_fraction is not None:
            if num_context is not None:
                raise TaskError(f"{OWNER}: give num_context or context_fraction, not both "
                                f"(got {num_context!r} and {context_fraction!r})")
            self.context_fraction = real_pair("context_fraction", context_fraction, 0.0, 1.0, owner=OWNER)
            lo, hi = math.ceil(self.context_fraction[0] * n - 1e-9), math.floor(self.context_fraction[1] * n + 1e-9)
            if lo > hi:
                checks.fail(OWNER, "context_fraction", context_fraction,
                            f"[a, b] whose range holds a whole number of the {n} pixels", TaskError)
            self.num_context = (lo, hi)
        else:
            self.context_fraction = None
            self.num_context = count_range("num_context", default_counts(n)[0] if num_context is None
                                           else num_context, 0, owner=OWNER)
        if num_target is None:
            num_target = default_counts(n)[1]
        if isinstance(num_target, str):
            self.num_target = check_choice(OWNER, "num_target", num_target, ("rest", "all"))
        else:
            self.num_target = count_range("num_target", num_target, 1, owner=OWNER)
        nc_hi = self.num_context[1]
        source = "array" if isinstance(self.source, np.ndarray) else str(self.source)
        where = (f"the {self.canvas_shape[0]} x {self.canvas_shape[1]} canvas ({n} pixels) of image "
                 f"source {source!r}")
        if self.num_target == "all":
            if nc_hi > n:
                raise TaskError(f"{OWNER}: up to {nc_hi} context pixels (num_context/context_fraction) do "
                                f"not fit on {where}")
            self.max_target = n
        elif self.num_target == "rest":
            if nc_hi >= n:
                raise TaskError(f"{OWNER}: up to {nc_hi} context pixels (num_context/context_fraction) "
                                f"leave no target pixel on {where}")
            self.max_target = n - self.num_context[0]
        else:
            if nc_hi + self.num_target[1] > n:
                raise TaskError(f"{OWNER}: up to {nc_hi} context (num_context) + {self.num_target[1]} target "
                                f"(num_target) pixels do not fit on {where}; lower them or use "
                                f"num_target='rest'")
            self.max_target = self.num_target[1]
        self.max_context = nc_hi

    # ------------------------------------------------------------------ queries
    def get_config(self):
        return {"source": self.source if isinstance(self.source, np.ndarray) else str(self.source),
                "split": dict(self.split) if isinstance(self.split, dict) else list(self.split),
                "classes": self.classes, "test_classes": self.test_classes, "channels": self.channels,
                "image_size": None if self.image_size is None else list(self.image_size),
                "transpose": self.transpose, "value_range": list(self.value_range),
                "num_context": None if self.context_fraction is not None else list(self.num_context),
                "context_fraction": None if self.context_fraction is None else list(self.context_fraction),
                "num_target": self.num_target if isinstance(self.num_target, str) else list(self.num_target),
                "max_shift": list(self.max_shift), "shift_per_task": self.shift_per_task,
                "data_dir": self.data_dir, "download": self.download, "missing": self.missing}

    def canvas(self, split, index, shift=None):
        """Image ``index`` of ``split`` on its canvas, ``[Hc, Wc, C]`` float32 in ``value_range``
        (NaN at missing pixels); ``shift`` ``[2]`` overrides its fixed translation."""
        image = self.images[split][index]
        unit = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else image
        lo, hi = self.value_range
        out = np.full(self.canvas_shape + (self.dim_y,), lo, np.float32)  # black: intensity 0
        dr, dc = self.shifts[split][index] if shift is None else shift
        top, left = self.max_shift[0] + dr, self.max_shift[1] + dc
        h, w = self.image_shape
        out[top:top + h, left:left + w] = lo + (hi - lo) * unit
        return out

    def num_images(self, split):
        """Number of images of ``split``."""
        return len(self.images[split])

    # ------------------------------------------------------------------ batches
    def make_batch(self, split, indices, rngs):
        """Batch dict (NumPy float32) of the images ``indices`` of ``split``, task ``k``
        drawn with ``rngs[k]`` (counts, then pixel order, then the per-task shift)."""
        out = empty_batch(len(indices), self.max_context, self.max_target, 2, self.dim_y)
        for k, (index, rng) in enumerate(zip(indices, rngs)):
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            order = rng.permutation(self.num_pixels)
            if self.num_target == "all":
                targets = np.arange(self.num_pixels)
            elif self.num_target == "rest":
                targets = order[nc:]
            else:
                targets = order[nc:nc + int(rng.integers(self.num_target[0], self.num_target[1] + 1))]
            shift = self._draw_shift(rng, 1)[0] if self.shift_per_task else None
            y = self.canvas(split, int(index), shift).reshape(self.num_pixels, self.dim_y)
            for side, pixels in (("c", order[:nc]), ("t", targets)):
                n = len(pixels)
                out["x" + side][k, :n], out["y" + side][k, :n] = self.coordinates[pixels], y[pixels]
                out["mask_" + side][k, :n] = 1.0
        return out

    def sample(self, rng, batch_size, split):
        """A training batch: ``batch_size`` images drawn uniformly with replacement."""
        indices = rng.integers(0, self.num_images(split), batch_size)
        return self.make_batch(split, indices, rng.spawn(batch_size))

    def dataset(self, split="train", batch_size=16, seed=0, num_batches=None, start=0):
        """``train``: :meth:`Task.dataset` over :meth:`sample`. ``val``/``test``: every image
        of the split once, in order (``num_batches`` caps the count; the last batch may be
        smaller); image ``k``'s context and targets come from the generator
        ``default_rng([SPLIT_SEEDS[split], k])``."""
        if split == "train":
            return super().dataset(split, batch_size, seed, num_batches, start)
        import tensorflow as tf

        check_choice("dataset", "split", split, SPLITS)
        dataset_args(batch_size, num_batches, start, seed)
        self.check_memory(batch_size)
        n = self.num_images(split)
        total = math.ceil(n / batch_size)
        stop = total if num_batches is None else min(total, int(start) + int(num_batches))
        signature = self.signature(None)
        keys = list(signature)

        def load_numpy(i):
            indices = np.arange(int(i) * batch_size, min((int(i) + 1) * batch_size, n))
            batch = self.make_batch(split, indices, [np.random.default_rng([SPLIT_SEEDS[split], int(k)])
                                                     for k in indices])
            return [batch[key] for key in keys]

        def load(i):
            values = tf.numpy_function(load_numpy, [i], [signature[k].dtype for k in keys], stateful=False)
            return {k: tf.ensure_shape(v, signature[k].shape) for k, v in zip(keys, values)}

        ds = tf.data.Dataset.range(min(int(start), stop), stop)
        return ds.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)

    # ------------------------------------------------------------------ plots
    def can_plot(self):
        return True

    def plot(self, model, batch, num_tasks=4, num_samples=0, title=None, axes=None):
        """:func:`taylorformer.plotting.images.plot_image_completion` on this task's canvas."""
        from taylorformer.plotting.images import plot_image_completion

        return plot_image_completion(model, batch, self.canvas_shape, num_tasks=num_tasks,
                                     num_samples=num_samples, value_range=self.value_range,
                                     title=title, axes=axes)


# ----------------------------------------------------------------------------- presets
#: Taylorformer App. A.2 (counts of context and of targets outside it)
TAYLORFORMER_COUNTS = {"num_context": [6, 200], "num_target": [3, 197]}
#: TE-TNP App. F.2: Nc ~ U(N/3), the remaining pixels as targets
TE_TNP_COUNTS = {"context_fraction": [0.0, 1.0 / 3.0], "num_target": "rest"}
EMNIST = {"source": "tfds:emnist/balanced", "transpose": True, "classes": list(range(10)), **TAYLORFORMER_COUNTS}
PRESETS = {
    "mnist": ({"source": "tfds:mnist", **TAYLORFORMER_COUNTS},
              "MNIST 28x28 grey, Taylorformer protocol (Nc ~ U{6..200}, Nt ~ U{3..197}, y in [-0.5, 0.5])"),
    "emnist": (EMNIST, "EMNIST balanced digits (classes 0-9) 28x28, Taylorformer protocol"),
    "emnist-unseen": ({**EMNIST, "test_classes": list(range(10, 47))},
                      "EMNIST balanced: train/val on digits 0-9, test on the unseen letters 10-46"),
    "celeba": ({"source": "tfds:celeb_a", "image_size": [32, 32], **TAYLORFORMER_COUNTS,
                "split": {"train": "train", "val": "validation", "test": "test"}},
               "CelebA centred square at 32x32 RGB, Taylorformer protocol"),
    "cifar10": ({"source": "tfds:cifar10", **TAYLORFORMER_COUNTS},
                "CIFAR-10 32x32 RGB, Taylorformer protocol"),
    "t-mnist": ({"source": "tfds:mnist", "max_shift": 14, **TE_TNP_COUNTS},
                "TE-TNP translated MNIST: 56x56 canvas, Nc ~ U{0..N/3}, the other pixels as targets"),
    "t-cifar10": ({"source": "tfds:cifar10", "max_shift": 16, **TE_TNP_COUNTS},
                  "TE-TNP translated CIFAR-10: 64x64 canvas, Nc ~ U{0..N/3}, the other pixels as targets"),
}


@hookimpl
def register_tasks(register):
    register("image", ImageTask,
             description="Image completion: pixels in [-1, 1]^2 -> intensities; source array/.npy/.npz/"
                         "PNG-JPEG folder/tfds:NAME")
    for name, (config, description) in PRESETS.items():
        register(name, functools.partial(ImageTask, **config), description=description)
