"""The conjecture writer's kit on the two-layer model (issue 30): ball enclosures (attsvm.ball.twolayer) contain the
independent 50-digit values (attsvm.highprec.twolayer_outputs / grad_twolayer, and central differences of the
50-digit loss), the float64 values (attsvm.twolayer) lie in the balls up to float64 rounding, selections are proved,
and the margins of a selection are the log-probability gaps; a planted wrong value fails each comparison."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from flint import arb

from attsvm import highprec as hpm
from attsvm.ball.numbers import to_arb
from attsvm.data import Dataset
from attsvm.kit import Kit, Undecidable
from attsvm.tolerances import tol

OPTIONS = [(False, False), (True, False), (False, True), (True, True)]  # (residual, causal)
BALL = Kit("ball", prec=100)  # ~30 digits: the balls' radii exceed the 50-digit values' own rounding
MP = Kit("mp", 50)
F64 = Kit()


def _cross(seed: int = 0, n: int = 2, T: int = 3, d: int = 2) -> Dataset:
    rng = np.random.default_rng(seed)
    Y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
    return Dataset(rng.standard_normal((n, T, d)), Y, rng.standard_normal((n, d)), rng.standard_normal(d))


def _causal_kind(seed: int = 1, n: int = 2, T: int = 3, d: int = 2) -> Dataset:
    """Flat rows (i, k) see the tokens tau <= k: a visibility mask reaches both layers."""
    rng = np.random.default_rng(seed)
    Y = np.where(rng.standard_normal((n, T)) > 0, 1.0, -1.0)
    return Dataset(rng.standard_normal((n, T, d)), Y, None, rng.standard_normal(d), kind="causal")


def _weights(d: int, seed: int, scale: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + seed)
    return scale * rng.standard_normal((d, d)), scale * rng.standard_normal((d, d))


def _in_ball(b: arb, x, slack: float = 0.0) -> bool:
    """The exact number ``x`` (float / mpf) lies in the ball ``b`` widened by ``slack`` (absolute)."""
    x = float(x) if isinstance(x, np.floating) else x
    if b.is_exact() and slack == 0.0:
        return b == to_arb(x)
    return (b + arb(0, slack) if slack else b).contains(to_arb(x))


def _all_in(balls, values, slack=lambda x: 0.0) -> bool:
    B = np.asarray(balls, dtype=object).ravel()
    V = np.asarray(values, dtype=object).ravel()
    assert B.shape == V.shape
    return all(_in_ball(b, v, slack(v)) for b, v in zip(B, V))


def _f64_slack(x) -> float:
    return tol("grad_atol") + tol("grad_rtol") * abs(float(x))


CASES = [(_cross, s, o) for s in (0, 1) for o in OPTIONS] + [
    (_causal_kind, 2, (False, False)),
    (_causal_kind, 3, (True, True)),
]


@pytest.mark.parametrize(("make", "seed", "opts"), CASES)
def test_balls_contain_50_digit_and_float64_values(make, seed, opts):
    residual, causal = opts
    ds = make(seed)
    W1, W2 = _weights(2, seed)
    kw = {"residual": residual, "causal": causal}
    ob, om, of = (k.twolayer(ds, W1, W2, **kw) for k in (BALL, MP, F64))
    for name in ("s1", "h_bar", "h", "s2", "g", "u"):
        assert _all_in(getattr(ob, name), getattr(om, name)), name
        assert _all_in(getattr(ob, name), getattr(of, name), _f64_slack), name
    for loss in ("logistic", "exponential"):
        Lb = BALL.twolayer_loss(ds, W1, W2, loss, **kw)
        assert _in_ball(Lb, MP.twolayer_loss(ds, W1, W2, loss, **kw))
        assert _in_ball(Lb, F64.twolayer_loss(ds, W1, W2, loss, **kw), _f64_slack(Lb.mid()))
    Gb, Gm, Gf = (k.twolayer_grads(ds, W1, W2, "logistic", **kw) for k in (BALL, MP, F64))
    for a in range(2):
        assert _all_in(Gb[a], Gm[a]) and _all_in(Gb[a], Gf[a], _f64_slack)
    alpha = F64.twolayer_selections(ds, W1, W2, **kw)[0]
    Hb, Hm, Hf = (k.hard_outputs(ds, alpha, residual) for k in (BALL, MP, F64))
    assert all(b.is_exact() for b in Hb.ravel())  # x_alpha + rho x of exact data: exact at 100 bits
    assert _all_in(Hb, Hm) and _all_in(Hb, Hf, _f64_slack)


def test_ball_gradient_contains_central_differences_of_the_50_digit_loss():
    """Independent of every closed form: the derivative of the 50-digit loss by central differences (step 1e-20,
    truncation error ~1e-40) lies in the ball gradient widened by 1e-30."""
    ds, (W1, W2) = _causal_kind(4), _weights(2, 4)
    kw = {"residual": True, "causal": True}
    G1, G2 = BALL.twolayer_grads(ds, W1, W2, "logistic", **kw)
    with mpmath.workdps(60):
        h = mpmath.mpf("1e-20")
        for which, G in ((0, G1), (1, G2)):
            for j in range(2):
                for k in range(2):
                    Ws = [hpm.as_mp(W1), hpm.as_mp(W2)]
                    Ws[which][j][k] += h
                    up = hpm.loss_twolayer(ds, Ws[0], Ws[1], "logistic", dps=60, **kw)
                    Ws[which][j][k] -= 2 * h
                    dn = hpm.loss_twolayer(ds, Ws[0], Ws[1], "logistic", dps=60, **kw)
                    assert _in_ball(G[j, k], (up - dn) / (2 * h), 1e-30), (which, j, k)


@pytest.mark.parametrize(("make", "seed", "opts"), [(_cross, 5, (True, False)), (_causal_kind, 6, (False, True))])
def test_selections_are_proved_and_margins_are_log_probability_gaps(make, seed, opts):
    residual, causal = opts
    ds, (W1, W2) = make(seed), _weights(2, seed)
    kw = {"residual": residual, "causal": causal}
    alpha, beta = BALL.twolayer_selections(ds, W1, W2, **kw)
    fa, fb = F64.twolayer_selections(ds, W1, W2, **kw)
    assert np.array_equal(alpha, fa) and np.array_equal(beta, fb)
    ob = BALL.twolayer(ds, W1, W2, **kw)
    m2 = BALL.twolayer_margins(ds, W1, W2, 2, beta, **kw)
    m1 = BALL.twolayer_margins(ds, W1, W2, 1, alpha, **kw)
    with BALL.context():
        assert BALL.min(m2) > 0 and BALL.min(m1) > 0  # the selection is the strict argmax
        N, T = beta.shape[0], m2.shape[1]
        for i in range(N):  # (h_beta - h_t)^T W2 z = log s2_beta - log s2_t: the softmax's shift invariance
            for t in range(T):
                if m2[i, t].is_finite():
                    assert m2[i, t].overlaps(ob.s2[i, beta[i]].log() - ob.s2[i, t].log())
                for tau in range(T):
                    if m1[i, t, tau].is_finite():
                        assert m1[i, t, tau].overlaps(ob.s1[i, t, alpha[i, t]].log() - ob.s1[i, t, tau].log())
    for k in (MP, F64):  # the same margins in the other precisions, within the balls
        m2k, m1k = (k.twolayer_margins(ds, W1, W2, lay, sel, **kw) for lay, sel in ((2, beta), (1, alpha)))
        slack = (lambda x: 0.0) if k is MP else _f64_slack
        fin2, fin1 = np.isfinite(m2k.astype(float)), np.isfinite(m1k.astype(float))
        assert np.array_equal(fin2, [[b.is_finite() for b in r] for r in m2])
        assert _all_in(m2[fin2], m2k[fin2], slack) and _all_in(m1[fin1], m1k[fin1], slack)


def test_a_wrong_selection_has_a_negative_margin_and_a_tie_is_undecidable():
    ds, (W1, W2) = _cross(7), _weights(2, 7)
    alpha, beta = BALL.twolayer_selections(ds, W1, W2)
    wrong = (beta + 1) % ds.flat().X.shape[1]
    with BALL.context():
        assert BALL.min(BALL.twolayer_margins(ds, W1, W2, 2, wrong)) < 0
    with pytest.raises(Undecidable, match="selection of"):  # W1 = 0: every layer-1 output the mean token, all tied
        BALL.twolayer_selections(ds, np.zeros((2, 2)), W2)


def test_planted_wrong_values_fail_the_comparisons():
    """The comparisons above can fail: a 50-digit value moved by 1e-25 leaves the 100-bit ball, a float64 value
    moved by 1e-8 leaves the ball widened by float64 rounding, a wrong gradient entry fails."""
    ds, (W1, W2) = _cross(8), _weights(2, 8)
    ob, om, of = (k.twolayer(ds, W1, W2, residual=True) for k in (BALL, MP, F64))
    with mpmath.workdps(50):
        assert not _all_in(ob.u, om.u + mpmath.mpf("1e-25"))
    assert not _all_in(ob.h, of.h + 1e-8, _f64_slack)
    Gb = BALL.twolayer_grads(ds, W1, W2, residual=True)[0]
    Gf = F64.twolayer_grads(ds, W1, W2, residual=True)[0].copy()
    Gf[1, 0] *= 1 + 1e-6
    assert not _all_in(Gb, Gf, _f64_slack)


@pytest.mark.parametrize(
    "kw",
    [
        {"algo": "ngd", "residual": True},
        {"algo": "gd", "causal": True},
        {"algo": "ngd", "normalize": "joint", "freeze": "W1", "schedule": "rsqrt"},
    ],
)
def test_ball_gd_replay_contains_the_50_digit_replay_and_the_engine_run(kw):
    ds = _cross(9)
    start = {"W1_0": 0.5 * np.eye(2), "W2_0": np.array([[0.25, -0.5], [0.0, 1.0]])}
    # 256 bits: the replay's balls widen by the dependency effect (about x16 per step at 100 bits they reach 1e-6);
    # the 50-digit replay is compared with its own rounding allowance 1e-40
    rb, rm, rf = (k.twolayer_gd(ds, lr=0.5, steps=12, **start, **kw) for k in (Kit("ball"), MP, F64))
    assert rb.steps == rm.steps == rf.steps == 12
    for a in ("W1", "W2"):
        assert _all_in(getattr(rb, a), getattr(rm, a), lambda x: 1e-40 * (1 + abs(float(x))))
        slack = lambda x: tol("replay_rtol") * (1 + abs(float(x)))  # noqa: E731 - a float64 run of 12 steps
        assert _all_in(getattr(rb, a), getattr(rf, a), slack)
    if kw.get("freeze") == "W1":
        assert all(b.is_exact() for b in rb.W1.ravel()) and _all_in(rb.W1, start["W1_0"])
    with mpmath.workdps(50):  # planted: the 50-digit iterate moved by 1e-25 leaves the ball
        assert not _all_in(rb.W2, rm.W2 + mpmath.mpf("1e-25"))
