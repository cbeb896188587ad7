"""Each strategy of :mod:`attsvm.strategies` produces what it promises, checked by independent computations
written here (an LP feasibility check with scipy HiGHS, an Att-SVM solved with cvxpy/Clarabel, exact
rational arithmetic), both for the Hypothesis strategies and for the batched numpy generator."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm import strategies as S
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.tolerances import tol


# ---------------------------------------------------------------------- independent checks
def _constraint_rows(ds: Dataset, alpha: np.ndarray) -> np.ndarray:
    """vec(A_it) for t != alpha_i, A_it = (x_ia - x_it) z_i^T, as rows (m, d*d) — written independently."""
    rows = []
    for i in range(ds.n):
        for t in range(ds.T):
            if t != alpha[i]:
                rows.append(np.outer(ds.X[i, alpha[i]] - ds.X[i, t], ds.Z[i]).ravel())
    return np.array(rows)


def lp_feasible(ds: Dataset, alpha: np.ndarray) -> bool:
    """Att-SVM(alpha) feasible iff the LP {W : <W, A_it> >= 1} is (HiGHS status 0 feasible, 2 infeasible)."""
    from scipy.optimize import linprog

    A = _constraint_rows(ds, alpha)
    r = linprog(np.zeros(A.shape[1]), A_ub=-A, b_ub=-np.ones(len(A)), bounds=(None, None), method="highs")
    assert r.status in (0, 2), r.message
    return r.status == 0


def lp_farkas(ds: Dataset, alpha: np.ndarray) -> np.ndarray | None:
    """A Farkas certificate mu >= 0, sum mu = 1, sum mu_it A_it = 0 (None if there is none)."""
    from scipy.optimize import linprog

    A = _constraint_rows(ds, alpha)
    m = len(A)
    r = linprog(
        np.zeros(m),
        A_eq=np.vstack([A.T, np.ones((1, m))]),
        b_eq=np.r_[np.zeros(A.shape[1]), 1.0],
        bounds=(0, None),
        method="highs",
    )
    assert r.status in (0, 2), r.message
    return r.x if r.status == 0 else None


def qp_svm(ds: Dataset, alpha: np.ndarray) -> np.ndarray:
    """W^mm_alpha by cvxpy + Clarabel (min ||W||_F s.t. margins >= 1)."""
    import cvxpy as cp

    A = _constraint_rows(ds, alpha)
    w = cp.Variable(A.shape[1])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), [A @ w >= 1])
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL, prob.status
    return np.asarray(w.value).reshape(ds.d, ds.d)


def local_optimality(ds: Dataset, alpha: np.ndarray) -> tuple[bool, list[tuple[int, int]]]:
    """(locally optimal?, support tokens) from the cvxpy solution."""
    W = qp_svm(ds, alpha)
    gam = ds.Y[:, None] * (ds.X @ ds.v)
    sup = []
    ok = True
    for i in range(ds.n):
        for t in range(ds.T):
            if t == alpha[i]:
                continue
            margin = (ds.X[i, alpha[i]] - ds.X[i, t]) @ W @ ds.Z[i]
            if abs(margin - 1) <= 1e3 * tol("active"):
                sup.append((i, t))
                ok &= bool(gam[i, alpha[i]] > gam[i, t])
    return ok, sup


def exact_scores(ds: Dataset) -> list[list[Fraction]]:
    return [
        [Fraction(ds.Y[i]) * sum(Fraction(ds.X[i, t, k]) * Fraction(ds.v[k]) for k in range(ds.d)) for t in range(ds.T)]
        for i in range(ds.n)
    ]


# ---------------------------------------------------------------------- strategies
def has_repeat(ds: Dataset) -> bool:
    """Some input (of some batch entry) has two equal tokens."""
    X = np.asarray(ds.X).reshape(-1, ds.T, ds.d)
    return any(len(np.unique(Xi, axis=0)) < ds.T for Xi in X)


def min_score_gap(ds: Dataset) -> float:
    """The smallest difference between two scores v^T x_it of one input (labels aside)."""
    c = np.sort(np.einsum("...ntd,...d->...nt", ds.X, ds.v), -1)
    return float(np.min(np.diff(c, axis=-1)))


PAPER_FAMILY = ["paper", "overparam", "sequence", "causal", "prompt", "self_attention"]
SMALL = {
    "locally_optimal": {"n": (1, 3), "T": (3, 4), "d": (2, 3)},
    "not_locally_optimal": {"n": (1, 3), "T": (3, 4), "d": (2, 3)},
    "infeasible": {"T": (3, 5)},  # T = 2 is the deliberate duplicate (below)
}


@pytest.mark.parametrize("name", sorted(S.STRATEGIES))
def test_no_token_repeats_inside_an_input(name):
    """Every strategy, Hypothesis and numpy: the tokens of one input are distinct (by construction)."""

    @settings(max_examples=40, database=None)
    @given(S.STRATEGIES[name](**SMALL.get(name, {})))
    def check(ds):
        assert not has_repeat(ds)

    check()
    assert not has_repeat(S.batch(name, 200, seed=1, **SMALL.get(name, {})))


@given(S.infeasible(T=2, n=(1, 3)))
def test_infeasible_keeps_its_duplicate_at_T2(ds):
    i = int(np.flatnonzero([len(np.unique(Xi, axis=0)) < 2 for Xi in ds.X])[0])
    assert np.array_equal(ds.X[i, 0], ds.X[i, 1]) and not lp_feasible(ds, ds.alpha)


@pytest.mark.parametrize("name", ["dyadic", "feasible", "equal_scores", "locally_optimal"])
def test_repeats_true_allows_repeated_tokens(name):
    from hypothesis import find

    ds = find(
        S.STRATEGIES[name](repeats=True, **SMALL.get(name, {})),
        has_repeat,
        settings=settings(database=None, max_examples=500),
    )
    assert has_repeat(ds)


@pytest.mark.parametrize("name", PAPER_FAMILY)
def test_paper_family_scores_apart(name):
    """Distinct scores in every input (unique opt for either label and every causal prefix), unit rows."""

    @settings(max_examples=40, database=None)
    @given(S.STRATEGIES[name]())
    def check(ds):
        assert min_score_gap(ds) >= S._GAP
        assert np.allclose(np.linalg.norm(ds.X, axis=-1), 1, rtol=0, atol=1e-14)
        assert abs(np.linalg.norm(ds.v) - 1) <= 1e-14

    check()


@pytest.mark.parametrize("name", PAPER_FAMILY)
@pytest.mark.parametrize("seed", [0, 3])
def test_batch_keeps_the_generate_numbers(name, seed):
    """The numpy path draws the paper law as :mod:`attsvm.generate` does: the same arrays for the seed drawn from
    the batch seed (after the sizes)."""
    from attsvm import generate

    params = {"n": 3, "T": 4, **({"d_extra": 1} if name == "overparam" else {"d": 3})}
    b = S.batch(name, 5, seed=seed, **params)
    rng = np.random.default_rng(seed)
    S.plan(name, params).draw_sizes(lambda lo, hi: rng.integers(lo, hi + 1))  # as batch() does
    s = int(rng.integers(0, 2**32 - 1))
    d = 4 if name == "overparam" else 3
    if name == "sequence":
        ref = generate.sequence(3, 4, d, K=b.K, seed=s, B=5)
    elif name == "causal":
        ref = generate.causal(3, 4, d, seed=s, B=5)
    else:
        ref = generate.paper_law(3, 4, d, seed=s, B=5, self_attention=name == "self_attention")
    assert np.array_equal(b.X, ref.X) and np.array_equal(b.Y, ref.Y) and np.array_equal(b.v, ref.v)
    zref = np.broadcast_to(ref.Z[..., :1, :], ref.Z.shape) if name == "prompt" else ref.Z
    assert b.kind == ref.kind and np.array_equal(b.Z, zref)


@pytest.mark.parametrize("generic", [False, True])
def test_canonical_tokens_are_valid(generic):
    """The last resort of the paper-law repair: distinct scores, and affinely independent for T <= d + 1."""
    rng = np.random.default_rng(0)
    for d in range(2, 9):
        v = S._unit_rows(rng.standard_normal((3, d)))
        for T in range(2, (d + 2 if generic else 40)):
            C = S._canonical_tokens(v, T, generic)
            assert np.allclose(np.linalg.norm(C, axis=-1), 1, rtol=0, atol=1e-14)
            c = np.sort(np.einsum("btd,bd->bt", C, v), -1)
            assert np.min(np.diff(c, axis=-1)) >= S._GAP
            if generic:
                assert np.min(S._sigma_min(C[:, 1:] - C[:, :1])) >= S._GAP


@settings(max_examples=60)
@given(
    X=st.integers(1, 5).flatmap(
        lambda T: st.lists(st.lists(st.integers(-2, 2), min_size=3, max_size=3), min_size=T, max_size=T)
    ),
    data=st.data(),
)
def test_distinct_rows(X, data):
    X = np.array(X, dtype=np.float64) / 4
    T = len(X)
    frozen = np.zeros(T, dtype=bool)
    if T and data.draw(st.booleans()):  # freeze the first occurrence of each distinct row
        _, first = np.unique(X, axis=0, return_index=True)
        frozen[first[: data.draw(st.integers(0, len(first)))]] = True
    sign = data.draw(st.sampled_from([1.0, -1.0]))
    out = S._distinct(X, 2, 0.25, frozen=frozen, sign=np.array(sign))
    assert len(np.unique(out, axis=0)) == T  # distinct
    assert np.array_equal(out[frozen], X[frozen]) and np.array_equal(out[:, :2], X[:, :2])
    unique_before = np.array([not np.any(np.all(X[:t] == X[t], -1)) for t in range(T)], dtype=bool)
    clash_frozen = np.array([np.any(np.all(X[frozen] == X[t], -1)) and not frozen[t] for t in range(T)], dtype=bool)
    keep = unique_before & ~clash_frozen
    assert np.array_equal(out[keep], X[keep])  # a row that repeats nothing stays
    moved = ~np.all(out == X, -1)
    assert np.all(sign * (out[moved, 2] - X[moved, 2]) > 0)  # moved the way asked, by whole steps
    assert np.all((out[:, 2] * 4) == np.round(out[:, 2] * 4))


@given(S.paper(n=(1, 3), T=(2, 4), d=(2, 4)))
def test_paper_law_unit_norms_and_labels(ds):
    assert np.allclose(np.linalg.norm(ds.X, axis=-1), 1, rtol=0, atol=1e-14)
    assert np.allclose(np.linalg.norm(ds.Z, axis=-1), 1, rtol=0, atol=1e-14)
    assert abs(np.linalg.norm(ds.v) - 1) <= 1e-14
    assert set(np.unique(ds.Y)) <= {-1.0, 1.0}
    g = ds.scores
    srt = np.sort(g, -1)
    assert np.all(srt[:, -1] > srt[:, -2])  # unique opt


@given(S.dyadic(n=(1, 3), T=(2, 4), d=(1, 3), bits=3))
def test_dyadic_is_exact_and_opt_unique(ds):
    for a in (ds.X, ds.Z, ds.v):
        scaled = np.asarray(a) * 2**3
        assert np.all(scaled == np.round(scaled))
    assert np.all(np.any(ds.Z != 0, axis=-1))
    for row in exact_scores(ds):
        best = max(row)
        assert sum(r == best for r in row) == 1


@given(S.equal_scores(n=(1, 3), T=(2, 5), d=(2, 4)))
def test_equal_scores_bit_exact_and_feasible(ds):
    g = ds.scores
    for i in range(ds.n):
        others = np.delete(g[i], ds.opt[i])
        assert np.all(others == others[0])  # bit-equal, not approximately equal
        assert g[i, ds.opt[i]] > others[0]
    assert np.array_equal(ds.v, np.eye(ds.d)[0])
    assert lp_feasible(ds, ds.opt)


@given(S.overparam(n=(1, 4), T=(2, 5), d_extra=(0, 2)))
def test_overparam_dimension_and_genericity(ds):
    assert ds.d >= max(ds.T - 1, ds.n)
    # generic: each input's tokens affinely independent, the queries linearly independent
    for i in range(ds.n):
        assert np.linalg.matrix_rank(ds.X[i, 1:] - ds.X[i, 0]) == ds.T - 1
    assert np.linalg.matrix_rank(ds.Z) == ds.n


@given(S.self_attention(n=(1, 3), T=(2, 4), d=(2, 3)))
def test_self_attention_queries_are_first_tokens(ds):
    assert ds.kind == "self" and np.array_equal(ds.Z, ds.X[:, 0])


@given(S.feasible(n=(1, 4), T=(2, 4), d=(1, 3), alpha="opt"))
def test_feasible_opt(ds):
    assert ds.alpha is not None
    assert np.array_equal(ds.alpha, ds.scores.argmax(-1))
    srt = np.sort(ds.scores, -1)
    assert np.all(srt[:, -1] > srt[:, -2])
    assert lp_feasible(ds, ds.alpha)


@given(S.feasible(n=(1, 4), T=(2, 4), d=(1, 3), alpha="random"))
def test_feasible_random_alpha(ds):
    assert lp_feasible(ds, ds.alpha)


@settings(max_examples=10)
@given(S.locally_optimal(n=(1, 3), T=(3, 4), d=(2, 3)))
def test_locally_optimal_not_opt(ds):
    alpha = ds.alpha
    assert np.any(alpha != ds.scores.argmax(-1))  # some input selects a non-optimal token
    ok, sup = local_optimality(ds, alpha)
    assert sup, "a locally optimal selection here has SVM-neighbours"
    assert ok
    W = qp_svm(ds, alpha)  # the construction's W^mm_alpha = e_1 e_d^T
    E = np.zeros((ds.d, ds.d))
    E[0, -1] = 1
    assert np.allclose(W, E, atol=1e-6)


@settings(max_examples=10)
@given(S.not_locally_optimal(n=(1, 3), T=(3, 4), d=(2, 3)))
def test_not_locally_optimal(ds):
    assert lp_feasible(ds, ds.alpha)
    ok, sup = local_optimality(ds, ds.alpha)
    assert sup and not ok


@given(S.infeasible(n=(1, 3), T=(2, 4), d=(1, 3)))
def test_infeasible_has_farkas(ds):
    assert not lp_feasible(ds, ds.alpha)
    mu = lp_farkas(ds, ds.alpha)
    assert mu is not None and np.all(mu >= -1e-12)
    # and an exact one: the two tokens around the selected midpoint (or the duplicate)
    A = _constraint_rows(ds, ds.alpha)
    zero_rows = np.all(A == 0, axis=1)
    exact = zero_rows.any() or any(np.array_equal(A[j], -A[k]) and A[j].any() for j in range(len(A)) for k in range(j))
    assert exact


@given(S.sequence(n=(1, 2), T=(2, 3), d=(2, 3), K=(1, 3)))
def test_sequence_shape(ds):
    assert ds.kind == "sequence" and ds.Z.shape == (ds.n, ds.K, ds.d) and ds.Y.shape == (ds.n, ds.K)


@given(S.causal(n=(1, 2), T=(2, 4), d=(2, 3)))
def test_causal_shape(ds):
    assert ds.kind == "causal" and ds.Y.shape == (ds.n, ds.T)


@given(S.prompt(n=(1, 3), T=(2, 4), d=(2, 3)))
def test_prompt_shared_query(ds):
    assert np.all(ds.Z == ds.Z[0])


@given(S.relu_head(3))
def test_relu_head_unit_frobenius(V):
    assert V.shape == (3, 3) and abs(np.linalg.norm(V) - 1) <= 1e-14


# ---------------------------------------------------------------------- shrinking
@pytest.mark.parametrize(
    "name,params,floor",
    [
        ("paper", {}, (1, 2, 2)),
        ("dyadic", {}, (1, 2, 1)),
        ("feasible", {}, (1, 2, 1)),
        ("locally_optimal", {}, (1, 3, 2)),
        ("infeasible", {}, (1, 2, 1)),
        ("equal_scores", {}, (1, 2, 2)),
        ("sequence", {}, (1, 2, 2)),
        ("causal", {}, (1, 2, 2)),
        ("prompt", {}, (1, 2, 2)),
        ("self_attention", {}, (1, 2, 2)),
    ],
)
def test_shrinks_to_smallest_sizes_and_simple_numbers(name, params, floor):
    from hypothesis import find

    n, T, d = floor
    rng = {"n": (n, n + 1), "T": (T, T + 1), "d": (d, d + 1), **params}  # small ranges keep shrinking fast
    ds = find(S.STRATEGIES[name](**rng), lambda ds: True, settings=settings(database=None, max_examples=5))
    assert (ds.n, ds.T, ds.d) == floor
    if name in ("dyadic", "infeasible"):
        assert np.count_nonzero(ds.X) <= 2  # numbers shrink to zero (up to the structural bump)
    if name in PAPER_FAMILY:  # every Gaussian shrinks to 0: v = e_1 and the canonical tokens
        assert np.array_equal(ds.v, np.eye(d)[0]) and np.array_equal(ds.Y, np.ones_like(ds.Y))
        assert np.allclose(ds.X[0], S._canonical_tokens(ds.v, T), rtol=0, atol=1e-15)


def test_lowering_sizes_keeps_the_other_numbers():
    """Shrinking a planted failure that needs one input, one token and one coordinate of it: the shrinker deletes
    the other inputs' and tokens' spans and drops the padded last coordinates without moving the witness."""
    from hypothesis import find

    def witness(ds):  # some token with |x_1| > 0.9 and an input whose label is -1 (so n and d can both shrink)
        return bool(np.any((np.abs(ds.X[..., 0]) > 0.9) & (ds.Y[..., None] < 0)))

    ds = find(S.paper(n=(1, 4), T=(2, 5), d=(2, 4)), witness, settings=settings(database=None, max_examples=500))
    assert (ds.n, ds.T, ds.d) == (1, 2, 2)


def test_unknown_strategy_and_parameter_are_input_errors():
    with pytest.raises(InputError, match="unknown data strategy"):
        S.for_hypotheses({"data": "nope"})
    with pytest.raises(InputError, match="unknown hypothesis"):
        S.batch("paper", 2, seed=0, colour=1)
    with pytest.raises(InputError, match="lo > hi"):
        S.for_hypotheses({"data": "paper", "n": (3, 1)})


def test_split_hypotheses_takes_only_strategy_keys():
    name, params = S.split_hypotheses({"data": "feasible", "n": 2, "alpha": "random"})
    assert name == "feasible" and params == {"n": 2, "alpha": "random"}
    with pytest.raises(InputError, match="unknown hypothesis 'steps'"):
        S.split_hypotheses({"data": "feasible", "n": 2, "steps": 100})


# ---------------------------------------------------------------------- batched numpy counterparts
@pytest.mark.parametrize("seed", [0, 1])
def test_batch_feasible_and_local(seed):
    b = S.batch("feasible", 6, seed=seed, n=3, T=4, d=2, alpha="opt")
    assert b.X.shape == (6, 3, 4, 2)
    for ds in b:
        assert np.array_equal(ds.alpha, ds.scores.argmax(-1)) and lp_feasible(ds, ds.alpha)
    lb = S.batch("locally_optimal", 4, seed=seed, n=2, T=4, d=3)
    for ds in lb:
        ok, sup = local_optimality(ds, ds.alpha)
        assert ok and sup and np.any(ds.alpha != ds.scores.argmax(-1))
    ib = S.batch("infeasible", 4, seed=seed, n=2, T=3, d=2)
    for ds in ib:
        assert not lp_feasible(ds, ds.alpha)


def test_batch_equal_scores_and_determinism():
    b1 = S.batch("equal_scores", 5, seed=3, n=2, T=4, d=3)
    b2 = S.batch("equal_scores", 5, seed=3, n=2, T=4, d=3)
    assert np.array_equal(b1.X, b2.X) and np.array_equal(b1.Z, b2.Z)
    g = b1.scores
    for b in range(5):
        for i in range(2):
            o = g[b, i].argmax()
            rest = np.delete(g[b, i], o)
            assert np.all(rest == rest[0]) and g[b, i, o] > rest[0]
    p = S.batch("paper", 7, seed=0, n=(2, 4), T=3, d=2)
    assert p.batch_size == 7 and 2 <= p.n <= 4


@pytest.mark.parametrize("name", sorted(S.STRATEGIES))
def test_every_strategy_batches(name):
    b = S.batch(name, 3, seed=0)
    assert b.batched and b.batch_size == 3
