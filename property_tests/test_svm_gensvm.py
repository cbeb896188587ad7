"""Gen-SVM: singleton sets give Att-SVM, KKT on random sets, W^fin reproduces log-ratios, the SVMeq fit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm.errors import InputError
from attsvm.generate import paper_law
from attsvm.svm.gensvm import finite_part, selected_sets, solve_gensvm, svmeq_fit
from attsvm.tolerances import tol


@st.composite
def instance(draw):
    """Generic data, d >= max(T, n): affinely independent tokens and independent z_i, so every Gen-SVM is feasible."""
    n = draw(st.integers(1, 3))
    T = draw(st.integers(2, 4))
    d = draw(st.integers(max(T, n, 2), 5))
    ds = paper_law(n, T, d, seed=draw(st.integers(0, 2**31)))
    sel = np.array([[draw(st.booleans()) for _ in range(T)] for _ in range(n)])
    sel[np.arange(n), ds.opt] = True  # every set non-empty
    return ds, sel


def _softmax_of(ds, W):
    a = np.einsum("ntd,de,ne->nt", ds.X, W, ds.Z)
    a = a - a.max(-1, keepdims=True)
    s = np.exp(a)
    return s / s.sum(-1, keepdims=True), a


@given(st.integers(1, 3), st.integers(2, 4), st.integers(0, 2**31))
def test_singletons_give_attsvm(n, T, seed):
    from attsvm.svm.frobenius import solve_fro

    ds = paper_law(n, T, max(T - 1, n, 2), seed=seed)
    sel = np.zeros((n, T), dtype=bool)
    sel[np.arange(n), ds.opt] = True
    g, f = solve_gensvm(ds, sel), solve_fro(ds)
    assert g.status == f.status == "optimal"
    assert g.objective == pytest.approx(f.objective, rel=1e-7)
    assert np.abs(g.W - f.W).max() <= np.sqrt(tol("kkt")) * np.abs(f.W).max()


@given(instance())
def test_kkt_and_constraints(inst):
    ds, sel = inst
    sol = solve_gensvm(ds, sel)
    assert sol.status == "optimal" and sol.program == "gensvm"
    assert all(v <= tol("kkt") * 10 for v in sol.kkt.values()), sol.kkt
    logits = np.einsum("ntd,de,ne->nt", ds.X, sol.W, ds.Z)
    for i in range(ds.n):
        O, out = logits[i, sel[i]], logits[i, ~sel[i]]
        assert np.ptp(O) <= 1e-6 * max(1.0, np.abs(logits).max())  # equal logits on O_i
        if out.size:
            assert O.min() - out.max() >= 1 - 1e-6  # margin >= 1 against every other token
    assert sol.objective == pytest.approx(np.sum(sol.W**2), rel=1e-12)
    assert np.all(sol.multipliers >= 0)


@given(instance(), st.integers(0, 2**31))
def test_finite_part_reproduces_log_ratios(inst, seed):
    ds, sel = inst
    W = np.random.default_rng(seed).standard_normal((ds.d, ds.d))
    s, a = _softmax_of(ds, W)
    Wf = finite_part(ds, sel, s)
    af = np.einsum("ntd,de,ne->nt", ds.X, Wf, ds.Z)
    for i in range(ds.n):
        O = np.flatnonzero(sel[i])
        want = np.log(s[i, O]) - np.log(s[i, O[0]])  # = a[i,O] - a[i,O0] (softmax log-ratios)
        assert np.allclose(af[i, O] - af[i, O[0]], want, atol=1e-8)
    # least norm: no larger than the W that generated the data (which satisfies the same equations)
    assert np.linalg.norm(Wf) <= np.linalg.norm(W) + 1e-9


@given(st.integers(0, 2**31), st.floats(-5, 5))
def test_svmeq_fit_recovers_R(seed, R):
    rng = np.random.default_rng(seed)
    Wfin, Wsvm, N = rng.standard_normal((3, 4, 4))
    N -= np.sum(N * Wsvm) / np.sum(Wsvm * Wsvm) * Wsvm  # noise orthogonal to W_svm
    Weq, Rh = svmeq_fit(Wfin + R * Wsvm + N, Wfin, Wsvm)
    assert Rh == pytest.approx(R, abs=1e-10)
    # independent: least squares via lstsq on vectorised matrices
    ref = np.linalg.lstsq(Wsvm.reshape(-1, 1), (Wfin + R * Wsvm + N - Wfin).ravel(), rcond=None)[0][0]
    assert Rh == pytest.approx(ref, abs=1e-10)
    assert np.allclose(Weq, Wfin + Rh * Wsvm)


def test_selected_sets_and_bad_input():
    s = np.array([[0.5, 0.4999, 0.0001], [1.0, 0.0, 0.0]])
    assert selected_sets(s).tolist() == [[True, True, False], [True, False, False]]
    with pytest.raises(InputError):
        selected_sets(s, threshold=2.0)
    ds = paper_law(2, 3, 3, seed=0)
    with pytest.raises(InputError):
        solve_gensvm(ds, np.zeros((2, 3), dtype=bool))
    with pytest.raises(InputError):
        solve_gensvm(ds, np.ones((3, 3), dtype=bool))


def test_infeasible_farkas():
    # input 0: its selected token is the midpoint of the other two (d = 1 < T - 1): no W separates it
    X = np.array([[[0.0, 1.0], [1.0, 1.0], [-1.0, 1.0]]])
    from attsvm.data import Dataset

    ds = Dataset(X, np.array([1.0]), np.array([[0.0, 1.0]]), np.array([1.0, 0.0]), alpha=np.array([1]))
    sel = np.array([[True, False, False]])
    sol = solve_gensvm(ds, sel)
    assert sol.status == "infeasible"
    mu = sol.farkas
    assert np.all(mu >= 0) and mu.sum() > 0
    comb = sum(mu[0, t] * np.outer(X[0, 0] - X[0, t], ds.Z[0]) for t in (1, 2))
    assert np.abs(comb).max() <= tol("kkt") * mu.sum()
