r"""``nmd``: normalised $\ell_q$ mirror descent, $D_{k+1}=D_k-\eta_k\,g_k/\|g_k\|_{q^*}$, $q^*=q/(q-1)$ (the
log-domain direction), $W=\mathrm{sign}(D)|D|^{1/(q-1)}$ (``W`` and ``p``).

The direction is taken from the log-domain gradient $\hat g$ ($g=e^{L}\hat g$, $\max|\hat g|\in[\tfrac12,1)$,
:func:`~attsvm.gd.steps.log_scaled`): the norm and the division never see the float64 gradient, so each step is
exact while that gradient is subnormal or 0 (tested against the 60-digit replay across the underflow).

The dual moves by $\eta_k$ in $\ell_{q^*}$ per step (step bound 1, mapped to the primal by the range check:
$\|\theta_k\|_q=\|D_k\|_{q^*}^{1/(q-1)}$).
"""

from __future__ import annotations

from typing import Any

from ..algorithm import Algorithm
from .md import MIRROR_PARAMS, initial_state, needs_q


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, dict, Any]:
    r"""The dual step $\eta\,g/\|g\|_{q^*}$ per factor (scale-free, :func:`~attsvm.gd.numerics.lp_norm`), mapped to
    the primal, and the flag "every factor's gradient is exactly zero"."""
    from .. import steps
    from ..numerics import lp_norm

    G, M, E = steps.scaled_gradients(P, th, fw, log_domain=True)
    qs = S.q / (S.q - 1.0)
    moved = {}
    zero = None
    for k_, (g, _L) in steps.log_scaled(G, M, E, th, S.ridge, scales=False).items():
        nrm = lp_norm(g, qs)
        z = nrm == 0
        zero = z if zero is None else zero & z
        moved[k_] = state[k_] - steps.unit_step(g, nrm, lr, nrm > 0)
    return {k_: steps.primal_of_dual(D, S.q) for k_, D in moved.items()}, moved, zero


ALGORITHM = Algorithm(
    name="nmd",
    title="normalised mirror descent",
    equation="D_k+1 = D_k - lr_k G/||G||_q*, q* = q/(q-1), same D and W as md",
    replay="attsvm.highprec.gd:nmd_step",
    step=step,
    initial_state=initial_state,
    step_bound=lambda shape, S, steps: 1.0,
    options=("q",),
    params=MIRROR_PARAMS,
    rules=lambda values, param: needs_q(values, param, "normalised mirror descent"),
    mirror=True,
)
