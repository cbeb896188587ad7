r"""``nsd-margin-rate`` (conjecture: the attention version of the rate of Fan, Schmidt, Thrampoulidis, arXiv
2502.04664, proved there for linear multiclass models): with $\eta_k=\eta_0(k+1)^{-1/2}$ the normalised-margin gap of
normalised steepest descent falls like $O((\log k+n)/\sqrt k)$.

Here NSD in the entrywise $\ell_\infty$ norm (SignGD) on $W$ from $W_0=0$. With $\alpha$ the final selection, the
gap $\Delta_k=\gamma^\star-\gamma(W_k)$, $\gamma(W)=\min_{it}\langle W,A_{it}\rangle/\|W\|_\infty$ and
$\gamma^\star=1/\mathrm{OPT}_\infty(\alpha)$ (certified LP), at the recorded steps of the second half of the run.
A run passes when the fitted exponent $p$ of $\Delta_k\approx Ck^{-p}$ is at least ``p_min`` (the bound is
$k^{-1/2}$ up to the $\log k$ factor, which lowers a fitted exponent a little) and $\Delta_k\sqrt k/(\log k+n)$ at the
end is at most ``growth`` times its value at the middle; undecided when the gap is not positive throughout the fit
window (the selection still changing) or the program is infeasible.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="nsd-margin-rate",
    title="SignGD with eta_k = eta_0/sqrt(k+1): the l_inf margin gap falls like (log k + n)/sqrt(k)",
    origin="conjecture",
    source="attention version of arXiv 2502.04664 (rate, linear multiclass: proved); THEORY §6",
    hypotheses={"data": "paper", "n": 3, "T": 4, "d": 4},
    params={"steps": 8000, "lr0": 0.5, "records": 80, "p_min": 0.4, "growth": 2.0},
    depends=("nsd-implicit-norm-linf",),
    kind="empirical",
    rate=0.8,
    examples=24,
    ci_examples=24,
)
def nsd_margin_rate(case):
    import numpy as np

    from attsvm import gd, svm
    from attsvm.norms import matrix_norms
    from attsvm.svm.constraints import build
    from attsvm.tolerances import tol

    h = case.hypotheses
    ds = case.batch
    steps = int(h["steps"])
    every = max(1, steps // int(h["records"]))
    r = gd.run(
        ds, param="W", algo="nsd", norm="linf", schedule="rsqrt", lr=float(h["lr0"]), steps=steps, init="zero",
        record_every=every, record_params=True,
    )  # fmt: skip
    Ws = np.asarray(r.trajectory["W"])  # (R, B, d, d)
    k = np.asarray(r.trajectory["step"], dtype=float)
    half = k >= steps / 2
    n = ds.n
    runs, ps, growth = [], [], []
    for b in range(ds.batch_size):
        a = r.selection[b]
        sol = svm.solve(ds[b], a, norm="linf")
        if sol.status != "optimal" or max(sol.kkt.values(), default=0.0) > tol("kkt"):  # float KKT of the search
            runs.append(None)
            continue
        c = build(ds[b], a)
        gstar = float(c.margins(sol.W).min()) / float(matrix_norms(sol.W, "linf"))
        marg = c.margins(Ws[:, b]).min(-1)  # (R,): the least margin at every record
        gap = gstar - marg / np.maximum(matrix_norms(Ws[:, b], "linf"), 1e-300)
        g = gap[half]
        if not np.all(g > 0):
            runs.append(None)
            continue
        p = -np.polyfit(np.log(k[half]), np.log(g), 1)[0]
        scaled = g * np.sqrt(k[half]) / (np.log(k[half]) + n)
        ratio = float(scaled[-1] / scaled[0])
        ps.append(float(p))
        growth.append(ratio)
        runs.append(bool(p >= h["p_min"] and ratio <= h["growth"]))
    return Outcome(
        ok=all(x is not False for x in runs),
        margin=float(min(ps) - h["p_min"]) if ps else 0.0,
        runs=runs,
        detail={
            "measured": "per run: the exponent p of the l_inf margin gap ~ k^-p over the second half, and the growth "
            "of gap sqrt(k)/(log k + n) from the middle to the end",
            "exponents": np.round(ps, 3).tolist(),
            "exponent_median": float(np.median(ps)) if ps else None,
            "growth": np.round(growth, 3).tolist(),
        },
    )
