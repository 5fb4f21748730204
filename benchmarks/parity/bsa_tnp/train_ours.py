"""Train taylorformer's ``bsa-tnp`` on the dumped ``gp-2d-bsa`` batches (taylorformer venv).

    python train_ours.py --seed 0 --steps 2000 --eval-every 500

Model, optimizer and step are the library's own: ``taylorformer.workflow.training.Trainer``
(``keras.utils.set_random_seed(seed)``, ``build_model`` of the preset, Keras AdamW) and
its compiled step ``Trainer.compiled_step`` (loss: minus the mean over tasks of the mean
log-likelihood per real target point; gradient clipped to global norm 0.5), i.e. what
``taylorformer train`` runs, fed the dumped batches in order, one per step. Optimizer
settings are the paper's (App. B): AdamW (beta 0.9, 0.999; epsilon 1e-7, Keras'),
weight decay 1e-4, cosine decay from 1e-4 to 2e-5 over the run's steps, no warm-up,
clip 0.5, batch 8. Test: ``taylorformer.loglik`` on the dumped test tasks, mean and
standard error over tasks.

Prints one JSON line per evaluation and a final one (``steady_steps_per_s``: the steps
after the first, whose tracing and compilation are left out; ``cpu_seconds``: process
CPU time of the training steps). ``--export-init NPZ`` writes the initial weights for
``train_ref.py --init-from``; ``--losses JSON`` every step's loss. ``--test-domains train
shifted scaled`` also scores the final model on those domains' dumped test tasks
(``dump_data.py --test-domains``) and writes ``results/domains-ours-seed<S>.json``
(``--result`` to change; schema: ``domains.py``).
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import domains  # noqa: E402

DATA = os.path.join(HERE, "data", "gp2d-nc63-nt64-seed0-2000.npz")
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t")


def mean_stderr(values):
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial weights (data come from the file)")
    ap.add_argument("--model", default="bsa-tnp", help="preset or spec file (default bsa-tnp)")
    ap.add_argument("--export-init", default=None, metavar="NPZ",
                    help="write the initial weights (check_function.py's export format) to NPZ, "
                         "for train_ref.py --init-from")
    ap.add_argument("--losses", default=None, metavar="JSON",
                    help="write every step's training loss (a JSON list) to this file")
    ap.add_argument("--test-domains", nargs="*", default=[], choices=domains.DOMAINS, metavar="DOMAIN",
                    help="score the final model on these domains' test tasks (train shifted scaled)")
    ap.add_argument("--result", default=None, metavar="JSON",
                    help="where --test-domains writes its record (default results/domains-ours-seed<S>.json)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--min-lr", type=float, default=2e-5)
    args = ap.parse_args(argv)

    import keras
    import tensorflow as tf

    import taylorformer
    from taylorformer.task import make_task
    from taylorformer.workflow.training import Trainer, TrainConfig

    data = np.load(args.data)
    meta = json.loads(str(data["meta"]))
    if args.steps > data["train_xc"].shape[0]:
        raise SystemExit(f"{args.data} holds {data['train_xc'].shape[0]} batches; asked for {args.steps}")
    task = make_task(meta["task"], meta["task_config"])
    cfg = TrainConfig(steps=args.steps, batch_size=meta["batch_size"], seed=args.seed, learning_rate=args.lr,
                      min_learning_rate=args.min_lr, schedule="cosine", warmup_steps=0, weight_decay=1e-4,
                      clip_norm=0.5, tensorboard=False)
    trainer = Trainer(args.model, task, cfg, tempfile.mkdtemp(prefix="bsa-ours-"), task_name=meta["task"])
    model = trainer.model
    if args.export_init:
        import check_function

        os.makedirs(os.path.dirname(os.path.abspath(args.export_init)), exist_ok=True)
        np.savez(args.export_init, **{f"w:{k}": v for k, v in check_function.our_weights(model).items()},
                 meta=json.dumps({"seed": args.seed, "model": args.model, "num_params": int(model.count_params())}))
    stream = tf.data.Dataset.from_tensor_slices({k: data[f"train_{k}"][:args.steps] for k in KEYS})
    step_fn = trainer.compiled_step()
    n_test = data["test_xc"].shape[0]
    test = [{k: tf.constant(data[f"test_{k}"][i]) for k in KEYS} for i in range(n_test)]
    gt = data["test_gt_loglik"].reshape(-1)

    def evaluate():
        return mean_stderr(np.concatenate([taylorformer.loglik(model, b).numpy() for b in test]))

    wall = cpu = first = 0.0
    losses = []
    for step, batch in enumerate(stream, start=1):
        # the step returns the loss tracker's mean since its last reset: reset it so that
        # "loss" is this step's loss (as the reference's), not the mean since step 1
        model.reset_metrics()
        t0, c0 = time.perf_counter(), time.process_time()
        loss = float(step_fn(batch)["loss"])
        dt = time.perf_counter() - t0
        wall, cpu = wall + dt, cpu + time.process_time() - c0
        first = first or dt
        if not math.isfinite(loss):
            raise SystemExit(f"non-finite loss {loss} at step {step}")
        losses.append(loss)
        if args.eval_every and step % args.eval_every == 0 and step != args.steps:
            m, e = evaluate()
            print(json.dumps({"impl": "taylorformer", "seed": args.seed, "step": step, "test_loglik_mean": m,
                              "test_loglik_stderr": e, "train_loss_mean": float(np.mean(losses[-args.eval_every:])),
                              "train_seconds": round(wall, 2)}), flush=True)
    if args.losses:
        with open(args.losses, "w") as f:
            json.dump(losses, f)
    m, e = evaluate()
    print(json.dumps({
        "impl": "taylorformer", "seed": args.seed, "step": args.steps, "final": True, "model": args.model,
        "test_loglik_mean": m, "test_loglik_stderr": e, "gt_loglik_mean": float(gt.mean()),
        "train_loss_mean": float(np.mean(losses[-args.eval_every:] if args.eval_every else losses[-50:])),
        "train_seconds": round(wall, 2), "steady_steps_per_s": round((args.steps - 1) / (wall - first), 3),
        "first_step_seconds": round(first, 2), "cpu_seconds": round(cpu, 1),
        "num_params": int(model.count_params()), "xla": bool(model.jit_compile),
        "tensorflow": tf.__version__, "keras": keras.__version__, "load_avg_1m": round(os.getloadavg()[0], 2),
    }), flush=True)
    if args.test_domains:
        def task_loglik(batch):
            return taylorformer.loglik(model, {k: tf.constant(v) for k, v in batch.items()}).numpy()

        scores = domains.score_domains(task_loglik, data, args.test_domains, m)
        path = domains.write_result(args.result, "ours", args.seed, args.steps, model.count_params(), wall, cpu,
                                    scores, {"tensorflow": tf.__version__, "keras": keras.__version__})
        print(json.dumps({"wrote": path, "domains": scores}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
