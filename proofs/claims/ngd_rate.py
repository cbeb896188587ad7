r"""``ngd-rate`` (reconstructed, 2402.05738): normalised GD reaches $1-\mathrm{corr}(W_t,W^{mm}_\alpha)\le\varepsilon$
in polynomially many steps. Measured per run: $e(t)=1-\mathrm{corr}(W_t,W^{mm}_\alpha)$ ($\alpha$ the final
selection) at log-spaced $t$; the exponent $p$ of $e\approx Ct^{-p}$ fitted on the second half of the
records. A run passes when $p\ge$ ``p_min`` (polynomial rate, exponent bounded away from 0) and $e$ fell.
For contrast the detail reports plain GD ($\eta=1/L_W$, same steps): its fit against $(\log t)^{-q}$.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="ngd-rate",
    title="Normalised GD: 1 - corr(W_t, W^mm) decays polynomially in t",
    origin="reconstructed",
    source="2402.05738 (fast rates for normalised GD); THEORY §4",
    hypotheses={"data": "paper", "n": 3, "T": 4, "d": 4},
    params={"steps": 8000, "p_min": 0.5, "records": 16},
    depends=("gd-selects-locally-optimal",),
    kind="empirical",
    rate=0.8,
    ci_examples=24,  # >= 16 passing runs for a 95% Wilson bound >= 0.8
    examples=24,
)
def ngd_rate(case):
    import numpy as np

    from attsvm import gd
    from attsvm.model import corr
    from attsvm.svm import wmm

    h = case.hypotheses
    ds = case.batch
    B, steps = ds.batch_size, int(h["steps"])
    rec = max(1, steps // (8 * int(h["records"])))
    r = gd.run(ds, param="W", algo="ngd", lr=0.1, steps=steps, record_every=rec, record_params=True)
    g = gd.run(ds, param="W", algo="gd", lr="1/L", steps=steps, record_every=rec, record_params=True)
    alpha = r.selection
    Ws, Wg = r.trajectory["W"], g.trajectory["W"]
    t = r.trajectory["step"].astype(float)
    sel = np.unique(np.geomspace(max(rec, steps / 64), steps, int(h["records"])).astype(int) // rec)
    runs, ps, qs = [], [], []
    for b in range(B):
        W = wmm(ds[b], alpha[b])
        if W is None:
            runs.append(None)
            continue
        e = 1.0 - corr(Ws[:, b], W[None])
        eg = 1.0 - corr(Wg[1:, b], W[None])
        half = sel[len(sel) // 2 :]
        p = gd.fit_power(t[half], e[half])
        q = gd.fit_log_rate(t[1:][half[half > 0] - 1], eg[half[half > 0] - 1])
        ps.append(p)
        qs.append(q)
        runs.append(bool(p >= h["p_min"] and e[-1] < e[sel[0]]))
    ps_a = np.array(ps)
    return Outcome(
        ok=all(x is not False for x in runs),
        margin=float(np.nanmin(ps_a) - h["p_min"]) if ps else 0.0,
        runs=runs,
        detail={
            "ngd_exponent_median": float(np.nanmedian(ps_a)),
            "ngd_exponents": ps_a.round(3).tolist(),
            "gd_log_exponent_median": float(np.nanmedian(qs)) if qs else None,
        },
    )
