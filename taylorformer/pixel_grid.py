"""The pixel grid of image tasks: pixel ``(i, j)`` of an ``H x W`` image <-> input ``x`` in
``[-1, 1]^2`` (``x[..., 0]`` the row, ``x[..., 1]`` the column).

Shared by the image task (:mod:`taylorformer.tasks.image`, which re-exports both
functions) and its plots (:mod:`taylorformer.plotting.images`): a core module of its own, so
that neither imports the other.
"""
import numpy as np


def pixel_coordinates(shape):
    """``[H * W, 2]`` float32 inputs of the pixels of an ``H x W`` grid, row-major:
    pixel ``(i, j)`` -> ``(-1 + 2 i / (H - 1), -1 + 2 j / (W - 1))``."""
    rows, cols = np.meshgrid(np.linspace(-1.0, 1.0, shape[0]), np.linspace(-1.0, 1.0, shape[1]),
                             indexing="ij")
    return np.stack([rows.ravel(), cols.ravel()], axis=-1).astype(np.float32)


def pixel_indices(x, shape):
    """``[N]`` row-major indices of the pixels at inputs ``x [N, 2]`` on an ``H x W`` grid
    (inverse of :func:`pixel_coordinates`): row ``round((x0 + 1) (H - 1) / 2)``, column
    ``round((x1 + 1) (W - 1) / 2)``; a :class:`ValueError` for inputs off the grid's box."""
    x = np.asarray(x, np.float64)
    rows = np.rint((x[:, 0] + 1.0) * (shape[0] - 1) / 2.0).astype(np.int64)
    cols = np.rint((x[:, 1] + 1.0) * (shape[1] - 1) / 2.0).astype(np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= shape[0] or cols.min() < 0 or cols.max() >= shape[1]):
        raise ValueError(f"inputs outside [-1, 1]^2 are not pixels of a {shape[0]} x {shape[1]} grid")
    return rows * shape[1] + cols
