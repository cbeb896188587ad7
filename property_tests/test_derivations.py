"""Every derivation verifies; golden LaTeX is byte-identical; the closed forms agree with ``attsvm.model``.

Golden files: ``proofs/tex/<name>.tex``. To regenerate after an intended change run
``attsvm derive --update-golden`` (or ``pytest --update-golden``, or ``ATTSVM_UPDATE_GOLDEN=1``) and review the diff.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from attsvm import model
from attsvm.data import Dataset
from attsvm.symbolic import builders as B
from attsvm.symbolic import discover
from attsvm.symbolic.notation import matrix
from attsvm.symbolic.printer import Ell
from attsvm.tolerances import tol

REPO = Path(__file__).resolve().parents[1]
REG = discover([REPO / "proofs" / "derivations"])
GOLDEN = REPO / "proofs" / "tex"
NAMES = sorted(REG)
# CI runs the smaller sweeps each derivation declares (``ci=`` on ``@derivation``); the full defaults (what
# `attsvm derive --check` verifies) run in the slow test below.


@pytest.mark.parametrize("name", NAMES)
def test_derivation_verifies(name):
    d = REG[name].build(**REG[name].ci)
    ok = d.verify()
    assert ok, d.failures()
    assert d.checked_steps, "a derivation must have at least one checked step"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_derivation_verifies_full_sweep(name):
    d = REG[name].build()  # gradient: every T <= 4, d <= 3
    assert d.verify(), d.failures()


@pytest.mark.parametrize("name", NAMES)
def test_golden_latex(name, monkeypatch):
    from attsvm.symbolic.derivation import GOLDEN_SOURCE_DATE_EPOCH

    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(GOLDEN_SOURCE_DATE_EPOCH))  # the provenance date of the goldens
    text = REG[name].build().latex(standalone=True)
    path = GOLDEN / f"{name}.tex"
    if os.environ.get("ATTSVM_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run attsvm derive --update-golden"
    assert path.read_text(encoding="utf-8") == text, f"{path} differs: review, then attsvm derive --update-golden"


def test_no_stale_golden_files():
    assert sorted(p.stem for p in GOLDEN.glob("*.tex")) == NAMES


def test_derivations_do_not_import_the_model():
    for f in (REPO / "proofs" / "derivations").glob("*.py"):
        assert "attsvm.model" not in f.read_text() and "from attsvm import model" not in f.read_text(), f


# ---------------------------------------------------------------------- numeric agreement with attsvm.model
N, T, D = 2, 2, 2
LOGISTIC = lambda u: sp.log(1 + sp.exp(-u))  # noqa: E731


@functools.cache
def _symbolic():
    """Explicit logistic loss of a generic instance (n=2, T=3, d=2), sympy derivatives, lambdified."""
    W = B.weights(D)
    v = sp.Matrix(D, 1, lambda k, _: sp.Symbol(f"v{k}"))
    inputs = [B.make_input(T, D, W, i, v) for i in range(1, N + 1)]
    L = B.loss_explicit(inputs).replace(Ell, LOGISTIC)
    args = [*W, *v] + [s for inp in inputs for s in (*inp.X, *inp.z, inp.Y)]
    grad = sp.lambdify(args, B.diff_entries(L, W), "numpy", cse=True)
    # closed form of the derivation, with the exponentials and loss derivatives as inputs
    lps = [sp.Symbol(f"lp{i}") for i in range(N)]
    closed = sp.lambdify(args + [e for inp in inputs for e in inp.e] + lps, B.grad_closed_form(inputs, lps), "numpy")
    return grad, closed, args, L, W


@functools.cache
def _symbolic_kq():
    _, _, args, L, W = _symbolic()
    v = args[D * D : D * D + D]
    K, Q = matrix("k", D, 2), matrix("q", D, 2)
    sub = dict(zip(list(W), list(K * Q.T)))
    Lkq = L.xreplace(sub)
    kq_args = [*K, *Q, *v] + args[D * D + D :]
    gK = sp.lambdify(kq_args, B.diff_entries(Lkq, K), "numpy", cse=True)
    gQ = sp.lambdify(kq_args, B.diff_entries(Lkq, Q), "numpy", cse=True)
    return gK, gQ


def _instance(seed: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, T, D))
    Z = rng.normal(size=(N, D))
    v = rng.normal(size=D)
    Y = rng.choice([-1.0, 1.0], size=N)
    W = scale * rng.normal(size=(D, D))
    return X, Y, Z, v, W


def _args(X, Y, Z, v, W):
    out = [*W.reshape(-1), *v]
    for i in range(N):
        out += [*X[i].reshape(-1), *Z[i], Y[i]]
    return out


def _ds(X, Y, Z, v):
    return Dataset(X=X, Y=Y, Z=Z, v=v, alpha=np.zeros(len(Y), dtype=int))


def _independent_parts(X, Y, Z, v, W):
    """Exponentials (max-shifted) and logistic derivatives computed here with plain numpy."""
    a = np.einsum("ntd,de,ne->nt", X, W, Z)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    gam = Y[:, None] * (X @ v)
    u = (s * gam).sum(1)
    lp = -1.0 / (1.0 + np.exp(u))
    return a, e, s, gam, u, lp


seeds = st.integers(0, 2**32 - 1)


@given(seeds)
def test_gradient_agrees_with_model(seed):
    X, Y, Z, v, W = _instance(seed)
    grad, closed, _, _, _ = _symbolic()
    G_model = model.grad_W(_ds(X, Y, Z, v), W)
    G_sym = np.array(grad(*_args(X, Y, Z, v, W)), dtype=float)
    _, e, _, _, _, lp = _independent_parts(X, Y, Z, v, W)
    G_closed = np.array(closed(*_args(X, Y, Z, v, W), *e.reshape(-1), *lp), dtype=float)
    rt, at = tol("grad_rtol"), tol("grad_atol")
    np.testing.assert_allclose(G_model, G_sym, rtol=rt, atol=at)
    np.testing.assert_allclose(G_model, G_closed, rtol=rt, atol=at)


@given(seeds)
def test_kq_gradient_agrees_with_model(seed):
    X, Y, Z, v, _ = _instance(seed)
    rng = np.random.default_rng(seed + 1)
    K, Q = rng.normal(size=(D, 2)), rng.normal(size=(D, 2))
    gK, gQ = _symbolic_kq()
    args = [*K.reshape(-1), *Q.reshape(-1), *v] + _args(X, Y, Z, v, np.zeros((D, D)))[D * D + D :]
    mK, mQ = model.grad_KQ(_ds(X, Y, Z, v), K, Q)
    np.testing.assert_allclose(mK, np.array(gK(*args), float), rtol=tol("grad_rtol"), atol=tol("grad_atol"))
    np.testing.assert_allclose(mQ, np.array(gQ(*args), float), rtol=tol("grad_rtol"), atol=tol("grad_atol"))


def _cov(s, g, h):
    return (s * g * h).sum(-1) - (s * g).sum(-1) * (s * h).sum(-1)


@given(seeds)
def test_covariance_form_agrees_with_model(seed):
    X, Y, Z, v, W = _instance(seed)
    A = np.random.default_rng(seed + 2).normal(size=(D, D))
    _, _, s, gam, _, lp = _independent_parts(X, Y, Z, v, W)
    h = np.einsum("ntd,de,ne->nt", X, A, Z)
    lhs = np.sum(model.grad_W(_ds(X, Y, Z, v), W) * A)
    rhs = np.mean(lp * _cov(s, gam, h))
    np.testing.assert_allclose(lhs, rhs, rtol=tol("grad_rtol"), atol=tol("grad_atol"))


@given(seeds)
def test_softmax_jacobian_agrees_with_model_residual(seed):
    rng = np.random.default_rng(seed)
    a, g = rng.normal(size=5), rng.normal(size=5)
    s = model.softmax(a)
    J = np.diag(s) - np.outer(s, s)  # the derivation's closed form
    np.testing.assert_allclose(J @ g, model.residual(s, g), rtol=tol("grad_rtol"), atol=tol("grad_atol"))
    # and the Jacobian itself against central differences of the model's softmax
    h = 1e-6
    fd = np.stack(
        [(model.softmax(a + h * np.eye(5)[k]) - model.softmax(a - h * np.eye(5)[k])) / (2 * h) for k in range(5)],
        axis=1,
    )
    np.testing.assert_allclose(J, fd, rtol=tol("fd_rtol"), atol=tol("fd_rtol") * 1e-2)


def _hessian_form(X, Y, Z, v, W, A):
    """The derivation's quadratic form with logistic l'' = -l'(1 + l') (computed here)."""
    _, _, s, gam, _, lp = _independent_parts(X, Y, Z, v, W)
    lpp = -lp * (1 + lp)
    h = np.einsum("ntd,de,ne->nt", X, A, Z)
    gb, hb = (s * gam).sum(-1, keepdims=True), (s * h).sum(-1, keepdims=True)
    third = (s * (gam - gb) * (h - hb) ** 2).sum(-1)
    return np.mean(lpp * _cov(s, gam, h) ** 2 + lp * third)


@given(seeds)
def test_hessian_agrees_with_finite_differences_of_model(seed):
    X, Y, Z, v, W = _instance(seed)
    A = np.random.default_rng(seed + 3).normal(size=(D, D))
    ds = _ds(X, Y, Z, v)
    eps = 1e-5
    fd = (np.sum(model.grad_W(ds, W + eps * A) * A) - np.sum(model.grad_W(ds, W - eps * A) * A)) / (2 * eps)
    np.testing.assert_allclose(_hessian_form(X, Y, Z, v, W, A), fd, rtol=tol("fd_rtol"), atol=1e-9)


@given(seeds)
def test_smoothness_bound_holds_for_model_constant(seed):
    X, Y, Z, v, W = _instance(seed, scale=0.3)
    A = np.random.default_rng(seed + 4).normal(size=(D, D))
    L_W = float(model.smoothness_constant(_ds(X, Y, Z, v)))
    assert abs(_hessian_form(X, Y, Z, v, W, A)) <= L_W * np.sum(A * A) * (1 + 1e-12)


@given(seeds)
def test_overparam_direction(seed):
    X, Y, Z, v, W = _instance(seed)  # d = n = 2: generic queries are independent
    Zc = Z.T  # columns are queries
    Zt = Zc @ np.linalg.inv(Zc.T @ Zc)
    Wp = np.outer(v, Zt @ Y)
    _, _, s, gam, _, lp = _independent_parts(X, Y, Z, v, W)
    np.testing.assert_allclose(Wp @ Z.T, v[:, None] * Y[None, :], rtol=1e-9, atol=1e-9)
    lhs = np.sum(model.grad_W(_ds(X, Y, Z, v), W) * Wp)
    var = (s * gam**2).sum(-1) - (s * gam).sum(-1) ** 2
    np.testing.assert_allclose(lhs, np.mean(lp * var), rtol=1e-8, atol=1e-12)
    assert lhs < 0


def _assumption_b(seed: int):
    """Assumption B by construction: v = e_1, first coordinates from the scores; z_i = e_2 and second coordinates
    with a gap >= 1 below the optimal token, so W_f = e_2 e_2^T is feasible (margins >= 1)."""
    rng = np.random.default_rng(seed)
    n, T = 3, 4
    Y = rng.choice([-1.0, 1.0], size=n)
    go, gap = rng.normal(size=n), rng.uniform(0.1, 2.0, size=n)
    X = np.zeros((n, T, 2))
    X[:, 0, 0] = Y * go
    X[:, 1:, 0] = (Y * (go - gap))[:, None]
    X[:, 1:, 1] = rng.normal(size=(n, T - 1))
    X[:, 0, 1] = X[:, 1:, 1].max(1) + 1.0 + rng.uniform(0, 1, size=n)
    Z = np.tile(np.array([0.0, 1.0]), (n, 1))
    v = np.array([1.0, 0.0])
    Wf = np.array([[0.0, 0.0], [0.0, 1.0]])
    return X, Y, Z, v, Wf, gap


@given(seeds)
def test_equal_scores_bound_on_model(seed):
    X, Y, Z, v, Wf, gap = _assumption_b(seed)
    W = np.random.default_rng(seed + 5).normal(size=(2, 2))
    ds = Dataset(X=X, Y=Y, Z=Z, v=v)
    s, _, u = model.outputs(ds, W)
    lp = -1.0 / (1.0 + np.exp(u))
    lhs = np.sum(model.grad_W(ds, W) * Wf)
    bound = np.mean(lp * gap * s[:, 0] * (1 - s[:, 0]))
    assert lhs <= bound + 1e-12 * abs(bound) and bound < 0


@given(seeds, st.floats(0.5, 20.0))
def test_softmax_decay_on_model(seed, R):
    X, Y, Z, v, Wf, _ = _assumption_b(seed)
    ds = Dataset(X=X, Y=Y, Z=Z, v=v)
    margins = (X[:, :1, :] - X[:, 1:, :]) @ Wf @ np.array([0.0, 1.0])
    Wf = Wf / margins.min()  # rescale so the smallest margin is exactly 1 (margins all >= 1)
    rho = 1.0 / np.linalg.norm(Wf)
    s, _, _ = model.outputs(ds, R * Wf * rho)
    assert np.all(1 - s[:, 0] <= (X.shape[1] - 1) * np.exp(-R * rho) * (1 + 1e-12))


@given(seeds)
def test_nuclear_variational_numerically(seed):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(3, 3))
    U, S, Vt = np.linalg.svd(W)
    K, Q = U * np.sqrt(S), Vt.T * np.sqrt(S)
    np.testing.assert_allclose(K @ Q.T, W, atol=1e-12)
    np.testing.assert_allclose((np.sum(K * K) + np.sum(Q * Q)) / 2, S.sum(), rtol=1e-12)
    M = rng.normal(size=(3, 3)) + 3 * np.eye(3)  # another factorisation K M, Q M^{-T}
    K2, Q2 = K @ M, Q @ np.linalg.inv(M).T
    np.testing.assert_allclose(K2 @ Q2.T, W, atol=1e-9)
    assert (np.sum(K2 * K2) + np.sum(Q2 * Q2)) / 2 >= S.sum() * (1 - 1e-12)
