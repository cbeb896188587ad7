r"""``grad-covariance``: the gradient along a direction is a covariance,

.. math:: \langle\nabla\mathcal L(W),A\rangle=\frac1n\sum_{i=1}^n\ell'(u_i)\,\mathrm{Cov}_{s_i}(\gamma_i,X_iAz_i).

Every step is proved for general $n,T,d$ in index notation (:func:`attsvm.symbolic.sums.reduce`, which
also exchanges finite sums); the instance checks of small sizes are kept as second evidence."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Symbolic
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, Diag, Elem, EllP, Grad, Inner, Mean, RealSpace, Times, in_order


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
    return Equal(lhs, rhs, "cancel")


@derivation(
    name="grad-covariance",
    title="The gradient along a direction is a covariance",
    claim="grad-covariance",
    ci={"max_T": 3},
)
def grad_covariance(d: Derivation, max_T: int = 4, max_d: int = 3) -> None:
    T, dd, n = symbol("T"), symbol("d"), symbol("n")
    i, t, tau, u, j, k = (index(c) for c in ("i", "t", "tau", "u", "j", "k"))
    x, z, g, h, sx, rx, A_, a, lp = (indexed(b) for b in ("x", "z", "gamma", "h", "s", "r", "A", "a", "lp"))
    L = symbol("L")
    Xi = matrix_symbol("X", "T", "d", "i")
    W, A = matrix_symbol("W", "d", "d"), matrix_symbol("A", "d", "d")
    zi = matrix_symbol("z", "d", 1, "i")
    gi, si, ri, hi = (matrix_symbol(b, "T", 1, "i") for b in ("gamma", "s", "r", "h"))
    Ji = in_order(Diag(si), -si * si.T)
    rng = {t: (1, T), tau: (1, T), j: (1, dd), k: (1, dd)}
    inst = ("every ", Chain(T, "<=", max_T))

    def tsum(body, *idx):
        for v in idx:
            body = sp.Sum(body, (v, 1, T))
        return body

    def dsum(body, *idx):
        for v in idx:
            body = sp.Sum(body, (v, 1, dd))
        return body

    def cov_index(s, gg, hh):  # sum_t s_t g_t h_t - (sum_t s_t g_t)(sum_t s_t h_t), gg, hh: callables of t
        return tsum(s(t) * gg(t) * hh(t), t) - tsum(s(t) * gg(t), t) * tsum(s(t) * hh(t), t)

    def cov_tex(ii):
        return in_order(
            sp.Sum(Times(sx[ii, t], g[ii, t], h[ii, t]), (t, 1, T)),
            -Times(sp.Sum(Times(sx[ii, t], g[ii, t]), (t, 1, T)), sp.Sum(Times(sx[ii, t], h[ii, t]), (t, 1, T))),
        )

    d.summary = (
        "Proved for general sizes ",
        sp.Tuple(n, T, dd),
        " in index notation; ",
        Chain(A, "in", RealSpace(dd, dd)),
        " is any direction.",
    )
    d.define((Xi, x[i, t, j]), ("the tokens of input ", i, " as the rows of a matrix, and their entries."))
    d.define((zi, z[i, k]), ("the query of input ", i, " and its entries."))
    d.define((gi, g[i, t]), ("the scores of the tokens of input ", i, " (THEORY section 1)."))
    d.define(Chain(a[i, t], "=", Elem(Xi * W * zi, t)), ("the logit of token ", t, " of input ", i, "."))
    d.define(*glossary.loss())
    d.define(*glossary.empirical_loss())
    d.define(*glossary.covariance())
    d.premise(
        "closed form",
        Chain(
            Grad(L, W),
            "=",
            Mean(EllP(symbol("u", "i")) * Xi.T * ri * zi.T, i, n),
            where=Chain(ri, "=", Ji * gi, "in", RealSpace(T)),
        ),
        "derivation gradient, step {step:gradient/average} (claim grad-closed-form).",
    )
    d.step(
        "trace identity",
        Chain(
            Inner(Xi.T * ri * zi.T, A),
            "=",
            sp.Sum(Times(sp.Sum(Times(x[i, t, j], rx[i, t], z[i, k]), (t, 1, T)), A_[j, k]), (k, 1, dd), (j, 1, dd)),
            "=",
            ri.T * Xi * A * zi,
            breaks=(2,),
        ),
        (
            "the inner product of the rank-one matrix with ",
            A,
            ", entry by entry; exchanging the finite sums gives the scalar on the second line.",
        ),
        Symbolic(
            dsum(tsum(x[i, t, j] * rx[i, t] * z[i, k], t) * A_[j, k], k, j),
            tsum(rx[i, t] * dsum(x[i, t, j] * A_[j, k] * z[i, k], k, j), t),
            [T, dd],
            method=sums.reducer(rng),
            what=("index notation, sums exchanged",),
        ),
        evidence=All(
            _trace_cases(max_T, max_d), ("generic ", A, ", every ", Chain(T, "<=", max_T), ", ", Chain(dd, "<=", max_d))
        ),
    )
    d.step(
        "covariance form",
        Chain(gi.T * Ji * hi, "=", cov_tex(i), "=", Cov(si, gi, hi), breaks=(2,)),
        (
            "expand the quadratic form, with ",
            Chain(hi, "=", Xi * A * zi, "in", RealSpace(T)),
            "; this is the covariance of ",
            gi,
            " and ",
            hi,
            " under the probabilities ",
            si,
            ".",
        ),
        Symbolic(
            tsum(g[i, t] * sx[i, t] * (sp.KroneckerDelta(t, tau) - sx[i, tau]) * h[i, tau], tau, t),
            cov_index(lambda q: sx[i, q], lambda q: g[i, q], lambda q: h[i, q]),
            [T],
            method=sums.reducer(rng),
            what=("index notation, any weights ", sx[i, t]),
        ),
        evidence=All(_cov_cases(max_T, False), inst),
    )
    S = lambda q: sp.exp(a[i, q]) / tsum(sp.exp(a[i, u]), u)  # noqa: E731
    d.step(
        "pairwise form",
        Chain(
            Cov(si, gi, hi),
            "=",
            sp.Rational(1, 2)
            * sp.Sum(
                Times(sx[i, t], sx[i, tau], in_order(g[i, t], -g[i, tau]), in_order(h[i, t], -h[i, tau])),
                (tau, 1, T),
                (t, 1, T),
            ),
        ),
        ("the probabilities sum to one, ", Chain(sp.Sum(sx[i, t], (t, 1, T)), "=", 1), "."),
        Symbolic(
            cov_index(S, lambda q: g[i, q], lambda q: h[i, q]),
            sp.Rational(1, 2) * tsum(S(t) * S(tau) * (g[i, t] - g[i, tau]) * (h[i, t] - h[i, tau]), tau, t),
            [T],
            method=sums.reducer(rng),
            what=("index notation, softmax probabilities ", Chain(sx[i, t], "=", S(t))),
        ),
        evidence=All(_cov_cases(max_T, True), inst),
    )
    h_of = lambda ii, q: dsum(x[ii, q, j] * A_[j, k] * z[ii, k], k, j)  # noqa: E731
    r_of = lambda ii, q: sx[ii, q] * (g[ii, q] - tsum(sx[ii, tau] * g[ii, tau], tau))  # noqa: E731
    lhs = dsum(sp.Sum(lp[i] * tsum(x[i, t, j] * r_of(i, t) * z[i, k], t), (i, 1, n)) / n * A_[j, k], k, j)
    rhs = sp.Sum(lp[i] * cov_index(lambda q: sx[i, q], lambda q: g[i, q], lambda q: h_of(i, q)), (i, 1, n)) / n
    d.step(
        "result",
        Chain(Inner(Grad(L, W), A), "=", Mean(Times(EllP(symbol("u", "i")), Cov(si, gi, Xi * A * zi)), i, n)),
        (
            "combine steps {step:closed-form} to {step:covariance-form}, input by input; checked in one piece, with ",
            lp[i],
            " standing for ",
            EllP(symbol("u", "i")),
            ", the entries ",
            x[i, t, j],
            ", ",
            z[i, k],
            ", ",
            g[i, t],
            ", ",
            sx[i, t],
            " of input ",
            i,
            " and ",
            Chain(h[i, t], "=", h_of(i, t)),
            ".",
        ),
        Symbolic(lhs, rhs, [n, T, dd], method=sums.reducer(rng), what=("index notation, sums exchanged",)),
        evidence=All(
            lambda: [("n=2, T=2, d=2", _combined())],
            ("two inputs, ", Chain(sp.Tuple(n, T, dd), "=", sp.Tuple(2, 2, 2)), ", generic ", A),
        ),
    )
