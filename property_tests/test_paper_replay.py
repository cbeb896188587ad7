"""The engine replays the authors' (K,Q) recipe step for step (issue 13, part 1).

The authors' notebook (umich-sota/TF-as-SVM, ``local_converge.ipynb``) trains ``SelfAttn`` with
``torch.optim.SGD`` on the mean logistic loss plus ``eps * (|W_k|^2 + |W_q|^2)`` and divides each factor's
gradient by ``|grad| + eps`` before the step, ``eps = torch.finfo(double).eps``, from PyTorch's default
``nn.Linear`` initialisation. The loop below is written here from that description, with torch autograd on a
few-line loss (no attsvm code), and compared with ``attsvm.gd.run(param="KQ", ridge=..., grad_eps=...)``.
Logits there are $z^\\top W_q^\\top W_k x_t$, so attsvm's $K=W_k^\\top$, $Q=W_q^\\top$.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attsvm import generate
from attsvm.gd import run
from attsvm.gd.init import initial_params

EPS = float(torch.finfo(torch.float64).eps)


def authors_loop(ds, K0, Q0, lr, steps, ridge, eps, joint=False):
    """Straightforward per-run autograd loop: (optionally joint) normalised SGD with a ridge."""
    X = torch.tensor(ds.X)
    Z = torch.tensor(ds.Z)
    Y = torch.tensor(ds.Y)
    v = torch.tensor(ds.v)
    Wk = torch.tensor(K0.T.copy(), requires_grad=True)
    Wq = torch.tensor(Q0.T.copy(), requires_grad=True)
    for _ in range(steps):
        q = Z @ Wq.T  # (n, m): query(z)
        k = X @ Wk.T  # (n, T, m): key(x_t)
        s = torch.softmax(torch.einsum("nm,ntm->nt", q, k), dim=-1)
        out = (s * (X @ v)).sum(-1)
        loss = torch.log1p(torch.exp(-Y * out)).mean() + ridge * (Wk.norm() ** 2 + Wq.norm() ** 2)
        gk, gq = torch.autograd.grad(loss, (Wk, Wq))
        with torch.no_grad():
            if joint:
                nrm = torch.sqrt(gk.norm() ** 2 + gq.norm() ** 2) + eps
                gk, gq = gk / nrm, gq / nrm
            else:
                gk, gq = gk / (gk.norm() + eps), gq / (gq.norm() + eps)
            Wk -= lr * gk
            Wq -= lr * gq
    return Wk.detach().numpy().T, Wq.detach().numpy().T


def _start(d, seed):
    th = initial_params("KQ", "linear", 1, d, d, seed)
    return th["K"][0], th["Q"][0]


@pytest.mark.parametrize(
    ("ridge", "eps", "normalize", "steps"),
    [
        (EPS, EPS, "per-factor", 60),  # the authors' settings (eps matters only once |g| ~ 1e-16)
        (0.02, 0.3, "per-factor", 150),  # large values: the ridge and the normaliser shape every step
        (0.02, 0.3, "joint", 150),
        (0.0, 0.0, "joint", 60),
    ],
)
def test_engine_replays_the_authors_loop(ridge, eps, normalize, steps):
    """Step for step while the loop's float gradient is accurate (60 steps here; without a ridge the softmax
    then saturates and the autograd gradient loses digits: the next test)."""
    ds = generate.paper_law(4, 5, 6, seed=3)
    K0, Q0 = _start(6, seed=7)
    r = run(ds, param="KQ", algo="ngd", lr=0.1, steps=steps, ridge=ridge, grad_eps=eps, normalize=normalize,
            init={"K": K0, "Q": Q0})  # fmt: skip
    K, Q = authors_loop(ds, K0, Q0, 0.1, steps, ridge, eps, joint=(normalize == "joint"))
    for got, want in ((r.K[0], K), (r.Q[0], Q)):
        assert np.linalg.norm(got - want) <= 1e-11 * np.linalg.norm(want)


def test_the_loops_gradient_is_what_loses_accuracy():
    """Where the trajectories part, the authors' autograd gradient has lost ~7 digits to the cancellation of
    THEORY §5 (1 - max s ~ 1e-7), while attsvm's gradient still agrees with the 50-digit one to ~1e-14."""
    from attsvm import highprec as hp
    from attsvm.model import grad_KQ

    ds = generate.paper_law(6, 8, 10, seed=2)
    K0, Q0 = _start(10, seed=7)
    r = run(ds, param="KQ", algo="ngd", lr=0.1, steps=100, init={"K": K0, "Q": Q0})
    K, Q = r.K[0], r.Q[0]
    exact = hp.to_numpy(hp.grad_KQ(ds, K, Q, "logistic")[0])
    X, Z, Y, v = (torch.tensor(a) for a in (ds.X, ds.Z, ds.Y, ds.v))
    Wk = torch.tensor(K.T.copy(), requires_grad=True)
    Wq = torch.tensor(Q.T.copy(), requires_grad=True)
    s = torch.softmax(torch.einsum("nm,ntm->nt", Z @ Wq.T, X @ Wk.T), -1)
    (gk,) = torch.autograd.grad(torch.log1p(torch.exp(-Y * (s * (X @ v)).sum(-1))).mean(), (Wk,))
    rel = lambda g: np.linalg.norm(g - exact) / np.linalg.norm(exact)  # noqa: E731
    assert rel(gk.numpy().T) > 1e-9
    assert rel(grad_KQ(ds, K, Q, "logistic")[0]) < 1e-13


def test_a_planted_difference_is_seen():
    """The comparison above can fail: the engine without the normaliser's eps does not replay the loop with it."""
    ds = generate.paper_law(4, 5, 6, seed=3)
    K0, Q0 = _start(6, seed=7)
    r = run(ds, param="KQ", algo="ngd", lr=0.1, steps=150, ridge=0.02, grad_eps=0.0, init={"K": K0, "Q": Q0})
    K, _ = authors_loop(ds, K0, Q0, 0.1, 150, 0.02, 0.3)
    assert np.linalg.norm(r.K[0] - K) > 1e-3 * np.linalg.norm(K)


def test_grad_eps_is_scale_safe_far_below_eps():
    """Far past float64 underflow of the gradient the authors' step eta |g|/(|g|+eps) is 0, not NaN: the
    engine computes it in the log domain and the iterate freezes exactly where the formula says."""
    ds = generate.paper_law(3, 4, 3, seed=1)
    r0 = run(ds, param="W", algo="ngd", lr=50.0, steps=40, init="random", seed=2)
    W = r0.W[0]
    r = run(ds, param="W", algo="ngd", lr=50.0, steps=5, grad_eps=EPS, init=W)
    assert np.all(np.isfinite(r.W))
    free = run(ds, param="W", algo="ngd", lr=50.0, steps=5, init=W)
    if r0.loss[0] < 1e-300:  # the true gradient is below eps * 1e-280: the eps-normalised step is exactly 0
        assert np.array_equal(r.W[0], W)
        assert not np.array_equal(free.W[0], W)


def test_linear_init_law():
    """PyTorch's nn.Linear default: U(-1/sqrt(d), 1/sqrt(d)) entrywise (variance 1/(3d)), for both factors."""
    d = 8
    th = initial_params("KQ", "linear", 400, d, d, seed=0)
    for a in th.values():
        assert np.abs(a).max() <= 1 / np.sqrt(d)
        assert abs(a.var() - 1 / (3 * d)) < 0.05 / (3 * d)
        assert abs(a.mean()) < 0.01 / np.sqrt(d)
    with torch.no_grad():
        ours = torch.nn.Linear(d, 400 * d, bias=False, dtype=torch.float64).weight.numpy()  # torch's own law
    assert abs(ours.var() - 1 / (3 * d)) < 0.05 / (3 * d) and np.abs(ours).max() <= 1 / np.sqrt(d)


def test_cli_replays_the_authors_loop(tmp_path):
    """``attsvm gd --param KQ --ridge EPS --grad-eps EPS --init K0Q0.npz`` is the authors' loop, end to end."""
    import json
    import subprocess
    import sys

    ds = generate.paper_law(4, 5, 6, seed=3)
    K0, Q0 = _start(6, seed=7)
    data, init = tmp_path / "d.npz", tmp_path / "kq.npz"
    np.savez(data, X=ds.X, Y=ds.Y, Z=ds.Z, v=ds.v)
    np.savez(init, K=K0, Q=Q0)
    argv = [sys.executable, "-m", "attsvm", "gd", str(data), "--param", "KQ", "--steps", "60", "--lr", "0.1"]
    argv += ["--ridge", repr(EPS), "--grad-eps", repr(EPS), "--init", str(init), "--json", "--quiet"]
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    run0 = json.loads(out.stdout)["runs"][0]
    K, Q = authors_loop(ds, K0, Q0, 0.1, 60, EPS, EPS)
    assert np.linalg.norm(np.array(run0["K"]) - K) <= 1e-11 * np.linalg.norm(K)
    assert np.linalg.norm(np.array(run0["Q"]) - Q) <= 1e-11 * np.linalg.norm(Q)
    bad = subprocess.run([*argv[:-2], "--normalize", "sideways", "--quiet"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "error" in bad.stderr
