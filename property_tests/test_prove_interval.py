"""The independent re-check of proof certificates (issue 26): interval numbers on mpmath's ``iv`` and forward-mode
jets over them (:mod:`attsvm.prove.interval`), run through the ball kit's formulas by ``attsvm prove --verify``.

References are independent of the intervals: mpmath at 50 digits (values, ``mpmath.diff`` derivatives), float64
:func:`attsvm.model.grad_W`, the analytic ball Hessian of :mod:`attsvm.ball.model` (the interval-jet gradient of
$\\langle\\nabla\\mathcal L(W),V\\rangle$ must contain $\\nabla^2\\mathcal L(W)\\,\\mathrm{vec}V$) and the prover's arb
enclosures (which must overlap). Checks: (a) each operation at points and (b) on intervals, at sampled members;
(c) exact conversion, certain comparisons, domain edges, the kit's type checks; (d) through the kit; (e) arb and
interval enclosures of a claim's margin overlap; (f) a real certificate verifies without the prover's jets, and a
planted wrong chain rule in the interval jets makes its verification fail naming a leaf.
"""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from flint import arb, fmpq
from hypothesis import given, settings
from hypothesis import strategies as st
from mpmath import libmp

from attsvm import generate, kit, model, strategies
from attsvm.ball import jet
from attsvm.ball.numbers import extremum, has_jets, is_ball, to_arb, workprec
from attsvm.cli import main
from attsvm.prove import interval as I
from attsvm.prove.interval import (
    Iv,
    IvJet,
    iv_gradient,
    iv_lower_bound,
    iv_mean_value,
    iv_point,
    iv_value,
    iv_variables,
    ivprec,
    to_iv,
)

PREC = 256
DPS = 50
BALL = kit.Kit("ball", PREC)
PAPER = strategies.for_hypotheses({"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)})
LOSSES = ("logistic", "exponential", "correlation")


class IvOps:
    """The functions a test function calls, for intervals (their methods; min/max as the kit reduces; constants
    as arb balls and fmpq, so that arb meets an interval on either side)."""

    exp, log = staticmethod(lambda x: x.exp()), staticmethod(lambda x: x.log())
    log1p, expm1, sqrt = (
        staticmethod(lambda x: x.log1p()),
        staticmethod(lambda x: x.expm1()),
        staticmethod(lambda x: x.sqrt()),
    )
    min, max = staticmethod(lambda a, b: extremum("min", a, b)), staticmethod(lambda a, b: extremum("max", a, b))
    third, tenth = staticmethod(lambda: to_arb("1/3")), staticmethod(lambda: fmpq(1, 10))
    seventh = staticmethod(lambda: Fraction(1, 7))


class MpOps:
    """The same functions in mpmath (the reference)."""

    exp, log, log1p, expm1, sqrt = mpmath.exp, mpmath.log, mpmath.log1p, mpmath.expm1, mpmath.sqrt
    min, max = staticmethod(min), staticmethod(max)
    third, tenth = staticmethod(lambda: mpmath.mpf(1) / 3), staticmethod(lambda: mpmath.mpf(1) / 10)
    seventh = staticmethod(lambda: mpmath.mpf(1) / 7)


# f(o, x, y) on x, y in [0.4, 2.1]: every operation, with constants of each type on both sides
FUNCTIONS = {
    "add": lambda o, x, y: x + y + 3 + np.float64(0.25) + o.third() + o.seventh(),
    "sub": lambda o, x, y: x - y - 0.25 - o.tenth(),
    "rsub": lambda o, x, y: 2 - x + (o.third() - y) + (o.seventh() - x),
    "mul": lambda o, x, y: x * y * 3 * o.third() * np.float64(1.5),
    "div": lambda o, x, y: x / y,
    "rdiv": lambda o, x, y: 3 / x + o.third() / (x * y),
    "cdiv": lambda o, x, y: x / 3 + y / o.tenth(),
    "neg": lambda o, x, y: -(x * y) + (+x),
    "pow": lambda o, x, y: x**3 + (y - 1) ** 2 + x**0 + y**1 + (x - y) ** 4,
    "square": lambda o, x, y: x * x - y * y,
    "exp": lambda o, x, y: o.exp(x * y),
    "log": lambda o, x, y: o.log(x + y),
    "log1p": lambda o, x, y: o.log1p(x * y) + o.log1p(x - 0.399),
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
LO, HI = 0.4, 2.1
TIES = {  # where a kink function is not differentiable (no derivative to compare)
    "abs-kink": lambda x, y: x == y,
    "min-kink": lambda x, y: x == y,
    "max-kink": lambda x, y: x == 1 or y == 1,
}
coord = st.floats(LO, HI, allow_nan=False)


def ends(x: Iv) -> tuple:
    """The endpoints as 70-digit mpf (display / comparison with the references)."""
    with mpmath.workdps(70):
        return mpmath.mpf(x.a), mpmath.mpf(x.b)


def encloses(x: Iv, ref, tol: float = 1e-40) -> bool:
    """The interval contains the 50-digit reference (up to ``tol * (1 + |ref|)``: the reference's own error)."""
    if not x.is_finite():
        return False
    a, b = ends(x)
    with mpmath.workdps(70):
        slack = tol * (1 + abs(ref))
        return a - slack <= ref <= b + slack


def reference(f, theta: list) -> tuple:
    with mpmath.workdps(DPS):
        th = [mpmath.mpf(t) for t in theta]
        val = f(MpOps, *th)
        grad = [mpmath.diff(lambda t, j=j: f(MpOps, *th[:j], t, *th[j + 1 :]), th[j]) for j in range(len(th))]
    return val, grad


def check(out: IvJet, f, theta: list, name: str) -> None:
    """The interval jet ``out`` encloses ``f`` and its gradient at ``theta`` (a kink: the value only)."""
    val, grad = reference(f, theta)
    if name in TIES and TIES[name](*theta):
        grad = []
    assert isinstance(out, IvJet) and out.p == len(theta), name
    assert encloses(out.val, val), (name, theta, out.val, val)
    for j, (g, r) in enumerate(zip(out.grad, grad)):
        assert encloses(g, r), (name, theta, j, g, r)


# ---------------------------------------------------------------------- (a) points
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=12, deadline=None)
@given(x=coord, y=coord)
def test_points_enclose_value_and_derivative(name, x, y):
    f = FUNCTIONS[name]
    with workprec(PREC), ivprec(PREC):  # the arb constants at PREC bits too
        plain = f(IvOps, Iv(x), Iv(y))
        out = f(IvOps, *iv_variables([x, y], [x, y]))
    val, _ = reference(f, [x, y])
    assert isinstance(plain, Iv) and encloses(plain, val), (name, plain, val)
    check(out, f, [x, y], name)
    a, b = ends(out.val)
    assert b - a <= 1e-60 * (1 + abs(val))  # sharp at a point


# ---------------------------------------------------------------------- (b) intervals: every member enclosed
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=8, deadline=None)
@given(c=st.tuples(coord, coord), h=st.floats(1e-3, 0.1), seed=st.integers(0, 2**16))
def test_intervals_enclose_every_member(name, c, h, seed):
    f = FUNCTIONS[name]
    lo, hi = [t - h for t in c], [t + h for t in c]
    with workprec(PREC), ivprec(PREC):
        plain = f(IvOps, Iv(lo[0]).union(hi[0]), Iv(lo[1]).union(hi[1]))
        out = f(IvOps, *iv_variables(lo, hi))
    rng = np.random.default_rng(seed)
    corners = [[lo[0], lo[1]], [lo[0], hi[1]], [hi[0], lo[1]], [hi[0], hi[1]]]
    for theta in corners + [list(rng.uniform(lo, hi)) for _ in range(3)]:
        assert encloses(plain, reference(f, theta)[0]), (name, theta)
        check(out, f, theta, name)


# ---------------------------------------------------------------------- (c) conversion, comparisons, edges
def test_conversion_is_exact_and_outward():
    with workprec(600), ivprec(PREC):
        big = arb((2**300 + 1, -300))  # a 301-bit mantissa: beyond iv.prec, still exact
        x = to_iv(big)
        assert x.is_exact() and x.man_exp() == (2**300 + 1, -300)
        ball = arb(1, arb((1, -10)))
        assert to_iv(ball).a == to_iv(ball.lower()).a and to_iv(ball).b == to_iv(ball.upper()).b
        third = to_iv(Fraction(1, 3))
        (ma, ea), (mb, eb) = third.lower().man_exp(), third.upper().man_exp()
        lo, hi = Fraction(ma) * Fraction(2) ** ea, Fraction(mb) * Fraction(2) ** eb
        assert lo < Fraction(1, 3) < hi and hi - lo < Fraction(1, 2 ** (PREC - 2))
        assert to_iv(0.1).is_exact() and to_iv(0.1).man_exp() == to_iv(Fraction(0.1)).man_exp()
        assert to_iv("3/8") == Fraction(3, 8) and to_iv(fmpq(3, 8)) == 0.375 and to_iv(np.int64(7)) == 7
        assert not to_iv(arb.nan()).is_finite() and to_iv(arb.nan()).contains(to_iv(10**100))
        assert to_iv(arb.pos_inf()) > 10**100 and to_iv(float("-inf")) < -(10**100)
        pts = iv_point([[Fraction(1, 4), 0.5], [1, "1/3"]])
        assert pts.shape == (2, 2) and pts[0, 0] == Fraction(1, 4) and not pts[1, 1].is_exact()
        with pytest.raises(TypeError):
            to_iv(object())
        with pytest.raises(TypeError):
            to_iv(jet.variables([0.0], [1.0])[0])  # the prover's jets do not mix in


def test_arb_meets_intervals_on_either_side():
    with ivprec(PREC):
        x = Iv(Fraction(1, 2)).union(1)
        for y in (arb(2) + x, x + arb(2), arb(2) - x, arb(2) * x, arb(2) / x, np.float64(2.0) * x, sum([x, x], arb(0))):
            assert isinstance(y, Iv), type(y)
        assert (arb(3) > x) and (arb(0) < x) and not (arb("0.75") < x) and not (arb("0.75") >= x)
        assert isinstance(arb(1) + iv_variables([0], [1])[0], IvJet)
        assert isinstance(extremum("min", arb(0), x), Iv) and extremum("max", arb(0), x).contains(x)
        assert extremum("max", arb("0.75"), x).contains(Iv("3/4").union(1))


def test_certain_comparisons_and_domain_edges():
    with ivprec(PREC):
        a, b, wide = Iv(1).union(2), Iv(3).union(4), Iv(0).union(1)
        assert a < b and b > a and a <= 2 and not (a < 2) and a != b and not (a == a) and Iv(2) == 2
        assert not (wide < Iv("1/2")) and not (wide >= Iv("1/2"))  # undecided: False both ways
        whole = [wide.log(), Iv(-1).union(1).sqrt(), Iv(-2).union(0).log1p(), Iv(1) / wide, 1 / Iv(0)]
        assert all(not w.is_finite() and w.contains(to_iv(10**50)) and w.contains(-(10**50)) for w in whole)
        z = Iv(-1).union(2)
        assert (z * z).a == libmp.fzero and (z * Iv(-1).union(2)).contains(-2)  # an aliased square is >= 0
        assert z**2 >= 0 and (z**3).contains(-1) and abs(z).lower() == 0
        assert wide.mid() == Fraction(1, 2) and wide.rad() == Fraction(1, 2) and float(wide) == 0.5
        with pytest.raises(ValueError):
            _ = wide ** (-1)
        with pytest.raises(ValueError, match="disjoint"):
            a.intersection(b)
        j = iv_variables([Fraction(1, 3)], [Fraction(1, 2)])[0]
        assert j.contains(Fraction(2, 5)) and list(iv_gradient(j)) == [1] and not iv_gradient(j.log())[0].overlaps(0)
        assert not iv_gradient(wide_jet := iv_variables([0], [1])[0].sqrt())[0].is_finite(), wide_jet
        with pytest.raises(ValueError, match="give p"):
            iv_gradient(Iv(1))
        assert list(iv_gradient(Iv(1), 2)) == [0, 0] and iv_value(2) == 2 and iv_value(j) is j.val


def test_the_kit_takes_intervals_as_balls():
    with ivprec(PREC):
        x, j = Iv(1), iv_variables([0], [1])[0]
    assert kit.is_ball(x) and kit.is_ball(j) and is_ball(x) and has_jets(np.array([x, arb(1)], dtype=object))
    assert to_arb(x) is x and not kit.is_ball(1.0) and not kit.is_ball(mpmath.mpf(1))
    W = iv_variables(np.zeros((2, 2)), np.ones((2, 2)))
    for call in (BALL.svd, BALL.inv, BALL.det, BALL.singular_values):
        with pytest.raises(TypeError, match="do not differentiate"):
            call(W)


def test_mean_value_is_rigorous_and_tighter_than_naive():
    """f(x,y) = x^2 - xy + 1 on [0.9,1.1]^2: min 0.82 at (0.9,1.1); naive lower 0.6, mean-value lower 0.76."""
    lo, hi = ["9/10", "9/10"], ["11/10", "11/10"]
    f = lambda x, y: x * x - x * y + 1  # noqa: E731
    with ivprec(PREC):
        m_c, m_b = f(*iv_point([1, 1])), f(*iv_variables(lo, hi))
        low, enc = iv_lower_bound(m_c, m_b, lo, hi), iv_mean_value(m_c, m_b, lo, hi)
        assert low.is_exact() and low <= Fraction(82, 100) and low > Fraction(75, 100) and iv_value(m_b) < 1.41
        assert iv_value(m_b).lower() < Fraction(61, 100) and enc.contains(Fraction(82, 100)) and enc.contains(1)
        assert iv_lower_bound(m_c, m_c, lo, hi) == 1  # a constant: gradient 0
        with pytest.raises(ValueError, match="disjoint"):
            iv_mean_value(m_c + 5, m_b, lo, hi)  # not the margin at the centre


# ---------------------------------------------------------------------- (d) through the kit
@settings(max_examples=8, deadline=None)
@given(ds=PAPER, seed=st.integers(0, 2**16), loss=st.sampled_from(LOSSES))
def test_kit_grad_W_and_hessian_vector_product_in_intervals(ds, seed, loss):
    """On a box around W0: the interval-jet grad_W contains float64 ``model.grad_W`` at points of the box; the jet
    gradient of <grad L(W), V> contains the analytic ball Hessian-vector product at W0 (sharply at a point); the jet
    gradient of the loss is the ball grad_W."""
    rng = np.random.default_rng(seed)
    d, r = ds.d, 1e-3
    W0, V = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    with BALL.context(), ivprec(PREC):
        D, Vb = BALL.data(ds), BALL.exact(V)
        Hv = BALL.hessian_W(D, W0, loss) @ Vb.ravel()
        G = BALL.grad_W(D, iv_variables(W0 - r, W0 + r), loss)
        assert all(isinstance(g, IvJet) for g in G.ravel())
        for W in (W0, W0 - r, W0 + r, W0 + rng.uniform(-r, r, size=(d, d))):
            G64 = model.grad_W(ds, W, loss)
            scale = max(np.abs(G64).max(), 1e-300)
            for g, x in zip(G.ravel(), G64.ravel()):
                assert encloses(g.val, mpmath.mpf(float(x)), tol=1e-12 * scale), (g, x)
        ip = np.sum(G * Vb)
        assert all(g.contains(h) for g, h in zip(iv_gradient(ip), Hv)), (iv_gradient(ip), Hv)
        pt = iv_variables(W0, W0)
        gp = iv_gradient(np.sum(BALL.grad_W(D, pt, loss) * Vb))
        assert all(g.overlaps(h) and float(g.rad()) < 1e-60 * (1 + abs(float(h.mid()))) for g, h in zip(gp, Hv))
        Lp = BALL.loss(D, pt, loss)
        assert all(g.overlaps(h) for g, h in zip(iv_gradient(Lp), BALL.grad_W(D, W0, loss).ravel()))


@pytest.mark.parametrize("name, sizes, loss", [("causal", {"n": 2, "T": 3, "d": 2}, "logistic"), ("ntp", {}, "nll")])
def test_kit_masked_and_next_token_data_in_intervals(name, sizes, loss):
    ds = strategies.batch(name, 1, seed=1, **sizes)[0]
    W0 = np.random.default_rng(0).normal(size=(ds.d, ds.d))
    with BALL.context(), ivprec(PREC):
        D = BALL.data(ds)
        L = BALL.loss(D, iv_variables(W0, W0), loss)
        assert L.val.overlaps(BALL.loss(D, W0, loss))
        assert all(g.overlaps(h) for g, h in zip(iv_gradient(L), BALL.grad_W(D, W0, loss).ravel()))
        s = BALL.softmax(D, iv_variables(W0 - 1e-3, W0 + 1e-3))
        if D.mask is not None:  # invisible tokens: probability exactly 0 (a constant)
            assert all(s[i, t].is_zero() for i, t in zip(*np.nonzero(~D.mask)))


# ---------------------------------------------------------------------- (e), (f) a claim's margin and its certificate
CLAIMS = """
from attsvm.claims import Outcome, claim


@claim(id="descent", title="<grad L(W), W^mm> < 0 on a small ball", origin="derived",
       hypotheses={"data": "equal_scores", "n": 2, "T": 3, "d": 2, "region": "ball:1/4"},
       params={"loss": "logistic"}, examples=10)
def descent(case):
    k = case.kit
    mm = k.wmm(case.data)
    if mm.status != "optimal":
        return Outcome(ok=True, inconclusive="infeasible")
    W = case.param()
    m = -(k.grad_W(case.data, W, case.hypotheses["loss"]) * mm.W).sum()
    return Outcome(ok=bool(m > 0), margin=m)
"""


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    """A real certificate: n=2, T=3, d=2 data (where the naive enclosure proves no leaf: the mean-value form and
    so the gradients are needed)."""
    d = tmp_path_factory.mktemp("prove_iv")
    (d / "claims.py").write_text(CLAIMS)
    generate.equal_scores(2, 3, 2, seed=3).save(d / "eq.npz")
    path = d / "c.json"
    args = ["prove", str(d / "claims.py"), "--only", "descent", "--data", str(d / "eq.npz"), "--certificate", str(path)]
    assert main(args) == 0
    return path


def _margin(path):
    """The claim's margin on the certificate's data (as the verifier builds it) and the proved leaves' boxes."""
    from attsvm.claims import discover, select
    from attsvm.data import load
    from attsvm.prove.certificate import qparse, rebuild
    from attsvm.prove.regions import from_dict
    from attsvm.prove.statement import constants_with, margin_function

    c = json.loads(path.read_text())
    (claim,) = select(discover([c["file"]]), [c["claim"]])
    data = load(path.parent / "eq.npz")
    margin = margin_function(claim, data, constants_with(claim, None), from_dict(c["region"]), PREC)
    root = tuple(qparse(x, "") for x in c["root"]["lo"]), tuple(qparse(x, "") for x in c["root"]["hi"])
    boxes = [rebuild(*root, lf["path"], lf["splits"]) for lf in c["leaves"] if lf["status"] == "proved"]
    return margin, boxes


def test_arb_and_interval_enclosures_of_a_margin_overlap(cert):
    """On proved leaves of the certificate: the arb-jet and interval-jet values and gradients overlap, both lower
    bounds are > 0, below the float64 margin at sampled points of the box; naive intervals prove no leaf here."""
    margin, boxes = _margin(cert)
    rng = np.random.default_rng(0)
    assert len(boxes) > 20
    with workprec(PREC), ivprec(PREC):
        for lo, hi in boxes[:: max(1, len(boxes) // 8)]:
            c = [(a + b) / 2 for a, b in zip(lo, hi)]
            jb, ib = margin(jet.variables(lo, hi)), margin(iv_variables(lo, hi))
            assert isinstance(ib, IvJet) and isinstance(jb, jet.Jet)
            assert ib.val.overlaps(jb.val) and all(g.overlaps(h) for g, h in zip(iv_gradient(ib), jet.gradient(jb)))
            low_iv = iv_lower_bound(margin(iv_point(c)), ib, lo, hi)
            low_arb = jet.lower_bound(margin(jet.point(c)), jb, lo, hi)
            assert low_iv > 0 and low_arb > 0 and not ib.val > 0
            for _ in range(4):
                th = [Fraction(float(a) + float(b - a) * rng.random()) for a, b in zip(lo, hi)]
                th = [min(max(t, a), b) for t, a, b in zip(th, lo, hi)]
                m = margin(iv_point(th))
                assert low_iv <= m and low_arb <= m  # arb meets the interval: a certain comparison


def test_verification_is_independent_of_the_prover_jets(cert, monkeypatch, capsys):
    """The re-check passes with the prover's jets and mean-value form disabled (it never calls them)."""

    def boom(*args, **kwargs):
        raise AssertionError("the verifier called the prover's enclosure code")

    for name in ("variables", "point", "lower_bound", "mean_value", "gradient", "value"):
        monkeypatch.setattr(jet, name, boom)
    monkeypatch.setattr(jet.Jet, "__init__", boom)
    assert main(["prove", "--verify", str(cert)]) == 0
    out = capsys.readouterr().out
    assert "verified: descent holds" in out and "intervals" in out


def test_a_planted_wrong_chain_rule_fails_the_verification(cert, monkeypatch, capsys):
    """exp's derivative planted as 2 e^x x' in the interval jets: the certificate no longer verifies, and the one
    line names a leaf (so the verifier really recomputes the gradients it relies on)."""
    assert main(["prove", "--verify", str(cert)]) == 0
    capsys.readouterr()

    def wrong_exp(self):
        e = self.val.exp()
        return IvJet(e, tuple(g * (2 * e) for g in self.grad))

    monkeypatch.setattr(I.IvJet, "exp", wrong_exp)
    assert main(["prove", "--verify", str(cert)]) == 1
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "leaf '" in out and "interval lower bound there is" in out, out
