r"""Scale-safe floating point for the GD engine: exact power-of-two scaling, norms that never square into
overflow, and the up-front representability bounds of a run (THEORY §5, numerical traps).

**Power-of-two scaling.** Multiplying by $2^e$ commutes with rounding (away from the overflow and subnormal
ranges), so a quantity is carried as $x=2^{e}\hat x$ with $\max|\hat x|\in[\tfrac12,1)$
(:func:`max_exponent`, :func:`normalise`, :func:`ldexp`): every direction $g/\|g\|$, every step
$\eta g$ computed from $\hat x$ is *bit-identical* to the unscaled computation wherever that one is
representable, and stays finite and accurate where $\|g\|^2$ (or $g$ itself) would overflow or underflow.

**Norms.** $\|x\|=m\,\|x/m\|$ with $m=2^{e}\ge\max|x|$ (:func:`fro_norm`;
numpy: :func:`attsvm.norms.frobenius_norm`);
``torch.linalg.vector_norm`` and ``numpy.linalg.norm`` square their entries and return ``inf`` / ``0`` for
$\max|x|\gtrsim10^{154}$ / $\lesssim10^{-162}$.

**Representability bounds** (:func:`check_ranges`). With $F$ the largest float of the dtype and the limit
$F/4$ (room for a difference of two logits and for rounding):

* scores $|\gamma_{it}|=|Y_iv^\top x_{it}|\le\|x_{it}\|\,\|v\|$;
* logits $|x_{it}^\top Wz_i|\le\|x_{it}\|\,\|W\|_F\,\|z_i\|$ (and the intermediate $\|Wz_i\|\le\|W\|_F\|z_i\|$),
  with $\|W\|_F\le R$: for ``ngd`` every step has Frobenius norm ``lr`` per factor, so
  $\|W_k\|_F\le\|W_0\|_F+\eta k$ ($(K,Q)$: $\|KQ^\top\|_F\le\|K\|_F\|Q\|_F$; $p$, $v$ alike) and the whole run
  is checked before it starts; ``gd`` / ``md`` have no a-priori bound, so only the initial point is checked
  (an overflow later is the stop reason ``non-finite``);
* nonlinear heads: ReLU $|u|,|\hat\gamma|\le\sqrt{d'}\,\|V\|_F\|x\|$; quadratic $\|m\|^2\le\max\|x\|^2$,
  $|\hat\gamma|\le\|x\|(\|v\|+2\lambda\|x\|)$.

A bound above the limit is an :class:`~attsvm.errors.InputError` naming the fields and the bound.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import InputError
from ..norms import frobenius_norm

__all__ = [
    "IN_RANGE_BITS",
    "check_ranges",
    "fro_norm",
    "ldexp",
    "max_exponent",
    "normalise",
    "pow2",
    "range_scaled",
    "representable_limit",
]

#: data whose largest magnitude lies within $2^{\pm k}$, $k$ = the dtype's maximal exponent / 8 (128 for
#: float64, 16 for float32), is used unscaled (products of three such factors stay far inside the range).
IN_RANGE_BITS = {torch.float64: 128, torch.float32: 16}


def _exp_range(dtype: torch.dtype) -> tuple[int, int]:
    """Exponents $e$ with $2^e$ a normal number of ``dtype``."""
    return (-1022, 1023) if dtype == torch.float64 else (-126, 127)


def pow2(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    r"""$2^{e}$ exactly for an int64 tensor ``e``, built from its bits: normal powers for $e\ge e_{\min}$, subnormal
    ones down to $2^{e_{\min}-p+1}$ ($2^{-1074}$ in float64); ``e`` is clamped to that range."""
    lo, hi = _exp_range(dtype)
    mant = 52 if dtype == torch.float64 else 23
    sub = torch.ones_like(e) << (e - (lo - mant)).clamp(0, mant - 1)  # 2^e for lo - mant <= e < lo
    if dtype == torch.float64:
        return torch.where(e >= lo, (e.clamp(lo, hi) + 1023) << 52, sub).view(torch.float64)
    return torch.where(e >= lo, (e.clamp(lo, hi) + 127) << 23, sub).to(torch.int32).view(torch.float32)


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
    r"""$e_b$ (B,) int64 with $\max|x_b|=f\,2^{e_b}$, $f\in[\tfrac12,1)$ ($0$ for an all-zero $x_b$)."""
    m = x.abs().flatten(1).amax(-1)
    return torch.frexp(m)[1].to(torch.int64)


def normalise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""$(\hat x, e)$ with $x=2^{e}\hat x$ exactly and $\max|\hat x_b|\in[\tfrac12,1)$ (a subnormal maximum:
    $\ge2^{-52}$); one exact multiplication."""
    lo, hi = _exp_range(x.dtype)
    mant = 52 if x.dtype == torch.float64 else 23
    e = max_exponent(x).clamp(-hi, mant - lo)  # 2^-e: a normal or subnormal power (exact); subnormal max: 2^-lo
    return x * _bview(pow2(-e, x.dtype), x), e


def fro_norm(x: torch.Tensor) -> torch.Tensor:
    r"""Scale-safe $\|x_b\|_F$ over all but the leading axis: $2^{e}\|2^{-e}x_b\|$ (finite for finite $x$ up
    to rounding at the very top of the range)."""
    xh, e = normalise(x)
    return ldexp(torch.linalg.vector_norm(xh.flatten(1), dim=-1), e)


def range_scaled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""$(\hat x, e)$, $x=2^{e}\hat x$: $x$ itself and $e=0$ when every data set's $\max|x|$ lies within
    $2^{\pm}$:data:`IN_RANGE_BITS` (no copy), else the exact power-of-two rescaling (one check at set-up)."""
    e = max_exponent(x)
    k = IN_RANGE_BITS.get(x.dtype, 16)
    if bool(((e.abs() <= k) | (x.flatten(1).abs().amax(-1) == 0)).all()):
        return x, torch.zeros_like(e)
    return ldexp(x, -e), e


def representable_limit(dtype: torch.dtype) -> float:
    """The bound every logit, score and parameter norm must stay below: a quarter of the largest float."""
    return float(torch.finfo(dtype).max) / 4.0


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


def _fmt_log(lg: float) -> str:
    """``exp(lg)`` printed like ``%.3g`` also beyond the float range (``inf`` when ``lg`` is)."""
    if not math.isfinite(lg):
        return "inf"
    e10 = lg / math.log(10.0)
    ex = math.floor(e10)
    mant = 10.0 ** (e10 - ex)
    if mant >= 9.995:
        mant, ex = 1.0, ex + 1
    return f"{mant:.3g}e{ex:+03d}"


def check_ranges(
    *,
    X: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    param: str,
    algo: str,
    lr: np.ndarray,
    steps: int,
    init: dict[str, np.ndarray],
    head: tuple | None,
    dtype: torch.dtype,
    batched: bool,
) -> None:
    r"""Refuse (:class:`~attsvm.errors.InputError`) a run whose scores, logits or parameters could leave the
    range of ``dtype`` (module docstring); ``algo`` ``"ngd"`` (norms grow by at most ``lr*steps``), ``"gd"`` /
    ``"md"`` (only the initial point), or ``"path"`` (``init`` holds the ball's norm bounds); flat-view arrays
    with a leading batch axis:
    ``X`` (B,N,T,d), ``Z`` (B,N,d), ``v`` (B,d), ``lr`` (B,), ``init`` the initial factors (B,...)."""
    lim = representable_limit(dtype)
    llim = math.log(lim)
    fmax = float(torch.finfo(dtype).max)
    B = X.shape[0]
    where = (lambda b: f" (data set {b})") if batched else (lambda b: "")  # noqa: E731
    for name, a in (("X", X), ("Z", Z), ("v", v)):
        big = np.max(np.abs(a.reshape(B, -1)), axis=-1) if a.size else np.zeros(B)
        if np.any(big > fmax):
            b = int(np.argmax(big > fmax))
            raise InputError(f"field {name!r}{where(b)}: entries up to {big[b]:.3g} exceed the {dtype} range")
    xn = np.max(frobenius_norm(X, axis=-1).reshape(B, -1), axis=-1)  # max_it |x_it|
    zn = np.max(frobenius_norm(Z, axis=-1).reshape(B, -1), axis=-1)  # max_i |z_i|
    vn = frobenius_norm(v, axis=-1)
    n0 = {k: frobenius_norm(a.reshape(B, -1), axis=-1) for k, a in init.items()}
    # log R per factor: log(||theta_0|| + lr*steps) for ngd, without forming lr*steps (it may overflow)
    lgrow = _log(lr) + math.log(steps) if (algo == "ngd" and steps > 0) else np.full(B, -np.inf)
    lR = {k: np.logaddexp(_log(n0[k]), lgrow) for k in n0}
    rule = {"ngd": "||theta_0|| + lr*steps", "path": "R"}.get(algo, "||theta_0||")
    knob = {"ngd": "lr", "path": "radii"}.get(algo, "init")
    fix = {"ngd": "lower lr or steps", "path": "lower the radii"}.get(algo, "rescale the initial point")

    def refuse(logb: np.ndarray, msg: str) -> None:
        bad = np.asarray(logb) > llim  # inf counts, -inf (a zero factor) and nan do not
        if np.any(bad):
            b = int(np.argmax(bad))
            val = _fmt_log(float(logb[b]))
            raise InputError(msg.format(w=where(b), val=val, lim=f"{lim:.3g}", dt=str(dtype).replace("torch.", "")))

    refuse(
        _log(xn) + _log(vn),
        "field 'X'{w}: the scores Y v^T x cannot be represented in {dt}: max|x_it|*|v| = {val} > {lim}; rescale X or v",
    )
    # (K, Q): the factor gradients G Q, G^T K (max|G| < 1) are sums of d terms up to max|Q|, max|K|
    wide = math.log(X.shape[-1]) if param == "KQ" else 0.0
    for k, lr_k in lR.items():
        refuse(
            lr_k + wide,
            f"{knob}{{w}}: the parameter {k!r} cannot be represented in {{dt}}: its norm can reach {rule} = {{val}} "
            f"> {{lim}}; {fix}",
        )
    if param in ("W", "KQ"):
        lw = lR["W"] if param == "W" else lR["K"] + lR["Q"]
        refuse(
            _log(zn) + lw,
            "fields 'X', 'Z'{w}: the logits x^T W z cannot be represented in {dt}: "
            f"max|z_i|*({rule}) = {{val}} > {{lim}}; {fix}, or rescale Z",
        )
        refuse(
            _log(xn) + _log(zn) + lw,
            "fields 'X', 'Z'{w}: the logits x^T W z cannot be represented in {dt}: "
            f"max|x_it|*max|z_i|*({rule}) = {{val}} > {{lim}}; {fix}, or rescale X or Z",
        )
    else:
        refuse(
            _log(xn) + lR["p"],
            "field 'X'{w}: the logits x^T p cannot be represented in {dt}: "
            f"max|x_it|*({rule}) = {{val}} > {{lim}}; {fix}, or rescale X",
        )
    if param == "vp":
        refuse(
            _log(xn) + lR["v"],
            "field 'X'{w}: the scores Y v^T x cannot be represented in {dt}: "
            f"max|x_it|*({rule.replace('theta', 'v')}) = {{val}} > {{lim}}; {fix}, or rescale X",
        )
    if head is not None:
        kind, par = head
        if kind == "relu":
            V = np.asarray(par.detach().cpu().numpy() if isinstance(par, torch.Tensor) else par, dtype=np.float64)
            Vn = frobenius_norm(V.reshape(V.shape[0], -1), axis=-1) * math.sqrt(V.shape[-1])
            refuse(
                _log(xn) + _log(Vn),
                "head V{w}: the ReLU head cannot be represented in {dt}: sqrt(d')*||V||*max|x_it| = {val} > {lim}",
            )
        else:
            lam = abs(float(par))
            refuse(
                2 * _log(xn),
                "field 'X'{w}: the quadratic head cannot be represented in {dt}: max|x_it|^2 = {val} > {lim}",
            )
            refuse(
                _log(xn) + np.logaddexp(_log(vn), math.log(2 * lam) + _log(xn) if lam > 0 else -np.inf),
                "field 'X'{w}: the quadratic head cannot be represented in {dt}: "
                "max|x_it|*(|v| + 2 lambda max|x_it|) = {val} > {lim}",
            )
