"""Finished runs: load the model and task of a run directory, evaluate, plot."""
import os

from taylorformer.checks import check_choice, check_int
from taylorformer.evaluation import check_evaluate_options, evaluate
from taylorformer.run_dir import RunDirectory
from taylorformer.task import make_task, plot_task


def load_run(run_dir, checkpoint="best", task=None, task_config=None):
    """(model, task, config) of a run; ``checkpoint`` is ``best`` or ``model`` (last; each
    falls back to the other, with a warning, where missing or corrupt)."""
    check_choice("run", "checkpoint", checkpoint, ("best", "model"))
    run = RunDirectory(run_dir)
    config = run.read_config()
    model = run.load_model(checkpoint)
    if task is None:
        task, task_config = config["task"], task_config or config.get("task_config")
    return model, make_task(task, task_config), config


def evaluate_run(run_dir, task=None, task_config=None, num_batches=None, split="test",
                 checkpoint="best", batch_size=None, num_samples=0, consistency=0):
    """Evaluation JSON dict of a run (see :func:`taylorformer.evaluation.evaluate`)."""
    check_evaluate_options(1 if batch_size is None else batch_size, num_batches, num_samples,
                           consistency)
    model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
    batch_size = config["train"]["batch_size"] if batch_size is None else batch_size
    result = evaluate(model, task_obj, split=split, batch_size=batch_size, num_batches=num_batches,
                      num_samples=num_samples, consistency=consistency)
    return {"run_dir": run_dir, "task": task or config["task"], **result}


def plot_run(run_dir, out=None, task=None, task_config=None, checkpoint="best", num_tasks=4,
             num_samples=0):
    """Plot predictions on the first test batch of a run (the task's own plot,
    :meth:`taylorformer.task.Task.plot`); returns the PNG path."""
    check_int("plot", "num_tasks", num_tasks)
    check_int("plot", "num_samples", num_samples, minimum=0)
    model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
    batch = next(iter(task_obj.dataset("test", batch_size=num_tasks, num_batches=1)))
    out = out or os.path.join(run_dir, "predictions.png")
    title = f"{config['task'] if task is None else task}: {model.spec.get('description') or model.name}"
    fig = plot_task(task_obj, model, batch, num_tasks=num_tasks, num_samples=num_samples, title=title)
    fig.savefig(out, dpi=110)
    return out
