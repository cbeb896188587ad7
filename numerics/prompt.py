r"""Prompt attention (2306.13596, claim ``prompt-gd-pmm``): GD on $p$ converges in direction to $p^{mm}_\alpha$.

Model $f(X)=v^\top X^\top\mathbb S(Xp)$ with $v$ fixed (paper law). Normalised GD $\eta=0.1$ on $p$ from a
random $p_0$ ($0.1\,\mathcal N$), 2000 steps, 100 seeds, for a single input ($n=1$) and for multiple inputs
($n=4$); $\alpha_i=\arg\max_ts_{it}$ at the end and $p^{mm}_\alpha=\arg\min\|p\|$ s.t.
$p^\top(x_{i\alpha_i}-x_{it})\ge1$. Tracked: $\mathrm{corr}(p_k,p^{mm}_\alpha)$ and $\max_ts_{it}$.
"""

from __future__ import annotations

import numpy as np

TITLE = "Prompt attention: GD on p converges to the prompt SVM direction p^mm_alpha (single and multiple inputs)"
CLAIMS = ("prompt-gd-pmm",)
SIZES = {
    "full": {"cases": {"single": [1, 6, 8], "multiple": [4, 4, 12]}, "seeds": 100, "steps": 2000, "record_every": 20},
    "smoke": {"cases": {"single": [1, 6, 8], "multiple": [4, 4, 12]}, "seeds": 12, "steps": 400, "record_every": 20},
}


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import band_stats, call_each, corr_trajectory, gd_runs, stack, summary

    s = ctx.size
    B = ctx.seeds
    cases = {k: tuple(v) for k, v in s["cases"].items()}
    data = {k: generate.paper_law(n, T, d, seed=7, B=B) for k, (n, T, d) in cases.items()}
    common = dict(param="p", algo="ngd", lr=0.1, steps=s["steps"], init="random", seed=1)
    common.update(record_every=s["record_every"], record_params=True)
    ctx.progress.note(f"normalised GD on p: {len(cases)} cases x {B} runs x {s['steps']} steps")
    runs = gd_runs(ctx, [dict(ds=ds, **common) for ds in data.values()], "gd")
    out: dict = {"settings": dict(s, init="random 0.1N", algo="ngd", lr=0.1)}
    for (name, ds), r in zip(data.items(), runs):
        d = ds.d
        alpha = np.asarray(r.selection)
        dsa = ds.with_alpha(alpha)
        sol = call_each(
            ctx, "attsvm.svm.prompt:solve_prompt", [((dsa[b],), {}) for b in range(B)], f"prompt SVM {name}"
        )
        P, ok = stack(sol, (d,), key="p")
        corr = corr_trajectory(np.asarray(r.trajectory["p"])[..., None], P[..., None])
        maxs = np.asarray(r.trajectory["max_softmax"]).mean(-1)
        out[name] = {
            "n_T_d": cases[name],
            "runs": B,
            "feasible": int(ok.sum()),
            "final_corr": summary(corr[-1]),
            "final_max_softmax_mean": float(np.mean(r.max_softmax)),
            "frac_opt": float(np.mean(np.all(alpha == np.asarray(ds.opt), axis=-1))),
            "curves": {
                "step": r.trajectory["step"],
                "one_minus_corr": band_stats(1 - corr, log=True),
                "max_softmax": band_stats(maxs),
            },
        }
    return out


def plot(res: dict):
    from attsvm.experiments import band, new_figure

    fig, ax = new_figure(ncols=2)
    for name, c in (("single", "C0"), ("multiple", "C1")):
        cur = res[name]["curves"]
        n, T, d = res[name]["n_T_d"]
        band(ax[0, 0], cur["step"], cur["one_minus_corr"], label=f"{name} (n={n}, T={T}, d={d})", color=c, logy=True)
        band(ax[0, 1], cur["step"], cur["max_softmax"], label=name, color=c)
    ax[0, 0].set(xlabel="iteration", ylabel=r"$1-\mathrm{corr}(p_k,p^{mm}_\alpha)$", title="direction of p")
    ax[0, 1].set(xlabel="iteration", ylabel=r"mean $\max_t s_{it}$", title="softmax saturation")
    for a in ax[0]:
        a.legend(fontsize=7)
        a.grid(alpha=0.3)
    fig.suptitle("Prompt attention: GD on p vs the prompt SVM of its selection", fontsize=9)
    return fig


def check(res: dict) -> list[str]:
    fails = []
    for name in ("single", "multiple"):
        m = res[name]["final_corr"]["mean"] or 0
        if m < 0.99:
            fails.append(f"{name}: mean final corr(p, p^mm_alpha) {m:.4f} < 0.99")
    return fails
