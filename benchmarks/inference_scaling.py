"""Peak memory and wall time of ``bsa-tnp`` inference as Nc and Nt grow, tiled vs dense.

Every configuration runs in a fresh subprocess, so its peak RSS (``resource.getrusage``
max RSS, a high-water mark that includes TensorFlow, the model and XLA compilation) is
its own. A first child measures the framework's floor (TensorFlow, TFP and one tiny XLA
compilation); ``above floor`` is a configuration's peak minus it, the memory of the model
and its compiled code, comparable across frameworks with different floors. In each
configuration's process the model (the ``bsa-tnp`` preset at the paper's size, random
weights, dim_x = 2) is built, one call compiles (``first_s``), then the best of
``--repeats`` calls is reported (``wall_s``, and ``cpu_s``: CPU seconds of the whole
process in that call, all threads). Inputs: batch 1, locations ~ U[-2, 2]^2, y ~ N(0, 1).

Paths: ``tiled`` = the biased attention's tiled path (tiles of 256 at batch 1: online
softmax, O(tile^2) memory per head); ``dense`` = one [B, H, Nc + Nt, Nc] logits block per
layer, run only while Nc * (Nc + Nt) <= ``--dense-max-pairs``.

``--train``: one step of the library's trainer (loss = -mean log-likelihood, gradients,
global-norm clipping 0.5, AdamW update) at batch 8, Nc = 512, Nt = 1024, tiled path
(tiles of 128 at batch 8, recomputation in the backward pass).

    .venv/bin/python benchmarks/inference_scaling.py                    # default sizes
    .venv/bin/python benchmarks/inference_scaling.py --sizes 20000x100000 --paths tiled
    .venv/bin/python benchmarks/inference_scaling.py --train

XLA:CPU emits 256-bit vector code by default; on a CPU with AVX-512 the children run with
``XLA_FLAGS=--xla_cpu_prefer_vector_width=512`` (20-30% faster here on the exp-heavy
bias), unless ``XLA_FLAGS`` is already set or ``--vector-width 256`` is given. The flags
used are printed in the header.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

DEFAULT_SIZES = ["512x1024", "1000x1000", "2000x2000", "5000x5000", "10000x10000"]


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _setup():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    from taylorformer.models import build_model

    return np, tf, build_model


def _batch(np, tf, b, nc, nt, seed=0):
    rng = np.random.default_rng(seed)
    out = {"xc": rng.uniform(-2, 2, (b, nc, 2)), "yc": rng.normal(size=(b, nc, 1)),
           "xt": rng.uniform(-2, 2, (b, nt, 2)), "yt": rng.normal(size=(b, nt, 1)),
           "mask_c": np.ones((b, nc)), "mask_t": np.ones((b, nt))}
    return {k: tf.constant(v, tf.float32) for k, v in out.items()}


def _attention(path, tile):
    if path == "dense":
        return {"dense_pairs": 1 << 62}
    return {"tile_size": tile} if tile else {}


def _timed(fn, repeats):
    best = None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        sample = (time.perf_counter() - w, time.process_time() - c)
        best = sample if best is None or sample[0] < best[0] else best
    return best


def child_floor():
    """The framework's own peak RSS: TensorFlow, TFP and one tiny XLA compilation (what
    every configuration pays before the model; ``above floor`` = peak minus this)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfp.distributions.Normal(0.0, 1.0).log_prob(0.0).numpy()
    tf.function(lambda x: tf.exp(x) * 2.0, jit_compile=True)(tf.ones(3)).numpy()
    return {"peak_mib": rss_mib()}


def child_infer(nc, nt, path, xla, tile, repeats, layers=6):
    np, tf, build_model = _setup()
    model = build_model("bsa-tnp", dim_x=2, encoder={"layers": layers, "attention": _attention(path, tile)})
    batch = _batch(np, tf, 1, nc, nt)
    base = rss_mib()
    fn = tf.function(lambda b: model(b), jit_compile=xla)
    start = time.perf_counter()
    fn(batch)["loc"].numpy()
    first = time.perf_counter() - start
    wall, cpu = _timed(lambda: fn(batch)["loc"].numpy(), repeats)
    return {"base_mib": base, "peak_mib": rss_mib(), "first_s": first, "wall_s": wall, "cpu_s": cpu}


def child_train(xla, repeats, tile=None, batch_size=8, nc=512, nt=1024):
    """One step of the library's trainer (``Trainer.compiled_step``: loss, gradients, clipping at
    0.5, AdamW at 1e-4) on a fixed random batch."""
    np, tf, _ = _setup()
    from taylorformer import registry
    from taylorformer.workflow import training

    spec = {"preset": "bsa-tnp",
            "encoder": {"attention": _attention("dense" if tile == 0 else "tiled", tile)}}
    cfg = training.TrainConfig(batch_size=batch_size, learning_rate=1e-4, jit_compile=xla)
    trainer = training.Trainer(spec, registry.get("task", "gp-2d-bsa")(), cfg, out_dir=None)
    batch = _batch(np, tf, batch_size, nc, nt)
    base = rss_mib()
    compiled = trainer.compiled_step()
    step = lambda: compiled(batch)["loss"].numpy()  # noqa: E731
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    wall, cpu = _timed(step, repeats)
    return {"base_mib": base, "peak_mib": rss_mib(), "first_s": first, "wall_s": wall, "cpu_s": cpu}


def has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


def child_env(vector_width):
    """Environment of the child processes: XLA_FLAGS as given, else the vector width."""
    env = dict(os.environ)
    if "XLA_FLAGS" not in env and vector_width == 512 and has_avx512():
        env["XLA_FLAGS"] = "--xla_cpu_prefer_vector_width=512"
    return env


def run_child(args, timeout, env):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(args)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])


def ns_per_pair(result, nc, nt, layers):
    return 1e9 * result["wall_s"] / (nc * (nc + nt) * layers)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, help="NcxNt")
    parser.add_argument("--paths", nargs="+", default=["tiled", "dense"])
    parser.add_argument("--xla", nargs="+", type=int, default=[1], help="1 = jit_compile")
    parser.add_argument("--layers", type=int, default=6, help="KRBlocks (inference; the paper: 6)")
    parser.add_argument("--tile", type=int, default=None, help="default: the layer's choice")
    parser.add_argument("--dense-max-pairs", type=float, default=2.5e7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--train", action="store_true", help="also the batch-8 training step")
    parser.add_argument("--train-tile", type=int, default=None, help="default: the layer's choice (128 at batch 8)")
    parser.add_argument("--vector-width", type=int, choices=[256, 512], default=512,
                        help="512: AVX-512 code from XLA where the CPU has it (ignored if XLA_FLAGS is set)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        job = json.loads(args.child)
        kind = job.pop("kind")
        child = {"infer": child_infer, "train": child_train, "floor": child_floor}[kind]
        print(json.dumps(child(**job)))
        return
    env = child_env(args.vector_width)
    print(f"bsa-tnp preset ({args.layers} KRBlocks, 4 heads x 32, 5 RBF basis), batch 1; python {sys.version.split()[0]}; "
          f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"XLA_FLAGS={env.get('XLA_FLAGS', '')!r}")
    floor = run_child({"kind": "floor"}, args.timeout, env).get("peak_mib", float("nan"))
    print(f"framework floor (import tensorflow + tensorflow_probability, one tiny XLA "
          f"compilation): {floor:.0f} MiB peak RSS")
    print("| Nc | Nt | path | XLA | wall s | CPU s | first call s | peak RSS MiB | above floor MiB | base RSS MiB | ns/pair/block (wall) |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        nc, nt = (int(v) for v in size.lower().split("x"))
        for xla in args.xla:
            for path in args.paths:
                if path == "dense" and nc * (nc + nt) > args.dense_max_pairs:
                    print(f"| {nc} | {nt} | dense | {bool(xla)} | skipped: Nc*(Nc+Nt) = {nc * (nc + nt):.2g} "
                          f"pairs per layer exceeds --dense-max-pairs | | | | | | |", flush=True)
                    continue
                repeats = args.repeats if nc * (nc + nt) <= 3e7 else 1
                r = run_child({"kind": "infer", "nc": nc, "nt": nt, "path": path, "xla": bool(xla),
                               "tile": args.tile, "repeats": repeats,
                               "layers": args.layers}, args.timeout, env)
                if "error" in r:
                    print(f"| {nc} | {nt} | {path} | {bool(xla)} | {r['error']} | | | | | | |", flush=True)
                    continue
                print(f"| {nc} | {nt} | {path} | {bool(xla)} | {r['wall_s']:.3f} | {r['cpu_s']:.3f} | "
                      f"{r['first_s']:.1f} | {r['peak_mib']:.0f} | {r['peak_mib'] - floor:.0f} | "
                      f"{r['base_mib']:.0f} | {ns_per_pair(r, nc, nt, args.layers):.1f} |", flush=True)
    if args.train:
        print("\nTraining step, batch 8, Nc = 512, Nt = 1024 (tiled, AdamW, clip 0.5)")
        print("| XLA | wall s | CPU s | first call s | peak RSS MiB | above floor MiB | base RSS MiB |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for xla in args.xla:
            r = run_child({"kind": "train", "xla": bool(xla), "repeats": args.repeats,
                           "tile": args.train_tile}, args.timeout, env)
            if "error" in r:
                print(f"| {bool(xla)} | {r['error']} | | | | | |", flush=True)
                continue
            print(f"| {bool(xla)} | {r['wall_s']:.3f} | {r['cpu_s']:.3f} | {r['first_s']:.1f} | "
                  f"{r['peak_mib']:.0f} | {r['peak_mib'] - floor:.0f} | {r['base_mib']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
