r"""``grad-covariance``: the gradient along a direction is a covariance,

.. math:: \langle\nabla\mathcal L(W),A\rangle=\frac1n\sum_i\ell'_i\,\mathrm{Cov}_{s_i}(\gamma_i,X_iAz_i)."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, Diag, EllP, Grad, Inner, Mean, SumOver


def _trace_cases(max_T: int, max_d: int):
    def cases():
        for T in range(1, max_T + 1):
            for d in range(1, max_d + 1):
                W = B.weights(d)
                inp = B.make_input(T, d, W)
                r = sp.Matrix(T, 1, lambda t, _: symbol("r", t + 1))
                A = matrix("A", d, d)
                lhs = B.inner(inp.X.T * r * inp.z.T, A)
                yield f"T={T}, d={d}", Equal(lhs, (r.T * inp.X * A * inp.z)[0])

    return cases


def _cov_cases(max_T: int, centred: bool):
    def cases():
        for T in range(1, max_T + 1):
            e = sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1))
            g = sp.Matrix(T, 1, lambda t, _: symbol("gamma", t + 1))
            h = sp.Matrix(T, 1, lambda t, _: symbol("h", t + 1))
            if not centred:
                s = sp.Matrix(T, 1, lambda t, _: symbol("s", t + 1))
                yield f"T={T}", Equal((g.T * B.jacobian_closed(s) * h)[0], B.cov(s, g, h))
            else:
                s = B.softmax_of_exps(e)
                pair = sum(
                    (s[t] * s[u] * (g[t] - g[u]) * (h[t] - h[u]) for t in range(T) for u in range(t + 1, T)),
                    sp.Integer(0),
                )
                yield f"T={T}", Equal(B.cov(s, g, h), pair, "cancel")

    return cases


def _combined():
    W = B.weights(2)
    inputs = [B.make_input(2, 2, W, i) for i in (1, 2)]
    lps = [symbol("lp", i) for i in (1, 2)]
    A = matrix("A", 2, 2)
    lhs = B.inner(B.grad_closed_form(inputs, lps), A)
    rhs = sum((lp * B.cov(inp.s, inp.gamma, inp.X * A * inp.z) for inp, lp in zip(inputs, lps)), sp.Integer(0)) / 2
    return Equal(lhs, rhs, "cancel", what="n=2, T=2, d=2, generic A")


@derivation(
    name="grad-covariance",
    title="The gradient along a direction is a covariance",
    claim="grad-covariance",
    ci={"max_T": 3},
)
def grad_covariance(d: Derivation, max_T: int = 4, max_d: int = 3) -> None:
    i, t, tau = sp.Symbol("i"), sp.Symbol("t"), sp.Symbol("tau")
    n, L = symbol("n"), symbol("L")
    X = matrix_symbol("X", "T", "d", "i")
    W, A = matrix_symbol("W", "d", "d"), matrix_symbol("A", "d", "d")
    z = matrix_symbol("z", "d", 1, "i")
    g, s, r = (matrix_symbol(b, "T", 1, "i") for b in ("gamma", "s", "r"))
    h = matrix_symbol("h", "T", 1, "i")
    d.premise(
        "closed form",
        Chain(Grad(L, W), "=", Mean(EllP(g.T * s) * X.T * r * z.T, i, n), where=Chain(r, "=", (Diag(s) - s * s.T) * g)),
        "derivation gradient (claim grad-closed-form).",
    )
    d.step(
        "trace identity",
        Chain(Inner(X.T * r * z.T, A), "=", r.T * X * A * z),
        "the inner product of a rank-one matrix with A.",
        All(_trace_cases(max_T, max_d), f"generic A, every T <= {max_T}, d <= {max_d}"),
    )
    d.step(
        "covariance form",
        Chain(g.T * (Diag(s) - s * s.T) * h, "=", Cov(s, g, h), where=Chain(h, "=", X * A * z)),
        "expand the quadratic form: sum_t s_t g_t h_t - (s^T g)(s^T h).",
        All(_cov_cases(max_T, False), f"every T <= {max_T}"),
    )
    gt, gu, ht, hu = (symbol(b, x) for b in ("gamma", "h") for x in ("t", "tau"))
    d.step(
        "pairwise form",
        Chain(
            Cov(s, g, h),
            "=",
            SumOver(symbol("s", "t") * symbol("s", "tau") * (gt - gu) * (ht - hu), sp.Lt(t, tau)),
        ),
        "the probabilities sum to one.",
        All(_cov_cases(max_T, True), f"every T <= {max_T}"),
    )
    d.step(
        "result",
        Chain(Inner(Grad(L, W), A), "=", Mean(EllP(g.T * s) * Cov(s, g, X * A * z), i, n)),
        "combine the three steps, input by input.",
        _combined(),
    )
