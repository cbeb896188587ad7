r"""The finite part $W^{fin}$ of next-token GD (claim ``ntp-finite-part``, arXiv 2403.08081, THEORY §7), solved in
float64 and then *proved* to lie within a stated Frobenius distance of the float answer.

Definition
----------
Let $A_c=d_cz_c^\top$ ($c=1..m$; rows of ``D_eq``, ``Z_eq``; ``D_eq`` may also be a pair ``(P, N)`` of (m, d)
arrays meaning $d_c=P_c-N_c$ *exactly* — pass $(e_y, e_j)$ rather than the float64 difference, whose rounding
makes exactly dependent directions independent: that is detected and refused) be the equality directions of the
graph SVM ($d_c=e_y-e_j$ for two tokens $y,j$ of one SCC of $\mathcal G^{(k)}$, $z_c=e_k$), $S=\mathrm{span}\{A_c\}$,
and let ``reduced_mask`` $R_i$ hold the positions of sequence $i$ whose token lies in the label's SCC (a superset of
the label set $m_i$). The loss on the reduced sequences is

.. math:: L_{fin}(W)=\frac1n\sum_i\Big[\operatorname{LSE}_{t\in R_i}a_{it}-\operatorname{LSE}_{t\in m_i}a_{it}\Big],
   \qquad a_{it}=x_{it}^\top Wz_i,

(:func:`attsvm.ntp.loss.loss` with ``visible=reduced_mask``) and $W^{fin}=\arg\min_{W\in S}L_{fin}(W)$; $W^{fin}=0$
when $S=\{0\}$ ($m=0$).

Existence and uniqueness (graph data)
-------------------------------------
The label occurrences of a sequence share one embedding $x_{y_i}$ (required; an :class:`InputError` otherwise),
so $L_{fin}$ is convex (:mod:`attsvm.ntp.loss`) and its label term is the linear $a_{iy_i}+\log|m_i|$.
*Coercive on $S$:* let $D\in S$ be a recession direction, $L_{fin}(W+tD)$ bounded as $t\to\infty$, and
$b_{it}=x_{it}^\top Dz_i$. Since $\operatorname{LSE}\ge\max$, the $i$-th term is at least
$t(\max_{R_i}b_i-b_{iy_i})-\log|m_i|$, so $b_{it}\le b_{iy_i}$ for all $t\in R_i$: $(e_y-e_j)^\top De_k\ge0$ for
every edge $y\to j$ of $\mathcal G^{(k)}$ inside an SCC (each such edge comes from a sequence with label $y$, query
$k$ and $j$ in the label's SCC, i.e. $j\in R_i$). Round a cycle of the SCC through $y$ and $j$ these nonnegative
numbers telescope to $0$, so each is $0$: the logits $e^\top De_k$ are constant on every SCC, hence
$\langle D,A_c\rangle=0$ for every $c$, i.e. $D\perp S$; with $D\in S$, $D=0$. A convex function without a
nonzero recession direction has bounded sublevel sets, so a minimiser exists. *Strictly convex on $S$:* by the
Hessian formula of :mod:`attsvm.ntp.loss`, $U^\top\nabla^2L_{fin}U=\frac1n\sum_iq_i[\mathrm{Var}_{s^c_i}(u_i)+
(1-q_i)(u_{iy_i}-\bar u^c_i)^2]$ with $u_{it}=x_{it}^\top Uz_i$, all softmax weights positive on $R_i$; it vanishes
only if $u_i$ is constant on every $R_i$, which (same cycle argument) forces $U\perp S$. So $W^{fin}$ is unique.

The certificate below does not rely on this argument: when it succeeds it proves existence, uniqueness and the
distance bound by itself, for whatever $S$ and masks it is given.

The float64 solve
-----------------
Damped Newton (backtracking Armijo, full steps once the Newton decrement $\lambda^2=g^\top H^{-1}g<10^{-8}$) in the
coordinates of an orthonormal basis of $S$ (the right singular vectors of the $m\times d^2$ matrix of the
$\mathrm{vec}A_c$; the rank is the exact rational rank), from $W=0$.

The proof (``certify=True``), python-flint ball arithmetic (arb, 256 bits)
-------------------------------------------------------------------------
1. *Exact basis and candidate.* An exactly linearly independent subset $B_1..B_p$ of the $A_c$ (pivots of the
   exact integer row reduction of the $\mathrm{vec}A_c$, :func:`attsvm.svm.exact.to_integers`), so
   $S=\mathrm{span}\{B_k\}$ with the Gram matrix $G_{kl}=\langle B_k,B_l\rangle=(d_k^\top d_l)(z_k^\top z_l)$
   (enclosed). The candidate is $\tilde W=\sum_k\tilde\theta_kB_k\in S$ for exact (256-bit) coordinates
   $\tilde\theta$: the float64 least-squares coordinates of the float answer, then up to four Newton steps in
   ball arithmetic (midpoint solves; a step is kept only when it lowers the gradient norm), so that the
   candidate is not limited by float64. The reported ``W`` is the float rounding of $\tilde W$
   (:func:`finite_part`) or the given matrix (:func:`certify_candidate`); $\|W-\tilde W\|_F$ is enclosed.
2. *Gradient.* With $u^{(k)}_{it}=x_{it}^\top B_kz_i$ (exact products of the input floats) the restricted gradient
   $\gamma_k=\langle\nabla L_{fin}(\tilde W),B_k\rangle=\frac1n\sum_i\sum_{t\in R_i\setminus m_i}s_{it}
   (u^{(k)}_{it}-u^{(k)}_{iy_i})$ is enclosed, and $\|P_S\nabla L_{fin}(\tilde W)\|_F=\sqrt{\gamma^\top
   G^{-1}\gamma}\le g$ (Riesz: $\sup\{\gamma^\top\phi:\phi^\top G\phi\le1\}$; $G^{-1}\gamma$ by a ball solve).
3. *Curvature at the candidate.* The restricted Hessian $H_{kl}=\frac1n\sum_iq_i[\sum_{t\in c_i}s^c_{it}
   (u^{(k)}_{it}-\bar u^{(k)}_i)(u^{(l)}_{it}-\bar u^{(l)}_i)+(1-q_i)(u^{(k)}_{iy}-\bar u^{(k)}_i)
   (u^{(l)}_{iy}-\bar u^{(l)}_i)]$ ($c_i=R_i\setminus m_i$, $q_i=\sum_{c_i}s_{it}$, $\bar u_i=\sum_{c_i}s^c_{it}u_{it}$,
   the exact law-of-total-variance form of $\mathrm{Cov}_s-\mathrm{Cov}_{s^m}$ on vectors constant on $m_i$) is
   enclosed; with $\mu_0=\frac12\lambda_{\min}(H,G)$ (a float, from the midpoints) a ball Cholesky of
   $H-\mu_0G$ with every pivot provably $>0$ proves $H\succeq\mu_0G$ (the exact matrix lies in the ball matrix, so
   its exact Cholesky pivots lie in the computed balls; a symmetric matrix with positive Cholesky pivots is
   positive definite).
4. *Curvature on a ball.* For $W\in S$ with $\|W-\tilde W\|_F\le r$ every logit moves by at most
   $\delta=r\kappa$, $\kappa=\max_{i,t\in R_i}\|x_{it}\|\|z_i\|$ (Cauchy–Schwarz). The Hessian quadratic form in a
   direction $U$ is $\frac1n\sum_i\frac12\sum_{t,\tau\in R_i}s_{it}s_{i\tau}(u_{it}-u_{i\tau})^2$ ($u_i$ is constant
   on $m_i$, so the $\mathrm{Cov}_{s^m}$ term vanishes), and each $s_{it}=e^{a_{it}}/\sum_\tau e^{a_{i\tau}}$ changes
   by a factor in $[e^{-2\delta},e^{2\delta}]$, so each product $s_ts_\tau$ by one in $[e^{-4\delta},e^{4\delta}]$:
   $\nabla^2L_{fin}(W)\succeq e^{-4\delta}\nabla^2L_{fin}(\tilde W)\succeq\mu\,I$ on $S$ (Frobenius metric, i.e.
   $G$ in coordinates), $\mu=e^{-4r\kappa}\mu_0$.
5. *Conclusion.* Pick $r$ (a few fixed-point steps of $r\leftarrow\frac54\cdot2g/\mu(r)$) with $2g/\mu(r)<r$ proved.
   For $W\in S$ on the sphere $\|W-\tilde W\|_F=r$, Taylor with the curvature bound gives
   $L_{fin}(W)\ge L_{fin}(\tilde W)-gr+\frac\mu2r^2>L_{fin}(\tilde W)$; by convexity of $L_{fin}$ on $S$ every $W$
   outside the ball is worse still (the segment from $\tilde W$ crosses the sphere). The minimum over the compact
   ball is therefore attained inside it and is the global minimum over $S$; it is unique (a second minimiser
   would make the segment between them, which enters the ball, a set of minimisers, against strict convexity
   there). At $W^{fin}$ the restricted gradient is 0, so strong monotonicity on the ball gives
   $\mu\|\tilde W-W^{fin}\|_F^2\le\langle P_S\nabla L_{fin}(\tilde W),\tilde W-W^{fin}\rangle\le
   g\|\tilde W-W^{fin}\|_F$, and

   .. math:: \|W-W^{fin}\|_F\ \le\ g/\mu+\|W-\tilde W\|_F\ =:\ \text{radius}\quad\text{(upper endpoint, rounded up).}

``verified`` is True only when every step above was proved; then ``radius`` is a theorem about the float inputs
(``X``, ``Z``, ``D_eq``, ``Z_eq`` taken as exact binary numbers). Otherwise ``radius`` is ``inf``.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError, SolverError
from ..svm.exact import to_integers
from .loss import gradient, label_embeddings_shared, logit_hessian, logits, loss

if TYPE_CHECKING:
    from .data import NTPData

__all__ = ["FinitePart", "finite_part", "finite_part_of", "certify_candidate", "verify", "PREC_BITS"]

PREC_BITS = 256
_MAX_NEWTON = 200
_POLISH = 4


@dataclass(frozen=True)
class FinitePart:
    r"""$W^{fin}$ with its proof (module docstring).

    ``W`` (d, d) float64; ``radius`` a proved upper bound of $\|W-W^{fin}\|_F$ (rounded up; ``inf`` unless
    ``verified``); ``grad_bound`` the proved bound $g\ge\|P_S\nabla L_{fin}(\tilde W)\|_F$ at the exact candidate
    $\tilde W\in S$; ``mu_lower`` the proved strong-convexity modulus $\mu$ of $L_{fin}$ on $S\cap B(\tilde W,r)$
    (rounded down; ``inf`` when $S=\{0\}$); ``grad_bound``/``mu_lower`` are NaN when not certified;
    ``iterations`` Newton iterations; ``basis_rank`` $p=\dim S$."""

    W: np.ndarray
    radius: float
    grad_bound: float
    mu_lower: float
    iterations: int
    verified: bool
    basis_rank: int


# ---------------------------------------------------------------------- inputs
def _directions(D_eq, d: int) -> tuple[np.ndarray, np.ndarray]:
    r"""``(P, N)`` with $d_c=P_c-N_c$ exactly: ``D_eq`` is an (m, d) array ($N=0$) or a pair ``(P, N)``."""
    if isinstance(D_eq, tuple):
        if len(D_eq) != 2:
            raise InputError("finite_part: D_eq as a tuple must be the pair (plus, minus)")
        P, N = (np.asarray(a, dtype=np.float64) for a in D_eq)
    else:
        P = np.asarray(D_eq, dtype=np.float64)
        N = np.zeros_like(P)
    P = P.reshape(-1, d) if P.size else np.zeros((0, d))
    N = N.reshape(-1, d) if N.size else np.zeros((0, d))
    if P.shape != N.shape:
        raise InputError(f"finite_part: the pair D_eq = (plus, minus) needs two arrays of one shape (m,{d})")
    return P, N


def _inputs(X, Z, label_mask, reduced_mask, D_eq, Z_eq):
    X = np.asarray(X, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise InputError(f"finite_part: expected X (n,T,d) and Z (n,d), got {X.shape} and {Z.shape}")
    d = X.shape[2]
    P, N = _directions(D_eq, d)
    Ze = np.asarray(Z_eq, dtype=np.float64).reshape(-1, d) if np.size(Z_eq) else np.zeros((0, d))
    if P.shape != Ze.shape:
        raise InputError(f"finite_part: D_eq and Z_eq must both be (m,{d}), got {P.shape} and {np.shape(Z_eq)}")
    for name, a in (("X", X), ("Z", Z), ("D_eq", P), ("D_eq", N), ("Z_eq", Ze)):
        if not np.all(np.isfinite(a)):
            raise InputError(f"finite_part: {name} has a non-finite entry")
    m = np.asarray(label_mask)
    red = np.asarray(reduced_mask)
    for name, a in (("label_mask", m), ("reduced_mask", red)):
        if a.dtype != np.bool_ or a.shape != X.shape[:2]:
            raise InputError(f"finite_part: {name} must be bool of shape {X.shape[:2]}, got {a.dtype} {a.shape}")
    if np.any(m & ~red):
        raise InputError("finite_part: reduced_mask must contain every label position")
    if not np.all(np.any(m, axis=-1)):
        raise InputError("finite_part: every sequence needs a label position")
    if not label_embeddings_shared(X, m):
        raise InputError("finite_part: the label positions of a sequence have distinct embeddings (L_fin not convex)")
    return X, Z, m, red, (P, N), Ze


def _independent(PN: tuple[np.ndarray, np.ndarray], Ze: np.ndarray) -> np.ndarray:
    r"""Indices of an exactly linearly independent subset of $\{d_cz_c^\top\}$, $d_c=P_c-N_c$, spanning $S$ (exact
    integer row reduction; its length is the exact rank $p$)."""
    from flint import fmpz_mat

    P, N = PN
    m, d = P.shape
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    NPN, _ = to_integers(np.concatenate([P, N]))
    ND = NPN[:m] - NPN[m:]
    NZ, _ = to_integers(Ze)
    cols = [[int(ND[c, a]) * int(NZ[c, b]) for a in range(d) for b in range(d)] for c in range(m)]
    MT = fmpz_mat(d * d, m, [cols[c][j] for j in range(d * d) for c in range(m)])
    R, _, rank = MT.rref()
    piv = []
    for r in range(rank):
        for c in range(m):
            if R[r, c] != 0:
                piv.append(c)
                break
    return np.asarray(piv, dtype=np.int64)


def _basis(PN: tuple[np.ndarray, np.ndarray], Ze: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``(idx, Q)``: the exact independent subset and an orthonormal float64 basis $Q$ (p, d, d) of $S$ (the top
    $p$ right singular vectors of the $\mathrm{vec}A_c$). An :class:`InputError` when the rows are numerically of
    lower rank than exactly (e.g. differences $e_y-e_j$ rounded in float64: pass the exact pair instead)."""
    from ..tolerances import tol

    idx = _independent(PN, Ze)
    p = len(idx)
    d = Ze.shape[1]
    if p == 0:
        return idx, np.zeros((0, d, d))
    D = PN[0] - PN[1]
    A = np.einsum("ca,cb->cab", D, Ze).reshape(len(D), -1)
    _, sv, Vt = np.linalg.svd(A, full_matrices=False)
    if sv[p - 1] <= tol("rank") * sv[0]:
        raise InputError(
            f"finite_part: the equality directions have exact rank {p} but numerical rank "
            f"{int(np.sum(sv > tol('rank') * sv[0]))} (rounded differences? pass D_eq as the exact pair (plus, minus))"
        )
    return idx, Vt[:p].reshape(p, d, d)


# ---------------------------------------------------------------------- float64 Newton
def _newton(X, Z, m, red, Q: np.ndarray) -> tuple[np.ndarray, int]:
    r"""Damped Newton for $\min_\theta L_{fin}(\sum_k\theta_kQ_k)$, $Q$ (p, d, d) orthonormal; (W, iterations)."""
    n = X.shape[0]
    U = np.einsum("ntd,pde,ne->ntp", X, Q, Z)

    def W_of(th):
        return np.einsum("p,pde->de", th, Q)

    def f(th):
        return loss(X, Z, m, W_of(th), red)

    theta = np.zeros(Q.shape[0])
    prev = math.inf
    it = 0
    while True:
        it += 1
        if it > _MAX_NEWTON:
            raise SolverError(f"finite_part: Newton did not converge in {_MAX_NEWTON} iterations")
        W = W_of(theta)
        g = np.einsum("pde,de->p", Q, gradient(X, Z, m, W, red))
        H = np.sum(np.swapaxes(U, 1, 2) @ logit_hessian(logits(X, Z, W), m, red) @ U, axis=0) / n
        H = 0.5 * (H + H.T)
        try:
            L = np.linalg.cholesky(H)
        except np.linalg.LinAlgError:
            if it > 1:
                raise SolverError("finite_part: the restricted Hessian lost positive definiteness in float64") from None
            raise InputError(
                "finite_part: L_fin is not strictly convex on S (a direction of S keeps every reduced sequence's "
                "logits constant): D_eq/Z_eq do not match reduced_mask"
            ) from None
        step = -np.linalg.solve(L.T, np.linalg.solve(L, g))
        lam2 = float(-g @ step)
        if not np.isfinite(lam2):
            raise SolverError("finite_part: Newton step is not finite")
        if lam2 < 1e-8:
            theta = theta + step
        else:
            t, f0 = 1.0, f(theta)
            while f(theta + t * step) > f0 - 0.25 * t * lam2:
                t *= 0.5
                if t < 1e-12:
                    raise SolverError("finite_part: Newton line search failed (L_fin not coercive on S?)")
            theta = theta + t * step
        if lam2 <= 1e-32 or (lam2 < 1e-20 and lam2 > 0.25 * prev):
            break
        prev = lam2
        if not np.all(np.isfinite(theta)) or np.linalg.norm(theta) > 1e12:
            raise SolverError("finite_part: Newton iterates diverge (L_fin not coercive on S?)")
    return W_of(theta), it


# ---------------------------------------------------------------------- ball arithmetic
@contextmanager
def _precision(bits: int):
    from flint import ctx

    old = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = old


def _float_up(x) -> float:
    """The smallest float64 >= the upper endpoint of the ball ``x``."""
    from flint import arb

    u = x.upper()
    f = float(u)
    if not math.isfinite(f):
        return math.inf
    if arb(f) < u:
        f = float(np.nextafter(f, math.inf))
    return f


def _float_down(x) -> float:
    """The largest float64 <= the lower endpoint of the ball ``x``."""
    from flint import arb

    lo = x.lower()
    f = float(lo)
    if arb(f) > lo:
        f = float(np.nextafter(f, -math.inf))
    return f


def _arb_mat(a: np.ndarray):
    """An exact arb_mat from a 2-D float64 array."""
    from flint import arb_mat

    a = np.asarray(a, dtype=np.float64)
    return arb_mat(a.shape[0], a.shape[1], [float(x) for x in a.ravel()])


def _cholesky_pd(A, p: int) -> bool:
    """True when a ball Cholesky of the symmetric ball matrix ``A`` (p x p) has every pivot provably > 0."""
    L = [[None] * p for _ in range(p)]
    for j in range(p):
        dj = A[j, j]
        for k in range(j):
            dj -= L[j][k] * L[j][k]
        if not dj > 0:
            return False
        ljj = dj.sqrt()
        L[j][j] = ljj
        for i in range(j + 1, p):
            v = A[i, j]
            for k in range(j):
                v -= L[i][k] * L[j][k]
            L[i][j] = v / ljj
    return True


class _Enclosure:
    """The exact basis of step 1 and the ball evaluation of steps 2-3 at coordinates ``theta`` (list of arb)."""

    def __init__(self, X, Z, m, red, PN, Ze, idx: np.ndarray):
        from flint import arb, arb_mat

        n, T, d = X.shape
        self.n, self.d, self.p = n, d, len(idx)
        p = self.p
        PI, NI, ZI = PN[0][idx], PN[1][idx], Ze[idx]
        self.Bf = np.einsum("pa,pb->pab", PI - NI, ZI).reshape(p, -1)
        self.DIt = _arb_mat(PI.T) - _arb_mat(NI.T)  # (d, p): column k is d_k = P_k - N_k
        self.zik = [[arb(float(ZI[k, b])) for b in range(d)] for k in range(p)]
        DD = self.DIt.transpose() * self.DIt
        ZZ = _arb_mat(ZI) * _arb_mat(ZI.T)
        self.G = arb_mat(p, p, [DD[k, l] * ZZ[k, l] for k in range(p) for l in range(p)])
        XD = _arb_mat(X.reshape(n * T, d)) * self.DIt
        QZ = _arb_mat(Z) * _arb_mat(ZI.T)
        self.rows = []  # per sequence: (u over R_i, label position y, non-label positions c, label positions)
        kappa = arb(0)
        for i in range(n):
            R = [int(t) for t in np.flatnonzero(red[i])]
            zi = sum((arb(float(v)) ** 2 for v in Z[i]), arb(0)).sqrt()
            for t in R:
                kappa = kappa.max(sum((arb(float(v)) ** 2 for v in X[i, t]), arb(0)).sqrt() * zi)
            c = [t for t in R if not m[i, t]]
            if c:
                u = {t: [XD[i * T + t, k] * QZ[i, k] for k in range(p)] for t in R}
                self.rows.append((u, int(np.flatnonzero(m[i])[0]), c, [t for t in R if m[i, t]]))
        self.kappa = kappa.upper()

    def W(self, th) -> list:
        r"""$\tilde W=\sum_k\theta_kd_kz_k^\top$ as a d x d list of arb."""
        from flint import arb

        d, p = self.d, self.p
        return [
            [sum((th[k] * self.DIt[a, k] * self.zik[k][b] for k in range(p)), arb(0)) for b in range(d)]
            for a in range(d)
        ]

    def at(self, th):
        """``(gamma, H, gn2)``: the restricted gradient (p x 1), Hessian (p x p) and gamma^T G^-1 gamma at ``th``."""
        from flint import arb, arb_mat

        p = self.p
        grad = [arb(0)] * p
        H = arb_mat(p, p)
        for u, y, c, lab in self.rows:
            a = {t: sum((u[t][k] * th[k] for k in range(p)), arb(0)) for t in u}
            shift = arb(max(float(a[t].mid()) for t in a))
            e = {t: (a[t] - shift).exp() for t in a}
            tot = sum(e.values(), arb(0))
            s = {t: e[t] / tot for t in e}
            q = sum((s[t] for t in c), arb(0))
            pm = sum((s[t] for t in lab), arb(0))
            for k in range(p):
                grad[k] += sum((s[t] * (u[t][k] - u[y][k]) for t in c), arb(0))
            ubar = [sum((s[t] * u[t][k] for t in c), arb(0)) / q for k in range(p)]
            Dc = arb_mat(len(c), p, [u[t][k] - ubar[k] for t in c for k in range(p)])
            Sc = arb_mat(len(c), p, [s[t] * (u[t][k] - ubar[k]) for t in c for k in range(p)])
            dy = arb_mat(p, 1, [u[y][k] - ubar[k] for k in range(p)])
            H += Dc.transpose() * Sc + (q * pm) * (dy * dy.transpose())
        H = H * (arb(1) / self.n)
        gam = arb_mat(p, 1, [gk / self.n for gk in grad])
        sol = self.G.solve(gam)
        gn2 = sum((gam[k, 0] * sol[k, 0] for k in range(p)), arb(0))
        return gam, H, gn2


def _mids(M, r: int, c: int) -> np.ndarray:
    return np.array([[float(M[i, j].mid()) for j in range(c)] for i in range(r)])


def _certify(
    X, Z, m, red, PN, Ze, W: np.ndarray, iterations: int, idx: np.ndarray | None = None, keep_W: bool = True
) -> FinitePart:
    """Steps 1-5 of the module docstring near the float answer ``W`` (``keep_W``: report ``W`` itself, else the
    float rounding of the polished candidate)."""
    import scipy.linalg
    from flint import arb

    d = X.shape[2]
    if idx is None:
        idx = _independent(PN, Ze)
    p = len(idx)
    W = np.asarray(W, dtype=np.float64)
    with _precision(PREC_BITS):
        if p == 0:
            r0 = sum((arb(float(w)) ** 2 for w in W.ravel()), arb(0)).sqrt()
            return FinitePart(W, _float_up(r0), 0.0, math.inf, iterations, True, 0)
        enc = _Enclosure(X, Z, m, red, PN, Ze, idx)
        try:
            # 1. exact candidate coordinates, then high-precision Newton polish (keep a step only if it helps)
            th = [arb(float(t)) for t in np.linalg.lstsq(enc.Bf.T, W.reshape(-1), rcond=None)[0]]
            gam, H, gn2 = enc.at(th)
            for _ in range(_POLISH):
                step = np.linalg.solve(_mids(H, p, p), _mids(gam, p, 1)[:, 0])
                th2 = [th[k] - arb(float(step[k])) for k in range(p)]
                gam2, H2, gn2b = enc.at(th2)
                if not gn2b.mid() < gn2.mid():
                    break
                th, gam, H, gn2 = th2, gam2, H2, gn2b
        except (ZeroDivisionError, ValueError, np.linalg.LinAlgError):
            return _unverified(W, iterations, p)
        Wt = enc.W(th)
        if not keep_W:
            W = np.array([[float(Wt[a][b].mid()) for b in range(d)] for a in range(d)])
        gap = sum(((arb(float(W[a, b])) - Wt[a][b]) ** 2 for a in range(d) for b in range(d)), arb(0)).sqrt()
        # 2. ||P_S grad||_F <= g
        gb = gn2.upper().max(arb(0)).sqrt().upper()
        # 3. mu_0 from the midpoints, proved by a ball Cholesky of H - mu_0 G
        Hm, Gm = _mids(H, p, p), _mids(enc.G, p, p)
        try:
            lam = float(scipy.linalg.eigh(0.5 * (Hm + Hm.T), 0.5 * (Gm + Gm.T), eigvals_only=True)[0])
        except (np.linalg.LinAlgError, ValueError):
            return _unverified(W, iterations, p)
        if not lam > 0:
            return _unverified(W, iterations, p)
        mu0 = arb(0.5 * lam)
        if not _cholesky_pd(H - enc.G * mu0, p):
            return _unverified(W, iterations, p)
        # 4-5. the ball radius r with 2 g / mu(r) < r
        r = arb(2) * gb / mu0 * arb(1.125) + arb(2.0**-1000)
        for _ in range(30):
            mu = (mu0 * (arb(-4) * r * enc.kappa).exp()).lower()
            need = arb(2) * gb / mu
            if need < r:
                radius = gb / mu + gap
                return FinitePart(W, _float_up(radius), _float_up(gb), _float_down(mu), iterations, True, p)
            r = need.upper() * arb(1.25)
            if not (r * enc.kappa) < 20:
                break
        return _unverified(W, iterations, p)


def _unverified(W: np.ndarray, iterations: int, p: int) -> FinitePart:
    return FinitePart(W, math.inf, math.nan, math.nan, iterations, False, p)


# ---------------------------------------------------------------------- public API
def finite_part(
    X: np.ndarray,
    Z: np.ndarray,
    label_mask: np.ndarray,
    reduced_mask: np.ndarray,
    D_eq: np.ndarray,
    Z_eq: np.ndarray,
    certify: bool = True,
) -> FinitePart:
    r"""$W^{fin}=\arg\min_{W\in S}L_{fin}(W)$, $S=\mathrm{span}\{d_cz_c^\top\}$ (module docstring): damped Newton in
    float64, then (``certify``) a proved bound ``radius`` $\ge\|W-W^{fin}\|_F$. Raises :class:`InputError` for
    malformed inputs, label positions with distinct embeddings, or a direction of $S$ that $L_{fin}$ is flat along;
    :class:`SolverError` if Newton fails. ``certify=False``: ``radius`` is ``inf`` and ``verified`` False."""
    X, Z, m, red, PN, Ze = _inputs(X, Z, label_mask, reduced_mask, D_eq, Z_eq)
    d = X.shape[2]
    idx, Q = _basis(PN, Ze)
    if len(idx) == 0:
        return FinitePart(np.zeros((d, d)), 0.0, 0.0, math.inf, 0, True, 0)
    W, it = _newton(X, Z, m, red, Q)
    if not certify:
        return _unverified(W, it, len(idx))
    return _certify(X, Z, m, red, PN, Ze, W, it, idx, keep_W=False)


def certify_candidate(
    X: np.ndarray,
    Z: np.ndarray,
    label_mask: np.ndarray,
    reduced_mask: np.ndarray,
    D_eq: np.ndarray,
    Z_eq: np.ndarray,
    W: np.ndarray,
) -> FinitePart:
    r"""The proof of the module docstring at a given float candidate ``W`` (d, d) (any matrix: its distance to
    $S$ enters the radius): ``radius`` $\ge\|W-W^{fin}\|_F$ when ``verified``; ``iterations`` is 0."""
    X, Z, m, red, PN, Ze = _inputs(X, Z, label_mask, reduced_mask, D_eq, Z_eq)
    d = X.shape[2]
    W = np.asarray(W, dtype=np.float64)
    if W.shape != (d, d) or not np.all(np.isfinite(W)):
        raise InputError(f"certify_candidate: W must be a finite ({d},{d}) array, got shape {W.shape}")
    return _certify(X, Z, m, red, PN, Ze, W, 0)


def verify(
    fp: FinitePart,
    X: np.ndarray,
    Z: np.ndarray,
    label_mask: np.ndarray,
    reduced_mask: np.ndarray,
    D_eq: np.ndarray,
    Z_eq: np.ndarray,
) -> bool:
    r"""Re-prove a (possibly edited) :class:`FinitePart`: True iff a fresh certificate at ``fp.W`` proves
    $\|W-W^{fin}\|_F\le$ ``fp.radius`` (so a tampered, too small radius is rejected)."""
    if not (isinstance(fp, FinitePart) and math.isfinite(fp.radius)):
        return False
    fresh = certify_candidate(X, Z, label_mask, reduced_mask, D_eq, Z_eq, fp.W)
    return fresh.verified and fresh.radius <= fp.radius


def finite_part_of(data: NTPData, certify: bool = True) -> FinitePart:
    r""":func:`finite_part` of a single next-token data set: reduced masks from :func:`attsvm.ntp.graph.top_scc_mask`,
    equality directions $(e_y-e_j)e_k^\top$ of :func:`attsvm.ntp.graph.graph_constraints`, passed as the exact pair
    $(e_y, e_j)$ (so that $S$ is the span of the exact differences, not of their float64 roundings)."""
    from .graph import graph_constraints, top_scc_mask

    gc = graph_constraints(data)
    pair = (data.E[gc.eq[:, 1]], data.E[gc.eq[:, 2]])
    return finite_part(data.X, data.Z, data.label_mask, top_scc_mask(data), pair, gc.Z_eq, certify=certify)
