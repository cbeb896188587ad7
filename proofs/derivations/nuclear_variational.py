r"""``nuclear-variational``: $\min_{KQ^\top=W}\frac12(\|K\|_F^2+\|Q\|_F^2)=\|W\|_\star$, attained by the balanced
factorisation $K=U\Sigma^{1/2}$, $Q=V\Sigma^{1/2}$ (claim ``nuclear-variational``).

Checked exactly for $2\times2$ matrices with rational rotations (Cayley) $U,V$ and singular values
$\sigma_k=p_k^2$ (so $\Sigma^{1/2}=\mathrm{diag}(p)$ is rational too)."""

from __future__ import annotations

import sympy as sp

from attsvm.symbolic import builders as B
from attsvm.symbolic.checks import Equal, Nonneg
from attsvm.symbolic.derivation import Derivation, derivation
from attsvm.symbolic.notation import matrix_symbol, symbol
from attsvm.symbolic.printer import Chain, Norm


def cayley(th: sp.Expr) -> sp.Matrix:
    r"""A rotation with rational entries in $\theta$."""
    return sp.Matrix([[1 - th**2, -2 * th], [2 * th, 1 - th**2]]) / (1 + th**2)


def _svd():
    U, V = cayley(symbol("theta", 1)), cayley(symbol("theta", 2))
    p = [symbol("p", 1), symbol("p", 2)]
    S = sp.diag(p[0] ** 2, p[1] ** 2)
    Sh = sp.diag(*p)
    return U, V, S, Sh, p


@derivation(
    name="nuclear-variational", title="The nuclear norm as a balanced factorisation", claim="nuclear-variational"
)
def nuclear_variational(d: Derivation) -> None:
    W, K, Q = matrix_symbol("W", "d", "d"), matrix_symbol("K", "d", "m"), matrix_symbol("Q", "d", "m")
    U, V, S = (
        matrix_symbol("U", "d", "d"),
        matrix_symbol("V", "d", "d"),
        sp.MatrixSymbol("Sigma", symbol("d"), symbol("d")),
    )
    Uc, Vc, Sc, Sh, p = _svd()
    Kc, Qc = Uc * Sh, Vc * Sh
    sig = [symbol("sigma", 1), symbol("sigma", 2)]
    d.premise(
        "singular value decomposition",
        Chain(W, "=", U * S * V.T, where=Chain(Norm(W, "*"), "=", sig[0] + sig[1])),
        "orthogonal U, V; the nuclear norm is the sum of the singular values (d = 2 shown; m >= rank W).",
    )
    d.step(
        "orthogonality",
        Chain(U.T * U, "=", sp.Identity(2)),
        "the Cayley rotations used in the check are exactly orthogonal.",
        Equal(Uc.T * Uc, sp.eye(2), "cancel", what="rational rotation"),
    )
    d.step(
        "the balanced factors reproduce W",
        Chain(K * Q.T, "=", W, where=Chain(K, "=", U * S ** sp.Rational(1, 2))),
        "and Q = V Sigma^(1/2); the square roots of the diagonal multiply back to Sigma.",
        Equal(Kc * Qc.T, Uc * Sc * Vc.T, "cancel"),
    )
    d.step(
        "the balanced factors attain the nuclear norm",
        Chain((Norm(K, "F") ** 2 + Norm(Q, "F") ** 2) / 2, "=", sig[0] + sig[1], "=", Norm(W, "*")),
        "orthogonal factors do not change Frobenius norms.",
        Equal((B.fro2(Kc) + B.fro2(Qc)) / 2, Sc.trace(), "cancel"),
    )
    a, b = sp.Symbol("a", nonnegative=True), sp.Symbol("b", nonnegative=True)
    d.step(
        "arithmetic-geometric mean",
        Chain((Norm(K, "F") ** 2 + Norm(Q, "F") ** 2) / 2, ">=", Norm(K, "F") * Norm(Q, "F")),
        "the difference is half a square.",
        Nonneg((a**2 + b**2) / 2 - a * b, (a - b) ** 2 / 2),
    )
    d.premise(
        "Hoelder for Schatten norms",
        Chain(Norm(K * Q.T, "*"), "<=", Norm(K, "F") * Norm(Q, "F")),
        "cited: so every factorisation costs at least the nuclear norm, and the balanced one attains it.",
    )
