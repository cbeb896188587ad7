r"""Proved region statements (issue 26, first part): a claim's conclusion, written once with the kit, proved on a
data set over a whole region by ball-arithmetic branch and bound; the certificate and its re-check.

The statement: under Assumption B, $\langle\nabla\mathcal L(W),W^{mm}\rangle<0$ for every $W$ with
$\|W\|_F\le 1/4$ (true: proved), and its negation (false: refuted by a point whose margin's enclosure is below 0).
A tampered certificate (a leaf removed, the root moved, a bound moved, a status changed) fails naming the leaf.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attsvm import generate
from attsvm.cli import main

CLAIMS = """
from attsvm.claims import Outcome, claim


def _margin(case, sign):
    k = case.kit
    ds = case.data
    mm = k.wmm(ds)
    if mm.status != "optimal":
        return Outcome(ok=True, inconclusive="infeasible")
    W = case.param()
    m = -sign * (k.grad_W(ds, W, case.hypotheses["loss"]) * mm.W).sum()
    return Outcome(ok=bool(m > 0), margin=m)


@claim(id="descent-small-ball", title="<grad L(W), W^mm> < 0 on a small ball", origin="derived",
       hypotheses={"data": "equal_scores", "n": 1, "T": 2, "d": 2, "region": "ball:0.25"},
       params={"loss": "logistic"}, examples=10)
def descent(case):
    return _margin(case, 1)


@claim(id="ascent-small-ball", title="<grad L(W), W^mm> > 0 on a small ball (false)", origin="expected-false",
       hypotheses={"data": "equal_scores", "n": 1, "T": 2, "d": 2, "region": "ball:0.25"},
       params={"loss": "logistic"}, examples=10)
def ascent(case):
    return _margin(case, -1)


@claim(id="draws-more", title="draws a value besides its region parameter", origin="derived",
       hypotheses={"data": "equal_scores", "n": 1, "T": 2, "d": 2, "region": "ball:0.25"}, examples=5)
def draws_more(case):
    W = case.param()
    V = case.draw_matrix(2, 2)
    return Outcome(ok=True, margin=case.kit.scalar(1))


@claim(id="no-region", title="no region", origin="derived",
       hypotheses={"data": "equal_scores", "n": 1, "T": 2, "d": 2}, examples=5)
def no_region(case):
    return Outcome(ok=True, margin=case.kit.scalar(1))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("prove")
    (d / "claims.py").write_text(CLAIMS)
    generate.equal_scores(1, 2, 2, seed=3).save(d / "eq.npz")
    return d


def _prove(d: Path, *args: str) -> int:
    return main(["prove", str(d / "claims.py"), "--data", str(d / "eq.npz"), *args])


def test_true_statement_is_proved_with_a_certificate_that_verifies(setup, capsys):
    cert = setup / "c.json"
    assert _prove(setup, "--only", "descent-small-ball", "--certificate", str(cert)) == 0
    out = capsys.readouterr().out
    assert "descent-small-ball: proved on Frobenius ball" in out and "≤ 0.25" in out
    c = json.loads(cert.read_text())
    assert c["status"] == "proved" and c["leaves"] and all(lf["status"] in ("proved", "outside") for lf in c["leaves"])
    assert c["provenance"]["tool"] == "attsvm prove descent-small-ball"
    assert main(["prove", "--verify", str(cert)]) == 0
    assert "verified: descent-small-ball holds" in capsys.readouterr().out


def test_false_statement_is_refuted_by_a_point_never_proved(setup, capsys):
    cert = setup / "no.json"
    assert _prove(setup, "--only", "ascent-small-ball", "--certificate", str(cert)) == 1
    out = capsys.readouterr().out
    assert "ascent-small-ball: refuted" in out and "proved on" not in out
    assert not cert.exists()  # no certificate of a statement that is not proved


def test_a_budget_too_small_is_unresolved_never_proved(setup, capsys):
    assert _prove(setup, "--only", "descent-small-ball", "--region", "ball:4", "--boxes", "3") == 1
    assert "unresolved" in capsys.readouterr().out


@pytest.mark.parametrize(
    "tamper, named",
    [
        (lambda c: c["leaves"].pop(), "is missing (no leaf covers it)"),
        (lambda c: c["root"]["hi"].__setitem__(0, "1/2"), "the root box is not the region's bounding box"),
        (lambda c: c["leaves"][0]["lo"].__setitem__(0, "-1/8"), "its recorded box is not the box at its path"),
        (lambda c: c["leaves"][0].__setitem__("status", "unresolved"), "proves nothing"),
        (lambda c: c["region"].__setitem__("radius", "1/2"), "the claim's region on this data is"),
        (
            lambda c: c["leaves"][-1].__setitem__("lower", ["-1/4", "1"]),
            "its recorded lower bound [-1/4, 1] is not above",
        ),
        (
            lambda c: c["leaves"][-1].__setitem__("centre", ["7", "8"]),
            "its recorded enclosure of the margin at the centre",
        ),
    ],
)
def test_a_tampered_certificate_fails_naming_the_leaf(setup, capsys, tamper, named):
    cert = setup / "c.json"
    if not cert.exists():
        assert _prove(setup, "--only", "descent-small-ball", "--certificate", str(cert)) == 0
    c = json.loads(cert.read_text())
    tamper(c)
    bad = setup / "bad.json"
    bad.write_text(json.dumps(c))
    capsys.readouterr()
    assert main(["prove", "--verify", str(bad)]) == 1
    out = capsys.readouterr().out.strip()
    assert named in out and len(out.splitlines()) == 1, out


def test_errors_in_the_claim_and_bad_input(setup, capsys):
    assert _prove(setup, "--only", "draws-more") == 1
    assert "draws a value besides case.param" in capsys.readouterr().err
    assert _prove(setup, "--only", "no-region") == 2
    assert "declares no region" in capsys.readouterr().err
    assert _prove(setup, "--only", "descent-small-ball", "--region", "sphere:1") == 2
    assert _prove(setup, "--only", "descent-small-ball", "--boxes", "0") == 2
    empty = setup / "empty.json"
    empty.write_text("")
    assert main(["prove", "--verify", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_the_search_draws_points_of_the_region(setup):
    from attsvm.claims.discover import load_file
    from attsvm.claims.runner import run_claim

    claims = {c.id: c for c in load_file(shutil.copy(setup / "claims.py", setup / "copy.py"))}
    r = run_claim(claims["descent-small-ball"], budget="ci", seed=0)
    assert r.verdict == "verified", r.reason
    r = run_claim(claims["ascent-small-ball"], budget="ci", seed=0)
    assert r.verdict == "refuted" and r.confirmed, r.reason


def test_check_prove_proves_on_the_data_sets_of_the_search(setup, tmp_path, capsys):
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    argv = ["check", str(setup / "claims.py"), "--only", "descent-small-ball", "--no-db", "--out", str(tmp_path)]
    assert main([*argv, "--prove", "--boxes", "500", "--json", str(js), "--markdown", str(md)]) == 0
    (r,) = json.loads(js.read_text())["claims"]
    assert r["verdict"] == "proved" and r["matches"] and len(r["proofs"]) == 3
    assert all(p["status"] == "proved" and "‖W‖_F ≤ 0.25" in p["region"] for p in r["proofs"])
    assert "proofs on the data sets of its search (proved)" in md.read_text()
    # a budget too small for one of them: the verdict stays the sampled one, and says so
    assert main([*argv, "--prove", "--boxes", "1", "--json", str(js)]) == 0
    (r,) = json.loads(js.read_text())["claims"]
    assert r["verdict"] == "verified" and "proved on 2 of 3 data sets within 1 boxes each" in r["reason"]
    assert main([*argv, "--boxes", "5"]) == 2  # --boxes without --prove
    assert "--boxes N is the box budget of --prove" in capsys.readouterr().err


def test_the_slice_figure_shows_the_leaves_meeting_the_plane(setup):
    import matplotlib

    matplotlib.use("Agg")
    from fractions import Fraction

    from attsvm.claims.discover import load_file
    from attsvm.data import load
    from attsvm.prove.figure import slice_figure, slice_leaves
    from attsvm.prove.statement import prove_claim

    claims = {c.id: c for c in load_file(setup / "claims.py")}
    rp = prove_claim(claims["descent-small-ball"], load(setup / "eq.npz"), region="ball:1", max_boxes=2000)
    at = [Fraction(0)] * 4
    shown = slice_leaves(rp.proof.leaves, (0, 1), at)
    assert shown and all(lf.lo[2] <= 0 <= lf.hi[2] and lf.lo[3] <= 0 <= lf.hi[3] for lf in shown)
    assert len(shown) < len(rp.proof.leaves)  # leaves off the plane are left out
    fig = slice_figure(rp.proof, rp.region)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert rp.status == "proved" and any(lab.startswith("proved (") for lab in labels)
    assert fig.axes[0].get_xlabel() == "$w_{11}$" and fig.axes[0].get_ylabel() == "$w_{12}$"
