r"""Standard rows of a page's notation table (:meth:`attsvm.symbolic.derivation.Derivation.define`).

Each function returns one row ``(statement, prose)``: the symbol (or a relation whose left-hand side is the
symbol, which is its definition) and what it is, in the notation of THEORY §1. A derivation adds the rows its
page uses, e.g. ``d.define(*glossary.loss())``, so that every symbol of the page is defined on the page
(:mod:`attsvm.symbolic.lint`).
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from .notation import index, indexed, matrix_symbol, symbol
from .printer import Chain, Cov, Ell, EllP, EllPP, Softmax, Times, Var, in_order

Row = tuple[Any, Any]


def _t_tau() -> tuple[sp.Symbol, sp.Symbol, sp.Symbol]:
    return index("t"), index("tau"), symbol("T")


def loss(second: bool = False) -> Row:
    r"""$\ell(u)$, $\ell'(u)$ (and $\ell''(u)$ when ``second``): the loss of Assumption A and its derivatives."""
    u = symbol("u")
    fs = (Ell(u), EllP(u)) + ((EllPP(u),) if second else ())
    what = "first and second derivatives" if second else "derivative"
    return fs, (
        "the loss of Assumption A, a differentiable function of the signed output ",
        u,
        ", and its " + what + ".",
    )


def empirical_loss() -> Row:
    r"""$\mathcal L = \frac1n\sum_i\ell(u_i)$ and $u_i$, the signed output of input $i$."""
    from .printer import Mean

    i, n = index("i"), symbol("n")
    ui = symbol("u", "i")
    return (symbol("L"), ui), (
        "the empirical loss ",
        Chain(symbol("L"), "=", Mean(Ell(ui), i, n)),
        " and the signed output of input ",
        i,
        " (THEORY section 1).",
    )


def softmax() -> Row:
    r"""$\mathbb S(a)$: the softmax, $\mathbb S(a)_t = e^{a_t}/\sum_u e^{a_u}$."""
    t, _, T = _t_tau()
    u = index("u")
    a = indexed("a")
    av = matrix_symbol("a", "T", 1)
    return Softmax(av), (
        "the softmax of a vector of logits, the vector of probabilities ",
        sp.exp(a[t]) / sp.Sum(sp.exp(a[u]), (u, 1, T)),
        ".",
    )


def kronecker() -> Row:
    r"""$\delta_{t\tau}$: the Kronecker symbol."""
    t, tau, _ = _t_tau()
    return sp.KroneckerDelta(t, tau), ("the Kronecker symbol: 1 when ", Chain(t, "=", tau), ", else 0.")


def ones() -> Row:
    r"""$\mathbf 1$: the all-ones vector."""
    return matrix_symbol("ones", "T", 1), "the all-ones vector."


def covariance(s: Any = None, g: Any = None, h: Any = None) -> Row:
    r"""$\mathrm{Cov}_s(g,h)=\sum_ts_t(g_t-\bar g)(h_t-\bar h)$ with $\bar g = s^\top g$: the covariance of $g$
    and $h$ under the probabilities $s$."""
    t, _, T = _t_tau()
    sv = s if s is not None else matrix_symbol("s", "T", 1)
    gv = g if g is not None else matrix_symbol("g", "T", 1)
    hv = h if h is not None else matrix_symbol("h", "T", 1)
    sx, gx, hx = indexed("s"), indexed("g"), indexed("h")
    mean_g = sp.Sum(Times(sx[t], gx[t]), (t, 1, T))
    body = sp.Sum(
        Times(sx[t], in_order(gx[t], -mean_g), in_order(hx[t], -sp.Sum(Times(sx[t], hx[t]), (t, 1, T)))), (t, 1, T)
    )
    return Chain(Cov(sv, gv, hv), "=", body), (
        "the covariance of two vectors of values under the probabilities ",
        sv,
        ".",
    )


def variance(s: Any = None, g: Any = None) -> Row:
    r"""$\mathrm{Var}_s(g)=\sum_ts_t(g_t-\bar g)^2$ with $\bar g = s^\top g$: the variance of $g$ under $s$."""
    t, _, T = _t_tau()
    sv = s if s is not None else matrix_symbol("s", "T", 1)
    gv = g if g is not None else matrix_symbol("g", "T", 1)
    sx, gx = indexed("s"), indexed("g")
    body = sp.Sum(Times(sx[t], in_order(gx[t], -sp.Sum(Times(sx[t], gx[t]), (t, 1, T))) ** 2), (t, 1, T))
    return Chain(Var(sv, gv), "=", body), ("the variance of a vector of values under the probabilities ", sv, ".")
