r"""``no-stationary-equal-scores`` (THEORY §3, reconstructed; a region statement, THEORY §8).

Under Assumption B (all non-optimal scores of input $i$ bit-equal, gap $\Delta_i>0$), for **every** $W$ with
$W$ of the region ``hypotheses["region"]`` (default ``box:-3,3``: every entry in $[-3,3]$; ``attsvm prove
--region ball:3`` proves it on a Frobenius ball):

.. math::
    \langle\nabla\mathcal L(W),W^{mm}\rangle
    \le\mathrm{RHS}(W)=\frac{m}{n}\sum_i\ell'_i\,\Delta_i\,s_{i,\mathrm{opt}_i}(1-s_{i,\mathrm{opt}_i})<0,

$m=\min_{i,t\ne\mathrm{opt}_i}(x_{i,\mathrm{opt}_i}-x_{it})^\top W^{mm}z_i$ the smallest margin of the $W^{mm}$ in
use ($m=1$ for the exact one). Proof (THEORY §3): only the pairs $(\mathrm{opt},t)$ survive in
$\mathrm{Cov}_s(\gamma,h)=\sum_{t<\tau}s_ts_\tau(\gamma_t-\gamma_\tau)(h_t-h_\tau)$, each with
$h_{\mathrm{opt}}-h_t\ge m$, so $\mathrm{RHS}-\mathrm{LHS}=\frac1n\sum_i(-\ell'_i)\Delta_is_{i,\mathrm{opt}}
\sum_{t\ne\mathrm{opt}}s_{it}(h_{i,\mathrm{opt}}-h_{it}-m)\ge0$, strictly $>0$ at every finite $W$ as soon as one token
is not a support token.

Written once with the kit, so that ``attsvm prove`` runs it in balls with jets on boxes: the left side is
$\sum\nabla\mathcal L(W)\circ W^{mm}$ with ``k.grad_W`` (not the covariance form of the proof), $1-s_{\mathrm{opt}}$
comes from the log domain ($\log\sum_{t\ne\mathrm{opt}}e^{a_t}-\log\sum_te^{a_t}$, never a difference of
probabilities). Margin: $\min(\mathrm{RHS}-\mathrm{LHS}+\epsilon,\ -\mathrm{RHS})$, both parts must be $>0$ (the
absolute difference: the relative $(\mathrm{RHS}-\mathrm{LHS})/|\mathrm{RHS}|$ and $\mathrm{LHS}/\mathrm{RHS}-1$ took
10× more boxes on ``examples/prove/eq_n1.npz``). The rounding allowance $\epsilon=$ ``tol('grad_rtol')``
$\cdot(|\mathrm{RHS}|+\sum|\nabla\mathcal L\circ W^{mm}|)$ is for the float64 search only (data with every token a
support token, where $\mathrm{LHS}\equiv\mathrm{RHS}$); in balls (the prover, the confirmation) $\epsilon=0$ and the
statement proved is the exact inequality, for the exact $W^{mm}$ ($m=1$). Such data leave the bound no slack, and a
proof needs some: the example files have a non-support token far from the support one.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim


def covariance_bound_margin(case):
    r"""$(\mathrm{margin}, \mathrm{detail})$ of the §3 covariance bound at $W$ = ``case.param()`` (module
    docstring), or an inconclusive :class:`Outcome` when the hypotheses fail on this data set (decided before
    $W$ is drawn: there is then no region statement to prove)."""
    k = case.kit
    ds, loss = case.data, case.hypotheses["loss"]
    D = k.data(ds)
    n, T = D.N, D.T
    opt = np.asarray(D.opt)
    mm = k.wmm(D, opt)
    if mm.status != "optimal":
        return Outcome(ok=True, inconclusive=f"Att-SVM(opt) {mm.status}: hypothesis not met")
    g = D.gamma
    rows = np.arange(n)
    others = np.array([[t for t in range(T) if t != opt[i]] for i in range(n)])
    if k.ball:
        with k.context():
            equal = all(bool(g[i, t] == g[i, others[i, 0]]) for i in range(n) for t in others[i])
    else:
        equal = all(g[i, t] == g[i, others[i, 0]] for i in range(n) for t in others[i])
    if not equal:
        return Outcome(ok=True, inconclusive="Assumption B fails: non-optimal scores not bit-equal")
    mmin = k.min(k.margins(D, mm.W, opt))
    Delta = g[rows, opt] - g[rows, others[:, 0]]
    W = case.param()
    a = k.logits(D, W)
    lse = k.logsumexp(a, axis=-1)
    log_so = a[rows, opt] - lse
    log_1mso = k.logsumexp(a[rows[:, None], others], axis=-1) - lse
    _, _, u = k.outputs(D, W)
    lp = k.loss_derivative(u, loss)
    rhs = mmin * np.sum(lp * Delta * k.exp(log_so + log_1mso)) / n
    prod = k.grad_W(D, W, loss) * mm.W
    lhs = np.sum(prod)
    allow = 0 if k.ball else k.tol("grad_rtol") * (abs(rhs) + np.sum(np.abs(prod)))
    margin = k.min(np.array([rhs - lhs + allow, -rhs], dtype=object))
    return margin, {"lhs": k.to_float(lhs), "rhs": k.to_float(rhs), "m_min": k.to_float(mmin)}


@claim(
    id="no-stationary-equal-scores",
    title="Under Assumption B, <grad L(W), W^mm> <= (m/n) sum l'_i Delta_i s_opt (1 - s_opt) < 0 for every W",
    origin="reconstructed",
    source="THEORY §3 (no-stationary-equal-scores); Tarzanagh et al. 2308.16898, global convergence lemma",
    hypotheses={"data": "equal_scores", "n": (1, 4), "T": (2, 5), "d": (2, 4), "region": "box:-3,3"},
    params={"loss": "logistic"},
)
def no_stationary_equal_scores(case):
    """The covariance bound along W^mm for every W of the region (W = case.param())."""
    out = covariance_bound_margin(case)
    if isinstance(out, Outcome):
        return out
    margin, detail = out
    return Outcome(ok=bool(margin > 0), margin=margin, detail=detail)
