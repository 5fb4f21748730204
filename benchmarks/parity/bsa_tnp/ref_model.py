"""The authors' BSA-TNP (MLGlobalHealth/dl4bi, JAX/Flax), built from their 2-D GP config,
with optional flags that remove one architectural difference to taylorformer's
``bsa-tnp`` each. Imported by ``check_function.py compare`` and ``train_ref.py``; runs
in the reference venv (``$DL4BI_VENV``, see README.md). Nothing of the reference is
modified or copied: the model is ``hydra.utils.instantiate`` of the reference tree's
``benchmarks/meta_learning/configs/gp/model/2d/bsa_tnp.yaml`` (the file its ``gp.py``
loads for ``data=2d model=2d/bsa_tnp``), with config values overridden and, for two
flags, modules of ours handed in where the reference takes a module.

Flags (``FLAGS``; ``--like-ours`` = all of them):

``relu``            ReLU instead of GELU (tanh approximation) in the embedding MLP, the
                    FFNs and the head.
``ln_eps``          LayerNorm epsilon 1e-5 (Keras' default, ours) instead of Flax's 1e-6.
``no_embed_norm``   no LayerNorm after the embedding MLP (the model's ``norm`` is a module
                    of ours that is the identity on its first copy, the post-embedding one,
                    and a LayerNorm on the second, the final one).
``no_qkv_bias``     q/k/v projections without bias (``flax.linen.Dense(use_bias=False)``).
``min_std``         predictive std ``1e-3 + softplus(raw)`` (ours) instead of ``softplus(raw)``.
``log_b``           RBF width parameterised as ``b = exp(log_b)`` (ours; keeps b > 0) instead
                    of ``b`` itself; the reference's own ``scanned_rbf_network_bias`` is used.
``b_spread``        b initialised to 4^(f - 2), f = 0..4 (1/16 .. 16; ours) instead of 1 for
                    every basis function.
``glorot``          Glorot-uniform kernels (Keras' default) instead of orthogonal ones.

``relu``/``ln_eps``/``no_embed_norm``/``min_std`` change the function; ``no_qkv_bias``
removes parameters (zero biases compute the same function); ``log_b``, ``b_spread`` and
``glorot`` change only the parameterisation or the initial values, so they matter for
learning, not for a function check with copied weights.
"""
import os

FLAGS = ("relu", "ln_eps", "no_embed_norm", "no_qkv_bias", "min_std", "log_b", "b_spread", "glorot")
FUNCTION_FLAGS = ("relu", "ln_eps", "no_embed_norm", "min_std")


def config_path():
    import dl4bi

    src = os.path.dirname(os.path.dirname(os.path.abspath(dl4bi.__file__)))
    return os.path.join(src, "benchmarks", "meta_learning", "configs", "gp", "model", "2d", "bsa_tnp.yaml")


def build(flags=(), chunk=None):
    """``(model, config path)``: the reference BSATNP with ``flags`` (a subset of FLAGS)."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    from dl4bi.core.bias import Bias, scanned_rbf_network_bias
    from dl4bi.core.model_output import DiagonalMVNOutput
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    unknown = set(flags) - set(FLAGS)
    if unknown:
        raise SystemExit(f"unknown reference flag(s) {sorted(unknown)}; valid: {FLAGS}")
    path = config_path()
    cfg = OmegaConf.load(path)
    if chunk:
        cfg.blk.attn.attn.qs_chunk_size = chunk
        cfg.blk.attn.attn.ks_chunk_size = chunk
    if "relu" in flags:
        for mlp in (cfg.embed_all, cfg.blk.ffn, cfg.head):
            mlp.act_fn = {"_target_": "jax.nn.relu", "_partial_": True}
    if "glorot" in flags:
        for mlp in (cfg.embed_all, cfg.blk.ffn, cfg.head, cfg.blk.attn.proj_qs, cfg.blk.attn.proj_ks,
                    cfg.blk.attn.proj_vs, cfg.blk.attn.proj_out):
            mlp.kernel_init = {"_target_": "jax.nn.initializers.glorot_uniform"}
    if "ln_eps" in flags:
        cfg.blk.norm = {"_target_": "flax.linen.LayerNorm", "epsilon": 1e-5}
    if "no_qkv_bias" in flags:
        kinit = "glorot_uniform" if "glorot" in flags else "orthogonal"
        for name in ("proj_qs", "proj_ks", "proj_vs"):
            cfg.blk.attn[name] = {"_target_": "flax.linen.Dense", "features": 128, "use_bias": False,
                                  "kernel_init": {"_target_": f"jax.nn.initializers.{kinit}"}}
    if "log_b" in flags or "b_spread" in flags:
        log_b, spread = "log_b" in flags, "b_spread" in flags

        def init_params(mod, name, num_heads, num_basis):
            b0 = 4.0 ** (jnp.arange(num_basis) - (num_basis - 1) / 2.0) if spread else jnp.ones(num_basis)
            b0 = jnp.tile(b0[None], (num_heads, 1)).astype(jnp.float32)
            a = mod.param(f"{name}_a", nn.initializers.constant(1), (num_heads, num_basis))
            if log_b:
                lb = mod.param(f"{name}_log_b", lambda key, shape: jnp.log(b0), (num_heads, num_basis))
                return {"a": a, "b": jnp.exp(lb)}
            return {"a": a, "b": mod.param(f"{name}_b", lambda key, shape: b0, (num_heads, num_basis))}

        cfg.blk.attn.attn.bias = {}
        bias = {"s": Bias(init_params, {"num_heads": 4, "num_basis": 5},
                          scanned_bias_func=scanned_rbf_network_bias)}
    else:
        bias = None
    kwargs = {}
    eps = 1e-5 if "ln_eps" in flags else 1e-6

    if "no_embed_norm" in flags:
        class FinalNormOnly(nn.Module):
            """Identity as the model's first ``norm`` copy (after the embedding), LayerNorm
            as the second (before the head): BSATNP calls ``self.norm.copy()`` twice."""

            @nn.compact
            def __call__(self, x):
                if self.name.endswith("_0"):
                    return x
                return nn.LayerNorm(epsilon=eps, name="ln")(x)

        kwargs["norm"] = FinalNormOnly()
    elif "ln_eps" in flags:
        kwargs["norm"] = nn.LayerNorm(epsilon=eps)
    if "min_std" in flags:
        def output_fn(act):
            mu, raw = jnp.split(act, 2, axis=-1)
            return DiagonalMVNOutput(mu, 1e-3 + jax.nn.softplus(raw))

        kwargs["output_fn"] = output_fn
    if bias is not None:
        blk = instantiate(cfg.blk)
        attn = blk.attn.attn.clone(bias=bias)
        kwargs["blk"] = blk.clone(attn=blk.attn.clone(attn=attn))
    model = instantiate(cfg)
    return (model.clone(**kwargs) if kwargs else model), path


def init(model, seed=0):
    """Initial parameters of ``model`` (shapes do not depend on the point counts)."""
    import jax
    import jax.numpy as jnp

    z = lambda *s: jnp.zeros(s, jnp.float32)  # noqa: E731
    return model.init(jax.random.key(seed), s_ctx=z(1, 5, 2), f_ctx=z(1, 5, 1),
                      mask_ctx=jnp.ones((1, 5), bool), s_test=z(1, 3, 2))


def flatten(params):
    """``{"a/b/c": array}`` of a Flax parameter tree."""
    import jax

    return {"/".join(k.key for k in path): v
            for path, v in jax.tree_util.tree_flatten_with_path(params)[0]}
