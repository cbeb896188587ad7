r"""``gd-local-cone-control`` (expected-false; the negative control of ``gd-local-cone``): "normalised GD
started in the cone $\mathcal C_{\mu,R_0}(W^{mm}_\alpha)$ converges to $W^{mm}_\alpha$ even when $\alpha$ is **not**
locally optimal". The check is the one of ``gd-local-cone`` ($1-\mathrm{corr}$ at least halved after ``steps``
steps); the checker must refute it. Confirmation: the same ``steps`` steps replayed in mpmath at 50 digits
(gradient from its definition) agree with float64 and end outside the halved cone.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="gd-local-cone-control",
    title="(control) GD from the cone of a NOT locally optimal alpha stays and converges there",
    origin="expected-false",
    source="THEORY §4 gd-local-cone (negative control)",
    hypotheses={"data": "not_locally_optimal", "n": (1, 3), "T": (3, 4), "d": (2, 3)},
    params={"mu": 0.01, "r0": 5.0, "steps": 60, "shrink": 0.5},
    depends=("gd-local-cone",),
    examples=10,
    seconds=20,
)
def gd_local_cone_control(case):
    import numpy as np

    from attsvm import gd
    from attsvm.claims import gdcheck

    h = case.hypotheses
    ds = case.data
    lo, Wa = gdcheck.locally_optimal(ds, ds.selection)
    if Wa is None or lo:
        return Outcome(ok=True, inconclusive="alpha infeasible or locally optimal for this draw")
    W0 = gd.cone_init(Wa, float(h["mu"]), float(h["r0"]) * float(np.linalg.norm(Wa)), seed=case.seed)
    r = gdcheck.ngd_reference(ds, W0, int(h["steps"]), lr=0.1, record_every=int(h["steps"]))
    e0, e1 = 1 - float(gdcheck.corr(W0, Wa)), 1 - float(gdcheck.corr(r.W, Wa))
    m = h["shrink"] * e0 - e1
    return Outcome(ok=m >= 0, margin=float(m), detail={"one_minus_corr": [e0, e1], "W0": W0.tolist()})


@gd_local_cone_control.confirm
def _confirm(case, outcome):
    import numpy as np

    from attsvm.claims import gdcheck
    from attsvm.tolerances import tol

    h = case.hypotheses
    ds = case.data
    _, Wa = gdcheck.locally_optimal(ds, ds.selection)
    W0 = np.array(outcome.detail["W0"])
    mp = gdcheck.mp_replay(ds, W0, int(h["steps"]), lr=0.1, normalised=True, dps=50)
    ref = gdcheck.ngd_reference(ds, W0, int(h["steps"]), lr=0.1, record_every=int(h["steps"]))
    rel = float(np.linalg.norm(mp["W"] - ref.W) / np.linalg.norm(ref.W))
    e0, e1 = outcome.detail["one_minus_corr"][0], 1 - float(gdcheck.corr(mp["W"], Wa))
    if rel > tol("replay_rtol"):
        return Outcome(ok=True, inconclusive=f"float64 path differs from the 50-digit replay ({rel:.2e})")
    m = h["shrink"] * e0 - e1
    return Outcome(ok=m >= 0, margin=float(m), detail={"mp_vs_float64_rel": rel, "one_minus_corr_mp": e1})
