"""Discovery of claim files by path, as pytest discovers test files.

``discover(paths)``: each path is a ``.py`` file or a directory (searched recursively for ``*.py``, skipping
files starting with ``_``, ``__pycache__`` and the non-claim folders ``derivations/`` and ``tex/``); a
directory that has a ``claims/`` subfolder (the ``proofs/`` collection) means that subfolder. Each file is
imported by path and its module-level :class:`~attsvm.claims.api.Claim` objects are collected in file
order. No path: the built-in collection :func:`attsvm.paths.proofs_dir`.

Every claim a file creates is found, whatever it is bound to (:func:`~attsvm.claims.api.collecting`), so none can
vanish. Errors (:class:`~attsvm.errors.InputError`, exit 2): a missing path, a file that fails to import (named,
with the exception), a claim id defined twice (in one file or in two; both definitions named with their lines),
a claim whose function name a later definition rebinds (both named), no claims found.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import InputError
from .api import Claim, collecting

_SKIP_DIRS = {"__pycache__", "derivations", "tex", ".ipynb_checkpoints"}


def claim_files(path: str | os.PathLike) -> list[Path]:
    """The claim files under ``path`` (a file, or a directory searched recursively), sorted."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if p.is_file():
        if p.suffix != ".py":
            raise InputError(f"{p}: not a Python claim file")
        return [p]
    if (p / "claims").is_dir():
        p = p / "claims"
    out = []
    for root, dirs, files in os.walk(p):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        out += [Path(root) / f for f in sorted(files) if f.endswith(".py") and not f.startswith("_")]
    return out


def _where(c: Claim) -> str:
    return f"{c.module}:{c.line}" if c.line is not None else str(c.module)


def _binding(obj: Any, path: Path) -> str:
    """What now holds a name in a claim file, in words, with its line when it has one."""
    if isinstance(obj, Claim):
        return f"claim {obj.id!r} at {path}:{obj.line}"
    code = getattr(obj, "__code__", None)
    if code is not None:
        return f"function {getattr(obj, '__name__', '?')} at {path}:{code.co_firstlineno}"
    return f"a later assignment ({type(obj).__name__})"


def load_file(path: Path) -> list[Claim]:
    """Import ``path`` by path (:func:`attsvm.userfile.load_module`); return every claim it defines, in definition
    order: each one created while the file ran (:func:`~.api.collecting`), bound to a module-level name or not,
    and any other module-level claim. A claim whose function name was rebound by a later definition (two
    functions of one name: the first would be lost) is an :class:`~attsvm.errors.InputError` naming both."""
    from ..userfile import load_module

    path = Path(path).resolve()
    with collecting() as made:
        mod = load_module(path, "claim")
    names = vars(mod)
    recorded = names.get("__attsvm_claims__")
    if recorded is None:  # this load ran the file: keep what it created (a cached module has its list)
        bound_ids = {id(v) for v in names.values() if isinstance(v, Claim)}
        recorded = [c for c in made if id(c) in bound_ids or getattr(c.conclusion, "__module__", None) == mod.__name__]
        mod.__attsvm_claims__ = recorded
    seen: set[int] = set()
    claims = []
    for obj in [*recorded, *(v for v in names.values() if isinstance(v, Claim))]:
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        obj.module = str(path)
        claims.append(obj)
    bound_ids = {id(v) for v in names.values() if isinstance(v, Claim)}
    for c in claims:
        fname = getattr(c.conclusion, "__name__", None)
        if id(c) not in bound_ids and fname in names:
            raise InputError(
                f"{path}:{c.line}: claim {c.id!r} (function {fname}) is shadowed by {_binding(names[fname], path)}: "
                "the first would never run; give the functions different names"
            )
    return claims


def discover(paths: Iterable[str | os.PathLike] | str | os.PathLike | None = None) -> list[Claim]:
    """All claims under ``paths`` (default: the built-in ``proofs/`` collection); a claim id defined twice (in one
    file or two) is an :class:`~attsvm.errors.InputError` naming both definitions (file and line)."""
    if paths is None:
        from ..paths import proofs_dir

        paths = [proofs_dir()]
    elif isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths) or [__import__("attsvm.paths", fromlist=["proofs_dir"]).proofs_dir()]
    claims: list[Claim] = []
    first: dict[str, Claim] = {}
    loaded: set[Path] = set()
    for p in paths:
        files = claim_files(p)
        new = [f for f in files if f.resolve() not in loaded]  # a file under two of the paths is loaded once
        found = []
        for f in new:
            loaded.add(f.resolve())
            found += load_file(f)
        if not found and len(new) == len(files):
            raise InputError(f"{p}: no claims found")
        for c in found:
            if c.id in first:
                raise InputError(f"duplicate claim id {c.id!r}: defined at {_where(first[c.id])} and at {_where(c)}")
            first[c.id] = c
            claims.append(c)
    return claims


def select(claims: list[Claim], only: Iterable[str] | None, keyword: str | None = None) -> list[Claim]:
    """Claims whose id is in ``only`` (an unknown id is an InputError; None: all), then those selected by the
    keyword expression ``keyword`` (``-k``, :mod:`.keyword`; None: all; selecting none is an InputError)."""
    from .keyword import select_keyword

    if only:
        only = list(only)
        ids = {c.id for c in claims}
        for o in only:
            if o not in ids:
                raise InputError(f"unknown claim id {o!r} (--only)")
        claims = [c for c in claims if c.id in set(only)]
    return select_keyword(claims, keyword)


def dependency_order(claims: list[Claim]) -> list[Claim]:
    """Topological order by ``depends`` (ids outside the list are ignored); a cycle is an InputError."""
    by_id = {c.id: c for c in claims}
    order: list[Claim] = []
    state: dict[str, int] = {}

    def visit(c: Claim, stack: tuple[str, ...]) -> None:
        s = state.get(c.id, 0)
        if s == 2:
            return
        if s == 1:
            raise InputError(f"dependency cycle: {' -> '.join((*stack, c.id))}")
        state[c.id] = 1
        for dep in c.depends:
            if dep in by_id:
                visit(by_id[dep], (*stack, c.id))
        state[c.id] = 2
        order.append(c)

    for c in claims:
        visit(c, ())
    return order
