"""Replication rows (taylorformer_replication: its runner, the papers' rows, `taylorformer replicate`).

The protocol tests hard-code the papers' numbers as read from the papers' text (not from
the row definitions) and check the tasks' batches against them. The end-to-end tests run
every row for 5 steps on a few evaluation tasks (the rows themselves are unchanged) and
check the recorded value against an independent evaluation path
(:func:`taylorformer.workflow.runs.evaluate_run`).
"""
import csv
import json
import math
import os
import sys

import numpy as np
import pytest

from taylorformer import registry
from taylorformer.cli import main
from taylorformer.errors import PluginLoadError, RunDirectoryError, SpecError
from taylorformer.task import make_task
from taylorformer.workflow import baselines, runs
from taylorformer_replication import Evaluation, Row, SmallBudget, Training, authors_code, register_rows, replication

# ----------------------------------------------------------------------------- the papers
#: Taylorformer Table 1 (log-lik, +- std over 5 runs), Table 4 (NLL), Table 2 (MSE)
TAYLORFORMER_TABLE1 = {"gp-eq": (4.13, 0.03), "gp-matern52": (3.87, 0.05), "gp-periodic": (0.31, 0.02),
                       "emnist-seen": (2.18, 0.01), "emnist-unseen": (1.90, 0.03), "celeba": (4.00, 0.02)}
TAYLORFORMER_NLL = {"ett": (-2.69, -2.68, -2.64, -2.56), "exchange-rate": (-1.31, -1.21, -1.05, -0.68)}
TAYLORFORMER_MSE = {"ett": (0.00030, 0.00029, 0.00030, 0.00029), "exchange-rate": (0.002, 0.002, 0.002, 0.001)}
HORIZONS = (96, 192, 336, 720)
#: TE-TNP Table 5 (signs restored; Delta = 0, 0.2, ..., 1) of the models the library has, and
#: Table 1's TE-PT-TNP columns (T-MNIST, T-CIFAR10)
TE_TNP_SHIFTS = ("0", "0.2", "0.4", "0.6", "0.8", "1")
TE_TNP_TABLE5 = {"tnp-d": (-0.48, -0.48, -0.49, -0.50, -0.52, -0.57),
                 "cnp": (-0.69, -0.71, -0.77, -0.86, -0.98, -1.08),
                 "te-tnp": (-0.47,) * 6, "te-pt-tnp-m8": (-0.50,) * 6, "te-pt-tnp-m16": (-0.50,) * 6,
                 "te-pt-tnp-m32": (-0.46,) * 6}
TE_TNP_TABLE1 = {"te-pt-tnp-m64-t-mnist": 1.18, "te-pt-tnp-t-mnist": 1.25, "te-pt-tnp-m64-t-cifar10": 1.50,
                 "te-pt-tnp-t-cifar10": 1.51}
#: BSA-TNP Table 1 (2-D GP NLL) and Table 3 (SIR NLL): train, shifted, scaled
BSA_GP = {"train": -0.32, "shifted": -0.32, "scaled": -0.28}
BSA_SIR = {"train": 0.19, "shifted": 0.19, "scaled": 0.17}
#: BSA-TNP Table 2 (multiresolution), Table 6 (Beijing), Table 8 (generic spatial): NLL by model;
#: Table 7 (sphere): NLL by bias variant, unrotated / rotated (60, 30, 0) / rotated (60, 30, 20)
BSA_MULTIRES = {"bsa-tnp": -0.23, "te-pt-tnp": 0.12}
BSA_BEIJING = {"tnp-d": -1.38, "te-pt-tnp": -1.59, "bsa-tnp": -1.68}
BSA_GENERIC = {"tnp-d": 1.64, "te-pt-tnp": 1.64, "bsa-tnp": 1.54}
BSA_SPHERE = {"rbf": (-0.01, 0.05, 0.08), "geodesic": (-0.01, -0.01, -0.01), "embed": (-0.01, 6.56, 13.34)}


def test_every_issue_row_is_registered_with_the_papers_value():
    rows = {r.id: r for r in replication.rows()}
    for key, (value, error) in TAYLORFORMER_TABLE1.items():
        row = rows[f"taylorformer-{key}"]
        assert (row.metric, row.paper_value, row.paper_error, row.table) == ("loglik", value, error, "Table 1")
        assert row.higher_is_better and row.paper_error_kind == "std over 5 runs"
    for dataset in ("ett", "exchange-rate"):
        for h, nll, mse in zip(HORIZONS, TAYLORFORMER_NLL[dataset], TAYLORFORMER_MSE[dataset]):
            assert rows[f"taylorformer-{dataset}-{h}-nll"].paper_value == nll
            assert rows[f"taylorformer-{dataset}-{h}-mse"].paper_value == mse
            assert not rows[f"taylorformer-{dataset}-{h}-mse"].higher_is_better
    for model, values in TE_TNP_TABLE5.items():
        for shift, value in zip(TE_TNP_SHIFTS, values):
            row = rows[f"{model}-gp-shift-{shift}"]
            assert (row.model, row.paper_value, row.evaluation.task_config) == (
                model.split("-m")[0], value, {"shift": float(shift)})
            assert row.run_name == f"{model}-gp-te-tnp" and row.baselines == ("exact-gp",)
            if model.startswith("te-pt-tnp"):
                assert row.model_spec()["encoder"]["num_pseudo"] == int(model.rsplit("-m", 1)[1])
    assert replication.get_row("cnp-gp-shift-0").model_spec()["encoder"]["layers"] == 5  # App. F.1
    for row_id, value in TE_TNP_TABLE1.items():
        row = rows[row_id]
        assert (row.paper_value, row.model, row.metric, row.table) == (value, "te-pt-tnp", "loglik", "Table 1")
        assert row.model_spec()["encoder"]["num_pseudo"] == (64 if "-m64-" in row_id else 128)
        assert row.baselines == ("context-mean",) and not row.no_baseline
    for domain in BSA_GP:
        gp, sir = rows[f"bsa-tnp-gp2d-{domain}"], rows[f"bsa-tnp-sir-{domain}"]
        assert (gp.metric, gp.paper_value, sir.paper_value) == ("nll", BSA_GP[domain], BSA_SIR[domain])
        assert gp.evaluation.task_config == sir.evaluation.task_config == {"domain": domain}
        assert gp.task_config == sir.task_config == {"domain": "train"}  # trained on [-2, 2]^2
    for row in rows.values():
        assert registry.entry("experiment", row.id).description == row.summary
        assert row.not_implemented or (row.notes and row.small.steps < row.training.steps)


def test_bsa_tnp_tables_2_6_7_8_are_registered_with_the_papers_values():
    rows = {r.id: r for r in replication.rows()}
    for model, value in BSA_MULTIRES.items():
        row = rows[f"{model}-gp2d-multires"]
        assert (row.table, row.metric, row.paper_value, row.baselines) == ("Table 2", "nll", value, ("exact-gp",))
        task = make_task(*row.eval_task())
        assert (task.domain, task.multires_targets, tuple(task.num_context), tuple(task.num_target)) == (
            "multires", "pool", (64, 127), (128, 128))
        assert (row.training.steps, row.training.batch_size, row.evaluation.num_tasks) == (100_000, 32, 160_000)
    for model, value in BSA_BEIJING.items():
        row = rows[f"{model}-beijing-air"]
        assert (row.table, row.model, row.paper_value, row.task) == ("Table 6", model, value, "beijing-air")
        assert row.paper_scale == 0.5 and row.paper_comparable[0] == pytest.approx(2 * value)  # 2 outputs
        assert row.task_config.get("groups_in_x", False) == (model != "bsa-tnp")
        t = row.training
        assert (t.steps, t.batch_size, t.learning_rate, t.min_learning_rate, t.val_every, t.val_batches) == (
            10_000, 32, 1e-3, 1e-5, 500, 500)
        assert row.baselines == ("context-mean",)
    for model, value in BSA_GENERIC.items():
        row = rows[f"{model}-generic-spatial"]
        assert (row.table, row.model, row.paper_value, row.baselines) == ("Table 8", model, value, ("exact-gp",))
        assert row.task_config["noise_std_scale"] == 0.1 and row.model_spec()["likelihood"]["min_scale"] == 0.05
    for variant, values in BSA_SPHERE.items():
        for rotation, angles, value in zip(("none", "rot-60-30-0", "rot-60-30-20"),
                                           (None, [-60.0, 30.0, 0.0], [-60.0, 30.0, 20.0]), values):
            row = rows[f"bsa-tnp-sphere-{variant}-{rotation}"]
            assert (row.table, row.paper_value, row.run_name) == ("Table 7", value, f"bsa-tnp-sphere-{variant}")
            assert row.task_config == {} and row.eval_task()[1].get("rotation") == angles
    new = [r for r in rows.values() if r.table in ("Table 2", "Table 6", "Table 7", "Table 8")
           and r.paper.startswith("BSA-TNP") and not r.not_implemented]
    assert len(new) == 17 and all(r.metric == "nll" for r in new)
    # TNP-D at the BSA-TNP paper's size (App. A: about 477K parameters)
    from taylorformer.models import build_model

    spec = rows["tnp-d-generic-spatial"].model_spec()
    assert 440_000 < build_model(spec, dim_x=12, dim_y=1).count_params() < 500_000
    # the sphere variants build and score a small sphere batch (one layer)
    from taylorformer.models.inference import loglik
    from taylorformer.spec import deep_merge

    task = make_task("sphere-gp", {"num_context": [8, 16], "num_target": 8})
    batch = next(iter(task.dataset("test", batch_size=2, num_batches=1)))
    for variant in BSA_SPHERE:
        spec = deep_merge(rows[f"bsa-tnp-sphere-{variant}-none"].model_spec(), SMOKE)
        assert np.isfinite(loglik(build_model(spec, dim_x=2, dim_y=1), batch).numpy()).all()


def test_beijing_rows_run_on_uci_format_files_with_a_block_error_bar(station_configs, tmp_path):
    """The UCI archive is not downloadable here: a row runs end to end on synthetic files in
    its format (TNP-D with every input in x), and its baseline scores the same windows; both
    error bars are batch means over blocks of overlapping windows."""
    local = station_configs["beijing-air"]
    record = replication.replicate("tnp-d-beijing-air", budget=1, out=str(tmp_path / "run"), results=None,
                                   eval_tasks=None, task_config=local, verbose=0, batch_size=2,
                                   model_overrides=SMOKE, jit_compile=False)
    task = make_task("beijing-air", {"groups_in_x": True, **local})
    windows = len(task.window_starts("test"))
    assert record["num_tasks"] == windows and math.isfinite(record["value"])
    # (18 + 6) / 3; the fixture's few windows hold fewer than two blocks, which the label says
    assert record["stderr_method"].startswith("batch means, blocks of 8 consecutive windows")
    (line,) = replication.score_baselines("bsa-tnp-beijing-air", results=str(tmp_path / "b.csv"),
                                          task_config=local, verbose=0)
    from taylorformer.workflow.baselines import CONTEXT_MEAN_FLOORS, ContextMean

    task = make_task("beijing-air", local)  # the floor: the best on the validation windows
    fit = [replication.task_values(ContextMean(f), task, "nll", "val", 32, 64).mean() for f in CONTEXT_MEAN_FLOORS]
    direct = replication.task_values(ContextMean(CONTEXT_MEAN_FLOORS[int(np.argmin(fit))]), task, "nll", "test", 32)
    assert line["value"] == pytest.approx(direct.mean(), rel=1e-6) and line["num_tasks"] == windows
    assert line["baseline"] == "context-mean" and line["stderr_method"].startswith("batch means")


def _batch(row, split="test", batch_size=64, **config):
    name, cfg = row.eval_task() if split == "test" else (row.task, row.task_config)
    task = make_task(name, {**cfg, **config})
    return task, next(iter(task.dataset(split, batch_size=batch_size, num_batches=1)))


def _counts(batch):
    return batch["mask_c"].numpy().sum(1), batch["mask_t"].numpy().sum(1)


def test_taylorformer_gp_protocol_app_a1():
    """x ~ U[-2, 2], Nc ~ U(3, 97), Nt = 100 - Nc; RBF s ~ U(0.1, 1), l ~ U(0.1, 0.6); Matern-5/2
    l ~ U(0.3, 1); periodic l ~ U(0.1, 0.6), p ~ U(0.5, 1); 250K steps of 32, Adam 1e-4;
    10,000 test sequences."""
    priors = {"eq": {"gp_lengthscale": (0.1, 0.6), "gp_scale": (0.1, 1.0)},
              "matern52": {"gp_lengthscale": (0.3, 1.0)},
              "periodic": {"gp_lengthscale": (0.1, 0.6), "gp_period": (0.5, 1.0)}}
    for kernel, bounds in priors.items():
        row = replication.get_row(f"taylorformer-gp-{kernel}")
        t = row.training
        assert (t.steps, t.batch_size, t.optimizer, t.learning_rate, t.weight_decay) == (250_000, 32, "adam", 1e-4, 0)
        assert t.num_permutations == 1 and row.evaluation.num_tasks == 10_000
        _, batch = _batch(row, batch_size=256)
        nc, nt = _counts(batch)
        assert (nc + nt == 100).all() and nc.min() >= 3 and nc.max() <= 97
        for key in ("xc", "xt"):
            assert np.abs(batch[key].numpy()).max() <= 2.0
        for key, (lo, hi) in bounds.items():
            values = batch[key].numpy()
            assert lo <= values.min() and values.max() <= hi and values.std() > 0.05 * (hi - lo)


def test_te_tnp_gp_protocol_app_f1():
    """Three kernels, Nc ~ U(1, 64), Nt = 128, xc ~ U[-2, 2], xt ~ U[-3, 3], noise 0.2, test
    inputs shifted by Delta; AdamW 5e-4, batch 16; 80,000 test datasets."""
    from taylorformer.tasks.gaussian_process import KERNELS

    for model in ("te-tnp", "tnp-d"):
        for shift in (0, 1):
            row = replication.get_row(f"{model}-gp-shift-{shift}")
            t = row.training
            assert (t.optimizer, t.learning_rate, t.batch_size, t.clip_norm) == ("adamw", 5e-4, 16, 0.5)
            assert row.evaluation.num_tasks == 80_000 and row.eval_task() == replication.get_row(
                f"te-tnp-gp-shift-{shift}").eval_task()
    for shift in (0, 1):
        task, batch = _batch(replication.get_row(f"te-tnp-gp-shift-{shift}"), batch_size=24)
        assert task.noise == 0.2
        nc, nt = _counts(batch)
        assert nc.min() >= 1 and nc.max() <= 64 and (nt == 128).all()
        mask_c = batch["mask_c"].numpy().astype(bool)
        xc, xt = batch["xc"].numpy()[mask_c], batch["xt"].numpy()
        assert xc.min() >= -2 + shift and xc.max() <= 2 + shift
        assert xt.min() >= -3 + shift and xt.max() <= 3 + shift and xt.max() > 2.5 + shift
        kernels = {KERNELS[int(i)] for i in batch["gp_kernel"].numpy()}
        assert kernels == {"eq", "periodic", "matern52"}


def test_bsa_tnp_protocol_sec_5_and_app_b():
    """2-D GP: l ~ Beta(3, 7), noise 0.1 on the context, Nc in [128, 512], 1,024 test points,
    batch 8, 100K steps, AdamW wd 1e-4, clip 0.5, cosine 1e-4 -> 2e-5 (SIR: -> 1e-5); shifted
    [8, 12]^2, scaled: doubled axes."""
    boxes = {"train": (-2, 2), "shifted": (8, 12), "scaled": (-4, 4)}
    for domain, (lo, hi) in boxes.items():
        row = replication.get_row(f"bsa-tnp-gp2d-{domain}")
        t = row.training
        assert (t.steps, t.batch_size, t.optimizer, t.weight_decay, t.clip_norm) == (100_000, 8, "adamw", 1e-4, 0.5)
        assert (t.schedule, t.learning_rate, t.min_learning_rate) == ("cosine", 1e-4, 2e-5)
        assert row.evaluation.num_tasks == 5_000 * 8
        name, config = row.eval_task()
        task = make_task(name, config)  # the domains through the task's boxes and counts (a scaled
        factor = 4 if domain == "scaled" else 1  # batch takes minutes): the same density, doubled axes
        assert task.noise == 0.1 and task.noise_on == "context"
        assert tuple(task.num_context) == (128 * factor, 511 * factor)
        assert tuple(task.num_target) == (1024 * factor, 1024 * factor)
        np.testing.assert_array_equal(task.context_box, [[lo, hi]] * 2)
        np.testing.assert_array_equal(task.target_box, [[lo, hi]] * 2)
        sir_row = replication.get_row(f"bsa-tnp-sir-{domain}")
        assert (sir_row.training.min_learning_rate, sir_row.training.steps) == (1e-5, 100_000)
        assert sir_row.model_spec()["likelihood"] == {"name": "categorical", "classes": 3}
        sir = make_task(*sir_row.eval_task())
        assert (sir.lo, sir.hi, sir.cells) == (lo, hi, 64 * (2 if domain == "scaled" else 1))
        assert sir.nc_range == (128 * factor, 512 * factor) and sir.extra_range == (1024 * factor,) * 2
    row = replication.get_row("bsa-tnp-gp2d-train")
    task, batch = _batch(row, batch_size=2)
    nc, nt = _counts(batch)
    assert 128 <= nc.min() and nc.max() <= 511 and (nt == 1024).all()
    assert batch["xc"].numpy().min() >= -2 and batch["xt"].numpy().max() <= 2
    few_points = {"num_context": [1, 1], "num_target": 1}
    lengthscales = _batch(row, split="train", batch_size=2000, **few_points)[1]["gp_lengthscale"].numpy()
    assert abs(lengthscales.mean() - 0.3) < 0.01 and abs(lengthscales.var() - 0.21 / 11) < 0.002  # Beta(3, 7)
    _, batch = _batch(replication.get_row("bsa-tnp-sir-train"), batch_size=1)
    nc, nt = _counts(batch)
    assert 128 <= nc[0] <= 512 and nt[0] - nc[0] == 1024  # the context among the test cells
    np.testing.assert_array_equal(batch["xt"].numpy()[0, :int(nc[0])], batch["xc"].numpy()[0, :int(nc[0])])


@pytest.mark.parametrize("dataset", ["ett", "exchange-rate"])
def test_forecasting_protocol_sec_4_2(dataset, ettm2_csv):
    """Context 96, horizons 96/192/336/720, split 69/11/20 (ETT, exchange), 40K steps of 32
    (16 above horizon 700, as the authors' code); ETT is the 15-minute ETTm2 (a fixture in
    its format stands in for the file here)."""
    for h in HORIZONS:
        for metric in ("nll", "mse"):
            row = replication.get_row(f"taylorformer-{dataset}-{h}-{metric}")
            batch_size = 16 if h == 720 else 32
            assert (row.training.steps, row.training.batch_size, row.training.optimizer) == (40_000, batch_size, "adam")
            assert row.run_name == f"taylorformer-{dataset}-{h}"  # NLL and MSE: one training run
            assert row.task == ("ettm2" if dataset == "ett" else dataset)
    local = {"path": ettm2_csv(rows=3_000)} if dataset == "ett" else {}
    task, batch = _batch(replication.get_row(f"taylorformer-{dataset}-192-nll"), batch_size=2, **local)
    assert batch["xc"].shape[1] == 96 and batch["xt"].shape[1] == 192
    n = len(task.series()["y"])
    starts = task.window_starts("test")
    assert starts[0] == math.floor(0.8 * n + 1e-9) and starts[-1] == n - 96 - 192  # every test window
    x = np.concatenate([batch["xc"].numpy()[0, :, 0], batch["xt"].numpy()[0, :, 0]])
    np.testing.assert_allclose(x, np.linspace(-1, 1, 96 + 192), atol=1e-6)


def test_image_protocols_taylorformer_a2_and_te_tnp_f2():
    """Taylorformer: Nc ~ U(6, 200), Nt ~ U(3, 197), EMNIST digits 0-9 (unseen: 10-46), 71K /
    125K steps of 64. TE-TNP T-MNIST: 56x56 canvas (shift 14), Nc ~ U(N/3), the rest targets,
    batch 8 for the TE-PT-TNP."""
    preset = {name: registry.get("task", name).keywords for name in ("emnist", "emnist-unseen", "celeba", "t-mnist")}
    assert preset["emnist"]["classes"] == list(range(10))
    assert preset["emnist-unseen"]["test_classes"] == list(range(10, 47))
    for name in ("emnist", "celeba"):
        assert (preset[name]["num_context"], preset[name]["num_target"]) == ([6, 200], [3, 197])
    seen, unseen = replication.get_row("taylorformer-emnist-seen"), replication.get_row("taylorformer-emnist-unseen")
    assert (seen.training.steps, seen.training.batch_size, unseen.evaluation.task) == (71_000, 64, "emnist-unseen")
    assert seen.run_name == unseen.run_name
    assert replication.get_row("taylorformer-celeba").training.steps == 125_000
    t_mnist = replication.get_row("te-pt-tnp-t-mnist")
    assert preset["t-mnist"]["max_shift"] == 14 and preset["t-mnist"]["num_target"] == "rest"
    assert preset["t-mnist"]["context_fraction"] == [0.0, 1.0 / 3.0]
    assert (t_mnist.training.batch_size, t_mnist.training.learning_rate) == (8, 5e-4)
    assert t_mnist.model_spec()["encoder"]["num_pseudo"] == 128 and t_mnist.model_spec()["encoder"]["width"] == 32


# ----------------------------------------------------------------------------- rows and budgets
def _row(**changes):
    fields = dict(id="my-row", paper="P", table="T", dataset="d", protocol="p", model="cnp", task="gp",
                  metric="loglik", paper_value=1.0,
                  training=Training(steps=100, batch_size=4, optimizer="adam", learning_rate=1e-3),
                  evaluation=Evaluation(num_tasks=8), small=SmallBudget(steps=10, eval_tasks=8), notes=("n",))
    return Row(**{**fields, **changes})


@pytest.mark.parametrize("changes, match", [
    ({"metric": "rmse"}, r"experiment 'my-row' 'metric' must be one of 'loglik', 'nll', 'mse', got 'rmse'"),
    ({"id": "My Row"}, r"'id' must be a non-empty lower-case name"),
    ({"paper_value": float("nan")}, r"'paper_value' must be a finite number"),
    ({"small": SmallBudget(steps=1000, eval_tasks=8)}, r"small budget's 1000 steps exceed the paper's 100"),
    ({"notes": "one"}, r"'notes' must be a tuple of strings"),
    ({"training": {"steps": 5}}, r"'training' must be a Training"),
])
def test_bad_rows_name_the_field(changes, match):
    with pytest.raises(SpecError, match=match):
        _row(**changes)


def test_bad_training_protocols_name_the_field():
    with pytest.raises(SpecError, match=r"'weight_decay' must be 0 with optimizer 'adam'"):
        Training(steps=10, batch_size=2, optimizer="adam", learning_rate=1e-3, weight_decay=0.1)
    with pytest.raises(SpecError, match=r"'min_learning_rate' must be a finite number >= 0, got None"):
        Training(steps=10, batch_size=2, optimizer="adamw", learning_rate=1e-3, schedule="cosine")
    with pytest.raises(SpecError, match=r"'optimizer' must be one of 'adam', 'adamw', got 'sgd'"):
        Training(steps=10, batch_size=2, optimizer="sgd", learning_rate=1e-3)


def test_budgets_and_the_train_options_they_give():
    row = replication.get_row("bsa-tnp-gp2d-train")
    assert replication.budget_steps(row, "paper") == ("paper", 100_000)
    assert replication.budget_steps(row, "small") == ("small", row.small.steps)
    assert replication.budget_steps(row, "250") == ("250-steps", 250)
    for bad in (0, "-3", "big", True, 2.5):
        with pytest.raises(SpecError, match=r"'budget' must be 'paper', 'small' or a number of steps"):
            replication.budget_steps(row, bad)
    paper = replication.train_options(row, 100_000, paper_budget=True)
    assert (paper["val_every"], paper["val_batches"], paper["min_learning_rate"]) == (10_000, 5_000, 2e-5)
    small = replication.train_options(row, 1_000, paper_budget=False)
    assert (small["val_every"], small["val_batches"], small["tensorboard"]) == (250, 8, False)
    assert replication.train_options(row, 5, paper_budget=False)["val_every"] == 5  # one validation


def test_a_third_party_plugin_adds_rows_and_a_wrong_object_is_refused():
    from taylorformer.registry import Registry

    row = _row(id="third-party-row")
    module = type(sys)("third_party_rows")
    module.register_experiments = registry.hookspecs.hookimpl(
        lambda register: register_rows(register, [row]))
    reg = Registry(strict=True, blocked=())
    reg.add_plugin(module, "third-party")
    assert reg.get("experiment", "third-party-row") is row
    bad = type(sys)("bad_rows")
    bad.register_experiments = registry.hookspecs.hookimpl(lambda register: register("x", {"steps": 1}))
    with pytest.raises(PluginLoadError, match=r"an experiment must be a taylorformer.plugin_api.ExperimentRecord"):
        reg.add_plugin(bad, "bad")


# ----------------------------------------------------------------------------- results file
def test_results_file_appends_atomically_and_refuses_another_csv(tmp_path):
    path = tmp_path / "sub" / "results.csv"
    records = [{c: str(i) if c in replication.NUMERIC_COLUMNS else f"{c}-{i}" for c in replication.RESULT_COLUMNS}
               for i in range(2)]
    records[0]["command"] = 'taylorformer replicate x --task-config \'{"a": "b,c"}\''
    for record in records:
        replication.append_result(str(path), record)
    with open(path, newline="") as fh:
        assert list(csv.DictReader(fh)) == records
    assert replication.last_results(str(path))["row-1"] == records[1]
    assert [p.name for p in path.parent.iterdir()] == ["results.csv"]  # no temporary file left
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(RunDirectoryError, match=r"other.csv has columns \['a', 'b'\], not the replication"):
        replication.append_result(str(other), records[0])
    assert other.read_text() == "a,b\n1,2\n"


# ----------------------------------------------------------------------------- end to end
def _image_sources(tmp_path):
    """Offline stand-ins of the image datasets: scikit-learn's real 8x8 digits, enlarged to
    28x28 (grey) and 32x32 (RGB), labels spread over the 47 EMNIST classes."""
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    images = (digits.images[:120] * (255 / 16)).astype(np.uint8)
    grey = np.pad(np.kron(images, np.ones((3, 3), np.uint8)), ((0, 0), (2, 2), (2, 2)))
    rgb = np.stack([np.kron(images, np.ones((4, 4), np.uint8))] * 3, -1)
    rgb[..., 1] //= 2
    labels = np.arange(120) % 47
    np.savez(tmp_path / "grey.npz", images=grey, labels=labels)
    np.savez(tmp_path / "rgb.npz", images=rgb)
    local = {"transpose": False, "split": [0.6, 0.2, 0.2]}
    return {"emnist": {"source": str(tmp_path / "grey.npz"), **local},
            "celeba": {"source": str(tmp_path / "rgb.npz"), **local},
            "t-mnist": {"source": str(tmp_path / "grey.npz"), **local},
            "t-cifar10": {"source": str(tmp_path / "rgb.npz"), **local}}


def _runs():
    """Rows that can run here grouped by training run (in id order)."""
    groups = {}
    for row in replication.rows():
        if not replication.implementation_gap(row):
            groups.setdefault(row.run_name, []).append(row)
    return groups


#: the smoke test's departures from the papers' sizes (each row's sizes are checked against
#: its paper above): one layer, batch 2, no XLA compile, so every run fits CI time
SMOKE = {"encoder": {"layers": 1}}
#: the smoke test's overrides of the models whose encoders have no ``layers`` (their presets as they are)
MODEL_SMOKE = {"np": {}, "anp": {}, "convcnp": {}}


#: the runs of the papers' other columns (Taylorformer Table 1's NP and ANP, the ConvCNP columns,
#: TE-TNP Table 1's CNP): each model runs end to end in its own tests (tests/np, tests/convcnp,
#: test_fit) and each task in the runs above, so in CI they add time and no code path
NEW_COLUMN_RUNS = {"anp-celeba", "anp-emnist", "anp-gp-eq", "np-celeba", "np-emnist", "np-gp-eq", "cnp-t-mnist",
                   "cnp-t-cifar10", "convcnp-gp-te-tnp", "convcnp-t-mnist", "convcnp-t-cifar10"}
#: runs marked ``long`` although their model and task pair is new: the Taylorformer paper's
#: electricity rows run end to end in tests/tasks/test_uci_electricity.py, and its Table 1 TNP
#: image rows combine a model (tnp-a, in the forecasting runs) and tasks (in the Taylorformer's
#: image runs) that run here already; so do the TE-PT-TNP's GP run (its model runs on T-MNIST
#: and T-CIFAR10, its task in the TE-TNP's run), TNP-A's exchange-rate, ETT and GP runs (the
#: model trains, samples and evaluates end to end in test_sampled_headline.py, the tasks in
#: the Taylorformer's runs), the CNP's (the model in test_fit and
#: test_training, the task in the TE-TNP's run) and BSA-TNP's generic-spatial run (the model in
#: its 2-D GP run, the task's options in test_spatial_tasks); Beijing runs end to end in
#: test_beijing_rows_run_on_uci_format_files_with_a_block_error_bar
#: (CI time) so are BSA-TNP's 2-D GP run (the model runs end to end in its SIR run, its task
#: in test_bsa and test_spatial_tasks), the TE-PT-TNP's T-CIFAR10 run (its T-MNIST run is the
#: same code on other images) and the Taylorformer's EMNIST run (its other image runs)
LONG_RUNS = {"taylorformer-electricity-192", "tnp-a-electricity-192", "tnp-a-emnist", "tnp-a-celeba",
             "te-pt-tnp-m16-gp-te-tnp", "tnp-a-exchange-rate-192", "tnp-a-ett-192", "tnp-a-gp-eq", "cnp-gp-te-tnp",
             "bsa-tnp-generic-spatial", "bsa-tnp-beijing-air", "bsa-tnp-gp2d", "te-pt-tnp-m64-t-cifar10",
             "taylorformer-emnist"} | NEW_COLUMN_RUNS


def _run_params():
    """One parameter per training run; a run with the model and task of an earlier one (other
    horizons or kernels: the same code with other numbers) or of :data:`LONG_RUNS` is marked
    ``long``, which the tox envs deselect to keep CI in time (``pytest -m long`` runs them). So
    is a BSA-TNP paper run of a task an earlier one ran (Tables 2, 6, 7 and 8 add many
    model-task pairs; the Beijing runs of TNP-D and PT-TE-TNP take every input in x, a path
    test_beijing_rows_run_on_uci_format_files_with_a_block_error_bar covers) and the sphere
    runs (1-2 min each here; their variants are built and scored in
    test_bsa_tnp_tables_2_6_7_8_are_registered_with_the_papers_values). A run of more than
    three rows (one model evaluated at six shifts) evaluates its first and last row; a
    second, ``long`` parameter (``RUN:every-row``) evaluates every row."""
    seen, tasks, params = set(), set(), []
    for run in sorted(_runs()):
        rows = _runs()[run]
        first = rows[0]
        key = (first.model, first.task)
        bsa = first.paper.startswith("BSA-TNP") and (first.task in tasks or first.task == "sphere-gp")
        long_run = key in seen or run in LONG_RUNS or bsa
        params.append(pytest.param(run, marks=pytest.mark.long) if long_run else run)
        if len(rows) > 3:
            params.append(pytest.param(f"{run}:every-row", marks=pytest.mark.long))
        seen.add(key)
        tasks.add(first.task)
    return params


#: smaller tasks for the smoke test where a row's full-size batch would take minutes on CI
SMOKE_TASKS = {"sphere-gp": {"num_context": [16, 32], "num_target": 64}}


@pytest.mark.slow
@pytest.mark.parametrize("run", _run_params())
def test_every_row_replicates_end_to_end_at_5_steps(run, tmp_path, ettm2_csv, uci_electricity_txt, station_configs):
    run, every_row = run.split(":")[0], run.endswith(":every-row")
    rows = _runs()[run]
    rows = rows if every_row or len(rows) <= 3 else [rows[0], rows[-1]]
    images = ("emnist", "celeba", "t-mnist", "t-cifar10")
    local = _image_sources(tmp_path).get(rows[0].task) if rows[0].task in images else None
    if rows[0].task == "ettm2":  # ETTm2 is not offline: a fixture in its format
        local = {"path": ettm2_csv(rows=8_000)}  # every horizon: the 11% validation rows hold a window
    if rows[0].task == "uci-electricity":  # nor is the UCI file: 320 days in its format (every horizon)
        local = {"path": uci_electricity_txt(days=320)[0], "start": "2014-01-01", "end": "2014-11-17"}
    if rows[0].task == "beijing-air":  # nor the UCI archive: synthetic files in its format
        local = station_configs["beijing-air"]
    local = SMOKE_TASKS.get(rows[0].task, local)
    out, results = str(tmp_path / "run"), str(tmp_path / "results.csv")
    smoke = MODEL_SMOKE.get(rows[0].model, SMOKE)
    for row in rows:  # the first row trains, the others of its run only evaluate
        record = replication.replicate(row.id, budget=5, out=out, results=results, eval_tasks=2,
                                       task_config=local, verbose=0, batch_size=2, model_overrides=smoke or None,
                                       jit_compile=False)
        assert (record["row"], record["steps"], record["metric"], record["num_tasks"]) == (row.id, 5, row.metric, 2)
        # overlapping forecasting windows: 2 tasks are fewer than two blocks, no error bar (NaN)
        assert math.isfinite(record["value"]) and not record["stderr"] <= 0
        assert record["paper_value"] == row.paper_value and record["out_dir"] == out
        assert record["command"].startswith(f"taylorformer replicate {row.id} --budget 5 --out ")
        assert "--batch-size 2" in record["command"]
        assert (f"--model-overrides '{json.dumps(smoke)}'" in record["command"]) == bool(smoke)
    config = runs.RunDirectory(out).read_config()
    assert config["train"]["batch_size"] == 2
    assert not smoke or json.loads(open(os.path.join(out, "spec.json")).read())["encoder"]["layers"] == 1
    lines = replication.read_results(results)
    assert [line["row"] for line in lines] == [row.id for row in rows]
    assert all(line["steps"] == "5" and float(line["wall_s"]) >= 0 for line in lines)
    steps = [int(r["step"]) for r in runs.RunDirectory(out).metrics_rows()]
    assert steps == [5]  # one run, trained once, validated once
    if run == "bsa-tnp-gp2d":  # translation invariant: the shifted tasks are the train tasks moved by 10
        value = {line["row"]: float(line["value"]) for line in lines}
        np.testing.assert_allclose(value["bsa-tnp-gp2d-shifted"], value["bsa-tnp-gp2d-train"], rtol=1e-4)


@pytest.mark.parametrize("row_ids", [("taylorformer-exchange-rate-96-mse", "taylorformer-exchange-rate-96-nll"),
                                     ("te-tnp-gp-shift-1",)], ids=["exchange-rate-96", "te-tnp-gp-shift-1"])
def test_recorded_values_match_the_evaluation_module(row_ids, tmp_path):
    """The value replicate records equals what taylorformer.workflow.evaluation computes on the same
    tasks (pooled MSE == mean per-task MSE here: every window has Nt points). The MSE and NLL
    rows of a horizon share one run: the second call only evaluates it."""
    out = str(tmp_path / "run")
    for row_id in row_ids:
        record = replication.replicate(row_id, budget=2, out=out, results=None, eval_tasks=3, verbose=0,
                                       batch_size=3, model_overrides=SMOKE, jit_compile=False)
        row = replication.get_row(row_id)
        name, config = row.eval_task()
        # the teacher-forced metrics the rows score (an autoregressive model's, under teacher_forced)
        reference = runs.evaluate_run(out, task=name, task_config=config, num_batches=1, batch_size=3,
                                      num_samples=0)
        expected = {"loglik": reference["loglik"]["mean"], "nll": -reference["loglik"]["mean"],
                    "mse": reference.get("teacher_forced", reference)["mse"]}
        np.testing.assert_allclose(record["value"], expected[row.metric], rtol=1e-5)
        if row.metric != "mse" and record["stderr_method"] == "iid":  # forecasting: batch means
            np.testing.assert_allclose(record["stderr"], reference["loglik"]["stderr"], rtol=1e-5)
        if row.task == "exchange-rate":  # paired with persistence on the same 3 windows (one block: no error bar)
            persistence = baselines.forecast_values(make_task(name, config), row.metric, num_tasks=3)
            assert record["paired_baseline"] == "persistence" and math.isnan(record["paired_stderr"])
            np.testing.assert_allclose(record["paired_gap"], record["value"] - persistence.mean(), rtol=1e-5,
                                       atol=1e-9)
        else:
            assert record["paired_baseline"] == record["paired_gap"] == ""


def test_t_cifar10_protocol_on_a_synthetic_fixture(tmp_path):
    """TE-TNP App. F.2 T-CIFAR10 on 10 synthetic 32x32 RGB images in the loader's .npz format
    (CIFAR-10 cannot be downloaded here): every canvas is 64x64 with the image at a shift in
    [-16, 16] on black, context and targets are all its pixels, each once, Nc <= N/3. The
    row's run goes end to end on a fixture of the same format in
    ``test_every_row_replicates_end_to_end_at_5_steps`` (``te-pt-tnp-m64-t-cifar10``)."""
    rng = np.random.default_rng(0)
    images = rng.integers(1, 256, (10, 32, 32, 3), dtype=np.uint8)  # no black pixel: the image is findable
    np.savez(tmp_path / "cifar.npz", images=images)
    local = {"source": str(tmp_path / "cifar.npz"), "split": [0.6, 0.2, 0.2]}
    for row_id in ("te-pt-tnp-t-cifar10", "te-pt-tnp-m64-t-cifar10"):
        name, config = replication.get_row(row_id).eval_task()
        assert (name, config) == ("t-cifar10", {})
    task = make_task(name, {**config, **local})
    batch = {k: v.numpy() for k, v in next(iter(task.dataset("test", batch_size=2, num_batches=1))).items()}
    for k, image in enumerate(images[8:10]):  # the test split: the last 2 images, in order
        canvas = np.full((64, 64, 3), np.nan)
        for side in ("c", "t"):
            n = int(batch["mask_" + side][k].sum())
            rows_cols = np.rint((batch["x" + side][k, :n] + 1) * 63 / 2).astype(int)
            canvas[rows_cols[:, 0], rows_cols[:, 1]] = batch["y" + side][k, :n]
        assert not np.isnan(canvas).any()  # context + targets = every pixel, each once
        assert int(batch["mask_c"][k].sum()) <= 64 * 64 // 3
        assert int(batch["mask_c"][k].sum() + batch["mask_t"][k].sum()) == 64 * 64
        top, left = np.argwhere(canvas[..., 0] > -0.5).min(0)  # the image's corner
        assert 0 <= top <= 32 and 0 <= left <= 32  # shift in [-16, 16] on the 16-pixel margin
        np.testing.assert_allclose(canvas[top:top + 32, left:left + 32], image / 255 - 0.5, atol=1e-6)
        outside = np.ones((64, 64), bool)
        outside[top:top + 32, left:left + 32] = False
        assert (canvas[outside] == -0.5).all()  # black padding


def test_a_second_call_resumes_and_extends_the_run(tmp_path):
    out, results = str(tmp_path / "run"), str(tmp_path / "r.csv")
    smoke = {"batch_size": 2, "model_overrides": SMOKE, "jit_compile": False}
    replication.replicate("taylorformer-gp-periodic", budget=3, out=out, results=results, eval_tasks=2, verbose=0,
                          **smoke)
    record = replication.replicate("taylorformer-gp-periodic", budget=6, out=out, results=results,
                                   eval_tasks=2, verbose=0, **smoke)
    steps = [int(r["step"]) for r in runs.RunDirectory(out).metrics_rows()]
    assert record["steps"] == 6 and steps[-1] == 6 and steps[0] == 3  # continued, not restarted
    with pytest.raises(RunDirectoryError, match=r"holds a run of task 'gp-taylorformer' .* not of row 'bsa-tnp"):
        replication.replicate("bsa-tnp-gp2d-train", budget=3, out=out, results=results, eval_tasks=2, verbose=0,
                              **smoke)


# ----------------------------------------------------------------------------- CLI
def test_cli_list_shows_every_row_with_our_last_value(tmp_path, capsys):
    results = tmp_path / "r.csv"
    record = {c: "" for c in replication.RESULT_COLUMNS}
    record.update(row="bsa-tnp-gp2d-shifted", value="-0.1234567", stderr="0.0123", budget="small", steps="1000",
                  protocol=str(replication.get_row("bsa-tnp-gp2d-shifted").protocol_version))
    replication.append_result(str(results), record)
    assert main(["replicate", "--list", "--results", str(results)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "METRIC", "PAPER", "VALUE", "OURS", "BUDGET", "BASELINE", "AUTHORS'", "CODE",
                                "STATUS"]
    by_id = {line.split()[0]: line for line in lines[1:] if line.strip()}
    assert set(registry.names("experiment")) <= set(by_id)
    fraction = 1000 / replication.get_row("bsa-tnp-gp2d-shifted").training.steps
    assert "-0.1235 +- 0.012" in by_id["bsa-tnp-gp2d-shifted"]
    assert f"small (1000 steps, {100 * fraction:.2g}% of the paper's)" in by_id["bsa-tnp-gp2d-shifted"]
    assert by_id["bsa-tnp-gp2d-shifted"].rstrip().endswith(f"at {100 * fraction:.2g}% of the budget")
    # rows with no line of the user's: the project's recorded result, marked *, or "not run"
    with open(os.path.join(os.path.dirname(replication.__file__), "replication_results.csv"), newline="") as fh:
        recorded = {line["row"]: line for line in csv.DictReader(fh)}
    train = recorded["tnp-a-gp-eq"]
    assert f"{float(train['value']):.4g} +- " in by_id["tnp-a-gp-eq"] and " *" in by_id["tnp-a-gp-eq"]
    assert f"{train['budget']} ({train['steps']} steps, " in by_id["tnp-a-gp-eq"]
    assert "3.50 +- 0.05" in by_id["tnp-a-gp-eq"]
    # recorded before Table 5's TNP and CNP rows took the paper's variance link: not run under protocol 2
    assert "cnp-gp-shift-0" in recorded and "not run" in by_id["cnp-gp-shift-0"] and " *" not in by_id["cnp-gp-shift-0"]
    # recorded before the TE-TNP preset's variance link and layer order (protocol 1): not run under protocol 3
    assert "te-tnp-gp-shift-0" in recorded and "not run" in by_id["te-tnp-gp-shift-0"]
    # recorded under an earlier protocol (the BSA-TNP head's scale link): not run under the current one
    assert "not run" in by_id["bsa-tnp-gp2d-train"] and " *" not in by_id["bsa-tnp-gp2d-train"]
    assert "bsa-tnp-gp2d-shifted" in recorded and " *" not in by_id["bsa-tnp-gp2d-shifted"]  # the user's wins
    assert "taylorformer-celeba" not in recorded and "not run" in by_id["taylorformer-celeba"]
    # recorded under an earlier protocol (noise 1e-3): not run under the current one
    assert "not run" in by_id["taylorformer-gp-matern52"].split("3.87 +- 0.05")[1]
    # the recorded comparison with the authors' code, where a row has one
    compared = authors_code.read_comparisons()
    for row_id in ("te-tnp-gp-shift-0", "taylorformer-gp-periodic"):
        shown = authors_code.comparison(replication.get_row(row_id), compared[row_id])
        assert f"{shown['ours']['mean']:.4g} vs {shown['authors']['mean']:.4g}: {shown['status']}" in by_id[row_id]


@pytest.mark.parametrize("argv, message", [
    (["replicate", "taylorformer-gp-rbf"], "unknown experiment 'taylorformer-gp-rbf'; did you mean 'taylorformer-gp-eq'"),
    (["replicate", "bsa-tnp-gp2d-train", "--budget", "huge"], "--budget: must be 'paper', 'small' or a number of steps"),
    (["replicate"], "replicate needs a ROW id, or --list"),
])
def test_cli_errors_are_one_line(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_source_commit_is_dirty_for_changes_but_not_for_recorded_results(tmp_path, monkeypatch):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "replication_results.csv").write_text("row\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    monkeypatch.setattr(replication, "RECORDED_RESULTS", str(tmp_path / "replication_results.csv"))
    (tmp_path / "replication_results.csv").write_text("row\na\n")  # recording a result
    assert replication.source_commit() == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert replication.source_commit() == head + "-dirty"
