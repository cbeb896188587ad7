r"""``smoothness-bound`` (THEORY §3, reconstructed).

.. math::
    \|\nabla^2\mathcal L(W)\|_2\le L_W=\frac1n\sum_i\big(M_0\|v\|^2\|z_i\|^2\|X_i\|^4+3M_1\|v\|\|z_i\|^2\|X_i\|^3\big),

$\|X_i\|$ spectral; logistic $M_0=\frac14$, $M_1=1$. The Hessian ($d^2\times d^2$) is computed by torch
autograd (``torch.func.hessian``) of the loss written from its definition, in float64, at a random $W$; its
spectral norm is the largest $|\lambda|$. $L_W$ is :func:`attsvm.model.smoothness_constant`. Margin:
$(L_W-\|\nabla^2\mathcal L\|_2)/L_W$. Confirmation: a 50-digit central-difference Hessian of the 50-digit
gradient (:func:`attsvm.highprec.hessian_W`) and a 50-digit $L_W$. The constant is our
reconstruction: a confirmed failure is a real finding about it.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim


def _hessian_norm(ds, W, loss):
    import torch

    f = ds.flat()
    X, Z, v, Y = (torch.tensor(np.array(a), dtype=torch.float64) for a in (f.X, f.Z, f.v, f.Y))
    mask = None if f.mask is None else torch.tensor(np.array(f.mask))
    d = W.shape[0]

    def L(w):
        a = torch.einsum("ntd,de,ne->nt", X, w.reshape(d, d), Z)
        if mask is not None:
            a = a.masked_fill(~mask, float("-inf"))
        u = (torch.softmax(a, -1) * (Y[:, None] * (X @ v))).sum(-1)
        if loss == "logistic":
            return torch.nn.functional.softplus(-u).mean()
        if loss == "exponential":
            return torch.exp(-u).mean()
        return (-u).mean()

    H = torch.func.hessian(L)(torch.tensor(W.reshape(-1))).numpy()
    return float(np.max(np.abs(np.linalg.eigvalsh((H + H.T) / 2))))


@claim(
    id="smoothness-bound",
    title="The Hessian of the loss is bounded by the smoothness constant L_W",
    origin="reconstructed",
    source="THEORY §3 (smoothness-bound); Tarzanagh et al. 2308.16898, smoothness lemma",
    hypotheses={"data": "paper", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"loss": "logistic"},
)
def smoothness_bound(case):
    """||Hess L(W)||_2 <= L_W at a random W (autograd Hessian, float64)."""
    from attsvm import model

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    hn = _hessian_norm(ds, W, loss)
    LW = float(model.smoothness_constant(ds, loss))
    margin = (LW - hn) / LW
    detail = {"hessian_norm": hn, "L_W": LW, "ratio": hn / LW, "W": W.tolist()}
    return Outcome(ok=margin >= 0, margin=float(margin), detail=detail)


@smoothness_bound.confirm
def _confirm(case, outcome):
    """50-digit finite-difference Hessian and 50-digit L_W."""
    import mpmath

    from attsvm import highprec as hp
    from attsvm import model

    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W = np.array(outcome.detail["W"])
    D = hp.data(ds)
    M0, M1 = model.loss_constants(loss, float(np.max(np.abs(ds.scores))))
    with mpmath.workdps(hp.DPS):
        hn = hp.sym_spectral_norm(hp.hessian_W(D, W, loss))
        LW = hp.smoothness_constant(D, M0, M1)
        margin = (LW - hn) / LW
    detail = {"hessian_norm_50": mpmath.nstr(hn, 30), "L_W_50": mpmath.nstr(LW, 30), "float64": outcome.detail}
    return Outcome(ok=bool(margin >= 0), margin=float(margin), detail=detail)
