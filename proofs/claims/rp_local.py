r"""``rp-local`` (reconstructed): the regularisation path restricted to the cone
$\mathcal C_{\mu,R_0}(W^{mm}_\alpha)$ of a locally optimal $\alpha$ converges in direction to $W^{mm}_\alpha$.
Check: $1-\mathrm{corr}(\bar W_R,W^{mm}_\alpha)$ non-increasing over the radii and $\le$ ``eps`` at the largest
(needs a cone-restricted path in the engine: ``regularization_path(..., cone=(target, mu))``).
"""

from attsvm.claims import Outcome, claim


@claim(
    id="rp-local",
    title="Cone-restricted regularisation path -> W^mm_alpha for a locally optimal alpha",
    origin="reconstructed",
    source="2308.16898 (local regularisation path); THEORY §4",
    hypotheses={
        "data": "locally_optimal",
        "n": (1, 3),
        "T": (3, 4),
        "d": (2, 3),
        "radii": (4.0, 8.0, 16.0),
        "mu": 0.05,
        "eps": 0.05,
        "steps_per_radius": 300,
    },
    depends=("rp-frobenius", "gd-local-cone"),
    examples=6,
    seconds=20,
)
def rp_local(case):
    import inspect

    import numpy as np

    from attsvm import gd
    from attsvm.claims import gdcheck

    if "cone" not in inspect.signature(gd.regularization_path).parameters:
        return Outcome(ok=True, inconclusive="engine: regularization_path has no cone restriction")
    h = case.hypotheses
    ds = case.data
    lo, Wa = gdcheck.locally_optimal(ds, ds.selection)
    if not lo:
        return Outcome(ok=True, inconclusive="alpha not locally optimal / infeasible for this draw")
    radii = np.array(h["radii"]) * np.linalg.norm(Wa)
    path = gd.regularization_path(
        ds, radii, param="W", cone=(Wa, float(h["mu"])), steps_per_radius=int(h["steps_per_radius"])
    )
    Ws = np.asarray(path.W).reshape(len(radii), ds.d, ds.d)
    e = 1.0 - gdcheck.corr(Ws, Wa[None])
    margin = min(h["eps"] - e[-1], 1e-3 - float(np.max(np.diff(e))) if len(e) > 1 else 0.0)
    return Outcome(ok=margin >= 0, margin=float(margin), detail={"one_minus_corr": e.tolist()})
