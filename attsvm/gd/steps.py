r"""The torch building blocks of a step, batched over the leading axis $B$: the problem, the forward pass, the
scale-safe gradients, the ridge folded in, the step schedule, the mirror maps. The algorithms composed from them are
the modules of :mod:`attsvm.gd.algos` (their equations are there).

Parameters $\theta$ are a dict of tensors: ``{"W"}``, ``{"K","Q"}`` ($W=KQ^\top$), ``{"k","q"}`` (diagonal
factors, $W=\mathrm{diag}(k\odot q)$, $\nabla_k=\mathrm{diag}(\nabla\mathcal L(W))\odot q$,
$\nabla_q=\mathrm{diag}(\nabla\mathcal L(W))\odot k$), ``{"p"}`` or ``{"v","p"}``, and for ``heads`` ``{"K","Q"}`` of
shape (B,H,d,m): $H$ heads whose outputs add up, $u_i=\sum_h\gamma_i^\top s_{ih}$,
$s_{ih}=\mathbb S(X_iK_hQ_h^\top z_i)$ (:func:`forward_heads`, :func:`gradients_heads`).

Step sizes (``schedule``): ``"constant"`` $\eta_k=\eta$, or ``"rsqrt"`` $\eta_k=\eta_0(k+1)^{-1/2}$ for update
$k=0,1,\dots$ (:func:`step_size`; every algorithm). A factor whose gradient is exactly zero takes no step (never
$0/0$, :func:`unit_step`).

**Scale safety** (:mod:`.numerics`). Gradients are assembled from power-of-two rescaled pieces — the data
$\hat X=2^{-e_X}X$, $\hat Z=2^{-e_Z}Z$ (only when out of range), the scores, the token weights, the factors —
and returned as $\nabla_k\mathcal L=e^{M_k}2^{E_k}\hat G_k$ with $\max|\hat G_k|\in[\tfrac12,1)$
(:func:`scaled_gradients`). So $\|\hat G_k\|$ never squares into overflow or underflow, the normalised
direction $\hat G_k/\|\hat G_k\|$ is exact however large or small $\|\nabla\mathcal L\|$ is, the plain step
is $\eta\nabla_k\mathcal L=(\eta2^{E_k})\,\hat G_k$ (the factor formed by exact power-of-two steps), and every result is
bit-identical to the unscaled formulas wherever those are representable.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from .init import PARAMETERISATIONS
from .model_torch import (
    TorchData,
    batch_derivative,
    batch_log_derivative,
    grad_from_weights_p,
    grad_from_weights_W,
    head_outputs,
    log_neg_loss_derivative_t,
    log_softmax_parts,
    logits_p,
    logits_W,
    loss_derivative_t,
    residual_t,
    score_diff,
    token_weights,
    token_weights_logdomain,
)
from .numerics import ldexp, normalise, range_scaled
from .options import SCHEDULES


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
    chain: Any = field(init=False, repr=False)
    #: the mini-batch of this step, ``(rows, b)``: (N,) bool rows of $B_k$ and $b$ (:meth:`on_batch`); ``None``:
    #: the full loss
    batch: tuple[torch.Tensor, int] | None = field(default=None, init=False, repr=False)
    #: the two-layer model's settings (:class:`~attsvm.gd.spec.Settings`: ``freeze``, ``residual``, ``causal``)
    freeze: str | None = None
    residual: bool = False
    causal: bool = False
    #: ``twolayer``: the layer-1 keys (B,N,T,T) bool (or None: all visible) and the rows without a key (B,N,T,1)
    keys: torch.Tensor | None = field(default=None, init=False, repr=False)
    empty: torch.Tensor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        D = self.D
        if PARAMETERISATIONS[self.param].layered:
            T = D.X.shape[2]
            tri = torch.ones((T, T), dtype=torch.bool, device=D.X.device).tril() if self.causal else None
            if D.mask is not None:
                k = D.mask.unsqueeze(-2).expand(*D.mask.shape[:-1], T, T)
                self.keys = k & tri if tri is not None else k
            else:
                self.keys = None if tri is None else tri.expand(*D.X.shape[:2], T, T)
            if self.keys is not None:
                self.empty = ~self.keys.any(-1, keepdim=True)
        self.Xs, self.ex = range_scaled(D.X)
        if self.Xs is D.X:
            self.XTs = D.XT
        else:
            self.XTs = None if D.XT is None else self.Xs.transpose(-1, -2).contiguous()
        self.Zs, self.ez = range_scaled(D.Z)
        self.gs, self.eg = range_scaled(D.gamma)
        module, _, name = PARAMETERISATIONS[self.param].torch_gradient.partition(":")
        assert module == __name__, module
        self.chain = globals()[name]  # the parameterisation's chain rule (declared in its registry entry)

    def on_batch(self, rows: torch.Tensor, b: int) -> Problem:
        r"""This problem with the mini-batch loss $\mathcal L_k=\frac1b\sum_{i\in B_k}\ell_i$ (``rows`` (N,) bool,
        the $b$ rows of $B_k$; :class:`~attsvm.gd.spec.Settings`): the gradients of :func:`scaled_gradients` are
        then those of $\mathcal L_k$ (the other rows masked in the log domain before any normalisation)."""
        out = copy.copy(self)
        out.batch = (rows, int(b))
        return out

    @property
    def fixed_scores(self) -> bool:
        """Scores do not change during the run (linear head with the data set's fixed v)."""
        return self.head is None and self.param != "vp"


def W_of(th: dict[str, torch.Tensor]) -> torch.Tensor:
    r"""The attention matrix: ``W``, $KQ^\top$, $\mathrm{diag}(k\odot q)$ or ``twolayer``'s $W_2$; for ``heads``
    (factors (B,H,d,m)) the sum of the heads' matrices $\sum_hK_hQ_h^\top$ (what is reported and compared; the
    model's scores are per head)."""
    if "k" in th:
        return torch.diag_embed(th["k"] * th["q"])
    if "W2" in th:  # twolayer: the top layer's W2
        return th["W2"]
    if "W" in th:
        return th["W"]
    KQ = torch.matmul(th["K"], th["Q"].transpose(-1, -2))
    return KQ.sum(1) if th["K"].dim() == 4 else KQ


def forward(P: Problem, th: dict[str, torch.Tensor]):
    """Return ``(log s, u, effective scores, parts, W)`` at $\\theta$: (B,N,T), (B,N), (B,N,T), the
    :func:`~attsvm.gd.model_torch.log_softmax_parts` pieces ``(e, log Z, t1)`` and the attention matrix
    :func:`W_of` (B,d,d) it used (formed once per step, also for the records and the ``target_corr`` rule;
    ``None`` for ``p`` / ``vp``)."""
    D = P.D
    if PARAMETERISATIONS[P.param].headed:
        return forward_heads(P, th)
    if PARAMETERISATIONS[P.param].layered:
        return forward_twolayer(P, th)
    W = W_of(th) if PARAMETERISATIONS[P.param].attention else None
    a = logits_p(D.X, th["p"]) if W is None else logits_W(D.X, W, D.Z, D.XT)
    logs, e, lz, top = log_softmax_parts(a, D.mask)
    s = e * torch.exp(-lz)
    if P.fixed_scores:
        return logs, (s * D.gamma).sum(-1), D.gamma, (e, lz, top), W
    u, ghat = head_outputs(D.X, D.Y, th.get("v", D.v), s, P.head)
    return logs, u, ghat, (e, lz, top), W


def forward_heads(P: Problem, th: dict[str, torch.Tensor]):
    r""":func:`forward` of ``heads``: $H$ heads, $a_{iht}=x_{it}^\top K_hQ_h^\top z_i$, $s_{ih}=\mathbb S(a_{ih})$, the
    outputs added, $u_i=\sum_h\gamma_i^\top s_{ih}$ (linear head, fixed scores). Returns :func:`forward`'s
    ``(log s, u, scores, None, W)`` — $\log s$ of the heads' mean attention $\bar s_i=\frac1H\sum_hs_{ih}$ (so
    $u_i=H\gamma_i^\top\bar s_i$; the selection and ``stuck`` are read from it) and $W=\sum_hK_hQ_h^\top$ — and a
    sixth item, the heads' rows for the gradient: ``(log s, u, parts, H)`` with the rows $(h,i)$ side by side,
    (B,H·N,T), $u_i$ repeated per head (:func:`scaled_gradients`)."""
    D = P.D
    K, Q = th["K"], th["Q"]
    B, H = K.shape[0], K.shape[1]
    Wh = torch.matmul(K, Q.transpose(-1, -2))  # (B,H,d,d)
    Wz = torch.matmul(D.Z.unsqueeze(1), Wh.transpose(-1, -2))  # (B,H,N,d): rows W_h z_i
    a = torch.matmul(D.X.unsqueeze(1), Wz.unsqueeze(-1)).squeeze(-1)  # (B,H,N,T)
    logs, e, lz, top = log_softmax_parts(a, None if D.mask is None else D.mask.unsqueeze(1))
    s = e * torch.exp(-lz)
    u = (s * D.gamma.unsqueeze(1)).sum(-1).sum(1)  # (B,N): the heads' outputs added
    mean = torch.logsumexp(logs, dim=1) - math.log(H)  # log of the heads' mean attention (B,N,T)
    NH = H * D.N
    rows = (
        logs.reshape(B, NH, -1),
        u.repeat(1, H),  # row h*N + i holds u_i
        (e.reshape(B, NH, -1), lz.reshape(B, NH, 1), top.reshape(B, NH, 1)),
        H,
    )
    return mean, u, D.gamma, None, Wh.sum(1), rows


def forward_twolayer(P: Problem, th: dict[str, torch.Tensor]):
    r""":func:`forward` of ``twolayer`` (:mod:`attsvm.twolayer`): $A^1_{i,t\tau}=x_{i\tau}^\top W_1x_{it}$ over
    the keys :attr:`Problem.keys`, $\bar h_{it}=\sum_\tau s^1_{i,t\tau}x_{i\tau}$, $h=\bar h+\rho x$,
    $a^2_{it}=h_{it}^\top W_2z_i$, $s^2_i=\mathbb S(a^2_i)$, $g_{it}=Y_iv^\top h_{it}$, $u_i=\sum_ts^2_{it}g_{it}$.
    Returns :func:`forward`'s ``(log s2, u, g, parts of s2, W2)`` and a sixth item ``(log s1, h_bar, h, W2 z)``
    ((B,N,T,T), (B,N,T,d), (B,N,T,d), (B,N,d)); a row $t$ without a key has $\log s^1=-\infty$, $\bar h=0$."""
    D = P.D
    X, W1, W2 = D.X, th["W1"], th["W2"]
    XW = torch.matmul(X, W1.transpose(-1, -2).unsqueeze(1))  # rows W1 x_it
    A1 = torch.matmul(XW, D.XT if D.XT is not None else X.transpose(-1, -2))  # A1[t, tau] = x_tau^T W1 x_t
    if P.keys is None:
        logs1 = log_softmax_parts(A1)[0]
    else:
        logs1 = log_softmax_parts(A1.masked_fill(P.empty, 0.0), P.keys | P.empty)[0]
        logs1 = logs1.masked_fill(P.empty, float("-inf"))
    hbar = torch.matmul(torch.exp(logs1), X)
    h = hbar + X if P.residual else hbar
    W2z = torch.matmul(D.Z, W2.transpose(-1, -2))  # (B,N,d): rows W2 z_i
    a2 = torch.matmul(h, W2z.unsqueeze(-1)).squeeze(-1)
    logs, e, lz, top = log_softmax_parts(a2, D.mask)
    g = D.Y.unsqueeze(-1) * torch.matmul(h, D.v[:, None, :, None]).squeeze(-1)
    u = (e * torch.exp(-lz) * g).sum(-1)
    return logs, u, g, (e, lz, top), W2, (logs1, hbar, h, W2z)


def scaled_gradients(P: Problem, th: dict[str, torch.Tensor], fw, log_domain: bool):
    r"""Loss gradients per factor as ``(G, M, E)``: $\nabla_k\mathcal L=e^{M_k}\,2^{E_k}\,\hat G_k$ with
    $\max|\hat G_k|\in[\tfrac12,1)$ (or $\hat G_k=0$); ``M`` (B,) float log-scales (0 in the plain mode),
    ``E`` (B,) int64 binary exponents (module docstring). The token weights are formed here; the chain rule to the
    factors is the parameterisation's own function, the one its registry entry names
    (:attr:`~attsvm.gd.init.Parameterisation.torch_gradient`, e.g. :func:`gradients_KQ`)."""
    if PARAMETERISATIONS[P.param].layered:  # its own effective scores per layer (:func:`gradients_twolayer`)
        return P.chain(P, th, fw, None, None, None, log_domain)
    logs, u, ghat, parts = fw[:4]
    D = P.D
    tile = lambda g: g  # noqa: E731
    bt = P.batch  # None for heads: settings_of refuses a mini-batch there
    if PARAMETERISATIONS[P.param].headed:  # every head's rows (h, i) at once (:func:`forward_heads`)
        logs, u, parts, H = fw[5]
        tile = lambda g: g.repeat(1, H, 1)  # noqa: E731
    if log_domain:
        gs, ew = (P.gs, P.eg) if P.fixed_scores else normalise(ghat)
        w, M = token_weights_logdomain(logs, tile(gs), u, P.loss, parts, batch=bt)
    else:  # the plain float weights, underflowing exactly where float64 does (the "underflow" stop)
        gs, ew = (P.gs, P.eg) if P.fixed_scores else (ghat, torch.zeros_like(P.ex))
        w = token_weights(logs, tile(gs), u, P.loss, batch=bt)
        M = torch.zeros(D.B, dtype=D.X.dtype, device=D.X.device)
    return P.chain(P, th, fw, w, M, ew, log_domain)


def _attention_gradient(P: Problem, w: torch.Tensor, ew: torch.Tensor):
    """$\nabla_W\\mathcal L$ from the token weights, power-of-two normalised: ``(G, E)``."""
    G, eG = normalise(grad_from_weights_W(w, P.Xs, P.Zs, P.XTs))
    return G, ew + P.ex + P.ez + eG


def gradients_W(P: Problem, th: dict[str, torch.Tensor], fw, w, M, ew, log_domain: bool):
    r"""``W``: $\nabla_W\mathcal L$ itself (:func:`scaled_gradients` parts)."""
    G, E = _attention_gradient(P, w, ew)
    return {"W": G}, {"W": M}, {"W": E}


def gradients_KQ(P: Problem, th: dict[str, torch.Tensor], fw, w, M, ew, log_domain: bool):
    r"""``KQ``: $(\nabla_W\mathcal L\,Q,\ \nabla_W\mathcal L^\top K)$ at $W=KQ^\top$, both in one $(2B,\dots)$
    buffer normalised together (row by row: the same numbers). $|GQ|\le d\max|Q|$ ($\max|G|<1$): representable,
    as :func:`~attsvm.gd.ranges.check_ranges` bounds $d\|K\|$, $d\|Q\|$."""
    G, E = _attention_gradient(P, w, ew)
    return factor_gradients(G, E, M, th["K"], th["Q"])


def factor_gradients(G: torch.Tensor, E: torch.Tensor, M: torch.Tensor, K: torch.Tensor, Q: torch.Tensor):
    r"""The chain rule of $W=KQ^\top$ from a power-of-two normalised $\nabla_W\mathcal L=2^{E}G$: $(GQ,\ G^\top K)$
    in one $(2B,\dots)$ buffer normalised together, as :func:`scaled_gradients` parts (``M`` the log-scale). ``G``,
    ``K``, ``Q`` may carry a head axis after the batch axis (``heads``: one $W_h=K_hQ_h^\top$ per head)."""
    B = G.shape[0]
    both = torch.empty((2 * B, *Q.shape[1:]), dtype=G.dtype, device=G.device)
    torch.matmul(G, Q, out=both[:B])
    torch.matmul(G.transpose(-1, -2), K, out=both[B:])
    g2, e2 = normalise(both)
    return {"K": g2[:B], "Q": g2[B:]}, {"K": M, "Q": M}, {"K": E + e2[:B], "Q": E + e2[B:]}


def gradients_diag(P: Problem, th: dict[str, torch.Tensor], fw, w, M, ew, log_domain: bool):
    r"""``diag``: $(\mathrm{diag}(G)\odot q,\ \mathrm{diag}(G)\odot k)$ at $W=\mathrm{diag}(k\odot q)$ (entries below
    $\max|q|$, $\max|k|$: representable), normalised together."""
    G, E = _attention_gradient(P, w, ew)
    B = G.shape[0]
    gd = torch.diagonal(G, dim1=-2, dim2=-1)
    both = torch.empty((2 * B, *th["q"].shape[1:]), dtype=G.dtype, device=G.device)
    torch.mul(gd, th["q"], out=both[:B])
    torch.mul(gd, th["k"], out=both[B:])
    g2, e2 = normalise(both)
    return {"k": g2[:B], "q": g2[B:]}, {"k": M, "q": M}, {"k": E + e2[:B], "q": E + e2[B:]}


def gradients_heads(P: Problem, th: dict[str, torch.Tensor], fw, w, M, ew, log_domain: bool):
    r"""``heads``: per head $(G_hQ_h,\ G_h^\top K_h)$, $G_h=\frac1N\sum_i\ell'(u_i)X_i^\top(\mathrm{diag}(s_{ih})-
    s_{ih}s_{ih}^\top)\gamma_iz_i^\top$ — the single-head gradient at $W_h=K_hQ_h^\top$ with the *shared* output
    $u_i=\sum_h\gamma_i^\top s_{ih}$. ``w`` are the token weights of the rows $(h,i)$ (B,H·N,T), formed over $H\cdot N$
    rows (so times $H$ here); one power of two per data set over all heads (the heads' log-scale $M$ is shared), then
    $G_hQ_h$, $G_h^\top K_h$ normalised together (:func:`factor_gradients`, as for ``KQ``)."""
    K, Q = th["K"], th["Q"]
    B, H = K.shape[0], K.shape[1]
    wh = (w * H).view(B, H, P.D.N, -1)
    XT = P.XTs if P.XTs is not None else P.Xs.transpose(-1, -2)
    U = torch.matmul(XT.unsqueeze(1), wh.unsqueeze(-1)).squeeze(-1)  # (B,H,N,d): sum_t w_hit x_it
    G, eG = normalise(torch.matmul(U.transpose(-1, -2), P.Zs.unsqueeze(1)))  # (B,H,d,d)
    return factor_gradients(G, ew + P.ex + P.ez + eG, M, K, Q)


def gradients_twolayer(P: Problem, th: dict[str, torch.Tensor], fw, w, M, ew, log_domain: bool):
    r"""``twolayer`` (:mod:`attsvm.twolayer`, docs/gd.md): $\nabla_{W_2}\mathcal L=\sum_{i,t}\omega^2_{it}h_{it}
    z_i^\top$ with the one-layer token weights $\omega^2$ of the effective scores $g_{it}$ (tokens $h_{it}$), and
    $\nabla_{W_1}\mathcal L=\sum_{i,t,\tau}\omega^1_{i,t\tau}x_{i\tau}x_{it}^\top$ with, per row $(i,t)$, the
    one-layer token weights of the softmax $s^1_{i,t\cdot}$ and the effective scores $\hat c_{it}^\top x_{i\tau}$,
    $\hat c_{it}=Y_iv+(g_{it}-u_i)W_2z_i$, and the row factor $\ell'(u_i)s^2_{it}$ (in the log domain the row
    log-factor $\log|\ell'_i|+\log s^2_{it}$, :func:`~attsvm.gd.model_torch.token_weights_logdomain`), so both
    directions are exact far past softmax underflow. $g_{it}-u_i=\sum_\sigma s^2_{i\sigma}(g_{it}-g_{i\sigma})$
    pairwise. A frozen factor (:attr:`Problem.freeze`) gets the gradient exactly 0 (log-scale $-\infty$): it takes no
    step. ``w``, ``M``, ``ew`` are not read (the weights are formed here)."""
    D = P.D
    logs2, u, g, parts2, _W2, (logs1, _hbar, h, W2z) = fw
    B, N, T, _d = D.X.shape
    G: dict[str, torch.Tensor] = {}
    Ms: dict[str, torch.Tensor] = {}
    Es: dict[str, torch.Tensor] = {}
    zeroE = torch.zeros(B, dtype=torch.int64, device=D.X.device)
    off = torch.full((B,), -math.inf if log_domain else 0.0, dtype=D.X.dtype, device=D.X.device)
    if P.freeze == "W2":
        G["W2"], Ms["W2"], Es["W2"] = torch.zeros_like(th["W2"]), off, zeroE
    else:
        if log_domain:
            gs, eg = normalise(g)
            w2, M2 = token_weights_logdomain(logs2, gs, u, P.loss, parts2)
        else:
            eg, w2 = zeroE, token_weights(logs2, g, u, P.loss)
            M2 = torch.zeros(B, dtype=D.X.dtype, device=D.X.device)
        G2, e2 = normalise(grad_from_weights_W(w2, h, D.Z))
        G["W2"], Ms["W2"], Es["W2"] = G2, M2, eg + e2
    if P.freeze == "W1":
        G["W1"], Ms["W1"], Es["W1"] = torch.zeros_like(th["W1"]), off, zeroE
    else:
        s2 = torch.exp(logs2)
        dg = torch.matmul(score_diff(g), s2.unsqueeze(-1)).squeeze(-1)  # g_t - u, pairwise
        chat = (D.Y.unsqueeze(-1) * D.v.unsqueeze(1)).unsqueeze(2) + dg.unsqueeze(-1) * W2z.unsqueeze(2)
        sc = torch.matmul(chat, D.XT if D.XT is not None else D.X.transpose(-1, -2))  # [t, tau] = chat_t^T x_tau
        if log_domain:
            scs, ec = normalise(sc)
            lg = logs1 if P.empty is None else logs1.masked_fill(P.empty, -math.log(T))  # keyless rows: weight 0
            lf = log_neg_loss_derivative_t(u, P.loss).unsqueeze(-1) + logs2  # (B,N,T)
            w1, M1 = token_weights_logdomain(
                lg.reshape(B, N * T, T), scs.reshape(B, N * T, T), u, P.loss, log_factor=lf.reshape(B, N * T), n=N
            )
            w1 = w1.view(B, N, T, T)
        else:
            ec, M1 = zeroE, torch.zeros(B, dtype=D.X.dtype, device=D.X.device)
            c = (loss_derivative_t(u, P.loss) / N).unsqueeze(-1) * s2  # l'(u_i) s2_it / N
            w1 = c.unsqueeze(-1) * residual_t(torch.exp(logs1), sc)
        U1 = torch.matmul(w1, D.X)  # (B,N,T,d): sum_tau w_{t tau} x_tau
        G1, e1 = normalise(torch.einsum("bntd,bnte->bde", U1, D.X))
        G["W1"], Ms["W1"], Es["W1"] = G1, M1, ec + e1
    return {k: G[k] for k in ("W1", "W2")}, {k: Ms[k] for k in ("W1", "W2")}, {k: Es[k] for k in ("W1", "W2")}


def gradients_p(P: Problem, th: dict[str, torch.Tensor], fw, w, M, ew, log_domain: bool):
    r"""``p``: $\nabla_p\mathcal L=\sum_{i,t}w_{it}x_{it}$ (prompt attention, head $v$ fixed)."""
    gp, ep = normalise(grad_from_weights_p(w, P.Xs))
    return {"p": gp}, {"p": M}, {"p": ew + P.ex + ep}


def gradients_vp(P: Problem, th: dict[str, torch.Tensor], fw, w, M, ew, log_domain: bool):
    r"""``vp``: $\nabla_p\mathcal L$ as ``p``, and in the log domain
    $\nabla_v\mathcal L=-\frac{e^{M_v}}N\sum_ie^{\log|\ell'_i|-M_v}Y_iX_i^\top s_i$, $M_v=\max_i\log|\ell'_i|$."""
    (G,), (Mp,), (Ep,) = (x.values() for x in gradients_p(P, th, fw, w, M, ew, log_domain))
    logs, u = fw[0], fw[1]
    N = u.shape[-1]
    if P.batch is not None:  # the mini-batch loss (1/b) sum over B_k (Problem.on_batch)
        N = P.batch[1]
    if log_domain:
        lc = batch_log_derivative(u, P.loss, P.batch)  # -inf off the mini-batch, before the max
        Mv = lc.amax(-1)
        c = -torch.exp(lc - Mv.unsqueeze(-1)) / N
    else:
        Mv = torch.zeros_like(M)
        c = loss_derivative_t(u, P.loss) / N if P.batch is None else batch_derivative(u, P.loss, P.batch)
    gv, ev = normalise(torch.einsum("bn,bnt,bntd->bd", c * P.D.Y, torch.exp(logs), P.Xs))
    return {"v": gv, "p": G}, {"v": Mv, "p": Mp}, {"v": P.ex + ev, "p": Ep}


def gradients(P: Problem, th: dict[str, torch.Tensor], fw, log_domain: bool):
    r"""Loss gradients per factor and their log-scales: ``(grads, logscale)``; the true gradient of factor
    ``k`` is ``exp(logscale[k]) * grads[k]``. Plain mode: the float gradient itself (logscale 0; it saturates
    to 0 / inf where float64 does); log domain: the representable :func:`scaled_gradients` direction with
    $\log$-scale $M_k+E_k\log2$."""
    G, M, E = scaled_gradients(P, th, fw, log_domain)
    if log_domain:
        return G, {k: M[k] + E[k].to(M[k].dtype) * math.log(2.0) for k in G}
    return {k: ldexp(g, E[k]) for k, g in G.items()}, {k: torch.zeros_like(M[k]) for k in G}


def bshape(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
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
            g, e = normalise(bshape(torch.exp(L - c), g) * g + bshape(torch.exp(L2 - c), g) * thh)
            L = c + e.to(g.dtype) * ln2
        out[k] = (g, L)
    return out


def unit_step(D: torch.Tensor, den: torch.Tensor, lr: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    r"""The step $(\eta/\mathrm{den})\,D$ per data set where ``live``, and exactly 0 elsewhere (a zero gradient takes
    no step: never $0/0$, nor $\eta/\text{tiny}=\infty$ times 0)."""
    fac = torch.where(live, lr / den.clamp(min=torch.finfo(D.dtype).tiny), 0.0)
    return bshape(fac, D) * D


def step_size(lr: torch.Tensor, k: int, schedule: str) -> torch.Tensor:
    r"""$\eta_k$ of update $k=0,1,\dots$: ``"constant"`` $\eta_k=\eta$ (``lr`` itself), ``"rsqrt"``
    $\eta_k=\eta_0/\sqrt{k+1}$."""
    if schedule == "constant":
        return lr
    if schedule == "rsqrt":
        return lr / math.sqrt(k + 1)
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


def plain_update(G, E, th: dict[str, torch.Tensor], lr: torch.Tensor, ridge: float) -> dict[str, torch.Tensor]:
    r"""The plain update $\eta_k(\nabla_k\mathcal L+2\lambda\theta_k)$ per factor from the :func:`scaled_gradients`
    parts; without ridge $(\eta_k2^{E_k})\,\hat G_k$, the factor $\eta_k2^{E_k}$ formed exactly (saturating to 0 or
    $\infty$ only where the step itself would)."""
    if ridge > 0:
        return {k: bshape(lr, g) * (ldexp(g, E[k]) + 2.0 * ridge * th[k]) for k, g in G.items()}
    return {k: bshape(ldexp(lr, E[k]), g) * g for k, g in G.items()}


def lost(moved: dict[str, torch.Tensor], old: dict[str, torch.Tensor]) -> torch.Tensor:
    r"""(B,) bool: every factor of ``moved`` equals ``old`` bit for bit — the update was lost in floating point (a
    fixed point of the float iteration, which every later step would repeat)."""
    zero = None
    for k, a in moved.items():
        z = (a == old[k]).flatten(1).all(-1)
        zero = z if zero is None else zero & z
    assert zero is not None
    return zero


def dual_of_primal(W: torch.Tensor, q: float) -> torch.Tensor:
    r"""$\nabla\psi(W)=\mathrm{sign}(W)|W|^{q-1}$ of the potential $\psi(W)=\frac1q\|W\|_q^q$."""
    return torch.sign(W) * torch.abs(W) ** (q - 1.0)


def primal_of_dual(D: torch.Tensor, q: float) -> torch.Tensor:
    r"""$(\nabla\psi)^{-1}(D)=\mathrm{sign}(D)|D|^{1/(q-1)}$."""
    return torch.sign(D) * torch.abs(D) ** (1.0 / (q - 1.0))


def zero_moments(th: dict[str, torch.Tensor], names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Zero optimizer moments ``<name>:<factor>`` shaped like each factor, and a (B,) log-scale ``s:<factor>``."""
    st: dict[str, torch.Tensor] = {}
    for k, a in th.items():
        for n in names:
            st[f"{n}:{k}"] = torch.zeros_like(a)
        st[f"s:{k}"] = torch.zeros(a.shape[0], dtype=a.dtype, device=a.device)
    return st


def log_mix(g: torch.Tensor, L: torch.Tensor, held: torch.Tensor, s: torch.Tensor):
    r"""The weights that mix a gradient $e^{L}\hat g$ into a moment $e^{s}\hat h$ held on a running log-scale:
    ``(a, w, c, gz)`` with $c=\max(s,L)$ (per data set), $a=e^{s-c}$ and $w=e^{L-c}$ shaped like ``g`` (so
    $e^{-c}(e^{s}\hat h)=a\hat h$, $e^{-c}(e^{L}\hat g)=w\hat g$, neither over- nor underflowing), a zero gradient or
    a zero moment weighing 0 (its scale taken as $-\infty$; both zero: $c=0$), and ``gz`` (B,) "the gradient is
    exactly zero". Adam's moments and the momentum average (:func:`averaged`) mix this way."""
    ninf = torch.full_like(s, -math.inf)
    gz = g.flatten(1).abs().amax(-1) == 0
    Le = torch.where(gz, ninf, L)
    Se = torch.where(held.flatten(1).abs().amax(-1) == 0, ninf, s)
    c = torch.maximum(Le, Se)
    c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))  # both -inf: nothing to scale
    return bshape(torch.exp(Se - c), g), bshape(torch.exp(Le - c), g), c, gz  # exp(-inf) = 0


def averaged(
    parts: dict[str, tuple[torch.Tensor, torch.Tensor]], state: dict[str, torch.Tensor], beta: float
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], torch.Tensor]:
    r"""The averaged gradient $m_t=\beta m_{t-1}+(1-\beta)g_t$ per factor, kept scale-free: ``(m, new state,
    zero)`` with the state ``m:<k>`` $=\hat m$, ``s:<k>`` $=s$, $m=e^{s}\hat m$, $\max|\hat m|\in[\tfrac12,1)$
    (renormalised by an exact power of two). With $g_t=e^{L}\hat g$ (:func:`log_scaled`) the update mixes
    $\beta e^{s-c}\hat m+(1-\beta)e^{L-c}\hat g$, $c=\max(s,L)$ (:func:`log_mix`), so nothing overflows or
    underflows however small the gradient; an entry of relative size below $2^{-1074}$ of its factor's largest is
    lost. ``zero`` (B,): every factor's gradient and new average are exactly zero (a fixed point). The returned
    ``m`` are the mantissas $\hat m$ (a scale-free direction needs nothing else)."""
    ln2 = math.log(2.0)
    out: dict[str, torch.Tensor] = {}
    new: dict[str, torch.Tensor] = {}
    zero = None
    for k, (g, L) in parts.items():
        m = state[f"m:{k}"]
        a, w, c, gz = log_mix(g, L, m, state[f"s:{k}"])
        m2, e = normalise(beta * (a * m) + (1.0 - beta) * (w * g))
        out[k] = m2
        new.update({f"m:{k}": m2, f"s:{k}": c + e.to(g.dtype) * ln2})
        z = gz & (m2.flatten(1) == 0).all(-1)
        zero = z if zero is None else zero & z
    assert zero is not None
    return out, new, zero
