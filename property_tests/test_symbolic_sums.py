"""``attsvm.symbolic.sums.reduce`` decides identities of finite sums in index notation soundly.

* the reduced form of an expression has its value for concrete sizes; true identities that need Kronecker
  deltas, exchanged or renamed summations, shifted ranges, counting an unused index, pulling factors into sums or
  rational functions of sums (the softmax) reduce to 0, and each is also checked numerically; planted false ones
  (a wrong sign, a wrong range, a transposed index, a product of sums against the sum of products, a shadowed
  index, different bounds) do not, and are false numerically too;
* what is not decided is refused or left alone: triangular sums, reserved names, a delta whose partner index is
  not known to lie in the range, a declared range of a free index that a summation index of the same name shadows,
  an atom against a symbol that has its internal name;
* soundness on random expressions (sums, products, powers, quotients, exponentials, Kronecker deltas, lower bounds
  0, 1, 2): the reduced form and the expression agree after evaluating every sum at concrete bounds with random
  integer entries (an independent evaluation by sympy's ``doit``).
"""

from __future__ import annotations

import random

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from attsvm.symbolic import builders as B
from attsvm.symbolic.sums import MAX_RENAMINGS, reduce, reducer

T = sp.Symbol("T", integer=True, positive=True)
d = sp.Symbol("d", integer=True, positive=True)
m = sp.Symbol("m", integer=True, positive=True)
t, tau, u, j, k, p, q = (sp.Symbol(c, integer=True, positive=True) for c in ("t", "tau", "u", "j", "k", "p", "q"))
a, g, h, x, w, z = (sp.IndexedBase(c, real=True) for c in ("a", "g", "h", "x", "w", "z"))
lam, mu, A = (sp.IndexedBase(c, real=True) for c in ("lam", "mu", "A"))
c0 = sp.Symbol("c", real=True)
RNG = {t: (1, T), tau: (1, T), j: (1, d), k: (1, d)}


def S(v):
    return B.softmax_entry(a, v, u, T)


def Ts(body, v=t, lo=1):
    return sp.Sum(body, (v, lo, T))


def numeric(expr, sizes: dict, seed: int = 0) -> float:
    """``expr`` for concrete sizes (at least 2) with random entries, every Sum written out and the free indices
    set to distinct values."""
    e = sp.sympify(expr).subs(sizes)
    e = e.subs({t: 1, tau: 2, j: 1, k: 2})
    e = e.doit()
    rnd = random.Random(seed)
    # atoms in a fixed order (a set's order follows the string hash seed) and nonzero values, so that the value of a
    # planted false identity is the same on every run and a zero entry cannot hide it
    atoms = sorted(e.atoms(sp.Indexed), key=sp.srepr)
    vals = {x_: sp.Rational(rnd.choice((-1, 1)) * rnd.randint(1, 9), rnd.randint(1, 5)) for x_ in atoms}
    free = sorted((s for s in e.free_symbols if s not in sizes), key=sp.srepr)
    vals.update({s: sp.Rational(rnd.randint(1, 9), 7) for s in free})
    return float(e.xreplace(vals).evalf(30))


# ---------------------------------------------------------------------- fixed identities, true and planted false
TRUE = {
    "softmax Jacobian": (sp.diff(S(t), a[tau]), S(t) * (sp.KroneckerDelta(t, tau) - S(tau))),
    "null vector": (Ts(S(t) * (sp.KroneckerDelta(t, tau) - S(tau))), 0),
    "shift": (sp.exp(a[t] + p) / Ts(sp.exp(a[u] + p), u), S(t)),
    "Fubini": (Ts(sp.Sum(x[t, j] * g[t] * z[j], (j, 1, d))), sp.Sum(Ts(g[t] * x[t, j]) * z[j], (j, 1, d))),
    "range from 2": (Ts(g[t], lo=2), Ts(g[t]) - g[1]),
    "range from 0": (Ts(g[t], lo=0), Ts(g[t]) + g[0]),
    "variance": (
        Ts(S(t) * g[t] ** 2) - Ts(S(t) * g[t]) ** 2,
        sp.Rational(1, 2) * Ts(Ts(S(t) * S(tau) * (g[t] - g[tau]) ** 2, tau)),
    ),
    "logit derivative": (sp.diff(sp.Sum(x[t, p] * w[p, q] * z[q], (q, 1, d), (p, 1, d)), w[j, k]), x[t, j] * z[k]),
    "exchange and pull factors": (
        sp.Sum(w[p, q] * sp.Sum(g[u] * x[u, p, q], (u, 1, T)), (p, 1, d), (q, 1, d)),
        sp.Sum(g[u] * sp.Sum(w[p, q] * x[u, p, q], (p, 1, d), (q, 1, d)), (u, 1, T)),
    ),
    "square of a sum": (Ts(g[u] * x[u, 1], u) ** 2, sp.Sum(g[u] * g[p] * x[u, 1] * x[p, 1], (u, 1, T), (p, 1, T))),
    "square inside a sum": (
        sp.Sum(Ts(x[j, u], u) ** 2, (j, 1, d)),
        sp.Sum(x[j, u] * x[j, p], (u, 1, T), (p, 1, T), (j, 1, d)),
    ),
    "shadowed index": (Ts(g[u] * Ts(h[u], u), u), Ts(g[u], u) * Ts(h[p], p)),
    "unused index": (Ts(c0, u), T * c0),
    "unused index from 2": (Ts(g[1], u, lo=2), (T - 1) * g[1]),
}
FALSE = {
    "wrong sign": (sp.diff(S(t), a[tau]), S(t) * (sp.KroneckerDelta(t, tau) + S(tau))),
    "wrong range": (Ts(g[t], lo=2), Ts(g[t])),
    "transposed": (
        sp.diff(sp.Sum(x[t, p] * w[p, q] * z[q], (q, 1, d), (p, 1, d)), w[j, k]),
        x[t, k] * z[j],
    ),
    "variance without the half": (
        Ts(S(t) * g[t] ** 2) - Ts(S(t) * g[t]) ** 2,
        Ts(Ts(S(t) * S(tau) * (g[t] - g[tau]) ** 2, tau)),
    ),
    "exchange, twice the right side": (
        sp.Sum(w[p, q] * sp.Sum(g[u] * x[u, p, q], (u, 1, T)), (p, 1, d), (q, 1, d)),
        2 * sp.Sum(g[u] * sp.Sum(w[p, q] * x[u, p, q], (p, 1, d), (q, 1, d)), (u, 1, T)),
    ),
    "sum of squares for the square of the sum": (Ts(g[u] * x[u, 1], u) ** 2, Ts(g[u] ** 2 * x[u, 1] ** 2, u)),
    "product of sums for the sum of products": (Ts(g[u], u) * Ts(h[u], u), Ts(g[u] * h[u], u)),
    "shadowed index captured": (Ts(g[u] * Ts(h[u], u), u), Ts(g[u] * h[u], u)),
    "unused index not counted": (Ts(c0, u), c0),
    "different bounds": (Ts(g[u], u), sp.Sum(g[u], (u, 1, d))),
}


@pytest.mark.parametrize("name", sorted(TRUE))
def test_true_identities_reduce_to_zero(name):
    lhs, rhs = TRUE[name]
    assert reduce(lhs - rhs, RNG) == 0
    assert reducer(RNG)(lhs - rhs) == 0
    for sizes in ({T: 3, d: 2}, {T: 2, d: 3}):  # and the identity really holds for concrete sizes
        assert abs(numeric(lhs - rhs, sizes)) < 1e-20
        for side in (lhs, rhs):  # and reducing one side keeps its value
            assert abs(numeric(reduce(side, RNG) - side, sizes)) < 1e-20


@pytest.mark.parametrize("name", sorted(FALSE))
def test_false_identities_do_not_reduce_to_zero(name):
    lhs, rhs = FALSE[name]
    assert reduce(lhs - rhs, RNG) != 0
    assert abs(numeric(lhs - rhs, {T: 3, d: 2})) > 1e-6  # they are false: the planted errors are real


def test_delta_outside_its_range_is_not_summed():
    """A Kronecker delta whose partner index is not known to lie in the range stays: nothing is proved."""
    free = sp.Symbol("r", integer=True)
    assert reduce(Ts(sp.KroneckerDelta(t, free) * g[t]) - g[free]) != 0
    assert reduce(Ts(sp.KroneckerDelta(t, free) * g[t]) - g[free], {free: (1, T)}) == 0
    assert reduce(sp.Sum(sp.KroneckerDelta(t, free) * g[t], (t, 1, 2)) - g[free], {free: (1, T)}) != 0


def test_a_summation_index_shadows_the_declared_range_of_its_name():
    r"""Inside $\sum_{k=1}^{2}$ the index $k$ runs over $\{1,2\}$, not over the range declared for a free $k$: so
    $\sum_{k=1}^{2}\sum_{t=1}^{T}\delta_{tk}g_t$ is $\sum_{k\le\min(2,T)}g_k$, not $g_1+g_2$ (false for $T=1$)."""
    e = sp.Sum(sp.Sum(sp.KroneckerDelta(t, k) * g[t], (t, 1, T)), (k, 1, 2))
    assert reduce(e - g[1] - g[2], {k: (1, T)}) != 0
    assert numeric(e - g[1] - g[2], {T: 1, d: 1}) != 0  # false for T = 1
    # within its own range the delta is summed: sum_{k=1}^{T} sum_{t=1}^{T} delta_tk g_t = sum_k g_k
    assert reduce(sp.Sum(sp.Sum(sp.KroneckerDelta(t, k) * g[t], (t, 1, T)), (k, 1, T)) - Ts(g[k], k)) == 0


def test_atoms_are_not_confused_with_symbols_of_the_same_name():
    assert reduce(sp.exp(g[1]) - sp.Symbol("atom_0")) != 0


def test_reserved_index_names_are_refused():
    bad = sp.Symbol("sum_index_height_1", integer=True)
    with pytest.raises(ValueError, match="reserved"):
        reduce(Ts(g[t]) - bad)


@pytest.mark.parametrize(
    "expr",
    [
        sp.Sum(sp.Sum(g[t] * h[tau], (tau, t, T)), (t, 1, T)),  # a lower bound that is an index
        sp.Sum(sp.Sum(lam[j], (j, 1, k)), (k, 1, m)),  # an upper bound that is an index
        sp.Sum(lam[j], (j, 1, k), (k, 1, m)),  # ... in one Sum with two limits
        sp.Sum(lam[j], (j, 1, j)),  # a bound named like its own index
        sp.Sum(lam[k] * sp.Sum(mu[j], (j, 1, k)), (k, 1, m)),  # ... of a sum in product position
    ],
    ids=["lower", "upper", "limits", "own", "product"],
)
def test_triangular_sums_are_refused(expr):
    with pytest.raises(ValueError, match="triangular|lower bounds"):
        reduce(expr)


def test_too_many_renamings_are_refused():
    n = 9  # 9! > MAX_RENAMINGS index renamings of one nest
    idx = sp.symbols(f"i0:{n}", integer=True)
    assert MAX_RENAMINGS < 362880
    with pytest.raises(ValueError, match="renamings"):
        reduce(sp.Sum(A[idx] * lam[idx[0]], *[(i, 1, m) for i in idx]))


# ---------------------------------------------------------------------- soundness on random expressions
POOL = (j, k, p)
RANGES = {x_: (1, m) for x_ in POOL}  # the free indices are evaluated at 1


def _leaf():
    idx = st.sampled_from([*POOL, sp.Integer(1), sp.Integer(2)])
    return st.one_of(
        st.builds(lambda a_: lam[a_], idx),
        st.builds(lambda a_, b_: A[a_, b_, 1], idx, idx),
        st.builds(lambda a_, b_: sp.KroneckerDelta(a_, b_), idx, idx),
        st.just(c0),
        st.integers(-2, 2).map(sp.Integer),
    )


def _grow(children):
    bound = st.sampled_from([m, sp.Integer(2), m + 1])
    return st.one_of(
        st.builds(lambda a_, b_: a_ + b_, children, children),
        st.builds(lambda a_, b_: a_ * b_, children, children),
        st.builds(lambda a_, b_: a_ / (1 + b_**2), children, children),
        st.builds(lambda a_: a_**2, children),
        st.builds(lambda a_: sp.exp(a_ / 2), children),
        st.builds(
            lambda body, x_, lo, hi: sp.Sum(body, (x_, lo, hi)),
            children,
            st.sampled_from(POOL),
            st.integers(0, 2),
            bound,
        ),
    )


EXPRS = st.recursive(_leaf(), _grow, max_leaves=7)


def _evaluate(e: sp.Expr, mval: int, rng_seed: int) -> sp.Float:
    """Every free index 1, ``m = mval``, every sum expanded by sympy, then random integer entries, to 40 digits."""
    e = sp.sympify(e).subs({x_: 1 for x_ in POOL}).subs(m, mval).doit()

    def value(x_):  # a function of the entry alone (not of the order of visits)
        return sp.Integer(random.Random(f"{rng_seed}:{sp.srepr(x_)}").randint(-5, 5))

    e = e.replace(lambda x_: isinstance(x_, sp.Indexed), value)
    return sp.N(e.subs(c0, sp.Rational(3, 7)), 40)


@given(EXPRS, st.integers(1, 3), st.integers(0, 10**6))
def test_reduced_form_agrees_with_direct_evaluation(expr, mval, seed):
    try:
        red = reduce(expr, RANGES)
    except ValueError:  # refused (too many renamings): nothing is claimed
        return
    want, got = _evaluate(expr, mval, seed), _evaluate(red, mval, seed)
    assert abs(got - want) <= sp.Float("1e-25", 40) * (1 + abs(want))
