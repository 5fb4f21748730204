"""Spatial and spatio-temporal tasks of BSA-TNP (plugin ``builtin-spatial``, kind ``task``).

Every simulator is vectorised NumPy; GP draws reuse :mod:`taylorformer.tasks.gp`
(``sample_gp``, ``loglik_from_cholesky``, ``gp_posterior_loglik``). Batches are padded to
the largest Nc/Nt the config allows, with ``mask_c``/``mask_t``; padded entries are 0.
What each task emits:

``gp-2d-bsa`` (:class:`GP2DTask`; BSA-TNP paper Sec. 5.1 / App. B)
    x = location s in R^2 (``dim_x = 2``), y = GP draw (``dim_y = 1``), ``gt_loglik`` and
    ``gt_loglik_joint``. EQ kernel, variance 1, lengthscale ~ Beta(3, 7), noise 0.1 on the
    context only, Nc ~ U{128..511} (U[128, 512)), Nt = 1024. ``domain``:
    ``"train"`` s ~ U([-2, 2]^2); ``"shifted"`` s ~ U([8, 12]^2); ``"scaled"``
    s ~ U([-4, 4]^2) with 4x the points (Nc ~ U{512..2044}, Nt = 4096);
    ``"multires"`` half the context from a fine inner region U([-0.5, 0.5]^2), half from
    a coarse outer one U([-1.5, 1.5]^2) (paper Table 2), the targets from the inner
    region (``multires_targets="inner"``, the "target zone") or from the outer box
    (``"all"``). The same domain is used by every split: evaluate a model trained on
    ``domain="train"`` with a task built with ``domain="shifted"`` etc.
``sir`` (:class:`SIRTask`; paper Sec. 5.2)
    x = cell centre in R^2 (``dim_x = 2``), y = the cell's state at a random step
    (``encoding="onehot"``: indicators [S, I, R], ``dim_y = 3``; ``"state"``: 0/1/2,
    ``dim_y = 1``). A 64 x 64 grid on [-2, 2]^2, 25 steps, beta ~ Beta(2, 8),
    gamma ~ InvGamma(5, 0.4), omega ~ randint(1, 5) (1..4) initial infections;
    ``domain`` ``"shifted"`` = [8, 12]^2, ``"scaled"`` = [-4, 4]^2 on 128 x 128 (same
    cell size, 4x the points). Context: Nc ~ U{128..512} distinct cells; targets: the
    context cells plus ``num_target`` (1024) other distinct cells (the paper includes the
    context among the test points), so Nt = Nc + 1024.
``generic-spatial`` (:class:`GenericSpatialTask`; paper App. B, "Generic Spatial")
    x = 10 fixed effects X ~ N(0, 1) (``dim_x = 10``), space group ``sc``/``st`` = s ~
    U([-2, 2]^2), y = X gamma + f(s) + noise: l ~ Beta(3, 7), f ~ GP(0, EQ(l)),
    gamma ~ N(0, 1)^10, sigma^2 ~ HalfNormal(1) (the paper leaves these scales open;
    ours are config keys). Nc ~ U{13..64}, Nt = 64. ``gt_loglik``: exact predictive
    given the true l, gamma, sigma (an oracle; the paper's reference is NUTS).
``sphere-gp`` (:class:`SphereGPTask`; paper App. B, "Spherical GPs")
    x = (latitude, longitude) in degrees (``coords="latlon"``, ``dim_x = 2``) or unit
    vectors (``coords="xyz"``, ``dim_x = 3``); y = GP draw with the exponential kernel of
    the great-circle distance in degrees, exp(-d / l), l ~ InvGamma(3, 30), variance 1,
    noise 0.1 on the context (the paper states no noise level); lat, lon ~ U[-10, 10]
    degrees; Nc ~ U{128..512}, Nt = 1024; ``gt_loglik``/``gt_loglik_joint``.
    ``rotation``: ``None``, Euler angles ``[a, b, c]`` in degrees (intrinsic y-x-z, the
    paper's (-60, 30, 0) and (-60, 30, 20)), or ``"random"`` (uniform on SO(3), one per
    task), applied in ``rotate_splits`` (default val and test). The process is
    SO(3)-stationary, so rotated tasks have the same distribution and ceiling.

Frame of the sphere: x axis through (lat 0, lon 0), z axis through the north pole.
"""
import math

import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import SpecError
from taylorformer.hookspecs import hookimpl
from taylorformer.task import Task, count_range, split_names
from taylorformer.tasks.gp import (CEILING_KEYS, JITTER, GPTask, ceiling_signature,
                                   gp_posterior_loglik, loglik_from_cholesky, sample_gp)

GP2D_DOMAINS = ("train", "shifted", "scaled", "multires")
SIR_DOMAINS = ("train", "shifted", "scaled")
#: [lo, hi] of every axis per domain (multires: the outer box; inner: MULTIRES_INNER)
DOMAIN_BOXES = {"train": (-2.0, 2.0), "shifted": (8.0, 12.0), "scaled": (-4.0, 4.0),
                "multires": (-1.5, 1.5)}
MULTIRES_INNER = (-0.5, 0.5)


def _choice(task, field, value, allowed):
    if value not in allowed:
        raise SpecError(f"{task} task {field!r} must be one of {allowed}, got {value!r}")
    return value


# ============================================================================ 2-D GP
class GP2DTask(GPTask):
    """BSA-TNP 2-D GP protocol (see the module docstring); a :class:`GPTask` with domains."""

    name = "gp-2d-bsa"

    def __init__(self, *, domain="train", lengthscale=None, noise=0.1, num_context=(128, 511),
                 num_target=1024, multires_targets="inner", kernel="eq"):
        self.domain = _choice("gp-2d-bsa", "domain", domain, GP2D_DOMAINS)
        self.multires_targets = _choice("gp-2d-bsa", "multires_targets", multires_targets,
                                        ("inner", "all"))
        self._base = {"lengthscale": lengthscale or {"beta": [3.0, 7.0]}, "noise": noise,
                      "num_context": list(count_range("num_context", num_context, 0, owner="gp-2d-bsa task")),
                      "num_target": list(count_range("num_target", num_target, 1, owner="gp-2d-bsa task")),
                      "kernel": kernel}
        factor = 4 if domain == "scaled" else 1
        box = list(DOMAIN_BOXES[domain])
        target_box = list(MULTIRES_INNER) if (domain == "multires" and multires_targets == "inner") else box
        super().__init__(dim_x=2, kernel=kernel, lengthscale=self._base["lengthscale"], scale=1.0,
                         noise=noise, noise_on="context",
                         num_context=[factor * n for n in self._base["num_context"]],
                         num_target=[factor * n for n in self._base["num_target"]],
                         context_range=box, target_range=target_box)

    def locations(self, rng, nc, nt, split):
        """float32 ``xc [nc, 2]``, ``xt [nt, 2]`` of one task (the domain, not the split, decides)."""
        if self.domain == "multires":
            n_inner = nc // 2
            inner = rng.uniform(*MULTIRES_INNER, (n_inner, 2))
            outer = rng.uniform(*DOMAIN_BOXES["multires"], (nc - n_inner, 2))
            xc = np.concatenate([inner, outer])[rng.permutation(nc)]
        else:
            xc = rng.uniform(self.context_box[:, 0], self.context_box[:, 1], (nc, 2))
        xt = rng.uniform(self.target_box[:, 0], self.target_box[:, 1], (nt, 2))
        return xc.astype(np.float32), xt.astype(np.float32)

    def get_config(self):
        return {"domain": self.domain, "multires_targets": self.multires_targets, **self._base}


# ============================================================================ SIR
S, I, R = 0, 1, 2


def sir_offsets(radius):
    """Neighbour offsets ``[(dy, dx)]`` with 0 < distance <= radius and their distances."""
    r = int(radius)
    offs = [(dy, dx) for dy in range(-r, r + 1) for dx in range(-r, r + 1)
            if 0 < dy * dy + dx * dx <= radius * radius]
    return offs, np.sqrt(np.array([dy * dy + dx * dx for dy, dx in offs], np.float64))


def simulate_sir(rng, beta, gamma, initial, grid=64, steps=25, radius=3.0):
    """Stochastic SIR epidemics on ``grid x grid`` cells, vectorised over tasks.

    ``beta``, ``gamma`` ``[B]`` floats and ``initial`` ``[B]`` ints. At step 0 ``initial``
    random cells are infected. Each step, a susceptible cell escapes infection from each
    infected cell at grid distance ``d`` (in cells, ``0 < d <= radius``) independently
    with probability ``1 - beta / d`` (the infection rate decays as the inverse of the
    distance; beyond ``radius`` there is no contact), and an infected cell recovers with
    probability ``gamma``; both use the state at the start of the step.
    Returns int8 states ``[steps + 1, B, grid, grid]`` (0 = S, 1 = I, 2 = R).
    """
    beta = np.asarray(beta, np.float64)
    gamma = np.minimum(np.asarray(gamma, np.float64), 1.0)
    b, g, r = len(beta), int(grid), int(radius)
    state = np.zeros((b, g * g), np.int8)
    for i, n in enumerate(np.asarray(initial, int)):
        state[i, rng.choice(g * g, size=int(n), replace=False)] = I
    state = state.reshape(b, g, g)
    offs, dist = sir_offsets(radius)
    log_escape = np.log1p(-np.minimum(beta[:, None] / dist[None], 1.0 - 1e-7))  # [B, n_off]
    out = np.empty((steps + 1, b, g, g), np.int8)
    out[0] = state
    for t in range(steps):
        infected = np.pad((state == I).astype(np.float64), ((0, 0), (r, r), (r, r)))
        log_p = np.zeros((b, g, g))
        for k, (dy, dx) in enumerate(offs):
            log_p += log_escape[:, k, None, None] * infected[:, r + dy:r + dy + g, r + dx:r + dx + g]
        u = rng.random((2, b, g, g))
        new_inf = (state == S) & (u[0] < -np.expm1(log_p))
        new_rec = (state == I) & (u[1] < gamma[:, None, None])
        state = state.copy()
        state[new_inf] = I
        state[new_rec] = R
        out[t + 1] = state
    return out


class SIRTask(Task):
    """SIR epidemics on a grid; see the module docstring."""

    name = "sir"
    dim_x = 2

    def __init__(self, *, domain="train", grid=64, steps=25, num_context=(128, 512),
                 num_target=1024, radius=3.0, encoding="onehot", beta=(2.0, 8.0),
                 gamma=(5.0, 0.4), initial=(1, 5)):
        self.domain = _choice("sir", "domain", domain, SIR_DOMAINS)
        self.encoding = _choice("sir", "encoding", encoding, ("onehot", "state"))
        self.dim_y = 3 if encoding == "onehot" else 1
        if not (isinstance(grid, int) and grid >= 4 and isinstance(steps, int) and steps >= 1):
            raise SpecError(f"sir task: grid must be an int >= 4 and steps an int >= 1, got {grid!r}, {steps!r}")
        if not (isinstance(radius, (int, float)) and radius >= 1):
            raise SpecError(f"sir task: radius must be a number >= 1 (cells), got {radius!r}")
        self.grid, self.steps, self.radius = grid, steps, float(radius)
        self.num_context = count_range("num_context", num_context, 0, owner="sir task")
        self.num_target = count_range("num_target", num_target, 0, owner="sir task")
        self.beta, self.gamma = tuple(map(float, beta)), tuple(map(float, gamma))
        self.initial = count_range("initial", list(initial), 1, owner="sir task")
        factor = 4 if domain == "scaled" else 1
        self.cells = grid * (2 if domain == "scaled" else 1)
        self.lo, self.hi = DOMAIN_BOXES[domain]
        self.nc_range = (factor * self.num_context[0], factor * self.num_context[1])
        self.extra_range = (factor * self.num_target[0], factor * self.num_target[1])
        self.max_context = self.nc_range[1]
        self.max_target = self.nc_range[1] + self.extra_range[1]
        if self.max_target > self.cells ** 2:
            raise SpecError(f"sir task: {self.max_target} target cells do not fit a "
                            f"{self.cells} x {self.cells} grid")

    def cell_centres(self):
        """float32 ``[cells^2, 2]`` cell centres, row-major (axis 0 = first coordinate)."""
        c = self.lo + (np.arange(self.cells) + 0.5) * (self.hi - self.lo) / self.cells
        a, b = np.meshgrid(c, c, indexing="ij")
        return np.stack([a.ravel(), b.ravel()], -1).astype(np.float32)

    def encode(self, states):
        if self.encoding == "state":
            return states[..., None].astype(np.float32)
        return np.eye(3, dtype=np.float32)[states]

    def sample(self, rng, batch_size, split):
        b = batch_size
        beta = rng.beta(*self.beta, size=b)
        gamma = self.gamma[1] / rng.gamma(self.gamma[0], 1.0, size=b)  # InvGamma(shape, scale)
        initial = rng.integers(self.initial[0], self.initial[1], size=b)  # randint: hi exclusive
        states = simulate_sir(rng, beta, gamma, initial, self.cells, self.steps, self.radius)
        t = rng.integers(1, self.steps + 1, size=b)
        centres = self.cell_centres()
        out = empty_batch(b, self.max_context, self.max_target, 2, self.dim_y)
        for i in range(b):
            nc = int(rng.integers(self.nc_range[0], self.nc_range[1] + 1))
            extra = int(rng.integers(self.extra_range[0], self.extra_range[1] + 1))
            cells = rng.permutation(self.cells ** 2)[:nc + extra]
            y = self.encode(states[t[i], i].reshape(-1)[cells])
            x = centres[cells]
            nt = nc + extra  # targets = the context cells + `extra` other cells
            out["xc"][i, :nc], out["yc"][i, :nc], out["mask_c"][i, :nc] = x[:nc], y[:nc], 1.0
            out["xt"][i, :nt], out["yt"][i, :nt], out["mask_t"][i, :nt] = x, y, 1.0
        return out

    def get_config(self):
        return {"domain": self.domain, "grid": self.grid, "steps": self.steps,
                "num_context": list(self.num_context), "num_target": list(self.num_target),
                "radius": self.radius, "encoding": self.encoding, "beta": list(self.beta),
                "gamma": list(self.gamma), "initial": list(self.initial)}


# ============================================================================ generic spatial
class GenericSpatialTask(Task):
    """GP + linear fixed effects + noise (the paper's NumPyro model, in NumPy)."""

    name = "generic-spatial"
    dim_y = 1

    def __init__(self, *, num_fixed=10, num_context=(13, 64), num_target=64,
                 lengthscale=(3.0, 7.0), coef_std=1.0, noise_var_scale=1.0, space_range=(-2.0, 2.0)):
        if not (isinstance(num_fixed, int) and num_fixed >= 1):
            raise SpecError(f"generic-spatial task: num_fixed must be an int >= 1, got {num_fixed!r}")
        self.dim_x = self.num_fixed = num_fixed
        self.num_context = count_range("num_context", num_context, 0, owner="generic-spatial task")
        self.num_target = count_range("num_target", num_target, 1, owner="generic-spatial task")
        self.lengthscale = tuple(map(float, lengthscale))  # Beta(a, b)
        self.coef_std, self.noise_var_scale = float(coef_std), float(noise_var_scale)
        self.space_range = tuple(map(float, space_range))
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]

    def sample_parameters(self, rng):
        """``(lengthscale, coef [num_fixed], sigma)`` of one task."""
        ell = float(rng.beta(*self.lengthscale))
        coef = rng.normal(0.0, self.coef_std, self.num_fixed)
        sigma = math.sqrt(abs(rng.normal(0.0, self.noise_var_scale)))  # sigma^2 ~ HalfNormal(scale)
        return ell, coef, sigma

    def sample(self, rng, batch_size, split):
        b, dx = batch_size, self.num_fixed
        out = empty_batch(b, self.max_context, self.max_target, dx, 1, CEILING_KEYS)
        out["sc"] = np.zeros((b, self.max_context, 2), np.float32)
        out["st"] = np.zeros((b, self.max_target, 2), np.float32)
        for i in range(b):
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            nt = int(rng.integers(self.num_target[0], self.num_target[1] + 1))
            s = rng.uniform(*self.space_range, (nc + nt, 2)).astype(np.float32)
            x = rng.standard_normal((nc + nt, dx)).astype(np.float32)
            ell, coef, sigma = self.sample_parameters(rng)
            mean = x.astype(np.float64) @ coef
            rc, rt, _, _ = sample_gp(rng, s[:nc], s[nc:], "eq", lengthscale=ell, noise=sigma)
            y = (mean + np.concatenate([rc, rt]).astype(np.float64)).astype(np.float32)
            # the ceiling on exactly the float32 values the model sees
            resid = y.astype(np.float64) - mean
            marginal, joint = gp_posterior_loglik(s[:nc], resid[:nc], s[nc:], resid[nc:], "eq",
                                                  lengthscale=ell, noise=sigma)
            out["xc"][i, :nc], out["sc"][i, :nc], out["yc"][i, :nc, 0] = x[:nc], s[:nc], y[:nc]
            out["xt"][i, :nt], out["st"][i, :nt], out["yt"][i, :nt, 0] = x[nc:], s[nc:], y[nc:]
            out["mask_c"][i, :nc], out["mask_t"][i, :nt] = 1.0, 1.0
            out["gt_loglik"][i], out["gt_loglik_joint"][i] = marginal, joint
        return out

    def extra_signature(self):
        import tensorflow as tf

        return {"sc": tf.TensorSpec([None, None, 2], tf.float32),
                "st": tf.TensorSpec([None, None, 2], tf.float32),
                **ceiling_signature()}

    def get_config(self):
        return {"num_fixed": self.num_fixed, "num_context": list(self.num_context),
                "num_target": list(self.num_target), "lengthscale": list(self.lengthscale),
                "coef_std": self.coef_std, "noise_var_scale": self.noise_var_scale,
                "space_range": list(self.space_range)}


# ============================================================================ sphere
def latlon_to_xyz(latlon):
    """``[..., 2]`` (lat, lon) degrees -> ``[..., 3]`` unit vectors (float64)."""
    lat, lon = np.radians(latlon[..., 0]), np.radians(latlon[..., 1])
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)


def xyz_to_latlon(xyz):
    """``[..., 3]`` -> ``[..., 2]`` (lat, lon) degrees (float64)."""
    xyz = xyz / np.linalg.norm(xyz, axis=-1, keepdims=True)
    return np.degrees(np.stack([np.arcsin(np.clip(xyz[..., 2], -1.0, 1.0)),
                                np.arctan2(xyz[..., 1], xyz[..., 0])], -1))


def great_circle(u, v):
    """Great-circle distances ``[N, M]`` in degrees between unit vectors ``u [N, 3]``, ``v [M, 3]``."""
    chord = np.linalg.norm(u[:, None, :] - v[None, :, :], axis=-1)
    return np.degrees(2.0 * np.arcsin(np.clip(chord / 2.0, 0.0, 1.0)))


def euler_yxz(degrees):
    """Rotation matrix of intrinsic y-x-z Euler angles (degrees): ``Ry(a) @ Rx(b) @ Rz(c)``."""
    a, b, c = np.radians(np.asarray(degrees, np.float64))
    ry = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    rz = np.array([[np.cos(c), -np.sin(c), 0], [np.sin(c), np.cos(c), 0], [0, 0, 1]])
    return ry @ rx @ rz


def random_rotation(rng):
    """A uniformly random rotation matrix (Haar on SO(3))."""
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


class SphereGPTask(Task):
    """GP on the sphere with a great-circle exponential kernel; see the module docstring."""

    name = "sphere-gp"
    dim_y = 1

    def __init__(self, *, lengthscale=(3.0, 30.0), noise=0.1, noise_on="context",
                 num_context=(128, 512), num_target=1024, extent=10.0, rotation=None,
                 rotate_splits=("val", "test"), coords="latlon"):
        self.lengthscale = tuple(map(float, lengthscale))  # InvGamma(shape, scale), degrees
        self.noise = float(noise)
        self.noise_on = _choice("sphere-gp", "noise_on", noise_on, ("both", "context"))
        self.num_context = count_range("num_context", num_context, 0, owner="sphere-gp task")
        self.num_target = count_range("num_target", num_target, 1, owner="sphere-gp task")
        self.extent = float(extent)
        if not (rotation is None or rotation == "random"
                or (isinstance(rotation, (list, tuple)) and len(rotation) == 3)):
            raise SpecError(f"sphere-gp task 'rotation' must be None, 'random' or 3 Euler angles "
                            f"(degrees), got {rotation!r}")
        self.rotation = list(map(float, rotation)) if isinstance(rotation, (list, tuple)) else rotation
        self.rotate_splits = split_names("rotate_splits", rotate_splits, owner="sphere-gp task")
        self.coords = _choice("sphere-gp", "coords", coords, ("latlon", "xyz"))
        self.dim_x = 2 if coords == "latlon" else 3
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]

    def sample_lengthscale(self, rng):
        """Lengthscale in degrees ~ InvGamma(shape, scale)."""
        return float(self.lengthscale[1] / rng.gamma(self.lengthscale[0], 1.0))

    def kernel(self, u, v, lengthscale):
        return np.exp(-great_circle(u, v) / lengthscale)

    def sample(self, rng, batch_size, split):
        b = batch_size
        out = empty_batch(b, self.max_context, self.max_target, self.dim_x, 1, CEILING_KEYS)
        rotate = self.rotation is not None and split in self.rotate_splits
        for i in range(b):
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            nt = int(rng.integers(self.num_target[0], self.num_target[1] + 1))
            ell = self.sample_lengthscale(rng)
            xyz = latlon_to_xyz(rng.uniform(-self.extent, self.extent, (nc + nt, 2)))
            if rotate:
                rot = random_rotation(rng) if self.rotation == "random" else euler_yxz(self.rotation)
                xyz = xyz @ rot.T
            # the model's float32 inputs, and the kernel on exactly those points
            x = (xyz_to_latlon(xyz) if self.coords == "latlon" else xyz).astype(np.float32)
            u = latlon_to_xyz(x.astype(np.float64)) if self.coords == "latlon" else (
                x / np.linalg.norm(x.astype(np.float64), axis=-1, keepdims=True))
            cov = self.kernel(u, u, ell)
            noise_var = np.full(nc + nt, self.noise ** 2)
            if self.noise_on == "context":
                noise_var[nc:] = 0.0
            cov[np.diag_indices_from(cov)] += noise_var + JITTER
            chol = np.linalg.cholesky(cov)
            y = (chol @ rng.standard_normal(nc + nt)).astype(np.float32)
            marginal, joint = loglik_from_cholesky(chol, nc, y[:nc], y[nc:])
            out["xc"][i, :nc], out["yc"][i, :nc, 0], out["mask_c"][i, :nc] = x[:nc], y[:nc], 1.0
            out["xt"][i, :nt], out["yt"][i, :nt, 0], out["mask_t"][i, :nt] = x[nc:], y[nc:], 1.0
            out["gt_loglik"][i], out["gt_loglik_joint"][i] = marginal, joint
        return out

    def extra_signature(self):
        return ceiling_signature()

    def get_config(self):
        return {"lengthscale": list(self.lengthscale), "noise": self.noise, "noise_on": self.noise_on,
                "num_context": list(self.num_context), "num_target": list(self.num_target),
                "extent": self.extent, "rotation": self.rotation,
                "rotate_splits": list(self.rotate_splits), "coords": self.coords}


@hookimpl
def register_tasks(register):
    register("gp-2d-bsa", GP2DTask,
             description="BSA-TNP 2-D GP protocol; domain='train'|'shifted'|'scaled'|'multires'.")
    register("sir", SIRTask, description="SIR epidemics on a 64x64 grid (BSA-TNP); context among targets.")
    register("generic-spatial", GenericSpatialTask,
             description="GP + 10 fixed effects with a linear effect and noise (x = fixed effects, sc/st = space).")
    register("sphere-gp", SphereGPTask,
             description="GP on the sphere, great-circle exponential kernel; rotated evaluation.")
