r"""Prompt attention (2306.13596, claim ``prompt-gd-pmm``): GD on $p$ converges in direction to $p^{mm}_\alpha$.

Model $f(X)=v^\top X^\top\mathbb S(Xp)$ with $v$ fixed (paper law). Normalised GD $\eta=0.1$ on $p$ from a
random $p_0$ ($0.1\,\mathcal N$), 2000 steps, 100 seeds, for a single input ($n=1$) and for multiple inputs
($n=4$); $\alpha_i=\arg\max_ts_{it}$ at the end and $p^{mm}_\alpha=\arg\min\|p\|$ s.t.
$p^\top(x_{i\alpha_i}-x_{it})\ge1$. Tracked: $\mathrm{corr}(p_k,p^{mm}_\alpha)$ and $\max_ts_{it}$.
"""

from __future__ import annotations

import numpy as np

TITLE = (
    "Prompt attention: along normalised GD on p (one input and several), 1-corr to the prompt SVM direction "
    "p^mm_alpha of the final selection falls and the softmax saturates"
)
CLAIMS = ("prompt-gd-pmm",)
SIZES = {
    "full": {"cases": {"single": [1, 6, 8], "multiple": [4, 4, 12]}, "seeds": 100, "steps": 2000, "record_every": 20},
    "smoke": {"cases": {"single": [1, 6, 8], "multiple": [4, 4, 12]}, "seeds": 12, "steps": 400, "record_every": 20},
}


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import call_each, corr_trajectory, gd_runs, stack, summary
    from attsvm.figures import band_stats

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
    from attsvm.figures import PALETTE, TEXT_IN, band, band_key, new_figure

    fig, ax = new_figure(ncols=2, width=TEXT_IN, height=3.0)
    lines = []
    for k, name in enumerate(("single", "multiple")):
        cur = res[name]["curves"]
        n, T, d = res[name]["n_T_d"]
        lbl = f"{'one input' if name == 'single' else 'several inputs'} (n = {n}, T = {T}, d = {d})"
        lines.append(band(ax[0, 0], cur["step"], cur["one_minus_corr"], label=lbl, color=PALETTE[k], logy=True))
        band(ax[0, 1], cur["step"], cur["max_softmax"], color=PALETTE[k])
    ax[0, 0].set(
        xlabel="iteration $k$",
        ylabel=r"$1-\mathrm{corr}(p_k,p^{mm}_\alpha)$",
        title="direction of $p$ vs the prompt SVM",
    )
    ax[0, 1].set(
        xlabel="iteration $k$", ylabel=r"$\mathrm{mean}_i\,\mathrm{max}_t\,s_{it}$", title="softmax saturation"
    )
    cur = res["single"]["curves"]
    keys = [band_key(cur["one_minus_corr"]), band_key(cur["max_softmax"])]
    handles = [*lines, keys[0][0], keys[1][0]]
    labels = [*(ln.get_label() for ln in lines), "left: " + keys[0][1], "right: " + keys[1][1]]
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    s = res["settings"]
    fig.suptitle(f"Prompt attention: normalised GD on $p$ ({res['single']['runs']} seeds, {s['steps']} steps)")
    return fig


def caption(res: dict) -> str:
    s = res["settings"]
    parts = []
    for name, what in (("single", "one input"), ("multiple", "several inputs")):
        r = res[name]
        n, T, d = r["n_T_d"]
        parts.append(
            f"{what} (blue / vermillion; n = {n}, T = {T}, d = {d}): mean final corr {r['final_corr']['mean']:.4f} "
            f"(min {r['final_corr']['min']:.4f}), prompt SVM feasible in {r['feasible']} of {r['runs']} runs, final "
            f"selection = opt in {r['frac_opt']:.0%}"
        )
    return (
        rf"Model $f(X)=v^\top X^\top\mathbb S(Xp)$ with $v$ fixed, paper-law data; {res['single']['runs']} seeds per "
        rf"case, normalised GD with $\eta$ = {s['lr']} on $p$ from $p_0=0.1\,\mathcal N$ for {s['steps']} steps, "
        rf"recorded every {s['record_every']} steps. $\alpha_i=\arg\max_ts_{{it}}$ at the last step, $p^{{mm}}_\alpha"
        rf"=\arg\min\|p\|$ s.t. $p^\top(x_{{i\alpha_i}}-x_{{it}})\ge1$. Left: $1-\mathrm{{corr}}(p_k,p^{{mm}}_\alpha)$ "
        rf"(line: geometric mean over the seeds, shade: ×/÷ one geometric s.d.). Right: the mean over the inputs of "
        rf"$\max_ts_{{it}}$ (line: mean over the seeds, shade: ± 1 s.d.). " + "; ".join(parts) + "."
    )


def check(res: dict) -> list[str]:
    from attsvm.figures import band_falls

    fails = []
    for name in ("single", "multiple"):
        m = res[name]["final_corr"]["mean"] or 0
        if m < 0.99:
            fails.append(f"{name}: mean final corr(p, p^mm_alpha) {m:.4f} < 0.99")
        if not band_falls(res[name]["curves"]["one_minus_corr"]):
            fails.append(f"{name}: 1-corr(p, p^mm_alpha) does not fall over the run")
        if not res[name]["final_max_softmax_mean"] >= 0.9:
            fails.append(f"{name}: mean final max softmax {res[name]['final_max_softmax_mean']:.3f} < 0.9")
    return fails
