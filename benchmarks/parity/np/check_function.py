"""Function equality: taylorformer's ``np`` / ``anp`` and Nguyen & Grover's NP / ANP
(tung-nd/TNP-pytorch, ``regression/models/np.py``, ``anp.py``) with the same weights.

Two steps, one per virtualenv (weights, inputs and our outputs travel through an .npz file)::

    python check_function.py export --model anp --out data/anp.npz              # taylorformer venv
    "$REF_VENV/bin/python" check_function.py compare --data data/anp.npz --float64 --out results/function_anp.json   # torch venv

``export`` builds our preset with the reference's GP configuration (``regression/configs/gp``:
width 128, z 128, latent path 4 + 2 dense layers, NP deterministic path 4 + 2, ANP values
2 dense layers then self-attention and keys/queries 2, decoder 3), draws every weight
N(0, std^2) (``--weight-std``, default 0.1; biases and norms too) from ``--seed``, and saves them under the reference's
``state_dict`` names (Keras kernels ``[in, out]`` -> torch ``[out, in]``), one unpadded
test batch of the 1-D GP task, and ours: the prior p(z|C) and posterior q(z|C, T)
parameters, the decoder's means and scales for ``K`` draws of z from the prior (the
predictive's own draws), the per-task predictive log-likelihood ``log mean_k p(y | z_k)``
averaged over targets, and the ELBO and the importance-weighted objective per task for
``S`` draws ``eps`` of the posterior. ``compare`` builds the reference from its classes,
loads the weights with ``strict=True`` (every reference parameter must be given), feeds it
the same inputs, z and eps (``predict(xc, yc, xt, z=...)``; the objectives from its
encoders and decoder as its ``forward`` computes them, over our targets; and its own
training loss, ``forward()`` in training mode with ``Normal.rsample`` given our ``eps``,
against ours with ``reconstruct_context``) and writes the largest differences as JSON; ``--float64`` also runs the reference in float64 (its own
float32 round-off). Exit status 1 if a normwise relative difference exceeds ``--tol``.
"""
import argparse
import json
import math
import os
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
#: the reference's GP configuration, as options of our presets
REFERENCE_CONFIG = {
    "np": {"encoder": {"latent_layers": 4, "latent_post_layers": 2, "layers": 4,
                       "deterministic_post_layers": 2}},
    "anp": {"encoder": {"latent_layers": 2, "latent_post_layers": 2, "layers": 2,
                        "query_layers": 2, "self_attention": True}},
}
OUTPUTS = ("prior_loc", "prior_scale", "posterior_loc", "posterior_scale", "mean", "scale", "loglik",
           "elbo", "iwae", "train_loss_elbo", "train_loss_iwae")


# ------------------------------------------------------------------------- ours
def torch_names(model, name):
    """Our weights under the reference's state_dict names (kernels transposed)."""
    enc, w = model.encoder, {}

    def linear(key, dense):
        w[f"{key}.weight"] = dense.kernel.numpy().T
        if dense.bias is not None:
            w[f"{key}.bias"] = dense.bias.numpy()

    def stack(key, mlp, first=0):
        """build_mlp: Linear at 0, 2, 4, ... (ReLUs between)."""
        for i, dense in enumerate(mlp.hidden + [mlp.out]):
            linear(f"{key}.{first + 2 * i}", dense)

    def block(key, mab):
        for part in ("q", "k", "v"):
            linear(f"{key}.fc_{part}", getattr(mab, part))
        linear(f"{key}.fc_out", mab.out)
        for i, norm in ((1, mab.norm1), (2, mab.norm2)):
            w[f"{key}.ln{i}.weight"], w[f"{key}.ln{i}.bias"] = norm.gamma.numpy(), norm.beta.numpy()

    path = enc.latent_path
    if path.attention is not None:  # Sequential(build_mlp, ReLU, SelfAttn)
        stack("lenc.net_pre.0", path.pre)
        block("lenc.net_pre.2", path.attention)
    else:
        stack("lenc.net_pre", path.pre)
    stack("lenc.net_post", path.post)
    if name == "np":
        stack("denc.net_pre", enc.pre)
        stack("denc.net_post", enc.post)
    else:
        stack("denc.net_v", enc.values)
        block("denc.self_attn", enc.attention)
        stack("denc.net_qk", enc.queries)
        block("denc.attn", enc.cross_attention)
    head = model.head.hidden + [model.head.out]  # Decoder: fc, then mlp = [ReLU, Linear, ReLU, ..., Linear]
    linear("dec.fc", head[0])
    for i, dense in enumerate(head[1:]):
        linear(f"dec.mlp.{1 + 2 * i}", dense)
    return w


def export(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    import taylorformer as tfm
    from taylorformer.batch import with_masks
    from taylorformer.task import make_task

    spec = {"preset": args.model, **REFERENCE_CONFIG[args.model],
            "head": {"width": 128, "hidden_layers": 2}}
    spec["encoder"] = {**spec["encoder"], "eval_samples": args.samples}
    model = tfm.build_model(spec)
    rng = np.random.default_rng(args.seed)
    for v in model.trainable_variables:
        v.assign(rng.normal(0, args.weight_std, v.shape).astype("float32"))
    task = make_task("gp", {"num_context": [args.num_context, args.num_context], "num_target": args.num_target})
    raw = next(iter(task.dataset("test", batch_size=args.batch_size, seed=args.seed)))
    batch = with_masks({k: tf.cast(raw[k], tf.float32) for k in ("xc", "yc", "xt", "yt")})
    inputs = {k: batch[k].numpy() for k in ("xc", "yc", "xt", "yt")}

    prior = [t.numpy() for t in model.latent(batch)]
    posterior = [t.numpy() for t in model.latent(batch, posterior=True)]
    z = model.prior_draws(batch)  # [K, B, Dz]: the predictive's draws
    params = model.decode(batch, z)
    eps = rng.normal(size=(args.posterior_draws, args.batch_size, model.encoder.latent_dim)).astype("float32")
    objectives = {}
    for objective in ("elbo", "iwae"):  # over our targets, q from context and targets
        model.encoder.objective, model.encoder.reconstruct_context = objective, False
        objectives[objective] = model.objective(batch, tf.constant(eps)).numpy()
    # the training loss as the reference's forward() computes it: context and targets reconstructed
    model.encoder.reconstruct_context = True
    for objective, draws in (("elbo", eps[:1]), ("iwae", eps)):
        model.encoder.objective = objective
        objectives[f"train_loss_{objective}"] = -np.mean(model.objective(batch, tf.constant(draws)).numpy())
    ours = {"prior_loc": prior[0], "prior_scale": prior[1], "posterior_loc": posterior[0],
            "posterior_scale": posterior[1], "mean": params["loc"].numpy(), "scale": params["scale"].numpy(),
            "loglik": tfm.loglik(model, batch).numpy(), **objectives}
    weights = torch_names(model, args.model)
    meta = {"model": args.model, "seed": args.seed, "weight_std": args.weight_std, "spec": spec, "parameters": int(model.count_params()),
            "weights": sorted(weights)}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    np.savez(args.out, meta=json.dumps(meta), z=z.numpy(), eps=eps,
             **{f"in.{k}": v for k, v in inputs.items()}, **{f"ours.{k}": v for k, v in ours.items()},
             **{f"w.{k}": v for k, v in weights.items()})
    print(f"{args.model}: {meta['parameters']:,} parameters, {len(weights)} tensors -> {args.out}")


# ------------------------------------------------------------------------- reference
class AttrDict(dict):
    """The attribute-access dict the reference's forward() builds (its attrdict package
    fails to import on Python >= 3.10)."""
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


def reference(args, meta, data, dtype):
    """The reference model with our weights and its outputs on the same inputs, z and eps."""
    import torch
    from torch.distributions import Normal, kl_divergence

    src = os.path.join(os.environ.get("REF_NP_SRC", os.path.expanduser("~/.cache/ref-np-src")), "regression")
    sys.path.insert(0, src)
    sys.modules.setdefault("attrdict", types.SimpleNamespace(AttrDict=AttrDict))
    from models.anp import ANP
    from models.np import NP
    from utils.misc import logmeanexp, stack

    torch.manual_seed(0)
    model = (NP if meta["model"] == "np" else ANP)(dim_x=1, dim_y=1, dim_hid=128, dim_lat=128).to(dtype)
    state = {k: torch.tensor(data[f"w.{k}"], dtype=dtype) for k in meta["weights"]}
    model.load_state_dict(state, strict=True)
    model.eval()
    t = lambda key: torch.tensor(data[key], dtype=dtype)  # noqa: E731
    xc, yc, xt, yt = (t(f"in.{k}") for k in ("xc", "yc", "xt", "yt"))
    z, eps = t("z"), t("eps")
    with torch.no_grad():
        pz = model.lenc(xc, yc)
        qz = model.lenc(torch.cat([xc, xt], -2), torch.cat([yc, yt], -2))
        k = z.shape[0]
        py = model.predict(xc, yc, xt, z=z, num_samples=k)
        loglik = logmeanexp(py.log_prob(stack(yt, k)).sum(-1)).mean(-1)  # its tar_ll, per task
        s = eps.shape[0]
        zq = qz.loc + qz.scale * eps
        recon = model.predict(xc, yc, xt, z=zq, num_samples=s).log_prob(stack(yt, s)).sum(-1)  # [S, B, Nt]
        n = xt.shape[-2]
        elbo = (recon.sum(-1).mean(0) - kl_divergence(qz, pz).sum(-1)) / n
        log_w = recon.sum(-1) + pz.log_prob(zq).sum(-1) - qz.log_prob(zq).sum(-1)
        iwae = logmeanexp(log_w) / n
        # its own training loss, forward() in training mode, with our eps as its draws of q
        model.train()
        rsample = Normal.rsample
        Normal.rsample = lambda dist, shape=torch.Size(): dist.loc + dist.scale * eps[:shape[0]]
        try:
            batch = AttrDict(xc=xc, yc=yc, xt=xt, yt=yt, x=torch.cat([xc, xt], -2), y=torch.cat([yc, yt], -2))
            train_elbo = model(batch, num_samples=1).loss
            train_iwae = model(batch, num_samples=s).loss
        finally:
            Normal.rsample = rsample
    out = {"train_loss_elbo": train_elbo, "train_loss_iwae": train_iwae, "prior_loc": pz.loc, "prior_scale": pz.scale, "posterior_loc": qz.loc, "posterior_scale": qz.scale,
           "mean": py.loc, "scale": py.scale, "loglik": loglik, "elbo": elbo, "iwae": iwae}
    return {key: value.double().numpy() for key, value in out.items()}, sum(p.numel() for p in model.parameters())


def differences(ours, ref):
    ours = ours.astype(np.float64)
    diff = np.abs(ours - ref)
    return {"max_abs": float(diff.max()), "normwise_rel": float(diff.max() / max(np.abs(ref).max(), 1e-30)),
            "max_elementwise_rel": float((diff / np.maximum(np.abs(ref), 1e-30)).max())}


def compare(args):
    import torch

    torch.set_num_threads(1)
    data = np.load(args.data)
    meta = json.loads(str(data["meta"]))
    ref32, count = reference(args, meta, data, torch.float32)
    result = {"model": meta["model"], "parameters_ours": meta["parameters"], "parameters_reference": int(count),
              "torch": torch.__version__, "outputs": {}}
    if args.float64:
        ref64, _ = reference(args, meta, data, torch.float64)
    worst = 0.0
    for key in OUTPUTS:
        entry = {"ours_vs_reference": differences(data[f"ours.{key}"], ref32[key])}
        if args.float64:
            entry["reference32_vs_64"] = differences(ref32[key], ref64[key])
            entry["ours_vs_reference64"] = differences(data[f"ours.{key}"], ref64[key])
        result["outputs"][key] = entry
        worst = max(worst, entry["ours_vs_reference"]["normwise_rel"])
    result["mean_loglik"] = {"ours": float(data["ours.loglik"].mean()), "reference": float(ref32["loglik"].mean())}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0 if worst <= args.tol and math.isfinite(worst) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    e.add_argument("--model", choices=sorted(REFERENCE_CONFIG), required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--weight-std", type=float, default=0.1)
    e.add_argument("--batch-size", type=int, default=8)
    e.add_argument("--num-context", type=int, default=20)
    e.add_argument("--num-target", type=int, default=30)
    e.add_argument("--samples", type=int, default=16, help="K draws of z from the prior (eval_samples)")
    e.add_argument("--posterior-draws", type=int, default=4, help="S draws of eps for the objectives")
    c = sub.add_parser("compare")
    c.add_argument("--data", required=True)
    c.add_argument("--out")
    c.add_argument("--float64", action="store_true")
    c.add_argument("--tol", type=float, default=1e-4)
    args = parser.parse_args()
    return export(args) if args.command == "export" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
