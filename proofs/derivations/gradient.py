r"""``gradient``: $\nabla_W\mathcal L$ from the definition, equal to the closed form of ``grad-closed-form``.

The main step differentiates the explicit loss $\ell(\gamma^\top\mathbb S(XWz))$ in every entry $w_{jk}$
of $W$, for every $T\le4$, $d\le3$ (option ``max_T``, ``max_d``), and checks the result against
$\ell'(u)[X^\top(\mathrm{diag}(s)-ss^\top)\gamma z^\top]_{jk}$ exactly (exponentials named
$\epsilon_t=e^{a_t}$, then ``cancel``). The loss $\ell$ is an undefined function, so this holds for
every differentiable loss.
"""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Diag, Elem, Ell, EllP, Grad, Mean, Partial, Softmax, SumOver, Text


def _entry_cases(max_T: int, max_d: int):
    def cases():
        for T in range(1, max_T + 1):
            for d in range(1, max_d + 1):
                W = B.weights(d)
                inp = B.make_input(T, d, W)
                L = B.loss_explicit([inp])
                lp = symbol("lp")
                auto = B.name_loss_derivatives(B.exps_to_symbols(B.diff_entries(L, W), inp.a, inp.e), lp)
                closed = B.grad_closed_form([inp], [lp])
                yield f"T={T}, d={d}", Equal(auto, closed, "cancel")

    return cases


def _average_case():
    return All(lambda: [("n=2, T=2, d=2", _average_check())], "n=2, T=2, d=2")


def _average_check():
    W = B.weights(2)
    inputs = [B.make_input(2, 2, W, i) for i in (1, 2)]
    L = B.loss_explicit(inputs)
    lps = [symbol("lp", i) for i in (1, 2)]
    auto = B.diff_entries(L, W)
    for inp in inputs:
        auto = B.exps_to_symbols(auto, inp.a, inp.e)

    # ell'(u_i): the two inputs have different arguments; map each by the input whose exponentials it contains
    def rep(u):
        return lps[0] if inputs[0].e[0] in u.free_symbols else lps[1]

    auto = auto.applyfunc(lambda x: x.replace(EllP, rep))
    return Equal(auto, B.grad_closed_form(inputs, lps), "cancel", what="n=2, T=2, d=2")


def _logit_cases(max_T: int, max_d: int):
    def cases():
        for T in range(1, max_T + 1):
            for d in range(1, max_d + 1):
                W = B.weights(d)
                inp = B.make_input(T, d, W)
                for t in range(T):
                    rhs = inp.X[t, :].T * inp.z.T
                    yield f"T={T}, d={d}, t={t + 1}", Equal(B.diff_entries(inp.a[t], W), rhs)

    return cases


def _jacobian_cases(max_T: int):
    def cases():
        for T in range(1, max_T + 1):
            a = sp.Matrix(T, 1, lambda t, _: symbol("a", t + 1))
            e = sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1))
            J = B.exps_to_symbols(B.softmax_exp(a).jacobian(a), a, e)
            yield f"T={T}", Equal(J, B.jacobian_closed(B.softmax_of_exps(e)), "cancel")

    return cases


def _pairwise_cases(max_T: int):
    def cases():
        for T in range(1, max_T + 1):
            s = B.softmax_of_exps(sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1)))
            g = sp.Matrix(T, 1, lambda t, _: symbol("gamma", t + 1))
            yield f"T={T}", Equal(B.jacobian_closed(s) * g, B.residual_pairwise(s, g), "cancel")

    return cases


@derivation(
    name="gradient",
    title="The gradient of the attention loss from its definition",
    claim="grad-closed-form",
    ci={"max_T": 3, "max_d": 2},
)
def gradient(d: Derivation, max_T: int = 4, max_d: int = 3) -> None:
    i, t, tau, j, k = (sp.Symbol(c) for c in ("i", "t", "tau", "j", "k"))
    n = symbol("n")
    X = matrix_symbol("X", "T", "d", "i")
    W = matrix_symbol("W", "d", "d")
    z = matrix_symbol("z", "d", 1, "i")
    g = matrix_symbol("gamma", "T", 1, "i")
    s = matrix_symbol("s", "T", 1, "i")
    a = matrix_symbol("a", "T", 1, "i")
    L = symbol("L")
    a_t, w_jk, s_t, s_tau = symbol("a", "t"), symbol("w", "j", "k"), symbol("s", "t"), symbol("s", "tau")
    d.summary = (
        "The loss is an average of per-input terms, so it suffices to differentiate one input; the loss ",
        Ell(symbol("u")),
        " is an arbitrary differentiable function, so the result holds for every loss of Assumption A.",
    )
    d.premise(
        "definitions",
        Chain(L, "=", Mean(Ell(g.T * s), i, n), where=Chain(s, "=", Softmax(a), "=", Softmax(X * W * z))),
        "THEORY section 1: logits, softmax, scores, loss.",
    )
    d.step(
        "logits are linear in W",
        Chain(Partial(a_t, w_jk), "=", symbol("x", "t", "j") * symbol("z", "k")),
        ("since ", Chain(a_t, "=", SumOver(symbol("x", "t", "j") * w_jk * symbol("z", "k"), Text("j,k"))), "."),
        All(_logit_cases(max_T, max_d), f"every entry, every T <= {max_T}, d <= {max_d}"),
    )
    d.step(
        "softmax Jacobian",
        Chain(Partial(s_t, symbol("a", "tau")), "=", s_t * (sp.KroneckerDelta(t, tau) - s_tau)),
        "quotient rule on exp(a_t) / sum exp(a_tau); the exponentials are named epsilon_t > 0.",
        All(_jacobian_cases(max_T), f"the full T x T Jacobian for every T <= {max_T}"),
    )
    d.step(
        "chain rule, entrywise, from the explicit loss",
        Chain(
            Partial(Ell(g.T * Softmax(X * W * z)), w_jk),
            "=",
            EllP(g.T * s) * (X.T * (Diag(s) - s * s.T) * g * z.T),
            where=Text(f"entry (j,k), all T <= {max_T}, d <= {max_d}"),
        ),
        "sympy differentiates the explicit loss in each matrix entry w_jk; the result is compared with the closed "
        "form entry by entry.",
        All(_entry_cases(max_T, max_d), f"all d x d entries for every T <= {max_T}, d <= {max_d}"),
    )
    d.step(
        "average over the inputs",
        Chain(Grad(L, W), "=", Mean(EllP(g.T * s) * X.T * (Diag(s) - s * s.T) * g * z.T, i, n)),
        "linearity of the derivative; checked on two inputs with their own exponentials and loss derivatives.",
        _average_case(),
    )
    r_t = symbol("r", "t")
    d.step(
        "stable residual",
        Chain(
            r_t,
            ":=",
            s_t * SumOver(s_tau * (symbol("gamma", "t") - symbol("gamma", "tau")), tau),
            "=",
            Elem((Diag(s) - s * s.T) * g, t),
        ),
        "because the probabilities sum to one; this pairwise form avoids the cancellation of THEORY section 5.",
        All(_pairwise_cases(max_T), f"every T <= {max_T}"),
    )
