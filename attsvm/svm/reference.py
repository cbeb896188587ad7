r"""Reference path for Frobenius Att-SVM: the primal QP in cvxpy, solved by Clarabel (named explicitly).

.. math:: \min_W\ \|W\|_F^2\quad\text{s.t.}\quad \big((DW)\circ Z_c\big)\mathbf 1\ge\mathbf 1,

i.e. $\langle W,A_j\rangle=D_j^\top Wz_j\ge1$ for every constraint $j$, written as ONE vectorised cvxpy
constraint (never one expression per constraint). The multipliers are the constraint's dual values
($\lambda_j$, scaled so that $W=\sum_j\lambda_jA_j$). Used by the tests as an independent check of the
working-set solver, and as its fallback. A status other than optimal raises :class:`SolverError`
(``infeasible`` raises :class:`InfeasibleError`).
"""

from __future__ import annotations

import numpy as np

from ..data import Dataset
from ..errors import InfeasibleError, SolverError
from .constraints import Constraints, build

CLARABEL_SETTINGS = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "max_iter": 500}


def solve_reference_constraints(c: Constraints, rhs: float = 1.0) -> tuple[np.ndarray, np.ndarray, float]:
    r"""(W, lam, objective) for one constraint set, by cvxpy + Clarabel.

    ``rhs`` $=s>0$ solves the equivalent program $\min\|W_s\|_F^2$ s.t. $\langle W_s,A_j\rangle\ge s$ and returns
    $W=W_s/s$, $\lambda=\lambda_s/s$: with $s$ of the order of the instance's largest normalised margin, a
    barely-feasible instance (whose $W^{mm}$ has a huge norm) becomes an $O(1)$ problem for the interior point."""
    import cvxpy as cp

    d = c.D.shape[1]
    W = cp.Variable((d, d))
    cons = [cp.sum(cp.multiply(c.D @ W, c.Zc), axis=1) >= rhs]
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W)), cons)
    try:
        prob.solve(solver=cp.CLARABEL, **CLARABEL_SETTINGS)
    except cp.error.SolverError as exc:
        raise SolverError(f"Clarabel failed on Frobenius Att-SVM: {exc}") from exc
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleError("Frobenius Att-SVM is infeasible (Clarabel)")
    if prob.status != cp.OPTIMAL:
        raise SolverError(f"Clarabel returned status {prob.status!r} for Frobenius Att-SVM")
    Wv = np.asarray(W.value, dtype=float) / rhs
    lam = np.maximum(np.asarray(cons[0].dual_value, dtype=float).reshape(-1), 0.0) / rhs
    return Wv, lam, float(np.sum(Wv * Wv))


def solve_reference(ds: Dataset, alpha: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    r"""$(W^{mm}_\alpha,\lambda,\|W^{mm}_\alpha\|_F^2)$ of one data set by cvxpy + Clarabel."""
    return solve_reference_constraints(build(ds, alpha))
