r"""The batched gradient-descent engine: :func:`run` validates a run once (:func:`~attsvm.gd.spec.settings_of`,
:func:`~attsvm.gd.spec.prepare`) and picks the kernel that computes it; the result is a
:class:`~attsvm.gd.result.GDResult`.

One call runs the chosen algorithm on every data set of a batch at once (leading axis $B$; a single
data set is a batch of one), on ``device`` in ``dtype`` (float64 default), deterministically for a seed. The
algorithms are the declared modules of :mod:`attsvm.gd.algos` (``gd``, ``ngd``, ``md``, ``nsd``, ``adam``, ``nmd``,
``signum``, ``muon``); :func:`~attsvm.gd.spec.settings_of` validates their settings, and
:attr:`~attsvm.gd.result.GDResult.settings` records them.

Stop rules, checked per data set (a stopped data set is frozen while the others go on; on the full data set also
with ``minibatch``, which only changes the step, :class:`~attsvm.gd.spec.Settings`):

* ``"steps"``: ``steps`` updates taken;
* ``"underflow"``: the update is lost in floating point for every factor — plain ``gd`` / ``md``:
  $\theta_k-\eta\nabla\mathcal L(\theta_k)=\theta_k$ bit for bit (the dual for ``md``), because the gradient
  (once $s_{it}s_{i\tau}$ underflow) or $\eta$ times it underflows, a fixed point every later step would
  repeat; ``ngd``, ``nsd`` and ``nmd`` compute the direction in the log domain and only stop so at a true
  stationary point (direction exactly zero), ``adam`` when moreover its first moment is exactly zero — no $0/0$
  step is ever taken; with ``minibatch`` $b<n$ the flag must hold for $n/\gcd(n,b)$ consecutive updates (every
  batch of the cycle: a fixed point of the cyclic iteration);
* ``"target_corr"``: before each update $k$ (and at $k=0$), if
  $\mathrm{corr}(\theta_k,\text{first target})\ge1-$``stop_corr`` the run stops with $k$ steps taken;
* ``"non-finite"``: update $k+1$ produced a non-finite value — parameters (or the mirror-descent dual), logits /
  outputs $u_i$, or the loss overflowed or became NaN. The data set is frozen at its last finite iterate
  $\theta_k$ ($k$ steps taken) and :attr:`GDResult.nonfinite` / :attr:`GDResult.nonfinite_step` say what and
  where ($k+1$). A normalised run is bounded up front (below), so it gets here only through the loss
  or a nonlinear head (e.g. $e^{-u}$ overflowing); plain ``gd`` / ``md`` have no a-priori bound.

**Scale safety** (:mod:`.numerics`, :mod:`.ranges`). Every direction, step, norm and correlation is computed from exact
power-of-two rescalings (bit-identical to the plain formulas where those are representable). Before a run,
:func:`~attsvm.gd.ranges.check_ranges` refuses (:class:`~attsvm.errors.InputError`) data and settings
whose scores $|x|\,|v|$, logits $|x|\,|z|\,R$ or parameter norms $R$ could leave float64 — for ``ngd``
$R=\|\theta_0\|+\eta\cdot$``steps`` bounds the whole run ($\|\theta_{k+1}-\theta_k\|=\eta$ per factor), for
``nsd`` / ``adam`` / ``nmd`` the same with the step bound of the algorithm and $\sum_k\eta_k$ of the schedule
(:func:`~attsvm.gd.ranges.step_bound`); for ``gd`` / ``md`` $R=\|\theta_0\|$ — and an initial point whose
logits or loss are not finite is bad input too.
So a run either runs correctly, or is refused with one line naming the field and the bound, or stops
``non-finite`` at its last finite iterate: never a silent zero or NaN.

**Kernels** (``kernel``). ``"torch"``: the batched torch loop (:mod:`.loop`; every algorithm, parametrisation,
head, device and dtype). ``"fused"``: the compiled CPU kernel (:mod:`.fused`) for the runs of
:func:`fused_applies` — ``ngd`` per factor without ridge or normaliser epsilon on ``W`` or ``(K,Q)``, a linear head,
CPU, float64 — several times faster and without importing torch. ``"auto"`` (default) takes ``"fused"`` where it
applies. The two kernels compute the same formulas in the same order, agree to rounding (``tol("batch_rtol")``
over short runs; both match the 50-digit replay), and each gives a data set the same bits wherever it sits in a
batch; they are not bit-identical to each other (:mod:`.fused`, "Numbers").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..data import Dataset
from ..errors import InputError
from ..registries import Check, declare
from .options import FUSED_LOSSES, REPLAY
from .result import GDResult
from .spec import Job, Settings, prepare, require_trajectory_memory, resolve_settings, trajectory_bytes

#: how the steps are computed (module docstring, "Kernels"), each with its independent check (:mod:`attsvm.registries`)
KERNELS = declare(
    "gd.KERNELS",
    {
        "auto": Check(REPLAY, "the 50-digit replay of the run of the kernel it takes (torch or fused)"),
        "torch": Check(REPLAY, "the 50-digit replay of the torch kernel's run"),
        "fused": Check(REPLAY, "the 50-digit replay of the fused kernel's run (ngd on W or KQ)"),
    },
)


def fused_applies(job: Job) -> bool:
    """Whether the fused CPU kernel (:mod:`.fused`) computes this run: ``ngd`` per factor (joint is the same for one
    factor), no ridge, no normaliser epsilon, on ``W`` or ``KQ``, a linear head, a loss of :data:`FUSED_LOSSES`,
    the CPU, float64, the full batch (``minibatch`` None or $n$, which is the full batch exactly; the torch kernel
    computes the others)."""
    S = job.settings
    return (
        S.algorithm.fused
        and S.minibatch in (None, int(job.ds.flat().X.shape[-3]))
        and S.algo == "ngd"
        and job.param in ("W", "KQ")
        and (S.normalize == "per-factor" or job.param == "W")
        and S.ridge == 0
        and S.grad_eps == 0
        and job.head is None
        and job.loss in FUSED_LOSSES
        and str(job.device) == "cpu"
        and job.dtype == "float64"
    )


def run(
    ds: Dataset,
    settings: Settings | None = None,
    *,
    param: str = "W",
    algo: str | None = None,
    lr: Any = 0.1,
    steps: int = 2000,
    m: int | None = None,
    heads: int | None = None,
    loss: str | None = None,
    head: Any = None,
    init: Any = "zero",
    init_scale: float | None = None,
    seed: int = 0,
    record_every: int | None = None,
    targets: dict | None = None,
    stop_corr: float | None = None,
    device: str = "cpu",
    dtype: str = "float64",
    record_params: bool = False,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    kernel: str = "auto",
    **options: Any,
) -> GDResult:
    r"""Run ``settings`` (a :class:`~attsvm.gd.spec.Settings`) on ``param`` for every data set of ``ds`` at once
    (see the module and package docs). Without ``settings``, the settings are ``settings_of(algo, param,
    **options)`` (:func:`~attsvm.gd.spec.settings_of`; ``algo`` default ``"ngd"``; ``options`` the settings fields:
    ``ridge``, ``schedule``, ``q``, ``norm``, ``normalize``, ``grad_eps``, ``adam_betas``, ``adam_eps``,
    ``momentum``, ``minibatch``) — one validation either way. ``minibatch`` $b$: update $k$ steps on the loss of the
    cyclic batch $B_k=\{(kb+j)\bmod n\}_{j<b}$ only, $\frac1b\sum_{i\in B_k}\ell_i$; records and stop rules stay
    on the full data set (:class:`~attsvm.gd.spec.Settings`; the torch kernel). ``heads``: the number of heads $H$ of
    ``param="heads"`` (default :data:`~attsvm.gd.init.DEFAULT_HEADS`; :func:`~attsvm.gd.init.heads_of`), refused for
    the other parameterisations.

    Returns a :class:`GDResult` whose arrays have a leading batch axis (B=1 for a single data set).
    ``threads``: CPU threads during the run (default 1: one thread per process is fastest on a shared machine;
    torch's setting is restored afterwards, the fused kernel runs contiguous groups of data sets on Python
    threads). ``progress``: called as ``progress(k, steps)`` with $k$ updates done, before update $k+1$: the torch
    kernel calls it for $k=0,1,\dots$, the fused kernel at $k=0$, after every stretch of steps it runs in compiled
    code (about :data:`~attsvm.gd.fused.STRETCH_SECONDS` each, at most 1/:data:`~attsvm.gd.fused.PROGRESS_PARTS` of
    the run) and at the record steps; the last call has ``k == steps``, or a smaller $k$ when every data set
    stopped earlier. It receives Python integers only and cannot change the iterates; an object that also has a
    method ``wait(text)`` is told when the fused kernel is compiled first (:func:`attsvm.gd.fused.run_fused`).
    ``kernel``: :data:`KERNELS` (module docstring, "Kernels"); ``"fused"`` for a run the fused kernel does not
    compute is an error. A recorded trajectory that would not fit in memory (:func:`trajectory_bytes`) is refused
    before anything is allocated (:func:`require_trajectory_memory`: :class:`~attsvm.errors.InputError` with the
    estimate and a ``record_every`` that fits)."""
    if threads is not None and (int(threads) != threads or threads < 1):
        raise InputError(f"threads must be a positive integer, got {threads!r}")
    if kernel not in KERNELS:
        raise InputError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if progress is not None and not callable(progress):
        raise InputError("progress must be None or a callable progress(k, steps)")
    t0 = time.perf_counter()
    job = prepare(
        ds, resolve_settings(settings, algo, param, options), param=param, lr=lr, steps=steps, m=m, heads=heads,
        loss=loss, head=head, init=init, init_scale=init_scale, seed=seed, record_every=record_every, targets=targets,
        stop_corr=stop_corr, device=device, dtype=dtype, record_params=record_params,
    )  # fmt: skip
    if job.record_every is not None:  # before anything is allocated
        width = int(job.init["K"].shape[-1]) if "K" in job.init else None
        nbytes = trajectory_bytes(
            ds, job.steps, job.record_every, param=job.param, m=width, targets=len(job.targets),
            record_params=job.record_params, heads=job.heads,
        )  # fmt: skip
        require_trajectory_memory(nbytes, job.steps, job.record_every)
    fused = fused_applies(job)
    if kernel == "fused" and not fused:
        raise InputError(
            "kernel 'fused' computes algo 'ngd' (per factor, ridge 0, grad_eps 0) on param 'W' or 'KQ' with a linear "
            f"head and the losses {', '.join(FUSED_LOSSES)}, on the CPU in float64, full batch (minibatch n or none); "
            "use kernel 'torch' or 'auto'"
        )
    if fused and kernel != "torch":
        from .fused import run_fused

        return run_fused(job, 1 if threads is None else int(threads), progress, t0)
    from .loop import run_torch

    return run_torch(job, threads, progress, t0)
