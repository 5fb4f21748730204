"""Training throughput of TE-TNP / TE-PT-TNP at the paper's 1-D GP size (CPU).

Batch 16 from ``gp-te-tnp`` (Nc ~ U{1..64} padded to 64, Nt = 128), paper model size
(Dz 128, 5 layers, 8 heads x 16, kernel MLP 2 x 128). The library's train step
(``Trainer.compiled_step``): negative mean log-likelihood, AdamW (lr 5e-4, weight decay 1e-4),
global gradient-norm clipping at 0.5. Batches are pre-sampled, so the model step alone is
timed. Each configuration runs in a fresh subprocess (its own peak RSS).

    python benchmarks/te_train_throughput.py                       # te-tnp, te-pt-tnp; XLA off/on
    python benchmarks/te_train_throughput.py --model te-tnp --steps 10 --no-xla
    python benchmarks/te_train_throughput.py --override '{"encoder": {"attention": {"kernel_dtype": "bfloat16"}}}'

Prints one JSON line per configuration (steps/s, seconds per step, process CPU seconds
per step (user + sys: less sensitive than wall time to other work on a shared machine),
peak RSS in MiB).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time


def run_config(args, model_name, xla):
    import tensorflow as tf

    from taylorformer import registry
    from taylorformer.workflow import training

    task = registry.get("task", "gp-te-tnp")()
    cfg = training.TrainConfig(batch_size=args.batch_size, learning_rate=5e-4, weight_decay=1e-4,
                               jit_compile=xla, seed=0)
    trainer = training.Trainer({"preset": model_name, **json.loads(args.override)}, task, cfg, out_dir=None)
    compiled = trainer.compiled_step()
    model = trainer.model

    def step(batch):
        return compiled(batch)["loss"]

    batches = [{k: tf.constant(v) for k, v in b.items()} for b in
               task.dataset("train", batch_size=args.batch_size).take(args.warmup + args.steps)]
    start = time.perf_counter()
    for b in batches[: args.warmup]:
        float(step(b))
    warmup_s = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, start = usage.ru_utime + usage.ru_stime, time.perf_counter()
    per_step = []
    for b in batches[args.warmup:]:
        t0 = time.perf_counter()
        float(step(b))
        per_step.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    per_step.sort()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    return {"model": model_name, "xla": xla, "batch_size": args.batch_size,
            "override": json.loads(args.override), "params": int(model.count_params()),
            "steps": args.steps, "steps_per_s": round(args.steps / elapsed, 3),
            "s_per_step": round(elapsed / args.steps, 3),
            "median_s_per_step": round(per_step[len(per_step) // 2], 3),
            "min_s_per_step": round(per_step[0], 3),
            "cpu_s_per_step": round(cpu / args.steps, 3), "warmup_s_incl_trace": round(warmup_s, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "cpus": os.cpu_count()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help="te-tnp and/or te-pt-tnp (default both)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--override", default="{}", help="JSON spec overrides for build_model")
    parser.add_argument("--no-xla", action="store_true")
    parser.add_argument("--xla-only", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_config(args, args.child[0], args.child[1] == "xla")), flush=True)
        return
    models = args.model or ["te-tnp", "te-pt-tnp"]
    modes = ["xla"] if args.xla_only else ["graph"] if args.no_xla else ["graph", "xla"]
    env = {"OPENBLAS_NUM_THREADS": "1", **os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    base = ["--batch-size", str(args.batch_size), "--steps", str(args.steps),
            "--warmup", str(args.warmup), "--override", args.override]
    for model in models:
        for mode in modes:
            out = subprocess.run([sys.executable, __file__, *base, "--child", model, mode],
                                 env=env, capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr[-4000:])
            print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
