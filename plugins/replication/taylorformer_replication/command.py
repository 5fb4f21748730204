"""The ``taylorformer replicate`` command (plugin ``replication``, entry-point group
``taylorformer.commands``, hook ``register_commands``): train and score a published row,
score its baselines (``--baseline``), or list the rows with our recorded values and their
status (``--list``, ``--list --json``).

Imported by the command line to build its parser, before TensorFlow: the module imports
only the argparse types and JSON helpers of :mod:`taylorformer.cli` and the file names of
:mod:`taylorformer_replication.replication`; :func:`run` imports the rest.
"""
import argparse
import sys

from taylorformer.cli import json_arg, positive_float, positive_int, print_json
from taylorformer.errors import SpecError
from taylorformer.hookspecs import hookimpl
from taylorformer_replication.replication import DEFAULT_BASELINES, DEFAULT_RESULTS


def budget(text):
    """An argparse type: ``paper``, ``small`` or a number of training steps >= 1."""
    if text in ("paper", "small"):
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be 'paper', 'small' or a number of steps >= 1, "
                                         f"got {text!r}") from None


def cell(value, digits=4):
    """A number of the results file (text) as a short table cell ("n/a" for none)."""
    if value is None:
        return "n/a"
    try:
        return f"{float(value):.{digits}g}"
    except (TypeError, ValueError):
        return str(value)


#: the keys of each row in ``replicate --list --json`` (the rest of the row's fields follow)
LIST_KEYS = ("id", "paper", "table", "dataset", "model", "metric", "higher_is_better", "paper_value",
             "paper_error", "paper_error_kind", "paper_comparable", "ours", "earlier", "baseline", "baseline_reason",
             "status", "status_kind", "status_reason", "authors_code")


def list_rows(args):
    """``replicate --list``: a table of the rows, or every field as JSON (``--json``)."""
    from taylorformer_replication import authors_code, replication

    listed = replication.list_rows(args.results, baselines=args.baselines)
    if args.json:
        print_json([{**{k: row[k] for k in LIST_KEYS}, **{k: v for k, v in row.items() if k not in LIST_KEYS}}
                     for row in listed])
        return 0
    table = [("ID", "METRIC", "PAPER VALUE", "OURS", "BUDGET", "BASELINE", "AUTHORS' CODE", "STATUS")]
    for row in listed:
        ours = row["ours"]
        mark = "" if ours is None or ours["source"] == "results" else " *"
        understated = " (understated)" if ours is not None and ours.get("stderr_understated") else ""
        value = "not run" if ours is None else f"{cell(ours['value'])} +- {cell(ours['stderr'], 2)}{understated}{mark}"
        base = row["baseline"]
        baseline = "-" if base is None else f"{base['name']} {cell(base['value'])}"
        budget = "" if ours is None else (f"{ours['budget']} ({ours['steps']} steps, "
                                          f"{100 * ours['budget_fraction']:.2g}% of the paper's)")
        status = row["status"] + (f": {row['status_reason']}" if row["status_kind"] == "not implemented" else "")
        matched = row["authors_code"]
        authors = "-" if matched is None else (f"{cell(matched['ours'].get('mean'))} vs "
                                               f"{cell(matched['authors'].get('mean'))}: {matched['status']}")
        table.append((row["id"], row["metric"], replication.format_value(replication.get_row(row["id"])), value,
                      budget, baseline, authors, status))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    print(f"\nOurs: the last line of {args.results} for each row ({len(listed)} rows); * where it has none: "
          f"the project's recorded result, from {replication.RECORDED_RESULTS}. Baselines: "
          f"{args.baselines}, else {replication.RECORDED_BASELINES}. (understated): an iid error bar over "
          "overlapping windows, not used for the status. AUTHORS' CODE: the mean of ours vs the authors' code "
          "over seeds at a matched budget, from "
          f"{authors_code.RECORDED_COMPARISONS}. --json gives every field, with the reasons for each "
          "status and missing baseline.")
    return 0


def run(args):
    """``taylorformer replicate``: train and score a row, score its baselines, or list the rows."""
    from taylorformer_replication import replication

    if args.list:
        return list_rows(args)
    if args.row is None:
        raise SpecError("replicate needs a ROW id, or --list to see them")
    if args.baseline:
        records = replication.score_baselines(args.row, results=args.baselines, eval_tasks=args.eval_tasks,
                                              task_config=json_arg(args.task_config, "--task-config"), verbose=0)
        for record in records:
            print(f"{args.row}: baseline {record['baseline']} {record['metric']} {record['value']:.4g} +- "
                  f"{record['stderr']:.2g} ({record['stderr_method']}, {record['num_tasks']} tasks, "
                  f"{record['wall_s']} s)")
        print(f"recorded in {args.baselines}")
        return 0
    record = replication.replicate(
        args.row, budget=args.budget, out=args.out, results=args.results, eval_tasks=args.eval_tasks,
        task_config=json_arg(args.task_config, "--task-config"), batch_size=args.batch_size,
        model_overrides=json_arg(args.model_overrides, "--model-overrides"),
        jit_compile="auto" if args.xla is None else args.xla, verbose=1 if sys.stdout.isatty() else 2,
        time_budget=args.time_budget)
    if record is None:  # the time budget ran out: checkpointed, nothing recorded
        return 0
    print(replication.comparison(replication.get_row(args.row), record))
    if record["paired_baseline"]:
        print(f"paired with {record['paired_baseline']} on the same windows: ours - {record['paired_baseline']} = "
              f"{record['paired_gap']:+.4g} +- {record['paired_stderr']:.2g}")
    print(f"recorded in {args.results}")
    return 0


@hookimpl
def register_commands(add_command):
    """Add ``replicate``: its arguments, as the command has always taken them."""
    p = add_command("replicate", help="train and evaluate a published table row; --list shows the rows",
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Train ROW with its paper's protocol (model, optimiser, steps, batch) into a "
                                "run directory,\nevaluate its metric on the paper's evaluation set, print "
                                "the paper's value against ours\n(mean +- standard error over tasks) and "
                                "append the result to the results file.\nThe same --out again resumes an "
                                "unfinished run (a finished one is evaluated again).",
                    epilog="Budgets: paper (the paper's steps and evaluation size), small (a documented "
                           "fraction of the\npaper's steps; what each recorded run took is its wall time in "
                           "--list --json), or a number\nof steps (small evaluation). --baseline scores the "
                           "row's baselines on the same tasks.\nRows and their protocols: docs/replication.md.")
    p.add_argument("row", nargs="?", help="row id (see --list)")
    p.add_argument("--list", action="store_true", help="list the rows with our last recorded values, the "
                   "baselines and each row's status")
    p.add_argument("--json", action="store_true", help="with --list: every field of every row as JSON")
    p.add_argument("--baseline", action="store_true", help="score ROW's baselines (persistence, exact GP, "
                   "...) on its evaluation tasks instead of training, into --baselines")
    p.add_argument("--baselines", default=DEFAULT_BASELINES,
                   help=f"baselines CSV (default {DEFAULT_BASELINES})")
    p.add_argument("--budget", type=budget, default="small", help="paper, small (default) or N_STEPS")
    p.add_argument("--out", help="run directory (default runs/replicate/RUN-BUDGET); an existing run "
                   "of the row resumes")
    p.add_argument("--results", default=DEFAULT_RESULTS, help=f"results CSV (default {DEFAULT_RESULTS})")
    p.add_argument("--eval-tasks", type=positive_int, help="evaluate on this many tasks instead")
    p.add_argument("--task-config", help="task options to add, as JSON or a JSON/YAML file (e.g. a "
                   "local data path); recorded with the result")
    p.add_argument("--batch-size", type=positive_int, help="train and evaluate at this batch size instead "
                   "of the paper's (a smaller device); recorded with the result")
    p.add_argument("--model-overrides", help="model spec entries to merge into the row's, as JSON or a "
                   "JSON/YAML file (e.g. '{\"encoder\": {\"layers\": 1}}' for a smoke test); recorded with "
                   "the result")
    p.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                   help="stop training after this much wall time, checkpointed and not yet evaluated; "
                   "the same command again resumes it")
    p.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                   help="compile the train step with XLA (default: on without a distribution strategy)")
    p.set_defaults(func=run)
