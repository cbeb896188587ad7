r"""``attsvm-nuc-dual``: the spectral-norm dual of Att-SVM⋆ (nuclear norm), a duality-gap certificate.

Primal $\min\|W\|_\star$ s.t. $\langle W,A_j\rangle\ge1$; dual $\max_{\lambda\ge0}\mathbf 1^\top\lambda$ s.t.
$\|M\|_2\le1$, $M=\sum_j\lambda_jA_j$. For feasible $W$ and dual-feasible $\lambda$:
$\|W\|_\star\ge\langle W,M\rangle=\sum_j\lambda_j\langle W,A_j\rangle\ge\mathbf 1^\top\lambda$."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal, Nonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Inner, Norm, SumOver

SHAPES = ((1, 3, 2), (2, 2, 2), (2, 2, 3))


def cayley(th: sp.Expr) -> sp.Matrix:
    r"""The rotation $\frac{1}{1+\theta^2}\begin{pmatrix}1-\theta^2&-2\theta\\2\theta&1-\theta^2\end{pmatrix}$
    (rational in $\theta$)."""
    return sp.Matrix([[1 - th**2, -2 * th], [2 * th, 1 - th**2]]) / (1 + th**2)


def _cases(kind: str):
    def cases():
        for n, T, d in SHAPES:
            labels, A, _, _ = B.constraint_matrices(n, T, d)
            lam = [symbol("lam", i, t) for i, t in labels]
            M = sp.zeros(d, d)
            for l, Aj in zip(lam, A):
                M += l * Aj
            tag = f"n={n}, T={T}, d={d}"
            if kind == "linear":
                W = B.weights(d)
                yield tag, Equal(B.inner(W, M), sum((l * B.inner(W, Aj) for l, Aj in zip(lam, A)), sp.Integer(0)))
            elif kind == "gap":
                m = [symbol("m", i, t) for i, t in labels]  # margins 1 + m_j of a feasible W
                yield tag, Nonneg(sum((l * (1 + mj) for l, mj in zip(lam, m)), sp.Integer(0)) - sum(lam, sp.Integer(0)))

    return cases


def _spectral():
    th, ph = symbol("theta", 1), symbol("theta", 2)
    s1, s2, x = symbol("sigma", 1), symbol("sigma", 2), sp.Symbol("x")
    M = cayley(th) * sp.diag(s1, s2) * cayley(ph).T
    lhs = (x * sp.eye(2) - M.T * M).det()
    return Equal(lhs, (x - s1**2) * (x - s2**2), "cancel", what="2 x 2, rational rotations")


@derivation(name="attsvm-nuc-dual", title="The spectral-norm dual of Att-SVM* (nuclear norm)", claim="svm-kkt")
def attsvm_nuc_dual(d: Derivation) -> None:
    j = sp.Symbol("j")
    W, M, A = matrix_symbol("W", "d", "d"), matrix_symbol("M", "d", "d"), matrix_symbol("A", "d", "d", "j")
    U, V = matrix_symbol("U", "d", "d"), matrix_symbol("V", "d", "d")
    lj = symbol("lam", "j")
    sh = "generic instances (n,T,d) in " + ", ".join(map(str, SHAPES))
    d.premise(
        "primal and dual",
        Chain(Norm(M, "2"), "<=", 1, where=Chain(M, "=", SumOver(lj * A, j))),
        "primal: minimise the nuclear norm of W subject to the Att-SVM constraints; dual: maximise the multiplier sum "
        "over lambda >= 0 subject to this spectral-norm bound.",
    )
    d.premise(
        "trace duality",
        Chain(Inner(W, M), "<=", Norm(W, "*") * Norm(M, "2")),
        "von Neumann's trace inequality (the nuclear and spectral norms are dual).",
    )
    d.step(
        "linearity",
        Chain(Inner(W, M), "=", SumOver(lj * Inner(W, A), j)),
        "the inner product is linear in its second argument.",
        All(_cases("linear"), sh),
    )
    d.step(
        "weak duality",
        Chain(SumOver(lj * Inner(W, A), j) - SumOver(lj, j), "=", SumOver(lj * (Inner(W, A) - 1), j), ">=", 0),
        "for feasible W (every margin 1 + m_j with m_j >= 0) and lambda >= 0; so any dual-feasible lambda bounds the "
        "optimum from below: the gap between the nuclear norm of W and the multiplier sum certifies W.",
        All(_cases("gap"), sh),
    )
    s1, s2 = symbol("sigma", 1), symbol("sigma", 2)
    d.step(
        "spectral-norm certificate",
        Chain(
            sp.Function("det")(sp.Symbol("x") * sp.Identity(2) - M.T * M),
            "=",
            (sp.Symbol("x") - s1**2) * (sp.Symbol("x") - s2**2),
            where=Chain(M, "=", U * sp.MatrixSymbol("Sigma", 2, 2) * V.T),
        ),
        "the eigenvalues of M^T M are the squared singular values, so the spectral norm is at most 1 exactly when "
        "I - M^T M is positive semidefinite (an exact or interval check of that matrix proves dual feasibility).",
        _spectral(),
    )
