"""Evaluation metrics: log-likelihood (mean +- stderr), RMSE, 95% coverage, GP ceiling."""
import numpy as np
import tensorflow as tf

from taylorformer.batch import with_masks
from taylorformer.inference import masked_point_mean


def batch_metrics(model, batch):
    """Per-task ``loglik`` [B] and per-point squared errors / coverage hits (NumPy)."""
    batch = with_masks(batch)
    dist = model.predict_distribution(batch)
    yt = tf.cast(batch["yt"], tf.float32)
    logp = tf.reduce_sum(tf.cast(dist.log_prob(yt), tf.float64), -1)
    mask = batch["mask_t"].numpy().astype(bool)
    cdf = dist.cdf(yt).numpy()  # central 95% interval <=> 0.025 <= F(y) <= 0.975
    inside = ((cdf >= 0.025) & (cdf <= 0.975)).all(-1)
    sq_err = ((dist.mean().numpy() - yt.numpy()) ** 2).mean(-1)
    return {
        "loglik": masked_point_mean(logp, batch["mask_t"]).numpy(),
        "sq_err": sq_err[mask],
        "inside95": inside[mask],
    }


def _mean_stderr(values):
    values = np.asarray(values, np.float64)
    stderr = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    return {"mean": float(values.mean()), "stderr": float(stderr), "n": int(len(values))}


def evaluate(model, task, split="test", batch_size=16, num_batches=None):
    """Metrics over a fixed evaluation split of ``task``.

    Returns ``{"loglik": {mean, stderr, n}, "rmse", "coverage95", "num_tasks"}`` and,
    when the task provides the exact GP predictive, ``gt_loglik`` and
    ``gap_to_gt`` (gt minus model; 0 is the ceiling).
    """
    lls, sq, inside, gts = [], [], [], []
    for batch in task.dataset(split, batch_size=batch_size, num_batches=num_batches):
        m = batch_metrics(model, batch)
        lls.append(m["loglik"])
        sq.append(m["sq_err"])
        inside.append(m["inside95"])
        if "gt_loglik" in batch:
            gts.append(batch["gt_loglik"].numpy())
    if not lls:
        raise ValueError(f"task split {split!r} produced no batches")
    lls = np.concatenate(lls)
    out = {
        "split": split,
        "num_tasks": int(len(lls)),
        "loglik": _mean_stderr(lls),
        "rmse": float(np.sqrt(np.concatenate(sq).mean())),
        "coverage95": float(np.concatenate(inside).mean()),
    }
    if gts:
        gts = np.concatenate(gts)
        out["gt_loglik"] = _mean_stderr(gts)
        out["gap_to_gt"] = _mean_stderr(gts - lls)
    return out
