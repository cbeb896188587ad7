"""The 50-digit replay of the optimizer-geometry algorithms (THEORY §6) against the float64 engine.

:func:`attsvm.highprec.replay` writes ``nsd`` (every norm), ``adam``, ``md`` / ``nmd`` and the step schedules from
their definitions with the 50-digit gradient of :mod:`attsvm.highprec.model`; :func:`attsvm.gd.run` is the
independent float64 code (torch, log-domain gradients, scale-safe moments). The runs are compared iterate by
iterate up to the first update whose discrete choice (a sign, the argmax set, the kept rank) float64 took
differently — :meth:`attsvm.highprec.Replay.agreement` names it, and such an update is accepted only where the
50-digit margin of that choice is below what a float64 gradient resolves (``tol("grad_rtol")``), with a warning.
The directions themselves are checked against their defining properties ($\\|\\Delta\\|=1$,
$\\langle G,\\Delta\\rangle=\\|G\\|_*$).
"""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest

from attsvm import gd, generate
from attsvm import highprec as hp
from attsvm.data import Dataset
from attsvm.kit import Kit
from attsvm.tolerances import tol

#: relative agreement of a float64 run with its replay (measured: <= 4e-14 over 2000 steps, spec aside)
AGREE = 1e-12
#: spec: the float64 direction U_r V_r^T is only as accurate as eps * sigma_1 / (sigma_r - sigma_{r+1}); the deviation
#: may reach this multiple of the replay's first-order rounding estimate (Agreement.estimates; measured: 1.8)
SPEC_SLACK = 8.0
#: a decision whose 50-digit margin is below this may go the other way in float64 (the float64 gradient's
#: relative accuracy); a flip at a larger margin is a bug
RESOLVES = tol("grad_rtol")

CASES = [
    ("nsd", {"norm": "fro"}),
    ("nsd", {"norm": "linf"}),
    ("nsd", {"norm": "l1"}),
    ("nsd", {"norm": "spec"}),
    ("nsd", {"norm": "lq", "q": 3.0}),
    ("nsd", {"norm": "linf", "schedule": "rsqrt"}),
    ("adam", {}),
    ("adam", {"adam_betas": (0.8, 0.99), "adam_eps": 1e-8, "schedule": "rsqrt"}),
    ("nmd", {"q": 3.0}),
    ("md", {"q": 1.5}),
]


def _case(seed: int):
    ds = generate.paper_law(3, 4, 4, seed=seed)
    return ds, np.random.default_rng(seed).standard_normal((4, 4)) * 0.3


def _agree(ds, W0, algo: str, kw: dict, steps: int, lr: float = 0.1, min_compared: int | None = None):
    """Run both, compare up to the first flipped decision (accepted only below float64 resolution, warned)."""
    res = gd.run(ds, algo=algo, lr=lr, steps=steps, init=W0, record_every=1, record_params=True, **kw)
    rep = hp.replay(ds, W0, algo=algo, lr=lr, steps=steps, record_every=1, **kw)
    assert rep.taken == steps and int(res.steps[0]) == steps
    agr = rep.agreement(res.trajectory["W"])
    if agr.first_flip is not None:
        assert agr.flip_margin <= RESOLVES, f"float64 took another branch at a resolvable margin: {agr.flip}"
        warnings.warn(f"{algo} {kw}: compared up to the float64 rounding flip at {agr.flip}", stacklevel=2)
    assert agr.compared >= (steps if min_compared is None else min_compared)
    assert [k for k, _ in agr.estimates] == [k for k, _ in agr.deviations]
    for (k, dev), (_, est) in zip(agr.deviations, agr.estimates):  # est = 0 except for spec
        assert dev <= AGREE + SPEC_SLACK * est, (algo, kw, k, dev, est)
    return rep, agr


@pytest.mark.parametrize("algo,kw", CASES, ids=[f"{a}-{'-'.join(map(str, k.values()))}" for a, k in CASES])
def test_replay_agrees_with_the_engine(algo, kw):
    ds, W0 = _case(1)
    rep, agr = _agree(ds, W0, algo, kw, steps=300 if kw.get("norm") != "spec" else 150, lr=0.5 if algo == "md" else 0.1)
    if kw.get("norm") in ("linf", "l1", "spec"):
        assert len(rep.decisions) == len(rep.margins) == rep.taken  # one decision per update, all compared
    assert len(agr.deviations) == agr.compared + 1


def test_scale_free_far_past_float64_underflow():
    """From a start where the float64 gradient underflows to 0 (||W|| ~ 2000), Adam with eps = 0 and the sign and
    spectral directions still agree: both sides take the direction without the vanishing scale."""
    ds = generate.paper_law(3, 4, 4, seed=1)
    W0 = 4 * gd.run(ds, algo="ngd", lr=0.4, steps=1250).W[0]
    assert np.linalg.norm(W0) > 1500 and np.max(np.abs(hp.to_numpy(hp.grad_W(ds, W0)))) == 0.0  # below 1e-323
    for algo, kw in (("adam", {}), ("nsd", {"norm": "linf"}), ("nsd", {"norm": "spec"})):
        _agree(ds, W0, algo, kw, steps=40)


#: nmd across the underflow: the start ``c`` times the ngd iterate after 1250 steps, where the float64 gradient is
#: ~1e-303; 300 updates of primal size ~1/2 then carry it through the subnormal range (to 0 or ~1e-321)
UNDERFLOW_START = {"W": 3.6, "p": 4.05}


@pytest.mark.parametrize("param", ["W", "p"])
@pytest.mark.parametrize("q", [1.5, 3.0, 4.0])
def test_nmd_is_exact_while_the_gradient_passes_through_the_subnormal_range(param, q):
    r"""``nmd`` normalises the log-domain gradient $\hat g$ ($\max|\hat g|\in[\tfrac12,1)$), never the float64
    gradient, so while the latter goes from normal numbers through the subnormal range (few or no bits left) to 0
    the run neither stops nor loses a digit: every iterate and every step $\theta_{k+1}-\theta_k$ agrees with the
    60-digit replay (replay_rtol), the steps where the float64 gradient is subnormal included."""
    ds = generate.paper_law(3, 4, 4, seed=1)
    base = gd.run(ds, algo="ngd", lr=0.4, steps=1250, param=param)
    th0 = UNDERFLOW_START[param] * (base.W[0] if param == "W" else base.p[0])
    lr = 0.5 * (q - 1) * np.abs(th0).max() ** (q - 2)  # dual step eta: primal steps of about 1/2
    steps = 300
    res = gd.run(ds, param=param, algo="nmd", q=q, lr=lr, steps=steps, init=th0, record_every=1, record_params=True)
    rep = hp.replay(ds, th0, param=param, algo="nmd", q=q, lr=lr, steps=steps, record_every=1, dps=60)
    assert res.stop_reason == ["steps"] and rep.taken == steps
    grad = hp.grad_W if param == "W" else hp.grad_p
    big = [float(np.abs(hp.to_numpy(grad(ds, th[param]))).max()) for th in rep.recorded]  # float64 max|grad|
    tiny = float(np.finfo(np.float64).tiny)
    subnormal = [k for k, g in enumerate(big) if 0 < g < tiny]
    assert big[0] >= tiny and len(subnormal) >= 50 and big[-1] < tiny  # normal, then subnormal (to 0)
    eng = np.asarray(res.trajectory[param])[:, 0]
    ref = np.array([hp.to_numpy(th[param]) for th in rep.recorded])
    dev = np.linalg.norm((eng - ref).reshape(steps + 1, -1), axis=1) / np.linalg.norm(
        ref.reshape(steps + 1, -1), axis=1
    )
    ds_e, ds_r = np.diff(eng, axis=0), np.diff(ref, axis=0)
    sdev = np.linalg.norm((ds_e - ds_r).reshape(steps, -1), axis=1) / np.linalg.norm(ds_r.reshape(steps, -1), axis=1)
    assert dev.max() <= tol("replay_rtol"), (int(dev.argmax()), dev.max())
    assert sdev.max() <= tol("replay_rtol"), (int(sdev.argmax()), sdev.max())
    assert sdev[subnormal[:-1]].max() <= tol("replay_rtol")  # (spelled out: the subnormal steps are among them)


def test_nmd_with_large_steps_parts_from_the_replay_by_sensitivity_not_by_a_lost_digit():
    r"""With steps of about 4 (the iterate oscillating) the float64 and 60-digit ``nmd`` *trajectories* part
    geometrically — as two 60-digit runs from starts one ulp apart do (>1e-8 after 60 steps) — while every single
    step, from the replay's own float64 iterate, is the 60-digit step (replay_rtol relative to the step), the steps
    where the float64 gradient is subnormal included: the deviation measures the iteration, not the step."""
    ds = generate.paper_law(3, 4, 4, seed=1)
    W0 = 3.5 * gd.run(ds, algo="ngd", lr=0.4, steps=1250).W[0]
    q, steps = 3.0, 60
    lr = 4 * (q - 1) * np.abs(W0).max() ** (q - 2)
    rep = hp.replay(ds, W0, algo="nmd", q=q, lr=lr, steps=steps, record_every=1, dps=60)
    Wk = np.array([hp.to_numpy(th["W"]) for th in rep.recorded[:-1]])
    big = [float(np.abs(hp.to_numpy(hp.grad_W(ds, th["W"]))).max()) for th in rep.recorded[:-1]]
    tiny = float(np.finfo(np.float64).tiny)
    assert big[0] >= tiny and sum(0 < g < tiny for g in big) >= 20
    one = gd.run(Dataset.stack([ds] * steps), algo="nmd", q=q, lr=lr, steps=1, init=Wk).W  # one step from each
    ref = np.array([hp.to_numpy(hp.replay(ds, W, algo="nmd", q=q, lr=lr, steps=1, dps=60).final["W"]) for W in Wk])
    flat = lambda a: a.reshape(len(a), -1)  # noqa: E731
    err = np.linalg.norm(flat(one - ref), axis=1) / np.linalg.norm(flat(ref - Wk), axis=1)
    assert err.max() <= tol("replay_rtol"), (int(err.argmax()), err.max())
    W1 = W0.copy()
    W1[0, 0] = np.nextafter(W1[0, 0], np.inf)
    apart = hp.replay(ds, W1, algo="nmd", q=q, lr=lr, steps=steps, dps=60).array()
    assert np.linalg.norm(apart - rep.array()) >= 1e-8 * np.linalg.norm(rep.array())


def _flipped(ref: np.ndarray, k0: int, delta: np.ndarray) -> np.ndarray:
    out = ref.copy()
    out[k0 + 1 :] += delta
    return out


def test_agreement_names_the_first_flipped_decision():
    """A float64 trajectory that took another branch at update k0 is compared up to k0 and the flip is named."""
    ds, W0 = _case(2)
    for norm in ("linf", "l1"):
        rep = hp.replay(ds, W0, algo="nsd", norm=norm, lr=0.1, steps=40, record_every=1)
        ref = np.array([hp.to_numpy(r["W"]) for r in rep.recorded])
        assert rep.agreement(ref).first_flip is None and rep.agreement(ref).compared == 40
        k0 = 17
        step = ref[k0] - ref[k0 + 1]
        if norm == "linf":  # entry (2, 1) moved the other way
            delta = np.zeros((4, 4))
            delta[2, 1] = 2 * step[2, 1]
        else:  # the step went to another entry
            j = int(np.flatnonzero(step.ravel())[0])
            other = (j + 1) % 16
            delta = np.zeros(16)
            delta[j], delta[other] = step.ravel()[j], -step.ravel()[j]
            delta = delta.reshape(4, 4)
        agr = rep.agreement(_flipped(ref, k0, delta))
        assert agr.first_flip == k0 and agr.compared == k0 and agr.flip_margin == float(rep.margins[k0])
        assert f"update {k0}" in agr.flip and (norm != "linf" or "(2, 1)" in agr.flip)
        assert [k for k, _ in agr.deviations] == list(range(k0 + 1))


def _mp(A) -> list:
    return hp.as_mp(np.asarray(A, dtype=np.float64))


def test_directions_have_their_defining_properties():
    r"""$\|\Delta\|=1$ and $\langle G,\Delta\rangle=\|G\|_*$ (the dual norm) at 50 digits, for each norm."""
    rng = np.random.default_rng(3)
    G = rng.standard_normal((4, 4))
    Gm = _mp(G)
    eps = mpmath.mpf(10) ** -45
    with mpmath.workdps(50):
        flat = [x for row in Gm for x in row]
        for norm, dual, primal in (
            ("fro", hp.frob(Gm), lambda D: hp.frob(D)),
            ("linf", mpmath.fsum(abs(x) for x in flat), lambda D: max(abs(x) for r in D for x in r)),
            ("l1", max(abs(x) for x in flat), lambda D: mpmath.fsum(abs(x) for r in D for x in r)),
            ("spec", mpmath.fsum(hp.singular_values(Gm)), lambda D: hp.singular_values(D)[0]),
        ):
            dirn = hp.nsd_direction(Gm, norm)
            assert abs(primal(dirn.delta) - 1) <= eps, norm
            assert abs(hp.inner(Gm, dirn.delta) - dual) <= eps * dual, norm
        q = 3.0
        qs = mpmath.mpf(q) / (q - 1)
        dirn = hp.nsd_direction(Gm, "lq", q)
        assert abs(mpmath.fsum(abs(x) ** q for r in dirn.delta for x in r) - 1) <= eps
        assert abs(hp.inner(Gm, dirn.delta) - mpmath.fsum(abs(x) ** qs for x in flat) ** (1 / qs)) <= eps
        # the zero gradient: no direction, never 0/0
        for norm in ("fro", "linf", "l1", "spec"):
            assert all(x == 0 for r in hp.nsd_direction(_mp(np.zeros((3, 3))), norm).delta for x in r)


def test_l1_exact_ties_share_and_spec_drops_small_singular_values():
    G = np.array([[1.0, -3.0, 0.5], [3.0, 2.0, -3.0], [0.0, 1.0, 2.0]])  # |-3| = |3| = |-3|: three exact ties
    dirn = hp.nsd_direction(_mp(G), "l1")
    assert dirn.decision == (1, 3, 5) and abs(dirn.margin - mpmath.mpf(1) / 3) <= 1e-15  # 1 - 2/3
    assert hp.to_numpy(dirn.delta).tolist() == [[0, -1 / 3, 0], [1 / 3, 0, -1 / 3], [0, 0, 0]]
    rho = tol("spec_rank")
    u, v = np.array([1.0, 2.0, 2.0]) / 3, np.array([2.0, -1.0, 2.0]) / 3
    a, b = np.array([2.0, 1.0, -2.0]) / 3, np.array([1.0, 2.0, 0.0]) / np.sqrt(5)  # a is orthogonal to u
    for tiny, rank in ((rho * 0.5, 1), (rho * 2, 2)):
        M = _mp(np.outer(u, v))
        with mpmath.workdps(60):
            M = [
                [M[i][j] + mpmath.mpf(tiny) * mpmath.mpf(float(a[i])) * mpmath.mpf(float(b[j])) for j in range(3)]
                for i in range(3)
            ]
            dirn = hp.nsd_direction(M, "spec")
        assert dirn.decision == rank
        expect = np.outer(u, v) / (np.linalg.norm(u) * np.linalg.norm(v))
        if rank == 2:
            expect = expect + np.outer(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))
        assert np.abs(hp.to_numpy(dirn.delta) - expect).max() <= 1e-6  # u, v, a, b only approximately orthonormal


def test_directions_agree_with_the_engines_on_one_gradient():
    import torch

    G = np.random.default_rng(5).standard_normal((2, 4, 4))
    G[1, :, 3] = 0.0  # rank-deficient: spec keeps 3 directions on both sides
    for norm, q in (("fro", None), ("linf", None), ("l1", None), ("spec", None), ("lq", 1.7)):
        eng = gd.steepest_direction(torch.tensor(G), norm, q).numpy()
        for b in range(2):
            mine = hp.to_numpy(hp.nsd_direction(_mp(G[b]), norm, q).delta)
            assert np.abs(mine - eng[b]).max() <= 1e-14, norm


def test_names_match_the_engine():
    assert hp.NORMS == gd.NORMS and hp.SCHEDULES == gd.SCHEDULES and set(hp.ALGOS) == set(gd.ALGOS)
    assert hp.PARAMS == gd.init.PARAMS


def test_bad_settings_are_refused():
    ds, W0 = _case(1)
    for kw in (
        {"algo": "nsd"},  # no norm
        {"algo": "nsd", "norm": "max"},
        {"algo": "ngd", "norm": "linf"},
        {"algo": "nsd", "norm": "lq"},  # no q
        {"algo": "nsd", "norm": "linf", "q": 3.0},
        {"algo": "ngd", "adam_eps": 1e-8},
        {"algo": "adam", "adam_betas": (0.999, 0.9)},
        {"algo": "ngd", "schedule": "cosine"},
        {"algo": "nmd"},
        {"algo": "ngd", "normalize": "both"},
        {"algo": "gd", "normalize": "joint"},
    ):
        with pytest.raises(ValueError):
            hp.replay(ds, W0, steps=1, **kw)
    with pytest.raises(ValueError, match="param 'W' and 'p' only"):  # the mirror descents: W and p, as the engine
        hp.replay(ds, {"K": W0, "Q": W0}, param="KQ", algo="md", q=3.0, steps=1)
    with pytest.raises(ValueError, match="init=\\{'k'"):
        hp.replay(ds, W0, param="diag", steps=1)


def test_kit_gd_runs_the_new_algorithms_in_both_precisions():
    ds, W0 = _case(3)
    mpk = Kit("mp", 50)
    for kw in ({"algo": "nsd", "norm": "spec", "schedule": "rsqrt"}, {"algo": "adam", "adam_betas": (0.8, 0.99)}):
        f64 = Kit().gd(ds, lr=0.1, steps=30, W0=W0, **kw)
        with mpk.context():
            run = mpk.gd(ds, lr=0.1, steps=30, W0=W0, **kw)
        assert isinstance(run.W[0, 0], mpmath.mpf) and run.steps == f64.steps == 30
        assert np.linalg.norm(hp.to_numpy(run.W.tolist()) - f64.W) <= AGREE * np.linalg.norm(f64.W)
    many = Kit().gd(ds, algo="nsd", norm="linf", lr=0.1, steps=5, W0=np.stack([W0, -W0]))
    assert many.W.shape == (2, 4, 4)
    with pytest.raises(ValueError):
        Kit().gd(ds, algo="nsd", norm="fro", lr=0.1, steps=5, K0=W0, Q0=W0)


@pytest.mark.slow
@pytest.mark.parametrize("algo,kw", CASES, ids=[f"{a}-{'-'.join(map(str, k.values()))}" for a, k in CASES])
def test_replay_agrees_over_2000_steps(algo, kw):
    for seed in (1, 2):
        ds, W0 = _case(seed)
        _agree(ds, W0, algo, kw, steps=2000, lr=0.5 if algo == "md" else 0.1, min_compared=500)
