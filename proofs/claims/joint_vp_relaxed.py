r"""``joint-vp-relaxed`` (reconstructed, 2306.13596): joint $(v,p)$ training: $v_k/\|v_k\|\to v^{mm}/\|v^{mm}\|$
(head SVM) and $p_k/\|p_k\|\to$ the relaxed prompt SVM direction. Finite-horizon check: both
$1-\mathrm{corr}$ fall between the middle and the end; the $v$ one is $\le$ ``eps`` at the end.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="joint-vp-relaxed",
    title="Joint (v,p): v -> v^mm, p -> relaxed prompt SVM",
    origin="reconstructed",
    source="2306.13596 (joint training); THEORY §4",
    hypotheses={"data": "prompt", "n": (2, 4), "T": (2, 3), "d": (2, 4), "steps": 3000, "eps": 0.1},
    examples=8,
    seconds=20,
)
def joint_vp_relaxed(case):
    import numpy as np

    from attsvm import gd

    try:
        from attsvm.svm.prompt import solve_head, solve_relaxed_prompt
    except ImportError:
        return Outcome(ok=True, inconclusive="engine: attsvm.svm.prompt solve_head/solve_relaxed_prompt not available")
    h = case.hypotheses
    ds = case.data
    steps = int(h["steps"])
    res = gd.run(
        ds,
        param="vp",
        algo="ngd",
        lr=0.1,
        steps=steps,
        init="random",
        seed=case.seed,
        record_every=steps // 2,
        record_params=True,
    )
    a = res.selection[0]
    hv = solve_head(ds.with_alpha(a))
    rp = solve_relaxed_prompt(ds.with_alpha(a))
    if not (hv.feasible and rp.feasible):
        return Outcome(ok=True, inconclusive="head or relaxed prompt SVM infeasible for the final selection")
    vm, pm = np.asarray(hv.extra["v"]), np.asarray(rp.extra["p"])
    cr = lambda x, y: 1 - x @ y / (np.linalg.norm(x) * np.linalg.norm(y))  # noqa: E731
    vs, ps = np.asarray(res.trajectory["v"])[:, 0], np.asarray(res.trajectory["p"])[:, 0]
    ev = np.array([cr(x, vm) for x in vs[1:]])
    ep = np.array([cr(x, pm) for x in ps[1:]])
    margin = min(h["eps"] - ev[-1], ev[0] - ev[-1] + 1e-9, ep[0] - ep[-1] + 1e-9)
    return Outcome(
        ok=margin >= 0, margin=float(margin), detail={"v_one_minus_corr": ev.tolist(), "p_one_minus_corr": ep.tolist()}
    )
