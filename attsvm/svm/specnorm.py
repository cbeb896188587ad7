r"""Spectral Att-SVM: minimise the largest singular value, with a proved duality gap (THEORY §2, §6).

.. math:: W^{mm}_{2,\alpha}\in\arg\min\|W\|_2\quad\text{s.t.}\quad\langle W,A_j\rangle\ge1\ \ \forall j,
   \qquad\|W\|_2=\sigma_{\max}(W),\quad A_j=D_jz_j^\top .

Dual: $\max_{\lambda\ge0}\mathbf 1^\top\lambda$ s.t. $\|M\|_\star\le1$, $M=\sum_j\lambda_jA_j$ (the nuclear norm is dual
to the spectral norm). Weak duality $\|W\|_2\ge\langle W,M\rangle/\|M\|_\star\ge\mathbf 1^\top\lambda/\|M\|_\star$.

**Solver.** cvxpy ``sigma_max`` (an SDP: $\sigma_{\max}(W)\le t\iff\begin{bmatrix}tI&W\\W^\top&tI\end{bmatrix}\succeq0$)
with Clarabel, the margins as one vectorised constraint (:func:`attsvm.svm.cvx.margins_expr`); $\lambda$ = its dual.
Feasibility does not depend on the norm, so it is first decided by the ℓ∞ linear program
(:mod:`.polyhedral`): an infeasible selection never reaches the SDP and gets the exact Farkas vector.

**Certificate** (``certify=True``, :func:`certify_spectral`; kind ``"duality-gap"``), in exact arithmetic on the
binary floats:

- **upper bound**: $\mu=\min_j\langle W,A_j\rangle$ exactly, so $W/\mu$ is feasible, and $\|W\|_2\le u$ for a float
  $u\gtrsim\sigma_{\max}(W)$ proved by $u^2I-W^\top W\succ0$ (Sylvester's criterion on integers,
  :func:`attsvm.svm.spectral.is_positive_definite`); upper $=u/\mu$.
- **lower bound**: $M=\sum_j\lambda_jA_j$ exactly for the clipped float $\lambda\ge0$; with the float SVD
  $M\approx U\Sigma V^\top$, $K=U\Sigma^{1/2}$, $Q=V\Sigma^{1/2}$ (binary floats) and $E=M-KQ^\top$ formed exactly,

  .. math:: \|M\|_\star\le\|KQ^\top\|_\star+\|E\|_\star\le\tfrac12(\|K\|_F^2+\|Q\|_F^2)+\sqrt d\,\|E\|_F=:b,

  ($\|KQ^\top\|_\star\le\|K\|_F\|Q\|_F$, claim ``nuclear-variational``; $\|E\|_\star\le\sqrt{\mathrm{rank}E}\,\|E\|_F$),
  with $\sqrt{\cdot}$ bounded above rationally; then $\lambda/b$ is dual feasible and lower $=\mathbf 1^\top\lambda/b$.

``verified`` iff both bounds are proved and $(\text{upper}-\text{lower})/\text{upper}\le$ ``tol("norm_gap")``.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any

import numpy as np

from ..data import Dataset
from ..errors import InputError
from ..norms import matrix_norms
from ..tolerances import tol
from .budget import estimate, require
from .constraints import Constraints, build, program_of
from .cvx import margins_expr, solve
from .exact import exact_features, fmpz_matrix, pow2, to_integers
from .farkas import infeasible_solution, proved_infeasible, zero_feature_certificate
from .polyhedral import max_margin
from .scaling import normalised, unscale_solution
from .solution import SVMSolution
from .spectral import combine_exact, is_positive_definite, proved_bracket, round_up

__all__ = ["certify_spectral", "nuclear_upper_bound", "prove_spectral_le", "solve_spectral", "sqrt_up"]


def sqrt_up(x: Fraction) -> Fraction:
    r"""A rational $r\ge\sqrt x$ (a float, rounded up until $r^2\ge x$ holds exactly)."""
    if x <= 0:
        return Fraction(0)
    r = math.sqrt(float(x)) if float(x) < math.inf else math.inf
    while Fraction(r) ** 2 < x:
        r = math.nextafter(r, math.inf)
    return Fraction(r)


def prove_spectral_le(W: np.ndarray, u: float) -> bool:
    r"""Prove $\|W\|_2\le u$ for a binary float matrix ``W`` and a float $u>0$, exactly: $u^2I-W^\top W\succ0$.

    With $W=W^{\mathbb Z}2^{e}$ and $u=U2^{f}$ (integers), the matrix is $2^{2e}(U^2 2^{2(f-e)}I-W^{\mathbb Z\top}
    W^{\mathbb Z})$, made integral by a shift and tested by Sylvester's criterion (strict definiteness, which
    implies the bound)."""
    import flint

    if not u > 0 or not math.isfinite(u):
        return False
    Wn, e = to_integers(W)
    (Un,), f = to_integers(np.array([u]))
    N = fmpz_matrix(Wn)
    G = N.transpose() * N
    d = G.nrows()
    c = int(Un) ** 2
    I = flint.fmpz_mat(d, d)
    for k in range(d):
        I[k, k] = 1
    S = I * (c << (2 * (f - e))) - G if f >= e else I * c - G * (1 << (2 * (e - f)))
    return is_positive_definite(S)


def nuclear_upper_bound(Mn, eM: int, M_float: np.ndarray) -> Fraction:
    r"""A rational $b\ge\|M\|_\star$ for $M=N2^{e_M}$ (``Mn``: ``fmpz_mat``), from the float SVD of ``M_float``
    $\approx M$ (module docstring: $b=\frac12(\|K\|_F^2+\|Q\|_F^2)+\sqrt d\|E\|_F$, $E=M-KQ^\top$ exact)."""
    d = Mn.nrows()
    U, sv, Vt = np.linalg.svd(np.asarray(M_float, dtype=float))
    K = U * np.sqrt(sv)
    Qf = Vt.T * np.sqrt(sv)
    Kn, eK = to_integers(K)
    Qn, eQ = to_integers(Qf)
    KQ = fmpz_matrix(Kn) * fmpz_matrix(Qn).transpose()  # K Q^T = KQ 2^(eK + eQ)
    e0 = min(eM, eK + eQ)
    En = Mn * (1 << (eM - e0)) - KQ * (1 << (eK + eQ - e0))  # E = En 2^e0, exactly
    fro2 = sum(int(x) ** 2 for x in En.entries()) * pow2(2 * e0)
    kq = (sum(int(x) ** 2 for x in Kn.ravel()) * pow2(2 * eK) + sum(int(x) ** 2 for x in Qn.ravel()) * pow2(2 * eQ)) / 2
    return kq + sqrt_up(d * fro2)


def certify_spectral(ds: Dataset, cons: Constraints, lam: np.ndarray, W: np.ndarray) -> dict[str, Any]:
    r"""Proved duality gap of the spectral Att-SVM for a float pair (module docstring): ``W`` any binary float matrix
    (the bound is for $W/\min_j\langle W,A_j\rangle$, so only positive margins are needed), ``lam`` any float
    vector (clipped at 0, then scaled by the proved bound $b\ge\|M(\lambda)\|_\star$). Returns ``{"kind":
    "duality-gap", "verified", "proved", "lower", "upper", "rel_gap", "primal_feasible_proved",
    "dual_feasible_proved", "spectral_bound"`` ($u$), ``"nuclear_bound"`` ($b$), ``"seconds"}`` (bounds rounded
    outwards); ``verified`` iff proved and ``rel_gap <= tol("norm_gap")``."""
    t0 = time.perf_counter()
    Dn, eD, Zn, eZ = exact_features(ds, cons)
    # upper: exact margins of W, and ||W||_2 <= u proved
    Wn, eW = to_integers(W)
    DW = (fmpz_matrix(Dn) * fmpz_matrix(Wn)).entries()
    d = W.shape[0]
    Zl = [int(z) for z in np.asarray(Zn).ravel()]
    marg = [sum(int(DW[j * d + k]) * Zl[j * d + k] for k in range(d)) for j in range(cons.m)]
    mu_int = min(marg)
    primal_ok = mu_int > 0
    sig = float(matrix_norms(W, "spec"))
    u = None
    if primal_ok and sig > 0:
        for eps in (1e-14, 1e-12, 1e-10, 1e-8, 1e-6):
            cand = sig * (1.0 + eps)
            if prove_spectral_le(W, cand):
                u = cand
                break
    upper = Fraction(u) / (Fraction(mu_int) * pow2(eD + eW + eZ)) if u is not None else None
    # lower: lambda >= 0 (clipped), M exact, ||M||_* <= b proved
    lam = np.where(lam > 1e-13 * max(float(np.max(lam, initial=0.0)), 1e-300), lam, 0.0)
    Ln, eL = to_integers(lam)
    eM = eD + eL + eZ
    Mn = combine_exact(Dn, Zn, Ln)  # M = Mn 2^eM
    total = sum((Fraction(int(x)) for x in Ln), Fraction(0)) * pow2(eL)
    b = nuclear_upper_bound(Mn, eM, cons.combine(lam)) if total > 0 else Fraction(0)
    lower = total / b if b > 0 else Fraction(0)
    return {
        "kind": "duality-gap",
        **proved_bracket(lower, upper, tol("norm_gap")),
        "primal_feasible_proved": bool(upper is not None),
        "dual_feasible_proved": bool(b > 0 or total == 0),
        "spectral_bound": None if u is None else float(u),
        "nuclear_bound": round_up(b) if b > 0 else 0.0,
        "seconds": time.perf_counter() - t0,
    }


def solve_spectral(ds: Dataset, alpha=None, certify: bool = False) -> SVMSolution:
    r"""Solve the spectral Att-SVM($\alpha$) $\min\|W\|_2$ for one data set (sequence and causal data through the
    flat view).

    ``W`` feasible (minimum margin $\ge1$), ``objective`` $\|W\|_2$, ``multipliers`` $\lambda$, ``kkt``:
    ``primal_feasibility``, ``dual_feasibility``, ``complementary_slackness``, ``dual_norm`` ($\|M\|_\star-1$),
    ``stationarity`` ($|\langle M,W\rangle-\|W\|_2|/\|W\|_2$), ``duality_gap``; certificate ``"duality-gap"``
    (float bounds, ``proved`` False, unless ``certify``: :func:`certify_spectral`). Infeasible: status
    ``"infeasible"`` with the exact Farkas vector. Very large or small data are rescaled exactly first."""
    if ds.batched:
        raise InputError("solve_spectral takes a single data set (iterate over the batch)")
    require(estimate(ds, "spec", "attsvm", certify), "spectral Att-SVM of this data set")
    scaled, scale = normalised(ds)
    return unscale_solution(_solve(scaled, alpha, certify), scale)


def _solve(ds: Dataset, alpha, certify: bool) -> SVMSolution:
    import cvxpy as cp

    cons = build(ds, alpha)
    program = program_of(ds.kind)
    a = np.asarray(cons.alpha)
    d = ds.d
    keys = ("primal_feasibility", "dual_feasibility", "complementary_slackness", "dual_norm", "stationarity",
            "duality_gap")  # fmt: skip
    if cons.m == 0:  # no constraints (T = 1): W = 0, and 0 <= OPT <= ||0||_2 = 0 proves it
        cert = {"kind": "duality-gap", "verified": True, "proved": True, "lower": 0.0, "upper": 0.0, "rel_gap": 0.0,
                "reason": "no constraints"}  # fmt: skip
        return SVMSolution(
            "optimal", "spec", program, a, np.zeros((d, d)), 0.0, cons.to_grid(np.zeros(0), np.nan),
            cons.to_grid(np.zeros(0)), kkt=dict.fromkeys(keys, 0.0), certificate=cert,
        )  # fmt: skip
    zero = zero_feature_certificate(cons)
    if zero is not None:  # a constraint 0 >= 1: infeasible, exactly
        return infeasible_solution(cons, "spec", program, a, *zero)
    if max_margin(cons)[0] is None:  # the l_inf LP: no W has every margin > 0 (feasibility is norm-free)
        mu, cert = proved_infeasible(ds, cons, "spectral Att-SVM")
        return infeasible_solution(cons, "spec", program, a, mu, cert)
    t0 = time.perf_counter()
    W = cp.Variable((d, d))
    con = margins_expr(cons.D, W, cons.Zc) >= 1
    status = solve(cp.Problem(cp.Minimize(cp.sigma_max(W)), [con]), "spectral Att-SVM")
    if status == "infeasible":
        mu, cert = proved_infeasible(ds, cons, "spectral Att-SVM")
        return infeasible_solution(cons, "spec", program, a, mu, cert)
    seconds = time.perf_counter() - t0
    Wv = np.asarray(W.value, dtype=float)
    lam = np.maximum(np.asarray(con.dual_value, dtype=float).ravel(), 0.0)
    mg = cons.margins(Wv)
    if 0 < mg.min() < 1:  # interior-point points are feasible to ~1e-9: rescale onto the feasible set
        Wv = Wv / mg.min()
        mg = cons.margins(Wv)
    obj = float(matrix_norms(Wv, "spec"))
    M = cons.combine(lam)
    nuc = float(np.linalg.svd(M, compute_uv=False).sum())
    dual = float(lam.sum())
    kkt = {
        "primal_feasibility": float(max(0.0, 1.0 - mg.min())),
        "dual_feasibility": float(max(0.0, -float(np.min(con.dual_value)))),
        "complementary_slackness": float(np.abs(lam * (mg - 1.0)).max() / max(dual, 1e-300)),
        "dual_norm": float(nuc - 1.0),
        "stationarity": float(abs(np.sum(M * Wv) - obj) / max(obj, 1e-300)),
        "duality_gap": float(abs(obj - dual) / max(obj, 1e-300)),
    }
    if certify:
        cert = certify_spectral(ds, cons, lam, Wv)
    else:
        lower = dual / nuc if nuc > 0 else 0.0
        cert = {"kind": "duality-gap", "verified": False, "proved": False, "lower": lower, "upper": obj,
                "rel_gap": (obj - lower) / obj if obj > 0 else 0.0}  # fmt: skip
    cert["solve_seconds"] = seconds
    margins = cons.to_grid(mg, np.nan)
    support = [(int(i), int(t)) for i, t in np.argwhere(np.abs(margins - 1.0) <= tol("active"))]
    return SVMSolution(
        "optimal", "spec", program, a, Wv, obj, margins, cons.to_grid(lam), support, kkt=kkt, certificate=cert
    )
