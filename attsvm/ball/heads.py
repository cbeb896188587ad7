r"""The multi-head model ``param="heads"`` in ball arithmetic (python-flint ``arb``), written from the definition
(independently of :mod:`attsvm.gd.steps` and :mod:`attsvm.highprec.model`), and a short ball replay of ``gd`` /
``ngd`` on it — rigorous enclosures for :class:`attsvm.kit.Kit` in ball precision.

$H$ heads $K_h,Q_h\in\mathbb R^{d\times m}$, $s_{ih}=\mathbb S(X_iK_hQ_h^\top z_i)$ (:func:`attsvm.ball.model.softmax`),
the outputs added, $u_i=\sum_h\sum_ts_{iht}\gamma_{it}$, and per head

.. math::
    \nabla_{K_h}\mathcal L=G_hQ_h,\quad\nabla_{Q_h}\mathcal L=G_h^\top K_h,\qquad
    G_h=\tfrac1n\textstyle\sum_i\ell'(u_i)\,X_i^\top r_{ih}z_i^\top,\quad
    r_{iht}=s_{iht}\sum_\tau s_{ih\tau}(\gamma_{it}-\gamma_{i\tau}).

**The replay** (:func:`replay`) re-evaluates every update on the ball iterate itself (no centred form: the balls
widen by the dependency effect, about $\times8$ per normalised step, which a few dozen steps at 256 bits absorb).
``gd``: $\theta_{k+1}=\theta_k-\eta_kg_k$; ``ngd``: each head's $K_h$, $Q_h$ divided by its own gradient norm
(``normalize="per-factor"``: per-head normalisation) or every factor by the norm of all heads' gradients
(``"joint"``); the normaliser must be proved positive, and after each update the largest radius relative to the
iterate's norm must stay $\le$ :data:`RAD_LIMIT`, else :class:`~attsvm.kit.Undecidable`. A factor whose gradient is
exactly zero takes no step; the run stops when every gradient is exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from ..kit import Undecidable
from .gd import proved_positive, squared_norm
from .model import logits, loss_derivative, softmax
from .numbers import arbs, to_arb, workprec

__all__ = ["ALGOS", "RAD_LIMIT", "HeadsRun", "grad_heads", "replay"]

ALGOS = ("gd", "ngd")
#: the largest radius of an iterate relative to its Frobenius norm before the replay gives up
RAD_LIMIT = 2.0**-20
ZERO = arb(0)


@dataclass
class HeadsRun:
    r"""A ball replay on ``heads``: ``final`` ``{"K", "Q"}`` (H,d,m) object arrays of balls, ``lr`` $\eta_0$ (a ball),
    ``taken`` the updates taken."""

    final: dict[str, np.ndarray]
    lr: Any
    taken: int


def _grads(D: Any, K: np.ndarray, Q: np.ndarray, loss: str, prec: int) -> tuple[np.ndarray, np.ndarray]:
    N, T, d = D.X.shape
    H = K.shape[0]
    s = [softmax(logits(D, K[h] @ Q[h].T, prec), D.mask, prec) for h in range(H)]
    g = D.gamma
    u = [sum((s[h][i, t] * g[i, t] for h in range(H) for t in range(T)), ZERO) for i in range(N)]
    coef = [loss_derivative(u[i], loss) / N for i in range(N)]
    gK, gQ = np.empty(K.shape, dtype=object), np.empty(Q.shape, dtype=object)
    for h in range(H):
        G = np.full((d, d), ZERO, dtype=object)
        for i in range(N):
            r = [s[h][i, t] * sum((s[h][i, k] * (g[i, t] - g[i, k]) for k in range(T)), ZERO) for t in range(T)]
            xr = [coef[i] * sum((r[t] * D.X[i, t, j] for t in range(T)), ZERO) for j in range(d)]
            for j in range(d):
                for k in range(d):
                    G[j, k] = G[j, k] + xr[j] * D.Z[i, k]
        gK[h], gQ[h] = G @ Q[h], G.T @ K[h]
    return gK, gQ


def grad_heads(D: Any, K: Any, Q: Any, loss: str, prec: int) -> tuple[np.ndarray, np.ndarray]:
    r"""$(\nabla_{K_h}\mathcal L,\nabla_{Q_h}\mathcal L)_h$, two (H,d,m) arrays of balls (module docstring); ``D``
    the ball data (:func:`attsvm.ball.model.flat` as a kit's data), ``K``, ``Q`` (H,d,m) taken exactly."""
    with workprec(prec):
        return _grads(D, arbs(K), arbs(Q), loss, prec)


def replay(
    D: Any,
    K0: Any,
    Q0: Any,
    *,
    algo: str,
    lr: Any,
    steps: int,
    loss: str = "logistic",
    normalize: str = "per-factor",
    schedule: str = "constant",
    prec: int = 256,
) -> HeadsRun:
    r"""``steps`` updates of ``algo`` (``gd`` / ``ngd``, ``normalize``) from $(K_0,Q_0)$ (H,d,m), taken exactly, with
    step sizes $\eta_k$ of ``schedule`` (``"constant"``, ``"rsqrt"`` $\eta_0(k+1)^{-1/2}$): the balls enclose the
    exact iterates, or :class:`~attsvm.kit.Undecidable` (module docstring)."""
    if algo not in ALGOS:
        raise Undecidable(f"the ball replay of the heads model covers {ALGOS}, not {algo!r}")
    if schedule not in ("constant", "rsqrt"):
        raise ValueError(f"schedule must be 'constant' or 'rsqrt', got {schedule!r}")
    with workprec(prec):
        K, Q = arbs(K0), arbs(Q0)
        eta0 = to_arb(lr)
        taken = 0
        for k in range(int(steps)):
            gK, gQ = _grads(D, K, Q, loss, prec)
            sq = {(n, h): squared_norm(g[h]) for n, g in (("K", gK), ("Q", gQ)) for h in range(K.shape[0])}
            if all(x == 0 for x in sq.values()):
                break
            eta = eta0 if schedule == "constant" else eta0 / arb(k + 1).sqrt()
            joint = None
            if algo == "ngd" and normalize == "joint":
                joint = proved_positive(sum(sq.values(), ZERO), "the joint gradient norm", k, "heads").sqrt()
            newK, newQ = K.copy(), Q.copy()
            for (n, h), x in sq.items():
                g, old, new = (gK, K, newK) if n == "K" else (gQ, Q, newQ)
                if algo == "gd":
                    c = eta
                elif x == 0:
                    continue
                else:
                    c = eta / (joint if joint is not None else proved_positive(x, f"|g_{n}{h}|", k, "heads").sqrt())
                new[h] = old[h] - c * g[h]
            K, Q = newK, newQ
            taken = k + 1
            size = max(float(squared_norm(K).mid()), float(squared_norm(Q).mid()), 1e-300) ** 0.5
            rad = max(float(x.rad()) for x in (*K.ravel(), *Q.ravel()))
            if not rad <= RAD_LIMIT * size:
                raise Undecidable(f"ball GD replay (heads) lost precision at step {k} (radius {rad:.3g})")
        return HeadsRun({"K": K, "Q": Q}, eta0, taken)
