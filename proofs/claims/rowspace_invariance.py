r"""``rowspace-invariance`` (THEORY §3, derived).

Every gradient is $\nabla\mathcal L(W)=\sum_iu_iz_i^\top$ with $u_i=\frac1n\ell'_iX_i^\top r_i$, so its rows lie in
$\mathrm{span}\{z_i\}$ and gradient descent keeps

.. math:: (W_k-W_0)(I-P_Z)=0\qquad\text{for every }k.

The check runs plain GD with the batched engine (:func:`attsvm.gd.run`, $\eta=1/L_W$, a few hundred steps
scaled by the budget) from four random $W_0$ at once (one batch) with a component outside the row space, and measures
$\|(W_k-W_0)(I-P_Z)\|_F/\|W_k-W_0\|_F$ against ``tol('rowspace')`` ($P_Z$ from an SVD of $Z$, rank cut at
rounding level). Margin: $1-\text{ratio}/\text{tol}$. Confirmation: the same trajectory at 50 digits
(:func:`attsvm.highprec.replay`) with a 50-digit $P_Z$.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.data import Dataset
from attsvm.tolerances import tol

STEPS = 150
INITS = 4  # initial points per case, run as one batch


def _complement(Z):
    U, S, Vt = np.linalg.svd(Z)
    # exact span: cut only at rounding level (tiny but genuine directions of Z must stay in)
    r = int(np.sum(S > max(Z.shape) * np.finfo(float).eps * S.max())) if S.size and S.max() > 0 else 0
    V = Vt[:r].T
    return np.eye(Z.shape[1]) - V @ V.T


@claim(
    id="rowspace-invariance",
    title="Gradient descent never leaves W_0 + span of the queries (row space)",
    origin="derived",
    source="THEORY §3 (rowspace-invariance)",
    hypotheses={"data": "paper", "n": (1, 3), "T": (2, 4), "d": (3, 6)},
    params={"loss": "logistic"},
)
def rowspace_invariance(case):
    """GD from a random W_0: ||(W_k - W_0)(I - P_Z)|| <= tol ||W_k - W_0||."""
    from attsvm import gd, model

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W0 = np.stack([case.draw_matrix(ds.d, ds.d, scale=2.0) for _ in range(INITS)])
    steps = case.scaled(STEPS, minimum=20)
    lr = float(1.0 / model.smoothness_constant(ds, loss))
    batch = Dataset.stack([ds] * INITS)
    res = gd.run(batch, param="W", algo="gd", lr=lr, steps=steps, init=W0, loss=loss, device=case.device)
    dW = np.asarray(res.W) - W0
    nd = np.linalg.norm(dW, axis=(-2, -1))
    if np.any(nd == 0.0):
        return Outcome(ok=True, inconclusive="GD did not move (gradient underflow at W_0)")
    ratios = np.linalg.norm(dW @ _complement(ds.Z), axis=(-2, -1)) / nd
    b = int(np.argmax(ratios))
    margin = 1.0 - float(ratios[b]) / tol("rowspace")
    detail = {"ratio": float(ratios[b]), "steps": int(np.asarray(res.steps)[b]), "lr": lr, "W0": W0[b].tolist()}
    return Outcome(ok=margin >= 0, margin=float(margin), detail=detail)


@rowspace_invariance.confirm
def _confirm(case, outcome):
    """The same GD trajectory at 50 digits; the row-space leak must vanish to ~1e-30."""
    import mpmath

    from attsvm import highprec as hp

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W0 = np.array(outcome.detail["W0"])
    with mpmath.workdps(hp.DPS):
        run = hp.replay(ds, W0, param="W", algo="gd", lr=outcome.detail["lr"], steps=outcome.detail["steps"], loss=loss)
        Wk = run.final["W"]
        W0m = hp.as_mp(W0)
        dW = [[a - b for a, b in zip(r, s)] for r, s in zip(Wk, W0m)]
        P = hp.projector(ds.Z)
        Q = [[(1 if j == k else 0) - P[j][k] for k in range(ds.d)] for j in range(ds.d)]
        ratio = hp.frob(hp.matmul(dW, Q)) / hp.frob(dW)
        floor = mpmath.mpf(10) ** (-30)  # what a 50-digit replay leaves of an exactly zero leak
        margin = 1 - ratio / floor
    detail = {"ratio_50": float(ratio), "float64": {k: v for k, v in outcome.detail.items() if k != "W0"}}
    return Outcome(ok=bool(margin >= 0), margin=float(margin), detail=detail)
