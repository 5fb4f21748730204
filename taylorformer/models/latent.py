"""LatentNP: a global latent variable z, p(yt | xt, C) = E_{p(z|C)} prod_i p(yt_i | xt_i, z, C)
(NP, Garnelo et al. 2018; ANP, Kim et al. 2019).

The encoder is a *latent encoder* (``latent = True``), with

* ``latent_parameters(x [B, N, Dx], y [B, N, Dy'], mask [B, N]) -> (loc, scale)`` ``[B, Dz]``:
  the diagonal Gaussian over z given a set of points (the prior p(z|C) from the context,
  the approximate posterior q(z|C, T) from the context and targets together);
* ``call(batch, z [K, B, Dz]) -> [K, B, Nt, D]``: the target representations given K draws
  of z, which the head and the likelihood turn into K sets of per-point parameters;
* ``objective`` (``"elbo"`` or ``"iwae"``), ``train_samples``, ``eval_samples`` and
  ``reconstruct_context``.

Training (``np_loss`` with ``training=True``) draws ``train_samples`` z from q(z|C, T) by
reparameterisation and maximises, per target point (``n`` real targets; with
``reconstruct_context`` the targets are the context and the targets together, as NPs are
trained in Garnelo et al. and Kim et al. and in Nguyen & Grover's code, and q is computed
from that set):

* ``"elbo"``: ``(E_q[sum_i log p(yt_i | z)] - KL(q || p)) / n`` (Kim et al. 2019), the
  expectation a mean over the draws and the KL between the two diagonal Gaussians in
  closed form;
* ``"iwae"``: ``log mean_k exp(sum_i log p(yt_i | z_k) + log p(z_k|C) - log q(z_k|C,T)) / n``,
  the importance-weighted bound with q as the proposal (the ``train_num_samples > 1``
  objective of Nguyen & Grover's NP and ANP code).

The predictive and every evaluated log-likelihood use ``eval_samples`` draws of z from the
prior: per target point and output the uniform mixture ``(1/K) sum_k p(y | z_k)``, a
Monte Carlo estimate of the marginal predictive, so ``loglik`` scores
``log (1/K) sum_k p(yt_i | z_k)`` per point (as Nguyen & Grover's evaluation does). The
draws come from a fixed stateless seed: evaluating a batch twice gives the same numbers.
The per-z likelihood must be a Gaussian (parameters ``loc``, ``scale``); the predictive
is the ``mixture`` likelihood's distribution over the K draws, so predicted means and
standard deviations are the mixture's, and sampled values are drawn per point from it.
"""
import math

import keras
import tensorflow as tf

from taylorformer import components
from taylorformer.batch import observed_tasks
from taylorformer.models import window_standardisation
from taylorformer.errors import SpecError
from taylorformer.models.conditional import ConditionalNP

#: training objectives of a latent encoder (``objective``)
OBJECTIVES = ("elbo", "iwae")
#: the stateless seed of the prior draws of the predictive
PREDICTIVE_SEED = (0, 0)


def gaussian_kl(q_loc, q_scale, p_loc, p_scale):
    """KL(N(q_loc, q_scale^2) || N(p_loc, p_scale^2)) summed over the last axis ``[..., Dz] -> [...]``."""
    ratio = tf.square(q_scale / p_scale)
    return 0.5 * tf.reduce_sum(ratio + tf.square((q_loc - p_loc) / p_scale) - 1.0 - tf.math.log(ratio), -1)


def gaussian_log_density(z, loc, scale):
    """log N(z; loc, scale^2) summed over the last axis ``[..., Dz] -> [...]``."""
    u = (z - loc) / scale
    return tf.reduce_sum(-0.5 * tf.square(u) - tf.math.log(scale) - 0.5 * math.log(2.0 * math.pi), -1)


@keras.saving.register_keras_serializable(package="taylorformer", name="LatentNP")
class LatentNP(ConditionalNP):
    """Latent-variable NP: context -> p(z|C); targets decoded from (deterministic path, z)."""

    def __init__(self, spec, **kwargs):
        super().__init__(spec, **kwargs)
        name = self.spec["encoder"]["name"]
        if not getattr(self.encoder, "latent", False):
            raise SpecError(f"encoder {name!r} is not a latent encoder (it has no `latent = True`): a 'latent' "
                            "model needs one, e.g. 'np' or 'anp'; use kind 'conditional' for this encoder")
        if self.wrapper is not None:
            raise SpecError("a 'latent' model takes no wrapper: its encoder decodes every draw of z itself")
        if self.encoder.objective not in OBJECTIVES:
            raise SpecError(f"encoder {name!r}: objective must be one of {list(OBJECTIVES)}, "
                            f"got {self.encoder.objective!r}")
        params = self.likelihood.parameters(tf.zeros([1, 1, self.likelihood.num_params(self.dim_y)]))
        if set(params) != {"loc", "scale"}:
            raise SpecError(f"a 'latent' model needs a Gaussian likelihood (parameters loc and scale, e.g. "
                            f"'normal'); {spec['likelihood']['name']!r} has {sorted(params)}")
        self.predictive = components.build(
            "likelihood", {"name": "mixture", "components": self.encoder.eval_samples, "min_scale": 0.0},
            "likelihood")
        # the training draws of z: seeded from Keras' global seed (keras.utils.set_random_seed)
        self.seed_generator = keras.random.SeedGenerator(name="latent_seed")

    # ------------------------------------------------------------------ the network
    def latent(self, batch, posterior=False):
        """``(loc, scale)`` ``[B, Dz]`` of p(z|C), or with ``posterior`` of q(z|C, T)
        (``batch`` as the encoder reads it)."""
        if not posterior:
            return self.encoder.latent_parameters(batch["xc"], batch["yc"], batch["mask_c"])
        return self.encoder.latent_parameters(tf.concat([batch["xc"], batch["xt"]], 1),
                                              tf.concat([batch["yc"], batch["yt"]], 1),
                                              tf.concat([batch["mask_c"], batch["mask_t"]], 1))

    def decode(self, batch, z, training=None):
        """Per-draw likelihood parameters ``loc``/``scale`` ``[K, B, Nt, Dy]`` given ``z [K, B, Dz]``."""
        return self.likelihood.parameters(self.head(self.encoder(batch, z, training=training)))

    def prior_draws(self, batch):
        """``eval_samples`` draws of z from p(z|C), ``[K, B, Dz]``, from :data:`PREDICTIVE_SEED`."""
        loc, scale = self.latent(batch)
        shape = tf.concat([[self.encoder.eval_samples], tf.shape(loc)], 0)
        return loc + scale * tf.random.stateless_normal(shape, PREDICTIVE_SEED, dtype=loc.dtype)

    def network(self, batch, training=None):
        """The predictive mixture's parameters ``logits``/``locs``/``scales`` ``[B, Nt, Dy, K]``."""
        inputs, _ = self._encoder_inputs(batch, None)
        params = self.decode(inputs, self.prior_draws(inputs), training=training)
        locs, scales = (tf.transpose(params[k], [1, 2, 3, 0]) for k in ("loc", "scale"))
        return {"logits": tf.zeros_like(locs), "locs": locs, "scales": scales}

    def predictive_distribution(self, params):
        return self.predictive.distribution(params)

    # ------------------------------------------------------------------ the loss
    def np_loss(self, batch, training=False):
        """Evaluation: the base class's (the predictive's log-likelihood). Training: minus
        the encoder's ``objective`` per target point, averaged over the tasks with an
        observed target; ``(loss, objective per task [B] float64, observed [B])``."""
        if not training:
            return super().np_loss(batch, training=training)
        batch = self.prepare(batch)
        shape = tf.concat([[self.encoder.train_samples], tf.shape(batch["xc"])[:1],
                           [self.encoder.latent_dim]], 0)
        eps = keras.random.normal(shape, seed=self.seed_generator)
        per_task = self.objective(batch, eps, training=True)
        observed = tf.cast(observed_tasks(batch), tf.float64)
        loss = -tf.reduce_sum(per_task * observed) / tf.maximum(tf.reduce_sum(observed), 1.0)
        return tf.cast(loss, tf.float32), per_task, observed

    def objective(self, batch, eps, training=None):
        """The training objective per target point, float64 ``[B]``, with z = loc + scale * eps
        under q(z|C, T) (``eps [S, B, Dz]``, ``batch`` prepared). With ``standardise: window``
        (or ``last``) the network reads each window in its own units and the densities are
        mapped back to the batch's (``- log scale`` per observed value)."""
        log_scale = None
        if self.standardise in window_standardisation.WINDOW_MODES:
            shift, scale = self.window_statistics(batch)
            batch, log_scale = window_standardisation.to_window_units(batch, shift, scale), tf.math.log(scale)
        reconstruct = getattr(self.encoder, "reconstruct_context", False)
        if reconstruct:  # the targets are the context and the targets
            batch = {**batch, **{t: tf.concat([tf.cast(batch[c], tf.float32), tf.cast(batch[t], tf.float32)], 1)
                                 for c, t in (("xc", "xt"), ("yc", "yt"), ("mask_c", "mask_t"),
                                              ("observed_c", "observed_t"))}}
        inputs, _ = self._encoder_inputs(batch, None)
        p_loc, p_scale = self.latent(inputs)
        if reconstruct:
            q_loc, q_scale = self.encoder.latent_parameters(inputs["xt"], inputs["yt"], inputs["mask_t"])
        else:
            q_loc, q_scale = self.latent(inputs, posterior=True)
        z = q_loc + q_scale * tf.cast(eps, q_loc.dtype)
        params = self.decode(inputs, z, training=training)
        logp = self.likelihood.distribution(params).log_prob(tf.cast(batch["yt"], tf.float32))  # [S, B, Nt, Dy]
        logp = tf.cast(logp, tf.float64)
        if log_scale is not None:
            logp -= tf.cast(log_scale, tf.float64)
        logp = tf.reduce_sum(logp * tf.cast(batch["observed_t"], tf.float64), -1)
        mask = tf.cast(batch["mask_t"], tf.float64)
        recon = tf.reduce_sum(logp * mask, -1)  # [S, B]
        count = tf.maximum(tf.reduce_sum(mask, -1), 1.0)
        if self.encoder.objective == "elbo":
            kl = tf.cast(gaussian_kl(q_loc, q_scale, p_loc, p_scale), tf.float64)
            return (tf.reduce_mean(recon, 0) - kl) / count
        log_w = recon + tf.cast(gaussian_log_density(z, p_loc, p_scale) - gaussian_log_density(z, q_loc, q_scale),
                                tf.float64)
        num = tf.cast(tf.shape(log_w)[0], tf.float64)
        return (tf.reduce_logsumexp(log_w, 0) - tf.math.log(num)) / count
