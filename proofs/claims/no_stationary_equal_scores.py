r"""``no-stationary-equal-scores`` (THEORY §3, reconstructed).

Assumption B (all non-optimal scores of input $i$ bit-equal, gap $\Delta_i>0$) gives, for every $W$,

.. math::
    \langle\nabla\mathcal L(W),W^{mm}\rangle
    \le\frac{m}{n}\sum_i\ell'_i\,\Delta_i\,s_{i,\mathrm{opt}_i}(1-s_{i,\mathrm{opt}_i})<0,

with $m=1$ for the exact $W^{mm}$. Proof: only the pairs $(\mathrm{opt},t)$ survive in
$\mathrm{Cov}_{s}(\gamma,h)=\sum_{t<\tau}s_ts_\tau(\gamma_t-\gamma_\tau)(h_t-h_\tau)$,
each with $h_{\mathrm{opt}}-h_t\ge m$.
The check uses the solver's $W^{mm}$ and its *actual* smallest margin $m$ (so the inequality is exact for
that matrix). $1-s_{\mathrm{opt}}$ is taken from the log-softmax
($\log\sum_{t\ne\mathrm{opt}}e^{a_t}-\log\sum_te^{a_t}$),
never as a difference. Data: the bit-exact ``equal_scores`` strategy ($v=e_1$). Margin: $(\mathrm{RHS}-
\mathrm{LHS})/|\mathrm{RHS}|$ plus the rounding allowance ``tol('grad_rtol')`` relative to the summed magnitudes.
Confirmation: both sides at 50 digits for the same $W$ and $W^{mm}$.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


def _lse(a, axis=-1):
    m = np.max(a, axis=axis, keepdims=True)
    return (m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)))[..., 0]


@claim(
    id="no-stationary-equal-scores",
    title="Under Assumption B, <grad L(W), W^mm> <= (1/n) sum l'_i Delta_i s_opt (1 - s_opt) < 0 for every W",
    origin="reconstructed",
    source="THEORY §3 (no-stationary-equal-scores); Tarzanagh et al. 2308.16898, global convergence lemma",
    hypotheses={"data": "equal_scores", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"loss": "logistic"},
)
def no_stationary_equal_scores(case):
    """Covariance bound along W^mm, right side in the log domain."""
    from attsvm import model, svm
    from attsvm.svm import constraints

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    sol = svm.solve_fro(ds)
    if sol.status != "optimal":
        return Outcome(ok=True, inconclusive=f"Att-SVM(opt) {sol.status}: hypothesis not met")
    Wmm = np.asarray(sol.W)
    mmin = float(np.min(constraints.build(ds).margins(Wmm)))
    if not mmin > 0:
        return Outcome(ok=True, inconclusive="solver W^mm has a non-positive margin")
    g, opt = ds.scores, ds.opt
    n, T = g.shape
    others = np.arange(T) != opt[:, None]
    go = g[np.arange(n), opt]
    Delta = go - np.where(others, g, np.inf).min(-1)  # bit-equal others: any of them
    a = model.logits(ds.X, W, ds.Z)
    lse = _lse(a)
    log_so = a[np.arange(n), opt] - lse
    log_1mso = _lse(np.where(others, a, -np.inf)) - lse
    _, _, u = model.outputs(ds, W)
    lp = model.loss_derivative(u, loss)
    rhs = -mmin * float(np.mean(np.exp(np.log(-lp) + np.log(Delta) + log_so + log_1mso)))
    G = model.grad_W(ds, W, loss)
    lhs = float(np.sum(G * Wmm))
    allow = tol("grad_rtol") * (abs(rhs) + float(np.sum(np.abs(G * Wmm))))
    sl = {"bound": (rhs - lhs + allow) / abs(rhs) if rhs < 0 else -1.0, "negative": 1.0 if rhs < 0 else -1.0}
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"lhs": lhs, "rhs": rhs, "m_min": mmin, "slacks": sl, "worst": worst, "W": W.tolist(), "Wmm": Wmm.tolist()}
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@no_stationary_equal_scores.confirm
def _confirm(case, outcome):
    """Both sides at 50 digits (same W, same float W^mm and its exact smallest margin)."""
    import mpmath

    from attsvm import highprec as hp

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    D = hp.data(ds)
    W, Wmm = np.array(outcome.detail["W"]), np.array(outcome.detail["Wmm"])
    opt = [int(o) for o in ds.opt]
    with mpmath.workdps(hp.DPS):
        Wm = hp.as_mp(Wmm)
        h = hp.logits(D.X, Wm, D.Z)
        mmin = min(h[i][opt[i]] - h[i][t] for i in range(D.N) for t in range(D.T) if t != opt[i])
        lhs = hp.inner(hp.grad_W(D, W, loss), Wm)
        s, g, u, a = hp.outputs(D, W)
        terms = []
        for i in range(D.N):
            o = opt[i]
            Delta = g[i][o] - min(g[i][t] for t in range(D.T) if t != o)
            one_minus = mpmath.exp(hp.log_one_minus_softmax(a[i], o))
            terms.append(hp.loss_derivative(u[i], loss) * Delta * s[i][o] * one_minus)
        rhs = mmin * mpmath.fsum(terms) / D.N
        ok = rhs < 0 and lhs <= rhs + mpmath.mpf(10) ** (-40) * abs(rhs)
        margin = (rhs - lhs) / abs(rhs) if rhs != 0 else mpmath.mpf(-1)
    detail = {"lhs_50": mpmath.nstr(lhs, 30), "rhs_50": mpmath.nstr(rhs, 30), "m_min_50": mpmath.nstr(mmin, 30)}
    detail["float64"] = {k: v for k, v in outcome.detail.items() if k not in ("W", "Wmm")}
    return Outcome(ok=bool(ok), margin=float(margin), detail=detail)
