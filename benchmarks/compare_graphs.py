"""Do two trees build the same TensorFlow graph? Op counts of a model's traced function.

    python benchmarks/compare_graphs.py --baseline f4514d2 --cases tnp-d --modes infer,xla,train

A refactor that should change no computation can be checked without timing it: each side
(the baseline from ``git archive``, the working tree as the candidate; laid out as
:mod:`conditional_inference` does) traces the case's ``predict_distribution(batch).mean()``
(``infer``: a ``tf.function``; ``xla``: with ``jit_compile=True``; ``train``: the gradient
of its sum w.r.t. the weights) at the case's sizes in a fresh subprocess, and counts the
ops of the graph and of every function in its library. Equal counts for every op type
mean the same graph up to op names and order (what XLA and TensorFlow run); a difference
is printed op by op. Nothing is run, so the numbers do not depend on the machine's load.
"""
import argparse
import collections
import json
import os
import sys
import tempfile

from conditional_inference import CASES, export, run_child

MODES = ("infer", "xla", "train")


def child(case, mode):
    """Runs in the subprocess: {op type: count} over the graph and its function library."""
    import numpy as np
    import tensorflow as tf

    import taylorformer as tfm

    c = CASES[case]
    model = tfm.build_model(case, dim_x=c["dim_x"], dim_y=1)
    rng = np.random.default_rng(1)
    shapes = {"xc": (c["batch"], c["nc"], c["dim_x"]), "yc": (c["batch"], c["nc"], 1),
              "xt": (c["batch"], c["nt"], c["dim_x"]), "yt": (c["batch"], c["nt"], 1)}
    batch = {k: tf.constant(rng.uniform(-2, 2, s), tf.float32) for k, s in shapes.items()}
    model.predict_distribution({k: v[:, :8] for k, v in batch.items()})  # build the weights

    def train(b):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model.predict_distribution(b).mean())
        return tape.gradient(loss, model.trainable_variables)

    fn = train if mode == "train" else (lambda b: model.predict_distribution(b).mean())
    graph = tf.function(fn, jit_compile=mode == "xla").get_concrete_function(batch).graph.as_graph_def()
    ops = collections.Counter(n.op for n in graph.node)
    for f in graph.library.function:
        ops.update(n.op for n in f.node_def)
    return dict(ops)


def run(pkg, case, mode):
    return run_child(pkg, "compare_graphs", f"child({case!r}, {mode!r})", f"{case} ({mode})")

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="commit to compare against")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {sorted(CASES)}")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {MODES}")
    args = parser.parse_args()
    cases, modes = args.cases.split(","), args.modes.split(",")
    bad = sorted(set(cases) - set(CASES)) + sorted(set(modes) - set(MODES))
    if bad:
        parser.error(f"unknown case(s) or mode(s) {bad}; cases: {sorted(CASES)}, modes: {MODES}")
    same = True
    with tempfile.TemporaryDirectory(prefix="tfm-graphs-") as tmp:
        sides = {"baseline": export(args.baseline, os.path.join(tmp, "baseline")),
                 "candidate": export(None, os.path.join(tmp, "candidate"))}
        for case in cases:
            for mode in modes:
                base, cand = (run(pkg, case, mode) for pkg in sides.values())
                diff = {op: (base.get(op, 0), cand.get(op, 0)) for op in sorted(set(base) | set(cand))
                        if base.get(op, 0) != cand.get(op, 0)}
                same &= not diff
                print(json.dumps({"case": case, "mode": mode, "ops_baseline": sum(base.values()),
                                  "ops_candidate": sum(cand.values()), "same": not diff, "diff": diff}),
                      flush=True)
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
