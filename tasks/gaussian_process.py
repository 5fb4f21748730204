"""Gaussian-process maths in NumPy float64: kernels, joint covariances, draws and the
exact predictive log-likelihoods that serve as the ceiling of GP tasks.

The task plugins built on it are :mod:`taylorformer.tasks.gp` (1-D and N-D regression),
:mod:`taylorformer.tasks.spatial_gp` / :mod:`taylorformer.tasks.sphere` (BSA-TNP) and
:mod:`taylorformer.tasks.fitted_gp` (a prior fitted to one survey). The maximum marginal
likelihood fit of a stationary kernel with a constant mean (:func:`fit_gp_prior`) and its
posterior predictive (:func:`kriging_predictive`) also serve the ``gp`` baseline of
:mod:`taylorformer.workflow.predictive_baselines`.
"""
import math

import numpy as np
from scipy import linalg, optimize
from scipy.linalg import solve_triangular

from taylorformer.errors import TaskError, close_matches

#: kernel names; ``rbf`` is an alias of ``eq``
KERNELS = ("eq", "matern12", "matern32", "matern52", "periodic")
KERNEL_ALIASES = {"rbf": "eq"}
#: the radial kernels a prior can be fitted with by marginal likelihood (:func:`fit_gp_prior`)
RADIAL_KERNELS = ("eq", "matern12", "matern32", "matern52")
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

    With ``r = ||x - x'|| / lengthscale`` (isotropic; a radial kernel also takes one
    lengthscale per input, ``[Dx]``: ``r^2 = sum_d ((x_d - x'_d) / l_d)^2``):
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
    per_input = np.ndim(lengthscale) > 0
    if per_input and (kind == "periodic" or np.shape(lengthscale) != (x1.shape[1],)):
        raise TaskError(f"kernel {kind!r}: one lengthscale per input needs a radial kernel and "
                        f"{x1.shape[1]} lengthscale(s), got {np.shape(lengthscale)}")
    if per_input:
        lengthscale = np.asarray(lengthscale, np.float64)
    total = np.zeros((len(x1), len(x2)))
    for d in range(x1.shape[1]):
        diff = np.subtract.outer(x1[:, d], x2[:, d])
        if kind == "periodic":
            diff *= np.pi
            diff /= period
            np.sin(diff, out=diff)
        elif per_input:
            diff /= lengthscale[d]
        np.square(diff, out=diff)
        total += diff
    if kind == "periodic":
        k = np.exp(-2.0 * total / lengthscale**2)
    else:
        r = np.sqrt(total, out=total)
        if not per_input:
            r /= lengthscale
        k = radial_kernel(kind, r)
    k *= scale**2
    return k


def radial_kernel(kind, r):
    """``k(r) / s^2`` ``[N1, N2]`` of a radial kernel (:data:`RADIAL_KERNELS`) at the scaled
    distances ``r [N1, N2]``, which it overwrites (one ``[N1, N2]`` array less at large N)."""
    if kind == "eq":
        np.square(r, out=r)
        r *= -0.5
        return np.exp(r, out=r)
    if kind == "matern12":
        return np.exp(-r)
    if kind == "matern32":
        return (1.0 + math.sqrt(3.0) * r) * np.exp(-math.sqrt(3.0) * r)
    return (1.0 + math.sqrt(5.0) * r + 5.0 / 3.0 * r**2) * np.exp(-math.sqrt(5.0) * r)


def radial_slope(kind, r):
    """``-k'(r) / (r s^2)`` ``[N1, N2]`` of a radial kernel at ``r [N1, N2]``: the derivative
    of the kernel with respect to ``log l_d`` is ``s^2 radial_slope(r) ((x_d - x'_d) / l_d)^2``
    (0 at ``r = 0``, where that squared difference is 0, for ``matern12``)."""
    if kind == "eq":
        return np.exp(-0.5 * r**2)
    if kind == "matern12":
        return np.exp(-r) / np.where(r > 0, r, 1.0)
    if kind == "matern32":
        return 3.0 * np.exp(-math.sqrt(3.0) * r)
    return 5.0 / 3.0 * (1.0 + math.sqrt(5.0) * r) * np.exp(-math.sqrt(5.0) * r)


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


# ----------------------------------------------------------------------------- fitting
#: starts of the marginal-likelihood search (lengthscale multipliers of the inputs' spread)
FIT_RESTARTS = (1.0, 0.3, 3.0)
#: L-BFGS-B iterations of each start
FIT_MAXITER = 50


def negative_log_marginal(log_params, x, y, kernel="matern52"):
    """``(negative log marginal likelihood, gradient)`` of ``y [n]`` at ``x [n, D]`` under a
    GP with a radial ``kernel`` (:data:`RADIAL_KERNELS`), log-parameters ``[log l, log s^2,
    log noise^2]`` (``l``: one lengthscale, or one per input ``[D]``) and a constant mean
    at its generalised least squares estimate (profiled out, so the gradient is the
    partial one)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    n, d = x.shape
    num_ls = len(log_params) - 2
    ls, s2, n2 = np.exp(log_params[:num_ls]), math.exp(log_params[num_ls]), math.exp(log_params[num_ls + 1])
    diff2 = ((x[:, None, :] - x[None, :, :]) / ls) ** 2                    # [n, n, D]
    r = np.sqrt(diff2.sum(-1))
    slope = s2 * radial_slope(kernel, r)                                   # d k / d log l_d / diff2_d
    k_signal = s2 * radial_kernel(kernel, r)
    try:
        chol = linalg.cho_factor(k_signal + (n2 + JITTER) * np.eye(n), lower=True)
    except linalg.LinAlgError:
        return 1e25, np.zeros_like(log_params)
    k_inv = linalg.cho_solve(chol, np.eye(n))
    ones = k_inv.sum(0)
    mean = float(ones @ y / ones.sum())
    alpha = k_inv @ (y - mean)
    nll = 0.5 * (y - mean) @ alpha + np.log(np.diag(chol[0])).sum() + 0.5 * n * _LOG_2PI
    inner = k_inv - np.outer(alpha, alpha)
    grad = np.empty_like(log_params)
    by_input = 0.5 * np.einsum("ij,ij,ijd->d", inner, slope, diff2)
    grad[:num_ls] = by_input if num_ls == d else by_input.sum()
    grad[num_ls] = 0.5 * (inner * k_signal).sum()
    grad[num_ls + 1] = 0.5 * n2 * np.trace(inner)
    return float(nll), grad


def fit_gp_prior(x, y, kernel="matern52", per_input=True, noise_floor=1e-2, restarts=FIT_RESTARTS,
                 maxiter=FIT_MAXITER):
    """The GP prior of ``kernel`` (:data:`RADIAL_KERNELS`) maximising the marginal
    likelihood of ``y [n]`` at ``x [n, D]`` (:func:`negative_log_marginal`): L-BFGS-B on
    the log-parameters from each lengthscale multiplier of ``restarts`` times the inputs'
    spread (signal ``var(y)``, noise ``var(y) / 10``), within bounds around those scales
    (lengthscales 1e-2 to 1e2 times the spread, signal variance 1e-3 to 1e2 times
    ``var(y)``, noise variance ``noise_floor`` to 10 times it: maximum likelihood on few
    points otherwise interpolates them without noise, overconfidently).

    Returns ``{"kernel", "lengthscale" [D] (or [1]: isotropic, ``per_input=False``),
    "variance", "noise_variance", "mean", "log_marginal"}`` (the mean: its GLS estimate;
    the log marginal likelihood at the optimum)."""
    kernel = canonical_kernel(kernel)
    if kernel not in RADIAL_KERNELS:
        raise TaskError(f"a GP prior is fitted with a radial kernel ({', '.join(RADIAL_KERNELS)}), got {kernel!r}")
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    spread = x.std(0)
    spread = np.where(spread > 0, spread, 1.0)
    if not per_input:
        spread = np.array([math.sqrt(float(np.mean(spread**2)))])
    var = float(y.var()) if y.var() > 0 else 1.0
    bounds = ([(math.log(s * 1e-2), math.log(s * 1e2)) for s in spread]
              + [(math.log(var * 1e-3), math.log(var * 1e2)), (math.log(var * noise_floor), math.log(var * 10.0))])
    best = None
    for factor in restarts:
        start = np.concatenate([np.log(spread * factor), [math.log(var), math.log(var / 10.0)]])
        start[-1] = max(start[-1], bounds[-1][0])
        found = optimize.minimize(negative_log_marginal, start, args=(x, y, kernel), jac=True,
                                  method="L-BFGS-B", bounds=bounds, options={"maxiter": maxiter})
        if best is None or found.fun < best.fun:
            best = found
    params = np.exp(best.x)
    fitted = {"kernel": kernel, "lengthscale": params[:-2], "variance": float(params[-2]),
              "noise_variance": float(params[-1])}
    k = kernel_matrix(kernel, x, x, _lengthscale(fitted), math.sqrt(fitted["variance"]))
    chol = linalg.cho_factor(k + (fitted["noise_variance"] + JITTER) * np.eye(len(y)), lower=True)
    ones = linalg.cho_solve(chol, np.ones(len(y)))
    return {**fitted, "mean": float(ones @ y / ones.sum()), "log_marginal": -float(best.fun)}


def _lengthscale(prior):
    """The lengthscale argument of :func:`kernel_matrix` of a fitted prior: a number where
    it has one (isotropic), else ``[D]``."""
    ls = np.asarray(prior["lengthscale"], np.float64).reshape(-1)
    return float(ls[0]) if ls.size == 1 else ls


def kriging_predictive(x, y, xq, prior, ordinary=False):
    """``(mean, sd)`` ``[m]`` of the GP posterior predictive of a new observation (noise
    included) at ``xq [m, D]`` given ``y [n]`` at ``x [n, D]`` under ``prior`` (a dict of
    :func:`fit_gp_prior`: kernel, lengthscale, variance, noise_variance), the constant
    mean at its GLS estimate from ``y`` (``prior["mean"]`` is not used). ``ordinary``:
    the variance also carries the mean's estimation error, ``(1 - 1' K^-1 k_q)^2 /
    (1' K^-1 1)``, as ordinary kriging's does (otherwise: simple kriging about the
    estimate)."""
    x, y, xq = (np.asarray(a, np.float64) for a in (x, y, xq))
    ls, scale = _lengthscale(prior), math.sqrt(prior["variance"])
    k = kernel_matrix(prior["kernel"], x, x, ls, scale) + (prior["noise_variance"] + JITTER) * np.eye(len(y))
    chol = linalg.cho_factor(k, lower=True)
    ones = linalg.cho_solve(chol, np.ones(len(y)))
    mean = float(ones @ y / ones.sum())
    alpha = linalg.cho_solve(chol, y - mean)
    k_q = kernel_matrix(prior["kernel"], xq, x, ls, scale)                  # [m, n]
    v = linalg.solve_triangular(chol[0], k_q.T, lower=True)
    var = prior["variance"] + prior["noise_variance"] - (v ** 2).sum(0)
    if ordinary:
        var = var + (1.0 - k_q @ ones) ** 2 / ones.sum()
    return mean + k_q @ alpha, np.sqrt(np.maximum(var, JITTER))
