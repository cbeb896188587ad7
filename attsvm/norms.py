r"""Scale-safe norms (numpy): the norms the programs minimise and GD reports, without overflow or underflow.

Each is positively homogeneous, $\|2^{e}W\|=2^{e}\|W\|$, so it is evaluated on $W2^{-e}$ (largest entry in
$[\frac12,1)$, an exact rescaling) and multiplied back: finite whenever the norm itself is a float64
(``numpy.linalg.norm`` squares its entries: ``inf`` / ``0`` for $\max|W|\gtrsim10^{154}$ / $\lesssim10^{-162}$).
The torch counterpart for batched GD is :func:`attsvm.gd.numerics.fro_norm`.

* :func:`frobenius_norm` $\|W\|_F=(\sum_{ab}W_{ab}^2)^{1/2}$ (the Euclidean norm of a vector; over ``axis``
  for batches),
* :func:`nuclear_norm` $\|W\|_\star=\sum_k\sigma_k(W)$,
* :func:`entrywise_norm` $\|W\|_q=(\sum_{ab}|W_{ab}|^q)^{1/q}$, $q>1$ ($q=\infty$: the largest entry).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _split(W: np.ndarray) -> tuple[np.ndarray, int]:
    W = np.asarray(W, dtype=np.float64)
    mx = float(np.max(np.abs(W), initial=0.0))
    if mx == 0.0 or not np.isfinite(mx):
        return W, 0
    e = int(np.frexp(mx)[1])
    return np.ldexp(W, -e), e


def _back(x: float, e: int) -> float:
    with np.errstate(over="ignore"):
        return float(np.ldexp(x, e))


def frobenius_norm(W: np.ndarray, axis: int | tuple[int, ...] | None = None) -> Any:
    r"""$\|W\|_F$ over all entries (a float), or over ``axis`` (an array: one norm per remaining index),
    each rescaled by its own power of two $2^{e}\ge\max|W|$."""
    if axis is None:
        Ws, e = _split(W)
        return _back(float(np.sqrt(np.sum(Ws * Ws))), e)
    a = np.asarray(W, dtype=np.float64)
    m = np.max(np.abs(a), axis=axis, keepdims=True) if a.size else np.zeros((1,) * a.ndim)
    e = np.frexp(m)[1]
    out = np.sqrt(np.sum(np.square(np.ldexp(a, -e)), axis=axis, keepdims=True))
    with np.errstate(over="ignore"):
        out = np.ldexp(out, e)
    return np.squeeze(out, axis=axis)


def nuclear_norm(W: np.ndarray) -> float:
    r"""$\|W\|_\star=\sum_k\sigma_k(W)$."""
    Ws, e = _split(W)
    return _back(float(np.linalg.svd(Ws, compute_uv=False).sum()), e)


def entrywise_norm(W: np.ndarray, q: float) -> float:
    r"""Entrywise $\|W\|_q=(\sum_{ab}|W_{ab}|^q)^{1/q}$ ($q=\infty$: $\max|W_{ab}|$)."""
    a = np.abs(np.asarray(W, dtype=np.float64)).ravel()
    s = float(a.max()) if a.size else 0.0
    if s == 0:
        return 0.0
    if np.isinf(q):
        return s
    return float(s * np.sum((a / s) ** q) ** (1.0 / q))


#: the matrix norms :func:`matrix_norms` evaluates (THEORY §6): Frobenius, entrywise l1 / l_inf / l_q, spectral,
#: nuclear
MATRIX_NORMS = ("fro", "l1", "linf", "lq", "spec", "nuc")


def matrix_norms(W: np.ndarray, kind: str, q: float | None = None) -> np.ndarray:
    r"""$\|W_b\|$ for every matrix of a stack ``W`` (..., d, d), in the norm ``kind`` of :data:`MATRIX_NORMS`:
    ``fro`` $(\sum W_{ab}^2)^{1/2}$, ``l1`` $\sum|W_{ab}|$, ``linf`` $\max|W_{ab}|$, ``lq``
    $(\sum|W_{ab}|^q)^{1/q}$, ``spec`` $\sigma_{\max}$, ``nuc`` $\sum_k\sigma_k$. Scale-safe: each matrix is
    divided by its largest entry first (exactly a power of two), and a zero matrix has norm 0."""
    W = np.asarray(W, dtype=np.float64)
    mx = np.max(np.abs(W), axis=(-2, -1), keepdims=True)
    e = np.where((mx > 0) & np.isfinite(mx), np.frexp(mx)[1], 0)
    Ws = np.ldexp(W, -e)
    if kind == "fro":
        out = np.sqrt(np.sum(Ws * Ws, axis=(-2, -1)))
    elif kind == "l1":
        out = np.sum(np.abs(Ws), axis=(-2, -1))
    elif kind == "linf":
        out = np.max(np.abs(Ws), axis=(-2, -1))
    elif kind == "lq":
        if q is None or not q > 1:
            raise ValueError("the entrywise l_q norm needs q > 1")
        out = np.sum(np.abs(Ws) ** q, axis=(-2, -1)) ** (1.0 / q)
    elif kind in ("spec", "nuc"):
        sv = np.linalg.svd(Ws, compute_uv=False)
        out = sv[..., 0] if kind == "spec" else sv.sum(-1)
    else:
        raise ValueError(f"unknown matrix norm {kind!r} (known: {', '.join(MATRIX_NORMS)})")
    with np.errstate(over="ignore"):
        return np.ldexp(out, e[..., 0, 0])
