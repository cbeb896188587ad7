r"""Gradient descent in ball arithmetic: a replay of :func:`attsvm.gd.run` whose iterates *enclose* the exact
iterates of the same run from the same (exact) start, or :class:`attsvm.kit.Undecidable`.

With $g_k$ the gradient at the iterate (:mod:`attsvm.ball.model`) and $\eta_k$ the step of the ``schedule``
(``"constant"`` $\eta_k=\eta$, ``"rsqrt"`` $\eta_k=\eta(k+1)^{-1/2}$, update $k=0,1,\dots$), per factor of
$\theta=W$ or $\theta=(K,Q)$ ($W=KQ^\top$, both factors from the gradients at $(K_k,Q_k)$):

.. math::
    \texttt{gd}:\ \theta_{k+1}=\theta_k-\eta_kg_k,\qquad
    \texttt{ngd}\ (=\texttt{nsd}\text{ in }\texttt{fro}):\ \theta_{k+1}=\theta_k-\eta_kg_k/\|g_k\|_F,

and on $W$, ``nsd`` in ``linf`` ($\Delta=\mathrm{sign}(g)$) and ``l1`` ($\Delta=\frac1{|J|}\sum_{j\in J}
\mathrm{sign}(g_j)e_j$, $J=\arg\max_j|g_j|$, exact ties share) — the same definitions as
:func:`attsvm.highprec.replay`. A factor whose gradient is exactly zero takes no step, and the run stops when every
factor's gradient is exactly zero.

**The centred form.** Evaluating the update on a ball iterate over and over widens the balls by the dependency
effect at every step (measured: $\times8$ per ``ngd`` step at $\eta=0.1$). Instead the replay keeps an exact
point $\tilde\theta_k$ and a componentwise error $e_k$ with $\theta_k\in\tilde\theta_k\pm e_k$, and with
$\phi(\theta)=\theta-\eta_k\Delta(\theta)$ the update, by the mean value theorem on the box
$B_k=\tilde\theta_k\pm e_k$:

.. math::
    \theta_{k+1}=\phi(\theta_k)\in\phi(\tilde\theta_k)+\bigl(I-\eta_k\,[\partial\Delta](B_k)\bigr)[-e_k,e_k],\qquad
    e_{k+1}=\mathrm{rad}\,\phi(\tilde\theta_k)+\bigl|I-\eta_k[\partial\Delta](B_k)\bigr|\,e_k,

$\tilde\theta_{k+1}$ the midpoint of $\phi(\tilde\theta_k)$, $[\partial\Delta](B_k)$ an enclosure of the Jacobian of
the direction over the box: ``gd`` the Hessian ($\nabla^2_W\mathcal L$ of :mod:`attsvm.ball.model`, on $(K,Q)$
through $W=KQ^\top$), ``ngd`` $(I-\hat g\hat g^\top)\,\partial g/\|g\|$ per factor, ``linf`` / ``l1`` zero (the
direction is one constant over the box once its decisions are proved there). Alongside, a bound $\epsilon_k$ of
$\|\theta_k-\tilde\theta_k\|_2$ follows the 2-norm of the linearised step,
$\epsilon_{k+1}=\|\mathrm{rad}\,\phi(\tilde\theta_k)\|_F+(\|\mathrm{mid}\,M\|_2+\|\mathrm{rad}\,M\|_F)\,\epsilon_k$,
$M=I-\eta_k[\partial\Delta](B_k)$, $\|\mathrm{mid}\,M\|_2\le\sqrt\alpha$ proved by Gaussian elimination of
$\alpha I-\mathrm{mid}\,M^\top\mathrm{mid}\,M$ with every pivot $>0$ ($\alpha$ a float64 estimate, enlarged by
$2^{-30}$); the box is $\tilde\theta_k\pm\min(e_k,\epsilon_k)$. Both errors grow like the linearised run, not like
the arithmetic: measured on ``ngd`` ($W$, $\eta=0.1$) $\times1.035$ per step componentwise and $\times1.003$ in the
2-norm, where re-evaluating on the ball grows $\times8$; on $(K,Q)$ the componentwise factor reaches $\times2.1$ (a
rotating linearised map) while the 2-norm stays near $\times1.01$ — until the gradients are tiny and the
normalised step itself expands perturbations (then the replay gives up, as it should).

**What is undecidable.** The replay is an enclosure only while every decision is proved for every point of the
box: the normaliser $\|g\|_F>0$ (``ngd``), every sign (``linf``: an entry proved $>0$ or $<0$, or the exact 0 of an
exact iterate), the argmax set (``l1``: every other $|g_j|$ proved smaller, or an exact tie of an exact iterate).
After each update the largest error relative to $\|\tilde\theta\|_F$ must stay $\le$ ``rad_limit`` ($2^{-20}$).
Otherwise :class:`~attsvm.kit.Undecidable` names the update ("ball GD replay lost precision at step k"). The other
algorithms (``spec`` and ``lq`` steepest descent, Adam, mirror descent) are not replayed in balls: *Undecidable*.

``lr``: a number taken exactly (a float64 value is a binary number; an ``mpf`` or a ball as it is), or ``"1/L"``
($W$, logistic loss: $\eta=1/L_W$ enclosed, as the 50-digit replay does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from ..kit import Undecidable
from .linalg import _frob
from .model import ZERO, _check_loss, _grad, _hessian, smoothness
from .numbers import arbs, mid_float, to_arb, workprec

__all__ = [
    "ALGOS",
    "NSD_NORMS",
    "RAD_LIMIT",
    "SCHEDULES",
    "BallRun",
    "direction",
    "proved_positive",
    "replay",
    "squared_norm",
    "step_size",
]

ALGOS = ("gd", "ngd", "nsd")
NSD_NORMS = ("fro", "linf", "l1")
SCHEDULES = ("constant", "rsqrt")
#: the largest radius of an iterate relative to its Frobenius norm before the replay gives up
RAD_LIMIT = 2.0**-20


@dataclass
class BallRun:
    r"""A ball replay: ``final`` the last iterate (``{"W"}`` or ``{"K","Q"}``, object arrays of balls), ``lr`` the
    step size $\eta$ (a ball), ``taken`` the updates taken, ``rel_rad`` the largest radius of the final iterate
    relative to its Frobenius norm (float)."""

    final: dict[str, np.ndarray]
    lr: arb
    taken: int
    rel_rad: float


def squared_norm(A: np.ndarray) -> arb:
    r"""$\|A\|_F^2=\sum_jA_j^2$ of a ball array (squares as products: ``x ** 2`` of a ball containing 0 is nan)."""
    return sum((x * x for x in np.asarray(A).ravel()), arb(0))


def proved_positive(x: arb, what: str, k: int, replay: str) -> arb:
    """``x`` itself when the ball is certainly positive, else :class:`~attsvm.kit.Undecidable` naming ``what``, the
    update ``k`` and the ``replay`` (a normaliser of a ball GD replay must be proved non-zero)."""
    if not x > 0:
        raise Undecidable(f"ball GD replay ({replay}): {what} not proved positive at update {k}")
    return x


def step_size(eta0: arb, k: int, schedule: str) -> arb:
    r"""$\eta_k$ of update $k$ (module docstring), at the ambient precision."""
    if schedule == "constant":
        return eta0
    if schedule == "rsqrt":
        return eta0 / arb(k + 1).sqrt()
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


def _sign(x: arb, k: int) -> int:
    if x.is_zero():
        return 0
    if x > 0:
        return 1
    if x < 0:
        return -1
    raise Undecidable(f"ball GD replay: the sign of a gradient entry is not decided at step {k}")


def direction(g: np.ndarray, algo: str, norm: str | None, k: int) -> np.ndarray:
    r"""The update direction of ``algo`` for the gradient ball ``g`` of one factor at update ``k`` (module docstring;
    an exactly zero gradient gives the zero direction). For ``linf`` / ``l1`` every decision is proved for every
    member of ``g`` (so the direction is one exact constant), else :class:`~attsvm.kit.Undecidable`."""
    if all(x.is_zero() for x in g.ravel()):
        return np.full(g.shape, ZERO, dtype=object)
    if algo == "gd":
        return g
    if algo == "ngd" or norm == "fro":
        nrm = _frob(g)
        if not nrm > 0:
            raise Undecidable(f"ball GD replay lost precision at step {k}: the gradient norm is not proved > 0 ({nrm})")
        return g / nrm
    flat = g.ravel()
    if norm == "linf":
        return np.array([arb(_sign(x, k)) for x in flat], dtype=object).reshape(g.shape)
    # l1: the proved argmax set of |g_j|
    mags = [abs(x) for x in flat]
    top = max(range(len(flat)), key=lambda j: mags[j].mid())
    J = []
    for j, m in enumerate(mags):
        if j == top or (m.is_exact() and mags[top].is_exact() and m == mags[top]):
            J.append(j)
        elif not m < mags[top]:
            raise Undecidable(f"ball GD replay: the largest |gradient entry| is not decided at step {k}")
    out = np.full(len(flat), ZERO, dtype=object)
    for j in J:
        out[j] = arb(_sign(flat[j], k)) / len(J)
    return out.reshape(g.shape)


class _Problem:
    r"""The parameters as one vector $x$ (``vec W``, or ``vec K`` then ``vec Q``), their gradient factors and the
    Jacobian of the gradient, all in balls (``x`` may be a box: the enclosures then hold over it)."""

    def __init__(self, D: Any, init: dict[str, np.ndarray], loss: str):
        self.D, self.loss = D, loss
        self.names = list(init)
        self.shapes = {n: a.shape for n, a in init.items()}
        self.sizes = [int(np.prod(self.shapes[n])) for n in self.names]

    def split(self, x: np.ndarray) -> dict[str, np.ndarray]:
        out, at = {}, 0
        for n, size in zip(self.names, self.sizes):
            out[n] = x[at : at + size].reshape(self.shapes[n])
            at += size
        return out

    def join(self, parts: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(parts[n], dtype=object).ravel() for n in self.names])

    def grads(self, x: np.ndarray) -> dict[str, np.ndarray]:
        th = self.split(x)
        if self.names == ["W"]:
            return {"W": _grad(self.D, th["W"], self.loss)}
        G = _grad(self.D, th["K"] @ th["Q"].T, self.loss)
        return {"K": G @ th["Q"], "Q": G.T @ th["K"]}

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        r"""$\partial(\text{gradient factors})/\partial x$ over the box ``x`` (module docstring of
        :mod:`attsvm.ball.model` for $\nabla^2_W$; on $(K,Q)$ the chain rule through $W=KQ^\top$)."""
        th = self.split(x)
        if self.names == ["W"]:
            return _hessian(self.D, th["W"], self.loss)
        K, Q = th["K"], th["Q"]
        d, m = K.shape
        W = K @ Q.T
        G, H = _grad(self.D, W, self.loss), _hessian(self.D, W, self.loss)
        cols = []
        for which in ("K", "Q"):
            for a in range(d):
                for b in range(m):
                    E = np.full((d, m), ZERO, dtype=object)
                    E[a, b] = arb(1)
                    dK, dQ = (E, None) if which == "K" else (None, E)
                    dW = dK @ Q.T if which == "K" else K @ dQ.T
                    dG = (H @ dW.ravel()).reshape(d, d)
                    gK = dG @ Q + (G @ dQ if which == "Q" else 0)
                    gQ = dG.T @ K + (G.T @ dK if which == "K" else 0)
                    cols.append(np.concatenate([np.asarray(gK, dtype=object).ravel(), gQ.ravel()]))
        return np.stack(cols, axis=1)


def _dir_jacobian(P: _Problem, box: np.ndarray, algo: str, norm: str | None, k: int) -> np.ndarray | None:
    r"""An enclosure over ``box`` of the Jacobian of the update direction (None: the direction is one constant over
    the box, every decision proved)."""
    grads = P.grads(box)
    if algo == "nsd" and norm in ("linf", "l1"):
        for g in grads.values():
            direction(g, algo, norm, k)  # proves the decisions for every point of the box
        return None
    J = P.jacobian(box)
    if algo == "gd":
        return J
    at = 0
    rows = []
    for n, size in zip(P.names, P.sizes):
        g = grads[n].ravel()
        nrm = _frob(g)
        if not nrm > 0:
            raise Undecidable(f"ball GD replay lost precision at step {k}: the norm of the gradient of {n} is not "
                              f"proved > 0 around the iterate ({nrm})")  # fmt: skip
        gh = g / nrm
        block = J[at : at + size]
        rows.append((block - np.outer(gh, gh @ block)) / nrm)  # (I - g^ g^T) dg / ||g||
        at += size
    return np.concatenate(rows, axis=0)


def _upper(x: arb) -> arb:
    return x.upper()


def replay(
    D: Any,
    init: dict[str, Any],
    *,
    algo: str = "ngd",
    lr: Any = 0.1,
    steps: int,
    loss: str = "logistic",
    prec: int,
    schedule: str = "constant",
    norm: str | None = None,
    rad_limit: float = RAD_LIMIT,
) -> BallRun:
    r"""``steps`` updates of ``algo`` from ``init`` (``{"W": W0}`` or ``{"K": K0, "Q": Q0}``, taken exactly) in
    ``prec``-bit balls by the centred form (module docstring); ``D`` the data as balls (``X``, ``Z``, ``gamma``,
    ``mask``, ``v``)."""
    _check_loss(loss)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if algo not in ALGOS or (algo == "nsd" and norm not in NSD_NORMS):
        what = f"nsd in norm {norm!r}" if algo == "nsd" else repr(algo)
        raise Undecidable(
            f"the ball GD replay covers gd, ngd and nsd in {NSD_NORMS}, not {what}: its directions have no ball "
            "enclosure here"
        )
    if algo == "nsd" and list(init) != ["W"]:
        raise ValueError("nsd is replayed on W only")
    with workprec(prec):
        th0 = {name: arbs(a) for name, a in init.items()}
        P = _Problem(D, th0, loss)
        x = P.join(th0)
        mid = np.array([v.mid() for v in x], dtype=object)
        err = [v.rad() for v in x]  # the exact iterate lies in mid +- err (componentwise)
        if isinstance(lr, str):
            if lr != "1/L" or P.names != ["W"] or loss != "logistic":
                raise ValueError("lr must be a number, or '1/L' for param 'W' with the logistic loss")
            eta0 = 1 / smoothness(D, loss, prec)
        else:
            eta0 = to_arb(lr)
        taken = 0
        eps = _frob_upper(err)  # and ||theta - mid||_2 <= eps (None: no such bound)
        for k in range(int(steps)):
            eta = step_size(eta0, k, schedule)
            grads = P.grads(mid)
            exact = not any(e > 0 for e in err)
            if exact and all(all(v.is_zero() for v in g.ravel()) for g in grads.values()):
                break  # every gradient exactly zero at the exact iterate: the run stops
            step = mid - eta * P.join({n: direction(g, algo, norm, k) for n, g in grads.items()})
            rad = [v.rad() for v in step]
            if exact:
                err, eps = rad, _frob_upper(rad)
            else:
                err, eps = _propagate(P, mid, err, eps, eta, rad, algo, norm, k)
            mid = np.array([v.mid() for v in step], dtype=object)
            rel = _rel(mid, err)
            if not rel <= rad_limit:
                raise Undecidable(
                    f"ball GD replay lost precision at step {k + 1}: the radius of the iterate reached {rel:.3g} of "
                    f"its norm (limit {rad_limit:.3g}; {prec} bits)"
                )
            taken = k + 1
        final = P.split(np.array([m + arb(0, e) for m, e in zip(mid, err)], dtype=object))
        return BallRun(final, eta0, taken, _rel(mid, err))


def _propagate(P: _Problem, mid: np.ndarray, err: list, eps: arb | None, eta: arb, rad: list, algo, norm, k) -> tuple:
    r"""The errors of the next iterate (module docstring): componentwise $e'=\mathrm{rad}+|M|\,b$ and in the 2-norm
    $\epsilon'=\|\mathrm{rad}\|_F+(\|\mathrm{mid}\,M\|_2+\|\mathrm{rad}\,M\|_F)\min(\epsilon,\|b\|_F)$,
    $M=I-\eta_k[\partial\Delta](B)$ over the box $B=\mathrm{mid}\pm b$, $b=\min(e,\epsilon)$;
    returns ``(min(e', eps'), eps')``."""
    b = err if eps is None else [e if e < eps else eps for e in err]
    box = np.array([m + arb(0, e) for m, e in zip(mid, b)], dtype=object)
    J = _dir_jacobian(P, box, algo, norm, k)
    n = len(mid)
    if J is None:  # a constant direction: the error moves with the iterate
        M = None
        new = [_upper(r + e) for r, e in zip(rad, b)]
    else:
        M = np.array([[(1 if j == i else 0) - eta * J[j, i] for i in range(n)] for j in range(n)], dtype=object)
        new = [_upper(rad[j] + sum((M[j, i].abs_upper() * b[i] for i in range(n)), ZERO)) for j in range(n)]
    if eps is None:
        return new, None
    grow = arb(1) if M is None else _matrix_norm_upper(M)
    if grow is None:
        return new, None
    eps_in = eps if eps < _frob_upper(b) else _frob_upper(b)
    eps_new = _upper(_frob_upper(rad) + grow * eps_in)
    return [e if e < eps_new else eps_new for e in new], eps_new


def _frob_upper(xs: Any) -> arb:
    r"""An exact upper bound of $\sqrt{\sum_j x_j^2}$ (``xs`` nonnegative exact numbers)."""
    return _upper(sum((x * x for x in xs), ZERO).sqrt())


def _matrix_norm_upper(M: np.ndarray) -> arb | None:
    r"""An exact upper bound of $\|A\|_2$ over every $A$ in the ball matrix ``M``: $\|\mathrm{mid}\,M\|_2+\|\mathrm{rad}
    \,M\|_F$, the first from a float64 estimate $\sigma$ checked by proving $\alpha I-C^\top C$ positive definite
    ($\alpha=\sigma^2(1+\delta)$, elimination with every pivot proved $>0$); None when that fails."""
    C = np.array([[x.mid() for x in row] for row in M], dtype=object)
    R = _frob_upper([x.rad() for x in M.ravel()])
    Cf = np.array([[float(x) for x in row] for row in C])
    if not np.all(np.isfinite(Cf)):
        return None
    est = float(np.linalg.norm(Cf, 2))
    S = C.T @ C
    for delta in (2.0**-30, 2.0**-20, 2.0**-10):
        alpha = arb(est * est * (1 + delta) + 2.0**-200)
        if _positive_definite(alpha * np.eye(len(S), dtype=np.int64) - S):
            return _upper(alpha.sqrt() + R)
    return None


def _positive_definite(C: np.ndarray) -> bool:
    r"""Whether every symmetric matrix in the ball matrix ``C`` is proved positive definite (Gaussian elimination,
    every pivot proved $>0$)."""
    A = [list(row) for row in C]
    n = len(A)
    for k in range(n):
        p = A[k][k]
        if not p > 0:
            return False
        for i in range(k + 1, n):
            f = A[i][k] / p
            for j in range(k + 1, n):
                A[i][j] = A[i][j] - f * A[k][j]
    return True


def _rel(mid: np.ndarray, err: list) -> float:
    r"""$\max_j\mathrm{err}_j/\|\mathrm{mid}\|_F$ (0 for no error, inf for an error around 0)."""
    rad = max((float(e) for e in err), default=0.0)
    if rad == 0.0:
        return 0.0
    nrm = mid_float(_frob(mid))
    return rad / nrm if nrm > 0 else float("inf")
