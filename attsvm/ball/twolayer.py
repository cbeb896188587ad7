r"""The two-layer attention model (issue 30, :mod:`attsvm.twolayer`) in ball arithmetic: rigorous enclosures of the
forward pass, the loss, the closed-form gradients, the selections and the margins of a layer's selection, written
from the definitions (independently of the float64 model :mod:`attsvm.twolayer` and of the 50-digit
:func:`attsvm.highprec.twolayer_outputs`).

One input $i$ (data taken exactly; keys $K_{it}$: the visible $\tau$, and $\tau\le t$ when ``causal``):

.. math::
    A^{(1)}_{i,t\tau}=x_{i\tau}^\top W_1x_{it},\quad s^{(1)}_{i,t\cdot}=\mathbb S(A^{(1)}_{i,t\cdot})_{K_{it}},\quad
    \bar h_{it}=\textstyle\sum_{\tau\in K_{it}}s^{(1)}_{i,t\tau}x_{i\tau},\quad h_{it}=\bar h_{it}+\rho x_{it},

.. math::
    a^{(2)}_{it}=h_{it}^\top W_2z_i,\quad s^{(2)}_i=\mathbb S(a^{(2)}_i)_{\text{visible }t},\quad
    g_{it}=Y_iv^\top h_{it},\quad u_i=\textstyle\sum_ts^{(2)}_{it}g_{it},\quad
    \mathcal L=\tfrac1N\textstyle\sum_i\ell(u_i),

both softmaxes in the log domain of :func:`attsvm.ball.model.log_softmax` (a row without keys: $s^{(1)}=0$,
$\bar h=0$). Gradients (derivation ``twolayer-gradient``), every difference pairwise (no cancellation near
saturation): $r_{it}=s^{(2)}_{it}\sum_\sigma s^{(2)}_{i\sigma}(g_{it}-g_{i\sigma})$,
$c_{it}=s^{(2)}_{it}Y_iv+r_{it}W_2z_i$, $q_{i,t\tau}=s^{(1)}_{i,t\tau}\sum_\sigma s^{(1)}_{i,t\sigma}
c_{it}^\top(x_{i\tau}-x_{i\sigma})$,

.. math::
    \nabla_{W_2}\mathcal L=\tfrac1N\textstyle\sum_i\ell'(u_i)\sum_tr_{it}h_{it}z_i^\top,\qquad
    \nabla_{W_1}\mathcal L=\tfrac1N\textstyle\sum_i\ell'(u_i)\sum_{t,\tau}q_{i,t\tau}x_{i\tau}x_{it}^\top.

Selections $\beta_i=\arg\max_ts^{(2)}_{it}$, $\alpha_{it}=\arg\max_{\tau\in K_{it}}s^{(1)}_{i,t\tau}$ are *proved*:
the chosen ball lies strictly above every other, else :class:`attsvm.kit.Undecidable`. Margins of a selection:
layer 2 $(h_{i\beta_i}-h_{it})^\top W_2z_i$ (N,T), layer 1 $(x_{i\alpha_{it}}-x_{i\tau})^\top W_1x_{it}$ (N,T,T),
$+\infty$ (``arb.pos_inf()``) at the selected entry and at entries that are not keys / not visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from ..kit import Undecidable
from ..twolayer import key_mask
from .gd import proved_positive, squared_norm
from .model import log_softmax, loss_derivative, loss_value, softmax
from .numbers import arbs, to_arb, workprec

__all__ = [
    "ALGOS",
    "RAD_LIMIT",
    "BallForward",
    "BallTwoLayerRun",
    "forward",
    "gradients",
    "hard_outputs",
    "loss",
    "margins",
    "replay",
    "selections",
]

ZERO = arb(0)


@dataclass(frozen=True)
class BallForward:
    r"""The forward pass in balls: ``A1``, ``log_s1``, ``s1`` (N,T,T) (row $t$ the query), ``h_bar``, ``h``
    (N,T,d), ``a2``, ``log_s2``, ``s2``, ``g`` (N,T), ``u`` (N,), ``rho`` (0 or 1), ``keys`` (N,T,T) bool or None,
    ``mask`` (N,T) bool or None."""

    A1: np.ndarray
    log_s1: np.ndarray
    s1: np.ndarray
    h_bar: np.ndarray
    h: np.ndarray
    a2: np.ndarray
    log_s2: np.ndarray
    s2: np.ndarray
    g: np.ndarray
    u: np.ndarray
    rho: int
    keys: np.ndarray | None
    mask: np.ndarray | None


def _dot(x: Any, y: Any) -> arb:
    return sum((a * b for a, b in zip(x, y)), ZERO)


def _matvec(W: np.ndarray, x: Any) -> list:
    return [_dot(row, x) for row in W]


def _keys(keys: np.ndarray | None, i: int, t: int, T: int) -> list[int]:
    return list(range(T)) if keys is None else [int(k) for k in np.flatnonzero(keys[i, t])]


def _visible(mask: np.ndarray | None, i: int, T: int) -> list[int]:
    return list(range(T)) if mask is None else [int(t) for t in np.flatnonzero(mask[i])]


def forward(D: Any, W1: Any, W2: Any, residual: bool, causal: bool, prec: int) -> BallForward:
    r"""The forward pass (module docstring) at ``prec`` bits; ``D`` the ball kit's data (``X``, ``Y``, ``Z``, ``v``,
    ``mask``), ``W1``, ``W2`` (d,d) taken exactly."""
    N, T, d = D.X.shape
    rho = 1 if residual else 0
    keys = key_mask(D.mask, T, bool(causal))
    keys = None if keys is None else np.broadcast_to(keys, (N, T, T))
    with workprec(prec):
        A, B = arbs(W1), arbs(W2)
        A1 = np.empty((N, T, T), dtype=object)
        for i in range(N):
            for t in range(T):
                w = _matvec(A, D.X[i, t])
                for tau in range(T):
                    A1[i, t, tau] = _dot(D.X[i, tau], w)
        log_s1 = log_softmax(A1, keys, prec)
        s1 = softmax(A1, keys, prec)
        h_bar = np.empty((N, T, d), dtype=object)
        for i in range(N):
            for t in range(T):
                ks = _keys(keys, i, t, T)
                for j in range(d):
                    h_bar[i, t, j] = sum((s1[i, t, k] * D.X[i, k, j] for k in ks), ZERO)
        h = h_bar + rho * D.X if rho else h_bar.copy()
        a2 = np.empty((N, T), dtype=object)
        g = np.empty((N, T), dtype=object)
        for i in range(N):
            Bz = _matvec(B, D.Z[i])
            for t in range(T):
                a2[i, t] = _dot(h[i, t], Bz)
                g[i, t] = D.Y[i] * _dot(D.v, h[i, t])
        log_s2 = log_softmax(a2, D.mask, prec)
        s2 = softmax(a2, D.mask, prec)
        u = np.empty(N, dtype=object)
        for i in range(N):
            u[i] = sum((s2[i, t] * g[i, t] for t in _visible(D.mask, i, T)), ZERO)
    return BallForward(A1, log_s1, s1, h_bar, h, a2, log_s2, s2, g, u, rho, keys, D.mask)


def loss(D: Any, W1: Any, W2: Any, loss: str, residual: bool, causal: bool, prec: int) -> arb:
    r"""$\mathcal L(W_1,W_2)=\frac1N\sum_i\ell(u_i)$ (losses of :func:`attsvm.ball.model.loss_value`)."""
    fw = forward(D, W1, W2, residual, causal, prec)
    with workprec(prec):
        return sum((loss_value(x, loss) for x in fw.u), ZERO) / len(fw.u)


def gradients(D: Any, W1: Any, W2: Any, loss: str, residual: bool, causal: bool, prec: int) -> tuple:
    r"""$(\nabla_{W_1}\mathcal L,\nabla_{W_2}\mathcal L)$ (d,d) each, the closed forms of the module docstring."""
    fw = forward(D, W1, W2, residual, causal, prec)
    N, T, d = D.X.shape
    with workprec(prec):
        B = arbs(W2)
        G1 = np.full((d, d), ZERO, dtype=object)
        G2 = np.full((d, d), ZERO, dtype=object)
        for i in range(N):
            X, vis = D.X[i], _visible(D.mask, i, T)
            s1, s2, g, h = fw.s1[i], fw.s2[i], fw.g[i], fw.h[i]
            lp = loss_derivative(fw.u[i], loss) / N
            Bz = _matvec(B, D.Z[i])
            for t in vis:
                r = s2[t] * sum((s2[k] * (g[t] - g[k]) for k in vis if k != t), ZERO)
                G2 += lp * r * np.outer(h[t], D.Z[i])
                c = [s2[t] * D.Y[i] * D.v[j] + r * Bz[j] for j in range(d)]
                cx = {k: _dot(c, X[k]) for k in range(T)}
                ks = _keys(fw.keys, i, t, T)
                for tau in ks:
                    q = s1[t, tau] * sum((s1[t, k] * (cx[tau] - cx[k]) for k in ks if k != tau), ZERO)
                    G1 += lp * q * np.outer(X[tau], X[t])
    return G1, G2


def _argmax(row: np.ndarray, idx: list[int], what: str) -> int:
    """The index in ``idx`` whose ball lies strictly above every other one of ``idx``, else Undecidable."""
    if not idx:
        return 0
    best = max(idx, key=lambda k: row[k].mid())
    if all(row[best] > row[k] for k in idx if k != best):
        return int(best)
    raise Undecidable(f"the {what} is not decided in balls (a tie or overlapping balls)")


def selections(fw: BallForward) -> tuple[np.ndarray, np.ndarray]:
    r"""$(\alpha,\beta)$: $\alpha_{it}=\arg\max_{\tau\in K_{it}}s^{(1)}_{i,t\tau}$ (N,T) and
    $\beta_i=\arg\max_ts^{(2)}_{it}$ (N,), each proved (the winner's log-probability ball strictly above the
    others') or :class:`~attsvm.kit.Undecidable`. A row without keys gets 0 (as :func:`attsvm.twolayer.selections`)."""
    N, T = fw.a2.shape
    alpha = np.zeros((N, T), dtype=np.int64)
    beta = np.zeros(N, dtype=np.int64)
    for i in range(N):
        beta[i] = _argmax(fw.log_s2[i], _visible(fw.mask, i, T), f"layer-2 selection of input {i}")
        for t in range(T):
            alpha[i, t] = _argmax(fw.log_s1[i, t], _keys(fw.keys, i, t, T), f"layer-1 selection of row ({i}, {t})")
    return alpha, beta


def hard_outputs(D: Any, alpha: Any, residual: bool, prec: int) -> np.ndarray:
    r"""$H^\alpha_{it}=x_{i\alpha_{it}}+\rho x_{it}$ (N,T,d), exact balls."""
    a = np.asarray(alpha, dtype=np.int64)
    with workprec(prec):
        picked = np.take_along_axis(D.X, a[..., None], axis=1)
        return picked + D.X if residual else picked.copy()


def margins(fw: BallForward, D: Any, W1: Any, W2: Any, layer: int, selection: Any, prec: int) -> np.ndarray:
    r"""Margins of a layer's selection (module docstring): ``layer=2``, ``selection`` $\beta$ (N,):
    $(h_{i\beta_i}-h_{it})^\top W_2z_i$ (N,T); ``layer=1``, ``selection`` $\alpha$ (N,T):
    $(x_{i\alpha_{it}}-x_{i\tau})^\top W_1x_{it}$ (N,T,T); $+\infty$ at the selected entry and off the keys."""
    N, T, d = D.X.shape
    with workprec(prec):
        if layer == 2:
            b = np.asarray(selection, dtype=np.int64).reshape(N)
            B = arbs(W2)
            out = np.full((N, T), arb.pos_inf(), dtype=object)
            for i in range(N):
                Bz = _matvec(B, D.Z[i])
                for t in _visible(D.mask, i, T):
                    if t != b[i]:
                        out[i, t] = _dot([x - y for x, y in zip(fw.h[i, b[i]], fw.h[i, t])], Bz)
            return out
        a = np.asarray(selection, dtype=np.int64).reshape(N, T)
        A = arbs(W1)
        out = np.full((N, T, T), arb.pos_inf(), dtype=object)
        for i in range(N):
            for t in range(T):
                w = _matvec(A, D.X[i, t])
                for tau in _keys(fw.keys, i, t, T):
                    if tau != a[i, t]:
                        out[i, t, tau] = _dot([x - y for x, y in zip(D.X[i, a[i, t]], D.X[i, tau])], w)
        return out


# ---------------------------------------------------------------------- the ball replay of gd / ngd
ALGOS = ("gd", "ngd")
#: the largest radius of an iterate relative to its Frobenius norm before the replay gives up
RAD_LIMIT = 2.0**-20


@dataclass(frozen=True)
class BallTwoLayerRun:
    r"""The last iterate of a ball replay: ``W1``, ``W2`` (d,d) balls, ``taken`` updates, ``lr`` $\eta_0$."""

    W1: np.ndarray
    W2: np.ndarray
    taken: int
    lr: Any


def replay(
    D: Any,
    W1_0: Any,
    W2_0: Any,
    *,
    algo: str,
    lr: Any,
    steps: int,
    loss: str = "logistic",
    freeze: str | None = None,
    residual: bool = False,
    causal: bool = False,
    normalize: str = "per-factor",
    schedule: str = "constant",
    prec: int = 256,
) -> BallTwoLayerRun:
    r"""``steps`` updates of ``algo`` on $(W_1,W_2)$ from $(W_{1,0},W_{2,0})$ (taken exactly), each re-evaluated on
    the ball iterate (no centred form: the balls widen by the dependency effect, which a few dozen steps at 256 bits
    absorb): ``gd`` $W_{k+1}=W_k-\eta_kG_k$; ``ngd`` each factor divided by its own gradient norm
    (``normalize="per-factor"``) or both by $\sqrt{\|G_1\|_F^2+\|G_2\|_F^2}$ (``"joint"``); the ``freeze`` factor
    (``"W1"``/``"W2"``) takes no step, nor does a factor whose gradient is exactly 0; $\eta_k$ of ``schedule``
    (``"constant"``, ``"rsqrt"`` $\eta_0(k+1)^{-1/2}$). A normaliser not proved positive, or a radius above
    :data:`RAD_LIMIT` times the iterate's norm, raises :class:`~attsvm.kit.Undecidable`."""
    if algo not in ALGOS:
        raise Undecidable(f"the ball replay of the two-layer model covers {ALGOS}, not {algo!r}")
    if schedule not in ("constant", "rsqrt") or normalize not in ("per-factor", "joint"):
        raise ValueError(
            f"schedule 'constant'/'rsqrt' and normalize 'per-factor'/'joint', got {schedule!r}, {normalize!r}"
        )
    if freeze not in (None, "W1", "W2"):
        raise ValueError(f"freeze must be None, 'W1' or 'W2', got {freeze!r}")
    with workprec(prec):
        Ws = [arbs(W1_0), arbs(W2_0)]
        eta0 = to_arb(lr)
        moving = [n for n, name in enumerate(("W1", "W2")) if name != freeze]
        taken = 0
        for k in range(int(steps)):
            G = gradients(D, Ws[0], Ws[1], loss, residual, causal, prec)
            sq = {n: squared_norm(G[n]) for n in moving}
            if all(x == 0 for x in sq.values()):
                break
            eta = eta0 if schedule == "constant" else eta0 / arb(k + 1).sqrt()
            joint = None
            if algo == "ngd" and normalize == "joint":
                joint = proved_positive(sum(sq.values(), ZERO), "the joint gradient norm", k, "twolayer").sqrt()
            new = [W.copy() for W in Ws]
            for n in moving:
                if algo == "gd":
                    c = eta
                elif sq[n] == 0:
                    continue
                else:
                    norm = joint if joint is not None else proved_positive(sq[n], f"|G_{n + 1}|", k, "twolayer").sqrt()
                    c = eta / norm
                new[n] = Ws[n] - c * G[n]
            Ws = new
            taken = k + 1
            size = max(float(squared_norm(Ws[0]).mid()), float(squared_norm(Ws[1]).mid()), 1e-300) ** 0.5
            rad = max(float(x.rad()) for W in Ws for x in W.ravel())
            if not rad <= RAD_LIMIT * size:
                raise Undecidable(f"ball GD replay (twolayer) lost precision at step {k} (radius {rad:.3g})")
        return BallTwoLayerRun(Ws[0], Ws[1], taken, eta0)
