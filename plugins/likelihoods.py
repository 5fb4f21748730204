"""Likelihood heads (plugin ``builtin-likelihoods``): ``normal``, ``student-t``, ``mixture``,
``bernoulli``, ``categorical``.

Protocol of a likelihood (kind ``likelihood``): a class built with its options, with

* ``num_params(dim_y) -> int``: width of the raw head output per point;
* ``parameters(raw [B, N, P]) -> dict`` of float32 tensors ``[B, N, Dy]`` (constrained);
* ``distribution(params) -> tfd.Distribution`` with batch shape ``[B, N, Dy]``;
* ``get_config() -> dict`` of its options;
* optionally ``support``: the values a discrete output takes (``taylorformer.testing``
  then checks that the probabilities sum to one over them instead of integrating).

The network emits raw tensors; only these objects touch tensorflow-probability
(``tfp.layers`` is Keras-2 only).
"""
import tensorflow as tf
import tensorflow_probability as tfp

from taylorformer.checks import check_choice, check_number, check_size
from taylorformer.hookspecs import hookimpl

tfd = tfp.distributions

#: the smallest normal float32
TINY = 1.1754944e-38


def _positive(raw, floor):
    return floor + tf.nn.softplus(raw)


#: what softplus(raw) of a ``normal`` head is: the scale (sigma) or the variance (sigma^2)
SOFTPLUS_OF = ("scale", "variance")


class Normal:
    """Heteroscedastic Gaussian. ``softplus_of="scale"`` (default): scale = min_scale +
    softplus(raw); ``"variance"``: scale = min_scale + sqrt(softplus(raw)), the head's raw
    output being the "pre-softplus variance" (TE-TNP and TNP papers; their code adds the
    floor to the square root as here)."""

    #: the registry name in option errors
    component_name = "normal"

    def __init__(self, min_scale=1e-3, softplus_of="scale"):
        owner = f"{self.component_name} likelihood"
        self.min_scale = check_number(owner, "min_scale", min_scale, low=0)
        self.softplus_of = check_choice(owner, "softplus_of", softplus_of, SOFTPLUS_OF)

    def num_params(self, dim_y):
        return 2 * dim_y

    def parameters(self, raw):
        raw = tf.cast(raw, tf.float32)
        loc, scale = tf.split(raw, 2, axis=-1)
        if self.softplus_of == "variance":
            # the floor keeps sqrt's gradient finite where softplus underflows to 0 (raw < -87)
            variance = tf.maximum(tf.nn.softplus(scale), tf.constant(TINY, tf.float32))
            return {"loc": loc, "scale": self.min_scale + tf.sqrt(variance)}
        return {"loc": loc, "scale": _positive(scale, self.min_scale)}

    def distribution(self, params):
        return tfd.Normal(params["loc"], params["scale"])

    def get_config(self):
        return {"min_scale": self.min_scale, "softplus_of": self.softplus_of}


class StudentT(Normal):
    """Heavy-tailed Student-t: df = 2 + softplus(raw) (finite variance), floored scale."""

    component_name = "student-t"

    def __init__(self, min_scale=1e-3):
        super().__init__(min_scale)

    def num_params(self, dim_y):
        return 3 * dim_y

    def parameters(self, raw):
        raw = tf.cast(raw, tf.float32)
        loc, scale, df = tf.split(raw, 3, axis=-1)
        return {"loc": loc, "scale": _positive(scale, self.min_scale), "df": 2.0 + tf.nn.softplus(df)}

    def distribution(self, params):
        return tfd.StudentT(params["df"], params["loc"], params["scale"])

    def get_config(self):
        return {"min_scale": self.min_scale}


class Mixture:
    """Mixture of ``components`` Gaussians per output dimension."""

    def __init__(self, components=3, min_scale=1e-3):
        self.components = check_size("mixture likelihood", "components", components)
        self.min_scale = check_number("mixture likelihood", "min_scale", min_scale, low=0)

    def num_params(self, dim_y):
        return 3 * self.components * dim_y

    def parameters(self, raw):
        raw = tf.cast(raw, tf.float32)
        shape = tf.concat([tf.shape(raw)[:-1], [-1, 3 * self.components]], axis=0)
        logits, loc, scale = tf.split(tf.reshape(raw, shape), 3, axis=-1)  # [B, N, Dy, K]
        return {"logits": logits, "locs": loc, "scales": _positive(scale, self.min_scale)}

    def distribution(self, params):
        return tfd.MixtureSameFamily(tfd.Categorical(logits=params["logits"]),
                                     tfd.Normal(params["locs"], params["scales"]))

    def get_config(self):
        return {"components": self.components, "min_scale": self.min_scale}


class Bernoulli:
    """Binary outputs ``y`` in {0, 1}, independent per output dimension: ``P(y = 1) =
    sigmoid(raw)``. Predictive mean ``p``, stddev ``sqrt(p (1 - p))``."""

    support = (0.0, 1.0)

    def num_params(self, dim_y):
        return dim_y

    def parameters(self, raw):
        return {"logits": tf.cast(raw, tf.float32)}

    def distribution(self, params):
        return tfd.Bernoulli(logits=params["logits"], dtype=tf.float32)

    def get_config(self):
        return {}


class Categorical:
    """Class labels ``y`` in {0, ..., classes - 1} (stored as floats), independent per output
    dimension: ``P(y = k) = softmax(raw)_k`` over ``classes`` logits per dimension.

    ``parameters`` gives ``logits [B, N, Dy, classes]``; the distribution is
    ``tfd.Categorical`` with batch shape ``[B, N, Dy]``. Its predictive mean and stddev are
    those of the class index (meaningful for ordered classes); the class probabilities are
    ``softmax(logits)``. A label outside the classes is an error of the log-probability.
    """

    component_name = "categorical"

    def __init__(self, classes=3):
        self.classes = check_size(f"{self.component_name} likelihood", "classes", classes, 2)

    @property
    def support(self):
        return tuple(float(k) for k in range(self.classes))

    def num_params(self, dim_y):
        return self.classes * dim_y

    def parameters(self, raw):
        raw = tf.cast(raw, tf.float32)
        shape = tf.concat([tf.shape(raw)[:-1], [-1, self.classes]], axis=0)
        return {"logits": tf.reshape(raw, shape)}

    def distribution(self, params):
        return tfd.Categorical(logits=params["logits"], dtype=tf.float32)

    def get_config(self):
        return {"classes": self.classes}


@hookimpl
def register_likelihoods(register):
    register("normal", Normal, aliases=["gaussian"])
    register("student-t", StudentT)
    register("mixture", Mixture, description="Mixture of Gaussians per output dimension.")
    register("bernoulli", Bernoulli, description="Binary outputs in {0, 1}: P(y = 1) = sigmoid(raw).")
    register("categorical", Categorical,
             description="Class labels in {0, ..., classes - 1}: P(y = k) = softmax(raw)_k.")
