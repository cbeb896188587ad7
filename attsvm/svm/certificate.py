r"""Exact rational optimality certificate for Frobenius Att-SVM (THEORY §2, "Certificates").

Given an active set $S$, the KKT conditions of Att-SVM say: $\lambda_S$ solves $G_{SS}\lambda_S=\mathbf 1$,
$\lambda_S\ge0$, and $W=\sum_{j\in S}\lambda_jA_j$ has every other margin $\langle W,A_j\rangle\ge1$. All of
this is checked **exactly**: the data are binary floats, so $X\,2^{a}$ and $Z\,2^{b}$ are integer arrays
(smallest such $a,b$), and with $D^{\mathbb Z}=2^aD$, $Z^{\mathbb Z}=2^bZ_c$ and $s=2^{a+b}$

.. math:: G^{\mathbb Z}_{SS}=(D^{\mathbb Z}_SD^{\mathbb Z\top}_S)\circ(Z^{\mathbb Z}_SZ^{\mathbb Z\top}_S)
          =s^2G_{SS},\qquad G^{\mathbb Z}_{SS}\mu=\mathbf 1,\quad \mu=\nu/q,\qquad \lambda_S=s^2\mu,

.. math:: \text{margin}_j=\frac{D^{\mathbb Z\top}_j\,W^{\mathbb Z}z^{\mathbb Z}_j}{q},\qquad
          W^{\mathbb Z}=D^{\mathbb Z\top}_S\,\mathrm{diag}(\nu)\,Z^{\mathbb Z}_S,\qquad W=s\,W^{\mathbb Z}/q .

Integer matrix products and the solve run in python-flint (``fmpz_mat``: multi-modular products, a
p-adic/fraction-free solver returning exact fractions), never as Python loops over fractions. When the
float active set is wrong (an exact multiplier $<0$ or an exact margin $<1$), it is *repaired*: negative
multipliers are dropped, violated constraints added, and the system re-solved, until the exact conditions
hold (``repairs`` counts the rounds). A singular $G_{SS}$ is reduced to the pivot columns of its exact
row-echelon form.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ..data import Dataset
from .constraints import Constraints
from .exact import exact_features, fmpz_matrix
from .solution import SVMSolution
from .support import gap_from, locally_optimal_from

#: exact strings (multipliers, W) are written only while their total size stays below this many digits
MAX_EXACT_DIGITS = 5_000_000
#: larger float active sets are certified by the rigorous enclosure (:func:`certify_enclosure`)
EXACT_MAX_SUPPORT = 150


def _margins_via_gram(Dall, Zall, DS, ZS, num: list) -> list:
    """Numerators $G^{\\mathbb Z}_{\\cdot S}\\nu$ of every margin (common denominator q)."""
    from flint import fmpz_mat

    GA = hadamard(Dall * DS.transpose(), Zall * ZS.transpose())
    return (GA * fmpz_mat(len(num), 1, num)).entries()


def hadamard(A, B):
    """The entrywise product $A\\circ B$ of two ``fmpz_mat`` of the same shape (exact)."""
    from flint import fmpz_mat

    return fmpz_mat(A.nrows(), A.ncols(), [x * y for x, y in zip(A.entries(), B.entries())])


def _to_int64_grid(v: np.ndarray, bits: int = 52) -> tuple[list, int]:
    """Round ``v`` to integers ``v_int`` with ``v ~ v_int / 2**p`` (any rounding is allowed here: these are
    approximations whose error the enclosure accounts for)."""
    mx = float(np.max(np.abs(v), initial=0.0))
    p = bits - (int(np.ceil(np.log2(mx))) if mx > 0 else 0)
    return np.round(np.ldexp(v, p)).astype(np.int64).ravel().tolist(), p


def certify_enclosure(c: Constraints, Dint, Zint, sc: int, S: np.ndarray, marg_f: np.ndarray, t0: float):
    r"""Rigorous certificate without exact fractions (large active sets).

    With $G=G^{\mathbb Z}_{SS}$ (exact integers), any float $\tilde\mu\approx G^{-1}\mathbf 1$ and approximate
    inverse $R$ (both rounded to dyadic grids), the exact residuals $r=\mathbf 1-G\tilde\mu$ and
    $E=I-RG$ are computed in integers; if $\rho=\|E\|_\infty<1$ then $G$ is invertible and the exact
    solution satisfies $\|\mu^*-\tilde\mu\|_\infty\le\delta=\|Rr\|_\infty/(1-\rho)$ (Rump/Krawczyk).
    Then $\mu^*>0$ is proved by $\tilde\mu_j>\delta$, and every other margin by
    $G^{\mathbb Z}_{jS}\tilde\mu-\|G^{\mathbb Z}_{jS}\|_1\delta\ge1$, all in exact rational arithmetic.
    Repairs as in the exact path (drop $\tilde\mu_j\le0$, add violated constraints).
    """
    from fractions import Fraction

    from flint import fmpz_mat

    Dall, Zall = fmpz_matrix(Dint), fmpz_matrix(Zint)
    tok = np.asarray(c.tok).reshape(-1)
    repairs = 0
    base = {"kind": "rigorous-enclosure", "verified": False, "active": [], "multipliers": None, "W": None}
    for _ in range(50):
        DS, ZS = fmpz_matrix(Dint[S]), fmpz_matrix(Zint[S])
        GA = hadamard(Dall * DS.transpose(), Zall * ZS.transpose())  # m x |S|, exact
        rows = GA.entries()
        k = S.size
        Gf = np.array([float(rows[j * k + i]) for j in S for i in range(k)]).reshape(k, k)
        # float scaling: G_int entries are huge; work with Gs = G / 2**e
        e = int(np.floor(np.log2(np.max(np.abs(Gf)))))
        Gs = Gf / 2.0**e
        try:
            Rf = np.linalg.inv(Gs)
        except np.linalg.LinAlgError:
            return dict(
                base, reason="singular active-set Gram matrix", repairs=repairs, seconds=time.perf_counter() - t0
            )
        mu_f = Rf @ np.ones(k)
        mu_f = mu_f + Rf @ (np.ones(k) - Gs @ mu_f)
        if np.any(mu_f <= 0):
            S = S[mu_f > 0]
            repairs += 1
            continue
        # mu~ = mi / 2**(pm + e) ; R = ri / 2**(pr + e)  (approximations of G_int^{-1} 1 and G_int^{-1})
        mi, pm = _to_int64_grid(mu_f)
        ri, pr = _to_int64_grid(Rf)
        G = fmpz_mat(k, k, [rows[j * k + i] for j in S for i in range(k)])
        M = fmpz_mat(k, 1, mi)
        # r = 1 - G mu~ = (2**(pm+e) - G mi) / 2**(pm+e)
        ge = 2 ** (pm + e) if pm + e >= 0 else None
        if ge is None:
            return dict(base, reason="scaling underflow", repairs=repairs, seconds=time.perf_counter() - t0)
        rn = [ge - v for v in (G * M).entries()]
        Rm = fmpz_mat(k, k, ri)
        # E = I - R G = (2**(pr+e) I - Ri G) / 2**(pr+e)
        RG = (Rm * G).entries()
        de = 2 ** (pr + e)
        rho_num = max(sum(abs((de if i == j else 0) - RG[i * k + j]) for j in range(k)) for i in range(k))
        rho = Fraction(int(rho_num), int(de))
        if rho >= 1:
            return dict(
                base, reason="enclosure failed (||I-RG|| >= 1)", repairs=repairs, seconds=time.perf_counter() - t0
            )
        Rr = (Rm * fmpz_mat(k, 1, rn)).entries()
        delta = Fraction(int(max(abs(v) for v in Rr)), int(2 ** (pr + e)) * int(ge)) / (1 - rho)
        mu_lo = [Fraction(int(v), int(ge)) - delta for v in mi]
        neg = np.array([x <= 0 for x in mu_lo])
        if neg.any():
            S = S[~neg]
            repairs += 1
            continue
        # margins: G_{jS} mu~ +- ||G_{jS}||_1 delta, compared with 1 (exact)
        mg = (GA * M).entries()
        m = c.m
        inS = np.zeros(m, dtype=bool)
        inS[S] = True
        lo_ok = np.ones(m, dtype=bool)
        lows = {}
        centre = np.full(m, np.inf)
        for j in np.flatnonzero(~inS):
            l1 = int(sum(abs(rows[j * k + i]) for i in range(k)))
            lo = Fraction(int(mg[j]), int(ge)) - l1 * delta
            lows[j] = lo
            lo_ok[j] = lo >= 1
            centre[j] = float(Fraction(int(mg[j]), int(ge)))
        if not lo_ok.all():
            bad = np.flatnonzero(~lo_ok)
            viol = bad[centre[bad] < 1]
            if viol.size == 0:
                return dict(
                    base,
                    reason="degenerate: a margin equals 1 within the enclosure",
                    repairs=repairs,
                    seconds=time.perf_counter() - t0,
                )
            S = np.union1d(S, viol[np.argsort(centre[viol], kind="stable")][: max(10, k // 10)])
            repairs += 1
            continue
        lam = [float(Fraction(int(v), int(ge)) * Fraction(2) ** (2 * sc)) for v in mi]
        out = dict(base, verified=True, repairs=repairs, support_size=int(k))
        out["active"] = [[int(c.row[j]), int(tok[j])] for j in S]
        out["multipliers"] = [[int(c.row[j]), int(tok[j]), str(Fraction(v))] for j, v in zip(S, lam)]
        out["radius"] = float(delta * Fraction(2) ** (2 * sc)) * (1 + 1e-12)
        if lows:  # a short rigorous lower bound: floor(lo * 2**60) / 2**60
            lo = min(lows.values())
            out["min_other_margin"] = str(Fraction(math.floor(lo * 2**60), 2**60))
        else:
            out["min_other_margin"] = None
        out["rho"] = float(rho)
        out["seconds"] = time.perf_counter() - t0
        return out
    return dict(base, reason="repair budget exhausted", repairs=repairs, seconds=time.perf_counter() - t0)


def _exact_margins(Dall, Zall: np.ndarray, DS, ZSint: np.ndarray, num: list) -> tuple[list, Any]:
    """Integer numerators of every margin (times the common denominator q), and $W^{\\mathbb Z}$."""
    from flint import fmpz_mat

    s, d = ZSint.shape
    zs = ZSint.ravel().tolist()
    scaled = fmpz_mat(s, d, [num[j] * zs[j * d + e] for j in range(s) for e in range(d)])
    Wn = DS.transpose() * scaled  # d x d
    M1 = Dall * Wn  # m x d
    ent = M1.entries()
    m = Zall.shape[0]
    zf = Zall.ravel().tolist()
    return [sum(ent[j * d + e] * zf[j * d + e] for e in range(d)) for j in range(m)], Wn


def certify_solution(ds: Dataset, c: Constraints, sol: SVMSolution, t0: float | None = None) -> dict[str, Any]:
    r"""Prove (or fail to prove) that ``sol`` is the exact Att-SVM optimum for the constraints ``c`` of ``ds``.

    Returns ``{"kind": "exact-rational", "verified", "active", "multipliers", "W", "value_str",
    "min_other_margin", "repairs", "seconds"}``: ``value_str`` the exact optimum $\|W\|_F^2=\sum_S\mu_j$ (always
    given when verified), ``active`` the exact active set $\{(i,t):\text{margin}=1\}$, ``multipliers``
    $[i,t,\text{"p/q"}]$ for the certifying set $S$, ``W`` exact entries, ``min_other_margin`` the smallest
    exact margin outside $S$ (all strings ``"p/q"``). Exact strings are omitted (None, with ``omitted``) when
    larger than ``MAX_EXACT_DIGITS`` digits in total. Active sets larger than ``EXACT_MAX_SUPPORT`` are proved
    by :func:`certify_enclosure` (kind ``"rigorous-enclosure"``) when it succeeds.
    ``attsvm.svm.certify_fro`` is the data-set level entry point (it solves first when no solution is given).
    """
    from flint import fmpq, fmpz, fmpz_mat

    t0 = time.perf_counter() if t0 is None else t0
    base = {"kind": "exact-rational", "verified": False, "active": [], "multipliers": [], "W": None}
    if sol.status != "optimal":
        return dict(base, reason="infeasible", repairs=0, seconds=time.perf_counter() - t0)
    if c.m == 0:  # no constraints (T = 1): W = 0 is the exact optimum, with nothing to prove
        d = ds.d
        return dict(
            base, verified=True, W=[["0"] * d for _ in range(d)], value_str="0", min_other_margin=None, repairs=0,
            support_size=0, denominator_bits=1, seconds=time.perf_counter() - t0,
        )  # fmt: skip
    lam_f = sol.multipliers[c.row, np.asarray(c.tok).reshape(-1)]
    marg_f = c.margins(sol.W)
    S = np.flatnonzero(lam_f > 0)
    Dint, eD, Zint, eZ = exact_features(ds, c)
    sc = -(eD + eZ)  # D Z^T * 2**sc is an integer matrix
    fallback_reason = None
    if S.size > EXACT_MAX_SUPPORT:
        enc = certify_enclosure(c, Dint, Zint, sc, S, marg_f, t0)
        if enc["verified"]:
            return enc
        # degenerate / ill-conditioned: the exact path decides (slower, but exact where it is needed)
        fallback_reason = enc.get("reason")
    Dall, Zall = fmpz_matrix(Dint), fmpz_matrix(Zint)
    repairs = 0
    reason = ""
    for _ in range(100):
        if S.size == 0:
            S = np.array([int(np.argmin(marg_f))])
        DS, ZS = fmpz_matrix(Dint[S]), fmpz_matrix(Zint[S])
        DD, ZZ = (DS * DS.transpose()).entries(), (ZS * ZS.transpose()).entries()
        G = fmpz_mat(S.size, S.size, [x * y for x, y in zip(DD, ZZ)])
        try:
            mu = G.solve(fmpz_mat(S.size, 1, [1] * S.size))
        except ZeroDivisionError:
            R = G.rref()[0]  # python-flint: (rref, denominator, rank)
            rows = R.tolist()
            piv = []
            for row in rows:
                nzc = next((k for k, v in enumerate(row) if v != 0), None)
                if nzc is None:
                    break
                piv.append(nzc)
            S = S[np.array(piv, dtype=np.int64)]
            repairs += 1
            continue
        numer, q = mu.numer_denom()
        num = numer.entries()
        neg = np.array([int(v) < 0 for v in num])
        if neg.any():
            S = S[~neg]
            repairs += 1
            continue
        mnum = _margins_via_gram(Dall, Zall, DS, ZS, num)
        viol = np.array([v < q for v in mnum])
        if viol.any():
            bad = np.flatnonzero(viol)
            k = max(10, S.size // 10)
            bad = bad[np.argsort(marg_f[bad], kind="stable")][:k]
            S = np.union1d(S, bad)
            repairs += 1
            continue
        break
    else:
        reason = "repair budget exhausted"
        return dict(base, reason=reason, repairs=repairs, seconds=time.perf_counter() - t0)
    s2 = fmpq(2) ** (2 * sc)
    tok = np.asarray(c.tok).reshape(-1)
    eq = np.array([v == q for v in mnum])
    active = [[int(c.row[j]), int(tok[j])] for j in np.flatnonzero(eq)]
    others = np.setdiff1d(np.arange(c.m), S)
    mn = min((mnum[j] for j in others), default=None)  # common denominator q: compare numerators
    min_other = None if mn is None else fmpq(mn, q)
    _, Wn = _exact_margins(Dall, Zint, DS, Zint[S], num)
    digits = (len(str(q)) + 10) * (S.size + Wn.nrows() * Wn.ncols())
    out = dict(base, verified=True, active=active, repairs=repairs)
    if fallback_reason:
        out["enclosure_failed"] = fallback_reason
    out["min_other_margin"] = None if min_other is None else str(min_other)
    out["denominator_bits"] = int(q.bit_length()) if hasattr(q, "bit_length") else len(bin(int(q))) - 2
    out["support_size"] = int(S.size)
    # the exact optimum: W = sum_S mu_j A_j with margin 1 on S, so ||W||_F^2 = sum_S mu_j (one rational, kept also
    # when W is omitted)
    out["value_str"] = str(s2 * fmpq(sum(num, fmpz(0)), q))
    if digits <= MAX_EXACT_DIGITS:
        out["multipliers"] = [[int(c.row[j]), int(tok[j]), str(s2 * fmpq(num[k], q))] for k, j in enumerate(S)]
        scale = fmpq(2) ** sc / fmpq(q)
        out["W"] = [[str(scale * v) for v in row] for row in Wn.tolist()]
    else:
        out["multipliers"] = None
        out["omitted"] = f"exact multipliers and W omitted (about {digits} digits)"
    out["seconds"] = time.perf_counter() - t0
    return out


def apply_certificate(ds: Dataset, c: Constraints, sol: SVMSolution) -> None:
    """Certify ``sol`` in place: set ``certificate``; when verified take the support (and hence local
    optimality and $\\delta_\\alpha$) from the exact active set."""
    cert = certify_solution(ds, c, sol)
    sol.certificate = cert
    if cert.get("verified"):
        mask = np.zeros((c.n_rows, c.T), dtype=bool)
        for i, t in cert["active"]:
            mask[i, t] = True
        sol.support = [(int(i), int(t)) for i, t in np.argwhere(mask)]
        a = np.asarray(c.alpha).reshape(-1)
        sol.locally_optimal = locally_optimal_from(ds.scores.reshape(-1, ds.T), a, mask)
        g = gap_from(sol.margins, mask)
        sol.delta = None if not np.isfinite(g) else float(g)
