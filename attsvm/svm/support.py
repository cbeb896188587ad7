r"""Support tokens, local optimality and the neighbour gap from given margins (pure array functions).

* Support tokens $\mathcal T_i=\{t\ne\alpha_i:\langle W^{mm}_\alpha,A_{it}\rangle=1\}$, decided in floating
  point as $|\text{margin}-1|\le$ ``tol('active')`` (:func:`support_mask`; an exact certificate, when computed,
  gives the exact set).
* $\alpha$ is locally optimal iff $\gamma_{i\alpha_i}>\gamma_{it}$ for every $i$ and $t\in\mathcal T_i$
  (:func:`locally_optimal_from`).
* $\delta_\alpha=\frac12\min_i(\min_{\tau\notin\mathcal T_i\cup\{\alpha_i\}}\text{margin}_{i\tau}
  -\max_{t\in\mathcal T_i}\text{margin}_{it})$ (:func:`gap_from`; ``math.inf`` over an empty set).

These take the (N, T) margin grid of a solution (NaN at $(i,\alpha_i)$ and at invisible tokens) and never solve
anything; :mod:`.neighbours` computes them for a data set by solving Att-SVM.
"""

from __future__ import annotations

import math

import numpy as np

from ..tolerances import tol


def support_mask(margins: np.ndarray) -> np.ndarray:
    """Bool (N, T): margin within ``tol('active')`` of 1 (NaN entries — alpha, invisible — are False)."""
    with np.errstate(invalid="ignore"):
        return np.abs(np.asarray(margins) - 1.0) <= tol("active")


def locally_optimal_from(scores: np.ndarray, alpha: np.ndarray, support: np.ndarray) -> bool:
    r"""$\gamma_{i\alpha_i}>\gamma_{it}$ for all $(i,t)$ in the bool (N, T) ``support``."""
    ga = np.take_along_axis(scores, np.asarray(alpha).reshape(-1, 1), axis=1)
    return bool(np.all(~support | (scores < ga)))


def gap_from(margins: np.ndarray, support: np.ndarray) -> float:
    r"""$\delta_\alpha$ from the (N, T) margins (NaN at $\alpha_i$ / invisible) and the support mask."""
    valid = ~np.isnan(margins)
    others = valid & ~support
    for_rows = np.flatnonzero(support.any(1) & others.any(1))
    if for_rows.size == 0:
        return math.inf
    m = margins[for_rows]
    hi = np.where(support[for_rows], m, -np.inf).max(1)
    lo = np.where(others[for_rows], m, np.inf).min(1)
    return 0.5 * float(np.min(lo - hi))
