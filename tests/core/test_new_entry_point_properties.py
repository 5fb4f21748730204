"""Property-based tests of the newer entry points: ``predict --grid``, ``plot-field``,
``place``, ``export`` and serving the export, ``info``, ``evaluate --calibration /
--recalibrate / --memory-budget``, the stored calibration and the spec's ``standardise``
keys. (The data front doors ``from_dataframe``/``from_arrays``/``from_xarray`` have theirs
in ``tests/tasks/test_front_doors.py``.)

Each generated case carries at most one defect. It ends in exit 0 with the documented
output, checked against a reference computed separately (a prediction in the model's
units, the same prediction without the stored scale, the served output with the defect
masked out), or in exit 2 with exactly one ``error:`` line (no traceback, no escape
codes) exactly when the case has a defect; every file that was there is byte-identical
afterwards except the outputs written on purpose, and no temp file (``.tmp-*``) is left.
The CLI runs in-process on two runs shared by the module: an untrained model file of
(lat, lon) inputs in kelvin, and an untrained 1-D GP run directory.
"""
import contextlib
import json
import os
import shutil
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from taylorformer import cli
from taylorformer.errors import SpecError
from taylorformer.models import build_model
from taylorformer.normaliser import Normaliser
from taylorformer.prediction import calibration as cal
from taylorformer.spec import STANDARDISE_MODES, resolve_spec

SETTINGS = settings(deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
LAT, LON = np.linspace(30.0, 50.0, 5), np.linspace(100.0, 150.0, 6)
#: the documented ranges: spread scales a fit produces, a window's scale floor
FIT_RANGE, FLOOR_RANGE = (1e-3, 1e3), (1e-6, 1e6)
PNG = b"\x89PNG\r\n\x1a\n"
pytestmark = pytest.mark.filterwarnings("ignore:.*no saved normaliser")


# ----------------------------------------------------------------------------- helpers
def snapshot(*roots):
    """``{path: bytes}`` of every file under ``roots`` (a symlink by its target), and every
    folder (``None``)."""
    found = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            found.update({os.path.join(folder, d): None for d in dirs})
            for name in files:
                path = os.path.join(folder, name)
                found[path] = ("link", os.readlink(path)) if os.path.islink(path) else open(path, "rb").read()
    return found


def temps(*roots):
    return [os.path.join(folder, n) for root in roots for folder, dirs, files in os.walk(root)
            for n in dirs + files if n.startswith(".tmp-")]


def run_cli(argv, capsys):
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_outcome(code, err, argv, refused):
    """Exit 2 with one ``error:`` line and no escape codes exactly when ``refused``, else exit 0."""
    assert code == (2 if refused else 0), (argv, code, err)
    assert "Traceback" not in err and "\x1b" not in err and ".tmp-" not in err, (argv, err)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == (1 if refused else 0), (argv, err)
    if refused:
        assert err.strip().splitlines() == errors, (argv, err)


def assert_kept(before, after, written, argv, err):
    """Every file of ``before`` byte-identical in ``after`` except the ``written`` outputs."""
    written = {str(w) for w in written}
    assert {k: v for k, v in after.items() if k not in written} == {k: v for k, v in before.items()
                                                                     if k not in written}, (argv, err)


def one_defect(draw, choices):
    """``(defect kind, value)``: no defect half the time, else one of ``choices`` (a dict
    kind -> values)."""
    kind = draw(st.sampled_from(["none", "none", *choices]))
    return kind, (None if kind == "none" else draw(st.sampled_from(choices[kind])))


# ----------------------------------------------------------------------------- the runs
@pytest.fixture(scope="module")
def field_run(tmp_path_factory):
    """A folder holding the model file of an untrained model of (lat, lon) inputs, trained
    (its normaliser says) on spans of 60 and 120 degrees and a temperature in kelvin
    (offset 280, scale 7), and a ``checkpoints/`` folder of its own."""
    model = build_model({**TINY, "dim_x": 2, "dim_y": 1})
    model.normaliser = Normaliser(np.zeros(2), np.ones(2), np.array([280.0]), np.array([7.0]), ["lat", "lon"],
                                  ["t"], [None, None], ["K"], coordinates={"span": [60.0, 120.0]})
    path = tmp_path_factory.mktemp("field-run")
    model.save(path / "model.keras")
    (path / "checkpoints").mkdir()
    return path


@pytest.fixture(scope="module")
def gp_run(tmp_path_factory):
    """A run directory as training leaves it (spec, config, best.keras) of an untrained 1-D
    GP model."""
    from taylorformer.workflow.run_dir import RunDirectory

    out = tmp_path_factory.mktemp("gp") / "run"
    out.mkdir()
    model = build_model({**TINY, "dim_x": 1, "dim_y": 1})
    run_dir = RunDirectory(str(out))
    run_dir.write_definition(model.spec, {"train": {"batch_size": 4}, "task": "gp",
                                          "task_config": {"num_context": [3, 6], "num_target": 6}})
    run_dir.save_model(model, "best.keras")
    return out


def write_points(path, n, seed, values=True):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"lat": rng.uniform(31, 49, n), "lon": rng.uniform(101, 149, n)})
    if values:
        frame["t"] = 280 + rng.normal(size=n)
    frame.to_csv(path, index=False)
    return frame


@pytest.fixture(scope="module")
def grid_reference(field_run, tmp_path_factory):
    """The context file and the predictive mean and stddev on the (LAT, LON) grid in kelvin,
    with every cell defined: the reference of every grid case."""
    work = tmp_path_factory.mktemp("grid-reference")
    write_points(work / "context.csv", 8, 0)
    grid_file(work / "grid.nc", "K")
    assert cli.main(["predict", field_run, "--checkpoint", "model", "--grid", work / "grid.nc", "--context",
                     work / "context.csv", "--padding", "inf", "--quiet", "--output", work / "out.nc"]) == 0
    with xr.open_dataset(work / "out.nc") as out:
        return work / "context.csv", out.t_mean.values.copy(), out.t_stddev.values.copy()


def grid_file(path, kind):
    """A (lat, lon) temperature grid in kelvin, or with the defect or variant ``kind``."""
    lat, lon = LAT.copy(), LON.copy()
    values, units = 280 + np.add.outer(np.sin(np.radians(lat)), np.cos(np.radians(lon))), "K"
    if kind == "degC":
        values, units = values - 273.15, "degC"
    elif kind == "degF":
        values, units = (values - 273.15) * 9 / 5 + 32, "degF"
    elif kind == "NaN cells":
        values[1, 2] = values[3, 4] = np.nan
    elif kind == "metres":
        units = "m"
    elif kind == "latitude 300":
        lat = np.linspace(30.0, 300.0, 5)
    elif kind == "radians":
        lat, lon = np.radians(lat), np.radians(lon)
    elif kind == "duplicated lon":
        lon[3] = lon[2]
    elif kind in ("inf cell", "huge cell"):
        values[2, 2] = np.inf if kind == "inf cell" else 1e30
    elif kind == "all NaN":
        values[:] = np.nan
    xr.Dataset({"t": (("lat", "lon"), values, {"units": units})},
               coords={"lat": ("lat", lat), "lon": ("lon", lon)}).to_netcdf(path, engine="h5netcdf")
    return path


# ----------------------------------------------------------------------------- predict --grid
GRID_DEFECTS = {
    "grid": ["metres", "latitude 300", "radians", "duplicated lon", "inf cell", "huge cell", "all NaN"],
    "output": ["new.csv", "grid.nc", "missing/out.nc", "RUN/checkpoints/out.nc", "RUN", "context.csv"],
    "plot": ["missing/map.png", "map.xyz", "grid.nc", "RUN/checkpoints/map.png", "same as --output",
             "exists.nc"],
}


@st.composite
def grid_cases(draw):
    defect, bad = one_defect(draw, GRID_DEFECTS)
    return {"defect": defect,
            "grid": bad if defect == "grid" else draw(st.sampled_from(["K", "degC", "degF", "NaN cells"])),
            "output": bad if defect == "output" else draw(st.sampled_from(["new.nc", "exists.nc"])),
            "plot": bad if defect == "plot" else draw(st.sampled_from([None, "map.png", "exists.png"]))}


def test_predict_grid_converts_or_refuses_and_keeps_every_file(field_run, grid_reference, tmp_path, capsys):
    """Exit 0 exactly without a defect: the field in the grid's units (the kelvin
    reference converted), NaN exactly at the grid's NaN cells, the map a PNG; else one
    line, and every file as it was."""
    context, ref_mean, ref_std = grid_reference
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=8)
    @given(grid_cases())
    def check(case):
        event(f"{case['defect']}: {case[case['defect']] if case['defect'] != 'none' else case['grid']}")
        work = tmp_path / f"case{next(cases)}"
        work.mkdir()
        grid = grid_file(work / "grid.nc", case["grid"])
        shutil.copy(context, work / "context.csv")
        (work / "exists.nc").write_bytes(b"previous field")
        (work / "exists.png").write_bytes(b"previous map")

        def where(name):
            if name == "RUN":
                return field_run
            return field_run / name[4:] if name.startswith("RUN/") else work / name

        output = where(case["output"])
        plot = None if case["plot"] is None else (output if case["plot"] == "same as --output"
                                                  else where(case["plot"]))
        argv = ["predict", field_run, "--checkpoint", "model", "--grid", grid, "--context", work / "context.csv",
                "--padding", "inf", "--quiet", "--output", output] + (["--plot", plot] if plot else [])
        before = snapshot(work, field_run)
        code, _, err = run_cli(argv, capsys)
        refused = case["defect"] != "none"
        assert_outcome(code, err, argv, refused)
        assert_kept(before, snapshot(work, field_run), [] if refused else [output, plot], argv, err)
        assert not temps(work, field_run), (argv, err)
        if refused:
            return
        with xr.open_dataset(output) as out:
            mean, std = out.t_mean.values, out.t_stddev.values
            assert out.t_mean.attrs["units"] == {"NaN cells": "K"}.get(case["grid"], case["grid"])
        expected = {"degC": ref_mean - 273.15, "degF": (ref_mean - 273.15) * 9 / 5 + 32}.get(case["grid"], ref_mean)
        scale = 9 / 5 if case["grid"] == "degF" else 1.0
        defined = np.ones_like(ref_mean, bool)
        if case["grid"] == "NaN cells":
            defined[1, 2] = defined[3, 4] = False
        np.testing.assert_array_equal(np.isnan(mean), ~defined)
        np.testing.assert_allclose(mean[defined], expected[defined], rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(std[defined], scale * ref_std[defined], rtol=1e-4)
        if plot is not None:
            assert open(plot, "rb").read(8) == PNG

    check()


# ----------------------------------------------------------------------------- plot-field
@pytest.fixture(scope="module")
def field_file(grid_reference):
    """The prediction file of the reference: what plot-field draws."""
    return grid_reference[0].parent / "out.nc"


@st.composite
def plot_field_cases(draw):
    defect, bad = one_defect(draw, {
        "input": ["grid without predictions", "random bytes", "empty file", "directory", "missing", "all-NaN mean"],
        "out": ["missing/map.png", "map.xyz", "the input", "map.nc", "a directory"]})
    return {"defect": defect, "input": bad if defect == "input" else "prediction",
            "out": bad if defect == "out" else draw(st.sampled_from(["map.png", "map.svg", "exists.png", "default"])),
            "bytes": draw(st.binary(min_size=1, max_size=64))}


def test_plot_field_draws_the_field_or_refuses_in_one_line(field_file, tmp_path, capsys):
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=8)
    @given(plot_field_cases())
    def check(case):
        event(f"{case['defect']}: {case[case['defect']] if case['defect'] != 'none' else case['out']}")
        work = tmp_path / f"case{next(cases)}"
        work.mkdir()
        source = work / "field.nc"
        kind = case["input"]
        if kind == "prediction":
            shutil.copy(field_file, source)
        elif kind == "grid without predictions":
            grid_file(source, "K")
        elif kind in ("random bytes", "empty file"):
            source.write_bytes(case["bytes"] if kind == "random bytes" else b"")
        elif kind == "directory":
            source.mkdir()
        elif kind == "all-NaN mean":
            with xr.open_dataset(field_file) as out:
                blank = out.load()
            blank["t_mean"][:] = np.nan
            blank.to_netcdf(source, engine="h5netcdf")
        (work / "exists.png").write_bytes(b"previous map")
        (work / "a directory").mkdir()
        out = {"default": None, "the input": source}.get(case["out"], work / case["out"])
        argv = ["plot-field", source] + (["--out", out] if out is not None else [])
        written = work / "field.png" if out is None else out
        before = snapshot(work)
        code, _, err = run_cli(argv, capsys)
        refused = case["defect"] != "none"
        assert_outcome(code, err, argv, refused)
        assert_kept(before, snapshot(work), [] if refused else [written], argv, err)
        assert not temps(work), (argv, err)
        if not refused:
            data = open(written, "rb").read()
            assert data[:8] == PNG if written.suffix == ".png" else b"<svg" in data[:400]

    check()


def test_plot_field_refuses_a_map_without_one_defined_cell(tmp_path, capsys):
    values = np.full((3, 4), np.nan)
    xr.Dataset({"t_mean": (("lat", "lon"), values), "t_stddev": (("lat", "lon"), values + 1)},
               coords={"lat": np.arange(3.0), "lon": np.arange(4.0)}).to_netcdf(tmp_path / "f.nc", engine="h5netcdf")
    code, _, err = run_cli(["plot-field", tmp_path / "f.nc"], capsys)
    assert_outcome(code, err, ["plot-field"], refused=True)
    assert "every cell of t_mean is NaN" in err and os.listdir(tmp_path) == ["f.nc"], err


def test_plot_field_says_a_directory_is_one(tmp_path, capsys):
    (tmp_path / "field.nc").mkdir()
    code, _, err = run_cli(["plot-field", tmp_path / "field.nc"], capsys)
    assert_outcome(code, err, ["plot-field"], refused=True)
    assert "is a directory" in err and "does not exist" not in err, err


# ----------------------------------------------------------------------------- place
@st.composite
def place_cases(draw):
    n, repeats = draw(st.integers(4, 8)), draw(st.integers(0, 3))
    defect, bad = one_defect(draw, {"k": ["one more than the distinct candidates", "0"],
                                    "output": ["new.xyz", "cand.csv", "missing/out.csv", "RUN/checkpoints/o.csv"],
                                    "plot": ["missing/map.png", "map.xyz", "cand.csv", "same as --output"]})
    k = {"one more than the distinct candidates": n + 1, "0": 0}.get(bad, draw(st.integers(1, n)))
    return {"defect": defect, "n": n, "repeats": repeats, "k": k, "seed": draw(st.integers(0, 2**16)),
            "output": bad if defect == "output" else draw(st.sampled_from(["new.csv", "new.nc", "exists.csv"])),
            "plot": bad if defect == "plot" else draw(st.sampled_from([None, "map.png"]))}


def test_place_picks_distinct_candidates_or_refuses(field_run, grid_reference, tmp_path, capsys):
    """Exit 0 exactly without a defect: k distinct locations, each one of the candidates
    (a repeated candidate row never picked twice, the repeats named in a warning); else
    one line, and every file as it was."""
    context = grid_reference[0]
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=5)
    @given(place_cases())
    def check(case):
        event(f"{case['defect']}")
        work = tmp_path / f"case{next(cases)}"
        work.mkdir()
        distinct = write_points(work / "distinct.csv", case["n"], case["seed"], values=False)
        rng = np.random.default_rng(case["seed"])
        given_rows = pd.concat([distinct, distinct.iloc[rng.integers(0, case["n"], case["repeats"])]])
        given_rows.to_csv(work / "cand.csv", index=False)
        (work / "exists.csv").write_bytes(b"previous placement")
        output = field_run / case["output"][4:] if case["output"].startswith("RUN/") else work / case["output"]
        plot = {None: None, "same as --output": output}.get(case["plot"], work / str(case["plot"]))
        argv = ["place", field_run, "--checkpoint", "model", "--candidates", work / "cand.csv", "--context", context,
                "--k", case["k"], "--output", output] + (["--plot", plot] if plot else [])
        before = snapshot(work, field_run)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code, out, err = run_cli(argv, capsys)
        refused = case["defect"] != "none"
        assert_outcome(code, err, argv, refused)
        assert_kept(before, snapshot(work, field_run), [] if refused else [output, plot], argv, err)
        assert not temps(work, field_run), (argv, err)
        if refused:
            return
        notes = [str(w.message) for w in caught if "candidate row(s) repeat" in str(w.message)]
        assert [f"{case['repeats']} candidate row(s)" in n for n in notes] == [True] * (case["repeats"] > 0), notes
        if output.suffix == ".csv":
            chosen = pd.read_csv(output)[["lat", "lon"]].to_numpy()
        else:
            with xr.open_dataset(output) as placed:
                chosen = placed["x"].values
        assert len(chosen) == case["k"] and len(np.unique(chosen, axis=0)) == case["k"]
        gaps = np.abs(chosen[:, None] - distinct.to_numpy()[None]).max(-1)
        assert (gaps.min(1) < 1e-4).all(), chosen  # each a candidate (written back in float32)
        if plot is not None:
            assert open(plot, "rb").read(8) == PNG

    check()


# ----------------------------------------------------------------------------- export and serving
@pytest.fixture(scope="module")
def exported(gp_run, tmp_path_factory):
    """The GP run exported by the CLI into an empty folder (the one export the module
    runs: a SavedModel takes seconds), loaded with TensorFlow."""
    import tensorflow as tf

    folder = tmp_path_factory.mktemp("export") / "model"
    folder.mkdir()
    assert cli.main(["export", gp_run, "--output", folder]) == 0
    assert {"saved_model.pb", "variables"} <= set(os.listdir(folder)) and not temps(folder.parent)
    return tf.saved_model.load(str(folder))


EXPORT_FOLDERS = ["missing/exp", "a file", "not empty", "RUN/exported", "RUN", "RUN/checkpoints", "the run's file"]


@settings(SETTINGS, max_examples=8)
@given(kind=st.sampled_from(EXPORT_FOLDERS), name=st.sampled_from(["exp", "exp 2", "ünïcode"]))
def test_export_refuses_every_folder_it_may_not_fill_before_any_work(gp_run, tmp_path, capsys, kind, name):
    work = tmp_path / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "exists.csv").write_text("mine")
    (work / "busy").mkdir()
    (work / "busy" / "keep.txt").write_text("mine")
    folder = {"missing/exp": work / "missing" / name, "a file": work / "exists.csv", "not empty": work / "busy",
              "RUN/exported": gp_run / name, "RUN": gp_run, "RUN/checkpoints": gp_run / "checkpoints" / name,
              "the run's file": gp_run / "best.keras"}[kind]
    before = snapshot(work, gp_run)
    argv = ["export", gp_run, "--output", folder]
    code, _, err = run_cli(argv, capsys)
    assert_outcome(code, err, argv, refused=True)
    assert str(folder) in err, err
    assert snapshot(work, gp_run) == before and not temps(work, gp_run), (argv, err)


SERVE_DEFECTS = {"NaN xc": ("xc", np.nan), "inf xt": ("xt", np.inf), "huge xt": ("xt", 1e30),
                 "huge yc": ("yc", -1e30), "inf yc": ("yc", np.inf), "mask_c 2": ("mask_c", 2.0),
                 "mask_c -1": ("mask_c", -1.0), "mask_c 0.5": ("mask_c", 0.5), "mask_t 0.5": ("mask_t", 0.5),
                 "batch of xc 2, yc 1": ("yc", "batch"), "points of yc one short": ("yc", "points"),
                 "points of mask_t one short": ("mask_t", "points")}


@st.composite
def served_inputs(draw):
    b, nc, nt = draw(st.integers(1, 2)), draw(st.integers(2, 6)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    query = {"xc": rng.uniform(-2, 2, (b, nc, 1)), "yc": rng.normal(size=(b, nc, 1)),
             "xt": rng.uniform(-2, 2, (b, nt, 1)), "mask_c": np.ones((b, nc)), "mask_t": np.ones((b, nt))}
    defect = draw(st.sampled_from(["none", "none", "NaN yc (unobserved)", *SERVE_DEFECTS]))
    return defect, {k: v.astype(np.float32) for k, v in query.items()}, (draw(st.integers(0, b - 1)),
                                                                        draw(st.integers(0, nc - 1)))


@settings(SETTINGS, max_examples=15)
@given(case=served_inputs())
def test_a_served_export_answers_valid_inputs_and_refuses_the_rest(exported, case):
    """A valid query gives finite predictions that equal those of the same query with
    extra context points masked out; a NaN ``yc`` is an unobserved point (the same as
    masking it); every other defect is an ``InvalidArgumentError`` naming the rule."""
    import tensorflow as tf

    defect, query, (i, j) = case
    event(defect)
    with_masks = exported.signatures["with_masks"]

    def serve(q):
        return {k: v.numpy() for k, v in with_masks(**{n: tf.constant(a) for n, a in q.items()}).items()}

    if defect in ("none", "NaN yc (unobserved)"):
        reference = dict(query)
        if defect == "NaN yc (unobserved)":
            query["yc"][i, j, 0] = np.nan
            reference["mask_c"] = query["mask_c"].copy()
            reference["mask_c"][i, j] = 0.0
        padded = {**reference, "xc": np.concatenate([reference["xc"], np.full_like(reference["xc"][:, :2], 7.0)], 1),
                  "yc": np.concatenate([reference["yc"], np.full_like(reference["yc"][:, :2], -9.0)], 1),
                  "mask_c": np.concatenate([reference["mask_c"], np.zeros_like(reference["mask_c"][:, :2])], 1)}
        got, expected = serve(query), serve(padded)
        assert got["mean"].shape == query["xt"].shape and np.isfinite(got["mean"]).all()
        assert (got["stddev"] > 0).all()
        for key in ("mean", "stddev"):
            np.testing.assert_allclose(got[key], expected[key], rtol=1e-4, atol=1e-5)
        if defect == "none":
            plain = exported.signatures["serving_default"](**{n: tf.constant(query[n]) for n in ("xc", "yc", "xt")})
            np.testing.assert_allclose(plain["mean"].numpy(), got["mean"], rtol=1e-5, atol=1e-6)
        return
    key, value = SERVE_DEFECTS[defect]
    if value == "batch":
        query["xc"] = np.concatenate([query["xc"]] * 2)[:2]
        query["yc"], query["mask_c"] = query["yc"][:1], query["mask_c"][:1]
        if len(query["xt"]) == 1:
            query["xc"] = np.concatenate([query["xc"], query["xc"]])[:2]
    elif value == "points":
        query[key] = query[key][:, :-1]
    else:
        query[key][(i, j, 0) if query[key].ndim == 3 else (i, min(j, query[key].shape[1] - 1))] = value
    with pytest.raises(tf.errors.InvalidArgumentError, match="invalid input: "):
        serve(query)


# ----------------------------------------------------------------------------- info
CONTROL = st.sampled_from(["\x1b[31m", "\x1b]0;title\x07", "\x9b2J", "\r", "\x08", "\x0b", "\x00", "\x7f", "é", "字"])


@st.composite
def info_cases(draw):
    text = "".join(draw(st.lists(st.one_of(CONTROL, st.text(alphabet="abc xyz", min_size=1, max_size=4)),
                                 min_size=1, max_size=6)))
    damage = draw(st.sampled_from(["none", "none", "truncated", "bytes flipped", "not a zip", "spec layers"]))
    return text, damage, draw(st.integers(1, 10**6)), draw(st.integers(0, 2**31))


def test_info_prints_a_clean_card_or_refuses_the_file(gp_run, tmp_path, capsys):
    """A card whose text holds escape codes and control characters prints without them
    (the rest of the text kept); a damaged file or a spec beyond the bounds loading
    applies is one line naming the file; the file is byte-identical afterwards."""
    source = gp_run / "best.keras"
    with zipfile.ZipFile(source) as archive:
        entries = [(item, archive.read(item)) for item in archive.infolist()]
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=25)
    @given(info_cases())
    def check(case):
        text, damage, where, layers = case
        event(damage)
        path = tmp_path / f"case{next(cases)}.keras"
        with zipfile.ZipFile(path, "w") as out:
            for item, raw in entries:
                if item.filename == "config.json":
                    config = json.loads(raw)
                    config["config"]["model_card"] = {"data": {"task": text}}
                    if damage == "spec layers":
                        config["config"]["spec"]["encoder"]["layers"] = 129 + layers
                    raw = json.dumps(config).encode()
                out.writestr(item, raw)
        data = bytearray(path.read_bytes())
        if damage == "truncated":
            data = data[:where % len(data)]
        elif damage == "bytes flipped":
            data[where % len(data)] ^= 0xFF
        elif damage == "not a zip":
            data = bytearray(text.encode("utf-8", "surrogatepass"))
        path.write_bytes(bytes(data))
        argv = ["info", path]
        code, out, err = run_cli(argv, capsys)
        assert path.read_bytes() == bytes(data)
        must_refuse = damage in ("truncated", "not a zip", "spec layers")
        assert code in (0, 2) and (code == 2 or not must_refuse), (argv, code, err)  # a flipped byte may be harmless
        assert_outcome(code, err, argv, refused=code == 2)
        if code == 2:
            assert str(path) in err, err
            return
        assert not any(c in out for c in "\x1b\x07\x9b\r\x08\x0b\x00\x7f"), out
        if damage == "none":
            kept = "".join(c for c in text.replace("\x1b[31m", "").replace("\x1b]0;title\x07", "")
                           .replace("\x9b2J", "") if c.isprintable())
            assert f"task {kept}".rstrip() in out, (kept, out)

    check()


# ----------------------------------------------------------------------------- evaluate
BUDGETS = {"fits": ["512MiB", "2GB", "1e9", "0.5GiB"],
           "refused": ["1e30GB", "-1GB", "0", "nanGB", "infGB", "lots", "2XB", "1e400"]}


@st.composite
def evaluate_cases(draw):
    defect, bad = one_defect(draw, {"budget": BUDGETS["refused"],
                                    "plot": ["missing/cal.png", "cal.xyz", "RUN/checkpoints/cal.png",
                                             "RUN/config.json", "RUN/calibration.json"]})
    return {"defect": defect, "mode": draw(st.sampled_from(["--calibration", "--recalibrate"])),
            "budget": bad if defect == "budget" else draw(st.sampled_from([None, *BUDGETS["fits"]])),
            "plot": bad if defect == "plot" else draw(st.sampled_from(["default", "cal.png", "exists.png"]))}


def test_evaluate_calibration_writes_its_outputs_or_nothing(gp_run, tmp_path, capsys):
    """Exit 0 exactly without a defect: the JSON result on stdout, the calibration plot a
    PNG, and with --recalibrate a calibration.json whose scale lies in the fit's range and
    loads back; else one line, and the run and every file as they were."""
    cases = iter(range(10**6))

    @settings(SETTINGS, max_examples=4)
    @given(evaluate_cases())
    def check(case):
        event(f"{case['mode']} {case['defect']}")
        work = tmp_path / f"case{next(cases)}"
        work.mkdir()
        run = work / "run"
        shutil.copytree(gp_run, run)
        (work / "exists.png").write_bytes(b"previous plot")
        plot = {"default": None}.get(case["plot"], case["plot"])
        if plot is not None:
            plot = run / plot[4:] if plot.startswith("RUN/") else work / plot
        argv = ["evaluate", run, "--batches", "1", "--batch-size", "2", "--no-baselines", case["mode"]]
        argv += ["--calibration-plot", plot] if plot is not None else []
        argv += ["--memory-budget", case["budget"]] if case["budget"] else []
        before = snapshot(work)
        code, out, err = run_cli(argv, capsys)
        refused = case["defect"] != "none"
        assert_outcome(code, err, argv, refused)
        written = [plot if plot is not None else run / "calibration-test.png"]  # the default split
        written += [run / "calibration.json"] if case["mode"] == "--recalibrate" else []
        assert_kept(before, snapshot(work), [] if refused else written, argv, err)
        assert not temps(work), (argv, err)
        if refused:
            return
        assert "calibration" in json.loads(out)
        assert open(written[0], "rb").read(8) == PNG
        if case["mode"] == "--recalibrate":
            scale = cal.load_recalibration(str(run), "best")["scale"]
            assert all(FIT_RANGE[0] <= s <= FIT_RANGE[1] for s in scale), scale

    check()


# ----------------------------------------------------------------------------- stored calibration
@st.composite
def stored_calibrations(draw):
    kind = draw(st.sampled_from(["fitted scale", "fitted scale", "outside the fit's range", "not a number",
                                 "two scales", "other model", "no fingerprint", "not JSON", "a directory",
                                 "a dangling link", "a list"]))
    scale = {"fitted scale": draw(st.floats(*FIT_RANGE)),
             "outside the fit's range": draw(st.one_of(st.floats(1e3, 1e300, exclude_min=True),
                                                       st.floats(-1e3, 1e-3, exclude_max=True),
                                                       st.sampled_from([float("nan"), float("inf"), 1e30]))),
             "not a number": draw(st.sampled_from(["2", None, True, [1.5], {"s": 1}]))}.get(kind, 1.5)
    return kind, scale


def test_a_stored_calibration_is_applied_exactly_or_refused_naming_the_file(gp_run, tmp_path, capsys):
    """A fitted scale multiplies the predictive stddev (the mean unchanged) against the
    same prediction without it; anything else in calibration.json is one line naming it,
    and no prediction file is written."""
    run = tmp_path / "run"
    shutil.copytree(gp_run, run)
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "query.npz", xc=rng.uniform(-2, 2, (5, 1)), yc=rng.normal(size=(5, 1)),
             xt=rng.uniform(-2, 2, (4, 1)))
    base = ["predict", run, "--input", tmp_path / "query.npz"]
    assert run_cli(base + ["--output", tmp_path / "plain.npz"], capsys)[0] == 0
    with np.load(tmp_path / "plain.npz") as plain:
        reference = {k: plain[k] for k in ("mean", "stddev")}
    fingerprint = cal.model_fingerprint(str(run / "best.keras"))
    stored = run / "calibration.json"

    @settings(SETTINGS, max_examples=6)
    @given(stored_calibrations())
    def check(case):
        kind, scale = case
        event(kind)
        if os.path.isdir(stored) and not os.path.islink(stored):
            os.rmdir(stored)
        elif os.path.lexists(stored):
            os.unlink(stored)
        record = {"method": "spread-scale", "scale": [scale] * (2 if kind == "two scales" else 1),
                  "model_sha256": "0" * 64 if kind == "other model" else fingerprint}
        if kind == "no fingerprint":
            del record["model_sha256"]
        if kind == "not JSON":
            stored.write_text('{"best": {"scale": [1.5')
        elif kind == "a directory":
            stored.mkdir()
        elif kind == "a dangling link":
            stored.symlink_to(tmp_path / "nowhere.json")
        else:
            stored.write_text(json.dumps([record] if kind == "a list" else {"best": record}, allow_nan=True))
        output = tmp_path / "out.npz"
        if output.exists():
            output.unlink()
        before = snapshot(run, tmp_path / "query.npz")
        argv = base + ["--output", output]
        code, _, err = run_cli(argv, capsys)
        refused = kind != "fitted scale"
        assert_outcome(code, err, argv, refused)
        assert snapshot(run, tmp_path / "query.npz") == before and not temps(tmp_path), (argv, err)
        if refused:
            assert "calibration.json" in err and not output.exists(), err
            return
        with np.load(output) as got:
            np.testing.assert_allclose(got["mean"], reference["mean"], rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(got["stddev"], scale * reference["stddev"], rtol=1e-5)

    check()


# ----------------------------------------------------------------------------- spec standardise keys
@settings(SETTINGS, max_examples=60)
@given(mode=st.one_of(st.none(), st.sampled_from(["global", "window", "last", "Window", "", "per-window", 1])),
       floor=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([True, "0.1", 0])),
       old_names=st.booleans())
def test_standardise_keys_are_kept_exactly_or_refused(mode, floor, old_names):
    """Accepted exactly when the mode is one of the modes (global, window, ...) and the
    floor is left out, or is a real number within its range with a mode that uses it (not global);
    accepted values are stored as given (the earlier key names read the same, with a
    DeprecationWarning)."""
    names = ("normalise", "normalise_min_scale") if old_names else ("standardise", "standardise_min_scale")
    spec = dict(TINY)
    if mode is not None:
        spec[names[0]] = mode
    if floor is not None:
        spec[names[1]] = floor
    assert {"global", "window"} <= set(STANDARDISE_MODES)
    resolved_mode = "global" if mode is None else mode
    ok = resolved_mode in STANDARDISE_MODES and (
        floor is None or (not isinstance(floor, (bool, str)) and FLOOR_RANGE[0] <= floor <= FLOOR_RANGE[1]
                          and resolved_mode != "global"))
    with pytest.warns(DeprecationWarning) if old_names and (mode is not None or floor is not None) else \
            contextlib.nullcontext():
        if not ok:
            with pytest.raises(SpecError, match="standardise"):
                resolve_spec(spec)
            return
        resolved = resolve_spec(spec)
    assert resolved["standardise"] == resolved_mode
    assert resolved["standardise_min_scale"] == (0.01 if floor is None else floor)
