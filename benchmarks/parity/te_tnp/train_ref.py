"""Train the authors' TE-TNP (cambridge-mlg/tetnp on cambridge-mlg/tnp, PyTorch) on dumped batches.

Run with the reference virtualenv made by setup.sh, after ``dump_data.py``::

    "${REF_VENV:-$HOME/.cache/ref-torch}/bin/python" train_ref.py --data data/X.npz --steps 2000 --eval-every 500

The model is assembled from the reference packages' own classes as the Hydra config
``experiments/configs/models/tetnp.yml`` does: ``TETNP(TETNPEncoder(TETNPTransformerEncoder(
mhca_layer=MultiHeadCrossTEAttentionLayer, num_layers), y_encoder=MLP), TNPDecoder(MLP),
HeteroscedasticNormalLikelihood)``; one TE cross-attention layer per depth serves both the
context self-attention and the target cross-attention (``mhsa_layer=None``); kernel MLP
``[x_n - x_m, q.k/4 per head] -> 128 -> 128 -> 8`` (ReLU); no location update (``phi``
unset in the config); pre-norm; token MLP ``[y, flag] -> 128 -> 128 -> 128``; head MLP
``128 -> 128 -> 128 -> 2``. Sizes come from ``--width/--layers/--heads/--head-dim/
--kernel-width`` (defaults: the paper's 128 / 5 / 8 / 16 / 128); the minimum predictive
std is 1e-3 (the config's ``min_noise`` is 0).

The one addition: the reference's ``TETNPTransformerEncoder`` ignores masks (``"mask is not
currently being used"``: its generators give every task of a batch the same Nc), while the
dumped batches pad Nc. :class:`MaskedTETNPTransformerEncoder` runs the same layers in the
same order and hands each attention a key mask (``[m, nc, nc]`` for context self-attention,
``[m, nt, nc]`` for target cross-attention; True = masked, the reference attention's
``masked_fill`` convention), which the reference layers accept.

The reference as published has the architecture of taylorformer's ``te-tnp`` preset
(README). Options that make it like the preset before issue 35: ``--init keras`` (Keras'
initialisers, each layer drawn on its own), ``--scale softplus`` (the normal likelihood's
``softplus_of="scale"``), ``--parallel-update`` (the encoder's ``update_order="parallel"``),
``--final-norm`` (a LayerNorm after the last layer). Training (loss, AdamW with Keras' epsilon placement,
global-norm clipping at 0.5) is ``../tnp_d/train_ref.py``'s.
"""
import argparse
import contextlib
import importlib.util
import json
import math
import os
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
for var in ("REF_TNP_SRC", "REF_TETNP_SRC"):  # the reference checkouts (setup.sh also puts them on the path)
    if os.environ.get(var):
        sys.path.insert(0, os.environ[var])

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tnp.likelihoods.gaussian import HeteroscedasticNormalLikelihood  # noqa: E402
from tnp.models.tnp import TNPDecoder  # noqa: E402
from tnp.networks.mlp import MLP  # noqa: E402
from tetnp.models.tetnp import TETNP, TETNPEncoder  # noqa: E402
from tetnp.networks.teattention_layers import (MultiHeadCrossTEAttentionLayer,  # noqa: E402
                                               MultiHeadSelfTEAttentionLayer)
from tetnp.networks.tetransformer import TETNPTransformerEncoder  # noqa: E402


def _load_tnpd_helpers():
    """``../tnp_d/train_ref.py``: optimizer, step, loss helpers shared by both comparisons."""
    spec = importlib.util.spec_from_file_location(
        "tnpd_train_ref", os.path.join(HERE, os.pardir, "tnp_d", "train_ref.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tnpd = _load_tnpd_helpers()
KEYS = tnpd.KEYS
to_torch, make_optimizer = tnpd.to_torch, tnpd.make_optimizer
SoftplusNormalLikelihood, keras_init_ = tnpd.SoftplusNormalLikelihood, tnpd.keras_init_


class MaskedTETNPTransformerEncoder(TETNPTransformerEncoder):
    """``TETNPTransformerEncoder.forward`` with key masks handed to the layers.

    ``mask_c`` ([m, nc] bool, True = real context point) is set by :func:`context_mask`
    around a model call. ``parallel_update=True``: targets attend to the context as it
    was before this layer's self-attention (taylorformer) instead of after it (reference).
    """

    mask_c = None
    parallel_update = False

    def forward(self, zc, zt, xc, xt, mask=None):
        m, nc, nt = zc.shape[0], zc.shape[1], zt.shape[1]
        if self.mask_c is None:
            sa_mask = ca_mask = None
        else:
            pad = ~self.mask_c[:, None, :]  # True = masked out
            sa_mask, ca_mask = pad.expand(m, nc, nc), pad.expand(m, nt, nc)
        for mhsa_layer, mhca_layer in zip(self.mhsa_layers, self.mhca_layers):
            zc_in, xc_in = zc, xc
            if isinstance(mhsa_layer, MultiHeadSelfTEAttentionLayer):
                zc, xc = mhsa_layer(zc, xc, sa_mask)
            elif isinstance(mhsa_layer, MultiHeadCrossTEAttentionLayer):
                zc, xc = mhsa_layer(zc, zc, xc, xc, sa_mask)
            else:
                raise TypeError("Unknown layer type.")
            if self.parallel_update:
                zt, xt = mhca_layer(zt, zc_in, xt, xc_in, ca_mask)
            else:
                zt, xt = mhca_layer(zt, zc, xt, xc, ca_mask)
        return zt


@contextlib.contextmanager
def context_mask(model, mask_c):
    encoder = model.encoder.transformer_encoder
    encoder.mask_c = mask_c
    try:
        yield
    finally:
        encoder.mask_c = None


def build_reference(dim_x=1, dim_y=1, layers=5, dz=128, heads=8, head_dim=16, kernel_width=128,
                    min_scale=1e-3, scale="ref", parallel_update=False, final_norm=False):
    """The TE-TNP of experiments/configs/models/tetnp.yml at the given size."""
    kernel = MLP(in_dim=heads + dim_x, out_dim=heads, num_layers=2, width=kernel_width)
    mhca = MultiHeadCrossTEAttentionLayer(embed_dim=dz, num_heads=heads, head_dim=head_dim,
                                          kernel=kernel, feedforward_dim=dz, norm_first=True)
    transformer = MaskedTETNPTransformerEncoder(num_layers=layers, mhca_layer=mhca)
    transformer.parallel_update = parallel_update
    y_encoder = MLP(in_dim=dim_y + 1, out_dim=dz, num_layers=2, width=dz)
    z_decoder = MLP(in_dim=dz, out_dim=2 * dim_y, num_layers=2, width=dz)
    if final_norm:
        z_decoder = nn.Sequential(nn.LayerNorm(dz), z_decoder)
    likelihood = (SoftplusNormalLikelihood if scale == "softplus" else HeteroscedasticNormalLikelihood)(
        min_noise=min_scale)
    return TETNP(TETNPEncoder(transformer_encoder=transformer, y_encoder=y_encoder),
                 TNPDecoder(z_decoder=z_decoder), likelihood)


def predictive(model, batch):
    """The predictive distribution of a padded batch (``batch`` from :func:`to_torch`)."""
    with context_mask(model, batch["mask_c"]):
        return model(batch["xc"], batch["yc"], batch["xt"])


def task_loglik(model, batch):
    """Mean log-likelihood per real target point, per task: [B] float64 (as taylorformer)."""
    logp = predictive(model, batch).log_prob(batch["yt"]).double().sum(-1)
    mask = batch["mask_t"]
    return (logp * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def train_step(model, optimizer, batch, clip=0.5):
    """One step: loss = -mean over tasks of the per-point log-likelihood; clip; AdamW."""
    optimizer.num_steps += 1
    if optimizer.keras_eps is not None:
        for group in optimizer.param_groups:
            group["eps"] = optimizer.keras_eps / math.sqrt(1.0 - group["betas"][1] ** optimizer.num_steps)
    optimizer.zero_grad(set_to_none=True)
    loss = -task_loglik(model, batch).mean().float()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return float(loss.item())


def add_model_args(parser):
    parser.add_argument("--width", type=int, default=128, help="Dz (paper 128)")
    parser.add_argument("--layers", type=int, default=5)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=16)
    parser.add_argument("--kernel-width", type=int, default=128, help="hidden width of the kernel MLP")
    parser.add_argument("--min-scale", type=float, default=1e-3)
    parser.add_argument("--init", choices=["torch", "keras"], default="torch")
    parser.add_argument("--scale", choices=["ref", "softplus"], default="ref",
                        help="ref: sqrt(softplus(raw)) + min; softplus: softplus(raw) + min")
    parser.add_argument("--parallel-update", action="store_true")
    parser.add_argument("--final-norm", action="store_true")
    parser.add_argument("--no-check-shapes", action="store_true",
                        help="turn off the reference's check_shapes decorators (on by default, as in its runs)")


def model_from_args(args):
    if args.no_check_shapes:
        from check_shapes import set_enable_check_shapes
        set_enable_check_shapes(False)
    model = build_reference(layers=args.layers, dz=args.width, heads=args.heads, head_dim=args.head_dim,
                            kernel_width=args.kernel_width, min_scale=args.min_scale, scale=args.scale,
                            parallel_update=args.parallel_update, final_norm=args.final_norm)
    if args.init == "keras":
        keras_init_(model)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="npz from dump_data.py")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: all dumped batches)")
    parser.add_argument("--eval-every", type=int, default=0, help="also evaluate every K steps (0: only at the end)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed of the initial weights")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--eps", type=float, default=1e-7, help="AdamW epsilon (Keras default 1e-7)")
    parser.add_argument("--eps-mode", choices=["keras", "torch"], default="keras")
    parser.add_argument("--clip", type=float, default=0.5, help="global gradient-norm clip")
    add_model_args(parser)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    train, test, gt, meta, steps = tnpd.load_data(args.data, args.steps)

    torch.manual_seed(args.seed)
    model = model_from_args(args)
    optimizer = make_optimizer(model, args.lr, args.weight_decay, args.eps, args.eps_mode)

    mean, err, run = tnpd.train_on_batches(model, optimizer, train, test, steps, args.eval_every, args.clip,
                                           task_loglik, train_step)
    options = {k: getattr(args, k) for k in ("init", "scale", "parallel_update", "final_norm", "no_check_shapes",
                                             "width", "layers", "heads", "head_dim", "kernel_width",
                                             "lr", "weight_decay", "eps", "eps_mode", "clip", "min_scale",
                                             "seed", "threads")}
    print(json.dumps(tnpd.summary("cambridge-mlg/tetnp", model, mean, err, run, gt, options, args.data, meta,
                                  step=run["done"])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
