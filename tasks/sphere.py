"""GP on the sphere, a task of BSA-TNP (plugin ``builtin-sphere``, kind ``task``).

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
import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError
from taylorformer.hookspecs import hookimpl
from taylorformer.normaliser import latlon_to_xyz  # one definition, which prediction uses too
from taylorformer.task import Task, check_choice, check_number, count_range, real_pair, split_names
from taylorformer.tasks.gaussian_process import JITTER, loglik_from_cholesky
from taylorformer.tasks.gp import CEILING_KEYS, HYPERPARAMETER_RANGE, MAX_NOISE, ceiling_signature, gp_memory_estimate


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
        owner = "sphere-gp task"
        # InvGamma(shape, scale), degrees
        self.lengthscale = real_pair("lengthscale", lengthscale, *HYPERPARAMETER_RANGE, owner, ordered=False)
        self.noise = check_number(owner, "noise", noise, 0.0, MAX_NOISE)
        self.noise_on = check_choice("sphere-gp", "noise_on", noise_on, ("both", "context"))
        self.num_context = count_range("num_context", num_context, 0, owner=owner)
        self.num_target = count_range("num_target", num_target, 1, owner=owner)
        self.extent = check_number(owner, "extent", extent, 0.0, 90.0, low_open=True)
        if rotation is None or rotation == "random":
            self.rotation = rotation
        elif isinstance(rotation, (list, tuple)) and len(rotation) == 3:
            self.rotation = [check_number(owner, "rotation", a, -360.0, 360.0) for a in rotation]
        else:
            raise TaskError(f"{owner} 'rotation' must be None, 'random' or 3 Euler angles "
                            f"(degrees), got {rotation!r}")
        self.rotate_splits = split_names("rotate_splits", rotate_splits, owner=owner)
        self.coords = check_choice("sphere-gp", "coords", coords, ("latlon", "xyz"))
        self.dim_x = 2 if coords == "latlon" else 3
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]
        self.check_memory()

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

    def memory_estimate(self, batch_size):
        """The padded batch plus one task's exact-GP working set on 3-D unit vectors."""
        return gp_memory_estimate(self, batch_size, 3)

    def get_config(self):
        return {"lengthscale": list(self.lengthscale), "noise": self.noise, "noise_on": self.noise_on,
                "num_context": list(self.num_context), "num_target": list(self.num_target),
                "extent": self.extent, "rotation": self.rotation,
                "rotate_splits": list(self.rotate_splits), "coords": self.coords}


@hookimpl
def register_tasks(register):
    register("sphere-gp", SphereGPTask,
             description="GP on the sphere, great-circle exponential kernel; rotated evaluation.")
