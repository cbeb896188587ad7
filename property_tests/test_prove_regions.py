"""Regions of parameter space (attsvm.prove.regions, attsvm.prove.boxes): rigour of the box tests, sampling,
records, the command-line spelling and exact halving.

The membership oracle here is written from the definitions (exact rationals), independently of the module; the
soundness checker is shown to catch a planted unsound test (:class:`CentreOnly`)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm.claims.case import Case
from attsvm.errors import InputError
from attsvm.prove import Annulus, Ball, Box, Cone, Region, from_dict, parse, split, to_fraction
from attsvm.prove.boxes import fraction_text

F = Fraction


# ------------------------------------------------------------------------------------------ oracle
def exact_member(region: Region, theta) -> bool:
    """Membership from the definitions, in exact rationals (independent of the module's box tests)."""
    t = [F(float(x)) if not isinstance(x, F) else x for x in np.asarray(theta, dtype=object).ravel()]
    nn = sum(x * x for x in t)
    if isinstance(region, Box):
        return all(a <= x <= b for x, a, b in zip(t, region.lo, region.hi))
    if isinstance(region, Ball):
        c = region.centre or (F(0),) * region.p
        return sum((x - y) ** 2 for x, y in zip(t, c)) <= region.radius**2
    if isinstance(region, Cone):
        w = region.direction
        dot = sum(x * y for x, y in zip(t, w))
        c = 1 - region.mu
        return region.R**2 <= nn <= region.R1**2 and dot >= 0 and dot * dot >= c * c * nn * sum(y * y for y in w)
    assert isinstance(region, Annulus)
    return region.r0**2 <= nn <= region.r1**2


def float_score(region: Region, pts: np.ndarray) -> np.ndarray:
    """A float64 'how far inside' (>= 0 inside, up to rounding) per row, to screen many sample points fast."""
    if isinstance(region, Box):
        lo = np.array([float(a) for a in region.lo])
        hi = np.array([float(b) for b in region.hi])
        return np.min(np.minimum(pts - lo, hi - pts), axis=1)
    if isinstance(region, Ball):
        c = np.zeros(region.p) if region.centre is None else np.array([float(q) for q in region.centre])
        return float(region.radius) - np.linalg.norm(pts - c, axis=1)
    n = np.linalg.norm(pts, axis=1)
    if isinstance(region, Cone):
        w = np.array([float(q) for q in region.direction])
        w = w / np.linalg.norm(w)
        ang = (pts @ w) - (1 - float(region.mu)) * n
        return np.minimum(np.minimum(n - float(region.R), float(region.R1) - n), ang)
    return np.minimum(n - float(region.r0), float(region.r1) - n)


TOL = 1e-9


def in_region(region: Region, pts: np.ndarray) -> np.ndarray:
    """Exact membership of every row, the exact oracle run only where the float screen is undecided."""
    s = float_score(region, pts)
    scale = max(1.0, float(max(abs(x) for x in parameter_box(region)[1])))
    out = s > TOL * scale
    for i in np.flatnonzero(np.abs(s) <= TOL * scale):
        out[i] = exact_member(region, pts[i])
    return out


# ------------------------------------------------------------------------------------------ regions and boxes
def regions(rng: np.random.Generator) -> list[Region]:
    out: list[Region] = []
    for p in (2, 3, 4):
        lo = rng.uniform(-2, 0, p)
        out.append(Box(lo, lo + rng.uniform(0.1, 2, p)))
        out.append(Box([F(-1, 3)] * p, [F(2, 7)] * p))
        out.append(Ball(F(3, 2), p=p))
        out.append(Ball(0.7, centre=rng.uniform(-1, 1, p)))
        out.append(Annulus(1, 2.5, p=p))
        out.append(Annulus(0, F(5, 3), p=p))
        for mu in (0.01, 0.2, 1.0):
            out.append(Cone(rng.standard_normal(p), mu, 1, 3, framed=False))
        out.append(Cone(rng.standard_normal(p), F(1, 3), 0, 2, framed=False))
    return out


def framed_cones(rng: np.random.Generator) -> list[Region]:
    """Cones in their default, framed coordinates (the box tests: ``test_prove_frame.py``); their points are
    points of parameter space all the same."""
    return [Cone(rng.standard_normal(p), mu, R, 3) for p in (2, 4, 9) for mu, R in ((0.01, 1), (F(1, 3), 0))]


def parameter_box(region: Region):
    """A box of parameter space holding the region (for a framed cone: its axis-aligned twin's)."""
    if isinstance(region, Cone) and region.framed:
        region = Cone(region.direction, region.mu, region.R, region.R1, framed=False)
    return region.bounding_box()


def random_box(region: Region, rng: np.random.Generator):
    """A box near the region: around a region point (often on its boundary) or anywhere in its bounding box,
    of widths from 1e-3 to 2 times the region's span; sometimes with non-dyadic (thirds) endpoints. Also returns
    the anchor point (a witness when it lies in the region and the box)."""
    lo0 = np.array([float(a) for a in region.bounding_box()[0]])
    hi0 = np.array([float(b) for b in region.bounding_box()[1]])
    span = float(np.max(hi0 - lo0))
    mode = rng.integers(3)
    if mode == 0:
        anchor = region.point(rng.uniform(-1, 1, region.raw_size))
    elif mode == 1:
        anchor = region.point(np.clip(rng.uniform(-1, 1, region.raw_size) * 8, -1, 1))  # boundary
    else:
        anchor = rng.uniform(lo0 - 0.3 * span, hi0 + 0.3 * span)
    width = span * 10 ** rng.uniform(-3, 0.3) * rng.uniform(0.2, 1, region.p)
    lo = anchor - rng.uniform(0, 1, region.p) * width
    hi = lo + width
    if rng.random() < 0.2:
        lo = tuple(F(math.floor(x * 3**8), 3**8) for x in lo)
        hi = tuple(F(math.ceil(x * 3**8), 3**8) for x in hi)
    else:
        lo, hi = tuple(F(x) for x in lo), tuple(F(x) for x in hi)
    return lo, hi, anchor


def box_samples(lo, hi, rng: np.random.Generator, n: int = 120) -> np.ndarray:
    """Uniform points of the box, its corners and its centre (float64, inside the box up to rounding)."""
    L = np.array([float(a) for a in lo])
    H = np.array([float(b) for b in hi])
    p = len(L)
    idx = np.arange(2**p)[:, None] >> np.arange(p) & 1
    corners = np.where(idx == 1, H, L)
    return np.vstack([rng.uniform(L, H, (n, p)), corners, (L + H) / 2])


def inside_box(lo, hi, x) -> bool:
    return all(a <= F(float(v)) <= b for v, a, b in zip(x, lo, hi))


class CentreOnly:
    """A planted unsound box test: it decides the whole box by its centre."""

    def __init__(self, region: Region) -> None:
        self.region = region

    def excludes(self, lo, hi) -> bool:
        return not self.region.contains([(a + b) / 2 for a, b in zip(lo, hi)])

    def contains_box(self, lo, hi) -> bool:
        return self.region.contains([(a + b) / 2 for a, b in zip(lo, hi)])


def violations(tests, region: Region, rng: np.random.Generator, n_boxes: int = 60):
    """(violations, #excluded, #contained): a box called excluded that holds a region point (a sample or the
    anchor), or called contained that holds a point outside the region."""
    bad, n_ex, n_in = [], 0, 0
    for _ in range(n_boxes):
        lo, hi, anchor = random_box(region, rng)
        ex, cont = tests.excludes(lo, hi), tests.contains_box(lo, hi)
        assert not (ex and cont)
        if not (ex or cont):
            continue
        pts = box_samples(lo, hi, rng)
        member = in_region(region, pts)
        if ex:
            n_ex += 1
            if member.any() or (inside_box(lo, hi, anchor) and exact_member(region, anchor)):
                bad.append(("excludes", region, lo, hi))
        if cont:
            n_in += 1
            if not member.all():
                bad.append(("contains_box", region, lo, hi))
    return bad, n_ex, n_in


# ------------------------------------------------------------------------------------------ soundness
def test_box_tests_are_sound():
    rng = np.random.default_rng(20260)
    counts: dict[tuple[str, str], int] = {}
    for region in regions(rng):
        bad, n_ex, n_in = violations(region, region, rng)
        assert not bad, bad[0]
        counts[region.kind, "ex"] = counts.get((region.kind, "ex"), 0) + n_ex
        counts[region.kind, "in"] = counts.get((region.kind, "in"), 0) + n_in
    # the checks above tested something: every kind excluded and contained many boxes
    assert len(counts) == 8 and min(counts.values()) >= 40, counts


def test_soundness_check_catches_a_planted_unsound_test():
    rng = np.random.default_rng(7)
    caught = set()
    for region in regions(rng):
        bad, _, _ = violations(CentreOnly(region), region, rng)
        caught.update((region.kind, which) for which, *_ in bad)
    assert caught == {(k, w) for k in ("box", "ball", "annulus", "cone") for w in ("excludes", "contains_box")}


def test_contains_agrees_with_the_definition():
    rng = np.random.default_rng(3)
    for region in regions(rng) + framed_cones(rng):
        lo0 = np.array([float(a) for a in parameter_box(region)[0]])
        hi0 = np.array([float(b) for b in parameter_box(region)[1]])
        pts = np.vstack(
            [rng.uniform(lo0 - 0.2, hi0 + 0.2, (40, region.p))]
            + [region.point(rng.uniform(-1, 1, region.raw_size)) for _ in range(10)]
        )
        for x in pts:
            assert region.contains(x) == exact_member(region, x)


def test_point_boxes_are_decided_exactly():
    """On a point box [θ, θ] the tests are exact: excludes = not contains_box = not member."""
    rng = np.random.default_rng(11)
    for region in regions(rng):
        for _ in range(30):
            x = region.point(np.clip(rng.uniform(-1, 1, region.raw_size) * 4, -1, 1))
            x = x * (1 + rng.choice([-1e-12, 0, 1e-12]))
            v = tuple(F(float(a)) for a in x)
            m = exact_member(region, x)
            assert region.contains_box(v, v) == m and region.excludes(v, v) == (not m)


def test_narrow_cone_excludes_small_boxes_off_its_surface():
    """The separating hyperplane makes exclusion tight: boxes at twice the cone's angle, of a width 1/20 of
    their distance from the cone, are excluded (the correlation bound alone needs widths ~1/φ times smaller)."""
    rng = np.random.default_rng(5)
    for p in (4, 9):
        w = rng.standard_normal(p)
        cone = Cone(w, 0.001, 1, 3, framed=False)
        phi = math.acos(1 - 0.001)
        what = w / np.linalg.norm(w)
        for _ in range(20):
            e = rng.standard_normal(p)
            e -= (e @ what) * what
            e /= np.linalg.norm(e)
            x = 2 * (math.cos(2 * phi) * what + math.sin(2 * phi) * e)
            h = 0.05 * 2 * math.sin(phi) / math.sqrt(p)
            assert cone.excludes(tuple(F(v) for v in x - h), tuple(F(v) for v in x + h))


# ------------------------------------------------------------------------------------------ bounding box
def test_bounding_box_holds_the_region_and_the_cone_box_is_tight():
    rng = np.random.default_rng(17)
    for region in regions(rng):
        lo, hi = region.bounding_box()
        assert all(isinstance(q, F) for q in (*lo, *hi))
        for _ in range(100):
            x = region.point(np.clip(rng.uniform(-1, 1, region.raw_size) * 3, -1, 1))
            assert inside_box(lo, hi, x)
        if isinstance(region, Cone):
            # the exact extremes of θ_j on the cone segment, in float: the box is within 1e-9 of them
            what = np.array([float(q) for q in region.direction])
            what /= np.linalg.norm(what)
            phi = math.acos(1 - float(region.mu))
            R, R1 = float(region.R), float(region.R1)
            for j in range(region.p):
                for sign, bound in ((1, float(hi[j])), (-1, -float(lo[j]))):
                    a = math.acos(max(-1.0, min(1.0, sign * what[j])))
                    u = math.cos(max(0.0, a - phi))
                    top = R1 * u if u >= 0 else R * u
                    assert top <= bound + 1e-12 and bound - top <= 1e-9 * R1


# ------------------------------------------------------------------------------------------ sampling
def test_draws_through_a_seeded_case_lie_in_the_region():
    rng = np.random.default_rng(23)
    for k, region in enumerate(regions(rng) + framed_cones(rng)):
        case = Case(seed=1, index=k)
        for _ in range(200):
            x = region.draw(case)
            assert x.shape == region.shape and x.dtype == np.float64
            assert exact_member(region, x)


@settings(max_examples=60, database=None, deadline=None)
@given(st.data(), st.sampled_from(range(18)))
def test_draws_through_hypothesis_lie_in_the_region_and_replay(data, k):
    rng = np.random.default_rng(29)
    region = (regions(rng)[:12] + framed_cones(rng))[k]
    case = Case(hypothesis_data=data)
    x = region.draw(case, (1, region.p))
    assert x.shape == (1, region.p) and exact_member(region, x)
    again = case.replayed()
    assert np.array_equal(region.draw(again, (1, region.p)), x)
    ball = case.replayed(precision="ball", prec=128)
    xb = region.draw(ball, (1, region.p))
    assert [to_fraction(b) for b in xb.ravel()] == [F(float(v)) for v in x.ravel()]


def preimage(region: Region, theta: np.ndarray) -> np.ndarray:
    """Raw numbers in [-1, 1] that the region's map sends to ``theta`` (the maps' inverses, from their formulas)."""
    if isinstance(region, Box):
        lo = np.array([float(a) for a in region.lo])
        hi = np.array([float(b) for b in region.hi])
        return (theta - (lo + hi) / 2) / ((hi - lo) / 2)
    if isinstance(region, Ball):
        c = np.zeros(region.p) if region.centre is None else np.array([float(q) for q in region.centre])
        d = theta - c
        t = np.linalg.norm(d) / float(region.radius)
        return t * d / np.max(np.abs(d))
    n = np.linalg.norm(theta)
    if isinstance(region, Cone):
        what = np.array([float(q) for q in region.direction])
        what /= np.linalg.norm(what)
        perp = theta - (theta @ what) * what
        psi = math.atan2(np.linalg.norm(perp), theta @ what)
        t = psi / math.acos(1 - float(region.mu))
        s = (n - float(region.R)) / float(region.R1 - region.R)
        return np.append(t * perp / np.linalg.norm(perp), s)
    s = (n - float(region.r0)) / float(region.r1 - region.r0)
    return np.append(theta / n, s)


def test_the_maps_reach_every_point():
    """For points spread over each region (rejection sampling of the bounding box; for a framed cone of its box of
    coordinates, mapped by the frame), the map's inverse lies in [-1, 1] and maps back to the point: no part of a
    region is out of the sampler's reach."""
    rng = np.random.default_rng(31)
    for region in regions(rng) + framed_cones(rng):
        lo0 = np.array([float(a) for a in region.bounding_box()[0]])
        hi0 = np.array([float(b) for b in region.bounding_box()[1]])
        pts = rng.uniform(lo0, hi0, (4000, region.p))
        if region.frame is not None:
            pts = pts @ np.array([[float(q) for q in row] for row in region.frame.matrix()]).T
        pts = pts[in_region(region, pts)][:25]
        assert len(pts) >= 5, region
        for x in pts:
            raw = preimage(region, x)
            assert np.all(np.abs(raw) <= 1 + 1e-12)
            y = region.point(np.clip(raw, -1, 1))
            assert np.allclose(y, x, rtol=1e-9, atol=1e-9 * float(hi0.max())), (region, x, y)


# ------------------------------------------------------------------------------------------ records and specs
def test_records_round_trip_exactly():
    rng = np.random.default_rng(37)
    rs = regions(rng) + [
        Ball(F(1, 3), centre=[F(1, 7), 0.1, -2.5e-300], shape=(1, 3)),
        Cone([[0.1, F(2, 3)], [1e-310, -7]], F(1, 10), F(1, 3), 5),
        Annulus("0x1.8p-3", "1/3", p=2),
    ]
    for r in rs:
        d = json.loads(json.dumps(r.to_dict()))
        back = from_dict(d)
        assert back == r and back.to_dict() == r.to_dict() and type(back) is type(r)
        assert back.bounding_box() == r.bounding_box() and back.shape == r.shape
        assert "\n" not in r.describe() and type(r).__name__ in repr(r)
    assert Annulus("0x1.8p-3", 1, p=2).r0 == F(3, 16)
    assert rs[-3].centre == (F(1, 7), F(0.1), F(-2.5e-300))


@pytest.mark.parametrize(
    "record, words",
    [
        ([], "JSON object"),
        ({"kind": "disc"}, "unknown kind"),
        ({"kind": "ball", "p": 2, "shape": [2], "radius": "1"}, "missing centre"),
        ({"kind": "ball", "p": 2, "shape": [2], "radius": 1.5, "centre": None}, "exact numbers as text"),
        ({"kind": "ball", "p": 2, "shape": [2], "radius": "-1", "centre": None}, "radius must be > 0"),
        ({"kind": "box", "p": 3, "shape": [2], "lo": ["0", "0"], "hi": ["1", "1"]}, "p = 3"),
        ({"kind": "cone", "p": 2, "shape": [2], "direction": ["0", "0"], "mu": "1", "R": "0", "R1": "1"}, "nonzero"),
    ],
)
def test_malformed_records(record, words):
    with pytest.raises(InputError, match=words) as exc:
        from_dict(record)
    assert "\n" not in str(exc.value)


def test_parse_makes_the_regions():
    w = np.array([[1.0, 0.5], [0.0, -2.0]])
    assert parse("ball:3", 4, shape=(2, 2)).describe() == "Frobenius ball ‖W‖_F ≤ 3"
    assert parse(" box : -1 , 1/3 ", 3) == Box([-1] * 3, [F(1, 3)] * 3)
    assert parse("annulus:0.5,2", 4) == Annulus(F(1, 2), 2, p=4)
    cone = parse("cone:1/100,1,5", 4, direction=w)
    assert cone == Cone(w, F(1, 100), 1, 5) and cone.shape == (2, 2) and cone.mu == F(1, 100)
    assert parse("ball:0x1.8p+1", 2).radius == 3 and parse("ball:0.1", 2).radius == F(1, 10)


@pytest.mark.parametrize(
    "spec, words",
    [
        ("cone:0.1,1,2", "the cone needs its direction W° \\(the claim supplies it\\)"),
        ("disc:1", "unknown kind 'disc'"),
        ("ball", "no numbers"),
        ("ball:", "no numbers"),
        ("ball:1,2", "ball takes 1 number"),
        ("box:1", "box takes 2 numbers"),
        ("ball:x", "'x' is not a number"),
        ("ball:nan", "not a finite number"),
        ("ball:0", "radius must be > 0"),
        ("box:2,1", "above HI"),
        ("annulus:2,1", "r0 < r1"),
        ("annulus:-1,1", "inner radius must be >= 0"),
        ("ball:1/0", "not a number"),
    ],
)
def test_parse_errors_are_one_line(spec, words):
    with pytest.raises(InputError, match=words) as exc:
        parse(spec, 4)
    assert "\n" not in str(exc.value) and str(exc.value).startswith(f"region {spec!r}: ")


@pytest.mark.parametrize(
    "spec, words",
    [
        ("cone:0,1,2", "μ must lie in \\(0, 1\\]"),
        ("cone:1.5,1,2", "μ must lie in"),
        ("cone:0.1,2,1", "R < R1"),
        ("cone:0.1,-1,1", "R must be >= 0"),
        ("cone:0.1,1,2", "3 entries, p = 4"),
    ],
)
def test_cone_spec_errors(spec, words):
    with pytest.raises(InputError, match=words) as exc:
        parse(spec, 4, direction=[1.0, 2.0, 3.0] if "3 entries" in words else [1.0, 2.0, 3.0, 4.0])
    assert "\n" not in str(exc.value)


def test_region_arguments_are_validated():
    with pytest.raises(InputError, match="needs p"):
        Ball(1)
    with pytest.raises(InputError, match="not a finite number"):
        Box([0.0, float("inf")], [1.0, 1.0])
    with pytest.raises(InputError, match="does not hold p = 4"):
        Ball(1, p=4, shape=(3, 1))
    with pytest.raises(InputError, match="bool"):
        Annulus(True, 2, p=2)
    with pytest.raises(InputError, match="4 coordinates for a region of p = 2"):
        Ball(1, p=2).excludes([0] * 4, [1] * 4)


# ------------------------------------------------------------------------------------------ exact numbers, halving
def test_to_fraction_is_exact():
    assert to_fraction(0.1) == F(3602879701896397, 2**55)
    assert (
        to_fraction("1/3") == F(1, 3)
        and to_fraction("0.1") == F(1, 10)
        and to_fraction("-0x1p-1074") == -(F(2) ** -1074)
    )
    assert to_fraction(np.float32(0.1)) == F(float(np.float32(0.1))) and to_fraction(np.int64(-7)) == -7
    for q in (F(1, 3), F(0.1), F(-5, 2**60), F(10**30 + 1, 7)):
        assert to_fraction(fraction_text(q)) == q
    for bad in (float("nan"), "inf", True, None, [1]):
        with pytest.raises(InputError):
            to_fraction(bad)


def test_split_tiles_the_box_exactly():
    rng = np.random.default_rng(41)
    for _ in range(40):
        p = int(rng.integers(1, 6))
        lo = rng.uniform(-5, 5, p)
        hi = lo + rng.uniform(0, 3, p)
        lo_q = tuple(F(x) for x in lo)
        hi_q = tuple(F(x) if rng.random() < 0.7 else F(math.ceil(x * 7), 7) for x in hi)
        j = int(rng.integers(p))
        (l1, h1), (l2, h2) = split(lo_q, hi_q, j)
        m = (lo_q[j] + hi_q[j]) / 2
        assert l1 == lo_q and h2 == hi_q and h1[j] == l2[j] == m
        assert all(h1[i] == hi_q[i] and l2[i] == lo_q[i] for i in range(p) if i != j)
        # every exact point of the parent lies in a half, every point of a half in the parent
        for _ in range(20):
            t = tuple(a + (b - a) * F(int(rng.integers(0, 1001)), 1000) for a, b in zip(lo_q, hi_q))
            in1 = all(a <= x <= b for x, a, b in zip(t, l1, h1))
            in2 = all(a <= x <= b for x, a, b in zip(t, l2, h2))
            assert in1 or in2
            assert (in1 and in2) == (t[j] == m)
    # float endpoints stay dyadic under repeated halving
    lo_q, hi_q = (F(-0.3), F(1.7)), (F(2.1), F(3.3))
    for k in range(60):
        (lo_q, hi_q), _ = split(lo_q, hi_q, k % 2)
    assert all(q.denominator & (q.denominator - 1) == 0 for q in (*lo_q, *hi_q))
    with pytest.raises(InputError, match="split coordinate 2 outside 0..1"):
        split((F(0), F(0)), (F(1), F(1)), 2)
