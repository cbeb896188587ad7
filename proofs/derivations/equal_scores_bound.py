r"""``equal-scores-bound``: under Assumption B the covariance along $W^{\mathrm{mm}}$ is bounded below
(claim ``no-stationary-equal-scores``).

With $\gamma_{i,t}=\gamma_{i,o}-\Delta_i$ for $t\ne o=\mathrm{opt}_i$ and $h_{i,t}=x_{i,t}^\top W^{\mathrm{mm}}z_i$,
$h_{i,o}-h_{i,t}\ge1$: $\mathrm{Cov}_{s_i}(\gamma_i,h_i)\ge\Delta_is_{i,o}(1-s_{i,o})$, hence
$\langle\nabla\mathcal L(W),W^{\mathrm{mm}}\rangle\le\frac1n\sum_i\ell'(u_i)\Delta_is_{i,o}(1-s_{i,o})<0$.

The covariance identity, the lower bound and its sign reversal are proved for general $T$ in index notation
(:func:`attsvm.symbolic.sums.reduce`); the strict sign of the last step is checked on instances."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Nonneg, Predicate, Symbolic, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, EllP, Grad, Inner, Mean, RealSpace, SumOver, Times, in_order


def instance(T: int):
    """Optimal token 1; scores with one common non-optimal value; h with margins 1 + m_t."""
    e = sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1))
    s = B.softmax_of_exps(e)
    go, Dl, ho = symbol("gamma", 1), symbol("Delta"), symbol("h", 1)
    g = sp.Matrix([go] + [go - Dl] * (T - 1))
    h = sp.Matrix([ho] + [ho - 1 - symbol("m", t) for t in range(2, T + 1)])
    return s, g, h, Dl


def _cases(kind: str, max_T: int):
    def cases():
        p = sp.Symbol("p", positive=True)  # l' = -p < 0
        for T in range(2, max_T + 1):
            s, g, h, Dl = instance(T)
            so = s[0]
            cov = B.cov(s, g, h)
            if kind == "identity":
                rhs = Dl * so * sum((s[t] * (h[0] - h[t]) for t in range(1, T)), sp.Integer(0))
                yield f"T={T}", Equal(cov, rhs, "cancel")
            elif kind == "bound":
                yield f"T={T}", Nonneg(cov - Dl * so * (1 - so))
            elif kind == "sign":
                yield f"T={T}", Nonneg((-p) * Dl * so * (1 - so) - (-p) * cov)
            elif kind == "strict":
                val = sp.together(p * Dl * so * (1 - so))
                yield f"T={T}", Predicate(lambda val=val: bool(val.is_positive), "the bound is strictly negative")

    return cases


@derivation(
    name="equal-scores-bound",
    title="No stationary point under equal non-optimal scores",
    claim="no-stationary-equal-scores",
)
def equal_scores_bound(d: Derivation, max_T: int = 5) -> None:
    T, n = symbol("T"), symbol("n")
    i, t, u = (index(c) for c in ("i", "t", "u"))
    o = index("o")
    L, Dl = symbol("L"), symbol("Delta")
    W, Wmm, A = matrix_symbol("W", "d", "d"), matrix_symbol("Wmm", "d", "d"), matrix_symbol("A", "d", "d")
    s, g, h = (matrix_symbol(b, "T", 1) for b in ("s", "gamma", "h"))
    a, gx, hx, sx, m = (indexed(b) for b in ("a", "gamma", "h", "s", "m"))
    uu = symbol("u")
    pp = sp.Symbol("p", positive=True)
    rng = {t: (1, T), o: (1, T)}
    inst = (
        "every ",
        Chain(2, "<=", T, "<=", max_T),
        ", generic probabilities, margins ",
        in_order(1, m[t]),
        " with ",
        Chain(m[t], ">=", 0),
    )

    def S(q):
        return B.softmax_entry(a, q, u, T)

    def tsum(body, lo=1):
        return sp.Sum(body, (t, lo, T))

    def cov(gg, hh):  # gg, hh: callables of the token
        return tsum(S(t) * gg(t) * hh(t)) - tsum(S(t) * gg(t)) * tsum(S(t) * hh(t))

    def score(q, opt):  # Assumption B: gamma_t = gamma_o - Delta for every t other than o
        return gx[opt] - Dl + Dl * sp.KroneckerDelta(q, opt)

    def logit(q):  # h_t = h_1 - (1 + m_t) for t >= 2: margins at least 1 (token 1 optimal)
        return hx[1] - (1 + m[q]) * (1 - sp.KroneckerDelta(q, 1))

    s_o, s_t, h_o, h_t = sx[o], sx[t], hx[o], hx[t]
    first = (
        "index notation, tokens numbered so that ",
        Chain(o, "=", 1),
        ", margins ",
        Chain(in_order(h_o, -h_t), "=", in_order(1, m[t])),
    )
    x_t, zz = matrix_symbol("x", "d", 1, "t"), matrix_symbol("z", "d", 1)
    d.define(
        Chain(Wmm, "in", RealSpace(symbol("d"), symbol("d"))),
        ("the Att-SVM solution (THEORY section 3); ", W, " the attention weights."),
    )
    d.define((x_t, zz), ("token ", t, " and the query of one input."))
    d.define(
        (gx[t], sx[t]),
        ("the score and the probability of token ", t, " of one input; with a first index ", i, ", of input ", i, "."),
    )
    d.define(Chain(h_t, "=", x_t.T * Wmm * zz), ("the logit of token ", t, " along ", Wmm, ", for one input."))
    d.define(Dl, ("the score gap of the equal-scores assumption (of input ", i, " when indexed)."))
    d.define(Chain(m[t], "=", in_order(h_o, -h_t, -1)), ("the slack of the margin of token ", t, "."))
    d.define(*glossary.kronecker())
    d.define(*glossary.covariance())
    d.define(*glossary.loss())
    d.define(*glossary.empirical_loss())
    d.premise(
        "hypotheses",
        Chain(gx[t], "=", in_order(gx[o], -Dl), where=Chain(in_order(h_o, -h_t), ">=", 1)),
        (
            "the equal-scores assumption of THEORY for every token ",
            Chain(t, "!=", o),
            ", the optimal token of the input, with gap ",
            Chain(Dl, ">", 0),
            "; ",
            Wmm,
            " is feasible, with ",
            h_t,
            " the logit of token ",
            t,
            " along ",
            Wmm,
            "; the loss derivative is negative.",
        ),
    )
    d.step(
        "covariance under equal scores",
        Chain(Cov(s, g, h), "=", Times(Dl, s_o, SumOver(Times(s_t, in_order(h_o, -h_t)), sp.Ne(t, o)))),
        "only the score of the optimal token differs, so the covariance is a weighted sum of logit gaps.",
        Symbolic(
            cov(lambda q: score(q, o), lambda q: hx[q]),
            Dl * S(o) * tsum(S(t) * (hx[o] - hx[t])),
            [T],
            method=sums.reducer(rng),
            what=(
                "index notation, with ",
                Chain(gx[t], "=", in_order(gx[o], -Dl, Times(Dl, sp.KroneckerDelta(t, o)))),
                " and the term ",
                Chain(t, "=", o),
                " of the sum zero",
            ),
        ),
        evidence=All(_cases("identity", max_T), inst),
    )
    d.step(
        "lower bound",
        Chain(Cov(s, g, h), ">=", Times(Dl, s_o, in_order(1, -s_o))),
        (
            "each gap is at least one and the other probabilities sum to ",
            in_order(1, -s_o),
            ".",
        ),
        SymbolicNonneg(
            cov(lambda q: score(q, 1), logit) - Dl * S(1) * (1 - S(1)),
            Dl * S(1) * tsum(S(t) * m[t], lo=2),
            [T],
            method=sums.reducer(rng),
            what=first,
        ),
        evidence=All(_cases("bound", max_T), inst),
    )
    d.step(
        "negative loss derivative reverses it",
        Chain(Times(EllP(uu), Cov(s, g, h)), "<=", Times(EllP(uu), Dl, s_o, in_order(1, -s_o))),
        ("multiply by the negative number ", Chain(EllP(uu), "=", -pp), "."),
        SymbolicNonneg(
            -pp * Dl * S(1) * (1 - S(1)) + pp * cov(lambda q: score(q, 1), logit),
            pp * Dl * S(1) * tsum(S(t) * m[t], lo=2),
            [T],
            method=sums.reducer(rng),
            what=first,
        ),
        evidence=All(_cases("sign", max_T), inst),
    )
    ui = symbol("u", "i")
    si_o, si = symbol("s", "i", "o"), matrix_symbol("s", "T", 1, "i")
    gi, hi = matrix_symbol("gamma", "T", 1, "i"), matrix_symbol("h", "T", 1, "i")
    d.step(
        "no stationary point",
        Chain(
            Inner(Grad(L, W), Wmm),
            "=",
            Mean(Times(EllP(ui), Cov(si, gi, hi)), i, n),
            "<=",
            Mean(Times(EllP(ui), symbol("Delta", "i"), si_o, in_order(1, -si_o)), i, n),
            "<",
            0,
            breaks=(2,),
        ),
        (
            "derivation grad-covariance with ",
            Chain(A, "=", Wmm),
            ", input by input; every term is strictly negative since the probabilities are positive.",
        ),
        All(_cases("strict", max_T), inst),
    )
