r"""Optimizer geometry (THEORY §6): does each optimizer converge to the Att-SVM of *its own* norm?

Fan, Schmidt, Thrampoulidis (arXiv 2502.04664) prove, for linear multiclass models, that normalised steepest
descent (NSD) w.r.t. a norm converges in direction to the max-margin solution in that norm (SignGD: entrywise
$\ell_\infty$; NGD: $\ell_2$; spectral GD / Muon: spectral; Adam: the max-norm); 2410.14581 proves the
$\ell_q$ case for mirror descent on attention. This experiment runs the attention version
(claim ``nsd-implicit-norm``): paper-law data ($n=6$, $T=8$, $d=10$), random starts $0.1\,\mathcal N$, each
optimizer on $W$ with step $\eta=0.05$ (option ``schedule=rsqrt``: $\eta_k=0.5\,(k+1)^{-1/2}$), and with
$\alpha$ the selection each run ends on, for every norm $N$ of the columns the $N$-Att-SVM
$W^{mm}_{N,\alpha}=\arg\min\|W\|_N$ s.t. $\langle W,A_{it}\rangle\ge1$ (certified programs of ``attsvm.svm``).

Two measures per (optimizer, norm, run): $\mathrm{corr}(W_k,W^{mm}_{N,\alpha})$ over the iterations (the matrix of
panels), and the final *excess* $e_N(W)=\|W/m(W)\|_N/\mathrm{OPT}_N-1$, $m(W)=\min_{it}\langle W,A_{it}\rangle$,
which is 0 exactly when $W$'s direction solves the $N$-program (a number that does not depend on which
solution a solver returns: the $\ell_1$, $\ell_\infty$ and spectral programs can have many). The bottom row:
balancedness of $(K,Q)$ on the same data (claim ``kq-balancedness``) — the relative drift
$\|D_k-D_0\|_F/(\|K_k\|_F^2+\|Q_k\|_F^2)$ of $D=K^\top K-Q^\top Q$ and the balance
$\tfrac12(\|K\|_F^2+\|Q\|_F^2)/\|KQ^\top\|_\star$ for plain GD, per-factor and jointly normalised GD.
"""

from __future__ import annotations

import numpy as np

from attsvm.experiments import Option

TITLE = (
    "Optimizer geometry: along each optimizer, corr with the Att-SVM of each norm, and the balancedness of "
    "(K,Q) under plain, per-factor and jointly normalised GD"
)
CLAIMS = ("nsd-implicit-norm", "kq-balancedness")
SIZES = {
    "full": {"n": 6, "T": 8, "d": 10, "seeds": 20, "steps": 10000, "record_every": 100, "kq_steps": 3000},
    "smoke": {"n": 6, "T": 8, "d": 10, "seeds": 6, "steps": 2000, "record_every": 100, "kq_steps": 1000},
}
OPTIONS = {"schedule": Option("constant", ("constant", "rsqrt"), help="step sizes: 0.05, or 0.5/sqrt(k+1)")}
Q = 3.0  # the l_q of the mirror-descent row and column
#: (key, label, engine settings, the norm of its implicit bias)
OPTIMIZERS = (
    ("ngd", r"NGD ($\ell_2$)", {"algo": "ngd"}, "fro"),
    ("sign", r"SignGD ($\ell_\infty$)", {"algo": "nsd", "norm": "linf"}, "linf"),
    ("coord", r"coord. ($\ell_1$)", {"algo": "nsd", "norm": "l1"}, "l1"),
    ("spec", "spectral", {"algo": "nsd", "norm": "spec"}, "spec"),
    ("adam", "Adam", {"algo": "adam"}, "linf"),
    # the theorems' own hypotheses (THEORY §6.1): Adam with a decaying step, the momentum methods
    (
        "adam-decay",
        r"Adam, $\eta_k\propto k^{-1/2}$",
        {"algo": "adam", "schedule": "rsqrt", "lr": 0.5, "adam_betas": (0.9, 0.95)},
        "linf",
    ),
    ("signum", r"Signum ($\beta=0.9$)", {"algo": "signum", "momentum": 0.9}, "linf"),
    ("muon", r"Muon ($\beta=0.9$)", {"algo": "muon", "momentum": 0.9}, "spec"),
    ("md", r"MD ($\ell_3$)", {"algo": "nmd", "q": Q}, "lq"),
)
#: the SVM norms of the columns, with the arguments of attsvm.svm.solve
NORMS = (
    ("fro", r"$\|W\|_F$", {"norm": "fro"}),
    ("l1", r"$\|W\|_1$", {"norm": "l1"}),
    ("linf", r"$\|W\|_{\max}$", {"norm": "linf"}),
    ("spec", r"$\|W\|_2$", {"norm": "spec"}),
    ("nuc", r"$\|W\|_\star$", {"norm": "nuc"}),
    ("lq", r"$\|W\|_3$", {"norm": "lq", "q": Q}),
)


def run(ctx) -> dict:
    from attsvm import generate
    from attsvm.experiments import call_each, corr_trajectory, gd_runs, stack, summary
    from attsvm.figures import band_stats
    from attsvm.norms import matrix_norms
    from attsvm.svm.constraints import build

    s = ctx.size
    n, T, d, B = s["n"], s["T"], s["d"], ctx.seeds
    sched = ctx.options["schedule"]
    lr = 0.05 if sched == "constant" else 0.5
    ds = generate.paper_law(n, T, d, seed=0, B=B)
    common = dict(param="W", lr=lr, steps=s["steps"], init="random", seed=1, schedule=sched)
    common.update(record_every=s["record_every"], record_params=True)
    ctx.progress.note(f"{len(OPTIMIZERS)} optimizers x {B} runs x {s['steps']} steps")
    runs = gd_runs(ctx, [dict(ds=ds, **{**common, **o[2]}) for o in OPTIMIZERS], "optimizers")
    out: dict = {
        "settings": dict(s, lr=lr, schedule=sched, init="random 0.1 N", data="paper_law seed 0", q=Q),
        "runs": B,
        "optimizers": [o[0] for o in OPTIMIZERS],
        "norms": [c[0] for c in NORMS],
        "labels": {"optimizers": [o[1] for o in OPTIMIZERS], "norms": [c[1] for c in NORMS]},
        "own_norm": {o[0]: o[3] for o in OPTIMIZERS},
        "cells": {},
    }
    for (key, _label, _kw, _own), r in zip(OPTIMIZERS, runs):
        alpha = np.asarray(r.selection)
        dsa = ds.with_alpha(alpha)
        traj = np.asarray(r.trajectory["W"])  # (R, B, d, d)
        cons = [build(ds[b], alpha[b]) for b in range(B)]
        marg = np.stack([np.min(c.margins(traj[:, b]), axis=-1) for b, c in enumerate(cons)], 1)
        for col, _lab, kw in NORMS:
            res = call_each(ctx, "attsvm.svm:solve", [((dsa[b],), kw) for b in range(B)], f"{key}: {col} SVMs")
            Wn, ok = stack(res, (d, d))
            q = kw.get("q")
            with np.errstate(invalid="ignore", divide="ignore"):
                opt = np.array(
                    [matrix_norms(Wn[b], col, q) / cons[b].margins(Wn[b]).min() if ok[b] else np.nan for b in range(B)]
                )
                exc = np.where(marg > 0, matrix_norms(traj, col, q) / np.where(marg > 0, marg, 1.0) / opt - 1.0, np.inf)
            corr = corr_trajectory(traj, Wn)  # (R, B)
            out["cells"][f"{key}|{col}"] = {
                "feasible": int(ok.sum()),
                "final_corr": summary(corr[-1]),
                "final_excess": summary(np.where(np.isfinite(exc[-1]), exc[-1], np.nan)),
                "final_excess_median": float(np.nanmedian(np.where(np.isfinite(exc[-1]), exc[-1], np.nan))),
                "selects_alpha": int(np.sum(marg[-1] > 0)),
                "curves": {
                    "step": r.trajectory["step"],
                    "one_minus_corr": band_stats(1.0 - corr, log=True),
                    "excess": band_stats(np.where(np.isfinite(exc), exc, np.nan), log=True),
                },
            }
        out["cells"][f"{key}|_run"] = {"stop_reasons": sorted(set(r.stop_reason)), "seconds": float(r.seconds)}
    out["balance"] = _balance(ctx, ds, s, band_stats)
    return out


def _balance(ctx, ds, s, band_stats) -> dict:
    """(K,Q) from PyTorch's nn.Linear initialisation: plain GD (small step), per-factor and joint NGD."""
    from attsvm.experiments import gd_runs

    base = dict(param="KQ", steps=s["kq_steps"], init="linear", seed=2, record_every=max(s["kq_steps"] // 100, 1))
    jobs = [
        ("gd", "plain GD, $\\eta=0.5$", dict(algo="gd", lr=0.5)),
        ("per-factor", "NGD per factor, $\\eta=0.1$", dict(algo="ngd", lr=0.1)),
        ("joint", "NGD joint, $\\eta=0.1$", dict(algo="ngd", lr=0.1, normalize="joint")),
    ]
    runs = gd_runs(ctx, [dict(ds=ds, record_params=True, **base, **kw) for _k, _l, kw in jobs], "(K,Q) balance")
    out: dict = {"labels": {k: lab for k, lab, _ in jobs}}
    for (key, _lab, kw), r in zip(jobs, runs):
        K, Qf = np.asarray(r.trajectory["K"]), np.asarray(r.trajectory["Q"])  # (R, B, d, m)
        Dm = np.swapaxes(K, -1, -2) @ K - np.swapaxes(Qf, -1, -2) @ Qf
        size = np.sum(K**2, axis=(-2, -1)) + np.sum(Qf**2, axis=(-2, -1))
        drift = np.linalg.norm(Dm - Dm[:1], axis=(-2, -1)) / size
        nuc = np.linalg.svd(K @ np.swapaxes(Qf, -1, -2), compute_uv=False).sum(-1)
        bal = 0.5 * size / nuc
        out[key] = {
            "settings": kw,
            "final_drift": float(np.mean(drift[-1])),
            "final_balance": float(np.mean(bal[-1])),
            "curves": {
                "step": r.trajectory["step"],
                "drift": band_stats(drift[1:], log=True),
                "balance_minus_one": band_stats(bal[1:] - 1.0, log=True),
                "step_drift": r.trajectory["step"][1:],
            },
        }
    return out


def plot(res: dict):
    from attsvm.figures import PALETTE, TEXT_IN, band, new_canvas

    opts, norms = res["optimizers"], res["norms"]
    R, C = len(opts), len(norms)
    fig = new_canvas(TEXT_IN, 1.05 * R + 2.9)
    outer = fig.add_gridspec(2, 1, height_ratios=[1.05 * R, 2.3])
    top, bottom = outer[0].subgridspec(R, C), outer[1].subgridspec(1, 2)
    share = None
    for i, o in enumerate(opts):
        for j, c in enumerate(norms):
            ax = fig.add_subplot(top[i, j], sharex=share, sharey=share)
            share = share or ax
            cell = res["cells"][f"{o}|{c}"]
            own = res["own_norm"][o] == c
            color = PALETTE[1] if own else PALETTE[0]
            band(ax, cell["curves"]["step"], cell["curves"]["one_minus_corr"], color=color, logy=True)
            ax.text(
                0.97, 0.93, f"{cell['final_corr']['mean']:.3f}", transform=ax.transAxes, ha="right", va="top",
                fontsize=8, fontweight="bold" if own else "normal",
            )  # fmt: skip
            if own:
                for sp in ax.spines.values():
                    sp.set_color(PALETTE[1])
                    sp.set_linewidth(1.4)
            if i == 0:
                ax.set_title(res["labels"]["norms"][j], fontsize=9)
            if j == 0:
                ax.set_ylabel(res["labels"]["optimizers"][i], fontsize=8)
            if i < R - 1:
                ax.tick_params(labelbottom=False)
            if j > 0:
                ax.tick_params(labelleft=False)
    share.set_ylim(1e-5, 2.0)
    bal = res["balance"]
    a1, a2 = fig.add_subplot(bottom[0, 0]), fig.add_subplot(bottom[0, 1])
    for k, col in zip(("gd", "per-factor", "joint"), (PALETTE[2], PALETTE[1], PALETTE[0])):
        cur = bal[k]["curves"]
        band(a1, cur["step_drift"], cur["drift"], color=col, logy=True, label=bal["labels"][k])
        band(a2, cur["step_drift"], cur["balance_minus_one"], color=col, logy=True)
    a1.set(
        xlabel="iteration $k$", ylabel=r"$\|D_k-D_0\|_F/(\|K\|_F^2+\|Q\|_F^2)$", title=r"drift of $K^\top K-Q^\top Q$"
    )
    a2.set(
        xlabel="iteration $k$",
        ylabel=r"$\frac{\|K\|_F^2+\|Q\|_F^2}{2\|KQ^\top\|_\star}-1$",
        title="imbalance of the factors",
    )
    fig.legend(*a1.get_legend_handles_labels(), loc="outside lower center", ncols=3)
    s = res["settings"]
    fig.suptitle(
        rf"$1-\mathrm{{corr}}(W_k,W^{{mm}}_{{N,\alpha}})$ over {s['steps']} steps, {res['runs']} seeds "
        "(rows: optimizer on $W$; columns: the norm $N$ of the Att-SVM)\nframed: the norm of the optimizer's "
        "implicit bias; number: final mean corr. Bottom: $(K,Q)$ balancedness",
        fontsize=9,
    )
    return fig


def caption(res: dict) -> str:
    s, cells = res["settings"], res["cells"]
    step = "constant $\\eta$ = 0.05" if s["schedule"] == "constant" else "$\\eta_k=0.5\\,(k+1)^{-1/2}$"
    own = []
    for o, lab in zip(res["optimizers"], res["labels"]["optimizers"]):
        c = res["own_norm"][o]
        ex = {x: cells[f"{o}|{x}"]["final_excess_median"] for x in res["norms"]}
        best = min(ex, key=lambda x: ex[x] if np.isfinite(ex[x]) else np.inf)
        own.append(f"{lab}: own-norm excess {ex[c]:.3g} (smallest: {best}, {ex[best]:.3g})")
    b = res["balance"]
    return (
        f"Paper-law data (n = {s['n']}, T = {s['T']}, d = {s['d']}), {res['runs']} seeds, random starts "
        f"$0.1\\,\\mathcal N$, {s['steps']} steps with {step}, recorded every {s['record_every']} steps. Rows: the "
        "optimizer on $W$ (NGD; normalised steepest descent in the entrywise $\\ell_\\infty$ norm, i.e. SignGD; in "
        "the entrywise $\\ell_1$ norm, a greedy coordinate step; in the spectral norm, $UV^\\top$ of the gradient; "
        "Adam with $\\beta=(0.9,0.999)$, $\\epsilon=0$; normalised $\\ell_3$ mirror descent). Columns: the Att-SVM "
        "of the final selection $\\alpha$ in each norm $N$ (certified solves). Each panel: "
        "$1-\\mathrm{corr}(W_k,W^{mm}_{N,\\alpha})$ (line: geometric mean over the seeds, shade: ×/÷ one geometric "
        "s.d.), the number its final mean corr; framed in vermillion: the norm of the optimizer's implicit bias "
        "(Adam: $\\ell_\\infty$). Final median excess $\\|W/m(W)\\|_N/\\mathrm{OPT}_N-1$ (0 iff the direction "
        "solves the $N$-program; independent of which solution a solver returns): " + "; ".join(own) + ". Bottom: "
        "$(K,Q)$ on the same data from PyTorch's nn.Linear initialisation for "
        f"{b['gd']['curves']['step'][-1]} steps — left, the drift of $D=K^\\top K-Q^\\top Q$ relative to "
        "$\\|K\\|_F^2+\\|Q\\|_F^2$; right, the imbalance "
        "$\\tfrac12(\\|K\\|_F^2+\\|Q\\|_F^2)/\\|KQ^\\top\\|_\\star-1$ — "
        f"final means: plain GD {b['gd']['final_drift']:.2g} / {b['gd']['final_balance'] - 1:.2g}, per-factor NGD "
        f"{b['per-factor']['final_drift']:.2g} / {b['per-factor']['final_balance'] - 1:.2g}, joint NGD "
        f"{b['joint']['final_drift']:.2g} / {b['joint']['final_balance'] - 1:.2g}."
    )


def check(res: dict) -> list[str]:
    fails = []
    for o in res["optimizers"]:
        for c in res["norms"]:
            if res["cells"][f"{o}|{c}"]["feasible"] == 0:
                fails.append(f"{o}: no feasible {c}-SVM")
    b = res["balance"]
    if not b["joint"]["final_drift"] < b["per-factor"]["final_drift"]:
        fails.append("balance: joint NGD does not drift less than per-factor NGD")
    if not b["gd"]["final_drift"] < b["per-factor"]["final_drift"]:
        fails.append("balance: plain GD does not drift less than per-factor NGD")
    return fails
