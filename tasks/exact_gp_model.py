"""An exact GP behind a neural process's predictive interface, and the closed-form greedy
sensor placement: the references of :mod:`taylorformer.prediction.placement`.

A GP's posterior covariance does not depend on the observed values, so the greedy choice
(each step: the candidate that leaves the least variance over the region) is computed
here directly from the kernel (:func:`greedy_gp_placement`), with no pseudo-observation
and no sample. :class:`ExactGPModel` answers what :func:`taylorformer.prediction.placement.place`
asks of a model (``dim_x``, ``dim_y``, ``causal``, ``compiled_distribution``,
``sample``) with the exact posterior of :mod:`taylorformer.tasks.gaussian_process`, so
``place`` run on it must reproduce the closed-form choice.
"""
import numpy as np

from taylorformer.tasks.gaussian_process import gp_predictive, joint_covariance


class ExactGPModel:
    """The exact GP posterior predictive (observation noise on the context and the
    targets) in the interface of an NP model: ``compiled_distribution(batch)`` is a
    ``tfd.Normal`` with batch shape ``[B, Nt, 1]``, ``sample(batch, S, seed=)`` joint draws
    ``[S, B, Nt, 1]``. ``joint=True`` sets ``causal`` (it then predicts through joint
    samples, as an autoregressive NP does); ``exact_moments=True`` makes the ``S`` draws'
    mean and covariance (ddof 0) those of the posterior exactly (``S > Nt``), so
    sample-based criteria equal their closed forms. Context points with ``mask_c`` 0 or a
    NaN output are left out."""

    dim_y = 1

    def __init__(self, kernel="eq", lengthscale=0.5, scale=1.0, noise=0.05, dim_x=1, joint=False,
                 exact_moments=False):
        self.params = {"kernel": kernel, "lengthscale": lengthscale, "scale": scale, "noise": noise}
        self.dim_x, self.causal, self.exact_moments = dim_x, joint, exact_moments
        self.name, self.spec = "exact-gp", {"description": f"exact GP ({kernel})"}

    def _context(self, batch, b):
        xc, yc = np.asarray(batch["xc"][b], np.float64), np.asarray(batch["yc"][b, :, 0], np.float64)
        keep = ~np.isnan(yc)  # a NaN output is not observed (taylorformer.batch.with_masks)
        if "mask_c" in batch:
            keep &= np.asarray(batch["mask_c"][b]) > 0.5
        return xc[keep], yc[keep]

    def compiled_distribution(self, batch):
        import tensorflow_probability as tfp

        moments = [gp_predictive(*self._context(batch, b), np.asarray(batch["xt"][b], np.float64),
                                 **self.params) for b in range(len(batch["xt"]))]
        mean = np.stack([m for m, _ in moments])[..., None].astype(np.float32)
        std = np.stack([s for _, s in moments])[..., None].astype(np.float32)
        return tfp.distributions.Normal(mean, std)

    predict_distribution = compiled_distribution

    def posterior(self, xc, yc, xt):
        """Posterior mean ``[Nt]`` and covariance ``[Nt, Nt]`` of noisy outputs at ``xt``."""
        p = self.params
        cov = joint_covariance(p["kernel"], xc, xt, p["lengthscale"], p["scale"], noise=p["noise"])
        nc = len(xc)
        k_cc, k_tc = cov[:nc, :nc], cov[nc:, :nc]
        mean = k_tc @ np.linalg.solve(k_cc, yc) if nc else np.zeros(len(xt))
        post = cov[nc:, nc:] - (k_tc @ np.linalg.solve(k_cc, k_tc.T) if nc else 0.0)
        return mean, post

    def sample(self, batch, num_samples=1, seed=None):
        rng = np.random.default_rng(seed)
        out = []
        for b in range(len(batch["xt"])):
            mean, cov = self.posterior(*self._context(batch, b), np.asarray(batch["xt"][b], np.float64))
            white = rng.standard_normal((num_samples, len(mean)))
            if self.exact_moments:  # rows with mean 0 and covariance (ddof 0) exactly I
                white -= white.mean(0)
                white = white @ np.linalg.inv(np.linalg.cholesky(white.T @ white / num_samples)).T
            out.append(mean + white @ np.linalg.cholesky(cov).T)
        return np.stack(out, 1)[..., None].astype(np.float32)


def criterion_value(model, observed_x, region, criterion="variance"):
    """The placement criterion of the GP of ``model`` (an :class:`ExactGPModel`) after
    observing at ``observed_x [n, Dx]``: ``"variance"``, the summed posterior variance over
    ``region [Nr, Dx]``; ``"region-mean"`` / ``"region-total"``, the variance of the
    region's mean / total (noisy outputs, as a model's samples are)."""
    observed_x = np.asarray(observed_x, np.float64)
    if criterion == "variance":
        return float(np.sum(gp_predictive(observed_x, np.zeros(len(observed_x)), region, **model.params)[1] ** 2))
    cov = model.posterior(observed_x, np.zeros(len(observed_x)), region)[1]
    return float(cov.sum() / (len(region) ** 2 if criterion == "region-mean" else 1.0))


def greedy_gp_placement(model, candidates, k, context_x=None, region=None, criterion="variance"):
    """The closed-form greedy choice of ``k`` of ``candidates [N, Dx]`` for the GP of
    ``model`` (an :class:`ExactGPModel`): each step the candidate after which
    :func:`criterion_value` is least, context ``context_x [Nc, Dx]``. Returns ``(indices
    [k], remaining [k], initial)``."""
    candidates = np.asarray(candidates, np.float64)
    region = candidates if region is None else np.asarray(region, np.float64)
    observed = np.zeros((0, candidates.shape[1])) if context_x is None else np.asarray(context_x, np.float64)
    initial, chosen, remaining = criterion_value(model, observed, region, criterion), [], []
    for _ in range(k):
        left = [i for i in range(len(candidates)) if i not in chosen]
        values = [criterion_value(model, np.concatenate([observed, candidates[i:i + 1]]), region, criterion)
                  for i in left]
        best = left[int(np.argmin(values))]
        chosen.append(best)
        remaining.append(min(values))
        observed = np.concatenate([observed, candidates[best:best + 1]])
    return np.array(chosen), np.array(remaining), initial
