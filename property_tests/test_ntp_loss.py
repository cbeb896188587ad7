"""attsvm.ntp.loss (the NTP log-loss, its gradient and Hessian) against independent computations: torch autograd
of the loss written from its definition, central differences, a direct log-sum-exp, 50-digit mpmath in the
saturated regime; the convexity facts of claim ntp-logloss-convex (PSD Hessian, nonnegative second differences when the
label occurrences share an embedding; the hand-derived non-convex example f(t)=log(1+1/(2cosh t)))."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attsvm import tol
from attsvm.errors import InputError
from attsvm.ntp import loss as L

seeds = st.integers(0, 2**20)
sizes = st.tuples(st.integers(1, 4), st.integers(2, 5), st.integers(1, 4))


def _problem(n: int, T: int, d: int, seed: int, shared: bool = False, hidden: bool = True, scale: float = 1.0):
    """Random tokens, queries, W, a label set (1-2 positions) and a visibility mask (one hidden position at most).
    ``shared``: the label positions of a sequence get one embedding (the NTP case)."""
    r = np.random.default_rng(seed)
    X = r.standard_normal((n, T, d))
    Z = r.standard_normal((n, d))
    W = scale * r.standard_normal((d, d))
    m = np.zeros((n, T), dtype=bool)
    vis = np.ones((n, T), dtype=bool)
    for i in range(n):
        pos = r.choice(T, size=min(T, int(r.integers(1, 3))), replace=False)
        m[i, pos] = True
        if shared:
            X[i, pos] = X[i, pos[0]]
        free = np.flatnonzero(~m[i])
        if hidden and len(free) > 1 and r.random() < 0.5:
            vis[i, r.choice(free)] = False
    return X, Z, W, m, vis


def _torch_loss(X, Z, m, vis, w):
    """The definition: (1/n) sum_i [LSE over visible - LSE over the label set], in torch."""
    a = torch.einsum("ntd,de,ne->nt", torch.tensor(X), w, torch.tensor(Z))
    lv = torch.logsumexp(a.masked_fill(~torch.tensor(vis), -torch.inf), dim=-1)
    lm = torch.logsumexp(a.masked_fill(~torch.tensor(m), -torch.inf), dim=-1)
    return (lv - lm).mean()


def _close(a, b, scale: float = 1.0):
    np.testing.assert_allclose(a, b, rtol=tol("grad_rtol") * 1e3, atol=tol("grad_atol") * max(1.0, scale))


@given(sizes, seeds, st.booleans(), st.floats(0.1, 3.0))
def test_loss_gradient_hessian_equal_autograd(shape, seed, shared, scale):
    X, Z, W, m, vis = _problem(*shape, seed, shared=shared, scale=scale)
    d = W.shape[0]
    w = torch.tensor(W, requires_grad=True)
    ref = _torch_loss(X, Z, m, vis, w)
    (g_ref,) = torch.autograd.grad(ref, w)
    H_ref = torch.autograd.functional.hessian(
        lambda v: _torch_loss(X, Z, m, vis, v.reshape(d, d)), torch.tensor(W.ravel())
    )
    _close(L.loss(X, Z, m, W, vis), ref.item())
    _close(L.gradient(X, Z, m, W, vis), g_ref.numpy(), float(np.abs(g_ref.numpy()).max()))
    _close(L.hessian(X, Z, m, W, vis), H_ref.numpy(), float(np.abs(H_ref.numpy()).max()))


@given(sizes, seeds)
def test_gradient_and_hessian_equal_central_differences(shape, seed):
    X, Z, W, m, vis = _problem(*shape, seed)
    d = W.shape[0]
    h = 1e-5
    G = L.gradient(X, Z, m, W, vis)
    H = L.hessian(X, Z, m, W, vis)
    for j in range(d * d):
        E = np.zeros(d * d)
        E[j] = h
        E = E.reshape(d, d)
        fd = (L.loss(X, Z, m, W + E, vis) - L.loss(X, Z, m, W - E, vis)) / (2 * h)
        assert abs(G.ravel()[j] - fd) <= tol("fd_rtol") * max(1.0, abs(fd))
        col = (L.gradient(X, Z, m, W + E, vis) - L.gradient(X, Z, m, W - E, vis)).ravel() / (2 * h)
        np.testing.assert_allclose(H[:, j], col, rtol=tol("fd_rtol"), atol=tol("fd_atol") * 10)


@given(sizes, seeds)
def test_loss_equals_direct_log_sum_exp(shape, seed):
    X, Z, W, m, vis = _problem(*shape, seed)
    a = np.einsum("ntd,de,ne->nt", X, W, Z)
    direct = np.mean(
        [math.log(np.sum(np.exp(a[i][vis[i]]))) - math.log(np.sum(np.exp(a[i][m[i]]))) for i in range(len(a))]
    )
    assert L.loss(X, Z, m, W, vis) == pytest.approx(direct, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(L.logits(X, Z, W), a, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("gap", [5.0, 40.0, 300.0])
def test_saturated_loss_and_gradient_keep_relative_precision(gap):
    """Label logit far above the rest: loss ~ e^{-gap}; the stable forms keep ~full relative precision (50-digit
    mpmath reference), where LSE_V - LSE_m computed naively is 0."""
    r = np.random.default_rng(int(gap))
    n, T, d = 2, 4, 3
    X = r.standard_normal((n, T, d))
    Z = np.zeros((n, d))
    Z[:, 0] = 1.0
    X[:, :, 0] = -gap * r.uniform(0.5, 1.0, (n, T))
    X[:, 0, 0] = 0.0  # label token: logit 0, the others about -gap
    W = np.zeros((d, d))
    W[0, 0] = 1.0
    m = np.zeros((n, T), dtype=bool)
    m[:, 0] = True
    with mpmath.workdps(50):
        Xm = [[[mpmath.mpf(float(v)) for v in row] for row in seq] for seq in X]
        ref_loss = mpmath.mpf(0)
        ref_g = [[mpmath.mpf(0)] * d for _ in range(d)]
        for i in range(n):
            a = [Xm[i][t][0] for t in range(T)]
            den = mpmath.fsum(mpmath.exp(v) for v in a)
            ref_loss += mpmath.log(den) - a[0]
            for t in range(1, T):
                s = mpmath.exp(a[t]) / den
                for k in range(d):
                    ref_g[k][0] += s * (Xm[i][t][k] - Xm[i][0][k])  # z_i = e_0
        ref_loss /= n
        ref_g = np.array([[float(v / n) for v in row] for row in ref_g])
    got = L.loss(X, Z, m, W)
    assert got == pytest.approx(float(ref_loss), rel=1e-13)
    G = L.gradient(X, Z, m, W)
    np.testing.assert_allclose(G, ref_g, rtol=1e-12, atol=0.0)
    assert np.all(np.isfinite(L.hessian(X, Z, m, W)))


@given(sizes, seeds, st.floats(0.1, 5.0))
def test_hessian_is_psd_when_label_occurrences_share_an_embedding(shape, seed, scale):
    X, Z, W, m, vis = _problem(*shape, seed, shared=True, scale=scale)
    H = L.hessian(X, Z, m, W, vis)
    lam = np.linalg.eigvalsh(0.5 * (H + H.T))
    assert lam[0] >= -tol("grad_atol") * max(1.0, float(np.abs(lam).max()))


@given(sizes, seeds, st.floats(0.1, 5.0))
def test_second_differences_are_nonnegative_when_label_occurrences_share_an_embedding(shape, seed, scale):
    """Function values only (no Hessian): f(W+hU) + f(W-hU) - 2 f(W) >= 0 along 8 random unit directions U.
    (With distinct label embeddings about one draw in six has a negative one.)"""
    X, Z, W, m, vis = _problem(*shape, seed, shared=True, scale=scale)
    r = np.random.default_rng(seed + 1)
    f0 = L.loss(X, Z, m, W, vis)
    h = 1e-3
    for _ in range(8):
        U = r.standard_normal(W.shape)
        U /= np.linalg.norm(U)
        second = L.loss(X, Z, m, W + h * U, vis) + L.loss(X, Z, m, W - h * U, vis) - 2 * f0
        assert second >= -1e-13 * max(1.0, f0)


def test_distinct_label_embeddings_break_convexity():
    """Logits (t, -t, 0), the first two in the label set: f(t) = log(1 + 1/(2 cosh t)), f''(0) = -1/3 (by hand:
    g = 1/(2cosh t) = 1/2 - t^2/4 + ..., f'' = g''/(1+g) - g'^2/(1+g)^2 = (-1/2)/(3/2) at 0)."""
    X = np.array([[[1.0], [-1.0], [0.0]]])
    Z = np.array([[1.0]])
    m = np.array([[True, True, False]])
    for t in (0.0, 0.3, -1.7, 4.0):
        assert L.loss(X, Z, m, np.array([[t]])) == pytest.approx(math.log1p(1 / (2 * math.cosh(t))), rel=1e-14)
    assert L.hessian(X, Z, m, np.zeros((1, 1)))[0, 0] == pytest.approx(-1 / 3, rel=1e-12)
    h = 0.1
    f = [L.loss(X, Z, m, np.array([[u]])) for u in (-h, 0.0, h)]
    assert f[0] + f[2] - 2 * f[1] < 0  # not midpoint convex
    assert not L.label_embeddings_shared(X, m)


@given(sizes, seeds, st.booleans(), st.floats(0.1, 5.0))
def test_smoothness_constant_bounds_the_hessian(shape, seed, shared, scale):
    X, Z, W, m, vis = _problem(*shape, seed, shared=shared, scale=scale)
    H = L.hessian(X, Z, m, W, vis)
    assert np.linalg.norm(H, 2) <= L.smoothness_constant(X, Z, vis) * (1 + 1e-12) + 1e-15


def test_smoothness_constant_is_attained_and_batched():
    """Tokens +1, -1 (label the first), z = 1, W = 0: L'' = 4 s(1-s) = 1 at s = 1/2, and L_W = ||X||_2^2 / 2 = 1."""
    X = np.array([[[1.0], [-1.0]]])
    Z = np.array([[1.0]])
    m = np.array([[True, False]])
    assert L.hessian(X, Z, m, np.zeros((1, 1)))[0, 0] == pytest.approx(1.0, rel=1e-15)
    assert L.smoothness_constant(X, Z) == pytest.approx(1.0, rel=1e-11)
    A, B = _problem(3, 4, 2, 1), _problem(3, 4, 2, 2)
    Lb = L.smoothness_constant(np.stack([A[0], B[0]]), np.stack([A[1], B[1]]), np.stack([A[4], B[4]]))
    np.testing.assert_array_equal(
        Lb, [L.smoothness_constant(A[0], A[1], A[4]), L.smoothness_constant(B[0], B[1], B[4])]
    )


def test_label_embeddings_shared_detects_a_one_bit_difference():
    X = np.zeros((1, 3, 2))
    X[0, 0] = X[0, 1] = [0.5, 1.0]
    m = np.array([[True, True, False]])
    assert L.label_embeddings_shared(X, m)
    X[0, 1, 1] = np.nextafter(1.0, 2.0)
    assert not L.label_embeddings_shared(X, m)


def test_bad_masks_are_input_errors():
    X, Z, W, m, vis = _problem(2, 3, 2, 0)
    with pytest.raises(InputError, match="at least one label"):
        L.loss(X, Z, np.zeros_like(m), W)
    hid = m.copy()
    with pytest.raises(InputError, match="not visible"):
        L.loss(X, Z, m, W, visible=~hid)
    with pytest.raises(InputError, match="bool array"):
        L.gradient(X, Z, m.astype(int), W)
    with pytest.raises(InputError, match="W must be"):
        L.hessian(X, Z, m, np.zeros((3, 3)))
