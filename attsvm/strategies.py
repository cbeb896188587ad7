r"""Hypothesis strategies for data sets, valid by construction (no ``filter``/``assume`` for feasibility).

A claim's ``hypotheses["data"]`` names an entry of :data:`STRATEGIES`; the other keys are its parameters
(sizes as an int or an inclusive ``(lo, hi)`` range, options, and ``relations`` between sizes), validated by
:func:`plan` against the strategy's schema (:func:`schema`): an unknown key, a value outside its range or of
the wrong type, an empty range or a relation that leaves no size is an :class:`~attsvm.errors.InputError`;
nothing is clamped. Every strategy draws the sizes first (in the order $n,T,d,K$, each within the bounds its
relations give; shrinking towards the smallest), then the structure (margin, direction, selection), then the
numbers (shrinking towards 0 and simple values).

==================== ==========================================================================
name                 what it promises
==================== ==========================================================================
``paper``            the paper's law: $v,x_{it},z_i\sim\mathcal N(0,I)$ normalised, $Y_i=\pm1$ fair
``dyadic``           adversarial small dyadic entries $k/2^{\mathrm{bits}}$ (exact in binary), unique opt
``equal_scores``     Assumption B bit-exact ($v=e_1$), Att-SVM(opt) feasible
``overparam``        generic (paper law) with $d\ge\max(T-1,n)$
``feasible``         Att-SVM($\alpha$) feasible, $\alpha$ = opt (strictly) or random; ``ds.alpha`` set
``locally_optimal``  $\alpha\ne\mathrm{opt}$ locally optimal, $W^{mm}_\alpha=e_1b^\top$ known; ``ds.alpha`` set
``not_locally_optimal`` feasible $\alpha$ with a support token scoring above $\alpha$; ``ds.alpha`` set
``infeasible``       Att-SVM($\alpha$) infeasible (a selected token is a midpoint/duplicate); ``ds.alpha``
``sequence``         paper-law tokens, $K$ queries per input
``causal``           causal self-attention
``prompt``           one shared query $z$ (prompt attention $p=Wz$)
``self_attention``   paper law with $z_i=x_{i0}$
==================== ==========================================================================

Plus :func:`relu_head` (a head $V$ with $\|V\|_F=1$, drawn separately) and :func:`batch` — the seeded,
batched numpy counterparts for empirical claims (same names, one leading axis ``B``).

**Constructions.** ``feasible``: draw $M$ and set $W^\star=M+(\|M\|_F+1)I$ (so $\sigma_{\min}(W^\star)\ge1$),
unit queries $z_i$, $u_i=W^\star z_i$; shift the selected token along $\hat u_i$ (and $\widehat{Y_iv}$ for
opt, after flipping $z_i$ so that $u_i^\top Y_iv\ge0$) until every margin $(x_{i\alpha_i}-x_{it})^\top W^\star
z_i\ge1$ (and every score gap $\ge1$). ``locally_optimal``: with $a=e_1$, $b=e_d$, queries
$z_i=Y_ib+w_i$ ($w_i\perp b$, $\sum_iY_iw_i=0$), support tokens $x_{i\alpha_i}-Y_ia$, other tokens
$x_{i\alpha_i}-Y_ip_ta+q_t$ ($p_t\ge1+2g$, $q_t\perp a$): the KKT conditions hold for $W=ab^\top$ with
$\lambda$ uniform, so $W^{mm}_\alpha=ab^\top$, support tokens score $v_1>0$ below $\alpha$ and a far token
$q=\kappa e_2$ scores $g$ above it. ``not_locally_optimal`` flips $v_1<0$.
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

# ---------------------------------------------------------------------- number sources
# A construction is written once against a "source" of numbers: Hypothesis draws (shrinkable) or a
# numpy generator (batched, for empirical claims). Shapes include the leading batch axes.


@functools.lru_cache(maxsize=4096)
def _array_strategy(kind: str, shape: tuple[int, ...], lo: float, hi: float):
    """Cached Hypothesis array strategies (building and validating them anew costs more than drawing)."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    if kind == "f":
        el = st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=64)
        return hnp.arrays(np.float64, shape, elements=el)
    return hnp.arrays(np.int64, shape, elements=st.integers(int(lo), int(hi)))


class _HypSource:
    def __init__(self, draw: Callable[[Any], Any]):
        self.draw = draw

    def floats(self, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return np.array(self.draw(_array_strategy("f", tuple(shape), lo, hi)), dtype=np.float64)

    def ints(self, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        return np.array(self.draw(_array_strategy("i", tuple(shape), lo, hi)), dtype=np.int64)

    def seed(self) -> int:
        from hypothesis import strategies as st

        return int(self.draw(st.integers(0, 2**32 - 1)))


class _RngSource:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def floats(self, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return self.rng.uniform(lo, hi, size=shape)

    def ints(self, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        return self.rng.integers(lo, hi + 1, size=shape).astype(np.int64)

    def seed(self) -> int:
        return int(self.rng.integers(0, 2**32 - 1))


def _signs(src, shape) -> np.ndarray:
    """+-1 labels; shrink towards +1."""
    return 1.0 - 2.0 * src.ints(shape, 0, 1).astype(np.float64)


def _dyadic(src, shape, bits: int, lo: int = -1, hi: int = 1) -> np.ndarray:
    """Entries k/2^bits, k in [lo*2^bits, hi*2^bits]: exact in binary, shrink towards 0."""
    s = 2**bits
    return src.ints(shape, lo * s, hi * s).astype(np.float64) / s


def _unit_rows(a: np.ndarray) -> np.ndarray:
    """Normalise the last axis; a zero row becomes e_1 (by construction, never 0/0)."""
    nrm = np.linalg.norm(a, axis=-1, keepdims=True)
    e1 = np.zeros(a.shape[-1])
    e1[0] = 1.0
    return np.where(nrm > 0, a / np.where(nrm > 0, nrm, 1.0), e1)


def _take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """a (..., n, T, d), idx (..., n) -> a[..., i, idx_i, :] (..., n, d)."""
    return np.take_along_axis(a, idx[..., None, None], axis=-2)[..., 0, :]


def _put(a: np.ndarray, idx: np.ndarray, val: np.ndarray) -> None:
    np.put_along_axis(a, idx[..., None, None], val[..., None, :], axis=-2)


# ---------------------------------------------------------------------- constructions (numpy, batched)
def _make_paper(src, lead, n, T, d, self_attention=False) -> Dataset:
    from .generate import paper_law

    B = lead[0] if lead else None
    return paper_law(n, T, d, seed=src.seed(), B=B, self_attention=self_attention)


def _make_dyadic(src, lead, n, T, d, bits=3) -> Dataset:
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
    return Dataset(X, Y, Z, v)


def _make_equal_scores(src, lead, n, T, d, bits=3, feasible=True) -> Dataset:
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
    v = np.zeros((*lead, d))
    v[..., 0] = 1.0
    Z = src.floats((*lead, n, d))
    if feasible:  # Y_i z_i[0] >= 1/s > 0 makes W = c e_1 e_1^T feasible for opt
        z0 = src.ints((*lead, n), 1, s).astype(np.float64) / s
        Z[..., 0] = Y * z0
    return Dataset(X, Y, Z, v)


def _make_overparam(src, lead, n, T, d_extra=0) -> Dataset:
    from .generate import paper_law

    B = lead[0] if lead else None
    return paper_law(n, T, max(T - 1, n, 2) + int(d_extra), seed=src.seed(), B=B)


def _make_feasible(src, lead, n, T, d, alpha="opt") -> Dataset:
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


def _make_local(src, lead, n, T, d, locally_optimal=True, bits=2) -> Dataset:
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


def _make_infeasible(src, lead, n, T, d, bits=3) -> Dataset:
    X = _dyadic(src, (*lead, n, T, d), bits)
    Z = _dyadic(src, (*lead, n, d), bits)
    v = _dyadic(src, (*lead, d), bits)
    Y = _signs(src, (*lead, n))
    i_star = src.ints(lead, 0, n - 1)
    a_star = src.ints(lead, 0, T - 1)
    delta = _dyadic(src, (*lead, d), bits)
    gam = Y[..., None] * np.einsum("...ntd,...d->...nt", X, v)
    a = np.argmax(gam, -1)
    a = np.where(np.arange(n) == i_star[..., None], a_star[..., None], a)
    # input i*: tokens (a*+1) and (a*+2) mod T are x_a +- delta (midpoint); for T = 2 a duplicate
    Xi = np.take_along_axis(X, i_star[..., None, None, None], axis=-3)[..., 0, :, :]  # (..., T, d)
    xa = np.take_along_axis(Xi, a_star[..., None, None], axis=-2)[..., 0, :]
    t1 = (a_star + 1) % T
    np.put_along_axis(Xi, t1[..., None, None], (xa + delta)[..., None, :], axis=-2)
    if T >= 3:
        t2 = (a_star + 2) % T
        np.put_along_axis(Xi, t2[..., None, None], (xa - delta)[..., None, :], axis=-2)
    else:
        np.put_along_axis(Xi, t1[..., None, None], xa[..., None, :], axis=-2)
    np.put_along_axis(X, i_star[..., None, None, None], Xi[..., None, :, :], axis=-3)
    return Dataset(X, Y, Z, v, alpha=a)


def _make_sequence(src, lead, n, T, d, K=2) -> Dataset:
    from .generate import sequence

    return sequence(n, T, d, K, seed=src.seed(), B=lead[0] if lead else None)


def _make_causal(src, lead, n, T, d) -> Dataset:
    from .generate import causal

    return causal(n, T, d, seed=src.seed(), B=lead[0] if lead else None)


def _make_prompt(src, lead, n, T, d) -> Dataset:
    from .generate import paper_law

    ds = paper_law(n, T, d, seed=src.seed(), B=lead[0] if lead else None)
    Z = np.broadcast_to(ds.Z[..., :1, :], ds.Z.shape).copy()  # one shared query
    return Dataset(ds.X, ds.Y, Z, ds.v)


def _make_self(src, lead, n, T, d) -> Dataset:
    return _make_paper(src, lead, n, T, d, self_attention=True)


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


_BITS = Option(int, lo=1, hi=16)
# name -> (construction, sizes in draw order, options). The paper law needs d >= 2: unit-norm 1-D tokens are
# +-1 (ties). overparam derives d from n, T and d_extra.
_SCHEMA: dict[str, tuple[Callable[..., Dataset], dict[str, Size], dict[str, Option]]] = {
    "paper": (_make_paper, _sizes(d=2), {}),
    "dyadic": (_make_dyadic, _sizes(), {"bits": _BITS}),
    "equal_scores": (_make_equal_scores, _sizes(d=2), {"bits": _BITS, "feasible": Option(bool)}),
    "overparam": (_make_overparam, {**{k: v for k, v in _sizes().items() if k != "d"}, "d_extra": Size((0, 3), 0)}, {}),
    "feasible": (_make_feasible, _sizes(), {"alpha": Option(str, choices=("opt", "random"))}),
    "locally_optimal": (_make_local, _sizes(T=3, d=2), {"bits": Option(int, lo=1, hi=8)}),
    "not_locally_optimal": (_make_local, _sizes(T=3, d=2), {"bits": Option(int, lo=1, hi=8)}),
    "infeasible": (_make_infeasible, _sizes(), {"bits": _BITS}),
    "sequence": (_make_sequence, {**_sizes(d=2), "K": Size((1, 3), 1, 100)}, {}),
    "causal": (_make_causal, _sizes(d=2), {}),
    "prompt": (_make_prompt, _sizes(d=2), {}),
    "self_attention": (_make_self, _sizes(d=2), {}),
}
_FIXED = {"not_locally_optimal": {"locally_optimal": False}, "locally_optimal": {"locally_optimal": True}}
_MAX_COMBOS = 200_000


def schema(name: str) -> dict[str, str]:
    """The parameters strategy ``name`` takes, each with what is allowed (for messages and docs)."""
    _, sizes, opts = _lookup(name)
    out = {k: f"an int or (lo, hi) range within [{s.floor}, {s.cap}] (default {s.default})" for k, s in sizes.items()}
    out.update({k: o.describe() for k, o in opts.items()})
    out["relations"] = "bounds between sizes, e.g. ('d >= n', 'd >= T - 1')"
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
    rels = tuple(_Relation(name, t, order) for t in rel_texts)
    p = Plan(name, ranges, rels, {k: params[k] for k in opts if k in params})
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
        return p.build(_HypSource(draw), (), sz)

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
    then any other key is an error)."""
    h = dict(hypotheses)
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
