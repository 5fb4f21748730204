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

A dataset published as a zip archive (:class:`DataArchive`, e.g. ``beijing-air``) is
downloaded the same way (a mirror holds the archive under its usual name, e.g.
``electricityloaddiagrams20112014.zip`` of ``uci-electricity``), its members
are extracted into the cache folder ``datasets/<name>/`` and each member is checked
against its own pinned digest; :func:`fetch` then returns that folder. A member placed
there by hand is used after the same check.
Licences and citations: ``docs/tasks.md``.
"""
import dataclasses
import hashlib
import io
import os
import zipfile
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


@dataclasses.dataclass(frozen=True)
class DataArchive:
    """A public zip archive: its usual name, canonical URL and the files used from it.

    ``members`` maps each file's name to its pinned digest (the files are checked, not the
    archive, whose own digest may be unknown); ``inner`` names a zip inside the archive
    that holds them (matched by file name, wherever it lies in the archive).
    """

    filename: str
    url: str
    members: dict
    inner: str = None


_UCI_BEIJING = "https://archive.ics.uci.edu/static/public/501/beijing+multi+site+air+quality+data.zip"
_UCI_ELECTRICITY = "https://archive.ics.uci.edu/static/public/321/electricityloaddiagrams20112014.zip"
#: SHA-256 of LD2011_2014.txt (710,998,915 bytes) in the UCI ElectricityLoadDiagrams20112014 archive
#: (261,335,609 bytes): not computed here (no network); the value eight files of public repositories
#: publish for the file downloaded from that URL, all agreeing (docs/tasks.md)
UCI_ELECTRICITY_SHA256 = "d51565f2cb5a6b768d06ba1bbd3c084c6e2f3aab07f00c6f2dcb80e90175124b"
#: SHA-256 of the 12 station files of the UCI Beijing Multi-Site Air Quality archive (see
#: docs/tasks.md for how they were obtained and cross-checked)
BEIJING_STATIONS = {
    "Aotizhongxin": "a94fbcfc71708b6ffdc033360163d91efb7f675e496f6b5860929aa96b96351b",
    "Changping": "a2e21402a6d95fb7043f87959e6e3dcbecb957aac356a6f8028a85b047c772e7",
    "Dingling": "3d8dff81f18a80d9f455876a785642bffe1e9b9924ec1e6b7ce8cca790432eeb",
    "Dongsi": "9c0020214425e5ee2a64d42f97a1f632e1d8f6b53ad50edd85a686cc7999f27e",
    "Guanyuan": "59390fee3b032597b387491f5230e7edb90a8558e30217ebd6d9befbe669fbf9",
    "Gucheng": "10ae48801ea55869fee56a48b885fb1127859c130551888d71673f34216ba951",
    "Huairou": "812dcbe848b3ba2c2d25731064797bff803c46eb0c602156a1fa044df136dc26",
    "Nongzhanguan": "572cf87b65ef543cd55d3a711b28474def224a46b0ec3fc8add8aaf13b67a487",
    "Shunyi": "520b59e4ead3b0cfe7f1ed673e30275de8441e999db6f413d5172d2277b8c15a",
    "Tiantan": "0743e34799cf1ee36195b73321b91baa5625276532e7263c588f68cdef3b4daa",
    "Wanliu": "0b1a6d754a07f0def2f55434ddfa3870dcd0063b7f766a6f66b6c11bb05a377a",
    "Wanshouxigong": "ab1d6a356d6997a45f6d657ad47de1e05a4a08d4a7015b38a329a90665ab74d0",
}

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
    "beijing-air": DataArchive(
        "beijing+multi+site+air+quality+data.zip", _UCI_BEIJING,
        {f"PRSA_Data_{station}_20130301-20170228.csv": f"sha256:{digest}"
         for station, digest in BEIJING_STATIONS.items()},
        inner="PRSA2017_Data_20130301-20170228.zip"),
    "uci-electricity": DataArchive("electricityloaddiagrams20112014.zip", _UCI_ELECTRICITY,
                                   {"LD2011_2014.txt": f"sha256:{UCI_ELECTRICITY_SHA256}"}),
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
    """Local path of the named dataset, downloaded and checked on first use: the file of a
    :class:`DataFile`, the folder of the extracted members of a :class:`DataArchive`."""
    if name not in DATASETS:
        hint = close_matches(name, DATASETS)
        raise TaskError(f"unknown dataset {name!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                        + f" Named datasets: {', '.join(sorted(DATASETS))}.")
    entry = DATASETS[name]
    if isinstance(entry, DataArchive):
        return _fetch_archive(name, entry)
    target = _download(name, entry)
    _check(name, target, entry.digest, source_url(entry))
    return target


def _download(name, entry):
    """``entry``'s file in the cache's ``datasets/`` folder, downloaded there if missing."""
    import keras

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
    return target


def _check(name, path, digest, origin):
    """Raise (removing ``path``) unless ``path`` has the pinned ``digest``."""
    kind, expected = digest.split(":", 1)
    actual = digest_of(path, kind)
    if actual != expected:
        path.unlink()
        raise TaskError(f"dataset {name!r}: {path} (from {origin}) has {kind} {actual}, expected "
                        f"{expected}; the corrupt copy was removed. Fetch it again, or check the "
                        f"mirror's copy.")


def _fetch_archive(name, entry):
    """The folder ``datasets/<name>/`` holding ``entry``'s members, each checked; missing
    members are extracted from the archive (downloaded first, removed afterwards)."""
    folder = cache_dir() / "datasets" / name
    missing = [m for m in entry.members if not (folder / m).is_file()]
    if missing:
        archive = _download(name, entry)
        where = f"dataset {name!r}: archive {archive} (from {source_url(entry)})"
        try:
            with zipfile.ZipFile(archive) as outer:
                if entry.inner is None:
                    _extract(outer, missing, folder, where)
                else:
                    data = outer.read(_member(outer, entry.inner, where))
                    with zipfile.ZipFile(io.BytesIO(data)) as inner:
                        _extract(inner, missing, folder, f"{where}, inner zip {entry.inner}")
        except zipfile.BadZipFile as exc:
            archive.unlink()
            raise TaskError(f"{where} is not a valid zip file ({exc}); it was removed. Fetch it "
                            f"again, or check the mirror's copy.") from None
        archive.unlink()  # the checked members are the cache
    for member in missing:
        _check(name, folder / member, entry.members[member], f"{entry.filename}")
    for member in sorted(set(entry.members) - set(missing)):
        _check(name, folder / member, entry.members[member], f"{folder}")
    return folder


def _member(archive, filename, where):
    """Name of the entry of ``archive`` whose file name is ``filename``."""
    found = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == filename]
    if not found:
        raise TaskError(f"{where} holds no file {filename!r}; it holds {sorted(archive.namelist())[:20]}")
    return found[0]


def _extract(archive, members, folder, where):
    """Write ``members`` (file names) of ``archive`` into ``folder`` (by file name only)."""
    folder.mkdir(parents=True, exist_ok=True)
    for member in members:
        data = archive.read(_member(archive, member, where))
        tmp = folder / (member + ".part")
        tmp.write_bytes(data)
        os.replace(tmp, folder / member)
