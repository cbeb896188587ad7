r"""``smoothness-bound`` (THEORY §3, reconstructed).

.. math::
    \|\nabla^2\mathcal L(W)\|_2\le L_W=\frac1n\sum_i\big(M_0\|v\|^2\|z_i\|^2\|X_i\|^4+3M_1\|v\|\|z_i\|^2\|X_i\|^3\big),

$\|X_i\|$ spectral; logistic $M_0=\frac14$, $M_1=1$. Written once with ``case.kit``: the Hessian
($d^2\times d^2$, ``kit.hessian_W``) is torch autograd of the loss written from its definition, in float64, at a
random $W$; its spectral norm is the largest $|\lambda|$; $L_W$ is ``kit.smoothness``. Margin:
$(L_W-\|\nabla^2\mathcal L\|_2)/L_W$. The automatic confirmation re-runs it with a 50-digit central-difference
Hessian of the 50-digit gradient (:func:`attsvm.highprec.hessian_W`) and a 50-digit $L_W$. The constant is our
reconstruction: a confirmed failure is a real finding about it.
"""

from __future__ import annotations

from attsvm.claims import Outcome, claim


@claim(
    id="smoothness-bound",
    title="The Hessian of the loss is bounded by the smoothness constant L_W",
    origin="reconstructed",
    source="THEORY §3 (smoothness-bound); Tarzanagh et al. 2308.16898, smoothness lemma",
    hypotheses={"data": "paper", "n": (1, 4), "T": (2, 5), "d": (2, 4)},
    params={"loss": "logistic"},
)
def smoothness_bound(case):
    """||Hess L(W)||_2 <= L_W at a random W."""
    k = case.kit
    ds, loss = case.data, case.hypotheses.get("loss", "logistic")
    W = case.draw_matrix(ds.d, ds.d, scale=3.0)
    eig = k.eigvalsh(k.hessian_W(ds, W, loss))
    hn = max(abs(eig[0]), abs(eig[-1]))
    LW = k.smoothness(ds, loss)
    margin = (LW - hn) / LW
    detail = {"hessian_norm": hn, "L_W": LW, "ratio": hn / LW, "W": W.tolist()}
    return Outcome(ok=bool(margin >= 0), margin=margin, detail=detail)
