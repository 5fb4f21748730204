"""KRBlock encoder (``kr-block``, kind ``encoder``) of BSA-TNP.

KRBlock (Jenson et al. 2025, Sec. 4.1), pre-norm, one weight set per block::

    ctx' = ctx + Attn(LN(ctx), LN(ctx))        # context points attend to the context
    tgt' = tgt + Attn(LN(tgt), LN(ctx))        # test points attend to the context only
    ctx'' = ctx' + FFN(LN2(ctx')); tgt'' = tgt' + FFN(LN2(tgt'))    # the same FFN

Test points never attend to each other (or to themselves). Both attention calls are one
call of a shared attention layer on the query rows ``[ctx; tgt]`` against the context
keys, exactly :class:`~taylorformer.plugins.tnp.encoders.TransformerEncoder`'s layer, which
this class subclasses (``tokens``/``positions``/``call`` are overridden; the blocks,
norms, FFNs and their loop, ``run_layers``, are the parent's).

Feature groups (see :mod:`taylorformer.batch`): a batch may carry space ``sc``/``st`` and
time ``tc``/``tt``. ``positions`` picks what feeds the attention bias:

``"auto"`` (default)
    ``concat([sc, tc])`` / ``concat([st, tt])`` (space first; whichever are present)
    when the batch carries a group, else ``xc`` / ``xt`` (GP-style tasks put the
    locations in x).
``"x"``
    always ``xc`` / ``xt``.
``"groups"``
    always the groups. A batch without them (e.g. the builder's dummy batch) gets zero
    positions of width ``position_dim`` (default: what the attention's bias groups need).

When the positions come from the groups, x holds *fixed effects*: they are embedded in
the tokens (and can also be used as a bias group if given as positions by the task).
When the positions are x, x is NOT embedded: tokens see only y and the context/target
flag, so predictions are invariant to translations of the locations (and, with
distance-only biases, to rotations; with a geodesic bias, to rotations of the sphere).
``embed_positions=True`` also embeds the positions (the paper's "embed + bias" variant
for partly stationary data), which breaks the invariance on purpose.

Token layout (fixed, so the layer builds the same way whichever mode a batch triggers):
``MLP([x_slot (dim_x), y (dim_y), flag (1), positions (position width, only with
embed_positions)])``, the x slot holding the fixed effects or zeros. The embedding MLP
has hidden widths ``embed_widths`` (paper: 256, 128) and output ``width`` (64). The paper
embeds each feature group separately before a joint MLP; with linear per-group
embeddings that is the same function class as this MLP on the concatenation.

Positions are not centred: the bias uses per-pair differences (exact for nearby float32
values) or geodesic distances, which centring in lat/lon would corrupt.
"""
import tensorflow as tf

from taylorformer.errors import BatchError, SpecError
from taylorformer.checks import check_bool, check_choice, check_size
from taylorformer.plugins.tnp.encoders import TransformerEncoder

from .attention import required_position_dim

POSITION_MODES = ("auto", "x", "groups")
SPACE_TIME = (("sc", "st"), ("tc", "tt"))


class KRBlockEncoder(TransformerEncoder):
    """BSA-TNP encoder: embedding MLP, a stack of KRBlocks with biased attention."""

    component_name = "kr-block"

    def __init__(self, dim_x, dim_y, attention="biased", layers=6, width=64, num_heads=4,
                 head_dim=32, ffn_width=256, embed_widths=(256, 128), positions="auto",
                 position_dim=None, embed_positions=False, **kwargs):
        super().__init__(dim_x, dim_y, attention=attention, layers=layers, width=width,
                         num_heads=num_heads, head_dim=head_dim, ffn_width=ffn_width,
                         embed_x=False, embed_widths=embed_widths, **kwargs)
        check_choice("kr-block encoder", "positions", positions, POSITION_MODES)
        position_dim = check_size("kr-block encoder", "position_dim", position_dim, optional=True)
        self.positions_mode = positions
        self.embed_positions = check_bool("kr-block encoder", "embed_positions", embed_positions)
        if position_dim is None and self.attention_spec.get("name") in ("biased", "biased-attention"):
            position_dim = required_position_dim(self.attention_spec.get("groups"))
        self.position_dim = position_dim
        if positions == "groups" and position_dim is None:
            raise SpecError("kr-block encoder: positions='groups' needs position_dim (or bias "
                             "groups with explicit dims) to build without the groups in the batch")

    # ------------------------------------------------------------------ feature groups
    @staticmethod
    def has_groups(batch):
        return any(batch.get(c) is not None for c, _ in SPACE_TIME)

    def uses_groups(self, batch):
        """Do this batch's positions come from the feature groups (x = fixed effects)?"""
        if self.positions_mode == "auto":
            return self.has_groups(batch)
        return self.positions_mode == "groups"

    def positions(self, batch):
        """float32 positions ``[B, Nc, P]``, ``[B, Nt, P]`` fed to the attention bias."""
        if not self.uses_groups(batch):
            return tf.cast(batch["xc"], tf.float32), tf.cast(batch["xt"], tf.float32)
        if not self.has_groups(batch):  # e.g. the builder's dummy batch
            zeros = lambda x: tf.zeros(tf.concat([tf.shape(x)[:2], [self.position_dim]], 0))  # noqa: E731
            return zeros(batch["xc"]), zeros(batch["xt"])
        ctx, tgt = [], []
        for c_key, t_key in SPACE_TIME:
            if batch.get(c_key) is not None:
                if batch.get(t_key) is None:
                    raise BatchError(f"batch has {c_key!r} but no {t_key!r}")
                ctx.append(tf.cast(batch[c_key], tf.float32))
                tgt.append(tf.cast(batch[t_key], tf.float32))
        if len(ctx) == 1:
            return ctx[0], tgt[0]
        return tf.concat(ctx, -1), tf.concat(tgt, -1)

    def tokens(self, batch, positions=None):
        """Context and target tokens ``[B, Nc, width]``, ``[B, Nt, width]``."""
        yc, xc, xt = batch["yc"], batch["xc"], batch["xt"]
        dtype = yc.dtype
        zeros_t = tf.zeros(tf.concat([tf.shape(xt)[:2], [self.dim_y]], 0), dtype)
        if self.uses_groups(batch):  # x = fixed effects
            fx_c, fx_t = tf.cast(xc, dtype), tf.cast(xt, dtype)
        else:  # x = locations: never embedded directly
            fx_c, fx_t = tf.zeros_like(tf.cast(xc, dtype)), tf.zeros_like(tf.cast(xt, dtype))
        feat_c = [fx_c, yc, tf.zeros_like(yc[..., :1])]
        feat_t = [fx_t, zeros_t, tf.ones_like(zeros_t[..., :1])]
        if self.embed_positions:
            pc, pt = positions if positions is not None else self.positions(batch)
            width = self.position_dim or self.dim_x
            if pc.shape[-1] is not None and pc.shape[-1] != width:
                raise SpecError(f"kr-block encoder: embed_positions=True embeds positions of width "
                                 f"{width} (position_dim) but this batch has {pc.shape[-1]}; set "
                                 "position_dim (and positions='groups' for grouped batches)")
            feat_c.append(tf.cast(pc, dtype))
            feat_t.append(tf.cast(pt, dtype))
        return self.embed(tf.concat(feat_c, -1)), self.embed(tf.concat(feat_t, -1))

    # ------------------------------------------------------------------ call
    def call(self, batch):
        pc, pt = self.positions(batch)
        ctx, tgt = self.tokens(batch, (pc, pt))
        return self.run_layers(ctx, tgt, pc, pt, batch["mask_c"])

    def get_config(self):
        config = super().get_config()
        config.pop("embed_x", None)
        return {**config, "embed_widths": self.embed_widths, "positions": self.positions_mode,
                "position_dim": self.position_dim, "embed_positions": self.embed_positions}
