r"""Joint $(v,p)$ training (2306.13596, claim ``joint-vp-relaxed``): $v\to v^{mm}$, $p\to$ relaxed prompt SVM.

Model $f(X)=v^\top X^\top\mathbb S(Xp)$ with both $v$ and $p$ trained by normalised GD ($\eta=0.1$, each
factor's gradient normalised), from random $(v_0,p_0)$ ($0.1\,\mathcal N$), 2000 steps, 100 seeds, paper-law
tokens ($n=4$, $T=4$, $d=12$). With $\alpha$ the final selection: $v^{mm}=\arg\min\|v\|$ s.t.
$Y_iv^\top x_{i\alpha_i}\ge1$, support set $\mathcal S$, and the relaxed prompt SVM (margin $\ge1$ on
$\mathcal S$, $\ge0$ elsewhere). Tracked: $\mathrm{corr}(v_k,v^{mm})$ and $\mathrm{corr}(p_k,p^{rel})$.
"""

from __future__ import annotations

import numpy as np

TITLE = "Joint (v,p): along normalised GD, 1-corr of v to the head SVM v^mm and of p to the relaxed prompt SVM falls"
CLAIMS = ("joint-vp-relaxed",)
SIZES = {
    "full": {"n": 4, "T": 4, "d": 12, "seeds": 100, "steps": 2000, "record_every": 20},
    "smoke": {"n": 4, "T": 4, "d": 12, "seeds": 12, "steps": 400, "record_every": 20},
}


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import call_each, corr_trajectory, gd_runs, stack, summary
    from attsvm.figures import band_stats

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
    from attsvm.figures import COLUMN_IN, PALETTE, band, band_key, new_figure

    fig, ax = new_figure(width=COLUMN_IN, height=3.4)
    a = ax[0, 0]
    cur = res["curves"]
    band(a, cur["step"], cur["v"], label=r"$v_k$ vs $v^{mm}$ (head SVM)", color=PALETTE[0], logy=True)
    band(
        a, cur["step"], cur["p"], label=r"$p_k$ vs $p^{\mathrm{rel}}$ (relaxed prompt SVM)", color=PALETTE[1], logy=True
    )
    a.set(xlabel="iteration $k$", ylabel=r"$1-\mathrm{corr}$")
    handles, labels = a.get_legend_handles_labels()
    h, lbl = band_key(cur["v"])
    a.legend(
        [*handles, h], [*labels, lbl.replace(", shade", ",\nshade")], loc="upper center", bbox_to_anchor=(0.5, -0.2)
    )
    s = res["settings"]
    a.set_title(f"Joint $(v,p)$ training\n({res['runs']} seeds, {s['steps']} steps)")
    return fig


def caption(res: dict) -> str:
    s = res["settings"]
    v, p = res["final_corr_v"], res["final_corr_p"]
    sup = "n/a" if res["support_size_mean"] is None else f"{res['support_size_mean']:.2f}"
    return (
        rf"Model $f(X)=v^\top X^\top\mathbb S(Xp)$ with $v$ and $p$ both trained by normalised GD (each factor's "
        rf"gradient normalised, $\eta$ = {s['lr']}) from $v_0,p_0=0.1\,\mathcal N$ for {s['steps']} steps; "
        rf"paper-law data, n = {s['n']}, T = {s['T']}, d = {s['d']}, {res['runs']} seeds. With $\alpha$ the final "
        rf"selection: $1-\mathrm{{corr}}(v_k,v^{{mm}})$ (blue) against the head SVM $v^{{mm}}=\arg\min\|v\|$ s.t. "
        rf"$Y_iv^\top x_{{i\alpha_i}}\ge1$ (feasible in {res['head_feasible']} runs, mean support size {sup}), and "
        rf"$1-\mathrm{{corr}}(p_k,p^{{rel}})$ (vermillion) against the relaxed prompt SVM (margin ≥ 1 on the support "
        rf"set, ≥ 0 elsewhere; feasible in {res['relaxed_feasible']} runs). Lines: geometric mean over the seeds "
        rf"with a feasible SVM; shades: ×/÷ one geometric s.d. (± 1 s.d. of $\log_{{10}}$). Final corr: $v$ "
        rf"{v['mean']:.5f} ± {v['std']:.5f}, $p$ {p['mean']:.4f} ± {p['std']:.4f} (mean ± s.d.)."
    )


def check(res: dict) -> list[str]:
    from attsvm.figures import band_falls

    fails = []
    for key, lbl in (("final_corr_v", "v vs v^mm"), ("final_corr_p", "p vs relaxed prompt SVM")):
        m = res[key]["mean"] or 0
        if m < 0.9:
            fails.append(f"{lbl}: mean final corr {m:.4f} < 0.9")
    for key in ("v", "p"):
        if not band_falls(res["curves"][key]):
            fails.append(f"{key}: 1-corr does not fall over the run")
    return fails
