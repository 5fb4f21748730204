"""Target orders of autoregressive NPs: one permutation per task, applied to every
target-side key together (``xt``, ``yt``, ``mask_t``, ``st``, ``tt``).

Used for training on random orders (``num_permutations``), for sampling in a random
order, and for the order-consistency metric (:func:`taylorformer.workflow.evaluation.order_consistency`,
the Taylorformer paper's target-equivariance check, Sec. 4.4).
"""
import numpy as np
import tensorflow as tf

from taylorformer.batch import with_masks
from taylorformer.errors import SpecError

#: batch keys indexed by target point (permuted together)
TARGET_KEYS = ("xt", "yt", "mask_t", "observed_t", "st", "tt")


def seed_pair(seed, salt=0):
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
    u = tf.random.stateless_uniform(tf.stack([batch_size, num_targets]), seed_pair(seed))
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
