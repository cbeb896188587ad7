r"""E2 — rank of the Att-SVM and Att-SVM⋆ solutions (THEORY §4, claim ``svm-rank``).

For $(n,T)\in\{(5,5),(10,5),(15,5),(5,10),(5,15)\}$ and $d\in\{1,2,3,4,5,10,15,20\}$: draw paper-law
instances until 100 have a *feasible* Att-SVM(opt) (sampling-until-feasible is how the paper defines the
population; the number of draws is reported, and capped at ``max_draws`` per cell), then compare
$\mathrm{rank}(W^{mm})$ with $\mathrm{rank}(W^{mm}_\star)$ (singular values below $10^{-7}\sigma_{\max}$
count as zero). Lemma 1: both ranks are $\le\min(n,d)$; the nuclear solution is typically of lower rank.
Draws with a tie for the optimal token (possible at $d=1$) count as draws, not as instances.
"""

from __future__ import annotations

import numpy as np

TITLE = "E2: rank of W^mm (Frobenius) vs W^mm_* (nuclear) against d"
CLAIMS = ("svm-rank",)
_CELLS = [(5, 5), (10, 5), (15, 5), (5, 10), (5, 15)]
SIZES = {
    "full": {"cells": _CELLS, "ds": [1, 2, 3, 4, 5, 10, 15, 20], "seeds": 100, "max_draws": 4000},
    "smoke": {"cells": [(5, 5), (10, 5)], "ds": [2, 5, 10], "seeds": 6, "max_draws": 2000},
}


def _draw(rng: np.random.Generator, B: int, n: int, T: int, d: int):
    """Paper law (unit-norm Gaussians, fair labels), keeping only draws with a unique optimal token."""
    from attsvm.data import Dataset

    unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)  # noqa: E731
    v = unit(rng.standard_normal((B, d)))
    X = unit(rng.standard_normal((B, n, T, d)))
    Z = unit(rng.standard_normal((B, n, d)))
    Y = rng.choice([-1.0, 1.0], size=(B, n))
    g = Y[..., None] * np.einsum("bntd,bd->bnt", X, v)
    keep = np.all(np.sum(g == g.max(axis=-1, keepdims=True), axis=-1) == 1, axis=-1)
    if not keep.any():
        return None
    return Dataset(X[keep], Y[keep], Z[keep], v[keep])


def run(ctx) -> dict:
    from attsvm.experiments import call_each, fro_batch, solver_errors, stack
    from attsvm.tolerances import tol

    s = ctx.size
    target = ctx.seeds
    rtol = tol("rank")
    rng = np.random.default_rng(0)
    rows = []
    for n, T in s["cells"]:
        for d in s["ds"]:
            draws, found = 0, []
            chunk = target
            while len(found) < target and draws < s["max_draws"]:
                chunk = int(min(chunk, s["max_draws"] - draws))
                batch = _draw(rng, chunk, n, T, d)
                draws += chunk
                if batch is not None:
                    Wf, feasible = fro_batch(ctx, batch, "feasibility + frobenius")
                    found += [(batch[int(b)], Wf[b]) for b in np.flatnonzero(feasible)]
                rate = max(len(found), 1) / draws
                chunk = int(np.clip(1.3 * (target - len(found)) / rate, 16, 2000))
            found = found[:target]
            ctx.progress.note(f"n={n} T={T} d={d}: {len(found)} feasible of {draws} draws")
            row = {"n": n, "T": T, "d": d, "draws": draws, "feasible": len(found)}
            if found:
                nuc = call_each(
                    ctx, "attsvm.svm:solve", [((f[0],), {"norm": "nuc"}) for f in found], f"nuclear n={n} T={T} d={d}"
                )
                Wn, ok = stack(nuc, (d, d))
                Wf = np.stack([f[1] for f in found])
                rank = (
                    lambda W: np.sum(  # noqa: E731
                        (sv := np.linalg.svd(W, compute_uv=False)) > rtol * sv[:, :1], axis=1
                    )
                )
                rf = rank(Wf)
                rn = np.where(ok, rank(np.nan_to_num(Wn)), -1)
                row.update(
                    nuclear_ok=int(ok.sum()),
                    nuclear_solver_errors=solver_errors(nuc)[:3],
                    n_solver_errors=len(solver_errors(nuc)),
                    rank_fro_mean=float(rf.mean()),
                    rank_fro_std=float(rf.std()),
                    rank_nuc_mean=float(rn[ok].mean()) if ok.any() else None,
                    rank_nuc_std=float(rn[ok].std()) if ok.any() else None,
                    rank_fro_max=int(rf.max()),
                    rank_nuc_max=int(rn[ok].max()) if ok.any() else None,
                    frac_nuc_le_fro=float(np.mean(rn[ok] <= rf[ok])) if ok.any() else None,
                )
            rows.append(row)
    return {"settings": {k: v for k, v in s.items()}, "rank_tol": rtol, "rows": rows}


def _groups(rows: list[dict]) -> list[tuple[str, list[tuple[int, int]]]]:
    """The two panels: cells with T = 5 (n varies) and cells with n = 5 (T varies)."""
    cells: list[tuple[int, int]] = []
    for r in rows:
        if (r["n"], r["T"]) not in cells:
            cells.append((r["n"], r["T"]))
    return [("n", [c for c in cells if c[1] == 5]), ("T", [c for c in cells if c[0] == 5])]


def plot(res: dict):
    from matplotlib.lines import Line2D

    from attsvm.figures import PALETTE, TEXT_IN, new_figure

    rows = res["rows"]
    fig, ax = new_figure(ncols=2, width=TEXT_IN, height=3.3)
    for a, (vary, cs) in zip(ax[0], _groups(rows)):
        handles = []
        for k, (n, T) in enumerate(cs):
            rs = [r for r in rows if (r["n"], r["T"]) == (n, T) and r.get("rank_fro_mean") is not None]
            if not rs:
                continue
            d = np.array([r["d"] for r in rs], dtype=float)
            for key, ls, mk in (("fro", "-", "o"), ("nuc", "--", "s")):
                m = np.array([np.nan if r[f"rank_{key}_mean"] is None else r[f"rank_{key}_mean"] for r in rs])
                sd = np.array([np.nan if r[f"rank_{key}_std"] is None else r[f"rank_{key}_std"] for r in rs])
                a.errorbar(d, m, yerr=sd, ls=ls, marker=mk, ms=3.5, color=PALETTE[k])
            handles.append(Line2D([], [], color=PALETTE[k], lw=3, label=f"{vary} = {n if vary == 'n' else T}"))
        other = "T" if vary == "n" else "n"
        a.set(xlabel="dimension $d$", ylabel="rank (mean ± 1 s.d.)", title=f"{vary} varies, {other} = 5")
        a.set_xticks(res["settings"]["ds"])
        if handles:
            a.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(handles))
    style = [
        Line2D([], [], color="0.3", ls="-", marker="o", ms=3.5, label=r"$\mathrm{rank}\,W^{mm}$ (Frobenius)"),
        Line2D([], [], color="0.3", ls="--", marker="s", ms=3.5, label=r"$\mathrm{rank}\,W^{mm}_\star$ (nuclear)"),
    ]
    fig.legend(handles=style, loc="outside lower center", ncols=2)
    fig.suptitle(
        f"E2: rank of the Att-SVM solutions against $d$ (up to {res['settings']['seeds']} feasible instances per "
        f"cell; error bars ± 1 s.d.)"
    )
    return fig


def _span(fracs: list[float]) -> str:
    lo, hi = min(fracs), max(fracs)
    return f"{lo:.0%}" if lo == hi else f"{lo:.0%}–{hi:.0%}"


def caption(res: dict) -> str:
    rows, s = res["rows"], res["settings"]
    done = [r for r in rows if r.get("rank_fro_mean") is not None]
    empty = [r for r in rows if r.get("rank_fro_mean") is None]
    short = [r for r in done if r["feasible"] < s["seeds"]]
    cells = ", ".join(f"({n}, {T})" for n, T in s["cells"])
    text = (
        rf"Rank of the Frobenius Att-SVM solution $W^{{mm}}$ (solid, circles) and of the nuclear-norm Att-SVM⋆ "
        rf"solution $W^{{mm}}_\star$ (dashed, squares) against $d\in\{{{', '.join(str(d) for d in s['ds'])}\}}$, "
        rf"for the cells (n, T) = {cells}; left: T = 5, right: n = 5; colour: the cell. {s['seeds']} seeds per "
        rf"$(n,T,d)$: paper-law instances are drawn (unique optimal token) until that many have a feasible "
        rf"Att-SVM(opt), at most {s['max_draws']} draws; a marker is the mean rank over those instances, the "
        rf"error bar ± 1 s.d. Singular values "
        rf"below {res['rank_tol']:g}·$\sigma_{{\max}}$ count as zero. Lemma 1 bounds both ranks by min(n, d)."
    )
    if short:
        text += " Cells with fewer feasible instances: " + "; ".join(
            f"n = {r['n']}, T = {r['T']}, d = {r['d']}: {r['feasible']} of {r['draws']} draws" for r in short
        )
        text += "."
    if empty:
        text += " Not drawn (no feasible draw): " + ", ".join(
            f"n = {r['n']}, T = {r['T']}, d = {r['d']} ({r['draws']} draws)" for r in empty
        )
        text += "."
    if done:
        le = [r["frac_nuc_le_fro"] for r in done if r.get("frac_nuc_le_fro") is not None] or [float("nan")]
        errs = sum(r.get("n_solver_errors", 0) for r in done)
        text += (
            f" Largest ranks seen: {max(r['rank_fro_max'] for r in done)} (Frobenius) and "
            f"{max((r['rank_nuc_max'] or 0) for r in done)} (nuclear); rank $W^{{mm}}_\\star$ ≤ rank $W^{{mm}}$ in "
            f"{_span(le)} of the instances of each $(n,T,d)$; nuclear solver failures (left out): {errs}."
        )
    return text


def check(res: dict) -> list[str]:
    fails = []
    nuc, fro = [], []
    for r in res["rows"]:
        if r.get("rank_fro_mean") is None:
            continue
        bound = min(r["n"], r["d"])
        if r["rank_fro_max"] > bound or (r["rank_nuc_max"] is not None and r["rank_nuc_max"] > bound):
            fails.append(f"n={r['n']} T={r['T']} d={r['d']}: a rank exceeds min(n,d)={bound}")
        if r["rank_nuc_mean"] is not None:
            nuc.append(r["rank_nuc_mean"])
            fro.append(r["rank_fro_mean"])
    if not nuc:
        fails.append("no cell produced a nuclear solution")
    elif np.mean(nuc) > np.mean(fro):
        fails.append(f"nuclear rank {np.mean(nuc):.2f} > Frobenius rank {np.mean(fro):.2f} on average")
    return fails
