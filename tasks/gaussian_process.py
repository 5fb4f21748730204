"""Gaussian-process maths in NumPy float64: kernels, joint covariances, draws and the
exact predictive log-likelihoods that serve as the ceiling of GP tasks.

The task plugins built on it are :mod:`taylorformer.tasks.gp` (1-D and N-D regression)
and :mod:`taylorformer.tasks.spatial_gp` / :mod:`taylorformer.tasks.sphere` (BSA-TNP).
"""
import math

import numpy as np
from scipy.linalg import solve_triangular

from taylorformer.errors import TaskError, close_matches

#: kernel names; ``rbf`` is an alias of ``eq``
KERNELS = ("eq", "matern12", "matern32", "matern52", "periodic")
KERNEL_ALIASES = {"rbf": "eq"}
#: added to the diagonal of every joint covariance (variance units)
JITTER = 1e-8
_LOG_2PI = math.log(2.0 * math.pi)


def canonical_kernel(kind):
    """Canonical kernel name (``"rbf"`` -> ``"eq"``); :class:`TaskError` if unknown."""
    name = KERNEL_ALIASES.get(kind, kind) if isinstance(kind, str) else kind
    if name not in KERNELS:
        close = close_matches(kind, KERNELS + tuple(KERNEL_ALIASES)) if isinstance(kind, str) else []
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise TaskError(f"unknown GP kernel {kind!r} in 'kernel'{hint} Known kernels: "
                        f"{', '.join(KERNELS + tuple(KERNEL_ALIASES))}")
    return name


def kernel_matrix(kind, x1, x2, lengthscale=1.0, scale=1.0, period=1.0):
    """Kernel matrix ``[N1, N2]`` (float64) between inputs ``x1 [N1, Dx]`` and ``x2 [N2, Dx]``.

    With ``r = ||x - x'|| / lengthscale`` (isotropic):
    ``eq``: ``s^2 exp(-r^2 / 2)``; ``matern12``: ``s^2 exp(-r)``;
    ``matern32``: ``s^2 (1 + sqrt3 r) exp(-sqrt3 r)``;
    ``matern52``: ``s^2 (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)``;
    ``periodic``: ``s^2 exp(-2 sum_d sin^2(pi (x_d - x'_d) / period) / lengthscale^2)``.

    The sum over dimensions accumulates one ``[N1, N2]`` array a dimension (no ``[N1, N2,
    Dx]`` temporary; the same operations in the same order, so the same bits).
    """
    kind = canonical_kernel(kind)
    x1 = np.asarray(x1, np.float64)
    x2 = np.asarray(x2, np.float64)
    total = np.zeros((len(x1), len(x2)))
    for d in range(x1.shape[1]):
        diff = np.subtract.outer(x1[:, d], x2[:, d])
        if kind == "periodic":
            diff *= np.pi
            diff /= period
            np.sin(diff, out=diff)
        np.square(diff, out=diff)
        total += diff
    if kind == "periodic":
        k = np.exp(-2.0 * total / lengthscale**2)
    else:
        r = np.sqrt(total, out=total)
        r /= lengthscale
        if kind == "eq":
            np.square(r, out=r)
            r *= -0.5
            k = np.exp(r, out=r)
        elif kind == "matern12":
            k = np.exp(-r)
        elif kind == "matern32":
            k = (1.0 + math.sqrt(3.0) * r) * np.exp(-math.sqrt(3.0) * r)
        else:
            k = (1.0 + math.sqrt(5.0) * r + 5.0 / 3.0 * r**2) * np.exp(-math.sqrt(5.0) * r)
    k *= scale**2
    return k


def joint_covariance(kind, xc, xt, lengthscale=1.0, scale=1.0, period=1.0, noise=0.0,
                     noise_on="both"):
    """Covariance ``[Nc+Nt, Nc+Nt]`` of ``[yc; yt]``: kernel + noise^2 + :data:`JITTER`.

    ``xc [Nc, Dx]``, ``xt [Nt, Dx]``; ``noise_on="context"`` leaves the targets noiseless.
    """
    x = np.concatenate([np.asarray(xc, np.float64), np.asarray(xt, np.float64)], axis=0)
    cov = kernel_matrix(kind, x, x, lengthscale, scale, period)
    noise_var = np.full(len(x), float(noise) ** 2)
    if noise_on == "context":
        noise_var[len(xc):] = 0.0
    cov[np.diag_indices_from(cov)] += noise_var + JITTER
    return cov


def loglik_from_cholesky(chol, num_context, yc, yt):
    """Exact predictive log-likelihoods of ``yt [Nt]`` given ``yc [Nc]``, per target point.

    ``chol`` is the lower Cholesky factor ``[Nc+Nt, Nc+Nt]`` of the joint covariance of
    ``[yc; yt]`` (context first). Its target block is the Cholesky factor of the
    posterior covariance, so one factorisation serves sampling and evaluation.
    Returns ``(marginal, joint)``: mean over targets of ``log p(yt_i | yc)``, and
    ``log p(yt | yc) / Nt``. ``Nc = 0`` gives the prior predictive. Both solves are
    triangular (``O(N^2)``, where a general solve would factorise the block again).
    """
    nc = num_context
    yc = np.asarray(yc, np.float64).reshape(-1)
    yt = np.asarray(yt, np.float64).reshape(-1)
    l_tc, l_tt = chol[nc:, :nc], chol[nc:, nc:]
    mean = l_tc @ solve_triangular(chol[:nc, :nc], yc, lower=True) if nc else np.zeros_like(yt)
    resid = yt - mean
    var = np.sum(l_tt**2, axis=1)
    marginal = -0.5 * np.mean(_LOG_2PI + np.log(var) + resid**2 / var)
    white = solve_triangular(l_tt, resid, lower=True)
    joint = -0.5 * np.mean(_LOG_2PI + white**2) - np.mean(np.log(np.diag(l_tt)))
    return float(marginal), float(joint)


def gp_posterior_loglik(xc, yc, xt, yt, kernel="eq", lengthscale=1.0, scale=1.0, period=1.0,
                        noise=0.0, noise_on="both"):
    """GP posterior predictive log-likelihood of ``yt`` given ``(xc, yc)``, per target point.

    ``xc [Nc, Dx]`` (``Nc`` may be 0: shape ``[0, Dx]``), ``yc [Nc]``, ``xt [Nt, Dx]``, ``yt [Nt]``; the
    covariance is :func:`joint_covariance`. Returns ``(marginal, joint)`` as in
    :func:`loglik_from_cholesky`, computed in float64.
    """
    cov = joint_covariance(kernel, xc, xt, lengthscale, scale, period, noise, noise_on)
    return loglik_from_cholesky(np.linalg.cholesky(cov), len(xc), yc, yt)


def gp_predictive(xc, yc, xq, kernel="eq", lengthscale=1.0, scale=1.0, period=1.0, noise=0.0,
                  noise_on="both"):
    """Exact GP posterior predictive of the outputs at ``xq [G, Dx]`` given ``(xc [Nc, Dx],
    yc [Nc])``: ``(mean [G], stddev [G])`` in float64, for the covariance of
    :func:`joint_covariance` (so the stddev includes the observation noise where the targets
    are noisy, ``noise_on="both"``). ``Nc = 0`` gives the prior."""
    xc = np.asarray(xc, np.float64).reshape(-1, np.shape(xq)[-1])
    yc = np.asarray(yc, np.float64).reshape(-1)
    target_noise = float(noise) ** 2 if noise_on == "both" else 0.0
    var = np.full(len(xq), scale**2 + target_noise + JITTER)  # k(x, x) = s^2: every kernel is stationary
    if not len(xc):
        return np.zeros(len(xq)), np.sqrt(var)
    k_cc = joint_covariance(kernel, xc, np.zeros((0, xc.shape[1])), lengthscale, scale, period, noise)
    chol = np.linalg.cholesky(k_cc)
    k_qc = kernel_matrix(kernel, xq, xc, lengthscale, scale, period)
    proj = np.linalg.solve(chol, k_qc.T)                     # L^-1 K_cq  [Nc, G]
    mean = proj.T @ np.linalg.solve(chol, yc)
    return mean, np.sqrt(np.maximum(var - np.sum(proj**2, axis=0), 0.0))


def sample_gp(rng, xc, xt, kernel="eq", lengthscale=1.0, scale=1.0, period=1.0, noise=0.0,
              noise_on="both"):
    """One GP draw at ``xc [Nc, Dx]``, ``xt [Nt, Dx]`` with its exact target log-likelihoods.

    Returns ``(yc [Nc], yt [Nt], marginal, joint)``: outputs as float32, and the
    log-likelihoods of :func:`loglik_from_cholesky` computed on those float32 values.
    """
    cov = joint_covariance(kernel, xc, xt, lengthscale, scale, period, noise, noise_on)
    chol = np.linalg.cholesky(cov)
    y = (chol @ rng.standard_normal(len(cov))).astype(np.float32)
    nc = len(xc)
    return (y[:nc], y[nc:], *loglik_from_cholesky(chol, nc, y[:nc], y[nc:]))
