"""Train the authors' Table 5 model (TNP-D, TE-TNP or CNP of cambridge-mlg/tnp and
cambridge-mlg/tetnp, PyTorch) on the dumped batches; score it at every shift. Run with the
reference venv (``../te_tnp/setup.sh``), after ``dump_shifts.py``::

    "${REF_VENV:-$HOME/.cache/ref-torch}/bin/python" train_authors.py --model te-tnp --seed 0

Each model is built from the authors' classes as their configuration publishes it, at
``common.SIZES`` (the same sizes as ours):

* ``tnp-d``: ``../tnp_d/train_ref.py``'s ``build_reference`` (``experiments/configs/models/
  tnp.yml``: separate self- and cross-attention blocks per layer, the targets attending to
  the updated context, no final norm, torch's initialisation);
* ``te-tnp``: ``../te_tnp/train_ref.py``'s ``build_reference`` (``tetnp.yml``);
* ``cnp``: ``CNP(CNPEncoder(DeepSet(MLP, agg="mean")), TNPDecoder(MLP), likelihood)`` as
  ``cnp.yml`` (``z_encoder`` MLP [x, y] -> five hidden layers of Dz -> Dz, ``z_decoder``
  MLP [r, xt] -> five hidden layers of Dz -> 2). :class:`MaskedCNPEncoder` hands the padded
  context's mask to the reference ``DeepSet``, which accepts one (its ``CNPEncoder`` does
  not pass it: the authors' generators give every task of a batch the same Nc).

Every model's likelihood is the authors' ``HeteroscedasticNormalLikelihood``: std =
sqrt(softplus(raw)) + min_noise, App. F.1's variance link, with min_noise 1e-3 (ours'
floor; the configs' default is 0). Training: ``../tnp_d/train_ref.py``'s loop and optimizer
(AdamW with Keras' epsilon placement) with the rows' lr 5e-4, weight decay 0.01 and the
global-norm clip 0.5, one dumped batch per step, one thread, ``check_shapes`` off.
"""
import argparse
import os
import sys
import types

import common

for var in ("REF_TNP_SRC", "REF_TETNP_SRC"):  # the reference checkouts (setup.sh also puts them on the path)
    if os.environ.get(var):
        sys.path.insert(0, os.environ[var])

import torch  # noqa: E402

from tnp.likelihoods.gaussian import HeteroscedasticNormalLikelihood  # noqa: E402
from tnp.models.cnp import CNP, CNPEncoder  # noqa: E402
from tnp.models.tnp import TNPDecoder  # noqa: E402
from tnp.networks.deepset import DeepSet  # noqa: E402
from tnp.networks.mlp import MLP  # noqa: E402

MIN_NOISE = 1e-3


class MaskedCNPEncoder(CNPEncoder):
    """``CNPEncoder.forward`` with the context mask handed to the ``DeepSet``.

    The mask (``[m, nc]`` bool, True = real point) is set on ``transformer_encoder.mask_c``
    by ``../tnp_d/train_ref.py``'s ``context_mask``, so its loss and step serve the CNP
    unchanged; here that attribute is a plain holder (the CNP has no transformer).
    """

    def __init__(self, deepset):
        super().__init__(deepset)
        self.transformer_encoder = types.SimpleNamespace(mask_c=None)

    def forward(self, xc, yc, xt):
        mask_c = self.transformer_encoder.mask_c
        zc = self.deepset(self.x_encoder(xc), self.y_encoder(yc), None if mask_c is None else ~mask_c)
        return torch.cat((zc[:, None, :].expand(-1, xt.shape[1], -1), self.x_encoder(xt)), dim=-1)


def build_cnp(width, layers, dim_x=1, dim_y=1):
    """The CNP of experiments/configs/models/cnp.yml at the given size."""
    z_encoder = MLP(in_dim=dim_x + dim_y, out_dim=width, num_layers=layers, width=width)
    z_decoder = MLP(in_dim=dim_x + width, out_dim=2 * dim_y, num_layers=layers, width=width)
    return CNP(MaskedCNPEncoder(DeepSet(z_encoder, agg="mean")), TNPDecoder(z_decoder=z_decoder),
               HeteroscedasticNormalLikelihood(min_noise=MIN_NOISE))


def cnp_mask_check(model, tnpd):
    """Largest |difference| over the first Delta = 0 test batch between the per-task
    log-likelihoods of ``model`` on the padded batch (context mask handed to the
    ``DeepSet``) and of the authors' own ``CNPEncoder.forward`` on each task unpadded."""
    batch = tnpd.to_torch({k: v[0] for k, v in common.test_arrays(common.shift_path(0.0), tnpd.KEYS).items()})
    padded = tnpd.task_loglik(model, batch)
    worst = 0.0
    for i, n in enumerate(batch["mask_c"].sum(1).tolist()):
        xc, yc, xt = batch["xc"][i:i + 1, :n], batch["yc"][i:i + 1, :n], batch["xt"][i:i + 1]
        dist = model.likelihood(model.decoder(CNPEncoder.forward(model.encoder, xc, yc, xt), xt))
        own = dist.log_prob(batch["yt"][i:i + 1]).double().sum(-1).mean()
        worst = max(worst, abs(float(own - padded[i])))
    return worst


def build(model, tnpd, tetnp):
    """``(model, task_loglik, train_step)`` of the authors' ``model`` at ``common.SIZES``."""
    sizes = common.SIZES[model]
    if model == "cnp":
        return build_cnp(sizes["width"], sizes["layers"]), tnpd.task_loglik, tnpd.train_step
    if model == "tnp-d":
        return (tnpd.build_reference(layers=sizes["layers"], dz=sizes["width"], heads=sizes["heads"],
                                     head_dim=sizes["head_dim"], ffn=sizes["width"], min_scale=MIN_NOISE),
                tnpd.task_loglik, tnpd.train_step)
    return (tetnp.build_reference(layers=sizes["layers"], dz=sizes["width"], heads=sizes["heads"],
                                  head_dim=sizes["head_dim"], kernel_width=sizes["kernel_width"],
                                  min_scale=MIN_NOISE), tetnp.task_loglik, tetnp.train_step)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=common.MODELS, required=True)
    parser.add_argument("--seed", type=int, default=0, help="torch seed of the initial weights")
    parser.add_argument("--steps", type=int, default=common.STEPS)
    parser.add_argument("--check-mask", action="store_true",
                        help="cnp: print cnp_mask_check of the initial model and stop")
    args = parser.parse_args(argv)
    if args.check_mask and args.model != "cnp":
        parser.error("--check-mask checks the CNP's mask (../tnp_d and ../te_tnp check the others')")

    from check_shapes import set_enable_check_shapes

    set_enable_check_shapes(False)
    torch.set_num_threads(1)
    tnpd = common.load_script("tnp_d", "train_ref")
    tetnp = common.load_script("te_tnp", "train_ref") if args.model == "te-tnp" else None
    train, test, _, _, steps = tnpd.load_data(common.train_path(), args.steps)
    torch.manual_seed(args.seed)
    model, task_loglik, train_step = build(args.model, tnpd, tetnp)
    if args.check_mask:
        with torch.no_grad():
            print(f"max |padded - authors' unpadded| per-task log-likelihood: {cnp_mask_check(model, tnpd):.3g}")
        return 0
    optimizer = tnpd.make_optimizer(model, common.LEARNING_RATE, common.WEIGHT_DECAY)
    mean0, _, run = tnpd.train_on_batches(model, optimizer, train, test, steps, 0, common.CLIP, task_loglik,
                                          train_step)
    model.eval()
    with torch.no_grad():
        shifts = common.score_shifts(lambda batch: task_loglik(model, tnpd.to_torch(batch)).numpy(), tnpd.KEYS, mean0)
    parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    cpu_per_step = (run["cpu"] - run["first_cpu"]) / max(run["done"] - 1, 1)
    out = common.write_result(args.model, "authors", args.seed, run["done"], parameters, run["wall"], cpu_per_step,
                              shifts, {"train_loss_last50": sum(run["losses"][-50:]) / len(run["losses"][-50:]),
                                       "torch": torch.__version__})
    print(out, {k: round(v["loglik"], 4) for k, v in shifts.items()}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
