"""Biased attention (BSA-TNP), plugin ``biased`` (kind ``attention``).

Logits of a (query n, key m) pair, per head h::

    logit_h(n, m) = q_n.k_m / sqrt(d) + sum_groups sum_f a[h, f] exp(-b[h, f] dist_w(n, m)^2)

one RBF network per *feature group* ``w`` (Jenson et al. 2025, eq. 4). A group is a
slice of the position vector handed to the layer (``q_pos``/``k_pos``), for example::

    groups=[{"name": "space", "dims": [0, 1], "basis": 5, "distance": "euclidean"},
            {"name": "time", "dims": [2], "basis": 3}]

Group keys: ``name`` (unique; also names the weights), ``dims`` (indices into the
position vector; ``None`` = all of them), ``basis`` F (default 5, or 3 for a group named
``time``), ``distance``:

``"euclidean"`` (default)
    ``||p_n - p_m||_2``; invariant to translations (and rotations) of the group's
    coordinates.
``"geodesic"``
    great-circle distance in radians on the unit sphere, invariant to rotations of the
    sphere (SO(3)). The group's coordinates are ``coords="latlon"`` (2 dims: latitude,
    longitude in degrees; the default for 2 dims), ``"lonlat"`` (longitude, latitude in
    degrees) or ``"xyz"`` (3 dims: points in R^3, normalised to the unit sphere; the
    default for 3 dims). Computed as ``2 asin(|u_n - u_m| / 2)`` from unit vectors, a
    form that is accurate for nearby points; its square is differentiable at 0.

Parameters: ``a`` and ``b`` are ``[H, F]`` per group and per layer; ``a`` starts at 1;
``b = exp(log_b)`` stays positive. ``b_init="spread"`` (default) starts the F basis
functions of a head at ``b_f = 4^(f - (F-1)/2)`` (1/16 ... 16 for F=5, geometric mean
1); a number starts every ``b`` at that value (``b_init=1.0`` is the paper's literal
"init 1"). With all basis functions of a head equal, they receive identical gradients
and stay identical forever (F collapses to 1): spreading them breaks that symmetry.

Execution: the score function runs through the shared executor
(:mod:`taylorformer.attention`) like every attention. ``position_features``
turns the positions into one feature tensor per group (``{group name: [B, N, C]}``,
geodesic groups as unit vectors) before tiling; ``pair_floats`` (``H * (1 + sum of the
groups' basis)``: the logits and the ``[B, H, F, tq, tk]`` basis) makes the executor's rule
pick tiles of 256 x 256 at batch 1 and 128 x 128 at batch 8 (smaller than the paper's 1024:
on a CPU they are as fast or faster, tuned with benchmarks/inference_scaling.py, see
benchmarks/README.md "BUDGETS"), with an online softmax and recomputation in the backward
pass, so memory is O(tile^2) per head; ``tile_size=<int>`` forces tiles of that size.
Squared distances are formed from
per-pair differences of float32 positions (not from ``|p|^2 + |p'|^2 - 2 p.p'``, which
cancels catastrophically far from the origin), so a shift of all positions changes the
logits only through the rounding of the shifted inputs themselves. Positions stay float32
under mixed precision.

Gradients: positions are data by default (``position_gradients=False``): no gradient
flows to them (``None``), which spares the backward pass a reduction per pair;
``position_gradients=True`` differentiates w.r.t. them too (e.g. to optimise query
locations). The RBF networks have a hand-written backward (:func:`rbf_bias`).
"""
import math

import keras
import numpy as np
import tensorflow as tf

from taylorformer.attention import Attention
from taylorformer.errors import SpecError
from taylorformer.checks import check_bool, check_number, check_size

from .geometry import chord_to_geodesic_sq, pair_sq_dist, unit_vectors

DISTANCES = ("euclidean", "geodesic")
COORDS = ("latlon", "lonlat", "xyz")
DEFAULT_GROUPS = ({"name": "space", "dims": None, "basis": 5, "distance": "euclidean"},)


def normalize_groups(groups):
    """Validated list of group dicts with every key filled (see the module docstring)."""
    if groups is None:
        groups = DEFAULT_GROUPS
    if isinstance(groups, dict):
        groups = [groups]
    if not isinstance(groups, (list, tuple)) or not groups:
        raise SpecError(f"biased attention: groups must be a non-empty list of dicts, got {groups!r}")
    out, names = [], set()
    for i, g in enumerate(groups):
        if not isinstance(g, dict):
            raise SpecError(f"biased attention: group {i} must be a dict, got {g!r}")
        unknown = set(g) - {"name", "dims", "basis", "distance", "coords"}
        if unknown:
            raise SpecError(f"biased attention: group {i} has unknown key(s) {sorted(unknown)}; "
                             "valid: name, dims, basis, distance, coords")
        name = g.get("name", f"group{i}")
        if not isinstance(name, str) or not name or name in names:
            raise SpecError(f"biased attention: group names must be unique non-empty strings, got {name!r}")
        names.add(name)
        dims = g.get("dims")
        if dims is not None:
            if isinstance(dims, int):
                dims = [dims]
            if not (isinstance(dims, (list, tuple)) and dims
                    and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)):
                raise SpecError(f"biased attention: group {name!r} dims must be None or a "
                                 f"non-empty list of ints >= 0, got {dims!r}")
            dims = [int(d) for d in dims]
        basis = g.get("basis", 3 if name == "time" else 5)
        basis = check_size(f"biased attention group {name!r}", "basis", basis)
        distance = g.get("distance", "euclidean")
        if distance not in DISTANCES:
            raise SpecError(f"biased attention: group {name!r} distance must be one of {DISTANCES}, "
                             f"got {distance!r}")
        coords = g.get("coords")
        if distance == "geodesic":
            if coords is None and dims is not None:
                coords = {2: "latlon", 3: "xyz"}.get(len(dims))
            if coords is not None and coords not in COORDS:
                raise SpecError(f"biased attention: group {name!r} coords must be one of {COORDS}, "
                                 f"got {coords!r}")
            if coords is not None and dims is not None and len(dims) != (3 if coords == "xyz" else 2):
                raise SpecError(f"biased attention: geodesic group {name!r} with coords={coords!r} "
                                 f"needs {3 if coords == 'xyz' else 2} dims, got {dims!r}")
        elif coords is not None:
            raise SpecError(f"biased attention: group {name!r}: coords is only for distance='geodesic'")
        out.append({"name": name, "dims": dims, "basis": basis, "distance": distance, "coords": coords})
    return out


def required_position_dim(groups):
    """Smallest position width the groups need (``None`` if a group takes all dims)."""
    groups = normalize_groups(groups)
    if any(g["dims"] is None for g in groups):
        return None
    return max(max(g["dims"]) for g in groups) + 1


def _materialize(p):
    """``p`` through an exact matmul by the identity (x * 1 + 0 = x).

    A layout hint for XLA:CPU: inside the executor's key loop the position tiles are
    dynamic slices, and a [tq, tk] exp fusion that reads them directly compiles to much
    slower code; reading the product of a dot, XLA materialises the small tile first.
    Values and gradients are unchanged (the measurement: benchmarks/README.md, "Biased
    attention: materialised position tiles").
    """
    return tf.matmul(p, tf.eye(p.shape[-1], dtype=p.dtype))


def rbf_bias(d2, a, b, d2_grad=True):
    """``sum_f a[h, f] exp(-b[h, f] d2)``: d2 ``[B, tq, tk]``, a, b ``[H, F]`` -> ``[B, H, tq, tk]``.

    The forward is one ``exp`` over ``[B, H, F, tq, tk]`` reduced over F (an axis that is
    not minor: XLA fuses it into one vectorised loop, and it avoids chains of adds that
    TF's graph optimizer rewrites inside the executor's gradient loops). The backward
    sums ``g e`` and ``g e d2`` over the batch axis (a fused, vectorised loop with a large
    output), then over the pairs with one matrix-vector product. XLA:CPU runs a large
    reduction to a tiny ``[H, F]`` output slowly (it materialises the operand, then a
    ``reduce-window``), and plain autodiff ran two of them, each recomputing the
    exponentials.
    ``d2_grad=False``: no gradient for ``d2`` (positions are data).
    """
    @tf.custom_gradient
    def run(d2, a, b):
        def grad(g):
            h, f = a.shape
            ge = tf.cast(g, tf.float32)[:, :, None] * tf.exp(
                -b[None, :, :, None, None] * d2[:, None, None])  # [B, H, F, tq, tk]
            # sum over the batch axis first (a fused loop), then one matrix-vector product
            partial = tf.stack([tf.reduce_sum(ge, 0), tf.reduce_sum(ge * d2[:, None, None], 0)])
            partial = tf.reshape(partial, [2 * h * f, -1])  # [2 H F, tq * tk]
            sums = tf.reshape(tf.linalg.matvec(partial, tf.ones(tf.shape(partial)[1:])), [2, h, f])
            gd2 = -tf.reduce_sum((a * b)[None, :, :, None, None] * ge, [1, 2]) if d2_grad else None
            return gd2, sums[0], -a * sums[1]

        basis = tf.exp(-b[None, :, :, None, None] * d2[:, None, None])  # [B, H, F, tq, tk]
        return tf.reduce_sum(a[None, :, :, None, None] * basis, 2), grad

    return run(d2, a, b)


class BiasedAttention(Attention):
    """Multi-head attention with per-head RBF-network biases over feature groups (BSA-TNP)."""

    def __init__(self, output_dim, num_heads=4, head_dim=32, tile_size=None, groups=None,
                 b_init="spread", position_gradients=False, **kwargs):
        super().__init__(output_dim, num_heads=num_heads, head_dim=head_dim,
                         tile_size=tile_size, **kwargs)
        if b_init != "spread":
            if isinstance(b_init, str):
                raise SpecError(f"biased attention: b_init must be 'spread' or a positive number, got {b_init!r}")
            b_init = check_number("biased attention", "b_init ('spread' or a number)", b_init, low=0, low_open=True)
        self.groups = normalize_groups(groups)
        self.b_init = b_init
        self.position_gradients = check_bool("biased attention", "position_gradients", position_gradients)
        self.scale = 1.0 / math.sqrt(head_dim)

    # ------------------------------------------------------------------ the contract
    def build_score(self, q_pos_shape):
        self.resolve_groups(self.position_dim(q_pos_shape))  # validates the groups
        for g in self.groups:
            f = g["basis"]
            if self.b_init == "spread":
                b0 = 4.0 ** (np.arange(f) - (f - 1) / 2.0)
            else:
                b0 = np.full(f, self.b_init)
            log_b0 = np.tile(np.log(b0)[None], (self.num_heads, 1)).astype("float32")
            setattr(self, f"a_{g['name']}", self.add_weight(
                shape=(self.num_heads, f), initializer="ones", name=f"a_{g['name']}"))
            setattr(self, f"log_b_{g['name']}", self.add_weight(
                shape=(self.num_heads, f), initializer=keras.initializers.Constant(log_b0),
                name=f"log_b_{g['name']}"))

    def position_features(self, positions):
        """Positions ``[B, N, P]`` -> ``{group name: float32 [B, N, C]}``: each group's
        columns (geodesic groups as unit vectors)."""
        if positions is None or positions.shape[-1] is None:
            raise SpecError("biased attention needs query and key positions (q_pos, k_pos) "
                            "with a static last dimension")
        pos = tf.cast(positions, tf.float32)
        width = pos.shape[-1]
        out = {}
        for g in self.resolve_groups(width):
            p = pos if g["dims"] == list(range(width)) else tf.gather(pos, g["dims"], axis=-1)
            out[g["name"]] = unit_vectors(p, g["coords"]) if g["distance"] == "geodesic" else p
        return out

    def pair_floats(self):
        """Per pair: the logits and the ``[B, H, F, tq, tk]`` basis of every group."""
        return self.num_heads * (1 + sum(g["basis"] for g in self.groups))

    def score(self, q, k, q_pos, k_pos, q_valid, k_valid):
        """Logits ``[B, H, tq, tk]``; ``q_pos``/``k_pos`` are :meth:`position_features` tiles."""
        dots = tf.matmul(q, k, transpose_b=True) * tf.cast(self.scale, q.dtype)
        return dots + tf.cast(self.bias(q_pos, k_pos), q.dtype)

    # ------------------------------------------------------------------ the bias
    def resolve_groups(self, width):
        """Groups resolved for positions of ``width`` dims (dims and coords filled).
        ``dims=None`` means every dim of the positions of *this* call (so a layer built
        on x can later read sc/tc)."""
        out = []
        for g in self.groups:
            dims = list(range(width)) if g["dims"] is None else g["dims"]
            if max(dims) >= width:
                raise SpecError(f"biased attention: group {g['name']!r} uses position dims {dims} "
                                f"but positions have only {width} dims")
            coords = g["coords"]
            if g["distance"] == "geodesic":
                if coords is None:
                    coords = {2: "latlon", 3: "xyz"}.get(len(dims))
                if coords is None or len(dims) != (3 if coords == "xyz" else 2):
                    raise SpecError(f"biased attention: geodesic group {g['name']!r} needs 2 dims "
                                    f"(lat/lon degrees) or 3 (xyz), got dims {dims}")
            out.append({**g, "dims": dims, "coords": coords})
        return out

    def bias_parameters(self, name):
        """``(a, b)`` of group ``name``: float32 ``[H, F]`` tensors."""
        return (tf.cast(getattr(self, f"a_{name}"), tf.float32),
                tf.exp(tf.cast(getattr(self, f"log_b_{name}"), tf.float32)))

    def bias(self, fq, fk):
        """float32 ``[B, H, tq, tk]``: the sum over groups of the per-head RBF networks of
        the group distances (``fq``/``fk``: per-group features of a tile)."""
        terms = []
        for g in self.groups:
            d2 = pair_sq_dist(_materialize(fq[g["name"]]), _materialize(fk[g["name"]]))
            if g["distance"] == "geodesic":
                d2 = chord_to_geodesic_sq(d2)
            a, b = self.bias_parameters(g["name"])
            terms.append(rbf_bias(d2, a, b, d2_grad=self.position_gradients))
        return terms[0] if len(terms) == 1 else tf.add_n(terms)

    def get_config(self):
        groups = [{k: g[k] for k in ("name", "dims", "basis", "distance", "coords")} for g in self.groups]
        return {**super().get_config(), "groups": groups, "b_init": self.b_init,
                "position_gradients": self.position_gradients}
