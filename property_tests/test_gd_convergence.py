"""Where the engine goes: normalised GD and the regularisation path approach the Att-SVM direction, computed
independently here with a small cvxpy + Clarabel program (THEORY §2, claims rp-frobenius, ngd-rate)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attsvm import generate, model
from attsvm.gd import regularization_path, run
from attsvm.gd.regpath import _project_cone


def _wmm(X: np.ndarray, Z: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    r"""$\arg\min\|W\|_F$ s.t. $(x_{i\alpha_i}-x_{it})^\top Wz_i\ge1$ (cross-attention), solver status checked."""
    n, T, d = X.shape
    W = cp.Variable((d, d))
    cons = [(X[i, alpha[i]] - X[i, t]) @ W @ Z[i] >= 1 for i in range(n) for t in range(T) if t != alpha[i]]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), cons)
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL, prob.status
    return W.value


def test_normalised_gd_converges_to_the_attsvm_direction():
    ds = generate.paper_law(3, 4, 4, seed=0, B=3)
    Wm = np.stack([_wmm(np.asarray(ds.X[b]), np.asarray(ds.Z[b]), ds.opt[b]) for b in range(3)])
    res = run(ds, steps=6000, record_every=1000, targets={"mm": Wm})
    assert np.array_equal(res.selection, ds.opt)  # these instances converge globally from W0 = 0
    gap = 1 - res.trajectory["corr:mm"]  # (R, B), every 1000 steps
    assert np.all(np.diff(gap[1:], axis=0) < 0)  # monotone approach after the transient
    assert np.all(gap[-1] <= 3e-4), gap[-1]
    np.testing.assert_allclose(1 - model.corr(res.W, Wm), gap[-1], rtol=1e-6)
    assert np.all(res.norm > 500) and np.all(np.diff(res.trajectory["loss"], axis=0) <= 0)


def test_kq_normalised_gd_reaches_a_margin_solution():
    ds = generate.paper_law(2, 3, 3, seed=1)
    res = run(ds, param="KQ", steps=3000)
    X, Z = np.asarray(ds.X), np.asarray(ds.Z)
    a = res.selection[0]
    margins = [(X[i, a[i]] - X[i, t]) @ res.W[0] @ Z[i] for i in range(2) for t in range(3) if t != a[i]]
    assert min(margins) > 0 and res.stop_reason == ["steps"]  # W = K Q^T separates its selection


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_regularization_path_approaches_the_svm_direction(param):
    ds = generate.paper_law(3, 4, 4, seed=2)
    radii = [1.0, 3.0, 10.0, 30.0, 100.0]
    path = regularization_path(ds, radii, param=param, steps_per_radius=300)
    assert np.all(path.ball[:, 0] <= np.array(radii) * (1 + 1e-12))
    assert np.all(np.diff(path.loss[:, 0]) <= 1e-12)  # a larger ball never does worse
    if param == "W":
        Wm = _wmm(np.asarray(ds.X), np.asarray(ds.Z), ds.opt)
        gap = 1 - model.corr(path.W[:, 0], Wm)
        assert np.all(np.diff(gap[1:]) < 0) and gap[-1] < 2e-3, gap
        # first-order optimality on the boundary: -grad L is parallel to W (KKT of the ball constraint)
        # (to the accuracy of 300 projected steps with geometrically shrinking step sizes)
        G = model.grad_W(ds, path.W[1, 0])
        assert model.corr(-G, path.W[1, 0]) > 1 - 1e-3
    else:
        np.testing.assert_allclose(path.ball[-1, 0], radii[-1], rtol=1e-9)
        assert np.array_equal(path.selection[-1, 0], ds.opt)


@given(st.integers(0, 2**20), st.floats(0.0, 1.0))
def test_cone_projection_is_the_euclidean_projection(seed, mu):
    r = np.random.default_rng(seed)
    t = r.standard_normal((4, 3, 3))
    that = t / np.linalg.norm(t, axis=(-2, -1), keepdims=True)
    x = 3 * r.standard_normal((4, 3, 3))
    y = _project_cone(torch.tensor(x), torch.tensor(that), 1.0 - mu).numpy()
    ny = np.linalg.norm(y, axis=(-2, -1))
    inner = np.sum(y * that, axis=(-2, -1))
    assert np.all(inner >= (1 - mu) * ny - 1e-12)  # y lies in the cone
    # variational inequality <x - y, z - y> <= 0 for points z of the cone (z = y + cone directions)
    for _ in range(20):
        dirs = that + 0.3 * r.standard_normal((4, 3, 3))
        z = np.stack([_project_cone(torch.tensor(dirs), torch.tensor(that), 1.0 - mu).numpy()])[0] * r.uniform(0, 5)
        assert np.all(np.sum((x - y) * (z - y), axis=(-2, -1)) <= 1e-9 * (1 + np.abs(x).max() ** 2))


def test_cone_restricted_path_stays_in_the_cone():
    ds = generate.paper_law(3, 4, 4, seed=2)
    other = np.random.default_rng(0).standard_normal((4, 4))
    path = regularization_path(ds, [1.0, 5.0, 20.0], cone=(other, 0.1), steps_per_radius=200)
    assert np.all(model.corr(path.W[:, 0], other) >= 0.9 - 1e-12)
    Wm = _wmm(np.asarray(ds.X), np.asarray(ds.Z), ds.opt)
    free = regularization_path(ds, [20.0], steps_per_radius=200)
    near = regularization_path(ds, [1.0, 5.0, 20.0], cone=(Wm, 0.05), steps_per_radius=200)
    assert model.corr(near.W[-1, 0], free.W[-1, 0]) > 1 - 1e-4  # the cone around W^mm does not bind
    assert path.loss[-1, 0] > free.loss[-1, 0]  # a cone around another direction does
