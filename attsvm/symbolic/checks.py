r"""Checks of derivation steps: each step's claim is re-verified by sympy, exactly.

* :class:`Equal` — ``lhs - rhs`` reduces to $0$ (``expand``, ``cancel`` or ``simplify``; matrices entrywise),
  optionally after a substitution (which is itself part of what is checked).
* :class:`Nonneg` — an expression is $\ge0$: either it equals a given certificate (e.g. a sum of squares
  times nonnegative symbols) that sympy proves nonnegative, or, after ``together``, numerator and
  denominator are polynomials with nonnegative coefficients in nonnegative symbols.
* :class:`All` — a family of checks over concrete cases (e.g. every $T\le4,d\le3$).
* :class:`Predicate` — any other exact test (a callable returning a bool).
* :class:`Symbolic` — an identity for *general* sizes: index notation (``IndexedBase``, ``Sum`` with symbolic
  bounds such as $\sum_{u=1}^T$, ``KroneckerDelta``) or matrix calculus on ``MatrixSymbol``\ s of symbolic shape;
  the check also makes sure the statement really involves the symbolic sizes it claims to cover.
* :class:`SymbolicNonneg` — an inequality for general sizes: the expression equals a certificate that is a sum
  (finite or a ``Sum`` with symbolic bounds) of products of factors sympy proves nonnegative.

Every check has a ``scope``: ``"symbolic"`` (proved for all sizes: :class:`Symbolic`, :class:`SymbolicNonneg`)
or ``"instances"`` (verified exactly on the concrete cases it lists). A step without a check is a *premise*
(definition, hypothesis or a cited standard fact), scope ``"premise"``; it is never reported as verified by sympy.
A step may carry instance checks as *second evidence* beside a symbolic proof.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy as sp

from .sums import decide_in_ranges


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: ``ok``, and a one-line ``detail`` (what failed, or what was verified)."""

    ok: bool
    detail: str = ""


SCOPES = ("symbolic", "instances", "premise")


class Check:
    """Base class: ``run()`` returns a :class:`CheckResult`; ``describe()`` is prose for reports (a string or a
    sequence of strings and sympy objects, rendered by the derivation's printer); ``scope`` is ``"symbolic"``
    (proved for general sizes) or ``"instances"`` (verified on concrete cases)."""

    scope: str = "instances"

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


def plain_text(what: Any) -> str:
    """Prose (a string, or a sequence of strings and sympy objects) as one plain string, for result details."""
    return what if isinstance(what, str) else "".join(p if isinstance(p, str) else sp.sstr(p) for p in what)


def _described(head: str, what: Any, brackets: bool = False) -> Any:
    """``head`` followed by the prose ``what``: a string when ``what`` is a string (or empty), else a tuple of
    strings and sympy objects for the printer; ``brackets`` separates ``what`` from ``head`` by a semicolon.
    The text says how a check is done, never that it passed: a page says whether it ran."""
    if not what:
        return head
    if isinstance(what, str):
        return f"{head}; {what}" if brackets else head + what
    return (head + "; ", *what) if brackets else (head, *what)


class Equal(Check):
    """``lhs == rhs`` exactly: ``method(lhs - rhs)`` is 0 entrywise (after ``subs`` when given)."""

    def __init__(self, lhs: Any, rhs: Any, method: str = "expand", subs: dict | None = None, what: Any = ""):
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

    _VERB = {"expand": "expanded", "cancel": "cancelled", "simplify": "simplified"}

    def describe(self) -> Any:
        s = f"sympy: the difference of the two sides {self._VERB[self.method]} and compared with zero"
        if self.subs:
            s += " after the substitution"
        return _described(s, self.what, brackets=True)


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

    def __init__(self, expr: Any, certificate: Any = None, method: str = "expand", what: Any = ""):
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

    def describe(self) -> Any:
        if self.cert is not None:
            s = "sympy: the difference compared exactly with a certificate, a sum of nonnegative terms"
        else:
            s = "sympy: the signs of the coefficients of numerator and denominator, in nonnegative symbols"
        return _described(s, self.what, brackets=True)


class All(Check):
    """Every check of a family of concrete ``cases``: a sequence of ``(label, check)``, built lazily."""

    def __init__(self, cases: Callable[[], Sequence[tuple[str, Check]]] | Sequence[tuple[str, Check]], what: Any):
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

    def describe(self) -> Any:
        return _described("sympy, exactly, ", self.what)


class Predicate(Check):
    """An exact test given as a callable returning ``bool`` (or a :class:`CheckResult`)."""

    def __init__(self, fn: Callable[[], bool | CheckResult], what: Any):
        self.fn, self.what = fn, what

    def run(self) -> CheckResult:
        r = self.fn()
        if isinstance(r, CheckResult):
            return r
        what = plain_text(self.what)
        return CheckResult(bool(r), what if r else "predicate false: " + what)

    def describe(self) -> Any:
        return _described("sympy: ", self.what)


# ---------------------------------------------------------------------- general sizes
def size_symbols(expr: Any) -> set[sp.Symbol]:
    r"""Every symbol ``expr`` mentions, including the shapes of its ``MatrixSymbol``\ s and the bounds of its
    ``Sum``\ s (``MatrixSymbol("X", T, d).free_symbols`` is ``{X}`` in sympy; the shape symbols are added here)."""
    out: set[sp.Symbol] = set()
    items = list(expr) if isinstance(expr, list | tuple) else [expr]
    for it in items:
        it = sp.sympify(it)
        for node in sp.preorder_traversal(it):
            if isinstance(node, sp.Symbol):
                out.add(node)
            if isinstance(node, sp.MatrixExpr):
                for dim in node.shape:
                    out |= {x for x in sp.sympify(dim).free_symbols if isinstance(x, sp.Symbol)}
    return out


_GENERAL: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "doit": lambda e: sp.simplify(e.doit()),
    "expand": lambda e: sp.expand(e.doit()),
    "cancel": lambda e: sp.cancel(sp.together(e.doit())),
    "simplify": lambda e: sp.simplify(e),
}


def _prose(what: Any) -> Any:
    return what if isinstance(what, str) else tuple(what)


def general_prose(head: str, sizes: Sequence[sp.Symbol], tail: str, what: Any) -> tuple:
    """Prose of a general check: ``head``, the size symbols (as math), ``tail`` and ``what`` after a semicolon."""
    out: list[Any] = [head]
    for k, s in enumerate(sizes):
        out += ([", "] if k else []) + [sp.Symbol(str(s))]
    out.append(tail)
    if what:
        w = _prose(what)
        out += ["; "] + ([w] if isinstance(w, str) else list(w))
    return tuple(p for p in out if p != "")


class Symbolic(Check):
    r"""``lhs == rhs`` for *all* sizes ``sizes`` (sympy symbols such as $T,d,n$): ``method(lhs - rhs)`` is 0, where
    ``method`` is a name of ``_GENERAL`` (``doit`` evaluates ``Sum``\ s, derivatives and ``KroneckerDelta``\ s,
    then ``simplify``) or a callable. ``ranges`` ($\tau\mapsto(1,T)$, ...) resolves the ``Piecewise`` case
    splits that summation over a symbolic range introduces (:func:`attsvm.symbolic.sums.decide_in_ranges`);
    ``subs`` is applied first.

    The check fails unless ``lhs`` or ``rhs`` mentions every symbol of ``sizes`` (in a ``Sum`` bound or a
    ``MatrixSymbol`` shape): a statement about fixed sizes cannot be reported as proved in general."""

    scope = "symbolic"

    def __init__(
        self,
        lhs: Any,
        rhs: Any,
        sizes: Sequence[sp.Symbol],
        method: str | Callable[[Any], Any] = "doit",
        ranges: dict[sp.Symbol, tuple[Any, Any]] | None = None,
        subs: dict | None = None,
        what: Any = "",
    ):
        if not sizes:
            raise ValueError("Symbolic needs the size symbols the identity is general in")
        if isinstance(method, str) and method not in _GENERAL:
            raise ValueError(f"unknown method {method!r}")
        self.lhs, self.rhs, self.sizes = lhs, rhs, tuple(sizes)
        self.method, self.ranges, self.subs, self.what = method, dict(ranges or {}), subs, what

    def _reduce(self, e: Any) -> Any:
        f = _GENERAL[self.method] if isinstance(self.method, str) else self.method
        red = f(e)
        if self.ranges:
            red = sp.simplify(decide_in_ranges(red, self.ranges))
        return red

    def run(self) -> CheckResult:
        mentioned = size_symbols([self.lhs, self.rhs])
        missing = [str(s) for s in self.sizes if s not in mentioned]
        if missing:
            return CheckResult(False, f"the statement does not involve the general size(s) {', '.join(missing)}")
        lhs, rhs = self.lhs, self.rhs
        if isinstance(lhs, sp.MatrixBase) or isinstance(rhs, sp.MatrixBase):
            pairs = list(zip(_entries(lhs), _entries(rhs)))
        else:
            pairs = [(lhs, rhs)]
        for k, (a, b) in enumerate(pairs):
            diff = sp.sympify(a) - sp.sympify(b)
            if self.subs:
                diff = diff.subs(self.subs)
            red = self._reduce(diff)
            if isinstance(red, sp.MatrixBase | sp.MatrixExpr):
                red = sp.Matrix(red) if isinstance(red, sp.MatrixBase) else red
                zero = red.is_ZeroMatrix or (isinstance(red, sp.MatrixBase) and red.is_zero_matrix)
            else:
                zero = red == 0
            if not zero:
                return CheckResult(
                    False, f"{f'entry {k}: ' if len(pairs) > 1 else ''}lhs - rhs reduces to {sp.sstr(red)[:200]}"
                )
        sizes = ", ".join(str(s) for s in self.sizes)
        return CheckResult(True, f"lhs - rhs reduces to 0 for general {sizes}")

    def describe(self) -> Any:
        return general_prose("sympy, for all ", self.sizes, "", self.what)


class SymbolicNonneg(Check):
    r"""``expr >= 0`` for all sizes ``sizes``: ``expr - certificate`` reduces to 0 (as :class:`Symbolic`) and the
    certificate is manifestly nonnegative: a sum (``Add`` or ``Sum`` with any bounds) of products whose factors
    sympy proves nonnegative from the assumptions of their symbols (e.g. ``IndexedBase("lam", nonnegative=True)``)
    or that are even powers."""

    scope = "symbolic"

    def __init__(
        self,
        expr: Any,
        certificate: Any,
        sizes: Sequence[sp.Symbol],
        method: str | Callable[[Any], Any] = "doit",
        ranges: dict[sp.Symbol, tuple[Any, Any]] | None = None,
        what: Any = "",
    ):
        self.expr, self.cert, self.what = expr, certificate, what
        self.eq = Symbolic(expr, certificate, sizes, method, ranges)
        self.sizes = self.eq.sizes

    @staticmethod
    def _manifest(e: Any) -> bool:
        e = sp.sympify(e)
        if e.is_nonnegative:
            return True
        if isinstance(e, sp.Sum):  # sympy's Karr convention: reversed bounds make a sum negative, so check them
            ordered = all((hi - lo + 1).is_nonnegative for _, lo, hi in e.limits)
            return ordered and SymbolicNonneg._manifest(e.function)
        if isinstance(e, sp.Add):
            return all(SymbolicNonneg._manifest(t) for t in e.args)
        if isinstance(e, sp.Mul):
            return all(SymbolicNonneg._manifest(f) for f in e.args)
        if isinstance(e, sp.Pow) and e.exp.is_integer and e.exp.is_even:
            return bool(e.base.is_real)
        return False

    def run(self) -> CheckResult:
        eq = self.eq.run()
        if not eq.ok:
            return CheckResult(False, "certificate differs: " + eq.detail)
        if not self._manifest(self.cert):
            return CheckResult(False, f"certificate not manifestly >= 0: {sp.sstr(self.cert)[:200]}")
        sizes = ", ".join(str(s) for s in self.sizes)
        return CheckResult(True, f"equals a manifestly nonnegative certificate for general {sizes}")

    def describe(self) -> Any:
        tail = ", the difference compared with a sum of manifestly nonnegative terms"
        return general_prose("sympy, for all ", self.sizes, tail, self.what)
