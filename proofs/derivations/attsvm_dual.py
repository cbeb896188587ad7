r"""``attsvm-dual``: the dual of Att-SVM, $\max_{\lambda\ge0}\mathbf 1^\top\lambda-\frac12\lambda^\top G\lambda$,
$G_{(it),(j\tau)}=(x_{i\alpha_i}-x_{it})^\top(x_{j\alpha_j}-x_{j\tau})\,z_i^\top z_j$, weak and strong duality."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import AsScalar, Chain, Inner, Norm, SumOver

SHAPES = ((1, 3, 2), (2, 2, 2), (2, 3, 2), (2, 2, 3))


def _gram(A, D, Z):
    m = len(A)
    return sp.Matrix(m, m, lambda p, q: (D[p].T * D[q])[0] * (Z[p].T * Z[q])[0])


def _cases(kind: str):
    def cases():
        for n, T, d in SHAPES:
            labels, A, D, Z = B.constraint_matrices(n, T, d)
            lam = sp.Matrix([symbol("lam", i, t) for i, t in labels])
            Wst = sp.zeros(d, d)
            for l, Aj in zip(lam, A):
                Wst += l * Aj
            G = _gram(A, D, Z)
            one = sp.ones(len(A), 1)
            dual = (one.T * lam)[0] - (lam.T * G * lam)[0] / 2
            tag = f"n={n}, T={T}, d={d}"
            if kind == "gram":
                yield tag, Equal(sp.Matrix([[B.inner(P, Qm) for Qm in A] for P in A]), G)
            elif kind == "dual":
                yield tag, Equal(B.lagrangian(Wst, A, list(lam)), dual)
            elif kind == "weak":
                W = B.weights(d)
                slack = sum((l * (B.inner(W, Aj) - 1) for l, Aj in zip(lam, A)), sp.Integer(0))
                yield tag, Equal(B.fro2(W) / 2 - dual, B.fro2(W - Wst) / 2 + slack)
            elif kind == "quad":
                yield tag, Equal((lam.T * G * lam)[0], B.fro2(Wst))

    return cases


@derivation(name="attsvm-dual", title="The dual of Att-SVM", claim="svm-kkt")
def attsvm_dual(d: Derivation) -> None:
    i, t, j, tau = (sp.Symbol(c) for c in ("i", "t", "j", "tau"))
    W = matrix_symbol("W", "d", "d")
    A_it, A_jt = matrix_symbol("A", "d", "d", "i", "t"), matrix_symbol("A", "d", "d", "j", "tau")
    D_it, D_jt = matrix_symbol("D", "d", 1, "i", "t"), matrix_symbol("D", "d", 1, "j", "tau")
    z_i, z_j = matrix_symbol("z", "d", 1, "i"), matrix_symbol("z", "d", 1, "j")
    lam = matrix_symbol("lam", "m", 1)
    l_it = symbol("lam", "i", "t")
    G = matrix_symbol("G", "m", "m")
    g = sp.Function("dual")
    sh = "generic instances (n,T,d) in " + ", ".join(map(str, SHAPES))
    d.premise(
        "Lagrangian and its minimiser",
        Chain(W, "=", SumOver(l_it * A_it, (i, t)), where=Chain(A_it, "=", D_it * z_i.T)),
        "derivation attsvm-kkt: the Lagrangian is minimised in W at the lambda-combination; D is the token difference.",
    )
    d.step(
        "Gram matrix",
        Chain(Inner(A_it, A_jt), "=", D_it.T * D_jt * (z_i.T * z_j)),
        "the trace of a product of two rank-one matrices.",
        All(_cases("gram"), sh),
    )
    d.step(
        "dual function",
        Chain(g(lam), "=", SumOver(l_it, (i, t)) - AsScalar(lam.T * G * lam) / 2),
        "substitute the minimiser into the Lagrangian.",
        All(_cases("dual"), sh),
    )
    Wv = matrix_symbol("W", "d", "d")
    d.step(
        "weak duality",
        Chain(
            Norm(Wv, "F") ** 2 / 2 - g(lam),
            "=",
            Norm(Wv - SumOver(l_it * A_it, (i, t)), "F") ** 2 / 2 + SumOver(l_it * (Inner(Wv, A_it) - 1), (i, t)),
            ">=",
            0,
        ),
        "for every W and lambda; both terms are nonnegative when W is feasible and lambda >= 0.",
        All(_cases("weak"), sh),
    )
    d.step(
        "strong duality at the optimum",
        Chain(AsScalar(lam.T * G * lam), "=", Norm(SumOver(l_it * A_it, (i, t)), "F") ** 2),
        "so at the KKT point, where the squared norm equals the multiplier sum (attsvm-kkt), the dual value is half "
        "the multiplier sum, which is the primal value: no duality gap. Primal infeasible means the dual is unbounded.",
        All(_cases("quad"), sh),
    )
