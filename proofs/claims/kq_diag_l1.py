r"""``kq-diag-l1`` (paper: Sheen et al., arXiv 2403.08699, as far as known): with diagonal key and query matrices,
$W=KQ^\top=\mathrm{diag}(k\odot q)$, gradient flow on $(k,q)$ converges in direction to the minimiser of the nuclear
norm of $W$ — for a diagonal $W$ the entrywise ℓ1 norm of its diagonal — under the Att-SVM constraints of the
selection it ends on: the diagonal ℓ1 Att-SVM $\min\|w\|_1$ s.t. $\sum_jw_j(x_{i\alpha_i}-x_{it})_jz_{ij}\ge1$
(:func:`attsvm.svm.diagonal.solve_diagonal`, an exact LP certificate).

Measured per run of the batch: jointly normalised GD on $(k,q)$ — the gradient flow's direction field, one
normalised step of the whole parameter vector, so the discrete run follows the flow up to a change of time — from
$q_0=0$, $k_0=0.1\,\mathcal N$ for ``steps`` steps; with $\alpha$ its final selection and $m(w)$ the least
constraint value, the excess $\|w/m(w)\|_1/\mathrm{OPT}_1(\alpha)-1\le$ ``eps`` passes; a run whose iterate does
not select its $\alpha$ with a positive margin fails; an infeasible program is undecided. For contrast the detail
reports the same excess for GD on a full $W$ (whose bias is Frobenius), restricted to its diagonal.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="kq-diag-l1",
    title="Diagonal (K,Q): the direction of diag(k q) ends at the l1-minimal diagonal Att-SVM solution",
    origin="paper",
    source="Sheen et al., arXiv 2403.08699 (gradient flow, diagonal factors); THEORY §6",
    hypotheses={"data": "paper", "n": 3, "T": 4, "d": 4},
    params={"steps": 4000, "lr": 0.1, "eps": 0.05},
    depends=("kq-balancedness",),
    kind="empirical",
    rate=0.8,
    examples=24,
    ci_examples=24,
    expect="inconclusive",
    finding=(
        "pinned 2026-12-01 (seed 0): 20/24 runs within 5% after 4000 steps (median excess 0.0018; 21/24 at 16000 "
        "steps, per-factor normalisation alike), 95% CI [0.641, 0.933] straddles 0.8. Of the runs that stay away, "
        "run 19 has a coordinate that started next to the saddle k_j = q_j = 0 (|k_0j| = 0.0012, still 0.0015 "
        "after 4000 steps, while the normalised steps feed the large coordinates), so w_j ~ 0 where the l1 optimum "
        "has 3.68, and runs 9, 22 end on a selection other than opt with "
        "excess 0.13 / 0.51 unchanged from 4000 to 16000 steps."
    ),
)
def kq_diag_l1(case):
    import numpy as np

    from attsvm import gd
    from attsvm.svm.constraints import build
    from attsvm.svm.diagonal import solve_diagonal
    from attsvm.tolerances import tol

    h = case.hypotheses
    ds = case.batch
    r = gd.run(
        ds, param="diag", algo="ngd", normalize="joint", lr=float(h["lr"]), steps=int(h["steps"]), init="zero",
        init_scale=0.1, seed=case.seed,
    )  # fmt: skip
    runs, exc = [], []
    for b in range(ds.batch_size):
        a = r.selection[b]
        sol = solve_diagonal(ds[b], a, "l1")
        if sol.status != "optimal" or max(sol.kkt.values(), default=0.0) > tol("kkt"):
            runs.append(None)
            continue
        F = build(ds[b], a)
        feat = F.D * F.Zc  # constraint j: sum_k w_k feat_jk >= 1
        w = np.diagonal(r.W[b])
        m = float((feat @ w).min())
        if m <= 0:
            runs.append(False)
            exc.append(np.inf)
            continue
        e = float(np.abs(w).sum() / m / float(np.abs(sol.extra["w"]).sum()) - 1.0)
        exc.append(e)
        runs.append(bool(e <= h["eps"]))
    return Outcome(
        ok=all(x is not False for x in runs),
        margin=float(h["eps"] - max(exc)) if exc else 0.0,
        runs=runs,
        detail={
            "measured": f"per run: ||w/m(w)||_1 / OPT_1(alpha) - 1 after {int(h['steps'])} jointly normalised steps "
            f"on diagonal (k, q); a run passes when <= eps = {h['eps']}",
            "excess": np.round(exc, 6).tolist(),
            "excess_median": float(np.median([e for e in exc if np.isfinite(e)])) if exc else None,
        },
    )
