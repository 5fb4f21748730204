"""The ``local-taylor`` wrapper (kind ``wrapper``): Taylor features and terms for any NP network.

LocalTaylor (Nivron et al., Taylorformer, Sec. 3.1) gives the network features built from
each point's *nearest already-seen neighbour* and adds a hard-coded Taylor term to the
predicted mean::

    mean_i = y_n(i) [+ (x_i - x_n(i)) . D_n(i)   if p = 1]  +  network adjustment

Wrapper protocol (what :class:`taylorformer.models.NeuralProcess` calls)
-----------------------------------------------------------------------
A wrapper is a class built with ``(dim_x, dim_y, **options)`` exposing

* ``folded_dims()`` -> ``(dim_x', dim_y')``: the input/output dims an encoder that does not
  read the features itself is built with (see ``fold``);
* ``features(batch, causal) -> features``: an object holding what it computed for this
  batch (here a :class:`LocalTaylorFeatures`), run after
  :func:`~taylorformer.batch.with_masks` and before the encoder;
* ``fold(batch, features) -> batch``: the batch with the features folded into x and y,
  for encoders that do not place the features themselves;
* ``adjust(params, features) -> params``: run after the likelihood's ``parameters``; adds
  the hard-coded Taylor term to the location parameter(s);
* ``get_config() -> dict`` of its options;
* optionally, for cached autoregressive sampling (:mod:`taylorformer.models.decoding`):
  ``start_cache``, ``query_features`` and ``append`` (the features of one new target
  from the points before it, then its own-y features once its value is drawn).

``causal`` says which points a target may look at: ``False`` (conditional NPs: targets are
independent given the context, so a target's neighbours come from the context only) or
``True`` (autoregressive NPs: target i sees the context and targets *before* i).

Feature groups, per point of the sequence ``[context; targets]`` (``[B, Nc + Nt, F]``)
  * ``x`` [.., Fx]: functions of x only: ``x_n``, ``dx = x - x_n``, ``no_neighbour``.
  * ``seen`` [.., Fs]: functions of already-seen y only (safe in a target's query row):
    ``y_n``, ``D_n`` (slope at the neighbour), ``D_n`` blow-up flag.
  * ``own`` [.., Fo]: functions of the point's own y (hide them in a target's query
    row): ``dy = y - y_n``, ``D`` (slope at the point), ``D`` blow-up flag.
  * ``mean_t`` [B, Nt, Dy]: the hard-coded term (order ``p``) that ``adjust`` adds.

Folding (any registered network, e.g. ``tnp-d``): ``x' = [x, x-group, seen-group]`` and
``y' = [y, own-group]``; the encoder is built for ``folded_dims()``. A network that treats
x as token features (TNP-D, TNP-A, CNP) then gets them without knowing about LocalTaylor:
target tokens never embed ``y'`` so the own features stay hidden. Encoders with
``reads_wrapper_features = True`` (e.g. ``taylorformer``) receive the
:class:`LocalTaylorFeatures` as ``encoder(batch, features=...)`` and place the groups
themselves.

Definitions and decisions
  * Already-seen set: a context point's neighbours are the *other* real context points; a
    target's are the real context points (and, if ``causal``, the real targets before it).
    The point itself is excluded by index, never by sort position, so a duplicate x value
    is a legitimate neighbour at distance 0 but a point is never its own neighbour.
    Padded points (mask 0) are never neighbours.
  * Distance: squared Euclidean distance in x. Ties go to the LOWEST INDEX in the sequence
    ``[context; targets]`` (so context before targets, earlier targets before later ones);
    deterministic, unlike the paper's random choice.
  * Slopes keep their sign: ``D = (y - y_j) / (x - x_j)`` (the public code divides by
    ``|dx|`` and loses the sign). With ``k > 1`` the slope at a point is the average of the
    valid estimates from its ``k`` nearest seen neighbours (the paper's remedy for noise).
  * 2-D inputs: an estimate solves the 2x2 system ``[x - x_a; x - x_b] g = [y - y_a; y - y_b]``
    (closed form) for the gradient ``g``, with ``a`` the nearest seen neighbour and ``b``
    the r-th nearest seen point (r = 1..k) whose displacement ``x - x_b`` makes an angle
    with ``x - x_a`` of sine at least ``min_sin`` (default 0.5, i.e. 30 degrees). Taking
    simply the two nearest points fails on grids (left and right neighbours are collinear:
    a singular system), so the second neighbour is chosen for a well-conditioned solve.
  * Blow-ups: an estimate is invalid when a neighbour is missing, ``|dx| <= min_dx`` (1-D) /
    ``|x - x_a|`` or ``|x - x_b| <= min_dx`` or ``|det| <= min_sin |x - x_a| |x - x_b|``
    (2-D), or any slope component exceeds ``max_slope`` in size (the public code's 200).
    Invalid estimates are left out of the average; if none is valid the slope is 0. The slope's flag is 1 when at least one of
    the k estimates was invalid (also 1 when the point has fewer than the needed neighbours).
  * No seen neighbour at all (e.g. the first target with an empty context): ``x_n = x``,
    ``dx = 0``, ``y_n = 0``, slopes 0, ``no_neighbour = 1``, so the Taylor term is 0.
  * ``q = 0`` adds no features (the paper's W without Taylor terms); ``q = 1`` adds the
    groups above. ``p = 0`` adds ``y_n``; ``p = 1`` adds ``y_n + dx . D_n``.
  * The features are data, not parameters: they are computed in float32 without gradient
    paths through the divisions (safe denominators).

Cost: O((Nc + Nt)^2) memory and time for the pairwise distances of one task (the paper's
noted cost of the RepresentationExtractor); fine for series of a few thousand points.
"""
import typing

import tensorflow as tf

from taylorformer.models import decoding
from taylorformer.errors import SpecError
from taylorformer.checks import check_choice, check_number, check_size

_BIG = 3.0e38
GROUPS = ("x", "seen", "own")


class LocalTaylorFeatures(typing.NamedTuple):
    """What :meth:`LocalTaylor.features` computed for one batch.

    ``x``, ``seen``, ``own``: float32 ``[B, Nc + Nt, F]`` feature groups over the sequence
    ``[context; targets]`` (``F = 0`` with ``q = 0``); ``mean_t``: float32 ``[B, Nt, Dy]``
    Taylor term; ``num_context``: Nc (int or scalar tensor). A named tuple, so it can be
    part of a ``tf.while_loop`` state (cached decoding).
    """

    x: tf.Tensor
    seen: tf.Tensor
    own: tf.Tensor
    mean_t: tf.Tensor
    num_context: object

    def group(self, name):
        """Feature group ``name`` (one of :data:`GROUPS`) over the whole sequence."""
        return getattr(self, name)


def sequence(batch):
    """``x [B, L, Dx]``, ``y [B, L, Dy]`` (float32) and ``valid [B, L]`` (bool) of the
    sequence ``[context; targets]``."""
    x = tf.cast(tf.concat([batch["xc"], batch["xt"]], 1), tf.float32)
    y = tf.cast(tf.concat([batch["yc"], batch["yt"]], 1), tf.float32)
    return x, y, tf.concat([batch["mask_c"], batch["mask_t"]], 1) > 0.5


def allowed_neighbours(valid, nc, causal):
    """``[B, L, L]`` bool: may point j (column) serve as a neighbour of point i (row)?

    ``valid [B, L]`` marks real points of the sequence ``[context; targets]`` whose first
    ``nc`` entries are the context. ``causal=False``: every row sees the context only;
    ``causal=True``: target rows also see earlier targets. The diagonal is always False.
    """
    n = tf.shape(valid)[1]
    i = tf.range(n)[:, None]
    j = tf.range(n)[None, :]
    limit = tf.maximum(i, nc) if causal else tf.fill(tf.shape(i), nc)
    structure = (j < limit) & (j != i)
    return structure[None] & tf.cast(valid, tf.bool)[:, None, :]


def nearest(dist, allowed, m):
    """The ``m`` nearest allowed columns per row, ties to the lowest index.

    Returns ``idx [B, L, m]`` int32 (0 where not found) and ``found [B, L, m]`` bool.
    """
    n = tf.shape(dist)[-1]
    cols = tf.range(n)[None, None, :]
    idx, found = [], []
    for _ in range(m):
        d = tf.where(allowed, dist, _BIG)
        best = tf.reduce_min(d, -1, keepdims=True)
        ok = best[..., 0] < _BIG
        pick = tf.reduce_min(tf.where(allowed & (d == best), cols, n), -1)
        pick = tf.where(ok, pick, 0)
        idx.append(pick)
        found.append(ok)
        allowed = allowed & (cols != pick[..., None])
    return tf.stack(idx, -1), tf.stack(found, -1)


def _gather(values, idx):
    """``values [B, L, ...]`` at ``idx [B, Q, m]`` -> ``[B, Q, m, ...]``."""
    return tf.gather(values, idx, batch_dims=1)


def second_neighbours(xq, x, allowed, first, has_first, k, min_sin):
    """2-D: the ``k`` nearest allowed points at an angle (|sin| > min_sin) to the first.

    ``xq [B, Q, 2]``: the points whose neighbours are searched; ``x [B, L, 2]``: the
    sequence; ``allowed [B, Q, L]``; ``first [B, Q]``: the nearest neighbour's index in
    ``x``. Returns ``idx``/``found [B, Q, k]``.
    """
    a = xq - tf.gather(x, first, batch_dims=1)  # [B, Q, 2]
    b = xq[:, :, None, :] - x[:, None, :, :]  # [B, Q, L, 2]: x_i - x_j
    cross = a[:, :, None, 0] * b[..., 1] - a[:, :, None, 1] * b[..., 0]
    norms = tf.norm(a, axis=-1)[..., None] * tf.norm(b, axis=-1)
    n = tf.shape(x)[1]
    ok = (allowed & has_first[..., None] & (tf.range(n)[None, None, :] != first[..., None])
          & (tf.abs(cross) > min_sin * norms))
    sq = tf.reduce_sum(tf.square(b), -1)
    return nearest(sq, ok, k)


def slope_estimates(xq, yq, x, y, idx, found, dim_x, k, min_dx, max_slope, min_sin=0.5):
    """Slope (1-D) / gradient (2-D) at the points ``xq [B, Q, Dx]``, ``yq [B, Q, Dy]`` from
    their seen neighbours in the sequence ``x [B, L, Dx]``, ``y [B, L, Dy]``.

    ``idx``/``found [B, Q, m]`` index ``x`` (m = k + Dx - 1: in 2-D the nearest neighbour,
    then the k from :func:`second_neighbours`). Returns ``slope [B, Q, Dx, Dy]`` (average
    of the valid estimates) and ``flag [B, Q]`` (1.0 if any of the k estimates was invalid).
    """
    xn, yn = _gather(x, idx), _gather(y, idx)  # [B, Q, m, Dx], [B, Q, m, Dy]
    dx = xq[:, :, None, :] - xn
    dy = yq[:, :, None, :] - yn
    if dim_x == 1:
        dx1 = dx[..., 0]  # [B, Q, k]
        ok = found & (tf.abs(dx1) > min_dx)
        est = dy / tf.where(ok, dx1, 1.0)[..., None]  # [B, Q, k, Dy]
        est = est[:, :, :, None, :]  # [B, Q, k, 1, Dy]
    else:
        a, b = dx[:, :, :1], dx[:, :, 1:]  # nearest vs the (r+1)-th nearest: [B, Q, 1|k, 2]
        ya, yb = dy[:, :, :1], dy[:, :, 1:]
        det = a[..., 0:1] * b[..., 1:2] - a[..., 1:2] * b[..., 0:1]  # [B, Q, k, 1]
        na = tf.norm(a, axis=-1, keepdims=True)
        nb = tf.norm(b, axis=-1, keepdims=True)
        ok = (found[..., :1] & found[..., 1:] & (na[..., 0] > min_dx) & (nb[..., 0] > min_dx)
              & (tf.abs(det[..., 0]) > min_sin * na[..., 0] * nb[..., 0]))
        safe = tf.where(ok[..., None], det, 1.0)
        g0 = (b[..., 1:2] * ya - a[..., 1:2] * yb) / safe  # [B, Q, k, Dy]
        g1 = (a[..., 0:1] * yb - b[..., 0:1] * ya) / safe
        est = tf.stack([g0, g1], -2)  # [B, Q, k, 2, Dy]
    ok = ok & tf.reduce_all(tf.abs(est) <= max_slope, axis=[-2, -1])
    w = tf.cast(ok, x.dtype)
    count = tf.reduce_sum(w, -1)
    slope = tf.reduce_sum(tf.where(ok[..., None, None], est, 0.0), 2) / tf.maximum(count, 1.0)[..., None, None]
    flag = tf.cast(count < k, x.dtype)
    return slope, flag


class LocalTaylor:
    """LocalTaylor wrapper: nearest-seen-neighbour Taylor features (q) and mean term (p).

    Options: ``p`` (0 or 1: order of the Taylor term added to the mean), ``q`` (0 or 1:
    order of the Taylor features given to the network), ``k`` (slope estimates averaged),
    ``max_slope`` (larger estimates count as blow-ups), ``min_dx`` (smaller steps too),
    ``min_sin`` (2-D: smallest sine of the angle between the two neighbours' directions).
    See the module docstring for the exact definitions.
    """

    def __init__(self, dim_x, dim_y, p=0, q=1, k=1, max_slope=200.0, min_dx=1e-6, min_sin=0.5):
        owner = "local-taylor wrapper"
        self.p = int(check_choice(owner, "p", p, (0, 1)))
        self.q = int(check_choice(owner, "q", q, (0, 1)))
        self.k = check_size(owner, "k", k)
        if dim_x not in (1, 2):
            raise SpecError(
                f"local-taylor (the wrapper of the taylorformer, taylorformer-x and taylorformer-xy "
                f"presets) supports 1-D and 2-D inputs x, got dim_x={dim_x}. A csv/ett task's x is "
                f"the window position plus one input per covariate column and two per calendar "
                f"feature (one with calendar_encoding='linear'): one covariate gives 2-D x, a "
                f"calendar feature 3-D. Instead: drop calendar_features (and keep at most one "
                f"covariate), use a preset for any input dim (tnp-d, cnp, te-tnp, te-pt-tnp, "
                f"bsa-tnp, tnp-a), or keep the taylorformer encoder without LocalTaylor with the "
                f"spec overrides \"wrapper\": null and an encoder enc_dim that is a multiple of "
                f"2 * dim_x (docs/tasks.md, 'Which presets take which inputs')")
        self.dim_x, self.dim_y = dim_x, dim_y
        self.max_slope = check_number(owner, "max_slope", max_slope, low=0, low_open=True)
        self.min_dx = check_number(owner, "min_dx", min_dx, low=0)
        self.min_sin = check_number(owner, "min_sin", min_sin, low=0, high=1, high_open=True)

    @property
    def num_neighbours(self):
        """Neighbours searched per point: k (1-D) or k + 1 (2-D)."""
        return self.k + self.dim_x - 1

    @property
    def feature_dims(self):
        if self.q == 0:
            return {"x": 0, "seen": 0, "own": 0}
        g = self.dim_x * self.dim_y
        return {"x": 2 * self.dim_x + 1, "seen": self.dim_y + g + 1, "own": self.dim_y + g + 1}

    def folded_dims(self):
        f = self.feature_dims
        return self.dim_x + f["x"] + f["seen"], self.dim_y + f["own"]

    # ------------------------------------------------------------------ features
    def neighbours(self, xq, x, allowed):
        """``idx``/``found [B, Q, m]``: the seen neighbours in ``x [B, L, Dx]`` of the points
        ``xq [B, Q, Dx]`` (``allowed [B, Q, L]``): the ``k`` nearest (1-D), or the nearest
        then the ``k`` of :func:`second_neighbours` (2-D)."""
        sq = tf.reduce_sum(tf.square(xq[:, :, None, :] - x[:, None, :, :]), -1)  # [B, Q, L]
        if self.dim_x == 1:
            return nearest(sq, allowed, self.k)
        idx, found = nearest(sq, allowed, 1)
        idx2, found2 = second_neighbours(xq, x, allowed, idx[..., 0], found[..., 0], self.k, self.min_sin)
        return tf.concat([idx, idx2], -1), tf.concat([found, found2], -1)

    def slopes(self, xq, yq, x, y, idx, found):
        """Slope and blow-up flag at the points ``(xq, yq)`` (see :func:`slope_estimates`)."""
        return slope_estimates(xq, yq, x, y, idx, found, self.dim_x, self.k, self.min_dx,
                               self.max_slope, self.min_sin)

    def seen_terms(self, xq, x, y, slope, flag, nb, has):
        """What the points ``xq [B, Q, Dx]`` get from their nearest seen neighbour ``nb [B, Q]``
        (``has``: one was found) in the sequence ``x``, ``y`` with per-point ``slope``,
        ``flag``: functions of x and of already-seen y only, known before the points' own y.

        Keys: ``idx``, ``found``, ``y_n``, ``slope_n``, ``flag_n``, ``mean [B, Q, Dy]`` (the
        Taylor term) and the groups ``x``, ``seen`` ``[B, Q, F]``.
        """
        hasf = tf.cast(has, tf.float32)[..., None]
        x_n = tf.where(has[..., None], tf.gather(x, nb, batch_dims=1), xq)
        y_n = tf.gather(y, nb, batch_dims=1) * hasf
        dx = xq - x_n
        slope_n = tf.gather(slope, nb, batch_dims=1) * hasf[..., None]
        flag_n = tf.where(has, tf.gather(flag, nb, batch_dims=1), 1.0)
        mean = y_n
        if self.p == 1:
            mean = mean + tf.reduce_sum(dx[..., :, None] * slope_n, -2)
        out = {"mean": mean, "idx": nb, "found": has, "y_n": y_n, "slope_n": slope_n, "flag_n": flag_n}
        if self.q == 1:
            out["x"] = tf.concat([x_n, dx, 1.0 - hasf], -1)
            out["seen"] = tf.concat([y_n, self._flat(slope_n), flag_n[..., None]], -1)
        else:
            out["x"] = out["seen"] = xq[..., :0]
        return out

    def own_group(self, yq, y_n, has, slope, flag):
        """The ``own`` group ``[B, Q, Fo]`` of points with values ``yq``: ``(y - y_n)``, the
        slope and its flag at the point (empty with ``q = 0``)."""
        if self.q == 0:
            return yq[..., :0]
        hasf = tf.cast(has, tf.float32)[..., None]
        return tf.concat([(yq - y_n) * hasf, self._flat(slope), flag[..., None]], -1)

    def _flat(self, slope):
        """``[B, Q, Dx, Dy] -> [B, Q, Dx * Dy]``."""
        shape = tf.shape(slope)
        return tf.reshape(slope, [shape[0], shape[1], self.dim_x * self.dim_y])

    def neighbour_terms(self, batch, causal):
        """Everything computed from the nearest seen neighbours (dict of tensors).

        Keys: ``x``, ``seen``, ``own`` ``[B, L, F]`` and ``mean`` ``[B, L, Dy]`` (the Taylor
        term) over the sequence of L = Nc + Nt points, plus the raw pieces ``idx``,
        ``found`` (nearest neighbour), ``y_n``, ``slope [B, L, Dx, Dy]``, ``slope_n``,
        ``flag``, ``flag_n`` (for tests and plots).
        """
        x, y, valid = sequence(batch)
        allowed = allowed_neighbours(valid, tf.shape(batch["xc"])[1], causal)
        idx, found = self.neighbours(x, x, allowed)
        slope, flag = self.slopes(x, y, x, y, idx, found)
        out = self.seen_terms(x, x, y, slope, flag, idx[..., 0], found[..., 0])
        out.update(slope=slope, flag=flag, own=self.own_group(y, out["y_n"], found[..., 0], slope, flag))
        return out

    def features(self, batch, causal=False):
        """The wrapper's features of ``batch`` (a :class:`LocalTaylorFeatures`)."""
        f = self.neighbour_terms(batch, causal)
        nc = tf.shape(batch["xc"])[1]
        return LocalTaylorFeatures(x=f["x"], seen=f["seen"], own=f["own"], mean_t=f["mean"][:, nc:],
                                   num_context=nc)

    # ------------------------------------------------------------------ cached decoding
    def start_cache(self, batch):
        """Start incremental decoding (:mod:`taylorformer.models.decoding`) of ``batch``: context and
        targets in generation order (the targets' y are not read).

        Returns ``(state, features)``: ``state`` holds ``x [B, L, Dx]``, ``y [B, L, Dy]``
        (the context's; targets' filled in as they are drawn), ``valid [B, L]`` and the
        per-point ``slope``/``flag`` over the sequence (L = Nc + Nt); ``features``: the
        :class:`LocalTaylorFeatures` of the context (which sees the context only).
        """
        context = decoding.context_only(batch)
        terms = self.neighbour_terms(context, causal=True)
        x, _, valid = sequence(batch)
        nt = tf.shape(batch["xt"])[1]
        pad = lambda v: decoding.pad_slots(v, nt)  # noqa: E731
        state = {"x": x, "y": pad(tf.cast(batch["yc"], tf.float32)), "valid": valid,
                 "slope": pad(terms["slope"]), "flag": pad(terms["flag"])}
        return state, self.features(context, causal=True)

    def query_features(self, state, index):
        """Features of sequence point ``index`` (scalar int32, a target) before its y is
        drawn: its neighbours among the real points before it. Returns ``(features,
        pending)``: a :class:`LocalTaylorFeatures` of one target (groups ``[B, 1, F]``,
        ``own`` zero, ``num_context`` 0) and what :meth:`append` needs."""
        x = state["x"]
        xq = tf.gather(x, index[None], axis=1)  # [B, 1, Dx]
        before = tf.range(tf.shape(x)[1]) < index
        allowed = state["valid"][:, None, :] & before[None, None, :]
        idx, found = self.neighbours(xq, x, allowed)
        terms = self.seen_terms(xq, x, state["y"], state["slope"], state["flag"], idx[..., 0], found[..., 0])
        own = tf.zeros_like(self.own_group(tf.zeros_like(terms["y_n"]), terms["y_n"], found[..., 0],
                                           terms["slope_n"], terms["flag_n"]))
        features = LocalTaylorFeatures(x=terms["x"], seen=terms["seen"], own=own,
                                       mean_t=terms["mean"], num_context=0)
        return features, {"idx": idx, "found": found, "y_n": terms["y_n"]}

    def append(self, state, index, y, features, pending):
        """Point ``index`` took the value ``y [B, 1, Dy]``: returns ``(state, features)`` with
        its y, slope and flag stored and ``features.own`` filled in."""
        xq = tf.gather(state["x"], index[None], axis=1)
        slope, flag = self.slopes(xq, y, state["x"], state["y"], pending["idx"], pending["found"])
        own = self.own_group(y, pending["y_n"], pending["found"][..., 0], slope, flag)
        state = {**state, "y": decoding.write_at(state["y"], index, y),
                 "slope": decoding.write_at(state["slope"], index, slope),
                 "flag": decoding.write_at(state["flag"], index, flag)}
        return state, features._replace(own=own)

    def fold(self, batch, features):
        """``batch`` with ``x' = [x, x-group, seen-group]``, ``y' = [y, own-group]``."""
        if self.q == 0:
            return batch
        nc = features.num_context
        out = dict(batch)
        for side, sl in (("c", slice(None, nc)), ("t", slice(nc, None))):
            xk, yk = "x" + side, "y" + side
            out[xk] = tf.concat([tf.cast(batch[xk], tf.float32), features.x[:, sl], features.seen[:, sl]], -1)
            out[yk] = tf.concat([tf.cast(batch[yk], tf.float32), features.own[:, sl]], -1)
        return out

    def adjust(self, params, features):
        """Add the Taylor term ``features.mean_t`` to the location parameter (``loc``, or
        mixture ``locs``)."""
        base = features.mean_t
        out = dict(params)
        if "loc" in out:
            out["loc"] = out["loc"] + tf.cast(base, out["loc"].dtype)
        elif "locs" in out:
            out["locs"] = out["locs"] + tf.cast(base, out["locs"].dtype)[..., None]
        else:
            raise SpecError("local-taylor needs a likelihood with a 'loc' (or mixture 'locs') "
                            f"parameter to add its Taylor term to; got parameters {sorted(params)}")
        return out

    def get_config(self):
        return {"p": self.p, "q": self.q, "k": self.k, "max_slope": self.max_slope,
                "min_dx": self.min_dx, "min_sin": self.min_sin}
