"""Shared fixtures: fake installed distributions for registry tests, TF settings."""
import importlib
import os
import sys
import textwrap

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
