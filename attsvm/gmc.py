r"""Gaussian Match-and-Copy (GMC; Gonon, Cordonnier, Boumal, arXiv 2602.07562): the data law, the minimal
two-layer attention model with the previous-token head in place, its square loss, and its max-margin program.

**What was read and what is reconstructed.** Read (the stored abstract and two third-party summaries of the
paper; the theorem text, its number and its event were *not* available): a sequence of i.i.d. Gaussian tokens, a
hidden index $t_0$ drawn uniformly, a query correlated only with the token at $t_0$ (through a fixed matrix $C$),
the target the *next* token $e_{t_0+1}$ (through $W_V$, plus Gaussian noise); a minimal two-layer attention
model, a previous-token head (PTH) feeding an induction head (IH), trained by GD on the square loss; the
statement "GD trajectories that reach vanishing empirical loss diverge in norm (logarithmically) while their
direction aligns with the max-margin separator, giving hard match selection", under explicit technical conditions
and a high-probability geometric event. Reconstructed here (docs/theory.md says so): $C=I$, $W_V=I$, no target
noise (a vanishing loss needs it), the PTH exact (key of position $t$ the previous token), the separator below, and
the rate constant $\|W^{mm}\|_F/2$.

**The law** (:func:`build`; the strategy ``gmc`` of :mod:`attsvm.strategies`): input $i$ has tokens
$e_{i0},\dots,e_{i,T-1}\sim\mathcal N(0,I_d/d)$, a match index $t_{0,i}\in\{0,\dots,T-2\}$ and the query
$q_i=e_{i,t_{0,i}}+\sigma\xi_i$, $\xi_i\sim\mathcal N(0,I_d/d)$. It is stored as an attsvm
:class:`~attsvm.data.Dataset`: ``X`` the tokens, ``Z`` the queries, ``alpha`` the copied position
$t_{0,i}+1$, $Y_i=1$ and $v=e_1$ (no head: $v$ is unused).

**The model** (the IH with the PTH in place): position $t\ge1$ has key $k_{it}=e_{i,t-1}$ and value $e_{it}$,

.. math:: a_{it}=k_{it}^\top Wq_i,\quad s_i=\mathbb S(a_i)\ (t=1..T-1),\quad
          \hat y_i=\sum_ts_{it}e_{it},\quad \mathcal L(W)=\frac1n\sum_i\|\hat y_i-e_{i,t_{0,i}+1}\|^2 .

It is the one-layer model of :mod:`attsvm.model` on the keys (:func:`attention_view`) with the engine's square-loss
regression head $(V,Y_t)$ = (the values $e_{it}$, the targets $e_{i,t_0+1}$) and the loss ``correlation``
(:func:`regression_head`, :func:`train`: :func:`attsvm.gd.run`; its 50-digit replay is
:func:`attsvm.highprec.replay` with the same head).

**The max-margin separator** (:func:`attention_view`): $\min\|W\|_F$ s.t. $(k_{i\alpha_i}-k_{it})^\top Wq_i\ge1$
for all $i$ and $t\ne\alpha_i$ — the Att-SVM of :mod:`attsvm.svm` on the data set whose tokens are the keys, with
the queries $q_i$ and the selection $\alpha_i$ (an exact encoding: the same constraints, term by term).

**The rate** (reconstructed, the square of an exponential tail): near vanishing loss the wrong weights are
$s_{it}\approx e^{-R/\|W^{mm}\|}$ along $W=R\,\widehat{W^{mm}}$, so $\mathcal L\approx ce^{-2R/\|W^{mm}\|}$ and GD
with a constant step gives $\|W_k\|_F=\frac{\|W^{mm}\|_F}2\log k+O(1)$.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .data import Dataset
from .errors import InputError

__all__ = ["attention_view", "build", "keys", "regression_head", "rate_constant", "train"]


def build(E: np.ndarray, t0: np.ndarray, xi: np.ndarray, sigma: float = 0.0) -> Dataset:
    r"""The GMC data set of tokens ``E`` (..., n, T, d), match indices ``t0`` (..., n) in $[0,T-2]$ and query noise
    ``xi`` (..., n, d): $q_i=e_{i,t_0}+\sigma\xi_i$, ``alpha`` $=t_0+1$ (module docstring)."""
    E = np.asarray(E, dtype=np.float64)
    t0 = np.asarray(t0, dtype=np.int64)
    T, d = E.shape[-2:]
    if T < 3:
        raise InputError(f"GMC needs T >= 3 tokens (a match and at least one other key), got T={T}")
    if np.any(t0 < 0) or np.any(t0 > T - 2):
        raise InputError(f"GMC match index t0 must lie in [0, {T - 2}]")
    q = np.take_along_axis(E, t0[..., None, None], axis=-2)[..., 0, :] + float(sigma) * np.asarray(xi, float)
    v = np.zeros(E.shape[:-3] + (d,))
    v[..., 0] = 1.0
    return Dataset(E, np.ones(E.shape[:-2]), q, v, alpha=t0 + 1)


def keys(ds: Dataset) -> np.ndarray:
    r"""The PTH keys $k_{it}=e_{i,t-1}$ of positions $t=1..T-1$, shape (..., n, T-1, d)."""
    return np.asarray(ds.X)[..., :-1, :]


def attention_view(ds: Dataset) -> Dataset:
    r"""The one-layer data set of the model and of its separator: tokens the keys $k_{it}$ (position $t$ is token
    $t-1$), queries $q_i$, labels 1, selection $\alpha_i-1$ (module docstring)."""
    return Dataset(keys(ds), np.asarray(ds.Y), np.asarray(ds.Z), np.asarray(ds.v), alpha=np.asarray(ds.alpha) - 1)


def regression_head(ds: Dataset) -> tuple[str, tuple[np.ndarray, np.ndarray]]:
    r"""The engine's square-loss head ``("regression", (V, Yt))`` of the model: values $V_{it}=e_{it}$ ($t=1..T-1$)
    and targets $y_i=e_{i,\alpha_i}$ (the copied token)."""
    X = np.asarray(ds.X)
    V = X[..., 1:, :]
    Yt = np.take_along_axis(X, np.asarray(ds.alpha)[..., None, None], axis=-2)[..., 0, :]
    return ("regression", (V, Yt))


def rate_constant(wmm_norm: float) -> float:
    r"""The predicted slope $\mathrm d\|W_k\|_F/\mathrm d\log k=\|W^{mm}\|_F/2$ (reconstructed, module docstring)."""
    return 0.5 * float(wmm_norm)


def train(ds: Dataset, lr: float, steps: int, record_every: int | None = None, **options: Any):
    r"""GD $W_{k+1}=W_k-\eta\nabla\mathcal L(W_k)$ from $W_0=0$ on the GMC square loss: :func:`attsvm.gd.run` on
    :func:`attention_view` with :func:`regression_head` and the loss ``correlation`` (a :class:`attsvm.gd.GDResult`;
    ``options`` go to the engine, e.g. ``record_params``)."""
    from . import gd

    return gd.run(attention_view(ds), param="W", algo="gd", loss="correlation", head=regression_head(ds), lr=lr,
                  steps=steps, init="zero", record_every=record_every, **options)  # fmt: skip
