"""attsvm.ntp.finite (the finite part W^fin with a proved error bound) against independent computations: a cvxpy
exponential-cone solve (Clarabel), the KKT conditions with a torch-autograd gradient, a 50-digit mpmath Newton
solve (which every proved radius must cover), a hand-derived closed form, planted wrong candidates and tampered
bounds."""

from __future__ import annotations

import dataclasses
import math

import cvxpy as cp
import mpmath
import numpy as np
import pytest
import scipy.linalg
import torch

from attsvm.errors import InputError
from attsvm.ntp.data import NTPData
from attsvm.ntp.finite import certify_candidate, finite_part, finite_part_of, verify
from attsvm.ntp.graph import graph_constraints, top_scc_mask

SEEDS = [0, 3, 5, 13, 24, 31, 44]


def _data(seed: int, n: int = 8, T: int = 4, K: int = 6, d: int = 8) -> NTPData:
    """Random vocabulary; two query ids; the other tokens from a pool of K-2 ids (so the priority graphs have
    cycles, hence SCCs with equality directions); random labels (repeated sequences give non-trivial log-odds)."""
    r = np.random.default_rng(seed)
    E = r.standard_normal((K, d))
    toks = np.zeros((n, T), dtype=np.int64)
    for i in range(n):
        toks[i, :-1] = r.choice(K - 2, T - 1, replace=False)
        toks[i, -1] = K - 1 - int(r.integers(0, 2))
    labels = np.array([r.choice(toks[i, :-1]) for i in range(n)])
    return NTPData(E, toks, labels)


def _args(data: NTPData):
    gc = graph_constraints(data)
    pair = (np.asarray(data.E[gc.eq[:, 1]]), np.asarray(data.E[gc.eq[:, 2]]))
    return data.X, data.Z, data.label_mask, top_scc_mask(data), pair, np.asarray(gc.Z_eq)


def _span_basis(pair, Ze):
    """Orthonormal basis (p, d*d) of span{d_c z_c^T} (numerical SVD; the test's own)."""
    D = pair[0] - pair[1]
    A = np.einsum("ca,cb->cab", D, Ze).reshape(len(D), -1)
    if len(A) == 0:
        return np.zeros((0, Ze.shape[1] ** 2))
    _, sv, Vt = np.linalg.svd(A, full_matrices=False)
    return Vt[: int(np.sum(sv > 1e-9 * sv[0]))]


def _cvxpy_fin(X, Z, m, red, pair, Ze) -> np.ndarray:
    """min over w of L_fin(sum_c w_c A_c), written from the definition (exponential cone, Clarabel)."""
    D = pair[0] - pair[1]
    w = cp.Variable(len(D))
    terms = []
    for i in range(X.shape[0]):
        R = np.flatnonzero(red[i])
        y = int(np.flatnonzero(m[i])[0])
        M = np.einsum("ta,ca->tc", X[i, R], D) * (Ze @ Z[i])[None, :]
        My = (X[i, y] @ D.T) * (Ze @ Z[i])
        terms.append(cp.log_sum_exp(M @ w) - My @ w - math.log(int(m[i].sum())))
    prob = cp.Problem(cp.Minimize(sum(terms) / X.shape[0]))
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL
    return np.einsum("c,ca,cb->ab", w.value, D, Ze)


def _mp_newton(X, Z, m, red, pair, Ze, W0: np.ndarray, dps: int = 50):
    """Newton's method at ``dps`` digits for min L_fin over S, in coordinates of independent A_c (pivoted QR),
    from the float answer; naive formulas (no cancellation at 50 digits). Returns W as nested mpf lists."""
    D = pair[0] - pair[1]
    A = np.einsum("ca,cb->cab", D, Ze).reshape(len(D), -1)
    _, _, piv = scipy.linalg.qr(A.T, pivoting=True)
    p = _span_basis(pair, Ze).shape[0]
    idx = piv[:p]
    n, T, d = X.shape
    with mpmath.workdps(dps):
        mpf = mpmath.mpf
        Dm = [[mpf(float(pair[0][c, a])) - mpf(float(pair[1][c, a])) for a in range(d)] for c in idx]
        Zm = [[mpf(float(v)) for v in Ze[c]] for c in idx]
        Xm = [[[mpf(float(v)) for v in X[i, t]] for t in range(T)] for i in range(n)]
        Zq = [[mpf(float(v)) for v in Z[i]] for i in range(n)]

        def dot(u, v):
            return mpmath.fsum(a * b for a, b in zip(u, v))

        U = [[[dot(Xm[i][t], Dm[k]) * dot(Zm[k], Zq[i]) for k in range(p)] for t in range(T)] for i in range(n)]
        B = mpmath.matrix([[Dm[k][a] * Zm[k][b] for a in range(d) for b in range(d)] for k in range(p)])
        w = mpmath.lu_solve(B * B.T, B * mpmath.matrix([mpf(float(v)) for v in W0.ravel()]))
        for _ in range(60):
            g = mpmath.zeros(p, 1)
            H = mpmath.zeros(p, p)
            for i in range(n):
                R = [int(t) for t in np.flatnonzero(red[i])]
                y = int(np.flatnonzero(m[i])[0])
                a = {t: mpmath.fsum(U[i][t][k] * w[k] for k in range(p)) for t in R}
                den = mpmath.fsum(mpmath.exp(v) for v in a.values())
                s = {t: mpmath.exp(a[t]) / den for t in R}
                mean = [mpmath.fsum(s[t] * U[i][t][k] for t in R) for k in range(p)]
                for k in range(p):
                    g[k] += (mean[k] - U[i][y][k]) / n
                    for l in range(p):
                        H[k, l] += (mpmath.fsum(s[t] * U[i][t][k] * U[i][t][l] for t in R) - mean[k] * mean[l]) / n
            step = mpmath.lu_solve(H, g)
            w = w - step
            if mpmath.norm(step) < mpmath.mpf(10) ** (-dps + 5):
                break
        Wv = B.T * w
        return [[Wv[a * d + b] for b in range(d)] for a in range(d)]


def _mp_dist(Wmp, W: np.ndarray, dps: int = 50):
    with mpmath.workdps(dps):
        return mpmath.sqrt(
            mpmath.fsum(
                (Wmp[a][b] - mpmath.mpf(float(W[a, b]))) ** 2 for a in range(W.shape[0]) for b in range(W.shape[1])
            )
        )


@pytest.fixture(scope="module")
def solved():
    out = {}
    for seed in SEEDS:
        data = _data(seed)
        args = _args(data)
        out[seed] = (args, finite_part(*args))
    return out


def test_fixture_covers_nontrivial_spans(solved):
    ranks = [fp.basis_rank for _, fp in solved.values()]
    assert max(ranks) >= 3 and all(fp.verified for _, fp in solved.values())
    assert max(np.linalg.norm(fp.W) for _, fp in solved.values()) > 0.2


@pytest.mark.parametrize("seed", SEEDS)
def test_finite_part_equals_cvxpy_solution(solved, seed):
    args, fp = solved[seed]
    if fp.basis_rank == 0:
        assert np.all(fp.W == 0) and fp.radius == 0.0
        return
    W_ref = _cvxpy_fin(*args)
    assert np.linalg.norm(fp.W - W_ref) <= 1e-5 * max(1.0, np.linalg.norm(W_ref))


@pytest.mark.parametrize("seed", SEEDS)
def test_finite_part_satisfies_kkt(solved, seed):
    """W in S and the projection of the gradient of L_fin (torch autograd of the definition) on S is ~0."""
    (X, Z, m, red, pair, Ze), fp = solved[seed]
    Q = _span_basis(pair, Ze)
    w = torch.tensor(fp.W, requires_grad=True)
    a = torch.einsum("ntd,de,ne->nt", torch.tensor(X), w, torch.tensor(Z))
    f = (
        torch.logsumexp(a.masked_fill(~torch.tensor(red), -torch.inf), -1)
        - torch.logsumexp(a.masked_fill(~torch.tensor(m), -torch.inf), -1)
    ).mean()
    (g,) = torch.autograd.grad(f, w)
    g = g.numpy().ravel()
    assert np.linalg.norm(Q @ g) <= 1e-12
    Wv = fp.W.ravel()
    assert np.linalg.norm(Wv - Q.T @ (Q @ Wv)) <= 1e-14 * max(1.0, np.linalg.norm(Wv))


@pytest.mark.parametrize("seed", SEEDS)
def test_proved_radius_covers_the_50_digit_solution(solved, seed):
    args, fp = solved[seed]
    assert fp.verified and 0 <= fp.radius <= 1e-15 * max(1.0, np.linalg.norm(fp.W))
    if fp.basis_rank == 0:
        return
    Wmp = _mp_newton(*args, fp.W, dps=100)  # its own error ~1e-95: below even a 1e-76 radius
    assert _mp_dist(Wmp, fp.W, dps=100) <= fp.radius + 1e-90


@pytest.mark.parametrize("seed", [0, 13, 24])
def test_planted_wrong_candidate_gets_a_covering_radius_and_a_tampered_bound_is_rejected(solved, seed):
    args, fp = solved[seed]
    assert fp.basis_rank >= 1
    r = np.random.default_rng(seed)
    Q = _span_basis(args[4], args[5])
    E_in = (r.standard_normal(Q.shape[0]) @ Q).reshape(fp.W.shape)
    E_out = r.standard_normal(fp.W.shape)
    for E in (E_in, E_in + 0.1 * E_out):
        bad = fp.W + 1e-3 * E / np.linalg.norm(E)
        cert = certify_candidate(*args, bad)
        assert cert.verified and cert.iterations == 0
        dist = _mp_dist(_mp_newton(*args, fp.W), bad)
        assert dist <= cert.radius <= 1e3 * dist  # covers the true point, and is not vacuous
        assert verify(cert, *args)
        assert not verify(dataclasses.replace(cert, radius=0.5 * float(dist)), *args)
        assert not verify(dataclasses.replace(cert, radius=math.inf), *args)


def test_honest_result_verifies_and_tampered_result_is_rejected(solved):
    args, fp = solved[24]
    assert verify(fp, *args)
    assert not verify(dataclasses.replace(fp, W=fp.W + 1e-6 * np.eye(fp.W.shape[0])), *args)


def test_hand_derived_log_two():
    """Orthonormal a, b, q; sequences (a,b,q) labelled a twice and b once: L_fin(D) = [2 log(1+e^-D) +
    log(1+e^D)]/3 along D = (e_a-e_b)^T W e_q, minimised at e^D = 2; W^fin = (log 2 / 2) (e_a-e_b) e_q^T."""
    E = np.eye(3)
    data = NTPData(E, np.array([[0, 1, 2], [1, 0, 2], [0, 1, 2]]), np.array([0, 0, 1]))
    fp = finite_part_of(data)
    expected = np.zeros((3, 3))
    expected[0, 2], expected[1, 2] = 0.5 * math.log(2), -0.5 * math.log(2)
    assert fp.verified and fp.basis_rank == 1
    assert np.linalg.norm(fp.W - expected) <= max(fp.radius, 0.0) + 1e-16
    assert fp.radius <= 1e-14


def test_no_equality_direction_gives_zero():
    E = np.eye(3)
    data = NTPData(E, np.array([[0, 1, 2], [0, 1, 2]]), np.array([0, 0]))  # a above b only: no SCC with two nodes
    fp = finite_part_of(data)
    assert fp.basis_rank == 0 and fp.verified and fp.radius == 0.0 and np.all(fp.W == 0)


def test_certify_false_claims_nothing(solved):
    args, fp = solved[0]
    fp2 = finite_part(*args, certify=False)
    assert not fp2.verified and fp2.radius == math.inf and math.isnan(fp2.grad_bound)
    assert np.linalg.norm(fp2.W - fp.W) <= 1e-13 * max(1.0, np.linalg.norm(fp.W))


def test_bad_inputs_are_input_errors(solved):
    X, Z, m, red, pair, Ze = solved[3][0]
    assert solved[3][1].basis_rank >= 3  # an SCC with three nodes: the rounded differences are exactly independent
    with pytest.raises(InputError, match="numerical rank"):
        finite_part(X, Z, m, red, pair[0] - pair[1], Ze)
    with pytest.raises(InputError, match="reduced_mask must contain"):
        finite_part(X, Z, m, red & ~m, pair, Ze)
    X2 = np.array(X)
    i, t = np.argwhere(m)[0]
    X2[i, (t + 1) % X.shape[1]] = X2[i, t]
    m2 = np.array(m)
    m2[i, (t + 1) % X.shape[1]] = True
    with pytest.raises(InputError, match="distinct embeddings"):
        X3 = np.array(X2)
        X3[i, t, 0] += 1.0
        finite_part(X3, Z, m2, red | m2, pair, Ze)
