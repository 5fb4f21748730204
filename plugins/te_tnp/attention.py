"""Translation-equivariant attention (TE-TNP), plugin ``te`` (kind ``attention``).

Logits of a (query n, key m) pair depend on the tokens and on the relative location
``x_n - x_m`` only, never on absolute locations, so a model whose tokens never see x
(``TransformerEncoder(embed_x=False)``, ``PseudoTokenEncoder``) is translation
equivariant. Forms (``form``):

``"post"`` (default, TE-TNP / thesis eq. 6.2.3)
    logits_nm = MLP([q_n.k_m / sqrt(d) for every head, rel(x_n, x_m)]) -> one logit per
    head. The MLP (``kernel_layers`` x ``kernel_width``, ReLU) is the hot spot: it runs
    on every pair.
``"pre"`` (thesis eq. 4.4.3)
    logits_nm = q_n.k_m / sqrt(d) + F(rel(x_n, x_m)) with ``relative`` F:
    ``"identity"`` (a linear map to the heads, no bias, initialised to ones: F = Delta in
    1-D), ``"rbf"`` (a_h exp(-||Delta / sigma_h||^2 / 2), a_h and sigma_h learned per head,
    sigma initialised to ``rbf_lengthscale``) or ``"mlp"`` (MLP(Delta) -> heads).

``distance="difference"`` feeds rel = x_n - x_m; ``"norm"`` feeds ||x_n - x_m||_2, which
makes the logits invariant to rotations (and reflections) of the locations too.

``location_update=True``: the layer also moves its query locations,
``x_n <- x_n + mean_m[(x_n - x_m) * phi(a_nm)]`` over the allowed keys m, with a_nm the
attention weights of all heads and phi a small MLP (``phi_width``, ``phi_layers``) to one
scalar (so the update is rotation equivariant); the layer then has
``updates_positions = True`` and returns ``(out, new_q_pos)``. The update is the
attention contract's ``position_update``: the shared executor computes it densely or
tile by tile, next to the attention (its weights need each row's softmax normaliser).

Numerics: x_n - x_m is formed per pair from the float32 locations, which is exact for
locations of similar magnitude (Sterbenz), so a shift by 1e3 of float32 inputs that
represent the shifted values exactly changes nothing. (Not forming it as a separable
sum W x_n - W x_m: at |x| ~ 1e3 that loses ~1e-4 to cancellation, and with a 1-D or
2-D x the per-pair term costs only Dx x width multiply-adds next to the width x width
hidden layer.) The returned locations ``x_n + update`` are rounded at the magnitude of
x_n, so encoders centre locations first (TransformerEncoder with ``embed_x=False`` and
PseudoTokenEncoder do). Positions stay float32 under mixed precision.

Speed: the pair MLP's width x width layer is the hot spot (about 90% of the FLOPs at
the paper's size). ``skip_masked_pairs=True`` (default) runs the MLP only on pairs whose
key is real and, when the caller passes ``query_mask`` (PseudoTokenEncoder does), whose
query is real (gather, MLP, scatter): the executor hands the score each tile's
validity. This skips the padding of variable-size context sets (about half the pairs of
the TE-TNP GP protocol); off automatically under XLA (no data-dependent shapes there).
``kernel_dtype="bfloat16"`` runs the pair MLP in bfloat16 (2x on its big matmul on CPUs
with AVX512-BF16, ~20% less CPU for inference overall, no gain for training; the relative
features are exact before the cast, so equivariance stays exact; default: the layer's
compute dtype).

Memory: the pairwise MLP never sees more than one tile of pairs at a time when the
problem is large: ``pair_floats`` tells the executor's tiling rule that the score holds
about ``kernel_width + num_heads`` floats per pair, which gives tiles of 128 x 128 at
batch 1 (~8 MB per [pairs, 128] float32 intermediate); an int ``tile_size`` forces tiles
of that size.
"""
import math

import keras
import tensorflow as tf

from taylorformer.attention import Attention
from taylorformer.errors import SpecError
from taylorformer.checks import check_bool, check_choice, check_number, check_size
from taylorformer.tf_compat import in_xla_context

FORMS = ("post", "pre")
RELATIVE_FUNCTIONS = ("mlp", "rbf", "identity")
DISTANCES = ("difference", "norm")


def relative_features(xq, xk, distance="difference"):
    """``[B, Nq, P]``, ``[B, Nk, P]`` -> float32 ``[B, Nq, Nk, F]``: x_q - x_k (F = P) or
    ||x_q - x_k||_2 (F = 1; gradient 0 at coincident points instead of NaN)."""
    xq, xk = tf.cast(xq, tf.float32), tf.cast(xk, tf.float32)
    diff = xq[:, :, None, :] - xk[:, None, :, :]
    if distance == "difference":
        return diff
    sq = tf.reduce_sum(tf.square(diff), -1, keepdims=True)
    pos = sq > 0
    return tf.where(pos, tf.sqrt(tf.where(pos, sq, 1.0)), 0.0)


class PairMLP(keras.layers.Layer):
    """ReLU MLP ``[..., d_in] -> [..., output_dim]`` applied to a flattened pair tensor.

    One 2-D matmul + bias (+ ReLU) per layer, a shape oneDNN fuses; ``zero_output`` starts
    the last layer at zero.
    """

    def __init__(self, output_dim, width=128, hidden_layers=2, zero_output=False, **kwargs):
        super().__init__(**kwargs)
        self.output_dim, self.width, self.hidden_layers = output_dim, width, hidden_layers
        self.zero_output = zero_output

    def build(self, input_shape):
        d_in = int(input_shape[-1])
        self.params = []
        for i in range(self.hidden_layers):
            self.params.append((
                self.add_weight(shape=(d_in, self.width), initializer="glorot_uniform", name=f"w{i}"),
                self.add_weight(shape=(self.width,), initializer="zeros", name=f"b{i}")))
            d_in = self.width
        init = "zeros" if self.zero_output else "glorot_uniform"
        self.params.append((
            self.add_weight(shape=(d_in, self.output_dim), initializer=init, name="w_out"),
            self.add_weight(shape=(self.output_dim,), initializer="zeros", name="b_out")))

    def apply(self, x, dtype=None):
        """Forward on any leading shape, in ``dtype`` (default ``x``'s dtype)."""
        lead = tf.shape(x)[:-1]
        h = tf.reshape(x if dtype is None else tf.cast(x, dtype), [-1, x.shape[-1]])
        for i, (w, b) in enumerate(self.params):
            h = tf.nn.bias_add(tf.matmul(h, tf.cast(w, h.dtype)), tf.cast(b, h.dtype))
            if i < len(self.params) - 1:
                h = tf.nn.relu(h)
        return tf.reshape(h, tf.concat([lead, [self.output_dim]], 0))

    def call(self, x):
        return self.apply(x)

    def linear_weights(self):
        """The ``(kernel, bias)`` pairs a model's ``init`` scheme re-draws
        (:mod:`taylorformer.models.initialisation`)."""
        return list(self.params)

    def get_config(self):
        return {**super().get_config(), "output_dim": self.output_dim, "width": self.width,
                "hidden_layers": self.hidden_layers, "zero_output": self.zero_output}


class TEAttention(Attention):
    """Translation-equivariant multi-head attention (TE-TNP): logits from tokens and x_q - x_k."""

    def __init__(self, output_dim, num_heads=8, head_dim=16, tile_size=None, form="post",
                 relative="mlp", distance="difference", kernel_width=128, kernel_layers=2,
                 rbf_lengthscale=1.0, location_update=False, phi_width=16, phi_layers=1,
                 kernel_dtype=None, skip_masked_pairs=True, **kwargs):
        super().__init__(output_dim, num_heads=num_heads, head_dim=head_dim,
                         tile_size=tile_size, **kwargs)
        owner = "te attention"
        for name, value, allowed in (("form", form, FORMS), ("relative", relative, RELATIVE_FUNCTIONS),
                                     ("distance", distance, DISTANCES),
                                     ("kernel_dtype", kernel_dtype, (None, "float32", "bfloat16", "float16"))):
            check_choice(owner, name, value, allowed)
        if form == "post" and relative != "mlp":
            raise SpecError("te attention: form='post' always uses an MLP of [dots, rel]; "
                            f"relative={relative!r} needs form='pre'")
        self.form, self.relative, self.distance = form, relative, distance
        self.kernel_width = check_size(owner, "kernel_width", kernel_width)
        self.kernel_layers = check_size(owner, "kernel_layers", kernel_layers, minimum=0)
        self.rbf_lengthscale = check_number(owner, "rbf_lengthscale", rbf_lengthscale, low=0, low_open=True)
        self.location_update = check_bool(owner, "location_update", location_update)
        self.phi_width = check_size(owner, "phi_width", phi_width)
        self.phi_layers = check_size(owner, "phi_layers", phi_layers, minimum=0)
        self.kernel_dtype = kernel_dtype
        self.skip_masked_pairs = check_bool(owner, "skip_masked_pairs", skip_masked_pairs)
        self.updates_positions = self.location_update
        self.scale = 1.0 / math.sqrt(head_dim)
        self.kernel = (PairMLP(num_heads, kernel_width, kernel_layers, name="kernel")
                       if form == "post" or relative == "mlp" else None)
        self.phi = PairMLP(1, phi_width, phi_layers, name="phi") if self.location_update else None

    # ------------------------------------------------------------------ the contract
    def build_score(self, q_pos_shape):
        position_dim = self.position_dim(q_pos_shape)
        num_rel = position_dim if self.distance == "difference" else 1
        self.num_rel = num_rel
        if self.form == "post":
            self.kernel.build((self.num_heads + num_rel,))
        elif self.relative == "mlp":
            self.kernel.build((num_rel,))
        elif self.relative == "identity":
            self.rel_linear = self.add_weight(shape=(num_rel, self.num_heads), initializer="ones",
                                              name="rel_linear")
        else:  # rbf
            self.rbf_amplitude = self.add_weight(shape=(self.num_heads,), initializer="ones",
                                                 name="rbf_amplitude")
            self.rbf_log_lengthscale = self.add_weight(
                shape=(num_rel, self.num_heads),
                initializer=keras.initializers.Constant(math.log(self.rbf_lengthscale)),
                name="rbf_log_lengthscale")
        if self.phi is not None:
            self.phi.build((self.num_heads,))

    def position_features(self, positions):
        """Locations as float32 (relative features are formed per pair from them)."""
        if positions is None:
            raise SpecError("te attention needs query and key locations (q_pos, k_pos)")
        return tf.cast(positions, tf.float32)

    def pair_floats(self):
        """Per pair: the pair MLP's hidden layer and the logits (or the bias terms)."""
        return (self.kernel_width if self.kernel is not None else 2 * self.num_heads) + self.num_heads

    def score(self, q, k, q_pos, k_pos, q_valid, k_valid):
        """Logits ``[B, H, tq, tk]`` of query tile ``q [B, H, tq, d]`` vs key tile ``k``.

        With ``skip_masked_pairs`` (outside XLA) the pair MLP runs only on the pairs of a
        valid key and a valid query (``k_valid``/``q_valid``: gathered, then scattered
        back; the other logits are 0: masked keys are masked by the executor, padded
        query rows are garbage that nothing reads), which skips the padding of
        variable-size sets.
        """
        if not self.skip_masked_pairs or in_xla_context():
            q_valid = k_valid = None
        dtype = q.dtype
        rel = relative_features(q_pos, k_pos, self.distance)  # [B, tq, tk, F] float32
        dots = tf.matmul(q, k, transpose_b=True) * tf.cast(self.scale, dtype)  # [B,H,tq,tk]
        if self.form == "post":
            feats = tf.concat([tf.transpose(tf.cast(dots, tf.float32), [0, 2, 3, 1]), rel], -1)
            logits = self._pair_kernel(feats, q_valid, k_valid, dtype)
            return tf.transpose(tf.cast(logits, dtype), [0, 3, 1, 2])
        if self.relative == "mlp":
            bias = tf.cast(self._pair_kernel(rel, q_valid, k_valid, dtype), dtype)
        elif self.relative == "identity":
            bias = tf.einsum("bqkf,fh->bqkh", tf.cast(rel, dtype), tf.cast(self.rel_linear, dtype))
        else:
            inv = tf.exp(-tf.cast(self.rbf_log_lengthscale, tf.float32))  # [F, H]
            sq = tf.einsum("bqkf,fh->bqkh", tf.square(rel), tf.square(inv))
            bias = tf.cast(tf.cast(self.rbf_amplitude, tf.float32) * tf.exp(-0.5 * sq), dtype)
        return dots + tf.transpose(bias, [0, 3, 1, 2])

    def _pair_kernel(self, feats, q_valid, k_valid, dtype):
        """``self.kernel`` on ``feats [B, tq, tk, F]``, only on valid (query, key) pairs."""
        hidden = self.kernel_dtype or dtype
        if q_valid is None and k_valid is None:
            return self.kernel.apply(feats, hidden)
        shape = tf.shape(feats)
        valid = tf.ones(shape[:3], tf.bool)
        if k_valid is not None:
            valid = tf.logical_and(valid, k_valid[:, None, :])
        if q_valid is not None:
            valid = tf.logical_and(valid, q_valid[:, :, None])

        def sparse():
            flat = tf.reshape(feats, [-1, feats.shape[-1]])
            idx = tf.where(tf.reshape(valid, [-1]))
            out = self.kernel.apply(tf.gather_nd(flat, idx), hidden)
            out = tf.scatter_nd(idx, out, tf.cast(tf.stack([tf.size(valid), self.num_heads]), tf.int64))
            return tf.reshape(out, tf.concat([shape[:3], [self.num_heads]], 0))

        return tf.cond(tf.reduce_all(valid), lambda: self.kernel.apply(feats, hidden), sparse)

    def position_update(self, weights, q_pos, k_pos):
        """``(x_n - x_m) * phi(a_nm)``: float32 ``[B, tq, tk, P]`` from the attention weights
        ``[B, H, tq, tk]`` of every head (the executor averages it over allowed keys)."""
        attn = tf.transpose(weights, [0, 2, 3, 1])  # [B, tq, tk, H]
        phi = tf.cast(self.phi.apply(tf.cast(attn, self.compute_dtype))[..., 0], tf.float32)
        return relative_features(q_pos, k_pos, "difference") * phi[..., None]

    def get_config(self):
        return {**super().get_config(), "form": self.form, "relative": self.relative,
                "distance": self.distance, "kernel_width": self.kernel_width,
                "kernel_layers": self.kernel_layers, "rbf_lengthscale": self.rbf_lengthscale,
                "location_update": self.location_update, "phi_width": self.phi_width,
                "phi_layers": self.phi_layers, "kernel_dtype": self.kernel_dtype,
                "skip_masked_pairs": self.skip_masked_pairs}
