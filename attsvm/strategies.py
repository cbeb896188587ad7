r"""Hypothesis strategies for data sets, valid by construction (no ``filter``/``assume`` for feasibility).

A claim's ``hypotheses["data"]`` names an entry of :data:`STRATEGIES`; the other keys are its
parameters (sizes as an int or an inclusive ``(lo, hi)`` range; keys a strategy does not take are left
to the claim). Every strategy draws the sizes first (shrinking towards the smallest $n,T,d$), then the
structure (margin, direction, selection), then the numbers (shrinking towards 0 and simple values).

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

import functools
import inspect
from collections.abc import Callable
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


# name -> (construction, size floors). The paper law needs d >= 2: unit-norm 1-D tokens are +-1 (ties).
_SIZES = {"n": ((1, 4), 1), "T": ((2, 5), 2), "d": ((1, 4), 1), "K": ((1, 3), 1), "d_extra": ((0, 3), 0)}
_BUILDERS: dict[str, tuple[Callable[..., Dataset], dict[str, int]]] = {
    "paper": (_make_paper, {"d": 2}),
    "dyadic": (_make_dyadic, {}),
    "equal_scores": (_make_equal_scores, {"d": 2}),
    "overparam": (_make_overparam, {}),
    "feasible": (_make_feasible, {}),
    "locally_optimal": (_make_local, {"T": 3, "d": 2}),
    "not_locally_optimal": (_make_local, {"T": 3, "d": 2}),
    "infeasible": (_make_infeasible, {}),
    "sequence": (_make_sequence, {"d": 2}),
    "causal": (_make_causal, {"d": 2}),
    "prompt": (_make_prompt, {"d": 2}),
    "self_attention": (_make_self, {"d": 2}),
}
_FIXED = {"not_locally_optimal": {"locally_optimal": False}, "locally_optimal": {"locally_optimal": True}}


def _size_range(name: str, key: str, val: Any) -> tuple[int, int]:
    floor = max(_SIZES[key][1], _BUILDERS[name][1].get(key, 0))
    if val is None:
        val = _SIZES[key][0]
    if isinstance(val, (list, tuple)):
        if len(val) != 2:
            raise InputError(f"strategy {name}: size {key} must be an int or a (lo, hi) pair, got {val!r}")
        lo, hi = int(val[0]), int(val[1])
    else:
        lo = hi = int(val)
    if lo > hi:
        raise InputError(f"strategy {name}: size {key} has lo > hi ({lo} > {hi})")
    lo, hi = max(lo, floor), max(hi, floor)
    return lo, hi


def _params(name: str) -> tuple[list[str], list[str]]:
    fn = _BUILDERS[name][0]
    keys = [p for p in inspect.signature(fn).parameters if p not in ("src", "lead")]
    sizes = [k for k in keys if k in _SIZES]
    return sizes, [k for k in keys if k not in _SIZES and k not in _FIXED.get(name, {})]


def _strategy(name: str, **params: Any):
    """The Hypothesis strategy ``name`` with parameters (unknown keys are an InputError)."""
    from hypothesis import strategies as st

    if name not in _BUILDERS:
        raise InputError(f"unknown data strategy {name!r}; known: {', '.join(sorted(_BUILDERS))}")
    sizes, opts = _params(name)
    bad = set(params) - set(sizes) - set(opts)
    if bad:
        raise InputError(f"strategy {name}: unknown parameter {sorted(bad)[0]!r}")
    ranges = {k: _size_range(name, k, params.get(k)) for k in sizes}
    fixed = {k: params[k] for k in opts if k in params}
    fixed.update(_FIXED.get(name, {}))
    fn = _BUILDERS[name][0]

    @st.composite
    def build(draw):
        sz = {k: draw(st.integers(lo, hi)) for k, (lo, hi) in ranges.items()}
        return fn(_HypSource(draw), (), **sz, **fixed)

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
        f = np.linalg.norm(V)
        return V / f if f > 0 else np.eye(dd) / np.sqrt(dd)

    el = st.floats(-1, 1, allow_nan=False, allow_infinity=False, width=64)
    return hnp.arrays(np.float64, (dd, dd), elements=el).map(norm)


def split_hypotheses(hypotheses: dict[str, Any]) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """``(name, strategy params, other keys)`` of a claim's hypotheses."""
    h = dict(hypotheses)
    name = h.pop("data", None)
    if name is None:
        return None, {}, h
    if name not in _BUILDERS:
        raise InputError(f"unknown data strategy {name!r}; known: {', '.join(sorted(_BUILDERS))}")
    sizes, opts = _params(name)
    mine = {k: h[k] for k in list(h) if k in sizes or k in opts}
    rest = {k: v for k, v in h.items() if k not in mine}
    return name, mine, rest


def for_hypotheses(hypotheses: dict[str, Any]):
    """The strategy a claim's hypotheses select (None when there is no ``data`` key)."""
    name, params, _ = split_hypotheses(hypotheses)
    return None if name is None else _strategy(name, **params)


def batch(name: str, runs: int, seed: int = 0, **params: Any) -> Dataset:
    """``runs`` data sets of strategy ``name`` as one batch (leading axis B), seeded numpy generation.

    Size ranges ``(lo, hi)`` are resolved once for the whole batch (drawn from the seed)."""
    if name not in _BUILDERS:
        raise InputError(f"unknown data strategy {name!r}; known: {', '.join(sorted(_BUILDERS))}")
    if int(runs) < 1:
        raise InputError(f"batch: runs must be >= 1, got {runs}")
    sizes, opts = _params(name)
    bad = set(params) - set(sizes) - set(opts)
    if bad:
        raise InputError(f"strategy {name}: unknown parameter {sorted(bad)[0]!r}")
    rng = np.random.default_rng(seed)
    sz = {}
    for k in sizes:
        lo, hi = _size_range(name, k, params.get(k))
        sz[k] = int(rng.integers(lo, hi + 1))
    fixed = {k: params[k] for k in opts if k in params}
    fixed.update(_FIXED.get(name, {}))
    return _BUILDERS[name][0](_RngSource(rng), (int(runs),), **sz, **fixed)
