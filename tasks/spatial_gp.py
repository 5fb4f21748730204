"""2-D GP tasks of BSA-TNP (plugin ``builtin-spatial-gp``, kind ``task``).

GP draws use :mod:`taylorformer.tasks.gaussian_process`. Batches are padded to the
largest Nc/Nt the config allows, with ``mask_c``/``mask_t``; padded entries are 0.

``gp-2d-bsa`` (:class:`GP2DTask`; BSA-TNP paper Sec. 5.1 / App. B)
    x = location s in R^2 (``dim_x = 2``), y = GP draw (``dim_y = 1``), ``gt_loglik`` and
    ``gt_loglik_joint``. EQ kernel, variance 1, lengthscale ~ Beta(3, 7), noise 0.1 on the
    context only, Nc ~ U{128..511} (U[128, 512)), Nt = 1024. ``domain``:
    ``"train"`` s ~ U([-2, 2]^2); ``"shifted"`` s ~ U([8, 12]^2); ``"scaled"``
    s ~ U([-4, 4]^2) with 4x the points (Nc ~ U{512..2044}, Nt = 4096);
    ``"multires"`` half the context from a fine inner region U([-0.5, 0.5]^2), half from
    a coarse outer one U([-1.5, 1.5]^2) (paper Table 2), the targets from the inner
    region (``multires_targets="inner"``, the "target zone") or from the outer box
    (``"all"``); ``"pool"`` is the authors' code (MLGlobalHealth/dl4bi,
    ``benchmarks/meta_learning/multiscale_2d_gp.py`` lines 89-105 and
    ``dl4bi/meta_learning/data/utils.py`` ``batch_BLD``): a pool of ``max_context +
    max_target`` locations, half inner and half outer, in random order; the context is
    the first ``Nc`` of its first ``max_context`` and the targets the next ``max_target``,
    so context and targets both come half (in expectation) from each region. The same
    domain is used by every split: evaluate a model trained on ``domain="train"`` with a
    task built with ``domain="shifted"`` etc.
``generic-spatial`` (:class:`GenericSpatialTask`; paper App. B, "Generic Spatial")
    x = 10 fixed effects X ~ N(0, 1) (``dim_x = 10``), space group ``sc``/``st`` = s ~
    U([-2, 2]^2), y = X gamma + f(s) + noise: l ~ Beta(3, 7), f ~ GP(0, EQ(l)),
    gamma ~ N(0, 1)^10, sigma^2 ~ HalfNormal(1) (the paper leaves these scales open;
    ours are config keys). ``noise_std_scale``: draw the noise's standard deviation
    instead, sigma ~ HalfNormal(noise_std_scale) (the authors' code: 0.1, MLGlobalHealth/
    dl4bi ``benchmarks/meta_learning/generic_spatial.py`` line 170). Nc ~ U{13..64}, Nt =
    64. ``gt_loglik``: exact predictive given the true l, gamma, sigma (an oracle; the
    paper's reference is NUTS). ``groups_in_x=True`` puts the space inputs into x
    (``x = [fixed effects, s]``, ``dim_x = num_fixed + 2``, no ``sc``/``st``): for models
    that take every input in x, as the authors' TNP-D and TE-TNP do (``safe_stack(x, s,
    t)``, ``dl4bi/meta_learning/tnp_d.py`` line 79, ``te_tnp.py`` line 56).
"""
import math

import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError
from taylorformer.hookspecs import hookimpl
from taylorformer.task import (MAX_DIM, MAX_INPUT, Task, check_choice, check_int, check_number, count_range,
                               real_pair)
from taylorformer.tasks.gaussian_process import gp_posterior_loglik, sample_gp
from taylorformer.tasks.gp import BETA_RANGE, CEILING_KEYS, MAX_NOISE, GPTask, ceiling_signature, gp_memory_estimate

GP2D_DOMAINS = ("train", "shifted", "scaled", "multires")
#: [lo, hi] of every axis per domain (multires: the outer box; inner: MULTIRES_INNER)
DOMAIN_BOXES = {"train": (-2.0, 2.0), "shifted": (8.0, 12.0), "scaled": (-4.0, 4.0),
                "multires": (-1.5, 1.5)}
MULTIRES_INNER = (-0.5, 0.5)


class GP2DTask(GPTask):
    """BSA-TNP 2-D GP protocol (see the module docstring); a :class:`GPTask` with domains."""

    name = "gp-2d-bsa"

    def __init__(self, *, domain="train", lengthscale=None, noise=0.1, num_context=(128, 511),
                 num_target=1024, multires_targets="inner", kernel="eq"):
        self.domain = check_choice("gp-2d-bsa", "domain", domain, GP2D_DOMAINS)
        self.multires_targets = check_choice("gp-2d-bsa", "multires_targets", multires_targets,
                                             ("inner", "all", "pool"))
        lengthscale = {"beta": [3.0, 7.0]} if lengthscale is None else lengthscale
        self._base = {"lengthscale": lengthscale, "noise": noise,
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
        if self.domain == "multires" and self.multires_targets == "pool":
            size = self.max_context + self.max_target
            pool = np.concatenate([rng.uniform(*MULTIRES_INNER, (size // 2, 2)),
                                   rng.uniform(*DOMAIN_BOXES["multires"], (size - size // 2, 2))])
            pool = pool[rng.permutation(size)]
            return (pool[:nc].astype(np.float32),
                    pool[self.max_context:self.max_context + nt].astype(np.float32))
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


class GenericSpatialTask(Task):
    """GP + linear fixed effects + noise (the paper's NumPyro model, in NumPy)."""

    name = "generic-spatial"
    dim_y = 1

    def __init__(self, *, num_fixed=10, num_context=(13, 64), num_target=64,
                 lengthscale=(3.0, 7.0), coef_std=1.0, noise_var_scale=1.0, space_range=(-2.0, 2.0),
                 noise_std_scale=None, groups_in_x=False):
        owner = "generic-spatial task"
        self.num_fixed = check_int(owner, "num_fixed", num_fixed, 1, MAX_DIM - 2)
        if not isinstance(groups_in_x, bool):
            raise TaskError(f"{owner} 'groups_in_x' must be true or false, got {groups_in_x!r}")
        self.groups_in_x = groups_in_x
        self.dim_x = self.num_fixed + 2 * groups_in_x
        self.noise_std_scale = None if noise_std_scale is None else check_number(
            owner, "noise_std_scale", noise_std_scale, 0.0, MAX_NOISE)
        self.num_context = count_range("num_context", num_context, 0, owner=owner)
        self.num_target = count_range("num_target", num_target, 1, owner=owner)
        self.lengthscale = real_pair("lengthscale", lengthscale, *BETA_RANGE, owner, ordered=False)  # Beta(a, b)
        self.coef_std = check_number(owner, "coef_std", coef_std, 0.0, MAX_NOISE)
        self.noise_var_scale = check_number(owner, "noise_var_scale", noise_var_scale, 0.0, MAX_NOISE)
        self.space_range = real_pair("space_range", space_range, -MAX_INPUT, MAX_INPUT, owner)
        if self.space_range[0] == self.space_range[1]:
            raise TaskError(f"{owner} 'space_range' must have lo < hi, got {space_range!r}")
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]
        self.check_memory()

    def sample_parameters(self, rng):
        """``(lengthscale, coef [num_fixed], sigma)`` of one task."""
        ell = float(rng.beta(*self.lengthscale))
        coef = rng.normal(0.0, self.coef_std, self.num_fixed)
        if self.noise_std_scale is not None:  # sigma ~ HalfNormal(scale)
            return ell, coef, abs(rng.normal(0.0, self.noise_std_scale))
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
        if self.groups_in_x:  # x = [fixed effects, s]
            for key, space in (("xc", "sc"), ("xt", "st")):
                out[key] = np.concatenate([out[key], out.pop(space)], -1)
        return out

    def extra_signature(self):
        import tensorflow as tf

        if self.groups_in_x:
            return ceiling_signature()
        return {"sc": tf.TensorSpec([None, None, 2], tf.float32),
                "st": tf.TensorSpec([None, None, 2], tf.float32),
                **ceiling_signature()}

    def memory_estimate(self, batch_size):
        """The padded batch plus one task's exact-GP working set over the 2-D space inputs."""
        return gp_memory_estimate(self, batch_size, 2)

    def get_config(self):
        return {"num_fixed": self.num_fixed, "num_context": list(self.num_context),
                "num_target": list(self.num_target), "lengthscale": list(self.lengthscale),
                "coef_std": self.coef_std, "noise_var_scale": self.noise_var_scale,
                "space_range": list(self.space_range), "noise_std_scale": self.noise_std_scale,
                "groups_in_x": self.groups_in_x}


@hookimpl
def register_tasks(register):
    register("gp-2d-bsa", GP2DTask,
             description="BSA-TNP 2-D GP protocol; domain='train'|'shifted'|'scaled'|'multires'.")
    register("generic-spatial", GenericSpatialTask,
             description="GP + 10 fixed effects with a linear effect and noise (x = fixed effects, sc/st = space).")
