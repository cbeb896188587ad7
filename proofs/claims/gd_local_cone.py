r"""``gd-local-cone`` (reconstructed): $\alpha$ locally optimal, $W_0\in\mathcal C_{\mu,R_0}(W^{mm}_\alpha)$ with
$\mu=\frac18(\min(\frac12,\delta_\alpha)/A)^2$, $A=\max_{i,t}\|x_{it}\|\|z_i\|\|W^{mm}_\alpha\|_F$, $R_0$ large
⇒ $\mathrm{corr}(W_k,W^{mm}_\alpha)\to1$ and $s_{i\alpha_i}\to1$.
Finite-horizon check: after ``steps`` normalised-GD steps from a seeded point of the cone
(:func:`attsvm.gd.cone_init`, ``R0`` $=$ ``r0``$\cdot\|W^{mm}_\alpha\|_F$), $1-\mathrm{corr}$ has fallen by the
factor ``shrink`` and $\min_is_{i\alpha_i}$ has not decreased.
Confirmer: the run replayed at 50 digits from the same $W_0$, against the exact $W^{mm}_\alpha$.
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
)
def gd_local_cone(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import Arrays, corr, log_softmax, logits

    h = case.hypotheses
    ds = case.data
    alpha = ds.selection
    start = _start(case)
    if start is None:
        return Outcome(ok=True, inconclusive="alpha not locally optimal / infeasible for this draw")
    Wa, mu, delta, W0 = start
    r = gd.run(ds, param="W", algo="ngd", lr=0.1, steps=int(h["steps"]), init=W0)
    e0, e1 = 1 - float(corr(W0, Wa)), 1 - float(corr(r.W[0], Wa))
    Ar = Arrays.of(ds)
    s = [np.take_along_axis(log_softmax(logits(Ar.X, W, Ar.Z)), alpha[:, None], -1).min() for W in (W0, r.W[0])]
    margin = min(h["shrink"] * e0 - e1, float(s[1] - s[0]) + 1e-12)
    return Outcome(
        ok=margin >= 0,
        margin=float(margin),
        detail={"mu": mu, "delta": delta, "one_minus_corr": [e0, e1], "min_log_s_alpha": [float(x) for x in s]},
    )


def _start(case):
    """``(W^mm_alpha, mu, delta_alpha, W_0)`` of the check (float64, deterministic), or None when alpha is not
    locally optimal / Att-SVM(alpha) infeasible."""
    import numpy as np

    from attsvm import gd
    from attsvm.svm import solve_fro

    ds = case.data
    sol = solve_fro(ds, ds.selection)
    if not sol.feasible or not sol.locally_optimal:
        return None
    Wa = np.asarray(sol.W)
    delta = 0.5 if sol.delta is None else float(sol.delta)
    A = float(np.max(np.linalg.norm(ds.X, axis=-1) * np.linalg.norm(ds.Z, axis=-1)[:, None]) * np.linalg.norm(Wa))
    mu = (min(0.5, delta) / A) ** 2 / 8
    W0 = gd.cone_init(Wa, mu, float(case.hypotheses["r0"]) * float(np.linalg.norm(Wa)), seed=case.seed)
    return Wa, mu, delta, W0


@gd_local_cone.confirm
def _confirm(case, outcome):
    r"""The same ``steps`` normalised-GD steps from the same $W_0$ replayed at 50 digits
    (:func:`attsvm.highprec.replay`); $W^{mm}_\alpha$ and its active set from the exact rational certificate
    (:func:`attsvm.svm.certify_fro`); both terms of the margin recomputed at 50 digits from those."""
    import mpmath as mp

    from attsvm import highprec as hp
    from attsvm.svm import certify_fro

    start = _start(case)
    if start is None:
        return Outcome(ok=True, inconclusive="alpha not locally optimal / infeasible (float64 solve)")
    W0, ds, h = start[3], case.data, case.hypotheses
    alpha = ds.selection
    cert = certify_fro(ds, alpha)
    if not cert.get("verified") or cert.get("W") is None:
        return Outcome(ok=True, inconclusive=f"no exact certificate for W^mm_alpha ({cert.get('reason', 'omitted')})")
    with mp.workdps(hp.DPS):
        D = hp.data(ds)
        g = hp.scores(D.X, D.Y, D.v)
        if any(g[i][t] >= g[i][int(alpha[i])] for i, t in cert["active"]):
            return Outcome(ok=True, inconclusive="alpha is not locally optimal by the exact active set")
        Wa = hp.rationals(cert["W"])
        run = hp.replay(D, W0, param="W", algo="ngd", lr=0.1, steps=int(h["steps"]))
        W1 = run.final["W"]
        e0, e1 = 1 - hp.corr(hp.as_mp(W0), Wa), 1 - hp.corr(W1, Wa)

        def min_log_s(W):
            a = hp.logits(D.X, W, D.Z)
            return min(hp.log_softmax(a[i], D.vis[i])[int(alpha[i])] for i in range(D.N))

        s0, s1 = min_log_s(hp.as_mp(W0)), min_log_s(W1)
        m = min(mp.mpf(h["shrink"]) * e0 - e1, s1 - s0 + mp.mpf("1e-12"))
    margin = hp.signed_float(m)
    detail = {"one_minus_corr": [float(e0), float(e1)], "min_log_s_alpha": [float(s0), float(s1)], "dps": hp.DPS}
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)
