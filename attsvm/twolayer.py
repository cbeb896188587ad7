r"""The two-layer attention model ("hierarchy of SVMs", issue 30) in numpy float64: the reference forward pass,
closed-form gradients, selections, hard outputs and the one-layer data set of the top layer.

Notation (THEORY §10.1, docs/gd.md "twolayer"). Data: the flat view of an attsvm
:class:`~attsvm.data.Dataset` — tokens $x_{it}$ ``X`` (..., N, T, d), labels $Y_i$, layer-2 queries $z_i$, head
$v$, visibility ``mask`` (..., N, T) or None. Parameters $W_1,W_2\in\mathbb R^{d\times d}$.

* Layer 1 (self-attention, every position $t$ a query): $A^1_{i,t\tau}=x_{i\tau}^\top W_1x_{it}$ over the visible
  keys $\tau$ (and $\tau\le t$ with ``causal``), $s^1_{i,t\cdot}=\mathbb S(A^1_{i,t\cdot})$ (log domain);
  $\bar h_{it}=\sum_\tau s^1_{i,t\tau}x_{i\tau}$, $h_{it}=\bar h_{it}+\rho x_{it}$, $\rho=1$ with ``residual``
  else 0. A row with no visible key (only an invisible $t$ of causal data) has $s^1_{i,t\cdot}=0$, $\bar h_{it}=0$.
* Layer 2: $a^2_{it}=h_{it}^\top W_2z_i$ over the visible $t$, $s^2_i=\mathbb S(a^2_i)$.
* Head: $f_i=v^\top\sum_ts^2_{it}h_{it}$, $u_i=Y_if_i=\sum_ts^2_{it}g_{it}$ with $g_{it}=Y_iv^\top h_{it}$;
  $\mathcal L=\frac1N\sum_i\ell(u_i)$.

Gradients (:func:`gradients`): $r_{it}=s^2_{it}(g_{it}-u_i)$, $\hat c_{it}=Y_iv+(g_{it}-u_i)W_2z_i$,
$c_{it}=s^2_{it}\hat c_{it}$, $q_{i,t\tau}=s^1_{i,t\tau}(c_{it}^\top x_{i\tau}-c_{it}^\top\bar h_{it})$,

.. math:: \nabla_{W_2}\mathcal L=\frac1N\sum_i\ell'(u_i)\sum_tr_{it}h_{it}z_i^\top,\qquad
          \nabla_{W_1}\mathcal L=\frac1N\sum_i\ell'(u_i)\sum_{t,\tau}q_{i,t\tau}x_{i\tau}x_{it}^\top,

with the differences $g_{it}-u_i=\sum_\sigma s^2_{i\sigma}(g_{it}-g_{i\sigma})$ and
$c^\top x_\tau-c^\top\bar h=\sum_\sigma s^1_\sigma(c^\top x_\tau-c^\top x_\sigma)$ in the pairwise form of THEORY
§5 (no cancellation near saturation). Selections: $\beta_i=\arg\max_ts^2_{it}$, $\alpha_{it}=\arg\max_\tau
s^1_{i,t\tau}$; hard outputs $H^\alpha_{it}=x_{i\alpha_{it}}+\rho x_{it}$ (:func:`hard_outputs`). With $W_1$ frozen
the model is the one-layer model of THEORY §1 on the tokens $h_{it}$ (:func:`top_layer_dataset`), so the certified
Att-SVM solvers of :mod:`attsvm.svm` apply to the top layer. Everything broadcasts over leading batch axes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .data import Dataset
from .errors import InputError
from .model import LOSSES, log_softmax, loss_derivative, loss_value

__all__ = [
    "Forward",
    "forward",
    "gradients",
    "hard_outputs",
    "key_mask",
    "loss",
    "selections",
    "top_layer_dataset",
]


@dataclass(frozen=True)
class Forward:
    r"""The forward pass at $(W_1,W_2)$ (module docstring): ``log_s1`` (..., N, T, T) $\log s^1_{i,t\tau}$ (row
    $t$ the query), ``h_bar`` and ``h`` (..., N, T, d), ``a2`` and ``log_s2`` (..., N, T), ``g`` (..., N, T)
    $g_{it}=Y_iv^\top h_{it}$, ``u`` (..., N); ``rho`` the residual weight $\rho$."""

    log_s1: np.ndarray
    h_bar: np.ndarray
    h: np.ndarray
    a2: np.ndarray
    log_s2: np.ndarray
    g: np.ndarray
    u: np.ndarray
    rho: float


def _data(ds: Any):
    if not isinstance(ds, Dataset):
        raise InputError(f"two-layer attention needs an attsvm Dataset, got {type(ds).__name__}")
    return ds.flat()


def _matrix(name: str, W: Any, d: int, lead: tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(W, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} is not numeric") from exc
    if a.shape not in ((d, d), (*lead, d, d)):
        raise InputError(f"{name} must have shape {(d, d)} or {(*lead, d, d)}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} contains NaN or inf")
    return a


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise InputError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def key_mask(mask: np.ndarray | None, T: int, causal: bool) -> np.ndarray | None:
    r"""The layer-1 keys (..., N, T, T) bool: $\tau$ visible (``mask`` (..., N, T)) and, with ``causal``,
    $\tau\le t$ (row $t$, column $\tau$); ``None`` when every key is visible."""
    tri = np.tril(np.ones((T, T), dtype=bool)) if causal else None
    if mask is None:
        return tri
    keys = np.asarray(mask, dtype=bool)[..., None, :]
    return keys & tri if tri is not None else np.broadcast_to(keys, (*keys.shape[:-2], T, T))


def _log_softmax_rows(a: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """:func:`attsvm.model.log_softmax`, a row without any visible entry all $-\\infty$ (not NaN)."""
    if mask is None:
        return log_softmax(a)
    empty = ~np.any(mask, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        out = log_softmax(np.where(empty, 0.0, a), mask | empty)
    return np.where(empty | ~mask, -np.inf, out)


def forward(ds: Dataset, W1: Any, W2: Any, residual: bool = False, causal: bool = False) -> Forward:
    r"""The two-layer forward pass (module docstring): $s^1$ by the log-domain softmax of
    :func:`attsvm.model.log_softmax` over the keys of :func:`key_mask`, $h=\bar h+\rho x$, $s^2=\mathbb S(a^2)$
    over the visible $t$, $u_i=\sum_ts^2_{it}g_{it}$. ``W1``, ``W2`` (d,d) or with the data set's batch axis;
    :class:`~attsvm.errors.InputError` for bad input."""
    f = _data(ds)
    X, Y, Z, v = f.X, f.Y, f.Z, f.v
    d, T = X.shape[-1], X.shape[-2]
    lead = X.shape[:-3]
    W1 = _matrix("W1", W1, d, lead)
    W2 = _matrix("W2", W2, d, lead)
    rho = 1.0 if _flag("residual", residual) else 0.0
    keys = key_mask(f.mask, T, _flag("causal", causal))
    A1 = np.einsum("...nud,...de,...nte->...ntu", X, W1, X)  # A1[t, tau] = x_tau^T W1 x_t
    log_s1 = _log_softmax_rows(A1, keys)
    h_bar = np.einsum("...ntu,...nud->...ntd", np.exp(log_s1), X)
    h = h_bar + rho * X
    a2 = np.einsum("...ntd,...de,...ne->...nt", h, W2, Z)
    log_s2 = log_softmax(a2, f.mask)
    g = Y[..., None] * np.einsum("...ntd,...d->...nt", h, v)
    u = np.sum(np.exp(log_s2) * g, axis=-1)
    return Forward(log_s1, h_bar, h, a2, log_s2, g, u, rho)


def _loss_name(name: str) -> str:
    if name not in LOSSES:
        raise InputError(f"loss must be one of {LOSSES}, got {name!r}")
    return name


def loss(ds: Dataset, W1: Any, W2: Any, loss: str = "logistic", residual: bool = False, causal: bool = False):
    r"""$\mathcal L(W_1,W_2)=\frac1N\sum_i\ell(u_i)$ (one value per data set of a batch)."""
    fw = forward(ds, W1, W2, residual, causal)
    return np.mean(loss_value(fw.u, _loss_name(loss)), axis=-1)


def gradients(
    ds: Dataset, W1: Any, W2: Any, loss: str = "logistic", residual: bool = False, causal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    r"""$(\nabla_{W_1}\mathcal L,\ \nabla_{W_2}\mathcal L)$ in closed form (module docstring), the differences
    $g_t-u$ and $c^\top x_\tau-c^\top\bar h$ pairwise."""
    f = ds.flat() if isinstance(ds, Dataset) else _data(ds)
    fw = forward(ds, W1, W2, residual, causal)
    X, Y, Z, v = f.X, f.Y, f.Z, f.v
    W2 = np.asarray(W2, dtype=np.float64)
    s1, s2 = np.exp(fw.log_s1), np.exp(fw.log_s2)
    dg = np.einsum("...ntu,...nu->...nt", fw.g[..., :, None] - fw.g[..., None, :], s2)  # g_t - u
    r = s2 * dg
    W2z = np.einsum("...de,...ne->...nd", W2, Z)
    chat = Y[..., None, None] * v[..., None, None, :] + dg[..., None] * W2z[..., None, :]  # (..., N, T, d)
    c = s2[..., None] * chat
    cx = np.einsum("...ntd,...nud->...ntu", c, X)  # c_t^T x_tau
    q = s1 * np.einsum("...ntuw,...ntw->...ntu", cx[..., :, :, None] - cx[..., :, None, :], s1)
    lp = loss_derivative(fw.u, _loss_name(loss))
    N = X.shape[-3]
    G2 = np.einsum("...n,...nt,...ntd,...ne->...de", lp, r, fw.h, Z) / N
    G1 = np.einsum("...n,...ntu,...nud,...nte->...de", lp, q, X, X) / N
    return G1, G2


def selections(fw: Forward) -> tuple[np.ndarray, np.ndarray]:
    r"""$(\alpha,\beta)$: $\alpha_{it}=\arg\max_\tau s^1_{i,t\tau}$ (..., N, T) and $\beta_i=\arg\max_ts^2_{it}$
    (..., N) (first index on ties; the spec leaves a tied selection undefined)."""
    return np.argmax(fw.log_s1, axis=-1), np.argmax(fw.log_s2, axis=-1)


def hard_outputs(ds: Dataset, alpha: Any, residual: bool = False) -> np.ndarray:
    r"""$H^\alpha_{it}=x_{i\alpha_{it}}+\rho x_{it}$ (..., N, T, d) of a layer-1 selection ``alpha`` (..., N, T)."""
    f = _data(ds)
    X = f.X
    a = np.asarray(alpha)
    if a.shape != X.shape[:-1] or a.dtype.kind not in "iu" or np.any(a < 0) or np.any(a >= X.shape[-2]):
        raise InputError(f"alpha must be integer indices in [0,{X.shape[-2]}) of shape {X.shape[:-1]}")
    rho = 1.0 if _flag("residual", residual) else 0.0
    picked = np.take_along_axis(X, a[..., None].astype(np.int64), axis=-2)  # x_{i alpha_it}
    return picked + rho * X


def top_layer_dataset(ds: Dataset, tokens: Any, alpha: Any = None) -> Dataset:
    r"""The one-layer :class:`~attsvm.data.Dataset` of the top layer: tokens ``tokens`` (..., N, T, d) (the layer-1
    outputs $h_{it}$ of a frozen $W_1$, or the hard outputs :func:`hard_outputs`) with the data set's $Y$, $z_i$,
    $v$ (kind ``cross``, one query per row), and the selection ``alpha`` (..., N) (e.g. $\beta$) if given. Its
    one-layer model at $W_2$ is exactly layer 2 of the two-layer model (:mod:`attsvm.model`,
    :mod:`attsvm.svm`). The flat view's visibility (a padding mask, or causal visibility row by row) becomes the
    data set's ``mask``: layer 2 attends to the visible positions only."""
    f = _data(ds)
    H = np.asarray(tokens, dtype=np.float64)
    if H.shape != f.X.shape:
        raise InputError(f"tokens must have the shape of the flat tokens {f.X.shape}, got {H.shape}")
    mask = None if f.mask is None else np.array(np.broadcast_to(f.mask, H.shape[:-1]), dtype=bool)
    return Dataset(H, f.Y, f.Z, f.v, None if alpha is None else np.asarray(alpha), "cross", mask=mask)
