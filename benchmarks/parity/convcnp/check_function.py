"""Function equality: taylorformer's ``convcnp`` and cambridge-mlg/tnp's ConvCNP with the same weights.

Two steps, one per virtualenv (the batch and the weights travel through an .npz file)::

    python check_function.py export [--cnn unet] [--dim-x 2]            # taylorformer venv
    "$REF_VENV/bin/python" check_function.py compare [--cnn unet] [--dim-x 2]   # torch venv

``export`` builds the ``convcnp`` preset with the overrides that make it the reference's
GP architecture (``experiments/configs/models/convcnp.yml``: 32 channels, 5 blocks of
kernel 9, a two-layer embedding of ``[y, density]`` with no density normalisation, a fixed
grid of 128 points per dimension on the target range [-4, 4], a two-layer head of 32, the
likelihood's pre-softplus variance with no floor), draws one padded batch of the ``gp``
task (the reference generator's ranges: context [-2, 2], targets [-4, 4], 1 to 64 context
and 128 target points; in 2-D a grid of 32 x 32 and 256 targets) and saves the batch, the
model's initial weights and its predictive means, scales and per-task log-likelihoods.
``compare`` builds the reference from its classes (``ConvCNP``, ``ConvCNPEncoder``,
``SetConvGridEncoder``, ``SetConvGridDecoder``, ``CNN`` or ``UNet``, ``MLP``,
``TNPDecoder``, ``HeteroscedasticNormalLikelihood``), copies the weights in (Keras kernels
``[in, out]`` -> torch ``[out, in]``, conv kernels ``[*k, in, out]`` -> ``[out, in, *k]``, the
raw lengthscales as they are: both sides take ``1e-5 + softplus(raw)``), runs each task
on its real points (the reference has no masks) and prints the largest differences.
Exit status 1 if a normwise relative difference (max |a - b| / max |b|) exceeds ``--tol``.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t")
CHANNELS, BLOCKS, KERNEL = 32, 5, 9


def grid_points(dim_x):
    """Grid points per dimension on [-4, 4]: the reference config's 128 in 1-D, 32 per axis in 2-D."""
    return 128 if dim_x == 1 else 32


def default_path(args):
    return os.path.join(HERE, "data", f"convcnp-{args.cnn}-{args.dim_x}d.npz")


def export(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    import taylorformer
    from taylorformer.task import make_task

    tf.keras.utils.set_random_seed(args.seed)
    n = grid_points(args.dim_x)
    model = taylorformer.build_model(
        "convcnp", dim_x=args.dim_x,
        encoder={"channels": CHANNELS, "cnn": args.cnn, "layers": BLOCKS, "kernel_size": KERNEL,
                 "normalise": False, "embed_hidden_layers": 2, "grid_range": [-4.0, 4.0], "grid_points": n,
                 "init_lengthscale": 0.1},
        head={"width": CHANNELS, "hidden_layers": 2},
        likelihood={"name": "normal", "min_scale": 0.0, "softplus_of": "variance"})
    task = make_task("gp", {"dim_x": args.dim_x, "context_range": [-2.0, 2.0], "target_range": [-4.0, 4.0],
                            "num_context": [1, 64], "num_target": 128 if args.dim_x == 1 else 256})
    batch = {k: np.asarray(v) for k, v in next(iter(task.dataset("test", batch_size=args.batch_size,
                                                                    seed=args.seed, num_batches=1))).items()}
    batch = {k: batch[k] for k in KEYS}
    enc, w = model.encoder, {}

    def dense(name, layer):
        w[f"{name}.kernel"], w[f"{name}.bias"] = layer.kernel.numpy(), layer.bias.numpy()

    w["setconv_in.raw"] = enc.setconv_in.raw_lengthscale.numpy()
    w["setconv_out.raw"] = enc.setconv_out.raw_lengthscale.numpy()
    for i, layer in enumerate(enc.embed.hidden):
        dense(f"embed.hidden{i}", layer)
    dense("embed.out", enc.embed.out)
    for i, block in enumerate(enc.cnn.stack):
        dense(f"cnn.block{i}", block.conv)
    for i, layer in enumerate(model.head.hidden):
        dense(f"head.hidden{i}", layer)
    dense("head.out", model.head.out)

    tensors = {k: tf.constant(v) for k, v in batch.items()}
    dist = model.distribution(tensors)
    mean, scale = dist.mean().numpy(), dist.stddev().numpy()
    ll = taylorformer.loglik(model, tensors).numpy()
    os.makedirs(os.path.dirname(args.data), exist_ok=True)
    np.savez(args.data, mean=mean, scale=scale, loglik=ll, **{f"batch_{k}": v for k, v in batch.items()}, **w)
    print(json.dumps({"out": args.data, "params": int(model.count_params()), "tasks": int(len(ll)),
                      "num_context": batch["mask_c"].sum(1).astype(int).tolist(),
                      "test_loglik_mean": float(ll.mean())}))


def rel_diff(a, b):
    """Largest elementwise |a - b| / |b| (over b != 0), largest |a - b|, and max |a - b| / max |b|."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    diff, nonzero = np.abs(a - b), b != 0
    return {"max_rel": float(np.max(diff[nonzero] / np.abs(b[nonzero]))), "max_abs": float(np.max(diff)),
            "normwise_rel": float(np.max(diff) / np.max(np.abs(b)))}


def build_reference(args):
    from tnp.likelihoods.gaussian import HeteroscedasticNormalLikelihood
    from tnp.models.convcnp import ConvCNP, ConvCNPEncoder
    from tnp.models.tnp import TNPDecoder
    from tnp.networks.cnn import CNN, UNet
    from tnp.networks.mlp import MLP
    from tnp.networks.setconv import SetConvGridDecoder, SetConvGridEncoder

    d = args.dim_x
    net = (CNN if args.cnn == "conv" else UNet)(dim=d, num_channels=CHANNELS, num_blocks=BLOCKS, kernel_size=KERNEL)
    encoder = ConvCNPEncoder(
        conv_net=net,
        grid_encoder=SetConvGridEncoder(dims=d, grid_range=[[-4.0, 4.0]] * d, grid_shape=[grid_points(d)] * d,
                                        init_lengthscale=0.1),
        grid_decoder=SetConvGridDecoder(dims=d),
        z_encoder=MLP(in_dim=2, out_dim=CHANNELS, num_layers=2, width=CHANNELS))
    decoder = TNPDecoder(z_decoder=MLP(in_dim=CHANNELS, out_dim=2, num_layers=2, width=CHANNELS))
    return ConvCNP(encoder, decoder, HeteroscedasticNormalLikelihood())


def copy_weights(model, w):
    """Copy the exported weights ``w`` (an ``np.load`` of ``export``'s file) into the
    reference ``model`` built by :func:`build_reference`; returns its parameter count."""
    import torch

    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731

    def linear(name, layer):
        with torch.no_grad():
            layer.weight.copy_(t(w[f"{name}.kernel"].T))
            layer.bias.copy_(t(w[f"{name}.bias"]))

    def conv(name, layer):
        kernel = w[f"{name}.kernel"]  # [*k, in, out]
        order = (kernel.ndim - 1, kernel.ndim - 2) + tuple(range(kernel.ndim - 2))
        with torch.no_grad():
            layer.weight.copy_(t(kernel.transpose(order)))
            layer.bias.copy_(t(w[f"{name}.bias"]))

    enc = model.encoder
    with torch.no_grad():
        enc.grid_encoder.lengthscale_param.copy_(t(w["setconv_in.raw"]))
        enc.grid_decoder.lengthscale_param.copy_(t(w["setconv_out.raw"]))
    emb = enc.z_encoder.net
    linear("embed.hidden0", emb[0]), linear("embed.hidden1", emb[2]), linear("embed.out", emb[4])
    for i, block in enumerate(enc.conv_net.conv_blocks):
        conv(f"cnn.block{i}", block.conv)
    head = model.decoder.z_decoder.net
    linear("head.hidden0", head[0]), linear("head.hidden1", head[2]), linear("head.out", head[4])
    copied = sum(p.numel() for p in model.parameters())
    expected = sum(w[k].size for k in w.files if "." in k)
    if copied != expected:
        raise SystemExit(f"parameter counts differ: torch {copied}, taylorformer {expected}")
    return copied


def compare(args):
    import torch

    torch.set_num_threads(args.threads)
    w = np.load(args.data)
    model = build_reference(args)
    copied = copy_weights(model, w)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731

    means, scales, lls, ours_mean, ours_scale = [], [], [], [], []
    model.eval()
    with torch.no_grad():
        for i in range(w["batch_xc"].shape[0]):
            nc, nt = int(w["batch_mask_c"][i].sum()), int(w["batch_mask_t"][i].sum())
            row = {k: t(w[f"batch_{k}"][i:i + 1, :(nc if k[1] == "c" else nt)]) for k in ("xc", "yc", "xt", "yt")}
            dist = model(row["xc"], row["yc"], row["xt"])
            means.append(dist.mean[0].numpy()), scales.append(dist.stddev[0].numpy())
            lls.append(float(dist.log_prob(row["yt"]).sum(-1).mean()))
            ours_mean.append(w["mean"][i, :nt]), ours_scale.append(w["scale"][i, :nt])
    result = {"params": copied, "tasks": len(lls), "cnn": args.cnn, "dim_x": args.dim_x,
              "mean": rel_diff(np.concatenate(ours_mean), np.concatenate(means)),
              "scale": rel_diff(np.concatenate(ours_scale), np.concatenate(scales)),
              "loglik": rel_diff(w["loglik"], lls),
              "taylorformer_loglik_mean": float(w["loglik"].mean()), "reference_loglik_mean": float(np.mean(lls))}
    print(json.dumps(result))
    worst = max(result[k]["normwise_rel"] for k in ("mean", "scale", "loglik"))
    return 0 if worst < args.tol else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cmd", choices=("export", "compare"))
    parser.add_argument("--cnn", choices=("conv", "unet"), default="conv")
    parser.add_argument("--dim-x", type=int, choices=(1, 2), default=1)
    parser.add_argument("--data", default=None, help="the .npz (default data/convcnp-CNN-Dd.npz)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    args = parser.parse_args(argv)
    args.data = args.data or default_path(args)
    if args.cmd == "export":
        return export(args)
    if os.environ.get("REF_TNP_SRC"):
        sys.path.insert(0, os.environ["REF_TNP_SRC"])
    return compare(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
