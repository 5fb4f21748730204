"""Train taylorformer's ``taylorformer`` preset on the dumped batches; evaluate on the test set.

Run with the taylorformer virtualenv, after ``dump_data.py``::

    python train_ours.py --steps 2000 --eval-every 500 --seed 0

The model and compiled train step are the library's own (``taylorformer.workflow.training.Trainer``,
``build_model("taylorformer")``, teacher-forced chain-rule likelihood, loss = minus the
mean over tasks of the mean log-likelihood per real target point). Optimizer: the authors'
settings (Adam, lr 3e-4 constant, batch 32, no clipping, no weight decay): Keras AdamW with
weight decay 0 and global clip norm 1e9 (never reached), no warm-up. Target order: as
dumped (``num_permutations`` 0; the reference does not permute either: its
``permutation_repeats`` is 0 in the published configs). Only the data source differs from
``taylorformer train``: the dumped batches, one per step, in order.

Prints one JSON line per evaluation and a final JSON line (``steady_steps_per_s`` leaves the
first step, which traces the graph, out; ``cpu_seconds`` is this process's CPU time of the
training steps).
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import LEARNING_RATE, load, mean_stderr, provenance, split_batches  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(HERE, "data", "gp-eq-seed0-2000.npz"))
    parser.add_argument("--steps", type=int, default=None, help="default: every dumped batch")
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--model", default="taylorformer", help="preset (default taylorformer)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    parser.add_argument("--xla", action="store_true")
    args = parser.parse_args(argv)

    import keras
    import tensorflow as tf

    import taylorformer
    from taylorformer.task import make_task
    from taylorformer.workflow.training import Trainer, TrainConfig

    data, meta = load(args.data)
    steps = args.steps or data["train_xc"].shape[0]
    task = make_task(meta["task"], meta["task_overrides"])
    cfg = TrainConfig(steps=steps, batch_size=meta["batch_size"], seed=args.seed, jit_compile=args.xla,
                      learning_rate=LEARNING_RATE, schedule="constant", warmup_steps=0,
                      weight_decay=0.0, clip_norm=1e9, num_permutations=0, tensorboard=False)
    trainer = Trainer(args.model, task, cfg, tempfile.mkdtemp(prefix="tf-parity-ours-"),
                      task_name=meta["task"])
    model = trainer.model
    train = split_batches(data, "train", steps)
    stream = tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in train]) for k in train[0]})
    stream = stream.prefetch(tf.data.AUTOTUNE)
    train_step = trainer.compiled_step()
    test = [{k: tf.constant(v) for k, v in b.items()} for b in split_batches(data, "test")]
    gt = np.concatenate([b["gt_loglik_joint"].numpy() for b in test]).astype(np.float64)

    test_loglik = tf.function(lambda b: taylorformer.loglik(model, b))  # traced, as train_ref.py's

    def evaluate():
        return mean_stderr(np.concatenate([test_loglik(b).numpy() for b in test]))

    wall = cpu = first = first_cpu = 0.0
    losses = []
    iterator = iter(stream)
    for step in range(1, steps + 1):
        batch = next(iterator)
        t0, c0 = time.perf_counter(), time.process_time()
        loss = float(train_step(batch)["loss"])
        dt = time.perf_counter() - t0
        wall, cpu = wall + dt, cpu + time.process_time() - c0
        first = first or dt
        first_cpu = first_cpu or cpu
        if not math.isfinite(loss):
            raise SystemExit(f"non-finite loss {loss} at step {step}")
        losses.append(loss)
        if args.eval_every and step % args.eval_every == 0 and step != steps:
            mean, err = evaluate()
            print(json.dumps({"impl": "ours", "seed": args.seed, "step": step, "test_loglik_mean": mean,
                              "test_loglik_stderr": err,
                              "train_loss_mean": float(np.mean(losses[-args.eval_every:])),
                              "train_seconds": round(wall, 3)}), flush=True)
    mean, err = evaluate()
    print(json.dumps({
        "impl": "ours", "model": args.model, "seed": args.seed, "step": steps,
        "test_loglik_mean": mean, "test_loglik_stderr": err, "gt_loglik_joint_mean": float(gt.mean()),
        "train_seconds": round(wall, 3), "steady_steps_per_s": round((steps - 1) / (wall - first), 3)
        if steps > 1 else None, "first_step_seconds": round(first, 3), "cpu_seconds": round(cpu, 3),
        "steady_cpu_seconds_per_step": round((cpu - first_cpu) / (steps - 1), 4) if steps > 1 else None,
        "train_loss_last50": float(np.mean(losses[-50:])),
        "num_params": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
        "tensorflow": tf.__version__, "keras": keras.__version__, "data": os.path.basename(args.data),
        "task_config": meta["task_overrides"], **provenance()}),
        flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
