"""Forward-mode jets over arb balls (:mod:`attsvm.ball.jet`): a jet's value encloses the function and its gradient
encloses the gradient, at every point of its box.

References are independent of the jets: mpmath at 50 digits (``mpmath.diff`` for the elementary functions, central
differences of the 60-digit mp kit for kit compositions) and the *analytic* Hessian of :mod:`attsvm.ball.model`
(the Jet gradient of $\\langle\\nabla\\mathcal L(W),V\\rangle$ must contain $\\nabla^2\\mathcal L(W)\\,\\mathrm{vec}V$).
Checks: (a) each operation at a point box (lo == hi); (b) on boxes, at random inside points and the corners;
(c) through the ball kit (``grad_W``, ``loss``, a claim-like margin using ``softmax``, ``norm``, ``corr``,
``logsumexp``, ``min``/``max``, ``margins``, ...), strict kits included; (d) the centred mean-value lower bound is
rigorous and tighter than naive evaluation; (e) a planted wrong chain rule is caught (the checks can fail); the
decompositions and GD refuse jets."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from flint import arb, fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm import kit, model, strategies
from attsvm.ball import jet
from attsvm.ball.numbers import extremum, mid_mpf, to_arb, workprec

PREC = 256
DPS = 50
BALL = kit.Kit("ball", PREC)
MP = kit.Kit("mp", 60)
PAPER = strategies.for_hypotheses({"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)})
LOSSES = ("logistic", "exponential", "correlation")


class JetOps:
    """The functions a test function calls, for jets (their methods; min/max as the kit reduces)."""

    exp, log = staticmethod(lambda x: x.exp()), staticmethod(lambda x: x.log())
    log1p, expm1, sqrt = (
        staticmethod(lambda x: x.log1p()),
        staticmethod(lambda x: x.expm1()),
        staticmethod(lambda x: x.sqrt()),
    )
    min, max = staticmethod(lambda a, b: extremum("min", a, b)), staticmethod(lambda a, b: extremum("max", a, b))
    third, tenth = staticmethod(lambda: to_arb("1/3")), staticmethod(lambda: fmpq(1, 10))


class MpOps:
    """The same functions in mpmath (the reference)."""

    exp, log, log1p, expm1, sqrt = mpmath.exp, mpmath.log, mpmath.log1p, mpmath.expm1, mpmath.sqrt
    min, max = staticmethod(min), staticmethod(max)
    third, tenth = staticmethod(lambda: mpmath.mpf(1) / 3), staticmethod(lambda: mpmath.mpf(1) / 10)


# f(o, x, y) on x, y in [0.4, 2.1]; every operation of a jet appears, with constants of each type on both sides
FUNCTIONS = {
    "add": lambda o, x, y: x + y + 3 + np.float64(0.25) + o.third(),
    "sub": lambda o, x, y: x - y - 0.25 - o.tenth(),
    "rsub": lambda o, x, y: 2 - x + (o.third() - y),
    "mul": lambda o, x, y: x * y * 3 * o.third() * np.float64(1.5),
    "div": lambda o, x, y: x / y,
    "rdiv": lambda o, x, y: 3 / x + o.third() / (x * y),
    "cdiv": lambda o, x, y: x / 3 + y / o.tenth(),
    "neg": lambda o, x, y: -(x * y) + (+x),
    "pow": lambda o, x, y: x**3 + (y - 1) ** 2 + x**0 + y**1 + (x - y) ** 4,
    "square": lambda o, x, y: x * x - y * y,
    "exp": lambda o, x, y: o.exp(x * y),
    "log": lambda o, x, y: o.log(x + y),
    "log1p": lambda o, x, y: o.log1p(x * y),
    "expm1": lambda o, x, y: o.expm1(x - y),
    "sqrt": lambda o, x, y: o.sqrt(x * y),
    "abs": lambda o, x, y: abs(x - 3 * y - 0.1) + abs(x + y),
    "abs-kink": lambda o, x, y: abs(x - y),
    "min": lambda o, x, y: o.min(x, y + 3) + o.min(5, x),
    "max": lambda o, x, y: o.max(x * y, x - 10) + o.max(-1, y),
    "min-kink": lambda o, x, y: o.min(x, y),
    "max-kink": lambda o, x, y: o.max(x * y, x + y - 1),
    "softplus": lambda o, x, y: o.log1p(o.exp(x - 2 * y)) / (1 + x * x) * o.sqrt(o.exp(y) + x),
}
LO, HI = 0.5, 2.0
# where a kink function is not differentiable (the reference's central difference is no derivative there)
TIES = {
    "abs-kink": lambda x, y: x == y,
    "min-kink": lambda x, y: x == y,
    "max-kink": lambda x, y: x == 1 or y == 1,
}


def encloses(b, ref, tol: float = 1e-40) -> bool:
    """The ball ``b`` contains the 50-digit reference (up to ``tol * (1 + |ref|)``: its rounding / differencing)."""
    if not b.is_finite():
        return False
    if b.contains(to_arb(ref)):
        return True
    with mpmath.workdps(DPS + 20):
        return abs(mid_mpf(b) - ref) <= mid_mpf(b.rad()) + tol * (1 + abs(ref))


def reference(f, theta: list) -> tuple:
    """$f(\\theta)$ and $\\nabla f(\\theta)$ at 50 digits (``mpmath.diff``)."""
    with mpmath.workdps(DPS):
        th = [mpmath.mpf(t) for t in theta]
        val = f(MpOps, *th)
        grad = [mpmath.diff(lambda t, j=j: f(MpOps, *th[:j], t, *th[j + 1 :]), th[j]) for j in range(len(th))]
    return val, grad


def check(out, f, theta: list, what: str) -> None:
    """The jet ``out`` encloses ``f`` and its gradient at the point ``theta`` (a kink: the value only)."""
    val, grad = reference(f, theta)
    if what in TIES and TIES[what](*theta):
        grad = []
    assert jet.is_jet(out) and out.p == len(theta), what
    assert encloses(out.val, val), (what, theta, out.val, val)
    for j, (g, r) in enumerate(zip(out.grad, grad)):
        assert encloses(g, r), (what, theta, j, g, r)


def evaluate(f, lo, hi):
    with workprec(PREC):
        return f(JetOps, *jet.variables(lo, hi))


coord = st.floats(LO, HI, allow_nan=False)


# ---------------------------------------------------------------------- (a) each operation at a point box
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=30, deadline=None)
@given(x=coord, y=coord)
def test_point_box_encloses_value_and_derivative(name, x, y):
    f = FUNCTIONS[name]
    out = evaluate(f, [x, y], [x, y])
    check(out, f, [x, y], name)
    assert float(max(g.rad() for g in out.grad)) < 1e-60  # sharp at a point


# ---------------------------------------------------------------------- (b) boxes: every inside point enclosed
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=15, deadline=None)
@given(c=st.tuples(coord, coord), h=st.floats(1e-3, 0.1), seed=st.integers(0, 2**16))
def test_box_encloses_every_inside_point(name, c, h, seed):
    f = FUNCTIONS[name]
    lo, hi = [t - h for t in c], [t + h for t in c]
    out = evaluate(f, lo, hi)
    rng = np.random.default_rng(seed)
    corners = [[lo[0], lo[1]], [lo[0], hi[1]], [hi[0], lo[1]], [hi[0], hi[1]]]
    for theta in corners + [list(rng.uniform(lo, hi)) for _ in range(3)]:
        check(out, f, theta, name)


# ---------------------------------------------------------------------- (c) through the kit
def _vec(a) -> list:
    return list(np.ravel(np.asarray(a, dtype=object)))


@settings(max_examples=25, deadline=None)
@given(ds=PAPER, seed=st.integers(0, 2**16), loss=st.sampled_from(LOSSES))
def test_kit_grad_W_and_hessian_vector_product(ds, seed, loss):
    """On a box around W0: grad_W's jet value contains float64 ``model.grad_W(W0)``; the jet gradient of
    <grad L(W), V> contains the analytic Hessian-vector product (ball) at W0, and at the point box it is as sharp
    as the analytic one; the jet gradient of the loss is grad_W."""
    rng = np.random.default_rng(seed)
    d, r = ds.d, 1e-3
    W0, V = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    G64 = model.grad_W(ds, W0, loss)
    with BALL.context():
        D, Vb = BALL.data(ds), BALL.exact(V)
        Hv = BALL.hessian_W(D, W0, loss) @ Vb.ravel()
        G0 = BALL.grad_W(D, W0, loss)
        box = jet.variables(W0 - r, W0 + r)
        G = BALL.grad_W(D, box, loss)
        scale = max(np.abs(G64).max(), 1e-300)
        for g, x in zip(G.ravel(), G64.ravel()):
            assert encloses(g.val, mpmath.mpf(float(x)), tol=1e-12 * scale)
        ip = np.sum(G * Vb)
        assert all(g.contains(h) for g, h in zip(jet.gradient(ip), Hv)), (jet.gradient(ip), Hv)
        pt = jet.variables(W0, W0)
        gp = jet.gradient(np.sum(BALL.grad_W(D, pt, loss) * Vb))
        assert all(g.overlaps(h) and float(g.rad()) < 1e-60 * (1 + abs(float(h.mid()))) for g, h in zip(gp, Hv))
        Lp = BALL.loss(D, pt, loss)
        assert all(g.overlaps(h) for g, h in zip(jet.gradient(Lp), G0.ravel()))
        assert Lp.val.overlaps(BALL.loss(D, W0, loss))


@pytest.mark.parametrize(
    "name, sizes, loss",
    [("causal", {"n": 2, "T": 3, "d": 2}, "logistic"), ("ntp", {}, "nll"), ("sequence", {"K": 2}, "exponential")],
)
def test_kit_masked_and_next_token_data(name, sizes, loss):
    ds = strategies.batch(name, 1, seed=1, **sizes)[0]
    d = ds.d
    W0 = np.random.default_rng(0).normal(size=(d, d))
    with BALL.context():
        D = BALL.data(ds)
        pt = jet.variables(W0, W0)
        L = BALL.loss(D, pt, loss)
        assert all(g.overlaps(h) for g, h in zip(jet.gradient(L), BALL.grad_W(D, W0, loss).ravel()))
        s = BALL.softmax(D, jet.variables(W0 - 1e-3, W0 + 1e-3))
        if D.mask is not None:  # invisible tokens: probability exactly 0 (a constant)
            assert all(s[i, t].is_zero() for i, t in zip(*np.nonzero(~D.mask)))


def test_kit_KQ_parametrisation():
    """(K, Q) as jets: the jet gradient of L(KQ^T) is grad_KQ (ball, at the point), and grad_KQ takes jets."""
    ds = strategies.batch("paper", 1, seed=2, n=2, T=3, d=2)[0]
    rng = np.random.default_rng(5)
    K0, Q0 = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    with BALL.context():
        th = jet.variables(np.concatenate([K0.ravel(), Q0.ravel()]), np.concatenate([K0.ravel(), Q0.ravel()]))
        K, Q = th[:6].reshape(2, 3), th[6:].reshape(2, 3)
        g = jet.gradient(BALL.loss(ds, K @ Q.T))
        gK, gQ = BALL.grad_KQ(ds, K0, Q0)
        assert all(a.overlaps(b) for a, b in zip(g, list(gK.ravel()) + list(gQ.ravel())))
        jK, jQ = BALL.grad_KQ(ds, K, Q)
        assert all(a.val.overlaps(b) for a, b in zip(list(jK.ravel()) + list(jQ.ravel()), g))


def claim_margin(k: kit.Kit, ds, W, V):
    """A conclusion written once with the kit (any precision): many helpers composed."""
    D = k.data(ds)
    a = k.logits(D, W)
    _, _, u = k.outputs(D, W)
    ls = k.log_softmax(a, D.mask)
    m = k.min(k.margins(D, W))
    top = k.max(a, axis=1)
    lse = k.logsumexp(a, axis=1)
    G = k.grad_W(D, W, "logistic")
    ell = k.loss_derivative(u, "logistic")
    return (
        k.loss(D, W, "exponential") * k.norm(W)
        + k.corr(G, k.exact(V)) * np.sum(lse - top)
        + m * m / 3
        + np.sum(k.exp(ls) * k.log1p(k.exp(a)))
        + np.sum(k.expm1(u) * ell)
        + k.sqrt(k.norm(G) + 1)
        + np.sum(np.abs(G - 1))
    )


@settings(max_examples=10, deadline=None)
@given(ds=PAPER, seed=st.integers(0, 2**16))
def test_kit_claim_margin_gradient_matches_mp_differences(ds, seed):
    """The jet gradient of a claim-like margin at a point box contains the 60-digit central differences of the same
    code run on the mp kit (step 2^-70: error ~1e-29); a strict ball kit takes the jets."""
    rng = np.random.default_rng(seed)
    d = ds.d
    W0, V = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    strict = kit.Kit("ball", PREC, strict=True)
    with strict.context():
        out = claim_margin(strict, ds, strict.array(jet.variables(W0, W0)), V)
    with MP.context():
        Wm, h = MP.exact(W0), mpmath.mpf(2) ** -70
        ref0 = claim_margin(MP, ds, Wm, V)
        assert encloses(out.val, ref0, tol=1e-45)
        for j in range(d * d):
            E = np.zeros((d, d), dtype=object)
            E.flat[j] = h
            diff = (claim_margin(MP, ds, Wm + E, V) - claim_margin(MP, ds, Wm - E, V)) / (2 * h)
            assert encloses(out.grad[j], diff, tol=1e-24), (j, out.grad[j], diff)
    assert kit.is_ball(out) and abs(kit.Kit.to_float(out) - float(ref0)) <= 1e-12 * (1 + abs(float(ref0)))


def test_decompositions_and_gd_refuse_jets():
    ds = strategies.batch("paper", 1, seed=1, n=2, T=3, d=2)[0]
    W = jet.variables(np.zeros((2, 2)), np.ones((2, 2)))
    for call in (BALL.svd, BALL.inv, BALL.det, BALL.eigvalsh, BALL.singular_values, BALL.nuclear_norm):
        with pytest.raises(TypeError, match="do not differentiate"):
            call(W)
    with pytest.raises(TypeError, match="does not differentiate"):
        BALL.gd(ds, algo="gd", lr=0.1, steps=1, W0=W)


# ---------------------------------------------------------------------- (d) the mean-value lower bound
def test_mean_value_is_rigorous_and_tighter_than_naive():
    """f(x,y) = x^2 - xy + 1 on [0.9,1.1]^2: min 0.82 at (0.9,1.1); naive [0.6,1.4], mean-value [0.76,1.24]."""
    lo, hi = ["0.9", "0.9"], ["1.1", "1.1"]
    g = lambda o, x, y: x * x - x * y + 1  # noqa: E731  (x * x: the aliased square, value >= 0)
    with workprec(PREC):
        m_c = g(JetOps, *jet.point([1, 1]))
        m_b = g(JetOps, *jet.variables(lo, hi))
        low = jet.lower_bound(m_c, m_b, lo, hi)
        naive = jet.value(m_b).lower()
        enc = jet.mean_value(m_c, m_b, lo, hi)
    assert low.is_exact() and low <= arb("0.82") and low > naive
    assert low > arb("0.75") and naive < arb("0.61")
    assert enc.contains(arb("0.82")) and enc.contains(1)
    assert jet.lower_bound(m_c, m_c, lo, hi) == 1  # a constant: gradient 0


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=10, deadline=None)
@given(c=st.tuples(coord, coord), h=st.floats(1e-3, 0.1), t=st.tuples(st.floats(-1, 1), st.floats(-1, 1)))
def test_lower_bound_is_below_the_function_on_the_box(name, c, h, t):
    """At the centre and at an off-centre expansion point: lower bound <= f at the corners and at the mesh."""
    f = FUNCTIONS[name]
    lo, hi = [Fraction(a) - Fraction(h) for a in c], [Fraction(a) + Fraction(h) for a in c]
    with workprec(PREC):
        m_b = f(JetOps, *jet.variables(lo, hi))
        centres = [None, [Fraction(a) + Fraction(s) * Fraction(h) for a, s in zip(c, t)]]
        bounds = []
        for cen in centres:
            q = [(a + b) / 2 for a, b in zip(lo, hi)] if cen is None else cen
            m_c = f(JetOps, *jet.point(q))
            bounds.append((jet.lower_bound(m_c, m_b, lo, hi, cen), jet.mean_value(m_c, m_b, lo, hi, cen)))
    with mpmath.workdps(DPS):
        for u in np.linspace(0, 1, 4):
            for v in np.linspace(0, 1, 4):
                x = lo[0] + (hi[0] - lo[0]) * Fraction(u)
                y = lo[1] + (hi[1] - lo[1]) * Fraction(v)
                ref = f(MpOps, mpmath.mpf(x.numerator) / x.denominator, mpmath.mpf(y.numerator) / y.denominator)
                for low, enc in bounds:
                    assert low.is_exact() and low <= to_arb(ref) + arb("1e-40"), (name, low, ref)
                    assert encloses(enc, ref), (name, enc, ref)


def test_api_edges():
    with workprec(PREC):
        x = jet.variables([Fraction(1, 3)], [Fraction(1, 2)])[0]
        assert x.contains(to_arb("1/3")) and x.contains(to_arb("1/2")) and x.contains(to_arb("2/5"))
        assert list(jet.gradient(x)) == [1]
        assert jet.variables(np.zeros((2, 2)), np.ones((2, 2))).shape == (2, 2)
        with pytest.raises(ValueError, match="lo"):
            jet.variables([1.0], [0.0])
        with pytest.raises(ValueError, match="give p"):
            jet.gradient(arb(1))
        assert list(jet.gradient(arb(1), 3)) == [0, 0, 0] and jet.value(2) == 2
        pt = jet.point([Fraction(1, 4), 0.5])
        assert not any(jet.is_jet(v) for v in pt) and pt[0] == arb("0.25")
        y = jet.variables([1.0, 2.0], [1.0, 2.0])
        assert jet.gradient(y).shape == (2, 2) and jet.value(y)[1] == 2
        assert (y[0] < y[1]) and (y[1] > 1) and (0 < y[0]) and not (y[0] < 1) and (y[0] <= 1) and y[0] == 1
        wide = jet.variables([0.0], [1.0])[0]
        assert not (wide < arb("0.5")) and not (wide >= arb("0.5"))  # undecided comparisons are False both ways
        assert jet.value(wide.log()).is_nan() or not jet.gradient(wide.log())[0].is_finite()  # log at 0: no claim
        assert not jet.gradient(wide.sqrt())[0].is_finite()  # sqrt'(0) is infinite: nan, never a wrong ball
        with pytest.raises(ValueError):
            _ = wide ** (-1)
        assert "Jet(" in repr(wide) and wide.mid() == arb("0.5") and wide.rad() >= arb("0.5")


# ---------------------------------------------------------------------- (e) the checks can fail
def test_a_planted_wrong_chain_rule_is_caught(monkeypatch):
    """exp's derivative planted as 2 e^x: the point check of (a) rejects it (so (a) and (b) can fail)."""
    monkeypatch.setattr(jet.Jet, "exp", lambda self: jet.Jet(self.val.exp(), self.grad * (2 * self.val.exp())))
    f = FUNCTIONS["exp"]
    with pytest.raises(AssertionError):
        check(evaluate(f, [1.0, 0.5], [1.0, 0.5]), f, [1.0, 0.5], "exp")
    with pytest.raises(AssertionError):
        check(evaluate(f, [0.9, 0.4], [1.1, 0.6]), f, [1.0, 0.5], "exp")
