r"""Framed cones (attsvm.prove.frame, the framed tests of attsvm.prove.regions.Cone): the prover works in the
coordinates $\vartheta$ of an exact orthogonal frame $M$ along the cone's axis, $W=M\vartheta$.

Checked from the definitions, in exact rationals and independently of the module's formulas: the frame is exactly
orthogonal with first column $W^\circ$ (and equals the Gram–Schmidt process up to positive factors); ``embed`` is
$M\vartheta$ in every kind of number the prover and the verifier use; the box tests in $\vartheta$ agree with the
membership of $W=M\vartheta$ (a box called excluded holds no region point, a box called contained holds no point
outside) — and the checker catches planted unsound tests (a term of $\sum_jc_j\vartheta_j^2$ dropped, the
$\vartheta_0\ge0$ clip removed); the bounding box holds every point of the cone set (mapped by $M^{-1}$ exactly) and
is tight; a framed proof's leaves tile the root box, and its certificate verifies while tampered ones do not.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from flint import arb

from attsvm.ball import jet
from attsvm.ball.numbers import to_arb, workprec
from attsvm.cli import main
from attsvm.prove import Cone, from_dict, parse
from attsvm.prove.bnb import prove
from attsvm.prove.certificate import check_leaves
from attsvm.prove.frame import Frame, round_down, round_up, sqrt_bounds
from attsvm.prove.interval import iv_point, iv_variables, ivprec

F = Fraction


# ------------------------------------------------------------------------------------------ oracle
def dot(a, b) -> Fraction:
    return sum((x * y for x, y in zip(a, b)), F(0))


def to_w(cone: Cone, theta) -> tuple[Fraction, ...]:
    r"""$W=\sum_j\vartheta_jm_j$ from the frame's columns (exact)."""
    cols = cone.frame.columns
    return tuple(sum((t * c[i] for t, c in zip(theta, cols)), F(0)) for i in range(cone.p))


def member_w(cone: Cone, W) -> bool:
    """Membership of a point of parameter space, from the cone's definition (multiplied form, exact)."""
    w = cone.direction
    nn, d = dot(W, W), dot(W, w)
    c = 1 - cone.mu
    return cone.R**2 <= nn <= cone.R1**2 and d >= 0 and d * d >= c * c * nn * dot(w, w)


def member(cone: Cone, theta) -> bool:
    return member_w(cone, to_w(cone, theta))


def gram_schmidt(vectors):
    """The Gram–Schmidt process over the rationals, dropping dependent (zero) vectors."""
    out = []
    for v in vectors:
        u = list(v)
        for b in out:
            f = dot(u, b) / dot(b, b)
            u = [x - f * y for x, y in zip(u, b)]
        if any(x != 0 for x in u):
            out.append(tuple(u))
    return out


def axes(rng: np.random.Generator):
    """Axes of several kinds: float64 normals, with zeros, a coordinate axis, rationals, tiny and huge entries."""
    out = []
    for p in (1, 2, 3, 4, 9):
        out.append(tuple(F(x) for x in rng.standard_normal(p)))
        v = [F(x) for x in rng.standard_normal(p)]
        v[int(rng.integers(p))] = F(0) if p > 1 else F(1)
        out.append(tuple(v))
        out.append(tuple(F(int(i == p // 2)) for i in range(p)))
        out.append(tuple(F(int(rng.integers(-5, 6)), int(rng.integers(1, 8))) or F(1) for _ in range(p)))
    out.append((F(1e-310), F(-7), F(2, 3), F(1e300)))
    out.append((F(1), F(1), F(1), F(1)))  # ties: the first largest entry leads
    return [a for a in out if any(x != 0 for x in a)]


def cones(rng: np.random.Generator) -> list[Cone]:
    out = []
    for p in (2, 4, 9):
        for mu, R, R1 in ((F(1, 2048), 4, 16), (F(1, 50), 1, 3), (F(1, 3), 0, 2), (F(1), 1, 2)):
            out.append(Cone(rng.standard_normal(p), mu, R, R1))
    out.append(Cone(np.eye(3)[0], F(1, 100), 1, 2))
    return out


# ------------------------------------------------------------------------------------------ the frame
def test_the_frame_is_exactly_orthogonal_and_is_gram_schmidt():
    rng = np.random.default_rng(1)
    for w in axes(rng):
        fr = Frame(w)
        p = len(w)
        M = fr.columns
        assert M[0] == w and len(M) == p
        for i in range(p):
            assert fr.norms2[i] == dot(M[i], M[i]) > 0
            for j in range(i):
                assert dot(M[i], M[j]) == 0, (w, i, j)
        # the Gram–Schmidt process on (w, e_{i_{p-1}}, ..., e_{i_1}, e_{i_0}): each column a positive multiple
        order = fr.order
        assert sorted(order) == list(range(p)) and abs(w[order[0]]) == max(abs(x) for x in w)
        e = [tuple(F(int(k == i)) for k in range(p)) for i in range(p)]
        gs = gram_schmidt([w] + [e[i] for i in reversed(order)])
        assert len(gs) == p and gs[0] == w
        for k in range(1, p):
            g = gs[p - k]  # e_{i_k} came (p - k)-th
            ratio = {M[k][i] / g[i] for i in range(p) if g[i] != 0}
            assert len(ratio) == 1 and ratio.pop() > 0 and all(M[k][i] == 0 for i in range(p) if g[i] == 0)
        # dyadic axis -> dyadic frame; the squared norms of the other columns lie in [1, 4p]
        if all(q.denominator & (q.denominator - 1) == 0 for q in w):
            assert all(q.denominator & (q.denominator - 1) == 0 for c in M for q in c)
        assert all(1 <= c <= 4 * p for c in fr.norms2[1:])
    # a coordinate axis: the identity with the columns reordered
    fr = Frame([0, 0, 1, 0])
    assert fr.order == (2, 0, 1, 3) and [c.index(1) for c in fr.columns] == [2, 0, 1, 3]
    assert all(sum(x != 0 for x in c) == 1 for c in fr.columns)


def test_coords_inverts_embed_exactly():
    rng = np.random.default_rng(2)
    for w in axes(rng):
        fr = Frame(w)
        for _ in range(5):
            theta = tuple(F(int(rng.integers(-1000, 1000)), int(rng.integers(1, 300))) for _ in w)
            W = tuple(fr.embed(theta))
            assert W == tuple(sum((t * c[i] for t, c in zip(theta, fr.columns)), F(0)) for i in range(len(w)))
            assert fr.coords(W) == theta


def test_embed_encloses_in_every_kind_of_number():
    """Balls, ball jets, intervals and interval jets of a box: the value encloses $M\\vartheta$ at the box's
    points, the jet's gradient is the row of $M$ (exact for a dyadic frame)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal(9)
    fr = Frame(w)
    lo = tuple(F(x) for x in rng.uniform(-1, 0, 9))
    hi = tuple(a + F(x) for a, x in zip(lo, rng.uniform(0, 1, 9)))
    pts = [tuple(a + (b - a) * F(int(k), 8) for a, b, k in zip(lo, hi, rng.integers(0, 9, 9))) for _ in range(5)]
    rows = fr.matrix()
    with workprec(128), ivprec(128):
        ball_jets = fr.embed(jet.variables(lo, hi))
        iv_jets = fr.embed(iv_variables(lo, hi))
        for i in range(9):
            grad = jet.gradient(ball_jets[i], 9)
            assert all(g.is_exact() and g.contains(to_arb(x)) for g, x in zip(grad, rows[i]))
            assert all(g.contains(x) for g, x in zip(iv_jets[i].grad, rows[i]))
        for t in pts:
            W = fr.embed(t)
            balls = fr.embed([to_arb(x) for x in t])
            ivs = fr.embed(iv_point(t))
            for i in range(9):
                assert balls[i].contains(to_arb(W[i])) and ivs[i].contains(W[i])
                assert ball_jets[i].contains(to_arb(W[i])) and iv_jets[i].val.contains(W[i])
                assert isinstance(balls[i], arb)
    with workprec(512):  # a dyadic frame, a precision that holds the products: exact
        assert all(b.is_exact() for t in pts for b in fr.embed([to_arb(x) for x in t]))


def test_sqrt_bounds_and_rounding_are_safe():
    rng = np.random.default_rng(4)
    qs = [F(2), F(1, 3), F(9, 4), F(10**40 + 7, 3), F(1, 10**50), F(1e-310), *(F(x) for x in rng.uniform(0, 9, 30))]
    for q in qs:
        a, b = sqrt_bounds(q)
        assert a * a <= q <= b * b and a >= 0 and (b - a) <= b * F(1, 2**60)
        for r in (q, -q):
            assert round_down(r) <= r <= round_up(r)
            assert round_up(r) - round_down(r) <= abs(r) * F(1, 2**51)
    assert sqrt_bounds(F(9, 4)) == (F(3, 2), F(3, 2)) and sqrt_bounds(F(0)) == (0, 0)


# ------------------------------------------------------------------------------------------ the box tests
def random_box(cone: Cone, rng: np.random.Generator):
    """A box of coordinates near the cone: around the coordinates of a region point (often on its boundary) or
    anywhere around the bounding box, widths from 1e-3 to 2 times the box's span per coordinate."""
    lo0 = np.array([float(a) for a in cone.bounding_box()[0]])
    hi0 = np.array([float(b) for b in cone.bounding_box()[1]])
    span = hi0 - lo0
    mode = rng.integers(3)
    if mode < 2:
        raw = rng.uniform(-1, 1, cone.raw_size)
        if mode == 1:
            raw = np.clip(raw * 8, -1, 1)  # the boundary
        anchor = np.array([float(x) for x in cone.coords(cone.point(raw))])
    else:
        anchor = rng.uniform(lo0 - 0.3 * span, hi0 + 0.3 * span)
    width = span * 10 ** rng.uniform(-3, 0.3) * rng.uniform(0.2, 1, cone.p)
    lo = anchor - rng.uniform(0, 1, cone.p) * width
    return tuple(F(x) for x in lo), tuple(F(x) for x in lo + width)


def box_points(lo, hi, rng: np.random.Generator, n: int = 40):
    """Exact points of the box: random rational ones, random corners, the centre."""
    p = len(lo)
    out = [tuple((a + b) / 2 for a, b in zip(lo, hi))]
    for _ in range(n):
        out.append(tuple(a + (b - a) * F(int(k), 64) for a, b, k in zip(lo, hi, rng.integers(0, 65, p))))
    for _ in range(min(n, 2**p)):
        out.append(tuple(b if k else a for a, b, k in zip(lo, hi, rng.integers(0, 2, p))))
    return out


def violations(tests, cone: Cone, rng: np.random.Generator, n_boxes: int = 80):
    bad, n_ex, n_in = [], 0, 0
    for _ in range(n_boxes):
        lo, hi = random_box(cone, rng)
        ex, cont = tests.excludes(lo, hi), tests.contains_box(lo, hi)
        if not (ex or cont):
            continue
        pts = box_points(lo, hi, rng)
        n_ex += ex
        n_in += cont
        if ex and any(member(cone, t) for t in pts):
            bad.append(("excludes", cone, lo, hi))
        if cont and not all(member(cone, t) for t in pts):
            bad.append(("contains_box", cone, lo, hi))
    return bad, n_ex, n_in


class DroppedTerm:
    """A planted unsound test: the weighted sum of squares $q$ without its last term."""

    def __init__(self, cone: Cone) -> None:
        self.cone = cone

    def _tq(self, L, H):
        tmin, tmax, qmin, qmax = Cone._tq(self.cone, L, H)
        c, a, b = self.cone.frame.norms2[-1], L[-1], H[-1]
        big = c * max(a * a, b * b)
        small = c * (a * a if a > 0 else b * b if b < 0 else 0)
        return tmin, tmax, qmin - small, qmax - big

    def _planted(self, test: str, lo, hi):
        """The cone's own ``test`` (``excludes`` / ``contains_box``) with this ``_tq`` in place of its own."""
        self.cone._tq = self._tq
        try:
            return getattr(self.cone, test)(lo, hi)
        finally:
            del self.cone._tq

    def excludes(self, lo, hi):
        return self._planted("excludes", lo, hi)

    def contains_box(self, lo, hi):
        return self._planted("contains_box", lo, hi)


class NoClip(DroppedTerm):
    r"""A planted unsound test: $t_-=c_0\ell_0^2$ without clipping $\vartheta_0$ at 0."""

    def _tq(self, L, H):
        tmin, tmax, qmin, qmax = Cone._tq(self.cone, L, H)
        return self.cone.frame.norms2[0] * L[0] * L[0], tmax, qmin, qmax


def test_framed_box_tests_are_sound():
    rng = np.random.default_rng(5)
    n_ex = n_in = 0
    for cone in cones(rng):
        bad, e, i = violations(cone, cone, rng)
        assert not bad, bad[0]
        n_ex, n_in = n_ex + e, n_in + i
    assert n_ex >= 200 and n_in >= 100, (n_ex, n_in)


@pytest.mark.parametrize("planted", [DroppedTerm, NoClip])
def test_the_soundness_check_catches_a_planted_unsound_test(planted):
    rng = np.random.default_rng(6)
    caught = set()
    for cone in cones(rng):
        bad, _, _ = violations(planted(cone), cone, rng)
        caught.update(which for which, *_ in bad)
    assert "excludes" in caught, caught
    if planted is DroppedTerm:
        assert "contains_box" in caught, caught


def test_point_boxes_are_decided_exactly_and_contains_is_membership():
    rng = np.random.default_rng(7)
    for cone in cones(rng):
        for _ in range(30):
            W = cone.point(np.clip(rng.uniform(-1, 1, cone.raw_size) * 4, -1, 1))
            W = W * (1 + rng.choice([-1e-12, 0, 1e-12]))
            t = cone.coords(W)
            m = member_w(cone, tuple(F(x) for x in W))
            assert cone.contains(W) == m and cone.contains_box(t, t) == m and cone.excludes(t, t) == (not m)
            assert member(cone, t) == m


def test_excludes_is_exact_on_small_boxes_off_the_cone():
    """Boxes at twice the cone's angle, of a width 1/20 of their distance from the cone, are excluded (the framed
    test decides the box exactly), while boxes around points of the cone never are."""
    rng = np.random.default_rng(8)
    for p in (4, 9):
        w = rng.standard_normal(p)
        cone = Cone(w, 0.001, 1, 3)
        phi = math.acos(1 - 0.001)
        what = w / np.linalg.norm(w)
        for _ in range(20):
            e = rng.standard_normal(p)
            e -= (e @ what) * what
            e /= np.linalg.norm(e)
            t = np.array([float(x) for x in cone.coords(2 * (math.cos(2 * phi) * what + math.sin(2 * phi) * e))])
            h = 0.05 * 2 * math.sin(phi) / math.sqrt(p) / np.sqrt([float(c) for c in cone.frame.norms2])
            assert cone.excludes(tuple(F(v) for v in t - h), tuple(F(v) for v in t + h))
            t = np.array([float(x) for x in cone.coords(2 * what)])
            assert not cone.excludes(tuple(F(v) for v in t - h), tuple(F(v) for v in t + h))


# ------------------------------------------------------------------------------------------ coverage
def test_the_bounding_box_holds_the_cone_set_and_is_tight():
    rng = np.random.default_rng(9)
    for cone in cones(rng):
        lo, hi = cone.bounding_box()
        assert all(isinstance(q, F) for q in (*lo, *hi))
        for _ in range(200):
            W = cone.point(np.clip(rng.uniform(-1, 1, cone.raw_size) * 3, -1, 1))
            t = cone.coords(W)  # exact: M^{-1} W by orthogonality
            assert to_w(cone, t) == tuple(F(x) for x in W)
            assert all(a <= x <= b for a, x, b in zip(lo, t, hi)), (cone, W)
        c = 1 - float(cone.mu)
        s = math.sqrt(1 - c * c)
        n = [float(q) for q in cone.frame.norms2]
        R, R1 = float(cone.R), float(cone.R1)
        assert abs(float(lo[0]) - c * R / math.sqrt(n[0])) <= 1e-12 * R1 / math.sqrt(n[0])
        assert abs(float(hi[0]) - R1 / math.sqrt(n[0])) <= 1e-12 * R1 / math.sqrt(n[0])
        for j in range(1, cone.p):  # attained: the point at angle φ towards m_j on the outer sphere
            assert abs(float(hi[j]) - R1 * s / math.sqrt(n[j])) <= 1e-12 * R1 and lo[j] == -hi[j]


def test_the_framed_box_is_far_smaller_than_the_axis_aligned_one():
    rng = np.random.default_rng(10)
    w = rng.standard_normal(9)
    framed, plain = Cone(w, F(1, 2048), 4, 16), Cone(w, F(1, 2048), 4, 16, framed=False)

    def volume(cone):  # of the box's image in parameter space (orthogonal columns: the product of lengths)
        lo, hi = cone.bounding_box()
        scale = [math.sqrt(float(c)) for c in cone.frame.norms2] if cone.framed else [1.0] * cone.p
        return math.prod(float(b - a) * k for a, b, k in zip(lo, hi, scale))

    assert volume(framed) < 1e-3 * volume(plain)


def test_a_framed_proof_tiles_its_root_box():
    r"""bnb on a framed cone with the margin $\langle W,W^\circ\rangle-\gamma\|W\|^2$ of $W=M\vartheta$ (true for
    $\gamma<(1-\mu)\|W^\circ\|/R_1$, false at the corners of the bounding box): proved, the leaves tile the root
    box (the certificate's coverage check), every outside leaf is excluded; with $\gamma$ too large a point of the
    region refutes it."""
    w = np.array([3.0, -1.0, 0.5, 2.0])
    cone = Cone(w, F(1, 8), 1, 4)
    nw = float(np.linalg.norm(w))

    def margin_of(gamma):
        ww = [to_arb(F(x)) for x in w]
        g = to_arb(F(gamma))

        def margin(theta):
            W = cone.embed(theta)
            return sum((a * b for a, b in zip(W[1:], ww[1:])), W[0] * ww[0]) - g * sum(
                (x * x for x in W[1:]), W[0] * W[0]
            )

        return margin

    proof = prove(margin_of(0.6), cone, max_boxes=3000)  # 0.6 < (7/8) |w| / 4 = 0.826
    assert proof.status == "proved" and proof.counts["outside"] > 0 and proof.counts["proved"] > 0
    assert proof.root == cone.bounding_box()
    leaves = [{"path": lf.path, "splits": list(lf.splits), "status": lf.status} for lf in proof.leaves]
    cert = {"root": {"lo": [str(q) for q in proof.root[0]], "hi": [str(q) for q in proof.root[1]]}, "leaves": leaves}

    def recheck(leaf, lo, hi):
        if leaf["status"] == "outside":
            return None if cone.excludes(lo, hi) else "not outside"
        return None

    assert check_leaves(cert, recheck) is None
    cert["leaves"] = leaves[:-1]
    assert "missing" in check_leaves(cert, recheck)
    bad = prove(margin_of(1.2 * nw / 4), cone, max_boxes=3000)
    assert bad.status == "refuted"
    cx = bad.counterexample
    c = tuple((a + b) / 2 for a, b in zip(cx.lo, cx.hi))
    assert cone.contains(cone.embed(c)) and member(cone, c)


# ------------------------------------------------------------------------------------------ records and specs
def test_records_and_specs_carry_the_frame():
    w = np.array([[1.0, 0.5], [0.25, -2.0]])
    cone = parse("cone:1/100,1,5", 4, direction=w)
    assert cone.framed and cone.to_dict()["frame"] == "orthogonal" and "orthogonal frame" in cone.describe()
    plain = parse("cone:1/100,1,5,axes", 4, direction=w)
    assert not plain.framed and plain.to_dict()["frame"] == "none" and plain != cone
    assert parse("cone:1/100,1,5,frame", 4, direction=w) == cone
    for r in (cone, plain):
        back = from_dict(json.loads(json.dumps(r.to_dict())))
        assert back == r and back.framed == r.framed and back.bounding_box() == r.bounding_box()
    rec = cone.to_dict()
    del rec["frame"]  # a record from before framing: axis-aligned
    assert from_dict(rec) == plain
    rec["frame"] = "rotated"
    with pytest.raises(Exception, match="frame must be"):
        from_dict(rec)
    with pytest.raises(Exception, match="cone takes 3 numbers"):
        parse("cone:1/100,1,5,tilted", 4, direction=w)


# ------------------------------------------------------------------------------------------ end to end
CLAIM = """
import numpy as np

from attsvm.claims import Outcome, claim

AXIS = np.array([[3.0, -1.0], [0.5, 2.0]])  # |AXIS|_F = sqrt(14.25) = 3.77...


def _m(case, gamma):
    k = case.kit
    W = case.param(direction=AXIS)
    m = np.sum(W * AXIS) - gamma * np.sum(W * W)
    return Outcome(ok=bool(m > 0), margin=m)


# true: <W, A> >= (7/8) |A| |W| and 0.6 |W|^2 <= 2.4 |W| < 3.30 |W| on the cone; false at the corners of its box
@claim(id="cone-linear", title="<W, A> > 0.6 |W|^2 on a cone around A", origin="derived",
       hypotheses={"data": "paper", "n": (1, 2), "T": (2, 3), "d": (2, 2), "region": "cone:1/8,1,4"},
       examples=5)
def cone_linear(case):
    return _m(case, 0.6)
"""


def test_a_framed_certificate_verifies_and_tampered_ones_do_not(tmp_path, capsys):
    path = tmp_path / "framed_claim.py"
    path.write_text(CLAIM)
    data = str(Path(__file__).resolve().parents[1] / "examples" / "prove" / "visual.npz")
    cert = tmp_path / "c.json"
    argv = ["prove", str(path), "--only", "cone-linear", "--data", data, "--boxes", "3000"]
    assert main([*argv, "--certificate", str(cert)]) == 0
    out = capsys.readouterr().out
    assert "cone-linear: proved on cone" in out and "orthogonal frame" in out, out
    doc = json.loads(cert.read_text())
    assert doc["region"]["frame"] == "orthogonal" and doc["counts"]["outside"] > 0
    assert main(["prove", "--verify", str(cert)]) == 0
    assert "verified: cone-linear holds" in capsys.readouterr().out

    def tampered(edit) -> str:
        d = json.loads(cert.read_text())
        edit(d)
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(d))
        assert main(["prove", "--verify", str(bad)]) == 1
        return capsys.readouterr().out

    def unframe(d):
        d["region"]["frame"] = "none"

    def shrink_root(d):
        d["root"]["hi"][0] = str(F(d["root"]["hi"][0]) / 2)

    def drop_leaf(d):
        d["leaves"].pop()

    def proved_to_outside(d):
        k = next(i for i, lf in enumerate(d["leaves"]) if lf["status"] == "proved")
        d["leaves"][k]["status"] = "outside"

    assert "the claim's region on this data is" in tampered(unframe)
    assert "root box is not the region's bounding box" in tampered(shrink_root)
    assert "missing" in tampered(drop_leaf)
    assert "recorded outside the region, but the region meets it" in tampered(proved_to_outside)
    # the axis-aligned cone still proves and verifies (the flag travels through the spec)
    cert2 = tmp_path / "c2.json"
    assert main([*argv, "--region", "cone:1/8,1,4,axes", "--certificate", str(cert2)]) == 0
    assert json.loads(cert2.read_text())["region"]["frame"] == "none"
    assert main(["prove", "--verify", str(cert2)]) == 0
