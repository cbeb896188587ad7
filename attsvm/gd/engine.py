r"""The batched gradient-descent engine: :func:`run` and its result :class:`GDResult`.

One call runs the chosen algorithm on every data set of a batch at once (leading axis $B$; a single
data set is a batch of one), on ``device`` in ``dtype`` (float64 default), deterministically for a seed.

Stop rules, checked per data set (a stopped data set is frozen while the others go on):

* ``"steps"``: ``steps`` updates taken;
* ``"underflow"``: the loss gradient of every factor is exactly zero in floating point (plain ``gd`` /
  ``md`` once $s_{it}s_{i\tau}$ underflow; ``ngd`` computes the direction in the log domain and only
  stops so at a true stationary point) — no $0/0$ step is ever taken;
* ``"target_corr"``: before each update $k$ (and at $k=0$), if
  $\mathrm{corr}(\theta_k,\text{first target})\ge1-$``stop_corr`` the run stops with $k$ steps taken.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..data import Dataset
from ..errors import InputError
from .algorithms import ALGOS, Problem, W_of, dual_of_primal, forward, step
from .init import PARAMS, initial_params
from .model_torch import LOSSES, TorchData, corr_t, loss_value_t
from .trajectory import Recorder, summaries

STOP_REASONS = ("steps", "underflow", "target_corr")


@dataclass
class GDResult:
    """Final iterate and summaries (numpy, leading batch axis B; N = flat rows, one per query)."""

    param: str
    algo: str
    W: np.ndarray | None  # (B,d,d); K Q^T for KQ; None for p / vp
    K: np.ndarray | None
    Q: np.ndarray | None
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

    @property
    def B(self) -> int:
        return int(self.loss.shape[0])

    def params(self, b: int) -> dict[str, np.ndarray]:
        """Parameters of run ``b`` as a dict (keys W, K, Q, p, v when present)."""
        return {k: getattr(self, k)[b] for k in ("W", "K", "Q", "p", "v") if getattr(self, k) is not None}


def _device(device: str) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"unknown device {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device 'cuda' requested but no CUDA device is available")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return dev


def _dtype(dtype: str) -> torch.dtype:
    table = {"float64": torch.float64, "float32": torch.float32}
    if str(dtype).replace("torch.", "") not in table:
        raise InputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    return table[str(dtype).replace("torch.", "")]


def _head(head: Any, B: int, d: int, param: str, dev, dt):
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
        from ..model import Arrays, smoothness_constant

        f = ds.flat()
        L = np.atleast_1d(smoothness_constant(Arrays(f.X, f.Y, f.Z, f.v, f.mask), loss))
        return 1.0 / L
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
        if np.any(np.linalg.norm(a.reshape(B, -1), axis=-1) == 0):
            raise InputError(f"target {name!r} is zero")
        out[str(name)] = a
    return out


def _summary(P: Problem, th, fw, pr, tg, record_params: bool) -> dict[str, torch.Tensor]:
    logs, u = fw[0], fw[1]
    sel, mxs, stk, _ = summaries(logs, P.D.opt)
    vals = {
        "loss": loss_value_t(u, P.loss).mean(-1),
        "norm": torch.linalg.vector_norm(pr.flatten(1), dim=-1),
        "selection": sel,
        "max_softmax": mxs,
        "stuck": stk,
    }
    for name, tgt in tg.items():
        vals[f"corr:{name}"] = corr_t(pr, tgt)
    if record_params:
        vals.update(th)
        if P.param == "KQ":
            vals["W"] = pr
    return vals


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
    loss: str = "logistic",
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
) -> GDResult:
    r"""Run ``algo`` on ``param`` for every data set of ``ds`` at once (see the module and package docs).

    Returns a :class:`GDResult` whose arrays have a leading batch axis (B=1 for a single data set).
    ``threads``: torch CPU threads during the run (default 1: the per-step tensors are small, and one
    thread per process is fastest on a shared machine); the previous setting is restored afterwards."""
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
) -> GDResult:
    t0 = time.perf_counter()
    if not isinstance(ds, Dataset):
        raise InputError("ds must be an attsvm Dataset")
    if param not in PARAMS:
        raise InputError(f"param must be one of {PARAMS}, got {param!r}")
    if algo not in ALGOS:
        raise InputError(f"algo must be one of {ALGOS}, got {algo!r}")
    if loss not in LOSSES:
        raise InputError(f"loss must be one of {LOSSES}, got {loss!r}")
    if algo == "md":
        if param not in ("W", "p"):
            raise InputError("mirror descent is available for param 'W' and 'p' only")
        if not isinstance(q, int | float | np.number) or not np.isfinite(q) or not float(q) > 1.0:
            raise InputError("mirror descent needs a finite q > 1 (the l_q potential)")
        q = float(q)
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise InputError(f"steps must be a non-negative integer, got {steps!r}")
    steps = int(steps)
    if record_every is not None and (not isinstance(record_every, int | np.integer) or record_every < 1):
        raise InputError(f"record_every must be a positive integer, got {record_every!r}")
    if not isinstance(ridge, int | float | np.number) or not (np.isfinite(ridge) and ridge >= 0):
        raise InputError("ridge must be a finite non-negative number")
    if stop_corr is not None and not (isinstance(stop_corr, int | float) and np.isfinite(stop_corr) and stop_corr >= 0):
        raise InputError("stop_corr must be a finite non-negative number")
    if stop_corr is not None and not targets:
        raise InputError("stop_corr needs at least one target")
    dev, dt = _device(device), _dtype(dtype)

    D = TorchData.of(ds, dev, dt)
    B, N, T, d = D.X.shape
    mw = d if m is None else int(m)
    if mw < 1:
        raise InputError(f"width m must be positive, got {m!r}")
    P = Problem(D, param, loss, _head(head, B, d, param, dev, dt))
    lr_np = _lr(lr, D, ds, loss)
    lr_t = torch.as_tensor(lr_np, dtype=dt, device=dev)
    tg = {k: torch.as_tensor(np.array(a), dtype=dt, device=dev) for k, a in _targets(targets, param, B, d).items()}
    first = next(iter(tg), None)

    th = {
        k: torch.as_tensor(a, dtype=dt, device=dev)
        for k, a in initial_params(param, init, B, d, mw, seed, init_scale).items()
    }
    dual = {k: dual_of_primal(a, q) for k, a in th.items()} if algo == "md" else None

    def primary(th_):
        return th_["p"] if param in ("p", "vp") else W_of(th_)

    rec = None
    if record_every is not None:
        pshapes: dict[str, tuple[int, ...]] = {}
        if record_params:
            pshapes = {k: tuple(a.shape[1:]) for k, a in th.items()}
            if param == "KQ":
                pshapes["W"] = (d, d)
        rec = Recorder(record_every, steps, B, N, list(tg), pshapes, D.X)

    active = torch.ones(B, dtype=torch.bool, device=dev)
    taken = torch.zeros(B, dtype=torch.int64, device=dev)  # steps taken after the first stop
    common = 0  # steps taken while every data set was active
    everyone = True
    reason = torch.zeros(B, dtype=torch.int64, device=dev)  # index into STOP_REASONS
    thr = None if stop_corr is None else 1.0 - float(stop_corr)

    def stop(mask: torch.Tensor, code: int) -> None:
        nonlocal active, reason, everyone
        hit = active & mask
        reason = torch.where(hit, torch.full_like(reason, code), reason)
        active = active & ~hit
        everyone = False

    for k in range(steps + 1):
        fw = forward(P, th)
        if rec is not None and rec.due(k):
            rec.add(k, _summary(P, th, fw, primary(th), tg, record_params))
        if thr is not None:
            hit = corr_t(primary(th), tg[first]) >= thr
            if bool((hit & active).any()):
                stop(hit, 2)
        if k == steps or not (everyone or bool(active.any())):
            break
        new, newdual, zero = step(algo, P, th, fw, lr_t, ridge, q, dual)
        if bool((zero & active).any()):
            stop(zero, 1)
        if everyone:
            th = new
            dual = newdual
            common += 1
            continue
        for key in th:
            th[key] = torch.where(active.view(B, *([1] * (th[key].dim() - 1))), new[key], th[key])
        if dual is not None:
            for key in dual:
                dual[key] = torch.where(active.view(B, *([1] * (dual[key].dim() - 1))), newdual[key], dual[key])
        taken += active.to(torch.int64)
    taken += common

    logs, u = forward(P, th)[:2]
    sel, mxs, stk, _ = summaries(logs, D.opt)
    pr = primary(th)
    npy = lambda x: None if x is None else x.detach().cpu().numpy()  # noqa: E731
    return GDResult(
        param=param,
        algo=algo,
        W=npy(pr) if param in ("W", "KQ") else None,
        K=npy(th.get("K")),
        Q=npy(th.get("Q")),
        p=npy(th.get("p")),
        v=npy(th.get("v")),
        loss=npy(loss_value_t(u, loss).mean(-1)),
        norm=npy(torch.linalg.vector_norm(pr.flatten(1), dim=-1)),
        selection=npy(sel),
        log_softmax=npy(logs),
        max_softmax=npy(mxs),
        stuck=npy(stk),
        steps=npy(taken),
        stop_reason=[STOP_REASONS[i] for i in npy(reason).tolist()],
        trajectory={} if rec is None else rec.result(),
        seconds=time.perf_counter() - t0,
        lr=lr_np,
    )
