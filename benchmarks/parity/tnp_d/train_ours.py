"""Train taylorformer's ``tnp-d`` on the dumped ``gp`` batches; evaluate on the dumped test set.

Run with the taylorformer virtualenv, after ``dump_data.py``::

    python train_ours.py --steps 2000 --eval-every 250
    python train_ours.py --steps 50 --data data/gp-seed0-2000.npz --out runs/ours-50

The model, optimizer and train step are the library's own: this script builds a
``taylorformer.Trainer`` (``keras.utils.set_random_seed(seed)``, ``build_model``
of the ``tnp-d`` preset, Keras AdamW with lr 5e-4 and weight decay 1e-4, constant lr)
and calls its compiled step ``Trainer.compiled_step()`` (``model.train_step``: loss =
minus the mean over tasks of the mean log-likelihood per real target point; gradient
clipped to global norm 0.5), the step ``taylorformer train`` runs inside ``fit``. Only
the data source differs: the dumped batches as they are (the batches that
``taylorformer train --task gp --seed S`` would draw, see dump_data.py). The validation passes and checkpoints of
``Trainer.fit`` are left out; the test evaluation is ``taylorformer.loglik`` on the
dumped test batches (what ``taylorformer evaluate`` computes, per task: mean
log-likelihood per real target point; then mean and standard error over the 512 tasks).

Prints one JSON line per evaluation (``--eval-every K``) and a final JSON line with
``steps, train_seconds, steps_per_s, test_loglik_mean, test_loglik_stderr, gt_loglik_mean``
(and extras). ``train_seconds`` is the wall time of the training steps alone (the first
step's graph tracing included; evaluations excluded); ``steps_per_s = steps /
train_seconds``; ``steady_steps_per_s`` leaves out the first step; ``cpu_seconds`` is the
process CPU time of the training steps (fairer on a shared machine).
With ``--out RUN_DIR`` the run files and ``model.keras`` are written, so that
``taylorformer evaluate RUN_DIR --checkpoint model`` can re-check the test number.
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

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH_KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t", "gt_loglik", "gt_loglik_joint")


def load(path):
    data = np.load(path)
    meta = json.loads(str(data["meta"]))
    return data, meta


def split_batches(data, split, limit=None):
    n = data[f"{split}_xc"].shape[0] if limit is None else limit
    arrays = {k: data[f"{split}_{k}"] for k in BATCH_KEYS}
    return [{k: v[i] for k, v in arrays.items()} for i in range(n)]


def mean_stderr(values):
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))


def train_on_dumped(trainer, data, steps, eval_every=0):
    """Train ``trainer``'s model with its compiled step on the first ``steps`` dumped
    training batches of ``data`` (in order, one a step), evaluating ``taylorformer.loglik``
    on the dumped test batches every ``eval_every`` steps (a JSON line each) and at the end.
    Returns the final JSON fields both comparisons print (timings exclude evaluations)."""
    import tensorflow as tf

    import taylorformer

    model = trainer.model
    train_batches = split_batches(data, "train", steps)
    # the dumped arrays as they are (the batch keys the task streams; no generator signature,
    # which moves with the library)
    stream = tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in train_batches])
                                                 for k in train_batches[0]})
    stream = stream.prefetch(tf.data.AUTOTUNE)
    train_step = trainer.compiled_step()
    test_batches = [{k: tf.constant(v) for k, v in b.items()} for b in split_batches(data, "test")]
    gt = np.concatenate([b["gt_loglik"] for b in split_batches(data, "test")]).astype(np.float64)

    def evaluate():
        ll = np.concatenate([taylorformer.loglik(model, b).numpy() for b in test_batches])
        return mean_stderr(ll)

    wall = cpu = first = first_cpu = 0.0
    losses, done, previous = [], 0, 0.0
    iterator = iter(stream)
    for step in range(1, steps + 1):
        batch = next(iterator)
        t0, c0 = time.perf_counter(), time.process_time()
        running = float(train_step(batch)["loss"])  # the model's loss tracker: mean over steps so far
        loss, previous = step * running - (step - 1) * previous, running  # this step's loss
        dt = time.perf_counter() - t0
        dc = time.process_time() - c0
        wall, cpu = wall + dt, cpu + dc
        first, first_cpu = (dt, dc) if step == 1 else (first, first_cpu)
        if not math.isfinite(loss):
            raise SystemExit(f"non-finite loss {loss} at step {step}")
        losses.append(loss)
        done = step
        if eval_every and step % eval_every == 0 and step != steps:
            mean, err = evaluate()
            print(json.dumps({"step": step, "test_loglik_mean": mean, "test_loglik_stderr": err,
                              "train_loss_mean": float(np.mean(losses[-eval_every:])),
                              "train_seconds": round(wall, 3)}), flush=True)
    mean, err = evaluate()
    return {
        "impl": "taylorformer", "steps": done,
        "train_seconds": round(wall, 3), "steps_per_s": round(done / wall, 3),
        "test_loglik_mean": mean, "test_loglik_stderr": err, "gt_loglik_mean": float(gt.mean()),
        "steady_steps_per_s": round((done - 1) / (wall - first), 3) if done > 1 else None,
        "first_step_seconds": round(first, 3), "cpu_seconds": round(cpu, 3),
        "steady_cpu_s_per_step": round((cpu - first_cpu) / (done - 1), 5) if done > 1 else None,
        "train_loss_last50": float(np.mean(losses[-50:])),
        "num_params": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(HERE, "data", "gp-seed0-2000.npz"),
                        help="npz from dump_data.py (default data/gp-seed0-2000.npz beside this script)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: all dumped batches)")
    parser.add_argument("--eval-every", type=int, default=0, help="also evaluate every K steps (0: only at the end)")
    parser.add_argument("--model", default="tnp-d", help="taylorformer preset or spec file (default tnp-d)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the initial weights (default: the dumped data's seed, as "
                             "`taylorformer train --seed` uses one seed for both)")
    parser.add_argument("--xla", action="store_true", help="jit_compile the step (taylorformer train --xla)")
    parser.add_argument("--out", default=None, help="write a run directory (spec, config, model.keras)")
    parser.add_argument("--threads", type=int, default=0,
                        help="TensorFlow intra- and inter-op threads (default 0: TensorFlow's own, = cores)")
    args = parser.parse_args(argv)

    import keras
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    from taylorformer import Trainer, TrainConfig  # public names (the module moved in issue 39)
    from taylorformer.task import make_task

    data, meta = load(args.data)
    available = data["train_xc"].shape[0]
    steps = args.steps or available
    if steps > available:
        raise SystemExit(f"{args.data} holds {available} training batches; asked for {steps} steps")
    task = make_task(meta["task"], None)  # what `taylorformer train --task gp` builds
    if task.get_config() != meta["task_config"]:
        raise SystemExit("the dumped task config differs from the installed task's defaults")
    seed = meta["seed"] if args.seed is None else args.seed  # the data come from the file either way
    # lr 5e-4 constant, wd 1e-4, clip 0.5: the settings the reference runs with (not today's
    # library defaults of cosine 1e-3 with warm-up)
    cfg = TrainConfig(steps=steps, batch_size=meta["batch_size"], seed=seed, jit_compile=args.xla,
                      learning_rate=5e-4, schedule="constant", warmup_steps=0, tensorboard=False)
    out_dir = args.out or tempfile.mkdtemp(prefix="tnpd-ours-")
    trainer = Trainer(args.model, task, cfg, out_dir, task_name=meta["task"])

    result = train_on_dumped(trainer, data, steps, args.eval_every)
    if args.out:
        trainer.write_run_files()
        trainer.run_dir.save_model(trainer.model, "model.keras")
    result.update({
        "model": args.model, "seed": seed, "xla": bool(args.xla), "threads": args.threads, "tensorflow": tf.__version__, "keras": keras.__version__,
        "data": os.path.basename(args.data),
    })
    if args.out:
        result["run_dir"] = out_dir
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
