"""AutoregressiveNP: the chain rule over targets (Taylorformer, TNP-A).

    p(yt | xt, context) = prod_i p(yt_i | xt_i, context, (xt_j, yt_j) for j < i)

``call(batch)`` runs ONE teacher-forced pass of a causal encoder (``encoder.causal``: the
representation of target i depends on the context and targets before i only) and returns
the parameters of every conditional, ``[B, Nt, ...]``; so
``taylorformer.loglik(model, batch)`` is the teacher-forced chain-rule log-likelihood.

:meth:`AutoregressiveNP.sample` draws joint samples step by step from exactly those
conditionals: step t runs the same forward pass with the targets before t filled with
the values already drawn (the causal mask makes the values at t and after irrelevant)
and samples target t from the returned parameters. Cost: Nt forward passes. Target
orders (``order="random"``) come from :mod:`taylorformer.target_order`.
"""
import keras
import tensorflow as tf

from taylorformer.errors import SpecError
from taylorformer.models.base import NeuralProcess
from taylorformer.target_order import gather_targets, random_orders, seed_pair, tile_batch

ORDERS = ("given", "random")


@keras.saving.register_keras_serializable(package="taylorformer", name="AutoregressiveNP")
class AutoregressiveNP(NeuralProcess):
    """Chain-rule NP: teacher-forced conditionals in one pass, step-wise joint sampling."""

    causal = True

    def __init__(self, spec, **kwargs):
        super().__init__(spec, **kwargs)
        if not getattr(self.encoder, "causal", False):
            name = self.spec["encoder"]["name"] if isinstance(self.spec["encoder"], dict) else self.spec["encoder"]
            raise SpecError(
                f"encoder {name!r} is not causal (it has no `causal = True`): an autoregressive "
                "model needs an encoder where target i sees only the context and targets before i, "
                "e.g. 'taylorformer' or 'tnp-a'; use kind 'conditional' for this encoder")
        self._step_fn = None

    def teacher_forced_distribution(self, batch, training=False):
        """The conditionals p(yt_i | xt_i, context, yt_<i) given the TRUE earlier targets
        ``batch["yt"]``, batch shape ``[B, Nt, Dy]``: what the log-likelihood scores. Not a
        prediction: it changes with the ``yt`` passed in. Predictions come from
        :meth:`sample` (or :func:`taylorformer.predict`)."""
        return self.distribution(batch, training=training)

    def predict_distribution(self, batch, training=False):
        raise TypeError(
            "an autoregressive NP has no closed-form predictive: draw joint samples with "
            "model.sample(batch, num_samples) or taylorformer.predict(model, batch); the "
            "teacher-forced conditionals (given the true earlier targets) are "
            "model.teacher_forced_distribution(batch)")

    # ------------------------------------------------------------------ sampling
    def _sample_step(self, batch, yt, t, seed):
        """Draw target ``t`` of every row given ``yt[:, :t]``; returns (new yt, params at t)."""
        params = self({**batch, "yt": yt})
        at_t = {key: value[:, t] for key, value in params.items()}
        draw = tf.cast(self.likelihood.distribution(at_t).sample(seed=seed), yt.dtype)  # [R, Dy]
        hit = tf.equal(tf.range(tf.shape(yt)[1]), t)[None, :, None]
        return tf.where(hit, draw[:, None, :], yt), at_t

    def sample(self, batch, num_samples=1, order="given", seed=None, return_info=False):
        """Joint samples ``[S, B, Nt, Dy]`` drawn target by target (eager).

        ``order="given"`` conditions in the order of ``xt``; ``order="random"`` draws a
        fresh order per sample and task, generates in that order and puts the values back,
        so ``samples[s, b, j]`` always belongs to ``xt[b, j]``. Padded targets are 0.
        ``seed`` (int) makes the draws reproducible. With ``return_info=True`` returns
        ``(samples, info)``: ``info["params"]`` the conditional parameters each draw used
        (``[S, B, Nt, ...]``, aligned with ``xt``) and ``info["order"] [S, B, Nt]``: the
        generation order (``order[s, b, t]`` = index of the target drawn at step t).
        """
        if order not in ORDERS:
            raise SpecError(f"sample: order must be one of {ORDERS}, got {order!r}")
        if not isinstance(num_samples, int) or num_samples < 1:
            raise SpecError(f"sample: num_samples must be an int >= 1, got {num_samples!r}")
        batch = self.prepare(batch)
        batch = {k: tf.convert_to_tensor(v) for k, v in batch.items()}
        b, nt = int(batch["xt"].shape[0]), int(batch["xt"].shape[1])
        rows = tile_batch(batch, num_samples)  # [S*B, ...], sample-major
        seed = seed_pair(seed)
        if order == "random":
            gen_order = random_orders(num_samples * b, nt,
                                      seed=tf.random.experimental.stateless_fold_in(seed, -1))
        else:
            gen_order = tf.tile(tf.range(nt)[None], [num_samples * b, 1])
        rows = gather_targets(rows, gen_order)
        if self._step_fn is None:
            # traced per concrete batch shape: static sizes keep attention on its dense path
            self._step_fn = tf.function(self._sample_step)
        yt = tf.zeros_like(tf.cast(rows["yt"], tf.float32))
        steps = []
        for t in range(nt):
            step_seed = tf.random.experimental.stateless_fold_in(seed, t)
            yt, at_t = self._step_fn(rows, yt, tf.constant(t, tf.int32), step_seed)
            steps.append(at_t)
        inverse = tf.argsort(gen_order, axis=1)
        yt = tf.gather(yt, inverse, batch_dims=1)
        mask = tf.tile(tf.cast(batch["mask_t"], yt.dtype), [num_samples, 1])[..., None]
        samples = tf.reshape(yt * mask, [num_samples, b, nt, -1])
        if not return_info:
            return samples
        params = {}
        for key in steps[0]:
            stacked = tf.gather(tf.stack([s[key] for s in steps], 1), inverse, batch_dims=1)
            params[key] = tf.reshape(stacked, [num_samples, b] + stacked.shape.as_list()[1:])
        info = {"params": params, "order": tf.reshape(gen_order, [num_samples, b, nt])}
        return samples, info
