r"""The option values of a GD run that are not algorithms, as plain data (no torch): step schedules, the norms of
steepest descent (with their norm-equivalence constants :func:`fro_bound`), losses and normalisations, each
declared with its independent check (:mod:`attsvm.registries`). The algorithms are :mod:`.algos`, a run's settings
:class:`~attsvm.gd.spec.Settings`.
"""

from __future__ import annotations

import math

from ..registries import Check, declare

#: the 50-digit replay of a run, the independent check of every (algorithm, parameterisation) the engine runs
REPLAY = "attsvm.highprec.gd:replay"

#: step-size schedules (:func:`~attsvm.gd.steps.step_size`)
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
#: the square-loss regression head $h_i(m)=-\|m-y_i\|^2$ on per-token values, $m_i=V_i^\top s_i$ (with the loss
#: ``correlation``, $\frac1n\sum_i\|V_i^\top s_i-y_i\|^2$; :func:`~attsvm.gd.model_torch.head_outputs`)
REGRESSION = "regression"
#: the nonlinear heads of a run (``head=``; :func:`~attsvm.gd.model_torch.head_outputs`) and their independent
#: checks: only the regression head has a 50-digit model (its runs are replayed, ``attsvm.highprec.replay(head=...)``)
HEADS = declare(
    "gd.HEADS",
    {
        "relu": Check(None, "no 50-digit model of the ReLU head: its runs are not replayed, so a claim on them "
                      "cannot be confirmed at high precision"),
        "quadratic": Check(None, "no 50-digit model of the quadratic head: its runs are not replayed, so a claim on "
                           "them cannot be confirmed at high precision"),
        NTP_SQUARE: Check(None, "no 50-digit model of the next-token squared head: its runs are not replayed, so a "
                          "claim on them cannot be confirmed at high precision"),
        REGRESSION: Check("attsvm.highprec.model:grad_regression", "the 50-digit gradient of the square loss "
                          "(1/n) sum_i ||V_i^T s_i - y_i||^2, written from the definition; runs replayed with it"),
    },
)  # fmt: skip


#: the losses the fused CPU kernel evaluates (:mod:`attsvm.gd.fused`)
FUSED_LOSSES = ("logistic", "exponential", "correlation", "nll")

#: how ``ngd`` normalises the gradients of several factors ($(K,Q)$, $(v,p)$, diag $(k,q)$)
NORMALIZE = declare(
    "gd.NORMALIZE",
    {n: Check(REPLAY, f"the 50-digit replay of ngd with normalize={n!r}") for n in ("per-factor", "joint")},
)


def fro_bound(norm: str, shape: tuple[int, ...], q: float | None = None) -> float:
    r"""$\sup_{\|\Delta\|\le1}\|\Delta\|_F$ for a factor of ``shape`` (without the batch axis), $N$ entries:
    ``fro`` and ``l1`` 1, ``linf`` $\sqrt N$ (a full sign matrix), ``spec`` $\sqrt{\min(r,c)}$ (1 for a vector),
    ``lq`` $N^{\max(0,1/2-1/q)}$ (Hölder). A step $\eta\Delta$ has Frobenius norm at most $\eta$ times this."""
    N = math.prod(shape)
    if norm in ("fro", "l1"):
        return 1.0
    if norm == "linf":
        return math.sqrt(N)
    if norm == "spec":
        return math.sqrt(min(shape[-2], shape[-1])) if len(shape) >= 2 else 1.0
    if norm == "lq":
        if q is None or not (1.0 < q < math.inf):
            raise ValueError(f"norm 'lq' needs a finite q > 1, got {q!r}")
        return float(N ** max(0.0, 0.5 - 1.0 / q))
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
