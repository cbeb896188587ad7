r"""SVM-neighbours, local optimality and the neighbour gap $\delta_\alpha$ (THEORY §2).

* Support tokens $\mathcal T_i=\{t\ne\alpha_i:\langle W^{mm}_\alpha,A_{it}\rangle=1\}$, decided in floating
  point as $|\text{margin}-1|\le$ ``tol('active')`` (an exact certificate, when computed, gives the exact set).
* $\alpha$ is locally optimal iff $\gamma_{i\alpha_i}>\gamma_{it}$ for every $i$ and $t\in\mathcal T_i$.
* $\delta_\alpha=\frac12\min_i\min_{t\in\mathcal T_i,\ \tau\notin\mathcal T_i\cup\{\alpha_i\}}
  (x_{it}-x_{i\tau})^\top W^{mm}_\alpha z_i$. Since
  $(x_{it}-x_{i\tau})^\top Wz_i=\text{margin}_{i\tau}-\text{margin}_{it}$,
  $\delta_\alpha=\frac12\min_i(\min_{\tau}\text{margin}_{i\tau}-\max_{t\in\mathcal T_i}\text{margin}_{it})$.
  When no such pair exists (every row has $\mathcal T_i$ empty or all its tokens support tokens) the minimum
  is over an empty set: :func:`neighbour_gap` returns ``math.inf`` and :class:`SVMSolution` stores ``None``.

Sequence/causal data use their flat view: row $i$ is a query $(i,k)$, invisible tokens are excluded.
"""

from __future__ import annotations

import math

import numpy as np

from ..data import Dataset
from ..errors import InfeasibleError
from ..tolerances import tol
from .constraints import build


def _flat_scores(ds: Dataset) -> np.ndarray:
    g = ds.scores
    return g.reshape(-1, ds.T)


def support_mask(margins: np.ndarray) -> np.ndarray:
    """Bool (N, T): margin within ``tol('active')`` of 1 (NaN entries — alpha, invisible — are False)."""
    with np.errstate(invalid="ignore"):
        return np.abs(np.asarray(margins) - 1.0) <= tol("active")


def support_tokens(ds: Dataset, W: np.ndarray, alpha: np.ndarray | None = None) -> list[tuple[int, int]]:
    r"""$\{(i,t): t\in\mathcal T_i\}$ for the given $W$ (normally $W^{mm}_\alpha$), in row-major order."""
    c = build(ds, alpha)
    grid = c.to_grid(c.margins(np.asarray(W, dtype=float)), fill=np.nan)
    return [(int(i), int(t)) for i, t in np.argwhere(support_mask(grid))]


def locally_optimal_from(scores: np.ndarray, alpha: np.ndarray, support: np.ndarray) -> bool:
    r"""$\gamma_{i\alpha_i}>\gamma_{it}$ for all $(i,t)$ in the bool (N, T) ``support``."""
    ga = np.take_along_axis(scores, np.asarray(alpha).reshape(-1, 1), axis=1)
    return bool(np.all(~support | (scores < ga)))


def gap_from(margins: np.ndarray, support: np.ndarray) -> float:
    r"""$\delta_\alpha$ from the (N, T) margins (NaN at $\alpha_i$ / invisible) and the support mask."""
    valid = ~np.isnan(margins)
    others = valid & ~support
    best = math.inf
    for_rows = np.flatnonzero(support.any(1) & others.any(1))
    if for_rows.size == 0:
        return math.inf
    m = margins[for_rows]
    hi = np.where(support[for_rows], m, -np.inf).max(1)
    lo = np.where(others[for_rows], m, np.inf).min(1)
    best = float(np.min(lo - hi))
    return 0.5 * best


def _solved(ds: Dataset, alpha):
    from .frobenius import solve_fro

    sol = solve_fro(ds, alpha)
    if sol.status != "optimal":
        raise InfeasibleError("Att-SVM(alpha) is infeasible: no SVM-neighbours", certificate=sol.farkas)
    return sol


def is_locally_optimal(ds: Dataset, alpha: np.ndarray | None = None) -> bool:
    """Local optimality of ``alpha`` (default ``ds.selection``); raises InfeasibleError if Att-SVM is infeasible."""
    return bool(_solved(ds, alpha).locally_optimal)


def neighbour_gap(ds: Dataset, alpha: np.ndarray | None = None) -> float:
    r"""$\delta_\alpha$; ``math.inf`` when no pair $t\in\mathcal T_i$, $\tau\notin\mathcal T_i\cup\{\alpha_i\}$."""
    sol = _solved(ds, alpha)
    return math.inf if sol.delta is None else float(sol.delta)
