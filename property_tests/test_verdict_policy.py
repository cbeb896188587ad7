"""Verdicts that cannot lie (issue 9): one test per rule, on the claim files of ``fixtures/bad_claims/``.

Each file is a claim a new user could write that an earlier ``attsvm check`` passed with exit 0. Now: exit 1
for a claim that was not really checked (an unconfirmed failure, an invalid ``Outcome``, too little evidence,
a stale pin), exit 2 for hypotheses a strategy does not take, one line naming the reason, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attsvm.claims import Outcome, claim, discover, run_claim, select
from attsvm.cli import main
from attsvm.errors import InputError

BAD = Path(__file__).parent / "fixtures" / "bad_claims"
PLANTED = Path(__file__).parent / "fixtures" / "planted.py"


def _check(tmp_path, *argv):
    js = tmp_path / "r.json"
    rc = main(["check", *map(str, argv), "--out", str(tmp_path / "cx"), "--json", str(js)])
    return rc, json.loads(js.read_text()) if js.exists() else None


def _cli_subprocess(*argv, cwd):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "attsvm", "check", *map(str, argv)], capture_output=True, text=True, cwd=cwd, env=env
    )


# ---------------------------------------------------------------------- 1. exit policy
@pytest.mark.parametrize("name", ["no_confirmer", "confirmer_none", "confirmer_ellipsis"])
def test_unconfirmed_failure_exits_1_and_saves_the_case(tmp_path, name):
    rc, rep = _check(tmp_path, BAD / f"{name}.py", "--budget", "ci")
    c = rep["claims"][0]
    assert rc == 1 and c["verdict"] == "inconclusive" and c["unconfirmed_failure"] and not c["matches"]
    assert c["reason"].startswith("unconfirmed failure") and "float64 margin -1" in c["reason"]
    assert c["counterexample"] and Path(c["counterexample"]).exists()  # the failing case is saved
    # exploratory runs do not excuse it either
    assert _check(tmp_path, BAD / f"{name}.py", "--budget", "ci", "--allow-inconclusive")[0] == 1


def test_inconclusive_fails_unless_pinned_or_allowed(tmp_path):
    f = BAD / "all_inconclusive.py"
    rc, rep = _check(tmp_path, f, "--budget", "ci")
    assert rc == 1 and rep["claims"][0]["verdict"] == "inconclusive"
    assert _check(tmp_path, f, "--budget", "ci", "--allow-inconclusive")[0] == 0
    pin = BAD / "pinned_inconclusive.py"
    assert _check(tmp_path, pin, "--budget", "ci", "--only", "pinned-undecidable")[0] == 0
    rc, rep = _check(tmp_path, pin, "--budget", "ci", "--only", "pinned-stale")  # strict: now verified
    assert rc == 1 and rep["claims"][0]["mismatch"] == "expected inconclusive, got verified"


def test_true_claims_pass_and_false_claims_are_refuted_confirmed(tmp_path):
    rc, rep = _check(tmp_path, PLANTED, "--budget", "ci", "--only", "planted-true", "planted-false")
    by = {c["id"]: c for c in rep["claims"]}
    assert rc == 0 and by["planted-true"]["verdict"] == "verified"
    assert by["planted-false"]["verdict"] == "refuted" and by["planted-false"]["confirmed"]
    assert by["planted-false"]["confirmed_how"] == "high precision"


def test_a_refutation_needs_a_confirmed_counterexample():
    # an expected-false claim whose failures are never confirmed is not "refuted": it does not match
    fake = claim(id="fake-control", title="t", origin="expected-false", hypotheses={"data": "paper"})(
        lambda case: Outcome(ok=False, margin=-1.0)
    )
    r = run_claim(fake, budget="ci")
    assert r.verdict == "inconclusive" and r.unconfirmed and not r.matches


# ---------------------------------------------------------------------- 2. outcomes are validated
@pytest.mark.parametrize(
    "name, what",
    [("nan_margin", "margin must be finite"), ("negative_margin_ok", "ok=True disagrees with margin=-5")],
)
def test_invalid_outcomes_are_claim_errors(tmp_path, name, what):
    rc, rep = _check(tmp_path, BAD / f"{name}.py", "--budget", "ci")
    c = rep["claims"][0]
    assert rc == 1 and c["verdict"] != "verified" and what in c["error"] and not c["matches"]
    assert c["counterexample"] and Path(c["counterexample"]).exists()  # the case the claim broke on


def test_outcome_error_rules():
    from attsvm.claims.api import outcome_error

    assert outcome_error(Outcome(ok=True, margin=0.0)) is None
    assert outcome_error(Outcome(ok=False, margin=0.0)) is None  # a strict inequality fails on the boundary
    assert "disagrees" in outcome_error(Outcome(ok=False, margin=0.5))
    assert "finite" in outcome_error(Outcome(ok=True, margin=float("inf")))
    assert "real number" in outcome_error(Outcome(ok=True, margin="1"))
    assert "real number" in outcome_error(Outcome(ok=True, margin=1j))
    assert "not an Outcome" in outcome_error(None)
    assert "how" in outcome_error(Outcome(ok=True, margin=1.0, how="guess"))
    assert outcome_error(Outcome(ok=True, inconclusive="why")) is None
    assert "non-empty" in outcome_error(Outcome(ok=True, inconclusive=" "))


def test_invalid_confirmer_outcome_is_not_a_confirmation():
    bad = claim(id="bad-conf", title="t", origin="expected-false", hypotheses={"data": "paper"})(
        lambda case: Outcome(ok=False, margin=-1.0)
    )
    bad.confirm(lambda case, out: Outcome(ok=False, margin=float("nan")))
    r = run_claim(bad, budget="ci")
    assert r.unconfirmed and "margin must be finite" in r.reason and not r.matches


# ---------------------------------------------------------------------- 3. hypotheses are strict
@pytest.mark.parametrize(
    "name, what",
    [
        ("misspelt_key", "strategy paper: unknown hypothesis 'nn' (allowed: n, T, d, relations)"),
        ("out_of_range", "strategy paper: T must lie in [2, 1000], got (1, 1)"),
    ],
)
def test_bad_hypotheses_exit_2_with_one_line(tmp_path, name, what):
    p = _cli_subprocess(BAD / f"{name}.py", "--out", tmp_path / "cx", cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and what in lines[0]
    assert not (tmp_path / "cx").exists()  # nothing ran, nothing written


@pytest.mark.parametrize(
    "hyp, what",
    [
        ({"data": "paper", "n": (3, 2)}, "n range (3, 2) is empty"),
        ({"data": "paper", "n": 2.0}, "n must be an int or an inclusive (lo, hi) pair"),
        ({"data": "paper", "n": (1, 2, 3)}, "n must be an int or an inclusive (lo, hi) pair"),
        ({"data": "paper", "d": 1}, "d must lie in [2, 1000]"),
        ({"data": "locally_optimal", "T": 2}, "T must lie in [3, 1000]"),
        ({"data": "feasible", "alpha": "best"}, "alpha must be one of 'opt', 'random'"),
        ({"data": "equal_scores", "feasible": 1}, "feasible must be a bool"),
        ({"data": "dyadic", "bits": 40}, "bits must be an int in [1, 16]"),
        ({"data": "overparam", "d": 3}, "unknown hypothesis 'd'"),
        ({"n": 3}, "need a data strategy"),
        ({"data": "paper", "n": 4, "d": (2, 3), "relations": ("d >= n",)}, "leave no d in (2, 3) when n=4"),
        ({"data": "paper", "relations": ("n >= d",)}, "bound on the size drawn last"),
        ({"data": "paper", "relations": ("d >= k",)}, "'k' is not a size"),
        ({"data": "paper", "relations": ("d >= __import__('os')",)}, "not a size"),
        ({"data": "paper", "relations": ("d >= n ** 2",)}, "only ints, sizes"),
        ({"data": "paper", "relations": ("d >= abs(n)",)}, "'abs' is not a size"),
        ({"data": "paper", "relations": ("d >=",)}, "not an expression"),
    ],
)
def test_hypothesis_schema_names_the_key(hyp, what):
    from attsvm.strategies import split_hypotheses

    with pytest.raises(InputError) as exc:
        split_hypotheses(hyp)
    assert what in str(exc.value)


def test_relations_are_met_by_construction():
    from attsvm.strategies import batch

    r = run_claim(select(discover([BAD / "relations.py"]), ["relations-hold"])[0], examples=60)
    assert r.verdict == "verified" and r.worst_margin >= 0 and r.decided == {"float64": 60}
    for seed in range(20):  # the numpy counterpart (empirical claims) obeys them too
        ds = batch("paper", 2, seed=seed, n=(1, 5), T=(2, 6), d=(2, 6), relations=("d >= n", "d >= T - 1"))
        assert ds.d >= ds.n and ds.d >= ds.T - 1


# ---------------------------------------------------------------------- 4. enough evidence
def test_min_decided_applies_without_a_timeout():
    two = claim(id="two", title="t", origin="derived", hypotheses={"data": "paper"})(
        lambda case: Outcome(ok=True, margin=1.0)
    )
    r = run_claim(two, examples=2)
    assert r.verdict == "inconclusive" and "too few decided examples: 2 (need 3)" in r.reason and not r.matches


def test_too_many_undecidable_cases_is_inconclusive(tmp_path):
    rc, rep = _check(tmp_path, BAD / "half_undecidable.py", "--examples", "6")
    c = rep["claims"][0]
    assert (
        rc == 1 and c["verdict"] == "inconclusive" and c["inconclusive_cases"] == 3 and c["decided"] == {"float64": 3}
    )
    assert "undecidable cases: 3/6" in c["reason"]


def test_report_says_how_examples_were_decided(tmp_path, capsys):
    rc = main(["check", str(PLANTED), "--only", "planted-rounding", "--budget", "ci", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and " hp" in out and " f64" in out  # e.g. "18 f64 + 2 hp": float64, and cleared at 50 digits


def test_a_deterministic_claim_needs_one_decided_example():
    const = claim(id="const", title="1 > 0", origin="derived")(lambda case: Outcome(ok=True, margin=1.0))
    r = run_claim(const, budget="ci")
    assert r.verdict == "verified" and r.examples == 1 and "every distinct case tried" in r.reason


# ---------------------------------------------------------------------- 5. every universal claim can be refuted
def test_every_builtin_universal_claim_has_a_confirmation():
    """A hand-written confirmer, or a conclusion written once whose automatic confirmation is exercised on a real
    case in test_written_once.py (PORTED): a claim in neither could never be refuted."""
    from test_written_once import CONTROLS, PORTED

    automatic = {c.id for c in discover() if c.kind == "universal" and c.confirmer is None}
    assert automatic == set(PORTED) | set(CONTROLS), (
        f"universal claims without a confirmer not exercised automatically: {automatic}"
    )


# ---------------------------------------------------------------------- 8. claim helpers live in the engine
def test_claim_helpers_live_in_the_engine():
    import importlib
    import re

    for gone in ("attsvm.claims.gdcheck", "attsvm.claims.highprec"):  # a second GD engine, a second replay
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(gone)
    from attsvm import highprec

    assert callable(highprec.replay)  # the one high-precision replay
    root = Path(__file__).resolve().parents[1]
    for f in [*(root / "proofs").rglob("*.py"), *(root / "examples").rglob("*.py")]:
        defs = re.findall(r"^def (\w*(?:replay|reference|stepper)\w*)\(", f.read_text(), flags=re.M)
        assert not defs, f"{f.name} defines its own GD replay/stepper {defs}: use attsvm.highprec.replay / attsvm.gd"
