r"""The attention model in numpy: logits, softmax, scores, losses and closed-form gradients (THEORY §1, §3).

Notation (THEORY §1): logits $a_i(W)=X_iWz_i$, softmax $s_i=\mathbb S(a_i)$, scores
$\gamma_{it}=Y_iv^\top x_{it}$, margin-like output $u_i=Y_if(X_i)=\gamma_i^\top s_i$, loss
$\mathcal L(W)=\frac1n\sum_i\ell(u_i)$.

The gradient (claim ``grad-closed-form``)

.. math::
    \nabla\mathcal L(W)=\frac1n\sum_i\ell'(u_i)\,X_i^\top r_i\,z_i^\top,\qquad
    r_{it}=s_{it}\sum_\tau s_{i\tau}(\gamma_{it}-\gamma_{i\tau}) = [(\mathrm{diag}(s_i)-s_is_i^\top)\gamma_i]_t,

is computed in the pairwise form of THEORY §5 (no cancellation in $\gamma_t-\gamma^\top s$ once
$1-\max s<10^{-16}$), with $\ell'(u)=-\exp(-\mathrm{logaddexp}(0,u))$ for the logistic loss.

All functions broadcast over leading batch axes (``...``). A visibility ``mask`` (..., n, T) (True:
visible) excludes tokens (causal attention); masked tokens get probability exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .data import Dataset

LOSSES = ("logistic", "exponential", "correlation")


# ---------------------------------------------------------------------- losses
def loss_value(u: np.ndarray, loss: str = "logistic") -> np.ndarray:
    r"""$\ell(u)$: logistic $\log(1+e^{-u})$, exponential $e^{-u}$, correlation $-u$."""
    if loss == "logistic":
        return np.logaddexp(0.0, -u)
    if loss == "exponential":
        return np.exp(-u)
    if loss == "correlation":
        return -u
    raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")


def loss_derivative(u: np.ndarray, loss: str = "logistic") -> np.ndarray:
    r"""$\ell'(u)$; logistic: $-\exp(-\mathrm{logaddexp}(0,u))=-1/(1+e^u)$ without overflow."""
    if loss == "logistic":
        return -np.exp(-np.logaddexp(0.0, u))
    if loss == "exponential":
        return -np.exp(-u)
    if loss == "correlation":
        return -np.ones_like(u)
    raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")


def loss_constants(loss: str, u_bound: Any) -> tuple[Any, Any]:
    r"""Assumption A constants $(M_0, M_1)$ on $|u|\le$ ``u_bound``: $|\ell'|\le M_1$, $\ell'$ is $M_0$-Lipschitz
    (``u_bound`` a number, or an array of bounds, one per data set of a batch: arrays of constants)."""
    if loss == "logistic":
        return 0.25, 1.0
    if loss == "exponential":
        e = np.exp(u_bound) if np.ndim(u_bound) else float(np.exp(u_bound))
        return e, e
    if loss == "correlation":
        return 0.0, 1.0
    raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")


# ---------------------------------------------------------------------- softmax
def logits(X: np.ndarray, W: np.ndarray, Z: np.ndarray) -> np.ndarray:
    r"""$a_{it}=x_{it}^\top Wz_i$, shape (..., n, T)."""
    return np.einsum("...ntd,...de,...ne->...nt", X, W, Z)


def log_softmax(a: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    r"""$\log\mathbb S(a)_t=a_t-\max a-\log\sum_\tau e^{a_\tau-\max a}$ (masked entries: $-\infty$)."""
    if mask is not None:
        a = np.where(mask, a, -np.inf)
    m = np.max(a, axis=-1, keepdims=True)
    sh = a - m
    return sh - np.log(np.sum(np.exp(sh), axis=-1, keepdims=True))


def softmax(a: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    r"""$\mathbb S(a)_t=e^{a_t}/\sum_\tau e^{a_\tau}$, computed from the max-shifted exponentials."""
    if mask is not None:
        a = np.where(mask, a, -np.inf)
    sh = a - np.max(a, axis=-1, keepdims=True)
    e = np.exp(sh)
    return e / np.sum(e, axis=-1, keepdims=True)


def scores(X: np.ndarray, Y: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""$\gamma_{it}=Y_iv^\top x_{it}$, shape (..., n, T)."""
    return Y[..., None] * np.einsum("...ntd,...d->...nt", X, v)


def optimal_tokens(gamma: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    r"""$\mathrm{opt}_i=\arg\max_t\gamma_{it}$ over visible tokens (first index on ties)."""
    g = gamma if mask is None else np.where(mask, gamma, -np.inf)
    return np.argmax(g, axis=-1)


def residual(s: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    r"""$r_t=s_t\sum_\tau s_\tau(\gamma_t-\gamma_\tau)=[(\mathrm{diag}(s)-ss^\top)\gamma]_t$, pairwise (stable)."""
    diff = gamma[..., :, None] - gamma[..., None, :]
    return s * np.einsum("...tu,...u->...t", diff, s)


# ---------------------------------------------------------------------- W parametrisation
@dataclass(frozen=True)
class Arrays:
    """Raw arrays of the flat view: X (...,n,T,d), Y (...,n), Z (...,n,d), v (...,d), mask or None."""

    X: np.ndarray
    Y: np.ndarray
    Z: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None = None

    @staticmethod
    def of(ds: Dataset) -> Arrays:
        f = ds.flat()
        return Arrays(f.X, f.Y, f.Z, f.v, f.mask)


def _arr(data: Dataset | Arrays) -> Arrays:
    return Arrays.of(data) if isinstance(data, Dataset) else data


def outputs(data: Dataset | Arrays, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Return $(s, \gamma, u)$ with $u_i=\gamma_i^\top s_i$."""
    A = _arr(data)
    s = softmax(logits(A.X, W, A.Z), A.mask)
    g = scores(A.X, A.Y, A.v)
    return s, g, np.sum(s * g, axis=-1)


def loss(data: Dataset | Arrays, W: np.ndarray, loss: str = "logistic") -> np.ndarray:
    r"""$\mathcal L(W)=\frac1n\sum_i\ell(\gamma_i^\top s_i)$ (batched: one value per data set)."""
    _, _, u = outputs(data, W)
    return np.mean(loss_value(u, loss), axis=-1)


def grad_W(data: Dataset | Arrays, W: np.ndarray, loss: str = "logistic") -> np.ndarray:
    r"""$\nabla\mathcal L(W)=\frac1n\sum_i\ell'(u_i)X_i^\top r_iz_i^\top$ (claim ``grad-closed-form``)."""
    A = _arr(data)
    s, g, u = outputs(A, W)
    c = loss_derivative(u, loss) / u.shape[-1]
    r = residual(s, g)
    return np.einsum("...n,...ntd,...nt,...ne->...de", c, A.X, r, A.Z)


def grad_KQ(data: Dataset | Arrays, K: np.ndarray, Q: np.ndarray, loss: str = "logistic"):
    r"""$(\nabla_K,\nabla_Q)=(\nabla\mathcal L(W)Q,\ \nabla\mathcal L(W)^\top K)$ at $W=KQ^\top$."""
    G = grad_W(data, K @ np.swapaxes(Q, -1, -2), loss)
    return G @ Q, np.swapaxes(G, -1, -2) @ K


# ---------------------------------------------------------------------- prompt attention
def prompt_outputs(data: Dataset | Arrays, p: np.ndarray, v: np.ndarray | None = None):
    r"""Prompt attention $f(X)=v^\top X^\top\mathbb S(Xp)$: return $(s,\gamma,u)$."""
    A = _arr(data)
    v = A.v if v is None else v
    s = softmax(np.einsum("...ntd,...d->...nt", A.X, p), A.mask)
    g = scores(A.X, A.Y, v)
    return s, g, np.sum(s * g, axis=-1)


def prompt_loss(data: Dataset | Arrays, p: np.ndarray, v: np.ndarray | None = None, loss: str = "logistic"):
    """Loss of prompt attention (head ``v`` defaults to the data set's)."""
    _, _, u = prompt_outputs(data, p, v)
    return np.mean(loss_value(u, loss), axis=-1)


def grad_p(data: Dataset | Arrays, p: np.ndarray, v: np.ndarray | None = None, loss: str = "logistic"):
    r"""$\nabla_p\mathcal L=\frac1n\sum_i\ell'(u_i)X_i^\top r_i$."""
    A = _arr(data)
    s, g, u = prompt_outputs(A, p, v)
    c = loss_derivative(u, loss) / u.shape[-1]
    return np.einsum("...n,...ntd,...nt->...d", c, A.X, residual(s, g))


def grad_vp(data: Dataset | Arrays, v: np.ndarray, p: np.ndarray, loss: str = "logistic"):
    r"""Joint prompt training: $\nabla_v=\frac1n\sum_i\ell'_iY_iX_i^\top s_i$, $\nabla_p$ as :func:`grad_p`."""
    A = _arr(data)
    s, g, u = prompt_outputs(A, p, v)
    c = loss_derivative(u, loss) / u.shape[-1]
    gv = np.einsum("...n,...n,...ntd,...nt->...d", c, A.Y, A.X, s)
    gp = np.einsum("...n,...ntd,...nt->...d", c, A.X, residual(s, g))
    return gv, gp


# ---------------------------------------------------------------------- smoothness
def smoothness_constant(data: Dataset | Arrays, loss: str = "logistic") -> np.ndarray:
    r"""$L_W=\frac1n\sum_i\big(M_0\|v\|^2\|z_i\|^2\|X_i\|^4+3M_1\|v\|\|z_i\|^2\|X_i\|^3\big)$, $\|X_i\|$ spectral
    (claim ``smoothness-bound``). $M_0,M_1$ from :func:`loss_constants` on $|u|\le\max|\gamma|$."""
    A = _arr(data)
    Xs = np.linalg.norm(A.X, ord=2, axis=(-2, -1))
    z2 = np.sum(A.Z**2, axis=-1)
    nv = np.linalg.norm(A.v, axis=-1)
    ub = np.max(np.abs(scores(A.X, A.Y, A.v)), axis=(-2, -1))  # per data set: a batch's runs stay independent
    M0, M1 = loss_constants(loss, ub)
    M0, M1 = np.asarray(M0)[..., None], np.asarray(M1)[..., None]
    per = M0 * nv[..., None] ** 2 * z2 * Xs**4 + 3 * M1 * nv[..., None] * z2 * Xs**3
    return np.mean(per, axis=-1)


def _pow2_unit(A: np.ndarray, ax: tuple[int, ...]) -> np.ndarray:
    """``A`` divided exactly by the power of two that brings its largest ``|entry|`` over ``ax`` into [1/2, 1)."""
    with np.errstate(invalid="ignore"):
        m = np.max(np.abs(A), axis=ax, keepdims=True) if A.size else np.zeros(A.shape[: A.ndim - len(ax)])
    e = np.frexp(np.where(np.isfinite(m), m, 1.0))[1]
    return np.ldexp(A, -e)


def corr(A: np.ndarray, B: np.ndarray, ndim: int = 2) -> np.ndarray:
    r"""$\mathrm{corr}(A,B)=\langle A,B\rangle/(\|A\|_F\|B\|_F)$ over the last ``ndim`` axes (2: matrices $W$;
    1: vectors $p$, $v$), broadcasting over the leading ones. NaN where $A$ or $B$ is zero (no direction).
    Scale-safe: each of $A$, $B$ is first divided by the power of two $2^{e}$ with its largest $|\cdot|$ in
    $[\tfrac12,1)$ (exact, and corr is scale-invariant), so no square overflows or underflows —
    $\mathrm{corr}(10^{200}I,I)=1$ — and the value is bit-identical to the plain formula wherever that one is
    representable."""
    ax = tuple(range(-int(ndim), 0))
    A, B = (_pow2_unit(np.asarray(x, dtype=np.float64), ax) for x in (A, B))
    num = np.sum(A * B, axis=ax)
    den = np.sqrt(np.sum(A * A, axis=ax)) * np.sqrt(np.sum(B * B, axis=ax))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
