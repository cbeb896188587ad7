r"""Reports of a check: terminal table, JSON, Markdown, LaTeX, and Jupyter HTML (:class:`Report`).

The Markdown and LaTeX reports are what a researcher pastes into an appendix: one row per claim
(id, origin, verdict, examples, worst margin, seconds) and, for each refuted claim, a section with the
counterexample as tables of its data (:func:`counterexample_tables`: for each input $i$ the tokens $X_i$ row by
row with their scores $\gamma_{it}$, the query $z_i$, the label $Y_i$ and the selection $\alpha_i$, abbreviated
for large data with the sizes stated and the saved ``.npz`` named), the float64 and high-precision values of the
conclusion (:func:`outcome_tables`), the values it drew (:func:`draw_tables`) and the commands that reproduce it.
The LaTeX report is plain ``tabular`` (``texlive-latex-base`` suffices); every text field goes through
:func:`tex_escape`, every table through :func:`attsvm.tables.to_latex`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import html
from ..provenance import Provenance
from ..serial import tex_escape
from ..tables import (
    Cell,
    DataTables,
    Math,
    Num,
    Table,
    inline_md,
    inline_tex,
    input_tables,
    matrix,
    number,
    to_latex,
    to_markdown,
    vector_math,
)
from .confirm import HOW_LABELS
from .verdict import REPLAYED, ClaimResult, decided_text, jsonable

COLUMNS = ("id", "origin", "verdict", "examples", "decided", "worst margin", "seconds")


def confirmed_label(r: ClaimResult) -> str:
    """Short, with how the sign was established: ``ball, rigorous`` / ``exact, rigorous`` / ``50 digits,
    automatic, not rigorous`` / ``high precision, not rigorous``."""
    how = r.confirmed_how or "high precision"
    if how == "rigorous":
        return "ball, rigorous"
    if how == "exact":
        return "exact, rigorous"
    if r.confirmed_by == "automatic":
        return "50 digits, automatic, not rigorous"
    return f"{HOW_LABELS.get(how, how)}, not rigorous"


def confirmation_text(r: ClaimResult) -> str:
    """``confirmed by <method> on a counterexample with n=.., T=.., d=..`` (or ``not confirmed ...``)."""
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
    bad = [r.id for r in results if not r.matches]
    if results and all(r.verdict in REPLAYED for r in results):
        s = ", ".join(f"replay of {r.detail.get('replayed', r.id)}: {r.verdict}" for r in results)
        return s
    by = {v: sum(r.verdict == v for r in results) for v in ("proved", "verified", "refuted", "inconclusive")}
    s = f"{n} claims: {by['verified']} verified, {by['refuted']} refuted, {by['inconclusive']} inconclusive"
    if by["proved"]:
        s = f"{n} claims: {by['proved']} proved, " + s.split(": ", 1)[1]
    s += f"; {'all as expected' if not bad else 'NOT as expected: ' + ', '.join(bad)}"
    return s


def replay_line(r: ClaimResult) -> str:
    """``replay of FILE (claim ID): reproduced — <how>`` or ``... not reproduced — <why>``."""
    return f"replay of {r.detail.get('replayed', '?')} (claim {r.id}): {r.verdict} — {r.reason}"


def table(results: list[ClaimResult]) -> str:
    """The terminal table (plain text, aligned columns) and a summary line (for replays: one line each)."""
    if results and all(r.verdict in REPLAYED for r in results):
        return "\n".join(replay_line(r) for r in results)
    body = rows(results)
    w = [max(len(COLUMNS[j]), *(len(r[j]) for r in body)) if body else len(COLUMNS[j]) for j in range(len(COLUMNS))]
    right = {3, 5, 6}
    fmt = lambda cells: "  ".join(c.rjust(w[j]) if j in right else c.ljust(w[j]) for j, c in enumerate(cells))  # noqa: E731
    lines = [fmt(COLUMNS), fmt(["-" * x for x in w])] + [fmt(r) for r in body]
    lines.append("")
    lines.append(summary(results))
    for r in results:
        if not r.matches:
            why = r.mismatch or ""
            extra = "" if r.reason.removeprefix("error: ") in why else f" ({r.reason})"  # an error's reason once
            lines.append(f"  {r.id}: {why}{extra}")
    for r in results:
        if r.counterexample:
            cmd = _commands(r).get("replay") or _commands(r).get("rerun")
            at = f" ({r.sizes_text})" if r.sizes_text else ""
            what = "the case it broke on" if r.error is not None else "counterexample"
            lines.append(f"  {r.id}: {what}{at} {r.counterexample}; reproduce: {cmd}")
    return "\n".join(lines)


def proof_tables(r: ClaimResult) -> list[Table]:
    """One table of the proofs of a region claim (``attsvm check --prove``): per data set its sizes and digest, the
    region, the status, boxes evaluated, leaves, depth and seconds."""
    if not r.proofs:
        return []
    head = tuple(Cell(h) for h in ("data set", "region", "status", "boxes", "leaves", "depth", "seconds"))
    body = tuple(
        tuple(
            Cell(str(p[k]) if k != "seconds" else f"{p[k]:.1f}")
            for k in ("data", "region", "status", "boxes", "leaves", "depth", "seconds")
        )
        for p in r.proofs
    )
    return [Table(head, body)]


def check_line(r: ClaimResult) -> str:
    """What ran for ``r``, in one line of a provenance block: the search (examples and how they were decided) or
    the sweep (runs), or the replay, and the verdict with how a failure was confirmed."""
    if r.verdict in REPLAYED:
        what = f"replay of {r.detail.get('replayed', 'a saved case')}"
    elif r.kind == "empirical":
        what = f"{r.examples} runs in one sweep ({decided_text(r.decided)} decided)"
    else:
        what = f"{r.examples} examples searched ({decided_text(r.decided)} decided)"
    if r.proofs:
        what += "; " + ", ".join(f"{p['status']} on {p['data']} ({p['region']}, {p['boxes']} boxes)" for p in r.proofs)
    return f"{r.id}: {what}; {verdict_cell(r)}"


def provenance(results: list[ClaimResult], seed: int | None = None, budget: Any = None) -> Provenance:
    """The provenance block of a check's reports: ``attsvm check``, its seed and budget (default: those of the
    results), and one :func:`check_line` per claim."""
    if results:
        seed = results[0].seed if seed is None else seed
        budget = results[0].budget if budget is None else budget
    if isinstance(budget, (int, float)):
        budget = f"{budget:g}"
    return Provenance.of("attsvm check", seed=seed, budget=budget, checks=[check_line(r) for r in results])


def to_json(results: list[ClaimResult], **meta: Any) -> dict[str, Any]:
    """``{"provenance": {...}, "claims": [...], "summary": {...}}``."""
    prov = provenance(results, meta.get("seed"), meta.get("budget"))
    return {
        "provenance": prov.to_dict(),
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


DIGITS = 6  # significant digits of the numbers in a counterexample section
INPUTS = 4  # inputs of a counterexample shown as tables (the note names the .npz with all of them)
TEXT = 40  # longest text in a cell (longer: shortened, "...", in full in the counterexample's .json)


def counterexample_tables(r: ClaimResult, inputs: int = INPUTS, digits: int = DIGITS) -> DataTables | None:
    """The failing data set of ``r`` as one table per input (:func:`attsvm.tables.input_tables`: tokens, scores,
    queries, labels, selection; abbreviated beyond the limits, the note naming the saved ``.npz``); None without
    a data set."""
    ds = None if r.case is None else r.case.data
    if ds is None:
        return None
    return input_tables(ds, inputs=inputs, digits=digits, source=r.counterexample or "not saved")


def _value(v: Any, digits: int = DIGITS) -> str:
    """A value of an outcome's ``detail`` as a cell: a number, a short vector (math), or text (shortened)."""
    if v is None or isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
        return number(v, digits)
    if isinstance(v, str):
        return Num(v) if _is_number(v) else _short(v)
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        text = json.dumps(jsonable(v))
        return _short(text)
    if a.ndim == 0:
        return number(float(a), digits)
    if a.ndim == 1:
        return Math(vector_math(a, digits, 6))
    return f"array of shape {a.shape}"


def _short(text: str) -> str:
    return text if len(text) <= TEXT else text[: TEXT - 3] + "..."


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def outcome_tables(r: ClaimResult) -> list[Table]:
    """The numbers of the failure: a table of the margin and the ``detail`` of the float64 outcome beside those of
    the high-precision re-evaluation (one row per key), then each matrix of a ``detail`` as its own table; empty
    without a failing outcome. Shortened values are in full in the counterexample's ``.json``."""
    cols = [(name, o) for name, o in (("float64", r.outcome), ("high precision", r.confirm_outcome)) if o is not None]
    if not cols:
        return []
    keys = ["margin"]
    for _, o in cols:
        keys += [k for k in (o.detail or {}) if k not in keys]
    rows, mats = [], []
    for k in keys:
        cells = [Cell(k)]
        for name, o in cols:
            detail = o.detail or {}
            if k != "margin" and k not in detail:
                cells.append(Cell(""))
                continue
            v = o.margin if k == "margin" else detail[k]
            a = _matrix_of(v)
            if a is None:
                cells.append(Cell(_value(v)))
            else:
                cells.append(Cell("(table)"))
                mats.append(matrix(a, DIGITS, 8, 6, caption=(f"{name} {k}",)))
        rows.append(tuple(cells))
    json_file = r.counterexample[: -len(".npz")] + ".json" if (r.counterexample or "").endswith(".npz") else None
    shortened = any(str(c.value).endswith("...") for row in rows for c in row)
    note = (f"shortened values (...) in full: {json_file}",) if json_file and shortened else ()
    return [Table((Cell(""), *(Cell(name) for name, _ in cols)), tuple(rows), note=note), *mats]


def _matrix_of(v: Any) -> np.ndarray | None:
    """``v`` as a 2-D float array when it is one (a matrix of a detail), else None."""
    if isinstance(v, (str, bytes, dict)) or np.ndim(v) != 2:
        return None
    try:
        return np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return None


def draw_tables(r: ClaimResult) -> list[Table]:
    """The values the conclusion drew (a matrix, a radius, ...): arrays as abbreviated tables, scalars and other
    values together in one table."""
    c = r.case
    if c is None or not c.draws:
        return []
    out, scalars = [], []
    for j, d in enumerate(c.draws, 1):
        try:
            a = None if hasattr(d, "X") else np.asarray(d, dtype=float)
        except (TypeError, ValueError):
            a = None
        if a is not None and a.ndim in (1, 2):
            out.append(matrix(a, DIGITS, 8, 6, caption=(f"draw {j}",)))
        elif a is not None and a.ndim == 0:
            scalars.append((Cell(f"draw {j}"), Cell(number(float(a), DIGITS))))
        else:
            what = f"data set ({d.kind}, n={d.n}, T={d.T}, d={d.d})" if hasattr(d, "X") else repr(d)
            scalars.append((Cell(f"draw {j}"), Cell(_short(what))))
    if scalars:
        out.append(Table((Cell("draw"), Cell("value")), tuple(scalars)))
    return out


def markdown(results: list[ClaimResult], title: str = "attsvm check") -> str:
    """A Markdown report: a table, then a section per refuted claim."""
    md = [f"# {title}", "", summary(results), "", provenance(results).markdown(), ""]
    md.append("| " + " | ".join(COLUMNS) + " | reason |")
    md.append("|" + "---|" * (len(COLUMNS) + 1))
    for r, cells in zip(results, rows(results)):
        cells = [f"`{cells[0]}`", *cells[1:]]
        md.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " | " + r.reason.replace("|", "\\|") + " |")
    for r in results:
        if r.proofs:
            md += ["", f"## `{r.id}` — proofs on the data sets of its search ({r.verdict})", ""]
            md += [to_markdown(t) for t in proof_tables(r)]
    for r in results:
        if r.verdict != "refuted" and not r.unconfirmed:
            continue
        what = "refuted" if r.verdict == "refuted" else "unconfirmed failure"
        md += ["", f"## `{r.id}` {what} — {r.title}", ""]
        md.append(f"Origin: {r.origin}; expected: {r.expected}; {confirmation_text(r)}.")
        md.append(f"Reason: {r.reason}.")
        if r.finding:
            md.append(f"Finding (pinned in the claim file): {r.finding}")
        if r.rate:
            md.append(
                f"Rate: {r.rate['successes']}/{r.rate['decided']} (95% CI [{r.rate['lo']:.3f}, {r.rate['hi']:.3f}])."
            )
        dt = counterexample_tables(r)
        if dt is not None:
            md += ["", "**Counterexample data.** " + inline_md(dt.note) + "."]
            for t in dt.tables:
                md += ["", to_markdown(t)]
        outs = outcome_tables(r)
        if outs:
            md += ["", "**Values of the conclusion.**"]
            for t in outs:
                md += ["", to_markdown(t)]
        draws = draw_tables(r)
        if draws:
            md += ["", "**Values drawn by the conclusion.**"]
            for t in draws:
                md += ["", to_markdown(t)]
        cmds = _commands(r)
        md += ["", "Reproduce:", "", "```"]
        md += [cmds[k] for k in ("replay", "rerun") if k in cmds]
        md += ["```"]
    return "\n".join(md) + "\n"


def _tex_heading(text: str) -> str:
    return r"\par\medskip\noindent\textbf{" + tex_escape(text) + "}"


def _tex_tables(tables: list[Table]) -> str:
    """Tables side by side, in a small font, flush left: a table that does not fit on the line starts the next."""
    body = "\n\\quad\n".join(to_latex(x) for x in tables)
    return r"{\footnotesize\rightskip=0pt plus 1fil\noindent" + "\n" + body + "\n\\par}"


def _tex_code(text: str) -> str:
    """A command in ``\\texttt`` that may break after a slash or a space."""
    return tex_escape(text).replace("/", r"/\allowbreak{}")


def latex(results: list[ClaimResult], standalone: bool = True) -> str:
    """A LaTeX report (plain ``tabular``; ``standalone`` wraps it in a compilable ``article``)."""
    t = []
    if standalone:
        t += [r"\documentclass{article}", r"\usepackage[margin=2cm]{geometry}", r"\begin{document}", ""]
    t += [r"\section*{attsvm check}", tex_escape(summary(results)), "", provenance(results).latex(), ""]
    t += [r"{\footnotesize", r"\begin{tabular}{lp{2.0cm}p{2.7cm}rlrr}", r"\hline"]  # origin, verdict wrap
    t.append(" & ".join(tex_escape(c) for c in COLUMNS) + r" \\")
    t.append(r"\hline")
    for cells in rows(results):
        t.append(" & ".join([r"\texttt{" + tex_escape(cells[0]) + "}", *(tex_escape(c) for c in cells[1:])]) + r" \\")
    t += [r"\hline", r"\end{tabular}", "}", ""]
    for r in results:
        if r.proofs:
            t.append(r"\subsection*{\texttt{" + tex_escape(r.id) + "}: proofs on the data sets of its search}")
            t += [_tex_tables(proof_tables(r)), ""]
    for r in results:
        if r.verdict != "refuted":
            continue
        t.append(r"\subsection*{\texttt{" + tex_escape(r.id) + "} refuted}")
        t.append(tex_escape(f"{r.title}. Origin: {r.origin}; {confirmation_text(r)}. {r.reason}."))
        t.append("")
        dt = counterexample_tables(r)
        if dt is not None:
            t += [_tex_heading("Counterexample data.") + " " + inline_tex(dt.note) + ".", ""]
            t += [_tex_tables(dt.tables), ""]
        outs = outcome_tables(r)
        if outs:
            t += [_tex_heading("Values of the conclusion."), "", _tex_tables(outs), ""]
        draws = draw_tables(r)
        if draws:
            t += [_tex_heading("Values drawn by the conclusion."), "", _tex_tables(draws), ""]
        cmds = _commands(r)
        t += [_tex_heading("Reproduce."), ""]
        lines = [r"\noindent\texttt{" + _tex_code(cmds[k]) + r"}\par" for k in ("replay", "rerun") if k in cmds]
        t += [r"{\rightskip=0pt plus 1fil", *lines, "}"]
        t.append("")
    if standalone:
        t.append(r"\end{document}")
    return "\n".join(t) + "\n"


# ---------------------------------------------------------------------- Jupyter
def result_html(r: ClaimResult) -> str:
    """The HTML of one result (:meth:`ClaimResult._repr_html_`): the verdict in colour, whether it is the expected
    one, the reason, the examples and how they were decided, the worst margin, and for a failure its
    confirmation, the counterexample as tables of its data (:func:`counterexample_tables`), the values of the
    conclusion and the commands that reproduce it."""
    rate = r.rate or {}
    fields = [
        ("statement", r.title),
        ("verdict", verdict_cell(r)),
        ("expected", {"true": "verified", "false": "refuted", "inconclusive": "inconclusive"}.get(r.expected)),
        ("as expected", "yes" if r.matches else html.badge(f"no: {r.mismatch}", html.COLOURS["error"])),
        ("reason", r.reason or None),
        ("examples", f"{r.examples} ({decided_text(r.decided)} decided)" if r.kind == "universal" else None),
        ("runs", f"{rate.get('successes')}/{rate.get('decided')} succeeded" if rate else None),
        ("worst margin", r.worst_margin),
        ("undecidable cases", r.inconclusive_cases or None),
        ("confirmation", confirmation_text(r) if (r.outcome is not None or r.confirmed) else None),
        ("counterexample", html.code(r.counterexample) if r.counterexample else None),
        ("finding (pinned)", r.finding or None),
        ("error", r.error),
        ("seconds, seed, budget", f"{r.seconds:.1f} s, seed {r.seed}, budget {r.budget:g}"),
    ]
    sections = []
    dt = counterexample_tables(r)
    if dt is not None:
        sections.append(("counterexample data", html.data_tables(dt)))
    outs = outcome_tables(r)
    if outs:
        sections.append(("values of the conclusion", "".join(html.table(t) for t in outs)))
    draws = draw_tables(r)
    if draws:
        sections.append(("values drawn by the conclusion", "".join(html.table(t) for t in draws)))
    if r.outcome is not None or r.counterexample:
        cmds = _commands(r)
        sections.append(("reproduce", "<br>".join(html.code(cmds[k]) for k in ("replay", "rerun") if k in cmds)))
    title = (html.code(r.id), " ", html.badge(r.verdict))
    return html.card("ClaimResult", title, fields, sections)


class Report(list):
    """The results of one check (a ``list`` of :class:`ClaimResult`, compared as a list) with its renderings:
    :meth:`table` (terminal), :meth:`to_json`, :meth:`markdown`, :meth:`latex` and, in Jupyter, an HTML table of
    the verdicts with the totals and the exit code ``attsvm check`` would give (``meta``: the run's settings,
    e.g. seed, budget, device, recorded in the JSON)."""

    def __init__(self, results: Iterable[ClaimResult] = (), **meta: Any) -> None:
        super().__init__(results)
        self.meta = dict(meta)

    @property
    def exit_code(self) -> int:
        """What ``attsvm check`` exits with for these results: 0 when every verdict matches its expectation, else
        1 (2, bad input, is decided before any claim runs)."""
        return 0 if all(r.matches for r in self) else 1

    def table(self) -> str:
        return table(self)

    def to_json(self) -> dict[str, Any]:
        return to_json(self, **self.meta)

    def markdown(self, title: str = "attsvm check") -> str:
        return markdown(self, title)

    def latex(self, standalone: bool = True) -> str:
        return latex(self, standalone)

    def __repr__(self) -> str:
        return f"Report({summary(self)})"

    def _repr_html_(self) -> str:
        """One row per claim (id, origin, verdict in colour, examples, decided, worst margin, seconds, reason),
        the totals, the exit code and, for each failure, its result (:func:`result_html`) folded."""
        body = []
        for r, cells in zip(self, rows(self)):
            verdict = html.Markup(html.badge(r.verdict) + " " + html.escape(cells[2][len(r.verdict) :]))
            body.append([html.code(cells[0]), cells[1], verdict, *cells[3:], r.reason])
        fields = [
            ("totals", summary(self)),
            (
                "exit code",
                f"{self.exit_code}: "
                + ("every verdict as expected" if self.exit_code == 0 else "a verdict is not as expected")
                + " (attsvm check exits 0 iff every verdict matches its expectation, 1 otherwise, 2 on bad input)",
            ),
            ("provenance", provenance(list(self), self.meta.get("seed"), self.meta.get("budget")).head()),
        ]
        sections = [("claims", html.rows_table([*COLUMNS, "reason"], body))]
        for r in self:
            if r.verdict == "refuted" or r.unconfirmed or not r.matches:
                head = f"<summary>{html.code(r.id)} {html.badge(r.verdict)}</summary>"
                sections.append(("", f"<details>{head}{result_html(r)}</details>"))
        return html.card("Report", "attsvm check", fields, sections)
