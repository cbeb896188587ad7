r"""SVM-neighbours, local optimality and the neighbour gap $\delta_\alpha$ of a data set (THEORY §2).

* Support tokens $\mathcal T_i=\{t\ne\alpha_i:\langle W^{mm}_\alpha,A_{it}\rangle=1\}$, decided in floating
  point as $|\text{margin}-1|\le$ ``tol('active')`` (an exact certificate, when computed, gives the exact set).
* $\alpha$ is locally optimal iff $\gamma_{i\alpha_i}>\gamma_{it}$ for every $i$ and $t\in\mathcal T_i$.
* $\delta_\alpha=\frac12\min_i\min_{t\in\mathcal T_i,\ \tau\notin\mathcal T_i\cup\{\alpha_i\}}
  (x_{it}-x_{i\tau})^\top W^{mm}_\alpha z_i$. Since
  $(x_{it}-x_{i\tau})^\top Wz_i=\text{margin}_{i\tau}-\text{margin}_{it}$,
  $\delta_\alpha=\frac12\min_i(\min_{\tau}\text{margin}_{i\tau}-\max_{t\in\mathcal T_i}\text{margin}_{it})$.
  When no such pair exists (every row has $\mathcal T_i$ empty or all its tokens support tokens) the minimum
  is over an empty set: :func:`neighbour_gap` returns ``math.inf`` and :class:`SVMSolution` stores ``None``.

The array functions (:func:`support_mask`, :func:`locally_optimal_from`, :func:`gap_from`) live in
:mod:`.support` and are re-exported here; this module adds the ones that solve Att-SVM first.
Sequence/causal data use their flat view: row $i$ is a query $(i,k)$, invisible tokens are excluded.
"""

from __future__ import annotations

import math

import numpy as np

from ..data import Dataset
from ..errors import InfeasibleError
from .constraints import build
from .frobenius import solve_fro
from .solution import SVMSolution
from .support import gap_from, locally_optimal_from, support_mask

__all__ = ["gap_from", "is_locally_optimal", "locally_optimal_from", "neighbour_gap", "support_mask", "support_tokens"]


def support_tokens(ds: Dataset, W: np.ndarray, alpha: np.ndarray | None = None) -> list[tuple[int, int]]:
    r"""$\{(i,t): t\in\mathcal T_i\}$ for the given $W$ (normally $W^{mm}_\alpha$), in row-major order."""
    c = build(ds, alpha)
    grid = c.to_grid(c.margins(np.asarray(W, dtype=float)), fill=np.nan)
    return [(int(i), int(t)) for i, t in np.argwhere(support_mask(grid))]


def solved(ds: Dataset, alpha: np.ndarray | None = None) -> SVMSolution:
    """The Frobenius solution of Att-SVM($\\alpha$); :class:`InfeasibleError` (with the Farkas vector) if infeasible."""
    sol = solve_fro(ds, alpha)
    if sol.status != "optimal":
        raise InfeasibleError("Att-SVM(alpha) is infeasible: no SVM-neighbours", certificate=sol.farkas)
    return sol


def is_locally_optimal(ds: Dataset, alpha: np.ndarray | None = None) -> bool:
    """Local optimality of ``alpha`` (default ``ds.selection``); raises InfeasibleError if Att-SVM is infeasible."""
    return bool(solved(ds, alpha).locally_optimal)


def neighbour_gap(ds: Dataset, alpha: np.ndarray | None = None) -> float:
    r"""$\delta_\alpha$; ``math.inf`` when no pair $t\in\mathcal T_i$, $\tau\notin\mathcal T_i\cup\{\alpha_i\}$."""
    sol = solved(ds, alpha)
    return math.inf if sol.delta is None else float(sol.delta)
