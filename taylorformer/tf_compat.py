"""The one place where taylorformer reaches into TensorFlow's and Keras' private modules.

None of these helpers has a public equivalent in TF 2.19-2.21 / Keras 3.10-3.15; each falls
back to a safe default if a release moves the internal it uses, or says what moved.
``tests/core/test_import_graph.py`` checks that no other module imports ``keras.src`` or
``tensorflow.python``.
"""
import contextlib

import keras
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


def keras_serialization_maps():
    """Keras' two global serialization maps, live: registered name -> object (the dict
    ``keras.saving.get_custom_objects()`` returns) and object -> registered name (no public
    accessor). The registry snapshots and restores both so that a plugin that fails to load
    leaves Keras' registrations exactly as they were."""
    try:
        from keras.src.saving import object_registration
    except ImportError as exc:  # pragma: no cover - a Keras that moved its registry
        raise ImportError(f"this Keras ({keras.__version__}) has no keras.src.saving.object_registration: "
                          "taylorformer's plugin registry needs its serialization maps") from exc
    return object_registration.GLOBAL_CUSTOM_OBJECTS, object_registration.GLOBAL_CUSTOM_NAMES


@contextlib.contextmanager
def keras_uninitialized_variables_restored_on_error():
    """Put Keras' global list of variables awaiting initialization back as it was when the
    block raises. Keras builds a layer by tracing its ``call`` and initializes the variables
    created in the trace at its end; an error in between (a refused build) leaves them
    listed, and every later build then fails ("Variable ... is already initialized") and
    leaves its own variables uninitialized. No-op if a Keras release moved the list."""
    try:
        from keras.src.backend.common import global_state
    except ImportError:  # pragma: no cover - a Keras without it: nothing to restore
        yield
        return
    before = list(global_state.get_global_attribute("uninitialized_variables", []) or [])
    try:
        yield
    except BaseException:
        global_state.set_global_attribute("uninitialized_variables", before)
        raise
