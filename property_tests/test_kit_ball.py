"""The ball precision of the kit (:mod:`attsvm.ball`): every helper *encloses* the value of the definition.

The reference is the 100-digit mpmath kit (:mod:`attsvm.highprec`, independent code). A ball "encloses" a
reference value when it contains it, up to the reference's own rounding (relative ``1e-90`` at 100 digits; the
mp Hessian is a central difference, good to about ``1e-70``). Checks: (1) each helper on Hypothesis data sets and
on causal / next-token data, with small radii; (2) a saturated point (logits +-150) where the small softmax entry,
the log-softmax of the large one and the cancellation-free margin are resolved; (3) a planted 1-ulp change of the
input is *not* enclosed (the check can fail); (4) linear algebra at repeated / zero eigenvalues and the
Undecidable cases; (5) the ball GD replay against ``highprec.replay`` and its precision guard; (6) strict kits
reject computed floats (:class:`attsvm.kit.Bypass`)."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from flint import arb, ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm import highprec, kit, strategies
from attsvm.ball import to_arb
from attsvm.ball.numbers import mid_mpf
from attsvm.data import Dataset

BALL = kit.Kit("ball")
MP = kit.Kit("mp", 100)
REF_REL = 1e-90  # rounding of the 100-digit reference
PAPER = strategies.for_hypotheses({"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)})


def _flat(a):
    return list(np.ravel(np.asarray(a, dtype=object)))


def encloses(balls, refs, rel=REF_REL, atol=0.0):
    """Every ball contains its reference value (up to the reference's rounding ``rel`` and ``atol``)."""
    for b, r in zip(_flat(balls), _flat(refs), strict=True):
        if mpmath.isinf(r):
            assert not b.is_finite() and (b > 0) == (r > 0), (b, r)
            continue
        ra = to_arb(r)
        if b.contains(ra):
            continue
        with mpmath.workdps(120):
            gap = abs(mid_mpf(b) - r)
            assert gap <= mid_mpf(b.rad()) + rel * abs(r) + atol, (b, r)
    return True


def rel_rad(balls):
    """The largest radius relative to the largest magnitude."""
    bs = _flat(balls)
    scale = max(abs(float(b.mid())) for b in bs)
    return max(float(b.rad()) for b in bs) / scale if scale > 0 else max(float(b.rad()) for b in bs)


@pytest.fixture(autouse=True)
def _mp100():
    """The mp kit's arithmetic between its results runs at the ambient precision: 100 digits here."""
    with mpmath.workdps(100):
        yield


# ---------------------------------------------------------------------- the model
@settings(max_examples=12, deadline=None)
@given(ds=PAPER, seed=st.integers(0, 2**16))
def test_model_helpers_enclose_the_100_digit_values(ds, seed):
    rng = np.random.default_rng(seed)
    d = ds.d
    W = rng.normal(scale=2.0, size=(d, d))
    K, Q = rng.normal(size=(d, 2)), rng.normal(size=(d, 2))
    a = BALL.logits(ds, W)
    assert encloses(a, MP.logits(ds, W))
    a64 = kit.FLOAT64.logits(ds, W)
    assert encloses(BALL.log_softmax(a64), MP.log_softmax(a64))
    assert encloses(BALL.softmax(ds, W), MP.softmax(ds, W))
    s, g, u = BALL.outputs(ds, W)
    sm, gm, um = MP.outputs(ds, W)
    assert encloses(s, sm) and encloses(g, gm) and encloses(u, um)
    assert encloses(BALL.loss_derivative(u), MP.loss_derivative(um))
    for loss in ("logistic", "exponential", "correlation"):
        L = BALL.loss(ds, W, loss)
        assert kit.is_ball(L) and encloses([L], [MP.loss(ds, W, loss)])
        G = BALL.grad_W(ds, W, loss)
        assert encloses(G, MP.grad_W(ds, W, loss)) and rel_rad(G) < 1e-40
    gK, gQ = BALL.grad_KQ(ds, K, Q)
    mK, mQ = MP.grad_KQ(ds, K, Q)
    assert encloses(gK, mK) and encloses(gQ, mQ) and rel_rad(gK) < 1e-40
    Lw = BALL.smoothness(ds)
    assert encloses([Lw], [MP.smoothness(ds)]) and rel_rad([Lw]) < 1e-40
    m = BALL.margins(ds, W)
    assert encloses(m, MP.margins(ds, W))
    for x in (a, s, u):
        assert rel_rad(x) < 1e-40


@settings(max_examples=6, deadline=None)
@given(ds=PAPER, seed=st.integers(0, 2**16))
def test_analytic_hessian_encloses_the_central_difference(ds, seed):
    W = np.random.default_rng(seed).normal(size=(ds.d, ds.d))
    H = BALL.hessian_W(ds, W)
    Hm = MP.hessian_W(ds, W)
    scale = max(abs(x) for x in _flat(Hm))
    assert encloses(H, Hm, rel=0.0, atol=1e-60 * max(scale, 1e-30))  # the reference: O(10^-70) difference error
    assert rel_rad(H) < 1e-40


@pytest.mark.parametrize(
    "name, sizes, loss",
    [("causal", {"n": 2, "T": 3, "d": 2}, "logistic"), ("ntp", {}, "nll"), ("sequence", {"K": 2}, "exponential")],
)
def test_masked_and_next_token_data(name, sizes, loss):
    ds = strategies.batch(name, 1, seed=1, **sizes)[0]
    W = np.random.default_rng(0).normal(size=(ds.d, ds.d))
    D = BALL.data(ds)
    assert encloses(BALL.softmax(ds, W), MP.softmax(ds, W))
    assert encloses(BALL.log_softmax(BALL.logits(ds, W), D.mask), MP.log_softmax(MP.logits(ds, W), D.mask))
    assert encloses([BALL.loss(ds, W, loss)], [MP.loss(ds, W, loss)])
    assert encloses(BALL.grad_W(ds, W, loss), MP.grad_W(ds, W, loss))
    assert encloses(BALL.margins(ds, W), MP.margins(ds, W))
    if D.mask is not None:  # invisible tokens: probability exactly 0, margin +inf (an exact ball)
        s = BALL.softmax(ds, W)
        assert all(s[i, t].is_zero() for i, t in zip(*np.nonzero(~D.mask)))
        m = BALL.margins(ds, W)
        assert all(m[i, t] > 10**300 and m[i, t].is_exact() for i, t in zip(*np.nonzero(~D.mask)))


def _saturated() -> tuple[Dataset, np.ndarray]:
    """One input, logits (150, -150) at W, scores (1, -1)."""
    ds = Dataset(X=np.array([[[1.0], [-1.0]]]), Y=np.array([1.0]), Z=np.array([[1.0]]), v=np.array([1.0]))
    return ds, np.array([[150.0]])


def test_saturated_point_is_resolved():
    ds, W = _saturated()
    a = BALL.logits(ds, W)
    assert a[0, 0] == 150 and a[0, 1] == -150
    with mpmath.workdps(200):  # the exact values, written out (the mp kit's log(1 + e^-300) rounds to 0)
        e = mpmath.exp(-300)
        s_ref, ls_ref = [1 / (1 + e), e / (1 + e)], [-mpmath.log1p(e), -300 - mpmath.log1p(e)]
    s = BALL.softmax(ds, W)
    assert encloses(s, s_ref) and encloses(s, MP.softmax(ds, W))
    assert s[0, 0] > arb("0.999") and rel_rad([s[0, 0]]) < 1e-70  # not [0 +/- ...]
    assert s[0, 1] > 0 and float(s[0, 1].rad()) < 1e-70 * float(s[0, 1].mid())  # e^-300 with relative precision
    ls = BALL.log_softmax(a)
    assert encloses(ls, ls_ref)
    assert ls[0, 0] < 0 and float(ls[0, 0].rad()) < 1e-70 * abs(float(ls[0, 0].mid()))  # -log1p(e^-300)
    _, g, u = BALL.outputs(ds, W)
    with BALL.context():  # u - max_t gamma_t = sum_t s_t (gamma_t - gamma_opt): no cancellation
        gap = sum((s[0, t] * (g[0, t] - g[0, 0]) for t in range(2)), arb(0))
    exact = -2 * mpmath.exp(-300) / (1 + mpmath.exp(-300))
    assert gap < 0 and encloses([gap], [exact]) and float(gap.rad()) < 1e-60 * abs(float(gap.mid()))
    with BALL.context():  # the plain difference: no 256-bit ball holds 1 - 1e-130 apart from 1 ...
        plain = u[0] - g[0, 0]
    assert plain.contains(to_arb(exact)) and not plain < 0 and not plain >= 0
    k512 = kit.Kit("ball", 512)  # ... 512 bits do
    _, g5, u5 = k512.outputs(ds, W)
    with k512.context():
        plain = u5[0] - g5[0, 0]
    assert plain < 0 and encloses([plain], [exact])
    G = BALL.grad_W(ds, W)
    assert encloses(G, MP.grad_W(ds, W)) and G[0, 0] < 0 and rel_rad(G) < 1e-60  # -O(e^-300), resolved


def test_a_planted_one_ulp_change_is_not_enclosed():
    """The enclosure check can fail: the value at W with one entry moved by one ulp lies outside the balls."""
    ds = strategies.batch("paper", 1, seed=3, n=2, T=3, d=3)[0]
    W = np.random.default_rng(1).normal(size=(3, 3))
    Wp = W.copy()
    Wp[0, 0] = np.nextafter(W[0, 0], np.inf)
    L, G = BALL.loss(ds, W), BALL.grad_W(ds, W)
    assert encloses([L], [MP.loss(ds, W)]) and encloses(G, MP.grad_W(ds, W))
    assert not L.contains(to_arb(MP.loss(ds, Wp)))
    assert not all(b.contains(to_arb(r)) for b, r in zip(_flat(G), _flat(MP.grad_W(ds, Wp))))
    with pytest.raises(AssertionError):
        encloses([L], [MP.loss(ds, Wp)])


# ---------------------------------------------------------------------- numbers and linear algebra
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), d=st.integers(2, 4))
def test_linear_algebra_encloses_the_100_digit_values(seed, d):
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    R = rng.normal(size=(d + 1, d))  # rectangular
    b = rng.normal(size=d)
    assert encloses([BALL.norm(A)], [MP.norm(A)]) and encloses([BALL.corr(A, B)], [MP.corr(A, B)])
    assert encloses([BALL.det(A)], [MP.det(A)])
    assert encloses(BALL.inv(A), MP.inv(A), rel=1e-80) and encloses(BALL.solve(A, b), MP.solve(A, b), rel=1e-80)
    assert encloses(BALL.solve(A, B), MP.solve(A, B), rel=1e-80)
    assert encloses(BALL.eigvalsh(A), MP.eigvalsh(A), rel=1e-80)
    for M in (A, R, R.T):
        assert encloses(BALL.singular_values(M), MP.singular_values(M), rel=1e-80)
    assert encloses([BALL.nuclear_norm(A)], [MP.nuclear_norm(A)], rel=1e-80)
    assert encloses([BALL.spectral_norm(A)], [MP.spectral_norm(A)], rel=1e-80)
    assert rel_rad(BALL.singular_values(A)) < 1e-60 and rel_rad(BALL.eigvalsh(A)) < 1e-60
    for M in (A, R, R.T):
        U, S, Vt = BALL.svd(M)
        Um, Sm, Vm = MP.svd(M)
        assert U.shape == Um.shape and Vt.shape == Vm.shape and encloses(S, Sm, rel=1e-80)
        with BALL.context():
            rec = U * S @ Vt
            assert all(x.contains(to_arb(y)) for x, y in zip(_flat(rec), _flat(M)))  # U diag(S) V^T holds M
            eye = U.T @ U
            assert all(eye[i, j].contains(int(i == j)) for i in range(eye.shape[0]) for j in range(eye.shape[1]))
    a = rng.normal(scale=30, size=(2, 5))
    for name in ("exp", "expm1"):
        assert encloses(getattr(BALL, name)(a / 30), getattr(MP, name)(a / 30))
    assert encloses(BALL.log1p(np.abs(a) / 30), MP.log1p(np.abs(a) / 30))
    assert encloses(BALL.log(np.abs(a)), MP.log(np.abs(a))) and encloses(BALL.sqrt(np.abs(a)), MP.sqrt(np.abs(a)))
    for axis in (0, 1, -1):
        assert encloses(BALL.logsumexp(a, axis), MP.logsumexp(a, axis))


def test_repeated_and_zero_eigenvalues_are_enclosed():
    for A in (np.eye(3), np.diag([1.0, 1.0, 2.0]), np.zeros((2, 2)), np.ones((3, 3))):
        assert encloses(BALL.eigvalsh(A), MP.eigvalsh(A), rel=0.0, atol=1e-70)
    r1 = np.outer([1.0, 2.0, 3.0], [0.5, -1.0, 2.0])  # rank 1: two singular values 0
    sv = BALL.singular_values(r1)
    assert sv[1].contains(0) and sv[2].contains(0) and float(sv[1].upper()) < 1e-30
    assert encloses(sv, MP.singular_values(r1), rel=0.0, atol=1e-70)
    with pytest.raises(kit.Undecidable, match="svd"):
        BALL.svd(r1)  # the singular vectors of a zero singular value are not unique
    with pytest.raises(kit.Undecidable, match="svd"):
        BALL.svd(np.eye(2))  # a repeated singular value: neither
    with pytest.raises(kit.Undecidable, match="invertible"):
        BALL.inv(np.array([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(kit.Undecidable, match="invertible"):
        BALL.solve(np.array([[1.0, 2.0], [2.0, 4.0]]), np.ones(2))


def test_projector_is_exact_on_exact_data():
    Z = np.array([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 3.0, 3.0]])  # rank 2
    P = BALL.projector(Z)
    ref = np.array([[1, 0, 0], [0, 0.5, 0.5], [0, 0.5, 0.5]])
    assert all(x.contains(to_arb(float(y))) and float(x.rad()) < 1e-70 for x, y in zip(_flat(P), _flat(ref)))
    ds = strategies.batch("paper", 1, seed=2, n=2, T=3, d=3)[0]
    assert encloses(BALL.projector(ds.Z), MP.projector(ds.Z), rel=1e-80)
    with BALL.context():
        Zb = BALL.array(Z) + arb(0, 2.0**-200)  # inexact entries of a rank-deficient Z: the rank is not decided
    with pytest.raises(kit.Undecidable, match="rank"):
        BALL.projector(Zb)
    with BALL.context():  # inexact entries of full row rank: P = Z^T (Z Z^T)^{-1} Z
        Zr = BALL.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]) + arb(0, 2.0**-200)
    assert encloses(BALL.projector(Zr), ref, rel=0.0, atol=1e-50)
    with BALL.context():  # ... of full column rank: P = I
        Zc = BALL.array(np.vstack([np.eye(3), np.ones((1, 3))])) + arb(0, 2.0**-200)
    assert encloses(BALL.projector(Zc), np.eye(3), rel=0.0, atol=0.0)


# ---------------------------------------------------------------------- SVMs
def test_svm_helpers():
    ds = strategies.batch("paper", 1, seed=3, n=2, T=3, d=3)[0]
    mm, mmm = BALL.wmm(ds), MP.wmm(ds)
    assert mm.how == "exact" and mm.support == mmm.support and encloses(mm.W, mmm.W)
    m = BALL.margins(ds, mm.W)
    with BALL.context():
        assert all(x > 1 - arb(10) ** -60 for x in _flat(m))  # the certificate is feasible
    assert all(m[i, t].contains(1) for i, t in mm.support)  # its support tokens have margin exactly 1
    for name in ("paper", "locally_optimal", "not_locally_optimal", "infeasible"):
        d2 = strategies.batch(name, 1, seed=2)[0]
        assert BALL.locally_optimal(d2) == kit.FLOAT64.locally_optimal(d2), name
    assert BALL.wmm(strategies.batch("infeasible", 1, seed=2)[0]).status == "infeasible"


# ---------------------------------------------------------------------- gradient descent
def _replay(ds, init, **kw):
    rep = highprec.replay(ds, init, dps=100, **kw)
    return rep.final


@pytest.mark.parametrize(
    "algo, schedule, norm", [("ngd", "constant", None), ("gd", "rsqrt", None), ("nsd", "constant", "linf")]
)
def test_ball_gd_on_W_encloses_the_100_digit_replay(algo, schedule, norm):
    ds = strategies.batch("paper", 1, seed=3, n=2, T=3, d=3)[0]
    W0 = np.random.default_rng(0).normal(size=(3, 3))
    run = BALL.gd(ds, algo=algo, lr=0.1, steps=20, W0=W0, schedule=schedule, norm=norm)
    ref = _replay(ds, W0, param="W", algo=algo, lr=0.1, steps=20, schedule=schedule, norm=norm)["W"]
    assert run.steps == 20 and encloses(run.W, ref) and rel_rad(run.W) < 1e-40
    assert kit.is_ball(run.lr) and run.lr.contains(to_arb(0.1))


def test_ball_gd_on_KQ_encloses_the_100_digit_replay():
    ds = strategies.batch("paper", 1, seed=5, n=3, T=3, d=3)[0]
    rng = np.random.default_rng(5)
    K, Q = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    run = BALL.gd(ds, algo="ngd", lr=0.1, steps=20, K0=K, Q0=Q)
    ref = _replay(ds, {"K": K, "Q": Q}, param="KQ", algo="ngd", lr=0.1, steps=20)
    assert encloses(run.K, ref["K"]) and encloses(run.Q, ref["Q"]) and rel_rad(run.W) < 1e-40
    with mpmath.workdps(100):
        Wref = np.array(ref["K"], dtype=object) @ np.array(ref["Q"], dtype=object).T
    assert encloses(run.W, Wref)


def test_ball_gd_lr_one_over_L_and_batched_starts():
    ds = strategies.batch("paper", 1, seed=3, n=2, T=3, d=3)[0]
    run = BALL.gd(ds, algo="gd", lr="1/L", steps=5)
    ref = highprec.replay(ds, np.zeros((3, 3)), algo="gd", lr="1/L", steps=5, dps=100)
    assert run.lr.contains(to_arb(ref.lr)) and encloses(run.W, ref.final["W"])
    W0 = np.stack([np.eye(3), -np.eye(3)])
    many = BALL.gd(ds, algo="ngd", lr=0.1, steps=3, W0=W0)
    assert many.W.shape == (2, 3, 3)
    for w0, w in zip(W0, many.W):
        assert encloses(w, _replay(ds, w0, algo="ngd", lr=0.1, steps=3)["W"])


def test_ball_gd_gives_up_rather_than_returning_a_huge_ball():
    """Normalised GD on (K,Q) once both gradients are ~1e-15: the linearised step expands perturbations by up to
    x2 per update (a genuine sensitivity, not the arithmetic): 64-bit balls give up near update 117."""
    ds = strategies.batch("paper", 1, seed=5, n=3, T=3, d=3)[0]
    rng = np.random.default_rng(5)
    K, Q = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    with pytest.raises(kit.Undecidable, match="lost precision at step"):
        kit.Kit("ball", 64).gd(ds, algo="ngd", lr=0.1, steps=300, K0=K, Q0=Q)
    run = kit.Kit("ball", 64).gd(ds, algo="ngd", lr=0.1, steps=300)  # on W the same 64 bits keep ~1e-15
    assert rel_rad(run.W) < 1e-12
    for algo, kw in (("adam", {}), ("nsd", {"norm": "spec"}), ("md", {"q": 3.0})):
        with pytest.raises(kit.Undecidable):
            BALL.gd(ds, algo=algo, lr=0.1, steps=2, **kw)


# ---------------------------------------------------------------------- the kit itself, strict kits
def test_min_and_max_enclose_the_extremes_of_overlapping_balls():
    with BALL.context():
        sure, unsure = arb("0.1 +/- 0.05"), arb("0 +/- 0.2")  # the second may be -0.2
        assert min(sure, unsure) is sure and sure >= 0  # Python's min picks a ball that does not hold -0.2 ...
        m = BALL.min(np.array([sure, unsure], dtype=object))
        assert m.contains(arb("-0.2")) and not m >= 0  # ... k.min encloses the minimum
        assert BALL.max([[1, 2], [3, "-1/3"]], axis=1)[1] == 3 and BALL.min([[1, 2], [3, "-1/3"]]).contains(
            to_arb(Fraction(-1, 3))
        )
    assert kit.FLOAT64.min([[1.0, 2.0], [0.5, 3.0]], axis=1).tolist() == [1.0, 0.5] and MP.max([1, 2.5]) == 2.5


def test_kit_interface():
    assert kit.PRECISIONS == ("float64", "mp", "ball")
    k = kit.for_precision("ball", None)
    assert (k.precision, k.ball, k.hp, k.dps, k.prec, k.strict) == ("ball", True, True, None, kit.BALL_PREC, False)
    assert repr(kit.Kit("ball", 256)) == "Kit(ball, 256 bits)" and kit.Kit("ball", 128).prec == 128
    assert kit.Kit("mp").hp and not kit.Kit("mp").ball and kit.Kit("mp").dps == 50
    old = ctx.prec
    with kit.Kit("ball", 300).context():
        assert ctx.prec == 300
    assert ctx.prec == old
    x = BALL.scalar("1/3")
    assert kit.is_ball(x) and not kit.is_ball(mpmath.mpf(1)) and not kit.is_high_precision(x)
    assert BALL.scalar(0.1).is_exact() and BALL.scalar(mpmath.mpf(1) / 3).is_exact()
    assert BALL.scalar(Fraction(3, 8)).is_exact() and BALL.array([[1, 2]]).shape == (1, 2)
    with BALL.context():
        assert kit.Kit.to_float(-(arb(10) ** -400)) == -5e-324 and kit.Kit.to_float(arb(10) ** 400) > 1e300
    assert BALL.tol("rounding") == kit.HP_ROUNDING and BALL.zeros(2, 2)[0, 0].is_zero()

    class View:  # a confirming case's view of its data set: the helpers use its ``raw``
        raw = strategies.batch("paper", 1, seed=3, n=2, T=3, d=3)[0]

    assert encloses([BALL.loss(View(), np.eye(3))], [MP.loss(View.raw, np.eye(3))])
    assert BALL.data(View()).raw is View.raw


@pytest.mark.parametrize("precision", ["ball", "mp"])
def test_strict_kit_rejects_computed_floats(precision):
    k = kit.Kit(precision, strict=True)
    assert k.strict and "strict" in repr(k)
    for bad in (0.1 * 3 - 0.3, 1 / 3, np.float64(2.0) / 3):
        with pytest.raises(kit.Bypass, match=r"k\.scalar\(.*computed outside the kit.*test_kit_ball\.py"):
            k.scalar(bad)
    for bad in ([0.5, 1 / 3], np.array([0.25, 0.1 + 0.2]), np.eye(2) / 3):
        with pytest.raises(kit.Bypass, match=r"k\.array"):
            k.array(bad)
    assert issubclass(kit.Bypass, kit.Undecidable)
    for good in (0.9, -1.0, 1e-3, "1/3", 2, Fraction(1, 3), mpmath.mpf(1) / 3, True, np.float64(0.25), 123456.789):
        k.scalar(good)
    k.array([0.9, "1/3", 2, -1.0])
    k.array(np.eye(3))
    k.exact(1 / 3)  # the confirming case's own data and draws: no rule
    kit.Kit(precision).scalar(1 / 3)  # a kit that is not strict takes any float
