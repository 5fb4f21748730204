"""Sensor placement (``taylorformer.prediction.placement``, ``taylorformer place``): on an exact GP the
greedy choice equals the closed-form greedy one (its posterior variance does not depend on
the values observed); candidates are scored in batches, not one model call each; masked
context slots and chunking change nothing; files round-trip; bad input is one error line."""
import numpy as np
import pandas as pd
import pytest

from taylorformer.cli import main
from taylorformer.errors import BatchError, SpecError
from taylorformer.models import build_model
from taylorformer.prediction.placement import place, write_placement
from taylorformer.tasks.exact_gp_model import ExactGPModel, greedy_gp_placement

TINY = {"encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}, "head": {"width": 16}}


def _setup(dim_x=1, n=40, nc=5, nr=50, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, (n, dim_x)), rng.uniform(-2, 2, (nc, dim_x)), rng.normal(size=(nc, 1)),
            rng.uniform(-2, 2, (nr, dim_x)))


@pytest.mark.parametrize("dim_x, max_points, pseudo_draws", [(1, 10**6, 0), (1, 200, 3), (2, 500, 0)])
def test_greedy_variance_equals_the_closed_form_gp_choice(dim_x, max_points, pseudo_draws):
    cand, xc, yc, region = _setup(dim_x)
    gp = ExactGPModel(lengthscale=0.4, dim_x=dim_x)
    result = place(gp, cand, (xc, yc), region=region, k=6, max_points=max_points, pseudo_draws=pseudo_draws)
    indices, remaining, initial = greedy_gp_placement(gp, cand, 6, xc, region)
    np.testing.assert_array_equal(result.table["candidate"], indices)
    np.testing.assert_allclose(result.table[["x", ] if dim_x == 1 else ["x0", "x1"]], cand[indices], rtol=1e-6)
    np.testing.assert_allclose(result.table["remaining"], remaining, rtol=1e-4)
    np.testing.assert_allclose(result.initial, initial, rtol=1e-5)
    np.testing.assert_allclose(result.table["acquisition"], -np.diff(np.r_[initial, remaining]), rtol=1e-3)
    np.testing.assert_array_equal(result.table["order"], np.arange(1, 7))


@pytest.mark.parametrize("criterion", ["region-mean", "region-total"])
def test_joint_sample_criteria_equal_the_closed_form_gp_choice(criterion):
    """Draws whose mean and covariance are the posterior's exactly: the sample-based linear
    conditioning is then the exact Gaussian one, and the choice the closed-form one."""
    cand, xc, yc, region = _setup()
    gp = ExactGPModel(lengthscale=0.4, joint=True, exact_moments=True)
    result = place(gp, cand, (xc, yc), region=region, k=6, criterion=criterion, num_samples=400)
    indices, remaining, initial = greedy_gp_placement(gp, cand, 6, xc, region, criterion=criterion)
    np.testing.assert_array_equal(result.table["candidate"], indices)
    np.testing.assert_allclose(result.table["remaining"], remaining, rtol=1e-3)
    np.testing.assert_allclose(result.initial, initial, rtol=1e-5)


class _TwoOutputGP(ExactGPModel):
    """Two independent outputs, each the GP, drawn with exact moments together (so their
    sample cross-covariance is exactly 0): the criteria are twice the one-output GP's."""

    dim_y = 2

    def sample(self, batch, num_samples=1, seed=None):
        white = np.random.default_rng(seed).standard_normal((num_samples, 2 * batch["xt"].shape[1]))
        white -= white.mean(0)
        white = white @ np.linalg.inv(np.linalg.cholesky(white.T @ white / num_samples)).T
        mean, cov = self.posterior(*self._context(batch, 0), np.asarray(batch["xt"][0], np.float64))
        chol, n = np.linalg.cholesky(cov), len(mean)
        draws = np.stack([mean + white[:, :n] @ chol.T, mean + white[:, n:] @ chol.T], -1)
        return draws[:, None].astype(np.float32)


def test_joint_criteria_with_two_outputs_sum_over_them():
    cand, xc, yc, region = _setup(n=25, nr=30)
    one = greedy_gp_placement(ExactGPModel(lengthscale=0.4), cand, 4, xc, region, criterion="region-mean")
    result = place(_TwoOutputGP(lengthscale=0.4, joint=True), cand, (xc, np.c_[yc, -yc]), region=region, k=4,
                   criterion="region-mean", num_samples=300)
    np.testing.assert_array_equal(result.table["candidate"], one[0])
    np.testing.assert_allclose(result.table["remaining"], 2 * one[1], rtol=1e-3)


def test_joint_criterion_from_plain_draws_estimates_the_closed_form():
    cand, xc, yc, region = _setup(n=20)
    gp = ExactGPModel(lengthscale=0.4, joint=True)
    result = place(gp, cand, (xc, yc), region=region, k=1, criterion="region-mean", num_samples=20000)
    exact = [greedy_gp_placement(gp, cand[i:i + 1], 1, xc, region, criterion="region-mean")
             for i in range(len(cand))]
    reduction = np.array([init - rem[0] for _, rem, init in exact])
    np.testing.assert_allclose(result.first_acquisition, reduction, rtol=0.1, atol=0.02 * reduction.max())
    assert result.table["candidate"][0] == int(np.argmax(reduction))


class _Counting(ExactGPModel):
    calls = 0

    def compiled_distribution(self, batch):
        self.calls += 1
        return super().compiled_distribution(batch)


def test_candidates_are_scored_in_batches_not_one_call_each():
    cand, xc, yc, region = _setup(n=40, nr=20)
    gp = _Counting(lengthscale=0.4)
    k, rows = 3, 10  # (Nc + k + Nr) * rows tokens per pass
    place(gp, cand, (xc, yc), region=region, k=k, max_points=(5 + k + 20) * rows)
    # per step: the predictive at every point (pseudo-values) + ceil(remaining candidates / rows)
    assert gp.calls == sum(1 + -(-(40 - step) // rows) for step in range(k))


@pytest.fixture(scope="module")
def np_model():
    return build_model({"preset": "tnp-d", "dim_x": 1, "dim_y": 1, **TINY})


def test_masked_slots_and_chunking_change_nothing_for_an_np(np_model):
    cand, xc, yc, region = _setup(n=12, nr=15)
    one_pass = place(np_model, cand, (xc, yc), region=region, k=3)
    chunked = place(np_model, cand, (xc, yc), region=region, k=3, max_points=(5 + 3 + 15) * 5)
    np.testing.assert_array_equal(one_pass.table["candidate"], chunked.table["candidate"])
    np.testing.assert_allclose(one_pass.table["remaining"], chunked.table["remaining"], rtol=1e-4)
    # the first step against one dense forward pass with the point in the context, unpadded
    best = one_pass.table["candidate"][0]
    mean = np.asarray(np_model.distribution({"xc": xc[None], "yc": yc[None], "xt": cand[None, best:best + 1],
                                             "yt": np.zeros((1, 1, 1))}).mean())[0]
    dense = np_model.distribution({"xc": np.r_[xc, cand[best:best + 1]][None], "yc": np.r_[yc, mean][None],
                                   "xt": region[None], "yt": np.zeros((1, 15, 1))})
    np.testing.assert_allclose(one_pass.table["remaining"][0], np.asarray(dense.variance()).sum(), rtol=1e-4)


@pytest.mark.slow  # three compiles of the cached sampler (~45 s on 2 cores)
def test_autoregressive_models_place_by_both_criteria_and_conditional_ones_refuse_joint():
    model = build_model({"preset": "taylorformer", "dim_x": 1, "dim_y": 1, **TINY})
    cand, xc, yc, region = _setup(n=8, nr=6)
    for criterion in ("variance", "region-mean"):
        result = place(model, cand, (xc, yc), region=region, k=2, criterion=criterion, num_samples=16)
        assert len(set(result.table["candidate"])) == 2
        assert np.all(np.isfinite(result.table[["acquisition", "remaining"]].to_numpy()))
    with pytest.raises(SpecError, match="joint samples"):
        place(ExactGPModel(), cand, k=1, criterion="region-total")


def test_bad_arguments_name_the_problem():
    gp = ExactGPModel()
    cand = np.linspace(-1, 1, 5)
    with pytest.raises(BatchError, match="k=6 locations asked of 5"):
        place(gp, cand, k=6)
    with pytest.raises(BatchError, match="candidates has 1 non-finite"):
        place(gp, np.r_[cand, np.nan], k=1)
    with pytest.raises(BatchError, match=r"region must be \[n_points, 1\]"):
        place(gp, cand, region=np.zeros((3, 2)), k=1)
    with pytest.raises(SpecError, match="criterion"):
        place(gp, cand, k=1, criterion="entropy")
    with pytest.raises(BatchError, match="x_names must be 1 distinct name"):
        place(gp, cand, k=1, x_names=["order"])


def test_duplicated_candidates_are_placed_once_with_a_note():
    """Candidates given twice (and thrice) are one location each: the choice is the
    closed-form greedy one over the distinct candidates, no location is picked twice, the
    table's ``candidate`` is the first given row of each, and the result says how many
    rows were dropped."""
    cand, xc, yc, region = _setup(n=12)
    given = np.concatenate([cand, cand[[3, 7, 3]], cand[:2]])  # 5 repeated rows
    gp = ExactGPModel(lengthscale=0.4)
    with pytest.warns(UserWarning, match="5 candidate row.s. repeat an earlier location.*12 distinct of 17"):
        result = place(gp, given, (xc, yc), region=region, k=12)
    indices, remaining, _ = greedy_gp_placement(gp, cand, 12, xc, region)
    np.testing.assert_array_equal(result.table["candidate"], indices)  # the first rows are the distinct ones
    assert len(np.unique(result.table["x"])) == 12 and result.duplicates == 5
    np.testing.assert_allclose(result.table["remaining"], remaining, rtol=1e-4)
    np.testing.assert_array_equal(result.candidates, cand.astype(np.float32))
    np.testing.assert_array_equal(result.candidate_rows, np.arange(12))
    with pytest.raises(BatchError, match="k=13 locations asked of 12 distinct candidate.s. .5 duplicated"):
        place(gp, given, (xc, yc), k=13)


@pytest.mark.parametrize("ext", [".csv", ".npz", ".nc"])
def test_placement_files_round_trip(tmp_path, ext):
    result = place(ExactGPModel(dim_x=2), np.random.default_rng(0).uniform(size=(9, 2)), k=3)
    path = write_placement(str(tmp_path / f"out{ext}"), result)
    if ext == ".csv":
        back = pd.read_csv(path)
        np.testing.assert_allclose(back[["x0", "x1"]], result.table[["x0", "x1"]], rtol=1e-6)
        np.testing.assert_allclose(back["acquisition"], result.table["acquisition"], rtol=1e-9)
    elif ext == ".npz":
        with np.load(path) as back:
            np.testing.assert_allclose(back["x"], result.table[["x0", "x1"]], rtol=1e-6)
            np.testing.assert_array_equal(back["order"], [1, 2, 3])
    else:
        import xarray as xr

        with xr.open_dataset(path) as back:
            np.testing.assert_allclose(back["remaining"].values, result.table["remaining"], rtol=1e-9)
            assert back.attrs["criterion"] == "variance"


@pytest.fixture(scope="module")
def run_2d(tmp_path_factory):
    model = build_model({"preset": "tnp-d", "dim_x": 2, "dim_y": 2, **TINY})
    path = tmp_path_factory.mktemp("run")
    model.save(path / "model.keras")
    return model, path


def test_cli_end_to_end_csv_files_and_a_map(run_2d, tmp_path, capsys):
    model, run_dir = run_2d
    rng = np.random.default_rng(3)
    cand, xc, yc = rng.uniform(-2, 2, (15, 2)), rng.uniform(-2, 2, (6, 2)), rng.normal(size=(6, 2))
    pd.DataFrame({"lon": cand[:, 0], "lat": cand[:, 1]}).to_csv(tmp_path / "cand.csv", index=False)
    pd.DataFrame({"lon": xc[:, 0], "lat": xc[:, 1], "u": yc[:, 0], "v": yc[:, 1]}).to_csv(
        tmp_path / "ctx.csv", index=False)
    region = rng.uniform(-2, 2, (10, 2)).astype(np.float32)
    np.savez(tmp_path / "region.npz", xt=region)
    out, png = tmp_path / "chosen.csv", tmp_path / "map.png"
    code = main(["place", str(run_dir), "--checkpoint", "model", "--candidates", str(tmp_path / "cand.csv"),
                 "--context", str(tmp_path / "ctx.csv"), "--region", str(tmp_path / "region.npz"), "--k", "3",
                 "--x-columns", "lon,lat", "--y-columns", "u,v", "--output", str(out), "--plot", str(png)])
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(out)
    assert list(table.columns) == ["lon", "lat", "order", "candidate", "acquisition", "remaining"]
    expected = place(model, cand, (xc, yc), region=region, k=3, x_names=["lon", "lat"])
    np.testing.assert_array_equal(table["candidate"], expected.table["candidate"])
    np.testing.assert_allclose(table["remaining"], expected.table["remaining"], rtol=1e-4)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "3 location(s) written to" in capsys.readouterr().out


def test_cli_reads_the_context_from_an_npz_candidates_file(run_2d, tmp_path, capsys):
    import xarray as xr

    model, run_dir = run_2d
    rng = np.random.default_rng(4)
    arrays = {"xt": rng.uniform(-2, 2, (9, 2)), "xc": rng.uniform(-2, 2, (4, 2)), "yc": rng.normal(size=(4, 2))}
    np.savez(tmp_path / "cand.npz", **{k: v.astype(np.float32) for k, v in arrays.items()})
    code = main(["place", str(run_dir), "--checkpoint", "model", "--candidates", str(tmp_path / "cand.npz"),
                 "--k", "2", "--output", str(tmp_path / "out.nc")])
    assert code == 0, capsys.readouterr().err
    expected = place(model, arrays["xt"], (arrays["xc"], arrays["yc"]), k=2)
    with xr.open_dataset(tmp_path / "out.nc") as back:
        np.testing.assert_array_equal(back["candidate"].values, expected.table["candidate"])
        np.testing.assert_allclose(back["x"].values, expected.table[["x0", "x1"]], rtol=1e-6)


def test_cli_spells_out_the_criteria_and_defaults_of_the_module(capsys):
    from taylorformer import cli
    from taylorformer.prediction import placement

    assert cli.PLACEMENT_CRITERIA == placement.CRITERIA
    with pytest.raises(SystemExit):
        main(["place", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {placement.DEFAULT_SAMPLES})" in text and f"(default {placement.DEFAULT_MAX_POINTS})" in text


def test_cli_refuses_to_overwrite_inputs_or_run_files_in_one_line(run_2d, tmp_path, capsys):
    _, run_dir = run_2d
    cand = tmp_path / "cand.npz"
    np.savez(cand, xt=np.random.default_rng(0).uniform(size=(5, 2)).astype(np.float32))
    before = cand.read_bytes()
    base = ["place", str(run_dir), "--checkpoint", "model", "--candidates", str(cand), "--k", "2"]
    cases = [(["--output", str(cand)], "is the file the command reads"),
             (["--output", str(tmp_path / "o.csv"), "--plot", str(run_dir / "model.keras")], "must be a .png path"),
             (["--output", str(run_dir / "model.keras")], "unsupported file type"),
             (["--output", str(run_dir / "spec.json.csv")], None),
             (["--output", str(tmp_path / "o.csv"), "--k", "9"], "k=9 locations asked of 5"),
             (["--output", str(tmp_path / "o.csv"), "--criterion", "region-mean"], "joint samples")]
    for extra, message in cases:
        code = main(base + extra)
        err = capsys.readouterr().err
        if message is None:  # a new file that only looks like a run file is fine
            assert code == 0, err
            continue
        assert code == 2 and message in err and err.count("\n") == 1, err
    (run_dir / "metrics.csv").write_text("step\n")
    code = main(base + ["--output", str(run_dir / "metrics.csv")])
    assert code == 2 and "one of the run's own files" in capsys.readouterr().err
    assert cand.read_bytes() == before and (run_dir / "metrics.csv").read_text() == "step\n"


def test_cli_names_a_header_only_candidates_file(run_2d, tmp_path, capsys):
    """A candidates CSV with a header only is refused in one line naming the file."""
    _, run_dir = run_2d
    (tmp_path / "empty.csv").write_text("x0,x1\n")
    code = main(["place", str(run_dir), "--checkpoint", "model", "--k", "2", "--output", str(tmp_path / "o.csv"),
                 "--candidates", str(tmp_path / "empty.csv")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"{tmp_path / 'empty.csv'} has no rows" in err, err


def test_map_of_a_1d_placement_draws_before_and_after():
    from taylorformer.plotting.placement import plot_placement

    cand, xc, yc, region = _setup()
    result = place(ExactGPModel(lengthscale=0.4), cand, (xc, yc), region=region, k=4)
    fig = plot_placement(result, title="gp")
    ax = fig.axes[0]
    curves = {line.get_label(): line for line in ax.get_lines()}
    np.testing.assert_allclose(np.sort(curves["before"].get_ydata()),
                               np.sort(result.variance_before), rtol=1e-6)
    assert np.all(result.variance_after <= result.variance_before + 1e-6)
    assert [t.get_text() for t in ax.texts] == ["1", "2", "3", "4"]


def test_cli_takes_raw_units_with_a_normaliser_and_reports_the_data_units(tmp_path, capsys):
    """With a normaliser in the model file, place on raw (kelvin-like, degrees) files equals
    place on the inputs standardised by hand in NumPy, the chosen points as given and the
    variances times y_scale**2."""
    import xarray as xr

    from taylorformer.normaliser import Normaliser

    model = build_model({"preset": "tnp-d", "dim_x": 2, "dim_y": 1, **TINY})
    x_offset, x_scale, y_offset, y_scale = np.array([150.0, -30.0]), np.array([40.0, 12.0]), 288.0, 6.5
    model.normaliser = Normaliser(x_offset, x_scale, [y_offset], [y_scale], ["lon", "lat"], ["sst"],
                                  ["degrees_east", "degrees_north"], ["K"])
    model.save(tmp_path / "model.keras")
    rng = np.random.default_rng(5)
    cand_z, xc_z, yc_z, region_z = rng.uniform(-2, 2, (11, 2)), rng.uniform(-2, 2, (5, 2)), \
        rng.normal(size=(5, 1)), rng.uniform(-2, 2, (8, 2))
    cand, xc, region = (v * x_scale + x_offset for v in (cand_z, xc_z, region_z))
    yc = yc_z * y_scale + y_offset
    pd.DataFrame({"lon": cand[:, 0], "lat": cand[:, 1]}).to_csv(tmp_path / "cand.csv", index=False)
    pd.DataFrame({"lon": xc[:, 0], "lat": xc[:, 1], "sst": yc[:, 0]}).to_csv(tmp_path / "ctx.csv", index=False)
    pd.DataFrame({"lon": region[:, 0], "lat": region[:, 1]}).to_csv(tmp_path / "region.csv", index=False)
    common = ["place", str(tmp_path), "--checkpoint", "model", "--candidates", str(tmp_path / "cand.csv"),
              "--context", str(tmp_path / "ctx.csv"), "--region", str(tmp_path / "region.csv"), "--k", "3"]
    assert main(common + ["--output", str(tmp_path / "out.csv")]) == 0, capsys.readouterr().err
    assert "(variances in (K)^2)" in capsys.readouterr().out
    assert main(common + ["--output", str(tmp_path / "out.nc")]) == 0, capsys.readouterr().err

    # the reference: place in the model's units on the standardised arrays, scaled by hand
    ref = place(model, cand_z, (xc_z, yc_z), region=region_z, k=3)
    chosen = ref.table["candidate"].to_numpy()
    table = pd.read_csv(tmp_path / "out.csv")
    assert list(table.columns) == ["lon", "lat", "order", "candidate", "acquisition", "remaining"]
    np.testing.assert_array_equal(table["candidate"], chosen)
    np.testing.assert_allclose(table[["lon", "lat"]], cand[chosen], rtol=1e-12)  # exactly as given
    for key in ("acquisition", "remaining"):
        np.testing.assert_allclose(table[key], ref.table[key] * y_scale ** 2, rtol=1e-4)
    with xr.open_dataset(tmp_path / "out.nc") as back:
        assert back.attrs["units"] == "(K)^2" and back["remaining"].attrs["units"] == "(K)^2"
        np.testing.assert_allclose(back.attrs["initial"], ref.initial * y_scale ** 2, rtol=1e-4)
        np.testing.assert_allclose(back["x"].values, cand[chosen], rtol=1e-12)

    # no context, no region (the candidates file alone, read in float64): the same
    assert main(common[:6] + ["--k", "2", "--output", str(tmp_path / "alone.npz")]) == 0, capsys.readouterr().err
    ref = place(model, cand_z, k=2)
    with np.load(tmp_path / "alone.npz") as back:
        np.testing.assert_array_equal(back["candidate"], ref.table["candidate"])
        np.testing.assert_allclose(back["remaining"], ref.table["remaining"] * y_scale ** 2, rtol=1e-4)
        assert str(back["units"]) == "(K)^2"


def test_cli_without_a_normaliser_warns_and_stays_in_model_units(run_2d, tmp_path):
    _, run_dir = run_2d
    np.savez(tmp_path / "cand.npz", xt=np.random.default_rng(0).uniform(size=(5, 2)).astype(np.float32))
    with pytest.warns(UserWarning, match="no saved normaliser"):
        assert main(["place", str(run_dir), "--checkpoint", "model", "--candidates", str(tmp_path / "cand.npz"),
                     "--k", "1", "--output", str(tmp_path / "o.nc")]) == 0
    import xarray as xr

    with xr.open_dataset(tmp_path / "o.nc") as back:
        assert back.attrs["units"] == "model units"


def test_variances_of_outputs_on_different_scales_stay_in_model_units():
    from taylorformer.normaliser import Normaliser
    from taylorformer.prediction.placement import variance_units

    same = Normaliser([0.0], [1.0], [10.0, 20.0], [2.0, 2.0], ["x"], ["u", "v"], [None], ["m s-1", "m s-1"])
    assert variance_units(same) == (4.0, "(m s-1)^2")
    differ = Normaliser([0.0], [1.0], [10.0, 20.0], [2.0, 3.0], ["x"], ["u", "t"], [None], ["m s-1", "K"])
    factor, units = variance_units(differ)
    assert factor == 1.0 and units.startswith("model units")
