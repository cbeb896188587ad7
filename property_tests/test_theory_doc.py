"""The specification docs/theory.md ("THEORY") and what cites it.

(1) Every citation ``THEORY §N`` / ``§N.M`` (also ``THEORY §2–§3``, ``THEORY §1, §3``, ``THEORY section N``,
``theory.md §N``) in ``attsvm/``, ``proofs/``, ``numerics/``, ``docs/`` and ``README.md`` names a section heading
of docs/theory.md. (2) Every claim id of the built-in collection appears in docs/theory.md as the first cell of a
table row (with its statement), and every id in the tables of §3–§4 is a claim of the collection.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THEORY = ROOT / "docs" / "theory.md"
SCANNED = ("attsvm", "proofs", "numerics", "docs")
SUFFIXES = {".py", ".md", ".tex"}

_REF = r"§\s?\d+(?:\.\d+)*"
_GAP = r"(?:[^§();.\n]|\n(?![ \t]*\n)){0,30}?"  # between refs of one citation: "§1 algorithms, §5", "§2–§3"
CITATION = re.compile(
    r"(?:THEORY(?:\.md)?(?:'s)?|theory\.md\)?)"  # THEORY, THEORY.md, THEORY's, [..](theory.md)
    r"\s*\(?\s*(?:\[[^\]\n]*\]\([^)\n]*\)\s*)?"  # "THEORY (", "THEORY ([theory.md](theory.md) "
    rf"({_REF}(?:{_GAP}{_REF})*)"
)
SECTION_WORD = re.compile(r"(?:THEORY(?:\.md)?|theory\.md\)?)\s+sections?\s+(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,6}[ \t]+(\d+(?:\.\d+)*)\.?[ \t]", re.M)
ROW_ID = re.compile(r"^\|[ \t]*`([a-z0-9][a-z0-9-]*)`[ \t]*\|", re.M)


def sections(text: str) -> set[str]:
    """Section numbers of the headings ``## 2. Title`` / ``### 2.1 Title``."""
    return set(HEADING.findall(text))


def citations(text: str) -> list[tuple[int, str]]:
    """``(line, section)`` for every THEORY section cited in ``text``."""
    out = []
    for m in CITATION.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out += [(line, ref[1:].strip()) for ref in re.findall(_REF, m.group(1))]
    for m in SECTION_WORD.finditer(text):
        out.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


def scanned_files(root: Path = ROOT) -> list[Path]:
    files = [root / "README.md"]
    for top in SCANNED:
        files += sorted(
            p
            for p in (root / top).rglob("*")
            if p.suffix in SUFFIXES and p.is_file() and "__pycache__" not in p.parts and "gallery" not in p.parts
        )
    return files


def bad_citations(files: list[Path], known: set[str]) -> list[str]:
    bad = []
    for f in files:
        for line, sec in citations(f.read_text(encoding="utf-8")):
            if sec not in known:
                bad.append(f"{f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}:{line}: THEORY §{sec}")
    return bad


def table_ids(text: str, first: int | None = None, last: int | None = None) -> set[str]:
    """Claim ids in the first cell of table rows, optionally only in sections ``first``..``last``."""
    if first is None:
        return set(ROW_ID.findall(text))
    heads = [(int(m.group(1).split(".")[0]), m.start()) for m in HEADING.finditer(text)]
    ids: set[str] = set()
    for k, (num, start) in enumerate(heads):
        end = heads[k + 1][1] if k + 1 < len(heads) else len(text)
        if first <= num <= (last if last is not None else first):
            ids |= set(ROW_ID.findall(text[start:end]))
    return ids


def test_the_specification_is_titled_and_numbered_as_cited():
    text = THEORY.read_text(encoding="utf-8")
    assert text.startswith("# THEORY — the specification of attsvm (docs/theory.md)\n")
    assert {"1", "2", "3", "4", "5", "6", "7"} <= sections(text)


def test_the_scanner_reads_every_form():
    text = (
        "THEORY §3, derived. THEORY §2–§3 and THEORY §1, §3, §5). THEORY §1 algorithms, §5 numerical traps\n"
        "THEORY section 1: logits. THEORY.md (§3, §4) x. THEORY ([theory.md](theory.md) §6.2) y. THEORY §4's law.\n"
        "2308.16898 §6 (Gen-SVM); THEORY §4 (not 2308 §9)"
    )
    assert [s for _, s in citations(text)] == ["3", "2", "3", "1", "3", "5", "1", "5", "3", "4", "6.2", "4", "4", "1"]


def test_every_theory_citation_names_an_existing_section():
    known = sections(THEORY.read_text(encoding="utf-8"))
    files = scanned_files()
    found = sum(len(citations(f.read_text(encoding="utf-8"))) for f in files)
    assert found >= 50, f"only {found} THEORY citations found: is the scanner broken?"
    bad = bad_citations(files, known)
    assert not bad, "citations of sections docs/theory.md does not have:\n" + "\n".join(bad)


def test_a_planted_bad_citation_is_caught(tmp_path):
    """The check above can fail: a citation of a section that does not exist, and of a subsection."""
    known = sections(THEORY.read_text(encoding="utf-8"))
    f = tmp_path / "planted.py"
    f.write_text('"""Checked against THEORY §19 and THEORY §2.7."""\n')
    assert bad_citations([f], known) == [f"{f}:1: THEORY §19", f"{f}:1: THEORY §2.7"]


def test_no_file_points_at_a_missing_THEORY_md():
    """The specification is docs/theory.md; a bare "THEORY.md" names a file that does not exist."""
    bad = [
        f"{f.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
        for f in scanned_files()
        for text in [f.read_text(encoding="utf-8")]
        for m in re.finditer(r"(?<![\w/])THEORY\.md", text)
    ]
    assert not bad, bad


@pytest.fixture(scope="module")
def claim_ids() -> set[str]:
    from attsvm.claims import discover

    return {c.id for c in discover()}


def test_every_builtin_claim_is_in_the_specification(claim_ids):
    rows = table_ids(THEORY.read_text(encoding="utf-8"))
    missing = sorted(claim_ids - rows)
    assert not missing, f"claim ids without a statement row in docs/theory.md: {missing}"


def test_the_specified_claims_of_sections_3_and_4_exist(claim_ids):
    specified = table_ids(THEORY.read_text(encoding="utf-8"), 3, 4)
    assert len(specified) >= 25
    assert not sorted(specified - claim_ids), "ids in docs/theory.md §3-§4 without a claim file"
