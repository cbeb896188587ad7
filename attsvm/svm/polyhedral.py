r"""Entrywise ℓ1 and ℓ∞ Att-SVMs: linear programs with an exact rational optimality certificate (THEORY §2, §6).

.. math:: W^{mm}_{N,\alpha}\in\arg\min\|W\|_N\quad\text{s.t.}\quad\langle W,A_j\rangle\ge1\ \ \forall j,
   \qquad \|W\|_1=\sum_{ab}|W_{ab}|,\quad \|W\|_{\max}=\max_{ab}|W_{ab}|,

with $A_j=D_jz_j^\top$ the constraint features of the selection (:func:`~attsvm.svm.constraints.build`) and
$F\in\mathbb R^{m\times d^2}$ their rows $F_j=\mathrm{vec}A_j$, so $\langle W,A_j\rangle=F_jw$, $w=\mathrm{vec}W$.

**Duals.** $\max_{\lambda\ge0}\mathbf 1^\top\lambda$ s.t. $\|M\|_{N^*}\le1$, $M=\sum_j\lambda_jA_j$, with
$N^*=\max$ (entrywise ℓ∞) for $N=1$ and $N^*=1$ for $N=\max$. Weak duality: for feasible $W$ and
dual-feasible $\lambda$,
$\|W\|_N\ge\|W\|_N\|M\|_{N^*}\ge\langle W,M\rangle=\sum_j\lambda_j\langle W,A_j\rangle\ge\mathbf 1^\top\lambda$;
so an exact pair with $\|W\|_N=\mathbf 1^\top\lambda$ proves both optimal.

**Linear programs** (scipy ``linprog``, ``method="highs"``, one dense constraint matrix):

- ℓ1: $W=P-N$, $\min\mathbf 1^\top(P+N)$ s.t. $F(P-N)\ge\mathbf 1$, $P,N\ge0$; $\lambda$ = the row duals.
- ℓ∞, in its homogeneous (max-margin) form: $\max s$ s.t. $Fv\ge s\mathbf 1$, $-1\le v\le1$; then
  $W=v/s^\ast$, optimum $1/s^\ast$ ($s^\ast\le0$: infeasible), and the row duals $\mu$ ($\mathbf 1^\top\mu=1$)
  give $\lambda=\mu/s^\ast$.

**Exact certificate** (``certify=True``; :func:`certify_lp`). A vertex of the LP is fixed by its basis, read off
the HiGHS solution: for ℓ1 the support $E$ of $W$ with signs $\sigma_E$ and $|E|$ active constraints $J$; for ℓ∞
the saturated entries $S$ ($|W_e|=\|W\|_{\max}$, signs $\sigma_S$), the free entries $I$ and $|I|+1$ active
constraints $J$. With reduced variables $y$ ($y=|W_E|$, resp. $y=(W_I,\|W\|_{\max})$, $w=\Phi y$) and $B=F_J\Phi$
square, the basis equations

.. math:: By=\mathbf 1_J,\qquad B^\top\lambda_J=c\quad(c=\mathbf 1_E,\ \text{resp.}\ c=(0_I,1)),\qquad\lambda_{J^c}=0

are solved in exact rationals (python-flint, on the integer form of the binary data, :mod:`.exact`), and the
resulting pair is verified exactly by :func:`verify_lp`: every margin $\ge1$, $\lambda\ge0$, $\|M\|_{N^*}\le1$,
and $\|W\|_N=\mathbf 1^\top\lambda$ (zero gap). Kind ``"lp-basis"``, with the exact optimum in ``value``.
When the basis is degenerate or the exact solve fails, a proved bracket instead (kind ``"lp-bracket"``):
upper $=\|W\|_N/\min_j\langle W,A_j\rangle$ for the float $W$ (exact margins), lower
$=\mathbf 1^\top\lambda/\|M(\lambda)\|_{N^*}$ for the float $\lambda\ge0$ (exact $M$); verified when the relative
gap is at most ``tol("norm_gap")``. Infeasible selections get the exact Farkas vector of :mod:`.farkas`.
"""

from __future__ import annotations

import math
import sys
import time
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.linalg import qr
from scipy.optimize import linprog

from ..data import Dataset
from ..errors import InputError, SolverError
from ..norms import matrix_norms
from ..tolerances import tol
from .budget import estimate, require
from .certificate import MAX_EXACT_DIGITS
from .constraints import Constraints, build, program_of
from .exact import exact_features, fmpz_matrix, pow2, to_integers
from .farkas import infeasible_solution, proved_infeasible, zero_feature_certificate
from .scaling import normalised, unscale_solution
from .solution import SVMSolution
from .spectral import proved_bracket, round_down, round_up

__all__ = ["NORMS", "bracket_lp", "certify_lp", "exact_rows", "lp_norm", "max_margin", "solve_polyhedral", "verify_lp"]

#: the programs of this module and the dual norm of each (entrywise ℓ∞ = ``max``, entrywise ℓ1 = ``l1``)
NORMS = ("l1", "linf")
DUAL = {"l1": "linf", "linf": "l1"}
#: relative thresholds that read the basis off the HiGHS solution (an entry is nonzero / saturated, a margin
#: is active); the exact solve and verification decide, these only choose which equations to solve
_ZERO = 1e-9
_ACTIVE = 1e-9
#: dual simplex steps tried (in exact arithmetic) when the basis read off the float solution is not primal feasible
_REPAIRS = 20
#: larger bases are not solved exactly (the proved bracket is used instead)
EXACT_MAX_BASIS = 400


def lp_norm(W: Any, norm: str) -> Any:
    r"""$\|W\|_1=\sum|W_{ab}|$ (``"l1"``) or $\|W\|_{\max}=\max|W_{ab}|$ (``"linf"``), in floating point."""
    return float(matrix_norms(W, norm))


def exact_rows(ds: Dataset, cons: Constraints) -> tuple[np.ndarray, int]:
    r"""$(F^{\mathbb Z},s)$ with $F_j=\mathrm{vec}A_j=F^{\mathbb Z}_j\,2^{s}$ exactly: an (m, d²) object array of
    Python ints (row-major $\mathrm{vec}$, entry $(a,b)$ at $a d+b$) and the exponent $s=e_D+e_Z$."""
    Dn, eD, Zn, eZ = exact_features(ds, cons)
    m, d = Dn.shape
    return (Dn[:, :, None] * Zn[:, None, :]).reshape(m, d * d), eD + eZ


def _frac(x: Any) -> Fraction:
    """An exact Fraction of an int, Fraction, binary float (a dyadic rational, exactly) or ``"p/q"`` string."""
    return Fraction(x) if isinstance(x, (int, float, Fraction)) else Fraction(str(x))


def _matvec(Fm, vec: list[int]) -> list[int]:
    from flint import fmpz_mat

    return [int(x) for x in (Fm * fmpz_mat(len(vec), 1, vec)).entries()]


def _fits(x: Fraction) -> bool:
    """Whether ``str(x)`` works (Python refuses int -> str conversions beyond ``sys.get_int_max_str_digits()``)."""
    lim = sys.get_int_max_str_digits()
    big = max(abs(x.numerator), x.denominator).bit_length()
    return lim == 0 or big * 0.30103 < lim - 10


def _check(Fm, s: int, norm: str, Wn: list[int], qW: int, Ln: list[int], qL: int) -> dict[str, Any]:
    r"""The exact checks of :func:`verify_lp` on $W=W^{\mathbb Z}/q_W$, $\lambda=L^{\mathbb Z}/q_L$ (integers; the
    powers of two of $A_j=F^{\mathbb Z}_j2^{s}$ are applied by shifts, so every comparison is between integers);
    ``Fm`` is $F^{\mathbb Z}$ as an ``fmpz_mat``."""
    mg = _matvec(Fm, Wn)  # margin_j = mg_j 2^s / qW
    if s >= 0:
        primal = all((x << s) >= qW for x in mg)
    else:
        primal = all(x >= (qW << -s) for x in mg)
    Mn = [abs(x) for x in _matvec(Fm.transpose(), Ln)]  # M_e = Mn_e 2^s / qL
    dn_num = max(Mn, default=0) if norm == "l1" else sum(Mn)  # ||M||_{N*} = dn_num 2^s / qL
    dual_norm_ok = (dn_num << s) <= qL if s >= 0 else dn_num <= (qL << -s)
    nonneg = all(x >= 0 for x in Ln)
    pv = sum(abs(x) for x in Wn) if norm == "l1" else max((abs(x) for x in Wn), default=0)  # ||W||_N = pv / qW
    dv = sum(Ln)  # 1^T lambda = dv / qL
    zero_gap = pv * qL == dv * qW
    ok = primal and nonneg and dual_norm_ok and zero_gap
    mn = min(mg, default=0)
    return {
        "verified": bool(ok),
        "primal_feasible_proved": bool(primal),
        "dual_feasible_proved": bool(nonneg and dual_norm_ok),
        "multipliers_nonnegative": bool(nonneg),
        "dual_norm": Fraction(dn_num, qL) * pow2(s),
        "min_margin": Fraction(mn, qW) * pow2(s),
        "primal_value": Fraction(pv, qW),
        "dual_value": Fraction(dv, qL),
        "zero_gap": bool(zero_gap),
        "value": Fraction(pv, qW) if ok else None,
    }


def verify_lp(ds: Dataset, cons: Constraints, norm: str, W: Any, lam: Any) -> dict[str, Any]:
    r"""Exact check that ``W`` (d, d) and ``lam`` (m,) - Fractions, ints, binary floats or ``"p/q"`` strings - are
    an optimal primal-dual pair of the ``norm`` Att-SVM on the constraints ``cons`` of ``ds`` (module docstring):

    * ``primal_feasible_proved``: $\langle W,A_j\rangle\ge1$ for every $j$ (``min_margin``, exact);
    * ``dual_feasible_proved``: $\lambda\ge0$ and $\|\sum_j\lambda_jA_j\|_{N^*}\le1$ (``dual_norm``, exact);
    * ``zero_gap``: $\|W\|_N=\mathbf 1^\top\lambda$ (``primal_value``, ``dual_value``, exact).

    ``verified`` is all three; then ``value`` is the exact optimum (a Fraction). Everything is computed in integers
    on the binary data (python-flint products), never in floating point."""
    if norm not in NORMS:
        raise InputError(f"verify_lp: norm must be one of {NORMS}, got {norm!r}")
    F, s = exact_rows(ds, cons)
    w = [_frac(x) for x in np.asarray(W, dtype=object).ravel().tolist()]
    lm = [_frac(x) for x in np.asarray(lam, dtype=object).ravel().tolist()]
    if len(w) != F.shape[1] or len(lm) != cons.m:
        raise InputError(f"verify_lp: W must have {F.shape[1]} entries and lam {cons.m}, got {len(w)} and {len(lm)}")
    qW = math.lcm(1, *(x.denominator for x in w))
    qL = math.lcm(1, *(x.denominator for x in lm))
    return _check(fmpz_matrix(F), s, norm, [int(x * qW) for x in w], qW, [int(x * qL) for x in lm], qL)


def _column(X, j: int):
    """Column ``j`` of an ``fmpq_mat`` as a (rows, 1) ``fmpq_mat``."""
    from flint import fmpq_mat

    return fmpq_mat(X.nrows(), 1, [X[i, j] for i in range(X.nrows())])


_Pair = tuple[list[int], int, list[int], int, int, int]


def _basis_pair(F: np.ndarray, Ff: np.ndarray, s: int, norm: str, W: np.ndarray, v_sat: np.ndarray | None,
                lam: np.ndarray, margins: np.ndarray) -> _Pair | str:  # fmt: skip
    r"""The exact pair of the basis equations (module docstring) as $(W^{\mathbb Z},q_W,L^{\mathbb Z},q_L,k,r)$ with
    $W=W^{\mathbb Z}/q_W$, $\lambda=L^{\mathbb Z}/q_L$, $k$ the basis size, $r$ the repair steps; a reason string when
    none is found.

    The basis rows $J$: the active constraints with the largest multipliers (or $k$ independent ones by pivoted QR);
    when the basis point violates a constraint exactly, dual simplex steps in exact arithmetic (the most violated
    row enters, the ratio test picks the leaving one) repair it."""
    from flint import fmpz_mat

    w = W.ravel()
    p = w.size
    col = np.full(p, -1, dtype=np.int64)  # w_e = sgn_e * y_col(e); col -1: w_e = 0 (nonbasic)
    sgn = np.sign(w).astype(np.int64)
    if norm == "l1":
        E = np.flatnonzero(np.abs(w) > _ZERO * np.abs(w).max())
        k = E.size
        col[E] = np.arange(k)
        c = [1] * k
    else:
        I = np.flatnonzero(~v_sat)
        k = I.size + 1
        col[I] = np.arange(I.size)
        sgn[I] = 1
        col[v_sat] = k - 1
        c = [0] * (k - 1) + [1]
    if k > EXACT_MAX_BASIS:
        return f"basis of {k} variables (exact solve limited to {EXACT_MAX_BASIS})"
    Phi = np.zeros((p, k), dtype=np.int64)
    on = np.flatnonzero(col >= 0)
    Phi[on, col[on]] = sgn[on]
    active = np.flatnonzero(np.abs(margins - 1.0) <= _ACTIVE)
    if active.size < k:
        return f"degenerate basis: {active.size} active constraints for {k} basic variables"
    order = active[np.argsort(-lam[active], kind="stable")]
    choices = [order[:k]]
    if order.size > k:  # a second choice: k independent rows by pivoted QR
        _, _, piv = qr((Ff[order] @ Phi).T, pivoting=True, mode="economic")
        choices.append(np.sort(order[piv[:k]]))
    # G = F Phi (m, k), the rows F_j Phi in integers (A_j Phi = G_j 2^s): Phi has one +-1 per nonzero row
    Go = np.zeros((len(F), k), dtype=object)
    for i in range(k):
        e = on[col[on] == i]
        Go[:, i] = (F[:, e] * sgn[e].astype(object)).sum(axis=1) if e.size > 1 else F[:, e[0]] * int(sgn[e[0]])
    G = fmpz_matrix(Go)
    rows = Go.tolist()
    for J0 in choices:
        J = [int(j) for j in J0]
        found = None
        steps = 0
        for _ in range(_REPAIRS):
            B = fmpz_mat(k, k, [x for j in J for x in rows[j]])
            try:
                y = B.solve(fmpz_mat(k, 1, [1] * k))
            except ZeroDivisionError:
                break
            # exact margins G_j y (the powers of two cancel): the basis point is primal feasible iff all >= 1
            yn, yq = y.numer_denom()
            mg = [int(x) for x in (G * yn).entries()]
            r = min(range(len(mg)), key=mg.__getitem__)
            feasible = mg[r] >= int(yq)
            # B^T lambda_J = c and, for a dual simplex step, B^T a = G_r^T (row r enters), in one solve
            rhs = [[ci] for ci in c] if feasible else [[ci, gi] for ci, gi in zip(c, rows[r])]
            X = B.transpose().solve(fmpz_mat(rhs))
            lj = X if feasible else _column(X, 0)
            lv = lj.entries()
            if feasible or any(x < 0 for x in lv):
                found = yn, int(yq), lj
                break
            a = _column(X, 1).entries()
            pos = [i for i in range(k) if a[i] > 0]  # the ratio test keeps lambda >= 0
            if not pos:
                found = yn, int(yq), lj
                break
            J[min(pos, key=lambda i: lv[i] / a[i])] = r
            steps += 1
        if found is None:
            continue
        yn, yq, lj = found
        ln, lq = lj.numer_denom()
        yv, lv = [int(x) for x in yn.entries()], [int(x) for x in ln.entries()]
        # y_true = (yn / yq) 2^-s, lambda_true = (ln / lq) 2^-s; fold the power of two into one side
        Wn = [int(sgn[e]) * yv[col[e]] if col[e] >= 0 else 0 for e in range(p)]
        Ln = [0] * F.shape[0]
        for j, x in zip(J, lv):
            Ln[j] = x
        qW, qL = int(yq), int(lq)
        if s >= 0:
            qW, qL = qW << s, qL << s
        else:
            Wn, Ln = [x << -s for x in Wn], [x << -s for x in Ln]
        return Wn, qW, Ln, qL, k, steps
    return "singular basis matrix, or no primal feasible basis within the repair steps"


def bracket_lp(ds: Dataset, cons: Constraints, norm: str, W: np.ndarray, lam: np.ndarray) -> dict[str, Any]:
    r"""A proved bracket on the ``norm`` Att-SVM optimum from a float pair (kind ``"lp-bracket"``, module
    docstring): ``upper`` $=\|W\|_N/\min_j\langle W,A_j\rangle$ (exact margins of the binary float $W$: $W/\min$ is
    feasible), ``lower`` $=\mathbf 1^\top\lambda/\|M(\lambda)\|_{N^*}$ for $\lambda\ge0$ (clipped; exact $M$:
    $\lambda/\|M\|_{N^*}$ is dual feasible), both rounded outwards; ``rel_gap`` $=(\text{upper}-\text{lower})/
    \text{upper}$; ``verified`` when both proofs hold and ``rel_gap <= tol("norm_gap")``."""
    t0 = time.perf_counter()
    F, s = exact_rows(ds, cons)
    Fm = fmpz_matrix(F)
    Wn, _ = to_integers(np.asarray(W, dtype=float).ravel())
    Wn = [int(x) for x in Wn]
    mu = min(_matvec(Fm, Wn), default=0)  # min margin = mu 2^(s + eW)
    primal_ok = mu > 0
    pv = sum(abs(x) for x in Wn) if norm == "l1" else max(abs(x) for x in Wn)  # ||W||_N = pv 2^eW
    upper = Fraction(pv, mu) * pow2(-s) if primal_ok else None
    Ln, eL = to_integers(np.where(np.asarray(lam, dtype=float) > 0, lam, 0.0))
    Ln = [int(x) for x in Ln]
    Mn = [abs(x) for x in _matvec(Fm.transpose(), Ln)]  # M = Mn 2^(s + eL)
    dn = max(Mn, default=0) if norm == "l1" else sum(Mn)
    lower = Fraction(sum(Ln), dn) * pow2(-s) if dn > 0 else Fraction(0)
    return {
        "kind": "lp-bracket",
        **proved_bracket(lower, upper, tol("norm_gap")),
        "primal_feasible_proved": bool(primal_ok),
        "dual_feasible_proved": True,
        "seconds": time.perf_counter() - t0,
    }


def _exact_str(n: int, q: int) -> str:
    from flint import fmpq

    return str(fmpq(n, q))  # FLINT prints integers of any size (Python's str(int) stops at 4300 digits)


def certify_lp(ds: Dataset, cons: Constraints, norm: str, W: np.ndarray, lam: np.ndarray,
               v_sat: np.ndarray | None = None) -> dict[str, Any]:  # fmt: skip
    r"""The exact certificate of a float LP solution ``(W, lam)`` (module docstring).

    Kind ``"lp-basis"`` when the basis equations give a pair that the exact checks accept: ``value`` (the exact
    optimum, a Fraction; None, with ``value_omitted``, when too long to print in Python), ``value_str``, ``lower`` =
    ``upper`` (the floats around it), ``rel_gap`` 0, ``basis_size``, exact ``W`` (d x d) and ``multipliers``
    ($[i,t,\text{"p/q"}]$, the nonzero ones) as strings (omitted above ``MAX_EXACT_DIGITS`` digits). Otherwise
    :func:`bracket_lp` (kind ``"lp-bracket"``) with ``basis_failed`` saying why. ``v_sat`` (ℓ∞ only): the
    saturated entries $|W_e|=\|W\|_{\max}$, default read off ``W``."""
    t0 = time.perf_counter()
    F, s = exact_rows(ds, cons)
    mg = cons.margins(W)
    if norm == "linf" and v_sat is None:
        v_sat = np.abs(W.ravel()) >= (1.0 - _ZERO) * np.abs(W).max()
    pair = _basis_pair(F, _feature_rows(cons), s, norm, W, v_sat, np.asarray(lam, dtype=float), mg / mg.min())
    if isinstance(pair, str):
        reason = pair
    else:
        Wn, qW, Ln, qL, k, steps = pair
        chk = _check(fmpz_matrix(F), s, norm, Wn, qW, Ln, qL)
        if chk["verified"]:
            val = chk["value"]
            tok = np.asarray(cons.tok).reshape(-1)
            d = W.shape[1]
            out: dict[str, Any] = {
                "kind": "lp-basis",
                "verified": True,
                "proved": True,
                "value": val if _fits(val) else None,
                "value_str": _exact_str(val.numerator, val.denominator),
                "lower": round_down(val),
                "upper": round_up(val),
                "rel_gap": 0.0,
                "primal_feasible_proved": True,
                "dual_feasible_proved": True,
                "zero_gap": True,
                "basis_size": int(k),
                "repairs": int(steps),
            }
            if out["value"] is None:
                out["value_omitted"] = "the exact value is too long for Python's int -> str limit; see value_str"
            digits = int((qW.bit_length() + qL.bit_length()) * 0.30103 + 10) * (k + d * d)
            if digits <= MAX_EXACT_DIGITS:
                out["W"] = [[_exact_str(Wn[r * d + e], qW) for e in range(d)] for r in range(W.shape[0])]
                out["multipliers"] = [[int(cons.row[j]), int(tok[j]), _exact_str(x, qL)] for j, x in enumerate(Ln) if x]
            else:
                out["W"] = out["multipliers"] = None
                out["omitted"] = f"exact W and multipliers omitted (about {digits} digits)"
            out["seconds"] = time.perf_counter() - t0
            return out
        failed = [n for n in ("primal_feasible_proved", "dual_feasible_proved", "zero_gap") if not chk[n]]
        reason = "the basis pair fails the exact check: not " + ", ".join(failed)
    out = bracket_lp(ds, cons, norm, W, lam)
    out["basis_failed"] = reason
    out["seconds"] = time.perf_counter() - t0
    return out


def _feature_rows(cons: Constraints) -> np.ndarray:
    r"""$F$ (m, d²), rows $\mathrm{vec}A_j$ (row-major), in floating point."""
    return (cons.D[:, :, None] * cons.Zc[:, None, :]).reshape(cons.m, -1)


def _highs(what: str, **kw: Any):
    res = linprog(method="highs", **kw)
    if res.status not in (0, 2):
        raise SolverError(f"{what}: HiGHS status {res.status} ({res.message})")
    return res


def _lp(cons: Constraints, norm: str) -> tuple[str, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(status, W, lam, saturated mask) of the float LP (module docstring); status ``"optimal"`` or
    ``"infeasible"``."""
    F = _feature_rows(cons)
    m, p = F.shape
    d = cons.D.shape[1]
    if norm == "l1":
        res = _highs("l1 Att-SVM LP", c=np.ones(2 * p), A_ub=np.hstack([-F, F]), b_ub=-np.ones(m), bounds=(0, None))
        if res.status == 2:
            return "infeasible", None, None, None
        x = np.asarray(res.x, dtype=float)
        lam = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=float), 0.0)
        return "optimal", (x[:p] - x[p:]).reshape(d, d), lam, None
    s_star, v, mu = max_margin(cons, F)
    if s_star is None:
        return "infeasible", None, None, None
    return "optimal", (v / s_star).reshape(d, d), mu / s_star, np.abs(v) >= 1.0 - _ZERO


def max_margin(cons: Constraints, F: np.ndarray | None = None) -> tuple[float | None, np.ndarray, np.ndarray]:
    r"""The ℓ∞ program in homogeneous form, $\max s$ s.t. $Fv\ge s\mathbf 1$, $-1\le v\le1$ (HiGHS): $(s^\ast,v,\mu)$
    with $\mu\ge0$ the row duals ($\mathbf 1^\top\mu=1$); $s^\ast$ None when it is 0 to rounding, i.e. no $W$ has
    every margin $>0$ (Att-SVM($\alpha$) infeasible: $\mu$ is then a float Farkas vector, $\sum\mu_jA_j\approx0$)."""
    F = _feature_rows(cons) if F is None else F
    m, p = F.shape
    c = np.zeros(p + 1)
    c[-1] = -1.0
    res = _highs(
        "linf Att-SVM LP",
        c=c,
        A_ub=np.hstack([-F, np.ones((m, 1))]),
        b_ub=np.zeros(m),
        bounds=[(-1.0, 1.0)] * p + [(None, None)],
    )
    if res.status != 0:  # always feasible ((v, s) = 0) and bounded
        raise SolverError(f"linf Att-SVM LP: HiGHS status {res.status} ({res.message})")
    x = np.asarray(res.x, dtype=float)
    mu = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=float), 0.0)
    s_star = float(x[-1])
    # the largest margin any |v| <= 1 can reach is max_j ||F_j||_1: s* below a rounding of it means s* = 0
    if not s_star > 1e-12 * float(np.abs(F).sum(axis=1).max()):
        return None, x[:p], mu
    return s_star, x[:p], mu


def solve_polyhedral(ds: Dataset, norm: str, alpha=None, certify: bool = False) -> SVMSolution:
    r"""Solve the entrywise ℓ1 (``norm="l1"``) or ℓ∞ (``"linf"``) Att-SVM($\alpha$) for one data set (sequence and
    causal data through the flat view).

    ``W`` feasible (minimum margin $\ge1$), ``objective`` $\|W\|_N$, ``multipliers`` $\lambda$ (the LP row duals),
    ``kkt``: ``primal_feasibility``, ``dual_feasibility``, ``complementary_slackness``, ``dual_norm``
    ($\|M\|_{N^*}-1$), ``stationarity`` ($|\langle M,W\rangle-\|W\|_N|/\|W\|_N$), ``duality_gap``. Certificate:
    ``"kkt-float"`` (float residuals within ``tol("kkt")``), or with ``certify`` the exact ``"lp-basis"`` /
    proved ``"lp-bracket"`` of :func:`certify_lp`. Infeasible: status ``"infeasible"``, exact Farkas vector in
    ``farkas``. Very large or small data are rescaled exactly first (:mod:`.scaling`)."""
    if norm not in NORMS:
        raise InputError(f"solve_polyhedral: norm must be one of {', '.join(NORMS)}, got {norm!r}")
    if ds.batched:
        raise InputError("solve_polyhedral takes a single data set (iterate over the batch)")
    require(estimate(ds, norm, "attsvm", certify), f"{norm} Att-SVM of this data set")
    scaled, scale = normalised(ds)
    return unscale_solution(_solve(scaled, norm, alpha, certify), scale)


def _solve(ds: Dataset, norm: str, alpha, certify: bool) -> SVMSolution:
    cons = build(ds, alpha)
    program = program_of(ds.kind)
    a = np.asarray(cons.alpha)
    d = ds.d
    keys = ("primal_feasibility", "dual_feasibility", "complementary_slackness", "dual_norm", "stationarity",
            "duality_gap")  # fmt: skip
    if cons.m == 0:  # no constraints (T = 1): W = 0, and 0 <= OPT <= ||0|| = 0
        cert = {"kind": "lp-basis" if certify else "kkt-float", "verified": True, "proved": True, "lower": 0.0,
                "upper": 0.0, "rel_gap": 0.0, "reason": "no constraints"}  # fmt: skip
        if certify:
            cert.update(value=Fraction(0), value_str="0", W=[["0"] * d for _ in range(d)], multipliers=[])
        return SVMSolution(
            "optimal", norm, program, a, np.zeros((d, d)), 0.0, cons.to_grid(np.zeros(0), np.nan),
            cons.to_grid(np.zeros(0)), kkt=dict.fromkeys(keys, 0.0), certificate=cert,
        )  # fmt: skip
    zero = zero_feature_certificate(cons)
    if zero is not None:  # a constraint 0 >= 1: infeasible, exactly
        return infeasible_solution(cons, norm, program, a, *zero)
    t0 = time.perf_counter()
    status, W, lam, sat = _lp(cons, norm)
    if status == "infeasible":
        mu, cert = proved_infeasible(ds, cons, f"{norm} Att-SVM")
        return infeasible_solution(cons, norm, program, a, mu, cert)
    seconds = time.perf_counter() - t0
    mg = cons.margins(W)
    if 0 < mg.min() < 1:  # HiGHS meets the rows to ~1e-9: rescale onto the feasible set (an upper bound)
        W = W / mg.min()
        mg = cons.margins(W)
    obj = lp_norm(W, norm)
    M = cons.combine(lam)
    dn = lp_norm(M, DUAL[norm])
    dual = float(lam.sum())
    kkt = {
        "primal_feasibility": float(max(0.0, 1.0 - mg.min())),
        "dual_feasibility": 0.0,  # the multipliers are clipped at 0
        "complementary_slackness": float(np.abs(lam * (mg - 1.0)).max() / max(dual, 1e-300)),
        "dual_norm": float(dn - 1.0),
        "stationarity": float(abs(np.sum(M * W) - obj) / max(obj, 1e-300)),
        "duality_gap": float(abs(obj - dual) / max(obj, 1e-300)),
    }
    if certify:
        cert = certify_lp(ds, cons, norm, W, lam, sat)
    else:
        ok = max(kkt["primal_feasibility"], kkt["dual_norm"], kkt["stationarity"], kkt["duality_gap"]) <= tol("kkt")
        cert = {"kind": "kkt-float", "verified": bool(ok), "lower": dual / max(dn, 1e-300), "upper": obj}
    cert["solve_seconds"] = seconds
    margins = cons.to_grid(mg, np.nan)
    support = [(int(i), int(t)) for i, t in np.argwhere(np.abs(margins - 1.0) <= tol("active"))]
    return SVMSolution(
        "optimal", norm, program, a, W, obj, margins, cons.to_grid(lam), support, kkt=kkt, certificate=cert
    )
