r"""``nsd-implicit-norm-*`` (conjecture: the attention version of Fan, Schmidt, Thrampoulidis, arXiv 2502.04664,
proved there for linear multiclass models): normalised steepest descent w.r.t. a norm $N$ converges in direction to
the $N$-Att-SVM of the selection it ends on. ``adam-implicit-linf``: the same paper's Adam $\leftrightarrow$
max-norm correspondence.

NSD in $N$: $W_{k+1}=W_k-\eta\Delta_k$, $\Delta_k=\arg\max_{\|\Delta\|_N\le1}\langle\nabla\mathcal L(W_k),\Delta\rangle$
(THEORY §6; the engine's ``algo="nsd"``). Measured per run of the batch: with $\alpha$ the final selection and
$m(W)=\min_{it}\langle W,A_{it}\rangle$, the excess $e_N=\|W/m(W)\|_N/\mathrm{OPT}_N(\alpha)-1$ after ``steps``
steps from a random start $0.1\,\mathcal N$ — 0 exactly when $W$'s direction solves the $N$-program, whichever of
its solutions a solver returns; a run passes when $e_N\le$ ``eps``, fails when $W$ does not select $\alpha$ with a
positive margin, and is undecided when the $N$-program of $\alpha$ is infeasible or not solved.

Confirmation of a refutation (the first failing run): the run replayed at 50 digits
(:func:`attsvm.highprec.replay`, the same algorithm written from its definition) must agree with float64, and its
excess, computed at 50 digits against the *certified upper bound* of $\mathrm{OPT}_N$ (exact LP basis for ℓ1/ℓ∞, a
proved duality gap for the spectral norm), must still exceed ``eps``.
"""

from attsvm.claims import Outcome, claim

#: what every claim of this file shares: the conjecture, the data, the budget and the success rate
SWEEP = {
    "origin": "conjecture",
    "hypotheses": {"data": "paper", "n": 3, "T": 4, "d": 4},
    "params": {"steps": 8000, "lr": 0.1, "eps": 0.05},
    "kind": "empirical",
    "rate": 0.8,
    "examples": 24,
    "ci_examples": 24,
}
NSD = {
    "linf": {"algo": "nsd", "norm": "linf"},
    "l1": {"algo": "nsd", "norm": "l1"},
    "spec": {"algo": "nsd", "norm": "spec"},
}


def excess_runs(case, settings: dict, norm: str) -> Outcome:
    r"""The batch run with ``settings`` and the excess $e_N$ of every run (module docstring)."""
    import numpy as np

    from attsvm import gd, svm
    from attsvm.norms import matrix_norms
    from attsvm.svm.constraints import build
    from attsvm.tolerances import tol

    h = case.hypotheses
    ds = case.batch
    r = gd.run(ds, param="W", lr=float(h["lr"]), steps=int(h["steps"]), init="random", seed=case.seed, **settings)
    runs, exc = [], []
    for b in range(ds.batch_size):
        a = r.selection[b]
        sol = svm.solve(ds[b], a, norm=norm)
        if sol.status != "optimal" or max(sol.kkt.values(), default=0.0) > tol("kkt"):  # float KKT of the search
            runs.append(None)
            continue
        c = build(ds[b], a)
        opt = float(matrix_norms(sol.W, norm)) / float(c.margins(sol.W).min())
        m = float(c.margins(r.W[b]).min())
        if m <= 0:
            runs.append(False)
            exc.append(np.inf)
            continue
        e = float(matrix_norms(r.W[b], norm)) / m / opt - 1.0
        exc.append(e)
        runs.append(bool(e <= h["eps"]))
    fin = [e for e in exc if np.isfinite(e)]
    return Outcome(
        ok=all(x is not False for x in runs),
        margin=float(h["eps"] - max(exc)) if exc else 0.0,
        runs=runs,
        detail={
            "measured": f"per run: ||W/m(W)||_{norm} / OPT_{norm}(alpha) - 1 after {int(h['steps'])} steps of "
            f"{settings}; a run passes when <= eps = {h['eps']}",
            "excess": np.round(exc, 5).tolist(),
            "excess_median": float(np.median(fin)) if fin else None,
            "final_norm_mean": float(np.mean(r.norm)),
        },
    )


def confirm_excess(case, outcome, settings: dict, norm: str) -> Outcome:
    r"""Replay the failing run at 50 digits; its excess against the certified upper bound of the optimum."""
    import mpmath as mp
    import numpy as np

    from attsvm import gd, svm
    from attsvm import highprec as hp
    from attsvm.gd.init import initial_params
    from attsvm.svm.constraints import build
    from attsvm.tolerances import tol

    h = case.hypotheses
    ds, b = case.data, case.index
    B = case.batch.batch_size
    W0 = initial_params("W", "random", B, ds.d, ds.d, case.seed)["W"][b]
    steps, lr = int(h["steps"]), float(h["lr"])
    ref = gd.run(ds, param="W", lr=lr, steps=steps, init=W0, **settings).W[0]
    rep = hp.replay(ds, W0, param="W", lr=lr, steps=steps, **settings)
    W_mp = rep.array("W")
    rel = float(np.linalg.norm(W_mp - ref) / np.linalg.norm(ref))
    if rel > tol("replay_rtol"):
        return Outcome(ok=True, inconclusive=f"the 50-digit replay departs from float64 (relative {rel:.1e})")
    alpha = np.argmax(hp.to_numpy(hp.logits(hp.data(ds).X, rep.final["W"], hp.data(ds).Z)), axis=-1)
    sol = svm.solve(ds, alpha, norm=norm, certify=True)
    cert = sol.certificate or {}
    if sol.status != "optimal" or not cert.get("proved", cert.get("verified", False)):
        return Outcome(ok=True, inconclusive=f"no certified {norm}-Att-SVM optimum for the replayed selection")
    with mp.workdps(hp.DPS):
        c = build(ds, alpha)
        A = [hp.as_mp(x) for x in (c.D, c.Zc)]
        W = rep.final["W"]
        d = ds.d
        marg = min(mp.fsum(A[0][j][p] * W[p][q] * A[1][j][q] for p in range(d) for q in range(d)) for j in range(c.m))
        flat = [W[p][q] for p in range(d) for q in range(d)]
        if norm == "linf":
            nrm = max(abs(x) for x in flat)
        elif norm == "l1":
            nrm = mp.fsum(abs(x) for x in flat)
        else:
            sv = mp.svd_r(mp.matrix(W), compute_uv=False)
            nrm = max(sv[i] for i in range(sv.rows))
        if marg <= 0:
            return Outcome(ok=False, margin=-1.0, detail={"how": "the replayed W does not select its alpha"})
        e = nrm / marg / mp.mpf(cert["upper"]) - 1
        m = mp.mpf(h["eps"]) - e
    return Outcome(
        ok=bool(m >= 0),
        margin=float(m),
        detail={"excess_lower_bound_50_digits": float(e), "replay_rel": rel, "opt_upper": cert["upper"]},
    )


def _nsd_claim(norm: str, title: str, **kw):
    settings = NSD[norm]

    @claim(
        id=f"nsd-implicit-norm-{norm}",
        title=title,
        source="attention version of arXiv 2502.04664 (linear multiclass: proved); THEORY §6",
        depends=("svm-kkt",),
        **SWEEP,
        **kw,
    )
    def nsd(case):
        return excess_runs(case, settings, norm)

    @nsd.confirm
    def _confirm(case, outcome):
        return confirm_excess(case, outcome, settings, norm)

    return nsd


nsd_linf = _nsd_claim("linf", "SignGD (NSD in entrywise l_inf) ends within 5% of the l_inf Att-SVM of its selection")
nsd_l1 = _nsd_claim(
    "l1",
    "Coordinate NSD (entrywise l_1) ends within 5% of the l_1 Att-SVM of its selection",
    expect="inconclusive",
    finding=(
        "pinned 2026-12-01 (seed 0): 22/24 runs within 5% after 8000 steps (median excess 0.0095; 95% CI "
        "[0.742, 0.977] straddles 0.8); run 1 stays at excess 0.75 and run 23 at 0.080, as at 16000 steps with "
        "eta = 0.05 (22/24, worst 0.71): greedy coordinate steps move one entry at a time and are the slowest of "
        "the three NSD geometries, against 24/24 for l_inf and spectral."
    ),
)
nsd_spec = _nsd_claim("spec", "Spectral NSD (U V^T steps, Muon-like) ends within 5% of the spectral-norm Att-SVM")


@claim(
    id="adam-implicit-linf",
    title="Adam (eps = 0) ends within 5% of the l_inf (max-norm) Att-SVM of its selection",
    source="attention version of the Adam <-> max-norm correspondence of arXiv 2502.04664; THEORY §6",
    depends=("nsd-implicit-norm-linf",),
    **SWEEP,
    expect="false",
    finding=(
        "pinned 2026-12-01 (seed 0): refuted at this budget, 0/24 runs within 5% after 8000 steps (median excess "
        "0.68), run 0 confirmed at 50 digits (excess >= 0.296 against the certified l_inf optimum; the replay agrees "
        "with float64 to 2e-14). With eps = 0 and beta2 = 0.999 Adam's steps shrink as the gradient decays "
        "exponentially along the run (mean |W|_F 40 after 8000 steps, SignGD 2884); with beta2 = 0.99 the l_inf "
        "excess does fall, slowly (median 0.58 at 8000, 0.40 at 32000 steps), and its excess to every other norm's "
        "SVM stays flat: Adam may reach the max-norm SVM in the limit, but not at the rates of SignGD."
    ),
)
def adam_implicit_linf(case):
    return excess_runs(case, {"algo": "adam"}, "linf")


@adam_implicit_linf.confirm
def _confirm_adam(case, outcome):
    return confirm_excess(case, outcome, {"algo": "adam"}, "linf")
