r"""Seeded numpy generators of data sets (the paper's law and the special families the theory needs).

Every generator takes ``seed`` (an int or a ``numpy.random.Generator``) and an optional batch size
``B``; the same seed gives the same arrays. Hypothesis strategies (:mod:`attsvm.strategies`) are the
property-based counterparts.

* :func:`paper_law` — THEORY §4: $v, x_{it}, z_i\sim\mathcal N(0,I)$ normalised to unit norm, $Y_i=\pm1$ fair.
* :func:`visual` — E1: $n=2,T=3,d=2$, tokens $0.3\mathcal N$ shifted by $(\mp1,0)$, $Y=(1,1)$.
* :func:`equal_scores` — Assumption B **bit-exact**: $v=e_1$, all non-optimal tokens of input $i$ share
  their first coordinate.
* :func:`overparam` — generic data with $d\ge\max(T-1,n)$.
* :func:`centroid_infeasible` — input 0's selected token is the centroid of its other tokens
  ($d<T-1$), so Att-SVM is infeasible for that selection.
"""

from __future__ import annotations

import numpy as np

from .data import Dataset


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def paper_law(n: int, T: int, d: int, seed=0, B: int | None = None, self_attention: bool = False) -> Dataset:
    """Unit-norm Gaussian tokens, queries and head; fair ±1 labels (cross-attention by default)."""
    r = _rng(seed)
    lead = () if B is None else (B,)
    v = _unit(r.standard_normal((*lead, d)))
    X = _unit(r.standard_normal((*lead, n, T, d)))
    Y = r.choice([-1.0, 1.0], size=(*lead, n))
    if self_attention:
        return Dataset(X, Y, None, v, kind="self", query_index=0)
    Z = _unit(r.standard_normal((*lead, n, d)))
    return Dataset(X, Y, Z, v)


def sequence(n: int, T: int, d: int, K: int, seed=0, B: int | None = None) -> Dataset:
    """Paper-law tokens with K queries per input and a label per query."""
    r = _rng(seed)
    lead = () if B is None else (B,)
    v = _unit(r.standard_normal((*lead, d)))
    X = _unit(r.standard_normal((*lead, n, T, d)))
    Z = _unit(r.standard_normal((*lead, n, K, d)))
    Y = r.choice([-1.0, 1.0], size=(*lead, n, K))
    return Dataset(X, Y, Z, v, kind="sequence")


def causal(n: int, T: int, d: int, seed=0, B: int | None = None) -> Dataset:
    """Causal self-attention: queries are the tokens, query k sees t <= k; a label per query."""
    r = _rng(seed)
    lead = () if B is None else (B,)
    v = _unit(r.standard_normal((*lead, d)))
    X = _unit(r.standard_normal((*lead, n, T, d)))
    Y = r.choice([-1.0, 1.0], size=(*lead, n, T))
    return Dataset(X, Y, None, v, kind="causal")


def visual(seed=0, B: int | None = None) -> Dataset:
    """E1's 2-D instance: n=2, T=3, d=2."""
    r = _rng(seed)
    lead = () if B is None else (B,)
    shift = np.array([[-1.0, 0.0], [1.0, 0.0]])
    X = 0.3 * r.standard_normal((*lead, 2, 3, 2)) + shift[:, None, :]
    v = _unit(r.standard_normal((*lead, 2)))
    Z = _unit(r.standard_normal((*lead, 2, 2)))
    Y = np.ones((*lead, 2))
    return Dataset(X, Y, Z, v)


def equal_scores(n: int, T: int, d: int, seed=0, B: int | None = None) -> Dataset:
    r"""Assumption B exactly: $v=e_1$; input $i$'s optimal token has first coordinate $Y_ic_i^{+}$, all
    others $Y_ic_i^{-}$ with dyadic $c^{+}>c^{-}$, so $\gamma_{it}$ are bit-equal for $t\ne\mathrm{opt}_i$."""
    if d < 2:
        raise ValueError("equal_scores needs d >= 2")
    r = _rng(seed)
    lead = () if B is None else (B,)
    Y = r.choice([-1.0, 1.0], size=(*lead, n))
    hi = r.integers(1, 8, size=(*lead, n)) / 8.0  # in (0, 1)
    lo = hi - r.integers(1, 8, size=(*lead, n)) / 8.0  # strictly smaller, in (-1, 1)
    lo = np.maximum(lo, -7 / 8)
    first = np.repeat(lo[..., None], T, axis=-1)
    opt = r.integers(0, T, size=(*lead, n))
    np.put_along_axis(first, opt[..., None], hi[..., None], axis=-1)
    rest = _unit(r.standard_normal((*lead, n, T, d - 1))) * np.sqrt(1 - first**2)[..., None]
    X = np.concatenate([(Y[..., None] * first)[..., None], rest], axis=-1)
    v = np.zeros((*lead, d))
    v[..., 0] = 1.0
    Z = _unit(r.standard_normal((*lead, n, d)))
    return Dataset(X, Y, Z, v)


def overparam(n: int, T: int, d: int | None = None, seed=0, B: int | None = None) -> Dataset:
    """Paper-law data with d >= max(T-1, n) (d defaults to that bound)."""
    need = max(T - 1, n)
    d = need if d is None else d
    if d < need:
        raise ValueError(f"overparam needs d >= max(T-1, n) = {need}")
    return paper_law(n, T, d, seed=seed, B=B)


def centroid_infeasible(n: int, T: int, d: int, seed=0) -> Dataset:
    """Input 0's token 0 is the centroid of its other tokens and is the selection: Att-SVM infeasible.

    The returned data set carries ``alpha`` (token 0 for input 0, opt elsewhere)."""
    if T < 3:
        raise ValueError("centroid_infeasible needs T >= 3")
    r = _rng(seed)
    ds = paper_law(n, T, d, seed=r)
    X = np.array(ds.X)
    X[0, 0] = X[0, 1:].mean(axis=0)
    alpha = np.array(Dataset(X, ds.Y, ds.Z, ds.v, alpha=np.zeros(n, dtype=np.int64)).scores.argmax(-1))
    alpha[0] = 0
    return Dataset(X, ds.Y, ds.Z, ds.v, alpha=alpha)
