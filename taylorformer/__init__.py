"""taylorformer: neural processes for TensorFlow/Keras 3 around a plugin registry.

Front door::

    import taylorformer as tfm
    model = tfm.build_model("tnp-d", dim_x=1, dim_y=1)
    dist = model.predict_distribution(batch)      # tfp Distribution over yt
    ll = tfm.loglik(model, batch)                 # [batch] mean log-lik per target
    out = tfm.predict(model, batch, num_samples=20)

Heavy modules (TensorFlow) are imported on first use of these names, so that
``taylorformer.registry`` stays cheap to import.
"""
import importlib

from taylorformer import registry
from taylorformer.hookspecs import hookimpl

__version__ = "0.1.0"

_LAZY = {
    "build_model": "taylorformer.models",
    "resolve_spec": "taylorformer.spec",
    "load_model": "taylorformer.models",
    "loglik": "taylorformer.inference",
    "predict": "taylorformer.inference",
}

__all__ = ["registry", "hookimpl", "__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'taylorformer' has no attribute {name!r}")
