"""Teacher-forced forward time at the paper's largest test size (context 96 + horizon 720,
batch 32), one side per call; run both one after the other::

    python forward_time.py --side ours
    $REF forward_time.py --side ref

Each side compiles its inference forward (``tf.function``: ``taylorformer.loglik`` for
ours, ``ref_taylorformer.loglik`` for the reference as published), calls it once to trace,
then times ``--repeats`` calls and prints the median wall and CPU seconds per call.
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import forecasting_batch  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--side", choices=("ours", "ref"), required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--nc", type=int, default=96)
    parser.add_argument("--nt", type=int, default=720)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import tensorflow as tf

    batch = {k: tf.constant(v) for k, v in forecasting_batch(args.batch_size, args.nc, args.nt).items()}
    if args.side == "ours":
        import taylorformer
        model = taylorformer.build_model("taylorformer", dim_x=1, dim_y=1)
        fn = tf.function(lambda b: taylorformer.loglik(model, b))
    else:
        import ref_taylorformer as ref
        model = ref.RefModel(())
        fn = tf.function(lambda b: ref.loglik(model, b))
    t0 = time.perf_counter()
    fn(batch).numpy()
    first = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn(batch).numpy()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    print(json.dumps({"side": args.side, "batch_size": args.batch_size, "nc": args.nc, "nt": args.nt,
                      "first_call_seconds": round(first, 3), "median_wall_seconds": round(float(np.median(walls)), 4),
                      "median_cpu_seconds": round(float(np.median(cpus)), 4), "repeats": args.repeats,
                      "tensorflow": tf.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
