r"""Gen-SVM for nonlinear heads: the SVM of selected token *sets*, its finite part and the $W^{SVMeq}$ fit
(THEORY §2, claim ``gensvm-equivalence``).

With selected sets $\mathcal O_i$ (e.g. $\{t:s_{it}\ge10^{-3}\}$ at the end of training),

.. math:: W^{svm}=\arg\min\|W\|_F\ \text{s.t.}\ (x_{it}-x_{i\tau})^\top Wz_i=0\ (t,\tau\in\mathcal O_i),\quad
   (x_{it}-x_{i\tau})^\top Wz_i\ge1\ (t\in\mathcal O_i,\tau\notin\mathcal O_i),

.. math:: W^{fin}=\arg\min\|W\|_F\ \text{s.t.}\ (x_{it}-x_{i\tau})^\top Wz_i=\log(s_{it}/s_{i\tau})
   \ (t,\tau\in\mathcal O_i),

and $W^{SVMeq}=W^{fin}+\hat R\,W^{svm}$ with $\hat R=\arg\min_R\|W_k-W^{fin}-RW^{svm}\|_F$.

Formulation used (equivalent): with $\mathcal O_i=\{t_0<t_1<\dots\}$ the equalities are imposed on consecutive
pairs $(t_k,t_{k+1})$, and then the inequalities only for $t=t_0$ (the equalities make the logits of
$\mathcal O_i$ equal). Program: $\min\frac12\|W\|_F^2$, KKT $W=\sum_{\tau}\lambda_{i\tau}A_{i\tau}+\sum_k\nu_kE_k$,
$\lambda\ge0$, $\nu$ free, complementary slackness, $\|W\|_F^2=\mathbf 1^\top\lambda$. ``objective`` is
$\|W\|_F^2$ (the convention of :func:`attsvm.svm.frobenius.solve_fro`).
"""

from __future__ import annotations

import numpy as np

from ..data import Dataset
from ..errors import InfeasibleError, InputError, SolverError
from ..tolerances import tol
from .budget import estimate, require
from .cvx import farkas_lp, margins_expr, solve
from .scaling import normalised, unscale_solution
from .solution import SVMSolution


def selected_sets(s: np.ndarray, threshold: float = 1e-3) -> np.ndarray:
    r"""$\mathcal O_i=\{t:s_{it}\ge\text{threshold}\}$ as a bool (n, T) mask; every row must be non-empty."""
    s = np.asarray(s, dtype=float)
    if s.ndim != 2 or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise InputError("field 's' must be a finite non-negative (n,T) array of probabilities")
    sel = s >= threshold
    if not np.all(sel.any(-1)):
        raise InputError(f"selected set empty for input {int(np.flatnonzero(~sel.any(-1))[0])} (threshold too high)")
    return sel


def _check(ds: Dataset, selected: np.ndarray) -> np.ndarray:
    if ds.batched or ds.kind not in ("cross", "self"):
        raise InputError("Gen-SVM takes a single cross- or self-attention data set")
    sel = np.asarray(selected)
    if sel.shape != (ds.n, ds.T) or sel.dtype != bool:
        raise InputError(f"field 'selected' must be a bool array of shape {(ds.n, ds.T)}")
    if not np.all(sel.any(-1)):
        raise InputError("field 'selected' has an empty set O_i")
    return sel


def _pairs(ds: Dataset, sel: np.ndarray):
    """Equality pairs (i, t_k, t_{k+1}) and inequality pairs (i, t_0, tau)."""
    eq, ineq = [], []
    for i in range(ds.n):
        O = np.flatnonzero(sel[i])
        eq += [(i, int(O[k]), int(O[k + 1])) for k in range(len(O) - 1)]
        ineq += [(i, int(O[0]), int(tau)) for tau in np.flatnonzero(~sel[i])]
    return np.array(eq, dtype=np.int64).reshape(-1, 3), np.array(ineq, dtype=np.int64).reshape(-1, 3)


def _features(ds: Dataset, P: np.ndarray):
    """Token differences D (m,d) and queries Zc (m,d) for pairs P (m,3) = (i, t, tau)."""
    i, t, tau = P[:, 0], P[:, 1], P[:, 2]
    return ds.X[i, t] - ds.X[i, tau], ds.Z[i]


def finite_part(ds: Dataset, selected: np.ndarray, s: np.ndarray) -> np.ndarray:
    r"""$W^{fin}$: least-norm solution of $(x_{it}-x_{i\tau})^\top Wz_i=\log s_{it}-\log s_{i\tau}$ on consecutive
    pairs of $\mathcal O_i$ (``lstsq``); raises :class:`InfeasibleError` if the system is inconsistent."""
    sel = _check(ds, selected)
    s = np.asarray(s, dtype=float)
    if s.shape != sel.shape or np.any(s[sel] <= 0) or not np.all(np.isfinite(s)):
        raise InputError(f"field 's' must have shape {sel.shape} and be positive on the selected sets")
    eq, _ = _pairs(ds, sel)
    d = ds.d
    if len(eq) == 0:
        return np.zeros((d, d))
    D, Zc = _features(ds, eq)
    F = np.einsum("md,me->mde", D, Zc).reshape(len(eq), d * d)
    rhs = np.log(s[eq[:, 0], eq[:, 1]]) - np.log(s[eq[:, 0], eq[:, 2]])
    w = np.linalg.lstsq(F, rhs, rcond=None)[0]
    res = np.abs(F @ w - rhs).max()
    if res > tol("kkt") * max(1.0, np.abs(rhs).max()):
        raise InfeasibleError(f"W^fin: the log-ratio system is inconsistent (residual {res:.3g})")
    return w.reshape(d, d)


def svmeq_fit(W_final: np.ndarray, W_fin: np.ndarray, W_svm: np.ndarray) -> tuple[np.ndarray, float]:
    r"""$W^{SVMeq}=W^{fin}+\hat RW^{svm}$ with the least-squares
    $\hat R=\langle W_k-W^{fin},W^{svm}\rangle/\|W^{svm}\|_F^2$."""
    W_final, W_fin, W_svm = (np.asarray(a, dtype=float) for a in (W_final, W_fin, W_svm))
    if not (W_final.shape == W_fin.shape == W_svm.shape):
        raise InputError("svmeq_fit: W_final, W_fin and W_svm must have the same shape")
    den = float(np.sum(W_svm * W_svm))
    if den == 0:
        raise InputError("svmeq_fit: W_svm is zero")
    R = float(np.sum((W_final - W_fin) * W_svm) / den)
    return W_fin + R * W_svm, R


def solve_gensvm(ds: Dataset, selected: np.ndarray, s: np.ndarray | None = None) -> SVMSolution:
    r"""Solve Gen-SVM for the sets ``selected`` (bool (n,T)); with ``s`` also $W^{fin}$ in ``extra["W_fin"]``.

    ``margins`` (n,T): $(x_{it_0}-x_{i\tau})^\top Wz_i$ for $\tau\notin\mathcal O_i$ (NaN on $\mathcal O_i$);
    ``multipliers`` (n,T): $\lambda_{i\tau}$; ``extra["eq_multipliers"]`` (n,T): $\nu$ of the pair
    $(t_k,t_{k+1})$ stored at $t_{k+1}$. Very large or small data are rescaled exactly first (:mod:`.scaling`;
    $W$ and $W^{fin}$ scale alike); with no constraints at all (every $\mathcal O_i$ a single token and $T=1$)
    $W=0$."""
    sel = _check(ds, selected)
    require(estimate(ds, "fro", "gensvm"), "Gen-SVM of this data set")
    scaled, scale = normalised(ds)
    return unscale_solution(_solve_gensvm(scaled, sel, s), scale)


def _solve_gensvm(ds: Dataset, sel: np.ndarray, s: np.ndarray | None) -> SVMSolution:
    import cvxpy as cp

    n, T, d = ds.n, ds.T, ds.d
    eq, ineq = _pairs(ds, sel)
    De, Ze = _features(ds, eq)
    Di, Zi = _features(ds, ineq)
    W = cp.Variable((d, d))
    cons = []
    if len(ineq):
        cons.append(margins_expr(Di, W, Zi) >= 1)
    if len(eq):
        cons.append(margins_expr(De, W, Ze) == 0)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W)), cons)
    status = solve(prob, "Gen-SVM")
    extra: dict = {"selected": sel}
    if status == "infeasible":
        Fi = np.einsum("md,me->mde", Di, Zi).reshape(len(ineq), -1)
        Fe = np.einsum("md,me->mde", De, Ze).reshape(len(eq), -1) if len(eq) else None
        res = farkas_lp(Fi, np.ones(len(ineq)), Fe)
        if res is None:
            raise SolverError("Gen-SVM: solver reports infeasible but no Farkas certificate exists")
        mu, nu = res
        comb = Di.T @ (mu[:, None] * Zi) + (De.T @ (nu[:, None] * Ze) if len(eq) else 0.0)
        resid = float(np.abs(comb).max() / max(mu.sum(), 1e-300))
        far = np.zeros((n, T))
        far[ineq[:, 0], ineq[:, 2]] = mu
        fe = np.zeros((n, T))
        if len(eq):
            fe[eq[:, 0], eq[:, 2]] = nu
        extra["farkas_eq"] = fe
        return SVMSolution(
            "infeasible", "fro", "gensvm", None, None, None,
            kkt={"farkas_residual": resid}, certificate={"kind": "farkas", "verified": resid <= tol("kkt")},
            farkas=far, extra=extra,
        )  # fmt: skip
    Wv = np.asarray(W.value)
    lam = np.maximum(np.asarray(cons[0].dual_value, dtype=float).ravel(), 0.0) if len(ineq) else np.zeros(0)
    nu = np.asarray(cons[-1].dual_value, dtype=float).ravel() if len(eq) else np.zeros(0)
    mi = np.einsum("md,de,me->m", Di, Wv, Zi)
    me = np.einsum("md,de,me->m", De, Wv, Ze)
    nu = -nu  # cvxpy's sign for equality duals; we report W = sum lam A + sum nu E
    comb = Di.T @ (lam[:, None] * Zi) + De.T @ (nu[:, None] * Ze)
    obj = float(np.sum(Wv * Wv))
    scale = max(obj, 1e-300)
    kkt = {
        "primal_feasibility": float(max(0.0, 1.0 - mi.min())) if len(mi) else 0.0,
        "equality_residual": float(np.abs(me).max()) if len(me) else 0.0,
        "dual_feasibility": float(max(0.0, -np.min(cons[0].dual_value))) if len(ineq) else 0.0,
        "complementary_slackness": float(np.abs(lam * (mi - 1.0)).max() / scale) if len(mi) else 0.0,
        "stationarity": float(np.abs(Wv - comb).max() / max(np.abs(Wv).max(), 1e-300)),
        "duality_gap": float(abs(obj - lam.sum()) / scale),
    }
    margins = np.full((n, T), np.nan)
    mult = np.zeros((n, T))
    if len(ineq):
        margins[ineq[:, 0], ineq[:, 2]] = mi
        mult[ineq[:, 0], ineq[:, 2]] = lam
    eqm = np.zeros((n, T))
    if len(eq):
        eqm[eq[:, 0], eq[:, 2]] = nu
    extra["eq_multipliers"] = eqm
    if s is not None:
        extra["W_fin"] = finite_part(ds, sel, s)
    support = [(int(i), int(t)) for i, t in np.argwhere(np.abs(margins - 1.0) <= tol("active"))]
    ok = max(kkt.values()) <= tol("kkt")
    alpha = np.argmax(sel, axis=-1)
    return SVMSolution(
        "optimal", "fro", "gensvm", alpha, Wv, obj, margins, mult, support,
        kkt=kkt, certificate={"kind": "kkt-float", "verified": bool(ok)}, extra=extra,
    )  # fmt: skip
