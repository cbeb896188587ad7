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

import hashlib
import json
import os
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from ..data import Dataset
from ..errors import InputError
from ..svm.budget import constraint_count, require
from . import glossary
from .checks import Equal, Predicate
from .derivation import Derivation
from .enclosure import SIGNIFICANT, Enclosure, enclose, is_short
from .notation import matrix_symbol, symbol
from .printer import AsScalar, Chain, Inner, Norm, RealSpace, SumOver

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


# ---------------------------------------------------------------------- exact values beside the document
def exact_path(document: str | os.PathLike) -> Path:
    """Where the exact values of a document go: ``out.tex`` (or ``out.md``) -> ``out.exact.json``, beside it."""
    return Path(document).with_suffix(".exact.json")


def program_digest(ex: ExactKKT) -> str:
    """SHA-256 of the exact program: the constraint labels, differences and queries as ``"p/q"`` strings."""
    blob = json.dumps(
        {
            "labels": ex.labels,
            "D": [[_fmt(x) for x in row] for row in ex.D],
            "Z": [[_fmt(x) for x in row] for row in ex.Z],
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (the data file an instance came from)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def exact_values(ex: ExactKKT, alpha: Any = None, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every exact value of an instance as ``"p/q"`` strings: the multipliers of the active set, the entries of
    ``W``, every margin, the minimum inactive margin and the multiplier sum (0-based labels as in the data), with
    ``data`` (e.g. the data file's path and SHA-256) and the SHA-256 of the exact program."""
    mo = ex.min_other_margin()
    return {
        "kind": "attsvm-kkt-exact-values",
        "data": data or {},
        "program_sha256": program_digest(ex),
        "alpha": None if alpha is None else [int(x) for x in np.asarray(alpha).reshape(-1)],
        "indices": "0-based, as in the data arrays",
        "multipliers": [[ex.labels[j][0], ex.labels[j][1], _fmt(ex.lam[j])] for j in ex.S],
        "W": [[_fmt(w) for w in row] for row in ex.W],
        "margins": [[i, t, _fmt(ex.margins[j])] for j, (i, t) in enumerate(ex.labels)] if ex.solvable else [],
        "min_other_margin": None if mo is None else _fmt(mo),
        "multiplier_sum": _fmt(sum((ex.lam[j] for j in ex.S), Fraction(0))),
    }


# ---------------------------------------------------------------------- the derivation of one instance
#: the largest Gram matrix (rows) and W (dimension) printed as a matrix when every entry is short
MATRIX_MAX = 6
#: relations per step in a listing of multipliers (a display never breaks across pages, so long lists are split)
LISTING_MAX = 24


def _sym(q: Fraction) -> sp.Rational:
    return sp.Rational(q.numerator, q.denominator)


@dataclass(frozen=True)
class Listing:
    r"""Relations $\mathrm{name}\in[\mathrm{lo},\mathrm{hi}]$ (or $=$ an exact value), printed as an ``aligned``
    block with ``columns`` relations per line (``_attsvm_latex``: the printer's hook)."""

    items: tuple[tuple[Any, Enclosure], ...]
    columns: int = 2

    def _attsvm_latex(self, printer: Any) -> str:
        rows = []
        for k in range(0, len(self.items), self.columns):
            cells = []
            for c, (name, enc) in enumerate(self.items[k : k + self.columns]):
                rel = "=" if enc.exact else r"\in"
                cells.append(("" if c == 0 else r"\qquad ") + printer._print(name) + " &" + rel + " " + enc.latex())
            rows.append(" & ".join(cells))
        return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"


def _columns(encs: list[Enclosure]) -> int:
    """Two relations per line when every value is short (an enclosure with 12 significant digits takes more than
    half the line of an article page), else one."""
    return 2 if all(len(e.text()) <= 16 for e in encs) else 1


def _contains(pairs: list[tuple[Fraction, Enclosure]]) -> bool:
    return all(e.lo <= q <= e.hi for q, e in pairs)


def _chunks(seq: list, size: int) -> list[list]:
    return [seq[k : k + size] for k in range(0, len(seq), size)] or [[]]


def derivation_of(
    ex: ExactKKT,
    alpha: Any = None,
    title: str = "Exact KKT certificate of an Att-SVM instance",
    exact_file: str | None = None,
) -> Derivation:
    r"""A :class:`Derivation` (name ``kkt``) displaying and re-checking the exact system, multipliers, ``W`` and the
    margins. Short rationals are printed exactly, long ones as certified decimal enclosures
    (:mod:`attsvm.symbolic.enclosure`); ``exact_file`` names the file with every exact value (:func:`exact_values`),
    written beside the document."""
    d = Derivation("kkt", title, claim="svm-kkt")
    d.tool = d.check_command = "attsvm derive kkt --data DATA"  # the command checks every step, always
    S = ex.S
    k = len(S)
    lam_names = [symbol("lam", *ex.labels[j]) for j in S]
    lam_encs = [enclose(ex.lam[j]) for j in S]
    Wsym = matrix_symbol("W", "d", "d")
    Ait = matrix_symbol("A", "d", "d", "i", "t")
    i, t = sp.Symbol("i"), sp.Symbol("t")
    ones = matrix_symbol("ones", "k", 1)
    Gs, lam_v = matrix_symbol("G", "k", "k"), matrix_symbol("lam", "k", 1)
    sel = ", ".join(str(int(x)) for x in np.asarray(alpha).reshape(-1)) if alpha is not None else None
    where = (
        f" All exact values (every multiplier, every entry of the matrix and every margin, as fractions) are in "
        f"the file {exact_file}, beside this document."
        if exact_file
        else " The exact values of every multiplier, entry and margin are printed by the same command with the "
        "json option."
    )
    d.summary = (
        (
            f"The selected tokens, input by input, are {sel}. "
            if sel is not None
            else "The selection is the stored one. "
        )
        + f"Indices are 0-based as in the data arrays; {len(ex.labels)} constraints, {k} active. The data are the "
        "binary floats, exactly. A short fraction is printed exactly; a long one as a certified decimal enclosure "
        f"with {SIGNIFICANT} significant digits, its ends rounded outward from the exact value in integer "
        "arithmetic." + where,
    )
    alpha_i = sp.Symbol("alpha_i")
    x_it, x_ia = matrix_symbol("x", "d", 1, "i", "t"), matrix_symbol("x", "d", 1, "i", alpha_i)
    D_it, z_i = matrix_symbol("D", "d", 1, "i", "t"), matrix_symbol("z", "d", 1, "i")
    d.define(
        Chain((x_it, z_i), "in", RealSpace(symbol("d"))),
        ("token ", t, " of input ", i, " and the query of input ", i, "."),
    )
    d.define(alpha_i, ("the selected token of input ", i, "."))
    d.define(
        Chain(D_it, "=", x_ia - x_it),
        ("the token difference of the constraint of input ", i, " and token ", Chain(t, "!=", alpha_i), "."),
    )
    d.define(
        Chain(Ait, "=", D_it * z_i.T),
        ("its constraint matrix: Att-SVM asks ", Chain(Inner(Wsym, Ait), ">=", 1), " (derivation attsvm-kkt)."),
    )
    d.define(
        (symbol("lam", "i", "t"), lam_v),
        (
            "the multiplier of that constraint, and the vector of the multipliers of the ",
            sp.Symbol("k"),
            " active ones.",
        ),
    )
    d.define(Gs, "the Gram matrix of the constraint matrices of the active constraints.")
    d.define(*glossary.ones())
    d.define((Wsym, symbol("w", "r", "c")), "the max-margin matrix and its entries (row, column).")
    d.premise(
        "reduced KKT system",
        Chain(Gs * lam_v, "=", ones),
        (
            "stationarity and complementary slackness on the set of the ",
            sp.Symbol("k"),
            " active constraints (derivation attsvm-kkt), with the Gram matrix of entries ",
            Chain(
                Inner(Ait, matrix_symbol("A", "d", "d", "j", "tau")),
                "=",
                AsScalar(matrix_symbol("D", "d", 1, "i", "t").T * matrix_symbol("D", "d", 1, "j", "tau"))
                * AsScalar(matrix_symbol("z", "d", 1, "i").T * matrix_symbol("z", "d", 1, "j")),
            ),
            ".",
        ),
    )
    G = sp.Matrix(k, k, lambda a, b: _sym(ex.gram(S[a], S[b])))
    lamS = sp.Matrix([_sym(ex.lam[j]) for j in S])
    small_G = 0 < k <= MATRIX_MAX and all(is_short(Fraction(int(x.p), int(x.q))) for x in G)
    d.step(
        "the system in exact rationals",
        Chain(sp.MatMul(G, sp.Matrix(lam_names), evaluate=False), "=", sp.ones(k, 1))
        if small_G
        else Chain(Gs * lam_v, "=", ones),
        "the Gram entries from the exact data"
        + ("." if small_G or not k else "; the entries are long fractions, so the matrix is not printed."),
        Equal(G * lamS, sp.ones(k, 1)) if k else Equal(0, 0),
    )
    chunks = _chunks(list(zip(lam_names, lam_encs, [ex.lam[j] for j in S])), LISTING_MAX)
    for c, chunk in enumerate(chunks, 1):
        name = "multipliers" + (f", part {c} of {len(chunks)}" if len(chunks) > 1 else "")
        encs = [e for _, e, _ in chunk]
        d.step(
            name,
            Listing(tuple((nm, e) for nm, e, _ in chunk), _columns(encs)) if chunk else Chain(sp.Symbol("k"), "=", 0),
            "the exact solution; every multiplier must be nonnegative.",
            Predicate(
                lambda chunk=chunk: (
                    ex.solvable and all(q >= 0 for _, _, q in chunk) and _contains([(q, e) for _, e, q in chunk])
                ),
                "every active multiplier is nonnegative and lies in its printed enclosure",
            ),
        )
    W = sp.Matrix(ex.W).applyfunc(_sym) if ex.W else sp.zeros(0, 0)
    Wcomb = sp.zeros(ex.d, ex.d)
    for j in S:
        Dj = sp.Matrix([_sym(x) for x in ex.D[j]])
        zj = sp.Matrix([_sym(x) for x in ex.Z[j]])
        Wcomb += _sym(ex.lam[j]) * Dj * zj.T
    small_W = ex.d <= MATRIX_MAX and all(is_short(w) for row in ex.W for w in row)
    d.step(
        "the max-margin matrix",
        Chain(Wsym, "=", SumOver(symbol("lam", "i", "t") * Ait, (i, t)), *(("=", W) if small_W else ())),
        "stationarity" + ("." if small_W else "; its entries follow row by row."),
        Equal(W, Wcomb),
    )
    if not small_W:
        for r, row in enumerate(ex.W):
            encs = [enclose(w) for w in row]
            names = [symbol("w", r, c) for c in range(ex.d)]
            d.step(
                f"row {r} of the max-margin matrix",
                Listing(tuple(zip(names, encs)), _columns(encs)),
                "the exact entries, enclosed.",
                Predicate(
                    lambda row=row, encs=encs: _contains(list(zip(row, encs))),
                    "every entry lies in its printed enclosure",
                ),
            )
    act = set(S)
    others = [j for j in range(len(ex.labels)) if j not in act]
    mins = ex.min_other_margin()
    m_min = sp.Symbol("m_min")
    enc_min = enclose(mins) if mins is not None else None
    d.step(
        "primal feasibility",
        Chain(Inner(Wsym, Ait), ">=", m_min, ">=", 1, where=Chain(m_min, enc_min.relation, enc_min))
        if enc_min is not None and others
        else (Chain(Inner(Wsym, Ait), "=", 1) if ex.labels else Chain(sp.Symbol("m"), "=", 0)),
        (
            f"the smallest margin among the {len(others)} inactive constraints, ",
            m_min,
            ", evaluated exactly; the active margins are exactly 1.",
        )
        if others
        else ("every constraint is active, with margin exactly 1." if ex.labels else "there are no constraints."),
        Predicate(
            lambda: (
                ex.solvable
                and all(ex.margins[j] >= 1 for j in others)
                and all(ex.margins[j] == 1 for j in S)
                and (enc_min is None or _contains([(mins, enc_min)]))
            ),
            "every margin is at least 1, the active ones exactly 1, and the smallest inactive one lies in its "
            "printed enclosure",
        ),
    )
    total = sum((ex.lam[j] for j in S), Fraction(0))
    enc_total = enclose(total)
    d.step(
        "norm identity",
        Chain(Norm(Wsym, "F") ** 2, "=", SumOver(symbol("lam", "i", "t"), (i, t)), enc_total.relation, enc_total),
        ("the optimal value; the margin is ", 1 / Norm(Wsym, "F"), "."),
        Predicate(
            lambda: sum((w * w for row in ex.W for w in row), Fraction(0)) == total and _contains([(total, enc_total)]),
            "the squared norm equals the multiplier sum exactly, and the sum lies in its printed enclosure",
        ),
    )
    return d
