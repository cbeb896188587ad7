r"""A numpy reference stepper for GD on $W$: the independent oracle of the torch engine (:func:`attsvm.gd.run`).

The engine is what claims and experiments run; this module re-implements its two algorithms on $W$ in a
few lines of numpy so that tests can compare the two (they agree to about $10^{-13}$ relative over thousands
of steps), and so that a reader can see the definitions at a glance:

.. math::
    \texttt{gd\_reference}:\ W_{k+1}=W_k-\eta\nabla\mathcal L(W_k)\ (\eta=1/L_W\ \text{by default}),\qquad
    \texttt{ngd\_reference}:\ W_{k+1}=W_k-\eta\,\tilde G_k/\|\tilde G_k\|_F .

The log-domain gradient direction
---------------------------------
With $c_i=\ell'(u_i)/n<0$ and $s_i=\mathbb S(a_i)$, the gradient (claim ``grad-closed-form``) is a
sum over token *pairs* with non-negative weights,

.. math::
    \nabla\mathcal L(W)=-\sum_i\sum_{t<\tau}\underbrace{|c_i|\,s_{it}s_{i\tau}}_{w_{it\tau}}
    (\gamma_{it}-\gamma_{i\tau})(x_{it}-x_{i\tau})z_i^\top ,

so $\log w_{it\tau}=\log|c_i|+\log s_{it}+\log s_{i\tau}$ is available from the log-softmax even when
$w$ underflows. Factoring out $M=\max\log w$ gives $\nabla\mathcal L=e^{M}\tilde G$ with $\tilde G$ of
order one: its direction is what normalised GD needs (THEORY §5, "Underflow"), and
$M_i-M$ ($M_i$ the largest log-weight of input $i$) is the log of input $i$'s share of the gradient
(THEORY §5, "Stuck inputs"). Pairs with bit-equal scores contribute exactly zero (Assumption B).

Scale safety: scores, tokens and queries whose largest magnitude leaves $2^{\pm128}$ are rescaled by exact
powers of two, and $\tilde G$ is normalised to $\max|\tilde G|\in[\frac12,1)$; the binary exponent goes to
:attr:`LogGrad.exp2` ($\nabla\mathcal L=e^{\texttt{log\_scale}}2^{\texttt{exp2}}G$, ``exp2`` $=0$ for in-range
data, so ``exp(log_scale) * G`` stays the gradient there). The NGD step $\eta G/\|G\|$ then never squares
into overflow, and the GD step is ``ldexp(eta * exp(log_scale) * G, exp2)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data import Dataset
from ..model import Arrays, log_softmax, logits, scores, smoothness_constant
from ..norms import frobenius_norm

__all__ = ["LogGrad", "log_gradient", "RefRun", "ngd_reference", "gd_reference"]


@dataclass
class LogGrad:
    r"""$\nabla\mathcal L=e^{\texttt{log\_scale}}\,2^{\texttt{exp2}}\,\texttt{G}$; ``log_share`` (..., n): $M_i-M$
    (``-inf`` for an input with no contribution); ``log_s`` (..., n, T) the log-softmax; ``exp2`` (...) int,
    0 unless the data are out of range (module docstring)."""

    G: np.ndarray
    log_scale: np.ndarray
    log_share: np.ndarray
    log_s: np.ndarray
    exp2: np.ndarray | int = 0


def _range_scaled(a: np.ndarray, lead: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a * 2^-e, e)`` per leading index when some max|a| leaves 2^(+-128), else ``(a, 0)``."""
    m = np.max(np.abs(a).reshape(*a.shape[:lead], -1), axis=-1)
    e = np.frexp(m)[1]
    if np.all((np.abs(e) <= 128) | (m == 0)):
        return a, np.zeros_like(e)
    return np.ldexp(a, -e.reshape(*e.shape, *([1] * (a.ndim - lead)))), e


def _normalised(G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(G * 2^-e, e)`` with max|G * 2^-e| in [1/2, 1) over the last two axes (e = 0 for G = 0)."""
    e = np.frexp(np.max(np.abs(G), axis=(-2, -1)))[1]
    return np.ldexp(G, -e[..., None, None]), e


def log_gradient(A: Arrays, W: np.ndarray) -> LogGrad:
    """Log-domain gradient of the logistic loss for cross-attention arrays (batched over leading axes)."""
    ls = log_softmax(logits(A.X, W, A.Z), A.mask)
    lead = A.X.ndim - 3
    gam = scores(A.X, A.Y, A.v)
    n = gam.shape[-2]
    u = np.sum(np.exp(ls) * gam, axis=-1)  # the outputs from the true scores
    g, eg = _range_scaled(gam, lead)  # the score differences from exactly rescaled ones
    X, ex = _range_scaled(np.asarray(A.X, dtype=np.float64), lead)
    Z, ez = _range_scaled(np.asarray(A.Z, dtype=np.float64), lead)
    lc = -np.logaddexp(0.0, u) - np.log(n)  # log|l'(u)|/n for the logistic loss
    dg = g[..., :, None] - g[..., None, :]  # (..., n, T, T)
    lw = lc[..., None, None] + ls[..., :, None] + ls[..., None, :]
    lw = np.where(dg == 0.0, -np.inf, lw)
    M_i = np.max(lw, axis=(-2, -1))  # (..., n)
    M = np.max(M_i, axis=-1)  # (...)
    Mfin = np.where(np.isfinite(M), M, 0.0)
    r = np.sum(np.exp(lw - Mfin[..., None, None, None]) * dg, axis=-1)  # (..., n, T): r_it e^{-M}|c_i|
    xr = np.einsum("...nt,...ntd->...nd", r, X)
    G = -np.einsum("...nd,...ne->...de", xr, Z)
    exp2 = eg + ex + ez
    if np.any(exp2 != 0):  # out-of-range data: also bring G to [1/2, 1)
        G, eG = _normalised(G)
        exp2 = exp2 + eG
    return LogGrad(G, M, M_i - Mfin[..., None], ls, exp2)


@dataclass
class RefRun:
    """A reference run: final ``W``; at the recorded ``steps``: ``norm``, ``log_s``, ``log_share`` and ``Ws``."""

    W: np.ndarray
    steps: np.ndarray
    norm: np.ndarray
    log_s: np.ndarray
    log_share: np.ndarray
    Ws: np.ndarray


def _run(ds: Dataset, W0: np.ndarray, steps: int, record_every: int, update) -> RefRun:
    A = Arrays.of(ds)
    W = np.array(W0, dtype=np.float64)
    rec: dict[str, list] = {"k": [], "norm": [], "ls": [], "sh": [], "W": []}
    for k in range(steps + 1):
        lg = log_gradient(A, W)
        if k % record_every == 0 or k == steps:
            rec["k"].append(k)
            rec["norm"].append(frobenius_norm(W, axis=(-2, -1)))
            rec["ls"].append(lg.log_s)
            rec["sh"].append(lg.log_share)
            rec["W"].append(W.copy())
        if k == steps:
            break
        W = update(W, lg)
    stack = lambda key: np.stack(rec[key])  # noqa: E731
    return RefRun(W, np.array(rec["k"]), stack("norm"), stack("ls"), stack("sh"), stack("W"))


def ngd_reference(ds: Dataset, W0: np.ndarray, steps: int, lr: float = 0.1, record_every: int = 100) -> RefRun:
    r"""Normalised GD $W_{k+1}=W_k-\eta\tilde G/\|\tilde G\|_F$ with the log-domain direction
    (scale-safe norm)."""

    def upd(W, lg):
        nrm = frobenius_norm(lg.G, axis=(-2, -1))[..., None, None]
        return W - lr * lg.G / np.where(nrm > 0, nrm, 1.0)

    return _run(ds, W0, steps, record_every, upd)


def gd_reference(ds: Dataset, W0: np.ndarray, steps: int, lr: Any = None, record_every: int = 100) -> RefRun:
    r"""Plain GD $W_{k+1}=W_k-\eta\nabla\mathcal L(W_k)$, $\eta=1/L_W$ (one per data set) by default."""
    eta = 1.0 / np.asarray(smoothness_constant(ds)) if lr is None else np.asarray(lr, dtype=np.float64)
    eta = np.asarray(eta)[..., None, None]

    def upd(W, lg):
        e2 = np.asarray(lg.exp2)
        step = eta * np.exp(lg.log_scale)[..., None, None] * lg.G
        return W - (np.ldexp(step, e2[..., None, None]) if np.any(e2 != 0) else step)

    return _run(ds, W0, steps, record_every, upd)
