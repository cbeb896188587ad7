r"""The prover's boxes decided in parallel (``attsvm prove -n N``, :mod:`attsvm.prove.parallel`) give the result of
the one-box loop, bit for bit: the same leaves in the same order, with the same enclosures, the same status,
counterexample and box count — so the same certificate — for every number of workers.

* balls travel between processes exactly (:func:`~attsvm.prove.parallel.ball_code` /
  :func:`~attsvm.prove.parallel.ball_of`: python-flint's ``arb`` does not pickle);
* the rounds of :func:`attsvm.prove.bnb.prove` (decided through the pool's code path, in this process) equal the
  one-box loop for several round sizes, on a statement that is refuted deep in the queue and on one that runs out
  of its budget; an error raised by a box surfaces where the one-box loop raises it;
* a claim's proof with 2 worker processes has the certificate of the proof with 1 (``seconds`` and the date
  aside) when it is proved, refuted and unresolved (the lemma files of ``proofs/claims`` on
  ``examples/prove``); ``attsvm prove -n 2`` writes that certificate and it verifies; ``-n`` is checked as
  ``attsvm check`` checks it; ``attsvm check --prove -n 2`` on a single claim proves on the workers, with the
  report of ``-n 1``.
"""

from __future__ import annotations

import json
import pickle
import random
import uuid
from fractions import Fraction
from pathlib import Path

import pytest
from flint import arb

from attsvm import data
from attsvm.ball.jet import Jet
from attsvm.ball.numbers import workprec
from attsvm.claims.discover import load_file
from attsvm.cli import main
from attsvm.pool import Pool
from attsvm.prove.bnb import prove
from attsvm.prove.parallel import ball_code, ball_of, claim_source
from attsvm.prove.regions import parse
from attsvm.prove.statement import certificate, constants_with, margin_function, probe_region, prove_claim

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "proofs" / "claims"
DATA = ROOT / "examples" / "prove"

# (claim file, claim id, data file, region, box budget) -> the status it ends with
CASES = {
    "proved": (CLAIMS / "smoothness_region.py", "smoothness-bound-region", "visual.npz", None, 2000),
    "proved-with-outside": (CLAIMS / "cone_descent.py", "cone-descent", "local_d2.npz", "cone:1,1,16", 5000),
    "refuted": (CLAIMS / "cone_invariance.py", "cone-invariance", "visual.npz", "cone:1,4,5", 1000),
    "refuted-small": (CLAIMS / "cone_descent.py", "cone-descent", "local_d2.npz", "cone:1,1/8,4", 3000),
    "unresolved": (CLAIMS / "cone_invariance.py", "cone-invariance", "visual.npz", "cone:1,4,5", 300),
    "unresolved-small": (CLAIMS / "smoothness_region.py", "smoothness-bound-region", "visual.npz", None, 100),
}


def _claim(path: Path, cid: str):
    return {c.id: c for c in load_file(path)}[cid]


def _code(x):
    return None if x is None else ball_code(x)


def _leaves(proof) -> list[tuple]:
    """Every field of every leaf, the balls as their exact codes (midpoint and radius)."""
    return [
        (
            lf.path,
            lf.splits,
            lf.lo,
            lf.hi,
            lf.status,
            lf.note,
            _code(lf.centre),
            None if lf.gradient is None else [ball_code(g) for g in lf.gradient],
            _code(lf.value),
            _code(lf.lower),
        )
        for lf in proof.leaves
    ]


def _summary(proof) -> tuple:
    cx = proof.counterexample
    cx_path = None if cx is None else (cx.path, _code(cx.centre))
    return proof.status, proof.boxes, proof.counts, proof.reason, proof.depth, cx_path


def _stable(cert: dict) -> dict:
    """A certificate without what depends on the clock: ``seconds`` and the provenance's date."""
    out = {k: v for k, v in cert.items() if k != "seconds"}
    out["provenance"] = {k: v for k, v in cert["provenance"].items() if k != "date"}
    return out


# ---------------------------------------------------------------------------------------------- exact balls
def test_balls_travel_exactly():
    rng = random.Random(7)
    balls = [arb(0), arb(-3), arb.pos_inf(), arb.neg_inf(), arb.nan(), arb(0, "inf"), arb(5, "inf")]
    balls.append(arb(2) ** 400 + 1)  # an exact midpoint of more bits than the precision
    for prec in (53, 256, 512):
        with workprec(prec):
            for _ in range(400):
                x = arb(rng.randint(-(10**12), 10**12)) / rng.randint(1, 10**9) * arb(2) ** rng.randint(-200, 200)
                if rng.random() < 0.4:
                    x = x.exp() if x < 10 else x.sqrt()
                if rng.random() < 0.3:
                    x = x.union(3 * x + 1)
                balls.append(x)
    for x in balls:
        for prec in (53, 256):
            with workprec(prec):
                y = ball_of(pickle.loads(pickle.dumps(ball_code(x))))
            assert ball_code(y) == ball_code(x) and y.repr() == x.repr()
    for e in range(-150, 150, 13):  # radii at every position of the radius' 30-bit mantissa
        for man in (1, 3, 2**29 + 1, 2**30 - 1, 12345):
            code = (ball_code(arb(7) / 3)[0], (man, e))
            assert ball_code(ball_of(code)) == code
    with pytest.raises(TypeError):
        ball_code(1.5)
    with pytest.raises(ValueError):
        ball_of(((1, 0), "-inf"))  # no ball has a negative radius


# ---------------------------------------------------------------------------------------------- the rounds
def _claim_setup(name: str):
    path, cid, file, region, boxes = CASES[name]
    claim, ds = _claim(path, cid), data.load(DATA / file)
    consts = constants_with(claim, region)
    reg = probe_region(claim, ds, consts, 256)
    margin = margin_function(claim, ds, consts, reg, 256)
    return margin, reg, claim_source(claim, ds, region, None, reg, 256), boxes


@pytest.mark.parametrize("name", ["refuted-small", "unresolved-small"])
def test_rounds_decide_as_the_one_box_loop(name):
    """The rounds through the pool's code path (a serial pool: decide_box and the exact codes, in this process),
    for round sizes that split the queue differently, against the one-box loop."""
    margin, reg, source, boxes = _claim_setup(name)
    want = prove(margin, reg, max_boxes=boxes)
    assert want.status == name.split("-")[0]
    with Pool(1) as pool:
        for chunk in (3, 64):
            got = prove(margin, reg, max_boxes=boxes, pool=pool, source=source, chunk=chunk)
            assert _summary(got) == _summary(want), chunk
            assert _leaves(got) == _leaves(want), chunk


def _fraction(x) -> Fraction:
    man, exp = x.mid().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


class _Planted:
    r"""A stand-in for a claim (the rounds do not care what the margin is): $m(\theta)=|\theta-a|^2-10^{-6}$ on the
    unit disc, negative only near $a=(0.3,-0.7)$ (refuted after some 170 boxes), raising at the boxes whose centre
    is in ``bad``; ``evaluated``: the centres evaluated, in order."""

    def __init__(self, bad=()) -> None:
        self.key = f"planted-{uuid.uuid4()}"  # the workers' cache key: one per source
        self.bad = set(bad)
        self.evaluated: list[tuple] = []
        self.region = parse("ball:1", 2)

    def margin(self, theta):
        if not any(isinstance(t, Jet) for t in theta):  # the margin at a centre: exact balls
            c = tuple(_fraction(t) for t in theta)
            self.evaluated.append(c)
            if c in self.bad:
                raise RuntimeError("planted error")
        a, eps = (arb(3) / 10, arb(-7) / 10), arb(1) / 10**6
        d = [t - ai for t, ai in zip(theta, a)]
        return d[0] * d[0] + d[1] * d[1] - eps

    def build(self):
        return self.margin, self.region


def _centre(leaf) -> tuple:
    return tuple((a + b) / 2 for a, b in zip(leaf.lo, leaf.hi))


def test_rounds_on_a_statement_refuted_deep_in_the_queue():
    src = _Planted()
    want = prove(src.margin, src.region, max_boxes=5000)
    assert want.status == "refuted" and want.boxes > 150 and want.counts["unresolved"] > 5
    with Pool(1) as pool:
        for chunk in (2, 5, 64):
            got = prove(src.margin, src.region, max_boxes=5000, pool=pool, source=src, chunk=chunk)
            assert _summary(got) == _summary(want) and _leaves(got) == _leaves(want), chunk
    # the budget ends before the refutation: unresolved, the same way
    want = prove(src.margin, src.region, max_boxes=40)
    with Pool(1) as pool:
        got = prove(src.margin, src.region, max_boxes=40, pool=pool, source=src, chunk=64)
    assert want.status == "unresolved" and _summary(got) == _summary(want) and _leaves(got) == _leaves(want)


def test_an_error_in_a_box_is_raised_in_queue_order():
    """A box that raises: the one-box loop raises there, and so do the rounds (they evaluate a whole round, but
    raise the first error in queue order); an error in a box after the refuted one of its round is never raised."""
    want = prove(*_Planted().build(), max_boxes=5000)
    k = next(i for i, lf in enumerate(want.leaves) if lf.status == "refuted")
    after = want.leaves[k + 1]  # the next box in the queue: in the refuted box's round, never reached
    assert after.note == "not reached"
    src = _Planted([_centre(after)])
    with Pool(1) as pool:
        got = prove(src.margin, src.region, max_boxes=5000, pool=pool, source=src, chunk=64)
    assert _centre(after) in src.evaluated  # its error was computed in the round ...
    assert _summary(got) == _summary(want) and _leaves(got) == _leaves(want)  # ... and not raised
    early = [lf for lf in want.leaves if lf.status == "proved"][len(want.leaves) // 4]
    for chunk in (None, 64):
        src = _Planted([_centre(early)])
        with Pool(1) as pool, pytest.raises(RuntimeError, match="planted error"):
            if chunk is None:
                prove(src.margin, src.region, max_boxes=5000)
            else:
                prove(src.margin, src.region, max_boxes=5000, pool=pool, source=src, chunk=chunk)


# ---------------------------------------------------------------------------------------------- 1 and 2 workers
@pytest.mark.parametrize("name", ["proved", "proved-with-outside", "refuted", "unresolved"])
def test_two_workers_give_the_certificate_of_one(name):
    path, cid, file, region, boxes = CASES[name]
    claim, ds = _claim(path, cid), data.load(DATA / file)
    one = prove_claim(claim, ds, region=region, max_boxes=boxes, workers=1)
    two = prove_claim(claim, ds, region=region, max_boxes=boxes, workers=2)
    assert one.status == name.split("-")[0]
    assert _stable(certificate(two)) == _stable(certificate(one))
    assert _summary(two.proof) == _summary(one.proof)
    assert _leaves(two.proof) == _leaves(one.proof)  # every enclosure, also those the certificate leaves out


def test_the_command_with_two_workers(tmp_path, capsys):
    path, cid, file, region, boxes = CASES["proved-with-outside"]
    argv = ["prove", str(path), "--only", cid, "--data", str(DATA / file), "--region", region, "--boxes", str(boxes)]
    certs = {}
    for n in ("1", "2"):
        assert main([*argv, "-n", n, "--certificate", str(tmp_path / f"{n}.json")]) == 0
        assert f"{cid}: proved on" in capsys.readouterr().out
        certs[n] = json.loads((tmp_path / f"{n}.json").read_text())
    assert _stable(certs["2"]) == _stable(certs["1"])
    assert main(["prove", "--verify", str(tmp_path / "2.json")]) == 0
    assert f"verified: {cid} holds" in capsys.readouterr().out
    for bad in ("0", "-2", "two", "1.5"):
        assert main([*argv, "-n", bad]) == 2
        assert "-n must be a positive integer or auto" in capsys.readouterr().err


def test_check_prove_of_one_claim_decides_its_boxes_on_the_workers(tmp_path, capsys, monkeypatch):
    """``attsvm check --prove -n 2`` with a single claim: the claim runs in this process and its proofs' boxes go
    to the check's pool (no pool inside a worker); the report is the one of ``-n 1``."""
    import attsvm.prove.parallel as parallel

    calls = []
    real = parallel.decide_all

    def counting(pool, *args):
        calls.append(pool.kind)
        return real(pool, *args)

    monkeypatch.setattr(parallel, "decide_all", counting)
    argv = ["check", str(CLAIMS / "cone_descent.py"), "--only", "cone-descent", "--no-db", "--out", str(tmp_path)]
    argv += ["--budget", "ci", "--prove", "--boxes", "60"]
    reports = {}
    for n in ("1", "2"):
        calls.clear()
        assert main([*argv, "-n", n, "--json", str(tmp_path / f"{n}.json")]) == 0
        capsys.readouterr()
        assert (set(calls) == {"processes"}) if n == "2" else not calls
        (r,) = json.loads((tmp_path / f"{n}.json").read_text())["claims"]
        for p in r["proofs"]:
            p.pop("seconds")
        reports[n] = (r["verdict"], r["reason"], r["proofs"])
    assert reports["2"] == reports["1"] and len(reports["1"][2]) == 3
