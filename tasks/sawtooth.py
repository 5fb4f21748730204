"""Sawtooth regression tasks (plugin ``builtin-sawtooth``, kind ``task``).

One task is one sawtooth wave travelling in a direction u (a unit vector),

    f(x) = (freq * (u . x) - phase) mod 1,   y = f(x) + noise * N(0, 1),

with ``freq`` ~ U[freq] (period T = 1 / freq; the thesis's f(x) = x - T floor(x / T) up
to the amplitude), ``phase`` ~ U[0, 1] (so the task distribution is stationary) and u
uniform on the unit sphere (in 1-D: u = +-1), as in the sawtooth generator of
wesselb/neuralprocesses. The thesis states the noise as N(0, 0.1); we read 0.1 as the
standard deviation (``noise``).

``restricted=True`` (2-D, thesis Sec. 6.1.3): the direction of travel is only along the
diagonals, x1 = x2 or x1 = -x2 (u uniform over the four unit vectors (+-1, +-1)/sqrt 2).

``rotation``: rotate the input locations of the splits in ``rotation_splits`` (default
the test split) about the origin after sampling the function, by a fixed angle in
degrees or ``"random"`` (uniform per task): y is unchanged, so the test set is a
sawtooth travelling along R u. From the restricted training distribution a random
rotation gives the full sawtooth distribution (thesis Sec. 6.3.2: rotated evaluation).
``shift`` (scalar or [Dx]) is added to all inputs of ``shift_splits`` after the
rotation, as in the GP task (a translation-equivariance test set).

Registered names: ``sawtooth`` (1-D), ``sawtooth-2d`` (full 2-D),
``sawtooth-2d-restricted`` (diagonal directions only) and ``sawtooth-2d-rotated``
(restricted training and validation, test inputs rotated by a random angle per task).
Batches are padded to the largest Nc/Nt with ``mask_c``/``mask_t``; padded entries are 0.
"""
import functools
import math

import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError
from taylorformer.hookspecs import hookimpl
from taylorformer.task import (Task, box_config, check_bool, check_dim_x, check_number, count_range,
                               input_box, input_shift, real_pair, split_names)


def sawtooth(x, direction, freq, phase):
    """Noise-free sawtooth values ``[N]`` at ``x [N, Dx]`` (float64)."""
    return np.mod(freq * (np.asarray(x, np.float64) @ np.asarray(direction, np.float64)) - phase, 1.0)


def rotation_matrix(degrees):
    """2-D rotation by ``degrees`` (counter-clockwise)."""
    t = math.radians(degrees)
    return np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])


#: largest frequency (cycles per unit of u . x) and noise std
MAX_FREQ, MAX_NOISE = 1e6, 1e6


class SawtoothTask(Task):
    """Noisy sawtooth waves with random frequency, phase and direction (see module doc).

    Config: ``dim_x``; ``freq`` (number or [lo, hi]); ``noise`` (std); ``num_context``
    (``lo >= 0``), ``num_target`` (``lo >= 1``): int or [lo, hi]; ``context_range``,
    ``target_range`` ([lo, hi] or per-dim pairs; ``None`` copies the context box);
    ``restricted`` (2-D only); ``rotation`` (None, degrees, or ``"random"``, 2-D only) and
    ``rotation_splits``; ``shift`` and ``shift_splits``.
    """

    name = "sawtooth"
    dim_y = 1

    def __init__(self, *, dim_x=1, freq=(3.0, 5.0), noise=0.1, num_context=(1, 64),
                 num_target=128, context_range=(-2.0, 2.0), target_range=None,
                 restricted=False, rotation=None, rotation_splits=("test",), shift=0.0,
                 shift_splits=("test",)):
        owner = "sawtooth task"
        check_dim_x(dim_x, owner=owner)
        self.dim_x = dim_x
        self.freq = real_pair("freq", [freq, freq] if isinstance(freq, (int, float)) else freq,
                              0.0, MAX_FREQ, owner, open_low=True)
        self.noise = check_number(owner, "noise", noise, 0.0, MAX_NOISE)
        self.num_context = count_range("num_context", num_context, 0, owner=owner)
        self.num_target = count_range("num_target", num_target, 1, owner=owner)
        self.context_box = input_box("context_range", context_range, dim_x, owner=owner)
        self.target_box = self.context_box if target_range is None else input_box(
            "target_range", target_range, dim_x, owner=owner)
        if check_bool(owner, "restricted", restricted) and dim_x != 2:
            raise TaskError(f"{owner} 'restricted' needs dim_x = 2")
        self.restricted = restricted
        if rotation is not None:
            if dim_x != 2:
                raise TaskError(f"{owner} 'rotation' needs dim_x = 2")
            if rotation != "random" and not (isinstance(rotation, (int, float))
                                             and not isinstance(rotation, bool) and math.isfinite(rotation)):
                raise TaskError(f"{owner} 'rotation' must be None, finite degrees or 'random', "
                                f"got {rotation!r}")
        self.rotation = rotation if rotation in (None, "random") else float(rotation)
        self.rotation_splits = split_names("rotation_splits", rotation_splits, owner=owner)
        self.shift, self._shift_config = input_shift(shift, dim_x, owner=owner)
        self.shift_splits = split_names("shift_splits", shift_splits, owner=owner)
        self.max_context, self.max_target = self.num_context[1], self.num_target[1]
        self.check_memory()

    def sample_function(self, rng):
        """``(direction [Dx], freq, phase)`` of one task."""
        if self.restricted:
            direction = np.array([rng.choice([-1.0, 1.0]), rng.choice([-1.0, 1.0])]) / math.sqrt(2.0)
        else:
            direction = rng.standard_normal(self.dim_x)
            direction /= np.linalg.norm(direction)
        freq = float(rng.uniform(*self.freq))
        return direction, freq, float(rng.uniform(0.0, 1.0))

    def sample(self, rng, batch_size, split):
        """Batch dict: ``xc [B, maxNc, Dx]``, ``yc``, ``xt [B, maxNt, Dx]``, ``yt``, masks (float32)."""
        b, dx = batch_size, self.dim_x
        out = empty_batch(b, self.max_context, self.max_target, dx, 1)
        rotate = self.rotation is not None and split in self.rotation_splits
        shift = self.shift if split in self.shift_splits else 0.0
        for i in range(b):
            direction, freq, phase = self.sample_function(rng)
            nc = int(rng.integers(self.num_context[0], self.num_context[1] + 1))
            nt = int(rng.integers(self.num_target[0], self.num_target[1] + 1))
            xc = rng.uniform(self.context_box[:, 0], self.context_box[:, 1], (nc, dx))
            xt = rng.uniform(self.target_box[:, 0], self.target_box[:, 1], (nt, dx))
            x = np.concatenate([xc, xt], 0)
            y = sawtooth(x, direction, freq, phase) + self.noise * rng.standard_normal(nc + nt)
            if rotate:
                angle = rng.uniform(0.0, 360.0) if self.rotation == "random" else self.rotation
                x = x @ rotation_matrix(angle).T
            x = (x + shift).astype(np.float32)
            out["xc"][i, :nc], out["yc"][i, :nc, 0], out["mask_c"][i, :nc] = x[:nc], y[:nc], 1.0
            out["xt"][i, :nt], out["yt"][i, :nt, 0], out["mask_t"][i, :nt] = x[nc:], y[nc:], 1.0
        return out

    def get_config(self):
        return {"dim_x": self.dim_x, "freq": list(self.freq), "noise": self.noise,
                "num_context": list(self.num_context), "num_target": list(self.num_target),
                "context_range": box_config(self.context_box), "target_range": box_config(self.target_box),
                "restricted": self.restricted, "rotation": self.rotation,
                "rotation_splits": list(self.rotation_splits), "shift": self._shift_config,
                "shift_splits": list(self.shift_splits)}


SAWTOOTH_2D = {"dim_x": 2, "num_context": [1, 128], "num_target": 256}


@hookimpl
def register_tasks(register):
    register("sawtooth", SawtoothTask, description="Noisy sawtooth waves, random freq/phase/direction (1-D default).")
    register("sawtooth-2d", functools.partial(SawtoothTask, **SAWTOOTH_2D),
             description="2-D sawtooth, direction of travel uniform on the circle.")
    register("sawtooth-2d-restricted", functools.partial(SawtoothTask, **SAWTOOTH_2D, restricted=True),
             description="2-D sawtooth travelling only along x1 = x2 or x1 = -x2 (thesis 6.1.3).")
    register("sawtooth-2d-rotated", functools.partial(
        SawtoothTask, **SAWTOOTH_2D, restricted=True, rotation="random"),
        description="Restricted 2-D sawtooth; test inputs rotated by a random angle per task.")
