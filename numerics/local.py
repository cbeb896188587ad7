r"""E3 — local convergence of normalised GD (THEORY §4, claims ``gd-selects-locally-optimal``, ``kq-gd-nuclear``).

Paper law, $n=6$, $T=8$, $d=10$, 100 seeds, random initialisation, normalised GD $\eta=0.1$ for 2000
steps on $W$ and on $(K,Q)$ ($m=d$). With $\alpha_i=\arg\max_t s_{it}$ the selection GD ends on, track
the mean of $\max_t s_{it}$ and $\mathrm{corr}(W_k,W^{mm}_\alpha)$ (for $W$) or
$\mathrm{corr}(K_kQ_k^\top,W^{mm}_{\star,\alpha})$ (for $(K,Q)$) over the iterations.
"""

from __future__ import annotations

import numpy as np

TITLE = "E3: GD on W and (K,Q) converges to the Att-SVM / Att-SVM* direction of its own selection"
CLAIMS = ("gd-selects-locally-optimal", "kq-gd-nuclear")
SIZES = {
    "full": {"n": 6, "T": 8, "d": 10, "seeds": 100, "steps": 2000, "record_every": 20},
    "smoke": {"n": 6, "T": 8, "d": 10, "seeds": 12, "steps": 1500, "record_every": 50},
}


def run(ctx) -> dict:
    from attsvm import generate, svm
    from attsvm.experiments import band_stats, call_each, corr_trajectory, gd_runs, stack, summary
    from attsvm.tolerances import tol

    s = ctx.size
    n, T, d, B = s["n"], s["T"], s["d"], ctx.seeds
    ds = generate.paper_law(n, T, d, seed=0, B=B)
    out: dict = {"settings": dict(s, init="random", algo="ngd", lr=0.1, loss="logistic", data="paper_law seed 0")}
    ctx.progress.note(f"normalised GD on W and (K,Q): {B} runs x {s['steps']} steps each")
    common = dict(algo="ngd", lr=0.1, steps=s["steps"], m=d, init="random", seed=1)
    common.update(record_every=s["record_every"], record_params=True)
    runs = gd_runs(ctx, [dict(ds=ds, param=p, **common) for p in ("W", "KQ")], "gd")
    for param, r in zip(("W", "KQ"), runs):
        alpha = np.asarray(r.selection)
        dsa = ds.with_alpha(alpha)
        if param == "W":
            with ctx.timed("svm fro"):
                fb = svm.solve_fro_batch(dsa)
            target, ok = np.where(np.asarray(fb.feasible)[:, None, None], fb.W, np.nan), np.asarray(fb.feasible)
        else:
            res = call_each(ctx, "attsvm.svm:solve", [((dsa[b],), {"norm": "nuc"}) for b in range(B)], "svm nuclear")
            target, ok = stack(res, (d, d))
        loc = call_each(
            ctx, "attsvm.svm:is_locally_optimal", [((ds[b], alpha[b]), {}) for b in range(B)], "local optimality"
        )
        traj = r.trajectory
        steps = np.asarray(traj["step"])
        corr = corr_trajectory(traj["W"], target)  # (R, B)
        maxs = np.asarray(traj["max_softmax"]).mean(axis=-1)  # (R, B): mean over inputs of max_t s_it
        Wf = np.asarray(r.W)
        sv = np.linalg.svd(Wf, compute_uv=False)
        rank_final = np.sum(sv > tol("rank") * sv[:, :1], axis=1)
        with np.errstate(invalid="ignore"):
            svt = np.linalg.svd(np.nan_to_num(target), compute_uv=False)
            rank_target = np.where(ok, np.sum(svt > tol("rank") * svt[:, :1], axis=1), -1)
        out[param] = {
            "final_corr_mean": summary(corr[-1])["mean"],
            "final_corr_std": summary(corr[-1])["std"],
            "final_corr_min": summary(corr[-1])["min"],
            "final_max_softmax_mean": float(maxs[-1].mean()),
            "final_max_softmax_std": float(maxs[-1].std()),
            "frac_locally_optimal": float(np.mean([bool(x) for x in loc])),
            "frac_global": float(np.mean(np.all(alpha == np.asarray(ds.opt), axis=-1))),
            "svm_feasible": int(ok.sum()),
            "runs": B,
            "final_norm_mean": float(np.mean(np.asarray(r.norm))),
            "final_rank_mean": float(rank_final.mean()),
            "svm_rank_mean": float(rank_target[ok].mean()) if ok.any() else None,
            "stop_reasons": sorted({str(x) for x in np.atleast_1d(r.stop_reason)}),
            "curves": {
                "step": steps,
                "corr": band_stats(corr),
                "one_minus_corr": band_stats(1.0 - corr, log=True),
                "max_softmax": band_stats(maxs),
            },
        }
    return out


def plot(res: dict):
    from attsvm.experiments import band, new_figure

    fig, ax = new_figure(ncols=2)
    lab = {"W": r"$W$ vs $W^{mm}_\alpha$", "KQ": r"$KQ^\top$ vs $W^{mm}_{\star,\alpha}$"}
    for p, c in (("W", "C0"), ("KQ", "C3")):
        cur = res[p]["curves"]
        band(ax[0, 0], cur["step"], cur["max_softmax"], label=p, color=c)
        band(ax[0, 1], cur["step"], cur["one_minus_corr"], label=lab[p], color=c, logy=True)
    ax[0, 0].set(xlabel="iteration", ylabel=r"mean $\max_t s_{it}$", title="softmax saturation")
    ax[0, 1].set(xlabel="iteration", ylabel=r"$1-\mathrm{corr}$", title="distance to the SVM direction")
    for a in ax[0]:
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    fig.suptitle(f"E3 local convergence (n=6, T=8, d=10, {res['W']['runs']} seeds)", fontsize=10)
    return fig


def check(res: dict) -> list[str]:
    fails = []
    if not (res["W"]["final_corr_mean"] or 0) >= 0.99:
        fails.append(f"W: mean final corr with W^mm_alpha {res['W']['final_corr_mean']} < 0.99")
    if not (res["W"]["final_max_softmax_mean"] or 0) >= 0.9:
        fails.append(f"W: mean final max softmax {res['W']['final_max_softmax_mean']} < 0.9")
    if not (res["KQ"]["final_corr_mean"] or 0) >= 0.9:
        fails.append(f"KQ: mean final corr with W^mm_*alpha {res['KQ']['final_corr_mean']} < 0.9")
    if not res["W"]["frac_locally_optimal"] >= 0.9:
        fails.append(f"W: only {res['W']['frac_locally_optimal']:.2f} of the final selections are locally optimal")
    return fails
