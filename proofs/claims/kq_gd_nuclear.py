r"""``kq-gd-nuclear`` (empirical, open problem): normalised GD on $(K,Q)$ ends near-optimal for
Att-SVM⋆($\alpha$), $\alpha$ its final selection: $W=KQ^\top$ rescaled to margin 1 has nuclear norm within
``eps`` (relative) of the optimum. Paper setting E3 ($K_0=0.1\mathcal N$, $Q_0=0$), smaller sizes.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="kq-gd-nuclear",
    title="Normalised GD on (K,Q) ends near an Att-SVM* solution of its selection",
    origin="empirical",
    source="2308.16898 (open problem after Thm 1); THEORY §4",
    hypotheses={"data": "paper", "n": 3, "T": 4, "d": 4},
    params={"steps": 2000, "eps": 0.05},
    depends=("rp-nuclear",),
    kind="empirical",
    rate=0.8,
    examples=24,
    expect="inconclusive",
    finding=(
        "open problem of the papers (pinned 2026-12-01): at the default budget (seed 0) 22/24 normalised-GD runs "
        "on (K,Q) end within 5% of the Att-SVM* optimum after 2000 steps (95% CI [0.742, 0.977] straddles 0.8)."
    ),
)
def kq_gd_nuclear(case):
    import numpy as np

    from attsvm import gd
    from attsvm.svm.constraints import build
    from attsvm.svm.nuclear import solve_nuclear

    h = case.hypotheses
    ds = case.batch
    res = gd.run(ds, param="KQ", algo="ngd", lr=0.1, steps=int(h["steps"]), init="zero", init_scale=0.1, seed=case.seed)
    runs, exc = [], []
    for b in range(ds.batch_size):
        a = res.selection[b]
        sol = solve_nuclear(ds[b], a)
        if sol.status != "optimal":
            runs.append(None)
            continue
        m = build(ds[b], a).margins(res.W[b]).min()
        if m <= 0:
            runs.append(False)
            continue
        e = np.linalg.svd(res.W[b] / m, compute_uv=False).sum() / float(sol.objective) - 1.0
        exc.append(float(e))
        runs.append(bool(e <= h["eps"]))
    return Outcome(
        ok=all(r is not False for r in runs),
        margin=float(h["eps"] - max(exc)) if exc else 0.0,
        runs=runs,
        detail={
            "measured": f"per run: ||KQ^T / margin||_* / Att-SVM*(alpha) optimum - 1 after {int(h['steps'])} NGD steps "
            f"on (K,Q); a run passes when <= eps = {h['eps']}",
            "relative_excess": np.round(exc, 5).tolist(),
        },
    )
