"""Start-up time of the command line against ``python -c "import tensorflow"``, alternately
in one run (issue 39: ``--version`` at least 5x faster than importing TensorFlow).

    .venv/bin/python benchmarks/cli_startup.py --repeats 5

Each repeat runs, in turn, ``taylorformer --version`` (the console script beside this
Python, else ``python -m taylorformer_cli``), ``taylorformer --help``, ``taylorformer
train --steps -3`` (an argument error), ``python -m taylorformer.cli --version`` (the
package imported in full, as the console script did before issue 39) and ``python -c
"import tensorflow"``, each in a fresh process; prints one JSON line per repeat and a summary line with the medians and the
ratios ``import_tensorflow / command``.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def command_line():
    """How to start the command line: the console script next to this Python, if any."""
    script = os.path.join(os.path.dirname(sys.executable), "taylorformer")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "taylorformer_cli"]


def wall(argv):
    """Seconds ``argv`` takes from start to exit (its output discarded)."""
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cli = command_line()
    cases = {"version": cli + ["--version"], "help": cli + ["--help"],
             "argument_error": cli + ["train", "--steps", "-3"],
             "full_import_version": [sys.executable, "-m", "taylorformer.cli", "--version"],
             "import_tensorflow": [sys.executable, "-c", "import tensorflow"]}
    times = {name: [] for name in cases}
    for repeat in range(args.repeats):
        for name, argv in cases.items():
            times[name].append(wall(argv))
        print(json.dumps({"repeat": repeat, **{k: round(v[-1], 3) for k, v in times.items()}}), flush=True)
    medians = {name: statistics.median(v) for name, v in times.items()}
    tf_s = medians["import_tensorflow"]
    print(json.dumps({"command": " ".join([os.path.basename(cli[0]), *cli[1:]]),
                      "median_s": {k: round(v, 3) for k, v in medians.items()},
                      "import_tensorflow_over": {k: round(tf_s / v, 1) for k, v in medians.items()
                                                 if k != "import_tensorflow"}}))


if __name__ == "__main__":
    main()
