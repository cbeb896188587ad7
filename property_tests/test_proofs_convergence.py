"""The §4 convergence claims of ``proofs/claims/`` and their helpers (:mod:`attsvm.claims.gdcheck`).

* helpers: the log-domain gradient equals the closed form (independent computation); the numpy reference
  stepper equals the torch engine; a float64 stretch equals its 50-digit mpmath replay; the slope of a
  trapped input's $\\log s_{\\mathrm{opt}}$ equals the slope predicted by its SVM deficit;
* ``gd-global-equal-scores``: the pinned counterexample for the literal statement (plain GD,
  $\\eta=1/L_W$, $W_0=0$) is trapped, confirmed at 50 digits;
* every §4 claim through :func:`attsvm.claims.run_claim` with a fixed seed and explicit example count,
  verdict checked against the expectation (open problems: an allowed set, with a reason).
"""

from __future__ import annotations

import numpy as np
import pytest

from attsvm.claims import discover, gdcheck, run_claim
from attsvm.generate import equal_scores, paper_law
from attsvm.model import Arrays, grad_W
from attsvm.paths import proofs_dir
from attsvm.tolerances import tol


def _pinned():
    """The pinned Assumption-B counterexample: data set 17 of ``equal_scores(4,5,3,seed=0,B=24)``."""
    return equal_scores(4, 5, 3, seed=0, B=24)[17]


# ---------------------------------------------------------------------- helpers
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_log_gradient_equals_closed_form(seed):
    ds = paper_law(3, 4, 3, seed=seed, B=5)
    W = np.random.default_rng(seed).standard_normal((5, 3, 3)) * 2.0
    lg = gdcheck.log_gradient(Arrays.of(ds), W)
    G = np.exp(lg.log_scale)[:, None, None] * lg.G
    ref = grad_W(ds, W)
    assert np.max(np.abs(G - ref)) <= tol("grad_rtol") * np.max(np.abs(ref))


def test_log_gradient_survives_underflow():
    # far along a direction the float gradient is exactly 0, the log-domain direction is not
    ds = paper_law(2, 3, 3, seed=4)
    W = gdcheck.ngd_reference(ds, np.zeros((3, 3)), 500).W
    W = W / np.linalg.norm(W) * 3000.0
    assert np.all(grad_W(ds, W) == 0.0)
    lg = gdcheck.log_gradient(Arrays.of(ds), W)
    assert np.isfinite(lg.log_scale) and lg.log_scale < -700 and np.linalg.norm(lg.G) > 0


def test_reference_stepper_equals_engine():
    ds = equal_scores(3, 4, 3, seed=5, B=4)
    h = {"algo": "ngd", "lr": 0.1, "steps": 300}
    ref = gdcheck.run_W(ds, h, record_every=100)
    eng = gdcheck.run_W(ds, dict(h, engine="torch"), record_every=100)
    assert np.max(np.abs(eng.W - ref.W)) <= tol("replay_rtol") * np.max(np.abs(ref.W))
    assert np.max(np.abs(eng.Ws - ref.Ws)) <= tol("replay_rtol") * np.max(np.abs(ref.W))
    assert np.max(np.abs(eng.log_s[-1] - ref.log_s[-1])) <= tol("replay_rtol") * np.max(np.abs(ref.log_s[-1]))


@pytest.mark.parametrize("normalised", [True, False])
def test_float64_stretch_equals_mpmath_replay(normalised):
    ds = paper_law(2, 3, 2, seed=7)
    W0 = np.random.default_rng(7).standard_normal((2, 2)) * 3.0
    step = gdcheck.ngd_reference if normalised else gdcheck.gd_reference
    ref = step(ds, W0, 8, lr=0.1, record_every=8)
    mp = gdcheck.mp_replay(ds, W0, 8, lr=0.1, normalised=normalised, dps=50)
    assert np.linalg.norm(mp["W"] - ref.W) <= tol("replay_rtol") * np.linalg.norm(ref.W)


def test_trapped_slope_matches_deficit_prediction():
    # d log s_opt / d||W|| of the trapped input = -deficit / ||W'|| (THEORY §4, gd-global-equal-scores)
    ds = _pinned()
    r = gdcheck.ngd_reference(ds, np.zeros((3, 3)), 3000, record_every=300)
    t = gdcheck.trap_analysis(ds, r.W, r.log_s[-1])
    assert t.wrong == [3] and t.trapped
    i = t.wrong[0]
    half = len(r.steps) // 2
    slope = np.polyfit(r.norm[half:], r.log_s[half:, i, ds.opt[i]], 1)[0]
    pred = -t.deficit[0] / np.linalg.norm(t.W_rest)
    assert abs(slope - pred) <= tol("trap_slope_rtol") * abs(pred)
    share = np.polyfit(r.norm[half:], r.log_share[half:, i], 1)[0]
    assert abs(share - (pred + 1 / np.linalg.norm(t.W_rest))) <= tol("trap_slope_rtol") * abs(pred)


def test_trap_sets_contain_the_observed_trap():
    sets = gdcheck.trap_sets(_pinned())
    assert any(S == [3] for S, _ in sets)
    assert all(min(dz) > 1.0 for _, dz in sets)


def test_literal_statement_counterexample_plain_gd_zero_init():
    """Plain GD, eta = 1/L_W, W_0 = 0 on bit-exact Assumption-B data: input 3 is trapped (deficit 3.29 > 1)."""
    ds = _pinned()
    from attsvm.model import grad_W as gW

    Wmm = gdcheck.wmm_single(ds)
    assert float(np.sum(gW(ds, np.zeros((3, 3))) * Wmm)) < 0  # the initial gradient is "favourable"
    r = gdcheck.gd_reference(ds, np.zeros((3, 3)), 30000, record_every=15000)
    h = {"corr_trap": 0.9, "log_s_trap": -5.0}
    m, trapped, t = gdcheck._trap_margin(ds, r.W, r.log_s[-1], r.log_s[1], float(r.norm[-1]), h)
    assert trapped and m < 0 and t.wrong == [3]
    hp = gdcheck.confirm_trap(
        ds, {"W_end": r.W.tolist(), "wrong_inputs": t.wrong}, {"algo": "gd", "lr": "1/L", "replay_steps": 10}
    )
    assert hp["mp_vs_float64_rel"] <= tol("replay_rtol") and hp["trapped"] and hp["share_falling"]


# ---------------------------------------------------------------------- the claims at CI budget
# id -> (allowed verdicts, explicit examples/runs at CI budget)
EXPECTED = {
    "rp-frobenius": ({"verified"}, 4),
    "rp-nuclear": ({"verified"}, 3),
    "gd-norm-diverges": ({"verified"}, 6),
    "gd-local-cone": ({"verified"}, 6),
    "gd-local-cone-control": ({"refuted"}, 5),  # expected-false negative control
    "gd-global-equal-scores": ({"refuted"}, 24),  # settled: refuted, confirmed at 50 digits
    "gd-global-equal-scores-no-trap": ({"verified", "inconclusive"}, 16),  # open: never refuted so far
    "gd-selects-locally-optimal": ({"verified", "inconclusive"}, 24),
    "kq-gd-nuclear": ({"verified", "inconclusive"}, 12),  # open problem
    "seq-causal-gd": ({"verified"}, 4),
    "ngd-rate": ({"verified"}, 24),
    "prompt-gd-pmm": ({"verified"}, 3),
    "mirror-descent-lq": ({"verified", "inconclusive"}, 3),  # 1/log t: may not converge within a CI budget
    # joint (v,p): runs with bounded p (outside the regime) or in transit via p^mm are undecided; the rest pass
    "joint-vp-relaxed": ({"verified"}, 4),
    # E4 rule: ~8 % of runs informative; pass rate ~0.77-0.83 sits at the claimed 0.8 -> inconclusive
    "gensvm-equivalence": ({"inconclusive"}, 200),
    "rp-local": ({"verified"}, 5),  # cone-restricted path (engine), started inside the cone
}


@pytest.fixture(scope="module")
def claims():
    return {c.id: c for c in discover([proofs_dir() / "claims"])}


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_claim_verdict(claims, cid):
    allowed, n = EXPECTED[cid]
    assert cid in claims, f"claim file for {cid} not discovered"
    res = run_claim(claims[cid], examples=n, seed=0, budget="ci")
    assert res.error is None, res.error
    assert res.verdict in allowed, f"{cid}: {res.verdict} ({res.reason})"
    assert res.reason
    if res.verdict == "refuted":
        assert res.confirmed
    if cid == "gd-global-equal-scores":
        hp = res.confirm_outcome.detail
        assert hp["mp_vs_float64_rel"] <= tol("replay_rtol") and min(hp["deficit"]) > 1.0
    if cid == "gd-selects-locally-optimal":
        assert res.rate["successes"] >= 0.9 * res.rate["runs"]
    if cid == "gensvm-equivalence":
        assert res.rate["decided"] >= 15, res.rate  # enough accepted runs for the Wilson interval to decide
    if cid == "ngd-rate":
        assert 1.5 <= res.detail["outcome"]["ngd_exponent_median"] <= 2.5


# ---------------------------------------------------------------------- confirmers of rp-local / joint-vp-relaxed
def test_rp_local_confirmer_confirms_a_forced_failure(claims):
    """With an unreachable ``shrink`` the float64 failure is real: the 50-digit e_R agree and the path point is
    a constrained stationary point (residual small), so the confirmer returns ok=False."""
    from attsvm.claims.case import Case
    from attsvm.strategies import batch

    c = claims["rp-local"]
    case = Case(data=batch("locally_optimal", 1, 1, n=2, T=3, d=2)[0], hypotheses=dict(c.case_hypotheses, shrink=0.0))
    out = c.conclusion(case)
    assert not out.ok and out.margin < 0
    hp = c.confirmer(case, out)
    assert hp.inconclusive is None and not hp.ok
    assert abs(hp.margin - out.margin) <= 1e-9 and hp.detail["stationarity_residual"] <= 1e-2


def test_joint_vp_mpmath_replay_equals_engine(claims):
    """The confirmer's 50-digit (v,p) replay (gradients from the definition) equals the torch engine."""
    import importlib

    import mpmath as mp

    from attsvm import gd
    from attsvm.strategies import batch

    mod = importlib.import_module(claims["joint-vp-relaxed"].conclusion.__module__)
    ds = batch("prompt", 1, 2, n=3, T=3, d=3)[0]
    rng = np.random.default_rng(2)
    v0, p0 = rng.standard_normal(3) * 5, rng.standard_normal(3) * 5
    ref = gd.run(ds, param="vp", algo="ngd", lr=0.1, steps=6, init={"v": v0, "p": p0})
    with mp.workdps(50):
        v, p = mod._mp_vp_replay(ds, v0, p0, 6)
    a = np.array([float(x) for x in (*v, *p)])
    b = np.concatenate([np.asarray(ref.v).ravel(), np.asarray(ref.p).ravel()])
    assert np.linalg.norm(a - b) <= tol("replay_rtol") * np.linalg.norm(b)
