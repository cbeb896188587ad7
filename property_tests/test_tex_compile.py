"""Every golden LaTeX document (and an instance KKT document) compiles with pdflatex.

Needs Debian ``texlive-latex-base`` (amsmath, amssymb); skipped visibly when pdflatex is absent.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from attsvm.data import Dataset
from attsvm.symbolic.kkt_instance import derivation_of, exact_data, solve_exact

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "proofs" / "tex").glob("*.tex"))

pytestmark = [
    pytest.mark.tex,
    pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed: LaTeX compile check not run"),
]


def _compile(tex: Path, out: Path) -> None:
    r = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-output-directory", str(out), str(tex)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [ln for ln in r.stdout.splitlines() if ln.startswith("!")]
    assert r.returncode == 0, f"{tex.name}: {errors or r.stdout[-2000:]}"
    assert (out / (tex.stem + ".pdf")).stat().st_size > 0


def test_there_are_documents():
    assert len(DOCS) >= 14


@pytest.mark.parametrize("tex", DOCS, ids=[p.stem for p in DOCS])
def test_golden_document_compiles(tex, tmp_path):
    _compile(tex, tmp_path)


def test_instance_kkt_document_compiles(tmp_path):
    rng = np.random.default_rng(0)
    ds = Dataset(X=rng.normal(size=(2, 3, 2)), Y=np.array([1.0, -1.0]), Z=rng.normal(size=(2, 2)), v=rng.normal(size=2))
    from attsvm.symbolic.kkt_instance import certify

    cert = certify(ds)
    labels, D, Z, a = exact_data(ds)
    doc = derivation_of(solve_exact(labels, D, Z, cert["active"]), alpha=a).latex(standalone=True)
    f = tmp_path / "kkt.tex"
    f.write_text(doc)
    _compile(f, tmp_path)
