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
    tfm.replicate("taylorformer-gp-eq", budget="small")  # a published table row (docs/replication.md)

The model classes are imported (and registered with Keras) with the package, so plain
``keras.models.load_model("m.keras")`` works after ``import taylorformer``; the other
front-door names import their modules on first use.

Importing ``taylorformer`` changes no process-wide state beyond what importing TensorFlow
and Keras does: it sets no environment variable and leaves file descriptors alone. The
``taylorformer`` command sets up its own process instead (:mod:`taylorformer.cli`:
``OPENBLAS_NUM_THREADS=1`` and ``TF_CPP_MIN_LOG_LEVEL=2`` unless set, TensorFlow's start-up
log lines kept off stderr unless ``--debug``).

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
    "loglik": "taylorformer.inference",
    "predict": "taylorformer.inference",
    "predict_data": "taylorformer.query",
    "Normaliser": "taylorformer.normaliser",
    "train": "taylorformer.training",
    "Trainer": "taylorformer.training",
    "TrainConfig": "taylorformer.training",
    "replicate": "taylorformer.replication",
}

__all__ = ["registry", "hookimpl", "__version__", "PLUGIN_API_VERSION", *_LAZY]

if os.environ.get(LAZY_IMPORT_ENV, "").strip().lower() not in {"1", "true", "yes", "on"}:
    # the model classes register with Keras here (see the module docstring)
    from taylorformer.models import AutoregressiveNP, ConditionalNP, build_model, load_model  # noqa: F401


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'taylorformer' has no attribute {name!r}")
