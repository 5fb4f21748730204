"""The command line turns bad input into one line on stderr and exit code 2 (issue 19).

Every case fails before any training: ``Trainer.fit`` is replaced by a function that
fails the test if it is reached (except where the run directory is checked in ``fit``).
"""
import json

import pytest

from taylorformer import cli
from taylorformer.workflow import runs, training

FIT = training.Trainer.fit


@pytest.fixture(autouse=True)
def never_train(monkeypatch):
    def fit(*args, **kwargs):
        raise AssertionError("a bad-input case reached training")

    monkeypatch.setattr(training.Trainer, "fit", fit)


def run_cli(argv, capsys):
    """``(exit code, stderr)`` of ``taylorformer ARGV`` run in-process."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse rejects an argument
        code = exc.code
    return code, capsys.readouterr().err


def assert_one_line(code, err, *words):
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


def spec_file(tmp_path, spec, name="spec.json"):
    path = tmp_path / name
    path.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    return path


@pytest.mark.parametrize("spec, words", [
    ({"preset": "cnp", "head": {"width": -1}}, ["head", "width", "-1", "int in [1, 8192]"]),
    ({"preset": "cnp", "head": {"width": "abc"}}, ["head", "width", "'abc'"]),
    ({"preset": "cnp", "head": {"hidden_layers": -2}}, ["hidden_layers", "-2", "int in [0, 128]"]),
    ({"preset": "cnp", "head": {"activation": "relux"}}, ["activation", "'relux'", "did you mean 'relu'"]),
    ({"preset": "cnp", "dtype_policy": "float33"}, ["dtype_policy", "'float33'", "mixed_bfloat16"]),
    ({"preset": "cnp", "encoder": {"layers": -5}}, ["deepset encoder", "layers", "-5"]),
    ({"preset": "cnp", "encoder": {"layers": 0}}, ["deepset encoder", "layers", "0"]),
])
def test_bad_spec_values_are_one_line(tmp_path, capsys, spec, words):
    path = spec_file(tmp_path, spec)
    code, err = run_cli(["train", "--model", path, "--out", tmp_path / "run", "--steps", 1], capsys)
    assert_one_line(code, err, *words)


def test_unknown_dtype_policy_flag(tmp_path, capsys):
    code, err = run_cli(["train", "--dtype-policy", "mixed_bf16", "--out", tmp_path / "run"], capsys)
    assert_one_line(code, err, "--dtype-policy", "'mixed_bf16'", "mixed_bfloat16")


def test_malformed_yaml_names_file_and_line(tmp_path, capsys):
    path = spec_file(tmp_path, "preset: cnp\nencoder: [1,\n  2\nhead: {", "spec.yaml")
    code, err = run_cli(["train", "--model", path, "--out", tmp_path / "run"], capsys)
    assert_one_line(code, err, str(path), "line 4", "invalid YAML")


def test_malformed_json_names_file_and_line(tmp_path, capsys):
    path = spec_file(tmp_path, '{\n  "preset": "cnp",\n}', "spec.json")
    code, err = run_cli(["train", "--model", path, "--out", tmp_path / "run"], capsys)
    assert_one_line(code, err, str(path), "line 3", "invalid JSON")


def test_yaml_python_tag_is_refused_and_not_run(tmp_path, capsys):
    planted = tmp_path / "planted"
    path = spec_file(tmp_path, f"preset: cnp\nencoder: !!python/object/apply:os.mkdir ['{planted}']\n",
                     "spec.yaml")
    code, err = run_cli(["train", "--model", path, "--out", tmp_path / "run"], capsys)
    assert_one_line(code, err, str(path), "line 2", "!!python/object")
    assert not planted.exists()


def test_out_naming_an_existing_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(training.Trainer, "fit", FIT)  # the run directory may be checked there
    target = tmp_path / "notes.txt"
    target.write_bytes(b"keep me\n")
    code, err = run_cli(["train", "--model", "cnp", "--out", target, "--steps", 1], capsys)
    assert_one_line(code, err, str(target))
    assert target.read_bytes() == b"keep me\n"


@pytest.mark.parametrize("argv, words", [
    (["evaluate", "RUN", "--batches", "0"], ["--batches", "positive int", "'0'"]),
    (["evaluate", "RUN", "--batch-size", "-3"], ["--batch-size", "'-3'"]),
    (["evaluate", "RUN", "--batch-size", "0"], ["--batch-size", "'0'"]),
    (["evaluate", "RUN", "--samples", "-1"], ["--samples", "int >= 0"]),
    (["plot", "RUN", "--num-tasks", "0"], ["--num-tasks", "positive int", "'0'"]),
    (["plot", "RUN", "--samples", "-1"], ["--samples", "int >= 0", "'-1'"]),
    (["train", "--lr", "inf"], ["--lr", "finite number > 0", "'inf'"]),
    (["train", "--lr", "-0.1"], ["--lr", "'-0.1'"]),
    (["train", "--time-budget", "nan"], ["--time-budget", "finite number > 0", "'nan'"]),
    (["train", "--time-budget", "-5"], ["--time-budget", "'-5'"]),
    (["train", "--steps", "0"], ["--steps", "positive int"]),
    (["train", "--warmup-steps", "-1"], ["--warmup-steps", "int >= 0"]),
    (["train", "--schedule", "cosin"], ["--schedule", "'cosin'"]),
])
def test_bad_numbers_and_choices_are_one_line(tmp_path, capsys, argv, words):
    argv = [str(tmp_path) if a == "RUN" else a for a in argv]
    code, err = run_cli(argv, capsys)
    assert_one_line(code, err, *words)


def test_missing_run_directory_and_task_config(tmp_path, capsys):
    code, err = run_cli(["evaluate", tmp_path / "nowhere"], capsys)
    assert_one_line(code, err, str(tmp_path / "nowhere"))
    code, err = run_cli(["train", "--task-config", tmp_path / "none.yaml", "--out", tmp_path / "run"], capsys)
    assert_one_line(code, err, "--task-config", "none.yaml")
    code, err = run_cli(["train", "--task-config", "{not json", "--out", tmp_path / "run"], capsys)
    assert_one_line(code, err, "--task-config")


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(tmp_path, capsys, where):
    argv = ["evaluate", tmp_path / "nowhere"]
    argv = ["--debug"] + argv if where == "before" else argv + ["--debug"]
    code, err = run_cli(argv, capsys)
    assert code == 2
    assert "Traceback (most recent call last)" in err and "RunDirectoryError" in err
    assert err.strip().splitlines()[-1].startswith("error: ")


def test_unexpected_exception_is_one_line_with_exit_code_1(tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("internal\nstate")

    monkeypatch.setattr(runs, "evaluate_run", broken)
    code, err = run_cli(["evaluate", tmp_path], capsys)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0] == ("error: unexpected RuntimeError: internal state (rerun with --debug for the "
                        "traceback)")
