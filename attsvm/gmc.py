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

Gradient (:func:`gradient`): with $r_i=\hat y_i-e_{i\alpha_i}=\sum_ts_{it}(e_{it}-e_{i\alpha_i})$,
$\partial\mathcal L_i/\partial a_{it}=2s_{it}\,r_i^\top(e_{it}-\hat y_i)$ and
$\nabla\mathcal L=\frac1n\sum_{i,t}\frac{\partial\mathcal L_i}{\partial a_{it}}\,k_{it}q_i^\top$ (differences in
the pairwise form, no cancellation near saturation).

**The max-margin separator** (:func:`attention_view`): $\min\|W\|_F$ s.t. $(k_{i\alpha_i}-k_{it})^\top Wq_i\ge1$
for all $i$ and $t\ne\alpha_i$ — the Att-SVM of :mod:`attsvm.svm` on the data set whose tokens are the keys, with
the queries $q_i$ and the selection $\alpha_i$ (an exact encoding: the same constraints, term by term).

**The rate** (reconstructed, the square of an exponential tail): near vanishing loss the wrong weights are
$s_{it}\approx e^{-R/\|W^{mm}\|}$ along $W=R\,\widehat{W^{mm}}$, so $\mathcal L\approx ce^{-2R/\|W^{mm}\|}$ and GD
with a constant step gives $\|W_k\|_F=\frac{\|W^{mm}\|_F}2\log k+O(1)$.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .data import Dataset
from .errors import InputError
from .model import log_softmax

__all__ = ["GMCRun", "attention_view", "build", "gradient", "keys", "loss", "rate_constant", "train"]


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
    r"""The Att-SVM data of the separator: tokens the keys $k_{it}$ (position $t$ is token $t-1$), queries $q_i$,
    selection $\alpha_i-1$ (module docstring)."""
    return Dataset(keys(ds), np.asarray(ds.Y), np.asarray(ds.Z), np.asarray(ds.v), alpha=np.asarray(ds.alpha) - 1)


def _parts(ds: Dataset, W: np.ndarray):
    K = keys(ds)
    V = np.asarray(ds.X)[..., 1:, :]  # values e_it, t = 1..T-1
    a = np.einsum("...ntd,...de,...ne->...nt", K, W, np.asarray(ds.Z))
    log_s = log_softmax(a)
    s = np.exp(log_s)
    sel = np.asarray(ds.alpha) - 1
    target = np.take_along_axis(V, sel[..., None, None], axis=-2)[..., 0, :]
    r = np.einsum("...nt,...ntd->...nd", s, V - target[..., None, :])  # r_i = sum_t s_t (e_t - e_alpha)
    return K, V, s, log_s, r


def loss(ds: Dataset, W: np.ndarray) -> np.ndarray:
    r"""$\mathcal L(W)=\frac1n\sum_i\|\hat y_i-e_{i\alpha_i}\|^2$ (module docstring), shape (...)."""
    r = _parts(ds, np.asarray(W, dtype=np.float64))[4]
    return np.mean(np.sum(r * r, -1), -1)


def gradient(ds: Dataset, W: np.ndarray) -> np.ndarray:
    r"""$\nabla\mathcal L(W)=\frac1n\sum_{i,t}2s_{it}r_i^\top(e_{it}-\hat y_i)\,k_{it}q_i^\top$, with
    $e_{it}-\hat y_i=\sum_\sigma s_{i\sigma}(e_{it}-e_{i\sigma})$ (module docstring)."""
    K, V, s, _, r = _parts(ds, np.asarray(W, dtype=np.float64))
    rv = np.einsum("...nd,...ntd->...nt", r, V)  # r^T e_t
    dev = rv - np.einsum("...nt,...nt->...n", s, rv)[..., None]  # r^T (e_t - y_hat), pairwise sum in exact form
    w = 2.0 * s * dev / s.shape[-2]
    return np.einsum("...nt,...ntd,...ne->...de", w, K, np.asarray(ds.Z))


def rate_constant(wmm_norm: float) -> float:
    r"""The predicted slope $\mathrm d\|W_k\|_F/\mathrm d\log k=\|W^{mm}\|_F/2$ (reconstructed, module docstring)."""
    return 0.5 * float(wmm_norm)


@dataclass(frozen=True)
class GMCRun:
    """A GD run of the GMC model: recorded ``steps`` (k), ``W`` (len, ..., d, d), ``loss`` (len, ...)."""

    steps: np.ndarray
    W: np.ndarray
    loss: np.ndarray


def train(ds: Dataset, lr: float, steps: int, record: Any = ()) -> GMCRun:
    r"""GD $W_{k+1}=W_k-\eta\nabla\mathcal L(W_k)$ from $W_0=0$ on the GMC square loss (the engine
    :func:`attsvm.gd.run` has no square loss with vector targets and separate keys and values, so this model keeps
    its own stepper), recording the steps in ``record`` (and the last)."""
    if not (isinstance(steps, int) and steps >= 1) or not lr > 0:
        raise InputError(f"GMC training needs steps >= 1 and lr > 0, got steps={steps!r}, lr={lr!r}")
    d = ds.d
    W = np.zeros(np.asarray(ds.X).shape[:-3] + (d, d))
    marks = sorted({int(k) for k in record if 0 <= int(k) <= steps} | {steps})
    out_k, out_W, out_L = [], [], []
    for k in range(steps + 1):
        if marks and k == marks[0]:
            marks.pop(0)
            out_k.append(k)
            out_W.append(W.copy())
            out_L.append(loss(ds, W))
        if k < steps:
            W = W - lr * gradient(ds, W)
    return GMCRun(np.array(out_k), np.array(out_W), np.array(out_L))
