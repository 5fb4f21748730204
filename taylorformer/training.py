"""Training loop: AdamW + clipping under a tf.distribute strategy, into a run directory
(:mod:`taylorformer.run_dir`).

``resume`` restores weights, optimizer state and step from the run's latest checkpoint;
training batch ``i`` depends only on ``(seed, i)``, so a resumed run sees the same data
as an uninterrupted one.
"""
import dataclasses
import inspect
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

from taylorformer.errors import SpecError
from taylorformer.evaluation import evaluate
from taylorformer.inference import loglik
from taylorformer.models import build_model
from taylorformer.run_dir import RunDirectory
from taylorformer.spec import resolve_spec
from taylorformer.target_order import permute_targets
from taylorformer.task import make_task

STRATEGIES = ("default", "mirrored")
SCHEDULES = ("constant", "cosine")
NAN_POLICIES = ("stop", "skip")


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
    checkpoint_every: int = 250
    keep_checkpoints: int = 2
    nan_policy: str = "stop"  # "skip": drop a step whose loss or gradient is not finite
    time_budget_s: float = None  # stop (validate, checkpoint, save) after this much time
    budget_clock: str = "wall"  # "cpu": count this process's CPU seconds (fair under shared load)
    num_permutations: int = 0  # autoregressive models: K random target orders per task and step

    def __post_init__(self):
        if not isinstance(self.num_permutations, int) or self.num_permutations < 0:
            raise SpecError(f"train config 'num_permutations' must be an int >= 0, got {self.num_permutations!r}")
        for name in ("steps", "batch_size", "val_every", "val_batches", "checkpoint_every",
                     "keep_checkpoints"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise SpecError(f"train config {name!r} must be a positive int, got {value!r}")
        if self.schedule not in SCHEDULES:
            raise SpecError(f"train config 'schedule' must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.strategy not in STRATEGIES:
            raise SpecError(f"train config 'strategy' must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.budget_clock not in ("wall", "cpu"):
            raise SpecError(f"train config 'budget_clock' must be 'wall' or 'cpu', got {self.budget_clock!r}")
        if self.nan_policy not in NAN_POLICIES:
            raise SpecError(f"train config 'nan_policy' must be one of {NAN_POLICIES}, got {self.nan_policy!r}")
        if not (self.learning_rate > 0 and self.clip_norm > 0):
            raise SpecError("train config 'learning_rate' and 'clip_norm' must be > 0")


def make_strategy(name):
    """``tf.distribute`` strategy by name: ``default`` (one device) or ``mirrored``."""
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def _learning_rate(cfg):
    if cfg.schedule == "cosine":
        return keras.optimizers.schedules.CosineDecay(
            cfg.learning_rate, cfg.steps, alpha=cfg.min_learning_rate / cfg.learning_rate)
    return cfg.learning_rate


class Trainer:
    """Builds the model under the strategy and runs the training loop."""

    def __init__(self, spec, task, cfg, out_dir, task_name="task", task_config=None):
        self.cfg, self.task, self.out_dir = cfg, task, out_dir
        self.run_dir = RunDirectory(out_dir)
        self.task_name, self.task_config = task_name, task_config or {}
        keras.utils.set_random_seed(cfg.seed)
        self.strategy = make_strategy(cfg.strategy)
        overrides = {"dim_x": task.dim_x, "dim_y": task.dim_y}
        if cfg.dtype_policy:
            overrides["dtype_policy"] = cfg.dtype_policy
        self.spec = resolve_spec(spec, **overrides)
        with self.strategy.scope():
            self.model = build_model(self.spec)
            if cfg.num_permutations and not self.model.causal:
                raise SpecError("train config 'num_permutations' applies to autoregressive models; "
                                f"{self.spec['kind']!r} models ignore the target order")
            # clipping happens in the train step, on the all-reduced gradient: Keras'
            # global_clipnorm would clip each replica's partial gradient separately
            optimizer = keras.optimizers.AdamW(learning_rate=_learning_rate(cfg),
                                               weight_decay=cfg.weight_decay)
            if cfg.dtype_policy == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            self.skipped = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_steps")
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                              step=self.step, skipped=self.skipped)
        self._step = self._make_step()

    def _make_step(self):
        model, optimizer, strategy = self.model, self.optimizer, self.strategy
        global_batch = float(self.cfg.batch_size)
        replicas = float(strategy.num_replicas_in_sync)
        loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        skip_non_finite = self.cfg.nan_policy == "skip"
        permutations = self.cfg.num_permutations
        seed = self.cfg.seed

        def apply(grads, variables):
            # the optimizer sums over replicas again: hand each replica its 1/R share
            optimizer.apply_gradients(zip([g / replicas for g in grads], variables))
            return tf.constant(0, tf.int64)

        @tf.function(jit_compile=self.cfg.jit_compile)
        def replica_step(batch):
            if permutations:  # one order per task copy, shared by x, y and mask; seeded by step
                batch = permute_targets(batch, tf.stack([tf.cast(seed, tf.int64), self.step]), permutations)
            with tf.GradientTape() as tape:
                total = tf.reduce_sum(loglik(model, batch, training=True))
                loss = -tf.cast(total, tf.float32) / (global_batch * max(permutations, 1))
                scaled = optimizer.scale_loss(loss) if loss_scaled else loss
            variables = model.trainable_variables
            # a weight that does not reach the loss (e.g. the location update of a last
            # TE layer, whose new positions nothing reads) has no gradient: use zeros,
            # which all_reduce and the optimizer accept
            grads = [tf.zeros_like(v) if g is None else g
                     for g, v in zip(tape.gradient(scaled, variables), variables)]
            grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
            # clip the global gradient (loss-scaled gradients against a scaled threshold)
            clip = self.cfg.clip_norm * (optimizer.scale_loss(1.0) if loss_scaled else 1.0)
            grads, norm = tf.clip_by_global_norm(grads, clip)
            if not skip_non_finite:
                return loss, apply(grads, variables)
            # the all-reduced norm is identical on every replica, so all take one branch
            skipped = tf.cond(tf.math.is_finite(norm), lambda: apply(grads, variables),
                              lambda: tf.constant(1, tf.int64))
            return loss, skipped

        @tf.function
        def step(batch):
            losses, skipped = strategy.run(replica_step, args=(batch,))
            loss = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
            # every replica took the same branch: the sum counts the step R times
            skipped = strategy.reduce(tf.distribute.ReduceOp.SUM, skipped, axis=None) // int(replicas)
            self.step.assign_add(1)
            self.skipped.assign_add(skipped)
            return loss, skipped

        return step

    # ---------------------------------------------------------------- run files
    def write_run_files(self):
        self.run_dir.write_definition(self.spec, {"train": dataclasses.asdict(self.cfg),
                                                  "task": self.task_name,
                                                  "task_config": self.task_config})

    def check_weights_finite(self):
        """Raise before anything is saved if a weight is NaN/inf (a diverged update)."""
        for var in self.model.weights:
            if not np.isfinite(var.numpy()).all():
                raise FloatingPointError(
                    f"weight {var.path} became non-finite at step {int(self.step.numpy())}; "
                    f"stopped without saving, so the checkpoints in {self.out_dir} still hold the "
                    f"last good weights. Lower the learning rate or check the data.")

    def save_checkpoint(self):
        """A checkpoint of the current step (see :meth:`RunDirectory.save_checkpoint`)."""
        self.check_weights_finite()
        return self.run_dir.save_checkpoint(self.checkpoint, self.step.numpy(), self.cfg.keep_checkpoints)

    def restore_latest(self):
        """Restore the newest complete checkpoint; returns its step."""
        self.run_dir.restore_latest(self.checkpoint)
        step = int(self.step.numpy())
        self.run_dir.truncate_metrics(step)
        return step

    # ------------------------------------------------------------------- loop
    def validate(self):
        return evaluate(self.model, self.task, split="val", batch_size=self.cfg.batch_size,
                        num_batches=self.cfg.val_batches)

    def _train_data(self, start):
        kwargs = {"batch_size": self.cfg.batch_size, "seed": self.cfg.seed}
        if "start" in inspect.signature(self.task.dataset).parameters:
            data = self.task.dataset("train", start=start, **kwargs)
        else:  # third-party task without ``start``: skip (slower, same stream)
            data = self.task.dataset("train", **kwargs).skip(start)
        return self.strategy.experimental_distribute_dataset(data)

    def fit(self, verbose=1):
        """Train from the current step to ``cfg.steps``; returns the metric rows logged."""
        cfg = self.cfg
        self.write_run_files()
        done = int(self.step.numpy())
        best = max((float(r["val_loglik"]) for r in self.run_dir.metrics_rows()), default=-math.inf)
        progress = keras.utils.Progbar(cfg.steps, verbose=verbose,
                                       stateful_metrics=["val_loglik", "val_gt_loglik", "skipped"])
        if done:
            progress.update(done)
        history, losses = [], []
        start = time.time()
        clock = time.process_time if cfg.budget_clock == "cpu" else time.time
        budget_start = clock()
        for batch in (self._train_data(done) if done < cfg.steps else []):
            loss, skipped = self._step(batch)
            loss, step = float(loss), int(self.step.numpy())
            if not math.isfinite(loss) and cfg.nan_policy == "stop":
                raise FloatingPointError(
                    f"training loss became {loss} at step {step}; stopped without saving, so the "
                    f"checkpoints in {self.out_dir} still hold the last good weights (resume with "
                    f"--resume). Lower the learning rate, check the data, or use nan_policy='skip'.")
            if math.isfinite(loss):
                losses.append(loss)
            values = [("loss", loss)]
            if cfg.nan_policy == "skip":
                values.append(("skipped", int(self.skipped.numpy())))
            out_of_time = cfg.time_budget_s is not None and clock() - budget_start > cfg.time_budget_s
            last = step >= cfg.steps or out_of_time
            if step % cfg.val_every == 0 or last:
                row = self._log(step, losses, start)
                history.append(row)
                losses = []
                values.append(("val_loglik", row["val_loglik"]))
                if row["val_gt_loglik"] != "":
                    values.append(("val_gt_loglik", row["val_gt_loglik"]))
                if row["val_loglik"] > best:
                    best = row["val_loglik"]
                    self.check_weights_finite()
                    self.run_dir.save_model(self.model, "best.keras")
            if step % cfg.checkpoint_every == 0 or last:
                self.save_checkpoint()
            progress.update(step, values=values)
            if last:
                break
        self.check_weights_finite()
        self.run_dir.save_model(self.model, "model.keras")
        return history

    def _log(self, step, losses, start):
        val = self.validate()
        lr = self.optimizer.learning_rate
        row = {
            "step": step,
            "train_loss": float(np.mean(losses)) if losses else float("nan"),
            "val_loglik": val["loglik"]["mean"],
            "val_loglik_stderr": val["loglik"]["stderr"],
            "val_gt_loglik": val["gt_loglik"]["mean"] if "gt_loglik" in val else "",
            "learning_rate": float(lr.numpy() if hasattr(lr, "numpy") else lr),
            "skipped_steps": int(self.skipped.numpy()),
            "elapsed_s": round(time.time() - start, 2),
        }
        self.run_dir.append_metrics(row)
        return row


def train(model="tnp-d", task="gp", task_config=None, out_dir=None, verbose=1, resume=None,
          **train_kwargs):
    """Train ``model`` (preset, dict or spec file) on a registered task; returns the Trainer.

    ``resume=RUN_DIR`` continues that run from its latest checkpoint with its saved
    spec, task and training config (``train_kwargs`` may raise ``steps``).
    """
    if resume:
        run = RunDirectory(resume)
        saved, model = run.read_config(), run.read_spec()
        cfg = TrainConfig(**{**saved["train"], **train_kwargs})
        task, task_config, out_dir = saved["task"], saved["task_config"], resume
    else:
        cfg = TrainConfig(**train_kwargs)
    task_obj = make_task(task, task_config)
    if out_dir is None:
        label = model if isinstance(model, str) else "model"
        out_dir = os.path.join("runs", f"{os.path.basename(label).split('.')[0]}-{task}-{time.strftime('%Y%m%d-%H%M%S')}")
    trainer = Trainer(model, task_obj, cfg, out_dir, task_name=task, task_config=task_config)
    if resume:
        trainer.restore_latest()
    trainer.fit(verbose=verbose)
    return trainer
