"""Budget-matched comparisons with the authors' code: is ours level with it at the budget
this machine affords?

A paper's number comes from the authors' code at the paper's budget, which the machines
here cannot afford for most rows. What they can show is whether ours learns as the
authors' code does at the same budget: both trained on the same training batches of the
row's task, from several seeds each, and scored on the same test tasks. The parity
folders of ``benchmarks/parity`` run these comparisons; ``benchmarks/parity/
record_authors_code.py`` writes their final scores, one line per run
(:data:`COLUMNS`), to the packaged :data:`RECORDED_COMPARISONS`. A line's ``setting``
says where the comparison departs from the row (smaller model or task sizes, fewer
steps), so a matched value is compared with the authors' code, never with the paper.

:func:`comparison` gives a row's comparison and its status (:data:`STATUSES`) by the
seed-spread test (:func:`seed_spread_test`): the gap between the two sides' mean scores
against twice its standard error over seeds.
"""
import csv
import math
import os

from taylorformer.errors import RunDirectoryError

#: the recorded comparisons, shipped with the package
RECORDED_COMPARISONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replication_authors_code.csv")
#: one line per training run: the row, the side (``ours`` or ``authors``), the run's seed
#: and steps, the row's protocol version it ran under, its score in the row's metric (mean over the test tasks, its standard error
#: over them, how many), the authors' repository at its commit, the setting (what departs
#: from the row), the parity results file it comes from, and where and when it ran
COLUMNS = ("row", "side", "seed", "steps", "protocol", "metric", "value", "stderr", "num_tasks", "authors_code", "setting",
           "source", "device", "commit", "date")
SIDES = ("ours", "authors")
#: the kinds of a comparison's status; ``not compared`` where a side has fewer than two seeds
STATUSES = ("level with the authors' code", "above the authors' code", "below the authors' code", "not compared")
#: the test, as the rows state it
TEST = ("seed-spread test: level when the gap between the two sides' means is within twice its standard error, "
        "sqrt(s_ours^2 / n_ours + s_authors^2 / n_authors) with each side's standard deviation over seeds (ddof 1)")
NUMBERS = {"seed": int, "steps": int, "protocol": int, "value": float, "stderr": float, "num_tasks": int}


def read_comparisons(path=RECORDED_COMPARISONS):
    """Row id -> its lines in the comparisons CSV at ``path`` (numbers parsed; ``stderr``
    None where empty). RunDirectoryError naming the file and line where it is not a CSV of
    :data:`COLUMNS`, a side is not in :data:`SIDES`, a number does not parse or a score
    is not finite."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            fields, lines = reader.fieldnames, list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RunDirectoryError(f"comparisons file {path} is not a readable CSV text file "
                                f"({type(exc).__name__}: {exc})") from None
    if tuple(fields or ()) != COLUMNS:
        raise RunDirectoryError(f"comparisons file {path} has columns {fields}, not {list(COLUMNS)}")
    by_row = {}
    for number, line in enumerate(lines, start=2):
        problem = "wrong number of fields" if None in line or None in line.values() else None
        if problem is None and line["side"] not in SIDES:
            problem = f"side {line['side']!r} is not one of {list(SIDES)}"
        for column, kind in NUMBERS.items():
            if problem is not None:
                break
            if column == "stderr" and line[column] == "":
                line[column] = None
                continue
            try:
                line[column] = kind(line[column])
            except ValueError:
                problem = f"{column} {line[column]!r} is not a number"
        if problem is None and not math.isfinite(line["value"]):
            problem = f"value {line['value']} is not finite"
        if problem is not None:
            raise RunDirectoryError(f"comparisons file {path} is malformed at line {number} ({problem})")
        by_row.setdefault(line["row"], []).append(line)
    return by_row


def _summary(values):
    """``{mean, se, min, max, seeds}`` of one side's scores (se None for one value)."""
    n = len(values)
    mean = sum(values) / n
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else None
    return {"mean": mean, "se": se, "min": min(values), "max": max(values), "seeds": n}


def seed_spread_test(ours, authors, higher_is_better=True):
    """``(kind, gap, gap_se)`` of two sides' scores over seeds (lists of floats): ``gap``
    the mean of ours minus the authors' code's (in the metric's units), ``gap_se``
    :data:`TEST`'s standard error, ``kind`` one of :data:`STATUSES` (above and below mean
    better and worse: for an NLL, below is higher)."""
    if len(ours) < 2 or len(authors) < 2:
        return "not compared", None, None
    a, b = _summary(ours), _summary(authors)
    gap, gap_se = a["mean"] - b["mean"], math.hypot(a["se"], b["se"])
    if abs(gap) <= 2 * gap_se:
        return STATUSES[0], gap, gap_se
    better = gap > 0 if higher_is_better else gap < 0
    return (STATUSES[1] if better else STATUSES[2]), gap, gap_se


def comparison(row, lines):
    """The comparison of ``row`` from its :func:`read_comparisons` lines under its protocol
    version (None where it has none) at the largest budget they ran: the authors' code,
    the setting, ``steps`` and ``budget_fraction`` (of the paper's steps), each side's
    per-seed scores and summary, the gap with its standard error, the test,
    ``status_kind`` (:data:`STATUSES`), ``status`` (the kind at its budget) and ``reason``."""
    lines = [line for line in lines or () if line["protocol"] == row.protocol_version]
    if not lines or row.training is None:
        return None
    steps = max(line["steps"] for line in lines)
    at = [line for line in lines if line["steps"] == steps]
    sides = {side: sorted((line["seed"], line["value"]) for line in at if line["side"] == side) for side in SIDES}
    scores = {side: [value for _, value in runs] for side, runs in sides.items()}
    kind, gap, gap_se = seed_spread_test(scores["ours"], scores["authors"], row.higher_is_better)
    counts = f"{len(sides['ours'])} seeds ours, {len(sides['authors'])} the authors' code"
    if kind == "not compared":
        reason = f"{counts}: the test needs two or more on each side"
    else:
        reason = f"ours - the authors' code = {gap:+.3g} +- {gap_se:.2g} over seeds ({counts})"
    fraction = steps / row.training.steps
    return {"authors_code": at[0]["authors_code"], "setting": at[0]["setting"], "metric": at[0]["metric"],
            "steps": steps, "budget_fraction": fraction,
            **{side: {"runs": [{"seed": s, "value": v} for s, v in sides[side]],
                      **(_summary(scores[side]) if scores[side] else {})} for side in SIDES},
            "gap": gap, "gap_se": gap_se, "test": TEST, "status_kind": kind,
            "status": f"{kind} at {steps:,} steps ({100 * fraction:.2g}% of the paper's)", "reason": reason,
            "sources": sorted({line["source"] for line in at}), "device": at[0]["device"]}
