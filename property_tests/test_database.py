"""The counterexample database: failures are stored, replayed first, and dropped when they no longer apply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attsvm.claims import discover
from attsvm.claims.database import Database, open_database
from attsvm.claims.runner import run_claim
from attsvm.errors import InputError

CLAIM = """
import numpy as np
from attsvm.claims import Outcome, claim


@claim(id="logits-positive", title="every logit at W = I is positive", origin="{origin}",
       hypotheses={{"data": "paper", "n": (1, 3), "T": (2, 4), "d": (2, 3)}})
def logits_positive(case):
    k = case.kit
    W = {W}
    m = k.logits(case.data, W).min() + {shift}
    return Outcome(ok=bool(m > 0), margin=m)
{extra}
"""


# a new file name for each version of the claim: discover() keeps a module it has loaded
def _write(tmp_path, name="conj.py", origin="expected-false", W="k.eye(case.data.d)", shift="0", extra=""):
    p = tmp_path / name
    p.write_text(CLAIM.format(origin=origin, W=W, shift=shift, extra=extra))
    return p


def _run(path, db, **kw):
    (c,) = discover([path])
    return run_claim(c, budget="ci", db=db, **kw)


def test_failure_is_stored_and_replayed_first(tmp_path):
    db = Database(tmp_path / "db")
    p = _write(tmp_path)
    first = _run(p, db)
    assert first.verdict == "refuted" and first.confirmed
    (entry,) = db.entries("logits-positive")
    assert entry.with_suffix(".npz").exists()
    # an edit elsewhere in the file: the stored case is still the first example
    p2 = _write(tmp_path, "conj2.py", extra="\n\ndef unrelated():\n    return 42\n")
    again = _run(p2, db)
    assert again.verdict == "refuted" and again.confirmed and again.examples == 1
    assert "counterexample database" in again.reason and again.detail["from_database"] == str(entry)
    assert again.sizes == first.sizes
    assert len(db.entries("logits-positive")) == 1  # the same case is not stored twice


def test_entry_that_passes_now_is_dropped(tmp_path):
    db = Database(tmp_path / "db")
    _run(_write(tmp_path), db)
    assert db.entries("logits-positive")
    fixed = _run(_write(tmp_path, "fixed.py", origin="derived", shift="1e9"), db)  # the conjecture, weakened until true
    assert fixed.verdict == "verified" and "database" not in fixed.reason
    assert db.entries("logits-positive") == []


def test_entry_whose_draws_no_longer_fit_is_dropped(tmp_path):
    db = Database(tmp_path / "db")
    _run(_write(tmp_path), db)
    redrawn = _write(tmp_path, "redrawn.py", W="k.array(case.draw_matrix(case.data.d, case.data.d, 1.0))")
    r = _run(redrawn, db)  # the stored case has no recorded draw: a ReplayError drops it, the search goes on
    assert r.verdict == "refuted" and r.examples >= 1 and "database" not in r.reason
    assert len(db.entries("logits-positive")) == 1  # the new failing case


def test_tampered_entry_is_bad_input(tmp_path):
    db = Database(tmp_path / "db")
    _run(_write(tmp_path), db)
    (entry,) = db.entries("logits-positive")
    entry.write_text("{")
    with pytest.raises(InputError, match="counterexample database"):
        _run(_write(tmp_path), db)
    entry.write_text(json.dumps({"claim": "another-claim"}))
    with pytest.raises(InputError, match="belongs to"):
        _run(_write(tmp_path), db)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere: the read-only probe cannot fail")
def test_unwritable_folder_is_bad_input(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(InputError, match="cannot write"):
        open_database(ro / "db")


def test_cli_default_db_no_db_and_bad_db(tmp_path):
    p = _write(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "attsvm", "check", str(p), "--budget", "ci"]
    r = subprocess.run([*cmd, "--no-db"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / ".attsvm").exists()
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / ".attsvm" / "db" / "logits-positive").glob("*.json"))
    r = subprocess.run([*cmd, "--json", "-"], cwd=tmp_path, capture_output=True, text=True, env=env)
    rep = json.loads(r.stdout)["claims"][0]
    assert rep["examples"] == 1 and "database" in rep["reason"]
    assert rep["counterexample_sizes"]["n"] >= 1
    assert rep["confirmation_method"].startswith(("ball arithmetic", "50 digits"))
    (tmp_path / "afile").write_text("x")
    r = subprocess.run(
        [*cmd, "--db", str(tmp_path / "afile" / "db")], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert r.returncode == 2 and r.stderr.startswith("error: --db") and "Traceback" not in r.stderr
