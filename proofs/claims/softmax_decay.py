r"""``softmax-decay`` (THEORY §3, derived).

For $W=R\,W^{mm}_\alpha/\|W^{mm}_\alpha\|_F$ and $\rho=1/\|W^{mm}_\alpha\|_F$:

.. math::
    1-s_{i\alpha_i}\le(T-1)e^{-R\rho},\qquad \frac{s_{it}}{s_{i\alpha_i}}=e^{-R\rho}\ (t\in\mathcal T_i),\qquad
    \frac{s_{i\tau}}{s_{i\alpha_i}}\le e^{-R\rho(1+2\delta_\alpha)}\ (\tau\notin\mathcal T_i\cup\{\alpha_i\}).

The two sides come from **independent** computations (comparing float margins with quantities derived from
the same margins would hold by construction). Left side: the softmax at $W=R\,W^{mm}_\alpha/\|W^{mm}_\alpha\|_F$
with the *exact-rational* $W^{mm}_\alpha$ of :func:`attsvm.svm.certify_fro` (a fresh certificate, proved
optimal in exact arithmetic), evaluated in mpmath straight from the data, in the log domain:
$\log(1-s_{i\alpha_i})=\log\sum_{t\ne\alpha_i}e^{a_{it}}-\log\sum_te^{a_{it}}$ and
$\log(s_{it}/s_{i\alpha_i})=a_{it}-a_{i\alpha_i}$. Right side: $\rho=1/\|W\|_F$, the SVM-neighbours
$\mathcal T_i$ (``sol.support``) and $\delta_\alpha$ (``sol.delta``) of the fast float64 solver
(:func:`attsvm.svm.solve_fro`), whose margins are exact to ``tol('active')``; so each statement is checked with
that relative allowance on the exponent $R\rho$. A wrong $W^{mm}_\alpha$, support set or $\delta_\alpha$ from the
solver breaks the equality on $\mathcal T_i$ or one of the bounds. Margin: the smallest slack, in units of
$R\rho\cdot$``tol('active')``. No exact certificate (or its $W$ omitted as too large): inconclusive.

**Finding.** As written in THEORY the third bound is false for an input $i$ with $\mathcal T_i=\emptyset$
(all its margins exceed 1, but $\delta_\alpha$ takes no pair from it): a confirmed counterexample has $n=2$,
input 0 without SVM-neighbours. Hypothesis ``delta_scope="neighbours"`` (default) checks the bound for inputs
with $\mathcal T_i\ne\emptyset$; ``delta_scope="all"`` is the literal statement (refuted).
Confirmation: both sides exact — the exact-rational $W^{mm}_\alpha$, active set and $\delta_\alpha$ of
:func:`attsvm.svm.certify_fro`, evaluated at 50 digits with no allowance (a float failure caused by the solver's
right side alone is then reported as numerical, not as a counterexample).
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


@claim(
    id="softmax-decay",
    title="Along W^mm_alpha the softmax decays like exp(-R rho) (support) and exp(-R rho (1+2 delta)) (others)",
    origin="derived",
    source="THEORY §3 (softmax-decay)",
    hypotheses={"data": "feasible", "alpha": "random", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"delta_scope": "neighbours"},
    notes=(
        "THEORY states the third bound for every input; it is false for an input without SVM-neighbours "
        "(T_i empty: delta takes no pair from it). delta_scope='neighbours' (default) restricts it to inputs with "
        "T_i nonempty; delta_scope='all' is THEORY's literal text and is refuted with a confirmed counterexample."
    ),
)
def softmax_decay(case):
    """Three log-domain statements: exact softmax at R W^mm/||W^mm|| (left) vs the fast solver's rho, T_i, delta."""
    import mpmath

    from attsvm import highprec as hp
    from attsvm import svm

    ds = case.data
    alpha = [int(x) for x in ds.selection]
    sol = svm.solve_fro(ds)
    if sol.status != "optimal":
        return Outcome(ok=True, margin=0.0, inconclusive=f"Att-SVM(alpha) {sol.status}: hypothesis not met")
    R = case.draw_float(0.5, 60.0)
    cert = svm.certify_fro(ds)  # a fresh exact certificate, not built from `sol`
    if not cert.get("verified") or cert.get("W") is None:
        return Outcome(ok=True, margin=0.0, inconclusive="no exact Att-SVM certificate (left side not computable)")
    # right side: the fast solver's quantities
    rho = 1.0 / float(np.linalg.norm(np.asarray(sol.W)))
    Rr = R * rho
    support = {(int(i), int(t)) for i, t in sol.support}
    delta = sol.delta
    tl = tol("active")
    # left side: exact W^mm, softmax in mpmath from the data
    D = hp.data(ds)
    n, T = D.N, D.T
    neighbours_only = case.hypotheses.get("delta_scope", "neighbours") == "neighbours"
    one_minus, supp, rest = [], [], []
    with mpmath.workdps(hp.DPS):
        Wex = hp.rationals(cert["W"])
        scale = mpmath.mpf(R) / hp.frob(Wex)
        a = hp.logits(D.X, [[scale * x for x in r] for r in Wex], D.Z)
        for i in range(n):
            if T > 1:
                one_minus.append(mpmath.log(T - 1) - Rr - hp.log_one_minus_softmax(a[i], alpha[i]))
            has_nb = any((i, t) in support for t in range(T))
            for t in range(T):
                if t == alpha[i]:
                    continue
                lr = a[i][t] - a[i][alpha[i]]
                if (i, t) in support:
                    supp.append(abs(lr + Rr))
                elif delta is not None and (has_nb or not neighbours_only):
                    rest.append(-Rr * (1 + 2 * delta) - lr)
    sl = {}
    if one_minus:
        sl["one_minus_s"] = 1.0 + float(min(one_minus)) / (Rr * tl)
    if supp:
        sl["support_ratio"] = 1.0 - float(max(supp)) / (Rr * tl)
    if rest:
        sl["non_support_ratio"] = 1.0 + float(min(rest)) / (Rr * tl)
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"slacks": sl, "worst": worst, "R": R, "rho": rho, "delta": None if delta is None else float(delta)}
    detail["rho_exact"] = float(1 / hp.frob(Wex))
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@softmax_decay.confirm
def _confirm(case, outcome):
    """Exact W^mm_alpha (rational certificate), exact support set and delta; 50-digit logits."""
    import mpmath

    from attsvm import highprec as hp
    from attsvm import svm

    ds = case.data
    cert = svm.certify_fro(ds)
    if not cert.get("verified"):
        return Outcome(ok=True, inconclusive="no exact Att-SVM certificate (cannot confirm)")
    alpha = [int(x) for x in ds.selection]
    scope_all = case.hypotheses.get("delta_scope", "neighbours") == "all"
    D = hp.data(ds)
    with mpmath.workdps(hp.DPS):
        Wex = hp.rationals(cert["W"])
        rho = 1 / hp.frob(Wex)
        Rr = mpmath.mpf(outcome.detail["R"]) * rho
        W = [[Rr * x for x in r] for r in Wex]
        a = hp.logits(D.X, W, D.Z)
        m = hp.logits(D.X, Wex, D.Z)
        margins = {(i, t): m[i][alpha[i]] - m[i][t] for i in range(D.N) for t in range(D.T) if t != alpha[i]}
        eps = mpmath.mpf(10) ** (-30)
        supp = {k for k, v in margins.items() if abs(v - 1) <= eps}
        pairs = [(m[i][t] - m[i][u]) / 2 for (i, t) in supp for u in range(D.T) if u != alpha[i] and (i, u) not in supp]
        delta = min(pairs) if pairs else None
        ok = all(v >= 1 - eps for v in margins.values())
        for i in range(D.N):
            if D.T > 1:
                ok = ok and hp.log_one_minus_softmax(a[i], alpha[i]) <= mpmath.log(D.T - 1) - Rr + eps
            for t in range(D.T):
                if t == alpha[i]:
                    continue
                lr = a[i][t] - a[i][alpha[i]]
                if (i, t) in supp:
                    ok = ok and abs(lr + Rr) <= eps * (1 + Rr)
                elif delta is not None and (scope_all or any((i, u) in supp for u in range(D.T))):
                    ok = ok and lr <= -Rr * (1 + 2 * delta) + eps * (1 + Rr)
    detail = {"exact_support": sorted([list(k) for k in supp]), "delta_exact": None if delta is None else float(delta)}
    detail["float64"] = outcome.detail
    return Outcome(ok=bool(ok), margin=1.0 if ok else -1.0, detail=detail)
