"""taylorformer: neural processes for TensorFlow/Keras 3 around a plugin registry.

Front door::

    import taylorformer as tfm
    model = tfm.build_model("tnp-d", dim_x=1, dim_y=1)
    dist = model.predict_distribution(batch)      # tfp Distribution over yt
    ll = tfm.loglik(model, batch)                 # [batch] mean log-lik per target
    out = tfm.predict(model, batch, num_samples=20)
    out = tfm.predict_data(model, xc, yc, xt)     # raw data in, data units out (model.normaliser)
    model.compile(optimizer="adamw"); model.fit(task.dataset("train", batch_size=16), ...)
    tfm.train("tnp-d", "gp", steps=2000)          # the CLI's run-directory training
    tfm.evaluate_run("runs/x")                    # a finished run's metrics (JSON dict)
    tfm.cross_validate_run("runs/x", folds=5)     # a survey's held-out points, beside kriging
    tfm.place(model, candidates, context, k=5)    # sensor placement (docs/placement.md)
    tfm.export_run("runs/x", "served")            # a SavedModel that serves without taylorformer
    tfm.predict_field(model, points, grid)        # a field on a grid's coordinates (docs/fields.md)
    tfm.forecast("runs/x", "series.csv", horizon=24)   # the steps after a series' history (docs/forecasting.md)

The model classes are imported (and registered with Keras) with the package, so plain
``keras.models.load_model("m.keras")`` works after ``import taylorformer``; the other
front-door names import their modules on first use.

Importing ``taylorformer`` changes no process-wide state beyond what importing TensorFlow
and Keras does: it sets no environment variable and leaves file descriptors alone. The
``taylorformer`` command sets up its own process instead (:mod:`taylorformer.cli`:
``OPENBLAS_NUM_THREADS=1`` and ``TF_CPP_MIN_LOG_LEVEL=2`` unless set, TensorFlow's start-up
log lines kept off stderr unless ``--debug``).

Where things live (README.md, "Layout", has the short form). At the top, the front door and
the plugin contract, the modules a plugin or a user imports (few and flat, as simonw/llm keeps
``hookspecs.py`` and ``plugins.py``); below, one folder per part with one role per module (as
keras-hub lays out a model family, ``keras_hub/src/models/gemma/``)::

    plugin contract   hookspecs  registry  plugin_api  errors  checks
                      task  batch  spec  components  attention/  testing
    models/           the NP family: base, conditional, autoregressive, build, fitting, layers,
                      inference (loglik, predict), decoding, bounded_sampling, target_order,
                      window_standardisation
    prediction/       using a trained model: query, fields, placement, calibration, export
    workflow/         a training run: training, callbacks, run_dir, runs, evaluation, baselines,
                      forecasting (a series forecast from its history)
    plotting/         figures, one module per kind of data
    the model file    normaliser (data units <-> model units), model_card (read without TensorFlow)
    the rest          cli (the command), tf_compat (private TF/Keras APIs), pixel_grid,
                      files (atomic writes, output path checks), coordinates (which
                      coordinate is latitude or longitude), attention_executor (plugin
                      API 1 names, re-exported from attention/)

Imports point down, in the order tests/core/test_import_graph.py's ``LAYERS`` states:
helpers (errors, checks, files, batch, normaliser, ...), attention, the plugin contract,
registry, spec, the records (model card), models, plotting, tasks, prediction, workflow,
plugins, the command line. The published rows and their runner are a plugin of their own,
``taylorformer_replication`` (``pip install -e plugins/replication``; docs/replication.md).

``TAYLORFORMER_LAZY_IMPORT=1`` imports the package without TensorFlow: the model names
import :mod:`taylorformer.models` (and register the classes with Keras) on first use, so
``keras.models.load_model`` then needs ``import taylorformer.models`` or
``tfm.load_model`` first. The ``taylorformer`` command imports the package this way, so
that ``--help``, ``--version`` and argument errors answer without loading TensorFlow.
"""
import importlib
import os

from taylorformer import registry
from taylorformer.hookspecs import hookimpl
from taylorformer.plugin_api import PLUGIN_API_VERSION

__version__ = "0.1.0"

#: set to 1 to import the package without TensorFlow (the command line does)
LAZY_IMPORT_ENV = "TAYLORFORMER_LAZY_IMPORT"

_LAZY = {
    "AutoregressiveNP": "taylorformer.models",
    "ConditionalNP": "taylorformer.models",
    "build_model": "taylorformer.models",
    "load_model": "taylorformer.models",
    "resolve_spec": "taylorformer.spec",
    "loglik": "taylorformer.models.inference",
    "predict": "taylorformer.models.inference",
    "predict_data": "taylorformer.prediction.query",
    "Normaliser": "taylorformer.normaliser",
    "train": "taylorformer.workflow.training",
    "Trainer": "taylorformer.workflow.training",
    "TrainConfig": "taylorformer.workflow.training",
    "evaluate_run": "taylorformer.workflow.runs",
    "cross_validate": "taylorformer.workflow.cross_validation",
    "cross_validate_run": "taylorformer.workflow.runs",
    "place": "taylorformer.prediction.placement",
    "export_model": "taylorformer.prediction.export",
    "export_run": "taylorformer.workflow.runs",
    "predict_field": "taylorformer.prediction.fields",
    "forecast": "taylorformer.workflow.forecasting",
}

#: modules the docs import from the package itself (docs/calibration.md: ``calibration``),
#: loaded on first use
_LAZY_MODULES = {
    "calibration": "taylorformer.prediction.calibration",
}

__all__ = ["registry", "hookimpl", "__version__", "PLUGIN_API_VERSION", *_LAZY, *_LAZY_MODULES]

if os.environ.get(LAZY_IMPORT_ENV, "").strip().lower() not in {"1", "true", "yes", "on"}:
    # the model classes register with Keras here (see the module docstring)
    from taylorformer.models import AutoregressiveNP, ConditionalNP, build_model, load_model  # noqa: F401


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _LAZY_MODULES:
        return importlib.import_module(_LAZY_MODULES[name])
    raise AttributeError(f"module 'taylorformer' has no attribute {name!r}")
