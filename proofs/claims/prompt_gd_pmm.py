r"""``prompt-gd-pmm`` (paper, 2306.13596): GD on $p$ (prompt attention $f=v^\top X^\top\mathbb S(Xp)$) converges in
direction to $p^{mm}_\alpha$ for its (locally optimal) selection. Finite-horizon check:
$1-\mathrm{corr}(p_k,p^{mm}_\alpha)$ falls between the middle and the end and is $\le$ ``eps`` at the end.
Confirmer: the run replayed at 50 digits, against the exact $p^{mm}_\alpha$ of its selection.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="prompt-gd-pmm",
    title="GD on p converges in direction to p^mm_alpha",
    origin="paper",
    source="2306.13596; THEORY §4",
    hypotheses={"data": "prompt", "n": (1, 3), "T": (2, 4), "d": (2, 4)},
    params={"steps": 2000, "eps": 0.05},
    examples=10,
)
def prompt_gd_pmm(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import corr

    try:
        from attsvm.svm.prompt import solve_prompt
    except ImportError:
        return Outcome(ok=True, inconclusive="engine: attsvm.svm.prompt.solve_prompt not available")
    h = case.hypotheses
    ds = case.data
    steps = int(h["steps"])
    res = gd.run(ds, param="p", algo="ngd", lr=0.1, steps=steps, record_every=steps // 2, record_params=True)
    sol = solve_prompt(ds.with_alpha(res.selection[0]))
    if not sol.feasible:
        return Outcome(ok=True, inconclusive="prompt SVM of the final selection infeasible")
    pm = np.asarray(sol.extra["p"])
    ps = np.asarray(res.trajectory["p"])[:, 0]
    e = 1 - corr(ps[1:], pm[None], ndim=1)
    margin = min(h["eps"] - e[-1], e[0] - e[-1] + 1e-9)
    return Outcome(ok=margin >= 0, margin=float(margin), detail={"one_minus_corr": e.tolist()})


@prompt_gd_pmm.confirm
def _confirm(case, outcome):
    r"""GD on $p$ replayed at 50 digits from $p_0=0$ (:func:`attsvm.highprec.replay`, ``param="p"``); its final
    selection; $p^{mm}_\alpha$ exact (:func:`attsvm.svm.certify_prompt`); $1-\mathrm{corr}$ at the middle and
    the end and the margin at 50 digits."""
    import mpmath as mp
    import numpy as np

    from attsvm import highprec as hp
    from attsvm.svm import certify_prompt

    h = case.hypotheses
    ds = case.data
    steps = int(h["steps"])
    with mp.workdps(hp.DPS):
        D = hp.data(ds)
        run = hp.replay(D, np.zeros(ds.d), param="p", algo="ngd", lr=0.1, steps=steps, record_every=steps // 2)
        p_mid, p_end = run.recorded[1]["p"], run.final["p"]
        a = [[mp.fdot(x, p_end) for x in Xi] for Xi in D.X]
        alpha = np.array([max(range(ds.T), key=lambda t, ai=ai: ai[t]) for ai in a])
        cert = certify_prompt(ds, alpha)
        if cert.get("reason") == "infeasible":
            return Outcome(ok=True, inconclusive="prompt SVM of the 50-digit final selection infeasible")
        if cert["p"] is None:
            return Outcome(ok=True, inconclusive="no exact certificate for p^mm_alpha")
        pm = hp.rationals(cert["p"])
        e_mid, e_end = 1 - hp.corr(p_mid, pm), 1 - hp.corr(p_end, pm)
        m = min(mp.mpf(h["eps"]) - e_end, e_mid - e_end + mp.mpf("1e-9"))
    margin = hp.signed_float(m)
    detail = {"one_minus_corr": [float(e_mid), float(e_end)], "selection": alpha.tolist(), "dps": hp.DPS}
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)
