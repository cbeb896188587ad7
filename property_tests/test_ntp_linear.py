"""attsvm.ntp.linear (linear NTP of arXiv 2402.18551 encoded as attention data): the encoding against a direct
cross-entropy of the decoder; the priority graphs and graph-SVM constraints it must induce; the key cross-check
W^fin (finite part, proved radius) = W^star (log-odds, 50 digits); the log-odds equations; hand-decided
compatibility and separability cases, and separability against the certified graph SVM."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attsvm.errors import InputError
from attsvm.ntp.finite import finite_part_of
from attsvm.ntp.generate import ntp
from attsvm.ntp.graph import graph_constraints, top_scc_mask
from attsvm.ntp.linear import (
    decompose,
    from_counts,
    is_compatible,
    is_separable,
    linear_ntp,
    log_odds_solution,
)
from attsvm.ntp.loss import loss
from attsvm.ntp.svm import solve_graph_svm

CASES = [(4, 3, 2, 2, 0), (5, 4, 4, 3, 1), (6, 5, 3, 2, 2), (3, 2, 2, 1, 3), (6, 6, 5, 4, 4), (4, 4, 4, 4, 5)]


def _direct_ce(data, Wdec: np.ndarray) -> float:
    """-(1/n) sum over samples of log softmax(W h_j)_z, read straight from the sequences (torch)."""
    V = data.T - 1
    H = torch.tensor(np.asarray(data.E)[np.asarray(data.tokens[:, -1]), V:])  # the context of each sample
    logits = H @ torch.tensor(Wdec).T
    return float(-torch.log_softmax(logits, dim=-1)[torch.arange(data.n), torch.tensor(data.labels)].mean())


@pytest.mark.parametrize("case", CASES)
def test_attention_loss_is_the_decoder_cross_entropy(case):
    V, dh, m, s, seed = case
    data = linear_ntp(V, dh, m, support=s, seed=seed)
    lin = decompose(data)
    r = np.random.default_rng(seed)
    Wdec = r.standard_normal((V, dh))
    Wp = lin.pad(Wdec)
    ce = _direct_ce(data, Wdec)
    assert loss(data.X, data.Z, data.label_mask, Wp, data.visible) == pytest.approx(ce, rel=1e-12)
    assert lin.cross_entropy(Wdec) == pytest.approx(ce, rel=1e-12)
    other = r.standard_normal(Wp.shape)
    other[:V, V:] = 0.0  # only the block [:V, V:] matters
    assert loss(data.X, data.Z, data.label_mask, Wp + other, data.visible) == pytest.approx(ce, rel=1e-12)
    np.testing.assert_array_equal(lin.block(Wp), Wdec)


def test_from_counts_and_decompose_are_inverse():
    r = np.random.default_rng(7)
    H = r.standard_normal((3, 2))
    counts = np.array([[2, 0, 1, 0], [0, 0, 0, 5], [1, 1, 1, 1]])
    lin = decompose(from_counts(H, counts))
    np.testing.assert_array_equal(lin.H, H)
    np.testing.assert_array_equal(lin.counts, counts)
    np.testing.assert_allclose(lin.probabilities[0], [2 / 3, 0, 1 / 3, 0])


@pytest.mark.parametrize("case", CASES)
def test_graph_of_each_context_is_its_support_above_the_rest(case):
    V, dh, m, s, seed = case
    data = linear_ntp(V, dh, m, support=s, seed=seed)
    lin = decompose(data)
    ctx = np.asarray(data.tokens[:, -1]) - V
    red = top_scc_mask(data)
    expected = np.zeros_like(red)
    expected[:, :V] = lin.support[ctx]
    np.testing.assert_array_equal(red, expected)
    gc = graph_constraints(data)
    eq = {tuple(t) for t in gc.eq.tolist()}
    ineq = {tuple(t) for t in gc.ineq.tolist()}
    want_eq, want_in = set(), set()
    for j in np.unique(ctx):
        S = np.flatnonzero(lin.support[j])
        want_eq |= {(V + j, int(a), int(b)) for a in S for b in S if a < b}
        want_in |= {(V + j, int(a), int(v)) for a in S for v in range(V) if not lin.support[j, v]}
    assert eq == want_eq and ineq == want_in


@pytest.mark.parametrize("case", CASES)
def test_finite_part_equals_log_odds_solution(case):
    """Two independent computations of W^star: the certified finite part of the graph (damped Newton + ball
    arithmetic) and the 50-digit log-odds solve."""
    V, dh, m, s, seed = case
    data = linear_ntp(V, dh, m, support=s, seed=seed)
    fp = finite_part_of(data)
    Ws = log_odds_solution(data)
    assert fp.verified and fp.basis_rank == m * (s - 1)
    rounding = 2.0**-52 * np.linalg.norm(Ws)  # each entry of W^star rounded once from 50 digits
    assert np.linalg.norm(fp.W - Ws) <= fp.radius + rounding
    outside = np.array(Ws)
    outside[:V, V:] = 0.0
    assert np.all(outside == 0.0)


@pytest.mark.parametrize("case", CASES)
def test_log_odds_solution_satisfies_the_log_odds_equations_and_lies_in_F(case):
    V, dh, m, s, seed = case
    data = linear_ntp(V, dh, m, support=s, seed=seed)
    lin = decompose(data)
    W = lin.block(log_odds_solution(data))
    F = []
    for j in range(m):
        S = np.flatnonzero(lin.support[j])
        a = W @ lin.H[j]
        for z in S:
            for z2 in S:
                assert a[z] - a[z2] == pytest.approx(math.log(lin.counts[j, z] / lin.counts[j, z2]), abs=1e-13)
                F.append(np.outer(np.eye(V)[z] - np.eye(V)[z2], lin.H[j]).ravel())
    F = np.array(F)
    if s == 1:
        assert np.all(W == 0)
        return
    U, sv, Vt = np.linalg.svd(F, full_matrices=False)
    Q = Vt[sv > 1e-10 * sv[0]]
    w = W.ravel()
    assert np.linalg.norm(w - Q.T @ (Q @ w)) <= 1e-14 * max(1.0, np.linalg.norm(w))


def test_compatibility_hand_cases():
    """h2 = 2 h1: log-odds of context 2 must be twice those of context 1 ((2,1),(4,1) yes; (2,1),(2,1) no).
    h3 = (h1 + h2)/2: 2 lo3 = lo1 + lo2 ((2,1),(8,1),(4,1) yes: 2 log 4 = log 2 + log 8; (2,1),(8,1),(3,1) no;
    likewise with powers of 3 and with 6, 6, 5)."""
    H = np.array([[1.0], [2.0]])
    assert is_compatible(from_counts(H, np.array([[2, 1], [4, 1]])))
    assert not is_compatible(from_counts(H, np.array([[2, 1], [2, 1]])))
    H3 = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    assert is_compatible(from_counts(H3, np.array([[2, 1], [8, 1], [4, 1]])))
    assert not is_compatible(from_counts(H3, np.array([[2, 1], [8, 1], [3, 1]])))
    assert is_compatible(from_counts(H3, np.array([[3, 1], [27, 1], [9, 1]])))  # 2 log 9 = log 3 + log 27
    assert not is_compatible(from_counts(H3, np.array([[3, 1], [9, 1], [3, 1]])))  # decided by the prime 3 alone
    assert not is_compatible(from_counts(H3, np.array([[6, 1], [6, 1], [5, 1]])))  # 36 != 25
    W = decompose(from_counts(H, np.array([[2, 1], [4, 1]]))).block(
        log_odds_solution(from_counts(H, np.array([[2, 1], [4, 1]])))
    )
    np.testing.assert_allclose(W, [[math.log(2) / 2], [-math.log(2) / 2]], rtol=1e-15)  # min-norm: w0 = -w1
    with pytest.raises(InputError, match="not NTP-compatible"):
        log_odds_solution(from_counts(H, np.array([[2, 1], [2, 1]])))


def test_separability_hand_cases():
    """Supports {0} for h1 = 1 and h2 = -1 need (w0 - w1) >= 1 and -(w0 - w1) >= 1: infeasible; with h2 = 2
    feasible."""
    one = np.array([[1, 0], [1, 0]])
    assert not is_separable(from_counts(np.array([[1.0], [-1.0]]), one))
    assert is_separable(from_counts(np.array([[1.0], [2.0]]), one))
    assert is_separable(from_counts(np.array([[1.0], [2.0]]), np.array([[1, 1], [3, 2]])))  # no inequalities


def test_separability_agrees_with_the_certified_graph_svm():
    """Random instances with m > dh (separability not automatic): the LP and the graph SVM (exact KKT or Farkas
    certificate) of the encoded data decide alike; both outcomes occur."""
    seen = set()
    for seed in range(8):
        r = np.random.default_rng(seed)
        V, dh, m = 4, 2, 4
        counts = np.zeros((m, V), dtype=np.int64)
        for j in range(m):
            counts[j, r.choice(V, size=int(r.integers(1, 3)), replace=False)] = 1
        data = from_counts(r.standard_normal((m, dh)), counts)
        sol = solve_graph_svm(data)
        assert sol.status in ("optimal", "infeasible")
        assert is_separable(data) == (sol.status == "optimal")
        seen.add(sol.status)
    assert seen == {"optimal", "infeasible"}


@pytest.mark.parametrize("case", CASES)
def test_generated_data_are_compatible_and_separable(case):
    V, dh, m, s, seed = case
    data = linear_ntp(V, dh, m, support=s, seed=seed)
    assert is_compatible(data) and is_separable(data)
    lin = decompose(data)
    assert np.all(lin.support.sum(axis=1) == s) and np.all(lin.counts.sum(axis=1) == 3 * s)


def test_bad_inputs_are_input_errors():
    with pytest.raises(InputError, match="m <= dh"):
        linear_ntp(4, 2, 3)
    with pytest.raises(InputError, match="support must be at most"):
        linear_ntp(3, 3, 2, support=4)
    with pytest.raises(InputError, match="invisible query"):
        decompose(ntp(seed=0))
    with pytest.raises(InputError, match="not linear-NTP data"):
        decompose(ntp(n=4, T=4, K=6, d=8, seed=0, query_visible=False))
    with pytest.raises(InputError, match="nonnegative integers"):
        from_counts(np.ones((1, 2)), np.array([[0, 0, 0]]))
