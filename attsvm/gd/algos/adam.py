r"""``adam``: bias-corrected Adam (:func:`adam_update`), entrywise per factor,
$m_k=\beta_1m_{k-1}+(1-\beta_1)g_k$, $v_k=\beta_2v_{k-1}+(1-\beta_2)g_k^2$,
$\theta_{k+1}=\theta_k-\eta_k\,\hat m_k/(\sqrt{\hat v_k}+\epsilon)$, $\hat m_k=m_k/(1-\beta_1^{k+1})$,
$\hat v_k=v_k/(1-\beta_2^{k+1})$ ($k=0,1,\dots$), with the moments kept relative to a running log-scale, so
$\epsilon=0$ is exact (never $0/0$) however small the gradient. Options ``adam_betas``
$(\beta_1,\beta_2)$, $0\le\beta_1<\sqrt{\beta_2}<1$ (the step is then bounded,
:func:`~attsvm.gd.ranges.adam_entry_bound`), and ``adam_eps`` $\epsilon\ge0$ (default 0, the $\epsilon\to0$
algorithm of the theory; ``torch.optim.Adam`` uses $10^{-8}$). Stops ``underflow`` when every factor's gradient and
first moment are exactly zero (no momentum left: a fixed point).
"""

from __future__ import annotations

import math
from typing import Any

from ..algorithm import Algorithm
from ..ranges import adam_entry_bound


def initial_state(S: Any, th: dict) -> dict:
    """Per factor the moments ``m:<k>``, ``r:<k>`` (zeros) and the log-scale ``s:<k>`` (B,)."""
    from ..steps import zero_moments

    return zero_moments(th, ("m", "r"))


def adam_update(
    parts: dict, state: dict, lr: Any, t: int, betas: tuple[float, float], eps: float
) -> tuple[dict, dict, Any]:
    r"""One bias-corrected Adam update $t=k+1$ per factor: ``(steps, new state, zero)``.

    With $g_t=e^{L}\hat g$ (:func:`~attsvm.gd.steps.log_scaled`), $m_t=\beta_1m_{t-1}+(1-\beta_1)g_t$ and
    $r_t=\sqrt{v_t}=\mathrm{hypot}(\sqrt{\beta_2}\,r_{t-1},\sqrt{1-\beta_2}\,g_t)$ (entrywise; no square of $g$ is
    formed), the step is $\eta\,\hat m_t/(\sqrt{\hat v_t}+\epsilon)=\frac{\eta}{1-\beta_1^t}\,
    m_t/(r_t/\sqrt{1-\beta_2^t}+\epsilon)$, in ``torch.optim.Adam``'s order of operations. **Scale safety**: the
    state keeps $m=e^{s}\hat m$, $r=e^{s}\hat r$ with one log-scale $s$ (B,) per factor and $\max\hat r\in[\tfrac12,1)$
    (renormalised by an exact power of two each step); the update mixes old and new terms with the weights
    $e^{s-c}$, $e^{L-c}$, $c=\max(s,L)$, and the step is $\hat m/(\hat r/\sqrt{1-\beta_2^t}+\epsilon e^{-s})$ —
    so $\epsilon=0$ is exact however small the gradient, and $\epsilon e^{-s}=\infty$ gives the step 0 it
    stands for. An entry with $\hat r$ below the smallest normal float (its gradient was never above
    $2^{-1022}$ times the factor's largest) takes no step: never $0/0$ ($\beta_2>0$, so $r=0$ only where
    $m=0$). Adam is entrywise, so an entry of relative size below $2^{-1074}$ of its factor's largest is
    lost (plain float Adam loses entries below $\sim10^{-154}$ in absolute value, where $g^2$ underflows).

    ``zero`` (B,): every factor's gradient and new first moment are exactly zero (a fixed point)."""
    import torch

    from ..numerics import ldexp, normalise
    from ..steps import bshape, log_mix

    b1, b2 = betas
    bc1 = 1.0 - b1**t
    bc2s = math.sqrt(1.0 - b2**t)
    sb2, s1b2 = math.sqrt(b2), math.sqrt(1.0 - b2)
    leps = math.log(eps) if eps > 0 else None
    ln2 = math.log(2.0)
    steps: dict[str, torch.Tensor] = {}
    new: dict[str, torch.Tensor] = {}
    zero = None
    for k, (g, L) in parts.items():
        m, r = state[f"m:{k}"], state[f"r:{k}"]
        a, w, c, gz = log_mix(g, L, r, state[f"s:{k}"])  # r = 0 only where m = 0 (beta2 > 0)
        m2 = b1 * (a * m) + (1.0 - b1) * (w * g)
        r2, e = normalise(torch.hypot(sb2 * (a * r), s1b2 * (w * g)))
        m2 = ldexp(m2, -e)
        s2 = c + e.to(g.dtype) * ln2
        den = r2 / bc2s
        if leps is not None:
            den = den + bshape(torch.exp(leps - s2), g)
        tiny = torch.finfo(g.dtype).tiny
        ratio = torch.where(r2 >= tiny, m2 / den.clamp(min=tiny), torch.zeros_like(m2))
        steps[k] = bshape(lr / bc1, g) * ratio
        new.update({f"m:{k}": m2, f"r:{k}": r2, f"s:{k}": s2})
        z = gz & (m2.flatten(1) == 0).all(-1)
        zero = z if zero is None else zero & z
    assert zero is not None
    return steps, new, zero


def step(S: Any, P: Any, th: dict, fw: Any, lr: Any, state: Any, k: int) -> tuple[dict, dict, Any]:
    """Update $k$: :func:`adam_update` with $t=k+1$ on the :func:`~attsvm.gd.steps.log_scaled` gradient."""
    from .. import steps

    G, M, E = steps.scaled_gradients(P, th, fw, log_domain=True)
    moves, new_state, zero = adam_update(
        steps.log_scaled(G, M, E, th, S.ridge), state, lr, k + 1, S.adam_betas, S.adam_eps
    )
    return {k_: th[k_] - s for k_, s in moves.items()}, new_state, zero


ALGORITHM = Algorithm(
    name="adam",
    title="Adam",
    equation=(
        "m_k = B1 m_k-1 + (1-B1) g_k, v_k = B2 v_k-1 + (1-B2) g_k^2 (entrywise),\n"
        "W_k+1 = W_k - lr_k m_k/(1-B1^(k+1)) / (sqrt(v_k/(1-B2^(k+1))) + EPS)"
    ),
    replay="attsvm.highprec.gd:adam_step",
    step=step,
    initial_state=initial_state,
    step_bound=lambda shape, S, steps: math.sqrt(math.prod(shape)) * adam_entry_bound(S.adam_betas, steps),
    options=("adam_betas", "adam_eps"),
    stops="every factor's gradient and first moment are exactly zero (a fixed point)",
)
