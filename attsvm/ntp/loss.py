r"""The next-token-prediction (NTP) log-loss of one attention layer in numpy, float64 (THEORY §7, stable forms of §5).

Sequence $i$ has tokens $x_{it}\in\mathbb R^d$ ($t\in[T]$), query $z_i$, a set $V_i\subseteq[T]$ of *visible*
tokens (all of them unless ``visible`` is given) and a *label set* $m_i\subseteq V_i$ (``label_mask``: the
occurrences of the label). With logits $a_{it}=x_{it}^\top Wz_i$, softmax $s_i=\mathbb S(a_i)$ over $V_i$ and the
label softmax $s^m_i=\mathbb S(a_i)$ over $m_i$ (zero outside $m_i$),

.. math::
    \mathcal L(W)=\frac1n\sum_i\Big[\operatorname{LSE}_{t\in V_i}a_{it}-\operatorname{LSE}_{t\in m_i}a_{it}\Big]
    =-\frac1n\sum_i\log\sum_{t\in m_i}s_{it},

.. math::
    \nabla\mathcal L(W)=\frac1n\sum_i\sum_t(s_{it}-s^m_{it})\,x_{it}z_i^\top
    =\frac1n\sum_i\sum_{t\in V_i\setminus m_i}s_{it}\,(x_{it}-\bar x^m_i)z_i^\top,\qquad
    \bar x^m_i=\sum_{t\in m_i}s^m_{it}x_{it},

.. math::
    \nabla^2\mathcal L(W)=\frac1n\sum_iF_i^\top\big[\mathrm{Cov}_{s_i}-\mathrm{Cov}_{s^m_i}\big]F_i,\qquad
    \mathrm{Cov}_s=\mathrm{diag}(s)-ss^\top,

where row $t$ of $F_i\in\mathbb R^{T\times d^2}$ is $\mathrm{vec}(x_{it}z_i^\top)$ (row-major ``vec``: entry
$(a,b)$ of $W$ is coordinate $a\,d+b$, i.e. ``W.reshape(-1)``). The right-hand gradient form follows from
$\sum_ts_{it}=1$ and $\sum_{t\in m}s_t(x_t-\bar x^m)=0$; it has no cancellation when
$q_i=\sum_{t\in V_i\setminus m_i}s_{it}$ is tiny (the loss $\approx q_i$ is then far below one).

Stable forms used (THEORY §5):

- loss: $\operatorname{LSE}_V-\operatorname{LSE}_m=\mathrm{logaddexp}\big(0,\ \operatorname{LSE}_{V\setminus m}a-
  \operatorname{LSE}_ma\big)$, which keeps its relative precision when the loss is $10^{-300}$;
- logit Hessian (law of total variance over the partition $m$, $c=V\setminus m$, $s=(1-q)s^m+qs^c$):

  .. math::
      \mathrm{Cov}_s-\mathrm{Cov}_{s^m}=q\Big[\mathrm{Cov}_{s^c}-\mathrm{Cov}_{s^m}+(1-q)(s^m-s^c)(s^m-s^c)^\top\Big],

  with $q$ and $1-q=\sum_{t\in m}s_t$ both summed from positive terms, so the factor $q$ is never formed as a
  difference of nearly equal numbers.

Convexity (claim ``ntp-logloss-convex``). For $u=F_i\,\mathrm{vec}(U)$, $u^\top\mathrm{Cov}_su=\mathrm{Var}_s(u)$.
If the label occurrences share one embedding ($x_{it}=x_{it'}$ for $t,t'\in m_i$, always so for NTP data where the
label is a vocabulary item), $u$ is constant on $m_i$, $\mathrm{Var}_{s^m}(u)=0$ and the Hessian is PSD: the loss is
convex. With distinct embeddings in the label set it need not be: logits $(t,-t,0)$ with the first two in the label
set give $f(t)=\log(1+1/(2\cosh t))$, $f''(0)=-1/3$.

Smoothness: :func:`smoothness_constant` bounds $\|\nabla^2\mathcal L(W)\|_2$ uniformly in $W$ (proof there).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = [
    "logits",
    "loss",
    "gradient",
    "hessian",
    "logit_hessian",
    "label_embeddings_shared",
    "lse",
    "smoothness_constant",
]


def _masks(label_mask: np.ndarray, visible: np.ndarray | None, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(m, c)``: the label set and the visible non-label tokens, both (n, T) bool."""
    m = np.asarray(label_mask)
    if m.dtype != np.bool_ or m.shape != shape:
        raise InputError(f"label_mask must be a bool array of shape {shape}, got {m.dtype} {m.shape}")
    if visible is None:
        vis = np.ones(shape, dtype=bool)
    else:
        vis = np.asarray(visible)
        if vis.dtype != np.bool_ or vis.shape != shape:
            raise InputError(f"visible must be a bool array of shape {shape}, got {vis.dtype} {vis.shape}")
    if not np.all(np.any(m, axis=-1)):
        raise InputError("label_mask: every sequence needs at least one label token")
    if np.any(m & ~vis):
        raise InputError("label_mask: a label token is not visible")
    return m, vis & ~m


def lse(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    r"""$\operatorname{LSE}_{t:\text{mask}}a_t$ along the last axis ($-\infty$ for an empty mask)."""
    am = np.where(mask, a, -np.inf)
    mx = np.max(am, axis=-1)
    sh = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return sh + np.log(np.sum(np.where(mask, np.exp(am - sh[..., None]), 0.0), axis=-1))


def _probs(a: np.ndarray, m: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""$(s, s^m, s^c)$: softmax over $V=m\cup c$, over $m$ and over $c$ (zeros outside; $s^c=0$ if $c=\emptyset$)."""
    vis = m | c
    s = np.where(vis, np.exp(np.where(vis, a, -np.inf) - lse(a, vis)[..., None]), 0.0)
    sm = np.where(m, np.exp(np.where(m, a, -np.inf) - lse(a, m)[..., None]), 0.0)
    lc = lse(a, c)
    fin = np.isfinite(lc)
    sc = np.where(c, np.exp(np.where(c, a, -np.inf) - np.where(fin, lc, 0.0)[..., None]), 0.0)
    return s, sm, sc


def _check(X: np.ndarray, Z: np.ndarray, W: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    if X.ndim != 3 or Z.shape != (X.shape[0], X.shape[2]):
        raise InputError(f"expected X (n,T,d) and Z (n,d), got {X.shape} and {Z.shape}")
    if W is not None and np.shape(W) != (X.shape[2], X.shape[2]):
        raise InputError(f"W must be ({X.shape[2]},{X.shape[2]}), got {np.shape(W)}")
    return X, Z


def logits(X: np.ndarray, Z: np.ndarray, W: np.ndarray) -> np.ndarray:
    r"""$a_{it}=x_{it}^\top Wz_i$, shape (n, T)."""
    X, Z = _check(X, Z, W)
    return np.einsum("ntd,de,ne->nt", X, np.asarray(W, dtype=np.float64), Z)


def loss(
    X: np.ndarray, Z: np.ndarray, label_mask: np.ndarray, W: np.ndarray, visible: np.ndarray | None = None
) -> float:
    r"""$\mathcal L(W)=\frac1n\sum_i[\operatorname{LSE}_{t\in V_i}a_{it}-\operatorname{LSE}_{t\in m_i}a_{it}]$, as
    $\frac1n\sum_i\mathrm{logaddexp}(0,\operatorname{LSE}_{V_i\setminus m_i}a_i-\operatorname{LSE}_{m_i}a_i)$."""
    a = logits(X, Z, W)
    m, c = _masks(label_mask, visible, a.shape)
    return float(np.mean(np.logaddexp(0.0, lse(a, c) - lse(a, m))))


def gradient(
    X: np.ndarray, Z: np.ndarray, label_mask: np.ndarray, W: np.ndarray, visible: np.ndarray | None = None
) -> np.ndarray:
    r"""$\nabla\mathcal L(W)=\frac1n\sum_i\sum_{t\in V_i\setminus m_i}s_{it}(x_{it}-\bar x^m_i)z_i^\top$, (d, d)."""
    X, Z = _check(X, Z, W)
    a = logits(X, Z, W)
    m, c = _masks(label_mask, visible, a.shape)
    s, sm, _ = _probs(a, m, c)
    xbar = np.einsum("nt,ntd->nd", sm, X)
    r = np.einsum("nt,ntd->nd", np.where(c, s, 0.0), X - xbar[:, None, :])
    return np.einsum("nd,ne->de", r, Z) / X.shape[0]


def logit_hessian(a: np.ndarray, label_mask: np.ndarray, visible: np.ndarray | None = None) -> np.ndarray:
    r"""Per-sequence Hessian of $\operatorname{LSE}_{V}a-\operatorname{LSE}_ma$ in the logits, (n, T, T):
    $\mathrm{Cov}_s-\mathrm{Cov}_{s^m}=q[\mathrm{Cov}_{s^c}-\mathrm{Cov}_{s^m}+(1-q)(s^m-s^c)(s^m-s^c)^\top]$,
    $q=\sum_{t\in V\setminus m}s_t$ (rows and columns of invisible tokens are zero)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise InputError(f"logits must be (n,T), got {a.shape}")
    m, c = _masks(label_mask, visible, a.shape)
    s, sm, sc = _probs(a, m, c)
    q = np.sum(np.where(c, s, 0.0), axis=-1)
    p = np.sum(np.where(m, s, 0.0), axis=-1)

    def cov(w: np.ndarray) -> np.ndarray:
        return np.einsum("nt,tu->ntu", w, np.eye(a.shape[1])) - w[:, :, None] * w[:, None, :]

    dv = sm - sc
    inner = cov(sc) - cov(sm) + p[:, None, None] * dv[:, :, None] * dv[:, None, :]
    return q[:, None, None] * inner


def hessian(
    X: np.ndarray, Z: np.ndarray, label_mask: np.ndarray, W: np.ndarray, visible: np.ndarray | None = None
) -> np.ndarray:
    r"""$\nabla^2\mathcal L(W)=\frac1n\sum_iF_i^\top[\mathrm{Cov}_{s_i}-\mathrm{Cov}_{s^m_i}]F_i$, (d², d²), rows of
    $F_i$ the row-major $\mathrm{vec}(x_{it}z_i^\top)$ (so ``H @ U.reshape(-1)`` is the directional derivative
    of the gradient along $U$, reshaped)."""
    X, Z = _check(X, Z, W)
    Ha = logit_hessian(logits(X, Z, W), label_mask, visible)
    n, T, d = X.shape
    F = np.einsum("nta,nb->ntab", X, Z).reshape(n, T, d * d)
    return np.sum(np.swapaxes(F, 1, 2) @ Ha @ F, axis=0) / n


def label_embeddings_shared(X: np.ndarray, label_mask: np.ndarray) -> bool:
    r"""True when in every sequence all label occurrences have one embedding ($x_{it}=x_{it'}$ exactly for
    $t,t'\in m_i$): then the loss is convex (and its label term is linear)."""
    X = np.asarray(X, dtype=np.float64)
    m = np.asarray(label_mask, dtype=bool)
    first = np.argmax(m, axis=-1)
    ref = X[np.arange(X.shape[0]), first]
    return bool(np.all(np.where(m[..., None], X == ref[:, None, :], True)))


def smoothness_constant(X: np.ndarray, Z: np.ndarray, visible: np.ndarray | None = None) -> np.ndarray:
    r"""$L=\frac1{2n}\sum_i\|X_i^{vis}\|_2^2\|z_i\|^2\ge\|\nabla^2\mathcal L(W)\|_2$ for every $W$ (batched over
    leading axes). *Proof.* With $a_i=F_iw$, $\|F_i\|_2=\|X_i^{vis}\|_2\|z_i\|$ (a Kronecker product; invisible rows
    carry no logit), the Hessian is $\frac1n\sum_iF_i^\top[\mathrm{Cov}_{s_i}-\mathrm{Cov}_{s^m_i}]F_i$ with both
    covariances $0\preceq\mathrm{Cov}_s=\mathrm{diag}(s)-ss^\top\preceq\frac12I$ (Gershgorin: row $t$ has
    $C_{tt}=s_t(1-s_t)$ and $\sum_{\tau\ne t}|C_{t\tau}|=s_t(1-s_t)$, so
    $\lambda_{\max}\le2\max_ts_t(1-s_t)\le\frac12$), so
    $-\frac12\|F_i\|^2I\preceq F_i^\top[\cdot]F_i\preceq\frac12\|F_i\|^2I$."""
    X = np.asarray(X, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    if visible is not None:
        X = np.where(np.asarray(visible, dtype=bool)[..., None], X, 0.0)
    sx = np.linalg.norm(X, 2, axis=(-2, -1))
    return 0.5 * np.mean(sx**2 * np.sum(Z * Z, axis=-1), axis=-1)
