"""The GD engine's import graph (``attsvm/gd``): layered and acyclic, no private name crossing a module boundary,
and the torch-free modules free of torch at import — checked from the source, as ``attsvm/svm`` is.

A function-level import inside the package is allowed only downwards and only to reach a module that imports torch
or numba (:data:`HEAVY`): that is how ``engine.run`` picks a kernel and an algorithm module declares its torch step
without loading torch when the registry is listed or a run is validated.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from test_svm_robust import import_cycles

import attsvm.gd as gd_pkg

GD = Path(gd_pkg.__file__).parent

#: the layers of attsvm/gd, lowest first: a module imports only modules of strictly lower layers
LAYERS: tuple[tuple[str, ...], ...] = (
    ("init", "numerics", "options", "reference", "simd", "summary", "targets"),
    ("algorithm", "model_torch", "ranges", "steepest", "trajectory"),
    ("steps",),
    ("algos.adam", "algos.gd", "algos.md", "algos.ngd", "algos.nsd", "algos.signum"),
    ("algos.muon", "algos.nmd"),
    ("algos",),
    ("spec",),
    ("result",),
    ("fused", "loop"),
    ("engine", "regpath"),
    ("shards",),
)
#: the modules that import torch or numba at import time (reached lazily from the torch-free ones)
HEAVY = {"fused", "loop", "model_torch", "numerics", "regpath", "simd", "steepest", "steps"}


def _sources(root: Path = GD) -> dict[str, str]:
    out = {p.stem: p.read_text() for p in root.glob("*.py") if p.stem != "__init__"}
    out["algos"] = (root / "algos" / "__init__.py").read_text()
    out.update({f"algos.{p.stem}": p.read_text() for p in (root / "algos").glob("*.py") if p.stem != "__init__"})
    return out


def _edges(name: str, src: str, mods: set[str]) -> list[tuple[str, list[str], bool]]:
    """``(target, imported names, at module level)`` of every import of ``src`` inside the package."""
    tree = ast.parse(src)
    top = {id(n) for n in tree.body}
    sub = name.startswith("algos.") or name == "algos"
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        names = [a.name for a in node.names]
        # the package a relative import starts from: attsvm/gd for gd modules, attsvm/gd/algos for its modules
        base = ("algos" if sub else "") if node.level == 1 else ("" if sub and node.level == 2 else None)
        if base is None:  # outside attsvm/gd
            continue
        if node.module is None:
            targets = [(f"{base}.{n}" if base else n, []) for n in names]
        else:
            targets = [(f"{base}.{node.module}" if base else node.module, names)]
        for target, imported in targets:
            if target in mods or target == "algos":
                out.append((target, imported, id(node) in top))
    return out


def import_problems(sources: dict[str, str], layers: tuple[tuple[str, ...], ...], heavy: set[str]) -> list[str]:
    """Cycles, private names, imports against the layer order and function-level imports of light modules."""
    mods = set(sources)
    layer = {m: k for k, names in enumerate(layers) for m in names}
    problems = [f"module {m} has no layer" for m in sorted(mods - set(layer))]
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m in sorted(mods):
        for target, names, at_top in _edges(m, sources[m], mods):
            if any(n.startswith("_") for n in names):
                problems.append(f"{m} imports a private name from {target}: {names}")
            if not at_top and target not in heavy:
                problems.append(f"{m} imports {target} inside a function (only torch/numba modules are lazy)")
            graph[m].add(target)
            if m in layer and target in layer and layer[target] >= layer[m]:
                problems.append(f"{m} (layer {layer[m]}) imports {target} (layer {layer[target]})")
    return problems + import_cycles(graph)


def test_gd_import_graph_is_layered_and_acyclic():
    sources = _sources()
    assert import_problems(sources, LAYERS, HEAVY) == []
    assert {m for names in LAYERS for m in names} == set(sources)


def test_the_checker_catches_planted_problems():
    sources = _sources()
    planted = dict(sources)
    planted["spec"] += "\nfrom .engine import run\n"  # upwards, and a cycle engine -> spec -> engine
    planted["result"] += "\ndef f():\n    from .spec import settings_of\n"  # lazy import of a light module
    planted["algos.gd"] += "\nfrom ..steps import _np\n"  # a private name
    found = import_problems(planted, LAYERS, HEAVY)
    assert any("import cycle" in p and "engine" in p for p in found)
    assert any("spec (layer" in p and "imports engine" in p for p in found)
    assert any("inside a function" in p and "result" in p for p in found)
    assert any("private name" in p for p in found)


def test_validating_and_listing_runs_import_no_torch():
    code = (
        "import sys\n"
        "from attsvm import gd\n"
        "from attsvm.gd import spec, result, summary\n"
        "s = gd.settings_of('muon', 'KQ', momentum=0.5)\n"
        "assert [a.name for a in gd.ALGORITHMS.values()] and s.algorithm.step_bound((3, 3), s, 10) > 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numba')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout.strip()) == (0, "[]"), r.stderr


def _outside_targets(name: str, src: str) -> list[str]:
    """The absolute ``attsvm.*`` modules the imports of module ``name`` of attsvm/gd name."""
    pkg = "attsvm.gd.algos" if name.startswith("algos") else "attsvm.gd"
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts) + ("." + node.module if node.module else "")
            out += [base] if node.module or node.level == 0 else [f"{base}.{a.name}" for a in node.names]
    return out


def test_the_engine_imports_neither_the_claims_nor_highprec():
    """The claims and the 50-digit replay check the engine from outside: no module of attsvm/gd imports them (an
    algorithm names its replay step as a string, resolved by the registry's test)."""
    found = [
        f"{m}: {t}"
        for m, src in _sources().items()
        for t in _outside_targets(m, src)
        if t.startswith(("attsvm.claims", "attsvm.highprec"))
    ]
    assert found == []
    assert _outside_targets("algos.gd", "from ...highprec import gd\n") == ["attsvm.highprec"]  # the check sees it
    assert _outside_targets("spec", "from .. import highprec\n") == ["attsvm.highprec"]


def test_every_parameterisation_names_its_chain_rule_and_its_50_digit_gradient():
    import importlib

    from attsvm.gd.init import PARAMETERISATIONS

    def resolve(ref: str):
        module, _, name = ref.partition(":")
        return getattr(importlib.import_module(module), name)

    for p in PARAMETERISATIONS.values():
        assert callable(resolve(p.torch_gradient)) and callable(p.check.resolve()), p.name
    with __import__("pytest").raises(AttributeError):  # a parameterisation without its chain rule would fail here
        resolve("attsvm.gd.steps:gradients_planted")
