r"""``nuclear-variational``: $\min_{KQ^\top=W}\frac12(\|K\|_F^2+\|Q\|_F^2)=\|W\|_\star$, attained by the balanced
factorisation $K=U\Sigma^{1/2}$, $Q=V\Sigma^{1/2}$ (claim ``nuclear-variational``).

The balanced factors are proved to reproduce $W$ and to cost $\frac12\sum_r\sigma_r(\|u_r\|^2+\|v_r\|^2)$ for general
$d$ in index notation ($K_{ar}=U_{ar}p_r$, $Q_{br}=V_{br}p_r$ with $\sigma_r=p_r^2$; sums exchanged by
:func:`attsvm.symbolic.sums.reduce`); unit singular vectors then give $\sum_r\sigma_r$. Orthogonality of the
singular vectors and Hölder's inequality for Schatten norms are premises; the exact $2\times2$ check with rational
rotations (Cayley) $U,V$ and $\Sigma^{1/2}=\mathrm{diag}(p)$ stays as second evidence of the whole chain."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic import sums
from attsvm.symbolic.checks import Equal, Nonneg, Symbolic
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import index, indexed, matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Norm, SumOver, in_order

# ---------------------------------------------------------------------- index notation (general d)
d = symbol("d")
a, b, r, r2 = (index(c) for c in ("a", "b", "r", "r'"))
U = indexed("U")  # U[a, r]: entry a of u_r
V = indexed("V")
pp = indexed("p", positive=None, nonnegative=True)  # p_r = sqrt(sigma_r)
sig = indexed("sigma", positive=None, nonnegative=True)


def _sqrt_sub(e):
    """sigma_r = p_r^2: the singular values in terms of their square roots."""
    return sums.substitute(e, sig, lambda x: pp[x] ** 2)


def _reproduce_check() -> Symbolic:
    KQ = sp.Sum(U[a, r] * pp[r] * V[b, r] * pp[r], (r, 1, d))  # (K Q^T)_{ab} = sum_r K_{ar} Q_{br}
    W = sp.Sum(U[a, r2] * sig[r2] * V[b, r2], (r2, 1, d))
    return Symbolic(
        KQ,
        W,
        [d],
        method=lambda e: sums.reduce(_sqrt_sub(e)),
        what=("entry ", sp.Tuple(a, b), ", with ", Chain(sig[r], "=", pp[r] ** 2)),
    )


def _cost_check() -> Symbolic:
    K2 = sp.Sum((U[a, r] * pp[r]) ** 2, (a, 1, d), (r, 1, d))
    Q2 = sp.Sum((V[b, r] * pp[r]) ** 2, (b, 1, d), (r, 1, d))
    rhs = sp.Sum(sig[r2] * (sp.Sum(U[a, r2] ** 2, (a, 1, d)) + sp.Sum(V[b, r2] ** 2, (b, 1, d))), (r2, 1, d)) / 2
    return Symbolic(
        (K2 + Q2) / 2,
        rhs,
        [d],
        method=lambda e: sums.reduce(_sqrt_sub(e)),
        what="index notation, finite sums exchanged",
    )


# ---------------------------------------------------------------------- the 2 x 2 instance (second evidence)
def cayley(th: sp.Expr) -> sp.Matrix:
    r"""A rotation with rational entries in $\theta$."""
    return sp.Matrix([[1 - th**2, -2 * th], [2 * th, 1 - th**2]]) / (1 + th**2)


def _svd():
    Uc, Vc = cayley(symbol("theta", 1)), cayley(symbol("theta", 2))
    p = [symbol("p", 1), symbol("p", 2)]
    S = sp.diag(p[0] ** 2, p[1] ** 2)
    Sh = sp.diag(*p)
    return Uc, Vc, S, Sh, p


INSTANCE = "two by two, rotations rational in their parameter"


@derivation(
    name="nuclear-variational", title="The nuclear norm as a balanced factorisation", claim="nuclear-variational"
)
def nuclear_variational(dv: Derivation) -> None:
    rs = sp.Symbol("r")
    W, K, Q = matrix_symbol("W", "d", "d"), matrix_symbol("K", "d", "d"), matrix_symbol("Q", "d", "d")
    Um, Vm = matrix_symbol("U", "d", "d"), matrix_symbol("V", "d", "d")
    S = sp.MatrixSymbol("Sigma", symbol("d"), symbol("d"))
    u_r, v_r = matrix_symbol("u", "d", 1, "r"), matrix_symbol("v", "d", 1, "r")
    s_r = symbol("sigma", "r")
    Uc, Vc, Sc, Sh, p = _svd()
    Kc, Qc = Uc * Sh, Vc * Sh
    Sr = lambda body: SumOver(body, rs)  # noqa: E731
    dv.define((u_r, v_r), "the columns of the two orthogonal factors of the singular value decomposition.")
    dv.define(S, ("the diagonal matrix of the singular values ", s_r, "."))
    dv.define(symbol("p", "r"), ("the square root of the singular value ", s_r, " in the two by two example."))
    dv.premise(
        "singular value decomposition",
        Chain(W, "=", Um * S * Vm.T, where=Chain(Norm(W, "*"), "=", Sr(s_r))),
        (
            "orthogonal ",
            Um,
            " and ",
            Vm,
            " with columns ",
            u_r,
            " and ",
            v_r,
            ", singular values ",
            Chain(s_r, ">=", 0),
            "; the nuclear norm is their sum. Factors ",
            K,
            " and ",
            Q,
            " with ",
            symbol("d"),
            " columns suffice, as the rank is at most ",
            symbol("d"),
            ".",
        ),
    )
    dv.step(
        "orthogonality",
        Chain(matrix_symbol("U", 2, 2).T * matrix_symbol("U", 2, 2), "=", sp.Identity(2)),
        "the Cayley rotations of the two by two example are exactly orthogonal.",
        Equal(Uc.T * Uc, sp.eye(2), "cancel", what=INSTANCE),
    )
    dv.step(
        "the balanced factors reproduce W",
        Chain(K * Q.T, "=", W, where=Chain(K, "=", Um * S ** sp.Rational(1, 2))),
        (
            "and ",
            Chain(Q, "=", Vm * S ** sp.Rational(1, 2)),
            "; the square roots of the diagonal multiply back to ",
            S,
            ".",
        ),
        _reproduce_check(),
        evidence=Equal(Kc * Qc.T, Uc * Sc * Vc.T, "cancel", what=INSTANCE),
    )
    dv.step(
        "the balanced factors attain the nuclear norm",
        Chain(
            (Norm(K, "F") ** 2 + Norm(Q, "F") ** 2) / 2,
            "=",
            Sr(s_r * in_order(Norm(u_r) ** 2, Norm(v_r) ** 2)) / 2,
            "=",
            Sr(s_r),
            "=",
            Norm(W, "*"),
        ),
        "the first equality for every factorisation of this form; the singular vectors are unit vectors.",
        _cost_check(),
        evidence=Equal((B.fro2(Kc) + B.fro2(Qc)) / 2, Sc.trace(), "cancel", what=INSTANCE),
    )
    x, y = sp.Symbol("x", nonnegative=True), sp.Symbol("y", nonnegative=True)
    dv.step(
        "arithmetic-geometric mean",
        Chain((Norm(K, "F") ** 2 + Norm(Q, "F") ** 2) / 2, ">=", Norm(K, "F") * Norm(Q, "F")),
        ("the difference is half the square of ", in_order(Norm(K, "F"), -Norm(Q, "F")), "."),
        Nonneg((x**2 + y**2) / 2 - x * y, (x - y) ** 2 / 2, what="for all nonnegative numbers"),
    )
    dv.premise(
        "Hölder for Schatten norms",
        Chain(Norm(K * Q.T, "*"), "<=", Norm(K, "F") * Norm(Q, "F")),
        "cited: so every factorisation costs at least the nuclear norm, and the balanced one attains it.",
    )
