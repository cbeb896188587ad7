r"""``gensvm-kkt``: KKT conditions of Gen-SVM and the finite part $W^{fin}$ (claim ``svm-kkt``).

$\min\frac12\|W\|_F^2$ s.t. $\langle W,B_e\rangle=0$ ($B_e=(x_{it}-x_{i\tau})z_i^\top$, $t,\tau\in\mathcal O_i$)
and $\langle W,A_j\rangle\ge1$ ($t\in\mathcal O_i$, $\tau\notin\mathcal O_i$): $W=\sum\lambda_jA_j+\sum\nu_eB_e$,
$\|W\|_F^2=\mathbf 1^\top\lambda$. $W^{fin}=\arg\min\|W\|_F$ s.t. $\langle W,B_e\rangle=c_e$: $W^{fin}=\sum\nu_eB_e$
with $G_B\nu=c$.

Proved for general sizes in index notation ($m$ inequalities $A_j$, $k$ equalities $B_e$, entries $w_{pq}$, the
Frobenius inner product as $\sum_{p,q=1}^d$; :func:`attsvm.symbolic.sums.reduce` exchanges the sums). The
solvability of $G_B\nu=c$ (independent $B_e$) is a premise; the generic instances of the earlier version, and the
adjugate (Cramer) solution on the instances with $d=2$, stay as second evidence."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import sums
from attsvm.symbolic.checks import All, Equal, Symbolic
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Elem, Grad, Inner, Norm, RealSpace, SumOver, in_order

# (T, d, selected sets O_i, 1-based) per instance
INSTANCES = ((3, 2, ({1, 2},)), (3, 2, ({1, 2}, {1})), (3, 2, ({1, 2}, {2, 3})), (3, 3, ({1, 2}, {2, 3})))

# ---------------------------------------------------------------------- index notation (general m, k, d)
m, kk, d = symbol("m", integer=True, positive=True), sp.Symbol("k", integer=True, positive=True), symbol("d")
j, e, e2, p, q, a, b = (index(c) for c in ("j", "e", "e'", "p", "q", "a", "b"))
w = indexed("w")
A = indexed("A")  # A[j, p, q]
Bm = indexed("B")  # B[e, p, q]
lam = indexed("lam")
nu = indexed("nu")


def fro(f, g) -> sp.Expr:
    r"""$\langle F,G\rangle$ of two $d\times d$ entry functions (:func:`attsvm.symbolic.sums.frobenius`)."""
    return sums.frobenius(f, g, d, p, q)


W_of = sums.entries(w)  # noqa: N816


def A_of(c):
    return sums.entries(A, c)


def B_of(c):
    return sums.entries(Bm, c)


def stationary(x, y) -> sp.Expr:
    r"""$(\sum_{j'}\lambda_{j'}A_{j'}+\sum_{e'}\nu_{e'}B_{e'})_{xy}$."""
    j2 = index("j'")
    return sp.Sum(lam[j2] * A[j2, x, y], (j2, 1, m)) + sp.Sum(nu[e2] * Bm[e2, x, y], (e2, 1, kk))


def finite(x, y) -> sp.Expr:
    r"""$W^{fin}_{xy}=\sum_{e'}\nu_{e'}B_{e'xy}$."""
    return sp.Sum(nu[e2] * Bm[e2, x, y], (e2, 1, kk))


EXCHANGED = "index notation, finite sums exchanged"


def _stationarity_check() -> Symbolic:
    lag = (
        fro(W_of, W_of) / 2
        - sp.Sum(lam[j] * (fro(W_of, A_of(j)) - 1), (j, 1, m))
        - sp.Sum(nu[e] * fro(W_of, B_of(e)), (e, 1, kk))
    )
    rhs = w[a, b] - sp.Sum(lam[j] * A[j, a, b], (j, 1, m)) - sp.Sum(nu[e] * Bm[e, a, b], (e, 1, kk))
    return Symbolic(
        sp.diff(lag, w[a, b]),
        rhs,
        [m, kk, d],
        method="expand",
        ranges={a: (1, d), b: (1, d)},
        what=("the derivative with respect to every entry ", w[a, b], ", in index notation"),
    )


def _norm_check() -> Symbolic:
    lhs = fro(stationary, stationary) - sp.Sum(lam[j], (j, 1, m))
    rhs = sp.Sum(lam[j] * (fro(stationary, A_of(j)) - 1), (j, 1, m)) + sp.Sum(
        nu[e] * fro(stationary, B_of(e)), (e, 1, kk)
    )
    return Symbolic(lhs, rhs, [m, kk, d], method=sums.reduce, what=EXCHANGED)


def _finite_check() -> Symbolic:
    lhs = fro(finite, B_of(e))
    rhs = sp.Sum(fro(B_of(e), B_of(e2)) * nu[e2], (e2, 1, kk))
    return Symbolic(lhs, rhs, [kk, d], method=sums.reduce, what=EXCHANGED)


def _minimum_norm_check() -> Symbolic:
    gap = lambda x, y: w[x, y] - finite(x, y)  # noqa: E731
    lhs = fro(W_of, W_of) - fro(finite, finite)
    rhs = fro(gap, gap) + 2 * sp.Sum(nu[e] * (fro(W_of, B_of(e)) - fro(finite, B_of(e))), (e, 1, kk))
    return Symbolic(lhs, rhs, [kk, d], method=sums.reduce, what=EXCHANGED)


# ---------------------------------------------------------------------- generic instances (second evidence)
def gen_constraints(T: int, d: int, sets):
    """Equality matrices B_e and inequality matrices A_j of a generic instance."""
    Bs, As = [], []
    for i, O in enumerate(sets, 1):
        X = sp.Matrix(T, d, lambda t, jj, i=i: symbol("x", i, t + 1, jj + 1))
        z = sp.Matrix(d, 1, lambda jj, _, i=i: symbol("z", i, jj + 1))
        Os = sorted(O)
        for u, v in zip(Os, Os[1:]):
            Bs.append((X.row(u - 1) - X.row(v - 1)).T * z.T)
        for t in Os:
            for tau in range(1, T + 1):
                if tau not in O:
                    As.append((X.row(t - 1) - X.row(tau - 1)).T * z.T)
    return Bs, As


def _cases(kind: str, instances=INSTANCES):
    def cases():
        for T, dd, sets in instances:
            Bs, As = gen_constraints(T, dd, sets)
            lamv = [symbol("lam", jj + 1) for jj in range(len(As))]
            nuv = [symbol("nu", ee + 1) for ee in range(len(Bs))]
            Wst = sp.zeros(dd, dd)
            for lj, Aj in zip(lamv, As):
                Wst += lj * Aj
            for v, Be in zip(nuv, Bs):
                Wst += v * Be
            tag = f"T={T}, d={dd}, O={sets}"
            if kind == "stationarity":
                W = B.weights(dd)
                Lag = B.lagrangian(W, As, lamv) - sum((v * B.inner(W, Be) for v, Be in zip(nuv, Bs)), sp.Integer(0))
                yield tag, Equal(B.diff_entries(Lag, W), W - Wst)
            elif kind == "norm":
                rhs = sum((lj * (B.inner(Wst, Aj) - 1) for lj, Aj in zip(lamv, As)), sp.Integer(0))
                rhs += sum((v * B.inner(Wst, Be) for v, Be in zip(nuv, Bs)), sp.Integer(0))
                yield tag, Equal(B.fro2(Wst) - sum(lamv, sp.Integer(0)), rhs)
            elif kind == "fin" and dd == 2:
                # W_fin = sum_e nu_e B_e with nu = adj(G) c / det(G): check G adj(G) c = det(G) c (polynomial identity)
                mm = len(Bs)
                GB = sp.Matrix([[B.inner(P, Qm) for Qm in Bs] for P in Bs])
                c = sp.Matrix([symbol("c", ee + 1) for ee in range(mm)])
                nu_num = GB.adjugate() * c
                Wnum = sp.zeros(dd, dd)
                for v, Be in zip(nu_num, Bs):
                    Wnum += v * Be
                yield tag, Equal(sp.Matrix([B.inner(Wnum, Be) for Be in Bs]), GB.det() * c)

    return cases


def _instances_prose(instances) -> tuple:
    """Prose naming the instances: sizes and selected sets."""
    Td = sp.Tuple(symbol("T"), symbol("d"))
    listed = "; ".join(
        f"({T}, {dd}) with selected sets " + ", ".join("{" + ", ".join(map(str, sorted(s))) + "}" for s in sets)
        for T, dd, sets in instances
    )
    return ("generic instances, every entry a symbol, with ", Td, " and the selected token sets in turn " + listed)


@derivation(
    name="gensvm-kkt", title="KKT conditions of Gen-SVM and its finite part", claim="svm-kkt", ci={"full": False}
)
def gensvm_kkt(dv: Derivation, full: bool = True) -> None:
    instances = INSTANCES if full else INSTANCES[:3]
    js, es = sp.Symbol("j"), sp.Symbol("e")
    W, Aj, Be = matrix_symbol("W", "d", "d"), matrix_symbol("A", "d", "d", "j"), matrix_symbol("B", "d", "d", "e")
    lj, ne, ce = symbol("lam", "j"), symbol("nu", "e"), symbol("c", "e")
    Lag = sp.Function("Lag")
    L = Lag(W, symbol("lam"), symbol("nu"))
    Sj = lambda body: SumOver(body, js)  # noqa: E731
    Se = lambda body: SumOver(body, es)  # noqa: E731
    sh = _instances_prose(instances)
    mm, kS = symbol("m", integer=True, positive=True), sp.Symbol("k", integer=True, positive=True)
    dv.summary = (
        "There are ",
        mm,
        " inequality constraints, ",
        Chain(1, "<=", js, "<=", mm),
        ", and ",
        kS,
        " equality constraints, ",
        Chain(1, "<=", es, "<=", kS),
        ".",
    )
    ii, tt, ta = sp.Symbol("i"), sp.Symbol("t"), sp.Symbol("tau")
    xit, xitau = matrix_symbol("x", "d", 1, "i", "t"), matrix_symbol("x", "d", 1, "i", "tau")
    zi = matrix_symbol("z", "d", 1, "i")
    dv.define(
        Chain((xit, zi), "in", RealSpace(d)), ("token ", tt, " and the query of input ", ii, " (THEORY section 1).")
    )
    dv.define(
        Chain(Be, "=", in_order(xit, -xitau) * zi.T),
        ("the matrix of equality ", es, ": both tokens ", tt, " and ", ta, " in the selected set of input ", ii, "."),
    )
    dv.define(
        Chain(Aj, "=", in_order(xit, -xitau) * zi.T),
        ("the matrix of inequality ", js, ": token ", tt, " selected, token ", ta, " not selected."),
    )
    dv.define((W, w[a, b]), "the attention weights, the variable of the program, and their entries.")
    dv.define((lj, ne), ("the multipliers of inequality ", js, " and of equality ", es, "."))
    dv.define(L, "the Lagrangian.")
    st, stau = symbol("s", "t"), symbol("s", "tau")
    dv.define(
        (st, stau), ("the probabilities of the tokens ", tt, " and ", ta, " of an equality at the end of training.")
    )
    dv.define(
        Chain(ce, "=", sp.log(st / stau)),
        ("the logit gap that the finite part gives the two tokens of equality ", es, "."),
    )
    dv.premise(
        "program",
        Chain(Inner(W, Be), "=", 0, where=Chain(Inner(W, Aj), ">=", 1)),
        "Gen-SVM: minimise half the squared Frobenius norm; equalities inside each selected set, margins 1 to the "
        "rest.",
    )
    lagr = Norm(W, "F") ** 2 / 2 - Sj(lj * (Inner(W, Aj) - 1)) - Se(ne * Inner(W, Be))
    dv.premise(
        "Lagrangian",
        Chain(L, "=", lagr),
        ("multipliers ", Chain(lj, ">=", 0), " of the inequalities, free multipliers ", ne, " of the equalities."),
    )
    dv.step(
        "stationarity",
        Chain(Grad(L, W), "=", in_order(W, -Sj(lj * Aj), -Se(ne * Be)), "=", 0),
        ("the Lagrangian is a convex quadratic in ", W, "; its gradient vanishes at the minimiser."),
        _stationarity_check(),
        evidence=All(_cases("stationarity", instances), sh),
    )
    dv.step(
        "norm equals the sum of the inequality multipliers",
        Chain(
            Norm(W, "F") ** 2 - Sj(lj),
            "=",
            Sj(lj * (Inner(W, Aj) - 1)) + Se(ne * Inner(W, Be)),
            "=",
            0,
        ),
        "complementary slackness and the equality constraints make every term vanish.",
        _norm_check(),
        evidence=All(_cases("norm", instances), sh),
    )
    Wf = matrix_symbol("Wfin", "d", "d")
    GB = matrix_symbol("G", "k", "k")
    nuv, cv = matrix_symbol("nu", "k", 1), matrix_symbol("c", "k", 1)
    dv.step(
        "finite part",
        Chain(Inner(Wf, Be), "=", Elem(GB * nuv, es), "=", ce, where=Chain(Wf, "=", Se(ne * Be))),
        (
            "the coefficients solve ",
            Chain(GB * nuv, "=", cv),
            " with the Gram matrix ",
            Chain(symbol("G", "e", "e'"), "=", Inner(Be, matrix_symbol("B", "d", "d", "e'"))),
            " of the equality matrices (independent, so the system is solvable).",
        ),
        _finite_check(),
        evidence=All(
            _cases("fin", instances),
            ("the instances with ", Chain(symbol("d"), "=", 2), ", by the adjugate (Cramer) formula"),
        ),
    )
    Wv = matrix_symbol("W", "d", "d")
    dv.step(
        "the finite part has minimum norm",
        Chain(
            in_order(Norm(Wv, "F") ** 2, -(Norm(Wf, "F") ** 2)),
            "=",
            in_order(Norm(in_order(Wv, -Wf), "F") ** 2, 2 * Se(ne * in_order(Inner(Wv, Be), -Inner(Wf, Be)))),
        ),
        (
            "for every ",
            Wv,
            " with the same equality values the last sum vanishes, so ",
            Wf,
            " is the solution of least Frobenius norm.",
        ),
        _minimum_norm_check(),
    )
