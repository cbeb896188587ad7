"""The multi-head parameterisation ``heads`` (issue 28, part 4): $H$ heads $K_h, Q_h$ whose outputs add up,
$u_i=\\sum_h\\gamma_i^\\top\\mathbb S(X_iK_hQ_h^\\top z_i)$.

* one head is the ``KQ`` parameterisation, step for step;
* the engine's gradient (one plain step, $\\eta=1$) equals the 50-digit gradient written from the definition, which
  equals central differences of the 50-digit loss;
* float64 runs (``gd``, ``ngd`` per head, ``ngd`` joint) agree with the 50-digit replay;
* per-factor normalisation is per head (each $K_h$, $Q_h$ moves by exactly $\\eta$), joint by the norm of all heads;
* the reported attention is the heads' mean, $\\log\\bar s$, checked against the 50-digit softmaxes;
* a bad number of heads (0, negative, not an integer, given to another parameterisation) is bad input, exit 2.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from attsvm import gd, generate
from attsvm import highprec as hp
from attsvm.errors import InputError
from attsvm.gd.init import initial_params
from attsvm.highprec.model import heads_outputs, loss_heads
from attsvm.tolerances import tol


@pytest.fixture(scope="module")
def data():
    return generate.paper_law(3, 4, 3, seed=5)


def _start(H: int, d: int, m: int, seed: int = 4, scale: float = 0.5) -> dict[str, np.ndarray]:
    th = initial_params("heads", "random", 1, d, m, seed=seed, init_scale=scale, heads=H)
    return {"K": th["K"][0], "Q": th["Q"][0]}


@pytest.mark.parametrize("kw", [{"algo": "gd"}, {"algo": "ngd"}, {"algo": "ngd", "normalize": "joint"}])
def test_one_head_is_the_KQ_parameterisation(data, kw):
    th = _start(1, data.d, 2)
    one = gd.run(data, param="heads", heads=1, m=2, init=th, steps=40, lr=0.2, **kw)
    kq = gd.run(data, param="KQ", m=2, init={"K": th["K"][0], "Q": th["Q"][0]}, steps=40, lr=0.2, kernel="torch", **kw)
    assert one.K.shape == (1, 1, data.d, 2)
    scale = np.linalg.norm(kq.K[0]) + np.linalg.norm(kq.Q[0])
    assert np.linalg.norm(one.K[0, 0] - kq.K[0]) + np.linalg.norm(one.Q[0, 0] - kq.Q[0]) <= 1e-13 * scale
    np.testing.assert_allclose(one.W, kq.W, rtol=1e-13, atol=1e-13 * np.abs(kq.W).max())
    np.testing.assert_allclose(one.loss, kq.loss, rtol=1e-13)
    np.testing.assert_array_equal(one.selection, kq.selection)


@pytest.mark.parametrize("H", [1, 2, 3])
def test_engine_gradient_is_the_50_digit_gradient(data, H):
    th = _start(H, data.d, data.d, seed=H)
    res = gd.run(data, param="heads", heads=H, algo="gd", lr=1.0, steps=1, init=th)  # theta_1 = theta_0 - grad
    gK, gQ = (hp.to_numpy(g) for g in hp.grad_heads(data, th["K"], th["Q"]))
    assert gK.shape == gQ.shape == (H, data.d, data.d)
    for got, want in ((th["K"] - res.K[0], gK), (th["Q"] - res.Q[0], gQ)):
        scale = np.linalg.norm(want) + np.linalg.norm(th["K"])
        assert np.linalg.norm(got - want) <= 1e-13 * scale


def test_50_digit_gradient_is_the_derivative_of_the_loss(data):
    """Central differences of the 50-digit loss (step 1e-20 at 60 digits: error ~1e-40) against grad_heads, every
    entry of every head's K and Q (the gradient code is not used by the loss)."""
    H, d = 2, data.d
    th = _start(H, d, d, seed=9)
    gK, gQ = hp.grad_heads(data, th["K"], th["Q"], dps=60)
    eps = mpmath.mpf("1e-20")
    with mpmath.workdps(60):
        for name, grad in (("K", gK), ("Q", gQ)):
            for h in range(H):
                for a in range(d):
                    for b in range(d):
                        moved = []
                        for sgn in (1, -1):
                            P = {k: hp.as_mp(v) for k, v in th.items()}
                            P[name][h][a][b] += sgn * eps
                            moved.append(loss_heads(data, P["K"], P["Q"], dps=60))
                        fd = (moved[0] - moved[1]) / (2 * eps)
                        assert abs(fd - grad[h][a][b]) <= mpmath.mpf("1e-30"), (name, h, a, b)


@pytest.mark.parametrize("kw", [{"algo": "gd"}, {"algo": "ngd"}, {"algo": "ngd", "normalize": "joint"}])
def test_float64_run_agrees_with_the_50_digit_replay(data, kw):
    th = _start(3, data.d, 2, seed=7)
    res = gd.run(data, param="heads", heads=3, m=2, init=th, steps=15, lr=0.1, **kw)
    rep = hp.replay(data, th, param="heads", steps=15, lr=0.1, record_every=5, **kw)
    assert rep.taken == 15 and set(rep.final) == {"K", "Q"}
    for name in ("K", "Q"):
        want = hp.to_numpy(rep.final[name])
        assert want.shape == (3, data.d, 2)
        assert np.linalg.norm(getattr(res, name)[0] - want) <= tol("replay_rtol") * np.linalg.norm(want)
    assert [hp.to_numpy(r["K"]).shape for r in rep.recorded] == [(3, data.d, 2)] * 4


def test_per_head_and_joint_normalisation(data):
    r"""``ngd`` per factor moves every $K_h$ and $Q_h$ by exactly $\eta$ (per-head normalisation); ``joint`` moves the
    whole $(K,Q)$ by $\eta$, the heads by different amounts."""
    H, lr = 3, 0.25
    th = _start(H, data.d, data.d, seed=11)
    per = gd.run(data, param="heads", heads=H, algo="ngd", init=th, steps=1, lr=lr)
    for name in ("K", "Q"):
        moved = np.linalg.norm((getattr(per, name)[0] - th[name]).reshape(H, -1), axis=-1)
        np.testing.assert_allclose(moved, lr, rtol=1e-13)
    joint = gd.run(data, param="heads", heads=H, algo="ngd", normalize="joint", init=th, steps=1, lr=lr)
    steps = np.concatenate([(getattr(joint, n)[0] - th[n]).reshape(H, -1) for n in ("K", "Q")])
    np.testing.assert_allclose(np.linalg.norm(steps), lr, rtol=1e-13)
    assert np.ptp(np.linalg.norm(steps, axis=-1)) > 1e-3 * lr  # not per head


def test_reported_attention_is_the_heads_mean(data):
    H = 3
    th = _start(H, data.d, data.d, seed=2, scale=1.0)
    res = gd.run(data, param="heads", heads=H, algo="gd", init=th, steps=0)
    s, g, u = heads_outputs(data, th["K"], th["Q"])
    mean = np.mean(hp.to_numpy(s), axis=0)  # (N,T)
    np.testing.assert_allclose(np.exp(res.log_softmax[0]), mean, rtol=1e-13)
    np.testing.assert_array_equal(res.selection[0], np.argmax(mean, axis=-1))
    want_W = sum(th["K"][h] @ th["Q"][h].T for h in range(H))
    np.testing.assert_allclose(res.W[0], want_W, rtol=1e-13)
    want_loss = float(loss_heads(data, th["K"], th["Q"]))
    np.testing.assert_allclose(res.loss[0], want_loss, rtol=1e-13)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", np.float64(2.0)])
def test_bad_number_of_heads(data, bad):
    with pytest.raises(InputError, match="heads must be a positive integer"):
        gd.run(data, param="heads", heads=bad, steps=1)


def test_heads_only_for_the_multi_head_parameterisation(data):
    with pytest.raises(InputError, match="heads applies to param 'heads' only"):
        gd.run(data, param="KQ", heads=2, steps=1)
    gd.run(data, param="KQ", heads=1, steps=1)  # one head is every other parameterisation's
    for algo, kw in (("nsd", {"norm": "fro"}), ("adam", {}), ("signum", {}), ("muon", {}), ("md", {"q": 3.0})):
        with pytest.raises(InputError, match="available for param"):
            gd.run(data, param="heads", algo=algo, steps=1, **kw)
    with pytest.raises(InputError, match=r"shape \(2, 3, 3\)"):  # the default H = 2
        gd.run(data, param="heads", init=_start(3, data.d, data.d), steps=1)
    with pytest.raises(InputError, match="no head"):
        gd.run(data, param="heads", head=("quadratic", 0.1), steps=1)


def test_cli_heads(tmp_path, data, capsys):
    import json

    from attsvm.cli import main

    f = tmp_path / "d.npz"
    data.save(str(f))
    for bad in (["--heads", "0"], ["--heads", "-2"], ["--param", "KQ", "--heads", "2"]):
        args = ["gd", str(f), "--steps", "3", *(["--param", "heads"] if "--param" not in bad else []), *bad]
        assert main(args) == 2
        out = capsys.readouterr()
        assert out.out == "" and out.err.startswith("error:")
    assert main(["gd", str(f), "--param", "heads", "--heads", "3", "--m", "2", "--steps", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["heads"] == 3
    run = out["runs"][0]
    assert main(["gd", str(f), "--param", "heads", "--heads", "3", "--steps", "3"]) == 0
    assert capsys.readouterr().out.startswith("attsvm gd: param=heads heads=3 algo=ngd ")
    assert np.shape(run["K"]) == np.shape(run["Q"]) == (3, data.d, 2) and np.shape(run["W"]) == (data.d, data.d)


@pytest.mark.slow
@pytest.mark.parametrize("run", [1, 19])
def test_nuclear_conjecture_failing_runs_replayed_at_50_digits(run):
    """The runs of ``kq-heads-nuclear`` (seed 0) whose heads end on different selections, replayed at 50 digits for
    the claim's 2000 jointly normalised steps. The float64 run is the replay's (``replay_rtol``) over the first 500
    steps; later the two part (the loss is flat, the normalised direction of a vanishing gradient amplifies rounding:
    each float64 step is still the 50-digit step of its own iterate to ~1e-13), but the replay ends where the float64
    run does: the heads' own selections differ, and W = sum_h K_h Q_h^T is not near the Att-SVM* optimum of the
    heads' mean selection (no positive margin, or an excess far above eps = 0.05). ~25 s."""
    from attsvm import strategies
    from attsvm.svm.constraints import build
    from attsvm.svm.nuclear import solve_nuclear

    def verdict(K, Q):
        S = [hp.to_numpy(sh) for sh in heads_outputs(ds, K, Q)[0]]
        own = [np.argmax(x, axis=-1) for x in S]
        mean = np.argmax(np.mean(S, axis=0), axis=-1)
        Kn, Qn = hp.to_numpy(K), hp.to_numpy(Q)
        W = sum(Kh @ Qh.T for Kh, Qh in zip(Kn, Qn))
        sol = solve_nuclear(ds, mean)
        assert sol.status == "optimal"
        m = build(ds, mean).margins(W).min()
        excess = np.linalg.svd(W / m, compute_uv=False).sum() / float(sol.objective) - 1.0 if m > 0 else np.inf
        return own, mean, excess

    ds = strategies.batch("paper", 24, seed=0, n=3, T=4, d=4)[run]
    kw = {"algo": "ngd", "normalize": "joint", "lr": 0.1, "steps": 2000}
    th = initial_params("heads", "zero", 24, 4, 4, seed=0, init_scale=0.1, heads=2)  # the claim's batch draw
    start = {"K": th["K"][run], "Q": th["Q"][run]}
    res = gd.run(ds, param="heads", heads=2, init=start, record_every=500, record_params=True, **kw)
    rep = hp.replay(ds, start, param="heads", record_every=500, **kw)
    assert rep.taken == 2000 and rep.steps[1] == 500
    for name in ("K", "Q"):
        want = hp.to_numpy(rep.recorded[1][name])
        assert np.linalg.norm(res.trajectory[name][1, 0] - want) <= tol("replay_rtol") * np.linalg.norm(want)
    own64, mean64, ex64 = verdict(res.K[0], res.Q[0])
    own, mean, excess = verdict(rep.final["K"], rep.final["Q"])
    assert not np.array_equal(own[0], own[1]) and not np.array_equal(own64[0], own64[1])
    np.testing.assert_array_equal(mean, res.selection[0])
    assert excess > 10 * 0.05 and ex64 > 10 * 0.05


@pytest.mark.parametrize("kw", [{"algo": "gd"}, {"algo": "ngd"}, {"algo": "ngd", "normalize": "joint"}])
def test_ball_replay_encloses_the_100_digit_replay(data, kw):
    """The ball replay of the heads model (``Kit("ball").gd`` with (H,d,m) factors, :mod:`attsvm.ball.heads`) holds
    the 100-digit replay's iterates (written independently) after 6 steps, with radii far below float64's."""
    from attsvm.ball.numbers import mid_mpf
    from attsvm.kit import Kit

    th = _start(2, data.d, 2, seed=13)
    run = Kit("ball", 256).gd(data, lr=0.1, steps=6, K0=th["K"], Q0=th["Q"], **kw)
    rep = hp.replay(data, th, param="heads", lr=0.1, steps=6, dps=100, **kw)
    assert run.steps == rep.taken == 6 and run.K.shape == (2, data.d, 2)
    with mpmath.workdps(100):
        for name in ("K", "Q"):
            balls, want = getattr(run, name), rep.final[name]
            for idx in np.ndindex(balls.shape):
                b, x = balls[idx], want[idx[0]][idx[1]][idx[2]]
                assert abs(mid_mpf(b) - x) <= mpmath.mpf(float(b.rad())) + mpmath.mpf("1e-90"), (name, idx)
                assert float(b.rad()) < 1e-60
