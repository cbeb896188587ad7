r"""``rp-frobenius`` (paper, Thm 1): the Frobenius regularisation path converges in direction to $W^{mm}$.

$\bar W_R\in\arg\min_{\|W\|_F\le R}\mathcal L(W)$; conclusion checked at radii $R_j=c_j\|W^{mm}\|_F$:
$1-\mathrm{corr}(\bar W_R,W^{mm})$ non-increasing in $R$ over the upper half of the radii (up to ``slack``),
$\le$ ``eps`` at the largest radius, and $\min_is_{i,\mathrm{opt}_i}(\bar W_R)$ non-decreasing.
Confirmer: every path point re-solved to its optimality conditions at 50 digits, against the exact $W^{mm}$.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="rp-frobenius",
    title="Frobenius regularisation path -> W^mm / ||W^mm||",
    origin="paper",
    source="2308.16898 Thm 1; THEORY §4",
    hypotheses={"data": "feasible", "n": (1, 4), "T": (2, 4), "d": (2, 4), "alpha": "opt"},
    params={"radii": (1.0, 2.0, 4.0, 8.0, 16.0), "eps": 0.05, "slack": 1e-3, "steps_per_radius": 300},
    depends=("svm-kkt", "loss-infimum"),
    examples=8,
)
def rp_frobenius(case):
    import numpy as np

    from attsvm.model import Arrays, corr, log_softmax, logits
    from attsvm.svm import wmm

    h = case.hypotheses
    ds = _data(case)
    Wmm = wmm(ds)
    if Wmm is None:
        return Outcome(ok=True, inconclusive="Att-SVM infeasible for this draw (hypothesis not met)")
    radii, Ws = _path(ds, Wmm, h)
    gap = 1.0 - corr(Ws, Wmm[None])
    A = Arrays.of(ds)
    ls = log_softmax(logits(A.X[None], Ws, A.Z[None]))
    s_opt = np.exp(
        np.take_along_axis(ls, np.broadcast_to(ds.selection[None, :, None], ls.shape[:-1] + (1,)), -1)[..., 0]
    )
    smin = s_opt.min(-1)
    margin = _margin(gap, smin, h)
    return Outcome(
        ok=margin >= 0,
        margin=float(margin),
        detail={
            "one_minus_corr": gap.tolist(),
            "min_s_opt": smin.tolist(),
            "radii": radii.tolist(),
            "W_path": Ws.tolist(),  # the engine's path points, for the confirmer to re-solve
        },
    )


def _data(case):
    return case.data.with_alpha(None) if case.data.alpha is None else case.data


def _path(ds, Wmm, h):
    """The radii and the engine's path points $\bar W_R$ (R, d, d)."""
    import numpy as np

    from attsvm import gd

    radii = np.array(h["radii"], dtype=float) * np.linalg.norm(Wmm)
    path = gd.regularization_path(ds, radii, param="W", steps_per_radius=int(h["steps_per_radius"]))
    return radii, np.asarray(path.W).reshape(len(radii), ds.d, ds.d)


def _margin(gap, smin, h):
    """min(eps - gap_last, slack - max rise of gap over the upper half, slack + min rise of min s_opt)."""
    tail = gap[len(gap) // 2 :]  # the path need not be monotone at small R (seen: 0.032 -> 0.039 at R=2|W^mm|)
    mono = max(tail[k + 1] - tail[k] for k in range(len(tail) - 1)) if len(tail) > 1 else 0 * gap[0]
    smono = min(smin[k + 1] - smin[k] for k in range(len(smin) - 1)) if len(smin) > 1 else 0 * gap[0]
    return min(h["eps"] - gap[-1], h["slack"] - mono, h["slack"] + smono)


@rp_frobenius.confirm
def _confirm(case, outcome):
    r"""Every path point re-solved at 50 digits (:func:`attsvm.highprec.path_point`: Newton on the first-order
    conditions of $\min_{\|W\|_F\le R}\mathcal L$, second-order check on the sphere) from the engine's point
    and from $R\,W^{mm}/\|W^{mm}\|_F$, keeping the lower loss; $W^{mm}$ exact (:func:`attsvm.svm.certify_fro`);
    the margin recomputed at 50 digits. A point that is not re-solved leaves the case inconclusive."""
    import mpmath as mp
    import numpy as np

    from attsvm import highprec as hp
    from attsvm.svm import certify_fro, wmm

    h = case.hypotheses
    ds = _data(case)
    Wmm = wmm(ds)
    if Wmm is None:
        return Outcome(ok=True, inconclusive="Att-SVM infeasible")
    cert = certify_fro(ds)
    if not cert.get("verified") or cert.get("W") is None:
        return Outcome(ok=True, inconclusive="no exact certificate for W^mm")
    radii, Ws = outcome.detail["radii"], np.asarray(outcome.detail["W_path"])  # the conclusion's path
    with mp.workdps(hp.DPS):
        D = hp.data(ds)
        Wx = hp.rationals(cert["W"])
        points = []
        for R, W in zip(radii, Ws):
            pt = hp.best_path_point(D, [W, Wmm * (R / np.linalg.norm(Wmm))], R)
            if not pt.local_min:
                return Outcome(ok=True, inconclusive=f"path point at R={R:.4g} not re-solved ({pt.summary()})")
            points.append(pt)
        gap = [1 - hp.corr(p.W, Wx) for p in points]
        smin = []
        for p in points:
            a = hp.logits(D.X, p.W, D.Z)
            smin.append(min(hp.softmax(a[i], D.vis[i])[int(ds.selection[i])] for i in range(D.N)))
        hm = {k: mp.mpf(h[k]) for k in ("eps", "slack")}
        m = _margin(gap, smin, hm)
    margin = hp.signed_float(m)
    detail = {
        "one_minus_corr": [float(x) for x in gap],
        "min_s_opt": [float(x) for x in smin],
        "moved": [float(np.linalg.norm(hp.to_numpy(p.W) - W) / np.linalg.norm(W)) for p, W in zip(points, Ws)],
        "points": [p.summary() for p in points],
    }
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)
