"""Feasibility and Farkas certificates: constructed infeasible data (centroid, duplicate tokens) and
feasible-overparam."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from attsvm import generate
from attsvm.data import Dataset
from attsvm.svm import feasibility, solve
from attsvm.svm.constraints import build
from attsvm.svm.farkas import farkas_lp
from attsvm.tolerances import tol


def _farkas_ok(ds: Dataset, mu: np.ndarray) -> None:
    """mu >= 0, mu != 0, zero at (i, alpha_i), and sum_it mu_it (x_ia - x_it) z_i^T = 0 (explicit loops)."""
    a = ds.selection
    assert mu.shape == (ds.n, ds.T) and np.all(mu >= 0) and mu.sum() > 0
    assert np.all(mu[np.arange(ds.n), a] == 0)
    S = np.zeros((ds.d, ds.d))
    scale = 0.0
    for i in range(ds.n):
        for t in range(ds.T):
            A = np.outer(ds.X[i, a[i]] - ds.X[i, t], ds.Z[i])
            S += mu[i, t] * A
            scale += mu[i, t] * np.linalg.norm(A)
    assert np.linalg.norm(S) <= tol("kkt") * scale


@given(st.integers(1, 4), st.integers(4, 8), st.integers(0, 2**31 - 1), st.data())
def test_centroid_construction_is_infeasible_with_valid_farkas(n, T, seed, data):
    d = data.draw(st.integers(2, T - 2))  # d < T-1: the centroid is inside the hull of the others (d>=2: no ties)
    ds = generate.centroid_infeasible(n, T, d, seed=seed)
    sol = solve(ds)
    assert sol.status == "infeasible" and sol.W is None
    _farkas_ok(ds, sol.farkas)
    ok, mu = feasibility(ds)
    assert not ok
    _farkas_ok(ds, mu)


@given(st.integers(1, 5), st.integers(2, 6), st.integers(0, 2**31 - 1), st.data())
def test_feasible_overparam_every_alpha(n, T, seed, data):
    d = max(T - 1, n, 2) + data.draw(st.integers(0, 1))
    alpha = np.array(data.draw(st.lists(st.integers(0, T - 1), min_size=n, max_size=n)))
    ds = generate.paper_law(n, T, d, seed=seed).with_alpha(alpha)
    ok, mu = feasibility(ds)
    assert ok and mu is None
    assert farkas_lp(build(ds)) is None  # the LP agrees: no Farkas vector exists


def test_duplicate_token_is_infeasible():
    ds = generate.paper_law(3, 4, 5, seed=1)
    X = np.array(ds.X)
    X[1, 2] = X[1, 0]  # token 2 equals the selected token 0 of input 1: A = 0 cannot reach margin 1
    dup = Dataset(X, ds.Y, ds.Z, ds.v, alpha=np.array([0, 0, 0]))
    sol = solve(dup)
    assert sol.status == "infeasible"
    _farkas_ok(dup, sol.farkas)
    assert sol.farkas[1, 2] > 0
