"""The whole quick start (fresh virtualenv, install, main job), two commits side by side.

    python benchmarks/quickstart_time.py --baseline 6b037b7            # against HEAD
    python benchmarks/quickstart_time.py --baseline 6b037b7 --candidate abc1234 --rounds 3

Each side is a ``git clone`` of this repository at its commit. A run deletes the side's
``.venv`` and ``runs/``, then times ``bash scripts/quickstart.sh`` (what the README's
first command does: create the virtualenv, ``pip install -e .``, ``taylorformer
train``, the test evaluation and the plot). Sides alternate within each round, so both
see the same machine load. Prints one JSON line per run (wall seconds, when each phase
ended: install and start-up, training, evaluation, plot; the final log-likelihood line),
then the median time per side and the candidate/baseline ratio.

Times on a shared machine move from day to day; the ratio is what carries over. The
main job's time target is stated on the day the issue measured the baseline: its wall
time that day times this ratio is the candidate's time on that machine
(benchmarks/README.md).
"""
import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clone(commit, dest):
    subprocess.run(["git", "clone", "-q", ROOT, dest], check=True)
    subprocess.run(["git", "-C", dest, "checkout", "-q", commit], check=True)
    return dest


#: lines of the main job's output that end a phase: install and start-up, training
#: (XLA compilation included), the test evaluation, the plot
PHASES = (("train_start", r"^Epoch 1/"), ("trained", r"^run directory: "),
          ("evaluated", r"^log-likelihood "), ("plotted", r"^plot: "))


def quickstart(tree):
    """Wall seconds of a fresh quick start in ``tree``, the seconds at which each of
    :data:`PHASES` ended, and the final log-likelihood line."""
    for name in (".venv", "runs"):
        shutil.rmtree(os.path.join(tree, name), ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.Popen(["bash", "scripts/quickstart.sh"], cwd=tree, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    marks, result, tail = {}, None, collections.deque(maxlen=40)
    for line in proc.stdout:
        tail.append(line)
        for name, pattern in PHASES:
            if name not in marks and re.match(pattern, line):
                marks[name] = round(time.perf_counter() - start, 1)
        if line.startswith("log-likelihood "):
            result = line.strip()
    seconds = time.perf_counter() - start
    if proc.wait():
        raise SystemExit(f"quick start in {tree} failed:\n{''.join(tail)}")
    return seconds, marks, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="commit to compare against")
    parser.add_argument("--candidate", default="HEAD", help="commit to measure (default HEAD)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    times = {"baseline": [], "candidate": []}
    with tempfile.TemporaryDirectory(prefix="tfm-quickstart-") as tmp:
        sides = {side: clone(getattr(args, side), os.path.join(tmp, side)) for side in times}
        for r in range(args.rounds):
            for side, tree in sides.items():
                seconds, marks, result = quickstart(tree)
                times[side].append(seconds)
                print(json.dumps({"round": r, "side": side, "commit": getattr(args, side),
                                  "wall_s": round(seconds, 1), "phase_ends_s": marks,
                                  "result": result}), flush=True)
    base, cand = (statistics.median(times[s]) for s in ("baseline", "candidate"))
    print(f"\nmedian of {args.rounds} round(s): baseline {args.baseline} {base:.1f} s, "
          f"candidate {args.candidate} {cand:.1f} s, ratio {cand / base:.2f}")


if __name__ == "__main__":
    main()
