r"""``md``: $\ell_q$ mirror descent with the potential $\psi(W)=\frac1q\|W\|_q^q$: dual iterate
$D=\nabla\psi(W)=\mathrm{sign}(W)|W|^{q-1}$, $D_{k+1}=D_k-\eta_k\nabla\mathcal L(W_k)$,
$W_{k+1}=\mathrm{sign}(D_{k+1})|D_{k+1}|^{1/(q-1)}$ (plain float gradient; ``W`` and ``p``).

Stops ``underflow`` when the dual update is lost in floating point for every factor (a fixed point). No a-priori step
bound.
"""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from ..algorithm import Algorithm

#: the parameterisations of the mirror descents (an entrywise potential on one factor)
MIRROR_PARAMS = ("W", "p")


def needs_q(values: dict[str, Any], param: str, what: str = "mirror descent") -> None:
    """The mirror descents need the exponent ``q`` of their potential."""
    if values["q"] is None:
        raise InputError(f"{what} needs a finite q > 1 (the l_q potential)")


def initial_state(S: Any, th: dict) -> dict:
    r"""The dual iterate $D_0=\nabla\psi(\theta_0)$ per factor."""
    from ..steps import dual_of_primal

    return {k: dual_of_primal(a, S.q) for k, a in th.items()}


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, dict, Any]:
    """The plain step in the dual, mapped back to the primal; the flag "dual update lost"."""
    from .. import steps

    G, _M, E = steps.scaled_gradients(P, th, fw, log_domain=False)
    upd = steps.plain_update(G, E, th, lr, S.ridge)
    moved = {k_: state[k_] - upd[k_] for k_ in G}
    return {k_: steps.primal_of_dual(D, S.q) for k_, D in moved.items()}, moved, steps.lost(moved, state)


ALGORITHM = Algorithm(
    name="md",
    title="mirror descent",
    equation="D_k+1 = D_k - lr_k grad L(W_k), D = sign(W)|W|^(q-1), W = sign(D)|D|^(1/(q-1))",
    replay="attsvm.highprec.gd:md_step",
    step=step,
    initial_state=initial_state,
    step_bound=lambda shape, S, steps: None,
    options=("q",),
    params=MIRROR_PARAMS,
    rules=needs_q,
    log_domain=False,
    mirror=True,
    stops="the dual update is lost in floating point for every factor (a fixed point of the float iteration)",
)
