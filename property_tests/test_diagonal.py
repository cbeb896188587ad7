"""Diagonal (K,Q): the engine's ``param="diag"`` ($W=\\mathrm{diag}(k\\odot q)$) against a straightforward autograd
loop, and the diagonal Att-SVM (:mod:`attsvm.svm.diagonal`, an ℓ1 / ℓ∞ LP of a data view) against an
independent cvxpy + Clarabel solve over the diagonal written from its definition."""

from __future__ import annotations

import json
import subprocess
import sys

import cvxpy as cp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm import generate, strategies
from attsvm import highprec as hp
from attsvm.errors import InputError
from attsvm.gd import run
from attsvm.gd.init import initial_params
from attsvm.svm.constraints import build
from attsvm.svm.diagonal import diagonal_view, solve_diagonal


def autograd_loop(ds, k0, q0, lr, steps, joint):
    X, Z, Y, v = (torch.tensor(a) for a in (ds.X, ds.Z, ds.Y, ds.v))
    k = torch.tensor(k0.copy(), requires_grad=True)
    q = torch.tensor(q0.copy(), requires_grad=True)
    for _ in range(steps):
        s = torch.softmax(torch.einsum("ntd,d,nd->nt", X, k * q, Z), dim=-1)
        loss = torch.log1p(torch.exp(-Y * (s * (X @ v)).sum(-1))).mean()
        gk, gq = torch.autograd.grad(loss, (k, q))
        with torch.no_grad():
            if joint:
                nrm = torch.sqrt(gk.norm() ** 2 + gq.norm() ** 2)
                gk, gq = gk / nrm, gq / nrm
            k -= lr * gk
            q -= lr * gq
    return k.detach().numpy(), q.detach().numpy()


@pytest.mark.parametrize(("algo", "lr", "joint"), [("gd", 0.5, False), ("ngd", 0.1, True)])
def test_diag_engine_matches_autograd(algo, lr, joint):
    ds = generate.paper_law(3, 4, 5, seed=2)
    th = initial_params("diag", "random", 1, 5, 5, seed=4)
    k0, q0 = th["k"][0], th["q"][0]
    kw = {"normalize": "joint"} if joint else {}
    r = run(ds, param="diag", algo=algo, lr=lr, steps=60, init={"k": k0, "q": q0}, **kw)
    k, q = autograd_loop(ds, k0, q0, lr, 60, joint)
    assert np.linalg.norm(r.K[0] - k) <= 1e-11 * np.linalg.norm(k)
    assert np.linalg.norm(r.Q[0] - q) <= 1e-11 * np.linalg.norm(q)
    assert np.array_equal(r.W[0], np.diag(r.K[0] * r.Q[0]))


@pytest.mark.parametrize(("algo", "kw"), [("gd", {}), ("ngd", {}), ("ngd", {"normalize": "joint"})])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_diag_replay_matches_engine(algo, kw, seed):
    """The 50-digit replay of ``param="diag"`` (:func:`attsvm.highprec.grad_diag`, written from the chain rule)
    reproduces the float64 engine iterate for iterate over 50 steps (relative 1e-10)."""
    ds = generate.paper_law(3, 4, 4, seed=seed)
    th = {k: v[0] for k, v in initial_params("diag", "random", 1, 4, 4, seed=seed + 10, init_scale=0.5).items()}
    lr = 2.0 if algo == "gd" else 0.1
    r = run(ds, param="diag", algo=algo, lr=lr, steps=50, init=th, record_every=10, record_params=True, **kw)
    rep = hp.replay(ds, th, param="diag", algo=algo, lr=lr, steps=50, record_every=10, **kw)
    assert rep.taken == 50 and rep.steps == [0, 10, 20, 30, 40, 50]
    for j, rec in enumerate(rep.recorded):
        for name in ("k", "q"):
            want = hp.to_numpy(rec[name])
            got = r.trajectory[name][j, 0]
            assert np.linalg.norm(got - want) <= 1e-10 * np.linalg.norm(want), (j, name)
    w = hp.to_numpy(rep.final["k"]) * hp.to_numpy(rep.final["q"])
    assert np.linalg.norm(np.diagonal(r.W[0]) - w) <= 1e-10 * np.linalg.norm(w)


def test_diag_init_from_a_diagonal_matrix():
    th = initial_params("diag", np.diag([4.0, -9.0, 0.0]), 1, 3, 3)
    assert np.allclose(th["k"][0] * th["q"][0], [4.0, -9.0, 0.0])
    with pytest.raises(InputError, match="diagonal"):
        initial_params("diag", np.ones((3, 3)), 1, 3, 3)


def independent_diag(ds, alpha, norm):
    """min ||w|| s.t. sum_j w_j (x_ia - x_it)_j z_ij >= 1, one constraint per token (cvxpy + Clarabel)."""
    X, Z = np.asarray(ds.X), np.asarray(ds.Z)
    w = cp.Variable(ds.d)
    cons = [
        cp.sum(cp.multiply(w, (X[i, alpha[i]] - X[i, t]) * Z[i])) >= 1
        for i in range(ds.n)
        for t in range(ds.T)
        if t != alpha[i]
    ]
    obj = cp.norm1(w) if norm == "l1" else cp.norm_inf(w)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver=cp.CLARABEL)
    return prob.status, prob.value


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), norm=st.sampled_from(["l1", "linf"]))
def test_diagonal_svm_matches_an_independent_solve(seed, norm):
    ds = strategies.batch("paper", 1, seed=seed, n=3, T=3, d=3)[0]
    alpha = np.asarray(ds.opt)
    sol = solve_diagonal(ds, alpha, norm, certify=True)
    status, value = independent_diag(ds, alpha, norm)
    if sol.status != "optimal":
        assert status in ("infeasible", "infeasible_inaccurate")
        assert sol.certificate.get("verified")  # a verified Farkas vector
        return
    assert status == "optimal"
    assert sol.certificate["verified"] and sol.certificate["kind"] in ("lp-basis", "lp-bracket")
    w = sol.extra["w"]
    got = np.abs(w).sum() if norm == "l1" else np.abs(w).max()
    assert abs(got - value) <= 1e-6 * max(1.0, value)
    assert sol.certificate["lower"] <= value * (1 + 1e-6) and value <= sol.certificate["upper"] * (1 + 1e-6)
    c = build(ds, alpha)
    assert (c.D * c.Zc @ w).min() >= 1 - 1e-9  # w is feasible for the diagonal program itself


def test_diagonal_view_is_refused_for_batches_and_other_norms():
    ds = generate.paper_law(2, 3, 2, seed=0, B=2)
    with pytest.raises(InputError):
        diagonal_view(ds)
    with pytest.raises(InputError, match="norm"):
        solve_diagonal(ds[0], None, "fro")


def test_cli_gd_param_diag(tmp_path):
    ds = generate.paper_law(2, 3, 3, seed=1)
    f = tmp_path / "d.npz"
    np.savez(f, X=ds.X, Y=ds.Y, Z=ds.Z, v=ds.v)
    out = subprocess.run(
        [sys.executable, "-m", "attsvm", "gd", str(f), "--param", "diag", "--steps", "20", "--json", "--quiet"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    W = np.array(json.loads(out.stdout)["runs"][0]["W"])
    assert np.count_nonzero(W - np.diag(np.diagonal(W))) == 0
