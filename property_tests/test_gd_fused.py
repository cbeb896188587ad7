r"""The fused CPU kernel (:mod:`attsvm.gd.fused`, issue 15): its ``exp`` against 50-digit mpmath, its runs against
the torch kernel and the 50-digit replay, its independence of the batch and the threads, its stop rules, records
and progress, the ``kernel`` option, and that a fused run never imports torch."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import mpmath
import numba
import numpy as np
import pytest

from attsvm import generate, highprec, model
from attsvm.data import Dataset, subset
from attsvm.errors import InputError
from attsvm.gd import fused, run, simd
from attsvm.tolerances import tol


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# ---------------------------------------------------------------------- exp
def _ulps(got: float, x: float) -> float:
    """|got - e^x| in units of the last place of the correctly rounded e^x (50-digit mpmath)."""
    with mpmath.workdps(50):
        ref = mpmath.exp(mpmath.mpf(x))
        near = float(ref)
        ulp = math.ulp(near) if near != 0 else 2.0**-1074
        return float(abs(mpmath.mpf(got) - ref) / ulp)


def test_exp_is_within_one_ulp_of_50_digit_mpmath_everywhere_it_is_used():
    rng = np.random.default_rng(0)
    xs = np.concatenate(
        [
            rng.uniform(-745.1, 709.0, 3000),
            rng.uniform(-1.0, 1.0, 1000),
            -rng.exponential(1e-6, 200),
            rng.uniform(-745.1, -708.0, 500),  # subnormal results
            np.array([-0.0, 1e-300, -1e-300, math.log(2), -math.log(2), 0.5 * math.log(2), -708.39, -744.4]),
        ]
    )
    got = fused.exp_array(xs)
    worst = max(_ulps(float(g), float(x)) for g, x in zip(got, xs))
    assert worst < 1.0, worst


def test_exp_special_values():
    got = fused.exp_array(np.array([0.0, -0.0, -np.inf, -746.0, -800.0, -1e300, -745.2]))
    assert got[0] == 1.0 and got[1] == 1.0  # the heaviest pair of the log-domain weights gets exactly e^0
    assert np.all(got[2:] == 0.0)
    assert fused.exp_array(np.array([-745.0]))[0] == 5e-324  # the smallest subnormal, correctly rounded


def test_a_wrong_coefficient_breaks_the_one_ulp_check():
    """The ulp check above can fail: the kernel's formula (:func:`attsvm.gd.simd.exp_scalar_formula`, the same
    operations in plain Python) with one polynomial coefficient off in its 8th digit is off by more than an ulp."""
    xs = np.linspace(-20.0, 20.0, 401)
    q = simd.EXP_Q
    assert max(_ulps(simd.exp_scalar_formula(float(x), q), float(x)) for x in xs) < 1.0
    bad = (q[0], q[1] * (1 + 1e-8), *q[2:])
    assert max(_ulps(simd.exp_scalar_formula(float(x), bad), float(x)) for x in xs) > 1.0


def test_the_vector_exp_is_the_scalar_formula():
    """The compiled lanes compute :func:`~attsvm.gd.simd.exp_scalar_formula` bit for bit (normal and subnormal
    results: ``ldexp`` rounds once, as the kernel's integer rounding does), so the planted-coefficient check above
    speaks for the kernel."""
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.uniform(-700.0, 700.0, 999), rng.uniform(-745.2, -708.0, 999)])
    got = fused.exp_array(xs)
    assert all(g == simd.exp_scalar_formula(float(x)) for g, x in zip(got, xs))


# ---------------------------------------------------------------------- fma
@numba.njit
def _fma_lanes(a, b, c):
    """simd.fma of three (m, 8) arrays, vector by vector."""
    out = np.empty_like(a)
    for j in range(a.shape[0]):
        simd.store(out, j, simd.fma(simd.load(a, j), simd.load(b, j), simd.load(c, j)))
    return out


def test_fma_rounds_once_in_every_lane():
    """``simd.fma`` is $ab+c$ rounded once (IEEE fusedMultiplyAdd), lane by lane: the exact rational $ab+c$ rounded
    to nearest (``float`` of a ``Fraction``), and not the product rounded and then the sum (which differs on these
    inputs, so a mul+add in its place fails here)."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 256, 8))
    c = -a * b * (1 + rng.uniform(-1e-3, 1e-3, (256, 8)))  # near-cancellation: the product's rounding shows
    got = _fma_lanes(a, b, c).ravel()
    exact = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())]
    assert np.array_equal(got, np.array(exact))
    assert np.count_nonzero((a * b + c).ravel() != np.array(exact)) > 100  # two roundings give other bits here
    assert all(simd.fma_scalar(x, y, z) == e for x, y, z, e in zip(a.ravel()[:64], b.ravel(), c.ravel(), exact))


# ---------------------------------------------------------------------- log, log1p
@numba.njit
def _lanes_apply(x, which):
    """simd.log (``which`` 0) or simd.log1p (1) of a 1-d array, 8 entries per vector (padded with ones)."""
    n = x.shape[0]
    m = -(-n // 8)
    buf = np.ones((m, 8))
    out = np.empty((m, 8))
    for j in range(n):
        buf[j // 8, j % 8] = x[j]
    for c in range(m):
        v = simd.load(buf, c)
        simd.store(out, c, simd.log(v) if which == 0 else simd.log1p(v))
    return out.reshape(-1)[:n].copy()


def _ulps_of(got: float, ref) -> float:
    near = float(ref)
    ulp = math.ulp(near) if near != 0 else 2.0**-1074
    return float(abs(mpmath.mpf(got) - ref) / ulp)


def test_log_and_log1p_are_within_one_ulp_of_50_digit_mpmath():
    """The kernel's vector log (of sums of exps in [1, T] and of the loss terms, any positive float) and log1p (of
    values in [0, 1]) against 50-digit mpmath, and their special values."""
    rng = np.random.default_rng(3)
    xs = np.concatenate(
        [rng.uniform(1, 8, 3000), np.exp(rng.uniform(-700, 700, 2000)), 1 + rng.uniform(-1e-6, 1e-6, 500),
         rng.uniform(0.5, 2, 1000), np.array([1.0, 2.0, 0.5, math.sqrt(2), 1e-310, 5e-324, 1.7976931348623157e308])]
    )  # fmt: skip
    ys = np.concatenate([rng.uniform(0, 1, 3000), np.exp(rng.uniform(-745, 0, 2000)), np.array([0.0, 1.0, 5e-324])])
    with mpmath.workdps(50):
        worst_log = max(_ulps_of(g, mpmath.log(mpmath.mpf(x))) for g, x in zip(_lanes_apply(xs, 0), xs))
        worst_log1p = max(_ulps_of(g, mpmath.log1p(mpmath.mpf(y))) for g, y in zip(_lanes_apply(ys, 1), ys))
    assert worst_log < 1.0 and worst_log1p < 1.0, (worst_log, worst_log1p)
    special = _lanes_apply(np.array([0.0, np.inf, -1.0, np.nan, 1.0]), 0)
    assert special[0] == -np.inf and special[1] == np.inf and np.isnan(special[2]) and np.isnan(special[3])
    assert special[4] == 0.0 and _lanes_apply(np.array([0.0]), 1)[0] == 0.0


# ---------------------------------------------------------------------- against the torch kernel
CASES = {
    "W": dict(param="W"),
    "KQ": dict(param="KQ"),
    "KQ-random": dict(param="KQ", init="random", lr=0.05),
    "KQ-narrow": dict(param="KQ", init="random", m=3),
    "exponential": dict(param="W", loss="exponential"),
    "correlation": dict(param="KQ", init="random", loss="correlation"),
    "rsqrt": dict(param="W", schedule="rsqrt", lr=0.5),
    "lr-per-run": dict(param="W", lr=np.linspace(0.05, 0.5, 5)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fused_and_torch_kernels_agree_to_rounding(name):
    ds = generate.paper_law(4, 5, 3, seed=2, B=5)
    kw = dict(steps=60, **CASES[name])
    a, b = run(ds, kernel="fused", **kw), run(ds, kernel="torch", **kw)
    for f in ("W", "K", "Q", "loss", "norm", "max_softmax"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            assert _rel(x, y) <= tol("batch_rtol"), f
    fin = np.isfinite(b.log_softmax)
    assert np.array_equal(fin, np.isfinite(a.log_softmax))
    assert _rel(a.log_softmax[fin], b.log_softmax[fin]) <= tol("batch_rtol")
    for f in ("selection", "stuck", "steps", "nonfinite_step"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.stop_reason == b.stop_reason and a.settings == b.settings


def test_masked_and_next_token_data_agree_with_the_torch_kernel():
    from attsvm.strategies import batch

    for ds in [*batch("causal", 2, 3, n=3, T=4, d=3), *batch("ntp", 1, 2)]:
        a, b = run(ds, kernel="fused", steps=40), run(ds, kernel="torch", steps=40)
        assert _rel(a.W, b.W) <= tol("batch_rtol")
        assert np.array_equal(a.selection, b.selection) and a.stop_reason == b.stop_reason


def test_a_planted_wrong_step_is_caught_by_the_comparison():
    """The comparison above fails on a kernel off by one rounding-sized relative 1e-9 in its step size."""
    ds = generate.paper_law(4, 5, 3, seed=2, B=5)
    b = run(ds, kernel="torch", steps=60)
    a = run(ds, kernel="fused", steps=60, lr=0.1 * (1 + 1e-9))
    assert _rel(a.W, b.W) > tol("batch_rtol")


# ---------------------------------------------------------------------- against the 50-digit replay
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_fused_runs_match_the_50_digit_replay(param):
    ds = generate.paper_law(3, 4, 3, seed=5)
    kw = dict(param=param, steps=50, lr=0.2)
    if param == "KQ":
        kw["init"] = "random"
    res = run(ds, kernel="fused", **kw)
    init = {"W": np.zeros((3, 3))} if param == "W" else None
    if param == "KQ":
        from attsvm.gd import initial_params

        init = {k: v[0] for k, v in initial_params("KQ", "random", 1, 3, 3, 0, None).items()}
    rep = highprec.replay(ds, init["W"] if param == "W" else init, param=param, lr=0.2, steps=50)
    for k in ("W",) if param == "W" else ("K", "Q"):
        assert _rel(getattr(res, k)[0], rep.array(k)) <= tol("replay_rtol"), k


# ---------------------------------------------------------------------- independence of batch and threads
def test_a_data_set_gets_the_same_bits_alone_in_any_batch_and_on_any_threads():
    from attsvm.gd import initial_params

    ds = generate.paper_law(3, 4, 3, seed=9, B=37)  # two groups of lanes, the second one padded
    one_init = initial_params("KQ", "random", 37, 3, 3, 0, None)
    for kw in (dict(param="W"), dict(param="KQ", init="random")):
        one = run(ds, kernel="fused", steps=80, threads=1, **kw)
        three = run(ds, kernel="fused", steps=80, threads=3, **kw)
        for f in ("W", "K", "Q", "loss", "log_softmax", "steps"):
            x, y = getattr(one, f), getattr(three, f)
            assert (x is None and y is None) or np.array_equal(x, y), f
        for b in (0, 17, 33, 36):  # alone, from the same initial point (a random one is drawn for the batch)
            init = {"init": {k: one_init[k][b] for k in one_init}} if kw["param"] == "KQ" else {}
            alone = run(ds[b], kernel="fused", steps=80, **{**kw, **init})
            assert np.array_equal(alone.W[0], one.W[b]), b
        init = {"init": {k: v[::-1].copy() for k, v in one_init.items()}} if kw["param"] == "KQ" else {}
        rev = run(subset(ds, np.arange(36, -1, -1)), kernel="fused", steps=80, **{**kw, **init})
        assert np.array_equal(rev.W[::-1], one.W)


# ---------------------------------------------------------------------- stop rules
def test_a_zero_gradient_stops_underflow_at_once_as_in_torch():
    base = generate.paper_law(3, 4, 3, seed=1)
    X = np.array(base.X)
    X[:, :, :] = X[:, :1, :]  # every token of an input equal: equal scores, no pair, the gradient is exactly 0
    ds = Dataset(X=X, Y=base.Y, Z=base.Z, v=base.v, alpha=np.zeros(3, dtype=int))
    for kernel in ("fused", "torch"):
        r = run(ds, kernel=kernel, steps=10)
        assert r.stop_reason == ["underflow"] and r.steps.tolist() == [0] and np.all(r.W == 0), kernel


def test_target_corr_stops_at_the_same_step_as_torch():
    ds = generate.paper_law(4, 5, 3, seed=2, B=5)
    target = run(ds, kernel="torch", steps=400).W  # the direction the runs approach
    kw = dict(steps=400, targets={"t": target}, stop_corr=1e-3)
    a, b = run(ds, kernel="fused", **kw), run(ds, kernel="torch", **kw)
    assert b.stop_reason.count("target_corr") >= 3
    assert a.stop_reason == b.stop_reason and np.array_equal(a.steps, b.steps)


def test_an_overflowing_initial_point_is_refused_as_in_torch():
    ds = generate.paper_law(3, 4, 3, seed=1)
    u0 = np.mean(model.scores(np.array(ds.X), np.array(ds.Y), np.array(ds.v)), axis=-1)  # u_i at W = 0
    assert u0.min() < 0
    ds = Dataset(X=np.array(ds.X), Y=ds.Y, Z=ds.Z, v=np.array(ds.v) * (1000.0 / -u0.min()))  # e^{-u} = e^{1000}
    msgs = []
    for kernel in ("fused", "torch"):
        with pytest.raises(InputError) as exc:
            run(ds, kernel=kernel, loss="exponential", steps=3)
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1] and "loss overflowed at the initial point" in msgs[0]


# ---------------------------------------------------------------------- records and progress
#: every field of a GDResult that reports a number of the run
FINAL_FIELDS = ("W", "K", "Q", "p", "v", "loss", "norm", "selection", "log_softmax", "max_softmax", "stuck", "steps",
                "nonfinite_step")  # fmt: skip


def _same(x, y) -> bool:
    return (x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y, equal_nan=True))


def test_records_and_progress_change_no_number_and_records_are_the_torch_summaries():
    ds = generate.paper_law(3, 4, 3, seed=1, B=3)
    for kw in ({"param": "W"}, {"param": "KQ", "init": "random"}):
        calls: list[tuple[int, int]] = []
        a = run(ds, steps=60, kernel="fused", **kw)
        b = run(ds, steps=60, kernel="fused", progress=lambda k, n, seen=calls: seen.append((k, n)), **kw)
        c = run(ds, steps=60, kernel="fused", record_every=7, record_params=True, targets={"t": np.eye(3)}, **kw)
        t = run(ds, steps=60, kernel="torch", record_every=7, record_params=True, targets={"t": np.eye(3)}, **kw)
        for f in FINAL_FIELDS:  # every reported number, bit for bit (one summary definition for rows and results)
            x, y, z = getattr(a, f), getattr(b, f), getattr(c, f)
            assert _same(x, y) and _same(x, z), f
        assert a.stop_reason == b.stop_reason == c.stop_reason and a.nonfinite == c.nonfinite
        u = run(ds, steps=60, kernel="torch", **kw)  # the torch kernel: recording changes no number either
        assert all(_same(getattr(u, f), getattr(t, f)) for f in FINAL_FIELDS), [
            f for f in FINAL_FIELDS if not _same(getattr(u, f), getattr(t, f))
        ]
        ks = [k for k, _ in calls]
        assert ks[0] == 0 and ks[-1] == 60 and ks == sorted(set(ks)) and {n for _, n in calls} == {60}
        assert c.trajectory["step"].tolist() == t.trajectory["step"].tolist() == list(range(0, 61, 7))
        for key, rows in t.trajectory.items():
            if rows.dtype == bool or key in ("step", "selection"):
                assert np.array_equal(c.trajectory[key], rows), key
            else:
                ok = np.isfinite(rows)
                assert _rel(c.trajectory[key][ok], rows[ok]) <= tol("batch_rtol"), key
        # the recorded final row is the run's final fields bit for bit (what the shards' padding relies on)
        for kernel in ("fused", "torch"):
            r = run(ds, steps=60, kernel=kernel, record_every=12, **kw)
            assert r.trajectory["step"][-1] == 60
            for key in ("loss", "norm", "selection", "max_softmax", "stuck"):
                assert np.array_equal(r.trajectory[key][-1], getattr(r, key)), (kernel, key)


def test_progress_when_every_run_stops_early():
    ds = generate.paper_law(3, 4, 3, seed=1, B=3)
    calls = []
    res = run(ds, steps=60, kernel="fused", init="random", param="KQ", targets={"t": np.eye(3)}, stop_corr=2.0,
              progress=lambda k, n: calls.append(k))  # fmt: skip
    assert calls == [0] and res.stop_reason == ["target_corr"] * 3


# ---------------------------------------------------------------------- the kernel option
def test_kernel_option():
    ds = generate.paper_law(3, 4, 3, seed=1)
    with pytest.raises(InputError, match="kernel must be one of"):
        run(ds, kernel="numba", steps=1)
    for kw in (dict(algo="gd"), dict(param="p"), dict(ridge=1e-3), dict(dtype="float32"), dict(grad_eps=1e-9)):
        with pytest.raises(InputError, match="kernel 'fused' computes"):
            run(ds, kernel="fused", steps=1, **kw)
        run(ds, steps=1, **kw)  # auto: the torch kernel
    with pytest.raises(InputError, match="threads must be a positive integer"):
        run(ds, threads=0, steps=1)


def test_a_fused_run_does_not_import_torch_and_caches_outside_the_package(tmp_path):
    """No torch; the compiled kernel is cached in the user's cache folder (here ``$XDG_CACHE_HOME``), not in the
    installed package (an uninstall would leave numba's files there as a namespace package shadowing a later
    install), and numba's global cache setting is left as it was."""
    code = (
        "import sys, numba\nfrom attsvm import generate\nfrom attsvm.gd import run\n"
        "r = run(generate.paper_law(3, 4, 3, seed=1, B=2), param='KQ', steps=5)\n"
        "print('torch' in sys.modules, r.stop_reason, repr(numba.config.CACHE_DIR))"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "False ['steps', 'steps'] ''"
    assert list((tmp_path / "attsvm" / "numba").rglob("fused._groups-*.nbi"))
    package = Path(fused.__file__).parent
    assert package.resolve() not in fused.cache_dir().resolve().parents
