"""Sensor placement on the 1-D GP task: a trained NP's greedy choice against random
placement and against the exact GP's closed-form greedy choice (docs/placement.md).

Setting: ``--scenarios`` draws of one GP inside the ``gp`` task's prior (EQ kernel,
lengthscale ``--lengthscale``, scale 1, noise 0.05); each has ``--context`` observed
points (x ~ U[-2, 2], y drawn from the GP), ``--candidates`` candidate inputs
(x ~ U[-2, 2]) and a region of 64 grid points on [-2, 2]; ``--k`` points are chosen by

* ``np-greedy``: :func:`taylorformer.prediction.placement.place` with the run's model and
  ``--criterion`` (``variance``: the predictive mean as the pseudo-observation;
  ``region-mean``, for autoregressive models: ``--samples`` joint samples);
* ``random``: ``k`` candidates uniformly without replacement (``--random-draws`` draws
  per scenario, averaged);
* ``gp-greedy``: the closed-form greedy choice of the exact GP
  (:func:`taylorformer.tasks.exact_gp_model.greedy_gp_placement`), the best greedy can do.

Every placement is scored by the same independent yardstick: the exact GP's criterion
after its first j points (j = 1..k): the summed posterior variance over the region, or the
variance of the region's mean (a GP's posterior variance does not depend on the values
observed). Also printed: the NP's own estimate of it after its k points, and how often
its first point is the GP's. ``--figure`` draws scenario 0's maps (the NP's placement
above the exact GP's).
``--example DIR`` writes scenario 0 as files for ``taylorformer place``
(``candidates.csv``, ``context.csv``, ``region.csv``).

    .venv/bin/python benchmarks/placement_gp.py RUN_DIR
    .venv/bin/python benchmarks/placement_gp.py AR_RUN_DIR --criterion region-mean
"""
import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from taylorformer.prediction.placement import place  # noqa: E402
from taylorformer.workflow.run_dir import RunDirectory  # noqa: E402
from taylorformer.tasks.exact_gp_model import ExactGPModel, criterion_value, greedy_gp_placement  # noqa: E402


def remaining(gp, xc, chosen, region, criterion):
    """The exact GP's criterion after the first j of ``chosen``, j = 0..len(chosen):
    ``[len(chosen) + 1]``."""
    return np.array([criterion_value(gp, np.concatenate([xc, chosen[:j]]), region, criterion)
                     for j in range(len(chosen) + 1)])


def figure(path, np_result, gp_result):
    """The maps of one scenario: the NP's placement above the exact GP's."""
    from matplotlib.figure import Figure

    from taylorformer.plotting.placement import plot_placement

    fig = Figure(figsize=(9, 5.6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    plot_placement(np_result, ax=top, title=f"trained NP: {len(np_result.table)} points by {np_result.criterion}")
    plot_placement(gp_result, ax=bottom, title="exact GP (the closed-form greedy choice)")
    top.set_xlabel("")
    fig.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--scenarios", type=int, default=30)
    parser.add_argument("--context", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=40)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--lengthscale", type=float, default=0.5)
    parser.add_argument("--random-draws", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--criterion", default="variance", choices=["variance", "region-mean"])
    parser.add_argument("--samples", type=int, default=64, help="joint samples (autoregressive models)")
    parser.add_argument("--example", help="write scenario 0's files for `taylorformer place` here")
    parser.add_argument("--figure", help="PNG: scenario 0's maps, the NP's placement above the exact GP's")
    args = parser.parse_args()

    model = RunDirectory(args.run_dir).load_model(args.checkpoint)
    gp = ExactGPModel(lengthscale=args.lengthscale, noise=0.05)
    rng = np.random.default_rng(args.seed)
    region = np.linspace(-2, 2, 64)[:, None]
    scores = {"np-greedy": [], "random": [], "gp-greedy": []}
    own, same_first, seconds = [], 0, []
    for s in range(args.scenarios):
        xc = rng.uniform(-2, 2, (args.context, 1))
        yc = gp.sample({"xc": np.zeros((1, 0, 1)), "yc": np.zeros((1, 0, 1)), "xt": xc[None]},
                       seed=int(rng.integers(1 << 31)))[0, 0]
        cand = rng.uniform(-2, 2, (args.candidates, 1))
        if s == 0 and args.example:
            os.makedirs(args.example, exist_ok=True)
            pd.DataFrame({"x": cand[:, 0]}).to_csv(os.path.join(args.example, "candidates.csv"), index=False)
            pd.DataFrame({"x": xc[:, 0], "y": yc[:, 0]}).to_csv(os.path.join(args.example, "context.csv"),
                                                                index=False)
            pd.DataFrame({"x": region[:, 0]}).to_csv(os.path.join(args.example, "region.csv"), index=False)
        start = time.perf_counter()
        result = place(model, cand, (xc, yc), region=region, k=args.k, seed=s, criterion=args.criterion,
                       num_samples=args.samples)
        seconds.append(time.perf_counter() - start)
        if s == 0 and args.figure:
            exact = ExactGPModel(lengthscale=args.lengthscale, noise=0.05, joint=args.criterion != "variance",
                                 exact_moments=True)
            figure(args.figure, result, place(exact, cand, (xc, yc), region=region, k=args.k,
                                              criterion=args.criterion, num_samples=1000))
        own.append(result.table["remaining"].iloc[-1])
        scores["np-greedy"].append(remaining(gp, xc, cand[result.table["candidate"]], region, args.criterion))
        indices, _, _ = greedy_gp_placement(gp, cand, args.k, xc, region, args.criterion)
        scores["gp-greedy"].append(remaining(gp, xc, cand[indices], region, args.criterion))
        same_first += int(indices[0] == result.table["candidate"].iloc[0])
        scores["random"].append(np.mean([remaining(gp, xc, cand[rng.choice(len(cand), args.k, replace=False)],
                                                   region, args.criterion) for _ in range(args.random_draws)], 0))
    table = {name: np.array(values) for name, values in scores.items()}
    beats = np.mean(table["np-greedy"][:, -1] < table["random"][:, -1])
    print(f"{args.scenarios} scenarios, Nc={args.context}, {args.candidates} candidates, region 64 points, "
          f"lengthscale {args.lengthscale}; the exact GP's {args.criterion} criterion (mean +- stderr)")
    print("| points placed | " + " | ".join(table) + " |")
    print("|---|" + "---|" * len(table))
    for j in range(args.k + 1):
        cells = [f"{v[:, j].mean():.4g} +- {v[:, j].std(ddof=1) / np.sqrt(len(v)):.2g}" for v in table.values()]
        print(f"| {j} | " + " | ".join(cells) + " |")
    print(f"np-greedy below random after {args.k} points in {beats:.0%} of scenarios; its first point is the "
          f"GP's in {same_first}/{args.scenarios}; the NP's own estimate of its remaining variance: "
          f"{np.mean(own):.4g} (exact GP: {table['np-greedy'][:, -1].mean():.4g}); place() took "
          f"{np.median(seconds):.2f} s (median; first call {seconds[0]:.2f} s with tracing)")
    print(json.dumps({"mean": {k: v.mean(0).round(4).tolist() for k, v in table.items()},
                      "np_beats_random": float(beats), "same_first": same_first,
                      "np_own_estimate": float(np.mean(own)), "place_seconds_median": float(np.median(seconds))}))


if __name__ == "__main__":
    main()
