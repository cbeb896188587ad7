r"""The hierarchy of SVMs in two-layer attention (issue 30; claims ``hier-top-layer``, ``hier-joint``,
``hier-norm-growth``, ``hier-raw-tokens-control``; :mod:`attsvm.twolayer`, :mod:`attsvm.hierarchy`).

Key-and-successor data (strategy ``twolayer``: $n=4$, $T=4$, $d=6$; the label on the successor of a marked key,
the layer-2 query the marker), residual on. Three trainings by normalised GD ($\eta=0.1$) per seed:

* **frozen W1**: $W_1=3\,\mathcal N(0,I)$ frozen, $W_2$ from 0 — the one-layer model on the tokens $h$;
* **frozen W2**: $W_2=3\,\mathcal N(0,I)$ frozen, $W_1$ from 0;
* **joint**: $(W_1,W_2)$ from 0, the gradient normalised jointly;

and one plain-GD joint run ($\eta=1$) for the norm ratio $\|W_1\|/\|W_2\|$ (``hier-norm-growth``). Recorded over the
steps: both norms, the layer-2 selection, and $1-\mathrm{corr}$ of $W_2$ with the certified Att-SVM of the final
selection $\beta$ over the final soft outputs $h$, over the hard outputs $H^\alpha$ and over the raw tokens, and of
$W_1$ with the layer-1 SVM of the final $\alpha$ over the rows $R_\beta=\{(i,\beta_i)\}$ (all SVMs of the *final*
iterate, so a curve shows the approach to the end point's SVM).
"""

from __future__ import annotations

import numpy as np

TITLE = "Two-layer attention: norms and SVM alignment of each layer, frozen W1 / frozen W2 / joint"
CLAIMS = ("hier-top-layer", "hier-joint", "hier-norm-growth", "hier-raw-tokens-control")
MODES = (("frozen W1", "W1"), ("frozen W2", "W2"), ("joint", None))
SIZES = {
    "full": {"seeds": 8, "n": 4, "T": 4, "d_extra": 0, "steps": 12000, "record": 400, "gd_steps": 5000, "scale": 3.0},
    "smoke": {"seeds": 3, "n": 4, "T": 4, "d_extra": 0, "steps": 1200, "record": 200, "gd_steps": 600, "scale": 3.0},
}
GAPS = ("top_soft", "top_hard", "raw", "layer1")


def _curve(W: np.ndarray, S: np.ndarray | None) -> list[float]:
    from attsvm.model import corr

    if S is None:
        return [float("nan")] * len(W)
    return [1.0 - float(corr(Wk, S)) for Wk in W]


def run(ctx) -> dict:
    from attsvm import gd, hierarchy, strategies, twolayer

    s = ctx.size
    B, steps, every = ctx.seeds, int(s["steps"]), int(s["record"])
    ds = strategies.batch("twolayer", B, seed=0, n=s["n"], T=s["T"], d_extra=s["d_extra"])
    d = ds.d
    rng = np.random.default_rng(1)
    frozen = float(s["scale"]) * rng.standard_normal((2, B, d, d))
    out: dict = {
        "settings": {**s, "algo": "ngd", "lr": 0.1, "residual": True, "data": "strategies.batch('twolayer', seed=0)"},
        "modes": {},
    }
    for label, freeze in MODES:
        ctx.progress.note(f"{label}: {B} runs x {steps} normalised steps")
        init: object = "zero"
        if freeze == "W1":
            init = {"W1": frozen[0], "W2": np.zeros((B, d, d))}
        elif freeze == "W2":
            init = {"W1": np.zeros((B, d, d)), "W2": frozen[1]}
        kw = {"normalize": "joint"} if freeze is None else {"freeze": freeze}
        with ctx.timed(label):
            r = gd.run(ds, param="twolayer", algo="ngd", lr=0.1, steps=steps, init=init, residual=True,
                       record_every=every, record_params=True, **kw)  # fmt: skip
        tr = r.trajectory
        W1s, W2s = np.asarray(tr["W1"]), np.asarray(tr["W2"])
        runs = []
        for b in range(B):
            hi = hierarchy.compare(ds[b], r.W1[b], r.W2[b], residual=True)
            sel = [
                twolayer.selections(twolayer.forward(ds[b], W1s[k, b], W2s[k, b], residual=True))[1].tolist()
                for k in range(len(tr["step"]))
            ]
            fw = twolayer.forward(ds[b], r.W1[b], r.W2[b], residual=True)
            runs.append(
                {
                    "gaps": {g: getattr(hi, f"gap_{g}") for g in GAPS},
                    "curves": {
                        "top_soft": _curve(W2s[:, b], hi.top_soft),
                        "top_hard": _curve(W2s[:, b], hi.top_hard),
                        "raw": _curve(W2s[:, b], hi.raw),
                        "layer1": _curve(W1s[:, b], hi.layer1),
                    },
                    "norm_W1": np.linalg.norm(W1s[:, b], axis=(-2, -1)).tolist(),
                    "norm_W2": np.linalg.norm(W2s[:, b], axis=(-2, -1)).tolist(),
                    "beta": hi.beta.tolist(),
                    "beta_changes": int(sum(sel[k] != sel[k - 1] for k in range(2, len(sel)))),
                    "min_max_s2": float(np.exp(np.min(np.max(fw.log_s2, -1)))),
                    "min_max_s1_beta": float(np.exp(np.min(np.max(fw.log_s1[np.arange(ds.n), hi.beta], -1)))),
                }
            )
        med = {g: float(np.nanmedian(np.array([x["gaps"][g] for x in runs], dtype=float))) for g in GAPS}
        out["modes"][label] = {"step": np.asarray(tr["step"]).tolist(), "runs": runs, "median_gap": med}
    ctx.progress.note(f"plain GD (joint): {B} runs x {s['gd_steps']} steps")
    K = int(s["gd_steps"])
    with ctx.timed("plain gd"):
        r = gd.run(ds, param="twolayer", algo="gd", lr=1.0, steps=K, residual=True, record_every=max(1, K // 50),
                   record_params=True)  # fmt: skip
    tr = r.trajectory
    n1 = np.linalg.norm(np.asarray(tr["W1"]), axis=(-2, -1))
    n2 = np.linalg.norm(np.asarray(tr["W2"]), axis=(-2, -1))
    late = np.asarray(tr["step"]) >= K // 10
    ratio = n1[late] / n2[late]
    first = []  # which layer is closer to saturation at the end: 1 - max s2 (layer 2) vs 1 - max s1 on beta rows
    for b in range(B):
        fw = twolayer.forward(ds[b], r.W1[b], r.W2[b], residual=True)
        beta = twolayer.selections(fw)[1]
        m2 = float(-np.min(np.max(fw.log_s2, -1)))
        m1 = float(-np.min(np.max(fw.log_s1[np.arange(ds.n), beta], -1)))
        first.append("layer 2" if m2 < m1 else "layer 1")
    out["plain_gd"] = {
        "step": np.asarray(tr["step"]).tolist(),
        "norm_W1": n1.tolist(),
        "norm_W2": n2.tolist(),
        "ratio_range": [float(ratio.min()), float(ratio.max())],
        "ratio_end": (n1[-1] / n2[-1]).tolist(),
        "saturated_first": first,
    }
    return out


def plot(res: dict):
    from attsvm.figures import PALETTE, TEXT_IN, new_canvas

    fig = new_canvas(TEXT_IN, 4.8)
    grid = fig.add_gridspec(2, 4)
    styles = {"top_soft": ("-", PALETTE[0]), "top_hard": ("--", PALETTE[5]), "raw": (":", PALETTE[1]),
              "layer1": ("-", PALETTE[2])}  # fmt: skip
    names = {"top_soft": r"$W_2$ vs SVM over $h$", "top_hard": r"$W_2$ vs SVM over $H^\alpha$",
             "raw": r"$W_2$ vs SVM over raw $x$", "layer1": r"$W_1$ vs layer-1 SVM ($R_\beta$)"}  # fmt: skip
    handles = {}
    for j, (label, freeze) in enumerate(MODES):
        m = res["modes"][label]
        st = np.asarray(m["step"], dtype=float)
        ax = fig.add_subplot(grid[0, j])
        for r in m["runs"]:
            ax.plot(st, r["norm_W1"], color=PALETTE[2], lw=0.8, alpha=0.7)
            ax.plot(st, r["norm_W2"], color=PALETTE[0], lw=0.8, alpha=0.7)
        ax.set_title(label, fontsize=9)
        ax.set_ylabel(r"$\|W_1\|_F$ (green), $\|W_2\|_F$ (blue)" if j == 0 else "", fontsize=8)
        ax2 = fig.add_subplot(grid[1, j])
        show = [g for g in ("top_soft", "top_hard", "raw", "layer1") if not (g == "layer1" and freeze == "W1")]
        if freeze == "W2":
            show = ["layer1"]
        for g in show:
            ls, col = styles[g]
            for r in m["runs"]:
                y = np.maximum(np.asarray(r["curves"][g], dtype=float), 1e-9)
                ln = ax2.plot(st[1:], y[1:], ls=ls, color=col, lw=0.8, alpha=0.8)[0]
                handles.setdefault(g, ln)
        ax2.set_yscale("log")
        ax2.set_ylim(1e-7, 2)
        ax2.set_xlabel("normalised GD step", fontsize=8)
        if j == 0:
            ax2.set_ylabel(r"$1-\mathrm{corr}$ with the final SVM", fontsize=8)
    p = res["plain_gd"]
    ax = fig.add_subplot(grid[0, 3])
    st = np.asarray(p["step"], dtype=float)
    ax.plot(st[1:], np.asarray(p["norm_W1"])[1:] / np.asarray(p["norm_W2"])[1:], color=PALETTE[6], lw=0.8, alpha=0.7)
    ax.axhline(1, color="0.5", lw=0.6, ls="--")
    ax.set_yscale("log")
    ax.set_ylim(0.25, 4)
    ax.set_yticks([0.25, 0.5, 1, 2, 4], ["1/4", "1/2", "1", "2", "4"])
    ax.minorticks_off()
    ax.set_title(r"plain GD: $\|W_1\|/\|W_2\|$", fontsize=9)
    ax.set_xlabel("GD step", fontsize=8)
    ax = fig.add_subplot(grid[1, 3])
    for i, g in enumerate(("top_soft", "top_hard", "raw", "layer1")):
        for j, (label, _f) in enumerate(MODES):
            vals = np.array([r["gaps"][g] for r in res["modes"][label]["runs"]], dtype=float)  # None: NaN
            ax.scatter(np.full(len(vals), i + 0.2 * (j - 1)), np.maximum(vals, 1e-9), s=8,
                       color=PALETTE[j + 3], label=label if i == 0 else None)  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylim(1e-10, 3.0)  # room for the legend below the smallest gap
    ax.set_xticks(range(4), ["h", r"$H^\alpha$", "raw", "L1"], fontsize=8)
    ax.set_title("final gaps", fontsize=9)
    ax.legend(fontsize=8, loc="lower right", handletextpad=0.1, borderpad=0.3, labelspacing=0.3)
    fig.legend([handles[g] for g in handles], [names[g] for g in handles], loc="outside lower center", ncols=4,
               fontsize=8)  # fmt: skip
    return fig


def caption(res: dict) -> str:
    s = res["settings"]
    parts = []
    for label, _f in MODES:
        m = res["modes"][label]
        g = m["median_gap"]
        ch = sum(r["beta_changes"] > 0 for r in m["runs"])
        trained = "norm_W1" if _f == "W2" else "norm_W2"
        cap = 0.1 * 0.1 * s["steps"]  # a tenth of the distance normalised GD can travel
        bounded = sum(r[trained][-1] < cap for r in m["runs"])
        parts.append(
            f"{label}: median final 1 - corr of $W_2$ with the Att-SVM of $\\beta$ over $h$ {g['top_soft']:.1e}, over "
            f"$H^\\alpha$ {g['top_hard']:.1e}, over the raw tokens {g['raw']:.1e}; of $W_1$ with the layer-1 SVM over "
            f"$R_\\beta$ {g['layer1']:.1e}; layer-2 selection changed after the first record in {ch} runs; the trained "
            f"factor{'s' if _f is None else ''} stayed below a tenth of the distance the steps can travel "
            f"({cap:g}) in {bounded} runs"
        )
    p = res["plain_gd"]
    lo, hi = p["ratio_range"]
    first = p["saturated_first"]
    return (
        f"Key-and-successor data (n = {s['n']}, T = {s['T']}, d = {2 + s['T'] + s['d_extra']}), {s['seeds']} seeds, "
        f"residual on, normalised GD ($\\eta$ = 0.1, {s['steps']} steps) with $W_1$ frozen at {s['scale']} N(0, I), "
        f"with $W_2$ frozen at {s['scale']} N(0, I), and jointly (gradient normalised jointly). Top: both norms. "
        "Bottom: 1 - corr of each trained layer with the certified SVMs of the final iterate (log scale). "
        + ". ".join(parts)
        + f". Right: plain GD ($\\eta$ = 1, {s['gd_steps']} steps) from 0: $\\|W_1\\|/\\|W_2\\|$ stays in "
        f"[{lo:.2f}, {hi:.2f}] from step {s['gd_steps'] // 10} on; at the end layer 2 is the more saturated in "
        f"{first.count('layer 2')}/{len(first)} runs. Bottom right: the final gaps per run."
    )


def check(res: dict) -> list[str]:
    """The experiment's own sanity: frozen W1 reaches its top-layer SVM (median gap below 1e-2, below the raw-token
    gap); jointly, W2 is near the SVM over the soft outputs (median below 1e-2); the plain-GD ratio stays in
    [1/2, 2]."""
    fails = []
    g = res["modes"]["frozen W1"]["median_gap"]
    if not g["top_soft"] < 1e-2:
        fails.append(f"frozen W1: median gap to the top-layer SVM {g['top_soft']:.2e} not below 1e-2")
    if not g["top_soft"] < g["raw"]:
        fails.append("frozen W1: W2 is not closer to the top-layer SVM than to the raw-token SVM")
    j = res["modes"]["joint"]["median_gap"]
    if not j["top_soft"] < 1e-2:
        fails.append(f"joint: median gap to the soft top-layer SVM {j['top_soft']:.2e} not below 1e-2")
    lo, hi = res["plain_gd"]["ratio_range"]
    if not (0.5 <= lo and hi <= 2.0):
        fails.append(f"plain GD: norm ratio range [{lo:.2f}, {hi:.2f}] leaves [1/2, 2]")
    return fails
