"""Property-based tests: malformed batches, specs and task configs get clear errors.

Each generated input carries exactly one defect of a known category; the error must be
a taylorformer error (never a raw TensorFlow/NumPy exception) naming the offending field.
"""
import json

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import taylorformer as tfm
from taylorformer.errors import BatchError, SpecError, UnknownComponentError
from taylorformer.task import make_task

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
KEYS = ("xc", "yc", "xt", "yt")


@pytest.fixture(scope="module")
def model():
    return tfm.build_model({"preset": "cnp", "dim_x": 2, "encoder": {"width": 8}, "head": {"width": 8}})


DEFECTS = ["rank", "points", "batch", "dim_x", "dim_y", "nonfinite", "mask_shape", "mask_values",
           "empty_targets", "all_masked_targets", "missing"]


@st.composite
def defective_batches(draw, kind):
    b, nc, nt = draw(st.integers(1, 3)), draw(st.integers(0, 5)), draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    batch = {"xc": rng.normal(size=(b, nc, 2)), "yc": rng.normal(size=(b, nc, 1)),
             "xt": rng.normal(size=(b, nt, 2)), "yt": rng.normal(size=(b, nt, 1))}
    batch = {k: v.astype(np.float32) for k, v in batch.items()}
    key = draw(st.sampled_from(KEYS))
    event(f"defect: {kind}")
    if kind == "rank":
        batch[key] = batch[key][0] if draw(st.booleans()) else batch[key][..., None]
    elif kind == "points":
        extra = np.zeros((b, 1, batch[key].shape[2]), np.float32)
        batch[key] = np.concatenate([batch[key], extra], axis=1)
    elif kind == "batch":
        batch[key] = np.concatenate([batch[key], batch[key]], axis=0)
    elif kind == "dim_x":
        batch["xc"], batch["xt"] = batch["xc"][..., :1], batch["xt"][..., :1]
        key = "xt"
    elif kind == "dim_y":
        batch["yc"], batch["yt"] = np.repeat(batch["yc"], 2, -1), np.repeat(batch["yt"], 2, -1)
        key = "yt"
    elif kind == "nonfinite":
        key = draw(st.sampled_from(["xt", "yt"] + (["xc", "yc"] if nc else [])))
        arr = batch[key]
        idx = tuple(draw(st.integers(0, s - 1)) for s in arr.shape)
        # a NaN output value means "not observed" (valid); inputs must be finite
        arr[idx] = draw(st.sampled_from(([] if key.startswith("y") else [np.nan]) + [np.inf, -np.inf]))
    elif kind == "mask_shape":
        key = "mask_t"
        batch[key] = np.ones((b, nt + 1), np.float32)
    elif kind == "mask_values":
        key = "mask_t"
        batch[key] = np.full((b, nt), 0.5, np.float32)
    elif kind == "empty_targets":
        batch["xt"], batch["yt"] = batch["xt"][:, :0], batch["yt"][:, :0]
        key = "target"
    elif kind == "all_masked_targets":
        key = "mask_t"
        batch[key] = np.ones((b, nt), np.float32)
        batch[key][draw(st.integers(0, b - 1))] = 0.0
    elif kind == "missing":
        del batch[key]
    return kind, key, batch


@pytest.mark.parametrize("defect", DEFECTS)
@settings(SETTINGS, max_examples=15)
@given(data=st.data())
def test_defective_batches_raise_batch_errors_naming_the_field(model, defect, data):
    kind, key, batch = data.draw(defective_batches(defect))
    with pytest.raises(BatchError) as err:
        model(batch)
    assert key in str(err.value) or (kind in ("rank", "points", "batch") and key[0] in "xy"), str(err.value)
    with pytest.raises(BatchError):
        tfm.loglik(model, batch)


SPEC_FIELDS = {"dim_x": st.one_of(st.text(max_size=3), st.floats(), st.integers(-3, 0), st.booleans()),
               "kind": st.text(min_size=1, max_size=8),
               "head": st.one_of(st.integers(), st.dictionaries(st.sampled_from(["widht", "depth"]), st.integers(), min_size=1)),
               "encoder": st.one_of(st.integers(), st.just({"name": "transfomer"}),
                                    st.just({"name": "transformer", "layer": 2}),
                                    st.just({"name": "transformer", "attention": "mhaxy"})),
               "likelihood": st.one_of(st.just("gausian"), st.just({"name": "normal", "min_scale": -1.0}),
                                       st.just({"name": "mixture", "components": 0}))}


@SETTINGS
@given(st.sampled_from(sorted(SPEC_FIELDS)).flatmap(lambda f: st.tuples(st.just(f), SPEC_FIELDS[f])),
       st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=10))
def test_bad_specs_raise_spec_errors(field_value, junk_key):
    field, value = field_value
    event(f"spec field: {field}")
    with pytest.raises((SpecError, UnknownComponentError)):
        tfm.build_model({"preset": "cnp", field: value})
    if junk_key not in {"kind", "head", "encoder", "likelihood", "wrapper", "description", "preset",
                        "provenance", "dim_x", "dim_y", "dtype_policy"}:
        with pytest.raises(SpecError, match=f"unknown key '{junk_key}'"):
            tfm.build_model({"preset": "cnp", junk_key: 1})


GP_BAD = {"num_context": st.one_of(st.just([5, 2]), st.just([-1, 3]), st.just("many")),
          "num_target": st.one_of(st.just(0), st.just(-4), st.just([3, 1])),
          "kernel": st.sampled_from(["rbff", "matern42", ""]),
          "lengthscale": st.one_of(st.just({"uniform": [1.0]}), st.just({"gamma": [1, 2]}), st.just(-1.0)),
          "noise": st.one_of(st.just(-0.1), st.just("loud")),
          "context_range": st.one_of(st.just([2, -2]), st.just("wide"))}


@SETTINGS
@given(st.sampled_from(sorted(GP_BAD)).flatmap(lambda f: st.tuples(st.just(f), GP_BAD[f])))
def test_bad_task_configs_raise_spec_errors_naming_the_field(field_value):
    field, value = field_value
    event(f"gp config field: {field}")
    with pytest.raises(SpecError, match=field.split("_")[0]):
        make_task("gp", {field: value})


# ---------------------------------------------------------------- component options
# (preset, spec override path, option, minimum or range/choices): every built-in
# component's options, by type. A generated bad value is put at the path (a likelihood
# path names the likelihood).
INT_OPTIONS = [("cnp", ("encoder",), k, 1) for k in ("width", "layers")] + [
    ("tnp-d", ("encoder",), k, 1) for k in ("layers", "width", "num_heads", "head_dim", "ffn_width")] + [
    ("tnp-a", ("encoder",), k, 1) for k in ("layers", "width", "num_heads", "head_dim", "ffn_width")] + [
    ("te-tnp", ("encoder", "attention"), k, m) for k, m in (("kernel_width", 1), ("kernel_layers", 0),
                                                            ("phi_width", 1), ("phi_layers", 0))] + [
    ("te-pt-tnp", ("encoder",), k, 1) for k in ("num_pseudo", "layers", "width", "num_heads", "head_dim")] + [
    ("taylorformer", ("encoder",), k, m) for k, m in (("layers", 1), ("width", 1), ("num_heads", 1),
                                                      ("head_dim", 1), ("enc_dim", 0))] + [
    ("taylorformer", ("wrapper",), "k", 1), ("bsa-tnp", ("encoder",), "position_dim", 1),
    ("cnp", ("likelihood", "mixture"), "components", 1),
    ("cnp", ("head",), "width", 1), ("cnp", ("head",), "hidden_layers", 0)]
FLOAT_OPTIONS = [  # (low, high, low_open, high_open)
    ("cnp", ("likelihood", "normal"), "min_scale", (0, None, False, False)),
    ("cnp", ("likelihood", "student-t"), "min_scale", (0, None, False, False)),
    ("cnp", ("likelihood", "mixture"), "min_scale", (0, None, False, False)),
    ("tnp-a", ("encoder",), "dropout", (0, 1, False, True)),
    ("taylorformer", ("encoder",), "dropout", (0, 1, False, True)),
    ("taylorformer", ("encoder",), "min_wavelength", (0, None, True, False)),
    ("te-tnp", ("encoder", "attention"), "rbf_lengthscale", (0, None, True, False)),
    ("taylorformer", ("wrapper",), "max_slope", (0, None, True, False)),
    ("taylorformer", ("wrapper",), "min_dx", (0, None, False, False)),
    ("taylorformer", ("wrapper",), "min_sin", (0, 1, False, True)),
    ("bsa-tnp", ("encoder", "attention"), "b_init", (0, None, True, False))]
BOOL_OPTIONS = [("tnp-d", ("encoder",), "embed_x"),
                ("te-tnp", ("encoder", "attention"), "location_update"),
                ("te-tnp", ("encoder", "attention"), "skip_masked_pairs"),
                ("bsa-tnp", ("encoder", "attention"), "position_gradients"),
                ("bsa-tnp", ("encoder",), "embed_positions")]
CHOICE_OPTIONS = [("te-tnp", ("encoder", "attention"), k, c) for k, c in (
    ("form", ("post", "pre")), ("distance", ("difference", "norm")),
    ("kernel_dtype", (None, "float32", "bfloat16", "float16")))] + [
    ("te-pt-tnp", ("encoder",), "style", ("ist", "perceiver")),
    ("te-pt-tnp", ("encoder",), "init", ("mean", "attention")),
    ("bsa-tnp", ("encoder",), "positions", ("auto", "x", "groups")),
    ("taylorformer", ("wrapper",), "p", (0, 1)), ("taylorformer", ("wrapper",), "q", (0, 1)),
    ("cnp", ("likelihood", "normal"), "softplus_of", ("scale", "variance")),
    ("cnp", ("head",), "activation", (None, "relu", "gelu", "tanh")),
    ("cnp", (), "dtype_policy", (None, "float32", "mixed_float16", "mixed_bfloat16"))]

TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", max_size=6)
NON_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf")])


def bad_int(minimum):
    return st.one_of(st.integers(max_value=minimum - 1), st.booleans(), TEXT, NON_FINITE,
                     st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v != int(v)),
                     st.integers(minimum, 64).map(float))


def bad_float(low, high, low_open, high_open):
    below = st.floats(max_value=low, exclude_max=not low_open, allow_nan=False, allow_infinity=False)
    out = [below, NON_FINITE, st.booleans(), TEXT, st.lists(st.floats(0, 1), max_size=2)]
    if high is not None:
        out.append(st.floats(min_value=high, exclude_min=not high_open, allow_nan=False, allow_infinity=False))
    return st.one_of(*out)


def bad_choice(choices):
    return st.one_of(TEXT, st.integers(-3, 3), st.booleans(), NON_FINITE).filter(
        lambda v: not any(v is c or (type(v) is type(c) and v == c) for c in choices))


def nested(path, option, value):
    if path[:1] == ("likelihood",):
        return {"likelihood": {"name": path[1], option: value}}
    entry = {option: value}
    for key in reversed(path):
        entry = {key: entry}
    return entry


def option_cases(category):
    if category == "int":
        return st.sampled_from(INT_OPTIONS).flatmap(lambda o: st.tuples(st.just(o), bad_int(o[3])))
    if category == "float":
        return st.sampled_from(FLOAT_OPTIONS).flatmap(lambda o: st.tuples(st.just(o), bad_float(*o[3])))
    if category == "bool":
        return st.sampled_from(BOOL_OPTIONS).flatmap(lambda o: st.tuples(st.just(o), st.one_of(
            st.integers(), TEXT, st.floats(), st.none())))
    return st.sampled_from(CHOICE_OPTIONS).flatmap(lambda o: st.tuples(st.just(o), bad_choice(o[3])))


OPTION_EXAMPLES = {"int": 150, "float": 100, "bool": 50, "choice": 100}


@pytest.mark.parametrize("category", sorted(OPTION_EXAMPLES))
def test_bad_component_options_raise_spec_errors_naming_the_option(category):
    @settings(SETTINGS, max_examples=OPTION_EXAMPLES[category])
    @given(option_cases(category))
    def check(case):
        (preset, path, option, *_), value = case
        event(f"{preset} {'.'.join(path)}.{option}")
        spec = {"preset": preset, **nested(path, option, value)}
        with pytest.raises((SpecError, UnknownComponentError)) as err:
            tfm.build_model(spec)
        assert option in str(err.value), (spec, str(err.value))

    check()


def test_saved_spec_must_be_a_dict_never_a_path(tmp_path, model, monkeypatch):
    from taylorformer import spec as spec_module

    def read(*args, **kwargs):
        raise AssertionError("loading a model read a spec file")

    monkeypatch.setattr(spec_module, "load_spec_file", read)
    secret = tmp_path / "secret.json"
    secret.write_text('{"preset": "cnp"}')
    with pytest.raises(SpecError, match="'spec' must be the model's spec dict, got str"):
        type(model).from_config({"spec": str(secret), "name": "m"})
    with pytest.raises(SpecError, match="got str 'cnp'"):
        type(model).from_config({"spec": "cnp"})


def test_batch_64_at_1024_by_1000_runs_tiled():
    """Dense attention is chosen from the materialised bytes, batch included: 64 x 1024 x
    1000 pairs at 8 heads would take 2 GiB of logits, so tiles; one task is dense."""
    from taylorformer.attention import choose_tile

    q, k = tf.TensorSpec([64, 8, 1024, 16]), tf.TensorSpec([64, 8, 1000, 16])
    assert choose_tile(q, k)[0] > 0
    assert choose_tile(tf.TensorSpec([1, 8, 1024, 16]), tf.TensorSpec([1, 8, 1000, 16])) is None
    assert choose_tile(tf.TensorSpec([None, 8, 1024, 16]), k)[0] > 0


# ---------------------------------------------------------------- the command line
# Generated argument lists with one defect each; every one fails before training (a
# Trainer.fit that is reached fails the case: exit code 1, not 2).
POSITIVE = {"train": ["--steps", "--batch-size", "--val-every", "--val-batches", "--checkpoint-every",
                      "--eval-batches"], "evaluate": ["--batches", "--batch-size"], "plot": ["--num-tasks"]}
NON_NEGATIVE = {"train": ["--warmup-steps", "--num-permutations"], "evaluate": ["--samples", "--consistency"],
                "plot": ["--samples"]}
FLOATS = {"train": ["--lr", "--time-budget"]}
CHOICES = {"train": ["--schedule", "--strategy", "--nan-policy", "--dtype-policy"],
           "evaluate": ["--split", "--checkpoint"], "plot": ["--checkpoint"]}
NOT_A_NUMBER = st.text(alphabet="abcxyz.,_ ", min_size=1, max_size=5)


def flag_cases(table, values):
    return st.sampled_from([(cmd, flag) for cmd, flags in table.items() for flag in flags]).flatmap(
        lambda cf: st.tuples(st.just(cf[0]), st.just(cf[1]), values))


def cli_cases(category):
    """``(subcommand, [args])`` with one defect of ``category``."""
    if category == "bad numbers":
        ints = st.one_of(st.integers(max_value=0).map(str), NOT_A_NUMBER, st.sampled_from(["1.5", "nan", "1e3"]))
        non_neg = st.one_of(st.integers(max_value=-1).map(str), NOT_A_NUMBER, st.just("0.5"))
        floats = st.one_of(st.floats(max_value=0).map(repr), NON_FINITE.map(repr), NOT_A_NUMBER)
        return st.one_of(flag_cases(POSITIVE, ints), flag_cases(NON_NEGATIVE, non_neg),
                         flag_cases(FLOATS, floats)).map(lambda c: (c[0], [f"{c[1]}={c[2]}"]))
    if category == "unknown names":
        names = TEXT.filter(lambda t: t not in ("cosine", "constant", "default", "mirrored", "stop",
                                                "skip", "val", "test", "best", "model", "float32"))
        return st.one_of(flag_cases(CHOICES, names).map(lambda c: (c[0], [f"{c[1]}={c[2]}"])),
                         names.map(lambda n: ("train", ["--model", f"no-{n}"])),
                         names.map(lambda n: ("train", ["--task", f"no-{n}"])))
    if category == "bad JSON/YAML":
        def not_an_object(text):
            try:
                return not isinstance(json.loads(text), dict)
            except ValueError:
                return True
        texts = st.text(alphabet='{}[]":,ab1 \n', min_size=1, max_size=12).filter(not_an_object)
        return st.one_of(texts.map(lambda t: ("train", ["--task-config", t])),
                         texts.map(lambda t: ("evaluate", ["--task-config", t])),
                         st.tuples(st.sampled_from(["spec.yaml", "spec.json"]), st.text(max_size=12))
                         .map(lambda nt: ("train", ["--model", nt])))
    return st.one_of(  # missing files
        st.sampled_from(["evaluate", "plot"]).map(lambda c: (c, [])),
        TEXT.map(lambda n: ("train", ["--model", f"missing-{n}.yaml"])),
        TEXT.map(lambda n: ("train", ["--task-config", f"missing-{n}.json"])),
        st.just(("train", ["--resume", "missing-run"])))


CLI_EXAMPLES = {"bad numbers": 120, "unknown names": 40, "bad JSON/YAML": 60, "missing files": 25}


@pytest.mark.parametrize("category", sorted(CLI_EXAMPLES))
def test_cli_never_prints_a_traceback(category, tmp_path, capsys, monkeypatch):
    from taylorformer import cli
    from taylorformer.workflow import training

    def fit(*args, **kwargs):
        raise AssertionError("a generated case reached training")

    monkeypatch.setattr(training.Trainer, "fit", fit)
    runs = iter(range(10**6))

    @settings(SETTINGS, max_examples=CLI_EXAMPLES[category])
    @given(cli_cases(category))
    def check(case):
        command, args = case
        event(f"{command} {args[0].split('=')[0] if args else 'RUN_DIR'}")
        work = tmp_path / f"case{next(runs)}"
        work.mkdir()
        argv = [command] + (["--out", str(work / "run")] if command == "train" else [str(work / "run")])
        for arg in args:
            if isinstance(arg, tuple):  # a spec file: its text, then a line that no parser accepts
                (work / arg[0]).write_text(arg[1] + "\n: [")
                arg = str(work / arg[0])
            argv.append(arg)
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert code == 2, (argv, err)
        assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, (argv, err)

    check()
