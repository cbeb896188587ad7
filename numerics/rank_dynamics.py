r"""Stagewise rank from small initialisation (THEORY §6, claims ``kq-diag-incremental``, ``kq-incremental-rank``).

Boix-Adsera et al. (arXiv 2306.07042) prove for diagonal attention weights under gradient flow from a start of scale
$\alpha\to0$ that the learned perturbation gains one active coordinate per stage, each stage lasting
$\Theta(\log(1/\alpha))$. Here: paper-law data ($n=3$, $T=4$, $d=4$), plain GD ($\eta=1$) from $\alpha$ times one
seeded standard normal draw per run (the same direction at every $\alpha$), $\alpha\in\{10^{-2},10^{-4},10^{-6}\}$, on
diagonal $(k,q)$ — magnitudes $|k_jq_j-k_{0j}q_{0j}|$ — and on full $(K,Q)$ — the singular values of
$KQ^\top-K_0Q_0^\top$ —, recorded about 500 times on a grid refined at the start
(:func:`attsvm.staircase.record_plan`). Stages come from :func:`attsvm.staircase.detect` (active at 2% of the largest
magnitude of the run; one stage = onsets within 10% of the elapsed steps) and each run is judged by the claims' rule
(:func:`attsvm.staircase.incremental_rule`). The first stage has a derived slope: $1/\log(1+\eta\,g)$ steps per unit
of $\log(1/\alpha)$, $g=\max_j|(G_0)_{jj}|$ (diagonal) or $\sigma_1(G_0)$ (full), $G_0=\nabla\mathcal L(0)$.
"""

from __future__ import annotations

import numpy as np

TITLE = "Stagewise rank: component magnitudes from small init, their onsets against log(1/alpha)"
CLAIMS = ("kq-diag-incremental", "kq-incremental-rank")
ALPHAS = (1e-2, 1e-4, 1e-6)
LEVEL = 0.02  #: a component is active at this fraction of the run's largest magnitude (the claims' ``rel``)
PARAMS = (
    ("diag", r"diagonal $(k,q)$: $|k_jq_j-k_{0j}q_{0j}|$"),
    ("KQ", r"full $(K,Q)$: $\sigma_j(KQ^\top-K_0Q_0^\top)$"),
)
SIZES = {
    "full": {"n": 3, "T": 4, "d": 4, "seeds": 12, "steps": 20000, "lr": 1.0},
    "smoke": {"n": 3, "T": 4, "d": 4, "seeds": 3, "steps": 3000, "lr": 1.0},
}


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.data import subset
    from attsvm.model import grad_W
    from attsvm.staircase import affine_fit, detect, incremental_rule, magnitudes, recorded_run, small_start

    s = ctx.size
    B, A, lr, steps = ctx.seeds, len(ALPHAS), float(s["lr"]), int(s["steps"])
    ds = generate.paper_law(s["n"], s["T"], s["d"], seed=0, B=B)
    big = subset(ds, np.tile(np.arange(B), A))
    G0 = [grad_W(ds[b], np.zeros((ds.d, ds.d))) for b in range(B)]
    x = np.log(1.0 / np.array(ALPHAS))
    out: dict = {
        "settings": dict(s, alphas=list(ALPHAS), init="alpha * N (both factors)", data="paper_law seed 0", algo="gd"),
        "runs": B,
        "params": {},
    }
    for param, _label in PARAMS:
        ctx.progress.note(f"{param}: {B} runs x {A} scales x {steps} GD steps")
        inits = [small_start(param, B, ds.d, 1, a) for a in ALPHAS]
        init = {k: np.concatenate([i[k] for i in inits]) for k in inits[0]}
        at, rec = recorded_run(big, param, init, lr, steps)
        mags = magnitudes(param, rec, init)  # (R, A*B, r)
        runs = []
        for b in range(B):
            per = [mags[:, a * B + b] for a in range(A)]
            judged = incremental_rule(per, at, ALPHAS, rel=LEVEL)
            found = [detect(m, at, rel=LEVEL) for m in per]
            first, which = [], []
            for m in per:
                sc = detect(m, at, rel=LEVEL)
                first.append(float(sc.onsets[sc.order[0]]) if sc.stages else np.nan)
                which.append(int(sc.order[0]) if sc.stages else -1)
            g = float(np.abs(np.diagonal(G0[b])).max()) if param == "diag" else float(np.linalg.norm(G0[b], 2))
            slope = affine_fit(x, np.array(first)).slope if np.all(np.isfinite(first)) else np.nan
            runs.append(
                {
                    "ok": judged["ok"], "why": judged["why"], "first_onsets": first, "first_slope": slope,
                    "first_component": which, "same_first": len(set(which)) == 1 and which[0] >= 0,
                    "predicted_slope": 1.0 / np.log1p(lr * g), "onsets": [f.onsets.tolist() for f in found],
                    "stages": [f.stages for f in found],
                }
            )  # fmt: skip
        shown = next((b for b, r in enumerate(runs) if r["ok"] and min(r["stages"]) >= 2), 0)
        if all(min(r["stages"]) < 2 for r in runs):
            shown = max(range(B), key=lambda b: max(runs[b]["stages"]))
        ratio = [r["first_slope"] / r["predicted_slope"] for r in runs if r["same_first"]]
        out["params"][param] = {
            "runs": runs,
            "shown": shown,
            "curves": {
                "step": at.tolist(),
                "magnitudes": [mags[:, a * B + shown].tolist() for a in range(A)],
                "onsets": [detect(mags[:, a * B + shown], at, rel=LEVEL).onsets.tolist() for a in range(A)],
            },
            "passes": sum(r["ok"] is True for r in runs),
            "decided": sum(r["ok"] is not None for r in runs),
            "first_slope_ratio_median": float(np.median(ratio)) if ratio else None,
            "first_slope_within_5pct": int(sum(abs(v - 1) <= 0.05 for v in ratio)),
            "reached_two": int(sum(max(r["stages"]) >= 2 for r in runs)),
            "same_first": int(sum(r["same_first"] for r in runs)),
        }
    return out


def plot(res: dict):
    from attsvm.figures import PALETTE, TEXT_IN, new_canvas

    fig = new_canvas(TEXT_IN, 5.2)
    grid = fig.add_gridspec(2, 4, width_ratios=[1, 1, 1, 1.25])
    handles = {}
    for i, (param, _label) in enumerate(PARAMS):
        p = res["params"][param]
        cur = p["curves"]
        st = np.asarray(cur["step"], dtype=float)
        share = None
        for a, alpha in enumerate(ALPHAS):
            ax = fig.add_subplot(grid[i, a], sharey=share)
            share = share or ax
            m = np.asarray(cur["magnitudes"][a])
            top = float(m.max()) if m.size else 1.0
            for j in range(m.shape[1]):
                keep = st > 0
                ax.plot(st[keep], np.maximum(m[keep, j], 1e-14), color=PALETTE[j % len(PALETTE)], lw=1.2)
                t = cur["onsets"][a][j]
                if t > 0:
                    ax.axvline(t, color=PALETTE[j % len(PALETTE)], ls=":", lw=1.0)
                    ax.plot([t], [LEVEL * top], marker="o", ms=4, color=PALETTE[j % len(PALETTE)])
            ax.axhline(LEVEL * top, color="0.5", lw=0.6, ls="--")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_ylim(1e-13, 10 * top)
            ax.set_title(rf"$\alpha=10^{{{int(round(np.log10(alpha)))}}}$", fontsize=9)
            if a == 0:
                ax.set_ylabel("diagonal: $|k_jq_j|$" if param == "diag" else r"full: $\sigma_j(KQ^\top-K_0Q_0^\top)$")
            else:
                ax.tick_params(labelleft=False)
            if i == 1:
                ax.set_xlabel("GD step")
        ax = fig.add_subplot(grid[i, 3])
        x = np.log(1.0 / np.array(ALPHAS))
        for r in p["runs"]:
            per_alpha = [sorted(t for t in r["onsets"][a] if t > 0) for a in range(len(ALPHAS))]
            for k, col in ((0, PALETTE[6]), (1, PALETTE[4])):
                ys = [v[k] if len(v) > k else np.nan for v in per_alpha]
                ln = ax.plot(x, ys, marker="o", ms=3, lw=0.8, color=col, alpha=0.8)[0]
                handles.setdefault(k, ln)
        ax.set_ylim(bottom=0)
        ax.set_xticks(x, ["4.6", "9.2", "13.8"])
        ax.set_ylabel("onset step")
        ax.set_title(f"onsets, {res['runs']} runs", fontsize=9)
        if i == 1:
            ax.set_xlabel(r"$\log(1/\alpha)$")
    fig.legend(
        [handles[0], handles[1]], ["first onset", "second onset"], loc="outside lower center", ncols=2, fontsize=8
    )
    fig.suptitle(
        "Component magnitudes of one run from init scale $\\alpha$ (dotted: detected onsets, at the dashed 2% level)"
        "\nright: onsets of the first two stages of every run against $\\log(1/\\alpha)$",
        fontsize=9,
    )
    return fig


def caption(res: dict) -> str:
    s = res["settings"]
    parts = []
    for param, label in PARAMS:
        p = res["params"][param]
        med = p["first_slope_ratio_median"]
        parts.append(
            f"{label}: run {p['shown']} shown; {p['reached_two']}/{res['runs']} runs reach a second stage at some "
            f"$\\alpha$, {p['passes']}/{p['decided']} decided runs pass the claims' rule (one at a time at every "
            f"$\\alpha$, same order, onsets affine in $\\log(1/\\alpha)$); {p['same_first']} runs switch on the same "
            f"component first at every $\\alpha$, and their first-onset slope over the derived $1/\\log(1+\\eta g)$ "
            f"has median {med:.3f}, {p['first_slope_within_5pct']} of them within 5%"
        )
    return (
        f"Paper-law data (n = {s['n']}, T = {s['T']}, d = {s['d']}), {res['runs']} seeds, plain GD with "
        f"$\\eta$ = {s['lr']} for {s['steps']} steps from $\\alpha$ times one standard normal draw of both factors, "
        "$\\alpha\\in\\{10^{-2},10^{-4},10^{-6}\\}$ (the same draw at every $\\alpha$). Left three columns: the "
        "component magnitudes of one run against the step (log-log), with the detected onsets (dotted, at the "
        "dashed level: 2% of the run's largest magnitude). Right: the onset steps of the first (black) and second "
        "(pink) stage of every run against $\\log(1/\\alpha)$ (a line per run; a straight line is a stage "
        "length linear in $\\log(1/\\alpha)$). " + ". ".join(parts) + "."
    )


def check(res: dict) -> list[str]:
    """Over the runs whose first component is the same at every alpha: the first-onset slope follows the derived one
    (median ratio within 10%), and in most of them (more than half) the first onset grows with log(1/alpha) (it need
    not in every run: the level is 2% of the largest magnitude of the whole run, which later stages can raise)."""
    fails = []
    for param, _label in PARAMS:
        p = res["params"][param]
        med = p["first_slope_ratio_median"]
        if med is None or not abs(med - 1) <= 0.1:
            fails.append(f"{param}: median first-stage slope ratio {med} not within 10% of the derived slope")
        same = [r for r in p["runs"] if r["same_first"]]
        grows = sum(r["first_onsets"][0] < r["first_onsets"][1] < r["first_onsets"][2] for r in same)
        if not 2 * grows > len(same):
            fails.append(f"{param}: the first onset grows with log(1/alpha) in only {grows}/{len(same)} runs")
    return fails
