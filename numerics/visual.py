r"""E1 — the 2-D picture (THEORY §4): where $W_kz_i$ points, against $W^{mm}z_i$ and $W^{mm}_\star z_i$.

$n=2$, $T=3$, $d=2$ (:func:`attsvm.generate.visual`: tokens $0.3\,\mathcal N$ shifted by $(\mp1,0)$,
$Y=(1,1)$); normalised GD $\eta=0.1$, 2000 steps; $W$ from $W_0=0$, $(K,Q)$ from $Q_0=0$,
$K_0=0.1\,\mathcal N$. The attention logit of token $t$ is $x_{it}^\top(Wz_i)$, so the vector $Wz_i$ in
token space is what selects: GD on $W$ aligns it with $W^{mm}z_i$, GD on $(K,Q)$ with $W^{mm}_\star z_i$.
"""

from __future__ import annotations

import numpy as np

TITLE = "E1: W_k z_i follows W^mm z_i (W) and W^mm_* z_i (K,Q) in the token plane"
CLAIMS = ("gd-global-equal-scores", "kq-gd-nuclear")
SIZES = {
    "full": {"seeds": 8, "steps": 2000, "record_every": 10},
    "smoke": {"seeds": 4, "steps": 2000, "record_every": 20},
}


def run(ctx) -> dict:
    from attsvm import generate, svm
    from attsvm.experiments import call_each, corr_trajectory, gd_runs, stack, summary

    s = ctx.size
    B = ctx.seeds
    ds = generate.visual(seed=0, B=B)
    common = dict(algo="ngd", lr=0.1, steps=s["steps"], record_every=s["record_every"], record_params=True)
    jobs = [dict(ds=ds, param="W", init="zero", **common)]
    jobs.append(dict(ds=ds, param="KQ", m=2, init="zero", init_scale=0.1, seed=0, **common))
    rW, rK = gd_runs(ctx, jobs, "gd")
    with ctx.timed("svm fro"):
        fb = svm.solve_fro_batch(ds)
    Wmm = np.asarray(fb.W)
    nuc = call_each(ctx, "attsvm.svm:solve", [((ds[b],), {"norm": "nuc"}) for b in range(B)], "svm nuclear")
    Wst, ok = stack(nuc, (2, 2))
    cW = corr_trajectory(rW.trajectory["W"], Wmm)
    cK = corr_trajectory(rK.trajectory["W"], Wst)
    cKf = corr_trajectory(rK.trajectory["W"], Wmm)

    def zdirs(Ws: np.ndarray) -> np.ndarray:  # (R, n, 2): W_k z_i / ||W_k||_F for instance 0
        Ws = np.asarray(Ws)[:, 0]
        nrm = np.linalg.norm(Ws.reshape(len(Ws), -1), axis=1)
        v = np.einsum("rde,ne->rnd", Ws, ds.Z[0])
        return v / np.where(nrm > 0, nrm, np.nan)[:, None, None]

    unit = lambda W: np.einsum("de,ne->nd", W, ds.Z[0]) / np.linalg.norm(W)  # noqa: E731
    return {
        "settings": dict(s, n=2, T=3, d=2, algo="ngd", lr=0.1, init_W="zero", init_KQ="Q0=0, K0=0.1N"),
        "W": {"final_corr_Wmm": summary(cW[-1]), "final_max_softmax_mean": float(np.mean(rW.max_softmax))},
        "KQ": {
            "final_corr_Wmm_star": summary(cK[-1]),
            "final_corr_Wmm": summary(cKf[-1]),
            "final_max_softmax_mean": float(np.mean(rK.max_softmax)),
        },
        "nuclear_feasible": int(ok.sum()),
        "picture": {
            "X": ds.X[0],
            "Z": ds.Z[0],
            "opt": ds.opt[0],
            "Wmm_z": unit(Wmm[0]),
            "Wstar_z": unit(Wst[0]) if ok[0] else None,
            "W_path": zdirs(rW.trajectory["W"]),
            "KQ_path": zdirs(rK.trajectory["W"]),
        },
    }


def plot(res: dict):
    from attsvm.experiments import new_figure

    pic = res["picture"]
    X, opt = np.asarray(pic["X"], dtype=float), pic["opt"]
    fig, ax = new_figure(ncols=2, width=3.6, height=3.6)
    panels = (
        ("W_path", "Wmm_z", r"GD on $W$ vs $W^{mm}z_i$"),
        ("KQ_path", "Wstar_z", r"GD on $(K,Q)$ vs $W^{mm}_\star z_i$"),
    )
    for a, (path_key, svm_key, title) in zip(ax[0], panels):
        path = np.array(pic[path_key], dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            path = path / np.linalg.norm(path, axis=-1, keepdims=True)  # unit direction of W_k z_i
        for i, c in enumerate(("C0", "C1")):
            a.scatter(X[i, :, 0], X[i, :, 1], color=c, s=18, label=f"tokens of input {i + 1}")
            a.scatter(X[i, opt[i], 0], X[i, opt[i], 1], color=c, s=120, marker="*", edgecolor="k", linewidth=0.5)
            a.plot(path[:, i, 0], path[:, i, 1], color=c, lw=2.5, alpha=0.5)
            a.plot(path[-1:, i, 0], path[-1:, i, 1], "o", color=c, ms=5, mec="k")
            if pic[svm_key] is not None:
                u = np.asarray(pic[svm_key], dtype=float)[i]
                u = 1.3 * u / np.linalg.norm(u)
                a.plot([0, u[0]], [0, u[1]], color=c, ls="--", lw=1.2)
        t = np.linspace(0, 2 * np.pi, 200)
        a.plot(np.cos(t), np.sin(t), color="0.85", lw=0.6, zorder=0)
        a.axhline(0, color="0.8", lw=0.5)
        a.axvline(0, color="0.8", lw=0.5)
        a.set_aspect("equal", adjustable="datalim")
        a.set_title(title, fontsize=9)
    ax[0, 0].legend(fontsize=7, loc="lower left")
    fig.suptitle("E1: unit direction of $W_kz_i$ along GD (thick path, dot = end) and the SVM's (dashed)", fontsize=9)
    return fig


def check(res: dict) -> list[str]:
    fails = []
    w = res["W"]["final_corr_Wmm"]["mean"] or 0
    k = res["KQ"]["final_corr_Wmm_star"]["mean"] or 0
    if w < 0.99:
        fails.append(f"W: mean final corr with W^mm {w:.4f} < 0.99")
    if k < 0.95:
        fails.append(f"KQ: mean final corr with W^mm_* {k:.4f} < 0.95")
    return fails
