r"""The attention model of THEORY §1 in ball arithmetic (python-flint ``arb``): rigorous enclosures of the quantities
of :mod:`attsvm.kit`, written from the definitions (independently of :mod:`attsvm.model` and of
:mod:`attsvm.highprec`).

The data are taken exactly (float64 values are binary numbers). With a row's visible tokens $V_i$ (all tokens
unless a causal mask hides some):

.. math::
    a_{it}=x_{it}^\top Wz_i,\quad \gamma_{it}=Y_iv^\top x_{it}\ (\text{next-token data: }1[x_{it}\text{ is the
    label}]),\quad s_{it}=\frac{e^{a_{it}-a_{it^*}}}{1+\sum_{\tau\ne t^*}e^{a_{i\tau}-a_{it^*}}},\quad
    u_i=\textstyle\sum_{t\in V_i}s_{it}\gamma_{it},

$t^*$ the visible token of largest midpoint logit (an exact identity for any $t^*$: no undecided comparison), so
$\log s_{it}=(a_{it}-a_{it^*})-\log(1+\sum_{\tau\ne t^*}e^{a_{i\tau}-a_{it^*}})$ keeps its relative precision in a
saturated row; invisible tokens have $s=0$, $\log s=-\infty$. Losses $\ell$: logistic $\log(1+e^{-u})$, exponential
$e^{-u}$, correlation $-u$, ``nll`` $-\log u$ (next-token data, evaluated as
$\log(1+e^{\mathrm{LSE}_{V\setminus m}a-\mathrm{LSE}_ma})$, $m$ the label's occurrences: no cancellation near
$u=1$); $\mathcal L(W)=\frac1n\sum_i\ell(u_i)$ and, with $c_{it}=\sum_\tau s_{i\tau}(\gamma_{it}-\gamma_{i\tau})$
($=\gamma_{it}-u_i$ without cancellation), $r_{it}=s_{it}c_{it}$ $(=\partial u_i/\partial a_{it})$:

.. math::
    \nabla\mathcal L(W)=\tfrac1n\textstyle\sum_i\ell'(u_i)\,X_i^\top r_i\,z_i^\top,\qquad
    \nabla_{(K,Q)}=(\nabla\mathcal L(KQ^\top)Q,\ \nabla\mathcal L(KQ^\top)^\top K),

.. math::
    \nabla^2\mathcal L(W)=\tfrac1n\textstyle\sum_iB_i^\top\bigl(\ell''(u_i)\,r_ir_i^\top+\ell'(u_i)\,H_i\bigr)B_i,
    \qquad (H_i)_{pq}=\delta_{pq}s_{ip}c_{ip}-s_{ip}s_{iq}(c_{ip}+c_{iq}),

$B_i$ the $T\times d^2$ matrix of rows $x_{it}\otimes z_i$ (row-major $\mathrm{vec}\,W$: $\partial a_{it}/\partial
W_{jk}=x_{itj}z_{ik}$) and $H_i$ the Hessian of $u_i$ in the logits (visible tokens only; $\ell''$: logistic
$e^u/(1+e^u)^2$, exponential $e^{-u}$, correlation 0, ``nll`` $1/u^2$) — the analytic Hessian, so its enclosure
is rigorous (the mp kit's is a central difference). $L_W=\frac1n\sum_i(M_0\|v\|^2\|z_i\|^2\|X_i\|_2^4
+3M_1\|v\|\|z_i\|^2\|X_i\|_2^3)$ with the Assumption A constants on $|u|\le\max_{it}|\gamma_{it}|$ (logistic
$(\frac14,1)$, exponential $(e^{\max|\gamma|},e^{\max|\gamma|})$, correlation $(0,1)$), $\|X_i\|_2$ enclosed by
:func:`attsvm.ball.linalg.singular_values`.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb

from .linalg import singular_values
from .numbers import arbs, lse, to_arb, vec, workprec

__all__ = [
    "LOSSES",
    "flat",
    "logits",
    "log_softmax",
    "softmax",
    "outputs",
    "loss_value",
    "loss_derivative",
    "loss_second_derivative",
    "loss",
    "grad_W",
    "grad_KQ",
    "hessian_W",
    "loss_constants",
    "smoothness",
    "margins",
]

LOSSES = ("logistic", "exponential", "correlation", "nll")
ZERO = arb(0)


def flat(raw: Any, prec: int) -> tuple:
    r"""``(X, Y, Z, v, gamma, mask)`` of a data set's flat view as balls (``mask`` a bool array or None):
    $\gamma_{it}=Y_iv^\top x_{it}$, next-token data the fixed scores."""
    if raw.batched:
        raise ValueError("the kit works on one data set (case.data)")
    f = raw.flat()
    with workprec(prec):
        X, Y, Z, v = (arbs(np.asarray(a)) for a in (f.X, f.Y, f.Z, f.v))
        if raw.kind == "ntp":
            gamma = arbs(np.asarray(raw.scores))
        else:  # exact: float64 products and sums are dyadic rationals (a rounded score would blur every c_t)
            Xf, Yf, vf = np.asarray(f.X), np.asarray(f.Y), np.asarray(f.v)
            N, T, _ = X.shape
            gamma = np.empty((N, T), dtype=object)
            for i in range(N):
                for t in range(T):
                    gamma[i, t] = to_arb(
                        Fraction(float(Yf[i]))
                        * sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(Xf[i, t], vf))
                    )
    mask = None if f.mask is None else np.asarray(f.mask, dtype=bool)
    return X, Y, Z, v, gamma, mask


def _dot(x: Any, y: Any) -> arb:
    return sum((a * b for a, b in zip(x, y)), ZERO)


def _visible(mask: np.ndarray | None, i: int, T: int) -> list[int]:
    return list(range(T)) if mask is None else [int(t) for t in np.flatnonzero(mask[i])]


def _logits(D: Any, W: np.ndarray) -> np.ndarray:
    N, T, _ = D.X.shape
    a = np.empty((N, T), dtype=object)
    for i in range(N):
        w = [_dot(row, D.Z[i]) for row in W]
        for t in range(T):
            a[i, t] = _dot(D.X[i, t], w)
    return a


def logits(D: Any, W: Any, prec: int) -> np.ndarray:
    r"""$a_{it}=x_{it}^\top Wz_i$ (N,T) (``D``: anything with ``X``, ``Z``)."""
    with workprec(prec):
        return _logits(D, arbs(W))


def _row(a: list, vis: list[int]) -> tuple[list, list]:
    """Softmax and log-softmax of one row (module docstring): ``(s, log s)``, invisible tokens 0 and -inf."""
    T = len(a)
    s, ls = [ZERO] * T, [arb.neg_inf()] * T
    if not vis:
        return s, ls
    k = max(vis, key=lambda t: a[t].mid())
    e = {t: (a[t] - a[k]).exp() for t in vis if t != k}
    R = sum(e.values(), ZERO)
    den, L = 1 + R, R.log1p()
    for t in vis:
        if t == k:
            s[t], ls[t] = 1 / den, -L
        else:
            s[t], ls[t] = e[t] / den, (a[t] - a[k]) - L
    return s, ls


def _rows(a: np.ndarray, mask: np.ndarray | None, which: int) -> np.ndarray:
    rows = a.reshape(-1, a.shape[-1])
    ms = None if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), a.shape).reshape(rows.shape)
    out = np.empty(rows.shape, dtype=object)
    for j, r in enumerate(rows):
        out[j] = _row(list(r), _visible(ms, j, rows.shape[1]))[which]
    return out.reshape(a.shape)


def log_softmax(a: Any, mask: Any, prec: int) -> np.ndarray:
    r"""$\log\mathbb S(a)_t$ along the last axis (invisible tokens $-\infty$)."""
    with workprec(prec):
        return _rows(arbs(a), mask, 1)


def softmax(a: Any, mask: Any, prec: int) -> np.ndarray:
    r"""$\mathbb S(a)_t$ along the last axis (invisible tokens 0)."""
    with workprec(prec):
        return _rows(arbs(a), mask, 0)


def _outputs(D: Any, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = _logits(D, W)
    s = _rows(a, D.mask, 0)
    N, T = a.shape
    u = vec(sum((s[i, t] * D.gamma[i, t] for t in _visible(D.mask, i, T)), ZERO) for i in range(N))
    return s, a, u


def outputs(D: Any, W: Any, prec: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""$(s,\gamma,u)$: softmax (N,T), scores (N,T), $u_i=\sum_{t\in V_i}s_{it}\gamma_{it}$ (N,)."""
    with workprec(prec):
        s, _, u = _outputs(D, arbs(W))
        return s, D.gamma, u


def _check_loss(loss: str) -> None:
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")


def loss_value(u: arb, loss: str) -> arb:
    r"""$\ell(u)$ (module docstring), at the ambient precision."""
    _check_loss(loss)
    if loss == "logistic":
        return (-u).exp().log1p()
    if loss == "exponential":
        return (-u).exp()
    if loss == "correlation":
        return -u
    return -u.log()


def loss_derivative(u: arb, loss: str) -> arb:
    r"""$\ell'(u)$: logistic $-1/(1+e^u)$, exponential $-e^{-u}$, correlation $-1$, ``nll`` $-1/u$."""
    _check_loss(loss)
    if loss == "logistic":
        return -1 / (1 + u.exp())
    if loss == "exponential":
        return -(-u).exp()
    if loss == "correlation":
        return arb(-1)
    return -1 / u


def loss_second_derivative(u: arb, loss: str) -> arb:
    r"""$\ell''(u)$: logistic $1/((1+e^u)(1+e^{-u}))$, exponential $e^{-u}$, correlation 0, ``nll`` $1/u^2$."""
    _check_loss(loss)
    if loss == "logistic":
        return 1 / ((1 + u.exp()) * (1 + (-u).exp()))
    if loss == "exponential":
        return (-u).exp()
    if loss == "correlation":
        return ZERO
    return 1 / (u * u)


def _nll_row(a: list, g: list, vis: list[int]) -> arb | None:
    r"""$-\log u$ of a next-token row as $\log(1+e^{\mathrm{LSE}_ca-\mathrm{LSE}_ma})$ (None unless every visible
    score is exactly 0 or 1)."""
    m = [t for t in vis if g[t] == 1]
    c = [t for t in vis if g[t] == 0]
    if len(m) + len(c) != len(vis):
        return None
    if not m:
        return arb.pos_inf()
    if not c:
        return ZERO
    return (lse([a[t] for t in c]) - lse([a[t] for t in m])).exp().log1p()


def loss(D: Any, W: Any, loss: str, prec: int) -> arb:
    r"""$\mathcal L(W)=\frac1n\sum_i\ell(u_i)$."""
    _check_loss(loss)
    with workprec(prec):
        s, a, u = _outputs(D, arbs(W))
        N, T = a.shape
        terms = []
        for i in range(N):
            x = _nll_row(list(a[i]), list(D.gamma[i]), _visible(D.mask, i, T)) if loss == "nll" else None
            terms.append(loss_value(u[i], loss) if x is None else x)
        return sum(terms, ZERO) / N


def _pieces(D: Any, W: np.ndarray) -> list:
    r"""Per row: visible tokens, $s$, $c$, $r$ (dicts over the visible tokens) and $u$."""
    s, a, u = _outputs(D, W)
    N, T = a.shape
    out = []
    for i in range(N):
        vis = _visible(D.mask, i, T)
        g = D.gamma[i]
        c = {t: sum((s[i, k] * (g[t] - g[k]) for k in vis if k != t), ZERO) for t in vis}  # (the t term is 0)
        r = {t: s[i, t] * c[t] for t in vis}
        out.append((vis, s[i], c, r, u[i]))
    return out


def _grad(D: Any, W: np.ndarray, loss: str) -> np.ndarray:
    N, _, d = D.X.shape
    G = np.full((d, d), ZERO, dtype=object)
    for i, (vis, _, _, r, u) in enumerate(_pieces(D, W)):
        coef = loss_derivative(u, loss) / N
        gi = [coef * sum((r[t] * D.X[i, t, j] for t in vis), ZERO) for j in range(d)]
        for j in range(d):
            for k in range(d):
                G[j, k] = G[j, k] + gi[j] * D.Z[i, k]
    return G


def grad_W(D: Any, W: Any, loss: str, prec: int) -> np.ndarray:
    r"""$\nabla\mathcal L(W)$ (d,d) (module docstring)."""
    _check_loss(loss)
    with workprec(prec):
        return _grad(D, arbs(W), loss)


def grad_KQ(D: Any, K: Any, Q: Any, loss: str, prec: int) -> tuple[np.ndarray, np.ndarray]:
    r"""$(\nabla\mathcal L(W)Q,\ \nabla\mathcal L(W)^\top K)$ at $W=KQ^\top$."""
    _check_loss(loss)
    with workprec(prec):
        K, Q = arbs(K), arbs(Q)
        G = _grad(D, K @ Q.T, loss)
        return G @ Q, G.T @ K


def _hessian(D: Any, W: np.ndarray, loss: str) -> np.ndarray:
    N, _, d = D.X.shape
    H = np.full((d * d, d * d), ZERO, dtype=object)
    for i, (vis, s, c, r, u) in enumerate(_pieces(D, W)):
        B = np.array([np.outer(D.X[i, t], D.Z[i]).ravel() for t in vis], dtype=object).reshape(len(vis), d * d)
        l1, l2 = loss_derivative(u, loss), loss_second_derivative(u, loss)
        Hu = np.empty((len(vis), len(vis)), dtype=object)
        for p, tp in enumerate(vis):
            for q, tq in enumerate(vis):
                h = -s[tp] * s[tq] * (c[tp] + c[tq])
                Hu[p, q] = l2 * r[tp] * r[tq] + l1 * (h + s[tp] * c[tp] if p == q else h)
        H = H + B.T @ Hu @ B / N
    return H


def hessian_W(D: Any, W: Any, loss: str, prec: int) -> np.ndarray:
    r"""$\nabla^2\mathcal L(W)$ ($d^2\times d^2$, row-major $\mathrm{vec}\,W$), the analytic form (module docstring)."""
    _check_loss(loss)
    with workprec(prec):
        return _hessian(D, arbs(W), loss)


def loss_constants(loss: str, u_bound: arb) -> tuple[arb, arb]:
    r"""Assumption A constants $(M_0,M_1)$ on $|u|\le$ ``u_bound`` (module docstring)."""
    if loss == "logistic":
        return arb(1) / 4, arb(1)
    if loss == "exponential":
        e = u_bound.exp()
        return e, e
    if loss == "correlation":
        return ZERO, arb(1)
    raise ValueError(f"no smoothness constant for loss {loss!r}; expected logistic, exponential or correlation")


def smoothness(D: Any, loss: str, prec: int) -> arb:
    r"""$L_W$ of THEORY §3 (module docstring; $\|X_i\|_2$ over all $T$ tokens)."""
    with workprec(prec):
        bound = functools.reduce(lambda x, y: x.max(y), (abs(g) for g in D.gamma.ravel()), ZERO)
        M0, M1 = loss_constants(loss, bound)
        nv = _dot(D.v, D.v).sqrt()
        N = D.X.shape[0]
        tot = ZERO
        for i in range(N):
            xs = singular_values(D.X[i], prec)[0]
            x2, z2 = xs * xs, _dot(D.Z[i], D.Z[i])  # products, not powers: arb's x**k of a ball holding 0 is nan
            tot = tot + M0 * nv * nv * z2 * x2 * x2 + 3 * M1 * nv * z2 * x2 * xs
        return tot / N


def margins(D: Any, W: Any, alpha: Any, prec: int) -> np.ndarray:
    r"""$(x_{i\alpha_i}-x_{it})^\top Wz_i$ (N,T), $+\infty$ (``arb.pos_inf()``, an exact ball) at $t=\alpha_i$ and at
    invisible tokens."""
    with workprec(prec):
        a = _logits(D, arbs(W))
        N, T = a.shape
        al = np.asarray(alpha, dtype=np.int64).reshape(-1)
        out = np.empty((N, T), dtype=object)
        for i in range(N):
            for t in range(T):
                hidden = D.mask is not None and not D.mask[i, t]
                out[i, t] = arb.pos_inf() if t == al[i] or hidden else a[i, al[i]] - a[i, t]
        return out
