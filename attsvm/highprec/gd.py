r"""Gradient descent at high precision (mpmath, $\ge50$ digits): **the** replay of a GD run, and the points of
the regularisation path re-solved to their optimality conditions.

:func:`replay` runs the algorithms of :func:`attsvm.gd.run` from the same initial point with every gradient
computed from its definition (:mod:`attsvm.highprec.model`), so a float64 run can be re-evaluated at 50 digits:

.. math::
    \texttt{gd}:\ \theta_{k+1}=\theta_k-\eta\,\nabla_\theta\mathcal L(\theta_k),\qquad
    \texttt{ngd}:\ \theta_{k+1}=\theta_k-\eta\,g_k/\|g_k\|_F\ \text{(per factor)},\quad
    g_k=\nabla_\theta\mathcal L(\theta_k),

for $\theta=W$ (cross, self, sequence, causal data), $\theta=(K,Q)$ with $W=KQ^\top$ (both factors from the
gradients at $(K_k,Q_k)$), $\theta=p$ (prompt attention, head $v$ fixed) and
$\theta=(v,p)$ (both factors from the gradients at $(v_k,p_k)$). A factor whose gradient is exactly zero takes
no step (as in the engine), and the run stops when every factor's gradient is zero. ``lr="1/L"`` (``W``):
$\eta=1/L_W$ with $L_W$ at ``dps`` digits.

:func:`path_point` (:func:`best_path_point`: from several starts) re-solves one point of the regularisation
path (:func:`attsvm.gd.regularization_path`)

.. math:: \bar W_R\in\arg\min_{\|W\|_F\le R}\mathcal L(W)\qquad\text{or}\qquad
          (\bar K,\bar Q)\in\arg\min_{\frac12(\|K\|_F^2+\|Q\|_F^2)\le R}\mathcal L(KQ^\top)

from a starting point (the engine's solution) by Newton's method on the first-order conditions of the
active constraint, $x$ the flat parameters and $c=\frac12R^2$ (``W``) or $R$ (``KQ``):

.. math::
    \nabla f(x)+\lambda x=0,\quad\tfrac12\|x\|^2=c,\qquad
    \begin{pmatrix}\nabla^2f+\lambda I&x\\x^\top&0\end{pmatrix}\begin{pmatrix}\Delta x\\\Delta\lambda\end{pmatrix}
    =-\begin{pmatrix}\nabla f+\lambda x\\\tfrac12\|x\|^2-c\end{pmatrix},

the Hessian by central differences of the 50-digit gradient and the step from a pseudo-inverse (the $(K,Q)$
problem has a continuum of solutions $(KO,QO)$, $O$ orthogonal). The result is *a constrained local
minimiser* when the residuals are below $10^{-\lfloor dps/2\rfloor}$, $\lambda>0$ and the Hessian of the
Lagrangian is positive semidefinite on the tangent space $x^\perp$ (second-order necessary condition);
global optimality is not decided here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mpmath
import numpy as np

from ..data import Dataset
from .model import (
    DPS,
    MP,
    HPData,
    as_mp,
    data,
    frob,
    grad_KQ,
    grad_vp,
    grad_W,
    hessian,
    matmul,
    smoothness_constant,
    to_numpy,
    transpose,
)
from .model import loss as loss_of

mp = mpmath.mp

__all__ = ["PARAMS", "ALGOS", "Replay", "replay", "PathPoint", "path_point", "best_path_point"]

PARAMS = ("W", "KQ", "p", "vp")
ALGOS = ("gd", "ngd")


@dataclass
class Replay:
    r"""A replayed run: ``final`` the last iterate and ``recorded`` the iterates at ``steps`` (step 0 first), each a
    dict of nested ``mpf`` lists (``{"W"}``, ``{"p"}`` or ``{"v","p"}``); ``lr`` the step size $\eta$; ``taken``
    the steps taken (fewer than asked when every gradient became exactly zero)."""

    param: str
    final: dict[str, Any]
    lr: Any
    taken: int
    steps: list[int] = field(default_factory=list)
    recorded: list[dict[str, Any]] = field(default_factory=list)

    def array(self, name: str | None = None, index: int | None = None) -> np.ndarray:
        """``name`` (default: ``W`` or ``p``) of the final iterate, or of record ``index``, as float64."""
        name = name or ("W" if self.param == "W" else "p")
        src = self.final if index is None else self.recorded[index]
        return to_numpy(src[name])


def _init(param: str, init: Any, d: int) -> dict[str, Any]:
    def conv(a, shape):
        m = as_mp(a) if not (isinstance(a, list) and a and isinstance(a[0], (list, mpmath.mpf))) else a
        got = np.shape(to_numpy(m))
        if got != shape:
            raise ValueError(f"initial point has shape {got}, expected {shape}")
        return m

    if param == "vp":
        if not (isinstance(init, dict) and set(init) == {"v", "p"}):
            raise ValueError("param 'vp' needs init={'v': ..., 'p': ...}")
        return {"v": conv(init["v"], (d,)), "p": conv(init["p"], (d,))}
    if param == "KQ":
        if not (isinstance(init, dict) and set(init) == {"K", "Q"}):
            raise ValueError("param 'KQ' needs init={'K': ..., 'Q': ...}")
        m = np.shape(to_numpy(init["K"]))[-1]
        return {"K": conv(init["K"], (d, m)), "Q": conv(init["Q"], (d, m))}
    if isinstance(init, dict):
        init = init[param]
    return {param: conv(init, (d, d) if param == "W" else (d,))}


def _gradients(D: HPData, param: str, th: dict[str, Any], loss_: str, dps: int) -> dict[str, Any]:
    if param == "W":
        return {"W": grad_W(D, th["W"], loss_, dps)}
    if param == "KQ":
        gK, gQ = grad_KQ(D, th["K"], th["Q"], loss_, dps)
        return {"K": gK, "Q": gQ}
    v = th.get("v", D.v)
    gv, gp = grad_vp(D, v, th["p"], loss_, dps)
    return {"p": gp} if param == "p" else {"v": gv, "p": gp}


def _axpy(x: Any, a: Any, y: Any) -> Any:
    """``x + a*y`` for nested lists."""
    if isinstance(x, list):
        return [_axpy(xi, a, yi) for xi, yi in zip(x, y)]
    return x + a * y


def replay(
    ds: Dataset | HPData,
    init: Any,
    *,
    param: str = "W",
    algo: str = "ngd",
    lr: Any = 0.1,
    steps: int,
    loss: str = "logistic",
    record_every: int | None = None,
    dps: int = DPS,
) -> Replay:
    r"""Replay ``steps`` steps of ``algo`` on ``param`` from ``init`` at ``dps`` digits (module docstring).

    ``init``: the initial point as float64 arrays (taken as exact) or nested ``mpf`` — $W_0$ (d,d),
    ``{"K": K_0, "Q": Q_0}`` (d,m), $p_0$ (d,),
    or ``{"v": v_0, "p": p_0}``; ``lr``: a number (float64 taken as exact) or ``"1/L"`` (``W`` only);
    ``record_every``: record the iterates $0,k,2k,\dots$ (as the engine's trajectories)."""
    if param not in PARAMS:
        raise ValueError(f"param must be one of {PARAMS}, got {param!r}")
    if algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; expected one of {ALGOS}")
    D = data(ds)
    with mp.workdps(dps):
        th = _init(param, init, D.d)
        if isinstance(lr, str):
            if lr != "1/L" or param != "W" or loss != "logistic":
                raise ValueError("lr must be a number, or '1/L' for param 'W' with the logistic loss")
            eta = 1 / smoothness_constant(D, dps=dps)
        else:
            eta = as_mp(float(lr)) if not isinstance(lr, mpmath.mpf) else lr
        rep = Replay(param, th, eta, 0)
        if record_every:
            rep.steps.append(0)
            rep.recorded.append(th)
        for k in range(steps):
            grads = _gradients(D, param, th, loss, dps)
            norms = {name: frob(g) for name, g in grads.items()}
            if all(nrm == 0 for nrm in norms.values()):
                break
            new = {}
            for name, g in grads.items():
                if algo == "ngd":
                    new[name] = th[name] if norms[name] == 0 else _axpy(th[name], -eta / norms[name], g)
                else:
                    new[name] = _axpy(th[name], -eta, g)
            th = {**th, **new}
            rep.taken = k + 1
            if record_every and (k + 1) % record_every == 0:
                rep.steps.append(k + 1)
                rep.recorded.append(th)
        rep.final = th
        return rep


# ---------------------------------------------------------------------- the regularisation path at 50 digits
@dataclass
class PathPoint:
    r"""A re-solved point of the regularisation path: ``params`` (``{"W"}`` or ``{"K","Q"}``, nested ``mpf``),
    ``W`` ($W$ or $KQ^\top$), ``lam`` the multiplier $\lambda$, ``loss`` $\mathcal L$, ``residual`` the relative
    first-order residual $\max(\|\nabla f+\lambda x\|/\|\nabla f\|,\ |\frac12\|x\|^2-c|/c)$, ``curvature`` the
    smallest eigenvalue of the tangent Hessian of the Lagrangian relative to its largest $|\cdot|$ (the
    direction $x$ itself excluded), ``iterations`` Newton steps, ``local_min``: residual
    $\le10^{-\lfloor dps/2\rfloor}$, $\lambda>0$ and curvature $\ge-10^{-\lfloor dps/3\rfloor}$."""

    params: dict[str, Any]
    W: MP
    lam: Any
    loss: Any
    residual: Any
    curvature: Any
    iterations: int
    local_min: bool

    def summary(self) -> dict[str, Any]:
        """JSON-friendly numbers (floats) of this point."""
        return {
            "lambda": float(self.lam),
            "loss": float(self.loss),
            "residual": float(self.residual),
            "curvature": float(self.curvature),
            "iterations": self.iterations,
            "local_min": self.local_min,
        }


def _problem(D: HPData, param: str, d: int, m: int, loss_: str):
    """``(grad(x, dps), unpack(x))`` of the flat parameters ``x``."""

    def unpack(x):
        if param == "W":
            return {"W": [x[a * d : (a + 1) * d] for a in range(d)]}
        K = [x[a * m : (a + 1) * m] for a in range(d)]
        Q = [x[d * m + a * m : d * m + (a + 1) * m] for a in range(d)]
        return {"K": K, "Q": Q}

    def grad(x, dps):
        th = unpack(x)
        if param == "W":
            G = grad_W(D, th["W"], loss_, dps)
            return [G[a][b] for a in range(d) for b in range(d)]
        gK, gQ = grad_KQ(D, th["K"], th["Q"], loss_, dps)
        return [y for row in gK for y in row] + [y for row in gQ for y in row]

    return grad, unpack


def _pinv_solve(A: MP, b: list, dps: int) -> list:
    """Minimum-norm least-squares solution of ``A x = b`` (singular values below $10^{-dps/2}\\sigma_{max}$ cut)."""
    M = mpmath.matrix(A)
    U, S, V = mp.svd_r(M)
    smax = max(abs(S[j]) for j in range(len(S)))
    cut = smax * mpmath.mpf(10) ** (-(dps // 2))
    bv = mpmath.matrix(b)
    x = [mpmath.mpf(0)] * M.cols
    for j in range(len(S)):
        if abs(S[j]) <= cut:
            continue
        c = mp.fsum(U[i, j] * bv[i] for i in range(M.rows)) / S[j]
        for k in range(M.cols):
            x[k] += c * V[j, k]
    return x


def path_point(
    ds: Dataset | HPData,
    init: Any,
    R: Any,
    *,
    param: str = "W",
    loss: str = "logistic",
    dps: int = DPS,
    max_iter: int = 25,
) -> PathPoint:
    r"""Re-solve $\bar W_R$ (``param="W"``, ``init`` a (d,d) $W$) or $(\bar K,\bar Q)$ (``"KQ"``, ``init`` a dict
    ``{"K","Q"}`` of (d,m) arrays) at ``dps`` digits by Newton's method from ``init`` (module docstring).
    ``R`` is taken as exact (a float64 radius)."""
    if param not in ("W", "KQ"):
        raise ValueError(f"path_point supports param 'W' or 'KQ', got {param!r}")
    D = data(ds)
    d = D.d
    with mp.workdps(dps):
        if param == "W":
            W0 = as_mp(init) if not isinstance(init, list) else init
            x = [W0[a][b] for a in range(d) for b in range(d)]
            m = d
        else:
            K0, Q0 = (as_mp(init[k]) if not isinstance(init[k], list) else init[k] for k in ("K", "Q"))
            m = len(K0[0])
            x = [y for row in K0 for y in row] + [y for row in Q0 for y in row]
        Rm = as_mp(float(R)) if not isinstance(R, mpmath.mpf) else R
        c = Rm * Rm / 2 if param == "W" else Rm
        grad, unpack = _problem(D, param, d, m, loss)
        # start on the sphere of the active constraint
        nx = mp.sqrt(mp.fdot(x, x))
        x = [xi * mp.sqrt(2 * c) / nx for xi in x]
        g = grad(x, dps)
        lam = max(mpmath.mpf(0), -mp.fdot(g, x) / mp.fdot(x, x))
        tol_res = mpmath.mpf(10) ** (-(dps // 2))

        def residual(x_, g_, lam_):
            r1 = [gi + lam_ * xi for gi, xi in zip(g_, x_)]
            r2 = mp.fdot(x_, x_) / 2 - c
            ng = mp.sqrt(mp.fdot(g_, g_))
            return r1, r2, max(mp.sqrt(mp.fdot(r1, r1)) / ng, abs(r2) / c)

        r1, r2, res = residual(x, g, lam)
        it = 0
        while True:
            H = hessian(lambda y: grad(y, dps + 10), x, dps)
            if res <= tol_res or it == max_iter:
                break
            it += 1
            n = len(x)
            A = [[H[a][b] + (lam if a == b else 0) for b in range(n)] + [x[a]] for a in range(n)]
            A.append(list(x) + [mpmath.mpf(0)])
            step = _pinv_solve(A, [-y for y in r1] + [-r2], dps)
            t = mpmath.mpf(1)
            for _ in range(30):  # backtracking on the residual
                xn = [xi + t * si for xi, si in zip(x, step[:n])]
                ln = lam + t * step[n]
                gn = grad(xn, dps)
                r1n, r2n, resn = residual(xn, gn, ln)
                if resn < res or t < mpmath.mpf(10) ** -6:
                    break
                t /= 2
            x, lam, g, r1, r2, res = xn, ln, gn, r1n, r2n, resn
        # second order: the Lagrangian's Hessian on the tangent space x^perp
        n = len(x)
        xx = mp.fdot(x, x)
        P = [[(1 if a == b else 0) - x[a] * x[b] / xx for b in range(n)] for a in range(n)]
        HL = [[H[a][b] + (lam if a == b else 0) for b in range(n)] for a in range(n)]
        M = matmul(matmul(P, HL), P)
        Ms = mpmath.matrix(n, n)
        for a in range(n):
            for b in range(n):
                Ms[a, b] = (M[a][b] + M[b][a]) / 2
        ev = sorted(mp.eigsy(Ms, eigvals_only=True))
        # drop the eigenvalue of the direction x itself (P x = 0): the one closest to 0 along x
        big = max(abs(e) for e in ev)
        evs = list(ev)
        evs.remove(min(evs, key=abs))
        curv = (min(evs) / big) if big > 0 and evs else mpmath.mpf(0)
        th = unpack(x)
        W = th["W"] if param == "W" else matmul(th["K"], transpose(th["Q"]))
        ok = bool(res <= tol_res and lam > 0 and curv >= -(mpmath.mpf(10) ** -(dps // 3)))
        return PathPoint(th, W, lam, loss_of(D, W, loss, dps), res, curv, it, ok)


def best_path_point(
    ds: Dataset | HPData, starts: list, R: Any, *, param: str = "W", loss: str = "logistic", dps: int = DPS
) -> PathPoint:
    """:func:`path_point` from each of ``starts``: the local minimiser of lowest loss, or (none qualifying) the point
    with the smallest residual (``local_min`` False) — a better approximation of the argmin than one start."""
    pts = [path_point(ds, x0, R, param=param, loss=loss, dps=dps) for x0 in starts]
    good = [p for p in pts if p.local_min]
    return min(good, key=lambda p: p.loss) if good else min(pts, key=lambda p: p.residual)
