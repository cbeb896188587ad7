"""The README's conjecture snippet and every code block of docs/writing-claims.md, run exactly as printed.

Each ``python`` block is a complete claim file; it is written to a temporary file and checked with
``attsvm check FILE --budget ci --no-db``: the verdict must be the one the claim declares (exit 0)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(path: Path, after: str | None = None) -> list[str]:
    text = path.read_text()
    if after is not None:
        text = text[text.index(after) :]
    return BLOCK.findall(text)


README = blocks(ROOT / "README.md", after="## Checking your own conjecture")[:1]
GUIDE = blocks(ROOT / "docs" / "writing-claims.md")


def test_the_pages_have_their_blocks():
    assert len(README) == 1 and "case.kit" in README[0]
    assert len(GUIDE) >= 4
    assert README[0] == GUIDE[0]  # the README snippet is the guide's first conjecture


def _check(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    f = tmp_path / "claim_block.py"
    f.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "attsvm", "check", str(f), "--budget", "ci", "--no-db", "--json", "-"]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("i", range(len(GUIDE)))
def test_guide_block_runs_as_printed(i, tmp_path):
    import json

    r = _check(GUIDE[i], tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for c in json.loads(r.stdout)["claims"]:
        assert c["matches"]
        if c["verdict"] == "refuted":
            assert c["confirmed"] and c["confirmed_by"] == "automatic"


def test_a_wrong_expectation_in_a_block_fails(tmp_path):
    """The check above can fail: the first block declared true (a refutation then exits 1)."""
    r = _check(GUIDE[0].replace('origin="expected-false"', 'origin="derived"'), tmp_path)
    assert r.returncode == 1
