r"""Boxes of parameter space, in exact rational arithmetic.

A box is $B=[\ell,u]=\{\theta\in\mathbb R^p:\ell_j\le\theta_j\le u_j\}$, its endpoints exact rationals
(:class:`~fractions.Fraction`; a float64 value is the binary number it stores, so ``Fraction(x)`` is exact). The
helpers here compute, *exactly*, the quantities a region needs to decide whether a box misses it or lies inside it:

.. math::
    \min_{\theta\in B}\|\theta-c\|^2=\sum_j\min_{\theta_j\in[\ell_j,u_j]}(\theta_j-c_j)^2,\qquad
    \max_{\theta\in B}\|\theta-c\|^2=\sum_j\max\bigl((\ell_j-c_j)^2,(u_j-c_j)^2\bigr),

.. math::
    \max_{\theta\in B}\langle\theta,w\rangle=\sum_j\max(w_j\ell_j,\,w_ju_j),\qquad
    \min_{\theta\in B}\langle\theta,w\rangle=\sum_j\min(w_j\ell_j,\,w_ju_j)

(each a separable sum of one-dimensional extremes), and the exact halving :func:`split` of branch and bound: at
the midpoint $m=(\ell_j+u_j)/2$ of coordinate $j$ the two halves $[\ell,u]\cap\{\theta_j\le m\}$ and
$[\ell,u]\cap\{\theta_j\ge m\}$ tile the box (their union is the box, their intersection the face
$\theta_j=m$). Starting from dyadic endpoints (float64 values), every midpoint is dyadic again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import InputError

__all__ = [
    "Rational",
    "to_fraction",
    "fraction_text",
    "show",
    "as_box",
    "vector",
    "split",
    "centre",
    "dist_sq_range",
    "dot_range",
    "corners",
    "float_down",
    "float_up",
    "fractions_of",
]

#: what the helpers accept as an exact number
Rational = Fraction | int | float | str | np.floating | np.integer


def _from_text(s: str) -> Fraction:
    t = s.strip()
    if not t:
        raise InputError("an empty string is not a number")
    low = t.lower()
    if "0x" in low:  # float.hex text: the binary number it spells
        try:
            f = float.fromhex(t)
        except (ValueError, OverflowError):
            raise InputError(f"{s!r} is not a number (float.hex text that does not parse)") from None
        return to_fraction(f)
    if low.lstrip("+-") in ("nan", "inf", "infinity"):
        raise InputError(f"{s!r} is not a finite number")
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        raise InputError(f"{s!r} is not a number (give an integer, a decimal, p/q or float.hex text)") from None


def to_fraction(x: Any) -> Fraction:
    r"""The exact rational value of ``x``: a float64 (or narrower) float is the binary number it stores, an int is
    itself, a ``Fraction`` stays, text is ``"p/q"``, an integer, a decimal (``"0.1"`` is $1/10$) or ``float.hex``
    text; an exact ``arb`` ball (radius 0) or an ``mpmath.mpf`` is its binary value. NaN, infinities, bools and
    anything else are an :class:`~attsvm.errors.InputError`."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (bool, np.bool_)):
        raise InputError(f"{x!r} is a bool, not a number")
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, (float, np.floating)):
        if isinstance(x, np.floating) and x.dtype.itemsize > 8:
            raise InputError(f"{x!r}: extended-precision floats are not accepted (give float64 or p/q text)")
        f = float(x)
        if not math.isfinite(f):
            raise InputError(f"{f!r} is not a finite number")
        return Fraction(f)
    if isinstance(x, str):
        return _from_text(x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return to_fraction(x.item())
    man_exp = _binary_parts(x)
    if man_exp is not None:
        man, exp = man_exp
        return Fraction(man) * Fraction(2) ** exp
    raise InputError(f"cannot take a {type(x).__name__} ({x!r}) as an exact number")


def _binary_parts(x: Any) -> tuple[int, int] | None:
    """(mantissa, exponent) of an exact arb ball or an mpmath mpf; None for other types."""
    kind = type(x).__module__.split(".")[0]
    if kind == "flint" and hasattr(x, "mid") and hasattr(x, "rad"):
        if not x.is_finite() or not x.is_exact():
            raise InputError(f"the ball {x} is not one exact number")
        man, exp = x.mid().man_exp()
        return int(man), int(exp)
    if kind == "mpmath" and hasattr(x, "man_exp"):
        man, exp = x.man_exp
        if man is None or exp is None:
            raise InputError(f"{x} is not a finite number")
        return int(man), int(exp)
    return None


def fraction_text(q: Fraction) -> str:
    """An exact rational as text that :func:`to_fraction` reads back to the same value: ``"p"`` or ``"p/q"``."""
    q = to_fraction(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def show(q: Fraction) -> str:
    """A short exact spelling of ``q`` for messages: an integer, the float64 ``repr`` when ``q`` is a float64 value,
    else ``p/q``."""
    q = to_fraction(q)
    if q.denominator == 1:
        return str(q.numerator)
    f = float(q)
    if math.isfinite(f) and Fraction(f) == q:
        return repr(f)
    return f"{q.numerator}/{q.denominator}"


def vector(x: Any, what: str = "vector") -> tuple[Fraction, ...]:
    """The entries of ``x`` (any shape, flattened row-major) as exact rationals; InputError naming ``what``."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiu" and x.dtype != np.bool_:
        flat = x.ravel()
    else:
        flat = np.asarray(x, dtype=object).ravel()
    try:
        return tuple(to_fraction(v) for v in flat)
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None


def as_box(lo: Any, hi: Any, p: int | None = None) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    r"""``(lo, hi)`` as exact tuples, checked: the same length (``p`` when given) and $\ell_j\le u_j$ for every
    $j$. A tuple of ``Fraction`` passes through without copying its entries."""
    if isinstance(lo, tuple) and isinstance(hi, tuple) and all(type(v) is Fraction for v in (*lo, *hi)):
        L, H = lo, hi
    else:
        L, H = vector(lo, "box lower corner"), vector(hi, "box upper corner")
    if len(L) != len(H):
        raise InputError(f"box corners of different lengths ({len(L)} and {len(H)})")
    if p is not None and len(L) != p:
        raise InputError(f"a box of {len(L)} coordinates for a region of p = {p} parameters")
    for j, (a, b) in enumerate(zip(L, H)):
        if a > b:
            raise InputError(f"box coordinate {j}: lower end {show(a)} above upper end {show(b)}")
    return L, H


def split(lo: Any, hi: Any, j: int) -> tuple[tuple[tuple[Fraction, ...], tuple[Fraction, ...]], ...]:
    r"""The two halves of $[\ell,u]$ at coordinate ``j``'s exact midpoint $m=(\ell_j+u_j)/2$:
    ``((lo, hi'), (lo', hi))`` with $u'_j=\ell'_j=m$ and every other coordinate unchanged. They tile the box."""
    L, H = as_box(lo, hi)
    if not 0 <= int(j) < len(L):
        raise InputError(f"split coordinate {j} outside 0..{len(L) - 1}")
    j = int(j)
    m = (L[j] + H[j]) / 2
    return (L, H[:j] + (m,) + H[j + 1 :]), (L[:j] + (m,) + L[j + 1 :], H)


def centre(lo: Sequence[Fraction], hi: Sequence[Fraction]) -> tuple[Fraction, ...]:
    r"""The exact centre $(\ell+u)/2$ of a box."""
    return tuple((a + b) / 2 for a, b in zip(lo, hi))


def dist_sq_range(
    lo: Sequence[Fraction], hi: Sequence[Fraction], c: Sequence[Fraction] | None = None
) -> tuple[Fraction, Fraction]:
    r"""Exact $\bigl(\min_{\theta\in B}\|\theta-c\|^2,\ \max_{\theta\in B}\|\theta-c\|^2\bigr)$ (module docstring;
    $c=0$ when ``c`` is None)."""
    lo_sum = Fraction(0)
    hi_sum = Fraction(0)
    for j, (a, b) in enumerate(zip(lo, hi)):
        cj = 0 if c is None else c[j]
        da, db = a - cj, b - cj
        sa, sb = da * da, db * db
        hi_sum += sa if sa > sb else sb
        if da > 0:
            lo_sum += sa
        elif db < 0:
            lo_sum += sb
    return lo_sum, hi_sum


def dot_range(lo: Sequence[Fraction], hi: Sequence[Fraction], w: Sequence[Fraction]) -> tuple[Fraction, Fraction]:
    r"""Exact $\bigl(\min_{\theta\in B}\langle\theta,w\rangle,\ \max_{\theta\in B}\langle\theta,w\rangle\bigr)$."""
    mn = Fraction(0)
    mx = Fraction(0)
    for a, b, wj in zip(lo, hi, w):
        if wj >= 0:
            mn += wj * a
            mx += wj * b
        else:
            mn += wj * b
            mx += wj * a
    return mn, mx


def corners(lo: Sequence[Fraction], hi: Sequence[Fraction]) -> Iterator[tuple[Fraction, ...]]:
    """The $2^p$ corners of the box (a degenerate coordinate gives each corner twice)."""
    for bits in range(1 << len(lo)):
        yield tuple(hi[j] if bits >> j & 1 else lo[j] for j in range(len(lo)))


def float_down(q: Fraction) -> float:
    """The largest float64 $\\le q$ (``-inf`` below the float range)."""
    try:
        f = float(q)
    except OverflowError:
        f = math.copysign(math.inf, q)
    if math.isinf(f):
        return -math.inf if f < 0 else float(np.finfo(np.float64).max)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_up(q: Fraction) -> float:
    """The smallest float64 $\\ge q$ (``inf`` above the float range)."""
    return -float_down(-q)


def fractions_of(values: Iterable[Any]) -> tuple[Fraction, ...]:
    """Exact rationals of an iterable of numbers (:func:`to_fraction` of each)."""
    return tuple(to_fraction(v) for v in values)
