"""Experiment specs: discovered by path, loaded, their sizes; the built-in experiments (:data:`NAMES`).

A spec is a file ``numerics/<name>.py`` (the interface: :mod:`attsvm.experiments`). The built-in experiments are
the specs of the collection that ships with attsvm (:func:`attsvm.paths.builtin_dir`), discovered when this module
is imported, so that a new spec file is a new built-in experiment with nothing else to list.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import InputError
from ..paths import builtin_dir, numerics_dir
from ..registries import Check, declare
from ..userfile import load_module

_REQUIRED = ("TITLE", "SIZES", "run", "plot", "check")
_REQUIRED_BUILTIN = (*_REQUIRED, "caption")  # a spec named like a built-in one meets the built-ins' contract


def discover(folder: str | os.PathLike | None = None) -> dict[str, Path]:
    """Spec files of ``folder`` (default :func:`attsvm.paths.numerics_dir`), keyed by name (file stem), sorted by
    name."""
    root = Path(numerics_dir() if folder is None else folder)
    if not root.is_dir():
        raise InputError(f"{root}: no numerics folder (set ATTSVM_NUMERICS or run from the repository)")
    return {p.stem: p for p in sorted(root.glob("*.py")) if not p.name.startswith("_")}


_RECHECK = Check(
    "attsvm.experiments.spec:recheck",
    "the spec's check (the paper's qualitative claims) on a smoke run and on the committed gallery numbers "
    "docs/gallery/<name>.json, whose figure is re-drawn from them",
)
#: the built-in experiments: the specs of the built-in ``numerics/`` (:func:`discover` of
#: :func:`attsvm.paths.builtin_dir`, sorted by name, whatever ``$ATTSVM_NUMERICS`` or the current folder say), each
#: with its independent re-check (:mod:`attsvm.registries`): :func:`recheck` of a smoke run
#: (``test_numerics_smoke.py`` ``test_smoke``) and of the committed gallery numbers, the gallery figure re-drawn and
#: its caption checked (``test_gallery_figures_are_for_print``); ``property_tests/test_registries.py`` checks that
#: every one has its figure in ``docs/gallery/`` and no figure there lacks a spec
NAMES = declare("experiments.NAMES", dict.fromkeys(discover(builtin_dir("numerics")), _RECHECK))


def load_spec(name: str, folder: str | os.PathLike | None = None) -> ModuleType:
    """Import the spec ``name`` of ``folder`` by path (:func:`attsvm.userfile.load_module`: a module name of its
    own per file, so two folders with a spec of the same name are not confused) and check it defines the spec
    interface."""
    specs = discover(folder)
    if name not in specs:
        raise InputError(f"unknown experiment {name!r} (known: {', '.join(sorted(specs)) or 'none'})")
    path = specs[name]
    mod = load_module(path, "experiment spec")
    missing = [k for k in (_REQUIRED_BUILTIN if name in NAMES else _REQUIRED) if not hasattr(mod, k)]
    if missing:
        raise InputError(f"{path}: experiment spec lacks {', '.join(missing)}")
    return mod


def recheck(name: str, result: dict[str, Any], folder: str | os.PathLike | None = None) -> list[str]:
    """The failure messages of the spec ``name``'s ``check`` on a stored ``result`` (its ``NAME.json``, e.g. the
    committed gallery's): the paper's qualitative claims re-checked on those numbers (empty: all hold)."""
    return [str(m) for m in load_spec(name, folder).check(result)]


def sizes_of(mod: ModuleType, smoke: bool, seeds: int | None) -> dict[str, Any]:
    """The spec's full or smoke sizes, with ``seeds`` overridden when given."""
    size = dict(mod.SIZES["smoke" if smoke else "full"])
    if seeds is not None:
        if seeds < 1:
            raise InputError(f"--seeds must be a positive integer, got {seeds}")
        size["seeds"] = int(seeds)
    return size
