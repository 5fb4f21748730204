"""Autoregressive forecasts of many windows x paths: time and peak memory, this tree against a baseline.

Setting (issue 38): the ``taylorformer`` preset (untrained: time and memory do not depend
on the weights) forecasting the first W test windows of ETTh1 (context 96, horizon 96;
``--context``/``--horizon`` change them) with S sampled paths through
``task.forecast(model, starts, num_samples=S, seed=0)``.
Each run is a fresh subprocess (its peak RSS, ``ru_maxrss``, is its own) importing one
side's sources laid out as the installed package (the baseline from ``git archive``, as
``benchmarks/conditional_inference.py`` does). A case is ``SIDE:W:S[:OPTION]``:

* ``baseline:16:100``: one call on W windows (the baseline holds every row's caches at once);
* ``baseline:328:100:batch16``: W windows in calls of 16 windows each (what a user of the
  baseline had to do to stay in memory);
* ``candidate:64:100:2GB``: one call with ``memory_budget="2GB"`` (no option: the default budget,
  ``bounded_sampling.default_budget``).

Per run: the wall and CPU time of the call (first call: tracing included), the RSS before it and
the peak, the number of traces of the cached decoding loop (candidate) and a checksum of
the samples (the same seed gives the same samples whatever the budget). ``--again S2``
times a second call with S2 paths on the same windows (no new trace on the candidate).

    python benchmarks/bounded_sampling.py --baseline f4514d2 \\
        --cases baseline:16:100,candidate:16:100,candidate:64:100:2GB
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conditional_inference import export  # noqa: E402

DATA = "/work/shared/data/ett/ETTh1.csv"


def child(windows, samples, option, again, data, context=96, horizon=96):
    """Runs in the subprocess, with the side's package first on sys.path."""
    import resource
    import time

    import numpy as np
    import tensorflow as tf

    import taylorformer as tfm
    from taylorformer.task import make_task

    tf.keras.utils.set_random_seed(0)
    model = tfm.build_model("taylorformer")
    task = make_task("ett", {"path": data, "context_length": context, "horizon": horizon})
    starts = task.window_starts("test")[:windows]
    kwargs, calls = {}, [starts]
    if option and option.startswith("batch"):
        size = int(option[len("batch"):])
        calls = [starts[i:i + size] for i in range(0, len(starts), size)]
    elif option:
        kwargs["memory_budget"] = option
    maxrss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # noqa: E731
    rss_before = maxrss()
    start, cpu = time.perf_counter(), time.process_time()
    out = [task.forecast(model, part, num_samples=samples, seed=0, **kwargs)["samples"] for part in calls]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    result = {"windows": int(len(starts)), "samples": samples, "option": option, "context": context,
              "horizon": horizon, "seconds": round(seconds, 2),
              "cpu_seconds": round(cpu, 2),
              "rss_before_mib": round(rss_before), "peak_rss_mib": round(maxrss()),
              "checksum": float(np.concatenate(out, 1)[:, :4].sum())}
    if again:
        start, cpu = time.perf_counter(), time.process_time()
        task.forecast(model, calls[0], num_samples=again, seed=0, **kwargs)
        result.update(again_samples=again, again_seconds=round(time.perf_counter() - start, 2),
                      again_cpu_seconds=round(time.process_time() - cpu, 2),
                      peak_rss_after_again_mib=round(maxrss()))
    if hasattr(model, "tracing_count"):
        result["traces"] = model.tracing_count()
    return result


def run(pkg, windows, samples, option, again, data, context, horizon):
    code = ("import sys, json; sys.meta_path[:] = [f for f in sys.meta_path "
            "if 'editable' not in getattr(f, '__name__', type(f).__name__).lower()]; "
            f"sys.path.insert(0, {pkg!r}); sys.path.insert(1, {os.path.dirname(os.path.abspath(__file__))!r}); "
            "import taylorformer, bounded_sampling as bench; "
            f"assert taylorformer.__file__.startswith({pkg!r}), taylorformer.__file__; "
            f"print('RESULT', json.dumps(bench.child({windows}, {samples}, {option!r}, {again}, {data!r}, "
            f"{context}, {horizon})))")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
        raise SystemExit(f"{windows} x {samples} ({option}) failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def parse_case(text):
    parts = text.split(":")
    if len(parts) not in (3, 4) or parts[0] not in ("baseline", "candidate"):
        raise argparse.ArgumentTypeError(f"a case is SIDE:W:S[:OPTION] with SIDE baseline or candidate, got {text!r}")
    return parts[0], int(parts[1]), int(parts[2]), parts[3] if len(parts) == 4 else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="f4514d2", help="commit to compare against")
    parser.add_argument("--candidate", help="commit to measure (default: the working tree)")
    parser.add_argument("--cases", required=True, help="comma-separated SIDE:W:S[:OPTION]")
    parser.add_argument("--again", type=int, default=0, help="time a second call with this many paths")
    parser.add_argument("--data", default=DATA, help="ETTh1.csv")
    parser.add_argument("--context", type=int, default=96, help="context rows per window")
    parser.add_argument("--horizon", type=int, default=96, help="forecast rows per window")
    args = parser.parse_args()
    cases = [parse_case(c) for c in args.cases.split(",")]
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        sides = {side: export(commit, os.path.join(tmp, side))
                 for side, commit in (("baseline", args.baseline), ("candidate", args.candidate))
                 if any(c[0] == side for c in cases)}
        for side, windows, samples, option in cases:
            res = run(sides[side], windows, samples, option, args.again, args.data, args.context, args.horizon)
            print(json.dumps({"side": side, **res}), flush=True)


if __name__ == "__main__":
    main()
