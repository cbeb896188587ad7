"""Prompt, head and relaxed prompt SVMs: prompt = Att-SVM with one shared query, head support set, relaxation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.generate import paper_law
from attsvm.svm.prompt import solve_head, solve_prompt, solve_relaxed_prompt
from attsvm.tolerances import tol


@st.composite
def prompt_feasible(draw):
    """d >= n(T-1): the n(T-1) generic constraint vectors on p are independent, so the prompt SVM is feasible."""
    n = draw(st.integers(1, 2))
    T = draw(st.integers(2, 3))
    d = draw(st.integers(max(n * (T - 1), 2), 5))
    return paper_law(n, T, d, seed=draw(st.integers(0, 2**31)))


@given(prompt_feasible())
def test_prompt_is_attsvm_with_shared_query(ds):
    from attsvm.svm.frobenius import solve_fro

    sol = solve_prompt(ds)
    assert sol.status == "optimal" and sol.W is None
    assert all(v <= tol("kkt") for v in sol.kkt.values()), sol.kkt
    # one shared query z = e_1: <W, A_it> = (x_ia - x_it)^T W e_1, so W^mm = p^mm e_1^T (independent solver)
    Z = np.zeros((ds.n, ds.d))
    Z[:, 0] = 1.0
    ref = solve_fro(Dataset(ds.X, ds.Y, Z, ds.v, alpha=ds.selection))
    p = sol.extra["p"]
    assert sol.objective == pytest.approx(ref.objective, rel=1e-7)
    assert np.abs(p - ref.W[:, 0]).max() <= np.sqrt(tol("kkt")) * np.abs(p).max()
    assert np.abs(ref.W[:, 1:]).max() <= 1e-9 * np.abs(ref.W).max()


@given(st.integers(1, 5), st.integers(2, 4), st.integers(0, 2**31))
def test_head_support_set(n, T, seed):
    ds = paper_law(n, T, max(n, 2), seed=seed)  # d >= n: separable
    sol = solve_head(ds)
    assert sol.status == "optimal"
    assert all(v <= tol("kkt") for v in sol.kkt.values()), sol.kkt
    v, S = sol.extra["v"], sol.extra["S"]
    F = ds.Y[:, None] * ds.X[np.arange(n), ds.selection]
    mg = F @ v
    assert np.all(mg >= 1 - tol("kkt"))
    assert S and np.allclose(mg[S], 1, atol=tol("active"))
    rest = np.setdiff1d(np.arange(n), S)
    assert np.all(mg[rest] > 1 + tol("active"))
    # independent: the SVM on the support set alone has the same solution (min-norm v with F_S v = 1)
    vS = np.linalg.lstsq(F[S], np.ones(len(S)), rcond=None)[0]
    assert np.abs(vS - v).max() <= np.sqrt(tol("kkt")) * np.abs(v).max()


@given(prompt_feasible())
def test_relaxed_prompt(ds):
    sol = solve_relaxed_prompt(ds)
    assert sol.status == "optimal" and sol.program == "relaxed"
    S = sol.extra["S"]
    p = sol.extra["p"]
    a = ds.selection
    for i in range(ds.n):
        mg = [(ds.X[i, a[i]] - ds.X[i, t]) @ p for t in range(ds.T) if t != a[i]]
        assert min(mg) >= (1.0 if i in S else 0.0) - tol("kkt")
    assert sol.objective <= solve_prompt(ds).objective * (1 + 1e-7)  # a relaxation


def test_infeasible_prompt_farkas_and_bad_input():
    # two inputs whose token differences are opposite: p^T u >= 1 and -p^T u >= 1
    X = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [1.0, 0.0]]])
    ds = Dataset(X, np.ones(2), np.ones((2, 2)), np.array([0.3, 1.0]), alpha=np.array([0, 0]))
    sol = solve_prompt(ds)
    assert sol.status == "infeasible"
    mu = sol.farkas
    comb = sum(mu[i, t] * (X[i, 0] - X[i, t]) for i in range(2) for t in range(2) if t != 0)
    assert np.all(mu >= 0) and mu.sum() > 0 and np.abs(comb).max() <= tol("kkt") * mu.sum()
    with pytest.raises(InputError):
        solve_prompt(ds, alpha=np.array([0, 5]))
