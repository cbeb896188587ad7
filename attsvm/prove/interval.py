r"""Interval numbers on mpmath's ``iv`` context, and forward-mode differentiation over them: the re-check of a proof
certificate (:mod:`attsvm.prove.verify`) evaluates the claim's margin with these, so that it shares nothing with the
prover's enclosures (python-flint ``arb`` balls and :mod:`attsvm.ball.jet`) but the kit's formulas.

**Intervals.** An :class:`Iv` is a closed interval $[a,b]$ of extended reals with binary endpoints, an
``mpmath.iv.mpf``. mpmath rounds every endpoint outward at ``iv.prec`` bits (:func:`ivprec`), so each operation
returns an interval that contains the result of the operation on every member of its inputs:

.. math::
    [a,b]+[c,d]=[\nabla(a+c),\Delta(b+d)],\qquad [a,b]\cdot[c,d]=[\nabla\min P,\Delta\max P],\quad
    P=\{ac,ad,bc,bd\},

.. math::
    f([a,b])=[\nabla f(a),\Delta f(b)]\quad(f=\exp,\log,\sqrt{\cdot}:\ \text{increasing}),

$\nabla$/$\Delta$ rounding down/up. Here $\log(1+x)=\log([\nabla(1+a),\Delta(1+b)])$ and $e^x-1=[\nabla(\nabla
e^a-1),\Delta(\Delta e^b-1)]$, written from ``iv.log`` and ``iv.exp`` (mpmath's ``iv.log1p`` / ``iv.expm1`` are its
generic code, with shortcuts such as $x-x^2/2$ that are no enclosure): rigorous, with the absolute error
$2^{-\mathrm{prec}}$ near 0. Where a function leaves its domain ($\log$ or $\sqrt{\cdot}$ of an interval meeting $x\le0$
resp. $x<0$, $\log(1+x)$ at $x\le-1$, a quotient by an interval holding 0) the result is the whole line
$[-\infty,\infty]$, which decides nothing (arb's ``nan``). Numbers enter *exactly*: ints, float64 values, dyadic
rationals and ``arb`` balls (by their endpoints, :meth:`arb.lower` / :meth:`arb.upper`, exact binary numbers) are
exact; another rational $p/q$ becomes $[\nabla(p/q),\Delta(p/q)]$. Comparisons are *certain*: ``x < y`` iff
$b_x<a_y$; ``x == y`` iff both are the same point; ``x != y`` iff they are disjoint.

**Jets.** An :class:`IvJet` $x=([f],[\nabla f])$ on a box $B$ holds an interval containing $f(\theta)$ and $p$
intervals containing $\partial_jf(\theta)$ for every $\theta\in B$; the variables are $(\,[\ell_j,u_j],\,e_j)$
(:func:`iv_variables`). Every operation applies the chain rule, an identity at each point, to the intervals:

.. math::
    (x\pm y)'=x'\pm y',\quad (xy)'=x'y+xy',\quad (x/y)'=(x'-(x/y)y')/y,\quad (c/x)'=-(c/x)\,x'/x,\quad
    (x^n)'=nx^{n-1}x',

.. math::
    (e^x)'=e^xx',\quad (\log x)'=x'/x,\quad (\log(1+x))'=x'/(1+x),\quad (e^x-1)'=e^xx',\quad
    (\sqrt x)'=x'/(2\sqrt x),

a constant having derivative 0. ``min`` / ``max`` / ``abs`` keep a branch whose comparison is certain and else take
the hull of the branches' gradients (Clarke's generalised gradient, as the mean-value form needs).

**Mean-value form.** With $c$ the centre $(\ell+u)/2$ (exact rationals) and $\delta_j=[\ell_j-c_j,u_j-c_j]$,

.. math::
    m(\theta)\in[m](c)+\textstyle\sum_j[\partial_jm](B)\,\delta_j\ \cap\ [m](B)\qquad(\theta\in B)

(:func:`iv_mean_value`), whose lower end (:func:`iv_lower_bound`) bounds $\min_Bm$ from below.

The ball kit takes these numbers as it takes jets (:func:`attsvm.ball.numbers.register_ball_type`): its helpers run
their formulas on them, mixing in ``arb`` constants of the data (an ``arb`` meeting an :class:`Iv` gives an
:class:`Iv`: arb declines the operation and the interval converts the ball exactly).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
from flint import arb, fmpq, fmpz
from mpmath import iv, libmp

from ..ball.numbers import register_ball_type

__all__ = [
    "Iv",
    "IvJet",
    "ivprec",
    "to_iv",
    "is_iv",
    "iv_variables",
    "iv_point",
    "iv_value",
    "iv_gradient",
    "iv_deviations",
    "iv_mean_value",
    "iv_lower_bound",
]

_ZERO, _ONE, _INF, _NINF = libmp.fzero, libmp.fone, libmp.finf, libmp.fninf


@contextmanager
def ivprec(bits: int) -> Iterator[None]:
    """``with ivprec(bits):`` — ``mpmath.iv.prec`` set to ``bits`` for the block, restored after."""
    old = iv.prec
    iv.prec = int(bits)
    try:
        yield
    finally:
        iv.prec = old


def _make(a: tuple, b: tuple) -> Iv:
    """The interval with the raw mpmath endpoints ``a`` <= ``b`` (exactly)."""
    return Iv(iv.make_mpf((a, b)))


def _whole() -> Iv:
    return _make(_NINF, _INF)


def _dyadic(man: int, exp: int) -> tuple:
    return libmp.from_man_exp(int(man), int(exp))  # no precision given: exact


def _rational(f: Fraction) -> Iv:
    p, q = f.numerator, f.denominator
    if q & (q - 1) == 0:  # p * 2^-k: exact
        x = _dyadic(p, -(q.bit_length() - 1))
        return _make(x, x)
    prec = iv.prec
    return _make(
        libmp.from_rational(p, q, prec, libmp.round_floor), libmp.from_rational(p, q, prec, libmp.round_ceiling)
    )


def _arb_end(e: arb) -> tuple:
    """An exact endpoint ball of arb (``lower()`` / ``upper()``) as a raw mpmath number."""
    if e.is_finite():
        man, exp = e.man_exp()
        return _dyadic(int(man), int(exp))
    return _INF if float(e) > 0 else _NINF


def _from_arb(x: arb) -> Iv:
    r"""The ball $[m\pm r]$ as the interval of its exact endpoints (arb rounds them outward)."""
    if x.is_nan():
        return _whole()
    return _make(_arb_end(x.lower()), _arb_end(x.upper()))


def _const(x: Any) -> Iv | None:
    """``x`` as an interval (module docstring), or None when it is not a number an interval takes."""
    if isinstance(x, Iv):
        return x
    if isinstance(x, arb):
        return _from_arb(x)
    if isinstance(x, (bool, np.bool_)):
        return _rational(Fraction(int(x)))
    if isinstance(x, (int, np.integer, fmpz)):
        return _rational(Fraction(int(x)))
    if isinstance(x, (float, np.floating)) and np.dtype(type(x)).itemsize <= 8:
        f = float(x)
        if f != f:
            return _whole()
        if f in (float("inf"), float("-inf")):
            e = _INF if f > 0 else _NINF
            return _make(e, e)
        return _rational(Fraction(f))  # float64 values are binary numbers: exact
    if isinstance(x, fmpq):
        return _rational(Fraction(int(x.p), int(x.q)))
    if isinstance(x, (Fraction, str)):
        return _rational(Fraction(x))
    if isinstance(x, mpmath.mpf):
        if mpmath.isnan(x):
            return _whole()
        e = x._mpf_
        return _make(e, e)
    return None


def to_iv(x: Any) -> Iv:
    """``x`` as an :class:`Iv` (exact for ints, float64 values, dyadic rationals, ``mpf`` and ``arb`` balls; other
    rationals rounded outward at ``iv.prec``); an :class:`Iv` as it is."""
    c = _const(x)
    if c is None:
        raise TypeError(f"cannot take a {type(x).__name__} ({x!r}) as an interval")
    return c


def _lt(a: tuple, b: tuple) -> bool:
    return bool(libmp.mpf_lt(a, b))


def _le(a: tuple, b: tuple) -> bool:
    return bool(libmp.mpf_le(a, b))


def _min(a: tuple, b: tuple) -> tuple:
    return a if _le(a, b) else b


def _max(a: tuple, b: tuple) -> tuple:
    return b if _le(a, b) else a


def _exact_of(x: tuple) -> Fraction | None:
    """The exact rational of a raw finite mpmath number (None for an infinity or nan)."""
    if x in (_INF, _NINF) or x == libmp.fnan:
        return None
    sign, man, exp, _ = x
    q = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -q if sign else q


def iv_endpoints(x: Any) -> tuple[Fraction | float, Fraction | float]:
    """The endpoints of an interval (:class:`Iv`) as exact rationals (``-inf``/``inf`` where unbounded)."""
    v = x if isinstance(x, Iv) else Iv(x)
    a, b = _exact_of(v.a), _exact_of(v.b)
    return (float("-inf") if a is None else a), (float("inf") if b is None else b)


class Iv:
    r"""A closed interval $[a,b]$ (an ``mpmath.iv.mpf`` in ``v``), outward rounded at ``iv.prec`` (module docstring).
    Arithmetic with intervals, ``arb`` balls, ints, float64 values, ``Fraction`` and ``fmpq`` on either side;
    certain comparisons."""

    __slots__ = ("v",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, v: Any):
        self.v = v if isinstance(v, iv.mpf) else to_iv(v).v

    # ------------------------------------------------------------------ endpoints
    @property
    def a(self) -> tuple:
        """The lower endpoint (a raw mpmath number)."""
        return self.v._mpi_[0]

    @property
    def b(self) -> tuple:
        """The upper endpoint (a raw mpmath number)."""
        return self.v._mpi_[1]

    def __repr__(self) -> str:
        return f"Iv({self.str(20)})"

    def str(self, n: int = 10, *args: Any, **kwargs: Any) -> str:
        """``[a, b]`` with ``n`` significant digits (display only; the other arguments of ``arb.str`` ignored)."""
        return f"[{libmp.to_str(self.a, n)}, {libmp.to_str(self.b, n)}]"

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other: Any) -> Iv:
        o = _const(other)
        return NotImplemented if o is None else Iv(self.v + o.v)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Iv:
        o = _const(other)
        return NotImplemented if o is None else Iv(self.v - o.v)

    def __rsub__(self, other: Any) -> Iv:
        o = _const(other)
        return NotImplemented if o is None else Iv(o.v - self.v)

    def __neg__(self) -> Iv:
        return Iv(-self.v)

    def __pos__(self) -> Iv:
        return self

    def __mul__(self, other: Any) -> Iv:
        if other is self:
            return self**2
        o = _const(other)
        return NotImplemented if o is None else Iv(self.v * o.v)

    __rmul__ = __mul__

    @staticmethod
    def _div(x: Iv, y: Iv) -> Iv:
        if _le(y.a, _ZERO) and _le(_ZERO, y.b):  # the quotient is undefined somewhere: decide nothing
            return _whole()
        return Iv(x.v / y.v)

    def __truediv__(self, other: Any) -> Iv:
        o = _const(other)
        return NotImplemented if o is None else Iv._div(self, o)

    def __rtruediv__(self, other: Any) -> Iv:
        o = _const(other)
        return NotImplemented if o is None else Iv._div(o, self)

    def __pow__(self, n: Any) -> Iv:
        r"""$x^n$ for an int $n\ge0$ (an even power is $\ge0$)."""
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            return NotImplemented
        if n < 0:
            raise ValueError(f"Iv ** {n}: only non-negative integer exponents (write 1 / x**k)")
        return Iv(self.v ** int(n)) if n else _make(_ONE, _ONE)

    def __abs__(self) -> Iv:
        return Iv(abs(self.v))

    def __float__(self) -> float:
        """The midpoint, rounded to the nearest float."""
        return libmp.to_float(self.mid().a)

    # ------------------------------------------------------------------ elementary functions
    def exp(self) -> Iv:
        r"""$e^x$."""
        return Iv(iv.exp(self.v))

    def log(self) -> Iv:
        r"""$\log x$ (the whole line where the interval meets $x\le0$)."""
        return Iv(iv.log(self.v)) if _lt(_ZERO, self.a) else _whole()

    def log1p(self) -> Iv:
        r"""$\log(1+x)$ (the whole line where the interval meets $x\le-1$)."""
        return (1 + self).log()

    def expm1(self) -> Iv:
        r"""$e^x-1$."""
        return self.exp() - 1

    def sqrt(self) -> Iv:
        r"""$\sqrt x$ (the whole line where the interval meets $x<0$)."""
        return Iv(iv.sqrt(self.v)) if _le(_ZERO, self.a) else _whole()

    def min(self, other: Any) -> Iv:
        r"""$\min(x,y)$: $[\min(a,c),\min(b,d)]$."""
        o = to_iv(other)
        return _make(_min(self.a, o.a), _min(self.b, o.b))

    def max(self, other: Any) -> Iv:
        r"""$\max(x,y)$: $[\max(a,c),\max(b,d)]$."""
        o = to_iv(other)
        return _make(_max(self.a, o.a), _max(self.b, o.b))

    def union(self, other: Any) -> Iv:
        """The hull of two intervals."""
        o = to_iv(other)
        return _make(_min(self.a, o.a), _max(self.b, o.b))

    def intersection(self, other: Any) -> Iv:
        """The common part (ValueError when the intervals are disjoint)."""
        o = to_iv(other)
        lo, hi = _max(self.a, o.a), _min(self.b, o.b)
        if _lt(hi, lo):
            raise ValueError(f"the intervals {self.str()} and {o.str()} are disjoint")
        return _make(lo, hi)

    def nonnegative_part(self) -> Iv:
        r"""The interval cut to $[0,\infty)$: $[\max(a,0),\max(b,0)]$ (for a quantity known to be $\ge0$)."""
        return _make(_max(self.a, _ZERO), _max(self.b, _ZERO))

    # ------------------------------------------------------------------ as a number
    def mid(self) -> Iv:
        r"""The exact midpoint $(a+b)/2$ as a point interval ($0$ for the whole line, $\pm\infty$ for a half-line)."""
        a, b = self.a, self.b
        fin_a, fin_b = a not in (_INF, _NINF), b not in (_INF, _NINF)
        if fin_a and fin_b:
            m = libmp.mpf_shift(libmp.mpf_add(a, b, 0), -1)  # precision 0: exact
        elif not fin_a and not fin_b:
            m = a if a == b else _ZERO
        else:
            m = b if fin_a else a
        return _make(m, m)

    def rad(self) -> Iv:
        r"""The exact half-width $(b-a)/2$ as a point interval ($+\infty$ when unbounded)."""
        if not self.is_finite():
            return _make(_INF, _INF)
        r = libmp.mpf_shift(libmp.mpf_sub(self.b, self.a, 0), -1)
        return _make(r, r)

    def lower(self) -> Iv:
        """The lower endpoint as a point interval."""
        return _make(self.a, self.a)

    def upper(self) -> Iv:
        """The upper endpoint as a point interval."""
        return _make(self.b, self.b)

    def man_exp(self) -> tuple[int, int]:
        r"""$(m,e)$ with $m2^e$ the interval's value, for a finite point."""
        if not (self.is_exact() and self.is_finite()):
            raise ValueError(f"man_exp of {self.str()}: not a finite point")
        sign, man, exp, _ = self.a
        return (-int(man) if sign else int(man)), int(exp)

    def is_finite(self) -> bool:
        """Whether both endpoints are finite."""
        return self.a not in (_INF, _NINF) and self.b not in (_INF, _NINF)

    def is_nan(self) -> bool:
        """False: an interval has no nan state (an undefined result is the whole line)."""
        return False

    def is_exact(self) -> bool:
        """Whether the interval is a point."""
        return self.a == self.b

    def is_zero(self) -> bool:
        """Whether the interval is the point 0."""
        return self.a == _ZERO and self.b == _ZERO

    def contains(self, x: Any) -> bool:
        """Whether every member of ``x`` lies in the interval."""
        o = to_iv(x.val if isinstance(x, IvJet) else x)
        return _le(self.a, o.a) and _le(o.b, self.b)

    def overlaps(self, x: Any) -> bool:
        """Whether the intervals meet."""
        o = to_iv(x)
        return _le(self.a, o.b) and _le(o.a, self.b)

    # ------------------------------------------------------------------ certain comparisons
    def __lt__(self, other: Any) -> bool:
        o = _const(other)
        return NotImplemented if o is None else _lt(self.b, o.a)

    def __le__(self, other: Any) -> bool:
        o = _const(other)
        return NotImplemented if o is None else _le(self.b, o.a)

    def __gt__(self, other: Any) -> bool:
        o = _const(other)
        return NotImplemented if o is None else _lt(o.b, self.a)

    def __ge__(self, other: Any) -> bool:
        o = _const(other)
        return NotImplemented if o is None else _le(o.b, self.a)

    def __eq__(self, other: Any) -> bool:  # type: ignore[override]
        o = _const(other)
        if o is None:
            return NotImplemented
        return self.is_exact() and o.is_exact() and self.a == o.a and self.is_finite()

    def __ne__(self, other: Any) -> bool:  # type: ignore[override]
        o = _const(other)
        return NotImplemented if o is None else (_lt(self.b, o.a) or _lt(o.b, self.a))


def is_iv(x: Any) -> bool:
    """Whether ``x`` is an :class:`Iv` or an :class:`IvJet`."""
    return isinstance(x, (Iv, IvJet))


def _zeros(p: int) -> tuple:
    z = _make(_ZERO, _ZERO)
    return (z,) * p


def _hull(g: tuple, h: tuple) -> tuple:
    return tuple(x.union(y) for x, y in zip(g, h))


class IvJet:
    r"""An interval ``val`` $\ni f(\theta)$ and a tuple ``grad`` of intervals $\ni\partial_jf(\theta)$ for every
    $\theta$ of a box (module docstring); the same operations as :class:`Iv`, comparisons on the values."""

    __slots__ = ("val", "grad")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, val: Iv, grad: Sequence[Iv]):
        self.val = val
        self.grad = tuple(grad)

    @property
    def p(self) -> int:
        """The number of variables."""
        return len(self.grad)

    def __repr__(self) -> str:
        return f"IvJet({self.val.str(10)}, grad=[{', '.join(g.str(10) for g in self.grad)}])"

    def str(self, *args: Any, **kwargs: Any) -> str:
        """The value's :meth:`Iv.str`."""
        return self.val.str(*args, **kwargs)

    def _scale(self, c: Iv) -> tuple:
        return tuple(g * c for g in self.grad)

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other: Any) -> IvJet:
        if isinstance(other, IvJet):
            return IvJet(self.val + other.val, tuple(g + h for g, h in zip(self.grad, other.grad)))
        c = _const(other)
        return NotImplemented if c is None else IvJet(self.val + c, self.grad)

    __radd__ = __add__

    def __sub__(self, other: Any) -> IvJet:
        if isinstance(other, IvJet):
            return IvJet(self.val - other.val, tuple(g - h for g, h in zip(self.grad, other.grad)))
        c = _const(other)
        return NotImplemented if c is None else IvJet(self.val - c, self.grad)

    def __rsub__(self, other: Any) -> IvJet:
        c = _const(other)
        return NotImplemented if c is None else IvJet(c - self.val, tuple(-g for g in self.grad))

    def __neg__(self) -> IvJet:
        return IvJet(-self.val, tuple(-g for g in self.grad))

    def __pos__(self) -> IvJet:
        return self

    def __mul__(self, other: Any) -> IvJet:
        if other is self:  # x*x: the value is >= 0
            return IvJet(self.val**2, self._scale(2 * self.val))
        if isinstance(other, IvJet):
            return IvJet(
                self.val * other.val, tuple(g * other.val + h * self.val for g, h in zip(self.grad, other.grad))
            )
        c = _const(other)
        return NotImplemented if c is None else IvJet(self.val * c, self._scale(c))

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> IvJet:
        if isinstance(other, IvJet):
            q = self.val / other.val
            return IvJet(q, tuple((g - h * q) / other.val for g, h in zip(self.grad, other.grad)))
        c = _const(other)
        return NotImplemented if c is None else IvJet(self.val / c, tuple(g / c for g in self.grad))

    def __rtruediv__(self, other: Any) -> IvJet:
        c = _const(other)
        if c is None:
            return NotImplemented
        q = c / self.val
        return IvJet(q, self._scale(-q / self.val))

    def __pow__(self, n: Any) -> IvJet:
        r"""$x^n$ for an int $n\ge0$, derivative $nx^{n-1}x'$."""
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            return NotImplemented
        n = int(n)
        if n < 0:
            raise ValueError(f"IvJet ** {n}: only non-negative integer exponents (write 1 / x**k)")
        if n == 0:
            return IvJet(_make(_ONE, _ONE), _zeros(self.p))
        return IvJet(self.val**n, self._scale(n * self.val ** (n - 1)))

    def __abs__(self) -> IvJet:
        r"""$|x|$: $\pm x$ when the sign is certain, else $|[x]|$ with the gradient hull of $\pm x'$."""
        if self.val >= 0:
            return self
        if self.val <= 0:
            return -self
        return IvJet(abs(self.val), _hull(self.grad, tuple(-g for g in self.grad)))

    def _extremum(self, other: Any, how: str) -> Any:
        o = other if isinstance(other, IvJet) else _const(other)
        if o is None:
            raise TypeError(f"IvJet.{how} of a {type(other).__name__}")
        ov = o.val if isinstance(o, IvJet) else o
        if (self.val <= ov) if how == "min" else (self.val >= ov):
            return self
        if (ov <= self.val) if how == "min" else (ov >= self.val):
            return o
        og = o.grad if isinstance(o, IvJet) else _zeros(self.p)
        return IvJet(getattr(self.val, how)(ov), _hull(self.grad, og))

    def min(self, other: Any) -> Any:
        r"""$\min(x,y)$: the certainly lower branch, else the interval min with the gradient hull."""
        return self._extremum(other, "min")

    def max(self, other: Any) -> Any:
        r"""$\max(x,y)$ (see :meth:`min`)."""
        return self._extremum(other, "max")

    def nonnegative_part(self) -> IvJet:
        r"""The value cut to $[0,\infty)$, the gradient unchanged (a function known to be $\ge0$)."""
        return IvJet(self.val.nonnegative_part(), self.grad)

    # ------------------------------------------------------------------ elementary functions
    def exp(self) -> IvJet:
        r"""$e^x$, $(e^x)'=e^xx'$."""
        e = self.val.exp()
        return IvJet(e, self._scale(e))

    def log(self) -> IvJet:
        r"""$\log x$, $(\log x)'=x'/x$."""
        return IvJet(self.val.log(), tuple(g / self.val for g in self.grad))

    def log1p(self) -> IvJet:
        r"""$\log(1+x)$, derivative $x'/(1+x)$."""
        s = 1 + self.val
        return IvJet(self.val.log1p(), tuple(g / s for g in self.grad))

    def expm1(self) -> IvJet:
        r"""$e^x-1$, derivative $e^xx'$."""
        return IvJet(self.val.expm1(), self._scale(self.val.exp()))

    def sqrt(self) -> IvJet:
        r"""$\sqrt x$, derivative $x'/(2\sqrt x)$."""
        s = self.val.sqrt()
        t = 2 * s
        return IvJet(s, tuple(g / t for g in self.grad))

    # ------------------------------------------------------------------ the value
    def mid(self) -> Iv:
        """The value's midpoint (a point interval)."""
        return self.val.mid()

    def rad(self) -> Iv:
        """The value's half-width (a point interval)."""
        return self.val.rad()

    def lower(self) -> Iv:
        """The value's lower endpoint."""
        return self.val.lower()

    def upper(self) -> Iv:
        """The value's upper endpoint."""
        return self.val.upper()

    def __float__(self) -> float:
        return float(self.val)

    def is_finite(self) -> bool:
        """Whether the *value* is finite."""
        return self.val.is_finite()

    def is_nan(self) -> bool:
        """False (see :meth:`Iv.is_nan`)."""
        return False

    def is_exact(self) -> bool:
        return self.val.is_exact()

    def is_zero(self) -> bool:
        return self.val.is_zero()

    def contains(self, x: Any) -> bool:
        """Whether the value contains ``x``."""
        return self.val.contains(x)

    # ------------------------------------------------------------------ certain comparisons of the values
    def _other(self, other: Any) -> Iv | None:
        return other.val if isinstance(other, IvJet) else _const(other)

    def __lt__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.val < o

    def __le__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.val <= o

    def __gt__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.val > o

    def __ge__(self, other: Any) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self.val >= o

    def __eq__(self, other: Any) -> bool:  # type: ignore[override]
        o = self._other(other)
        return NotImplemented if o is None else self.val == o

    def __ne__(self, other: Any) -> bool:  # type: ignore[override]
        o = self._other(other)
        return NotImplemented if o is None else self.val != o


register_ball_type(Iv)
register_ball_type(IvJet)


# ---------------------------------------------------------------------------------------------- boxes
def _flat(x: Any) -> list:
    return list(np.asarray(x, dtype=object).ravel())


def iv_variables(lo: Any, hi: Any) -> np.ndarray:
    r"""The jets of the box $\prod_j[\ell_j,u_j]$: value $[\ell_j,u_j]$ (ends rounded outward when not binary),
    gradient $e_j$. ``lo``/``hi`` of any shape (ints, float64, ``Fraction``, ``"p/q"``, ``fmpq``); the result has
    that shape, variable $j$ the $j$-th entry in row-major order."""
    shape = np.shape(lo)
    if np.shape(hi) != shape:
        raise ValueError(f"lo and hi differ in shape: {shape} vs {np.shape(hi)}")
    L, H = [to_iv(x) for x in _flat(lo)], [to_iv(x) for x in _flat(hi)]
    p = len(L)
    out = np.empty(p, dtype=object)
    for j, (a, b) in enumerate(zip(L, H)):
        if a > b:
            raise ValueError(f"iv_variables: lo[{j}] = {a.str()} > hi[{j}] = {b.str()}")
        e = list(_zeros(p))
        e[j] = _make(_ONE, _ONE)
        out[j] = IvJet(_make(a.a, b.b), e)
    return out.reshape(shape)


def iv_point(c: Any) -> np.ndarray:
    """Plain intervals at the point ``c`` (any shape; exact for binary numbers, else rounded outward)."""
    vals = [to_iv(x) for x in _flat(c)]
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out.reshape(np.shape(c))


def iv_value(x: Any) -> Any:
    """The value interval of an :class:`IvJet` (a number as :func:`to_iv`; an array elementwise)."""
    if isinstance(x, np.ndarray):
        out = np.empty(x.shape, dtype=object)
        for idx, v in np.ndenumerate(x):
            out[idx] = iv_value(v)
        return out
    return x.val if isinstance(x, IvJet) else to_iv(x)


def iv_gradient(x: Any, p: int | None = None) -> np.ndarray:
    """The gradient intervals of an :class:`IvJet` ((p,) object array); a number has gradient 0 (give ``p``)."""
    if isinstance(x, IvJet):
        if p is not None and p != x.p:
            raise ValueError(f"iv_gradient: the jet has {x.p} variables, not {p}")
        g = x.grad
    else:
        to_iv(x)
        if p is None:
            raise ValueError("the gradient of a plain number is 0: give p, the number of variables")
        g = _zeros(p)
    out = np.empty(len(g), dtype=object)
    out[:] = list(g)
    return out


def _fraction(x: Any) -> Fraction:
    if isinstance(x, fmpq):
        return Fraction(int(x.p), int(x.q))
    if isinstance(x, (np.integer, np.floating)):
        return Fraction(x.item())
    return Fraction(x)


def iv_deviations(lo: Sequence, hi: Sequence, centre: Sequence | None = None) -> list[Iv]:
    r"""$\delta_j=[\ell_j-c_j,\,u_j-c_j]$ ($c$ default the centre $(\ell+u)/2$): the differences exact in rationals,
    then rounded outward. ``lo``/``hi``/``centre``: exact rationals (ints, float64, ``Fraction``, ``"p/q"``,
    ``fmpq``)."""
    L, H = [_fraction(x) for x in _flat(lo)], [_fraction(x) for x in _flat(hi)]
    C = [(a + b) / 2 for a, b in zip(L, H)] if centre is None else [_fraction(x) for x in _flat(centre)]
    if not len(L) == len(H) == len(C):
        raise ValueError("lo, hi and centre differ in length")
    return [_rational(a - c).union(_rational(b - c)) for a, b, c in zip(L, H, C)]


def iv_mean_value(m_centre: Any, m_box: Any, lo: Sequence, hi: Sequence, centre: Sequence | None = None) -> Iv:
    r"""$[m](c)+\sum_j[\partial_jm](B)\,\delta_j\ \cap\ [m](B)$ (module docstring): ``m_centre`` the margin at $c$
    (an interval, or a jet: its value), ``m_box`` its :class:`IvJet` on $B=[\ell,u]$ (a number: a constant).
    Either part alone when the other is unbounded; ValueError when they are disjoint (then ``m_centre`` is not the
    margin at $c$, or an enclosure is wrong)."""
    mc, naive = iv_value(m_centre), iv_value(m_box)
    dev = iv_deviations(lo, hi, centre)
    g = iv_gradient(m_box, len(dev))
    mv = mc
    for gj, dj in zip(g, dev):
        mv = mv + gj * dj
    if not mv.is_finite():
        return naive
    if not naive.is_finite():
        return mv
    try:
        return mv.intersection(naive)
    except ValueError:
        raise ValueError(
            f"the centred form {mv.str(8)} and the box value {naive.str(8)} are disjoint: one of them is wrong"
        ) from None


def iv_lower_bound(m_centre: Any, m_box: Any, lo: Sequence, hi: Sequence, centre: Sequence | None = None) -> Iv:
    r"""A point interval $\underline m\le m(\theta)$ for every $\theta$ of the box: the lower end of
    :func:`iv_mean_value` ($-\infty$ when it is unbounded below)."""
    return iv_mean_value(m_centre, m_box, lo, hi, centre).lower()
