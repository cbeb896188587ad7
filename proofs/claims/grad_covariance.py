r"""``grad-covariance`` (THEORY §3, derived).

.. math::
    \langle\nabla\mathcal L(W),A\rangle=\frac1n\sum_i\ell'_i\,\mathrm{Cov}_{s_i}(\gamma_i,X_iAz_i),\qquad
    \mathrm{Cov}_s(g,h)=\sum_ts_tg_th_t-(s^\top g)(s^\top h).

Left side: the closed-form gradient of :mod:`attsvm.model` paired with a random direction $A$. Right side:
the covariance written from its definition (one-pass formula, independent of the gradient code). Margin:
$1-|\mathrm{LHS}-\mathrm{RHS}|/(\mathrm{rtol}|\mathrm{RHS}|+\mathrm{atol}\,S)$ with
$S=\frac1n\sum_i|\ell'_i|(\sum_ts_t|\gamma_{it}h_{it}|+|s^\top\gamma_i||s^\top h_i|)$, the size of the
terms that cancel. Confirmation: both sides at 50 digits (mpmath).
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


def _sides(ds, W, A, loss):
    from attsvm import model

    f = ds.flat()
    s, g, u = model.outputs(ds, W)
    lp = model.loss_derivative(u, loss)
    h = np.einsum("ntd,de,ne->nt", f.X, A, f.Z)
    sg, sh = np.sum(s * g, -1), np.sum(s * h, -1)
    cov = np.sum(s * g * h, -1) - sg * sh
    rhs = float(np.mean(lp * cov))
    lhs = float(np.sum(model.grad_W(ds, W, loss) * A))
    S = float(np.mean(np.abs(lp) * (np.sum(s * np.abs(g * h), -1) + np.abs(sg * sh))))
    return lhs, rhs, S


@claim(
    id="grad-covariance",
    title="<grad L(W), A> is the s-weighted covariance of the scores and the logits of A",
    origin="derived",
    source="THEORY §3 (grad-covariance)",
    hypotheses={"data": "paper", "n": (1, 5), "T": (2, 6), "d": (2, 5)},
    params={"loss": "logistic"},
)
def grad_covariance(case):
    """Closed-form gradient paired with A vs (1/n) sum_i l'_i Cov_{s_i}(gamma_i, X_i A z_i)."""
    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    A = case.draw_matrix(ds.d, ds.d, scale=1.0)
    lhs, rhs, S = _sides(ds, W, A, loss)
    bound = tol("grad_rtol") * abs(rhs) + tol("grad_atol") * S
    err = abs(lhs - rhs)
    margin = 1.0 - err / bound if bound > 0 else (1.0 if err == 0 else -1.0)
    detail = {"lhs": lhs, "rhs": rhs, "err": err, "bound": bound, "W": W.tolist(), "A": A.tolist()}
    return Outcome(ok=margin >= 0, margin=float(margin), detail=detail)


@grad_covariance.confirm
def _confirm(case, outcome):
    """Both sides at 50 digits: the identity must hold to ~1e-40 relative."""
    import mpmath

    from attsvm import highprec as hp

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    D = hp.data(ds)
    W, A = np.array(outcome.detail["W"]), np.array(outcome.detail["A"])
    with mpmath.workdps(hp.DPS):
        lhs = hp.inner(hp.grad_W(D, W, loss), hp.as_mp(A))
        s, g, u, _ = hp.outputs(D, W)
        h = hp.logits(D.X, hp.as_mp(A), D.Z)
        rhs = mpmath.fsum(hp.loss_derivative(u[i], loss) * hp.cov(s[i], g[i], h[i]) for i in range(D.N)) / D.N
        scale = abs(rhs) + mpmath.mpf(10) ** (-hp.DPS // 2)
        rel = abs(lhs - rhs) / scale
        ok = rel <= mpmath.mpf(10) ** (-(hp.DPS * 3) // 5)
    detail = {"lhs_50": mpmath.nstr(lhs, 30), "rhs_50": mpmath.nstr(rhs, 30), "rel_err_50": float(rel)}
    detail["float64"] = {k: v for k, v in outcome.detail.items() if k not in ("W", "A")}
    return Outcome(ok=bool(ok), margin=float(1 - rel), detail=detail)
