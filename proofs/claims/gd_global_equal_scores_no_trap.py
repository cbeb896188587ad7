r"""``gd-global-equal-scores-no-trap`` (empirical; our refinement of ``gd-global-equal-scores``):
Assumption B and **no trap set** ⇒ GD from any initialisation ends with every input on its optimal
token. A trap set is a non-empty proper subset $S$ of inputs such that the Att-SVM $W'$ of the other
inputs exists and every $i\in S$ has deficit $\max_{t\ne\mathrm{opt}_i}(x_{it}-x_{i,\mathrm{opt}_i})^\top
W'z_i>1$ (:func:`attsvm.claims.trap.trap_sets`): along $W'$ those inputs' share of the gradient
vanishes exponentially, so they never recover (the mechanism that refutes ``gd-global-equal-scores``).

Runs on data sets that have a trap set are outside the hypothesis (undecided); in addition every
stuck run must be explained: its wrong inputs must form one of the data set's trap sets (the run fails
otherwise). Aligned queries ($Y_iz_{i1}>0$, the strategy's ``feasible=True``) do *not* exclude traps
(8/100 data sets trapped in our sweep), so they are not the missing hypothesis.
"""

from attsvm.claims import Outcome, claim

HYP = {
    "data": "equal_scores",
    "n": 4,
    "T": 5,
    "d": 3,
    "feasible": False,
}
PARAMS = {
    "algo": "ngd",
    "lr": 0.1,
    "init": "random",
    "init_scale": 1.0,
    "inits": 4,
    "steps": 3000,
    "corr_trap": 0.9,
    "log_s_trap": -5.0,
}


@claim(
    id="gd-global-equal-scores-no-trap",
    title="Assumption B, no trap set: GD from any initialisation selects opt everywhere",
    origin="empirical",
    source="this project (refinement of THEORY §4 gd-global-equal-scores)",
    hypotheses=dict(HYP),
    params=dict(PARAMS),
    depends=("gd-global-equal-scores",),
    kind="empirical",
    rate=0.95,
    examples=48,
    expect="inconclusive",
    finding=(
        "open (pinned 2026-12-01): never refuted, not yet verified. At the default budget (seed 0) 15/15 decided "
        "runs select opt everywhere (95% CI [0.796, 1.000] straddles 0.95) and 33/48 runs fall outside the "
        "hypothesis (their data set has a trap set); verifying it needs >= 73 decided runs without a failure."
    ),
)
def gd_global_equal_scores_no_trap(case):
    import numpy as np

    from attsvm.claims.trap import trap_sets, trap_sweep

    h = case.hypotheses
    d = case.batch.d
    k = 1 if h["init"] == "zero" else int(h["inits"])
    W0 = np.concatenate([np.zeros((1, d, d)), case.rng().standard_normal((k - 1, d, d)) * float(h["init_scale"])])
    res = trap_sweep(case.batch, W0, **{k: h[k] for k in ("algo", "lr", "steps", "corr_trap", "log_s_trap")})
    runs, bad, n_trap_data, explained, trapped_total = [], {}, 0, 0, 0
    for b, r in enumerate(res):
        traps = trap_sets(case.batch[b])
        wrong = r.get("wrong_inputs") or []
        if traps:
            n_trap_data += 1
            if r["ok"] is False:
                trapped_total += 1
                explained += int(any(sorted(S) == sorted(wrong) for S, _ in traps))
            runs.append(None)  # outside the hypothesis
            continue
        ok = r["margin"] is not None and r["margin"] > 1.0
        runs.append(ok if r["margin"] is not None else None)
        if not ok:
            bad[str(b)] = {k_: v for k_, v in r.items() if k_ != "W_end"}
    dec = [x for x in runs if x is not None]
    return Outcome(
        ok=not bad,
        margin=0.0 if bad else 1.0,
        runs=runs,
        detail={
            "failing": bad,
            "data_with_trap_sets": n_trap_data,
            "decided": len(dec),
            "trapped_runs": trapped_total,
            "trapped_runs_explained_by_a_trap_set": explained,
        },
    )
