r"""``gd-local-cone`` (reconstructed): $\alpha$ locally optimal, $W_0\in\mathcal C_{\mu,R_0}(W^{mm}_\alpha)$ with
$\mu=\frac18(\min(\frac12,\delta_\alpha)/A)^2$, $A=\max_{i,t}\|x_{it}\|\|z_i\|\|W^{mm}_\alpha\|_F$, $R_0$ large
⇒ $\mathrm{corr}(W_k,W^{mm}_\alpha)\to1$ and $s_{i\alpha_i}\to1$.
Finite-horizon check: after ``steps`` normalised-GD steps from a seeded point of the cone
(:func:`attsvm.gd.cone_init`, ``R0`` $=$ ``r0``$\cdot\|W^{mm}_\alpha\|_F$), $1-\mathrm{corr}$ has fallen by the
factor ``shrink`` and $\min_is_{i\alpha_i}$ has not decreased.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="gd-local-cone",
    title="GD started in the cone of a locally optimal alpha converges to W^mm_alpha",
    origin="reconstructed",
    source="2308.16898 (local convergence); THEORY §4",
    hypotheses={"data": "locally_optimal", "n": (1, 3), "T": (3, 4), "d": (2, 3)},
    params={"r0": 5.0, "steps": 2000, "shrink": 0.5},
    depends=("svm-kkt", "softmax-decay"),
    examples=15,
    seconds=20,
)
def gd_local_cone(case):
    import numpy as np

    from attsvm import gd
    from attsvm.claims import gdcheck
    from attsvm.model import Arrays, log_softmax, logits

    h = case.hypotheses
    ds = case.data
    alpha = ds.selection
    lo, Wa = gdcheck.locally_optimal(ds, alpha)
    if not lo:
        return Outcome(ok=True, inconclusive="alpha not locally optimal / infeasible for this draw")
    from attsvm.svm.neighbours import neighbour_gap

    delta = float(neighbour_gap(ds, alpha))
    delta = 0.5 if not np.isfinite(delta) else delta
    A = float(np.max(np.linalg.norm(ds.X, axis=-1) * np.linalg.norm(ds.Z, axis=-1)[:, None]) * np.linalg.norm(Wa))
    mu = (min(0.5, delta) / A) ** 2 / 8
    W0 = gd.cone_init(Wa, mu, float(h["r0"]) * float(np.linalg.norm(Wa)), seed=case.seed)
    r = gdcheck.ngd_reference(ds, W0, int(h["steps"]), lr=0.1, record_every=int(h["steps"]))
    e0, e1 = 1 - float(gdcheck.corr(W0, Wa)), 1 - float(gdcheck.corr(r.W, Wa))
    Ar = Arrays.of(ds)
    s = [np.take_along_axis(log_softmax(logits(Ar.X, W, Ar.Z)), alpha[:, None], -1).min() for W in (W0, r.W)]
    margin = min(h["shrink"] * e0 - e1, float(s[1] - s[0]) + 1e-12)
    return Outcome(
        ok=margin >= 0,
        margin=float(margin),
        detail={"mu": mu, "delta": delta, "one_minus_corr": [e0, e1], "min_log_s_alpha": [float(x) for x in s]},
    )
