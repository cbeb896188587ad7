r"""Joint $(v,p)$ training (2306.13596, claim ``joint-vp-relaxed``): $v\to v^{mm}$, $p\to$ relaxed prompt SVM.

Model $f(X)=v^\top X^\top\mathbb S(Xp)$ with both $v$ and $p$ trained by normalised GD ($\eta=0.1$, each
factor's gradient normalised), from random $(v_0,p_0)$ ($0.1\,\mathcal N$), 2000 steps, 100 seeds, paper-law
tokens ($n=4$, $T=4$, $d=12$). With $\alpha$ the final selection: $v^{mm}=\arg\min\|v\|$ s.t.
$Y_iv^\top x_{i\alpha_i}\ge1$, support set $\mathcal S$, and the relaxed prompt SVM (margin $\ge1$ on
$\mathcal S$, $\ge0$ elsewhere). Tracked: $\mathrm{corr}(v_k,v^{mm})$ and $\mathrm{corr}(p_k,p^{rel})$.
"""

from __future__ import annotations

import numpy as np

TITLE = "Joint (v,p): v converges to the head SVM v^mm, p to the relaxed prompt SVM"
CLAIMS = ("joint-vp-relaxed",)
SIZES = {
    "full": {"n": 4, "T": 4, "d": 12, "seeds": 100, "steps": 2000, "record_every": 20},
    "smoke": {"n": 4, "T": 4, "d": 12, "seeds": 12, "steps": 400, "record_every": 20},
}


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import band_stats, call_each, corr_trajectory, gd_runs, stack, summary

    s = ctx.size
    n, T, d, B = s["n"], s["T"], s["d"], ctx.seeds
    ds = generate.paper_law(n, T, d, seed=11, B=B)
    kw = dict(param="vp", algo="ngd", lr=0.1, steps=s["steps"], init="random", seed=1)
    kw.update(record_every=s["record_every"], record_params=True)
    ctx.progress.note(f"normalised GD on (v,p): {B} runs x {s['steps']} steps")
    (r,) = gd_runs(ctx, [dict(ds=ds, **kw)], "gd")
    alpha = np.asarray(r.selection)
    dsa = ds.with_alpha(alpha)
    heads = call_each(ctx, "attsvm.svm:solve", [((dsa[b],), {"program": "head"}) for b in range(B)], "head SVM")
    V, okv = stack(heads, (d,), key="v")
    jobs = [((dsa[b],), {"program": "relaxed"}) for b in range(B)]
    rel = call_each(ctx, "attsvm.svm:solve", jobs, "relaxed prompt SVM")
    P, okp = stack(rel, (d,), key="p")
    cv = corr_trajectory(np.asarray(r.trajectory["v"])[..., None], V[..., None])
    cp = corr_trajectory(np.asarray(r.trajectory["p"])[..., None], P[..., None])
    sizes = [len(np.atleast_1d(h["extra"]["S"])) for h in heads if isinstance(h, dict) and "S" in h.get("extra", {})]
    return {
        "settings": dict(s, init="random 0.1N", algo="ngd", lr=0.1),
        "runs": B,
        "head_feasible": int(okv.sum()),
        "relaxed_feasible": int(okp.sum()),
        "support_size_mean": float(np.mean(sizes)) if sizes else None,
        "final_corr_v": summary(cv[-1]),
        "final_corr_p": summary(cp[-1]),
        "final_max_softmax_mean": float(np.mean(r.max_softmax)),
        "curves": {
            "step": r.trajectory["step"],
            "v": band_stats(1 - cv, log=True),
            "p": band_stats(1 - cp, log=True),
        },
    }


def plot(res: dict):
    from attsvm.experiments import band, new_figure

    fig, ax = new_figure(width=4.8, height=3.4)
    cur = res["curves"]
    band(ax[0, 0], cur["step"], cur["v"], label=r"$1-\mathrm{corr}(v_k,v^{mm})$", color="C0", logy=True)
    band(ax[0, 0], cur["step"], cur["p"], label=r"$1-\mathrm{corr}(p_k,p^{\mathrm{rel}})$", color="C1", logy=True)
    ax[0, 0].set(xlabel="iteration", title=f"Joint (v,p) training, {res['runs']} seeds (mean of log ± std)")
    ax[0, 0].legend(fontsize=8)
    ax[0, 0].grid(alpha=0.3)
    return fig


def check(res: dict) -> list[str]:
    fails = []
    for key, lbl in (("final_corr_v", "v vs v^mm"), ("final_corr_p", "p vs relaxed prompt SVM")):
        m = res[key]["mean"] or 0
        if m < 0.9:
            fails.append(f"{lbl}: mean final corr {m:.4f} < 0.9")
    return fails
