r"""Small dense linear algebra in ball arithmetic: every result *encloses* the exact value for every matrix in the
input balls, or the function raises :class:`attsvm.kit.Undecidable`.

* $\|A\|_F=\sqrt{\sum_{jk}A_{jk}^2}$, $\langle A,B\rangle$, $\mathrm{corr}(A,B)=\langle A,B\rangle/(\|A\|_F\|B\|_F)$
  (these three also differentiate :class:`~attsvm.ball.jet.Jet` entries; the rest refuse jets: ``TypeError``);
* ``inv``, ``solve``, ``det``: arb's ``arb_mat`` (Gaussian elimination with certified pivots; *Undecidable* when
  it cannot prove the matrix invertible);
* eigenvalues of the symmetric part $S=(A+A^\top)/2$ (:func:`eigvalsh`) and singular values
  (:func:`singular_values`) by a posteriori perturbation bounds around an approximate decomposition computed by
  mpmath from the midpoints. With $V$ the approximate eigenvectors (taken as exact numbers),
  $M=V^\top SV=D+F$ ($D$ the diagonal of midpoints) and $E=V^\top V-I$:

  .. math::
      \lambda_k(M)\in[d_{(k)}-\|F\|_F,\ d_{(k)}+\|F\|_F]\ \text{(Weyl)},\qquad
      \lambda_k(M)=\theta_k\lambda_k(S),\ \theta_k\in[1-\|E\|_F,1+\|E\|_F]\ \text{(Ostrowski)},

  $d_{(k)}$ the $k$-th smallest diagonal entry. Singular values likewise with $M=U^\top AV^\top$ ($U$, $V$ square):
  $|\sigma_k(M)-\sigma_k(D)|\le\|F\|_2$ and $\sigma_k(M)=\theta_k\sigma_k(A)$,
  $\theta_k\in[\sqrt{(1-\epsilon_U)(1-\epsilon_V)},\sqrt{(1+\epsilon_U)(1+\epsilon_V)}]$. Neither bound needs
  separated eigenvalues: repeated and zero eigenvalues are enclosed to about $2^{-\mathrm{prec}}\|A\|$;
* :func:`svd`: the singular vectors are the eigenvectors of $A^\top A$ (or $AA^\top$), enclosed by arb's certified
  eigensolver (``acb_mat.eig``), normalised by the largest component, taken real (the exact normalised vector is
  real) and scaled to unit norm; $u_j=Av_j/\sigma_j$. Only defined when the singular values are simple and
  positive (otherwise a singular vector is not a function of $A$): else *Undecidable*;
* :func:`projector`: $P_Z=B^\top(BB^\top)^{-1}B$, $B$ a basis of the row space of $Z$ — exact rational
  arithmetic when the entries of $Z$ are exact (the rank is decided exactly), else $Z$ must be proved of full
  row rank ($B=Z$) or of full column rank ($P_Z=I$).
"""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
from flint import acb_mat, arb, arb_mat, fmpq, fmpq_mat

from ..kit import Undecidable
from .numbers import arbs, has_jets, mid_mpf, to_arb, vec, workprec

__all__ = [
    "inner",
    "frob",
    "corr",
    "inv",
    "solve",
    "det",
    "eigvalsh",
    "singular_values",
    "svd",
    "projector",
]


def _digits(prec: int) -> int:
    """mpmath digits of the approximate decompositions: a little more than ``prec`` bits."""
    return int(prec * 0.30103) + 10


def _matrix(A: Any) -> np.ndarray:
    """``A`` as a matrix of plain balls (the decompositions go through mpmath midpoints and ``arb_mat``: a jet would
    lose its gradient, so it is refused)."""
    M = arbs(A)
    if has_jets(M):
        raise TypeError("the ball decompositions (inv, solve, det, eigenvalues, singular values, svd, projector) do "
                        "not differentiate: give them plain balls, not jets")  # fmt: skip
    if M.ndim != 2:
        raise ValueError(f"expected a matrix, got shape {M.shape}")
    return M


def _to_flint(A: np.ndarray) -> arb_mat:
    return arb_mat(A.tolist()) if A.size else arb_mat(A.shape[0], A.shape[1])


def _from_flint(M: Any) -> np.ndarray:
    return arbs([[M[a, b] for b in range(M.ncols())] for a in range(M.nrows())]).reshape(M.nrows(), M.ncols())


def _inner(A: np.ndarray, B: np.ndarray) -> arb:
    return sum((a * b for a, b in zip(A.ravel(), B.ravel())), arb(0))


def _frob(A: np.ndarray) -> arb:
    s = sum((x * x for x in A.ravel()), arb(0))
    return s.nonnegative_part().sqrt()  # the exact sum of squares is >= 0


def inner(A: Any, B: Any, prec: int) -> arb:
    r"""$\langle A,B\rangle=\sum A_{jk}B_{jk}$."""
    with workprec(prec):
        return _inner(arbs(A), arbs(B))


def frob(A: Any, prec: int) -> arb:
    r"""$\|A\|_F$ (any shape)."""
    with workprec(prec):
        return _frob(arbs(A))


def corr(A: Any, B: Any, prec: int) -> arb:
    r"""$\langle A,B\rangle/(\|A\|_F\|B\|_F)$."""
    with workprec(prec):
        A, B = arbs(A), arbs(B)
        return _inner(A, B) / (_frob(A) * _frob(B))


def inv(A: Any, prec: int) -> np.ndarray:
    r"""$A^{-1}$ (*Undecidable* when arb cannot prove $A$ invertible)."""
    with workprec(prec):
        try:
            return _from_flint(_to_flint(_matrix(A)).inv())
        except ZeroDivisionError as exc:
            raise Undecidable(f"inv: the matrix is not proved invertible in {prec}-bit balls ({exc})") from None


def solve(A: Any, b: Any, prec: int) -> np.ndarray:
    r"""$A^{-1}b$, ``b`` a vector or a matrix (*Undecidable* when $A$ is not proved invertible)."""
    with workprec(prec):
        B = arbs(b)
        col = B.ndim == 1
        try:
            X = _to_flint(_matrix(A)).solve(_to_flint(B.reshape(-1, 1) if col else B))
        except ZeroDivisionError as exc:
            raise Undecidable(f"solve: the matrix is not proved invertible in {prec}-bit balls ({exc})") from None
        out = _from_flint(X)
        return out[:, 0] if col else out


def det(A: Any, prec: int) -> arb:
    r"""$\det A$."""
    with workprec(prec):
        return _to_flint(_matrix(A)).det()


def _upper(x: arb) -> arb:
    r"""An exact number $\ge$ every member of ``x``."""
    return x.upper()


def _frob_upper(entries: list) -> arb:
    r"""An exact upper bound of $\sqrt{\sum_j|x_j|^2}$ over every member of the balls ``entries``."""
    s = sum((e.abs_upper() * e.abs_upper() for e in entries), arb(0))
    return _upper(s.sqrt())


def _orth_defect(Q: np.ndarray) -> arb:
    r"""An exact upper bound of $\|Q^\top Q-I\|_F$ (``Q`` square, exact)."""
    n = Q.shape[1]
    G = Q.T @ Q
    return _frob_upper([G[a, b] - (1 if a == b else 0) for a in range(n) for b in range(n)])


def _to_mp(A: np.ndarray) -> mpmath.matrix:
    try:
        return mpmath.matrix([[mid_mpf(x) for x in row] for row in A])
    except ValueError as exc:
        raise Undecidable(f"a matrix entry is not finite ({exc})") from None


def _exact(M: Any, rows: int, cols: int) -> np.ndarray:
    """An mpmath matrix as exact balls."""
    return arbs([[M[a, b] for b in range(cols)] for a in range(rows)]).reshape(rows, cols)


def eigvalsh(A: Any, prec: int) -> np.ndarray:
    r"""Eigenvalues of $S=(A+A^\top)/2$, ascending, each enclosed (module docstring: Weyl and Ostrowski around
    mpmath's ``eigsy`` of the midpoints)."""
    with workprec(prec):
        A = _matrix(A)
        n = A.shape[0]
        if A.shape != (n, n):
            raise ValueError(f"eigvalsh needs a square matrix, got {A.shape}")
        if n == 0:
            return np.empty(0, dtype=object)
        S = (A + A.T) / 2
        with mpmath.workdps(_digits(prec)):
            _, Qm = mpmath.eigsy(_to_mp(S))
        V = _exact(Qm, n, n)
        M = V.T @ S @ V
        d = [M[k, k].mid() for k in range(n)]
        off = [M[a, b] for a in range(n) for b in range(n) if a != b] + [M[k, k].rad() for k in range(n)]
        eM, eps = _frob_upper(off), _orth_defect(V)
        if not eps < 1:
            raise Undecidable("eigvalsh: the approximate eigenvectors are not independent")
        theta = arb(1, eps)
        return vec((dk + arb(0, eM)) / theta for dk in sorted(d))


def singular_values(A: Any, prec: int) -> np.ndarray:
    r"""Singular values of $A$ (m,n), descending, $\min(m,n)$ of them, each enclosed (module docstring)."""
    with workprec(prec):
        A = _matrix(A)
        m, n = A.shape
        p = min(m, n)
        if p == 0:
            return np.empty(0, dtype=object)
        with mpmath.workdps(_digits(prec)):
            Um, _, Vm = mpmath.svd_r(_to_mp(A), full_matrices=True)
        U, Vt = _exact(Um, m, m), _exact(Vm, n, n)
        M = U.T @ A @ Vt.T
        d = [abs(M[k, k].mid()) for k in range(p)]
        off = [M[a, b] for a in range(m) for b in range(n) if a != b] + [M[k, k].rad() for k in range(p)]
        eM, eU, eV = _frob_upper(off), _orth_defect(U), _orth_defect(Vt.T)
        if not (eU < 1 and eV < 1):
            raise Undecidable("singular_values: the approximate singular vectors are not independent")
        lo, hi = ((1 - eU) * (1 - eV)).sqrt(), ((1 + eU) * (1 + eV)).sqrt()
        theta = lo.union(hi)
        return vec((dk + arb(0, eM)).nonnegative_part() / theta for dk in sorted(d, reverse=True))


def _gram_eig(G: np.ndarray, what: str) -> tuple[list, list]:
    r"""Eigenvalues (descending, each proved $>0$ and simple) and unit eigenvectors (largest component positive) of
    a symmetric positive semidefinite ball matrix ``G`` (module docstring)."""
    n = G.shape[0]
    try:
        E, R = acb_mat(_to_flint(G)).eig(right=True)
    except ValueError as exc:
        raise Undecidable(f"{what}: arb cannot isolate the singular values ({exc}); repeated singular values have no "
                          "unique singular vectors") from None  # fmt: skip
    lam = [e.real for e in E]
    if not all(x > 0 for x in lam):
        raise Undecidable(f"{what}: a singular value is not proved positive (its singular vectors are not unique)")
    order = sorted(range(n), key=lambda j: lam[j].mid(), reverse=True)
    if not all(lam[order[k]] > lam[order[k + 1]] for k in range(n - 1)):
        raise Undecidable(f"{what}: the singular values are not proved distinct")
    vecs = []
    for j in order:
        col = [R[i, j] for i in range(n)]
        k = max(range(n), key=lambda i: abs(col[i]).mid())
        if col[k].contains(0):
            raise Undecidable(f"{what}: a singular vector is not enclosed tightly enough to normalise")
        v = vec((c / col[k]).real for c in col)
        vecs.append(v / _frob(v))
    return [lam[j] for j in order], vecs


def svd(A: Any, prec: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""$A=U\,\mathrm{diag}(S)\,V^\top$ (thin: $U$ (m,p), $S$ (p,) descending, $V^\top$ (p,n), $p=\min(m,n)$), enclosed
    when the singular values are simple and positive (module docstring), else *Undecidable*. Each right (left)
    singular vector has its largest component positive when $m\ge n$ ($m<n$)."""
    with workprec(prec):
        A = _matrix(A)
        m, n = A.shape
        tall = m >= n
        G = A.T @ A if tall else A @ A.T
        lam, vecs = _gram_eig(G, "svd")
        S = [x.sqrt() for x in lam]
        other = [(A @ v if tall else A.T @ v) / s for v, s in zip(vecs, S)]
        U, V = (np.stack(other, axis=1), np.stack(vecs, axis=1)) if tall else (np.stack(vecs, 1), np.stack(other, 1))
        return U, vec(S), V.T


def _fmpq(x: arb) -> fmpq:
    man, exp = x.mid().man_exp()
    man, exp = int(man), int(exp)
    return fmpq(man * 2**exp) if exp >= 0 else fmpq(man, 2**-exp)


def projector(Z: Any, prec: int) -> np.ndarray:
    r"""$P_Z$ (d,d), the orthogonal projector onto the span of the rows of ``Z`` (N,d) (module docstring)."""
    with workprec(prec):
        Z = _matrix(Z)
        N, d = Z.shape
        if all(x.is_exact() and x.is_finite() for x in Z.ravel()):
            Zq = fmpq_mat(N, d, [_fmpq(x) for x in Z.ravel()]) if N else fmpq_mat(0, d)
            R, r = Zq.rref() if N else (Zq, 0)
            if r == 0:
                return arbs(np.zeros((d, d), dtype=np.int64))
            B = fmpq_mat(r, d, [R[a, b] for a in range(r) for b in range(d)])
            P = B.transpose() * (B * B.transpose()).inv() * B
            return arbs([[to_arb(P[a, b]) for b in range(d)] for a in range(d)]).reshape(d, d)
        if N <= d:
            try:
                X = _to_flint(Z @ Z.T).solve(_to_flint(Z))  # (Z Z^T)^{-1} Z
                return Z.T @ _from_flint(X)
            except ZeroDivisionError:
                pass
        else:
            g = _to_flint(Z.T @ Z).det()
            if g > 0 or g < 0:  # full column rank proved: the row space is everything
                return arbs(np.eye(d, dtype=np.int64))
        raise Undecidable("projector: the rank of Z is not decided by its balls (inexact entries, no full rank proved)")
