r"""Adapted coordinates for a region around an axis: an exact orthogonal frame $M$ with $W=M\theta$.

A thin cone around a direction $W^\circ$ that is not a coordinate axis has an axis-aligned bounding box far larger
than the set (at $d=3$ the cone of the local convergence lemma fills a tiny part of its box in $\mathbb R^9$). In
coordinates $\theta$ adapted to the axis the box is tight: the prover (:mod:`attsvm.prove.bnb`) and the certificate
work on boxes in $\theta$, and the parameter the claim sees is $W=M\theta$ (:meth:`Frame.embed`, only $+$ and
$\times$ by exact rationals, so every kind of number — exact rationals, arb balls, jets, the verifier's intervals —
carries it through its own rigorous arithmetic).

**The frame.** For $w=W^\circ\in\mathbb Q^p\setminus\{0\}$ let $i_0$ be the first index of a largest $|w_i|$ and
$i_1<\dots<i_{p-1}$ the others. With $S_k=\sum_{m<k}w_{i_m}^2$ ($S_1=w_{i_0}^2>0$, $S_p=\|w\|^2$) the columns are

.. math::
    m_0=w,\qquad m_k=2^{-e_k}\Bigl(S_k\,e_{i_k}-w_{i_k}\sum_{m<k}w_{i_m}e_{i_m}\Bigr)\quad(1\le k<p),
    \qquad e_k=\lfloor\log_2S_k\rfloor .

They are exactly orthogonal: $\langle m_k,w\rangle\propto S_kw_{i_k}-w_{i_k}S_k=0$, and for $k<l$ the part of
$m_l$ on $e_{i_0},\dots,e_{i_{l-1}}$ is $-w_{i_l}$ times $w$ there, so $\langle m_k,m_l\rangle\propto
-w_{i_l}\langle m_k,w\rangle=0$. Up to the positive factor $S_{k+1}2^{-e_k}$, $m_k$ is the component of $e_{i_k}$
orthogonal to $w$ and to $e_{i_{k+1}},\dots,e_{i_{p-1}}$: the Gram–Schmidt process over the rationals on
$(w,e_{i_{p-1}},\dots,e_{i_1},e_{i_0})$, which drops the dependent last vector $e_{i_0}$. The factor clears its
denominators: the entries are products of entries of $w$ scaled by powers of two, so for a dyadic $w$ (float64
values) every entry of $M$ is dyadic and $W=M\theta$ of a dyadic $\theta$ is exact in arb and in mpmath's
intervals whenever the working precision holds the products (else rounded outwards, still rigorous). The squared norms
are $c_0=\|w\|^2$ and $c_k=\|m_k\|^2=S_kS_{k+1}4^{-e_k}\in[1,4p]$ — the frame is well conditioned because
$|w_{i_0}|$ is largest. For $w=e_j$ it is the identity with the columns reordered ($j$ first).

**In $\theta$.** $\langle W,w\rangle=c_0\theta_0$, $\|W\|^2=\sum_jc_j\theta_j^2$, and
$\theta_j=\langle W,m_j\rangle/c_j$ (:meth:`Frame.coords`, the exact inverse). The frame is a deterministic
function of the exact $w$: a certificate records only that the region is framed, and the verifier rebuilds $M$ from
$w$ itself.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import InputError
from .boxes import vector

__all__ = ["Frame", "sqrt_bounds", "round_down", "round_up"]

Exact = tuple[Fraction, ...]


def _floor_log2(q: Fraction) -> int:
    r"""$\lfloor\log_2q\rfloor$ for a rational $q>0$ (exact)."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > q else e


def round_down(q: Fraction, bits: int = 53) -> Fraction:
    r"""The largest dyadic $m2^e\le q$ with $|m|<2^{\mathrm{bits}}$ (exact; any exponent, so no overflow)."""
    if q == 0:
        return Fraction(0)
    e = _floor_log2(abs(q)) - bits + 1
    return Fraction(math.floor(q / Fraction(2) ** e)) * Fraction(2) ** e


def round_up(q: Fraction, bits: int = 53) -> Fraction:
    r"""The smallest dyadic $m2^e\ge q$ with $|m|\le2^{\mathrm{bits}}$ (exact)."""
    return -round_down(-q, bits)


def sqrt_bounds(q: Fraction, bits: int = 64) -> tuple[Fraction, Fraction]:
    r"""Exact rationals $a\le\sqrt q\le b$ for a rational $q\ge0$, relatively $2^{-\mathrm{bits}}$ apart: with
    $q=n/d$, $\sqrt q=\sqrt{nd}/d$ and $s=\lfloor\sqrt{nd\,4^k}\rfloor$ (integer square root),
    $s\le2^k\sqrt{nd}<s+1$; $a=s/(2^kd)$, $b=(s+1)/(2^kd)$ ($b=a$ when $nd\,4^k$ is a square)."""
    q = Fraction(q)
    if q < 0:
        raise InputError(f"sqrt_bounds of a negative number {q}")
    if q == 0:
        return Fraction(0), Fraction(0)
    n, d = q.numerator, q.denominator
    nd = n * d
    k = max(0, bits + 2 - nd.bit_length() // 2)
    N = nd << (2 * k)
    s = math.isqrt(N)
    a = Fraction(s, d << k)
    return a, (a if s * s == N else Fraction(s + 1, d << k))


def _is_interval(x: Any) -> bool:
    from .interval import Iv, IvJet

    return isinstance(x, (Iv, IvJet))


class Frame:
    r"""The exact orthogonal frame of an axis $w$ (module docstring): ``columns`` $m_0=w,m_1,\dots,m_{p-1}$ (exact
    rational tuples), ``norms2`` $c_j=\|m_j\|^2$, ``order`` $(i_0,\dots,i_{p-1})$; :meth:`embed` $W=M\theta$ and
    :meth:`coords` $\theta=M^{-1}W$ (by orthogonality, $\theta_j=\langle W,m_j\rangle/c_j$)."""

    def __init__(self, axis: Any) -> None:
        w = vector(axis, "frame axis")
        if not w or all(q == 0 for q in w):
            raise InputError("the frame axis must be nonzero")
        p = len(w)
        first = max(range(p), key=lambda i: (abs(w[i]), -i))  # the first index of a largest |w_i|
        order = (first, *(i for i in range(p) if i != first))
        cols: list[Exact] = [w]
        S = w[first] * w[first]
        for k in range(1, p):
            ik = order[k]
            scale = Fraction(2) ** -_floor_log2(S)
            col = [Fraction(0)] * p
            for m in order[:k]:
                col[m] = -w[ik] * w[m] * scale
            col[ik] = S * scale
            cols.append(tuple(col))
            S += w[ik] * w[ik]
        self.p = p
        self.axis: Exact = w
        self.order: tuple[int, ...] = order
        self.columns: tuple[Exact, ...] = tuple(cols)
        self.norms2: Exact = tuple(sum(x * x for x in c) for c in cols)
        # rows of M as (column, coefficient) for the nonzero entries: W_i = sum_j M_ij theta_j
        self._rows = tuple(tuple((j, c[i]) for j, c in enumerate(cols) if c[i] != 0) for i in range(p))
        self._balls: dict[int, Any] = {}

    def matrix(self) -> tuple[Exact, ...]:
        """$M$ as rows (``matrix()[i][j]`` $=M_{ij}$, the $i$-th entry of column $j$)."""
        return tuple(tuple(c[i] for c in self.columns) for i in range(self.p))

    def coords(self, W: Any) -> Exact:
        r"""The exact $\theta=M^{-1}W$: $\theta_j=\langle W,m_j\rangle/c_j$ (``W`` any shape holding ``p``
        exact numbers)."""
        v = vector(W, "point")
        if len(v) != self.p:
            raise InputError(f"a point of {len(v)} coordinates for a frame of p = {self.p}")
        return tuple(sum(a * b for a, b in zip(v, c)) / n for c, n in zip(self.columns, self.norms2))

    def _ball_rows(self) -> tuple:
        """The rows with arb-ball coefficients at the working precision (exact for dyadic entries)."""
        from flint import ctx

        from ..ball.numbers import to_arb

        rows = self._balls.get(ctx.prec)
        if rows is None:
            rows = tuple(tuple((j, to_arb(q)) for j, q in row) for row in self._rows)
            self._balls[ctx.prec] = rows
        return rows

    def embed(self, theta: Any) -> np.ndarray:
        r"""$W=M\theta$, $W_i=\sum_jM_{ij}\theta_j$, as a flat object array of ``p`` entries, for ``theta`` holding
        ``p`` numbers of one kind: exact rationals (ints, ``Fraction``, float64 values taken exactly) give exact
        rationals; :mod:`attsvm.prove.interval` intervals and jets multiply by the ``Fraction`` entries (their exact
        constructors: exact for dyadic entries, else rounded outward); anything else (arb balls, the jets of
        :mod:`attsvm.ball.jet`) by the entries as balls (:func:`attsvm.ball.numbers.to_arb`). Only $+$ and $\times$
        by constants: every enclosure of $\theta$ gives one of $W$, and jets in $\theta$ give jets of $W$ whose
        gradients are with respect to $\theta$ ($\partial W_i/\partial\theta_j=M_{ij}$, the chain rule)."""
        t = np.asarray(theta, dtype=object).ravel()
        if t.size != self.p:
            raise InputError(f"a point of {t.size} coordinates for a frame of p = {self.p}")
        first = t[0]
        if isinstance(first, (Fraction, int, float, np.integer, np.floating)) and not isinstance(first, bool):
            vals = list(vector(t, "theta"))
            rows: Any = self._rows
        else:
            vals = list(t)
            rows = self._rows if _is_interval(first) else self._ball_rows()
        out = np.empty(self.p, dtype=object)
        for i, row in enumerate(rows):
            acc = None
            for j, q in row:
                term = vals[j] * q
                acc = term if acc is None else acc + term
            out[i] = acc
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frame) and self.axis == other.axis

    def __hash__(self) -> int:
        return hash(self.axis)

    def __repr__(self) -> str:
        return f"Frame(p={self.p}, order={self.order})"
