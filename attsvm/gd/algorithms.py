r"""One step of each algorithm (THEORY §1), batched over the leading axis $B$.

Parameters $\theta$ are a dict of tensors: ``{"W"}``, ``{"K","Q"}`` ($W=KQ^\top$), ``{"k","q"}`` (diagonal
factors, $W=\mathrm{diag}(k\odot q)$, $\nabla_k=\mathrm{diag}(\nabla\mathcal L(W))\odot q$,
$\nabla_q=\mathrm{diag}(\nabla\mathcal L(W))\odot k$), ``{"p"}`` or ``{"v","p"}``.

* ``gd``: $\theta_{k+1}=\theta_k-\eta\,(\nabla\mathcal L(\theta_k)+2\lambda\theta_k)$ (plain float gradient).
* ``ngd``: per factor $\theta\leftarrow\theta-\eta\,g_\theta/\|g_\theta\|_F$,
  $g_\theta=\nabla_\theta\mathcal L+2\lambda\theta$,
  with $\nabla_\theta\mathcal L$ computed *in the log domain* up to the positive scale $e^{M}$
  (:func:`~attsvm.gd.model_torch.token_weights_logdomain`); the ridge is folded in as
  $e^{M-c}\tilde g_\theta+e^{\log 2\lambda-c}\theta$, $c=\max(M,\log2\lambda)$, so nothing overflows.
* ``md``: mirror descent with $\psi(W)=\frac1q\|W\|_q^q$: dual iterate $D=\nabla\psi(W)=\mathrm{sign}(W)|W|^{q-1}$,
  $D_{k+1}=D_k-\eta\nabla\mathcal L(W_k)$, $W=\mathrm{sign}(D)|D|^{1/(q-1)}$ (plain gradient).
* ``nsd``: normalised steepest descent in ``norm`` (THEORY §6), per factor
  $\theta\leftarrow\theta-\eta_k\Delta_k$, $\Delta_k=\arg\max_{\|\Delta\|\le1}\langle g_\theta,\Delta\rangle$
  (:mod:`.steepest`: ``fro`` $g/\|g\|_F$ — bit-identical to ``ngd`` —, ``linf`` $\mathrm{sign}(g)$, ``l1`` the
  largest entry, ``spec`` $UV^\top$, ``lq``), from the log-domain gradient.
* ``nmd``: normalised $\ell_q$ mirror descent, $D_{k+1}=D_k-\eta_k\,g_k/\|g_k\|_{q^*}$ ($q^*=q/(q-1)$, log-domain
  direction), $W=\mathrm{sign}(D)|D|^{1/(q-1)}$ (W and p).
* ``adam``: bias-corrected Adam (:func:`adam_update`), $m_k=\beta_1m_{k-1}+(1-\beta_1)g_k$,
  $v_k=\beta_2v_{k-1}+(1-\beta_2)g_k^2$, $\theta_{k+1}=\theta_k-\eta_k\,\hat m_k/(\sqrt{\hat v_k}+\epsilon)$,
  $\hat m_k=m_k/(1-\beta_1^{k+1})$, $\hat v_k=v_k/(1-\beta_2^{k+1})$ ($k=0,1,\dots$; entrywise), with the moments
  kept relative to a running log-scale, so $\epsilon=0$ is exact (never $0/0$) however small the gradient.

Step sizes (``schedule``): ``"constant"`` $\eta_k=\eta$, or ``"rsqrt"`` $\eta_k=\eta_0(k+1)^{-1/2}$ for update
$k=0,1,\dots$ (:func:`step_size`; every algorithm).

A factor whose gradient is exactly zero takes no step (never $0/0$). The data set stops with reason
``underflow`` when the ``ngd`` / ``nsd`` / ``nmd`` direction is exactly zero for every factor (only at a true
stationary point: the direction is taken in the log domain), for ``adam`` when moreover its first moment is
exactly zero (no momentum left: a fixed point), or when the ``gd`` / ``md`` update is lost in floating point for every
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
from .numerics import ldexp, lp_norm, normalise, range_scaled
from .settings import SCHEDULES, Settings
from .steepest import direction_parts


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
    r"""The attention matrix: ``W``, $KQ^\top$ or $\mathrm{diag}(k\odot q)$."""
    if "k" in th:
        return torch.diag_embed(th["k"] * th["q"])
    return th["W"] if "W" in th else torch.matmul(th["K"], th["Q"].transpose(-1, -2))


def forward(P: Problem, th: dict[str, torch.Tensor]):
    """Return ``(log s, u, effective scores, parts, W)`` at $\\theta$: (B,N,T), (B,N), (B,N,T), the
    :func:`~attsvm.gd.model_torch.log_softmax_parts` pieces ``(e, log Z, t1)`` and the attention matrix
    :func:`W_of` (B,d,d) it used (formed once per step, also for the records and the ``target_corr`` rule;
    ``None`` for ``p`` / ``vp``)."""
    D = P.D
    W = None if P.param in ("p", "vp") else W_of(th)
    a = logits_p(D.X, th["p"]) if W is None else logits_W(D.X, W, D.Z, D.XT)
    logs, e, lz, top = log_softmax_parts(a, D.mask)
    s = e * torch.exp(-lz)
    if P.fixed_scores:
        return logs, (s * D.gamma).sum(-1), D.gamma, (e, lz, top), W
    u, ghat = head_outputs(D.X, D.Y, th.get("v", D.v), s, P.head)
    return logs, u, ghat, (e, lz, top), W


def scaled_gradients(P: Problem, th: dict[str, torch.Tensor], fw, log_domain: bool):
    r"""Loss gradients per factor as ``(G, M, E)``: $\nabla_k\mathcal L=e^{M_k}\,2^{E_k}\,\hat G_k$ with
    $\max|\hat G_k|\in[\tfrac12,1)$ (or $\hat G_k=0$); ``M`` (B,) float log-scales (0 in the plain mode),
    ``E`` (B,) int64 binary exponents (module docstring). In the log domain
    $\nabla_v\mathcal L=-\frac{e^{M_v}}N\sum_ie^{\log|\ell'_i|-M_v}Y_iX_i^\top s_i$, $M_v=\max_i\log|\ell'_i|$."""
    logs, u, ghat, parts = fw[:4]
    D = P.D
    if log_domain:
        gs, ew = (P.gs, P.eg) if P.fixed_scores else normalise(ghat)
        w, M = token_weights_logdomain(logs, gs, u, P.loss, parts)
    else:  # the plain float weights, underflowing exactly where float64 does (the "underflow" stop)
        gs, ew = (P.gs, P.eg) if P.fixed_scores else (ghat, torch.zeros_like(P.ex))
        w = token_weights(logs, gs, u, P.loss)
        M = torch.zeros(D.B, dtype=D.X.dtype, device=D.X.device)
    if P.param in ("W", "KQ", "diag"):
        G, eG = normalise(grad_from_weights_W(w, P.Xs, P.Zs, P.XTs))
        E = ew + P.ex + P.ez + eG
        if P.param == "W":
            return {"W": G}, {"W": M}, {"W": E}
        B = G.shape[0]
        # both factor gradients in one (2B, ...) buffer, normalised together (row by row: the same numbers)
        if P.param == "diag":  # diag(G) (.) q and diag(G) (.) k: |entries| < max|q|, max|k| (representable)
            gd = torch.diagonal(G, dim1=-2, dim2=-1)
            both = torch.empty((2 * B, *th["q"].shape[1:]), dtype=G.dtype, device=G.device)
            torch.mul(gd, th["q"], out=both[:B])
            torch.mul(gd, th["k"], out=both[B:])
            g2, e2 = normalise(both)
            return {"k": g2[:B], "q": g2[B:]}, {"k": M, "q": M}, {"k": E + e2[:B], "q": E + e2[B:]}
        # |G Q| <= d max|Q| (max|G| < 1): representable, as check_ranges bounds d ||K||, d ||Q||
        both = torch.empty((2 * B, *th["Q"].shape[1:]), dtype=G.dtype, device=G.device)
        torch.matmul(G, th["Q"], out=both[:B])
        torch.matmul(G.transpose(-1, -2), th["K"], out=both[B:])
        g2, e2 = normalise(both)
        return {"K": g2[:B], "Q": g2[B:]}, {"K": M, "Q": M}, {"K": E + e2[:B], "Q": E + e2[B:]}
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


def log_scaled(
    G, M, E, th: dict[str, torch.Tensor], ridge: float, scales: bool = True
) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
    r"""Per factor $(\hat g_k, L_k)$ with $g_k=\nabla_k\mathcal L+2\lambda\theta_k=e^{L_k}\hat g_k$ and
    $\max|\hat g_k|\in[\tfrac12,1)$ (or $\hat g_k=0$): the ridge is folded in as
    $e^{L-c}\hat G+e^{L_\lambda-c}\hat\theta$, $L=M+E\log2$, $L_\lambda=\log2\lambda+e_\theta\log2$,
    $c=\max(L,L_\lambda)$, so nothing overflows or underflows. ``scales=False`` (no ridge, and a step that only
    needs the direction $\hat g_k$): $L_k$ is not formed (``None``)."""
    if not scales and ridge == 0:
        return {k: (g, None) for k, g in G.items()}
    ln2 = math.log(2.0)
    lam = math.log(2.0 * ridge) if ridge > 0 else None
    out = {}
    for k, g in G.items():
        L = M[k] + E[k].to(g.dtype) * ln2
        if lam is not None:
            thh, eth = normalise(th[k])
            L2 = lam + eth.to(g.dtype) * ln2
            c = torch.maximum(L, L2)
            g, e = normalise(_bshape(torch.exp(L - c), g) * g + _bshape(torch.exp(L2 - c), g) * thh)
            L = c + e.to(g.dtype) * ln2
        out[k] = (g, L)
    return out


def unit_step(D: torch.Tensor, den: torch.Tensor, lr: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    r"""The step $(\eta/\mathrm{den})\,D$ per data set where ``live``, and exactly 0 elsewhere (a zero gradient takes
    no step: never $0/0$, nor $\eta/\text{tiny}=\infty$ times 0)."""
    fac = torch.where(live, lr / den.clamp(min=torch.finfo(D.dtype).tiny), 0.0)
    return _bshape(fac, D) * D


def normalised_steps(
    parts: dict[str, tuple[torch.Tensor, torch.Tensor | None]], lr: torch.Tensor, normalize: str, grad_eps: float
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    r"""The steps $\eta\,g_k/(\|g_k\|+\epsilon)$ (per factor) or $\eta\,g_k/(\|g\|+\epsilon)$ (joint) from
    the :func:`log_scaled` parts, and the (B,) flag "every factor's gradient is exactly zero".

    Scale-free: with $g_k=e^{L_k}\hat g_k$, per factor $\eta\hat g_k/(\|\hat g_k\|+\epsilon e^{-L_k})$; joint,
    with $\ell_k=L_k+\log\|\hat g_k\|$, $c=\max_k\ell_k$, $w_k=e^{\ell_k-c}$ and $J=(\sum_kw_k^2)^{1/2}$
    ($\|g\|=e^cJ$), $\eta\,(w_k/\|\hat g_k\|)\,\hat g_k/(J+\epsilon e^{-c})$. A zero gradient takes no step
    (never $0/0$); $\epsilon e^{-L}$ overflowing to $\infty$ gives the step 0 it stands for."""
    tiny = None
    nrms = {}
    zero = None
    for k, (g, _L) in parts.items():
        nrm = torch.linalg.vector_norm(g.flatten(1), dim=-1)  # g is normalised: no overflow / underflow
        nrms[k] = nrm
        z = nrm == 0
        zero = z if zero is None else zero & z
        tiny = torch.finfo(g.dtype).tiny
    assert zero is not None and tiny is not None
    steps = {}
    if normalize == "joint" and len(parts) > 1:
        ell = {
            k: torch.where(nrms[k] > 0, L + torch.log(nrms[k].clamp(min=tiny)), -math.inf)
            for k, (_g, L) in parts.items()
        }
        c = torch.stack(list(ell.values())).amax(0)
        c = torch.where(zero, torch.zeros_like(c), c)
        w = {k: torch.exp(e - c) for k, e in ell.items()}
        J = torch.sqrt(sum(x * x for x in w.values()))
        den = J + grad_eps * torch.exp(-c) if grad_eps > 0 else J
        for k, (g, _L) in parts.items():
            fac = torch.where(nrms[k] > 0, lr * w[k] / (nrms[k].clamp(min=tiny) * den.clamp(min=tiny)), 0.0)
            steps[k] = _bshape(fac, g) * g
        return steps, zero
    for k, (g, L) in parts.items():
        nrm = nrms[k]
        den = nrm + grad_eps * torch.exp(-L) if grad_eps > 0 else nrm
        steps[k] = unit_step(g, den, lr, nrm > 0)
    return steps, zero


def step_size(lr: torch.Tensor, k: int, schedule: str) -> torch.Tensor:
    r"""$\eta_k$ of update $k=0,1,\dots$: ``"constant"`` $\eta_k=\eta$ (``lr`` itself), ``"rsqrt"``
    $\eta_k=\eta_0/\sqrt{k+1}$."""
    if schedule == "constant":
        return lr
    if schedule == "rsqrt":
        return lr / math.sqrt(k + 1)
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


def steepest_steps(
    parts: dict[str, tuple[torch.Tensor, torch.Tensor | None]], lr: torch.Tensor, norm: str, q: float | None
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    r"""Per factor the ``nsd`` step $\eta\,\Delta_k$, $\Delta_k$ the steepest direction of the :func:`log_scaled`
    gradient in ``norm`` (:func:`~attsvm.gd.steepest.direction_parts`, $\Delta=D/\mathrm{den}$, formed as
    $(\eta/\mathrm{den})D$), and the (B,) flag "every factor's gradient is exactly zero" (no step, never $0/0$)."""
    steps = {}
    zero = None
    for k, (g, _L) in parts.items():
        D, den = direction_parts(g, norm, q)
        z = den == 0
        zero = z if zero is None else zero & z
        steps[k] = unit_step(D, den, lr, den > 0)
    assert zero is not None
    return steps, zero


def mirror_normalised_steps(
    parts: dict[str, tuple[torch.Tensor, torch.Tensor | None]], lr: torch.Tensor, q: float
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    r"""Per factor the ``nmd`` dual step $\eta\,g/\|g\|_{q^*}$, $q^*=q/(q-1)$ (the :func:`log_scaled` gradient;
    scale-free, :func:`~attsvm.gd.numerics.lp_norm`), and the (B,) flag "every factor's gradient is exactly zero"."""
    qs = q / (q - 1.0)
    steps = {}
    zero = None
    for k, (g, _L) in parts.items():
        nrm = lp_norm(g, qs)
        z = nrm == 0
        zero = z if zero is None else zero & z
        steps[k] = unit_step(g, nrm, lr, nrm > 0)
    assert zero is not None
    return steps, zero


def initial_state(S: Settings, th: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
    r"""The optimizer state carried between steps (``(B, ...)`` tensors, frozen with their data set): the dual
    iterate $D_0=\nabla\psi(\theta_0)$ per factor for ``md`` / ``nmd``; for ``adam`` per factor ``m:<k>``,
    ``r:<k>`` (zeros) and ``s:<k>`` (B,) (:func:`adam_update`); ``None`` otherwise."""
    if S.algo in ("md", "nmd"):
        assert S.q is not None
        return {k: dual_of_primal(a, S.q) for k, a in th.items()}
    if S.algo == "adam":
        st: dict[str, torch.Tensor] = {}
        for k, a in th.items():
            st[f"m:{k}"] = torch.zeros_like(a)
            st[f"r:{k}"] = torch.zeros_like(a)
            st[f"s:{k}"] = torch.zeros(a.shape[0], dtype=a.dtype, device=a.device)
        return st
    return None


def adam_update(
    parts: dict[str, tuple[torch.Tensor, torch.Tensor]],
    state: dict[str, torch.Tensor],
    lr: torch.Tensor,
    t: int,
    betas: tuple[float, float],
    eps: float,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], torch.Tensor]:
    r"""One bias-corrected Adam update $t=k+1$ per factor: ``(steps, new state, zero)``.

    With $g_t=e^{L}\hat g$ (:func:`log_scaled`), $m_t=\beta_1m_{t-1}+(1-\beta_1)g_t$ and
    $r_t=\sqrt{v_t}=\mathrm{hypot}(\sqrt{\beta_2}\,r_{t-1},\sqrt{1-\beta_2}\,g_t)$ (entrywise; no square of $g$ is
    formed), the step is $\eta\,\hat m_t/(\sqrt{\hat v_t}+\epsilon)=\frac{\eta}{1-\beta_1^t}\,
    m_t/(r_t/\sqrt{1-\beta_2^t}+\epsilon)$, in ``torch.optim.Adam``'s order of operations. **Scale safety**: the
    state keeps $m=e^{s}\hat m$, $r=e^{s}\hat r$ with one log-scale $s$ (B,) per factor and $\max\hat r\in[\tfrac12,1)$
    (renormalised by an exact power of two each step); the update mixes old and new terms with the weights
    $e^{s-c}$, $e^{L-c}$, $c=\max(s,L)$, and the step is $\hat m/(\hat r/\sqrt{1-\beta_2^t}+\epsilon e^{-s})$ —
    so $\epsilon=0$ is exact however small the gradient, and $\epsilon e^{-s}=\infty$ gives the step 0 it
    stands for. An entry with $\hat r$ below the smallest normal float (its gradient was never above
    $2^{-1022}$ times the factor's largest) takes no step: never $0/0$ ($\beta_2>0$, so $r=0$ only where
    $m=0$). Adam is entrywise, so an entry of relative size below $2^{-1074}$ of its factor's largest is
    lost (plain float Adam loses entries below $\sim10^{-154}$ in absolute value, where $g^2$ underflows).

    ``zero`` (B,): every factor's gradient and new first moment are exactly zero (a fixed point)."""
    b1, b2 = betas
    bc1 = 1.0 - b1**t
    bc2s = math.sqrt(1.0 - b2**t)
    sb2, s1b2 = math.sqrt(b2), math.sqrt(1.0 - b2)
    leps = math.log(eps) if eps > 0 else None
    ln2 = math.log(2.0)
    steps: dict[str, torch.Tensor] = {}
    new: dict[str, torch.Tensor] = {}
    zero = None
    for k, (g, L) in parts.items():
        m, r, s = state[f"m:{k}"], state[f"r:{k}"], state[f"s:{k}"]
        ninf = torch.full_like(s, -math.inf)
        gz = g.flatten(1).abs().amax(-1) == 0
        Le = torch.where(gz, ninf, L)
        Se = torch.where(r.flatten(1).abs().amax(-1) == 0, ninf, s)
        c = torch.maximum(Le, Se)
        c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))  # both -inf: nothing to scale
        a, w = _bshape(torch.exp(Se - c), g), _bshape(torch.exp(Le - c), g)  # exp(-inf) = 0
        m2 = b1 * (a * m) + (1.0 - b1) * (w * g)
        r2, e = normalise(torch.hypot(sb2 * (a * r), s1b2 * (w * g)))
        m2 = ldexp(m2, -e)
        s2 = c + e.to(g.dtype) * ln2
        den = r2 / bc2s
        if leps is not None:
            den = den + _bshape(torch.exp(leps - s2), g)
        tiny = torch.finfo(g.dtype).tiny
        ratio = torch.where(r2 >= tiny, m2 / den.clamp(min=tiny), torch.zeros_like(m2))
        steps[k] = _bshape(lr / bc1, g) * ratio
        new.update({f"m:{k}": m2, f"r:{k}": r2, f"s:{k}": s2})
        z = gz & (m2.flatten(1) == 0).all(-1)
        zero = z if zero is None else zero & z
    assert zero is not None
    return steps, new, zero


def step(
    S: Settings,
    P: Problem,
    th: dict[str, torch.Tensor],
    fw,
    lr: torch.Tensor,
    state: dict[str, torch.Tensor] | None,
    k: int = 0,
):
    r"""Update $k$ ($k=0,1,\dots$; it sets $\eta_k$, :func:`step_size`, and Adam's bias correction): the proposed
    next iterate, the next optimizer state (:func:`initial_state`; ``None`` for ``gd`` / ``ngd`` / ``nsd``) and
    the (B,) bool ``underflow`` flag.

    ``ngd``: $\theta_k-\eta_k\,g_k/(\|g\|+\epsilon)$ (:func:`normalised_steps` on the :func:`log_scaled`
    gradient, per factor or joint); ``nsd``: $\theta_k-\eta_k\Delta_k$ (:func:`steepest_steps`); ``nmd``: the dual
    step :func:`mirror_normalised_steps`; ``adam``: :func:`adam_update`; ``gd`` / ``md``: the update
    $\eta_k\nabla\mathcal L=(\eta_k2^{E})\hat G$."""
    algo, ridge, q = S.algo, S.ridge, S.q
    lr = step_size(lr, k, S.schedule)
    G, M, E = scaled_gradients(P, th, fw, log_domain=(algo not in ("gd", "md")))
    if algo == "ngd":  # the log-scales only enter through the ridge, the normaliser's epsilon or a joint norm
        scales = S.grad_eps > 0 or (S.normalize == "joint" and len(G) > 1)
        steps, zero = normalised_steps(log_scaled(G, M, E, th, ridge, scales), lr, S.normalize, S.grad_eps)
        return {k_: th[k_] - s for k_, s in steps.items()}, None, zero
    if algo == "nsd":
        assert S.norm is not None
        steps, zero = steepest_steps(log_scaled(G, M, E, th, ridge, scales=False), lr, S.norm, q)
        return {k_: th[k_] - s for k_, s in steps.items()}, None, zero
    if algo == "adam":
        assert state is not None
        steps, new_state, zero = adam_update(log_scaled(G, M, E, th, ridge), state, lr, k + 1, S.adam_betas, S.adam_eps)
        return {k_: th[k_] - s for k_, s in steps.items()}, new_state, zero
    if algo == "nmd":
        assert state is not None and q is not None
        steps, zero = mirror_normalised_steps(log_scaled(G, M, E, th, ridge, scales=False), lr, q)
        moved = {k_: state[k_] - s for k_, s in steps.items()}
        return {k_: primal_of_dual(Dk, q) for k_, Dk in moved.items()}, moved, zero
    if ridge > 0:
        upd = {k_: _bshape(lr, g) * (ldexp(g, E[k_]) + 2.0 * ridge * th[k_]) for k_, g in G.items()}
    else:  # eta 2^E exactly (a (B,) factor, saturating to 0 / inf only where the step itself would)
        upd = {k_: _bshape(ldexp(lr, E[k_]), g) * g for k_, g in G.items()}
    old = th if algo == "gd" else state
    assert old is not None
    moved = {k_: old[k_] - upd[k_] for k_ in G}
    # "underflow": the update is lost in floating point for every factor (a fixed point of the float iteration)
    zero = None
    for k_, a in moved.items():
        z = (a == old[k_]).flatten(1).all(-1)
        zero = z if zero is None else zero & z
    if algo == "gd":
        return moved, None, zero
    assert q is not None
    return {k_: primal_of_dual(Dk, q) for k_, Dk in moved.items()}, moved, zero


def dual_of_primal(W: torch.Tensor, q: float) -> torch.Tensor:
    r"""$\nabla\psi(W)=\mathrm{sign}(W)|W|^{q-1}$."""
    return torch.sign(W) * torch.abs(W) ** (q - 1.0)


def primal_of_dual(D: torch.Tensor, q: float) -> torch.Tensor:
    r"""$(\nabla\psi)^{-1}(D)=\mathrm{sign}(D)|D|^{1/(q-1)}$."""
    return torch.sign(D) * torch.abs(D) ** (1.0 / (q - 1.0))
