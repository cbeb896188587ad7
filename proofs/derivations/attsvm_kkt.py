r"""``attsvm-kkt``: the KKT conditions of Att-SVM (claim ``svm-kkt``), proved for general $n,T,d$.

$\min\frac12\|W\|_F^2$ s.t. $\langle W,A_{it}\rangle\ge1$; Lagrangian
$\Lambda(W,\lambda)=\frac12\|W\|_F^2-\sum_{i,t}\lambda_{it}(\langle W,A_{it}\rangle-1)$ (the symbol $\Lambda$ keeps it
apart from the loss $\mathcal L$); stationarity $W=\sum\lambda_{it}A_{it}$; complementary slackness;
$\|W\|_F^2=\mathbf 1^\top\lambda$; row space in $\mathrm{span}\{z_i\}$; the KKT conditions are sufficient.

The general proofs are in index notation: $W$ has entries $w_{pq}$, $A_{it}$ entries $A_{itpq}$, the Frobenius
inner product is $\sum_{p,q=1}^d w_{pq}A_{itpq}$ and the constraint sums run over $i\le n$, $t\le T$ with symbolic
$n,T,d$ (:func:`attsvm.symbolic.sums.reduce` exchanges the finite sums). A sum over every token contains the
constraint sum over $t\ne\alpha_i$ as the case $\lambda_{i\alpha_i}=0$, so identities for arbitrary multipliers
on the full grid cover it. The earlier generic instances (every entry a symbol) stay as second evidence.
"""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import sums
from attsvm.symbolic.checks import All, Equal, Symbolic, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Grad, Inner, Norm, RealSpace, SumOver, in_order

SHAPES = ((1, 3, 2), (2, 2, 2), (2, 3, 2), (2, 2, 3))

# ---------------------------------------------------------------------- index notation (general n, T, d)
n, T, d = symbol("n"), symbol("T"), symbol("d")
i, t, j, tau = (index(c) for c in ("i", "t", "j", "tau"))
p, q, k, l = (index(c) for c in ("p", "q", "k", "l"))
w = indexed("w")  # entries of W
wp = indexed("Wp")  # entries of a feasible W'
A = indexed("A")  # A[i, t, p, q]: entry (p, q) of A_it
D = indexed("D")  # D[i, t, p]: entry p of x_{i alpha_i} - x_it
z = indexed("z")  # z[i, q]
y = indexed("y")
lam = indexed("lam")
slack = indexed("s", positive=None, nonnegative=True)  # s[i, t] = <W', A_it> - 1 >= 0 (W' feasible)


def fro(f, g) -> sp.Expr:
    r"""$\langle F,G\rangle$ of two $d\times d$ entry functions (:func:`attsvm.symbolic.sums.frobenius`)."""
    return sums.frobenius(f, g, d, p, q)


def over(f) -> sp.Expr:
    r"""$\sum_{i=1}^n\sum_{t=1}^T f(i,t)$."""
    return sp.Sum(f(i, t), (i, 1, n), (t, 1, T))


W_of = sums.entries(w)  # noqa: N816


def A_of(ii, tt):
    return lambda a, b: A[ii, tt, a, b]


def stationary(a, b) -> sp.Expr:
    r"""$(\sum_{j,\tau}\lambda_{j\tau}A_{j\tau})_{ab}$ (summation indices $j,\tau$, distinct from $i,t$)."""
    return sp.Sum(lam[j, tau] * A[j, tau, a, b], (j, 1, n), (tau, 1, T))


def lagrangian(Wf) -> sp.Expr:
    r"""$\Lambda=\frac12\langle W,W\rangle-\sum_{i,t}\lambda_{it}(\langle W,A_{it}\rangle-1)$ in index notation."""
    return fro(Wf, Wf) / 2 - over(lambda a, b: lam[a, b] * (fro(Wf, A_of(a, b)) - 1))


def _stationarity_check() -> Symbolic:
    grad = sp.diff(lagrangian(W_of), w[k, l])
    return Symbolic(
        grad,
        w[k, l] - sp.Sum(lam[i, t] * A[i, t, k, l], (i, 1, n), (t, 1, T)),
        [n, T, d],
        method="expand",
        ranges={k: (1, d), l: (1, d)},
        what=(
            "the derivative of the Lagrangian with respect to every entry ",
            w[k, l],
            ", the Frobenius inner products written as sums over the entries",
        ),
    )


def _constraint_value_check() -> Symbolic:
    Dz = lambda a, b: D[i, t, a] * z[i, b]  # noqa: E731 - the rank-one A_it
    rhs = sp.Sum(D[i, t, p] * sp.Sum(w[p, q] * z[i, q], (q, 1, d)), (p, 1, d))
    return Symbolic(fro(W_of, Dz), rhs, [d], method=sums.reduce, what="index notation, finite sums exchanged")


def _norm_check() -> Symbolic:
    lhs = fro(stationary, stationary)
    rhs = over(lambda a, b: lam[a, b] * fro(stationary, A_of(a, b)))
    return Symbolic(lhs, rhs, [n, T, d], method=sums.reduce, what="index notation, finite sums exchanged")


def _ones_check() -> Symbolic:
    lhs = fro(stationary, stationary) - over(lambda a, b: lam[a, b])
    rhs = over(lambda a, b: lam[a, b] * (fro(stationary, A_of(a, b)) - 1))
    return Symbolic(lhs, rhs, [n, T, d], method=sums.reduce, what="index notation, finite sums exchanged")


def _rowspace_check() -> Symbolic:
    # W = sum lam_it D_it z_i^T, entry p of W y against sum_it lam_it D_itp (z_i^T y)
    Wst = lambda a, b: sp.Sum(lam[j, tau] * D[j, tau, a] * z[j, b], (j, 1, n), (tau, 1, T))  # noqa: E731
    lhs = sp.Sum(Wst(k, q) * y[q], (q, 1, d))
    rhs = over(lambda a, b: lam[a, b] * D[a, b, k] * sp.Sum(z[a, q] * y[q], (q, 1, d)))
    return Symbolic(lhs, rhs, [n, T, d], method=sums.reduce, what=("entry ", k, " of both sides, in index notation"))


def _sufficiency_check() -> SymbolicNonneg:
    r"""$\frac12\|W'\|^2-\frac12\|W\|^2+\sum\lambda_{it}(\langle W,A_{it}\rangle-1)
    =\frac12\|W'-W\|^2+\sum\lambda_{it}s_{it}$ at $W=\sum\lambda A$, with $s_{it}=\langle W',A_{it}\rangle-1$."""
    Wp = lambda a, b: wp[a, b]  # noqa: E731
    diff = lambda a, b: wp[a, b] - stationary(a, b)  # noqa: E731
    expr = (
        fro(Wp, Wp) / 2
        - fro(stationary, stationary) / 2
        + over(lambda a, b: lam[a, b] * (fro(stationary, A_of(a, b)) - 1))
    )
    cert = fro(diff, diff) / 2 + over(lambda a, b: lam[a, b] * slack[a, b])

    def method(e):
        return sums.reduce(sums.substitute(e, slack, lambda a, b: fro(Wp, A_of(a, b)) - 1))

    return SymbolicNonneg(
        expr,
        cert,
        [n, T, d],
        method=method,
        what=(
            "with the slacks ",
            Chain(slack[i, t], "=", Inner(matrix_symbol("Wp", "d", "d"), matrix_symbol("A", "d", "d", "i", "t")) - 1),
            " substituted",
        ),
    )


# ---------------------------------------------------------------------- generic instances (second evidence)
def instance(n: int, T: int, d: int):
    """Generic constraints, multipliers and the stationary W = sum lambda A."""
    labels, A, D, Z = B.constraint_matrices(n, T, d)
    lam = [symbol("lam", i, t) for i, t in labels]
    Wst = sp.zeros(d, d)
    for lj, Aj in zip(lam, A):
        Wst += lj * Aj
    return labels, A, D, Z, lam, Wst


def _cases(kind: str):
    def cases():
        for n, T, d in SHAPES:
            labels, A, D, Z, lam, Wst = instance(n, T, d)
            tag = f"n={n}, T={T}, d={d}"
            if kind == "stationarity":
                W = B.weights(d)
                Lag = B.lagrangian(W, A, lam)
                grad = B.diff_entries(Lag, W)
                yield tag, Equal(grad, W - Wst)
            elif kind == "margin":
                W = B.weights(d)
                for Aj, Dj, zj in zip(A, D, Z):
                    yield tag, Equal(B.inner(W, Aj), (Dj.T * W * zj)[0])
            elif kind == "norm":
                margins = sum((lj * B.inner(Wst, Aj) for lj, Aj in zip(lam, A)), sp.Integer(0))
                yield tag, Equal(B.fro2(Wst), margins)
            elif kind == "ones":
                slack = sum((lj * (B.inner(Wst, Aj) - 1) for lj, Aj in zip(lam, A)), sp.Integer(0))
                yield tag, Equal(B.fro2(Wst) - sum(lam, sp.Integer(0)), slack)
            elif kind == "rowspace" and d == 3 and n == 2:
                y = Z[0].cross(Z[len(Z) - 1])  # orthogonal to z_1 and z_2
                yield tag, Equal(Wst * y, sp.zeros(d, 1))

    return cases


def _shapes_prose(shapes) -> tuple:
    """Prose naming the instance shapes: generic instances with n, T, d in turn (1, 3, 2), ..."""
    nTd = sp.Tuple(symbol("n"), symbol("T"), symbol("d"))
    listed = ", ".join("(" + ", ".join(map(str, s)) + ")" for s in shapes)
    return ("generic instances, every entry a symbol, with ", nTd, " in turn " + listed)


@derivation(name="attsvm-kkt", title="KKT conditions of Att-SVM", claim="svm-kkt")
def attsvm_kkt(dv: Derivation) -> None:
    ii, tt = sp.Symbol("i"), sp.Symbol("t")
    alpha_i = sp.Symbol("alpha_i")
    W, Ait = matrix_symbol("W", "d", "d"), matrix_symbol("A", "d", "d", "i", "t")
    Wp = matrix_symbol("Wp", "d", "d")
    x_a, x_t = matrix_symbol("x", "d", 1, "i", alpha_i), matrix_symbol("x", "d", 1, "i", "t")
    D_it = matrix_symbol("D", "d", 1, "i", "t")
    zi = matrix_symbol("z", "d", 1, "i")
    yv = matrix_symbol("y", "d", 1)
    lit = symbol("lam", "i", "t")
    Lag = sp.Function("Lag")
    L = Lag(W, symbol("lam"))
    S = lambda body: SumOver(body, (ii, tt))  # noqa: E731
    sh = _shapes_prose(SHAPES)
    dv.summary = (
        "Sums over ",
        sp.Tuple(ii, tt),
        " run over the constraints, ",
        Chain(1, "<=", ii, "<=", symbol("n")),
        " and ",
        Chain(tt, "!=", alpha_i),
        ".",
    )
    dv.define(
        Chain((x_t, zi), "in", RealSpace(d)),
        ("token ", tt, " of input ", ii, " and the query of input ", ii, " (THEORY section 1)."),
    )
    dv.define(alpha_i, ("the selected token of input ", ii, ", the one the attention should pick."))
    dv.define((W, w[k, l]), "the attention weights, the variable of the program, and their entries.")
    dv.define(lit, ("the multiplier of the constraint of input ", ii, " and token ", tt, "."))
    dv.define(L, "the Lagrangian (its letter differs from the one of the loss, THEORY section 1).")
    dv.define(Wp, "any feasible matrix: one that satisfies every constraint.")
    dv.premise(
        "primal",
        Chain(Inner(W, Ait), ">=", 1, where=Chain(Ait, "=", (x_a - x_t) * zi.T)),
        (
            "Att-SVM: minimise half the squared Frobenius norm of ",
            W,
            " subject to these constraints, one for every input ",
            ii,
            " and every token ",
            Chain(tt, "!=", alpha_i),
            ".",
        ),
    )
    dv.step(
        "constraint value",
        Chain(Inner(W, Ait), "=", D_it.T * W * zi, where=Chain(D_it, "=", x_a - x_t)),
        "the trace of a rank-one product.",
        _constraint_value_check(),
        evidence=All(_cases("margin"), sh),
    )
    lagr = Norm(W, "F") ** 2 / 2 - S(lit * (Inner(W, Ait) - 1))
    dv.premise(
        "Lagrangian",
        Chain(L, "=", lagr),
        ("with multipliers ", Chain(lit, ">=", 0), ", one for each constraint."),
    )
    dv.step(
        "stationarity",
        Chain(Grad(L, W), "=", in_order(W, -S(lit * Ait)), "=", 0),
        (
            "the Lagrangian is a convex quadratic in ",
            W,
            "; its gradient vanishes at the minimiser, so ",
            W,
            " is the combination of the constraint matrices with the multipliers as coefficients.",
        ),
        _stationarity_check(),
        evidence=All(_cases("stationarity"), sh),
    )
    dv.premise(
        "complementary slackness",
        Chain(lit * (Inner(W, Ait) - 1), "=", 0, where=Chain(lit, ">=", 0)),
        "the KKT theorem for a convex program with affine constraints (no constraint qualification needed): at the "
        "optimum every multiplier of an inactive constraint vanishes.",
    )
    dv.step(
        "norm as a multiplier sum",
        Chain(Norm(W, "F") ** 2, "=", S(lit * Inner(W, Ait))),
        "substitute the stationarity condition into one factor of the inner product.",
        _norm_check(),
        evidence=All(_cases("norm"), sh),
    )
    dv.step(
        "norm equals the sum of the multipliers",
        Chain(Norm(W, "F") ** 2 - S(lit), "=", S(lit * (Inner(W, Ait) - 1)), "=", 0),
        "each term of the right-hand sum vanishes by complementary slackness: the optimal value is half the sum of "
        "the multipliers.",
        _ones_check(),
        evidence=All(_cases("ones"), sh),
    )
    dv.step(
        "row space",
        Chain(W * yv, "=", S(lit * D_it * (zi.T * yv)), "=", 0, where=Chain(zi.T * yv, "=", 0)),
        (
            "every constraint matrix ends in a query, so ",
            W,
            " annihilates every vector orthogonal to all queries (claim svm-rank).",
        ),
        _rowspace_check(),
        evidence=All(
            _cases("rowspace"),
            (
                "generic instance with ",
                Chain(sp.Tuple(symbol("n"), symbol("d")), "=", sp.Tuple(2, 3)),
                " and ",
                yv,
                " the cross product of the two queries",
            ),
        ),
    )
    dv.step(
        "the KKT conditions are sufficient",
        Chain(
            in_order(Norm(Wp, "F") ** 2 / 2, -(Norm(W, "F") ** 2) / 2),
            "=",
            in_order(Norm(in_order(Wp, -W), "F") ** 2 / 2, S(lit * (Inner(Wp, Ait) - 1))),
            ">=",
            0,
        ),
        (
            "for every feasible ",
            Wp,
            ", at a point satisfying stationarity. The check proves the identity with the sum ",
            S(lit * (Inner(W, Ait) - 1)),
            " added to the left-hand side; complementary slackness makes that sum vanish, so a KKT point is the "
            "minimiser.",
        ),
        _sufficiency_check(),
    )
