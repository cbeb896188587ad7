r"""``cone-invariance`` (THEORY "Region statements"; reconstructed: the forward-invariance step of the local
convergence proof).

For a locally optimal $\alpha$ (the data set's selection) and the cone of ``cone-descent``
($\mathcal C_{\mu,R}(W^{mm}_\alpha)\cap\{\|W\|_F\le R_1\}$, $\mu=\min(\mathrm{MU},\mu_\alpha^{\downarrow})$ from
``hypotheses["region"]`` $=$ ``cone:MU,R,R1``, $\mu_\alpha=\frac18(\min(\frac12,\delta_\alpha)/A)^2$ rounded down to
three significant bits; see ``proofs/claims/cone_descent.py``), one normalised GD step

.. math::
    W^+=W-\eta\,\nabla\mathcal L(W)/\|\nabla\mathcal L(W)\|_F

maps the cone set into $\mathcal C_{\mu',R}(W^{mm}_\alpha)$ for every $W$ of it, with

.. math::
    \mu'=\mu+\theta\,(\mu_{\mathrm{geo}}-\mu),\qquad
    \mu_{\mathrm{geo}}=1-\cos\bigl(\arccos(1-\mu)+\arcsin(\eta/R)\bigr).

$\mu_{\mathrm{geo}}$ is the worst case over *all* unit steps (a step of length $\eta$ from a point at angle
$\varphi=\arccos(1-\mu)$ from the axis and norm $\ge R$ ends at angle $\le\varphi+\arcsin(\eta/R)$), so $\theta=1$ holds
for any gradient and $\theta<1$ is the content: the step turns away from the axis by at most the fraction $\theta$
of the worst case, because $-\nabla\mathcal L$ points into the cone ($\theta=0$: exact invariance, $\mu'=\mu$). Margin:

.. math::
    \min\Bigl(\frac{\mathrm{corr}(W^+,W^{mm}_\alpha)-(1-\mu')}{\mu_{\mathrm{geo}}-\mu},\ \|W^+\|_F-R\Bigr)>0

(both parts $>0$), written with the kit (``k.grad_W``, ``k.norm``, ``k.corr``, ``k.sqrt``, ``k.min``) so that
``attsvm prove`` proves it on boxes; $\mu_{\mathrm{geo}}$ by $\cos(\varphi+\psi)=\cos\varphi\cos\psi-\sin\varphi
\sin\psi$ with square roots. Params: $\eta=$ ``eta`` (0.1, the float64 number, as the paper's normalised GD) and
$\theta=$ ``theta`` (1/2). Default region ``cone:1/65536,8,9`` ($\mu=\min(2^{-16},\mu_\alpha^{\downarrow})$, a
shell $8\le\|W\|_F\le9$): the statement needs $R$ large — at $R=4$ the search of the ``locally_optimal`` data refutes
$\theta=\frac12$ (the gradient at the cone's boundary can point outwards), and at $R=8$ it refutes $\theta=0$.
The premises are checked as in ``cone-descent`` (in balls: proved).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from attsvm.claims import Outcome, claim
from attsvm.prove.local_cone import lemma_cone


@claim(
    id="cone-invariance",
    title="one normalised GD step maps the cone C_{mu,R}(W^mm_alpha) (|W| <= R1) into C_{mu',R}(W^mm_alpha)",
    origin="reconstructed",
    source="THEORY §8 Region statements (cone-invariance); 2308.16898, local convergence (forward invariance)",
    hypotheses={"data": "locally_optimal", "n": (1, 3), "T": (3, 4), "d": (2, 3), "region": "cone:1/65536,8,9"},
    params={"loss": "logistic", "eta": 0.1, "theta": 0.5},
    depends=("cone-descent",),
    examples=20,
)
def cone_invariance(case):
    """W+ = W - eta grad/|grad| lies in the cone of mu' = mu + theta (mu_geo - mu), outside the ball of radius R."""
    setup = lemma_cone(case)
    if isinstance(setup, Outcome):
        return setup
    D, Wa, cone, info = setup
    k, h = case.kit, case.hypotheses
    W = case.param(cone, direction=info.pop("axis"))
    G = k.grad_W(D, W, h["loss"])
    Wp = W - k.scalar(h["eta"]) * G / k.norm(G)
    mu, R, eta = k.scalar(Fraction(info["mu"])), k.scalar(Fraction(info["R"])), k.scalar(h["eta"])
    c, sn = 1 - mu, k.sqrt(mu * (2 - mu))  # cos and sin of the cone's half-angle
    mu_geo = 1 - (c * k.sqrt(1 - eta * eta / (R * R)) - sn * eta / R)  # 1 - cos(phi + arcsin(eta/R))
    mu_out = mu + k.scalar(h["theta"]) * (mu_geo - mu)
    turn = (k.corr(Wp, Wa) - (1 - mu_out)) / (mu_geo - mu)
    m = k.min(np.array([turn, k.norm(Wp) - R], dtype=object))
    return Outcome(
        ok=bool(m > 0), margin=m, detail={**info, "mu_out": k.to_float(mu_out), "mu_geo": k.to_float(mu_geo)}
    )
