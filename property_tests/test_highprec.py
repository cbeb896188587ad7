"""attsvm.highprec: the 50-digit model and GD replay against independent computations.

Cross-checks: float64 closed forms of :mod:`attsvm.model` (independent code), 50-digit central differences of
the 50-digit loss (independent of the gradient formula), direct evaluation at 100 digits (cancellation-prone
forms made harmless by the precision), torch autograd Hessians, numpy SVDs, the batched GD engine.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm import highprec as hp
from attsvm import model
from attsvm.strategies import causal, paper
from attsvm.tolerances import tol

SMALL = paper(n=(1, 3), T=(2, 4), d=(2, 3))


def _W(seed: int, d: int, scale: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-scale, scale, (d, d))


def _rel(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def test_conversions_are_exact():
    x = np.array([0.1, -1 / 3, 2.0**-1074, 1e300])
    assert [float(v) for v in hp.as_mp(x)] == list(x)
    assert hp.as_mp(0.1) == mpmath.mpf(Fraction(0.1).numerator) / Fraction(0.1).denominator
    with mpmath.workdps(60):
        assert abs(hp.rational("1/3") * 3 - 1) < mpmath.mpf(10) ** -55
        assert hp.rationals([["1/2", "-3/4"]])[0][1] == mpmath.mpf(-0.75)
    np.testing.assert_array_equal(hp.to_numpy(hp.as_mp(np.eye(2))), np.eye(2))


@given(ds=SMALL, seed=st.integers(0, 2**16))
def test_loss_and_gradient_match_float64_closed_form(ds, seed):
    W = _W(seed, ds.d)
    assert abs(float(hp.loss(ds, W)) - float(model.loss(ds, W))) <= 1e-14
    G = hp.to_numpy(hp.grad_W(ds, W))
    Gf = model.grad_W(ds, W)
    assert np.linalg.norm(G - Gf) <= tol("grad_rtol") * np.linalg.norm(G) + tol("grad_atol")


@settings(max_examples=5)
@given(ds=SMALL, seed=st.integers(0, 2**16))
def test_gradient_matches_50_digit_central_differences(ds, seed):
    W = hp.as_mp(_W(seed, ds.d))
    with mpmath.workdps(60):
        G = hp.grad_W(ds, W, dps=60)
        h = mpmath.mpf(10) ** -25
        for j in range(ds.d):
            for k in range(ds.d):
                Wp = [r[:] for r in W]
                Wm = [r[:] for r in W]
                Wp[j][k] += h
                Wm[j][k] -= h
                fd = (hp.loss(ds, Wp, dps=60) - hp.loss(ds, Wm, dps=60)) / (2 * h)
                assert abs(fd - G[j][k]) <= mpmath.mpf(10) ** -32  # rounding 1e-60/h, truncation h^2


@given(ds=SMALL, seed=st.integers(0, 2**16))
def test_loss_gap_and_log_one_minus_without_cancellation(ds, seed):
    W = _W(seed, ds.d, scale=6.0)
    with mpmath.workdps(120):
        L = hp.loss(ds, W, dps=120)
        g = hp.scores(hp.data(ds).X, hp.data(ds).Y, hp.data(ds).v)
        Lstar = mpmath.fsum(hp.loss_value(max(gi)) for gi in g) / ds.n
        direct = L - Lstar
        a = hp.logits(hp.data(ds).X, hp.as_mp(W), hp.data(ds).Z)
        s0 = hp.softmax(a[0])
        direct_lom = mpmath.log(1 - s0[0])
    gap = hp.loss_gap(ds, W)
    assert gap > 0
    assert abs(gap - direct) <= mpmath.mpf(10) ** -45 * abs(direct)
    assert abs(hp.log_one_minus_softmax(a[0], 0) - direct_lom) <= mpmath.mpf(10) ** -40


@given(ds=SMALL, seed=st.integers(0, 2**16))
def test_pairwise_covariance_equals_one_pass_formula(ds, seed):
    W = _W(seed, ds.d)
    A = _W(seed + 1, ds.d)
    D = hp.data(ds)
    with mpmath.workdps(100):
        s, g, _, _ = hp.outputs(D, W, dps=100)
        h = hp.logits(D.X, hp.as_mp(A), D.Z)
        for i in range(D.N):
            one_pass = mpmath.fsum(st_ * gt * ht for st_, gt, ht in zip(s[i], g[i], h[i])) - mpmath.fdot(
                s[i], g[i]
            ) * mpmath.fdot(s[i], h[i])
            assert abs(hp.cov(s[i], g[i], h[i]) - one_pass) <= mpmath.mpf(10) ** -80


def test_hessian_matches_torch_autograd():
    import torch

    from attsvm import generate

    ds = generate.paper_law(2, 3, 3, seed=4)
    W = _W(7, 3)
    f = ds.flat()
    X, Z, v, Y = (torch.tensor(np.array(a)) for a in (f.X, f.Z, f.v, f.Y))

    def L(w):
        a = torch.einsum("ntd,de,ne->nt", X, w.reshape(3, 3), Z)
        u = (torch.softmax(a, -1) * (Y[:, None] * (X @ v))).sum(-1)
        return torch.nn.functional.softplus(-u).mean()

    H_t = torch.func.hessian(L)(torch.tensor(W.reshape(-1))).numpy()
    H = hp.to_numpy(hp.hessian_W(ds, W))
    assert _rel(H, H_t) <= 1e-9
    assert abs(float(hp.sym_spectral_norm(hp.hessian_W(ds, W))) - np.max(np.abs(np.linalg.eigvalsh(H_t)))) <= 1e-10


@given(ds=SMALL)
def test_smoothness_constant_and_linear_algebra(ds):
    assert abs(float(hp.smoothness_constant(ds)) / float(model.smoothness_constant(ds)) - 1) <= 1e-13
    M = _W(3, ds.d)
    sv = [float(x) for x in hp.singular_values(hp.as_mp(M))]
    np.testing.assert_allclose(sv, np.linalg.svd(M, compute_uv=False), rtol=1e-13)
    P = hp.to_numpy(hp.projector(ds.Z))
    np.testing.assert_allclose(P @ P, P, atol=1e-14)
    np.testing.assert_allclose(ds.Z @ P, ds.Z, atol=1e-14)
    assert abs(np.trace(P) - np.linalg.matrix_rank(ds.Z)) <= 1e-12
    K, Q = _W(5, ds.d), _W(6, ds.d)
    gK, gQ = (hp.to_numpy(x) for x in hp.grad_KQ(ds, K, Q))
    fK, fQ = model.grad_KQ(ds, K, Q)
    assert _rel(gK, fK) <= 1e-10 and _rel(gQ, fQ) <= 1e-10
    assert abs(float(hp.corr(hp.as_mp(K), hp.as_mp(K))) - 1) <= 1e-15


@settings(max_examples=5)
@given(ds=causal(n=(1, 2), T=(2, 4), d=(2, 3)), seed=st.integers(0, 2**16))
def test_causal_mask_gradient(ds, seed):
    W = _W(seed, ds.d)
    G = hp.to_numpy(hp.grad_W(ds, W))
    Gf = model.grad_W(ds, W)
    assert np.linalg.norm(G - Gf) <= tol("grad_rtol") * np.linalg.norm(G) + tol("grad_atol")


@pytest.mark.parametrize("algo", ["gd", "ngd"])
def test_replay_matches_engine(algo):
    from attsvm import gd, generate

    ds = generate.paper_law(2, 3, 3, seed=11)
    W0 = _W(1, 3, scale=0.5)
    run = hp.replay(ds, W0, param="W", algo=algo, lr=0.3, steps=25, record_every=5)
    assert run.steps == [0, 5, 10, 15, 20, 25] and len(run.recorded) == 6 and run.taken == 25
    res = gd.run(ds, param="W", algo=algo, lr=0.3, steps=25, init=W0, record_every=5, record_params=True)
    assert _rel(run.array("W"), res.W[0]) <= 1e-10
    assert _rel(run.array("W", index=2), res.trajectory["W"][2, 0]) <= 1e-10
    # and by hand, one float64 step at a time
    W = W0.copy()
    for _ in range(25):
        G = model.grad_W(ds, W)
        W = W - 0.3 * (G / np.linalg.norm(G) if algo == "ngd" else G)
    assert _rel(run.array("W"), W) <= 1e-12


def test_replay_prompt_and_one_over_L_match_engine():
    from attsvm import gd, generate
    from attsvm.strategies import batch

    ds = batch("prompt", 1, 4, n=3, T=3, d=3)[0]
    run = hp.replay(ds, np.zeros(3), param="p", algo="ngd", lr=0.1, steps=40)
    res = gd.run(ds, param="p", algo="ngd", lr=0.1, steps=40)
    assert _rel(run.array("p"), res.p[0]) <= 1e-10
    dw = generate.paper_law(2, 3, 3, seed=3)
    run = hp.replay(dw, np.zeros((3, 3)), param="W", algo="gd", lr="1/L", steps=30)
    res = gd.run(dw, param="W", algo="gd", lr="1/L", steps=30)
    assert abs(float(run.lr) - res.lr[0]) <= 1e-14 * res.lr[0]
    assert _rel(run.array("W"), res.W[0]) <= 1e-10


@settings(max_examples=5)
@given(ds=paper(n=(1, 3), T=(2, 4), d=(2, 3)), seed=st.integers(0, 2**16))
def test_prompt_gradients_match_closed_form(ds, seed):
    rng = np.random.default_rng(seed)
    v, p = rng.standard_normal(ds.d), rng.standard_normal(ds.d) * 2
    gv, gp = (hp.to_numpy(g) for g in hp.grad_vp(ds, v, p))
    fv, fp = model.grad_vp(ds, v, p)
    for a, b in ((gv, fv), (gp, fp)):
        assert np.linalg.norm(a - b) <= tol("grad_rtol") * np.linalg.norm(a) + tol("grad_atol")
    assert np.linalg.norm(hp.to_numpy(hp.grad_p(ds, p)) - model.grad_p(ds, p)) <= tol("grad_rtol") * np.linalg.norm(
        fp
    ) + tol("grad_atol")


def test_gradient_shares_match_the_log_domain_reference():
    """Far past float64 underflow the 50-digit shares equal the reference stepper's log-domain shares."""
    from attsvm import gd, generate
    from attsvm.model import Arrays

    ds = generate.paper_law(3, 3, 3, seed=4)
    W = gd.ngd_reference(ds, np.zeros((3, 3)), 400).W * 20
    sh = np.array([float(x) for x in hp.gradient_shares(ds, W)])
    ref = gd.log_gradient(Arrays.of(ds), W).log_share / np.log(10)  # log10 of the largest pair weight share
    assert np.all(np.isfinite(sh)) and np.max(sh) <= 1e-9  # the dominant row carries (almost) all of it
    assert np.argmax(sh) == np.argmax(ref) and np.all(np.abs(sh - ref) <= 2.0)  # same order of magnitude


def test_path_point_solves_the_ball_problem():
    """Newton from a rough path point: KKT residual ~0, the point is a local minimiser on the sphere, and the
    float64 engine run much longer lands on it."""
    from attsvm import gd
    from attsvm.strategies import batch

    ds = batch("feasible", 1, 0, n=3, T=3, d=2)[0]
    R = 3.0
    rough = gd.regularization_path(ds, [R], param="W", steps_per_radius=50)
    pt = hp.path_point(ds, rough.W[0, 0], R)
    assert pt.local_min and pt.residual <= 1e-25 and pt.lam > 0
    assert abs(float(hp.frob(pt.W)) - R) <= 1e-14 * R
    fine = gd.regularization_path(ds, [R], param="W", steps_per_radius=20000, shrink=1e-8)
    assert _rel(hp.to_numpy(pt.W), fine.W[0, 0]) <= 1e-6
    kq = gd.regularization_path(ds, [R], param="KQ", steps_per_radius=300)
    pk = hp.path_point(ds, {"K": kq.K[0, 0], "Q": kq.Q[0, 0]}, R, param="KQ")
    assert pk.local_min and pk.residual <= 1e-25


def test_signed_float_keeps_the_sign():
    assert hp.signed_float(-(mpmath.mpf(10) ** -400)) < 0 and hp.signed_float(mpmath.mpf(10) ** -400) == 0.0
    assert hp.signed_float(mpmath.mpf(10) ** 400) == np.finfo(float).max


def test_bad_arguments():
    from attsvm import generate

    ds = generate.paper_law(1, 2, 2, seed=0)
    with pytest.raises(ValueError):
        hp.loss_value(mpmath.mpf(1), "hinge")
    with pytest.raises(ValueError):
        hp.replay(ds, np.zeros((2, 2)), algo="sgd", steps=1)
    with pytest.raises(ValueError):
        hp.replay(ds, np.zeros((2, 2)), param="KQ", steps=1)
    with pytest.raises(ValueError):
        hp.replay(ds, np.zeros(2), param="W", steps=1)
    with pytest.raises(ValueError):
        hp.data(generate.paper_law(1, 2, 2, seed=0, B=2))
