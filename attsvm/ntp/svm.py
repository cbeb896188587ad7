r"""The graph SVM of next-token prediction as a certified program (Li, Huang, Ildiz, Rawat, Oymak,
arXiv 2403.08081; THEORY §7).

.. math:: \min_W\|W\|\quad\text{s.t.}\quad(e_y-e_j)^\top We_q\;\begin{cases}=0&y,j\text{ share an SCC of }
   \mathcal G^{(q)},\\ \ge1&\text{otherwise,}\end{cases}

over every sample (query $q$, label $y$) and other visible token $j$ of it, with the constraints of
:func:`attsvm.ntp.graph.graph_constraints` (deduplicated triples $(q,y,j)$) and the norm Frobenius (``objective``
$\|W\|_F^2$) or nuclear ($\|W\|_\star$). The program is the generic equality SVM on the rank-one features
$A=(e_y-e_j)e_q^\top$ (:func:`attsvm.svm.eqsvm.solve_eqsvm`: Frobenius by a working-set dual with free equality
multipliers, :mod:`attsvm.svm.eqdual`, certified by exact KKT or a rigorous enclosure; proved nuclear bracket;
exact Farkas certificate when infeasible).

The certificates are for the exact features: the embeddings are binary floats, $E=E^{\mathbb Z}2^{e}$
(:func:`attsvm.svm.exact.to_integers`), so $e_y-e_j=(E^{\mathbb Z}_y-E^{\mathbb Z}_j)2^{e}$ exactly
(:func:`exact_features`); the float solver sees the rounded differences $\mathrm{fl}(e_y-e_j)$. (Certifying the
rounded program instead would prove the optimum of a different program: the equalities of a cycle, exactly
dependent, become barely independent after rounding, and that program's optimum can be far from the true one.)
``extra["ineq"]``, ``extra["eq"]``: the (m, 3) triples $(q,y,j)$ in the order of ``margins`` / ``multipliers``
and ``extra["eq_margins"]`` / ``extra["eq_multipliers"]``; ``extra["support_triples"]``: the triples of the
active inequalities (``support`` lists them as ``(0, row)``, see :mod:`attsvm.svm.eqsvm`).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..svm.eqsvm import NORMS, ExactProgram, exact_program_from_integers, solve_eqsvm
from ..svm.exact import to_integers
from ..svm.solution import SVMSolution
from .data import NTPData
from .graph import GraphConstraints, graph_constraints

__all__ = ["exact_features", "solve_graph_svm"]


def exact_features(data: NTPData, gc: GraphConstraints) -> ExactProgram:
    r"""The exact program of the constraints ``gc`` of ``data``: directions $(E^{\mathbb Z}_y-E^{\mathbb Z}_j)2^{e}$
    and queries $E^{\mathbb Z}_q2^{e}$ in integers (:func:`attsvm.svm.eqsvm.exact_program_from_integers`)."""
    En, e = to_integers(data.E)
    En = En.reshape(data.E.shape)

    def rows(trip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = np.asarray(trip, dtype=np.int64).reshape(-1, 3)
        return (En[t[:, 1]] - En[t[:, 2]]).reshape(len(t), data.d), En[t[:, 0]].reshape(len(t), data.d)

    Di, Zi = rows(gc.ineq)
    De, Ze = rows(gc.eq)
    return exact_program_from_integers(Di, Zi, De, Ze, e, e)


def solve_graph_svm(data: NTPData, norm: str = "fro", certify: bool = True) -> SVMSolution:
    r"""Solve the graph SVM of one next-token data set (module docstring); ``program`` ``"ntp"``.

    Returns an :class:`~attsvm.svm.solution.SVMSolution`: status ``"optimal"`` (``W``, ``objective``, per-constraint
    ``margins`` / ``multipliers`` (m_in,), EQ margins and multipliers in ``extra``, certificate ``"exact-kkt"``
    or ``"rigorous-enclosure"`` (fro) or ``"duality-gap"`` (nuc) when ``certify``) or ``"infeasible"`` (exact
    Farkas pair). Bad input (not next-token data, a batch, an unknown norm) raises
    :class:`~attsvm.errors.InputError`."""
    if getattr(data, "kind", None) != "ntp" or not isinstance(data, NTPData):
        raise InputError(f"the graph SVM takes next-token data (kind 'ntp'), got {type(data).__name__}"
                         + (f" of kind {data.kind!r}" if hasattr(data, "kind") else ""))  # fmt: skip
    if data.batched:
        raise InputError("the graph SVM takes a single next-token data set (index the batch first)")
    if norm not in NORMS:
        raise InputError(f"unknown norm {norm!r} for the graph SVM (choose from {', '.join(NORMS)})")
    gc = graph_constraints(data)
    prog = exact_features(data, gc)
    sol = solve_eqsvm(gc.D_in, gc.Z_in, gc.D_eq, gc.Z_eq, norm=norm, certify=certify, program="ntp", exact=prog)
    sol.extra["ineq"] = np.asarray(gc.ineq)
    sol.extra["eq"] = np.asarray(gc.eq)
    sol.extra["support_triples"] = [[int(v) for v in gc.ineq[j]] for _, j in sol.support]
    return sol
