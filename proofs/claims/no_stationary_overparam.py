r"""``no-stationary-overparam`` (THEORY §3, reconstructed).

$d\ge n$, $z_i$ independent, scores of each input not all equal, $\ell'<0$. With
$\tilde z_i=Z(Z^\top Z)^{-1}e_i$ (so $\tilde z_j^\top z_i=\delta_{ij}$)
and $W'=v(\sum_iY_i\tilde z_i)^\top$, the logits of
$W'$ are the scores, $X_iW'z_i=\gamma_i$, hence

.. math::
    \langle\nabla\mathcal L(W),W'\rangle=\frac1n\sum_i\ell'_i\,\mathrm{Var}_{s_i}(\gamma_i)<0\quad\text{for every }W,

and $\nabla\mathcal L(W)\ne0$ everywhere. The variance is computed pairwise,
$\mathrm{Var}_s(\gamma)=\sum_{t<\tau}s_ts_\tau(\gamma_t-\gamma_\tau)^2$ (no cancellation). Data: ``overparam``.
Margin: the smaller of $1-|\mathrm{LHS}-\mathrm{RHS}|/\mathrm{allow}$ (allowance
``tol('grad_rtol')``$\cdot\kappa(Z^\top Z)$
times the summed magnitudes) and the strict sign ($+1$ when $\mathrm{RHS}<0$).
Written once with ``case.kit``: the automatic confirmation recomputes $W'$, both sides and the sign at
50 digits (the allowance then ``kit.tol`` $=10^{-30}$).
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim


@claim(
    id="no-stationary-overparam",
    title="For d >= n with independent queries, <grad L(W), W'> = (1/n) sum l'_i Var_{s_i}(gamma_i) < 0",
    origin="reconstructed",
    source="THEORY §3 (no-stationary-overparam); Tarzanagh et al. 2308.16898, over-parameterised landscape",
    hypotheses={"data": "overparam", "n": (1, 4), "T": (2, 5), "d_extra": (0, 2)},
    params={"loss": "logistic"},
)
def no_stationary_overparam(case):
    """Identity along W' = v (sum_i Y_i z~_i)^T and strict negativity of the variance sum."""
    k = case.kit
    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    D = k.data(ds)
    Zc = D.Z.T  # d x n, columns z_i
    gram = Zc.T @ Zc
    Z = case.raw_data.Z  # the hypothesis (independent queries), decided in float64 on the stored data
    kappa = float(np.linalg.cond(Z @ Z.T))
    if not np.isfinite(kappa) or kappa * np.finfo(float).eps > 1e-3:
        return Outcome(ok=True, inconclusive="queries not (numerically) independent: hypothesis not met")
    Zt = Zc @ k.inv(gram)  # columns z~_i
    Wp = np.outer(D.v, Zt @ D.Y)
    G = k.grad_W(ds, W, loss)
    lhs = np.sum(G * Wp)
    s, g, u = k.outputs(D, W)
    lp = k.loss_derivative(u, loss)
    diff2 = (g[:, :, None] - g[:, None, :]) ** 2
    var = 0.5 * np.einsum("nt,nu,ntu->n", s, s, diff2)
    rhs = np.sum(lp * var) / ds.n
    allow = k.tol("grad_rtol") * max(kappa, 1.0) * (abs(rhs) + np.sum(np.abs(G * Wp)))
    sl = {
        "identity": 1 - abs(lhs - rhs) / allow if allow > 0 else k.scalar(-1),
        "negative": k.scalar(1 if rhs < 0 else -1),
    }
    worst = min(sl, key=lambda key: sl[key])
    margin = sl[worst]
    detail = {"lhs": lhs, "rhs": rhs, "kappa": kappa, "slacks": sl, "worst": worst, "W": W.tolist()}
    return Outcome(ok=bool(margin >= 0), margin=margin, detail=detail)
