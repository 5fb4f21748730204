"""Predictions for new inputs (``taylorformer.prediction.query``, ``taylorformer predict``): chunked
predictions equal one dense forward pass, quantiles are the Gaussian's, every file format
round-trips, bad files give one-line errors naming the file and the field."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from taylorformer.cli import main
from taylorformer.errors import BatchError
from taylorformer.models import build_model
from taylorformer.prediction.query import predict_query, read_query

TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}, "dim_x": 2, "dim_y": 2}


@pytest.fixture(scope="module")
def model():
    return build_model(TINY)


@pytest.fixture(scope="module")
def run_dir(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    model.save(path / "model.keras")
    return path


def _query(b=2, nc=7, nt=23, seed=0):
    rng = np.random.default_rng(seed)
    return {"xc": rng.normal(size=(b, nc, 2)).astype(np.float32),
            "yc": rng.normal(size=(b, nc, 2)).astype(np.float32),
            "xt": rng.normal(size=(b, nt, 2)).astype(np.float32)}


def _dense(model, query):
    """The predictive of one forward pass over all targets at once."""
    dist = model.distribution({**query, "yt": np.zeros(query["xt"].shape[:2] + (2,), np.float32)})
    return np.asarray(dist.mean()), np.asarray(dist.stddev())


@pytest.mark.parametrize("chunk_size", [1, 5, 23, 1000])
def test_chunked_prediction_equals_one_dense_pass(model, chunk_size):
    query = _query()
    out = predict_query(model, query, chunk_size=chunk_size, num_samples=3, verbose=0)
    mean, std = _dense(model, query)
    np.testing.assert_allclose(out["mean"], mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["stddev"], std, rtol=1e-5, atol=1e-5)
    assert out["samples"].shape == (3, 2, 23, 2)
    # Gaussian predictive: the quantile at level q is mean + stddev * Phi^-1(q)
    assert out["quantile_method"] == "analytic (the predictive's own quantile)"
    for q, values in zip(out["levels"], out["quantiles"]):
        np.testing.assert_allclose(values, mean + std * stats.norm.ppf(q), rtol=1e-4, atol=1e-4)


def test_autoregressive_prediction_summarises_joint_samples():
    model = build_model({"preset": "taylorformer", "dim_x": 1, "dim_y": 1,
                         "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
                         "head": {"width": 16}})
    rng = np.random.default_rng(1)
    query = {"xc": rng.normal(size=(1, 5, 1)).astype(np.float32),
             "yc": rng.normal(size=(1, 5, 1)).astype(np.float32),
             "xt": rng.normal(size=(1, 4, 1)).astype(np.float32)}
    out = predict_query(model, query, num_samples=16, levels=(0.1, 0.9), verbose=0)
    samples = out["samples"]
    assert samples.shape == (16, 1, 4, 1)
    np.testing.assert_allclose(out["mean"], samples.mean(0), rtol=1e-6)
    np.testing.assert_allclose(out["quantiles"], np.quantile(samples, (0.1, 0.9), axis=0), rtol=1e-6)
    assert out["quantile_method"] == "Monte Carlo over 16 sampled paths"


def test_cli_csv_context_and_inputs(model, run_dir, tmp_path):
    query = _query(b=1)
    ctx = pd.DataFrame({"a": query["xc"][0, :, 0], "b": query["xc"][0, :, 1],
                        "u": query["yc"][0, :, 0], "v": query["yc"][0, :, 1]})
    ctx.to_csv(tmp_path / "context.csv", index=False)
    pd.DataFrame({"a": query["xt"][0, :, 0], "b": query["xt"][0, :, 1]}).to_csv(tmp_path / "in.csv", index=False)
    out = tmp_path / "pred.csv"
    code = main(["predict", str(run_dir), "--checkpoint", "model", "--input", str(tmp_path / "in.csv"),
                 "--context", str(tmp_path / "context.csv"), "--output", str(out),
                 "--x-columns", "a,b", "--y-columns", "u,v", "--quantiles", "0.25", "0.75",
                 "--chunk-size", "4"])
    assert code == 0
    frame = pd.read_csv(out)
    mean, std = _dense(model, query)
    assert list(frame.columns[:2]) == ["x0", "x1"] and len(frame) == 23
    np.testing.assert_allclose(frame[["mean_y0", "mean_y1"]].to_numpy(), mean[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(frame[["stddev_y0", "stddev_y1"]].to_numpy(), std[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(frame["q0.75_y1"], mean[0, :, 1] + std[0, :, 1] * stats.norm.ppf(0.75),
                               rtol=1e-4, atol=1e-4)
    assert set(frame["quantile_method"]) == {"analytic (the predictive's own quantile)"}


@pytest.mark.parametrize("fmt", [".npz", ".nc"])
def test_cli_array_files_batched(model, run_dir, tmp_path, fmt):
    query = _query(b=3, seed=2)
    if fmt == ".npz":
        np.savez(tmp_path / "query.npz", **query)
    else:
        xr = pytest.importorskip("xarray")
        dims = {"xc": ("task", "context", "input"), "yc": ("task", "context", "output"),
                "xt": ("task", "point", "input")}
        xr.Dataset({k: (dims[k], v) for k, v in query.items()}).to_netcdf(tmp_path / "query.nc")
    out = tmp_path / f"pred{fmt}"
    assert main(["predict", str(run_dir), "--checkpoint", "model", "--input", str(tmp_path / f"query{fmt}"),
                 "--output", str(out), "--samples", "2"]) == 0
    if fmt == ".npz":
        with np.load(out) as data:
            mean, samples, method = data["mean"], data["samples"], str(data["quantile_method"])
    else:
        with pytest.importorskip("xarray").open_dataset(out) as data:
            mean, samples = data["mean"].values, data["samples"].values
            method = data["quantiles"].attrs["quantile_method"]
    assert method == "analytic (the predictive's own quantile)"
    np.testing.assert_allclose(mean, _dense(model, query)[0], rtol=1e-4, atol=1e-5)
    assert samples.shape == (2, 3, 23, 2)


def test_a_hundred_thousand_queries_in_chunks(model):
    query = _query(b=1, nc=10, nt=100_000, seed=3)
    out = predict_query(model, query, chunk_size=8192, verbose=0)
    assert out["mean"].shape == (1, 100_000, 2) and np.isfinite(out["quantiles"]).all()
    head = {**query, "xt": query["xt"][:, :50]}
    np.testing.assert_allclose(out["mean"][:, :50], _dense(model, head)[0], rtol=1e-5, atol=1e-5)


def test_bad_query_files_name_the_file_and_the_field(tmp_path):
    pd.DataFrame({"x": [0.0, 1.0]}).to_csv(tmp_path / "in.csv", index=False)
    pd.DataFrame({"x": [0.0], "z": [1.0]}).to_csv(tmp_path / "ctx.csv", index=False)
    with pytest.raises(BatchError, match=r"ctx.csv: no column\(s\) 'y'"):
        read_query(str(tmp_path / "in.csv"), str(tmp_path / "ctx.csv"))
    with pytest.raises(BatchError, match=r"in.csv.*no \['xc', 'yc'\]"):
        read_query(str(tmp_path / "in.csv"))
    bad = _query()
    bad["xc"][1, 3, 0] = np.nan  # an input without a place
    np.savez(tmp_path / "nan.npz", **bad)
    with pytest.raises(BatchError, match=r"nan.npz: 'xc' has 1 non-finite value\(s\), first at index \(1, 3, 0\)"):
        read_query(str(tmp_path / "nan.npz"))
    bad = _query()
    bad["yc"][1, 3, 0] = np.inf
    np.savez(tmp_path / "inf.npz", **bad)
    with pytest.raises(BatchError, match=r"inf.npz: 'yc' has 1 non-finite value\(s\).*NaN means not observed"):
        read_query(str(tmp_path / "inf.npz"))
    (tmp_path / "q.txt").write_text("1")
    with pytest.raises(BatchError, match="q.txt: unsupported file type '.txt'"):
        read_query(str(tmp_path / "q.txt"))


def test_cli_errors_are_one_line(run_dir, tmp_path, capsys):
    np.savez(tmp_path / "q.npz", **_query())
    code = main(["predict", str(run_dir), "--input", str(tmp_path / "q.npz"), "--output", str(tmp_path / "p.png")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "p.png: unsupported file type '.png'" in err
    assert main(["predict", str(run_dir), "--input", str(tmp_path / "missing.npz"),
                 "--output", str(tmp_path / "p.npz")]) == 2
    assert "inputs file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["predict", str(run_dir), "--input", "q.npz", "--output", "p.npz", "--quantiles", "1.5"])
    assert exc.value.code == 2 and "a probability in (0, 1), got '1.5'" in capsys.readouterr().err


def test_compiled_forward_equals_the_eager_tiled_one_and_validates_eagerly(model):
    from taylorformer import attention

    query = _query(b=2, nc=40, nt=70, seed=5)
    batch = {**query, "yt": np.zeros((2, 70, 2), np.float32)}
    with attention.options(tile=(16, 16)):  # tiles: Python loop eagerly, XLA compiled
        eager, compiled = model.distribution(batch), model.compiled_distribution(batch)
    np.testing.assert_allclose(compiled.mean(), eager.mean(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled.stddev(), eager.stddev(), rtol=1e-5, atol=1e-5)
    bad = {**batch, "xc": np.where(np.arange(40)[None, :, None] == 3, np.inf, batch["xc"]).astype(np.float32)}
    with pytest.raises(BatchError, match="xc"):
        model.compiled_distribution(bad)
    with pytest.raises(BatchError, match="xc dim"):
        model.compiled_distribution({**batch, "xc": batch["xc"][..., :1]})
