"""Encoders ``deepset`` (CNP) and ``transformer`` (TNP-D; also the trunk of TE-TNP and
BSA-TNP), kind ``encoder`` (protocol in ``docs/plugins.md``)."""
import keras
import tensorflow as tf

from taylorformer import components
from taylorformer.models.layers import MLP, masked_mean
from taylorformer.checks import check_bool, check_choice, check_size, check_widths

#: ``update_order`` of :class:`TransformerEncoder`
UPDATE_ORDERS = ("parallel", "context-first")


class DeepSetEncoder(keras.layers.Layer):
    """CNP: r = masked mean of MLP([xc, yc]); target rep = MLP([r, xt])."""

    def __init__(self, dim_x, dim_y, width=128, layers=3, **kwargs):
        super().__init__(**kwargs)
        width, layers = check_size("deepset encoder", "width", width), check_size("deepset encoder", "layers", layers)
        self.dim_x, self.dim_y, self.width, self.layers = dim_x, dim_y, width, layers
        self.output_dim = width
        self.encode = MLP(width, width, layers, name="encode")
        self.decode = MLP(width, width, layers, name="decode")

    def call(self, batch):
        r = masked_mean(self.encode(tf.concat([batch["xc"], batch["yc"]], -1)), batch["mask_c"])
        r = tf.tile(r[:, None, :], [1, tf.shape(batch["xt"])[1], 1])
        return self.decode(tf.concat([r, tf.cast(batch["xt"], r.dtype)], -1))

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y,
                "width": self.width, "layers": self.layers}


class TransformerEncoder(keras.layers.Layer):
    """TNP-D: per layer, context self-attention and target->context cross-attention.

    Pre-norm residual layers; one attention, its norms and its FFN per layer serve both the
    context and the targets (weights shared). ``update_order``:

    * ``"parallel"`` (TNP-D's masked transformer, where every row attends to the context
      only): the context and target queries go through one attention call against the
      layer's *input* context, exactly the masked Nc+Nt transformer at (Nc+Nt)*Nc instead
      of (Nc+Nt)^2 cost;
    * ``"context-first"`` (TE-TNP, App. F.1's "self-attention and cross-attention blocks",
      as the authors' ``TETNPTransformerEncoder`` runs them): the context's self-attention
      block first, then the targets attend to the layer's *updated* context.

    ``final_norm``: a LayerNorm on the target representations after the last layer (the
    default; App. F.1 of the TE-TNP paper and the authors' code have none).
    ``identical_initial_layers``: every layer starts with layer 0's initial weights (the
    authors' TE-TNP code deep-copies one layer, ``_get_clones``); they train apart.
    Tokens: MLP([x, y, 0]) for context and MLP([x, 0, 1]) for targets; with
    ``embed_x=False`` x is left out of the tokens and reaches the attention only as
    positions (translation-equivariant attention plugins need this).
    """

    #: the registry name in option errors (subclasses registered under another name set theirs)
    component_name = "transformer"

    def __init__(self, dim_x, dim_y, attention="mha-xy", layers=5, width=128, num_heads=8,
                 head_dim=16, ffn_width=None, embed_x=True, embed_widths=None, update_order="parallel",
                 final_norm=True, identical_initial_layers=False, **kwargs):
        super().__init__(**kwargs)
        owner = f"{self.component_name} encoder"
        self.update_order = check_choice(owner, "update_order", update_order, UPDATE_ORDERS)
        self.final_norm = check_bool(owner, "final_norm", final_norm)
        self.identical_initial_layers = check_bool(owner, "identical_initial_layers", identical_initial_layers)
        layers, width, num_heads, head_dim = (check_size(owner, k, v) for k, v in (
            ("layers", layers), ("width", width), ("num_heads", num_heads), ("head_dim", head_dim)))
        ffn_width = check_size(owner, "ffn_width", ffn_width, optional=True)
        embed_x = check_bool(owner, "embed_x", embed_x)
        if embed_widths is not None:
            embed_widths = check_widths(owner, "embed_widths", embed_widths, single=False)
        self.dim_x, self.dim_y, self.num_layers, self.width = dim_x, dim_y, layers, width
        self.num_heads, self.head_dim, self.embed_x = num_heads, head_dim, embed_x
        self.ffn_width = ffn_width or width
        self.attention_spec = components.normalize(attention, "encoder.attention")
        self.output_dim = width
        # token embedding: hidden widths embed_widths (default two layers of `width`)
        self.embed_widths = list(embed_widths) if embed_widths else [width, width]
        self.embed = MLP(width, self.embed_widths, name="embed")
        attn = {"num_heads": num_heads, "head_dim": head_dim, **self.attention_spec}
        self.attn = [components.build("attention", attn, "encoder.attention", output_dim=width)
                     for _ in range(layers)]
        self.norm1 = [keras.layers.LayerNormalization(epsilon=1e-5) for _ in range(layers)]
        self.norm2 = [keras.layers.LayerNormalization(epsilon=1e-5) for _ in range(layers)]
        self.ffn = [MLP(width, self.ffn_width, 1, name=f"ffn_{i}") for i in range(layers)]
        self.norm_out = keras.layers.LayerNormalization(epsilon=1e-5) if self.final_norm else None

    def tokens(self, batch):
        """Context and target tokens ``[B, Nc, width]``, ``[B, Nt, width]``."""
        yc, xt = batch["yc"], batch["xt"]
        zeros_t = tf.zeros(tf.concat([tf.shape(xt)[:2], [self.dim_y]], 0), yc.dtype)
        flag_c = tf.zeros_like(yc[..., :1])
        flag_t = tf.ones_like(zeros_t[..., :1])
        feat_c, feat_t = [batch["yc"], flag_c], [zeros_t, flag_t]
        if self.embed_x:
            feat_c, feat_t = [batch["xc"]] + feat_c, [xt] + feat_t
        return self.embed(tf.concat(feat_c, -1)), self.embed(tf.concat(feat_t, -1))

    def positions(self, batch):
        """Locations handed to the attention score: ``[B, Nc, P]``, ``[B, Nt, P]`` (x here)."""
        return batch["xc"], batch["xt"]

    def call(self, batch):
        ctx, tgt = self.tokens(batch)
        (xc, xt), mask_c = self.positions(batch), batch["mask_c"]
        if not self.embed_x:  # x only as positions (differences): centre them so float32
            ref = masked_mean(xc, mask_c)[:, None, :]  # location updates stay exact far from 0
            xc, xt = xc - ref, xt - ref
        return self.run_layers(ctx, tgt, xc, xt, mask_c)

    def run_layers(self, ctx, tgt, pc, pt, mask_c):
        """The residual layers on tokens ``ctx [B, Nc, D]``, ``tgt [B, Nt, D]`` with
        positions ``pc``, ``pt``; returns the target representations ``[B, Nt, D]``
        (:meth:`output_norm` applied).

        Context and targets are one sequence ``[B, Nc + Nt, D]`` throughout (norms and FFNs
        act per token): each layer slices the context's keys off it instead of joining
        queries and splitting outputs."""
        if self.update_order == "context-first":
            return self.run_layers_context_first(ctx, tgt, pc, pt, mask_c)
        nc = ctx.shape[1] if ctx.shape[1] is not None else tf.shape(ctx)[1]
        tokens, pos = tf.concat([ctx, tgt], 1), tf.concat([pc, pt], 1)
        for attn, norm1, norm2, ffn in zip(self.attn, self.norm1, self.norm2, self.ffn):
            queries = norm1(tokens)
            out = attn(queries, queries[:, :nc], q_pos=pos, k_pos=pos[:, :nc], key_mask=mask_c)
            if attn.updates_positions:  # an attention that moves locations (e.g. te)
                out, pos = out
            tokens = tokens + out
            tokens = tokens + ffn(norm2(tokens))
        return self.output_norm(tokens[:, nc:])

    def run_layers_context_first(self, ctx, tgt, pc, pt, mask_c):
        """:meth:`run_layers` with ``update_order="context-first"``: in each layer the context
        ``[B, Nc, D]`` goes through the self-attention block, then the targets ``[B, Nt, D]``
        through the cross-attention block against that updated context (its keys normalised
        by the same norm as the queries), with the same weights; moved locations move too."""
        for attn, norm1, norm2, ffn in zip(self.attn, self.norm1, self.norm2, self.ffn):
            keys = norm1(ctx)
            out = attn(keys, keys, q_pos=pc, k_pos=pc, key_mask=mask_c)
            new_pc = pc
            if attn.updates_positions:
                out, new_pc = out
            ctx = ctx + out
            ctx = ctx + ffn(norm2(ctx))
            keys = norm1(ctx)
            out = attn(norm1(tgt), keys, q_pos=pt, k_pos=new_pc, key_mask=mask_c)
            if attn.updates_positions:
                out, pt = out
            tgt = tgt + out
            tgt = tgt + ffn(norm2(tgt))
            pc = new_pc
        return self.output_norm(tgt)

    def finish_initialisation(self):
        """Called once the model's weights are drawn (:mod:`taylorformer.models.initialisation`):
        with ``identical_initial_layers``, layers 1.. take layer 0's weights."""
        if self.identical_initial_layers:
            for group in (self.attn, self.norm1, self.norm2, self.ffn):
                for layer in group[1:]:
                    layer.set_weights(group[0].get_weights())

    def output_norm(self, tgt):
        """The final LayerNorm of the target representations ``[B, Nt, D]`` (if any)."""
        return self.norm_out(tgt) if self.final_norm else tgt

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y,
                "attention": self.attention_spec, "layers": self.num_layers, "width": self.width,
                "num_heads": self.num_heads, "head_dim": self.head_dim,
                "ffn_width": self.ffn_width, "embed_x": self.embed_x, "embed_widths": self.embed_widths,
                "update_order": self.update_order, "final_norm": self.final_norm,
                "identical_initial_layers": self.identical_initial_layers}
