"""Taylorformer blocks: the ``mha-x`` attention and the ``taylorformer`` / ``tnp-a`` encoders.

Both encoders are *causal* (``causal = True``): the representation of target i depends on
the context and on targets strictly before i only, so one forward pass gives every
conditional of the chain rule (teacher forcing) for :class:`AutoregressiveNP`.

``taylorformer`` (Nivron et al. 2023, Sec. 3.2-3.3 and Algorithm 1)
    One sequence of Nc + Nt tokens. Mask (structural, from global indices): a context row
    sees every context key; target row i sees the context and targets strictly before i
    (never itself). Padding is a key mask: a padded point is never a key. Each attention
    layer runs as two executor calls on the mask's non-empty blocks (context rows x
    context keys, target rows x all keys; the last layer only the target rows, whose
    context rows are unused): about 69% of the full (Nc+Nt)^2 scores over 4 layers at
    Nc = Nt, identical results (tested). With a context size unknown at trace time it
    falls back to one masked call.

    * MHA-XY stream (``mha-xy``, :class:`taylorformer.attention.Attention`): first-layer
      keys/values of every point are ``[X_fe, Y_fe, Y_seen, 1]``; query rows of context
      points are the same, query rows of targets hide their own y features and carry the
      flag 0: ``[X_fe, 0, Y_seen, 0]``. Later layers: queries = keys = values = previous
      outputs.
    * MHA-X stream (``mha-x``, :class:`MHAX`): queries/keys are functions of x only
      (``X_fe``, then previous MHA-X outputs); the last layer uses y as its values, so the
      stream's output is a learned linear smoothing (softmax weights from x only) of the
      observed y, as a GP mean is.

    Features: ``X_fe = [x, PE(x), feat_x]`` (``PE``: ``enc_dim`` sinusoidal features with
    wavelengths geometric in ``[min_wavelength, max_wavelength]``, the paper's continuous
    positional encoding in x units), ``Y_fe = [y, feat_own]``, ``Y_seen = feat_seen``;
    ``feat_*`` come from a LocalTaylor wrapper (``reads_wrapper_features = True``) and are
    empty without one. Layers are post-norm as in Algorithm 1:
    ``O = LN(MHA(Q, K, V) + R)``, ``O = LN(O + Dense(ReLU-Dense(O)))`` with ``R`` a Dense
    projection of the first layer's queries, then the previous output. Output: the target
    rows of ``concat(O_X, O_XY)`` (``[B, Nt, width * len(streams)]``); the model's head
    (a linear layer in the preset) maps it to the likelihood parameters.
    Ablations: ``streams=["xy"]`` (MHA-XY only, a masked transformer decoder) or
    ``streams=["x"]`` (MHA-X only); with or without the wrapper.

``tnp-a`` (Nguyen & Grover 2022, autoregressive TNP)
    Doubled sequence ``[context; targets with y; targets with y = 0]`` of Nc + 2Nt tokens,
    tokens ``MLP([x, y, flag])`` (flag 1 on the zero-y copies). A real target copy j
    attends to the context and real targets <= j; the zero-y copy of i attends to the
    context and real targets < i; predictions are read from the zero-y copies. Zero-y
    copies are never keys, so each layer computes (Nc + 2Nt) x (Nc + Nt) scores. Pre-norm
    residual layers (as the package's ``transformer``/TNP-D encoder). With a LocalTaylor
    wrapper its features are folded into x and y (generic wrapping).
"""
import math

import keras
import tensorflow as tf

from taylorformer import components
from taylorformer.attention import Attention
from taylorformer.errors import SpecError
from taylorformer.hookspecs import hookimpl
from taylorformer.layers import MLP

STREAMS = ("x", "xy")


class MHAX(Attention):
    """MHA-X: scaled dot-product attention whose values may differ from its keys.

    ``layer(queries, keys, ..., values=None)``: queries and keys are x-only features;
    ``values`` defaults to ``keys`` and is y in the last MHA-X layer. The value projection
    has no bias, so the output is affine in the values (a learned linear smoothing).
    """

    def build(self, queries_shape, keys_shape=None, values_shape=None):
        keys_shape = keys_shape or queries_shape
        self.q_proj.build(queries_shape)
        self.k_proj.build(keys_shape)
        self.v_proj.build(values_shape or keys_shape)
        self.out_proj.build((None, None, self.num_heads * self.head_dim))

    def attend(self, queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
               values=None):
        from taylorformer import attention_executor

        values = keys if values is None else values
        q = self._heads(self.q_proj(queries))
        k = self._heads(self.k_proj(keys))
        v = self._heads(self.v_proj(values))
        return attention_executor.attend(self.score, q, k, v, q_pos=q_pos, k_pos=k_pos,
                                         key_mask=key_mask, pair_mask_fn=pair_mask_fn,
                                         tile_size=self.tile_size)

    def call(self, queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
             values=None):
        return self.merge_heads(self.attend(queries, keys, q_pos, k_pos, key_mask, pair_mask_fn,
                                            values=values))


def sinusoidal(x, num_freqs, min_wavelength, max_wavelength):
    """``[B, N, Dx] -> [B, N, 2 * Dx * num_freqs]``: sin/cos at geometric wavelengths."""
    if num_freqs == 0:
        return x[..., :0]
    expo = tf.range(num_freqs, dtype=tf.float32) / max(num_freqs - 1, 1)
    freqs = 2.0 * math.pi / (min_wavelength * (max_wavelength / min_wavelength) ** expo)
    ang = tf.cast(x, tf.float32)[..., None] * freqs  # [B, N, Dx, F]
    pe = tf.concat([tf.sin(ang), tf.cos(ang)], -1)
    shape = tf.shape(x)
    return tf.reshape(pe, [shape[0], shape[1], -1])


def taylorformer_pair_mask(nc):
    """Allowed (query, key) pairs of the Nc+Nt sequence: key < max(query, nc)."""
    return lambda q, k: k[None, :] < tf.maximum(q[:, None], nc)


def tnpa_pair_mask(nc, nt):
    """TNP-A: queries over Nc + 2Nt tokens, keys over the first Nc + Nt (context, real)."""
    def allowed(q, k):
        q, k = q[:, None], k[None, :]
        real_q = (q >= nc) & (q < nc + nt)
        fake_q = q >= nc + nt
        kr = k - nc
        return (k < nc) | ((k < nc + nt) & ((real_q & (kr <= q - nc)) | (fake_q & (kr < q - nc - nt))))
    return allowed


class _PostNormBlock(keras.layers.Layer):
    """``O = LN(attn + residual)``, ``O = LN(O + Dense(ReLU-Dense(O)))`` with dropout."""

    def __init__(self, width, ffn_width, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.width, self.ffn_width, self.dropout = width, ffn_width, dropout
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm2")
        self.ffn_in = keras.layers.Dense(ffn_width, activation="relu", name="ffn_in")
        self.ffn_out = keras.layers.Dense(width, name="ffn_out")
        self.drop = keras.layers.Dropout(dropout)

    def call(self, attended, residual, training=None):
        o = self.norm1(self.drop(attended, training=training) + residual)
        return self.norm2(o + self.drop(self.ffn_out(self.ffn_in(o)), training=training))

    def get_config(self):
        return {**super().get_config(), "width": self.width, "ffn_width": self.ffn_width,
                "dropout": self.dropout}


class TaylorformerEncoder(keras.layers.Layer):
    """Taylorformer network: MHA-X and MHA-XY streams over one masked Nc+Nt sequence."""

    causal = True
    reads_wrapper_features = True

    def __init__(self, dim_x, dim_y, streams=("x", "xy"), layers=4, width=32, num_heads=6,
                 head_dim=11, ffn_width=None, enc_dim=32, min_wavelength=0.02,
                 max_wavelength=20.0, dropout=0.0, attention_x="mha-x", attention_xy="mha-xy",
                 tile_size=None, **kwargs):
        kwargs.setdefault("autocast", False)  # the batch stays float32; Dense sublayers autocast
        super().__init__(**kwargs)
        streams = [streams] if isinstance(streams, str) else list(streams)
        if not streams or any(s not in STREAMS for s in streams) or len(set(streams)) != len(streams):
            raise SpecError(f"taylorformer encoder: streams must be a non-empty subset of {list(STREAMS)}, "
                            f"got {streams!r}")
        if not isinstance(layers, int) or layers < 1:
            raise SpecError(f"taylorformer encoder: layers must be an int >= 1, got {layers!r}")
        if enc_dim % (2 * dim_x):
            raise SpecError(f"taylorformer encoder: enc_dim ({enc_dim}) must be a multiple of 2 * dim_x")
        self.dim_x, self.dim_y, self.streams, self.num_layers = dim_x, dim_y, streams, layers
        self.width, self.num_heads, self.head_dim = width, num_heads, head_dim
        self.ffn_width = ffn_width or width
        self.enc_dim, self.min_wavelength, self.max_wavelength = enc_dim, min_wavelength, max_wavelength
        self.dropout, self.tile_size = dropout, tile_size
        self.attention_x = components.normalize(attention_x, "encoder.attention_x")
        self.attention_xy = components.normalize(attention_xy, "encoder.attention_xy")
        self.output_dim = width * len(streams)

        def attn(entry, field, i):
            spec = {"num_heads": num_heads, "head_dim": head_dim, **entry}
            if tile_size is not None:
                spec.setdefault("tile_size", tile_size)
            return components.build("attention", spec, field, output_dim=width, name=f"{field}_{i}")

        def blocks(tag):
            return [_PostNormBlock(width, self.ffn_width, dropout, name=f"{tag}_block_{i}")
                    for i in range(layers)]

        if "x" in streams:
            self.attn_x = [attn(self.attention_x, "attention_x", i) for i in range(layers)]
            self.block_x = blocks("x")
            self.res_x = keras.layers.Dense(width, name="x_in")
        if "xy" in streams:
            self.attn_xy = [attn(self.attention_xy, "attention_xy", i) for i in range(layers)]
            self.block_xy = blocks("xy")
            self.res_xy = keras.layers.Dense(width, name="xy_in")

    def features(self, batch):
        """``X_fe``, ``Y_fe``, ``Y_seen`` and y over the whole sequence ``[context; targets]``."""
        def seq(c_key, t_key):
            return tf.cast(tf.concat([batch[c_key], batch[t_key]], 1), tf.float32)

        def wrapper_group(group):  # empty [B, L, 0] without a LocalTaylor wrapper
            key = f"feat_{group}"
            return seq(key + "_c", key + "_t") if key + "_c" in batch else x[..., :0]

        x, y = seq("xc", "xt"), seq("yc", "yt")
        pe = sinusoidal(x, self.enc_dim // (2 * self.dim_x), self.min_wavelength, self.max_wavelength)
        x_fe = tf.concat([x, pe, wrapper_group("x")], -1)
        y_fe = tf.concat([y, wrapper_group("own")], -1)
        return x_fe, y_fe, wrapper_group("seen"), y

    @staticmethod
    def _attend(attn, queries, keys, key_mask, nc, values=None, targets_only=False):
        """The masked Nc+Nt attention, computed in its two non-empty blocks.

        Context rows see exactly the context keys (Nc x Nc scores, no structural mask);
        target rows see the context and earlier targets (Nt x (Nc+Nt), key < nc + row).
        Same result as one call with :func:`taylorformer_pair_mask`, about 3/4 of the
        scores (1/2 with ``targets_only``, used in the last layer whose context rows are
        not needed).
        """
        def kw(sl):
            return {} if values is None else {"values": values[:, sl]}

        tgt_mask = lambda q, k: k[None, :] < nc + q[:, None]  # noqa: E731
        if targets_only:
            return attn(queries[:, nc:], keys, key_mask=key_mask, pair_mask_fn=tgt_mask, **kw(slice(None)))
        static_nc = tf.get_static_value(nc)
        if static_nc is None:  # unknown context size: one call (never an empty query block)
            return attn(queries, keys, key_mask=key_mask, pair_mask_fn=taylorformer_pair_mask(nc),
                        **kw(slice(None)))
        tgt = attn(queries[:, nc:], keys, key_mask=key_mask, pair_mask_fn=tgt_mask, **kw(slice(None)))
        if static_nc == 0:
            return tgt
        ctx = attn(queries[:, :nc], keys[:, :nc], key_mask=key_mask[:, :nc], **kw(slice(None, nc)))
        return tf.concat([ctx, tgt], 1)

    def call(self, batch, training=None):
        nc = batch["xc"].shape[1]
        nc = tf.shape(batch["xc"])[1] if nc is None else nc
        key_mask = tf.concat([batch["mask_c"], batch["mask_t"]], 1)
        x_fe, y_fe, y_seen, y = self.features(batch)
        dtype = self.compute_dtype
        last = self.num_layers - 1
        outputs = []
        if "x" in self.streams:
            o = tf.cast(x_fe, dtype)
            res = self.res_x(o)
            for i, (attn, block) in enumerate(zip(self.attn_x, self.block_x)):
                values = tf.cast(y, dtype) if i == last else None
                a = self._attend(attn, o, o, key_mask, nc, values=values, targets_only=i == last)
                o = res = block(a, res[:, nc:] if i == last else res, training=training)
            outputs.append(o)
        if "xy" in self.streams:
            mask_c, mask_t = (tf.cast(batch[k], tf.float32)[..., None] for k in ("mask_c", "mask_t"))
            is_ctx = tf.concat([tf.ones_like(mask_c), tf.zeros_like(mask_t)], 1)  # [B, L, 1]
            keys = tf.concat([x_fe, y_fe, y_seen, tf.ones_like(is_ctx)], -1)
            queries = tf.concat([x_fe, y_fe * is_ctx, y_seen, is_ctx], -1)
            keys, queries = tf.cast(keys, dtype), tf.cast(queries, dtype)
            res = self.res_xy(queries)
            for i, (attn, block) in enumerate(zip(self.attn_xy, self.block_xy)):
                a = self._attend(attn, queries, keys, key_mask, nc, targets_only=i == last)
                queries = keys = res = block(a, res[:, nc:] if i == last else res, training=training)
            outputs.append(queries)
        return outputs[0] if len(outputs) == 1 else tf.concat(outputs, -1)

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y,
                "streams": self.streams, "layers": self.num_layers, "width": self.width,
                "num_heads": self.num_heads, "head_dim": self.head_dim, "ffn_width": self.ffn_width,
                "enc_dim": self.enc_dim, "min_wavelength": self.min_wavelength,
                "max_wavelength": self.max_wavelength, "dropout": self.dropout,
                "attention_x": self.attention_x, "attention_xy": self.attention_xy,
                "tile_size": self.tile_size}


class TNPAEncoder(keras.layers.Layer):
    """TNP-A: masked transformer over [context; targets with y; targets with y = 0]."""

    causal = True

    def __init__(self, dim_x, dim_y, attention="mha-xy", layers=6, width=64, num_heads=4,
                 head_dim=16, ffn_width=128, dropout=0.0, **kwargs):
        kwargs.setdefault("autocast", False)  # the batch stays float32; Dense sublayers autocast
        super().__init__(**kwargs)
        self.dim_x, self.dim_y, self.num_layers, self.width = dim_x, dim_y, layers, width
        self.num_heads, self.head_dim, self.ffn_width, self.dropout = num_heads, head_dim, ffn_width, dropout
        self.attention_spec = components.normalize(attention, "encoder.attention")
        self.output_dim = width
        self.embed = MLP(width, width, 2, name="embed")
        spec = {"num_heads": num_heads, "head_dim": head_dim, **self.attention_spec}
        self.attn = [components.build("attention", spec, "encoder.attention", output_dim=width)
                     for _ in range(layers)]
        self.norm1 = [keras.layers.LayerNormalization(epsilon=1e-5) for _ in range(layers)]
        self.norm2 = [keras.layers.LayerNormalization(epsilon=1e-5) for _ in range(layers)]
        self.ffn = [MLP(width, ffn_width, 1, name=f"ffn_{i}") for i in range(layers)]
        self.drop = keras.layers.Dropout(dropout)
        self.norm_out = keras.layers.LayerNormalization(epsilon=1e-5)

    def call(self, batch, training=None):
        xc, yc, xt, yt = (tf.cast(batch[k], tf.float32) for k in ("xc", "yc", "xt", "yt"))
        nc, nt = tf.shape(xc)[1], tf.shape(xt)[1]
        flag_c, flag_t = tf.zeros_like(yc[..., :1]), tf.zeros_like(yt[..., :1])
        tokens = self.embed(tf.concat([
            tf.concat([xc, yc, flag_c], -1),
            tf.concat([xt, yt, flag_t], -1),
            tf.concat([xt, tf.zeros_like(yt), tf.ones_like(flag_t)], -1)], 1))
        key_mask = tf.concat([batch["mask_c"], batch["mask_t"]], 1)
        pair_mask = tnpa_pair_mask(nc, nt)
        h = tokens
        for attn, norm1, norm2, ffn in zip(self.attn, self.norm1, self.norm2, self.ffn):
            q = norm1(h)
            h = h + self.drop(attn(q, q[:, :nc + nt], key_mask=key_mask, pair_mask_fn=pair_mask),
                              training=training)
            h = h + self.drop(ffn(norm2(h)), training=training)
        return self.norm_out(h[:, nc + nt:])

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y,
                "attention": self.attention_spec, "layers": self.num_layers, "width": self.width,
                "num_heads": self.num_heads, "head_dim": self.head_dim,
                "ffn_width": self.ffn_width, "dropout": self.dropout}


@hookimpl
def register_attention(register):
    register("mha-x", MHAX,
             description="MHA-X: attention on x-only features, y as values in the last layer (Taylorformer).")


@hookimpl
def register_encoders(register):
    register("taylorformer", TaylorformerEncoder,
             description="Taylorformer: MHA-X + MHA-XY streams over one masked Nc+Nt sequence.")
    register("tnp-a", TNPAEncoder,
             description="TNP-A: autoregressive transformer over the doubled Nc+2Nt sequence.")
