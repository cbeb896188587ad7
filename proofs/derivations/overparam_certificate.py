r"""``overparam-certificate``: $d\ge n$ and independent queries give $W'$ with $W'z_i=Y_iv$, so
$\langle\nabla\mathcal L(W),W'\rangle=\frac1n\sum_i\ell'_i\mathrm{Var}_{s_i}(\gamma_i)$ (claim
``no-stationary-overparam``), with $\tilde z_i=Z(Z^\top Z)^{-1}e_i$ and $W'=v(\sum_iY_i\tilde z_i)^\top$."""

from __future__ import annotations

import itertools

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import glossary, sums
from attsvm.symbolic.checks import All, Equal, Predicate, Symbolic, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, EllP, Grad, Inner, Mean, SumOver, Var

SHAPES = ((2, 2), (2, 3), (3, 3))  # (n, d)

# ---------------------------------------------------------------------- general sizes
nG, dG, TG = symbol("n"), symbol("d"), symbol("T")
Zg = sp.MatrixSymbol("Z", dG, nG)  # queries as columns
Zt_g = Zg * (Zg.T * Zg).I  # the dual basis (columns z~_i); Z^T Z is invertible by hypothesis
Yg, vg = sp.MatrixSymbol("Y", nG, 1), sp.MatrixSymbol("v", dG, 1)
tt, uu, uu2 = (index(c) for c in ("t", "tau", "u"))
expo = indexed("expo")  # e^{a_t} > 0
gam = indexed("gamma")
E = sp.Symbol("E", positive=True)  # the softmax normaliser, a sum of positive exponentials


def _dual_basis_check() -> Symbolic:
    lhs = sp.MatMul(Zg.T, Zg, (Zg.T * Zg).I, evaluate=False)  # unevaluated: sympy would cancel it on construction
    return Symbolic(lhs, sp.Identity(nG), [nG, dG], what="matrix calculus on matrices of symbolic shape")


def _direction_check() -> Symbolic:
    Wp = sp.MatMul(vg, (Zt_g * Yg).T, evaluate=False)  # W' = v (sum_i Y_i z~_i)^T
    lhs = sp.MatMul(Wp, Zg, evaluate=False)
    return Symbolic(lhs, vg * Yg.T, [nG, dG], what=("matrix calculus; column ", sp.Symbol("i"), " is the claim"))


def _variance_check() -> SymbolicNonneg:
    s = lambda k: expo[k] / E  # noqa: E731
    var = sp.Sum(s(tt) * gam[tt] ** 2, (tt, 1, TG)) - sp.Sum(s(tt) * gam[tt], (tt, 1, TG)) ** 2
    cert = sp.Sum(s(tt) * s(uu) * (gam[tt] - gam[uu]) ** 2, (tt, 1, TG), (uu, 1, TG)) / 2

    def method(e):  # the normaliser as the sum of the exponentials
        return sums.reduce(e.subs(E, sp.Sum(expo[uu2], (uu2, 1, TG))))

    return SymbolicNonneg(
        var,
        cert,
        [TG],
        method=method,
        what=("index notation, with the softmax written through the exponentials ", expo[tt]),
    )


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
    title="A descent direction for overparameterised attention",
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
    d.define((Z, z_i), ("the queries as the columns of a matrix; ", z_i, " is the query of input ", i, "."))
    d.define(matrix_symbol("unit", "n", 1, "i"), ("the unit vector of coordinate ", i, "."))
    d.define(symbol("Y", "i"), ("the label of input ", i, ", plus or minus one; ", v, " is the linear head."))
    d.define(x_it, ("token ", t, " of input ", i, "."))
    d.define(Chain(symbol("gamma", "i", "t"), "=", symbol("Y", "i") * v.T * x_it), ("the score of token ", t, "."))
    d.define(s, ("the softmax probabilities of the tokens of input ", i, ", with entries ", symbol("s", "i", "t"), "."))
    d.define(
        (expo[index("t")], indexed("a")[index("t")]),
        (
            "the exponential of a logit and the logit, ",
            Chain(expo[index("t")], "=", sp.exp(indexed("a")[index("t")])),
            ".",
        ),
    )
    d.define(*glossary.kronecker())
    d.define(*glossary.variance())
    d.define(*glossary.loss())
    d.define(*glossary.empirical_loss())
    d.premise(
        "construction",
        Chain(
            Wp,
            "=",
            v * SumOver(symbol("Y", "i") * zt_i, i).T,
            where=Chain(zt_i, "=", Z * (Z.T * Z).I * matrix_symbol("unit", "n", 1, "i")),
        ),
        (
            Chain(symbol("d"), ">=", n),
            " and independent queries, so the Gram matrix of the queries is invertible; ",
            matrix_symbol("unit", "n", 1, "i"),
            " is the unit vector of coordinate ",
            i,
            ".",
        ),
    )
    nd = sp.Tuple(symbol("n"), symbol("d"))
    listed = lambda shs: ", ".join("(" + ", ".join(map(str, x)) + ")" for x in shs)  # noqa: E731
    Zt = matrix_symbol("Ztil", "d", "n")
    d.step(
        "dual basis",
        Chain(Z.T * Zt, "=", sp.Identity(symbol("n")), where=Chain(Zt, "=", Z * (Z.T * Z).I)),
        ("entry by entry ", Chain(z_j.T * zt_i, "=", sp.KroneckerDelta(i, j)), ": multiply by the Gram matrix."),
        _dual_basis_check(),
        evidence=All(
            _cases("dual-basis", shapes),
            ("generic queries, with ", nd, " in turn " + listed(shapes), ", through the adjugate of the Gram matrix"),
        ),
    )
    Yv = matrix_symbol("Y", "n", 1)
    d.step(
        "the direction maps each query to its signed head",
        Chain(Wp * Z, "=", v * Yv.T, where=Chain(Wp, "=", v * (Zt * Yv).T)),
        (
            "column ",
            i,
            " reads ",
            Chain(Wp * z_i, "=", symbol("Y", "i") * v),
            ", by the dual basis; so the logits along ",
            Wp,
            " are the scores, ",
            Chain(x_it.T * Wp * z_i, "=", symbol("gamma", "i", "t")),
            ".",
        ),
        _direction_check(),
        evidence=All(
            _cases("direction"),
            ("every sign pattern of the labels, generic queries, with ", nd, " in turn (2, 2), (2, 3)"),
        ),
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
                sp.Tuple(t, tau),
            )
            / 2,
            ">=",
            0,
        ),
        (
            "over all pairs of tokens; the variance is positive as soon as two scores of the input differ. That "
            "strict inequality, and the form over the pairs ",
            sp.Lt(t, tau),
            ", are checked on the instances.",
        ),
        _variance_check(),
        evidence=All(_var_cases(max_T), ("every ", Chain(2, "<=", symbol("T"), "<=", max_T))),
    )
    d.step(
        "conclusion",
        Chain(Inner(Grad(L, W), Wp), "=", Mean(EllP(u) * Var(s, g), i, n), "<", 0),
        (
            "derivation grad-covariance with the direction ",
            Wp,
            ", whose directional logits are the scores (the covariance of the scores with themselves), and ",
            Chain(EllP(u), "<", 0),
            ". Checked on the closed-form gradient, with ",
            Wp,
            " scaled by the positive factor ",
            sp.Function("det")(Z.T * Z),
            ".",
        ),
        All(
            _conclusion_cases(patterns),
            (
                "generic weights, tokens, queries and head with ",
                Chain(sp.Tuple(n, symbol("d"), symbol("T")), "=", sp.Tuple(2, 2, 2)),
                ", " + ("every label pattern" if full else "labels 1 and minus 1"),
            ),
        ),
    )
