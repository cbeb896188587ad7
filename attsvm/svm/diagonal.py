r"""The diagonal Att-SVM: the attention SVM over diagonal matrices $W=\mathrm{diag}(w)$ (THEORY §6, ``kq-diag-l1``).

.. math:: w^{mm}_{N,\alpha}=\arg\min_w\|w\|_N\quad\text{s.t.}\quad
   \langle\mathrm{diag}(w),A_{it}\rangle=\sum_jw_j\,(x_{i\alpha_i}-x_{it})_j\,z_{ij}\ge1 .

This is the program whose solution the diagonal $(K,Q)$ model $W=\mathrm{diag}(k\odot q)$ is conjectured to pick
(Sheen et al., arXiv 2403.08699: gradient flow on diagonal factors minimises the nuclear norm of $W$, which for a
diagonal $W$ is $\|w\|_1$). It is an ordinary Att-SVM of the *diagonal view* of the data
(:func:`diagonal_view`): tokens $x'_{it}=x_{it}\odot z_i$ and every query $e_1$, for which
$\langle W',A'_{it}\rangle=((x_{i\alpha_i}-x_{it})\odot z_i)^\top W'e_1$ depends on the first column $W'e_1$
only. For an entrywise norm the optima agree exactly: $w\mapsto we_1^\top$ maps diagonal-feasible points to
feasible points of the same norm, and $W'\mapsto W'e_1$ maps feasible points to diagonal-feasible points of no
larger norm; so the certified ℓ1 / ℓ∞ solution of the view (an exact LP certificate,
:mod:`.polyhedral`) certifies $\mathrm{OPT}$ of the diagonal program, and $w=W'e_1$ solves it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..data import Dataset
from ..errors import InputError
from . import polyhedral
from .solution import SVMSolution

__all__ = ["NORMS", "diagonal_view", "solve_diagonal"]

#: the norms of the diagonal program (entrywise, so the view's optimum is the diagonal one)
NORMS = ("l1", "linf")


def diagonal_view(ds: Dataset, alpha=None) -> Dataset:
    r"""The data set whose Att-SVM is the diagonal program of ``ds``: tokens $x_{it}\odot z_i$, queries $e_1$,
    the same labels and head (a single data set; sequence/causal data through the flat view, one row per query;
    the selection ``alpha``, default ``ds.selection``, is carried over explicitly)."""
    if ds.batched:
        raise InputError("diagonal_view takes a single data set (iterate over the batch)")
    f = ds.flat()
    if f.mask is not None and not np.all(f.mask):
        raise InputError("the diagonal Att-SVM is defined for data without invisible tokens (not causal data)")
    a = np.asarray(f.alpha if alpha is None else alpha, dtype=np.int64).reshape(f.X.shape[0])
    X = f.X * f.Z[:, None, :]
    Z = np.zeros_like(f.Z)
    Z[:, 0] = 1.0
    return Dataset(X, f.Y, Z, f.v, a)


def solve_diagonal(ds: Dataset, alpha=None, norm: str = "l1", certify: bool = False) -> SVMSolution:
    r"""The diagonal Att-SVM of ``ds`` for the selection ``alpha`` in the entrywise ``norm`` (module docstring).

    Returns the :class:`SVMSolution` of the view with ``W`` replaced by $\mathrm{diag}(W'e_1)$ and ``extra["w"]``
    the diagonal; objective, margins, multipliers and the certificate (exact with ``certify``) are those of the
    view, whose optimum equals the diagonal one. Infeasible: the view's Farkas certificate."""
    if norm not in NORMS:
        raise InputError(f"the diagonal Att-SVM takes norm {' or '.join(NORMS)}, got {norm!r}")
    sol = polyhedral.solve_polyhedral(diagonal_view(ds, alpha), norm, None, certify=certify)
    if sol.status != "optimal":
        return replace(sol, program="diagonal")
    w = np.asarray(sol.W, dtype=np.float64)[:, 0]
    return replace(sol, program="diagonal", W=np.diag(w), extra={**(sol.extra or {}), "w": w})
