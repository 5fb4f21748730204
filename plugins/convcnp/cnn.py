"""The convolutional networks of a ConvCNP on its grid, 1-D or 2-D, channels last
``[B, n_1, (n_2,) C]``; each keeps the grid's shape ("same" zero padding, odd kernels).

* ``conv``: ``blocks`` blocks ``conv(relu(h))`` of ``channels`` channels (the
  cambridge-mlg/tnp ``CNN``);
* ``resconv``: ``blocks`` depthwise-separable residual blocks,
  ``pw2(dw2(relu(pw1(dw1(relu(h))))) + h)`` (the blocks of the BSA-TNP paper's ConvCNP,
  dl4bi's ``ConvCNPBlock``, without its batch normalisation);
* ``unet``: the cambridge-mlg/tnp ``UNet``: ``blocks`` (odd) ``conv(relu(h))`` blocks, the
  first half each followed by a 2x max pooling and doubling the channels (up to
  ``max_channels``), the second half each after a linear (align-corners) upsampling to the
  matching down block's size and its output concatenated.
"""
import keras
import tensorflow as tf

CNN_KINDS = ("conv", "resconv", "unet")
CONV = {1: keras.layers.Conv1D, 2: keras.layers.Conv2D}
DEPTHWISE = {1: keras.layers.DepthwiseConv1D, 2: keras.layers.DepthwiseConv2D}
POOL = {1: keras.layers.MaxPooling1D, 2: keras.layers.MaxPooling2D}


def unet_channels(channels, blocks, max_channels):
    """Output channels of the U-Net's blocks: ``channels * 2^i`` down to the bottleneck,
    mirrored back, inner ones capped at ``max_channels`` (cambridge-mlg/tnp ``UNet``)."""
    down = [channels * 2 ** i for i in range(blocks // 2 + 1)]
    sizes = down + down[::-1]
    sizes = sizes[:1] + [min(c, max_channels) for c in sizes[1:-1]] + sizes[-1:]
    return sizes[1:]


def resize_linear(x, size):
    """Linear (``dim`` 1) or bilinear (2) interpolation of ``x [B, n_1, (n_2,) C]`` to the
    spatial ``size`` (a list of scalars), corners aligned: output point i sits at input
    position ``i (n_in - 1) / (n_out - 1)`` (torch ``interpolate(align_corners=True)``)."""
    for axis, n_out in enumerate(size, start=1):
        n_in = tf.shape(x)[axis]
        step = tf.cast(tf.maximum(n_in - 1, 0), tf.float32) / tf.cast(tf.maximum(n_out - 1, 1), tf.float32)
        pos = tf.cast(tf.range(n_out), tf.float32) * step
        lo = tf.minimum(tf.cast(tf.floor(pos), tf.int32), tf.maximum(n_in - 1, 0))
        hi = tf.minimum(lo + 1, n_in - 1)
        frac = pos - tf.cast(lo, tf.float32)
        shape = [1] * len(x.shape)
        shape[axis] = -1
        frac = tf.reshape(tf.cast(frac, x.dtype), shape)
        x = tf.gather(x, lo, axis=axis) * (1 - frac) + tf.gather(x, hi, axis=axis) * frac
    return x


class ConvBlock(keras.layers.Layer):
    """``conv(relu(h))``: ``[B, *grid, C_in] -> [B, *grid, out]``."""

    def __init__(self, dim, out, kernel_size, **kwargs):
        super().__init__(**kwargs)
        self.conv = CONV[dim](out, kernel_size, padding="same", name="conv")

    def call(self, h):
        return self.conv(tf.nn.relu(h))


class ResConvBlock(keras.layers.Layer):
    """Depthwise-separable residual block: ``pw2(dw2(relu(pw1(dw1(relu(h))))) + h)``,
    ``[B, *grid, C] -> [B, *grid, out]``."""

    def __init__(self, dim, channels, out, kernel_size, **kwargs):
        super().__init__(**kwargs)
        self.dw1 = DEPTHWISE[dim](kernel_size, padding="same", name="dw1")
        self.pw1 = CONV[dim](channels, 1, name="pw1")
        self.dw2 = DEPTHWISE[dim](kernel_size, padding="same", name="dw2")
        self.pw2 = CONV[dim](out, 1, name="pw2")

    def call(self, h):
        r = self.pw1(self.dw1(tf.nn.relu(h)))
        return self.pw2(self.dw2(tf.nn.relu(r)) + h)


class GridCNN(keras.layers.Layer):
    """The CNN on the grid (module docstring): ``[B, *grid, channels] -> [B, *grid, channels]``."""

    def __init__(self, dim, kind, channels, blocks, kernel_size, max_channels=256, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.kind, self.blocks = dim, kind, blocks
        if kind == "conv":
            self.stack = [ConvBlock(dim, channels, kernel_size, name=f"block_{i}") for i in range(blocks)]
        elif kind == "resconv":
            self.stack = [ResConvBlock(dim, channels, channels, kernel_size, name=f"block_{i}")
                          for i in range(blocks)]
        else:
            self.stack = [ConvBlock(dim, out, kernel_size, name=f"block_{i}")
                          for i, out in enumerate(unet_channels(channels, blocks, max_channels))]
            self.pool = POOL[dim](2, name="pool")

    def call(self, h):
        if self.kind != "unet":
            for block in self.stack:
                h = block(h)
            return h
        down, skips = self.blocks // 2, []
        for block in self.stack[:down]:
            h = block(h)
            skips.append(h)
            h = self.pool(h)
        h = self.stack[down](h)
        for block, skip in zip(self.stack[down + 1:], reversed(skips)):
            size = [tf.shape(skip)[axis] for axis in range(1, self.dim + 1)]
            h = block(tf.concat([resize_linear(h, size), skip], -1))
        return h
