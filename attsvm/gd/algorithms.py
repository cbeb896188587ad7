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

A factor whose gradient is exactly zero takes no step (never $0/0$). The data set stops with reason
``underflow`` when ``ngd``'s direction is exactly zero for every factor (only at a true stationary point: the
direction is taken in the log domain), or when the ``gd`` / ``md`` update is lost in floating point for every
factor, $\theta_k-\eta\nabla\mathcal L(\theta_k)=\theta_k$ bit for bit (the dual for ``md``): the gradient, or
$\eta$ times it, underflows to zero or below half an ulp of $\theta_k$ — a fixed point of the float iteration,
which every later step would repeat.

**Scale safety** (:mod:`.numerics`). Gradients are assembled from power-of-two rescaled pieces — the data
$\hat X=2^{-e_X}X$, $\hat Z=2^{-e_Z}Z$ (only when out of range), the scores, the token weights, the factors —
and returned as $\nabla_k\mathcal L=e^{M_k}2^{E_k}\hat G_k$ with $\max|\hat G_k|\in[\tfrac12,1)$
(:func:`scaled_gradients`). So $\|\hat G_k\|$ never squares into overflow or underflow, the normalised
direction $\hat G_k/\|\hat G_k\|$ is exact however large or small $\|\nabla\mathcal L\|$ is, the plain step
is $\eta\nabla_k\mathcal L=(\eta2^{E_k})\,\hat G_k$ (the factor formed by exact power-of-two steps), and every result is
bit-identical to the unscaled formulas wherever those are representable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .model_torch import (
    TorchData,
    grad_from_weights_p,
    grad_from_weights_W,
    head_outputs,
    log_neg_loss_derivative_t,
    log_softmax_parts,
    logits_p,
    logits_W,
    loss_derivative_t,
    token_weights,
    token_weights_logdomain,
)
from .numerics import ldexp, normalise, range_scaled

ALGOS = ("gd", "ngd", "md")


@dataclass
class Problem:
    """What is optimised: data, parametrisation, loss and head (fixed during a run)."""

    D: TorchData
    param: str
    loss: str = "logistic"
    head: tuple | None = None
    #: range-scaled data (:func:`~attsvm.gd.numerics.range_scaled`): ``X = 2^ex Xs``, ``Z = 2^ez Zs``,
    #: fixed scores ``gamma = 2^eg gs``; the tensors themselves (exponent 0) when in range
    Xs: torch.Tensor = field(init=False, repr=False)
    XTs: torch.Tensor | None = field(init=False, repr=False)
    Zs: torch.Tensor = field(init=False, repr=False)
    gs: torch.Tensor = field(init=False, repr=False)
    ex: torch.Tensor = field(init=False, repr=False)
    ez: torch.Tensor = field(init=False, repr=False)
    eg: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        D = self.D
        self.Xs, self.ex = range_scaled(D.X)
        if self.Xs is D.X:
            self.XTs = D.XT
        else:
            self.XTs = None if D.XT is None else self.Xs.transpose(-1, -2).contiguous()
        self.Zs, self.ez = range_scaled(D.Z)
        self.gs, self.eg = range_scaled(D.gamma)

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


def scaled_gradients(P: Problem, th: dict[str, torch.Tensor], fw, log_domain: bool):
    r"""Loss gradients per factor as ``(G, M, E)``: $\nabla_k\mathcal L=e^{M_k}\,2^{E_k}\,\hat G_k$ with
    $\max|\hat G_k|\in[\tfrac12,1)$ (or $\hat G_k=0$); ``M`` (B,) float log-scales (0 in the plain mode),
    ``E`` (B,) int64 binary exponents (module docstring). In the log domain
    $\nabla_v\mathcal L=-\frac{e^{M_v}}N\sum_ie^{\log|\ell'_i|-M_v}Y_iX_i^\top s_i$, $M_v=\max_i\log|\ell'_i|$."""
    logs, u, ghat, parts = fw
    D = P.D
    if log_domain:
        gs, ew = (P.gs, P.eg) if P.fixed_scores else normalise(ghat)
        w, M = token_weights_logdomain(logs, gs, u, P.loss, parts)
    else:  # the plain float weights, underflowing exactly where float64 does (the "underflow" stop)
        gs, ew = (P.gs, P.eg) if P.fixed_scores else (ghat, torch.zeros_like(P.ex))
        w = token_weights(logs, gs, u, P.loss)
        M = torch.zeros(D.B, dtype=D.X.dtype, device=D.X.device)
    if P.param in ("W", "KQ"):
        G, eG = normalise(grad_from_weights_W(w, P.Xs, P.Zs, P.XTs))
        E = ew + P.ex + P.ez + eG
        if P.param == "W":
            return {"W": G}, {"W": M}, {"W": E}
        # |G Q| <= d max|Q| (max|G| < 1): representable, as check_ranges bounds d ||K||, d ||Q||
        gK, e1 = normalise(torch.matmul(G, th["Q"]))
        gQ, e2 = normalise(torch.matmul(G.transpose(-1, -2), th["K"]))
        return {"K": gK, "Q": gQ}, {"K": M, "Q": M}, {"K": E + e1, "Q": E + e2}
    gp, ep = normalise(grad_from_weights_p(w, P.Xs))
    Ep = ew + P.ex + ep
    if P.param == "p":
        return {"p": gp}, {"p": M}, {"p": Ep}
    N = u.shape[-1]
    if log_domain:
        lc = log_neg_loss_derivative_t(u, P.loss)
        Mv = lc.amax(-1)
        c = -torch.exp(lc - Mv.unsqueeze(-1)) / N
    else:
        Mv = torch.zeros_like(M)
        c = loss_derivative_t(u, P.loss) / N
    gv, ev = normalise(torch.einsum("bn,bnt,bntd->bd", c * D.Y, torch.exp(logs), P.Xs))
    return {"v": gv, "p": gp}, {"v": Mv, "p": M}, {"v": P.ex + ev, "p": Ep}


def gradients(P: Problem, th: dict[str, torch.Tensor], fw, log_domain: bool):
    r"""Loss gradients per factor and their log-scales: ``(grads, logscale)``; the true gradient of factor
    ``k`` is ``exp(logscale[k]) * grads[k]``. Plain mode: the float gradient itself (logscale 0; it saturates
    to 0 / inf where float64 does); log domain: the representable :func:`scaled_gradients` direction with
    $\log$-scale $M_k+E_k\log2$."""
    G, M, E = scaled_gradients(P, th, fw, log_domain)
    if log_domain:
        return G, {k: M[k] + E[k].to(M[k].dtype) * math.log(2.0) for k in G}
    return {k: ldexp(g, E[k]) for k, g in G.items()}, {k: torch.zeros_like(M[k]) for k in G}


def _bshape(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return x.view(x.shape[0], *([1] * (like.dim() - 1)))


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
    r"""Proposed next iterate, next dual iterate (md, else None) and the (B,) bool ``underflow`` flag.

    ``ngd``: $\theta-\frac{\eta}{\|\hat g\|}\hat g$ with $\hat g=\hat G$ (or, with a ridge, the power-of-two
    normalised $e^{L-c}\hat G+e^{L_\lambda-c}\hat\theta$, $L=M+E\log2$, $L_\lambda=\log2\lambda+e_\theta\log2$,
    $c=\max(L,L_\lambda)$); ``gd`` / ``md``: the update $\eta\nabla\mathcal L=(\eta2^{E})\hat G$."""
    G, M, E = scaled_gradients(P, th, fw, log_domain=(algo == "ngd"))
    new: dict[str, torch.Tensor] = {}
    if algo == "ngd":
        zero = None
        lam = math.log(2.0 * ridge) if ridge > 0 else None
        ln2 = math.log(2.0)
        for k, g in G.items():
            nrm = torch.linalg.vector_norm(g.flatten(1), dim=-1)  # g is normalised: no overflow / underflow
            z = nrm == 0
            zero = z if zero is None else zero & z
            if lam is not None:
                L = M[k] + E[k].to(g.dtype) * ln2
                thh, eth = normalise(th[k])
                L2 = lam + eth.to(g.dtype) * ln2
                c = torch.maximum(L, L2)
                g = normalise(_bshape(torch.exp(L - c), g) * g + _bshape(torch.exp(L2 - c), g) * thh)[0]
                nrm = torch.linalg.vector_norm(g.flatten(1), dim=-1)
            # a zero factor gradient gives a zero step (never 0/0, nor lr/tiny = inf times 0)
            fac = torch.where(nrm > 0, lr / nrm.clamp(min=torch.finfo(g.dtype).tiny), torch.zeros_like(nrm))
            new[k] = th[k] - _bshape(fac, g) * g
        return new, None, zero
    if ridge > 0:
        upd = {k: _bshape(lr, g) * (ldexp(g, E[k]) + 2.0 * ridge * th[k]) for k, g in G.items()}
    else:  # eta 2^E exactly (a (B,) factor, saturating to 0 / inf only where the step itself would)
        upd = {k: _bshape(ldexp(lr, E[k]), g) * g for k, g in G.items()}
    old = th if algo == "gd" else dual
    assert old is not None
    moved = {k: old[k] - upd[k] for k in G}
    # "underflow": the update is lost in floating point for every factor (a fixed point of the float iteration)
    zero = None
    for k, a in moved.items():
        z = (a == old[k]).flatten(1).all(-1)
        zero = z if zero is None else zero & z
    if algo == "gd":
        return moved, None, zero
    assert q is not None
    return {k: primal_of_dual(Dk, q) for k, Dk in moved.items()}, moved, zero


def dual_of_primal(W: torch.Tensor, q: float) -> torch.Tensor:
    r"""$\nabla\psi(W)=\mathrm{sign}(W)|W|^{q-1}$."""
    return torch.sign(W) * torch.abs(W) ** (q - 1.0)


def primal_of_dual(D: torch.Tensor, q: float) -> torch.Tensor:
    r"""$(\nabla\psi)^{-1}(D)=\mathrm{sign}(D)|D|^{1/(q-1)}$."""
    return torch.sign(D) * torch.abs(D) ** (1.0 / (q - 1.0))
