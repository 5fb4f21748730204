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
import importlib.util
import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_tnpd_trainer():
    """``../tnp_d/train_ours.py``: the dumped-batch training loop both comparisons run."""
    spec = importlib.util.spec_from_file_location(
        "tnpd_train_ours", os.path.join(HERE, os.pardir, "tnp_d", "train_ours.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    parser.add_argument("--init", choices=["keras", "fan-in-uniform"], default=None,
                        help="the spec's init (default: the preset's, fan-in-uniform; keras: the preset before "
                             "issue 35)")
    parser.add_argument("--distinct-initial-layers", action="store_true",
                        help="the encoder's identical_initial_layers False (the preset before issue 35)")
    parser.add_argument("--final-norm", dest="final_norm", action="store_const", const=True, default=None,
                        help="the encoder's final_norm True: a LayerNorm after the last layer (the preset before "
                             "issue 35)")
    parser.add_argument("--no-final-norm", dest="final_norm", action="store_const", const=False,
                        help="the encoder's final_norm False (the preset's, as the reference)")
    parser.add_argument("--update-order", choices=["parallel", "context-first"], default=None,
                        help="the encoder's update_order (default: the preset's, context-first): 'parallel' "
                             "is the preset before issue 35 (targets attend to each layer's input context)")


def model_spec(args):
    """The preset with the sizes of ``args`` (the same sizes the reference is built with)."""
    spec = {"preset": args.model,
            "encoder": {"width": args.width, "layers": args.layers, "num_heads": args.heads,
                        "head_dim": args.head_dim, "attention": {"kernel_width": args.kernel_width}},
            "head": {"width": args.width}}
    if getattr(args, "softplus_of", None):
        spec["likelihood"] = {"name": "normal", "softplus_of": args.softplus_of}
    if getattr(args, "update_order", None):
        spec["encoder"]["update_order"] = args.update_order
    if getattr(args, "final_norm", None) is not None:
        spec["encoder"]["final_norm"] = args.final_norm
    if getattr(args, "init", None):
        spec["init"] = args.init
    if getattr(args, "distinct_initial_layers", False):
        spec["encoder"]["identical_initial_layers"] = False
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

    data = np.load(args.data)
    meta = json.loads(str(data["meta"]))
    available = data["train_xc"].shape[0]
    steps = args.steps or available
    if steps > available:
        raise SystemExit(f"{args.data} holds {available} training batches; asked for {steps} steps")
    trainer = make_trainer(args, meta, steps, args.seed, tempfile.mkdtemp(prefix="tetnp-ours-"), args.xla)
    result = _load_tnpd_trainer().train_on_dumped(trainer, data, steps, args.eval_every)
    result.update({
        "model": args.model, "step": result["steps"],
        "sizes": {k: getattr(args, k) for k in ("width", "layers", "heads", "head_dim", "kernel_width")},
        "likelihood": trainer.model.spec["likelihood"],
        "seed": args.seed, "xla": bool(args.xla), "threads": args.threads, "tensorflow": tf.__version__,
        "keras": keras.__version__, "data": os.path.basename(args.data), "task": meta["task"],
    })
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
