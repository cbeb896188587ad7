r"""``rowspace-invariance`` (THEORY §3, derived).

Every gradient is $\nabla\mathcal L(W)=\sum_iu_iz_i^\top$ with $u_i=\frac1n\ell'_iX_i^\top r_i$, so its rows lie in
$\mathrm{span}\{z_i\}$ and gradient descent keeps

.. math:: (W_k-W_0)(I-P_Z)=0\qquad\text{for every }k.

Written once with ``case.kit``: plain GD (``kit.gd``: the engine :func:`attsvm.gd.run`, $\eta=1/L_W$, a few
hundred steps scaled by the budget) from four random $W_0$ with a component outside the row space, measuring
$\|(W_k-W_0)(I-P_Z)\|_F/\|W_k-W_0\|_F$ against ``kit.tol('rowspace')`` ($P_Z$ from an SVD of $Z$, rank cut at
rounding level). Margin: $1-\text{ratio}/\text{tol}$. The automatic confirmation re-runs it with the same
trajectories at 50 digits (:func:`attsvm.highprec.replay`), a 50-digit $P_Z$ and the allowance $10^{-30}$.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim

STEPS = 150
INITS = 4  # initial points per case


@claim(
    id="rowspace-invariance",
    title="Gradient descent never leaves W_0 + span of the queries (row space)",
    origin="derived",
    source="THEORY §3 (rowspace-invariance)",
    hypotheses={"data": "paper", "n": (1, 3), "T": (2, 4), "d": (3, 6)},
    params={"loss": "logistic"},
)
def rowspace_invariance(case):
    """GD from random W_0: ||(W_k - W_0)(I - P_Z)|| <= tol ||W_k - W_0||."""
    k = case.kit
    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W0 = np.stack([case.draw_matrix(ds.d, ds.d, scale=2.0) for _ in range(INITS)])
    steps = case.scaled(STEPS, minimum=20)
    lr = float(1.0 / k.smoothness(ds, loss))
    Qc = k.eye(ds.d) - k.projector(ds.Z)
    run = k.gd(ds, algo="gd", lr=lr, steps=steps, loss=loss, W0=W0)  # the four starts as one batch
    dW = run.W - k.array(W0)
    nd = [k.norm(x) for x in dW]
    if any(x == 0 for x in nd):
        return Outcome(ok=True, inconclusive="GD did not move (gradient underflow at W_0)")
    ratios = [k.norm(x @ Qc) / y for x, y in zip(dW, nd)]
    b = max(range(INITS), key=lambda j: ratios[j])
    ratio, taken = ratios[b], run.steps
    margin = 1 - ratio / k.tol("rowspace")
    detail = {"ratio": ratio, "steps": taken, "lr": lr, "W0": W0[b].tolist()}
    return Outcome(ok=bool(margin >= 0), margin=margin, detail=detail)
