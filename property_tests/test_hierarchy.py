"""The hierarchy claims' data laws and encodings (issue 30): the ``twolayer`` and ``gmc`` strategies keep their
promises; the exact reduction ``hier-top-layer`` rests on (W1 frozen: the two-layer model is the one-layer model on
the layer-1 outputs) against a loop-by-loop formula written from the definition; the layer-1 SVM encoding and the
GMC separator encoding against their constraints written out; the GMC gradient against central differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from attsvm import gmc, hierarchy, twolayer
from attsvm import strategies as S
from attsvm.model import logits, loss_value


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max())
    return e / e.sum()


def _two_layer_loss_by_loops(X, Y, Z, v, W1, W2, rho):
    """The spec's two-layer loss, one input, one row, one token at a time (logistic)."""
    n, T, _ = X.shape
    total = 0.0
    for i in range(n):
        h = []
        for t in range(T):
            s1 = _softmax(np.array([X[i, tau] @ W1 @ X[i, t] for tau in range(T)]))
            h.append(sum(s1[tau] * X[i, tau] for tau in range(T)) + rho * X[i, t])
        s2 = _softmax(np.array([h[t] @ W2 @ Z[i] for t in range(T)]))
        f = v @ sum(s2[t] * h[t] for t in range(T))
        total += np.log1p(np.exp(-Y[i] * f))
    return total / n


# ---------------------------------------------------------------------- the twolayer law
@settings(max_examples=30, database=None)
@given(S.twolayer(n=(1, 4), T=(3, 5), d_extra=(0, 2)))
def test_twolayer_law_promises(ds):
    """Marker on exactly one key, the label on its successor (the unique optimal raw token), one-hot positions,
    query = the marker, head = the signal coordinate."""
    X, T = ds.X, ds.T
    assert 0 <= ds.d - 2 - T <= 2  # d = 2 + T + d_extra
    assert np.array_equal(X[..., 2 : 2 + T], np.broadcast_to(np.eye(T), X[..., 2 : 2 + T].shape))
    key = np.argmax(X[..., 1], -1)
    assert np.all(X[..., 1].sum(-1) == 1)
    assert np.all(key <= T - 2)
    succ = X[np.arange(ds.n), key + 1, 0]
    assert np.array_equal(succ, ds.Y)
    assert np.array_equal(ds.opt, key + 1)  # raw scores: 1 at the successor, |decoy| <= 1/2 elsewhere
    assert np.all(ds.Z[:, 1] == 1) and np.sum(np.abs(ds.Z)) == ds.n and ds.v[0] == 1 and np.sum(np.abs(ds.v)) == 1


def test_twolayer_batch_is_seeded_and_sized():
    a = S.batch("twolayer", 5, seed=3, n=3, T=4, d_extra=1)
    b = S.batch("twolayer", 5, seed=3, n=3, T=4, d_extra=1)
    assert a.X.shape == (5, 3, 4, 7) and np.array_equal(a.X, b.X)


# ---------------------------------------------------------------------- the exact reduction of hier-top-layer
@pytest.mark.parametrize("rho", [0.0, 1.0])
def test_frozen_w1_is_the_one_layer_model_on_h(rho):
    """Loss of the two-layer model (loops, from the definition) = the one-layer loss (attsvm.model) on the top-layer
    data set of the frozen W1, at several W2."""
    ds = S.batch("twolayer", 1, seed=5, n=3, T=4, d_extra=1)[0]
    rng = np.random.default_rng(0)
    W1 = 2.0 * rng.standard_normal((ds.d, ds.d))
    h = twolayer.forward(ds, W1, np.zeros((ds.d, ds.d)), residual=bool(rho)).h
    top = twolayer.top_layer_dataset(ds, h)
    for _ in range(3):
        W2 = 3.0 * rng.standard_normal((ds.d, ds.d))
        a = logits(top.X, W2, top.Z)
        s = np.exp(a - a.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        u = top.Y * np.einsum("nt,ntd,d->n", s, top.X, top.v)
        one_layer = float(np.mean(loss_value(u)))
        loops = _two_layer_loss_by_loops(ds.X, ds.Y, ds.Z, ds.v, W1, W2, rho)
        assert one_layer == pytest.approx(loops, rel=1e-12, abs=1e-14)


# ---------------------------------------------------------------------- the layer-1 SVM encoding
def test_layer1_encoding_has_the_layer1_constraints():
    """Every margin of the encoded data set at W is (x_{i alpha_it} - x_{i tau})^T W x_it, written out by loops."""
    ds = S.batch("twolayer", 1, seed=2, n=3, T=4, d_extra=0)[0]
    rng = np.random.default_rng(1)
    alpha = rng.integers(0, ds.T, size=(ds.n, ds.T))
    rows = [(0, 1), (1, 3), (2, 0), (2, 2)]
    enc = hierarchy.layer1_data(ds, alpha, rows)
    W = rng.standard_normal((ds.d, ds.d))
    a = logits(enc.X, W, enc.Z)
    for r, (i, t) in enumerate(rows):
        for tau in range(ds.T):
            want = (ds.X[i, alpha[i, t]] - ds.X[i, tau]) @ W @ ds.X[i, t]
            assert a[r, enc.alpha[r]] - a[r, tau] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_selected_rows_are_beta():
    assert hierarchy.selected_rows(np.array([2, 0, 3])) == [(0, 2), (1, 0), (2, 3)]


# ---------------------------------------------------------------------- GMC
@settings(max_examples=20, database=None)
@given(S.gmc(n=(1, 3), T=(3, 5), d=(2, 5)))
def test_gmc_law_and_separator_encoding(ds):
    """alpha = t0 + 1; the query is the token at t0 (sigma = 0); the separator's encoded margins are
    (k_{i alpha} - k_{it})^T W q_i with the keys k_it = e_{i,t-1}, written out by loops."""
    t0 = ds.alpha - 1
    assert np.all((1 <= ds.alpha) & (ds.alpha <= ds.T - 1))
    assert np.array_equal(ds.Z, ds.X[np.arange(ds.n), t0])
    view = gmc.attention_view(ds)
    W = np.arange(ds.d * ds.d, dtype=float).reshape(ds.d, ds.d) / ds.d**2 - 0.3
    a = logits(view.X, W, view.Z)
    for i in range(ds.n):
        for t in range(1, ds.T):
            want = (ds.X[i, ds.alpha[i] - 1] - ds.X[i, t - 1]) @ W @ ds.Z[i]
            assert a[i, view.alpha[i]] - a[i, t - 1] == pytest.approx(want, rel=1e-12, abs=1e-12)


def _gmc_loss_by_loops(ds, W):
    """The GMC square loss from its definition: keys e_{t-1}, values e_t, target e_{t0+1} (t0 + 1 = alpha)."""
    total = 0.0
    for i in range(ds.n):
        s = _softmax(np.array([ds.X[i, t - 1] @ W @ ds.Z[i] for t in range(1, ds.T)]))
        y_hat = sum(s[t - 1] * ds.X[i, t] for t in range(1, ds.T))
        total += float(np.sum((y_hat - ds.X[i, ds.alpha[i]]) ** 2))
    return total / ds.n


def _engine_loss(ds, W):
    from attsvm import gd

    view = gmc.attention_view(ds)
    head = gmc.regression_head(ds)
    return float(gd.run(view, param="W", algo="gd", loss="correlation", head=head, steps=0, init=W).loss[0])


def test_gmc_engine_loss_is_the_square_loss():
    """The engine's regression head on the GMC encoding = the GMC square loss written from its definition."""
    ds = S.batch("gmc", 1, seed=4, n=3, T=5, d=4, sigma=0.3)[0]
    rng = np.random.default_rng(2)
    for scale in (0.5, 2.0, 6.0):
        W = scale * rng.standard_normal((ds.d, ds.d))
        assert _engine_loss(ds, W) == pytest.approx(_gmc_loss_by_loops(ds, W), rel=1e-10, abs=1e-15)


def test_gmc_loss_vanishes_along_the_separator():
    """Along R W^mm the loss falls to 0 (the separator selects the copied position): the statement's condition."""
    from attsvm.svm import wmm

    ds = S.batch("gmc", 1, seed=0, n=3, T=4, d=6)[0]
    Wm = wmm(gmc.attention_view(ds))
    assert Wm is not None
    L = [_gmc_loss_by_loops(ds, R * Wm) for R in (1.0, 10.0, 40.0)]
    assert L[0] > L[1] > L[2] and L[2] < 1e-12
