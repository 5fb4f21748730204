"""Training loop: AdamW + clipping under a tf.distribute strategy, with a run directory.

Run directory layout (every file is written atomically: temp file, then rename)::

    RUN_DIR/spec.json      resolved model spec (the model's Keras config)
    RUN_DIR/config.json    training config + task name and config
    RUN_DIR/metrics.csv    step, train_loss, val_loglik(+stderr), val_gt_loglik, lr, elapsed_s
    RUN_DIR/best.keras     model with the best validation log-likelihood
    RUN_DIR/model.keras    model at the end of training
"""
import csv
import dataclasses
import json
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

from taylorformer import builder, registry
from taylorformer.errors import SpecError
from taylorformer.evaluation import evaluate
from taylorformer.inference import loglik

STRATEGIES = ("default", "mirrored")
SCHEDULES = ("constant", "cosine")
METRIC_FIELDS = ["step", "train_loss", "val_loglik", "val_loglik_stderr", "val_gt_loglik",
                 "learning_rate", "elapsed_s"]


@dataclasses.dataclass
class TrainConfig:
    """Everything that defines a training run besides the model spec and the task."""

    steps: int = 2000
    batch_size: int = 16
    learning_rate: float = 5e-4
    weight_decay: float = 1e-4
    clip_norm: float = 0.5
    schedule: str = "constant"  # or "cosine" (decays to min_learning_rate)
    min_learning_rate: float = 2e-5
    seed: int = 0
    jit_compile: bool = False
    dtype_policy: str = None  # e.g. "mixed_bfloat16"; the likelihood stays float32
    strategy: str = "default"  # or "mirrored"
    val_every: int = 250
    val_batches: int = 8

    def __post_init__(self):
        for name in ("steps", "batch_size", "val_every", "val_batches"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise SpecError(f"train config {name!r} must be a positive int, got {value!r}")
        if self.schedule not in SCHEDULES:
            raise SpecError(f"train config 'schedule' must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.strategy not in STRATEGIES:
            raise SpecError(f"train config 'strategy' must be one of {STRATEGIES}, got {self.strategy!r}")
        if not (self.learning_rate > 0 and self.clip_norm > 0):
            raise SpecError("train config 'learning_rate' and 'clip_norm' must be > 0")


def make_strategy(name):
    """``tf.distribute`` strategy by name: ``default`` (one device) or ``mirrored``."""
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def make_task(name, config=None):
    """Instantiate a registered task with its config dict."""
    return registry.get("task", name)(**(config or {}))


def atomic_write_text(path, text):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_save_model(model, path):
    """``model.save`` to a temporary ``.keras`` file, then rename over ``path``."""
    tmp = os.path.join(os.path.dirname(path), f".tmp-{os.path.basename(path)}")
    model.save(tmp)
    os.replace(tmp, path)


def _learning_rate(cfg):
    if cfg.schedule == "cosine":
        return keras.optimizers.schedules.CosineDecay(
            cfg.learning_rate, cfg.steps, alpha=cfg.min_learning_rate / cfg.learning_rate)
    return cfg.learning_rate


class Trainer:
    """Builds the model under the strategy and runs the training loop."""

    def __init__(self, spec, task, cfg, out_dir, task_name="task", task_config=None):
        self.cfg, self.task, self.out_dir = cfg, task, out_dir
        self.task_name, self.task_config = task_name, task_config or {}
        keras.utils.set_random_seed(cfg.seed)
        if cfg.dtype_policy:
            keras.mixed_precision.set_global_policy(cfg.dtype_policy)
        self.strategy = make_strategy(cfg.strategy)
        overrides = {"dim_x": task.dim_x, "dim_y": task.dim_y}
        if cfg.dtype_policy:
            overrides["dtype_policy"] = cfg.dtype_policy
        self.spec = builder.resolve_spec(spec, **overrides)
        with self.strategy.scope():
            self.model = builder.build_model(self.spec)
            # clipping happens in the train step, on the all-reduced gradient: Keras'
            # global_clipnorm would clip each replica's partial gradient separately
            optimizer = keras.optimizers.AdamW(learning_rate=_learning_rate(cfg),
                                               weight_decay=cfg.weight_decay)
            if cfg.dtype_policy == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
        self._step = self._make_step()

    def _make_step(self):
        model, optimizer, strategy = self.model, self.optimizer, self.strategy
        global_batch = float(self.cfg.batch_size)
        replicas = float(strategy.num_replicas_in_sync)
        loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

        @tf.function(jit_compile=self.cfg.jit_compile)
        def replica_step(batch):
            with tf.GradientTape() as tape:
                loss = -tf.cast(tf.reduce_sum(loglik(model, batch, training=True)), tf.float32) / global_batch
                scaled = optimizer.scale_loss(loss) if loss_scaled else loss
            variables = model.trainable_variables
            grads = tape.gradient(scaled, variables)
            grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
            # clip the global gradient (loss-scaled gradients against a scaled threshold)
            clip = self.cfg.clip_norm * (optimizer.scale_loss(1.0) if loss_scaled else 1.0)
            grads, _ = tf.clip_by_global_norm(grads, clip)
            # the optimizer sums over replicas again: hand each replica its 1/R share
            optimizer.apply_gradients(zip([g / replicas for g in grads], variables))
            return loss

        @tf.function
        def step(batch):
            losses = strategy.run(replica_step, args=(batch,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

        return step

    def write_run_files(self):
        os.makedirs(self.out_dir, exist_ok=True)
        atomic_write_text(os.path.join(self.out_dir, "spec.json"), json.dumps(self.spec, indent=2))
        config = {"train": dataclasses.asdict(self.cfg), "task": self.task_name,
                  "task_config": self.task_config}
        atomic_write_text(os.path.join(self.out_dir, "config.json"), json.dumps(config, indent=2))

    def validate(self):
        return evaluate(self.model, self.task, split="val", batch_size=self.cfg.batch_size,
                        num_batches=self.cfg.val_batches)

    def fit(self, verbose=1):
        """Train for ``cfg.steps`` steps; returns the metrics history (list of dicts)."""
        cfg = self.cfg
        self.write_run_files()
        data = self.task.dataset("train", batch_size=cfg.batch_size, seed=cfg.seed)
        data = self.strategy.experimental_distribute_dataset(data)
        progress = keras.utils.Progbar(cfg.steps, verbose=verbose,
                                       stateful_metrics=["val_loglik", "val_gt_loglik"])
        history, losses, best = [], [], -math.inf
        start = time.time()
        for step, batch in enumerate(data, start=1):
            loss = float(self._step(batch))
            if not math.isfinite(loss):
                raise FloatingPointError(
                    f"training loss became {loss} at step {step}; the saved checkpoints in "
                    f"{self.out_dir} were left untouched. Lower the learning rate or check the data.")
            losses.append(loss)
            values = [("loss", loss)]
            if step % cfg.val_every == 0 or step == cfg.steps:
                row = self._log(step, losses, start)
                history.append(row)
                losses = []
                values += [("val_loglik", row["val_loglik"])]
                if row["val_gt_loglik"] != "":
                    values += [("val_gt_loglik", row["val_gt_loglik"])]
                if row["val_loglik"] > best:
                    best = row["val_loglik"]
                    atomic_save_model(self.model, os.path.join(self.out_dir, "best.keras"))
            progress.update(step, values=values)
            if step >= cfg.steps:
                break
        atomic_save_model(self.model, os.path.join(self.out_dir, "model.keras"))
        return history

    def _log(self, step, losses, start):
        val = self.validate()
        lr = self.optimizer.learning_rate
        row = {
            "step": step,
            "train_loss": float(np.mean(losses)),
            "val_loglik": val["loglik"]["mean"],
            "val_loglik_stderr": val["loglik"]["stderr"],
            "val_gt_loglik": val["gt_loglik"]["mean"] if "gt_loglik" in val else "",
            "learning_rate": float(lr.numpy() if hasattr(lr, "numpy") else lr),
            "elapsed_s": round(time.time() - start, 2),
        }
        path = os.path.join(self.out_dir, "metrics.csv")
        rows = []
        if os.path.exists(path):
            with open(path) as fh:
                rows = list(csv.DictReader(fh))
        rows.append(row)
        tmp = f"{path}.tmp"
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, METRIC_FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)
        return row


def train(model="tnp-d", task="gp", task_config=None, out_dir=None, verbose=1, **train_kwargs):
    """Train ``model`` (preset, dict or spec file) on a registered task; returns the Trainer."""
    cfg = TrainConfig(**train_kwargs)
    task_obj = make_task(task, task_config)
    if out_dir is None:
        label = model if isinstance(model, str) else "model"
        out_dir = os.path.join("runs", f"{os.path.basename(label).split('.')[0]}-{task}-{time.strftime('%Y%m%d-%H%M%S')}")
    trainer = Trainer(model, task_obj, cfg, out_dir, task_name=task, task_config=task_config)
    trainer.fit(verbose=verbose)
    return trainer
