"""Same weights, same padded batch: taylorformer's ``bsa-tnp`` vs the authors' BSA-TNP.

Two steps, two interpreters (from this folder)::

    python check_function.py export                 # taylorformer venv -> data/function-check.npz
    $DL4BI_VENV/bin/python check_function.py compare  # reference venv: copy the weights, compare

``export`` builds taylorformer's ``bsa-tnp`` preset (``dim_x = 2``, initial Keras
weights of ``--seed``), draws one padded batch of the ``gp-2d-bsa`` task (the paper's
2-D GP: Nc ~ U{128..511} padded to 511 with ``mask_c``, Nt = 1024; test split, batch
``--batch``) and writes the weights, the batch and our predictive means, scales and
per-point log-likelihoods (float32 forward, log densities in float64).

``compare`` builds the reference model with every function-changing flag of
``ref_model.py`` (``relu``, ``ln_eps``, ``no_embed_norm``, ``min_std``; plus
``no_qkv_bias`` and ``log_b``, which only drop or reparameterise weights), copies our
weights into its parameter tree with the explicit mapping in :func:`ref_params` (every
shape checked, every reference parameter set exactly once), runs ``model.apply`` on the
same arrays and prints one JSON line with the max relative differences. Then, for each
function flag, it rebuilds the reference with that flag alone turned off (the weights
copied the same way; the reference's extra LayerNorm gets scale 1, bias 0) and reports
how far the outputs move: the effect of that difference.

Relative difference of an array: ``max |ours - ref| / max |ref|`` (``max_rel``), and the
largest elementwise ``|ours - ref| / |ref|`` over elements with ``|ref| >= 1e-3 max |ref|``
(``max_rel_elementwise``).
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "data", "function-check.npz")
LAYERS = 6
#: reference flags under which our weights map one to one into the reference tree and
#: give the same function (``ref_params``)
COPY_FLAGS = ("relu", "ln_eps", "no_embed_norm", "min_std", "no_qkv_bias", "log_b")


# ------------------------------------------------------------------ ours (taylorformer venv)
def our_weights(model):
    """``{name: array}`` of every weight of taylorformer's bsa-tnp, by role."""
    enc, w = model.encoder, {}

    def dense(prefix, layer, bias=True):
        w[f"{prefix}/kernel"] = layer.kernel.numpy()
        if bias:
            w[f"{prefix}/bias"] = layer.bias.numpy()

    def ln(prefix, layer):
        w[f"{prefix}/gamma"], w[f"{prefix}/beta"] = layer.gamma.numpy(), layer.beta.numpy()

    for i, d in enumerate(enc.embed.hidden):
        dense(f"embed/hidden_{i}", d)
    dense("embed/out", enc.embed.out)
    for i in range(LAYERS):
        a = enc.attn[i]
        for name in ("q", "k", "v"):
            dense(f"block_{i}/{name}", getattr(a, f"{name}_proj"), bias=False)
        dense(f"block_{i}/out", a.out_proj)
        w[f"block_{i}/a_space"], w[f"block_{i}/log_b_space"] = a.a_space.numpy(), a.log_b_space.numpy()
        ln(f"block_{i}/norm1", enc.norm1[i])
        ln(f"block_{i}/norm2", enc.norm2[i])
        dense(f"block_{i}/ffn/hidden_0", enc.ffn[i].hidden[0])
        dense(f"block_{i}/ffn/out", enc.ffn[i].out)
    ln("norm_out", enc.norm_out)
    for i, d in enumerate(model.head.hidden):
        dense(f"head/hidden_{i}", d)
    dense("head/out", model.head.out)
    n = sum(v.size for v in w.values())
    if n != model.count_params():
        raise SystemExit(f"exported {n} weights but the model has {model.count_params()}")
    return w


def export(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    import taylorformer as tfm
    from taylorformer.task import make_task

    keras.utils.set_random_seed(args.seed)
    model = tfm.build_model({"preset": "bsa-tnp", "dim_x": 2, "dim_y": 1})
    task = make_task("gp-2d-bsa", None)
    batch = next(iter(task.dataset("test", batch_size=args.batch, num_batches=1)))
    batch = {k: v for k, v in batch.items() if k in ("xc", "yc", "xt", "yt", "mask_c", "mask_t")}
    dist = model.predict_distribution(batch)
    mean, std = dist.mean().numpy(), dist.stddev().numpy()
    logp = tfm.loglik  # noqa: F841  (the per-task mean; per point below)
    yt = batch["yt"].numpy().astype(np.float64)
    lp = (-0.5 * ((yt - mean) / std) ** 2 - np.log(std.astype(np.float64)) - 0.5 * np.log(2 * np.pi))[..., 0]
    w = our_weights(model)
    os.makedirs(os.path.dirname(args.file), exist_ok=True)
    np.savez(args.file, **{f"w:{k}": v for k, v in w.items()},
             **{f"b:{k}": v.numpy() for k, v in batch.items()},
             ours_mean=mean, ours_std=std, ours_logp=lp,
             meta=json.dumps({"seed": args.seed, "tensorflow": tf.__version__,
                              "num_params": int(model.count_params()),
                              "nc_real": batch["mask_c"].numpy().sum(1).tolist()}))
    print(json.dumps({"wrote": args.file, "num_params": int(model.count_params()),
                      "batch": {k: list(v.shape) for k, v in batch.items()},
                      "nc_real": batch["mask_c"].numpy().sum(1).astype(int).tolist()}))


# ------------------------------------------------------------------ reference (dl4bi venv)
def ref_params(ours, template, flags):
    """The reference parameter tree (flat ``{path: array}``) holding our weights.

    Token embedding: ours is ``MLP([x slot (2, zeros), y, flag])`` with flag 0 for the
    context and 1 for the targets; the reference's is ``MLP([e[obs] (4), f])`` with a
    learned 2 x 4 table ``e``, obs = 1 for the context, 0 for the targets (f = 0 there).
    Setting ``e[1] = 0``, ``e[0] = (1, 0, 0, 0)``, the first kernel's row 0 to our flag
    row and row 4 to our y row (rows 1-3 zero) gives the same first layer exactly.
    """
    W = lambda k: ours[k]  # noqa: E731
    out = {}

    def put(path, value):
        path = "params/" + path
        if path not in template:
            raise SystemExit(f"reference has no parameter {path}")
        if tuple(template[path].shape) != tuple(value.shape):
            raise SystemExit(f"{path}: reference shape {template[path].shape}, ours {value.shape}")
        if path in out:
            raise SystemExit(f"{path} set twice")
        out[path] = np.asarray(value, np.float32)

    table = np.zeros((2, 4), np.float32)
    table[0, 0] = 1.0  # unobserved (test) points
    put("embed_obs/embedding", table)
    k0 = W("embed/hidden_0/kernel")  # [x0, x1, y, flag] -> 256
    first = np.zeros((5, k0.shape[1]), np.float32)
    first[0], first[4] = k0[3], k0[2]
    put("embed_all/Dense_0/kernel", first)
    put("embed_all/Dense_0/bias", W("embed/hidden_0/bias"))
    for i, name in ((1, "embed/hidden_1"), (2, "embed/out")):
        put(f"embed_all/Dense_{i}/kernel", W(f"{name}/kernel"))
        put(f"embed_all/Dense_{i}/bias", W(f"{name}/bias"))
    if "no_embed_norm" in flags:
        final = "FinalNormOnly_1/ln"
    else:  # the reference's post-embedding LayerNorm as the identity map's nearest: scale 1, bias 0
        final = "LayerNorm_1"
        put("LayerNorm_0/scale", np.ones(64, np.float32))
        put("LayerNorm_0/bias", np.zeros(64, np.float32))
    put(f"{final}/scale", W("norm_out/gamma"))
    put(f"{final}/bias", W("norm_out/beta"))
    for i in range(LAYERS):
        blk, src = f"KRBlock_{i}", f"block_{i}"
        for r, o in (("proj_qs", "q"), ("proj_ks", "k"), ("proj_vs", "v")):
            if "no_qkv_bias" in flags:
                put(f"{blk}/attn/{r}/kernel", W(f"{src}/{o}/kernel"))
            else:
                put(f"{blk}/attn/{r}/Dense_0/kernel", W(f"{src}/{o}/kernel"))
                put(f"{blk}/attn/{r}/Dense_0/bias", np.zeros(128, np.float32))
        put(f"{blk}/attn/proj_out/Dense_0/kernel", W(f"{src}/out/kernel"))
        put(f"{blk}/attn/proj_out/Dense_0/bias", W(f"{src}/out/bias"))
        put(f"{blk}/attn/attn/s_bias_a", W(f"{src}/a_space"))
        if "log_b" in flags:
            put(f"{blk}/attn/attn/s_bias_log_b", W(f"{src}/log_b_space"))
        else:
            put(f"{blk}/attn/attn/s_bias_b", np.exp(W(f"{src}/log_b_space")))
        put(f"{blk}/norm/scale", W(f"{src}/norm1/gamma"))
        put(f"{blk}/norm/bias", W(f"{src}/norm1/beta"))
        put(f"{blk}/LayerNorm_0/scale", W(f"{src}/norm2/gamma"))
        put(f"{blk}/LayerNorm_0/bias", W(f"{src}/norm2/beta"))
        put(f"{blk}/ffn/Dense_0/kernel", W(f"{src}/ffn/hidden_0/kernel"))
        put(f"{blk}/ffn/Dense_0/bias", W(f"{src}/ffn/hidden_0/bias"))
        put(f"{blk}/ffn/Dense_1/kernel", W(f"{src}/ffn/out/kernel"))
        put(f"{blk}/ffn/Dense_1/bias", W(f"{src}/ffn/out/bias"))
    for i, name in ((0, "head/hidden_0"), (1, "head/hidden_1"), (2, "head/out")):
        put(f"head/Dense_{i}/kernel", W(f"{name}/kernel"))
        put(f"head/Dense_{i}/bias", W(f"{name}/bias"))
    missing = set(template) - set(out)
    if missing:
        raise SystemExit(f"reference parameters not set: {sorted(missing)}")
    return out


def unflatten(flat):
    tree = {}
    for path, v in flat.items():
        node = tree
        *parents, leaf = path.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = v
    return tree


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.abs(b).max()
    big = np.abs(b) >= 1e-3 * scale
    return {"max_abs": float(np.abs(a - b).max()), "max_rel": float(np.abs(a - b).max() / scale),
            "max_rel_elementwise": float((np.abs(a - b)[big] / np.abs(b)[big]).max())}


def compare(args):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    from jax.scipy.stats import norm

    import ref_model

    data = np.load(args.file)
    ours = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
    batch = {k[2:]: data[k] for k in data.files if k.startswith("b:")}
    inputs = {"s_ctx": jnp.asarray(batch["xc"]), "f_ctx": jnp.asarray(batch["yc"]),
              "mask_ctx": jnp.asarray(batch["mask_c"] > 0), "s_test": jnp.asarray(batch["xt"])}
    yt = batch["yt"].astype(np.float64)

    def run(flags):
        model, _ = ref_model.build(flags, chunk=args.chunk)
        template = ref_model.flatten(ref_model.init(model))
        params = unflatten(ref_params(ours, template, flags))
        out = jax.jit(lambda p: model.apply(p, training=False, **inputs))(params)
        mu, std = np.asarray(out.mu), np.asarray(out.std)
        lp = np.asarray(norm.logpdf(yt, mu.astype(np.float64), std.astype(np.float64)))[..., 0] \
            if jax.config.jax_enable_x64 else \
            (-0.5 * ((yt - mu) / std) ** 2 - np.log(std.astype(np.float64)) - 0.5 * np.log(2 * np.pi))[..., 0]
        return mu, std, lp, sum(v.size for v in template.values())

    like = COPY_FLAGS
    mu, std, lp, n_ref = run(like)
    result = {"impl": "dl4bi vs taylorformer", "flags": list(like), "ref_num_params": n_ref,
              "ours_num_params": json.loads(str(data["meta"]))["num_params"],
              "mean": rel(data["ours_mean"], mu), "std": rel(data["ours_std"], std),
              "loglik": rel(data["ours_logp"], lp),
              "loglik_task_means": {"ours": data["ours_logp"].mean(1).tolist(), "ref": lp.mean(1).tolist()},
              "chunk": args.chunk or 1024, "jax": jax.__version__}
    print(json.dumps(result), flush=True)
    if args.effects:
        for flag in ("relu", "ln_eps", "no_embed_norm", "min_std"):
            f = tuple(x for x in like if x != flag)
            mu2, std2, lp2, _ = run(f)
            print(json.dumps({"without_flag": flag, "mean": rel(mu2, mu), "std": rel(std2, std),
                              "loglik": rel(lp2, lp),
                              "loglik_mean_shift": float((lp2 - lp).mean())}), flush=True)
    ok = max(result[k]["max_rel"] for k in ("mean", "std", "loglik")) <= args.tol
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("export", "compare"))
    ap.add_argument("--file", default=DEFAULT, help="the exchange file (default data/function-check.npz)")
    ap.add_argument("--seed", type=int, default=0, help="export: seed of our initial weights")
    ap.add_argument("--batch", type=int, default=4, help="export: tasks in the padded batch")
    ap.add_argument("--chunk", type=int, default=None, help="compare: the reference's scan chunk size")
    ap.add_argument("--tol", type=float, default=1e-5, help="compare: exit 1 above this max_rel")
    ap.add_argument("--effects", action="store_true", help="compare: also the effect of each function flag")
    args = ap.parse_args(argv)
    return export(args) if args.mode == "export" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
