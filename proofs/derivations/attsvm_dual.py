r"""``attsvm-dual``: the dual of Att-SVM, $\max_{\lambda\ge0}\mathbf 1^\top\lambda-\frac12\lambda^\top G\lambda$,
$G_{(it),(i'\tau)}=(x_{i\alpha_i}-x_{it})^\top(x_{i'\alpha_{i'}}-x_{i'\tau})\,z_i^\top z_{i'}$, weak and strong
duality, proved for general sizes.

The constraints are numbered $j=1,\dots,m$ ($m=n(T-1)$). In index notation $W$ has entries $w_{pq}$, $A_j$ entries
$A_{jpq}$, and $\langle W,A_j\rangle=\sum_{p,q=1}^dw_{pq}A_{jpq}$ with symbolic $m,d$; the identities are decided by
:func:`attsvm.symbolic.sums.reduce` (finite sums exchanged, indices renamed). Weak duality is an inequality:
the gap equals half a squared norm plus $\sum_j\lambda_js_j$ with the slacks $s_j=\langle W,A_j\rangle-1\ge0$ of a
feasible $W$ (an ``IndexedBase`` of nonnegative symbols; the substitution is part of the check). The earlier
generic instances stay as second evidence."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import sums
from attsvm.symbolic.checks import All, Equal, Symbolic, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import AsScalar, Chain, Inner, Norm, RealSpace, SumOver, in_order

SHAPES = ((1, 3, 2), (2, 2, 2), (2, 3, 2), (2, 2, 3))

# ---------------------------------------------------------------------- index notation (general m, d)
m, d = symbol("m", integer=True, positive=True), symbol("d")
j, k, p, q = (index(c) for c in ("j", "k", "p", "q"))
i, t, i2, tau = (index(c) for c in ("i", "t", "i'", "tau"))
w = indexed("w")
A = indexed("A")  # A[j, p, q]
D = indexed("D")  # D[i, t, p]
z = indexed("z")  # z[i, q]
lam = indexed("lam")
slack = indexed("s", positive=None, nonnegative=True)


def fro(f, g) -> sp.Expr:
    r"""$\langle F,G\rangle$ of two $d\times d$ entry functions (:func:`attsvm.symbolic.sums.frobenius`)."""
    return sums.frobenius(f, g, d, p, q)


W_of = sums.entries(w)  # noqa: N816


def A_of(c):
    return sums.entries(A, c)


def minimiser(a, b) -> sp.Expr:
    r"""$(\sum_k\lambda_kA_k)_{ab}$."""
    return sp.Sum(lam[k] * A[k, a, b], (k, 1, m))


def lagrangian(Wf) -> sp.Expr:
    return fro(Wf, Wf) / 2 - sp.Sum(lam[j] * (fro(Wf, A_of(j)) - 1), (j, 1, m))


def quadratic() -> sp.Expr:
    r"""$\sum_j\sum_k\lambda_j\lambda_k\langle A_j,A_k\rangle=\lambda^\top G\lambda$."""
    return sp.Sum(lam[j] * lam[k] * fro(A_of(j), A_of(k)), (j, 1, m), (k, 1, m))


def dual_function() -> sp.Expr:
    return sp.Sum(lam[j], (j, 1, m)) - quadratic() / 2


EXCHANGED = "index notation, finite sums exchanged"


def _gram_check() -> Symbolic:
    A1 = lambda a, b: D[i, t, a] * z[i, b]  # noqa: E731
    A2 = lambda a, b: D[i2, tau, a] * z[i2, b]  # noqa: E731
    rhs = sp.Sum(D[i, t, p] * D[i2, tau, p], (p, 1, d)) * sp.Sum(z[i, q] * z[i2, q], (q, 1, d))
    return Symbolic(fro(A1, A2), rhs, [d], method=sums.reduce, what=EXCHANGED)


def _dual_check() -> Symbolic:
    return Symbolic(lagrangian(minimiser), dual_function(), [m, d], method=sums.reduce, what=EXCHANGED)


def _weak_check() -> SymbolicNonneg:
    gap = lambda a, b: w[a, b] - minimiser(a, b)  # noqa: E731
    expr = fro(W_of, W_of) / 2 - dual_function()
    cert = fro(gap, gap) / 2 + sp.Sum(lam[j] * slack[j], (j, 1, m))

    def method(e):
        return sums.reduce(sums.substitute(e, slack, lambda c: fro(W_of, A_of(c)) - 1))

    return SymbolicNonneg(
        expr,
        cert,
        [m, d],
        method=method,
        what=(
            "with the slacks ",
            Chain(slack[j], "=", Inner(matrix_symbol("W", "d", "d"), matrix_symbol("A", "d", "d", "j")) - 1),
            " substituted",
        ),
    )


def _quad_check() -> Symbolic:
    return Symbolic(quadratic(), fro(minimiser, minimiser), [m, d], method=sums.reduce, what=EXCHANGED)


# ---------------------------------------------------------------------- generic instances (second evidence)
def _gram(A, D, Z):
    mm = len(A)
    return sp.Matrix(mm, mm, lambda a, b: (D[a].T * D[b])[0] * (Z[a].T * Z[b])[0])


def _cases(kind: str):
    def cases():
        for n, T, dd in SHAPES:
            labels, A, D, Z = B.constraint_matrices(n, T, dd)
            lamv = sp.Matrix([symbol("lam", ii, tt) for ii, tt in labels])
            Wst = sp.zeros(dd, dd)
            for lj, Aj in zip(lamv, A):
                Wst += lj * Aj
            G = _gram(A, D, Z)
            one = sp.ones(len(A), 1)
            dual = (one.T * lamv)[0] - (lamv.T * G * lamv)[0] / 2
            tag = f"n={n}, T={T}, d={dd}"
            if kind == "gram":
                yield tag, Equal(sp.Matrix([[B.inner(P, Qm) for Qm in A] for P in A]), G)
            elif kind == "dual":
                yield tag, Equal(B.lagrangian(Wst, A, list(lamv)), dual)
            elif kind == "weak":
                W = B.weights(dd)
                sl = sum((lj * (B.inner(W, Aj) - 1) for lj, Aj in zip(lamv, A)), sp.Integer(0))
                yield tag, Equal(B.fro2(W) / 2 - dual, B.fro2(W - Wst) / 2 + sl)
            elif kind == "quad":
                yield tag, Equal((lamv.T * G * lamv)[0], B.fro2(Wst))

    return cases


def _shapes_prose(shapes) -> tuple:
    """Prose naming the instance shapes: generic instances with n, T, d in turn (1, 3, 2), ..."""
    nTd = sp.Tuple(symbol("n"), symbol("T"), symbol("d"))
    listed = ", ".join("(" + ", ".join(map(str, s)) + ")" for s in shapes)
    return ("generic instances, every entry a symbol, with ", nTd, " in turn " + listed)


@derivation(name="attsvm-dual", title="The dual of Att-SVM", claim="svm-kkt")
def attsvm_dual(dv: Derivation) -> None:
    js, ks = sp.Symbol("j"), sp.Symbol("k")
    W = matrix_symbol("W", "d", "d")
    Aj, Ak = matrix_symbol("A", "d", "d", "j"), matrix_symbol("A", "d", "d", "k")
    A_it, A_2 = matrix_symbol("A", "d", "d", "i", "t"), matrix_symbol("A", "d", "d", "i'", "tau")
    D_it, D_2 = matrix_symbol("D", "d", 1, "i", "t"), matrix_symbol("D", "d", 1, "i'", "tau")
    z_i, z_2 = matrix_symbol("z", "d", 1, "i"), matrix_symbol("z", "d", 1, "i'")
    lamv = matrix_symbol("lam", "m", 1)
    lj, lk = symbol("lam", "j"), symbol("lam", "k")
    G = matrix_symbol("G", "m", "m")
    g = sp.Function("dual")
    Lag = sp.Function("Lag")
    mm = symbol("m", integer=True, positive=True)
    sh = _shapes_prose(SHAPES)
    Sj = lambda body: SumOver(body, js)  # noqa: E731
    dv.summary = (
        "The constraints are numbered ",
        Chain(1, "<=", js, "<=", mm),
        ", one for each pair of an input ",
        sp.Symbol("i"),
        " and a token ",
        Chain(sp.Symbol("t"), "!=", sp.Symbol("alpha_i")),
        "; so ",
        Chain(mm, "=", symbol("n") * (symbol("T") - 1)),
        ", and ",
        G,
        " is the Gram matrix of the constraint matrices.",
    )
    ii, tt, alpha_i = sp.Symbol("i"), sp.Symbol("t"), sp.Symbol("alpha_i")
    x_a, x_t = matrix_symbol("x", "d", 1, "i", alpha_i), matrix_symbol("x", "d", 1, "i", "t")
    dv.define(
        Chain((x_t, z_i), "in", RealSpace(symbol("d"))),
        ("token ", tt, " of input ", ii, " and the query of input ", ii, " (THEORY section 1)."),
    )
    dv.define(alpha_i, ("the selected token of input ", ii, "."))
    dv.define(Chain(D_it, "=", x_a - x_t), "the token difference of a constraint.")
    dv.define(
        Chain(A_it, "=", D_it * z_i.T),
        ("the constraint matrix of the pair ", sp.Tuple(ii, tt), "; numbered ", js, ", it is written ", Aj, "."),
    )
    dv.define(lj, ("the multiplier of constraint ", js, "; ", lamv, " is the vector of the multipliers."))
    dv.define(Lag(W, symbol("lam")), "the Lagrangian.")
    dv.premise(
        "Lagrangian and its minimiser",
        Chain(
            Lag(W, symbol("lam")),
            "=",
            Norm(W, "F") ** 2 / 2 - Sj(lj * (Inner(W, Aj) - 1)),
            where=Chain(W, "=", Sj(lj * Aj)),
        ),
        (
            "derivation attsvm-kkt: for fixed multipliers the Lagrangian is a convex quadratic in ",
            W,
            ", minimised at the combination shown.",
        ),
    )
    dv.step(
        "Gram matrix",
        Chain(
            Inner(A_it, A_2), "=", AsScalar(D_it.T * D_2) * AsScalar(z_i.T * z_2), where=Chain(A_it, "=", D_it * z_i.T)
        ),
        ("the inner product of two rank-one matrices, with the token difference ", D_it, "."),
        _gram_check(),
        evidence=All(_cases("gram"), sh),
    )
    dv.step(
        "dual function",
        Chain(
            g(lamv),
            "=",
            in_order(Sj(lj), -SumOver(lj * lk * Inner(Aj, Ak), (js, ks)) / 2),
            "=",
            in_order(Sj(lj), -AsScalar(lamv.T * G * lamv) / 2),
        ),
        (
            "substitute the minimiser into the Lagrangian; ",
            Chain(symbol("G", "j", "k"), "=", Inner(Aj, Ak)),
            ". The dual program maximises this concave quadratic over ",
            Chain(lamv, ">=", 0),
            ".",
        ),
        _dual_check(),
        evidence=All(_cases("dual"), sh),
    )
    dv.step(
        "weak duality",
        Chain(
            in_order(Norm(W, "F") ** 2 / 2, -g(lamv)),
            "=",
            in_order(Norm(in_order(W, -Sj(lj * Aj)), "F") ** 2 / 2, Sj(lj * (Inner(W, Aj) - 1))),
            ">=",
            0,
        ),
        (
            "for every feasible ",
            W,
            " and every ",
            Chain(lamv, ">=", 0),
            ": half a squared norm plus a sum of products of nonnegative multipliers and nonnegative slacks. So "
            "every dual value bounds the optimum from below.",
        ),
        _weak_check(),
        evidence=All(_cases("weak"), sh),
    )
    dv.step(
        "strong duality at the optimum",
        Chain(AsScalar(lamv.T * G * lamv), "=", Norm(Sj(lj * Aj), "F") ** 2),
        (
            "by derivation attsvm-kkt the squared norm equals the multiplier sum at the KKT point, so there the dual "
            "value is half the multiplier sum, which is the primal value: no duality gap. An infeasible primal makes "
            "the dual unbounded.",
        ),
        _quad_check(),
        evidence=All(_cases("quad"), sh),
    )
