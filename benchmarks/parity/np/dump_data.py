"""Dump batches of the ``gp`` task for the NP/ANP learning comparison, to one .npz file.

Run with the taylorformer virtualenv::

    python dump_data.py --steps 2000 --out data/gp-np-2000.npz

The reference's NP/ANP take no masks, so every batch has one context size and one target
size for all its tasks, drawn per batch as the reference's GP sampler draws them
(``Nc ~ U{3..47}``, ``Nt ~ U{3..50 - Nc}``); each batch is the ``gp`` task's own sample
(``GPTask.sample`` with ``num_context = [Nc, Nc]``, ``num_target = [Nt, Nt]``; 1-D EQ kernel,
lengthscale ~ U[0.3, 1], noise 0.05), padded to 47 points with masks for ours; the
reference reads the first ``Nc`` / ``Nt`` points. Arrays: ``{split}_{xc, yc, xt, yt}``
``[K, 16, 47, 1]``, ``{split}_{mask_c, mask_t}``, ``{split}_nc``, ``{split}_nt`` ``[K]``,
``{split}_gt_loglik [K, 16]``; ``meta`` (JSON).
"""
import argparse
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

MAX_POINTS = 47
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik")


def batches(num, seed, batch_size, split):
    from taylorformer.task import make_task

    rng = np.random.default_rng(seed)
    out = {key: [] for key in KEYS + ("nc", "nt")}
    for _ in range(num):
        nc = int(rng.integers(3, 48))
        nt = int(rng.integers(3, 51 - nc))
        task = make_task("gp", {"num_context": [nc, nc], "num_target": [nt, nt]})
        b = task.sample(rng, batch_size, split)
        for key in KEYS:
            value = np.asarray(b[key], np.float32)
            if value.ndim >= 2:  # pad the point axis to MAX_POINTS
                pad = [(0, 0), (0, MAX_POINTS - value.shape[1])] + [(0, 0)] * (value.ndim - 2)
                value = np.pad(value, pad)
            out[key].append(value)
        out["nc"].append(nc)
        out["nt"].append(nt)
    return {f"{split}_{key}": np.stack(values) for key, values in out.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--test-batches", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    arrays = {**batches(args.steps, args.seed, args.batch_size, "train"),
              **batches(args.test_batches, 10_000 + args.seed, args.batch_size, "test")}
    meta = {"task": "gp", "seed": args.seed, "batch_size": args.batch_size, "steps": args.steps,
            "test_batches": args.test_batches, "sizes": "Nc ~ U{3..47}, Nt ~ U{3..50-Nc} per batch"}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    np.savez(args.out, meta=json.dumps(meta), **arrays)
    print(f"{args.steps} training and {args.test_batches} test batches -> {args.out}; "
          f"test exact GP log-lik {arrays['test_gt_loglik'].mean():.3f}")


if __name__ == "__main__":
    main()
