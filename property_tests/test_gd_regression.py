"""The square-loss regression head of the GD engine, ``head=("regression", (V, Yt))`` (issue 30: the Gaussian
Match-and-Copy model, keys apart from values, square loss with vector targets).

* the 50-digit gradient :func:`attsvm.highprec.grad_regression` (the chain rule, written from the definition) is
  the central difference of the square loss written here in numpy, and of the 50-digit loss;
* the engine's plain gradient (one ``gd`` step), its log-domain ``ngd`` direction, and torch autograd of the
  engine's loss all equal the 50-digit gradient (also on causal-kind data with a visibility mask, and batched);
* float64 runs (``gd``, ``ngd``, a mini-batch) equal the 50-digit replay within ``replay_rtol``, also after ``ngd``
  far past float64 softmax underflow (log s < -745), where only the row log-scale keeps the direction;
* the reported loss is the square loss; a batched run equals its runs one at a time; sharded runs equal the whole;
* bad input: one-line InputError (the engine) / ValueError (the replay).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from attsvm import gd
from attsvm import highprec as hp
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.tolerances import tol

REG = "regression"


def _gmc(seed: int = 0, n: int = 4, T: int = 5, d: int = 3, sigma: float = 0.3, batch: int | None = None):
    """Match-and-copy data: tokens e_0..e_{T-1} ~ N(0, I/d), keys e_{t-1} and values e_t (t = 1..T-1), the query
    e_{t0} + sigma xi, the target e_{t0+1}: ``(ds, V, Yt)`` (labels 1)."""
    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    E = rng.standard_normal((*lead, n, T, d)) / np.sqrt(d)
    t0 = rng.integers(0, T - 1, (*lead, n))
    q = np.take_along_axis(E, t0[..., None, None], -2)[..., 0, :] + sigma * rng.standard_normal((*lead, n, d)) / 2
    V = E[..., 1:, :]
    Yt = np.take_along_axis(V, t0[..., None, None], -2)[..., 0, :]
    v = np.zeros((*lead, d))
    v[..., 0] = 1.0
    return Dataset(E[..., :-1, :], np.ones((*lead, n)), q, v), V, Yt


def _square_loss(ds: Dataset, W: np.ndarray, V: np.ndarray, Yt: np.ndarray) -> float:
    """(1/n) sum_i ||V_i^T softmax(X_i W z_i) - y_i||^2, straight from the definition (masked tokens left out)."""
    f = ds.flat()
    a = np.einsum("ntd,de,ne->nt", f.X, W, f.Z)
    if f.mask is not None:
        a = np.where(f.mask, a, -np.inf)
    s = np.exp(a - a.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    m = np.einsum("nt,ntk->nk", s, V)
    return float(np.mean(np.sum((m - Yt) ** 2, -1)))


def _fd(f, W: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.zeros(W.shape)
    for idx in np.ndindex(W.shape):
        E = np.zeros(W.shape)
        E[idx] = h
        out[idx] = (f(W + E) - f(W - E)) / (2 * h)
    return out


def _causal(seed: int = 3, n: int = 2, T: int = 4, d: int = 3, dv: int = 2):
    """Causal-kind data (flat rows (i, k) see tokens tau <= k) with labels 1, values and targets per flat row."""
    rng = np.random.default_rng(seed)
    ds = Dataset(rng.standard_normal((n, T, d)), np.ones((n, T)), None, rng.standard_normal(d), kind="causal")
    N = ds.flat().X.shape[0]
    return ds, rng.standard_normal((N, T, dv)), rng.standard_normal((N, dv))


def _hp_grad(ds, W, V, Yt) -> np.ndarray:
    return hp.to_numpy(hp.grad_regression(ds, W, V, Yt))


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


CASES = {"gmc": _gmc, "causal": _causal}


@pytest.mark.parametrize("case", sorted(CASES))
def test_50_digit_gradient_is_the_central_difference_of_the_square_loss(case):
    ds, V, Yt = CASES[case]()
    W = 0.7 * np.random.default_rng(5).standard_normal((ds.d, ds.d))
    G = _hp_grad(ds, W, V, Yt)
    F = _fd(lambda A: _square_loss(ds, A, V, Yt), W)
    assert np.max(np.abs(G - F)) <= tol("fd_rtol") * np.max(np.abs(F)) + tol("fd_atol")
    with mpmath.workdps(60):  # and of the 50-digit loss itself, step 1e-20
        h = mpmath.mpf("1e-20")
        Wm = hp.as_mp(W)
        for a, b in [(0, 0), (1, 2), (2, 1)]:
            moved = []
            for sgn in (1, -1):
                Wp = [row[:] for row in Wm]
                Wp[a][b] += sgn * h
                moved.append(hp.loss_regression(ds, Wp, V, Yt, dps=60))
            assert abs((moved[0] - moved[1]) / (2 * h) - mpmath.mpf(G[a, b])) <= mpmath.mpf("1e-15") * abs(G).max()


@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_gradient_and_autograd_equal_the_50_digit_gradient(case):
    ds, V, Yt = CASES[case]()
    W0 = 0.7 * np.random.default_rng(6).standard_normal((ds.d, ds.d))
    want = _hp_grad(ds, W0, V, Yt)
    head = (REG, (V, Yt))
    # the plain gradient: one gd step of size 1 (W1 = W0 - G)
    one = gd.run(ds, param="W", algo="gd", lr=1.0, steps=1, loss="correlation", head=head, init=W0)
    assert _rel(W0 - one.W[0], want) <= 1e-12
    # the log-domain ngd direction: one step of size 1 (W1 = W0 - G / ||G||)
    one = gd.run(ds, param="W", algo="ngd", lr=1.0, steps=1, loss="correlation", head=head, init=W0)
    assert _rel(W0 - one.W[0], want / np.linalg.norm(want)) <= 1e-12
    # torch autograd of the engine's loss (model_torch.loss_W_torch through head_outputs)
    from attsvm.gd.loop import head_of
    from attsvm.gd.model_torch import TorchData, loss_W_torch

    D = TorchData.of(ds)
    with torch.enable_grad():
        Wt = torch.tensor(W0[None], requires_grad=True)
        (g,) = torch.autograd.grad(loss_W_torch(D, Wt, "correlation", head_of(head, D, "W", "correlation")).sum(), Wt)
    assert _rel(g[0].numpy(), want) <= tol("grad_rtol")
    # the engine's reported loss is the square loss
    assert abs(one.loss[0] - _square_loss(ds, one.W[0], V, Yt)) <= 1e-12 * _square_loss(ds, one.W[0], V, Yt)


@pytest.mark.parametrize(
    "algo, lr, steps, extra",
    [
        ("gd", 0.5, 60, {}),
        ("ngd", 0.3, 60, {}),
        ("gd", 0.5, 30, {"minibatch": 3}),
        ("ngd", 0.3, 30, {"schedule": "rsqrt"}),
    ],
)
def test_engine_run_equals_the_50_digit_replay(algo, lr, steps, extra):
    ds, V, Yt = _gmc(seed=1, n=5, T=4, d=3)
    head = (REG, (V, Yt))
    r = gd.run(ds, param="W", algo=algo, lr=lr, steps=steps, loss="correlation", head=head, record_every=10,
               record_params=True, **extra)  # fmt: skip
    rep = hp.replay(ds, np.zeros((3, 3)), param="W", algo=algo, lr=lr, steps=steps, loss="correlation", head=head,
                    record_every=10, **extra)  # fmt: skip
    assert rep.taken == steps and int(r.steps[0]) == steps
    for j in range(len(rep.recorded)):
        want = rep.array(index=j)
        got = r.trajectory["W"][j, 0]
        assert np.linalg.norm(got - want) <= tol("replay_rtol") * max(np.linalg.norm(want), 1e-300), j
    assert np.linalg.norm(r.W[0] - rep.array()) <= tol("replay_rtol") * np.linalg.norm(rep.array())


def test_KQ_run_equals_the_50_digit_replay():
    ds, V, Yt = _gmc(seed=1, n=5, T=4, d=3)
    head = (REG, (V, Yt))
    rng = np.random.default_rng(7)
    init = {"K": 0.3 * rng.standard_normal((3, 2)), "Q": 0.3 * rng.standard_normal((3, 2))}
    for algo in ("gd", "ngd"):
        r = gd.run(ds, param="KQ", m=2, algo=algo, lr=0.3, steps=25, loss="correlation", head=head, init=init)
        rep = hp.replay(ds, init, param="KQ", algo=algo, lr=0.3, steps=25, loss="correlation", head=head)
        for name, got in (("K", r.K[0]), ("Q", r.Q[0])):
            want = rep.array(name)
            assert np.linalg.norm(got - want) <= tol("replay_rtol") * np.linalg.norm(want), (algo, name)


def test_ngd_direction_far_past_softmax_underflow_is_the_50_digit_direction():
    """90 ngd steps of size 40 drive every row's wrong tokens below e^-745 (float64 s = 0 there, so the plain
    residual m - y and the effective scores underflow to 0): each late step of the float64 run is the 50-digit
    normalised gradient at the float64 iterate (the row log-scale keeps it exact). (The whole trajectory is not
    compared: at this step size the ngd map amplifies rounding by about e^0.27 per step, in both precisions.)"""
    ds, V, Yt = _gmc(seed=2, n=3, T=4, d=3, sigma=0.0)
    head = (REG, (V, Yt))
    lr = 40.0
    r = gd.run(ds, param="W", algo="ngd", lr=lr, steps=90, loss="correlation", head=head, record_every=1,
               record_params=True)  # fmt: skip
    assert r.stop_reason == ["steps"]
    logs = r.log_softmax[0]
    wrong = np.where(np.arange(logs.shape[-1])[None, :] == r.selection[0][:, None], -np.inf, logs)
    assert np.max(wrong) < -745.0  # every wrong token below the smallest float64 at the end
    Wt = r.trajectory["W"][:, 0]
    for k in (60, 75, 89):
        G = hp.grad_regression(ds, Wt[k], V, Yt)
        nG = hp.frob(G)
        assert nG < mpmath.mpf("1e-300")  # the gradient itself is far below float64's normal range
        step = (Wt[k] - Wt[k + 1]) / lr
        assert _rel(step, hp.to_numpy([[x / nG for x in row] for row in G])) <= tol("replay_rtol"), k
        assert abs(np.linalg.norm(Wt[k + 1] - Wt[k]) - lr) <= 1e-12 * lr


def test_stuck_is_measured_against_the_token_that_copies_the_target():
    """``stuck``: saturated on a token other than argmin_t ||v_it - y_i|| (GMC: the match t0, whose value is the
    target), not on the data's linear-head opt."""
    ds, V, Yt = _gmc(seed=2, n=3, T=4, d=3, sigma=0.0)
    t0 = np.argmin(np.sum((V - Yt[:, None, :]) ** 2, -1), -1)
    kw = dict(param="W", loss="correlation", head=(REG, (V, Yt)))
    good = gd.run(ds, algo="ngd", lr=40.0, steps=30, **kw)
    assert np.array_equal(good.selection[0], t0) and not good.stuck.any()
    bad = gd.run(ds, algo="gd", steps=0, init=-good.W[0], **kw)  # saturated away from the match
    saturated = 1.0 - bad.max_softmax[0] < 1e-8
    assert saturated.any() and (bad.selection[0] != t0).any()
    assert np.array_equal(bad.stuck[0], saturated & (bad.selection[0] != t0))


def test_batched_sharded_and_broadcast_runs():
    ds, V, Yt = _gmc(seed=4, n=3, T=4, d=3, batch=3)
    kw = dict(param="W", algo="ngd", lr=0.2, steps=40, loss="correlation", head=(REG, (V, Yt)))
    whole = gd.run(ds, **kw)
    for b in range(3):
        one = gd.run(ds[b], **{**kw, "head": (REG, (V[b], Yt[b]))})
        assert np.linalg.norm(whole.W[b] - one.W[0]) <= tol("batch_rtol") * np.linalg.norm(one.W[0])
    from attsvm.gd.shards import run_sharded
    from attsvm.pool import Pool

    with Pool(1) as pool:
        got = run_sharded(ds, pool, 2, **kw)
    assert np.array_equal(got.W, whole.W)
    # (N,T,d_v) values with a batched data set are broadcast over the batch
    same = gd.run(ds, **{**kw, "head": (REG, (V[0], Yt[0]))})
    stacked = gd.run(ds, **{**kw, "head": (REG, (np.broadcast_to(V[0], V.shape), np.broadcast_to(Yt[0], Yt.shape)))})
    assert np.array_equal(same.W, stacked.W)


def test_bad_input_is_one_line():
    ds, V, Yt = _gmc()
    run = lambda **kw: gd.run(ds, **{"param": "W", "loss": "correlation", "steps": 1, **kw})  # noqa: E731
    bad = [
        dict(head=(REG, (V[:, :-1], Yt))),  # wrong T
        dict(head=(REG, (V, Yt[:, :1]))),  # d_v mismatch
        dict(head=(REG, (V, Yt[:-1]))),  # wrong N
        dict(head=(REG, (np.where(V > 0, np.nan, V), Yt))),
        dict(head=(REG, V)),
        dict(head=(REG, (V, Yt)), loss="logistic"),
        dict(head=(REG, (V, Yt)), param="vp"),
        dict(head=(REG, (V, Yt)), param="twolayer"),
        dict(head=("cubic", 1.0)),
    ]
    for kw in bad:
        with pytest.raises(InputError) as err:
            run(**kw)
        assert "\n" not in str(err.value), kw
    with pytest.raises(InputError, match="the regression head cannot be represented in float64"):
        run(head=(REG, (1e200 * V, Yt)))  # the range check, before any step
    neg = Dataset(ds.X, -np.ones(ds.n), ds.Z, ds.v)
    with pytest.raises(InputError, match="label"):
        gd.run(neg, param="W", loss="correlation", steps=1, head=(REG, (V, Yt)))
    for kw in (dict(param="p"), dict(loss="logistic"), dict(head=("relu", np.eye(3)))):
        with pytest.raises(ValueError):
            hp.replay(ds, np.zeros((3, 3)) if "param" not in kw else np.zeros(3), steps=1,
                      **{"param": "W", "loss": "correlation", "head": (REG, (V, Yt)), **kw})  # fmt: skip
