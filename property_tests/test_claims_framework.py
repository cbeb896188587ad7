"""The claims framework: discovery, search, confirmation, verdicts, counterexample files, replay, reports,
and the ``attsvm check`` command, on planted claims in ``property_tests/fixtures/``."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from attsvm.claims import Case, Outcome, check, claim, discover, replay, resolve_budget, run_claim, select, wilson
from attsvm.claims.discover import dependency_order
from attsvm.cli import main
from attsvm.errors import InputError

FIX = Path(__file__).parent / "fixtures"
PLANTED = FIX / "planted.py"
EMPIRICAL = FIX / "planted_empirical.py"
MISMATCH = FIX / "mismatch.py"


def _cli(argv):
    return main(["check", *argv])


def _get(path, cid):
    return select(discover([path]), [cid])[0]


# ---------------------------------------------------------------------- discovery
def test_discover_files_and_folders():
    ids = [c.id for c in discover([PLANTED])]
    assert ids == ["planted-false", "planted-rounding", "planted-true", "planted-unconfirmed", "planted-few-inputs"]
    all_ids = {c.id for c in discover([FIX / "deps", EMPIRICAL])}
    assert all_ids == {"dep-a", "dep-b", "dep-c", "planted-rate-true", "planted-rate-false"}
    assert all(c.module and c.module.endswith(".py") for c in discover([PLANTED]))


def test_discover_errors_name_the_problem(tmp_path):
    with pytest.raises(InputError, match="broken_claim.py: claim file failed to import"):
        discover([FIX / "broken"])
    with pytest.raises(InputError, match="no claims found"):
        discover([FIX / "empty"])
    with pytest.raises(InputError, match="no such file"):
        discover([tmp_path / "missing.py"])
    with pytest.raises(InputError, match="unknown claim id 'nope'"):
        select(discover([PLANTED]), ["nope"])
    dup = tmp_path / "dup.py"
    dup.write_text(PLANTED.read_text())
    with pytest.raises(InputError, match="duplicate claim id"):
        discover([PLANTED, dup])


def test_discover_proofs_layout_skips_derivations(tmp_path):
    (tmp_path / "claims").mkdir()
    (tmp_path / "derivations").mkdir()
    (tmp_path / "claims" / "one.py").write_text(
        "from attsvm.claims import claim, Outcome\n"
        "c = claim(id='one', title='t', origin='derived')(lambda case: Outcome(ok=True, margin=1.0))\n"
    )
    (tmp_path / "derivations" / "d.py").write_text("raise RuntimeError('not a claim file')\n")
    assert [c.id for c in discover([tmp_path])] == ["one"]


def test_dependency_order_and_cycles():
    cs = discover([FIX / "deps"])
    assert [c.id for c in cs] == ["dep-c", "dep-b", "dep-a"]  # file order
    assert [c.id for c in dependency_order(cs)] == ["dep-a", "dep-b", "dep-c"]
    ok = lambda case: Outcome(ok=True, margin=1.0)  # noqa: E731
    x = claim(id="x", title="x", origin="derived", depends=("y",))(ok)
    y = claim(id="y", title="y", origin="derived", depends=("x",))(ok)
    with pytest.raises(InputError, match="dependency cycle"):
        dependency_order([x, y])


# ---------------------------------------------------------------------- verdicts
def test_planted_false_is_refuted_confirmed_and_minimal(tmp_path):
    r = run_claim(_get(PLANTED, "planted-false"), budget="ci", seed=0, out=tmp_path)
    assert r.verdict == "refuted" and r.confirmed and r.matches
    ds = r.case.data
    assert (ds.n, ds.T, ds.d) == (1, 2, 2)  # the smallest sizes the strategy allows (paper: d >= 2)
    # the high-precision value is independent of the float64 code and agrees with it
    hp = float(r.confirm_outcome.detail["max_logit"])
    W = np.asarray(r.case.draws[0])
    assert hp >= 1 and math.isclose(hp, float(np.max(ds.X @ W @ ds.Z[0])), rel_tol=1e-12)
    # counterexample files: data-file .npz + .json with the reproduction commands
    npz = Path(r.counterexample)
    assert npz.suffix == ".npz" and npz.exists()
    info = json.loads(npz.with_suffix(".json").read_text())
    assert info["claim"] == "planted-false" and info["confirmed"] is True
    assert "--replay" in info["commands"]["replay"] and "--seed 0" in info["commands"]["rerun"]
    from attsvm.data import load

    assert np.array_equal(load(npz).X, ds.X)
    # replay re-evaluates the saved case (same draws) and confirms again
    rr = replay(_get(PLANTED, "planted-false"), npz)
    assert rr.verdict == "reproduced" and rr.confirmed and rr.matches
    assert rr.outcome.margin == r.outcome.margin


def test_shrinks_to_the_failure_boundary():
    r = run_claim(_get(PLANTED, "planted-few-inputs"), budget="ci", seed=0)
    assert r.verdict == "refuted" and r.confirmed
    ds = r.case.data
    assert (ds.n, ds.T, ds.d) == (3, 2, 1)  # smallest failing n, smallest T and d
    # numbers shrunk to zero, up to the dyadic strategy's structural bump of each opt token (unique opt)
    assert np.count_nonzero(ds.X) == ds.n and np.all(np.abs(ds.X) <= 0.125)


def test_float64_only_failure_is_cleared_and_the_search_goes_on():
    r = run_claim(_get(PLANTED, "planted-rounding"), budget="ci", seed=0)
    # float64 rounds 1 - max softmax to 0 at large R; 50 digits say > 0: cleared, counted, the search continues
    assert r.detail["cleared"] >= 1 and r.decided.get("high precision", 0) == r.detail["cleared"]
    assert r.verdict == "verified" and r.matches and not r.confirmed and not r.unconfirmed


def test_true_claim_verified_and_unconfirmed_failure_never_matches():
    r = run_claim(_get(PLANTED, "planted-true"), budget="ci", seed=1)
    assert r.verdict == "verified" and r.examples >= 5 and r.worst_margin >= 0
    u = run_claim(_get(PLANTED, "planted-unconfirmed"), budget="ci")
    assert u.verdict == "inconclusive" and u.reason.startswith("unconfirmed failure") and u.unconfirmed
    assert not u.matches
    u.allow_inconclusive = True
    assert not u.matches  # not even in an exploratory run


def test_same_seed_same_result():
    c = _get(PLANTED, "planted-false")
    a, b = run_claim(c, budget="ci", seed=7), run_claim(c, budget="ci", seed=7)
    assert np.array_equal(a.case.data.X, b.case.data.X) and a.outcome.margin == b.outcome.margin


def test_a_time_limit_never_verifies():
    """The user's wall-clock limit is the only clock: a search it cuts short is inconclusive, never verified."""
    r = run_claim(_get(MISMATCH, "slow-true"), budget=1.0, time_limit=0.5)  # 20 ms per example, 10000 asked
    assert r.verdict == "inconclusive" and 3 <= r.examples < 200 and r.reason.startswith("time limit"), r.reason
    assert r.seconds < 15


def test_errors_and_mismatches():
    e = run_claim(_get(MISMATCH, "mismatch-error"), budget="ci")
    assert e.error and "ZeroDivisionError" in e.error and not e.matches
    t = run_claim(_get(MISMATCH, "mismatch-true-control"), budget="ci")
    assert t.verdict == "verified" and not t.matches


def test_inconclusive_cases_do_not_count():
    ic = claim(id="ic", title="always undecidable", origin="derived", hypotheses={"data": "dyadic", "n": 1})(
        lambda case: Outcome(ok=True, inconclusive="solver trouble")
    )
    r = run_claim(ic, examples=10)
    assert r.verdict == "inconclusive" and "too few decided" in r.reason and r.inconclusive_cases == r.examples
    assert not r.matches


# ---------------------------------------------------------------------- empirical
def test_wilson_interval_reference_values():
    # independent reference values (Wilson 1927; e.g. Newcombe 1998, table I)
    lo, hi = wilson(0, 10)
    assert lo == 0 and math.isclose(hi, 0.2775, abs_tol=1e-4)
    lo, hi = wilson(5, 10)
    assert math.isclose(lo, 0.2366, abs_tol=1e-4) and math.isclose(hi, 0.7634, abs_tol=1e-4)
    lo, hi = wilson(81, 263)
    assert math.isclose(lo, 0.2553, abs_tol=1e-4) and math.isclose(hi, 0.3662, abs_tol=1e-4)


def test_empirical_rates():
    ok = run_claim(_get(EMPIRICAL, "planted-rate-true"), examples=60, seed=0)
    assert ok.verdict == "verified" and ok.rate["successes"] == 60 and ok.rate["lo"] >= 0.9
    bad = run_claim(_get(EMPIRICAL, "planted-rate-false"), examples=60, seed=0)
    assert bad.verdict == "refuted" and bad.confirmed and bad.matches and bad.rate["hi"] < 0.9
    assert bad.case.data is not None and bad.case.data.Y[0] < 0  # the failing run handed to the confirmer


# ---------------------------------------------------------------------- case
def test_case_replays_draws():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    seen = []

    @settings(max_examples=3, database=None)
    @given(st.data())
    def t(data):
        c = Case(hypothesis_data=data)
        seen.append((c, c.draw_matrix(2, 3), c.draw_float(0, 1), c.draw_int(1, 4)))

    t()
    for c, W, x, k in seen:
        rc = c.replayed()
        assert np.array_equal(rc.draw_matrix(2, 3), W) and rc.draw_float(0, 1) == x and rc.draw_int(1, 4) == k
    e = Case(seed=3)
    assert e.mode == "empirical" and np.array_equal(e.rng().standard_normal(2), Case(seed=3).rng().standard_normal(2))
    with pytest.raises(RuntimeError):
        e.draw(st.integers())


def test_budget_names():
    assert resolve_budget("ci") == 0.2 and resolve_budget("thorough") == 5.0 and resolve_budget("0.5") == 0.5
    with pytest.raises(InputError):
        resolve_budget("huge")


# ---------------------------------------------------------------------- CLI and reports
def test_cli_exit_codes_json_and_reports(tmp_path, capsys):
    js, md, tex = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.tex"
    argv = [str(PLANTED), str(EMPIRICAL), "--budget", "ci", "--out", str(tmp_path / "cx")]
    rc = _cli([*argv, "--json", str(js), "--markdown", str(md), "--latex", str(tex)])
    out = capsys.readouterr()
    assert "planted-false" in out.out and "refuted" in out.out and "[7/7]" in out.err
    rep = json.loads(js.read_text())
    assert rc == 1 and rep["summary"]["mismatches"] == ["planted-unconfirmed"]  # a failure nobody cleared
    others = [c["id"] for c in rep["claims"] if c["id"] != "planted-unconfirmed"]
    assert _cli([*argv, "--only", *others]) == 0
    keys = {"id", "origin", "expected", "verdict", "reason", "examples", "worst_margin", "counterexample"}
    keys |= {"confirmed", "seconds"}
    for c in rep["claims"]:
        assert keys <= set(c)
        assert c["verdict"] in ("verified", "refuted", "inconclusive") and c["expected"] in ("true", "false")
        assert c["matches"] == (c["mismatch"] is None) and isinstance(c["decided"], dict)
    by = {c["id"]: c for c in rep["claims"]}
    assert by["planted-false"]["confirmed"] and by["planted-false"]["counterexample"].endswith(".npz")
    text = md.read_text()
    assert "## `planted-false` refuted" in text and "attsvm check" in text and "--replay" in text
    assert "\\begin{tabular}" in tex.read_text()
    # --replay through the CLI
    npz = by["planted-false"]["counterexample"]
    assert _cli([str(PLANTED), "--replay", npz, "--only", "planted-false"]) == 0


def test_cli_exit_one_and_two(tmp_path, capsys):
    assert _cli([str(MISMATCH), "--only", "mismatch-true-control", "--budget", "ci"]) == 1
    assert _cli([str(FIX / "broken")]) == 2
    assert _cli([str(PLANTED), "--only", "nope"]) == 2
    assert _cli([str(FIX / "empty")]) == 2
    assert _cli([str(PLANTED), "--examples", "0"]) == 2
    err = capsys.readouterr().err
    assert "error: " in err and "broken_claim.py" in err and "unknown claim id 'nope'" in err


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed: LaTeX report not compiled")
def test_latex_report_compiles(tmp_path):
    from attsvm.claims import report

    r = [run_claim(_get(PLANTED, "planted-false"), budget="ci"), run_claim(_get(PLANTED, "planted-true"), budget="ci")]
    (tmp_path / "r.tex").write_text(report.latex(r))
    p = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "r.tex"], cwd=tmp_path, capture_output=True
    )
    assert p.returncode == 0, p.stdout[-2000:]
    assert (tmp_path / "r.pdf").exists()
    log = (tmp_path / "r.log").read_text(errors="replace")
    wide = [float(w) for w in re.findall(r"Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\)", log)]
    assert all(w <= 5.0 for w in wide), f"overfull boxes in the report: {wide}"


def test_check_runs_in_dependency_order(tmp_path):
    res = check(discover([FIX / "deps"]), budget="ci", out=tmp_path)
    assert [r.id for r in res] == ["dep-a", "dep-b", "dep-c"] and all(r.matches for r in res)


def test_bad_hypotheses_are_input_errors():
    ok = lambda case: Outcome(ok=True, margin=1.0)  # noqa: E731
    bad = claim(id="bad-data", title="t", origin="derived", hypotheses={"data": "papr"})(ok)
    with pytest.raises(InputError, match="claim bad-data .*unknown data strategy 'papr'"):
        run_claim(bad)
    rate = claim(id="bad-rate", title="t", origin="empirical", kind="empirical", rate=1.5)(ok)
    with pytest.raises(InputError, match="rate must lie in"):
        check([rate], out=None)


def test_progress_spinner_on_a_tty():
    import io

    from attsvm.claims.runner import Progress

    class TTY(io.StringIO):
        def isatty(self):
            return True

    s = TTY()
    p = Progress(s)
    check(select(discover([MISMATCH]), ["slow-true"]), examples=60, budget=1.0, out=None, progress=p)
    text = s.getvalue()
    assert "\r" in text and "slow-true:" in text and "examples," in text  # the live counter was drawn
    assert text.rstrip().splitlines()[-1].startswith("[1/1] ok slow-true: verified")


def test_jsonable_high_precision_numbers():
    import mpmath

    from attsvm.claims.verdict import jsonable

    with mpmath.workdps(50):
        x = mpmath.mpf(1) / 3
    out = jsonable({"a": np.arange(2), "b": x, "c": np.float64("nan"), "d": (np.bool_(True),)})
    assert out["a"] == [0, 1] and out["b"].startswith("0.3333333333333333333333") and out["c"] == "nan"
    assert out["d"] == [True] and json.dumps(out)


def test_worked_examples_behave_as_documented():
    ex = Path(__file__).parent.parent / "examples" / "conjectures"
    cs = {c.id: c for c in discover([ex])}
    bad = run_claim(cs["first-step-raises-opt"], budget="ci", seed=0)
    assert bad.verdict == "refuted" and bad.confirmed and bad.matches
    good = run_claim(cs["descent-lemma-LW"], budget="ci", seed=0)
    assert good.verdict == "verified" and good.matches


def test_dependents_of_a_refuted_claim_say_so():
    bad = claim(id="base-false", title="n < 1 (false)", origin="derived", hypotheses={"data": "dyadic", "n": 1})(
        lambda case: Outcome(ok=False, margin=-1.0)
    )
    bad.confirm(lambda case, out: Outcome(ok=False, margin=-1.0))
    top = claim(id="on-top", title="t", origin="derived", depends=("base-false",))(
        lambda case: Outcome(ok=True, margin=1.0)
    )
    res = check([top, bad], budget="ci", out=None)
    assert [r.id for r in res] == ["base-false", "on-top"]
    assert res[0].verdict == "refuted" and "depends on refuted base-false" in res[1].reason
