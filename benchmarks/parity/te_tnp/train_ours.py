"""Train taylorformer's ``te-tnp`` on dumped batches; evaluate on the dumped test set.

Run with the taylorformer virtualenv, after ``dump_data.py``::

    python train_ours.py --data data/X.npz --steps 2000 --eval-every 500

The model, optimizer and train step are the library's own (``taylorformer.workflow.training.Trainer``:
``keras.utils.set_random_seed(seed)``, ``build_model`` of the ``te-tnp`` preset with the
sizes of ``--width/--layers/--heads/--head-dim/--kernel-width``, Keras AdamW lr 5e-4,
weight decay 1e-4, constant lr, global-norm clip 0.5, its compiled ``Trainer`` step, no
XLA unless ``--xla``). The data are the dumped batches in order, one per step; the task
is rebuilt from the config stored in the file. The test metric is ``taylorformer.loglik``
per task, mean and standard error over the dumped test tasks.

Prints one JSON line per evaluation and a final JSON line (same keys as ``train_ref.py``):
``train_seconds`` is the wall time of the training steps (the first step's graph tracing
included), ``steady_steps_per_s`` leaves the first step out.
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

BATCH_KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik", "gt_loglik_joint")


def split_batches(data, split, limit=None):
    n = data[f"{split}_xc"].shape[0] if limit is None else limit
    arrays = {k: data[f"{split}_{k}"] for k in BATCH_KEYS}
    return [{k: v[i] for k, v in arrays.items()} for i in range(n)]


def mean_stderr(values):
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))


def add_model_args(parser):
    parser.add_argument("--model", default="te-tnp", help="taylorformer preset (default te-tnp)")
    parser.add_argument("--width", type=int, default=128, help="Dz (paper 128)")
    parser.add_argument("--layers", type=int, default=5)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=16)
    parser.add_argument("--kernel-width", type=int, default=128, help="hidden width of the kernel MLP")
    parser.add_argument("--softplus-of", choices=["scale", "variance"], default=None,
                        help="the normal likelihood's scale link (default: the preset's): softplus(raw) is "
                             "the scale, or the variance (the paper's and the reference's)")


def model_spec(args):
    """The preset with the sizes of ``args`` (the same sizes the reference is built with)."""
    spec = {"preset": args.model,
            "encoder": {"width": args.width, "layers": args.layers, "num_heads": args.heads,
                        "head_dim": args.head_dim, "attention": {"kernel_width": args.kernel_width}},
            "head": {"width": args.width}}
    if getattr(args, "softplus_of", None):
        spec["likelihood"] = {"name": "normal", "softplus_of": args.softplus_of}
    return spec


def make_trainer(args, meta, steps, seed, out_dir, xla=False):
    from taylorformer.task import make_task
    from taylorformer.workflow.training import Trainer, TrainConfig

    task = make_task(meta["task"], meta.get("task_config_given"))
    if task.get_config() != meta["task_config"]:
        raise SystemExit("the dumped task config differs from the one the installed task builds")
    # lr 5e-4 constant, wd 1e-4, clip 0.5: the settings the reference runs with
    cfg = TrainConfig(steps=steps, batch_size=meta["batch_size"], seed=seed, jit_compile=xla,
                      learning_rate=5e-4, schedule="constant", warmup_steps=0, tensorboard=False)
    return Trainer(model_spec(args), task, cfg, out_dir, task_name=meta["task"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="npz from dump_data.py")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: all dumped batches)")
    parser.add_argument("--eval-every", type=int, default=0, help="also evaluate every K steps (0: only at the end)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights (data come from the file)")
    parser.add_argument("--xla", action="store_true", help="jit_compile the step (taylorformer train --xla)")
    parser.add_argument("--threads", type=int, default=0,
                        help="TensorFlow intra- and inter-op threads (default 0: TensorFlow's own, = cores)")
    add_model_args(parser)
    args = parser.parse_args(argv)

    import keras
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    import taylorformer

    data = np.load(args.data)
    meta = json.loads(str(data["meta"]))
    available = data["train_xc"].shape[0]
    steps = args.steps or available
    if steps > available:
        raise SystemExit(f"{args.data} holds {available} training batches; asked for {steps} steps")
    trainer = make_trainer(args, meta, steps, args.seed, tempfile.mkdtemp(prefix="tetnp-ours-"), args.xla)
    model = trainer.model

    train_batches = split_batches(data, "train", steps)
    stream = tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in train_batches])
                                                 for k in train_batches[0]}).prefetch(tf.data.AUTOTUNE)
    train_step = trainer.compiled_step()
    test_batches = [{k: tf.constant(v) for k, v in b.items()} for b in split_batches(data, "test")]
    gt = np.concatenate([b["gt_loglik"] for b in split_batches(data, "test")]).astype(np.float64)

    def evaluate():
        return mean_stderr(np.concatenate([taylorformer.loglik(model, b).numpy() for b in test_batches]))

    wall = cpu = first = 0.0
    losses, done, previous = [], 0, 0.0
    iterator = iter(stream)
    for step in range(1, steps + 1):
        batch = next(iterator)
        t0, c0 = time.perf_counter(), time.process_time()
        running = float(train_step(batch)["loss"])  # the model's loss tracker: mean over steps so far
        loss, previous = step * running - (step - 1) * previous, running  # this step's loss
        dt = time.perf_counter() - t0
        wall, cpu = wall + dt, cpu + time.process_time() - c0
        first = first or dt
        if not math.isfinite(loss):
            raise SystemExit(f"non-finite loss {loss} at step {step}")
        losses.append(loss)
        done = step
        if args.eval_every and step % args.eval_every == 0 and step != steps:
            mean, err = evaluate()
            print(json.dumps({"step": step, "test_loglik_mean": mean, "test_loglik_stderr": err,
                              "train_loss_mean": float(np.mean(losses[-args.eval_every:])),
                              "train_seconds": round(wall, 3)}), flush=True)
    mean, err = evaluate()
    print(json.dumps({
        "impl": "taylorformer", "model": args.model, "step": done, "steps": done,
        "train_seconds": round(wall, 3), "steps_per_s": round(done / wall, 3),
        "test_loglik_mean": mean, "test_loglik_stderr": err, "gt_loglik_mean": float(gt.mean()),
        "steady_steps_per_s": round((done - 1) / (wall - first), 3) if done > 1 else None,
        "first_step_seconds": round(first, 3), "cpu_seconds": round(cpu, 3),
        "train_loss_last50": float(np.mean(losses[-50:])),
        "num_params": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
        "sizes": {k: getattr(args, k) for k in ("width", "layers", "heads", "head_dim", "kernel_width")},
        "likelihood": model.spec["likelihood"],
        "seed": args.seed, "xla": bool(args.xla), "threads": args.threads, "tensorflow": tf.__version__, "keras": keras.__version__,
        "data": os.path.basename(args.data), "task": meta["task"],
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
