"""One registry: every discovered claim (the built-in ``proofs/claims/`` and the worked examples of
``examples/conjectures/``) runs through the same runner and exit policy as ``attsvm check --budget ci``.

The CI budget (``ci_examples``) and the expected verdict (``origin`` / ``expect`` with its ``finding``) live on
the claim; nothing here names a claim id, so a new claim file is tested by adding the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from attsvm.claims import discover, run_claim

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "conjectures"
CLAIMS = {c.id: c for c in discover() + discover([EXAMPLES])}


@pytest.mark.parametrize("cid", sorted(CLAIMS))
def test_claim_matches_its_expectation_at_ci_budget(cid, tmp_path):
    res = run_claim(CLAIMS[cid], budget="ci", seed=0, out=tmp_path)
    assert res.matches, f"{cid}: {res.mismatch} ({res.reason})"
    if res.verdict == "refuted":
        assert res.confirmed and res.confirm_outcome is not None and not res.confirm_outcome.ok
    if res.verdict == "verified":
        assert sum(res.decided.values()) >= 3 and res.worst_margin is not None and res.worst_margin >= 0


def test_pinned_expectations_carry_their_evidence():
    for c in CLAIMS.values():
        if c.expect is not None:
            assert len(c.finding) > 40, f"{c.id}: a pinned expectation needs its finding (evidence)"
