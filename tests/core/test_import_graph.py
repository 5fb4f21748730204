"""The core's import graph: no cycle, and private Keras/TensorFlow APIs only in tf_compat.py.

Both are read from the source with ``ast`` and ``re`` (nothing is imported), over
``taylorformer/``, ``plugins/`` (``taylorformer.plugins``) and ``tasks/``
(``taylorformer.tasks``), function-level imports included: a function-level import is an
import cycle waiting for its first call.
"""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> the package it installs as (setup.cfg's package_dir)
PACKAGES = {"taylorformer": "taylorformer", "plugins": "taylorformer.plugins", "tasks": "taylorformer.tasks"}
#: imports of private Keras / TensorFlow / tf-keras modules
PRIVATE = re.compile(r"\b(keras\.src|tensorflow\.python|tf_keras\.src)\b")
#: the one module allowed to use them
PRIVATE_HOME = Path("taylorformer") / "tf_compat.py"


def core_modules():
    """module name -> (path, is_package) of every .py file of the core."""
    modules = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join((package, *(parts[:-1] if is_package else parts)))
            modules[name] = (path, is_package)
    return modules


def imported_modules(name, path, is_package, known):
    """The core modules ``name`` imports anywhere in its file (parent packages implied by a
    dotted import are left out: they are not part of what the file asks for)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known)
    return found - {name}


def import_graph():
    known = core_modules()
    return {name: imported_modules(name, path, pkg, known) for name, (path, pkg) in known.items()}


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_reader_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "taylorformer.replication" in graph["taylorformer.cli"]          # inside a function
    assert "taylorformer.experiment" in graph["taylorformer.registry"]
    assert "taylorformer.plugins.tnp.presets" in graph["taylorformer.plugins.tnp"]
    assert len(graph) > 60


def test_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_core_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (module groups that import each other): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_the_registry_needs_no_replication_or_spec():
    """The registry checks an experiment's type against taylorformer.experiment, which
    imports neither the registry nor the spec (the cycle issue 39 removed)."""
    graph = import_graph()
    assert not graph["taylorformer.registry"] & {"taylorformer.replication", "taylorformer.spec"}
    assert not graph["taylorformer.experiment"] & {"taylorformer.registry", "taylorformer.spec"}


@pytest.mark.parametrize("folder", ["taylorformer", "plugins", "tasks", "tests", "examples", "benchmarks",
                                    "scripts"])
def test_private_keras_and_tensorflow_apis_only_in_tf_compat(folder):
    offenders = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel == PRIVATE_HOME:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line) and not (rel == Path(__file__).relative_to(ROOT)):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, ("private Keras/TensorFlow APIs belong in taylorformer/tf_compat.py:\n"
                           + "\n".join(offenders))
