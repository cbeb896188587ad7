r"""The torch kernel of :func:`attsvm.gd.run`: every algorithm, parametrisation, head, device and dtype, batched
over the leading axis $B$ (one declared step of :mod:`attsvm.gd.algos` per iteration, the stop rules of
:mod:`.engine`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from .init import PARAMETERISATIONS
from .model_torch import TorchData, corr_t, loss_value_t, ntp_square_head
from .options import NTP_SQUARE
from .result import NONFINITE, STOP_REASONS, GDResult
from .spec import Job, batch_period, batch_rows, dtype_name_of
from .steps import Problem, W_of, forward, step_size
from .summary import Recorder, fields, record_row


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


def dtype_of(dtype: Any) -> torch.dtype:
    """``float64`` / ``float32`` as a torch dtype (validated by :func:`~attsvm.gd.spec.dtype_name_of`)."""
    return getattr(torch, dtype_name_of(dtype))


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


def _np(x: torch.Tensor | None) -> np.ndarray | None:
    return None if x is None else x.detach().cpu().numpy()


def _fields(P: Problem, fw, pr: torch.Tensor, opt: np.ndarray) -> dict[str, np.ndarray]:
    """The :func:`~attsvm.gd.summary.fields` of the iterate of the forward pass ``fw`` (primary parameter ``pr``);
    ``twolayer``: of layer 2, ``opt`` the visible argmax of its effective scores $g_{it}$ at this iterate."""
    if PARAMETERISATIONS[P.param].layered:
        g = fw[2] if P.D.mask is None else fw[2].masked_fill(~P.D.mask, float("-inf"))
        opt = _np(g.argmax(-1))
    return fields(_np(fw[0]), _np(fw[1]), _np(pr), opt, P.loss)


def run_torch(job: Job, threads: int | None, progress: Callable[[int, int], None] | None, t0: float) -> GDResult:
    """Run ``job`` with torch (``threads`` torch CPU threads, default 1, restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1 if threads is None else int(threads))
    try:
        with torch.inference_mode():
            return _run(job, progress, t0)
    finally:
        torch.set_num_threads(before)


def _run(job: Job, progress, t0: float) -> GDResult:
    ds, param, settings, loss, head, steps = job.ds, job.param, job.settings, job.loss, job.head, job.steps
    algo, record_every, record_params, stop_corr = settings.algo, job.record_every, job.record_params, job.stop_corr
    lr_np, th0 = job.lr, job.init
    dev, dt = device_of(job.device), dtype_of(job.dtype)
    D = TorchData.of(ds, dev, dt)
    B, N, T, d = D.X.shape
    square = isinstance(head, str) and head == NTP_SQUARE
    hd = ntp_square_head(ds, dev, dt) if square else head_of(head, B, d, param, dev, dt)
    job.check_ranges(hd)
    P = Problem(D, param, loss, hd, settings.freeze, settings.residual, settings.causal)
    lr_t = torch.as_tensor(lr_np, dtype=dt, device=dev)
    tg = {k: torch.as_tensor(np.array(a), dtype=dt, device=dev) for k, a in job.targets.items()}
    first = next(iter(tg), None)

    th = {k: torch.as_tensor(a, dtype=dt, device=dev) for k, a in th0.items()}
    A = settings.algorithm
    PZ = PARAMETERISATIONS[param]
    state = None if A.initial_state is None else A.initial_state(settings, th)  # e.g. a mirror dual, Adam's moments

    def primary(th_, fw_=None):  # the forward pass's W when it has one (KQ / diag: not formed twice)
        if not PZ.attention:
            return th_["p"]
        return W_of(th_) if fw_ is None else fw_[4]

    opt = _np(D.opt)
    tg_np = job.targets  # (B, ...) each, validated
    rec = None
    if record_every is not None:
        pshapes: dict[str, tuple[int, ...]] = {}
        if record_params:
            pshapes = {k: tuple(a.shape[1:]) for k, a in th.items()}
            if PZ.factored:
                pshapes["W"] = (d, d)
        rec = Recorder(record_every, steps, B, N, list(tg), pshapes)

    batches, period = minibatches(settings.minibatch, N, dev)
    # the problem of update k is problems[k % period]: the full loss, or one per mini-batch of the cycle (built once)
    problems = [P] if batches is None else [P.on_batch(rows, settings.minibatch) for rows in batches]
    streak = torch.zeros(B, dtype=torch.int64, device=dev)  # consecutive updates flagged "fixed point"
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
            pr_np = _np(primary(th, fw))
            params = {key: _np(a) for key, a in th.items()} if record_params else None
            rec.add(k, record_row(_fields(P, fw, primary(th, fw), opt), pr_np, tg_np, params, PZ.factored))
        if thr is not None:
            hit = corr_t(primary(th, fw), tg[first]) >= thr
            if bool((hit & active).any()):
                stop(hit, 2)
        if k == steps or not (everyone or bool(active.any())):
            break
        new, newstate, zero = A.step(
            settings, problems[k % period], th, fw, step_size(lr_t, k, settings.schedule), state, k
        )
        if batches is not None:  # a fixed point of the cyclic iteration: the flag over a whole period of batches
            streak = torch.where(zero, streak + 1, torch.zeros_like(streak))
            zero = streak >= period
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

    pr = primary(th, fw)  # the forward pass at the final iterate (kept with th throughout)
    return GDResult(
        param=param,
        algo=algo,
        W=_np(pr) if PZ.attention else None,
        K=_np(th.get("K", th.get("k"))),
        Q=_np(th.get("Q", th.get("q"))),
        p=_np(th.get("p")),
        v=_np(th.get("v")),
        W1=_np(th.get("W1")),
        W2=_np(th.get("W2")),
        **_fields(P, fw, pr, opt),
        steps=_np(taken),
        stop_reason=[STOP_REASONS[i] for i in _np(reason).tolist()],
        trajectory={} if rec is None else rec.result(),
        seconds=time.perf_counter() - t0,
        lr=lr_np,
        nonfinite=[NONFINITE[i] for i in _np(nf_code).tolist()],
        nonfinite_step=_np(nf_step),
        settings=settings,
    )


def minibatches(b: int | None, n: int, dev: torch.device) -> tuple[torch.Tensor | None, int]:
    r"""``(rows, period)``: the (period, n) bool rows of the mini-batches $B_0,\dots,B_{\text{period}-1}$
    (:func:`~attsvm.gd.spec.batch_rows`; they repeat after ``period`` $=n/\gcd(n,b)$ updates), or ``(None, 1)``
    for the full batch (``b`` None)."""
    if b is None:
        return None, 1
    period = batch_period(b, n)
    rows = np.zeros((period, n), dtype=bool)
    for k in range(period):
        rows[k, batch_rows(k, b, n)] = True
    return torch.as_tensor(rows, device=dev), period


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
