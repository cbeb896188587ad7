r"""Every registry of names declares, entry by entry, how that entry is checked independently.

A *registry* is a tuple of names the code dispatches on — the parameterisations and algorithms of
:func:`attsvm.gd.run`, the nsd norms, step schedules, losses and normalisations, the convex programs of
:func:`attsvm.svm.solve`, the built-in experiments. Each is written as a declaration at the place where its names
are defined, and the tuple is *derived* from it::

    PARAM_CHECKS = {"W": Check("attsvm.highprec.model:grad_W", "the 50-digit gradient"), ...}
    PARAMS = declare("gd.PARAMS", PARAM_CHECKS)

so a name cannot be added without a :class:`Check` (:func:`declare` refuses anything else at import), and
``property_tests/test_registries.py`` walks :data:`REGISTRIES` and runs every declared check on a tiny case: the
50-digit replay against the float64 engine, each program's certificate on a small data set, each experiment's spec
and committed gallery figure. A check that does not exist is declared as such, ``Check(None, why)``: the reason
says why there is none and what follows for a claim that relies on the entry (it cannot be confirmed at high
precision: *undecidable*, never a refutation or a pass).

A declaration may be nested one level (``{algo: {param: Check}}``, ``{program: {norm: Check}}``): the outer names
are the registry, the inner ones the combinations it runs, each with its own check.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["REGISTRIES", "Check", "checks_of", "declare"]


@dataclass(frozen=True)
class Check:
    r"""The independent check of one registry entry: ``by`` the object that checks it, as ``"module:attribute"``
    (importable; resolved by :meth:`resolve`), or ``None`` when there is none; ``what`` one line saying what it
    checks — or, with ``by=None``, why there is no check and what that means for a claim."""

    by: str | None
    what: str

    def __post_init__(self) -> None:
        if not isinstance(self.what, str) or not self.what.strip():
            raise TypeError(f"Check({self.by!r}, ...) needs a sentence saying what it checks (or why there is none)")
        if self.by is not None and (not isinstance(self.by, str) or self.by.count(":") != 1):
            raise TypeError(f"Check.by must be 'module:attribute' or None, got {self.by!r}")

    @property
    def exists(self) -> bool:
        """Whether there is an independent check (``by`` is not ``None``)."""
        return self.by is not None

    def resolve(self) -> Callable[..., Any]:
        """The checking object ``by`` names (imports its module); ValueError for ``Check(None, ...)``."""
        if self.by is None:
            raise ValueError(f"no independent check: {self.what}")
        module, _, attr = self.by.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


#: every declared registry by name (filled as the modules that define them are imported)
REGISTRIES: dict[str, Mapping[str, Any]] = {}


def declare(registry: str, checks: Mapping[str, Any]) -> tuple[str, ...]:
    """Record the declaration ``checks`` of ``registry`` (each value a :class:`Check`, or a non-empty mapping of
    names to :class:`Check`) and return its names in declaration order — the registry tuple itself. Anything else
    is a TypeError at import, naming the entry."""
    if not checks:
        raise TypeError(f"registry {registry!r} declares no entries")
    frozen: dict[str, Any] = {}
    for name, c in checks.items():
        if isinstance(c, Mapping):
            if not c:
                raise TypeError(f"{registry}: entry {name!r} declares no combination and no check")
            for sub, cc in c.items():
                if not isinstance(cc, Check):
                    raise TypeError(f"{registry}: {name!r} with {sub!r} declares no independent check (got {cc!r})")
            frozen[name] = MappingProxyType(dict(c))
        elif isinstance(c, Check):
            frozen[name] = c
        else:
            raise TypeError(f"{registry}: entry {name!r} declares no independent check (got {c!r})")
    REGISTRIES[registry] = MappingProxyType(frozen)
    return tuple(frozen)


def checks_of(registry: str) -> list[tuple[tuple[str, ...], Check]]:
    """Every ``(key, Check)`` of a declared registry, ``key`` the entry's name (and its combination, nested)."""
    out: list[tuple[tuple[str, ...], Check]] = []
    for name, c in REGISTRIES[registry].items():
        if isinstance(c, Check):
            out.append(((name,), c))
        else:
            out.extend(((name, sub), cc) for sub, cc in c.items())
    return out
