r"""``attsvm-nuc-dual``: the spectral-norm dual of Att-SVM⋆ (nuclear norm), a duality-gap certificate.

Primal $\min\|W\|_\star$ s.t. $\langle W,A_j\rangle\ge1$; dual $\max_{\lambda\ge0}\mathbf 1^\top\lambda$ s.t.
$\|M\|_2\le1$, $M=\sum_j\lambda_jA_j$. For feasible $W$ and dual-feasible $\lambda$ the chain
$\|W\|_\star\ge\langle W,M\rangle=\sum_j\lambda_j\langle W,A_j\rangle\ge\mathbf 1^\top\lambda$ is proved for general
$m,d$ in index notation: $W=\sum_r\sigma_ru_rv_r^\top$ (entries $\sum_rU_{ar}\sigma_rV_{br}$), $M$ entries
$\sum_j\lambda_jA_{jab}$, and every inequality is an identity with a manifestly nonnegative right-hand side whose
nonnegative symbols are the hypotheses: $\sigma_r\ge0$, $\lambda_j\ge0$, the margin slacks
$s_j=\langle W,A_j\rangle-1\ge0$ (primal feasibility), $e=1-\|M\|_2\ge0$ (dual feasibility) and
$c_r=\|M\|_2-u_r^\top Mv_r\ge0$ (the definition of the spectral norm, for unit singular vectors). Each check
substitutes their definitions and decides the identity with :func:`attsvm.symbolic.sums.reduce`. The first
inequality is the trace duality (Hölder) of the nuclear and spectral norms, proved here from the SVD."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import sums
from attsvm.symbolic.checks import All, Equal, Nonneg, Symbolic, SymbolicNonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import AsScalar, Chain, Inner, Norm, SumOver, in_order

SHAPES = ((1, 3, 2), (2, 2, 2), (2, 2, 3))

# ---------------------------------------------------------------------- index notation (general m, d)
m, d = symbol("m", integer=True, positive=True), symbol("d")
j, r, a, b = (index(c) for c in ("j", "r", "a", "b"))
w = indexed("w")  # a generic W
Mg = indexed("M")  # a generic M
A = indexed("A")  # A[j, a, b]
U = indexed("U")  # U[a, r]: entry a of u_r
V = indexed("V")
lam = indexed("lam")
sigma = indexed("sigma", positive=None, nonnegative=True)
slack = indexed("s", positive=None, nonnegative=True)  # s_j = <W, A_j> - 1
spec = indexed("c", nonnegative=True)  # c_r = ||M||_2 - u_r^T M v_r
e = sp.Symbol("e", nonnegative=True)  # e = 1 - ||M||_2
mu = sp.Symbol("normM")  # ||M||_2, any value: only the slacks e, c_r carry the hypotheses


def fro(f, g) -> sp.Expr:
    r"""$\langle F,G\rangle$ of two $d\times d$ entry functions (:func:`attsvm.symbolic.sums.frobenius`)."""
    return sums.frobenius(f, g, d, a, b)


def svd(x, y) -> sp.Expr:
    r"""$W_{xy}=\sum_{r'}U_{xr'}\sigma_{r'}V_{yr'}$ (its own summation index)."""
    r2 = index("r'")
    return sp.Sum(U[x, r2] * sigma[r2] * V[y, r2], (r2, 1, d))


def dual_matrix(x, y) -> sp.Expr:
    r"""$M_{xy}=\sum_{j'}\lambda_{j'}A_{j'xy}$."""
    j2 = index("j'")
    return sp.Sum(lam[j2] * A[j2, x, y], (j2, 1, m))


def generic_w(x, y):
    return w[x, y]


def generic_m(x, y):
    return Mg[x, y]


def A_of(c):
    return sums.entries(A, c)


def nuclear() -> sp.Expr:
    return sp.Sum(sigma[r], (r, 1, d))


def bilinear(Mf, rr) -> sp.Expr:
    r"""$u_r^\top Mv_r=\sum_{a,b}U_{ar}M_{ab}V_{br}$."""
    return sp.Sum(U[a, rr] * Mf(a, b) * V[b, rr], (a, 1, d), (b, 1, d))


def _slacks(Wf, Mf):
    """The substitution of every hypothesis symbol by its definition, then the normal form."""

    def method(x):
        x = sums.substitute(x, slack, lambda c: fro(Wf, A_of(c)) - 1)
        x = sums.substitute(x, spec, lambda rr: mu - bilinear(Mf, rr))
        return sums.reduce(x.subs(e, 1 - mu))

    return method


EXCHANGED = "index notation, finite sums exchanged"


def _svd_check() -> Symbolic:
    rhs = sp.Sum(sigma[r] * bilinear(generic_m, r), (r, 1, d))
    return Symbolic(fro(svd, generic_m), rhs, [d], method=sums.reduce, what=EXCHANGED)


def _holder_check() -> SymbolicNonneg:
    expr = nuclear() - fro(svd, generic_m)
    cert = sp.Sum(sigma[r] * e, (r, 1, d)) + sp.Sum(sigma[r] * spec[r], (r, 1, d))
    return SymbolicNonneg(
        expr, cert, [d], method=_slacks(svd, generic_m), what="with the definitions of both slacks substituted"
    )


def _linear_check() -> Symbolic:
    rhs = sp.Sum(lam[j] * fro(generic_w, A_of(j)), (j, 1, m))
    return Symbolic(fro(generic_w, dual_matrix), rhs, [m, d], method=sums.reduce, what=EXCHANGED)


def _margin_check() -> SymbolicNonneg:
    expr = sp.Sum(lam[j] * fro(generic_w, A_of(j)), (j, 1, m)) - sp.Sum(lam[j], (j, 1, m))
    cert = sp.Sum(lam[j] * slack[j], (j, 1, m))
    return SymbolicNonneg(
        expr, cert, [m, d], method=_slacks(generic_w, generic_m), what="with the margin slacks substituted"
    )


def _chain_check() -> SymbolicNonneg:
    expr = nuclear() - sp.Sum(lam[j], (j, 1, m))
    cert = (
        sp.Sum(sigma[r] * e, (r, 1, d)) + sp.Sum(sigma[r] * spec[r], (r, 1, d)) + sp.Sum(lam[j] * slack[j], (j, 1, m))
    )
    return SymbolicNonneg(
        expr,
        cert,
        [m, d],
        method=_slacks(svd, dual_matrix),
        what=(
            "the singular value decomposition of ",
            matrix_symbol("W", "d", "d"),
            ", the multiplier combination ",
            matrix_symbol("M", "d", "d"),
            " and every slack substituted",
        ),
    )


# ---------------------------------------------------------------------- instances (second evidence)
def cayley(th: sp.Expr) -> sp.Matrix:
    r"""The rotation $\frac{1}{1+\theta^2}\begin{pmatrix}1-\theta^2&-2\theta\\2\theta&1-\theta^2\end{pmatrix}$
    (rational in $\theta$)."""
    return sp.Matrix([[1 - th**2, -2 * th], [2 * th, 1 - th**2]]) / (1 + th**2)


def _cases(kind: str):
    def cases():
        for n, T, dd in SHAPES:
            labels, As, _, _ = B.constraint_matrices(n, T, dd)
            lamv = [symbol("lam", ii, tt) for ii, tt in labels]
            M = sp.zeros(dd, dd)
            for lj, Aj in zip(lamv, As):
                M += lj * Aj
            tag = f"n={n}, T={T}, d={dd}"
            if kind == "linear":
                W = B.weights(dd)
                yield tag, Equal(B.inner(W, M), sum((lj * B.inner(W, Aj) for lj, Aj in zip(lamv, As)), sp.Integer(0)))
            elif kind == "gap":
                mj = [symbol("m", ii, tt) for ii, tt in labels]  # margins 1 + m_j of a feasible W
                yield (
                    tag,
                    Nonneg(sum((lj * (1 + x) for lj, x in zip(lamv, mj)), sp.Integer(0)) - sum(lamv, sp.Integer(0))),
                )

    return cases


def _spectral():
    th, ph = symbol("theta", 1), symbol("theta", 2)
    s1, s2, x = symbol("sigma", 1), symbol("sigma", 2), sp.Symbol("x")
    M = cayley(th) * sp.diag(s1, s2) * cayley(ph).T
    lhs = (x * sp.eye(2) - M.T * M).det()
    return Equal(lhs, (x - s1**2) * (x - s2**2), "cancel", what="two by two, rotations rational in their parameter")


def _shapes_prose(shapes) -> tuple:
    """Prose naming the instance shapes: generic instances with n, T, d in turn (1, 3, 2), ..."""
    nTd = sp.Tuple(symbol("n"), symbol("T"), symbol("d"))
    listed = ", ".join("(" + ", ".join(map(str, s)) + ")" for s in shapes)
    return ("generic instances, every entry a symbol, with ", nTd, " in turn " + listed)


@derivation(name="attsvm-nuc-dual", title="The dual of the nuclear-norm Att-SVM", claim="svm-kkt")
def attsvm_nuc_dual(dv: Derivation) -> None:
    js, rs = sp.Symbol("j"), sp.Symbol("r")
    W, M, Aj = matrix_symbol("W", "d", "d"), matrix_symbol("M", "d", "d"), matrix_symbol("A", "d", "d", "j")
    u_r, v_r = matrix_symbol("u", "d", 1, "r"), matrix_symbol("v", "d", 1, "r")
    lj, sr = symbol("lam", "j"), symbol("sigma", "r")
    lamv = matrix_symbol("lam", "m", 1)
    Sj = lambda body: SumOver(body, js)  # noqa: E731
    Sr = lambda body: SumOver(body, rs)  # noqa: E731
    uMv = AsScalar(u_r.T * M * v_r)
    sh = _shapes_prose(SHAPES)
    dv.summary = (
        "Every inequality below is an identity whose right-hand side is a sum of products of nonnegative "
        "quantities: the singular values, the multipliers and the slacks of the hypotheses.",
    )
    mm = symbol("m", integer=True, positive=True)
    dv.define(
        Aj,
        (
            "the constraint matrix of constraint ",
            js,
            " of Att-SVM (derivation attsvm-kkt), ",
            Chain(1, "<=", js, "<=", mm),
            ".",
        ),
    )
    dv.define(lj, ("the multiplier of constraint ", js, "; ", lamv, " is the vector of the multipliers."))
    dv.define(
        ((u_r, v_r), sr),
        (
            "the left and right singular vectors (orthonormal) and the singular values of ",
            W,
            " in steps {step:singular-value-decomposition} to {step:weak-duality}, of ",
            M,
            " in step {step:spectral-norm-certificate}.",
        ),
    )
    dv.define(
        sp.MatrixSymbol("Sigma", 2, 2),
        ("the diagonal matrix of the singular values of a two by two matrix, between two orthogonal matrices."),
    )
    dv.premise(
        "primal and dual",
        Chain(Norm(M, "2"), "<=", 1, where=Chain(M, "=", Sj(lj * Aj))),
        (
            "primal: minimise the nuclear norm of ",
            W,
            " subject to the Att-SVM constraints ",
            Chain(Inner(W, Aj), ">=", 1),
            "; dual: maximise the multiplier sum over ",
            Chain(lamv, ">=", 0),
            " subject to this spectral-norm bound.",
        ),
    )
    dv.premise(
        "singular value decomposition",
        Chain(W, "=", Sr(sr * u_r * v_r.T), where=Chain(Norm(W, "*"), "=", Sr(sr))),
        (
            "orthonormal singular vectors ",
            u_r,
            " and ",
            v_r,
            ", singular values ",
            Chain(sr, ">=", 0),
            "; the nuclear norm is their sum.",
        ),
    )
    dv.premise(
        "spectral norm",
        Chain(uMv, "<=", Norm(M, "2")),
        (
            "the spectral norm is the largest value of the bilinear form of ",
            M,
            " on pairs of unit vectors (Cauchy and Schwarz), and the singular vectors are unit vectors.",
        ),
    )
    dv.step(
        "the inner product in the singular basis",
        Chain(Inner(W, M), "=", Sr(sr * uMv)),
        ("substitute the singular value decomposition of ", W, " into the Frobenius inner product."),
        _svd_check(),
    )
    dv.step(
        "trace duality",
        Chain(
            in_order(Norm(W, "*"), -Inner(W, M)),
            "=",
            in_order(Sr(sr * (1 - Norm(M, "2"))), Sr(sr * in_order(Norm(M, "2"), -uMv))),
            ">=",
            0,
        ),
        (
            "the first factor of each term is a singular value, the second is nonnegative by dual feasibility and by "
            "the definition of the spectral norm. This is the trace duality of the nuclear and spectral norms (von "
            "Neumann; Hölder for Schatten norms) in the form needed: ",
            Chain(Inner(W, M), "<=", Norm(W, "*")),
            " whenever ",
            Chain(Norm(M, "2"), "<=", 1),
            ".",
        ),
        _holder_check(),
    )
    dv.step(
        "linearity",
        Chain(Inner(W, M), "=", Sj(lj * Inner(W, Aj))),
        "the inner product is linear in its second argument.",
        _linear_check(),
        evidence=All(_cases("linear"), sh),
    )
    dv.step(
        "margins",
        Chain(
            in_order(Sj(lj * Inner(W, Aj)), -Sj(lj)),
            "=",
            Sj(lj * symbol("s", "j")),
            ">=",
            0,
            where=Chain(symbol("s", "j"), "=", Inner(W, Aj) - 1),
        ),
        (
            "for a feasible ",
            W,
            " every slack ",
            symbol("s", "j"),
            " is nonnegative, and so is every multiplier.",
        ),
        _margin_check(),
        evidence=All(_cases("gap"), sh),
    )
    dv.step(
        "weak duality",
        Chain(Norm(W, "*"), ">=", Inner(W, M), "=", Sj(lj * Inner(W, Aj)), ">=", Sj(lj)),
        (
            "steps {step:trace-duality} to {step:margins}, checked here as one identity: the nuclear norm of any "
            "feasible ",
            W,
            " minus the multiplier sum of any dual-feasible ",
            lamv,
            " is a sum of nonnegative terms. So every dual-feasible point bounds the optimum from below, and the gap "
            "between the two sums certifies how far a feasible ",
            W,
            " is from optimal.",
        ),
        _chain_check(),
    )
    s1, s2, x = symbol("sigma", 1), symbol("sigma", 2), sp.Symbol("x")
    M2 = matrix_symbol("M", 2, 2)
    U2, V2 = matrix_symbol("U", 2, 2), matrix_symbol("V", 2, 2)
    I_MM = in_order(sp.Identity(2), -M2.T * M2)
    dv.step(
        "spectral-norm certificate",
        Chain(
            sp.Function("det")(in_order(x * sp.Identity(2), -M2.T * M2)),
            "=",
            in_order(x, -(s1**2)) * in_order(x, -(s2**2)),
            where=Chain(M2, "=", U2 * sp.MatrixSymbol("Sigma", 2, 2) * V2.T),
        ),
        (
            "the eigenvalues of ",
            M2.T * M2,
            " are the squared singular values, so ",
            Chain(Norm(M2, "2"), "<=", 1),
            " exactly when ",
            I_MM,
            " is positive semidefinite (an exact or interval check of that matrix proves dual feasibility); shown "
            "for a two by two matrix.",
        ),
        _spectral(),
    )
