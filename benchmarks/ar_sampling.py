"""Autoregressive sampling: cached (incremental) decoding against one full pass per step.

Setting (issue 16, the ETT setting): preset ``taylorformer`` at its default size (4
layers, 6 heads x 11, width 32, LocalTaylor p=0 q=1, k=1), 8 windows x 10 samples x 96
target steps with 96 context points (x in [-1, 1], random-walk y: the speed does not
depend on the values or on the weights, which are untrained). Both paths run in ONE
process on the same batch and seed, so their ratio is what to read (absolute times on
shared machines vary from day to day):

* ``full``: ``model.sample(..., cache=False)``: one teacher-forced pass of the whole
  Nc + Nt sequence per step (the reference, the code before issue 16);
* ``cached``: ``model.sample(...)`` (``cache=True``): the context once, then one token
  per layer per step against cached keys/values, one ``tf.while_loop``;
* ``cached-xla``: the same loop compiled with XLA (``jit_compile=True``).

Each path is warmed up once (tracing) and timed ``--repeats`` times (medians of the wall
time and of this process's CPU time; on a machine shared with other jobs the CPU time
is the steadier measure of the work). The samples of the paths are compared: max abs
difference, next to the samples' largest magnitude (the untrained model's paths wander
far and float differences grow along 96 steps); since issue 38 the random streams are
integer hashes, so XLA draws the same paths and is compared too. The estimate for the whole ETTh1 test split
(17,420 rows, split 69/11/20, every window start, as ``--task ett`` evaluates it) is
the number of test windows / windows per batch x the time per batch, at ``--windows``
and at ``--eval-batch`` windows per batch (measured too, cached paths only).

    .venv/bin/python benchmarks/ar_sampling.py            # the issue's setting
    .venv/bin/python benchmarks/ar_sampling.py --repeats 1 --eval-batch 0   # quicker
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the simulators (importing taylorformer no longer sets it)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import taylorformer as tfm  # noqa: E402
from taylorformer.tasks.csv_series import split_cuts  # noqa: E402

ETTH1_ROWS, ETT_SPLIT = 17420, (0.69, 0.11, 0.20)
PATHS = {"full": {"cache": False}, "cached": {"cache": True},
         "cached-xla": {"cache": True, "jit_compile": True}}


def forecasting_batch(windows, context, horizon, seed=0):
    """``windows`` tasks: x in [-1, 1] over context + horizon steps, standardised random-walk y."""
    rng = np.random.default_rng(seed)
    n = context + horizon
    x = np.broadcast_to(np.linspace(-1.0, 1.0, n, dtype=np.float32)[None, :, None], (windows, n, 1))
    y = np.cumsum(rng.normal(scale=0.1, size=(windows, n, 1)), 1)
    y = ((y - y.mean(1, keepdims=True)) / (y.std(1, keepdims=True) + 1e-6)).astype(np.float32)
    return {"xc": tf.constant(x[:, :context]), "yc": tf.constant(y[:, :context]),
            "xt": tf.constant(x[:, context:]), "yt": tf.zeros_like(tf.constant(y[:, context:]))}


def timed(model, batch, samples, repeats, **options):
    """Warm-up run, then ``repeats`` timed runs: (median wall seconds, median CPU seconds of
    this process, samples)."""
    out = model.sample(batch, samples, seed=0, **options)
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = np.asarray(model.sample(batch, samples, seed=0, **options))
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu), out


def test_windows(context, horizon):
    """Evaluation windows of the ETTh1 test split (every start, stride 1)."""
    lo, hi = split_cuts(ETTH1_ROWS, ETT_SPLIT)["test"]
    return hi - lo - context - horizon + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="taylorformer")
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--context", type=int, default=96)
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", default="full,cached,cached-xla")
    parser.add_argument("--eval-batch", type=int, default=32,
                        help="windows per batch for the test-split estimate (0: only --windows)")
    args = parser.parse_args()
    tf.keras.utils.set_random_seed(0)
    model = tfm.build_model(args.preset)
    batch = forecasting_batch(args.windows, args.context, args.horizon)
    n_windows = test_windows(args.context, args.horizon)
    paths = args.paths.split(",")
    result = {"preset": args.preset, "params": int(model.count_params()), "windows": args.windows,
              "samples": args.samples, "context": args.context, "horizon": args.horizon,
              "repeats": args.repeats, "test_windows": n_windows, "seconds": {}, "cpu_seconds": {},
              "test_split_minutes": {}}
    samples = {}
    for path in paths:
        wall, cpu, samples[path] = timed(model, batch, args.samples, args.repeats, **PATHS[path])
        result["seconds"][path], result["cpu_seconds"][path] = round(wall, 3), round(cpu, 3)
        result["test_split_minutes"][path] = round(n_windows / args.windows * wall / 60, 1)
        print(f"{path:11s} {wall:8.3f} s wall, {cpu:8.3f} s CPU per batch of {args.windows} windows x "
              f"{args.samples} samples x {args.horizon} steps ({wall / args.horizon * 1e3:.1f} ms per step)",
              flush=True)
    for path in (p for p in paths if p != "full" and "full" in paths):
        result[f"speedup_{path}"] = {"wall": round(result["seconds"]["full"] / result["seconds"][path], 1),
                                     "cpu": round(result["cpu_seconds"]["full"] / result["cpu_seconds"][path], 1)}
        result[f"max_abs_diff_{path}"] = float(np.abs(samples[path] - samples["full"]).max())
        result["sample_scale"] = float(np.abs(samples["full"]).max())
    if args.eval_batch and args.eval_batch != args.windows:
        big = forecasting_batch(args.eval_batch, args.context, args.horizon, seed=1)
        result["eval_batch"], result["eval_batch_seconds"] = args.eval_batch, {}
        for path in (p for p in paths if p != "full"):
            wall, _, _ = timed(model, big, args.samples, args.repeats, **PATHS[path])
            result["eval_batch_seconds"][path] = round(wall, 3)
            result["test_split_minutes"][f"{path}@{args.eval_batch}"] = round(
                n_windows / args.eval_batch * wall / 60, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
