r"""Feasibility of Att-SVM($\alpha$) and Farkas certificates (THEORY §2, Gordan's alternative).

Att-SVM($\alpha$) is infeasible iff there is $\mu\ge0$, $\mu\ne0$ with $\sum_j\mu_jA_j=0$,
$A_j=D_jz_j^\top$ (equivalently: the dual $\max_{\lambda\ge0}\mathbf 1^\top\lambda-\frac12\lambda^\top G\lambda$
is unbounded, and $\mu$ is a direction of unboundedness, $G\mu=0$, $\mathbf 1^\top\mu>0$).

Certificates come from the working-set solver's diverging direction when it verifies, otherwise from the
LP $\{\mu\ge0:\ \sum_j\mu_jD_j(Q^\top z_j)^\top=0,\ \mathbf 1^\top\mu=1\}$ solved by HiGHS, with $Q$ an
orthonormal basis of $\mathrm{span}\{z_j\}$ (so only $d\cdot\mathrm{rank}(Z)$ equalities). A certificate is
accepted only if its relative residual $\|\sum_j\mu_jA_j\|_F/\sum_j\mu_j\|A_j\|_F\le$ ``tol('kkt')``.
"""

from __future__ import annotations

import numpy as np

from ..data import Dataset
from ..errors import SolverError
from ..tolerances import tol
from .constraints import Constraints, build


def farkas_residual(c: Constraints, mu: np.ndarray) -> float:
    r"""$\|\sum_j\mu_jA_j\|_F/\sum_j\mu_j\|A_j\|_F$ (0 is an exact certificate)."""
    mu = np.asarray(mu, dtype=float)
    S = c.D.T @ (mu[:, None] * c.Zc)
    scale = float(np.sum(mu * np.linalg.norm(c.D, axis=1) * np.linalg.norm(c.Zc, axis=1)))
    return float(np.linalg.norm(S)) / max(scale, np.finfo(float).tiny)


def farkas_lp(c: Constraints) -> np.ndarray | None:
    """A Farkas vector ``mu`` (m,) with sum 1 from an LP (HiGHS), or None when the LP is infeasible
    (then Att-SVM is feasible). Any other LP status raises :class:`SolverError`."""
    from scipy.optimize import linprog

    D, Zc = c.D, c.Zc
    U, sv, _ = np.linalg.svd(Zc.T, full_matrices=False)
    r = int(np.sum(sv > tol("rank") * max(sv.max(initial=0.0), np.finfo(float).tiny)))
    Zq = Zc @ U[:, :r]  # (m, r) coordinates of each z_j in an orthonormal basis of span{z}
    F = (D[:, :, None] * Zq[:, None, :]).reshape(D.shape[0], -1)  # (m, d*r)
    A_eq = np.vstack([F.T, np.ones((1, D.shape[0]))])
    b_eq = np.zeros(A_eq.shape[0])
    b_eq[-1] = 1.0
    res = linprog(np.zeros(D.shape[0]), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if res.status == 2:
        return None
    if res.status != 0:
        raise SolverError(f"Farkas LP (HiGHS) ended with status {res.status}: {res.message}")
    return np.maximum(np.asarray(res.x, dtype=float), 0.0)


def farkas_certificate(c: Constraints, ray: np.ndarray | None = None) -> np.ndarray | None:
    """A verified Farkas vector (m,), normalised to sum 1: the given ``ray`` if it verifies, else the LP's.
    None when the LP proves feasibility. Raises :class:`SolverError` if no certificate verifies."""
    if ray is not None and np.all(ray >= 0) and ray.sum() > 0:
        mu = ray / ray.sum()
        if farkas_residual(c, mu) <= tol("kkt"):
            return mu
    mu = farkas_lp(c)
    if mu is None:
        return None
    if farkas_residual(c, mu) > tol("kkt"):
        raise SolverError(f"Farkas certificate does not verify (residual {farkas_residual(c, mu):.2e})")
    return mu


def feasibility(ds: Dataset, alpha: np.ndarray | None = None) -> tuple[bool, np.ndarray | None]:
    r"""Is Att-SVM($\alpha$) feasible? Returns ``(True, None)`` or ``(False, mu)`` with the Farkas
    multipliers ``mu`` (N, T) ($\mu\ge0$, zero at $(i,\alpha_i)$, $\sum\mu A=0$ verified)."""
    from .frobenius import solve_dual

    c = build(ds, alpha)
    try:
        r = solve_dual(c.D, c.Zc)
        ray = r.ray if r.status == "ray" else None
        if r.status == "optimal":
            return True, None
    except SolverError:
        ray = None
    mu = farkas_certificate(c, ray)
    if mu is None:
        return True, None
    return False, c.to_grid(mu)
