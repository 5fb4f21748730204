"""Training into a run directory (:mod:`taylorformer.workflow.run_dir`): a thin layer over Keras
``model.fit`` (the NP loss and steps of :mod:`taylorformer.models.fitting`) with Keras'
callbacks (TensorBoard, TerminateOnNaN) and ours (:mod:`taylorformer.workflow.callbacks`).

An epoch is ``val_every`` steps: validation, a ``metrics.csv`` row, ``best.keras`` and a
TensorBoard image follow each. ``resume`` restores weights, optimizer state and step from
the run's latest checkpoint; training batch ``i`` depends only on ``(seed, i)``, so a
resumed run sees the same data, and ends with the same weights, as an uninterrupted one.
"""
import dataclasses
import inspect
import math
import os
import shutil
import tempfile
import time
import warnings

import keras
import tensorflow as tf

from taylorformer.workflow import callbacks as run_callbacks
from taylorformer.workflow import runs
from taylorformer.checks import check_bool, check_choice, check_int, check_number
from taylorformer.errors import RunDirectoryError, SpecError, TaskError
from taylorformer.files import json_text
from taylorformer.model_card import evaluation_headline
from taylorformer.models import build_model
from taylorformer.workflow.run_dir import RunDirectory
from taylorformer.spec import check_dtype_policy, resolve_spec
from taylorformer.task import can_plot

STRATEGIES = ("default", "mirrored", "multi-worker")
SCHEDULES = ("constant", "cosine")
NAN_POLICIES = ("stop", "skip")
#: train config keys renamed: old name -> new name (the CLI's), still read with a warning
RENAMED_OPTIONS = {"time_budget_s": "time_budget"}


@dataclasses.dataclass
class TrainConfig:
    """Everything that defines a training run besides the model spec and the task."""

    steps: int = 2000
    batch_size: int = 16
    learning_rate: float = 1e-3  # peak, after the warm-up (tuned: benchmarks/experiments/README.md)
    weight_decay: float = 1e-4
    clip_norm: float = 0.5
    schedule: str = "cosine"  # or "constant"; cosine decays to min_learning_rate at `steps`
    warmup_steps: int = None  # linear warm-up from 0 to learning_rate; None: steps // 20
    min_learning_rate: float = 2e-5
    seed: int = 0
    jit_compile: object = "auto"  # True, False or "auto" (see resolve_jit_compile)
    dtype_policy: str = None  # e.g. "mixed_bfloat16"; the likelihood stays float32
    strategy: str = "default"  # "mirrored" (this machine's devices), "multi-worker" (TF_CONFIG)
    val_every: int = 250
    val_batches: int = 8
    checkpoint_every: int = 250
    keep_checkpoints: int = 2
    nan_policy: str = "stop"  # "skip": drop a step whose loss or gradient is not finite
    time_budget: float = None  # seconds; stop (validate, checkpoint, save) after this much time
    budget_clock: str = "wall"  # "cpu": count this process's CPU seconds (fair under shared load)
    num_permutations: int = 0  # autoregressive models: K random target orders per task and step
    tensorboard: bool = True  # TensorBoard logs (scalars + prediction images) in RUN_DIR/tensorboard

    def __post_init__(self):
        owner = "train config"
        for name in ("steps", "batch_size", "val_every", "val_batches", "checkpoint_every",
                     "keep_checkpoints"):
            check_int(owner, name, getattr(self, name))
        check_int(owner, "num_permutations", self.num_permutations, minimum=0)
        check_int(owner, "seed", self.seed, minimum=0, maximum=2**32 - 1)
        if self.warmup_steps is None:
            self.warmup_steps = self.steps // 20
        check_int(owner, "warmup_steps", self.warmup_steps, minimum=0, maximum=self.steps - 1)
        for name in ("learning_rate", "clip_norm"):
            check_number(owner, name, getattr(self, name), low=0, low_open=True)
        for name in ("weight_decay", "min_learning_rate"):
            check_number(owner, name, getattr(self, name), low=0)
        check_number(owner, "time_budget", self.time_budget, low=0, low_open=True, optional=True)
        check_choice(owner, "jit_compile", self.jit_compile, (True, False, "auto"))
        check_dtype_policy(owner, "dtype_policy", self.dtype_policy)
        check_bool(owner, "tensorboard", self.tensorboard)
        for name, allowed in (("schedule", SCHEDULES), ("strategy", STRATEGIES),
                              ("budget_clock", ("wall", "cpu")), ("nan_policy", NAN_POLICIES)):
            check_choice(owner, name, getattr(self, name), allowed)


def renamed_options(options, where):
    """``options`` (a train config dict) with each old key of :data:`RENAMED_OPTIONS` under
    its new name and a DeprecationWarning naming it; :class:`SpecError` where both are given."""
    out = dict(options)
    for old, new in RENAMED_OPTIONS.items():
        if old in out:
            if new in out:
                raise SpecError(f"{where} gives both {old!r} and {new!r}: {old!r} is the old name of "
                                f"{new!r}; give {new!r} only")
            warnings.warn(f"{where}: train config option {old!r} is now {new!r}", DeprecationWarning,
                          stacklevel=3)
            out[new] = out.pop(old)
    return out


def make_strategy(name):
    """``tf.distribute`` strategy by name: ``default`` (one device), ``mirrored`` (the
    devices of this machine) or ``multi-worker`` (``MultiWorkerMirroredStrategy``: a
    cluster of machines described by the ``TF_CONFIG`` environment variable)."""
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi-worker":
        if not os.environ.get("TF_CONFIG"):
            raise SpecError("--strategy multi-worker needs TF_CONFIG (the cluster and this "
                            "worker's task), see docs/training.md")
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.get_strategy()


def is_chief(strategy):
    """Does this process write the run directory? (Every process of a single-machine
    strategy; in a cluster the ``chief`` task, or worker 0 where there is none.)"""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    return resolver.task_type == "worker" and resolver.task_id == 0 and \
        "chief" not in resolver.cluster_spec().as_dict()


def learning_rate_schedule(cfg):
    """The learning rate of ``cfg``: a float, or a ``keras.optimizers.schedules`` schedule
    (linear warm-up over ``warmup_steps`` from 0, then constant or cosine decay to
    ``min_learning_rate`` at ``steps``)."""
    decay_steps = max(cfg.steps - cfg.warmup_steps, 1)
    if cfg.schedule == "constant" and not cfg.warmup_steps:
        return cfg.learning_rate
    alpha = 1.0 if cfg.schedule == "constant" else cfg.min_learning_rate / cfg.learning_rate
    if not cfg.warmup_steps:
        return keras.optimizers.schedules.CosineDecay(cfg.learning_rate, decay_steps, alpha=alpha)
    return keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps, alpha=alpha, warmup_target=cfg.learning_rate, warmup_steps=cfg.warmup_steps)


def resolve_jit_compile(value, strategy):
    """``"auto"``: XLA with the default strategy (the main job's TNP-D step is faster with
    XLA: benchmarks/README.md, "train_throughput.py"; XLA is the usual win on GPUs),
    off under a distribution strategy, whose variables XLA cannot compile across devices
    (https://www.tensorflow.org/xla/known_issues)."""
    distributed = not isinstance(strategy, type(tf.distribute.get_strategy())) or \
        strategy.num_replicas_in_sync > 1
    if value == "auto":
        return not distributed
    if value and distributed:
        raise SpecError("train config 'jit_compile' = true does not work under a distribution "
                        "strategy (XLA cannot compile variables placed on several devices); "
                        "use jit_compile='auto' or false")
    return bool(value)


class Trainer:
    """Builds and compiles the model under the strategy; :meth:`fit` runs ``model.fit``
    into the run directory ``out_dir`` with our callbacks, Keras' and ``callbacks``."""

    def __init__(self, spec, task, cfg, out_dir, task_name="task", task_config=None, callbacks=(),
                 task_object_record=None):
        self.cfg, self.task, self.out_dir = cfg, task, out_dir
        self.task_name, self.task_config = task_name, task_config or {}
        # config.json's "task_object" entry for a task object that cannot be rebuilt (runs.task_record)
        self.task_object_record = task_object_record
        self.user_callbacks = list(callbacks)
        keras.utils.set_random_seed(cfg.seed)
        self.strategy = make_strategy(cfg.strategy)
        # in a cluster every worker runs the same steps (saving included: reading
        # distributed variables is collective); only the chief writes the real run
        self.chief = is_chief(self.strategy)
        write_dir = out_dir if self.chief or out_dir is None else tempfile.mkdtemp(prefix="taylorformer-worker-")
        self.run_dir = RunDirectory(write_dir)
        self.resumed = False  # restore_latest: fit continues the run already in out_dir
        self.evaluation = None  # the final evaluation of the run (finish_run)
        overrides = {"dim_x": task.dim_x, "dim_y": task.dim_y}
        if cfg.dtype_policy:
            overrides["dtype_policy"] = cfg.dtype_policy
        # a task may prefer options the spec leaves open (forecasting: standardise "window")
        self.spec = resolve_spec(spec, task_defaults=getattr(task, "model_defaults", None), **overrides)
        with self.strategy.scope():
            self.model = build_model(self.spec)
            if cfg.num_permutations and not self.model.causal:
                raise SpecError("train config 'num_permutations' applies to autoregressive models; "
                                f"{self.spec['kind']!r} models ignore the target order")
            optimizer = keras.optimizers.AdamW(learning_rate=learning_rate_schedule(cfg),
                                               weight_decay=cfg.weight_decay,
                                               global_clipnorm=cfg.clip_norm)
            self.model.compile(optimizer=optimizer,
                               jit_compile=resolve_jit_compile(cfg.jit_compile, self.strategy),
                               num_permutations=cfg.num_permutations,
                               skip_non_finite=cfg.nan_policy == "skip", permutation_seed=cfg.seed)
            self.model.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            self.skipped = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_steps")
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.model.optimizer,
                                              step=self.step, skipped=self.skipped)
        self.attach_data_record()

    def attach_data_record(self):
        """Give the model its task's normaliser and a model card
        (:mod:`taylorformer.normaliser`, :mod:`taylorformer.model_card`), saved with it in
        ``best.keras`` and ``model.keras``. A task whose output map is not affine gets no
        normaliser (a warning says so): its model works in the model's units."""
        from taylorformer.model_card import build_card
        from taylorformer.normaliser import Normaliser

        record = {"name": self.task_name, "config": self.task_config or None}
        try:
            normaliser = Normaliser.from_task(self.task, self.model.dim_x, self.model.dim_y)
            normaliser.task = record
        except SpecError as exc:
            warnings.warn(f"the model is saved without a normaliser ({exc}): predict, evaluate and "
                          "plot will work in the model's units", stacklevel=3)
            normaliser = None
        self.model.normaliser = normaliser
        card = build_card(self.task, dataclasses.asdict(self.cfg))
        card["data"].update(task=record["name"], task_config=record["config"])
        self.model.model_card = card

    @property
    def optimizer(self):
        return self.model.optimizer

    # ---------------------------------------------------------------- run files
    def write_run_files(self):
        record = {"train": dataclasses.asdict(self.cfg), "task": self.task_name,
                  "task_config": self.task_config}
        if self.task_object_record:
            record["task_object"] = self.task_object_record
        self.run_dir.write_definition(self.spec, record)

    def check_weights_finite(self):
        """Raise if a weight is NaN/inf (a diverged update); nothing was saved from it."""
        if not run_callbacks.weights_finite(self.model):
            raise FloatingPointError(
                f"the weights became non-finite by step {int(self.step.numpy())}; stopped without "
                f"saving, so the checkpoints in {self.out_dir} still hold the last good weights "
                "(resume with --resume). Lower the learning rate, check the data, or use "
                "nan_policy='skip'.")

    @property
    def steps_done(self):
        """The run's optimizer steps so far (fewer than ``steps`` after a time budget ran out)."""
        return int(self.step.numpy())

    def restore_latest(self):
        """Restore the newest intact checkpoint (see :meth:`RunDirectory.restore_latest`);
        :meth:`fit` then continues that run. Returns its step."""
        self.run_dir.restore_latest(self.checkpoint)
        self.resumed = True
        return int(self.step.numpy())

    def compiled_step(self):
        """``batch -> logs``: one training step (``model.train_step``, XLA as compiled) on one
        batch outside ``fit``, for benchmarks and profiles on one device."""
        return tf.function(self.model.train_step, jit_compile=self.model.jit_compile)

    # ------------------------------------------------------------------- fit
    def _train_data(self, start):
        kwargs = {"batch_size": self.cfg.batch_size, "seed": self.cfg.seed}
        if "start" in inspect.signature(self.task.dataset).parameters:
            return self.task.dataset("train", start=start, **kwargs)
        return self.task.dataset("train", **kwargs).skip(start)  # third-party task without ``start``

    def _val_data(self):
        return self.task.dataset("val", batch_size=self.cfg.batch_size, num_batches=self.cfg.val_batches)

    def callbacks(self):
        """Our callbacks (in this order), then TensorBoard, then the user's."""
        cfg, run = self.cfg, self.run_dir
        best = max((float(r["val_loglik"]) for r in run.metrics_rows()), default=-math.inf)
        out = [] if cfg.nan_policy == "skip" else [keras.callbacks.TerminateOnNaN()]
        out += [run_callbacks.StepCounter(self.step, self.skipped, cfg.steps)]
        if cfg.time_budget is not None:
            out.append(run_callbacks.TimeBudget(cfg.time_budget, cfg.budget_clock))
        out += [run_callbacks.RunCheckpoints(run, self.checkpoint, self.step, cfg.checkpoint_every,
                                             cfg.keep_checkpoints),
                run_callbacks.MetricsLog(run, self.step, self.skipped),
                run_callbacks.BestModel(run, "val_loglik", best)]
        if cfg.tensorboard:
            log_dir = run.file("tensorboard")
            out.append(keras.callbacks.TensorBoard(log_dir=log_dir, write_graph=False))
            if can_plot(self.task):
                batch = next(iter(self.task.dataset("val", batch_size=4, num_batches=1)))
                out.append(run_callbacks.PredictionImages(os.path.join(log_dir, "validation"),
                                                          self.task, batch,
                                                          title=f"{self.task_name}: {self.model.name}"))
        return out + self.user_callbacks

    def fit(self, verbose=1):
        """Train from the current step to ``cfg.steps`` (or the time budget); returns the
        metric rows logged. ``verbose``: Keras' (1 progress bar, 2 a line per epoch).

        The run directory is locked for the whole run (:meth:`RunDirectory.open_run`): a
        new run (no :meth:`restore_latest`) needs a directory that holds no run."""
        with self.run_dir.open_run(resume=self.resumed):
            self.resumed = True  # from here on this trainer's run lives in out_dir
            rows = self._fit_locked(verbose)
        if not self.chief:
            shutil.rmtree(self.run_dir.path, ignore_errors=True)
        return rows

    def _fit_locked(self, verbose):
        cfg = self.cfg
        done = int(self.step.numpy())
        self.run_dir.truncate_metrics(done)  # rows after the restored checkpoint are redone
        self.write_run_files()
        rows_before = len(self.run_dir.metrics_rows())
        if done < cfg.steps:
            first_epoch = done // cfg.val_every
            epochs = first_epoch + math.ceil((cfg.steps - done) / cfg.val_every)
            with self.strategy.scope():
                history = self.model.fit(self._train_data(done), validation_data=self._val_data(),
                                         steps_per_epoch=cfg.val_every, epochs=epochs,
                                         initial_epoch=first_epoch, callbacks=self.callbacks(),
                                         verbose=verbose, shuffle=False)
            losses = history.history.get("loss", [])
            if losses and not math.isfinite(losses[-1]) and cfg.nan_policy == "stop":
                raise FloatingPointError(
                    f"training loss became {losses[-1]} by step {int(self.step.numpy())}; stopped "
                    f"without saving, so the checkpoints in {self.out_dir} still hold the last good "
                    "weights (resume with --resume). Lower the learning rate, check the data, or "
                    "use nan_policy='skip'.")
        self.check_weights_finite()
        run_callbacks.record_metrics(self.model, self.run_dir)
        self.run_dir.save_model(self.model, "model.keras")
        return self.run_dir.metrics_rows()[rows_before:] if self.chief else []


def finish_run(trainer, task=None, evaluate=True, eval_batches=None, verbose=1):
    """End a training run as ``taylorformer train`` does: the chief (alone) evaluates the
    run's best model on ``eval_batches`` test batches (None: the task's test split),
    records the result in its model card (:func:`runs.record_evaluation`) and plots
    ``predictions.png``; with ``verbose`` it prints the run directory, the result (JSON)
    and its summary lines (an autoregressive model's headline: its sampled forecasts,
    :func:`taylorformer.model_card.evaluation_headline`). ``task``: the task object a run
    trained on one needs again.
    Returns the result; None when not evaluated or not the chief."""
    def say(text):
        if verbose:
            print(text, flush=True)

    if not trainer.chief:  # a non-chief worker of a cluster: the chief writes and evaluates
        return None
    say(f"run directory: {trainer.out_dir}")
    if not evaluate:
        return None
    result = runs.evaluate_run(trainer.out_dir, task=task, num_batches=eval_batches)
    runs.record_evaluation(trainer.out_dir, result)
    say(json_text(result))
    if "gap_to_gt" in result:
        say(f"log-likelihood {result['loglik']['mean']:.3f} +- {1.96 * result['loglik']['stderr']:.3f}; "
            f"exact GP ceiling {result['gt_loglik']['mean']:.3f}; gap {result['gap_to_gt']['mean']:.3f}")
    headline = evaluation_headline(result)
    if headline:  # an autoregressive model's: its sampled forecasts, not the teacher-forced metrics
        say(headline)
    if "verdict" in result:
        say(f"verdict: {result['verdict']}")
    say(f"plot: {runs.plot_run(trainer.out_dir, task=task)}")
    return result


def train(model="tnp-d", task="gp", task_config=None, out_dir=None, verbose=1, resume=None,
          callbacks=(), evaluate=True, eval_batches=None, **train_kwargs):
    """Train ``model`` (preset, dict or spec file) on a task, then :func:`finish_run`
    (``evaluate``, ``eval_batches``; ``verbose`` also prints its summary); returns the
    Trainer, its ``evaluation`` the final result (None when not evaluated).

    ``task``: a registered task name (with ``task_config``) or a task object (e.g. from
    :func:`taylorformer.tasks.from_dataframe`; anything with ``dataset``, ``dim_x`` and
    ``dim_y``). A task object that cannot be rebuilt from a name and config (in-memory
    data) is recorded by name and class; evaluating or plotting the run, or resuming it,
    then takes the same object again (``task=obj``; see :mod:`taylorformer.workflow.runs`).

    ``out_dir`` must be new, empty, or missing (see :mod:`taylorformer.workflow.run_dir`); without
    it a new ``runs/MODEL-TASK-TIME`` directory is created. ``resume=RUN_DIR`` continues
    that run from its newest intact checkpoint with its saved spec, task and training
    config (``train_kwargs`` may raise ``steps``).
    """
    check_bool("train", "evaluate", evaluate)
    check_int("train", "eval_batches", eval_batches, optional=True)  # before training, not after
    train_kwargs = renamed_options(train_kwargs, "train")
    known = [f.name for f in dataclasses.fields(TrainConfig)]
    unknown = sorted(set(train_kwargs) - set(known))
    if unknown:
        raise SpecError(f"unknown train config option {unknown[0]!r}; known: {', '.join(known)}")
    given = None if isinstance(task, str) else task  # a task object passed in
    if resume:
        run = RunDirectory(resume)
        saved, model = run.read_config(), run.read_spec()
        saved["train"] = renamed_options(saved["train"], run.file("config.json"))
        if set(saved["train"]) - set(known):
            raise RunDirectoryError(f"{run.file('config.json')} is corrupt: unknown train config "
                                    f"keys {sorted(set(saved['train']) - set(known))}")
        cfg = TrainConfig(**{**saved["train"], **train_kwargs})
        if given is None and "task_object" in saved:
            raise TaskError(f"run {resume} was trained on a task object "
                            f"({saved['task_object'].get('class')}) holding data a run directory "
                            "cannot store; resume it with the same object: train(task=task, resume=...)")
        if given is None:
            task, task_config = saved["task"], saved["task_config"]
        out_dir = resume
    else:
        cfg = TrainConfig(**train_kwargs)
    task_obj = runs.resolve_task(task, runs.stored_task_config(task, task_config)
                                 if resume and given is None else task_config)
    record = ({"task": task, "task_config": runs.recorded_task_config(task, task_config, task_obj)}
              if given is None else runs.task_record(given))
    if out_dir is None and cfg.strategy == "multi-worker":
        raise SpecError("--strategy multi-worker needs --out (out_dir): every worker must name "
                        "the same run directory, and a default name differs between machines")
    if out_dir is None:
        label = model if isinstance(model, str) else model.get("preset", "model")
        label = os.path.basename(label).split(".")[0]
        out_dir = RunDirectory.create_new(
            os.path.join("runs", f"{label}-{record['task']}-{time.strftime('%Y%m%d-%H%M%S')}")).path
    trainer = Trainer(model, task_obj, cfg, out_dir, task_name=record["task"],
                      task_config=record["task_config"], callbacks=callbacks,
                      task_object_record=record.get("task_object"))
    if resume:
        trainer.restore_latest()
    trainer.fit(verbose=verbose)
    trainer.evaluation = finish_run(trainer, task=given, evaluate=evaluate, eval_batches=eval_batches,
                                    verbose=verbose)
    return trainer
