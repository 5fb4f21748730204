"""Shared fixtures: fake installed distributions for registry tests, TF settings, and an
offline mirror of the named datasets."""
import importlib
import os
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small Cholesky factorisations in tasks


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """Write a fake installed distribution (``*.dist-info`` + modules) onto ``sys.path``.

    ``fake_dist(name, version, modules={"mod": "source"}, entry_points={"ep": "mod"})``
    """
    monkeypatch.syspath_prepend(str(tmp_path))
    created = []

    def make(name, version="1.0", modules=None, entry_points=None):
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        lines = ["[taylorformer]"] + [f"{ep} = {target}" for ep, target in (entry_points or {}).items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for mod, source in (modules or {}).items():
            (tmp_path / f"{mod}.py").write_text(textwrap.dedent(source))
            created.append(mod)
        importlib.invalidate_caches()
        return info

    yield make
    for mod in created:
        sys.modules.pop(mod, None)
    importlib.invalidate_caches()


@pytest.fixture(autouse=True)
def _no_xla_unless_asked(monkeypatch):
    """Training runs in tests use XLA only where a test asks for it (``jit_compile=True``):
    compiling the train and eval steps of every short run would double the suite's time.
    The ``"auto"`` rule itself is tested in ``tests/core/test_training.py``."""
    from taylorformer import training

    rule = training.resolve_jit_compile
    monkeypatch.setattr(training, "resolve_jit_compile",
                        lambda value, strategy: rule(False if value == "auto" else value, strategy))


#: the real data files beside this checkout (in CI too, never on a user's machine)
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
#: mirror file name -> its place in SHARED_DATA
MIRRORED = {"ETTh1.csv": "ett/ETTh1.csv", "exchange_rate.txt.gz": "exchange_rate/exchange_rate.txt.gz"}


@pytest.fixture
def shared_data():
    """:data:`SHARED_DATA` (skips the test where this checkout has none beside it)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("no ../shared/data beside this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def data_mirror(tmp_path_factory):
    """Named datasets come from a flat ``file://`` mirror of SHARED_DATA into a fresh cache,
    for this process and its subprocesses: tests never touch the network, and the
    download-and-check path runs on the real files."""
    from taylorformer.tasks.datasets import CACHE_ENV, MIRROR_ENV

    mirror = tmp_path_factory.mktemp("mirror")
    for name, place in MIRRORED.items():
        if (SHARED_DATA / place).is_file():
            (mirror / name).symlink_to(SHARED_DATA / place)
    saved = {key: os.environ.get(key) for key in (MIRROR_ENV, CACHE_ENV)}
    os.environ[MIRROR_ENV] = mirror.as_uri()
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("cache"))
    yield mirror
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
