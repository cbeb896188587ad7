"""The package :mod:`attsvm.experiments`: its modules are layered, it exports every name that is imported from it, and
its built-in experiments are discovered from the shipped ``numerics/``, never listed or taken from a user's folder.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from test_svm_robust import import_problems

import attsvm.experiments as experiments

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "attsvm" / "experiments"
#: the folders whose Python files may import from attsvm.experiments (the engine, specs, claims, tests, scripts)
USERS = ("attsvm", "numerics", "proofs", "property_tests", "benchmarks", "examples")


def test_experiments_import_graph_is_layered_and_acyclic():
    sources = {p.stem: p.read_text(encoding="utf-8") for p in PKG.glob("*.py")}
    assert import_problems(sources, experiments.LAYERS, "experiments") == []
    layered = [m for names in experiments.LAYERS for m in names]
    assert sorted(layered) == sorted(set(sources) - {"__init__"})


def test_the_layering_check_sees_an_upward_import_in_this_package():
    """A module of layer 0 importing the runner (layer 2) and a private name is reported, through either spelling."""
    sources = {p.stem: p.read_text(encoding="utf-8") for p in PKG.glob("*.py")}
    planted = dict(sources, spec=sources["spec"] + "\nfrom .runner import reproduce\n")
    found = import_problems(planted, experiments.LAYERS, "experiments")
    assert any("spec (layer 0) imports runner (layer 2)" in p for p in found), found
    planted = dict(sources, options=sources["options"] + "\nfrom attsvm.experiments.stages import _call_job\n")
    found = import_problems(planted, experiments.LAYERS, "experiments")
    assert any("options imports a private name from .stages" in p for p in found), found


def _imported_names(tree: ast.Module, relative_depth: int | None) -> set[str]:
    """The names of every ``from attsvm.experiments import ...`` in ``tree`` (and ``from <dots>experiments import``
    when the file lies ``relative_depth`` packages below ``attsvm``)."""
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        absolute = node.level == 0 and node.module == "attsvm.experiments"
        relative = relative_depth is not None and node.level == relative_depth and node.module == "experiments"
        if absolute or relative:
            out |= {a.name for a in node.names}
    return out


def test_every_name_imported_from_the_package_is_exported():
    """Every ``from attsvm.experiments import X`` of the repository (specs, CLI, claims, tests, scripts) finds ``X``
    in ``__all__`` (or a submodule), and every name of ``__all__`` exists."""
    used: dict[str, list[str]] = {}
    for top in USERS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if PKG in path.parents:
                continue
            rel = path.relative_to(ROOT)
            depth = len(rel.parts) - 1 if rel.parts[0] == "attsvm" else None  # attsvm/cli/x.py: from ..experiments
            for name in _imported_names(ast.parse(path.read_text(encoding="utf-8")), depth):
                used.setdefault(name, []).append(str(rel))
    assert {"NAMES", "reproduce", "call_each", "gd_runs", "Option", "load_spec"} <= set(used)  # the scan sees them
    submodules = {p.stem for p in PKG.glob("*.py")} - {"__init__"}
    missing = {n: files for n, files in used.items() if n not in experiments.__all__ and n not in submodules}
    assert not missing, f"imported from attsvm.experiments but not exported: {missing}"
    assert [n for n in experiments.__all__ if not hasattr(experiments, n)] == []


def test_the_builtin_experiments_are_the_shipped_specs_whatever_the_user_folder(tmp_path):
    """``NAMES`` is discovered from the shipped ``numerics/`` (sorted by name) when the package is imported: a user's
    ``$ATTSVM_NUMERICS`` (in use for a run) with another spec does not change it."""
    mine = tmp_path / "numerics"
    mine.mkdir()
    (mine / "zzmine.py").write_text("TITLE = 'mine'\n")
    env = dict(os.environ, ATTSVM_NUMERICS=str(mine), PYTHONPATH=str(ROOT))
    code = "import attsvm.experiments as e, attsvm.paths as p; print(','.join(e.NAMES)); print(p.numerics_dir())"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    names, used = r.stdout.split()
    shipped = sorted(p.stem for p in (ROOT / "numerics").glob("*.py") if not p.name.startswith("_"))
    assert names.split(",") == shipped and len(shipped) >= 12
    assert Path(used) == mine  # the user's folder is the one in use, yet not the built-in list
