"""The authors' Taylorformer (oremnirv/Taylorformer, TensorFlow 2.13 / Keras 2) behind a
batch interface, with flags that remove each architectural difference from taylorformer's
``taylorformer`` preset. Run with the reference interpreter only.

The reference checkout is imported unmodified from ``$REF_TAYLORFORMER_SRC`` (default
``~/.cache/ref-taylorformer-src``): its ``model.taylorformer.taylorformer`` network (MHA-X and
MHA-XY stacks, the two dense heads), ``model.dot_prod`` attention, ``model.losses.nll`` and
``data_wrangler.feature_extractor`` (positional encoding, the MHA-XY/MHA-X input assembly,
``DE``'s BatchNormalization). What this file adds, and why:

* **Padded batches.** The authors' pipeline takes one ``n_C``/``n_T`` per batch and no
  masks; taylorformer's GP task draws Nc per task and pads (``mask_c``/``mask_t``). Here
  the sequence is the padded ``[context slots; target slots]`` (as in taylorformer), the
  attention mask is the authors' structural mask (context rows see context slots, target
  slot i sees context slots and target slots before i) AND the key's ``valid`` flag, given
  to their attention as a ``[B, 1, L, L]`` mask (their code accepts any broadcastable mask),
  and the nearest-neighbour search excludes padded points. Their neighbour search picks
  "position 1 of an argsort of the distances" (the point itself at position 0); this one
  excludes the point by index (same result for distinct x; checked against their
  ``DE.derivative_function`` on an unpadded batch by ``check_function.py``). Their
  BatchNormalization gets the ``valid`` mask (padded zeros would bias its statistics).
* **Flags** (:data:`FLAGS`), each removing one difference; ``like_ours`` sets all of them.

Outputs: predictive ``mean`` and ``scale`` ``[B, Nt, 1]`` over the target slots.
"""
import math
import os
import sys

import numpy as np
import tensorflow as tf

REF_SRC = os.path.expanduser(os.environ.get("REF_TAYLORFORMER_SRC", "~/.cache/ref-taylorformer-src"))
if not os.path.isfile(os.path.join(REF_SRC, "model", "taylorformer.py")):
    raise SystemExit(f"no reference checkout at {REF_SRC} (set REF_TAYLORFORMER_SRC; see README.md)")
sys.path.insert(0, REF_SRC)

from data_wrangler.feature_extractor import DE, feature_wrapper  # noqa: E402
from model import dot_prod, taylorformer as ref_net  # noqa: E402
from model.losses import nll as ref_nll  # noqa: E402

#: flag -> what it changes on the reference side (README.md / docs/parity.md list the effects)
FLAGS = {
    "features_like_ours": "LocalTaylor features as taylorformer/the paper: signed slope D = dy/dx "
                          "(theirs dy/(2e-6+|dx|)), slope at the neighbour D_n in Y_seen (paper Eq. 9; "
                          "theirs lacks it), no BatchNorm on D, blow-up flags 1 = invalid, raw x and a "
                          "no-neighbour flag in X_fe, flag 1 = context in MHA-XY queries and 1 in keys "
                          "(theirs 0/1 and 0), our feature order",
    "pe_like_ours": "positional encoding at taylorformer's wavelengths 0.02..20 (theirs: xmin 0.1, xmax 1)",
    "head_dim_scale": "attention logits / sqrt(head_dim) (theirs / sqrt(heads * head_dim))",
    "no_qkv_bias": "query/key/value projections without bias (theirs with)",
    "relu": "ReLU in the feed-forward blocks (theirs GELU)",
    "ln_eps": "LayerNorm epsilon 1e-5 (theirs Keras 2's default 1e-3)",
    "single_head": "one linear map concat(O_X, O_XY) -> (mean, scale) as the paper's Algorithm 1 "
                   "(theirs Dense(32) then two Dense(1))",
    "softplus_scale": "scale = 0.001 + softplus(raw) (theirs exp(raw) + 0.001 in the NLL)",
    "dropout_like_ours": "dropout on the attention output and the FFN output (theirs after the GELU)",
    "loss_per_task": "loss = mean over tasks of the mean per real target point (theirs: mean over "
                     "all target points of the batch)",
}

# the authors' ETT configuration (model/taylorformer_pipeline.instantiate_taylorformer), which
# taylorformer's preset copies: 6 heads x 11, width 32, 4 layers, enc_dim 32, dropout 0.05
CONFIG = {"num_heads": 6, "head_dim": 11, "width": 32, "layers": 4, "enc_dim": 32, "dropout": 0.05,
          "xmin": 0.1, "xmax": 1.0}
# positional encoding with taylorformer's wavelengths (min 0.02, max 20, 16 frequencies):
# theirs has wavelengths 2 pi xmin R^(j/16), j = 0..15, R = 100 xmax / xmin
OURS_PE_XMIN = 0.02 / (2 * math.pi)
OURS_PE_XMAX = OURS_PE_XMIN * 1000.0 ** (16 / 15) / 100.0
MIN_SCALE = 1e-3


class _HeadDimAttention(dot_prod.DotProductAttention):
    """Their scaled dot-product attention with logits / sqrt(head_dim)."""

    def __init__(self, head_dim, **kwargs):
        super().__init__(**kwargs)
        self.head_dim = head_dim

    def call(self, queries, keys, values, d_k, mask=None):
        return super().call(queries, keys, values, self.head_dim, mask)


class _FFN(tf.keras.layers.Layer):
    """Their FFN_1 / FFN_o with a choice of activation and dropout placement (their
    sublayers and weights are reused: ``ffn`` is the reference layer)."""

    def __init__(self, ffn, first, activation, dropout_like_ours, rate):
        super().__init__()
        self.ffn, self.first, self.activation = ffn, first, activation
        self.dropout_like_ours = dropout_like_ours
        self.drop = tf.keras.layers.Dropout(rate)

    def call(self, x, query, training=True):
        f = self.ffn
        if self.dropout_like_ours:
            x = self.drop(x, training=training)
        x = x + (f.dense_a(query) if self.first else query)
        x = f.layernorm[0](x)
        h = f.dense_c(self.activation(f.dense_b(x)) if self.dropout_like_ours
                      else f.dropout(self.activation(f.dense_b(x)), training=training))
        if self.dropout_like_ours:
            h = self.drop(h, training=training)
        return f.layernorm[1](x + h)


class RefModel(tf.keras.Model):
    """The authors' network and feature pipeline on padded taylorformer batches."""

    def __init__(self, flags=(), seed=0):
        super().__init__()
        unknown = set(flags) - set(FLAGS)
        if unknown:
            raise SystemExit(f"unknown flags {sorted(unknown)}; known: {sorted(FLAGS)}")
        self.flags = set(flags)
        c = CONFIG
        tf.keras.utils.set_random_seed(seed)
        self.net = ref_net.taylorformer(num_heads=c["num_heads"], projection_shape=c["num_heads"] * c["head_dim"],
                                        output_shape=c["width"], num_layers=c["layers"],
                                        dropout_rate=c["dropout"])
        self._features = feature_wrapper()
        self._de = DE()
        self.xmin, self.xmax = (OURS_PE_XMIN, OURS_PE_XMAX) if "pe_like_ours" in self.flags else (c["xmin"], c["xmax"])
        mhas = [self.net.mha_x_a, self.net.mha_xy_a] + self.net.mha_x_b + self.net.mha_xy_b
        for block in mhas:
            if "head_dim_scale" in self.flags:
                block.mha.attention = _HeadDimAttention(c["head_dim"])
            if "no_qkv_bias" in self.flags:
                for dense in (block.mha.W_q, block.mha.W_k, block.mha.W_v):
                    dense.use_bias = False
            if "ln_eps" in self.flags:
                for ln in block.ffn.layernorm:
                    ln.epsilon = 1e-5
            if "relu" in self.flags or "dropout_like_ours" in self.flags:
                act = tf.nn.relu if "relu" in self.flags else tf.nn.gelu
                block.ffn = _FFN(block.ffn, block in (self.net.mha_x_a, self.net.mha_xy_a), act,
                                 "dropout_like_ours" in self.flags, c["dropout"])
        if "single_head" in self.flags:
            self.net.linear_layer = tf.keras.layers.Lambda(lambda t: t)

    # ------------------------------------------------------------------ features
    @staticmethod
    def sequence(batch):
        x = tf.concat([batch["xc"], batch["xt"]], 1)
        y = tf.concat([batch["yc"], batch["yt"]], 1)
        valid = tf.concat([batch["mask_c"], batch["mask_t"]], 1) > 0.5
        return tf.cast(x, tf.float32), tf.cast(y, tf.float32), valid

    @staticmethod
    def neighbour(x, valid, nc):
        """Nearest already-seen real neighbour (their rule: context -> other context points;
        target slot i -> context and target slots before i): ``idx [B, L]``, ``has [B, L]``."""
        n = tf.shape(x)[1]
        i, j = tf.range(n)[:, None], tf.range(n)[None, :]
        allowed = ((j < tf.maximum(i, nc)) & (j != i))[None] & valid[:, None, :]
        dist = tf.norm(x[:, :, None, :] - x[:, None, :, :], axis=-1)
        dist = tf.where(allowed, dist, np.inf)
        return tf.argmin(dist, -1, output_type=tf.int32), tf.reduce_any(allowed, -1)

    def their_features(self, x, y, valid, nc, training):
        """Their DE: y_diff, x_diff, d (BatchNorm of the clipped |dx| slope, and its label), x_n, y_n."""
        idx, _ = self.neighbour(x, valid, nc)
        x_n, y_n = tf.gather(x, idx, batch_dims=1), tf.gather(y, idx, batch_dims=1)
        x_diff, y_diff = x - x_n, y - y_n
        d = y_diff / (0.000002 + tf.norm(x_diff, axis=-1, keepdims=True))
        d_1 = tf.where(tf.math.is_nan(d), 10000.0, d)
        d_2 = tf.where(tf.abs(d) > 200., 0., d)
        d_bn = self._de.batch_norm_layer(d_2, training=training, mask=tf.cast(valid, tf.float32))
        d_label = tf.cast(tf.math.equal(d_2, d_1), "float32")
        return y_diff, x_diff, tf.concat([d_bn, d_label], -1), x_n, y_n

    def our_features(self, x, y, valid, nc):
        """taylorformer's LocalTaylor (p = 0, q = 1, k = 1) features, written out from its
        documented definitions: x group [x_n, dx, no_neighbour], own [dy, D, flag], seen
        [y_n, D_n, flag_n]; D = dy/dx, invalid (0, flag 1) when |dx| <= 1e-6 or |D| > 200."""
        idx, has = self.neighbour(x, valid, nc)
        hasf = tf.cast(has, tf.float32)[..., None]
        x_n = tf.where(has[..., None], tf.gather(x, idx, batch_dims=1), x)
        y_n = tf.gather(y, idx, batch_dims=1) * hasf
        dx, dy = x - x_n, (y - y_n) * hasf
        ok = has[..., None] & (tf.abs(dx) > 1e-6)
        slope = dy / tf.where(ok, dx, 1.0)
        ok = ok & (tf.abs(slope) <= 200.0)
        slope = tf.where(ok, slope, 0.0)
        flag = 1.0 - tf.cast(ok, tf.float32)
        slope_n = tf.gather(slope, idx, batch_dims=1) * hasf
        flag_n = tf.where(has[..., None], tf.gather(flag, idx, batch_dims=1), 1.0)
        return {"x": tf.concat([x_n, dx, 1.0 - hasf], -1), "own": tf.concat([dy, slope, flag], -1),
                "seen": tf.concat([y_n, slope_n, flag_n], -1), "y_n": y_n}

    def net_inputs(self, batch, training):
        """The eight inputs of their network: MHA-X q/k/v, MHA-XY q/k/v, mask, y_n."""
        x, y, valid = self.sequence(batch)
        nc, nt = batch["xc"].shape[1], batch["xt"].shape[1]
        n = nc + nt
        i, j = tf.range(n)[:, None], tf.range(n)[None, :]
        mask = ((j < tf.maximum(i, nc)))[None, None] & valid[:, None, None, :]  # [B, 1, L, L]
        pe = self._features.PE([x, CONFIG["enc_dim"], self.xmin, self.xmax])
        if "features_like_ours" not in self.flags:
            y_diff, x_diff, d, x_n, y_n = self.their_features(x, y, valid, nc, training)
            q_x, k_x, v_x, q_xy, k_xy, v_xy = self._features([pe, y, y_diff, x_diff, d, x_n, y_n, nc, nt])
            return q_x, k_x, v_x, q_xy, k_xy, v_xy, mask, y_n
        f = self.our_features(x, y, valid, nc)
        x_fe = tf.concat([x, pe, f["x"]], -1)
        y_fe = tf.concat([y, f["own"]], -1)
        is_ctx = tf.concat([tf.ones_like(batch["mask_c"]), tf.zeros_like(batch["mask_t"])], 1)[..., None]
        is_ctx = tf.broadcast_to(tf.cast(is_ctx, tf.float32), tf.shape(y))
        k_xy = tf.concat([x_fe, y_fe, f["seen"], tf.ones_like(is_ctx)], -1)
        q_xy = tf.concat([x_fe, y_fe * is_ctx, f["seen"], is_ctx], -1)
        return x_fe, x_fe, y, q_xy, k_xy, k_xy, mask, f["y_n"]

    def call(self, batch, training=False):
        """Predictive ``mean``, ``scale`` ``[B, Nt, 1]`` of the target slots (teacher forced)."""
        nc = batch["xc"].shape[1]
        mu, log_sigma = self.net(list(self.net_inputs(batch, training)), training=training)
        if "softplus_scale" in self.flags:
            scale = MIN_SCALE + tf.nn.softplus(log_sigma)  # their log_sigma = log(exp(raw)) = raw
        else:
            scale = tf.exp(log_sigma) + MIN_SCALE  # what their nll uses (epsilon 0.001)
        return mu[:, nc:], scale[:, nc:]

    def loss(self, batch, training=True):
        """Negative log-likelihood to minimise (their nll per point; masked)."""
        mu, scale = self(batch, training=training)
        mask = tf.cast(batch["mask_t"], tf.float32)
        # their nll takes log_sigma and adds epsilon to exp(log_sigma): give it log(scale - eps)
        per_point, *_ = ref_nll(batch["yt"], mu, tf.math.log(scale - MIN_SCALE))
        per_point = per_point[..., 0] * mask
        if "loss_per_task" in self.flags:
            return tf.reduce_mean(tf.reduce_sum(per_point, -1) / tf.reduce_sum(mask, -1))
        return tf.reduce_sum(per_point) / tf.reduce_sum(mask)


def loglik(model, batch):
    """Per-task mean log-likelihood per real target point ``[B]`` (float64)."""
    mu, scale = model(batch, training=False)
    y = tf.cast(batch["yt"], tf.float64)
    mu, scale = tf.cast(mu, tf.float64), tf.cast(scale, tf.float64)
    lp = (-0.5 * tf.square((y - mu) / scale) - tf.math.log(scale) - 0.5 * math.log(2 * math.pi))[..., 0]
    m = tf.cast(batch["mask_t"], tf.float64)
    return tf.reduce_sum(lp * m, -1) / tf.reduce_sum(m, -1)


# ---------------------------------------------------------------------- weights from ours
def weight_map(model):
    """``[(our variable path suffix, reference variable, transform)]``: every reference
    weight of a ``like_ours`` model and the taylorformer weight it takes."""
    net, rows = model.net, []

    def dense(prefix, layer, bias=True):
        rows.append((prefix + "/kernel", layer.kernel, None))
        if bias:
            rows.append((prefix + "/bias", layer.bias, None))

    def ln(prefix, layer):
        rows.append((prefix + "/gamma", layer.gamma, None))
        rows.append((prefix + "/beta", layer.beta, None))

    for stream, first, rest in (("x", net.mha_x_a, net.mha_x_b), ("xy", net.mha_xy_a, net.mha_xy_b)):
        for i, block in enumerate([first] + list(rest)):
            a, b = f"taylorformer_encoder/attention_{stream}_{i}", f"taylorformer_encoder/{stream}_block_{i}"
            for name, layer in (("q", block.mha.W_q), ("k", block.mha.W_k), ("v", block.mha.W_v)):
                dense(f"{a}/{name}", layer, bias=False)
            dense(f"{a}/out", block.mha.W_o)
            ffn = block.ffn.ffn if isinstance(block.ffn, _FFN) else block.ffn
            if i == 0:
                dense(f"taylorformer_encoder/{stream}_in", ffn.dense_a)
            ln(f"{b}/norm1", ffn.layernorm[0])
            dense(f"{b}/ffn_in", ffn.dense_b)
            dense(f"{b}/ffn_out", ffn.dense_c)
            ln(f"{b}/norm2", ffn.layernorm[1])
    rows.append(("head/out/kernel", net.dense_last.kernel, lambda w: w[:, 0:1]))
    rows.append(("head/out/bias", net.dense_last.bias, lambda w: w[0:1]))
    rows.append(("head/out/kernel", net.dense_sigma.kernel, lambda w: w[:, 1:2]))
    rows.append(("head/out/bias", net.dense_sigma.bias, lambda w: w[1:2]))
    return rows


def assign_from_ours(model, weights):
    """Copy taylorformer's weights (``{variable path: array}``) into a built ``like_ours``
    reference model; every reference weight must be covered once, every shape must match."""
    missing = set(FLAGS) - {"dropout_like_ours", "loss_per_task"} - model.flags
    if missing:
        raise SystemExit(f"weights can be copied only into a model with every architectural flag; missing {sorted(missing)}")
    by_suffix = {k.split("autoregressive_np/", 1)[-1]: v for k, v in weights.items()}
    rows, used = weight_map(model), set()
    for key, var, transform in rows:
        if key not in by_suffix:
            raise SystemExit(f"taylorformer weights lack {key}")
        value = by_suffix[key] if transform is None else transform(by_suffix[key])
        if tuple(value.shape) != tuple(var.shape):
            raise SystemExit(f"shape mismatch for {key}: ours {value.shape}, reference {var.name} {var.shape}")
        var.assign(value)
        used.add(key)
    covered = {id(v) for _, v, _ in rows}
    uncovered = [v.name for v in model.trainable_variables if id(v) not in covered]
    if uncovered or used != set(by_suffix):
        raise SystemExit(f"unmapped reference weights {uncovered}; unused ours {sorted(set(by_suffix) - used)}")
    return len(rows)
