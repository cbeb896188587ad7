r"""Scale-safe floating point for the GD engine: exact power-of-two scaling and norms that never square into
overflow (THEORY §5, numerical traps).

**Power-of-two scaling.** Multiplying by $2^e$ commutes with rounding (away from the overflow and subnormal
ranges), so a quantity is carried as $x=2^{e}\hat x$ with $\max|\hat x|\in[\tfrac12,1)$
(:func:`max_exponent`, :func:`normalise`, :func:`ldexp`): every direction $g/\|g\|$, every step
$\eta g$ computed from $\hat x$ is *bit-identical* to the unscaled computation wherever that one is
representable, and stays finite and accurate where $\|g\|^2$ (or $g$ itself) would overflow or underflow.

**Norms.** $\|x\|=m\,\|x/m\|$ with $m=2^{e}\ge\max|x|$ (:func:`fro_norm`;
numpy: :func:`attsvm.norms.frobenius_norm`);
``torch.linalg.vector_norm`` and ``numpy.linalg.norm`` square their entries and return ``inf`` / ``0`` for
$\max|x|\gtrsim10^{154}$ / $\lesssim10^{-162}$.

The up-front representability bounds of a run are :mod:`.ranges` (no torch).
"""

from __future__ import annotations

import torch

__all__ = [
    "IN_RANGE_BITS",
    "fro_norm",
    "ldexp",
    "lp_norm",
    "max_exponent",
    "normalise",
    "pow2",
    "pow2_bits",
    "range_scaled",
]

#: data whose largest magnitude lies within $2^{\pm k}$, $k$ = the dtype's maximal exponent / 8 (128 for
#: float64, 16 for float32), is used unscaled (products of three such factors stay far inside the range).
IN_RANGE_BITS = {torch.float64: 128, torch.float32: 16}


def _exp_range(dtype: torch.dtype) -> tuple[int, int]:
    """Exponents $e$ with $2^e$ a normal number of ``dtype``."""
    return (-1022, 1023) if dtype == torch.float64 else (-126, 127)


def pow2_bits(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    r"""$2^{e}$ exactly for an int64 tensor ``e``, built from its bits: normal powers for $e\ge e_{\min}$, subnormal
    ones down to $2^{e_{\min}-p+1}$ ($2^{-1074}$ in float64); ``e`` is clamped to that range. The definition
    behind the table of :func:`pow2`."""
    lo, hi = _exp_range(dtype)
    mant = 52 if dtype == torch.float64 else 23
    sub = torch.ones_like(e) << (e - (lo - mant)).clamp(0, mant - 1)  # 2^e for lo - mant <= e < lo
    if dtype == torch.float64:
        return torch.where(e >= lo, (e.clamp(lo, hi) + 1023) << 52, sub).view(torch.float64)
    return torch.where(e >= lo, (e.clamp(lo, hi) + 127) << 23, sub).to(torch.int32).view(torch.float32)


_POW2: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}


def pow2(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    r"""$2^{e}$ exactly for an integer tensor ``e`` (clamped to $[e_{\min}-p+1,e_{\max}]$, subnormal powers
    included): a lookup in the table of every power of two of ``dtype`` on ``e``'s device, built once by
    :func:`pow2_bits` (2098 entries in float64) — two operations instead of ten, the same bits."""
    lo, hi = _exp_range(dtype)
    first = lo - (52 if dtype == torch.float64 else 23)
    key = (dtype, e.device)
    table = _POW2.get(key)
    if table is None:
        table = _POW2[key] = pow2_bits(torch.arange(first, hi + 1, dtype=torch.int64, device=e.device), dtype)
    return table[(e - first).clamp_(0, hi - first)]


def _bview(e: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return e.view(e.shape[0], *([1] * (like.dim() - 1)))


def ldexp(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    r"""$x\cdot2^{e}$ with a per-batch integer exponent ``e`` (B,), correctly saturating to $0$ / $\pm\infty$:
    the exponent is applied in up to three exact factors of the same sign, so no intermediate overflows or
    underflows before the result does."""
    lo, hi = _exp_range(x.dtype)
    rest = e.to(torch.int64).clamp(3 * lo, 3 * hi)
    out = x
    for _ in range(3):
        part = rest.clamp(lo, hi)
        out = out * _bview(pow2(part, x.dtype), x)
        rest = rest - part
    return out


def max_exponent(x: torch.Tensor) -> torch.Tensor:
    r"""$e_b$ (B,) int64 with $\max|x_b|=f\,2^{e_b}$, $f\in[\tfrac12,1)$ ($0$ for an all-zero $x_b$). (``abs`` then
    ``amax``: ``vector_norm(ord=inf)`` gives the same value but takes 8x longer on CPU.)"""
    m = x.abs().flatten(1).amax(-1)
    return torch.frexp(m)[1].to(torch.int64)


def normalise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""$(\hat x, e)$ with $x=2^{e}\hat x$ exactly and $\max|\hat x_b|\in[\tfrac12,1)$ (a subnormal maximum:
    $\ge2^{-52}$); one exact multiplication."""
    lo, hi = _exp_range(x.dtype)
    mant = 52 if x.dtype == torch.float64 else 23
    e = max_exponent(x).clamp_(-hi, mant - lo)  # 2^-e: a normal or subnormal power (exact); subnormal max: 2^-lo
    return x * _bview(pow2(-e, x.dtype), x), e


def fro_norm(x: torch.Tensor) -> torch.Tensor:
    r"""Scale-safe $\|x_b\|_F$ over all but the leading axis: $2^{e}\|2^{-e}x_b\|$ (finite for finite $x$ up
    to rounding at the very top of the range)."""
    xh, e = normalise(x)
    return ldexp(torch.linalg.vector_norm(xh.flatten(1), dim=-1), e)


def lp_norm(x: torch.Tensor, p: float) -> torch.Tensor:
    r"""Scale-safe entrywise $\|x_b\|_p=m_b\,(\sum_j(|x_{bj}|/m_b)^p)^{1/p}$, $m_b=\max_j|x_{bj}|$, over all but the
    leading axis ($1\le p<\infty$): the sum is at least 1, so it neither underflows for large $p$ nor overflows."""
    a = x.abs().flatten(1)
    m = a.amax(-1)
    r = a / torch.where(m > 0, m, torch.ones_like(m)).unsqueeze(-1)
    return m * (r**p).sum(-1) ** (1.0 / p)


def range_scaled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""$(\hat x, e)$, $x=2^{e}\hat x$: $x$ itself and $e=0$ when every data set's $\max|x|$ lies within
    $2^{\pm}$:data:`IN_RANGE_BITS` (no copy), else the exact power-of-two rescaling (one check at set-up)."""
    e = max_exponent(x)
    k = IN_RANGE_BITS.get(x.dtype, 16)
    if bool(((e.abs() <= k) | (x.flatten(1).abs().amax(-1) == 0)).all()):
        return x, torch.zeros_like(e)
    return ldexp(x, -e), e
