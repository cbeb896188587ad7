"""The two-layer attention model (issue 30; :mod:`attsvm.twolayer`, param ``twolayer`` of the GD engine).

* the numpy closed-form gradients are the central differences of the numpy loss (every option: residual, causal,
  causal-kind data with a mask, a batch);
* torch autograd through the engine's forward pass, the engine's own gradient (one plain ``gd`` step, and the
  log-domain ``ngd`` direction per factor and joint) and the 50-digit gradient written from the definition all
  equal the numpy closed form; the 50-digit gradient is the central difference of the 50-digit loss;
* a frozen factor never moves (bit for bit), the free one moves by exactly ``lr`` per ``ngd`` step;
* float64 runs agree with the 50-digit replay (``replay_rtol``), also far past float64 softmax underflow;
* with W1 frozen, the run on W2 is the one-layer engine run on the top-layer data set (the reduction of the spec);
* selections, hard outputs and bad input (one-line InputError, CLI exit 2).
"""

from __future__ import annotations

import subprocess
import sys

import mpmath
import numpy as np
import pytest

from attsvm import gd, generate, model
from attsvm import highprec as hp
from attsvm import twolayer as tl
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.tolerances import tol

OPTIONS = [(False, False), (True, False), (False, True), (True, True)]  # (residual, causal)


def _cross(seed: int = 0, n: int = 3, T: int = 4, d: int = 3, batch: int | None = None) -> Dataset:
    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    X = rng.standard_normal((*lead, n, T, d))
    Y = np.where(rng.standard_normal((*lead, n)) > 0, 1.0, -1.0)
    return Dataset(X, Y, rng.standard_normal((*lead, n, d)), rng.standard_normal((*lead, d)))


def _causal_kind(seed: int = 1, n: int = 2, T: int = 4, d: int = 3) -> Dataset:
    """Causal-kind data: flat rows (i, k) see the tokens tau <= k (a visibility mask)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, T, d))
    Y = np.where(rng.standard_normal((n, T)) > 0, 1.0, -1.0)
    return Dataset(X, Y, None, rng.standard_normal(d), kind="causal")


def _weights(d: int, seed: int, scale: float = 0.5, lead: tuple[int, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal((*lead, d, d)), scale * rng.standard_normal((*lead, d, d))


def _fd(f, W: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.zeros(W.shape)
    for idx in np.ndindex(W.shape):
        E = np.zeros(W.shape)
        E[idx] = h
        out[idx] = (f(W + E) - f(W - E)) / (2 * h)
    return out


def _close(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    scale = np.linalg.norm(want)
    assert np.linalg.norm(got - want) <= rtol * scale, (np.linalg.norm(got - want) / scale, rtol)


# ------------------------------------------------------------------------------------------- closed form
@pytest.mark.parametrize("residual,causal", OPTIONS)
@pytest.mark.parametrize("kind", ["cross", "causal-kind"])
def test_numpy_gradient_is_the_central_difference_of_the_loss(kind, residual, causal):
    ds = _cross() if kind == "cross" else _causal_kind()
    W1, W2 = _weights(ds.d, 7)
    for loss in ("logistic", "exponential"):
        G1, G2 = tl.gradients(ds, W1, W2, loss, residual, causal)
        F1 = _fd(lambda A, lo=loss: float(tl.loss(ds, A, W2, lo, residual, causal)), W1)
        F2 = _fd(lambda A, lo=loss: float(tl.loss(ds, W1, A, lo, residual, causal)), W2)
        for G, F in ((G1, F1), (G2, F2)):
            assert np.max(np.abs(G - F)) <= tol("fd_rtol") * np.max(np.abs(F)) + tol("fd_atol")


def test_numpy_model_broadcasts_over_a_batch():
    ds = _cross(batch=2)
    W1, W2 = _weights(ds.d, 3, lead=(2,))
    G1, G2 = tl.gradients(ds, W1, W2, residual=True)
    for b in range(2):
        g1, g2 = tl.gradients(ds[b], W1[b], W2[b], residual=True)
        np.testing.assert_allclose(G1[b], g1, rtol=tol("batch_rtol"), atol=0)
        np.testing.assert_allclose(G2[b], g2, rtol=tol("batch_rtol"), atol=0)


@pytest.mark.parametrize("residual,causal", OPTIONS)
def test_torch_autograd_of_the_engine_forward_is_the_closed_form(residual, causal):
    import torch

    from attsvm.gd.model_torch import TorchData, loss_value_t
    from attsvm.gd.steps import Problem, forward

    ds = _causal_kind() if causal else _cross()
    W1, W2 = _weights(ds.d, 11)
    P = Problem(TorchData.of(ds), "twolayer", "logistic", None, None, residual, causal)
    th = {k: torch.tensor(a[None], requires_grad=True) for k, a in (("W1", W1), ("W2", W2))}
    loss = loss_value_t(forward(P, th)[1], "logistic").mean()
    g1, g2 = torch.autograd.grad(loss, [th["W1"], th["W2"]])
    G1, G2 = tl.gradients(ds, W1, W2, "logistic", residual, causal)
    _close(g1[0].numpy(), G1, tol("grad_rtol"))
    _close(g2[0].numpy(), G2, tol("grad_rtol"))


@pytest.mark.parametrize("residual,causal", OPTIONS)
def test_engine_gradient_and_ngd_directions_are_the_closed_form(residual, causal):
    ds = _cross(batch=2)
    W1, W2 = _weights(ds.d, 5, lead=(2,))
    init = {"W1": W1, "W2": W2}
    G1, G2 = tl.gradients(ds, W1, W2, "logistic", residual, causal)
    kw = dict(param="twolayer", steps=1, init=init, residual=residual, causal=causal)
    plain = gd.run(ds, algo="gd", lr=1.0, **kw)  # theta_1 = theta_0 - grad (plain float gradient)
    per = gd.run(ds, algo="ngd", lr=1.0, **kw)  # log-domain direction, each factor normalised
    joint = gd.run(ds, algo="ngd", lr=1.0, normalize="joint", **kw)
    for b in range(2):
        n1, n2 = np.linalg.norm(G1[b]), np.linalg.norm(G2[b])
        nj = np.hypot(n1, n2)
        for res, s1, s2 in ((plain, 1.0, 1.0), (per, n1, n2), (joint, nj, nj)):
            _close(W1[b] - res.W1[b], G1[b] / s1, tol("grad_rtol"))
            _close(W2[b] - res.W2[b], G2[b] / s2, tol("grad_rtol"))
        np.testing.assert_array_equal(plain.W[b], plain.W2[b])  # W is the top layer


@pytest.mark.parametrize("residual,causal", [(False, False), (True, True)])
def test_50_digit_gradient_is_the_closed_form_and_the_derivative_of_the_50_digit_loss(residual, causal):
    ds = _causal_kind(n=2, T=3) if causal else _cross(n=2, T=3)
    W1, W2 = _weights(ds.d, 13)
    h1, h2 = hp.grad_twolayer(ds, W1, W2, "logistic", residual, causal)
    G1, G2 = tl.gradients(ds, W1, W2, "logistic", residual, causal)
    _close(hp.to_numpy(h1), G1, tol("grad_rtol"))
    _close(hp.to_numpy(h2), G2, tol("grad_rtol"))
    eps = mpmath.mpf("1e-20")
    with mpmath.workdps(60):
        for which, grad in ((0, h1), (1, h2)):
            for a, b in ((0, 1), (2, 2), (1, 0)):
                moved = []
                for sgn in (1, -1):
                    P = [hp.as_mp(W1), hp.as_mp(W2)]
                    P[which][a][b] += sgn * eps
                    moved.append(hp.loss_twolayer(ds, P[0], P[1], "logistic", residual, causal, dps=60))
                fd = (moved[0] - moved[1]) / (2 * eps)
                assert abs(fd - grad[a][b]) <= mpmath.mpf("1e-30"), (which, a, b)


# ------------------------------------------------------------------------------------------- runs
@pytest.mark.parametrize("freeze", ["W1", "W2"])
@pytest.mark.parametrize("kw", [{"algo": "gd"}, {"algo": "ngd"}, {"algo": "ngd", "normalize": "joint"}])
def test_a_frozen_factor_takes_no_step(freeze, kw):
    ds = _cross(batch=2)
    W1, W2 = _weights(ds.d, 2, lead=(2,))
    init = {"W1": W1, "W2": W2}
    res = gd.run(ds, param="twolayer", lr=0.3, steps=12, init=init, freeze=freeze, record_every=1,
                 record_params=True, **kw)  # fmt: skip
    free = "W2" if freeze == "W1" else "W1"
    np.testing.assert_array_equal(res.trajectory[freeze], np.broadcast_to(init[freeze], res.trajectory[freeze].shape))
    np.testing.assert_array_equal(getattr(res, freeze), init[freeze])
    steps = np.linalg.norm(np.diff(res.trajectory[free], axis=0), axis=(-2, -1))  # (12, B)
    assert np.all(steps > 0)
    if kw["algo"] == "ngd":  # the free factor alone is normalised, per factor and joint alike
        np.testing.assert_allclose(steps, 0.3, rtol=tol("rounding") * 100)
    assert res.settings.freeze == freeze


REPLAYED = [
    {"algo": "gd"},
    {"algo": "ngd"},
    {"algo": "ngd", "normalize": "joint", "residual": True},
    {"algo": "ngd", "causal": True, "freeze": "W1"},
    {"algo": "gd", "freeze": "W2", "residual": True, "causal": True},
    {"algo": "ngd", "normalize": "joint", "causal": True, "data": "causal-kind"},
]


@pytest.mark.parametrize("kw", REPLAYED)
def test_float64_run_agrees_with_the_50_digit_replay(kw):
    kw = dict(kw)
    ds = _causal_kind(n=2, T=3) if kw.pop("data", None) else generate.paper_law(2, 3, 3, seed=1)
    W1, W2 = _weights(ds.d, 4, scale=0.3)
    init = {"W1": W1, "W2": W2}
    res = gd.run(ds, param="twolayer", lr=0.2, steps=12, init=init, record_every=4, record_params=True, **kw)
    rep = hp.replay(ds, init, param="twolayer", lr=0.2, steps=12, record_every=4, settings=res.settings)
    assert rep.steps == res.trajectory["step"].tolist()
    for j, th in enumerate(rep.recorded):
        for name in ("W1", "W2"):
            _close(res.trajectory[name][j, 0], hp.to_numpy(th[name]), tol("replay_rtol"))


def test_ngd_runs_past_float64_softmax_underflow_and_agrees_with_the_replay():
    """Large normalised steps drive both softmaxes far below the float64 range (log s < log 2^-1074 ~ -744, where
    exp underflows to 0); the log-domain directions keep every step exact, as the 50-digit replay shows, while the
    plain float64 softmax has underflowed."""
    ds = _cross(seed=3, n=2, T=3)
    W1, W2 = _weights(ds.d, 4, scale=0.3)
    init = {"W1": W1, "W2": W2}
    lr, steps = 40.0, 60
    res = gd.run(ds, param="twolayer", algo="ngd", lr=lr, steps=steps, init=init, normalize="joint")
    assert res.stop_reason == ["steps"]
    fw = tl.forward(ds, res.W1[0], res.W2[0])
    finite = lambda a: a[np.isfinite(a)]  # noqa: E731
    assert finite(res.log_softmax[0]).min() < -745 and finite(fw.log_s1).min() < -745  # past underflow
    rep = hp.replay(ds, init, param="twolayer", lr=lr, steps=steps, settings=res.settings)
    for name in ("W1", "W2"):
        _close(getattr(res, name)[0], hp.to_numpy(rep.final[name]), tol("replay_rtol"))


def test_frozen_W1_is_the_one_layer_run_on_the_top_layer_data():
    """With W1 frozen, layer 2 is the one-layer model on the tokens h (spec): the two-layer engine run on W2 equals
    the one-layer engine run (param W) on :func:`top_layer_dataset`, and the layer-2 outputs equal
    :func:`attsvm.model.outputs` there."""
    ds = _cross(seed=4, batch=2)
    W1, W2 = _weights(ds.d, 9, lead=(2,))
    fw = tl.forward(ds, W1, W2, residual=True)
    top = tl.top_layer_dataset(ds, fw.h)
    _, _, u = model.outputs(top, W2)
    np.testing.assert_allclose(fw.u, u, rtol=tol("rounding"), atol=tol("rounding") * np.abs(u).max())
    for algo in ("gd", "ngd"):
        two = gd.run(ds, param="twolayer", algo=algo, lr=0.5, steps=30, init={"W1": W1, "W2": W2},
                     freeze="W1", residual=True)  # fmt: skip
        one = gd.run(top, param="W", algo=algo, lr=0.5, steps=30, init=W2, kernel="torch")
        _close(two.W2, one.W, tol("batch_rtol"))
        np.testing.assert_allclose(two.loss, one.loss, rtol=tol("batch_rtol"))


def test_top_layer_data_of_masked_rows_is_layer_2():
    """Causal-kind data (flat rows with a visibility mask): the top-layer data set carries the rows' visibility, so
    its one-layer outputs at W2 (:func:`attsvm.model.outputs`) equal the two-layer outputs u, and its invisible
    tokens are masked."""
    ds = _causal_kind(seed=3)
    f = ds.flat()
    W1, W2 = _weights(ds.d, 5)
    fw = tl.forward(ds, W1, W2, residual=True)
    top = tl.top_layer_dataset(ds, fw.h)
    np.testing.assert_array_equal(top.mask, f.mask)
    s, _, u = model.outputs(top, W2)
    np.testing.assert_allclose(fw.u, u, rtol=tol("rounding"), atol=tol("rounding") * np.abs(u).max())
    assert np.all(s[~f.mask] == 0.0)


def test_selections_and_hard_outputs():
    """alpha, beta are the argmaxes of the softmaxes; a large multiple of a W1 that selects makes h the hard outputs
    H^alpha (x_{i alpha_it} + rho x_it), checked against a loop."""
    ds = _cross(seed=6)
    f = ds.flat()
    W1, W2 = _weights(ds.d, 1)
    for rho, residual in ((0.0, False), (1.0, True)):
        fw = tl.forward(ds, 1e4 * W1, W2, residual=residual)
        alpha, beta = tl.selections(fw)
        H = tl.hard_outputs(ds, alpha, residual)
        for i in range(f.X.shape[0]):
            assert beta[i] == np.argmax(fw.a2[i])
            for t in range(f.X.shape[1]):
                scores = [f.X[i, k] @ (1e4 * W1) @ f.X[i, t] for k in range(f.X.shape[1])]
                assert alpha[i, t] == int(np.argmax(scores))
                np.testing.assert_array_equal(H[i, t], f.X[i, alpha[i, t]] + rho * f.X[i, t])
        np.testing.assert_allclose(fw.h, H, atol=1e-6)  # saturated layer 1 (margins >> 1e-4 here)


def test_causal_layer_one_on_causal_kind_data():
    """Causal-kind data (flat row (i, k) sees tau <= k) with a causal layer 1: the positions t > k are invisible in
    layer 2 (attention exactly 0) and every layer-1 row has the keys tau <= min(t, k); all outputs finite."""
    ds = _causal_kind()
    W1, W2 = _weights(ds.d, 3)
    fw = tl.forward(ds, W1, W2, causal=True)
    f = ds.flat()
    s2 = np.exp(fw.log_s2)
    assert np.all(s2[~f.mask] == 0) and np.allclose(s2.sum(-1), 1.0)
    keys = np.isfinite(fw.log_s1)
    T = f.X.shape[1]
    want = np.arange(T)[None, None, :] <= np.minimum(np.arange(T)[None, :, None], f.query[:, None, None])
    np.testing.assert_array_equal(keys, want)
    assert np.all(np.isfinite(fw.h)) and np.all(np.isfinite(fw.u))


# ------------------------------------------------------------------------------------------- bad input
BAD_RUNS = [
    ({"param": "W", "freeze": "W1"}, "freeze applies to param 'twolayer' only"),
    ({"param": "W", "residual": True}, "residual applies to param 'twolayer' only"),
    ({"param": "twolayer", "freeze": "W3"}, "freeze must be None or one of"),
    ({"param": "twolayer", "causal": "yes"}, "causal must be True or False"),
    ({"param": "twolayer", "algo": "adam"}, "available for param"),
    ({"param": "twolayer", "minibatch": 2}, "minibatch is not available for param 'twolayer'"),
    ({"param": "twolayer", "freeze": "W2", "ridge": 0.1}, "freeze and ridge together"),
    ({"param": "twolayer", "init": np.eye(3)}, "must be a dict with keys ['W1', 'W2']"),
    ({"param": "twolayer", "head": ("quadratic", 1.0)}, "no head"),
]


@pytest.mark.parametrize("kw,message", BAD_RUNS)
def test_bad_runs_are_refused_in_one_line(kw, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("[", r"\[")) as exc:
        gd.run(_cross(), steps=1, **kw)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda ds: tl.forward(ds, np.eye(2), np.eye(3)),
        lambda ds: tl.forward(ds, np.full((3, 3), np.nan), np.eye(3)),
        lambda ds: tl.forward(ds, np.eye(3), np.eye(3), residual=1),
        lambda ds: tl.forward(ds.flat(), np.eye(3), np.eye(3)),
        lambda ds: tl.loss(ds, np.eye(3), np.eye(3), loss="hinge"),
        lambda ds: tl.hard_outputs(ds, np.zeros((3, 4))),
        lambda ds: tl.hard_outputs(ds, np.full((3, 4), 4)),
        lambda ds: tl.top_layer_dataset(ds, np.zeros((3, 4, 2))),
    ],
)
def test_bad_model_input_is_an_input_error(call):
    with pytest.raises(InputError) as exc:
        call(_cross())
    assert "\n" not in str(exc.value)


def test_cli_runs_twolayer_and_refuses_bad_options(tmp_path):
    path = tmp_path / "d.npz"
    generate.paper_law(2, 3, 3, seed=1).save(path)
    cmd = [sys.executable, "-m", "attsvm", "gd", str(path), "--steps", "3"]
    ok = subprocess.run([*cmd, "--param", "twolayer", "--freeze", "W1", "--residual", "--causal"],
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "param=twolayer" in ok.stdout and "freeze=W1 residual=True causal=True" in ok.stdout
    bad = subprocess.run([*cmd, "--param", "W", "--residual"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and bad.stderr.count("\n") == 1
