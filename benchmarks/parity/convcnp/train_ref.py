"""Train cambridge-mlg/tnp's ConvCNP (its GP configuration) on the dumped ``gp`` batches.

Run with the reference venv, after ``../tnp_d/dump_data.py``::

    "$REF_VENV/bin/python" train_ref.py --data data/gp-seed0-2000.npz --steps 2000 --eval-every 500 --seed 0

The model is the reference as published, built from its classes as ``check_function.py``
builds it (``conv``, 1-D: 32 channels, 5 blocks of kernel 9, a fixed grid of 128 points on
[-4, 4]), with torch's own initial weights (``torch.manual_seed(seed)``) or, with
``--init-from``, ours (paired runs). The optimizer,
step, loss and evaluation are those of the TNP-D comparison (``../tnp_d/train_ref.py``:
AdamW lr 5e-4, weight decay 1e-4, Keras' epsilon, gradient norm clipped at 0.5, loss =
minus the mean over tasks of the mean log-likelihood per real target point). The
reference takes no masks: a padded context point is moved to x = 1e4, where its EQ
weight on the grid ([-4, 4], lengthscale well under 100) is exactly 0 in float32, so it
adds nothing; padded targets are left out of the loss by the mask as in TNP-D's script.
Prints JSON lines as ``../tnp_d/train_ref.py`` does.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tnp_d"))
if os.environ.get("REF_TNP_SRC"):
    sys.path.insert(0, os.environ["REF_TNP_SRC"])

import check_function  # noqa: E402
import train_ref as tnp_d  # noqa: E402

#: where padded context points go: far outside the grid, so their EQ weights are 0
FAR = 1e4


def task_loglik(model, batch):
    """Mean log-likelihood per real target point, per task: [B] float64 (as taylorformer)."""
    xc = torch.where(batch["mask_c"][..., None], batch["xc"], torch.full_like(batch["xc"], FAR))
    dist = model(xc, batch["yc"], batch["xt"])
    logp = dist.log_prob(batch["yt"]).double().sum(-1)
    mask = batch["mask_t"]
    return (logp * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def train_step(model, optimizer, batch, clip=0.5):
    """``../tnp_d/train_ref.py``'s step (Keras' AdamW epsilon, clipping) with this loss."""
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(HERE, "data", "gp-seed0-2000.npz"))
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: all dumped batches)")
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0, help="torch seed of the initial weights")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--init-from", default=None,
                        help="start from these weights (check_function.py export --seed S: the initial "
                             "weights of ours with --seed S) instead of torch's")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = check_function.build_reference(argparse.Namespace(dim_x=1, cnn="conv"))
    if args.init_from:
        check_function.copy_weights(model, np.load(args.init_from))
    optimizer = tnp_d.make_optimizer(model)
    train, test, gt, meta, steps = tnp_d.load_data(args.data, args.steps)
    mean, err, run = tnp_d.train_on_batches(model, optimizer, train, test, steps, args.eval_every, 0.5,
                                            task_loglik, train_step)
    options = {"seed": args.seed, "init_from": os.path.basename(args.init_from) if args.init_from else None}
    print(json.dumps(tnp_d.summary("reference-convcnp", model, mean, err, run, gt, options,
                                   args.data, meta, seed=args.seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
