"""Taylorformer throughput at the paper's ETT setting: train steps/s and forward time.

Setting (Nivron et al. 2023, Table 3): preset ``taylorformer`` (6 heads x 11, width 32,
4 layers, enc_dim 32, LocalTaylor p=0 q=1), batch 32, context 96, horizon 96, 1-D x
rescaled to [-1, 1] per window, standardised y (a random walk here: the speed does not
depend on the values). The train step is a ``tf.function`` of AdamW on the teacher-forced
negative log-likelihood (``taylorformer.loglik``), with and without XLA
(``jit_compile=True``). The forward time is one teacher-forced pass (``model(batch)``,
training=False) for the whole batch.

Reference (issue 4): the authors' TF 2.13 code trains at about 3.5 steps/s on a 2-core
CPU at this setting and its forward pass takes 90-100 ms; the target is >= 5.3 steps/s.

    .venv/bin/python benchmarks/taylorformer_throughput.py --steps 20 --xla both
"""
import argparse
import json
import os
import resource
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the simulators (importing taylorformer no longer sets it)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import taylorformer as tfm  # noqa: E402
from taylorformer.models.inference import loglik  # noqa: E402


def ett_like_batch(batch_size, context, horizon, seed=0):
    """A forecasting batch: one window per task, x in [-1, 1], random-walk y."""
    rng = np.random.default_rng(seed)
    n = context + horizon
    x = np.broadcast_to(np.linspace(-1.0, 1.0, n, dtype=np.float32)[None, :, None], (batch_size, n, 1))
    y = np.cumsum(rng.normal(scale=0.1, size=(batch_size, n, 1)), 1).astype(np.float32)
    y = (y - y.mean(1, keepdims=True)) / (y.std(1, keepdims=True) + 1e-6)
    return {"xc": tf.constant(x[:, :context]), "yc": tf.constant(y[:, :context]),
            "xt": tf.constant(x[:, context:]), "yt": tf.constant(y[:, context:]),
            "mask_c": tf.ones([batch_size, context]), "mask_t": tf.ones([batch_size, horizon])}


def timed(fn, batch, steps, warmup):
    """Seconds per call: (mean, median, best) over ``steps`` calls after ``warmup``.

    The median and best are reported because the CPU may be shared with other work; so is
    the process CPU time per call (all threads), which other processes do not inflate.
    """
    for _ in range(warmup):
        out = fn(batch)
    _ = [np.asarray(v) for v in tf.nest.flatten(out)]
    times = []
    cpu0 = time.process_time()
    for _ in range(steps):
        start = time.perf_counter()
        out = fn(batch)
        _ = [np.asarray(v) for v in tf.nest.flatten(out)]
        times.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu0) / steps
    return float(np.mean(times)), float(np.median(times)), float(np.min(times)), cpu


def run(preset="taylorformer", batch_size=32, context=96, horizon=96, steps=20, warmup=3, xla=False,
        learning_rate=3e-4, dtype_policy=None):
    keras.utils.set_random_seed(0)
    model = tfm.build_model(preset, dtype_policy=dtype_policy)
    optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, global_clipnorm=0.5)
    optimizer.build(model.trainable_variables)
    batch = ett_like_batch(batch_size, context, horizon)

    @tf.function(jit_compile=xla)
    def train_step(b):
        with tf.GradientTape() as tape:
            loss = -tf.cast(tf.reduce_mean(loglik(model, b, training=True)), tf.float32)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function(jit_compile=xla)
    def forward(b):
        return model(b, training=False)

    t0 = time.perf_counter()
    train_step(batch)
    compile_train = time.perf_counter() - t0
    step_mean, step_med, step_best, step_cpu = timed(train_step, batch, steps, warmup)
    t0 = time.perf_counter()
    forward(batch)
    compile_fwd = time.perf_counter() - t0
    fwd_mean, fwd_med, fwd_best, fwd_cpu = timed(forward, batch, max(steps, 10), warmup)
    return {"preset": preset, "xla": xla, "batch": batch_size, "context": context, "horizon": horizon,
            "params": int(model.count_params()), "steps_timed": steps,
            "train_steps_per_s": {"mean": round(1.0 / step_mean, 2), "median": round(1.0 / step_med, 2),
                                  "best": round(1.0 / step_best, 2)},
            "train_step_ms": {"mean": round(1e3 * step_mean, 1), "median": round(1e3 * step_med, 1),
                              "best": round(1e3 * step_best, 1), "cpu_s": round(step_cpu, 3)},
            "forward_ms": {"mean": round(1e3 * fwd_mean, 1), "median": round(1e3 * fwd_med, 1),
                           "best": round(1e3 * fwd_best, 1), "cpu_s": round(fwd_cpu, 3)},
            "load_avg_1min": round(os.getloadavg()[0], 2),
            "first_call_s": {"train": round(compile_train, 1), "forward": round(compile_fwd, 1)},
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0),
            "threads": {"intra": tf.config.threading.get_intra_op_parallelism_threads(),
                        "inter": tf.config.threading.get_inter_op_parallelism_threads()},
            "cpu_count": os.cpu_count()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="taylorformer")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--context", type=int, default=96)
    p.add_argument("--horizon", type=int, default=96)
    p.add_argument("--steps", type=int, default=20, help="timed train steps (after warm-up)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--xla", choices=("off", "on", "both"), default="both")
    p.add_argument("--dtype-policy", default=None, help="e.g. mixed_bfloat16")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TF default)")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.xla]
    results = []
    for xla in modes:
        r = run(args.preset, args.batch, args.context, args.horizon, args.steps, args.warmup, xla,
                dtype_policy=args.dtype_policy)
        results.append(r)
        print(json.dumps(r))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    main()
