"""Property-based tests: malformed batches, specs and task configs get clear errors.

Each generated input carries exactly one defect of a known category; the error must be
a taylorformer error (never a raw TensorFlow/NumPy exception) naming the offending field.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import taylorformer as tfm
from taylorformer.errors import BatchError, SpecError, TaylorformerError
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
        arr[idx] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
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
    with pytest.raises(TaylorformerError):
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
