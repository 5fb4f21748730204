"""Train a Table 5 model of taylorformer (``tnp-d``, ``te-tnp``, ``cnp``) on the dumped batches;
score it on the dumped test tasks at every shift. Run with the taylorformer venv, after
``dump_shifts.py``::

    python train_ours.py --model te-tnp --seed 0      # -> results/te-tnp-ours-seed0.json

The model is the row's: the preset with the replication row's ``model_overrides``
(``te_tnp.GP_MODELS``: for ``tnp-d`` and ``cnp`` the variance link of App. F.1) at
``common.SIZES``. Training is the library's own compiled ``Trainer`` step
(``../tnp_d/train_ours.py``'s ``train_on_dumped``: one dumped batch per step, in order) with
the rows' optimizer: Keras AdamW lr 5e-4 constant, weight decay 0.01, global-norm clip 0.5,
batch 16, one thread. The final model is scored with ``taylorformer.loglik`` (mean
log-likelihood per real target point, per task) on each shift's 512 test tasks.
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import common  # noqa: E402


def model_spec(model):
    """The row's model (preset + ``model_overrides``) at ``common.SIZES[model]``."""
    from taylorformer.spec import deep_merge
    from taylorformer_replication.papers.te_tnp import GP_MODELS

    sizes = common.SIZES[model]
    encoder = {"width": sizes["width"], "layers": sizes["layers"]}
    if "heads" in sizes:
        encoder.update(num_heads=sizes["heads"], head_dim=sizes["head_dim"])
    if "kernel_width" in sizes:
        encoder["attention"] = {"kernel_width": sizes["kernel_width"]}
    _, preset, overrides, _, _ = GP_MODELS[model]
    return deep_merge({"preset": preset, "encoder": encoder, "head": {"width": sizes["width"]}}, overrides)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=common.MODELS, required=True)
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights (the data are fixed)")
    parser.add_argument("--steps", type=int, default=common.STEPS)
    args = parser.parse_args(argv)

    import tensorflow as tf

    import taylorformer
    from taylorformer import Trainer, TrainConfig
    from taylorformer.task import make_task

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    data = np.load(common.train_path())
    task = make_task(common.TASK, common.task_config())
    cfg = TrainConfig(steps=args.steps, batch_size=16, seed=args.seed, jit_compile=False,
                      learning_rate=common.LEARNING_RATE, weight_decay=common.WEIGHT_DECAY, clip_norm=common.CLIP,
                      schedule="constant", warmup_steps=0, tensorboard=False)
    trainer = Trainer(model_spec(args.model), task, cfg, tempfile.mkdtemp(prefix="table5-ours-"),
                      task_name=common.TASK)
    run = common.load_script("tnp_d", "train_ours").train_on_dumped(trainer, data, args.steps)
    shifts = common.score_shifts(
        lambda batch: taylorformer.loglik(trainer.model, {k: tf.constant(v) for k, v in batch.items()}).numpy(),
        ("xc", "yc", "xt", "yt", "mask_c", "mask_t"), run["test_loglik_mean"])
    out = common.write_result(args.model, "ours", args.seed, run["steps"], run["num_params"], run["train_seconds"],
                              run["steady_cpu_s_per_step"], shifts,
                              {"train_loss_last50": run["train_loss_last50"], "spec": model_spec(args.model)})
    print(out, {k: round(v["loglik"], 4) for k, v in shifts.items()}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
