"""Discovery of claim files by path, as pytest discovers test files.

``discover(paths)``: each path is a ``.py`` file or a directory (searched recursively for ``*.py``, skipping
files starting with ``_``, ``__pycache__`` and the non-claim folders ``derivations/`` and ``tex/``); a
directory that has a ``claims/`` subfolder (the ``proofs/`` collection) means that subfolder. Each file is
imported by path and its module-level :class:`~attsvm.claims.api.Claim` objects are collected in file
order. No path: the built-in collection :func:`attsvm.paths.proofs_dir`.

Errors (:class:`~attsvm.errors.InputError`, exit 2): a missing path, a file that fails to import (named,
with the exception), duplicate claim ids, no claims found.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError
from .api import Claim

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


def load_file(path: Path) -> list[Claim]:
    """Import ``path`` by path (:func:`attsvm.userfile.load_module`); return its module-level claims in
    definition order."""
    from ..userfile import load_module

    path = Path(path).resolve()
    mod = load_module(path, "claim")
    seen: set[int] = set()
    claims = []
    for obj in vars(mod).values():
        if isinstance(obj, Claim) and id(obj) not in seen:
            seen.add(id(obj))
            obj.module = str(path)
            claims.append(obj)
    return claims


def discover(paths: Iterable[str | os.PathLike] | str | os.PathLike | None = None) -> list[Claim]:
    """All claims under ``paths`` (default: the built-in ``proofs/`` collection)."""
    if paths is None:
        from ..paths import proofs_dir

        paths = [proofs_dir()]
    elif isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths) or [__import__("attsvm.paths", fromlist=["proofs_dir"]).proofs_dir()]
    claims: list[Claim] = []
    where: dict[str, str] = {}
    for p in paths:
        files = claim_files(p)
        found = []
        for f in files:
            found += load_file(f)
        if not found:
            raise InputError(f"{p}: no claims found")
        for c in found:
            if c.id in where and where[c.id] != c.module:
                raise InputError(f"duplicate claim id {c.id!r} in {where[c.id]} and {c.module}")
            if c.id not in where:
                where[c.id] = c.module
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
