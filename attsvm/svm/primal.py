r"""The Frobenius Att-SVM primal, solved directly: an *independent* solution for checks of the solver.

.. math:: \min_W\ \tfrac12\|W\|_F^2\quad\text{s.t.}\quad(x_{i\alpha_i}-x_{it})^\top Wz_i\ge1\quad(t\ne\alpha_i)

over a full $d\times d$ variable with cvxpy + Clarabel (named, tight tolerances), the constraints formed here
from the arrays (:func:`direct_rows`). It shares no code with the working-set solver (:mod:`.frobenius`), its
constraint builder (:mod:`.constraints`) or its cvxpy fallback (:mod:`.reference`), and nothing in it favours
the row space of $Z$ (only optimality does), so the claims and tests that check the solver compare against
it. A status other than ``optimal`` raises :class:`~attsvm.errors.SolverError`; no value is read before.
"""

from __future__ import annotations

import numpy as np

from ..data import Dataset
from ..errors import SolverError

#: Clarabel settings (tight: comparisons against the fast solver are at ``tol('svm_ref_rtol')``)
CLARABEL = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "max_iter": 500}


def direct_rows(ds: Dataset) -> tuple[np.ndarray, np.ndarray]:
    r"""$D_{it}=x_{i\alpha_i}-x_{it}$ and $z_i$ for every $t\ne\alpha_i$ (row-major in $(i,t)$), straight from the
    arrays of one cross-attention data set: (m, d) each, $m=n(T-1)$."""
    n, T, d = ds.X.shape
    a = np.asarray(ds.selection)
    other = np.arange(T)[None, :] != a[:, None]  # (n, T)
    D = (ds.X[np.arange(n), a][:, None, :] - ds.X)[other]
    Zc = np.broadcast_to(ds.Z[:, None, :], (n, T, d))[other]
    return D, Zc


def solve_primal(ds: Dataset) -> np.ndarray:
    r"""$W^{mm}_\alpha$ (d, d) by the primal above (module docstring); :class:`SolverError` unless Clarabel reports
    ``optimal``."""
    import cvxpy as cp

    D, Zc = direct_rows(ds)
    W = cp.Variable((ds.d, ds.d))
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W)), [cp.sum(cp.multiply(D @ W, Zc), axis=1) >= 1])
    try:
        prob.solve(solver=cp.CLARABEL, **CLARABEL)
    except cp.error.SolverError as exc:
        raise SolverError(f"independent Att-SVM primal (Clarabel) failed: {exc}") from exc
    if prob.status != cp.OPTIMAL:
        raise SolverError(f"independent Att-SVM primal (Clarabel) status {prob.status!r}")
    return np.asarray(W.value, dtype=float)
