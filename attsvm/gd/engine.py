r"""The batched gradient-descent engine: :func:`run` and its result :class:`GDResult`.

One call runs the chosen algorithm on every data set of a batch at once (leading axis $B$; a single
data set is a batch of one), on ``device`` in ``dtype`` (float64 default), deterministically for a seed. The
algorithms (:data:`~attsvm.gd.algorithms.ALGOS`: ``gd``, ``ngd``, ``md``, ``nsd``, ``adam``, ``nmd``) and step
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

**Scale safety** (:mod:`.numerics`). Every direction, step, norm and correlation is computed from exact
power-of-two rescalings (bit-identical to the plain formulas where those are representable). Before a run,
:func:`~attsvm.gd.numerics.check_ranges` refuses (:class:`~attsvm.errors.InputError`) data and settings
whose scores $|x|\,|v|$, logits $|x|\,|z|\,R$ or parameter norms $R$ could leave float64 — for ``ngd``
$R=\|\theta_0\|+\eta\cdot$``steps`` bounds the whole run ($\|\theta_{k+1}-\theta_k\|=\eta$ per factor), for
``nsd`` / ``adam`` / ``nmd`` the same with the step bound of the algorithm and $\sum_k\eta_k$ of the schedule
(:func:`~attsvm.gd.numerics.step_bound`); for ``gd`` / ``md`` $R=\|\theta_0\|$ — and an initial point whose
logits or loss are not finite is bad input too.
So a run either runs correctly, or is refused with one line naming the field and the bound, or stops
``non-finite`` at its last finite iterate: never a silent zero or NaN.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import html
from ..data import Dataset
from ..errors import InputError
from ..tables import CDOTS, Math, keep, norm_label, number, vector_math
from .algorithms import ALGOS, NORMALIZE, SCHEDULES, Problem, Settings, W_of, forward, initial_state, step
from .init import PARAMS, initial_params
from .model_torch import LOSSES, NTP_LOSS, NTP_SQUARE, TorchData, corr_t, loss_value_t, ntp_square_head
from .numerics import check_ranges, fro_norm
from .steepest import NORMS
from .trajectory import Recorder, summaries

STOP_REASONS = ("steps", "underflow", "target_corr", "non-finite")
#: what a ``non-finite`` stop found, by code (0: nothing)
NONFINITE = ("", "parameters overflowed", "logits overflowed", "loss overflowed")


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


def device_of(device: str) -> torch.device:
    """A validated torch device (``cpu``, ``cuda``, ``cuda:N``); InputError otherwise."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"unknown device {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device 'cuda' requested but no CUDA device is available")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return dev


def dtype_of(dtype: str) -> torch.dtype:
    """``float64`` / ``float32`` as a torch dtype; InputError otherwise."""
    table = {"float64": torch.float64, "float32": torch.float32}
    if str(dtype).replace("torch.", "") not in table:
        raise InputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    return table[str(dtype).replace("torch.", "")]


def head_of(head: Any, B: int, d: int, param: str, dev, dt):
    """A validated nonlinear head (None, ``("relu", V)`` with V on the device, ``("quadratic", lam)``)."""
    if head is None:
        return None
    if param == "vp":
        raise InputError("a nonlinear head is not available for joint (v,p) training")
    if not (isinstance(head, tuple | list) and len(head) == 2):
        raise InputError("head must be None, ('relu', V) or ('quadratic', lam)")
    kind, par = head
    if kind == "relu":
        V = np.asarray(par, dtype=np.float64)
        if V.ndim == 2:
            V = np.broadcast_to(V, (B, *V.shape))
        if V.ndim != 3 or V.shape[:2] != (B, d) or not np.all(np.isfinite(V)):
            raise InputError(f"relu head V must be finite with shape (d,d') or (B,d,d'), d={d}")
        return ("relu", torch.as_tensor(np.ascontiguousarray(V), dtype=dt, device=dev))
    if kind == "quadratic":
        lam = float(par)
        if not np.isfinite(lam):
            raise InputError("quadratic head lambda must be finite")
        return ("quadratic", lam)
    raise InputError(f"unknown head {kind!r}; expected 'relu' or 'quadratic'")


def _lr(lr: Any, D: TorchData, ds: Dataset, loss: str) -> np.ndarray:
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
            out = np.broadcast_to(1.0 / L, (D.B,)).astype(np.float64)
        if not np.all(np.isfinite(out) & (out > 0)):
            b = int(np.argmax(~(np.isfinite(out) & (out > 0))))
            raise InputError(
                f"lr='1/L' (data set {b}): the smoothness constant L_W = {L.flat[b]:.3g} is not a positive "
                "float64 number for these data; give lr as a number"
            )
        return out
    arr = np.asarray(lr, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(D.B, float(arr))
    if arr.shape != (D.B,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise InputError(f"lr must be a positive number, '1/L', or (B,) positive numbers (B={D.B})")
    return arr


def _targets(targets: dict | None, param: str, B: int, d: int) -> dict[str, np.ndarray]:
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


def _summary(P: Problem, th, fw, pr, tg, record_params: bool) -> dict[str, torch.Tensor]:
    logs, u = fw[0], fw[1]
    sel, mxs, stk, _ = summaries(logs, P.D.opt)
    vals = {
        "loss": loss_value_t(u, P.loss).mean(-1),
        "norm": fro_norm(pr),
        "selection": sel,
        "max_softmax": mxs,
        "stuck": stk,
    }
    for name, tgt in tg.items():
        vals[f"corr:{name}"] = corr_t(pr, tgt)
    if record_params:
        vals.update(th)
        if P.param in ("KQ", "diag"):
            vals["W"] = pr
    return vals


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
    r"""Validated :class:`~attsvm.gd.algorithms.Settings` for :func:`run` (:class:`~attsvm.errors.InputError`
    naming the bad argument): ``q`` finite $>1$, required by ``md`` / ``nmd`` (``W`` and ``p`` only) and by ``nsd``
    with ``norm="lq"``, refused elsewhere; ``norm`` in :data:`~attsvm.gd.steepest.NORMS`, required by and only
    for ``nsd``; ``normalize`` / ``grad_eps`` only for ``ngd``; ``adam_betas`` $(\beta_1,\beta_2)$ with
    $0\le\beta_1<\sqrt{\beta_2}<1$ (the Adam step is then bounded, :func:`~attsvm.gd.numerics.adam_entry_bound`)
    and ``adam_eps`` $\ge0$ only for ``adam`` (other values than the defaults are refused elsewhere);
    ``schedule`` in :data:`~attsvm.gd.algorithms.SCHEDULES` (every algorithm)."""
    if algo not in ALGOS:
        raise InputError(f"algo must be one of {ALGOS}, got {algo!r}")
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
        if algo in ("md", "nmd") and param not in ("W", "p"):
            raise InputError(f"{what} is available for param 'W' and 'p' only")
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
) -> GDResult:
    r"""Run ``algo`` on ``param`` for every data set of ``ds`` at once (see the module and package docs).

    Returns a :class:`GDResult` whose arrays have a leading batch axis (B=1 for a single data set).
    ``threads``: torch CPU threads during the run (default 1: the per-step tensors are small, and one
    thread per process is fastest on a shared machine); the previous setting is restored afterwards.
    ``progress``: called as ``progress(k, steps)`` with $k=0,1,\dots$ updates done, before update $k+1$; the last
    call has ``k == steps``, or a smaller $k$ when every data set stopped earlier. It receives Python integers
    only (no device synchronisation) and cannot change the iterates."""
    if threads is not None and (int(threads) != threads or threads < 1):
        raise InputError(f"threads must be a positive integer, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(1 if threads is None else int(threads))
    try:
        with torch.inference_mode():
            return _run(**{k: v for k, v in locals().items() if k not in ("threads", "before")})
    finally:
        torch.set_num_threads(before)


def _run(
    ds,
    param,
    algo,
    lr,
    steps,
    q,
    m,
    ridge,
    normalize,
    grad_eps,
    norm,
    schedule,
    adam_betas,
    adam_eps,
    loss,
    head,
    init,
    init_scale,
    seed,
    record_every,
    targets,
    stop_corr,
    device,
    dtype,
    record_params,
    progress,
) -> GDResult:
    t0 = time.perf_counter()
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
    dev, dt = device_of(device), dtype_of(dtype)

    D = TorchData.of(ds, dev, dt)
    B, N, T, d = D.X.shape
    mw = d if m is None else int(m)
    if mw < 1:
        raise InputError(f"width m must be positive, got {m!r}")
    hd = ntp_square_head(ds, dev, dt) if square else head_of(head, B, d, param, dev, dt)
    lr_np = _lr(lr, D, ds, loss)
    th0 = initial_params(param, init, B, d, mw, seed, init_scale)
    f = ds.flat()
    lead = (lambda a: a) if ds.batched else (lambda a: np.asarray(a)[None])  # noqa: E731
    check_ranges(
        X=lead(f.X),
        Z=lead(f.Z),
        v=lead(f.v),
        param=param,
        algo=algo,
        lr=lr_np,
        steps=steps,
        init=th0,
        head=hd,
        dtype=dt,
        batched=ds.batched,
        schedule=settings.schedule,
        norm=settings.norm,
        q=settings.q,
        adam_betas=settings.adam_betas,
    )
    P = Problem(D, param, loss, hd)
    lr_t = torch.as_tensor(lr_np, dtype=dt, device=dev)
    tg = {k: torch.as_tensor(np.array(a), dtype=dt, device=dev) for k, a in _targets(targets, param, B, d).items()}
    first = next(iter(tg), None)

    th = {k: torch.as_tensor(a, dtype=dt, device=dev) for k, a in th0.items()}
    state = initial_state(settings, th)  # md / nmd: the dual iterate; adam: the moments

    def primary(th_, fw_=None):  # the forward pass's W when it has one (KQ / diag: not formed twice)
        if param in ("p", "vp"):
            return th_["p"]
        return W_of(th_) if fw_ is None else fw_[4]

    rec = None
    if record_every is not None:
        pshapes: dict[str, tuple[int, ...]] = {}
        if record_params:
            pshapes = {k: tuple(a.shape[1:]) for k, a in th.items()}
            if param in ("KQ", "diag"):
                pshapes["W"] = (d, d)
        rec = Recorder(record_every, steps, B, N, list(tg), pshapes, D.X)

    active = torch.ones(B, dtype=torch.bool, device=dev)
    taken = torch.zeros(B, dtype=torch.int64, device=dev)  # steps taken after the first stop
    common = 0  # steps taken while every data set was active
    everyone = True
    reason = torch.zeros(B, dtype=torch.int64, device=dev)  # index into STOP_REASONS
    nf_code = torch.zeros(B, dtype=torch.int64, device=dev)  # index into NONFINITE
    nf_step = torch.full((B,), -1, dtype=torch.int64, device=dev)
    thr = None if stop_corr is None else 1.0 - float(stop_corr)

    def stop(mask: torch.Tensor, code: int) -> None:
        nonlocal active, reason, everyone
        hit = active & mask
        reason = torch.where(hit, torch.full_like(reason, code), reason)
        active = active & ~hit
        everyone = False

    fw = forward(P, th)
    code0 = nonfinite_code(P, th, fw, state)
    if bool((code0 > 0).any()):
        b = int(torch.argmax((code0 > 0).to(torch.int64)))
        where = f" (data set {b})" if ds.batched else ""
        raise InputError(
            f"init{where}: {NONFINITE[int(code0[b])]} at the initial point ({str(dt).replace('torch.', '')}); "
            "rescale the data or change init"
        )
    for k in range(steps + 1):
        if progress is not None:
            progress(k, steps)
        if rec is not None and rec.due(k):
            rec.add(k, _summary(P, th, fw, primary(th, fw), tg, record_params))
        if thr is not None:
            hit = corr_t(primary(th, fw), tg[first]) >= thr
            if bool((hit & active).any()):
                stop(hit, 2)
        if k == steps or not (everyone or bool(active.any())):
            break
        new, newstate, zero = step(settings, P, th, fw, lr_t, state, k)
        fw_new = forward(P, new)
        ok = outputs_finite(P, fw_new)  # non-finite parameters make the outputs non-finite too
        if bool(((zero | ~ok) & active).any()):  # one host sync per step for both stop rules
            stop(zero, 1)
            code = nonfinite_code(P, new, fw_new, newstate)
            bad = (code > 0) & active
            nf_code = torch.where(bad, code, nf_code)
            nf_step = torch.where(bad, torch.full_like(nf_step, k + 1), nf_step)
            stop(bad, 3)
        if everyone:
            th, state, fw = new, newstate, fw_new
            common += 1
            continue
        for key in th:
            th[key] = torch.where(active.view(B, *([1] * (th[key].dim() - 1))), new[key], th[key])
        if state is not None:
            for key in state:
                state[key] = torch.where(active.view(B, *([1] * (state[key].dim() - 1))), newstate[key], state[key])
        fw = _merge(active, fw_new, fw)
        taken += active.to(torch.int64)
    taken += common

    logs, u = fw[:2]  # the forward pass at the final iterate (kept with th throughout)
    sel, mxs, stk, _ = summaries(logs, D.opt)
    pr = primary(th, fw)
    npy = lambda x: None if x is None else x.detach().cpu().numpy()  # noqa: E731
    return GDResult(
        param=param,
        algo=algo,
        W=npy(pr) if param in ("W", "KQ", "diag") else None,
        K=npy(th.get("K", th.get("k"))),
        Q=npy(th.get("Q", th.get("q"))),
        p=npy(th.get("p")),
        v=npy(th.get("v")),
        loss=npy(loss_value_t(u, loss).mean(-1)),
        norm=npy(fro_norm(pr)),
        selection=npy(sel),
        log_softmax=npy(logs),
        max_softmax=npy(mxs),
        stuck=npy(stk),
        steps=npy(taken),
        stop_reason=[STOP_REASONS[i] for i in npy(reason).tolist()],
        trajectory={} if rec is None else rec.result(),
        seconds=time.perf_counter() - t0,
        lr=lr_np,
        nonfinite=[NONFINITE[i] for i in npy(nf_code).tolist()],
        nonfinite_step=npy(nf_step),
        settings=settings,
    )


def outputs_finite(P: Problem, fw) -> torch.Tensor:
    r"""(B,) bool: the outputs $u_i$ and the loss $\frac1N\sum_i\ell(u_i)$ are finite (fast: two reductions).
    A non-finite parameter always shows here: it makes every logit, hence $\log s$ and $u$, non-finite."""
    u = fw[1]
    ok = torch.isfinite(u).all(-1)
    if P.loss == "exponential":  # logistic log(1+e^{-u}) <= |u| + log 2 and correlation -u are finite with u
        ok &= torch.isfinite(loss_value_t(u, P.loss).mean(-1))
    return ok


def nonfinite_code(P: Problem, th: dict[str, torch.Tensor], fw, state: dict[str, torch.Tensor] | None) -> torch.Tensor:
    r"""(B,) index into :data:`NONFINITE` of the first non-finite quantity at $\theta$: 1 parameters (or the
    optimizer state: the mirror-descent dual, Adam's moments), 2 logits / outputs $u_i$ (the log-softmax of an
    overflowed logit is NaN), 3 the loss $\ell(u_i)$ (e.g. $e^{-u}$ overflowing); 0 when everything is finite."""
    ok_p = None
    for a in [*th.values(), *(state or {}).values()]:
        o = torch.isfinite(a.reshape(a.shape[0], -1)).all(-1)
        ok_p = o if ok_p is None else ok_p & o
    u = fw[1]
    ok_u = torch.isfinite(u).all(-1)
    ok_l = torch.isfinite(loss_value_t(u, P.loss).mean(-1))
    one = torch.ones_like(u[:, 0], dtype=torch.int64)
    return torch.where(~ok_p, one, torch.where(~ok_u, 2 * one, torch.where(~ok_l, 3 * one, 0 * one)))


def _merge(active: torch.Tensor, new, old):
    """``new`` where a data set is active, else ``old`` (nested tuples of (B, ...) tensors)."""
    if isinstance(new, tuple):
        return tuple(_merge(active, a, b) for a, b in zip(new, old))
    if new is old:
        return new
    return torch.where(active.view(-1, *([1] * (new.dim() - 1))), new, old)
