"""Train the authors' Taylorformer (ref_taylorformer.RefModel) on the dumped batches.

Run with the reference interpreter, after ``dump_data.py``::

    $REF train_ref.py --steps 2000 --eval-every 500 --seed 0                # as published
    $REF train_ref.py --steps 2000 --eval-every 500 --seed 0 --like-ours    # every flag
    $REF train_ref.py --flags relu,ln_eps ...                               # some flags

The step is the authors' ``build_graph`` train step written for a batch dict: a
``tf.function`` with ``GradientTape`` on their ``nll`` (mean over the real target points),
``optimizer.apply_gradients``; optimizer ``tf.keras.optimizers.Adam(3e-4)`` (their
``training_and_evaluating_models.py``: Adam, Table 3's 3e-4), batch 32 (the dump's), no
clipping. Dropout (0.05) and BatchNormalization run in training mode during the step.
The test evaluation is the per-task mean log-likelihood per real target point, with
their scale ``exp(log_sigma) + 0.001``, as ``train_ours.py`` reports it. Same JSON lines
as ``train_ours.py``.
"""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import LEARNING_RATE, load, mean_stderr, provenance, split_batches  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(HERE, "data", "gp-eq-seed0-2000.npz"))
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--like-ours", action="store_true", help="every flag of ref_taylorformer.FLAGS")
    parser.add_argument("--flags", default="", help="comma-separated flags of ref_taylorformer.FLAGS")
    args = parser.parse_args(argv)

    import tensorflow as tf

    import ref_taylorformer as ref

    flags = set(ref.FLAGS) if args.like_ours else {f for f in args.flags.split(",") if f}
    data, meta = load(args.data)
    steps = args.steps or data["train_xc"].shape[0]
    model = ref.RefModel(flags, seed=args.seed)
    train = split_batches(data, "train", steps)
    keys = ("xc", "yc", "xt", "yt", "mask_c", "mask_t")
    test = [{k: tf.constant(b[k]) for k in keys} for b in split_batches(data, "test")]
    gt = np.concatenate([b["gt_loglik_joint"] for b in split_batches(data, "test")]).astype(np.float64)
    model(test[0])  # build
    optimizer = tf.keras.optimizers.Adam(LEARNING_RATE)

    @tf.function
    def train_step(batch):
        with tf.GradientTape() as tape:
            loss = model.loss(batch, training=True)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def test_loglik(batch):
        return ref.loglik(model, batch)

    def evaluate():
        return mean_stderr(np.concatenate([test_loglik(b).numpy() for b in test]))

    wall = cpu = first = first_cpu = 0.0
    losses = []
    for step in range(1, steps + 1):
        batch = {k: tf.constant(train[step - 1][k]) for k in keys}
        t0, c0 = time.perf_counter(), time.process_time()
        loss = float(train_step(batch))
        dt = time.perf_counter() - t0
        wall, cpu = wall + dt, cpu + time.process_time() - c0
        first = first or dt
        first_cpu = first_cpu or cpu
        if not math.isfinite(loss):
            raise SystemExit(f"non-finite loss {loss} at step {step}")
        losses.append(loss)
        if args.eval_every and step % args.eval_every == 0 and step != steps:
            mean, err = evaluate()
            print(json.dumps({"impl": "reference", "seed": args.seed, "step": step, "test_loglik_mean": mean,
                              "test_loglik_stderr": err,
                              "train_loss_mean": float(np.mean(losses[-args.eval_every:])),
                              "train_seconds": round(wall, 3)}), flush=True)
    mean, err = evaluate()
    print(json.dumps({
        "impl": "reference", "flags": sorted(flags), "seed": args.seed, "step": steps,
        "test_loglik_mean": mean, "test_loglik_stderr": err, "gt_loglik_joint_mean": float(gt.mean()),
        "train_seconds": round(wall, 3), "steady_steps_per_s": round((steps - 1) / (wall - first), 3)
        if steps > 1 else None, "first_step_seconds": round(first, 3), "cpu_seconds": round(cpu, 3),
        "steady_cpu_seconds_per_step": round((cpu - first_cpu) / (steps - 1), 4) if steps > 1 else None,
        "train_loss_last50": float(np.mean(losses[-50:])),
        "num_params": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
        "tensorflow": tf.__version__, "data": os.path.basename(args.data),
        "task_config": meta["task_overrides"], **provenance()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
