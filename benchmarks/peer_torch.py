r"""The batched eager torch peer of ``attsvm.gd.run`` (normalised GD, ``algo="ngd"``, logistic loss, linear head) a
user would write: one float64 tensor over all B data sets, no per-run loop, the log-domain direction written from
the equations (those of :mod:`peer_jax`'s docstring: $S_{it}=\log|\ell'_i|+\log s_{it_1}+\log s_{it}$ off the
top token's score, $M=\max S$, $\tilde\omega=-\frac1N(e^{S-M}e^{\log Z}\delta-e\sum_\tau e^{S_\tau-M}\delta_\tau)$,
$\hat G=\sum_{i,t}\tilde\omega_{it}x_{it}z_i^\top$), then $W\leftarrow W-\eta\hat G/\|\hat G\|_F$, or per factor
for $(K,Q)$ with $g_K=\hat GQ$, $g_Q=\hat G^\top K$. A factor whose direction is exactly zero takes no step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def direction(W: torch.Tensor, X: torch.Tensor, Z: torch.Tensor, gam: torch.Tensor) -> torch.Tensor:
    r"""$\hat G=e^{-M}\nabla\mathcal L(W)$ for every data set: W (B,d,d), X (B,N,T,d), Z (B,N,d), gam (B,N,T)."""
    N = X.shape[1]
    a = torch.einsum("bntd,bnd->bnt", X, Z @ W.transpose(-1, -2))
    amax, top = a.max(-1, keepdim=True)
    sh = a - amax
    e = torch.exp(sh)
    lz = torch.log(e.sum(-1, keepdim=True))
    logs = sh - lz
    u = (e * torch.exp(-lz) * gam).sum(-1)
    lc = -F.softplus(u, threshold=1e300)  # log|l'(u)| of the logistic loss: -log(1 + e^u)
    dA = gam - torch.gather(gam, -1, top)
    S = logs.masked_fill(dA == 0, float("-inf")) + (lc - lz.squeeze(-1)).unsqueeze(-1)
    M = S.flatten(1).amax(-1).clamp(min=torch.finfo(S.dtype).min)
    eS = torch.exp(S - M.view(-1, 1, 1))
    rho = (eS * dA).sum(-1, keepdim=True)
    w = (eS * torch.exp(lz) * dA - e * rho) * (-1.0 / N)
    return torch.einsum("bntd,bnt,bne->bde", X, w, Z)


def unit(g: torch.Tensor, lr: float) -> torch.Tensor:
    r"""$\eta\,g/\|g\|_F$ per data set, exactly 0 where $g=0$."""
    n = torch.linalg.vector_norm(g.flatten(1), dim=-1).view(-1, 1, 1)
    return torch.where(n > 0, lr / torch.where(n > 0, n, 1.0), 0.0) * g


def run(
    th: dict[str, torch.Tensor], X: torch.Tensor, Z: torch.Tensor, gam: torch.Tensor, lr: float, steps: int
) -> dict[str, torch.Tensor]:
    """``steps`` normalised steps of every data set (``th``: ``{"W"}`` or ``{"K","Q"}``, (B,d,d) tensors)."""
    th = dict(th)
    for _ in range(steps):
        if "W" in th:
            th["W"] = th["W"] - unit(direction(th["W"], X, Z, gam), lr)
        else:
            K, Q = th["K"], th["Q"]
            G = direction(K @ Q.transpose(-1, -2), X, Z, gam)
            th = {"K": K - unit(G @ Q, lr), "Q": Q - unit(G.transpose(-1, -2) @ K, lr)}
    return th
