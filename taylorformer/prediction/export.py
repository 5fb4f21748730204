"""Export a conditional model as a TensorFlow SavedModel that serves without taylorformer.

:func:`export_model` (and :func:`taylorformer.workflow.runs.export_run`, ``taylorformer
export RUN --output DIR``)
write a SavedModel whose serving signatures take a context and targets of any size,
**raw data units in, raw data units out**, and no ``yt``:

===================  ==================================================================
signature            inputs (float32) -> outputs (float32)
===================  ==================================================================
``serving_default``  ``xc [B, Nc, Dx]``, ``yc [B, Nc, Dy]``, ``xt [B, Nt, Dx]``
``with_masks``       the same plus ``mask_c [B, Nc]``, ``mask_t [B, Nt]`` (1 real, 0 pad)
===================  ==================================================================

Both return ``mean`` and ``stddev`` ``[B, Nt, Dy]`` of the predictive and the likelihood's
own parameters, named ``param_<name>`` (``param_loc``, ``param_scale``, ``param_df``,
``param_logits``, ``param_locs`` ``[B, Nt, Dy, K]``, ...), every location and scale in the
data's units. ``B``, ``Nc`` and ``Nt`` are free (``Nc`` may be 0); a NaN in ``yc`` is an
unobserved value, as everywhere in taylorformer. Inputs are checked inside the graph
(:func:`input_checks`: finite values, masks of 0 and 1, magnitudes, one batch size and
matching point counts), an ``InvalidArgumentError`` naming the rule otherwise.

The normaliser: the model sees ``(x - x_offset) / x_scale`` and predicts
``(y - y_offset) / y_scale``; the exported function applies that map to ``xc``, ``xt``,
``yc`` and maps the predictive back (``mean * y_scale + y_offset``, ``stddev * |y_scale|``),
so the SavedModel holds the normaliser. It is the model file's (``model.normaliser``,
:mod:`taylorformer.normaliser`; a model without one, a file written before normalisers
were saved, serves in its own units, labelled so) and kept in the SavedModel three ways: the variables
``x_offset``, ``x_scale``, ``y_offset``, ``y_scale`` (``loaded.y_scale.numpy()``),
the string ``loaded.normaliser_json`` and the asset ``assets/normaliser.json``
(offsets, scales, variable names, what ``x`` is, the model spec and the task config; for a
model trained on a csv series task, ``series_inputs``: how to build its window inputs from a
history, :func:`taylorformer.tasks.series_inputs.export_record`).

Not exportable (:func:`export_refusal` says why, ``taylorformer export`` refuses with an
``error:`` line): autoregressive models (``taylorformer``, ``tnp-a``; ``model.causal``),
whose prediction is joint sampling target by target with a per-sample cache in a Python
loop, and whose one-step conditionals would need the unknown ``yt``; and models whose normaliser
records feature groups besides ``x`` (``sc``/``tc``/``st``/``tt``: ``gridded``,
``stations``, the spatial GP tasks; :func:`groups_refusal`).
"""
import json
import os
import tempfile

import numpy as np

from taylorformer.errors import ExportError
from taylorformer.files import Outputs, signals_held
from taylorformer.normaliser import GROUP_KEYS, Normaliser
from taylorformer.prediction.query import MAX_MAGNITUDE

#: parameters that are locations (mapped ``v * y_scale + y_offset``) or scales (``v * |y_scale|``)
LOCATIONS = ("loc", "locs")
SCALES = ("scale", "scales")
#: parameters that do not change with the units of y
UNITLESS = ("df", "logits")


def autoregressive_refusal(name):
    """Why ``name`` (``"its model"``, ``"model 'tnp-a'"``), an autoregressive model, cannot be
    exported (one sentence)."""
    return (f"{name} is an autoregressive model: its prediction draws joint samples one target "
            "after another with a per-sample cache in a Python loop, and its one-step conditionals "
            "need the unknown yt, so no fixed graph serves it; export a conditional model (tnp-d, "
            "cnp, te-tnp, te-pt-tnp, bsa-tnp)")


def export_refusal(model):
    """Why ``model`` cannot be exported (one sentence), or None when it can."""
    if getattr(model, "causal", False):
        return autoregressive_refusal(f"model {model.name!r}")
    return None


def groups_refusal(normaliser):
    """Why a model with ``normaliser`` cannot be served from ``xc``/``yc``/``xt`` alone (its
    task gave it the feature groups ``sc``/``tc``/``st``/``tt``), or None."""
    groups = sorted(set(normaliser.groups) & set(GROUP_KEYS))
    if groups:
        name = (normaliser.task or {}).get("name")
        return (f"its task{'' if name is None else f' {name!r}'} gives the model the feature groups {groups} "
                "(space/time positions) besides x, and the exported signatures take xc, yc, xt (and masks) only")
    return None


def input_checks(xc, yc, xt, mask_c, mask_t):
    """The in-graph assert ops of the serving signatures (each an ``InvalidArgumentError``
    whose message names the input and the rule): the library's own rules for a query
    (:mod:`taylorformer.prediction.query`). ``xc [B, Nc, Dx]``, ``xt [B, Nt, Dx]`` finite;
    ``yc [B, Nc, Dy]`` finite or NaN (unobserved); every magnitude within
    :data:`~taylorformer.prediction.query.MAX_MAGNITUDE` (float32 squares overflow beyond);
    ``mask_c [B, Nc]``, ``mask_t [B, Nt]`` 0 or 1; one batch size ``B`` for all (no
    broadcasting) and one ``Nc`` for ``xc``, ``yc`` and ``mask_c``, one ``Nt`` for ``xt``
    and ``mask_t``."""
    import tensorflow as tf

    def check(condition, message):
        return tf.debugging.Assert(condition, [tf.constant(f"invalid input: {message}")])

    def within(value, allow_nan=False):
        ok = tf.logical_and(tf.math.is_finite(value), tf.abs(value) <= MAX_MAGNITUDE)
        return tf.reduce_all(tf.logical_or(ok, tf.math.is_nan(value)) if allow_nan else ok)

    shape = {k: tf.shape(v) for k, v in {"xc": xc, "yc": yc, "xt": xt, "mask_c": mask_c, "mask_t": mask_t}.items()}
    bound = f"{MAX_MAGNITUDE:.3g}"
    return [
        check(tf.reduce_all(tf.stack([shape[k][0] == shape["xc"][0] for k in ("yc", "xt", "mask_c", "mask_t")])),
              "xc, yc, xt (and mask_c, mask_t) must have the same batch size B (no broadcasting)"),
        check(tf.logical_and(shape["yc"][1] == shape["xc"][1], shape["mask_c"][1] == shape["xc"][1]),
              "xc, yc (and mask_c) must have the same number of context points Nc"),
        check(shape["mask_t"][1] == shape["xt"][1], "xt and mask_t must have the same number of target points Nt"),
        check(within(xc), f"xc must be finite, within +-{bound} (a float32 model squares its inputs)"),
        check(within(xt), f"xt must be finite, within +-{bound} (a float32 model squares its inputs)"),
        check(within(yc, allow_nan=True), f"yc must be finite (NaN: not observed), within +-{bound}"),
        check(tf.reduce_all((mask_c == 0) | (mask_c == 1)), "mask_c values must be 0 (padding) or 1 (real point)"),
        check(tf.reduce_all((mask_t == 0) | (mask_t == 1)), "mask_t values must be 0 (padding) or 1 (real point)"),
    ]


def _module(model, normaliser):
    """The ``tf.Module`` that is saved: the model, the normaliser variables and the two
    serving functions."""
    import tensorflow as tf

    dx, dy = model.dim_x, model.dim_y
    module = tf.Module()
    module.model = model
    # every weight tracked by the module itself: a plugin may keep layers in nested Python
    # containers (te-pt-tnp's blocks) that Keras finds but tf.saved_model's tracking does not
    module.model_variables = [getattr(v, "value", v) for v in model.variables]
    for key in ("x_offset", "x_scale", "y_offset", "y_scale"):
        setattr(module, key, tf.Variable(np.asarray(normaliser[key], np.float32), trainable=False, name=key))
    module.normaliser_json = tf.Variable(json.dumps(normaliser, default=str), trainable=False,
                                         name="normaliser_json")

    def predict(xc, yc, xt, mask_c, mask_t):
        with tf.control_dependencies(input_checks(xc, yc, xt, mask_c, mask_t)):
            xc, yc, xt, mask_c, mask_t = (tf.identity(v) for v in (xc, yc, xt, mask_c, mask_t))
        zx = lambda x: (x - module.x_offset) / module.x_scale  # noqa: E731
        batch = {"xc": zx(xc), "yc": (yc - module.y_offset) / module.y_scale, "xt": zx(xt),
                 "yt": tf.zeros(tf.concat([tf.shape(xt)[:2], [dy]], 0)), "mask_c": mask_c, "mask_t": mask_t}
        params = model(batch, training=False)
        dist = model.predictive_distribution(params)
        scale = tf.abs(module.y_scale)
        out = {"mean": dist.mean() * module.y_scale + module.y_offset, "stddev": dist.stddev() * scale}
        for name, value in params.items():
            # a mixture's locs/scales carry a trailing component axis: [B, Nt, Dy, K]
            per_output = (lambda v: v[:, None]) if value.shape.rank == 4 else (lambda v: v)  # noqa: E731
            if name in LOCATIONS:
                value = value * per_output(module.y_scale) + per_output(module.y_offset)
            elif name in SCALES:
                value = value * per_output(scale)
            out[f"param_{name}"] = value
        return out

    spec = lambda shape: tf.TensorSpec(shape, tf.float32)  # noqa: E731
    inputs = [spec([None, None, dx]), spec([None, None, dy]), spec([None, None, dx])]

    @tf.function(input_signature=inputs + [spec([None, None]), spec([None, None])])
    def with_masks(xc, yc, xt, mask_c, mask_t):
        return predict(xc, yc, xt, mask_c, mask_t)

    @tf.function(input_signature=inputs)
    def serving_default(xc, yc, xt):
        return predict(xc, yc, xt, tf.ones(tf.shape(xc)[:2]), tf.ones(tf.shape(xt)[:2]))

    module.serving_default, module.with_masks = serving_default, with_masks
    return module


def export_model(model, output, normaliser=None, extra=None):
    """Write ``model`` (a conditional NP) as a SavedModel to the new or empty directory
    ``output`` (written beside it, then renamed into place); returns ``output``.

    ``normaliser``: a :class:`~taylorformer.normaliser.Normaliser` (default the model's own
    ``model.normaliser``, saved in its model file; the identity, the model's own units named
    ``x``/``y``, for a model without one); ``extra``: JSON entries added to
    ``assets/normaliser.json`` (e.g. the run)."""
    import tensorflow as tf

    from taylorformer.tasks.series_inputs import export_record, series_layout

    refusal = export_refusal(model)
    if refusal:
        raise ExportError(f"cannot export: {refusal}")
    output = os.path.abspath(Outputs().check_directory(output, "export output"))  # fails before any work
    normaliser = getattr(model, "normaliser", None) if normaliser is None else normaliser
    if normaliser is None:
        normaliser = Normaliser.identity(model.dim_x, model.dim_y)
    if not isinstance(normaliser, Normaliser):
        raise ExportError(f"export 'normaliser' must be a Normaliser, got {type(normaliser).__name__}")
    if (normaliser.dim_x, normaliser.dim_y) != (model.dim_x, model.dim_y):
        raise ExportError(f"export normaliser has dims x {normaliser.dim_x}, y {normaliser.dim_y}; the model has "
                          f"{model.dim_x}, {model.dim_y}")
    refusal = groups_refusal(normaliser)
    if refusal:
        raise ExportError(f"cannot export: {refusal}")
    unknown = [n for n in model.likelihood.parameters(tf.zeros([1, 1, model.likelihood.num_params(model.dim_y)]))
               if n not in LOCATIONS + SCALES + UNITLESS]
    if unknown and not normaliser.identity_y:
        raise ExportError(f"cannot export: the likelihood's parameters {unknown} have no known units, so "
                          "they cannot be mapped back to the data's units")
    layout = series_layout(normaliser)  # a forecaster: how its inputs are built from a history
    series = {} if layout is None else {"series_inputs": export_record(layout)}
    record = {**normaliser.to_dict(), "spec": model.spec, **series, **(extra or {})}
    module = _module(model, record)
    with Outputs() as outputs, tempfile.TemporaryDirectory() as assets:
        saved = outputs.directory(output, "export output")
        asset = os.path.join(assets, "normaliser.json")  # copied into the SavedModel's assets/
        with open(asset, "w") as f:
            json.dump(record, f, indent=1, default=str)
        module.normaliser_file = tf.saved_model.Asset(asset)
        with signals_held():  # SIGINT/SIGTERM arrive after it: a KeyboardInterrupt inside derails TensorFlow
            tf.saved_model.save(module, saved, signatures={"serving_default": module.serving_default,
                                                           "with_masks": module.with_masks})
    return output
