"""The ``normal`` likelihood's two scale links against NumPy: ``softplus_of="scale"``
(sigma = floor + softplus(raw)) and ``"variance"`` (sigma = floor + sqrt(softplus(raw)),
the TE-TNP paper's "pre-softplus variance")."""
import numpy as np
import pytest
import tensorflow as tf

from taylorformer import registry, testing
from taylorformer.errors import SpecError


def _softplus(x):
    return np.logaddexp(0.0, x)


def _normal_logpdf(y, loc, scale):
    return -0.5 * np.log(2 * np.pi) - np.log(scale) - 0.5 * ((y - loc) / scale) ** 2


RAW = np.random.default_rng(1).normal(scale=3.0, size=(2, 5, 4)).astype(np.float32)
Y = np.random.default_rng(2).normal(size=(2, 5, 2)).astype(np.float32)


@pytest.mark.parametrize("softplus_of, link", [
    ("scale", _softplus), ("variance", lambda r: np.sqrt(_softplus(r)))])
def test_scale_and_log_density_match_numpy(softplus_of, link):
    lik = registry.get("likelihood", "normal")(min_scale=0.01, softplus_of=softplus_of)
    params = lik.parameters(tf.constant(RAW))
    raw64 = RAW.astype(np.float64)
    loc, scale = raw64[..., :2], 0.01 + link(raw64[..., 2:])
    np.testing.assert_allclose(params["loc"], loc, rtol=0, atol=0)
    np.testing.assert_allclose(params["scale"], scale, rtol=2e-6)
    np.testing.assert_allclose(lik.distribution(params).log_prob(Y), _normal_logpdf(Y, loc, scale),
                               rtol=2e-5, atol=2e-6)


def test_default_is_the_softplus_scale():
    lik = registry.get("likelihood", "normal")()
    assert lik.get_config() == {"min_scale": 1e-3, "softplus_of": "scale"}
    np.testing.assert_allclose(lik.parameters(tf.constant(RAW))["scale"], 1e-3 + _softplus(RAW[..., 2:]), rtol=2e-6)


def test_variance_link_passes_the_plugin_checks():
    testing.check_likelihood("normal", softplus_of="variance")


def test_variance_link_has_finite_gradients_where_softplus_underflows():
    lik = registry.get("likelihood", "normal")(softplus_of="variance")
    raw = tf.constant([[[0.0, -200.0], [0.0, -90.0], [0.0, 3.0]]])  # [1, 3, 2]: loc, raw variance
    with tf.GradientTape() as tape:
        tape.watch(raw)
        logp = lik.distribution(lik.parameters(raw)).log_prob(tf.zeros([1, 3, 1]))
    grad = tape.gradient(logp, raw).numpy()
    assert np.isfinite(logp.numpy()).all() and np.isfinite(grad).all()
    assert float(lik.parameters(raw)["scale"][0, 0, 0]) == pytest.approx(1e-3, rel=1e-6)


def test_bad_softplus_of_is_a_spec_error_naming_it():
    with pytest.raises(SpecError, match="softplus_of.*'variance'"):
        registry.get("likelihood", "normal")(softplus_of="varaince")
