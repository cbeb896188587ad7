r"""E4 — nonlinear head: GD follows $W^{SVMeq}=W^{fin}+\hat R\,W^{svm}$ (THEORY §2 Gen-SVM, ``gensvm-equivalence``).

Paper law, $n=3$, $T=4$, $d\in\{4,6,8,10\}$, head $h(u)=\mathbf 1^\top\mathrm{ReLU}(V^\top u)$ with $V$
Gaussian, $\|V\|_F=1$; normalised GD $\eta=0.1$ from $W_0=0$ for 2001 steps. A run is *accepted* when
its final softmax has no entry in $(10^{-6},10^{-3}]$, some entry $\le10^{-6}$, and the Gen-SVM and the
one-token Att-SVM of its selection are feasible; 500 accepted runs per $d$ (the number of draws is
reported). Selected sets $\mathcal O_i=\{t:s_{it}\ge10^{-3}\}$. Compared: $1-\mathrm{corr}(W_k,\cdot)$ for
$W^{SVMeq}$, $W^{svm}$ and the one-token $W^{mm}_\alpha$, $\alpha_i=\arg\max_ts_{it}$.
"""

from __future__ import annotations

import numpy as np

TITLE = (
    "E4: with a ReLU head the final GD iterate is closer, in mean 1-corr, to W^SVMeq = W^fin + R W^svm than to "
    "the one-token Att-SVM"
)
CLAIMS = ("gensvm-equivalence",)
SIZES = {
    "full": {"n": 3, "T": 4, "ds": [4, 6, 8, 10], "seeds": 500, "steps": 2001, "max_rounds": 8},
    "smoke": {"n": 3, "T": 4, "ds": [6], "seeds": 12, "steps": 600, "max_rounds": 4},
}
SEL, LOW = 1e-3, 1e-6  # the paper's selection threshold and its "clearly zero" level
FLOOR = 1e-16  # 1 - corr below float64 resolution is drawn at this level


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import call_each, fro_batch, gd_runs, stack, subset
    from attsvm.model import corr

    s = ctx.size
    n, T, need = s["n"], s["T"], ctx.seeds
    rows = []
    for d in s["ds"]:
        acc: dict[str, list] = {k: [] for k in ("eq", "svm", "one", "max_unsel", "R")}
        draws, rounds, rejected = 0, 0, {"window": 0, "no_zero": 0, "infeasible": 0}
        rate = 0.5
        while len(acc["eq"]) < need and rounds < s["max_rounds"]:
            rounds += 1
            B = int(np.clip(1.2 * (need - len(acc["eq"])) / max(rate, 0.05), 16, 4 * need))
            # two half-batches, one per worker process
            parts = [B // 2, B - B // 2] if ctx.workers > 1 and B >= 32 else [B]
            seeds = [1000 * d + 10 * rounds + j for j in range(len(parts))]
            data = [generate.paper_law(n, T, d, seed=sd, B=b) for sd, b in zip(seeds, parts)]
            heads = []
            for sd, b in zip(seeds, parts):
                V = np.random.default_rng(sd + 7).standard_normal((b, d, d))
                heads.append(V / np.linalg.norm(V, axis=(1, 2), keepdims=True))
            common = dict(param="W", algo="ngd", lr=0.1, steps=s["steps"], init="zero")
            jobs = [dict(ds=ds, head=("relu", V), **common) for ds, V in zip(data, heads)]
            ctx.progress.note(f"d={d} round {rounds}: {B} runs x {s['steps']} steps")
            for ds, r in zip(data, gd_runs(ctx, jobs, f"gd d={d}")):
                draws += ds.batch_size
                sm = np.exp(np.asarray(r.log_softmax))  # (b, n, T)
                window = np.any((sm > LOW) & (sm <= SEL), axis=(1, 2))
                zero = np.any(sm <= LOW, axis=(1, 2))
                rejected["window"] += int(window.sum())
                rejected["no_zero"] += int((~window & ~zero).sum())
                cand = np.flatnonzero(~window & zero)
                if cand.size == 0:
                    continue
                sel = sm[cand] >= SEL  # selected sets O_i as boolean masks (c, n, T)
                alpha = np.asarray(r.selection)[cand]
                W1, ok1 = fro_batch(ctx, subset(ds, cand).with_alpha(alpha), "one-token Att-SVM")
                jobs_g = [((ds[int(b)], sel[j], sm[int(b)]), {}) for j, b in enumerate(cand)]
                gs = call_each(ctx, "attsvm.svm.gensvm:solve_gensvm", jobs_g, f"Gen-SVM d={d}")
                Wsvm, ok_s = stack(gs, (d, d))
                Wfin, ok_f = stack(gs, (d, d), key="W_fin")
                ok = ok_s & ok_f & ok1
                rejected["infeasible"] += int((~ok).sum())
                Wk = np.asarray(r.W)[cand]
                for j in np.flatnonzero(ok):
                    Weq, R = _svmeq(Wk[j], Wfin[j], Wsvm[j])
                    acc["eq"].append(1 - float(corr(Wk[j : j + 1], Weq[None])[0]))
                    acc["svm"].append(1 - float(corr(Wk[j : j + 1], Wsvm[j : j + 1])[0]))
                    acc["one"].append(1 - float(corr(Wk[j : j + 1], W1[j : j + 1])[0]))
                    acc["max_unsel"].append(float(np.max(np.where(sel[j], 0.0, sm[int(cand[j])]))))
                    acc["R"].append(R)
            rate = max(len(acc["eq"]), 1) / max(draws, 1)
        acc = {k: v[:need] for k, v in acc.items()}
        stats = {
            f"{k}_{name}": float(fn(acc[k])) if acc[k] else None
            for k in ("eq", "svm", "one")
            for name, fn in (("mean", np.mean), ("median", np.median))
        }
        rows.append({"d": d, "accepted": len(acc["eq"]), "draws": draws, "rejected": rejected, **stats, **acc})
        ctx.progress.note(f"d={d}: {len(acc['eq'])} accepted of {draws} runs")
    return {"settings": dict(s, init="zero", head="1^T ReLU(V^T u), ||V||_F=1", algo="ngd", lr=0.1), "rows": rows}


def _svmeq(Wk: np.ndarray, Wfin: np.ndarray, Wsvm: np.ndarray) -> tuple[np.ndarray, float]:
    from attsvm.svm.gensvm import svmeq_fit

    W, R = svmeq_fit(Wk, Wfin, Wsvm)
    return np.asarray(W, dtype=float), float(R)


PREDICTIONS = (("eq", r"$W^{SVMeq}$"), ("svm", r"$W^{svm}$"), ("one", r"one-token $W^{mm}_\alpha$"))


def plot(res: dict):
    from matplotlib.lines import Line2D

    from attsvm.figures import PALETTE, TEXT_IN, new_figure

    rows = [r for r in res["rows"] if r["accepted"]]
    fig, ax = new_figure(ncols=2, width=TEXT_IN, height=3.4)
    a = ax[0, 0]
    ds = np.array([r["d"] for r in rows], dtype=float)
    step = 0.12 * (np.min(np.diff(ds)) if len(ds) > 1 else 1.0)
    handles = []
    for k, (key, lbl) in enumerate(PREDICTIONS):
        q = np.array([np.percentile(np.clip(r[key], FLOOR, None), [25, 50, 75]) for r in rows])
        mean = np.array([max(float(np.mean(r[key])), FLOOR) for r in rows])
        x = ds + (k - 1) * step
        mk = "os^"[k]
        a.errorbar(x, q[:, 1], yerr=[q[:, 1] - q[:, 0], q[:, 2] - q[:, 1]], marker=mk, color=PALETTE[k], ls="-")
        a.plot(x, mean, ls="", marker=mk, mfc="none", mec=PALETTE[k], ms=7)
        handles.append(Line2D([], [], color=PALETTE[k], marker=mk, label=lbl))
    handles.append(Line2D([], [], color="0.3", marker="o", ls="", label="filled: median, bar: quartiles"))
    handles.append(Line2D([], [], color="0.3", marker="o", ls="", mfc="none", ms=7, label="open: mean"))
    a.set(
        yscale="log",
        xlabel="dimension $d$",
        ylabel=r"$1-\mathrm{corr}(W_k,\cdot)$",
        title="final iterate vs each prediction",
    )
    a.set_xticks(ds)
    a.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    b = ax[0, 1]
    for k, r in enumerate(rows):
        x = np.clip(np.array(r["max_unsel"], dtype=float), 1e-300, None)
        y = np.clip(np.array(r["eq"], dtype=float), FLOOR, None)
        b.scatter(x, y, s=4, alpha=0.5, color=PALETTE[k], label=f"d = {r['d']}", rasterized=True)
    b.set(
        xscale="log",
        yscale="log",
        xlabel=r"largest unselected $s_{i\tau}$, $\tau\notin\mathcal{O}_i$",
        ylabel=r"$1-\mathrm{corr}(W_k,W^{SVMeq})$",
        title="one point per accepted run",
    )
    b.axhline(FLOOR, color="0.5", ls=":", lw=0.8, zorder=0)
    b.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(rows), markerscale=3)
    acc = sorted({r["accepted"] for r in rows})
    n = str(acc[0]) if len(acc) == 1 else "–".join(str(a) for a in (acc[0], acc[-1]))
    fig.suptitle(f"E4: ReLU head, GD's final iterate against three predictions ({n} accepted runs per $d$)")
    return fig


def caption(res: dict) -> str:
    s = res["settings"]
    rows = res["rows"]
    per_d = "; ".join(
        f"d = {r['d']}: {r['accepted']} accepted of {r['draws']} runs"
        + (
            ", mean (median) 1 − corr "
            + ", ".join(f"{r[f'{k}_mean']:.2g} ({r[f'{k}_median']:.2g})" for k, _ in PREDICTIONS)
            if r["accepted"]
            else ""
        )
        for r in rows
    )
    return (
        rf"Paper-law data with n = {s['n']}, T = {s['T']}, head $\mathbf 1^\top\mathrm{{ReLU}}(V^\top u)$ ($V$ "
        rf"Gaussian, $\|V\|_F=1$), normalised GD with $\eta$ = {s['lr']} from $W_0=0$ for {s['steps']} steps. A run "
        rf"is accepted when its final softmax has no entry in $(10^{{-6}},10^{{-3}}]$ and some entry $\le10^{{-6}}$ "
        rf"and its Gen-SVM and one-token Att-SVM are feasible; {s['seeds']} seeds (accepted runs) per $d$. Selected "
        rf"sets $\mathcal O_i=\{{t:s_{{it}}\ge10^{{-3}}\}}$. Left: $1-\mathrm{{corr}}(W_k,\cdot)$ of the final "
        rf"iterate against $W^{{SVMeq}}=W^{{fin}}+\hat RW^{{svm}}$ (blue circles), the Gen-SVM direction "
        rf"$W^{{svm}}$ (vermillion squares) and the one-token Att-SVM $W^{{mm}}_\alpha$, "
        rf"$\alpha_i=\arg\max_ts_{{it}}$ (green triangles): filled marker = median, bar = quartiles, open marker = "
        rf"mean over the accepted runs (markers shifted sideways to stay apart). Right: one point per accepted "
        rf"run, $1-\mathrm{{corr}}(W_k,W^{{SVMeq}})$ against the largest probability outside the selected sets. "
        rf"Values of $1-\mathrm{{corr}}$ below {FLOOR:g} (the resolution of float64) are drawn at {FLOOR:g}. "
        rf"Order of the numbers: $W^{{SVMeq}}$, $W^{{svm}}$, one-token. {per_d}."
    )


def check(res: dict) -> list[str]:
    fails = []
    for r in res["rows"]:
        if not r["accepted"]:
            fails.append(f"d={r['d']}: no accepted run")
            continue
        eq, one = float(np.mean(r["eq"])), float(np.mean(r["one"]))
        if not eq < one:
            fails.append(f"d={r['d']}: mean 1-corr to W^SVMeq {eq:.3g} not below the one-token {one:.3g}")
    return fails
