r"""Numbers of the ball kit: exact conversion to python-flint ``arb`` balls, the working precision, elementwise
functions and the log-sum-exp.

A ball $[m\pm r]$ stands for every real number in $[m-r,m+r]$; every operation of arb returns a ball that
contains every result of the operation on members of its input balls (the *enclosure* property). Inputs are taken
*exactly*: a float64 value is a binary number with a 53-bit mantissa (``arb(float)`` is exact), an int is exact,
an ``mpmath.mpf`` is $(-1)^s\,m\,2^e$ with its mantissa and exponent (exact), a rational ``"p/q"`` / ``Fraction``
with a power-of-two denominator is exact, any other rational becomes the ball of radius $\le2^{-\mathrm{prec}}|p/q|$
around it.

A :class:`~attsvm.ball.jet.Jet` (a ball with the enclosure of its gradient over a box, :mod:`.jet`) passes
:func:`to_arb` unchanged and has the methods used here (``mid``, ``exp``, ``log1p``, ...), so :func:`elementwise`,
:func:`lse`, :func:`logsumexp`, :func:`extremum`, :mod:`.model` and :mod:`.linalg`'s norms and inner products
differentiate jet arguments (:func:`mid_mpf` / :func:`mid_float` give a jet's midpoint, without gradient). Other
number types with that interface join through :func:`register_ball_type` (:data:`BALL_TYPES`; the interval numbers
of :mod:`attsvm.prove.interval`, which re-run the kit's formulas in an independent arithmetic): they pass
:func:`to_arb` unchanged, count as balls (:func:`is_ball`) and, like jets, are refused by the decompositions
(:func:`has_jets`); an ``arb`` constant meeting one of them must give that type (arb declines: their reflected
operations convert the ball).

Arithmetic on ``arb`` runs at the global precision ``flint.ctx.prec`` (bits): :func:`workprec` sets it for a block
and restores it. Comparisons of balls are *certain*: ``a < b`` is True only when every member of ``a`` is below
every member of ``b``; ``a < b`` and ``a >= b`` are both False when the balls overlap (undecided).

.. math::
    \mathrm{LSE}(a)=\log\textstyle\sum_te^{a_t}=a_{t^*}+\log\bigl(1+\sum_{t\ne t^*}e^{a_t-a_{t^*}}\bigr)

for any index $t^*$ (an exact identity; $t^*$ is the largest *midpoint*, so no undecided comparison is needed, and
$\log(1+\cdot)$ keeps the relative precision of a saturated row).
"""

from __future__ import annotations

from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
from flint import arb, ctx, fmpq, fmpz

from .jet import Jet

#: the ball kit's default working precision (bits)
PREC = 256

__all__ = [
    "PREC",
    "ELEMENTWISE",
    "BALL_TYPES",
    "register_ball_type",
    "workprec",
    "is_ball",
    "has_jets",
    "to_arb",
    "arbs",
    "vec",
    "mid_mpf",
    "mid_float",
    "elementwise",
    "extremum",
    "lse",
    "logsumexp",
]

#: elementwise functions of the kit (arb methods of the same name)
ELEMENTWISE = ("exp", "log", "log1p", "expm1", "sqrt")


#: number types besides ``arb`` that the kit takes as balls (they pass :func:`to_arb` unchanged): jets, and the types
#: given to :func:`register_ball_type`
BALL_TYPES: tuple[type, ...] = (Jet,)


def register_ball_type(cls: type) -> None:
    """Let the ball kit take ``cls`` as it takes a :class:`~attsvm.ball.jet.Jet` (module docstring): a number type
    with the methods the kit calls on balls (``+ - * /`` with balls and numbers on either side, ``exp log log1p
    expm1 sqrt``, ``mid rad lower upper``, ``is_finite is_nan``, ``min max``, certain comparisons)."""
    global BALL_TYPES
    if cls not in BALL_TYPES:
        BALL_TYPES = (*BALL_TYPES, cls)


@contextmanager
def workprec(prec: int):
    """``with workprec(bits):`` — ``flint.ctx.prec`` set to ``bits`` for the block, restored after."""
    old = ctx.prec
    ctx.prec = int(prec)
    try:
        yield
    finally:
        ctx.prec = old


def is_ball(x: Any) -> bool:
    """Whether ``x`` is a value of the ball kit: a python-flint ``arb``, a :class:`~attsvm.ball.jet.Jet` (a ball
    with its gradient) or a registered type (:data:`BALL_TYPES`)."""
    return isinstance(x, (arb, *BALL_TYPES))


def has_jets(a: Any) -> bool:
    """Whether ``a`` (a number or an array) is or holds a :class:`~attsvm.ball.jet.Jet` or another registered type
    (:data:`BALL_TYPES`: numbers arb's matrix code cannot take)."""
    if isinstance(a, BALL_TYPES):
        return True
    if isinstance(a, (list, tuple)):
        a = np.asarray(a, dtype=object)
    return isinstance(a, np.ndarray) and a.dtype == object and any(isinstance(x, BALL_TYPES) for x in a.ravel())


def _rational(f: Fraction) -> arb:
    den = f.denominator
    if den & (den - 1) == 0:  # a power of two: the dyadic number p * 2^-k, exact
        return arb((f.numerator, -(den.bit_length() - 1)))
    return arb(fmpq(f.numerator, den))  # the ball around p/q at the working precision


def to_arb(x: Any) -> Any:
    """``x`` as a ball, exactly when ``x`` is a binary number (module docstring); an ``arb``, a
    :class:`~attsvm.ball.jet.Jet` or a registered type (:data:`BALL_TYPES`) stays as it is (so the kit's helpers
    differentiate jet arguments)."""
    if isinstance(x, (arb, *BALL_TYPES)):
        return x
    if isinstance(x, (bool, np.bool_)):
        return arb(int(x))
    if isinstance(x, (int, np.integer)):
        return arb(int(x))
    if isinstance(x, fmpz):
        return arb(x)
    if isinstance(x, np.floating) and x.dtype.itemsize > 8:  # extended precision: its exact binary fraction
        return _rational(Fraction(*x.as_integer_ratio()))
    if isinstance(x, (float, np.floating)):
        return arb(float(x))  # float64 (float32, float16 widened exactly): exact
    if isinstance(x, mpmath.mpf):
        if mpmath.isnan(x):
            return arb.nan()
        if mpmath.isinf(x):
            return arb.pos_inf() if x > 0 else arb.neg_inf()
        sign, man, exp, _ = x._mpf_
        return arb((-int(man) if sign else int(man), int(exp)))
    if isinstance(x, fmpq):
        return _rational(Fraction(int(x.p), int(x.q)))
    if isinstance(x, (str, Fraction)):
        return _rational(Fraction(x))
    raise TypeError(f"cannot take a {type(x).__name__} ({x!r}) as a ball")


def arbs(a: Any) -> np.ndarray:
    """``a`` (any shape; numbers, arrays, nested lists) as a numpy ``object`` array of balls (:func:`to_arb`)."""
    arr = np.asarray(a, dtype=object)
    if arr.ndim == 0:
        return np.array(to_arb(arr.item()), dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for idx, x in np.ndenumerate(arr):
        out[idx] = to_arb(x)
    return out


def vec(xs: Any) -> np.ndarray:
    """A 1-d ``object`` array of the balls ``xs`` (as they are)."""
    xs = list(xs)
    out = np.empty(len(xs), dtype=object)
    out[:] = xs
    return out


def mid_mpf(x: arb) -> mpmath.mpf:
    """The midpoint of a finite ball as an ``mpf`` (exact: mpmath numbers carry any mantissa)."""
    m = x.mid()
    if not m.is_finite():
        raise ValueError(f"ball {x} has no finite midpoint")
    man, exp = m.man_exp()
    return mpmath.mpf((int(man), int(exp)))


def mid_float(x: arb) -> float:
    r"""The midpoint as a float that keeps the sign of a negative number below the float64 range ($-5\cdot10^{-324}$,
    not $-0.0$) and clips $\pm\infty$ to the largest finite float (the rule of ``highprec.signed_float``)."""
    if x.is_nan():
        return float("nan")
    m = x.mid()
    f = float(m)
    if f == 0.0:
        return -5e-324 if m < 0 else 0.0
    return float(np.clip(f, -np.finfo(np.float64).max, np.finfo(np.float64).max))


def elementwise(name: str, a: Any, prec: int) -> Any:
    """The arb function ``name`` (one of :data:`ELEMENTWISE`) of every entry of ``a`` at ``prec`` bits (a ball for a
    number, an object array for an array). A ball that meets the edge of the domain (``log`` of a ball holding 0)
    gives arb's indeterminate ball (``nan``), which decides no comparison."""
    if name not in ELEMENTWISE:
        raise ValueError(f"unknown elementwise function {name!r}")
    with workprec(prec):
        arr = arbs(a)
        if arr.ndim == 0:
            return getattr(arr.item(), name)()
        out = np.empty(arr.shape, dtype=object)
        for idx, x in np.ndenumerate(arr):
            out[idx] = getattr(x, name)()
        return out


def extremum(how: str, x: Any, y: Any) -> Any:
    r"""$\min(x,y)$ (``how="min"``) or $\max(x,y)$ of two balls or jets, enclosed (arb's / the jet's ``min`` /
    ``max``; symmetric, so a plain ball meets a jet (a registered type) through the jet's method; numbers taken as
    :func:`to_arb`)."""
    if how not in ("min", "max"):
        raise ValueError(f"extremum: how must be 'min' or 'max', got {how!r}")
    if isinstance(y, BALL_TYPES) and not isinstance(x, BALL_TYPES):
        x, y = y, x
    return getattr(to_arb(x), how)(to_arb(y))


def lse(row: list) -> arb:
    r"""$\log\sum_te^{a_t}$ of a list of balls (module docstring; $-\infty$ for an empty row); at the ambient
    precision."""
    if not row:
        return arb.neg_inf()
    k = _top(row)
    top = row[k]
    if not top.is_finite():
        return top  # +inf dominates; -inf at the top: every entry is -inf
    rest = sum(((row[j] - top).exp() for j in range(len(row)) if j != k), arb(0))
    return top + rest.log1p()


def _top(row: list) -> int:
    """The index of the largest midpoint (the first one on ties; -inf only when every entry is)."""
    best, k = None, 0
    for j, x in enumerate(row):
        m = x.mid()
        if best is None or m > best:
            best, k = m, j
    return k


def logsumexp(a: Any, axis: int, prec: int) -> Any:
    """:func:`lse` along ``axis`` of an array (balls taken exactly), at ``prec`` bits."""
    with workprec(prec):
        arr = np.moveaxis(arbs(a), axis, -1)
        rows = arr.reshape(-1, arr.shape[-1])
        out = np.empty(len(rows), dtype=object)
        for j, r in enumerate(rows):
            out[j] = lse(list(r))
        out = out.reshape(arr.shape[:-1])
        return out.item() if out.ndim == 0 else out
