r"""The attention model in torch: logits, log-softmax, losses and closed-form gradients (THEORY §1, §3, §5).

Same formulas as :mod:`attsvm.model` (numpy), batched over a leading axis $B$ of same-shape data sets
and over the rows $i\in[N]$ of the flat view (one row per query). Every gradient is reduced to *token
weights* $\omega_{it}$ with

.. math::
    \nabla_W\mathcal L=\sum_{i,t}\omega_{it}\,x_{it}z_i^\top,\qquad \nabla_p\mathcal L=\sum_{i,t}\omega_{it}\,x_{it},

.. math::
    \omega_{it}=\tfrac1N\,\ell'(u_i)\,r_{it},\quad r_{it}=s_{it}\sum_\tau s_{i\tau}(\hat\gamma_{it}-\hat\gamma_{i\tau}),

where $\hat\gamma_{it}=\partial(Y_if_i)/\partial s_{it}$ is the *effective score* ($\hat\gamma=\gamma$ for the
linear head; $Y_iX_i\nabla h(X_i^\top s_i)$ for a nonlinear head $h$).

**Log-domain direction** (for normalised algorithms). Every term of $\omega$ is
$\ell'_i s_{it}s_{i\tau}(\hat\gamma_{it}-\hat\gamma_{i\tau})$ with $\ell'_i<0$, so with
$\lambda_{it\tau}=\log|\ell'_i|+\log s_{it}+\log s_{i\tau}$ over the pairs $t\ne\tau$,
$\hat\gamma_{it}\ne\hat\gamma_{i\tau}$, and $M=\max_{i,t,\tau}\lambda_{it\tau}$ (per data set),

.. math::
    \omega_{it}=-\tfrac{e^{M}}N\sum_\tau e^{\lambda_{it\tau}-M}(\hat\gamma_{it}-\hat\gamma_{i\tau}),

and $\tilde\omega=\omega e^{-M}$ is representable however far $s$ has underflowed (evaluated in $O(T)$ per
row by :func:`token_weights_logdomain`; :func:`token_weights_logdomain_pairwise` is the $O(T^2)$ reference).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data import Dataset
from .numerics import normalise
from .options import LOSSES, NTP_SQUARE


# ---------------------------------------------------------------------- data on a device
@dataclass(frozen=True)
class TorchData:
    """Flat-view tensors of a (batch of) data set(s), always with a leading batch axis B.

    ``X`` (B,N,T,d), ``Y`` (B,N), ``Z`` (B,N,d), ``v`` (B,d), ``mask`` (B,N,T) bool or None,
    ``gamma`` (B,N,T) scores, ``opt`` (B,N) optimal tokens (visible argmax of gamma)."""

    X: torch.Tensor
    Y: torch.Tensor
    Z: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None
    gamma: torch.Tensor
    opt: torch.Tensor
    XT: torch.Tensor | None = None  # (B,N,d,T) contiguous copy of X^T: faster logits and gradients

    @property
    def B(self) -> int:
        return self.X.shape[0]

    @property
    def N(self) -> int:
        return self.X.shape[1]

    @property
    def T(self) -> int:
        return self.X.shape[2]

    @property
    def d(self) -> int:
        return self.X.shape[3]

    @staticmethod
    def of(ds: Dataset, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float64) -> TorchData:
        f = ds.flat()
        X, Y, Z, v, mask = f.X, f.Y, f.Z, f.v, f.mask
        opt = np.asarray(ds.opt).reshape(*Y.shape)
        if not ds.batched:
            X, Y, Z, v, opt = X[None], Y[None], Z[None], v[None], opt[None]
            mask = None if mask is None else mask[None]
        t = lambda a: torch.as_tensor(np.array(a, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
        Xt, Yt, vt = t(X), t(Y), t(v)
        m = None if mask is None else torch.as_tensor(np.array(mask, dtype=bool), device=device)
        if ds.kind == "ntp":  # next-token data: fixed scores 1[x_it is the label], no head
            g = np.asarray(ds.scores)
            gamma = t(g if ds.batched else g[None])
        else:
            gamma = scores_t(Xt, Yt, vt)
        return TorchData(
            Xt,
            Yt,
            t(Z),
            vt,
            m,
            gamma,
            torch.as_tensor(np.array(opt, dtype=np.int64), device=device),
            Xt.transpose(-1, -2).contiguous(),
        )


# ---------------------------------------------------------------------- elementary maps
def scores_t(X: torch.Tensor, Y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""$\gamma_{it}=Y_iv^\top x_{it}$: (B,N,T)."""
    return Y[..., None] * torch.einsum("bntd,bd->bnt", X, v)


def logits_W(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor, XT: torch.Tensor | None = None) -> torch.Tensor:
    r"""$a_{it}=x_{it}^\top Wz_i$: X (B,N,T,d), W (B,d,d), Z (B,N,d) → (B,N,T): two batched matrix products, the
    $d$-sums in sequential order. (``XT`` is accepted for the callers that hold it; the product with X itself is
    faster: it forms no (B,N,T,d) temporary — 1.7x faster for B=1000, N=6, T=8, d=10 on one core.)"""
    Wz = torch.matmul(Z, W.transpose(-1, -2))  # (B,N,d): rows W z_i
    return torch.matmul(X, Wz.unsqueeze(-1)).squeeze(-1)


def logits_p(X: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    r"""Prompt logits $a_{it}=x_{it}^\top p$: (B,N,T)."""
    return torch.matmul(X, p[:, None, :, None]).squeeze(-1)


def log_softmax_t(a: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    r"""$\log s_{it}=a_{it}-\log\sum_\tau e^{a_{i\tau}}$ (masked tokens: $-\infty$)."""
    if mask is not None:
        a = a.masked_fill(~mask, float("-inf"))
    sh = a - a.amax(dim=-1, keepdim=True)  # explicit: faster than torch.log_softmax over a short last axis
    return sh - torch.log(torch.exp(sh).sum(-1, keepdim=True))


def log_softmax_parts(a: torch.Tensor, mask: torch.Tensor | None = None):
    r"""``(log s, e, log Z, t1)``: $\log s$, the max-shifted exponentials $e_t=e^{a_t-\max a}=s_t/s_{t_1}$,
    $\log\sum_te_t=-\log s_{t_1}$ (…,1) and the top token $t_1=\arg\max_ta_t$ (…,1) — the pieces the
    log-domain direction reuses."""
    if mask is not None:
        a = a.masked_fill(~mask, float("-inf"))
    amax, top = a.max(dim=-1, keepdim=True)
    sh = a - amax
    e = torch.exp(sh)
    lz = torch.log(e.sum(-1, keepdim=True))
    return sh - lz, e, lz, top


def softplus_t(x: torch.Tensor) -> torch.Tensor:
    r"""$\log(1+e^{x})=\max(x,0)+\log(1+e^{-|x|})$, exact to rounding for every $x$ (no overflow), from ``exp`` and
    ``log1p``, whose CPU kernels give an entry the same bits wherever it sits in a tensor (``torch.logaddexp`` and
    ``torch.nn.functional.softplus`` round the vectorised body and the scalar tail of a tensor differently, so a
    run's numbers would depend on its position in a batch, and a split batch would differ in the last bit). Its
    autograd derivatives are $\sigma(x)$ and $\sigma(x)\sigma(-x)$ everywhere, also at $x=0$."""
    m = x.clamp(min=0.0)  # -|x| = x - 2 max(x, 0) exactly; written so, autograd is right at x = 0 too (1/2, 1/4),
    return m + torch.log1p(torch.exp(x - 2.0 * m))  # where abs()'s zero derivative would give 1 and 0


def loss_value_t(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    r"""$\ell(u)$: logistic $\log(1+e^{-u})$ (:func:`softplus_t` of $-u$), exponential $e^{-u}$, correlation $-u$,
    ``nll`` $-\log u$ (next-token data, $u\in(0,1]$ the attention mass on the label)."""
    if loss == "nll":
        return -torch.log(u)
    if loss == "logistic":
        return softplus_t(-u)
    if loss == "exponential":
        return torch.exp(-u)
    if loss == "correlation":
        return -u
    raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")


def log_neg_loss_derivative_t(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    r"""$\log|\ell'(u)|$: logistic $-\log(1+e^{u})$ (:func:`softplus_t`), exponential $-u$, correlation $0$, ``nll``
    $-\log u$."""
    if loss == "nll":
        return -torch.log(u)
    if loss == "logistic":
        return -softplus_t(u)
    if loss == "exponential":
        return -u
    if loss == "correlation":
        return torch.zeros_like(u)
    raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")


def loss_derivative_t(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    r"""$\ell'(u)=-\exp(\log|\ell'(u)|)$ (all three losses are strictly decreasing)."""
    return -torch.exp(log_neg_loss_derivative_t(u, loss))


def residual_t(s: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    r"""$r_t=s_t\sum_\tau s_\tau(g_t-g_\tau)$ in the pairwise (cancellation-free) form."""
    return s * torch.matmul(score_diff(g), s.unsqueeze(-1)).squeeze(-1)


# ---------------------------------------------------------------------- heads
def head_outputs(
    X: torch.Tensor, Y: torch.Tensor, v: torch.Tensor, s: torch.Tensor, head=None
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Return $(u,\hat\gamma)$: $u_i=Y_ih(X_i^\top s_i)$ and effective scores $\hat\gamma_{it}=Y_ix_{it}^\top\nabla h$.

    ``head``: None (linear, $h(m)=v^\top m$, so $u=\gamma^\top s$, $\hat\gamma=\gamma$); ``("relu", V)`` with
    V (d,d') or (B,d,d'): $h(m)=\mathbf 1^\top\mathrm{ReLU}(V^\top m)$; ``("quadratic", lam)``:
    $h(m)=v^\top m-\lambda\|m\|^2$; ``("ntp-square", (E, onehot))`` (next-token data, :func:`ntp_square_head`):
    $h_i(m)=-(1-p_{iy_i})^2$ with $p_i=\mathbb S(Em)$ over the vocabulary ``E`` (B,K,d) and the label $y_i$
    (``onehot`` (B,N,K)), $\nabla h_i=2(1-p_{iy_i})p_{iy_i}E^\top(e_{y_i}-p_i)$ — with the loss ``correlation``,
    $\ell(u)=-u$, the authors' squared loss $(1-p_{iy_i})^2$ of their local-convergence runs.
    Masked tokens must carry $s=0$."""
    if head is None:
        g = scores_t(X, Y, v)
        return (s * g).sum(-1), g
    kind, par = head
    m = torch.matmul(s.unsqueeze(-2), X).squeeze(-2)  # (B,N,d): X_i^T s_i
    if kind == "relu":
        par = torch.as_tensor(par, dtype=X.dtype, device=X.device)
        if par.dim() == 2:
            par = par.expand(X.shape[0], *par.shape)
        pre = torch.matmul(m, par)  # (B,N,d'): V^T m
        h = torch.relu(pre).sum(-1)
        grad_h = torch.matmul((pre > 0).to(m.dtype), par.transpose(-1, -2))  # V 1[V^T m > 0]
    elif kind == "quadratic":
        h = (m * v[:, None, :]).sum(-1) - par * (m * m).sum(-1)
        grad_h = v[:, None, :] - 2.0 * par * m
    elif kind == NTP_SQUARE:
        E, onehot = par  # (B,K,d) vocabulary, (B,N,K) the label of each row
        logp = torch.log_softmax(torch.matmul(m, E.transpose(-1, -2)), dim=-1)  # (B,N,K): log p = log S(E m)
        p = torch.exp(logp)
        py = (p * onehot).sum(-1)
        miss = (p * (1.0 - onehot)).sum(-1)  # 1 - p_y without cancellation
        h = -miss * miss
        grad_h = (2.0 * miss * py).unsqueeze(-1) * torch.matmul(onehot - p, E)  # 2(1-p_y) p_y E^T(e_y - p)
    else:
        raise ValueError(f"unknown head {kind!r}")
    ghat = Y[..., None] * torch.matmul(X, grad_h.unsqueeze(-1)).squeeze(-1)
    return Y * h, ghat


def ntp_square_head(ds, device, dtype) -> tuple:
    r"""The ``("ntp-square", (E, onehot))`` head of next-token data ``ds`` (:func:`head_outputs`)."""
    E = np.asarray(ds.E, dtype=np.float64)
    lab = np.asarray(ds.labels)
    if not ds.batched:
        E, lab = E[None], lab[None]
    onehot = np.eye(E.shape[-2])[lab]
    t = lambda a: torch.as_tensor(np.array(a, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
    return (NTP_SQUARE, (t(E), t(onehot)))


# ---------------------------------------------------------------------- token weights
def token_weights(
    logs: torch.Tensor,
    ghat: torch.Tensor,
    u: torch.Tensor,
    loss: str = "logistic",
    batch: tuple[torch.Tensor, int] | None = None,
) -> torch.Tensor:
    r"""Plain $\omega_{it}=\frac1N\ell'(u_i)r_{it}$ (float, may underflow to 0), shape (B,N,T). ``batch``
    ``(rows, b)``: the mini-batch loss $\frac1b\sum_{i\in\text{rows}}\ell_i$ instead (``rows`` (N,) bool, $b$ of
    them; the other rows weigh exactly 0)."""
    s = torch.exp(logs)
    c = loss_derivative_t(u, loss) / u.shape[-1] if batch is None else batch_derivative(u, loss, batch)
    return c.unsqueeze(-1) * residual_t(s, ghat)


def batch_derivative(u: torch.Tensor, loss: str, batch: tuple[torch.Tensor, int]) -> torch.Tensor:
    r"""$\ell'(u_i)/b$ on the mini-batch rows and exactly 0 elsewhere (``batch`` ``(rows, b)``): (B,N)."""
    rows, b = batch
    return torch.where(rows, loss_derivative_t(u, loss) / b, torch.zeros_like(u))


def batch_log_derivative(u: torch.Tensor, loss: str, batch: tuple[torch.Tensor, int] | None) -> torch.Tensor:
    r"""$\log|\ell'(u_i)|$ on the mini-batch rows and $-\infty$ elsewhere (``batch`` ``(rows, b)``; ``None``: every
    row): (B,N). Masked *before* any normalisation by the largest weight, so a row outside the batch never sets
    the scale (the rows inside cannot underflow because of it)."""
    lc = log_neg_loss_derivative_t(u, loss)
    return lc if batch is None else lc.masked_fill(~batch[0], float("-inf"))


def score_diff(ghat: torch.Tensor) -> torch.Tensor:
    r"""Pairwise score differences $\hat\gamma_{it}-\hat\gamma_{i\tau}$: (B,N,T,T)."""
    return ghat.unsqueeze(-1) - ghat.unsqueeze(-2)


def token_weights_logdomain(
    logs: torch.Tensor,
    ghat: torch.Tensor,
    u: torch.Tensor,
    loss: str = "logistic",
    parts: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    batch: tuple[torch.Tensor, int] | None = None,
    log_factor: torch.Tensor | None = None,
    n: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""$(\tilde\omega, M)$ with $\omega=e^{M}\tilde\omega$ (module docstring): $\tilde\omega$ (B,N,T), $M$ (B,).
    ``log_factor`` (B,N): the rows' log-factors in place of $\log|\ell'(u_i)|$ (``u`` is then not read), ``n``
    the divisor in place of $N$ (the two-layer model's layer-1 rows $(i,t)$: $\log|\ell'_i|+\log s^2_{it}$ over
    the $N$ inputs, :func:`attsvm.gd.steps.gradients_twolayer`).
    ``batch`` ``(rows, b)``: the weights of the mini-batch loss $\frac1b\sum_{i\in\text{rows}}\ell_i$
    (:func:`batch_log_derivative`: the other rows' $\log|\ell'|=-\infty$ before $M$ is taken, their weights exactly
    0).

    $M$ is the largest log-weight over off-diagonal pairs with distinct effective scores
    (:func:`log_weight_max`); a data set without any such pair (zero gradient) gets $M=-\infty$ and
    $\tilde\omega=0$. The pair sum is evaluated in $O(T)$ per row, centred at the row's top token $t_1$
    ($A=\{t:\hat\gamma_t=\hat\gamma_{t_1}\}$, $\delta_t=\hat\gamma_t-\hat\gamma_{t_1}$, exactly 0 on $A$):

    .. math::
        \sum_\tau e^{\lambda_{t\tau}-M}(\hat\gamma_t-\hat\gamma_\tau)
        =[t\notin A]\,e^{\alpha_t}\delta_t
        -\frac{s_t}{s_{t_1}}\sum_{\tau\notin A}e^{\alpha_{t_1}+\log s_\tau}\delta_\tau,

    with $\alpha_t=\log|\ell'|+\log s_t-M$ (using $\sum_\tau s_\tau=1$).
    Both exponentials are evaluated as $e^{S_{t}-M}$ with $S_t=\log|\ell'|+\log s_{t_1}+\log s_t$ and $M=\max S$
    taken over these very floats ($e^{\alpha_t}=e^{S_t-M}/s_{t_1}$), so the heaviest pair gets exactly $e^0$ even
    when $|S|\sim10^{300}$ (where re-associating the sum would be off by $10^{284}$). Every exponent is $\le0$
    (valid pairs through $t_1$) and $1/s_{t_1}\le T$: nothing overflows, nothing cancels
    catastrophically ($\delta$ is an exact difference), however far $s$ has underflowed.
    ``parts``: ``(e, log Z, t1)`` of :func:`log_softmax_parts` for ``logs`` (saves recomputing them)."""
    lc = batch_log_derivative(u, loss, batch) if log_factor is None else log_factor  # (B,N); -inf off the batch
    if parts is None:
        mx, idx = logs.max(dim=-1, keepdim=True)  # log s_{t1}
        q = torch.exp(logs - mx)  # s_t / s_{t1}
        lz = None
    else:
        q, lz, idx = parts
        mx = -lz
    dA = ghat - torch.gather(ghat, -1, idx)  # delta_t, exactly 0 on A
    lsC = logs.masked_fill(dA == 0, float("-inf"))  # log s_t off A
    # S_it = log|l'_i| + log s_{i t1} + log s_it: the pair log-weights through t1; M = max S is one of these
    # very numbers, so S - M is exactly 0 at the heaviest pair and <= 0 elsewhere, even when |S| ~ 1e300
    S = lsC.add_((lc + mx.squeeze(-1)).unsqueeze(-1))  # (B,N,T), in place of lsC (a fresh tensor)
    M = S.flatten(1).amax(dim=-1)  # (B,)
    # M = -inf only when lsC is -inf throughout the data set; any finite shift then gives w = 0
    eS = S.sub_(M.clamp(min=torch.finfo(M.dtype).min).view(-1, 1, 1)).exp_()  # e^{alpha_t1 + log s_t}
    rho = (eS * dA).sum(-1, keepdim=True)
    # e^{alpha_t} = e^{S_t - M} / s_t1; 1 / s_t1 = e^{-mx}: with the parts, -mx is log Z itself (no negation)
    w = eS.mul_(torch.exp(lz if parts is not None else -mx)).mul_(dA).sub_(q * rho)
    count = n if n is not None else (u.shape[-1] if batch is None else batch[1])
    return w.mul_(-1.0 / count), M


def token_weights_logdomain_pairwise(
    logs: torch.Tensor, ghat: torch.Tensor, u: torch.Tensor, loss: str = "logistic"
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Reference $O(T^2)$ form of :func:`token_weights_logdomain`: $\sum_\tau\exp(\min(0,\lambda_{t\tau}-M))
    (\hat\gamma_t-\hat\gamma_\tau)$ pair by pair (the clamp only touches equal-score pairs, weight 0)."""
    lc = log_neg_loss_derivative_t(u, loss)
    M = log_weight_max(logs, ghat, lc)
    Ms = torch.where(torch.isfinite(M), M, torch.zeros_like(M))
    lam = (logs + (lc - Ms[:, None]).unsqueeze(-1)).unsqueeze(-1) + logs.unsqueeze(-2)
    w = lam.clamp_(max=0.0).exp_().mul_(score_diff(ghat)).sum(-1)
    return w.mul_(-1.0 / u.shape[-1]), M


def log_weight_max(logs: torch.Tensor, ghat: torch.Tensor, lc: torch.Tensor) -> torch.Tensor:
    r"""$M=\max_i\big(\log|\ell'_i|+\log s_{it_1}+\max_{\tau:\hat\gamma_{i\tau}\ne\hat\gamma_{it_1}}
    \log s_{i\tau}\big)$, $t_1=\arg\max_t s_{it}$: the largest pair log-weight in $O(T)$ per row.
    (Any valid pair $(a,b)$ has a valid pair through $t_1$ at least as heavy:
    $(t_1,a)$ if $\hat\gamma_a\ne\hat\gamma_{t_1}$, else $(t_1,b)$.)"""
    mx, idx = logs.max(dim=-1)
    gtop = torch.gather(ghat, -1, idx.unsqueeze(-1))
    other = logs.masked_fill(ghat == gtop, float("-inf")).amax(dim=-1)
    return (lc + mx + other).amax(dim=-1)


def grad_from_weights_W(
    w: torch.Tensor, X: torch.Tensor, Z: torch.Tensor, XT: torch.Tensor | None = None
) -> torch.Tensor:
    r"""$\sum_{i,t}\omega_{it}x_{it}z_i^\top$: (B,d,d) (``XT``: X^T (B,N,d,T) contiguous, optional)."""
    if XT is not None:
        U = torch.matmul(XT, w.unsqueeze(-1)).squeeze(-1)  # (B,N,d): sum_t w_it x_it
    else:
        U = (w.unsqueeze(-1) * X).sum(-2)
    return torch.matmul(U.transpose(-1, -2), Z)


def grad_from_weights_p(w: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    r"""$\sum_{i,t}\omega_{it}x_{it}$: (B,d)."""
    return torch.einsum("bnt,bntd->bd", w, X)


# ---------------------------------------------------------------------- public closed forms
def _state_W(D: TorchData, W: torch.Tensor, head, loss: str):
    logs = log_softmax_t(logits_W(D.X, W, D.Z), D.mask)
    s = torch.exp(logs)
    u, ghat = head_outputs(D.X, D.Y, D.v, s, head)
    return logs, s, u, ghat


def loss_W_torch(D: TorchData, W: torch.Tensor, loss: str = "logistic", head=None) -> torch.Tensor:
    r"""$\mathcal L(W)=\frac1N\sum_i\ell(u_i)$: (B,)."""
    _, _, u, _ = _state_W(D, W, head, loss)
    return loss_value_t(u, loss).mean(-1)


def grad_W_torch(D: TorchData, W: torch.Tensor, loss: str = "logistic", head=None) -> torch.Tensor:
    r"""Closed-form $\nabla\mathcal L(W)=\frac1N\sum_i\ell'(u_i)X_i^\top r_iz_i^\top$ (claim ``grad-closed-form``)."""
    logs, _, u, ghat = _state_W(D, W, head, loss)
    return grad_from_weights_W(token_weights(logs, ghat, u, loss), D.X, D.Z)


def grad_KQ_torch(D: TorchData, K: torch.Tensor, Q: torch.Tensor, loss: str = "logistic", head=None):
    r"""$(\nabla_K,\nabla_Q)=(\nabla\mathcal L(W)Q,\ \nabla\mathcal L(W)^\top K)$ at $W=KQ^\top$."""
    G = grad_W_torch(D, torch.matmul(K, Q.transpose(-1, -2)), loss, head)
    return torch.matmul(G, Q), torch.matmul(G.transpose(-1, -2), K)


def _state_p(D: TorchData, p: torch.Tensor, v: torch.Tensor, head, loss: str):
    logs = log_softmax_t(logits_p(D.X, p), D.mask)
    s = torch.exp(logs)
    u, ghat = head_outputs(D.X, D.Y, v, s, head)
    return logs, s, u, ghat


def loss_p_torch(D: TorchData, p: torch.Tensor, v: torch.Tensor | None = None, loss: str = "logistic", head=None):
    r"""Prompt-attention loss $\frac1N\sum_i\ell(Y_iv^\top X_i^\top\mathbb S(X_ip))$: (B,)."""
    _, _, u, _ = _state_p(D, p, D.v if v is None else v, head, loss)
    return loss_value_t(u, loss).mean(-1)


def grad_p_torch(D: TorchData, p: torch.Tensor, v: torch.Tensor | None = None, loss: str = "logistic", head=None):
    r"""$\nabla_p\mathcal L=\frac1N\sum_i\ell'(u_i)X_i^\top r_i$: (B,d)."""
    logs, _, u, ghat = _state_p(D, p, D.v if v is None else v, head, loss)
    return grad_from_weights_p(token_weights(logs, ghat, u, loss), D.X)


def grad_vp_torch(D: TorchData, v: torch.Tensor, p: torch.Tensor, loss: str = "logistic"):
    r"""Joint prompt training: $\nabla_v=\frac1N\sum_i\ell'_iY_iX_i^\top s_i$ and $\nabla_p$ as :func:`grad_p_torch`."""
    logs, s, u, ghat = _state_p(D, p, v, None, loss)
    c = loss_derivative_t(u, loss) / u.shape[-1]
    gv = torch.einsum("bn,bnt,bntd->bd", c * D.Y, s, D.X)
    return gv, grad_from_weights_p(token_weights(logs, ghat, u, loss), D.X)


def corr_t(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    r"""$\mathrm{corr}(A,B)=\langle\hat A,\hat B\rangle/(\|\hat A\|\|\hat B\|)$ over all but the leading axis, with
    $\hat A=2^{-e_A}A$, $\hat B=2^{-e_B}B$ power-of-two normalised (scale-safe for any finite $A,B$; NaN at 0)."""
    A = normalise(A.flatten(1))[0]
    B = normalise(B.flatten(1))[0]
    return (A * B).sum(-1) / (torch.linalg.vector_norm(A, dim=-1) * torch.linalg.vector_norm(B, dim=-1))
