r"""``overparam-certificate``: $d\ge n$ and independent queries give $W'$ with $W'z_i=Y_iv$, so
$\langle\nabla\mathcal L(W),W'\rangle=\frac1n\sum_i\ell'_i\mathrm{Var}_{s_i}(\gamma_i)$ (claim
``no-stationary-overparam``), with $\tilde z_i=Z(Z^\top Z)^{-1}e_i$ and $W'=v(\sum_iY_i\tilde z_i)^\top$."""

from __future__ import annotations

import itertools

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal, Predicate
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, EllP, Grad, Inner, Mean, SumOver, Var

SHAPES = ((2, 2), (2, 3), (3, 3))  # (n, d)


def _queries(n: int, d: int):
    Z = sp.Matrix(d, n, lambda k, i: symbol("z", i + 1, k + 1))  # columns are queries
    Ginv_num = (Z.T * Z).adjugate()
    det = (Z.T * Z).det()
    return Z, Ginv_num, det


def _cases(kind: str, shapes=SHAPES):
    def cases():
        for n, d in shapes:
            Z, adj, det = _queries(n, d)
            tag = f"n={n}, d={d}"
            if kind == "dual-basis":
                # Z^T (Z adj(Z^T Z)) = det(Z^T Z) I: the dual basis up to the common factor 1/det
                yield tag, Equal(Z.T * Z * adj, det * sp.eye(n))
            elif kind == "direction" and n * d <= 6:
                v = sp.Matrix(d, 1, lambda k, _: symbol("v", k + 1))
                Zt = Z * adj / det
                for Ys in itertools.product((1, -1), repeat=n):
                    Wp = v * sum((Ys[i] * Zt[:, i] for i in range(n)), sp.zeros(d, 1)).T
                    for i in range(n):
                        yield f"{tag}, Y={Ys}, i={i + 1}", Equal(Wp * Z[:, i], Ys[i] * v, "cancel")

    return cases


def _var_cases(max_T: int):
    def cases():
        for T in range(2, max_T + 1):
            s = B.softmax_of_exps(sp.Matrix(T, 1, lambda t, _: symbol("expo", t + 1)))
            g = sp.Matrix(T, 1, lambda t, _: symbol("gamma", t + 1))
            pair = sum((s[t] * s[u] * (g[t] - g[u]) ** 2 for t in range(T) for u in range(t + 1, T)), sp.Integer(0))
            yield f"T={T}", Equal(B.cov(s, g, g), pair, "cancel")
            q = sp.Symbol("q", real=True, nonzero=True)  # two scores differ by q != 0
            strict = sp.together(pair.subs(g[1], g[0] + q))
            yield f"T={T} (strict)", Predicate(lambda e=strict: bool(e.is_positive), "the variance is positive")

    return cases


def _conclusion_cases(patterns=None):
    def cases():
        n, d, T = 2, 2, 2
        Z, adj, det = _queries(n, d)
        v = sp.Matrix(d, 1, lambda k, _: symbol("v", k + 1))
        W = B.weights(d)
        Zt = Z * adj  # the dual basis times det(Z^T Z) > 0 (a positive factor)
        for Ys in patterns or itertools.product((1, -1), repeat=n):
            inputs = []
            for i in range(n):
                inp = B.make_input(T, d, W, i + 1, v)
                Z_i = sp.Matrix(d, 1, lambda k, _, i=i: Z[k, i])
                inputs.append(B.Input(inp.X, Z_i, inp.X * v * Ys[i], inp.Y, inp.X * W * Z_i, inp.e, inp.s))
            Wp = v * sum((Ys[i] * Zt[:, i] for i in range(n)), sp.zeros(d, 1)).T
            lps = [symbol("lp", i + 1) for i in range(n)]
            lhs = B.inner(B.grad_closed_form(inputs, lps), Wp)
            rhs = det * sum((lp * B.var(inp.s, inp.gamma) for lp, inp in zip(lps, inputs)), sp.Integer(0)) / n
            yield f"n=2, d=2, T=2, Y={Ys}", Equal(lhs, rhs, "cancel")

    return cases


@derivation(
    name="overparam-certificate",
    title="A descent direction in the overparameterised regime",
    claim="no-stationary-overparam",
    ci={"full": False, "max_T": 3},
)
def overparam_certificate(d: Derivation, max_T: int = 4, full: bool = True) -> None:
    shapes = SHAPES if full else SHAPES[:2]
    patterns = None if full else [(1, -1)]
    i, j, t, tau = (sp.Symbol(c) for c in ("i", "j", "t", "tau"))
    n, L = symbol("n"), symbol("L")
    Z = matrix_symbol("Z", "d", "n")
    W, Wp = matrix_symbol("W", "d", "d"), matrix_symbol("Wp", "d", "d")
    v, zt_i, z_i, z_j = (
        matrix_symbol("v", "d", 1),
        matrix_symbol("ztil", "d", 1, "i"),
        matrix_symbol("z", "d", 1, "i"),
        matrix_symbol("z", "d", 1, "j"),
    )
    x_it = matrix_symbol("x", "d", 1, "i", "t")
    s, g = matrix_symbol("s", "T", 1, "i"), matrix_symbol("gamma", "T", 1, "i")
    u = symbol("u", "i")
    d.premise(
        "construction",
        Chain(
            Wp,
            "=",
            v * SumOver(symbol("Y", "i") * zt_i, i).T,
            where=Chain(zt_i, "=", Z * (Z.T * Z).I * matrix_symbol("unit", "n", 1, "i")),
        ),
        "d >= n and independent queries, so the Gram matrix of the queries is invertible; e_i is the i-th unit vector.",
    )
    d.step(
        "dual basis",
        Chain(z_j.T * zt_i, "=", sp.KroneckerDelta(i, j)),
        "multiply by the Gram matrix (checked via its adjugate, exactly).",
        All(_cases("dual-basis", shapes), "(n, d) in " + ", ".join(map(str, shapes))),
    )
    d.step(
        "the direction maps each query to its signed head",
        Chain(Wp * z_i, "=", symbol("Y", "i") * v, where=Chain(x_it.T * Wp * z_i, "=", symbol("gamma", "i", "t"))),
        "by the dual basis and Y_i^2 = 1; so the logits along W' are the scores.",
        All(_cases("direction"), "every sign pattern of the labels, (n, d) in (2, 2), (2, 3)"),
    )
    d.step(
        "variance identity",
        Chain(
            Var(s, g),
            "=",
            SumOver(
                symbol("s", "i", "t")
                * symbol("s", "i", "tau")
                * (symbol("gamma", "i", "t") - symbol("gamma", "i", "tau")) ** 2,
                sp.Lt(t, tau),
            ),
            ">",
            0,
        ),
        "positive as soon as two scores of the input differ.",
        All(_var_cases(max_T), f"every 2 <= T <= {max_T}"),
    )
    d.step(
        "conclusion",
        Chain(Inner(Grad(L, W), Wp), "=", Mean(EllP(u) * Var(s, g), i, n), "<", 0),
        "derivation grad-covariance with A = W' (the covariance of the scores with themselves); l' < 0. Checked on the "
        "closed-form gradient (every label pattern), with W' scaled by the positive factor det(Z^T Z).",
        All(
            _conclusion_cases(patterns),
            "n = 2, d = 2, T = 2, "
            + ("every label pattern" if full else "labels (1, -1)")
            + ", generic W, tokens, queries, head",
        ),
    )
