"""Writing files safely: atomic, durable writes, and the checks an output path passes
before a command writes to it.

* **Atomic, durable writes.** :func:`atomic_path` hands out a uniquely named temporary file
  created exclusively next to its target (``mkstemp``, so a symlink planted under a
  predictable name is never followed); on success it is fsynced, renamed over the target
  with ``os.replace``, and the directory fsynced. A reader sees the old file or the new
  one, never half of one; temp files a killed writer left behind (``.tmp-NAME-PID-*``)
  are removed by the next write of the same name.
* **Outputs never replace data.** :func:`check_output_path` refuses a directory, a missing
  parent directory, a file the command reads, and a file a run directory owns
  (:data:`OWNED_NAMES`).

The names of a run directory's files live here, at the bottom, because the output check
must know them; :mod:`taylorformer.workflow.run_dir` lays a run out with the same names.
"""
import contextlib
import json
import math
import os
import shutil
import tempfile

from taylorformer.errors import OutputPathError

CHECKPOINT_DIR = "checkpoints"
LOCK_FILE = ".lock"
#: the files whose presence means a run lives in a directory
RUN_FILES = ("spec.json", "config.json", "metrics.csv", "best.keras", "model.keras", CHECKPOINT_DIR)
#: names a run directory owns besides :data:`RUN_FILES` (never an output of another command)
OWNED_NAMES = RUN_FILES + (LOCK_FILE, "tensorboard")
#: the process umask (mkstemp/mkdtemp create 0600/0700; written files get 0666 & ~UMASK)
UMASK = os.umask(0o022)
os.umask(UMASK)  # reading the umask sets it: put it back


def fsync_file(path, flags=os.O_NOFOLLOW):
    """fsync a file (never through a symlink)."""
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path):
    """fsync a directory, so that a rename inside it survives a power loss."""
    fsync_file(path, os.O_DIRECTORY)


def remove_path(path):
    """Delete a file, symlink (never its target) or directory tree."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _alive(pid):
    """Whether process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def remove_stale_temps(path):
    """Remove the temp files of ``path`` (``.tmp-NAME-PID-*``) whose writing process is
    gone: what a writer killed before it could clean up left behind."""
    directory, name = os.path.split(os.path.abspath(path))
    prefix = f".tmp-{name}-"
    with contextlib.suppress(OSError):
        for entry in os.listdir(directory):
            pid = entry[len(prefix):].split("-", 1)[0] if entry.startswith(prefix) else ""
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    remove_path(os.path.join(directory, entry))


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temp path next to ``path`` (``.tmp-NAME-PID-*``, created exclusively) for
    the caller to write; on success it is fsynced, renamed over ``path`` and the directory
    fsynced; on an error it is removed and ``path`` is untouched. Temp files of ``path``
    left by a killed writer (its PID gone) are removed first."""
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{os.path.basename(path)}-{os.getpid()}-", dir=directory)
    os.fchmod(fd, 0o666 & ~UMASK)
    os.close(fd)
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def atomic_write_text(path, text):
    """Write ``text`` to ``path`` through :func:`atomic_path`."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        fh.write(text)


def json_text(value):
    """``value`` as strict, indented JSON text (a NaN or inf, e.g. the stderr of one task,
    is null), as a command prints a result."""
    def clean(item):
        if isinstance(item, float) and not math.isfinite(item):
            return None
        if isinstance(item, dict):
            return {k: clean(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [clean(v) for v in item]
        return item

    return json.dumps(clean(value), indent=2, allow_nan=False)


def check_output_path(path, flag="--output", reads=(), run_dir=None):
    """``path`` when a command may write its output there; else :class:`OutputPathError`
    naming it. Refused: a directory; a path whose directory does not exist; the same file
    (through symlinks or hard links) as one of ``reads`` (the files the command reads);
    and, with ``run_dir``, one of that run's own files: an entry of :data:`OWNED_NAMES`, a
    temp file (``.tmp-*``) or anything in one of its subdirectories (``checkpoints/...``).
    A new file of one's own directly in the run directory (``RUN/predictions.csv``) is fine."""
    text = os.fspath(path)
    if not text or text.endswith(os.sep) or os.path.isdir(text):
        raise OutputPathError(f"{flag} {text!r} is a directory; name a file")
    directory = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(directory):
        raise OutputPathError(f"{flag} {text}: directory {directory} does not exist; create it first")
    if os.path.exists(text):
        for read in reads:
            if read is not None and os.path.exists(read) and os.path.samefile(text, read):
                raise OutputPathError(f"{flag} {text} is the file the command reads ({read}); "
                                      "writing it would replace that data: name another file")
    if run_dir is not None and os.path.isdir(run_dir):
        real_run = os.path.realpath(run_dir)
        real = os.path.join(os.path.realpath(directory), os.path.basename(text))
        if os.path.islink(text):
            real = os.path.realpath(text)
        parts = os.path.relpath(real, real_run).split(os.sep)
        if parts[0] != os.pardir and (len(parts) > 1 or parts[0] in OWNED_NAMES + (os.curdir,)
                                      or parts[0].startswith(".tmp-")):
            raise OutputPathError(f"{flag} {text} is one of the run's own files (in {run_dir}); "
                                  "a command never overwrites a run: name a file outside it")
    return text
