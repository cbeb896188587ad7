r"""``softmax-decay`` (THEORY §3, derived).

For $W=R\,W^{mm}_\alpha/\|W^{mm}_\alpha\|_F$ and $\rho=1/\|W^{mm}_\alpha\|_F$:

.. math::
    1-s_{i\alpha_i}\le(T-1)e^{-R\rho},\qquad \frac{s_{it}}{s_{i\alpha_i}}=e^{-R\rho}\ (t\in\mathcal T_i),\qquad
    \frac{s_{i\tau}}{s_{i\alpha_i}}\le e^{-R\rho(1+2\delta_\alpha)}\ (\tau\notin\mathcal T_i\cup\{\alpha_i\}).

Everything in the log domain: $\log(1-s_{i\alpha_i})=\log\sum_{t\ne\alpha_i}e^{a_{it}}-\log\sum_te^{a_{it}}$ and
$\log(s_{it}/s_{i\alpha_i})=a_{it}-a_{i\alpha_i}$. $W^{mm}_\alpha$, $\mathcal T_i$ and $\delta_\alpha$ come from the
float64 solver (:func:`attsvm.svm.solve_fro`, :func:`attsvm.svm.neighbour_gap`), whose margins are exact to
``tol('active')``; so each statement is checked with that relative allowance on the exponent $R\rho$. Margin:
the smallest slack, in units of $R\rho\cdot$``tol('active')``. **Finding.** As written in THEORY the third bound is
false for an input $i$ with $\mathcal T_i=\emptyset$
(all its margins exceed 1, but $\delta_\alpha$ takes no pair from it): a confirmed counterexample has $n=2$,
input 0 without SVM-neighbours. Hypothesis ``delta_scope="neighbours"`` (default) checks the bound for inputs
with $\mathcal T_i\ne\emptyset$; ``delta_scope="all"`` is the literal statement (refuted).
Confirmation: the exact-rational $W^{mm}_\alpha$ and active set of
:func:`attsvm.svm.certify_fro`, evaluated at 50 digits with no allowance.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.tolerances import tol


def _lse(a, axis=-1):
    m = np.max(a, axis=axis, keepdims=True)
    return (m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)))[..., 0]


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
    """Three log-domain statements at W = R W^mm_alpha / ||W^mm_alpha||."""
    from attsvm import model, svm

    ds = case.data
    alpha = ds.selection
    sol = svm.solve_fro(ds)
    if sol.status != "optimal":
        return Outcome(ok=True, inconclusive=f"Att-SVM(alpha) {sol.status}: hypothesis not met")
    Wmm = np.asarray(sol.W)
    rho = 1.0 / np.linalg.norm(Wmm)
    R = case.draw_float(0.5, 60.0)
    Rr = R * rho
    a = model.logits(ds.X, R * rho * Wmm, ds.Z)
    n, T = a.shape
    aa = a[np.arange(n), alpha]
    others = np.ones((n, T), dtype=bool)
    others[np.arange(n), alpha] = False
    support = np.zeros((n, T), dtype=bool)
    for i, t in sol.support:
        support[i, t] = True
    delta = svm.neighbour_gap(ds)
    tl = tol("active")
    sl = {}
    if T > 1:
        log1m = _lse(np.where(others, a, -np.inf)) - _lse(a)
        sl["one_minus_s"] = 1.0 + float(np.min((np.log(T - 1) - Rr - log1m) / Rr)) / tl
    lr = a - aa[:, None]
    if support.any():
        sl["support_ratio"] = 1.0 - float(np.max(np.abs(lr[support] + Rr) / Rr)) / tl
    rest = others & ~support
    if case.hypotheses.get("delta_scope", "neighbours") == "neighbours":
        rest &= support.any(axis=1, keepdims=True)
    if rest.any() and delta is not None and np.isfinite(delta):
        sl["non_support_ratio"] = 1.0 + float(np.min((-Rr * (1 + 2 * delta) - lr[rest]) / Rr)) / tl
    worst = min(sl, key=sl.get)
    margin = float(sl[worst])
    detail = {"slacks": sl, "worst": worst, "R": R, "rho": float(rho), "delta": None if delta is None else float(delta)}
    return Outcome(ok=margin >= 0, margin=margin, detail=detail)


@softmax_decay.confirm
def _confirm(case, outcome):
    """Exact W^mm_alpha (rational certificate), exact support set and delta; 50-digit logits."""
    import mpmath

    from attsvm import svm
    from attsvm.claims import highprec as hp

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
