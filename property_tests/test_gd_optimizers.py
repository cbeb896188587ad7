r"""The optimizers of THEORY §6 in the one batched engine: normalised steepest descent (``nsd``), Adam, normalised
mirror descent (``nmd``) and the ``rsqrt`` step schedule.

Oracles, all written here and independent of the engine:

* a few-line torch loss (logits $X_iWz_i$, softmax, $u_i=Y_iv^\top X_i^\top s_i$, softplus) differentiated by
  ``torch.autograd``, stepped by numpy directions written out from their definitions, or by
  ``torch.optim.Adam`` itself;
* far past float64 underflow: the numpy log-domain gradient :func:`attsvm.gd.reference.log_gradient` (the
  engine's existing independent oracle) with the same numpy directions;
* the defining property of a steepest direction, $\|\Delta\|=1$ and $\langle G,\Delta\rangle=\|G\|_*$, checked
  with numpy norms (a planted wrong direction fails it);
* the scale relation of the queries $Z\to cZ$ ($\mathcal L_c(W)=\mathcal L(cW)$): every direction is
  scale-free, so $V_k=cW_k$ is the same algorithm on $Z$ with step $c\eta$ (``nsd``, Adam with
  $\epsilon=0$) or $c^{q-1}\eta$ (``nmd``) — at $c=2^{-600}$, where $g^2$ underflows and plain Adam is $0/0$.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attsvm import generate, model, tol
from attsvm.cli import main
from attsvm.data import Dataset
from attsvm.errors import InputError
from attsvm.gd import run
from attsvm.gd.options import fro_bound
from attsvm.gd.ranges import adam_entry_bound
from attsvm.gd.reference import log_gradient
from attsvm.gd.steepest import direction
from attsvm.model import Arrays

DS = generate.paper_law(3, 4, 5, seed=7)
W0 = 0.1 * np.random.default_rng(1).standard_normal((5, 5))


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# ---------------------------------------------------------------------- independent implementations
def _torch_arrays(ds):
    return [torch.tensor(np.asarray(a, dtype=np.float64)) for a in (ds.X, ds.Y, ds.Z, ds.v)]


def _loss(W, X, Y, Z, v, p=None):
    """Logistic loss of cross-attention from its definition (p: prompt attention, logits X p)."""
    a = torch.einsum("ntd,d->nt", X, p) if p is not None else torch.einsum("ntd,de,ne->nt", X, W, Z)
    s = torch.softmax(a, -1)
    u = Y * torch.einsum("nt,ntd,d->n", s, X, v)
    return torch.nn.functional.softplus(-u).mean()


def _autograd(W, arrs):
    Wt = torch.tensor(W, requires_grad=True)
    _loss(Wt, *arrs).backward()
    return Wt.grad.numpy()


def _np_direction(G: np.ndarray, norm: str, q: float | None = None) -> np.ndarray:
    """Steepest directions written out from their definitions (THEORY §6), numpy, one matrix."""
    if norm == "fro":
        return G / np.linalg.norm(G)
    if norm == "linf":
        return np.sign(G)
    if norm == "l1":
        top = np.abs(G) == np.abs(G).max()
        return np.sign(G) * top / top.sum()
    if norm == "spec":
        U, S, Vt = np.linalg.svd(G.reshape(G.shape[0], -1), full_matrices=False)
        keep = S > tol("spec_rank") * S[0]
        return (U[:, keep] @ Vt[keep]).reshape(G.shape)
    assert norm == "lq" and q is not None
    qs = q / (q - 1.0)
    return np.sign(G) * np.abs(G) ** (qs - 1.0) / np.linalg.norm(G.ravel(), qs) ** (qs - 1.0)


def _np_norm(A: np.ndarray, norm: str, q: float | None = None, dual: bool = False) -> float:
    """The norm (or its dual) from numpy's own definitions."""
    a = A.ravel()
    table = {
        ("fro", False): lambda: np.linalg.norm(a),
        ("fro", True): lambda: np.linalg.norm(a),
        ("linf", False): lambda: np.max(np.abs(a)),
        ("linf", True): lambda: np.sum(np.abs(a)),
        ("l1", False): lambda: np.sum(np.abs(a)),
        ("l1", True): lambda: np.max(np.abs(a)),
        ("spec", False): lambda: np.linalg.norm(A, 2),
        ("spec", True): lambda: np.linalg.norm(A, "nuc"),
        ("lq", False): lambda: np.linalg.norm(a, q),
        ("lq", True): lambda: np.linalg.norm(a, q / (q - 1.0)),
    }
    return float(table[(norm, dual)]())


def _is_steepest(G: np.ndarray, D: np.ndarray, norm: str, q: float | None = None) -> bool:
    r"""$\|D\|=1$ and $\langle G,D\rangle=\|G\|_*$: by Hölder $\langle G,D'\rangle\le\|G\|_*$ on the unit ball, so
    this certifies $D=\arg\max$."""
    r = tol("rounding")
    unit = abs(_np_norm(D, norm, q) - 1.0) <= r * 10
    dual = _np_norm(G, norm, q, dual=True)
    return bool(unit and abs(float(np.sum(G * D)) - dual) <= r * 10 * dual)


NORM_CASES = [("fro", None), ("linf", None), ("l1", None), ("spec", None), ("lq", 3.0), ("lq", 1.5)]
ids = [n if q is None else f"{n}{q:g}" for n, q in NORM_CASES]


# ---------------------------------------------------------------------- the directions
@given(st.integers(0, 2**20), st.sampled_from(NORM_CASES), st.integers(1, 5), st.booleans())
def test_steepest_direction_has_unit_norm_and_attains_the_dual_norm(seed, case, rank, ties):
    norm, q = case
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((3, 5, rank)) @ rng.standard_normal((3, rank, 4))  # rank <= min(rank, 4)
    if ties:  # bit-equal magnitudes: two entries share the largest one
        G[:, 0, 0] = np.abs(G).reshape(3, -1).max(-1) * 2.0
        G[:, 1, 1] = -G[:, 0, 0]
    D = direction(torch.tensor(G), norm, q).numpy()
    for b in range(3):
        assert _is_steepest(G[b], D[b], norm, q), (norm, b)
    # planted wrong directions fail the check: off the unit sphere, or unit norm but not attaining ||G||_*
    assert not _is_steepest(G[0], 1.001 * D[0], norm, q) and not _is_steepest(G[0], -D[0], norm, q)
    if norm in ("linf", "l1", "lq"):  # the Frobenius direction is not steepest here (generic G)
        assert not _is_steepest(G[0], _np_direction(G[0], "fro"), norm, q)


def test_l1_ties_share_the_step_evenly_and_commute_with_permutations():
    G = np.array([[[0.5, -0.5, 0.25], [0.1, 0.5, -0.2]]])
    D = direction(torch.tensor(G), "l1").numpy()[0]
    assert np.array_equal(D, np.array([[1, -1, 0], [0, 1, 0]]) / 3.0)
    perm = np.random.default_rng(0).permutation(6)
    Dp = direction(torch.tensor(G.reshape(1, -1)[:, perm]), "l1").numpy()
    assert np.array_equal(Dp[0], D.ravel()[perm])


def test_spec_of_a_rank_deficient_gradient_stays_in_its_row_and_column_spaces():
    rng = np.random.default_rng(3)
    A, Bm = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    G = A @ Bm.T  # rank 2 in 6 x 6: a float SVD leaves ~1e-16 sigma_1 in the four zero singular values
    D = direction(torch.tensor(G[None]), "spec").numpy()[0]
    s = np.linalg.svd(D, compute_uv=False)
    assert np.allclose(s, [1, 1, 0, 0, 0, 0], atol=1e-12)
    Pa, Pb = A @ np.linalg.pinv(A), Bm @ np.linalg.pinv(Bm)
    assert np.max(np.abs(D - Pa @ D @ Pb)) <= 1e-12
    assert _is_steepest(G, D, "spec")
    # a vector factor (p, v) is a d x 1 matrix: the Euclidean direction
    g = rng.standard_normal((2, 4))
    assert np.allclose(direction(torch.tensor(g), "spec").numpy(), g / np.linalg.norm(g, axis=1, keepdims=True))


def test_zero_gradient_gives_zero_direction_never_nan():
    for norm, q in NORM_CASES:
        D = direction(torch.zeros(2, 3, 3, dtype=torch.float64), norm, q)
        assert torch.equal(D, torch.zeros_like(D)), norm


# ---------------------------------------------------------------------- trajectories vs independent loops
@pytest.mark.parametrize("schedule", ["constant", "rsqrt"])
@pytest.mark.parametrize("case", NORM_CASES, ids=ids)
def test_nsd_trajectory_matches_an_autograd_loop(case, schedule):
    norm, q = case
    # step sizes keep the logits small (||W|| <~ 4): autograd's gamma_t - gamma^T s cancels once s saturates
    lr = 0.01 / fro_bound(norm, (5, 5), q) * (3.0 if schedule == "rsqrt" else 1.0)
    steps, every = 300, 50
    res = run(DS, algo="nsd", norm=norm, q=q, lr=lr, schedule=schedule, steps=steps, init=W0, record_every=every,
              record_params=True)  # fmt: skip
    arrs, W, worst = _torch_arrays(DS), W0.copy(), 0.0
    for k in range(steps + 1):
        if k % every == 0:
            worst = max(worst, _rel(res.trajectory["W"][k // every, 0], W))
        if k < steps:
            eta = lr / math.sqrt(k + 1) if schedule == "rsqrt" else lr
            W = W - eta * _np_direction(_autograd(W, arrs), norm, q)
    assert worst <= tol("replay_rtol"), worst
    assert np.linalg.norm(W - W0) > 0.5  # it moved


@pytest.mark.parametrize("q", [1.5, 3.0])
def test_nmd_trajectory_matches_a_numpy_loop(q):
    lr, steps, every = 0.01, 300, 50
    res = run(DS, algo="nmd", q=q, lr=lr, steps=steps, init=W0, record_every=every, record_params=True)
    arrs, W, worst = _torch_arrays(DS), W0.copy(), 0.0
    D = np.sign(W) * np.abs(W) ** (q - 1.0)
    for k in range(steps + 1):
        if k % every == 0:
            worst = max(worst, _rel(res.trajectory["W"][k // every, 0], W))
        if k < steps:
            G = _autograd(W, arrs)
            D = D - lr * G / np.linalg.norm(G.ravel(), q / (q - 1.0))
            W = np.sign(D) * np.abs(D) ** (1.0 / (q - 1.0))
    assert worst <= tol("replay_rtol"), worst
    # q = 2 is normalised GD
    a = run(DS, algo="nmd", q=2.0, lr=lr, steps=steps, init=W0)
    b = run(DS, algo="ngd", lr=lr, steps=steps, init=W0)
    assert _rel(a.W, b.W) <= tol("replay_rtol")


@pytest.mark.parametrize(
    "kw",
    [
        dict(adam_eps=0.0),
        dict(adam_eps=1e-8),
        dict(adam_eps=0.0, schedule="rsqrt", lr=0.05),
        dict(adam_eps=1e-3, ridge=0.01, adam_betas=(0.5, 0.9)),
    ],
    ids=["eps0", "eps1e-8", "rsqrt", "ridge-betas"],
)
def test_adam_matches_torch_optim_adam(kw):
    lr, steps, every = kw.pop("lr", 0.01), 300, 50
    res = run(DS, algo="adam", lr=lr, steps=steps, init=W0, record_every=every, record_params=True, **kw)
    Wt = torch.tensor(W0, requires_grad=True)
    opt = torch.optim.Adam(
        [Wt], lr=lr, betas=kw.get("adam_betas", (0.9, 0.999)), eps=kw["adam_eps"], weight_decay=2 * kw.get("ridge", 0)
    )  # ridge lambda ||W||^2 adds 2 lambda W to the gradient: torch's weight_decay
    arrs, worst = _torch_arrays(DS), 0.0
    for k in range(steps + 1):
        if k % every == 0:
            worst = max(worst, _rel(res.trajectory["W"][k // every, 0], Wt.detach().numpy()))
        if k < steps:
            for group in opt.param_groups:
                group["lr"] = lr / math.sqrt(k + 1) if kw.get("schedule") == "rsqrt" else lr
            opt.zero_grad()
            _loss(Wt, *arrs).backward()
            opt.step()
    assert worst <= tol("replay_rtol"), worst


def test_factor_wise_nsd_and_adam_on_kq_and_prompt_match_autograd():
    rng = np.random.default_rng(5)
    K0, Q0 = 0.3 * rng.standard_normal((2, 5, 3))
    arrs = _torch_arrays(DS)
    for algo, norm in (("nsd", "spec"), ("nsd", "linf"), ("adam", None)):
        res = run(DS, param="KQ", algo=algo, norm=norm, lr=0.005, steps=200, init={"K": K0, "Q": Q0}, m=3)
        K, Q = (torch.tensor(a, requires_grad=True) for a in (K0, Q0))
        opt = torch.optim.Adam([K, Q], lr=0.005, betas=(0.9, 0.999), eps=0.0) if algo == "adam" else None
        for _ in range(200):
            loss = _loss(K @ Q.T, *arrs)
            if opt is not None:
                opt.zero_grad()
                loss.backward()
                opt.step()
                continue
            gK, gQ = torch.autograd.grad(loss, (K, Q))
            with torch.no_grad():
                K = K - 0.005 * torch.tensor(_np_direction(gK.numpy(), norm))
                Q = Q - 0.005 * torch.tensor(_np_direction(gQ.numpy(), norm))
            K.requires_grad_(True)
            Q.requires_grad_(True)
        assert _rel(res.K[0], K.detach().numpy()) <= tol("replay_rtol"), (algo, norm)
        assert _rel(res.Q[0], Q.detach().numpy()) <= tol("replay_rtol"), (algo, norm)
    # prompt attention p: linf steepest descent
    p0 = 0.1 * rng.standard_normal(5)
    res = run(DS, param="p", algo="nsd", norm="linf", lr=0.01, steps=200, init=p0)
    p = p0.copy()
    for _ in range(200):
        pt = torch.tensor(p, requires_grad=True)
        _loss(None, *arrs, p=pt).backward()
        p = p - 0.01 * np.sign(pt.grad.numpy())
    assert _rel(res.p[0], p) <= tol("replay_rtol")


def test_nsd_fro_is_ngd_bit_for_bit():
    ds = generate.paper_law(3, 4, 5, seed=2, B=2)
    for kw in (dict(param="W"), dict(param="KQ", init="random", m=3), dict(param="p"), dict(param="vp", init="random"),
               dict(param="W", ridge=0.01, schedule="rsqrt")):  # fmt: skip
        a = run(ds, algo="nsd", norm="fro", steps=300, **kw)
        b = run(ds, algo="ngd", steps=300, kernel="torch", **kw)  # the same torch algorithms
        for key, val in b.params(0).items():
            assert np.array_equal(a.params(0)[key], val) and np.array_equal(a.params(1)[key], b.params(1)[key])


def test_rsqrt_schedule_is_eta0_over_sqrt_k_plus_1():
    A, steps, eta0 = Arrays.of(DS), 200, 0.5
    for algo in ("gd", "ngd"):
        res = run(DS, algo=algo, lr=eta0, schedule="rsqrt", steps=steps, init=W0)
        W = W0.copy()
        for k in range(steps):
            lg = log_gradient(A, W)
            G = np.exp(lg.log_scale) * lg.G if algo == "gd" else lg.G / np.linalg.norm(lg.G)
            W = W - eta0 / np.sqrt(k + 1) * G
        assert _rel(res.W[0], W) <= tol("replay_rtol"), algo
    # the constant schedule is bit-identical to giving no schedule
    assert np.array_equal(run(DS, lr=eta0, steps=50).W, run(DS, lr=eta0, steps=50, schedule="constant").W)


@pytest.mark.parametrize(
    "kw",
    [dict(algo="nsd", norm=n, q=q) for n, q in NORM_CASES[1:5]] + [dict(algo="adam"), dict(algo="nmd", q=3.0)],
    ids=lambda kw: "-".join(str(v) for v in kw.values() if v is not None),
)
def test_a_batch_equals_its_runs_one_at_a_time(kw):
    ds = generate.paper_law(3, 4, 5, seed=3, B=3)
    init = 0.1 * np.random.default_rng(2).standard_normal((3, 5, 5))
    res = run(ds, lr=0.02, steps=200, init=init, schedule="rsqrt", **kw)
    for b in range(3):
        one = run(ds[b], lr=0.02, steps=200, init=init[b], schedule="rsqrt", **kw)
        assert _rel(res.W[b], one.W[0]) <= tol("batch_rtol")
        assert res.steps[b] == one.steps[0] and res.stop_reason[b] == one.stop_reason[0]


# ---------------------------------------------------------------------- scale safety
@pytest.mark.parametrize("norm,lr", [("linf", 0.5), ("l1", 3.0), ("fro", 0.5)])
def test_nsd_runs_far_past_underflow_like_the_log_domain_numpy_loop(norm, lr):
    A, steps = Arrays.of(DS), 3000
    res = run(DS, algo="nsd", norm=norm, lr=lr, steps=steps)
    W = np.zeros((5, 5))
    for _ in range(steps):
        W = W - lr * _np_direction(log_gradient(A, W).G, norm)
    assert res.stop_reason == ["steps"] and _rel(res.W[0], W) <= tol("replay_rtol")
    # the float64 gradient itself underflowed to exactly 0 long before: its scale is e^M, M < -745
    assert log_gradient(A, W).log_scale < -800 and np.all(model.grad_W(DS, res.W[0]) == 0.0)


SCALE_CASES = [
    (dict(algo="nsd", norm="linf"), 1, 600),
    (dict(algo="nsd", norm="spec"), 1, 600),
    (dict(algo="nsd", norm="lq", q=3.0), 1, 600),
    (dict(algo="adam"), 1, 600),
    (dict(algo="nmd", q=3.0), 2, 300),
]


@pytest.mark.parametrize("kw,power,k", SCALE_CASES, ids=["linf", "spec", "lq", "adam", "nmd"])
def test_queries_scaled_by_a_tiny_power_of_two_run_like_the_unscaled_data(kw, power, k):
    # L_c(W) = L(cW): V_k = c W_k is the same algorithm on Z with step c eta (c^(q-1) eta for nmd).  At c = 2^-600
    # the gradient is ~1e-181, its square underflows: plain float Adam divides 0 by 0 (the next test).
    c = 2.0**-k
    small = Dataset(DS.X, DS.Y, DS.Z * c, DS.v)
    a = run(small, lr=0.05 / c**power, steps=300, init=W0 / c, **kw)
    b = run(DS, lr=0.05, steps=300, init=W0, **kw)
    assert _rel(a.W[0] * c, b.W[0]) <= tol("replay_rtol") and a.stop_reason == ["steps"]
    assert np.linalg.norm(b.W[0] - W0) > 0.1


def test_adam_with_plain_float_gradients_would_fail_where_the_engine_does_not():
    # the contrast of the test above: torch.optim.Adam (eps = 0) on the same 2^-600 data is 0/0 at once
    c = 2.0**-600
    arrs = _torch_arrays(Dataset(DS.X, DS.Y, DS.Z * c, DS.v))
    Wt = torch.tensor(W0 / c, requires_grad=True)
    opt = torch.optim.Adam([Wt], lr=0.05, eps=0.0)
    _loss(Wt, *arrs).backward()
    opt.step()
    assert not torch.isfinite(Wt).all()


def test_a_true_stationary_point_stops_underflow_and_takes_no_step():
    X = np.array(DS.X)
    X[..., -1] = 0.0  # v = e_d is orthogonal to every token: all scores 0, the gradient is exactly 0
    v = np.zeros(5)
    v[-1] = 1.0
    flat = Dataset(X, DS.Y, DS.Z, v, alpha=np.zeros(3, dtype=int))  # every token ties: name the selection
    for kw in [dict(algo="nsd", norm=n, q=q) for n, q in NORM_CASES] + [dict(algo="adam"), dict(algo="nmd", q=3.0)]:
        res = run(flat, steps=10, init=W0, **kw)
        assert res.stop_reason == ["underflow"] and res.steps[0] == 0 and np.array_equal(res.W[0], W0), kw


BOUND_CASES = [dict(algo="nsd", norm=n, q=q) for n, q in NORM_CASES]
BOUND_CASES += [dict(algo="adam"), dict(algo="adam", adam_betas=(0.5, 0.3))]


@pytest.mark.parametrize("kw", BOUND_CASES, ids=lambda kw: "-".join(str(v) for v in kw.values() if v is not None))
def test_every_step_lies_within_the_a_priori_bound_of_check_ranges(kw):
    steps, lr = 150, 0.05
    res = run(DS, lr=lr, steps=steps, init=W0, record_every=1, record_params=True, schedule="rsqrt", **kw)
    dW = np.linalg.norm(np.diff(res.trajectory["W"][:, 0], axis=0).reshape(steps, -1), axis=-1)
    eta = lr / np.sqrt(np.arange(1, steps + 1))
    if kw["algo"] == "adam":
        c = 5.0 * adam_entry_bound(kw.get("adam_betas", (0.9, 0.999)), steps)
    else:
        c = fro_bound(kw["norm"], (5, 5), kw.get("q"))
    assert np.all(dW <= c * eta * (1 + tol("rounding"))), np.max(dW / (c * eta))
    if kw.get("norm") in ("linf", "l1", "fro"):  # these bounds are attained: a full sign matrix, one entry, eta
        assert np.max(dW / (c * eta)) >= 1 - tol("rounding")


def test_nmd_dual_moves_by_eta_in_the_dual_norm():
    q, lr = 3.0, 0.05
    res = run(DS, algo="nmd", q=q, lr=lr, steps=50, init=W0, record_every=1, record_params=True)
    D = np.sign(res.trajectory["W"][:, 0]) * np.abs(res.trajectory["W"][:, 0]) ** (q - 1)
    step = np.linalg.norm(np.diff(D, axis=0).reshape(50, -1), q / (q - 1), axis=-1)
    assert np.allclose(step, lr, rtol=1e-9)


def test_refusals_name_the_bound_of_each_algorithm():
    with pytest.raises(InputError, match=r"\|\|theta_0\|\| \+ 5\*lr\*steps = "):  # linf: ||sign G||_F <= 5
        run(DS, algo="nsd", norm="linf", lr=1e305, steps=2000)
    run(DS, algo="nsd", norm="l1", lr=1e299, steps=20)  # l1 steps have norm lr: representable
    with pytest.raises(InputError, match=r"lr\*\(2\*sqrt\(steps\)-1\)"):
        run(DS, schedule="rsqrt", lr=1e306, steps=2000)
    run(DS, schedule="rsqrt", lr=1e303, steps=2000)  # (2 sqrt(2000) - 1) 1e303 ~ 9e304 < F/4: runs
    with pytest.raises(InputError, match=r"reach \|\|theta_0\|\| \+ 33\.8\*lr\*steps"):  # 5 A, A = 6.76
        run(DS, algo="adam", lr=1e304, steps=2000)
    with pytest.raises(InputError, match=r"the parameter 'W'.*\^\(1/\(q-1\)\)"):
        run(DS, algo="nmd", q=1.01, lr=1.0, steps=2000)


@pytest.mark.parametrize(
    "kw",
    [
        dict(algo="nsd"),
        dict(algo="nsd", norm="l2"),
        dict(algo="nsd", norm="lq"),
        dict(algo="nsd", norm="linf", q=3.0),
        dict(algo="ngd", norm="linf"),
        dict(algo="ngd", q=3.0),
        dict(algo="nmd"),
        dict(algo="nmd", q=3.0, param="KQ"),
        dict(algo="adam", adam_betas=(0.99, 0.9)),
        dict(algo="adam", adam_betas=(0.9, 1.0)),
        dict(algo="adam", adam_betas=(0.9,)),
        dict(algo="adam", adam_eps=-1.0),
        dict(algo="gd", adam_eps=1e-8),
        dict(algo="nsd", norm="fro", normalize="joint"),
        dict(schedule="cosine"),
    ],
)
def test_bad_settings_raise_input_error(kw):
    with pytest.raises(InputError):
        run(DS, steps=3, **kw)


# ---------------------------------------------------------------------- CLI
def _call(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def test_cli_runs_the_new_algorithms_and_reports_their_settings(tmp_path, capsys):
    path = generate.paper_law(3, 4, 5, seed=1, B=2).save(tmp_path / "b.npz")
    rc, out, _ = _call(capsys, "gd", path, "--algo", "nsd", "--norm", "spec", "--schedule", "rsqrt", "--steps", "30")
    assert rc == 0 and out.startswith("attsvm gd: param=W algo=nsd norm=spec schedule=rsqrt runs=2")
    rc, out, _ = _call(capsys, "gd", path, "--algo", "adam", "--adam-betas", "0.8,0.99", "--steps", "30", "--json")
    js = json.loads(out)
    assert rc == 0 and js["settings"]["adam_betas"] == [0.8, 0.99] and js["settings"]["adam_eps"] == 0.0
    ref = run(generate.paper_law(3, 4, 5, seed=1, B=2), algo="adam", adam_betas=(0.8, 0.99), steps=30)
    assert np.array_equal(np.array(js["runs"][1]["W"]), ref.W[1])
    rc, out, _ = _call(capsys, "gd", path, "--algo", "nmd", "--q", "3", "--steps", "30", "--json")
    assert rc == 0 and json.loads(out)["settings"]["q"] == 3.0 and json.loads(out)["algo"] == "nmd"


@pytest.mark.parametrize(
    "extra",
    [
        ["--algo", "nsd"],
        ["--algo", "nsd", "--norm", "l2"],
        ["--algo", "nsd", "--norm", "lq"],
        ["--norm", "linf"],
        ["--q", "3"],
        ["--algo", "nmd"],
        ["--algo", "nmd", "--q", "3", "--param", "vp"],
        ["--algo", "adam", "--adam-betas", "0.9"],
        ["--algo", "adam", "--adam-betas", "0.99,0.9"],
        ["--algo", "adam", "--adam-eps", "-1"],
        ["--algo", "gd", "--adam-eps", "1e-8"],
        ["--schedule", "cosine"],
        ["--algo", "nsd", "--norm", "linf", "--lr", "1e305"],
    ],
)
def test_cli_bad_settings_exit_2_with_one_line(tmp_path, capsys, extra):
    path = generate.paper_law(3, 4, 5, seed=1).save(tmp_path / "s.npz")
    try:
        rc = main(["gd", str(path), *extra])
    except SystemExit as exc:  # argparse usage errors (one line, exit 2)
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1, err
