r"""The batched gradient-descent engine: :func:`run` and its result :class:`GDResult`.

One call runs the chosen algorithm on every data set of a batch at once (leading axis $B$; a single
data set is a batch of one), on ``device`` in ``dtype`` (float64 default), deterministically for a seed. The
algorithms (:data:`~attsvm.gd.settings.ALGOS`: ``gd``, ``ngd``, ``md``, ``nsd``, ``adam``, ``nmd``) and step
schedules are those of :mod:`.algorithms`; :func:`settings_of` validates their settings, and
:attr:`GDResult.settings` records them.

Stop rules, checked per data set (a stopped data set is frozen while the others go on):

* ``"steps"``: ``steps`` updates taken;
* ``"underflow"``: the update is lost in floating point for every factor — plain ``gd`` / ``md``:
  $\theta_k-\eta\nabla\mathcal L(\theta_k)=\theta_k$ bit for bit (the dual for ``md``), because the gradient
  (once $s_{it}s_{i\tau}$ underflow) or $\eta$ times it underflows, a fixed point every later step would
  repeat; ``ngd``, ``nsd`` and ``nmd`` compute the direction in the log domain and only stop so at a true
  stationary point (direction exactly zero), ``adam`` when moreover its first moment is exactly zero — no $0/0$
  step is ever taken;
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import html
from ..data import Dataset
from ..errors import InputError
from ..registries import Check, declare
from ..tables import CDOTS, Math, keep, norm_label, number, vector_math
from .init import PARAMS, initial_params
from .ranges import check_ranges
from .settings import (
    ALGO_CHECKS,
    ALGOS,
    LOSSES,
    NORMALIZE,
    NORMS,
    NTP_LOSS,
    NTP_SQUARE,
    REPLAY,
    SCHEDULES,
    Settings,
)

STOP_REASONS = ("steps", "underflow", "target_corr", "non-finite")
#: what a ``non-finite`` stop found, by code (0: nothing)
NONFINITE = ("", "parameters overflowed", "logits overflowed", "loss overflowed")
#: how the steps are computed (module docstring, "Kernels"), each with its independent check (:mod:`attsvm.registries`)
KERNELS = declare(
    "gd.KERNELS",
    {
        "auto": Check(REPLAY, "the 50-digit replay of the run of the kernel it takes (torch or fused)"),
        "torch": Check(REPLAY, "the 50-digit replay of the torch kernel's run"),
        "fused": Check(REPLAY, "the 50-digit replay of the fused kernel's run (ngd on W or KQ)"),
    },
)
#: the dtypes of a run, by name
DTYPES = ("float64", "float32")
#: the losses the fused kernel evaluates
FUSED_LOSSES = ("logistic", "exponential", "correlation", "nll")


@dataclass(repr=False)
class GDResult:
    """Final iterate and summaries (numpy, leading batch axis B; N = flat rows, one per query)."""

    param: str
    algo: str
    W: np.ndarray | None  # (B,d,d); K Q^T for KQ, diag(k q) for diag; None for p / vp
    K: np.ndarray | None  # (B,d,m) for KQ; the diagonal factor k (B,d) for diag
    Q: np.ndarray | None  # (B,d,m) for KQ; the diagonal factor q (B,d) for diag
    p: np.ndarray | None
    v: np.ndarray | None
    loss: np.ndarray  # (B,)
    norm: np.ndarray  # (B,) ||W||_F (or ||p||)
    selection: np.ndarray  # (B,N)
    log_softmax: np.ndarray  # (B,N,T)
    max_softmax: np.ndarray  # (B,N)
    stuck: np.ndarray  # (B,N) bool
    steps: np.ndarray  # (B,) int
    stop_reason: list[str]
    trajectory: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    lr: np.ndarray | None = None  # (B,) step sizes used
    nonfinite: list[str] = field(default_factory=list)  # (B,) what a "non-finite" stop found ("" otherwise)
    nonfinite_step: np.ndarray | None = None  # (B,) int: the update that produced it (-1 otherwise)
    settings: Settings | None = None  # how the steps were taken (algo, norm, schedule, Adam's betas / eps, ...)
    kernel: str = "torch"  # what computed them: "torch" or "fused" (module docstring, "Kernels")

    @property
    def B(self) -> int:
        return int(self.loss.shape[0])

    def params(self, b: int) -> dict[str, np.ndarray]:
        """Parameters of run ``b`` as a dict (keys W, K, Q, p, v when present)."""
        return {k: getattr(self, k)[b] for k in ("W", "K", "Q", "p", "v") if getattr(self, k) is not None}

    # ------------------------------------------------------------------ display
    def _stop_text(self, b: int) -> str:
        why = self.stop_reason[b]
        if why == "non-finite" and self.nonfinite and self.nonfinite[b]:
            at = "" if self.nonfinite_step is None else f" at update {int(self.nonfinite_step[b])}"
            why += f" ({self.nonfinite[b]}{at})"
        return why

    def __repr__(self) -> str:
        def short(a: Any) -> str:
            head = ", ".join(str(number(x, 6)) for x in np.asarray(a).ravel()[:4])
            return "[" + head + (", ..." if self.B > 4 else "") + "]"

        return (
            f"GDResult(param={self.param!r}, algo={self.algo!r}, B={self.B}, steps={short(self.steps)}, "
            f"stop_reason={self.stop_reason[:4]}{' ...' if self.B > 4 else ''}, loss={short(self.loss)}, "
            f"norm={short(self.norm)})"
        )

    def _repr_html_(self) -> str:
        r"""Parameterisation and algorithm; for one run its steps, stop reason, final loss, norm, the selection
        reached ($\arg\max_t s_{it}$ per query), stuck queries and the final iterate abbreviated; for a batch a
        table with one row per run (abbreviated)."""
        nl = norm_label("2", "p") if self.param in ("p", "vp") else norm_label("F", "W")
        rows = []
        for b in keep(self.B, 8):
            if b is None:
                rows.append([CDOTS] * 8)
                continue
            rows.append(
                [
                    b,
                    int(self.steps[b]),
                    self._stop_text(b),
                    float(self.loss[b]),
                    float(self.norm[b]),
                    Math(vector_math(self.selection[b], 4, 8)),
                    f"{int(np.sum(self.stuck[b]))} of {self.stuck.shape[-1]}",
                    float(np.min(self.max_softmax[b])),
                ]
            )
        if self.B == 1:
            r = rows[0]
            fields = [
                ("steps", r[1]),
                ("stop reason", r[2]),
                ("final loss", r[3]),
                ("norm", Math(nl + "=" + number(r[4], 6))),
                ("selection reached", r[5]),
                ("stuck queries", r[6]),
                ("smallest max softmax", r[7]),
                ("step size", None if self.lr is None else float(self.lr[0])),
                ("seconds", round(float(self.seconds), 3)),
            ]
            name = "W" if self.W is not None else ("p" if self.p is not None else None)
            sections = [] if name is None else [(f"final {name}", html.array(getattr(self, name)[0]))]
        else:
            fields = [("runs", self.B), ("seconds", round(float(self.seconds), 3))]
            head = ["run", "steps", "stop reason", "final loss", Math(nl), "selection reached", "stuck", "min max s"]
            sections = [("runs", html.rows_table(head, rows))]
        return html.card("GDResult", f"parameterisation {self.param}, algorithm {self.algo}", fields, sections)


def lr_of(lr: Any, B: int, ds: Any, loss: str) -> np.ndarray:
    """The (B,) step sizes of ``lr`` (a positive number, (B,) positive numbers, or ``"1/L"`` per data set)."""
    if isinstance(lr, str):
        if lr != "1/L":
            raise InputError(f"lr must be a positive number or '1/L', got {lr!r}")
        f = ds.flat()
        if loss == NTP_LOSS:
            from ..ntp.loss import smoothness_constant as ntp_smoothness

            L = np.atleast_1d(ntp_smoothness(f.X, f.Z, f.mask))
        else:
            from ..model import Arrays, smoothness_constant

            L = np.atleast_1d(smoothness_constant(Arrays(f.X, f.Y, f.Z, f.v, f.mask), loss))
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            out = np.broadcast_to(1.0 / L, (B,)).astype(np.float64)
        if not np.all(np.isfinite(out) & (out > 0)):
            b = int(np.argmax(~(np.isfinite(out) & (out > 0))))
            raise InputError(
                f"lr='1/L' (data set {b}): the smoothness constant L_W = {L.flat[b]:.3g} is not a positive "
                "float64 number for these data; give lr as a number"
            )
        return out
    arr = np.asarray(lr, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(B, float(arr))
    if arr.shape != (B,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise InputError(f"lr must be a positive number, '1/L', or (B,) positive numbers (B={B})")
    return arr


def trajectory_bytes(
    ds: Any,
    steps: int,
    record_every: int | None,
    *,
    param: str = "W",
    m: int | None = None,
    targets: int = 0,
    record_params: bool = False,
) -> int:
    r"""Bytes of the trajectory :func:`run` records for ``ds`` (B data sets of N flat rows, tokens of dimension d):
    $R=\lfloor\text{steps}/\text{record\_every}\rfloor+1$ rows (:class:`~attsvm.gd.trajectory.Recorder`), each
    the step (int64) and per data set ``loss``, ``norm`` and one ``corr:NAME`` per target (float64), per flat row
    ``selection`` (int64), ``max_softmax`` (float64) and ``stuck`` (bool), and with ``record_params`` the parameters
    (float64; $W$ too for ``KQ`` and ``diag``; ``m`` the width of ``KQ``). Exact for a float64 run that no stop
    rule ends early (tested), an upper bound otherwise; 0 without ``record_every``."""
    if record_every is None:
        return 0
    f = ds.flat()
    B = int(f.X.shape[0]) if ds.batched else 1
    N, d = int(f.X.shape[-3]), int(f.X.shape[-1])
    per_set = 8 * (2 + int(targets)) + N * (8 + 8 + 1)
    if record_params:
        shapes = [a.shape[1:] for a in initial_params(param, "zero", 1, d, d if m is None else int(m)).values()]
        shapes += [(d, d)] if param in ("KQ", "diag") else []
        per_set += 8 * sum(int(np.prod(s)) for s in shapes)
    return (int(steps) // int(record_every) + 1) * (8 + B * per_set)


def require_trajectory_memory(
    nbytes: float, steps: int, record_every: int, option: str = "record_every", what: str = "the recorded trajectory"
) -> None:
    """Refuse (:class:`~attsvm.errors.InputError`, exit 2 at the CLI) a trajectory of ``nbytes``
    (:func:`trajectory_bytes`) that would not fit in memory, before anything is allocated: the limit is
    :func:`attsvm.svm.budget.memory_limit` (physical memory, or ``ATTSVM_MEMORY_BYTES``), and the one-line message
    gives the estimate, the limit and a power of ten for ``option`` (``record_every`` / ``--record-every``) whose
    trajectory fits in half of it."""
    from ..svm.budget import human, memory_limit, require

    rows = int(steps) // int(record_every) + 1
    try:
        require(nbytes, f"{what} ({rows} rows: every {record_every} of {steps} steps)")
    except InputError as exc:
        limit = memory_limit() or 0
        fix = f"record fewer rows (a larger {option}) or take fewer steps"
        for every in (10**j for j in range(1, 20)):
            keep = int(steps) // every + 1
            if every > record_every and keep * nbytes / rows <= limit / 2:
                fix = f"record fewer rows: {option} {every} keeps {keep} rows, about {human(keep * nbytes / rows)}"
                break
        raise InputError(f"{exc}; {fix}") from None


def targets_of(targets: dict | None, param: str, B: int, d: int) -> dict[str, np.ndarray]:
    """Validated targets, (B, ...) each (for the ``corr:`` records and the ``target_corr`` rule)."""
    if not targets:
        return {}
    shape = (d,) if param in ("p", "vp") else (d, d)
    out = {}
    for name, t in targets.items():
        a = np.asarray(t, dtype=np.float64)
        if a.shape == shape:
            a = np.broadcast_to(a, (B, *shape))
        if a.shape != (B, *shape) or not np.all(np.isfinite(a)):
            raise InputError(f"target {name!r} must be finite with shape {shape} or {(B, *shape)}")
        if np.any(np.all(a.reshape(B, -1) == 0, axis=-1)):
            raise InputError(f"target {name!r} is zero")
        out[str(name)] = a
    return out


def _number(x: Any) -> bool:
    return isinstance(x, int | float | np.number) and not isinstance(x, bool) and bool(np.isfinite(x))


def settings_of(
    algo: str,
    param: str,
    ridge: Any = 0.0,
    q: Any = None,
    normalize: str = "per-factor",
    grad_eps: Any = 0.0,
    norm: str | None = None,
    schedule: str = "constant",
    adam_betas: Any = (0.9, 0.999),
    adam_eps: Any = 0.0,
) -> Settings:
    r"""Validated :class:`~attsvm.gd.settings.Settings` for :func:`run` (:class:`~attsvm.errors.InputError`
    naming the bad argument): ``param`` one of those declared for ``algo`` in
    :data:`~attsvm.gd.settings.ALGO_CHECKS` (each with its independent check); ``q`` finite $>1$, required by
    ``md`` / ``nmd`` (``W`` and ``p`` only) and by ``nsd``
    with ``norm="lq"``, refused elsewhere; ``norm`` in :data:`~attsvm.gd.settings.NORMS`, required by and only
    for ``nsd``; ``normalize`` / ``grad_eps`` only for ``ngd``; ``adam_betas`` $(\beta_1,\beta_2)$ with
    $0\le\beta_1<\sqrt{\beta_2}<1$ (the Adam step is then bounded, :func:`~attsvm.gd.ranges.adam_entry_bound`)
    and ``adam_eps`` $\ge0$ only for ``adam`` (other values than the defaults are refused elsewhere);
    ``schedule`` in :data:`~attsvm.gd.settings.SCHEDULES` (every algorithm)."""
    if algo not in ALGOS:
        raise InputError(f"algo must be one of {ALGOS}, got {algo!r}")
    runs_on = ALGO_CHECKS[algo]  # the parameterisations declared for it, each with its independent check
    if param not in runs_on:
        what = {"md": "mirror descent", "nmd": "normalised mirror descent"}.get(algo, f"algo {algo!r}")
        raise InputError(f"{what} is available for param {' and '.join(map(repr, runs_on))} only")
    if not _number(ridge) or ridge < 0:
        raise InputError("ridge must be a finite non-negative number")
    if normalize not in NORMALIZE:
        raise InputError(f"normalize must be one of {NORMALIZE}, got {normalize!r}")
    if not _number(grad_eps) or grad_eps < 0:
        raise InputError("grad_eps must be a finite non-negative number")
    if algo != "ngd" and (normalize != "per-factor" or grad_eps > 0):
        raise InputError("normalize and grad_eps apply to the normalised algorithm (algo 'ngd') only")
    if schedule not in SCHEDULES:
        raise InputError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if algo == "nsd":
        if norm not in NORMS:
            raise InputError(f"algo 'nsd' needs norm, one of {NORMS}, got {norm!r}")
    elif norm is not None:
        raise InputError(f"norm applies to algo 'nsd' only (got algo {algo!r})")
    uses_q = algo in ("md", "nmd") or (algo == "nsd" and norm == "lq")
    if uses_q:
        what = {"md": "mirror descent", "nmd": "normalised mirror descent"}.get(algo, "norm 'lq'")
        if not _number(q) or not float(q) > 1.0:
            raise InputError(f"{what} needs a finite q > 1 (the l_q {'norm' if algo == 'nsd' else 'potential'})")
        q = float(q)
    elif q is not None:
        raise InputError(f"q applies to algo 'md', 'nmd' and 'nsd' with norm 'lq' only (got algo {algo!r})")
    try:
        b1, b2 = (float(x) for x in adam_betas)
    except (TypeError, ValueError) as exc:
        raise InputError(f"adam_betas must be a pair of numbers (beta1, beta2), got {adam_betas!r}") from exc
    if not (np.isfinite(b1) and np.isfinite(b2) and 0.0 <= b1 and 0.0 < b2 < 1.0 and b1 * b1 < b2):
        raise InputError(f"adam_betas must satisfy 0 <= beta1 < sqrt(beta2) < 1, got {adam_betas!r}")
    if not _number(adam_eps) or adam_eps < 0:
        raise InputError("adam_eps must be a finite non-negative number")
    if algo != "adam" and ((b1, b2) != (0.9, 0.999) or adam_eps != 0):
        raise InputError("adam_betas and adam_eps apply to algo 'adam' only")
    return Settings(algo, float(ridge), q, normalize, float(grad_eps), norm, schedule, (b1, b2), float(adam_eps))


def dtype_name_of(dtype: Any) -> str:
    """``"float64"`` / ``"float32"`` for a name or a torch dtype; InputError otherwise."""
    name = str(dtype).replace("torch.", "")
    if name not in DTYPES:
        raise InputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    return name


def fused_applies(job: Job) -> bool:
    """Whether the fused CPU kernel (:mod:`.fused`) computes this run: ``ngd`` per factor (joint is the same for one
    factor), no ridge, no normaliser epsilon, on ``W`` or ``KQ``, a linear head, a loss of :data:`FUSED_LOSSES`,
    the CPU, float64."""
    S = job.settings
    return (
        S.algo == "ngd"
        and job.param in ("W", "KQ")
        and (S.normalize == "per-factor" or job.param == "W")
        and S.ridge == 0
        and S.grad_eps == 0
        and job.head is None
        and job.loss in FUSED_LOSSES
        and str(job.device) == "cpu"
        and job.dtype == "float64"
    )


@dataclass
class Job:
    """A validated run (everything :func:`run` checks without torch), handed to a kernel."""

    ds: Any
    param: str
    settings: Settings
    loss: str
    head: Any
    steps: int
    lr: np.ndarray  # (B,)
    init: dict[str, np.ndarray]  # the initial factors, (B, ...)
    targets: dict[str, np.ndarray]
    stop_corr: float | None
    record_every: int | None
    record_params: bool
    device: Any
    dtype: str

    def check_ranges(self, head: Any = None) -> None:
        """:func:`~attsvm.gd.ranges.check_ranges` for this run (``head``: the head on the device, if any)."""
        f = self.ds.flat()
        lead = (lambda a: a) if self.ds.batched else (lambda a: np.asarray(a)[None])  # noqa: E731
        S = self.settings
        check_ranges(
            X=lead(f.X),
            Z=lead(f.Z),
            v=lead(f.v),
            param=self.param,
            algo=S.algo,
            lr=self.lr,
            steps=self.steps,
            init=self.init,
            head=head,
            dtype=self.dtype,
            batched=self.ds.batched,
            schedule=S.schedule,
            norm=S.norm,
            q=S.q,
            adam_betas=S.adam_betas,
        )


def run(
    ds: Dataset,
    *,
    param: str = "W",
    algo: str = "ngd",
    lr: Any = 0.1,
    steps: int = 2000,
    q: float | None = None,
    m: int | None = None,
    ridge: float = 0.0,
    normalize: str = "per-factor",
    grad_eps: float = 0.0,
    norm: str | None = None,
    schedule: str = "constant",
    adam_betas: tuple[float, float] = (0.9, 0.999),
    adam_eps: float = 0.0,
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
) -> GDResult:
    r"""Run ``algo`` on ``param`` for every data set of ``ds`` at once (see the module and package docs).

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
    t0 = time.perf_counter()
    job = _prepare(
        ds, param, algo, lr, steps, q, m, ridge, normalize, grad_eps, norm, schedule, adam_betas, adam_eps, loss, head,
        init, init_scale, seed, record_every, targets, stop_corr, device, dtype, record_params, progress,
    )  # fmt: skip
    if job.record_every is not None:  # before anything is allocated
        width = int(job.init["K"].shape[-1]) if "K" in job.init else None
        nbytes = trajectory_bytes(
            ds, job.steps, job.record_every, param=job.param, m=width, targets=len(job.targets),
            record_params=job.record_params,
        )  # fmt: skip
        require_trajectory_memory(nbytes, job.steps, job.record_every)
    fused = fused_applies(job)
    if kernel == "fused" and not fused:
        raise InputError(
            "kernel 'fused' computes algo 'ngd' (per factor, ridge 0, grad_eps 0) on param 'W' or 'KQ' with a linear "
            f"head and the losses {', '.join(FUSED_LOSSES)}, on the CPU in float64; use kernel 'torch' or 'auto'"
        )
    if fused and kernel != "torch":
        from .fused import run_fused

        return run_fused(job, 1 if threads is None else int(threads), progress, t0)
    from .loop import run_torch

    return run_torch(job, threads, progress, t0)


def _prepare(
    ds, param, algo, lr, steps, q, m, ridge, normalize, grad_eps, norm, schedule, adam_betas, adam_eps, loss, head,
    init, init_scale, seed, record_every, targets, stop_corr, device, dtype, record_params, progress,
) -> Job:  # fmt: skip
    ntp = getattr(ds, "kind", None) == "ntp"
    if not (isinstance(ds, Dataset) or ntp):
        raise InputError("ds must be an attsvm Dataset or next-token data (attsvm.ntp.NTPData)")
    if param not in PARAMS:
        raise InputError(f"param must be one of {PARAMS}, got {param!r}")
    settings = settings_of(algo, param, ridge, q, normalize, grad_eps, norm, schedule, adam_betas, adam_eps)
    square = isinstance(head, str) and head == NTP_SQUARE
    if loss is None:
        loss = ("correlation" if square else NTP_LOSS) if ntp else "logistic"
    if loss not in LOSSES:
        raise InputError(f"loss must be one of {LOSSES}, got {loss!r}")
    if ntp and param in ("p", "vp"):
        raise InputError("next-token data train W, (K,Q) or diag")
    if ntp and not ((head is None and loss == NTP_LOSS) or (square and loss == "correlation")):
        raise InputError(
            f"next-token data take the loss {NTP_LOSS!r} (-log of the label's attention mass, no head), or "
            f"head={NTP_SQUARE!r} with loss 'correlation' (the squared loss of the vocabulary classifier)"
        )
    if not ntp and (loss == NTP_LOSS or square):
        raise InputError(f"loss {NTP_LOSS!r} and head {NTP_SQUARE!r} need next-token data (kind 'ntp')")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise InputError(f"steps must be a non-negative integer, got {steps!r}")
    steps = int(steps)
    if record_every is not None and (not isinstance(record_every, int | np.integer) or record_every < 1):
        raise InputError(f"record_every must be a positive integer, got {record_every!r}")
    if stop_corr is not None and not (isinstance(stop_corr, int | float) and np.isfinite(stop_corr) and stop_corr >= 0):
        raise InputError("stop_corr must be a finite non-negative number")
    if stop_corr is not None and not targets:
        raise InputError("stop_corr needs at least one target")
    if progress is not None and not callable(progress):
        raise InputError("progress must be None or a callable progress(k, steps)")
    dtype = dtype_name_of(dtype)
    f = ds.flat()
    B = int(f.X.shape[0]) if ds.batched else 1
    d = int(f.X.shape[-1])
    mw = d if m is None else int(m)
    if mw < 1:
        raise InputError(f"width m must be positive, got {m!r}")
    return Job(
        ds=ds,
        param=param,
        settings=settings,
        loss=loss,
        head=head,
        steps=steps,
        lr=lr_of(lr, B, ds, loss),
        init=initial_params(param, init, B, d, mw, seed, init_scale),
        targets=targets_of(targets, param, B, d),
        stop_corr=None if stop_corr is None else float(stop_corr),
        record_every=None if record_every is None else int(record_every),
        record_params=bool(record_params),
        device=device,
        dtype=dtype,
    )
