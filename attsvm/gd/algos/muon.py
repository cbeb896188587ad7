r"""``muon``: momentum with an orthogonalised (spectral) step (Jordan et al. 2024, "Muon"; the spectral case of
normalised momentum descent, Fan, Schmidt, Thrampoulidis, arXiv 2502.04664), per factor

.. math:: m_k=\beta m_{k-1}+(1-\beta)\,g_k,\quad m_{-1}=0,\qquad \theta_{k+1}=\theta_k-\eta_k\,U_rV_r^\top,

$m_k=U\Sigma V^\top$ and $U_rV_r^\top$ its **exact polar factor** on the singular values above $\rho\,\sigma_1$ (the
reduced SVD of :func:`~attsvm.gd.steepest.direction_parts` with ``norm="spec"``, $\rho$ = ``tol("spec_rank")``;
Muon's Newton–Schulz iteration approximates this factor, here it is computed exactly so that the 50-digit replay
checks one definition); a vector factor ($p$, $v$, diagonal $k$, $q$) is a $d\times1$ matrix, $m/\|m\|_2$. With
$\beta=0$ it is ``nsd`` in ``spec``. Momentum and its state as in ``signum`` ($\beta m+(1-\beta)g$: the polar factor
does not see the scale, so this equals Muon's $\mu m+g$ with $\mu=\beta$), kept scale-free
(:func:`~attsvm.gd.steps.averaged`).
Option ``momentum`` $\beta\in[0,1)$ (default 0.9). Step bound $\sqrt{\min(r,c)}$ for an $r\times c$ factor. Stops
``underflow`` when every factor's gradient and average are exactly zero.
"""

from __future__ import annotations

from typing import Any

from ..algorithm import Algorithm
from ..options import fro_bound
from .signum import initial_state


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, dict, Any]:
    r"""$\theta-\eta_k\,\mathrm{polar}(m_k)$ per factor, the new average, and the fixed-point flag."""
    from .. import steps
    from ..steepest import direction_parts

    G, M, E = steps.scaled_gradients(P, th, fw, log_domain=True)
    m, new_state, zero = steps.averaged(steps.log_scaled(G, M, E, th, S.ridge), state, S.momentum)
    new = {}
    for k_, a in m.items():
        D, den = direction_parts(a, "spec")
        new[k_] = th[k_] - steps.unit_step(D, den, lr, den > 0)
    return new, new_state, zero


ALGORITHM = Algorithm(
    name="muon",
    title="momentum with an orthogonalised step (Muon, exact polar factor)",
    equation="m_k = B m_k-1 + (1-B) g_k, W_k+1 = W_k - lr_k U V^T, m_k = U S V^T (reduced SVD)",
    replay="attsvm.highprec.gd:muon_step",
    step=step,
    initial_state=initial_state,
    step_bound=lambda shape, S, steps: fro_bound("spec", shape),
    options=("momentum",),
    stops="every factor's gradient and average are exactly zero (a fixed point)",
)
