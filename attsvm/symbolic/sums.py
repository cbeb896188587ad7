r"""Finite sums in index notation: one exact normal form, for identities that hold for *every* size.

Identities for general $n,T,d$ are written with ``IndexedBase`` entries, ``Sum``\ s with symbolic bounds such as
$\sum_{u=1}^T$ and ``KroneckerDelta``\ s. sympy evaluates such a ``Sum`` only when it has a closed form; it does not
exchange nested sums, pull a factor out of a sum, rename a summation index or sum a Kronecker delta whose partner
index has a symbolic range, so $\sum_{k,l}w_{kl}\sum_j\lambda_jA_{jkl}=\sum_j\lambda_j\sum_{k,l}w_{kl}A_{jkl}$ or
$\sum_t s_t(\delta_{t\tau}-s_\tau)=0$ stay unproved. :func:`reduce` decides them: it brings ``expr`` to

.. math:: \frac{P(\sigma_1,\dots,\sigma_r)}{Q(\sigma_1,\dots,\sigma_r)},

a cancelled rational function of *atoms* $\sigma_k$ (canonical sums, exponentials $e^{x}$ of entries, entries,
other functions), in four stages, each an identity of finite sums that holds for every value of the bounds (in
sympy's Karr convention too, $\sum_{v=l}^{h}f=-\sum_{v=h+1}^{l-1}f$ for $h<l-1$):

1. *Range handling* (:func:`decide_in_ranges`): a ``Piecewise`` condition that holds (or fails) for every value of
   an index in its declared range is decided; so is the condition $l\le e\le h$ of a Kronecker delta below.
2. *Summation* (one ``Sum`` at a time, innermost first; inside a sum its index has the sum's range, not a declared
   range of a free index of the same name, and what is left becomes a ``Sum`` over a fresh ``Dummy``):
   linearity $\sum_v(f+g)=\sum_vf+\sum_vg$ after multiplying out products and integer powers; a factor without $v$
   moves out, $\sum_vcf=c\sum_vf$, so a product of sums over disjoint indices becomes the product of the sums; an
   unused index counts the terms, $\sum_{v=l}^{h}c=(h-l+1)c$; $\sum_v\delta_{ve}f(v)=f(e)$ when $l\le e\le h$ is
   decided; a range of fixed length is written out; a range from an integer $l\ne1$ is shifted,
   $\sum_{v=l}^{h}=\sum_{v=1}^{h}-\sum_{v=1}^{l-1}$; $e^{\sum_kc_kx_k}=\prod_k(e^{x_k})^{c_k}$ for integers $c_k$;
   ``Derivative``/``Subs`` are evaluated by sympy's rules first.
3. *Exchange and renaming* (Fubini): every nest of sums in product position,
   $\sum_vA_v\bigl(\sum_wB_{vw}\bigr)^p=\sum_{v,w_1,\dots,w_p}A_vB_{vw_1}\cdots B_{vw_p}$ ($p\ge1$, fresh indices
   for each copy), becomes one sum over the *set* of its indices, which is sound because no bound mentions an
   index of the nest (a triangular sum such as $\sum_{k}\sum_{j\le k}$ raises ``ValueError``). A first pass names
   the indices by position, so sums written alike become identical and sympy merges their powers (the sum in a
   softmax numerator against the same sum in its denominator) before they would join a nest; a second pass
   renames canonically: among all renamings that keep each index's bounds, the one whose summand is smallest in
   sympy's ``default_sort_key``. The names (reserved prefix :data:`RESERVED`) carry the height of the nest, so a
   sum inside a factor (an exponential, a denominator) is never captured. Sums that differ by exchanged
   summations or by the names of their indices become identical.
4. *Cancellation*: every remaining sum, exponential $e^x$ (with $e^{kx}=(e^x)^k$) and entry becomes an independent
   symbol and sympy's ``cancel(together(...))`` brings the rational function to lowest terms (``expand``, the
   normal form of a polynomial, when there is no denominator).

The result, with the atoms written back, equals ``expr``; so ``reduce(lhs - rhs) == 0`` proves ``lhs == rhs`` for
every value of the bounds. Treating distinct atoms as independent only loses identities: ``reduce`` may fail to
prove a true identity (a nonzero result, the check then fails), never the other way round. Refused with
``ValueError`` (a check then fails with the reason): triangular sums, symbolic lower bounds, sums without bounds,
more than :data:`MAX_RENAMINGS` renamings of one nest, and free symbols with the reserved prefix.

:func:`reducer` is the ``method`` of a :class:`~attsvm.symbolic.checks.Symbolic` check; :func:`substitute` replaces
entries by expressions (e.g. a slack by its definition) before reducing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import sympy as sp

#: most renamings tried for one nest of sums (the product of the factorials of the groups of indices with equal
#: bounds); more raise ``ValueError``
MAX_RENAMINGS = 40320
#: name prefix of the canonical summation indices (refused as a free symbol of an input)
RESERVED = "sum_index_height_"

Ranges = dict[sp.Symbol, tuple[Any, Any]]

_EXPAND = {"deep": False, "mul": True, "multinomial": True, "power_exp": False, "power_base": False, "log": False}


# ---------------------------------------------------------------------- 1. range handling
def _decide(rel: Any, ranges: Ranges) -> Any:
    r"""``sp.true``/``sp.false`` when the relation holds/fails for every index in its range, else ``rel``.

    $r(\tau)$ is decided true when it is true for $\tau=h-q$ with a symbol $q\ge0$, or for $\tau=l+q$: each
    substitution covers a superset of the range $l\le\tau\le h$, so a relation true there is true on the range
    (and false when its negation is true there)."""
    if not isinstance(rel, sp.core.relational.Relational):
        return rel
    q = sp.Symbol("q_range", integer=True, nonnegative=True)
    tries = [
        (cand.subs(idx, sub), val)
        for idx, (lo, hi) in ranges.items()
        if idx in rel.free_symbols
        for sub in (hi - q, lo + q)
        for cand, val in ((rel, sp.true), (rel.negated, sp.false))
    ]
    for r, val in tries:  # what sympy decides on construction first, ``simplify`` (slow) only then
        if r is sp.true:
            return val
    for r, val in tries:
        if r not in (sp.true, sp.false) and sp.simplify(r) is sp.true:
            return val
    return rel


def decide_in_ranges(expr: Any, ranges: Ranges) -> Any:
    r"""Resolve the ``Piecewise`` conditions of ``expr`` that hold (or fail) for *every* index in its range.

    ``ranges`` maps an index $\tau$ to $(l,h)$, meaning $l\le\tau\le h$; each relation is decided as in
    :func:`_decide`. Undecided relations stay, and then an identity check fails loudly rather than passing."""

    def fix(pw):
        return sp.Piecewise(
            *[
                (e, c.replace(lambda x: isinstance(x, sp.core.relational.Relational), lambda r: _decide(r, ranges)))
                for e, c in pw.args
            ]
        )

    return expr.replace(lambda x: isinstance(x, sp.Piecewise), fix)


def _in_range(e: sp.Expr, lo: Any, hi: Any, ranges: Ranges) -> bool:
    """``lo <= e <= hi`` is decided for every value of the indices in ``e`` (:func:`_decide`)."""
    return all(_decide(rel, ranges) is sp.true for rel in (sp.Le(lo, e), sp.Le(e, hi)))


def _own_range(lo: Any, hi: Any) -> bool:
    """The index of ``Sum(f, (v, lo, hi))`` takes values in ``[lo, hi]``: the range is not reversed (Karr)."""
    return bool((sp.sympify(hi) - lo + 1).is_nonnegative)


# ---------------------------------------------------------------------- 2. summation
def _expand(e: sp.Expr) -> sp.Expr:
    """Products and integer powers multiplied out at every level of ``Add``/``Mul``/``Pow``, but not inside function
    arguments or summands (those are normalised on their own)."""
    if isinstance(e, sp.Add | sp.Mul):
        e = e.func(*[_expand(a) for a in e.args])
    elif isinstance(e, sp.Pow) and e.exp.is_Integer:
        e = _expand(e.base) ** e.exp
    return sp.expand(e, **_EXPAND)


def _sum_one(body: sp.Expr, v: sp.Symbol, lo: Any, hi: Any, ranges: Ranges) -> sp.Expr:
    r"""$\sum_{v=lo}^{hi}$ of a normalised ``body``, term by term (module docstring, stage 2); what is left becomes a
    ``Sum`` over a fresh index."""
    lo, hi = sp.sympify(lo), sp.sympify(hi)
    length = sp.expand(hi - lo + 1)
    if length.is_Integer:  # a fixed number of terms, written out (Karr: a negative length flips the range)
        vals = range(0, int(length)) if length >= 0 else range(int(length), 0)
        terms = [body.xreplace({v: lo + c}) for c in vals]
        return _normal(sp.Add(*terms) if length >= 0 else -sp.Add(*terms), ranges)
    if not lo.is_Integer:
        raise ValueError(f"a sum from {sp.sstr(lo)}: lower bounds must be integers")
    if lo != 1:  # Karr's convention: sum_{v=l}^{h} f = sum_{v=1}^{h} f - sum_{v=1}^{l-1} f for every l, h
        extra = [body.xreplace({v: sp.Integer(c)}) for c in range(1, int(lo))]  # l > 1: subtract f(1..l-1)
        extra += [-body.xreplace({v: sp.Integer(c)}) for c in range(int(lo), 1)]  # l < 1: add f(l..0)
        return _sum_one(body, v, sp.Integer(1), hi, ranges) - _normal(sp.Add(*extra), ranges)
    inside = {**ranges, v: (lo, hi)} if length.is_nonnegative else ranges  # the index runs over [lo, hi]
    out = []
    for term in sp.Add.make_args(_expand(body)):
        dep, rest = [], []
        for f in sp.Mul.make_args(term):
            (dep if v in f.free_symbols else rest).append(f)
        indep = sp.Mul(*rest)
        if not dep:
            out.append(indep * (hi - lo + 1))
            continue
        delta = None
        for f in dep:
            if isinstance(f, sp.KroneckerDelta) and v in f.args:
                other = f.args[1] if f.args[0] == v else f.args[0]
                if v not in other.free_symbols and _in_range(other, lo, hi, ranges):
                    delta = (f, other)
                    break
        if delta is not None:
            rest = sp.Mul(*[g for g in dep if g is not delta[0]]).xreplace({v: delta[1]})
            out.append(indep * _normal(rest, ranges))
            continue
        body_v = sp.Mul(*dep)
        if body_v.has(sp.Piecewise):  # case splits on the index that hold on its whole range
            body_v = decide_in_ranges(body_v, inside)
        fresh = sp.Dummy(str(v), integer=True)  # fresh: no later substitution can be captured by it
        out.append(indep * sp.Sum(body_v.xreplace({v: fresh}), (fresh, lo, hi)))
    return sp.Add(*out)


def _exp(arg: sp.Expr) -> sp.Expr:
    r"""$e^{\sum_kc_kx_k}=\prod_k(e^{x_k})^{c_k}$ for integer $c_k$ (other terms stay in one exponential)."""
    out, other = [], []
    for term in sp.Add.make_args(_expand(arg)):
        c, rest = term.as_coeff_Mul()
        if c.is_Integer and rest != 1:
            out.append(sp.exp(rest) ** c)
        else:
            other.append(term)
    return sp.Mul(*out) * (sp.exp(sp.Add(*other)) if other else 1)


def _normal(e: sp.Expr, ranges: Ranges) -> sp.Expr:
    """``e`` with every ``Sum`` summed by :func:`_sum_one` (stage 2), bottom-up."""
    if e.is_Atom or isinstance(e, sp.Indexed):
        return e
    if isinstance(e, sp.Sum):
        if any(len(lim) != 3 for lim in e.limits):
            raise ValueError(f"a sum without explicit bounds: {sp.sstr(e)[:120]}")
        limits = [(v, sp.sympify(lo), sp.sympify(hi)) for v, lo, hi in e.limits]
        bound = {v for v, _, _ in limits}
        if any((lo.free_symbols | hi.free_symbols) & bound for _, lo, hi in limits):
            raise ValueError("a bound mentions a summation index (triangular sum): not decided here")
        # inside the sum its indices shadow free symbols of the same name: they take the sum's own ranges
        inside = {x: r for x, r in ranges.items() if x not in bound}
        for v, lo, hi in limits:
            if _own_range(lo, hi):
                inside[v] = (lo, hi)
        body = _normal(e.function, inside)
        for v, lo, hi in limits:  # innermost first; the outer indices keep their ranges for the inner deltas
            inside.pop(v, None)
            body = _sum_one(body, v, lo, hi, inside)
        return body
    if isinstance(e, sp.Derivative):  # differentiate (sympy's rules; a Sum term by term)
        return _normal(e.doit(deep=False), ranges)
    if isinstance(e, sp.Subs):  # a derivative at a point: differentiate, substitute, then normalise
        inner = e.expr.doit(deep=False) if isinstance(e.expr, sp.Derivative) else e.expr
        return _normal(inner.subs(dict(zip(e.variables, e.point))), ranges)
    args = [_normal(a, ranges) for a in e.args]
    if isinstance(e, sp.exp):
        return _exp(args[0])
    return e.func(*args)


# ---------------------------------------------------------------------- 3. exchange and canonical renaming
def _height(e: sp.Basic) -> int:
    """The deepest nesting of summation indices in ``e`` (a ``Sum`` with $k$ limits adds $k$)."""
    if isinstance(e, sp.Sum):
        return len(e.limits) + _height(e.function)
    return max((_height(a) for a in e.args), default=0)


def _canonical(expr: sp.Expr, search: bool, depth: int = 0) -> sp.Expr:
    r"""Every nest of sums in ``expr`` as one ``Sum`` over renamed indices (stage 3), bottom-up; an identity.

    A sum's summand is renamed factor by factor first, so equal sums inside become identical and sympy merges their
    powers (a sum over the index of a softmax numerator against the same sum in its denominator); then every sum
    left in product position (a power $p\ge1$ as $p$ copies, each with fresh indices) joins the nest. The indices get
    names carrying the height of the nest: with ``search``, the renaming within groups of equal bounds whose
    summand is smallest in sympy's sort order (canonical; the indices are first named by position, ``depth``
    keeping these names apart from those inside, so the sums inside are renamed deterministically); without, the
    positional one (sums written alike become equal)."""
    if expr.is_Atom or isinstance(expr, sp.Indexed):
        return expr
    if not isinstance(expr, sp.Sum):
        return expr.func(*[_canonical(a, search, depth) for a in expr.args])
    limits, function = list(expr.limits), expr.function
    if search:  # positional names, so the sums inside are renamed deterministically
        place = {v: sp.Symbol(f"{RESERVED}p{depth}_{k}", integer=True) for k, (v, _, _) in enumerate(limits)}
        limits, function = [(place[v], lo, hi) for v, lo, hi in limits], function.xreplace(place)
    factors = []
    for f in sp.Mul.make_args(_canonical(function, search, depth + 1)):
        base, copies = (f.base, int(f.exp)) if isinstance(f, sp.Pow) and f.exp.is_Integer and f.exp > 0 else (f, 1)
        if not isinstance(base, sp.Sum):
            factors.append(f)
            continue
        for _ in range(copies):  # a canonical sum is one nest: its summand has no sum in product position
            fresh = {v: sp.Dummy(str(v), integer=True) for v, _, _ in base.limits}
            limits += [(fresh[v], lo, hi) for v, lo, hi in base.limits]
            factors.append(base.function.xreplace(fresh))
    indices = {v for v, _, _ in limits}
    if any((sp.sympify(lo).free_symbols | sp.sympify(hi).free_symbols) & indices for _, lo, hi in limits):
        raise ValueError("a bound mentions a summation index (triangular sum): not decided here")
    body = sp.Mul(*factors)
    groups: dict[tuple, list] = {}
    for v, lo, hi in limits:
        groups.setdefault((lo, hi), []).append(v)
    keys = sorted(groups, key=sp.default_sort_key)
    count = math.prod(math.factorial(len(groups[key])) for key in keys)
    if search and count > MAX_RENAMINGS:
        raise ValueError(f"too many renamings of summation indices ({count}) for {sp.sstr(expr)[:120]}")
    height = _height(body) + len(limits)
    names = [
        [sp.Symbol(f"{RESERVED}{height}_{g}_{k}", integer=True) for k in range(len(groups[key]))]
        for g, key in enumerate(keys)
    ]

    def renamed(order: tuple) -> sp.Expr:
        return body.xreplace({v: nm for grp, ns in zip(order, names) for v, nm in zip(grp, ns)})

    if search and count > 1:
        orders = itertools.product(*[itertools.permutations(groups[key]) for key in keys])
        best = min((renamed(order) for order in orders), key=sp.default_sort_key)
    else:
        best = renamed(tuple(groups[key] for key in keys))
    bounds = [(nm, lo, hi) for key, ns in zip(keys, names) for nm, (lo, hi) in zip(ns, [key] * len(ns))]
    return sp.Sum(best, *bounds)


# ---------------------------------------------------------------------- 4. cancellation
def _atoms_as_symbols(e: sp.Expr, table: dict) -> sp.Expr:
    """``e`` as a rational function of symbols: every sum, exponential, function or entry becomes one symbol."""
    if e.is_Number or isinstance(e, sp.Symbol):
        return e
    if isinstance(e, sp.Add | sp.Mul):
        return e.func(*[_atoms_as_symbols(a, table) for a in e.args])
    if isinstance(e, sp.Pow) and e.exp.is_Integer:
        return _atoms_as_symbols(e.base, table) ** e.exp
    if isinstance(e, sp.exp):  # sympy writes (e^x)^k as e^{kx}: name e^x once, e^{kx} is its k-th power
        out = sp.Integer(1)
        for term in sp.Add.make_args(e.args[0]):
            c, rest = term.as_coeff_Mul()
            base = sp.exp(rest) if c.is_Integer else sp.exp(term)
            if base not in table:
                table[base] = sp.Dummy(f"atom_{len(table)}")
            out *= table[base] ** (c if c.is_Integer else 1)
        return out
    if e not in table:
        table[e] = sp.Dummy(f"atom_{len(table)}")
    return table[e]


def reduce(expr: Any, ranges: Ranges | None = None) -> sp.Expr:
    r"""The normal form of ``expr`` (module docstring): a cancelled rational function of canonical sums,
    exponentials and entries, equal to ``expr`` for every value of the bounds; 0 proves ``expr == 0``.

    ``ranges`` maps a free index to its range ``(lo, hi)`` (e.g. $\tau\mapsto(1,T)$): it decides ``Piecewise``
    conditions and Kronecker deltas. Raises ``ValueError`` for what is not decided here (module docstring)."""
    ranges = dict(ranges or {})
    e = sp.sympify(expr)
    if any(str(s).startswith(RESERVED) for s in e.free_symbols):
        raise ValueError(f"the name prefix {RESERVED!r} is reserved for summation indices")
    if ranges and e.has(sp.Piecewise):
        e = decide_in_ranges(e, ranges)
    table: dict = {}
    canonical = _canonical(_canonical(_normal(e, ranges), search=False), search=True)
    rational = _atoms_as_symbols(canonical, table)
    if any(x.exp.is_negative for x in rational.atoms(sp.Pow)):
        out = sp.cancel(sp.together(rational))
    else:  # a polynomial in the atoms: expanding it is its normal form
        out = sp.expand(rational)
    return out.xreplace({sym: atom for atom, sym in table.items()})


def entries(base: sp.IndexedBase, *lead: Any) -> Callable[..., sp.Expr]:
    r"""The entry function $(p,q)\mapsto\mathrm{base}_{\mathrm{lead},p,q}$ of an indexed matrix (``lead``: the
    leading indices, e.g. the constraint $j$ of $A_j$)."""
    return lambda *idx: base[(*lead, *idx)]


def frobenius(f: Callable[..., Any], g: Callable[..., Any], d: Any, p: sp.Symbol, q: sp.Symbol) -> sp.Expr:
    r"""$\langle F,G\rangle=\sum_{p=1}^d\sum_{q=1}^dF_{pq}G_{pq}$ of two $d\times d$ matrices given by their entry
    functions ``f(p, q)``, ``g(p, q)`` (summed over the index symbols ``p``, ``q``)."""
    return sp.Sum(f(p, q) * g(p, q), (p, 1, d), (q, 1, d))


def reducer(ranges: Ranges | None = None) -> Callable[[Any], sp.Expr]:
    r"""The ``method`` of a :class:`~attsvm.symbolic.checks.Symbolic` check in index notation: :func:`reduce` with
    the free indices' ``ranges`` (e.g. $\tau\mapsto(1,T)$)."""
    return lambda e: reduce(e, ranges)


def substitute(expr: Any, base: sp.IndexedBase, value: Callable[..., Any]) -> sp.Expr:
    r"""Replace every entry ``base[i, ...]`` of ``expr`` by ``value(i, ...)`` (e.g. a slack $s_j$ by
    $\langle W,A_j\rangle-1$ written as a sum; the summation indices of ``value`` must not clash with ``i``)."""
    return sp.sympify(expr).replace(
        lambda x: isinstance(x, sp.Indexed) and x.base == base, lambda x: sp.sympify(value(*x.indices))
    )
