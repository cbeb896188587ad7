r"""Derivations: named steps, each with its statement, its justification and its exact check.

A derivation is built by a function decorated with :func:`derivation`::

    @derivation(name="softmax-jacobian", title="The Jacobian of the softmax", claim="grad-closed-form")
    def softmax_jacobian(d: Derivation) -> None:
        d.premise("definition", Chain(s_t, "=", e_t / sum_e), "definition of the softmax")
        d.step("jacobian", Chain(ds_da, "=", J), "differentiate the quotient", Equal(ds_da, J, "cancel"))

Building is cheap (checks are lazy); :meth:`Derivation.verify` runs every check. Each step has a *scope*:
``symbolic`` (its check proves the identity for general sizes $T,d,n$: :class:`~attsvm.symbolic.checks.Symbolic`),
``instances`` (verified exactly on the concrete cases its check lists) or ``premise`` (a definition, hypothesis or
cited fact, not checked). A symbolic step may keep instance checks as second ``evidence``; it is verified when
both pass. A derivation renders to LaTeX (fragment or standalone document), to Markdown, and in Jupyter
(``_repr_html_``, ``_repr_latex_``); all math in the output comes from :func:`attsvm.symbolic.printer.latex`, and
prose is checked for ASCII math by :func:`prose_problems`.

Each step has a *label* (``label=``, default :func:`slug` of its name); prose cites a step as ``{step:LABEL}`` or,
in another derivation, ``{step:DERIVATION/LABEL}``, and the page prints its number (an unknown label is an
InputError when the derivation is built). :meth:`Derivation.define` adds a row to the page's notation table, so that
every symbol of the page is defined on it (:mod:`attsvm.symbolic.lint`). A page says per step whether its check ran
in this run ("Checked in this run (how)", "Check FAILED in this run", or "Not checked in this run" with the command
that checks it) and ends with the provenance block of :mod:`attsvm.provenance`.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..provenance import Provenance, today
from .checks import SCOPES, Check, CheckResult
from .printer import escape_text, latex

Prose = str | Sequence[Any]

PREAMBLE = (
    "\\documentclass[11pt]{article}\n"
    "\\usepackage[utf8]{inputenc}\n"
    "\\usepackage{amsmath,amssymb}\n"
    "\\providecommand{\\coloneqq}{\\mathrel{\\mathop:}=}\n"
    "\\setlength{\\parindent}{0pt}\n"
    "\\setlength{\\parskip}{0.5em}\n"
    "\\allowdisplaybreaks\n"
    "\\setlength{\\emergencystretch}{4em}\n"
)


# The date in the provenance block of the golden pages (proofs/tex): 2026-12-04, unless SOURCE_DATE_EPOCH is set
GOLDEN_SOURCE_DATE_EPOCH = 1796342400


def golden_date() -> str:
    """The date of the golden pages: that of ``SOURCE_DATE_EPOCH`` when set, else of
    :data:`GOLDEN_SOURCE_DATE_EPOCH` (so a golden does not change with the day it is regenerated)."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").strip():
        return today()
    return time.strftime("%Y-%m-%d", time.gmtime(GOLDEN_SOURCE_DATE_EPOCH))


# ASCII math in prose: what a referee would reject (the text parts of prose only; math goes through the printer)
_ASCII_MATH = [
    (re.compile(r"!=|>=|<=|==|=>|->|<-|(?<![a-z])=(?![a-z])"), "a relation written in ASCII"),
    (re.compile(r"\|\|?|\|"), "a bar (norm or absolute value) in text"),
    (re.compile(r"[A-Za-z0-9)\]][_^]|[_^][A-Za-z0-9({]"), "a sub- or superscript in text"),
    (re.compile(r"\b(?:exp|log|sqrt|sum|max|min|argmax|argmin|tr|diag|corr|softmax)\s*\("), "a function call in text"),
    (
        re.compile(
            r"\b(?:alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|kappa|lambda|mu|nu|xi|pi|rho|sigma|tau|phi|"
            r"chi|psi|omega|Gamma|Delta|Lambda|Sigma|Omega)\b"
        ),
        "a Greek letter spelled out",
    ),
    # a letter of a word (Unicode letters too: the H of Hölder is not a variable), a possessive 's and the name of an
    # assumption ("Assumption B") are not single-letter variables
    (
        re.compile(r"(?<![^\W\d_]|['’])(?<!Assumption )[b-zB-HJ-Z](?![^\W\d_]|[.'\-])"),
        "a single-letter variable in text",
    ),
    (re.compile(r"\w\s*[+*]\s*\w|\w\s+x\s+\w"), "arithmetic in text"),
    (re.compile(r"\b(?:Wmm|W\^mm|KQ\^T|ReLU\()"), "a named object in text"),
]


def prose_problems(why: Prose) -> list[str]:
    """The ASCII-math problems of the text parts of ``why`` (a string or a sequence of strings and sympy objects):
    relations, bars, sub/superscripts, function calls, spelled-out Greek letters, single-letter variables and
    arithmetic written as text. Empty when all mathematics goes through the printer."""
    parts = [why] if isinstance(why, str) else list(why)
    out = []
    for p in parts:
        if not isinstance(p, str):
            continue
        for pat, what in _ASCII_MATH:
            m = pat.search(p)
            if m:
                out.append(f"{what}: {m.group(0)!r} in {p!r}")
    return out


def prose_tex(why: Prose) -> str:
    """LaTeX of prose: text escaped, every sympy object (or :class:`~attsvm.symbolic.printer.Chain`) as inline math
    from the printer."""
    parts = [why] if isinstance(why, str) else list(why)
    return "".join(escape_text(p) if isinstance(p, str) else "$" + latex(p) + "$" for p in parts)


def prose_md(why: Prose) -> str:
    """Markdown of prose (inline math as ``$...$``)."""
    parts = [why] if isinstance(why, str) else list(why)
    return "".join(p if isinstance(p, str) else "$" + latex(p) + "$" for p in parts)


def prose_html(why: Prose) -> str:
    """HTML of prose: text escaped, math as MathJax inline ``$...$`` (escaped)."""
    parts = [why] if isinstance(why, str) else list(why)
    return "".join(html.escape(p) if isinstance(p, str) else html.escape("$" + latex(p) + "$") for p in parts)


# a reference to a step in prose: {step:LABEL} (this derivation) or {step:DERIVATION/LABEL} (another one)
STEP_REF = re.compile(r"\{step:([a-z0-9][a-z0-9-]*)(?:/([a-z0-9][a-z0-9-]*))?\}")
LABEL = re.compile(r"[a-z0-9][a-z0-9-]*")


def slug(name: str) -> str:
    """The default label of a step named ``name``: lower case, runs of other characters as one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "step"


def map_prose(why: Prose, fn: Callable[[str], str]) -> Prose:
    """``why`` with ``fn`` applied to its text parts (math parts unchanged)."""
    if isinstance(why, str):
        return fn(why)
    return tuple(fn(p) if isinstance(p, str) else p for p in why)


@dataclass
class Step:
    """One step: ``statement`` (a :class:`~attsvm.symbolic.printer.Chain` or sympy object), ``why`` (prose:
    a string or a sequence of strings and sympy objects), ``check`` (None for a premise), ``evidence`` (optional
    second checks, e.g. instances beside a general proof), ``label`` (a short identifier, unique in its
    derivation, by which prose cites the step as ``{step:label}``; default: :func:`slug` of the name)."""

    name: str
    statement: Any
    why: Prose
    check: Check | None = None
    result: CheckResult | None = None
    seconds: float = 0.0
    evidence: Check | None = None
    evidence_result: CheckResult | None = None
    label: str = ""

    @property
    def premise(self) -> bool:
        return self.check is None

    @property
    def scope(self) -> str:
        """``symbolic``, ``instances`` or ``premise`` (from the check's own scope)."""
        return "premise" if self.check is None else self.check.scope

    @property
    def verified(self) -> bool | None:
        """None for a premise or before :meth:`Derivation.verify`; else whether the check and the evidence passed."""
        if self.check is None or self.result is None:
            return None
        return self.result.ok and (
            self.evidence is None or (self.evidence_result is not None and self.evidence_result.ok)
        )

    def detail(self) -> str:
        parts = [] if self.result is None else [self.result.detail]
        if self.evidence_result is not None:
            parts.append("evidence: " + self.evidence_result.detail)
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "scope": self.scope,
            "verified": self.verified,
            "evidence": None if self.evidence is None else self.evidence.scope,
            "detail": self.detail(),
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Derivation:
    """A named sequence of steps proving the statement of claim ``claim`` (THEORY id) or a lemma."""

    name: str
    title: str
    claim: str | None = None
    summary: Prose = ""
    steps: list[Step] = field(default_factory=list)
    verified: bool | None = None
    seconds: float = 0.0
    definitions: list[tuple[Any, Prose]] = field(default_factory=list)
    source: str = ""  # the file that built it (cross-derivation references are looked up in its folder)
    tool: str = ""  # the command that writes the page (provenance); default "attsvm derive NAME"
    check_command: str = ""  # the command that checks it; default "attsvm derive NAME --check"

    # building ------------------------------------------------------------
    def define(self, statement: Any, why: Prose = "") -> None:
        """An entry of the page's notation table: ``statement`` (a symbol, or a :class:`Chain` whose left-hand
        side is the symbol, e.g. ``Chain(D_it, "=", x_ia - x_it)``) and ``why`` (prose: what it is)."""
        self.definitions.append((statement, why))

    def _add(self, st: Step, label: str | None) -> Step:
        st.label = slug(st.name) if label is None else label
        if not LABEL.fullmatch(st.label):
            raise ValueError(f"step {st.name!r}: label {st.label!r} is not lower-case letters, digits and hyphens")
        if any(o.label == st.label for o in self.steps):
            raise ValueError(f"step {st.name!r}: label {st.label!r} is used by another step of {self.name}")
        self.steps.append(st)
        return st

    def premise(self, name: str, statement: Any, why: Prose, *, label: str | None = None) -> Step:
        """A definition, hypothesis or cited fact (not checked, rendered as a premise)."""
        return self._add(Step(name, statement, why, None), label)

    def step(
        self,
        name: str,
        statement: Any,
        why: Prose,
        check: Check,
        evidence: Check | None = None,
        *,
        label: str | None = None,
    ) -> Step:
        """A step whose statement sympy re-verifies with ``check`` (and ``evidence``, a second check, when given)."""
        for what, c in (("check", check), ("evidence", evidence)):
            if not (isinstance(c, Check) or (what == "evidence" and c is None)):
                raise TypeError(f"step {name!r}: {what} must be a Check, got {type(c).__name__}")
        if check.scope not in SCOPES:
            raise ValueError(f"step {name!r}: unknown scope {check.scope!r}")
        return self._add(Step(name, statement, why, check, evidence=evidence), label)

    # references ------------------------------------------------------------
    def number(self, label: str) -> int:
        """The number (1-based) of the step labelled ``label`` (InputError naming the known labels otherwise)."""
        for k, st in enumerate(self.steps, 1):
            if st.label == label:
                return k
        from ..errors import InputError

        known = ", ".join(st.label for st in self.steps)
        raise InputError(f"derivation {self.name}: no step labelled {label!r} (labels: {known})")

    def resolve(self, text: str) -> str:
        """``text`` with every ``{step:LABEL}`` replaced by the number of the step labelled LABEL, and every
        ``{step:OTHER/LABEL}`` by the number of that step of derivation OTHER (looked up in the folder of
        :attr:`source`, else in the default folder). An unknown derivation or label is an InputError."""

        def one(m: re.Match) -> str:
            other, label = (m.group(1), m.group(2)) if m.group(2) else (None, m.group(1))
            if other is None or other == self.name:
                return str(self.number(label))
            return str(_other(other, self.source, self.name).number(label))

        return STEP_REF.sub(one, text)

    def prose(self, why: Prose) -> Prose:
        """``why`` with its step references resolved (:meth:`resolve`)."""
        return map_prose(why, self.resolve)

    def check_references(self) -> None:
        """Resolve every step reference of the summary, the notation, the justifications and the checks' prose;
        an unknown label is an InputError (raised by :meth:`DerivationSpec.build`, so at build time)."""
        texts: list[Prose] = [self.summary] + [w for _, w in self.definitions]
        for st in self.steps:
            texts.append(st.why)
            texts += [c.describe() for c in (st.check, st.evidence) if c is not None]
        for t in texts:
            self.prose(t)

    # checking ------------------------------------------------------------
    def verify(self) -> bool:
        """Run every check; a check that raises counts as failed. Returns ``self.verified``."""
        t0 = time.perf_counter()
        ok = True
        for st in self.steps:
            if st.check is None:
                continue
            t = time.perf_counter()
            st.result = _run(st.check)
            if st.evidence is not None:
                st.evidence_result = _run(st.evidence)
            st.seconds = time.perf_counter() - t
            ok = ok and bool(st.verified)
        self.verified = ok
        self.seconds = time.perf_counter() - t0
        return ok

    @property
    def checked_steps(self) -> list[Step]:
        return [s for s in self.steps if s.check is not None]

    def failures(self) -> list[tuple[str, str]]:
        return [(s.name, s.detail()) for s in self.steps if s.verified is False]

    def scopes(self) -> dict[str, int]:
        """How many steps have each scope."""
        return {k: sum(st.scope == k for st in self.steps) for k in SCOPES}

    def prose_problems(self) -> list[str]:
        """ASCII math in the summary, the justifications and the check descriptions (:func:`prose_problems`)."""

        def plain(why: Prose) -> list[str]:  # a step reference reads as a number
            return prose_problems(map_prose(why, lambda t: STEP_REF.sub("1", t)))

        out = [f"summary: {p}" for p in plain(self.summary)]
        out += [f"notation: {p}" for _, w in self.definitions for p in plain(w)]
        for st in self.steps:
            out += [f"step {st.name!r}: {p}" for p in plain(st.why)]
            for c in (st.check, st.evidence):
                if c is not None:
                    out += [f"step {st.name!r} check: {p}" for p in plain(c.describe())]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "claim": self.claim,
            "verified": self.verified,
            "steps": [st.to_json() for st in self.steps],
            "scopes": self.scopes(),
            "checked_steps": len(self.checked_steps),
            "seconds": round(self.seconds, 3),
            "failures": [{"step": n, "detail": d} for n, d in self.failures()],
        }

    # rendering -----------------------------------------------------------
    _SCOPE_TEX = {"symbolic": "proved for general sizes", "instances": "checked on instances", "premise": "premise"}

    @property
    def command(self) -> str:
        """The command that writes this page (:attr:`tool`, default ``attsvm derive NAME``)."""
        return self.tool or f"attsvm derive {self.name}"

    @property
    def rerun(self) -> str:
        """The command that checks this page (:attr:`check_command`, default ``attsvm derive NAME --check``)."""
        return self.check_command or f"attsvm derive {self.name} --check"

    def checks_ran(self) -> list[str]:
        """One plain-text line per check that ran in this run (after :meth:`verify`; empty before):
        ``step 2 (logits are linear in W): proved for general sizes, passed; second evidence (checked on
        instances), passed``."""
        out = []
        for k, st in enumerate(self.steps, 1):
            if st.check is None or st.result is None:
                continue
            line = f"step {k} ({st.name}): {self._SCOPE_TEX[st.scope]}, {'passed' if st.result.ok else 'FAILED'}"
            if st.evidence is not None and st.evidence_result is not None:
                ev = "passed" if st.evidence_result.ok else "FAILED"
                line += f"; second evidence ({self._SCOPE_TEX[st.evidence.scope]}), {ev}"
            out.append(line)
        return out

    def provenance(self, date: str | None = None) -> Provenance:
        """The provenance block of the page: :attr:`command`, the attsvm version, the date (``date``, else that of
        :func:`attsvm.provenance.today`) and :meth:`checks_ran` (:class:`attsvm.provenance.Provenance`)."""
        p = Provenance.of(self.command, checks=self.checks_ran())
        return p if date is None else dataclasses.replace(p, date=date)

    def _check_words(self, evidence: bool, result: CheckResult | None) -> str:
        """``Checked in this run`` / ``Not checked in this run`` / ``Check FAILED in this run`` (for the second
        evidence: ``Second evidence, checked in this run`` ...)."""
        if result is None:
            state = "not checked in this run"
        else:
            state = "checked in this run" if result.ok else "FAILED in this run"
        if evidence:
            return "Second evidence, " + state
        return state[0].upper() + state[1:] if result is None or result.ok else "Check " + state

    def _check_tex(self, evidence: bool, check: Check, result: CheckResult | None) -> str:
        """The sentence of one check: checked in this run (how), FAILED in this run (how): why, or not checked
        in this run (with the command that checks it), then how it would be checked."""
        how = prose_tex(self.prose(check.describe()))
        head = "\\emph{" + self._check_words(evidence, result) + "}"
        if result is None and evidence:
            return head + ": " + how + "."
        if result is None:
            return head + " (run \\texttt{" + escape_text(self.rerun) + "}); the check: " + how + "."
        if result.ok:
            return head + " (" + how + ")."
        return head + " (" + how + "): " + escape_text(result.detail) + "."

    def _check_md(self, evidence: bool, check: Check, result: CheckResult | None) -> str:
        how = prose_md(self.prose(check.describe()))
        head = "*" + self._check_words(evidence, result) + "*"
        if result is None and evidence:
            return f"{head}: {how}."
        if result is None:
            return f"{head} (run `{self.rerun}`); the check: {how}."
        if result.ok:
            return f"{head} ({how}) — ok."
        return f"{head} ({how}): {result.detail}."

    def latex(self, standalone: bool = False, date: str | None = None) -> str:
        """LaTeX: a fragment (``\\section*``, the notation table, the steps with what was checked in this run,
        the provenance block, dated ``date`` when given) or a standalone ``article`` document. Step references are
        resolved."""
        out = ["\\section*{" + escape_text(self.title) + "}"]
        meta = "Derivation \\texttt{" + escape_text(self.name) + "}"
        if self.claim:
            meta += ", claim \\texttt{" + escape_text(self.claim) + "}"
        out.append(meta + ".")
        if self.summary:
            out.append(prose_tex(self.prose(self.summary)))
        if self.definitions:
            items = [
                "\\item $" + latex(st) + "$" + ((": " + prose_tex(self.prose(w))) if w else "")
                for st, w in self.definitions
            ]
            out.append(
                "\\paragraph{Notation.}\n\\begin{itemize}\\setlength{\\itemsep}{0pt}\n"
                + "\n".join(items)
                + "\n\\end{itemize}"
            )
        for k, st in enumerate(self.steps, 1):
            kind = self._SCOPE_TEX[st.scope]
            out.append(f"\\paragraph{{{k}. {escape_text(st.name)}}} ({kind}) " + prose_tex(self.prose(st.why)))
            out.append("\\begin{equation*}\n" + latex(st.statement) + "\n\\end{equation*}")
            if st.check is not None:
                out.append(self._check_tex(False, st.check, st.result))
            if st.evidence is not None:
                out.append(self._check_tex(True, st.evidence, st.evidence_result))
        out.append(self.provenance(date).latex())
        body = "\n\n".join(out) + "\n"
        if not standalone:
            return body
        return PREAMBLE + "\\begin{document}\n\n" + body + "\n\\end{document}\n"

    def markdown(self) -> str:
        """Markdown with ``$$`` display math, what was checked in this run, and the provenance block."""
        out = [f"## {self.title}", f"Derivation `{self.name}`" + (f", claim `{self.claim}`" if self.claim else "")]
        if self.verified is not None:
            out[-1] += f" — {'verified' if self.verified else 'FAILED'} ({self.seconds:.2f} s)"
        if self.summary:
            out.append(prose_md(self.prose(self.summary)))
        if self.definitions:
            out.append("**Notation.**")
            out.append(
                "\n".join(
                    f"- ${latex(st)}$" + (f": {prose_md(self.prose(w))}" if w else "") for st, w in self.definitions
                )
            )
        for k, st in enumerate(self.steps, 1):
            out.append(f"**{k}. {st.name}** ({self._SCOPE_TEX[st.scope]}) " + prose_md(self.prose(st.why)))
            out.append("$$\n" + latex(st.statement) + "\n$$")
            if st.check is not None:
                out.append(self._check_md(False, st.check, st.result))
            if st.evidence is not None:
                out.append(self._check_md(True, st.evidence, st.evidence_result))
        out.append(self.provenance().markdown())
        return "\n\n".join(out) + "\n"

    def _repr_latex_(self) -> str:
        lines = [latex(st.statement) for st in self.steps]
        return "$$\\begin{aligned}" + " \\\\ ".join("&" + ln for ln in lines) + "\\end{aligned}$$"

    def _repr_html_(self) -> str:
        """A card (:func:`attsvm.html.card`): title, status and scope counts, then a table of the steps: number,
        name, scope, status, justification and statement (MathJax)."""
        from ..html import Markup, badge, card, code, rows_table

        status = {None: "not checked", True: "verified", False: "FAILED"}
        rows = []
        for k, st in enumerate(self.steps, 1):
            v = st.verified
            stat = badge("premise") if st.check is None else badge(status[v])
            if v is False:
                stat = Markup(stat + " " + html.escape(st.detail()))
            rows.append(
                (
                    k,
                    st.name,
                    st.scope,
                    stat,
                    Markup(prose_html(self.prose(st.why))),
                    Markup(prose_html((st.statement,))),
                )
            )
        fields = [
            ("name", code(self.name)),
            ("claim", code(self.claim) if self.claim else None),
            ("status", badge(status[self.verified])),
            ("seconds", round(self.seconds, 2) if self.verified is not None else None),
            ("scopes", ", ".join(f"{v} {k}" for k, v in self.scopes().items() if v)),
        ]
        table = rows_table(("#", "step", "scope", "status", "why", "statement"), rows)
        return str(card("Derivation", self.title, fields, [("steps", table)]))


def _run(check: Check) -> CheckResult:
    try:
        return check.run()
    except Exception as exc:  # a crashing check is a failed check, with the reason
        return CheckResult(False, f"check raised {type(exc).__name__}: {exc}")


def document(derivations: Sequence[Derivation], standalone: bool = True) -> str:
    """LaTeX of several derivations: fragments one after another, or one standalone document."""
    body = "\n".join(d.latex(standalone=False) for d in derivations)
    return PREAMBLE + "\\begin{document}\n\n" + body + "\n\\end{document}\n" if standalone else body


def markdown_document(derivations: Sequence[Derivation]) -> str:
    """Markdown of several derivations."""
    return "\n".join(d.markdown() for d in derivations)


@dataclass(frozen=True)
class DerivationSpec:
    """A registered builder: ``spec()`` (or ``spec.build(**options)``) returns a fresh :class:`Derivation`."""

    name: str
    title: str
    claim: str | None
    fn: Callable[..., Any]
    source: str = ""
    ci: dict[str, Any] = field(default_factory=dict)  # options of the CI run (smaller sweeps), on the spec

    def build(self, **options: Any) -> Derivation:
        """A fresh :class:`Derivation` (checks not run); its step references are resolved here, so an unknown
        label is an InputError at build time (:meth:`Derivation.check_references`)."""
        d = self.build_unresolved(**options)
        d.check_references()
        return d

    def build_unresolved(self, **options: Any) -> Derivation:
        """The derivation as its builder makes it, references not checked (a cross-reference lookup uses this,
        so two derivations may cite each other)."""
        d = Derivation(self.name, self.title, self.claim, source=self.source)
        res = self.fn(d, **options)
        d = d if res is None else res
        d.source = d.source or self.source
        return d

    __call__ = build


@functools.lru_cache(maxsize=8)
def _folder(folder: str) -> dict[str, DerivationSpec]:
    from .registry import discover

    return discover([Path(folder)] if folder else None)


@functools.lru_cache(maxsize=64)
def _labels_of(folder: str, name: str) -> Derivation:
    return _folder(folder)[name].build_unresolved()


def _other(name: str, source: str, cited_by: str) -> Derivation:
    """The derivation ``name`` cited by ``cited_by``: from the folder of ``source`` when it is a file, else from
    the default folder (InputError when there is none of that name)."""
    from ..errors import InputError

    folder = str(Path(source).parent) if source and Path(source).is_file() else ""
    reg = _folder(folder)
    if name not in reg:
        raise InputError(f"derivation {cited_by}: cites a step of unknown derivation {name!r}")
    return _labels_of(folder, name)


def derivation(
    name: str, title: str, claim: str | None = None, ci: dict[str, Any] | None = None
) -> Callable[[Callable[..., Any]], DerivationSpec]:
    """Decorator registering a derivation builder ``fn(d: Derivation, **options) -> None``; ``ci``: the
    options of the test suite's run (smaller sweeps; ``attsvm derive --check`` runs the full defaults)."""

    def wrap(fn: Callable[..., Any]) -> DerivationSpec:
        return DerivationSpec(name, title, claim, fn, getattr(fn, "__module__", ""), dict(ci or {}))

    return wrap
