r"""Att-SVM$^\star$: the nuclear-norm attention SVM, with a proved duality-gap certificate (THEORY §2).

.. math:: W^{mm}_{\star,\alpha}\in\arg\min\|W\|_\star\quad\text{s.t.}\quad\langle W,A_{it}\rangle\ge1,
   \qquad A_{it}=(x_{i\alpha_i}-x_{it})z_i^\top .

Dual: $\max_{\lambda\ge0}\mathbf 1^\top\lambda$ s.t. $\|M(\lambda)\|_2\le1$, $M(\lambda)=\sum_j\lambda_jA_j$.
Weak duality $\|W\|_\star\ge\langle W,M\rangle\ge\mathbf 1^\top\lambda$ makes any dual-feasible $\lambda$ a lower bound.

**Solver.** A log-barrier interior-point method on the dual, written for this structure (a generic SDP
solver spends its time on a dense $2d\times2d$ cone block). For $t>0$ it minimises

.. math:: f_t(\lambda)=-t\,\mathbf 1^\top\lambda-\log\det(I-M^\top M)-\textstyle\sum_j\log\lambda_j
   \quad(=-t\mathbf 1^\top\lambda-\log\det S-\ldots,\ S=\begin{bmatrix}I&M\\M^\top&I\end{bmatrix}),

with $S^{-1}=\begin{bmatrix}P&Q\\Q^\top&R\end{bmatrix}$, $E=(I-M^\top M)^{-1}$, $P=I+MEM^\top$, $Q=-ME$, $R=E$:
gradient $-t-2D_j^\top Qz_j-1/\lambda_j$ and Hessian
$2[(DPD^\top)\circ(ZRZ^\top)+C\circ C^\top]+\mathrm{diag}(\lambda^{-2})$, $C=DQZ^\top$ (all constraints at once).
On the central path the primal point $W=-2Q/t$ has margins $1+1/(t\lambda_j)$ and the gap is $\nu/t$,
$\nu=2d+m$.

**Certificate** (``certify=True``): the multipliers, clipped and divided by $(1+\varepsilon)\sigma_{\max}$, are proved
dual feasible by an exact integer check $I-M^\top M\succ0$ (:mod:`attsvm.svm.spectral`); lower bound
$\mathbf 1^\top\lambda$ summed exactly. Upper bound (claim ``nuclear-variational``): $W\approx KQ^\top$ with
$K=U\Sigma^{1/2}$, $Q=V\Sigma^{1/2}$ in floats, $W'=KQ^\top$ and its margins computed exactly, and
$\|W'/\mu\|_\star\le\frac12(\|K\|_F^2+\|Q\|_F^2)/\mu$ with $\mu$ the exact minimum margin.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np

from ..data import Dataset
from ..errors import InputError, SolverError
from ..tolerances import tol
from .blas import blas_threads
from .budget import estimate, require
from .constraints import Constraints, build, program_of
from .cvx import margins_expr, solve
from .dual import DualResult, solve_dual
from .exact import exact_features, fmpz_matrix, pow2, to_integers
from .farkas import farkas_from_ray, infeasible_solution, proved_infeasible, zero_feature_certificate
from .scaling import normalised, unscale_solution
from .solution import SVMSolution
from .spectral import combine_exact, prove_spectral_le_one, round_down, round_up

_MU = 10.0  # growth of t per stage: after a jump in t the first Newton step is cut by the fraction-to-boundary
# rule on the many inactive multipliers, so long jumps (50x) cost more Newton steps in all than short ones


def _chol(G: np.ndarray) -> np.ndarray | None:
    try:
        return np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        return None


def _barrier(
    D: np.ndarray, Zc: np.ndarray, gap_rel: float = 1e-10, max_newton: int = 1000, lam0=None, t0: float | None = None
):
    """Path-following barrier method on the Att-SVM* dual. Returns (lam, W, t, info) or None if the
    dual looks unbounded (primal infeasible)."""
    from scipy.linalg import solve_triangular

    m, d = D.shape
    require(8.0 * 12 * m * m + 8.0 * 10 * m * d, f"the Att-SVM* barrier method on {m} constraints")
    nu = 2 * d + m
    if lam0 is None:
        M1 = D.T @ Zc
        s1 = np.linalg.norm(M1, 2)
        lam = np.full(m, 0.5 / s1) if s1 > 0 else np.ones(m)
        t = 0.1 * nu / max(lam.sum(), 1e-300)  # a low start: the first centring is then short
    else:  # warm start: shrink into the interior, restart the path a few stages back
        lam = np.maximum(np.asarray(lam0, dtype=float), 1e-3 * max(float(np.max(lam0)), 1e-300))
        sig = np.linalg.norm(D.T @ (lam[:, None] * Zc), 2)
        lam = lam * (0.9 / sig if sig > 0 else 1.0)
        t = float(t0)
    I = np.eye(d)
    newton = 0

    DD = D @ D.T  # constant block of the Hessian

    def parts(lam):
        M = D.T @ (lam[:, None] * Zc)
        L = _chol(I - M.T @ M)
        return M, L

    M, L = parts(lam)
    if L is None:
        return None
    while True:
        for _ in range(100):
            newton += 1
            if newton > max_newton:
                raise SolverError("Att-SVM*: barrier method did not converge (Newton step limit)")
            # E = (I - M^T M)^{-1} = L^{-T} L^{-1}: with A = D M L^{-T}, B = Z L^{-T} every block is a Gram
            # matrix, so H is positive semidefinite by construction (no cancellation in its diagonal)
            Li = solve_triangular(L, I, lower=True)
            A = D @ (M @ Li.T)
            B = Zc @ Li.T
            C = -A @ B.T  # D Q Z^T with Q = -M E
            g = -t - 2.0 * np.einsum("ja,ja->j", -A, B) - 1.0 / lam
            H = 2.0 * ((DD + A @ A.T) * (B @ B.T) + C * C.T)
            H[np.diag_indices(m)] += 1.0 / lam**2
            # diagonal scaling for conditioning, then Cholesky (with a tiny ridge if needed)
            sc = 1.0 / np.sqrt(np.diagonal(H))
            Hs = H * sc[:, None] * sc[None, :]
            Lh = _chol(Hs)
            if Lh is not None:
                y = solve_triangular(Lh, -g * sc, lower=True)
                step = solve_triangular(Lh, y, lower=True, trans="T") * sc
            else:
                # rounding made the (ill-conditioned) Hessian indefinite: Newton on its PSD part
                w, V = np.linalg.eigh(Hs)
                w = np.maximum(w, 1e-12 * max(w[-1], 1e-300))
                step = (V @ ((V.T @ (-g * sc)) / w)) * sc
            dec2 = float(-(g @ step))
            # centre accurately only on the last stage; a rough centre (decrement^2 < 0.1) is enough before
            if dec2 < (1e-7 if nu / t <= gap_rel * lam.sum() else 1e-1):
                break
            neg = step < 0
            s = min(1.0, 0.99 * float(np.min(-lam[neg] / step[neg]))) if np.any(neg) else 1.0
            ld0 = np.log(np.diagonal(L)).sum()
            while True:
                ln = lam + s * step
                Mn, Ln = parts(ln)
                if Ln is not None:
                    # f(ln) - f(lam), formed without the cancellation of the large t*sum(lam) terms
                    df = -t * s * step.sum() - 2.0 * (np.log(np.diagonal(Ln)).sum() - ld0)
                    df -= np.log1p(s * step / lam).sum()
                    if df <= -0.01 * s * dec2 or s * dec2 < 1e-12:
                        break
                s *= 0.5
                if s < 1e-14:
                    break
            if s < 1e-14:
                break
            lam, M, L = ln, Mn, Ln
            if s < 1e-4 and dec2 < 1e-3:  # float resolution of f_t reached: steps cannot be told apart
                break
            if lam.sum() > 1e12 * nu:
                return None
        if nu / t <= gap_rel * lam.sum():
            break
        t *= _MU
    Li = solve_triangular(L, I, lower=True)
    W = _polish(D, Zc, lam, t, M, 2.0 * M @ (Li.T @ Li) / t)
    return lam, W, t, {"newton_steps": newton, "t": float(t), "barrier_gap": float(nu / t)}


def _polish(D: np.ndarray, Zc: np.ndarray, lam: np.ndarray, t: float, M: np.ndarray, W0: np.ndarray) -> np.ndarray:
    r"""Accurate primal point from the dual iterate. Near the optimum $I-M^\top M$ is singular to $O(1/t)$, so
    $W=-2Q/t$ carries relative errors $\sim\epsilon_{mach}t$. Optimality says $W=U_rYV_r^\top$, $Y\succeq0$, with
    $U_r,V_r$ the singular vectors of $M$ for $\sigma\approx1$, and margin 1 on the active constraints: take the
    least change of $Y_0=U_r^\top W_0V_r$ that meets $a_j^\top Yb_j=1$ ($a_j=U_r^\top D_j$, $b_j=V_r^\top z_j$)."""
    U, sig, Vt = np.linalg.svd(M)
    r = max(1, int(np.sum(sig > 1.0 - 1e-4)))
    Ur, Vr = U[:, :r], Vt[:r].T
    act = t * lam > 1e6
    if not np.any(act):
        return W0
    a, b = D[act] @ Ur, Zc[act] @ Vr
    A = 0.5 * (np.einsum("ja,jb->jab", a, b) + np.einsum("jb,ja->jab", a, b)).reshape(len(a), r * r)
    Y0 = Ur.T @ W0 @ Vr
    Y0 = 0.5 * (Y0 + Y0.T)
    y0 = Y0.ravel()
    corr = np.linalg.lstsq(A, 1.0 - A @ y0, rcond=None)[0]
    Y = (y0 + corr).reshape(r, r)
    W1 = Ur @ (0.5 * (Y + Y.T)) @ Vr.T

    def score(W: np.ndarray) -> float:  # nuclear norm after scaling to margin 1 (lower is better)
        mn = np.einsum("md,de,me->m", D, W, Zc).min()
        return np.linalg.svd(W, compute_uv=False).sum() / mn if mn > 0 else np.inf

    return W1 if score(W1) <= score(W0) else W0


def _frobenius_hint(cons: Constraints) -> DualResult | None:
    """The Frobenius dual on every constraint (only when there are more than 200): its margins seed the working
    set (:func:`_initial_set`), and its ray, if any, is a Farkas candidate - feasibility does not depend on the norm.
    None when the working-set solver gives up."""
    if cons.m <= 200:
        return None
    try:
        return solve_dual(cons.D, cons.Zc)
    except SolverError:
        return None


def _initial_set(D: np.ndarray, Zc: np.ndarray, hint: DualResult | None, factor: float = 2.0) -> np.ndarray:
    """Constraints likely active at the nuclear optimum: the smallest margins of the Frobenius solution (every
    constraint when there are at most 200, or no Frobenius solution)."""
    m = len(D)
    if m <= 200 or hint is None or hint.status not in ("optimal", "inaccurate"):
        return np.arange(m)
    mg = hint.margins
    k = min(m, max(200, int(factor * np.sum(mg <= 1.0 + 1e-6))))
    return np.sort(np.argsort(mg)[:k])


def _working_set(cons: Constraints, gap_rel: float = 1e-9, max_rounds: int = 20, hint: DualResult | None = None):
    """Barrier on a working set S of constraints, adding violated ones until the primal point is feasible
    for all. Returns (lam (m,), W, info) or None (infeasible). The dual point (zero off S) is dual feasible
    for the full program whatever S is."""
    D, Zc = cons.D, cons.Zc
    m = len(D)
    S = _initial_set(D, Zc, hint)
    steps = 0
    for rnd in range(max_rounds):
        try:
            out = _barrier(D[S], Zc[S], gap_rel)
        except SolverError:
            out = _clarabel(D[S], Zc[S])
        if out is None:
            return None if len(S) == m else _working_set_full(cons)
        lamS, W, t, info = out
        if _float_gap(D[S], Zc[S], lamS, W) > 1e-7:  # the barrier lost its way: the generic SDP path instead
            out = _clarabel(D[S], Zc[S])
            if out is None:
                return None if len(S) == m else _working_set_full(cons)
            lamS, W, t, info = out
        steps += info["newton_steps"]
        mg = cons.margins(W)
        if mg.min() <= 0 and len(S) == m:
            return None
        viol = np.flatnonzero(mg < 1.0 - 1e-9)
        viol = np.setdiff1d(viol, S)
        if len(viol) == 0:
            lam = np.zeros(m)
            lam[S] = lamS
            info.update(newton_steps=steps, working_set=len(S), rounds=rnd + 1)
            return lam, W, info
        add = viol[np.argsort(mg[viol])[: max(len(S) // 2, 50)]]
        S = np.union1d(S, add)  # cold restart (warm starts from the boundary cost more steps)
    raise SolverError("Att-SVM*: working set did not settle")


def _float_gap(D: np.ndarray, Zc: np.ndarray, lam: np.ndarray, W: np.ndarray) -> float:
    """Relative duality gap in floating point (inf when W has a non-positive margin)."""
    mn = np.einsum("md,de,me->m", D, W, Zc).min()
    if not mn > 0:
        return np.inf
    up = np.linalg.svd(W, compute_uv=False).sum() / mn
    lo = lam.sum() / max(np.linalg.norm(D.T @ (lam[:, None] * Zc), 2), 1e-300)
    return float((up - lo) / up)


def _clarabel(D: np.ndarray, Zc: np.ndarray):
    """Fallback: cvxpy ``normNuc`` with Clarabel on the given constraints (slow, dense 2d x 2d cone)."""
    import cvxpy as cp

    W = cp.Variable((D.shape[1], D.shape[1]))
    con = margins_expr(D, W, Zc) >= 1
    if solve(cp.Problem(cp.Minimize(cp.normNuc(W)), [con]), "Att-SVM* (Clarabel fallback)") != "optimal":
        return None
    lam = np.maximum(np.asarray(con.dual_value, dtype=float).ravel(), 0.0)
    return lam, np.asarray(W.value), np.inf, {"newton_steps": 0, "t": None, "barrier_gap": None, "fallback": True}


def _working_set_full(cons: Constraints):
    out = _barrier(cons.D, cons.Zc)
    if out is None:
        return None
    lam, W, t, info = out
    if cons.margins(W).min() <= 0:
        return None
    info.update(working_set=cons.m, rounds=1)
    return lam, W, info


def certify_gap(ds: Dataset, cons: Constraints, lam: np.ndarray, W: np.ndarray) -> dict:
    """Proved duality gap for Att-SVM* (see the module docstring). ``lam`` must already be dual feasible
    in floating point (it is re-proved here exactly); returns the certificate dict."""
    t0 = time.perf_counter()
    Dn, eD, Zn, eZ = exact_features(ds, cons)
    lam = np.where(lam > 1e-13 * max(lam.max(), 1e-300), lam, 0.0)
    dual_ok = False
    lam_c = lam
    for eps in (1e-12, 1e-10, 1e-8, 1e-6):
        s = np.linalg.norm(cons.combine(lam), 2)
        lam_c = lam / ((1.0 + eps) * s) if s > 0 else lam
        ln, el = to_integers(lam_c)
        if prove_spectral_le_one(combine_exact(Dn, Zn, ln), eD + el + eZ):
            dual_ok = True
            break
    lower = sum((Fraction(int(x)) for x in ln), Fraction(0)) * pow2(el) if dual_ok else Fraction(0)
    # upper bound via the variational form ||W||_* <= (|K|^2 + |Q|^2)/2 for W = K Q^T
    U, sv, Vt = np.linalg.svd(W)
    r = int(np.sum(sv > 1e-14 * sv[0])) if sv[0] > 0 else 0
    K = U[:, :r] * np.sqrt(sv[:r])
    Qf = Vt[:r].T * np.sqrt(sv[:r])
    Kn, eK = to_integers(K)
    Qn, eQ = to_integers(Qf)
    Wn = fmpz_matrix(Kn) * fmpz_matrix(Qn).transpose()  # W' = K Q^T exactly, exponent eK+eQ
    DW = (fmpz_matrix(Dn) * Wn).entries()
    Zl = [int(z) for z in np.asarray(Zn).ravel()]
    d = W.shape[0]
    marg = [sum(int(DW[j * d + k]) * Zl[j * d + k] for k in range(d)) for j in range(len(Dn))]
    mu_min = min(marg)
    primal_ok = mu_min > 0
    if primal_ok:
        mu = Fraction(mu_min) * pow2(eD + eK + eQ + eZ)
        normsq = sum(int(x) * int(x) for x in Kn.ravel()) * pow2(2 * eK) + sum(
            int(x) * int(x) for x in Qn.ravel()
        ) * pow2(2 * eQ)
        upper = normsq / 2 / mu
    else:
        upper = Fraction(0)
    verified = dual_ok and primal_ok and upper >= lower
    lo, up = round_down(lower), (round_up(upper) if primal_ok else math.inf)
    rel = (up - lo) / up if verified and up > 0 else math.inf
    return {
        "kind": "duality-gap",
        "verified": bool(verified and rel <= tol("nuc_gap")),
        "proved": bool(verified),
        "lower": lo,
        "upper": up,
        "rel_gap": rel,
        "dual_feasible_proved": bool(dual_ok),
        "primal_feasible_proved": bool(primal_ok),
        "rank_factor": r,
        "seconds": time.perf_counter() - t0,
    }


def solve_nuclear(ds: Dataset, alpha=None, certify: bool = False) -> SVMSolution:
    r"""Solve Att-SVM$^\star(\alpha)$ (cross, self, sequence or causal data via the flat view).

    Returns an :class:`SVMSolution` with ``norm="nuc"``: ``W`` feasible (minimum margin 1), ``objective``
    $\|W\|_\star$, dual multipliers (scaled so $\|\sum\lambda A\|_2\le1$ in floats), KKT residuals, and a
    ``duality-gap`` certificate (proved exactly when ``certify``). Infeasible: status ``"infeasible"`` with
    a Farkas certificate $\mu\ge0$, $\sum\mu A=0$."""
    if ds.batched:
        raise InputError("solve_nuclear takes a single data set (iterate over the batch)")
    require(estimate(ds, "nuc", "attsvm", certify), "Att-SVM* (nuclear norm) of this data set")
    scaled, scale = normalised(ds)
    return unscale_solution(_solve_nuclear(scaled, alpha, certify), scale)


def _solve_nuclear(ds: Dataset, alpha, certify: bool) -> SVMSolution:
    cons = build(ds, alpha)
    program = program_of(ds.kind)
    a = np.asarray(cons.alpha)
    if cons.m == 0:  # no constraints (T = 1): W = 0, and 0 <= OPT <= ||0||_* = 0 proves it
        W = np.zeros((ds.d, ds.d))
        kkt = dict.fromkeys(
            ("primal_feasibility", "dual_feasibility", "complementary_slackness", "stationarity", "duality_gap"), 0.0
        )
        cert = {"kind": "duality-gap", "verified": True, "proved": True, "lower": 0.0, "upper": 0.0, "rel_gap": 0.0}
        return SVMSolution(
            "optimal", "nuc", program, a, W, 0.0, cons.to_grid(np.zeros(0), np.nan), cons.to_grid(np.zeros(0)),
            kkt=kkt, certificate=dict(cert, reason="no constraints"),
        )  # fmt: skip
    zero = zero_feature_certificate(cons)
    if zero is not None:  # a constraint 0 >= 1 (A_j = 0): infeasible, exactly
        return infeasible_solution(cons, "nuc", program, a, *zero)
    hint = _frobenius_hint(cons)
    if hint is not None:
        found = farkas_from_ray(ds, cons, hint)
        if found is not None:  # infeasible whatever the norm: no barrier on all m constraints
            return infeasible_solution(cons, "nuc", program, a, *found)
    t0 = time.perf_counter()
    # the path stops at a barrier gap of 1e-9 (relative); when the proof of gap <= tol("nuc_gap") fails there,
    # the path is run again to 1e-11
    for gap_rel in (1e-9, 1e-11):
        with blas_threads(1):
            out = _working_set(cons, gap_rel, hint=hint)
        if out is None:
            return _infeasible(ds, cons, program, a)
        lam, Wc, info = out
        mg = cons.margins(Wc)
        W = Wc / mg.min()
        mg = cons.margins(W)
        M = cons.combine(lam)
        s = np.linalg.norm(M, 2)
        lam = lam / s
        M = M / s
        sv = np.linalg.svd(W, compute_uv=False)
        obj = float(sv.sum())
        dual = float(lam.sum())
        kkt = {
            "primal_feasibility": float(max(0.0, 1.0 - mg.min())),
            "dual_feasibility": float(max(0.0, np.linalg.norm(M, 2) - 1.0, -lam.min())),
            "complementary_slackness": float(np.abs(lam * (mg - 1.0)).sum() / max(dual, 1e-300)),
            "stationarity": float(abs(np.sum(M * W) - obj) / max(obj, 1e-300)),
            "duality_gap": float(abs(obj - dual) / max(obj, 1e-300)),
        }
        if certify:
            cert = certify_gap(ds, cons, lam, W)
        else:
            cert = {
                "kind": "duality-gap",
                "verified": False,
                "proved": False,
                "lower": dual,
                "upper": obj,
                "rel_gap": (obj - dual) / obj if obj > 0 else 0.0,
            }
        if not certify or cert["verified"]:
            break
    cert["solve_seconds"] = time.perf_counter() - t0
    cert.update(info)
    margins = cons.to_grid(mg, np.nan)
    support = [(int(i), int(t)) for i, t in np.argwhere(np.abs(margins - 1.0) <= tol("active"))]
    return SVMSolution(
        "optimal", "nuc", program, a, W, obj, margins, cons.to_grid(lam), support, kkt=kkt, certificate=cert
    )


def _infeasible(ds: Dataset, cons: Constraints, program: str, a: np.ndarray) -> SVMSolution:
    mu, cert = proved_infeasible(ds, cons, "Att-SVM* (barrier method diverged)")
    return infeasible_solution(cons, "nuc", program, a, mu, cert)
