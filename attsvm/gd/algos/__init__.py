r"""The algorithms of the GD engine, one module per algorithm (``gd``, ``ngd``, ``md``, ``nsd``, ``adam``, ``nmd``,
``signum``, ``muon``), each declaring one :class:`~attsvm.gd.algorithm.Algorithm`: its options and rules, its
parameterisations, its state and torch step, its step bound, whether the fused kernel has it, and its independently
written 50-digit replay step.

The registry :data:`ALGORITHMS` is built by importing every module of this package (discovered, not listed); an
algorithm without a replay step is a ``TypeError`` at import, and ``property_tests/test_registries.py`` resolves and
runs every declared replay (:data:`ALGO_CHECKS`). Adding an algorithm is one module here plus its replay step in
:mod:`attsvm.highprec.gd`.
"""

from __future__ import annotations

import importlib
import pkgutil

from ...registries import declare
from ..algorithm import Algorithm

__all__ = ["ALGORITHMS", "ALGOS", "ALGO_CHECKS"]


def _discover() -> dict[str, Algorithm]:
    found: dict[str, Algorithm] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        algo = getattr(mod, "ALGORITHM", None)
        if not isinstance(algo, Algorithm) or algo.name != info.name:
            raise TypeError(f"module {mod.__name__} must declare ALGORITHM = Algorithm({info.name!r}, ...)")
        found[algo.name] = algo
    order = ("gd", "ngd", "md", "nsd", "adam", "nmd")  # the historical order first (listings, --help)
    return {**{k: found[k] for k in order if k in found}, **{k: v for k, v in found.items() if k not in order}}


#: every algorithm by name (discovered from this package's modules)
ALGORITHMS: dict[str, Algorithm] = _discover()
#: each algorithm, the parameterisations it runs on, and the independent check of each combination
#: (:mod:`attsvm.registries`): its 50-digit replay step
ALGO_CHECKS = {name: dict(a.check) for name, a in ALGORITHMS.items()}
ALGOS = declare("gd.ALGOS", ALGO_CHECKS)
