r"""``attsvm-kkt``: the KKT conditions of Att-SVM (claim ``svm-kkt``).

$\min\frac12\|W\|_F^2$ s.t. $\langle W,A_{it}\rangle\ge1$; Lagrangian
$\mathcal L(W,\lambda)=\frac12\|W\|_F^2-\sum\lambda_{it}(\langle W,A_{it}\rangle-1)$; stationarity
$W=\sum\lambda_{it}A_{it}$; complementary slackness; $\|W\|_F^2=\mathbf 1^\top\lambda$; row space in
$\mathrm{span}\{z_i\}$. Checked on generic instances (every entry a symbol)."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Inner, Norm, Partial, SumOver

SHAPES = ((1, 3, 2), (2, 2, 2), (2, 3, 2), (2, 2, 3))


def instance(n: int, T: int, d: int):
    """Generic constraints, multipliers and the stationary W = sum lambda A."""
    labels, A, D, Z = B.constraint_matrices(n, T, d)
    lam = [symbol("lam", i, t) for i, t in labels]
    Wst = sp.zeros(d, d)
    for l, Aj in zip(lam, A):
        Wst += l * Aj
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
                margins = sum((l * B.inner(Wst, Aj) for l, Aj in zip(lam, A)), sp.Integer(0))
                yield tag, Equal(B.fro2(Wst), margins)
            elif kind == "ones":
                slack = sum((l * (B.inner(Wst, Aj) - 1) for l, Aj in zip(lam, A)), sp.Integer(0))
                yield tag, Equal(B.fro2(Wst) - sum(lam, sp.Integer(0)), slack)
            elif kind == "rowspace" and d == 3 and n == 2:
                y = Z[0].cross(Z[len(Z) - 1])  # orthogonal to z_1 and z_2
                yield tag, Equal(Wst * y, sp.zeros(d, 1))

    return cases


@derivation(name="attsvm-kkt", title="KKT conditions of Att-SVM", claim="svm-kkt")
def attsvm_kkt(d: Derivation) -> None:
    i, t = sp.Symbol("i"), sp.Symbol("t")
    W, A = matrix_symbol("W", "d", "d"), matrix_symbol("A", "d", "d", "i", "t")
    x_a, x_t = matrix_symbol("x", "d", 1, "i", sp.Symbol("alpha_i")), matrix_symbol("x", "d", 1, "i", "t")
    z = matrix_symbol("z", "d", 1, "i")
    lam = symbol("lam", "i", "t")
    Lag = sp.Function("Lag")
    sh = "generic instances (n,T,d) in " + ", ".join(map(str, SHAPES))
    d.premise(
        "primal",
        Chain(Inner(W, A), ">=", 1, where=Chain(A, "=", (x_a - x_t) * z.T)),
        "Att-SVM: minimise half the squared Frobenius norm of W subject to these constraints, t != alpha_i.",
    )
    d.step(
        "constraint value",
        Chain(Inner(W, A), "=", (x_a - x_t).T * W * z),
        "trace of a rank-one product.",
        All(_cases("margin"), sh),
    )
    Lagr = Norm(W, "F") ** 2 / 2 - SumOver(lam * (Inner(W, A) - 1), (i, t))
    d.premise("Lagrangian", Chain(Lag(W, symbol("lam")), "=", Lagr), "multipliers lambda_it >= 0.")
    d.step(
        "stationarity",
        Chain(Partial(Lag(W, symbol("lam")), W), "=", W - SumOver(lam * A, (i, t)), "=", 0),
        "the Lagrangian is a convex quadratic in W; its gradient vanishes at the minimiser, so W is the "
        "lambda-combination of the constraint matrices.",
        All(_cases("stationarity"), sh),
    )
    d.premise(
        "complementary slackness",
        Chain(lam * (Inner(W, A) - 1), "=", 0, where=Chain(lam, ">=", 0)),
        "KKT for a convex program with affine constraints (no constraint qualification needed).",
    )
    d.step(
        "norm as a multiplier sum",
        Chain(Norm(W, "F") ** 2, "=", SumOver(lam * Inner(W, A), (i, t))),
        "substitute the stationarity condition into one factor of the inner product.",
        All(_cases("norm"), sh),
    )
    d.step(
        "norm equals the sum of the multipliers",
        Chain(Norm(W, "F") ** 2 - SumOver(lam, (i, t)), "=", SumOver(lam * (Inner(W, A) - 1), (i, t)), "=", 0),
        "each term vanishes by complementary slackness.",
        All(_cases("ones"), sh),
    )
    y = matrix_symbol("y", "d", 1)
    d.step(
        "row space",
        Chain(W * y, "=", 0, where=Chain(z.T * y, "=", 0)),
        "every constraint matrix ends in a query, so W annihilates what is orthogonal to all queries (claim svm-rank).",
        All(_cases("rowspace"), "n=2, d=3 with y the cross product of the two queries"),
    )
