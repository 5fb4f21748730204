"""A fast, quiet command line and an import that leaves the process alone (issue 39, item 4).

``--help``, ``--version`` and argument errors answer without loading TensorFlow (or NumPy);
no command prints TensorFlow's C++ log lines unless ``--debug``; ``import taylorformer``
sets no environment variable and leaves file descriptor 2 alone, and plain
``keras.models.load_model`` still works after it. Each check runs in a fresh process.
"""
import json
import os
import subprocess
import sys

import pytest

from taylorformer.cli import FRAMEWORK_LOG

#: what TensorFlow and absl print at start-up on a machine without CUDA (the issue's list)
NOISE = ("oneDNN custom operations", "cuInit", "cuda drivers", "absl::InitializeLog",
         "cpu_feature_guard", "rebuild TensorFlow")

PROBE = """
import json, sys
import taylorformer_cli
try:
    code = taylorformer_cli.main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in ("tensorflow", "keras", "numpy") if m in sys.modules)
print("PROBE " + json.dumps({"code": code, "loaded": loaded}))
"""


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TAYLORFORMER_LAZY_IMPORT")}
    return {**env, **extra}


def _probe(argv):
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                          env=_env(), timeout=120)
    lines = done.stdout.splitlines()
    assert lines and lines[-1].startswith("PROBE "), done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(lines[-1][6:]), "\n".join(lines[:-1]), done.stderr


@pytest.mark.parametrize("argv,code,where,text", [
    (["--version"], 0, "out", "taylorformer 0.1.0"),
    (["--help"], 0, "out", "plugins,train,evaluate"),
    (["train", "--help"], 0, "out", "--time-budget SECONDS"),
    (["predict", "--help"], 0, "out", "--chunk-size"),
    (["train", "--steps", "-3"], 2, "err", "error: taylorformer train: argument --steps: must be a positive int"),
    (["plugins", "--kind", "nope"], 2, "err", "invalid choice: 'nope'"),
    (["nosuchcommand"], 2, "err", "error: taylorformer: argument command: invalid choice"),
    (["replicate", "--budget", "huge"], 2, "err", "must be 'paper', 'small' or a number of steps"),
])
def test_help_version_and_argument_errors_load_no_tensorflow(argv, code, where, text):
    result, out, err = _probe(argv)
    assert result["code"] == code
    assert text in (out if where == "out" else err), (out, err)
    assert result["loaded"] == [], f"{argv} loaded {result['loaded']}"
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def _run_cli(*argv, timeout=300):
    return subprocess.run([sys.executable, "-m", "taylorformer_cli", *argv], capture_output=True, text=True,
                          env=_env(), timeout=timeout)


def _framework_lines(stderr):
    return [line for line in stderr.splitlines() if FRAMEWORK_LOG.match(line) or any(n in line for n in NOISE)]


def test_plugins_prints_no_framework_log_lines_and_debug_shows_them():
    quiet = _run_cli("plugins", "--kind", "likelihood")
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "normal (gaussian)" in quiet.stdout
    assert _framework_lines(quiet.stderr) == [], quiet.stderr
    loud = _run_cli("plugins", "--kind", "likelihood", "--debug")
    assert loud.returncode == 0 and loud.stdout == quiet.stdout
    if not _framework_lines(loud.stderr):
        pytest.skip("this TensorFlow prints no start-up log lines here: nothing to hide")
    assert all(FRAMEWORK_LOG.match(line) or line.startswith(("To enable", "WARNING"))
               for line in _framework_lines(loud.stderr)), loud.stderr


@pytest.mark.slow
def test_train_and_evaluate_print_no_framework_log_lines(tmp_path):
    run = tmp_path / "run"
    model = json.dumps({"preset": "cnp", "encoder": {"width": 8}, "head": {"width": 8}})
    spec = tmp_path / "m.json"
    spec.write_text(model)
    trained = _run_cli("train", "--model", str(spec), "--steps", "2", "--batch-size", "4", "--val-every", "2",
                       "--val-batches", "1", "--no-xla", "--no-tensorboard", "--no-eval", "--out", str(run))
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert _framework_lines(trained.stderr) == [], trained.stderr
    evaluated = _run_cli("evaluate", str(run), "--batches", "1", "--batch-size", "4")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert "loglik" in json.loads(evaluated.stdout)
    assert _framework_lines(evaluated.stderr) == [], evaluated.stderr


IMPORT_LEAVES_PROCESS_ALONE = """
import json, os, sys
env, fd2 = dict(os.environ), os.fstat(2)
import taylorformer
after = os.fstat(2)
changed = sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k))
same_fd = (fd2.st_dev, fd2.st_ino) == (after.st_dev, after.st_ino)
import keras  # after the package: the classes must already be registered
model = keras.models.load_model(sys.argv[1])
print(json.dumps({"changed": changed, "same_fd2": same_fd, "model": type(model).__name__}))
"""

LAZY_IMPORT = """
import sys
import taylorformer as tfm
before = "tensorflow" in sys.modules
model = tfm.load_model(sys.argv[1])
print(before, type(model).__name__)
"""


@pytest.mark.slow
def test_import_changes_no_process_state_and_plain_keras_loads_a_model(tmp_path):
    import taylorformer as tfm

    path = str(tmp_path / "m.keras")
    tfm.build_model({"preset": "cnp", "encoder": {"width": 8}, "head": {"width": 8}}).save(path)
    done = subprocess.run([sys.executable, "-c", IMPORT_LEAVES_PROCESS_ALONE, path], capture_output=True,
                          text=True, env=_env(), timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"changed": [], "same_fd2": True, "model": "ConditionalNP"}
    lazy = subprocess.run([sys.executable, "-c", LAZY_IMPORT, path], capture_output=True, text=True,
                          env=_env(TAYLORFORMER_LAZY_IMPORT="1"), timeout=240)
    assert lazy.returncode == 0, lazy.stderr[-2000:]
    assert lazy.stdout.split()[-2:] == ["False", "ConditionalNP"]
