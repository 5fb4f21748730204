"""Where the time of one XLA-compiled training step goes: top XLA:CPU ops by CPU time.

Builds a preset (random weights) for a task's dimensions and a random batch, runs one
jit-compiled step of the library's trainer (``Trainer.compiled_step``: loss = -mean
log-likelihood, gradients, clipping, AdamW) under ``tf.profiler``, then sums the durations
of the XLA kernels over the worker threads, grouped by HLO name without its numeric
suffix (``MatMul_1.136`` -> ``MatMul_1``). Names are XLA's fusion names: ``*_fusion``
are fused elementwise loops, ``wrapped_reduce-window`` the first stage of a large
reduction, ``MatMul*`` matrix products.

    .venv/bin/python benchmarks/profile_train_step.py --preset bsa-tnp --task gp-2d-bsa --batch 8 --nc 512 --nt 1024
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
    parser.add_argument("--task", default="gp-2d-bsa", help="registry task giving dim_x and dim_y")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the simulators (importing taylorformer no longer sets it)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from taylorformer import registry
    from taylorformer.workflow import training

    task = registry.get("task", args.task)()
    cfg = training.TrainConfig(batch_size=args.batch, learning_rate=1e-4, jit_compile=True)
    trainer = training.Trainer(args.preset, task, cfg, out_dir=None)
    compiled = trainer.compiled_step()
    rng = np.random.default_rng(0)
    b, nc, nt, dx, dy = args.batch, args.nc, args.nt, task.dim_x, task.dim_y
    batch = {"xc": rng.uniform(-2, 2, (b, nc, dx)), "yc": rng.normal(size=(b, nc, dy)),
             "xt": rng.uniform(-2, 2, (b, nt, dx)), "yt": rng.normal(size=(b, nt, dy)),
             "mask_c": np.ones((b, nc)), "mask_t": np.ones((b, nt))}
    batch = {k: tf.constant(v, tf.float32) for k, v in batch.items()}

    def step(batch):
        return compiled(batch)["loss"]

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
