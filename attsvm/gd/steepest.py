r"""Normalised steepest-descent directions (THEORY §6), batched over the leading axis $B$.

For a norm $\|\cdot\|$ on one factor (a ``(B, ...)`` tensor $g$, one factor per data set) the steepest direction
is $\Delta=\arg\max_{\|\Delta\|\le1}\langle g,\Delta\rangle$; it satisfies $\|\Delta\|=1$ and
$\langle g,\Delta\rangle=\|g\|_*$ (the dual norm) for $g\ne0$, and is $0$ for $g=0$:

========  ======================================================================  =======================
``norm``  $\Delta$                                                                $\|g\|_*$
========  ======================================================================  =======================
``fro``   $g/\|g\|_F$                                                             $\|g\|_F$
``linf``  $\mathrm{sign}(g)$ (entrywise $\ell_\infty$ ball)                       $\sum|g_j|$
``l1``    $\frac1{|J|}\sum_{j\in J}\mathrm{sign}(g_j)e_j$, $J=\arg\max_j|g_j|$      $\max_j|g_j|$
``spec``  $U_rV_r^\top$, $g=U\Sigma V^\top$, the $r$ singular values $>\rho\,\sigma_1$  $\sum_i\sigma_i$ (nuclear)
``lq``    $\mathrm{sign}(g)|g|^{q^*-1}/\|g\|_{q^*}^{q^*-1}$, $q^*=q/(q-1)$        $\|g\|_{q^*}$
========  ======================================================================  =======================

* ``l1`` ties: every entry whose magnitude equals the largest one *bit for bit* shares the step evenly, so the
  direction is deterministic and commutes with permutations of the entries (no "first index" rule).
* ``spec``: the reduced SVD; singular values at most $\rho\,\sigma_1$, $\rho$ = ``tol("spec_rank")``
  ($10^{-8}\approx\sqrt{\varepsilon}$ in float64, $3\cdot10^{-4}$ in float32), are treated as zero: $\Delta$ is
  $UV^\top$ on the nonzero singular directions only (a rank-deficient gradient, e.g. $W$'s with $n<d$ queries,
  gives a rank-$r$ step inside its row and column spaces; the null directions of an SVD are arbitrary, and
  the zero singular values of a float SVD come out as $\sim d\,\varepsilon\,\sigma_1$). Why $\sqrt\varepsilon$:
  the gradient is known to a relative $\varepsilon$, so the singular vectors of $\sigma_i=\delta\sigma_1$ are
  known only to $\sim\varepsilon/\delta$, and $UV^\top$ weighs them fully; dropping them changes
  $\langle g,\Delta\rangle$ by at most $r\rho\,\sigma_1\le r\rho\,\|g\|_*$. $\rho=\sqrt\varepsilon$ balances the
  two. (Measured: spectral NSD chatters, its smallest kept singular value sits at the threshold in most steps
  of a long run, so two correct implementations agree to $\sim\varepsilon/\rho$ there: $2\cdot10^{-10}$ at
  $\rho=10^{-8}$, $1.5\cdot10^{-6}$ at $10^{-12}$, over 3000 steps.) The direction is the polar factor of $g$ on
  the kept directions, unique (it does not depend on the SVD's signs).
  A vector factor ($p$, $v$: shape ``(B,d)``) is a $d\times1$ matrix: $\Delta=g/\|g\|_2$.
* ``lq`` ($1<q<\infty$): computed from $r=|g|/\max|g|\in[0,1]$, so $\|r\|_{q^*}\ge1$ and nothing
  overflows; ``fro`` is ``lq`` with $q=2$ up to rounding.

Every direction is positively homogeneous of degree 0, $\Delta(cg)=\Delta(g)$ for $c>0$: the engine feeds it
the power-of-two normalised log-domain gradient (:func:`~attsvm.gd.steps.scaled_gradients`), so the
direction is exact however far past float64 underflow the gradient itself is. :func:`direction_parts` returns
$\Delta$ as ``(D, den)``, $\Delta=D/\mathrm{den}$, so that a step is formed as $(\eta/\mathrm{den})\,D$ —
for ``fro`` exactly the arithmetic of normalised GD (``algo="ngd"``), so ``nsd`` with ``norm="fro"`` is
bit-identical to ``ngd``. :func:`~attsvm.gd.options.fro_bound` is the norm-equivalence constant
$\sup_{\|\Delta\|\le1}\|\Delta\|_F$
the up-front range check (:func:`~attsvm.gd.ranges.check_ranges`) multiplies the step sizes with.
"""

from __future__ import annotations

import math

import torch

from ..tolerances import tol
from .options import NORMS

__all__ = ["NORMS", "direction", "direction_parts"]


def _bview(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return x.view(x.shape[0], *([1] * (like.dim() - 1)))


def direction_parts(g: torch.Tensor, norm: str, q: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(D, den)`` with the steepest direction $\Delta=D/\mathrm{den}$ of each ``g[b]`` in ``norm``
    (module docstring); ``den`` (B,) is positive where ``g[b]`` is nonzero, and $D=0$, ``den`` $=0$ where it
    is zero. ``q`` ($1<q<\infty$) only for ``norm="lq"``. ``g`` should be power-of-two normalised
    ($\max|g|\in[\tfrac12,1)$) or at least far from over- and underflow (``fro`` squares it)."""
    flat = g.flatten(1)
    mx = flat.abs().amax(-1)
    nz = mx > 0
    one = nz.to(g.dtype)
    if norm == "fro":
        return g, torch.linalg.vector_norm(flat, dim=-1)
    if norm == "linf":
        return torch.sign(g), one
    if norm == "l1":
        top = (g.abs() == _bview(mx, g)) & _bview(nz, g)
        return torch.sign(g) * top.to(g.dtype), top.flatten(1).sum(-1).to(g.dtype)
    if norm == "spec":
        mat = g.unsqueeze(-1) if g.dim() == 2 else g
        U, s, Vh = torch.linalg.svd(mat, full_matrices=False)
        rho = tol("spec_rank", dtype=str(g.dtype), device=g.device.type)
        keep = (s > rho * s[..., :1]).to(g.dtype)  # s[..., 0] = sigma_1 (descending); all False for g = 0
        D = torch.matmul(U * keep.unsqueeze(-2), Vh)
        return D.reshape(g.shape), one
    if norm == "lq":
        if q is None or not (1.0 < q < math.inf):
            raise ValueError(f"norm 'lq' needs a finite q > 1, got {q!r}")
        qs = q / (q - 1.0)
        r = g.abs() / _bview(torch.where(nz, mx, torch.ones_like(mx)), g)  # in [0, 1], max 1 (or all 0)
        rp = r ** (qs - 1.0)
        den = (rp * r).flatten(1).sum(-1) ** ((qs - 1.0) / qs)  # ||r||_{q*}^{q*-1} >= 1 (0 for g = 0)
        return torch.sign(g) * rp, den
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def direction(g: torch.Tensor, norm: str, q: float | None = None) -> torch.Tensor:
    r"""The steepest direction $\Delta=\arg\max_{\|\Delta\|\le1}\langle g,\Delta\rangle$ of each ``g[b]``
    (0 for a zero ``g[b]``, never $0/0$)."""
    D, den = direction_parts(g, norm, q)
    fac = torch.where(den > 0, 1.0 / den.clamp(min=torch.finfo(g.dtype).tiny), torch.zeros_like(den))
    return _bview(fac, D) * D
