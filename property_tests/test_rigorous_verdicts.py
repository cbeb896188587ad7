r"""Rigorous, deterministic verdicts (issue 25): each defect a user met, written as a claim file of the README's
form, and the rule that now decides it.

* a true strict inequality with a tiny positive margin ($2/(1+e^{300})$) that float64 and 50/100 digits evaluate
  to exactly 0 is never refuted: balls clear it (rigorous), and where balls cannot decide, a high-precision margin
  of 0 is *unconfirmed*, never confirmed;
* a conclusion that computes in numpy float64 and wraps the result in ``k.scalar`` is caught during
  confirmation (:class:`attsvm.kit.Bypass`): unconfirmed, never refuted;
* a misspelt constant (``params={"los": ...}`` read as ``"loss"``), and a declared constant never read, are errors
  in the claim naming it;
* a search does not read the clock: a machine a thousand times slower (simulated) gets the same JSON;
* built-in refutations are confirmed by ball arithmetic (rigorous), and the reports say how each was decided.

Each test fails on the code before issue 25 (checked once by running it there).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from attsvm.claims.discover import discover
from attsvm.claims.runner import run_claim
from attsvm.cli import main

FIX = Path(__file__).parent / "fixtures"

TINY = """
from attsvm.claims import Outcome, claim


@claim(id="tiny-margin", title="u < max_t gamma_t at logits (150, -150)", origin="derived",
       hypotheses={"data": "dyadic", "n": 1, "T": 2, "d": 1}, examples=5)
def tiny_margin(case):
    k = case.kit
    a = k.array([150.0, -150.0])
    g = k.array([1.0, -1.0])
    s = k.exp(a - k.logsumexp(a))
    margin = g[0] - (s[0] * g[0] + s[1] * g[1])  # = 2/(1+e^300) > 0; float64 and 100 digits give 0
    return Outcome(ok=bool(margin > 0), margin=margin)
"""

# the same statement where balls cannot decide (a helper without an enclosure): the 50/100-digit fallback sees 0
TINY_NO_BALLS = TINY.replace('id="tiny-margin"', 'id="tiny-margin-no-balls"').replace(
    "    k = case.kit\n",
    "    k = case.kit\n"
    "    if k.precision == 'ball':\n"
    "        from attsvm.kit import Undecidable\n"
    "        raise Undecidable('no enclosure (planted)')\n",
)

BYPASS = """
import numpy as np

from attsvm.claims import Outcome, claim


@claim(id="softmax-sum", title="softmax rows sum to at most 1", origin="derived",
       hypotheses={"data": "dyadic", "n": 1, "T": 2, "d": 1}, examples=5)
def softmax_sum(case):
    k = case.kit
    a = np.array([0.78, -0.55, 0.25])
    e = np.exp(a - a.max())
    m = 1 - (e / e.sum()).sum()  # float64: -2.2e-16
    return Outcome(ok=bool(m >= 0), margin=k.scalar(m))
"""

MISSPELT = """
from attsvm.claims import Outcome, claim


@claim(id="misspelt", title="the loss is positive", origin="derived",
       hypotheses={"data": "paper", "n": (1, 2), "T": (2, 3), "d": (2, 3)}, params={"los": "exponential"}, examples=5)
def misspelt(case):
    import numpy as np
    from attsvm import model

    loss = case.hypotheses.get("loss", "logistic")
    L = model.loss(case.data, np.zeros((case.data.d, case.data.d)), loss)
    return Outcome(ok=bool(L > 0), margin=float(L))
"""

UNREAD = MISSPELT.replace('id="misspelt"', 'id="unread"').replace(
    'params={"los": "exponential"}', 'params={"loss": "exponential", "steps": 10}'
)


def _check(tmp_path: Path, text: str, *extra: str) -> tuple[int, dict]:
    f = tmp_path / "claims.py"
    f.write_text(text)
    out = tmp_path / "r.json"
    rc = main(["check", str(f), "--no-db", "--out", str(tmp_path / "cx"), "--json", str(out), *extra])
    return rc, json.loads(out.read_text())


def _one(report: dict) -> dict:
    (r,) = report["claims"]
    return r


def test_tiny_positive_margin_is_cleared_by_balls(tmp_path):
    rc, rep = _check(tmp_path, TINY)
    r = _one(rep)
    assert r["verdict"] == "verified" and rc == 0, r["reason"]
    assert r["decided"] == {"rigorous": 5}, r["decided"]  # every float64 failure cleared by balls


def test_zero_high_precision_margin_is_never_confirmed(tmp_path):
    rc, rep = _check(tmp_path, TINY_NO_BALLS)
    r = _one(rep)
    assert r["verdict"] == "inconclusive" and r["unconfirmed_failure"] and rc == 1, r["reason"]
    assert "not resolved" in r["reason"] and "no enclosure (planted)" in r["reason"], r["reason"]


def test_float64_margin_wrapped_in_the_kit_is_unconfirmed(tmp_path):
    rc, rep = _check(tmp_path, BYPASS)
    r = _one(rep)
    assert r["verdict"] == "inconclusive" and r["unconfirmed_failure"] and rc == 1, r["reason"]
    assert "bypasses the kit" in r["reason"] and "claims.py" in r["reason"], r["reason"]


def test_misspelt_constant_is_an_error_naming_it(tmp_path, capsys):
    rc, rep = _check(tmp_path, MISSPELT)
    r = _one(rep)
    assert rc == 1 and r["verdict"] == "inconclusive" and r["error"], r
    assert "'loss'" in r["error"] and "declares no constant" in r["error"], r["error"]


def test_declared_constant_never_read_is_an_error(tmp_path):
    rc, rep = _check(tmp_path, UNREAD)
    r = _one(rep)
    assert rc == 1 and r["error"] and "'steps'" in r["error"] and "never read" in r["error"], r


def test_a_constant_read_only_by_the_confirmer_counts_as_read():
    c = {c.id: c for c in discover([Path(__file__).parents[1] / "proofs" / "claims" / "joint_vp_relaxed.py"])}
    (claim,) = c.values()
    r = run_claim(claim, budget="ci")
    assert r.error is None, r.error


def test_a_slow_machine_gets_the_same_verdict_and_counterexample(monkeypatch):
    """The planted GD conjecture, once as it runs and once on a simulated machine where every clock read is 1000 s
    later than the last: the same examples, verdict and shrunk counterexample (only ``seconds`` differ)."""
    (claim,) = discover([FIX / "planted_gd.py"])
    a = run_claim(claim, examples=120, seed=0, budget="ci")
    assert a.verdict == "refuted" and a.confirmed, a.reason
    clock = {"t": 0.0}

    def slow() -> float:
        clock["t"] += 1000.0
        return clock["t"]

    monkeypatch.setattr(time, "perf_counter", slow)
    b = run_claim(claim, examples=120, seed=0, budget="ci")
    assert a.to_json() | {"seconds": 0} == b.to_json() | {"seconds": 0}
    assert a.case.draws == b.case.draws or len(a.case.draws) == len(b.case.draws)
    assert (a.case.data.X == b.case.data.X).all()


def test_time_limit_is_inconclusive_never_verified(tmp_path):
    rc, rep = _check(tmp_path, TINY.replace("examples=5", "examples=100000"), "--time-limit", "0.5")
    r = _one(rep)
    assert r["verdict"] == "inconclusive" and r["reason"].startswith("time limit"), r["reason"]
    assert rc == 1


BALL_REFUTED = (
    "equal-scores-needed",
    "kq-balancedness-control",
    "kq-heads-conservation-control",
    "ntp-logloss-convex-control",
)


@pytest.mark.parametrize("cid", BALL_REFUTED)
def test_builtin_refutations_are_rigorous(cid):
    from attsvm import paths
    from attsvm.claims.report import confirmed_label

    claims = {c.id: c for c in discover([paths.proofs_dir() / "claims"])}
    r = run_claim(claims[cid], budget="ci")
    assert r.verdict == "refuted" and r.confirmed and r.confirmed_how == "rigorous", (r.reason, r.confirmed_how)
    assert confirmed_label(r) == "ball, rigorous"
    assert "rigorous" in r.confirmation_method
