r"""``rp-nuclear`` (paper, Thm 1): the $(K,Q)$ regularisation path ($\frac12(\|K\|_F^2+\|Q\|_F^2)\le R$)
approaches the Att-SVM⋆ solution *set*: $\bar W_R=\bar K\bar Q^\top$ rescaled to margin 1
($\bar W_R/\min_{it}\langle\bar W_R,A_{it}\rangle$) has nuclear norm tending to the optimum $\|W^{mm}_\star\|_\star$
(compare objective values, never one solver's matrix). Check: the relative excess is non-increasing over the
upper half of the radii and $\le$ ``eps`` at the largest.
Confirmer: every path point re-solved to its optimality conditions at 50 digits; the optimum from the proved
duality gap.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="rp-nuclear",
    title="(K,Q) regularisation path -> the Att-SVM* (nuclear) solution set",
    origin="paper",
    source="2308.16898 Thm 1; THEORY §4",
    hypotheses={"data": "feasible", "n": (1, 3), "T": (2, 3), "d": (2, 3), "alpha": "opt"},
    params={"radii": (2.0, 4.0, 8.0, 16.0), "eps": 0.05, "slack": 1e-3, "steps_per_radius": 300},
    depends=("nuclear-variational", "svm-kkt"),
    examples=6,
)
def rp_nuclear(case):
    import numpy as np

    from attsvm.svm.constraints import build
    from attsvm.svm.nuclear import solve_nuclear

    h = case.hypotheses
    ds = case.data
    sol = solve_nuclear(ds, ds.selection)
    if sol.status != "optimal":
        return Outcome(ok=True, inconclusive="Att-SVM* infeasible for this draw")
    opt = float(sol.objective)
    radii, path = _path(ds, opt, h)
    Ws = np.asarray(path.W).reshape(len(radii), ds.d, ds.d)
    # the engine's path points, for the confirmer to re-solve (and for the report)
    detail = {"radii": radii.tolist(), "K_path": path.K[:, 0].tolist(), "Q_path": path.Q[:, 0].tolist()}
    c = build(ds, ds.selection)
    mins = np.array([c.margins(W).min() for W in Ws])
    if np.any(mins <= 0):
        worst = float(mins.min())
        return Outcome(ok=False, margin=worst if worst < 0 else -5e-324, detail={"min_margin": mins.tolist(), **detail})
    nuc = np.array([np.linalg.svd(W / m, compute_uv=False).sum() for W, m in zip(Ws, mins)])
    exc = nuc / opt - 1.0
    margin = _margin(list(nuc), opt, h)
    detail.update(relative_excess=exc.tolist(), optimum=opt)
    return Outcome(ok=margin >= 0, margin=float(margin), detail=detail)


def _path(ds, opt, h):
    """The radii (multiples of the optimum) and the engine's (K,Q) path."""
    import numpy as np

    from attsvm import gd

    radii = np.array(h["radii"]) * opt
    return radii, gd.regularization_path(ds, radii, param="KQ", steps_per_radius=int(h["steps_per_radius"]))


def _margin(nuc, opt, h):
    """min(eps - excess_last, slack - max rise of the excess over the upper half), excess = nuc / opt - 1."""
    exc = [x / opt - 1 for x in nuc]
    tail = exc[len(exc) // 2 :]
    rise = max(tail[k + 1] - tail[k] for k in range(len(tail) - 1)) if len(tail) > 1 else 0 * exc[0]
    return min(h["eps"] - exc[-1], h["slack"] - rise)


@rp_nuclear.confirm
def _confirm(case, outcome):
    r"""Every $(K,Q)$ path point re-solved at 50 digits (:func:`attsvm.highprec.path_point`, ``param="KQ"``: Newton
    on the first-order conditions of the ball problem, pseudo-inverse steps, second-order check) from the
    engine's point and from the balanced factors of $R\,W^{mm}_\star/\|W^{mm}_\star\|_\star$, keeping the lower
    loss; margins and nuclear norms at 50 digits; the optimum enclosed by the proved duality gap
    (:func:`attsvm.svm.nuclear.solve_nuclear` with ``certify``): refuted only when the margin is negative at the
    upper bound (the margin increases with the optimum), passed when it is not negative at the lower bound."""
    import mpmath as mp
    import numpy as np

    from attsvm import highprec as hp
    from attsvm.svm.nuclear import solve_nuclear

    h = case.hypotheses
    ds = case.data
    alpha = ds.selection
    sol = solve_nuclear(ds, alpha, certify=True)
    if sol.status != "optimal":
        return Outcome(ok=True, inconclusive="Att-SVM* infeasible")
    cert = sol.certificate
    if not cert.get("proved"):
        return Outcome(ok=True, inconclusive="the nuclear duality gap was not proved")
    det = outcome.detail  # the engine's path, as the conclusion computed it
    radii, Kp, Qp = det["radii"], np.asarray(det["K_path"]), np.asarray(det["Q_path"])
    U, S, Vt = np.linalg.svd(np.asarray(sol.W) / float(sol.objective))
    with mp.workdps(hp.DPS):
        D = hp.data(ds)
        points = []
        for j, R in enumerate(radii):
            m = Kp.shape[-1]
            Kt, Qt = np.zeros((ds.d, m)), np.zeros((ds.d, m))
            r = min(m, ds.d)
            Kt[:, :r], Qt[:, :r] = U[:, :r] * np.sqrt(R * S[:r]), Vt[:r].T * np.sqrt(R * S[:r])
            pt = hp.best_path_point(D, [{"K": Kp[j], "Q": Qp[j]}, {"K": Kt, "Q": Qt}], R, param="KQ")
            if not pt.local_min:
                return Outcome(ok=True, inconclusive=f"path point at R={R:.4g} not re-solved ({pt.summary()})")
            points.append(pt)
        mins, nuc = [], []
        for p in points:
            a = hp.logits(D.X, p.W, D.Z)
            mg = min(a[i][int(alpha[i])] - a[i][t] for i in range(D.N) for t in D.vis[i] if t != int(alpha[i]))
            mins.append(mg)
            nuc.append(mp.fsum(hp.singular_values(p.W)) / mg if mg > 0 else mp.mpf(0))
        detail = {"min_margin": [float(x) for x in mins], "points": [p.summary() for p in points]}
        if min(mins) <= 0:
            worst = hp.signed_float(min(mins))
            return Outcome(ok=False, margin=worst if worst < 0 else -5e-324, detail=detail)
        hm = {k: mp.mpf(h[k]) for k in ("eps", "slack")}
        lo, up = mp.mpf(cert["lower"]), mp.mpf(cert["upper"])
        m_lo, m_up = _margin(nuc, lo, hm), _margin(nuc, up, hm)
        detail.update(
            relative_excess=[float(x / up - 1) for x in nuc], optimum=[float(lo), float(up)], margin_lo=float(m_lo)
        )
    if m_up < 0:
        return Outcome(ok=False, margin=hp.signed_float(m_up), detail=detail)
    if m_lo >= 0:
        return Outcome(ok=True, margin=hp.signed_float(m_lo), detail=detail)
    return Outcome(
        ok=True,
        inconclusive=f"margin {float(m_lo):.3g}..{float(m_up):.3g} over the proved enclosure of the optimum",
        detail=detail,
    )
