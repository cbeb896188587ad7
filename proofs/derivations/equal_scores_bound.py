r"""``equal-scores-bound``: under Assumption B the covariance along $W^{mm}$ is bounded below
(claim ``no-stationary-equal-scores``).

With $\gamma_{it}=\gamma_{i,\mathrm{opt}}-\Delta_i$ for $t\ne\mathrm{opt}_i$ and $h_{it}=x_{it}^\top W^{mm}z_i$,
$h_{i,\mathrm{opt}}-h_{it}\ge1$: $\mathrm{Cov}_{s_i}(\gamma_i,h_i)\ge\Delta_is_{i,\mathrm{opt}}(1-s_{i,\mathrm{opt}})$,
hence
$\langle\nabla\mathcal L(W),W^{mm}\rangle\le\frac1n\sum_i\ell'_i\Delta_is_{i,\mathrm{opt}}(1-s_{i,\mathrm{opt}})<0$."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal, Nonneg, Predicate
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, EllP, Grad, Inner, Mean, SumOver


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
    i, t = sp.Symbol("i"), sp.Symbol("t")
    n, L, Dl = symbol("n"), symbol("L"), symbol("Delta")
    o = sp.Symbol("o")
    W, Wmm = matrix_symbol("W", "d", "d"), matrix_symbol("Wmm", "d", "d")
    s, g, h = (matrix_symbol(b, "T", 1) for b in ("s", "gamma", "h"))
    s_o, s_t, h_o, h_t = symbol("s", "o"), symbol("s", "t"), symbol("h", "o"), symbol("h", "t")
    u = symbol("u")
    rng = f"every 2 <= T <= {max_T}, generic probabilities, margins 1 + m_t with m_t >= 0"
    d.premise(
        "hypotheses",
        Chain(symbol("gamma", "t"), "=", symbol("gamma", "o") - Dl, where=Chain(h_o - h_t, ">=", 1)),
        "Assumption B for every t != o = opt_i (gap Delta > 0); W^mm is feasible, with h_t the logit of token t along "
        "W^mm; the loss derivative is negative.",
    )
    d.step(
        "covariance under Assumption B",
        Chain(Cov(s, g, h), "=", Dl * s_o * SumOver(s_t * (h_o - h_t), sp.Ne(t, o))),
        "only the optimal token's score differs, so the covariance is a weighted sum of logit gaps.",
        All(_cases("identity", max_T), rng),
    )
    d.step(
        "lower bound",
        Chain(Cov(s, g, h), ">=", Dl * s_o * (1 - s_o)),
        "each gap is at least 1 and the other probabilities sum to 1 - s_o.",
        All(_cases("bound", max_T), rng),
    )
    d.step(
        "negative loss derivative reverses it",
        Chain(EllP(u) * Cov(s, g, h), "<=", EllP(u) * Dl * s_o * (1 - s_o)),
        "multiply by the negative number l'(u) = -p.",
        All(_cases("sign", max_T), rng),
    )
    d.step(
        "no stationary point",
        Chain(
            Inner(Grad(L, W), Wmm),
            "=",
            Mean(EllP(u) * Cov(s, g, h), i, n),
            "<=",
            Mean(EllP(u) * Dl * s_o * (1 - s_o), i, n),
            "<",
            0,
        ),
        "derivation grad-covariance with A = W^mm, summed over the inputs; every term is strictly negative since the "
        "probabilities are positive.",
        All(_cases("strict", max_T), rng),
    )
