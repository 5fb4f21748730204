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
* **A command's outputs change together or not at all.** :class:`Outputs` checks every
  output of a command before it works, hands out temp names to write, and renames them
  all into place only when the whole command succeeded; a failure or a signal (SIGTERM
  and SIGINT alike, :func:`terminate_as_interrupt`) removes them and leaves the previous
  files as they were, and an error names the user's path, never a temp name.

The names of a run directory's files live here, at the bottom, because the output check
must know them; :mod:`taylorformer.workflow.run_dir` lays a run out with the same names.
"""
import contextlib
import errno
import json
import math
import os
import re
import shutil
import signal
import tempfile
import threading

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
    tmp = None
    try:
        with signals_held():  # made and known as one step: a signal never leaves it behind
            fd, tmp = tempfile.mkstemp(prefix=f".tmp-{os.path.basename(path)}-{os.getpid()}-", dir=directory)
            os.fchmod(fd, 0o666 & ~UMASK)
            os.close(fd)
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
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


def not_a_file(path):
    """Why ``path`` cannot be read as a file, as the end of a sentence naming it ("does not
    exist", "is a directory", "is a symbolic link loop", ...), or None when it is a regular
    file."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return "does not exist" + (" (a link to a missing file)" if os.path.islink(path) else "")
    except OSError as exc:
        return "cannot be read: " + ("a symbolic link loop" if exc.errno == errno.ELOOP
                                     else exc.strerror or type(exc).__name__)
    if os.path.isdir(path):
        return "is a directory, not a file"
    return None if os.path.isfile(path) else "is not a regular file"


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


@contextlib.contextmanager
def terminate_as_interrupt():
    """Inside the block, SIGTERM (``kill``) raises KeyboardInterrupt, as SIGINT does, so that
    ``finally`` blocks and ``except`` clauses remove temp files (a SIGKILL's are removed by
    the next write of that name). Only where SIGTERM would otherwise end the process
    unannounced (its default action) and in the main thread: a handler the program set is
    left alone."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    install = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    previous = signal.signal(signal.SIGTERM, interrupt) if install else None
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held():
    """SIGINT and SIGTERM wait until the block is done, then arrive: for a step that is all
    or nothing (renaming a command's outputs into place), or that a KeyboardInterrupt
    inside would derail (TensorFlow writing a SavedModel)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def check_extension(path, flag, formats):
    """The extension of ``path`` (lower case, with its dot) when it is one of ``formats``;
    else an OutputPathError naming the path and the formats."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in formats:
        raise OutputPathError(f"{flag} {path}: unsupported file type {ext or '(none)'!r}; it must be a "
                              f"{formats[0]} path" + (f" (or {', '.join(formats[1:])})" if len(formats) > 1 else ""))
    return ext


class Outputs:
    """The outputs of one command, checked before it works and put in place together when
    it succeeds::

        with Outputs(reads=(inputs, context), run_dir=run_dir) as outputs:
            table = outputs.file(output, "--output", (".csv", ".nc"))   # a temp name
            image = outputs.file(plot, "--plot", (".png", ".pdf"))      # None: no plot
            ...work, then write to table and image...
        # here both are in place, or (an error, SIGTERM, SIGINT) neither is

    :meth:`file` and :meth:`directory` check a path (:func:`check_output_path`: an existing
    directory, not a file the command reads, not a run's own file; and its extension, not
    the same path as another output) and return the temp name to write instead
    (``.tmp-NAME-PID-*``, beside it, with its extension; a directory's is
    ``.tmp-NAME-PID-*/NAME``, not yet made). Leaving the block without an error fsyncs every
    temp and renames them over their targets in one step (signals held); with an error,
    every temp is removed and no target touched. Inside the block SIGTERM raises
    KeyboardInterrupt (:func:`terminate_as_interrupt`). An error whose text names a temp
    names the user's path instead, and an OSError about a temp is an OutputPathError
    naming the output."""

    def __init__(self, reads=(), run_dir=None):
        self.reads = [os.fspath(r) for r in reads if isinstance(r, (str, os.PathLike))]
        self.run_dir = None if run_dir is None else os.fspath(run_dir)
        self._outputs = []  # [flag, path, temp, staging directory or None]
        self._created = {}  # temp file: (inode, mtime, size) when made: unchanged means unwritten
        self._signals = None

    def __enter__(self):
        self._signals = terminate_as_interrupt()
        self._signals.__enter__()
        return self

    def _declared(self, path, flag):
        real = os.path.realpath(path)
        for other_flag, other, _, _ in self._outputs:
            if os.path.realpath(other) == real:
                raise OutputPathError(f"{flag} {path} is the same path as {other_flag} {other}; "
                                      "each output needs its own")

    def check(self, path, flag="--output", formats=None):
        """``path`` when the command may write its output there (``formats``: the extensions
        it may have; see the class docstring); else an OutputPathError naming it. Nothing is
        made: what a caller runs before its first step (:meth:`file` checks again)."""
        if path is not None:
            if formats is not None:
                check_extension(path, flag, tuple(formats))
            check_output_path(path, flag, reads=self.reads, run_dir=self.run_dir)
            self._declared(os.fspath(path), flag)
        return path

    def file(self, path, flag="--output", formats=None):
        """The temp name to write the output ``path`` to (``formats``: the extensions it may
        have), after the checks; None for ``path`` None."""
        if path is None:
            return None
        path = os.fspath(self.check(path, flag, formats))
        directory, name = os.path.split(os.path.abspath(path))
        remove_stale_temps(path)
        with signals_held():  # made and recorded as one step: a signal never leaves it unknown
            fd, temp = tempfile.mkstemp(prefix=f".tmp-{name}-{os.getpid()}-", suffix=os.path.splitext(name)[1],
                                        dir=directory)
            self._outputs.append([flag, path, temp, None])
            os.fchmod(fd, 0o666 & ~UMASK)
            stat = os.fstat(fd)
            os.close(fd)
        self._created[temp] = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        return temp

    def check_directory(self, path, flag="--output"):
        """``path`` when the command may write an output directory there (new, or an empty
        directory it replaces): its parent exists; it is no file, no non-empty directory,
        not inside (or holding) what the command reads or the run; else an OutputPathError
        naming it. Nothing is made (:meth:`directory` checks again)."""
        path = os.fspath(path)
        target = os.path.abspath(path)
        parent, name = os.path.split(target)
        if not name:
            raise OutputPathError(f"{flag} {path!r} names no directory")
        if not os.path.isdir(parent):
            raise OutputPathError(f"{flag} {path}: directory {parent} does not exist; create it first")
        if os.path.lexists(path) and not os.path.isdir(path):
            raise OutputPathError(f"{flag} {path} exists and is not a directory; name a new or empty directory")
        if os.path.isdir(path) and os.listdir(path):
            raise OutputPathError(f"{flag} {path} is not empty; name a new or empty directory")
        for place in self.reads + ([self.run_dir] if self.run_dir is not None else []):
            place_real, real = os.path.realpath(place), os.path.join(os.path.realpath(parent), name)
            if os.path.commonpath([real, place_real]) in (place_real, real):
                raise OutputPathError(f"{flag} {path} is inside or holds {place}, which the command reads; "
                                      "name a directory outside it")
        self._declared(path, flag)
        return path

    def directory(self, path, flag="--output"):
        """The temp name to write the output directory ``path`` to, after
        :meth:`check_directory`."""
        path = self.check_directory(path, flag)
        parent, name = os.path.split(os.path.abspath(path))
        remove_stale_temps(path)
        with signals_held():
            staging = tempfile.mkdtemp(prefix=f".tmp-{name}-{os.getpid()}-", dir=parent)
            self._outputs.append([flag, path, os.path.join(staging, name), staging])
        return os.path.join(staging, name)

    def _commit(self):
        for flag, path, temp, staging in self._outputs:
            if staging is not None:
                if not os.path.isdir(temp):
                    raise OutputPathError(f"{flag} {path}: the command wrote no directory")
                continue
            stat = os.stat(temp)
            if (stat.st_ino, stat.st_mtime_ns, stat.st_size) == self._created[temp]:
                raise OutputPathError(f"{flag} {path}: the command wrote nothing there")
            fsync_file(temp)
        with signals_held():
            for flag, path, temp, staging in self._outputs:
                os.replace(temp, path)
                if staging is not None:
                    os.rmdir(staging)
            for directory in {os.path.dirname(os.path.abspath(p)) for _, p, _, _ in self._outputs}:
                fsync_dir(directory)

    def _remove_temps(self):
        for _, _, temp, staging in self._outputs:
            with contextlib.suppress(OSError):
                if staging is not None:
                    shutil.rmtree(staging)
                elif temp is not None:
                    os.unlink(temp)

    def _temp_names(self):
        """``(flag, path, regex)`` per output: the regex finds its temp names in a text
        (``.tmp-NAME-PID-RANDOM.EXT``, and a writer's temp of that, ``.tmp-.tmp-NAME-...``;
        a directory's ``.tmp-NAME-PID-RANDOM/NAME``), with their folder."""
        for flag, path, temp, staging in self._outputs:
            if temp is None:
                continue
            name = os.path.basename(os.path.abspath(path))
            stem, ext = re.escape(name), re.escape(os.path.splitext(name)[1])
            if staging is None:
                found = rf"(?:\.tmp-)*\.tmp-{stem}-\d+-[a-z0-9_]+(?:{ext})?(?:-\d+-[a-z0-9_]+)*"
            else:
                found = rf"\.tmp-{stem}-\d+-[a-z0-9_]+(?:/(?:\.tmp-)?{stem}(?:-[a-z0-9_]+)?)?"
            yield flag, path, re.compile(rf"(?:[^\s'\"]*/)?{found}")

    def user_text(self, text):
        """``text`` with every temp name of these outputs replaced by the user's path."""
        for _, path, regex in self._temp_names():
            text = regex.sub(lambda _m, p=path: p, text)
        return text

    def _translate(self, exc):
        """The error to raise for ``exc``: an OSError about a temp is an OutputPathError
        naming the output; another error's message has its temp names replaced."""
        if isinstance(exc, OSError):
            names = [f for f in (exc.filename, exc.filename2) if isinstance(f, str)]
            for flag, path, regex in self._temp_names():
                if any(regex.search(f) for f in names):
                    return OutputPathError(f"{flag} {path}: cannot write it: {exc.strerror or type(exc).__name__}")
        exc.args = tuple(self.user_text(a) if isinstance(a, str) else a for a in exc.args)
        return exc

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc is None:
                try:
                    self._commit()
                except BaseException as error:
                    self._remove_temps()
                    translated = self._translate(error)
                    if translated is error:
                        raise
                    raise translated from error
                return False
            self._remove_temps()
            translated = self._translate(exc)
            if translated is not exc:
                raise translated from exc
            return False
        finally:
            self._signals.__exit__(None, None, None)
