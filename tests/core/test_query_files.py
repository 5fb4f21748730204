"""Files read by ``taylorformer predict`` under corruption, and models' non-finite outputs
(issue 37, items 4, 5, 7).

Property: a valid query file (.npz, .npy, .csv, .nc) that is emptied, truncated,
overwritten with random bytes or has bytes flipped is read as a correct query (finite
float32 ``[B, N, D]`` arrays, N >= 1) or gives one :class:`BatchError` naming the file; the
file is byte-identical afterwards.
"""
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taylorformer.cli import main
from taylorformer.errors import BatchError
from taylorformer.models import build_model
from taylorformer.prediction.query import predict_query, read_query

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
RNG = np.random.default_rng(0)
QUERY = {"xc": RNG.normal(size=(6, 1)), "yc": RNG.normal(size=(6, 1)), "xt": RNG.normal(size=(4, 1))}


def _write_valid(path):
    ext = path.suffix
    if ext == ".npz":
        np.savez(path, **QUERY)
    elif ext == ".npy":
        np.save(path, QUERY["xt"])
    elif ext == ".csv":
        path.write_text("x\n" + "\n".join(f"{v:.6f}" for v in QUERY["xt"][:, 0]) + "\n")
    else:
        import xarray as xr

        xr.Dataset({k: ((f"n{k}", "d"), v) for k, v in QUERY.items()}).to_netcdf(path)


def _corrupt(data, how, where, noise):
    if how == "empty":
        return b""
    if how == "truncate":
        return data[:where % max(len(data), 1)]
    if how == "random":
        return noise
    if how == "flip":
        i = where % len(data)
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
    return data


@SETTINGS
@given(ext=st.sampled_from([".npz", ".npy", ".csv", ".nc"]),
       how=st.sampled_from(["none", "empty", "truncate", "random", "flip"]),
       where=st.integers(0, 10_000), noise=st.binary(min_size=1, max_size=300))
def test_corrupt_query_files_give_a_query_or_a_batch_error_naming_the_file(tmp_path, ext, how, where, noise):
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # one folder per example: netCDF handles are cached
    context = tmp_path / "context.npz"
    np.savez(context, xc=QUERY["xc"], yc=QUERY["yc"])
    path = tmp_path / f"query{ext}"
    _write_valid(path)
    path.write_bytes(_corrupt(path.read_bytes(), how, where, noise))
    before, context_before = path.read_bytes(), context.read_bytes()
    try:
        query = read_query(str(path), context=str(context) if ext in (".npy", ".csv") else None)
    except BatchError as exc:
        assert str(path) in str(exc), str(exc)
        assert how != "none", str(exc)
    else:
        for key in ("xc", "yc", "xt"):
            assert query[key].dtype == np.float32 and query[key].ndim == 3
        assert query["xt"].shape[1] >= 1 and np.isfinite(query["xt"]).all() and np.isfinite(query["xc"]).all()
        if how == "none":
            np.testing.assert_allclose(query["xt"][0], QUERY["xt"], rtol=1e-5)
    assert path.read_bytes() == before and context.read_bytes() == context_before


def test_named_corrupt_files(tmp_path):
    cases = {"empty.npz": b"", "garbage.npz": b"these are not the bytes of an archive",
             "garbage.npy": b"not numpy either", "empty.csv": b""}
    expected = {"empty.npz": "is empty (0 bytes): not a valid .npz file",
                "garbage.npz": "is not a valid .npz file", "garbage.npy": "is not a valid .npy file",
                "empty.csv": "is empty"}
    np.savez(tmp_path / "context.npz", xc=QUERY["xc"], yc=QUERY["yc"])
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(BatchError) as info:
            read_query(str(tmp_path / name), context=str(tmp_path / "context.npz"))
        assert str(tmp_path / name) in str(info.value) and expected[name] in str(info.value)
        assert "pickled" not in str(info.value)
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(BatchError, match=r"objects.npy: holds pickled Python objects"):
        read_query(str(tmp_path / "objects.npy"), context=str(tmp_path / "context.npz"))


@pytest.mark.parametrize("content", ["x\n", "x,y\n"])
def test_zero_query_points_is_an_error_naming_the_file(tmp_path, content):
    np.savez(tmp_path / "context.npz", xc=QUERY["xc"], yc=QUERY["yc"])
    (tmp_path / "q.csv").write_text(content)
    with pytest.raises(BatchError, match=r"q.csv has no rows \(a header only\)"):
        read_query(str(tmp_path / "q.csv"), context=str(tmp_path / "context.npz"))
    np.save(tmp_path / "q.npy", np.zeros((0, 1)))
    with pytest.raises(BatchError, match=r"q.npy: no points to predict at"):
        read_query(str(tmp_path / "q.npy"), context=str(tmp_path / "context.npz"))


@pytest.mark.parametrize("key, scale", [("xt", 1e300), ("xc", 1e20), ("yc", -2e19)])
def test_values_whose_squares_overflow_float32_are_refused_when_read(tmp_path, key, scale):
    np.savez(tmp_path / "q.npz", **{**QUERY, key: np.abs(QUERY[key]) * scale})
    with pytest.raises(BatchError, match=rf"q.npz: '{key}' has \d+ value\(s\) beyond \+-1.8e\+19"):
        read_query(str(tmp_path / "q.npz"))
    np.savez(tmp_path / "q.npz", **{**QUERY, key: QUERY[key] * 1e18})  # large but computable
    assert np.isfinite(read_query(str(tmp_path / "q.npz"))[key]).all()


TINY = {"encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}, "head": {"width": 16},
        "dim_x": 1, "dim_y": 1}


@pytest.mark.slow  # about 25 s: the preset's autoregressive sampling traced twice
def test_taylorformer_at_huge_inputs_raises_instead_of_returning_nan(tmp_path, capsys):
    """|x| = 1e20 is finite in float32 but its square is not: the preset's outputs were NaN
    and predict exited 0; now the file is refused when read (one error line, exit 2, no
    output file), and a batch that reaches the model with such values (a context y of
    1e30) raises instead of giving NaN."""
    model = build_model({"preset": "taylorformer", **TINY})
    model.save(tmp_path / "model.keras")
    taylorformer_run = tmp_path
    query = {k: v[None].astype(np.float32) for k, v in QUERY.items()}
    with pytest.raises(BatchError, match=r"NaN/inf at \d+ target point.*\|y\| 1\.\d+e\+30"):
        predict_query(model, {**query, "yc": query["yc"] * np.float32(1e30)}, verbose=0, num_samples=2)
    np.savez(tmp_path / "q.npz", **{**QUERY, "xt": QUERY["xt"] * 1e20, "xc": QUERY["xc"] * 1e20})
    code = main(["predict", str(taylorformer_run), "--input", str(tmp_path / "q.npz"),
                 "--output", str(tmp_path / "p.npz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and "q.npz" in err[0], err
    assert not (tmp_path / "p.npz").exists()


def test_conditional_model_outputs_are_checked_too():
    model = build_model({"preset": "tnp-d", **TINY})
    query = {k: v[None].astype(np.float32) for k, v in QUERY.items()}
    batch = {**query, "yt": np.zeros((1, 4, 1), np.float32)}
    assert np.isfinite(model.distribution(batch).mean()).all()
    # a finite batch whose outputs overflow: weights scaled to overflow float32 in the head
    for weight in model.head.weights:
        weight.assign(weight * 1e30)
    with pytest.raises(BatchError, match=r"model .* NaN/inf"):
        model.distribution(batch)
    with pytest.raises(BatchError, match=r"model .* NaN/inf"):
        model.compiled_distribution(batch)
