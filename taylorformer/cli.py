"""The ``taylorformer`` command line: plugins, train, evaluate, plot, predict (``--grid``: a
field), forecast, plot-field, place, export, info, and the commands plugins add
(``replicate``).

A library error (and a bad file or value given by the user) is one line ``error: ...`` on
stderr with exit code 2, as is a bad argument; any other exception is one line with exit
code 1. ``--debug`` (before or after the subcommand) shows the traceback instead.

The command is a program, so it sets up its own process (the library does not): before
NumPy and TensorFlow load, ``OPENBLAS_NUM_THREADS=1`` (task simulators run many small NumPy
Cholesky factorisations, which a multi-threaded OpenBLAS slows down on a few cores;
TensorFlow does not use OpenBLAS) and ``TF_CPP_MIN_LOG_LEVEL=2``, each only where
the user set no value; and TensorFlow's C++ start-up log lines (:data:`FRAMEWORK_LOG`:
"oneDNN custom operations are on", "Could not find cuda drivers", "failed call to cuInit",
"All log messages before absl::InitializeLog", which absl writes before it reads the level)
are kept off stderr while TensorFlow loads and finds its devices. ``--debug`` leaves the
level alone and shows every line. ``--help``, ``--version`` and argument errors load no
TensorFlow at all (through the ``taylorformer`` console script, :mod:`taylorformer_cli`).
"""
import argparse
import contextlib
import json
import math
import os
import re
import sys
import tempfile
import traceback
import warnings

from taylorformer import registry
from taylorformer.errors import SpecError, TaylorformerError, TrainingRangeWarning

#: exceptions that mean bad user input (exit code 2); anything else is a bug (exit code 1)
USER_ERRORS = (TaylorformerError, OSError, ValueError)

#: the main job, ``taylorformer train`` without ``--model``: of the recipes measured, the one
#: that trains TNP-D best in the quick start's few CPU minutes (2 attention layers, 6500
#: steps; benchmarks/experiments/README.md, "main_job.py"). ``--model`` trains another spec, 2000 steps
#: unless ``--steps`` says otherwise.
MAIN_JOB_MODEL = {"preset": "tnp-d", "encoder": {"layers": 2}}
MAIN_JOB_STEPS = 6500


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block)."""

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {one_line(message)} (see {self.prog} --help)\n")


#: a terminal escape sequence (CSI ``ESC [ ... letter``, OSC ``ESC ] ... BEL``, or ``ESC x``)
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text):
    """``text`` without terminal escape codes or control characters other than tab and
    newline: what a file says never recolours or rewrites the user's terminal."""
    return _CONTROLS.sub("", _ESCAPES.sub("", str(text)))


def one_line(text):
    """:func:`printable` ``text`` with its lines joined by spaces."""
    return " ".join(line.strip() for line in printable(text).splitlines() if line.strip())


def error_message(exc):
    """The message of ``exc`` for the one ``error:`` line. An error raised inside a Keras
    layer call comes wrapped ("Exception encountered when calling ...", the message in bold,
    then the arguments received): the message alone."""
    text = str(exc)
    if "Exception encountered when calling" in text:
        bold = re.search(r"\x1b\[1m(.*?)\x1b\[0m", text, re.S)
        if bold:
            text = bold.group(1)
        else:
            text = text.split("Arguments received by", 1)[0]
    return one_line(text)


def _number(parse, allowed, ok):
    """An argparse type: ``parse(text)`` when ``ok`` of it, else an error saying ``allowed``."""
    def convert(text):
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}")
        return value
    return convert


positive_int = _number(int, "a positive int", lambda v: v > 0)
non_negative_int = _number(int, "an int >= 0", lambda v: v >= 0)
positive_float = _number(float, "a finite number > 0", lambda v: math.isfinite(v) and v > 0)
probability = _number(float, "a probability in (0, 1)", lambda v: 0 < v < 1)
non_negative_float = _number(float, "a number >= 0 (inf: no bound)", lambda v: not math.isnan(v) and v >= 0)
finite_float = _number(float, "a finite number", math.isfinite)


def _names(text):
    """An argparse type: comma-separated column names."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"must be comma-separated column names, got {text!r}")
    return names


def dtype_policy(text):
    """An argparse type: a Keras dtype policy name (:data:`taylorformer.spec.DTYPE_POLICIES`)."""
    from taylorformer.spec import check_dtype_policy

    try:
        return check_dtype_policy("--dtype-policy", "policy", text)
    except SpecError as exc:  # "... must be one of ..., got ...": argparse names the flag
        raise argparse.ArgumentTypeError("must be " + str(exc).split(" must be ", 1)[1]) from None


def _cmd_plugins(args):
    reg = registry.default()
    entries = [e for e in reg.entries(args.kind) if not args.kind or e.kind == args.kind]
    failures = reg.failures()
    if args.json:
        print(json.dumps({
            "components": [e.as_dict() for e in entries],
            "failures": [{k: v for k, v in f.as_dict().items() if k != "details"} for f in failures],
            "blocked": sorted(reg.blocked_plugins),
        }, indent=2))
        return 0
    rows = [("KIND", "NAME", "DISTRIBUTION", "VERSION", "DESCRIPTION")]
    for e in entries:
        name = e.name + (f" ({', '.join(e.aliases)})" if e.aliases else "")
        rows.append((e.kind, name, e.distribution, e.version, e.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    if reg.blocked_plugins:
        print(f"\nBlocked plugins: {', '.join(sorted(reg.blocked_plugins))}")
    if failures:
        print(f"\nFailed plugins ({len(failures)}):")
        for f in failures:
            print(f"  {f.plugin} [{f.distribution} {f.version}] {f.stage}: {f.error}")
    return 0


def json_arg(text, what):
    """A JSON object given inline or as a path to a .json/.yaml file (``what``: the option,
    for the error); plugin commands read their JSON options with it too."""
    if text is None:
        return None
    if text.endswith((".json", ".yaml", ".yml")):
        from taylorformer.spec import load_spec_file

        return load_spec_file(text, what=f"{what} file")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{what} must be a JSON object or a .json/.yaml path: {exc}") from exc
    if not isinstance(value, dict):
        raise SpecError(f"{what} must be a JSON object, got {text!r}")
    return value


def print_json(result):
    """Print ``result`` as the commands' JSON output (``--json``), for plugin commands too."""
    from taylorformer.files import json_text

    print(json_text(result))


def _cmd_train(args):
    """Train, then (the chief) evaluate, record, print and plot: :func:`training.finish_run`."""
    from taylorformer.workflow import training

    verbose = 1 if sys.stdout.isatty() else 2  # no progress-bar escape codes in log files
    options = {"batch_size": args.batch_size, "learning_rate": args.lr, "schedule": args.schedule,
               "warmup_steps": args.warmup_steps, "tensorboard": args.tensorboard,
               "seed": args.seed, "jit_compile": args.xla, "dtype_policy": args.dtype_policy,
               "strategy": args.strategy, "val_every": args.val_every,
               "val_batches": args.val_batches, "nan_policy": args.nan_policy,
               "checkpoint_every": args.checkpoint_every, "steps": args.steps,
               "time_budget": args.time_budget, "num_permutations": args.num_permutations}
    if args.resume:
        # a resumed run keeps its saved config; only an explicit --steps extends it
        training.train(resume=args.resume, verbose=verbose, evaluate=not args.no_eval,
                       eval_batches=args.eval_batches, **({"steps": args.steps} if args.steps is not None else {}))
    else:
        options = {k: v for k, v in options.items() if v is not None}
        model = args.model
        if model is None:
            model = MAIN_JOB_MODEL
            options.setdefault("steps", MAIN_JOB_STEPS)
        training.train(model=model, task=args.task, task_config=json_arg(args.task_config, "--task-config"),
                       out_dir=args.out, verbose=verbose, evaluate=not args.no_eval,
                       eval_batches=args.eval_batches, **options)
    return 0


def _cmd_evaluate(args):
    from taylorformer.workflow import runs

    if args.cross_validate is not None:
        return _cross_validate(args)
    given = [flag for flag, value in (("--survey", args.survey), ("--x-columns", args.x_columns),
                                      ("--y-columns", args.y_columns)) if value is not None]
    if given:
        raise SpecError(f"{', '.join(given)} go with --cross-validate K only")
    plot = args.calibration_plot or f"{args.run_dir.rstrip('/')}/calibration-{args.split}.png"
    if args.calibration or args.recalibrate:  # the plot's path fails before the evaluation
        from taylorformer.files import Outputs
        from taylorformer.plotting.saving import image_formats

        Outputs(run_dir=args.run_dir).check(plot, "--calibration-plot", image_formats())
    result = runs.evaluate_run(args.run_dir, task=args.task,
                               task_config=json_arg(args.task_config, "--task-config"),
                               num_batches=args.batches, split=args.split,
                               checkpoint=args.checkpoint, batch_size=args.batch_size,
                               num_samples=args.samples, consistency=args.consistency,
                               memory_budget=args.memory_budget, baselines=not args.no_baselines,
                               sampled_tasks=args.sampled_windows)
    if args.calibration or args.recalibrate:
        result["calibration"] = runs.calibrate_run(
            args.run_dir, task=args.task, task_config=json_arg(args.task_config, "--task-config"),
            split=args.split, checkpoint=args.checkpoint, batch_size=args.batch_size,
            num_batches=args.batches, num_samples=args.calibration_samples,
            teacher_forced=args.teacher_forced, recalibrate=args.recalibrate,
            plot=plot)
    print_json(result)
    from taylorformer.model_card import evaluation_headline

    headline = evaluation_headline(result)
    if headline:  # stdout stays one JSON document
        print(headline, file=sys.stderr)
    if "verdict" in result:
        print(f"verdict: {result['verdict']}", file=sys.stderr)
    return 0


#: ``evaluate`` options a cross-validation does not use (their defaults)
CROSS_VALIDATION_UNUSED = {"task": None, "task_config": None, "batches": None, "split": "test", "batch_size": 16,
                           "samples": None, "sampled_windows": 64, "consistency": 0, "calibration": False,
                           "calibration_plot": None, "calibration_samples": 100, "teacher_forced": False,
                           "recalibrate": False, "memory_budget": None}


def _cross_validate(args):
    from taylorformer.workflow import runs

    given = [f"--{k.replace('_', '-')}" for k, default in CROSS_VALIDATION_UNUSED.items()
             if getattr(args, k) != default]
    if given:
        raise SpecError(f"{', '.join(given)} do not go with --cross-validate (it scores held-out survey points)")
    result = runs.cross_validate_run(args.run_dir, survey=args.survey, folds=args.cross_validate, seed=args.seed,
                                     checkpoint=args.checkpoint, x_columns=args.x_columns,
                                     y_columns=args.y_columns, baselines=not args.no_baselines)
    print_json(result)
    if "verdict" in result:
        print(f"verdict: {result['verdict']}", file=sys.stderr)
    return 0


def _cmd_plot(args):
    from taylorformer.workflow import runs

    path = runs.plot_run(args.run_dir, out=args.out, task=args.task,
                         task_config=json_arg(args.task_config, "--task-config"),
                         checkpoint=args.checkpoint, num_tasks=args.num_tasks, num_samples=args.samples)
    print(path)
    return 0


#: ``predict`` options that mean nothing with ``--grid`` (their defaults)
GRID_UNUSED = {"input": None, "samples": 0}
#: ``predict`` options that mean something only with ``--grid``
GRID_ONLY = ("variable", "padding", "patch", "time_input", "plot", "memory_budget")


def _cmd_predict(args):
    from taylorformer.workflow import runs

    if args.grid is not None:
        return _predict_grid(args)
    given = [f"--{k.replace('_', '-')}" for k in GRID_ONLY if getattr(args, k) is not None]
    if args.input is None or given:
        raise SpecError("predict needs --input FILE (or --grid FIELD.nc for a field)" if args.input is None
                        else f"{', '.join(given)} go with --grid FIELD.nc only")
    output, n = runs.predict_run(args.run_dir, args.input, args.output, context=args.context,
                                 checkpoint=args.checkpoint, levels=args.quantiles,
                                 num_samples=args.samples, chunk_size=args.chunk_size,
                                 x_columns=args.x_columns, y_columns=args.y_columns, seed=args.seed,
                                 verbose=0 if args.quiet else 1 if sys.stdout.isatty() else 2,
                                 recalibration=args.recalibration)
    print(f"predictions at {n} point(s) written to {output}")
    return 0


def _predict_grid(args):
    from taylorformer.models.bounded_sampling import parse_memory
    from taylorformer.prediction import fields
    from taylorformer.workflow import runs

    wrong = [f"--{k}" for k, v in GRID_UNUSED.items() if getattr(args, k) != v]
    if wrong:
        raise SpecError(f"{', '.join(wrong)} cannot go with --grid: the grid's cells are the inputs, and a field "
                        "is written as mean, stddev and quantiles")
    if args.context is None:
        raise SpecError("predict --grid needs --context POINTS.csv (or a field .nc): the observations to predict from")
    if args.y_columns is not None and len(args.y_columns) != 1:
        raise SpecError(f"--y-columns with --grid names the one value column of the context, got {args.y_columns}")
    options = {"inputs": args.x_columns, "variable": args.variable,
               "value": None if args.y_columns is None else args.y_columns[0], "time_input": args.time_input,
               "padding": None if args.padding is None else (args.padding[0] if len(args.padding) == 1
                                                               else args.padding),
               "patch": None if args.patch is None else (args.patch[0] if len(args.patch) == 1 else args.patch),
               "levels": args.quantiles or fields.DEFAULT_LEVELS, "chunk_size": args.chunk_size,
               "progress": not args.quiet, "seed": args.seed,
               "memory_budget": None if args.memory_budget is None else parse_memory(args.memory_budget,
                                                                                     "--memory-budget")}
    output, cells = runs.predict_field_run(args.run_dir, args.grid, args.context, args.output,
                                           checkpoint=args.checkpoint, recalibration=args.recalibration,
                                           plot=args.plot, **options)
    print(f"field of {cells} cell(s) written to {output}")
    if args.plot:
        print(f"map: {args.plot}")
    return 0


def _cmd_forecast(args):
    from taylorformer.workflow import forecasting

    frame = forecasting.forecast_run(args.run_dir, args.history, args.output, horizon=args.horizon,
                                     num_samples=args.samples, quantiles=args.quantiles, seed=args.seed,
                                     checkpoint=args.checkpoint, plot=args.plot, memory_budget=args.memory_budget,
                                     truth=args.truth)
    print(f"forecast of {len(frame)} step(s) written to {args.output}" + (f"; plot: {args.plot}" if args.plot else ""))
    for col, score in frame.attrs.get("truth_scores", {}).items():
        print(f"against the truth ({col}, {score['steps']} step(s)): mean absolute error {score['mae']:.4g}; "
              f"persistence (the last history value) {score['persistence_mae']:.4g}")
    return 0


def _cmd_plot_field(args):
    from taylorformer.files import Outputs, not_a_file
    from taylorformer.plotting.fields import save_field_plot
    from taylorformer.plotting.saving import image_formats

    reason = not_a_file(args.field)
    if reason:
        raise SpecError(f"field file {args.field} {reason}")
    out = args.out or os.path.splitext(args.field)[0] + ".png"
    with Outputs(reads=(args.field,)) as outputs:
        save_field_plot(args.field, outputs.file(out, "--out", image_formats()), variable=args.variable)
    print(out)
    return 0


#: ``taylorformer place --criterion`` (:data:`taylorformer.prediction.placement.CRITERIA`)
PLACEMENT_CRITERIA = ("variance", "region-mean", "region-total")


def _cmd_place(args):
    from taylorformer.workflow import runs

    given = {k: v for k, v in (("num_samples", args.samples), ("max_points", args.max_points)) if v is not None}
    result = runs.place_run(args.run_dir, args.candidates, args.output, context=args.context,
                            region=args.region, k=args.k, criterion=args.criterion,
                            checkpoint=args.checkpoint, pseudo_draws=args.pseudo_draws,
                            x_columns=args.x_columns, y_columns=args.y_columns, seed=args.seed,
                            plot=args.plot, verbose=1 if sys.stdout.isatty() else 2, **given)
    print(f"{result.criterion} over the region: {result.initial:.6g} before (variances in {result.units})")
    print(result.table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    print(f"{len(result.table)} location(s) written to {args.output}"
          + (f"; map: {args.plot}" if args.plot else ""))
    return 0


def _cmd_export(args):
    from taylorformer.workflow import runs

    output = runs.export_run(args.run_dir, args.output, checkpoint=args.checkpoint)
    print(f"SavedModel written to {output} (signatures serving_default(xc, yc, xt) and "
          "with_masks(xc, yc, xt, mask_c, mask_t); docs/export.md)")
    return 0


def _cmd_info(args):
    from taylorformer import model_card

    info = model_card.run_info(args.target)
    if args.json:  # JSON escapes every control character
        print_json(info)
    else:
        print(printable(model_card.format_info(info)))
    return 0


#: lines of TensorFlow's / absl's C++ logging (glog format ``I0000 00:00:... file.cc:12] ...``,
#: the older ``2024-01-01 12:00:00.000: I file.cc:12] ...``, absl's notice before it reads
#: TF_CPP_MIN_LOG_LEVEL, and the second line of the CPU-instructions notice)
FRAMEWORK_LOG = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] \S+:\d+\] "
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags)")


def start_tensorflow(debug=False):
    """Set up this process for a command (see the module docstring) and load TensorFlow:
    with ``debug`` False, what TensorFlow writes to stderr (file descriptor 2) while it loads
    and finds its devices is held back and replayed without its :data:`FRAMEWORK_LOG` lines.
    Does nothing where TensorFlow is already loaded (``main`` called in-process)."""
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if debug:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable stderr: nothing to filter
        saved = None
    with tempfile.TemporaryFile() as captured:
        if saved is not None:
            os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # where CUDA start-up ("cuInit") reports
        finally:
            if saved is not None:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                captured.seek(0)
                for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                    if not FRAMEWORK_LOG.match(line):
                        sys.stderr.write(line)
                sys.stderr.flush()


def build_parser():
    from taylorformer import __version__

    # the module docstring's first two paragraphs: the commands and the error convention
    parser = _Parser(prog="taylorformer", description="\n\n".join(__doc__.split("\n\n")[:2]),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"taylorformer {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error and TensorFlow's log lines")
    sub = parser.add_subparsers(dest="command")
    # --debug after the subcommand too (SUPPRESS: absent there, the top-level value stands)
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error and TensorFlow's log lines")

    def command(name, **kwargs):
        return sub.add_parser(name, parents=[debug], **kwargs)

    p = command("plugins", help="list registered components and failed plugins")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--kind", choices=sorted(registry.hookspecs.KINDS), help="only this kind")
    p.set_defaults(func=_cmd_plugins)

    p = command(
        "train", help="train a model on a task (no arguments: the demo job)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train with Keras model.fit into a run directory: spec.json, config.json, "
                    "metrics.csv,\nbest.keras, model.keras, checkpoints/ and tensorboard/. With no "
                    "arguments: the main job,\nTNP-D with 2 attention layers on the 1-D GP task, "
                    f"{MAIN_JOB_STEPS} steps.",
        epilog="TensorBoard (train loss, validation log-likelihood, gap to the exact GP ceiling,\n"
               "learning rate, prediction images at each validation):\n"
               "    tensorboard --logdir RUN_DIR/tensorboard     # then open http://localhost:6006\n\n"
               "Several machines: --strategy multi-worker on each, with TF_CONFIG describing the\n"
               "cluster and that machine's task (docs/training.md).")
    p.add_argument("--model", help="preset name or JSON/YAML spec file (default: the main job's "
                   "TNP-D with 2 attention layers)")
    p.add_argument("--task", default="gp", help="registered task name")
    p.add_argument("--task-config", help="task options as JSON, or a JSON/YAML file")
    p.add_argument("--steps", type=positive_int,
                   help=f"training steps (default 2000; the main job: {MAIN_JOB_STEPS})")
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--lr", type=positive_float, help="peak learning rate (default 1e-3)")
    p.add_argument("--schedule", choices=["constant", "cosine"],
                   help="learning-rate schedule after the warm-up (default cosine)")
    p.add_argument("--warmup-steps", type=non_negative_int, help="linear learning-rate warm-up (default: 5%% of the steps)")
    p.add_argument("--seed", type=int)
    p.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                   help="compile the train step with XLA (default: on)")
    p.add_argument("--dtype-policy", type=dtype_policy, help="Keras dtype policy, e.g. mixed_bfloat16")
    p.add_argument("--strategy", choices=["default", "mirrored", "multi-worker"],
                   help="tf.distribute: one device, this machine's devices, or a TF_CONFIG cluster")
    p.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=None,
                   help="write TensorBoard logs into RUN_DIR/tensorboard (default: on)")
    p.add_argument("--val-every", type=positive_int)
    p.add_argument("--val-batches", type=positive_int)
    p.add_argument("--checkpoint-every", type=positive_int)
    p.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                   help="stop after this much training wall time (equal-CPU-budget comparisons)")
    p.add_argument("--num-permutations", type=non_negative_int,
                   help="autoregressive models: random target orders per task and step")
    p.add_argument("--nan-policy", choices=["stop", "skip"],
                   help="non-finite loss: stop (default, checkpoints untouched) or skip the step")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue RUN_DIR from its latest checkpoint")
    p.add_argument("--eval-batches", type=positive_int, default=None, help="test batches after training")
    p.add_argument("--out", help="run directory: new or empty (default: a new runs/MODEL-TASK-TIME); "
                   "an existing run continues only with --resume")
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation and plot")
    p.set_defaults(func=_cmd_train)

    for name, func, text in (("evaluate", _cmd_evaluate, "evaluate a run; prints JSON"),
                             ("plot", _cmd_plot, "plot a run's predictions to PNG")):
        p = command(name, help=text)
        p.add_argument("run_dir")
        p.add_argument("--task", help="task name (default: the run's task)")
        p.add_argument("--task-config", help="task options as JSON, or a JSON/YAML file")
        p.add_argument("--checkpoint", choices=["best", "model"], default="best")
        if name == "evaluate":
            p.add_argument("--batches", type=positive_int, default=None)
            p.add_argument("--split", choices=["val", "test"], default="test")
            p.add_argument("--batch-size", type=positive_int, default=16)
            p.add_argument("--samples", type=non_negative_int, default=None,
                           help="autoregressive models: forecast paths per window behind the headline "
                                "metrics (default 32; 0: teacher-forced metrics only)")
            p.add_argument("--sampled-windows", type=positive_int, default=64, metavar="N",
                           help="autoregressive models: sample the forecasts of at most N windows, spread "
                                "over the split (default 64)")
            p.add_argument("--consistency", type=non_negative_int, default=0, metavar="K",
                           help="autoregressive models: std of the log-lik over K target orders")
            p.add_argument("--no-baselines", action="store_true",
                           help="leave out the baselines beside the model (persistence, seasonal naive, "
                                "ridge AR; a GP and inverse-distance weighting) and the verdict")
            p.add_argument("--calibration", action="store_true",
                           help="add calibration: PIT histogram, coverage of central intervals, CRPS, "
                                "sharpness (and a plot; docs/calibration.md)")
            p.add_argument("--calibration-plot", metavar="PNG",
                           help="calibration plot path (default RUN_DIR/calibration-SPLIT.png)")
            p.add_argument("--calibration-samples", type=positive_int, default=100, metavar="S",
                           help="autoregressive models: forecast paths per window for calibration "
                                "(default 100)")
            p.add_argument("--teacher-forced", action="store_true",
                           help="autoregressive models: assess the teacher-forced conditionals instead "
                                "of multi-step samples")
            p.add_argument("--recalibrate", action="store_true",
                           help="fit a spread scale on the val split, store it in RUN_DIR/calibration.json "
                                "for predict, report before/after on --split (implies --calibration)")
            p.add_argument("--memory-budget", metavar="SIZE",
                           help="with --samples: bound on this process's memory while sampling, e.g. "
                                "2GB or 512MiB, at most the machine's memory (default: what it holds plus 2 GB)")
            p.add_argument("--cross-validate", type=positive_int, default=None, metavar="K",
                           help="point models: K-fold cross-validation on a survey's own points (the model "
                                "conditioned on the other folds) beside kriging and inverse-distance weighting")
            p.add_argument("--survey", metavar="FILE",
                           help="with --cross-validate: the survey (default: the file the run's task read)")
            p.add_argument("--x-columns", type=_names, default=None,
                           help="with --cross-validate: the survey's input columns, comma-separated")
            p.add_argument("--y-columns", type=_names, default=None,
                           help="with --cross-validate: the survey's output columns, comma-separated")
            p.add_argument("--seed", type=non_negative_int, default=0,
                           help="with --cross-validate: the seed of the folds (default 0)")
        else:
            p.add_argument("--out", help="PNG path (default RUN_DIR/predictions.png)")
            p.add_argument("--num-tasks", type=positive_int, default=4)
            p.add_argument("--samples", type=non_negative_int, default=0, help="sample paths to draw")
        p.set_defaults(func=func)

    p = command("predict", help="predict at new inputs from a file with a trained run",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Predictive mean, stddev, quantiles (and samples) of a run's model at the "
                            "inputs of a file,\ngiven a context; conditional models go through the "
                            "inputs --chunk-size at a time.\nRaw data in, the data's units out: the "
                            "model file's normaliser maps both ways\n(taylorformer info RUN shows it; "
                            "docs/units.md).",
                epilog="Files (by extension): .npz/.nc arrays named xc, yc (context) and xt (inputs),\n"
                       "each [N, D] or [B, N, D]; .csv one row per point, columns x or x0, x1, ... and,\n"
                       "in a context file, y or y0, y1, ... (or the model's variable names); .npy the\n"
                       "inputs xt alone. Output .csv (one task), .npz or .nc.")
    p.add_argument("run_dir")
    p.add_argument("--input", metavar="FILE", help="inputs to predict at (and the context)")
    p.add_argument("--output", required=True, metavar="FILE", help="where to write the predictions")
    p.add_argument("--context", metavar="FILE", help="context points, if --input holds only inputs "
                   "(with --grid: points .csv or a field .nc)")
    p.add_argument("--grid", metavar="FIELD.nc", help="predict at every cell of this grid instead of --input: "
                   "output a .nc on its coordinates, in the data's units (docs/fields.md)")
    p.add_argument("--variable", help="with --grid: the grid's field variable (NaN cells are skipped; "
                   "default: its only variable)")
    p.add_argument("--padding", type=non_negative_float, nargs="+", metavar="P",
                   help="with --grid: context window around each patch, in coordinate units (one, or one "
                        "per input; default: half the training span)")
    p.add_argument("--patch", type=positive_int, nargs="+", metavar="N",
                   help="with --grid: patch cells per grid dim (default: half the training span)")
    p.add_argument("--time-input", type=finite_float, metavar="T",
                   help="with --grid, a gridded-task run: the window-time input (default: the last step)")
    p.add_argument("--plot", metavar="PNG", help="with --grid: also draw the maps here")
    p.add_argument("--memory-budget", metavar="SIZE", help="with --grid: refuse a grid whose estimated memory "
                   "exceeds this, e.g. 2GB (default: the memory available)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or line")
    p.add_argument("--checkpoint", choices=["best", "model"], default="best")
    p.add_argument("--quantiles", type=probability, nargs="+", metavar="Q",
                   help="quantile levels (default 0.05 0.5 0.95)")
    p.add_argument("--samples", type=non_negative_int, default=0, help="predictive samples to write")
    p.add_argument("--chunk-size", type=positive_int, default=4096, help="targets per forward pass")
    p.add_argument("--x-columns", type=_names, help="CSV input columns, comma-separated (with --grid: the "
                   "grid coordinates that are the inputs, in order)")
    p.add_argument("--y-columns", type=_names, help="CSV output columns of the context, comma-separated (with "
                   "--grid: the context's value column or variable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recalibration", action=argparse.BooleanOptionalAction, default=True,
                   help="apply the run's stored recalibration (evaluate --recalibrate), if any "
                        "(default: on)")
    p.set_defaults(func=_cmd_predict)

    p = command("forecast", help="forecast the steps after a series' history with a series run",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Forecast the --horizon steps after the last row of --history (a CSV laid out as the "
                            "run's\ntask data: its date column, targets and covariates) with a run trained on a "
                            "series\ntask; the model's inputs (window position, covariates, calendar features) are "
                            "built\nas the task built them. Rows at the end with empty targets are future rows: "
                            "they give\nthe covariates of the forecast steps (docs/forecasting.md).",
                epilog="Output: one row per forecast step: the date (as the history writes dates, continued\n"
                       "at its frequency), then per target mean_<col>, stddev_<col>, q<level>_<col>,\n"
                       "sample<k>_<col> (--samples) and quantile_method, in the data's units.")
    p.add_argument("run_dir")
    p.add_argument("--history", required=True, metavar="SERIES.csv", help="the series up to now (and future "
                   "covariate rows)")
    p.add_argument("--output", required=True, metavar="OUT.csv", help="where to write the forecast")
    p.add_argument("--horizon", type=positive_int, metavar="H", help="steps to forecast, at most the run's "
                   "(default: the run's)")
    p.add_argument("--samples", type=non_negative_int, default=0, metavar="N", help="sampled paths to write")
    p.add_argument("--quantiles", type=probability, nargs="+", metavar="Q",
                   help="quantile levels (default 0.05 0.5 0.95)")
    p.add_argument("--plot", metavar="PNG", help="draw the history, mean, bands and a few paths here")
    p.add_argument("--truth", metavar="SERIES.csv", help="the observed values of the forecast steps (laid out as "
                   "the history; matched by date): drawn on the plot and scored beside persistence")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", choices=["best", "model"], default="best")
    p.add_argument("--memory-budget", metavar="SIZE", help="autoregressive models: bound on this process's "
                   "memory while sampling, e.g. 2GB")
    p.set_defaults(func=_cmd_forecast)

    p = command("plot-field", help="draw the maps of a predicted field (predict --grid's output) to PNG",
                description="Truth (where the file has the field) beside the predictive mean, and the "
                            "predictive stddev; longitude or easting across, undefined cells blank, the "
                            "context points the file records drawn.")
    p.add_argument("field", metavar="OUT.nc")
    p.add_argument("--out", help="PNG path (default: OUT.png beside the file)")
    p.add_argument("--variable", help="the predicted field (default: the only one)")
    p.set_defaults(func=_cmd_plot_field)

    p = command("place", help="choose where to observe next (sensor placement) with a trained run",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Choose --k of the candidate inputs greedily, each the one whose observation "
                            "most reduces the\nuncertainty over the region (default: the candidates) "
                            "given the context and the points\nchosen before (docs/placement.md).",
                epilog="Criteria: variance (any model: the summed predictive variance over the region, "
                       "a candidate\npseudo-observed at its predictive mean, or averaged over "
                       "--pseudo-draws values);\nregion-mean, region-total (autoregressive models: the "
                       "variance of the region's mean/total,\nfrom joint samples). Files as for "
                       "predict; output columns: the inputs, order, candidate,\nacquisition "
                       "(reduction), remaining (criterion left).\n\nUnits: when the run's model file "
                       "holds a normaliser, candidates, context and region are\nin the data's units "
                       "(e.g. kelvin, degrees); the chosen points are written as given and\nthe "
                       "variances in the data's squared units (printed; the .nc/.npz 'units'). An old "
                       "model\nfile without one works in the model's units, with a warning.")
    p.add_argument("run_dir")
    p.add_argument("--candidates", required=True, metavar="FILE",
                   help="candidate inputs (as predict's --input; an .npz/.nc may hold the context)")
    p.add_argument("--context", metavar="FILE", help="observations so far (default: none)")
    p.add_argument("--region", metavar="FILE", help="inputs where the uncertainty counts (default: the candidates)")
    p.add_argument("--k", type=positive_int, required=True, metavar="N", help="locations to choose")
    p.add_argument("--output", required=True, metavar="FILE", help="where to write the chosen locations")
    p.add_argument("--plot", metavar="PNG", help="draw the map here")
    # taylorformer.prediction.placement's CRITERIA and defaults, spelled out: --help imports no NumPy
    p.add_argument("--criterion", choices=PLACEMENT_CRITERIA, default="variance",
                   help="what to reduce (default variance; see below)")
    p.add_argument("--pseudo-draws", type=non_negative_int, default=0, metavar="M",
                   help="criterion variance: average over M drawn values (default 0: the predictive mean)")
    p.add_argument("--samples", type=positive_int, default=None,
                   help="joint samples, autoregressive models (default 64)")
    p.add_argument("--max-points", type=positive_int, default=None,
                   help="tokens per forward pass: the memory bound (default 65536)")
    p.add_argument("--checkpoint", choices=["best", "model"], default="best")
    p.add_argument("--x-columns", type=_names, help="CSV input columns, comma-separated")
    p.add_argument("--y-columns", type=_names, help="CSV output columns of the context, comma-separated")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_place)

    p = command("export", help="write a run's model as a TensorFlow SavedModel that serves any size",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="A SavedModel that needs TensorFlow only: signatures serving_default(xc, yc, xt)\n"
                            "and with_masks(xc, yc, xt, mask_c, mask_t) for contexts and targets of any\n"
                            "size, no yt; raw data units in, predictive mean, stddev and the likelihood's\n"
                            "parameters in the data's units out (the model file's normaliser is inside).",
                epilog="Autoregressive models (taylorformer, tnp-a) are refused: they predict by\n"
                       "sampling target after target in a Python loop. See docs/export.md.")
    p.add_argument("run_dir")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="new or empty directory outside the run")
    p.add_argument("--checkpoint", choices=["best", "model"], default="best")
    p.set_defaults(func=_cmd_export)

    p = command("info", help="print a run's (or a model file's) model card and normaliser",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="The model card (data, training, metrics at save time, the final "
                            "evaluation, versions)\nand the normaliser (names, units, offsets and "
                            "scales between the data's units and the\nmodel's) saved in a model "
                            "file; for a run directory, its best.keras (else model.keras).\nRead "
                            "from the file alone: no TensorFlow, no task data.")
    p.add_argument("target", metavar="RUN_OR_MODEL_FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_info, tensorflow=False)

    parser.commands = sub.choices
    parser.plugin_failures = add_plugin_commands(sub, [debug])
    return parser


#: commands a package of this repository adds, and how to install it
PACKAGED_COMMANDS = {"replicate": "the taylorformer-replication package: pip install -e plugins/replication "
                                  "(docs/replication.md)"}
#: a command plugin's command names: lower-case words joined by dashes
COMMAND_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def add_plugin_commands(sub, parents):
    """Add the commands of each command plugin (:func:`taylorformer.registry.command_plugins`,
    hook ``register_commands``) to the subparsers ``sub``, each parser with ``parents``;
    returns the failures, one line each. A plugin's commands are staged, each in a parser of
    its own, and added only when its import and hook succeeded, no name is taken and each
    command sets ``func``: a plugin that fails adds none, and the other commands stay."""
    import pluggy

    from taylorformer import hookspecs

    failures = []
    for plugin, distribution, version, load in registry.command_plugins():
        where = f"plugin {plugin!r} ({distribution} {version})"
        staged = {}

        def add_command(name, help=None, **options):
            if not isinstance(name, str) or not COMMAND_NAME.fullmatch(name):
                raise SpecError(f"command name {name!r} must be lower-case words joined by dashes")
            if name in sub.choices or name in staged:
                raise SpecError(f"command {name!r} is already taken")
            staged[name] = (help, options, _Parser(add_help=False, parents=parents, **options))
            return staged[name][2]

        try:
            manager = pluggy.PluginManager(hookspecs.PROJECT)
            manager.add_hookspecs(hookspecs)
            manager.register(load(), name=plugin)
            manager.check_pending()
            for impl in manager.hook.register_commands.get_hookimpls():
                impl.function(add_command=add_command)
            unset = [name for name, (_, _, parser) in staged.items() if not callable(parser.get_default("func"))]
            if unset:
                raise SpecError(f"command {unset[0]!r} sets no func (parser.set_defaults(func=run))")
        except Exception as exc:  # noqa: BLE001 - a broken plugin leaves the other commands working
            failures.append(f"command {where} failed, its commands are left out: {type(exc).__name__}: "
                            f"{one_line(exc)}")
            continue
        for name, (text, options, staged_parser) in staged.items():
            p = sub.add_parser(name, help=text, parents=[staged_parser], **options)
            p.set_defaults(command_plugin=where)
    return failures


@contextlib.contextmanager
def one_line_warnings(category):
    """Inside the block, a warning of ``category`` prints as one ``warning: ...`` line on
    stderr (no source line); other warnings as Python prints them."""
    previous = warnings.showwarning

    def show(message, cat, filename, lineno, file=None, line=None):
        if issubclass(cat, category):
            print(f"warning: {message}", file=sys.stderr)
        else:
            previous(message, cat, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def main(argv=None):
    """Run the command line; returns the exit code (argparse exits 2 on a bad argument)."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    for failure in parser.plugin_failures:
        print(f"warning: {failure}", file=sys.stderr)
    wanted = next((arg for arg in argv if not arg.startswith("-")), None)
    if wanted in PACKAGED_COMMANDS and wanted not in parser.commands:
        print(f"error: taylorformer {wanted}: the command comes with {PACKAGED_COMMANDS[wanted]}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if getattr(args, "tensorflow", True):  # info reads a zip: no TensorFlow
            start_tensorflow(debug=args.debug)
        with one_line_warnings(TrainingRangeWarning):
            return args.func(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the command line's last resort: one line, no traceback
        if args.debug:
            traceback.print_exc()
        user = isinstance(exc, USER_ERRORS)
        message = error_message(exc) or type(exc).__name__
        if not user:
            plugin = getattr(args, "command_plugin", None)
            message = (f"unexpected {type(exc).__name__}: {message}{f' in a command of {plugin}' if plugin else ''} "
                       "(rerun with --debug for the traceback)")
        print(f"error: {message}", file=sys.stderr)
        return 2 if user else 1


if __name__ == "__main__":
    sys.exit(main())
