r"""Reports of a check: terminal table, JSON, Markdown and LaTeX.

The Markdown and LaTeX reports are what a researcher pastes into an appendix: one row per claim
(id, origin, verdict, examples, worst margin, seconds) and, for each refuted claim, a section with the
counterexample's numbers (the data set, the float64 and the high-precision values) and the command that
reproduces it. The LaTeX report is a plain ``tabular`` (``texlive-latex-base`` suffices); every text
field goes through :func:`tex_escape`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ..serial import tex_escape
from .confirm import HOW_LABELS
from .verdict import ClaimResult, decided_text, jsonable

COLUMNS = ("id", "origin", "verdict", "examples", "decided", "worst margin", "seconds")


def confirmed_label(r: ClaimResult) -> str:
    """Short: ``50 digits, automatic`` / ``high precision`` / ``exact`` / ``ball arithmetic``."""
    if r.confirmed_by == "automatic":
        return "50 digits, automatic"
    how = r.confirmed_how or "high precision"
    return HOW_LABELS.get(how, how)


def _confirmation_text(r: ClaimResult) -> str:
    at = f" on a counterexample with {r.sizes_text}" if r.sizes_text else ""
    if r.confirmed:
        return f"confirmed by {r.confirmation_method or r.confirmed_how}{at}"
    return f"not confirmed{at}"


def verdict_cell(r: ClaimResult) -> str:
    v = r.verdict
    if r.unconfirmed:
        v += ": unconfirmed failure"
    elif r.confirmed:
        v += f", confirmed ({confirmed_label(r)})"
    if not r.matches:
        v += " (!)"
    elif r.finding:
        v += " (pinned)"
    return v


def _margin(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3g}"


def rows(results: list[ClaimResult]) -> list[list[str]]:
    return [
        [
            r.id,
            r.origin,
            verdict_cell(r),
            str(r.examples),
            decided_text(r.decided, short=True),
            _margin(r.worst_margin),
            f"{r.seconds:.1f}",
        ]
        for r in results
    ]


def summary(results: list[ClaimResult]) -> str:
    n = len(results)
    by = {v: sum(r.verdict == v for r in results) for v in ("verified", "refuted", "inconclusive")}
    bad = [r.id for r in results if not r.matches]
    s = f"{n} claims: {by['verified']} verified, {by['refuted']} refuted, {by['inconclusive']} inconclusive"
    s += f"; {'all as expected' if not bad else 'NOT as expected: ' + ', '.join(bad)}"
    return s


def table(results: list[ClaimResult]) -> str:
    """The terminal table (plain text, aligned columns) and a summary line."""
    body = rows(results)
    w = [max(len(COLUMNS[j]), *(len(r[j]) for r in body)) if body else len(COLUMNS[j]) for j in range(len(COLUMNS))]
    right = {3, 5, 6}
    fmt = lambda cells: "  ".join(c.rjust(w[j]) if j in right else c.ljust(w[j]) for j, c in enumerate(cells))  # noqa: E731
    lines = [fmt(COLUMNS), fmt(["-" * x for x in w])] + [fmt(r) for r in body]
    lines.append("")
    lines.append(summary(results))
    for r in results:
        if not r.matches:
            lines.append(f"  {r.id}: {r.mismatch} ({r.reason})")
    for r in results:
        if r.counterexample:
            cmd = _commands(r).get("replay") or _commands(r).get("rerun")
            at = f" ({r.sizes_text})" if r.sizes_text else ""
            lines.append(f"  {r.id}: counterexample{at} {r.counterexample}; reproduce: {cmd}")
    return "\n".join(lines)


def to_json(results: list[ClaimResult], **meta: Any) -> dict[str, Any]:
    """``{"claims": [...], "summary": {...}}``."""
    return {
        "claims": [r.to_json() for r in results],
        "summary": {
            "total": len(results),
            "mismatches": [r.id for r in results if not r.matches],
            "verified": sum(r.verdict == "verified" for r in results),
            "refuted": sum(r.verdict == "refuted" for r in results),
            "inconclusive": sum(r.verdict == "inconclusive" for r in results),
            "as_expected": all(r.matches for r in results),
            **jsonable(meta),
        },
    }


def json_text(results: list[ClaimResult], **meta: Any) -> str:
    return json.dumps(to_json(results, **meta), indent=1)


def _commands(r: ClaimResult) -> dict[str, str]:
    from pathlib import Path

    from .counterexample import commands

    npz = Path(r.counterexample) if r.counterexample and r.counterexample.endswith(".npz") else None
    return commands(r, npz)


def _arr(a: np.ndarray) -> str:
    return np.array2string(np.asarray(a), precision=17, separator=", ", max_line_width=110, threshold=10_000)


def _case_numbers(r: ClaimResult) -> list[tuple[str, str]]:
    """(name, text) pairs describing the failing case: data arrays, the float64 and high-precision values."""
    out: list[tuple[str, str]] = []
    c = r.case
    if c is not None and c.data is not None:
        ds = c.data
        out.append(("shape", f"n={ds.n}, T={ds.T}, d={ds.d}, kind={ds.kind}"))
        for k, v in ds.to_dict().items():
            if isinstance(v, np.ndarray):
                out.append((k, _arr(v)))
    if c is not None:
        for j, d in enumerate(c.draws):
            try:
                out.append((f"draw {j + 1}", _arr(np.asarray(d, dtype=float))))
            except (TypeError, ValueError):
                out.append((f"draw {j + 1}", repr(d)))
    if r.outcome is not None:
        out.append(("float64 margin", _margin(r.outcome.margin)))
        for k, v in (r.outcome.detail or {}).items():
            out.append((f"float64 {k}", json.dumps(jsonable(v))))
    if r.confirm_outcome is not None:
        out.append(("high-precision margin", str(r.confirm_outcome.margin)))
        for k, v in (r.confirm_outcome.detail or {}).items():
            out.append((f"high-precision {k}", json.dumps(jsonable(v))))
    return out


def markdown(results: list[ClaimResult], title: str = "attsvm check") -> str:
    """A Markdown report: a table, then a section per refuted claim."""
    md = [f"# {title}", "", summary(results), ""]
    md.append("| " + " | ".join(COLUMNS) + " | reason |")
    md.append("|" + "---|" * (len(COLUMNS) + 1))
    for r, cells in zip(results, rows(results)):
        cells = [f"`{cells[0]}`", *cells[1:]]
        md.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " | " + r.reason.replace("|", "\\|") + " |")
    for r in results:
        if r.verdict != "refuted" and not r.unconfirmed:
            continue
        what = "refuted" if r.verdict == "refuted" else "unconfirmed failure"
        md += ["", f"## `{r.id}` {what} — {r.title}", ""]
        md.append(f"Origin: {r.origin}; expected: {r.expected}; {_confirmation_text(r)}.")
        md.append(f"Reason: {r.reason}.")
        if r.finding:
            md.append(f"Finding (pinned in the claim file): {r.finding}")
        if r.rate:
            md.append(
                f"Rate: {r.rate['successes']}/{r.rate['decided']} (95% CI [{r.rate['lo']:.3f}, {r.rate['hi']:.3f}])."
            )
        md.append("")
        for name, text in _case_numbers(r):
            if "\n" in text or len(text) > 60:
                md += [f"{name}:", "", "```", text, "```", ""]
            else:
                md.append(f"- {name}: `{text}`")
        cmds = _commands(r)
        md += ["", "Reproduce:", "", "```"]
        md += [cmds[k] for k in ("replay", "rerun") if k in cmds]
        md += ["```"]
    return "\n".join(md) + "\n"


def latex(results: list[ClaimResult], standalone: bool = True) -> str:
    """A LaTeX report (plain ``tabular``; ``standalone`` wraps it in a compilable ``article``)."""
    t = []
    if standalone:
        t += [r"\documentclass{article}", r"\usepackage[margin=2cm]{geometry}", r"\begin{document}", ""]
    t += [r"\section*{attsvm check}", tex_escape(summary(results)), "", r"\begin{tabular}{lllrlrr}", r"\hline"]
    t.append(" & ".join(tex_escape(c) for c in COLUMNS) + r" \\")
    t.append(r"\hline")
    for cells in rows(results):
        t.append(" & ".join([r"\texttt{" + tex_escape(cells[0]) + "}", *(tex_escape(c) for c in cells[1:])]) + r" \\")
    t += [r"\hline", r"\end{tabular}", ""]
    for r in results:
        if r.verdict != "refuted":
            continue
        t.append(r"\subsection*{\texttt{" + tex_escape(r.id) + "} refuted}")
        t.append(tex_escape(f"{r.title}. Origin: {r.origin}; {_confirmation_text(r)}. {r.reason}."))
        t.append("")
        t.append(r"\begin{verbatim}")
        for name, text in _case_numbers(r):
            t.append(f"{name}: {text}")
        cmds = _commands(r)
        t.append("reproduce:")
        t += [f"  {cmds[k]}" for k in ("replay", "rerun") if k in cmds]
        t.append(r"\end{verbatim}")
        t.append("")
    if standalone:
        t.append(r"\end{document}")
    return "\n".join(t) + "\n"
