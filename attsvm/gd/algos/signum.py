r"""``signum``: sign descent with momentum (Bernstein et al. 2018, "signSGD with momentum"), per factor

.. math:: m_k=\beta m_{k-1}+(1-\beta)\,g_k,\quad m_{-1}=0,\qquad \theta_{k+1}=\theta_k-\eta_k\,\mathrm{sign}(m_k),

$g_k=\nabla_\theta\mathcal L(\theta_k)+2\lambda\theta_k$, entrywise $\mathrm{sign}(0)=0$; with $\beta=0$ it is
``nsd`` in ``linf``. The steepest-descent geometry is $\ell_\infty$ (the normalised-momentum family of Fan, Schmidt,
Thrampoulidis, arXiv 2502.04664). The average is kept scale-free (:func:`~attsvm.gd.steps.averaged`): the sign
needs only its mantissa, so the step is exact far past gradient underflow. Option ``momentum`` $\beta\in[0,1)$
(default 0.9). Step bound $\sqrt N$ ($\|\mathrm{sign}(m)\|_F\le\sqrt N$, $N$ entries). Stops ``underflow`` when every
factor's gradient and average are exactly zero (a fixed point).
"""

from __future__ import annotations

import math
from typing import Any

from ..algorithm import Algorithm


def initial_state(S: Any, th: dict) -> dict:
    """Per factor the average's mantissa ``m:<k>`` (zeros) and log-scale ``s:<k>`` (B,)."""
    from ..steps import zero_moments

    return zero_moments(th, ("m",))


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, dict, Any]:
    r"""$\theta-\eta_k\,\mathrm{sign}(m_k)$ per factor, the new average, and the fixed-point flag."""
    import torch

    from .. import steps

    G, M, E = steps.scaled_gradients(P, th, fw, log_domain=True)
    m, new_state, zero = steps.averaged(steps.log_scaled(G, M, E, th, S.ridge), state, S.momentum)
    return {k_: th[k_] - steps.bshape(lr, a) * torch.sign(a) for k_, a in m.items()}, new_state, zero


ALGORITHM = Algorithm(
    name="signum",
    title="sign descent with momentum (Signum)",
    equation="m_k = B m_k-1 + (1-B) g_k, W_k+1 = W_k - lr_k sign(m_k)    (B = --momentum)",
    replay="attsvm.highprec.gd:signum_step",
    step=step,
    initial_state=initial_state,
    step_bound=lambda shape, S, steps: math.sqrt(math.prod(shape)),
    options=("momentum",),
    stops="every factor's gradient and average are exactly zero (a fixed point)",
)
