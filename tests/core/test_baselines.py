"""Baselines and error bars of the replication rows (taylorformer.workflow.baselines), the rows'
status, ``replicate --list --json`` against the packaged CSVs and the generated docs table.

The scorers are checked against independent NumPy references: loops over
:meth:`CSVSeriesTask.window` for persistence and seasonal naive, a per-block loop for the
batch-means error bar, a per-task loop for the context-frequency NLL.
"""
import csv
import dataclasses
import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from taylorformer_replication import replication
from taylorformer.workflow import baselines
from taylorformer.cli import main
from taylorformer.task import make_task

# ----------------------------------------------------------------------------- error bars
def test_block_stderr_matches_a_loop_over_blocks():
    values = np.random.default_rng(1).normal(size=103)
    for block in (1, 5, 10, 51):
        count = 103 // block
        means = [values[i * block:(i + 1) * block].mean() for i in range(count)]
        expected = np.std(means, ddof=1) / math.sqrt(count)
        assert baselines.block_stderr(values, block) == pytest.approx(expected, rel=1e-12)
    assert baselines.block_stderr(values, 1) == pytest.approx(np.std(values, ddof=1) / math.sqrt(103))
    assert math.isnan(baselines.block_stderr(values, 52))  # one block: no error bar
    with pytest.raises(ValueError, match="block must be >= 1"):
        baselines.block_stderr(values, 0)


def test_block_stderr_of_overlapping_windows_is_honest():
    """Per-window means of overlapping windows of one white-noise series (the situation of
    stride-1 forecasting windows): the iid standard error understates the spread of the
    mean over independent series, the batch-means one does not."""
    rng = np.random.default_rng(2)
    width, n = 50, 2_000
    kernel = np.ones(width) / width
    means, iid, block = [], [], []
    for _ in range(200):
        values = np.convolve(rng.normal(size=n + width - 1), kernel, mode="valid")  # [n] window means
        means.append(values.mean())
        iid.append(baselines.iid_stderr(values))
        block.append(baselines.block_stderr(values, width))
    truth = np.std(means)
    assert np.mean(iid) < truth / 4  # treating the windows as independent: far too small
    assert 0.7 * truth < np.mean(block) < 1.3 * truth


def test_block_stderr_matches_the_exact_variance_of_an_ar1_mean():
    """AR(1) series x_t = phi x_(t-1) + e_t (known autocorrelation phi^k): the mean of the
    squared batch-means standard error over many series against the exact variance of the
    mean, sum_(i,j) gamma(i - j) / n^2 with gamma(k) = phi^|k| / (1 - phi^2), in NumPy."""
    from scipy.signal import lfilter

    phi, n, block, series = 0.8, 8_000, 200, 300
    rng = np.random.default_rng(4)
    noise = rng.normal(size=(series, n + 500))
    x = lfilter([1.0], [1.0, -phi], noise, axis=1)[:, 500:]          # stationary after a burn-in
    lags = np.arange(1, n)
    gamma0 = 1.0 / (1.0 - phi ** 2)
    exact = (gamma0 + 2.0 * np.sum((1.0 - lags / n) * gamma0 * phi ** lags)) / n
    block_var = np.mean([baselines.block_stderr(v, block) ** 2 for v in x])
    iid_var = np.mean([baselines.iid_stderr(v) ** 2 for v in x])
    assert block_var == pytest.approx(exact, rel=0.15)
    assert iid_var < exact / 5  # (1 - phi) / (1 + phi) = 1/9 of it: independent values assumed
    assert np.var(x.mean(1)) == pytest.approx(exact, rel=0.25)  # the simulation itself


def test_summarise_names_its_method():
    values = np.arange(40.0)
    assert baselines.summarise(values)[2] == "iid"
    mean, stderr, method = baselines.summarise(values, 4)
    assert mean == 19.5 and stderr == baselines.block_stderr(values, 4)
    assert method == "batch means, blocks of 4 consecutive windows"


# ----------------------------------------------------------------------------- forecasting
@pytest.mark.parametrize("lag", [1, 96])
def test_naive_forecasts_match_a_loop_over_windows(lag, ettm2_csv):
    path = ettm2_csv()
    task = make_task("ettm2", {"path": path, "horizon": 48, "context_length": 96})
    train = task.series("train")["y"][:, 0]
    z = (train - task.mean[0]) / task.std[0]
    variance = np.mean((z[lag:] - z[:-lag]) ** 2)
    mse, nll = [], []
    for start in task.window_starts("test"):
        y = (task.window(int(start))["y"][:, 0] - task.mean[0]) / task.std[0]
        error = y[96:] - y[96 - lag:96 + 48 - lag]
        mse.append(np.mean(error ** 2))
        nll.append(np.mean(0.5 * np.log(2 * np.pi * variance) + error ** 2 / (2 * variance)))
    # the baseline scores the float32 z-scores the model sees; the reference is float64
    np.testing.assert_allclose(baselines.forecast_values(task, "mse", lag=lag), mse, rtol=1e-5)
    np.testing.assert_allclose(baselines.forecast_values(task, "nll", lag=lag), nll, rtol=1e-5)
    assert len(baselines.forecast_values(task, "mse", lag=lag, num_tasks=5)) == 5
    assert baselines.overlap_block(task) == 96 + 48


def test_persistence_on_a_small_series_by_hand():
    """40 rows: the chronological split 69/11/20 cuts at rows 27 and 32, the z-scores use the
    27 training rows (population std), context 3 and horizon 2 give the test windows starting
    at rows 32..35, and the NLL's variance is the training rows' mean squared one-step
    change of the z-scores. Every number below is computed here, not by the task."""
    y = np.array([1.0, 3, 2, 5, 4, 4, 6, 8, 7, 9, 8, 10, 12, 11, 13, 12, 14, 15, 13, 16, 18, 17, 19, 20,
                  18, 21, 23, 22, 24, 26, 25, 27, 29, 28, 30, 33, 31, 32, 35, 34])
    task = make_task("csv", {"path": pd.DataFrame({"v": y}), "target_columns": ["v"], "context_length": 3,
                             "horizon": 2})
    train = y[:27]
    z = (y - train.mean()) / train.std()
    variance = np.mean(np.diff(z[:27]) ** 2)
    mse, nll = [], []
    for start in (32, 33, 34, 35):
        targets = np.arange(start + 3, start + 5)
        error = z[targets] - z[targets - 1]
        mse.append(np.mean(error ** 2))
        nll.append(np.mean(0.5 * np.log(2 * np.pi * variance) + 0.5 * error ** 2 / variance))
    np.testing.assert_array_equal(task.window_starts("test"), [32, 33, 34, 35])
    np.testing.assert_allclose(baselines.forecast_values(task, "mse"), mse, rtol=1e-5)
    np.testing.assert_allclose(baselines.forecast_values(task, "nll"), nll, rtol=1e-5)
    # seasonal naive with a season of 2 steps: the value two rows earlier, the 2-step variance
    variance2 = np.mean((z[2:27] - z[:25]) ** 2)
    error2 = np.array([z[s + 3:s + 5] - z[s + 1:s + 3] for s in (32, 33, 34, 35)])
    np.testing.assert_allclose(baselines.forecast_values(task, "mse", lag=2), np.mean(error2 ** 2, 1), rtol=1e-5)
    np.testing.assert_allclose(baselines.forecast_values(task, "nll", lag=2),
                               np.mean(0.5 * np.log(2 * np.pi * variance2) + 0.5 * error2 ** 2 / variance2, 1),
                               rtol=1e-5)
    assert baselines.overlap_block(task) == 5
    mean, stderr, method = baselines.summarise(baselines.forecast_values(task, "mse"), 5)
    assert mean == pytest.approx(np.mean(mse), rel=1e-5) and math.isnan(stderr)
    assert method == "batch means, blocks of 5 consecutive windows (4 windows: fewer than two blocks, no error bar)"


def test_persistence_leaves_missing_targets_out(ettm2_csv):
    path = ettm2_csv()
    frame = pd.read_csv(path)
    frame.loc[1_800, "OT"] = np.nan
    frame.to_csv(path, index=False)
    task = make_task("ettm2", {"path": path, "horizon": 48})
    values = baselines.forecast_values(task, "mse")
    assert np.isfinite(values).all() and len(values) == len(task.window_starts("test"))
    with pytest.raises(Exception, match="lag 97 must be in"):
        baselines.forecast_values(task, "mse", lag=97)


# ----------------------------------------------------------------------------- other tasks
def test_context_frequency_matches_a_loop_over_tasks():
    task = make_task("sir", {})
    values = baselines.context_frequency_values(task, "test", 4, 4)
    batch = next(iter(task.dataset("test", batch_size=4, num_batches=1)))
    for i in range(4):
        nc, nt = int(batch["mask_c"][i].numpy().sum()), int(batch["mask_t"][i].numpy().sum())
        yc, yt = batch["yc"][i, :nc, 0].numpy().astype(int), batch["yt"][i, :nt, 0].numpy().astype(int)
        prob = (np.bincount(yc, minlength=3) + 1) / (nc + 3)
        assert values[i] == pytest.approx(-np.mean(np.log(prob[yt])), rel=1e-10)


def test_context_mean_with_missing_values_matches_a_loop_over_tasks():
    """Per task and output, N(mean, std) of the observed context values (ddof 0), scored as
    a model is (the NLL of a target point summed over its observed outputs, averaged over
    the points with one). Two outputs, padding, a missing context value, a missing target
    value and a target point with none."""
    rng = np.random.default_rng(0)
    yc, yt = rng.normal(2.0, 3.0, (3, 9, 2)), rng.normal(2.0, 3.0, (3, 5, 2))
    mask_c, mask_t = np.ones((3, 9)), np.ones((3, 5))
    mask_c[1, 6:], mask_t[2, 3:] = 0.0, 0.0
    yc[0, 2, 1], yt[0, 1, 0], yt[1, 4] = np.nan, np.nan, np.nan
    batch = {k: v.astype(np.float32) for k, v in {
        "xc": np.zeros((3, 9, 1)), "xt": np.zeros((3, 5, 1)), "yc": yc, "yt": yt,
        "mask_c": mask_c, "mask_t": mask_t}.items()}

    class Task:
        def dataset(self, split, batch_size, num_batches):
            return [batch]

    values, skipped = replication._task_values(baselines.ContextMean(1e-3), Task(), "nll", "test", 3, None)
    assert skipped == 0
    yc, yt = batch["yc"].astype(np.float64), batch["yt"].astype(np.float64)
    for i in range(3):
        point_nll = []
        for j in range(int(mask_t[i].sum())):
            terms = []
            for d in range(2):
                ctx = yc[i, :int(mask_c[i].sum()), d]
                ctx = ctx[~np.isnan(ctx)]
                if not np.isnan(yt[i, j, d]):
                    terms.append(-norm_logpdf(yt[i, j, d], ctx.mean(), ctx.std()))
            if terms:
                point_nll.append(sum(terms))
        assert values[i] == pytest.approx(np.mean(point_nll), rel=1e-5)


def norm_logpdf(y, mean, std):
    return -0.5 * math.log(2 * math.pi) - math.log(std) - 0.5 * ((y - mean) / std) ** 2


def test_exact_gp_values_are_the_batches_ceilings():
    task = make_task("gp-taylorformer", {"kernel": "eq", "noise": 0.0})
    batch = next(iter(task.dataset("test", batch_size=6, num_batches=1)))
    joint = baselines.exact_gp_values(task, "test", 6, 5, joint=True)
    np.testing.assert_allclose(joint, batch["gt_loglik_joint"].numpy()[:5])
    row = replication.get_row("taylorformer-gp-eq")
    values, block = replication.baseline_values(row, "exact-gp", eval_tasks=5)
    assert block == 1 and len(values) == 5  # the row's evaluation batches (100 a batch)


# ----------------------------------------------------------------------------- status
def _ours(value, stderr=0.01, protocol=1):
    return {"value": value, "stderr": stderr, "protocol": protocol}


def test_status_of_each_case():
    row = replication.get_row("taylorformer-exchange-rate-96-nll")
    paper, error = row.paper_comparable
    assert paper == pytest.approx(-1.31 * 1518 / (1518 - 192)) and error == pytest.approx(0.04 * 1518 / 1326)
    persistence = {"name": "persistence", "kind": "reference", "value": -1.75, "stderr": 0.07}
    assert replication.status(row, None, persistence)[0] == "not run"
    assert replication.status(row, _ours(paper + 0.02), persistence)[0] == "below baseline"
    assert replication.status(row, _ours(paper + 0.02), None)[0] == "reproduced"
    assert replication.status(row, _ours(paper + 0.1, 0.06), None)[0] == "within 2 se"
    assert replication.status(row, _ours(paper + 0.5), None) == ("below paper", "worse by 0.5")
    assert replication.status(row, _ours(paper - 0.5), None)[0] == "above paper"
    ceiling = {**persistence, "kind": "ceiling", "value": -5.0}
    assert replication.status(row, _ours(paper + 0.5), ceiling)[0] == "below paper"  # a ceiling is no bar
    gp = replication.get_row("taylorformer-gp-eq")
    state, why = replication.status(gp, None, None, earlier=_ours(1.29))
    assert state == "not run" and "ran under protocol 1 (observation noise std 1e-3" in why
    sir = replication.get_row("bsa-tnp-sir-scaled")
    assert replication.status(sir, _ours(0.1), None)[0] == "not comparable"


def test_a_printed_zero_error_keeps_the_papers_decimals():
    """TE-TNP Table 5 prints TE-PT-TNP-M8 as "-0.50 +- 0.00": the rounding tolerance is half
    of the printed last digit, 0.005 (read from the float, -0.5, it would be 0.05)."""
    row = replication.get_row("te-pt-tnp-m8-gp-shift-0")
    printed = replication.format_value(row)
    assert printed == "-0.50 +- 0.00"
    tolerance = 0.5 * 10 ** -len(printed.split()[0].split(".")[1])
    assert replication.status(row, _ours(-0.5 - 0.8 * tolerance, 0.001), None)[0] == "reproduced"
    assert replication.status(row, _ours(-0.54, 0.001), None) == ("below paper", "worse by 0.04")
    assert replication.format_value(replication.get_row("cnp-gp-shift-0.4")) == "-0.77 +- 0.005"
    for row_id, text in (("taylorformer-electricity-192-nll", "-0.50 +- 0.00"),
                         ("taylorformer-ett-192-mse", "0.00029 +- 0.00000"),
                         ("taylorformer-exchange-rate-96-mse", "0.002 +- 0.000")):
        assert replication.format_value(replication.get_row(row_id)) == text  # as Tables 2 and 4 print them


def test_a_result_below_the_papers_budget_is_never_reproduced():
    row = replication.get_row("te-pt-tnp-m8-gp-shift-0")
    small = {**_ours(-0.5, 0.001), "budget_fraction": 1_000 / row.training.steps}
    state, why = replication.status(row, small, None)
    assert state == "level with paper" and "less than the paper's budget" in why
    assert replication.status_label(state, small) == "level with paper at 0.2% of the budget"
    assert replication.status_label("below paper", {"budget_fraction": 0.25}) == "below paper at 25% of the budget"
    assert replication.status_label("below paper", {"budget_fraction": 1.0}) == "below paper"
    assert replication.status_label("not run", None) == "not run"


def test_table5_rows_use_the_papers_variance_link_for_every_model():
    """App. F.1 puts a pre-softplus variance on every model of Table 5: the TNP and CNP rows
    build the same likelihood as the TE-TNP rows, under a protocol that sets earlier results apart.
    The resolved spec is the one ``build_model`` builds (its ``model.spec``); building the four
    paper-size models would only repeat that."""
    from taylorformer.spec import resolve_spec

    links = {}
    for prefix in ("tnp-d", "cnp", "te-tnp", "te-pt-tnp-m8"):
        row = replication.get_row(f"{prefix}-gp-shift-0")
        links[prefix] = resolve_spec(row.model_spec())["likelihood"].get("softplus_of")
        if prefix in ("tnp-d", "cnp"):
            assert row.protocol_version == 2 and "softplus" in row.earlier_protocols[1]
    assert set(links.values()) == {"variance"}, links


def test_a_baseline_is_compared_on_the_tasks_ours_scored(tmp_path):
    """Of a baseline's lines the one on ours' number of tasks is used; a baseline recorded
    only on other tasks is shown but not compared (the reason names both counts)."""
    row = replication.get_row("taylorformer-exchange-rate-96-nll")
    line = {c: "" for c in replication.BASELINE_COLUMNS}
    line.update(row=row.id, baseline="persistence", metric="nll", stderr="0.01", stderr_method="iid",
                protocol=str(row.protocol_version))
    lines = {(row.id, "persistence"): [{**line, "value": "-1.70", "num_tasks": "500"},
                                       {**line, "value": "-1.60", "num_tasks": "200"}]}
    chosen, _ = replication._baseline(row, lines, num_tasks=500)
    assert chosen["value"] == -1.70 and chosen["same_tasks"] is True
    other, _ = replication._baseline(row, lines, num_tasks=300)
    assert other["value"] == -1.60 and other["same_tasks"] is False  # the last line, flagged
    worse = {**_ours(-1.0), "num_tasks": 300}
    state, why = replication.status(row, worse, other)
    assert state != "below baseline" and "persistence scored 200 tasks, ours 300: not compared" in why
    assert replication.status(row, {**worse, "num_tasks": 500}, chosen)[0] == "below baseline"
    listed = {r["id"]: r for r in replication.list_rows(results=str(tmp_path / "none.csv"))}
    for item in listed.values():  # the project's recorded rows compare on the same tasks where both exist
        if item["ours"] is not None and item["baseline"] is not None and item["baseline"]["kind"] == "reference":
            assert item["baseline"]["num_tasks"] == item["ours"]["num_tasks"], item["id"]
    assert listed["taylorformer-gp-eq"]["baseline"]["num_tasks"] == listed["taylorformer-gp-eq"]["ours"]["num_tasks"]


def test_recorded_commands_name_no_machine_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inside = str(tmp_path / "runs" / "r.csv")
    assert replication.portable_path(inside) == os.path.join("runs", "r.csv")
    assert replication.portable_path("/elsewhere/r.csv") == "/elsewhere/r.csv"
    assert "--results runs/r.csv" in replication.command_line("cnp-gp-shift-0", "small", results=inside)
    for path in (replication.RECORDED_RESULTS, replication.RECORDED_BASELINES):
        for line in replication.read_results(path, replication.RESULT_COLUMNS if path == replication.RECORDED_RESULTS
                                             else replication.BASELINE_COLUMNS):
            for flag in ("--out", "--results", "--baselines"):
                words = line["command"].split()
                if flag in words:
                    assert not os.path.isabs(words[words.index(flag) + 1]), line["command"]


def test_the_printed_comparison_uses_the_papers_value_per_window():
    """`replicate` prints the gap to the value the status compares with: the exchange
    rate's printed -1.31 is -1.31 x 1518 / 1326 per window."""
    row = replication.get_row("taylorformer-exchange-rate-96-nll")
    record = {"value": -1.8, "stderr": 0.13, "num_tasks": 1327, "budget": "paper", "steps": 40000}
    line = replication.comparison(row, record)
    assert "(std over 5 runs, per window -1.5)" in line and "nll -0.3003: better than the paper" in line
    gp = replication.get_row("taylorformer-gp-eq")  # no rescaling: the printed value itself
    line = replication.comparison(gp, {**record, "value": 4.0, "stderr": 0.01})
    assert "paper 4.13 +- 0.03 (std over" in line and "per window" not in line and "loglik -0.13: worse" in line


def test_status_uses_the_paired_gap_to_the_baseline():
    """Ours 0.01 worse than persistence: inside the two scores' combined error bars, but
    outside the paired one (the difference window by window), which decides where the line
    has it for the baseline shown."""
    row = replication.get_row("taylorformer-exchange-rate-96-nll")
    persistence = {"name": "persistence", "kind": "reference", "value": -1.75, "stderr": 0.07}
    ours = {**_ours(-1.74, 0.1), "paired": {"baseline": "persistence", "gap": 0.01, "stderr": 0.003}}
    assert replication.status(row, {**ours, "paired": None}, persistence)[0] != "below baseline"
    state, why = replication.status(row, ours, persistence)
    assert state == "below baseline" and "ours - persistence = +0.01 +- 0.003" in why
    within = {**ours, "paired": {"baseline": "persistence", "gap": 0.01, "stderr": 0.006}}
    assert replication.status(row, within, persistence)[0] != "below baseline"
    other = {**ours, "paired": {**ours["paired"], "baseline": "seasonal-naive:96"}}  # not the baseline shown
    assert replication.status(row, other, persistence)[0] != "below baseline"
    better = {**ours, "paired": {"baseline": "persistence", "gap": -0.01, "stderr": 0.003}}
    assert replication.status(row, better, persistence)[0] != "below baseline"
    # a line better than the paper but level with persistence says both
    level = {**_ours(-1.80, 0.13), "paired": {"baseline": "persistence", "gap": -0.052, "stderr": 0.062}}
    assert replication.status(row, level, persistence) == (
        "above paper", "better by 0.3; paired window by window ours - persistence = -0.052 +- 0.062")
    assert replication.status(row, {**level, "paired": other["paired"]}, persistence) == ("above paper",
                                                                                         "better by 0.3")


def test_paired_gap_is_ours_minus_the_best_forecast_baseline_window_by_window():
    """A row with persistence and seasonal naive: the pairing takes the better of the two on
    the windows and reports the mean difference with the batch-means error of the differences
    (NumPy: baselines.forecast_values and a loop over blocks)."""
    row = replication.get_row("taylorformer-exchange-rate-96-nll")
    row = dataclasses.replace(row, baselines=("persistence", "seasonal-naive:5"))
    task = make_task(*row.eval_task())
    n = 500
    lag1, lag5 = (baselines.forecast_values(task, "nll", lag=lag, num_tasks=n) for lag in (1, 5))
    best = lag1 if lag1.mean() < lag5.mean() else lag5
    ours = best + np.random.default_rng(0).normal(0.02, 0.1, n)
    paired = replication.paired_with_baselines(row, ours, eval_tasks=n)
    assert paired["paired_baseline"] == ("persistence" if best is lag1 else "seasonal-naive:5")
    gap = ours - best
    assert paired["paired_gap"] == pytest.approx(gap.mean(), rel=1e-12)
    block = baselines.overlap_block(task)
    means = [gap[i * block:(i + 1) * block].mean() for i in range(n // block)]
    assert paired["paired_stderr"] == pytest.approx(np.std(means, ddof=1) / math.sqrt(n // block), rel=1e-9)
    gp = replication.get_row("taylorformer-gp-eq")  # the exact GP is not paired
    assert replication.paired_with_baselines(gp, np.zeros(5), eval_tasks=5) == dict.fromkeys(
        replication.PAIRED_COLUMNS, "")


# ----------------------------------------------------------------------------- the list
def _csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_list_json_agrees_with_the_packaged_csvs(capsys, tmp_path):
    empty = str(tmp_path / "none.csv")  # no user results: the project's recorded ones show
    assert main(["replicate", "--list", "--json", "--results", empty, "--baselines", empty]) == 0
    listed = {item["id"]: item for item in json.loads(capsys.readouterr().out)}
    assert set(listed) == {row.id for row in replication.rows()}
    results, scored = _csv(replication.RECORDED_RESULTS), _csv(replication.RECORDED_BASELINES)
    for row in replication.rows():
        item = listed[row.id]
        for key in ("id", "paper", "table", "dataset", "model", "metric", "higher_is_better", "paper_value",
                    "paper_error", "ours", "baseline", "status"):
            assert key in item
        assert item["status_kind"] in replication.STATUSES
        current = [ln for ln in results if ln["row"] == row.id and int(ln["protocol"]) == row.protocol_version]
        if current:
            ours, line = item["ours"], current[-1]
            for key in ("value", "stderr", "stderr_method", "budget", "steps", "paper_steps", "wall_s"):
                assert key in ours
            assert ours["value"] == float(line["value"]) and ours["steps"] == int(line["steps"])
            stderr = float(line["stderr"])
            assert ours["stderr"] == (stderr if math.isfinite(stderr) else None)
            assert ours["stderr_method"] == line["stderr_method"] and ours["wall_s"] == float(line["wall_s"])
            # iid over overlapping forecasting windows is understated: flagged, never a status's error bar
            assert ours["stderr_understated"] == (replication.overlapping_windows(row)
                                                  and line["stderr_method"].startswith("iid"))
            assert ours["paper_steps"] == row.training.steps and ours["budget"] == line["budget"]
            assert ours["budget_fraction"] == pytest.approx(int(line["steps"]) / row.training.steps)
            # below the paper's budget: never reproduced, and the status names the fraction
            fraction = int(line["steps"]) / row.training.steps
            if fraction < 1:
                assert item["status_kind"] != "reproduced"
                assert item["status"] == f"{item['status_kind']} at {100 * fraction:.2g}% of the budget"
            else:
                assert item["status"] == item["status_kind"]
        else:
            assert item["ours"] is None and item["status"] in ("not run", "not comparable", "not implemented")
        if item["baseline"] is None:
            assert item["baseline_reason"]
        else:
            for key in ("name", "value", "stderr"):
                assert key in item["baseline"]
            line = [ln for ln in scored if ln["row"] == row.id and ln["baseline"] == item["baseline"]["name"]][-1]
            assert item["baseline"]["value"] == float(line["value"])
            stderr = float(line["stderr"])
            assert item["baseline"]["stderr"] == (stderr if math.isfinite(stderr) else None)
            assert int(line["protocol"]) == row.protocol_version and item["baseline"]["name"] in row.baselines
    for horizon in (96, 192, 336, 720):  # moved to the 15-minute ETTm2: nothing recorded on it yet
        item = listed[f"taylorformer-ett-{horizon}-nll"]
        assert item["status"] == "not run" and "ETTh1" in item["status_reason"]


def test_list_table_names_the_results_files(capsys, tmp_path):
    results = str(tmp_path / "mine.csv")
    record = {c: "" for c in replication.RESULT_COLUMNS}
    record.update(row="bsa-tnp-gp2d-shifted", value="-0.1234567", stderr="0.0123", budget="small", steps="1000",
                  protocol=str(replication.get_row("bsa-tnp-gp2d-shifted").protocol_version), stderr_method="iid")
    replication.append_result(results, record)
    # an iid error bar over overlapping forecasting windows (as the project's early lines had)
    record.update(row="tnp-a-exchange-rate-720-nll", value="-1.3506", stderr="0.00036", steps="200",
                  protocol=str(replication.get_row("tnp-a-exchange-rate-720-nll").protocol_version))
    replication.append_result(results, record)
    assert main(["replicate", "--list", "--results", results]) == 0
    out = capsys.readouterr().out
    by_id = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "-0.1235 +- 0.012" in by_id["bsa-tnp-gp2d-shifted"] and " *" not in by_id["bsa-tnp-gp2d-shifted"]
    assert "small (1000 steps, 1% of the paper's)" in by_id["bsa-tnp-gp2d-shifted"]
    assert f"the last line of {results}" in out and replication.RECORDED_RESULTS in out
    assert "not run" in by_id["taylorformer-celeba"] and "4.00 +- 0.02" in by_id["taylorformer-celeba"]
    assert "-1.351 +- 0.00036 (understated)" in by_id["tnp-a-exchange-rate-720-nll"]
    assert "(understated): an iid error bar over overlapping windows" in out


def test_docs_table_is_generated_from_the_packaged_csvs():
    doc = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "docs", "replication.md")
    text = open(doc, encoding="utf-8").read()
    table = text.split(replication.TABLE_BEGIN + "\n", 1)[1].split(replication.TABLE_END, 1)[0]
    listed = replication.list_rows(results=replication.RECORDED_RESULTS,
                                   baselines=replication.RECORDED_BASELINES)
    assert table == replication.markdown_table(listed), \
        "run `python -m taylorformer_replication.replication docs/replication.md`"
    paper_budget = next(line for line in table.splitlines() if "`taylorformer-exchange-rate-96-nll`" in line)
    assert "| 40,000 / 40,000 steps (100%) |" in paper_budget  # the fraction printed plainly, not 1e+02%


# ----------------------------------------------------------------------------- ETTm2 end to end
def test_ett_baselines_score_an_ettm2_fixture_from_the_cli(tmp_path, ettm2_csv, capsys):
    """The ETT rows read ETTm2 (fetched by name on a user's machine); here a fixture in its
    format stands in, through the task config's local path. (Training the ETT rows on the
    fixture: test_replication's end-to-end runs.)"""
    local = {"path": ettm2_csv()}
    results = str(tmp_path / "baselines.csv")
    assert main(["replicate", "taylorformer-ett-96-mse", "--baseline", "--baselines", results,
                 "--task-config", json.dumps(local)]) == 0
    out = capsys.readouterr().out
    assert "baseline persistence mse" in out and f"recorded in {results}" in out
    lines = replication.read_results(results, replication.BASELINE_COLUMNS)
    assert [line["baseline"] for line in lines] == ["persistence", "seasonal-naive:96"]
    task = make_task("ettm2", {**local, "horizon": 96})
    assert float(lines[0]["value"]) == pytest.approx(baselines.forecast_values(task, "mse").mean())
    assert float(lines[1]["value"]) == pytest.approx(baselines.forecast_values(task, "mse", lag=96).mean())
    assert lines[0]["stderr_method"] == ("batch means, blocks of 192 consecutive windows (209 windows: fewer than "
                                         "two blocks, no error bar)")
    assert lines[0]["protocol"] == "2" and "--task-config" in lines[0]["command"]
    listed = {r["id"]: r for r in replication.list_rows(results=str(tmp_path / "none.csv"), baselines=results)}
    assert listed["taylorformer-ett-96-mse"]["baseline"]["name"] == "persistence"  # the better of the two


def test_a_row_without_baselines_says_why(monkeypatch):
    row = dataclasses.replace(replication.get_row("taylorformer-celeba"), baselines=(), no_baseline="none fits")
    monkeypatch.setattr(replication, "get_row", lambda row_id: row)
    with pytest.raises(Exception, match="has no baseline: none fits"):
        replication.score_baselines("taylorformer-celeba", results=None)


def test_a_results_file_of_the_earlier_columns_reads_and_migrates(tmp_path):
    path = tmp_path / "old.csv"
    old = ["r", "small", "2", "loglik", "1.5", "0.1", "2", "1", "", "cpu", "1", "v", "c", "cmd", "d", "o"]
    path.write_text(",".join(replication.LEGACY_RESULT_COLUMNS) + "\n" + ",".join(old) + "\n")
    (line,) = replication.read_results(str(path))
    assert (line["value"], line["stderr_method"], line["protocol"]) == ("1.5", "iid", "1")
    replication.append_result(str(path), {**line, "row": "s", "protocol": "2"})
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == replication.RESULT_COLUMNS and [r["protocol"] for r in rows] == ["1", "2"]
    # the columns before paired gaps: every line reads with none
    previous = replication.LEGACY_RESULT_COLUMNS + ("stderr_method", "protocol")
    path.write_text(",".join(previous) + "\n" + ",".join(old + ["batch means", "2"]) + "\n")
    (line,) = replication.read_results(str(path))
    assert (line["stderr_method"], line["protocol"], line["paired_baseline"], line["paired_gap"]) == (
        "batch means", "2", "", "")


# ----------------------------------------------------------------------------- images
def _image_source(tmp_path, rgb=False):
    """Random 28x28 grey (or 32x32 RGB) uint8 images, every fifth one black (a context of one
    value: the standard deviation floor), as an ``.npz`` image source."""
    rng = np.random.default_rng(3)
    shape = (40, 32, 32, 3) if rgb else (40, 28, 28)
    images = (rng.random(shape) < 0.3) * rng.integers(0, 256, shape)
    images[::5] = 0
    path = tmp_path / ("rgb.npz" if rgb else "grey.npz")
    np.savez(path, images=images.astype(np.uint8), labels=np.arange(40) % 10)
    return {"source": str(path), "transpose": False, "split": [0.5, 0.25, 0.25]}


def _context_mean_loglik(batch, floor):
    """NumPy: per-task log-likelihood per target point of the context-mean Gaussian ``[B]``,
    and whether any task's context standard deviation was below ``floor``."""
    values, floored = [], False
    for i in range(len(batch["xc"])):
        nc, nt = int(batch["mask_c"][i].numpy().sum()), int(batch["mask_t"][i].numpy().sum())
        yc = batch["yc"][i, :nc].numpy().astype(np.float64)          # [Nc, Dy]
        yt = batch["yt"][i, :nt].numpy().astype(np.float64)          # [Nt, Dy]
        mean, std = yc.mean(0), yc.std(0)
        floored |= bool((std < floor).any())
        std = np.maximum(std, floor)
        logpdf = -0.5 * np.log(2 * np.pi * std ** 2) - (yt - mean) ** 2 / (2 * std ** 2)
        values.append(logpdf.sum(-1).mean())
    return np.array(values), floored


@pytest.mark.parametrize("row_id", ["te-pt-tnp-t-mnist", "taylorformer-celeba"])
def test_context_mean_matches_a_numpy_loop_over_tasks(row_id, tmp_path):
    """The context-mean Gaussian, scored by the models' metric function on the row's
    evaluation batches, against a per-task, per-channel NumPy computation; its floor is the
    candidate that scores best on the validation tasks (NumPy too), not on the test."""
    row = replication.get_row(row_id)
    local = _image_source(tmp_path, rgb=row.task == "celeba")
    values, block = replication.baseline_values(row, "context-mean", eval_tasks=6, task_config=local)
    assert block == 1 and values.shape == (6,)
    name, config = row.eval_task()
    task = make_task(name, {**config, **local})
    size = row.evaluation.batch_size
    val = list(task.dataset("val", batch_size=size, num_batches=math.ceil(64 / size)))
    fit = [np.concatenate([_context_mean_loglik(b, f)[0] for b in val])[:64].mean()
           for f in baselines.CONTEXT_MEAN_FLOORS]
    floor = baselines.CONTEXT_MEAN_FLOORS[int(np.argmax(fit))]
    batch = next(iter(task.dataset("test", batch_size=6, num_batches=1)))
    expected, floored = _context_mean_loglik(batch, floor)
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-5)
    assert floored  # the black images exercise the floor
    expected, _ = _context_mean_loglik(batch, 0.003)  # a floor given: no fit
    values, _ = replication._task_values(baselines.ContextMean(0.003), task, "loglik", "test", 6, 6)
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-5)


def test_context_mean_scores_from_the_cli_and_shows_in_the_list(tmp_path, capsys):
    local = _image_source(tmp_path)
    results = str(tmp_path / "baselines.csv")
    assert main(["replicate", "te-pt-tnp-t-mnist", "--baseline", "--baselines", results, "--eval-tasks", "5",
                 "--task-config", json.dumps(local)]) == 0
    assert "baseline context-mean loglik" in capsys.readouterr().out
    (line,) = replication.read_results(results, replication.BASELINE_COLUMNS)
    assert (line["baseline"], line["metric"], line["num_tasks"], line["stderr_method"]) == (
        "context-mean", "loglik", "5", "iid")
    listed = {r["id"]: r for r in replication.list_rows(results=str(tmp_path / "none.csv"), baselines=results)}
    assert listed["te-pt-tnp-t-mnist"]["baseline"]["value"] == float(line["value"])
    for row_id in ("taylorformer-emnist-seen", "taylorformer-celeba"):  # not scored: a reason, no value
        assert listed[row_id]["baseline"] is None
        assert "context-mean not scored here" in listed[row_id]["baseline_reason"]
    with pytest.raises(ValueError, match="floor must be a positive number"):
        baselines.ContextMean(floor=0.0)
