"""AutoregressiveNP: the chain rule over targets (Taylorformer, TNP-A).

    p(yt | xt, context) = prod_i p(yt_i | xt_i, context, (xt_j, yt_j) for j < i)

``call(batch)`` runs ONE teacher-forced pass of a causal encoder (``encoder.causal``: the
representation of target i depends on the context and targets before i only) and returns
the parameters of every conditional, ``[B, Nt, ...]``; so
``taylorformer.loglik(model, batch)`` is the teacher-forced chain-rule log-likelihood.

:meth:`AutoregressiveNP.sample` draws joint samples step by step from exactly those
conditionals: step t runs the same forward pass with the targets before t filled with
the values already drawn (the causal mask makes the values at t and after irrelevant)
and samples target t from the returned parameters. Cost: Nt forward passes.

Target order: the model conditions in the order of ``xt``. :func:`permute_targets` draws
one permutation per task and applies it to every target-side key together (``xt``, ``yt``,
``mask_t``, ``st``, ``tt``), for training on random orders (``num_permutations``) and for
:func:`consistency`, the paper's target-equivariance check (Sec. 4.4).
"""
import keras
import numpy as np
import tensorflow as tf

from taylorformer.batch import with_masks
from taylorformer.conditional_np import NeuralProcess
from taylorformer.errors import SpecError

#: batch keys indexed by target point (permuted together)
TARGET_KEYS = ("xt", "yt", "mask_t", "st", "tt")
ORDERS = ("given", "random")


def _seed_pair(seed, salt=0):
    """``seed`` (int, pair or tensor) -> int32 tensor ``[2]`` for stateless ops."""
    if seed is None:
        seed = np.random.randint(0, 2**31 - 1)
    if isinstance(seed, (int, np.integer)):
        return tf.constant([int(seed), int(salt)], tf.int32)
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int32)
    if seed.shape.rank == 0:
        return tf.stack([seed, tf.constant(salt, tf.int32)])
    return seed


def random_orders(batch_size, num_targets, seed=None):
    """One uniformly random permutation per row: int32 ``[batch_size, num_targets]``."""
    u = tf.random.stateless_uniform(tf.stack([batch_size, num_targets]), _seed_pair(seed))
    return tf.argsort(u, axis=1, stable=True)


def gather_targets(batch, order):
    """Reorder every target-side key by ``order [B, Nt]`` (row-wise, the same for all keys)."""
    out = dict(batch)
    for key in TARGET_KEYS:
        if key in out:
            out[key] = tf.gather(out[key], order, batch_dims=1)
    return out


def tile_batch(batch, times):
    """Repeat every task ``times`` times along the batch axis (blocks: [b0..bB, b0..bB, ...])."""
    out = {}
    for key, value in batch.items():
        value = tf.convert_to_tensor(value)
        out[key] = tf.tile(value, [times] + [1] * (value.shape.rank - 1))
    return out


def permute_targets(batch, seed=None, num_permutations=1):
    """Shuffle the target order of each task: ONE permutation per task for x, y and mask.

    ``seed``: int, pair or tensor (stateless; ``None`` = fresh randomness).
    ``num_permutations`` K > 1 returns K*B tasks: the batch tiled K times, every copy with
    its own permutation (a K-sample Monte Carlo average over orders in the loss).
    Context keys and per-task keys (e.g. ``gt_loglik``) are unchanged.
    """
    if not isinstance(num_permutations, int) or num_permutations < 1:
        raise SpecError(f"num_permutations must be an int >= 1, got {num_permutations!r}")
    batch = with_masks(batch)
    if num_permutations > 1:
        batch = tile_batch(batch, num_permutations)
    shape = tf.shape(batch["xt"])
    return gather_targets(batch, random_orders(shape[0], shape[1], seed))


def consistency(model, batch, k=40, seed=0):
    """Per task, the std over ``k`` target permutations of the teacher-forced log-likelihood.

    The log-likelihood is :func:`taylorformer.loglik` (mean per real target point). Returns
    float64 ``[B]``; population std (``ddof=0``, as ``np.std``). A target-equivariant model
    gives 0. Summarise with :func:`summarize_consistency`.
    """
    from taylorformer.inference import loglik

    if not isinstance(k, int) or k < 2:
        raise SpecError(f"consistency needs k >= 2 permutations, got {k!r}")
    lls = [loglik(model, permute_targets(batch, seed=(seed, i))) for i in range(k)]
    return tf.math.reduce_std(tf.stack(lls, 0), axis=0)


def summarize_consistency(stds):
    """Mean of the per-task stds and their 2.5% / 97.5% percentiles (the paper's interval)."""
    stds = np.asarray(stds, np.float64).ravel()
    return {"mean": float(stds.mean()), "lower": float(np.percentile(stds, 2.5)),
            "upper": float(np.percentile(stds, 97.5)), "num_tasks": int(stds.size)}


@keras.saving.register_keras_serializable(package="taylorformer", name="AutoregressiveNP")
class AutoregressiveNP(NeuralProcess):
    """Chain-rule NP: teacher-forced conditionals in one pass, step-wise joint sampling."""

    causal = True

    def __init__(self, spec, **kwargs):
        super().__init__(spec, **kwargs)
        self.encoder = self.build_encoder()
        if not getattr(self.encoder, "causal", False):
            name = self.spec["encoder"]["name"] if isinstance(self.spec["encoder"], dict) else self.spec["encoder"]
            raise SpecError(
                f"encoder {name!r} is not causal (it has no `causal = True`): an autoregressive "
                "model needs an encoder where target i sees only the context and targets before i, "
                "e.g. 'taylorformer' or 'tnp-a'; use kind 'conditional' for this encoder")
        self._step_fn = None

    def call(self, batch, training=None):
        """Parameters of p(yt_i | context, yt_<i) for every i (dict of ``[B, Nt, ...]``)."""
        batch = self.augment(self.prepare(batch))
        reps = self.encoder(batch, training=training)
        return self.adjust(self.likelihood.parameters(self.head(reps)), batch)

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
        seed = _seed_pair(seed)
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
