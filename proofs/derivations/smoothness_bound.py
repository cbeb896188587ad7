r"""``smoothness-bound``: the pieces of $\|\nabla^2\mathcal L(W)\|_2\le L_W$ (THEORY §3, reconstructed).

From the Hessian quadratic form (derivation ``hessian``), with $|\ell''|\le M_0$, $|\ell'|\le M_1$,
$G=\|v\|\|X_i\|_2$ bounding $|\gamma_{i,t}|$ and $H=\|X_i\|_2\|A\|_F\|z_i\|$ bounding $\|h_i\|$:
$|\nabla^2\mathcal L[A,A]|\le\frac1n\sum_i(M_0G^2H^2+2M_1GH^2)\le L_W\|A\|_F^2$ — the constant 3 of
THEORY holds with room (2 suffices). The inequalities between sums are proved for general $T$ (Cauchy-Schwarz for
vectors for general $d$) in index notation (:func:`attsvm.symbolic.sums.reduce`); the final combination
is an inequality between numbers."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Nonneg, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, EllP, EllPP, Hess, Norm, Times, Var, in_order


def _vec(b: str, T: int) -> sp.Matrix:
    return sp.Matrix(T, 1, lambda t, _: symbol(b, t + 1))


def _cs_cases(max_T: int):
    def cases():
        for T in range(2, max_T + 1):
            s = B.softmax_of_exps(_vec("expo", T))
            g, h = _vec("g", T), _vec("h", T)
            gc = g - sp.ones(T, 1) * (s.T * g)[0]
            hc = h - sp.ones(T, 1) * (s.T * h)[0]
            cert = sum(
                (s[t] * s[u] * (gc[t] * hc[u] - gc[u] * hc[t]) ** 2 for t in range(T) for u in range(t + 1, T)),
                sp.Integer(0),
            )
            yield f"T={T}", Nonneg(B.var(s, g) * B.var(s, h) - B.cov(s, g, h) ** 2, cert, "cancel")

    return cases


def _var_cases(max_T: int, kind: str):
    def cases():
        for T in range(1, max_T + 1):
            s = B.softmax_of_exps(_vec("expo", T))
            g = _vec("g", T)
            second = sum((s[t] * g[t] ** 2 for t in range(T)), sp.Integer(0))
            if kind == "variance":
                yield f"T={T}", Nonneg(second - B.var(s, g), (s.T * g)[0] ** 2, "cancel")
            else:  # max bound: g_t^2 = G^2 - m_t with m_t >= 0
                G, m = symbol("Gb"), _vec("m", T)
                sub = {g[t] ** 2: G**2 - m[t] for t in range(T)}
                yield f"T={T}", Nonneg(sp.expand(G**2 - second).xreplace(sub), None, "cancel")

    return cases


def _cs_vec_cases():
    def cases():
        for dd in (2, 3):
            v, x = _vec("v", dd), _vec("x", dd)
            cert = sum(((v[j] * x[k] - v[k] * x[j]) ** 2 for j in range(dd) for k in range(j + 1, dd)), sp.Integer(0))
            yield f"d={dd}", Nonneg(B.fro2(v) * B.fro2(x) - (v.T * x)[0] ** 2, cert)

    return cases


@derivation(
    name="smoothness-bound", title="The pieces of the smoothness bound", claim="smoothness-bound", ci={"max_T": 3}
)
def smoothness_bound(d: Derivation, max_T: int = 4) -> None:
    T, dd = symbol("T"), symbol("d")
    t, tau, u, j, k = (index(c) for c in ("t", "tau", "u", "j", "k"))
    a, g, h, sx, m, v, x = (indexed(b) for b in ("a", "g", "h", "s", "m", "v", "x"))
    s, hv = (matrix_symbol(b, "T", 1) for b in ("s", "h"))
    gv = matrix_symbol("g", "T", 1)
    X, A, z, vv = (
        matrix_symbol("X", "T", "d"),
        matrix_symbol("A", "d", "d"),
        matrix_symbol("z", "d", 1),
        matrix_symbol("v", "d", 1),
    )
    xv = matrix_symbol("x", "d", 1)
    uu, M0, M1 = symbol("u"), symbol("M0"), symbol("M1")
    G, H = symbol("Gb"), symbol("Hb")
    rng = {t: (1, T), tau: (1, T)}
    inst = ("every ", Chain(T, "<=", max_T))
    soft = ("index notation, softmax probabilities ", Chain(sx[t], "=", B.softmax_entry(a, t, u, T)))

    def S(q):
        return B.softmax_entry(a, q, u, T)

    def tsum(body, *idx):
        for q in idx:
            body = sp.Sum(body, (q, 1, T))
        return body

    gbar, hbar = tsum(S(tau) * g[tau], tau), tsum(S(tau) * h[tau], tau)

    def var(f):
        return tsum(S(t) * f(t) ** 2, t) - tsum(S(t) * f(t), t) ** 2

    cov = tsum(S(t) * g[t] * h[t], t) - gbar * hbar
    d.define(*glossary.loss(second=True))
    d.define(*glossary.empirical_loss())
    d.define((a[t], s), ("the logit of token ", t, " of one input, and the softmax probabilities."))
    d.define(
        ((gv, g[t]), (hv, h[t])),
        ("two vectors of values and their entries: below, the scores and the directional logits ", X * A * z, "."),
    )
    d.define(
        (symbol("gamma", "t"), symbol("gammabar")),
        ("the score of token ", t, " (THEORY section 1) and the mean score under the probabilities."),
    )
    d.define(((vv, v[j]), (xv, x[j])), "the linear head and a token, and their entries.")
    d.define(Chain(m[t], "=", in_order(G**2, -(g[t] ** 2))), "the slack of the bound on a squared value.")
    d.define(*glossary.covariance())
    d.define(*glossary.variance())
    d.premise(
        "Assumption A and the Hessian",
        Chain(sp.Abs(EllPP(uu)), "<=", M0, where=Chain(sp.Abs(EllP(uu)), "<=", M1)),
        (
            "THEORY section 1 (the logistic loss has ",
            Chain(M0, "=", sp.Rational(1, 4)),
            " and ",
            Chain(M1, "=", 1),
            "); the Hessian quadratic form of derivation hessian.",
        ),
    )
    gc = lambda q: g[q] - gbar  # noqa: E731
    hc = lambda q: h[q] - hbar  # noqa: E731
    cert = sp.Rational(1, 2) * tsum(S(t) * S(tau) * (gc(t) * hc(tau) - gc(tau) * hc(t)) ** 2, tau, t)
    gb_, hb_ = symbol("gbar"), symbol("hbar")
    gt, ht = indexed("gtil"), indexed("htil")
    lagrange = sp.Rational(1, 2) * sp.Sum(
        Times(sx[t], sx[tau], in_order(Times(gt[t], ht[tau]), -Times(gt[tau], ht[t])) ** 2), (tau, 1, T), (t, 1, T)
    )
    d.step(
        "Cauchy-Schwarz for the covariance",
        Chain(in_order(Var(s, gv) * Var(s, hv), -(Cov(s, gv, hv) ** 2)), "=", lagrange, ">=", 0, breaks=(1,)),
        (
            "the identity of Lagrange, a weighted sum of squares of the centred values ",
            Chain(gt[t], "=", in_order(g[t], -gb_)),
            " and ",
            Chain(ht[t], "=", in_order(h[t], -hb_)),
            ", with ",
            Chain(gb_, "=", s.T * gv),
            " and ",
            Chain(hb_, "=", s.T * hv),
            "; so ",
            Chain(Cov(s, gv, hv) ** 2, "<=", Var(s, gv) * Var(s, hv)),
            ".",
        ),
        SymbolicNonneg(var(lambda q: g[q]) * var(lambda q: h[q]) - cov**2, cert, [T], sums.reducer(rng), what=soft),
        evidence=All(_cs_cases(max_T), ("every ", Chain(2, "<=", T, "<=", max_T))),
    )
    second = sp.Sum(Times(sx[t], g[t] ** 2), (t, 1, T))
    d.step(
        "variance below the second moment",
        Chain(Var(s, gv), "<=", second),
        ("the difference is the square ", (s.T * gv) ** 2, "."),
        SymbolicNonneg(
            tsum(S(t) * g[t] ** 2, t) - var(lambda q: g[q]),
            tsum(S(t) * g[t], t) ** 2,
            [T],
            sums.reducer(rng),
            what=soft,
        ),
        evidence=All(_var_cases(max_T, "variance"), inst),
    )
    d.step(
        "second moment below the largest square",
        Chain(second, "<=", G**2, where=Chain(g[t] ** 2, "<=", G**2)),
        (
            "write ",
            Chain(g[t] ** 2, "=", in_order(G**2, -m[t])),
            " with ",
            Chain(m[t], ">=", 0),
            "; the probabilities sum to one.",
        ),
        SymbolicNonneg(
            G**2 - tsum(S(t) * (G**2 - m[t]), t),
            tsum(S(t) * m[t], t),
            [T],
            sums.reducer(rng),
            what=soft,
        ),
        evidence=All(_var_cases(max_T, "max"), inst),
    )
    vdot = sp.Sum(Times(v[j], x[j]), (j, 1, dd))
    d.step(
        "scores and directional logits are bounded",
        Chain((vv.T * xv) ** 2, "<=", Norm(vv, "") ** 2 * Norm(xv, "") ** 2),
        (
            "Cauchy-Schwarz (the identity of Lagrange); with the spectral norm this gives ",
            Chain(sp.Abs(symbol("gamma", "t")), "<=", G),
            " and ",
            Chain(Norm(hv, ""), "<=", H),
            ".",
        ),
        SymbolicNonneg(
            sp.Sum(v[j] ** 2, (j, 1, dd)) * sp.Sum(x[k] ** 2, (k, 1, dd)) - sp.Sum(v[j] * x[j], (j, 1, dd)) ** 2,
            sp.Rational(1, 2) * sp.Sum((v[j] * x[k] - v[k] * x[j]) ** 2, (k, 1, dd), (j, 1, dd)),
            [dd],
            sums.reducer(),
            what=("index notation, ", Chain((vv.T * xv), "=", vdot)),
        ),
        evidence=All(_cs_vec_cases(), ("every ", Chain(dd, "in", sp.FiniteSet(2, 3)))),
    )
    gmax = sp.Abs(in_order(symbol("gamma", "t"), -symbol("gammabar")))
    d.premise(
        "the definition of the bounds",
        Chain(
            G,
            "=",
            Times(Norm(vv, ""), Norm(X, "2")),
            where=Chain(H, "=", Times(Norm(X, "2"), Norm(A, "F"), Norm(z, ""))),
        ),
        (
            "the third co-moment is at most the largest centred score times the variance of ",
            hv,
            ", and ",
            Chain(gmax, "<=", 2 * G),
            "; by the definition of the spectral norm, ",
            Chain(Norm(X * A * z, ""), "<=", Times(Norm(X, "2"), Norm(A, "F"), Norm(z, ""))),
            ".",
        ),
    )
    combo = M0 * G**2 * H**2 + 2 * M1 * G * H**2
    bound = M0 * G**2 * H**2 + 3 * M1 * G * H**2
    combo_tex = in_order(Times(M0, G**2, H**2), Times(2, M1, G, H**2))
    bound_tex = in_order(Times(M0, G**2, H**2), Times(3, M1, G, H**2))
    d.step(
        "combination",
        Chain(sp.Abs(Hess(symbol("L"), A)), "<=", combo_tex, "<=", bound_tex),
        (
            "each input contributes at most ",
            combo_tex,
            "; the bound of THEORY has ",
            3 * M1,
            " in place of ",
            2 * M1,
            ".",
        ),
        Nonneg(bound - combo, M1 * G * H**2, what="an inequality between numbers"),
    )
