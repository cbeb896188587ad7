r"""Benign overfitting in single-head attention (Magen et al., arXiv 2410.07746; claims ``mm-vp-benign``,
``mm-vp-harmful``, ``mm-vp-benign-many-tokens``): test error against $\kappa=\mathrm{SNR}\sqrt n$.

Data (:mod:`attsvm.benign`): one signal token ($\rho e_0$ / $\rho e_1$ by the clean label) and $T-1$ Gaussian noise
tokens orthogonal to it, labels flipped with probability $\eta$, $\rho=\kappa\sqrt{d/n}$. For each $\kappa$ of a
log grid and each seed: (a) the max-margin $(v,p)$ interpolator (:func:`attsvm.benign.max_margin`, exact over all
$2^n$ selections, $T=2$) at two sizes with the same $d/n^2$, to show that the threshold is a threshold in
$\kappa$; (b) at the first size, joint GD on $(v,p)$ (``attsvm.gd.run``, ``param="vp"``) for $T=2$ and $T=3$:
*two steps* from zero with per-factor step sizes $\beta_v=1/(\rho^2+d/n)$ (both steps) and $\beta_p=$ ``beta_p``
$\cdot\beta_v$ (the second step; the first leaves $p=0$) — reconstructed, the paper's step sizes were not read —
and *long-run* per-factor normalised GD ($\eta=$ ``lr``, ``steps`` steps) from $0.1\,\mathcal N$. The error is
against the noisy label, $\eta+(1-2\eta)e$: saturated-prompt quadrature for the interpolator, Monte Carlo of the
softmax for GD (:func:`attsvm.benign.test_error`). Marked: $\eta$ (optimal), $\frac12$, the cost-balance prediction
$\kappa^\star=\sqrt{2/(1-\eta)}$ (where the signal cost $2/\rho^2$ of the benign selection equals the memorisation
cost $(1-\eta)n/d$ of the clean inputs; derived here, the paper states the threshold as $\Theta(1/\sqrt n)$ without
a constant that was read) and the measured crossing of $(\eta+\frac12)/2$.
"""

from __future__ import annotations

import numpy as np

TITLE = "Benign overfitting in single-head attention: test error vs SNR sqrt(n), max-margin interpolator and GD"
CLAIMS = ("mm-vp-benign", "mm-vp-harmful", "mm-vp-benign-many-tokens")
KAPPAS_FULL = [0.25, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0, 4.0, 6.0]
KAPPAS_SMOKE = [0.3, 1.0, 1.5, 2.5, 5.0]
SIZES = {
    "full": {
        "n": 16, "d": 400, "n_big": 24, "d_big": 900, "eta": 0.1, "kappas": KAPPAS_FULL, "seeds": 24,
        "steps": 2000, "lr": 0.1, "beta_p": 1000.0, "samples": 20000,
    },
    "smoke": {
        "n": 8, "d": 100, "n_big": 12, "d_big": 225, "eta": 0.1, "kappas": KAPPAS_SMOKE, "seeds": 4,
        "steps": 300, "lr": 0.1, "beta_p": 1000.0, "samples": 4000,
    },
}  # fmt: skip


def _interp(res_row: list, kappas: list, level: float) -> float | None:
    """The first kappa (linear in log kappa) where the mean error falls below ``level``."""
    y = np.asarray(res_row, dtype=float)
    x = np.log(np.asarray(kappas, dtype=float))
    for i in range(1, len(y)):
        if y[i - 1] > level >= y[i]:
            t = (y[i - 1] - level) / (y[i - 1] - y[i])
            return float(np.exp(x[i - 1] + t * (x[i] - x[i - 1])))
    return None


def _stats(vals: list) -> dict:
    a = np.asarray(vals, dtype=float)
    a = a[np.isfinite(a)]
    if not a.size:
        return {"mean": None, "sd": None, "count": 0}
    return {"mean": float(a.mean()), "sd": float(a.std()), "count": int(a.size)}


def run(ctx) -> dict:
    from attsvm import benign
    from attsvm.experiments import call_each, gd_runs

    s = ctx.size
    B, eta, kappas = ctx.seeds, float(s["eta"]), [float(k) for k in s["kappas"]]
    out: dict = {
        "settings": dict(s, data="attsvm.benign.sample, seed 1000 k + B-batch", init_long="random 0.1 N"),
        "runs": B,
        "kappa_star_predicted": float(np.sqrt(2.0 / (1.0 - eta))),
        "mm": {},
        "gd": {},
    }
    # (a) the max-margin interpolator, T = 2, two sizes
    for tag, n, d in (("small", s["n"], s["d"]), ("big", s["n_big"], s["d_big"])):
        jobs = []
        for k, kap in enumerate(kappas):
            ds = benign.sample(n, d, benign.rho_of(kap, n, d), eta, T=2, seed=1000 * k + n, B=B)
            jobs += [((ds[b], eta), {}) for b in range(B)]
        ctx.progress.note(f"max-margin interpolator n={n}, d={d}: {len(jobs)} data sets x 9 head SVMs")
        got = call_each(ctx, "attsvm.benign:evaluate", jobs, f"max-margin n={n}")
        rows = []
        for k, kap in enumerate(kappas):
            part = [g for g in got[k * B : (k + 1) * B] if isinstance(g, dict) and "noisy_error" in g]
            fits = [min(g["fit_margin"], g["prompt_margin"]) for g in part]
            signs: dict = {}
            for g in part:
                signs[g["signs"]] = signs.get(g["signs"], 0) + 1
            rows.append(
                {
                    "kappa": kap,
                    "error": _stats([g["noisy_error"] for g in part]),
                    "certified": int(sum(g["certified"] for g in part)),
                    "min_fit_margin": float(min(fits)) if fits else None,
                    "signs": signs,
                }
            )
        means = [r["error"]["mean"] for r in rows]
        out["mm"][tag] = {
            "n": n,
            "d": d,
            "rows": rows,
            "kappa_measured": _interp(means, kappas, (eta + 0.5) / 2),
        }
    # (b) GD at the first size, T = 2 and 3: two steps (per-factor step sizes) and long-run normalised GD
    n, d = s["n"], s["d"]
    for T in (2, 3):
        data = [benign.sample(n, d, benign.rho_of(k, n, d), eta, T=T, seed=7 + 1000 * i, B=B) for i, k in
                enumerate(kappas)]  # fmt: skip
        bv = [1.0 / (benign.rho_of(k, n, d) ** 2 + d / n) for k in kappas]
        ctx.progress.note(f"GD T={T}: two steps and {s['steps']} normalised steps, {len(kappas)} x {B} runs")
        first = gd_runs(ctx, [dict(ds=ds, param="vp", algo="gd", lr=b, steps=1, init="zero") for ds, b in
                              zip(data, bv)], f"GD step 1 T={T}")  # fmt: skip
        inits = [{"v": np.asarray(r.v), "p": np.asarray(r.p)} for r in first]
        jobs = [dict(ds=ds, param="vp", algo="gd", lr=b, steps=1, init=i) for ds, b, i in zip(data, bv, inits)]
        jobs += [
            dict(ds=ds, param="vp", algo="gd", lr=float(s["beta_p"]) * b, steps=1, init=i)
            for ds, b, i in zip(data, bv, inits)
        ]
        jobs += [
            dict(ds=ds, param="vp", algo="ngd", lr=float(s["lr"]), steps=int(s["steps"]), init="random", seed=1)
            for ds in data
        ]
        got = gd_runs(ctx, jobs, f"GD T={T}")
        K = len(kappas)
        ends = {
            "two_steps": [(got[k].v, got[K + k].p) for k in range(K)],  # v of the beta_v step, p of the beta_p step
            "long": [(got[2 * K + k].v, got[2 * K + k].p) for k in range(K)],
        }
        for name, vp in ends.items():
            rows = []
            for k, kap in enumerate(kappas):
                fe = [
                    benign.fit_and_error(data[k][b], vp[k][0][b], vp[k][1][b], eta, samples=int(s["samples"]), seed=b)
                    for b in range(B)
                ]
                rows.append(
                    {
                        "kappa": kap,
                        "error": _stats([e for _, e in fe]),
                        "interpolating": int(sum(f > 0 for f, _ in fe)),
                        "benign": int(sum(f > 0 and e <= eta + 0.05 for f, e in fe)),
                    }
                )
            out["gd"][f"{name}_T{T}"] = {"T": T, "rows": rows}
    return out


CURVES_MM = (("small", 0, "o"), ("big", 1, "s"))
CURVES_GD = (("two_steps_T2", 2, "^"), ("two_steps_T3", 3, "v"), ("long_T2", 5, "D"), ("long_T3", 4, "P"))


def _label_gd(key: str) -> str:
    what, T = key.rsplit("_T", 1)
    return f"{'GD, two steps' if what == 'two_steps' else 'GD, long run'} (T = {T})"


def plot(res: dict):
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    from attsvm.figures import PALETTE, TEXT_IN, new_figure

    fig, ax = new_figure(ncols=3, width=TEXT_IN, height=3.6)
    eta = float(res["settings"]["eta"])
    ticks = [0.25, 0.5, 1, 2, 4]
    lines = []
    for j, a in enumerate(ax[0]):
        if j < 2:
            a.axhline(eta, color="0.3", lw=0.8, ls="--")
            a.axhline(0.5, color="0.6", lw=0.8, ls=":")
            a.set_ylim(0, 0.75)
        a.axvline(res["kappa_star_predicted"], color="0.3", lw=0.8, ls="-.")
        a.set_xscale("log")
        a.xaxis.set_major_locator(FixedLocator(ticks))
        a.set_xticklabels([f"{t:g}" for t in ticks])
        a.xaxis.set_minor_locator(NullLocator())
        a.xaxis.set_minor_formatter(NullFormatter())
        a.set_xlabel(r"$\kappa=\mathrm{SNR}\cdot\sqrt{n}$")
    for tag, c, m in CURVES_MM:
        mm = res["mm"][tag]
        k = [r["kappa"] for r in mm["rows"]]
        y = np.array([r["error"]["mean"] for r in mm["rows"]], dtype=float)
        e = np.array([r["error"]["sd"] for r in mm["rows"]], dtype=float)
        lbl = f"max-margin interpolator, n = {mm['n']}, d = {mm['d']} (T = 2)"
        lines.append(ax[0, 0].plot(k, y, marker=m, ms=4, color=PALETTE[c], label=lbl)[0])
        ax[0, 0].fill_between(k, y - e, y + e, color=PALETTE[c], alpha=0.15, lw=0)
        if mm["kappa_measured"]:
            ax[0, 0].axvline(mm["kappa_measured"], color=PALETTE[c], lw=0.8, ls=":")
    ref = res["mm"]["small"]
    k_ref = [r["kappa"] for r in ref["rows"]]
    grey = ax[0, 1].plot(k_ref, [r["error"]["mean"] for r in ref["rows"]], color="0.75", lw=3, zorder=0)[0]
    for key, c, m in CURVES_GD:
        g = res["gd"][key]
        k = [r["kappa"] for r in g["rows"]]
        y = [r["error"]["mean"] for r in g["rows"]]
        lines.append(ax[0, 1].plot(k, y, marker=m, ms=4, color=PALETTE[c], label=_label_gd(key))[0])
        frac = [r["interpolating"] / res["runs"] for r in g["rows"]]
        ax[0, 2].plot(k, frac, marker=m, ms=4, color=PALETTE[c])
    grey.set_label(f"max-margin interpolator, n = {ref['n']} (grey, middle)")
    lines.append(grey)
    ax[0, 2].set_ylim(-0.03, 1.03)
    ax[0, 0].set(ylabel="test error (noisy labels)", title="max-margin interpolator")
    ax[0, 1].set(title=f"joint GD, n = {ref['n']}, d = {ref['d']}")
    ax[0, 2].set(ylabel="fraction of runs", title="GD runs fitting every label")
    fig.legend(lines, [ln.get_label() for ln in lines], loc="outside lower center", ncols=2, fontsize=8)
    fig.suptitle(
        rf"dashed: $\eta$ = {eta:g}; dotted grey: 1/2; dash-dot: $\kappa^\star=\sqrt{{2/(1-\eta)}}$; "
        "coloured dotted: measured crossings",
        fontsize=9,
    )
    return fig


def caption(res: dict) -> str:
    s = res["settings"]
    eta = float(s["eta"])
    parts = []
    for tag, _c, _m in CURVES_MM:
        mm = res["mm"][tag]
        lo, hi = mm["rows"][0], mm["rows"][-1]
        km = mm["kappa_measured"]
        parts.append(
            f"interpolator n = {mm['n']}, d = {mm['d']}: error {lo['error']['mean']:.3f} at kappa = {lo['kappa']:g}, "
            f"{hi['error']['mean']:.3f} at kappa = {hi['kappa']:g}, measured crossing kappa = "
            f"{'none' if km is None else f'{km:.2f}'}, certified {sum(r['certified'] for r in mm['rows'])} of "
            f"{len(mm['rows']) * res['runs']}"
        )
    for key, _c, _m in CURVES_GD:
        g = res["gd"][key]
        best = max(g["rows"], key=lambda r: r["benign"])
        hi = g["rows"][-1]
        parts.append(
            f"{_label_gd(key)}: most benign runs (fitting every label, error <= eta + 0.05) at kappa = "
            f"{best['kappa']:g}, {best['benign']} of {res['runs']} (error {best['error']['mean']:.3f}); at kappa = "
            f"{hi['kappa']:g} error {hi['error']['mean']:.3f}, {hi['interpolating']} runs fit every label, "
            f"{hi['benign']} benign"
        )
    return (
        f"Benign-overfitting data (attsvm.benign), eta = {eta:g}, {res['runs']} seeds per point, kappa = SNR "
        f"sqrt(n) on a log grid of {len(s['kappas'])} values. Left: test error against the noisy label of the "
        "max-margin (v,p) interpolator (exact over all selections, T = 2; line: mean over the seeds, shade: +- 1 "
        "s.d.) at two sizes with the same d/n^2. Middle: joint GD, two steps from zero (per-factor step sizes "
        f"beta_v = 1/(rho^2 + d/n), beta_p = {s['beta_p']:g} beta_v; reconstructed) and {s['steps']} steps of "
        f"per-factor normalised GD (lr {s['lr']}) from 0.1 N, T = 2 and 3 (mean over the seeds; Monte Carlo with "
        f"{s['samples']} draws per class); the middle panel also shows the n = {s['n']} interpolator (grey). "
        "Right: the fraction of GD runs with min_i Y_i f(X_i) > 0 (fitting every training label, flipped ones too). "
        "Marked: eta, 1/2, the cost-balance prediction kappa* = "
        f"{res['kappa_star_predicted']:.2f} (dash-dot) and the measured crossings of (eta + 1/2)/2 (dotted). "
        + "; ".join(parts)
        + ". The max-margin interpolator for T > 2 is not computed (the exact reduction is proved for T = 2)."
    )


def check(res: dict) -> list[str]:
    """The interpolator is harmful at the smallest kappa and benign at the largest; the measured crossing lies within
    a factor 1.5 of the cost-balance prediction at both sizes (a threshold in kappa = SNR sqrt(n))."""
    fails = []
    eta = float(res["settings"]["eta"])
    for tag, _c, _m in CURVES_MM:
        mm = res["mm"][tag]
        lo, hi = mm["rows"][0]["error"]["mean"], mm["rows"][-1]["error"]["mean"]
        if lo is None or not lo >= eta + 0.2:
            fails.append(f"{tag}: error {lo} at the smallest kappa is not >= eta + 0.2")
        if hi is None or not hi <= eta + 0.05:
            fails.append(f"{tag}: error {hi} at the largest kappa is not <= eta + 0.05")
        km = mm["kappa_measured"]
        ks = res["kappa_star_predicted"]
        if km is None or not ks / 1.5 <= km <= ks * 1.5:
            fails.append(f"{tag}: measured crossing {km} not within a factor 1.5 of kappa* = {ks:.3f}")
    return fails
