"""The ``fitted-gp`` task measured: hyperparameter recovery, the trained model against the
exact GP, and 5-fold cross-validation on a real survey against ordinary kriging.

    python benchmarks/fitted_gp.py recovery [--seeds 5] [--points 300]
    python benchmarks/fitted_gp.py survey [--steps 1000] [--minutes 20] [--meuse meuse.txt] [--out DIR]

``recovery``: surveys of ``--points`` points uniform on [0, 10]^2 drawn from each radial
kernel (lengthscale 1.5, variance 1, noise variance 0.05, mean 3); the family chosen by
``kernel="auto"`` (:func:`taylorformer.tasks.fitted_gp.select_prior`) per true family, the
fitted hyperparameters' errors, and the fitted log marginal likelihood against a dense
SciPy reference (``scipy.stats.multivariate_normal``) at the same hyperparameters.

``survey``: the Meuse river survey (155 topsoil samples, R package ``sp``, GPL-3; read
from the scikit-gstat wheel, ``skgstat/data/samples/meuse.txt``, which this script
downloads with pip unless ``--meuse`` gives the file), output log(zinc), inputs x, y
(metres, RD New). A TNP-D is trained on the ``fitted-gp`` task of the whole survey for
``--steps`` (batch 16, cosine schedule; at most ``--minutes`` of wall clock). Then: its
test-split log-likelihood against the exact GP's (the task's ``gt_loglik``: the simulated
tasks' true posterior); 5-fold cross-validation (folds fixed by seed 0), the model
conditioned on the other four folds, beside ordinary kriging (an exact GP of our own: the
kernel family and hyperparameters fitted by maximum marginal likelihood to the four folds,
as the task fits them, with the ordinary-kriging variance,
:func:`taylorformer.tasks.gaussian_process.kriging_predictive`) and beside the exact GP of
the prior the task was fitted with (the model's target); and the predictive sd at points
500 m to 3 km beyond the survey's bounding box, the model's beside kriging's.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np


def recovery(seeds, points):
    from scipy import stats

    from taylorformer.tasks.fitted_gp import select_prior
    from taylorformer.tasks.gaussian_process import RADIAL_KERNELS, kernel_matrix

    truth = {"lengthscale": 1.5, "variance": 1.0, "noise_variance": 0.05, "mean": 3.0}
    rows = []
    for kind in RADIAL_KERNELS:
        for seed in range(seeds):
            rng = np.random.default_rng([seed, RADIAL_KERNELS.index(kind)])
            x = rng.uniform(0.0, 10.0, (points, 2))
            k = kernel_matrix(kind, x, x, truth["lengthscale"], 1.0) + truth["noise_variance"] * np.eye(points)
            y = truth["mean"] + np.linalg.cholesky(k) @ rng.standard_normal(points)
            start = time.perf_counter()
            prior, tried = select_prior(x, y)
            seconds = time.perf_counter() - start
            cov = (kernel_matrix(prior["kernel"], x, x, float(prior["lengthscale"][0]), math.sqrt(prior["variance"]))
                   + prior["noise_variance"] * np.eye(points))
            reference = stats.multivariate_normal(np.full(points, prior["mean"]), cov).logpdf(y)
            rows.append({"true": kind, "seed": seed, "chosen": prior["kernel"],
                         "lengthscale": float(prior["lengthscale"][0]), "variance": prior["variance"],
                         "noise_variance": prior["noise_variance"], "mean": prior["mean"],
                         "log_marginal": prior["log_marginal"], "reference_gap": prior["log_marginal"] - reference,
                         "seconds": seconds})
            print(json.dumps(rows[-1]), flush=True)
    print("\ntrue family | chosen (of %d seeds) | lengthscale rel. error median/max | noise var. rel. error "
          "median/max | variance rel. error median/max" % seeds)
    for kind in RADIAL_KERNELS:
        mine = [r for r in rows if r["true"] == kind]
        chosen = {c: sum(r["chosen"] == c for r in mine) for c in RADIAL_KERNELS}
        errors = {key: [abs(r[key] / truth[key] - 1) for r in mine]
                  for key in ("lengthscale", "noise_variance", "variance")}
        print(f"{kind} | " + ", ".join(f"{c} {n}" for c, n in chosen.items() if n) + " | "
              + " | ".join(f"{np.median(e):.1%} / {np.max(e):.1%}" for e in errors.values()))
    print(f"largest |fitted - reference log marginal likelihood|: {max(abs(r['reference_gap']) for r in rows):.2e}; "
          f"seconds per survey (4 fits): median {np.median([r['seconds'] for r in rows]):.1f}")


def meuse_file(path):
    """The Meuse CSV: ``path``, else the scikit-gstat wheel's copy, downloaded with pip."""
    if path:
        return path
    folder = os.path.join(tempfile.gettempdir(), "fitted_gp_meuse")
    target = os.path.join(folder, "meuse.txt")
    if not os.path.isfile(target):
        os.makedirs(folder, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", folder,
                        "scikit-gstat==1.0.26"], check=True)
        wheel = glob.glob(os.path.join(folder, "scikit_gstat-*.whl"))[0]
        with zipfile.ZipFile(wheel) as archive, open(target, "wb") as out:
            out.write(archive.read("skgstat/data/samples/meuse.txt"))
    return target


def survey(steps, minutes, meuse, out_dir, batch_size):
    import pandas as pd

    import taylorformer as tfm
    from taylorformer.task import make_task
    from taylorformer.tasks.fitted_gp import select_prior
    from taylorformer.tasks.gaussian_process import kriging_predictive
    from taylorformer.workflow.cross_validation import fold_indices, point_scores
    from taylorformer.workflow.cross_validation import summary as point_summary

    frame = pd.read_csv(meuse_file(meuse))
    data = pd.DataFrame({"x": frame["x"], "y": frame["y"], "log_zinc": np.log(frame["zinc"])})
    out_dir = out_dir or tempfile.mkdtemp(prefix="fitted_gp_")
    os.makedirs(out_dir, exist_ok=True)
    csv = os.path.join(out_dir, "meuse_log_zinc.csv")
    data.to_csv(csv, index=False)
    config = {"path": csv, "x_columns": ["x", "y"], "target_columns": ["log_zinc"], "units": {"x": "m", "y": "m"}}
    run = os.path.join(out_dir, "run")
    start = time.perf_counter()
    task = make_task("fitted-gp", config)
    if not os.path.isfile(os.path.join(run, "best.keras")):    # an earlier run in --out is reused
        tfm.train(model="tnp-d", task=task, out_dir=run, steps=steps, batch_size=batch_size,
                  time_budget=60.0 * minutes, verbose=0, evaluate=False)
        trained = time.perf_counter() - start
        done = int(pd.read_csv(os.path.join(run, "metrics.csv"))["step"].max())
        result = tfm.evaluate_run(run, baselines=False)
        print(json.dumps({"train_seconds": round(trained), "steps": done, "loglik": result["loglik"],
                          "gt_loglik": result.get("gt_loglik"), "gap_to_gt": result.get("gap_to_gt")}), flush=True)
    prior = task.get_config()["prior"]
    model = tfm.load_model(os.path.join(run, "best.keras"))
    x, y = data[["x", "y"]].to_numpy(), data["log_zinc"].to_numpy()
    # the model, ordinary kriging and IDW: `taylorformer evaluate RUN --cross-validate 5`
    result = tfm.cross_validate(model, x, y, folds=5, seed=0)
    summary = {"model": result["data_units"], **result["baselines"]}
    # beside them, the exact GP of the prior the task was fitted with (the model's target),
    # on the same folds and scored by the same functions
    mean, sd = np.zeros(len(y)), np.ones(len(y))
    for held in fold_indices(len(y), 5, seed=0):
        keep = np.setdiff1d(np.arange(len(y)), held)
        mean[held], sd[held] = kriging_predictive(x[keep], y[keep], x[held], prior, ordinary=True)
    summary["prior-gp"] = point_summary(point_scores(mean[:, None], sd[:, None], y[:, None],
                                                     np.ones((len(y), 1), bool)))
    print("\nmethod | CRPS | 95% coverage | NLL | RMSE (log zinc, 5-fold CV, 155 points)")
    for name, s in summary.items():
        print(f"{name} | {s['crps']['mean']:.4f} +- {s['crps']['stderr']:.4f} | {s['coverage95']:.3f} | "
              f"{s['nll']['mean']:.3f} | {s['rmse']:.4f}")
    print(f"model CRPS / kriging CRPS: {summary['model']['crps']['mean'] / summary['kriging']['crps']['mean']:.3f}")
    print(f"verdict: {result['verdict']}")
    lo, hi = x.min(0), x.max(0)
    corner = np.array([hi[0], lo[1]])                      # the empty south-east corner, then beyond it
    beyond = [500.0, 1000.0, 2000.0, 3000.0]
    far = corner + np.outer(beyond, [1.0, -1.0]) / math.sqrt(2.0)
    model_sd = tfm.predict_data(model, x, y, far)["stddev"]
    full = select_prior(x, y)[0]
    krige_sd = kriging_predictive(x, y, far, full, ordinary=True)[1]
    near = np.array([x[np.argmin(((x - corner) ** 2).sum(1))]])
    print("\ndistance beyond the box's south-east corner (m) | model sd | kriging sd")
    print(f"at the nearest survey point | {tfm.predict_data(model, x, y, near)['stddev'][0]:.3f} | "
          f"{kriging_predictive(x, y, near, full, ordinary=True)[1][0]:.3f}")
    for d, m, k in zip(beyond, model_sd, krige_sd):
        print(f"{d:.0f} | {m:.3f} | {k:.3f}")
    print(f"\nfitted prior (whole survey): {json.dumps(prior)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("recovery")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--points", type=int, default=300)
    p = sub.add_parser("survey")
    p.add_argument("--steps", type=int, default=1000, help="training steps (the cosine schedule's length)")
    p.add_argument("--minutes", type=float, default=20.0, help="wall-clock cap on the training")
    p.add_argument("--meuse", default=None, help="the Meuse CSV (default: from the scikit-gstat wheel)")
    p.add_argument("--out", default=None)
    p.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    if args.command == "recovery":
        recovery(args.seeds, args.points)
    else:
        survey(args.steps, args.minutes, args.meuse, args.out, args.batch_size)


if __name__ == "__main__":
    main()
