"""Budget-matched comparisons with the authors' code on the replication rows.

The seed-spread test against a NumPy statement of it (Welch's standard error of the gap
between two means, each side's standard deviation over seeds with ddof 1); the CSV's
checks; a row shows a comparison only under its protocol and at the largest budget; the
packaged CSV is what ``benchmarks/parity/record_authors_code.py`` makes of the parity
results.
"""
import csv
import runpy
from pathlib import Path

import numpy as np
import pytest

from taylorformer.errors import RunDirectoryError
from taylorformer_replication import authors_code, replication

ROOT = Path(__file__).resolve().parents[2]


def numpy_test(ours, authors, higher_is_better):
    ours, authors = np.asarray(ours), np.asarray(authors)
    gap = ours.mean() - authors.mean()
    se = np.sqrt(ours.var(ddof=1) / ours.size + authors.var(ddof=1) / authors.size)
    if abs(gap) <= 2 * se:
        return "level with the authors' code", gap, se
    return ("above" if (gap > 0) == higher_is_better else "below") + " the authors' code", gap, se


@pytest.mark.parametrize("ours,authors,higher", [
    ([-0.86, -0.85, -0.84], [-0.85, -0.848, -0.83], True),          # overlapping: level
    ([0.47, 0.43, 0.40, 0.45], [0.31, 0.29, 0.33], True),            # ours clearly higher: above
    ([0.47, 0.43, 0.40], [0.31, 0.29, 0.33], False),                 # the same numbers as an NLL: below
    ([1.0, 1.1], [1.5, 1.6, 1.55, 1.45, 1.5], False),                 # lower NLL: above
])
def test_the_seed_spread_test_is_welchs_gap_against_twice_its_standard_error(ours, authors, higher):
    kind, gap, se = authors_code.seed_spread_test(ours, authors, higher)
    want_kind, want_gap, want_se = numpy_test(ours, authors, higher)
    assert kind == want_kind
    np.testing.assert_allclose([gap, se], [want_gap, want_se], rtol=1e-12)


def test_one_seed_on_a_side_is_not_compared():
    assert authors_code.seed_spread_test([0.1], [0.2, 0.3]) == ("not compared", None, None)


def write(path, lines, columns=authors_code.COLUMNS):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(lines)
    return path


def line(row, side, seed, value, steps=100, protocol=2):
    return {"row": row, "side": side, "seed": seed, "steps": steps, "protocol": protocol, "metric": "loglik",
            "value": value, "stderr": 0.01, "num_tasks": 64, "authors_code": "someone/code@abc1234",
            "setting": "smaller", "source": "benchmarks/parity/x.json", "device": "CPU", "commit": "abc", "date": ""}


@pytest.mark.parametrize("change,message", [
    (lambda ln: ln.update(side="theirs"), "side 'theirs' is not one of"),
    (lambda ln: ln.update(seed="one"), "seed 'one' is not a number"),
    (lambda ln: ln.update(value="nan"), "value nan is not finite"),
])
def test_a_bad_line_is_refused_naming_the_file_and_line(tmp_path, change, message):
    lines = [line("taylorformer-gp-eq", "ours", 0, 0.4), line("taylorformer-gp-eq", "authors", 0, 0.3)]
    change(lines[1])
    path = write(tmp_path / "cmp.csv", lines)
    with pytest.raises(RunDirectoryError, match=rf"{path}.*line 3 \({message}"):
        authors_code.read_comparisons(str(path))


def test_other_columns_are_refused(tmp_path):
    path = write(tmp_path / "cmp.csv", [], columns=authors_code.COLUMNS[:-1])
    with pytest.raises(RunDirectoryError, match="has columns"):
        authors_code.read_comparisons(str(path))


def test_a_row_shows_its_comparison_under_its_protocol_at_the_largest_budget(tmp_path):
    row, other = replication.get_row("taylorformer-gp-eq"), replication.get_row("tnp-a-gp-eq")
    ours, authors = [0.47, 0.43, 0.40], [0.31, 0.29, 0.45]
    lines = ([line(row.id, "ours", s, v, steps=2000) for s, v in enumerate(ours)]
             + [line(row.id, "authors", s, v, steps=2000) for s, v in enumerate(authors)]
             + [line(row.id, "ours", 0, 9.0, steps=500), line(row.id, "authors", 0, -9.0, steps=500)]
             + [line(other.id, "ours", s, 0.1, protocol=other.protocol_version + 1) for s in range(3)]
             + [line(other.id, "authors", s, 0.2, protocol=other.protocol_version + 1) for s in range(3)])
    for ln in lines[:8]:
        ln["protocol"] = row.protocol_version
    path = str(write(tmp_path / "cmp.csv", lines))
    listed = {item["id"]: item for item in replication.list_rows(results=str(tmp_path / "none.csv"),
                                                                 baselines=str(tmp_path / "none-b.csv"),
                                                                 comparisons=path)}
    shown = listed[row.id]["authors_code"]
    kind, gap, se = numpy_test(ours, authors, True)
    assert shown["steps"] == 2000 and shown["status_kind"] == kind
    assert shown["status"] == f"{kind} at 2,000 steps (0.8% of the paper's)"
    assert [r["value"] for r in shown["ours"]["runs"]] == ours
    np.testing.assert_allclose([shown["gap"], shown["gap_se"]], [gap, se])
    assert listed[other.id]["authors_code"] is None  # another protocol's runs are not this row's
    table = replication.markdown_authors_code(list(listed.values()))
    assert f"| `{row.id}` |" in table and "0.470 0.430 0.400" in table and "tnp-a-gp-eq" not in table


def test_the_packaged_comparisons_are_the_parity_results():
    script = runpy.run_path(str(ROOT / "benchmarks" / "parity" / "record_authors_code.py"), run_name="record")
    assert script["main"](["--check"]) == 0
    recorded = authors_code.read_comparisons()
    assert recorded, "no comparison recorded"
    for row_id, lines in recorded.items():
        row = replication.get_row(row_id)
        assert {ln["metric"] for ln in lines} == {row.metric}
