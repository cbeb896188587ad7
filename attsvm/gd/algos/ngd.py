r"""``ngd``: normalised gradient descent, per factor
$\theta\leftarrow\theta-\eta_k\,g_\theta/(\|g_\theta\|_F+\epsilon)$,
$g_\theta=\nabla_\theta\mathcal L+2\lambda\theta$, or with ``normalize="joint"``
$\theta_j\leftarrow\theta_j-\eta_k\,g_j/(\|g\|+\epsilon)$, $\|g\|^2=\sum_j\|g_j\|_F^2$ (one normalised step of the
whole parameter vector).

The gradient is computed *in the log domain* up to the positive scale $e^{M}$
(:func:`~attsvm.gd.model_torch.token_weights_logdomain`), so the direction is exact far past underflow; the ridge is
folded in as $e^{M-c}\tilde g+e^{\log2\lambda-c}\theta$, $c=\max(M,\log2\lambda)$. Scale-free normaliser: with
$g_j=e^{L_j}\hat g_j$, per factor $\eta\hat g_j/(\|\hat g_j\|+\epsilon e^{-L_j})$; joint, with
$\ell_j=L_j+\log\|\hat g_j\|$, $c=\max_j\ell_j$, $w_j=e^{\ell_j-c}$ and $J=(\sum_jw_j^2)^{1/2}$ ($\|g\|=e^cJ$),
$\eta\,(w_j/\|\hat g_j\|)\,\hat g_j/(J+\epsilon e^{-c})$. A zero gradient takes no step (never $0/0$);
$\epsilon e^{-L}$ overflowing to $\infty$ gives the step 0 it stands for. Each step moves a factor by at most
$\eta_k$ (step bound 1). The fused CPU kernel computes it (per factor, no ridge, $\epsilon=0$, ``W`` or ``KQ``).
"""

from __future__ import annotations

import math
from typing import Any

from ..algorithm import Algorithm
from ..init import PARAMETERISATIONS, PARAMS


def normalised_steps(parts: dict, lr: Any, normalize: str, grad_eps: float, headed: bool = False) -> tuple[dict, Any]:
    r"""The steps $\eta\,g_j/(\|g_j\|+\epsilon)$ (per factor) or $\eta\,g_j/(\|g\|+\epsilon)$ (joint) from the
    :func:`~attsvm.gd.steps.log_scaled` parts, and the (B,) flag "every factor's gradient is exactly zero".
    ``headed`` (factors (B,H,...), param ``heads``): "per factor" is per head, each $K_h$, $Q_h$ normalised by its
    own norm (per-head normalisation); joint stays the norm of all heads' factors together."""
    import torch

    from .. import steps as st

    tiny = None
    nrms = {}
    zero = None
    for k, (g, _L) in parts.items():
        nrm = torch.linalg.vector_norm(g.flatten(1), dim=-1)  # g is normalised: no overflow / underflow
        nrms[k] = nrm
        z = nrm == 0
        zero = z if zero is None else zero & z
        tiny = torch.finfo(g.dtype).tiny
    assert zero is not None and tiny is not None
    out = {}
    if normalize == "joint" and len(parts) > 1:
        ell = {
            k: torch.where(nrms[k] > 0, L + torch.log(nrms[k].clamp(min=tiny)), -math.inf)
            for k, (_g, L) in parts.items()
        }
        c = torch.stack(list(ell.values())).amax(0)
        c = torch.where(zero, torch.zeros_like(c), c)
        w = {k: torch.exp(e - c) for k, e in ell.items()}
        J = torch.sqrt(sum(x * x for x in w.values()))
        den = J + grad_eps * torch.exp(-c) if grad_eps > 0 else J
        for k, (g, _L) in parts.items():
            fac = torch.where(nrms[k] > 0, lr * w[k] / (nrms[k].clamp(min=tiny) * den.clamp(min=tiny)), 0.0)
            out[k] = st.bshape(fac, g) * g
        return out, zero
    if headed:
        return {k: _per_head(g, L, lr, grad_eps, tiny) for k, (g, L) in parts.items()}, zero
    for k, (g, L) in parts.items():
        nrm = nrms[k]
        den = nrm + grad_eps * torch.exp(-L) if grad_eps > 0 else nrm
        out[k] = st.unit_step(g, den, lr, nrm > 0)
    return out, zero


def _per_head(g: Any, L: Any, lr: Any, grad_eps: float, tiny: float) -> Any:
    r"""$\eta\,\hat g_h/(\|\hat g_h\|+\epsilon e^{-L})$ for each head $h$ of a (B,H,...) factor (a zero head takes no
    step)."""
    import torch

    nrm = torch.linalg.vector_norm(g.flatten(2), dim=-1)  # (B,H)
    den = nrm + grad_eps * torch.exp(-L).unsqueeze(-1) if grad_eps > 0 else nrm
    fac = torch.where(nrm > 0, lr.unsqueeze(-1) / den.clamp(min=tiny), 0.0)
    return fac.view(*fac.shape, *([1] * (g.dim() - 2))) * g


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, None, Any]:
    """The normalised step; the log-scales only enter through the ridge, the normaliser's epsilon or a joint norm."""
    from .. import steps as st

    G, M, E = st.scaled_gradients(P, th, fw, log_domain=True)
    scales = S.grad_eps > 0 or (S.normalize == "joint" and len(G) > 1)
    headed = PARAMETERISATIONS[P.param].headed
    moves, zero = normalised_steps(st.log_scaled(G, M, E, th, S.ridge, scales), lr, S.normalize, S.grad_eps, headed)
    return {k_: th[k_] - s for k_, s in moves.items()}, None, zero


ALGORITHM = Algorithm(
    name="ngd",
    title="normalised gradient descent",
    equation="W_k+1 = W_k - lr_k G/||G||_F, per factor (log-domain direction G)",
    replay="attsvm.highprec.gd:ngd_step",
    step=step,
    # also joint: each factor's share is at most 1; per head (param heads, a (H,d,m) factor) sqrt(H)
    step_bound=lambda shape, S, steps: math.sqrt(shape[0]) if len(shape) == 3 and S.normalize != "joint" else 1.0,
    params=PARAMS,
    options=("normalize", "grad_eps"),
    fused=True,
)
