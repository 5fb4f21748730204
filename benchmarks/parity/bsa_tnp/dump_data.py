"""Dump the ``gp-2d-bsa`` batches both trainers read, to one .npz file (taylorformer venv).

    python dump_data.py                     # 2000 training batches -> data/gp2d-small-seed0-2000.npz
    python dump_data.py --steps 50 --out data/tiny.npz

The task is the paper's 2-D GP (``gp-2d-bsa``: s ~ U([-2, 2]^2), EQ kernel, variance 1,
lengthscale ~ Beta(3, 7), noise 0.1 on the context only) at a size a 2-core CPU can
train 2000 steps x 3 seeds x 2 implementations of in an hour (shared with other work):
by default Nc ~ U{16..63} (the paper: U{128..511}) and Nt = 64 (the paper: 1024), batch 8
(the paper's); ``--num-context LO HI`` / ``--num-target N`` change them. Batches are
padded to Nc = HI with ``mask_c``. Training batch ``i`` is the ``i``-th of
``task.dataset("train", start=0, batch_size=8, seed=SEED)`` (the stream
``taylorformer train`` reads); the test set is ``task.dataset("test", batch_size=8,
num_batches=32)`` (256 tasks, seeded by the split alone). ``gt_loglik``: the exact GP
predictive log-likelihood per target point (the ceiling).

``--test-domains shifted scaled`` (the default) also dumps the test set of the same task
built with ``domain="shifted"`` (s ~ U([8, 12]^2)) and ``domain="scaled"`` (s ~ U([-4,
4]^2), 4x the context and target points: Nc ~ U{64..252} padded to 252, Nt = 256), for
the domain-transfer evaluation of ``--test-domains`` in ``train_ours.py`` / ``train_ref.py``.

Arrays: ``{train,test}_{xc,yc,xt,yt,mask_c,mask_t,gt_loglik}`` stacked over batches,
``test_<domain>_<key>`` for every extra test domain, and ``meta`` (JSON: task name and
config, seed, batch size, test domains, versions).
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the taylorformer CLI sets it
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik")


def collect(dataset, limit=None):
    out = {k: [] for k in KEYS}
    for i, batch in enumerate(dataset):
        if limit is not None and i >= limit:
            break
        for k in KEYS:
            out[k].append(batch[k].numpy())
    return {k: np.stack(v) for k, v in out.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--test-batches", type=int, default=32)
    ap.add_argument("--num-context", type=int, nargs=2, default=[16, 63], metavar=("LO", "HI"))
    ap.add_argument("--num-target", type=int, default=64)
    ap.add_argument("--test-domains", nargs="*", default=["shifted", "scaled"], metavar="DOMAIN",
                    help="other domains of gp-2d-bsa whose test set to dump too (default: shifted scaled)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import tensorflow as tf

    import taylorformer
    from taylorformer.task import make_task

    task = make_task("gp-2d-bsa", {"num_context": args.num_context, "num_target": args.num_target})
    t0 = time.time()
    train = collect(task.dataset("train", start=0, batch_size=args.batch_size, seed=args.seed), args.steps)
    test = collect(task.dataset("test", batch_size=args.batch_size, num_batches=args.test_batches))
    other = {}
    for domain in args.test_domains:
        other_task = make_task("gp-2d-bsa", {**task.get_config(), "domain": domain})
        other[domain] = collect(other_task.dataset("test", batch_size=args.batch_size, num_batches=args.test_batches))
    if train["xc"].shape[0] != args.steps:
        raise SystemExit(f"the stream gave {train['xc'].shape[0]} batches, asked for {args.steps}")
    meta = {"task": "gp-2d-bsa", "task_config": task.get_config(), "seed": args.seed,
            "batch_size": args.batch_size, "steps": args.steps, "test_batches": args.test_batches,
            "test_domains": {d: make_task("gp-2d-bsa", {**task.get_config(), "domain": d}).get_config()
                             for d in args.test_domains},
            "taylorformer": getattr(taylorformer, "__version__", "?"), "tensorflow": tf.__version__}
    out = args.out or os.path.join(HERE, "data", f"gp2d-nc{args.num_context[1]}-nt{args.num_target}-seed{args.seed}-{args.steps}.npz")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    np.savez(out, **{f"train_{k}": v for k, v in train.items()}, **{f"test_{k}": v for k, v in test.items()},
             **{f"test_{d}_{k}": v for d, arrays in other.items() for k, v in arrays.items()}, meta=json.dumps(meta))
    print(json.dumps({"wrote": out, "seconds": round(time.time() - t0, 1),
                      "train_xc": list(train["xc"].shape), "train_xt": list(train["xt"].shape),
                      "test_tasks": int(test["xc"].shape[0] * test["xc"].shape[1]),
                      "gt_loglik_test_mean": float(test["gt_loglik"].mean()),
                      **{f"gt_loglik_test_{d}_mean": float(a["gt_loglik"].mean()) for d, a in other.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
