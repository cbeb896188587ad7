r"""``loss-infimum`` (THEORY §3, derived).

.. math::
    \mathcal L(W)>\mathcal L^\star:=\frac1n\sum_i\ell(\gamma_{i,\mathrm{opt}_i})\ \text{for every finite }W,
    \qquad \mathcal L(\Gamma W^{mm})\downarrow\mathcal L^\star\ (\Gamma\to\infty).

The gap is computed without cancellation: $\delta_i=\gamma_{i,\mathrm{opt}}-u_i=\sum_ts_{it}(\gamma_{i,\mathrm{opt}}-
\gamma_{it})\ge0$ and, for the logistic loss, $\ell(u_i)-\ell(\gamma_{i,\mathrm{opt}})=\log(1+\mathrm{expm1}(\delta_i)
/(1+e^{\gamma_{i,\mathrm{opt}}}))$. Checks: (1) the gap is $>0$ at a random $W$; (2) on the grid
$\Gamma_k=2^k\Gamma_0$ the gap at $\Gamma_kW^{mm}$ is positive, strictly decreasing and below the bound
$\frac1n\sum_i\mathrm{expm1}((T-1)e^{-\Gamma m}\Delta^{\max}_i)/(1+e^{\gamma_{i,\mathrm{opt}}})$ that follows from
``softmax-decay`` ($m$: the smallest margin of the computed $W^{mm}$). $\Gamma_0=\max(1,(1+\log(1+T\,G\,A/
(\Delta^{\min}m)))/m)$ is where $\frac{d}{d\Gamma}\mathcal L(\Gamma W^{mm})<0$ is guaranteed (the opt-pairs of the
covariance dominate the others). Margin: the smallest of the relative gap, the relative decrease and the
relative slack to the bound. Confirmation: the same quantities at 50 digits.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol

GRID = 6


def _gaps_float(ds, W, loss):
    from attsvm import model

    f = ds.flat()
    ls = model.log_softmax(model.logits(f.X, W, f.Z), f.mask)
    g = ds.scores if f.mask is None else np.where(f.mask, ds.scores, -np.inf)
    opt = ds.opt
    go = np.take_along_axis(g, opt[:, None], -1)[:, 0]
    diff = np.where(np.isfinite(g), go[:, None] - g, 0.0)
    delta = np.sum(np.exp(ls) * diff, -1)
    if loss == "logistic":
        return np.log1p(np.expm1(delta) / (1 + np.exp(go)))
    if loss == "exponential":
        return np.exp(-go) * np.expm1(delta)
    return delta


def _gamma0(ds, Wmm, mmin):
    from attsvm import model

    f = ds.flat()
    g = ds.scores
    a = model.logits(f.X, Wmm, f.Z)
    go = np.take_along_axis(g, ds.opt[:, None], -1)
    others = np.ones_like(g, dtype=bool)
    np.put_along_axis(others, ds.opt[:, None], False, -1)
    dmin = float(np.min((go - g)[others]))
    G = float(np.max(g.max(-1) - g.min(-1)))
    A = float(np.max(a.max(-1) - a.min(-1)))
    return max(1.0, (1.0 + np.log1p(ds.T * G * A / (dmin * mmin))) / mmin)


def _bound(ds, Gam, mmin, loss):
    g = ds.scores
    go = np.take_along_axis(g, ds.opt[:, None], -1)[:, 0]
    dmax = np.max(go[:, None] - g, -1)
    x = np.expm1((ds.T - 1) * np.exp(-Gam * mmin) * dmax)
    if loss == "logistic":
        return float(np.mean(x / (1 + np.exp(go))))
    if loss == "exponential":
        return float(np.mean(np.exp(-go) * x))
    return float(np.mean((ds.T - 1) * np.exp(-Gam * mmin) * dmax))


@claim(
    id="loss-infimum",
    title="L(W) > (1/n) sum_i l(gamma_opt) for finite W, and L(Gamma W^mm) decreases to it",
    origin="derived",
    source="THEORY §3 (loss-infimum)",
    hypotheses={"data": "feasible", "alpha": "opt", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"loss": "logistic"},
    depends=("softmax-decay",),
)
def loss_infimum(case):
    """Gap at a random W is > 0; on a Gamma grid along W^mm the gap is > 0, decreasing, below the bound."""
    from attsvm import svm
    from attsvm.svm import constraints

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    ds = ds.with_alpha(None) if ds.alpha is not None and np.array_equal(ds.alpha, ds.opt) else ds
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    gap0 = float(np.mean(_gaps_float(ds, W, loss)))
    sol = svm.solve_fro(ds)
    if sol.status != "optimal":
        return Outcome(ok=True, inconclusive=f"Att-SVM(opt) {sol.status}: hypothesis not met")
    Wmm = np.asarray(sol.W)
    mmin = float(np.min(constraints.build(ds).margins(Wmm)))
    G0 = _gamma0(ds, Wmm, mmin)
    grid = [float(G0 * 2.0**k) for k in range(GRID)]
    gaps = [float(np.mean(_gaps_float(ds, Gm * Wmm, loss))) for Gm in grid]
    bounds = [_bound(ds, Gm, mmin, loss) for Gm in grid]
    sl = {"gap_random_W": 1.0 if gap0 > 0 else -1.0}
    sl["gap_positive"] = 1.0 if min(gaps) > 0 else -1.0
    sl["decreasing"] = min((gaps[k] - gaps[k + 1]) / gaps[k] if gaps[k] > 0 else -1.0 for k in range(GRID - 1))
    sl["below_bound"] = min((b * (1 + tol("rounding")) - x) / b if b > 0 else -1.0 for b, x in zip(bounds, gaps))
    worst = min(sl, key=sl.get)
    margin = float(min(sl.values()))
    detail = {"slacks": sl, "worst": worst, "gap_random_W": gap0, "grid": grid, "gaps": gaps, "bounds": bounds}
    detail.update({"m_min": mmin, "W": W.tolist(), "Wmm": Wmm.tolist()})
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@loss_infimum.confirm
def _confirm(case, outcome):
    """The same gaps (random W and the Gamma grid along the float W^mm) at 50 digits."""
    import mpmath

    from attsvm import highprec as hp

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    ds = ds.with_alpha(None) if ds.alpha is not None and np.array_equal(ds.alpha, ds.opt) else ds
    D = hp.data(ds)
    det = outcome.detail
    W, Wmm = np.array(det["W"]), np.array(det["Wmm"])
    with mpmath.workdps(hp.DPS):
        gap0 = hp.loss_gap(D, W, ds.opt, loss)
        Wm = hp.as_mp(Wmm)
        gaps = [hp.loss_gap(D, [[mpmath.mpf(Gm) * x for x in r] for r in Wm], ds.opt, loss) for Gm in det["grid"]]
        # the bound is re-derived from the exact margins of the float W^mm
        a = hp.logits(D.X, Wm, D.Z)
        g = hp.scores(D.X, D.Y, D.v)
        opt = [int(o) for o in ds.opt]
        mmin = min(a[i][opt[i]] - a[i][t] for i in range(D.N) for t in range(D.T) if t != opt[i])
        ok = gap0 > 0 and all(x > 0 for x in gaps) and all(gaps[k + 1] < gaps[k] for k in range(len(gaps) - 1))
        for Gm, x in zip(det["grid"], gaps):
            terms = []
            for i in range(D.N):
                dmax = max(g[i][opt[i]] - g[i][t] for t in range(D.T))
                e = mpmath.expm1((D.T - 1) * mpmath.exp(-mpmath.mpf(Gm) * mmin) * dmax)
                terms.append(e / (1 + mpmath.exp(g[i][opt[i]])) if loss == "logistic" else e)
            ok = ok and x <= mpmath.fsum(terms) / D.N
    detail = {"gap_random_W_50": mpmath.nstr(gap0, 20), "gaps_50": [mpmath.nstr(x, 20) for x in gaps]}
    detail["float64"] = {k: v for k, v in det.items() if k not in ("W", "Wmm")}
    return Outcome(ok=bool(ok), margin=1.0 if ok else -1.0, detail=detail)
