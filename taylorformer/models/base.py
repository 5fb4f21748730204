"""NeuralProcess: the plumbing every NP model shares (spec as config, head, likelihood,
wrapper), and the one path from a resolved spec to a built model (:meth:`from_spec`).

encoder (registered) -> target representations [B, Nt, Dz] -> head MLP -> raw
parameters [B, Nt, P] (float32) -> likelihood (registered) -> parameter dict ->
``tfp.distributions.Distribution`` with batch shape [B, Nt, Dy].
The model's Keras config is its resolved spec, so save/load rebuilds it exactly.

A spec ``"wrapper"`` (kind ``wrapper``, e.g. ``local-taylor``) wraps the network through
its protocol (``docs/plugins.md``): ``features = wrapper.features(batch, causal)`` before
the encoder; an encoder that declares ``reads_wrapper_features = True`` is called as
``encoder(batch, features=features)``, any other one on ``wrapper.fold(batch, features)``
(built for ``wrapper.folded_dims()``); after the likelihood's ``parameters``,
``wrapper.adjust(params, features)``.

With ``observed_flags`` (spec; on by default when ``Dy > 1``) the encoder's output values
are ``concat([y, observed])`` (``[B, N, 2 Dy]``, :func:`taylorformer.batch.append_observed_flags`): a point
with some outputs missing still informs the observed ones, and the token says which.
"""
import contextlib

import keras
import tensorflow as tf

from taylorformer import components, registry, tf_compat
from taylorformer.models import initialisation, window_standardisation
from taylorformer.checks import MAX_PARAMETERS
from taylorformer.batch import append_observed_flags, fully_observed, validate_batch, with_masks
from taylorformer.errors import BatchError, SpecError
from taylorformer.models.layers import MLP
from taylorformer.models.fitting import FitMixin
from taylorformer.spec import resolve_spec


def check_finite_outputs(outputs, batch, where, sample_dims=0):
    """Raise :class:`BatchError` when ``outputs`` (a dict or list of tensors
    ``[*sample_dims, B, Nt, ...]``) hold NaN/inf at a real target
    (``mask_t == 1``) of ``batch`` (after :func:`with_masks`, finite inputs). A float32
    network overflows on finite inputs of about 1e19 and beyond (their squares pass
    3.4e38): the message gives the largest input magnitudes so the user can rescale.
    Eager tensors only (a no-op in a graph)."""
    if not tf.executing_eagerly():
        return
    mask = tf.cast(batch["mask_t"], tf.bool)  # [B, Nt]
    values = outputs.values() if isinstance(outputs, dict) else outputs
    bad = 0
    for value in values:
        value = tf.convert_to_tensor(value)
        if not value.dtype.is_floating:
            continue
        flags = ~tf.math.is_finite(value)
        for _ in range(sample_dims):
            flags = tf.reduce_any(flags, 0)
        while flags.shape.rank > 2:  # parameter dims
            flags = tf.reduce_any(flags, -1)
        if flags.shape != mask.shape:  # a parameter not laid out per target: no mask to apply
            flags, mask_here = tf.reshape(tf.reduce_any(flags), [1]), tf.constant([True])
        else:
            mask_here = mask
        bad += int(tf.reduce_sum(tf.cast(flags & mask_here, tf.int32)))
    if not bad:
        return

    def largest(key):
        v = tf.abs(tf.cast(batch[key], tf.float64))
        return float(tf.reduce_max(tf.where(tf.math.is_nan(v), tf.zeros_like(v), v))) if tf.size(v) else 0.0

    raise BatchError(f"{where}: the model's outputs are NaN/inf at {bad} target point(s) of a batch of finite "
                     f"inputs (largest |x| {max(largest('xc'), largest('xt')):.3g}, |y| {largest('yc'):.3g}): "
                     f"float32 arithmetic overflows for values of about 1e19 and beyond; standardise or "
                     f"rescale the inputs and outputs (a task's to_original_units maps predictions back)")


@contextlib.contextmanager
def parameter_budget(limit):
    """Refuse (SpecError) to create more than ``limit`` weights in all, as variables are
    created: a spec whose options are each within bounds (:data:`taylorformer.checks.SIZE_BOUNDS`)
    but together ask for more weights than a machine holds fails once it crosses the
    limit, not after minutes of building. (Keras turns an error in its automatic build
    into a warning: the refusal is raised again when the block ends, and the variables the
    interrupted build left for Keras to initialize are forgotten, so later builds work.)"""
    total, refusal = 0, []

    def creator(next_creator, **kwargs):
        nonlocal total
        total += _variable_size(kwargs) or 0
        if total > limit:
            refusal.append(f"the model spec asks for more than {limit:,} weights (MAX_PARAMETERS; "
                           f"{total:,} at variable {kwargs.get('name')!r}): make it smaller (fewer "
                           "layers, narrower widths)")
            raise SpecError(refusal[0])
        return next_creator(**kwargs)

    with tf_compat.keras_uninitialized_variables_restored_on_error():
        with tf.variable_creator_scope(creator):
            yield
        if refusal:
            raise SpecError(refusal[0])


def _variable_size(kwargs):
    """Elements of the variable ``tf.Variable(**kwargs)`` would create, before it does (a
    Keras variable hands TensorFlow a lazy initial value that closes over the Keras
    variable, whose shape is known); None where unknown."""
    shape = kwargs.get("shape")
    value = kwargs.get("initial_value")
    if shape is None and callable(value):
        cells = [c.cell_contents for c in getattr(value, "__closure__", None) or ()]
        shape = next((c.shape for c in cells if isinstance(c, keras.Variable)), None)
    elif shape is None and value is not None:
        shape = getattr(value, "shape", None)
    try:
        return tf.TensorShape(shape).num_elements() if shape is not None else None
    except (TypeError, ValueError):
        return None


@contextlib.contextmanager
def dtype_policy_scope(policy):
    """Keras' global dtype policy set to ``policy`` (a name such as ``"mixed_bfloat16"``;
    ``None``: unchanged) inside the block, restored after it. Each layer keeps the policy
    it was created with, so a model built inside the block keeps it, and models built
    later in the process are not affected."""
    if not policy:
        yield
        return
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


class NeuralProcess(FitMixin, keras.Model):
    """Shared plumbing of NP models: spec as config, likelihood, head, wrapper, loading,
    and Keras ``compile``/``fit``/``evaluate`` with the NP loss (:mod:`.fitting`)."""

    #: may target i condition on targets before it? (picks the wrapper's neighbour sets)
    causal = False

    def __init__(self, spec, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec
        self.dim_x, self.dim_y = spec["dim_x"], spec["dim_y"]
        self.likelihood = components.build("likelihood", spec["likelihood"], "likelihood")
        self.head = MLP(self.likelihood.num_params(self.dim_y), output_dtype="float32",
                        name="head", **spec["head"])
        self.wrapper = None
        if spec.get("wrapper") is not None:
            self.wrapper = components.build("wrapper", spec["wrapper"], "wrapper",
                                            dim_x=self.dim_x, dim_y=self.dim_y)
        entry = components.normalize(spec["encoder"], "encoder")
        reads = getattr(registry.get("encoder", entry["name"]), "reads_wrapper_features", False)
        self._fold = self.wrapper is not None and not reads
        dim_x, dim_y = self.wrapper.folded_dims() if self._fold else (self.dim_x, self.dim_y)
        self.observed_flags = spec["observed_flags"]
        if self.observed_flags:
            dim_y += self.dim_y
        self.encoder = components.build("encoder", entry, "encoder", dim_x=dim_x, dim_y=dim_y)
        self.standardise = spec.get("standardise", "global")
        self.standardise_min_scale = spec.get("standardise_min_scale", window_standardisation.DEFAULT_MIN_SCALE)
        if self.standardise in window_standardisation.WINDOW_MODES:
            window_standardisation.check_likelihood(self.likelihood, self.dim_y, spec["likelihood"]["name"])
        self.training_range = window_standardisation.TrainingRange(self.dim_x, self.dim_y)
        self._init_fit_state()

    @classmethod
    def from_spec(cls, spec, name=None, initialise=True):
        """The model of a resolved spec (:func:`taylorformer.spec.resolve_spec`), built
        under its dtype policy, with its variables created and (``initialise``) drawn under
        the spec's ``init``; a model being loaded skips the draw, its weights come from the file."""
        kwargs = {"name": name} if name else {}
        with dtype_policy_scope(spec["dtype_policy"]), parameter_budget(MAX_PARAMETERS):
            model = cls(spec, **kwargs)
            model(model.dummy_batch())  # create the variables now: summaries and loading need them
            if initialise:
                initialisation.initialise(model, spec.get("init", "keras"))
        return model

    def prepare(self, batch):
        """Add default masks; validate the batch when running eagerly."""
        if tf.executing_eagerly():
            validate_batch(batch, self.dim_x, self.dim_y)
        return with_masks(batch)

    def call(self, batch, training=None):
        """Distribution parameters (dict of float32 ``[B, Nt, ...]`` tensors) in the batch's
        units: the network's own (:meth:`network`), or with ``standardise: window`` the
        network's in window units mapped back."""
        batch = self.prepare(batch)
        if self.standardise not in window_standardisation.WINDOW_MODES:
            return self.network(batch, training=training)
        shift, scale = self.window_statistics(batch)
        params = self.network(window_standardisation.to_window_units(batch, shift, scale), training=training)
        return window_standardisation.to_original_units(params, shift, scale, self.likelihood)

    def window_statistics(self, batch):
        """``(shift, scale)`` float64 ``[B, 1, Dy]``: each window's context mean (``standardise:
        last``: its last observed value) and floored std (``batch`` prepared;
        :func:`~taylorformer.models.window_standardisation.context_statistics`)."""
        return window_standardisation.context_statistics(batch, self.standardise_min_scale, self.standardise)

    def network_inputs(self, batch):
        """``batch`` (prepared) as the network reads it (in window units with ``standardise:
        window`` or ``last``)."""
        if self.standardise not in window_standardisation.WINDOW_MODES:
            return batch
        return window_standardisation.to_window_units(batch, *self.window_statistics(batch))

    def check_training_range(self, batch):
        """Warn where a context of ``batch`` (prepared) lies far outside the inputs seen in
        training (:meth:`TrainingRange.check <taylorformer.models.window_standardisation.TrainingRange.check>`)."""
        if tf.executing_eagerly():
            self.training_range.check(self.network_inputs(batch), self.standardise)

    def network(self, batch, training=None):
        """The network's parameters for ``batch`` (prepared) in its own units:
        wrapper features, encoder, head, likelihood, wrapper adjustment."""
        features = None
        if self.wrapper is not None:
            features = self.wrapper.features(fully_observed(batch), causal=self.causal)
        inputs, kwargs = self._encoder_inputs(batch, features)
        params = self.likelihood.parameters(self.head(self.encoder(inputs, training=training, **kwargs)))
        return params if self.wrapper is None else self.wrapper.adjust(params, features)

    def _encoder_inputs(self, batch, features):
        """What the encoder gets for ``batch`` (after :meth:`prepare`): ``(batch, keyword
        args)``, the wrapper's features folded in or handed over, then the observed flags
        appended to the output values when the spec asks for them."""
        kwargs = {}
        if self.wrapper is not None:
            if self._fold:
                batch = self.wrapper.fold(batch, features)
            else:
                kwargs = {"features": features}
        if self.observed_flags:
            batch = append_observed_flags(batch, self.dim_y)
        return batch, kwargs

    def distribution(self, batch, training=False):
        """The ``tfp`` distribution the log-likelihood scores, batch shape ``[B, Nt, Dy]``:
        the predictive of a conditional model, the teacher-forced conditionals of an
        autoregressive one (``ConditionalNP.predict_distribution`` and
        ``AutoregressiveNP.teacher_forced_distribution`` name it for users)."""
        params = self(batch, training=training)
        if tf.executing_eagerly() and not training:
            prepared = with_masks(batch)
            check_finite_outputs(params, prepared, f"model {self.name!r}")
            self.check_training_range(prepared)
        return self.predictive_distribution(params)

    def compiled_distribution(self, batch):
        """:meth:`distribution` (inference) with the forward pass in a ``tf.function``,
        traced once per batch shape; the batch is validated eagerly first. A tiled
        attention then runs its compiled loop (in query chunks on a CPU) instead of tile by
        tile in Python, several times faster (benchmarks/README.md, "Compiled against eager
        inference"). For batches of one shape at a time (a new shape retraces)."""
        batch = self.prepare(batch)
        if getattr(self, "_compiled_call", None) is None:
            self._compiled_call = tf.function(lambda b: self(b, training=False))
        params = self._compiled_call(batch)
        check_finite_outputs(params, batch, f"model {self.name!r}")
        self.check_training_range(batch)
        return self.predictive_distribution(params)

    def predictive_distribution(self, params):
        """The ``tfp`` distribution of the parameters :meth:`call` returns (the likelihood's;
        a latent model's is a mixture over draws of z)."""
        return self.likelihood.distribution(params)

    def dummy_batch(self, nc=3, nt=2):
        zeros = lambda n, d: tf.zeros([1, n, d])  # noqa: E731
        return {"xc": zeros(nc, self.dim_x), "yc": zeros(nc, self.dim_y),
                "xt": zeros(nt, self.dim_x), "yt": zeros(nt, self.dim_y)}

    # ------------------------------------------------------------------ data units
    @property
    def normaliser(self):
        """The :class:`taylorformer.normaliser.Normaliser` between the data's units and this
        model's (saved in the model file), or None: the model works in its own units."""
        return self.__dict__.get("_normaliser")

    @normaliser.setter
    def normaliser(self, value):
        from taylorformer.normaliser import Normaliser

        if value is not None:
            if not isinstance(value, Normaliser):
                raise SpecError(f"model normaliser must be a Normaliser or None, got {type(value).__name__}")
            if (value.dim_x, value.dim_y) != (self.dim_x, self.dim_y):
                raise SpecError(f"model normaliser has dims x {value.dim_x}, y {value.dim_y}; the model "
                                f"has dim_x {self.dim_x}, dim_y {self.dim_y}")
        self.__dict__["_normaliser"] = value

    @property
    def model_card(self):
        """The model card (:mod:`taylorformer.model_card`; a JSON dict saved in the model
        file), or None."""
        return self.__dict__.get("_model_card")

    @model_card.setter
    def model_card(self, value):
        import json

        if value is not None and not isinstance(value, dict):
            raise SpecError(f"model card must be a dict or None, got {type(value).__name__}")
        # a plain JSON copy (Keras would track a dict attribute)
        self.__dict__["_model_card"] = None if value is None else json.loads(json.dumps(dict(value)))

    def get_config(self):
        """``spec`` and ``name``, plus the ``normaliser`` and ``model_card`` where set (a
        model file then carries them: :mod:`taylorformer.model_card`), and the inputs seen in
        training (``trained_range``: :class:`taylorformer.models.window_standardisation.TrainingRange`)."""
        config = {"spec": self.spec, "name": self.name}
        if self.normaliser is not None:
            config["normaliser"] = self.normaliser.to_dict()
        if self.model_card is not None:
            config["model_card"] = self.model_card
        trained = self.training_range.get_config()
        if trained is not None:
            config["trained_range"] = trained
        return config

    @classmethod
    def from_config(cls, config):
        """The model of a saved config. Its ``spec`` must be the spec dict itself: a string
        (a preset name or a path) is refused, so loading a file never reads another one.
        A config without ``normaliser``/``model_card`` (a file written before they were
        saved) gives a model with none."""
        from taylorformer.normaliser import Normaliser

        spec = config.get("spec") if isinstance(config, dict) else None
        if not isinstance(spec, dict):
            raise SpecError(f"{cls.__name__} config: 'spec' must be the model's spec dict, got "
                            f"{type(spec).__name__} {spec!r:.80}; a saved spec is data, never a path")
        normaliser = config.get("normaliser")
        if normaliser is not None:
            normaliser = Normaliser.from_dict(normaliser, where=f"{cls.__name__} config 'normaliser'")
        card = config.get("model_card")
        if card is not None and not isinstance(card, dict):
            raise SpecError(f"{cls.__name__} config 'model_card' must be a dict, got {type(card).__name__}")
        model = cls.from_spec(resolve_spec(spec), name=config.get("name"), initialise=False)
        model.normaliser, model.model_card = normaliser, card
        model.training_range.set_config(config.get("trained_range"))
        return model

    def get_build_config(self):
        return {"dim_x": self.dim_x, "dim_y": self.dim_y}

    def build_from_config(self, config):
        self(self.dummy_batch())
