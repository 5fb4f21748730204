"""Peak memory and time of dense vs tiled attention (taylorformer.attention).

Every (N, path, XLA) config runs in a fresh subprocess, so its peak RSS
(resource.getrusage max RSS, a high-water mark) is its own. In that process the forward
runs first (peak read after it), then forward+backward (peak read again). Times are the
best of a few calls after a warm-up call (tracing / XLA compilation excluded).

    .venv/bin/python benchmarks/attention_executor_bench.py [--sizes 1000 4000 10000]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(n, path, xla, heads, dim, tile, repeats):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    from taylorformer.attention import dense_attend, mha_score, tiled_attend

    tile = tile or 512
    q, k, v, dout = (tf.random.normal([1, heads, n, dim]) for _ in range(4))

    def run():
        if path == "dense":
            return dense_attend(mha_score, q, k, v)
        return tiled_attend(mha_score, q, k, v, tile_q=tile, tile_k=tile)

    def fwd():
        return tf.reduce_sum(run())

    def fwd_bwd():
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = run()
        return tf.add_n([tf.reduce_sum(g) for g in tape.gradient(out, [q, k, v], dout)])

    result = {"base_mib": rss_mib(), "tile": tile if path == "tiled" else "-"}
    for name, f in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
        f = tf.function(f, jit_compile=xla)
        f().numpy()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            f().numpy()
            times.append(time.perf_counter() - start)
        result[name] = {"s": min(times), "peak_mib": rss_mib()}
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 10000])
    parser.add_argument("--paths", nargs="+", default=["dense", "tiled"])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--tile", type=int, help="default: 512")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--child", nargs=3, metavar=("N", "PATH", "XLA"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        n = int(args.child[0])
        child(n, args.child[1], args.child[2] == "1", args.heads, args.dim, args.tile,
              repeats=3 if n <= 4000 else 1)
        return
    print(f"B=1 H={args.heads} d={args.dim} Nq=Nk=N; peak = max RSS of a fresh process (MiB), "
          "base = after import + inputs; s = best time per call")
    print(f"{'N':>6} {'path':>6} {'tile':>5} {'xla':>4} {'base':>6} {'fwd peak':>9} {'fwd s':>8} "
          f"{'f+b peak':>9} {'f+b s':>8}")
    for n in args.sizes:
        for xla in (False, True):
            for path in args.paths:
                cmd = [sys.executable, __file__, "--child", str(n), path, str(int(xla)),
                       "--heads", str(args.heads), "--dim", str(args.dim)]
                cmd += ["--tile", str(args.tile)] if args.tile else []
                head = f"{n:>6} {path:>6}"
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    print(f"{head} {'yes' if xla else 'no':>10} timed out after {args.timeout}s")
                    continue
                lines = proc.stdout.strip().splitlines()
                if proc.returncode or not lines:
                    print(f"{head} {'yes' if xla else 'no':>10} failed (rc {proc.returncode}): "
                          f"{proc.stderr.strip()[-300:]}")
                    continue
                r = json.loads(lines[-1])
                print(f"{head} {r['tile']:>5} {'yes' if xla else 'no':>4} {r['base_mib']:>6.0f} "
                      f"{r['fwd']['peak_mib']:>9.0f} {r['fwd']['s']:>8.3f} "
                      f"{r['fwd_bwd']['peak_mib']:>9.0f} {r['fwd_bwd']['s']:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
