r"""``smoothness-bound``: the pieces of $\|\nabla^2\mathcal L(W)\|_2\le L_W$ (THEORY §3, reconstructed).

From the Hessian quadratic form (derivation ``hessian``), with $|\ell''|\le M_0$, $|\ell'|\le M_1$,
$G=\|v\|\|X_i\|$ bounding $|\gamma_{it}|$ and $H=\|X_i\|\|A\|_F\|z_i\|$ bounding $\|h_i\|$:
$|\nabla^2\mathcal L[A,A]|\le\frac1n\sum_i(M_0G^2H^2+2M_1GH^2)\le L_W\|A\|_F^2$ — the constant 3 of
THEORY holds with room (2 suffices)."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Nonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Cov, EllP, EllPP, Hess, Norm, SumOver, Var


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


def _var_cases(max_T: int):
    def cases():
        for T in range(1, max_T + 1):
            s = B.softmax_of_exps(_vec("expo", T))
            g = _vec("g", T)
            second = sum((s[t] * g[t] ** 2 for t in range(T)), sp.Integer(0))
            yield f"T={T}", Nonneg(second - B.var(s, g), (s.T * g)[0] ** 2, "cancel")
            # max bound: g_t^2 = G^2 - m_t with m_t >= 0
            G, m = symbol("Gb"), _vec("m", T)
            sub = {g[t] ** 2: G**2 - m[t] for t in range(T)}
            yield f"T={T} (max)", Nonneg(sp.expand(G**2 - second).xreplace(sub), None, "cancel")

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
    t = sp.Symbol("t")
    s, g, h = (matrix_symbol(b, "T", 1) for b in ("s", "gamma", "h"))
    X, A, z, v = (
        matrix_symbol("X", "T", "d"),
        matrix_symbol("A", "d", "d"),
        matrix_symbol("z", "d", 1),
        matrix_symbol("v", "d", 1),
    )
    u, M0, M1 = symbol("u"), symbol("M0"), symbol("M1")
    G, H = symbol("Gb"), symbol("Hb")
    d.premise(
        "Assumption A and the Hessian",
        Chain(sp.Abs(EllPP(u)), "<=", M0, where=Chain(sp.Abs(EllP(u)), "<=", M1)),
        "THEORY section 1 (logistic: M_0 = 1/4, M_1 = 1); the Hessian quadratic form of derivation hessian.",
    )
    d.step(
        "Cauchy-Schwarz for the covariance",
        Chain(Cov(s, g, h) ** 2, "<=", Var(s, g) * Var(s, h)),
        "Lagrange's identity: the difference is a weighted sum of squares of the centred values.",
        All(_cs_cases(max_T), f"every 2 <= T <= {max_T}"),
    )
    d.step(
        "variance below the largest square",
        Chain(
            Var(s, matrix_symbol("g", "T", 1)),
            "<=",
            SumOver(symbol("s", "t") * symbol("g", "t") ** 2, t),
            "<=",
            G**2,
            where=Chain(symbol("g", "t") ** 2, "<=", G**2),
        ),
        "the difference is a square; then the probabilities sum to one.",
        All(_var_cases(max_T), f"every T <= {max_T}"),
    )
    d.step(
        "scores and directional logits are bounded",
        Chain(
            (v.T * matrix_symbol("x", "d", 1)) ** 2, "<=", Norm(v, "") ** 2 * Norm(matrix_symbol("x", "d", 1), "") ** 2
        ),
        (
            "Cauchy-Schwarz (Lagrange's identity); with the spectral norm this gives ",
            Chain(sp.Abs(symbol("gamma", "t")), "<=", G),
            " and ",
            Chain(Norm(h, ""), "<=", H),
            ".",
        ),
        All(_cs_vec_cases(), "d = 2, 3"),
    )
    d.premise(
        "the definition of the bounds",
        Chain(G, "=", Norm(v, "") * Norm(X, "2"), where=Chain(H, "=", Norm(X, "2") * Norm(A, "F") * Norm(z, ""))),
        "spectral norm: the norm of X A z is at most the norm of X times the Frobenius norm of A times the norm of z; "
        "the third co-moment is at most max_t of the centred score (at most 2G) times Var(h).",
    )
    combo = M0 * G**2 * H**2 + 2 * M1 * G * H**2
    bound = M0 * G**2 * H**2 + 3 * M1 * G * H**2
    d.step(
        "combination",
        Chain(sp.Abs(Hess(symbol("L"), A)), "<=", combo, "<=", bound),
        "each input contributes at most M_0 G^2 H^2 + 2 M_1 G H^2; the bound of THEORY has 3 M_1 in place of 2 M_1.",
        Nonneg(bound - combo, M1 * G * H**2),
    )
