"""Nothing lost, nothing silent on the newer entry points (issue 50): each bad input gives
one documented error (the CLI: exit 2, one ``error:`` line, no traceback, the user's
path), the good input still works, and each bound holds over a range of values.

Bounds are checked against statements made here, not read back from the code under
test: the machine's memory from ``/proc/meminfo``, the fit's range ``[1e-3, 1e3]`` and
the floor's range ``[1e-6, 1e6]`` as documented.
"""
import json
import os
import shutil
import zipfile

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taylorformer import cli
from taylorformer.checks import SIZE_BOUNDS
from taylorformer.errors import ModelFileError, RunDirectoryError, SpecError
from taylorformer.model_card import read_model_file
from taylorformer.models.bounded_sampling import default_budget, parse_memory, resident_bytes
from taylorformer.prediction import calibration as cal
from taylorformer.spec import resolve_spec
from taylorformer.workflow import training

SETTINGS = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "saved_v0_1",
                       "tnp-d.keras")
TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}
#: documented ranges (issue 50): spread scales a fit produces, standardise_min_scale
FIT_RANGE = (1e-3, 1e3)
FLOOR_RANGE = (1e-6, 1e6)


def machine_bytes():
    """MemTotal of /proc/meminfo in bytes: the test's own reading of the machine's memory."""
    with open("/proc/meminfo") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemTotal:"))


def run_cli(argv, capsys):
    """``(exit code, stdout, stderr)`` of ``taylorformer ARGV`` run in-process."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line(code, err, *words):
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "\x1b" not in err
    for word in words:
        assert word in err, (word, err)


def rewrite(source, target, name="config.json", change=None, data=None):
    """A copy of the model file ``source`` at ``target`` with its entry ``name`` replaced by
    ``data`` (bytes) or by ``change(json value)`` (weights untouched)."""
    with zipfile.ZipFile(source) as archive:
        items = [(item, archive.read(item)) for item in archive.infolist()]
    with zipfile.ZipFile(target, "w") as out:
        for item, raw in items:
            if item.filename == name:
                raw = data if data is not None else json.dumps(change(json.loads(raw))).encode()
            out.writestr(item, raw)
    return target


def with_spec(path, **encoder):
    def change(config):
        config["config"]["spec"]["encoder"].update(encoder)
        return config
    return rewrite(FIXTURE, path, change=change)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run directory as training leaves it (spec, config, best.keras), of an untrained model."""
    from taylorformer.models import build_model
    from taylorformer.workflow.run_dir import RunDirectory

    out = tmp_path_factory.mktemp("bounds") / "run"
    out.mkdir()
    model = build_model({**TINY, "dim_x": 1, "dim_y": 1})
    run_dir = RunDirectory(str(out))
    run_dir.write_definition(model.spec, {"train": {"batch_size": 4}, "task": "gp",
                                          "task_config": {"num_context": [3, 6], "num_target": 6}})
    run_dir.save_model(model, "best.keras")
    return out


# ----------------------------------------------------------------------------- stored calibration
@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    """A directory with a best.keras (any bytes: only its fingerprint is read)."""
    out = tmp_path_factory.mktemp("fake")
    (out / "best.keras").write_bytes(b"weights")
    return out


def store(run_dir, scale):
    record = {"method": "spread-scale", "scale": scale,
              "model_sha256": cal.model_fingerprint(os.path.join(run_dir, "best.keras"))}
    (run_dir / "calibration.json").write_text(json.dumps({"best": record}))


OUTSIDE_FIT = st.one_of(st.floats(max_value=FIT_RANGE[0], exclude_max=True),
                        st.floats(min_value=FIT_RANGE[1], exclude_min=True), st.just(float("nan")),
                        st.just(1e30), st.just(0), st.just(-1), st.just(True))


@SETTINGS
@given(scale=OUTSIDE_FIT)
def test_a_stored_spread_scale_outside_the_fits_range_is_refused(fake_run, scale):
    (fake_run / "calibration.json").write_text(json.dumps({"best": {"scale": [1.0, scale]}}, allow_nan=True))
    with pytest.raises(RunDirectoryError, match="calibration.json is corrupt.*the range a fit produces") as err:
        cal.load_recalibration(str(fake_run), "best")
    assert str(fake_run) in str(err.value)


@SETTINGS
@given(scale=st.floats(*FIT_RANGE))
def test_a_stored_spread_scale_inside_the_fits_range_is_applied(fake_run, scale):
    store(fake_run, [scale])
    assert cal.load_recalibration(str(fake_run), "best")["scale"] == [scale]


@pytest.mark.parametrize("sd, end", [(1e-6, FIT_RANGE[1]), (1e6, FIT_RANGE[0])])
def test_a_fit_at_either_end_of_its_range_is_stored_and_loaded(tmp_path, sd, end):
    """Forecasts far too sharp (or too wide) push the fit to an end of its range; what it
    stores loads again."""
    y = np.random.default_rng(0).normal(size=(200, 1))
    marginals = [cal.NormalMarginals(y, np.ones_like(y, bool), np.zeros_like(y), np.full_like(y, sd))]
    scale, _ = cal.fit_spread_scale(marginals)
    assert FIT_RANGE[0] <= scale[0] <= FIT_RANGE[1] and scale[0] == pytest.approx(end, rel=1e-3)
    (tmp_path / "best.keras").write_bytes(b"weights")
    record = {"scale": scale.tolist(), "model_sha256": cal.model_fingerprint(str(tmp_path / "best.keras"))}
    cal.save_recalibration(str(tmp_path), "best", record)
    assert cal.load_recalibration(str(tmp_path), "best")["scale"] == scale.tolist()


@pytest.mark.filterwarnings("ignore:.*no saved normaliser")
def test_a_calibration_json_that_is_not_a_file_is_an_error(tmp_path, run, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "calibration.json").mkdir()
    with pytest.raises(RunDirectoryError, match="calibration.json is not a file"):
        cal.load_recalibration(str(copy), "best")
    pd.DataFrame({"x": [-1.0, 0.0, 1.0], "y": [0.1, 0.2, 0.3]}).to_csv(tmp_path / "c.csv", index=False)
    pd.DataFrame({"x": [0.5]}).to_csv(tmp_path / "q.csv", index=False)
    common = ["predict", copy, "--input", tmp_path / "q.csv", "--context", tmp_path / "c.csv"]
    code, _, err = run_cli(common + ["--output", tmp_path / "p.csv"], capsys)
    assert_one_line(code, err, str(copy / "calibration.json"), "not a file")
    assert not (tmp_path / "p.csv").exists()
    assert run_cli(common + ["--output", tmp_path / "p.csv", "--no-recalibration"], capsys)[0] == 0
    (copy / "calibration.json").rmdir()
    (copy / "calibration.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(RunDirectoryError, match="not a file"):
        cal.load_recalibration(str(copy), "best")
    (copy / "calibration.json").unlink()
    assert cal.load_recalibration(str(copy), "best") is None  # none stored: predict as fitted


# ----------------------------------------------------------------------------- info
def test_info_refuses_a_spec_that_loading_refuses(tmp_path, capsys):
    from taylorformer import load_model

    path = with_spec(tmp_path / "big.keras", layers=2147483647)
    code, out, err = run_cli(["info", path], capsys)
    assert_one_line(code, err, str(path), "'encoder.layers'", "2147483647", "[0, 128]")
    assert out == ""
    with pytest.raises(SpecError, match="layers.*128"):  # loading refuses it with the same bound
        load_model(str(path))
    code, out, err = run_cli(["info", FIXTURE], capsys)
    assert code == 0 and err == "" and "model file:" in out


@SETTINGS
@given(key=st.sampled_from(["layers", "width", "num_heads", "head_dim"]), data=st.data())
def test_info_accepts_exactly_the_sizes_within_their_bounds(tmp_path, key, data):
    bound = {"layers": 128, "width": 8192, "num_heads": 256, "head_dim": 8192}[key]  # docs/plugins.md
    assert SIZE_BOUNDS[key] == bound
    value = data.draw(st.one_of(st.integers(0, bound), st.integers(bound + 1, 2**63), st.integers(-2**63, -1)))
    path = with_spec(tmp_path / "m.keras", **{key: value})
    if 0 <= value <= bound:
        assert read_model_file(path)["spec"]["encoder"][key] == value
    else:
        with pytest.raises(ModelFileError, match=f"'encoder.{key}' must be an int in \\[0, {bound}\\]"):
            read_model_file(path)


def test_info_strips_escape_codes_and_control_characters_from_the_card(tmp_path, capsys):
    def change(config):
        config["config"]["model_card"] = {"data": {"task": "\x1b[31mred\x1b[0m", "source": "a\x1b]0;title\x07b"},
                                          "training": {"steps": "1\r\x08\x0b2"}, "versions": {"x": "\x9b2J3"}}
        return config

    path = rewrite(FIXTURE, tmp_path / "card.keras", change=change)
    code, out, err = run_cli(["info", path], capsys)
    assert code == 0 and err == ""
    assert not any(c in out for c in "\x1b\x07\r\x08\x0b\x9b")
    assert "task red" in out and "source ab" in out and "steps 12" in out
    code, out, _ = run_cli(["info", path, "--json"], capsys)  # JSON escapes them
    assert code == 0 and json.loads(out)["card"]["data"]["task"] == "\x1b[31mred\x1b[0m" and "\x1b" not in out


@pytest.mark.parametrize("name", ["config.json", "metadata.json"])
def test_info_bounds_the_json_depth(tmp_path, capsys, name):
    deep = b'{"config": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path = rewrite(FIXTURE, tmp_path / "deep.keras", name=name, data=deep)
    code, _, err = run_cli(["info", path], capsys)
    assert_one_line(code, err, str(path), f"its {name} nests deeper than 64 levels")


def test_info_refuses_card_entries_of_the_wrong_type(tmp_path, capsys):
    def change(config):
        config["config"]["model_card"] = {"data": {"split_sizes": [1, 2]}}
        return config

    path = rewrite(FIXTURE, tmp_path / "card.keras", change=change)
    assert_one_line(*run_cli(["info", path], capsys)[::2], str(path), "split_sizes is a list, not an object")


def test_info_names_links_that_lead_nowhere(tmp_path, capsys):
    loop, other = tmp_path / "loop.keras", tmp_path / "other.keras"
    loop.symlink_to(other)
    other.symlink_to(loop)
    code, _, err = run_cli(["info", loop], capsys)
    assert_one_line(code, err, str(loop), "a symbolic link loop")
    assert "does not exist" not in err
    dangling = tmp_path / "dangling.keras"
    dangling.symlink_to(tmp_path / "gone.keras")
    assert_one_line(*run_cli(["info", dangling], capsys)[::2], "does not exist (a link to a missing file)")
    assert_one_line(*run_cli(["info", "/dev/null"], capsys)[::2], "not a regular file")


# ----------------------------------------------------------------------------- standardise_min_scale
def test_a_huge_min_scale_is_refused_before_keras():
    from taylorformer.models import build_model

    with pytest.warns(DeprecationWarning), pytest.raises(SpecError, match=r"standardise_min_scale must be a "
                                                                            r"number in \[1e-06, 1e\+06\]"):
        build_model(TINY, normalise="window", normalise_min_scale=1e308)


@SETTINGS
@given(value=st.one_of(st.floats(max_value=FLOOR_RANGE[0], exclude_max=True),
                       st.floats(min_value=FLOOR_RANGE[1], exclude_min=True), st.just(True), st.just("0.1")))
def test_a_min_scale_outside_its_range_is_refused(value):
    with pytest.raises(SpecError, match="standardise_min_scale must be a number in"):
        resolve_spec(TINY, standardise="window", standardise_min_scale=value)


@SETTINGS
@given(value=st.floats(*FLOOR_RANGE))
def test_a_min_scale_inside_its_range_is_kept(value):
    assert resolve_spec(TINY, standardise="window", standardise_min_scale=value)["standardise_min_scale"] == value


def test_a_min_scale_with_global_is_refused_unless_saved(tmp_path, capsys, monkeypatch):
    with pytest.raises(SpecError, match="has no effect with standardise 'global'"):
        resolve_spec(TINY, standardise="global", standardise_min_scale=0.5)
    with pytest.raises(SpecError, match="has no effect"):  # global is the default
        resolve_spec(TINY, standardise_min_scale=0.5)
    assert resolve_spec(TINY, standardise_min_scale=0.5, task_defaults={"standardise": "window"})[
        "standardise_min_scale"] == 0.5
    saved = {**resolve_spec(TINY), "standardise_min_scale": 0.5}  # as an earlier version saved it
    assert resolve_spec(saved)["standardise_min_scale"] == 0.5
    monkeypatch.setattr(training.Trainer, "fit", lambda *a, **k: pytest.fail("reached training"))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**TINY, "standardise": "window", "standardise_min_scale": 1e308}))
    code, _, err = run_cli(["train", "--model", spec, "--out", tmp_path / "r", "--steps", 1], capsys)
    assert_one_line(code, err, "standardise_min_scale", "1e+308")


# ----------------------------------------------------------------------------- memory budget
@SETTINGS
@given(excess=st.integers(1, 10**30))
def test_a_budget_above_the_machines_memory_is_refused(excess):
    nbytes = machine_bytes() + excess
    # the GB text goes through a float: an excess of a few bytes may round away there
    for value in (nbytes, f"{nbytes}B") + ((f"{nbytes / 1e9!r}GB",) if excess >= 10**4 else ()):
        with pytest.raises(SpecError, match="at most this machine's memory"):
            parse_memory(value)


@SETTINGS
@given(nbytes=st.integers(1, 2**62))
def test_a_budget_within_the_machines_memory_is_taken(nbytes):
    nbytes = 1 + nbytes % machine_bytes()
    assert parse_memory(nbytes) == nbytes
    assert parse_memory("1e+3MB") == parse_memory("1e3MB") == parse_memory("1GB")   # a signed exponent


def test_the_cli_refuses_a_budget_above_the_machines_memory(run, capsys):
    code, _, err = run_cli(["evaluate", run, "--samples", "10", "--memory-budget", "1e30GB"], capsys)
    assert_one_line(code, err, "memory budget", "at most this machine's memory", "1e30GB")


def test_the_default_budget_gives_the_sampler_at_most_2GB_or_half_the_available_memory():
    with open("/proc/meminfo") as fh:
        available = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    before, budget, after = resident_bytes(), default_budget(), resident_bytes()
    slack = abs(after - before) + 2**26  # the process may grow or shrink meanwhile
    assert 0 < budget - before <= min(2 * 10**9, available // 2) + slack
