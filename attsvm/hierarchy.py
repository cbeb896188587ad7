r"""The hierarchy of SVMs of two-layer attention (issue 30; notation of :mod:`attsvm.twolayer`): the max-margin
programs each layer of a trained $(W_1,W_2)$ is compared with, as exact encodings into the certified one-layer
Att-SVM of :mod:`attsvm.svm`.

* **Top layer.** The Att-SVM of the layer-2 selection $\beta$ on the one-layer data set whose tokens are the layer-1
  outputs: the soft outputs $h_{it}$ of the current $W_1$ (exact for a frozen $W_1$: the model *is* the one-layer
  model on $h$), or the hard outputs $H^\alpha_{it}=x_{i\alpha_{it}}+\rho x_{it}$ of the final layer-1 selection
  (:func:`attsvm.twolayer.top_layer_dataset`).
* **Raw tokens** (the control): the one-layer Att-SVM of $\beta$ on the tokens $x_{it}$ themselves.
* **Layer 1** over a row set $R$ (:func:`layer1_data`): $\min\|W_1\|_F$ s.t.
  $(x_{i\alpha_{it}}-x_{i\tau})^\top W_1x_{it}\ge1$ for $(i,t)\in R$, $\tau\ne\alpha_{it}$ — the sequence SVM of
  THEORY §2 with queries $x_{it}$, encoded as a cross data set with one input per row (tokens $X_i$, query
  $x_{it}$, selection $\alpha_{it}$): the same constraints, term by term. The rows :func:`selected_rows` are
  $R_\beta=\{(i,\beta_i)\}$, the rows whose output layer 2 selects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import twolayer
from .data import Dataset
from .errors import InputError

__all__ = ["Hierarchy", "compare", "layer1_data", "selected_rows"]


def selected_rows(beta: Any) -> list[tuple[int, int]]:
    r"""$R_\beta=\{(i,\beta_i)\}$: the layer-1 rows whose outputs layer 2 selects."""
    return [(i, int(b)) for i, b in enumerate(np.asarray(beta))]


def layer1_data(ds: Dataset, alpha: Any, rows: list[tuple[int, int]]) -> Dataset:
    r"""The layer-1 SVM over the rows ``rows`` as a one-layer cross data set: input $r=(i,t)$ has the tokens $X_i$,
    the query $x_{it}$ and the selection $\alpha_{it}$ (module docstring); labels $+1$ and the head of ``ds`` (the
    Att-SVM constraints read neither)."""
    if not rows:
        raise InputError("the layer-1 SVM needs at least one row")
    X = np.asarray(ds.X)
    a = np.asarray(alpha)
    if ds.batched or a.shape != X.shape[:-1]:
        raise InputError(f"layer1_data takes one data set and alpha of shape {X.shape[:-1]}")
    idx = np.array(rows, dtype=np.int64)
    return Dataset(
        X[idx[:, 0]], np.ones(len(rows)), X[idx[:, 0], idx[:, 1]], np.asarray(ds.v), alpha=a[idx[:, 0], idx[:, 1]]
    )


@dataclass(frozen=True)
class Hierarchy:
    r"""The selections of $(W_1,W_2)$ and the SVMs each layer is compared with (None where infeasible):
    ``alpha`` (N,T), ``beta`` (N,), ``top_soft``, ``top_hard``, ``raw`` (the top-layer Att-SVMs of $\beta$ over
    $h$, $H^\alpha$, $x$), ``layer1`` (the layer-1 SVM over $R_\beta$), and $1-\mathrm{corr}$ of $W_2$ with the
    first three and of $W_1$ with the last (``gap_*``, NaN where the SVM is infeasible)."""

    alpha: np.ndarray
    beta: np.ndarray
    top_soft: np.ndarray | None
    top_hard: np.ndarray | None
    raw: np.ndarray | None
    layer1: np.ndarray | None
    gap_top_soft: float
    gap_top_hard: float
    gap_raw: float
    gap_layer1: float


def compare(ds: Dataset, W1: Any, W2: Any, residual: bool = False) -> Hierarchy:
    r"""Selections, SVMs and $1-\mathrm{corr}$ gaps of one trained $(W_1,W_2)$ on one data set (:class:`Hierarchy`)."""
    from .model import corr
    from .svm import wmm

    fw = twolayer.forward(ds, W1, W2, residual=residual)
    alpha, beta = twolayer.selections(fw)
    hard = twolayer.hard_outputs(ds, alpha, residual=residual)
    tops = [wmm(twolayer.top_layer_dataset(ds, H, beta)) for H in (fw.h, hard, np.asarray(ds.X))]
    l1 = wmm(layer1_data(ds, alpha, selected_rows(beta)))

    def gap(W: Any, S: np.ndarray | None) -> float:
        return float("nan") if S is None else 1.0 - float(corr(np.asarray(W, dtype=np.float64), S))

    return Hierarchy(alpha, beta, *tops, l1, gap(W2, tops[0]), gap(W2, tops[1]), gap(W2, tops[2]), gap(W1, l1))
