r"""``attsvm check --data FILE [--region SPEC] [--prove]``: the claims of a region searched and proved on one given
data set — the paper-law data of E3's size (``examples/prove/e3_d2.npz``, ``e3_d3.npz``), which a claim's own
strategy rarely draws (a locally optimal $\alpha\ne$ opt is rare at these sizes).

* ``cone-descent-every-input`` on ``e3_d2`` and ``cone-descent-radial`` on ``e3_d3`` over ``cone:1,R,inf`` are
  **proved** from ``check --prove``: the tail lemma closes $\|W\|_F\ge R_1$ first, the search and the boxes take
  the compact part, and the report names both;
* ``cone-invariance`` on the same data is **refuted**, rigorously (a proved point at $d=2$, a ball-confirmed case
  at $d=3$), and the saved counterexample replays with the region it was found on;
* the planted failures: the radial bound from $R=16$ is refuted (the relaxation), and a tail that did not close
  leaves the sampled verdict, never ``proved``;
* bad input is one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attsvm import data
from attsvm.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "prove"


def _check(capsys, tmp_path, *argv):
    """``attsvm check ... --json``: (exit code, the one claim's JSON record or None, stdout + stderr)."""
    js = tmp_path / "r.json"
    base = ["check", "--no-db", "--budget", "ci", "--out", str(tmp_path / "cx"), "--json", str(js)]
    code = main([*base, *argv])
    cap = capsys.readouterr()
    rec = json.loads(js.read_text())["claims"][0] if js.exists() else None
    return code, rec, cap.out + cap.err


@pytest.mark.parametrize(
    "cid, name, region, R1, boxes",
    [
        ("cone-descent-every-input", "e3_d2.npz", "cone:1,4,inf", "64", 253),
        ("cone-descent-radial", "e3_d3.npz", "cone:1,18,inf", "36", 7),
    ],
)
def test_check_prove_proves_the_descent_lemma_on_e3_data(capsys, tmp_path, cid, name, region, R1, boxes):
    code, r, out = _check(capsys, tmp_path, "--only", cid, "--data", str(DATA / name), "--region", region, "--prove")
    assert code == 0, out
    assert r["verdict"] == "proved" and r["matches"], r["reason"]
    (p,) = r["proofs"]
    digest = p["data"]
    assert p["status"] == "proved" and p["boxes"] == boxes
    assert p["tail"]["claim"] == "cone-descent-tail" and p["tail"]["R1"] == R1 and p["tail"]["status"] == "proved"
    assert f"‖W‖_F ≥ {R1} by the tail lemma cone-descent-tail" in p["region"]
    assert f"[on the given data set {digest}]" in r["reason"]
    ds = data.load(DATA / name)
    assert digest.startswith(f"n={ds.n}, T={ds.T}, d={ds.d}")


def test_the_radial_bound_from_16_is_refuted_on_e3_d3(capsys, tmp_path):
    """Planted: a radius where the radial bound is negative — check --prove must refute, not prove."""
    argv = ["--only", "cone-descent-radial", "--data", str(DATA / "e3_d3.npz"), "--region", "cone:1,16,inf"]
    code, r, out = _check(capsys, tmp_path, *argv, "--prove")
    assert code == 1 and r["verdict"] == "refuted" and r["confirmed_by"] == "prover", out
    assert r["proofs"][0]["status"] == "refuted" and "interval [16, 64]" in r["proofs"][0]["region"]


@pytest.mark.parametrize("name", ["e3_d2.npz", "e3_d3.npz"])
def test_cone_invariance_is_refuted_on_e3_data_and_the_case_replays(capsys, tmp_path, name):
    argv = ["--only", "cone-invariance", "--data", str(DATA / name), "--region", "cone:1,8,9", "--prove"]
    code, r, out = _check(capsys, tmp_path, *argv)
    assert code == 1 and r["verdict"] == "refuted" and r["confirmed"], out
    assert r["confirmed_how"] == "rigorous", r
    saved = sorted((tmp_path / "cx").glob("cone-invariance-*.npz"))
    if r["confirmed_by"] == "prover":  # a point of a box: the prover's counterexample, no saved case
        assert r["proofs"][0]["status"] == "refuted"
        return
    (npz,) = saved
    got, want = data.load(npz), data.load(DATA / name)
    assert all(np.array_equal(getattr(got, k), getattr(want, k)) for k in ("X", "Y", "Z", "v"))  # the given data
    assert json.loads(npz.with_suffix(".json").read_text())["region"] == "cone:1,8,9"
    assert main(["check", "--replay", str(npz), "--only", "cone-invariance"]) == 0
    assert "reproduced" in capsys.readouterr().out


def test_a_tail_that_did_not_close_leaves_the_sampled_verdict():
    from attsvm.claims import discover, select
    from attsvm.claims.runner import run_claim

    (claim,) = select(discover(None), ["cone-descent-radial"], None)
    ds = data.load(DATA / "e3_d3.npz")
    tail = {"claim": "cone-descent-tail", "status": "unresolved", "text": "the tail not closed (planted)"}
    r = run_claim(claim, budget="ci", data=ds, region="cone:1,18,36", tail=tail, prove=100)
    assert r.verdict == "verified" and not r.proofs, r.reason
    assert "not proved: the tail not closed (planted)" in r.reason
    r = run_claim(claim, budget="ci", data=ds, region="cone:1,18,36", prove=100)
    assert r.verdict == "proved", r.reason  # the same without the planted tail: the compact part is proved


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--only", "svm-kkt", "--region", "ball:3"], "claim svm-kkt declares no region"),
        (["--only", "cone-descent-every-input", "--region", "cone:1,4,inf"], "needs --prove and --data"),
        (["--only", "cone-descent-every-input", "--region", "cone:1,4"], "cone"),
        (["--only", "cone-descent", "--data", "E3", "--region", "cone:1,4,inf", "--prove"], "declares no tail lemma"),
        (["--only", "gd-selects-locally-optimal", "--data", "E3"], "draws no data set"),
        (["--only", "cone-invariance", "--data", "MISSING"], "no such file"),
        (["--only", "cone-invariance", "--data", "E3", "--replay", "x.npz"], "--data and --region do not apply"),
    ],
)
def test_bad_input_is_one_line(capsys, tmp_path, argv, words):
    argv = [str(DATA / "e3_d2.npz") if a == "E3" else str(tmp_path / "no.npz") if a == "MISSING" else a for a in argv]
    code, r, out = _check(capsys, tmp_path, *argv)
    err = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert code == 2 and r is None and len(err) == 1 and words in err[0], out
    assert "Traceback" not in out
