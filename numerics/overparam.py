r"""E5 — convergence type against $d$: the overparameterisation story (THEORY §4, ``feasible-overparam``).

Paper law, $n=6$, $T=8$, random initialisation, normalised GD $\eta=0.1$, 2000 steps, 100 seeds per $d$.
Each run is classified by the selection $\alpha_i=\arg\max_ts_{it}$ it ends on:

* *global*: $\alpha=\mathrm{opt}$ and $\mathrm{corr}(W_k,W^{mm})\ge1-\epsilon$;
* *local*: $\alpha\ne\mathrm{opt}$ is locally optimal (Att-SVM($\alpha$) feasible, scores beat the
  SVM-neighbours) and $\mathrm{corr}(W_k,W^{mm}_\alpha)\ge1-\epsilon$;
* *neither*: anything else (no SVM direction reached in the budget),

with $\epsilon$ = ``tol("experiment_corr")``. As $d$ grows past $\max(T-1,n)$ every selection becomes
feasible and the fraction converging to the global direction grows.
"""

from __future__ import annotations

import numpy as np

TITLE = (
    "E5: fraction of GD runs that reach the global / a local SVM direction (corr >= 1 - eps within the step budget) "
    "or neither, against d"
)
CLAIMS = ("feasible-overparam", "gd-selects-locally-optimal")
SIZES = {
    "full": {"n": 6, "T": 8, "ds": [2, 3, 4, 6, 8, 10, 15, 20], "seeds": 100, "steps": 2000},
    "smoke": {"n": 6, "T": 8, "ds": [2, 20], "seeds": 16, "steps": 2000},
}


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import call_each, corr_trajectory, fro_batch, gd_runs
    from attsvm.tolerances import tol

    s = ctx.size
    n, T, B = s["n"], s["T"], ctx.seeds
    eps = tol("experiment_corr")
    data = {d: generate.paper_law(n, T, d, seed=100 + d, B=B) for d in s["ds"]}
    common = dict(param="W", algo="ngd", lr=0.1, steps=s["steps"], init="random", seed=1)
    ctx.progress.note(f"normalised GD: {len(data)} values of d x {B} runs x {s['steps']} steps")
    runs = gd_runs(ctx, [dict(ds=ds, **common) for ds in data.values()], "gd")
    rows = []
    for (d, ds), r in zip(data.items(), runs):
        alpha = np.asarray(r.selection)
        opt = np.asarray(ds.opt)
        gW, g_ok = fro_batch(ctx, ds, "svm fro")  # on the pool (solver failures count as not feasible)
        aW, a_ok = fro_batch(ctx, ds.with_alpha(alpha), "svm fro")
        cg = np.where(g_ok, corr_trajectory(r.W[None], np.nan_to_num(gW))[0], np.nan)
        ca = np.where(a_ok, corr_trajectory(r.W[None], np.nan_to_num(aW))[0], np.nan)
        is_opt = np.all(alpha == opt, axis=-1)
        loc = np.array(
            call_each(ctx, "attsvm.svm:is_locally_optimal", [((ds[b], alpha[b]), {}) for b in range(B)], f"d={d}"),
            dtype=bool,
        )
        glob = is_opt & (cg >= 1 - eps)
        local = ~is_opt & a_ok & loc & (ca >= 1 - eps)
        rows.append(
            {
                "d": d,
                "runs": B,
                "global": float(glob.mean()),
                "local": float(local.mean()),
                "neither": float(1 - glob.mean() - local.mean()),
                "feasible_opt": float(np.mean(g_ok)),
                "feasible_final_selection": float(np.mean(a_ok)),
                "ended_on_opt": float(is_opt.mean()),
                "stuck_runs": float(np.mean(np.any(r.stuck, axis=-1))),
            }
        )
        ctx.progress.note(f"d={d}: global {glob.mean():.2f} local {local.mean():.2f}")
    return {"settings": dict(s, eps=eps, init="random", algo="ngd", lr=0.1), "rows": rows}


def plot(res: dict):
    from matplotlib.lines import Line2D

    from attsvm.figures import COLORS, COLUMN_IN, new_figure

    rows, s = res["rows"], res["settings"]
    d = np.array([r["d"] for r in rows], dtype=float)
    fig, ax = new_figure(width=COLUMN_IN, height=3.9)
    a = ax[0, 0]
    for key, mk in (("global", "o"), ("local", "s"), ("neither", "^")):
        y = np.array([r[key] for r in rows])
        se = np.sqrt(y * (1 - y) / np.array([r["runs"] for r in rows]))
        a.errorbar(d, y, yerr=se, color=COLORS[key], marker=mk, label=key)
    n, T = s["n"], s["T"]
    a.plot(d, [r["feasible_opt"] for r in rows], color=COLORS["reference"], ls=":")
    a.axvline(max(T - 1, n), color="0.6", lw=0.8)
    a.set(xlabel="dimension $d$", ylabel="fraction of runs", ylim=(-0.03, 1.03), xscale="log")
    a.set_xticks(d, [str(int(x)) for x in d])
    a.minorticks_off()
    handles, labels = a.get_legend_handles_labels()
    handles += [
        Line2D([], [], ls="", marker="|", ms=9, mew=1.2, color="0.3"),
        Line2D([], [], color=COLORS["reference"], ls=":"),
        Line2D([], [], color="0.6", lw=0.8),
    ]
    labels += ["bars: ± 1 binomial s.e.", "Att-SVM(opt) feasible", f"$d=\\max(T-1,n)={max(T - 1, n)}$"]
    a.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    runs = sorted({r["runs"] for r in rows})
    a.set_title(f"E5: convergence type against $d$\n(n = {n}, T = {T}, {runs[0]} runs per $d$)")
    return fig


def caption(res: dict) -> str:
    rows, s = res["rows"], res["settings"]
    runs = sorted({r["runs"] for r in rows})
    seq = lambda key: ", ".join(f"{r[key]:.2f}" for r in rows)  # noqa: E731
    return (
        rf"Paper-law data, n = {s['n']}, T = {s['T']}, $d\in\{{{', '.join(str(r['d']) for r in rows)}\}}$; for each "
        rf"$d$, {runs[0]} seeds (data set and random initialisation $0.1\,\mathcal N$), normalised GD with $\eta$ = "
        rf"{s['lr']} on $W$ for {s['steps']} steps. Each run is classified by the selection "
        rf"$\alpha_i=\arg\max_ts_{{it}}$ it ends on: global ($\alpha$ = opt and $\mathrm{{corr}}(W_k,W^{{mm}})\ge1-"
        rf"\epsilon$), local ($\alpha\ne$ opt locally optimal and $\mathrm{{corr}}(W_k,W^{{mm}}_\alpha)\ge1-"
        rf"\epsilon$) or neither (no SVM direction reached within the {s['steps']} steps), $\epsilon$ = {s['eps']:g}. "
        rf"Markers: the fraction of the runs of each kind; error bars: ± 1 binomial standard error "
        rf"$\sqrt{{p(1-p)/{runs[0]}}}$. Dotted: the fraction of the data sets whose Att-SVM(opt) is feasible. Vertical "
        rf"line: $d=\max(T-1,n)$ = {max(s['T'] - 1, s['n'])}. Global: {seq('global')}; local: {seq('local')}; "
        rf"neither: {seq('neither')} (in the order of $d$)."
    )


def check(res: dict) -> list[str]:
    rows = res["rows"]
    fails = []
    if rows[-1]["global"] <= rows[0]["global"]:
        fails.append(f"fraction global does not grow with d: {rows[0]['global']:.2f} -> {rows[-1]['global']:.2f}")
    if rows[-1]["global"] + rows[-1]["local"] < 0.9:
        fails.append(
            f"at the largest d only {rows[-1]['global'] + rows[-1]['local']:.2f} of runs reach an SVM direction"
        )
    return fails
