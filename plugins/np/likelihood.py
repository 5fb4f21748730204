"""``np-normal``: the Gaussian decoder link of the NP/ANP literature (kind ``likelihood``)."""
import tensorflow as tf
import tensorflow_probability as tfp

from taylorformer.checks import check_number

tfd = tfp.distributions


class NPNormal:
    """Gaussian with ``scale = min_scale + (1 - min_scale) * softplus(raw)``: with
    ``min_scale=0.1`` the ``0.1 + 0.9 softplus`` of Le et al. (2018), Kim et al. (2019) and
    the NP/ANP code of Nguyen & Grover (2022). Parameters ``loc``, ``scale`` ``[B, N, Dy]``."""

    component_name = "np-normal"

    def __init__(self, min_scale=0.1):
        self.min_scale = check_number(f"{self.component_name} likelihood", "min_scale", min_scale,
                                      low=0, high=1, high_open=True)

    def num_params(self, dim_y):
        return 2 * dim_y

    def parameters(self, raw):
        loc, scale = tf.split(tf.cast(raw, tf.float32), 2, axis=-1)
        return {"loc": loc, "scale": self.min_scale + (1.0 - self.min_scale) * tf.nn.softplus(scale)}

    def distribution(self, params):
        return tfd.Normal(params["loc"], params["scale"])

    def get_config(self):
        return {"min_scale": self.min_scale}
