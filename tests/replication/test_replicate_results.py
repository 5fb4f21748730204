"""``replicate`` checks its results file before training (issue 37, item 6): a directory,
a binary file, a malformed line or a place no file can be written is refused up front,
naming the file; a result computed is printed before it is written, and one that cannot
be written is in the error (never lost)."""
import json
import os
import types

import numpy as np
import pytest

from taylorformer import cli
from taylorformer.errors import RunDirectoryError
from taylorformer.workflow import runs, training
from taylorformer_replication import replication
from taylorformer_replication.replication import RESULT_COLUMNS

ROW = "taylorformer-gp-periodic"


@pytest.fixture
def no_training(monkeypatch):
    """Training and evaluation replaced by stubs (value 1.5 over two tasks); ``calls``
    counts the trainings."""
    calls = []
    monkeypatch.setattr(training, "train",
                        lambda *a, **k: calls.append(k) or types.SimpleNamespace(steps_done=k["steps"]))
    monkeypatch.setattr(runs, "load_run", lambda *a, **k: (None, None, None))
    monkeypatch.setattr(replication, "_task_values", lambda *a, **k: (np.array([1.0, 2.0]), 0))
    return calls


def run_cli(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def good_line():
    return {c: "1" for c in RESULT_COLUMNS}


def write_lines(path, lines):
    text = ",".join(RESULT_COLUMNS) + "\n" + "".join(",".join(v for v in line.values()) + "\n" for line in lines)
    path.write_text(text)


@pytest.mark.parametrize("case", ["directory", "binary", "fields", "number", "header", "parent is a file"])
def test_bad_results_files_are_refused_before_training(tmp_path, capsys, no_training, case):
    results = tmp_path / "results.csv"
    if case == "directory":
        results.mkdir()
    elif case == "binary":
        results.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 20)
    elif case == "fields":
        write_lines(results, [good_line()])
        with open(results, "a") as fh:
            fh.write("1,2,3\n")
    elif case == "number":
        write_lines(results, [good_line(), {**good_line(), "value": "abc"}])
    elif case == "header":
        results.write_text("a,b\n1,2\n")
    else:
        (tmp_path / "file").write_text("x")
        results = tmp_path / "file" / "results.csv"
    before = sorted(os.listdir(tmp_path))
    code, out, err = run_cli(["replicate", ROW, "--budget", "2", "--out", tmp_path / "run", "--results", results],
                             capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and str(results) in err, err
    assert "\x1b" not in err and not no_training
    assert sorted(os.listdir(tmp_path)) == before
    if case in ("fields", "number"):
        assert "line 3" in err


def test_a_result_is_printed_before_it_is_written_and_kept_when_writing_fails(tmp_path, capsys, no_training,
                                                                             monkeypatch):
    results = tmp_path / "results.csv"
    code, out, _ = run_cli(["replicate", ROW, "--budget", "2", "--out", tmp_path / "run", "--results", results],
                           capsys)
    assert code == 0 and len(no_training) == 1
    printed = json.loads(out.split("result: ", 1)[1].splitlines()[0])
    assert printed["value"] == 1.5 and replication.read_results(str(results))[0]["value"] == "1.5"

    def disk_full(path, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(replication, "append_result", disk_full)
    with pytest.raises(RunDirectoryError, match="could not be recorded") as info:
        replication.replicate(ROW, budget=2, out=str(tmp_path / "run2"), results=str(results), verbose=0)
    kept = json.loads(str(info.value).split("it is: ", 1)[1])
    assert kept["value"] == 1.5 and kept["row"] == ROW


def test_a_time_budget_stops_checkpointed_and_the_same_call_resumes(tmp_path):
    """A paper budget over several sessions: the first call stops at the time budget and
    records nothing; the same call again resumes, finishes and records the run's training
    time over both sessions (metrics.csv's clock goes on from the first)."""
    out, results = str(tmp_path / "run"), str(tmp_path / "results.csv")
    tiny = {"encoder": {"layers": 1, "num_heads": 1, "head_dim": 4, "enc_dim": 4}}
    options = dict(budget=40, out=out, results=results, eval_tasks=4, model_overrides=tiny, verbose=0)
    assert replication.replicate(ROW, time_budget=1e-6, **options) is None
    assert not os.path.exists(results)
    first = replication.RunDirectory(out).metrics_rows()
    assert int(first[-1]["step"]) < 40
    record = replication.replicate(ROW, **options)
    rows = replication.RunDirectory(out).metrics_rows()
    assert int(rows[-1]["step"]) == 40 and record["steps"] == 40
    elapsed = [float(r["elapsed_s"]) for r in rows]
    assert elapsed == sorted(elapsed) and elapsed[len(first)] >= elapsed[len(first) - 1]
    assert record["wall_s"] >= elapsed[-1]
    assert [line["row"] for line in replication.read_results(results)] == [ROW]
