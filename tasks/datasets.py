"""Named public datasets: fetched on first use, cached, checked (``taylorformer.tasks.datasets``).

:func:`fetch` returns the local path of a named file. It downloads it once with
``keras.utils.get_file`` from its canonical public location (or from a mirror) into
the cache and checks its content against a pinned digest before use:

* ``$TAYLORFORMER_DATA_MIRROR``: another base URL, a flat folder of the files under
  their usual names (``ETTh1.csv``, ``exchange_rate.txt.gz``, ...); a ``file://`` URL or
  a plain local folder works (offline machines, tests).
* ``$TAYLORFORMER_CACHE_DIR``: the cache (default ``~/.cache/taylorformer``); files live
  in its ``datasets/`` folder, and a file placed there by hand is used (after the check).

Digests are ``sha256:<hex>`` (the file's SHA-256), or ``git-blob:<hex>`` (the git blob id
the upstream repository publishes for the file) where only that is known here.
Licences and citations: ``docs/tasks.md``.
"""
import dataclasses
import hashlib
import os
from pathlib import Path

from taylorformer.errors import TaskError, close_matches

MIRROR_ENV = "TAYLORFORMER_DATA_MIRROR"
CACHE_ENV = "TAYLORFORMER_CACHE_DIR"
_ETT = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/1d16c8f4f943005d613b5bc962e9eeb06058cf07/ETT-small/"
_LAI = ("https://raw.githubusercontent.com/laiguokun/multivariate-time-series-data/"
        "7f402f185cc2435b5e66aed13a3b560ed142e023/")


@dataclasses.dataclass(frozen=True)
class DataFile:
    """A public file: its usual name, canonical URL and pinned digest."""

    filename: str
    url: str
    digest: str


DATASETS = {
    "etth1": DataFile("ETTh1.csv", _ETT + "ETTh1.csv",
                      "sha256:f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066"),
    "etth2": DataFile("ETTh2.csv", _ETT + "ETTh2.csv",
                      "sha256:a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b"),
    "ettm1": DataFile("ETTm1.csv", _ETT + "ETTm1.csv", "git-blob:62c9f979e2dc5b05d9cc5b38891e60e6baf77417"),
    "ettm2": DataFile("ETTm2.csv", _ETT + "ETTm2.csv", "git-blob:f9d46027c987d442d2d8f81308d1d8c4d1d35db8"),
    "exchange-rate": DataFile(
        "exchange_rate.txt.gz", _LAI + "exchange_rate/exchange_rate.txt.gz",
        "sha256:6a4fbb561dcdee43f071a83badbeec9223a335552278348656738b556f1c2e9d"),
    "electricity": DataFile("electricity.txt.gz", _LAI + "electricity/electricity.txt.gz",
                            "git-blob:df158a9fff65428ece107200432a72c992d5e4e9"),
}


def cache_dir():
    """The cache root: ``$TAYLORFORMER_CACHE_DIR`` or ``~/.cache/taylorformer``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "taylorformer").expanduser()


def source_url(entry):
    """Where ``entry`` is downloaded from: the mirror's copy when a mirror is set."""
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if not mirror:
        return entry.url
    if "://" not in mirror:  # a local folder
        mirror = Path(mirror).expanduser().resolve().as_uri()
    return mirror.rstrip("/") + "/" + entry.filename


def digest_of(path, kind):
    """``path``'s digest of ``kind`` (``sha256`` or ``git-blob``) as hex, read in chunks."""
    digest = hashlib.sha1(b"blob %d\0" % os.path.getsize(path)) if kind == "git-blob" else hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(name):
    """Local path of the named dataset's file, downloaded and checked on first use."""
    import keras

    if name not in DATASETS:
        hint = close_matches(name, DATASETS)
        raise TaskError(f"unknown dataset {name!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                        + f" Named datasets: {', '.join(sorted(DATASETS))}.")
    entry = DATASETS[name]
    folder = cache_dir() / "datasets"
    target = folder / entry.filename
    url = source_url(entry)
    if not target.is_file():
        try:
            folder.mkdir(parents=True, exist_ok=True)  # get_file falls back to /tmp/.keras otherwise
            keras.utils.get_file(fname=entry.filename, origin=url, cache_dir=str(cache_dir()),
                                 cache_subdir="datasets")
        except Exception as exc:  # noqa: BLE001 - urllib/HTTP/OS errors: say where the file goes
            raise TaskError(
                f"dataset {name!r}: could not download {url} ({type(exc).__name__}: {exc}). Offline? "
                f"Put {entry.filename} into {folder}, set {MIRROR_ENV} to a folder or URL holding "
                f"it, or pass path= a local copy.") from None
    kind, expected = entry.digest.split(":", 1)
    actual = digest_of(target, kind)
    if actual != expected:
        target.unlink()
        raise TaskError(f"dataset {name!r}: {target} (from {url}) has {kind} {actual}, expected "
                        f"{expected}; the corrupt copy was removed. Fetch it again, or check the "
                        f"mirror's copy.")
    return target
