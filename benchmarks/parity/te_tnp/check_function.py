"""Function equality: taylorformer's ``te-tnp`` and the authors' TE-TNP with the same weights.

Two steps, one per virtualenv (the weights travel through an .npz file)::

    python check_function.py export --data data/X.npz                       # taylorformer venv
    "$REF_VENV/bin/python" check_function.py compare --data data/X.npz      # torch venv

``export`` builds ``te-tnp`` through ``taylorformer.workflow.training.Trainer`` (``--seed``, sizes as
``train_ours.py``), saves its initial weights under structural names and its predictive
means, scales and per-task log-likelihoods on the first ``--batches`` padded test batches
of the file; with ``--steps K`` it also runs K of the Trainer's own steps on the first K
training batches and keeps the losses and the test log-likelihoods after them.
``compare`` builds the reference as published (the preset's architecture), with the flags
given (each makes it like an earlier choice of ours, README), copies the
weights in (Keras kernels ``[in, out]`` -> torch ``[out, in]``; the reference's kernel MLP
takes ``[x_n - x_m, dots]``, ours ``[dots, x_n - x_m]``: the first layer's rows are
permuted), runs the same batches and prints the largest relative and absolute
differences of means, scales and log-likelihoods; then the same K steps (AdamW,
clipping, loss) and the differences after them. ``--float64-floor`` also runs the reference in
float64 from the same weights: its float32 round-off alone. Exit status 1 if the initial normwise
relative difference (max |a - b| / max |b|) of any of the three exceeds ``--tol``.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t")


def export(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    import taylorformer
    import train_ours

    data = np.load(args.data)
    meta = json.loads(str(data["meta"]))
    trainer = train_ours.make_trainer(args, meta, max(args.steps, 1), args.seed,
                                      tempfile.mkdtemp(prefix="tetnp-check-"))
    model = trainer.model
    enc, w = model.encoder, {}

    def dense(name, layer):
        w[f"{name}.kernel"] = layer.kernel.numpy()
        if layer.bias is not None:
            w[f"{name}.bias"] = layer.bias.numpy()

    def norm(name, layer):
        w[f"{name}.gamma"], w[f"{name}.beta"] = layer.gamma.numpy(), layer.beta.numpy()

    for i, layer in enumerate(enc.embed.hidden):
        dense(f"embed.hidden{i}", layer)
    dense("embed.out", enc.embed.out)
    for i in range(enc.num_layers):
        attn = enc.attn[i]
        if attn.location_update or attn.form != "post":
            raise SystemExit("export handles the te-tnp preset's attention (form 'post', no location update)")
        for p in ("q", "k", "v", "out"):
            dense(f"layer{i}.{p}", getattr(attn, f"{p}_proj"))
        for j, (kernel, bias) in enumerate(attn.kernel.params):
            w[f"layer{i}.rho{j}.kernel"], w[f"layer{i}.rho{j}.bias"] = kernel.numpy(), bias.numpy()
        norm(f"layer{i}.norm1", enc.norm1[i])
        norm(f"layer{i}.norm2", enc.norm2[i])
        dense(f"layer{i}.ffn.hidden0", enc.ffn[i].hidden[0])
        dense(f"layer{i}.ffn.out", enc.ffn[i].out)
    if enc.final_norm:
        norm("norm_out", enc.norm_out)
    for i, layer in enumerate(model.head.hidden):
        dense(f"head.hidden{i}", layer)
    dense("head.out", model.head.out)

    def outputs():
        means, scales, lls = [], [], []
        for j in range(args.batches):
            batch = {k: tf.constant(data[f"test_{k}"][j]) for k in KEYS}
            dist = model.distribution(batch)
            means.append(dist.mean().numpy()), scales.append(dist.stddev().numpy())
            lls.append(taylorformer.loglik(model, batch).numpy())
        return np.stack(means), np.stack(scales), np.concatenate(lls)

    mean, scale, ll = outputs()
    out = {}
    if args.steps:
        step = trainer.compiled_step()
        out["train_losses"] = np.array([
            float(step({k: tf.constant(data[f"train_{k}"][i]) for k in KEYS + ("gt_loglik", "gt_loglik_joint")})["loss"])
            for i in range(args.steps)])
        out["mean_after"], out["scale_after"], out["loglik_after"] = outputs()
    np.savez(args.out, mean=mean, scale=scale, loglik=ll, steps=np.array(args.steps),
             batches=np.array(args.batches), **out, **w)
    print(json.dumps({"out": args.out, "arrays": len(w), "test_loglik_mean": float(ll.mean()),
                      "params": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
                      "steps": args.steps}))


def rel_diff(a, b):
    """Largest elementwise |a - b| / |b|, largest |a - b|, and max |a - b| / max |b| (normwise:
    an elementwise relative difference is large where a mean happens to be near 0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    diff = np.abs(a - b)
    return float(np.max(diff / np.abs(b))), float(np.max(diff)), float(np.max(diff) / np.max(np.abs(b)))


def compare(args):
    import torch

    import train_ref

    torch.set_num_threads(args.threads)
    w = np.load(args.weights)
    model = train_ref.model_from_args(args)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    heads = args.heads

    def dense(name, linear, rows=None):
        with torch.no_grad():
            kernel = w[f"{name}.kernel"]
            if rows is not None:
                kernel = kernel[rows]
            linear.weight.copy_(t(kernel.T))
            if linear.bias is not None:
                linear.bias.copy_(t(w[f"{name}.bias"]))

    def norm(name, layer):
        with torch.no_grad():
            layer.weight.copy_(t(w[f"{name}.gamma"]))
            layer.bias.copy_(t(w[f"{name}.beta"]))

    y_enc = model.encoder.y_encoder.net
    dense("embed.hidden0", y_enc[0]), dense("embed.hidden1", y_enc[2]), dense("embed.out", y_enc[4])
    dim_x = w["layer0.rho0.kernel"].shape[0] - heads
    ref_order = list(range(heads, heads + dim_x)) + list(range(heads))  # [diff, dots] from ours [dots, diff]
    for i, layer in enumerate(model.encoder.transformer_encoder.mhca_layers):
        for p, linear in (("q", layer.attn.to_q), ("k", layer.attn.to_k), ("v", layer.attn.to_v),
                          ("out", layer.attn.to_out[0])):
            dense(f"layer{i}.{p}", linear)
        rho = layer.attn.kernel.net
        dense(f"layer{i}.rho0", rho[0], rows=ref_order), dense(f"layer{i}.rho1", rho[2])
        dense(f"layer{i}.rho2", rho[4])
        norm(f"layer{i}.norm1", layer.norm1)
        norm(f"layer{i}.norm2", layer.norm2)
        dense(f"layer{i}.ffn.hidden0", layer.ff_block[0])
        dense(f"layer{i}.ffn.out", layer.ff_block[3])
    if args.final_norm:
        final_norm, head = model.decoder.z_decoder[0], model.decoder.z_decoder[1].net
        norm("norm_out", final_norm)
    else:
        head = model.decoder.z_decoder.net
    dense("head.hidden0", head[0]), dense("head.hidden1", head[2]), dense("head.out", head[4])
    copied = sum(p.numel() for p in model.parameters())
    expected = sum(w[k].size for k in w.files if "." in k and (args.final_norm or not k.startswith("norm_out")))
    if copied != expected:
        raise SystemExit(f"parameter counts differ: torch {copied}, taylorformer {expected}")

    data = np.load(args.data)
    batches = int(w["batches"])

    def outputs(net=model, dtype=torch.float32):
        net.eval()
        means, scales, lls = [], [], []
        with torch.no_grad():
            for j in range(batches):
                batch = train_ref.to_torch({k: data[f"test_{k}"][j] for k in KEYS})
                batch.update({k: batch[k].to(dtype) for k in ("xc", "yc", "xt", "yt")})
                dist = train_ref.predictive(net, batch)
                means.append(dist.mean.numpy()), scales.append(dist.stddev.numpy())
                lls.append(train_ref.task_loglik(net, batch).numpy())
        net.train()
        return np.stack(means), np.stack(scales), np.concatenate(lls)

    mean, scale, ll = outputs()
    result = {"params": copied, "test_tasks": int(ll.size),
              "flags": {k: getattr(args, k) for k in ("init", "scale", "parallel_update", "final_norm")}}
    worst = 0.0
    for name, ours, ref in (("mean", w["mean"], mean), ("scale", w["scale"], scale), ("loglik", w["loglik"], ll)):
        rel, abs_, normwise = rel_diff(ref, ours)
        result[f"{name}_max_rel"], result[f"{name}_max_abs"] = rel, abs_
        result[f"{name}_rel_normwise"] = normwise
        worst = max(worst, normwise)
    result.update({"taylorformer_loglik_mean": float(w["loglik"].mean()), "reference_loglik_mean": float(ll.mean())})
    if args.float64_floor:  # float32 round-off of the reference alone: the same weights in float64
        import copy
        exact = outputs(copy.deepcopy(model).double(), torch.float64)
        for name, ref32, ref64 in zip(("mean", "scale", "loglik"), (mean, scale, ll), exact):
            rel, abs_, normwise = rel_diff(ref32, ref64)
            result[f"ref32_vs_ref64_{name}_max_rel"], result[f"ref32_vs_ref64_{name}_max_abs"] = rel, abs_
            result[f"ref32_vs_ref64_{name}_rel_normwise"] = normwise
        for name, ours, ref64 in zip(("mean", "scale", "loglik"), (w["mean"], w["scale"], w["loglik"]), exact):
            result[f"ours_vs_ref64_{name}_max_abs"] = rel_diff(ours, ref64)[1]
    steps = int(w["steps"])
    if steps:
        optimizer = train_ref.make_optimizer(model)
        losses = [train_ref.train_step(model, optimizer, train_ref.to_torch(
            {k: data[f"train_{k}"][i] for k in KEYS})) for i in range(steps)]
        _, _, after = outputs()
        result.update({
            "steps": steps,
            # ours exports the Trainer's logged loss: the running mean over the steps so far
            "max_abs_diff_train_loss_running_mean": float(np.max(np.abs(
                np.cumsum(losses) / np.arange(1, steps + 1) - w["train_losses"]))),
            "loglik_after_max_rel": rel_diff(after, w["loglik_after"])[0],
            "taylorformer_loglik_mean_after": float(w["loglik_after"].mean()),
            "reference_loglik_mean_after": float(after.mean()),
        })
    print(json.dumps(result))
    return 0 if worst <= args.tol else 1


def main(argv=None):
    import train_ours  # argument definitions shared with the trainers (no TensorFlow import)

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("export", help="taylorformer venv: weights + predictions")
    p.add_argument("--out", default=os.path.join(HERE, "data", "tetnp-init.npz"))
    p.add_argument("--steps", type=int, default=0, help="also train K steps with the Trainer's step")
    p.add_argument("--batches", type=int, default=4, help="padded test batches to compare (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", required=True)
    train_ours.add_model_args(p)
    p = sub.add_parser("compare", help="torch venv: load them into the reference")
    p.add_argument("--weights", default=os.path.join(HERE, "data", "tetnp-init.npz"))
    p.add_argument("--data", required=True)
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--float64-floor", action="store_true",
                   help="also run the reference in float64 from the same weights: the float32 round-off floor")
    args, rest = parser.parse_known_args(argv)
    if args.cmd == "export":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return export(args)
    for var in ("REF_TNP_SRC", "REF_TETNP_SRC"):
        if os.environ.get(var):
            sys.path.insert(0, os.environ[var])
    import train_ref

    ref_parser = argparse.ArgumentParser()
    train_ref.add_model_args(ref_parser)
    vars(args).update(vars(ref_parser.parse_args(rest)))
    return compare(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
