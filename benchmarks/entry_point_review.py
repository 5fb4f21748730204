"""A review of the newer entry points as a careful user tries them: ``predict --grid``,
``plot-field``, ``place``, ``export`` and serving the export, ``info``, ``evaluate
--calibration/--recalibrate/--memory-budget``, the stored calibration, the spec's
``standardise`` keys, ``from_dataframe``/``from_arrays``/``from_xarray``, and signals.

    python benchmarks/entry_point_review.py [--only WORD] [--timeout 120]

A catalogue of concrete cases of six kinds (data lost, silently wrong, crashes, hangs,
loose defaults, misleading messages), each with what must happen: a refusal (the CLI:
exit 2 and one ``error:`` line naming what it must name; the library: its own error
class) or a success with a result checked against a reference. Each case runs on fresh
copies of its inputs (the CLI in-process, signals on real processes) and is classified:

* ``held``: what must happen happened;
* ``silently accepted``: a bad input gave exit 0 / no error, or a result that is wrong;
* ``refused a valid input``: a good input was refused;
* ``lost or left data``: a file that was there changed, or a temp file (``.tmp-*``) is left;
* ``crashed``: exit 1, a traceback, an escape code, or an exception of the wrong class;
* ``hung``: no answer within ``--timeout`` seconds;
* ``misleading message``: refused, but the line does not name what it must (or names a
  temp file, or says what is not so).

Prints one line per case that does not hold and the counts per class. Public names only.
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import pandas as pd
import xarray as xr

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
PNG = b"\x89PNG\r\n\x1a\n"
LAT, LON = np.linspace(30.0, 50.0, 5), np.linspace(100.0, 150.0, 6)
CLASSES = ["held", "silently accepted", "refused a valid input", "lost or left data", "crashed", "hung",
           "misleading message"]


class Hung(BaseException):
    """Raised by the alarm: the case ran past its time."""


# ----------------------------------------------------------------------------- files
def snapshot(*roots):
    found = {}
    for root in roots:
        root = str(root)
        if os.path.isfile(root):
            found[root] = open(root, "rb").read()
            continue
        for folder, dirs, files in os.walk(root):
            found.update({os.path.join(folder, d): None for d in dirs})
            for name in files:
                path = os.path.join(folder, name)
                found[path] = ("link", os.readlink(path)) if os.path.islink(path) else open(path, "rb").read()
    return found


def temps(*roots):
    return [os.path.join(f, n) for root in roots if os.path.isdir(root) for f, d, fs in os.walk(root)
            for n in d + fs if n.startswith(".tmp-")]


def grid_file(path, kind="K", lat=LAT, lon=LON):
    lat, lon = np.array(lat, float), np.array(lon, float)
    values, units = 280 + np.add.outer(np.sin(np.radians(lat)), np.cos(np.radians(lon))), "K"
    if kind == "degC":
        values, units = values - 273.15, "degC"
    elif kind == "degF":
        values, units = (values - 273.15) * 9 / 5 + 32, "degF"
    elif kind == "metres":
        units = "m"
    elif kind == "radians":
        lat, lon = np.radians(lat), np.radians(lon)
    elif kind == "latitude 300":
        lat = np.linspace(30.0, 300.0, len(lat))
    elif kind == "duplicated lat":
        lat[2] = lat[1]
    elif kind == "inf cell":
        values[2, 2] = np.inf
    elif kind == "huge cell":
        values[2, 2] = 1e30
    elif kind == "all NaN":
        values[:] = np.nan
    xr.Dataset({"t": (("lat", "lon"), values, {"units": units})},
               coords={"lat": ("lat", lat), "lon": ("lon", lon)}).to_netcdf(path, engine="h5netcdf")
    return path


def points(path, n=8, seed=0, values=True, lat=(31, 49), lon=(101, 149)):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"lat": rng.uniform(*lat, n), "lon": rng.uniform(*lon, n)})
    if values:
        frame["t"] = 280 + rng.normal(size=n)
    frame.to_csv(path, index=False)
    return frame


# ----------------------------------------------------------------------------- the runs
def make_runs(root):
    """A model file of (lat, lon) inputs in kelvin (spans 60, 120 degrees), one trained on
    longitudes 0 .. 350 (a periodic longitude), and an untrained 1-D GP run directory."""
    from taylorformer import build_model
    from taylorformer.normaliser import Normaliser
    from taylorformer.workflow.run_dir import RunDirectory

    runs = {}
    for name, coordinates in (("geo", {"span": [60.0, 120.0]}),
                              ("wrap", {"span": [60.0, 350.0], "extent": [[-30, 30], [0, 350]]})):
        model = build_model({**TINY, "dim_x": 2, "dim_y": 1})
        model.normaliser = Normaliser(np.zeros(2), np.ones(2), np.array([280.0]), np.array([7.0]), ["lat", "lon"],
                                      ["t"], [None, None], ["K"], coordinates=coordinates)
        os.makedirs(os.path.join(root, name, "checkpoints"))
        model.save(os.path.join(root, name, "model.keras"))
        runs[name] = os.path.join(root, name)
    gp = os.path.join(root, "gp")
    os.mkdir(gp)
    model = build_model({**TINY, "dim_x": 1, "dim_y": 1})
    run_dir = RunDirectory(gp)
    run_dir.write_definition(model.spec, {"train": {"batch_size": 4}, "task": "gp",
                                          "task_config": {"num_context": [3, 6], "num_target": 6}})
    run_dir.save_model(model, "best.keras")
    runs["gp"] = gp
    return runs


# ----------------------------------------------------------------------------- running a case
def run_cli(argv, timeout):
    """``(exit code, stdout, stderr)`` of ``taylorformer ARGV`` in-process; Hung past ``timeout``."""
    import warnings

    from taylorformer import cli

    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):
        raise Hung

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = lambda m, c, *a, **k: print(f"warning: {m}", file=sys.stderr)
            try:
                code = cli.main([str(a) for a in argv])
            except SystemExit as exc:
                code = exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


class Case:
    """One case: ``argv(w)`` (``w``: the case's folder, holding fresh inputs) and what
    must happen: ``refuse`` with ``names`` in the error line (and none of ``never``), or
    succeed with ``check(w, out, err)`` true; ``writes``: the paths it may write."""

    def __init__(self, kind, name, argv, refuse=True, names=(), never=(".tmp-",), check=None, writes=()):
        self.kind, self.name, self.argv, self.refuse = kind, name, argv, refuse
        self.names, self.never, self.check, self.writes = names, never, check, writes

    def run(self, w, roots, timeout):
        argv = self.argv(w)
        before = snapshot(w, *roots)
        try:
            code, out, err = run_cli(argv, timeout)
        except Hung:
            return "hung", f"no answer in {timeout} s"
        except Exception as exc:  # noqa: BLE001 - an escape from the CLI is a crash
            return "crashed", f"{type(exc).__name__}: {exc}"[:300]
        after = snapshot(w, *roots)
        written = {str(p(w) if callable(p) else p) for p in self.writes} if code == 0 else set()
        changed = [k for k in set(before) | set(after) if k not in written and before.get(k, 0) != after.get(k, 0)]
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        if code not in (0, 2) or "Traceback" in err or "\x1b" in err:
            return "crashed", f"exit {code}: {err.strip()[-300:]}"
        if changed or temps(w, *roots):
            return "lost or left data", f"exit {code}; changed {sorted(changed)[:3]}, temps {temps(w, *roots)[:2]}"
        if self.refuse:
            if code == 0:
                return "silently accepted", f"exit 0: {(out + err).strip()[-200:]}"
            line = errors[0] if len(errors) == 1 else ""
            names = [n(w) if callable(n) else n for n in self.names]
            if len(errors) != 1 or any(str(n) not in line for n in names) or any(n in line for n in self.never):
                return "misleading message", f"{err.strip()[-300:]} (must name {names}, never {list(self.never)})"
            return "held", line
        if code != 0:
            return "refused a valid input", err.strip()[-300:]
        verdict = self.check(w, out, err) if self.check else True
        return ("held", "ok") if verdict is True else ("silently accepted", f"wrong result: {verdict}")


class ApiCase:
    """A library call ``call(w)`` that must raise ``error`` (a class) with ``names`` in its
    text, or (``error`` None) return a value ``check`` accepts."""

    def __init__(self, kind, name, call, error=None, names=(), check=None):
        self.kind, self.name, self.call, self.error, self.names, self.check = kind, name, call, error, names, check

    def run(self, w, roots, timeout):
        import warnings

        def alarm(signum, frame):
            raise Hung

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.alarm(timeout)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = self.call(w)
        except Hung:
            return "hung", f"no answer in {timeout} s"
        except Exception as exc:  # noqa: BLE001 - classified below
            if self.error is None:
                return "refused a valid input", f"{type(exc).__name__}: {exc}"[:300]
            if not isinstance(exc, self.error):
                return "crashed", f"{type(exc).__name__}: {exc}"[:300]
            text = str(exc)
            if any(n not in text for n in self.names) or "\x1b" in text:
                return "misleading message", f"{text[:300]} (must name {list(self.names)})"
            return "held", text[:120]
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        if self.error is not None:
            return "silently accepted", f"returned {str(value)[:200]}"
        verdict = self.check(value) if self.check else True
        return ("held", "ok") if verdict is True else ("silently accepted", f"wrong result: {verdict}")


# ----------------------------------------------------------------------------- the catalogue
def grid_argv(runs, grid="grid.nc", output="out.nc", plot=None, context="context.csv", run="geo", extra=()):
    def argv(w):
        return (["predict", runs[run], "--checkpoint", "model", "--grid", os.path.join(w, grid), "--context",
                 os.path.join(w, context), "--padding", "inf", "--quiet", "--output", path(w, output, runs)]
                + (["--plot", path(w, plot, runs)] if plot else []) + list(extra))
    return argv


def path(w, name, runs):
    """``name`` in the case folder, or in a run (``RUN:geo/checkpoints/x``), or absolute."""
    if name.startswith("RUN:"):
        run, _, rest = name[4:].partition("/")
        return os.path.join(runs[run], rest) if rest else runs[run]
    return name if os.path.isabs(name) else os.path.join(w, name)


def field_matches(reference, shift=0.0, factor=1.0, units="K", nan_at=()):
    """A check: the predicted mean is ``factor * (reference - 273.15 * (shift != 0)) + ...``:
    the kelvin reference converted, labelled ``units``."""
    def check(w, out, err):
        with xr.open_dataset(os.path.join(w, "out.nc")) as ds:
            mean, label = ds.t_mean.values, ds.t_mean.attrs.get("units")
        expected = (reference["mean"] + shift) * factor + (32 if factor != 1 else 0)
        if label != units:
            return f"labelled {label!r}, not {units!r}"
        if not np.allclose(mean, expected, rtol=1e-5, atol=1e-3):
            return f"mean off by up to {np.nanmax(np.abs(mean - expected)):.3g}"
        return True
    return check


def catalogue(runs, reference):
    G, R = "silently wrong", "data lost"
    cases = []
    add = cases.append
    # --- data lost: every output checked before any work, nothing replaced on failure
    for plot in ("/nonexistent/x.png", "x.xyz", "grid.nc", "RUN:geo/checkpoints/map.png", "exists.nc",
                 "missing/m.png"):
        add(Case(R, f"predict --grid --output exists.nc --plot {plot}",
                 grid_argv(runs, output="exists.nc" if plot != "exists.nc" else "out.nc", plot=plot),
                 names=[lambda w, p=plot: path(w, p, runs)]))
    for output in ("RUN:geo/checkpoints/out.nc", "RUN:geo/model.keras", "new.csv", "grid.nc", "context.csv",
                   "missing/out.nc", "RUN:geo"):
        add(Case(R, f"predict --grid --output {output}", grid_argv(runs, output=output),
                 names=[lambda w, o=output: path(w, o, runs)]))
    place = ["place", runs["geo"], "--checkpoint", "model", "--k", "2"]
    for plot in ("/nonexistent/m.png", "m.xyz", "cand.csv", "exists.csv"):
        add(Case(R, f"place --output exists.csv --plot {plot}",
                 lambda w, plot=plot: place + ["--candidates", f"{w}/cand.csv", "--output",
                                               f"{w}/{'exists.csv' if plot != 'exists.csv' else 'new.csv'}",
                                               "--plot", path(w, plot, runs)],
                 names=[lambda w, p=plot: path(w, p, runs)]))
    for output in ("cand.csv", "RUN:geo/checkpoints/o.csv", "o.xyz", "missing/o.csv"):
        add(Case(R, f"place --output {output}", lambda w, o=output: place + [
            "--candidates", f"{w}/cand.csv", "--output", path(w, o, runs)],
            names=[lambda w, o=output: path(w, o, runs)]))
    evaluate = ["evaluate", runs["gp"], "--batches", "1", "--batch-size", "2", "--no-baselines"]
    for mode in ("--calibration", "--recalibrate"):
        for plot in ("/nonexistent/c.png", "c.xyz", "RUN:gp/config.json", "RUN:gp/checkpoints/c.png",
                     "RUN:gp/calibration.json"):
            add(Case(R, f"evaluate {mode} --calibration-plot {plot}", lambda w, m=mode, p=plot: evaluate + [
                m, "--calibration-plot", path(w, p, runs)], names=[lambda w, p=plot: path(w, p, runs)]))
    for folder in ("busy", "exists.csv", "RUN:gp/exported", "RUN:gp", "missing/exp", "RUN:gp/checkpoints"):
        add(Case(R, f"export --output {folder}", lambda w, f=folder: ["export", runs["gp"], "--output",
                                                                      path(w, f, runs)],
                 names=[lambda w, f=folder: path(w, f, runs)]))
    for out in ("missing/x.png", "field.nc", "x.xyz", "exists.csv"):
        add(Case(R, f"plot-field --out {out}", lambda w, o=out: ["plot-field", f"{w}/field.nc", "--out",
                                                                 path(w, o, runs)],
                 names=[lambda w, o=out: path(w, o, runs)]))
    # --- silently wrong: grids, contexts, stored calibration, card, budget
    add(Case(G, "predict --grid, a grid in kelvin", grid_argv(runs), refuse=False, writes=[lambda w: f"{w}/out.nc"],
             check=field_matches(reference)))
    add(Case(G, "predict --grid, a grid labelled degC", grid_argv(runs, grid="degC.nc"), refuse=False,
             writes=[lambda w: f"{w}/out.nc"], check=field_matches(reference, shift=-273.15, units="degC")))
    add(Case(G, "predict --grid, a grid labelled degF", grid_argv(runs, grid="degF.nc"), refuse=False,
             writes=[lambda w: f"{w}/out.nc"], check=field_matches(reference, shift=-273.15, factor=9 / 5,
                                                                   units="degF")))
    add(Case(G, "predict --grid --plot map.png writes both", grid_argv(runs, plot="map.png"), refuse=False,
             writes=[lambda w: f"{w}/out.nc", lambda w: f"{w}/map.png"],
             check=lambda w, o, e: open(f"{w}/map.png", "rb").read(8) == PNG or "not a PNG"))
    for kind, names in (("metres", ["'m'", "'K'"]), ("radians", ["radians"]), ("latitude 300", ["latitude"]),
                        ("duplicated lat", ["more than once"]), ("inf cell", ["inf"]), ("huge cell", ["1e+30"]),
                        ("all NaN", ["NaN"])):
        add(Case(G, f"predict --grid, a grid with {kind}", grid_argv(runs, grid=f"{kind}.nc"),
                 names=[f"{kind}.nc", *names]))
    add(Case(G, "predict --grid, duplicated context points", grid_argv(runs, context="twice.csv"),
             names=["twice.csv", "duplicated"]))
    add(Case(G, "predict --grid, context latitude 120", grid_argv(runs, context="lat120.csv"), names=["latitude"]))
    add(Case(G, "predict --grid, context in radians", grid_argv(runs, context="radians.csv"), names=["radians"]))
    add(Case(G, "predict --grid, -180..180 grid on a model trained on 0..350",
             grid_argv(runs, grid="west.nc", context="west.csv", run="wrap"), refuse=False,
             writes=[lambda w: f"{w}/out.nc"], check=lambda w, o, e: wrapped_equal(w, runs)))
    for label, record in (("1e30", 1e30), ("NaN", float("nan")), ("-1", -1.0), ("0", 0.0), ("'2'", "2"),
                          ("inf", float("inf")), ("1e-9", 1e-9)):
        add(Case(G, f"predict with a stored spread scale {label}", stored_argv(runs, record),
                 names=["calibration.json"]))
    for label in ("a directory", "a dangling link", "not JSON", "another model's", "two scales for one output"):
        add(Case(G, f"predict with calibration.json {label}", stored_argv(runs, label), names=["calibration.json"]))
    add(Case(G, "predict with a stored spread scale 2", stored_argv(runs, 2.0), refuse=False,
             writes=[lambda w: f"{w}/p.npz"], check=lambda w, o, e: scaled_by(w, reference, 2.0)))
    add(Case(G, "info: a spec with layers = 2147483647", lambda w: ["info", f"{w}/big.keras"],
             names=["big.keras", "2147483647"]))
    add(Case(G, "info: a card with escape codes", lambda w: ["info", f"{w}/card.keras"], refuse=False,
             check=lambda w, o, e: not any(c in o for c in "\x1b\x07\x9b\r") or "escape codes printed"))
    for budget in ("1e30GB", "-1GB", "0", "lots", "nanGB", "1e400"):  # --opt=VALUE: argparse reads -1GB as a flag
        add(Case(G, f"evaluate --memory-budget={budget}", lambda w, b=budget: evaluate + [f"--memory-budget={b}"],
                 names=[budget]))
    add(Case(G, "evaluate --recalibrate: a scale in the fit's range",
             lambda w: ["evaluate", f"{w}/gp", "--batches", "1", "--batch-size", "2", "--no-baselines",
                        "--recalibrate", "--calibration-plot", f"{w}/cal.png"], refuse=False,
             writes=[lambda w: f"{w}/gp/calibration.json", lambda w: f"{w}/cal.png"], check=fitted_scale))
    add(Case(G, "place: a duplicated candidate is picked once", lambda w: place[:-1] + [
        "5", "--candidates", f"{w}/dupes.csv", "--output", f"{w}/o.csv"], refuse=False,
        writes=[lambda w: f"{w}/o.csv"], check=distinct_placement))
    add(Case(G, "place: k more than the distinct candidates", lambda w: place[:-1] + [
        "6", "--candidates", f"{w}/dupes.csv", "--output", f"{w}/o.csv"], names=["k=6", "distinct"]))
    add(ApiCase(G, "spec: standardise_min_scale with standardise global", lambda w: spec_call(
        standardise="global", standardise_min_scale=0.5), error=spec_error(), names=["no effect"]))
    add(ApiCase(G, "spec: standardise_min_scale with the default (global)", lambda w: spec_call(
        standardise_min_scale=0.5), error=spec_error(), names=["no effect"]))
    add(ApiCase(G, "spec: normalise_min_scale (old name) with normalise global", lambda w: spec_call(
        normalise="global", normalise_min_scale=0.5), error=spec_error(), names=["no effect"]))
    for value in (0.0, -1.0, float("nan"), 1e7, True):
        add(ApiCase(G, f"spec: standardise_min_scale {value!r} with window", lambda w, v=value: spec_call(
            standardise="window", standardise_min_scale=v), error=spec_error(), names=["standardise_min_scale"]))
    add(ApiCase(G, "from_dataframe: an index mixing naive and UTC", lambda w: from_frame(mixed=True),
                error=task_error(), names=["zone"]))
    add(ApiCase(G, "from_dataframe: a boolean target", lambda w: from_frame(boolean=True), error=task_error(),
                names=["boolean"]))
    add(ApiCase(G, "from_arrays: a boolean y", lambda w: from_arrays_bool(), error=task_error(), names=["boolean"]))
    add(ApiCase(G, "from_xarray: a boolean variable", lambda w: from_xarray_bool(), error=task_error(),
                names=["boolean"]))
    for defect in ("NaN xc", "mask_c 2", "mask_c -1", "mask_c 0.5", "mask_t 0.5", "xt 1e30", "yc inf",
                   "batch xc 2, yc 1", "points yc 2 of 3"):
        add(ApiCase(G, f"served export: {defect}", lambda w, d=defect: serve(w, d), error=served_error(),
                    names=["invalid input"]))
    add(ApiCase(G, "served export: a valid query", lambda w: serve(w, None), check=lambda v: v is True or v))
    # --- crashes
    for entry in ("config.json", "metadata.json"):
        add(Case("crash", f"info: {entry} nesting 100,000 arrays", lambda w, e=entry: ["info", f"{w}/deep-{e}.keras"],
                 names=["nests deeper"]))
    add(ApiCase("crash", "build_model(normalise='window', normalise_min_scale=1e308)", lambda w: build(),
                error=spec_error(), names=["standardise_min_scale"]))
    add(Case("crash", "train --model with standardise_min_scale 1e308", lambda w: [
        "train", "--model", f"{w}/huge-floor.json", "--out", f"{w}/r", "--steps", "1"], names=["1e+308"]))
    for damage in ("truncated.keras", "random.keras", "empty.keras"):
        add(Case("crash", f"info: {damage}", lambda w, d=damage: ["info", f"{w}/{d}"], names=[damage]))
    add(Case("crash", "plot-field: a file of random bytes", lambda w: ["plot-field", f"{w}/random.nc"],
             names=["random.nc"]))
    add(Case("crash", "plot-field: a grid without predictions", lambda w: ["plot-field", f"{w}/grid.nc"],
             names=["grid.nc"]))
    add(Case("crash", "predict --grid: a grid file of random bytes", grid_argv(runs, grid="random.nc"),
             names=["random.nc"]))
    add(Case("crash", "predict --grid --variable nope", grid_argv(runs, extra=["--variable", "nope"]),
             names=["nope"]))
    # --- hangs: sizes estimated and refused first
    add(Case("hang", "predict --grid: 20000 x 20000 coordinates", grid_argv(runs, grid="huge.nc"),
             names=["huge.nc", "400000000 cells"]))
    add(Case("hang", "predict --grid: 100000 x 5000 coordinates", grid_argv(runs, grid="long.nc"),
             names=["long.nc", "500000000 cells"]))
    # --- loose default
    add(ApiCase("loose default", "default sampling budget under 4 GB", lambda w: sampling_room(),
                check=lambda room: room <= 4e9 or f"{room / 1e9:.2f} GB of room"))
    add(Case("loose default", "evaluate --memory-budget above the machine's memory",
             lambda w: evaluate + ["--memory-budget", f"{machine_bytes() * 2}B"], names=["machine's memory"]))
    # --- misleading messages
    add(Case("message", "predict --grid: a header-only context CSV", grid_argv(runs, context="header.csv"),
             names=["header.csv", "no rows"], never=(".tmp-", "object values")))
    add(Case("message", "predict --grid --plot into a missing folder names it",
             grid_argv(runs, plot="/nonexistent/dir/x.png"), names=["/nonexistent/dir/x.png"]))
    add(Case("message", "info: a symbolic-link loop", lambda w: ["info", f"{w}/loop.keras"],
             names=["loop.keras", "link loop"], never=("does not exist",)))
    add(Case("message", "info: a dangling link", lambda w: ["info", f"{w}/dangling.keras"],
             names=["dangling.keras", "missing file"]))
    add(Case("message", "plot-field: a directory", lambda w: ["plot-field", f"{w}/folder.nc"],
             names=["folder.nc", "directory"], never=("does not exist",)))
    add(Case("message", "plot-field: a map with no defined cell", lambda w: ["plot-field", f"{w}/blank.nc"],
             names=["blank.nc", "NaN"]))
    add(Case("message", "place: a header-only candidates CSV", lambda w: place + [
        "--candidates", f"{w}/header.csv", "--output", f"{w}/o.csv"], names=["header.csv"],
        never=(".tmp-", "object values")))
    return cases


# ----------------------------------------------------------------------------- case helpers
def spec_error():
    from taylorformer.errors import SpecError
    return SpecError


def task_error():
    from taylorformer.errors import TaskError
    return TaskError


def served_error():
    import tensorflow as tf
    return tf.errors.InvalidArgumentError


def spec_call(**keys):
    from taylorformer.spec import resolve_spec
    return resolve_spec({**TINY, **keys})


def build():
    from taylorformer import build_model
    return build_model(TINY, normalise="window", normalise_min_scale=1e308)


def from_frame(mixed=False, boolean=False):
    from taylorformer.tasks import from_dataframe

    stamps = list(pd.date_range("2021-01-01", periods=60, freq="h"))
    if mixed:
        stamps[30] = stamps[30].tz_localize("UTC")
    y = np.sin(np.arange(60.0) / 5)
    frame = pd.DataFrame({"y": y > 0 if boolean else y}, index=pd.Index(stamps, dtype=object if mixed else None))
    return from_dataframe(frame, "y", context_length=6, horizon=2)


def from_arrays_bool():
    from taylorformer.tasks import from_arrays
    x = np.linspace(0, 1, 40)[:, None]
    return from_arrays(x, x[:, 0] > 0.5)


def from_xarray_bool():
    from taylorformer.tasks import from_xarray
    data = xr.Dataset({"flag": (("time", "y", "x"), np.random.default_rng(0).uniform(size=(12, 4, 5)) > 0.5)},
                      coords={"time": pd.date_range("2021-01-01", periods=12, freq="D"), "y": np.arange(4.0),
                              "x": np.arange(5.0)})
    return from_xarray(data, "flag")


SERVED = {}


def serve(w, defect):
    """The exported GP run served with one defect (None: a valid query, True when its
    output is finite and equals the query with two extra context points masked out)."""
    import tensorflow as tf

    loaded = SERVED["model"]
    rng = np.random.default_rng(0)
    q = {"xc": rng.uniform(-2, 2, (1, 3, 1)), "yc": rng.normal(size=(1, 3, 1)), "xt": rng.uniform(-2, 2, (1, 2, 1)),
         "mask_c": np.ones((1, 3)), "mask_t": np.ones((1, 2))}
    q = {k: v.astype(np.float32) for k, v in q.items()}
    change = {"NaN xc": ("xc", np.nan), "mask_c 2": ("mask_c", 2), "mask_c -1": ("mask_c", -1),
              "mask_c 0.5": ("mask_c", 0.5), "mask_t 0.5": ("mask_t", 0.5), "xt 1e30": ("xt", 1e30),
              "yc inf": ("yc", np.inf)}
    if defect in change:
        key, value = change[defect]
        q[key][(0, 1, 0) if q[key].ndim == 3 else (0, 1)] = value
    elif defect == "batch xc 2, yc 1":
        q["xc"], q["xt"], q["mask_c"], q["mask_t"] = (np.concatenate([q[k]] * 2) for k in ("xc", "xt", "mask_c",
                                                                                           "mask_t"))
    elif defect == "points yc 2 of 3":
        q["yc"] = q["yc"][:, :2]
    call = loaded.signatures["with_masks"]
    got = call(**{k: tf.constant(v) for k, v in q.items()})
    if defect is not None:
        return got
    padded = {**q, "xc": np.concatenate([q["xc"], np.full((1, 2, 1), 5, np.float32)], 1),
              "yc": np.concatenate([q["yc"], np.full((1, 2, 1), -9, np.float32)], 1),
              "mask_c": np.concatenate([q["mask_c"], np.zeros((1, 2), np.float32)], 1)}
    ref = call(**{k: tf.constant(v) for k, v in padded.items()})
    mean = got["mean"].numpy()
    return bool(np.isfinite(mean).all() and np.allclose(mean, ref["mean"].numpy(), rtol=1e-4, atol=1e-5)) or \
        "served mean not finite or not the masked one"


def sampling_room():
    """The room the default sampling budget gives above what this process holds."""
    from taylorformer.models.bounded_sampling import default_budget, resident_bytes
    return default_budget() - resident_bytes()


def machine_bytes():
    with open("/proc/meminfo") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemTotal:"))


def stored_argv(runs, record):
    """predict on a copy of the GP run (``w/gp``) whose calibration.json holds ``record`` (a
    scale, or a kind of damage); the copy is made by :func:`prepare`."""
    def argv(w):
        write_calibration(os.path.join(w, "gp"), record)
        return ["predict", os.path.join(w, "gp"), "--input", os.path.join(w, "query.npz"), "--output",
                os.path.join(w, "p.npz")]
    return argv


def write_calibration(run, record):
    from taylorformer.prediction.calibration import model_fingerprint

    target = os.path.join(run, "calibration.json")
    if record == "a directory":
        os.mkdir(target)
    elif record == "a dangling link":
        os.symlink(os.path.join(run, "nowhere.json"), target)
    elif record == "not JSON":
        with open(target, "w") as fh:
            fh.write('{"best": {"scale": [1.5')
    else:
        sha = "0" * 64 if record == "another model's" else model_fingerprint(os.path.join(run, "best.keras"))
        scale = [1.5, 1.5] if record == "two scales for one output" else [1.5 if record == "another model's"
                                                                           else record]
        with open(target, "w") as fh:
            json.dump({"best": {"method": "spread-scale", "scale": scale, "model_sha256": sha}}, fh)


def scaled_by(w, reference, scale):
    with np.load(os.path.join(w, "p.npz")) as got:
        if not np.allclose(got["mean"], reference["gp_mean"], rtol=1e-6, atol=1e-7):
            return "the mean moved"
        if not np.allclose(got["stddev"], scale * reference["gp_std"], rtol=1e-5):
            return "stddev not scaled by the stored scale"
    return True


def fitted_scale(w, out, err):
    from taylorformer.prediction.calibration import load_recalibration
    scale = load_recalibration(os.path.join(w, "gp"), "best")["scale"]
    return all(1e-3 <= s <= 1e3 for s in scale) or f"scale {scale}"


def distinct_placement(w, out, err):
    chosen = pd.read_csv(os.path.join(w, "o.csv"))[["lat", "lon"]].to_numpy()
    if len(np.unique(chosen, axis=0)) != len(chosen):
        return "a location picked twice"
    return "candidate row(s) repeat" in err or "no note of the repeated rows"


def wrapped_equal(w, runs):
    """The -180..180 grid's means equal those of the same places given in 0..360."""
    code, _, err = run_cli(grid_argv(runs, grid="east.nc", context="east.csv", output="east-out.nc",
                                     run="wrap")(w), 300)
    if code != 0:
        return f"the 0..360 reference failed: {err.strip()}"
    with xr.open_dataset(os.path.join(w, "out.nc")) as west, xr.open_dataset(os.path.join(w, "east-out.nc")) as east:
        order = np.argsort(np.mod(west.lon.values, 360))
        gap = np.nanmax(np.abs(west.t_mean.values[:, order] - east.t_mean.values))
    return bool(gap < 1e-3) or f"means differ by up to {gap:.3g} K"


def rewrite_keras(source, target, name="config.json", change=None, data=None):
    with zipfile.ZipFile(source) as archive:
        items = [(item, archive.read(item)) for item in archive.infolist()]
    with zipfile.ZipFile(target, "w") as out:
        for item, raw in items:
            if item.filename == name:
                raw = data if data is not None else json.dumps(change(json.loads(raw))).encode()
            out.writestr(item, raw)


def prepare(base, runs):
    """The inputs every case gets a fresh copy of (in ``base``)."""
    os.makedirs(base, exist_ok=True)
    grid_file(os.path.join(base, "grid.nc"))
    for kind in ("degC", "degF", "metres", "radians", "latitude 300", "duplicated lat", "inf cell", "huge cell",
                 "all NaN"):
        grid_file(os.path.join(base, f"{kind}.nc"), kind)
    points(os.path.join(base, "context.csv"))
    twice = points(os.path.join(base, "twice.csv"))
    pd.concat([twice, twice.iloc[[2]]]).to_csv(os.path.join(base, "twice.csv"), index=False)
    points(os.path.join(base, "lat120.csv"), lat=(100, 120))
    radians = points(os.path.join(base, "radians.csv"))
    radians[["lat", "lon"]] = np.radians(radians[["lat", "lon"]])
    radians.to_csv(os.path.join(base, "radians.csv"), index=False)
    pd.DataFrame(columns=["lat", "lon", "t"]).to_csv(os.path.join(base, "header.csv"), index=False)
    lat, lon = np.array([-20.0, 0.0, 20.0]), np.arange(-170.0, 180.0, 40.0)
    grid_file(os.path.join(base, "west.nc"), lat=lat, lon=lon)
    grid_file(os.path.join(base, "east.nc"), lat=lat, lon=np.sort(np.mod(lon, 360)))
    west = points(os.path.join(base, "west.csv"), lat=(-25, 25), lon=(-175, 175))
    west.assign(lon=np.mod(west.lon, 360)).to_csv(os.path.join(base, "east.csv"), index=False)
    for name, n in (("huge.nc", (20000, 20000)), ("long.nc", (100000, 5000))):
        xr.Dataset(coords={"lat": np.linspace(-80, 80, n[0]), "lon": np.linspace(0, 359, n[1])}).to_netcdf(
            os.path.join(base, name), engine="h5netcdf")
    cand = points(os.path.join(base, "cand.csv"), n=10, seed=1, values=False)
    pd.concat([cand.iloc[:5], cand.iloc[[0, 3, 3]]]).to_csv(os.path.join(base, "dupes.csv"), index=False)
    for name, data in (("exists.nc", b"previous field"), ("exists.csv", b"previous table"),
                       ("exists.png", b"previous map"), ("random.nc", os.urandom(300)),
                       ("random.keras", os.urandom(300)), ("empty.keras", b"")):
        with open(os.path.join(base, name), "wb") as fh:
            fh.write(data)
    os.mkdir(os.path.join(base, "busy"))
    with open(os.path.join(base, "busy", "keep.txt"), "w") as fh:
        fh.write("mine")
    os.mkdir(os.path.join(base, "folder.nc"))
    rng = np.random.default_rng(3)
    np.savez(os.path.join(base, "query.npz"), xc=rng.uniform(-2, 2, (5, 1)), yc=rng.normal(size=(5, 1)),
             xt=rng.uniform(-2, 2, (4, 1)))
    model = os.path.join(runs["gp"], "best.keras")

    def big(config):
        config["config"]["spec"]["encoder"]["layers"] = 2147483647
        return config

    def card(config):
        config["config"]["model_card"] = {"data": {"task": "\x1b[31mred\x1b[0m", "source": "a\x1b]0;t\x07b"},
                                          "training": {"steps": "1\r2"}}
        return config

    rewrite_keras(model, os.path.join(base, "big.keras"), change=big)
    rewrite_keras(model, os.path.join(base, "card.keras"), change=card)
    deep = b'{"config": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for entry in ("config.json", "metadata.json"):
        rewrite_keras(model, os.path.join(base, f"deep-{entry}.keras"), name=entry, data=deep)
    with open(model, "rb") as fh:
        raw = fh.read()
    with open(os.path.join(base, "truncated.keras"), "wb") as fh:
        fh.write(raw[:len(raw) // 2])
    os.symlink(os.path.join(base, "loop2.keras"), os.path.join(base, "loop.keras"))
    os.symlink(os.path.join(base, "loop.keras"), os.path.join(base, "loop2.keras"))
    os.symlink(os.path.join(base, "gone.keras"), os.path.join(base, "dangling.keras"))
    with open(os.path.join(base, "huge-floor.json"), "w") as fh:
        json.dump({**TINY, "standardise": "window", "standardise_min_scale": 1e308}, fh)
    ds = xr.Dataset({"t_mean": (("lat", "lon"), np.full((3, 4), np.nan)),
                     "t_stddev": (("lat", "lon"), np.ones((3, 4)))}, coords={"lat": np.arange(3.0),
                                                                             "lon": np.arange(4.0)})
    ds.to_netcdf(os.path.join(base, "blank.nc"), engine="h5netcdf")
    shutil.copytree(runs["gp"], os.path.join(base, "gp"))


def references(root, runs, timeout):
    """The kelvin field on grid.nc and the GP run's prediction without calibration: what
    the success cases are compared with; and the exported GP run, loaded."""
    import tensorflow as tf

    work = os.path.join(root, "reference")
    prepare(work, runs)
    code, _, err = run_cli(grid_argv(runs)(work), timeout)
    assert code == 0, err
    with xr.open_dataset(os.path.join(work, "out.nc")) as ds:
        reference = {"mean": ds.t_mean.values.copy()}
    code, _, err = run_cli(["predict", runs["gp"], "--input", f"{work}/query.npz", "--output", f"{work}/p.npz"],
                           timeout)
    assert code == 0, err
    with np.load(f"{work}/p.npz") as got:
        reference.update(gp_mean=got["mean"], gp_std=got["stddev"])
    code, _, err = run_cli(["export", runs["gp"], "--output", f"{work}/exported"], timeout)
    assert code == 0, err
    SERVED["model"] = tf.saved_model.load(f"{work}/exported")
    with open(os.path.join(root, "field.nc"), "wb") as fh, open(os.path.join(work, "out.nc"), "rb") as src:
        fh.write(src.read())
    return reference


# ----------------------------------------------------------------------------- signals
def signal_cases(root, runs, timeout):
    """SIGTERM (and SIGINT for export) sent to real processes, each in its own folder, once
    its outputs are being written: exit 130, every file as it was, no temp file."""
    def folder(name):
        work = os.path.join(root, "signals", name.replace(" ", "_"))
        os.makedirs(work)
        for file, data in (("exists.nc", b"previous field"), ("exists.csv", b"previous table")):
            with open(os.path.join(work, file), "wb") as fh:
                fh.write(data)
        return work

    jobs = {}
    w = folder("grid")
    grid_file(os.path.join(w, "big.nc"), lat=np.linspace(30, 50, 300), lon=np.linspace(100, 150, 300))
    points(os.path.join(w, "context.csv"))
    jobs["SIGTERM predict --grid"] = (w, signal.SIGTERM, [
        "predict", runs["geo"], "--checkpoint", "model", "--grid", f"{w}/big.nc", "--context", f"{w}/context.csv",
        "--padding", "5", "--patch", "4", "--quiet", "--output", f"{w}/exists.nc"],
        lambda p: os.path.basename(p).startswith(".tmp-") and "exists.nc" in p and os.path.getsize(p))
    w = folder("place")
    points(os.path.join(w, "cand.csv"), n=3000, values=False)
    jobs["SIGTERM place"] = (w, signal.SIGTERM, [
        "place", runs["geo"], "--checkpoint", "model", "--candidates", f"{w}/cand.csv", "--k", "20", "--output",
        f"{w}/exists.csv"], lambda p: os.path.basename(p).startswith(".tmp-exists.csv-"))
    for sig, label in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
        w = folder(f"export {label}")
        jobs[f"{label} export"] = (w, sig, ["export", runs["gp"], "--output", f"{w}/exp"],
                                   lambda p: os.path.basename(p).startswith(".tmp-exp-"))
    w = folder("recalibrate")
    shutil.copytree(runs["gp"], os.path.join(w, "gp"))
    jobs["SIGTERM evaluate --recalibrate"] = (w, signal.SIGTERM, [
        "evaluate", f"{w}/gp", "--batches", "4", "--batch-size", "2", "--no-baselines", "--recalibrate",
        "--calibration-plot", f"{w}/cal.png"], lambda p: os.path.basename(p).startswith(".tmp-calibration.json-"))
    before = {name: snapshot(job[0], runs["gp"], runs["geo"]) for name, job in jobs.items()}
    code = "import sys; from taylorformer.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    procs = {name: subprocess.Popen([sys.executable, "-c", code, *map(str, argv)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True, env=env)
             for name, (_, _, argv, _) in jobs.items()}
    sent, deadline = set(), time.monotonic() + timeout * 3
    while len(sent) < len(procs) and time.monotonic() < deadline:
        for name, proc in procs.items():
            if name in sent or proc.poll() is not None:
                continue
            work, sig, _, started = jobs[name]
            found = [os.path.join(f, n) for f, d, fs in os.walk(work) for n in d + fs]
            if any(started(p) for p in found if os.path.exists(p)):
                proc.send_signal(sig)
                sent.add(name)
        time.sleep(0.02)
    results = []
    for name, proc in procs.items():
        if name not in sent:
            proc.kill()
        try:
            code_, err = proc.wait(timeout=timeout), proc.stderr.read()
        except subprocess.TimeoutExpired:
            proc.kill()
            results.append(("data lost", name, "hung", "no exit after the signal"))
            continue
        work = jobs[name][0]
        left = temps(work, runs["gp"], runs["geo"])
        after = snapshot(work, runs["gp"], runs["geo"])
        changed = [k for k in set(before[name]) | set(after) if before[name].get(k, 0) != after.get(k, 0)]
        if name not in sent:
            results.append(("data lost", name, "hung", f"never reached its writing (exit {code_}): {err[-200:]}"))
        elif left or changed:
            results.append(("data lost", name, "lost or left data", f"exit {code_}; temps {left[:2]}, "
                                                                   f"changed {changed[:2]}"))
        elif code_ != 130 or "error: interrupted" not in err:
            results.append(("data lost", name, "crashed", f"exit {code_}: {err.strip()[-300:]}"))
        else:
            results.append(("data lost", name, "held", "exit 130, every file as it was, no temp"))
    return results


# ----------------------------------------------------------------------------- main
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help="run only the cases whose name holds this word")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per case before it counts as hung")
    parser.add_argument("--no-signals", action="store_true", help="leave out the real-process signal cases")
    parser.add_argument("--signals-only", action="store_true", help="run only the real-process signal cases")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="entry-point-review-")
    try:
        runs = make_runs(os.path.join(root, "runs"))
        reference = references(root, runs, args.timeout)
        base = os.path.join(root, "base")
        prepare(base, runs)
        shutil.copy(os.path.join(root, "field.nc"), os.path.join(base, "field.nc"))
        results = []
        cases = [c for c in catalogue(runs, reference) if (args.only is None or args.only in c.name)
                 and not args.signals_only]
        for i, case in enumerate(cases):
            w = os.path.join(root, f"case{i}")
            shutil.copytree(base, w, symlinks=True)
            start = time.perf_counter()
            verdict, detail = case.run(w, [runs["geo"], runs["wrap"], runs["gp"]], args.timeout)
            results.append((case.kind, case.name, verdict, detail))
            print(f"{verdict:>22}  {time.perf_counter() - start:6.1f} s  [{case.kind}] {case.name}", flush=True)
            shutil.rmtree(w, ignore_errors=True)
        if not args.no_signals and args.only is None:
            for result in signal_cases(root, runs, args.timeout):
                results.append(result)
                print(f"{result[2]:>22}  [{result[0]}] {result[1]}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    counts = {c: sum(r[2] == c for r in results) for c in CLASSES}
    print(f"\n{len(results)} cases: " + ", ".join(f"{n} {c}" for c, n in counts.items()))
    for kind, name, verdict, detail in results:
        if verdict != "held":
            print(f"NOT HELD [{verdict}] {name}: {detail}")
    return 0 if counts["held"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
