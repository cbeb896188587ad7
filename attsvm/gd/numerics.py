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
  is checked before it starts; likewise ``nsd`` (steps of Frobenius norm $\le c\,\eta_k$, $c$ the norm's
  :func:`~attsvm.gd.steepest.fro_bound`, e.g. $\sqrt N$ for ``linf``), ``adam`` (entries $\le A\,\eta_k$,
  :func:`adam_entry_bound`) and ``nmd`` (the dual moves by $\eta_k$ in $\ell_{q^*}$), with $\sum_k\eta_k$ of the
  step schedule (:func:`step_bound`, :func:`check_ranges`); ``gd`` / ``md`` have no a-priori bound, so only the
  initial point is checked (an overflow later is the stop reason ``non-finite``);
* nonlinear heads: ReLU $|u|,|\hat\gamma|\le\sqrt{d'}\,\|V\|_F\|x\|$; next-token squared $|u|\le1$,
  $|\hat\gamma|\le2\max|x|\max|e_k|\,|x|$; quadratic $\|m\|^2\le\max\|x\|^2$,
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
    "STEP_BOUNDED",
    "adam_entry_bound",
    "check_ranges",
    "fro_norm",
    "ldexp",
    "lp_norm",
    "max_exponent",
    "normalise",
    "pow2",
    "pow2_bits",
    "range_scaled",
    "representable_limit",
    "step_bound",
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


#: the algorithms whose steps are bounded a priori (:func:`step_bound`), so a whole run is checked up front
STEP_BOUNDED = ("ngd", "nsd", "adam", "nmd")


def adam_entry_bound(betas: tuple[float, float], steps: int) -> float:
    r"""$A=\max_{1\le t\le\text{steps}}A_t$ with $|\hat m_t|/\sqrt{\hat v_t}\le A_t$ entrywise for Adam
    ($0\le\beta_1<\sqrt{\beta_2}<1$, any gradients): by Cauchy–Schwarz, with $\rho=\beta_1^2/\beta_2<1$,

    .. math:: A_t=\frac{1-\beta_1}{1-\beta_1^t}\sqrt{\frac{1-\beta_2^t}{1-\beta_2}}
              \sqrt{\frac{1-\rho^t}{1-\rho}}\qquad(A_1=1),

    evaluated exactly for $t\le T_0=\min(\text{steps},10^5)$ and bounded beyond by
    $(1-\beta_1)/((1-\beta_1^{T_0})\sqrt{(1-\beta_2)(1-\rho)})$. So every Adam step (any $\epsilon\ge0$) has
    entries at most $A\,\eta_k$, and Frobenius norm at most $\sqrt N A\,\eta_k$ ($A=6.76$ for the default
    betas within 2000 steps, 7.27 in the limit)."""
    b1, b2 = float(betas[0]), float(betas[1])
    rho = b1 * b1 / b2
    T0 = max(1, min(int(steps), 100_000))
    t = np.arange(1, T0 + 1, dtype=np.float64)
    with np.errstate(divide="ignore"):
        l1, l2, lr_ = np.log(b1), np.log(b2), np.log(rho)
    A = (
        (1.0 - b1)
        / -np.expm1(t * l1)
        * np.sqrt(-np.expm1(t * l2) / (1.0 - b2))
        * np.sqrt(-np.expm1(t * lr_) / (1.0 - rho))
    )
    best = float(np.max(A))
    if steps > T0:
        best = max(best, (1.0 - b1) / (-math.expm1(T0 * float(l1)) * math.sqrt((1.0 - b2) * (1.0 - rho))))
    return best


def step_bound(
    algo: str,
    shape: tuple[int, ...],
    *,
    norm: str | None = None,
    q: float | None = None,
    adam_betas: tuple[float, float] = (0.9, 0.999),
    steps: int = 0,
) -> float | None:
    r"""$c$ with $\|\theta_{k+1}-\theta_k\|_F\le c\,\eta_k$ for one factor of ``shape`` (no batch axis), or ``None``
    (no a-priori bound: ``gd``, ``md``, ``path``): ``ngd`` 1 (also ``"joint"``: each factor's share is at most 1);
    ``nsd`` :func:`~attsvm.gd.steepest.fro_bound` of its norm; ``adam`` $\sqrt N\,$:func:`adam_entry_bound`;
    ``nmd`` 1 (its dual moves by $\eta_k$ in $\ell_{q^*}$; :func:`check_ranges` maps that to the primal)."""
    if algo in ("ngd", "nmd"):
        return 1.0
    if algo == "nsd":
        from .steepest import fro_bound

        assert norm is not None
        return fro_bound(norm, shape, q)
    if algo == "adam":
        return math.sqrt(math.prod(shape)) * adam_entry_bound(adam_betas, steps)
    return None


def _lq_norms(a: np.ndarray, q: float) -> np.ndarray:
    """Entrywise l_q norm of each row of ``a`` (B, N), scale-safe (max-scaled)."""
    m = np.max(np.abs(a), axis=-1) if a.size else np.zeros(a.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs(a) / np.where(m > 0, m, 1.0)[:, None]
    return m * np.sum(r**q, axis=-1) ** (1.0 / q)


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
    schedule: str = "constant",
    norm: str | None = None,
    q: float | None = None,
    adam_betas: tuple[float, float] = (0.9, 0.999),
) -> None:
    r"""Refuse (:class:`~attsvm.errors.InputError`) a run whose scores, logits or parameters could leave the
    range of ``dtype`` (module docstring); ``algo`` one of the engine's algorithms, or ``"path"`` (``init`` holds
    the ball's norm bounds); flat-view arrays with a leading batch axis:
    ``X`` (B,N,T,d), ``Z`` (B,N,d), ``v`` (B,d), ``lr`` (B,), ``init`` the initial factors (B,...).

    The a-priori parameter bound is $R=\|\theta_0\|_F+c\sum_{k<\text{steps}}\eta_k$ per factor for the algorithms
    with bounded steps, $\|\theta_{k+1}-\theta_k\|_F\le c\,\eta_k$ (:func:`step_bound`), where
    $\sum_k\eta_k=\eta\cdot$``steps`` (``schedule="constant"``) or $\le\eta_0(2\sqrt{\text{steps}}-1)$
    (``"rsqrt"``); for ``nmd`` the dual moves by $\eta_k$ in $\ell_{q^*}$, so $\|D_k\|_{q^*}\le
    \|\theta_0\|_q^{q-1}+\sum_k\eta_k$ and $\|\theta_k\|_F\le N^{\max(0,1/2-1/q)}\|D_k\|_{q^*}^{1/(q-1)}$
    ($\|\theta\|_q=\|D\|_{q^*}^{1/(q-1)}$, Hölder); ``gd`` / ``md``: $R=\|\theta_0\|_F$."""
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
    # log R per factor: log(||theta_0|| + c sum_k lr_k), without forming lr*steps (it may overflow)
    if schedule == "rsqrt":
        lsum, total = (math.log(2.0 * math.sqrt(steps) - 1.0) if steps > 0 else -math.inf), "lr*(2*sqrt(steps)-1)"
    else:
        lsum, total = (math.log(steps) if steps > 0 else -math.inf), "lr*steps"
    lR, rules = {}, {}
    for k, a in init.items():
        shape = tuple(a.shape[1:])
        c = step_bound(algo, shape, norm=norm, q=q, adam_betas=adam_betas, steps=steps)
        if algo == "nmd":
            assert q is not None
            lq0 = (q - 1.0) * _log(_lq_norms(a.reshape(B, -1), q))  # log ||D_0||_{q*} = (q-1) log ||theta_0||_q
            lD = np.logaddexp(lq0, _log(lr) + lsum)
            cq = float(np.prod(shape)) ** max(0.0, 0.5 - 1.0 / q)
            lR[k] = math.log(cq) + lD / (q - 1.0)
            rules[k] = f"{cq:.4g}*(||theta_0||_q^(q-1) + {total})^(1/(q-1))"
            # the dual itself: ||D||_F <= N^max(0, 1/2 - 1/q*) ||D||_{q*}
            cd = float(np.prod(shape)) ** max(0.0, 0.5 - (q - 1.0) / q)
            refuse_dual = (k, math.log(cd) + lD, f"{cd:.4g}*(||theta_0||_q^(q-1) + {total})")
            continue
        lgrow = _log(lr) + lsum + math.log(c) if c is not None else np.full(B, -np.inf)
        lR[k] = np.logaddexp(_log(n0[k]), lgrow)
        if algo == "path":
            rules[k] = "R"
        elif c is None:
            rules[k] = "||theta_0||"
        else:
            rules[k] = f"||theta_0|| + {total}" if c == 1.0 else f"||theta_0|| + {c:.4g}*{total}"
    rule = next(iter(rules.values()))
    bounded = algo in STEP_BOUNDED
    knob = "lr" if bounded else {"path": "radii"}.get(algo, "init")
    fix = "lower lr or steps" if bounded else {"path": "lower the radii"}.get(algo, "rescale the initial point")

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
            f"{knob}{{w}}: the parameter {k!r} cannot be represented in {{dt}}: its norm can reach {rules[k]} = "
            f"{{val}} > {{lim}}; {fix}",
        )
    if algo == "nmd":
        k, ld, drule = refuse_dual
        refuse(
            ld,
            f"{knob}{{w}}: the mirror-descent dual of {k!r} cannot be represented in {{dt}}: its norm can reach "
            f"{drule} = {{val}} > {{lim}}; {fix}",
        )
    if param in ("W", "KQ", "diag"):
        lw = lR["W"] if param == "W" else lR["K"] + lR["Q"] if param == "KQ" else lR["k"] + lR["q"]
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
        elif kind == "ntp-square":  # |h| <= 1, |ghat_t| <= 2 max|x_it| max_k |e_k|: the vocabulary E bounds it
            E = par[0].detach().cpu().numpy()
            En = np.max(frobenius_norm(E, axis=-1).reshape(B, -1), axis=-1)
            refuse(
                math.log(2.0) + 2 * _log(xn) + _log(En),
                "field 'E'{w}: the squared next-token head cannot be represented in {dt}: "
                "2 max|x_it| max|e_k| ||x|| = {val} > {lim}",
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
