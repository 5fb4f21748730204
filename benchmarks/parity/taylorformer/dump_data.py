"""Dump the ``gp-taylorformer`` task's batches (training and test) to one .npz file.

Run with the taylorformer virtualenv::

    python dump_data.py                       # 2000 training batches of 32, seed 0
    python dump_data.py --steps 50 --out data/small.npz
    python dump_data.py --batch-size 8 --num-total 40   # the learning runs' size (README.md)
    python dump_data.py --batch-size 8 --num-total 40 --kernel matern52 --noise 0   # Table 1's row

Training batch ``i`` is what ``Trainer._train_data(0)`` streams to step ``i + 1``
(``task.dataset("train", start=0, batch_size=32, seed=SEED)``); the test batches are
``task.dataset("test", batch_size=32, num_batches=N)``. The task is the paper's 1-D GP
protocol (App. A.1, EQ kernel by default): x ~ U[-2, 2], Nc ~ U{3..97} per task,
Nt = 100 - Nc, padded to 97 + 97 with ``mask_c``/``mask_t`` (padded entries are 0).
``--num-total N`` shortens the sequences (Nc ~ U{3..N-3}, Nt = N - Nc, padded to
(N-3) + (N-3)); the test batches keep 32 tasks each (``--test-batch-size``). ``--kernel``
(eq, matern52, periodic) and ``--noise`` (observation noise std; default the task's, 1e-3)
override the task's config; Table 1's rows use ``--noise 0``. The file name carries the
kernel; the noise is in ``meta`` and in the training runs' final JSON line.

Arrays: ``{split}_{key}`` with key ``xc [K, B, 97, 1]``, ``yc``, ``xt``, ``yt``, ``mask_c
[K, B, 97]``, ``mask_t``, ``gt_loglik [K, B]``, ``gt_loglik_joint [K, B]``; ``meta``: JSON
(task, config, seed, batch size, versions, SHA-256 of every array).
"""
import argparse
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik", "gt_loglik_joint")


def collect(dataset, limit=None):
    """Stack the batch dicts of a ``tf.data`` stream: ``{key: [K, ...]}``."""
    out = {k: [] for k in KEYS}
    for i, batch in enumerate(dataset):
        if limit is not None and i >= limit:
            break
        for k in KEYS:
            out[k].append(batch[k].numpy())
    return {k: np.stack(v) for k, v in out.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="training batches (default 2000)")
    parser.add_argument("--test-batches", type=int, default=16, help="test batches (default 16: 512 tasks)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32, help="default 32 (the authors')")
    parser.add_argument("--test-batch-size", type=int, default=32)
    parser.add_argument("--num-total", type=int, default=100,
                        help="points per task, Nc + Nt (default 100, the paper's); Nc ~ U{3..N-3}")
    parser.add_argument("--kernel", default="eq", help="eq (default), matern52 or periodic")
    parser.add_argument("--noise", type=float, default=None,
                        help="observation noise std (default: the task's, 1e-3); Table 1's rows: 0")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import taylorformer
    import tensorflow as tf
    from taylorformer.task import make_task

    task_name, task_config = "gp-taylorformer", {"kernel": args.kernel}
    if args.noise is not None:
        task_config["noise"] = args.noise
    if args.num_total != 100:
        if not 6 <= args.num_total <= 100:
            raise SystemExit(f"--num-total must be in [6, 100], got {args.num_total}")
        n = args.num_total
        task_config.update(num_total=n, num_context=[3, n - 3], num_target=[3, n - 3])
    task = make_task(task_name, task_config)
    t0 = time.time()
    train = collect(task.dataset("train", start=0, batch_size=args.batch_size, seed=args.seed),
                    limit=args.steps)
    test = collect(task.dataset("test", batch_size=args.test_batch_size, num_batches=args.test_batches))
    arrays = {f"train_{k}": v for k, v in train.items()}
    arrays.update({f"test_{k}": v for k, v in test.items()})
    meta = {"task": task_name, "task_config": task.get_config(), "task_overrides": task_config,
            "seed": args.seed, "batch_size": args.batch_size,
            "train_batches": int(train["xc"].shape[0]), "test_batches": int(test["xc"].shape[0]),
            "versions": {"taylorformer": taylorformer.__version__, "tensorflow": tf.__version__,
                         "numpy": np.__version__},
            "sha256": {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
                       for k, v in sorted(arrays.items())}}
    size = "" if (args.batch_size, args.num_total) == (32, 100) else f"-b{args.batch_size}-n{args.num_total}"
    out = args.out or os.path.join(HERE, "data", f"gp-{args.kernel}-seed{args.seed}-{args.steps}{size}.npz")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    np.savez(out, meta=np.array(json.dumps(meta)), **arrays)
    print(json.dumps({"out": out, "seconds": round(time.time() - t0, 1),
                      "train_batches": meta["train_batches"], "test_batches": meta["test_batches"],
                      "test_gt_loglik_joint_mean": float(test["gt_loglik_joint"].astype(np.float64).mean()),
                      "test_gt_loglik_mean": float(test["gt_loglik"].astype(np.float64).mean()),
                      "train_nc_mean": float(train["mask_c"].sum(-1).mean())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
