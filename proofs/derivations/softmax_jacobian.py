r"""``softmax-jacobian``: $\partial s_t/\partial a_\tau=s_t(\delta_{t\tau}-s_\tau)$, i.e. $J=\mathrm{diag}(s)-ss^\top$,
its null vector $\mathbf 1$, shift invariance, and $g^\top Jg=\mathrm{Var}_s(g)\ge0$.

Every step is proved for general $T$ in index notation ($\sum_{u=1}^T$ with a symbolic bound, Kronecker deltas;
:func:`attsvm.symbolic.sums.reduce`), and re-checked exactly on explicit vectors for every $T\le5$
(``max_T``) as second evidence."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Nonneg, Symbolic, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Diag, Partial, RealSpace, Softmax, Times, Var, in_order


def _vecs(T: int):
    a = sp.Matrix(T, 1, lambda t, _: symbol("a", t + 1))
    e = sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1))
    g = sp.Matrix(T, 1, lambda t, _: symbol("g", t + 1))
    return a, e, g


def _cases(max_T: int, kind: str):
    def cases():
        for T in range(1, max_T + 1):
            a, e, g = _vecs(T)
            s = B.softmax_of_exps(e)
            J = B.jacobian_closed(s)
            if kind == "jacobian":
                auto = B.exps_to_symbols(B.softmax_exp(a).jacobian(a), a, e)
                yield f"T={T}", Equal(auto, J, "cancel")
            elif kind == "null":
                yield f"T={T}", Equal(sp.ones(1, T) * J, sp.zeros(1, T), "cancel")
            elif kind == "shift":
                kap = symbol("kappa")
                yield f"T={T}", Equal(B.softmax_of_exps(e * kap), s, "cancel")
            elif kind == "variance":
                yield f"T={T}", Equal((g.T * J * g)[0], B.var(s, g), "cancel")
            elif kind == "psd":
                cert = sum(
                    (s[t] * s[u] * (g[t] - g[u]) ** 2 / 2 for t in range(T) for u in range(T) if t != u), sp.Integer(0)
                )
                yield f"T={T}", Nonneg(B.var(s, g), cert, "cancel")

    return cases


@derivation(name="softmax-jacobian", title="The Jacobian of the softmax", claim="grad-closed-form", ci={"max_T": 4})
def softmax_jacobian(d: Derivation, max_T: int = 5) -> None:
    T = symbol("T")
    t, tau, u = index("t"), index("tau"), index("u")
    a, g, sx = indexed("a"), indexed("g"), indexed("s")
    c = sp.Symbol("c", real=True)
    av, sv, gv = (matrix_symbol(b, "T", 1) for b in ("a", "s", "g"))
    ones = matrix_symbol("ones", "T", 1)
    J = in_order(Diag(sv), -sv * sv.T)

    def S(k):  # the softmax entry in index notation: what every check differentiates and sums
        return B.softmax_entry(a, k, u, T)

    def Jac(k, m):
        return S(k) * (sp.KroneckerDelta(k, m) - S(m))

    def over_T(body, *idx):
        for i in idx:
            body = sp.Sum(body, (i, 1, T))
        return body

    rng = {t: (1, T), tau: (1, T)}
    general = ("index notation, for all ", Chain(1, "<=", sp.Tuple(t, tau), "<=", T))
    inst = ("every ", Chain(T, "<=", max_T))
    var_index = over_T(S(t) * g[t] ** 2, t) - over_T(S(t) * g[t], t) ** 2
    d.summary = (
        "Every identity is proved for a general number of tokens ",
        T,
        " in index notation, with the probabilities written out as ",
        Chain(sx[t], "=", S(t)),
        ".",
    )
    d.define(*glossary.softmax())
    d.define(*glossary.kronecker())
    d.define(*glossary.ones())
    d.define(Chain(gv, "in", RealSpace(T)), ("a vector of values, with entries ", g[t], "."))
    d.define(*glossary.variance(sv, gv))
    d.premise(
        "definition",
        Chain(sx[t], "=", S(t), where=Chain(1, "<=", t, "<=", T)),
        ("the softmax ", Chain(sv, "=", Softmax(av)), " of a vector of logits ", Chain(av, "in", RealSpace(T)), "."),
        label="definition",
    )
    d.step(
        "Jacobian",
        Chain(Partial(sx[t], a[tau]), "=", sx[t] * in_order(sp.KroneckerDelta(t, tau), -sx[tau])),
        ("quotient rule; in matrix form the Jacobian is ", Chain(symbol("Jac"), "=", J), "."),
        Symbolic(sp.diff(S(t), a[tau]), Jac(t, tau), [T], method=sums.reducer(rng), what=general),
        evidence=All(_cases(max_T, "jacobian"), ("the full Jacobian matrix for ",) + inst),
        label="jacobian",
    )
    d.step(
        "the all-ones vector is a null vector",
        Chain(sp.Sum(sx[t] * in_order(sp.KroneckerDelta(t, tau), -sx[tau]), (t, 1, T)), "=", 0),
        (
            "the probabilities sum to one, ",
            Chain(sp.Sum(sx[t], (t, 1, T)), "=", 1),
            "; so ",
            Chain((ones.T * J), "=", 0),
            ", and since the Jacobian is symmetric, ",
            Chain(J * ones, "=", 0),
            ".",
        ),
        Symbolic(over_T(Jac(t, tau), t), 0, [T], method=sums.reducer(rng), what=general),
        evidence=All(_cases(max_T, "null"), inst),
        label="null-vector",
    )
    d.step(
        "shift invariance",
        Chain(sp.exp(in_order(a[t], c)) / sp.Sum(sp.exp(in_order(a[u], c)), (u, 1, T)), "=", sx[t]),
        (
            "adding the same number ",
            c,
            " to every logit multiplies the numerator and every term of the denominator by ",
            sp.exp(c),
            "; on the instances ",
            Chain(symbol("kappa"), "=", sp.exp(c)),
            ".",
        ),
        Symbolic(
            sp.exp(a[t] + c) / over_T(sp.exp(a[u] + c), u),
            S(t),
            [T],
            method=sums.reducer(rng),
            what=("index notation, for all ", Chain(1, "<=", t, "<=", T)),
        ),
        evidence=All(_cases(max_T, "shift"), inst),
        label="shift",
    )
    quad = sp.Sum(Times(g[t], sx[t], in_order(sp.KroneckerDelta(t, tau), -sx[tau]), g[tau]), (tau, 1, T), (t, 1, T))
    moments = in_order(sp.Sum(Times(sx[t], g[t] ** 2), (t, 1, T)), -(sp.Sum(Times(sx[t], g[t]), (t, 1, T)) ** 2))
    d.step(
        "the quadratic form is a variance",
        Chain(gv.T * J * gv, "=", quad, "=", moments, "=", Var(sv, gv), breaks=(2,)),
        (
            "the factor ",
            sp.KroneckerDelta(t, tau),
            " keeps the diagonal; the result is the variance of the values ",
            gv,
            " under the probabilities ",
            sv,
            ".",
        ),
        Symbolic(over_T(g[t] * Jac(t, tau) * g[tau], t, tau), var_index, [T], method=sums.reducer(rng), what=general),
        evidence=All(_cases(max_T, "variance"), inst),
        label="variance",
    )
    cert = sp.Rational(1, 2) * over_T(S(t) * S(tau) * (g[t] - g[tau]) ** 2, t, tau)
    d.step(
        "symmetric positive semidefinite",
        Chain(
            Var(sv, gv),
            "=",
            sp.Rational(1, 2) * sp.Sum(sp.Sum(sx[t] * sx[tau] * in_order(g[t], -g[tau]) ** 2, (tau, 1, T)), (t, 1, T)),
            ">=",
            0,
        ),
        (
            "expand the square and use ",
            Chain(sp.Sum(sx[t], (t, 1, T)), "=", 1),
            ". So the Jacobian (symmetric, as both of its terms are) is positive semidefinite, with null vector ",
            ones,
            " by step {step:null-vector}.",
        ),
        SymbolicNonneg(var_index, cert, [T], method=sums.reducer(rng), what=general),
        evidence=All(_cases(max_T, "psd"), inst),
        label="psd",
    )
