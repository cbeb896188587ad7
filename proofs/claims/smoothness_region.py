r"""``smoothness-bound-region`` (the region form of ``smoothness-bound``, THEORY §3, reconstructed).

For every $W$ with $\|W\|_F\le R$ (``hypotheses["region"]``, default ``ball:1``):

.. math::
    \|\nabla^2\mathcal L(W)\|_F\le L_W=\frac1n\sum_i\big(M_0\|v\|^2\|z_i\|^2\|X_i\|^4+3M_1\|v\|\|z_i\|^2\|X_i\|^3\big),

$\|X_i\|$ spectral; logistic $M_0=\frac14$, $M_1=1$. The Frobenius norm bounds the spectral one
($\|H\|_2\le\|H\|_F$), so this implies ``smoothness-bound``'s $\|\nabla^2\mathcal L(W)\|_2\le L_W$ on the ball; it is
the one-parameter statement the prover can take (the spectral norm needs an eigendecomposition, which does not take
jets). Written once with the kit: the Hessian ``k.hessian_W`` ($d^2\times d^2$: torch autograd of the loss in
float64, the analytic form in balls, jets on boxes), $L_W$ ``k.smoothness`` (a constant of the data; its spectral
norms enclosed in balls). Margin: $1-\|\nabla^2\mathcal L(W)\|_F^2/L_W^2$ (no square root), which must be $>0$.
"""

from __future__ import annotations

import numpy as np

from attsvm.claims import Outcome, claim


@claim(
    id="smoothness-bound-region",
    title="||Hess L(W)||_F <= L_W for every W of a Frobenius ball",
    origin="reconstructed",
    source="THEORY §3 (smoothness-bound), region form (THEORY §8 Region statements)",
    hypotheses={"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3), "region": "ball:1"},
    params={"loss": "logistic"},
    depends=("smoothness-bound",),
    examples=15,
)
def smoothness_region(case):
    """The Frobenius norm of the Hessian below L_W at every W of the ball (W = case.param())."""
    k = case.kit
    ds, loss = case.data, case.hypotheses["loss"]
    D = k.data(ds)
    W = case.param()
    H = k.hessian_W(D, W, loss)
    LW = k.smoothness(D, loss)
    h2 = np.sum(H * H)
    margin = 1 - h2 / (LW * LW)
    return Outcome(ok=bool(margin > 0), margin=margin, detail={"hessian_fro_sq": k.to_float(h2), "L_W": k.to_float(LW)})
