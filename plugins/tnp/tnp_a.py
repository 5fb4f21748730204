"""TNP-A encoder (``tnp-a``, kind ``encoder``): the autoregressive TNP (Nguyen & Grover 2022).

Doubled sequence ``[context; targets with y; targets with y = 0]`` of Nc + 2Nt tokens,
tokens ``MLP([x, y, flag])`` (flag 1 on the zero-y copies). A real target copy j attends
to the context and real targets <= j; the zero-y copy of i attends to the context and
real targets < i; predictions are read from the zero-y copies. Zero-y copies are never
keys, so each layer computes (Nc + 2Nt) x (Nc + Nt) scores. Pre-norm residual layers (as
the ``transformer``/TNP-D encoder). The encoder is *causal* (``causal = True``): one
teacher-forced pass gives every conditional of the chain rule. With a LocalTaylor wrapper
its features are folded into x and y (generic wrapping). Cached decoding
(:mod:`taylorformer.models.decoding`): per layer a key/value cache of the context and real
target tokens; a sampling step runs the new target's zero-y copy, then its real copy.
"""
import keras
import tensorflow as tf

from taylorformer import components
from taylorformer.models import decoding
from taylorformer.models.layers import MLP
from taylorformer.checks import check_number, check_size


def tnpa_pair_mask(nc, nt):
    """TNP-A: queries over Nc + 2Nt tokens, keys over the first Nc + Nt (context, real)."""
    def allowed(q, k):
        q, k = q[:, None], k[None, :]
        real_q = (q >= nc) & (q < nc + nt)
        fake_q = q >= nc + nt
        kr = k - nc
        return (k < nc) | ((k < nc + nt) & ((real_q & (kr <= q - nc)) | (fake_q & (kr < q - nc - nt))))
    return allowed


class TNPAEncoder(keras.layers.Layer):
    """TNP-A: masked transformer over [context; targets with y; targets with y = 0]."""

    causal = True

    def __init__(self, dim_x, dim_y, attention="mha-xy", layers=6, width=64, num_heads=4,
                 head_dim=16, ffn_width=128, dropout=0.0, **kwargs):
        kwargs.setdefault("autocast", False)  # the batch stays float32; Dense sublayers autocast
        super().__init__(**kwargs)
        layers, width, num_heads, head_dim, ffn_width = (check_size("tnp-a encoder", k, v) for k, v in (
            ("layers", layers), ("width", width), ("num_heads", num_heads), ("head_dim", head_dim),
            ("ffn_width", ffn_width)))
        dropout = check_number("tnp-a encoder", "dropout", dropout, low=0, high=1, high_open=True)
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

    # ------------------------------------------------------------------ cached decoding
    # (protocol: taylorformer.models.decoding). The cache holds each layer's key/value heads of
    # the context and real target tokens (slots [0, Nc + Nt)); step t runs target t's
    # zero-y copy against the slots before nc + t, then (after the draw) its real copy,
    # which writes its own slot first and attends to the slots up to and including it.
    def _token_layers(self, h, cache, length, index=None):
        """Tokens ``h [B, n, width]`` through every layer against ``cache`` (first ``length``
        slots); with ``index``, each layer first writes the tokens' keys/values at ``index``.
        Returns ``(h, cache layers)``."""
        layers = []
        for attn, norm1, norm2, ffn, kv in zip(self.attn, self.norm1, self.norm2, self.ffn, cache["layers"]):
            q = norm1(h)
            if index is not None:
                kv = kv.write(index, *attn.key_value_heads(q))
            h = h + attn.attend_cache(q, kv, length, key_mask=cache["key_mask"])
            h = h + ffn(norm2(h))
            layers.append(kv)
        return h, layers

    def _embed(self, batch, flag):
        """Tokens ``MLP([x, y, flag])`` of the target points of ``batch``."""
        xt, yt = tf.cast(batch["xt"], tf.float32), tf.cast(batch["yt"], tf.float32)
        return self.embed(tf.concat([xt, yt, tf.fill(tf.shape(yt[..., :1]), float(flag))], -1))

    def start_cache(self, batch, features=None):
        """Cache with the context tokens' keys/values in every layer."""
        nc, nt = tf.shape(batch["xc"])[1], batch["mask_t"].shape[1]
        xc, yc = tf.cast(batch["xc"], tf.float32), tf.cast(batch["yc"], tf.float32)
        h = self.embed(tf.concat([xc, yc, tf.zeros_like(yc[..., :1])], -1))
        cache = {"key_mask": tf.concat([batch["mask_c"], batch["mask_t"]], 1), "layers": []}
        for attn, norm1, norm2, ffn in zip(self.attn, self.norm1, self.norm2, self.ffn):
            q = norm1(h)
            kv = decoding.KeyValueCache.start(*attn.key_value_heads(q), nt)
            h = h + attn.attend_cache(q, kv, nc, key_mask=cache["key_mask"])
            h = h + ffn(norm2(h))
            cache["layers"].append(kv)
        return cache

    def cached_query(self, cache, point, index, features=None):
        """Representation ``[B, 1, width]`` of the zero-y copy of the target in ``point``."""
        h, _ = self._token_layers(self._embed({**point, "yt": tf.zeros_like(point["yt"])}, 1.0),
                                  cache, index)
        return self.norm_out(h), {}

    def cached_append(self, cache, point, index, pending, features=None):
        """``cache`` with the real copy of ``point`` (its y drawn) in slot ``index``."""
        _, layers = self._token_layers(self._embed(point, 0.0), cache, index + 1, index=index)
        return {**cache, "layers": layers}

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y,
                "attention": self.attention_spec, "layers": self.num_layers, "width": self.width,
                "num_heads": self.num_heads, "head_dim": self.head_dim,
                "ffn_width": self.ffn_width, "dropout": self.dropout}
