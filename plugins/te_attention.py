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
``updates_positions = True`` and returns ``(out, new_q_pos)``. Its weights need the
softmax normaliser of every row: :func:`location_update` computes it in its own tiled
passes (online logsumexp, then the update; backward by recomputation).

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
key is real and, when the caller passes ``query_mask`` (an optional extension of the
attention protocol; PseudoTokenEncoder does), whose query is real (gather, MLP,
scatter). This skips the padding of variable-size context sets (about half the pairs of
the TE-TNP GP protocol); off automatically under XLA (no data-dependent shapes there).
``kernel_dtype="bfloat16"`` runs the pair MLP in bfloat16 (2x on its big matmul on CPUs
with AVX512-BF16, ~20% less CPU for inference overall, no gain for training; the relative
features are exact before the cast, so equivariance stays exact; default: the layer's
compute dtype).

Memory: the pairwise MLP never sees more than one tile of pairs at a time when the
problem is large: ``tile_size=None`` runs densely while ``B * Nq * Nk <= dense_pairs``
(static shapes) and otherwise through the shared executor's tiled path with tiles of
about ``TILE_PAIRS`` pairs (128 x 128 at batch 1: ~8 MB per [pairs, 128] float32
intermediate); an int ``tile_size`` forces tiles of that size.
"""
import math

import keras
import tensorflow as tf
# stop_recording keeps an outer tape from storing the tiled forward's intermediates
# (the custom gradient recomputes them), as in taylorformer.attention_executor.
from tensorflow.python.eager import record

from taylorformer import attention_executor
from taylorformer.attention_executor import (dims, key_validity, loop, num_tiles, pair_validity,
                                             tensor_array, tile_axis, tile_len, untile_axis)
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl

FORMS = ("post", "pre")
RELATIVE_FUNCTIONS = ("mlp", "rbf", "identity")
DISTANCES = ("difference", "norm")
#: dense (one [B, Nq, Nk, width] block) while B * Nq * Nk is at most this
DENSE_PAIRS = 1 << 18
#: tiled: B * tile * tile is about this many pairs per block
TILE_PAIRS = 1 << 14
_NEG = -1e30


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

    def get_config(self):
        return {**super().get_config(), "output_dim": self.output_dim, "width": self.width,
                "hidden_layers": self.hidden_layers, "zero_output": self.zero_output}


class TEAttention(Attention):
    """Translation-equivariant multi-head attention (TE-TNP): logits from tokens and x_q - x_k."""

    def __init__(self, output_dim, num_heads=8, head_dim=16, tile_size=None, form="post",
                 relative="mlp", distance="difference", kernel_width=128, kernel_layers=2,
                 rbf_lengthscale=1.0, location_update=False, phi_width=16, phi_layers=1,
                 dense_pairs=DENSE_PAIRS, kernel_dtype=None, skip_masked_pairs=True, **kwargs):
        super().__init__(output_dim, num_heads=num_heads, head_dim=head_dim,
                         tile_size=tile_size, **kwargs)
        for name, value, allowed in (("form", form, FORMS), ("relative", relative, RELATIVE_FUNCTIONS),
                                     ("distance", distance, DISTANCES)):
            if value not in allowed:
                raise ValueError(f"te attention: {name} must be one of {allowed}, got {value!r}")
        if form == "post" and relative != "mlp":
            raise ValueError("te attention: form='post' always uses an MLP of [dots, rel]; "
                             f"relative={relative!r} needs form='pre'")
        if tile_size is not None and not (isinstance(tile_size, int) and tile_size > 0):
            raise ValueError(f"te attention: tile_size must be None or a positive int, got {tile_size!r}")
        self.form, self.relative, self.distance = form, relative, distance
        self.kernel_width, self.kernel_layers = kernel_width, kernel_layers
        self.rbf_lengthscale = float(rbf_lengthscale)
        self.location_update, self.phi_width, self.phi_layers = bool(location_update), phi_width, phi_layers
        self.dense_pairs = int(dense_pairs)
        if kernel_dtype not in (None, "float32", "bfloat16", "float16"):
            raise ValueError(f"te attention: kernel_dtype must be None, 'float32', 'bfloat16' or "
                             f"'float16', got {kernel_dtype!r}")
        self.kernel_dtype = kernel_dtype
        self.skip_masked_pairs = bool(skip_masked_pairs)
        self.updates_positions = self.location_update
        self.scale = 1.0 / math.sqrt(head_dim)
        self.kernel = (PairMLP(num_heads, kernel_width, kernel_layers, name="kernel")
                       if form == "post" or relative == "mlp" else None)
        self.phi = PairMLP(1, phi_width, phi_layers, name="phi") if self.location_update else None

    # ------------------------------------------------------------------ build
    def build(self, queries_shape, keys_shape, q_pos_shape=None, k_pos_shape=None):
        position_dim = self.position_dim(q_pos_shape)
        super().build(queries_shape, keys_shape)
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

    # ------------------------------------------------------------------ score
    def score(self, q, k, q_pos, k_pos, key_valid=None, query_valid=None):
        """Logits ``[B, H, tq, tk]`` of query tile ``q [B, H, tq, d]`` vs key tile ``k``.

        ``key_valid [B, tk]``, ``query_valid [B, tq]`` (optional, bool): the pair MLP then
        runs only on the pairs of a real key and a real query (gathered, then scattered
        back; the other logits are 0: masked keys are masked by the executor, padded
        query rows are garbage that nothing reads), which skips the padding of
        variable-size sets.
        """
        dtype = q.dtype
        rel = relative_features(q_pos, k_pos, self.distance)  # [B, tq, tk, F] float32
        dots = tf.matmul(q, k, transpose_b=True) * tf.cast(self.scale, dtype)  # [B,H,tq,tk]
        if self.form == "post":
            feats = tf.concat([tf.transpose(tf.cast(dots, tf.float32), [0, 2, 3, 1]), rel], -1)
            logits = self._pair_kernel(feats, key_valid, query_valid, dtype)
            return tf.transpose(tf.cast(logits, dtype), [0, 3, 1, 2])
        if self.relative == "mlp":
            bias = tf.cast(self._pair_kernel(rel, key_valid, query_valid, dtype), dtype)
        elif self.relative == "identity":
            bias = tf.einsum("bqkf,fh->bqkh", tf.cast(rel, dtype), tf.cast(self.rel_linear, dtype))
        else:
            inv = tf.exp(-tf.cast(self.rbf_log_lengthscale, tf.float32))  # [F, H]
            sq = tf.einsum("bqkf,fh->bqkh", tf.square(rel), tf.square(inv))
            bias = tf.cast(tf.cast(self.rbf_amplitude, tf.float32) * tf.exp(-0.5 * sq), dtype)
        return dots + tf.transpose(bias, [0, 3, 1, 2])

    def _pair_kernel(self, feats, key_valid, query_valid, dtype):
        """``self.kernel`` on ``feats [B, tq, tk, F]``, only on valid (query, key) pairs."""
        hidden = self.kernel_dtype or dtype
        if key_valid is None and query_valid is None:
            return self.kernel.apply(feats, hidden)
        shape = tf.shape(feats)
        valid = tf.ones(shape[:3], tf.bool)
        if key_valid is not None:
            valid = tf.logical_and(valid, tf.cast(key_valid, tf.bool)[:, None, :])
        if query_valid is not None:
            valid = tf.logical_and(valid, tf.cast(query_valid, tf.bool)[:, :, None])

        def sparse():
            flat = tf.reshape(feats, [-1, feats.shape[-1]])
            idx = tf.where(tf.reshape(valid, [-1]))
            out = self.kernel.apply(tf.gather_nd(flat, idx), hidden)
            out = tf.scatter_nd(idx, out, tf.cast(tf.stack([tf.size(valid), self.num_heads]), tf.int64))
            return tf.reshape(out, tf.concat([shape[:3], [self.num_heads]], 0))

        return tf.cond(tf.reduce_all(valid), lambda: self.kernel.apply(feats, hidden), sparse)

    def _masked_score(self, with_query_mask, with_key_mask):
        """:meth:`score` for locations that carry their mask as an extra last column (the
        executor tiles locations with q and k, so the masks reach the score per tile)."""
        def score(q, k, q_pos, k_pos):
            q_valid = k_valid = None
            if with_query_mask:
                q_pos, q_valid = q_pos[..., :-1], q_pos[..., -1] > 0.5
            if with_key_mask:
                k_pos, k_valid = k_pos[..., :-1], k_pos[..., -1] > 0.5
            return self.score(q, k, q_pos, k_pos, key_valid=k_valid, query_valid=q_valid)

        return score

    def phi_weights(self, attn):
        """phi of the attention weights ``[B, tq, tk, H]`` -> float32 ``[B, tq, tk]``."""
        return tf.cast(self.phi.apply(tf.cast(attn, self.compute_dtype))[..., 0], tf.float32)

    # ------------------------------------------------------------------ call
    def tiling(self, q, k):
        """``None`` (dense) or the tile size for queries and keys (``[B, H, N, d]`` tensors)."""
        return attention_executor.choose_tile(q, k, self.tile_size, self.dense_pairs, TILE_PAIRS,
                                              min_tile=16, max_tile=512)

    def call(self, queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
             query_mask=None):
        """Attention output ``[B, Nq, output_dim]`` (and new query locations with
        ``location_update``). ``query_mask [B, Nq]`` (optional, an extension of the
        attention protocol): padded query rows, whose outputs the caller ignores; the
        pair MLP skips them."""
        if q_pos is None or k_pos is None:
            raise ValueError("te attention needs query and key locations (q_pos, k_pos)")
        q_pos, k_pos = tf.cast(q_pos, tf.float32), tf.cast(k_pos, tf.float32)
        q, k, v = (self._heads(self.q_proj(queries)), self._heads(self.k_proj(keys)),
                   self._heads(self.v_proj(keys)))
        tile = self.tiling(q, k)
        score, q_pos_in, k_pos_in = self.score, q_pos, k_pos
        skip = self.skip_masked_pairs and not _in_xla_context()
        with_q, with_k = skip and query_mask is not None, skip and key_mask is not None
        if with_q or with_k:
            score = self._masked_score(with_q, with_k)
            if with_q:
                q_pos_in = tf.concat([q_pos, tf.cast(query_mask, tf.float32)[..., None]], -1)
            if with_k:
                k_pos_in = tf.concat([k_pos, tf.cast(key_mask, tf.float32)[..., None]], -1)
        heads = attention_executor.attend_with_tile(score, q, k, v, q_pos_in, k_pos_in, key_mask,
                                                    pair_mask_fn, tile=tile)
        out = self.merge_heads(heads)
        if not self.location_update:
            return out
        update = location_update(self.score, self.phi_weights, q, k, q_pos, k_pos, key_mask,
                                 pair_mask_fn, tile_size=tile)
        return out, q_pos + update

    def get_config(self):
        return {**super().get_config(), "form": self.form, "relative": self.relative,
                "distance": self.distance, "kernel_width": self.kernel_width,
                "kernel_layers": self.kernel_layers, "rbf_lengthscale": self.rbf_lengthscale,
                "location_update": self.location_update, "phi_width": self.phi_width,
                "phi_layers": self.phi_layers, "dense_pairs": self.dense_pairs,
                "kernel_dtype": self.kernel_dtype, "skip_masked_pairs": self.skip_masked_pairs}


def _in_xla_context():
    """True while tracing for XLA (``jit_compile=True``): no data-dependent shapes there."""
    try:
        from tensorflow.python.ops import control_flow_util

        return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
    except Exception:  # noqa: BLE001 - internal API; assume no XLA
        return False


# ---------------------------------------------------------------------- location update
def location_update(score_fn, phi_fn, q, k, q_pos, k_pos, key_mask=None, pair_mask_fn=None,
                    tile_size=None):
    """Masked mean over allowed keys of ``(x_q - x_k) * phi(softmax(score))``: ``[B, Nq, P]``.

    ``score_fn`` as for :func:`taylorformer.attention_executor.attend`;
    ``phi_fn(attn [B, tq, tk, H]) -> [B, tq, tk]``. Rows without allowed keys get 0.
    ``tile_size=None``: dense, plain autodiff. An int: tiles of that size; the forward
    runs two passes (online logsumexp, then the weighted sum) and the gradient
    recomputes each block (two more passes: the rows' softmax correction
    sum_m a*da, then the VJPs), so memory stays O(tile^2) per head.
    """
    if tile_size is None:
        return _dense_update(score_fn, phi_fn, q, k, q_pos, k_pos, key_mask, pair_mask_fn)
    return _tiled_update(score_fn, phi_fn, q, k, q_pos, k_pos, key_mask, pair_mask_fn,
                         tile_size, tile_size)


def _softmax_weights(s_raw, valid, lse=None):
    """Masked softmax over keys (last axis), float32; ``lse`` [B,H,tq] if already known."""
    s = tf.where(valid, tf.cast(s_raw, tf.float32), _NEG)
    if lse is None:
        m = tf.stop_gradient(tf.reduce_max(s, -1, keepdims=True))
        e = tf.where(valid, tf.exp(s - m), 0.0)
        return tf.math.divide_no_nan(e, tf.reduce_sum(e, -1, keepdims=True))
    return tf.where(valid, tf.exp(s - lse[..., None]), 0.0)


def _dense_update(score_fn, phi_fn, q, k, q_pos, k_pos, key_mask, pair_mask_fn):
    nq, nk = dims(q)[2], dims(k)[2]
    valid = pair_validity(key_validity(key_mask, k), pair_mask_fn, tf.range(nq), tf.range(nk))
    valid = tf.broadcast_to(valid, tf.stack([dims(q)[0], 1, nq, nk]))
    attn = _softmax_weights(score_fn(q, k, q_pos, k_pos), valid)  # [B,H,Nq,Nk]
    vm = tf.cast(valid[:, 0], tf.float32)  # [B,Nq,Nk]
    g = phi_fn(tf.transpose(attn, [0, 2, 3, 1])) * vm
    diff = relative_features(q_pos, k_pos, "difference")
    count = tf.maximum(tf.reduce_sum(vm, -1), 1.0)
    return tf.reduce_sum(diff * g[..., None], 2) / count[..., None]


def _tiled_update(score_fn, phi_fn, q, k, q_pos, k_pos, key_mask, pair_mask_fn, tile_q, tile_k):
    nq, nk = dims(q)[2], dims(k)[2]
    tq, tk = tile_len(tile_q, nq), tile_len(tile_k, nk)
    nqt, nkt = num_tiles(nq, tq), num_tiles(nk, tk)
    kv_t = tile_axis(key_validity(key_mask, k), 1, tk, nkt)  # [nkt,B,tk]
    b = dims(q)[0]

    def valid_of(i, j):  # [B,1,tq,tk] bool
        v = pair_validity(kv_t[j], pair_mask_fn, i * tq + tf.range(tq), j * tk + tf.range(tk))
        return tf.broadcast_to(v, tf.stack([b, 1, tq, tk]))

    @tf.custom_gradient
    def run(q, q_pos, k, k_pos):
        q_t, xq_t = tile_axis(q, 2, tq, nqt), tile_axis(q_pos, 1, tq, nqt)
        k_t, xk_t = tile_axis(k, 2, tk, nkt), tile_axis(k_pos, 1, tk, nkt)

        def block(i, j):
            return score_fn(q_t[i], k_t[j], xq_t[i], xk_t[j]), valid_of(i, j)

        def lse_row(i):
            rows = tf.stack([b, dims(q)[1], tq])

            def step(j, m, l):
                s_raw, valid = block(i, j)
                s = tf.where(valid, tf.cast(s_raw, tf.float32), _NEG)
                m_new = tf.maximum(m, tf.reduce_max(s, -1))
                p = tf.where(valid, tf.exp(s - m_new[..., None]), 0.0)
                return m_new, l * tf.exp(m - m_new) + tf.reduce_sum(p, -1)

            m, l = loop(nkt, step, (tf.fill(rows, _NEG), tf.zeros(rows)))
            return tf.where(l > 0, m + tf.math.log(tf.where(l > 0, l, 1.0)), 0.0)

        def update_row(i, lse):
            def step(j, acc, cnt):
                s_raw, valid = block(i, j)
                attn = _softmax_weights(s_raw, valid, lse)
                vm = tf.cast(valid[:, 0], tf.float32)
                g = phi_fn(tf.transpose(attn, [0, 2, 3, 1])) * vm
                diff = relative_features(xq_t[i], xk_t[j], "difference")
                return acc + tf.reduce_sum(diff * g[..., None], 2), cnt + tf.reduce_sum(vm, -1)

            return loop(nkt, step, (tf.zeros(tf.stack([b, tq, dims(q_pos)[2]])), tf.zeros(tf.stack([b, tq]))))

        def forward():
            def step(i, lse_ta, out_ta, cnt_ta):
                lse = lse_row(i)
                acc, cnt = update_row(i, lse)
                return (lse_ta.write(i, lse), out_ta.write(i, acc / tf.maximum(cnt, 1.0)[..., None]),
                        cnt_ta.write(i, cnt))

            tas = loop(nqt, step, (tensor_array(nqt), tensor_array(nqt), tensor_array(nqt)))
            return [ta.stack() for ta in tas]

        with record.stop_recording():
            lse_t, out_t, cnt_t = forward()  # [nqt,B,H,tq], [nqt,B,tq,P], [nqt,B,tq]

        def grad(d_out, variables=None):
            variables = list(variables or [])
            w_t = tile_axis(tf.cast(d_out, tf.float32), 1, tq, nqt) / tf.maximum(cnt_t, 1.0)[..., None]

            def phi_vjp(attn, vm, diff, w):
                """-> g (masked), d attn [B,H,tq,tk], d variables (phi's)."""
                a_t = tf.transpose(attn, [0, 2, 3, 1])
                with tf.GradientTape() as tape:
                    tape.watch(a_t)
                    g = phi_fn(a_t) * vm
                dg = tf.reduce_sum(diff * w[:, :, None, :], -1) * vm
                grads = tape.gradient(g, [a_t] + variables, output_gradients=dg,
                                      unconnected_gradients=tf.UnconnectedGradients.ZERO)
                return g, tf.transpose(grads[0], [0, 3, 1, 2]), grads[1:]

            # pass 1: r = sum_m a * da per row; phi's variable gradients; the direct
            # gradients of (x_q - x_k) in the weighted sum
            def pass1_row(i, r_ta, dxq_ta, dxk, dvar):
                def step(j, r, gsum, dxk, dvar):
                    s_raw, valid = block(i, j)
                    attn = _softmax_weights(s_raw, valid, lse_t[i])
                    vm = tf.cast(valid[:, 0], tf.float32)
                    diff = relative_features(xq_t[i], xk_t[j], "difference")
                    g, da, dv = phi_vjp(attn, vm, diff, w_t[i])
                    dxk_j = -tf.einsum("bqk,bqp->bkp", g, w_t[i])
                    return (r + tf.reduce_sum(attn * da, -1), gsum + tf.reduce_sum(g, -1),
                            tf.tensor_scatter_nd_add(dxk, [[j]], dxk_j[None]),
                            [a + c for a, c in zip(dvar, dv)])

                r, gsum, dxk, dvar = loop(nkt, step, (tf.zeros_like(lse_t[i]), tf.zeros_like(cnt_t[i]),
                                                      dxk, dvar))
                return r_ta.write(i, r), dxq_ta.write(i, w_t[i] * gsum[..., None]), dxk, dvar

            zeros_var = [tf.zeros(v.shape, tf.float32) for v in variables]
            r_ta, dxq_ta, dxk_direct, dvar = loop(nqt, pass1_row, (
                tensor_array(nqt), tensor_array(nqt), tf.zeros_like(xk_t), zeros_var))
            r_t = r_ta.stack()

            # pass 2: ds = a * (da - r), VJP of the score for q, k, locations, variables
            def pass2_row(i, dq_ta, dxq_ta, dk, dxk, dvar):
                def step(j, dq, dxq, dk, dxk, dvar):
                    qi, xqi, kj, xkj = q_t[i], xq_t[i], k_t[j], xk_t[j]
                    with tf.GradientTape() as tape:
                        tape.watch([qi, xqi, kj, xkj])
                        s_raw = score_fn(qi, kj, xqi, xkj)
                    valid = valid_of(i, j)
                    attn = _softmax_weights(s_raw, valid, lse_t[i])
                    vm = tf.cast(valid[:, 0], tf.float32)
                    diff = relative_features(xqi, xkj, "difference")
                    _, da, _ = phi_vjp(attn, vm, diff, w_t[i])
                    ds = attn * (da - r_t[i][..., None])
                    g = tape.gradient(s_raw, [qi, xqi, kj, xkj] + variables,
                                      output_gradients=tf.cast(ds, s_raw.dtype),
                                      unconnected_gradients=tf.UnconnectedGradients.ZERO)
                    g = [tf.cast(x, tf.float32) for x in g]
                    return (dq + g[0], dxq + g[1], tf.tensor_scatter_nd_add(dk, [[j]], g[2][None]),
                            tf.tensor_scatter_nd_add(dxk, [[j]], g[3][None]),
                            [a + c for a, c in zip(dvar, g[4:])])

                dq, dxq, dk, dxk, dvar = loop(nkt, step, (
                    tf.zeros(tf.shape(q_t[i])), tf.zeros(tf.shape(xq_t[i])), dk, dxk, dvar))
                return dq_ta.write(i, dq), dxq_ta.write(i, dxq), dk, dxk, dvar

            dq_ta, dxq_ta2, dk, dxk, dvar = loop(nqt, pass2_row, (
                tensor_array(nqt), tensor_array(nqt), tf.zeros(tf.shape(k_t)), dxk_direct, dvar))
            d_in = [untile_axis(dq_ta.stack(), 2, nq),
                    untile_axis(dxq_ta.stack() + dxq_ta2.stack(), 1, nq),
                    untile_axis(dk, 2, nk), untile_axis(dxk, 1, nk)]
            d_in = [tf.cast(d, x.dtype) for d, x in zip(d_in, (q, q_pos, k, k_pos))]
            if not variables:
                return d_in
            return d_in, [tf.cast(d, v.dtype) for d, v in zip(dvar, variables)]

        return untile_axis(out_t, 1, nq), grad

    return run(q, q_pos, k, k_pos)


@hookimpl
def register_attention(register):
    register("te", TEAttention, aliases=["te-attention"],
             description="Translation-equivariant attention (TE-TNP): logits from q.k and x_q - x_k.")
