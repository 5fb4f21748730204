"""The one place where taylorformer reaches into TensorFlow's private modules.

Both helpers have no public equivalent in TF 2.19-2.21; each falls back to a safe
default if a TensorFlow release moves the internal it uses.
"""
import contextlib

import tensorflow as tf

try:  # stop_recording keeps an active tape from storing a forward pass's intermediates
    from tensorflow.python.eager.record import stop_recording
except ImportError:  # pragma: no cover - a TF without the module: record (more memory)
    stop_recording = contextlib.nullcontext


def in_xla_context():
    """True while tracing for XLA (``jit_compile=True``), where tensors may not have
    data-dependent shapes (``tf.where`` + gather tricks must be switched off)."""
    try:
        from tensorflow.python.ops import control_flow_util

        return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
    except Exception:  # noqa: BLE001 - internal API moved: assume no XLA
        return False
