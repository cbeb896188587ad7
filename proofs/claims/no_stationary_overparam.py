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
times the summed magnitudes) and the strict sign ($+1$ when $\mathrm{RHS}<0$). Confirmation: $W'$, both sides and
the sign at 50 digits.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


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
    from attsvm import model

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    Zc = ds.Z.T  # d x n, columns z_i
    gram = Zc.T @ Zc
    kappa = float(np.linalg.cond(gram))
    if not np.isfinite(kappa) or kappa * np.finfo(float).eps > 1e-3:
        return Outcome(ok=True, inconclusive="queries not (numerically) independent: hypothesis not met")
    Zt = Zc @ np.linalg.inv(gram)  # columns z~_i
    Wp = np.outer(ds.v, Zt @ ds.Y)
    G = model.grad_W(ds, W, loss)
    lhs = float(np.sum(G * Wp))
    s, g, u = model.outputs(ds, W)
    lp = model.loss_derivative(u, loss)
    diff2 = (g[:, :, None] - g[:, None, :]) ** 2
    var = 0.5 * np.einsum("nt,nu,ntu->n", s, s, diff2)
    rhs = float(np.mean(lp * var))
    allow = tol("grad_rtol") * max(kappa, 1.0) * (abs(rhs) + float(np.sum(np.abs(G * Wp))))
    sl = {"identity": 1.0 - abs(lhs - rhs) / allow if allow > 0 else -1.0, "negative": 1.0 if rhs < 0 else -1.0}
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"lhs": lhs, "rhs": rhs, "kappa": kappa, "slacks": sl, "worst": worst, "W": W.tolist()}
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@no_stationary_overparam.confirm
def _confirm(case, outcome):
    """W', <grad L(W), W'> and the variance sum at 50 digits."""
    import mpmath

    from attsvm import highprec as hp

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    D = hp.data(ds)
    W = np.array(outcome.detail["W"])
    with mpmath.workdps(hp.DPS):
        Zc = mpmath.matrix(hp.as_mp(ds.Z)).T
        Zt = Zc * mpmath.inverse(Zc.T * Zc)
        w = [mpmath.fsum(Zt[a, i] * D.Y[i] for i in range(D.N)) for a in range(D.d)]
        Wp = [[D.v[a] * w[b] for b in range(D.d)] for a in range(D.d)]
        lhs = hp.inner(hp.grad_W(D, W, loss), Wp)
        s, g, u, _ = hp.outputs(D, W)
        rhs = mpmath.fsum(hp.loss_derivative(u[i], loss) * hp.cov(s[i], g[i], g[i]) for i in range(D.N)) / D.N
        rel = abs(lhs - rhs) / abs(rhs) if rhs != 0 else mpmath.inf
        ok = rhs < 0 and rel <= mpmath.mpf(10) ** (-30)
    detail = {"lhs_50": mpmath.nstr(lhs, 30), "rhs_50": mpmath.nstr(rhs, 30), "rel_err_50": float(rel)}
    detail["float64"] = {k: v for k, v in outcome.detail.items() if k != "W"}
    return Outcome(ok=bool(ok), margin=float(1 - rel) if rhs < 0 else -1.0, detail=detail)
