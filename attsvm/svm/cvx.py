r"""Shared helpers for the cvxpy-based programs: solver call with status check, vectorised margins,
Farkas certificates by linear programming, and the KKT residuals of linear-inequality programs.

Every program here has constraints $\langle W,A_j\rangle\ge b_j$ (rows of a feature matrix $F$,
$F_j=\mathrm{vec}\,A_j$), optionally with equalities $\langle W,E_k\rangle=c_k$. Farkas' lemma:
$\{F w\ge b,\ Ew=c\}$ is empty iff there are $\mu\ge0$ and free $\nu$ with $F^\top\mu+E^\top\nu=0$ and
$b^\top\mu+c^\top\nu>0$.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import SolverError

SOLVER = "CLARABEL"
#: tight Clarabel settings used by every program of this package
TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "tol_ktratio": 1e-8, "max_iter": 400}
#: fallback when a tight tolerance cannot be reached (power cones)
MEDIUM = {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8, "tol_ktratio": 1e-6, "max_iter": 400}

LOOSE = {"tol_gap_abs": 1e-7, "tol_gap_rel": 1e-7, "tol_feas": 1e-7, "tol_ktratio": 1e-5, "max_iter": 400}


def margins_expr(D: np.ndarray, W, Zc: np.ndarray):
    r"""The cvxpy vector $(D_j^\top Wz_j)_j$ as one expression: ``sum(multiply(D @ W, Zc), axis=1)``."""
    import cvxpy as cp

    return cp.sum(cp.multiply(D @ W, Zc), axis=1)


def solve(prob, what: str, **settings: Any) -> str:
    """Solve ``prob`` with Clarabel (tight tolerances unless overridden); return ``"optimal"`` or
    ``"infeasible"``; any other status raises :class:`SolverError`."""
    import cvxpy as cp

    status = None
    for base in (TIGHT, MEDIUM, LOOSE):  # a tolerance the solver cannot reach is retried, looser
        opts = dict(base, **settings)
        try:
            with warnings.catch_warnings():  # the status is checked below; cvxpy's warning adds nothing
                warnings.simplefilter("ignore", UserWarning)
                prob.solve(solver=SOLVER, **opts)
        except cp.error.SolverError as exc:
            raise SolverError(f"{what}: Clarabel failed ({exc})") from exc
        status = prob.status
        if status == cp.OPTIMAL:
            return "optimal"
        if status == cp.INFEASIBLE:
            return "infeasible"
    raise SolverError(f"{what}: solver status {status!r} (not optimal)")


def farkas_lp(F: np.ndarray, b: np.ndarray, E: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    r"""Farkas certificate of $\{w: Fw\ge b,\ Ew=0\}=\emptyset$ by an LP (scipy HiGHS).

    Finds $\mu\ge0$, $\nu$ free with $F^\top\mu+E^\top\nu=0$, $b^\top\mu=1$. Returns ``(mu, nu)`` or None
    when no certificate exists (the system is feasible)."""
    from scipy.optimize import linprog

    m, p = F.shape
    k = 0 if E is None else E.shape[0]
    A_eq = np.zeros((p + 1, m + k))
    A_eq[:p, :m] = F.T
    if k:
        A_eq[:p, m:] = E.T
    A_eq[p, :m] = b
    b_eq = np.zeros(p + 1)
    b_eq[p] = 1.0
    bounds = [(0, None)] * m + [(None, None)] * k
    res = linprog(np.ones(m + k) * 0.0, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status == 2:  # LP infeasible: no certificate
        return None
    if res.status != 0:
        raise SolverError(f"Farkas LP: HiGHS status {res.status} ({res.message})")
    mu = np.maximum(res.x[:m], 0.0)
    return mu, res.x[m:]


def linear_kkt(
    margins: np.ndarray, lam: np.ndarray, b: np.ndarray, station: float, scale: float = 1.0
) -> dict[str, float]:
    r"""Named KKT residuals of a program with constraints $g_j=\text{margin}_j-b_j\ge0$, multipliers $\lambda$:
    ``primal_feasibility`` $\max_j(b_j-\text{margin}_j)_+$, ``dual_feasibility`` $\max_j(-\lambda_j)_+$,
    ``complementary_slackness`` $\max_j|\lambda_j g_j|/\text{scale}$, and the given ``stationarity``."""
    g = margins - b
    return {
        "primal_feasibility": float(max(0.0, -g.min())) if g.size else 0.0,
        "dual_feasibility": float(max(0.0, -lam.min())) if lam.size else 0.0,
        "complementary_slackness": float(np.abs(lam * g).max() / scale) if g.size else 0.0,
        "stationarity": float(station),
    }
