"""Finished runs: load the model and task of a run directory, evaluate, plot, and predict,
place and export from its model file.

A run records its task in ``config.json`` as a registered name and config, which
rebuild it. A run trained on a task *object* (``train(task=obj)``) is recorded the same
way when the object can be rebuilt (:func:`task_record`); one holding in-memory data
(a DataFrame, arrays, an xarray object) is recorded by name and class with
``"task_object"``, and loading, evaluating or plotting that run needs the same task
object again (``task=obj``): the error says so.

Predicting (:func:`predict_run`, :func:`predict_field_run`), placing (:func:`place_run`)
and exporting (:func:`export_run`) need the model file alone, never the task: the data's
units, names and input layout are its normaliser's (``model.normaliser``,
:mod:`taylorformer.normaliser`), so they work on every run, one trained on a task object
included, and on a directory holding only a model file.
"""
import datetime
import functools
import json
import os
import warnings

import numpy as np

from taylorformer import registry
from taylorformer.prediction import calibration
from taylorformer.models.bounded_sampling import parse_memory
from taylorformer.checks import check_choice, check_int, check_memory, check_number
from taylorformer.errors import (BatchError, RunDirectoryError, SpecError, TaskError, TaylorformerError,
                                 UnknownComponentError)
from taylorformer.workflow.evaluation import (DEFAULT_SAMPLED_TASKS, check_evaluate_options, evaluate,
                                              units_normaliser)
from taylorformer.files import Outputs
from taylorformer.workflow.run_dir import RunDirectory
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


def changed_defaults(task_name):
    """``{option: earlier default}`` of the task registered as ``task_name`` (its class's
    ``changed_defaults``; empty for a task without one)."""
    return dict(getattr(_registered_class(task_name), "changed_defaults", None) or {})


def recorded_task_config(task_name, task_config, task_obj):
    """The ``task_config`` a run records: the user's, plus each option of the task's
    ``changed_defaults`` whose value differs from its earlier default (so the run rebuilds
    the same task after a later change of defaults too)."""
    config = dict(task_config or {})
    for option, earlier in changed_defaults(task_name).items():
        value = getattr(task_obj, option, earlier)
        if option not in config and value != earlier:
            config[option] = value
    return config


def stored_task_config(task_name, task_config):
    """A run's stored ``task_config`` completed with the earlier defaults of the task's
    ``changed_defaults``: a run written before a default changed did not record it."""
    return {**changed_defaults(task_name), **(task_config or {})}


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
        task, task_config = config["task"], task_config or stored_task_config(config["task"],
                                                                                config.get("task_config"))
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
                 checkpoint="best", batch_size=None, num_samples=None, consistency=0, memory_budget=None,
                 baselines=True, sampled_tasks=DEFAULT_SAMPLED_TASKS):
    """Evaluation JSON dict of a run (see :func:`taylorformer.workflow.evaluation.evaluate`;
    ``baselines``: the predictive baselines and the verdict beside the model; an
    autoregressive model's headline metrics are those of ``num_samples`` sampled forecast
    paths per window, default :data:`~taylorformer.workflow.evaluation.DEFAULT_SAMPLES`, on
    at most ``sampled_tasks`` windows)."""
    check_evaluate_options(1 if batch_size is None else batch_size, num_batches, num_samples,
                           consistency, sampled_tasks=sampled_tasks)
    if memory_budget is not None:
        parse_memory(memory_budget, "memory budget")  # fails before the run is loaded
    model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
    batch_size = config["train"]["batch_size"] if batch_size is None else batch_size
    result = evaluate(model, task_obj, split=split, batch_size=batch_size, num_batches=num_batches,
                      num_samples=num_samples, consistency=consistency, memory_budget=memory_budget,
                      baselines=baselines, sampled_tasks=sampled_tasks)
    return {"run_dir": run_dir, "task": _task_label(task, config), **result}


def cross_validate_run(run_dir, survey=None, folds=5, seed=0, checkpoint="best", x_columns=None,
                       y_columns=None, baselines=True):
    """:func:`taylorformer.workflow.cross_validation.cross_validate` of a run's model on a
    survey file (``.csv`` columns named as the model's inputs and outputs, or
    ``x_columns``/``y_columns``; ``.npz``/``.nc`` arrays ``xc``, ``yc``), in the data's
    units. ``survey`` defaults to the file the run's task read (``fitted-gp``'s ``path``)."""
    from taylorformer.prediction.query import read_query
    from taylorformer.tasks.series_inputs import series_layout
    from taylorformer.workflow.cross_validation import cross_validate

    model = load_model_file(run_dir, checkpoint)
    if survey is None:
        config = RunDirectory(run_dir).read_config() if os.path.isfile(os.path.join(run_dir, "config.json")) else {}
        survey = (config.get("task_config") or {}).get("path")
        if not isinstance(survey, str):
            raise SpecError(f"run {run_dir}: its task read no survey file; pass the survey to "
                            "cross-validate on (--survey FILE)")
    if model.normaliser is None:
        raise SpecError(f"run {run_dir}: its model file has no normaliser (written before taylorformer saved "
                        "one), so the survey's units cannot be mapped; retrain the run")
    if series_layout(model.normaliser) is not None:
        raise SpecError(f"run {run_dir} forecasts a series; cross-validation holds out points of a survey "
                        "(evaluate scores a series on its test windows)")
    names = (model.normaliser.x_names, model.normaliser.y_names)
    query = read_query(survey, survey, x_columns=x_columns, y_columns=y_columns, names=names, dtype=np.float64)
    if query["xc"].shape[0] != 1:
        raise BatchError(f"survey {survey}: holds {query['xc'].shape[0]} tasks; cross-validation takes one survey")
    return {"run_dir": run_dir, **cross_validate(model, query["xc"][0], query["yc"][0], folds=folds, seed=seed,
                                                 baselines=baselines, source=survey)}


def record_evaluation(run_dir, result):
    """Put ``result`` (:func:`evaluate_run` of the run's best model) in the model card of
    the run's ``best.keras`` as its final ``evaluation`` (``taylorformer train`` does, once
    it has evaluated the run it wrote; :func:`taylorformer.model_card.update_card`). A file
    without a card (written before cards) is left alone. Returns the files updated."""
    from taylorformer.model_card import update_card

    path = os.path.join(run_dir, "best.keras")
    if not os.path.isfile(path):  # evaluate_run fell back to model.keras
        path = os.path.join(run_dir, "model.keras")
    entry = {k: v for k, v in result.items() if k != "run_dir"}
    return [path] if os.path.isfile(path) and update_card(path, evaluation=entry) else []


def plot_run(run_dir, out=None, task=None, task_config=None, checkpoint="best", num_tasks=4,
             num_samples=0):
    """Plot predictions on the first test batch of a run (the task's own plot,
    :meth:`taylorformer.task.Task.plot`); returns the PNG path."""
    check_int("plot", "num_tasks", num_tasks)
    check_int("plot", "num_samples", num_samples, minimum=0)
    from taylorformer.plotting.saving import image_formats, save_figure

    out = os.fspath(out) if out else os.path.join(run_dir, "predictions.png")  # plot's own file of the run
    with Outputs(run_dir=run_dir) as outputs:
        image = outputs.file(out, "--out", image_formats())
        model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
        batch = next(iter(task_obj.dataset("test", batch_size=num_tasks, num_batches=1)))
        if num_samples:  # [S, B, Nt, Dy] float32 draws, and their float64 quantiles
            shape = np.shape(batch["yt"])
            check_memory("plot", f"{num_samples} sample paths of {shape[0]} task(s) x {shape[1]} target(s)",
                         3 * 8 * num_samples * int(np.prod(shape)), "plot fewer --samples")
        title = f"{_task_label(task, config)}: {model.spec.get('description') or model.name}"
        save_figure(plot_task(task_obj, model, batch, num_tasks=num_tasks, num_samples=num_samples,
                              title=title), image)
    return out


def check_levels(levels):
    """``levels`` as a tuple of floats: probabilities in (0, 1), each printing differently
    (a CSV column ``q<level>`` per level, 6 significant digits): a duplicate, or two levels
    that would share a column (0.1 and 0.1000001), is a SpecError naming both."""
    levels = tuple(levels)
    for q in levels:
        check_number("predict", "quantile level", q, low=0, high=1, low_open=True, high_open=True)
    seen = {}
    for q in levels:
        name = f"{float(q):g}"
        if name in seen:
            same = "is given twice" if float(seen[name]) == float(q) else f"and {seen[name]!r} both print as"
            raise SpecError(f"predict quantile level {q!r} {same} q{name}: give each level once, "
                            "distinct in its first 6 significant digits")
        seen[name] = q
    return tuple(float(q) for q in levels)


def predict_run(run_dir, inputs, output, context=None, checkpoint="best", levels=None,
                num_samples=0, chunk_size=4096, x_columns=None, y_columns=None, seed=0, verbose=1,
                recalibration=True):
    """Predict with a run's model at the inputs of the file ``inputs`` given the context
    (in ``inputs`` or the file ``context``) and write them to ``output``
    (:mod:`taylorformer.prediction.query` has the formats); returns ``(output, number of points)``.
    Needs only the run's model, never its task's data. With ``recalibration`` (default),
    the run's stored spread scale of ``checkpoint`` (``RUN_DIR/calibration.json``, from
    ``evaluate --recalibrate``), if any, is applied and written as ``spread_scale``
    (:func:`taylorformer.prediction.calibration.apply_spread_scale`)."""
    from taylorformer.checks import check_bool
    from taylorformer.prediction.query import (DEFAULT_LEVELS, predict_query, read_query, to_data_units,
                                               to_model_units, write_predictions)

    check_choice("run", "checkpoint", checkpoint, ("best", "model"))
    check_bool("predict", "recalibration", recalibration)
    levels = check_levels(DEFAULT_LEVELS if levels is None else levels)
    check_int("predict", "num_samples", num_samples, minimum=0)
    # never over what it reads or the run's own files; written in place when all went well
    with Outputs(reads=(inputs, context), run_dir=run_dir) as outputs:
        staged = outputs.file(output, "--output", (".npz", ".nc", ".csv"))
        model = load_model_file(run_dir, checkpoint)
        normaliser = model.normaliser
        names = None if normaliser is None else (normaliser.x_names, normaliser.y_names)
        try:
            query = read_query(inputs, context, x_columns=x_columns, y_columns=y_columns, names=names,
                               dtype=np.float32 if normaliser is None else np.float64)
        except TaylorformerError:
            raise
        except Exception as exc:  # noqa: BLE001 - a file the readers fail on (zip, HDF5, CSV, ...) is named
            files = f"the inputs file {inputs}" + (f" or the context file {context}" if context else "")
            raise BatchError(f"cannot read {files}: {type(exc).__name__}: {exc}") from exc
        check_predict_memory(query, levels, num_samples)
        record = calibration.load_recalibration(run_dir, checkpoint) if recalibration else None
        if normaliser is None:
            warnings.warn(f"{run_dir}: its model file has no saved normaliser (written before taylorformer "
                          "saved one): the inputs are given, and predictions written, in the model's units",
                          stacklevel=2)
            model_query = query
        else:
            model_query = to_model_units(query, normaliser, f"predict {inputs}")
        result = predict_query(model, model_query, levels=levels,
                               num_samples=num_samples, chunk_size=chunk_size, seed=seed, verbose=verbose)
        if record is not None:  # a spread scale is fitted in model units: applied before mapping back
            result = calibration.apply_spread_scale(result, record["scale"])
        if normaliser is not None:
            result = to_data_units(result, normaliser)
        write_predictions(staged, query, result, normaliser)
    return output, int(np.prod(query["xt"].shape[:2]))


def load_model_file(run_dir, checkpoint="best"):
    """The model of ``checkpoint`` (``best`` or ``model``) in the run directory ``run_dir``
    (or a directory holding only a model file), for the commands that need no task."""
    check_choice("run", "checkpoint", checkpoint, ("best", "model"))
    if not os.path.isdir(run_dir):
        raise RunDirectoryError(f"run directory {run_dir} does not exist")
    return RunDirectory(run_dir).load_model(checkpoint)


def predict_field_run(run_dir, grid, context, output, checkpoint="best", recalibration=True, plot=None,
                      **options):
    """:func:`taylorformer.prediction.fields.predict_field` with the model file of a run (its
    normaliser: units, inputs, training span) and its stored recalibration; ``output`` a
    new ``.nc`` file (never one of the run's or one it reads); ``plot``: an image of the
    maps too (:func:`taylorformer.plotting.fields.save_field_plot`). Both are checked before
    any work and put in place together (:class:`taylorformer.files.Outputs`). A model file
    without a normaliser is refused with an error saying so (its outputs would be the
    model's units under the data's names). Returns ``(output, cells)``."""
    from taylorformer.plotting.fields import save_field_plot
    from taylorformer.plotting.saving import image_formats
    from taylorformer.prediction.fields import predict_field

    with Outputs(reads=(grid, context), run_dir=run_dir) as outputs:
        staged = outputs.file(output, "--output", (".nc",))
        image = outputs.file(plot, "--plot", image_formats())
        model = load_model_file(run_dir, checkpoint)
        if model.normaliser is None:
            raise BatchError(f"{run_dir}: its model file has no normaliser (written before taylorformer saved one): "
                             "predict --grid cannot map the grid's coordinates and the context's values, which are "
                             "in the data's units, to the model's; train the run again, or use predict --input "
                             "with files in the model's units")
        record = calibration.load_recalibration(run_dir, checkpoint) if recalibration else None
        with predict_field(model, context, grid, staged,
                           spread_scale=None if record is None else record["scale"], **options) as result:
            cells = int(np.prod([result.sizes[d] for d in result[next(iter(result.data_vars))].dims
                                 if d != "quantile"]))
        if image is not None:
            save_field_plot(staged, image)
    return output, cells


def place_run(run_dir, candidates, output, checkpoint="best", **options):
    """``taylorformer place``: :func:`taylorformer.prediction.placement.place_files` with the
    model file of a run (never writing over the run's files). Returns the
    :class:`~taylorformer.prediction.placement.Placement`."""
    from taylorformer.plotting.saving import image_formats
    from taylorformer.prediction.placement import OUTPUT_FORMATS, place_files

    outputs = Outputs(reads=(candidates, options.get("context"), options.get("region")), run_dir=run_dir)
    outputs.check(output, "--output", OUTPUT_FORMATS)  # before the model loads
    outputs.check(options.get("plot"), "--plot", image_formats())
    return place_files(load_model_file(run_dir, checkpoint), candidates, output, run_dir=run_dir, **options)


def export_run(run_dir, output, checkpoint="best"):
    """Export the model of a run (``checkpoint`` ``best`` or ``model``) with its model file's
    normaliser (:func:`taylorformer.prediction.export.export_model`) to ``output``, a new
    or empty directory outside the run; returns ``output``. A model file without a
    normaliser exports in the model's own units, with a warning."""
    from taylorformer.errors import ExportError
    from taylorformer.prediction.export import autoregressive_refusal, export_model, groups_refusal

    check_choice("export", "checkpoint", checkpoint, ("best", "model"))
    with Outputs(run_dir=run_dir) as outputs:  # a new or empty directory outside the run
        staged = outputs.directory(output, "export output")
        run = RunDirectory(run_dir)
        if os.path.isfile(run.file("spec.json")) and run.read_spec().get("kind") == "autoregressive":
            raise ExportError(f"cannot export run {run_dir}: " + autoregressive_refusal("its model"))
        config = run.read_config() if os.path.isfile(run.file("config.json")) else {}
        model = load_model_file(run_dir, checkpoint)
        normaliser = model.normaliser
        if normaliser is None:
            warnings.warn(f"{run_dir}: its model file has no saved normaliser (written before taylorformer saved one): "
                          "the SavedModel takes and gives the model's own units", stacklevel=2)
        else:
            refusal = groups_refusal(normaliser)
            if refusal:
                raise ExportError(f"cannot export run {run_dir}: {refusal}")
        task = config.get("task") or ((normaliser.task or {}).get("name") if normaliser is not None else None)
        extra = {"task": task, "task_config": config.get("task_config"),
                 "run_dir": os.path.abspath(run_dir), "checkpoint": checkpoint}
        export_model(model, staged, normaliser, extra)
    return output


def check_predict_memory(query, levels, num_samples):
    """Refuse (SpecError with the memory it needs) a prediction whose outputs do not fit:
    mean, stddev, quantiles and samples, float32 ``[B, Nt, Dy]`` each, held twice (the
    chunks and their concatenation) before they are written."""
    b, nt, _ = np.shape(query["xt"])
    dim_y = np.shape(query["yc"])[-1]
    per_draw = 4 * int(b) * int(nt) * int(dim_y)
    draws = 2 + len(levels) + (num_samples or 50)  # autoregressive models draw 50 when 0
    return check_memory("predict", f"{num_samples} sample(s) at {b} x {nt} point(s) of {dim_y} output(s)"
                        if num_samples else f"the predictions at {b} x {nt} point(s)", 2 * draws * per_draw,
                        "ask for fewer --samples or predict at fewer points per file")


def calibrate_run(run_dir, task=None, task_config=None, split="test", checkpoint="best",
                  batch_size=None, num_batches=None, num_samples=calibration.DEFAULT_SAMPLES,
                  teacher_forced=False, recalibrate=False, use_stored=True, plot=None, seed=0):
    """Calibration report of a run on ``split`` (:func:`taylorformer.prediction.calibration.summarize`
    plus ``mode``, ``split``, ``units``). With ``recalibrate``: fit a spread scale on the
    ``val`` split, store it (:func:`taylorformer.prediction.calibration.save_recalibration`) and add
    ``recalibrated`` (the report on ``split`` with it applied, and the fit's ``scale``,
    ``criterion`` and validation before/after); otherwise, with ``use_stored``, ``recalibrated`` for the stored one, if any. ``plot``:
    an image path for :func:`taylorformer.plotting.calibration.plot_calibration`. The plot and
    ``calibration.json`` are checked before any work and put in place together
    (:class:`taylorformer.files.Outputs`)."""
    from taylorformer.plotting.calibration import plot_calibration
    from taylorformer.plotting.saving import image_formats, save_figure

    check_int("calibration", "num_samples", num_samples, minimum=2)
    recalibration_file = os.path.join(run_dir, calibration.RECALIBRATION_FILE)
    with Outputs(run_dir=run_dir) as outputs:  # the plot and calibration.json in place together
        image = outputs.file(plot, "--calibration-plot", image_formats())
        stored = outputs.file(recalibration_file, "--recalibrate", (".json",)) if recalibrate else None
        model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
        mode = calibration.check_mode(model, teacher_forced)
        if recalibrate and mode == "teacher-forced":
            raise SpecError("recalibration is fitted on what predict returns, the multi-step samples of an "
                            "autoregressive model; drop teacher_forced (--teacher-forced) to recalibrate")
        batch_size = config["train"]["batch_size"] if batch_size is None else batch_size
        units, unit_label = calibration.data_units(units_normaliser(task_obj, model))
        options = {"mode": mode, "batch_size": batch_size, "num_batches": num_batches,
                   "num_samples": num_samples, "seed": seed}
        marginals = calibration.collect(model, task_obj, split, **options)
        report = {"mode": mode, "split": split, "units": unit_label,
                  **({"num_samples": num_samples} if mode == "sampled" else {}),
                  **calibration.summarize(marginals, seed=seed, units=units)}
        record = None
        if recalibrate:
            if not os.path.isfile(os.path.join(run_dir, f"{checkpoint}.keras")):
                raise RunDirectoryError(f"{run_dir} has no {checkpoint}.keras to store a recalibration for "
                                        "(one is stored per model file); recalibrate another --checkpoint")
            val = calibration.collect(model, task_obj, "val", **options)
            scale, criterion = calibration.fit_spread_scale(val)
            record = {"method": "spread-scale", "scale": scale.tolist(), "criterion": criterion,
                      "mode": mode, **({"num_samples": num_samples} if mode == "sampled" else {}),
                      "checkpoint": checkpoint,
                      "model_sha256": calibration.model_fingerprint(os.path.join(run_dir, f"{checkpoint}.keras")),
                      "fitted_on": {"split": "val", "num_batches": num_batches, "batch_size": batch_size},
                      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "validation": {"before": calibration.summarize(val, seed=seed, units=units),
                                     "after": calibration.summarize([m.with_scale(scale) for m in val],
                                                                    seed=seed, units=units)}}
            report["recalibration_file"] = calibration.save_recalibration(run_dir, checkpoint, record, to=stored)
        elif use_stored and mode != "teacher-forced":
            record = calibration.load_recalibration(run_dir, checkpoint)
        if record is not None:
            scale = np.asarray(record["scale"], np.float64)
            report["recalibrated"] = {"method": record["method"], "scale": record["scale"],
                                      "criterion": record.get("criterion"),
                                      **calibration.summarize([m.with_scale(scale) for m in marginals],
                                                              seed=seed, units=units)}
        if plot is not None:
            title = f"{os.path.basename(os.path.normpath(run_dir))}: {split} split, {mode}"
            save_figure(plot_calibration(report, title=title), image)
            report["plot"] = str(plot)
    return report
