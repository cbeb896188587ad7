r"""Regions of parameter space: the sets a region statement quantifies over (THEORY "Region statements").

A region $\mathcal R\subset\mathbb R^p$ lives in the space of one parameter flattened row-major ($W$ is $d\times d$,
$p=d^2$; $(K,Q)$ and the prompt $p$ work the same way): a region knows ``p`` and, for drawing and messages, a
``shape`` (default ``(p,)``). Every region and every number in it is taken **exactly**: a float64 value is the
binary number it stores, and ``"p/q"`` text or a :class:`~fractions.Fraction` is that rational
(:func:`attsvm.prove.boxes.to_fraction`). The kinds, with $\|\cdot\|$ the Euclidean (for a matrix: Frobenius) norm:

* :class:`Box` $\{\theta:\ell_j\le\theta_j\le u_j\ \forall j\}$;
* :class:`Ball` $\{\theta:\|\theta-c\|\le r\}$ ($c=0$ by default, $r>0$);
* :class:`Annulus` $\{\theta:r_0\le\|\theta\|\le r_1\}$ ($0\le r_0<r_1$);
* :class:`Cone` $\mathcal C_{\mu,R}(W^\circ)\cap\{\|\theta\|\le R_1\}$ with
  $\mathcal C_{\mu,R}(W^\circ)=\{\theta:\|\theta\|\ge R,\ \mathrm{corr}(\theta,W^\circ)\ge1-\mu\}$,
  $\mathrm{corr}(a,b)=\langle a,b\rangle/(\|a\|\|b\|)$, $0<\mu\le1$, $0\le R<R_1$, $W^\circ\ne0$. It is taken in the
  multiplied form $\langle\theta,W^\circ\rangle\ge(1-\mu)\|\theta\|\|W^\circ\|$, so for $R=0$ the apex $\theta=0$
  belongs (the closure). With $c=1-\mu\in[0,1)$ the set $K=\{\theta:\langle\theta,W^\circ\rangle\ge
  c\|\theta\|\|W^\circ\|\}$ is a convex cone (half-angle $\varphi=\arccos c$). A cone is *framed* by default: the
  prover works in the coordinates $\theta'$ of an exact orthogonal frame $M$ along $W^\circ$ (point $M\theta'$,
  :mod:`attsvm.prove.frame`), where its bounding box is tight.

**Coordinates.** A region's points are points of $\mathbb R^p$ (the parameter $W$). The prover's boxes live in the
region's *coordinates*: the same space, unless the region has a :attr:`Region.frame` $M$ (a framed cone), when a box
$[\ell,u]$ of coordinates $\theta'$ stands for the set $\{M\theta':\theta'\in[\ell,u]\}$ and :meth:`Region.embed`
maps coordinates to the parameter ($W=M\theta'$; the identity without a frame), :meth:`Region.coords` back (exactly).

What a region offers the prover (:mod:`attsvm.prove.bnb`) and the search:

* :meth:`Region.bounding_box` — an exact box of coordinates containing the region (the prover's root box);
* :meth:`Region.excludes` — *rigorous*: True only when the box (of coordinates) provably misses the region (exact
  rational arithmetic; False means "may meet");
* :meth:`Region.contains_box` — *rigorous*: True only when the whole box (of coordinates) provably lies in the region;
* :meth:`Region.embed` / :meth:`Region.coords` — coordinates to the parameter and back (identity without a frame);
* :meth:`Region.contains` — whether a point of parameter space (float64 or exact) belongs (decided exactly);
* :meth:`Region.point` / :meth:`Region.draw` — a deterministic map of ``raw_size`` numbers in $[-1,1]$ onto the
  region, and a point drawn through a :class:`~attsvm.claims.case.Case` (so Hypothesis shrinks and replays it);
* :meth:`Region.to_dict` / :func:`from_dict` (JSON-safe, exact), :meth:`Region.describe`, and :func:`parse` of the
  command-line spelling (``box:LO,HI``, ``ball:R``, ``annulus:R0,R1``, ``cone:MU,R,R1``; ``cone:MU,R,R1,axes`` for
  a cone proved in the axis-aligned coordinates of $W$ itself).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..ball.numbers import to_arb, workprec
from ..errors import InputError
from .boxes import (
    as_box,
    corners,
    dist_sq_range,
    dot_range,
    float_down,
    float_up,
    fraction_text,
    show,
    to_fraction,
    vector,
)
from .frame import Frame, round_down, round_up, sqrt_bounds

__all__ = ["Region", "Box", "Ball", "Annulus", "Cone", "KINDS", "parse", "from_dict"]

Exact = tuple[Fraction, ...]

#: inward pulls tried by :meth:`Region.point` when float64 rounding put a boundary point just outside
_PULLS = (0.0, *(2.0**-k for k in range(45, 4, -5)))


def _shape_of(shape: Any, p: int) -> tuple[int, ...]:
    if shape is None:
        return (p,)
    try:
        shp = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise InputError(f"region shape {shape!r} is not a tuple of sizes") from None
    if any(s < 1 for s in shp) or math.prod(shp) != p:
        raise InputError(f"region shape {shp} does not hold p = {p} parameters")
    return shp


def _number(x: Any, what: str) -> Fraction:
    try:
        return to_fraction(x)
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None


def _floats(raw: Any, n: int) -> np.ndarray:
    """``raw`` as a flat float64 array of ``n`` entries in $[-1,1]$ (exact values of balls / mpf taken back)."""
    arr = np.asarray(raw)
    if arr.dtype == object:
        arr = np.array([float(to_fraction(x)) for x in arr.ravel()], dtype=np.float64)
    arr = np.asarray(arr, dtype=np.float64).ravel()
    if arr.size != n:
        raise InputError(f"the map takes {n} raw numbers, got {arr.size}")
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1):
        raise InputError("raw numbers of a region's map must be finite and in [-1, 1]")
    return arr


def _radius(s: float, pull: float, inner: Fraction, outer: Fraction) -> float:
    r"""The radius $r_0+(r_1-r_0)|s|$ in float64, kept ``pull`` (relative) inside $[r_0,r_1]$ when possible."""
    a, b = float(inner), float(outer)
    rho = a + (b - a) * abs(s)
    lo, hi = a * (1.0 + pull), b * (1.0 - pull)
    return float(np.clip(rho, lo, hi)) if lo <= hi else rho


def _unit(x: np.ndarray) -> tuple[float, np.ndarray | None]:
    r"""$(\|x\|_\infty, x/\|x\|_2)$ computed without underflow (None for $x=0$)."""
    m = float(np.max(np.abs(x))) if x.size else 0.0
    if m == 0.0:
        return 0.0, None
    y = x / m
    return m, y / float(np.linalg.norm(y))


class Region:
    """A region of $\\mathbb R^p$ (module docstring). Subclasses define the set; this class the shared API."""

    kind = "region"
    #: how many raw numbers in [-1, 1] :meth:`point` maps onto the region
    raw_size: int
    #: the frame $M$ of the prover's coordinates (parameter $=M\theta'$), None when they are the parameter's own
    frame: Frame | None = None

    def __init__(self, p: int, shape: Any = None) -> None:
        if not isinstance(p, (int, np.integer)) or isinstance(p, bool) or p < 1:
            raise InputError(f"a region needs p >= 1 parameters, got {p!r}")
        self.p = int(p)
        self.shape = _shape_of(shape, self.p)

    # ------------------------------------------------------------ the set
    def bounding_box(self) -> tuple[Exact, Exact]:
        """An exact box $[\\ell,u]$ (of coordinates) containing the region."""
        raise NotImplementedError

    def excludes(self, lo: Any, hi: Any) -> bool:
        """True only when the box $[\\ell,u]$ (of coordinates) provably does not meet the region (False: it may)."""
        raise NotImplementedError

    def contains_box(self, lo: Any, hi: Any) -> bool:
        """True only when the whole box $[\\ell,u]$ (of coordinates) provably lies in the region (False: it may
        not)."""
        raise NotImplementedError

    def embed(self, theta: Any) -> np.ndarray:
        r"""The parameter $W=M\theta'$ of coordinates ``theta`` (any shape holding ``p`` numbers of one kind:
        exact rationals, arb balls, jets, intervals), flat (``p``,) object array; without a frame, ``theta`` itself
        (:meth:`attsvm.prove.frame.Frame.embed`)."""
        if self.frame is not None:
            return self.frame.embed(theta)
        return np.asarray(theta, dtype=object).ravel()

    def coords(self, point: Any) -> Exact:
        r"""The exact coordinates $\theta'=M^{-1}W$ of a point ``point`` of parameter space (itself, exactly,
        without a frame)."""
        v = vector(point, "point")
        if len(v) != self.p:
            raise InputError(f"a point of {len(v)} coordinates for a region of p = {self.p} parameters")
        return v if self.frame is None else self.frame.coords(v)

    def contains(self, theta: Any) -> bool:
        """Whether the point ``theta`` of parameter space (float64 or exact numbers, any shape holding ``p``
        entries) belongs to the region, decided exactly (the point box of its exact coordinates)."""
        v = self.coords(theta)
        return self.contains_box(v, v)

    # ------------------------------------------------------------ sampling
    def point(self, raw: Any) -> np.ndarray:
        """The float64 point (flat, length ``p``) of the region that ``raw`` ($\\mathrm{raw\\_size}$ numbers in
        $[-1,1]$) maps to. The map is deterministic, continuous up to rounding, sends ``raw = 0`` to a simple point
        (the centre, or the axis at the inner radius) and reaches every point of the region; a result always
        satisfies :meth:`contains` (a point that rounding put just outside is pulled inwards by a relative
        $2^{-45}$ … $2^{-5}$)."""
        x = _floats(raw, self.raw_size)
        for pull in _PULLS:
            theta = self._map(x, pull)
            if theta is not None and np.all(np.isfinite(theta)) and self.contains(theta):
                return theta
        theta = self._fallback()
        if theta is not None and np.all(np.isfinite(theta)) and self.contains(theta):
            return theta
        raise InputError(f"{self.describe()}: holds no float64 point the sampler can reach (too thin)")

    def draw(self, case: Any, shape: Sequence[int] | None = None) -> Any:
        """A point of the region drawn through ``case`` (:class:`~attsvm.claims.case.Case`): the raw numbers come
        from ``case.draw_matrix(1, raw_size, scale=1)`` (recorded, shrinking to 0, replayed exactly) and
        :meth:`point` maps them. Shape ``shape`` (default the region's). In a confirming case (ball / mp replay) the
        same float64 point comes back in the case's precision (``case.kit.exact``), as ``draw_matrix`` does."""
        shp = self.shape if shape is None else _shape_of(shape, self.p)
        raw = case.draw_matrix(1, self.raw_size, scale=1.0)
        theta = self.point(raw).reshape(shp)
        if getattr(case, "confirming", False):
            return case.kit.exact(theta)
        return theta

    def _map(self, x: np.ndarray, pull: float) -> np.ndarray | None:
        raise NotImplementedError

    def _fallback(self) -> np.ndarray | None:
        return None

    # ------------------------------------------------------------ records
    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe exact record (every number as ``"p/q"`` text), read back by :func:`from_dict`."""
        return {"kind": self.kind, "p": self.p, "shape": list(self.shape), **self._fields()}

    def _fields(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, d: Any) -> Region:
        """The region of a :meth:`to_dict` record (InputError for a malformed one or one of another kind)."""
        region = from_dict(d)
        if cls is not Region and not isinstance(region, cls):
            raise InputError(f"region record: a {region.kind}, expected a {cls.kind}")
        return region

    def describe(self) -> str:
        """One line naming the set, e.g. ``Frobenius ball ‖W‖_F ≤ 3``."""
        raise NotImplementedError

    def _symbols(self) -> tuple[str, str]:
        if len(self.shape) == 2:
            return "W", "‖W‖_F"
        return "θ", "‖θ‖"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Region) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(sorted(self.to_dict().items(), key=lambda kv: kv[0])))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._repr_args()})"

    def _repr_args(self) -> str:
        raise NotImplementedError


def _texts(v: Sequence[Fraction]) -> list[str]:
    return [fraction_text(q) for q in v]


def _shape_arg(shape: tuple[int, ...], p: int) -> str:
    return "" if shape == (p,) else f", shape={shape}"


# ---------------------------------------------------------------------------------------------------- Box
class Box(Region):
    r"""The box $\{\theta\in\mathbb R^p:\ell_j\le\theta_j\le u_j\}$ (``lo``, ``hi``: any shape holding ``p``
    entries, flattened row-major; the shape is kept when ``shape`` is not given).

    ``excludes``: some $j$ with $u'_j<\ell_j$ or $\ell'_j>u_j$; ``contains_box``: $\ell_j\le\ell'_j$ and
    $u'_j\le u_j$ for every $j$ (exact comparisons)."""

    kind = "box"

    def __init__(self, lo: Any, hi: Any, shape: Any = None) -> None:
        L, H = as_box(lo, hi)
        if not L:
            raise InputError("a box needs at least one coordinate")
        if shape is None and np.ndim(lo) > 1:
            shape = np.shape(lo)
        super().__init__(len(L), shape)
        self.lo, self.hi = L, H
        self.raw_size = self.p

    def bounding_box(self) -> tuple[Exact, Exact]:
        """The box itself."""
        return self.lo, self.hi

    def excludes(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        return any(b < a0 or a > b0 for a, b, a0, b0 in zip(L, H, self.lo, self.hi))

    def contains_box(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        return all(a0 <= a and b <= b0 for a, b, a0, b0 in zip(L, H, self.lo, self.hi))

    def _map(self, x: np.ndarray, pull: float) -> np.ndarray | None:
        r"""$\theta_j=m_j+h_jx_j$ ($m$ the centre, $h$ the half-widths), clipped to the float64 values inside."""
        lo_f = np.array([float_up(a) for a in self.lo])
        hi_f = np.array([float_down(b) for b in self.hi])
        if np.any(lo_f > hi_f):
            return None
        mid = np.array([float((a + b) / 2) for a, b in zip(self.lo, self.hi)])
        half = np.array([float((b - a) / 2) for a, b in zip(self.lo, self.hi)])
        return np.clip(mid + half * x, lo_f, hi_f)

    def _fields(self) -> dict[str, Any]:
        return {"lo": _texts(self.lo), "hi": _texts(self.hi)}

    def describe(self) -> str:
        if self.p == 1:
            return f"interval [{show(self.lo[0])}, {show(self.hi[0])}]"
        if len(set(self.lo)) == 1 and len(set(self.hi)) == 1:
            return f"box [{show(self.lo[0])}, {show(self.hi[0])}]^{self.p}"
        if self.p <= 4:
            return "box " + " × ".join(f"[{show(a)}, {show(b)}]" for a, b in zip(self.lo, self.hi))
        return f"box in R^{self.p} with coordinates in [{show(min(self.lo))}, {show(max(self.hi))}]"

    def _repr_args(self) -> str:
        lo = ", ".join(show(a) for a in self.lo)
        hi = ", ".join(show(b) for b in self.hi)
        return f"lo=[{lo}], hi=[{hi}]{_shape_arg(self.shape, self.p)}"


# ---------------------------------------------------------------------------------------------------- Ball
class Ball(Region):
    r"""The ball $\{\theta:\|\theta-c\|\le r\}$ (Frobenius for a matrix), $r>0$; ``centre`` $c$ defaults to 0 (then
    ``p`` is needed).

    ``excludes``: $\min_B\|\theta-c\|^2>r^2$; ``contains_box``: $\max_B\|\theta-c\|^2\le r^2$ (both exact,
    :func:`~attsvm.prove.boxes.dist_sq_range`). Map: $\theta=c+r\,\|x\|_\infty\,x/\|x\|_2$ for
    $x\in[-1,1]^p$ — a homeomorphism of the cube onto the ball ($\|\theta-c\|=r\|x\|_\infty$)."""

    kind = "ball"

    def __init__(self, radius: Any, centre: Any = None, p: int | None = None, shape: Any = None) -> None:
        r = _number(radius, "ball radius")
        if r <= 0:
            raise InputError(f"ball radius must be > 0, got {show(r)}")
        if centre is None:
            if p is None:
                raise InputError("a ball around 0 needs p, the number of parameters")
            c = None
            n = p
        else:
            c = vector(centre, "ball centre")
            if p is not None and len(c) != p:
                raise InputError(f"ball centre has {len(c)} entries, p = {p}")
            n = len(c)
            if shape is None and np.ndim(centre) > 1:
                shape = np.shape(centre)
        super().__init__(n, shape)
        self.radius = r
        self.centre: Exact | None = c
        self.raw_size = self.p
        self._c = (Fraction(0),) * self.p if c is None else c
        self._cf = np.array([float(q) for q in self._c])

    def bounding_box(self) -> tuple[Exact, Exact]:
        """$[c-r,\\,c+r]$ coordinatewise."""
        return tuple(q - self.radius for q in self._c), tuple(q + self.radius for q in self._c)

    def excludes(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        mn, _ = dist_sq_range(L, H, self.centre)
        return mn > self.radius * self.radius

    def contains_box(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        _, mx = dist_sq_range(L, H, self.centre)
        return mx <= self.radius * self.radius

    def _map(self, x: np.ndarray, pull: float) -> np.ndarray | None:
        t, u = _unit(x)
        if u is None:
            return self._cf.copy()
        return self._cf + float(self.radius) * t * (1.0 - pull) * u

    def _fallback(self) -> np.ndarray | None:
        return self._cf.copy()

    def _fields(self) -> dict[str, Any]:
        return {"radius": fraction_text(self.radius), "centre": None if self.centre is None else _texts(self.centre)}

    def describe(self) -> str:
        sym, norm = self._symbols()
        kind = "Frobenius ball" if len(self.shape) == 2 else "Euclidean ball"
        if self.centre is None:
            return f"{kind} {norm} ≤ {show(self.radius)}"
        inner = norm.replace(sym, f"{sym} − {sym}₀")
        return f"{kind} {inner} ≤ {show(self.radius)} around a given {sym}₀"

    def _repr_args(self) -> str:
        if self.centre is None:
            where = f"p={self.p}"
        else:
            where = "centre=[" + ", ".join(show(q) for q in self.centre) + "]"
        return f"radius={show(self.radius)}, {where}{_shape_arg(self.shape, self.p)}"


# ---------------------------------------------------------------------------------------------------- Annulus
class Annulus(Region):
    r"""The annulus $\{\theta:r_0\le\|\theta\|\le r_1\}$, $0\le r_0<r_1$ (a ball when $r_0=0$).

    ``excludes``: $\min_B\|\theta\|^2>r_1^2$ or $\max_B\|\theta\|^2<r_0^2$; ``contains_box``: $\min_B\|\theta\|^2\ge
    r_0^2$ and $\max_B\|\theta\|^2\le r_1^2$ (exact). Map of $(x,s)\in[-1,1]^{p+1}$: direction $x/\|x\|_2$
    ($e_1$ for $x=0$), radius $r_0+(r_1-r_0)|s|$."""

    kind = "annulus"

    def __init__(self, r0: Any, r1: Any, p: int | None = None, shape: Any = None) -> None:
        a, b = _number(r0, "annulus inner radius"), _number(r1, "annulus outer radius")
        if a < 0:
            raise InputError(f"annulus inner radius must be >= 0, got {show(a)}")
        if not a < b:
            raise InputError(f"annulus radii must satisfy r0 < r1, got r0 = {show(a)}, r1 = {show(b)}")
        if p is None:
            raise InputError("an annulus needs p, the number of parameters")
        super().__init__(p, shape)
        self.r0, self.r1 = a, b
        self.raw_size = self.p + 1

    def bounding_box(self) -> tuple[Exact, Exact]:
        """$[-r_1,r_1]^p$."""
        return (-self.r1,) * self.p, (self.r1,) * self.p

    def excludes(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        mn, mx = dist_sq_range(L, H)
        return mn > self.r1 * self.r1 or mx < self.r0 * self.r0

    def contains_box(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        mn, mx = dist_sq_range(L, H)
        return mn >= self.r0 * self.r0 and mx <= self.r1 * self.r1

    def _map(self, x: np.ndarray, pull: float) -> np.ndarray | None:
        _, u = _unit(x[: self.p])
        if u is None:
            u = np.zeros(self.p)
            u[0] = 1.0
        return _radius(float(x[self.p]), pull, self.r0, self.r1) * u

    def _fallback(self) -> np.ndarray | None:
        out = np.zeros(self.p)
        out[0] = float((self.r0 + self.r1) / 2)
        return out

    def _fields(self) -> dict[str, Any]:
        return {"r0": fraction_text(self.r0), "r1": fraction_text(self.r1)}

    def describe(self) -> str:
        _, norm = self._symbols()
        return f"annulus {show(self.r0)} ≤ {norm} ≤ {show(self.r1)}"

    def _repr_args(self) -> str:
        return f"r0={show(self.r0)}, r1={show(self.r1)}, p={self.p}{_shape_arg(self.shape, self.p)}"


# ---------------------------------------------------------------------------------------------------- Cone
class Cone(Region):
    r"""$\mathcal C_{\mu,R}(W^\circ)\cap\{\|\theta\|\le R_1\}=\{\theta:R\le\|\theta\|\le R_1,\
    \langle\theta,W^\circ\rangle\ge c\,\|\theta\|\|W^\circ\|\}$, $c=1-\mu$, $0<\mu\le1$, $0\le R<R_1$,
    ``direction`` $W^\circ\ne0$ (module docstring).

    ``excludes`` (each test exact, any one suffices): the annulus tests; $\max_B\langle\theta,W^\circ\rangle<0$; with
    $M=\max_B\langle\theta,W^\circ\rangle\ge0$ and $\rho^2=\max(\min_B\|\theta\|^2,R^2)$: $c^2\rho^2\|W^\circ\|^2>M^2$
    (every region point has $c\rho\|W^\circ\|\le c\|\theta\|\|W^\circ\|\le\langle\theta,W^\circ\rangle\le M$); and a
    separating hyperplane: a $y$ of the dual cone $K^*=\{y:\langle y,W^\circ\rangle\ge\sqrt{1-c^2}\,\|y\|\|W^\circ\|\}$
    (checked exactly by squares) with $\max_B\langle y,\theta\rangle<0$ — since $\langle y,\theta\rangle\ge0$ on $K$.
    $y$ is the inward normal of the cone's boundary facing the box centre (nudged into $K^*$); it makes the test
    tight for boxes much smaller than the cone's width, which the correlation bound alone is not for small $\mu$.

    ``contains_box``: the annulus test and either $m=\min_B\langle\theta,W^\circ\rangle\ge0$ with
    $m^2\ge c^2\|W^\circ\|^2\max_B\|\theta\|^2$, or (for $p\le10$) every corner in $K$ ($K$ is convex).

    ``bounding_box``: with $\hat w=W^\circ/\|W^\circ\|$, the largest $\theta_j/\|\theta\|$ on the cap is $1$ if
    $\hat w_j\ge c$, else $\cos(\arccos\hat w_j-\varphi)=\hat w_jc+\sqrt{1-\hat w_j^2}\sqrt{1-c^2}$ (nondecreasing
    in $\hat w_j$), enclosed in arb balls, rounded outwards to float64 and scaled by $R_1$ (by $R$ when negative);
    the same for $-\theta_j$; clipped to $[-R_1,R_1]$.

    The tests above are those of an axis-aligned cone (``framed=False``, spec ``cone:MU,R,R1,axes``). A cone is
    **framed** by default: the prover's coordinates are $\vartheta$ with $\theta=M\vartheta$, $M$ the exact
    orthogonal frame of $W^\circ$ (:class:`~attsvm.prove.frame.Frame`: first column $m_0=W^\circ$, squared column
    norms $c_j$), and the box tests are exact decisions in $\vartheta$. There
    $\langle\theta,W^\circ\rangle=c_0\vartheta_0$ and $\|\theta\|^2=t+q$ with $t=c_0\vartheta_0^2$,
    $q=\sum_{j\ge1}c_j\vartheta_j^2$, so (with $s^2=1-c^2$)

    .. math::
        \theta\in\text{region}\iff\vartheta_0\ge0,\quad c^2q\le s^2t,\quad R^2\le t+q\le R_1^2

    ($c_0^2\vartheta_0^2\ge c^2c_0(t+q)\iff s^2t\ge c^2q$). Over a box, $\vartheta_0\in[\max(\ell_0,0),u_0]$ and the
    $\vartheta_{j\ge1}$ range independently, so $(t,q)$ ranges over exactly the rectangle
    $[t_-,t_+]\times[q_-,q_+]$ ($q_\pm$ the exact separable extremes of the weighted sum of squares).

    * ``excludes``: $u_0<0$, or no $(t,q)$ of the rectangle meets the three linear constraints. With
      $g(t)=\min(q_+,R_1^2-t,s^2t/c^2)-\max(q_-,R^2-t)$ (concave, piecewise linear) that is
      $\max_{[t_-,t_+]}g<0$, decided at $t_\pm$ and the breakpoints $R^2-q_-$, $R_1^2-q_+$, $c^2q_+/s^2$, $c^2R_1^2$
      lying in $[t_-,t_+]$ — an exact test: it excludes a box exactly when the box misses the region;
    * ``contains_box``: $\ell_0\ge0$, $t_-+q_-\ge R^2$, $t_++q_+\le R_1^2$ and $s^2t_-\ge c^2q_+$ (the constraints at
      the rectangle's worst corners; exact);
    * ``bounding_box``: every region point has $c\,R/\sqrt{c_0}\le\vartheta_0=\langle\theta,W^\circ\rangle/c_0\le
      R_1/\sqrt{c_0}$ and $c_j\vartheta_j^2\le q\le s^2(t+q)\le s^2R_1^2$, so
      $|\vartheta_j|\le R_1s/\sqrt{c_j}$ ($j\ge1$): the box of these bounds, the square roots bounded by exact
      rationals (:func:`~attsvm.prove.frame.sqrt_bounds`) and rounded outwards to 53-bit dyadics.

    Map of $(x,s)\in[-1,1]^{p+1}$ (a point $\theta$ of the set, framed or not): with
    $x_\perp=x-\langle x,\hat w\rangle\hat w$, angle
    $\psi=\varphi\min(1,\|x_\perp\|)$ towards $x_\perp/\|x_\perp\|$, radius $R+(R_1-R)|s|$:
    $\theta=(R+(R_1-R)|s|)(\cos\psi\,\hat w+\sin\psi\,x_\perp/\|x_\perp\|)$. The projection of the cube onto
    $\hat w^\perp$ contains its unit ball, so every angle and direction is reached; $x=0,s=0$ gives $R\hat w$."""

    kind = "cone"

    def __init__(self, direction: Any, mu: Any, R: Any, R1: Any, shape: Any = None, framed: bool = True) -> None:
        w = vector(direction, "cone direction W°")
        if not w or all(q == 0 for q in w):
            raise InputError("the cone direction W° must be nonzero")
        m = _number(mu, "cone μ")
        if not 0 < m <= 1:
            raise InputError(f"cone μ must lie in (0, 1], got {show(m)}")
        a, b = _number(R, "cone R"), _number(R1, "cone R1")
        if a < 0:
            raise InputError(f"cone R must be >= 0, got {show(a)}")
        if not a < b:
            raise InputError(f"cone radii must satisfy R < R1, got R = {show(a)}, R1 = {show(b)}")
        if shape is None and np.ndim(direction) > 1:
            shape = np.shape(direction)
        super().__init__(len(w), shape)
        self.raw_size = self.p + 1
        self.direction: Exact = w
        self.mu = m
        self.R, self.R1 = a, b
        self._ww = sum(q * q for q in w)
        self._cc = 1 - m
        self._c2ww = self._cc * self._cc * self._ww
        self._s2 = 1 - self._cc * self._cc
        wf = np.array([float(q) for q in w])
        self._what = wf / np.linalg.norm(wf / np.max(np.abs(wf))) / np.max(np.abs(wf))
        self._cf = float(self._cc)
        self._sf = math.sqrt(max(0.0, 1.0 - self._cf * self._cf))
        self._phi = math.acos(self._cf)
        self._box: tuple[Exact, Exact] | None = None
        if not isinstance(framed, (bool, np.bool_)):
            raise InputError(f"cone framed must be True or False, got {framed!r}")
        self._framed = bool(framed)

    @property
    def framed(self) -> bool:
        """Whether the prover's coordinates are those of the orthogonal frame along $W^\\circ$."""
        return self._framed

    @property
    def frame(self) -> Frame | None:  # type: ignore[override]
        """The orthogonal frame along $W^\\circ$ when framed (built on first use: a claim builds its cone at every
        evaluation of the margin, and only the prover's copy needs the frame), else None."""
        return _frame_of(self.direction) if self._framed else None

    # ---- the set
    def _in_cone(self, theta: Sequence[Fraction]) -> bool:
        t = sum(a * b for a, b in zip(theta, self.direction))
        return t >= 0 and t * t >= self._c2ww * sum(a * a for a in theta)

    def excludes(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        if self._framed:
            return self._framed_excludes(L, H)
        nmin, nmax = dist_sq_range(L, H)
        if nmin > self.R1 * self.R1 or nmax < self.R * self.R:
            return True
        _, M = dot_range(L, H, self.direction)
        if M < 0:
            return True
        if self._cc == 0:
            return False
        rho2 = nmin if nmin > self.R * self.R else self.R * self.R
        if self._c2ww * rho2 > M * M:
            return True
        return self._separated(L, H)

    def _separated(self, L: Exact, H: Exact) -> bool:
        """The separating-hyperplane test (class docstring)."""
        b = np.array([float((x + y) / 2) for x, y in zip(L, H)])
        a = float(b @ self._what)
        perp = b - a * self._what
        q = float(np.linalg.norm(perp))
        if q == 0.0 or not math.isfinite(q) or q * self._cf <= a * self._sf:
            return False  # the centre lies on the axis or inside the cone: no hyperplane through it
        e = perp / q
        for nudge in (2.0**-30, 2.0**-15):
            y = (self._sf + nudge) * self._what - self._cf * e
            Y = tuple(Fraction(float(v)) for v in y)
            yw = sum(a * b for a, b in zip(Y, self.direction))
            if yw <= 0 or yw * yw < self._s2 * self._ww * sum(v * v for v in Y):
                continue
            return dot_range(L, H, Y)[1] < 0
        return False

    def contains_box(self, lo: Any, hi: Any) -> bool:
        L, H = as_box(lo, hi, self.p)
        if self._framed:
            return self._framed_contains(L, H)
        nmin, nmax = dist_sq_range(L, H)
        if nmin < self.R * self.R or nmax > self.R1 * self.R1:
            return False
        m, _ = dot_range(L, H, self.direction)
        if m >= 0 and m * m >= self._c2ww * nmax:
            return True
        if self.p <= 10:
            return all(self._in_cone(k) for k in corners(L, H))
        return False

    def bounding_box(self) -> tuple[Exact, Exact]:
        """The box of the cone segment (class docstring): in the frame's coordinates when framed, else inside
        $[-R_1,R_1]^p$."""
        if self._box is None and self._framed:
            self._box = self._framed_box()
        if self._box is None:
            with workprec(128):
                norm = to_arb(self._ww).sqrt()
                c = to_arb(self._cc)
                s = (1 - c * c).sqrt()
                his, los = [], []
                for q in self.direction:
                    wj = to_arb(q) / norm
                    his.append(self._extent(self._cap_max(wj, c, s)))
                    los.append(-self._extent(self._cap_max(-wj, c, s)))
            self._box = (tuple(los), tuple(his))
        return self._box

    # ---- the set in the frame's coordinates (class docstring)
    def _tq(self, L: Exact, H: Exact) -> tuple[Fraction, Fraction, Fraction, Fraction]:
        r"""$(t_-,t_+,q_-,q_+)$ of the box $[L,H]$ (its part with $\vartheta_0\ge0$; needs $H_0\ge0$)."""
        c = self.frame.norms2  # type: ignore[union-attr]
        a0 = L[0] if L[0] > 0 else Fraction(0)
        tmin, tmax = c[0] * a0 * a0, c[0] * H[0] * H[0]
        qmin = qmax = Fraction(0)
        for cj, a, b in zip(c[1:], L[1:], H[1:]):
            sa, sb = a * a, b * b
            qmax += cj * (sa if sa > sb else sb)
            if a > 0:
                qmin += cj * sa
            elif b < 0:
                qmin += cj * sb
        return tmin, tmax, qmin, qmax

    def _framed_excludes(self, L: Exact, H: Exact) -> bool:
        if H[0] < 0:
            return True
        tmin, tmax, qmin, qmax = self._tq(L, H)
        r2, r12 = self.R * self.R, self.R1 * self.R1
        cc2, s2 = self._cc * self._cc, self._s2

        def gap(t: Fraction) -> Fraction:
            top = min(qmax, r12 - t)
            if cc2 > 0:
                top = min(top, s2 * t / cc2)
            return top - max(qmin, r2 - t)

        ts = [tmin, tmax, r2 - qmin, r12 - qmax, cc2 * r12]
        if cc2 > 0:
            ts.append(cc2 * qmax / s2)
        return not any(gap(t) >= 0 for t in ts if tmin <= t <= tmax)

    def _framed_contains(self, L: Exact, H: Exact) -> bool:
        if L[0] < 0:
            return False
        tmin, tmax, qmin, qmax = self._tq(L, H)
        cc2 = self._cc * self._cc
        return tmin + qmin >= self.R * self.R and tmax + qmax <= self.R1 * self.R1 and self._s2 * tmin >= cc2 * qmax

    def _framed_box(self) -> tuple[Exact, Exact]:
        c = self.frame.norms2  # type: ignore[union-attr]
        inv_lo, inv_hi = sqrt_bounds(1 / c[0])
        los, his = [round_down(self._cc * self.R * inv_lo)], [round_up(self.R1 * inv_hi)]
        for cj in c[1:]:
            h = round_up(self.R1 * sqrt_bounds(self._s2 / cj)[1])
            los.append(-h)
            his.append(h)
        return tuple(los), tuple(his)

    def _cap_max(self, wj: Any, c: Any, s: Any) -> Fraction:
        r"""An exact upper bound of $\max\{u_j:\|u\|=1,\langle u,\hat w\rangle\ge c\}$ for the ball ``wj`` of
        $\hat w_j$ (1 when undecided)."""
        a = wj.upper()
        if not a.is_finite() or not a < c:
            return Fraction(1)
        if a < -1:
            a = to_arb(-1)
        u = a * c + (1 - a * a).sqrt() * s
        if not u.is_finite():
            return Fraction(1)
        bound = to_fraction(u.upper())
        return min(bound, Fraction(1))

    def _extent(self, umax: Fraction) -> Fraction:
        """$\\max_{R\\le t\\le R_1}t\\,u_{\\max}$ rounded up to a float64 value, at most $R_1$."""
        top = self.R1 * umax if umax >= 0 else self.R * umax
        return min(to_fraction(float_up(top)), self.R1)

    # ---- sampling
    def _map(self, x: np.ndarray, pull: float) -> np.ndarray | None:
        v = x[: self.p]
        m = float(np.max(np.abs(v)))
        psi = 0.0
        e = np.zeros(self.p)
        if m > 0:
            y = v / m
            perp = y - float(y @ self._what) * self._what
            n = float(np.linalg.norm(perp))
            if n > 0:
                psi = self._phi * min(1.0, m * n) * (1.0 - pull)
                e = perp / n
        rho = _radius(float(x[self.p]), pull, self.R, self.R1)
        return rho * (math.cos(psi) * self._what + math.sin(psi) * e)

    def _fallback(self) -> np.ndarray | None:
        return float((self.R + self.R1) / 2) * self._what

    # ---- records
    def _fields(self) -> dict[str, Any]:
        return {
            "direction": _texts(self.direction),
            "mu": fraction_text(self.mu),
            "R": fraction_text(self.R),
            "R1": fraction_text(self.R1),
            "frame": "orthogonal" if self.framed else "none",
        }

    def describe(self) -> str:
        sym, norm = self._symbols()
        where = f", boxes in an orthogonal frame along {sym}°" if self.framed else ""
        return (
            f"cone C_{{μ,R}}({sym}°) ∩ {{{norm} ≤ R₁}} (corr({sym}, {sym}°) ≥ 1 − μ, R ≤ {norm} ≤ R₁):"
            f" μ = {show(self.mu)}, R = {show(self.R)}, R₁ = {show(self.R1)}{where}"
        )

    def _repr_args(self) -> str:
        w = ", ".join(show(q) for q in self.direction)
        shp = _shape_arg(self.shape, self.p)
        fr = "" if self.framed else ", framed=False"
        return f"direction=[{w}], mu={show(self.mu)}, R={show(self.R)}, R1={show(self.R1)}{shp}{fr}"


_FRAMES: dict[Exact, Frame] = {}


def _frame_of(axis: Exact) -> Frame:
    """The :class:`~attsvm.prove.frame.Frame` of ``axis``, built once per axis (a few kept)."""
    fr = _FRAMES.get(axis)
    if fr is None:
        if len(_FRAMES) >= 16:
            _FRAMES.clear()
        fr = _FRAMES[axis] = Frame(axis)
    return fr


KINDS: dict[str, type[Region]] = {"box": Box, "ball": Ball, "annulus": Annulus, "cone": Cone}

_SPECS = "box:LO,HI, ball:R, annulus:R0,R1, cone:MU,R,R1[,axes]"


def parse(spec: str, p: int, direction: Any = None, shape: Any = None) -> Region:
    """The region of a command-line ``spec``: ``box:LO,HI`` (every coordinate in [LO, HI]), ``ball:R``
    (‖θ‖ ≤ R), ``annulus:R0,R1`` (R0 ≤ ‖θ‖ ≤ R1) or ``cone:MU,R,R1`` (the cone around ``direction``, which the claim
    supplies; proved in the orthogonal frame along it, or with a fourth entry ``axes`` in the coordinates of θ
    itself), in ``R^p``. Numbers: integers, decimals (exact: ``0.1`` is 1/10), ``p/q`` or float.hex text.
    A malformed spec is an InputError naming the problem."""
    if not isinstance(spec, str):
        raise InputError(f"a region is given as text ({_SPECS}), got {type(spec).__name__}")
    kind, sep, rest = spec.strip().partition(":")
    kind = kind.strip().lower()
    arity = {"box": 2, "ball": 1, "annulus": 2, "cone": 3}
    forms = {"box": "box:LO,HI", "ball": "ball:R", "annulus": "annulus:R0,R1", "cone": "cone:MU,R,R1"}
    if kind not in arity:
        raise InputError(f"region {spec!r}: unknown kind {kind!r} (one of {_SPECS})")
    if not sep or not rest.strip():
        raise InputError(f"region {spec!r}: no numbers after the kind (write {forms[kind]})")
    parts = [t.strip() for t in rest.split(",")]
    framed = True
    if kind == "cone" and len(parts) == 4 and parts[3].lower() in ("axes", "frame"):
        framed = parts.pop().lower() == "frame"
    if len(parts) != arity[kind]:
        n = arity[kind]
        raise InputError(
            f"region {spec!r}: {kind} takes {n} number{'s' if n > 1 else ''} ({forms[kind]}), got {len(parts)}"
        )
    try:
        nums = [to_fraction(t) for t in parts]
    except InputError as exc:
        raise InputError(f"region {spec!r}: {exc}") from None
    try:
        if kind == "box":
            lo, hi = nums
            if lo > hi:
                raise InputError(f"LO = {show(lo)} above HI = {show(hi)}")
            return Box((lo,) * p, (hi,) * p, shape=shape)
        if kind == "ball":
            return Ball(nums[0], p=p, shape=shape)
        if kind == "annulus":
            return Annulus(nums[0], nums[1], p=p, shape=shape)
        if direction is None:
            raise InputError("the cone needs its direction W° (the claim supplies it)")
        cone = Cone(direction, nums[0], nums[1], nums[2], shape=shape, framed=framed)
        if cone.p != p:
            raise InputError(f"the cone direction has {cone.p} entries, p = {p}")
        return cone
    except InputError as exc:
        raise InputError(f"region {spec!r}: {exc}") from None


def from_dict(d: Any) -> Region:
    """The region of a :meth:`Region.to_dict` record (exact). A malformed record is an InputError."""
    if not isinstance(d, dict):
        raise InputError(f"region record: expected a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    if kind not in KINDS:
        raise InputError(f"region record: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    need = {
        "box": ("lo", "hi"),
        "ball": ("radius", "centre"),
        "annulus": ("r0", "r1"),
        "cone": ("direction", "mu", "R", "R1"),
    }[kind]
    missing = [k for k in ("p", "shape", *need) if k not in d]
    if missing:
        raise InputError(f"region record ({kind}): missing {', '.join(missing)}")
    p, shape = d["p"], d["shape"]
    if not isinstance(p, int) or isinstance(p, bool):
        raise InputError(f"region record ({kind}): p must be an integer, got {p!r}")
    if not isinstance(shape, list):
        raise InputError(f"region record ({kind}): shape must be a list, got {shape!r}")
    for key in need:
        val = d[key]
        items = val if isinstance(val, list) else [val]
        if key == "centre" and val is None:
            continue
        if not all(isinstance(x, str) for x in items):
            raise InputError(f"region record ({kind}): {key} must hold exact numbers as text")
    try:
        if kind == "box":
            region: Region = Box(d["lo"], d["hi"], shape=shape)
        elif kind == "ball":
            region = Ball(d["radius"], d["centre"], p=p, shape=shape)
        elif kind == "annulus":
            region = Annulus(d["r0"], d["r1"], p=p, shape=shape)
        else:
            frame = d.get("frame", "none")  # records without the key predate framing: axis-aligned
            if frame not in ("orthogonal", "none"):
                raise InputError(f"frame must be 'orthogonal' or 'none', got {frame!r}")
            region = Cone(d["direction"], d["mu"], d["R"], d["R1"], shape=shape, framed=frame == "orthogonal")
    except InputError as exc:
        raise InputError(f"region record ({kind}): {exc}") from None
    if region.p != p:
        raise InputError(f"region record ({kind}): p = {p} but the numbers give {region.p} parameters")
    return region
