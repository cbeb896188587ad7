r"""``softmax-decay``: along $W=RW^{mm}_\alpha/\|W^{mm}_\alpha\|_F$, with $\rho=1/\|W^{mm}_\alpha\|_F$:
$s_{it}/s_{i\alpha_i}=e^{-R\rho}$ for support tokens, $\le e^{-R\rho(1+2\delta_\alpha)}$ otherwise, and
$1-s_{i\alpha_i}\le(T-1)e^{-R\rho}$ (claim ``softmax-decay``)."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic.checks import All, Equal, Nonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Inner, Norm, SumOver


def _logit_gap():
    d = 2
    W = matrix("w", d, d)
    R, rho = symbol("R"), symbol("rho")
    xa = sp.Matrix(d, 1, lambda k, _: symbol("x", 1, k + 1))
    xt = sp.Matrix(d, 1, lambda k, _: symbol("x", 2, k + 1))
    z = sp.Matrix(d, 1, lambda k, _: symbol("z", k + 1))
    A = (xa - xt) * z.T
    lhs = (xa.T * (R * rho * W) * z)[0] - (xt.T * (R * rho * W) * z)[0]
    return Equal(lhs, R * rho * sum((a * b for a, b in zip(W, A)), sp.Integer(0)))


def _ratio():
    R, rho, m = symbol("R"), symbol("rho"), symbol("m")
    a = symbol("a", 1)
    # a_t = a_alpha - R rho (1 + m): s_t / s_alpha = exp(a_t - a_alpha)
    return Equal(sp.exp(a - R * rho * (1 + m)) / sp.exp(a), sp.exp(-R * rho) * sp.exp(-R * rho * m), "simplify")


def _monotone():
    kap, w = symbol("kappa"), symbol("omega")
    # e^{-R rho (1 + 2 delta + omega')} = kappa' / (1 + w) with kappa' = e^{-R rho (1 + 2 delta)}, w >= 0
    return Nonneg(kap - kap / (1 + w))


def _cases(kind: str, max_T: int):
    def cases():
        kap = symbol("kappa")
        for T in range(2, max_T + 1):
            q = [kap / (1 + symbol("omega", t)) for t in range(2, T + 1)]  # ratios s_t/s_alpha <= kappa
            e = [sp.Integer(1)] + q  # exponentials relative to the selected token's
            s_a = 1 / sum(e, sp.Integer(0))
            if kind == "sum":
                yield f"T={T}", Equal(1 - s_a, s_a * sum(q, sp.Integer(0)), "cancel")
            else:
                yield f"T={T}", Nonneg((T - 1) * kap - (1 - s_a))

    return cases


@derivation(name="softmax-decay", title="Softmax decay along the max-margin direction", claim="softmax-decay")
def softmax_decay(d: Derivation, max_T: int = 5) -> None:
    t = sp.Symbol("t")
    alpha = sp.Symbol("alpha")
    W, Wmm, A = matrix_symbol("W", "d", "d"), matrix_symbol("Wmm", "d", "d"), matrix_symbol("A", "d", "d", "t")
    R, rho, kap = symbol("R"), symbol("rho"), symbol("kappa")
    s_a, s_t = symbol("s", alpha), symbol("s", "t")
    a_a, a_t = symbol("a", alpha), symbol("a", "t")
    rng = f"every 2 <= T <= {max_T}, ratios kappa/(1+omega_t) with omega_t >= 0"
    d.premise(
        "the ray and the margins",
        Chain(W, "=", R * rho * Wmm, where=Chain(rho, "=", 1 / Norm(Wmm, "F"))),
        "support tokens have margin exactly 1, the others at least 1 + 2 delta (neighbour gap); kappa = exp(-R rho).",
    )
    d.step(
        "logit gaps are scaled margins",
        Chain(a_a - a_t, "=", R * rho * Inner(Wmm, A)),
        "the logits are linear in W (one input, d = 2, generic).",
        _logit_gap(),
    )
    d.step(
        "probability ratios",
        Chain(s_t / s_a, "=", sp.exp(a_t - a_a), "=", kap * sp.exp(-R * rho * symbol("m", "t"))),
        "for a margin 1 + m_t: equal to kappa for support tokens (m_t = 0), at most exp(-R rho (1 + 2 delta)) "
        "otherwise.",
        _ratio(),
    )
    d.step(
        "ratios decrease with the margin",
        Chain(kap * sp.exp(-R * rho * symbol("m", "t")), "<=", kap),
        "m_t >= 0 (and likewise beyond 1 + 2 delta): written as kappa/(1 + omega) with omega >= 0.",
        _monotone(),
    )
    d.step(
        "mass off the selected token",
        Chain(1 - s_a, "=", s_a * SumOver(s_t / s_a, sp.Ne(t, alpha))),
        "the probabilities sum to one.",
        All(_cases("sum", max_T), rng),
    )
    d.step(
        "decay bound",
        Chain(1 - s_a, "<=", (symbol("T") - 1) * kap, "=", (symbol("T") - 1) * sp.exp(-R * rho)),
        "s_alpha <= 1 and every ratio is at most kappa.",
        All(_cases("bound", max_T), rng),
    )
