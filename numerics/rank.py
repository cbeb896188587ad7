r"""E2 — rank of the Att-SVM and Att-SVM⋆ solutions (THEORY §4, claim ``svm-rank``).

For $(n,T)\in\{(5,5),(10,5),(15,5),(5,10),(5,15)\}$ and $d\in\{1,2,3,4,5,10,15,20\}$: draw paper-law
instances until 100 have a *feasible* Att-SVM(opt) (sampling-until-feasible is how the paper defines the
population; the number of draws is reported, and capped at ``max_draws`` per cell), then compare
$\mathrm{rank}(W^{mm})$ with $\mathrm{rank}(W^{mm}_\star)$ (singular values below $10^{-7}\sigma_{\max}$
count as zero). Lemma 1: both ranks are $\le\min(n,d)$; the nuclear solution is typically of lower rank.
Draws with a tie for the optimal token (possible at $d=1$) count as draws, not as instances.

Option ``reference=scs`` (``attsvm reproduce rank --reference scs``): the same instances' Att-SVM⋆ is also solved
as the authors' code solves it (arXiv 2308.16898, github umich-sota/TF-as-SVM: a straightforward cvxpy model
with cvxpy's default solver, SCS) by :func:`scs_reference`, and the attsvm solves carry a proved duality-gap
certificate (``certify=True``). Reported: both rank curves (same rank tolerance), the SCS points' constraint
violation $\max_j\max(0,1-\langle W,A_j\rangle)$, SCS's statuses, $\|W_{scs}\|_\star$ over the certified upper
bound, and the certificates (fraction verified, largest relative gap). The default (``reference=none``) is the
experiment without it.
"""

from __future__ import annotations

import numpy as np

TITLE = "E2: rank of W^mm (Frobenius) vs W^mm_* (nuclear) against d"
CLAIMS = ("svm-rank",)
_CELLS = [(5, 5), (10, 5), (15, 5), (5, 10), (5, 15)]
OPTIONS = {"reference": ("none", ("none", "scs"))}  # scs: also solve Att-SVM* with cvxpy + SCS (authors' model)
#: reporting threshold of the SCS comparison (issue 13): an SCS point with a larger violation is "infeasible"
VIOLATION_REPORT = 1e-6
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


def violation(ds, W: np.ndarray) -> float:
    r"""Constraint violation of $W$ for Att-SVM⋆ of one data set: $\max_j\max(0,\,1-\langle W,A_j\rangle)$ over
    the constraints $\langle W,A_{it}\rangle=(x_{i\alpha_i}-x_{it})^\top Wz_i\ge1$ (0: feasible)."""
    from attsvm.svm.constraints import build

    return float(max(0.0, 1.0 - float(np.min(build(ds).margins(np.asarray(W, dtype=float))))))


def scs_reference(ds) -> dict:
    r"""Att-SVM⋆ of one cross-attention data set as a straightforward cvxpy model solved by SCS (the solver named
    explicitly, cvxpy's default settings otherwise), one scalar constraint per token as in the authors' code:

    .. math:: \min_W\|W\|_\star\quad\text{s.t.}\quad(x_{it}-x_{i\alpha_i})^\top Wz_i\le-1\quad(i\in[n],\ t\ne\alpha_i).

    Returns ``{"status"`` (cvxpy's, or ``"solver-error"`` with ``"error"``), ``"W"`` (None without a point),
    ``"objective"`` $\|W\|_\star$ of the returned point, ``"violation"`` (:func:`violation`), ``"seconds"}``."""
    import time
    import warnings

    import cvxpy as cp

    X, Z, a = np.asarray(ds.X, dtype=float), np.asarray(ds.Z, dtype=float), np.asarray(ds.selection)
    n, T, d = X.shape
    t0 = time.perf_counter()
    W = cp.Variable((d, d))
    cons = [(X[i, t] - X[i, a[i]]) @ W @ Z[i] <= -1 for i in range(n) for t in range(T) if t != a[i]]
    prob = cp.Problem(cp.Minimize(cp.norm(W, "nuc")), cons)
    try:
        with warnings.catch_warnings():  # "Solution may be inaccurate": the status says so (optimal_inaccurate)
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=cp.SCS)
    except cp.error.SolverError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else ""
        return {"status": "solver-error", "W": None, "error": f"SCS: {msg}", "seconds": time.perf_counter() - t0}
    out: dict = {"status": str(prob.status), "W": None, "objective": None, "violation": None}
    if W.value is not None and np.all(np.isfinite(W.value)):
        Wv = np.asarray(W.value, dtype=float)
        out.update(W=Wv, objective=float(np.linalg.svd(Wv, compute_uv=False).sum()), violation=violation(ds, Wv))
    out["seconds"] = time.perf_counter() - t0
    return out


def _ranks(W: np.ndarray, rtol: float) -> np.ndarray:
    """Numerical rank of each matrix of ``W`` (B, d, d): singular values above ``rtol`` times the largest."""
    sv = np.linalg.svd(W, compute_uv=False)
    return np.sum(sv > rtol * sv[:, :1], axis=1)


def _scs_row(found: list, nuc: list, scs: list, rn: np.ndarray, ok: np.ndarray, rtol: float) -> dict:
    """The SCS comparison of one cell: SCS ranks and violations, statuses, objective ratio, certificates."""
    d = found[0][0].d
    has = np.array([r.get("W") is not None for r in scs])
    Ws = np.stack([r["W"] if r.get("W") is not None else np.zeros((d, d)) for r in scs])
    rs = np.where(has, _ranks(Ws, rtol), -1)
    viol = np.array([r["violation"] if r.get("violation") is not None else np.nan for r in scs])
    sv = np.linalg.svd(Ws, compute_uv=False)
    both = has & ok
    # the largest singular value of W_scs beyond the certified solution's rank, relative to sigma_max
    tail = np.array([sv[b, rn[b]] / sv[b, 0] if both[b] and rn[b] < d else np.nan for b in range(len(scs))])
    certs = [r.get("certificate", {}) if r.get("status") == "optimal" else {} for r in nuc]
    upper = np.array([c.get("upper", np.nan) if c.get("proved") else np.nan for c in certs], dtype=float)
    ratio = np.array([r["objective"] / upper[b] if has[b] else np.nan for b, r in enumerate(scs)], dtype=float)
    gaps = [float(c["rel_gap"]) for c, k in zip(certs, ok) if k and c.get("rel_gap") is not None]
    statuses: dict[str, int] = {}
    for r in scs:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    finite = lambda a: a[np.isfinite(a)]  # noqa: E731
    return {
        "scs_status": statuses,
        "scs_points": int(has.sum()),
        "rank_scs": rs.tolist(),
        "rank_scs_mean": float(rs[has].mean()) if has.any() else None,
        "rank_scs_std": float(rs[has].std()) if has.any() else None,
        "rank_scs_max": int(rs[has].max()) if has.any() else None,
        "rank_nuc": rn.tolist(),
        "frac_scs_gt_nuc": float(np.mean(rs[both] > rn[both])) if both.any() else None,
        "scs_violation": [None if not np.isfinite(v) else float(v) for v in viol],
        "scs_violation_max": float(finite(viol).max()) if has.any() else None,
        "scs_violation_median": float(np.median(finite(viol))) if has.any() else None,
        "scs_frac_violated": float(np.mean(finite(viol) > VIOLATION_REPORT)) if has.any() else None,
        "scs_tail_sv_rel_median": float(np.median(finite(tail))) if finite(tail).size else None,
        "scs_tail_sv_rel_max": float(finite(tail).max()) if finite(tail).size else None,
        "scs_obj_ratio_min": float(finite(ratio).min()) if finite(ratio).size else None,
        "scs_obj_ratio_max": float(finite(ratio).max()) if finite(ratio).size else None,
        "scs_obj_ratio_mean": float(finite(ratio).mean()) if finite(ratio).size else None,
        "scs_obj_ratio": [None if not np.isfinite(x) else float(x) for x in ratio],
        "scs_seconds": float(sum(r.get("seconds", 0.0) for r in scs)),
        "cert_verified": int(sum(bool(c.get("verified")) for c, k in zip(certs, ok) if k)),
        "cert_max_rel_gap": max(gaps) if gaps else None,
    }


def _reference_summary(rows: list[dict]) -> dict:
    """The SCS comparison pooled over every instance of every cell."""
    rn = np.array([x for r in rows for x in r.get("rank_nuc", [])], dtype=float)
    rs = np.array([x for r in rows for x in r.get("rank_scs", [])], dtype=float)
    both = (rn >= 0) & (rs >= 0)
    viol = np.array([v for r in rows for v in r.get("scs_violation", []) if v is not None], dtype=float)
    statuses: dict[str, int] = {}
    for r in rows:
        for k, v in r.get("scs_status", {}).items():
            statuses[k] = statuses.get(k, 0) + v
    pick = lambda key, f: f([r[key] for r in rows if r.get(key) is not None], default=None)  # noqa: E731
    solved = sum(r.get("nuclear_ok", 0) for r in rows)
    pairs = [(x, v) for r in rows for x, v in zip(r.get("scs_obj_ratio", []), r.get("scs_violation", []))]
    near = [x for x, v in pairs if x is not None and v is not None and v <= VIOLATION_REPORT]
    cells = [r for r in rows if r.get("rank_scs_mean") is not None and r.get("rank_nuc_mean") is not None]
    return {
        "solver": "SCS via cvxpy (default settings)",
        "instances": int(both.sum()),
        "rank_nuc_mean": float(rn[both].mean()) if both.any() else None,
        "rank_scs_mean": float(rs[both].mean()) if both.any() else None,
        "frac_scs_gt_nuc": float(np.mean(rs[both] > rn[both])) if both.any() else None,
        "scs_status": statuses,
        "violation_threshold": VIOLATION_REPORT,
        "scs_points": int(viol.size),
        "scs_violation_max": float(viol.max()) if viol.size else None,
        "scs_violation_median": float(np.median(viol)) if viol.size else None,
        "scs_frac_violated": float(np.mean(viol > VIOLATION_REPORT)) if viol.size else None,
        "scs_obj_ratio_min": pick("scs_obj_ratio_min", min),
        "scs_obj_ratio_max": pick("scs_obj_ratio_max", max),
        "scs_obj_ratio_feasible_min": min(near, default=None),  # over the points violating by <= the threshold
        "scs_obj_ratio_feasible_max": max(near, default=None),
        "cells": len(cells),
        "cells_scs_higher": sum(r["rank_scs_mean"] > r["rank_nuc_mean"] for r in cells),
        "scs_tail_sv_rel_max": pick("scs_tail_sv_rel_max", max),
        "cert_solved": int(solved),
        "cert_verified": int(sum(r.get("cert_verified", 0) for r in rows)),
        "cert_max_rel_gap": pick("cert_max_rel_gap", max),
        "scs_seconds": float(sum(r.get("scs_seconds", 0.0) for r in rows)),
    }


def run(ctx) -> dict:
    from attsvm.experiments import call_each, fro_batch, solver_errors, stack
    from attsvm.tolerances import tol

    s = ctx.size
    scs = ctx.options.get("reference", "none") == "scs"
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
                kw = {"norm": "nuc", "certify": True} if scs else {"norm": "nuc"}
                nuc = call_each(ctx, "attsvm.svm:solve", [((f[0],), kw) for f in found], f"nuclear n={n} T={T} d={d}")
                Wn, ok = stack(nuc, (d, d))
                Wf = np.stack([f[1] for f in found])
                rf = _ranks(Wf, rtol)
                rn = np.where(ok, _ranks(np.nan_to_num(Wn), rtol), -1)
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
                if scs:
                    ref = call_each(ctx, f"{__file__}:scs_reference", [((f[0],), {}) for f in found], "scs (reference)")
                    row.update(_scs_row(found, nuc, ref, rn, ok, rtol))
            rows.append(row)
    out = {"settings": {k: v for k, v in s.items()}, "rank_tol": rtol, "rows": rows}
    if scs:
        import cvxpy
        import scs as scs_pkg

        out["reference"] = dict(_reference_summary(rows), cvxpy=cvxpy.__version__, scs=scs_pkg.__version__)
    return out


def _groups(rows: list[dict]) -> list[tuple[str, list[tuple[int, int]]]]:
    """The two panels: cells with T = 5 (n varies) and cells with n = 5 (T varies)."""
    cells: list[tuple[int, int]] = []
    for r in rows:
        if (r["n"], r["T"]) not in cells:
            cells.append((r["n"], r["T"]))
    return [("n", [c for c in cells if c[1] == 5]), ("T", [c for c in cells if c[0] == 5])]


def _with_scs(res: dict) -> bool:
    """Whether the run had ``reference=scs`` (a result without options: the default)."""
    return res.get("settings", {}).get("options", {}).get("reference", "none") == "scs" and "reference" in res


def plot(res: dict):
    from matplotlib.lines import Line2D

    from attsvm.figures import PALETTE, TEXT_IN, new_figure

    rows = res["rows"]
    scs = _with_scs(res)
    fig, ax = new_figure(ncols=2, nrows=2 if scs else 1, width=TEXT_IN, height=6.2 if scs else 3.3)
    series = [("fro", "-", "o", 0.0), ("nuc", "--", "s", 0.0)] + ([("scs", ":", "^", 0.25)] if scs else [])
    for col, (vary, cs) in enumerate(_groups(rows)):
        a = ax[0, col]
        handles = []
        for k, (n, T) in enumerate(cs):
            rs = [r for r in rows if (r["n"], r["T"]) == (n, T) and r.get("rank_fro_mean") is not None]
            if not rs:
                continue
            d = np.array([r["d"] for r in rs], dtype=float)
            for key, ls, mk, dx in series:
                m = np.array([np.nan if r.get(f"rank_{key}_mean") is None else r[f"rank_{key}_mean"] for r in rs])
                sd = np.array([np.nan if r.get(f"rank_{key}_std") is None else r[f"rank_{key}_std"] for r in rs])
                a.errorbar(d + dx, m, yerr=sd, ls=ls, marker=mk, ms=3.5, color=PALETTE[k])
            if scs:
                v = ax[1, col]
                vmax = np.array([np.nan if r.get("scs_violation_max") is None else r["scs_violation_max"] for r in rs])
                vmed = [np.nan if r.get("scs_violation_median") is None else r["scs_violation_median"] for r in rs]
                v.plot(d, np.clip(vmax, 1e-12, None), ls="-", marker="v", ms=3.5, color=PALETTE[k])
                v.plot(
                    d, np.clip(np.array(vmed), 1e-12, None), ls=":", marker="o", ms=3.5, mfc="none", color=PALETTE[k]
                )
            handles.append(Line2D([], [], color=PALETTE[k], lw=3, label=f"{vary} = {n if vary == 'n' else T}"))
        other = "T" if vary == "n" else "n"
        a.set(xlabel="dimension $d$", ylabel="rank (mean ± 1 s.d.)", title=f"{vary} varies, {other} = 5")
        a.set_xticks(res["settings"]["ds"])
        low = ax[1, col] if scs else a
        if scs:
            low.axhline(VIOLATION_REPORT, color="0.5", lw=0.8, ls="-.")
            low.set(
                yscale="log",
                xlabel="dimension $d$",
                ylabel=r"SCS violation $(1-\min$ margin$)_+$",
                title=f"constraint violation of the SCS points, {vary} varies",
            )
            low.set_xticks(res["settings"]["ds"])
        if handles:
            low.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(handles))
    style = [
        Line2D([], [], color="0.3", ls="-", marker="o", ms=3.5, label=r"$\mathrm{rank}\,W^{mm}$ (Frobenius)"),
        Line2D(
            [], [], color="0.3", ls="--", marker="s", ms=3.5,
            label=r"$\mathrm{rank}\,W^{mm}_\star$ (nuclear" + (", attsvm, certified)" if scs else ")"),
        ),
    ]  # fmt: skip
    if scs:
        style += [
            Line2D(
                [], [], color="0.3", ls=":", marker="^", ms=3.5, label=r"$\mathrm{rank}\,W^{mm}_\star$ (nuclear, SCS)"
            ),
            Line2D([], [], color="0.3", ls="-", marker="v", ms=3.5, label="SCS violation: max over instances"),
            Line2D([], [], color="0.3", ls=":", marker="o", mfc="none", ms=3.5, label="SCS violation: median"),
            Line2D([], [], color="0.5", lw=0.8, ls="-.", label=f"violation {VIOLATION_REPORT:g}"),
        ]
    fig.legend(handles=style, loc="outside lower center", ncols=3 if scs else 2)
    seeds = res["settings"]["seeds"]
    if scs:
        fig.suptitle(
            "E2: rank of the Att-SVM solutions against $d$, Att-SVM$^\\star$ solved by attsvm (certified) and by SCS\n"
            f"(the authors' cvxpy model; up to {seeds} feasible instances per cell; error bars ± 1 s.d.)"
        )
    else:
        fig.suptitle(
            f"E2: rank of the Att-SVM solutions against $d$ (up to {seeds} feasible instances per "
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
    if _with_scs(res):
        text += " " + _scs_caption(res)
    return text


def _g(x: float | None, fmt: str = ".2g") -> str:
    return "n/a" if x is None else format(x, fmt)


def _scs_caption(res: dict) -> str:
    """The caption's part for ``reference=scs``: the SCS line style, the violation panels, the pooled numbers."""
    ref = res["reference"]
    lo = ref["scs_obj_ratio_min"]
    lo_text = _g(lo, ".7f" if lo is None or lo >= 0.01 else ".2g")
    status = ", ".join(f"{k} {v}" for k, v in sorted(ref["scs_status"].items()))
    return (
        rf"Option reference = scs: top, the dashed squares are attsvm's Att-SVM⋆ solutions with a proved duality-gap "
        rf"certificate, the dotted triangles (shifted right by 0.25) the same instances' Att-SVM⋆ solved as the "
        rf"authors' code does: a cvxpy model with one constraint per token, $(x_{{it}}-x_{{i,\mathrm{{opt}}_i}})^\top "
        rf"Wz_i\le-1$, minimising $\|W\|_\star$, by SCS ({ref['scs']}, via cvxpy {ref['cvxpy']}, default settings); "
        rf"both ranks with the same tolerance. Bottom: the constraint violation "
        rf"$\max_j\max(0,1-\langle W_{{scs}},A_j\rangle)$ of the SCS points, per cell the largest over the instances "
        rf"(solid, triangles) and the median (dotted, open circles), log axis (a 0 would be drawn at $10^{{-12}}$); "
        rf"the dash-dot line is {ref['violation_threshold']:g}. Over all {ref['instances']} instances: mean rank "
        rf"{_g(ref['rank_nuc_mean'], '.2f')} (attsvm) vs {_g(ref['rank_scs_mean'], '.2f')} (SCS); the SCS mean is "
        rf"higher in {ref['cells_scs_higher']} of {ref['cells']} cells $(n,T,d)$ and the SCS rank higher in "
        rf"{_g(ref['frac_scs_gt_nuc'], '.0%')} of the instances; every singular value of $W_{{scs}}$ beyond the "
        rf"certified solution's rank is at most {_g(ref['scs_tail_sv_rel_max'])}·$\sigma_{{\max}}$. SCS statuses: "
        rf"{status}; violation > {ref['violation_threshold']:g} in {_g(ref['scs_frac_violated'], '.0%')} of the SCS "
        rf"points (largest {_g(ref['scs_violation_max'])}, median {_g(ref['scs_violation_median'])}); "
        rf"$\|W_{{scs}}\|_\star$ / certified upper bound between {lo_text} and "
        rf"{_g(ref['scs_obj_ratio_max'], '.7f')}, between {_g(ref['scs_obj_ratio_feasible_min'], '.7f')} and "
        rf"{_g(ref['scs_obj_ratio_feasible_max'], '.7f')} on the points violating by at most "
        rf"{ref['violation_threshold']:g}. attsvm certificates: {ref['cert_verified']} of "
        rf"{ref['cert_solved']} verified, largest relative gap {_g(ref['cert_max_rel_gap'])}."
    )


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
    if _with_scs(res):
        fails += _scs_check(res)
    return fails


def _scs_check(res: dict) -> list[str]:
    """``reference=scs``: the finding (SCS's Att-SVM⋆ points have a higher rank on average than the certified
    solutions of the same instances), and every attsvm solution certified."""
    ref, fails = res["reference"], []
    if not ref["instances"]:
        return ["reference=scs: no instance has both an attsvm and an SCS Att-SVM* solution"]
    if not ref["rank_scs_mean"] > ref["rank_nuc_mean"]:
        fails.append(
            f"reference=scs: SCS's Att-SVM* rank is not higher on average ({ref['rank_scs_mean']:.2f} vs "
            f"{ref['rank_nuc_mean']:.2f} certified, over {ref['instances']} instances)"
        )
    if ref["cert_verified"] < ref["cert_solved"]:
        bad = ref["cert_solved"] - ref["cert_verified"]
        fails.append(f"reference=scs: {bad} attsvm Att-SVM* solution(s) not certified")
    return fails
