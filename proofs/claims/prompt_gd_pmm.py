r"""``prompt-gd-pmm`` (paper, 2306.13596): GD on $p$ (prompt attention $f=v^\top X^\top\mathbb S(Xp)$) converges in
direction to $p^{mm}_\alpha$ for its (locally optimal) selection. Finite-horizon check:
$1-\mathrm{corr}(p_k,p^{mm}_\alpha)$ falls between the middle and the end and is $\le$ ``eps`` at the end.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="prompt-gd-pmm",
    title="GD on p converges in direction to p^mm_alpha",
    origin="paper",
    source="2306.13596; THEORY §4",
    hypotheses={"data": "prompt", "n": (1, 3), "T": (2, 4), "d": (2, 4)},
    params={"steps": 2000, "eps": 0.05},
    examples=10,
    seconds=20,
)
def prompt_gd_pmm(case):
    import numpy as np

    from attsvm import gd

    try:
        from attsvm.svm.prompt import solve_prompt
    except ImportError:
        return Outcome(ok=True, inconclusive="engine: attsvm.svm.prompt.solve_prompt not available")
    h = case.hypotheses
    ds = case.data
    steps = int(h["steps"])
    res = gd.run(ds, param="p", algo="ngd", lr=0.1, steps=steps, record_every=steps // 2, record_params=True)
    sol = solve_prompt(ds.with_alpha(res.selection[0]))
    if not sol.feasible:
        return Outcome(ok=True, inconclusive="prompt SVM of the final selection infeasible")
    pm = np.asarray(sol.extra["p"])
    ps = np.asarray(res.trajectory["p"])[:, 0]
    e = np.array([1 - p @ pm / (np.linalg.norm(p) * np.linalg.norm(pm)) for p in ps[1:]])
    margin = min(h["eps"] - e[-1], e[0] - e[-1] + 1e-9)
    return Outcome(ok=margin >= 0, margin=float(margin), detail={"one_minus_corr": e.tolist()})
