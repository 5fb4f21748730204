"""Batches/s of a simulated task's training stream: the old single-generator path
(``tf.data.Dataset.from_generator``, reproduced here) against ``Task.dataset`` (a
parallel ``tf.data`` map over the batch index), alternately in one process. With
``--end-to-end``, steps/s of a TNP-D train step (-mean log-likelihood, AdamW; XLA unless
``--no-xla``) fed by each path, and by pre-sampled batches (``step_only``).

    .venv/bin/python benchmarks/data_throughput.py --task gp --batches 150 --repeats 3
    .venv/bin/python benchmarks/data_throughput.py --task gp --end-to-end --steps 60 --repeats 2

Prints one JSON line per repeat (the paths run in alternating order). ``PATH/step_only``
near 1 means the data does not limit the step.
"""
import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from taylorformer.batch import batch_signature  # noqa: E402
from taylorformer.task import SPLIT_SEEDS, make_task  # noqa: E402


def generator_dataset(task, batch_size, seed=0):
    """The pre-parallel ``Task.dataset("train")``: one Python generator, then prefetch."""
    def generate():
        i = 0
        while True:
            yield task.sample(np.random.default_rng([SPLIT_SEEDS["train"], seed, i]), batch_size, "train")
            i += 1

    signature = batch_signature(task.dim_x, task.dim_y, task.extra_signature())
    return tf.data.Dataset.from_generator(generate, output_signature=signature).prefetch(tf.data.AUTOTUNE)


def paths(task, batch_size, seed=0):
    return {"generator": lambda: generator_dataset(task, batch_size, seed),
            "parallel": lambda: task.dataset("train", batch_size=batch_size, seed=seed)}


def batches_per_s(ds, n, warmup, consume=lambda batch: None):
    """``(rate, process CPU ms per batch)`` over ``n`` batches of ``ds`` after ``warmup``,
    each passed to ``consume``."""
    it = iter(ds)
    for _ in range(warmup):
        consume(next(it))
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        out = consume(next(it))
    if out is not None:
        float(out)
    return n / (time.perf_counter() - start), 1e3 * (time.process_time() - cpu) / n


def train_step(task, xla=True):
    """TNP-D train step ``batch -> loss`` (-mean log-likelihood, AdamW), jit-compiled if ``xla``."""
    import keras

    import taylorformer

    model = taylorformer.build_model("tnp-d", dim_x=task.dim_x, dim_y=task.dim_y)
    optimizer = keras.optimizers.AdamW(1e-4)

    @tf.function(jit_compile=xla)
    def step(batch):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(taylorformer.loglik(model, batch, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="gp")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batches", type=int, default=150, help="timed batches per data-only run")
    parser.add_argument("--warmup", type=int, default=10, help="untimed batches (steps) first")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--steps", type=int, default=60, help="timed steps per end-to-end run")
    parser.add_argument("--no-xla", action="store_true", help="end to end without jit_compile")
    args = parser.parse_args()
    task = make_task(args.task)
    info = {"task": args.task, "batch_size": args.batch_size, "cpus": os.cpu_count()}
    if args.end_to_end:
        step = train_step(task, xla=not args.no_xla)
        info.update(model="tnp-d", xla=not args.no_xla)
        n, (many, one), base, consume = args.steps, ("steps", "step"), "step_only", step
        presampled = list(task.dataset("train", batch_size=args.batch_size, seed=1).take(n + args.warmup))
    else:
        n, (many, one), base, consume = args.batches, ("batches", "batch"), "generator", lambda batch: None
    for r in range(args.repeats):
        res = {"step_only": batches_per_s(presampled, n, args.warmup, step)} if args.end_to_end else {}
        for name, make in sorted(paths(task, args.batch_size).items(), reverse=r % 2 == 1):
            res[name] = batches_per_s(make(), n, args.warmup, consume)
        print(json.dumps({**info, "repeat": r,
                          **{f"{k}_{many}_per_s": round(v[0], 2) for k, v in res.items()},
                          **{f"{k}_cpu_ms_per_{one}": round(v[1], 1) for k, v in res.items()},
                          **{f"{k}/{base}": round(res[k][0] / res[base][0], 2)
                             for k in ("generator", "parallel") if k != base}}), flush=True)


if __name__ == "__main__":
    main()
