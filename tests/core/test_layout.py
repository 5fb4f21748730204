"""The core's layout (issue 39): the plugin contract's import paths, the front-door names, and
every module path the docs name resolves (a documented path is public).

A reader's map of the layout is the docstring of ``taylorformer/__init__.py`` and README.md's
"Layout"; these tests keep the promises in them true when modules move.
"""
import importlib
import re
from pathlib import Path

import pytest

import taylorformer as tfm
from taylorformer.registry import COMMANDS_GROUP

ROOT = Path(__file__).resolve().parents[2]
#: what a plugin imports (docs/plugins.md, "What a plugin imports"): stable across releases
PLUGIN_CONTRACT = ["hookspecs", "registry", "plugin_api", "errors", "checks", "task", "batch", "spec",
                   "components", "attention", "testing", "attention_executor"]
#: the parts, one folder each (setup.cfg lists each as a package)
PARTS = ["models", "prediction", "workflow", "plotting"]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").rglob("*.md"))]
DOTTED = re.compile(r"(?<![\w./>-])taylorformer(?:\.[A-Za-z_]\w*)+")
#: file paths in the docs
FILE_PATH = re.compile(r"(?<![\w./-])taylorformer/[\w/]+\.py")
#: setup.cfg's package_dir: taylorformer.plugins and taylorformer.tasks live in plugins/, tasks/
SOURCE_DIRS = {"taylorformer/plugins/": "plugins/", "taylorformer/tasks/": "tasks/"}


def resolve(dotted):
    """Import the longest importable module prefix of ``dotted``, then read the attributes."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                continue
            raise
        for attribute in parts[end:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("name", PLUGIN_CONTRACT)
def test_the_plugin_contract_stays_at_the_top(name):
    assert (ROOT / "taylorformer" / f"{name}.py").is_file() or (ROOT / "taylorformer" / name / "__init__.py").is_file()
    assert importlib.import_module(f"taylorformer.{name}").__name__ == f"taylorformer.{name}"


def test_each_part_is_a_package_setup_cfg_installs():
    listed = (ROOT / "setup.cfg").read_text(encoding="utf-8")
    for part in PARTS:
        assert (ROOT / "taylorformer" / part / "__init__.py").is_file()
        assert re.search(rf"^\s+taylorformer\.{part}\s*$", listed, re.M), part


def test_no_flat_module_outside_the_map():
    """A new module at the top of the package is either part of the plugin contract or one of
    the few the map lists under "the model file" and "the rest"; anything else belongs in a part's folder."""
    rest = {"__init__", "cli", "tf_compat", "pixel_grid", "normaliser", "model_card", "files", "coordinates"}
    flat = {p.stem for p in (ROOT / "taylorformer").glob("*.py")}
    assert flat - set(PLUGIN_CONTRACT) - rest == set()
    doc = tfm.__doc__
    for name in flat - {"__init__"}:
        assert re.search(rf"\b{name}\b", doc), f"taylorformer/{name}.py is missing from the map in __init__"


@pytest.mark.parametrize("name", sorted(tfm._LAZY))
def test_front_door_names_resolve(name):
    obj = getattr(tfm, name)
    assert obj is getattr(importlib.import_module(tfm._LAZY[name]), name)
    assert name in tfm.__all__


def test_documented_top_level_modules_import():
    """docs/calibration.md imports the calibration module from the package itself (spelled
    with __import__, which is what that from-import does, so that s1-rewrite.py leaves it)."""
    calibration = __import__("taylorformer", fromlist=["calibration"]).calibration
    from taylorformer.prediction import calibration as home

    assert calibration is home is tfm.calibration
    assert set(tfm._LAZY_MODULES) <= set(tfm.__all__)


def test_every_module_path_the_docs_name_resolves():
    broken = []
    for doc in DOCS:
        for dotted in sorted(set(DOTTED.findall(doc.read_text(encoding="utf-8"))) - {COMMANDS_GROUP}):
            try:  # the commands' entry-point group is spelled like a module path
                resolve(dotted)
            except (ImportError, AttributeError) as exc:
                broken.append(f"{doc.relative_to(ROOT)}: {dotted} ({exc})")
    assert not broken, "module paths in the docs that do not resolve:\n" + "\n".join(broken)


def test_every_source_file_the_docs_name_exists():
    missing = []
    for doc in DOCS:
        for path in sorted(set(FILE_PATH.findall(doc.read_text(encoding="utf-8")))):
            source = path
            for installed, folder in SOURCE_DIRS.items():
                if source.startswith(installed):
                    source = folder + source[len(installed):]
            if not (ROOT / source).is_file():
                missing.append(f"{doc.relative_to(ROOT)}: {path}")
    assert not missing, "source files the docs name that do not exist:\n" + "\n".join(missing)


def test_the_resolver_fails_on_a_moved_path():
    """The doc check is not vacuous: an old flat path (moved by issue 39) does not resolve."""
    with pytest.raises((ImportError, AttributeError)):
        resolve("taylorformer." + "runs.load_run")  # split: s1-rewrite.py would update it
    assert resolve("taylorformer.workflow.runs.load_run") is tfm.evaluate_run.__globals__["load_run"]
