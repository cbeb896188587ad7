r"""Sequence and causal attention (claim ``seq-causal-gd``): the GD direction is the sequence / causal SVM.

Sequence data: $n=2$ inputs, $T=5$ tokens, $K=3$ queries each with a label, $d=8$; causal self-attention:
$n=2$, $T=5$, $d=8$, query $k$ sees tokens $t\le k$, a label per query. Normalised GD $\eta=0.1$ on $W$ from
$W_0=0$, 2000 steps, 100 seeds; with $\alpha_{ik}=\arg\max_ts_{ikt}$ at the end, track
$\mathrm{corr}(W_k,W^{seq}_\alpha)$ (resp. $W^{causal}_\alpha$). The first causal query sees one token
and has no constraint.
"""

from __future__ import annotations

import numpy as np

TITLE = (
    "Sequence / causal attention: along normalised GD on W, 1-corr to the sequence / causal SVM of the final "
    "selection falls"
)
CLAIMS = ("seq-causal-gd",)
SIZES = {
    "full": {"n": 2, "T": 5, "K": 3, "d": 8, "seeds": 100, "steps": 2000, "record_every": 20},
    "smoke": {"n": 2, "T": 5, "K": 3, "d": 8, "seeds": 10, "steps": 1000, "record_every": 50},
}


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import call_each, corr_trajectory, gd_runs, stack, summary
    from attsvm.figures import band_stats

    s = ctx.size
    n, T, K, d, B = s["n"], s["T"], s["K"], s["d"], ctx.seeds
    data = {
        "sequence": generate.sequence(n, T, d, K, seed=3, B=B),
        "causal": generate.causal(n, T, d, seed=4, B=B),
    }
    kw = dict(param="W", algo="ngd", lr=0.1, steps=s["steps"], init="zero")
    kw.update(record_every=s["record_every"], record_params=True)
    ctx.progress.note(f"normalised GD on W: sequence and causal, {B} runs x {s['steps']} steps")
    runs = gd_runs(ctx, [dict(ds=ds, **kw) for ds in data.values()], "gd")
    out: dict = {"settings": dict(s, init="zero", algo="ngd", lr=0.1), "runs": B}
    for (name, ds), r in zip(data.items(), runs):
        alpha = np.asarray(r.selection).reshape(np.asarray(ds.selection).shape)
        dsa = ds.with_alpha(alpha)
        prog = {"sequence": "seq", "causal": "causal"}[name]
        sol = call_each(ctx, "attsvm.svm:solve", [((dsa[b],), {"program": prog}) for b in range(B)], f"{name} SVM")
        Ws, ok = stack(sol, (d, d))
        c = corr_trajectory(r.trajectory["W"], Ws)
        out[name] = {
            "feasible": int(ok.sum()),
            "final_corr": summary(c[-1]),
            "final_max_softmax_mean": float(np.mean(r.max_softmax)),
            "frac_opt": float(np.mean(np.all(alpha == np.asarray(ds.opt), axis=(-1, -2)))),
            "curves": {"step": r.trajectory["step"], "one_minus_corr": band_stats(1 - c, log=True)},
        }
    return out


def plot(res: dict):
    from attsvm.figures import COLUMN_IN, PALETTE, band, band_key, new_figure

    fig, ax = new_figure(width=COLUMN_IN, height=3.4)
    a = ax[0, 0]
    for k, name in enumerate(("sequence", "causal")):
        cur = res[name]["curves"]
        band(a, cur["step"], cur["one_minus_corr"], label=f"{name} SVM", color=PALETTE[k], logy=True)
    a.set(xlabel="iteration $k$", ylabel=r"$1-\mathrm{corr}(W_k,W^{svm}_\alpha)$")
    handles, labels = a.get_legend_handles_labels()
    h, lbl = band_key(res["sequence"]["curves"]["one_minus_corr"])
    a.legend(
        [*handles, h], [*labels, lbl.replace(", shade", ",\nshade")], loc="upper center", bbox_to_anchor=(0.5, -0.2)
    )
    s = res["settings"]
    a.set_title(f"Sequence / causal attention\n({res['runs']} seeds, {s['steps']} steps)")
    return fig


def caption(res: dict) -> str:
    s = res["settings"]
    q, c = res["sequence"], res["causal"]
    return (
        rf"Normalised GD on $W$ ($\eta$ = {s['lr']}, from $W_0=0$, {s['steps']} steps, {res['runs']} seeds, recorded "
        rf"every {s['record_every']} steps). Sequence data (blue): n = {s['n']} inputs of T = {s['T']} tokens with "
        rf"K = {s['K']} labelled queries each, d = {s['d']}; causal self-attention (vermillion): n = {s['n']}, "
        rf"T = {s['T']}, d = {s['d']}, query $k$ sees the tokens $t\le k$. With $\alpha_{{ik}}=\arg\max_ts_{{ikt}}$ "
        rf"at the last step: $1-\mathrm{{corr}}(W_k,W^{{svm}}_\alpha)$ against the sequence / causal SVM of $\alpha$ "
        rf"(feasible in {q['feasible']} / {c['feasible']} runs). Lines: geometric mean over the seeds with a "
        rf"feasible SVM; shades: ×/÷ one geometric s.d. (± 1 s.d. of $\log_{{10}}$). Mean final corr "
        rf"{q['final_corr']['mean']:.4f} (sequence) and {c['final_corr']['mean']:.4f} (causal); final selection = "
        rf"opt in {q['frac_opt']:.0%} / {c['frac_opt']:.0%} of the runs."
    )


def check(res: dict) -> list[str]:
    from attsvm.figures import band_falls

    fails = []
    for name in ("sequence", "causal"):
        m = res[name]["final_corr"]["mean"] or 0
        if m < 0.99:
            fails.append(f"{name}: mean final corr with the SVM of the selection {m:.4f} < 0.99")
        if not band_falls(res[name]["curves"]["one_minus_corr"]):
            fails.append(f"{name}: 1-corr does not fall over the run")
    return fails
