r"""Max-margin programs with equality and inequality constraints on rank-one features, with exact certificates
(the graph SVM of next-token prediction, THEORY §7; this module knows nothing about next-token prediction).

.. math:: \min_W\|W\|\quad\text{s.t.}\quad\langle W,A_c\rangle=d_c^\top Wz_c=0\ \ (c\in\mathrm{EQ}),\qquad
   \langle W,A_c\rangle\ge1\ \ (c\in\mathrm{IN}),\qquad A_c=d_cz_c^\top,\ W\in\mathbb R^{d\times d},

for the Frobenius norm (``objective`` $\|W\|_F^2$, the convention of :func:`attsvm.svm.frobenius.solve_fro`) and
the nuclear norm (``objective`` $\|W\|_\star$). The data are the rows $d_c$ of ``D_in``/``D_eq`` and $z_c$ of
``Z_in``/``Z_eq`` (float64, (m, d) each; either block may be empty; with no inequality the answer is $W=0$).

**Frobenius** ($\min\frac12\|W\|_F^2$). KKT: $W=\sum_{\mathrm{EQ}}\nu_cA_c+\sum_{\mathrm{IN}}\lambda_cA_c$,
$\lambda\ge0$, $\nu$ free, every EQ margin $0$, every IN margin $\ge1$ and $=1$ where $\lambda_c>0$; then
$\|W\|_F^2=\mathbf 1^\top\lambda$ and $W$ is the unique optimum. Solved by the working-set dual of
:mod:`.eqdual` ($\max_{\nu,\lambda\ge0}\mathbf 1^\top\lambda-\frac12x^\top Gx$, $G=(DD^\top)\circ(ZZ^\top)$;
cvxpy + Clarabel only when it is undecided). Two certificates of the same KKT conditions, both re-derived from the
exact integer features:

* kind ``"exact-kkt"`` (:func:`certify_kkt`; at most ``EXACT_KKT_MAX`` rows in the system, or when the enclosure is
  undecided): the float passive set, else the float active set $S$ and all EQ rows reduced to the pivot columns of
  the exact row echelon form of their integer Gram matrix (EQ rows first: equalities inside a strongly connected
  component are linearly dependent, and $G$ singular); $G_{BB}x=b$ ($b=0$ on EQ, $1$ on $S$) solved in exact
  rationals (FLINT), repaired like :mod:`.certificate` (negative $\lambda$ dropped, violated constraints added),
  and the result checked by :func:`verify_kkt`'s own computation: ``verified`` only when every check passed. The
  returned $W$ is the exact optimum rounded, ``objective`` its exact $\|W\|_F^2$ rounded (``value_str`` exact).
* kind ``"rigorous-enclosure"`` (:func:`certify_enclosure`, larger systems, whose exact solutions have very many
  digits): the same system solved in floats, with a proved radius $\delta$ around the float multipliers that
  contains the exact ones (Krawczyk, in integers); the active set, the signs and every margin are proved through
  it, the degenerate margins (exactly 1 without being in the system) through exact linear dependences. The
  returned $W$ is the enclosure's centre rounded; ``lower`` $\le$ OPT $\le$ ``upper`` and ``objective`` their
  midpoint.

**Nuclear**. Dual $\max\mathbf 1^\top\lambda$ s.t. $\|M\|_2\le1$, $M=\sum_{\mathrm{EQ}}\nu_cA_c+
\sum_{\mathrm{IN}}\lambda_cA_c$, $\lambda\ge0$, $\nu$ free; weak duality: for feasible $W$,
$\|W\|_\star\ge\langle W,M\rangle=\sum_{\mathrm{IN}}\lambda_c\langle W,A_c\rangle\ge\mathbf 1^\top\lambda$.
Certificate (kind ``"duality-gap"``, :func:`certify_nuclear`): a proved bracket lower $\le$ OPT $\le$ upper
(:func:`attsvm.svm.spectral.proved_bracket`, ``verified`` when its relative gap is $\le$ ``tol("nuc_gap")``).
Upper: the float solution projected exactly (rationals) onto $\{W:\langle W,A_c\rangle=0,\ c\in\mathrm{EQ}\}$,
divided by its exact smallest IN margin $\mu>0$, and $\|\cdot\|_\star$ bounded above rationally
(:func:`attsvm.svm.specnorm.nuclear_upper_bound`). Lower: the float dual point scaled by $1/((1+\epsilon)\|M\|_2)$,
$\|M\|_2\le1$ proved exactly (:func:`attsvm.svm.spectral.prove_spectral_le_one`), $\mathbf 1^\top\lambda$ summed
exactly. The returned $W$ is the point the upper bound is about (the projected, scaled solution, exact, then
rounded: its equalities hold to rounding), and ``objective`` that upper bound rounded down (never below
``lower``), so lower $\le$ ``objective`` $\le$ upper.

**Infeasible** (either norm; feasibility does not depend on it). Motzkin's alternative: the program is infeasible
iff there are $\mu\ge0$ on IN with $\mathbf 1^\top\mu=1$ and $\nu$ free on EQ with
$\sum_{\mathrm{IN}}\mu_cA_c+\sum_{\mathrm{EQ}}\nu_cA_c=0$ (then $0=\langle W,\sum\mu A+\sum\nu A\rangle\ge
\mathbf 1^\top\mu=1$ for any feasible $W$). The LP's (HiGHS, :func:`attsvm.svm.cvx.farkas_lp`) float pair is made
exact by projecting it, in exact rationals, onto the integer null space of the features on its support
(:func:`exact_farkas`) and checked by :func:`verify_farkas`; infeasible is never reported without it
(:class:`~attsvm.errors.SolverError` otherwise).

Exactness: float64 data are dyadic rationals, $D=D^{\mathbb Z}2^{e_D}$, $Z=Z^{\mathbb Z}2^{e_Z}$
(:func:`attsvm.svm.exact.to_integers`), so $A_c=D^{\mathbb Z}_c(z^{\mathbb Z}_c)^\top2^{e}$, $e=e_D+e_Z$, and every
product is an integer matrix product (python-flint). Features that are not float64 numbers (differences of
embeddings, $e_y-e_j$, whose float subtraction rounds) are passed exactly with ``exact=``
(:func:`exact_program_from_integers`): the certificates are then for them, the float solver sees their roundings.
The cvxpy + Clarabel solver gets only a basis of the equalities (:func:`independent_equalities`, exact); the
others are implied. Data far from order one are first rescaled exactly by powers of two (:mod:`.scaling`):
$W=2^{-k}W'$, $k=e_D'+e_Z'$.

Result layout (:class:`~attsvm.svm.solution.SVMSolution`, ``program`` as given): the $(n,T)$ grid fields do not
fit a list of constraints, so ``margins`` and ``multipliers`` are 1-D arrays (m_in,) in the order of the rows of
``D_in``; ``support`` lists ``(0, j)`` for every IN row $j$ with margin 1 (the exact active set when certified);
``extra["eq_margins"]``, ``extra["eq_multipliers"]`` (m_eq,) the EQ margins and $\nu$; infeasible: ``farkas``
$\mu$ (m_in,) and ``extra["farkas_eq"]`` $\nu$ (m_eq,). Certificates list exact multipliers as
``["eq", j, "p/q"]`` / ``["in", j, "p/q"]``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..arrays import as_float
from ..errors import InputError, SolverError
from ..registries import Check, declare
from ..tolerances import tol
from .blas import blas_threads
from .budget import require
from .certificate import MAX_EXACT_DIGITS, hadamard
from .cvx import farkas_lp, margins_expr, solve
from .eqdual import solve_eqdual
from .exact import fmpz_matrix, pow2, to_integers
from .scaling import Scale, exact_ldexp, exponent, unscale_solution
from .solution import SVMSolution
from .specnorm import nuclear_upper_bound
from .spectral import combine_exact, prove_spectral_le_one, proved_bracket, round_down, round_up

__all__ = [
    "NORMS",
    "ExactProgram",
    "certify_kkt",
    "certify_nuclear",
    "check_input",
    "exact_farkas",
    "exact_program",
    "exact_program_from_integers",
    "independent_equalities",
    "solve_eqsvm",
    "verify_farkas",
    "verify_kkt",
]

#: the norms of the program, each with its independent check (:mod:`attsvm.registries`; the graph SVM of
#: next-token prediction, ``attsvm solve --program ntp``, is this program)
NORMS = declare(
    "svm.eqsvm.NORMS",
    {
        "fro": Check("attsvm.svm.eqsvm:certify_kkt", "exact rational KKT certificate (certify=True)"),
        "nuc": Check("attsvm.svm.eqsvm:certify_nuclear", "duality gap proved in exact arithmetic (certify=True)"),
    },
)
#: the exact optimum is written as a fraction string (``value_str``) up to this many characters
MAX_VALUE_CHARS = 2000
#: Frobenius certificates with more rows (equality basis and active set) than this are enclosures
#: (:func:`certify_enclosure`): an exact rational solve costs about the cube of the rows times the digits of the
#: answer, which grow with the rows
EXACT_KKT_MAX = 20
#: an inequality of the enclosure whose centre margin is below 1 by more than this is violated (added to the
#: active set); closer to 1 it is degenerate and proved through an exact linear dependence
_DEGENERATE = 1e-9
#: exact refinements of the enclosure's centre ($\tilde x\leftarrow\tilde x+R(b-G\tilde x)$, each shrinking the
#: radius by about $\rho$) before a margin or multiplier that stays within the radius of its bound is given up
_REFINE = 3
#: float multipliers below this fraction of the largest are treated as 0 when seeding the active set
_ACTIVE_REL = 1e-8


# ---------------------------------------------------------------------------------------------- input
def _block(a: Any, name: str) -> np.ndarray:
    arr = as_float(name, a)  # finite, real, numeric
    if arr.ndim != 2:
        raise InputError(f"{name} must be a 2-D (m, d) array, got shape {arr.shape}")
    return arr


def check_input(D_in: Any, Z_in: Any, D_eq: Any, Z_eq: Any) -> tuple[np.ndarray, ...]:
    """The four blocks as float64 (m, d) arrays, one common $d\\ge1$; :class:`InputError` naming the problem.
    ``None`` for an EQ block means no equality (shape (0, d))."""
    D_in, Z_in = _block(D_in, "D_in"), _block(Z_in, "Z_in")
    d = D_in.shape[1]
    D_eq = np.zeros((0, d)) if D_eq is None else _block(D_eq, "D_eq")
    Z_eq = np.zeros((0, d)) if Z_eq is None else _block(Z_eq, "Z_eq")
    for a, b, what in ((D_in, Z_in, "in"), (D_eq, Z_eq, "eq")):
        if a.shape != b.shape:
            raise InputError(f"D_{what} and Z_{what} must have the same shape, got {a.shape} and {b.shape}")
    if D_eq.shape[1] != d:
        raise InputError(f"D_eq has d = {D_eq.shape[1]} columns but D_in has {d}")
    if d < 1:
        raise InputError("the feature dimension d must be at least 1")
    return D_in, Z_in, D_eq, Z_eq


# ---------------------------------------------------------------------------------------------- exact data
@dataclass(frozen=True)
class ExactProgram:
    r"""The program in exact integers: rows EQ first, then IN; $d_c=D^{\mathbb Z}_c2^{e_D}$,
    $z_c=z^{\mathbb Z}_c2^{e_Z}$, so $A_c=D^{\mathbb Z}_c(z^{\mathbb Z}_c)^\top2^{e}$, $e=e_D+e_Z$.

    ``Dint``, ``Zint``: object arrays (m_eq + m_in, d) of Python ints; ``D``, ``Z`` the same rows rounded to
    float64 (what the float solver sees)."""

    Dint: np.ndarray
    Zint: np.ndarray
    eD: int
    eZ: int
    m_eq: int
    m_in: int
    D: np.ndarray
    Z: np.ndarray

    @property
    def e(self) -> int:
        return self.eD + self.eZ

    @property
    def d(self) -> int:
        return int(self.Dint.shape[1])

    @property
    def m(self) -> int:
        return self.m_eq + self.m_in

    def margin_numerators(self, WZ) -> list[int]:
        r"""$D^{\mathbb Z}_j{}^\top W^{\mathbb Z}z^{\mathbb Z}_j$ for every row $j$ (``WZ`` an integer ``fmpz_mat``)."""
        if self.m == 0:
            return []
        P = (fmpz_matrix(self.Dint) * WZ).entries()
        d = self.d
        z = fmpz_matrix(self.Zint).entries()
        return [int(sum(P[j * d + k] * z[j * d + k] for k in range(d))) for j in range(self.m)]

    def blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The float blocks ``(D_in, Z_in, D_eq, Z_eq)``."""
        k = self.m_eq
        return self.D[k:], self.Z[k:], self.D[:k], self.Z[:k]


def exact_program(D_in: Any, Z_in: Any, D_eq: Any, Z_eq: Any) -> ExactProgram:
    """The exact integer form of float64 blocks (validated: :func:`check_input`; :func:`attsvm.svm.exact.to_integers`):
    the program whose features are the floats as given."""
    D_in, Z_in, D_eq, Z_eq = check_input(D_in, Z_in, D_eq, Z_eq)
    D, Z = np.vstack([D_eq, D_in]), np.vstack([Z_eq, Z_in])
    Dn, eD = to_integers(D)
    Zn, eZ = to_integers(Z)
    return ExactProgram(Dn.reshape(D.shape), Zn.reshape(Z.shape), eD, eZ, len(D_eq), len(D_in), D, Z)


def _rounded(N: np.ndarray, e: int) -> np.ndarray:
    """The integer array ``N`` times $2^e$, correctly rounded to float64."""
    out = np.array([math.ldexp(float(int(v)), e) for v in N.ravel().tolist()], dtype=float).reshape(N.shape)
    # float(int) rounds correctly and ldexp is exact in the normal range; below it (double rounding) exactly:
    low = (out != 0) & (np.abs(out) < 2.0 * np.finfo(float).tiny)
    if low.any():
        sc = pow2(e)
        flat = N.ravel()
        out.ravel()[low.ravel()] = [float(Fraction(int(v)) * sc) for v in flat[low.ravel()].tolist()]
    return out


def exact_program_from_integers(
    Dint_in: Any, Zint_in: Any, Dint_eq: Any, Zint_eq: Any, eD: int, eZ: int
) -> ExactProgram:
    r"""The program with exact features $d_c=D^{\mathbb Z}_c2^{e_D}$, $z_c=z^{\mathbb Z}_c2^{e_Z}$ given as integer
    arrays (m, d) (object arrays of Python ints, or integer dtype): for features that are not float64 numbers,
    e.g. differences $e_y-e_j$ of embeddings, whose float subtraction may round (and then the rounded program is
    a different program: near-dependent equalities become independent). ``D``/``Z`` are the correctly rounded
    floats."""
    blocks = []
    for a, name in ((Dint_eq, "Dint_eq"), (Dint_in, "Dint_in"), (Zint_eq, "Zint_eq"), (Zint_in, "Zint_in")):
        arr = np.asarray(a, dtype=object)
        if arr.ndim != 2 or not all(isinstance(v, (int, np.integer)) for v in arr.ravel().tolist()):
            raise InputError(f"{name} must be a 2-D array of integers")
        blocks.append(np.array([int(v) for v in arr.ravel().tolist()], dtype=object).reshape(arr.shape))
    De, Di, Ze, Zi = blocks
    if De.shape != Ze.shape or Di.shape != Zi.shape or De.shape[1] != Di.shape[1]:
        raise InputError("exact features: D and Z blocks must have matching shapes (m, d), one common d")
    Dn, Zn = np.vstack([De, Di]), np.vstack([Ze, Zi])
    return ExactProgram(Dn, Zn, int(eD), int(eZ), len(De), len(Di), _rounded(Dn, int(eD)), _rounded(Zn, int(eZ)))


def _rational(v: Any) -> Fraction:
    """An exact rational from a Fraction, an int, a float (exact binary value), a ``"p/q"`` string or an fmpq."""
    if isinstance(v, Fraction):
        return v
    if isinstance(v, str):
        return Fraction(v)
    if isinstance(v, (int, np.integer)):
        return Fraction(int(v))
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(float(v)):
            raise InputError("a multiplier is not finite")
        return Fraction(float(v))
    if hasattr(v, "p") and hasattr(v, "q"):  # flint.fmpq
        return Fraction(int(v.p), int(v.q))
    raise InputError(f"cannot read {v!r} as an exact rational")


def _common(x: list[Fraction]) -> tuple[list[int], int]:
    """Numerators over one common denominator q: ``x[k] == num[k] / q``."""
    q = math.lcm(*(f.denominator for f in x)) if x else 1
    return [int(f.numerator * (q // f.denominator)) for f in x], q


# ---------------------------------------------------------------------------------------------- exact checks
def verify_kkt(prog: ExactProgram, nu: Any, lam: Any) -> dict[str, Any]:
    r"""Check the Frobenius optimality conditions exactly for the multipliers $\nu$ (m_eq,) and $\lambda$ (m_in,)
    (exact rationals: Fractions, ints, binary floats, ``"p/q"`` strings or fmpq).

    With $W=\sum_{\mathrm{EQ}}\nu_cA_c+\sum_{\mathrm{IN}}\lambda_cA_c$ formed exactly, the checks are
    ``dual_feasible`` ($\lambda\ge0$), ``equalities`` (every EQ margin $=0$), ``inequalities`` (every IN margin
    $\ge1$) and ``complementary`` (margin $=1$ where $\lambda_c>0$); with stationarity by construction they are
    the KKT conditions of the convex program, so ``verified`` (all four) proves $W$ optimal. Returns ``verified``,
    ``checks``, ``value`` ($\|W\|_F^2$, a Fraction; $=\mathbf 1^\top\lambda$ when verified), ``active`` (IN rows
    with margin exactly 1), ``min_other_margin`` (smallest IN margin with $\lambda_c=0$, Fraction or None),
    ``W`` (``(WZ, scale)``: $W=W^{\mathbb Z}\cdot$ scale, ``WZ`` an ``fmpz_mat``)."""
    nu = [_rational(v) for v in np.asarray(nu, dtype=object).ravel().tolist()]
    lam = [_rational(v) for v in np.asarray(lam, dtype=object).ravel().tolist()]
    if len(nu) != prog.m_eq or len(lam) != prog.m_in:
        raise InputError(f"expected {prog.m_eq} equality and {prog.m_in} inequality multipliers, got "
                         f"{len(nu)} and {len(lam)}")  # fmt: skip
    num, q = _common(nu + lam)
    return _verify_numerators(prog, num, q)


def _verify_numerators(prog: ExactProgram, num: list[int], q: int) -> dict[str, Any]:
    """:func:`verify_kkt` for the multipliers ``num[c] / q`` (EQ first; integers over one denominator $q>0$)."""
    WZ = combine_exact(prog.Dint, prog.Zint, np.array(num, dtype=object))  # W = WZ 2^e / q
    e2 = 2 * prog.e
    mnum = prog.margin_numerators(WZ)  # margin_j = mnum_j 2^(2e) / q = in_m_j / one
    one = q if e2 >= 0 else q << -e2
    in_m = [v << e2 if e2 > 0 else v for v in mnum[prog.m_eq :]]
    lam = num[prog.m_eq :]
    checks = {
        "dual_feasible": all(x >= 0 for x in lam),
        "equalities": all(v == 0 for v in mnum[: prog.m_eq]),
        "inequalities": all(v >= one for v in in_m),
        "complementary": all(mg == one for x, mg in zip(lam, in_m) if x > 0),
    }
    value = Fraction(int(sum(v * v for v in WZ.entries()))) * pow2(e2) / (q * q)
    others = [mg for x, mg in zip(lam, in_m) if x == 0]
    return {
        "verified": all(checks.values()),
        "checks": checks,
        "value": value,
        "active": [j for j, mg in enumerate(in_m) if mg == one],
        "min_other_margin": Fraction(min(others), one) if others else None,
        "W": (WZ, pow2(prog.e) / q),
    }


def verify_farkas(prog: ExactProgram, mu: Any, nu: Any) -> bool:
    r"""Exact check of an infeasibility certificate: $\mu\ge0$ (m_in,), $\mathbf 1^\top\mu>0$, $\nu$ (m_eq,) free,
    and $\sum_{\mathrm{IN}}\mu_cA_c+\sum_{\mathrm{EQ}}\nu_cA_c=0$ exactly (entries as in :func:`verify_kkt`)."""
    mu = [_rational(v) for v in np.asarray(mu, dtype=object).ravel().tolist()]
    nu = [_rational(v) for v in np.asarray(nu, dtype=object).ravel().tolist()]
    if len(mu) != prog.m_in or len(nu) != prog.m_eq:
        return False
    if any(x < 0 for x in mu) or not sum(mu) > 0:
        return False
    num, _ = _common(nu + mu)
    return all(int(v) == 0 for v in combine_exact(prog.Dint, prog.Zint, np.array(num, dtype=object)).entries())


def _pivots(G) -> list[int]:
    """Pivot columns of the exact reduced row echelon form of the ``fmpz_mat`` ``G`` (in column order)."""
    R, _den, rank = G.rref()
    rows = R.tolist()
    return [next(k for k, v in enumerate(rows[r]) if v != 0) for r in range(int(rank))]


def _nonzero_rows(prog: ExactProgram) -> np.ndarray:
    """Rows whose feature $A_c$ is not 0 (a zero feature adds nothing to a Gram system)."""
    Dz = np.array([[v != 0 for v in row] for row in prog.Dint.tolist()], dtype=bool).reshape(prog.m, prog.d)
    Zz = np.array([[v != 0 for v in row] for row in prog.Zint.tolist()], dtype=bool).reshape(prog.m, prog.d)
    return Dz.any(1) & Zz.any(1)


def independent_equalities(prog: ExactProgram) -> np.ndarray:
    r"""Indices of EQ rows whose features form a basis of $\mathrm{span}\{A_c:c\in\mathrm{EQ}\}$ (pivot columns of
    the exact row echelon form of their integer Gram matrix, in row order): every other equality is an exact
    linear combination of these, hence implied. The float solver gets only these (a singular equality system
    makes the interior-point method fail)."""
    E = np.flatnonzero(_nonzero_rows(prog)[: prog.m_eq])
    if E.size == 0:
        return E
    GA = hadamard(fmpz_matrix(prog.Dint[E]) * fmpz_matrix(prog.Dint[E]).transpose(),
                  fmpz_matrix(prog.Zint[E]) * fmpz_matrix(prog.Zint[E]).transpose())  # fmt: skip
    return E[np.array(_pivots(GA), dtype=np.int64)]


# ---------------------------------------------------------------------------------------------- Frobenius
def certify_kkt(prog: ExactProgram, lam_f: np.ndarray, marg_f: np.ndarray, max_rounds: int = 100,
                passive: np.ndarray | None = None) -> dict[str, Any]:  # fmt: skip
    r"""The exact Frobenius certificate (module docstring) from float multipliers ``lam_f`` and margins ``marg_f``
    (m_in,) of a float solution. ``passive``: the float solver's independent rows (indices into EQ-then-IN),
    tried first as they are (no echelon form); when their exact system is singular or its solution fails a
    check, the repair rounds start: $S$ is kept in priority order (constraints added by a repair first), the
    echelon form keeps the first independent rows of $[\mathrm{EQ},S]$. The exact system is solved in FLINT
    (one common denominator, no per-entry fractions); the result is re-checked by :func:`verify_kkt`'s own
    computation (W formed from the multipliers, every margin from W). Returns ``{"kind": "exact-kkt",
    "verified", "checks", "active", "multipliers", "W", "value_str", "value", "min_other_margin", "eq_rank",
    "support_size", "repairs", "seconds"}`` (exact values as ``"p/q"`` strings, omitted when very large)."""
    from flint import fmpz_mat

    t0 = time.perf_counter()
    base: dict[str, Any] = {"kind": "exact-kkt", "verified": False}
    m_eq = prog.m_eq
    nz = _nonzero_rows(prog)
    E = np.flatnonzero(nz[:m_eq])
    lam_f = np.asarray(lam_f, dtype=float)
    S = np.flatnonzero(lam_f > _ACTIVE_REL * max(float(lam_f.max(initial=0.0)), np.finfo(float).tiny))
    if S.size == 0 and prog.m_in:
        S = np.array([int(np.argmin(marg_f))])
    Dall, Zall = fmpz_matrix(prog.Dint), fmpz_matrix(prog.Zint)
    repairs, eq_rank = 0, 0
    first = None if passive is None else np.asarray(passive, dtype=np.int64)
    found = None
    for _ in range(max_rounds):
        if first is not None:
            Bp, first = first, None
        else:
            B = np.concatenate([E, m_eq + S]).astype(np.int64)  # equalities first
            if B.size:
                DB, ZB = fmpz_matrix(prog.Dint[B]), fmpz_matrix(prog.Zint[B])
                Bp = B[np.array(_pivots(hadamard(DB * DB.transpose(), ZB * ZB.transpose())), dtype=np.int64)]
            else:
                Bp = B
        kp = Bp.size
        if kp == 0:
            found = (Bp, [], 1)
            break
        GA = hadamard(Dall * fmpz_matrix(prog.Dint[Bp]).transpose(), Zall * fmpz_matrix(prog.Zint[Bp]).transpose())
        ent = GA.entries()
        Gp = fmpz_mat(kp, kp, [ent[int(c) * kp + i] for c in Bp for i in range(kp)])
        try:
            num_m, den = Gp.solve(fmpz_mat(kp, 1, [0 if c < m_eq else 1 for c in Bp])).numer_denom()
        except ZeroDivisionError:  # singular: the float independent set was not exactly independent
            continue
        num = [int(v) for v in num_m.entries()]
        den = int(den)
        if den < 0:
            num, den = [-v for v in num], -den
        eq_rank = int(np.sum(Bp < m_eq))
        neg = np.array([c >= m_eq and v < 0 for c, v in zip(Bp, num)])
        if neg.any():  # a negative inequality multiplier: leave that constraint out
            S = S[~np.isin(S, Bp[neg] - m_eq)]
            repairs += 1
            continue
        mg = [int(v) for v in (GA * num_m).entries()]  # margin_c = mg_c / den
        if any(v != 0 for v in mg[:m_eq]):  # an equality outside the span of the basis (fast path only)
            repairs += 1
            continue
        viol = np.array([v < den for v in mg[m_eq:]], dtype=bool)
        if viol.any():
            bad = np.flatnonzero(viol)
            bad = bad[np.argsort(np.asarray(marg_f)[bad], kind="stable")][: max(10, S.size // 10)]
            # added in front: a violated constraint dependent on S then displaces one of S in the echelon form
            S = np.concatenate([bad, S[~np.isin(S, bad)]])
            repairs += 1
            continue
        found = (Bp, num, den)
        break
    if found is None:
        return dict(base, reason="repair budget exhausted", repairs=repairs, seconds=time.perf_counter() - t0)
    Bp, num, den = found
    # multipliers x_c = num_c 2^(-2e) / den: numerators over one denominator q
    e2 = 2 * prog.e
    q = den << e2 if e2 > 0 else den
    full = [0] * prog.m
    for c, v in zip(Bp, num):
        full[int(c)] = v << -e2 if e2 < 0 else v
    res = _verify_numerators(prog, full, q)
    out = dict(base, verified=bool(res["verified"]), checks=res["checks"], repairs=repairs, eq_rank=eq_rank,
               support_size=int(np.sum(Bp >= m_eq)))  # fmt: skip
    out["active"] = [int(j) for j in res["active"]]
    value = res["value"]
    out["value"] = float(value)
    out["value_str"] = _fraction_str(value, MAX_VALUE_CHARS)
    mo = res["min_other_margin"]
    out["min_other_margin"] = None if mo is None else _fraction_str(mo, MAX_EXACT_DIGITS)
    WZ, sc = res["W"]
    out["W_float"] = _rounded_matrix(WZ, sc)
    bits = sum(abs(v).bit_length() for v in full) + len(Bp) * q.bit_length()
    bits += WZ.nrows() * WZ.ncols() * (sc.numerator.bit_length() + sc.denominator.bit_length())
    bits += sum(abs(int(v)).bit_length() for v in WZ.entries())
    digits = int(bits * 0.30103) + 1
    if digits <= MAX_EXACT_DIGITS:
        from flint import fmpq

        out["multipliers"] = [["eq" if c < m_eq else "in", int(c if c < m_eq else c - m_eq),
                               str(fmpq(full[int(c)], q))] for c in Bp]  # fmt: skip
        f = fmpq(sc.numerator, sc.denominator)
        out["W"] = [[str(f * v) for v in row] for row in WZ.tolist()]
    else:
        out["multipliers"], out["W"] = None, None
        out["omitted"] = f"exact multipliers and W omitted (about {digits} digits)"
    out["seconds"] = time.perf_counter() - t0
    return out


def certify_enclosure(prog: ExactProgram, lam_f: np.ndarray, marg_f: np.ndarray,
                      max_rounds: int = 50) -> dict[str, Any]:  # fmt: skip
    r"""A rigorous Frobenius certificate without exact fractions (kind ``"rigorous-enclosure"``).

    $B$ = the exact basis $E$ of the equalities (:func:`independent_equalities`: every other EQ feature is an exact
    combination of those of $E$) and the float active set $S$. With the exact integer Gram matrix
    $G=G^{\mathbb Z}_{BB}$, $b=(0_E,\mathbf 1_S)$, a float solution $\tilde x\approx G^{-1}b$ and approximate
    inverse $R$, both rounded to dyadic grids, the residuals $r=b-G\tilde x$ and $I-RG$ are computed in integers;
    if $\rho=\|I-RG\|_\infty<1$ then $G$ is invertible and the exact $x^*=G^{-1}b$ satisfies
    $\|x^*-\tilde x\|_\infty\le\delta=\|Rr\|_\infty/(1-\rho)$ (Krawczyk). $W^*=\sum_Bx^*_cA_c2^{-2e}$ then has EQ
    margins exactly 0 on $E$ (hence on every EQ row), IN margins exactly 1 on $S$; $x^*_S>0$ is proved by
    $\tilde x_c>\delta$ and every other IN margin by $\langle\tilde W,A_c\rangle-\delta\|A_c\|_F\sum_B\|A_b\|_F\ge1$
    ($\tilde W=\sum_B\tilde x_bA_b$, norms bounded above in integers), all in integers; a margin within that
    radius of 1 is proved exactly when $A_c$ is an exact rational combination of $A_B$ (then it is
    $\alpha^\top b$, :func:`_span_margins`):
    the KKT conditions hold, $W^*$ is the optimum, and $\mathrm{OPT}=\mathbf 1^\top\lambda^*\in
    [\mathbf 1^\top\tilde x_S\mp|S|\delta]2^{-2e}$ (``lower``, ``upper``). A negative float multiplier is dropped and
    violated constraints are added (``repairs``); ``verified`` False (with ``reason``) when a multiplier or a
    margin cannot be separated from its bound (degenerate) or $\rho\ge1$. Returns ``{"kind", "verified",
    "active", "multipliers" (the centre, ``["eq"|"in", j, "p/q"]``), "radius" (of the multipliers, rounded up),
    "lower", "upper", "value" (the centre of the bracket), "min_other_margin", "rho", "eq_rank", "support_size",
    "repairs", "seconds"}`` and ``W_float`` (the centre's W, for the solver)."""
    from flint import fmpz_mat

    t0 = time.perf_counter()
    base: dict[str, Any] = {"kind": "rigorous-enclosure", "verified": False}
    m_eq, m = prog.m_eq, prog.m
    E = independent_equalities(prog)
    lam_f = np.asarray(lam_f, dtype=float)
    S = np.flatnonzero(lam_f > _ACTIVE_REL * max(float(lam_f.max(initial=0.0)), np.finfo(float).tiny))
    if S.size == 0:
        S = np.array([int(np.argmin(marg_f))])
    sq = [sum(int(v) ** 2 for v in row) for row in prog.Dint.tolist()]
    sz = [sum(int(v) ** 2 for v in row) for row in prog.Zint.tolist()]
    anorm = [math.isqrt(x * y) + 1 for x, y in zip(sq, sz)]  # > ||D^Z_c|| ||z^Z_c|| = ||A^Z_c||_F

    def fail(reason: str) -> dict[str, Any]:
        return dict(base, reason=reason, repairs=repairs, seconds=time.perf_counter() - t0)

    repairs = 0
    for _ in range(max_rounds):
        B = np.concatenate([E, m_eq + S]).astype(np.int64)
        k, ne = B.size, E.size
        DB, ZB = fmpz_matrix(prog.Dint[B]), fmpz_matrix(prog.Zint[B])
        GBl = hadamard(DB * DB.transpose(), ZB * ZB.transpose()).entries()  # G^Z_BB, k x k row-major
        Gf = np.array([float(v) for v in GBl]).reshape(k, k)
        s = int(np.frexp(np.max(np.abs(Gf)))[1])
        Gs = np.ldexp(Gf, -s)
        b = np.zeros(k)
        b[ne:] = 1.0
        try:
            Rf = np.linalg.inv(Gs)
        except np.linalg.LinAlgError:
            return fail("singular Gram matrix of the basis and the active set")
        xf = Rf @ b
        xf = xf + Rf @ (b - Gs @ xf)
        if not np.all(np.isfinite(xf)):
            return fail("singular Gram matrix of the basis and the active set")
        if np.any(xf[ne:] <= 0):
            S = S[xf[ne:] > 0]
            repairs += 1
            if S.size == 0:
                return fail("every multiplier dropped")
            continue
        # x~ = xi / 2^(px + s) ~ G^{-1} b,  R = ri / 2^(pr + s) ~ G^{-1}   (G = Gs 2^s)
        xi, px = _dyadic(xf)
        ri, pr = _dyadic(Rf)
        if px + s < 0 or pr + s < 0:
            return fail("scaling underflow")
        ge, de = 1 << (px + s), 1 << (pr + s)
        G = fmpz_mat(k, k, GBl)
        Rm = fmpz_mat(k, k, ri)
        RG = (Rm * G).entries()
        rho_num = max(sum(abs((de if i == j else 0) - int(RG[i * k + j])) for j in range(k)) for i in range(k))
        if rho_num >= de:
            return fail("enclosure failed (||I - RG|| >= 1)")
        bvec = [0] * ne + [1] * (k - ne)
        na = sum(anorm[int(c)] for c in B)  # margins move by at most delta a_j na (below)
        inB = np.zeros(m, dtype=bool)
        inB[B] = True
        others = [j for j in range(m_eq, m) if not inB[j]]
        spanned: dict[int, Fraction] = {}  # margins proved exactly through a linear dependence on B
        tried: set[int] = set()
        add: list[int] = []
        for refine in range(_REFINE + 1):
            rn = [bb * ge - int(v) for bb, v in zip(bvec, (G * fmpz_mat(k, 1, xi)).entries())]  # r = rn / ge
            corr = [int(v) for v in (Rm * fmpz_mat(k, 1, rn)).entries()]  # R r = corr / (de ge)
            dn = max(abs(v) for v in corr)
            dd = ge * (de - rho_num)  # delta = ||R r||_inf / (1 - rho) = dn / dd
            pos_ok = all(xi[i] * dd > dn * ge for i in range(ne, k))  # x*_c > 0 on S
            # margins of W~ = sum_B x~_c A_c: mg / ge; |margin_j(W*) - margin_j(W~)| <= delta a_j na
            WZ = combine_exact(prog.Dint[B], prog.Zint[B], np.array(xi, dtype=object))  # W~ = WZ 2^-e / ge
            mg = prog.margin_numerators(WZ)
            one, low_min, unresolved = ge * dd, None, []
            for j in others:
                if j in spanned:
                    continue
                slack = anorm[j] * na * dn * ge
                if mg[j] * dd - slack >= one:  # lower bound (mg dd - slack) / (ge dd) >= 1
                    low_min = mg[j] * dd - slack if low_min is None else min(low_min, mg[j] * dd - slack)
                elif mg[j] < (1.0 - _DEGENERATE) * ge:  # violated: the active set grows
                    add.append(j)
                elif mg[j] * dd + slack < one:  # violated by a rounding-sized amount: near-degenerate
                    return fail("near-degenerate: a margin is below 1 by less than the degeneracy threshold")
                else:
                    unresolved.append(j)
            if add:
                break
            new = [j for j in unresolved if j not in tried]
            if new:  # margin 1 within the enclosure: exact when the feature is a combination of B's features
                tried.update(new)
                GjB = (prog.D[new] @ prog.D[B].T) * (prog.Z[new] @ prog.Z[B].T)  # float G_jB = G^Z_jB 2^(2e)
                for j, v in zip(new, _span_margins(prog, B, b, np.array(new), np.ldexp(GjB, -2 * prog.e - s) @ Rf.T)):
                    if v is not None and v >= 1:
                        spanned[j] = v
                    elif v is not None:
                        add.append(j)
                if add:
                    break
                unresolved = [j for j in unresolved if j not in spanned]
            if pos_ok and not unresolved:
                break
            if refine == _REFINE:
                return fail("degenerate: a multiplier or a margin is not separated from its bound")
            xi, ge = [x * de + c for x, c in zip(xi, corr)], ge * de  # x~ + R r, exactly: the radius shrinks by rho
        if add:
            add = np.array(sorted(add, key=lambda j: mg[j] / ge))[: max(10, S.size // 10)] - m_eq
            S = np.concatenate([S, add])
            repairs += 1
            continue
        mins = [] if low_min is None else [Fraction((low_min << 60) // (ge * dd), 1 << 60)]  # a short lower bound
        mins += [min(spanned.values())] if spanned else []
        # the proof is done; the reported centre is refined once more (its radius shrinks by rho, and the
        # returned W, the rounded centre, then meets the equalities to rounding)
        xi, ge = [x * de + c for x, c in zip(xi, corr)], ge * de
        rn = [bb * ge - int(v) for bb, v in zip(bvec, (G * fmpz_mat(k, 1, xi)).entries())]
        dn = max(abs(int(v)) for v in (Rm * fmpz_mat(k, 1, rn)).entries())
        dd = ge * (de - rho_num)
        WZ = combine_exact(prog.Dint[B], prog.Zint[B], np.array(xi, dtype=object))
        s2 = pow2(-2 * prog.e)
        tot = sum(xi[ne:])
        lower = (Fraction(tot, ge) - (k - ne) * Fraction(dn, dd)) * s2
        upper = (Fraction(tot, ge) + (k - ne) * Fraction(dn, dd)) * s2
        xr = [Fraction(v, ge) * s2 for v in xi]
        out = dict(base, verified=True, repairs=repairs, eq_rank=int(ne), support_size=int(k - ne))
        out["active"] = [int(c - m_eq) for c in B[ne:]]
        out["multipliers"] = [["eq" if c < m_eq else "in", int(c if c < m_eq else c - m_eq), str(x)]
                              for c, x in zip(B, xr)]  # fmt: skip
        out["radius"] = round_up(Fraction(dn, dd) * s2)
        out["lower"], out["upper"] = round_down(lower), round_up(upper)
        out["value"] = float((lower + upper) / 2)
        out["min_other_margin"] = str(min(mins)) if mins else None
        out["rho"] = float(Fraction(rho_num, de))
        out["W_float"] = _rounded_matrix(WZ, pow2(-prog.e) / ge)
        out["seconds"] = time.perf_counter() - t0
        return out
    return fail("repair budget exhausted")


def _span_margins(prog: ExactProgram, B: np.ndarray, b: np.ndarray, rows: np.ndarray, alpha: np.ndarray
                  ) -> list[Fraction | None]:  # fmt: skip
    r"""Exact margins of the ``rows`` whose features are combinations of the features of ``B``:
    $A_j=\sum_{c\in B}\alpha_cA_c$ with rational $\alpha$ (``alpha`` (len(rows), |B|) the float coefficients
    $G_{BB}^{-1}G_{Bj}$, rounded to denominators $\le2^{10}$, then checked exactly in integers), so that at the
    exact solution of $G_{BB}x=b$ the margin is exactly $\alpha^\top b$; None for a row without such a
    combination."""
    out: list[Fraction | None] = []
    for j, a in zip(rows, alpha):
        al = [Fraction(float(v)).limit_denominator(1 << 10) if abs(v) > 1e-9 else Fraction(0) for v in a]
        sup = [i for i, v in enumerate(al) if v != 0]
        if not sup:
            out.append(None)
            continue
        num, _ = _common([al[i] for i in sup] + [Fraction(-1)])
        cols = np.concatenate([B[sup], [j]])
        N = combine_exact(prog.Dint[cols], prog.Zint[cols], np.array(num, dtype=object))
        exact = all(int(v) == 0 for v in N.entries())
        out.append(sum((al[i] * Fraction(b[i]) for i in sup), Fraction(0)) if exact else None)
    return out


def _dyadic(v: np.ndarray, bits: int = 52) -> tuple[list[int], int]:
    """Integers ``n`` and ``p`` with ``v ~ n / 2**p`` (the largest entry on ``bits`` bits; any rounding will do:
    these are approximations whose error the enclosure bounds)."""
    mx = float(np.max(np.abs(v), initial=0.0))
    p = bits - (int(np.ceil(np.log2(mx))) if mx > 0 else 0)
    return [int(x) for x in np.round(np.ldexp(v, p)).astype(np.int64).ravel().tolist()], p


def _fraction_str(x: Fraction, limit: int | None) -> str | None:
    """``"p/q"`` (or ``"p"``) of an exact rational, written by FLINT (no Python digit limit); None when longer than
    ``limit`` characters (estimated from the bit lengths before writing)."""
    from flint import fmpq

    if limit is not None and (x.numerator.bit_length() + x.denominator.bit_length()) * 0.30103 > limit + 2:
        return None
    return str(fmpq(x.numerator, x.denominator))


def _rounded_matrix(WZ, sc: Fraction) -> np.ndarray:
    """The integer matrix ``WZ`` (``fmpz_mat``) times the exact ``sc``, each entry correctly rounded to float64
    (Python's integer true division rounds correctly)."""
    p, q = sc.numerator, sc.denominator
    return np.array([[(int(v) * p) / q for v in row] for row in WZ.tolist()], dtype=float).reshape(
        WZ.nrows(), WZ.ncols()
    )


# ---------------------------------------------------------------------------------------------- nuclear
def _feasible_upper(prog: ExactProgram, W: np.ndarray) -> tuple[Fraction | None, dict]:
    r"""A proved upper bound on the nuclear optimum from the float ``W`` (module docstring), or None."""
    from flint import fmpz_mat

    info: dict[str, Any] = {}
    if prog.m_in == 0:
        return Fraction(0), info
    Wn, eW = to_integers(W)
    WZ = fmpz_matrix(Wn)  # W = WZ 2^eW
    q = 1
    Bp = independent_equalities(prog)
    info["projected"] = bool(Bp.size)
    if Bp.size:
        R = prog.margin_numerators(WZ)  # <W, A_c> = R_c 2^(eW + e)
        Gp = hadamard(fmpz_matrix(prog.Dint[Bp]) * fmpz_matrix(prog.Dint[Bp]).transpose(),
                      fmpz_matrix(prog.Zint[Bp]) * fmpz_matrix(prog.Zint[Bp]).transpose())  # fmt: skip
        u = Gp.solve(fmpz_mat(Bp.size, 1, [R[int(c)] for c in Bp]))  # W_p = 2^eW (WZ - sum u_c D_c z_c^T)
        un, q = _common([Fraction(int(v.p), int(v.q)) for v in u.entries()])
        WZ = WZ * q - combine_exact(prog.Dint[Bp], prog.Zint[Bp], np.array(un, dtype=object))  # W_p = WZ 2^eW / q
    mnum = prog.margin_numerators(WZ)  # margin_j = mnum_j 2^(eW + e) / q
    info["equalities_exact"] = all(v == 0 for v in mnum[: prog.m_eq])
    mu = min(mnum[prog.m_eq :])
    info["primal_feasible_proved"] = bool(info["equalities_exact"] and mu > 0)
    if not info["primal_feasible_proved"]:
        return None, info
    ent = [int(v) for v in WZ.entries()]
    b = max(abs(v) for v in ent).bit_length()
    Wf = np.array([v / (1 << b) for v in ent], dtype=float).reshape(prog.d, prog.d)  # ~ WZ 2^-b
    nb = nuclear_upper_bound(WZ, -b, Wf)  # >= ||WZ 2^-b||_*
    # W_p / margin_min = WZ 2^eW / q / (mu 2^(eW + e) / q) = WZ 2^-e / mu: the point the bound is about
    info["point"] = (WZ, pow2(-prog.e) / mu)
    return nb * pow2(b - prog.e) / mu, info


def certify_nuclear(prog: ExactProgram, W: np.ndarray, lam: np.ndarray, nu: np.ndarray) -> dict[str, Any]:
    r"""The proved bracket of the nuclear program (module docstring) from a float primal ``W`` and a float dual
    point (``lam`` (m_in,) clipped at 0, ``nu`` (m_eq,)). Returns ``{"kind": "duality-gap", "verified", "proved",
    "lower", "upper", "rel_gap", "primal_feasible_proved", "dual_feasible_proved", "projected", "seconds"}``, and
    when an upper bound is proved ``W_float`` (the feasible point it bounds, rounded) and ``objective_float``
    (that bound rounded down, at least ``lower``), which the solver moves into the solution."""
    t0 = time.perf_counter()
    upper, info = _feasible_upper(prog, np.asarray(W, dtype=float))
    lam = np.asarray(lam, dtype=float)
    nu = np.asarray(nu, dtype=float)
    lam = np.where(lam > 1e-13 * max(float(lam.max(initial=0.0)), 1e-300), lam, 0.0)
    x = np.concatenate([nu, lam])
    s = float(np.linalg.norm(prog.D.T @ (x[:, None] * prog.Z), 2)) if prog.m else 0.0
    lower = Fraction(0)
    dual_ok = not np.any(lam > 0)  # lambda = 0 is dual feasible whatever nu (take nu = 0)
    if not dual_ok and s > 0:
        for eps in (1e-12, 1e-10, 1e-8, 1e-6):
            xs = x / ((1.0 + eps) * s)
            xn, ex = to_integers(xs)
            if prove_spectral_le_one(combine_exact(prog.Dint, prog.Zint, xn), prog.e + ex):
                dual_ok = True
                lower = sum((Fraction(int(v)) for v in xn[prog.m_eq :]), Fraction(0)) * pow2(ex)
                break
    out = {"kind": "duality-gap", **proved_bracket(lower, upper, tol("nuc_gap"))}
    if not dual_ok:
        out["verified"] = False
    if "point" in info:  # the proved feasible point, rounded, and its proved bound rounded into the bracket
        out["W_float"] = _rounded_matrix(*info["point"])
        out["objective_float"] = max(round_down(upper), out["lower"])
    out.update(primal_feasible_proved=upper is not None, dual_feasible_proved=bool(dual_ok),
               projected=bool(info.get("projected", False)), seconds=time.perf_counter() - t0)  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------- Farkas
def exact_farkas(prog: ExactProgram, mu: np.ndarray, nu: np.ndarray) -> tuple[list[Fraction], list[Fraction]] | None:
    r"""An exact infeasibility certificate near the float pair (``mu`` (m_in,) $\ge0$, ``nu`` (m_eq,)), or None.

    On the support $S$ of $\mu$ (entries above $10^{-9}\max\mu$, then every positive entry) and every EQ row with
    a nonzero feature, the integer null space $\mathcal N$ of the columns $\mathrm{vec}A_c$ is computed exactly
    (FLINT) and the float pair is projected onto it in exact rationals; if the projection has $\mu\ge0$,
    $\mathbf 1^\top\mu>0$ it is normalised to $\mathbf 1^\top\mu=1$ and returned when :func:`verify_farkas`
    accepts it (negative entries are dropped from $S$ and the projection repeated, a few times)."""
    from flint import fmpq_mat

    mu = np.asarray(mu, dtype=float)
    nu = np.asarray(nu, dtype=float)
    E = np.flatnonzero(_nonzero_rows(prog)[: prog.m_eq])
    d = prog.d
    tried: set[tuple[int, ...]] = set()
    for thr in (1e-9 * float(mu.max(initial=0.0)), 0.0):
        S = np.flatnonzero(mu > thr)
        for _ in range(10):
            if S.size == 0 or tuple(S) in tried:
                break
            tried.add(tuple(S))
            cols = np.concatenate([E, prog.m_eq + S])
            vecA = (prog.Dint[cols][:, :, None] * prog.Zint[cols][:, None, :]).reshape(cols.size, d * d)
            N, nullity = fmpz_matrix(vecA.T).nullspace()
            if nullity == 0:
                break
            Bm = fmpq_mat(cols.size, nullity, [N[r, k] for r in range(cols.size) for k in range(nullity)])
            v = fmpq_mat(cols.size, 1, [_fmpq(x) for x in np.concatenate([nu[E], mu[S]]).tolist()])
            Bt = Bm.transpose()
            proj = Bm * (Bt * Bm).solve(Bt * v)  # exact orthogonal projection onto the null space
            p = [Fraction(int(e.p), int(e.q)) for e in proj.entries()]
            pm = p[E.size :]
            if all(x >= 0 for x in pm) and sum(pm) > 0:
                tot = sum(pm)
                mu_x = [Fraction(0)] * prog.m_in
                nu_x = [Fraction(0)] * prog.m_eq
                for j, x in zip(S, pm):
                    mu_x[int(j)] = x / tot
                for c, x in zip(E, p[: E.size]):
                    nu_x[int(c)] = x / tot
                if verify_farkas(prog, mu_x, nu_x):
                    return mu_x, nu_x
                break
            S = S[np.array([x >= 0 for x in pm], dtype=bool) & np.array([x != 0 for x in pm], dtype=bool)]
    return None


def _fmpq(x: float):
    from flint import fmpq

    f = Fraction(float(x))
    return fmpq(f.numerator, f.denominator)


def _farkas_solution(prog: ExactProgram, norm: str, program: str,
                     found: tuple[list[Fraction], list[Fraction]] | None = None) -> SVMSolution:  # fmt: skip
    """The infeasible verdict with its exact certificate; :class:`SolverError` when none exists."""
    D_in, Z_in, D_eq, Z_eq = prog.blocks()
    if found is None:
        d = D_in.shape[1]
        F = np.einsum("md,me->mde", D_in, Z_in).reshape(len(D_in), d * d)
        Fe = np.einsum("md,me->mde", D_eq, Z_eq).reshape(len(D_eq), d * d) if len(D_eq) else None
        lp = farkas_lp(F, np.ones(len(D_in)), Fe)
        if lp is None:
            raise SolverError(f"{program} SVM: the solver reports infeasible but the Farkas LP finds no certificate")
        found = exact_farkas(prog, lp[0], lp[1] if len(D_eq) else np.zeros(0))
        if found is None:
            raise SolverError(f"{program} SVM: the float Farkas certificate has no exact counterpart (undecided)")
    mu_x, nu_x = found
    mu = np.array([float(v) for v in mu_x])
    nu = np.array([float(v) for v in nu_x])
    comb = D_in.T @ (mu[:, None] * Z_in) + (D_eq.T @ (nu[:, None] * Z_eq) if len(D_eq) else 0.0)
    cert = {
        "kind": "farkas-exact",
        "verified": True,
        "residual": float(np.abs(comb).max()),
        "mu": [str(v) for v in mu_x],
        "nu": [str(v) for v in nu_x],
    }
    return SVMSolution(
        "infeasible", norm, program, None, None, None, kkt={"farkas_residual": cert["residual"]}, certificate=cert,
        farkas=mu, extra={"farkas_eq": nu, "m_eq": len(D_eq), "m_in": len(D_in)},
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- solve
def solve_eqsvm(
    D_in: Any,
    Z_in: Any,
    D_eq: Any,
    Z_eq: Any,
    norm: str = "fro",
    certify: bool = True,
    program: str = "ntp",
    *,
    exact: ExactProgram | None = None,
) -> SVMSolution:
    r"""Solve $\min\|W\|$ s.t. $d_c^\top Wz_c=0$ (EQ rows), $d_c^\top Wz_c\ge1$ (IN rows) (module docstring).

    ``norm``: ``"fro"`` (objective $\|W\|_F^2$; certificate ``"exact-kkt"``) or ``"nuc"`` (objective
    $\|W\|_\star$; certificate ``"duality-gap"``); ``certify=False`` gives float certificates (``"kkt-float"``,
    an unproved bracket). Infeasible: status ``"infeasible"``, the exact Farkas pair in ``farkas``,
    ``extra["farkas_eq"]`` and the certificate (always). ``exact``: the exact features
    (:func:`exact_program_from_integers`) when the true $d_c$, $z_c$ are not the float64 blocks themselves; the
    blocks must then be their correctly rounded values, and every certificate is for the exact features. Bad
    input (shapes, NaN/inf, unknown norm, exact features that do not round to the blocks) raises
    :class:`InputError`; a solver status other than optimal/infeasible, or an infeasible report without an exact
    certificate, raises :class:`SolverError`."""
    if norm not in NORMS:
        raise InputError(f"unknown norm {norm!r} for the equality SVM (choose from {', '.join(NORMS)})")
    D_in, Z_in, D_eq, Z_eq = check_input(D_in, Z_in, D_eq, Z_eq)
    m, d = len(D_in) + len(D_eq), D_in.shape[1]
    require(8.0 * 6 * m * d + 8.0 * 3 * m * (d * d + 1) + 400.0 * m * d * d + (64.0 * m * (2 * d + m) if certify
            else 0.0), f"the {program} SVM on {m} constraints")  # fmt: skip
    if exact is None:
        prog = exact_program(D_in, Z_in, D_eq, Z_eq)
    else:
        if not isinstance(exact, ExactProgram):
            raise InputError(f"exact must be an ExactProgram, got {type(exact).__name__}")
        same = exact.m_in == len(D_in) and exact.m_eq == len(D_eq) and exact.d == d
        if not (same and np.array_equal(exact.D, np.vstack([D_eq, D_in]))
                and np.array_equal(exact.Z, np.vstack([Z_eq, Z_in]))):  # fmt: skip
            raise InputError("the exact features do not round to the float blocks D_in, Z_in, D_eq, Z_eq given")
        prog = exact
    ex, ez = exponent(prog.D), exponent(prog.Z)
    if ex or ez:  # exact power-of-two rescaling: only the exponents of the exact features change
        prog = dataclasses.replace(prog, eD=prog.eD - ex, eZ=prog.eZ - ez,
                                   D=exact_ldexp(prog.D, ex, "D") if ex else prog.D,
                                   Z=exact_ldexp(prog.Z, ez, "Z") if ez else prog.Z)  # fmt: skip
    return unscale_solution(_solve(prog, norm=norm, certify=certify, program=program), Scale(ex, ez))


def _solve(prog: ExactProgram, norm: str, certify: bool, program: str) -> SVMSolution:
    """The program on its (rescaled) exact form: Frobenius by the working-set dual (:mod:`.eqdual`), nuclear and
    the working set's failures by cvxpy + Clarabel (:func:`_solve_clarabel`)."""
    m_in, m_eq = prog.m_in, prog.m_eq
    if m_in == 0:  # W = 0 meets every equality and is the least norm point
        return _trivial(prog, prog.d, norm, program)
    zero = ~_nonzero_rows(prog)[m_eq:]
    if zero.any():  # a constraint 0 >= 1
        mu = [Fraction(0)] * m_in
        mu[int(np.flatnonzero(zero)[0])] = Fraction(1)
        return _farkas_solution(prog, norm, program, (mu, [Fraction(0)] * m_eq))
    if norm == "fro":
        with blas_threads(1):  # small dense algebra: threads only add overhead
            sol = _solve_working_set(prog, certify, program)
        if sol is not None:
            return sol
    return _solve_clarabel(prog, norm, certify, program)


def _solve_working_set(prog: ExactProgram, certify: bool, program: str) -> SVMSolution | None:
    r"""Frobenius by :func:`attsvm.svm.eqdual.solve_eqdual`: the solution (certified when ``certify``; the
    returned $W$ is then the exact optimum correctly rounded, ``objective`` the exact $\|W\|_F^2$ rounded), the
    infeasible verdict when its ray has an exact Farkas counterpart, or None (undecided: the caller falls back)."""

    t0 = time.perf_counter()
    try:
        r = solve_eqdual(prog.D, prog.Z, prog.m_eq)
    except SolverError:
        return None
    if r.status == "ray":
        found = exact_farkas(prog, *r.ray)
        return None if found is None else _farkas_solution(prog, "fro", program, found)
    if r.status != "optimal":
        return None
    solve_seconds = time.perf_counter() - t0
    lam, nu, Wv = np.maximum(r.lam, 0.0), r.nu, r.W
    cert: dict[str, Any] = {"kind": "kkt-float", "verified": True}
    if certify:
        mi = r.margins[prog.m_eq :]
        cert = certify_enclosure(prog, lam, mi) if r.passive.size > EXACT_KKT_MAX else {"verified": False}
        if not cert["verified"]:  # small, or degenerate for the enclosure: exact rationals decide
            cert = certify_kkt(prog, lam, mi, passive=r.passive)
        Wx = cert.pop("W_float", None)
        if cert["verified"] and Wx is not None:
            Wv = Wx
    return _optimal(prog, "fro", program, Wv, lam, nu, cert, solve_seconds)


def _optimal(prog: ExactProgram, norm: str, program: str, Wv: np.ndarray, lam: np.ndarray, nu: np.ndarray,
             cert: dict[str, Any], solve_seconds: float, dual_min: float = 0.0) -> SVMSolution:  # fmt: skip
    r"""The optimal :class:`SVMSolution` of the point ``Wv`` with multipliers ``lam`` (m_in,), ``nu`` (m_eq,) and
    certificate ``cert``: margins and named KKT residuals recomputed from ``Wv``; ``objective`` the certified value
    when there is one (Frobenius: the exact optimum rounded; nuclear: the proved upper bound rounded down), else
    the float norm of ``Wv``. ``dual_min``: the smallest raw dual value the solver returned (its dual feasibility)."""
    D_in, Z_in, D_eq, Z_eq = prog.blocks()
    mi = np.einsum("md,de,me->m", D_in, Wv, Z_in)
    me = np.einsum("md,de,me->m", D_eq, Wv, Z_eq)
    M = D_in.T @ (lam[:, None] * Z_in) + (D_eq.T @ (nu[:, None] * Z_eq) if prog.m_eq else 0.0)
    tiny = np.finfo(float).tiny
    common = {
        "primal_feasibility": float(max(0.0, 1.0 - mi.min())),
        "equality_residual": float(np.abs(me).max(initial=0.0)),
        "dual_feasibility": float(max(0.0, -dual_min)),
    }
    if norm == "fro":
        certified = cert.get("kind") in ("exact-kkt", "rigorous-enclosure") and cert["verified"]
        obj = cert["value"] if certified else float(np.sum(Wv * Wv))
        sc = max(obj, tiny)
        kkt = dict(common, complementary_slackness=float(np.abs(lam * (mi - 1.0)).max() / max(1.0, float(lam.max()))),
                   stationarity=float(np.linalg.norm(Wv - M) / np.sqrt(sc)),
                   objective_identity=float(abs(obj - lam.sum()) / sc))  # fmt: skip
        if cert.get("kind") == "kkt-float":
            cert["verified"] = bool(max(kkt.values()) <= tol("kkt"))
    else:
        obj = cert.pop("objective_float", None)
        if obj is None:
            obj = float(np.linalg.svd(Wv, compute_uv=False).sum())
        dual = float(lam.sum())
        sc = max(obj, tiny)
        kkt = dict(common, complementary_slackness=float(np.abs(lam * (mi - 1.0)).sum() / max(dual, tiny)),
                   stationarity=float(abs(np.sum(M * Wv) - obj) / sc),
                   duality_gap=float(abs(obj - dual) / sc))  # fmt: skip
    cert["solve_seconds"] = solve_seconds
    if cert.get("kind") in ("exact-kkt", "rigorous-enclosure") and cert["verified"]:
        active = cert["active"]
    else:
        active = [int(j) for j in np.flatnonzero(np.abs(mi - 1.0) <= tol("active"))]
    return SVMSolution(
        "optimal", norm, program, None, Wv, obj, mi, lam, [(0, j) for j in active], kkt=kkt, certificate=cert,
        extra={"eq_margins": me, "eq_multipliers": nu, "m_eq": prog.m_eq, "m_in": prog.m_in},
    )  # fmt: skip


def _solve_clarabel(prog: ExactProgram, norm: str, certify: bool, program: str) -> SVMSolution:
    """cvxpy + Clarabel on the IN rows and a basis of the EQ rows (the nuclear program, and the Frobenius one when
    the working set is undecided); infeasible verdicts through the Farkas LP. A certified nuclear solve returns
    the point its proved upper bound is about (the float solution projected onto the equalities and scaled to
    margin 1, exactly, then rounded)."""
    import cvxpy as cp

    D_in, Z_in, D_eq, Z_eq = prog.blocks()
    m_eq, d = prog.m_eq, prog.d
    t0 = time.perf_counter()
    W = cp.Variable((d, d))
    cons = [margins_expr(D_in, W, Z_in) >= 1]
    keep = independent_equalities(prog)
    if keep.size:
        cons.append(margins_expr(D_eq[keep], W, Z_eq[keep]) == 0)
    objective = 0.5 * cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)
    status = _clarabel(cp.Problem(cp.Minimize(objective), cons), f"{program} SVM ({norm})")
    if status == "infeasible":
        return _farkas_solution(prog, norm, program)
    solve_seconds = time.perf_counter() - t0
    Wv = np.asarray(W.value, dtype=float)
    dual_min = float(np.min(cons[0].dual_value))
    lam = np.maximum(np.asarray(cons[0].dual_value, dtype=float).ravel(), 0.0)
    # cvxpy's Lagrangian carries +nu * (margin) for an equality: W = sum lam A - sum dual A, so nu = -dual
    nu = np.zeros(m_eq)
    if keep.size:
        nu[keep] = -np.asarray(cons[1].dual_value, dtype=float).ravel()
    mi = np.einsum("md,de,me->m", D_in, Wv, Z_in)
    if norm == "fro":
        cert = certify_kkt(prog, lam, mi) if certify else {"kind": "kkt-float", "verified": True}
        Wx = cert.pop("W_float", None)
        if cert["verified"] and Wx is not None:
            Wv = Wx
        return _optimal(prog, norm, program, Wv, lam, nu, cert, solve_seconds, dual_min)
    if 0 < mi.min() < 1:  # interior-point points are feasible to ~1e-9: onto the feasible set
        Wv = Wv / mi.min()
    M = D_in.T @ (lam[:, None] * Z_in) + (D_eq.T @ (nu[:, None] * Z_eq) if m_eq else 0.0)
    s = float(np.linalg.norm(M, 2))
    if s > 0:
        lam, nu = lam / s, nu / s
    if certify:
        cert = certify_nuclear(prog, Wv, lam, nu)
        Wx = cert.pop("W_float", None)
        if Wx is not None:
            Wv = Wx
    else:
        obj = float(np.linalg.svd(Wv, compute_uv=False).sum())
        dual = float(lam.sum())
        cert = {"kind": "duality-gap", "verified": False, "proved": False, "lower": dual, "upper": obj,
                "rel_gap": (obj - dual) / obj if obj > 0 else 0.0}  # fmt: skip
    return _optimal(prog, norm, program, Wv, lam, nu, cert, solve_seconds, dual_min)


#: Clarabel settings tried in turn when the solver fails numerically (dependent inequality rows, which next-token
#: constraints with K > d always have, can break its first factorisation; without equilibration or with a larger
#: static regularisation it goes through)
_RETRIES: tuple[dict[str, Any], ...] = ({}, {"equilibrate_enable": False}, {"static_regularization_constant": 1e-7})


def _clarabel(prob, what: str) -> str:
    """:func:`attsvm.svm.cvx.solve` with the fallback settings ``_RETRIES``; the last failure is raised."""
    for extra in _RETRIES[:-1]:
        try:
            return solve(prob, what, **extra)
        except SolverError:
            continue
    return solve(prob, what, **_RETRIES[-1])


def _trivial(prog: ExactProgram, d: int, norm: str, program: str) -> SVMSolution:
    """No inequality: $W=0$ (objective 0), with its exact certificate (0 <= OPT <= ||0|| = 0)."""
    m_eq = prog.m_eq
    if norm == "fro":
        res = verify_kkt(prog, [0] * m_eq, [])
        cert: dict[str, Any] = {"kind": "exact-kkt", "verified": bool(res["verified"]), "checks": res["checks"],
                                "active": [], "multipliers": [], "value": 0.0, "value_str": "0",
                                "W": [["0"] * d for _ in range(d)], "reason": "no inequality constraints"}  # fmt: skip
        keys = ("primal_feasibility", "equality_residual", "dual_feasibility", "complementary_slackness",
                "stationarity", "objective_identity")  # fmt: skip
    else:
        cert = dict(kind="duality-gap", **proved_bracket(Fraction(0), Fraction(0), tol("nuc_gap")),
                    reason="no inequality constraints")  # fmt: skip
        keys = ("primal_feasibility", "equality_residual", "dual_feasibility", "complementary_slackness",
                "stationarity", "duality_gap")  # fmt: skip
    return SVMSolution(
        "optimal", norm, program, None, np.zeros((d, d)), 0.0, np.zeros(0), np.zeros(0), [],
        kkt=dict.fromkeys(keys, 0.0), certificate=cert,
        extra={"eq_margins": np.zeros(m_eq), "eq_multipliers": np.zeros(m_eq), "m_eq": m_eq, "m_in": 0},
    )  # fmt: skip
