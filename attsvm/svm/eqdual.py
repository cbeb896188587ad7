r"""The dual of the Frobenius equality SVM (:mod:`.eqsvm`), solved by a working-set method on its Gram matrix.

.. math:: \max_{\nu,\ \lambda\ge0}\ \mathbf 1^\top\lambda-\tfrac12x^\top Gx,\qquad x=(\nu,\lambda),\qquad
   G=(DD^\top)\circ(ZZ^\top),\qquad W=\sum_cx_cd_cz_c^\top,\qquad\|W\|_F^2=\mathbf 1^\top\lambda,

the dual of $\min\frac12\|W\|_F^2$ s.t. $d_c^\top Wz_c=0$ (the first ``m_eq`` rows, EQ; multipliers $\nu$ free)
and $d_c^\top Wz_c\ge1$ (the other rows, IN; $\lambda\ge0$). With $b=(0,\mathbf 1)$ the gradient $b-Gx$ is minus
the EQ margins and one minus the IN margins, so a violated inequality is an improving direction.

The method (Lawson–Hanson, with free variables): a *passive set* $P$ = a basis of the EQ rows (chosen once,
greedily, never left) and the IN rows $S$ with $\lambda_c>0$, kept linearly independent (the Schur complement of
a new row against $G_{PP}$, relative pivot ``PIV``); on $P$ it solves $G_{PP}x_P=b_P$ (Cholesky, refined); an
$S$ entry $\le0$ steps back towards the previous point and leaves $P$; then the most violated inequalities enter
(a block, one at a time once the dual objective stalls, as in :mod:`.dual`).
Every EQ row outside the basis is an exact-arithmetic combination of it, so its margin vanishes with the basis'.
A violated row whose feature lies in $\mathrm{span}\{A_P\}$ gives the direction $u=e_j-G_{PP}^{-1}G_{Pj}$
($Gu=0$, $b^\top u=1-\text{margin}_j>0$); stepping along it keeps $P$ independent, and when no $S$ entry of $u$
bounds the step the dual is unbounded: $\mu=u^+$ on IN, $\nu=u$ on EQ is a float Farkas pair
($\sum_{\mathrm{IN}}\mu_cA_c+\sum_{\mathrm{EQ}}\nu_cA_c=0$, $\mathbf 1^\top\mu>0$), to be made exact by
:func:`attsvm.svm.eqsvm.exact_farkas`.

The Gram matrix is formed once, dense ($m^2$ floats: the graph SVM's constraints are deduplicated, $m$ is
small); for rank-one features it is the product $(DD^\top)\circ(ZZ^\top)$ of two small Gram matrices. This module
knows nothing about certificates or next-token data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..errors import SolverError
from ..tolerances import tol

__all__ = ["EqDualResult", "solve_eqdual"]

#: relative pivot below which a row counts as linearly dependent on the passive set
PIV = 1e-10


@dataclass
class EqDualResult:
    r"""The working-set result: ``nu`` (m_eq,), ``lam`` (m_in,), ``W`` (d, d), ``margins`` (m,) of every row (EQ
    first), ``status`` ``"optimal"`` (every KKT residual $\le$ ``tol('kkt')``), ``"inaccurate"`` (finished, a
    residual above it), ``"ray"`` (``ray`` = the float Farkas pair ``(mu, nu)``) or ``"diverged"``; ``passive``
    the final passive set (row indices, EQ basis first), ``iterations``."""

    nu: np.ndarray
    lam: np.ndarray
    W: np.ndarray
    margins: np.ndarray
    status: str
    ray: tuple[np.ndarray, np.ndarray] | None
    passive: np.ndarray
    iterations: int


class _Passive:
    """The passive set with $G_{PP}$ and its lower Cholesky factor $L$ (LAPACK directly: these are small)."""

    def __init__(self, G: np.ndarray):
        self.G = G
        self.P: list[int] = []
        self.GP = np.zeros((0, 0))
        self.L = np.zeros((0, 0))

    def add(self, j: int) -> bool:
        """Append row ``j`` when it is independent of $P$ (Schur complement above ``PIV`` relative); False
        otherwise. The factor is extended, not recomputed."""
        g = self.G[self.P, j]
        if self.P:
            v, info = _trtrs(self.L, g, lower=1)
        else:
            v = g
        s = float(self.G[j, j] - v @ v)
        if not s > PIV * self.G[j, j]:
            return False
        k = len(self.P)
        L = np.zeros((k + 1, k + 1))
        L[:k, :k] = self.L
        L[k, :k] = v
        L[k, k] = np.sqrt(s)
        GP = np.empty((k + 1, k + 1))
        GP[:k, :k] = self.GP
        GP[:k, k] = GP[k, :k] = g
        GP[k, k] = self.G[j, j]
        self.L, self.GP, self.P = L, GP, [*self.P, j]
        return True

    def keep(self, mask: np.ndarray) -> None:
        """Keep the positions ``mask`` (refactored from the kept leading block on)."""
        drop = np.flatnonzero(~mask)
        if drop.size == 0:
            return
        f = int(drop[0])
        self.P = [p for p, k in zip(self.P, mask) if k]
        self.GP = self.GP[np.ix_(mask, mask)]
        rows = np.flatnonzero(mask[f:]) + f
        L21 = self.L[np.ix_(rows, np.arange(f))]
        L = np.zeros((len(self.P), len(self.P)))
        L[:f, :f] = self.L[:f, :f]
        L[f:, :f] = L21
        if rows.size:
            S = self.GP[f:, f:] - L21 @ L21.T
            try:
                L[f:, f:] = np.linalg.cholesky((S + S.T) / 2)
            except np.linalg.LinAlgError as exc:
                raise SolverError("equality SVM: passive Gram matrix lost definiteness") from exc
        self.L = L

    def solve(self, b: np.ndarray) -> np.ndarray:
        """$G_{PP}^{-1}b$ with up to two steps of iterative refinement."""
        s, _ = _potrs(self.L, b, lower=1)
        for _ in range(2):
            r = b - self.GP @ s
            if np.max(np.abs(r), initial=0.0) <= 1e-15 * max(1.0, float(np.max(np.abs(b), initial=0.0))):
                break
            s = s + _potrs(self.L, r, lower=1)[0]
        return s


_trtrs = sla.lapack.dtrtrs
_potrs = sla.lapack.dpotrs


def solve_eqdual(D: np.ndarray, Z: np.ndarray, m_eq: int, *, eps: float | None = None,
                 max_iter: int | None = None) -> EqDualResult:  # fmt: skip
    r"""Solve the dual of the module docstring for rows $d_c$ = ``D[c]``, $z_c$ = ``Z[c]`` ((m, d) float64, the
    ``m_eq`` EQ rows first). ``eps``: accepted IN violation $\max(1-\text{margin})$ (default ``tol('kkt')/10``).
    Raises :class:`SolverError` when the iteration budget runs out; see :class:`EqDualResult` for the statuses."""
    D = np.asarray(D, dtype=float)
    Z = np.asarray(Z, dtype=float)
    m, d = D.shape
    eps = tol("kkt") / 10 if eps is None else eps
    max_iter = 100 + 4 * m if max_iter is None else max_iter
    G = (D @ D.T) * (Z @ Z.T)
    dn = np.diag(G).copy()
    b = np.zeros(m)
    b[m_eq:] = 1.0
    x = np.zeros(m)
    st = _Passive(G)
    for c in range(m_eq):  # a basis of the equalities, in row order
        if dn[c] > 0:
            st.add(c)
    n_eq = len(st.P)
    ones_in = np.zeros(m, dtype=bool)
    ones_in[m_eq:] = True

    def finish(status: str, ray=None, it: int = 0) -> EqDualResult:
        P = np.array(st.P, dtype=np.int64)
        W = D[P].T @ (x[P][:, None] * Z[P])
        marg = np.einsum("md,md->m", D @ W, Z)
        if status == "optimal":
            status = "optimal" if max(_kkt(x, marg, W, D, Z, m_eq).values()) <= tol("kkt") else "inaccurate"
        return EqDualResult(x[:m_eq].copy(), x[m_eq:].copy(), W, marg, status, ray, P, it)

    if np.any(dn[m_eq:] == 0):  # a zero feature: the constraint 0 >= 1, e_j is a Farkas ray
        mu = (dn[m_eq:] == 0).astype(float)
        return finish("ray", (mu, np.zeros(m_eq)))
    marg = np.zeros(m)
    refused: set[int] = set()
    single, last = False, -np.inf
    big = 1e14 / float(dn[m_eq:].max())
    for it in range(1, max_iter + 1):
        viol = 1.0 - marg
        viol[~ones_in] = -np.inf
        viol[st.P] = -np.inf
        if refused:
            viol[list(refused)] = -np.inf
        cand = np.flatnonzero(viol > eps)
        if cand.size == 0:
            return finish("optimal", it=it)
        k = 1 if single else max(8, (len(st.P) - n_eq) // 2)
        if cand.size > k:
            cand = cand[np.argpartition(-viol[cand], k - 1)[:k]]
        cand = cand[np.argsort(-viol[cand], kind="stable")]
        j = int(cand[0])
        added = [int(c) for c in cand if st.add(int(c))]
        if not added:  # the most violated is dependent on P: step along u = e_j - G_PP^{-1} G_Pj
            c = st.solve(G[st.P, j])
            P = np.array(st.P)
            inS = np.arange(len(P)) >= n_eq
            pos = inS & (c > 1e-12 * max(1.0, float(np.abs(c).max(initial=0.0))))
            if not pos.any():
                mu = np.zeros(m - m_eq)
                mu[j - m_eq] = 1.0
                nu = np.zeros(m_eq)
                S, E = P[inS], P[~inS]
                mu[S - m_eq] = np.maximum(-c[inS], 0.0)
                nu[E] = -c[~inS]
                return finish("ray", (mu, nu), it)
            ratios = np.where(pos, x[P] / np.where(pos, c, 1.0), np.inf)
            kk = int(np.argmin(ratios))
            t = float(ratios[kk])
            x[P] -= t * c
            x[j] = t
            x[P[kk]] = 0.0
            keep = np.ones(len(P), dtype=bool)
            keep[kk] = False
            st.keep(keep)
            if not st.add(j):
                raise SolverError("equality SVM: exchange step lost linear independence")
        # inner loop: minimise on P, stepping back while an S entry is <= 0
        while True:
            P = np.array(st.P)
            s = st.solve(b[P])
            bad = (np.arange(len(P)) >= n_eq) & (s <= 0)
            if not bad.any():
                x[P] = s
                break
            xp = x[P]
            den = xp[bad] - s[bad]
            ratios = np.where(den > 0, xp[bad] / np.where(den > 0, den, 1.0), 0.0)
            a = float(ratios.min())
            xp = xp + a * (s - xp)
            drop = np.zeros(len(P), dtype=bool)
            drop[np.flatnonzero(bad)[ratios <= a * (1 + 1e-12)]] = True
            if single and drop[-1] and a == 0.0 and P[-1] == j:
                refused.add(j)  # the entering row cannot move: rounding; never offer it again
            xp[drop] = 0.0
            x[P] = np.where(np.arange(len(P)) >= n_eq, np.maximum(xp, 0.0), xp)
            st.keep(~drop)
        P = np.array(st.P)
        marg = G[:, P] @ x[P]
        obj = float(x[m_eq:].sum())  # the dual objective at a stationary point of P
        if not obj < big:
            return finish("diverged", it=it)
        single = obj <= last * (1 + 1e-15)  # block additions that stall continue one row at a time
        last = max(last, obj)
    raise SolverError(f"equality SVM: the working set did not converge in {max_iter} iterations")


def _kkt(x: np.ndarray, marg: np.ndarray, W: np.ndarray, D: np.ndarray, Z: np.ndarray, m_eq: int) -> dict:
    r"""Named KKT residuals at $(W,x)$: IN feasibility $\max(0,1-\min\text{margin})$, EQ residual
    $\max|\text{margin}|/\|W\|_F$, complementary slackness $\max|\lambda_c(\text{margin}_c-1)|/\max(1,\max\lambda)$,
    stationarity $\|W-\sum_cx_cA_c\|_F/\|W\|_F$ and the objective identity $|\|W\|_F^2-\mathbf 1^\top\lambda|/
    \|W\|_F^2$ (dual feasibility holds by construction)."""
    lam, mi = x[m_eq:], marg[m_eq:]
    w2 = float(np.sum(W * W))
    nW = max(np.sqrt(w2), np.finfo(float).tiny)
    scale = nW * float(np.max(np.linalg.norm(D, axis=1) * np.linalg.norm(Z, axis=1), initial=1.0))
    return {
        "primal_feasibility": float(max(0.0, 1.0 - mi.min(initial=np.inf))) if mi.size else 0.0,
        "equality_residual": float(np.abs(marg[:m_eq]).max(initial=0.0)) / max(scale, np.finfo(float).tiny),
        "complementary_slackness": float(np.abs(lam * (mi - 1.0)).max(initial=0.0))
        / max(1.0, float(lam.max(initial=0.0))),
        "stationarity": float(np.linalg.norm(W - D.T @ (x[:, None] * Z))) / nW,
        "objective_identity": abs(w2 - float(lam.sum())) / max(w2, np.finfo(float).tiny),
    }
