"""Distances of BSA-TNP's bias groups: Euclidean per-pair squared distances and
great-circle distances on the unit sphere (float32, finite gradients at coincident
points)."""
import math

import tensorflow as tf

#: below this squared chord the geodesic uses its series (c + c^2/12 + c^3/90)
_SERIES_BELOW = 1e-4


def unit_vectors(p, coords):
    """float32 ``[..., 3]`` points on the unit sphere from ``latlon``/``lonlat`` degrees or ``xyz``."""
    p = tf.cast(p, tf.float32)
    if coords == "xyz":
        return p * tf.math.rsqrt(tf.maximum(tf.reduce_sum(tf.square(p), -1, keepdims=True), 1e-30))
    lat, lon = (p[..., 0], p[..., 1]) if coords == "latlon" else (p[..., 1], p[..., 0])
    lat, lon = lat * (math.pi / 180.0), lon * (math.pi / 180.0)
    return tf.stack([tf.cos(lat) * tf.cos(lon), tf.cos(lat) * tf.sin(lon), tf.sin(lat)], -1)


def chord_to_geodesic_sq(c):
    """Squared great-circle distance (radians) from a squared chord ``c = |u - v|^2``.

    ``(2 asin(sqrt(c) / 2))^2``, with its Taylor series ``c + c^2/12 + c^3/90`` near 0,
    so that the value and the gradient are finite at coincident points.
    """
    small = c < _SERIES_BELOW
    safe = tf.where(small, tf.ones_like(c), c)
    exact = tf.square(2.0 * tf.asin(tf.minimum(tf.sqrt(safe) * 0.5, 1.0)))
    series = c * (1.0 + c * (1.0 / 12.0 + c * (1.0 / 90.0)))
    return tf.where(small, series, exact)


def pair_sq_dist(pq, pk):
    """``[B, tq, C]``, ``[B, tk, C]`` -> float32 ``[B, tq, tk]`` squared distances, one
    per-pair difference per column (C is small: 1-3)."""
    terms = [tf.square(pq[:, :, c, None] - pk[:, None, :, c]) for c in range(pq.shape[-1])]
    return terms[0] if len(terms) == 1 else tf.add_n(terms)
