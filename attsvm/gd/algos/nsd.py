r"""``nsd``: normalised steepest descent in ``norm`` (THEORY §6), per factor $\theta\leftarrow\theta-\eta_k\Delta_k$,
$\Delta_k=\arg\max_{\|\Delta\|\le1}\langle g_\theta,\Delta\rangle$ (:mod:`attsvm.gd.steepest`: ``fro``
$g/\|g\|_F$ — bit-identical to ``ngd`` —, ``linf`` $\mathrm{sign}(g)$, ``l1`` the largest entry, ``spec``
$UV^\top$, ``lq``), from the log-domain gradient. Step bound: :func:`~attsvm.gd.options.fro_bound` of the norm.
"""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from ..algorithm import Algorithm
from ..options import NORMS, fro_bound


def rules(values: dict[str, Any], param: str) -> None:
    """``norm`` is required; ``q`` goes with ``norm="lq"`` only."""
    if values["norm"] is None:
        raise InputError(f"algo 'nsd' needs norm, one of {NORMS}, got None")
    if values["norm"] == "lq" and values["q"] is None:
        raise InputError("norm 'lq' needs a finite q > 1 (the l_q norm)")
    if values["norm"] != "lq" and values["q"] is not None:
        raise InputError("q applies to algo 'md', 'nmd' and 'nsd' with norm 'lq' only")


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, None, Any]:
    r"""Per factor the step $\eta\,\Delta_k$ (formed as $(\eta/\mathrm{den})D$,
    :func:`~attsvm.gd.steepest.direction_parts`) and the flag "every factor's gradient is exactly zero"."""
    from .. import steps
    from ..steepest import direction_parts

    G, M, E = steps.scaled_gradients(P, th, fw, log_domain=True)
    new = {}
    zero = None
    for k_, (g, _L) in steps.log_scaled(G, M, E, th, S.ridge, scales=False).items():
        D, den = direction_parts(g, S.norm, S.q)
        z = den == 0
        zero = z if zero is None else zero & z
        new[k_] = th[k_] - steps.unit_step(D, den, lr, den > 0)
    return new, None, zero


ALGORITHM = Algorithm(
    name="nsd",
    title="normalised steepest descent",
    equation=(
        "W_k+1 = W_k - lr_k Delta_k, Delta_k = argmax_{||Delta|| <= 1} <G, Delta> in --norm:\n"
        "fro G/||G||_F, linf sign(G), l1 the largest |G_ij| (ties share it evenly), spec U V^T\n"
        "(reduced SVD, nonzero singular values only), lq sign(G)|G|^(q*-1)/||G||_q*^(q*-1)"
    ),
    replay="attsvm.highprec.gd:nsd_step",
    step=step,
    step_bound=lambda shape, S, steps: fro_bound(S.norm, shape, S.q),
    options=("norm", "q"),
    rules=rules,
)
