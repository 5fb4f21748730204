"""The one place where taylorformer reaches into TensorFlow's private modules.

None of these helpers has a public equivalent in TF 2.19-2.21; each falls back to a safe
default if a TensorFlow release moves the internal it uses.
"""
import contextlib

import tensorflow as tf

try:  # could_possibly_record: is a gradient tape (or forward accumulator) active?
    from tensorflow.python.eager.record import could_possibly_record as _could_possibly_record
except ImportError:  # pragma: no cover - a TF without it: assume a tape may record
    _could_possibly_record = None

try:  # stop_recording keeps an active tape from storing a forward pass's intermediates
    from tensorflow.python.eager.record import stop_recording
except ImportError:  # pragma: no cover - a TF without the module: record (more memory)
    stop_recording = contextlib.nullcontext


def could_record_gradients():
    """True while a gradient tape may record the ops being run or traced (True when
    TensorFlow's internal check is unavailable: the safe answer for callers that only
    speed up inference)."""
    return True if _could_possibly_record is None else bool(_could_possibly_record())


def in_xla_context():
    """True while tracing for XLA (``jit_compile=True``), where tensors may not have
    data-dependent shapes (``tf.where`` + gather tricks must be switched off)."""
    try:
        from tensorflow.python.ops import control_flow_util

        return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
    except Exception:  # noqa: BLE001 - internal API moved: assume no XLA
        return False
