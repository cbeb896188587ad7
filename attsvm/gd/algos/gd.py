r"""``gd``: plain gradient descent, $\theta_{k+1}=\theta_k-\eta_k\,(\nabla\mathcal L(\theta_k)+2\lambda\theta_k)$
per factor, with the float gradient itself (it underflows where float64 does: the ``underflow`` stop).

Stops ``underflow`` when the update is lost in floating point for every factor, $\theta_k-\eta_k\nabla\mathcal
L(\theta_k)=\theta_k$ bit for bit (the gradient, or $\eta_k$ times it, underflows to zero or below half an ulp of
$\theta_k$): a fixed point of the float iteration. No a-priori step bound (the range check bounds $\|\theta_0\|$).
"""

from __future__ import annotations

from typing import Any

from ..algorithm import Algorithm
from ..init import PARAMS


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, None, Any]:
    """The plain update (:func:`~attsvm.gd.steps.plain_update`) and the "update lost" flag."""
    from .. import steps

    G, _M, E = steps.scaled_gradients(P, th, fw, log_domain=False)
    upd = steps.plain_update(G, E, th, lr, S.ridge)
    moved = {k_: th[k_] - upd[k_] for k_ in G}
    return moved, None, steps.lost(moved, th)


ALGORITHM = Algorithm(
    name="gd",
    title="gradient descent",
    equation="W_k+1 = W_k - lr_k grad L(W_k) (plain float gradient)",
    replay="attsvm.highprec.gd:gd_step",
    step=step,
    step_bound=lambda shape, S, steps: None,
    log_domain=False,
    params=PARAMS,
    stops="the update is lost in floating point for every factor (a fixed point of the float iteration)",
)
