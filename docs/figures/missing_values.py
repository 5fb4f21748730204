"""The figure of docs/tasks.md "Missing values": a station-like hourly series with gaps and a
TNP-D's predictive across them.

The series is synthetic (daily and weekly cycles plus AR(1) noise), so the values hidden in the
gaps are known: the script reports the predictive's log-likelihood and 95% coverage there. The
gaps are NaN in the batches the model trains on, context and targets alike (taylorformer.batch:
a NaN output is "not observed"); nothing is imputed or dropped by hand.

    python docs/figures/missing_values.py [--steps 800] [--out docs/figures/missing-values.png]
"""
import argparse

import numpy as np

HOURS, WINDOW = 24 * 7 * 40, 96


def station_series(seed=0):
    """``(truth, observed)`` float32 ``[HOURS]``: the full series and a copy with NaN gaps
    (blocks of 3-24 hours, about 15% of the hours, plus 5% single missing hours)."""
    rng = np.random.default_rng(seed)
    t = np.arange(HOURS)
    noise = np.zeros(HOURS)
    for i in range(1, HOURS):
        noise[i] = 0.9 * noise[i - 1] + 0.15 * rng.normal()
    truth = np.sin(2 * np.pi * t / 24) + 0.5 * np.sin(2 * np.pi * t / 168) + noise
    observed = truth.copy()
    missing = rng.random(HOURS) < 0.05
    while missing.mean() < 0.2:
        start = rng.integers(HOURS)
        missing[start:start + rng.integers(3, 25)] = True
    observed[missing] = np.nan
    return truth.astype(np.float32), observed.astype(np.float32)


def window_batch(series, starts, rng, context_fraction=(0.3, 0.9)):
    """A batch of windows: x = hour in [-1, 1], a random part of the hours as context and the
    rest as targets; NaN values stay NaN (unobserved context points and targets)."""
    x = np.linspace(-1, 1, WINDOW, dtype=np.float32)
    nc = int(rng.uniform(*context_fraction) * WINDOW)
    order = np.stack([rng.permutation(WINDOW) for _ in starts])
    values = np.stack([series[s:s + WINDOW] for s in starts])
    take = lambda a, idx: np.take_along_axis(a, idx, 1)[..., None]  # noqa: E731
    xs = np.broadcast_to(x, values.shape)
    return {"xc": take(xs, order[:, :nc]), "yc": take(values, order[:, :nc]),
            "xt": take(xs, order[:, nc:]), "yt": take(values, order[:, nc:])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--out", default="docs/figures/missing-values.png")
    args = parser.parse_args()

    import keras
    import tensorflow as tf
    from matplotlib.figure import Figure

    import taylorformer as tfm

    truth, observed = station_series()
    train_end = int(0.8 * HOURS)
    rng = np.random.default_rng(1)

    def batches():
        while True:
            yield window_batch(observed, rng.integers(0, train_end - WINDOW, 16), rng)

    spec = {"preset": "tnp-d", "encoder": {"layers": 3, "width": 64, "num_heads": 4, "head_dim": 16},
            "head": {"width": 64}}
    model = tfm.build_model(spec)
    model.compile(optimizer=keras.optimizers.Adam(1e-3, global_clipnorm=1.0))
    signature = {k: tf.TensorSpec([None, None, 1], tf.float32) for k in ("xc", "yc", "xt", "yt")}
    data = tf.data.Dataset.from_generator(batches, output_signature=signature)
    model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=2)

    # test windows: every observed hour is context; the predictive at every hour of the window
    starts = np.arange(train_end, HOURS - WINDOW, WINDOW)
    x = np.linspace(-1, 1, WINDOW, dtype=np.float32)
    batch = {"xc": np.broadcast_to(x, (len(starts), WINDOW))[..., None].copy(),
             "yc": np.stack([observed[s:s + WINDOW] for s in starts])[..., None],
             "xt": np.broadcast_to(x, (len(starts), WINDOW))[..., None].copy(),
             "yt": np.stack([truth[s:s + WINDOW] for s in starts])[..., None]}
    dist = model.predict_distribution(batch)
    mean, std = dist.mean().numpy()[..., 0], dist.stddev().numpy()[..., 0]
    gap = np.isnan(batch["yc"][..., 0])
    hidden = batch["yt"][..., 0]
    logp = dist.log_prob(batch["yt"]).numpy()[..., 0]
    inside = np.abs(hidden - mean) <= 1.96 * std
    print(f"hidden gap hours: {int(gap.sum())} in {len(starts)} test windows; predictive log-lik "
          f"{logp[gap].mean():.3f} per hour, 95% band covers {100 * inside[gap].mean():.1f}%, "
          f"RMSE {np.sqrt(((mean - hidden)[gap] ** 2).mean()):.3f} (observed hours: log-lik "
          f"{logp[~gap].mean():.3f})")

    i = int(np.argmax(gap.sum(1)))  # the test window with the most missing hours
    hours = np.arange(WINDOW)
    fig = Figure(figsize=(10, 3.6))
    ax = fig.add_subplot()
    ax.fill_between(hours, mean[i] - 1.96 * std[i], mean[i] + 1.96 * std[i], color="tab:blue", alpha=0.25,
                    label="predictive 95%")
    ax.plot(hours, mean[i], color="tab:blue", label="predictive mean")
    ax.plot(hours, batch["yc"][i, :, 0], ".-", color="black", ms=3, lw=0.8, label="observed (NaN = gap)")
    ax.plot(hours[gap[i]], hidden[i, gap[i]], "x", color="tab:red", ms=4, label="hidden values in the gaps")
    for h in hours[gap[i]]:
        ax.axvspan(h - 0.5, h + 0.5, color="0.85", lw=0, zorder=0)
    ax.set_xlabel(f"hour of the window (test window starting at hour {starts[i]})")
    ax.set_ylabel("value")
    ax.set_title("NaN gaps are unobserved context: the TNP-D's predictive across them")
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
