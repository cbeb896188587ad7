r"""Forward-mode automatic differentiation over arb balls: a :class:`Jet` carries an enclosure of a function *and* of
its gradient over a box of parameters, so that the same claim code, written with the ball kit, returns both.

A jet $x=(\,[f],\,[\nabla f]\,)$ stands for a function $f:B\to\mathbb R$ on a box $B\subset\mathbb R^p$: ``val`` is a
ball containing $f(\theta)$ and ``grad`` a vector of $p$ balls, the $j$-th containing $\partial_jf(\theta)$, for
every $\theta\in B$. The variables are $\theta_j$ itself: ``val`` the ball covering $[\ell_j,u_j]$, ``grad`` the
unit vector $e_j$ (:func:`variables`). Every operation applies the chain rule to the balls, and every formula below
is an identity at each point $\theta$, so evaluated on enclosures it encloses the result over $B$:

.. math::
    (x\pm y)'=x'\pm y',\qquad (xy)'=x'y+xy',\qquad (x/y)'=(x'-(x/y)\,y')/y,\qquad (x^n)'=n\,x^{n-1}x',

.. math::
    (e^x)'=e^xx',\quad (\log x)'=x'/x,\quad (\log(1+x))'=x'/(1+x),\quad (e^x-1)'=e^xx',\quad
    (\sqrt x)'=x'/(2\sqrt x),

with a constant $c$ (a ball, int, float64 or rational) having $c'=0$. A ball that meets the edge of a domain
($\log$ of a ball holding 0, $\sqrt{\cdot}$ or $1/\cdot$ at 0) gives arb's indeterminate ball (``nan``) in the
value or the gradient: it decides nothing, it is never a wrong enclosure.

Nonsmooth operations (:meth:`Jet.min`, :meth:`Jet.max`, ``abs``) keep the branch when the comparison of the value
balls is certain, and otherwise take the union of the branches' gradients (for ``abs``: of $\pm x'$): this
encloses Clarke's generalised gradient $\partial f\subseteq\mathrm{co}\{\nabla f_1,\nabla f_2\}$ (Clarke's chain
rule keeps it through the smooth operations), which is what the mean-value form needs (Lebourg's theorem).

**Mean-value form.** For $c\in B$ (default the centre $(\ell+u)/2$) and every $\theta\in B$,

.. math::
    f(\theta)\in f(c)+\textstyle\sum_j[\partial_jf](B)\,[\ell_j-c_j,\,u_j-c_j]\ \cap\ [f](B)

(:func:`mean_value`), whose lower end (:func:`lower_bound`) is a rigorous lower bound of $\min_Bf$: second order in
the box width where the naive $[f](B)$ is first order (the dependency problem).

Jets interoperate with the ball kit: :func:`attsvm.ball.numbers.to_arb` returns a jet unchanged, so a (d,d) object
array of jets passed as ``W`` to ``k.logits``, ``k.grad_W``, ``k.loss``, ... returns jets. Treat a jet as immutable
(the operations share ``grad`` arrays).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from flint import arb, fmpq, fmpz

__all__ = [
    "Jet",
    "is_jet",
    "variables",
    "point",
    "value",
    "gradient",
    "deviations",
    "mean_value",
    "lower_bound",
]

_EXACT = (arb, int, fmpq, fmpz, np.integer)


def _const(x: Any) -> arb | None:
    """``x`` as a constant ball (exact for ints, float64 and dyadic rationals), or None when it is not a number."""
    if isinstance(x, arb):
        return x
    if isinstance(x, (bool, np.bool_)):
        return arb(int(x))
    if isinstance(x, _EXACT):
        return arb(x if not isinstance(x, np.integer) else int(x))
    if isinstance(x, (float, np.floating)) and np.dtype(type(x)).itemsize <= 8:
        return arb(float(x))  # float64 values are binary numbers: exact
    return None


def _zeros(p: int) -> np.ndarray:
    out = np.empty(p, dtype=object)
    out[:] = [arb(0)] * p
    return out


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(len(a), dtype=object)
    out[:] = [x.union(y) for x, y in zip(a, b)]
    return out


def _ipow(x: arb, n: int) -> arb:
    r"""$x^n$ (n >= 0) by products (arb's ``**`` of a ball holding 0 is nan); $\ge0$ for even n."""
    out, base = arb(1), x
    while n:
        if n & 1:
            out = out * base
        n >>= 1
        if n:
            base = base * base
    return out


class Jet:
    r"""A ball ``val`` $\ni f(\theta)$ and a 1-d object array ``grad`` of balls $\ni\partial_jf(\theta)$, for every
    $\theta$ of a box (module docstring). Arithmetic with jets, balls, ints, float64 values and ``fmpq`` on either
    side; comparisons compare the value balls *certainly* (as arb does)."""

    __slots__ = ("val", "grad")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, val: arb, grad: np.ndarray):
        self.val = val
        self.grad = grad

    @property
    def p(self) -> int:
        """The number of variables."""
        return len(self.grad)

    def __repr__(self) -> str:
        g = ", ".join(x.str(10, radius=True) for x in self.grad)
        return f"Jet({self.val.str(10, radius=True)}, grad=[{g}])"

    def str(self, *args: Any, **kwargs: Any) -> str:
        """The value ball's ``arb.str`` (same arguments)."""
        return self.val.str(*args, **kwargs)

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other: Any) -> Jet:
        if isinstance(other, Jet):
            return Jet(self.val + other.val, self.grad + other.grad)
        c = _const(other)
        if c is None:
            return NotImplemented
        return Jet(self.val + c, self.grad)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Jet:
        if isinstance(other, Jet):
            return Jet(self.val - other.val, self.grad - other.grad)
        c = _const(other)
        if c is None:
            return NotImplemented
        return Jet(self.val - c, self.grad)

    def __rsub__(self, other: Any) -> Jet:
        c = _const(other)
        if c is None:
            return NotImplemented
        return Jet(c - self.val, -self.grad)

    def __neg__(self) -> Jet:
        return Jet(-self.val, -self.grad)

    def __pos__(self) -> Jet:
        return self

    def __mul__(self, other: Any) -> Jet:
        if isinstance(other, Jet):
            if other is self:  # x*x: the value is >= 0 (arb squares an aliased ball)
                return Jet((self.val * self.val).nonnegative_part(), self.grad * (2 * self.val))
            return Jet(self.val * other.val, self.grad * other.val + other.grad * self.val)
        c = _const(other)
        if c is None:
            return NotImplemented
        return Jet(self.val * c, self.grad * c)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Jet:
        if isinstance(other, Jet):
            q = self.val / other.val
            return Jet(q, (self.grad - other.grad * q) / other.val)
        c = _const(other)
        if c is None:
            return NotImplemented
        return Jet(self.val / c, self.grad / c)

    def __rtruediv__(self, other: Any) -> Jet:
        c = _const(other)
        if c is None:
            return NotImplemented
        q = c / self.val
        return Jet(q, self.grad * (-q / self.val))

    def __pow__(self, n: Any) -> Jet:
        r"""$x^n$ for an int $n\ge0$ (by products; even powers are $\ge0$)."""
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            return NotImplemented
        n = int(n)
        if n < 0:
            raise ValueError(f"Jet ** {n}: only non-negative integer exponents (write 1 / x**k)")
        if n == 0:
            return Jet(arb(1), _zeros(self.p))
        low = _ipow(self.val, n - 1)
        v = low * self.val
        if n % 2 == 0:
            v = v.nonnegative_part()
        return Jet(v, self.grad * (n * low))

    def __abs__(self) -> Jet:
        r"""$|x|$: $x$ or $-x$ when the sign is certain, else the value $|[x]|\cap[0,\infty)$ and the gradient
        $[x']\cup[-x']$ (Clarke, module docstring)."""
        if self.val >= 0:
            return self
        if self.val <= 0:
            return -self
        return Jet(abs(self.val).nonnegative_part(), _union(self.grad, -self.grad))

    def _extremum(self, other: Any, how: str) -> Any:
        o = other if isinstance(other, Jet) else _const(other)
        if o is None:
            raise TypeError(f"Jet.{how} of a {type(other).__name__}")
        ov = o.val if isinstance(o, Jet) else o
        first = self.val <= ov if how == "min" else self.val >= ov
        second = ov <= self.val if how == "min" else ov >= self.val
        if first:
            return self
        if second:
            return o
        og = o.grad if isinstance(o, Jet) else _zeros(self.p)
        return Jet(getattr(self.val, how)(ov), _union(self.grad, og))

    def min(self, other: Any) -> Any:
        r"""$\min(x,y)$: the branch below when certain, else arb's ``min`` of the values and the union of the
        gradients (module docstring)."""
        return self._extremum(other, "min")

    def max(self, other: Any) -> Any:
        r"""$\max(x,y)$ (see :meth:`min`)."""
        return self._extremum(other, "max")

    def nonnegative_part(self) -> Jet:
        r"""The value ball cut to $[0,\infty)$, the gradient unchanged: for a function known to be $\ge0$ on the
        box (a sum of squares), as arb's ``nonnegative_part`` — not $\max(0,f)$."""
        return Jet(self.val.nonnegative_part(), self.grad)

    # ------------------------------------------------------------------ elementary functions
    def exp(self) -> Jet:
        r"""$e^x$, $(e^x)'=e^xx'$."""
        e = self.val.exp()
        return Jet(e, self.grad * e)

    def log(self) -> Jet:
        r"""$\log x$, $(\log x)'=x'/x$ (nan where the ball meets $x\le0$)."""
        return Jet(self.val.log(), self.grad / self.val)

    def log1p(self) -> Jet:
        r"""$\log(1+x)$, derivative $x'/(1+x)$."""
        return Jet(self.val.log1p(), self.grad / (1 + self.val))

    def expm1(self) -> Jet:
        r"""$e^x-1$, derivative $e^xx'$."""
        return Jet(self.val.expm1(), self.grad * self.val.exp())

    def sqrt(self) -> Jet:
        r"""$\sqrt x$, derivative $x'/(2\sqrt x)$ (nan where the ball meets $x\le0$)."""
        s = self.val.sqrt()
        return Jet(s, self.grad / (2 * s))

    # ------------------------------------------------------------------ the value ball
    def mid(self) -> arb:
        """The value's midpoint (an exact ball)."""
        return self.val.mid()

    def rad(self) -> arb:
        """The value's radius (an exact ball)."""
        return self.val.rad()

    def lower(self) -> arb:
        """An exact lower bound of the value ball."""
        return self.val.lower()

    def upper(self) -> arb:
        """An exact upper bound of the value ball."""
        return self.val.upper()

    def is_finite(self) -> bool:
        """Whether the *value* ball is finite (the gradient may still be nan: see :func:`gradient`)."""
        return self.val.is_finite()

    def is_zero(self) -> bool:
        """Whether the value ball is exactly 0."""
        return self.val.is_zero()

    def is_exact(self) -> bool:
        """Whether the value ball has radius 0."""
        return self.val.is_exact()

    def is_nan(self) -> bool:
        """Whether the *value* ball is nan."""
        return self.val.is_nan()

    def contains(self, x: Any) -> bool:
        """Whether the value ball contains ``x``."""
        return self.val.contains(x.val if isinstance(x, Jet) else x)

    # ------------------------------------------------------------------ certain comparisons of the values
    def _other(self, other: Any) -> arb | None:
        return other.val if isinstance(other, Jet) else _const(other)

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


def is_jet(x: Any) -> bool:
    """Whether ``x`` is a :class:`Jet`."""
    return isinstance(x, Jet)


def _balls(x: Any) -> list:
    from .numbers import to_arb

    return [to_arb(v) for v in np.asarray(x, dtype=object).ravel()]


def variables(lo: Any, hi: Any) -> np.ndarray:
    r"""The jets of the box $\prod_j[\ell_j,u_j]$: ``val`` the ball covering $[\ell_j,u_j]$ (exactly: float64 and
    dyadic rationals are exact, other rationals enclosed), ``grad`` $e_j$. ``lo``/``hi`` of any shape (float64,
    ints, ``Fraction``, ``"p/q"``, ``fmpq``, balls); the result has that shape, variable $j$ the $j$-th entry in
    row-major order ($p$ = the size)."""
    shape = np.shape(lo)
    if np.shape(hi) != shape:
        raise ValueError(f"lo and hi differ in shape: {shape} vs {np.shape(hi)}")
    L, H = _balls(lo), _balls(hi)
    p = len(L)
    out = np.empty(p, dtype=object)
    for j, (a, b) in enumerate(zip(L, H)):
        if a > b:
            raise ValueError(f"variables: lo[{j}] = {a} > hi[{j}] = {b}")
        e = _zeros(p)
        e[j] = arb(1)
        out[j] = Jet(a.union(b), e)
    return out.reshape(shape)


def point(c: Any) -> np.ndarray:
    """Plain balls at the point ``c`` (any shape; exact for float64 and dyadic rationals): the margin there."""
    balls = _balls(c)
    out = np.empty(len(balls), dtype=object)
    out[:] = balls
    return out.reshape(np.shape(c))


def value(x: Any) -> Any:
    """The value ball of a jet (a plain ball as it is; an array elementwise)."""
    if isinstance(x, np.ndarray):
        out = np.empty(x.shape, dtype=object)
        for idx, v in np.ndenumerate(x):
            out[idx] = value(v)
        return out
    if isinstance(x, Jet):
        return x.val
    c = _const(x)
    if c is None:
        raise TypeError(f"value: not a number, a ball or a jet: {type(x).__name__}")
    return c


def gradient(x: Any, p: int | None = None) -> np.ndarray:
    r"""The gradient balls of a jet ((p,) object array); a plain ball or number has gradient 0 (``p`` needed then).
    An array gives shape (\*x.shape, p)."""
    if isinstance(x, np.ndarray):
        flat = list(x.ravel())
        if p is None:
            p = next((v.p for v in flat if isinstance(v, Jet)), None)
        if p is None:
            raise ValueError("gradient of an array without jets: give p")
        out = np.empty((len(flat), p), dtype=object)
        for k, v in enumerate(flat):
            out[k, :] = gradient(v, p)
        return out.reshape(*x.shape, p)
    if isinstance(x, Jet):
        if p is not None and p != x.p:
            raise ValueError(f"gradient: the jet has {x.p} variables, not {p}")
        return x.grad
    if _const(x) is None:
        raise TypeError(f"gradient: not a number, a ball or a jet: {type(x).__name__}")
    if p is None:
        raise ValueError("the gradient of a plain ball is 0: give p, the number of variables")
    return _zeros(p)


def deviations(lo: Sequence, hi: Sequence, centre: Sequence | None = None) -> list[arb]:
    r"""Balls containing $[\ell_j-c_j,\,u_j-c_j]$ ($c$ default the centre $(\ell+u)/2$, exact for dyadic ends)."""
    L, H = _balls(lo), _balls(hi)
    C = [(a + b) / 2 for a, b in zip(L, H)] if centre is None else _balls(centre)
    if not len(L) == len(H) == len(C):
        raise ValueError("lo, hi and centre differ in length")
    return [(a - c).union(b - c) for a, b, c in zip(L, H, C)]


def mean_value(m_centre: Any, m_box: Any, lo: Sequence, hi: Sequence, centre: Sequence | None = None) -> arb:
    r"""$[m](c)+\sum_j[\partial_jm](B)\,[\ell_j-c_j,u_j-c_j]$ intersected with the naive $[m](B)$ (module
    docstring): ``m_centre`` the margin at $c$ (a ball, or a jet: its value), ``m_box`` the jet of the margin on the
    box $B=[\ell,u]$ (from :func:`variables`; a plain ball: a constant), ``centre`` $c\in B$ (default the centre).
    Either enclosure alone when the other is not finite; ValueError when they are disjoint (they cannot both
    enclose the same function: ``m_centre`` is not the margin at ``centre``)."""
    mc, naive = value(m_centre), value(m_box)
    dev = deviations(lo, hi, centre)
    g = gradient(m_box, len(dev))
    mv = sum((gj * dj for gj, dj in zip(g, dev)), mc)
    if not mv.is_finite():
        return naive
    if not naive.is_finite():
        return mv
    try:
        return mv.intersection(naive)
    except ValueError:
        raise ValueError(
            f"mean_value: the centred form {mv} and the box value {naive} are disjoint: m_centre is not the "
            "margin at the centre of this box"
        ) from None


def lower_bound(m_centre: Any, m_box: Any, lo: Sequence, hi: Sequence, centre: Sequence | None = None) -> arb:
    r"""An exact ball $\underline m\le m(\theta)$ for every $\theta$ in the box: the lower end of
    :func:`mean_value` ($-\infty$ when neither enclosure is finite)."""
    enc = mean_value(m_centre, m_box, lo, hi, centre)
    if not enc.is_finite():
        return arb.neg_inf()
    return enc.lower()
