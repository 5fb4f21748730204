"""One output discipline for every command that writes (``taylorformer.files.Outputs``):
``predict`` (``--input``; ``--grid`` with ``--plot``), ``plot-field``, ``place`` (with
``--plot``), ``export``, ``evaluate --calibration/--recalibrate``, ``plot`` and ``forecast``
(with ``--plot``).

A bad output path (missing folder, an extension the writer cannot write, the same file as
an input, inside the run) fails before any work with exit 2 and one ``error:`` line naming
the user's path; a failure after the first output was written, or a SIGTERM mid-run, leaves
every file that was there byte-identical and no temp file. The CLI runs in-process on two
runs shared by the module: a tiny trained 1-D GP run and a model file of 2-D inputs
(identity normaliser) for grids and placement; the SIGTERM test runs real processes.
"""
import errno
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from taylorformer import cli
from taylorformer.errors import OutputPathError
from taylorformer.files import Outputs
from taylorformer.models import build_model
from taylorformer.normaliser import Normaliser
from taylorformer.workflow import training

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
GP_TASK = {"num_context": [3, 6], "num_target": 6}


@pytest.fixture(scope="module")
def gp_run(tmp_path_factory):
    """A trained 1-D GP run (two steps) with a stored calibration.json of its own."""
    out = tmp_path_factory.mktemp("discipline") / "run"
    training.train(model=TINY, task="gp", task_config=GP_TASK, out_dir=str(out), steps=2, batch_size=2,
                   val_every=2, val_batches=1, verbose=0, tensorboard=False, jit_compile=False, evaluate=False)
    (out / "calibration.json").write_text("{}\n")
    return out


@pytest.fixture(scope="module")
def field_run(tmp_path_factory):
    """A directory holding the model file of an untrained model of 2-D inputs (identity
    normaliser: the data's units are the model's), and a checkpoints/ folder."""
    model = build_model({**TINY, "dim_x": 2, "dim_y": 1})
    model.normaliser = Normaliser.identity(2, 1)
    path = tmp_path_factory.mktemp("field-run")
    model.save(path / "model.keras")
    (path / "checkpoints").mkdir()
    return path


def plane_grid(nx=9, ny=7):
    x0, x1 = np.linspace(-2, 2, nx), np.linspace(-2, 2, ny)
    return xr.Dataset({"y": (("x0", "x1"), np.sin(x0)[:, None] + np.cos(x1)[None])},
                      coords={"x0": ("x0", x0), "x1": ("x1", x1)})


@pytest.fixture
def work(tmp_path):
    """The inputs of every command, and an existing output of each that a failure must keep."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "query.npz", xc=rng.uniform(-2, 2, (5, 1)), yc=rng.normal(size=(5, 1)),
             xt=rng.uniform(-2, 2, (4, 1)))
    plane_grid().to_netcdf(tmp_path / "grid.nc", engine="h5netcdf")
    plane_grid().to_netcdf(tmp_path / "field.nc", engine="h5netcdf")
    points = rng.uniform(-2, 2, (12, 2))
    pd.DataFrame({"x0": points[:, 0], "x1": points[:, 1], "y": np.sin(points[:, 0])}).to_csv(
        tmp_path / "points.csv", index=False)
    pd.DataFrame({"x0": points[:, 0], "x1": points[:, 1]}).to_csv(tmp_path / "cand.csv", index=False)
    for name, data in (("exists.npz", b"previous predictions"), ("exists.nc", b"previous field"),
                       ("exists.csv", b"previous placement"), ("exists.png", b"previous map")):
        (tmp_path / name).write_bytes(data)
    (tmp_path / "exp").mkdir()  # an empty export folder: export may fill it
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    return tmp_path


#: command -> (argv before the output under test, its flag, the input a link may point at)
COMMANDS = {
    "predict": (["predict", "GP", "--input", "W/query.npz"], "--output", "W/query.npz"),
    "predict --grid": (["predict", "FR", "--checkpoint", "model", "--grid", "W/grid.nc", "--context", "W/points.csv",
                        "--padding", "inf", "--quiet", "--output", "W/exists.nc"], "--plot", "W/grid.nc"),
    "plot-field": (["plot-field", "W/field.nc"], "--out", "W/field.nc"),
    "place": (["place", "FR", "--checkpoint", "model", "--candidates", "W/cand.csv", "--k", "1",
               "--output", "W/exists.csv"], "--plot", "W/cand.csv"),
    "export": (["export", "GP"], "--output", None),
    "evaluate --calibration": (["evaluate", "GP", "--batches", "1", "--no-baselines", "--calibration"],
                               "--calibration-plot", "GP/config.json"),
    "evaluate --recalibrate": (["evaluate", "GP", "--batches", "1", "--no-baselines", "--recalibrate"],
                               "--calibration-plot", "GP/config.json"),
    "plot": (["plot", "GP"], "--out", "GP/config.json"),
    # the outputs fail before the run's model is read: any run, any history file
    "forecast": (["forecast", "GP", "--history", "W/points.csv", "--output", "W/exists.csv"], "--plot", "W/points.csv"),
}
#: a bad output of each kind, a file (the data or image extension) or a folder (export)
BAD_FILES = {"missing folder": "W/missing/out{ext}", "extension": "W/out.xyz", "an input": "W/input-link{ext}",
             "inside the run": "{run}/checkpoints/out{ext}"}
BAD_FOLDERS = {"missing folder": "W/missing/exp", "a file": "W/exists.csv", "not empty": "W/busy",
               "inside the run": "GP/exported"}


def fill(text, work, gp_run, field_run):
    return str(text).replace("W/", f"{work}/").replace("GP", str(gp_run)).replace("FR", str(field_run))


def snapshot(*roots):
    """``{path: bytes}`` of every file under ``roots`` (a symlink by its target), and every
    folder (``None``)."""
    found = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            found.update({os.path.join(folder, d): None for d in dirs})
            for name in files:
                path = os.path.join(folder, name)
                found[path] = os.readlink(path) if os.path.islink(path) else open(path, "rb").read()
    return found


def temps(*roots):
    return [os.path.join(folder, n) for root in roots for folder, dirs, files in os.walk(root)
            for n in dirs + files if n.startswith(".tmp-")]


def run_cli(argv, capsys):
    """Exit code and the ``error:`` lines of the command (warnings aside)."""
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.startswith("error:")], err


CASES = [(command, kind) for command in COMMANDS
         for kind in (BAD_FOLDERS if command == "export" else BAD_FILES)
         if not (kind == "inside the run" and command == "plot-field")]  # plot-field reads no run


@pytest.mark.parametrize("command,kind", CASES)
def test_a_bad_output_fails_first_and_changes_nothing(command, kind, work, gp_run, field_run, capsys):
    argv, flag, linked = COMMANDS[command]
    if command == "export":
        bad = BAD_FOLDERS[kind]
    else:
        ext = ".npz" if flag == "--output" else ".png"
        run = "FR" if "FR" in argv else "GP"
        bad = BAD_FILES[kind].format(ext=ext, run=run)
    bad = fill(bad, work, gp_run, field_run)
    if kind == "an input":  # the same file under another name: refused through the link
        os.symlink(fill(linked, work, gp_run, field_run), bad)
    argv = [fill(a, work, gp_run, field_run) for a in argv] + [flag, bad]
    before = snapshot(work, gp_run, field_run)
    code, errors, err = run_cli(argv, capsys)
    assert code == 2 and len(errors) == 1 and bad in errors[0], (argv, err)
    assert ".tmp-" not in err and not temps(work, gp_run, field_run), (argv, err)
    assert snapshot(work, gp_run, field_run) == before, (argv, err)


def no_space(*args, **kwargs):
    """A plot writer that fails as a full disk does, naming the (temp) file it was given."""
    path = args[1]
    raise OSError(errno.ENOSPC, "No space left on device", path)


@pytest.mark.parametrize("command,written", [("predict --grid", "W/.tmp-exists.nc-"),
                                             ("place", "W/.tmp-exists.csv-"),
                                             ("evaluate --recalibrate", "GP/.tmp-calibration.json-")])
def test_a_failure_after_the_first_output_leaves_every_file_as_it_was(command, written, work, gp_run, field_run,
                                                                      capsys, monkeypatch):
    """The data output (calibration.json for --recalibrate) is complete under its temp name
    when the plot fails: it is removed, and the previous file stays."""
    from taylorformer.plotting import saving

    argv, flag, _ = COMMANDS[command]
    plot = f"{work}/map.png"
    argv = [fill(a, work, gp_run, field_run) for a in argv] + [flag, plot]
    folder, prefix = os.path.split(fill(written, work, gp_run, field_run))
    seen = []

    def failing_save(fig, path, dpi=110):
        seen.extend(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder) if n.startswith(prefix))
        no_space(fig, path)

    monkeypatch.setattr(saving, "save_figure", failing_save)
    before = snapshot(work, gp_run, field_run)
    code, errors, err = run_cli(argv, capsys)
    assert seen and min(seen) > 0, (argv, seen)  # the first output was written when the plot failed
    assert code == 2 and errors == [f"error: {flag} {plot}: cannot write it: No space left on device"], (argv, err)
    assert not temps(work, gp_run, field_run) and snapshot(work, gp_run, field_run) == before, (argv, err)


def test_outputs_put_everything_in_place_together_or_nothing(tmp_path):
    """``Outputs`` itself: two outputs replaced together on success; on an error (and a
    KeyboardInterrupt, what SIGTERM raises inside) neither, no temp left, and the error's
    text names the user's paths; two outputs on one path are refused."""
    table, image, folder = tmp_path / "t.csv", tmp_path / "m.png", tmp_path / "saved"
    table.write_text("old table")
    for failure in (RuntimeError, KeyboardInterrupt):
        with pytest.raises(failure) as raised:
            with Outputs(reads=()) as outputs:
                staged = outputs.file(table, "--output", (".csv",))
                assert os.path.dirname(staged) == str(tmp_path) and staged.endswith(".csv")
                with open(staged, "w") as fh:
                    fh.write("new table")
                outputs.directory(folder, "--export")
                raise failure(f"failed writing {outputs.file(image, '--plot', ('.png',))}")
        assert failure is KeyboardInterrupt or str(raised.value) == f"failed writing {image}"
        assert os.listdir(tmp_path) == ["t.csv"] and table.read_text() == "old table"
    with Outputs() as outputs:
        with open(outputs.file(table, "--output", (".csv",)), "w") as fh:
            fh.write("new table")
        with open(outputs.file(image, "--plot", (".png",)), "wb") as fh:
            fh.write(b"png")
        os.mkdir(outputs.directory(folder, "--export"))
    assert sorted(os.listdir(tmp_path)) == ["m.png", "saved", "t.csv"] and table.read_text() == "new table"
    with pytest.raises(OutputPathError, match="is the same path as --output"):
        with Outputs() as outputs:
            outputs.file(table, "--output", (".csv",))
            outputs.file(os.path.join(str(tmp_path), ".", "t.csv"), "--table", (".csv",))
    with pytest.raises(OutputPathError, match=f"--output {table}: the command wrote nothing there"):
        with Outputs() as outputs:
            outputs.file(table, "--output", (".csv",))
    assert table.read_text() == "new table" and sorted(os.listdir(tmp_path)) == ["m.png", "saved", "t.csv"]


def _launch(argv):
    code = "import sys; from taylorformer.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen([sys.executable, "-c", code, *map(str, argv)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)


def _found(root, test):
    return any(test(os.path.join(folder, n)) for folder, dirs, files in os.walk(root) for n in dirs + files)


@pytest.mark.slow
def test_sigterm_mid_run_leaves_the_previous_outputs_and_no_temp(work, gp_run, field_run):
    """Real processes of ``predict --grid``, ``place``, ``export`` and ``evaluate
    --recalibrate``, each sent SIGTERM once its work is under way (its temp output being
    written): exit 130, every file as it was, no temp file."""
    big = plane_grid(300, 300)  # 90,000 cells in 4x4-cell patches: far longer than the wait
    big.to_netcdf(work / "grid.nc", engine="h5netcdf")
    rng = np.random.default_rng(1)
    pd.DataFrame(rng.uniform(-2, 2, (3000, 2)), columns=["x0", "x1"]).to_csv(work / "cand.csv", index=False)
    jobs = {  # argv, and when its work is under way
        "predict --grid": (["predict", field_run, "--checkpoint", "model", "--grid", work / "grid.nc", "--context",
                            work / "points.csv", "--padding", "0.5", "--patch", "4", "--quiet", "--output",
                            work / "exists.nc", "--plot", work / "exists.png"],
                           lambda p: os.path.basename(p).startswith(".tmp-.tmp-exists.nc") and os.path.getsize(p)),
        "place": (["place", field_run, "--checkpoint", "model", "--candidates", work / "cand.csv", "--k", "20",
                   "--output", work / "exists.csv", "--plot", work / "map.png"],
                  lambda p: os.path.basename(p).startswith(".tmp-exists.csv-")),
        "export": (["export", gp_run, "--output", work / "exp"],
                   lambda p: p.count(".tmp-exp-") == 2),  # export_model's folder in export_run's: saving
        "evaluate --recalibrate": (["evaluate", gp_run, "--batches", "4", "--batch-size", "2", "--no-baselines",
                                    "--recalibrate", "--calibration-plot", work / "cal.png"],
                                   lambda p: os.path.basename(p).startswith(".tmp-calibration.json-")),
    }
    before = snapshot(work, gp_run, field_run)
    procs = {name: _launch(argv) for name, (argv, _) in jobs.items()}
    # a bound for a loaded machine; on an idle one the four start, and are stopped, within ~30 s
    sent, deadline = {}, time.monotonic() + 300
    while len(sent) < len(procs) and time.monotonic() < deadline:
        for name, proc in procs.items():
            if name not in sent and proc.poll() is None and _found(
                    gp_run if name == "evaluate --recalibrate" else work, jobs[name][1]):
                time.sleep(0.5 if name == "place" else 0)  # place: into the placing itself
                proc.send_signal(signal.SIGTERM)
                sent[name] = time.monotonic()
        time.sleep(0.05)
    for name, proc in procs.items():
        if name not in sent:  # never reached its work, or finished first: the assertion below says which
            proc.kill()
    results = {name: (proc.wait(timeout=120), proc.stderr.read()) for name, proc in procs.items()}
    for name, (code, err) in results.items():
        assert name in sent and code == 130 and err.strip().endswith("error: interrupted"), (name, code, err)
    assert not temps(work, gp_run, field_run)
    assert snapshot(work, gp_run, field_run) == before
