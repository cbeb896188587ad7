r"""``kq-gradient``: chain rule for $W=KQ^\top$: $\nabla_K=\nabla\mathcal L(W)Q$, $\nabla_Q=\nabla\mathcal L(W)^\top K$.

Checked by differentiating the explicit loss $\ell(\gamma^\top\mathbb S(XKQ^\top z))$ in every entry of $K$ and
$Q$ and comparing with the closed form of ``grad-closed-form`` multiplied by the other factor."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Grad, Partial, SumOver

CASES = ((2, 2, 1), (2, 2, 2), (3, 2, 1), (2, 3, 1))


def _cases(which: str, shapes=CASES):
    def cases():
        for T, dd, m in shapes:
            K, Q = matrix("k", dd, m), matrix("q", dd, m)
            W = K * Q.T
            inp = B.make_input(T, dd, W)
            L = B.loss_explicit([inp])
            lp = symbol("lp")
            G = B.grad_closed_form([inp], [lp])
            F = K if which == "K" else Q
            auto = B.name_loss_derivatives(B.exps_to_symbols(B.diff_entries(L, F), inp.a, inp.e), lp)
            closed = G * Q if which == "K" else G.T * K
            yield f"T={T}, d={dd}, m={m}", Equal(auto, closed, "cancel")

    return cases


def _entry_cases():
    def cases():
        for dd, m in ((2, 1), (2, 2), (3, 2)):
            K, Q = matrix("k", dd, m), matrix("q", dd, m)
            W = K * Q.T
            for a in range(dd):
                for b in range(m):
                    lhs = W.diff(K[a, b])
                    rhs = sp.zeros(dd, dd)
                    rhs[a, :] = Q[:, b].T
                    yield f"d={dd}, m={m}, K[{a + 1},{b + 1}]", Equal(lhs, rhs)

    return cases


@derivation(
    name="kq-gradient", title="Gradients of the (K,Q) parametrisation", claim="grad-closed-form", ci={"full": False}
)
def kq_gradient(d: Derivation, full: bool = True) -> None:
    shapes = CASES if full else CASES[:2]
    j, k, a, b = (sp.Symbol(c) for c in "jkab")
    K, Q, W = matrix_symbol("K", "d", "m"), matrix_symbol("Q", "d", "m"), matrix_symbol("W", "d", "d")
    L = symbol("L")
    d.premise("parametrisation", Chain(W, "=", K * Q.T), "THEORY section 1, (K,Q) parametrisation.")
    d.step(
        "entries of W",
        Chain(
            Partial(symbol("w", "j", "k"), symbol("k", "a", "b")), "=", sp.KroneckerDelta(j, a) * symbol("q", "k", "b")
        ),
        ("since ", Chain(symbol("w", "j", "k"), "=", SumOver(symbol("k", "j", "b") * symbol("q", "k", "b"), b)), "."),
        All(_entry_cases(), "every entry for (d,m) in (2,1), (2,2), (3,2)"),
    )
    d.step(
        "chain rule for K",
        Chain(Grad(L, K), "=", Grad(L, W) * Q),
        "sum the chain rule over the entries of W; checked on the explicit loss.",
        All(_cases("K", shapes), "every entry for (T,d,m) in " + ", ".join(map(str, shapes))),
    )
    d.step(
        "chain rule for Q",
        Chain(
            Grad(L, Q),
            "=",
            matrix_symbol("G", "d", "d").T * K,
            where=Chain(matrix_symbol("G", "d", "d"), "=", Grad(L, W)),
        ),
        "the same computation with the roles of K and Q exchanged.",
        All(_cases("Q", shapes), "every entry for (T,d,m) in " + ", ".join(map(str, shapes))),
    )
