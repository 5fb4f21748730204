"""Replication of published table rows: one registered row per number a paper reports.

A :class:`Row` (registry kind ``experiment``, hook ``register_experiments``) holds
everything needed to reproduce one published number: the paper, table and protocol, the
model (a preset plus spec overrides), the task (a registered name plus config), the
paper's training protocol (:class:`Training`), the evaluation protocol
(:class:`Evaluation`), the metric and the paper's value, the ``small`` budget
(:class:`SmallBudget`: a documented fraction of the training that finishes in about 10
minutes on a laptop CPU) and notes on every place where the paper is silent. Each model
family's plugin registers its own papers' rows (``plugins/<family>/experiments.py``); a
third-party plugin adds rows the same way::

    from taylorformer.hookspecs import hookimpl
    from taylorformer.replication import register_rows

    @hookimpl
    def register_experiments(register):
        register_rows(register, MY_ROWS)

:func:`replicate` trains a row into a run directory (through
:func:`taylorformer.workflow.training.train`; calling it again with the same ``out`` resumes or
finishes that run), evaluates exactly the row's protocol, and appends one line to a
results CSV (:data:`RESULT_COLUMNS`, written atomically). Rows that share ``run`` (e.g. the
NLL and the MSE of one forecasting model) share one training run. :func:`list_rows` gives
the rows with the last value recorded for each.

Metrics (:data:`METRICS`) are computed per task and summarised as the mean and its
standard error over tasks: ``loglik`` (mean log-likelihood per target point,
:func:`taylorformer.models.inference.loglik`; teacher-forced for autoregressive models), ``nll``
(its negative) and ``mse`` (mean squared error of the predictive mean per target point;
for autoregressive models the teacher-forced one-step mean, the Taylorformer paper's MSE).
"""
import csv
import dataclasses
import fcntl
import io
import json
import math
import os
import platform
import shlex
import subprocess
import tempfile
import time
import warnings

from taylorformer import registry
from taylorformer.checks import check_int
from taylorformer.errors import RunDirectoryError, SpecError, TaylorformerError
from taylorformer.experiment import (  # noqa: F401 - the rows' records, re-exported for plugins
    METRICS, OPTIMIZERS, OWNER, SCHEDULES, Evaluation, Row, SmallBudget, Training, format_value,
    register_rows)
from taylorformer.workflow.run_dir import RunDirectory, atomic_write_text
from taylorformer.spec import deep_merge

BUDGETS = ("paper", "small")
#: most validation batches per validation under a budget other than ``paper``
SMALL_VAL_BATCHES = 8
#: most validations in a run under a budget other than ``paper``, and their least spacing
SMALL_VALIDATIONS = 4
MIN_VALIDATION_GAP = 50
DEFAULT_ROOT = os.path.join("runs", "replicate")
DEFAULT_RESULTS = os.path.join(DEFAULT_ROOT, "results.csv")
#: the project's recorded results (the table of docs/replication.md), shipped with the package
RECORDED_RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replication_results.csv")
RESULT_COLUMNS = ("row", "budget", "steps", "metric", "value", "stderr", "num_tasks", "paper_value",
                  "paper_error", "device", "wall_s", "version", "commit", "command", "date", "out_dir")


# ----------------------------------------------------------------------------- lookup
def get_row(row_id):
    """The registered row ``row_id`` (UnknownComponentError with close matches)."""
    return registry.get("experiment", row_id)


def rows():
    """Every registered row, by id."""
    return [registry.get("experiment", name) for name in registry.names("experiment")]



# ----------------------------------------------------------------------------- budgets
def budget_steps(row, budget):
    """``(label, steps)`` of ``budget``: ``"paper"``, ``"small"`` or a number of steps
    (an int, or its digits as a string); label ``paper``, ``small`` or ``N-steps``."""
    if budget in BUDGETS:
        return budget, row.training.steps if budget == "paper" else row.small.steps
    if isinstance(budget, str) and budget.isdigit():
        budget = int(budget)
    if not (isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1):
        raise SpecError(f"replicate 'budget' must be 'paper', 'small' or a number of steps >= 1, "
                        f"got {budget!r}")
    return f"{budget}-steps", budget


def train_options(row, steps, paper_budget):
    """:func:`taylorformer.workflow.training.train` options of ``row`` trained for ``steps``. The
    warm-up scales with ``steps``; the cosine schedule decays over ``steps``. Outside the
    paper budget a run validates at most :data:`SMALL_VALIDATIONS` times, at least
    :data:`MIN_VALIDATION_GAP` steps apart, on at most :data:`SMALL_VAL_BATCHES` batches (one
    in a run shorter than :data:`MIN_VALIDATION_GAP` steps), without TensorBoard logs."""
    t = row.training
    if paper_budget:
        val_every, val_batches = t.val_every, t.val_batches
    else:
        val_every = max(MIN_VALIDATION_GAP, math.ceil(steps / SMALL_VALIDATIONS))
        # a run shorter than one validation gap is a smoke test: one validation batch
        val_batches = min(t.val_batches, SMALL_VAL_BATCHES if steps >= MIN_VALIDATION_GAP else 1)
    val_every = min(val_every, t.val_every, steps)
    options = {"steps": steps, "batch_size": t.batch_size, "learning_rate": t.learning_rate,
               "schedule": t.schedule, "weight_decay": t.weight_decay, "clip_norm": t.clip_norm,
               "warmup_steps": min(t.warmup_steps * steps // t.steps, steps - 1),
               "num_permutations": t.num_permutations, "val_every": val_every,
               "checkpoint_every": val_every, "val_batches": val_batches, "tensorboard": paper_budget}
    if t.schedule == "cosine":
        options["min_learning_rate"] = t.min_learning_rate
    return options


def default_out(row, budget_label):
    """``runs/replicate/RUN-BUDGET``: rows sharing a run share its directory."""
    return os.path.join(DEFAULT_ROOT, f"{row.run_name}-{budget_label}")


# ----------------------------------------------------------------------------- metrics
def metric_function(model, metric):
    """A compiled ``batch -> [B]`` float64: ``metric`` (:data:`METRICS`) of each task of a
    batch (``tf.function``: eager evaluation of a tiled attention would run its tile loop
    in Python)."""
    import tensorflow as tf

    from taylorformer.batch import with_masks
    from taylorformer.models.inference import loglik, masked_point_mean

    @tf.function(reduce_retracing=True)
    def per_task(batch):
        if metric != "mse":
            ll = loglik(model, batch)
            return ll if metric == "loglik" else -ll
        batch = with_masks(batch)
        mean = tf.cast(model.distribution(batch).mean(), tf.float64)
        observed = tf.cast(batch["observed_t"], tf.float64)  # mean over the observed outputs
        sq_err = tf.reduce_sum(observed * (mean - tf.cast(batch["yt"], tf.float64)) ** 2, -1)
        return masked_point_mean(sq_err / tf.maximum(tf.reduce_sum(observed, -1), 1.0), batch["mask_t"])

    return per_task


def task_values(model, task, metric, split="test", batch_size=16, num_tasks=None):
    """float64 ``[n]``: ``metric`` (:data:`METRICS`) of each of the first ``num_tasks`` tasks
    (``None``: every task) of ``split`` that has an observed target, in batches of
    ``batch_size`` (of ``num_tasks`` where fewer). A task whose target values are all
    missing (NaN) has nothing to score and is left out (:func:`replicate` prints how many)."""
    values, _ = _task_values(model, task, metric, split, batch_size, num_tasks)
    return values


def _task_values(model, task, metric, split, batch_size, num_tasks):
    """``(values of the tasks with an observed target, number of tasks skipped)``."""
    import numpy as np

    from taylorformer.batch import observed_tasks, with_masks
    from taylorformer.errors import TaskError

    if num_tasks is not None:
        batch_size = min(batch_size, num_tasks)
    num_batches = None if num_tasks is None else math.ceil(num_tasks / batch_size)
    per_task = metric_function(model, metric)
    values, observed = [], []
    for batch in task.dataset(split, batch_size=batch_size, num_batches=num_batches):
        values.append(per_task(batch).numpy())
        observed.append(observed_tasks(with_masks(batch)).numpy() > 0.5)
    if not values:
        raise ValueError(f"task split {split!r} produced no tasks to evaluate")
    values, observed = np.concatenate(values), np.concatenate(observed)
    if num_tasks is not None:
        values, observed = values[:num_tasks], observed[:num_tasks]
    if not observed.any():
        raise TaskError(f"no task of split {split!r} has an observed target: all {observed.size} "
                        "task(s) have only missing (NaN) target values, so there is nothing to score")
    return values[observed], int((~observed).sum())


def mean_stderr(values):
    """``(mean, standard error)`` of ``values`` (stderr NaN for one value)."""
    import numpy as np

    values = np.asarray(values, np.float64)
    stderr = values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else float("nan")
    return float(values.mean()), float(stderr)


# ----------------------------------------------------------------------------- provenance
def device_name():
    """The accelerator training ran on: ``GPU: NAME`` (each GPU), else ``CPU: MODEL (N cores)``."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        names = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
        return "GPU: " + ", ".join(names)
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    except OSError:
        pass
    return f"CPU: {model} ({os.cpu_count()} cores)"


def source_commit():
    """``git describe`` of the checkout this package runs from (``-dirty`` with local
    changes to tracked files other than :data:`RECORDED_RESULTS`, which recording a result
    changes), or ``"unknown"`` for an installed package outside git."""
    def git(*args):
        return subprocess.run(["git", "-C", os.path.dirname(RECORDED_RESULTS), *args], capture_output=True,
                              text=True, timeout=10, check=True).stdout

    try:
        commit = git("describe", "--always").strip()
        changed = [line for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
                   if not line.endswith(os.path.basename(RECORDED_RESULTS))]
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit + "-dirty" * bool(changed)) if commit else "unknown"


def command_line(row_id, budget, out=None, results=None, eval_tasks=None, task_config=None, xla=None,
                 batch_size=None, model_overrides=None):
    """The ``taylorformer replicate`` command that repeats a call."""
    args = ["taylorformer", "replicate", row_id, "--budget", str(budget)]
    for flag, value in (("--out", out), ("--results", results), ("--eval-tasks", eval_tasks),
                        ("--batch-size", batch_size)):
        if value is not None:
            args += [flag, str(value)]
    for flag, value in (("--task-config", task_config), ("--model-overrides", model_overrides)):
        if value:
            args += [flag, json.dumps(value, sort_keys=True)]
    if xla is not None:
        args.append("--xla" if xla else "--no-xla")
    return shlex.join(args)


# ----------------------------------------------------------------------------- results
#: columns of a results line that hold numbers (checked when the file is read)
NUMERIC_COLUMNS = {"steps": int, "value": float, "stderr": float, "num_tasks": int, "paper_value": float}


def read_results(path):
    """The results CSV at ``path`` as a list of dicts (``[]`` when it does not exist).
    RunDirectoryError naming the file (and the line) when it is a directory, not UTF-8
    text (a binary file), not a CSV, its header is not :data:`RESULT_COLUMNS`, or a line
    has the wrong number of fields or a non-number in :data:`NUMERIC_COLUMNS` (empty: not
    recorded)."""
    if not os.path.lexists(path):
        return []
    if os.path.isdir(path):
        raise RunDirectoryError(f"results file {path} is a directory; pass a CSV file as --results")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames
            lines = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RunDirectoryError(f"results file {path} is not a readable CSV text file "
                                f"({type(exc).__name__}: {exc}); pass another --results") from None
    if tuple(fields or ()) != RESULT_COLUMNS:
        raise RunDirectoryError(f"results file {path} has columns {fields}, not the "
                                f"replication columns {list(RESULT_COLUMNS)}; pass another --results")
    for number, line in enumerate(lines, start=2):
        problem = None
        if None in line or None in line.values():
            problem = "wrong number of fields"
        else:
            for column, kind in NUMERIC_COLUMNS.items():
                try:
                    kind(line[column] or "0")  # empty: not recorded
                except ValueError:
                    problem = f"{column} {line[column]!r} is not a number"
                    break
        if problem:
            raise RunDirectoryError(f"results file {path} is malformed at line {number} ({problem}); "
                                    "fix or remove that line, or pass another --results")
    return lines


def check_results_file(path):
    """Everything :func:`append_result` needs, checked before any training: the file
    reads (:func:`read_results`) and a file can be written in its directory (created
    where missing: its nearest existing ancestor must be a writable directory).
    RunDirectoryError naming the file otherwise."""
    read_results(path)
    directory = os.path.dirname(os.path.abspath(path))
    existing = directory
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise RunDirectoryError(f"results file {path} cannot be written: {existing} is not a directory")
    try:  # a real probe (permissions, read-only mounts, quotas), removed at once
        with tempfile.NamedTemporaryFile(prefix=".tmp-probe-", dir=existing):
            pass
    except OSError as exc:
        raise RunDirectoryError(f"results file {path} cannot be written ({exc}); pass another "
                                "--results") from None
    return path


def append_result(path, record):
    """Append ``record`` (a dict over :data:`RESULT_COLUMNS`) to the results CSV at ``path``,
    atomically: the file is rewritten through a temporary file and renamed, under an
    exclusive lock of its directory (two runs finishing at once both keep their line)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=RESULT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(read_results(path) + [record])
        atomic_write_text(path, buffer.getvalue())
    finally:
        os.close(fd)  # releases the lock


def last_results(path):
    """row id -> the last line recorded for it in the results CSV at ``path``."""
    return {line["row"]: line for line in read_results(path)}


def list_rows(results=DEFAULT_RESULTS, recorded=RECORDED_RESULTS):
    """Every registered row as a dict: its fields, ``higher_is_better``, ``last`` (the last
    line for it in ``results``, the user's runs) and ``recorded`` (the last line for it in
    ``recorded``, the project's results); each None when there is none."""
    last, ours = last_results(results), last_results(recorded)
    return [{**dataclasses.asdict(row), "higher_is_better": row.higher_is_better, "last": last.get(row.id),
             "recorded": ours.get(row.id)} for row in rows()]


# ----------------------------------------------------------------------------- replicate
def _resolve_out(row, out, budget_label):
    """``(out_dir, resume)``: a directory holding a run resumes it; that run must be of the
    row's task and task config (RunDirectoryError otherwise)."""
    out = out or default_out(row, budget_label)
    run = RunDirectory(out)
    if not run.run_files():
        return out, False
    config = run.read_config()
    saved = (config.get("task"), json.dumps(config.get("task_config"), sort_keys=True))
    if saved != (row.task, json.dumps(row.task_config, sort_keys=True)):
        raise RunDirectoryError(f"{out} holds a run of task {saved[0]!r} with config {saved[1]}, not "
                                f"of row {row.id!r}; pass another --out")
    return out, True


def replicate(row_id, budget="small", out=None, results=DEFAULT_RESULTS, eval_tasks=None,
              task_config=None, jit_compile="auto", verbose=2, seed=0, batch_size=None,
              model_overrides=None):
    """Train and evaluate the registered row ``row_id``; returns the results record (dict).

    ``budget``: ``"paper"`` (the paper's steps and evaluation size), ``"small"`` (the row's
    :class:`SmallBudget`) or a number of steps (evaluated on the small budget's tasks).
    ``out``: the run directory (default ``runs/replicate/RUN-BUDGET``); one holding this
    row's run resumes it (and a finished run is only evaluated again). ``eval_tasks``
    overrides the number of evaluation tasks; ``task_config`` updates the task config of
    training and evaluation (e.g. a local ``path`` or image ``source``): both are recorded
    in the results' command. ``batch_size`` (training and evaluation) and ``model_overrides``
    (merged into the row's model spec, e.g. ``{"encoder": {"layers": 1}}``) depart from the
    paper's protocol, for a smaller device or a smoke test: they are recorded in the command.
    The record is appended to the CSV ``results`` (None: not recorded).
    """
    from taylorformer import __version__
    from taylorformer.workflow import runs, training

    row = get_row(row_id)
    label, steps = budget_steps(row, budget)
    check_int("replicate", "eval_tasks", eval_tasks, optional=True)
    check_int("replicate", "batch_size", batch_size, optional=True)
    for name, value in (("task_config", task_config), ("model_overrides", model_overrides)):
        if value is not None and not isinstance(value, dict):
            raise SpecError(f"replicate {name!r} must be a dict, got {value!r}")
    if results is not None:
        check_results_file(results)  # a wrong results file fails before any training
    extra = dict(task_config or {})
    if extra:
        row = dataclasses.replace(row, task_config={**row.task_config, **extra})
    if model_overrides:
        row = dataclasses.replace(row, model_overrides=deep_merge(row.model_overrides, model_overrides))
    options = train_options(row, steps, label == "paper")
    if batch_size is not None:
        options["batch_size"] = batch_size
    out_dir, resume = _resolve_out(row, out, label)
    started = time.time()
    if resume:
        training.train(resume=out_dir, steps=steps, verbose=verbose)
    else:
        training.train(model=row.model_spec(), task=row.task, task_config=row.task_config, out_dir=out_dir,
                       verbose=verbose, seed=seed, jit_compile=jit_compile, **options)
    eval_name, eval_config = row.eval_task()
    num_tasks = eval_tasks or (row.evaluation.num_tasks if label == "paper" else
                               min(row.small.eval_tasks, row.evaluation.num_tasks or row.small.eval_tasks))
    model, task, _ = runs.load_run(out_dir, "best", task=eval_name, task_config=eval_config)
    values, skipped = _task_values(model, task, row.metric, row.evaluation.split,
                                   batch_size or row.evaluation.batch_size, num_tasks)
    if skipped:
        warnings.warn(f"{row.id}: {skipped} evaluation task(s) have no observed target (all their target "
                      f"values are missing) and are left out; the value is over {len(values)} task(s)",
                      stacklevel=2)
    value, stderr = mean_stderr(values)
    record = {"row": row.id, "budget": label, "steps": steps, "metric": row.metric, "value": value,
              "stderr": stderr, "num_tasks": len(values), "paper_value": row.paper_value,
              "paper_error": "" if row.paper_error is None else row.paper_error,
              "device": device_name(), "wall_s": round(time.time() - started, 1), "version": __version__,
              "commit": source_commit(),
              "command": command_line(row.id, budget, out, results if results != DEFAULT_RESULTS else None,
                                      eval_tasks, extra, None if jit_compile == "auto" else jit_compile,
                                      batch_size, model_overrides),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "out_dir": out_dir}
    if verbose:  # on stdout before it is written: a result computed is never lost
        print(f"result: {json.dumps(record, sort_keys=True)}", flush=True)
    if results is not None:
        try:
            append_result(results, record)
        except (OSError, TaylorformerError) as exc:
            raise RunDirectoryError(f"results file {results}: the result could not be recorded "
                                    f"({one_line(exc)}); it is: {json.dumps(record, sort_keys=True)}") from exc
    return record


def one_line(exc):
    """The message of ``exc`` on one line."""
    return " ".join(str(exc).split())


def comparison(row, record):
    """One line: the paper's value against ours (mean +- standard error) and the gap."""
    value, stderr = float(record["value"]), float(record["stderr"])
    gap = value - row.paper_value
    better = (gap > 0) == row.higher_is_better
    verdict = "at the paper's value" if gap == 0 else ("better than" if better else "worse than") + " the paper"
    return (f"{row.id}: paper {format_value(row)} ({row.paper_error_kind or 'as printed'}); ours "
            f"{value:.4g} +- {stderr:.2g} (standard error over {record['num_tasks']} tasks, budget "
            f"{record['budget']}, {record['steps']} steps); {row.metric} {gap:+.4g}: {verdict}")
