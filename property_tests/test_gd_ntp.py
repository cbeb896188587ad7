"""GD on next-token data in the batched engine (issue 14): the log-loss and the squared-loss head against autograd
losses written here from the definitions, trajectories against a per-run loop, the 50-digit replay, the smoothness
bound, bad input, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from attsvm import gd
from attsvm import highprec as hp
from attsvm.errors import InputError
from attsvm.gd.model_torch import TorchData, ntp_square_head
from attsvm.gd.steps import Problem, forward, gradients
from attsvm.ntp.data import NTPData
from attsvm.ntp.generate import ntp
from attsvm.ntp.loss import smoothness_constant


def _logloss(ds: NTPData, W: torch.Tensor) -> torch.Tensor:
    """-log(attention mass on the label), averaged: written from the definition with torch.logsumexp."""
    X, Z = torch.tensor(ds.X), torch.tensor(ds.Z)
    lab = torch.tensor(ds.label_mask)
    vis = torch.ones_like(lab) if ds.visible is None else torch.tensor(ds.visible)
    a = torch.einsum("ntd,de,ne->nt", X, W, Z)
    return (
        torch.logsumexp(a.masked_fill(~vis, -np.inf), -1) - torch.logsumexp(a.masked_fill(~lab, -np.inf), -1)
    ).mean()


def _squared(ds: NTPData, W: torch.Tensor) -> torch.Tensor:
    """(1 - p_y)^2 with p = softmax(E X^T s): the authors' squared loss, from the definition."""
    X, Z, E = torch.tensor(ds.X), torch.tensor(ds.Z), torch.tensor(ds.E)
    s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), -1)
    p = torch.softmax(torch.einsum("nt,ntd->nd", s, X) @ E.T, -1)
    return ((1 - p[torch.arange(ds.n), torch.tensor(ds.labels)]) ** 2).mean()


def _autograd(fn, ds, W):
    Wr = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    fn(ds, Wr).backward()
    return Wr.grad.numpy()


def _engine_grad(ds, W, loss="nll", head=None, log_domain=False):
    D = TorchData.of(ds)
    P = Problem(D, "W", loss, head)
    th = {"W": torch.tensor(W[None])}
    G, L = gradients(P, th, forward(P, th), log_domain=log_domain)
    return (G["W"][0] * torch.exp(L["W"][0])).numpy()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("query_visible", [True, False])
def test_log_loss_gradient_matches_autograd(seed, query_visible):
    ds = ntp(5, 4, 6, 7, seed=seed, query_visible=query_visible, graph="cyclic")
    W = np.random.default_rng(seed).normal(size=(7, 7))
    ref = _autograd(_logloss, ds, W)
    for log_domain in (False, True):
        G = _engine_grad(ds, W, log_domain=log_domain)
        assert np.linalg.norm(G - ref) <= 1e-12 * np.linalg.norm(ref)


def test_squared_head_gradient_matches_autograd():
    ds = ntp(6, 4, 6, 8, seed=3)
    W = np.random.default_rng(0).normal(size=(8, 8))
    head = ntp_square_head(ds, "cpu", torch.float64)
    ref = _autograd(_squared, ds, W)
    for log_domain in (False, True):
        G = _engine_grad(ds, W, "correlation", head, log_domain)
        assert np.linalg.norm(G - ref) <= 1e-12 * np.linalg.norm(ref)
    r = gd.run(ds, param="W", lr=0.1, steps=3, head="ntp-square")
    assert r.loss[0] == pytest.approx(float(_squared(ds, torch.tensor(r.W[0]))), rel=1e-12)


def test_log_domain_direction_far_past_underflow():
    """At a scale where every off-label probability underflows the plain gradient is exactly 0, the log-domain
    direction is still the direction of the 50-digit gradient."""
    ds = ntp(4, 3, 4, 5, seed=1, graph="acyclic")
    r = gd.run(ds, param="W", algo="ngd", lr=10.0, steps=1000)
    W = r.W[0]
    D = TorchData.of(ds)
    P = Problem(D, "W", "nll")
    th = {"W": torch.tensor(W[None])}
    G = gradients(P, th, forward(P, th), log_domain=True)[0]["W"][0].numpy()  # the direction, its scale apart
    Gp = _engine_grad(ds, W, log_domain=False)
    Gm = hp.grad_W(ds, W, "nll")
    nrm = hp.frob(Gm)
    assert np.all(Gp == 0) and nrm > 0 and float(nrm) == 0  # float64 underflow of a nonzero true gradient
    ref = np.array([[float(x / nrm) for x in row] for row in Gm])
    assert np.linalg.norm(G / np.linalg.norm(G) - ref) <= 1e-12


def test_batch_equals_runs_one_at_a_time_and_a_per_run_loop():
    B = ntp(6, 4, 6, 8, seed=0, B=3)
    r = gd.run(B, param="W", algo="ngd", lr=0.1, steps=60, init="linear", seed=2)
    from attsvm.gd.init import initial_params

    W0 = initial_params("W", "linear", 3, 8, 8, 2)["W"]
    for b in range(3):
        one = gd.run(B[b], param="W", algo="ngd", lr=0.1, steps=60, init=W0[b])
        assert np.array_equal(one.W[0], r.W[b])
        W = torch.tensor(W0[b])
        for _ in range(60):  # normalised GD written here
            g = torch.tensor(_autograd(_logloss, B[b], W.numpy()))
            W = W - 0.1 * g / torch.linalg.norm(g)
        assert np.linalg.norm(W.numpy() - r.W[b]) <= 1e-10 * np.linalg.norm(r.W[b])


def test_kq_gradients_match_autograd():
    ds = ntp(5, 4, 6, 6, seed=4)
    rng = np.random.default_rng(1)
    K, Q = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    Kr = torch.tensor(K, requires_grad=True)
    Qr = torch.tensor(Q, requires_grad=True)
    _logloss(ds, Kr @ Qr.T).backward()
    D = TorchData.of(ds)
    P = Problem(D, "KQ", "nll")
    th = {"K": torch.tensor(K[None]), "Q": torch.tensor(Q[None])}
    G, L = gradients(P, th, forward(P, th), log_domain=True)
    for k, ref in (("K", Kr.grad), ("Q", Qr.grad)):
        got = (G[k][0] * torch.exp(L[k][0])).numpy()
        assert np.linalg.norm(got - ref.numpy()) <= 1e-12 * np.linalg.norm(ref.numpy())


def test_replay_at_50_digits_agrees_with_the_engine():
    ds = ntp(6, 4, 6, 8, seed=2, graph="cyclic")
    W0 = np.random.default_rng(0).normal(size=(8, 8)) * 0.1
    for algo, lr in (("ngd", 0.1), ("gd", 0.5)):
        rep = hp.replay(ds, W0, param="W", algo=algo, lr=lr, steps=40, loss="nll")
        r = gd.run(ds, param="W", algo=algo, lr=lr, steps=40, init=W0)
        assert np.linalg.norm(rep.array("W") - r.W[0]) <= 1e-12 * np.linalg.norm(r.W[0])
        assert float(hp.loss(ds, rep.final["W"], "nll")) == pytest.approx(float(r.loss[0]), rel=1e-10)


def test_smoothness_bound_holds_and_lr_one_over_L():
    ds = ntp(5, 4, 6, 6, seed=5, graph="cyclic")
    L = float(smoothness_constant(ds.X, ds.Z, ds.visible))
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(30):  # directional second differences of the autograd gradient never exceed L
        W, U = rng.normal(size=(6, 6)) * 3, rng.normal(size=(6, 6))
        U /= np.linalg.norm(U)
        h = 1e-4
        g1, g2 = _autograd(_logloss, ds, W + h * U), _autograd(_logloss, ds, W - h * U)
        worst = max(worst, abs(np.sum((g1 - g2) * U)) / (2 * h))
    assert 0 < worst <= L
    r = gd.run(ds, param="W", algo="gd", lr="1/L", steps=2)
    assert r.lr[0] == pytest.approx(1.0 / L, rel=1e-15)


def test_bad_input_is_an_input_error():
    from attsvm.generate import paper_law

    ds = ntp(4, 3, 4, 5, seed=0)
    for kw in (
        dict(loss="logistic"),
        dict(param="p"),
        dict(head=("relu", np.eye(5))),
        dict(head="ntp-square", loss="nll"),
    ):
        with pytest.raises(InputError):
            gd.run(ds, steps=1, **{"param": "W", **kw})
    with pytest.raises(InputError, match="next-token"):
        gd.run(paper_law(2, 3, 2, seed=0), steps=1, loss="nll")
    with pytest.raises(InputError, match="next-token"):
        gd.run(paper_law(2, 3, 2, seed=0), steps=1, head="ntp-square")


def test_cli_gd_on_a_next_token_file(tmp_path):
    path = ntp(6, 4, 6, 8, seed=1).save(tmp_path / "n.npz")
    out = subprocess.run(
        [sys.executable, "-m", "attsvm", "gd", str(path), "--steps", "50", "--lr", "0.1", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)["runs"][0]
    r = gd.run(ntp(6, 4, 6, 8, seed=1), param="W", steps=50, lr=0.1)
    assert run["loss"] == pytest.approx(float(r.loss[0]), rel=1e-12)
    bad = subprocess.run(
        [sys.executable, "-m", "attsvm", "gd", str(path), "--loss", "logistic", "--steps", "5"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr
