"""Per-window against global standardisation on a drifting series (results: benchmarks/README.md).

Trains TNP-D twice on one ``csv`` task, identical but for the spec's ``standardise``
(``"global"``: the training rows' z-scores; ``"window"``: each window by its own context,
:mod:`taylorformer.models.window_standardisation`), same seed, steps and data stream, and scores
both with persistence and seasonal naive on the same test windows with the same scorer::

    python benchmarks/window_standardisation.py --csv co2.csv --target co2 --date date \\
        --season 52 --steps 600

(the weekly Mauna Loa CO2 of statsmodels' ``co2`` dataset: ``pip download statsmodels
--no-deps`` and unzip ``statsmodels/datasets/co2/co2.csv``; statsmodels is not a
dependency). Metrics per target point in the data's units: MAE, RMSE, NLL (nats, of the
original-unit values: the models' log density minus ``log std`` of the task's
standardisation) and 95% coverage of the central interval. The baselines are Gaussian:
persistence ``y[C-1] + N(0, h sigma_1^2)`` (a random walk, ``sigma_1`` the RMS of the
training rows' one-step differences), seasonal naive ``y[t - season] + N(0, sigma_s^2)``
(``sigma_s`` the RMS of the training rows' ``season``-step differences); the baselines read
a linear interpolation over missing context values, every metric skips a missing target.

Error bars: the test windows start at every row (``eval_stride`` 1), so neighbouring
windows share most of their rows. Each metric is a mean over windows; its 95% interval is
a moving-block bootstrap over the window starts with blocks of ``C + H`` consecutive
windows (windows further apart share no row), 2000 resamples; differences between
methods are bootstrapped paired (the same resampled windows).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

#: the standard normal's 97.5% quantile
Z975 = 1.959963984540054


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--csv", required=True, help="the series (CSV with a header row)")
    p.add_argument("--target", required=True, help="target column")
    p.add_argument("--date", default=None, help="date column")
    p.add_argument("--column-names", default=None, help="comma-separated names of a file without a header row")
    p.add_argument("--season", type=int, default=0, help="season length in rows (0: no seasonal naive)")
    p.add_argument("--context", type=int, default=104)
    p.add_argument("--horizon", type=int, default=26)
    p.add_argument("--split", default="0.69,0.11,0.20")
    p.add_argument("--steps", type=int, default=600, help="training steps per model")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=5e-4)
    p.add_argument("--layers", type=int, default=2, help="TNP-D encoder layers (preset: 5)")
    p.add_argument("--width", type=int, default=64, help="TNP-D encoder and head width (preset: 128)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bootstrap", type=int, default=2000)
    p.add_argument("--json", default=None, help="write the results here")
    return p.parse_args(argv)


def make_task(args):
    from taylorformer import registry

    split = tuple(float(v) for v in args.split.split(","))
    names = args.column_names.split(",") if args.column_names else None
    return registry.get("task", "csv")(path=args.csv, target_columns=args.target, date_column=args.date,
                                       column_names=names, split=split, context_length=args.context,
                                       horizon=args.horizon)


def train(task, args, standardise):
    """TNP-D with ``standardise``, trained ``args.steps`` steps; returns (model, seconds)."""
    import keras

    import taylorformer as tfm

    keras.utils.set_random_seed(args.seed)
    model = tfm.build_model("tnp-d", dim_x=task.dim_x, dim_y=task.dim_y, standardise=standardise,
                            encoder={"layers": args.layers, "width": args.width},
                            head={"width": args.width})
    model.compile(optimizer=keras.optimizers.AdamW(args.learning_rate, global_clipnorm=0.5))
    start = time.perf_counter()
    model.fit(task.dataset("train", batch_size=args.batch_size, seed=args.seed), steps_per_epoch=args.steps,
              epochs=1, verbose=0)
    return model, time.perf_counter() - start


def gaussian_scores(mean, std, y):
    """Per target point ``[W, H]``: absolute error, squared error, NLL, inside the central
    95% interval (NaN where ``y`` is missing)."""
    z = (y - mean) / std
    return {"ae": np.abs(y - mean), "se": (y - mean) ** 2,
            "nll": 0.5 * z**2 + np.log(std) + 0.5 * np.log(2 * np.pi),
            "inside": np.where(np.isnan(y), np.nan, (np.abs(z) <= Z975).astype(float))}


def model_scores(model, task, starts, batch_size=64):
    """Scores of ``model``'s predictive on the windows ``starts`` in the data's units."""
    means, stds, nlls = [], [], []
    for i in range(0, len(starts), batch_size):
        batch = task.batch(starts[i:i + batch_size])
        dist = model.distribution(batch)
        yt = np.nan_to_num(batch["yt"].numpy())
        means.append(dist.mean().numpy()[..., 0])
        stds.append(dist.stddev().numpy()[..., 0])
        nlls.append(-dist.log_prob(yt).numpy()[..., 0])
    mean = task.to_original_units(np.concatenate(means)[..., None])[..., 0]
    std = np.concatenate(stds) * float(task.std[0])
    y = truth(task, starts)
    scores = gaussian_scores(mean, std, y)
    # the model's own log density, moved to the data's units (change of variables)
    scores["nll"] = np.where(np.isnan(y), np.nan, np.concatenate(nlls) + np.log(float(task.std[0])))
    return scores


def truth(task, starts):
    """``[W, H]`` target values in the data's units (NaN where missing)."""
    c, h = task.context_length, task.horizon
    y = task.series()["y"][:, 0]
    return np.stack([y[s + c:s + c + h] for s in starts])


def interpolated(values):
    """``values`` with NaNs linearly interpolated (ends: nearest value)."""
    idx = np.arange(len(values))
    ok = ~np.isnan(values)
    return np.interp(idx, idx[ok], values[ok])


def baseline_scores(task, starts, season):
    """Persistence and (``season`` > 0) seasonal naive scores on the windows ``starts``."""
    c, h = task.context_length, task.horizon
    y_all = task.series()["y"][:, 0]
    lo, hi = task.split_bounds["train"]
    train = interpolated(y_all[lo:hi])
    filled = interpolated(y_all)  # the baselines read the context only: rows before each target block
    y = truth(task, starts)
    steps = np.arange(1, h + 1)[None]
    sigma_1 = np.sqrt(np.mean(np.diff(train) ** 2))  # RMS: the forecast assumes no drift
    last = np.array([filled[s + c - 1] for s in starts])[:, None]
    out = {"persistence": gaussian_scores(np.broadcast_to(last, y.shape), sigma_1 * np.sqrt(steps) + 0 * y, y)}
    if season:
        if season < h or season > c:
            raise SystemExit(f"--season {season} must lie in [horizon, context] = [{h}, {c}]")
        sigma_s = np.sqrt(np.mean((train[season:] - train[:-season]) ** 2))
        mean = np.stack([filled[s + c - season:s + c - season + h] for s in starts])
        out["seasonal naive"] = gaussian_scores(mean, np.full(y.shape, sigma_s), y)
    return out


def window_means(scores):
    """Per window ``[W]``: MAE, MSE, NLL, coverage (means over its observed targets)."""
    return {k: np.nanmean(v, 1) for k, v in scores.items()}


def block_bootstrap(w, block, n, seed=0):
    """``[n, w]`` window indices of ``n`` moving-block resamples of ``w`` windows: blocks of
    ``block`` consecutive windows at random starts, concatenated and cut to ``w``."""
    rng = np.random.default_rng(seed)
    k = -(-w // block)
    starts = rng.integers(0, max(w - block + 1, 1), size=(n, k))
    idx = (starts[..., None] + np.arange(min(block, w))[None, None]).reshape(n, -1)[:, :w]
    return idx


def summarise(per_window, idx):
    """Mean and bootstrap 95% interval; RMSE from the MSE."""
    out = {}
    for key, values in per_window.items():
        good = ~np.isnan(values)
        mean = float(np.nanmean(values))
        boot = np.array([np.nanmean(values[i]) for i in idx])
        if key == "se":
            key, mean, boot = "rmse", float(np.sqrt(mean)), np.sqrt(boot)
        out[{"ae": "mae", "inside": "coverage95"}.get(key, key)] = {
            "mean": mean, "lo": float(np.percentile(boot, 2.5)), "hi": float(np.percentile(boot, 97.5)),
            "windows": int(good.sum())}
    return out


def paired(a, b, idx):
    """Mean of ``a - b`` per window and its bootstrap 95% interval (paired resamples)."""
    d = a - b
    boot = np.array([np.nanmean(d[i]) for i in idx])
    return {"mean": float(np.nanmean(d)), "lo": float(np.percentile(boot, 2.5)), "hi": float(np.percentile(boot, 97.5))}


def main(argv=None):
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--show":  # reprint a saved --json result
        with open(sys.argv[2]) as f:
            print(format_tables(json.load(f)))
        return True
    args = parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()  # the code that runs
    task = make_task(args)
    starts = task.window_starts("test")
    val_starts = task.window_starts("val")
    print(f"series {args.csv} ({args.target}): {len(task.series()['y'])} rows; C={args.context} H={args.horizon}; "
          f"{len(starts)} test windows (stride 1); training std {float(task.std[0]):.4g}", flush=True)
    methods = baseline_scores(task, starts, args.season)
    timings, val_nll = {}, {}
    for standardise in ("global", "window"):
        model, seconds = train(task, args, standardise)
        name = f"TNP-D {standardise}"
        timings[name] = seconds
        val_nll[name] = float(np.nanmean(model_scores(model, task, val_starts)["nll"]))
        methods[name] = model_scores(model, task, starts)
        print(f"  trained {name}: {args.steps} steps in {seconds:.0f} s; val NLL {val_nll[name]:.3f}", flush=True)
    per_window = {name: window_means(s) for name, s in methods.items()}
    idx = block_bootstrap(len(starts), args.context + args.horizon, args.bootstrap, args.seed)
    table = {name: summarise(pw, idx) for name, pw in per_window.items()}
    diffs = {f"TNP-D window - {other}": {m: paired(per_window["TNP-D window"][k], per_window[other][k], idx)
                                         for m, k in (("mae", "ae"), ("nll", "nll"))}
             for other in per_window if other != "TNP-D window"}
    record = {"args": vars(args), "commit": commit, "test_windows": int(len(starts)), "train_seconds": timings,
              "val_nll": val_nll, "table": table, "paired": diffs}
    print(format_tables(record))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return record


def format_tables(record):
    """The two Markdown tables of a result (``--show`` reprints a saved one)."""
    lines = ["| method | MAE | RMSE | NLL | 95% coverage |", "|---|---|---|---|---|"]
    for name, row in record["table"].items():
        lines.append(f"| {name} | " + " | ".join(f"{row[k]['mean']:.4g} [{row[k]['lo']:.4g}, {row[k]['hi']:.4g}]"
                                                  for k in ("mae", "rmse", "nll", "coverage95")) + " |")
    lines += ["", "| paired difference | MAE | NLL |", "|---|---|---|"]
    for name, row in record["paired"].items():
        lines.append(f"| {name} | " + " | ".join(f"{row[k]['mean']:+.3g} [{row[k]['lo']:+.3g}, {row[k]['hi']:+.3g}]"
                                                  for k in ("mae", "nll")) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
