"""Frobenius Att-SVM: fast working-set solver vs an independent cvxpy+Clarabel primal, KKT, svm-rank,
feasible-overparam, batches, sequence/causal programs, local optimality and delta on constructed data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm import generate
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.svm import is_locally_optimal, neighbour_gap, solve, solve_fro, solve_fro_batch, support_tokens
from attsvm.svm.primal import solve_primal
from attsvm.svm.reference import solve_reference
from attsvm.tolerances import tol


@st.composite
def overparam_case(draw, max_n=5, max_T=6):
    """Generic data with d >= max(T-1, n) and a random selection: feasible by `feasible-overparam`."""
    n = draw(st.integers(1, max_n))
    T = draw(st.integers(2, max_T))
    d = max(T - 1, n, 2) + draw(st.integers(0, 2))  # d >= 2: no score ties (unit vectors in R^1 are +-1)
    seed = draw(st.integers(0, 2**31 - 1))
    alpha = np.array(draw(st.lists(st.integers(0, T - 1), min_size=n, max_size=n)), dtype=np.int64)
    return generate.paper_law(n, T, d, seed=seed).with_alpha(alpha)


def _direct_margins(ds: Dataset, W: np.ndarray) -> np.ndarray:
    """(x_{i alpha_i} - x_it)^T W z_i straight from the arrays (independent of the constraint builder)."""
    a = ds.selection
    xa = ds.X[np.arange(ds.n), a]
    m = np.einsum("nd,de,ne->n", xa, W, ds.Z)[:, None] - np.einsum("ntd,de,ne->nt", ds.X, W, ds.Z)
    m[np.arange(ds.n), a] = np.inf
    return m


@given(overparam_case())
def test_fast_matches_reference_and_kkt(ds):
    sol = solve_fro(ds)
    assert sol.status == "optimal"  # feasible-overparam
    for name, r in sol.kkt.items():
        assert r <= tol("kkt"), (name, r)
    Wi = solve_primal(ds)  # not solve_reference: that is the fast solver's own fallback
    ref = float(np.sum(Wi * Wi))
    assert abs(sol.objective - ref) <= tol("svm_ref_rtol") * ref
    assert np.linalg.norm(sol.W - Wi) <= tol("svm_ref_rtol") * np.linalg.norm(Wi)
    m = _direct_margins(ds, sol.W)
    assert m.min() >= 1 - tol("kkt")
    # multipliers: W = sum lambda_it (x_a - x_t) z_i^T, recomputed by explicit loops
    W = np.zeros_like(sol.W)
    for i in range(ds.n):
        for t in range(ds.T):
            if t != ds.selection[i]:
                W += sol.multipliers[i, t] * np.outer(ds.X[i, ds.selection[i]] - ds.X[i, t], ds.Z[i])
    assert np.linalg.norm(W - sol.W) <= tol("kkt") * np.linalg.norm(sol.W)
    assert abs(np.sum(sol.W**2) - sol.multipliers.sum()) <= tol("kkt") * sol.objective


@given(overparam_case())
def test_svm_rank_rowspace_in_span_z(ds):
    """svm-rank on an independent solution: the fast solver's W is sum(lambda A) by construction, so its row space
    is span{z_i} whatever it got wrong; the primal over a full d x d variable is free to leave that span (d > n
    for most drawn sizes), and only optimality keeps it inside."""
    Wi = solve_primal(ds)  # feasible-overparam: a status other than optimal raises SolverError (fails)
    assert _direct_margins(ds, Wi).min() >= 1 - tol("kkt")
    U, S, Vt = np.linalg.svd(ds.Z)
    r = int(np.sum(S > max(ds.Z.shape) * np.finfo(float).eps * S[0]))
    P = Vt[:r].T @ Vt[:r]
    assert np.linalg.norm(Wi @ (np.eye(ds.d) - P)) <= tol("kkt") * np.linalg.norm(Wi)
    s = np.linalg.svd(Wi, compute_uv=False)
    assert int(np.sum(s > tol("rank") * s[0])) <= min(ds.n, ds.d)
    W = solve_fro(ds).W  # and the fast solver finds the same (unique) minimiser
    assert np.linalg.norm(W - Wi) <= tol("svm_ref_rtol") * np.linalg.norm(Wi)


@given(st.integers(1, 4), st.integers(2, 5), st.integers(0, 2**31 - 1))
def test_batch_equals_single(n, T, seed):
    d = max(T - 1, n, 2) + 1
    b = generate.paper_law(n, T, d, seed=seed, B=4)
    fb = solve_fro_batch(b)
    assert fb.W.shape == (4, d, d) and fb.margins.shape == (4, n, T) and fb.multipliers.shape == (4, n, T)
    assert fb.feasible.all()
    for k in range(4):
        one = solve_fro(b[k])
        assert abs(fb.objective[k] - one.objective) <= tol("batch_rtol") * one.objective
        assert fb.solution(k).status == "optimal"


def test_batch_mixes_feasible_and_infeasible():
    good = generate.paper_law(4, 6, 3, seed=1)
    bad = generate.centroid_infeasible(4, 6, 3, seed=1)
    b = Dataset.stack([good.with_alpha(good.opt), bad])
    fb = solve_fro_batch(b)
    assert fb.feasible[1] == False  # noqa: E712
    assert np.isinf(fb.objective[1]) and np.all(fb.farkas[1] >= 0) and fb.farkas[1].sum() > 0


@pytest.mark.parametrize("kind", ["seq", "causal"])
def test_sequence_and_causal_match_reference(kind):
    ds = generate.sequence(3, 5, 8, K=2, seed=4) if kind == "seq" else generate.causal(2, 4, 6, seed=5)
    sol = solve(ds, program=kind)
    assert sol.status == "optimal" and sol.program == kind
    assert max(sol.kkt.values()) <= tol("kkt")
    _, _, ref = solve_reference(ds)
    assert abs(sol.objective - ref) <= tol("svm_ref_rtol") * ref
    if kind == "causal":  # query k sees t <= k: no margin at invisible tokens, none at all for k = 0
        grid = sol.margins.reshape(2, 4, 4)
        assert np.all(np.isnan(grid[:, 0, :]))
        assert np.all(np.isnan(grid[:, 1, 2:]))


def test_program_kind_mismatch_is_input_error():
    with pytest.raises(InputError, match="needs sequence data"):
        solve(generate.paper_law(2, 3, 4), program="seq")
    with pytest.raises(InputError, match="unknown norm"):
        solve(generate.paper_law(2, 3, 4), norm="max")


def _line_data(a: float, b: float, opt_up: bool) -> Dataset:
    r"""n=1, d=2, z=e_2, v=e_1: x_alpha=(0,0), x_t=(-a,a), x_opt=(a,\pm b). With b>=3a and opt_up the SVM of
    alpha=0 has T = {t} only (locally optimal, alpha != opt); with opt down both t and opt are support."""
    X = np.array([[[0.0, 0.0], [-a, a], [a, b if opt_up else -b]]])
    return Dataset(X, np.array([1.0]), np.array([[0.0, 1.0]]), np.array([1.0, 0.0]), alpha=np.array([0]))


@given(st.floats(0.5, 1.5), st.floats(5.0, 20.0))
def test_local_optimality_constructed(a, b):
    good = _line_data(a, b, True)
    assert good.opt[0] == 2 and good.selection[0] == 0
    sol = solve_fro(good)
    assert sol.support == [(0, 1)]
    assert sol.locally_optimal is True and is_locally_optimal(good)
    # delta = 1/2 (margin_opt - margin_t), margins from w = W e_2 = (1,-1)/(2a): closed form
    expected = 0.5 * ((b - a) / (2 * a) - 1.0)
    assert abs(sol.delta - expected) <= 1e-9 * max(1.0, expected)
    assert abs(neighbour_gap(good) - expected) <= 1e-9 * max(1.0, expected)
    bad = _line_data(a, b, False)
    sb = solve_fro(bad)
    assert set(sb.support) == {(0, 1), (0, 2)}
    assert sb.locally_optimal is False and not is_locally_optimal(bad)
    assert support_tokens(bad, sb.W) == [(0, 1), (0, 2)]


def test_opt_is_locally_optimal_and_gap_inf_when_no_pair():
    ds = generate.paper_law(5, 6, 8, seed=3)
    assert is_locally_optimal(ds)
    # T=2: the single other token is always a support token, so no (t, tau) pair exists: delta = inf / None
    two = generate.paper_law(3, 2, 3, seed=2)
    assert neighbour_gap(two) == float("inf") and solve_fro(two).delta is None
