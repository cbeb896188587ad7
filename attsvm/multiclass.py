r"""Multiclass linear classification, the setting of the optimizer theorems (THEORY §6), as attention data.

The model: $W\in\mathbb R^{k\times d_h}$ scores the classes of an input $h_i\in\mathbb R^{d_h}$ by $Wh_i$; the loss
is the cross-entropy $\mathrm{CE}(W)=-\frac1n\sum_i\log\mathbb S(Wh_i)_{y_i}$; the data are *separable* when some
$W$ has $(e_{y_i}-e_c)^\top Wh_i>0$ for all $i$ and $c\ne y_i$. The $N$-max-margin classifier is
$W^{mm}_N=\arg\min\|W\|_N$ s.t. $(e_{y_i}-e_c)^\top Wh_i\ge1$ (Fan, Schmidt, Thrampoulidis, arXiv 2502.04664;
the binary case of Zhang, Zou, Cao, arXiv 2406.10650, is $k=2$ with $W$'s two rows tied).

Two exact encodings, so that the engine and the certified programs of the attention claims run unchanged (a
control that passes here and fails on attention puts the fault on the attention statement, not on the pipeline):

* :func:`as_ntp` — the next-token encoding of :func:`attsvm.ntp.linear.from_counts` (one context per sample,
  count 1 at its label): GD with the ``nll`` loss on the $(k+d_h)^2$ attention matrix $W'$ *is* GD on CE, because
  only the block $W'_{[:k,\,k:]}$ enters the loss (:func:`block`); every other entry has gradient 0 forever.
* :func:`as_attention` — the Att-SVM data of the same constraints: sample $i$ has the $k$ tokens
  $x_{it}=(\mathbf e_t,0)$ and the query $z_i=(0,h_i)$, selection $\alpha_i=y_i$, so
  $\langle W',(x_{i\alpha_i}-x_{it})z_i^\top\rangle=(e_{y_i}-e_t)^\top W'_{[:k,\,k:]}h_i$ and the $N$-Att-SVM of
  $\alpha=y$ is the $N$-max-margin program above (for every norm of :mod:`attsvm.norms`, the entries outside the
  block only add to $\|W'\|_N$, so an optimum vanishes there or has the block's optimal value).
"""

from __future__ import annotations

import numpy as np

from .data import Dataset
from .errors import InputError
from .ntp.data import NTPData
from .ntp.linear import from_counts

__all__ = ["ATTEMPTS", "as_attention", "as_ntp", "block", "separable"]

#: draws of :func:`separable` before it gives up
ATTEMPTS = 1000


def separable(k: int, d: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""Separable multiclass data ``(H, y)``: $h_i\sim\mathcal N(0,I_d/d)$ and $y_i=\arg\max_c(W^\star h_i)_c$ for a
    teacher $W^\star\sim\mathcal N(0,1)^{k\times d}$ (separable by construction); redrawn until every class occurs
    and the teacher's least margin $\min_{i,c\ne y_i}(e_{y_i}-e_c)^\top W^\star h_i$ is at least $10^{-3}$
    (at most ``ATTEMPTS`` draws: with $d=1$ at most two classes can win an argmax, so more are refused)."""
    if not (k >= 2 and d >= 1 and n >= k):
        raise InputError(f"multiclass data need k >= 2 classes, d >= 1 and n >= k samples, got k={k}, d={d}, n={n}")
    rng = np.random.default_rng(seed)
    for _ in range(ATTEMPTS):
        Wt = rng.standard_normal((k, d))
        H = rng.standard_normal((n, d)) / np.sqrt(d)
        S = H @ Wt.T
        y = np.argmax(S, axis=1)
        top = S[np.arange(n), y]
        S[np.arange(n), y] = -np.inf
        if len(np.unique(y)) == k and float(np.min(top - S.max(axis=1))) >= 1e-3:
            return H, y.astype(np.int64)
    raise InputError(f"no separable draw with all {k} classes in {ATTEMPTS} attempts (k={k}, d={d}, n={n})")


def _checked(H: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    H = np.asarray(H, dtype=np.float64)
    y = np.asarray(y)
    if H.ndim != 2 or y.shape != (H.shape[0],) or y.dtype.kind not in "iu":
        raise InputError(f"expected H (n,d) and integer labels y (n,), got {H.shape} and {y.shape}")
    if np.any(y < 0) or np.any(y >= k):
        raise InputError(f"labels must lie in [0,{k})")
    return H, y.astype(np.int64)


def as_ntp(H: np.ndarray, y: np.ndarray, k: int) -> NTPData:
    """The next-token encoding (module docstring): GD with loss ``nll`` on it is GD on the cross-entropy."""
    H, y = _checked(H, y, k)
    counts = np.zeros((len(y), k), dtype=np.int64)
    counts[np.arange(len(y)), y] = 1
    return from_counts(H, counts)


def as_attention(H: np.ndarray, y: np.ndarray, k: int) -> Dataset:
    """The Att-SVM data of the max-margin programs (module docstring), with ``alpha`` the labels."""
    H, y = _checked(H, y, k)
    n, d = H.shape
    D = k + d
    X = np.zeros((n, k, D))
    X[:, np.arange(k), np.arange(k)] = 1.0
    Z = np.zeros((n, D))
    Z[:, k:] = H
    v = np.zeros(D)
    v[:k] = np.arange(k, 0, -1, dtype=np.float64)  # distinct scores; the selection is the given alpha
    return Dataset(X=X, Y=np.ones(n), Z=Z, v=v, alpha=y)


def block(W: np.ndarray, k: int) -> np.ndarray:
    r"""The classifier $W'_{[:k,\,k:]}$ inside an attention matrix of either encoding (batched or not)."""
    return np.asarray(W)[..., :k, k:]
