"""``taylorformer export``: a SavedModel that serves contexts and targets of any size in the
data's units, checked in a fresh process that imports TensorFlow only against the Keras
model's predictions (``predict_query``) on standardised inputs mapped back by hand; the
refusals (autoregressive models, an output that is not new or that lies in the run); no
``yt`` needed by ``predict_distribution`` / ``predict``; LocalTaylor's input-dim error."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from taylorformer.workflow import training
from taylorformer.cli import main
from taylorformer.errors import ExportError, SpecError
from taylorformer.prediction.export import export_model
from taylorformer.models.inference import predict
from taylorformer.models import build_model
from taylorformer.normaliser import Normaliser
from taylorformer.prediction.query import predict_query
from taylorformer.workflow.runs import load_run

LAYERS = {"encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}, "head": {"width": 16}}
TINY = {"preset": "tnp-d", **LAYERS}

#: the fresh process: TensorFlow only (no taylorformer, no keras import of its own)
SERVE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(sys.argv[1])
    queries = np.load(sys.argv[2])
    out = {}
    for name in ("small", "large"):
        args = {k: tf.constant(queries[f"{name}_{k}"]) for k in ("xc", "yc", "xt")}
        for key, value in loaded.signatures["serving_default"](**args).items():
            out[f"{name}_{key}"] = value.numpy()
    masked = {k: tf.constant(queries[f"padded_{k}"]) for k in ("xc", "yc", "xt", "mask_c", "mask_t")}
    for key, value in loaded.signatures["with_masks"](**masked).items():
        out[f"padded_{key}"] = value.numpy()
    out["y_scale"] = loaded.y_scale.numpy()
    out["normaliser"] = np.array(loaded.normaliser_json.numpy().decode())
    ours = sorted(m for m in sys.modules if m.split(".")[0] in ("taylorformer", "plugins"))
    out["modules"] = np.array(ours, dtype=str)
    np.savez(sys.argv[3], **out)
""")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A briefly trained TNP-D on a CSV series far from zero (mean ~400, std ~7): the
    exported model must undo a real standardisation."""
    root = tmp_path_factory.mktemp("export")
    t = np.arange(240)
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=240, freq="D"),
                          "co2": 400.0 + 0.05 * t + 3.0 * np.sin(2 * np.pi * t / 30)})
    frame.to_csv(root / "series.csv", index=False)
    config = {"path": str(root / "series.csv"), "target_columns": "co2", "date_column": "date",
              "context_length": 12, "horizon": 4, "split": [0.6, 0.2, 0.2], "lead_input": False}
    training.train(TINY, "csv", task_config=config, out_dir=str(root / "run"), steps=3, batch_size=4,
                   val_every=3, val_batches=1, checkpoint_every=3, tensorboard=False, verbose=0, evaluate=False)
    return root / "run"


def _raw_query(rng, b, nc, nt):
    """Raw units: positions in [-1, 1] (the csv task's input) and CO2-like values."""
    return {"xc": rng.uniform(-1, 1, (b, nc, 1)).astype(np.float32),
            "yc": (400 + 5 * rng.normal(size=(b, nc, 1))).astype(np.float32),
            "xt": rng.uniform(-1, 1, (b, nt, 1)).astype(np.float32)}


def _reference(model, task, query):
    """The Keras model through ``predict_query`` on the query standardised with the task's
    own mean and std, mapped back to the data's units by hand."""
    z = {**query, "yc": ((query["yc"] - task.mean) / task.std).astype(np.float32)}
    out = predict_query(model, z, verbose=0)
    return out["mean"] * task.std + task.mean, out["stddev"] * task.std


@pytest.mark.slow  # a fresh process loading TensorFlow and the SavedModel
def test_exported_model_serves_any_size_in_a_tensorflow_only_process(run, tmp_path):
    out_dir = tmp_path / "served"
    assert main(["export", str(run), "--output", str(out_dir), "--checkpoint", "model"]) == 0
    model, task, _ = load_run(str(run), "model")
    rng = np.random.default_rng(0)
    queries = {}
    for name, (b, nc, nt) in {"small": (2, 5, 3), "large": (3, 40, 17)}.items():
        queries.update({f"{name}_{k}": v for k, v in _raw_query(rng, b, nc, nt).items()})
    # a padded copy of "small": two junk context points and one junk target per task
    pad = lambda a, n: np.concatenate([a, np.full(a.shape[:1] + (n,) + a.shape[2:], 7.0, np.float32)], 1)  # noqa: E731
    queries.update({"padded_xc": pad(queries["small_xc"], 2), "padded_yc": pad(queries["small_yc"], 2),
                    "padded_xt": pad(queries["small_xt"], 1),
                    "padded_mask_c": pad(np.ones((2, 5), np.float32), 2) * (np.arange(7) < 5),
                    "padded_mask_t": pad(np.ones((2, 3), np.float32), 1) * (np.arange(4) < 3)})
    np.savez(tmp_path / "queries.npz", **queries)
    (tmp_path / "serve.py").write_text(SERVE)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3",
           "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-I", str(tmp_path / "serve.py"), str(out_dir),
                             str(tmp_path / "queries.npz"), str(tmp_path / "served.npz")],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    served = np.load(tmp_path / "served.npz")
    assert served["modules"].size == 0  # served without taylorformer
    normaliser = json.loads(str(served["normaliser"]))
    np.testing.assert_allclose(normaliser["y_offset"], task.mean, rtol=1e-12)
    np.testing.assert_allclose(served["y_scale"], task.std, rtol=1e-6)
    assert normaliser["y_names"] == ["co2"] and normaliser["task"] == "csv"
    for name in ("small", "large"):
        query = {k: queries[f"{name}_{k}"] for k in ("xc", "yc", "xt")}
        mean, std = _reference(model, task, query)
        assert served[f"{name}_mean"].shape == mean.shape == query["xt"].shape
        np.testing.assert_allclose(served[f"{name}_mean"], mean, rtol=1e-5, atol=1e-6 * task.std.max())
        np.testing.assert_allclose(served[f"{name}_stddev"], std, rtol=1e-5, atol=1e-6 * task.std.max())
        np.testing.assert_allclose(served[f"{name}_param_loc"], mean, rtol=1e-5)  # Gaussian: loc = mean
    # padding with masks changes nothing at the real targets
    np.testing.assert_allclose(served["padded_mean"][:, :3], served["small_mean"], rtol=1e-5)
    np.testing.assert_allclose(served["padded_stddev"][:, :3], served["small_stddev"], rtol=1e-5)
    assert not os.path.exists(run / "served")


def test_export_refuses_a_used_output_or_one_inside_the_run(run, tmp_path, capsys):
    before = sorted(os.listdir(run))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    for output in (busy, run / "export", run):
        assert main(["export", str(run), "--output", str(output)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: export output") and err.count("\n") == 1, err
    assert (busy / "keep.txt").read_text() == "mine" and os.listdir(busy) == ["keep.txt"]
    assert sorted(os.listdir(run)) == before


def test_autoregressive_models_are_refused_with_the_reason(run, tmp_path, capsys):
    model = build_model({"preset": "taylorformer", **LAYERS})
    with pytest.raises(ExportError, match="autoregressive.*Python loop.*tnp-d"):
        export_model(model, tmp_path / "ar")
    assert not os.path.exists(tmp_path / "ar")
    ar_run = tmp_path / "ar_run"
    shutil.copytree(run, ar_run)
    (ar_run / "spec.json").write_text(json.dumps(model.spec))
    assert main(["export", str(ar_run), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot export run") and "autoregressive" in err and err.count("\n") == 1


def test_mixture_parameters_are_mapped_to_the_data_units(tmp_path):
    """A mixture's component locations and scales come out in data units, the logits as
    they are: equal to the model's parameters mapped by hand."""
    import tensorflow as tf

    model = build_model({**TINY, "likelihood": {"name": "mixture", "components": 2}, "dim_y": 2})
    norm = Normaliser.from_dict({"x_offset": [5.0], "x_scale": [2.0], "y_offset": [10.0, -3.0],
                                 "y_scale": [4.0, 0.5], "x_names": ["t"], "y_names": ["a", "b"], "x_is": "raw inputs"})
    export_model(model, tmp_path / "mix", norm)
    loaded = tf.saved_model.load(str(tmp_path / "mix"))
    rng = np.random.default_rng(3)
    xc, xt = rng.normal(5, 2, (1, 6, 1)).astype(np.float32), rng.normal(5, 2, (1, 4, 1)).astype(np.float32)
    yc = rng.normal(size=(1, 6, 2)).astype(np.float32)
    out = loaded.signatures["serving_default"](xc=xc, yc=yc, xt=xt)
    scale, offset = np.array([4.0, 0.5], np.float32), np.array([10.0, -3.0], np.float32)
    params = model({"xc": (xc - 5) / 2, "yc": (yc - offset) / scale, "xt": (xt - 5) / 2,
                    "yt": np.zeros((1, 4, 2), np.float32)})
    np.testing.assert_allclose(out["param_locs"], params["locs"] * scale[:, None] + offset[:, None],
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["param_scales"], params["scales"] * scale[:, None], rtol=1e-5)
    np.testing.assert_allclose(out["param_logits"], params["logits"], rtol=1e-5, atol=1e-6)
    dist = model.likelihood.distribution(params)
    np.testing.assert_allclose(out["mean"], np.asarray(dist.mean()) * scale + offset, rtol=1e-5, atol=1e-5)


def test_prediction_needs_no_yt():
    rng = np.random.default_rng(1)
    query = {"xc": rng.normal(size=(2, 5, 1)).astype(np.float32), "yc": rng.normal(size=(2, 5, 1)).astype(np.float32),
             "xt": rng.normal(size=(2, 3, 1)).astype(np.float32)}
    with_yt = {**query, "yt": np.zeros((2, 3, 1), np.float32)}
    model = build_model(TINY)
    dist = model.predict_distribution(query)
    np.testing.assert_allclose(dist.mean(), model.distribution(with_yt).mean(), rtol=1e-6)
    np.testing.assert_allclose(predict(model, query)["stddev"], model.distribution(with_yt).stddev(), rtol=1e-6)
    ar = build_model({"preset": "taylorformer", **LAYERS})
    a, b = predict(ar, query, num_samples=4, seed=7), predict(ar, with_yt, num_samples=4, seed=7)
    assert a["samples"].shape == (4, 2, 3, 1)
    np.testing.assert_allclose(a["samples"], b["samples"], rtol=1e-6)


def test_local_taylor_input_dim_error_says_what_to_do(tmp_path):
    from taylorformer.task import make_task

    t = np.arange(120)
    pd.DataFrame({"date": pd.date_range("2021-01-01", periods=120, freq="h"), "y": np.sin(t / 5.0)}).to_csv(
        tmp_path / "s.csv", index=False)
    task = make_task("csv", {"path": str(tmp_path / "s.csv"), "target_columns": "y", "date_column": "date",
                             "context_length": 6, "horizon": 2, "calendar_features": ["hour"],
                             "lead_input": False})
    assert task.dim_x == 3
    with pytest.raises(SpecError) as info:
        build_model({"preset": "taylorformer", **LAYERS, "dim_x": task.dim_x})
    message = str(info.value)
    for part in ("dim_x=3", "calendar feature 3-D", "drop calendar_features", "tnp-d", '"wrapper": null',
                 "enc_dim", "docs/tasks.md"):
        assert part in message, part
    # the alternatives the message names do build on this task's inputs
    build_model({"preset": "tnp-d", **LAYERS, "dim_x": task.dim_x})
    build_model({"preset": "taylorformer", "dim_x": task.dim_x, "wrapper": None,
                 "encoder": {**LAYERS["encoder"], "enc_dim": 6 * task.dim_x}, "head": LAYERS["head"]})


@pytest.mark.slow  # traces and saves two more models
@pytest.mark.parametrize("spec", [
    {"preset": "cnp"},
    # pseudo-tokens keep their layers in nested Python containers: exported all the same
    {"preset": "te-pt-tnp", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8,
                                        "num_pseudo": 4}, "head": {"width": 16}},
], ids=["cnp", "te-pt-tnp"])
def test_other_conditional_models_export(spec, tmp_path):
    import tensorflow as tf

    model = build_model({**spec, "dim_x": 2, "dim_y": 1})
    export_model(model, tmp_path / "m")
    serve = tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"]
    rng = np.random.default_rng(4)
    for nc, nt in ((3, 2), (25, 9)):
        query = {"xc": rng.normal(size=(2, nc, 2)).astype(np.float32),
                 "yc": rng.normal(size=(2, nc, 1)).astype(np.float32),
                 "xt": rng.normal(size=(2, nt, 2)).astype(np.float32)}
        out, dist = serve(**query), model.predict_distribution(query)
        np.testing.assert_allclose(out["mean"], dist.mean(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["stddev"], dist.stddev(), rtol=1e-5, atol=1e-5)


def test_tasks_with_feature_groups_are_refused(tmp_path):
    """The model file's normaliser records the task's feature groups: a model that reads
    them is refused, by the normaliser alone (no task is built)."""
    from taylorformer.prediction.export import groups_refusal
    from taylorformer.task import make_task

    spatial = make_task("generic-spatial")
    normaliser = Normaliser.from_task(spatial, spatial.dim_x, spatial.dim_y)
    assert "['sc', 'st']" in groups_refusal(normaliser)
    assert groups_refusal(Normaliser.from_task(make_task("gp"), 1, 1)) is None
    model = build_model({**TINY, "dim_x": spatial.dim_x, "dim_y": spatial.dim_y})
    model.normaliser = normaliser
    with pytest.raises(ExportError, match="feature groups"):
        export_model(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


#: every documented invalid input, served in one TensorFlow-only process: case -> the
#: error's text (or "ok" with the mean's finiteness)
SERVE_INVALID = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(sys.argv[1])
    plain, masked = loaded.signatures["serving_default"], loaded.signatures["with_masks"]
    rng = np.random.default_rng(0)
    def q(b=2, nc=5, nt=3, bc=None, by=None, bt=None, ny=None):
        return {"xc": rng.normal(size=(bc or b, nc, 1)), "yc": rng.normal(size=(by or b, ny or nc, 1)),
                "xt": rng.normal(size=(bt or b, nt, 1))}
    def with_masks(query, mc=None, mt=None):
        b, nc, nt = query["xc"].shape[0], query["xc"].shape[1], query["xt"].shape[1]
        return {**query, "mask_c": np.ones((b, nc)) if mc is None else mc, "mask_t": np.ones((b, nt)) if mt is None else mt}
    def put(query, key, index, value):
        query[key][index] = value
        return query
    nan_yc = put(q(), "yc", (0, 1, 0), np.nan)
    cases = {
        "valid": (plain, q()), "valid NaN yc (unobserved)": (plain, nan_yc),
        "valid masks": (masked, with_masks(q(), mc=np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1.0]]))),
        "NaN xc": (plain, put(q(), "xc", (1, 2, 0), np.nan)), "inf xt": (plain, put(q(), "xt", (0, 0, 0), np.inf)),
        "inf yc": (plain, put(q(), "yc", (0, 0, 0), -np.inf)), "huge xt": (plain, put(q(), "xt", (0, 1, 0), 1e30)),
        "huge yc": (plain, put(q(), "yc", (1, 1, 0), -1e20)),
        "mask_c 2": (masked, with_masks(q(), mc=np.full((2, 5), 2.0))),
        "mask_c -1": (masked, with_masks(q(), mc=-np.ones((2, 5)))),
        "mask_c 0.5": (masked, with_masks(q(), mc=np.full((2, 5), 0.5))),
        "mask_t 0.5": (masked, with_masks(q(), mt=np.full((2, 3), 0.5))),
        "batch xc 2, yc 1": (plain, q(by=1)), "batch xt 1": (plain, q(bt=1)),
        "batch mask_c 1": (masked, with_masks(q(), mc=np.ones((1, 5)))),
        "points yc 4 of 5": (plain, q(ny=4)), "points mask_c 4 of 5": (masked, with_masks(q(), mc=np.ones((2, 4)))),
        "points mask_t 2 of 3": (masked, with_masks(q(), mt=np.ones((2, 2)))),
    }
    out = {}
    for name, (signature, query) in cases.items():
        try:
            result = signature(**{k: tf.constant(v, tf.float32) for k, v in query.items()})
            out[name] = "ok finite" if np.isfinite(result["mean"].numpy()).all() else "ok NaN"
        except tf.errors.InvalidArgumentError as exc:
            out[name] = exc.message
    out["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("taylorformer", "plugins"))
    print(json.dumps(out))
""")


@pytest.mark.slow  # a fresh TensorFlow-only process serving every invalid input once
def test_exports_refuse_invalid_inputs_in_the_graph_with_a_clear_message(tmp_path):
    """The served signatures check their inputs with the library's rules: finite values
    (NaN in ``yc``: unobserved), masks of 0 and 1, magnitudes within the library's bound,
    one batch size (never a broadcast of 1 against 2) and matching point counts."""
    from taylorformer.prediction.query import MAX_MAGNITUDE

    model = build_model(TINY)
    export_model(model, tmp_path / "m", Normaliser.from_dict(
        {"x_offset": [0.0], "x_scale": [1.0], "y_offset": [400.0], "y_scale": [5.0]}))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3",
           "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-I", "-c", SERVE_INVALID, str(tmp_path / "m")], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out.pop("modules") == []  # served without taylorformer
    bound = f"+-{MAX_MAGNITUDE:.3g}"
    expected = {
        "valid": "ok finite", "valid NaN yc (unobserved)": "ok finite", "valid masks": "ok finite",
        "NaN xc": f"xc must be finite, within {bound}", "inf xt": f"xt must be finite, within {bound}",
        "inf yc": "yc must be finite (NaN: not observed)", "huge xt": f"xt must be finite, within {bound}",
        "huge yc": f"yc must be finite (NaN: not observed), within {bound}",
        **dict.fromkeys(("mask_c 2", "mask_c -1", "mask_c 0.5"), "mask_c values must be 0 (padding) or 1"),
        "mask_t 0.5": "mask_t values must be 0 (padding) or 1",
        **dict.fromkeys(("batch xc 2, yc 1", "batch xt 1", "batch mask_c 1"), "must have the same batch size B"),
        **dict.fromkeys(("points yc 4 of 5", "points mask_c 4 of 5"), "same number of context points Nc"),
        "points mask_t 2 of 3": "xt and mask_t must have the same number of target points Nt"}
    assert set(out) == set(expected)
    for case, text in expected.items():
        assert text in out[case], (case, out[case][:500])
        assert text.startswith("ok") or "invalid input: " in out[case], case
