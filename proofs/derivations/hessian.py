r"""``hessian``: the second derivative of $\mathcal L$ along a direction $A$,

.. math:: \nabla^2\mathcal L(W)[A,A]=\frac1n\sum_i\ell''_i\,\mathrm{Cov}_{s_i}(\gamma_i,h_i)^2
          +\ell'_i\sum_ts_{it}(\gamma_{it}-\bar\gamma_i)(h_{it}-\bar h_i)^2,\qquad h_i=X_iAz_i,

with $\bar\gamma_i=s_i^\top\gamma_i$, $\bar h_i=s_i^\top h_i$."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, Ell, EllP, EllPP, Mean, Partial, Softmax, SumOver


def third(s: sp.Matrix, g: sp.Matrix, h: sp.Matrix) -> sp.Expr:
    r"""$\sum_ts_t(g_t-\bar g)(h_t-\bar h)^2$."""
    gb, hb = (s.T * g)[0], (s.T * h)[0]
    return sum((s[t] * (g[t] - gb) * (h[t] - hb) ** 2 for t in range(len(s))), sp.Integer(0))


def _vecs(T: int):
    mk = lambda b: sp.Matrix(T, 1, lambda t, _: symbol(b, t + 1))  # noqa: E731
    return mk("a"), mk("expo"), mk("gamma"), mk("h")


def _deriv_cases(max_T: int, order: int):
    def cases():
        eps = symbol("eps")
        for T in range(1, max_T + 1):
            a, e, g, h = _vecs(T)
            u = (g.T * B.softmax_exp(a + eps * h))[0]
            du = sp.diff(u, eps, order).subs(eps, 0)
            du = B.exps_to_symbols(du, a, e)
            s = B.softmax_of_exps(e)
            want = B.cov(s, g, h) if order == 1 else third(s, g, h)
            yield f"T={T}", Equal(du, want, "cancel")

    return cases


def _quadratic_form_cases():
    def cases():
        eps = symbol("eps")
        for T, d in ((2, 1), (2, 2), (3, 1)):
            W, A = B.weights(d), matrix("A", d, d)
            inp = B.make_input(T, d, W + eps * A)
            L = B.loss_explicit([inp])
            second = sp.diff(L, eps, 2).subs(eps, 0)
            a0 = inp.X * W * inp.z
            second = B.exps_to_symbols(second, a0, inp.e)
            lp, lpp = symbol("lp"), symbol("lpp")
            second = B.name_loss_derivatives(second, lp, lpp)
            h = inp.X * A * inp.z
            s = inp.s
            want = lpp * B.cov(s, inp.gamma, h) ** 2 + lp * third(s, inp.gamma, h)
            yield f"T={T}, d={d}", Equal(second, want, "cancel")

    return cases


@derivation(
    name="hessian", title="The Hessian of the loss along a direction", claim="smoothness-bound", ci={"max_T": 3}
)
def hessian(d: Derivation, max_T: int = 4) -> None:
    i, t = sp.Symbol("i"), sp.Symbol("t")
    n, eps, L = symbol("n"), symbol("eps"), symbol("L")
    a, g, h, s = (matrix_symbol(b, "T", 1) for b in ("a", "gamma", "h", "s"))
    u = symbol("u")
    gb, hb = symbol("gammabar"), symbol("hbar")
    f = sp.Function("u")(eps)
    d.premise(
        "a line through W",
        Chain(
            u,
            "=",
            g.T * Softmax(a + eps * h),
            where=Chain(
                h, "=", matrix_symbol("X", "T", "d") * matrix_symbol("A", "d", "d") * matrix_symbol("z", "d", 1)
            ),
        ),
        "moving W to W + eps A moves the logits along h.",
    )
    d.step(
        "first derivative",
        Chain(Partial(u, eps), "=", Cov(s, g, h), where=Chain(eps, "=", 0)),
        "softmax Jacobian (derivation softmax-jacobian).",
        All(_deriv_cases(max_T, 1), f"every T <= {max_T}"),
    )
    gt, ht = symbol("gamma", "t"), symbol("h", "t")
    d.step(
        "second derivative",
        Chain(Partial(u, eps, 2), "=", SumOver(symbol("s", "t") * (gt - gb) * (ht - hb) ** 2, t)),
        (
            "differentiate the covariance once more; the third central co-moment appears, with ",
            Chain(gb, "=", s.T * g),
            " and ",
            Chain(hb, "=", s.T * h),
            ".",
        ),
        All(_deriv_cases(max_T, 2), f"every T <= {max_T}"),
    )
    d.step(
        "chain rule for the loss",
        Chain(
            sp.Derivative(Ell(f), (eps, 2)),
            "=",
            EllPP(f) * sp.Derivative(f, eps) ** 2 + EllP(f) * sp.Derivative(f, (eps, 2)),
        ),
        "for every twice differentiable loss.",
        Equal(sp.diff(Ell(f), eps, 2), EllPP(f) * sp.diff(f, eps) ** 2 + EllP(f) * sp.diff(f, eps, 2)),
    )
    d.step(
        "Hessian quadratic form",
        Chain(
            Partial(L, eps, 2),
            "=",
            Mean(
                EllPP(u) * Cov(s, g, h) ** 2 + EllP(u) * SumOver(symbol("s", "t") * (gt - gb) * (ht - hb) ** 2, t),
                i,
                n,
            ),
        ),
        "combine, input by input (index i dropped inside the sum); checked on the explicit loss in W + eps A.",
        All(_quadratic_form_cases(), "generic W, A for (T,d) in (2,1), (2,2), (3,1)"),
    )
