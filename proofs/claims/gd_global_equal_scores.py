r"""``gd-global-equal-scores`` (reconstructed): under Assumption B, GD with $\eta\le1/L_W$ converges in
direction to $W^{mm}$ — *from any initialisation* (as stated in THEORY §4).

Checked as a batched sweep that can refute but never verify (``rate=1.0``): every data set of the batch
is run from ``W_0=0`` and ``inits-1`` seeded random points (``init="zero"``: only ``W_0=0``). For the
inputs whose selection $\alpha_i=\arg\max_ts_{it}\ne\mathrm{opt}_i$ at the end, the Att-SVM $W'$ of the
*other* inputs is solved and each wrong input's *deficit*
$\max_{t\ne\mathrm{opt}_i}(x_{it}-x_{i,\mathrm{opt}_i})^\top W'z_i$ computed. Along $R\,W'/\|W'\|$ input
$i$'s share of the gradient is $e^{-R\rho(\mathrm{deficit}_i-1)}$ ($\rho=1/\|W'\|$), so with every
deficit $>1$ the wrong selection is a **trap**: self-consistent, the escaping gradient vanishes
exponentially relative to the rest, and $W_k/\|W_k\|\to W'/\|W'\|\ne W^{mm}/\|W^{mm}\|$. A run fails when
trapped: deficits $>1$, $\mathrm{corr}(W_k,W')\ge$ ``corr_trap`` and $>\mathrm{corr}(W_k,W^{mm})$, and every
wrong input's $\log s_{i,\mathrm{opt}_i}$ below ``log_s_trap`` and still falling.

Confirmation: the trapped end state is replayed in mpmath (50 digits, gradient from its definition)
next to the float64 path; refuted when both agree, the wrong input's gradient share keeps falling
and the trap deficits exceed 1 (:func:`attsvm.claims.trap.trap_replay`).

Verdict and evidence: ``docs/claims_convergence.md`` — refuted for normalised GD from random init and
from ``W_0=0``, and for plain GD with $\eta=1/L_W$ from ``W_0=0`` (``algo="gd"``, ``lr="1/L"``; pinned
data ``generate.equal_scores(4,5,3,seed=0,B=24)[17]``). The refinement checked next (never refuted, not yet
verified) is ``gd-global-equal-scores-no-trap`` (aligned queries, ``feasible=True``, do not help:
8/100 such data sets trapped).
"""

from attsvm.claims import Outcome, claim

HYP = {
    "data": "equal_scores",
    "n": 4,
    "T": 5,
    "d": 3,
    "feasible": False,  # True adds Y_i z_i[0] > 0 (aligned queries): still refuted (docs)
}
PARAMS = {
    # "ngd": eta = 0.1, the paper's runs, reaches the asymptotic regime in 3000 steps;
    # "gd" with lr "1/L" is the literal statement (refuted too; slower: 1e5 steps, see the docs)
    "algo": "ngd",
    "lr": 0.1,
    "init": "random",  # "random": W_0 = 0 and inits-1 seeded N(0, init_scale^2) points | "zero": W_0 = 0 only
    "init_scale": 1.0,
    "inits": 4,
    "steps": 3000,
    "corr_trap": 0.9,
    "log_s_trap": -5.0,
    "replay_steps": 20,
}


def initial_points(case, d):
    import numpy as np

    h = case.hypotheses
    if h["init"] == "zero":
        return np.zeros((1, d, d))
    k = int(h["inits"])
    rnd = case.rng().standard_normal((k - 1, d, d)) * float(h["init_scale"])
    return np.concatenate([np.zeros((1, d, d)), rnd])


def sweep(batch, W0, h):
    """:func:`attsvm.claims.trap.trap_sweep` with the claim's parameters."""
    from attsvm.claims.trap import trap_sweep

    return trap_sweep(batch, W0, **{k: h[k] for k in ("algo", "lr", "steps", "corr_trap", "log_s_trap")})


@claim(
    id="gd-global-equal-scores",
    title="Assumption B, eta <= 1/L_W: W_k/||W_k|| -> W^mm/||W^mm|| from any initialisation",
    origin="reconstructed",
    source="2308.16898 (global convergence under Assumption B); THEORY §4",
    hypotheses=dict(HYP),
    params=dict(PARAMS),
    depends=("no-stationary-equal-scores", "gd-local-cone"),
    kind="empirical",
    rate=1.0,
    examples=24,
    expect="false",
    finding=(
        "refuted with a confirmed counterexample (settled 2026-11-29): an input stuck on a wrong token whose trap "
        "deficit exceeds 1 stays stuck - its gradient share falls like exp(-R rho (deficit-1)), 1e-492 at step "
        "30000 in a 50-digit replay - for normalised GD from random init and from W_0=0, and for plain GD with "
        "eta=1/L_W from W_0=0 (10^6 steps); evidence in docs/claims_convergence.md. Open refinement: "
        "gd-global-equal-scores-no-trap."
    ),
)
def gd_global_equal_scores(case):
    W0 = initial_points(case, case.batch.d)
    res = sweep(case.batch, W0, case.hypotheses)
    runs = [r["ok"] for r in res]
    margins = [r["margin"] for r in res if r["margin"] is not None]
    trapped = {str(b): r for b, r in enumerate(res) if r["ok"] is False}
    lite = {b: {k: v for k, v in r.items() if k != "W_end"} for b, r in trapped.items()}
    return Outcome(
        ok=not trapped,
        margin=float(min(margins)) if margins else 0.0,
        runs=runs,
        detail={"trapped_runs": lite, "W_end": {b: r["W_end"] for b, r in trapped.items()}, "inits": len(W0)},
    )


@gd_global_equal_scores.confirm
def _confirm(case, outcome):
    from attsvm.claims.trap import trap_replay
    from attsvm.tolerances import tol

    b = str(case.index)
    if b in outcome.detail.get("trapped_runs", {}):
        det = dict(outcome.detail["trapped_runs"][b])
        det["W_end"] = outcome.detail["W_end"][b]
    else:  # a replayed counterexample (attsvm check --replay): rerun its data set from the same initial points
        from attsvm.data import Dataset

        det = sweep(Dataset.stack([case.data]), initial_points(case, case.data.d), case.hypotheses)[0]
        if det["ok"] is not False:
            return Outcome(ok=True, margin=det["margin"] or 0.0, detail={"rerun": "no trapped run"})
    h = case.hypotheses
    hp = trap_replay(
        case.data, det["W_end"], det["wrong_inputs"], algo=h["algo"], lr=h["lr"], steps=int(h["replay_steps"])
    )
    if hp["mp_vs_float64_rel"] > tol("replay_rtol"):
        return Outcome(ok=True, detail=hp, inconclusive="the float64 path differs from the 50-digit replay")
    failed = hp["trapped"] and hp["share_falling"]
    return Outcome(ok=not failed, margin=1.0 - min(hp["deficit"]) if hp["deficit"] else 0.0, detail=hp)
