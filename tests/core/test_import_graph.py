"""The core's import graph: imports point down the layers of :data:`LAYERS`, no cycle, no
private name imported from another module, and private Keras/TensorFlow APIs only in
tf_compat.py.

All are read from the source with ``ast`` and ``re`` (nothing is imported), over
``taylorformer/``, ``plugins/`` (``taylorformer.plugins``) and ``tasks/``
(``taylorformer.tasks``), function-level imports included: a function-level import is an
import cycle waiting for its first call. A folder with a ``setup.cfg`` of its own
(``plugins/replication``) is another distribution, a plugin, not the core.
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

#: the core's layers, bottom first: a module imports modules of its own layer and of the
#: layers below it, never of a layer above. An entry covers its submodules, except the top
#: package ``taylorformer`` (its ``__init__``: the public API), which is listed on its own.
LAYERS = (
    # plain helpers every layer may use: errors, value checks, atomic file writing, the
    # batch layout, data units (the normaliser), coordinates, hook markers, TF shims
    ("foundations", ("taylorformer.errors", "taylorformer.checks", "taylorformer.files", "taylorformer.batch",
                     "taylorformer.normaliser", "taylorformer.coordinates", "taylorformer.pixel_grid",
                     "taylorformer.hookspecs", "taylorformer.tf_compat")),
    ("attention", ("taylorformer.attention", "taylorformer.attention_executor")),
    ("plugin contract", ("taylorformer.plugin_api",)),
    ("registry", ("taylorformer.registry",)),
    ("components", ("taylorformer.components",)),
    ("spec", ("taylorformer.spec",)),
    # what describes a model file and a published row; no model code
    ("records", ("taylorformer.model_card",)),
    ("models", ("taylorformer.models",)),
    ("plotting", ("taylorformer.plotting",)),
    ("tasks", ("taylorformer.task", "taylorformer.tasks")),
    # predictions from a model and data in their own units: never a run directory
    ("prediction", ("taylorformer.prediction",)),
    # training, run directories, evaluation of runs
    ("workflow", ("taylorformer.workflow",)),
    ("plugins", ("taylorformer.plugins", "taylorformer.testing", "taylorformer")),
    ("command line", ("taylorformer.cli",)),
)


def core_modules():
    """module name -> (path, is_package) of every .py file of the core."""
    modules = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if distribution_of(path) is not None:
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join((package, *(parts[:-1] if is_package else parts)))
            modules[name] = (path, is_package)
    return modules


def distribution_of(path):
    """The folder of the distribution of its own (a ``setup.cfg`` of its own) that holds the
    file ``path`` inside a core folder, or None."""
    for folder in path.relative_to(ROOT).parents:
        if folder.parent != Path(".") and (ROOT / folder / "setup.cfg").is_file():
            return ROOT / folder
    return None


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


def layer_of(module):
    """Index in :data:`LAYERS` of ``module`` (None: in no layer)."""
    for index, (_, entries) in enumerate(LAYERS):
        if any(module == entry or (module.startswith(entry + ".") and entry != "taylorformer")
               for entry in entries):
            return index
    return None


def upward_imports(graph):
    """``"importer (layer) -> imported (layer)"`` for every import of a higher layer."""
    return [f"{name} ({LAYERS[layer_of(name)][0]}) -> {target} ({LAYERS[layer_of(target)][0]})"
            for name in sorted(graph) for target in sorted(graph[name])
            if layer_of(target) > layer_of(name)]


def private_imports(name, path, is_package, known):
    """``"name: module._private"`` for each private name (one leading underscore) of another
    core module that ``name``'s file imports (``from module import _x``) or reads
    (``module._x`` through an imported module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    modules[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif base in known and base != name and _private(alias.name):
                    found.append(f"{name}: {base}.{alias.name}")
        elif isinstance(node, ast.Import):
            modules.update({alias.asname: alias.name for alias in node.names
                            if alias.asname and alias.name in known})
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
                and modules.get(node.value.id, name) != name):
            found.append(f"{name}: {modules[node.value.id]}.{node.attr}")
    return found


def _private(attribute):
    return attribute.startswith("_") and not attribute.startswith("__")


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
    assert "taylorformer.workflow.runs" in graph["taylorformer.cli"]        # inside a function
    assert "taylorformer.components" in graph["taylorformer.task"]          # inside a function
    assert "taylorformer.plugins.tnp.presets" in graph["taylorformer.plugins.tnp"]
    assert len(graph) > 60


def test_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_core_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (module groups that import each other): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_every_core_module_has_a_layer():
    unplaced = sorted(name for name in core_modules() if layer_of(name) is None)
    assert not unplaced, f"modules in no layer of LAYERS (place them): {unplaced}"


def test_the_layer_check_finds_a_planted_upward_import():
    graph = {"taylorformer.files": {"taylorformer.workflow.run_dir"}, "taylorformer.cli": {"taylorformer.files"}}
    assert upward_imports(graph) == ["taylorformer.files (foundations) -> taylorformer.workflow.run_dir (workflow)"]


def test_imports_point_down_the_layers():
    """No import (module-level or inside a function) runs from a layer to a higher one:
    the records and predictions never reach into training's run directories, the plugin
    contract never into the models, the registry never into the records it checks."""
    upward = upward_imports(import_graph())
    assert not upward, "imports from a lower layer to a higher one (see LAYERS):\n" + "\n".join(upward)


def test_the_private_name_check_finds_planted_ones(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from taylorformer.normaliser import _hidden, Normaliser\n"
                    "from taylorformer import normaliser as n\n"
                    "n._other(n.__name__, _self)\n")
    known = {"taylorformer.normaliser": None, "taylorformer.m": None}
    assert private_imports("taylorformer.m", path, False, known) == [
        "taylorformer.m: taylorformer.normaliser._hidden", "taylorformer.m: taylorformer.normaliser._other"]


def test_no_module_uses_another_modules_private_names():
    """A name with a leading underscore is its module's own; what another module needs is
    public (``normaliser.jsonable``, ``csv_series.listed_rows``)."""
    known = core_modules()
    found = [line for name, (path, is_package) in known.items()
             for line in private_imports(name, path, is_package, known)]
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_the_example_plugin_uses_only_public_names():
    """examples/third_party_plugin is written as a third party writes a plugin: from the
    public names only."""
    known = core_modules()
    found = [line for path in sorted((ROOT / "examples").rglob("*.py"))
             for line in private_imports(str(path.relative_to(ROOT)), path, False, known)]
    assert not found, "private names of the core used by the example:\n" + "\n".join(found)


def test_the_replication_package_is_a_plugin_of_public_names():
    """plugins/replication is a distribution of its own, read as a plugin: it uses the
    core's public names only, and no core module imports it."""
    known = core_modules()
    package = ROOT / "plugins" / "replication"
    assert distribution_of(package / "taylorformer_replication" / "replication.py") == package
    assert not any(name.startswith("taylorformer.plugins.replication") for name in known)
    found = [line for path in sorted(package.rglob("*.py"))
             for line in private_imports(str(path.relative_to(ROOT)), path, False, known)]
    assert not found, "private names of the core used by the replication package:\n" + "\n".join(found)
    importers = [name for name, (path, _) in known.items()
                 if re.search(r"^\s*(from|import)\s+taylorformer_replication\b", path.read_text(encoding="utf-8"), re.M)]
    assert importers == [], f"core modules that import the replication plugin: {importers}"


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
