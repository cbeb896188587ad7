r"""``gd-norm-diverges`` (paper): GD with $\eta=1/L_W$ on data with Att-SVM(opt) feasible has
$\|W_k\|_F\to\infty$ and $\mathcal L(W_k)\to\mathcal L^\star=\frac1n\sum_i\ell(\gamma_{i,\mathrm{opt}_i})$.
Finite-horizon check (can fail): at the recorded steps $\|W_k\|_F$ strictly increases and the loss gap
$\mathcal L(W_k)-\mathcal L^\star$ strictly decreases (GD with $\eta\le1/L_W$ is a descent method, and by
``loss-infimum`` no finite $W$ attains $\mathcal L^\star$).
"""

from attsvm.claims import Outcome, claim


@claim(
    id="gd-norm-diverges",
    title="GD with eta = 1/L_W: ||W_k|| -> infinity, loss -> its infimum",
    origin="paper",
    source="2308.16898 (GD diverges in norm); THEORY §4",
    hypotheses={"data": "feasible", "n": (1, 4), "T": (2, 4), "d": (2, 4), "alpha": "opt"},
    params={"steps": 4000, "records": 8},
    depends=("smoothness-bound", "loss-infimum"),
    examples=20,
    seconds=20,
)
def gd_norm_diverges(case):
    import numpy as np

    from attsvm.claims import gdcheck
    from attsvm.model import loss, loss_value

    ds = (
        case.data.with_alpha(None)
        if case.data.alpha is not None and np.all(case.data.alpha == case.data.opt)
        else case.data
    )
    h = case.hypotheses
    steps = int(h["steps"])
    r = gdcheck.gd_reference(ds, np.zeros((ds.d, ds.d)), steps, record_every=max(1, steps // int(h["records"])))
    g = ds.scores
    inf = float(np.mean(loss_value(np.take_along_axis(g, ds.selection[:, None], -1)[:, 0])))
    gaps = np.array([float(loss(ds, W)) - inf for W in r.Ws])
    dn = np.diff(r.norm)
    dl = np.diff(gaps)
    margin = min(float(dn.min()) / max(1.0, float(r.norm[-1])), float(-dl.max()) / max(gaps[0], 1e-300))
    return Outcome(
        ok=margin > 0,
        margin=margin,
        detail={"norm": r.norm.tolist(), "loss_gap": gaps.tolist(), "steps": r.steps.tolist()},
    )
