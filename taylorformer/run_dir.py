"""The run directory: its layout, and every read and write of it (training writes a run,
evaluation and plotting read it back).

Layout (every file is written atomically: temp file, fsync, then rename)::

    RUN_DIR/spec.json      resolved model spec (the model's Keras config)
    RUN_DIR/config.json    training config + task name and config
    RUN_DIR/metrics.csv    step, train_loss, val_loglik(+stderr), val_gt_loglik, lr, elapsed_s
    RUN_DIR/best.keras     model with the best validation log-likelihood
    RUN_DIR/model.keras    model at the end of training
    RUN_DIR/checkpoints/   step-NNNNNNNN/ (model + optimizer + step) and ``latest``

A checkpoint is written into a temporary directory and renamed into place before the
``latest`` pointer (itself written atomically) moves to it, so killing a run at any
moment leaves the previous or the new checkpoint, never a corrupt one.
"""
import csv
import json
import os
import shutil

CHECKPOINT_DIR = "checkpoints"
METRIC_FIELDS = ["step", "train_loss", "val_loglik", "val_loglik_stderr", "val_gt_loglik",
                 "learning_rate", "skipped_steps", "elapsed_s"]


def atomic_write_text(path, text):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunDirectory:
    """One run directory at ``path`` (see the module docstring)."""

    def __init__(self, path):
        self.path = path

    def file(self, name):
        return os.path.join(self.path, name)

    # ------------------------------------------------------------------ spec and config
    def write_definition(self, spec, config):
        """``spec.json`` (resolved model spec) and ``config.json`` (training + task)."""
        os.makedirs(self.path, exist_ok=True)
        atomic_write_text(self.file("spec.json"), json.dumps(spec, indent=2))
        atomic_write_text(self.file("config.json"), json.dumps(config, indent=2))

    def read_config(self):
        """The ``config.json`` dict; a clear error if this is not a run directory."""
        if not os.path.exists(self.file("config.json")):
            raise FileNotFoundError(f"{self.path} is not a run directory (no config.json)")
        with open(self.file("config.json")) as fh:
            return json.load(fh)

    def read_spec(self):
        with open(self.file("spec.json")) as fh:
            return json.load(fh)

    # ------------------------------------------------------------------ models
    def save_model(self, model, name):
        """``model.save`` to a temporary ``.keras`` file, then rename over ``name``."""
        path = self.file(name)
        tmp = self.file(f".tmp-{name}")
        model.save(tmp)
        os.replace(tmp, path)

    def model_path(self, checkpoint="best"):
        """Path of ``best.keras`` or ``model.keras`` (the other one if it is missing)."""
        path = self.file(f"{checkpoint}.keras")
        if os.path.exists(path):
            return path
        other = self.file("model.keras" if checkpoint == "best" else "best.keras")
        if not os.path.exists(other):
            raise FileNotFoundError(f"{self.path} holds no saved model ({checkpoint}.keras)")
        return other

    # ------------------------------------------------------------------ metrics
    def metrics_rows(self):
        if not os.path.exists(self.file("metrics.csv")):
            return []
        with open(self.file("metrics.csv")) as fh:
            return list(csv.DictReader(fh))

    def write_metrics(self, rows):
        tmp = self.file("metrics.csv.tmp")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, METRIC_FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, self.file("metrics.csv"))

    def append_metrics(self, row):
        self.write_metrics(self.metrics_rows() + [row])

    def truncate_metrics(self, step):
        """Drop metric rows logged after ``step`` (work lost by a kill is redone)."""
        rows = self.metrics_rows()
        kept = [r for r in rows if int(r["step"]) <= step]
        if len(kept) != len(rows):
            self.write_metrics(kept)

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, checkpoint, step, keep):
        """Write ``checkpoints/step-N`` (a ``tf.train.Checkpoint``) atomically, move
        ``latest`` to it, keep the newest ``keep``; returns its path."""
        root = self.file(CHECKPOINT_DIR)
        os.makedirs(root, exist_ok=True)
        name = f"step-{int(step):08d}"
        tmp, final = os.path.join(root, f".tmp-{name}"), os.path.join(root, name)
        shutil.rmtree(tmp, ignore_errors=True)
        checkpoint.write(os.path.join(tmp, "ckpt"))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        atomic_write_text(os.path.join(root, "latest"), name)
        done = sorted(d for d in os.listdir(root) if d.startswith("step-"))
        for old in done[:-keep]:
            shutil.rmtree(os.path.join(root, old), ignore_errors=True)
        return final

    def restore_latest(self, checkpoint):
        """Restore the checkpoint ``latest`` names into ``checkpoint``."""
        pointer = os.path.join(self.file(CHECKPOINT_DIR), "latest")
        if not os.path.exists(pointer):
            raise FileNotFoundError(f"{self.path} has no checkpoint to resume from ({pointer} missing)")
        with open(pointer) as fh:
            name = fh.read().strip()
        checkpoint.read(os.path.join(self.file(CHECKPOINT_DIR), name, "ckpt")).assert_existing_objects_matched()
