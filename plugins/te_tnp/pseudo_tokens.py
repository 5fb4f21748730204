"""Pseudo-token encoder for TE-PT-TNP, plugin ``pseudo-token`` (kind ``encoder``).

M learned pseudo-tokens summarise the context, so the cost is O(M (Nc + Nt)) instead of
O(Nc (Nc + Nt)). Tokens embed y and the context/target flag only (never x); the pseudo
tokens carry locations so that a translation-equivariant attention (``te``) can attend
between them and the data. Their initial locations are translation equivariant
(``init``):

``"mean"``
    learned offsets + the masked mean of the context locations;
``"attention"``
    learned offsets + a masked attention-weighted average of the context locations, the
    weights coming from the pseudo tokens (queries) and the context tokens (keys), never
    from x.

Styles (``style``), per layer, pre-norm residual blocks with a feed-forward block after
each attention:

``"ist"`` (induced set transformer)
    pseudo <- context; context and targets <- pseudo (one attention call, shared weights,
    as TNP-D shares context and target rows).
``"perceiver"``
    pseudo <- context; pseudo <- pseudo; targets <- pseudo. Context tokens stay fixed.

Locations enter only through differences, so they are first centred at the masked
context mean: this changes no difference, keeps float32 differences exact for inputs far
from the origin (e.g. shifted by 1e3), and keeps location updates (``te`` with
``location_update=True``; updated query locations are used by the next block) exact.
Padded context points are masked everywhere (keys, means, softmaxes).
"""
import keras
import tensorflow as tf

from taylorformer import components
from taylorformer.attention import attend, mha_score
from taylorformer.models.layers import MLP, masked_mean
from taylorformer.checks import check_choice, check_size

STYLES = ("ist", "perceiver")
INITS = ("mean", "attention")


class PseudoTokenEncoder(keras.layers.Layer):
    """TE-PT-TNP encoder: M pseudo-tokens with translation-equivariant locations."""

    def __init__(self, dim_x, dim_y, attention="te", num_pseudo=32, style="ist", init="mean",
                 layers=5, width=128, num_heads=8, head_dim=16, ffn_width=None, **kwargs):
        super().__init__(**kwargs)
        owner = "pseudo-token encoder"
        check_choice(owner, "style", style, STYLES)
        check_choice(owner, "init", init, INITS)
        num_pseudo, layers, width, num_heads, head_dim = (check_size(owner, k, v) for k, v in (
            ("num_pseudo", num_pseudo), ("layers", layers), ("width", width), ("num_heads", num_heads),
            ("head_dim", head_dim)))
        ffn_width = check_size(owner, "ffn_width", ffn_width, optional=True)
        self.dim_x, self.dim_y, self.num_pseudo, self.style, self.init = (
            dim_x, dim_y, num_pseudo, style, init)
        self.num_layers, self.width, self.num_heads, self.head_dim = layers, width, num_heads, head_dim
        self.ffn_width = ffn_width or width
        self.attention_spec = components.normalize(attention, "encoder.attention")
        self.output_dim = width
        self.embed = MLP(width, width, 2, name="embed")
        spec = {"num_heads": num_heads, "head_dim": head_dim, **self.attention_spec}

        def attn():
            return components.build("attention", spec, "encoder.attention", output_dim=width)

        def norm():
            return keras.layers.LayerNormalization(epsilon=1e-5)

        # role names: "pc" pseudo <- context, "xp" context/targets <- pseudo (ist),
        # "pp" pseudo <- pseudo, "tp" targets <- pseudo (perceiver)
        roles = ("pc", "xp") if style == "ist" else ("pc", "pp", "tp")
        self.roles = roles
        self.blocks = [{r: {"attn": attn(), "norm_q": norm(), "norm_k": norm(), "norm_f": norm(),
                            "ffn": MLP(width, self.ffn_width, 1, name=f"ffn_{i}_{r}")}
                        for r in roles} for i in range(layers)]
        self.norm_out = norm()
        if init == "attention":
            self.init_q = keras.layers.Dense(width, use_bias=False, name="init_q")
            self.init_k = keras.layers.Dense(width, use_bias=False, name="init_k")
            self.init_norm = norm()

    def build(self, batch_shape=None):
        self.pseudo = self.add_weight(shape=(self.num_pseudo, self.width),
                                      initializer=keras.initializers.RandomNormal(stddev=1.0),
                                      name="pseudo_tokens")
        self.offsets = self.add_weight(shape=(self.num_pseudo, self.dim_x),
                                       initializer=keras.initializers.RandomNormal(stddev=1.0),
                                       name="pseudo_offsets")

    def tokens(self, batch):
        yc, xt = batch["yc"], batch["xt"]
        zeros_t = tf.zeros(tf.concat([tf.shape(xt)[:2], [self.dim_y]], 0), yc.dtype)
        ctx = self.embed(tf.concat([yc, tf.zeros_like(yc[..., :1])], -1))
        tgt = self.embed(tf.concat([zeros_t, tf.ones_like(zeros_t[..., :1])], -1))
        return ctx, tgt

    def initial_locations(self, ctx, xc, mask_c):
        """Pseudo locations ``[B, M, Dx]`` (in the centred frame)."""
        b = tf.shape(xc)[0]
        offsets = tf.cast(self.offsets, tf.float32)[None]
        if self.init == "mean":
            return masked_mean(xc, mask_c)[:, None, :] + offsets
        q = self.init_q(tf.tile(tf.cast(self.pseudo, ctx.dtype)[None], [b, 1, 1]))[:, None]
        k = self.init_k(self.init_norm(ctx))[:, None]
        avg = attend(mha_score, q, k, xc[:, None], key_mask=mask_c)
        return avg[:, 0] + offsets

    @staticmethod
    def _attend(block, queries, keys, q_pos, k_pos, key_mask=None, query_mask=None):
        # query_mask lets an attention skip work on padded rows (te: the pair MLP)
        out = block["attn"](block["norm_q"](queries), block["norm_k"](keys), q_pos=q_pos,
                            k_pos=k_pos, key_mask=key_mask, query_mask=query_mask)
        if block["attn"].updates_positions:
            return out
        return out, q_pos

    @staticmethod
    def _ffn(block, z):
        return z + block["ffn"](block["norm_f"](z))

    def call(self, batch):
        ctx, tgt = self.tokens(batch)
        mask_c, mask_t = batch["mask_c"], batch["mask_t"]
        xc, xt = tf.cast(batch["xc"], tf.float32), tf.cast(batch["xt"], tf.float32)
        ref = masked_mean(xc, mask_c)[:, None, :]  # differences only: centre (see module doc)
        xc, xt = xc - ref, xt - ref
        b, nc = tf.shape(xc)[0], tf.shape(xc)[1]
        pseudo = tf.tile(tf.cast(self.pseudo, ctx.dtype)[None], [b, 1, 1])
        u = self.initial_locations(ctx, xc, mask_c)
        for block in self.blocks:
            out, u = self._attend(block["pc"], pseudo, ctx, u, xc, mask_c)
            pseudo = self._ffn(block["pc"], pseudo + out)
            if self.style == "ist":
                out, pos = self._attend(block["xp"], tf.concat([ctx, tgt], 1), pseudo,
                                        tf.concat([xc, xt], 1), u,
                                        query_mask=tf.concat([mask_c, mask_t], 1))
                xc, xt = pos[:, :nc], pos[:, nc:]
                ctx = self._ffn(block["xp"], ctx + out[:, :nc])
                tgt = self._ffn(block["xp"], tgt + out[:, nc:])
            else:
                out, u = self._attend(block["pp"], pseudo, pseudo, u, u)
                pseudo = self._ffn(block["pp"], pseudo + out)
                out, xt = self._attend(block["tp"], tgt, pseudo, xt, u, query_mask=mask_t)
                tgt = self._ffn(block["tp"], tgt + out)
        return self.norm_out(tgt)

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y,
                "attention": self.attention_spec, "num_pseudo": self.num_pseudo,
                "style": self.style, "init": self.init, "layers": self.num_layers,
                "width": self.width, "num_heads": self.num_heads, "head_dim": self.head_dim,
                "ffn_width": self.ffn_width}
