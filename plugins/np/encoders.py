"""Latent encoders ``np`` and ``anp`` (kind ``encoder``, for models of kind ``latent``:
:mod:`taylorformer.models.latent` states the protocol and the training objectives).

Both decode the targets from ``[r_t, z, x_t]``: a deterministic representation of the
context at each target, one draw of the global latent z, and the target input. Dense
layer counts are options (``*_layers`` counts every dense layer of a stack, the last one
linear); the presets set the Taylorformer paper's (App. A.1).
"""
import keras
import tensorflow as tf

from taylorformer.checks import MAX_ITEMS, MAX_LAYERS, MAX_WIDTH, check_bool, check_choice, check_int, check_size
from taylorformer.models.latent import OBJECTIVES
from taylorformer.models.layers import masked_mean

from .latent_path import LatentPath, dense_stack
from .mab import MultiheadAttentionBlock


class LatentEncoder(keras.layers.Layer):
    """What NP and ANP share: the latent path (:class:`LatentPath` on the context for the
    prior, on context and targets for the posterior), the training options and the
    decoder input ``[r_t, z, x_t]``; subclasses define :meth:`deterministic`.

    Options: ``width`` (every dense layer), ``latent_dim``, ``latent_layers`` /
    ``latent_post_layers`` (dense layers before / after the mean over points),
    ``self_attention`` (a self-attention block on the points of both paths, ANP),
    ``num_heads``, ``objective`` (``"elbo"`` | ``"iwae"``), ``train_samples`` (draws of z per
    task and training step), ``eval_samples`` (draws of z in the predictive mixture),
    ``reconstruct_context`` (train on the context and targets together, not the targets alone).
    """

    latent = True
    #: the registry name in option errors
    component_name = "latent"

    def __init__(self, dim_x, dim_y, width=128, latent_dim=128, latent_layers=3, latent_post_layers=2,
                 self_attention=False, num_heads=8, objective="elbo", train_samples=1, eval_samples=50,
                 reconstruct_context=True, **kwargs):
        super().__init__(**kwargs)
        owner = f"{self.component_name} encoder"
        self.dim_x, self.dim_y = dim_x, dim_y
        self.width, self.num_heads = check_size(owner, "width", width), check_size(owner, "num_heads", num_heads)
        self.latent_dim = check_int(owner, "latent_dim", latent_dim, 1, MAX_WIDTH)
        self.latent_layers = check_int(owner, "latent_layers", latent_layers, 1, MAX_LAYERS)
        self.latent_post_layers = check_int(owner, "latent_post_layers", latent_post_layers, 1, MAX_LAYERS)
        self.self_attention = check_bool(owner, "self_attention", self_attention)
        self.objective = check_choice(owner, "objective", objective, OBJECTIVES)
        self.train_samples = check_int(owner, "train_samples", train_samples, 1, MAX_ITEMS)
        self.eval_samples = check_int(owner, "eval_samples", eval_samples, 1, MAX_ITEMS)
        self.reconstruct_context = check_bool(owner, "reconstruct_context", reconstruct_context)
        self.output_dim = self.width + self.latent_dim + dim_x
        self.latent_path = LatentPath(self.width, self.latent_dim, self.latent_layers, self.latent_post_layers,
                                      self.self_attention, self.num_heads, name="latent_path")

    def latent_parameters(self, x, y, mask):
        """``(loc, scale)`` ``[B, latent_dim]`` of z given the points ``x``, ``y`` with ``mask [B, N]``."""
        return self.latent_path(x, y, mask)

    def deterministic(self, batch):
        """The deterministic representation of the context at each target, ``[B, Nt, width]``."""
        raise NotImplementedError

    def call(self, batch, z=None):
        """``[K, B, Nt, width + latent_dim + Dx]``: ``[r_t, z_k, x_t]`` for each draw ``z [K, B, Dz]``;
        without ``z`` (the plain encoder contract), ``[B, Nt, ...]`` at the prior's mean of z."""
        if z is None:
            loc, _ = self.latent_parameters(batch["xc"], batch["yc"], batch["mask_c"])
            return self.call(batch, loc[None])[0]
        r = self.deterministic(batch)
        xt = tf.cast(batch["xt"], r.dtype)
        k = tf.shape(z)[0]
        nt = tf.shape(xt)[1]
        tile = lambda t: tf.tile(t[None], [k, 1, 1, 1])  # noqa: E731
        zt = tf.tile(tf.cast(z, r.dtype)[:, :, None, :], [1, 1, nt, 1])
        return tf.concat([tile(r), zt, tile(xt)], -1)

    def get_config(self):
        return {**super().get_config(), "dim_x": self.dim_x, "dim_y": self.dim_y, "width": self.width,
                "latent_dim": self.latent_dim, "latent_layers": self.latent_layers,
                "latent_post_layers": self.latent_post_layers, "self_attention": self.self_attention,
                "num_heads": self.num_heads, "objective": self.objective,
                "train_samples": self.train_samples, "eval_samples": self.eval_samples,
                "reconstruct_context": self.reconstruct_context}


class NPEncoder(LatentEncoder):
    """NP (Garnelo et al. 2018): deterministic path ``r = post(mean_c pre([xc, yc]))``, the
    same ``r`` at every target; ``layers`` dense layers before the mean,
    ``deterministic_post_layers`` (0: none) after it."""

    component_name = "np"

    def __init__(self, dim_x, dim_y, layers=4, deterministic_post_layers=0, **kwargs):
        super().__init__(dim_x, dim_y, **kwargs)
        owner = f"{self.component_name} encoder"
        self.deterministic_layers = check_size(owner, "layers", layers)
        self.deterministic_post_layers = check_int(owner, "deterministic_post_layers", deterministic_post_layers,
                                                   0, MAX_LAYERS)
        self.pre = dense_stack(self.width, self.width, self.deterministic_layers, "deterministic_pre")
        self.attention = (MultiheadAttentionBlock(self.width, self.num_heads, name="deterministic_self_attention")
                          if self.self_attention else None)
        self.post = (dense_stack(self.width, self.width, self.deterministic_post_layers, "deterministic_post")
                     if self.deterministic_post_layers else None)

    def deterministic(self, batch):
        h = self.pre(tf.concat([tf.cast(batch["xc"], tf.float32), tf.cast(batch["yc"], tf.float32)], -1))
        if self.attention is not None:
            h = self.attention(h, h, h, key_mask=batch["mask_c"])
        r = masked_mean(h, batch["mask_c"])
        if self.post is not None:
            r = self.post(r)
        return tf.tile(r[:, None, :], [1, tf.shape(batch["xt"])[1], 1])

    def get_config(self):
        return {**super().get_config(), "layers": self.deterministic_layers,
                "deterministic_post_layers": self.deterministic_post_layers}


class ANPEncoder(LatentEncoder):
    """ANP (Kim et al. 2019): deterministic path ``r_t = MAB(qk(xt), qk(xc), v)``, a
    cross-attention from each target to the context, with values ``v`` from
    ``layers`` dense layers on ``[xc, yc]`` (then, with ``self_attention``, a
    self-attention block over the context) and keys and queries from ``query_layers`` dense
    layers on x (shared). As in the reference code, a ReLU precedes the latent path's
    self-attention and none the deterministic path's."""

    component_name = "anp"

    def __init__(self, dim_x, dim_y, layers=4, query_layers=2, self_attention=True, **kwargs):
        super().__init__(dim_x, dim_y, self_attention=self_attention, **kwargs)
        owner = f"{self.component_name} encoder"
        self.deterministic_layers = check_size(owner, "layers", layers)
        self.query_layers = check_int(owner, "query_layers", query_layers, 1, MAX_LAYERS)
        self.values = dense_stack(self.width, self.width, self.deterministic_layers, "values")
        self.queries = dense_stack(self.width, self.width, self.query_layers, "queries")
        self.attention = (MultiheadAttentionBlock(self.width, self.num_heads, name="deterministic_self_attention")
                          if self.self_attention else None)
        self.cross_attention = MultiheadAttentionBlock(self.width, self.num_heads, name="cross_attention")

    def deterministic(self, batch):
        mask = batch["mask_c"]
        v = self.values(tf.concat([tf.cast(batch["xc"], tf.float32), tf.cast(batch["yc"], tf.float32)], -1))
        if self.attention is not None:
            v = self.attention(v, v, v, key_mask=mask)
        q = self.queries(tf.cast(batch["xt"], tf.float32))
        k = self.queries(tf.cast(batch["xc"], tf.float32))
        return self.cross_attention(q, k, v, key_mask=mask)

    def get_config(self):
        return {**super().get_config(), "layers": self.deterministic_layers,
                "query_layers": self.query_layers}
