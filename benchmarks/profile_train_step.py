"""Where the time of one XLA-compiled training step goes: top XLA:CPU ops by CPU time.

Builds a preset (random weights) on a random batch, runs one jit-compiled step (loss =
-mean log-likelihood, gradients, AdamW) under ``tf.profiler``, then sums the durations
of the XLA kernels over the worker threads, grouped by HLO name without its numeric
suffix (``MatMul_1.136`` -> ``MatMul_1``). Names are XLA's fusion names: ``*_fusion``
are fused elementwise loops, ``wrapped_reduce-window`` the first stage of a large
reduction, ``MatMul*`` matrix products.

    .venv/bin/python benchmarks/profile_train_step.py --preset bsa-tnp --batch 8 --nc 512 --nt 1024
"""
import argparse
import collections
import glob
import os
import re
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bsa-tnp")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--nc", type=int, default=512)
    parser.add_argument("--nt", type=int, default=1024)
    parser.add_argument("--dim-x", type=int, default=2)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from taylorformer.builder import build_model
    from taylorformer.inference import loglik

    model = build_model(args.preset, dim_x=args.dim_x)
    opt = keras.optimizers.AdamW(1e-4)
    opt.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    b, nc, nt = args.batch, args.nc, args.nt
    batch = {"xc": rng.uniform(-2, 2, (b, nc, args.dim_x)), "yc": rng.normal(size=(b, nc, 1)),
             "xt": rng.uniform(-2, 2, (b, nt, args.dim_x)), "yt": rng.normal(size=(b, nt, 1)),
             "mask_c": np.ones((b, nc)), "mask_t": np.ones((b, nt))}
    batch = {k: tf.constant(v, tf.float32) for k, v in batch.items()}

    @tf.function(jit_compile=True)
    def step(batch):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(tf.cast(loglik(model, batch, training=True), tf.float32))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    step(batch).numpy()  # compile
    logdir = tempfile.mkdtemp(prefix="tf_profile_")
    tf.profiler.experimental.start(logdir)
    step(batch).numpy()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[-1], "rb") as f:
        space.ParseFromString(f.read())
    per_op = collections.Counter()
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            if "Eigen" not in line.name:  # XLA:CPU kernels run on the intra-op pool's threads
                continue
            for event in line.events:
                name = names.get(event.metadata_id, "?")
                if not name.startswith(("ThunkExecutor", "SlinkyThreadPool")):
                    per_op[re.sub(r"\.\d+$", "", name)] += event.duration_ps / 1e12
    total = sum(per_op.values())
    print(f"{args.preset}, batch {b}, Nc={nc}, Nt={nt}: XLA kernels {total:.2f} CPU-s in one step "
          f"(profile in {logdir})")
    for name, sec in per_op.most_common(args.top):
        print(f"{sec:8.3f} s {100 * sec / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
