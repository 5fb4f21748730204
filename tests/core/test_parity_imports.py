"""The parity scripts that run in taylorformer's venv import only names that exist and are public.

``benchmarks/parity/<family>/`` compares a model family with its authors' code (docs/parity.md);
no test runs those comparisons (they need the reference's own environment), so a module move
breaks them silently: the TNP-D scripts imported ``Trainer`` from the flat ``training`` module
that issue 39 moved, as the first copy of them in ``../shared/refs/tnp`` still does. This
reads each script's ``taylorformer`` imports with ``ast`` (without running the script) and
resolves every module and name.
"""
import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: scripts run with the taylorformer venv (the others import the reference's packages)
SCRIPTS = ["benchmarks/parity/tnp_d/train_ours.py", "benchmarks/parity/tnp_d/check_like_ours.py",
           "benchmarks/parity/tnp_d/dump_data.py", "benchmarks/parity/tnp_d/infer_ours.py",
           "benchmarks/parity/np/dump_data.py", "benchmarks/parity/np/train_ours.py",
           "benchmarks/parity/np/check_function.py", "benchmarks/parity/convcnp/check_function.py",
           "benchmarks/parity/convcnp/step_time.py", "benchmarks/parity/te_tnp/train_ours.py",
           "benchmarks/parity/te_tnp/check_function.py", "benchmarks/parity/te_tnp/forward_time.py",
           "benchmarks/parity/bsa_tnp/train_ours.py", "benchmarks/parity/bsa_tnp/dump_data.py",
           "benchmarks/parity/bsa_tnp/check_function.py", "benchmarks/parity/taylorformer/train_ours.py",
           "benchmarks/parity/taylorformer/dump_data.py", "benchmarks/parity/taylorformer/check_function.py",
           "benchmarks/parity/taylorformer/forward_time.py", "benchmarks/parity/table5/train_ours.py",
           "benchmarks/parity/table5/dump_shifts.py"]


def taylorformer_imports(source):
    """``[(module, name or None)]`` for every ``import taylorformer...`` / ``from taylorformer... import``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.split(".")[0] == "taylorformer"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] == "taylorformer":
            out += [(node.module, a.name) for a in node.names]
    return out


def unresolved(imports):
    """The imports that do not resolve, or that name a private object."""
    bad = []
    for module, name in imports:
        try:
            obj = importlib.import_module(module)
            if name is not None:
                getattr(obj, name)
        except (ImportError, AttributeError) as exc:
            bad.append(f"{module} {name or ''}: {exc}")
            continue
        if any(part.startswith("_") for part in module.split(".") + [name or ""]):
            bad.append(f"{module} {name or ''}: private")
    return bad


@pytest.mark.parametrize("script", SCRIPTS)
def test_parity_script_imports_resolve(script):
    imports = taylorformer_imports((ROOT / script).read_text(encoding="utf-8"))
    assert imports, f"{script} imports nothing from taylorformer"
    assert unresolved(imports) == [], script


def test_the_check_catches_a_moved_module():
    """Not vacuous: the import line of ../shared/refs/tnp/check_like_ours.py (the module path
    before issue 39, ``make_task`` from before it moved to ``taylorformer.task``) is caught,
    and the front door's public names pass."""
    old = "from taylorformer." + "training import Trainer, TrainConfig, make_task\n"
    assert taylorformer_imports(old) == [("taylorformer." + "training", n) for n in ("Trainer", "TrainConfig", "make_task")]
    assert len(unresolved(taylorformer_imports(old))) == 3
    new = "from taylorformer import Trainer, TrainConfig\nfrom taylorformer.task import make_task\n"
    assert unresolved(taylorformer_imports(new)) == []
    assert unresolved([("taylorformer.models.layers", "_private_missing")]) != []
