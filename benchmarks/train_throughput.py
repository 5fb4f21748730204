"""Training throughput and inference time of an NP model on a task (CPU or GPU).

Each configuration runs in a fresh subprocess so that peak memory (max RSS) is its own.

    python benchmarks/train_throughput.py --model tnp-d --task gp-te-tnp
    python benchmarks/train_throughput.py --model tnp-d --task gp-te-tnp --xla-only

Prints one JSON line per configuration: steps/s over ``--steps`` timed steps after
``--warmup`` steps (batches pre-sampled, so the model step alone is timed; the
``end_to_end`` figure includes the tf.data sampling pipeline), peak RSS in MiB, and the
forward time for ``--infer-batch`` tasks at Nc = Nt = ``--infer-points``.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time


def run_config(args, xla):
    import numpy as np
    import tensorflow as tf

    from taylorformer.workflow import training
    from taylorformer.task import make_task

    task = make_task(args.task)
    cfg = training.TrainConfig(steps=args.steps, batch_size=args.batch_size, jit_compile=xla, seed=0)
    trainer = training.Trainer(args.model, task, cfg, out_dir="/tmp/taylorformer-bench")
    compiled = trainer.compiled_step()
    batches = list(task.dataset("train", batch_size=args.batch_size).take(args.warmup + args.steps))
    for b in batches[: args.warmup]:
        compiled(b)
    start = time.perf_counter()
    for b in batches[args.warmup:]:
        loss = compiled(b)["loss"]
    float(loss)
    steps_per_s = args.steps / (time.perf_counter() - start)

    start = time.perf_counter()
    for i, b in enumerate(task.dataset("train", batch_size=args.batch_size, seed=1)):
        loss = compiled(b)["loss"]
        if i + 1 == args.steps:
            break
    float(loss)
    end_to_end = args.steps / (time.perf_counter() - start)

    rng = np.random.default_rng(0)
    n, b = args.infer_points, args.infer_batch
    big = {k: tf.constant(rng.uniform(-2, 2, (b, n, 1)).astype("float32")) for k in ("xc", "yc", "xt", "yt")}
    forward = tf.function(lambda batch: trainer.model(batch), jit_compile=xla)
    forward(big)  # trace/compile
    times = []
    for _ in range(3):
        start = time.perf_counter()
        out = forward(big)
        float(out["loc"][0, 0, 0])
        times.append(time.perf_counter() - start)
    return {
        "model": args.model, "task": args.task, "batch_size": args.batch_size, "xla": xla,
        "params": int(trainer.model.count_params()),
        "steps_per_s": round(steps_per_s, 2), "end_to_end_steps_per_s": round(end_to_end, 2),
        f"forward_s_batch{b}_n{n}": round(min(times), 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "threads": os.cpu_count(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tnp-d")
    parser.add_argument("--task", default="gp-te-tnp")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--infer-points", type=int, default=1000)
    parser.add_argument("--infer-batch", type=int, default=16)
    parser.add_argument("--xla-only", action="store_true")
    parser.add_argument("--no-xla", action="store_true")
    parser.add_argument("--child", choices=["xla", "eager"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_config(args, args.child == "xla")), flush=True)
        return
    modes = ["xla"] if args.xla_only else ["eager"] if args.no_xla else ["eager", "xla"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "OPENBLAS_NUM_THREADS": "1"}
    for mode in modes:
        argv = [a for a in sys.argv[1:] if a not in ("--xla-only", "--no-xla")]
        out = subprocess.run([sys.executable, __file__, *argv, "--child", mode], env=env,
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr[-4000:])
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
