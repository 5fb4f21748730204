"""Train the reference NP / ANP (tung-nd/TNP-pytorch, as published) on the dumped batches;
print one JSON line per evaluation. Run with the torch virtualenv (REF_VENV)::

    "$REF_VENV/bin/python" train_ref.py --data data/gp-np-2000.npz --model anp --seed 0

As the reference's ``gp.py`` trains: its ``forward`` in training mode with
``train_num_samples`` = 4 (the importance-weighted objective over context and targets),
Adam 5e-4 with ``CosineAnnealingLR`` over the run, its own initial weights
(``torch.manual_seed(seed)``; ``--init``: ours, exported by ``train_ours.py``). Test: its ``forward`` in eval mode with 50 samples (``tar_ll``),
averaged over every test task. Batch ``i`` at step ``i + 1``, the first ``Nc`` / ``Nt`` points.
"""
import argparse
import json
import os
import sys
import time
import types

import numpy as np


class AttrDict(dict):
    """The attribute-access dict the reference's forward() builds (its attrdict package
    fails to import on Python >= 3.10)."""
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--model", choices=("np", "anp"), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--train-samples", type=int, default=4)
    parser.add_argument("--init", help="start from these weights (train_ours.py --export-init), not its own")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(os.environ.get("REF_NP_SRC", os.path.expanduser("~/.cache/ref-np-src")),
                                    "regression"))
    sys.modules.setdefault("attrdict", types.SimpleNamespace(AttrDict=AttrDict))
    from models.anp import ANP
    from models.np import NP

    torch.manual_seed(args.seed)
    model = (NP if args.model == "np" else ANP)(dim_x=1, dim_y=1, dim_hid=128, dim_lat=128)
    if args.init:
        init = np.load(args.init)
        model.load_state_dict({k: torch.tensor(init[k]) for k in init.files}, strict=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    data = np.load(args.data)

    def batch(split, i):
        nc, nt = int(data[f"{split}_nc"][i]), int(data[f"{split}_nt"][i])
        t = {k: torch.tensor(data[f"{split}_{k}"][i][:, :n]) for k, n in
             (("xc", nc), ("yc", nc), ("xt", nt), ("yt", nt))}
        return AttrDict(xc=t["xc"], yc=t["yc"], xt=t["xt"], yt=t["yt"], x=torch.cat([t["xc"], t["xt"]], 1),
                        y=torch.cat([t["yc"], t["yt"]], 1))

    def test_loglik():
        model.eval()
        with torch.no_grad():
            values = [float(model(batch("test", j), num_samples=50).tar_ll) for j in range(len(data["test_nc"]))]
        model.train()
        return float(np.mean(values))  # every test batch holds 16 tasks

    start = time.process_time()
    model.train()
    for step in range(1, args.steps + 1):
        optimizer.zero_grad()
        outs = model(batch("train", step - 1), num_samples=args.train_samples)
        outs.loss.backward()
        optimizer.step()
        scheduler.step()
        if step % args.eval_every == 0 or step == args.steps:
            print(json.dumps({"side": "reference", "model": args.model, "seed": args.seed,
                              "init": "ours" if args.init else "own",
                              "objective": "iwae (context + targets)" if args.train_samples > 1 else "elbo",
                              "train_samples": args.train_samples, "step": step, "test_loglik": test_loglik(),
                              "train_loss": float(outs.loss), "cpu_s": round(time.process_time() - start, 1)}),
                  flush=True)


if __name__ == "__main__":
    main()
