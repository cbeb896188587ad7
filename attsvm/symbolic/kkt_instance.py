r"""Instance-level KKT of Att-SVM in exact rationals (``attsvm derive kkt --data DATA.npz``).

For one data set and selection $\alpha$, the exact data are the binary floats themselves
(``Fraction(float)`` is exact). With an active set $S$ (from the solver), the KKT system reduces to

.. math:: G_{SS}\lambda_S=\mathbf 1,\qquad G_{(it),(j\tau)}=D_{it}^\top D_{j\tau}\,z_i^\top z_j,\quad
          D_{it}=x_{i\alpha_i}-x_{it},

solved in $\mathbb Q$ (python-flint); then $W=\sum_{S}\lambda_{it}D_{it}z_i^\top$, and the certificate holds iff
$\lambda_S\ge0$ and every other margin $\langle W,A_{it}\rangle\ge1$, exactly (then $\|W\|_F^2=\mathbf 1^\top\lambda$).

The active set comes from ``attsvm.svm.certify_fro`` when that exists (its multipliers are then re-derived
here independently and must agree), otherwise from the float solver (``attsvm.svm.solve_fro``).

With no constraints ($T=1$) the exact answer is $W=0$ (every check holds vacuously). The exact arithmetic is
pure Python ``Fraction`` work, about $m(d^2+2d)$ rational terms for $m$ constraints in dimension $d$; instances
above ``MAX_EXACT_TERMS`` (or whose estimated memory exceeds the limit of :mod:`attsvm.svm.budget`) are refused
with an :class:`~attsvm.errors.InputError` naming the size (``attsvm solve --certify`` certifies large instances).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from ..data import Dataset
from ..errors import InputError
from ..svm.budget import constraint_count, require
from .checks import Equal, Predicate
from .derivation import Derivation
from .notation import matrix_symbol, symbol
from .printer import Chain, Inner, Norm, SumOver

#: largest m * (d^2 + 2d) (exact rational terms: data, margins) derive kkt takes on (about 30 s of Fraction work)
MAX_EXACT_TERMS = 1_000_000
#: bytes per exact rational term held at once (a Fraction, its two ints and list slots), for the memory estimate
BYTES_PER_TERM = 400


def check_size(ds: Dataset) -> None:
    """Refuse (:class:`InputError`) an instance too large for the exact derivation (module docstring)."""
    m, _ = constraint_count(ds)
    d = ds.d
    terms = m * (d * d + 2 * d)
    if terms > MAX_EXACT_TERMS:
        raise InputError(
            f"derive kkt: {m} constraints in dimension d={d} need about {terms:.2g} exact rational terms, more "
            f"than the limit of {MAX_EXACT_TERMS:.2g} (m*(d^2+2d)); use 'attsvm solve --certify' for large instances"
        )
    require(BYTES_PER_TERM * m * (2 * d + 1), f"derive kkt on {m} constraints")


def _q(x: float) -> Fraction:
    return Fraction(float(x))


def display_rational(q: Any, width: int = 40) -> str:
    """A rational (``"p/q"`` string or number) for a one-line display: itself when at most ``width`` characters,
    else its value to 17 significant digits with the length of the exact form (never overflowing: the decimal
    exponent is taken from the integers, so 1e-400 or 1e+600 print as such)."""
    if q is None:
        return "none"
    text = str(q)
    if len(text) <= width:
        return text
    f = Fraction(text)
    if f == 0:
        return f"0 (exact: {len(text)} characters)"
    num, den = abs(f.numerator), f.denominator
    e = len(str(num)) - len(str(den))  # 10**(e-1) < |f| < 10**(e+1)
    mant = float(f / Fraction(10) ** e)
    if abs(mant) < 1:
        mant, e = mant * 10, e - 1
    sign = "-" if f < 0 else ""
    return f"{sign}{abs(mant):.16f}e{e:+03d} (exact: {len(text)} characters)"


def _fmt(q: Any) -> str:
    q = Fraction(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


@dataclass
class ExactKKT:
    """Exact data and solution: constraint labels ``(i,t)`` (0-based), differences ``D`` and queries ``Z`` as
    Fractions, active positions ``S`` (indices into the labels), ``lam`` (per label), ``W`` (d x d), margins."""

    labels: list[tuple[int, int]]
    D: list[list[Fraction]]
    Z: list[list[Fraction]]
    S: list[int]
    lam: list[Fraction]
    W: list[list[Fraction]]
    margins: list[Fraction]
    solvable: bool

    @property
    def d(self) -> int:
        return len(self.W)

    def gram(self, a: int, b: int) -> Fraction:
        return sum((x * y for x, y in zip(self.D[a], self.D[b])), Fraction(0)) * sum(
            (x * y for x, y in zip(self.Z[a], self.Z[b])), Fraction(0)
        )

    def checks(self) -> dict[str, bool]:
        act = set(self.S)
        return {
            "solvable": self.solvable,
            "multipliers_nonnegative": self.solvable and all(self.lam[j] >= 0 for j in self.S),
            "active_margins_one": self.solvable and all(self.margins[j] == 1 for j in self.S),
            "other_margins_at_least_one": self.solvable
            and all(self.margins[j] >= 1 for j in range(len(self.labels)) if j not in act),
            "norm_equals_multiplier_sum": self.solvable
            and sum((w * w for row in self.W for w in row), Fraction(0)) == sum(self.lam, Fraction(0)),
        }

    @property
    def verified(self) -> bool:
        return all(self.checks().values())

    def min_other_margin(self) -> Fraction | None:
        act = set(self.S)
        rest = [self.margins[j] for j in range(len(self.labels)) if j not in act]
        return min(rest) if rest and self.solvable else None


def exact_data(ds: Dataset, alpha: Any = None) -> tuple[list[tuple[int, int]], list, list, np.ndarray]:
    """Constraint labels, exact differences and queries of Att-SVM(alpha) (single data set, flat view)."""
    from ..svm.constraints import build

    if ds.batched:
        raise InputError("derive kkt needs a single data set, got a batch")
    cons = build(ds, None if alpha is None else np.asarray(alpha))
    f = ds.flat()
    a = np.asarray(cons.alpha)
    labels = [(int(i), int(t)) for i, t in zip(cons.row, cons.tok)]
    D = [[_q(f.X[i, a[i], k]) - _q(f.X[i, t, k]) for k in range(f.X.shape[-1])] for i, t in labels]
    Z = [[_q(f.Z[i, k]) for k in range(f.Z.shape[-1])] for i, _ in labels]
    return labels, D, Z, a


def solve_exact(labels, D, Z, active: list[tuple[int, int]], d: int | None = None) -> ExactKKT:
    """Solve $G_{SS}\\lambda_S=\\mathbf 1$ exactly on the ``active`` labels and evaluate every margin exactly
    (``d``: the dimension, needed when there are no constraints)."""
    import flint

    pos = {lab: j for j, lab in enumerate(labels)}
    missing = [lab for lab in active if tuple(lab) not in pos]
    if missing:
        raise InputError(f"active constraint {missing[0]} is not a constraint of this selection")
    S = sorted(pos[tuple(lab)] for lab in active)
    d = (len(D[0]) if D else 0) if d is None else d
    m = len(labels)
    lam = [Fraction(0)] * m
    dot = lambda u, v: sum((x * y for x, y in zip(u, v)), Fraction(0))  # noqa: E731
    solvable = True
    if S:
        G = flint.fmpq_mat(
            len(S), len(S), [flint.fmpq(*(dot(D[a], D[b]) * dot(Z[a], Z[b])).as_integer_ratio()) for a in S for b in S]
        )
        try:
            sol = G.solve(flint.fmpq_mat(len(S), 1, [1] * len(S)))
            for k, j in enumerate(S):
                lam[j] = Fraction(int(sol[k, 0].p), int(sol[k, 0].q))
        except ZeroDivisionError:
            solvable = False
    W = [[sum((lam[j] * D[j][r] * Z[j][c] for j in S), Fraction(0)) for c in range(d)] for r in range(d)]
    margins = [sum((D[j][r] * W[r][c] * Z[j][c] for r in range(d) for c in range(d)), Fraction(0)) for j in range(m)]
    return ExactKKT(labels, D, Z, S, lam, W, margins, solvable)


def _float_active_set(ds: Dataset, alpha: Any) -> list[tuple[int, int]]:
    """Active set from the float solve (:func:`attsvm.svm.solve_fro`: the constraints with positive multipliers).
    Infeasible programs raise :class:`~attsvm.errors.InfeasibleError` with the solver's verified Farkas vector."""
    from ..errors import InfeasibleError
    from ..svm import solve_fro

    sol = solve_fro(ds, None if alpha is None else np.asarray(alpha))
    if sol.status != "optimal":
        raise InfeasibleError("Att-SVM is infeasible for this selection", certificate=sol.farkas)
    if sol.multipliers is None:  # not representable in float64 (rescaled data): the support tokens instead
        return [(int(i), int(t)) for i, t in sol.support]
    return [(int(i), int(t)) for i, t in np.argwhere(np.asarray(sol.multipliers) > 0)]


def certify(ds: Dataset, alpha: Any = None) -> dict[str, Any]:
    """The exact certificate dict of :func:`certify_exact`."""
    return certify_exact(ds, alpha)[0]


def certify_exact(ds: Dataset, alpha: Any = None) -> tuple[dict[str, Any], ExactKKT]:
    """The exact certificate dict and the :class:`ExactKKT` behind it.

    Keys: ``kind``, ``verified`` (this module's exact checks, and agreement with ``certify_fro`` when that
    reports multipliers), ``active`` (every constraint with exact margin 1), ``support`` (the set $S$ solved
    for), ``multipliers`` [[i,t,"p/q"]] on $S$, ``W`` [["p/q"]], ``min_other_margin``, ``checks``, ``repairs``,
    ``seconds``, ``source``, and with ``certify_fro``: ``agrees``, ``external_verified``.
    Raises :class:`~attsvm.errors.InfeasibleError` when the program is infeasible."""
    from ..errors import InfeasibleError

    t0 = time.perf_counter()
    if ds.batched:
        raise InputError("derive kkt needs a single data set, got a batch")
    check_size(ds)
    labels, D, Z, a = exact_data(ds, alpha)
    alpha_arg = None if alpha is None else np.asarray(alpha)
    external = None
    try:
        from ..svm import certify_fro  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - present in the package; kept for partial installs
        certify_fro = None
    support = None
    source = "float dual solver + exact re-solve"
    if certify_fro is not None:
        external = certify_fro(ds, alpha=alpha_arg)
        if not external.get("verified") and external.get("reason") == "infeasible":
            raise InfeasibleError("Att-SVM is infeasible for this selection")
        if external.get("multipliers"):
            support = [(int(i), int(t)) for i, t, _ in external["multipliers"]]
            source = "attsvm.svm.certify_fro (support) + exact re-solve"
    if support is None:
        support = _float_active_set(ds, alpha_arg)
    ex = solve_exact(labels, D, Z, support, d=ds.d)
    out = to_dict(ex, alpha=a, seconds=time.perf_counter() - t0)
    out["source"] = source
    if external is not None:
        out["external_verified"] = bool(external.get("verified", False))
        out["repairs"] = external.get("repairs", 0)
        if external.get("multipliers"):
            out["agrees"] = agrees(external, ex)
            out["verified"] = bool(out["verified"] and out["agrees"])
    return out, ex


def to_dict(ex: ExactKKT, alpha: Any = None, seconds: float = 0.0) -> dict[str, Any]:
    """JSON-ready certificate of an :class:`ExactKKT`."""
    mo = ex.min_other_margin()
    return {
        "kind": "exact-rational",
        "verified": ex.verified,
        "checks": ex.checks(),
        "alpha": None if alpha is None else [int(x) for x in np.asarray(alpha).reshape(-1)],
        "active": [[i, t] for j, (i, t) in enumerate(ex.labels) if ex.solvable and ex.margins[j] == 1],
        "support": [[ex.labels[j][0], ex.labels[j][1]] for j in ex.S],
        "multipliers": [[ex.labels[j][0], ex.labels[j][1], _fmt(ex.lam[j])] for j in ex.S],
        "W": [[_fmt(w) for w in row] for row in ex.W],
        "min_other_margin": None if mo is None else _fmt(mo),
        "repairs": 0,
        "seconds": round(seconds, 4),
    }


def agrees(cert: dict[str, Any], ex: ExactKKT) -> bool:
    """Do the multipliers and W of ``cert`` equal the exact re-solve (as rationals)?"""
    mine = {(ex.labels[j][0], ex.labels[j][1]): ex.lam[j] for j in ex.S}
    theirs = {(int(i), int(t)): Fraction(str(q)) for i, t, q in cert.get("multipliers", [])}
    theirs = {k: v for k, v in theirs.items() if v != 0}
    mine = {k: v for k, v in mine.items() if v != 0}
    if mine != theirs:
        return False
    if "W" in cert:
        Wt = [[Fraction(str(q)) for q in row] for row in cert["W"]]
        return Wt == ex.W
    return True


# ---------------------------------------------------------------------- the derivation of one instance
DISPLAY_DIGITS = 4000  # exact matrices longer than this (in digits) are named, not printed, in the LaTeX


def _sym(q: Fraction) -> sp.Rational:
    return sp.Rational(q.numerator, q.denominator)


def _display(M: sp.Matrix, name: Any) -> Any:
    """``M`` itself, or ``name`` when printing it would take more than :data:`DISPLAY_DIGITS` digits."""
    return M if sum(len(str(x)) for x in M) <= DISPLAY_DIGITS else name


def derivation_of(
    ex: ExactKKT, alpha: Any = None, title: str = "Exact KKT certificate of an Att-SVM instance"
) -> Derivation:
    """A :class:`Derivation` (name ``kkt``) displaying and re-checking the exact system, multipliers, W, margins."""
    d = Derivation("kkt", title, claim="svm-kkt")
    S = ex.S
    G = sp.Matrix(len(S), len(S), lambda a, b: _sym(ex.gram(S[a], S[b])))
    lamS = sp.Matrix([_sym(ex.lam[j]) for j in S])
    lam_names = sp.Matrix([symbol("lam", *ex.labels[j]) for j in S])
    W = sp.Matrix(ex.W).applyfunc(_sym) if ex.W else sp.zeros(0, 0)
    Wsym = matrix_symbol("W", "d", "d")
    i, t = sp.Symbol("i"), sp.Symbol("t")
    sel = "as stored" if alpha is None else str([int(x) for x in np.asarray(alpha).reshape(-1)])
    d.summary = (
        f"Selection alpha = {sel}; indices are 0-based as in the data arrays; {len(ex.labels)} constraints, "
        f"{len(S)} active. The data are the binary floats, exactly.",
    )
    d.premise(
        "reduced KKT system",
        Chain(matrix_symbol("G", "k", "k") * matrix_symbol("lam", "k", 1), "=", sp.ones(len(S), 1) if S else 0),
        "stationarity and complementary slackness on the active set S (derivation attsvm-kkt).",
    )
    d.step(
        "the system in exact rationals",
        Chain(sp.MatMul(G, lam_names, evaluate=False), "=", sp.ones(len(S), 1))
        if S and _display(G, None) is not None
        else Chain(matrix_symbol("G", "k", "k") * matrix_symbol("lam", "k", 1), "=", sp.ones(len(S), 1) if S else 0),
        "Gram entries (D^T D')(z^T z') from the exact data"
        + ("." if _display(G, None) is not None else " (too long to print; checked exactly)."),
        Equal(G * lamS, sp.ones(len(S), 1)) if S else Equal(0, 0),
    )
    d.step(
        "multipliers",
        Chain(lam_names, "=", _display(lamS, matrix_symbol("lam", "k", 1))) if S else Chain(0, "=", 0),
        "the exact solution; every multiplier must be nonnegative.",
        Predicate(lambda: ex.solvable and all(ex.lam[j] >= 0 for j in S), "every active multiplier is >= 0"),
    )
    Wcomb = sp.zeros(ex.d, ex.d)
    for j in S:
        Dj = sp.Matrix([_sym(x) for x in ex.D[j]])
        zj = sp.Matrix([_sym(x) for x in ex.Z[j]])
        Wcomb += _sym(ex.lam[j]) * Dj * zj.T
    d.step(
        "the max-margin matrix",
        Chain(
            Wsym,
            "=",
            SumOver(symbol("lam", "i", "t") * matrix_symbol("A", "d", "d", "i", "t"), (i, t)),
            *(("=", W) if _display(W, None) is not None else ()),
        ),
        "stationarity.",
        Equal(W, Wcomb),
    )
    act = set(S)
    others = [j for j in range(len(ex.labels)) if j not in act]
    mins = ex.min_other_margin()
    d.step(
        "primal feasibility",
        Chain(
            Inner(Wsym, matrix_symbol("A", "d", "d", "i", "t")),
            ">=",
            _sym(mins) if mins is not None and len(str(mins)) <= DISPLAY_DIGITS else symbol("m"),
            ">=",
            1,
        )
        if others
        else Chain(Inner(Wsym, matrix_symbol("A", "d", "d", "i", "t")), "=", 1),
        f"the smallest margin among the {len(others)} inactive constraints, evaluated exactly; active margins are 1.",
        Predicate(
            lambda: ex.solvable and all(ex.margins[j] >= 1 for j in others) and all(ex.margins[j] == 1 for j in S),
            "every margin is >= 1, active ones exactly 1",
        ),
    )
    total = sum((ex.lam[j] for j in S), Fraction(0))
    d.step(
        "norm identity",
        Chain(
            Norm(Wsym, "F") ** 2,
            "=",
            SumOver(symbol("lam", "i", "t"), (i, t)),
            *(("=", _sym(total)) if len(str(total)) <= DISPLAY_DIGITS else ()),
        ),
        "the optimal value; margin 1/||W||_F.",
        Equal(sum((w**2 for w in W), sp.Integer(0)), _sym(total)),
    )
    return d
