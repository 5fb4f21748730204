"""The model card, and reading a model file's metadata without building the model.

A ``.keras`` file is a zip archive whose ``config.json`` holds the model's Keras config;
taylorformer's is ``{"spec", "name", "normaliser", "model_card"}``
(:meth:`taylorformer.models.base.NeuralProcess.get_config`). The card says what the model
was trained on and how well it did::

    {"format": 1, "created": "2026-11-25T03:01:12Z",
     "data": {"task", "task_config", "source", "checksum", "split_sizes", "split_unit"},
     "training": {"steps", "batch_size", "seed", ...},
     "metrics": {"step", "val_loglik", ...} at save time, "evaluation": the final test
     evaluation (``taylorformer train`` records it once it has run; an autoregressive
     model's headline metrics are its sampled forecasts', ``sampled`` says how many,
     the teacher-forced ones are under ``teacher_forced``),
     "versions": {"taylorformer", "tensorflow", "keras", "tensorflow-probability", "python"},
     "commit": git commit of the taylorformer source, where it is a git checkout}

:func:`read_model_file` reads the spec, normaliser and card straight from the zip (no
TensorFlow, no task, no weights), :func:`run_info` and :func:`format_info` are what
``taylorformer info`` prints, and :func:`update_card` records the final evaluation in a
model file (the zip rewritten beside it, then renamed over it; the weights are copied
byte for byte).
"""
import datetime
import hashlib
import json
import os
import platform
import subprocess
import zipfile

from taylorformer.errors import ModelFileError, SpecError
from taylorformer.files import atomic_path, not_a_file
from taylorformer.normaliser import Normaliser, jsonable, task_info_of
from taylorformer.spec import check_saved_spec

FORMAT = 1
#: data files up to this size get a SHA-256 in the card (larger ones are named only)
MAX_CHECKSUM_BYTES = 2 * 2**30
#: the largest ``config.json`` read from a model file (a spec, normaliser and card are KBs)
MAX_CONFIG_BYTES = 64 * 2**20
#: the deepest nesting of a JSON file read from a model file (a spec, normaliser and card
#: nest a few levels; a deeper one is refused before anything walks it)
MAX_JSON_DEPTH = 64
#: the entries of a card that are JSON objects (or null), by their place in it (``*``: each
#: value of the object above)
CARD_OBJECTS = ("data", "data.split_sizes", "training", "metrics", "evaluation", "evaluation.sampled",
                "evaluation.data_units", "evaluation.data_units.outputs", "evaluation.data_units.outputs.*",
                "versions")
#: distributions whose versions the card records
PACKAGES = ("taylorformer", "tensorflow", "keras", "tensorflow-probability")
#: the model files of a run directory, in the order ``info`` looks for them
RUN_MODEL_FILES = ("best.keras", "model.keras")


def versions():
    """``{distribution: version}`` of :data:`PACKAGES` (None where not installed) and Python."""
    from importlib import metadata

    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["python"] = platform.python_version()
    return out


def source_commit():
    """The git commit of the taylorformer source (``HEAD`` of the checkout it is imported
    from, with ``+dirty`` when it has uncommitted changes), or None (not a checkout, no git)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.exists(os.path.join(here, ".git")):
        return None
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def file_checksum(path):
    """``"sha256:<hex>"`` of the file ``path`` (at most :data:`MAX_CHECKSUM_BYTES`), else None."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_CHECKSUM_BYTES:
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return f"sha256:{digest.hexdigest()}"


def data_card(task):
    """The card's ``data`` entry of a task object: its name and config, and from its
    optional ``data_description()`` the source, split sizes and their unit, with the
    source file's checksum where it is a file."""
    record = task_info_of(task)
    info = task.data_description() if callable(getattr(task, "data_description", None)) else {}
    source = info.get("source")
    data = {"task": record["name"], "task_config": record["config"],
            "source": None if source is None else str(source),
            "checksum": file_checksum(source) if isinstance(source, (str, os.PathLike)) else None,
            "split_sizes": info.get("split_sizes"), "split_unit": info.get("split_unit")}
    if data["source"] is None:
        data["source"] = "simulated" if not callable(getattr(task, "to_original_units", None)) else None
    return jsonable(data)


def build_card(task, training=None):
    """A new card for a model trained on ``task`` with the training config dict
    ``training`` (metrics are added when the model is saved)."""
    return {"format": FORMAT,
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "data": data_card(task), "training": jsonable(training), "metrics": None, "evaluation": None,
            "versions": versions(), "commit": source_commit()}


# ----------------------------------------------------------------------------- reading
def _json_depth(value):
    """How deeply the JSON value ``value`` nests (a scalar 0, ``[]`` 1), level by level."""
    depth, level = 0, [value]
    while any(isinstance(v, (dict, list)) for v in level):
        depth += 1
        level = [c for v in level if isinstance(v, (dict, list)) for c in (v.values() if isinstance(v, dict) else v)]
    return depth


def _archive_json(archive, name, path):
    """The JSON value of the entry ``name`` of ``archive`` (the open model file ``path``):
    ModelFileError naming the file where it is over :data:`MAX_CONFIG_BYTES` or nests
    deeper than :data:`MAX_JSON_DEPTH`; KeyError where there is no such entry."""
    entry = archive.getinfo(name)
    if entry.file_size > MAX_CONFIG_BYTES:
        raise ModelFileError(f"model file {path} is corrupt: its {name} is {entry.file_size} bytes "
                             f"(at most {MAX_CONFIG_BYTES})")
    try:
        value = json.loads(archive.read(entry).decode("utf-8"))
        too_deep = _json_depth(value) > MAX_JSON_DEPTH
    except RecursionError:  # the parser's own limit, far deeper than MAX_JSON_DEPTH
        too_deep = True
    if too_deep:
        raise ModelFileError(f"model file {path} is corrupt: its {name} nests deeper than {MAX_JSON_DEPTH} levels")
    return value


def _zip_config(path):
    """The ``config.json`` dict of the ``.keras`` file ``path``; ModelFileError naming it."""
    reason = not_a_file(path)
    if reason:
        raise ModelFileError(f"model file {path} {reason}")
    try:
        with zipfile.ZipFile(path) as archive:
            config = _archive_json(archive, "config.json", path)
    except KeyError:
        raise ModelFileError(f"model file {path} is corrupt: no config.json in the archive "
                             "(not a .keras file)") from None
    except (zipfile.BadZipFile, OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(f"model file {path} is corrupt or not a .keras file: "
                             f"{type(exc).__name__}: {exc}") from None
    if not (isinstance(config, dict) and isinstance(config.get("config"), dict)):
        raise ModelFileError(f"model file {path} is corrupt: config.json holds no model config")
    return config


def read_model_file(path):
    """``{"path", "class_name", "saved", "spec", "normaliser" (a Normaliser or None),
    "card" (dict or None)}`` of the ``.keras`` file ``path``, read from the archive alone;
    :class:`ModelFileError` naming the file where it is missing or corrupt."""
    path = os.fspath(path)
    config = _zip_config(path)
    inner = config["config"]
    spec = inner.get("spec")
    if not isinstance(spec, dict):
        raise ModelFileError(f"model file {path} holds no taylorformer model spec (class "
                             f"{config.get('class_name')!r})")
    try:
        check_saved_spec(spec, f"model file {path}: spec")
    except SpecError as exc:
        raise ModelFileError(str(exc)) from None
    normaliser = None
    if inner.get("normaliser") is not None:
        try:
            normaliser = Normaliser.from_dict(inner["normaliser"], where=f"model file {path}: normaliser")
        except SpecError as exc:
            raise ModelFileError(str(exc)) from None
    card = inner.get("model_card")
    if card is not None and not isinstance(card, dict):
        raise ModelFileError(f"model file {path} is corrupt: its model_card is a {type(card).__name__}")
    for place in CARD_OBJECTS if card is not None else ():
        values = [card]
        for key in place.split("."):
            values = [c for v in values if isinstance(v, dict)
                      for c in (v.values() if key == "*" else [v.get(key)])]
        wrong = next((v for v in values if not (v is None or isinstance(v, dict))), None)
        if wrong is not None:
            raise ModelFileError(f"model file {path} is corrupt: its model_card's {place} is a "
                                 f"{type(wrong).__name__}, not an object")
    saved = None
    try:  # Keras' metadata.json: only its date_saved is shown (none where it is unreadable)
        with zipfile.ZipFile(path) as archive:
            saved = _archive_json(archive, "metadata.json", path).get("date_saved")
    except (KeyError, ValueError, AttributeError, zipfile.BadZipFile, OSError, UnicodeDecodeError):
        pass
    return {"path": path, "class_name": config.get("class_name"), "saved": saved, "spec": spec,
            "normaliser": normaliser, "card": card}


def model_file_of(target):
    """The model file ``info`` reads: ``target`` itself (a file), or a run directory's
    ``best.keras`` (``model.keras`` where there is no best); ModelFileError otherwise."""
    target = os.fspath(target)
    if os.path.isdir(target):
        for name in RUN_MODEL_FILES:
            if os.path.isfile(os.path.join(target, name)):
                return os.path.join(target, name)
        raise ModelFileError(f"{target} holds no model file ({' or '.join(RUN_MODEL_FILES)}): not a "
                             "finished run directory")
    return target


def run_info(target):
    """What ``taylorformer info TARGET`` reports (JSON-ready): the model (class, preset,
    dims, likelihood), the normaliser (or None, with a note) and the card (or None)."""
    path = model_file_of(target)
    found = read_model_file(path)
    spec, normaliser = found["spec"], found["normaliser"]
    notes = []
    if normaliser is None:
        notes.append("no normaliser saved (a model file written before taylorformer saved one): predict "
                     "--input, place and export work in the model's own units (with a warning), predict "
                     "--grid refuses it, evaluate takes the data's units from the run's task")
    if found["card"] is None:
        notes.append("no model card saved")
    likelihood = spec.get("likelihood")
    return {"file": path, "saved": found["saved"],
            "model": {"class": found["class_name"], "preset": spec.get("preset"),
                      "description": spec.get("description"), "kind": spec.get("kind"),
                      "dim_x": spec.get("dim_x"), "dim_y": spec.get("dim_y"),
                      "likelihood": likelihood.get("name") if isinstance(likelihood, dict) else likelihood},
            "normaliser": None if normaliser is None else normaliser.to_dict(),
            "card": found["card"], "notes": notes}


def _metrics_text(metrics):
    """``key value`` pairs of a metrics dict, ``mean +- 1.96 stderr`` for ``{mean, stderr}``."""
    parts = []
    for key, value in (metrics or {}).items():
        if isinstance(value, dict) and "mean" in value:
            err = value.get("stderr")
            parts.append(f"{key} {value['mean']:.4g}" + (f" +- {1.96 * err:.2g}" if isinstance(err, (int, float))
                                                          and err == err else ""))
        elif isinstance(value, float):
            parts.append(f"{key} {value:.4g}")
        elif isinstance(value, (int, str)) and not isinstance(value, bool):
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def sampled_forecasts(evaluation):
    """``(paths, windows)`` of an evaluation whose headline metrics are an autoregressive
    model's sampled forecasts (its ``sampled`` entry), else None."""
    sampled = evaluation.get("sampled")
    if isinstance(sampled, dict) and "num_samples" in sampled and "crps" not in sampled:
        return sampled["num_samples"], sampled.get("num_tasks")
    return None  # a conditional model's, or a card written before sampled headlines (its sampled has crps)


def evaluation_headline(evaluation):
    """The line saying what an autoregressive model's headline metrics are: its sampled
    forecasts (paths per window, windows, and rmse, mae, crps, coverage95 in the data's
    units where known), or that it has only teacher-forced ones; None for a conditional
    model's evaluation."""
    forced = evaluation.get("teacher_forced")
    found = sampled_forecasts(evaluation)
    if found is None:
        return ("no sampled forecasts: the point metrics are teacher-forced only (each target given the true "
                "earlier ones; not a forecast's)") if forced else None
    units = evaluation.get("data_units") or evaluation
    paths, windows = found
    text = _metrics_text({k: units.get(k) for k in ("rmse", "mae", "crps", "coverage95")})
    where = " in the data's units" if evaluation.get("data_units") else ""
    return f"sampled forecasts ({paths} paths per window, {windows} windows){where}: {text}"


def evaluation_lines(evaluation):
    """The lines of ``taylorformer info`` for a card's final evaluation: the headline
    metrics (an autoregressive model's: its sampled forecasts, :func:`evaluation_headline`),
    per output in the data's units, the teacher-forced ones under their label, the verdict.
    Cards written before sampled headlines (``"teacher_forced": true``) print with their
    point metrics labelled teacher-forced."""
    data_units = evaluation.get("data_units") or {}
    forced = evaluation.get("teacher_forced")
    found = sampled_forecasts(evaluation)
    if found:
        kind, keys = (f"; sampled forecasts, {found[0]} paths per window on {found[1]} windows",
                      ("loglik", "rmse", "mae", "crps", "coverage95", "num_tasks"))
    else:
        kind = ("" if not forced else "; no sampled forecasts" if isinstance(forced, dict)
                else "; point metrics teacher-forced (each target given the true earlier ones)")
        keys = ("loglik", "rmse", "coverage95", "num_tasks")
    lines = [f"final evaluation ({evaluation.get('split', 'test')} split{kind}"
             + ("; loglik, rmse in the model's standardised units" if data_units else "")
             + "): " + _metrics_text({k: evaluation.get(k) for k in keys})]
    if data_units:
        shown = ("loglik", "crps", "rmse", "mae", "coverage95") if found else ("loglik",)
        lines.append(f"  in the data's units: {_metrics_text({k: data_units.get(k) for k in shown})}")
    for name, values in data_units.get("outputs", {}).items():
        lines.append(f"  {name}" + (" (teacher-forced)" if forced is True else "") + f": {_metrics_text(values)}")
    if isinstance(forced, dict):
        outputs = (forced.get("data_units") or {}).get("outputs") or {}
        lines.append("  teacher-forced (each target given the true earlier ones; not a forecast): "
                     + _metrics_text({k: forced.get(k) for k in ("rmse", "coverage95")})
                     + "".join(f"; {name}: {_metrics_text(values)}" for name, values in outputs.items()))
    old_sampled = evaluation.get("sampled")
    if forced is True and isinstance(old_sampled, dict) and "crps" in old_sampled:
        lines.append(f"  sampled forecasts ({old_sampled.get('num_samples')} paths per window): "
                     + _metrics_text({k: old_sampled.get(k) for k in ("mse", "crps", "coverage95")}))
    if isinstance(evaluation.get("verdict"), str):
        lines.append(f"  verdict: {evaluation['verdict']}")
    return lines


def format_info(info):
    """The plain text of ``taylorformer info`` for a :func:`run_info` dict."""
    model = info["model"]
    lines = [f"model file: {info['file']}" + (f" (saved {info['saved']})" if info.get("saved") else ""),
             f"model: {model['preset'] or model['class']} ({model['kind']}), dim_x {model['dim_x']}, "
             f"dim_y {model['dim_y']}, likelihood {model['likelihood']}"]
    if model.get("description"):
        lines.append(f"  {model['description']}")
    card = info.get("card")
    if card:
        data = card.get("data") or {}
        lines.append("data:")
        lines.append(f"  task {data.get('task')} {json.dumps(data.get('task_config'), default=str)}")
        if data.get("source"):
            lines.append(f"  source {data['source']}" + (f" ({data['checksum']})" if data.get("checksum") else ""))
        if data.get("split_sizes"):
            sizes = ", ".join(f"{k} {v}" for k, v in data["split_sizes"].items())
            lines.append(f"  splits ({data.get('split_unit') or 'size'}): {sizes}")
        training = card.get("training") or {}
        if training:
            keys = ("steps", "batch_size", "learning_rate", "seed")
            lines.append("training: " + ", ".join(f"{k} {training[k]}" for k in keys if k in training))
        if card.get("metrics"):
            lines.append(f"metrics at save time (the model's units): {_metrics_text(card['metrics'])}")
        evaluation = card.get("evaluation")
        if evaluation:
            lines += evaluation_lines(evaluation)
        versions_ = card.get("versions") or {}
        lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in versions_.items()))
        lines.append(f"created {card.get('created')}" + (f", commit {card['commit']}" if card.get("commit") else ""))
    if info.get("normaliser"):
        lines.append("normaliser:")
        lines += ["  " + line for line in Normaliser.from_dict(info["normaliser"]).describe()]
    for note in info.get("notes", ()):
        lines.append(f"note: {note}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- updating
def update_card(path, **entries):
    """Set ``entries`` in the card of the model file ``path`` (e.g. ``evaluation=...``):
    the archive is copied beside it with its ``config.json`` changed, then renamed over it
    (:func:`taylorformer.files.atomic_path`). A file without a card is left alone
    (returns False)."""
    config = _zip_config(path)
    card = config["config"].get("model_card")
    if not isinstance(card, dict):
        return False
    card.update(jsonable(entries))
    with zipfile.ZipFile(path) as source, atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as target:
            for item in source.infolist():
                data = (json.dumps(config).encode("utf-8") if item.filename == "config.json"
                        else source.read(item))
                target.writestr(item, data)
    return True
