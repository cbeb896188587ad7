r"""The regularisation path (THEORY §1, claims ``rp-frobenius``, ``rp-nuclear``).

.. math:: \bar W_R\in\arg\min_{\|W\|_F\le R}\mathcal L(W)\qquad\text{(param ``W``; ``p``: }\|p\|\le R\text{)},

and for $(K,Q)$ the ball $\frac12(\|K\|_F^2+\|Q\|_F^2)\le R$ (by ``nuclear-variational`` this is the nuclear
ball $\|KQ^\top\|_\star\le R$ for $m\ge d$).

Each radius is solved by *projected normalised gradient descent* with the gradient direction taken in the
log domain (so large radii work far past float64 underflow), warm-started from the previous radius'
solution (radii must increase). Step sizes decrease geometrically over ``steps_per_radius`` steps from
$\eta_0\rho$ to $\eta_0\rho\cdot$``shrink``, with $\rho$ the Euclidean radius of the ball ($R$, or
$\sqrt{2R}$ for $(K,Q)$), so the final iterate is accurate to about $\eta_0\rho\cdot$``shrink``.
Projection: $W\leftarrow W\min(1,R/\|W\|_F)$; $(K,Q)\leftarrow(K,Q)\min(1,\sqrt{R/(\frac12\|K\|^2+\frac12\|Q\|^2)})$.

Scale safety: the direction is the power-of-two normalised $\hat G/\|\hat G\|$ of
:func:`~attsvm.gd.algorithms.scaled_gradients`, every norm is scale-safe (:func:`~attsvm.gd.numerics.fro_norm`),
and a path whose ball reaches logits $|x|\,|z|\,R$ (or $|x|\,R$ for $p$) beyond float64 is refused up front
(:func:`~attsvm.gd.ranges.check_ranges` with $R$ the largest radius). Exact scale relation (tested): for
data $(X,cZ)$, $c>0$, $\bar W_R(cZ)=\bar W_{cR}(Z)/c$, and the iterates of the two runs are related the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data import Dataset
from ..errors import InputError
from ..norms import frobenius_norm
from .init import initial_params
from .loop import device_of, dtype_of, head_of
from .model_torch import TorchData, loss_value_t
from .numerics import fro_norm
from .options import LOSSES
from .ranges import check_ranges
from .steps import Problem, W_of, forward, scaled_gradients
from .summary import selection_stats


@dataclass
class PathResult:
    """Solutions along the path: leading axis over radii, then the batch axis B."""

    param: str
    radii: np.ndarray  # (R,)
    W: np.ndarray | None  # (R,B,d,d): W, or K Q^T
    K: np.ndarray | None  # (R,B,d,m)
    Q: np.ndarray | None
    p: np.ndarray | None  # (R,B,d)
    loss: np.ndarray  # (R,B)
    norm: np.ndarray  # (R,B): ||W||_F (||p||)
    ball: np.ndarray  # (R,B): the constrained quantity (||W||_F, ||p||, or (|K|^2+|Q|^2)/2)
    selection: np.ndarray  # (R,B,N)
    max_softmax: np.ndarray  # (R,B,N)
    seconds: float = 0.0


def _ball(th: dict[str, torch.Tensor]) -> torch.Tensor:
    r"""$\|W\|_F$ / $\|p\|$, or $\frac12(\|K\|_F^2+\|Q\|_F^2)$, from scale-safe norms."""
    if "K" in th:
        return 0.5 * (fro_norm(th["K"]) ** 2 + fro_norm(th["Q"]) ** 2)
    (a,) = th.values()
    return fro_norm(a)


def _project(th: dict[str, torch.Tensor], R: float) -> dict[str, torch.Tensor]:
    val = _ball(th)
    f = torch.clamp(R / torch.clamp(val, min=torch.finfo(val.dtype).tiny), max=1.0)
    if "K" in th:
        f = torch.sqrt(f)
    return {k: a * f.view(-1, *([1] * (a.dim() - 1))) for k, a in th.items()}


def _project_cone(x: torch.Tensor, that: torch.Tensor, c: float) -> torch.Tensor:
    r"""Euclidean projection onto the convex cone $\{x:\langle x,\hat t\rangle\ge c\|x\|\}$ ($\hat t$ unit, $c\ge0$):
    inside points stay; otherwise $\max(0,ac+bs)\,(c\hat t+s\hat e)$ with $x=a\hat t+b\hat e$, $s=\sqrt{1-c^2}$."""
    shp = x.shape
    xf, tf = x.flatten(1), that.flatten(1)
    a = (xf * tf).sum(-1, keepdim=True)
    E = xf - a * tf
    b = fro_norm(E).unsqueeze(-1)
    sn = (1.0 - c * c) ** 0.5
    ehat = E / b.clamp(min=torch.finfo(x.dtype).tiny)
    proj = torch.clamp(a * c + b * sn, min=0.0) * (c * tf + sn * ehat)
    inside = a >= c * torch.hypot(a, b)
    return torch.where(inside, xf, proj).view(shp)


def regularization_path(
    ds: Dataset,
    radii: Any,
    *,
    param: str = "W",
    loss: str = "logistic",
    steps_per_radius: int = 1000,
    lr0: float = 0.1,
    shrink: float = 1e-4,
    m: int | None = None,
    head: Any = None,
    init: Any = "zero",
    seed: int = 0,
    cone: tuple[Any, float] | None = None,
    device: str = "cpu",
    dtype: str = "float64",
) -> PathResult:
    r"""$\bar W_R$ for every radius in ``radii`` (increasing), for every data set of ``ds`` at once.

    ``cone=(target, mu)`` (param ``W`` or ``p``) restricts the path to the convex cone
    $\{W:\mathrm{corr}(W,\text{target})\ge1-\mu\}$ (claim ``rp-local``): every iterate is projected onto the
    cone, then onto the ball (for a cone and a centred ball this is the projection onto their intersection).
    ``target`` (d,d) / (B,d,d) (p: (d,) / (B,d)), $0\le\mu\le1$."""
    t0 = time.perf_counter()
    if param not in ("W", "KQ", "p"):
        raise InputError(f"the regularisation path supports param 'W', 'KQ' or 'p', got {param!r}")
    if loss not in LOSSES:
        raise InputError(f"loss must be one of {LOSSES}, got {loss!r}")
    rr = np.asarray(radii, dtype=np.float64).ravel()
    if rr.size == 0 or not np.all(np.isfinite(rr)) or np.any(rr <= 0) or np.any(np.diff(rr) < 0):
        raise InputError("radii must be positive, finite and non-decreasing")
    if int(steps_per_radius) != steps_per_radius or steps_per_radius < 1:
        raise InputError("steps_per_radius must be a positive integer")
    if not (0 < shrink <= 1) or not lr0 > 0:
        raise InputError("need lr0 > 0 and 0 < shrink <= 1")
    dev, dt = device_of(device), dtype_of(dtype)
    if cone is not None:
        if param == "KQ":
            raise InputError("a cone restriction is available for param 'W' and 'p' only")
        try:
            tgt, mu = cone
            tgt = np.asarray(tgt, dtype=np.float64)
            mu = float(mu)
        except (TypeError, ValueError) as exc:
            raise InputError("cone must be (target, mu)") from exc
        shape = (ds.d,) if param == "p" else (ds.d, ds.d)
        B0 = ds.batch_size or 1
        if tgt.shape == shape:
            tgt = np.broadcast_to(tgt, (B0, *shape))
        if tgt.shape != (B0, *shape) or not np.all(np.isfinite(tgt)) or not 0.0 <= mu <= 1.0:
            raise InputError(f"cone target must be finite with shape {shape} or {(B0, *shape)}, and 0 <= mu <= 1")
        nt = frobenius_norm(tgt.reshape(B0, -1), axis=-1)
        if np.any(nt == 0):
            raise InputError("cone target is zero")
        that = torch.as_tensor(tgt / nt.reshape(B0, *([1] * len(shape))), dtype=dt, device=dev)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            D = TorchData.of(ds, dev, dt)
            B, N, T, d = D.X.shape
            hd = head_of(head, D, param, loss)
            th0 = initial_params(param, init, B, d, d if m is None else int(m), seed, None)
            f = ds.flat()
            lead = (lambda a: a) if ds.batched else (lambda a: np.asarray(a)[None])  # noqa: E731
            Rmax = float(rr[-1])
            # every iterate lies in the largest ball: ||W||_F <= R, ||p|| <= R, ||KQ^T||_F <= ||K|| ||Q|| <= R
            bound = {"W": {"W": Rmax}, "KQ": {"K": np.sqrt(Rmax), "Q": np.sqrt(Rmax)}, "p": {"p": Rmax}}
            check_ranges(
                X=lead(f.X),
                Z=lead(f.Z),
                v=lead(f.v),
                param=param,
                lr=np.zeros(B),
                steps=0,
                init={k: np.full((B, 1), r) for k, r in bound[param].items()},
                head=hd,
                dtype=dt,
                batched=ds.batched,
                path=True,
            )
            P = Problem(D, param, loss, hd)
            th = {k: torch.as_tensor(a, dtype=dt, device=dev) for k, a in th0.items()}
            sched = lr0 * shrink ** (np.arange(steps_per_radius) / max(1, steps_per_radius - 1))
            out: dict[str, list] = {k: [] for k in ("W", "K", "Q", "p", "loss", "norm", "ball", "sel", "mxs")}
            for R in rr:
                rho = float(np.sqrt(2 * R)) if param == "KQ" else float(R)
                if cone is not None:
                    th = {param: _project_cone(th[param], that, 1.0 - mu)}
                th = _project(th, R)
                for eta in sched:
                    grads = scaled_gradients(P, th, forward(P, th), log_domain=True)[0]
                    new = {}
                    for k, g in grads.items():  # g power-of-two normalised: its norm cannot over/underflow
                        nrm = torch.linalg.vector_norm(g.flatten(1), dim=-1)
                        # a zero direction (e.g. grad_K = G Q at Q = 0) is a zero step, never (eta rho / tiny) * 0
                        fac = torch.where(
                            nrm > 0, eta * rho / nrm.clamp(min=torch.finfo(dt).tiny), torch.zeros_like(nrm)
                        )
                        new[k] = th[k] - fac.view(-1, *([1] * (g.dim() - 1))) * g
                    if cone is not None:
                        new = {param: _project_cone(new[param], that, 1.0 - mu)}
                    th = _project(new, R)
                logs, u = forward(P, th)[:2]
                sel, mxs, _ = selection_stats(logs.cpu().numpy(), D.opt.cpu().numpy())
                pr = th["p"] if param == "p" else W_of(th)
                out["W"].append(None if param == "p" else pr.cpu().numpy())
                for k in ("K", "Q", "p"):
                    out[k].append(th[k].cpu().numpy() if k in th else None)
                out["loss"].append(loss_value_t(u, loss).mean(-1).cpu().numpy())
                out["norm"].append(fro_norm(pr).cpu().numpy())
                out["ball"].append(_ball(th).cpu().numpy())
                out["sel"].append(sel)
                out["mxs"].append(mxs)
    finally:
        torch.set_num_threads(before)
    st = lambda k: None if out[k][0] is None else np.stack(out[k])  # noqa: E731
    return PathResult(
        param=param,
        radii=rr,
        W=st("W"),
        K=st("K"),
        Q=st("Q"),
        p=st("p"),
        loss=st("loss"),
        norm=st("norm"),
        ball=st("ball"),
        selection=st("sel"),
        max_softmax=st("mxs"),
        seconds=time.perf_counter() - t0,
    )
