"""Att-SVM* (nuclear): proved duality gap, KKT, svm-rank, bounds from the Frobenius program, cvxpy reference."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm.generate import causal, centroid_infeasible, paper_law, sequence
from attsvm.svm.constraints import build
from attsvm.svm.exact import fmpz_matrix, pow2, to_integers
from attsvm.svm.nuclear import solve_nuclear
from attsvm.svm.spectral import prove_spectral_le_one
from attsvm.tolerances import tol


@st.composite
def feasible(draw):
    """Generic data with d >= max(T-1, n): Att-SVM feasible for every selection (feasible-overparam)."""
    n = draw(st.integers(1, 4))
    T = draw(st.integers(2, 4))
    d = draw(st.integers(max(T - 1, n, 2), 5))
    return paper_law(n, T, d, seed=draw(st.integers(0, 2**31)))


def _fro_reference(ds):
    """Independent Frobenius Att-SVM by cvxpy (min ||W||_F^2, all constraints)."""
    import cvxpy as cp

    c = build(ds)
    W = cp.Variable((ds.d, ds.d))
    p = cp.Problem(cp.Minimize(cp.sum_squares(W)), [cp.sum(cp.multiply(c.D @ W, c.Zc), axis=1) >= 1])
    p.solve(solver="CLARABEL")
    assert p.status == "optimal"
    return np.asarray(W.value)


@given(feasible())
def test_certificate_proved_and_kkt(ds):
    sol = solve_nuclear(ds, certify=True)
    assert sol.status == "optimal" and sol.norm == "nuc"
    cert = sol.certificate
    assert cert["kind"] == "duality-gap" and cert["proved"] and cert["verified"]
    assert cert["lower"] <= cert["upper"] and cert["rel_gap"] <= tol("nuc_gap")
    assert cert["lower"] <= sol.objective * (1 + tol("nuc_gap")) and sol.objective <= cert["upper"] * (1 + 1e-12)
    for k in ("primal_feasibility", "dual_feasibility", "stationarity", "duality_gap"):
        assert sol.kkt[k] <= tol("kkt"), (k, sol.kkt)
    c = build(ds)
    assert c.margins(sol.W).min() >= 1 - tol("kkt")
    lam = sol.multipliers[c.row, c.tok]
    assert np.all(lam >= 0) and np.linalg.norm(c.combine(lam), 2) <= 1 + tol("kkt")


@given(feasible())
def test_bounds_from_frobenius_and_svm_rank(ds):
    sol = solve_nuclear(ds)
    WF = _fro_reference(ds)
    sv = np.linalg.svd(WF, compute_uv=False)
    # ||W||_* >= ||W||_F >= ||W^mm_F||_F and W^mm_F is feasible for Att-SVM*
    assert np.linalg.norm(WF) <= sol.objective * (1 + 1e-6)
    assert sol.objective <= sv.sum() * (1 + 1e-6)
    # svm-rank for the returned point: row space in span{z_i}, rank <= min(n, d)
    Zb = np.linalg.qr(ds.Z.T)[0][:, : np.linalg.matrix_rank(ds.Z)]
    P = Zb @ Zb.T
    scale = np.abs(sol.W).max()
    assert np.abs(sol.W - sol.W @ P).max() <= 1e-6 * scale
    s = np.linalg.svd(sol.W, compute_uv=False)
    assert int(np.sum(s > tol("rank") * s[0])) <= min(ds.n, ds.d)
    # the projected point is feasible with the same objective (optimal too)
    c = build(ds)
    WP = sol.W @ P
    assert c.margins(WP).min() >= 1 - 1e-6
    assert abs(np.linalg.svd(WP, compute_uv=False).sum() - sol.objective) <= 1e-6 * sol.objective


@given(feasible())
def test_matches_cvxpy_normnuc(ds):
    import cvxpy as cp

    c = build(ds)
    W = cp.Variable((ds.d, ds.d))
    p = cp.Problem(cp.Minimize(cp.normNuc(W)), [cp.sum(cp.multiply(c.D @ W, c.Zc), axis=1) >= 1])
    p.solve(solver="CLARABEL")
    assert p.status in ("optimal", "optimal_inaccurate")
    sol = solve_nuclear(ds)
    assert abs(sol.objective - p.value) <= 1e-5 * p.value


@pytest.mark.parametrize("make", [lambda: sequence(2, 3, 4, 2, seed=5), lambda: causal(1, 3, 4, seed=7)])
def test_sequence_and_causal(make):
    ds = make()
    sol = solve_nuclear(ds, certify=True)
    assert sol.status == "optimal" and sol.program in ("seq", "causal")
    assert sol.certificate["verified"]
    c = build(ds)
    assert c.margins(sol.W).min() >= 1 - tol("kkt")


def test_infeasible_farkas():
    ds = centroid_infeasible(2, 4, 2, seed=1)
    sol = solve_nuclear(ds)
    assert sol.status == "infeasible" and sol.W is None
    c = build(ds)
    mu = sol.farkas[c.row, c.tok]
    assert np.all(sol.farkas >= 0) and mu.sum() > 0
    assert np.all(sol.farkas[np.arange(ds.n), ds.selection] == 0)
    assert np.abs(c.combine(mu)).max() <= tol("kkt") * mu.sum()


@given(st.lists(st.floats(-4, 4, allow_nan=False), min_size=1, max_size=12))
def test_to_integers_is_exact(xs):
    a = np.array(xs)
    N, e = to_integers(a)
    assert all(Fraction(int(n)) * pow2(e) == Fraction(x) for n, x in zip(N, xs))


def test_spectral_proof_decides_both_ways():
    # ||diag(1, 1/2)||_2 = 1 is not strictly below 1; (1 - 2^-40) diag is; 1 + 2^-40 is not
    for top, want in ((1.0 - 2.0**-40, True), (1.0, False), (1.0 + 2.0**-40, False)):
        N, e = to_integers(np.array([[top, 0.0], [0.0, 0.5]]))
        assert prove_spectral_le_one(fmpz_matrix(N), e) is want
    # a rotation times 0.999: norm 0.999 (independent: orthogonal matrix)
    th = 0.3
    R = 0.999 * np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    N, e = to_integers(R)
    assert prove_spectral_le_one(fmpz_matrix(N), e)


def test_unproved_gap_reruns_the_path_tighter(monkeypatch):
    # when the exact proof at the first barrier accuracy fails, solve_nuclear must re-run the path (tighter)
    # and return a certificate from the second run, re-proved independently of the first
    import attsvm.svm.nuclear as nuc

    real, calls = nuc.certify_gap, []

    def first_fails(*args):
        cert = real(*args)
        calls.append(cert["rel_gap"])
        if len(calls) == 1:
            cert["verified"] = False
        return cert

    monkeypatch.setattr(nuc, "certify_gap", first_fails)
    ds = paper_law(4, 4, 5, seed=11)
    sol = nuc.solve_nuclear(ds, certify=True)
    assert len(calls) == 2 and sol.certificate["verified"] and sol.certificate["rel_gap"] <= tol("nuc_gap")
    assert build(ds).margins(sol.W).min() >= 1 - tol("kkt")
