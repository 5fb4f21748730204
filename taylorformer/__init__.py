"""taylorformer: neural processes for TensorFlow/Keras 3 around a plugin registry.

Front door::

    import taylorformer as tfm
    model = tfm.build_model("tnp-d", dim_x=1, dim_y=1)
    dist = model.predict_distribution(batch)      # tfp Distribution over yt
    ll = tfm.loglik(model, batch)                 # [batch] mean log-lik per target
    out = tfm.predict(model, batch, num_samples=20)
    model.compile(optimizer="adamw"); model.fit(task.dataset("train", batch_size=16), ...)
    tfm.train("tnp-d", "gp", steps=2000)          # the CLI's run-directory training
    tfm.replicate("taylorformer-gp-eq", budget="small")  # a published table row (docs/replication.md)

The model classes are imported (and registered with Keras) with the package, so plain
``keras.models.load_model("m.keras")`` works after ``import taylorformer``; the other
front-door names import their modules on first use.
"""
import importlib
import os
import re
import sys
import tempfile

# Before NumPy and TensorFlow load: task simulators run many small NumPy Cholesky
# factorisations, which a multi-threaded OpenBLAS makes 10-25x slower on a 2-core machine
# (TensorFlow does not use OpenBLAS); and TensorFlow's C++ start-up chatter stays quiet.
# Both are defaults only: a value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: start-up lines TensorFlow writes to stderr although TF_CPP_MIN_LOG_LEVEL >= 2 asks for
#: quiet (absl prints them before it reads the level): they would bury the CLI's one-line
#: errors on every machine without CUDA drivers
_TF_STARTUP_NOISE = re.compile(
    r"All log messages before absl::InitializeLog|cudart_stub\.cc.*Could not find cuda drivers")


def _import_tensorflow():
    """Import TensorFlow; at TF_CPP_MIN_LOG_LEVEL >= 2 drop :data:`_TF_STARTUP_NOISE` from
    what it writes to stderr (fd 2) while importing, and replay every other line."""
    quiet = os.environ["TF_CPP_MIN_LOG_LEVEL"].strip() in ("2", "3")
    try:
        sys.stderr.flush()
        saved = os.dup(2) if quiet and "tensorflow" not in sys.modules else None
    except (OSError, ValueError):  # no usable stderr: nothing to filter
        saved = None
    if saved is None:
        import tensorflow  # noqa: F401
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                if not _TF_STARTUP_NOISE.search(line):
                    sys.stderr.write(line)


_import_tensorflow()

from taylorformer import registry  # noqa: E402
from taylorformer.hookspecs import hookimpl  # noqa: E402
from taylorformer.models import AutoregressiveNP, ConditionalNP, build_model, load_model  # noqa: E402

__version__ = "0.1.0"

_LAZY = {
    "resolve_spec": "taylorformer.spec",
    "loglik": "taylorformer.inference",
    "predict": "taylorformer.inference",
    "train": "taylorformer.training",
    "Trainer": "taylorformer.training",
    "TrainConfig": "taylorformer.training",
    "replicate": "taylorformer.replication",
}

__all__ = ["registry", "hookimpl", "__version__", "AutoregressiveNP", "ConditionalNP",
           "build_model", "load_model", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'taylorformer' has no attribute {name!r}")
