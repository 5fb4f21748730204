"""Forward time of one TE-TNP prediction at the paper's largest 1-D test size, either side.

    python forward_time.py ours [--nc 64 --nt 128 --batch 16]                 # taylorformer venv
    "$REF_VENV/bin/python" forward_time.py ref [--nc 64 --nt 128 --batch 16]  # torch venv

The paper's 1-D GP test tasks have at most Nc = 64 context and Nt = 128 target points;
this times a batch of 16 such tasks (no padding, so both sides do the same work: ours
skips no pairs, the reference needs no mask). ``ours``: the ``te-tnp`` preset's
predictive mean through ``tf.function`` (``--xla`` to compile); ``ref``: the authors'
model as published (``train_ref.build_reference()``), ``torch.no_grad``, check_shapes on
unless ``--no-check-shapes``. ``--threads`` sets both frameworks' threads. Prints one JSON
line with the minimum and all of ``--reps`` timings after one warm-up call.
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("side", choices=["ours", "ref"])
    parser.add_argument("--nc", type=int, default=64)
    parser.add_argument("--nt", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--xla", action="store_true", help="ours: jit_compile the forward pass")
    parser.add_argument("--no-check-shapes", action="store_true", help="ref: turn off check_shapes")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    xc = rng.uniform(-2, 2, (args.batch, args.nc, 1)).astype(np.float32)
    xt = rng.uniform(-3, 3, (args.batch, args.nt, 1)).astype(np.float32)
    yc = rng.normal(size=(args.batch, args.nc, 1)).astype(np.float32)

    if args.side == "ours":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf

        import taylorformer as tfm

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        model = tfm.build_model("te-tnp")
        batch = {"xc": tf.constant(xc), "yc": tf.constant(yc), "xt": tf.constant(xt),
                 "yt": tf.zeros_like(tf.constant(xt))}
        fwd = tf.function(lambda b: model.predict_distribution(b).mean(), jit_compile=args.xla)
        call = lambda: fwd(batch).numpy()  # noqa: E731
        impl = "taylorformer"
    else:
        for var in ("REF_TNP_SRC", "REF_TETNP_SRC"):
            if os.environ.get(var):
                sys.path.insert(0, os.environ[var])
        import torch

        import train_ref

        torch.set_num_threads(args.threads)
        if args.no_check_shapes:
            from check_shapes import set_enable_check_shapes
            set_enable_check_shapes(False)
        torch.manual_seed(0)
        model = train_ref.build_reference().eval()
        tensors = [torch.from_numpy(a) for a in (xc, yc, xt)]

        def call():
            with torch.no_grad():
                return model(*tensors).mean.sum().item()
        impl = "cambridge-mlg/tetnp"
    call()
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"impl": impl, "nc": args.nc, "nt": args.nt, "batch": args.batch, "threads": args.threads,
                      "xla": args.xla, "forward_s_min": round(min(times), 4),
                      "forward_s": [round(t, 4) for t in times]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
