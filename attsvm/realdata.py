r"""Attention trained on a real data set: the pieces the real-data experiments share (``numerics/digits.py``,
``numerics/text.py``, ``numerics/faces.py``).

* :func:`splits` — seeded train/test splits, one per run;
* :func:`fit_token_head` — the frozen linear head, fit *first*: L2 logistic regression ($C=1$, no intercept) of the
  input's label on each of its visible tokens, $\min_v\frac12\|v\|^2+\sum_{i,t:m_{it}}\log(1+e^{-Y_iv^\top
  x_{it}})$, so $\gamma_{it}=Y_iv^\top x_{it}$ is the token's log-odds vote for the true class;
* :func:`log_attention` — $\log s_{it}$ and $\log_{10}(1-\max_ts_{it})$ in the log domain (no cancellation when
  $s$ saturates), padding masked;
* :func:`accuracy` — the fraction of inputs with $Y_if(X_i)>0$, $f(X_i)=v^\top\sum_ts_{it}x_{it}$.
"""

from __future__ import annotations

import numpy as np


def splits(n: int, frac: float, seeds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded train/test splits of ``n`` inputs (seed ``b`` for run ``b``: ``default_rng(b).permutation(n)``),
    ``round(frac * n)`` for training, each part sorted."""
    ntr = int(round(frac * n))
    out = []
    for b in range(seeds):
        perm = np.random.default_rng(b).permutation(n)
        out.append((np.sort(perm[:ntr]), np.sort(perm[ntr:])))
    return out


def fit_token_head(X: np.ndarray, Y: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    r"""The head $v$: L2 logistic regression ($C=1$, no intercept) of the label on each visible token,
    $\min_v\frac12\|v\|^2+\sum_{i,t:m_{it}}\log(1+e^{-Y_iv^\top x_{it}})$ (scikit-learn, lbfgs, tol $10^{-10}$)."""
    from sklearn.linear_model import LogisticRegression

    n, T, d = X.shape
    lr = LogisticRegression(C=1.0, fit_intercept=False, max_iter=10000, tol=1e-10)
    if mask is None:
        lr.fit(X.reshape(n * T, d), np.repeat(Y, T))
    else:
        m = np.asarray(mask, dtype=bool)
        lr.fit(X[m], np.repeat(Y, m.sum(axis=1)))
    return np.asarray(lr.coef_[0], dtype=np.float64)


def log_attention(a: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""For logits ``a`` (..., n, T): $\log s_{it}=a_{it}-\log\sum_\tau e^{a_{i\tau}}$ over visible $\tau$ ($-\infty$
    on padding) and $\log_{10}(1-\max_ts_{it})=(\log\sum_{t\ne\alpha_i}e^{a_{it}}-\log\sum_te^{a_{it}})/\ln10$,
    $\alpha_i=\arg\max_ts_{it}$, computed without cancellation ($-\infty$ with one visible token)."""
    from scipy.special import logsumexp

    if mask is not None:
        a = np.where(mask, a, -np.inf)
    lz = logsumexp(a, axis=-1, keepdims=True)
    logs = a - lz
    top = np.argmax(a, axis=-1)
    rest = np.where(np.arange(a.shape[-1]) == top[..., None], -np.inf, a)
    with np.errstate(divide="ignore"):
        lo = (logsumexp(rest, axis=-1) - lz[..., 0]) / np.log(10.0)
    return logs, lo


def accuracy(logs: np.ndarray, X: np.ndarray, Y: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""Fraction of inputs with $Y_if(X_i)>0$, $f(X_i)=v^\top\sum_t s_{it}x_{it}$, from $\log s$ (..., n, T) (padding
    $-\infty$: weight 0); ``X`` (..., n, T, d), ``Y`` (..., n), ``v`` (..., d); leading axes kept."""
    f = np.einsum("...nt,...ntd,...d->...n", np.exp(logs), X, v)
    return np.mean(Y * f > 0, axis=-1)
