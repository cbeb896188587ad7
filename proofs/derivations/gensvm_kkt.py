r"""``gensvm-kkt``: KKT conditions of Gen-SVM and the finite part $W^{fin}$ (claim ``svm-kkt``).

$\min\frac12\|W\|_F^2$ s.t. $\langle W,B_e\rangle=0$ ($B_e=(x_{it}-x_{i\tau})z_i^\top$, $t,\tau\in\mathcal O_i$)
and $\langle W,A_j\rangle\ge1$ ($t\in\mathcal O_i$, $\tau\notin\mathcal O_i$): $W=\sum\lambda_jA_j+\sum\nu_eB_e$,
$\|W\|_F^2=\mathbf 1^\top\lambda$. $W^{fin}=\arg\min\|W\|_F$ s.t. $\langle W,B_e\rangle=c_e$: $W^{fin}=\sum\nu_eB_e$
with $G_B\nu=c$."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import All, Equal
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Inner, Norm, Partial, SumOver

# (T, d, selected sets O_i, 1-based) per instance
INSTANCES = ((3, 2, ({1, 2},)), (3, 2, ({1, 2}, {1})), (3, 2, ({1, 2}, {2, 3})), (3, 3, ({1, 2}, {2, 3})))


def gen_constraints(T: int, d: int, sets):
    """Equality matrices B_e and inequality matrices A_j of a generic instance."""
    Bs, As = [], []
    for i, O in enumerate(sets, 1):
        X = sp.Matrix(T, d, lambda t, j, i=i: symbol("x", i, t + 1, j + 1))
        z = sp.Matrix(d, 1, lambda j, _, i=i: symbol("z", i, j + 1))
        Os = sorted(O)
        for a, b in zip(Os, Os[1:]):
            Bs.append((X.row(a - 1) - X.row(b - 1)).T * z.T)
        for t in Os:
            for tau in range(1, T + 1):
                if tau not in O:
                    As.append((X.row(t - 1) - X.row(tau - 1)).T * z.T)
    return Bs, As


def _cases(kind: str, instances=INSTANCES):
    def cases():
        for T, d, sets in instances:
            Bs, As = gen_constraints(T, d, sets)
            lam = [symbol("lam", j + 1) for j in range(len(As))]
            nu = [symbol("nu", e + 1) for e in range(len(Bs))]
            Wst = sp.zeros(d, d)
            for l, A in zip(lam, As):
                Wst += l * A
            for v, Bm in zip(nu, Bs):
                Wst += v * Bm
            tag = f"T={T}, d={d}, O={sets}"
            if kind == "stationarity":
                W = B.weights(d)
                Lag = B.lagrangian(W, As, lam) - sum((v * B.inner(W, Bm) for v, Bm in zip(nu, Bs)), sp.Integer(0))
                yield tag, Equal(B.diff_entries(Lag, W), W - Wst)
            elif kind == "norm":
                rhs = sum((l * (B.inner(Wst, A) - 1) for l, A in zip(lam, As)), sp.Integer(0))
                rhs += sum((v * B.inner(Wst, Bm) for v, Bm in zip(nu, Bs)), sp.Integer(0))
                yield tag, Equal(B.fro2(Wst) - sum(lam, sp.Integer(0)), rhs)
            elif kind == "fin" and d == 2:
                # W_fin = sum_e nu_e B_e with nu = adj(G) c / det(G): check G adj(G) c = det(G) c (polynomial identity)
                m = len(Bs)
                GB = sp.Matrix([[B.inner(P, Qm) for Qm in Bs] for P in Bs])
                c = sp.Matrix([symbol("c", e + 1) for e in range(m)])
                nu_num = GB.adjugate() * c
                Wnum = sp.zeros(d, d)
                for v, Bm in zip(nu_num, Bs):
                    Wnum += v * Bm
                yield tag, Equal(sp.Matrix([B.inner(Wnum, Bm) for Bm in Bs]), GB.det() * c)

    return cases


@derivation(
    name="gensvm-kkt", title="KKT conditions of Gen-SVM and its finite part", claim="svm-kkt", ci={"full": False}
)
def gensvm_kkt(d: Derivation, full: bool = True) -> None:
    instances = INSTANCES if full else INSTANCES[:3]
    j, e = sp.Symbol("j"), sp.Symbol("e")
    W, A, Bm = matrix_symbol("W", "d", "d"), matrix_symbol("A", "d", "d", "j"), matrix_symbol("B", "d", "d", "e")
    lj, ne, ce = symbol("lam", "j"), symbol("nu", "e"), symbol("c", "e")
    Lag = sp.Function("Lag")
    sh = "generic instances (T, d, selected sets) " + "; ".join(f"({T}, {dd}, {s})" for T, dd, s in instances)
    d.premise(
        "program",
        Chain(Inner(W, Bm), "=", 0, where=Chain(Inner(W, A), ">=", 1)),
        "Gen-SVM: minimise half the squared Frobenius norm; equalities inside each selected set, margins 1 to the "
        "rest.",
    )
    lagr = Norm(W, "F") ** 2 / 2 - SumOver(lj * (Inner(W, A) - 1), j) - SumOver(ne * Inner(W, Bm), e)
    d.premise("Lagrangian", Chain(Lag(W, symbol("lam"), symbol("nu")), "=", lagr), "lambda >= 0, nu free.")
    d.step(
        "stationarity",
        Chain(
            Partial(Lag(W, symbol("lam"), symbol("nu")), W), "=", W - SumOver(lj * A, j) - SumOver(ne * Bm, e), "=", 0
        ),
        "gradient of a convex quadratic.",
        All(_cases("stationarity", instances), sh),
    )
    d.step(
        "norm equals the sum of the inequality multipliers",
        Chain(
            Norm(W, "F") ** 2 - SumOver(lj, j),
            "=",
            SumOver(lj * (Inner(W, A) - 1), j) + SumOver(ne * Inner(W, Bm), e),
            "=",
            0,
        ),
        "complementary slackness and the equality constraints make every term vanish.",
        All(_cases("norm", instances), sh),
    )
    Wf = matrix_symbol("Wfin", "d", "d")
    GB = matrix_symbol("G", "k", "k")
    nu, c = matrix_symbol("nu", "k", 1), matrix_symbol("c", "k", 1)
    d.step(
        "finite part",
        Chain(Inner(Wf, Bm), "=", ce, where=Chain(Wf, "=", SumOver(ne * Bm, e))),
        (
            "minimum-norm solution of the equalities; its coefficients solve ",
            Chain(GB * nu, "=", c),
            " with the Gram matrix of the B_e (c_e = log(s_t / s_tau)).",
        ),
        All(_cases("fin", instances), "the instances with d = 2, by the adjugate (Cramer) formula"),
    )
