"""Replication of published table rows: one registered row per number a paper reports.

A :class:`Row` (registry kind ``experiment``, hook ``register_experiments``) holds
everything needed to reproduce one published number: the paper, table and protocol, the
model (a preset plus spec overrides), the task (a registered name plus config), the
paper's training protocol (:class:`Training`), the evaluation protocol
(:class:`Evaluation`), the metric and the paper's value, the ``small`` budget
(:class:`SmallBudget`: a documented fraction of the paper's training; what each recorded
run took is its line's ``wall_s``) and notes on every place where the paper is silent. The
papers' rows are registered by :mod:`taylorformer_replication.papers`; a third-party plugin
adds rows the same way::

    from taylorformer.hookspecs import hookimpl
    from taylorformer_replication import register_rows

    @hookimpl
    def register_experiments(register):
        register_rows(register, MY_ROWS)

:func:`replicate` trains a row into a run directory (through
:func:`taylorformer.workflow.training.train`; calling it again with the same ``out`` resumes or
finishes that run), evaluates exactly the row's protocol, and appends one line to a
results CSV (:data:`RESULT_COLUMNS`, written atomically). Rows that share ``run`` (e.g. the
NLL and the MSE of one forecasting model) share one training run. :func:`score_baselines`
scores a row's baselines (:mod:`taylorformer.workflow.baselines`) on the same tasks into a baselines
CSV (:data:`BASELINE_COLUMNS`). :func:`list_rows` gives the rows with the last value and
baseline recorded for each and their :func:`status`; :func:`markdown_table` renders them
(docs/replication.md); :mod:`taylorformer_replication.command` is ``taylorformer replicate``.

Metrics (:data:`METRICS`) are computed per task and summarised as the mean and its
standard error (:func:`taylorformer.workflow.baselines.summarise`: iid over independently drawn
tasks, batch means over blocks of overlapping forecasting windows; the line's
``stderr_method`` names it): ``loglik`` (mean log-likelihood per target point,
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
import re
import shlex
import subprocess
import tempfile
import time
import warnings

from taylorformer import registry
from taylorformer.checks import check_int
from taylorformer.errors import RunDirectoryError, SpecError, TaylorformerError, UnknownComponentError
from taylorformer.files import atomic_write_text
from taylorformer.spec import deep_merge
from taylorformer.workflow.run_dir import RunDirectory
from taylorformer_replication import authors_code
from taylorformer_replication.experiment import CEILINGS, format_value, printed_decimals

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
#: the project's recorded baselines, shipped with the package
RECORDED_BASELINES = os.path.join(os.path.dirname(RECORDED_RESULTS), "replication_baselines.csv")
DEFAULT_BASELINES = os.path.join(DEFAULT_ROOT, "baselines.csv")
#: columns of a results file before ``stderr_method`` and ``protocol`` (read as ``iid``, 1)
#: and the paired gap to a baseline (read as none)
LEGACY_RESULT_COLUMNS = ("row", "budget", "steps", "metric", "value", "stderr", "num_tasks", "paper_value",
                         "paper_error", "device", "wall_s", "version", "commit", "command", "date", "out_dir")
PAIRED_COLUMNS = ("paired_baseline", "paired_gap", "paired_stderr")
RESULT_COLUMNS = LEGACY_RESULT_COLUMNS + ("stderr_method", "protocol") + PAIRED_COLUMNS
#: the results columns of earlier releases -> the values their lines read with
EARLIER_RESULT_COLUMNS = {
    LEGACY_RESULT_COLUMNS: {"stderr_method": "iid", "protocol": "1", **dict.fromkeys(PAIRED_COLUMNS, "")},
    LEGACY_RESULT_COLUMNS + ("stderr_method", "protocol"): dict.fromkeys(PAIRED_COLUMNS, ""),
}
#: the forecast baselines (NumPy on the task's series, cheap): each forecasting result is
#: also paired with them window by window (:func:`paired_with_baselines`)
FORECAST_BASELINES = ("persistence", "seasonal-naive")
BASELINE_COLUMNS = ("row", "baseline", "metric", "value", "stderr", "stderr_method", "num_tasks", "protocol",
                    "wall_s", "commit", "command", "date")
#: the kinds of a row's status (:func:`status`); a result trained on less than the paper's
#: budget is never ``reproduced``: within the paper's tolerance it is ``level with paper``
STATUSES = ("reproduced", "level with paper", "within 2 se", "below paper", "above paper", "below baseline",
            "not run", "not comparable", "not implemented")


# ----------------------------------------------------------------------------- lookup
def get_row(row_id):
    """The registered row ``row_id`` (UnknownComponentError with close matches)."""
    return registry.get("experiment", row_id)


def rows():
    """Every registered row, by id."""
    return [registry.get("experiment", name) for name in registry.names("experiment")]


def implementation_gap(row):
    """Why ``row`` cannot be run here, or ``""`` where it can: its :attr:`Row.not_implemented`,
    else the model preset or task it names that the registry does not hold. Decided when it
    is asked, so a row whose preset a plugin registers later runs with no change to it."""
    if row.not_implemented:
        return row.not_implemented
    for kind, what, name in (("model", "model preset", row.model), ("task", "task", row.task),
                             ("task", "task", row.eval_task()[0])):
        try:
            registry.entry(kind, name)
        except UnknownComponentError:
            return f"no {what} {name!r} in the registry"
    return ""


def check_implemented(row):
    """SpecError naming the row and why, where it cannot be run (:func:`implementation_gap`)."""
    gap = implementation_gap(row)
    if gap:
        raise SpecError(f"row {row.id!r} is not implemented: {gap}")



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
    paper budget a run validates every ``steps / SMALL_VALIDATIONS`` steps (at least
    :data:`MIN_VALIDATION_GAP` apart), or every ``row.training.val_every`` steps where the
    row's protocol validates more often (the forecasting rows: every 100), on at most
    :data:`SMALL_VAL_BATCHES` batches (one in a run shorter than :data:`MIN_VALIDATION_GAP`
    steps), without TensorBoard logs."""
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
    changes to tracked files other than :data:`RECORDED_RESULTS` and
    :data:`RECORDED_BASELINES`, which recording a result changes), or ``"unknown"`` for an
    installed package outside git."""
    def git(*args):
        return subprocess.run(["git", "-C", os.path.dirname(RECORDED_RESULTS), *args], capture_output=True,
                              text=True, timeout=10, check=True).stdout

    try:
        commit = git("describe", "--always").strip()
        recorded = (os.path.basename(RECORDED_RESULTS), os.path.basename(RECORDED_BASELINES))
        changed = [line for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
                   if not line.endswith(recorded)]
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit + "-dirty" * bool(changed)) if commit else "unknown"


def portable_path(path):
    """``path`` as a recorded command names it: relative to the working directory where it
    lies inside it (a command recorded in the project's results must not name the machine's
    folders), else as given."""
    relative = os.path.relpath(os.path.abspath(path))
    return path if relative.split(os.sep)[0] == os.pardir else relative


def command_line(row_id, budget, out=None, results=None, eval_tasks=None, task_config=None, xla=None,
                 batch_size=None, model_overrides=None):
    """The ``taylorformer replicate`` command that repeats a call (paths as :func:`portable_path`)."""
    args = ["taylorformer", "replicate", row_id, "--budget", str(budget)]
    for flag, value in (("--out", out), ("--results", results)):
        if value is not None:
            args += [flag, portable_path(str(value))]
    for flag, value in (("--eval-tasks", eval_tasks), ("--batch-size", batch_size)):
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
NUMERIC_COLUMNS = {"steps": int, "value": float, "stderr": float, "num_tasks": int, "paper_value": float,
                   "protocol": int, "paired_gap": float, "paired_stderr": float}


def read_results(path, columns=RESULT_COLUMNS):
    """The results CSV at ``path`` as a list of dicts (``[]`` when it does not exist).
    RunDirectoryError naming the file (and the line) when it is a directory, not UTF-8
    text (a binary file), not a CSV, its header is not ``columns`` (a results file of
    earlier columns reads with the defaults :data:`EARLIER_RESULT_COLUMNS` gives them: the
    oldest with ``stderr_method`` ``iid`` and ``protocol`` 1, none paired), or a line has
    the wrong number of fields or a non-number in :data:`NUMERIC_COLUMNS` (empty: not
    recorded)."""
    if not os.path.lexists(path):
        return []
    kind = "replication" if columns == RESULT_COLUMNS else "baseline"
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
    earlier = EARLIER_RESULT_COLUMNS.get(tuple(fields or ())) if columns == RESULT_COLUMNS else None
    if tuple(fields or ()) != columns and earlier is None:
        raise RunDirectoryError(f"results file {path} has columns {fields}, not the "
                                f"{kind} columns {list(columns)}; pass another --results")
    for number, line in enumerate(lines, start=2):
        problem = None
        if None in line or None in line.values():
            problem = "wrong number of fields"
        else:
            for column, kind_of in NUMERIC_COLUMNS.items():
                try:
                    kind_of(line.get(column) or "0")  # empty: not recorded
                except ValueError:
                    problem = f"{column} {line[column]!r} is not a number"
                    break
        if problem:
            raise RunDirectoryError(f"results file {path} is malformed at line {number} ({problem}); "
                                    "fix or remove that line, or pass another --results")
        if earlier is not None:
            line.update(earlier)
    return lines


def check_results_file(path, columns=RESULT_COLUMNS):
    """Everything :func:`append_result` needs, checked before any training: the file
    reads (:func:`read_results`) and a file can be written in its directory (created
    where missing: its nearest existing ancestor must be a writable directory).
    RunDirectoryError naming the file otherwise."""
    read_results(path, columns)
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


def append_result(path, record, columns=RESULT_COLUMNS):
    """Append ``record`` (a dict over :data:`RESULT_COLUMNS`) to the results CSV at ``path``,
    atomically: the file is rewritten through a temporary file and renamed, under an
    exclusive lock of its directory (two runs finishing at once both keep their line)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(read_results(path, columns) + [record])
        atomic_write_text(path, buffer.getvalue())
    finally:
        os.close(fd)  # releases the lock


def last_results(path):
    """row id -> the last line recorded for it in the results CSV at ``path``."""
    return {line["row"]: line for line in read_results(path)}


def baseline_lines(path):
    """``(row id, baseline)`` -> every line recorded for it in the baselines CSV at ``path``, in order."""
    lines = {}
    for line in read_results(path, BASELINE_COLUMNS):
        lines.setdefault((line["row"], line["baseline"]), []).append(line)
    return lines


def _number(text):
    """A number of a results line (float), or None where it is empty or NaN."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def overlapping_windows(row):
    """True where ``row`` evaluates windows of one series taken at a stride below their
    length (a forecasting task, whose class has ``window_starts``): their values are
    dependent, and an ``iid`` standard error over them is understated."""
    name, config = row.eval_task()
    factory = registry.get("task", name)
    if not hasattr(getattr(factory, "func", factory), "window_starts"):
        return False
    options = {**getattr(factory, "keywords", {}), **config}
    return int(options.get("eval_stride", 1)) < int(options.get("context_length", 96)) + int(options.get("horizon", 96))


def _ours(row, line, source):
    """The ``ours`` object of :func:`list_rows` for a results ``line`` (None: none).
    ``stderr_understated``: the line's standard error treats overlapping forecasting
    windows as independent (``iid``); it is shown but :func:`status` does not use it.
    ``paired``: ``{baseline, gap, stderr}``, the mean of ours minus that baseline over the
    same windows and its error bar (:func:`paired_with_baselines`), or None."""
    if line is None:
        return None
    steps = int(line["steps"] or 0)
    method = line.get("stderr_method") or "iid"
    paired = None
    if line.get("paired_baseline") and _number(line.get("paired_gap")) is not None:
        paired = {"baseline": line["paired_baseline"], "gap": _number(line["paired_gap"]),
                  "stderr": _number(line.get("paired_stderr"))}
    return {"value": _number(line["value"]), "stderr": _number(line["stderr"]), "stderr_method": method,
            "paired": paired,
            "stderr_understated": method.startswith("iid") and overlapping_windows(row),
            "num_tasks": int(line["num_tasks"] or 0),
            "budget": line["budget"], "steps": steps, "paper_steps": row.training.steps,
            "budget_fraction": steps / row.training.steps, "wall_s": _number(line["wall_s"]),
            "protocol": int(line.get("protocol") or 1), "device": line["device"], "commit": line["commit"],
            "command": line["command"], "date": line["date"], "source": source}


def _baseline(row, lines, num_tasks=None):
    """``(baseline object or None, reason)`` of :func:`list_rows`: of the row's baselines
    recorded under its protocol (per baseline the last line scored on ``num_tasks`` tasks,
    ours' count, where there is one, else the last line), the best reference (a baseline
    to beat), else a ceiling. ``same_tasks``: whether it scored the tasks ours did (None:
    ours not run); :func:`status` compares ours only with a baseline on the same tasks."""
    if not row.baselines:
        return None, row.no_baseline or "the row names no baseline"
    found = []
    for name in row.baselines:
        current = [ln for ln in lines.get((row.id, name), ())
                   if int(ln.get("protocol") or 1) == row.protocol_version and _number(ln["value"]) is not None]
        same = [ln for ln in current if int(ln["num_tasks"] or 0) == num_tasks]
        if not current:
            continue
        line = (same or current)[-1]
        found.append({"name": name, "kind": "ceiling" if name in CEILINGS else "reference",
                      "value": _number(line["value"]), "stderr": _number(line["stderr"]),
                      "stderr_method": line["stderr_method"], "num_tasks": int(line["num_tasks"] or 0),
                      "same_tasks": None if num_tasks is None else bool(same), "command": line["command"]})
    if not found:
        return None, (f"{', '.join(row.baselines)} not scored here under protocol {row.protocol_version}: "
                      f"`taylorformer replicate {row.id} --baseline` scores it")
    sign = 1 if row.higher_is_better else -1
    references = [b for b in found if b["kind"] == "reference"]
    return max(references or found, key=lambda b: sign * b["value"]), ""


def _gap_se(*errors):
    """``sqrt(sum e^2)`` of the standard errors given (None and NaN count as 0)."""
    return math.sqrt(sum(e * e for e in errors if e is not None and math.isfinite(e)))


def status(row, ours, baseline, earlier=None):
    """``(status, reason)`` of ``row`` (:data:`STATUSES`), given ``ours``, ``baseline`` and
    ``earlier`` as :func:`list_rows` gives them. In order: ``not implemented`` (why:
    :func:`implementation_gap`), ``not comparable`` (the row says
    why), ``not run`` (no result under the row's protocol version; ``earlier``, a result
    under an older one, is named with how that protocol differed), ``below baseline``
    (worse than a reference baseline by more than twice the standard error of the gap: the
    paired one, ``ours["paired"]``, where the line has it for that baseline, else the two
    means' combined standard error; a baseline scored on other tasks than ours, ``same_tasks``
    False, is not compared and the reason says so), ``reproduced`` (within the paper's ``+-``, or within
    half a unit of its last printed digit where it prints none, :func:`printed_decimals`;
    ``level with paper`` where ``ours`` trained on less than the paper's budget), ``within 2 se`` (within
    twice our standard error), ``below paper`` / ``above paper`` (worse / better than the
    paper beyond that); the reasons of these four end with the paired gap where there is one.
    The paper's value is :attr:`Row.paper_comparable` (rescaled where its code scaled it).
    "Below" and "above" mean worse and better: for an NLL or MSE, below is higher. A
    standard error that is missing (fewer than two blocks of windows) or understated (``iid``
    over overlapping windows, ``ours["stderr_understated"]``) counts as unknown: the gaps
    are then compared without it, and the reason says so."""
    gap = implementation_gap(row)
    if gap:
        return "not implemented", gap
    if row.not_comparable:
        return "not comparable", row.not_comparable
    if ours is None or ours["value"] is None:
        if earlier is not None:
            why = row.earlier_protocols.get(earlier["protocol"], "")
            return "not run", (f"no result under protocol {row.protocol_version}; the recorded "
                               f"{earlier['value']:.4g} ran under protocol {earlier['protocol']}"
                               + (f" ({why})" if why else "") + ", not comparable")
        return "not run", "no result recorded"
    sign = 1 if row.higher_is_better else -1
    value, stderr = ours["value"], None if ours.get("stderr_understated") else ours["stderr"]
    paired_text = None
    if baseline is not None and baseline["kind"] == "reference" and baseline.get("same_tasks") is False:
        paired_text = (f"{baseline['name']} scored {baseline['num_tasks']} tasks, ours {ours['num_tasks']}: "
                       "not compared")
    elif baseline is not None and baseline["kind"] == "reference":
        paired = ours.get("paired")
        if paired and paired["baseline"] == baseline["name"] and paired["stderr"] is not None:
            paired_text = (f"paired window by window ours - {baseline['name']} = "
                           f"{paired['gap']:+.3g} +- {paired['stderr']:.2g}")
            if sign * paired["gap"] < -2 * paired["stderr"]:
                return "below baseline", (f"{baseline['name']} scores {baseline['value']:.4g} on the same tasks, "
                                          f"ours {value:.4g}; {paired_text}")
        elif sign * (value - baseline["value"]) < -2 * _gap_se(stderr, baseline["stderr"]):
            unknown = [f"{who} {'understated' if understated else 'not estimable'}" for who, error, understated in
                       (("ours", stderr, ours.get("stderr_understated")), ("the baseline's", baseline["stderr"], False))
                       if error is None or not math.isfinite(error)]
            return "below baseline", (f"{baseline['name']} scores {baseline['value']:.4g} on the same tasks, "
                                      f"ours {value:.4g}" + (f" (compared without error bars: {', '.join(unknown)})"
                                                             if unknown else ""))
    paper, error = row.paper_comparable
    tolerance = error if error else 0.5 * 10 ** -printed_decimals(row) / (row.paper_scale or 1.0)
    gap = sign * (value - paper)
    paired_note = f"; {paired_text}" if paired_text else ""
    if abs(gap) <= tolerance:
        within = f"within the paper's {'+-' if error else 'rounding'} {tolerance:.2g}{paired_note}"
        if ours.get("budget_fraction", 1.0) < 1:
            return "level with paper", f"{within}; trained on less than the paper's budget, so not reproduced"
        return "reproduced", within
    if stderr is not None and abs(gap) <= 2 * stderr:
        return "within 2 se", f"the gap {gap:+.3g} is within twice our standard error {stderr:.2g}{paired_note}"
    return ("above paper" if gap > 0 else "below paper"), (f"{'better' if gap > 0 else 'worse'} by {abs(gap):.3g}"
                                                           f"{paired_note}")


def status_label(kind, ours):
    """The status as shown: ``kind`` (:data:`STATUSES`), followed by the fraction of the
    paper's training steps ``ours`` ran where it is below the paper's budget
    (``below paper at 0.2% of the budget``)."""
    fraction = (None if ours is None or kind in ("not run", "not comparable", "not implemented")
                else ours.get("budget_fraction"))
    if fraction is None or fraction >= 1:
        return kind
    return f"{kind} at {100 * fraction:.2g}% of the budget"


def _by_row(path):
    """row id -> every line for it in the results CSV at ``path``, in order."""
    lines = {}
    for line in read_results(path):
        lines.setdefault(line["row"], []).append(line)
    return lines


def list_rows(results=DEFAULT_RESULTS, recorded=RECORDED_RESULTS, baselines=DEFAULT_BASELINES,
              recorded_baselines=RECORDED_BASELINES, comparisons=authors_code.RECORDED_COMPARISONS):
    """Every registered row as a dict: its fields, ``higher_is_better``, ``last`` (the last
    line for it in ``results``, the user's runs) and ``recorded`` (the last line for it in
    ``recorded``, the project's results), each None when there is none; ``ours`` (the last
    line under the row's protocol version, of ``results``, else ``recorded``: value,
    stderr, stderr_method, budget, steps, paper_steps, budget_fraction, wall_s, protocol,
    ...; None: not run), ``earlier`` (the same for the last line under an earlier
    protocol, when ``ours`` is None), ``paper_comparable`` (``{value, error, why}`` where
    the paper's code scaled its value, else None), ``baseline`` (name, kind, value, stderr,
    ...; None with ``baseline_reason``) from ``baselines`` (the user's) over
    ``recorded_baselines`` (the project's), ``status`` (:func:`status_label`) with
    ``status_kind`` (:data:`STATUSES`) and ``status_reason``, and ``authors_code`` (the
    budget-matched comparison with the authors' code recorded in ``comparisons``,
    :func:`taylorformer_replication.authors_code.comparison`; None where there is none)."""
    mine, project = _by_row(results), _by_row(recorded)
    matched = authors_code.read_comparisons(comparisons)
    recorded_lines, user_lines = baseline_lines(recorded_baselines), baseline_lines(baselines)
    scored = {key: recorded_lines.get(key, []) + user_lines.get(key, [])
              for key in {**recorded_lines, **user_lines}}  # the user's lines last: they win
    listed = []
    for row in rows():
        ours = earlier = None
        for lines, source in ((mine.get(row.id, []), "results"), (project.get(row.id, []), "recorded")):
            if row.training is None:  # a row with no protocol has no result to read, whatever a file holds
                break
            current = [ln for ln in lines if int(ln.get("protocol") or 1) == row.protocol_version]
            ours = ours or (_ours(row, current[-1], source) if current else None)
            earlier = earlier or (_ours(row, lines[-1], source) if lines and not current else None)
        if ours is not None:
            earlier = None
        baseline, reason = _baseline(row, scored, None if ours is None else ours["num_tasks"])
        kind, why = status(row, ours, baseline, earlier)
        value, error = row.paper_comparable
        fields = dataclasses.asdict(row)
        if not row.not_implemented:  # listed only on the rows that have it
            del fields["not_implemented"]
        listed.append({**fields, "higher_is_better": row.higher_is_better,
                       "last": (mine.get(row.id) or [None])[-1], "recorded": (project.get(row.id) or [None])[-1],
                       "ours": ours, "earlier": earlier,
                       "paper_comparable": None if row.paper_scale is None else
                       {"value": value, "error": error, "why": row.paper_scale_why},
                       "baseline": baseline, "baseline_reason": reason, "status": status_label(kind, ours),
                       "status_kind": kind, "status_reason": why,
                       "authors_code": authors_code.comparison(row, matched.get(row.id))})
    return listed


def _cell(value, digits=4):
    return "" if value is None else f"{value:.{digits}g}"


def _paper_name(item):
    """The paper's short name: its title before the authors (``TE-TNP``)."""
    return item["paper"].split(" (")[0]


def _table_key(table):
    """Sort key of a table label: ``Table 2`` before ``Table 10``, numbers before text."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", table)]


def status_counts(listed):
    """``{(paper, table): {status kind: rows}}`` of :func:`list_rows` items, by paper name
    and each paper's tables in number order."""
    counts = {}
    for item in sorted(listed, key=lambda r: (_paper_name(r), _table_key(r["table"]))):
        kinds = counts.setdefault((_paper_name(item), item["table"]), {})
        kinds[item["status_kind"]] = kinds.get(item["status_kind"], 0) + 1
    return counts


def markdown_counts(listed):
    """The rows counted by status kind (:data:`STATUSES`): one line per paper and table, a
    line per paper and one for all rows (Markdown)."""
    counts = status_counts(listed)
    kinds = [k for k in STATUSES if any(k in c for c in counts.values())]
    lines = ["| paper | table | rows | " + " | ".join(kinds) + " |", "|---|---|---|" + "---|" * len(kinds)]

    def line(paper, table, tallies):
        total = sum(sum(t.values()) for t in tallies)
        cells = [str(sum(t.get(k, 0) for t in tallies)) for k in kinds]
        return f"| {paper} | {table} | {total} | " + " | ".join(cells) + " |"

    for paper in dict.fromkeys(p for p, _ in counts):
        tables = [(t, c) for (p, t), c in counts.items() if p == paper]
        lines += [line(paper, table, [c]) for table, c in tables]
        lines.append(line(f"**{paper}**", "**all**", [c for _, c in tables]))
    lines.append(line("**all papers**", "", list(counts.values())))
    return "\n".join(lines) + "\n"


def markdown_not_implemented(listed):
    """The rows that cannot run here, grouped by paper, table and reason: how many, their
    models and metrics (Markdown)."""
    groups = {}
    for item in listed:
        if item["status_kind"] == "not implemented":
            key = (_paper_name(item), item["table"], item["status_reason"])
            groups.setdefault(key, []).append(item)
    lines = ["| paper, table | rows | models | metrics | why not |", "|---|---|---|---|---|"]
    for (paper, table, why), items in sorted(groups.items(), key=lambda g: (g[0][0], _table_key(g[0][1]), g[0][2])):
        models = ", ".join(f"`{m}`" for m in dict.fromkeys(i["model"] for i in items))
        metrics = ", ".join(dict.fromkeys(i["metric"] for i in items))
        lines.append(f"| {paper} {table} | {len(items)} | {models} | {metrics} | {why} |")
    return "\n".join(lines) + "\n"


def markdown_authors_code(listed):
    """The rows with a budget-matched comparison with the authors' code (``authors_code``
    of :func:`list_rows`) as a Markdown table: per side the per-seed scores and their mean
    +- se, the gap, the paper's value and the status; '' where no row has one."""
    matched = sorted((item for item in listed if item["authors_code"]), key=lambda r: r["id"])
    if not matched:
        return ""

    def side(c, name):
        runs = " ".join(f"{r['value']:.3f}" for r in c[name]["runs"])
        spread = f"{c[name]['mean']:.3f} ± {c[name]['se']:.3f}" if c[name].get("se") is not None else "n/a"
        return f"{runs} | {spread}"

    kinds = [kind for kind in authors_code.STATUSES if any(i["authors_code"]["status_kind"] == kind for i in matched)]
    tally = ", ".join(f"{kind} {sum(i['authors_code']['status_kind'] == kind for i in matched)}" for kind in kinds)
    lines = [f"Rows compared with the authors' code at a matched budget ({len(matched)}: {tally}; both sides on "
             f"the same training batches and test tasks; {authors_code.TEST}):", "",
             "| row | authors' code | setting | metric | ours per seed | ours | authors' code per seed "
             "| authors' code | ours - authors' code | paper | status |", "|---" * 11 + "|"]
    for item in matched:
        c = item["authors_code"]
        gap = "n/a" if c["gap"] is None else f"{c['gap']:+.3f} ± {c['gap_se']:.3f}"
        paper = format_value(get_row(item["id"])).replace("+-", "±")
        lines.append(f"| `{item['id']}` | {c['authors_code']} | {c['setting']} | {c['metric']} "
                     f"| {side(c, 'ours')} | {side(c, 'authors')} | {gap} | {paper} | **{c['status']}** |")
    return "\n".join(lines) + "\n"


def markdown_table(listed=None):
    """The generated block of docs/replication.md, from :func:`list_rows`: the rows counted
    by status (:func:`markdown_counts`), one line per row that can run here (paper, ours
    and the baseline with their error bars, the budget fraction and the status), the
    comparisons with the authors' code (:func:`markdown_authors_code`), and the rows that
    cannot run, grouped by why (:func:`markdown_not_implemented`)."""
    listed = list_rows() if listed is None else listed
    runnable = [item for item in listed if item["status_kind"] != "not implemented"]
    lines = [f"Rows by status ({len(listed)} rows; from `taylorformer replicate --list --json`):", "",
             markdown_counts(listed), f"The {len(runnable)} rows that can run here:", "",
             "| row | paper, table | metric | paper | ours (stderr, method) | budget | wall | baseline "
             "| status |", "|---|---|---|---|---|---|---|---|---|"]
    for item in sorted(runnable, key=lambda r: r["id"]):
        paper = format_value(get_row(item["id"])).replace("+-", "±")
        if item["paper_comparable"]:
            paper += f" (per window: {item['paper_comparable']['value']:.4g})"
        ours, budget, wall = "not run", "", ""
        if item["ours"] is None and item["earlier"] is not None:
            ours = f"not run (protocol {item['earlier']['protocol']} gave {_cell(item['earlier']['value'])})"
        if item["ours"] is not None:
            o = item["ours"]
            method = o["stderr_method"] + (": not used for the status" if o.get("stderr_understated") else "")
            ours = f"{_cell(o['value'])} ± {_cell(o['stderr'], 2) or 'n/a'} ({method}, {o['num_tasks']} tasks)"
            budget = f"{o['steps']:,} / {o['paper_steps']:,} steps ({100 * o['budget_fraction']:.3g}%)"
            wall = "" if o["wall_s"] is None else f"{o['wall_s']:,.0f} s"
        b = item["baseline"]
        baseline = (f"{b['name']}{' (ceiling)' if b['kind'] == 'ceiling' else ''}: {_cell(b['value'])} ± "
                    f"{_cell(b['stderr'], 2) or 'n/a'} ({b['num_tasks']} tasks)" if b else f"none: {item['baseline_reason']}")
        state = f"**{item['status']}**: {item['status_reason']}"
        lines.append(f"| `{item['id']}` | {_paper_name(item)} {item['table']} | {item['metric']} "
                     f"| {paper} | {ours} | {budget} | {wall} | {baseline} | {state} |")
    matched = markdown_authors_code(listed)
    if matched:
        lines += ["", matched.rstrip("\n")]
    if len(runnable) < len(listed):
        lines += ["", f"The {len(listed) - len(runnable)} rows that cannot run here (status `not implemented`), "
                      "by why:", "", markdown_not_implemented(listed).rstrip("\n")]
    return "\n".join(lines) + "\n"


#: the markers around the generated table in docs/replication.md
TABLE_BEGIN = ("<!-- replication table: generated by `python -m taylorformer_replication.replication "
               "docs/replication.md`; do not edit -->")
TABLE_END = "<!-- end of the generated replication table -->"


def write_docs_table(path):
    """Replace the text between :data:`TABLE_BEGIN` and :data:`TABLE_END` in the Markdown
    file ``path`` by :func:`markdown_table` of the recorded results (atomically)."""
    text = open(path, encoding="utf-8").read()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        raise RunDirectoryError(f"{path} has no generated-table markers ({TABLE_BEGIN!r} ... {TABLE_END!r})")
    head, rest = text.split(TABLE_BEGIN, 1)
    tail = rest.split(TABLE_END, 1)[1]
    table = markdown_table(list_rows(results=RECORDED_RESULTS, baselines=RECORDED_BASELINES))
    atomic_write_text(path, f"{head}{TABLE_BEGIN}\n{table}{TABLE_END}{tail}")


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


def training_wall_s(out_dir):
    """Seconds of training in the run ``out_dir`` over all its sessions: the last
    ``elapsed_s`` of its ``metrics.csv`` (a resumed run's clock goes on from it)."""
    lines = RunDirectory(out_dir).metrics_rows()
    return float(lines[-1].get("elapsed_s") or 0.0) if lines else 0.0


def replicate(row_id, budget="small", out=None, results=DEFAULT_RESULTS, eval_tasks=None,
              task_config=None, jit_compile="auto", verbose=2, seed=0, batch_size=None,
              model_overrides=None, time_budget=None):
    """Train and evaluate the registered row ``row_id``; returns the results record (dict),
    or None when ``time_budget`` ran out first.

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

    ``time_budget``: stop training after this many seconds of wall time, checkpointed; the
    run is then neither evaluated nor recorded, and the same call again resumes it (a paper
    budget spread over several sessions). The record's ``wall_s`` is the run's training time
    over all its sessions plus this call's evaluation.
    """
    from taylorformer import __version__
    from taylorformer.workflow import runs, training

    row = get_row(row_id)
    check_implemented(row)
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
    if resume:
        trainer = training.train(resume=out_dir, steps=steps, verbose=verbose, evaluate=False,
                                 time_budget=time_budget)
    else:
        trainer = training.train(model=row.model_spec(), task=row.task, task_config=row.task_config,
                                 out_dir=out_dir, verbose=verbose, evaluate=False, seed=seed, jit_compile=jit_compile,
                                 time_budget=time_budget, **options)
    trained = trainer.steps_done
    if trained < steps:
        if verbose:
            print(f"{row.id}: stopped at step {trained} of {steps} (time budget); {out_dir} holds the "
                  f"checkpoints: the same command again resumes it", flush=True)
        return None
    started = time.time()
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
    from taylorformer.workflow.baselines import overlap_block, summarise

    value, stderr, stderr_method = summarise(values, overlap_block(task))
    paired = paired_with_baselines(row, values, num_tasks, task=task)
    record = {**paired, "row": row.id, "budget": label, "steps": steps, "metric": row.metric, "value": value,
              "stderr": stderr, "stderr_method": stderr_method, "protocol": row.protocol_version,
              "num_tasks": len(values), "paper_value": row.paper_value,
              "paper_error": "" if row.paper_error is None else row.paper_error,
              "device": device_name(), "wall_s": round(training_wall_s(out_dir) + time.time() - started, 1),
              "version": __version__,
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


def baseline_values(row, name, eval_tasks=None, task_config=None):
    """``(values [n], block)``: the per-task ``row.metric`` of baseline ``name`` (one of
    ``row.baselines``) on the row's evaluation tasks (the first ``eval_tasks``; default the
    paper's evaluation), and the block length of their error bar."""
    import numpy as np

    from taylorformer.workflow import baselines
    from taylorformer.task import make_task

    eval_name, eval_config = row.eval_task()
    task = make_task(eval_name, {**eval_config, **(task_config or {})})
    num_tasks = eval_tasks or row.evaluation.num_tasks
    kind = name.partition(":")[0]
    if kind in FORECAST_BASELINES:
        return _forecast_baseline(row, task, name, num_tasks), baselines.overlap_block(task)
    if kind == "context-mean":  # a model: scored by the model's metric function, on its batches
        batch_size = row.evaluation.batch_size
        floor = baselines.fit_context_mean_floor(
            task, row.metric, lambda model, task, metric, split, n: task_values(model, task, metric, split,
                                                                                 batch_size, n))
        values, _ = _task_values(baselines.ContextMean(floor), task, row.metric, row.evaluation.split,
                                 batch_size, num_tasks)
        return values, baselines.overlap_block(task)
    if kind == "exact-gp":
        from taylorformer.spec import resolve_spec

        joint = resolve_spec(row.model_spec()).get("kind") == "autoregressive"  # scored teacher-forced, jointly
        values = baselines.exact_gp_values(task, row.evaluation.split, row.evaluation.batch_size, num_tasks, joint)
    else:
        values = baselines.context_frequency_values(task, row.evaluation.split, row.evaluation.batch_size,
                                                    num_tasks)
    values = np.asarray(values, np.float64)
    return (-values if row.metric == "nll" and kind == "exact-gp" else values), baselines.overlap_block(task)


def _forecast_baseline(row, task, name, num_tasks):
    """``[n]`` per-window ``row.metric`` of the forecast baseline ``name`` (``persistence`` or
    ``seasonal-naive:LAG``) on the first ``num_tasks`` evaluation windows of ``task``."""
    from taylorformer.workflow import baselines

    kind, _, option = name.partition(":")
    if row.metric not in ("mse", "nll"):
        raise SpecError(f"row {row.id!r}: {kind} scores mse or nll, not {row.metric!r}")
    return baselines.forecast_values(task, row.metric, row.evaluation.split, lag=int(option or 1),
                                     num_tasks=num_tasks)


def paired_with_baselines(row, values, eval_tasks=None, task=None):
    """``{paired_baseline, paired_gap, paired_stderr}``: ours minus a baseline window by window.

    ``values [n]``: our per-task ``row.metric`` on the row's first ``eval_tasks`` evaluation
    tasks; ``task``: the row's evaluation task where the caller has it (else built here,
    only for a row with a forecast baseline). Of the row's :data:`FORECAST_BASELINES`, the
    one that scores best on the same windows is paired: the mean of ``values - baseline`` and
    its batch-means standard error (blocks of one window's overlap). Two scores of the same
    windows share most of their noise, so the paired error bar is far smaller than either
    score's. Empty strings for rows with no such baseline (the others cost as much as a
    model, or are fitted)."""
    import numpy as np

    from taylorformer.task import make_task
    from taylorformer.workflow.baselines import block_stderr, overlap_block

    names = [name for name in row.baselines if name.partition(":")[0] in FORECAST_BASELINES]
    if not names:
        return dict.fromkeys(PAIRED_COLUMNS, "")
    if task is None:
        task = make_task(*row.eval_task())
    num_tasks = eval_tasks or row.evaluation.num_tasks
    sign = 1 if row.higher_is_better else -1
    scored = {name: _forecast_baseline(row, task, name, num_tasks) for name in names}
    scored = {name: theirs for name, theirs in scored.items() if len(theirs) == len(values)}  # same windows only
    if not scored:
        return dict.fromkeys(PAIRED_COLUMNS, "")
    name, theirs = max(scored.items(), key=lambda item: sign * item[1].mean())
    gap = np.asarray(values, np.float64) - theirs
    return {"paired_baseline": name, "paired_gap": float(gap.mean()),
            "paired_stderr": block_stderr(gap, overlap_block(task))}


def score_baselines(row_id, results=DEFAULT_BASELINES, eval_tasks=None, task_config=None, verbose=1):
    """Score every baseline of row ``row_id`` on its evaluation tasks (the first
    ``eval_tasks``, default the paper's evaluation; ``task_config`` as in
    :func:`replicate`) and append one line each to the baselines CSV ``results``
    (:data:`BASELINE_COLUMNS`; None: not recorded). Returns the records."""
    from taylorformer.workflow.baselines import summarise

    row = get_row(row_id)
    check_implemented(row)
    check_int("replicate", "eval_tasks", eval_tasks, optional=True)
    if not row.baselines:
        raise SpecError(f"row {row.id!r} has no baseline: {row.no_baseline or 'none given'}")
    if results is not None:
        check_results_file(results, BASELINE_COLUMNS)
    records = []
    for name in row.baselines:
        started = time.time()
        values, block = baseline_values(row, name, eval_tasks, task_config)
        value, stderr, method = summarise(values, block)
        args = ["taylorformer", "replicate", row.id, "--baseline"]
        if results not in (None, DEFAULT_BASELINES):
            args += ["--baselines", portable_path(str(results))]
        if eval_tasks:
            args += ["--eval-tasks", str(eval_tasks)]
        if task_config:
            args += ["--task-config", json.dumps(task_config, sort_keys=True)]
        record = {"row": row.id, "baseline": name, "metric": row.metric, "value": value, "stderr": stderr,
                  "stderr_method": method, "num_tasks": len(values), "protocol": row.protocol_version,
                  "wall_s": round(time.time() - started, 1), "commit": source_commit(),
                  "command": shlex.join(args), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if verbose:
            print(f"baseline: {json.dumps(record, sort_keys=True)}", flush=True)
        if results is not None:
            append_result(results, record, BASELINE_COLUMNS)
        records.append(record)
    return records


def one_line(exc):
    """The message of ``exc`` on one line."""
    return " ".join(str(exc).split())


def comparison(row, record):
    """One line: the paper's value against ours (mean +- standard error) and the gap, to the
    paper's value on our scale (:attr:`Row.paper_comparable`: per window where its code
    divided by more, as the status compares)."""
    value, stderr = float(record["value"]), float(record["stderr"])
    paper = row.paper_comparable[0]
    gap = value - paper
    better = (gap > 0) == row.higher_is_better
    verdict = "at the paper's value" if gap == 0 else ("better than" if better else "worse than") + " the paper"
    rescaled = "" if paper == row.paper_value else f", per window {paper:.4g}"
    return (f"{row.id}: paper {format_value(row)} ({row.paper_error_kind or 'as printed'}{rescaled}); ours "
            f"{value:.4g} +- {stderr:.2g} (standard error over {record['num_tasks']} tasks, budget "
            f"{record['budget']}, {record['steps']} steps); {row.metric} {gap:+.4g}: {verdict}")


if __name__ == "__main__":  # python -m taylorformer_replication.replication DOC: regenerate the docs' table
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m taylorformer_replication.replication DOC.md (e.g. docs/replication.md)")
    write_docs_table(sys.argv[1])
