"""Every golden LaTeX document (and an instance KKT document) compiles with pdflatex; the instance documents (a
random instance and the real float instance ``examples/small.npz``, whose exact values run to 2900 digits and whose
W is 10 by 10) fit the page: no overfull box wider than 5 pt.

Needs Debian ``texlive-latex-base`` (amsmath, amssymb); skipped visibly when pdflatex is absent.
"""

from __future__ import annotations

import re
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


OVERFULL = re.compile(r"Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\)")


def _compile(tex: Path, out: Path) -> str:
    """Compile ``tex`` into ``out``; return the log."""
    r = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-output-directory", str(out), str(tex)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [ln for ln in r.stdout.splitlines() if ln.startswith("!")]
    assert r.returncode == 0, f"{tex.name}: {errors or r.stdout[-2000:]}"
    assert (out / (tex.stem + ".pdf")).stat().st_size > 0
    return (out / (tex.stem + ".log")).read_text(errors="replace")


def _wide(log: str) -> list[float]:
    return [float(w) for w in OVERFULL.findall(log) if float(w) > 5.0]


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
    assert _wide(_compile(f, tmp_path)) == []


def test_real_float_instance_document_fits_the_page(tmp_path, capsys):
    from attsvm.cli import main

    tex = tmp_path / "small.tex"
    data = REPO / "examples" / "small.npz"
    assert main(["derive", "kkt", "--data", str(data), "--standalone", "--latex", str(tex)]) == 0
    capsys.readouterr()
    assert (tmp_path / "small.exact.json").exists()
    assert _wide(_compile(tex, tmp_path)) == []
