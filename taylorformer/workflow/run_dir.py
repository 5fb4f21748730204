"""The run directory: its layout, and every read and write of it (training writes a run,
evaluation and plotting read it back).

Layout::

    RUN_DIR/spec.json      resolved model spec (the model's Keras config)
    RUN_DIR/config.json    training config + task name and config
    RUN_DIR/metrics.csv    step, train_loss, val_loglik(+stderr), val_gt_loglik, lr, elapsed_s
    RUN_DIR/best.keras     model with the best validation log-likelihood
    RUN_DIR/model.keras    model at the end of training
    RUN_DIR/checkpoints/   step-NNNNNNNN/ (model + optimizer + step) and ``latest``
    RUN_DIR/.lock          advisory lock of the process writing the run (holds its pid)

Guarantees:

* **One run per directory.** A new run (:meth:`RunDirectory.open_run` without
  ``resume``) is refused with :class:`RunDirectoryError` where the directory already holds
  a run (any of :data:`RUN_FILES`) or is a file; an empty directory is fine. Default
  directories are created exclusively (:meth:`RunDirectory.create_new`: ``os.mkdir``, then
  ``-2``, ``-3``, ... where the name is taken), so two runs never share one.
* **One writer.** Training holds ``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``.lock`` for its
  whole duration; a second process is refused. The kernel drops the lock when its
  process dies, so a killed run never leaves the directory locked.
* **Atomic, durable writes.** Every file (``spec.json``, ``config.json``, ``metrics.csv``,
  ``best.keras``, ``model.keras``, ``checkpoints/latest``) is written to a uniquely named
  temporary file or directory created exclusively next to its target (``mkstemp`` /
  ``mkdtemp``, so a symlink planted under a predictable name is never followed), fsynced,
  renamed over the target with ``os.replace``, and then the directory is fsynced. A
  checkpoint is written into a ``mkdtemp`` directory, its files and the directory fsynced,
  renamed to ``step-N`` (the ``checkpoints`` directory fsynced), and only then does
  ``latest`` move to it: killing a run at any moment leaves the previous or the new
  checkpoint, never a corrupt one named by ``latest``. Temp files a killed writer left
  behind (``.tmp-*``) are removed by the next run that opens the directory.
* **Only this run's checkpoints.** ``latest`` must hold a plain ``step-NNNNNNNN`` name of a
  directory (not a symlink) under ``RUN_DIR/checkpoints``; anything else is refused with an
  error naming the ``latest`` file. Pruning deletes only ``step-N`` directories older than
  the one just written (the one ``latest`` names), keeping the newest ``keep``.
* **Resume from the newest intact checkpoint.** Where the one ``latest`` names is missing
  or does not restore, older ones are tried newest first, with a warning naming each that
  failed.
* **Corrupt files are named.** An unreadable ``config.json``, ``spec.json`` or
  ``metrics.csv`` raises :class:`RunDirectoryError` naming the file; a corrupt
  ``best.keras`` falls back to an intact ``model.keras`` (and back) with a warning.
"""
import contextlib
import csv
import fcntl
import io
import itertools
import json
import os
import re
import shutil
import tempfile
import warnings

from taylorformer import files
from taylorformer.errors import RunDirectoryError, TaylorformerError
from taylorformer.files import CHECKPOINT_DIR, LOCK_FILE, RUN_FILES, atomic_write_text

CHECKPOINT_NAME = re.compile(r"step-\d{8}")
METRIC_FIELDS = ["step", "train_loss", "val_loglik", "val_loglik_stderr", "val_gt_loglik",
                 "learning_rate", "skipped_steps", "elapsed_s"]


class RunDirectory:
    """One run directory at ``path`` (see the module docstring)."""

    def __init__(self, path):
        self.path = path

    @classmethod
    def create_new(cls, path):
        """A new, empty run directory at ``path``, or ``path-2``, ``path-3``, ... where
        that name is taken (created exclusively, so concurrent runs never share one)."""
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        for n in itertools.count(1):
            candidate = path if n == 1 else f"{path}-{n}"
            try:
                os.mkdir(candidate)
            except FileExistsError:
                continue
            return cls(candidate)

    def file(self, name):
        return os.path.join(self.path, name)

    # ------------------------------------------------------------------ ownership
    def run_files(self):
        """The entries of :data:`RUN_FILES` present: non-empty means a run lives here."""
        return [name for name in RUN_FILES if os.path.lexists(self.file(name))]

    @contextlib.contextmanager
    def lock(self):
        """Hold the advisory lock ``.lock`` (flock, released by the kernel if we die);
        :class:`RunDirectoryError` if another process holds it."""
        path = self.file(LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise RunDirectoryError(f"cannot open the lock file {path} ({exc})") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                raise RunDirectoryError(
                    f"run directory {self.path} is in use by another process (pid {holder}, lock "
                    f"{path}); wait for it to finish, or train into another --out") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def open_run(self, resume=False):
        """Lock the directory (created if missing) for one training run; a new run
        (``resume=False``) needs a directory that holds no run. Temp files left by a
        killed writer (``.tmp-*``) are removed."""
        if os.path.lexists(self.path) and not os.path.isdir(self.path):
            raise RunDirectoryError(f"--out {self.path} is an existing file, not a directory; "
                                    "name a new or empty directory")
        os.makedirs(self.path, exist_ok=True)
        with self.lock():
            found = self.run_files()
            if found and not resume:
                raise RunDirectoryError(
                    f"{self.path} already holds a run ({', '.join(found)}); continue it with "
                    f"--resume {self.path}, or train into another --out")
            for directory in (self.path, self.file(CHECKPOINT_DIR)):
                for name in os.listdir(directory) if os.path.isdir(directory) else ():
                    if name.startswith(".tmp-"):
                        files.remove_path(os.path.join(directory, name))
            yield self

    # ------------------------------------------------------------------ spec and config
    def write_definition(self, spec, config):
        """``spec.json`` (resolved model spec) and ``config.json`` (training + task)."""
        atomic_write_text(self.file("spec.json"), json.dumps(spec, indent=2))
        atomic_write_text(self.file("config.json"), json.dumps(config, indent=2))

    def _read_json(self, name):
        path = self.file(name)
        if not os.path.isfile(path):
            raise RunDirectoryError(f"{self.path} is not a run directory (no {name})")
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
            raise RunDirectoryError(f"{path} is corrupt: {exc}") from None
        if not isinstance(data, dict):
            raise RunDirectoryError(f"{path} is corrupt: holds a JSON {type(data).__name__}, "
                                    "expected an object")
        return data

    def read_config(self):
        """The ``config.json`` dict (``train`` dict, ``task`` name, ``task_config``)."""
        config = self._read_json("config.json")
        if not (isinstance(config.get("train"), dict) and isinstance(config.get("task"), str)
                and isinstance(config.get("task_config", {}), (dict, type(None)))):
            raise RunDirectoryError(
                f"{self.file('config.json')} is corrupt: expected 'train' (an object), 'task' "
                f"(a name) and 'task_config' (an object), got keys {sorted(config)}")
        return config

    def read_spec(self):
        """The ``spec.json`` dict."""
        return self._read_json("spec.json")

    # ------------------------------------------------------------------ models
    def save_model(self, model, name):
        """``model.save`` into a fresh ``mkdtemp`` directory, fsync, rename over ``name``,
        fsync the run directory."""
        tmpdir = tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=self.path)
        try:
            tmp = os.path.join(tmpdir, name)
            model.save(tmp)
            files.fsync_file(tmp)
            os.replace(tmp, self.file(name))
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
        files.fsync_dir(self.path)

    def load_model(self, checkpoint="best"):
        """The model of ``best.keras`` (``checkpoint="best"``) or ``model.keras``
        (``"model"``); the other file, with a warning, where that one is missing or
        corrupt. A missing plugin (a taylorformer error) is raised as is."""
        from taylorformer.models import load_model

        first = f"{checkpoint}.keras"
        problems = []
        for name in (first, "model.keras" if checkpoint == "best" else "best.keras"):
            path = self.file(name)
            if not os.path.isfile(path):
                problems.append(f"{path} is missing")
                continue
            try:
                model = load_model(path)
            except TaylorformerError:
                raise
            except Exception as exc:  # a damaged .keras file fails in zipfile, h5py, json, ...
                problems.append(f"{path} is corrupt ({type(exc).__name__}: {exc})")
                continue
            if name != first:
                warnings.warn(f"{problems[0]}; using {path} instead", stacklevel=2)
            return model
        raise RunDirectoryError(f"{self.path} holds no loadable model: {'; '.join(problems)}")

    # ------------------------------------------------------------------ metrics
    def metrics_rows(self):
        """The rows of ``metrics.csv`` (strings); :class:`RunDirectoryError` naming the file
        and row if it is unreadable or a row is incomplete."""
        path = self.file("metrics.csv")
        if not os.path.exists(path):
            return []
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                rows, fields = list(reader), reader.fieldnames or []
        except (OSError, ValueError, csv.Error) as exc:
            raise RunDirectoryError(f"{path} is corrupt: {exc}") from None
        if not {"step", "val_loglik"} <= set(fields) <= set(METRIC_FIELDS):
            raise RunDirectoryError(f"{path} is corrupt: header {fields}, expected columns "
                                    f"from {METRIC_FIELDS} including 'step' and 'val_loglik'")
        for line, row in enumerate(rows, start=2):
            try:
                if None in row or None in row.values():
                    raise ValueError("wrong number of fields")
                int(row["step"])
                float(row["val_loglik"])
            except ValueError as exc:
                raise RunDirectoryError(f"{path} is corrupt: line {line} {row!r} ({exc})") from None
        return rows

    def write_metrics(self, rows):
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, METRIC_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.file("metrics.csv"), buffer.getvalue())

    def append_metrics(self, row):
        self.write_metrics(self.metrics_rows() + [row])

    def truncate_metrics(self, step):
        """Drop metric rows logged after ``step`` (work lost by a kill is redone)."""
        rows = self.metrics_rows()
        kept = [r for r in rows if int(r["step"]) <= step]
        if len(kept) != len(rows):
            self.write_metrics(kept)

    # ------------------------------------------------------------------ checkpoints
    def checkpoints(self):
        """Names of this run's checkpoints (``step-NNNNNNNN`` directories, not symlinks),
        oldest first."""
        root = self.file(CHECKPOINT_DIR)
        if not os.path.isdir(root):
            return []
        return sorted(name for name in os.listdir(root) if CHECKPOINT_NAME.fullmatch(name)
                      and os.path.isdir(os.path.join(root, name))
                      and not os.path.islink(os.path.join(root, name)))

    def save_checkpoint(self, checkpoint, step, keep):
        """Write ``checkpoints/step-N`` (a ``tf.train.Checkpoint``) atomically and durably,
        move ``latest`` to it, prune older ones to the newest ``keep``; returns its path."""
        root = self.file(CHECKPOINT_DIR)
        os.makedirs(root, exist_ok=True)
        name = f"step-{int(step):08d}"
        final = os.path.join(root, name)
        tmp = tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=root)
        try:
            checkpoint.write(os.path.join(tmp, "ckpt"))
            for entry in os.listdir(tmp):
                files.fsync_file(os.path.join(tmp, entry))
            files.fsync_dir(tmp)
            os.chmod(tmp, 0o777 & ~files.UMASK)
            if os.path.lexists(final):  # left over from before a resume fell back past it
                files.remove_path(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        files.fsync_dir(root)
        atomic_write_text(os.path.join(root, "latest"), name)
        older = [n for n in self.checkpoints() if n < name]
        for old in older[:max(len(older) - (keep - 1), 0)]:
            shutil.rmtree(os.path.join(root, old))
        return final

    def _latest(self):
        """The checkpoint name in ``checkpoints/latest`` (None if there is no such file);
        :class:`RunDirectoryError` naming the file unless it names one of this run's."""
        root = self.file(CHECKPOINT_DIR)
        pointer = os.path.join(root, "latest")
        if not os.path.lexists(pointer):
            return None
        try:
            with open(pointer, encoding="utf-8") as fh:
                name = fh.read().strip()
        except (OSError, ValueError) as exc:
            raise RunDirectoryError(f"{pointer} is unreadable: {exc}") from None
        target = os.path.join(root, name)
        if not CHECKPOINT_NAME.fullmatch(name) or os.path.islink(target) or \
                (os.path.lexists(target) and not os.path.isdir(target)):
            raise RunDirectoryError(
                f"{pointer} names {name!r}, which is not a checkpoint of this run (allowed: a "
                f"step-NNNNNNNN directory directly under {root}); refusing to resume from it")
        return name

    def restore_latest(self, checkpoint):
        """Restore the newest intact checkpoint into ``checkpoint``: the one ``latest``
        names, else older ones newest first, warning about each that is missing or fails
        to restore. Returns its name."""
        root = self.file(CHECKPOINT_DIR)
        latest, names = self._latest(), self.checkpoints()
        candidates = [n for n in reversed(names) if latest is None or n < latest]
        if latest is not None:
            candidates.insert(0, latest)
        if not candidates:
            raise RunDirectoryError(f"{self.path} has no checkpoint to resume from "
                                    f"(no step-NNNNNNNN directory in {root})")
        for name in candidates:
            path = os.path.join(root, name)
            try:
                checkpoint.read(os.path.join(path, "ckpt")).assert_existing_objects_matched()
                return name
            except Exception as exc:  # a truncated or missing checkpoint fails in many ways
                warnings.warn(f"checkpoint {path} is missing or corrupt ({type(exc).__name__}: "
                              f"{exc}); trying an older one", stacklevel=2)
        raise RunDirectoryError(f"no checkpoint in {root} restores (tried {', '.join(candidates)})")
