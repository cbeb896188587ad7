r"""``hessian``: the second derivative of $\mathcal L$ along a direction $A$,

.. math:: \nabla^2\mathcal L(W)[A,A]=\frac1n\sum_{i=1}^n\ell''(u_i)\,\mathrm{Cov}_{s_i}(\gamma_i,h_i)^2
          +\ell'(u_i)\sum_ts_{i,t}(\gamma_{i,t}-\bar\gamma_i)(h_{i,t}-\bar h_i)^2,\qquad h_i=X_iAz_i,

with $\bar\gamma_i=s_i^\top\gamma_i$, $\bar h_i=s_i^\top h_i$. The derivatives along the line are proved for general
$T$, the quadratic form for general $n,T,d$, in index notation (:func:`attsvm.symbolic.sums.reduce`); the
instance checks are kept as second evidence."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Symbolic
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, Ell, EllP, EllPP, Mean, Partial, RealSpace, Softmax, Times, in_order


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


QUAD_SHAPES = ((2, 1), (2, 2), (3, 1))


def _quadratic_form_cases(shapes):
    def cases():
        eps = symbol("eps")
        for T, d in shapes:
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
    name="hessian",
    title="The Hessian of the loss along a direction",
    claim="smoothness-bound",
    ci={"max_T": 3, "full": False},
)
def hessian(d: Derivation, max_T: int = 4, full: bool = True) -> None:
    shapes = QUAD_SHAPES if full else QUAD_SHAPES[:1]
    T, dd, n = symbol("T"), symbol("d"), symbol("n")
    i, t, tau, u, j, k, p, q = (index(c) for c in ("i", "t", "tau", "u", "j", "k", "p", "q"))
    eps, L, uu, ui = symbol("eps"), symbol("L"), symbol("u"), symbol("u", "i")
    a, g, h, sx, x, z, w, A_ = (indexed(b) for b in ("a", "gamma", "h", "s", "x", "z", "w", "A"))
    av, gv, hv, sv = (matrix_symbol(b, "T", 1) for b in ("a", "gamma", "h", "s"))
    gi, hi, si = (matrix_symbol(b, "T", 1, "i") for b in ("gamma", "h", "s"))
    X, A, zv = matrix_symbol("X", "T", "d"), matrix_symbol("A", "d", "d"), matrix_symbol("z", "d", 1)
    W = matrix_symbol("W", "d", "d")
    gb, hb, gbi, hbi = symbol("gammabar"), symbol("hbar"), symbol("gammabar", "i"), symbol("hbar", "i")
    f = sp.Function("u")(eps)
    rng = {t: (1, T), tau: (1, T)}

    def tsum(body, v=t):
        return sp.Sum(body, (v, 1, T))

    # one input along the line: logits a_t + eps h_t
    def S_line(v):
        return sp.exp(a[v] + eps * h[v]) / tsum(sp.exp(a[u] + eps * h[u]), u)

    def S(v):
        return B.softmax_entry(a, v, u, T)

    u_line = tsum(g[t] * S_line(t))
    gbar, hbar = tsum(S(tau) * g[tau], tau), tsum(S(tau) * h[tau], tau)
    cov_index = tsum(S(t) * g[t] * h[t]) - gbar * hbar
    third_index = tsum(S(t) * (g[t] - gbar) * (h[t] - hbar) ** 2)
    general = ("index notation, at ", Chain(eps, "=", 0))
    inst = ("every ", Chain(T, "<=", max_T))
    third_tex = sp.Sum(Times(sx[t], in_order(g[t], -gb), in_order(h[t], -hb) ** 2), (t, 1, T))
    d.define(
        (X, zv, gv),
        ("the tokens as rows, the query and the scores of one input; with an index ", i, ", those of input ", i, "."),
    )
    d.define(Chain(av, "=", X * W * zv), ("the logits of the input, with entries ", a[t], "."))
    d.define(*glossary.softmax())
    d.define(*glossary.covariance())
    d.define(*glossary.loss(second=True))
    d.define(*glossary.empirical_loss())
    d.premise(
        "a line through W",
        Chain(uu, "=", gv.T * Softmax(in_order(av, eps * hv)), where=Chain(hv, "=", X * A * zv, "in", RealSpace(T))),
        (
            "moving ",
            W,
            " along a direction ",
            Chain(A, "in", RealSpace(dd, dd)),
            " by ",
            eps,
            " moves the logits of an input along ",
            hv,
            "; in index notation ",
            Chain(uu, "=", sp.Sum(Times(g[t], sx[t]), (t, 1, T))),
            " with ",
            Chain(
                sx[t],
                "=",
                sp.exp(in_order(a[t], eps * h[t])) / sp.Sum(sp.exp(in_order(a[u], eps * h[u])), (u, 1, T)),
            ),
            ".",
        ),
        label="line",
    )
    d.step(
        "first derivative",
        Chain(Partial(uu, eps), "=", Cov(sv, gv, hv), where=Chain(eps, "=", 0)),
        ("softmax Jacobian (derivation softmax-jacobian) and the covariance form (derivation grad-covariance)."),
        Symbolic(sp.Subs(sp.Derivative(u_line, eps), eps, 0), cov_index, [T], method=sums.reducer(rng), what=general),
        evidence=All(_deriv_cases(max_T, 1), inst),
        label="first-derivative",
    )
    d.step(
        "second derivative",
        Chain(Partial(uu, eps, 2), "=", third_tex, where=Chain(eps, "=", 0)),
        (
            "differentiate the covariance once more; the third central co-moment appears, with ",
            Chain(gb, "=", sv.T * gv),
            " and ",
            Chain(hb, "=", sv.T * hv),
            ".",
        ),
        Symbolic(
            sp.Subs(sp.Derivative(u_line, (eps, 2)), eps, 0), third_index, [T], method=sums.reducer(rng), what=general
        ),
        evidence=All(_deriv_cases(max_T, 2), inst),
        label="second-derivative",
    )
    d.step(
        "chain rule for the loss",
        Chain(
            sp.Derivative(Ell(f), (eps, 2)),
            "=",
            in_order(Times(EllPP(f), sp.Derivative(f, eps) ** 2), Times(EllP(f), sp.Derivative(f, (eps, 2)))),
        ),
        "for every twice differentiable loss and every twice differentiable path.",
        Equal(
            sp.diff(Ell(f), eps, 2),
            EllPP(f) * sp.diff(f, eps) ** 2 + EllP(f) * sp.diff(f, eps, 2),
            what="an identity of one variable, with the loss and the path undefined functions",
        ),
        label="chain-rule",
    )

    # the whole quadratic form: input i written out, W + eps A in the logits
    def dir_logit(ii, v):
        return sp.Sum(x[ii, v, p] * A_[p, q] * z[ii, q], (q, 1, dd), (p, 1, dd))

    def logit(ii, v):  # the logit of token v of input ii at W + eps A
        return sp.Sum(x[ii, v, p] * (w[p, q] + eps * A_[p, q]) * z[ii, q], (q, 1, dd), (p, 1, dd))

    def soft(ii, v):
        return sp.exp(logit(ii, v)) / sp.Sum(sp.exp(logit(ii, u)), (u, 1, T))

    def soft0(ii, v):
        return soft(ii, v).subs(eps, 0)

    loss = sp.Sum(Ell(tsum(g[i, t] * soft(i, t))), (i, 1, n)) / n
    U0 = tsum(g[i, t] * soft0(i, t))
    gb0 = tsum(soft0(i, tau) * g[i, tau], tau)
    hb0 = tsum(soft0(i, tau) * dir_logit(i, tau), tau)
    cov0 = tsum(soft0(i, t) * g[i, t] * dir_logit(i, t)) - gb0 * hb0
    third0 = tsum(soft0(i, t) * (g[i, t] - gb0) * (dir_logit(i, t) - hb0) ** 2)
    want = sp.Sum(EllPP(U0) * cov0**2 + EllP(U0) * third0, (i, 1, n)) / n
    third_i = sp.Sum(Times(sx[i, t], in_order(g[i, t], -gbi), in_order(h[i, t], -hbi) ** 2), (t, 1, T))
    d.step(
        "Hessian quadratic form",
        Chain(
            Partial(L, eps, 2),
            "=",
            Mean(Times(EllPP(ui), Cov(si, gi, hi) ** 2), i, n),
            "+",
            Mean(Times(EllP(ui), third_i), i, n),
            where=Chain(eps, "=", 0),
            breaks=(2,),
        ),
        (
            "steps {step:first-derivative} to {step:chain-rule} for each input ",
            i,
            ", with ",
            Chain(hi, "=", matrix_symbol("X", "T", "d", "i") * A * matrix_symbol("z", "d", 1, "i")),
            ", ",
            Chain(gbi, "=", si.T * gi),
            " and ",
            Chain(hbi, "=", si.T * hi),
            "; sympy differentiates the loss written out in index notation in ",
            in_order(W, eps * A),
            " twice.",
        ),
        Symbolic(
            sp.Subs(sp.Derivative(loss, (eps, 2)), eps, 0),  # differentiated when the check runs
            want,
            [n, T, dd],
            method=sums.reducer(rng),
            what=("index notation, at ", Chain(eps, "=", 0)),
        ),
        evidence=All(
            _quadratic_form_cases(shapes),
            ("generic ", W, " and ", A, " for ")
            + tuple(
                x_
                for n_, (T_, d_) in enumerate(shapes)
                for x_ in (["; "] if n_ else []) + [Chain(T, "=", T_), ", ", Chain(dd, "=", d_)]
            ),
        ),
        label="hessian",
    )
