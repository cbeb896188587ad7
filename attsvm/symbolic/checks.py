r"""Checks of derivation steps: each step's claim is re-verified by sympy, exactly.

* :class:`Equal` — ``lhs - rhs`` reduces to $0$ (``expand``, ``cancel`` or ``simplify``; matrices entrywise),
  optionally after a substitution (which is itself part of what is checked).
* :class:`Nonneg` — an expression is $\ge0$: either it equals a given certificate (e.g. a sum of squares
  times nonnegative symbols) that sympy proves nonnegative, or, after ``together``, numerator and
  denominator are polynomials with nonnegative coefficients in nonnegative symbols.
* :class:`All` — a family of checks over concrete cases (e.g. every $T\le4,d\le3$).
* :class:`Predicate` — any other exact test (a callable returning a bool).

A step without a check is a *premise* (definition, hypothesis or a cited standard fact) and is
rendered as such; it is never reported as verified by sympy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy as sp


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: ``ok``, and a one-line ``detail`` (what failed, or what was verified)."""

    ok: bool
    detail: str = ""


class Check:
    """Base class: ``run()`` returns a :class:`CheckResult`; ``describe()`` is prose for reports."""

    def run(self) -> CheckResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


_METHODS: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "expand": lambda e: sp.expand(e),
    "cancel": lambda e: sp.cancel(sp.together(e)),
    "simplify": lambda e: sp.simplify(e),
}


def _entries(x: Any) -> list:
    if isinstance(x, sp.MatrixBase):
        return list(x)
    return [sp.sympify(x)]


class Equal(Check):
    """``lhs == rhs`` exactly: ``method(lhs - rhs)`` is 0 entrywise (after ``subs`` when given)."""

    def __init__(self, lhs: Any, rhs: Any, method: str = "expand", subs: dict | None = None, what: str = ""):
        if method not in _METHODS:
            raise ValueError(f"unknown method {method!r}")
        self.lhs, self.rhs, self.method, self.subs, self.what = lhs, rhs, method, subs, what

    def run(self) -> CheckResult:
        L, R = _entries(self.lhs), _entries(self.rhs)
        if len(L) != len(R):
            return CheckResult(False, f"shape mismatch {len(L)} vs {len(R)} entries")
        f = _METHODS[self.method]
        for k, (a, b) in enumerate(zip(L, R)):
            diff = sp.sympify(a) - sp.sympify(b)
            if self.subs:
                diff = diff.subs(self.subs)
            red = f(diff)
            if red != 0:
                return CheckResult(False, f"entry {k}: {self.method}(lhs - rhs) = {sp.sstr(red)[:200]}")
        return CheckResult(True, f"{self.method}(lhs - rhs) = 0 on {len(L)} entries")

    def describe(self) -> str:
        s = f"sympy: {self.method}(lhs - rhs) = 0"
        if self.subs:
            s += " after the substitution"
        return s + (f" ({self.what})" if self.what else "")


def _manifest_nonneg(e: sp.Expr) -> bool:
    e = sp.expand(e)
    if e.is_nonnegative:
        return True
    if not all(s.is_nonnegative for s in e.free_symbols):
        return False
    poly = sp.Poly(e, *sorted(e.free_symbols, key=sp.default_sort_key)) if e.free_symbols else None
    if poly is None:
        return bool(e >= 0)
    return all(c >= 0 for c in poly.coeffs())


class Nonneg(Check):
    r"""``expr >= 0``: with a ``certificate`` $C$, sympy checks ``expr - C == 0`` (``method``) and that $C$ is
    nonnegative (each term a product of nonnegative symbols and even powers); without one, numerator and
    denominator of ``together(expr)`` must be polynomials with nonnegative coefficients in nonnegative
    symbols."""

    def __init__(self, expr: Any, certificate: Any = None, method: str = "expand", what: str = ""):
        self.expr, self.cert, self.method, self.what = sp.sympify(expr), certificate, method, what

    def run(self) -> CheckResult:
        if self.cert is not None:
            eq = Equal(self.expr, self.cert, self.method).run()
            if not eq.ok:
                return CheckResult(False, "certificate differs: " + eq.detail)
            terms = sp.Add.make_args(sp.sympify(self.cert))
            bad = [t for t in terms if not (t.is_nonnegative or _manifest_nonneg(t))]
            if bad:
                return CheckResult(False, f"certificate term not manifestly >= 0: {sp.sstr(bad[0])[:200]}")
            return CheckResult(True, "equals a manifestly nonnegative certificate")
        num, den = sp.fraction(sp.together(self.expr))
        if not _manifest_nonneg(num):
            return CheckResult(False, f"numerator not manifestly >= 0: {sp.sstr(sp.expand(num))[:200]}")
        if not _manifest_nonneg(den) or den == 0:
            return CheckResult(False, f"denominator not manifestly > 0: {sp.sstr(den)[:200]}")
        return CheckResult(True, "numerator and denominator have nonnegative coefficients in nonnegative symbols")

    def describe(self) -> str:
        if self.cert is not None:
            s = "sympy: the difference equals a sum of nonnegative terms (certificate checked exactly)"
        else:
            s = "sympy: numerator and denominator are polynomials with nonnegative coefficients in nonnegative symbols"
        return s + (f" ({self.what})" if self.what else "")


class All(Check):
    """Every check of a family of concrete ``cases``: a sequence of ``(label, check)``, built lazily."""

    def __init__(self, cases: Callable[[], Sequence[tuple[str, Check]]] | Sequence[tuple[str, Check]], what: str):
        self._cases, self.what = cases, what

    def cases(self) -> Sequence[tuple[str, Check]]:
        return self._cases() if callable(self._cases) else self._cases

    def run(self) -> CheckResult:
        n = 0
        for label, chk in self.cases():
            r = chk.run()
            if not r.ok:
                return CheckResult(False, f"{label}: {r.detail}")
            n += 1
        return CheckResult(True, f"{n} cases verified")

    def describe(self) -> str:
        return f"sympy, exactly, {self.what}"


class Predicate(Check):
    """An exact test given as a callable returning ``bool`` (or a :class:`CheckResult`)."""

    def __init__(self, fn: Callable[[], bool | CheckResult], what: str):
        self.fn, self.what = fn, what

    def run(self) -> CheckResult:
        r = self.fn()
        if isinstance(r, CheckResult):
            return r
        return CheckResult(bool(r), self.what if r else "predicate false: " + self.what)

    def describe(self) -> str:
        return "sympy: " + self.what
