"""The ``taylorformer`` encoder (kind ``encoder``).

The encoder is *causal* (``causal = True``): the representation of target i depends on
the context and on targets strictly before i only, so one forward pass gives every
conditional of the chain rule (teacher forcing) for an autoregressive NP.

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
    * MHA-X stream (``mha-x``, :class:`~taylorformer.plugins.taylorformer.mha_x.MHAX`):
      queries/keys are functions of x only (``X_fe``, then previous MHA-X outputs); the
      last layer uses y as its values, so the
      stream's output is a learned linear smoothing (softmax weights from x only) of the
      observed y, as a GP mean is.

    Features: ``X_fe = [x, PE(x), feat_x]`` (``PE``: ``enc_dim`` sinusoidal features with
    wavelengths geometric in ``[min_wavelength, max_wavelength]``, the paper's continuous
    positional encoding in x units), ``Y_fe = [y, feat_own]``, ``Y_seen = feat_seen``;
    ``feat_*`` are the groups ``x``, ``own``, ``seen`` of the LocalTaylor wrapper's
    features (``reads_wrapper_features = True``: the model passes them as
    ``encoder(batch, features=...)``), empty without a wrapper. Layers are post-norm as in
    Algorithm 1: ``O = LN(MHA(Q, K, V) + R)``, ``O = LN(O + Dense(ReLU-Dense(O)))`` with ``R`` a Dense
    projection of the first layer's queries, then the previous output. Output: the target
    rows of ``concat(O_X, O_XY)`` (``[B, Nt, width * len(streams)]``); the model's head
    (a linear layer in the preset) maps it to the likelihood parameters.
    Ablations: ``streams=["xy"]`` (MHA-XY only, a masked transformer decoder) or
    ``streams=["x"]`` (MHA-X only); with or without the wrapper.

    Cached decoding (:mod:`taylorformer.models.decoding`; ``start_cache``, ``cached_query``,
    ``cached_append``): per stream and layer a key/value cache of every point seen, so
    autoregressive sampling runs one query row per layer and step.
"""
import math

import keras
import tensorflow as tf

from taylorformer import components
from taylorformer.models import decoding
from taylorformer.errors import SpecError
from taylorformer.checks import check_number, check_size

STREAMS = ("x", "xy")


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
        owner = "taylorformer encoder"
        layers, width, num_heads, head_dim = (check_size(owner, k, v) for k, v in (
            ("layers", layers), ("width", width), ("num_heads", num_heads), ("head_dim", head_dim)))
        ffn_width = check_size(owner, "ffn_width", ffn_width, optional=True)
        tile_size = check_size(owner, "tile_size", tile_size, optional=True)
        enc_dim = check_size(owner, "enc_dim", enc_dim, minimum=0)
        if enc_dim % (2 * dim_x):
            raise SpecError(f"taylorformer encoder: enc_dim ({enc_dim}) must be a multiple of 2 * dim_x "
                            f"(dim_x = {dim_x})")
        min_wavelength = check_number(owner, "min_wavelength", min_wavelength, low=0, low_open=True)
        max_wavelength = check_number(owner, "max_wavelength", max_wavelength, low=min_wavelength)
        dropout = check_number(owner, "dropout", dropout, low=0, high=1, high_open=True)
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

    def features(self, batch, wrapper_features=None):
        """``X_fe``, ``Y_fe``, ``Y_seen`` and y over the whole sequence ``[context; targets]``
        (``wrapper_features``: a LocalTaylor wrapper's :class:`LocalTaylorFeatures`)."""
        def seq(c_key, t_key):
            return tf.cast(tf.concat([batch[c_key], batch[t_key]], 1), tf.float32)

        def wrapper_group(group):  # empty [B, L, 0] without a LocalTaylor wrapper
            return x[..., :0] if wrapper_features is None else wrapper_features.group(group)

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

    def _stream(self, stream):
        """``(attention layers, blocks, residual projection)`` of stream ``"x"`` or ``"xy"``."""
        if stream == "x":
            return self.attn_x, self.block_x, self.res_x
        return self.attn_xy, self.block_xy, self.res_xy

    def _first_layer(self, stream, batch, features):
        """First-layer ``(queries, keys)`` ``[B, L, F]`` of ``stream`` over the sequence
        ``[context; targets]``, and y ``[B, L, Dy]`` (the MHA-X stream's last values)."""
        x_fe, y_fe, y_seen, y = self.features(batch, features)
        dtype = self.compute_dtype
        if stream == "x":
            return tf.cast(x_fe, dtype), tf.cast(x_fe, dtype), tf.cast(y, dtype)
        mask_c, mask_t = (tf.cast(batch[k], tf.float32)[..., None] for k in ("mask_c", "mask_t"))
        is_ctx = tf.concat([tf.ones_like(mask_c), tf.zeros_like(mask_t)], 1)  # [B, L, 1]
        keys = tf.concat([x_fe, y_fe, y_seen, tf.ones_like(is_ctx)], -1)
        queries = tf.concat([x_fe, y_fe * is_ctx, y_seen, is_ctx], -1)
        return tf.cast(queries, dtype), tf.cast(keys, dtype), tf.cast(y, dtype)

    def _active_streams(self):
        """The streams in output order (MHA-X first)."""
        return [s for s in STREAMS if s in self.streams]

    def call(self, batch, features=None, training=None):
        """Target representations ``[B, Nt, output_dim]``; ``features``: the LocalTaylor
        wrapper's features, if the model has one."""
        nc = batch["xc"].shape[1]
        nc = tf.shape(batch["xc"])[1] if nc is None else nc
        key_mask = tf.concat([batch["mask_c"], batch["mask_t"]], 1)
        last = self.num_layers - 1
        outputs = []
        for stream in self._active_streams():
            attns, blocks, res_layer = self._stream(stream)
            queries, keys, y = self._first_layer(stream, batch, features)
            res = res_layer(queries)
            for i, (attn, block) in enumerate(zip(attns, blocks)):
                values = y if stream == "x" and i == last else None
                a = self._attend(attn, queries, keys, key_mask, nc, values=values, targets_only=i == last)
                queries = keys = res = block(a, res[:, nc:] if i == last else res, training=training)
            outputs.append(queries)
        return outputs[0] if len(outputs) == 1 else tf.concat(outputs, -1)

    # ------------------------------------------------------------------ cached decoding
    # (protocol: taylorformer.models.decoding). Per stream and layer the cache holds the key and
    # value heads [B, H, Nc + Nt, d] of every point seen; step t runs target t's query row
    # only. A target's key at layer i > 0 is its own query-row output of layer i - 1 (known
    # before its y); its first-layer key (MHA-XY) and last-layer value (MHA-X) read its y.
    def start_cache(self, batch, features=None):
        """Cache with the context's keys/values in every layer (context rows see the context)."""
        context = decoding.context_only(batch)
        nc, nt = tf.shape(batch["xc"])[1], batch["mask_t"].shape[1]
        cache = {"key_mask": tf.concat([batch["mask_c"], batch["mask_t"]], 1)}
        last = self.num_layers - 1
        for stream in self._active_streams():
            attns, blocks, res_layer = self._stream(stream)
            queries, keys, y = self._first_layer(stream, context, features)
            res, layers = res_layer(queries), []
            for i, (attn, block) in enumerate(zip(attns, blocks)):
                k, v = attn.key_value_heads(keys, y if stream == "x" and i == last else None)
                layers.append(decoding.KeyValueCache.start(k, v, nt))
                if i < last:
                    a = attn.attend_cache(queries, layers[-1], nc, key_mask=cache["key_mask"])
                    queries = keys = res = block(a, res)
            cache[stream] = layers
        return cache

    def cached_query(self, cache, point, index, features=None):
        """Representation ``[B, 1, output_dim]`` of the target in ``point`` (slot ``index``),
        and its query-row outputs per stream (the keys of layers 1..L-1)."""
        outputs, pending = [], {}
        for stream in self._active_streams():
            attns, blocks, res_layer = self._stream(stream)
            queries, _, _ = self._first_layer(stream, point, features)
            res, hidden = res_layer(queries), []
            for attn, block, kv in zip(attns, blocks, cache[stream]):
                a = attn.attend_cache(queries, kv, index, key_mask=cache["key_mask"])
                queries = res = block(a, res)
                hidden.append(queries)
            outputs.append(queries)
            pending[stream] = hidden[:-1]
        return (outputs[0] if len(outputs) == 1 else tf.concat(outputs, -1)), pending

    def cached_append(self, cache, point, index, pending, features=None):
        """``cache`` with the keys/values of ``point`` (its y drawn) in slot ``index``."""
        cache = dict(cache)
        last = self.num_layers - 1
        for stream in self._active_streams():
            attns, _, _ = self._stream(stream)
            _, keys, y = self._first_layer(stream, point, features)
            inputs = [keys] + pending[stream]
            layers = []
            for i, (attn, kv) in enumerate(zip(attns, cache[stream])):
                values = y if stream == "x" and i == last else None
                layers.append(kv.write(index, *attn.key_value_heads(inputs[i], values)))
            cache[stream] = layers
        return cache

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y,
                "streams": self.streams, "layers": self.num_layers, "width": self.width,
                "num_heads": self.num_heads, "head_dim": self.head_dim, "ffn_width": self.ffn_width,
                "enc_dim": self.enc_dim, "min_wavelength": self.min_wavelength,
                "max_wavelength": self.max_wavelength, "dropout": self.dropout,
                "attention_x": self.attention_x, "attention_xy": self.attention_xy,
                "tile_size": self.tile_size}
