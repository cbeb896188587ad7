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
)
def gd_local_cone_control(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import corr
    from attsvm.svm import solve_fro

    h = case.hypotheses
    ds = case.data
    sol = solve_fro(ds, ds.selection)
    if not sol.feasible or sol.locally_optimal:
        return Outcome(ok=True, inconclusive="alpha infeasible or locally optimal for this draw")
    Wa = np.asarray(sol.W)
    W0 = gd.cone_init(Wa, float(h["mu"]), float(h["r0"]) * float(np.linalg.norm(Wa)), seed=case.seed)
    r = gd.run(ds, param="W", algo="ngd", lr=0.1, steps=int(h["steps"]), init=W0)
    e0, e1 = 1 - float(corr(W0, Wa)), 1 - float(corr(r.W[0], Wa))
    m = h["shrink"] * e0 - e1
    return Outcome(ok=m >= 0, margin=float(m), detail={"one_minus_corr": [e0, e1], "W0": W0.tolist()})


@gd_local_cone_control.confirm
def _confirm(case, outcome):
    import numpy as np

    from attsvm import gd
    from attsvm import highprec as hp
    from attsvm.model import corr
    from attsvm.svm import wmm
    from attsvm.tolerances import tol

    h = case.hypotheses
    ds = case.data
    Wa = wmm(ds, ds.selection)
    W0 = np.array(outcome.detail["W0"])
    W_mp = hp.replay(ds, W0, param="W", algo="ngd", lr=0.1, steps=int(h["steps"])).array("W")
    ref = gd.run(ds, param="W", algo="ngd", lr=0.1, steps=int(h["steps"]), init=W0).W[0]
    rel = float(np.linalg.norm(W_mp - ref) / np.linalg.norm(ref))
    e0, e1 = outcome.detail["one_minus_corr"][0], 1 - float(corr(W_mp, Wa))
    if rel > tol("replay_rtol"):
        return Outcome(ok=True, inconclusive=f"float64 path differs from the 50-digit replay ({rel:.2e})")
    m = h["shrink"] * e0 - e1
    return Outcome(ok=m >= 0, margin=float(m), detail={"mp_vs_float64_rel": rel, "one_minus_corr_mp": e1})
