r"""``feasible-overparam`` (THEORY §3, reconstructed).

$d\ge\max(T-1,n)$ and generic data $\Rightarrow$ Att-SVM($\alpha$) is feasible for **every** $\alpha\in[T]^n$.
Proof: $T\le d+1$ generic tokens are affinely independent, so each is a vertex of their hull and some $w_i$
has $(x_{i\alpha_i}-x_{it})^\top w_i\ge1$; $n\le d$ independent queries let $W=[w_1..w_n](Z^\top Z)^{-1}Z^\top$ map
$z_i\mapsto w_i$.

Data: ``overparam`` (paper law, $d=\max(T-1,n,2)+d_{extra}$); a random $\alpha$ is drawn. The Frobenius solver
must return ``optimal``; margin: the SVM margin $1/\|W^{mm}_\alpha\|_F$ (small = nearly infeasible). An
infeasible answer would be a counterexample only if its Farkas certificate is verified exactly:
confirmation restricts to the support of $\mu$ and computes, in exact rationals (python-flint), a vector
$\mu'\ge0$, $\mu'\ne0$ in the null space of $[\mathrm{vec}\,A_{it}]$, i.e. $\sum\mu'_{it}A_{it}=0$ exactly.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from attsvm.claims import Outcome, claim


@claim(
    id="feasible-overparam",
    title="Over-parameterised generic data: Att-SVM(alpha) is feasible for every selection alpha",
    origin="reconstructed",
    source="THEORY §3 (feasible-overparam); Tarzanagh et al. 2308.16898, over-parameterisation",
    hypotheses={"data": "overparam", "n": (1, 4), "T": (2, 5), "d_extra": (0, 2)},
)
def feasible_overparam(case):
    """The Frobenius Att-SVM at a random selection is feasible."""
    from attsvm import svm

    ds = case.data
    alpha = np.array([case.draw_int(0, ds.T - 1) for _ in range(ds.n)], dtype=np.int64)
    sol = svm.solve_fro(ds.with_alpha(alpha))
    if sol.status == "optimal":
        margin = 1.0 / float(np.linalg.norm(sol.W))
        return Outcome(ok=True, margin=margin, detail={"alpha": alpha.tolist(), "svm_margin": margin})
    mu = None if sol.farkas is None else np.asarray(sol.farkas).tolist()
    return Outcome(ok=False, margin=-1.0, detail={"alpha": alpha.tolist(), "status": sol.status, "farkas": mu})


@feasible_overparam.confirm
def _confirm(case, outcome):
    """Exact Farkas check on the support of the float certificate (python-flint rationals)."""
    import flint

    from attsvm.svm import constraints

    mu = outcome.detail.get("farkas")
    if mu is None:
        return Outcome(ok=True, inconclusive="no Farkas certificate to verify")
    ds = case.data.with_alpha(np.array(outcome.detail["alpha"], dtype=np.int64))
    C = constraints.build(ds)
    mu = np.asarray(mu)
    vals = mu[C.row, C.tok]
    S = np.nonzero(vals > 1e-12 * vals.max())[0]
    q = lambda x: flint.fmpq(*Fraction(float(x)).as_integer_ratio())  # noqa: E731
    d = ds.d
    # columns: vec(A_j) = vec(D_j z_j^T), exactly
    A = flint.fmpq_mat(d * d, len(S), [q(C.D[j, a]) * q(C.Zc[j, b]) for a in range(d) for b in range(d) for j in S])
    R, rank = A.rref()
    if rank != len(S) - 1:
        return Outcome(ok=True, inconclusive=f"exact null space of the Farkas support has dimension {len(S) - rank}")
    # the 1-dimensional null space: free column f, x_f = 1, pivots x_p = -R[p, f]
    piv = []
    for r in range(rank):
        piv.append(next(c for c in range(len(S)) if R[r, c] != 0))
    free = next(c for c in range(len(S)) if c not in piv)
    x = [flint.fmpq(0)] * len(S)
    x[free] = flint.fmpq(1)
    for r, p in enumerate(piv):
        x[p] = -R[r, free]
    same_sign = all(v > 0 for v in x) or all(v < 0 for v in x)
    detail = {"support": [[int(C.row[j]), int(C.tok[j])] for j in S], "exact_mu": [str(v) for v in x]}
    return Outcome(ok=not same_sign, margin=-1.0 if same_sign else 1.0, detail=detail)
