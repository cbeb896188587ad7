r"""What a GD run is asked to do, as plain data (no torch): the algorithms, schedules, norms and losses of the
engine, and :class:`Settings` (how a step is taken). :mod:`.algorithms`, :mod:`.steepest` and :mod:`.model_torch`
implement them; :func:`attsvm.gd.run` validates against them before it chooses a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..registries import Check, declare
from .init import PARAMS

#: the 50-digit replay of a run, the independent check of every (algorithm, parameterisation) the engine runs
REPLAY = "attsvm.highprec.gd:replay"


def _replayed(algo: str, params: tuple[str, ...] = PARAMS) -> dict[str, Check]:
    return {p: Check(REPLAY, f"the 50-digit replay of {algo!r} on {p!r}, step for step") for p in params}


#: each algorithm, the parameterisations the engine runs it on (:func:`~attsvm.gd.engine.settings_of` refuses the
#: others) and the independent check of each combination (:mod:`attsvm.registries`). A combination without a
#: replay would be declared ``Check(None, why)``: a claim relying on it cannot be confirmed at high precision.
ALGO_CHECKS = {
    "gd": _replayed("gd"),
    "ngd": _replayed("ngd"),
    "md": _replayed("md", ("W", "p")),
    "nsd": _replayed("nsd"),
    "adam": _replayed("adam"),
    "nmd": _replayed("nmd", ("W", "p")),
}
ALGOS = declare("gd.ALGOS", ALGO_CHECKS)
#: step-size schedules (:func:`~attsvm.gd.algorithms.step_size`)
SCHEDULES = declare(
    "gd.SCHEDULES",
    {s: Check("attsvm.highprec.gd:step_size", f"the replay's step size of {s!r}") for s in ("constant", "rsqrt")},
)
#: the norms of normalised steepest descent (``algo="nsd"``, :mod:`.steepest`)
NORMS = declare(
    "gd.NORMS",
    {
        n: Check("attsvm.highprec.gd:nsd_direction", f"the 50-digit steepest direction in {n!r} (replay of nsd)")
        for n in ("fro", "linf", "l1", "spec", "lq")
    },
)
LOSSES = declare(
    "gd.LOSSES",
    {
        n: Check("attsvm.highprec.model:loss_value", f"the 50-digit loss {n!r} and its derivative (replay)")
        for n in ("logistic", "exponential", "correlation", "nll")
    },
)
#: the loss of next-token data (kind ``"ntp"``): $\ell(u)=-\log u$ on the label mass $u_i=\gamma_i^\top s_i$
NTP_LOSS = "nll"
#: the head of the next-token *squared* loss (the authors' local-convergence runs,
#: :func:`~attsvm.gd.model_torch.head_outputs`)
NTP_SQUARE = "ntp-square"


#: how ``ngd`` normalises the gradients of several factors ($(K,Q)$, $(v,p)$, diag $(k,q)$)
NORMALIZE = declare(
    "gd.NORMALIZE",
    {n: Check(REPLAY, f"the 50-digit replay of ngd with normalize={n!r}") for n in ("per-factor", "joint")},
)


@dataclass(frozen=True)
class Settings:
    r"""How a step is taken (fixed during a run).

    ``ridge`` $\lambda$: the penalty $\lambda\sum_k\|\theta_k\|_F^2$ (the paper's $(K,Q)$ runs use
    $\lambda=\varepsilon_{64}=2^{-52}$). ``normalize`` (``ngd``): ``"per-factor"``
    $\theta_k\leftarrow\theta_k-\eta\,g_k/(\|g_k\|_F+\epsilon)$, or ``"joint"``
    $\theta_k\leftarrow\theta_k-\eta\,g_k/(\|g\|+\epsilon)$ with $\|g\|^2=\sum_k\|g_k\|_F^2$ (one
    normalised step of the whole parameter vector). ``grad_eps`` $\epsilon\ge0$: the authors' normaliser
    $g/(\|g\|+\epsilon)$, $\epsilon=2^{-52}$ in their code (0: exactly $g/\|g\|$). ``q``: the $\ell_q$
    potential of ``md`` / ``nmd``, and the exponent of ``nsd`` with ``norm="lq"``. ``norm`` (``nsd`` only):
    one of :data:`NORMS`. ``schedule``: :data:`SCHEDULES` (:func:`~attsvm.gd.algorithms.step_size`).
    ``adam_betas`` $(\beta_1,\beta_2)$, $0\le\beta_1<\sqrt{\beta_2}<1$, and ``adam_eps`` $\epsilon\ge0$
    (default 0, the $\epsilon\to0$ algorithm of the theory; ``torch.optim.Adam`` uses $10^{-8}$): ``adam``."""

    algo: str = "ngd"
    ridge: float = 0.0
    q: float | None = None
    normalize: str = "per-factor"
    grad_eps: float = 0.0
    norm: str | None = None
    schedule: str = "constant"
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 0.0
