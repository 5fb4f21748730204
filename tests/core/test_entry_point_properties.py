"""Property-based tests of the command line's other entry points (issue 37): ``predict``,
``evaluate``, ``plot``, ``replicate`` and model loading.

Every generated case ends in a correct result (exit 0, the output readable and right) or
one ``error:`` line without escape codes and exit 2; the input files, the run directory
and any existing output are byte-identical afterwards unless writing them was the
command's purpose. The CLI runs in-process on one tiny trained run shared by the module.
"""
import json
import os
import types
import zipfile

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import taylorformer as tfm
from taylorformer import cli
from taylorformer_replication import replication
from taylorformer.workflow import runs, training
from taylorformer.checks import SIZE_BOUNDS
from taylorformer.errors import SpecError

SETTINGS = settings(deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
TASK = {"num_context": [3, 6], "num_target": 6}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("props") / "run"
    training.train(model=TINY, task="gp", task_config=TASK, out_dir=str(out), steps=2, batch_size=2,
                   val_every=2, val_batches=1, verbose=0, tensorboard=False, jit_compile=False, evaluate=False)
    return out


def snapshot(*roots):
    """``{path: bytes}`` of every file under ``roots`` (symlinks by their target name)."""
    found = {}
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                found[path] = ("link", os.readlink(path)) if os.path.islink(path) else open(path, "rb").read()
    return found


def run_cli(argv, capsys):
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_outcome(code, err, argv):
    """Exit 0, or exit 2 with one ``error:`` line and no escape codes (never a crash)."""
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
        assert "\x1b" not in err and "Traceback" not in err, (argv, err)


# ---------------------------------------------------------------- predict
OUTPUTS = ["new.npz", "new.csv", "new.nc", "existing.npz", "same as input", "hard link to input",
           "symlink to input", "same as context", "RUN/metrics.csv", "RUN/spec.json", "RUN/model.keras",
           "RUN/checkpoints/latest", "RUN/new.npz", "RUN", "missing/dir.npz", "new.txt"]


@st.composite
def predict_cases(draw):
    return {"inputs": draw(st.sampled_from(["npz", "csv+context", "npy+context"])),
            "points": draw(st.integers(1, 6)),
            "output": draw(st.sampled_from(OUTPUTS)),
            "levels": draw(st.one_of(st.none(), st.lists(st.sampled_from([0.05, 0.1, 0.1000001, 0.5, 0.9]),
                                                         min_size=1, max_size=3))),
            "samples": draw(st.sampled_from([0, 2, 10**12]))}


def test_predict_never_overwrites_what_it_reads_or_the_run(run_dir, tmp_path, capsys):
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=14)
    @given(predict_cases())
    def check(case):
        event(case["output"])
        work = tmp_path / f"case{next(cases)}"
        work.mkdir()
        rng = np.random.default_rng(case["points"])
        xc, yc = rng.uniform(-2, 2, (5, 1)), rng.normal(size=(5, 1))
        xt = rng.uniform(-2, 2, (case["points"], 1))
        context = None
        if case["inputs"] == "npz":
            inputs = work / "query.npz"
            np.savez(inputs, xc=xc, yc=yc, xt=xt)
        else:
            context = work / "context.csv"
            pd.DataFrame({"x": xc[:, 0], "y": yc[:, 0]}).to_csv(context, index=False)
            inputs = work / ("inputs.csv" if case["inputs"] == "csv+context" else "inputs.npy")
            if inputs.suffix == ".csv":
                pd.DataFrame({"x": xt[:, 0]}).to_csv(inputs, index=False)
            else:
                np.save(inputs, xt)
        (work / "existing.npz").write_bytes(b"an existing file")
        name = case["output"]
        output = {"same as input": inputs, "same as context": context or inputs,
                  "hard link to input": work / f"hard{inputs.suffix}",
                  "symlink to input": work / f"link{inputs.suffix}", "RUN": run_dir}.get(name)
        if name == "hard link to input":
            os.link(inputs, output)
        elif name == "symlink to input":
            os.symlink(inputs, output)
        elif output is None:
            output = run_dir / name[4:] if name.startswith("RUN/") else work / name
        before = snapshot(work, run_dir)
        argv = ["predict", run_dir, "--input", inputs, "--output", output, "--samples", case["samples"]]
        argv += ["--context", context] if context else []
        argv += ["--quantiles", *case["levels"]] if case["levels"] else []
        code, _, err = run_cli(argv, capsys)
        assert_outcome(code, err, argv)
        after = snapshot(work, run_dir)
        written = {str(output)} if code == 0 else set()
        assert {k: v for k, v in after.items() if k not in written} == before, (argv, err)
        levels = case["levels"] or [0.05, 0.5, 0.95]
        refused = (name in ("same as input", "same as context", "hard link to input", "symlink to input", "RUN",
                            "missing/dir.npz", "new.txt") or (name.startswith("RUN/") and name != "RUN/new.npz")
                   or case["samples"] == 10**12 or len({f"{q:g}" for q in levels}) < len(levels))
        assert (code == 2) == refused, (argv, err)
        if code == 0:
            if output.suffix == ".npz":
                with np.load(output) as got:
                    assert got["mean"].shape == (1, case["points"], 1)
                    assert got["quantiles"].shape[0] == len(levels)
                    assert np.isfinite(got["mean"]).all() and (got["stddev"] > 0).all()
            elif output.suffix == ".csv":
                frame = pd.read_csv(output)
                assert len(frame) == case["points"] and len([c for c in frame if c.startswith("q")]) == len(levels)
            assert not [n for n in os.listdir(output.parent) if n.startswith(".tmp-")]

    check()


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(tmp_path):
    from taylorformer.files import atomic_write_text

    target = tmp_path / "out.csv"
    dead = tmp_path / ".tmp-out.csv-999999999-abc"  # no such pid
    dead.write_text("half written")
    mine = tmp_path / f".tmp-out.csv-{os.getpid()}-xyz"  # a live writer's: kept
    mine.write_text("in progress")
    atomic_write_text(str(target), "done")
    assert target.read_text() == "done" and not dead.exists() and mine.exists()


# ---------------------------------------------------------------- evaluate and plot
@st.composite
def evaluate_plot_cases(draw):
    command = draw(st.sampled_from(["evaluate", "plot"]))
    args = ["--checkpoint", draw(st.sampled_from(["best", "model"]))]
    if command == "evaluate":
        args += ["--batches", draw(st.integers(1, 2)), "--batch-size", draw(st.integers(1, 3)),
                 "--split", draw(st.sampled_from(["val", "test"]))]
        args += ["--samples", 1] if draw(st.booleans()) else []  # a conditional model: refused
    else:
        args += ["--num-tasks", draw(st.integers(1, 2)), "--samples", draw(st.integers(0, 2))]
        args += ["--out", draw(st.sampled_from(["OUT/p.png", "OUT/p.svg", "OUT/p.xyz", "OUT/missing/p.png",
                                                "RUN/checkpoints/latest", "RUN/metrics.csv", "RUN/best.keras",
                                                "RUN/checkpoints", "OUT/existing.png"]))]
    return command, args


def test_evaluate_and_plot_leave_the_run_as_it_was(run_dir, tmp_path, capsys):
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=10)
    @given(evaluate_plot_cases())
    def check(case):
        command, args = case
        work = tmp_path / f"case{next(cases)}"
        work.mkdir()
        (work / "existing.png").write_bytes(b"not yet a plot")
        args = [str(a).replace("OUT", str(work)).replace("RUN", str(run_dir)) for a in args]
        event(f"{command} {args[-1] if command == 'plot' else ''}")
        before = snapshot(run_dir, work)
        argv = [command, run_dir, *args]
        code, out, err = run_cli(argv, capsys)
        assert_outcome(code, err, argv)
        written = {args[-1]} if command == "plot" and code == 0 else set()
        assert {k: v for k, v in snapshot(run_dir, work).items() if k not in written} == before, (argv, err)
        if command == "evaluate":
            assert (code == 2) == ("--samples" in args), (argv, err)
            if code == 0:
                result = json.loads(out)
                assert result["num_tasks"] >= 1 and result["num_tasks_skipped"] == 0
                assert np.isfinite(result["loglik"]["mean"]) and 0 <= result["coverage95"] <= 1
        else:
            ok = args[-1].startswith(str(work)) and "/missing/" not in args[-1] and not args[-1].endswith(".xyz")
            assert (code == 0) == ok, (argv, err)
            if code == 0:
                data = open(args[-1], "rb").read()
                assert data[:8] == b"\x89PNG\r\n\x1a\n" if args[-1].endswith(".png") else b"<svg" in data[:400]

    check()


# ---------------------------------------------------------------- replicate
ROW = "taylorformer-gp-periodic"
LINE = ",".join(["r", "small", "2", "loglik", "1.5", "0.1", "2", "1", "", "cpu", "1", "v", "c", "cmd", "d", "o", "iid", "1"])


@st.composite
def results_files(draw):
    kind = draw(st.sampled_from(["missing", "good", "binary", "text", "short line", "bad number", "directory"]))
    header = ",".join(replication.RESULT_COLUMNS) + "\n"
    content = {"good": header + LINE + "\n", "binary": draw(st.binary(min_size=1, max_size=40)) + b"\xff\x00",
               "text": draw(st.text(max_size=40)), "short line": header + LINE + "\n" + "a,b\n",
               "bad number": header + LINE.replace("1.5", draw(st.sampled_from(["x", "1.5.1", "--"]))) + "\n"}.get(kind)
    return kind, content


def test_replicate_keeps_every_line_and_refuses_bad_results_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(training, "train", lambda *a, **k: types.SimpleNamespace(steps_done=k["steps"]))
    monkeypatch.setattr(runs, "load_run", lambda *a, **k: (None, None, None))
    monkeypatch.setattr(replication, "_task_values", lambda *a, **k: (np.array([1.0, 2.0]), 0))
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=25)
    @given(results_files())
    def check(case):
        kind, content = case
        event(kind)
        work = tmp_path / f"case{next(cases)}"
        work.mkdir()
        results = work / "results.csv"
        if kind == "directory":
            results.mkdir()
        elif content is not None:
            (results.write_bytes if isinstance(content, bytes) else results.write_text)(content)
        before = snapshot(work)
        argv = ["replicate", ROW, "--budget", "2", "--out", work / "run", "--results", results]
        code, out, err = run_cli(argv, capsys)
        assert_outcome(code, err, argv)
        if code == 2:
            assert str(results) in err and snapshot(work) == before, (argv, err)
            return
        assert "result: {" in out
        lines = replication.read_results(str(results))
        assert lines[-1]["value"] == "1.5" and lines[-1]["row"] == ROW
        assert len(lines) == (2 if kind == "good" else 1)

    check()


# ---------------------------------------------------------------- model loading
OPTIONS = [("encoder", "layers"), ("encoder", "width"), ("encoder", "num_heads"), ("encoder", "head_dim"),
           ("head", "width"), ("head", "hidden_layers"), (None, "dim_x")]


def test_model_files_with_any_size_load_or_are_refused_naming_the_option(tmp_path):
    good = tmp_path / "good.keras"
    tfm.build_model(TINY).save(good)
    config = json.loads(zipfile.ZipFile(good).read("config.json"))
    cases = iter(range(10**6))

    def spec_of(tree):
        if isinstance(tree, dict):
            if "dim_x" in tree and "encoder" in tree:
                return tree
            for value in tree.values():
                found = spec_of(value)
                if found is not None:
                    return found
        return None

    @settings(SETTINGS, max_examples=12)
    @given(st.sampled_from(OPTIONS), st.one_of(st.integers(1, 3), st.integers(2**20, 2**63),
                                               st.integers(-5, 0)))
    def check(option, value):
        section, key = option
        event(f"{key} {'small' if 0 < value < 4 else 'bad'}")
        tree = json.loads(json.dumps(config))
        spec = spec_of(tree)
        (spec[section] if section else spec)[key] = value
        path = tmp_path / f"case{next(cases)}.keras"
        with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as dst:
            for item in src.infolist():
                dst.writestr(item, json.dumps(tree) if item.filename == "config.json" else src.read(item.filename))
        bound = SIZE_BOUNDS[key]
        low = 0 if key == "hidden_layers" else 1
        if low <= value <= bound:
            try:  # within bounds: it builds; the saved weights may not fit the new shapes
                model = tfm.load_model(str(path))
            except (ValueError, SpecError):
                return
            assert (model.spec[section] if section else model.spec)[key] == value
            return
        with pytest.raises(SpecError, match=rf"'{key}' must be an int in \[{low}, {bound}\], got {value}"):
            tfm.load_model(str(path))

    check()


def test_error_lines_drop_escape_codes_and_keras_wrapping():
    model = tfm.build_model(TINY)
    batch = {k: np.zeros((1, 3, 1), np.float32) for k in ("xc", "yc", "xt", "yt")}
    batch["mask_t"] = np.zeros((1, 3), np.float32)  # a mask the caller passed: no target left
    with pytest.raises(Exception) as info:
        model(batch)
    assert "\x1b[" in str(info.value) and "Arguments received" in str(info.value)  # Keras' wrapping
    assert cli.error_message(info.value) == "batch: task 0 has no real target point (mask_t is all zero)"
    assert cli.one_line("a \x1b[31mred\x1b[0m\nline\x1b]0;title\x07 \x07end") == "a red line end"
