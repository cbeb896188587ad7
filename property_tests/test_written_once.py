"""Written once: a conclusion computed through ``case.kit`` is confirmed automatically at high precision.

Checks (1) the kit's two precisions agree helper by helper (float64 engine code against the independent 50-digit
code of :mod:`attsvm.highprec`), (2) the automatic confirmation confirms a planted false statement, clears a
planted float64 failure of a true one, and refuses (``unconfirmed``) a conclusion that bypasses the kit, raises on
``mpf`` arrays or whose margin changes sign with the precision, (3) the shipped example and the ported built-in
claims have no hand-written confirmer."""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np
import pytest

from attsvm import kit, strategies
from attsvm.claims import Outcome, discover
from attsvm.claims.case import Case
from attsvm.claims.confirm import confirm
from attsvm.claims.runner import run_claim

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures" / "written_once"
PORTED = (
    "smoothness-bound",
    "no-stationary-overparam",
    "nuclear-variational",
    "rowspace-invariance",
    "kq-balancedness",
    "ntp-logloss-convex",
    "smoothness-bound-region",
    "cone-descent",
    "cone-descent-every-input",
    "cone-descent-tail",
    "cone-descent-radial",
    "cone-invariance",
    "no-stationary-equal-scores",
    "kq-heads-conservation",
)
#: expected-false controls written once (no confirmer): their float64 failure must be *confirmed* automatically
CONTROLS = (
    "kq-balancedness-control",
    "ntp-logloss-convex-control",
    "cone-descent-control",
    "kq-heads-conservation-control",
)


def _data(name="paper", seed=3, **sizes):
    return strategies.batch(name, 1, seed=seed, **sizes)[0]


HP = kit.Kit("mp", 50)
F = kit.FLOAT64


def _close(a, b, rtol):
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=float)
    a = np.array([float(x) for x in a.ravel()]).reshape(a.shape)
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    assert a.shape == b.shape
    assert np.max(np.abs(a - b)) <= rtol * scale, (a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kit_precisions_agree(seed):
    ds = _data(seed=seed, n=2, T=3, d=3)
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(3, 3))
    K, Q = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    _close(HP.logits(ds, W), F.logits(ds, W), 1e-14)
    _close(HP.softmax(ds, W), F.softmax(ds, W), 1e-14)
    _close(HP.log_softmax(F.logits(ds, W)), F.log_softmax(F.logits(ds, W)), 1e-13)
    _close([HP.loss(ds, W)], [F.loss(ds, W)], 1e-14)
    _close(HP.grad_W(ds, W), F.grad_W(ds, W), 1e-13)
    for a, b in zip(HP.grad_KQ(ds, K, Q), F.grad_KQ(ds, K, Q)):
        _close(a, b, 1e-13)
    _close(HP.hessian_W(ds, W), F.hessian_W(ds, W), 1e-12)
    _close([HP.smoothness(ds)], [F.smoothness(ds)], 1e-14)
    _close(HP.singular_values(W), F.singular_values(W), 1e-14)
    _close([HP.nuclear_norm(W)], [F.nuclear_norm(W)], 1e-14)
    _close(HP.inv(W), F.inv(W), 1e-10)
    _close(HP.projector(ds.Z), F.projector(ds.Z), 1e-13)
    _close(HP.eigvalsh(W), F.eigvalsh(W), 1e-13)
    U, S, Vt = HP.svd(W)
    with HP.context():  # arithmetic between results runs at the ambient precision
        assert HP.norm(U * S @ Vt - HP.array(W)) < 1e-40  # the 50-digit SVD reconstructs W
    mm_f, mm_h = F.wmm(ds), HP.wmm(ds)
    assert mm_h.how == "exact" and mm_f.feasible and mm_h.feasible
    _close(mm_h.W, mm_f.W, 1e-8)
    assert mm_h.support == mm_f.support
    with HP.context():
        m = HP.margins(ds, mm_h.W)
        assert min(x for x in m.ravel()) > 1 - mpmath.mpf(10) ** -40  # the exact certificate is feasible
    assert HP.locally_optimal(ds) == F.locally_optimal(ds)
    run_f = F.gd(ds, algo="ngd", lr=0.1, steps=40)
    run_h = HP.gd(ds, algo="ngd", lr=0.1, steps=40)
    _close(run_h.W, run_f.W, 1e-10)
    kq_f = F.gd(ds, algo="ngd", lr=0.05, steps=30, K0=K, Q0=Q)
    kq_h = HP.gd(ds, algo="ngd", lr=0.05, steps=30, K0=K, Q0=Q)
    _close(kq_h.W, kq_f.W, 1e-10)


def test_kit_precisions_catch_a_planted_difference():
    """The agreement check above can fail: a planted 1e-9 error in one entry is caught."""
    ds = _data(n=2, T=3, d=3)
    W = np.eye(3)
    G = F.grad_W(ds, W).copy()
    G[0, 0] += 1e-9 * max(1.0, np.max(np.abs(G)))
    with pytest.raises(AssertionError):
        _close(HP.grad_W(ds, W), G, 1e-13)


def test_high_precision_kit_keeps_mpmath_numbers():
    ds = _data(n=1, T=2, d=2)
    assert kit.is_high_precision(HP.loss(ds, np.eye(2)))
    assert all(kit.is_high_precision(x) for x in HP.grad_W(ds, np.eye(2)).ravel())
    assert not kit.is_high_precision(F.loss(ds, np.eye(2)))
    assert HP.tol("rounding") == 1e-30 and F.tol("rounding") > 1e-20
    with pytest.raises(TypeError):
        np.exp(HP.array([1.0, 2.0]))  # numpy's exp on mpf arrays: an error, never a silent float64


def _check(path, **kw):
    (c,) = discover([path])
    return c, run_claim(c, budget="ci", **kw)


def test_planted_false_statement_is_refuted_and_confirmed_automatically():
    c, r = _check(FIX / "false_smoothness.py")
    assert c.confirmer is None
    assert r.verdict == "refuted" and r.confirmed and r.matches
    assert r.confirmed_by == "automatic" and r.confirmed_how == "rigorous"  # balls decided: a proved sign
    det = r.confirm_outcome.detail
    assert det["margin_ball"].startswith("[-") and det["bits"] in (256, 1024)
    assert r.sizes is not None and set(r.sizes) == {"n", "T", "d"}


@pytest.mark.parametrize(
    "name, why",
    [
        ("bypass_kit.py", "does not compute through case.kit"),
        ("unstable.py", "not stable"),
    ],
)
def test_automatic_confirmation_refuses_what_it_cannot_decide(name, why):
    _, r = _check(FIX / name)
    assert r.verdict == "inconclusive" and r.unconfirmed and not r.matches
    assert why in r.reason


def test_numpy_exp_on_balls_stays_rigorous_and_raises_on_mpmath():
    """``np.exp`` of a ball array calls arb's own ``exp`` (it stays in the confirming precision): the ball re-run
    decides; the same code on the mpmath kit raises (test_high_precision_kit_keeps_mpmath_numbers)."""
    _, r = _check(FIX / "numpy_exp.py")
    assert r.verdict == "refuted" and r.confirmed and r.confirmed_how == "rigorous", r.reason


def test_written_once_example_is_refuted_and_confirmed():
    c, r = _check(ROOT / "examples" / "conjectures" / "written_once.py")
    assert c.confirmer is None
    assert r.verdict == "refuted" and r.confirmed and r.confirmed_by == "automatic" and r.matches


@pytest.mark.parametrize("claim_id", PORTED)
def test_ported_claims_confirm_automatically(claim_id):
    """No hand-written confirmer; on a real case, a planted float64 failure is *cleared* by the automatic re-run at
    50 and 100 digits (the statements are true), so the high-precision path of each conclusion really runs."""
    (c,) = [x for x in discover(None) if x.id == claim_id]
    assert c.confirmer is None
    name, params = strategies.split_hypotheses(c.hypotheses)
    fixed = {k: (v[0] if isinstance(v, tuple) else v) for k, v in params.items()}
    ds = strategies.batch(name, 1, seed=5, **fixed)[0]
    case = Case(data=ds, hypotheses=c.case_hypotheses, seed=5, budget=0.2)
    out = c.conclusion(case)
    assert out.ok and not out.inconclusive
    planted = Outcome(ok=False, margin=-1.0, detail=out.detail)
    conf = confirm(c, case, planted)
    assert conf.status == "cleared" and conf.by == "automatic", conf.reason
    assert "margin_ball" in conf.outcome.detail or "margin_50" in conf.outcome.detail


@pytest.mark.parametrize("claim_id", CONTROLS)
def test_controls_confirm_automatically(claim_id):
    """An expected-false control without a confirmer: on a real case its float64 failure is *confirmed* by the
    automatic re-run at 50 and 100 digits (and a planted pass of the same case would not be)."""
    (c,) = [x for x in discover(None) if x.id == claim_id]
    assert c.confirmer is None and c.origin == "expected-false"
    name, params = strategies.split_hypotheses(c.hypotheses)
    fixed = {k: (v[-1] if isinstance(v, tuple) else v) for k, v in params.items()}
    ds = strategies.batch(name, 1, seed=5, **fixed)[0]
    case = Case(data=ds, hypotheses=c.case_hypotheses, seed=5, budget=0.2)
    out = c.conclusion(case)
    assert not out.ok and not out.inconclusive, out.detail
    conf = confirm(c, case, out)
    assert conf.status == "confirmed" and conf.by == "automatic", conf.reason
    assert conf.how == "rigorous" and "margin_ball" in conf.outcome.detail, conf.reason
