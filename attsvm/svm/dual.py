r"""The Frobenius Att-SVM dual, solved by a working-set (Lawson–Hanson type) method.

.. math:: \max_{\lambda\ge0}\ \mathbf 1^\top\lambda-\tfrac12\lambda^\top G\lambda,\qquad
          G=(DD^\top)\circ(Z_cZ_c^\top),\qquad W=D^\top\mathrm{diag}(\lambda)Z_c,\qquad \|W\|_F^2=\mathbf 1^\top\lambda,

the dual of $\min\frac12\|W\|_F^2$ s.t. $\langle W,A_j\rangle\ge1$, $A_j=D_jz_j^\top$ (THEORY §2).
The gradient of the dual objective is $\mathbf 1-G\lambda=\mathbf 1-\text{margins}(W)$, so a violated
margin is an improving direction. The method keeps a *passive set* $P$ whose features $\{A_j\}_{j\in P}$
are linearly independent (checked by a pivoted Cholesky of the Schur complement), solves
$G_{PP}s=\mathbf 1$ by Cholesky, steps back towards feasibility when some $s_j\le0$ (dropping the
blocking indices), and adds the most violated constraints in blocks. Only $G_{PP}$ and $G_{PB}$ for the
block $B$ are ever formed: since $|P|\le d\cdot\mathrm{rank}\,Z$ and every block has at most
$\max(16,|P|)$ rows (the first one at most $2\dim+16$), the memory is $O(m\,d+(d\cdot\mathrm{rank}Z)^2)$,
never $O(m^2)$ (:mod:`.budget` estimates it). A violated constraint whose feature lies in
$\mathrm{span}\{A_P\}$ gives a ray $u=e_j-G_{PP}^{-1}G_{Pj}$ with $Gu=0$, $\mathbf 1^\top u>0$: exchanging
along it keeps $P$ independent; when $u\ge0$ the dual is unbounded and $u$ is a Farkas direction
(confirmed by :mod:`.farkas`).

This module is the bottom of the Frobenius stack: it knows nothing about data sets, Farkas LPs or
certificates (see the layer order in :mod:`attsvm.svm`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..errors import SolverError
from ..tolerances import tol
from .blas import blas_threads


@dataclass
class DualResult:
    """Raw result on one constraint set: ``lam`` (m,), ``W`` (d,d), ``margins`` (m,), ``status``
    (``"optimal"``, ``"ray"``, ``"diverged"`` or ``"inaccurate"``), ``ray`` (m,) the diverging dual direction
    when ``status == "ray"``, ``iterations`` (outer iterations), ``passive`` the final passive set
    (see :func:`solve_dual` for the statuses)."""

    lam: np.ndarray
    W: np.ndarray
    margins: np.ndarray
    status: str
    ray: np.ndarray | None
    iterations: int
    passive: np.ndarray


def _gram(D: np.ndarray, Zc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""$G_{ab}=(D_aD_b^\top)\circ(Z_{c,a}Z_{c,b}^\top)$."""
    return (D[a] @ D[b].T) * (Zc[a] @ Zc[b].T)


def margins_of(D: np.ndarray, Zc: np.ndarray, W: np.ndarray) -> np.ndarray:
    r"""$\langle W,A_j\rangle=D_j^\top Wz_j$ for every row $j$ (shape (m,))."""
    return np.einsum("me,me->m", D @ W, Zc)


def combine(D: np.ndarray, Zc: np.ndarray, lam: np.ndarray) -> np.ndarray:
    r"""$W=\sum_j\lambda_jA_j=D^\top\mathrm{diag}(\lambda)Z_c$."""
    return D.T @ (lam[:, None] * Zc)


def solve_dual(
    D: np.ndarray,
    Zc: np.ndarray,
    *,
    eps: float | None = None,
    max_iter: int | None = None,
    init: np.ndarray | None = None,
    row: np.ndarray | None = None,
) -> DualResult:
    r"""Solve $\max_{\lambda\ge0}\mathbf 1^\top\lambda-\frac12\lambda^\top G\lambda$ for features $A_j=D_jz_j^\top$.

    ``D``, ``Zc``: (m, d) arrays. ``eps``: accepted violation $\max_j(1-\text{margin}_j)$ (default
    ``tol('kkt')/10``). ``init``: optional indices to seed the passive set (e.g. a previous active set);
    ``row``: the row (input) of each constraint, used to size the first block.

    ``status``: ``"optimal"`` (all named KKT residuals $\le$ ``tol('kkt')``), ``"ray"`` (a dual direction
    $u\ge0$ with $Gu\approx0$ was found: a *candidate* Farkas vector, verify it with
    :func:`attsvm.svm.farkas.farkas_certificate`), ``"diverged"`` (the dual objective ran away) or
    ``"inaccurate"`` (finished, but a KKT residual exceeds the tolerance). Only ``"optimal"`` is a solution;
    :func:`solve_fro` handles the other cases (Farkas LP, cvxpy+Clarabel fallback). Raises
    :class:`SolverError` when the iteration budget runs out. BLAS runs single-threaded inside.
    """
    with blas_threads(1):
        r = _solve_dual(D, Zc, eps=eps, max_iter=max_iter, init=init, row=row)
    if r.status == "optimal":
        k = kkt_residuals(r.lam, r.margins, r.W, D, Zc)
        if max(k.values()) > tol("kkt"):
            r.status = "inaccurate"
    return r


def _solve_dual(
    D: np.ndarray,
    Zc: np.ndarray,
    *,
    eps: float | None = None,
    max_iter: int | None = None,
    init: np.ndarray | None = None,
    row: np.ndarray | None = None,
) -> DualResult:
    """The working-set iteration behind :func:`solve_dual` (same arguments)."""
    m, d = D.shape
    eps = tol("kkt") / 10 if eps is None else eps
    max_iter = 100 + m if max_iter is None else max_iter
    lam = np.zeros(m)
    if m == 0:  # no constraints (T = 1): W = 0 is optimal
        return DualResult(lam, np.zeros((d, d)), np.zeros(0), "optimal", None, 0, np.zeros(0, dtype=np.int64))
    dn = np.einsum("md,md->m", D, D) * np.einsum("md,md->m", Zc, Zc)  # diag(G)
    if np.any(dn == 0.0):
        # A_j = 0: the constraint 0 >= 1 is violated by every W; the ray e_j certifies it.
        ray = (dn == 0.0).astype(float)
        return DualResult(lam, np.zeros((d, d)), np.zeros(m), "ray", ray, 0, np.zeros(0, dtype=np.int64))
    st = _Passive(D, Zc)
    marg = np.zeros(m)
    # the passive set never exceeds dim span{A_j} <= d * rank(Z), so a first block larger than a few times that
    # only costs memory (its Gram block is k0 x k0): cap it
    cap = 2 * st.dim + 16
    if init is None or not len(init):
        # first block: the constraints of largest norm-weighted need, 1/||A_j||_F (a cheap guess at the support)
        k0 = min(m, max(16, 2 * len(np.unique(row)) if row is not None else 16), cap)
        seed = np.argsort(dn, kind="stable")[:k0]
    else:
        seed = np.unique(np.asarray(init, dtype=np.int64))
        if seed.size > cap:
            seed = seed[np.argsort(dn[seed], kind="stable")[:cap]]
    single = False
    polished = False
    it = 0
    last_obj = -np.inf
    while True:
        it += 1
        if it > max_iter:
            raise SolverError(f"Frobenius Att-SVM active set did not converge in {max_iter} iterations")
        viol = 1.0 - marg
        viol[st.P] = -np.inf
        if seed is not None:
            cand, seed = seed, None
        else:
            cand = np.flatnonzero(viol > eps)
            if cand.size == 0:
                if st.P.size and np.max(np.abs(marg[st.P] - 1.0)) > eps and not polished:
                    # inaccurate passive solve: refactor from scratch, re-solve, re-check once
                    polished = True
                    st.remove(np.ones(st.P.size, dtype=bool))
                    lam[st.P] = _refined_solve(st.L, st.G)
                    marg = margins_of(D, Zc, combine(D[st.P], Zc[st.P], lam[st.P]))
                    continue
                break
            k = 1 if single else max(16, st.P.size)
            if cand.size > k:
                cand = cand[np.argpartition(-viol[cand], k - 1)[:k]]
            cand = cand[np.argsort(-viol[cand], kind="stable")]
        accepted = st.extend(cand, dn)
        if accepted == 0:
            # every candidate lies in span{A_P}: exchange along the ray of the most violated one
            j = int(cand[0])
            P = st.P
            g = _gram(D, Zc, P, np.array([j]))[:, 0]
            cvec = sla.cho_solve((st.L, True), g)
            pos = cvec > 1e-12 * max(1.0, np.abs(cvec).max(initial=0.0))
            if not np.any(pos):
                ray = np.zeros(m)
                ray[P] = np.maximum(-cvec, 0.0)
                ray[j] = 1.0
                return DualResult(lam, combine(D, Zc, lam), marg, "ray", ray, it, P)
            ratios = np.where(pos, lam[P] / np.where(pos, cvec, 1.0), np.inf)
            kk = int(np.argmin(ratios))
            t = float(ratios[kk])
            lam[P] -= t * cvec
            lam[j] = t
            lam[P[kk]] = 0.0
            keep = np.ones(P.size, dtype=bool)
            keep[kk] = False
            st.remove(keep)
            if st.extend(np.array([j]), dn) == 0:
                raise SolverError("Frobenius Att-SVM: exchange step lost linear independence")
        # --- inner loop: minimise over the passive set, stepping back when s_j <= 0
        if not single:
            # block mode: drop every index with s_j <= 0 at once (fast; a stall switches to single mode)
            while True:
                s = _refined_solve(st.L, st.G)
                if np.all(s > 0):
                    break
                lam[st.P[s <= 0]] = 0.0
                st.remove(s > 0)
            lam[st.P] = s
        removed = np.zeros(st.P.size, dtype=bool)
        Hcols: dict[int, np.ndarray] = {}
        s0 = _refined_solve(st.L, st.G) if single else None
        while single:
            P = st.P
            if removed.any():
                E = np.flatnonzero(removed)
                for e in E:
                    if e not in Hcols:
                        unit = np.zeros(P.size)
                        unit[e] = 1.0
                        Hcols[int(e)] = sla.cho_solve((st.L, True), unit, check_finite=False)
                H = np.stack([Hcols[int(e)] for e in E], axis=1)
                mu = np.linalg.solve(H[E], s0[E])
                s = s0 - H @ mu
                s[E] = 0.0
            else:
                s = s0
            lp = lam[P]
            bad = (s <= 0) & ~removed
            if not np.any(bad):
                lam[P] = np.where(removed, 0.0, s)
                break
            den = lp[bad] - s[bad]
            ratios = np.where(den > 0, lp[bad] / np.where(den > 0, den, 1.0), 0.0)
            a = float(ratios.min())
            lp = np.where(removed, 0.0, lp + a * (s - lp))
            drop = np.zeros(P.size, dtype=bool)
            drop[np.flatnonzero(bad)[ratios <= a * (1 + 1e-12)]] = True
            lp[drop] = 0.0
            lam[P] = np.maximum(lp, 0.0)
            removed |= drop
            if removed.sum() * 3 > P.size:
                st.remove(~removed)
                removed = np.zeros(st.P.size, dtype=bool)
                Hcols = {}
                s0 = _refined_solve(st.L, st.G)
        if removed.any():
            st.remove(~removed)
        P = st.P
        if P.size == 0:  # block mode dropped everything: restart one constraint at a time
            marg = np.zeros(m)
            single = True
            continue
        W = combine(D[P], Zc[P], lam[P])
        marg = margins_of(D, Zc, W)
        obj = float(lam[P].sum())
        if not np.isfinite(obj) or obj > 1e14 * float(1.0 / dn.max()):
            # the dual objective is running away: report a suspected ray (an LP decides, see farkas)
            return DualResult(lam, W, marg, "diverged", None, it, P)
        # block additions that stall fall back to one constraint at a time (classic Lawson–Hanson)
        single = obj <= last_obj * (1 + 1e-15)
        last_obj = max(last_obj, obj)
    P = st.P
    W = combine(D[P], Zc[P], lam[P])
    return DualResult(lam, W, marg, "optimal", None, it, P)


class _Passive:
    r"""The passive set $P$ with $G_{PP}$ and its Cholesky factor $L$ (kept linearly independent)."""

    piv_tol = 1e-10

    def __init__(self, D: np.ndarray, Zc: np.ndarray):
        self.D, self.Zc = D, Zc
        sv = np.linalg.svd(Zc, compute_uv=False)
        self.dim = D.shape[1] * int(np.sum(sv > 1e-12 * sv.max(initial=0.0)))
        self.P = np.zeros(0, dtype=np.int64)
        self.G = np.zeros((0, 0))
        self.L = np.zeros((0, 0))

    def extend(self, cand: np.ndarray, dn: np.ndarray) -> int:
        """Append the candidates whose features are independent of span{A_P} (pivoted Cholesky of the Schur
        complement, relative pivot threshold); returns how many were appended. The factor is extended, not
        recomputed."""
        D, Zc, P = self.D, self.Zc, self.P
        G_BB = _gram(D, Zc, cand, cand)
        if P.size:
            G_PB = _gram(D, Zc, P, cand)
            V = sla.solve_triangular(self.L, G_PB, lower=True)
            S = G_BB - V.T @ V
        else:
            G_PB = np.zeros((0, cand.size))
            V = G_PB
            S = G_BB
        sq = np.sqrt(dn[cand])
        Sn = S / np.outer(sq, sq)
        Sn = (Sn + Sn.T) / 2
        c, piv, rank, _info = sla.lapack.dpstrf(Sn, lower=1, tol=self.piv_tol)
        r = min(int(rank), self.dim - P.size)  # never more than dim span{A_j} = d * rank(Z)
        if r == 0:
            return 0
        sel = piv[:r] - 1
        Ls = np.tril(c[:r, :r]) * sq[sel][:, None]
        p = P.size
        L = np.zeros((p + r, p + r))
        L[:p, :p] = self.L
        L[p:, :p] = V[:, sel].T
        L[p:, p:] = Ls
        G = np.empty((p + r, p + r))
        G[:p, :p] = self.G
        G[:p, p:] = G_PB[:, sel]
        G[p:, :p] = G_PB[:, sel].T
        G[p:, p:] = G_BB[np.ix_(sel, sel)]
        self.P, self.G, self.L = np.concatenate([P, cand[sel]]), G, L
        return r

    def remove(self, keep: np.ndarray) -> None:
        """Keep only the positions ``keep`` (bool mask). The factor's leading block before the first removed
        position is kept; only the trailing Schur complement is refactored."""
        drop = np.flatnonzero(~keep)
        f = int(drop[0]) if drop.size else keep.size
        tail = np.flatnonzero(keep[f:]) + f
        L11 = self.L[:f, :f]
        L21 = self.L[np.ix_(tail, np.arange(f))]
        self.P = self.P[keep]
        self.G = self.G[np.ix_(keep, keep)]
        S = self.G[f:, f:] - L21 @ L21.T
        L = np.zeros((self.P.size, self.P.size))
        L[:f, :f] = L11
        L[f:, :f] = L21
        L[f:, f:] = _chol((S + S.T) / 2)
        self.L = L


def _refined_solve(L: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Solve $G s=\\mathbf 1$ with the Cholesky factor ``L`` plus up to two steps of iterative refinement."""
    one = np.ones(G.shape[0])
    s = sla.cho_solve((L, True), one, check_finite=False)
    for _ in range(2):
        r = one - G @ s
        if np.max(np.abs(r), initial=0.0) <= 1e-14:
            break
        s = s + sla.cho_solve((L, True), r, check_finite=False)
    return s


def _chol(G: np.ndarray) -> np.ndarray:
    if G.shape[0] == 0:
        return np.zeros((0, 0))
    try:
        return np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        # numerically semidefinite after many exchanges: a tiny relative jitter keeps the factor usable
        jit = 1e-14 * float(np.max(np.diag(G)))
        try:
            return np.linalg.cholesky(G + jit * np.eye(G.shape[0]))
        except np.linalg.LinAlgError as exc:
            raise SolverError("Frobenius Att-SVM: passive-set Gram matrix is not positive definite") from exc


def kkt_residuals(lam: np.ndarray, margins: np.ndarray, W: np.ndarray, D: np.ndarray, Zc: np.ndarray) -> dict:
    r"""Named KKT residuals of Att-SVM at $(W,\lambda)$:

    primal feasibility $\max(0,1-\min_j\text{margin}_j)$, dual feasibility $\max(0,-\min\lambda)$,
    complementary slackness $\max_j|\lambda_j(\text{margin}_j-1)|$ (relative to $\max(1,\max\lambda)$),
    stationarity $\|W-\sum\lambda A\|_F/\|W\|_F$, objective identity $|\|W\|_F^2-\mathbf 1^\top\lambda|/\|W\|_F^2$.
    """
    Wl = combine(D, Zc, lam)
    nW = float(np.linalg.norm(W))
    w2 = nW**2
    return {
        "primal_feasibility": float(max(0.0, 1.0 - margins.min(initial=np.inf))) if margins.size else 0.0,
        "dual_feasibility": float(max(0.0, -lam.min(initial=0.0))),
        "complementary_slackness": float(np.max(np.abs(lam * (margins - 1.0)), initial=0.0))
        / max(1.0, float(lam.max(initial=0.0))),
        "stationarity": float(np.linalg.norm(W - Wl)) / max(nW, np.finfo(float).tiny),
        "objective_identity": abs(w2 - float(lam.sum())) / max(w2, np.finfo(float).tiny),
    }
