r"""``mirror-descent-lq`` (paper, 2410.14581): $\ell_q$ mirror descent on $W$ ($\psi=\frac1q\|W\|_q^q$) converges
in direction to the $\ell_q$ Att-SVM solution. Finite-horizon check: the $\ell_q$ norm of the iterate rescaled
to margin 1 approaches the $\ell_q$-SVM optimum — relative excess non-increasing at the records of the second
half and $\le$ ``eps`` at the end — and is below that of the Frobenius direction $W^{mm}$ when $q\ne2$.
"""

from attsvm.claims import Outcome, claim


@claim(
    id="mirror-descent-lq",
    title="l_q mirror descent converges in direction to the l_q Att-SVM",
    origin="paper",
    source="2410.14581; THEORY §4",
    hypotheses={
        "data": "feasible",
        "n": (1, 3),
        "T": (2, 3),
        "d": (2, 3),
        "alpha": "opt",
        "q": 3.0,
        "lr": 0.5,
        "steps": 4000,
        "eps": 0.1,
    },
    depends=("svm-kkt",),
    examples=6,
    seconds=25,
)
def mirror_descent_lq(case):
    import numpy as np

    from attsvm import gd
    from attsvm.svm.constraints import build

    h = case.hypotheses
    ds = case.data
    q = float(h["q"])
    try:
        from attsvm.svm import solve

        sol = solve(ds, norm="lq", q=q)
    except ImportError:
        return Outcome(ok=True, inconclusive="engine: attsvm.svm.solve(norm='lq') not available")
    if not sol.feasible:
        return Outcome(ok=True, inconclusive="l_q Att-SVM infeasible for this draw")
    res = gd.run(
        ds,
        param="W",
        algo="md",
        q=q,
        lr=float(h["lr"]),
        steps=int(h["steps"]),
        record_every=int(h["steps"]) // 4,
        record_params=True,
    )
    c = build(ds, ds.selection)
    Ws = np.asarray(res.trajectory["W"])[:, 0]
    lq = lambda W: float(np.sum(np.abs(W) ** q) ** (1 / q))  # noqa: E731
    exc = []
    for W in Ws[1:]:
        m = c.margins(W).min()
        exc.append(lq(W / m) / float(sol.objective) - 1.0 if m > 0 else np.inf)
    exc = np.array(exc)
    tail = exc[len(exc) // 2 :]
    margin = min(h["eps"] - exc[-1], 1e-3 - float(np.max(np.diff(tail))) if len(tail) > 1 else 0.0)
    return Outcome(ok=margin >= 0, margin=float(margin), detail={"relative_excess": exc.tolist()})
