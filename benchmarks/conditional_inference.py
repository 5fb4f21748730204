"""Conditional NP inference at large sizes: this tree against an earlier commit, side by side.

    python benchmarks/conditional_inference.py --baseline d0c8c41
    python benchmarks/conditional_inference.py --baseline d0c8c41 --cases tnp-d --rounds 5

Each side is a copy of the sources (the baseline from ``git archive``, the candidate
from the working tree, or another commit with ``--candidate``), laid out as the
installed package. Every (case, side, XLA) runs in a fresh subprocess, so its peak RSS
(``ru_maxrss``) is its own; the sides alternate within each round, so both see the same
machine load. Per run: the forward time (minimum over ``--reps`` calls after one
warm-up call that traces and compiles) and its process CPU seconds (all threads; other
jobs on a shared machine inflate it far less than the wall time), the warm-up call's time, the RSS before the
first call and its peak, and the peak anonymous memory (heap and tensors, without the
shared libraries' code pages: see :class:`AnonymousMemory`) over the whole run, and over
the timed calls alone after the heap the first call freed is returned to the system
(``steady``: the forward's own working set, without the compiler's transient heap).
``--malloc-arena-max N`` runs the children with glibc's ``MALLOC_ARENA_MAX=N``: the
compiler's threads then cannot leave freed memory behind in arenas of their own.
Cases (random inputs, default preset sizes, ``predict_distribution(batch).mean()`` in a
``tf.function``):

- ``tnp-d``: batch 16, Nc = Nt = 1000, x in 1-D (the issue's setting);
- ``te-tnp``: batch 1, Nc = Nt = 2000, x in 1-D;
- ``bsa-tnp``: batch 1, Nc = Nt = 5000, x in 2-D.

Prints one JSON line per run, then a table of medians over rounds and the
candidate/baseline ratio.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

CASES = {"tnp-d": dict(batch=16, nc=1000, nt=1000, dim_x=1),
         "te-tnp": dict(batch=1, nc=2000, nt=2000, dim_x=1),
         "bsa-tnp": dict(batch=1, nc=5000, nt=5000, dim_x=2)}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUT = {"taylorformer": "taylorformer", "plugins": "taylorformer/plugins", "tasks": "taylorformer/tasks"}


def child(case, xla, reps):
    """Runs in the subprocess, with the side's package first on sys.path."""
    import resource
    import time

    import numpy as np
    import tensorflow as tf

    import taylorformer as tfm

    c = CASES[case]
    model = tfm.build_model(case, dim_x=c["dim_x"], dim_y=1)
    rng = np.random.default_rng(1)
    shapes = {"xc": (c["batch"], c["nc"], c["dim_x"]), "yc": (c["batch"], c["nc"], 1),
              "xt": (c["batch"], c["nt"], c["dim_x"]), "yt": (c["batch"], c["nt"], 1)}
    batch = {k: tf.constant(rng.uniform(-2, 2, s), tf.float32) for k, s in shapes.items()}
    forward = tf.function(lambda b: model.predict_distribution(b).mean(), jit_compile=xla)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with AnonymousMemory() as anon:
        start = time.perf_counter()
        forward(batch).numpy()
        first_s = time.perf_counter() - start
        release_free_heap()
        with AnonymousMemory() as steady:
            times, cpu_times = [], []
            for _ in range(reps):
                start, cpu_start = time.perf_counter(), time.process_time()
                forward(batch).numpy()
                times.append(time.perf_counter() - start)
                cpu_times.append(time.process_time() - cpu_start)
    return {"forward_s": round(min(times), 3), "forward_cpu_s": round(min(cpu_times), 3),
            "first_call_s": round(first_s, 2),
            "rss_before_mib": round(rss_before),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "anon_before_mib": anon.before, "peak_anon_mib": anon.peak,
            "steady_anon_mib": steady.peak, "file_rss_after_mib": status_mib("RssFile")}


def release_free_heap():
    """Return the heap that the first call (tracing, compiling) freed to the system
    (glibc ``malloc_trim``), so that ``steady_anon_mib`` is the forward's own peak
    working set and not what the allocator kept; a no-op off glibc."""
    import ctypes
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def status_mib(field):
    """``field`` of /proc/self/status (e.g. RssAnon, RssFile) in MiB; None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        return None


class AnonymousMemory:
    """Peak anonymous RSS (``RssAnon``: the heap, tensors, the compiler's working memory)
    while the block runs, sampled every millisecond by a thread. Peak RSS (``ru_maxrss``)
    also counts the pages of shared libraries' code a call touches (``RssFile``): the
    XLA compiler's code, loaded once per process, which the system can drop and reread."""

    def __enter__(self):
        import threading
        self.before = self.peak = status_mib("RssAnon")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.001):
            now = status_mib("RssAnon")
            if now is not None:
                self.peak = max(self.peak, now)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def export(source, dest):
    """Lay out ``source`` (a commit, or None for the working tree) as an importable package."""
    tree = ROOT
    if source is not None:
        tree = os.path.join(dest, "tree")
        os.makedirs(tree)
        archive = subprocess.run(["git", "-C", ROOT, "archive", source, *LAYOUT], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    pkg = os.path.join(dest, "pkg")
    for name, target in LAYOUT.items():  # taylorformer first: plugins and tasks go inside it
        shutil.copytree(os.path.join(tree, name), os.path.join(pkg, target), dirs_exist_ok=True)
    return pkg


def run_child(pkg, module, call, label, env=None):
    """The JSON result of ``module.call`` (a Python expression, e.g. ``"child('tnp-d', True, 3)"``)
    in a fresh interpreter that imports taylorformer from the copy ``pkg`` only (the
    editable install's finder removed) and this folder's benchmark ``module``."""
    code = ("import sys, json; sys.meta_path[:] = [f for f in sys.meta_path "
            "if 'editable' not in getattr(f, '__name__', type(f).__name__).lower()]; "
            f"sys.path.insert(0, {pkg!r}); sys.path.insert(1, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import taylorformer, {module} as bench; "
            f"assert taylorformer.__file__.startswith({pkg!r}), taylorformer.__file__; "
            f"print('RESULT', json.dumps(bench.{call}))")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "OPENBLAS_NUM_THREADS": "1", **(env or {})}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
        raise SystemExit(f"{label} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def run(pkg, case, xla, reps, arena_max=None):
    env = None if arena_max is None else {"MALLOC_ARENA_MAX": str(arena_max)}
    return run_child(pkg, "conditional_inference", f"child({case!r}, {xla!r}, {reps})", f"{case} (xla={xla})", env)

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="commit to compare against")
    parser.add_argument("--candidate", help="commit to measure (default: the working tree)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {sorted(CASES)}")
    parser.add_argument("--xla", default="no,yes", help="no, yes or no,yes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--malloc-arena-max", type=int, help="glibc MALLOC_ARENA_MAX for the children")
    args = parser.parse_args()
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {sorted(CASES)}")
    if args.malloc_arena_max is not None and args.malloc_arena_max < 1:
        parser.error(f"--malloc-arena-max must be at least 1, got {args.malloc_arena_max}")
    modes = [{"no": False, "yes": True}[m] for m in args.xla.split(",")]
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        sides = {"baseline": export(args.baseline, os.path.join(tmp, "baseline")),
                 "candidate": export(args.candidate, os.path.join(tmp, "candidate"))}
        rows = {}
        for r in range(args.rounds):
            for case in cases:
                for xla in modes:
                    for side, pkg in sides.items():
                        res = run(pkg, case, xla, args.reps, args.malloc_arena_max)
                        rows.setdefault((case, xla, side), []).append(res)
                        print(json.dumps({"round": r, "case": case, "xla": xla, "side": side, **res}), flush=True)
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    print(f"\nbaseline {args.baseline}, candidate {args.candidate or 'working tree'}; medians of "
          f"{args.rounds} round(s)\n")
    print("| case | XLA | baseline s | candidate s | speed-up | CPU s (baseline / candidate) "
          "| peak RSS MiB (baseline / candidate) "
          "| peak anonymous MiB (baseline / candidate) | steady anonymous MiB (baseline / candidate) "
          "| first call s (baseline / candidate) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        for xla in modes:
            b, c = rows[(case, xla, "baseline")], rows[(case, xla, "candidate")]
            bt, ct = median([x["forward_s"] for x in b]), median([x["forward_s"] for x in c])
            pairs = [f"{median([x.get(key) for x in b])} / {median([x.get(key) for x in c])}"
                     for key in ("forward_cpu_s", "peak_rss_mib", "peak_anon_mib", "steady_anon_mib", "first_call_s")]
            print(f"| {case} | {'yes' if xla else 'no'} | {bt:.3f} | {ct:.3f} | {bt / ct:.2f}x | "
                  + " | ".join(pairs) + " |")


if __name__ == "__main__":
    main()
