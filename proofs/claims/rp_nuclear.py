r"""``rp-nuclear`` (paper, Thm 1): the $(K,Q)$ regularisation path ($\frac12(\|K\|_F^2+\|Q\|_F^2)\le R$)
approaches the Att-SVM⋆ solution *set*: $\bar W_R=\bar K\bar Q^\top$ rescaled to margin 1
($\bar W_R/\min_{it}\langle\bar W_R,A_{it}\rangle$) has nuclear norm tending to the optimum $\|W^{mm}_\star\|_\star$
(compare objective values, never one solver's matrix). Check: the relative excess is non-increasing over the
upper half of the radii and $\le$ ``eps`` at the largest.
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
    seconds=25,
)
def rp_nuclear(case):
    import numpy as np

    from attsvm import gd
    from attsvm.svm.constraints import build
    from attsvm.svm.nuclear import solve_nuclear

    h = case.hypotheses
    ds = case.data
    sol = solve_nuclear(ds, ds.selection)
    if sol.status != "optimal":
        return Outcome(ok=True, inconclusive="Att-SVM* infeasible for this draw")
    opt = float(sol.objective)
    radii = np.array(h["radii"]) * opt
    path = gd.regularization_path(ds, radii, param="KQ", steps_per_radius=int(h["steps_per_radius"]))
    Ws = np.asarray(path.W).reshape(len(radii), ds.d, ds.d)
    c = build(ds, ds.selection)
    mins = np.array([c.margins(W).min() for W in Ws])
    if np.any(mins <= 0):
        return Outcome(ok=False, margin=float(mins.min()), detail={"min_margin": mins.tolist()})
    nuc = np.array([np.linalg.svd(W / m, compute_uv=False).sum() for W, m in zip(Ws, mins)])
    exc = nuc / opt - 1.0
    tail = exc[len(exc) // 2 :]
    margin = min(h["eps"] - exc[-1], h["slack"] - float(np.max(np.diff(tail))))
    return Outcome(ok=margin >= 0, margin=float(margin), detail={"relative_excess": exc.tolist(), "optimum": opt})
