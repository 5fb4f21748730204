"""Keras-native training of NP models: ``compile`` / ``fit`` / ``evaluate`` with the NP loss.

::

    model = taylorformer.build_model("tnp-d")
    model.compile(optimizer=keras.optimizers.AdamW(5e-4, global_clipnorm=0.5))
    model.fit(task.dataset("train", batch_size=16), steps_per_epoch=250, epochs=8,
              validation_data=task.dataset("val", batch_size=16))
    model.evaluate(task.dataset("test", batch_size=16), return_dict=True)

The loss is the negative log-likelihood per real target point (``mask_t``), averaged over
the tasks of the global batch: ``-mean_b taylorformer.loglik(model, batch)[b]``. For
autoregressive models that is the teacher-forced chain rule; ``compile(num_permutations=K)``
scores K random target orders per task and step (seeded by ``(permutation_seed, step)``).

Under a ``tf.distribute`` strategy with several replicas the gradient is all-reduced
before clipping: ``global_clipnorm`` / ``clipnorm`` of the optimizer act on the gradient of
the global batch (Keras alone would clip each replica's partial gradient).
``compile(skip_non_finite=True)`` drops a step whose loss or gradient is not finite
(counted in the ``skipped_steps`` log) instead of applying it.

Logs: ``loss`` (train and eval); eval adds ``loglik`` and ``loglik_stderr`` (over tasks),
``num_tasks_skipped`` (tasks with no observed target: all their target values NaN, left
out of every metric) and, where the batches carry the exact GP predictive, ``gt_loglik`` and ``gap_to_gt``.
"""
import keras
import tensorflow as tf

from taylorformer.batch import observed_tasks, with_masks
from taylorformer.errors import SpecError
from taylorformer.models.inference import loglik
from taylorformer.models.target_order import permute_targets


class MeanWithStderr(keras.metrics.Metric):
    """Running mean of per-task values ``[B]`` and its standard error (``ddof=1``)."""

    def __init__(self, name="loglik", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", aggregation="sum", name="total")
        self.squares = self.add_variable(shape=(), initializer="zeros", aggregation="sum", name="squares")
        self.count = self.add_variable(shape=(), initializer="zeros", aggregation="sum", name="count")

    def update_state(self, values, weights=None):
        """``values [B]``; ``weights [B]`` of 0/1 leave tasks out (no observed target)."""
        values = tf.cast(tf.reshape(values, [-1]), tf.float64)
        weights = tf.ones_like(values) if weights is None else tf.cast(tf.reshape(weights, [-1]), tf.float64)
        self.total.assign_add(tf.cast(tf.reduce_sum(weights * values), self.dtype))
        self.squares.assign_add(tf.cast(tf.reduce_sum(weights * values**2), self.dtype))
        self.count.assign_add(tf.cast(tf.reduce_sum(weights), self.dtype))

    def result(self):
        return self.total / tf.maximum(self.count, 1.0)

    def stderr(self):
        n = self.count
        mean = self.result()
        var = tf.maximum(self.squares - n * mean**2, 0.0) / tf.maximum(n - 1.0, 1.0)
        return tf.where(n > 1, tf.sqrt(var / tf.maximum(n, 1.0)), tf.constant(float("nan"), self.dtype))


class FitMixin:
    """``train_step`` / ``test_step`` of NP models (mixed into :class:`NeuralProcess`)."""

    def _init_fit_state(self):
        self.num_permutations, self.skip_non_finite, self.permutation_seed = 0, False, 0
        self.loglik_tracker = MeanWithStderr(name="loglik")
        self.gt_tracker = keras.metrics.Mean(name="gt_loglik")
        self.gap_tracker = keras.metrics.Mean(name="gap_to_gt")
        self.skipped_tracker = keras.metrics.Sum(name="skipped_steps")
        self.skipped_tasks_tracker = keras.metrics.Sum(name="num_tasks_skipped")

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer="adamw", loss=None, metrics=None, *, num_permutations=0,
                skip_non_finite=False, permutation_seed=0, **kwargs):
        """Keras ``compile`` with the NP loss built in (``loss``/``metrics`` must be None).

        ``num_permutations``: autoregressive models, K random target orders per task and
        step (0: the given order). ``skip_non_finite``: drop non-finite steps.
        ``permutation_seed``: seed of those orders.
        """
        if loss is not None or metrics:
            raise SpecError("NP models train with their own negative log-likelihood: call "
                            "compile() without loss= and metrics= (evaluate() reports loglik, "
                            "its stderr and, on GP tasks, the gap to the exact ceiling)")
        if not isinstance(num_permutations, int) or isinstance(num_permutations, bool) or num_permutations < 0:
            raise SpecError(f"compile: num_permutations must be an int >= 0, got {num_permutations!r}")
        if num_permutations and not self.causal:
            raise SpecError("compile: num_permutations applies to autoregressive models; "
                            f"{self.spec['kind']!r} models ignore the target order")
        super().compile(optimizer=optimizer, **kwargs)
        self.num_permutations, self.skip_non_finite = num_permutations, bool(skip_non_finite)
        self.permutation_seed = int(permutation_seed)
        self._compile_config.config.update(num_permutations=num_permutations,
                                           skip_non_finite=self.skip_non_finite,
                                           permutation_seed=self.permutation_seed)

    def compile_from_config(self, config):
        """Recompile a loaded model (Keras skips this for a custom ``compile``)."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**{k: v for k, v in config.items() if k not in ("loss", "metrics")})
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Keras hook run by ``fit``/``evaluate`` under a distribution strategy. A built NP
        model has no compiled loss or metrics to build: only the optimizer is left, which
        needs no data. (Keras' own version first reduces a batch over the replicas, which
        fails for dict batches under ``MultiWorkerMirroredStrategy``.)"""
        if not self.built:
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        if self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)

    # ------------------------------------------------------------------ steps
    def np_loss(self, batch, training=False):
        """``(loss, per-task loglik [R], observed [R])``: loss = -mean over the R rows with
        an observed target (float32; 0 when none has one: such a batch changes nothing)."""
        if self.num_permutations and training:
            seed = tf.stack([tf.cast(self.permutation_seed, tf.int64),
                             tf.cast(self.optimizer.iterations, tf.int64)])
            batch = permute_targets(batch, seed, self.num_permutations)
        ll = loglik(self, batch, training=training)
        observed = tf.cast(observed_tasks(with_masks(batch)), tf.float64)
        loss = -tf.reduce_sum(ll * observed) / tf.maximum(tf.reduce_sum(observed), 1.0)
        return tf.cast(loss, tf.float32), ll, observed

    def train_step(self, batch):
        batch = _unpack(batch)
        # the range of the network's inputs seen in training (window_standardisation.TrainingRange)
        self.training_range.update(self.network_inputs(self.prepare(batch)))
        strategy = tf.distribute.get_strategy()
        replicas = strategy.num_replicas_in_sync
        optimizer = self.optimizer
        with tf.GradientTape() as tape:
            loss, _, _ = self.np_loss(batch, training=True)
            # the gradients of the replicas are summed: each contributes 1/R of the mean
            scaled = optimizer.scale_loss(loss / replicas)
        variables = self.trainable_variables
        # a weight that does not reach the loss (e.g. the location update of a last TE
        # layer, whose new positions nothing reads) gets a zero gradient
        grads = [tf.zeros_like(v) if g is None else g
                 for g, v in zip(tape.gradient(scaled, variables), variables)]
        if replicas > 1:
            grads = self._clip_global(tf.distribute.get_replica_context().all_reduce("sum", grads))
            grads = [g / replicas for g in grads]  # the optimizer sums the replicas again
        if not self.skip_non_finite:
            optimizer.apply_gradients(zip(grads, variables))
            self._loss_tracker.update_state(loss)
            return _logs({"loss": self._loss_tracker.result()})
        # all-reduced gradients are identical on every replica: all take the same branch
        finite = tf.logical_and(tf.math.is_finite(tf.linalg.global_norm(grads)), tf.math.is_finite(loss))

        def apply():
            optimizer.apply_gradients(zip(grads, variables))
            self._loss_tracker.update_state(loss)
            return tf.constant(0.0)

        skipped = tf.cond(finite, apply, lambda: tf.constant(1.0))
        self.skipped_tracker.update_state(skipped / replicas)
        return _logs({"loss": self._loss_tracker.result(), "skipped_steps": self.skipped_tracker.result()})

    def _clip_global(self, grads):
        """Apply the optimizer's ``global_clipnorm`` / ``clipnorm`` to all-reduced gradients
        (thresholds in loss-scaled units under a ``LossScaleOptimizer``)."""
        optimizer = self.optimizer
        scale = optimizer.scale_loss(1.0)
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        if inner.global_clipnorm:
            grads, _ = tf.clip_by_global_norm(grads, inner.global_clipnorm * scale)
        if inner.clipnorm:
            grads = [tf.clip_by_norm(g, inner.clipnorm * scale) for g in grads]
        return grads

    def get_metrics_result(self):
        """The logs of the phase that ran since the last reset (Keras reads these, reduced
        over replicas and workers, at the end of an epoch or evaluation): the keys a train
        or test step returns."""
        logs = {"loss": self._loss_tracker.result()}
        evaluated = float(self.loglik_tracker.count.numpy()) > 0
        if evaluated or float(self.skipped_tasks_tracker.result().numpy()) > 0:  # an evaluation ran
            nan = tf.constant(float("nan"), self.loglik_tracker.dtype)  # no task had a target to score
            logs.update(loglik=self.loglik_tracker.result() if evaluated else nan,
                        loglik_stderr=self.loglik_tracker.stderr(),
                        num_tasks_skipped=self.skipped_tasks_tracker.result())
            if float(self.gt_tracker.count.numpy()) > 0:
                logs.update(gt_loglik=self.gt_tracker.result(), gap_to_gt=self.gap_tracker.result())
        elif self.skip_non_finite:
            logs["skipped_steps"] = self.skipped_tracker.result()
        return logs

    def test_step(self, batch):
        batch = _unpack(batch)
        loss, ll, observed = self.np_loss(batch)
        # weighted by the tasks scored: the mean over every task with an observed target
        self._loss_tracker.update_state(loss, sample_weight=tf.cast(tf.reduce_sum(observed), tf.float32))
        self.loglik_tracker.update_state(ll, observed)
        self.skipped_tasks_tracker.update_state(tf.reduce_sum(1.0 - observed))
        logs = {"loss": self._loss_tracker.result(), "loglik": self.loglik_tracker.result(),
                "loglik_stderr": self.loglik_tracker.stderr(),
                "num_tasks_skipped": self.skipped_tasks_tracker.result()}
        gt_key = "gt_loglik_joint" if self.causal else "gt_loglik"
        if gt_key in batch:  # the exact GP predictive: the ceiling and the gap to it
            gt = tf.cast(batch[gt_key], tf.float64)
            self.gt_tracker.update_state(gt, observed)
            self.gap_tracker.update_state(gt - tf.cast(ll, tf.float64), observed)
            logs.update(gt_loglik=self.gt_tracker.result(), gap_to_gt=self.gap_tracker.result())
        return _logs(logs)


def _logs(logs):
    """Step logs as Keras reduces them. Under ``MultiWorkerMirroredStrategy`` Keras 3
    averages each log over the workers along axis 0, which fails for scalars
    (tensorflow/tensorflow#72388): hand it shape ``[1]`` there (the mean is a scalar)."""
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and \
            strategy.extended._in_multi_worker_mode():
        return {key: tf.reshape(value, [1]) for key, value in logs.items()}
    return logs


def _unpack(data):
    """The batch dict of what ``fit``/``evaluate`` hand a step (a dict, or ``(dict,)``)."""
    if isinstance(data, (tuple, list)) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict):
        raise SpecError("NP models fit on datasets of batch dicts (xc, yc, xt, yt[, masks]), "
                        f"e.g. task.dataset('train', batch_size=16); got {type(data).__name__}")
    return data
