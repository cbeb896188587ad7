"""Token-priority graphs (:mod:`attsvm.ntp.graph`) against references written here from the definitions:
reachability by a boolean Floyd–Warshall closure (a, b share an SCC iff each reaches the other), the graphs and
the graph-SVM constraints by loops over samples and positions, and the generators' graph promises."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attsvm import strategies as S
from attsvm.errors import InputError
from attsvm.ntp import generate
from attsvm.ntp.data import NTPData
from attsvm.ntp.graph import (
    graph_constraints,
    priority_graphs,
    strongly_connected_components,
    top_scc_mask,
)


# ---------------------------------------------------------------------- references
def closure(A: np.ndarray) -> np.ndarray:
    """Reflexive-transitive closure R[a, b]: b reachable from a (paths of length >= 0), Floyd–Warshall."""
    R = np.asarray(A, dtype=bool) | np.eye(len(A), dtype=bool)
    for k in range(len(A)):
        R |= R[:, k : k + 1] & R[k : k + 1, :]
    return R


def has_cycle(A: np.ndarray) -> bool:
    """A closed walk of length >= 1 (a self-loop or a cycle): some a reaches itself through an edge."""
    A = np.asarray(A, dtype=bool)
    return bool(np.any(np.diag(A)) or np.any((A.astype(int) @ closure(A).astype(int))[np.eye(len(A), dtype=bool)]))


def check_components(A: np.ndarray, ids: np.ndarray) -> None:
    """ids is a valid answer of strongly_connected_components for A (partition, numbering, order)."""
    K = len(A)
    assert ids.shape == (K,) and ids.dtype == np.int64
    R = closure(A)
    same = R & R.T
    assert np.array_equal(ids[:, None] == ids[None, :], same)
    if K:
        assert sorted(set(ids.tolist())) == list(range(int(ids.max()) + 1))  # ids 0..C-1, all used
    a, b = np.nonzero(A)
    assert np.all(ids[a] <= ids[b])  # topological order of the condensation
    if K:
        into0 = (ids[b] == 0) & (ids[a] != 0)
        assert not np.any(into0)  # id 0 is a source component


# ---------------------------------------------------------------------- digraphs
@st.composite
def digraphs(draw):
    K = draw(st.integers(0, 60))
    shape = draw(st.sampled_from(["random", "empty", "complete", "cycle", "cycles", "dag"]))
    loops = draw(st.booleans())
    A = np.zeros((K, K), dtype=bool)
    if shape == "random" and K:
        A = draw(hnp.arrays(bool, (K, K), elements=st.booleans()))
    elif shape == "complete":
        A = ~np.eye(K, dtype=bool)
    elif shape in ("cycle", "cycles") and K:
        perm = np.array(draw(st.permutations(range(K))), dtype=np.int64)
        cuts = sorted(draw(st.sets(st.integers(1, K - 1), max_size=4))) if shape == "cycles" and K > 1 else []
        for part in np.split(perm, cuts):  # disjoint cycles through a permutation's pieces
            A[part, np.roll(part, -1)] = True
        for _ in range(draw(st.integers(0, 3))):  # a few chords
            A[draw(st.integers(0, K - 1)), draw(st.integers(0, K - 1))] = True
    elif shape == "dag" and K:
        perm = np.array(draw(st.permutations(range(K))), dtype=np.int64)
        up = np.triu(draw(hnp.arrays(bool, (K, K), elements=st.booleans())), 1)
        A[np.ix_(perm, perm)] = up
    if loops and K:
        A |= np.diag(draw(hnp.arrays(bool, (K,), elements=st.booleans())))
    else:
        np.fill_diagonal(A, False)
    return A


@settings(max_examples=200, deadline=None)
@given(digraphs())
def test_tarjan_matches_mutual_reachability(A):
    check_components(A, strongly_connected_components(A))


def test_tarjan_on_fixed_shapes():
    K = 7
    for A in (np.zeros((K, K), bool), ~np.eye(K, dtype=bool), np.ones((K, K), bool), np.zeros((0, 0), bool)):
        check_components(A, strongly_connected_components(A))
    assert len(set(strongly_connected_components(np.zeros((K, K), bool)).tolist())) == K
    assert set(strongly_connected_components(~np.eye(K, dtype=bool)).tolist()) == {0}


def test_tarjan_is_iterative_on_long_paths_and_cycles():
    """K well beyond the recursion limit: a path has the unique topological numbering 0..K-1 along it, a cycle one
    component."""
    K = 4 * sys.getrecursionlimit()
    perm = np.random.default_rng(0).permutation(K)
    A = np.zeros((K, K), dtype=bool)
    A[perm[:-1], perm[1:]] = True
    ids = strongly_connected_components(A)
    assert np.array_equal(ids[perm], np.arange(K))
    A[perm[-1], perm[0]] = True
    assert np.array_equal(strongly_connected_components(A), np.zeros(K, dtype=np.int64))


def test_tarjan_bad_input():
    with pytest.raises(InputError, match="square"):
        strongly_connected_components(np.zeros((2, 3), bool))
    with pytest.raises(InputError, match="boolean"):
        strongly_connected_components(np.zeros((3, 3)))


# ---------------------------------------------------------------------- graphs of data, from the definition
@st.composite
def raw_ntp(draw):
    """Next-token data with arbitrary ids (repeats allowed inside a sequence), a visible or hidden query."""
    K = draw(st.integers(2, 6))
    T = draw(st.integers(2, 5))
    n = draw(st.integers(1, 8))
    qv = draw(st.booleans()) if T >= 3 else True
    tokens = draw(hnp.arrays(np.int64, (n, T), elements=st.integers(0, K - 1)))
    pos = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, (T if qv else T - 1) - 1)))
    E = np.c_[np.arange(K, dtype=float), np.ones(K)]
    return NTPData(E, tokens, tokens[np.arange(n), pos], qv)


def any_ntp():
    """The generators' and the strategy's data (every graph option) and raw data with repeats."""
    return st.one_of(
        raw_ntp(),
        S.ntp(graph="any", n=(1, 8), K=(2, 7)),
        S.ntp(graph="cyclic", n=(2, 8), query_visible=False),
        S.ntp(graph="acyclic", n=(1, 8)),
    )


def ref_graphs(ds: NTPData) -> dict[int, np.ndarray]:
    """query id -> adjacency, written from the definition: an edge y_i -> j per visible other token j."""
    out: dict[int, np.ndarray] = {}
    for i in range(ds.n):
        q, y = int(ds.tokens[i, -1]), int(ds.labels[i])
        A = out.setdefault(q, np.zeros((ds.K, ds.K), dtype=bool))
        for t in range(ds.T):
            if not ds.query_visible and t == ds.T - 1:
                continue
            j = int(ds.tokens[i, t])
            if j != y:
                A[y, j] = True
    return out


@settings(max_examples=150, deadline=None)
@given(any_ntp())
def test_priority_graphs_match_the_definition(ds):
    g = priority_graphs(ds)
    ref = ref_graphs(ds)
    assert g.queries.tolist() == sorted(ref)
    for r, q in enumerate(g.queries.tolist()):
        assert g.index(q) == r
        assert np.array_equal(g.adjacency[r], ref[q])
        check_components(ref[q], g.scc[r])
    with pytest.raises(KeyError):
        g.index(next(k for k in range(ds.K + 1) if k not in ref))


@settings(max_examples=150, deadline=None)
@given(any_ntp())
def test_graph_constraints_match_the_definition(ds):
    ref = ref_graphs(ds)
    reach = {q: closure(A) for q, A in ref.items()}
    eq: dict[tuple, int] = {}
    ineq: dict[tuple, int] = {}
    for i in range(ds.n):
        q, y = int(ds.tokens[i, -1]), int(ds.labels[i])
        for t in range(ds.T - (0 if ds.query_visible else 1)):
            j = int(ds.tokens[i, t])
            if j == y:
                continue
            if reach[q][y, j] and reach[q][j, y]:
                eq.setdefault((q, min(y, j), max(y, j)), i)
            else:
                ineq.setdefault((q, y, j), i)
    gc = graph_constraints(ds)
    for got, want, D, Zq, smp in (
        (gc.eq, eq, gc.D_eq, gc.Z_eq, gc.sample_eq),
        (gc.ineq, ineq, gc.D_in, gc.Z_in, gc.sample_in),
    ):
        assert got.dtype == np.int64 and got.shape == (len(want), 3)
        assert sorted(map(tuple, got.tolist())) == sorted(want)  # as many rows as distinct constraints
        assert D.shape == Zq.shape == (len(want), ds.d)
        for r, (q, y, j) in enumerate(got.tolist()):
            assert np.array_equal(D[r], ds.E[y] - ds.E[j]) and np.array_equal(Zq[r], ds.E[q])
            assert smp[r] == want[(q, y, j)]  # the first sample that produced it
    assert np.all(gc.eq[:, 1] < gc.eq[:, 2])


@settings(max_examples=150, deadline=None)
@given(any_ntp())
def test_top_scc_mask_is_the_highest_priority_component_present(ds):
    ref = ref_graphs(ds)
    g = priority_graphs(ds)
    mask = top_scc_mask(ds)
    assert np.array_equal(mask, top_scc_mask(ds, g))
    for i in range(ds.n):
        q, y = int(ds.tokens[i, -1]), int(ds.labels[i])
        R = closure(ref[q])
        vis = [t for t in range(ds.T) if ds.query_visible or t < ds.T - 1]
        want = [t in vis and R[y, ds.tokens[i, t]] and R[ds.tokens[i, t], y] for t in range(ds.T)]
        assert mask[i].tolist() == want
        # the label's component is the highest-priority one present: it reaches every visible token, and in the
        # topological numbering it is the smallest id among them
        assert all(R[y, ds.tokens[i, t]] for t in vis)
        ids = g.scc[g.index(q)][ds.tokens[i, vis]]
        assert np.array_equal(mask[i, vis], ids == ids.min())
        assert mask[i, ds.label_position[i]]


def test_hidden_query_is_outside_the_mask_even_in_the_label_component():
    """Both sequences end with 0, hidden; their visible parts (0, 1) and (1, 0) with labels 1 and 0 make the
    component {0, 1} of G^(0): the visible positions of both are in the mask, the hidden last one is not."""
    ds = NTPData(np.eye(2), np.array([[0, 1, 0], [1, 0, 0]]), np.array([1, 0]), query_visible=False)
    assert top_scc_mask(ds).tolist() == [[True, True, False], [True, True, False]]
    assert graph_constraints(ds).eq.tolist() == [[0, 0, 1]] and len(graph_constraints(ds).ineq) == 0


def test_graph_functions_take_single_next_token_data():
    b = generate.ntp(B=2)
    for f in (priority_graphs, top_scc_mask, graph_constraints):
        with pytest.raises(InputError, match="single"):
            f(b)


# ---------------------------------------------------------------------- the generators' graph promises
def cyclic_somewhere(ds: NTPData) -> bool:
    """Some G^(k) has two items that reach each other (by the closure, not by Tarjan)."""
    return any(np.any((R := closure(A)) & R.T & ~np.eye(ds.K, dtype=bool)) for A in ref_graphs(ds).values())


def acyclic_everywhere(ds: NTPData) -> bool:
    return not any(has_cycle(A) for A in ref_graphs(ds).values())


@pytest.mark.parametrize("qv", [True, False])
@pytest.mark.parametrize("vocab", generate.VOCABS)
def test_generated_graphs_keep_their_promise(vocab, qv):
    T = (2 if qv else 3, 4)
    for seed in range(15):
        rng = np.random.default_rng(seed)
        t = int(rng.integers(T[0], T[1] + 1))
        K = int(rng.integers(t, 7))
        d = K + 1 if vocab != "random" else 3
        n = int(rng.integers(2, 7))
        for ds in generate.ntp(n, t, K, d, vocab=vocab, graph="cyclic", seed=seed, B=3, query_visible=qv):
            assert cyclic_somewhere(ds)
        for ds in generate.ntp(n, t, K, d, vocab=vocab, graph="acyclic", seed=seed, B=3, query_visible=qv):
            assert acyclic_everywhere(ds)


@settings(max_examples=60, deadline=None)
@given(S.ntp(graph="cyclic", n=(2, 5)), S.ntp(graph="acyclic", n=(1, 6), T=(3, 4), query_visible=False))
def test_strategy_graphs_keep_their_promise(cyc, acyc):
    assert cyclic_somewhere(cyc)
    assert acyclic_everywhere(acyc)


def test_the_any_law_has_cycles_and_acyclic_draws():
    """graph='any' is not secretly one of the two families: both occur among its draws."""
    draws = list(generate.ntp(6, 4, 6, 8, seed=0, B=200))
    assert any(cyclic_somewhere(ds) for ds in draws) and any(acyclic_everywhere(ds) for ds in draws)
