"""Finished runs: load the model and task of a run directory, evaluate, plot.

A run records its task in ``config.json`` as a registered name and config, which
rebuild it. A run trained on a task *object* (``train(task=obj)``) is recorded the same
way when the object can be rebuilt (:func:`task_record`); one holding in-memory data
(a DataFrame, arrays, an xarray object) is recorded by name and class with
``"task_object"``, and loading, evaluating or plotting that run needs the same task
object again (``task=obj``): the error says so.
"""
import functools
import json
import os

import numpy as np

from taylorformer import registry
from taylorformer.bounded_sampling import parse_memory
from taylorformer.checks import check_choice, check_int
from taylorformer.errors import TaskError, UnknownComponentError
from taylorformer.evaluation import check_evaluate_options, evaluate
from taylorformer.run_dir import RunDirectory
from taylorformer.task import make_task, plot_task

#: what a task object needs to train and evaluate (see :mod:`taylorformer.task`)
TASK_PROTOCOL = ("dataset", "dim_x", "dim_y")


def check_task_object(task):
    """``task`` when it has the task protocol (``dataset``, ``dim_x``, ``dim_y``); else a
    TaskError."""
    missing = [a for a in TASK_PROTOCOL if not hasattr(task, a)]
    if missing:
        raise TaskError(f"task must be a registered task name or a task object (with "
                        f"{', '.join(TASK_PROTOCOL)}), got {type(task).__name__} without {missing}")
    return task


def _registered_class(name):
    """The class a registered task name builds (through ``functools.partial`` presets)."""
    try:
        obj = registry.get("task", name)
    except UnknownComponentError:
        return None
    while isinstance(obj, functools.partial):
        obj = obj.func
    return obj


def task_record(task):
    """``config.json`` entries of a task object: ``{"task": name, "task_config": config}``
    that rebuild it with :func:`taylorformer.task.make_task`, when it is an instance of the
    class registered under its ``name``, its ``get_config()`` is JSON and it does not say
    ``rebuildable = False``; else the same plus ``"task_object": {"class", "rebuildable":
    false}`` (``task_config`` None where not JSON)."""
    name = getattr(task, "name", None) or type(task).__name__
    config = task.get_config() if hasattr(task, "get_config") else None
    try:
        json.dumps(config)
    except (TypeError, ValueError):
        config = None
    rebuildable = (getattr(task, "rebuildable", True) and config is not None
                   and _registered_class(name) is type(task))
    record = {"task": name, "task_config": config}
    if not rebuildable:
        record["task_object"] = {"class": f"{type(task).__module__}.{type(task).__qualname__}",
                                 "rebuildable": False}
    return record


def resolve_task(task, task_config=None):
    """A task object from a registered name (+ config) or a task object (no config)."""
    if isinstance(task, str):
        return make_task(task, task_config)
    if task_config is not None:
        raise TaskError("task_config applies to a registered task name; a task object carries its "
                        f"own config, got task={type(task).__name__} and task_config={task_config!r}")
    return check_task_object(task)


def load_run(run_dir, checkpoint="best", task=None, task_config=None):
    """(model, task, config) of a run; ``checkpoint`` is ``best`` or ``model`` (last; each
    falls back to the other, with a warning, where missing or corrupt). ``task``: a task
    name (with ``task_config``) or a task object to use instead of the run's."""
    check_choice("run", "checkpoint", checkpoint, ("best", "model"))
    run = RunDirectory(run_dir)
    config = run.read_config()
    if task is None and "task_object" in config:
        raise TaskError(
            f"run {run_dir} was trained on a task object ({config['task_object'].get('class')}, "
            f"task {config['task']!r}) holding data a run directory cannot store; pass the same "
            "task object again: load_run/evaluate_run/plot_run(run_dir, task=task)")
    if task is None:
        task, task_config = config["task"], task_config or config.get("task_config")
    task_obj = resolve_task(task, task_config)
    spec = run.read_spec()
    if (task_obj.dim_x, task_obj.dim_y) != (spec.get("dim_x"), spec.get("dim_y")):
        raise TaskError(f"run {run_dir}: its model expects inputs of dim {spec.get('dim_x')} and outputs "
                        f"of dim {spec.get('dim_y')}, but the task gives dim_x={task_obj.dim_x}, "
                        f"dim_y={task_obj.dim_y}")
    return run.load_model(checkpoint), task_obj, config


def _task_label(task, config):
    return config["task"] if task is None else (task if isinstance(task, str) else task_record(task)["task"])


def evaluate_run(run_dir, task=None, task_config=None, num_batches=None, split="test",
                 checkpoint="best", batch_size=None, num_samples=0, consistency=0, memory_budget=None):
    """Evaluation JSON dict of a run (see :func:`taylorformer.evaluation.evaluate`)."""
    check_evaluate_options(1 if batch_size is None else batch_size, num_batches, num_samples,
                           consistency)
    if memory_budget is not None:
        parse_memory(memory_budget, "memory budget")  # fails before the run is loaded
    model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
    batch_size = config["train"]["batch_size"] if batch_size is None else batch_size
    result = evaluate(model, task_obj, split=split, batch_size=batch_size, num_batches=num_batches,
                      num_samples=num_samples, consistency=consistency, memory_budget=memory_budget)
    return {"run_dir": run_dir, "task": _task_label(task, config), **result}


def plot_run(run_dir, out=None, task=None, task_config=None, checkpoint="best", num_tasks=4,
             num_samples=0):
    """Plot predictions on the first test batch of a run (the task's own plot,
    :meth:`taylorformer.task.Task.plot`); returns the PNG path."""
    check_int("plot", "num_tasks", num_tasks)
    check_int("plot", "num_samples", num_samples, minimum=0)
    model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
    batch = next(iter(task_obj.dataset("test", batch_size=num_tasks, num_batches=1)))
    out = out or os.path.join(run_dir, "predictions.png")
    title = f"{_task_label(task, config)}: {model.spec.get('description') or model.name}"
    fig = plot_task(task_obj, model, batch, num_tasks=num_tasks, num_samples=num_samples, title=title)
    fig.savefig(out, dpi=110)
    return out


def predict_run(run_dir, inputs, output, context=None, checkpoint="best", levels=None,
                num_samples=0, chunk_size=4096, x_columns=None, y_columns=None, seed=0, verbose=1):
    """Predict with a run's model at the inputs of the file ``inputs`` given the context
    (in ``inputs`` or the file ``context``) and write them to ``output``
    (:mod:`taylorformer.query` has the formats); returns ``(output, number of points)``.
    Needs only the run's model, never its task's data."""
    from taylorformer.query import DEFAULT_LEVELS, check_format, predict_query, read_query, write_predictions

    check_choice("run", "checkpoint", checkpoint, ("best", "model"))
    check_format(output, (".npz", ".nc", ".csv"))  # a bad output name fails before any work
    query = read_query(inputs, context, x_columns=x_columns, y_columns=y_columns)
    model = RunDirectory(run_dir).load_model(checkpoint)
    result = predict_query(model, query, levels=DEFAULT_LEVELS if levels is None else levels,
                           num_samples=num_samples, chunk_size=chunk_size, seed=seed, verbose=verbose)
    write_predictions(output, query, result)
    return output, int(np.prod(query["xt"].shape[:2]))
