"""Exact / rigorous optimality certificates of Frobenius Att-SVM, checked independently with Fractions."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attsvm.svm.certificate as cert_mod
from attsvm import generate
from attsvm.svm import certify_fro, solve_fro
from attsvm.tolerances import tol


@st.composite
def small_case(draw):
    n = draw(st.integers(1, 4))
    T = draw(st.integers(2, 5))
    d = max(T - 1, n, 2) + draw(st.integers(0, 2))  # d >= 2: no score ties (unit vectors in R^1 are +-1)
    return generate.paper_law(n, T, d, seed=draw(st.integers(0, 2**31 - 1)))


def _exact_check(ds, cert) -> None:
    """Independent of flint: rebuild W = sum lambda A in Fractions from the float data and the reported
    multipliers; every margin must be >= 1, equal to 1 on the certifying set, and W must match the report."""
    a = ds.selection
    lam = {(i, t): Fraction(s) for i, t, s in cert["multipliers"]}
    assert all(v >= 0 for v in lam.values())  # KKT: lambda >= 0 (exact zeros occur on degenerate data)
    X = [[[Fraction(float(x)) for x in row] for row in Xi] for Xi in ds.X]
    Z = [[Fraction(float(z)) for z in zi] for zi in ds.Z]
    d = ds.d
    W = [[Fraction(0)] * d for _ in range(d)]
    for (i, t), lv in lam.items():
        diff = [X[i][a[i]][k] - X[i][t][k] for k in range(d)]
        for r in range(d):
            if diff[r]:
                for c in range(d):
                    W[r][c] += lv * diff[r] * Z[i][c]
    assert [[Fraction(s) for s in row] for row in cert["W"]] == W
    assert Fraction(cert["value_str"]) == sum(w * w for row in W for w in row)  # the exact optimum ||W||_F^2
    for i in range(ds.n):
        Wz = [sum(W[r][c] * Z[i][c] for c in range(d)) for r in range(d)]
        for t in range(ds.T):
            if t == a[i]:
                continue
            m = sum((X[i][a[i]][k] - X[i][t][k]) * Wz[k] for k in range(d))
            assert m >= 1
            if (i, t) in lam:
                assert m == 1


def test_float_to_integers_is_exact():
    from attsvm.svm.exact import to_integers

    x = np.random.default_rng(0).standard_normal(50) * np.logspace(-8, 3, 50)
    xi, e = to_integers(x)  # x == N 2^e exactly
    assert all(Fraction(int(v)) * Fraction(2) ** e == Fraction(float(f)) for v, f in zip(xi, x))


@given(small_case())
def test_exact_certificate_verifies(ds):
    sol = solve_fro(ds)
    cert = certify_fro(ds, sol=sol)
    assert cert["kind"] == "exact-rational" and cert["verified"], cert.get("reason")
    for key in ("active", "multipliers", "W", "min_other_margin", "repairs", "seconds"):
        assert key in cert
    Wc = np.array([[float(Fraction(s)) for s in row] for row in cert["W"]])
    assert np.linalg.norm(Wc - sol.W) <= tol("kkt") * np.linalg.norm(sol.W)
    assert sorted(map(tuple, cert["active"])) == sorted(sol.support)


def test_exact_certificate_independent_check():
    ds = generate.paper_law(3, 4, 5, seed=11)
    cert = certify_fro(ds)
    assert cert["verified"]
    _exact_check(ds, cert)


def _plant_wrong(sol):
    """Drop the largest multiplier (a true support constraint) and add a non-support constraint."""
    m = sol.multipliers.copy()
    big = np.unravel_index(np.argmax(m), m.shape)
    m[big] = 0.0
    marg = np.where(np.isnan(sol.margins), -np.inf, sol.margins)
    far = np.unravel_index(np.argmax(marg), marg.shape)  # the largest margin: certainly inactive
    m[far] = 1.0
    sol.multipliers = m
    return big, far


@pytest.mark.parametrize("path", ["exact", "enclosure"])
def test_planted_wrong_active_set_is_repaired(path, monkeypatch):
    if path == "enclosure":
        monkeypatch.setattr(cert_mod, "EXACT_MAX_SUPPORT", 0)
    ds = generate.paper_law(6, 8, 10, seed=5)
    sol = solve_fro(ds)
    ref_support = sorted(sol.support)
    big, far = _plant_wrong(sol)
    cert = certify_fro(ds, sol=sol)
    assert cert["verified"] and cert["repairs"] >= 1
    assert cert["kind"] == ("exact-rational" if path == "exact" else "rigorous-enclosure")
    S = {(i, t) for i, t, _ in cert["multipliers"]}
    assert tuple(int(v) for v in big) in S and tuple(int(v) for v in far) not in S
    if path == "exact":
        assert sorted(map(tuple, cert["active"])) == ref_support
        _exact_check(ds, cert)


def test_enclosure_certificate_on_larger_instance(monkeypatch):
    monkeypatch.setattr(cert_mod, "EXACT_MAX_SUPPORT", 0)
    ds = generate.paper_law(12, 8, 8, seed=2)
    sol = solve_fro(ds, certify=True)
    c = sol.certificate
    assert c["kind"] == "rigorous-enclosure" and c["verified"]
    assert 0 <= c["rho"] < 1 and c["radius"] < 1e-8
    lam = np.zeros_like(sol.multipliers)
    for i, t, s in c["multipliers"]:
        lam[i, t] = float(Fraction(s))
    assert np.abs(lam - sol.multipliers).max() <= c["radius"] + tol("kkt") * lam.max()
    assert Fraction(c["min_other_margin"]) >= 1


def test_certify_flag_sets_exact_support():
    ds = generate.paper_law(5, 6, 7, seed=9)
    sol = solve_fro(ds, certify=True)
    assert sol.certificate["verified"] and sol.certificate["kind"] == "exact-rational"
    assert sorted(map(tuple, sol.certificate["active"])) == sorted(sol.support)


def test_infeasible_is_not_certified():
    ds = generate.centroid_infeasible(3, 6, 2, seed=0)
    cert = certify_fro(ds)
    assert cert["verified"] is False and cert["reason"] == "infeasible"


@given(small_case())
def test_enclosure_contains_exact_multipliers(ds):
    """The rigorous enclosure (centre +- radius) contains the exact rational multipliers."""
    sol = solve_fro(ds)
    exact = certify_fro(ds, sol=sol)
    old = cert_mod.EXACT_MAX_SUPPORT
    try:
        cert_mod.EXACT_MAX_SUPPORT = 0
        enc = certify_fro(ds, sol=sol)
    finally:
        cert_mod.EXACT_MAX_SUPPORT = old
    assert exact["verified"] and enc["verified"] and enc["kind"] == "rigorous-enclosure"
    ex = {(i, t): Fraction(s) for i, t, s in exact["multipliers"]}
    ce = {(i, t): Fraction(s) for i, t, s in enc["multipliers"]}
    assert set(ex) == set(ce)
    rad = Fraction(enc["radius"])
    assert all(abs(ex[k] - ce[k]) <= rad for k in ex)


@st.composite
def dyadic_case(draw):
    """Small half-integer data: many exact ties among margins (degenerate active sets, dependent A_j)."""
    n, T, d = draw(st.integers(1, 3)), draw(st.integers(2, 4)), draw(st.integers(2, 4))
    half = st.integers(-2, 2).map(lambda k: k / 2)
    X = np.array(draw(st.lists(half, min_size=n * T * d, max_size=n * T * d))).reshape(n, T, d)
    Z = np.array(draw(st.lists(half, min_size=n * d, max_size=n * d))).reshape(n, d)
    Z[:, 0] = np.where(np.all(Z == 0, axis=1), 1.0, Z[:, 0])  # nonzero queries
    v = np.array(draw(st.lists(half, min_size=d, max_size=d)))
    Y = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n)))
    alpha = np.array(draw(st.lists(st.integers(0, T - 1), min_size=n, max_size=n)))
    from attsvm.data import Dataset

    return Dataset(X, Y, Z, v, alpha=alpha)


@given(dyadic_case())
def test_degenerate_dyadic_data_certified_or_farkas(ds):
    sol = solve_fro(ds)
    if sol.status == "infeasible":
        mu = sol.farkas
        S = np.einsum("it,itd,ie->de", mu, ds.X[np.arange(ds.n), ds.selection][:, None, :] - ds.X, ds.Z)
        assert mu.sum() > 0 and np.linalg.norm(S) <= tol("kkt") * mu.sum() * max(1.0, np.abs(ds.X).max()) ** 2
        return
    for cap in (cert_mod.EXACT_MAX_SUPPORT, 0):  # exact path, and enclosure (exact fallback when degenerate)
        old = cert_mod.EXACT_MAX_SUPPORT
        try:
            cert_mod.EXACT_MAX_SUPPORT = cap
            cert = certify_fro(ds, sol=sol)
        finally:
            cert_mod.EXACT_MAX_SUPPORT = old
        assert cert["verified"], cert.get("reason")
        if cert["kind"] == "exact-rational":
            _exact_check(ds, cert)


def test_singular_active_set_is_reduced_to_pivots():
    """Two identical tokens give equal features: a starting set holding both makes G_SS singular, and the exact
    path reduces it to its pivot columns (python-flint's fmpz_mat.rref returns (rref, denominator, rank))."""
    import dataclasses

    from attsvm.data import Dataset

    X = np.array([[[0.0, 0.0], [-1.0, 1.0], [-1.0, 1.0], [2.0, 5.0]]])
    ds = Dataset(X, np.array([1.0]), np.array([[0.0, 1.0]]), np.array([1.0, 0.0]), alpha=np.array([0]))
    sol = solve_fro(ds)
    lam = sol.multipliers.copy()
    lam[0, 1] = lam[0, 2] = 0.5 * (lam[0, 1] + lam[0, 2])  # both duplicates in the starting set
    c = certify_fro(ds, sol=dataclasses.replace(sol, multipliers=lam))
    assert c["verified"] and c["repairs"] >= 1
    assert c["W"] == [["0", "1/2"], ["0", "-1/2"]]
