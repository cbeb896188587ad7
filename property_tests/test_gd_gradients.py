"""Torch closed forms of attsvm.gd against independent computations: autograd of the loss written from its
definition (THEORY §1), central differences, the numpy model; the log-domain direction against the plain
normalised gradient and against a 60-digit mpmath evaluation far past float64 underflow."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attsvm import generate, model, tol
from attsvm.gd import (
    TorchData,
    grad_KQ_torch,
    grad_p_torch,
    grad_vp_torch,
    grad_W_torch,
    loss_p_torch,
    loss_W_torch,
    token_weights,
    token_weights_logdomain,
)
from attsvm.gd.model_torch import log_softmax_t, log_weight_max, logits_W, token_weights_logdomain_pairwise
from attsvm.gd.steps import Problem, forward, gradients

KINDS = ("cross", "self", "sequence", "causal")
HEADS = ("linear", "relu", "quadratic")
seeds = st.integers(0, 2**20)
sizes = st.tuples(st.integers(1, 3), st.integers(2, 4), st.integers(2, 4))


def _data(kind: str, n: int, T: int, d: int, seed: int, B: int = 2):
    if kind == "cross":
        return generate.paper_law(n, T, d, seed=seed, B=B)
    if kind == "self":
        return generate.paper_law(n, T, d, seed=seed, B=B, self_attention=True)
    if kind == "sequence":
        return generate.sequence(n, T, d, K=2, seed=seed, B=B)
    return generate.causal(n, T, d, seed=seed, B=B)


def _head(name: str, d: int, seed: int, B: int):
    if name == "linear":
        return None
    if name == "relu":
        V = np.random.default_rng(seed + 7).standard_normal((B, d, d))
        return ("relu", V / np.linalg.norm(V, axis=(-2, -1), keepdims=True))
    return ("quadratic", 0.3)


def _ref_loss(ds, b: int, loss: str, head, W=None, p=None, v=None):
    """The loss of data set ``b`` from the definition, in torch (independent of attsvm.gd)."""
    f = ds.flat()
    X, Z, Y = (torch.tensor(np.array(a[b])) for a in (f.X, f.Z, f.Y))
    v = torch.tensor(np.array(f.v[b])) if v is None else v
    a = torch.einsum("ntd,de,ne->nt", X, W, Z) if p is None else torch.einsum("ntd,d->nt", X, p)
    if f.mask is not None:
        a = a.masked_fill(~torch.tensor(np.array(f.mask[b])), -torch.inf)
    s = torch.softmax(a, dim=-1)
    m = torch.einsum("nt,ntd->nd", s, X)
    if head is None:
        h = m @ v
    elif head[0] == "relu":
        h = torch.relu(m @ torch.tensor(head[1][b])).sum(-1)
    else:
        h = m @ v - head[1] * (m * m).sum(-1)
    u = Y * h
    ell = {"logistic": lambda u: torch.log1p(torch.exp(-u)), "exponential": lambda u: torch.exp(-u)}
    return ell.get(loss, lambda u: -u)(u).mean()


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=tol("grad_rtol") * 1e3, atol=tol("grad_atol") * max(1.0, np.abs(b).max()))


@given(st.sampled_from(KINDS), sizes, seeds, st.sampled_from(model.LOSSES), st.sampled_from(HEADS), st.floats(0.1, 3))
def test_grad_W_equals_autograd(kind, shape, seed, loss, head_name, scale):
    n, T, d = shape
    ds = _data(kind, n, T, d, seed)
    head = _head(head_name, d, seed, 2)
    W = scale * np.random.default_rng(seed).standard_normal((2, d, d))
    D = TorchData.of(ds)
    G = grad_W_torch(D, torch.tensor(W), loss, head).numpy()
    Lb = loss_W_torch(D, torch.tensor(W), loss, head).numpy()
    for b in range(2):
        Wt = torch.tensor(W[b], requires_grad=True)
        L = _ref_loss(ds, b, loss, head, W=Wt)
        L.backward()
        _close(G[b], Wt.grad.numpy())
        _close(Lb[b], L.item())


@given(st.sampled_from(("cross", "causal")), sizes, seeds, st.sampled_from(HEADS), st.integers(1, 4))
def test_grad_KQ_equals_autograd(kind, shape, seed, head_name, m):
    n, T, d = shape
    ds = _data(kind, n, T, d, seed)
    head = _head(head_name, d, seed, 2)
    r = np.random.default_rng(seed)
    K, Q = r.standard_normal((2, d, m)), r.standard_normal((2, d, m))
    gK, gQ = grad_KQ_torch(TorchData.of(ds), torch.tensor(K), torch.tensor(Q), "logistic", head)
    for b in range(2):
        Kt = torch.tensor(K[b], requires_grad=True)
        Qt = torch.tensor(Q[b], requires_grad=True)
        _ref_loss(ds, b, "logistic", head, W=Kt @ Qt.T).backward()
        _close(gK[b].numpy(), Kt.grad.numpy())
        _close(gQ[b].numpy(), Qt.grad.numpy())


@given(st.sampled_from(KINDS), sizes, seeds, st.sampled_from(model.LOSSES), st.sampled_from(HEADS))
def test_grad_p_and_vp_equal_autograd(kind, shape, seed, loss, head_name):
    n, T, d = shape
    ds = _data(kind, n, T, d, seed)
    head = _head(head_name, d, seed, 2)
    r = np.random.default_rng(seed)
    p, v = 2 * r.standard_normal((2, d)), r.standard_normal((2, d))
    D = TorchData.of(ds)
    gp = grad_p_torch(D, torch.tensor(p), None, loss, head).numpy()
    Lp = loss_p_torch(D, torch.tensor(p), None, loss, head).numpy()
    gv2, gp2 = grad_vp_torch(D, torch.tensor(v), torch.tensor(p), loss)
    for b in range(2):
        pt = torch.tensor(p[b], requires_grad=True)
        L = _ref_loss(ds, b, loss, head, p=pt)
        L.backward()
        _close(gp[b], pt.grad.numpy())
        _close(Lp[b], L.item())
        pt = torch.tensor(p[b], requires_grad=True)
        vt = torch.tensor(v[b], requires_grad=True)
        _ref_loss(ds, b, loss, None, p=pt, v=vt).backward()
        _close(gv2[b].numpy(), vt.grad.numpy())
        _close(gp2[b].numpy(), pt.grad.numpy())


@given(st.sampled_from(KINDS), sizes, seeds)
def test_torch_closed_forms_equal_numpy_model(kind, shape, seed):
    n, T, d = shape
    ds = _data(kind, n, T, d, seed)
    r = np.random.default_rng(seed)
    W, K, Q = (r.standard_normal((2, d, d)) for _ in range(3))
    p, v = r.standard_normal((2, d)), r.standard_normal((2, d))
    D = TorchData.of(ds)
    _close(grad_W_torch(D, torch.tensor(W)).numpy(), model.grad_W(ds, W))
    _close(loss_W_torch(D, torch.tensor(W)).numpy(), model.loss(ds, W))
    for got, ref in zip(grad_KQ_torch(D, torch.tensor(K), torch.tensor(Q)), model.grad_KQ(ds, K, Q)):
        _close(got.numpy(), ref)
    _close(grad_p_torch(D, torch.tensor(p)).numpy(), model.grad_p(ds, p))
    for got, ref in zip(grad_vp_torch(D, torch.tensor(v), torch.tensor(p)), model.grad_vp(ds, v, p)):
        _close(got.numpy(), ref)


# joint (v,p) training has the linear head only (by definition)
@pytest.mark.parametrize("param,head_name", [(p, h) for p in ("W", "KQ", "p") for h in HEADS] + [("vp", "linear")])
def test_closed_forms_equal_central_differences(param, head_name):
    n, T, d, seed = 3, 4, 3, 11
    ds = _data("cross", n, T, d, seed, B=1)
    head = _head(head_name, d, seed, 1)
    r = np.random.default_rng(seed)
    th = {"W": {"W": r.standard_normal((1, d, d))}, "KQ": {"K": r.standard_normal((1, d, 2)),
          "Q": r.standard_normal((1, d, 2))}, "p": {"p": r.standard_normal((1, d))},
          "vp": {"v": r.standard_normal((1, d)), "p": r.standard_normal((1, d))}}[param]  # fmt: skip
    P = Problem(TorchData.of(ds), param, "logistic", head if head is None else (head[0], _t(head[1])))

    def L(th_):
        if param in ("W", "KQ"):
            W = th_["W"] if param == "W" else th_["K"][0] @ th_["Q"][0].T
            W = W[0] if W.ndim == 3 else W
            return _ref_loss(ds, 0, "logistic", head, W=torch.tensor(W)).item()
        return _ref_loss(ds, 0, "logistic", head, p=torch.tensor(th_["p"][0]), v=_opt_t(th_.get("v"))).item()

    tht = {k: torch.tensor(a) for k, a in th.items()}
    grads, scale = gradients(P, tht, forward(P, tht), log_domain=False)
    h = 1e-6
    for k, a in th.items():
        fd = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            e = np.zeros_like(a)
            e[idx] = h
            fd[idx] = (L({**th, k: a + e}) - L({**th, k: a - e})) / (2 * h)
        g = grads[k].numpy()
        assert np.max(np.abs(fd - g)) <= tol("fd_rtol") * max(1.0, np.max(np.abs(g)))


def _t(a):
    return torch.tensor(np.asarray(a))


def _opt_t(a):
    return None if a is None else torch.tensor(a[0])


@given(st.sampled_from(("cross", "causal", "equal")), sizes, seeds, st.sampled_from(model.LOSSES), st.floats(0.1, 30))
def test_logdomain_direction_equals_plain_gradient(kind, shape, seed, loss, scale):
    n, T, d = shape
    ds = generate.equal_scores(n, T, d, seed=seed, B=2) if kind == "equal" else _data(kind, n, T, d, seed)
    W = scale * np.random.default_rng(seed).standard_normal((2, d, d))
    D = TorchData.of(ds)
    logs = log_softmax_t(logits_W(D.X, torch.tensor(W), D.Z), D.mask)
    u = (torch.exp(logs) * D.gamma).sum(-1)
    w_plain = token_weights(logs, D.gamma, u, loss)
    w_log, M = token_weights_logdomain(logs, D.gamma, u, loss)
    assert torch.all(torch.isfinite(M))  # scores of every row differ (no exact ties in these families)
    np.testing.assert_allclose(
        (torch.exp(M)[:, None, None] * w_log).numpy(), w_plain.numpy(), rtol=1e-9, atol=1e-12 * w_plain.abs().max()
    )
    # the normalised W-gradient directions agree
    G = grad_W_torch(D, torch.tensor(W), loss).numpy()
    U = torch.matmul(w_log.unsqueeze(-2), D.X).squeeze(-2)
    Gl = torch.matmul(U.transpose(-1, -2), D.Z).numpy()
    for b in range(2):
        np.testing.assert_allclose(Gl[b] / np.linalg.norm(Gl[b]), G[b] / np.linalg.norm(G[b]), atol=1e-9)


@given(st.sampled_from(("cross", "equal")), sizes, seeds, st.floats(0.1, 3000))
def test_log_weight_max_is_the_pairwise_max(kind, shape, seed, scale):
    n, T, d = shape
    ds = generate.equal_scores(n, T, d, seed=seed, B=1) if kind == "equal" else _data(kind, n, T, d, seed, B=1)
    D = TorchData.of(ds)
    W = scale * np.random.default_rng(seed).standard_normal((1, d, d))
    logs = log_softmax_t(logits_W(D.X, torch.tensor(W), D.Z), D.mask).numpy()[0]
    g = D.gamma.numpy()[0]
    lc = -np.logaddexp(0.0, np.sum(np.exp(logs) * g, axis=-1))
    pairs = [(i, t, s) for i in range(logs.shape[0]) for t in range(T) for s in range(T) if g[i, t] != g[i, s]]
    brute = max(lc[i] + logs[i, t] + logs[i, s] for i, t, s in pairs)
    got = log_weight_max(torch.tensor(logs)[None], D.gamma, torch.tensor(lc)[None]).item()
    assert got == pytest.approx(brute, rel=1e-12, abs=1e-12)


def _mp_direction(X, Y, Z, v, W):
    """The gradient direction at W with 60-digit arithmetic (mpmath), from the definition."""
    mpmath.mp.dps = 60
    n, T, d = X.shape
    G = mpmath.zeros(d, d)
    for i in range(n):
        a = [mpmath.fsum(mpmath.mpf(X[i, t, k]) * mpmath.mpf(W[k, l]) * mpmath.mpf(Z[i, l])
                         for k in range(d) for l in range(d)) for t in range(T)]  # fmt: skip
        mx = max(a)
        e = [mpmath.exp(x - mx) for x in a]
        s = [x / mpmath.fsum(e) for x in e]
        g = [Y[i] * mpmath.fsum(mpmath.mpf(v[k]) * mpmath.mpf(X[i, t, k]) for k in range(d)) for t in range(T)]
        u = mpmath.fsum(s[t] * g[t] for t in range(T))
        c = -1 / (1 + mpmath.exp(u))
        for t in range(T):
            r = s[t] * mpmath.fsum(s[q] * (g[t] - g[q]) for q in range(T))
            for k in range(d):
                for l in range(d):
                    G[k, l] += c * r * mpmath.mpf(X[i, t, k]) * mpmath.mpf(Z[i, l]) / n
    nrm = mpmath.sqrt(mpmath.fsum(G[k, l] ** 2 for k in range(d) for l in range(d)))
    return np.array([[float(G[k, l] / nrm) for l in range(d)] for k in range(d)]), float(mpmath.log(nrm))


@pytest.mark.parametrize("R", [40.0, 400.0, 4000.0])
def test_logdomain_direction_far_past_underflow_matches_mpmath(R):
    ds = generate.paper_law(2, 3, 2, seed=5)
    W = R * np.array([[0.6, -0.8], [0.3, 0.9]])
    D = TorchData.of(ds)
    P = Problem(D, "W")
    th = {"W": torch.tensor(W)[None]}
    fw = forward(P, th)
    (Gl,), (M,) = gradients(P, th, fw, log_domain=True)[0].values(), gradients(P, th, fw, True)[1].values()
    Gp = gradients(P, th, fw, log_domain=False)[0]["W"]
    ref, log_norm = _mp_direction(np.asarray(ds.X), np.asarray(ds.Y), np.asarray(ds.Z), np.asarray(ds.v), W)
    got = Gl[0].numpy() / np.linalg.norm(Gl[0].numpy())
    np.testing.assert_allclose(got, ref, atol=1e-10)
    assert np.isfinite(M.item()) and abs(M.item() + np.log(np.linalg.norm(Gl[0].numpy())) - log_norm) < 1e-8 * max(
        1.0, abs(log_norm)
    )
    if R >= 4000:
        assert np.all(Gp.numpy() == 0.0)  # float64 underflows the plain gradient to exactly zero here


@given(st.sampled_from(("cross", "causal", "equal")), sizes, seeds, st.sampled_from(model.LOSSES), st.floats(0.1, 5000))
def test_logdomain_weights_equal_the_pairwise_reference(kind, shape, seed, loss, scale):
    # every regime: moderate W, saturated far past underflow, bit-exact equal scores (Assumption B)
    n, T, d = shape
    ds = generate.equal_scores(n, T, max(d, 2), seed=seed, B=2) if kind == "equal" else _data(kind, n, T, d, seed)
    d = ds.d
    W = scale * np.random.default_rng(seed).standard_normal((2, d, d))
    D = TorchData.of(ds)
    logs = log_softmax_t(logits_W(D.X, torch.tensor(W), D.Z), D.mask)
    u = (torch.exp(logs) * D.gamma).sum(-1)
    w, M = token_weights_logdomain(logs, D.gamma, u, loss)
    wr, Mr = token_weights_logdomain_pairwise(logs, D.gamma, u, loss)
    assert torch.equal(M, Mr) and torch.all(torch.isfinite(w))
    np.testing.assert_allclose(w.numpy(), wr.numpy(), rtol=1e-9, atol=1e-13)
