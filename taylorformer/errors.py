"""Exception types raised at the public boundary of taylorformer.

Every error names the offending field, kind or plugin so that a user can fix the
problem without reading library code.
"""
import difflib


class TaylorformerError(Exception):
    """Base class of all taylorformer errors."""


class UnknownComponentError(TaylorformerError, KeyError):
    """A registry name that no installed plugin provides."""

    def __init__(self, kind, name, known, hint=""):
        self.kind, self.name, self.known = kind, name, sorted(known)
        close = difflib.get_close_matches(str(name), self.known, n=3, cutoff=0.5)
        msg = f"unknown {kind} {name!r}"
        if close:
            msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
        msg += f" Known {kind} names: {', '.join(self.known) or '(none)'}."
        if hint:
            msg += " " + hint
        super().__init__(msg)

    def __str__(self):  # KeyError would otherwise repr() the message
        return self.args[0]


class RegistryConflictError(TaylorformerError):
    """Two plugins registered the same (kind, name) and neither overrides."""


class PluginLoadError(TaylorformerError):
    """A plugin failed to import, failed in its hook, or misspelled a hook."""


class PluginContractError(PluginLoadError):
    """A plugin declares a plugin API version this taylorformer does not load, or registers a
    component that breaks its kind's contract (:mod:`taylorformer.plugin_api`)."""


class SpecError(TaylorformerError, ValueError):
    """A model/task spec has unknown keys, wrong types or bad values."""


class BatchError(TaylorformerError, ValueError):
    """A batch has wrong ranks, mismatched dims, NaN/inf or empty sets."""


class TaskError(SpecError):
    """A task's config or data is unusable: bad option values, non-finite or overflowing
    data (naming file, column and row), or a size the process cannot allocate."""


class RunDirectoryError(TaylorformerError):
    """A run directory cannot be used as asked: it holds another run, is in use by another
    process, or one of its files is corrupt (the error names the file)."""


class ModelFileError(RunDirectoryError):
    """A model file (``.keras``) is missing, corrupt or not a taylorformer model (the error
    names the file)."""


class ExportError(TaylorformerError):
    """A model cannot be exported as asked (an autoregressive model, a non-affine
    normaliser) or the export's output directory cannot be used."""


def close_matches(word, candidates):
    """Up to three close spellings of ``word`` among ``candidates``."""
    return difflib.get_close_matches(str(word), sorted(candidates), n=3, cutoff=0.5)


class OutputPathError(TaylorformerError, ValueError):
    """An output path a command must not write: the same file as one of its inputs, one of
    a run directory's own files, a directory, or in a directory that does not exist."""


class TrainingRangeWarning(UserWarning):
    """A context lies far outside the range of inputs the model was trained on
    (:mod:`taylorformer.models.window_standardisation`): its predictions there are extrapolation."""
