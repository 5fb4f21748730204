"""The discretisation grid and the two SetConv maps of a ConvCNP (Gordon et al. 2020).

A SetConv turns a set of points into a function with an EQ (exponentiated quadratic)
kernel, ``f(x) = sum_i exp(-0.5 sum_d (x_d - x_id)^2 / l_d^2) z_i``, with a learnable
lengthscale ``l`` per input dimension. The encoder evaluates it at the grid from the
context (values and a density channel, the kernel's sum over real points, so that an
observed 0 differs from no observation); the decoder evaluates it at the targets from the
grid (:func:`fixed_grid`: one for all rows; :func:`lattice_grid`: one per row).
"""
import keras
import numpy as np
import tensorflow as tf

from taylorformer.errors import BatchError

#: the lengthscale floor: l = FLOOR + softplus(raw) (as the cambridge-mlg/tnp reference)
LENGTHSCALE_FLOOR = 1e-5
#: keeps the density-normalised channels finite where the density is 0 (an empty context)
DENSITY_EPS = 1e-8


def axes_to_grid(axes):
    """Cartesian product, per row, of per-dimension coordinates ``[R, n_d]`` (``ij`` order,
    the last dimension fastest) -> grid points ``[R, prod n_d, D]`` and the grid's shape (a
    list of ``D`` sizes: ints where static)."""
    dims = len(axes)
    columns = []
    for d, a in enumerate(axes):
        shape = [-1] + [1] * dims
        shape[d + 1] = tf.shape(a)[1]
        columns.append(tf.reshape(a, shape))
    full = tf.shape(columns[0])[:1]
    for c in columns:
        full = tf.broadcast_dynamic_shape(full, tf.shape(c)[:1])
    size = tf.concat([full, tf.stack([tf.shape(a)[1] for a in axes])], 0)
    points = tf.stack([tf.reshape(tf.broadcast_to(c, size), [size[0], -1]) for c in columns], -1)
    return points, [a.shape[1] if a.shape[1] is not None else tf.shape(a)[1] for a in axes]


def fixed_grid(grid_range, grid_points):
    """A grid that does not move with the data: ``grid_points[d]`` evenly spaced points
    from ``grid_range[d][0]`` to ``grid_range[d][1]`` (both included) per dimension, one for
    every row. Returns ``(points [1, G, D], shape)``."""
    axes = [tf.cast(tf.linspace(float(lo), float(hi), int(n)), tf.float32)[None]
            for (lo, hi), n in zip(grid_range, grid_points)]
    return axes_to_grid(axes)


def data_bounds(xs, masks):
    """Per row and dimension, the lowest and highest real input: ``xs`` a list of
    ``[B, N, D]`` inputs, ``masks`` their ``[B, N]`` masks (1 = real). Returns
    ``(low [B, D], high [B, D])``; both 0 in a row with no real point."""
    big = tf.constant(np.finfo(np.float32).max / 4, tf.float32)
    lows, highs = [], []
    for x, mask in zip(xs, masks):
        real = tf.cast(mask, tf.bool)[..., None]
        x = tf.cast(x, tf.float32)
        lows.append(tf.reduce_min(tf.where(real, x, big), axis=1))
        highs.append(tf.reduce_max(tf.where(real, x, -big), axis=1))
    low, high = tf.reduce_min(tf.stack(lows), 0), tf.reduce_max(tf.stack(highs), 0)
    empty = low > high
    return tf.where(empty, 0.0, low), tf.where(empty, 0.0, high)


def lattice_grid(low, high, points_per_unit, margin=0.0, grid_points=None, max_points=None):
    """Per row, a grid on the lattice ``k / points_per_unit`` (k integer) that moves with
    the row's data, so that shifting a row's inputs by a multiple of the spacing shifts its
    grid with them (translation equivariance). ``low``/``high`` ``[B, D]``: the rows'
    bounds (:func:`data_bounds`).

    With ``grid_points`` (a list ``[D]``) a row's grid has that many points per dimension,
    centred on the lattice point nearest ``(low + high) / 2`` (a fixed size, as XLA needs;
    a row's grid depends on that row alone). Without, it starts at ``low - margin`` rounded
    down to the lattice and has the points the widest row of the batch needs to reach its
    ``high + margin`` (a size that depends on the batch; more than ``max_points`` in all
    raise a ``BatchError``, in a graph an ``InvalidArgumentError``, naming them). Returns ``(points [B, G, D], shape)``."""
    ppu = tf.constant(points_per_unit, tf.float32)
    axes = []
    for d in range(low.shape[1]):
        if grid_points is None:
            start = tf.floor((low[:, d] - margin) * ppu)
            count = tf.cast(tf.reduce_max(tf.math.ceil((high[:, d] + margin) * ppu) - start), tf.int32) + 1
        else:
            count = int(grid_points[d])
            start = tf.round((low[:, d] + high[:, d]) / 2 * ppu) - (count - 1) // 2
        axes.append((start[:, None] + tf.cast(tf.range(count), tf.float32)[None]) / ppu)
    if grid_points is None and max_points is not None:
        total = tf.reduce_prod(tf.stack([tf.cast(tf.shape(a)[1], tf.float64) for a in axes]))
        message = (f"convcnp encoder: the inputs span more grid points than {max_points} at "
                   f"{points_per_unit} per unit; set the encoder's grid_points or grid_range")
        if tf.executing_eagerly():
            if float(total) > max_points:
                raise BatchError(f"{message} (they need {int(total)})")
        else:
            tf.debugging.assert_less_equal(total, tf.constant(float(max_points), tf.float64), message=message)
    return axes_to_grid(axes)


def eq_weights(x_query, x_points, lengthscale):
    """EQ kernel ``exp(-0.5 sum_d (q_d - p_d)^2 / l_d^2)``: ``x_query [..., Q, D]``,
    ``x_points [..., P, D]`` (broadcast over leading axes), ``lengthscale [D]`` ->
    ``[..., Q, P]``."""
    diff = (x_query[..., :, None, :] - x_points[..., None, :, :]) / lengthscale  # differences first: exact far from 0
    return tf.exp(-0.5 * tf.reduce_sum(tf.square(diff), -1))


class SetConv(keras.layers.Layer):
    """An EQ SetConv with a learnable lengthscale per input dimension,
    ``l = 1e-5 + softplus(raw)``, starting at ``init_lengthscale``."""

    def __init__(self, dim_x, init_lengthscale=0.1, **kwargs):
        super().__init__(**kwargs)
        self.dim_x, self.init_lengthscale = dim_x, init_lengthscale
        raw = float(np.log(np.expm1(init_lengthscale - LENGTHSCALE_FLOOR)))
        self.raw_lengthscale = self.add_weight(name="raw_lengthscale", shape=(dim_x,),
                                               initializer=keras.initializers.Constant(raw))

    @property
    def lengthscale(self):
        """``[D]`` float32."""
        return LENGTHSCALE_FLOOR + tf.nn.softplus(tf.cast(self.raw_lengthscale, tf.float32))

    def to_grid(self, x_grid, x, z, mask):
        """The context's functional embedding at the grid: ``x_grid [B or 1, G, D]``, ``x [B, N, D]``,
        ``z [B, N, C]``, ``mask [B, N]`` (0 = padding, which adds nothing) ->
        ``[B, G, C]`` = ``sum_i w(x_g, x_i) z_i``."""
        w = eq_weights(x_grid, tf.cast(x, tf.float32), self.lengthscale)  # [B, G, N]
        w *= tf.cast(mask, tf.float32)[:, None, :]
        return tf.matmul(w, tf.cast(z, tf.float32))

    def from_grid(self, x_grid, z_grid, x):
        """The grid's function at ``x [B, N, D]``: ``x_grid [B or 1, G, D]``, ``z_grid [B, G, C]``
        -> ``[B, N, C]``."""
        w = eq_weights(tf.cast(x, tf.float32), x_grid, self.lengthscale)  # [B, N, G]
        return tf.matmul(w, tf.cast(z_grid, w.dtype))

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "init_lengthscale": self.init_lengthscale}
