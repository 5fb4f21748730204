"""Peak memory and wall time of TE-TNP / TE-PT-TNP inference, batch 1 (CPU).

Each configuration runs in a fresh subprocess, so its peak RSS (``ru_maxrss``) is its
own. Reported per configuration: ``baseline_rss_mib`` (after importing TensorFlow,
building the model and tracing the forward on a tiny input; in dense mode, where the
first call is already full size, after building), ``peak_rss_mib`` (whole
process, the number to compare with a 1 GB target) and their difference, the wall time
of one forward pass at Nc context and Nt target points (already traced; the tiny trace
call is excluded), and the process CPU seconds of that pass (user + sys: on a shared
machine the wall time depends on what else runs, CPU time much less).

    python benchmarks/te_inference.py                     # the default grid (minutes)
    python benchmarks/te_inference.py --model te-tnp --nc 5000 --mode tiled
    python benchmarks/te_inference.py --model te-tnp --nc 1000 --mode dense
    python benchmarks/te_inference.py --model te-tnp --nc 5000 --override '{"encoder": {"attention": {"kernel_dtype": "bfloat16"}}}'

``--mode tiled`` lets the TE attention choose (tiles for large sets); ``dense`` forces
one [B, Nq, Nk, width] block per attention call (only feasible for small Nc).
Prints one JSON line per configuration.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

DEFAULT_GRID = [
    ("te-tnp", 1000, "dense"), ("te-tnp", 1000, "tiled"), ("te-tnp", 5000, "tiled"),
    ("te-tnp", 10000, "tiled"), ("te-pt-tnp", 1000, "tiled"), ("te-pt-tnp", 5000, "tiled"),
    ("te-pt-tnp", 10000, "tiled"),
]


def _rss_mib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_config(model_name, nc, nt, mode, override):
    import numpy as np
    import tensorflow as tf

    from taylorformer.models import build_model
    from taylorformer.spec import deep_merge

    spec = json.loads(override)
    if mode == "dense":
        spec = deep_merge({"encoder": {"attention": {"dense_pairs": 1 << 62}}}, spec)
    model = build_model(model_name, **spec)
    after_build = _rss_mib()
    rng = np.random.default_rng(0)

    def batch(n_c, n_t):
        return {"xc": tf.constant(rng.uniform(-2, 2, (1, n_c, 1)).astype("float32")),
                "yc": tf.constant(rng.normal(size=(1, n_c, 1)).astype("float32")),
                "xt": tf.constant(rng.uniform(-3, 3, (1, n_t, 1)).astype("float32")),
                "yt": tf.zeros([1, n_t, 1])}

    if mode == "dense":  # static shapes: the dense decision needs them
        forward = tf.function(lambda b: model(b))
        warm = big = batch(nc, nt)
    else:  # one trace with dynamic set sizes, reused by the big call
        sig = {k: tf.TensorSpec([1, None, 1], tf.float32) for k in ("xc", "yc", "xt", "yt")}
        forward = tf.function(lambda b: model(b), input_signature=[sig])
        warm, big = batch(8, 8), batch(nc, nt)
    start = time.perf_counter()
    float(forward(warm)["loc"][0, 0, 0])
    trace_s = time.perf_counter() - start
    # dense: the warm-up call is already the full-size one, so count from the build
    baseline = after_build if mode == "dense" else _rss_mib()
    cpu0, start = _cpu_s(), time.perf_counter()
    out = forward(big)
    float(out["loc"][0, 0, 0])
    wall, cpu = time.perf_counter() - start, _cpu_s() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"model": model_name, "nc": nc, "nt": nt, "mode": mode, "override": json.loads(override),
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "first_call_s" if mode == "dense" else "trace_tiny_s": round(trace_s, 2),
            "rss_after_build_mib": round(after_build, 1), "baseline_rss_mib": round(baseline, 1), "peak_rss_mib": round(peak, 1),
            "peak_minus_baseline_mib": round(peak - baseline, 1),
            "finite": bool(np.isfinite(out["loc"].numpy()).all())}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["te-tnp", "te-pt-tnp"])
    parser.add_argument("--nc", type=int, action="append")
    parser.add_argument("--nt", type=int, default=1000)
    parser.add_argument("--mode", choices=["tiled", "dense"], default="tiled")
    parser.add_argument("--override", default="{}", help="JSON spec overrides for build_model")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_config(args.model, args.nc[0], args.nt, args.mode, args.override)), flush=True)
        return
    if args.model or args.nc:
        grid = [(args.model or "te-tnp", nc, args.mode) for nc in (args.nc or [1000])]
    else:
        grid = DEFAULT_GRID
    env = {"OPENBLAS_NUM_THREADS": "1", **os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    for model, nc, mode in grid:
        out = subprocess.run([sys.executable, __file__, "--child", "--model", model, "--nc", str(nc),
                              "--nt", str(args.nt), "--mode", mode, "--override", args.override],
                             env=env, capture_output=True, text=True)
        if out.returncode:
            print(json.dumps({"model": model, "nc": nc, "mode": mode, "error": out.stderr[-800:]}), flush=True)
            continue
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
