"""Encoder ``convcnp`` (kind ``encoder``): SetConv to a grid, CNN, SetConv to the targets.

ConvCNP (Gordon et al. 2020), as cambridge-mlg/tnp's ``ConvCNPEncoder`` composes it:
the context's values and a density channel ``[yc, 1]`` are smoothed onto a grid by an EQ
SetConv (:mod:`.setconv`), optionally the value channels divided by the density
(``normalise``), embedded per grid point by an MLP to ``channels``, run through the CNN
(:mod:`.cnn`: ``cnn`` its kind, ``layers`` its blocks), and read off at the targets by a
second EQ SetConv. The model's head then
maps the target representations ``[B, Nt, channels]`` to the likelihood's parameters.

The grid (``points_per_unit`` points per unit of x):

* ``grid_range`` given: fixed, ``[lo, hi]`` per dimension (one pair for all, or a list),
  ``grid_points`` points each (``null``: ``points_per_unit * (hi - lo) + 1``), the same for
  every row, as the reference's ``SetConvGridEncoder``; it does not follow the data;
* else, per row, on the lattice ``k / points_per_unit``, following the row's context and
  target inputs: ``grid_points`` points per dimension centred on them (a fixed size: XLA,
  the default training, compiles it), or with ``grid_points: null`` from ``margin`` below
  them to ``margin`` beyond the widest row's (a size that depends on the batch, so a row's
  output then depends on the widest row through the grid's edge: train with
  ``jit_compile=False``).

On the lattice each row is translation equivariant for shifts by a multiple of the
spacing. 1-D and 2-D inputs.
"""
import math
import warnings

import keras
import tensorflow as tf

from taylorformer.checks import MAX_LAYERS, MAX_WIDTH, check_bool, check_choice, check_int, check_number, check_size
from taylorformer.errors import SpecError
from taylorformer.models.layers import MLP

from .cnn import CNN_KINDS, GridCNN
from .setconv import DENSITY_EPS, SetConv, data_bounds, fixed_grid, lattice_grid

#: bounds of the grid's points, all dimensions together, and of ``kernel_size``
MAX_GRID_POINTS = 2 ** 22
MAX_KERNEL = 101


class ConvCNPEncoder(keras.layers.Layer):
    """ConvCNP encoder (module docstring): batch -> target representations ``[B, Nt, channels]``."""

    def __init__(self, dim_x, dim_y, channels=128, cnn="conv", layers=5, kernel_size=9,
                 max_channels=256, points_per_unit=16.0, margin=0.1, grid_points=64,
                 grid_range=None, init_lengthscale=0.1, normalise=True, embed_hidden_layers=2,
                 **kwargs):
        super().__init__(**kwargs)
        owner = "convcnp encoder"
        if dim_x not in (1, 2):
            raise SpecError(f"{owner}: ConvCNP convolves a 1-D or 2-D grid; dim_x = {dim_x} is not supported")
        self.dim_x, self.dim_y = dim_x, dim_y
        self.channels = check_int(owner, "channels", channels, maximum=MAX_WIDTH)
        self.cnn_kind = check_choice(owner, "cnn", cnn, CNN_KINDS)
        self.blocks = check_int(owner, "layers", layers, maximum=MAX_LAYERS)
        if self.cnn_kind == "unet" and self.blocks % 2 == 0:
            raise SpecError(f"{owner} 'layers' (CNN blocks) must be odd for cnn 'unet' (down, bottleneck, "
                            f"up), got {layers}")
        self.kernel_size = check_int(owner, "kernel_size", kernel_size, maximum=MAX_KERNEL)
        if self.kernel_size % 2 == 0:
            raise SpecError(f"{owner} 'kernel_size' must be odd (the grid keeps its shape), got {kernel_size}")
        self.max_channels = check_int(owner, "max_channels", max_channels, maximum=MAX_WIDTH)
        self.points_per_unit = check_number(owner, "points_per_unit", points_per_unit, low=0, low_open=True)
        self.margin = check_number(owner, "margin", margin, low=0)
        self.grid_range = self._check_range(owner, grid_range)
        self.grid_points = self._check_points(owner, grid_points)
        self.init_lengthscale = check_number(owner, "init_lengthscale", init_lengthscale, low=0, low_open=True)
        self.normalise = check_bool(owner, "normalise", normalise)
        self.embed_hidden_layers = check_int(owner, "embed_hidden_layers", embed_hidden_layers, minimum=0,
                                             maximum=MAX_LAYERS)
        self.output_dim = self.channels
        self.setconv_in = SetConv(dim_x, self.init_lengthscale, name="setconv_encoder")
        self.embed = MLP(self.channels, self.channels, self.embed_hidden_layers, name="embed")
        self.cnn = GridCNN(dim_x, self.cnn_kind, self.channels, self.blocks, self.kernel_size,
                           self.max_channels, name="cnn")
        self.setconv_out = SetConv(dim_x, self.init_lengthscale, name="setconv_decoder")

    def _check_range(self, owner, grid_range):
        if grid_range is None:
            return None
        if not isinstance(grid_range, (list, tuple)):
            raise SpecError(f"{owner} 'grid_range' must be [lo, hi] or one [lo, hi] per input dimension, "
                            f"got {grid_range!r}")
        pairs = [grid_range] * self.dim_x if len(grid_range) == 2 and not isinstance(grid_range[0], (list, tuple)) \
            else grid_range
        if len(pairs) != self.dim_x or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
            raise SpecError(f"{owner} 'grid_range' must be [lo, hi] or one [lo, hi] per input dimension "
                            f"({self.dim_x}), got {grid_range!r}")
        out = []
        for d, (lo, hi) in enumerate(pairs):
            lo = check_number(owner, f"grid_range[{d}][0]", lo)
            hi = check_number(owner, f"grid_range[{d}][1]", hi, low=lo, low_open=True)
            out.append([lo, hi])
        return out

    def _check_points(self, owner, grid_points):
        if grid_points is None:
            if self.grid_range is None:
                return None
            return [int(round(self.points_per_unit * (hi - lo))) + 1 for lo, hi in self.grid_range]
        points = grid_points if isinstance(grid_points, (list, tuple)) else [grid_points] * self.dim_x
        if len(points) != self.dim_x:
            raise SpecError(f"{owner} 'grid_points' must be an int or one per input dimension "
                            f"({self.dim_x}), got {grid_points!r}")
        points = [check_int(owner, f"grid_points[{d}]", n, minimum=2, maximum=MAX_GRID_POINTS)
                  for d, n in enumerate(points)]
        if math.prod(points) > MAX_GRID_POINTS:
            raise SpecError(f"{owner} 'grid_points' {points} make {math.prod(points)} grid points, "
                            f"more than {MAX_GRID_POINTS}")
        return points

    def build(self, batch_shape=None):
        """Nothing to create here: the sublayers build on the first call (a batch is a dict)."""

    def grid(self, batch):
        """The batch's grid: ``(points [B or 1, G, Dx], shape)`` (module docstring)."""
        if self.grid_range is not None:
            return fixed_grid(self.grid_range, self.grid_points)
        low, high = data_bounds([batch["xc"], batch["xt"]], [batch["mask_c"], batch["mask_t"]])
        return lattice_grid(low, high, self.points_per_unit, self.margin, self.grid_points, MAX_GRID_POINTS)

    def call(self, batch):
        x_grid, shape = self.grid(batch)
        if tf.executing_eagerly() and self.grid_points is not None:
            self.warn_outside(batch, x_grid)
        yc = tf.cast(batch["yc"], tf.float32)
        z = tf.concat([yc, tf.ones_like(yc[..., :1])], -1)
        values = self.setconv_in.to_grid(x_grid, batch["xc"], z, batch["mask_c"])  # [B, G, Dy + 1]: values, density
        if self.normalise:
            density = values[..., -1:]
            values = tf.concat([values[..., :-1] / (density + DENSITY_EPS), density], -1)
        h = self.embed(values)  # [B, G, C]
        b = tf.shape(h)[0]
        h = tf.reshape(h, tf.stack([b, *shape, self.channels]))
        h = tf.ensure_shape(h, [None] * (self.dim_x + 1) + [self.channels])
        h = self.cnn(h)
        h = tf.reshape(h, [b, -1, self.channels])
        return self.setconv_out.from_grid(x_grid, h, batch["xt"])

    def warn_outside(self, batch, x_grid):
        """Warn (eager calls) when a row's real input lies more than one spacing outside its
        grid of fixed size: the SetConv sees it only through its kernel's tail."""
        low, high = data_bounds([batch["xc"], batch["xt"]], [batch["mask_c"], batch["mask_t"]])
        g_low, g_high = tf.reduce_min(x_grid, 1), tf.reduce_max(x_grid, 1)  # [B or 1, D]
        spacing = (g_high - g_low) / tf.cast(tf.constant(self.grid_points) - 1, tf.float32)
        outside = tf.reduce_any((low < g_low - spacing) | (high > g_high + spacing), -1)
        if bool(tf.reduce_any(outside)):
            row = int(tf.where(outside)[0, 0])
            g = min(row, int(g_low.shape[0]) - 1)
            warnings.warn(
                f"convcnp encoder: the inputs of row {row} span {low[row].numpy().tolist()} to "
                f"{high[row].numpy().tolist()}, beyond its grid {g_low[g].numpy().tolist()} to "
                f"{g_high[g].numpy().tolist()} ({self.grid_points} points per dimension); set the "
                f"encoder's grid_points (or grid_range) to cover them", RuntimeWarning, stacklevel=2)

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y, "channels": self.channels,
                "cnn": self.cnn_kind, "layers": self.blocks, "kernel_size": self.kernel_size,
                "max_channels": self.max_channels, "points_per_unit": self.points_per_unit,
                "margin": self.margin, "grid_points": self.grid_points, "grid_range": self.grid_range,
                "init_lengthscale": self.init_lengthscale, "normalise": self.normalise,
                "embed_hidden_layers": self.embed_hidden_layers}
