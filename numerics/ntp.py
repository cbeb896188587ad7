r"""NTP — next-token prediction with self-attention (Li, Huang, Ildiz, Rawat, Oymak, arXiv 2403.08081; THEORY §7;
claims ``ntp-graph-svm-direction``, ``ntp-finite-part``, ``ntp-scc-retrieval``).

The authors' two experiments (``mc_next_single_layer_{global,local}_converge.ipynb`` of
yixiao-huang/next-token-prediction, read for their settings): $n=6$ sequences of $T=4$ distinct tokens from $K=6$
Gaussian unit embeddings in $d=8$, query the last token, label drawn uniformly and redrawn from the sequence when
absent; PyTorch's ``nn.Linear`` initialisation; each gradient divided by $\|g\|+\epsilon$, $\epsilon=2^{-52}$.

* **Global convergence** (the log-loss $-\log$ of the label's attention mass, which is convex): normalised GD
  $\eta=0.01$ for 4000 steps on $W$ and on $(K,Q)$ ($m=d$). Along the run, against the certified graph SVM
  $W^{svm}$ (exact rational KKT; for $(K,Q)$ also the nuclear-norm graph SVM $W^{svm}_\star$, proved gap) and the
  proved finite part $W^{fin}$ (:mod:`attsvm.ntp.decomposition`): $1-\mathrm{corr}$, $\|P_SW_k-W^{fin}\|_F$ and the
  largest attention mass outside the label's SCC (the highest-priority SCC present).
* **Local convergence** (the authors' squared loss $(1-p_y)^2$ of the vocabulary classifier $p=\mathbb S(EX^\top s)$,
  non-convex; engine head ``"ntp-square"``): normalised GD $\eta=0.1$ for 2000 steps on $W$. The *local* graph SVM
  is built from the token sets GD ends on, $\mathcal O_i=\{t:s_{it}\ge10^{-2}\}$ (the authors' threshold; a run with a
  probability in $[0.009,0.01)$ is set aside as ambiguous, as they do): every token of $\mathcal O_i$ acts as a
  label of sequence $i$ (the data set with sample $i$ repeated once per selected token). Tracked: $1-\mathrm{corr}$
  with the local and with the global graph SVM, and how often the local sets differ from the label's SCC.
"""

from __future__ import annotations

import numpy as np

from attsvm.experiments import AUTHORS_EPS, Option

EPS = AUTHORS_EPS
OPTIONS = {
    "grad_eps": Option(EPS, minimum=0.0, help="the normaliser's eps in g/(|g|+eps) (paper: 2^-52; 0: exactly g/|g|)"),
    "init": Option("linear", ("linear", "random"), help="initial law: PyTorch's nn.Linear default, or 0.1 N"),
    "vocab": Option("random", ("random", "ortho", "equicorr"), help="embeddings: Gaussian unit, orthonormal, equicorr"),
}
TITLE = (
    "NTP: GD on next-token data converges in direction to the graph SVM, its finite part to W^fin, and attention "
    "retrieves the label's strongly connected component"
)
CLAIMS = ("ntp-graph-svm-direction", "ntp-finite-part", "ntp-scc-retrieval")
SIZES = {
    "full": {"n": 6, "T": 4, "K": 6, "d": 8, "seeds": 50, "steps": 4000, "lr": 0.01, "local_steps": 2000,
             "local_lr": 0.1, "record_every": 40},
    "smoke": {"n": 6, "T": 4, "K": 6, "d": 8, "seeds": 6, "steps": 1000, "lr": 0.01, "local_steps": 500,
              "local_lr": 0.1, "record_every": 50},
}  # fmt: skip
SELECTED, AMBIGUOUS = 1e-2, 9e-3  # the authors' C_thres and E_thres


def _local_data(ds, log_s: np.ndarray):
    """The data set whose graph SVM is the local SVM of the selected sets (module docstring), or None when a
    probability is ambiguous."""
    from attsvm.ntp.data import NTPData

    s = np.exp(log_s)
    if np.any((s >= AMBIGUOUS) & (s < SELECTED)):
        return None
    tok, rows, labs = np.asarray(ds.tokens), [], []
    for i in range(ds.n):
        for t in np.flatnonzero(s[i] >= SELECTED):
            rows.append(tok[i])
            labs.append(tok[i, t])
    return NTPData(ds.E, np.array(rows), np.array(labs))


def local_svm(ds, log_s: np.ndarray) -> dict:
    """The local graph SVM of one run (its W, or why there is none) and whether the sets are the label SCCs."""
    from attsvm.ntp.graph import top_scc_mask
    from attsvm.ntp.svm import solve_graph_svm

    loc = _local_data(ds, log_s)
    if loc is None:
        return {"W": None, "why": "ambiguous", "differs": None}
    differs = bool(not np.array_equal(np.exp(log_s) >= SELECTED, top_scc_mask(ds)))
    sol = solve_graph_svm(loc, "fro", certify=True)
    if sol.status != "optimal" or not (sol.certificate or {}).get("verified"):
        return {"W": None, "why": sol.status, "differs": differs}
    return {"W": sol.W, "why": None, "differs": differs}


def run(ctx) -> dict:
    from attsvm.experiments import call_each, gd_runs
    from attsvm.figures import band_stats
    from attsvm.model import corr
    from attsvm.ntp.decomposition import measures, nuclear_excess
    from attsvm.ntp.generate import ntp

    s, o = ctx.size, ctx.options
    B = ctx.seeds
    ds = ntp(s["n"], s["T"], s["K"], s["d"], vocab=o["vocab"], seed=0, B=B)
    out: dict = {"settings": dict(s, **{k: o[k] for k in ("grad_eps", "init", "vocab")}, algo="ngd", data="seed 0")}
    common = dict(algo="ngd", init=o["init"], seed=1, grad_eps=o["grad_eps"], record_params=True)
    jobs = [
        dict(ds=ds, param="W", lr=s["lr"], steps=s["steps"], record_every=s["record_every"], **common),
        dict(ds=ds, param="KQ", m=s["d"], lr=s["lr"], steps=s["steps"], record_every=s["record_every"], **common),
        dict(ds=ds, param="W", head="ntp-square", lr=s["local_lr"], steps=s["local_steps"],
             record_every=s["record_every"], **common),
    ]  # fmt: skip
    ctx.progress.note(f"normalised GD on next-token data: {B} runs x ({s['steps']} W, {s['steps']} (K,Q), "
                      f"{s['local_steps']} squared-loss) steps")  # fmt: skip
    rW, rKQ, rL = gd_runs(ctx, jobs, "gd")
    refs = call_each(
        ctx, "attsvm.ntp.decomposition:reference", [((ds[b],), {"nuclear": True}) for b in range(B)], "references"
    )
    for name, r in (("W", rW), ("KQ", rKQ)):
        Ws = np.asarray(r.trajectory["W"])  # (R, B, d, d)
        per = [measures(ds[b], refs[b], Ws[:, b]) for b in range(B)]
        m = {k: np.stack([p[k] for p in per], axis=1) for k in per[0]}
        # a seed without a cycle has S = {0} and W^fin = 0: its distance is 0 by definition, not a measurement
        m["finite_distance"][:, [len(refs[b].basis) == 0 for b in range(B)]] = np.nan
        if name == "KQ":
            m["nuclear_excess"] = np.stack([nuclear_excess(ds[b], refs[b], Ws[:, b]) for b in range(B)], axis=1)
        log10_out = m["log_outside_mass"] / np.log(10.0)
        out[name] = {
            "final_one_minus_corr": _stats(m["one_minus_corr"][-1]),
            "final_finite_distance": _stats(m["finite_distance"][-1]),
            "final_log10_outside_mass": _stats(log10_out[-1]),
            "final_norm_mean": float(np.mean(np.asarray(r.norm))),
            "stop_reasons": sorted({str(x) for x in np.atleast_1d(r.stop_reason)}),
            "curves": {
                "step": np.asarray(r.trajectory["step"]),
                "one_minus_corr": band_stats(m["one_minus_corr"], log=True),
                "finite_distance": band_stats(m["finite_distance"], log=True),
                "log10_outside_mass": band_stats(log10_out),
            },
        }
        if name == "KQ":
            out[name]["final_nuclear_excess"] = _stats(m["nuclear_excess"][-1])
            out[name]["curves"]["nuclear_excess"] = band_stats(m["nuclear_excess"], log=True)
    out["references"] = {
        "certified": int(sum(r.certified for r in refs)),
        "with_equalities": int(sum(len(r.basis) > 0 for r in refs)),
        "finite_radius_max": float(max(r.fin.radius for r in refs)),
        "nuclear_certified": int(sum(bool((r.nuc.certificate or {}).get("verified")) for r in refs if r.nuc)),
        "runs": B,
    }
    logs = np.asarray(rL.log_softmax)
    loc = [local_svm(ds[b], logs[b]) for b in range(B)]
    WsL = np.asarray(rL.trajectory["W"])
    c_loc = np.stack(
        [1.0 - corr(WsL[:, b], x["W"]) if x["W"] is not None else np.full(len(WsL), np.nan) for b, x in enumerate(loc)],
        axis=1,
    )
    c_glob = np.stack([1.0 - corr(WsL[:, b], refs[b].W_svm) for b in range(B)], axis=1)
    has = [x["W"] is not None for x in loc]
    differs = [bool(x["differs"]) for x in loc if x["differs"] is not None]
    out["local"] = {
        "runs": B,
        "ambiguous": int(sum(x["why"] == "ambiguous" for x in loc)),
        "local_svm": int(sum(has)),
        "frac_differs_from_label_scc": float(np.mean(differs)) if differs else None,
        "final_one_minus_corr_local": _stats(c_loc[-1][np.isfinite(c_loc[-1])]),
        "final_one_minus_corr_global": _stats(c_glob[-1][np.array(has)]),
        "final_loss_mean": float(np.mean(np.asarray(rL.loss))),
        "curves": {
            "step": np.asarray(rL.trajectory["step"]),
            "one_minus_corr_local": band_stats(c_loc, log=True),
            "one_minus_corr_global": band_stats(np.where(np.array(has)[None], c_glob, np.nan), log=True),
        },
    }
    return out


def _stats(x) -> dict:
    """:func:`attsvm.experiments.summary` plus the median of the finite values."""
    from attsvm.experiments import summary

    a = np.asarray(x, dtype=float)
    a = a[np.isfinite(a)]
    return {**summary(a), "median": float(np.median(a)) if a.size else None}


def plot(res: dict):
    from attsvm.figures import COLORS, PALETTE, TEXT_IN, band, band_key, new_figure

    fig, ax = new_figure(ncols=2, nrows=2, width=TEXT_IN, height=5.8)
    W, K, L = res["W"], res["KQ"], res["local"]
    st = W["curves"]["step"]
    band(ax[0, 0], st, W["curves"]["one_minus_corr"], label=r"$W_k$ vs $W^{svm}$", color=COLORS["W"], logy=True)
    band(ax[0, 0], st, K["curves"]["nuclear_excess"], label=r"$K_kQ_k^\top$: nuclear excess", color=COLORS["KQ"],
         logy=True)  # fmt: skip
    ax[0, 0].set(xlabel="iteration $k$", ylabel=r"$1-\mathrm{corr}$ / excess", title="direction: the graph SVM")
    band(ax[0, 1], st, W["curves"]["finite_distance"], color=COLORS["W"], logy=True)
    band(ax[0, 1], st, K["curves"]["finite_distance"], color=COLORS["KQ"], logy=True)
    ax[0, 1].axhline(res["settings"]["lr"] / 2, color=COLORS["reference"], lw=0.8, ls="--")
    ax[0, 1].set(xlabel="iteration $k$", ylabel=r"$\|P_SW_k-W^{fin}\|_F$", title=r"finite part (dashed: $\eta/2$)")
    band(ax[1, 0], st, W["curves"]["log10_outside_mass"], color=COLORS["W"])
    band(ax[1, 0], st, K["curves"]["log10_outside_mass"], color=COLORS["KQ"])
    ax[1, 0].set(xlabel="iteration $k$", ylabel=r"$\log_{10}\max_i\sum_{t\notin\mathcal{C}_i}s_{it}$",
                 title="retrieval: mass outside the label's SCC")  # fmt: skip
    sl = L["curves"]["step"]
    band(ax[1, 1], sl, L["curves"]["one_minus_corr_local"], label="vs the local graph SVM", color=PALETTE[4],
         logy=True)  # fmt: skip
    band(ax[1, 1], sl, L["curves"]["one_minus_corr_global"], label="vs the global graph SVM",
         color=COLORS["global"], logy=True)  # fmt: skip
    ax[1, 1].set(xlabel="iteration $k$", ylabel=r"$1-\mathrm{corr}(W_k,\cdot)$", title="squared loss (local)")
    h, lab = ax[0, 0].get_legend_handles_labels()
    h2, lab2 = ax[1, 1].get_legend_handles_labels()
    key = band_key(W["curves"]["one_minus_corr"])
    lab2 = [f"squared loss: {x}" for x in lab2]
    fig.legend([*h, *h2, key[0]], [*lab, *lab2, key[1]], loc="outside lower center", ncols=2)
    s = res["settings"]
    fig.suptitle(
        f"NTP: normalised GD on next-token data (n={s['n']}, T={s['T']}, K={s['K']}, d={s['d']}; "
        f"{res['references']['runs']} seeds)"
    )
    return fig


def _med(x: dict, fmt: str = ".3g") -> str:
    return "n/a" if x.get("median") is None else format(x["median"], fmt)


def caption(res: dict) -> str:
    s, W, K, L, R = res["settings"], res["W"], res["KQ"], res["local"], res["references"]
    diff = "n/a" if L["frac_differs_from_label_scc"] is None else f"{L['frac_differs_from_label_scc']:.0%}"
    return (
        rf"The authors' law: n = {s['n']} sequences of T = {s['T']} distinct tokens from K = {s['K']} "
        rf"{s['vocab']} embeddings in d = {s['d']}, query the last token, {R['runs']} seeds; initialisation "
        rf"{s['init']}; normalised GD $\theta\leftarrow\theta-\eta g/(\|g\|+\epsilon)$, $\epsilon$ = "
        rf"{s['grad_eps']:.3g}. Top row and bottom left: the log-loss, $\eta$ = {s['lr']}, {s['steps']} steps on "
        rf"$W$ (blue) and on $(K,Q)$ with $m=d$ (vermillion). References per seed: the graph SVM $W^{{svm}}$ with "
        rf"an exact rational certificate ({R['certified']} of {R['runs']} certified), the nuclear-norm graph SVM "
        rf"$W^{{svm}}_\star$ with a proved gap ({R['nuclear_certified']}), and the finite part $W^{{fin}}$ with a "
        rf"proved error radius (at most {R['finite_radius_max']:.1e}); {R['with_equalities']} seeds have a cycle, "
        rf"hence equality constraints and a nonzero equality span $S$. At the last step, medians over the seeds: "
        rf"$1-\mathrm{{corr}}(W_k,W^{{svm}})$ = {_med(W['final_one_minus_corr'])}, "
        rf"for $(K,Q)$ the nuclear excess $\|P_S^\perp K_kQ_k^\top\|_\star/(m_k\,\mathrm{{OPT}}_\star)-1$ ($m_k$ its "
        rf"smallest inequality margin; 0 exactly on the solution set of the nuclear-norm graph SVM) = "
        rf"{_med(K['final_nuclear_excess'])}; "
        rf"$\|P_SW_k-W^{{fin}}\|_F$ = {_med(W['final_finite_distance'])} and {_med(K['final_finite_distance'])} "
        rf"(over the seeds with a cycle) — constant normalised steps keep the projection chattering at about "
        rf"$\eta/2$ (dashed) around $W^{{fin}}$, "
        rf"so it does not converge (plain GD or decaying steps do: claim ntp-finite-part); "
        rf"$\log_{{10}}$ of the largest attention mass outside the label's SCC "
        rf"{_med(W['final_log10_outside_mass'], '.2f')} and {_med(K['final_log10_outside_mass'], '.2f')}. "
        rf"The $(K,Q)$ curves flatten after about 2000 steps: the gradients fall far below $\epsilon$, where the "
        rf"normaliser $g/(\|g\|+\epsilon)$ shrinks the steps to nothing (option grad_eps=0 removes it). "
        rf"Bottom right: the authors' local-convergence run, squared loss $(1-p_y)^2$, $p=\mathbb S(EX^\top s)$, "
        rf"$\eta$ = {s['local_lr']}, {s['local_steps']} steps; the local graph SVM of the token sets "
        rf"$\{{t:s_{{it}}\ge10^{{-2}}\}}$ GD ends on exists for {L['local_svm']} seeds ({L['ambiguous']} set aside "
        rf"with a probability in $[0.009,0.01)$); those sets differ from the label's SCC in {diff} of the runs; "
        rf"final median $1-\mathrm{{corr}}$ {_med(L['final_one_minus_corr_local'])} against the local and "
        rf"{_med(L['final_one_minus_corr_global'])} against the global graph SVM. Lines: geometric mean (arithmetic "
        rf"for the log-mass), shades: ×/÷ (±) one s.d. over the seeds."
    )


def check(res: dict) -> list[str]:
    from attsvm.figures import band_falls

    fails = []
    W, K, L = res["W"], res["KQ"], res["local"]
    if not (W["final_one_minus_corr"]["median"] or 1) <= 0.1:
        fails.append(f"W: median final 1-corr with W^svm {W['final_one_minus_corr']['median']} > 0.1")
    if not (W["final_log10_outside_mass"]["median"] or 0) <= -0.5:
        fails.append("W: median attention mass outside the label's SCC above 10^-0.5 at the end")
    for name, r in (("W", W), ("KQ", K)):
        for c in ("one_minus_corr", "log10_outside_mass"):
            if not band_falls(r["curves"][c]):
                fails.append(f"{name}: {c} does not fall over the run")
    if not band_falls(K["curves"]["nuclear_excess"]):
        fails.append("KQ: the nuclear excess does not fall")
    if res["references"]["certified"] < res["references"]["runs"]:
        fails.append("some graph SVM / finite part lacks its certificate")
    if L["local_svm"] and not band_falls(L["curves"]["one_minus_corr_local"]):
        fails.append("local: 1-corr with the local graph SVM does not fall")
    return fails
