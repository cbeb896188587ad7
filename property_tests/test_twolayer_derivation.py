"""The derivation ``twolayer-gradient`` agrees with the numeric two-layer model: sympy's derivative of the explicit
loss (T = d = 2, logistic) and the derivation's closed form, lambdified, equal ``attsvm.twolayer.gradients`` and
central finite differences of ``attsvm.twolayer.loss`` on random instances (with and without residual / causal
keys); a planted wrong closed form fails the derivation's check."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from attsvm import twolayer as tl
from attsvm.data import Dataset
from attsvm.symbolic import builders as B
from attsvm.symbolic import discover
from attsvm.symbolic.printer import Ell
from attsvm.tolerances import tol

REPO = Path(__file__).resolve().parents[1]
T, D = 2, 2
LOGISTIC = lambda u: sp.log(1 + sp.exp(-u))  # noqa: E731
OPTIONS = [(False, False), (True, True)]  # (residual, causal)


@functools.cache
def _symbolic(rho: int, causal: bool):
    inp = B.make_twolayer_input(T, D, rho, causal)
    L = B.twolayer_loss_explicit(inp).replace(Ell, LOGISTIC)
    args = [*inp.W1, *inp.W2, *inp.X, *inp.z, *inp.v, inp.Y]
    auto = [sp.lambdify(args, B.diff_entries(L, W), "numpy", cse=True) for W in (inp.W1, inp.W2)]
    lp = sp.Symbol("lp")
    e1 = [inp.e1[k] for k in inp.keys]
    closed = sp.lambdify(args + e1 + [*inp.e2, lp], sp.Matrix.vstack(*B.twolayer_grad_closed_form(inp, lp)), "numpy")
    return inp, args, auto, closed


def _instance(seed: int):
    rng = np.random.default_rng(seed)
    X, z, v = rng.normal(size=(T, D)), rng.normal(size=D), rng.normal(size=D)
    Y = float(rng.choice([-1.0, 1.0]))
    W1, W2 = rng.normal(size=(D, D)), rng.normal(size=(D, D))
    return X, z, v, Y, W1, W2


def _independent_exps(inp, X, z, v, Y, W1, W2, rho, causal):
    """The exponentials and the loss derivative, computed here with plain numpy (max-shifted per row)."""
    A1 = X @ W1 @ X.T  # A1[tau, t] = x_tau^T W1 x_t
    keys = np.tril(np.ones((T, T), dtype=bool)) if causal else np.ones((T, T), dtype=bool)
    A = np.where(keys, A1.T, -np.inf)  # row t, column tau
    e1 = np.exp(A - A.max(axis=1, keepdims=True))
    s1 = e1 / e1.sum(axis=1, keepdims=True)
    h = s1 @ X + rho * X
    a2 = h @ W2 @ z
    e2 = np.exp(a2 - a2.max())
    u = float((e2 / e2.sum()) @ (Y * (h @ v)))
    return [e1[t, tau] for t, tau in inp.keys], list(e2), -1.0 / (1.0 + np.exp(u))


@pytest.mark.parametrize(("residual", "causal"), OPTIONS)
@given(st.integers(0, 2**32 - 1))
def test_derivation_agrees_with_the_model_and_finite_differences(residual, causal, seed):
    rho = int(residual)
    inp, _, auto, closed = _symbolic(rho, causal)
    X, z, v, Y, W1, W2 = _instance(seed)
    args = [*W1.ravel(), *W2.ravel(), *X.ravel(), *z, *v, Y]
    ds = Dataset(X[None], np.array([Y]), z[None], v)
    G1, G2 = tl.gradients(ds, W1, W2, "logistic", residual, causal)
    S1, S2 = (np.array(f(*args), dtype=float) for f in auto)
    e1, e2, lp = _independent_exps(inp, X, z, v, Y, W1, W2, rho, causal)
    C = np.array(closed(*args, *e1, *e2, lp), dtype=float)
    rt, at = tol("grad_rtol"), tol("grad_atol")
    for model_G, sym_G, closed_G in ((G1, S1, C[:D]), (G2, S2, C[D:])):
        np.testing.assert_allclose(sym_G, model_G, rtol=rt, atol=at)
        np.testing.assert_allclose(closed_G, model_G, rtol=rt, atol=at)
    h = 1e-6
    for which, G in ((0, G1), (1, G2)):
        fd = np.zeros((D, D))
        for j in range(D):
            for k in range(D):
                Ws = [W1.copy(), W2.copy()]
                Ws[which][j, k] += h
                up = tl.loss(ds, *Ws, "logistic", residual, causal)
                Ws[which][j, k] -= 2 * h
                fd[j, k] = (up - tl.loss(ds, *Ws, "logistic", residual, causal)) / (2 * h)
        np.testing.assert_allclose(fd, G, rtol=tol("fd_rtol"), atol=tol("fd_atol"))


def test_a_planted_wrong_closed_form_fails_the_derivation(monkeypatch):
    """The layer-1 sensitivity without the centring (x_tau instead of x_tau - hbar_t) must fail the check."""
    reg = discover([REPO / "proofs" / "derivations"])
    right = B.twolayer_grad_closed_form

    def wrong(inp, lp):
        G1, G2 = right(inp, lp)
        f = B.twolayer_forward(inp, inp.e1, inp.e2)
        return G1 + lp * f["s2"][0] * inp.Y * (inp.v.T * f["hbar"][0, :].T)[0] * inp.X[0, :].T * inp.X[0, :], G2

    monkeypatch.setattr(B, "twolayer_grad_closed_form", wrong)
    d = reg["twolayer-gradient"].build(**reg["twolayer-gradient"].ci)
    assert not d.verify()
    assert [s.label for s in d.steps if s.verified is False] == ["chain-rule"]
