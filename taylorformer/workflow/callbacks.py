"""Keras callbacks of a training run: what ``model.fit`` and Keras' own callbacks do not
promise and a run directory (:mod:`taylorformer.workflow.run_dir`) needs.

* :class:`StepCounter`: the global step (it names data batches, checkpoints and metric
  rows, and survives a resume) and the stop at the last step;
* :class:`TimeBudget`: stop after a budget of wall or CPU seconds;
* :class:`RunCheckpoints`: atomic checkpoints with the ``latest`` pointer;
* :class:`BestModel`: ``best.keras`` by validation log-likelihood, written atomically;
* :class:`MetricsLog`: one ``metrics.csv`` row per validation;
* :class:`PredictionImages`: a plot of the predictions in TensorBoard at each validation.

Nothing is written while a weight is NaN/inf (a diverged update), so the files of a run
always hold the last good weights.
"""
import io
import math
import time

import keras
import numpy as np
import tensorflow as tf

from taylorformer.task import plot_task


def weights_finite(model):
    """Are all of ``model``'s weights finite?"""
    return all(np.isfinite(v.numpy()).all() for v in model.weights)


class StepCounter(keras.callbacks.Callback):
    """Counts training batches into ``step`` (a ``tf.Variable``, checkpointed with the run)
    and ``skipped`` (steps dropped by ``skip_non_finite``); stops ``fit`` at ``total``."""

    def __init__(self, step, skipped, total):
        super().__init__()
        self.step, self.skipped, self.total = step, skipped, total
        self._epoch_skips = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_skips = 0

    def on_train_batch_end(self, batch, logs=None):
        self.step.assign_add(1)
        skips = int(round(float((logs or {}).get("skipped_steps", 0))))
        self.skipped.assign_add(skips - self._epoch_skips)
        self._epoch_skips = skips
        if int(self.step.numpy()) >= self.total:
            self.model.stop_training = True


class TimeBudget(keras.callbacks.Callback):
    """Stops ``fit`` once ``seconds`` of wall time (``clock="wall"``) or of this process's
    CPU time (``clock="cpu"``: fair under shared load) have passed since it began."""

    def __init__(self, seconds, clock="wall"):
        super().__init__()
        self.seconds = seconds
        self.clock = time.process_time if clock == "cpu" else time.time

    def on_train_begin(self, logs=None):
        self._start = self.clock()

    def on_train_batch_end(self, batch, logs=None):
        if self.clock() - self._start > self.seconds:
            self.model.stop_training = True


class RunCheckpoints(keras.callbacks.Callback):
    """A checkpoint every ``every`` steps and at the end of training (when the weights
    are finite): :meth:`RunDirectory.save_checkpoint` of ``checkpoint`` at ``step``."""

    def __init__(self, run_dir, checkpoint, step, every, keep):
        super().__init__()
        self.run_dir, self.checkpoint, self.step = run_dir, checkpoint, step
        self.every, self.keep = every, keep
        self.saved_step = None

    def save(self):
        step = int(self.step.numpy())
        if step != self.saved_step and weights_finite(self.model):
            self.run_dir.save_checkpoint(self.checkpoint, step, self.keep)
            self.saved_step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.step.numpy()) % self.every == 0:
            self.save()

    def on_train_end(self, logs=None):
        self.save()


def record_metrics(model, run_dir):
    """Put the run's last ``metrics.csv`` row (step, validation log-likelihood, ...) in the
    model card as its ``metrics`` at save time (a model without a card is left alone)."""
    card = getattr(model, "model_card", None)
    rows = run_dir.metrics_rows()
    if card is None or not rows:
        return
    metrics = {"split": "val"}
    for key, value in rows[-1].items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            metrics[key] = int(number) if key in ("step", "skipped_steps") else number
    model.model_card = {**card, "metrics": metrics}


class BestModel(keras.callbacks.Callback):
    """``best.keras``: the model with the highest ``monitor`` so far (``best`` seeds it on
    resume), saved atomically when it improves."""

    def __init__(self, run_dir, monitor="val_loglik", best=-math.inf):
        super().__init__()
        self.run_dir, self.monitor, self.best = run_dir, monitor, best

    def on_epoch_end(self, epoch, logs=None):
        value = float((logs or {}).get(self.monitor, math.nan))
        if value > self.best and weights_finite(self.model):
            self.best = value
            record_metrics(self.model, self.run_dir)
            self.run_dir.save_model(self.model, "best.keras")


class MetricsLog(keras.callbacks.Callback):
    """One ``metrics.csv`` row per validation (epoch end): the step, the mean train loss
    since the last row, the validation metrics, learning rate, skipped steps, and the run's
    elapsed seconds (a resumed run goes on from its last row's)."""

    def __init__(self, run_dir, step, skipped):
        super().__init__()
        self.run_dir, self.step, self.skipped = run_dir, step, skipped

    def on_train_begin(self, logs=None):
        earlier = self.run_dir.metrics_rows()
        self._start = time.time() - (float(earlier[-1].get("elapsed_s") or 0.0) if earlier else 0.0)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if not weights_finite(self.model):
            return
        lr = self.model.optimizer.learning_rate
        self.run_dir.append_metrics({
            "step": int(self.step.numpy()),
            "train_loss": float(logs.get("loss", math.nan)),
            "val_loglik": float(logs.get("val_loglik", math.nan)),
            "val_loglik_stderr": float(logs.get("val_loglik_stderr", math.nan)),
            "val_gt_loglik": float(logs["val_gt_loglik"]) if "val_gt_loglik" in logs else "",
            "learning_rate": float(np.asarray(lr)),
            "skipped_steps": int(self.skipped.numpy()),
            "elapsed_s": round(time.time() - self._start, 2),
        })


class PredictionImages(keras.callbacks.Callback):
    """At each validation, a PNG of the predictions on ``batch`` (the task's own plot,
    :meth:`taylorformer.task.Task.plot`) as a TensorBoard image in ``log_dir``."""

    def __init__(self, log_dir, task, batch, num_tasks=4, title=None):
        super().__init__()
        self.log_dir, self.task, self.batch = log_dir, task, batch
        self.num_tasks, self.title = num_tasks, title
        self._writer = None

    def on_epoch_end(self, epoch, logs=None):
        if not weights_finite(self.model):
            return
        buffer = io.BytesIO()
        plot_task(self.task, self.model, self.batch, num_tasks=self.num_tasks, title=self.title,
                  num_samples=0).savefig(buffer, format="png", dpi=110)
        image = tf.image.decode_png(buffer.getvalue(), channels=4)[None]
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        with self._writer.as_default():
            tf.summary.image("predictions", image, step=epoch)
        self._writer.flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
