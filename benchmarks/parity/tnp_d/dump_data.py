"""Dump the ``gp`` task's batches that taylorformer trains and tests on, to one .npz file.

Run with the taylorformer virtualenv (it imports taylorformer and TensorFlow)::

    python dump_data.py                        # 2000 training batches, seed 0 -> data/gp-seed0-2000.npz
    python dump_data.py --steps 50 --out data/gp-seed0-50.npz

What is dumped is exactly what the library's own entry points consume:

* training batch ``i`` (``i = 0 .. steps-1``): ``Trainer._train_data(0)`` reads
  ``task.dataset("train", batch_size=16, seed=SEED, start=0)``; the ``taylorformer train``
  loop takes its batches from that stream in order, one per step (step ``i + 1`` uses
  batch ``i``). This script reads the same ``dataset`` call, so the batches pass through
  the same ``tf.data`` generator and the same float32 signature;
* test batch ``j`` (``j = 0 .. 31``): ``taylorformer evaluate`` (``runs.evaluate_run`` ->
  ``evaluation.evaluate``) reads ``task.dataset("test", batch_size=16, num_batches=None)``,
  i.e. the 32 fixed batches of ``DEFAULT_EVAL_BATCHES["test"]``, seeded by the split alone.

The task is ``make_task("gp", None)``, i.e. ``GPTask()`` with its defaults (what
``taylorformer train --task gp`` builds without ``--task-config``): 1-D EQ kernel,
lengthscale ~ U[0.3, 1], scale 1, noise 0.05 on context and targets, x ~ U[-2, 2],
Nc ~ U{3..32} per task, Nt = 32. Every batch is padded to Nc = 32 with ``mask_c`` (and
``mask_t``, here all ones since Nt is fixed); padded entries are 0.

Arrays in the file (float32 unless said): ``{split}_{key}`` with split ``train``/``test``
and key ``xc [K, 16, 32, 1]``, ``yc``, ``xt``, ``yt``, ``mask_c [K, 16, 32]``, ``mask_t``,
``gt_loglik [K, 16]`` (exact GP predictive log-likelihood per target point, mean over the
task's real targets of the marginal log densities: the ceiling of a conditional NP, what
``evaluate`` reports as ``gt_loglik``) and ``gt_loglik_joint``; ``meta`` is a JSON string
(task name and config, seed, batch size, library versions, SHA-256 of every array).
"""
import argparse
import hashlib
import json
import os
import sys
import time

# the taylorformer CLI sets this before NumPy loads (many small Cholesky factorisations):
# do the same so that the simulator runs exactly as under `taylorformer train`
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik", "gt_loglik_joint")


def collect(dataset, limit=None):
    """Stack the batch dicts of a ``tf.data`` stream: ``{key: [K, ...]}`` (NumPy)."""
    out = {k: [] for k in KEYS}
    for i, batch in enumerate(dataset):
        if limit is not None and i >= limit:
            break
        for k in KEYS:
            out[k].append(batch[k].numpy())
    return {k: np.stack(v) for k, v in out.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="training batches to dump (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (taylorformer train --seed)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--task", default="gp", help="registered task (default gp)")
    parser.add_argument("--task-config", default=None,
                        help="JSON dict of task options (default: the task's defaults); stored in meta")
    parser.add_argument("--out", default=None,
                        help="output .npz (default data/<task>-seed<seed>-<steps>.npz beside this script)")
    args = parser.parse_args(argv)

    import taylorformer
    import tensorflow as tf
    from taylorformer.task import DEFAULT_EVAL_BATCHES
    from taylorformer.task import make_task

    task = make_task(args.task, json.loads(args.task_config) if args.task_config else None)
    t0 = time.time()
    # exactly Trainer._train_data(start=0): task.dataset("train", start=0, batch_size=, seed=)
    train = collect(task.dataset("train", start=0, batch_size=args.batch_size, seed=args.seed),
                    limit=args.steps)
    # exactly evaluation.evaluate(model, task, split="test", batch_size=, num_batches=None)
    test = collect(task.dataset("test", batch_size=args.batch_size, num_batches=None))
    elapsed = time.time() - t0

    # sanity: batch i of a split depends only on (split seed, seed, i)
    from taylorformer.task import SPLIT_SEEDS
    direct = task.sample(np.random.default_rng([SPLIT_SEEDS["train"], args.seed, args.steps - 1]),
                         args.batch_size, "train")
    for k in KEYS:
        if not np.array_equal(direct[k], train[k][-1]):
            raise SystemExit(f"dataset stream and direct sampling disagree on train[{k!r}]")

    arrays = {f"train_{k}": v for k, v in train.items()}
    arrays.update({f"test_{k}": v for k, v in test.items()})
    meta = {
        "task": args.task,
        "task_config": task.get_config(),
        "task_config_given": json.loads(args.task_config) if args.task_config else None,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "train_batches": int(train["xc"].shape[0]),
        "test_batches": int(test["xc"].shape[0]),
        "default_test_batches": DEFAULT_EVAL_BATCHES["test"],
        "note": "train batch i is consumed by training step i+1 of `taylorformer train`",
        "versions": {"taylorformer": taylorformer.__version__, "tensorflow": tf.__version__,
                     "numpy": np.__version__},
        "sha256": {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
                   for k, v in sorted(arrays.items())},
    }
    out = args.out or os.path.join(HERE, "data", f"{args.task}-seed{args.seed}-{args.steps}.npz")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    np.savez(out, meta=np.array(json.dumps(meta)), **arrays)
    summary = {
        "out": out, "train_batches": meta["train_batches"], "test_batches": meta["test_batches"],
        "seconds": round(elapsed, 1),
        "test_gt_loglik_mean": float(np.mean(test["gt_loglik"].astype(np.float64))),
        "train_nc_mean": float(train["mask_c"].sum(-1).mean()),
        "test_nc_mean": float(test["mask_c"].sum(-1).mean()),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
