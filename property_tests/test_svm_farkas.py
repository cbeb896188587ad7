"""Feasibility and Farkas certificates: constructed infeasible data (centroid, duplicate tokens) and
feasible-overparam."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm import generate, load
from attsvm.data import Dataset
from attsvm.errors import SolverError
from attsvm.svm import feasibility, solve
from attsvm.svm.constraints import build
from attsvm.svm.farkas import farkas_lp, max_margin_point
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


# ---------------------------------------------------------------------------------------------- barely feasible
def _two_constraints(eps: float) -> Dataset:
    r"""n=2, T=2, d=2 with $A_1=e_1e_1^\top$, $A_2=e_1(-e_1+\varepsilon e_2)^\top$: feasible iff $\varepsilon\ne0$,
    with $W^{mm}=e_1e_1^\top+(2/\varepsilon)e_1e_2^\top$ and $\|W^{mm}\|_F^2=1+4/\varepsilon^2$ (both constraints
    active, $\lambda=(1+2/\varepsilon^2,\,2/\varepsilon^2)$)."""
    X = np.array([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 0.0]]])
    Z = np.array([[1.0, 0.0], [-1.0, eps]])
    return Dataset(X, np.ones(2), Z, np.array([1.0, 0.0]))


@given(st.integers(2, 8), st.sampled_from([1.0, -1.0]))
def test_barely_feasible_instances_are_solved_not_declared_infeasible(k, sign):
    # at eps = 1e-7 a float Farkas vector of the two constraints has relative residual ~5e-8 < tol("kkt"):
    # accepting it would call a feasible program infeasible
    eps = sign * 10.0**-k
    sol = solve(_two_constraints(eps))
    assert sol.status == "optimal"
    expected = 1.0 + 4.0 / eps**2
    assert abs(sol.objective - expected) <= tol("svm_ref_rtol") * expected
    assert abs(sol.W[0, 1] - 2.0 / eps) <= tol("svm_ref_rtol") * abs(2.0 / eps)


def test_exactly_infeasible_limit_has_an_exact_farkas_vector():
    ds = _two_constraints(0.0)
    sol = solve(ds)
    assert sol.status == "infeasible" and sol.certificate["kind"] == "farkas-exact"
    _farkas_ok(ds, sol.farkas)
    assert np.allclose(sol.farkas[:, 1], [0.5, 0.5], rtol=0, atol=1e-15)  # A_1 + A_2 = 0 exactly


def test_feasibility_beyond_float64_is_an_error_not_a_verdict():
    ds = _two_constraints(1e-12)  # feasible, but no float64 LP sees it
    with pytest.raises(SolverError, match="undecided"):
        solve(ds)


def test_e2_instance_that_clarabel_calls_infeasible_is_solved_and_certified():
    # a paper-law draw of E2 (n=5, T=5, d=2) with normalised max margin 8.6e-6: the working set is inaccurate,
    # Clarabel reports infeasible, the Farkas LP finds no certificate; the rescaled reference solves it
    ds = load(Path(__file__).parent / "fixtures" / "barely_feasible_e2.npz")
    c = build(ds)
    t, _ = max_margin_point(c)
    assert 0 < t < 1e-4
    sol = solve(ds, certify=True)
    assert sol.status == "optimal" and sol.objective > 1e9
    assert sol.certificate["kind"] == "exact-rational" and sol.certificate["verified"]
    assert feasibility(ds) == (True, None)
