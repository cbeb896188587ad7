r"""``softmax-jacobian``: $\partial\mathbb S(a)/\partial a=\mathrm{diag}(s)-ss^\top$, its symmetry, null vector
$\mathbf 1$, and $g^\top Jg=\mathrm{Var}_s(g)\ge0$; checked exactly for every $T\le5$."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal, Nonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Diag, Partial, Softmax, SumOver, Var


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
            elif kind == "symmetric":
                yield f"T={T}", Equal(J, J.T)
            elif kind == "null":
                yield f"T={T}", Equal(J * sp.ones(T, 1), sp.zeros(T, 1), "cancel")
            elif kind == "shift":
                kap = symbol("kappa")
                yield f"T={T}", Equal(B.softmax_of_exps(e * kap), s, "cancel")
            elif kind == "var":
                quad = (g.T * J * g)[0]
                cert = sum(
                    (s[t] * s[u] * (g[t] - g[u]) ** 2 / 2 for t in range(T) for u in range(T) if t != u), sp.Integer(0)
                )
                yield f"T={T}", Nonneg(quad, cert, "cancel")

    return cases


@derivation(name="softmax-jacobian", title="The Jacobian of the softmax", claim="grad-closed-form", ci={"max_T": 4})
def softmax_jacobian(d: Derivation, max_T: int = 5) -> None:
    t, tau = sp.Symbol("t"), sp.Symbol("tau")
    a, s, g = (matrix_symbol(b, "T", 1) for b in ("a", "s", "g"))
    s_t, s_tau, a_t = symbol("s", "t"), symbol("s", "tau"), symbol("a", "t")
    e_t = symbol("expo", "t")
    rng = f"every T <= {max_T}"
    d.premise(
        "definition",
        Chain(s_t, "=", e_t / SumOver(symbol("expo", "tau"), tau), where=Chain(e_t, "=", sp.exp(a_t))),
        ("the softmax ", Chain(s, "=", Softmax(a)), " with the exponentials named."),
    )
    d.step(
        "Jacobian",
        Chain(Partial(s_t, symbol("a", "tau")), "=", s_t * (sp.KroneckerDelta(t, tau) - s_tau)),
        ("quotient rule; in matrix form the Jacobian is ", Diag(s) - s * s.T, "."),
        All(_cases(max_T, "jacobian"), rng),
    )
    d.step(
        "symmetric",
        Chain(Diag(s) - s * s.T, "=", (Diag(s) - s * s.T).T),
        "both terms are symmetric.",
        All(_cases(max_T, "symmetric"), rng),
    )
    d.step(
        "the all-ones vector is a null vector",
        Chain(SumOver(s_t * (sp.KroneckerDelta(t, tau) - s_tau), t), "=", 0),
        "the probabilities sum to one (so shifting all logits leaves the softmax unchanged).",
        All(_cases(max_T, "null"), rng),
    )
    d.step(
        "shift invariance",
        Chain(symbol("kappa") * e_t / SumOver(symbol("kappa") * symbol("expo", "tau"), tau), "=", s_t),
        (
            "adding c to every logit multiplies every exponential by ",
            Chain(symbol("kappa"), "=", sp.exp(sp.Symbol("c"))),
            ".",
        ),
        All(_cases(max_T, "shift"), rng),
    )
    d.step(
        "positive semidefinite",
        Chain(
            g.T * (Diag(s) - s * s.T) * g,
            "=",
            Var(s, g),
            "=",
            SumOver(s_t * s_tau * (symbol("g", "t") - symbol("g", "tau")) ** 2, sp.Lt(t, tau)),
            ">=",
            0,
        ),
        "expand the square and use that the probabilities sum to one.",
        All(_cases(max_T, "var"), rng),
    )
