r"""Hypothesis strategies for data sets, valid by construction (no ``filter``/``assume`` anywhere).

A claim's ``hypotheses["data"]`` names an entry of :data:`STRATEGIES`; the other keys are its parameters
(sizes as an int or an inclusive ``(lo, hi)`` range, options, and ``relations`` between sizes), validated by
:func:`plan` against the strategy's schema (:func:`schema`): an unknown key, a value outside its range or of
the wrong type, an empty range or a relation that leaves no size is an :class:`~attsvm.errors.InputError`;
nothing is clamped. Every strategy draws the sizes first (in the order $n,T,d,K$, each within the bounds its
relations give; shrinking towards the smallest), then every number through its *source*: Hypothesis draws
(:class:`_HypSource`, everything shrinks) or a numpy generator (:class:`_RngSource`, :func:`batch`, one
leading axis ``B``). No strategy draws a seed.

**Distinct tokens.** Inside one input no token repeats, in every strategy, unless the hypotheses say
``repeats=True`` (``dyadic``, ``equal_scores``, ``feasible``, ``infeasible``, ``(not_)locally_optimal``); the one
exception is ``infeasible`` at $T=2$, whose point is a duplicate of the selected token. A repeated token would
make many conjectures vacuously true (before this rule about half of the ``dyadic`` and ``feasible`` draws had
one).

==================== ======================================================= ================================
name                 what it promises                                        numbers, and how they shrink
==================== ======================================================= ================================
``paper``            THEORY §4's law: $v,x_{it},z_i\sim\mathcal N(0,I)$       Gaussians $\sqrt2\,\mathrm{erf}^{-1}
                     normalised, $Y_i=\pm1$ fair; the scores                  (k/256)$ of shrinkable integers
                     $v^\top x_{it}$ of an input pairwise $\ge2^{-24}$ apart  $|k|\le255$ (towards 0 and coarse
                     (distinct tokens, unique opt for either label)           values): the data shrink towards a
                                                                              canonical configuration (below)
``dyadic``           adversarial dyadic entries $k/2^{\mathrm{bits}}$ (exact  integers $k$, towards 0
                     in binary), nonzero queries, unique opt, distinct
                     tokens
``equal_scores``     Assumption B bit-exact ($v=e_1$), Att-SVM(opt)           dyadic first coordinates, floats
                     feasible, distinct tokens                                 in $[-1,1]$, towards 0
``overparam``        ``paper`` with $d=\max(T-1,n,2)+d_{\mathrm{extra}}$ and  as ``paper``
                     general position: each input's tokens affinely
                     independent, the queries linearly independent
                     ($\sigma_{\min}\ge2^{-24}$)
``feasible``         Att-SVM($\alpha$) feasible, $\alpha$ = opt (strictly, score floats in $[-1,1]$, towards 0
                     gaps $\ge1$) or random; ``ds.alpha`` set; distinct
``locally_optimal``  $\alpha\ne\mathrm{opt}$ locally optimal,                 dyadic, towards 0
                     $W^{mm}_\alpha=e_1e_d^\top$ known; ``ds.alpha``;
                     distinct
``not_locally_optimal`` feasible $\alpha$ with support tokens scoring above   dyadic, towards 0
                     $\alpha$; ``ds.alpha``; distinct
``infeasible``       Att-SVM($\alpha$) infeasible: a selected token is the    dyadic, towards 0
                     midpoint of two others ($T\ge3$, distinct tokens) or
                     duplicated ($T=2$); ``ds.alpha`` set
``sequence``         ``paper`` tokens, $K$ queries and labels per input       as ``paper``
``causal``           ``paper`` tokens, causal self-attention (unique opt for  as ``paper``
                     every prefix and label)
``prompt``           ``paper`` with one shared query $z$ (prompt attention    as ``paper``
                     $p=Wz$)
``self_attention``   ``paper`` with $z_i=x_{i0}$                              as ``paper``
``benign``           benign overfitting (2410.07746, :mod:`attsvm.benign`):   uniform floats (labels, flips),
                     signal token $\rho e_0$ / $\rho e_1$ by the clean label,   Gaussians (noise) as ``paper``
                     $T-1$ Gaussian noise tokens orthogonal to it, labels
                     flipped w.p. ``eta``, $\rho=\kappa\sqrt{d/n}$ (``kappa``);
                     ``ds.alpha`` the benign selection ($d\ge3$)
``icl``              in-context classification (2410.01774,                 Gaussians (means, noise),
                     :class:`~attsvm.icl.ICLData`): $n$ tasks, context $N$,    uniform floats (labels, flips)
                     $x=y\mu_\tau+z$, $\|\mu_\tau\|=R$ (``R``), labels flipped
                     w.p. ``p_flip``; $\hat\mu_\tau\ne0$ by construction
``twolayer``         two-layer attention (:mod:`attsvm.twolayer`): a marked   dyadic decoys and noise, the key
                     key $e_1+e_{2+k}$, the label $Y_ie_0$ on its successor,  position and labels as integers,
                     decoys ``decoy``$\cdot c\,e_0$, one-hot positions,       towards 0
                     $z_i=e_1$, $v=e_0$, $d=2+T+d_{\mathrm{extra}}$; raw opt
                     the successor (unique), distinct tokens
``gmc``              Gaussian Match-and-Copy (:mod:`attsvm.gmc`): tokens      Gaussians as ``paper``, the match
                     $\mathcal N(0,I_d/d)$, match index $t_0\le T-2$, query   index as an integer
                     $e_{t_0}+\sigma\xi$; ``ds.alpha`` $=t_0+1$ (the copy)
``ntp``              next-token data (:class:`~attsvm.ntp.data.NTPData`):     dyadic embeddings, ids and label
                     $T$ distinct ids per sequence, embeddings pairwise       positions as integers, towards 0
                     distinct, the label in its sequence; ``vocab``           (ids ``0, 1, ...``)
                     (``random``/``ortho``/``equicorr``), ``graph``
                     (``any``/``cyclic``: some SCC of two items/``acyclic``)
==================== ======================================================= ================================

**Next-token data** (``ntp``, sizes drawn in the order $n,T,K,d$ with $K$ the vocabulary size; options
``vocab``, ``graph``, ``rho``, ``bits``, ``query_visible``). The relations the construction needs are added to a
claim's own (:data:`_NTP_RELATIONS`: $K\ge T$, $d\ge K$ for ``ortho``, $d\ge K+1$ for ``equicorr``, $n\ge2$ for
``cyclic``, $T\ge3$ without a visible query). Hypothesis draws the dyadic construction :func:`_ntp_dyadic`
(exact binary numbers, for exact certificates); a numpy batch follows the authors' law,
:func:`attsvm.ntp.generate.ntp`, seeded by one draw of the batch seed.

Plus :func:`relu_head` (a head $V$ with $\|V\|_F=1$, drawn separately) and :func:`batch` — the seeded,
batched numpy counterparts for empirical claims (same names, one leading axis ``B``).

**The paper law, shrinkable** (``paper``, ``overparam``, ``sequence``, ``causal``, ``prompt``,
``self_attention``). Hypothesis draws $v$, then per input $i$ one span: its tokens $X_i$ (one span per token),
its query $z_i$, its label $Y_i$ — so the shrinker can delete an input's span while it lowers $n$, or a token's
span while it lowers $T$ (one input), and every other number stays. Each Gaussian is
$g=\sqrt2\,\mathrm{erf}^{-1}(k/256)$ of an integer $k\in[-255,255]$, which Hypothesis draws uniformly (its
floats would be tiny a fifth of the time, making most rows nearly axis-aligned), so fresh draws follow the
paper's law on a grid ($|g|\le2.9$). Rows are drawn as wide as the largest $d$ the plan allows (up to 32),
last coordinate first: lowering $d$ drops the last coordinate, the one the shrinker simplified first in each row,
and keeps every other number. (Tokens are not padded that way: unused draws cost the search's targeting phase
more than they help the shrinker.) A numpy batch draws from a generator seeded by one draw of the batch seed, in
the order of :mod:`attsvm.generate` — the same numbers as :func:`attsvm.generate.paper_law` (``sequence``,
``causal``) with that seed. Rows are normalised ($\max|\cdot|$ first, so subnormal rows keep their direction); a
zero row becomes its canonical row. *Valid* inputs (scores pairwise $\ge2^{-24}$ apart, and for ``overparam`` the
general position above) are kept as drawn — a paper-law draw fails this with probability below $10^{-6}$ per pair
of tokens, so the numpy path keeps the paper's law; an invalid input becomes $\widehat{X+C}$ if that is valid,
else $C$, with the canonical tokens $C_t=\cos\theta_t\,v+\sin\theta_t\,u$, $\theta_t=\pi t/(T-1)$, $u\perp v$
from a Householder basis of $v$ (for ``overparam`` the $u$ differ between tokens, so $C$ is affinely independent);
$C$ is valid by construction (scores $\cos\theta_t$ strictly decreasing).

**Constructions.** ``dyadic``: after the opt token is raised along $e_j$ ($v_j\ne0$) until it beats the others, a
repeated token moves along $e_d$ by whole steps $2^{-\mathrm{bits}}$ in the direction that lowers its score
(:func:`_distinct`: beyond every token that agrees with it elsewhere). ``feasible``: draw $M$ and set
$W^\star=M+(\|M\|_F+1)I$ (so $\sigma_{\min}(W^\star)\ge1$), unit queries $z_i$, $u_i=W^\star z_i$; repeated tokens
move along $e_d$ by $\frac18$; shift the selected token along $\hat u_i$ (and $\widehat{Y_iv}$ for opt, after
flipping $z_i$ so that $u_i^\top Y_iv\ge0$) until every margin $(x_{i\alpha_i}-x_{it})^\top W^\star z_i\ge1$ (and
every score gap $\ge1$), which also sets it apart from every other token. ``equal_scores``: repeated tokens move
along $e_d$ (the first coordinate, the scores, stays bit-exact). ``locally_optimal``: with $a=e_1$, $b=e_d$,
queries $z_i=Y_ib+w_i$ ($w_i\perp b$, $\sum_iY_iw_i=0$), support tokens $x_{i\alpha_i}-Y_ia+q_t$ with
$q_t=(r_t-\frac{k_i-1}2)h\,e_2$ ($r_t$ the support token's rank, $k_i$ their number: distinct, $\sum_tq_t=0$),
other tokens $x_{i\alpha_i}-Y_ip_ta+q_t$ ($p_t\ge1+2g$ raised by whole steps until the $(p_t,q_t)$ differ,
$q_t\perp a$): the KKT conditions hold for $W=ab^\top$ with $\lambda_{it}=1/(nk_i)$, so
$W^{mm}_\alpha=ab^\top$; the dyadic $h\le|v_1|/(|v_2|T)$ keeps every support token scoring between $\frac12v_1$
and $\frac32v_1$ below $\alpha$, and a far token $q=\kappa e_2$ scores $g$ above it. ``not_locally_optimal``
flips $v_1<0$. ``infeasible``: input $i^\star$'s tokens $x_{a}\pm\delta$ around the selected $x_a$ ($\delta\ne0$),
or $x_a$ twice for $T=2$; every other repeated token moves along $e_d$.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .data import Dataset
from .errors import InputError
from .ntp.generate import GRAPHS as NTP_GRAPHS
from .ntp.generate import VOCABS as NTP_VOCABS

# ---------------------------------------------------------------------- number sources
# A construction is written once against a "source" of numbers: Hypothesis draws (shrinkable) or a
# numpy generator (batched, for empirical claims). Shapes include the leading batch axes.


@functools.lru_cache(maxsize=4096)
def _array_strategy(kind: str, shape: tuple[int, ...], lo: float, hi: float):
    """Cached Hypothesis array strategies (building and validating them anew costs more than drawing).

    ``f``/``i``: floats/ints with Hypothesis' default sparse fill (repeated entries are common); ``k``: ints
    drawn one entry at a time (dense: each entry shrinks on its own)."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    if kind == "f":
        el = st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=64)
        return hnp.arrays(np.float64, shape, elements=el)
    if kind == "k":
        return hnp.arrays(np.int64, shape, elements=st.integers(int(lo), int(hi)), fill=st.nothing())
    return hnp.arrays(np.int64, shape, elements=st.integers(int(lo), int(hi)))


@functools.lru_cache(maxsize=1)
def _block_strategy():
    from hypothesis import strategies as st

    @st.composite
    def block(draw, fn, pad):
        return fn(_HypSource(draw, pad))

    return block


class _HypSource:
    """Numbers drawn through Hypothesis (every number shrinks: towards 0, ints towards ``lo``).

    ``pad``: ``(d, width)`` — Gaussian rows of length ``d`` are drawn ``width`` entries wide and the first ``d``
    kept (entry $k$ is the $(w-1-k)$-th drawn): lowering $d$ then drops the last coordinate, the one the shrinker
    simplified first in each row, and keeps every other number in place."""

    def __init__(self, draw: Callable[[Any], Any], pad: tuple[int, int] | None = None):
        self.draw = draw
        self.pad = pad

    def floats(self, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return np.array(self.draw(_array_strategy("f", tuple(shape), lo, hi)), dtype=np.float64)

    def ints(self, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        if tuple(shape) == ():
            from hypothesis import strategies as st

            return np.array(self.draw(st.integers(int(lo), int(hi))), dtype=np.int64)
        return np.array(self.draw(_array_strategy("i", tuple(shape), lo, hi)), dtype=np.int64)

    def gaussians(self, shape: tuple[int, ...]) -> np.ndarray:
        r"""Standard normal entries $g=\sqrt2\,\mathrm{erf}^{-1}(k/256)$ of integers $k\in[-255,255]$: Hypothesis
        draws integers that small uniformly, so a fresh $g$ follows $\mathcal N(0,1)$ on a grid ($|g|\le2.9$; its
        floats in $(-1,1)$ are tiny a fifth of the time). $g$ shrinks with $k$, towards 0 and coarse values
        ($k=128$: $g=0.674\ldots$). Each row (last axis) is one draw, last coordinate first (entry $j$ of a row
        drawn $w$ wide is the $(w-1-j)$-th): the shrinker, which simplifies earlier draws first, empties the last
        coordinate first, and lowering $d$ then drops it without moving any other number."""
        from scipy.special import erfinv

        shape = tuple(shape)
        m = shape[-1]
        d, width = self.pad or (m, m)
        w = width if d == m else m
        row = _array_strategy("k", (w,), -255, 255)
        rows = []
        for _ in range(math.prod(shape[:-1])):
            k = np.asarray(self.draw(row), dtype=np.float64)
            rows.append((k / 256.0)[::-1][:m])
        u = np.array(rows, dtype=np.float64).reshape(shape)
        return np.sqrt(2.0) * erfinv(u)

    def block(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(source)`` as one Hypothesis span (one input's draws), so the shrinker can delete it while it lowers
        $n$."""
        return self.draw(_block_strategy()(fn, self.pad))

    def ntp(self, lead, n: int, T: int, K: int, d: int, **options: Any):
        """Next-token data drawn through Hypothesis: the dyadic construction :func:`_ntp_dyadic`."""
        return _ntp_dyadic(self, n, T, K, d, **options)

    def paper_draws(self, lead, n: int, T: int, d: int, queries: str, K: int = 1):
        """Raw paper-law draws ``(v, X, Z, Y, shared)`` (see :func:`_paper_law`) in the order $v$, the shared query
        (``prompt``), then per input $i$ one span: its tokens $X_i$, its query $z_i$ ($K$ of them for ``sequence``;
        none for ``self``, ``causal``, ``prompt``) and its label(s) $Y_i$ — so that deleting an input's span while
        lowering $n$ keeps every other number."""
        zshape = {"cross": (), "sequence": (K,)}.get(queries)
        yshape = {"sequence": (K,), "causal": (T,)}.get(queries, ())
        v = self.gaussians((*lead, d))
        shared = self.gaussians((*lead, d)) if queries == "prompt" else None
        G = np.empty((*lead, n, T, d))
        Z = None if zshape is None else np.empty((*lead, n, *zshape, d))
        Y = np.empty((*lead, n, *yshape))

        def one_input(s):
            x = s.gaussians((*lead, T, d))  # one row per token: lowering T can delete any token's row
            z = None if zshape is None else s.gaussians((*lead, *zshape, d))
            return x, z, _signs(s, (*lead, *yshape))

        at = lambda i, m: (Ellipsis, i, *[slice(None)] * m)  # noqa: E731 - input i of an array with m trailing axes
        for i in range(n):
            G[at(i, 2)], z, Y[at(i, len(yshape))] = self.block(one_input)
            if Z is not None:
                Z[at(i, len(zshape) + 1)] = z
        return v, G, Z, Y, shared


class _RngSource:
    """Numbers from a numpy generator (the batched path :func:`batch`)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def floats(self, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return self.rng.uniform(lo, hi, size=shape)

    def ints(self, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        return self.rng.integers(lo, hi + 1, size=shape).astype(np.int64)

    def gaussians(self, shape: tuple[int, ...]) -> np.ndarray:
        r"""$\mathcal N(0,1)$ entries (``rng.standard_normal``)."""
        return self.rng.standard_normal(shape)

    def paper_draws(self, lead, n: int, T: int, d: int, queries: str, K: int = 1):
        r"""Raw paper-law draws ``(v, X, Z, Y, shared)`` from a generator seeded by one draw of ``rng``, in the
        order of :mod:`attsvm.generate` ($v$, $X$, then $Y$ and $Z$ as :func:`~attsvm.generate.paper_law`,
        :func:`~attsvm.generate.sequence`, :func:`~attsvm.generate.causal` draw them): a batch has the same
        numbers as those generators with that seed."""
        r = np.random.default_rng(int(self.rng.integers(0, 2**32 - 1)))
        v = r.standard_normal((*lead, d))
        X = r.standard_normal((*lead, n, T, d))
        if queries == "sequence":
            Z = r.standard_normal((*lead, n, K, d))
            return v, X, Z, r.choice([-1.0, 1.0], size=(*lead, n, K)), None
        if queries == "causal":
            return v, X, None, r.choice([-1.0, 1.0], size=(*lead, n, T)), None
        Y = r.choice([-1.0, 1.0], size=(*lead, n))
        if queries == "self":
            return v, X, None, Y, None
        Z = r.standard_normal((*lead, n, d))
        return (v, X, None, Y, Z[..., 0, :]) if queries == "prompt" else (v, X, Z, Y, None)

    def block(self, fn: Callable[[Any], Any]) -> Any:
        return fn(self)

    def ntp(self, lead, n: int, T: int, K: int, d: int, **options: Any):
        """Next-token data of :func:`attsvm.ntp.generate.ntp` (the authors' law) from a generator seeded by one draw
        of ``rng``: a batch has the same numbers as that generator with that seed."""
        from .ntp.generate import ntp

        options.pop("bits", None)  # the dyadic grid of the Hypothesis construction only
        seed = int(self.rng.integers(0, 2**32 - 1))
        return ntp(n, T, K, d, seed=seed, B=lead[0] if lead else None, **options)


def _signs(src, shape) -> np.ndarray:
    """+-1 labels; shrink towards +1."""
    return 1.0 - 2.0 * src.ints(shape, 0, 1).astype(np.float64)


def _dyadic(src, shape, bits: int, lo: int = -1, hi: int = 1) -> np.ndarray:
    """Entries k/2^bits, k in [lo*2^bits, hi*2^bits]: exact in binary, shrink towards 0."""
    s = 2**bits
    return src.ints(shape, lo * s, hi * s).astype(np.float64) / s


def _unit_rows(a: np.ndarray) -> np.ndarray:
    """Normalise the last axis; a zero row becomes e_1 (by construction, never 0/0)."""
    e1 = np.zeros(a.shape[-1])
    e1[0] = 1.0
    return _normalise(a, e1)


def _normalise(a: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    r"""$a/\|a\|$ along the last axis (scaled by $\max|a_k|$ first, so subnormal rows keep their direction); a zero
    row becomes the matching row of ``fallback`` (broadcast against ``a``)."""
    m = np.max(np.abs(a), axis=-1, keepdims=True)
    ok = m > 0
    b = a / np.where(ok, m, 1.0)
    nrm = np.linalg.norm(b, axis=-1, keepdims=True)
    scaled = b / np.where(ok, nrm, 1.0)
    direct = np.linalg.norm(a, axis=-1, keepdims=True)  # a/||a|| as attsvm.generate where ||a|| is a normal float
    plain = (direct > 1e-150) & np.isfinite(direct)
    return np.where(plain, a / np.where(plain, direct, 1.0), np.where(ok, scaled, fallback))


def _take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """a (..., n, T, d), idx (..., n) -> a[..., i, idx_i, :] (..., n, d)."""
    return np.take_along_axis(a, idx[..., None, None], axis=-2)[..., 0, :]


def _put(a: np.ndarray, idx: np.ndarray, val: np.ndarray) -> None:
    np.put_along_axis(a, idx[..., None, None], val[..., None, :], axis=-2)


def _distinct(
    X: np.ndarray, coord: int, step: float, frozen: np.ndarray | None = None, sign: np.ndarray | None = None
) -> np.ndarray:
    r"""The rows of ``X`` (..., T, m) made pairwise distinct along axis -2 by moving coordinate ``coord``.

    A row equal to an earlier row (or to any ``frozen`` row, which never moves) gets $c_t=\max_{u\in G_t}c_u+
    \mathrm{step}\,(1+r_t)$, $G_t$ the rows that agree with it in every other coordinate, $r_t$ the number of
    moved rows of $G_t$ before it. Other rows are unchanged (a generic draw is returned as it is); moved rows
    exceed everything in their group, and rows of different groups differ elsewhere, so all rows are distinct
    (``frozen`` rows must be distinct among themselves for that). ``sign`` (..., ) $=\pm1$ per block: move
    towards $\mathrm{sign}\cdot\infty$ instead (the same rule on $\mathrm{sign}\cdot c$). Exact for dyadic
    entries and ``step``."""
    if sign is not None:
        flip = np.ones(X.shape[-1])
        flip[coord] = 0.0
        s = flip + (1.0 - flip) * np.asarray(sign)[..., None, None]
        return _distinct(X * s, coord, step, frozen) * s
    T = X.shape[-2]
    rest = np.delete(X, coord, axis=-1)
    same = np.all(rest[..., :, None, :] == rest[..., None, :, :], axis=-1)  # (..., T, T): same group
    col = X[..., coord]
    equal = same & (col[..., :, None] == col[..., None, :])
    earlier = np.tri(T, k=-1, dtype=bool)  # [t, u]: u < t
    frozen = np.zeros(X.shape[:-1], dtype=bool) if frozen is None else np.broadcast_to(frozen, X.shape[:-1])
    before = earlier | (frozen[..., None, :] & ~np.eye(T, dtype=bool))
    moved = ~frozen & np.any(equal & before, axis=-1)
    top = np.max(np.where(same, col[..., None, :], -np.inf), axis=-1)
    rank = np.sum(same & earlier & moved[..., None, :], axis=-1)
    out = X.copy()
    out[..., coord] = np.where(moved, top + step * (1.0 + rank), col)
    return out


# ---------------------------------------------------------------------- the paper law, repaired by construction
# Raw Gaussian draws are kept when they are valid; otherwise an input is mixed with (or replaced by) a canonical
# valid configuration. Valid: the scores v^T x_it of one input pairwise at least _GAP apart (so tokens are
# distinct and every optimal token is unique, for either label and every causal prefix) and, where general
# position is promised, the tokens affinely independent and the queries linearly independent (smallest singular
# value >= _GAP). A paper-law draw is invalid with probability ~1e-7: the numpy path keeps the paper's law.
_GAP = 2.0**-24


def _basis(v: np.ndarray) -> np.ndarray:
    r"""An orthonormal basis (..., d, d) (columns) whose first column is the unit vector $v$ (a Householder
    reflection $H=I-2ww^\top/\|w\|^2$, $w=v\pm e_1$ with the sign of $v_1$: no cancellation, $He_1=\mp v$)."""
    d = v.shape[-1]
    e1 = np.zeros(d)
    e1[0] = 1.0
    pos = v[..., :1] >= 0
    w = np.where(pos, v + e1, e1 - v)
    H = np.eye(d) - 2.0 * w[..., :, None] * w[..., None, :] / np.sum(w * w, -1)[..., None, None]
    H[..., :, 0] = v
    return H


def _canonical_tokens(v: np.ndarray, T: int, generic: bool = False) -> np.ndarray:
    r"""$C_t=\cos\theta_t\,v+\sin\theta_t\,u_{k(t)}$, $\theta_t=\pi t/(T-1)$, $u_k$ the $k$-th basis vector
    $\perp v$ of :func:`_basis` (..., T, d), needs $d\ge2$: $k(t)=1$ (a half circle in the plane of $v,u_1$), or
    with ``generic`` $k(t)=1+((t-1)\bmod(d-1))$. Scores $v^\top C_t=\cos\theta_t$ strictly decrease (gaps
    $\ge1-\cos\frac\pi{T-1}$); with ``generic`` and $T\le d+1$ the $u_{k(t)}$, $0<t<T-1$, are distinct and
    $C_0=v$, $C_{T-1}=-v$, so the tokens are affinely independent."""
    d = v.shape[-1]
    t = np.arange(T)
    theta = np.pi * t / (T - 1)
    k = 1 + (t - 1) % (d - 1) if generic else np.ones(T, dtype=np.int64)
    U = np.swapaxes(_basis(v)[..., :, k], -1, -2)  # (..., T, d)
    C = np.cos(theta)[:, None] * v[..., None, :] + np.sin(theta)[:, None] * U
    return _normalise(C, v[..., None, :])


def _score_gap(X: np.ndarray, v: np.ndarray) -> np.ndarray:
    r"""$\min_{t\ne\tau}|v^\top x_{it}-v^\top x_{i\tau}|$ per input (..., n)."""
    c = np.sort(np.einsum("...ntd,...d->...nt", X, v), -1)
    return np.min(np.diff(c, axis=-1), axis=-1)


def _sigma_min(A: np.ndarray) -> np.ndarray:
    """Smallest singular value of the stacked matrices A (..., r, c), r <= c."""
    return np.linalg.svd(A, compute_uv=False)[..., -1]


def _first_valid(raw: np.ndarray, canon: np.ndarray, valid: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    r"""Per block (the axes of ``valid``'s result): the first valid of $R$, $\widehat{R+C}$ (rows normalised),
    $C$ — the canonical configuration $C$, valid by construction, is the last resort."""
    extra = raw.ndim - valid(canon).ndim  # trailing axes of one block
    out, done = canon, np.zeros(valid(canon).shape, dtype=bool)
    for cand in (raw, _normalise(raw + canon, canon)):
        ok = valid(cand) & ~done
        out = np.where(ok.reshape(ok.shape + (1,) * extra), cand, out)
        done |= ok
    return out


def _paper_law(src, lead, n, T, d, queries: str = "cross", K: int = 1, generic: bool = False) -> Dataset:
    r"""THEORY §4's law: $v,x_{it},z_i\sim\mathcal N(0,I)$ normalised, $Y_i=\pm1$ fair (``queries``: ``cross`` $z_i$,
    ``sequence`` $K$ queries and labels per input, ``prompt`` one shared query, ``self`` $z_i=x_{i0}$, ``causal``
    a label per token), the raw Gaussians from ``src.paper_draws``. Repaired per input (:func:`_first_valid`):
    distinct scores, and with ``generic`` also affinely independent tokens and linearly independent queries
    ($d\ge\max(T-1,n)$). A zero row normalises to its canonical row."""
    if d < 2:
        raise InputError("paper-law strategies need d >= 2")
    vg, G, Zg, Y, shared = src.paper_draws(lead, n, T, d, queries, K)
    v = _normalise(vg, np.eye(d)[0])
    C = np.broadcast_to(_canonical_tokens(v, T, generic)[..., None, :, :], G.shape)

    def valid(X: np.ndarray) -> np.ndarray:
        ok = _score_gap(X, v) >= _GAP
        if generic:
            ok &= _sigma_min(X[..., 1:, :] - X[..., :1, :]) >= _GAP
        return ok

    X = _first_valid(_normalise(G, C), C, valid)
    if queries == "self":
        return Dataset(X, Y, None, v, kind="self", query_index=0)
    if queries == "causal":
        return Dataset(X, Y, None, v, kind="causal")
    if queries == "prompt":
        z = _normalise(shared, np.eye(d)[0])
        return Dataset(X, Y, np.broadcast_to(z[..., None, :], (*lead, n, d)).copy(), v)
    if queries == "sequence":  # a zero query z_ik normalises to e_{(i+k) mod d}, z_i to e_{i mod d}
        E = np.eye(d)[(np.arange(n)[:, None] + np.arange(K)[None, :]) % d]
    else:
        E = np.eye(d)[np.arange(n) % d]
    Z = _normalise(Zg, E)
    if generic:  # n <= d: E = (e_1, ..., e_n) is linearly independent
        Z = _first_valid(Z, np.broadcast_to(E, Z.shape), lambda Q: _sigma_min(Q) >= _GAP)
    return Dataset(X, Y, Z, v)


# ---------------------------------------------------------------------- constructions (numpy, batched)
def _make_paper(src, lead, n, T, d) -> Dataset:
    return _paper_law(src, lead, n, T, d)


def _make_dyadic(src, lead, n, T, d, bits=3, repeats=False) -> Dataset:
    X = _dyadic(src, (*lead, n, T, d), bits)
    Z = _dyadic(src, (*lead, n, d), bits)
    v = _dyadic(src, (*lead, d), bits)
    Y = _signs(src, (*lead, n))
    # a nonzero head coordinate j, and nonzero queries (a zero query has no constraint at all)
    j = src.ints(lead, 0, d - 1)
    vj = np.take_along_axis(v, j[..., None], -1)[..., 0]
    np.put_along_axis(v, j[..., None], np.where(vj == 0, 1.0, vj)[..., None], -1)
    zero = np.all(Z == 0, axis=-1)
    Z[..., 0] = np.where(zero, 1.0, Z[..., 0])
    # unique opt: raise the drawn opt token along e_j by whole steps until it beats the others
    o = src.ints((*lead, n), 0, T - 1)
    gam = Y[..., None] * np.einsum("...ntd,...d->...nt", X, v)
    go = np.take_along_axis(gam, o[..., None], -1)[..., 0]
    others = np.where(np.arange(T) == o[..., None], -np.inf, gam).max(-1)
    step = np.abs(np.take_along_axis(v, j[..., None], -1))  # (..., 1) = |v_j|
    k = np.where(others >= go, np.floor((others - go) / (step / 2**bits)) + 1, 0.0)
    sgn = Y * np.sign(np.take_along_axis(v, j[..., None], -1))  # (..., n)
    xo = _take(X, o)
    cur = np.take_along_axis(xo, np.broadcast_to(j[..., None, None], (*lead, n, 1)), -1)[..., 0]
    np.put_along_axis(xo, np.broadcast_to(j[..., None, None], (*lead, n, 1)), (cur + sgn * k / 2**bits)[..., None], -1)
    _put(X, o, xo)
    if not repeats:  # distinct tokens: a repeated non-opt token moves along e_d by whole steps, its score down
        down = np.where(Y * v[..., None, d - 1] > 0, -1.0, 1.0)  # (..., n): the direction that lowers the score
        X = _distinct(X, d - 1, 2.0**-bits, frozen=np.arange(T) == o[..., None], sign=down)
    return Dataset(X, Y, Z, v)


def _make_equal_scores(src, lead, n, T, d, bits=3, feasible=True, repeats=False) -> Dataset:
    if d < 2:
        raise InputError("equal_scores needs d >= 2")
    s = 2**bits
    Y = _signs(src, (*lead, n))
    hi = src.ints((*lead, n), 1, s).astype(np.float64) / s  # (0, 1]
    lo = hi - src.ints((*lead, n), 1, s).astype(np.float64) / s  # strictly below hi
    o = src.ints((*lead, n), 0, T - 1)
    first = np.where(np.arange(T) == o[..., None], hi[..., None], lo[..., None])
    rest = src.floats((*lead, n, T, d - 1))
    X = np.concatenate([(Y[..., None] * first)[..., None], rest], axis=-1)
    if not repeats:  # the first coordinate (the scores) stays bit-exact; repeats move along e_d
        X = _distinct(X, d - 1, 1.0 / s)
    v = np.zeros((*lead, d))
    v[..., 0] = 1.0
    Z = src.floats((*lead, n, d))
    if feasible:  # Y_i z_i[0] >= 1/s > 0 makes W = c e_1 e_1^T feasible for opt
        z0 = src.ints((*lead, n), 1, s).astype(np.float64) / s
        Z[..., 0] = Y * z0
    return Dataset(X, Y, Z, v)


def _make_overparam(src, lead, n, T, d_extra=0) -> Dataset:
    return _paper_law(src, lead, n, T, max(T - 1, n, 2) + int(d_extra), generic=True)


def _make_feasible(src, lead, n, T, d, alpha="opt", repeats=False) -> Dataset:
    if alpha not in ("opt", "random"):
        raise InputError(f"feasible: alpha must be 'opt' or 'random', got {alpha!r}")
    X = src.floats((*lead, n, T, d))
    Z = _unit_rows(src.floats((*lead, n, d)))
    v = _unit_rows(src.floats((*lead, d)))
    Y = _signs(src, (*lead, n))
    M = src.floats((*lead, d, d))
    c = np.linalg.norm(M, axis=(-2, -1)) + 1.0
    Wst = M + c[..., None, None] * np.eye(d)  # sigma_min >= 1
    a = src.ints((*lead, n), 0, T - 1)
    if not repeats:  # distinct tokens (the selected one is shifted below to margin >= 1 from all others)
        X = _distinct(X, d - 1, 0.125)
    u = np.einsum("...de,...ne->...nd", Wst, Z)
    e = Y[..., None] * v[..., None, :]  # (..., n, d)
    if alpha == "opt":
        flip = np.sum(u * e, -1) < 0
        Z = np.where(flip[..., None], -Z, Z)
        u = np.where(flip[..., None], -u, u)
    uh = u / np.linalg.norm(u, axis=-1, keepdims=True)
    s = uh + e if alpha == "opt" else uh  # |e| = 1
    xa = _take(X, a)
    others = np.arange(T) != a[..., None]  # (..., n, T)
    diff = X - xa[..., None, :]  # x_t - x_alpha

    def need(direction):
        worst = np.where(others, np.einsum("...ntd,...nd->...nt", diff, direction), -np.inf).max(-1)
        return (1.0 + worst) / np.sum(s * direction, -1)

    cshift = need(u)
    if alpha == "opt":
        cshift = np.maximum(cshift, need(e))
    cshift = np.maximum(cshift, 0.0)
    _put(X, a, xa + cshift[..., None] * s)
    return Dataset(X, Y, Z, v, alpha=a)


def _make_local(src, lead, n, T, d, locally_optimal=True, bits=2, repeats=False) -> Dataset:
    if T < 3 or d < 2:
        raise InputError("locally_optimal/not_locally_optimal need T >= 3 and d >= 2")
    s = 2**bits
    Y = _signs(src, (*lead, n))
    # head: v_1 = +-(k/s), k >= 1 (sign decides local optimality), v_2 != 0
    v = _dyadic(src, (*lead, d), bits)
    v0 = src.ints(lead, 1, s).astype(np.float64) / s
    v[..., 0] = v0 if locally_optimal else -v0
    v1 = v[..., 1]
    v[..., 1] = np.where(v1 == 0, 1.0, v1)
    b = d - 1  # W^mm = e_0 e_b^T
    # queries z_i = Y_i e_b + w_i, w_i perp e_b, sum_i Y_i w_i = 0
    w = _dyadic(src, (*lead, n, d), bits)
    w[..., b] = 0.0
    if n > 1:
        w[..., n - 1, :] = -Y[..., n - 1, None] * np.einsum("...n,...nd->...d", Y[..., : n - 1], w[..., : n - 1, :])
    else:
        w[...] = 0.0
    Z = w.copy()
    Z[..., b] += Y
    # the selected token, the number of support tokens k_i in [1, T-2], far-token offsets p_t and q_t
    xa = _dyadic(src, (*lead, n, d), bits)
    k = src.ints((*lead, n), 1, T - 2)
    g = src.ints(lead, 1, s).astype(np.float64) / s  # half the neighbour gap is >= g
    p = 1.0 + 2.0 * g[..., None, None] + src.ints((*lead, n, T), 0, s).astype(np.float64) / s
    q = _dyadic(src, (*lead, n, T, d), bits)
    q[..., 0] = 0.0
    rank = np.arange(T - 1)
    sup = rank[None] < k[..., None]  # (..., n, T-1): first k_i of the others are support tokens
    e0 = np.zeros(d)
    e0[0] = 1.0
    pp = np.where(sup, 1.0, p[..., : T - 1])
    qq = np.where(sup[..., None], 0.0, q[..., : T - 1, :])
    if not repeats:
        # support tokens apart along e_2: q_t = (r_t - (k_i-1)/2) h e_2 sums to 0 over an input's support (so the
        # KKT point stays e_1 e_d^T), h = 2^floor(log2(|v_1|/(|v_2| T))) keeps |v^T q_t| < |v_1|/2 (dyadic)
        h = np.exp2(np.floor(np.log2(np.abs(v[..., 0]) / (np.abs(v[..., 1]) * T))))
        qq[..., 1] += np.where(sup, rank - (k[..., None] - 1) / 2.0, 0.0) * h[..., None, None]
        # far tokens: distinct (p_t, q_t's coordinates 3..d) by raising p_t (margins only grow; coordinate 2
        # is kappa's, set below)
        key = _distinct(np.concatenate([pp[..., None], qq[..., 2:]], -1), 0, 1.0 / s, frozen=sup)
        pp = key[..., 0]
    if locally_optimal:
        # a designated input's last token: q = kappa e_1 so that it scores g above alpha (alpha != opt)
        i_star = src.ints(lead, 0, n - 1)
        rest = (qq[..., T - 2, 2:] * v[..., None, 2:]).sum(-1)  # the other coordinates
        kappa = (Y * (pp[..., T - 2] * v[..., None, 0] + g[..., None]) - rest) / v[..., None, 1]
        last_q = qq[..., T - 2, :].copy()
        last_q[..., 1] = np.where(np.arange(n) == i_star[..., None], kappa, last_q[..., 1])
        qq[..., T - 2, :] = last_q
    others = xa[..., None, :] - (Y[..., None] * pp)[..., None] * e0 + qq  # (..., n, T-1, d)
    a = src.ints((*lead, n), 0, T - 1)
    # token order: alpha at a_i, the others in order around it
    pos = np.arange(T)
    X = np.empty((*lead, n, T, d))
    src_idx = pos - (pos > a[..., None])  # index into others for positions != a
    X[...] = np.take_along_axis(others, np.clip(src_idx, 0, T - 2)[..., None], axis=-2)
    _put(X, a, xa)
    return Dataset(X, Y, Z, v, alpha=a)


def _make_infeasible(src, lead, n, T, d, bits=3, repeats=False) -> Dataset:
    X = _dyadic(src, (*lead, n, T, d), bits)
    Z = _dyadic(src, (*lead, n, d), bits)
    v = _dyadic(src, (*lead, d), bits)
    Y = _signs(src, (*lead, n))
    i_star = src.ints(lead, 0, n - 1)
    a_star = src.ints(lead, 0, T - 1)
    delta = _dyadic(src, (*lead, d), bits)
    if not repeats and T >= 3:  # a true midpoint: delta != 0
        delta[..., 0] = np.where(np.all(delta == 0, -1), 2.0**-bits, delta[..., 0])
    # input i*: tokens (a*+1) and (a*+2) mod T are x_a +- delta (midpoint); for T = 2 a duplicate
    Xi = np.take_along_axis(X, i_star[..., None, None, None], axis=-3)[..., 0, :, :]  # (..., T, d)
    xa = np.take_along_axis(Xi, a_star[..., None, None], axis=-2)[..., 0, :]
    t1 = (a_star + 1) % T
    np.put_along_axis(Xi, t1[..., None, None], (xa + delta)[..., None, :], axis=-2)
    special = (np.arange(T) == a_star[..., None]) | (np.arange(T) == t1[..., None])
    if T >= 3:
        t2 = (a_star + 2) % T
        np.put_along_axis(Xi, t2[..., None, None], (xa - delta)[..., None, :], axis=-2)
        special |= np.arange(T) == t2[..., None]
    else:
        np.put_along_axis(Xi, t1[..., None, None], xa[..., None, :], axis=-2)
    np.put_along_axis(X, i_star[..., None, None, None], Xi[..., None, :, :], axis=-3)
    if not repeats:  # every other token distinct (the construction's own tokens stay put)
        frozen = (np.arange(n) == i_star[..., None])[..., None] & special[..., None, :]
        X = _distinct(X, d - 1, 2.0**-bits, frozen=frozen)
    gam = Y[..., None] * np.einsum("...ntd,...d->...nt", X, v)
    a = np.argmax(gam, -1)
    a = np.where(np.arange(n) == i_star[..., None], a_star[..., None], a)
    return Dataset(X, Y, Z, v, alpha=a)


def _make_sequence(src, lead, n, T, d, K=2) -> Dataset:
    return _paper_law(src, lead, n, T, d, queries="sequence", K=K)


def _make_causal(src, lead, n, T, d) -> Dataset:
    return _paper_law(src, lead, n, T, d, queries="causal")


def _make_prompt(src, lead, n, T, d) -> Dataset:
    return _paper_law(src, lead, n, T, d, queries="prompt")


def _make_self(src, lead, n, T, d) -> Dataset:
    return _paper_law(src, lead, n, T, d, queries="self")


def _lehmer(src, m: int, K: int) -> np.ndarray:
    r"""``m`` distinct ids of ``[0, K)``: the $j_t$-th id not yet taken, $j_t\in[0,K-1-t]$ drawn one by one (shrinks
    towards ``0, 1, ..., m-1``)."""
    free = list(range(K))
    return np.array([free.pop(int(src.ints((), 0, K - 1 - t))) for t in range(m)], dtype=np.int64)


def _ntp_dyadic(src, n, T, K, d, vocab="random", graph="any", rho=0.5, bits=3, query_visible=True) -> Any:
    r"""Next-token data through Hypothesis draws (valid by construction, shrinking towards small ids and zeros).

    Vocabulary: ``random`` dyadic entries $k/2^{\mathrm{bits}}\in[-1,1]$, equal rows made distinct along the last
    coordinate (:func:`_distinct`); ``ortho`` signed basis vectors $\pm e_{p_k}$ (distinct $p_k$); ``equicorr``
    $\sqrt\rho\,c_0+\sqrt{1-\rho}\,c_k$ with signed basis vectors $c_k$ (every inner product bit-equal). Each
    sequence (one span) holds $T$ distinct ids (:func:`_lehmer`) and a label: ``any`` at a drawn visible position;
    ``acyclic`` the visible token of least key $(P_{qk},k)$ for a drawn key matrix $P$ (so every edge descends the
    order of its query); ``cyclic`` as ``any``, then sequence 1 rearranged by
    :func:`attsvm.ntp.generate.plant_cycle` around sequence 0's label $y$ and a drawn token $b$ of it, with label
    $b$."""
    from .ntp.data import NTPData
    from .ntp.generate import plant_cycle

    tv = T if query_visible else T - 1
    if vocab == "random":
        E = _distinct(_dyadic(src, (K, d), bits), d - 1, 2.0**-bits)
    else:
        m = K + (vocab == "equicorr")
        C = np.zeros((m, d))
        C[np.arange(m), _lehmer(src, m, d)] = _signs(src, (m,))
        E = C if vocab == "ortho" else np.sqrt(rho) * C[0] + np.sqrt(1.0 - rho) * C[1:]
    P = src.ints((K, K), 0, K - 1) if graph == "acyclic" else None

    def one_sequence(s):
        return _lehmer(s, T, K), int(s.ints((), 0, tv - 1)) if graph != "acyclic" else 0

    tokens = np.empty((n, T), dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    for i in range(n):
        tokens[i], pos = src.block(one_sequence)
        if P is not None:
            vis = tokens[i, :tv]
            labels[i] = vis[np.argmin(P[tokens[i, -1], vis] * K + vis)]
        else:
            labels[i] = tokens[i, pos]
    if graph == "cyclic":
        y = int(labels[0])
        others = [int(x) for x in tokens[0, :tv] if x != y]
        b = others[int(src.ints((), 0, len(others) - 1))]
        pick = lambda m: int(src.ints((), 0, m - 1))  # noqa: E731
        tokens[1] = plant_cycle(tokens[1], int(tokens[0, -1]), y, b, query_visible, pick)
        labels[1] = b
    return NTPData(E, tokens, labels, query_visible)


def _make_ntp(src, lead, n, T, K, d, **options) -> Any:
    return src.ntp(lead, n, T, K, d, **options)


# (relation, (option, value) that calls for it, or None: always)
_NTP_RELATIONS = (
    ("K >= T", None),  # T distinct ids
    ("d >= K", ("vocab", "ortho")),  # K orthonormal embeddings
    ("d >= K + 1", ("vocab", "equicorr")),  # K + 1 orthonormal directions
    ("n >= 2", ("graph", "cyclic")),  # two sequences for the planted cycle
    ("T >= 3", ("query_visible", False)),  # a label and another token besides the invisible query
)


def _ntp_relations(options: dict[str, Any]) -> tuple[str, ...]:
    """The size relations every ``ntp`` draw with these options needs (:data:`_NTP_RELATIONS`)."""
    return tuple(r for r, when in _NTP_RELATIONS if when is None or options.get(when[0]) == when[1])


# ---------------------------------------------------------------------- the hypothesis schema
@dataclass(frozen=True)
class Size:
    """A size parameter: an int or an inclusive ``(lo, hi)`` range within ``[floor, cap]``."""

    default: tuple[int, int]
    floor: int
    cap: int = 1000


@dataclass(frozen=True)
class Option:
    """A non-size parameter: its type and either the allowed ``choices`` or an inclusive ``[lo, hi]``."""

    type: type
    choices: tuple[Any, ...] | None = None
    lo: float | None = None
    hi: float | None = None

    def check(self, name: str, key: str, val: Any) -> None:
        ok = (
            isinstance(val, self.type)
            and not (self.type is int and isinstance(val, bool))
            and (self.choices is None or val in self.choices)
            and (self.lo is None or val >= self.lo)
            and (self.hi is None or val <= self.hi)
        )
        if not ok:
            raise InputError(f"strategy {name}: {key} must be {self.describe()}, got {val!r}")

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        rng = f" in [{self.lo:g}, {self.hi:g}]" if self.lo is not None else ""
        return f"{'an int' if self.type is int else 'a ' + self.type.__name__}{rng}"


def _sizes(**floors: int) -> dict[str, Size]:
    """The sizes n, T, d (draw order) with the given floors raised (defaults raised with them)."""
    base = {"n": Size((1, 4), 1, 10_000), "T": Size((2, 5), 2), "d": Size((1, 4), 1)}
    out = {}
    for k, sz in base.items():
        f = max(sz.floor, floors.get(k, sz.floor))
        out[k] = Size((max(sz.default[0], f), max(sz.default[1], f)), f, sz.cap)
    return out


# ---------------------------------------------------------------------- benign overfitting (2410.07746)
def _make_benign(src, lead, n, T, d, kappa=2.0, eta=0.1) -> Dataset:
    r"""The law of :mod:`attsvm.benign`: clean labels (fair coin), flips (uniform $<\eta$), standard Gaussian noise
    tokens on coordinates $2..d-1$, signal norm $\rho=\kappa\sqrt{d/n}$ (``kappa`` $=\mathrm{SNR}\sqrt n$)."""
    from . import benign

    clean = np.where(src.floats((*lead, n), 0.0, 1.0) < 0.5, 1.0, -1.0)
    flip = src.floats((*lead, n), 0.0, 1.0) < eta
    noise = np.array(src.gaussians((*lead, n, T - 1, d - 2)))
    m = d - 2
    for t in range(1, T - 1):  # a noise token repeating an earlier one of its input (Hypothesis' grid: zeros) is
        canon = np.zeros(m)  # replaced by (t + 1/2) sqrt(2) e_(t mod m), off the grid; numpy draws never repeat
        canon[t % m] = (t + 0.5) * np.sqrt(2.0)
        rep = np.zeros(noise.shape[:-2], dtype=bool)
        for u in range(t):
            rep |= np.all(noise[..., t, :] == noise[..., u, :], axis=-1)
        noise[..., t, :] = np.where(rep[..., None], canon, noise[..., t, :])
    return benign.build(clean, flip, noise, benign.rho_of(kappa, n, d))


_BENIGN_OPTIONS = {"kappa": Option(float, lo=1e-3, hi=1e3), "eta": Option(float, lo=0.0, hi=0.49)}
# ---------------------------------------------------------------------- end benign overfitting


# ---------------------------------------------------------------------- in-context classification (icl)
# One separated block (Frei & Vardi, arXiv 2410.01774; :mod:`attsvm.icl`): sizes n (the tasks B), N (the context
# length), d; options R (the radius of the task means) and p_flip (the label-flip rate). Both sources draw the same
# law through one construction: mean directions (a zero draw becomes e_1), fair labels, Gaussian noise, flips.
def _make_icl(src, lead, n: int, N: int, d: int, R: float = 1.0, p_flip: float = 0.0) -> Any:
    r"""In-context classification data (:class:`attsvm.icl.ICLData`) of the law of :mod:`attsvm.icl`:
    $\mu_\tau=R\,\hat g_\tau$, $x_{\tau i}=y_{\tau i}\mu_\tau+z_{\tau i}$, then each label flipped when a uniform draw
    is below ``p_flip``; valid by construction (labels $\pm1$, finite entries, $\hat\mu_\tau\ne0$: a task whose
    $\hat\mu_\tau$ is exactly 0 takes its noise-free, unflipped inputs $x_{\tau i}=y_{\tau i}\mu_\tau$, so
    $\hat\mu_\tau=\mu_\tau$ and the two tokens of the attention encoding differ)."""
    from .icl import ICLData

    mu = R * _unit_rows(src.gaussians((*lead, n, d)))
    y = _signs(src, (*lead, n, N + 1))
    x = y[..., None] * mu[..., None, :] + src.gaussians((*lead, n, N + 1, d))
    clean = y
    if p_flip > 0:
        y = np.where(src.floats((*lead, n, N + 1), 0.0, 1.0) < p_flip, -y, y)
    zero = ~np.any(np.einsum("...n,...nd->...d", y[..., :N], x[..., :N, :]) != 0, axis=-1)
    if np.any(zero):  # a context with mu_hat = 0 exactly (the two tokens would coincide): its noise-free, clean form
        x = np.where(zero[..., None, None], clean[..., None] * mu[..., None, :], x)
        y = np.where(zero[..., None], clean, y)
    return ICLData(x[..., :N, :], y[..., :N], x[..., N, :], y[..., N], R, p_flip)


# ---------------------------------------------------------------------- two-layer attention (issue 30)
def _make_twolayer(src, lead, n: int, T: int, d_extra: int = 0, decoy: float = 0.5, bits: int = 2) -> Dataset:
    r"""Key-and-successor data for two-layer attention (:mod:`attsvm.twolayer`), where the layer-1 selection matters.

    Coordinates: $e_0$ the signal (the head $v=e_0$), $e_1$ the key marker (the layer-2 query $z_i=e_1$), $e_{2+t}$
    the position $t$ (one-hot), then ``d_extra`` noise coordinates ($d=2+T+d_{extra}$). Input $i$ draws a key
    position $k_i\in[0,T-2]$ and a label $Y_i$; the key token is $x_{ik_i}=e_1+e_{2+k_i}+\text{noise}$, its
    successor carries the label, $x_{i,k_i+1}=Y_ie_0+e_{2+k_i+1}+\text{noise}$, every other token is a decoy
    $x_{it}=\text{decoy}\cdot c_{it}e_0+e_{2+t}+\text{noise}$ with dyadic $c_{it}\in[-1,1]$ (``bits``), noise entries
    dyadic in $[-\frac14,\frac14]$. So the raw optimal token is the successor (scores $1$ against at most
    ``decoy`` $<1$), tokens are distinct (positions), and the query finds the *key* only: layer 2 reads the label
    once layer 1 has put the successor into the key's output (or the key into the successor's)."""
    d = 2 + T + d_extra
    k = src.ints((*lead, n), 0, T - 2)
    Y = _signs(src, (*lead, n))
    c = _dyadic(src, (*lead, n, T), bits)
    noise = _dyadic(src, (*lead, n, T, d_extra), bits) / 4.0 if d_extra else np.zeros((*lead, n, T, 0))
    t = np.arange(T)
    is_key = t == k[..., None]
    is_succ = t == k[..., None] + 1
    signal = np.where(is_succ, Y[..., None], np.where(is_key, 0.0, decoy * c))
    X = np.zeros((*lead, n, T, d))
    X[..., 0] = signal
    X[..., 1] = is_key.astype(np.float64)
    X[..., 2 : 2 + T] = np.eye(T)
    X[..., 2 + T :] = noise
    Z = np.zeros((*lead, n, d))
    Z[..., 1] = 1.0
    v = np.zeros((*lead, d))
    v[..., 0] = 1.0
    return Dataset(X, Y, Z, v)


def _make_gmc(src, lead, n: int, T: int, d: int, sigma: float = 0.0) -> Dataset:
    r"""Gaussian Match-and-Copy data (:mod:`attsvm.gmc`): tokens $\mathcal N(0,I_d/d)$, a match index
    $t_0\in[0,T-2]$, the query $e_{t_0}+\sigma\xi$; ``alpha`` the copied position $t_0+1$. Distinct tokens by
    construction (a repeat of an earlier token of its input is replaced by a canonical one, as in ``benign``)."""
    from . import gmc

    E = np.array(src.gaussians((*lead, n, T, d))) / np.sqrt(d)
    for t in range(1, T):  # a token repeating an earlier one of its input (Hypothesis' grid: zeros) becomes
        canon = np.zeros(d)  # (t + 1/2) e_(t mod d) / sqrt(d), off the grid; numpy draws never repeat
        canon[t % d] = (t + 0.5) / np.sqrt(d)
        rep = np.zeros(E.shape[:-2], dtype=bool)
        for u in range(t):
            rep |= np.all(E[..., t, :] == E[..., u, :], axis=-1)
        E[..., t, :] = np.where(rep[..., None], canon, E[..., t, :])
    t0 = src.ints((*lead, n), 0, T - 2)
    xi = src.gaussians((*lead, n, d)) / np.sqrt(d) if sigma > 0 else np.zeros((*lead, n, d))
    return gmc.build(E, t0, xi, sigma)


_TWOLAYER_SIZES = {"n": Size((1, 4), 1, 10_000), "T": Size((3, 5), 3, 64), "d_extra": Size((0, 2), 0, 64)}
_TWOLAYER_OPTIONS = {"decoy": Option(float, lo=0.0, hi=0.875), "bits": Option(int, lo=1, hi=8)}
_GMC_SIZES = {"n": Size((1, 4), 1, 10_000), "T": Size((3, 5), 3, 1000), "d": Size((2, 6), 2, 1000)}
# ---------------------------------------------------------------------- end two-layer attention


_BITS = Option(int, lo=1, hi=16)
# name -> (construction, sizes in draw order, options). The paper law needs d >= 2: unit-norm 1-D tokens are
# +-1 (ties). overparam derives d from n, T and d_extra.
_REPEATS = Option(bool)  # repeats=True: tokens may repeat inside an input (as drawn); default False: distinct
_LBITS = Option(int, lo=1, hi=8)
_SCHEMA: dict[str, tuple[Callable[..., Dataset], dict[str, Size], dict[str, Option]]] = {
    "paper": (_make_paper, _sizes(d=2), {}),
    "dyadic": (_make_dyadic, _sizes(), {"bits": _BITS, "repeats": _REPEATS}),
    "equal_scores": (_make_equal_scores, _sizes(d=2), {"bits": _BITS, "feasible": Option(bool), "repeats": _REPEATS}),
    "overparam": (_make_overparam, {**{k: v for k, v in _sizes().items() if k != "d"}, "d_extra": Size((0, 3), 0)}, {}),
    "feasible": (_make_feasible, _sizes(), {"alpha": Option(str, choices=("opt", "random")), "repeats": _REPEATS}),
    "locally_optimal": (_make_local, _sizes(T=3, d=2), {"bits": _LBITS, "repeats": _REPEATS}),
    "not_locally_optimal": (_make_local, _sizes(T=3, d=2), {"bits": _LBITS, "repeats": _REPEATS}),
    "infeasible": (_make_infeasible, _sizes(), {"bits": _BITS, "repeats": _REPEATS}),
    "sequence": (_make_sequence, {**_sizes(d=2), "K": Size((1, 3), 1, 100)}, {}),
    "causal": (_make_causal, _sizes(d=2), {}),
    "prompt": (_make_prompt, _sizes(d=2), {}),
    "self_attention": (_make_self, _sizes(d=2), {}),
    "benign": (_make_benign, _sizes(d=3), _BENIGN_OPTIONS),  # benign overfitting (2410.07746)
    "icl": (
        _make_icl,
        {"n": Size((2, 8), 1, 10_000), "N": Size((1, 10), 1, 10_000), "d": Size((2, 6), 1, 1000)},
        {"R": Option(float, lo=1e-3, hi=1e3), "p_flip": Option(float, lo=0.0, hi=0.49)},
    ),  # in-context classification (2410.01774)
    "twolayer": (_make_twolayer, _TWOLAYER_SIZES, _TWOLAYER_OPTIONS),  # two-layer attention (issue 30)
    "gmc": (_make_gmc, _GMC_SIZES, {"sigma": Option(float, lo=0.0, hi=10.0)}),  # Gaussian Match-and-Copy
    "ntp": (
        _make_ntp,
        {"n": Size((1, 4), 1, 10_000), "T": Size((2, 4), 2), "K": Size((2, 6), 2), "d": Size((2, 8), 2)},
        {
            "vocab": Option(str, choices=NTP_VOCABS),
            "graph": Option(str, choices=NTP_GRAPHS),
            "rho": Option(float, lo=0.0, hi=0.99),
            "bits": _BITS,
            "query_visible": Option(bool),
        },
    ),
}
# relations a strategy always needs (given its options), added to the claim's own
_IMPLIED: dict[str, Callable[[dict[str, Any]], tuple[str, ...]]] = {"ntp": _ntp_relations}
_FIXED = {"not_locally_optimal": {"locally_optimal": False}, "locally_optimal": {"locally_optimal": True}}
_MAX_COMBOS = 200_000
_PAD_MAX = 32  # Gaussian rows are padded to the largest allowed d up to this width


def schema(name: str) -> dict[str, str]:
    """The parameters strategy ``name`` takes, each with what is allowed (for messages and docs)."""
    _, sizes, opts = _lookup(name)
    out = {k: f"an int or (lo, hi) range within [{s.floor}, {s.cap}] (default {s.default})" for k, s in sizes.items()}
    out.update({k: o.describe() for k, o in opts.items()})
    out["relations"] = "bounds between sizes, e.g. ('d >= n', 'd >= T - 1')"
    if name == "ntp":
        always = (r if w is None else f"{r} ({w[0]}={w[1]!r})" for r, w in _NTP_RELATIONS)
        out["relations"] += "; always added: " + ", ".join(always)
    return out


def _lookup(name: Any):
    if not isinstance(name, str) or name not in _SCHEMA:
        raise InputError(f"unknown data strategy {name!r}; known: {', '.join(sorted(_SCHEMA))}")
    return _SCHEMA[name]


def _size_range(name: str, key: str, val: Any, spec: Size) -> tuple[int, int]:
    bad = f"strategy {name}: {key} must be an int or an inclusive (lo, hi) pair of ints, got {val!r}"
    if isinstance(val, (list, tuple)):
        if len(val) != 2:
            raise InputError(bad)
        lo, hi = val
    else:
        lo = hi = val
    for x in (lo, hi):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise InputError(bad)
    lo, hi = int(lo), int(hi)
    if lo > hi:
        raise InputError(f"strategy {name}: {key} range ({lo}, {hi}) is empty (lo > hi)")
    if lo < spec.floor or hi > spec.cap:
        raise InputError(f"strategy {name}: {key} must lie in [{spec.floor}, {spec.cap}], got {val!r}")
    return lo, hi


class _Relation:
    r"""``SIZE >= EXPR`` or ``SIZE <= EXPR`` (also ``>``, ``<``, ``==``); EXPR: ints, earlier sizes, ``+ - *``,
    ``max``, ``min``. A bound on the later-drawn SIZE, so it is met by construction."""

    _BOUNDS = {
        ast.GtE: lambda b: (b, math.inf),
        ast.Gt: lambda b: (b + 1, math.inf),
        ast.LtE: lambda b: (-math.inf, b),
        ast.Lt: lambda b: (-math.inf, b - 1),
        ast.Eq: lambda b: (b, b),
    }

    def __init__(self, name: str, text: Any, order: list[str]):
        self.text = text
        where = f"strategy {name}: relation {text!r}"
        if not isinstance(text, str):
            raise InputError(f"{where} must be a string such as 'd >= n'")
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError:
            raise InputError(f"{where} is not an expression such as 'd >= n'") from None
        if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and isinstance(tree.left, ast.Name)):
            raise InputError(f"{where} must read 'SIZE >= EXPR' or 'SIZE <= EXPR'")
        op = type(tree.ops[0])
        if op not in self._BOUNDS:
            raise InputError(f"{where}: only >=, >, <=, <, == are allowed")
        self.size = tree.left.id
        if self.size not in order:
            raise InputError(f"{where}: {self.size!r} is not a size of this strategy ({', '.join(order)})")
        self.op = op
        self.expr = tree.comparators[0]
        names = {n.id for n in ast.walk(self.expr) if isinstance(n, ast.Name)} - {"max", "min"}
        for n in names:
            if n not in order:
                raise InputError(f"{where}: {n!r} is not a size of this strategy ({', '.join(order)})")
            if order.index(n) >= order.index(self.size):
                raise InputError(
                    f"{where}: write it as a bound on the size drawn last ({' < '.join(order)} is the draw order)"
                )
        for node in ast.walk(self.expr):
            allowed = (ast.Name, ast.Constant, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Call, ast.Load, ast.UnaryOp)
            if not isinstance(node, allowed + (ast.USub,)) or (
                isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int))
            ):
                raise InputError(f"{where}: only ints, sizes, + - *, max and min are allowed")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ("max", "min")):
                raise InputError(f"{where}: only max and min may be called")
        self.code = compile(ast.Expression(self.expr), "<relation>", "eval")

    def bound(self, drawn: dict[str, int]) -> tuple[float, float]:
        b = int(eval(self.code, {"__builtins__": {}, "max": max, "min": min}, dict(drawn)))  # noqa: S307
        return self._BOUNDS[self.op](b)


@dataclass(frozen=True)
class Plan:
    """A validated strategy: its size ranges (draw order), relations, options and the construction."""

    name: str
    ranges: dict[str, tuple[int, int]]
    relations: tuple[Any, ...]
    options: dict[str, Any]

    def bounds(self, key: str, drawn: dict[str, int]) -> tuple[int, int]:
        """The range of ``key`` given the sizes drawn before it (its relations applied)."""
        lo, hi = self.ranges[key]
        for r in self.relations:
            if r.size == key:
                a, b = r.bound(drawn)
                lo, hi = max(lo, a), min(hi, b)
        return int(lo), int(hi)

    def draw_sizes(self, pick: Callable[[int, int], int]) -> dict[str, int]:
        """The sizes in draw order, each ``pick(lo, hi)`` within the bounds its relations give."""
        sz: dict[str, int] = {}
        for k in self.ranges:
            sz[k] = int(pick(*self.bounds(k, sz)))
        return sz

    def build(self, src: Any, lead: tuple[int, ...], sizes: dict[str, int]) -> Dataset:
        return _SCHEMA[self.name][0](src, lead, **sizes, **self.options, **_FIXED.get(self.name, {}))

    def padding(self, sizes: dict[str, int]) -> tuple[int, int]:
        """``(d, width)`` for :class:`_HypSource`: the drawn $d$ and the largest $d$ the plan allows after the sizes
        drawn before it (at most :data:`_PAD_MAX`; a larger $d$ is not padded), so that lowering $d$ keeps every
        number. (Tokens are not padded: dead draws cost the search's targeting phase more than they help.)"""
        order = list(self.ranges)

        def hi(key: str) -> int:
            return self.bounds(key, {k: sizes[k] for k in order[: order.index(key)]})[1]

        if "d" in self.ranges:
            d, dhi = sizes["d"], hi("d")
        elif self.name == "twolayer":  # d = 2 + T + d_extra; no Gaussian rows (dyadic draws only)
            d = dhi = 2 + sizes["T"] + sizes["d_extra"]
        else:  # overparam: d = max(T - 1, n, 2) + d_extra
            base = max(sizes["T"] - 1, sizes["n"], 2)
            d, dhi = base + sizes["d_extra"], base + hi("d_extra")
        return d, (min(dhi, _PAD_MAX) if d <= _PAD_MAX else d)


def plan(name: Any, params: dict[str, Any]) -> Plan:
    """Validate strategy ``name``'s parameters (unknown keys, types, ranges, relations) into a :class:`Plan`.

    Every problem is an :class:`~attsvm.errors.InputError` naming the key and what is allowed; nothing is
    clamped. Relations are checked for every combination of the earlier sizes: none may leave a range empty."""
    _, sizes, opts = _lookup(name)
    params = dict(params)
    rel_texts = params.pop("relations", ())
    if isinstance(rel_texts, str):
        rel_texts = (rel_texts,)
    bad = sorted(set(params) - set(sizes) - set(opts))
    if bad:
        allowed = ", ".join([*sizes, *opts, "relations"])
        raise InputError(f"strategy {name}: unknown hypothesis {bad[0]!r} (allowed: {allowed})")
    ranges = {k: _size_range(name, k, params.get(k, s.default), s) for k, s in sizes.items()}
    for k, o in opts.items():
        if k in params:
            o.check(name, k, params[k])
    order = list(sizes)
    options = {k: params[k] for k in opts if k in params}
    implied = _IMPLIED[name](options) if name in _IMPLIED else ()
    rels = tuple(_Relation(name, t, order) for t in (*rel_texts, *implied))
    p = Plan(name, ranges, rels, options)
    if rels:
        count = 1
        for k in order:
            count *= ranges[k][1] - ranges[k][0] + 1
        if count > _MAX_COMBOS:
            raise InputError(f"strategy {name}: relations over {count} size combinations; narrow the ranges")

        def walk(i: int, drawn: dict[str, int]) -> None:
            if i == len(order):
                return
            k = order[i]
            lo, hi = p.bounds(k, drawn)
            if lo > hi:
                given = ", ".join(f"{a}={b}" for a, b in drawn.items())
                raise InputError(
                    f"strategy {name}: the relations leave no {k} in {ranges[k]}" + (f" when {given}" if given else "")
                )
            for val in range(lo, hi + 1):
                walk(i + 1, {**drawn, k: val})

        walk(0, {})
    return p


def _strategy(name: str, **params: Any):
    """The Hypothesis strategy ``name`` with parameters (validated by :func:`plan`)."""
    from hypothesis import strategies as st

    p = plan(name, params)

    @st.composite
    def build(draw):
        sz = p.draw_sizes(lambda lo, hi: draw(st.integers(lo, hi)))
        return p.build(_HypSource(draw, p.padding(sz)), (), sz)

    return build()


def _wrap(name: str) -> Callable[..., Any]:
    def strategy(**params: Any):
        return _strategy(name, **params)

    strategy.__name__ = name
    strategy.__doc__ = f"Hypothesis strategy ``{name}`` (see the module table)."
    return strategy


paper = _wrap("paper")
dyadic = _wrap("dyadic")
equal_scores = _wrap("equal_scores")
overparam = _wrap("overparam")
feasible = _wrap("feasible")
locally_optimal = _wrap("locally_optimal")
not_locally_optimal = _wrap("not_locally_optimal")
infeasible = _wrap("infeasible")
sequence = _wrap("sequence")
causal = _wrap("causal")
prompt = _wrap("prompt")
self_attention = _wrap("self_attention")
ntp = _wrap("ntp")
benign = _wrap("benign")  # benign overfitting (2410.07746)
icl = _wrap("icl")  # in-context classification (2410.01774)
twolayer = _wrap("twolayer")  # two-layer attention, key and successor (issue 30)
gmc = _wrap("gmc")  # Gaussian Match-and-Copy (2602.07562)

STRATEGIES: dict[str, Callable[..., Any]] = {
    "paper": paper,
    "dyadic": dyadic,
    "equal_scores": equal_scores,
    "overparam": overparam,
    "feasible": feasible,
    "locally_optimal": locally_optimal,
    "not_locally_optimal": not_locally_optimal,
    "infeasible": infeasible,
    "sequence": sequence,
    "causal": causal,
    "prompt": prompt,
    "self_attention": self_attention,
    "ntp": ntp,
    "benign": benign,
    "icl": icl,
    "twolayer": twolayer,
    "gmc": gmc,
}


def relu_head(d: int | tuple[int, int]):
    r"""A head $V\in\mathbb R^{d\times d}$ with $\|V\|_F=1$ (a zero draw becomes $I/\sqrt d$)."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    dd = int(d)

    def norm(V: np.ndarray) -> np.ndarray:
        m = np.max(np.abs(V))
        if not m > 0:
            return np.eye(dd) / np.sqrt(dd)
        V = V / m  # first to max |entry| = 1: subnormal draws keep all their bits relative to each other
        return V / np.linalg.norm(V)

    el = st.floats(-1, 1, allow_nan=False, allow_infinity=False, width=64)
    return hnp.arrays(np.float64, (dd, dd), elements=el).map(norm)


def split_hypotheses(hypotheses: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``(strategy name, its parameters)`` of a claim's hypotheses, validated (no ``data``: ``(None, {})``, and
    then any other key is an error). ``region`` (the region a region statement quantifies over,
    :meth:`attsvm.claims.case.Case.param`) is not the strategy's: it is checked to be a region spec and left out;
    nor is ``tail`` (the id of the claim that proves the region statement past a radius, :mod:`attsvm.prove.tail`)."""
    h = dict(hypotheses)
    tail = h.pop("tail", None)
    if tail is not None and not (isinstance(tail, str) and tail):
        raise InputError(f"hypotheses: tail {tail!r} is not a claim id")
    region = h.pop("region", None)
    if region is not None:
        from .prove.regions import KINDS

        kind = str(region).split(":", 1)[0].strip()
        if not isinstance(region, str) or kind not in KINDS:
            kinds = ", ".join(KINDS)
            raise InputError(f"hypotheses: region {region!r} is not a region spec (KIND:ARGS, KIND one of {kinds})")
    name = h.pop("data", None)
    if name is None:
        if h:
            raise InputError(f"hypotheses {sorted(h)} need a data strategy ('data': one of {', '.join(_SCHEMA)})")
        return None, {}
    plan(name, h)
    return name, h


def for_hypotheses(hypotheses: dict[str, Any]):
    """The strategy a claim's hypotheses select (None when there is no ``data`` key)."""
    name, params = split_hypotheses(hypotheses)
    return None if name is None else _strategy(name, **params)


def batch(name: str, runs: int, seed: int = 0, **params: Any) -> Dataset:
    """``runs`` data sets of strategy ``name`` as one batch (leading axis B), seeded numpy generation.

    Size ranges ``(lo, hi)`` are resolved once for the whole batch (drawn from the seed, relations applied)."""
    p = plan(name, params)
    if int(runs) < 1:
        raise InputError(f"batch: runs must be >= 1, got {runs}")
    rng = np.random.default_rng(seed)
    sz = p.draw_sizes(lambda lo, hi: rng.integers(lo, hi + 1))
    return p.build(_RngSource(rng), (int(runs),), sz)
