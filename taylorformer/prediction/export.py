"""Export a conditional model as a TensorFlow SavedModel that serves without taylorformer.

:func:`export_model` (and :func:`export_run`, ``taylorformer export RUN --output DIR``)
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
unobserved value, as everywhere in taylorformer.

The normaliser: the model sees ``(x - x_offset) / x_scale`` and predicts
``(y - y_offset) / y_scale``; the exported function applies that map to ``xc``, ``xt``,
``yc`` and maps the predictive back (``mean * y_scale + y_offset``, ``stddev * |y_scale|``),
so the SavedModel holds the normaliser. It is read from the run's model file
(:mod:`taylorformer.normaliser`; from the run's task, :func:`task_normaliser`, for a model
file written before normalisers were saved) and kept in the SavedModel three ways: the variables
``x_offset``, ``x_scale``, ``y_offset``, ``y_scale`` (``loaded.y_scale.numpy()``),
the string ``loaded.normaliser_json`` and the asset ``assets/normaliser.json``
(offsets, scales, variable names, what ``x`` is, the model spec and the task config).

Not exportable (:func:`export_refusal` says why, ``taylorformer export`` refuses with an
``error:`` line): autoregressive models (``taylorformer``, ``tnp-a``; ``model.causal``),
whose prediction is joint sampling target by target with a per-sample cache in a Python
loop, and whose one-step conditionals would need the unknown ``yt``; and runs whose task
gives the model feature groups besides ``x`` (``sc``/``tc``/``st``/``tt``: ``gridded``,
``stations``, the spatial GP tasks; :func:`task_refusal`).
"""
import json
import os
import shutil
import tempfile

import numpy as np

from taylorformer.checks import check_choice
from taylorformer.errors import ExportError

#: parameters that are locations (mapped ``v * y_scale + y_offset``) or scales (``v * |y_scale|``)
LOCATIONS = ("loc", "locs")
SCALES = ("scale", "scales")
#: parameters that do not change with the units of y
UNITLESS = ("df", "logits")
#: batch keys of the feature groups (spatio-temporal tasks), which the signatures do not take
GROUP_KEYS = ("sc", "tc", "st", "tt")


def _autoregressive(name):
    return (f"{name} is an autoregressive model: its prediction draws joint samples one target "
            "after another with a per-sample cache in a Python loop, and its one-step conditionals "
            "need the unknown yt, so no fixed graph serves it; export a conditional model (tnp-d, "
            "cnp, te-tnp, te-pt-tnp, bsa-tnp)")


def export_refusal(model):
    """Why ``model`` cannot be exported (one sentence), or None when it can."""
    if getattr(model, "causal", False):
        return _autoregressive(f"model {model.name!r}")
    return None


def task_refusal(task):
    """Why a model trained on ``task`` cannot be served from ``xc``/``yc``/``xt`` alone (its
    batches carry the feature groups ``sc``/``tc``/``st``/``tt`` a model may read), or None."""
    extra = getattr(task, "extra_signature", None)
    groups = sorted(set(extra() if callable(extra) else ()) & set(GROUP_KEYS))
    if groups:
        return (f"its task {getattr(task, 'name', type(task).__name__)!r} gives the model the feature "
                f"groups {groups} (space/time positions) besides x, and the exported signatures take "
                "xc, yc, xt (and masks) only")
    return None


def task_normaliser(task, dim_x, dim_y):
    """The affine normaliser of ``task``'s data (JSON-ready dict of lists):
    :meth:`taylorformer.normaliser.Normaliser.from_task` as a dict (``x_offset``,
    ``x_scale``, ``y_offset``, ``y_scale``, ``x_names``, ``y_names``, ``x_is``, units, ...).

    ``y``: from ``task.to_original_units`` (``y * scale + offset``, evaluated at 0, 1 and 2
    to read and check the map); identity where the task has none (simulated tasks are in
    their own units). ``x``: from the task's ``data_description()`` where it standardises
    raw inputs (``from_arrays``, a csv task's covariates); otherwise the inputs are the
    model's inputs as the task builds them (a window position, calendar features: ``x_is``).
    An ExportError where the task's map is not affine."""
    from taylorformer.errors import SpecError
    from taylorformer.normaliser import Normaliser

    try:
        return Normaliser.from_task(task, dim_x, dim_y).to_dict()
    except SpecError as exc:
        raise ExportError(f"{exc}, which the exported model needs") from None


def check_output_dir(output, protect=()):
    """Refuse an ``output`` that is a file, a non-empty directory, or inside (or equal to)
    one of the ``protect`` directories (a run's own files are never written)."""
    output = os.path.abspath(os.fspath(output))
    for place in protect:
        place = os.path.abspath(os.fspath(place))
        if os.path.commonpath([output, place]) in (place, output):
            raise ExportError(f"export output {output} is inside or contains the run directory {place}; "
                              "choose a directory outside the run")
    if os.path.lexists(output) and not os.path.isdir(output):
        raise ExportError(f"export output {output} exists and is not a directory")
    if os.path.isdir(output) and os.listdir(output):
        raise ExportError(f"export output {output} is not empty; choose a new or empty directory")
    return output


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
        zx = lambda x: (x - module.x_offset) / module.x_scale  # noqa: E731
        batch = {"xc": zx(xc), "yc": (yc - module.y_offset) / module.y_scale, "xt": zx(xt),
                 "yt": tf.zeros(tf.concat([tf.shape(xt)[:2], [dy]], 0)), "mask_c": mask_c, "mask_t": mask_t}
        params = model(batch, training=False)
        dist = model.likelihood.distribution(params)
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

    ``normaliser``: :func:`task_normaliser`'s dict (default: the model's own
    ``model.normaliser``, saved in its model file; identity, the model's own units, for a
    model without one); ``extra``: JSON entries added to ``assets/normaliser.json`` (e.g.
    the task)."""
    import tensorflow as tf

    refusal = export_refusal(model)
    if refusal:
        raise ExportError(f"cannot export: {refusal}")
    output = check_output_dir(output)
    own = getattr(model, "normaliser", None)
    normaliser = dict(normaliser or (own.to_dict() if own is not None
                                     else task_normaliser(None, model.dim_x, model.dim_y)))
    missing = [k for k in ("x_offset", "x_scale", "y_offset", "y_scale") if k not in normaliser]
    if missing:
        raise ExportError(f"export normaliser needs x_offset, x_scale, y_offset, y_scale; missing {missing}")
    for key, dim in (("x_offset", model.dim_x), ("x_scale", model.dim_x), ("y_offset", model.dim_y),
                     ("y_scale", model.dim_y)):
        value = np.asarray(normaliser[key], np.float64)
        if value.shape != (dim,) or not np.all(np.isfinite(value)) or ("scale" in key and np.any(value == 0)):
            raise ExportError(f"export normaliser {key!r} must be {dim} finite numbers"
                              f"{' (nonzero)' if 'scale' in key else ''}, got {normaliser[key]!r}")
    unknown = [n for n in model.likelihood.parameters(tf.zeros([1, 1, model.likelihood.num_params(model.dim_y)]))
               if n not in LOCATIONS + SCALES + UNITLESS]
    identity_y = np.all(np.asarray(normaliser["y_offset"]) == 0) and np.all(np.asarray(normaliser["y_scale"]) == 1)
    if unknown and not identity_y:
        raise ExportError(f"cannot export: the likelihood's parameters {unknown} have no known units, so "
                          "they cannot be mapped back to the data's units")
    record = {**normaliser, "spec": model.spec, **(extra or {})}
    module = _module(model, record)
    parent = os.path.dirname(output) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".tmp-{os.path.basename(output)}-", dir=parent)
    try:
        asset_dir = os.path.join(tmp, "normaliser")
        os.mkdir(asset_dir)
        asset = os.path.join(asset_dir, "normaliser.json")
        with open(asset, "w") as f:
            json.dump(record, f, indent=1, default=str)
        module.normaliser_file = tf.saved_model.Asset(asset)
        saved = os.path.join(tmp, "saved_model")
        tf.saved_model.save(module, saved, signatures={"serving_default": module.serving_default,
                                                       "with_masks": module.with_masks})
        if os.path.isdir(output):
            os.rmdir(output)  # empty: checked above
        os.replace(saved, output)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return output


def export_run(run_dir, output, checkpoint="best", task=None, task_config=None):
    """Export the model of a run (``checkpoint`` ``best`` or ``model``) with its task's
    normaliser (:func:`task_normaliser`; ``task``: as in :func:`taylorformer.workflow.runs.load_run`)
    to ``output``, a new or empty directory outside the run; returns ``output``."""
    from taylorformer.workflow.run_dir import RunDirectory
    from taylorformer.workflow.runs import _task_label, load_run

    check_choice("export", "checkpoint", checkpoint, ("best", "model"))
    check_output_dir(output, protect=[run_dir])
    run = RunDirectory(run_dir)
    spec = run.read_spec()
    if spec.get("kind") == "autoregressive":  # refuse before loading the task's data
        raise ExportError(f"cannot export run {run_dir}: " + _autoregressive("its model"))
    config = run.read_config()
    model = run.load_model(checkpoint)
    saved = model.normaliser if task is None and task_config is None else None
    if saved is not None:  # the model file's own normaliser: the task is not rebuilt
        groups = sorted(set(saved.groups) & set(GROUP_KEYS))
        if groups:
            name = (saved.task or {}).get("name", config.get("task"))
            raise ExportError(f"cannot export run {run_dir}: its task {name!r} gives the model the feature "
                              f"groups {groups} (space/time positions) besides x, and the exported "
                              "signatures take xc, yc, xt (and masks) only")
        normaliser = saved.to_dict()
    else:  # a model file written before normalisers were saved, or another task asked for
        model, task_obj, config = load_run(run_dir, checkpoint, task, task_config)
        refusal = task_refusal(task_obj)
        if refusal:
            raise ExportError(f"cannot export run {run_dir}: {refusal}")
        normaliser = task_normaliser(task_obj, model.dim_x, model.dim_y)
    extra = {"task": _task_label(task, config), "task_config": config.get("task_config"),
             "run_dir": os.path.abspath(run_dir), "checkpoint": checkpoint}
    return export_model(model, output, normaliser, extra)
