r"""One step of each algorithm (THEORY §1), batched over the leading axis $B$.

Parameters $\theta$ are a dict of tensors: ``{"W"}``, ``{"K","Q"}`` ($W=KQ^\top$), ``{"p"}`` or ``{"v","p"}``.

* ``gd``: $\theta_{k+1}=\theta_k-\eta\,(\nabla\mathcal L(\theta_k)+2\lambda\theta_k)$ (plain float gradient).
* ``ngd``: per factor $\theta\leftarrow\theta-\eta\,g_\theta/\|g_\theta\|_F$,
  $g_\theta=\nabla_\theta\mathcal L+2\lambda\theta$,
  with $\nabla_\theta\mathcal L$ computed *in the log domain* up to the positive scale $e^{M}$
  (:func:`~attsvm.gd.model_torch.token_weights_logdomain`); the ridge is folded in as
  $e^{M-c}\tilde g_\theta+e^{\log 2\lambda-c}\theta$, $c=\max(M,\log2\lambda)$, so nothing overflows.
* ``md``: mirror descent with $\psi(W)=\frac1q\|W\|_q^q$: dual iterate $D=\nabla\psi(W)=\mathrm{sign}(W)|W|^{q-1}$,
  $D_{k+1}=D_k-\eta\nabla\mathcal L(W_k)$, $W=\mathrm{sign}(D)|D|^{1/(q-1)}$ (plain gradient).

A factor whose gradient is exactly zero takes no step (never $0/0$); when the loss gradient of every
factor is exactly zero the data set stops with reason ``underflow``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .model_torch import (
    TorchData,
    grad_from_weights_p,
    grad_from_weights_W,
    head_outputs,
    log_softmax_parts,
    logits_p,
    logits_W,
    loss_derivative_t,
    token_weights,
    token_weights_logdomain,
)

ALGOS = ("gd", "ngd", "md")


@dataclass
class Problem:
    """What is optimised: data, parametrisation, loss and head (fixed during a run)."""

    D: TorchData
    param: str
    loss: str = "logistic"
    head: tuple | None = None

    @property
    def fixed_scores(self) -> bool:
        """Scores do not change during the run (linear head with the data set's fixed v)."""
        return self.head is None and self.param != "vp"


def W_of(th: dict[str, torch.Tensor]) -> torch.Tensor:
    """The attention matrix: ``W`` or $KQ^\top$."""
    return th["W"] if "W" in th else torch.matmul(th["K"], th["Q"].transpose(-1, -2))


def forward(P: Problem, th: dict[str, torch.Tensor]):
    """Return ``(log s, u, effective scores, parts)`` at $\\theta$: (B,N,T), (B,N), (B,N,T) and the
    :func:`~attsvm.gd.model_torch.log_softmax_parts` pieces ``(e, log Z, t1)``."""
    D = P.D
    a = logits_p(D.X, th["p"]) if P.param in ("p", "vp") else logits_W(D.X, W_of(th), D.Z, D.XT)
    logs, e, lz, top = log_softmax_parts(a, D.mask)
    s = e * torch.exp(-lz)
    if P.fixed_scores:
        return logs, (s * D.gamma).sum(-1), D.gamma, (e, lz, top)
    u, ghat = head_outputs(D.X, D.Y, th.get("v", D.v), s, P.head)
    return logs, u, ghat, (e, lz, top)


def gradients(P: Problem, th: dict[str, torch.Tensor], fw, log_domain: bool):
    """Loss gradients per factor and their log-scales: ``(grads, logscale)``; the true gradient of factor
    ``k`` is ``exp(logscale[k]) * grads[k]`` (logscale 0 in the plain mode)."""
    logs, u, ghat, parts = fw
    D = P.D
    if log_domain:
        w, M = token_weights_logdomain(logs, ghat, u, P.loss, parts)
    else:
        w = token_weights(logs, ghat, u, P.loss)
        M = torch.zeros(D.B, dtype=D.X.dtype, device=D.X.device)
    if P.param == "W":
        return {"W": grad_from_weights_W(w, D.X, D.Z, D.XT)}, {"W": M}
    if P.param == "KQ":
        G = grad_from_weights_W(w, D.X, D.Z, D.XT)
        return {"K": torch.matmul(G, th["Q"]), "Q": torch.matmul(G.transpose(-1, -2), th["K"])}, {"K": M, "Q": M}
    gp = grad_from_weights_p(w, D.X)
    if P.param == "p":
        return {"p": gp}, {"p": M}
    c = loss_derivative_t(u, P.loss) / u.shape[-1]
    gv = torch.einsum("bn,bnt,bntd->bd", c * D.Y, torch.exp(logs), D.X)
    return {"v": gv, "p": gp}, {"v": torch.zeros_like(M), "p": M}


def _bshape(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return x.view(x.shape[0], *([1] * (like.dim() - 1)))


def _fro(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(x.flatten(1), dim=-1)


def step(
    algo: str,
    P: Problem,
    th: dict[str, torch.Tensor],
    fw,
    lr: torch.Tensor,
    ridge: float,
    q: float | None,
    dual: dict[str, torch.Tensor] | None,
):
    """Proposed next iterate, next dual iterate (md, else None) and the (B,) bool ``underflow`` flag."""
    grads, scale = gradients(P, th, fw, log_domain=(algo == "ngd"))
    norms = {k: _fro(g) for k, g in grads.items()}
    zero = None
    for nrm in norms.values():
        z = nrm == 0
        zero = z if zero is None else zero & z
    new: dict[str, torch.Tensor] = {}
    if algo == "ngd":
        lam = math.log(2.0 * ridge) if ridge > 0 else None
        for k, g in grads.items():
            nrm = norms[k]
            if lam is not None:
                M = scale[k]
                c = torch.clamp(M, min=lam)
                g = _bshape(torch.exp(M - c), g) * g + _bshape(torch.exp(lam - c), g) * th[k]
                nrm = _fro(g)
            # a zero factor gradient gives a zero step (never 0/0)
            new[k] = th[k] - _bshape(lr / nrm.clamp(min=torch.finfo(g.dtype).tiny), g) * g
        return new, None, zero
    if ridge > 0:
        grads = {k: g + 2.0 * ridge * th[k] for k, g in grads.items()}
    if algo == "gd":
        return {k: th[k] - _bshape(lr, g) * g for k, g in grads.items()}, None, zero
    assert dual is not None and q is not None
    newdual = {k: dual[k] - _bshape(lr, g) * g for k, g in grads.items()}
    return {k: primal_of_dual(Dk, q) for k, Dk in newdual.items()}, newdual, zero


def dual_of_primal(W: torch.Tensor, q: float) -> torch.Tensor:
    r"""$\nabla\psi(W)=\mathrm{sign}(W)|W|^{q-1}$."""
    return torch.sign(W) * torch.abs(W) ** (q - 1.0)


def primal_of_dual(D: torch.Tensor, q: float) -> torch.Tensor:
    r"""$(\nabla\psi)^{-1}(D)=\mathrm{sign}(D)|D|^{1/(q-1)}$."""
    return torch.sign(D) * torch.abs(D) ** (1.0 / (q - 1.0))
