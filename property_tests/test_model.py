"""The numpy model: closed forms against independent computations (torch autograd from the definition,
central differences), stable formulas against naive ones where both are representable."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attsvm import generate, model, tol

sizes = st.tuples(st.integers(1, 4), st.integers(2, 5), st.integers(2, 4))  # d=1 unit tokens tie
seeds = st.integers(0, 2**20)
losses = st.sampled_from(model.LOSSES)


def _torch_loss_W(ds, W, loss, mask=None):
    """The loss straight from the definition, in torch (independent of attsvm.model)."""
    f = ds.flat()
    X, Z, Y, v = (torch.tensor(np.asarray(a)) for a in (f.X, f.Z, f.Y, f.v))
    a = torch.einsum("ntd,de,ne->nt", X, W, Z)
    if f.mask is not None:
        a = a.masked_fill(~torch.tensor(np.asarray(f.mask)), -torch.inf)
    s = torch.softmax(a, dim=-1)
    fx = torch.einsum("d,ntd,nt->n", v, X, s)
    u = Y * fx
    ell = {"logistic": lambda u: torch.log1p(torch.exp(-u)), "exponential": lambda u: torch.exp(-u)}
    return ell.get(loss, lambda u: -u)(u).mean()


@given(sizes, seeds, losses, st.floats(0.1, 4.0))
def test_grad_W_equals_autograd(shape, seed, loss, scale):
    n, T, d = shape
    ds = generate.paper_law(n, T, d, seed=seed)
    W = scale * np.random.default_rng(seed).standard_normal((d, d))
    Wt = torch.tensor(W, requires_grad=True)
    _torch_loss_W(ds, Wt, loss).backward()
    g = model.grad_W(ds, W, loss)
    np.testing.assert_allclose(g, Wt.grad.numpy(), rtol=tol("grad_rtol") * 1e3, atol=tol("grad_atol"))


@given(sizes, seeds)
def test_grad_W_central_differences(shape, seed):
    n, T, d = shape
    ds = generate.paper_law(n, T, d, seed=seed)
    W = np.random.default_rng(seed + 1).standard_normal((d, d))
    h = 1e-5
    fd = np.zeros((d, d))
    for i in range(d):
        for j in range(d):
            E = np.zeros((d, d))
            E[i, j] = h
            fd[i, j] = (model.loss(ds, W + E) - model.loss(ds, W - E)) / (2 * h)
    g = model.grad_W(ds, W)
    assert np.max(np.abs(fd - g)) <= tol("fd_rtol") * max(1.0, np.max(np.abs(g)))


@pytest.mark.parametrize("form", ["sequence", "causal"])
def test_grad_sequence_forms_equal_autograd(form):
    ds = generate.sequence(3, 4, 3, K=2, seed=4) if form == "sequence" else generate.causal(3, 4, 3, seed=4)
    W = np.random.default_rng(0).standard_normal((3, 3))
    Wt = torch.tensor(W, requires_grad=True)
    _torch_loss_W(ds, Wt, "logistic").backward()
    np.testing.assert_allclose(model.grad_W(ds, W), Wt.grad.numpy(), rtol=1e-9, atol=1e-13)


@given(sizes, seeds, st.integers(1, 4))
def test_grad_KQ_chain_rule(shape, seed, m):
    n, T, d = shape
    ds = generate.paper_law(n, T, d, seed=seed)
    r = np.random.default_rng(seed)
    K, Q = r.standard_normal((d, m)), r.standard_normal((d, m))
    Kt, Qt = torch.tensor(K, requires_grad=True), torch.tensor(Q, requires_grad=True)
    _torch_loss_W(ds, Kt @ Qt.T, "logistic").backward()
    gK, gQ = model.grad_KQ(ds, K, Q)
    np.testing.assert_allclose(gK, Kt.grad.numpy(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(gQ, Qt.grad.numpy(), rtol=1e-8, atol=1e-12)


@given(sizes, seeds)
def test_grad_prompt_and_joint(shape, seed):
    n, T, d = shape
    ds = generate.paper_law(n, T, d, seed=seed)
    r = np.random.default_rng(seed)
    p, v = r.standard_normal(d), r.standard_normal(d)
    X, Y = torch.tensor(np.asarray(ds.X)), torch.tensor(np.asarray(ds.Y))
    pt, vt = torch.tensor(p, requires_grad=True), torch.tensor(v, requires_grad=True)
    s = torch.softmax(torch.einsum("ntd,d->nt", X, pt), -1)
    u = Y * torch.einsum("d,ntd,nt->n", vt, X, s)
    torch.log1p(torch.exp(-u)).mean().backward()
    gv, gp = model.grad_vp(ds, v, p)
    np.testing.assert_allclose(gp, pt.grad.numpy(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(gv, vt.grad.numpy(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(model.grad_p(ds, p, v), gp, rtol=1e-12, atol=1e-15)


@given(st.integers(2, 6), seeds)
def test_residual_pairwise_equals_covariance_form(T, seed):
    r = np.random.default_rng(seed)
    a, g = r.standard_normal(T), r.standard_normal(T)
    s = model.softmax(a)
    naive = s * (g - s @ g)
    np.testing.assert_allclose(model.residual(s, g), naive, rtol=1e-9, atol=1e-15)


def test_residual_stable_when_saturated():
    """Far past saturation the covariance form is pure rounding noise; the pairwise form keeps the
    exact leading term s_t (gamma_t - gamma_opt) for t != opt."""
    g = np.array([1.0, 0.3, -0.2])
    a = np.array([60.0, 0.0, -1.0])
    s = model.softmax(a)
    r = model.residual(s, g)
    # leading-order terms, computed independently: s_t (g_t - g_0) for t >= 1
    expect = s[1:] * (g[1:] - g[0])
    np.testing.assert_allclose(r[1:], expect, rtol=1e-12)
    assert r[0] > 0 and np.isclose(r.sum(), 0.0, atol=1e-40)


def test_loss_derivative_no_overflow():
    u = np.array([-800.0, -30.0, 0.0, 30.0, 800.0])
    d = model.loss_derivative(u, "logistic")
    assert np.all(np.isfinite(d)) and np.all(d[:4] < 0) and d[4] <= 0  # d[4] underflows to -0.0, never NaN
    np.testing.assert_allclose(d[2], -0.5)
    np.testing.assert_allclose(d[3], -1.0 / (1.0 + np.exp(30.0)), rtol=1e-14)
    np.testing.assert_allclose(model.loss_value(np.array([800.0]), "logistic"), np.exp(-800.0))


def test_log_softmax_masked():
    a = np.array([[1.0, 2.0, 3.0]])
    mask = np.array([[True, True, False]])
    ls = model.log_softmax(a, mask)
    assert ls[0, 2] == -np.inf
    np.testing.assert_allclose(np.exp(ls[0, :2]).sum(), 1.0)
    np.testing.assert_allclose(model.softmax(a, mask)[0, :2], np.exp(ls[0, :2]))


@given(sizes, st.integers(1, 3), seeds)
def test_batched_equals_single(shape, B, seed):
    n, T, d = shape
    b = generate.paper_law(n, T, d, seed=seed, B=B)
    W = np.random.default_rng(seed).standard_normal((B, d, d))
    gb = model.grad_W(b, W)
    Lb = model.smoothness_constant(b)
    for k in range(B):
        np.testing.assert_allclose(gb[k], model.grad_W(b[k], W[k]), rtol=tol("batch_rtol"), atol=1e-15)
        np.testing.assert_allclose(Lb[k], model.smoothness_constant(b[k]), rtol=tol("batch_rtol"))


def test_smoothness_constant_formula_by_hand():
    """One input, T=2, d=1: every norm is explicit."""
    from attsvm import Dataset

    X = np.array([[[2.0], [1.0]]])  # ||X||_2 = sqrt(5)
    ds = Dataset(X, np.array([1.0]), np.array([[3.0]]), np.array([0.5]))
    Xs = np.sqrt(5.0)
    expect = 0.25 * 0.25 * 9 * Xs**4 + 3 * 1.0 * 0.5 * 9 * Xs**3
    np.testing.assert_allclose(model.smoothness_constant(ds), expect)


def test_corr():
    A = np.eye(3)
    np.testing.assert_allclose(model.corr(A, 2 * A), 1.0)
    np.testing.assert_allclose(model.corr(A, -A), -1.0)
    # vectors (ndim=1), broadcasting over leading axes, and NaN (no warning) for a zero argument
    p = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    c = model.corr(p, np.array([1.0, 0.0])[None], ndim=1)
    np.testing.assert_allclose(c[:2], [1.0, 1 / np.sqrt(2)])
    assert np.isnan(c[2])
    with np.errstate(all="raise"):
        assert np.isnan(model.corr(np.zeros((2, 2)), A[:2, :2]))
