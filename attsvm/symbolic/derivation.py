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
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
)


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


@dataclass
class Step:
    """One step: ``statement`` (a :class:`~attsvm.symbolic.printer.Chain` or sympy object), ``why`` (prose:
    a string or a sequence of strings and sympy objects), ``check`` (None for a premise), ``evidence`` (optional
    second checks, e.g. instances beside a general proof)."""

    name: str
    statement: Any
    why: Prose
    check: Check | None = None
    result: CheckResult | None = None
    seconds: float = 0.0
    evidence: Check | None = None
    evidence_result: CheckResult | None = None

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

    # building ------------------------------------------------------------
    def premise(self, name: str, statement: Any, why: Prose) -> Step:
        """A definition, hypothesis or cited fact (not checked, rendered as a premise)."""
        st = Step(name, statement, why, None)
        self.steps.append(st)
        return st

    def step(self, name: str, statement: Any, why: Prose, check: Check, evidence: Check | None = None) -> Step:
        """A step whose statement sympy re-verifies with ``check`` (and ``evidence``, a second check, when given)."""
        for what, c in (("check", check), ("evidence", evidence)):
            if not (isinstance(c, Check) or (what == "evidence" and c is None)):
                raise TypeError(f"step {name!r}: {what} must be a Check, got {type(c).__name__}")
        if check.scope not in SCOPES:
            raise ValueError(f"step {name!r}: unknown scope {check.scope!r}")
        st = Step(name, statement, why, check, evidence=evidence)
        self.steps.append(st)
        return st

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
        out = [f"summary: {p}" for p in prose_problems(self.summary)]
        for st in self.steps:
            out += [f"step {st.name!r}: {p}" for p in prose_problems(st.why)]
            for c in (st.check, st.evidence):
                if c is not None:
                    out += [f"step {st.name!r} check: {p}" for p in prose_problems(c.describe())]
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

    def latex(self, standalone: bool = False) -> str:
        """LaTeX: a fragment (``\\section*`` and the steps) or a standalone ``article`` document."""
        out = ["\\section*{" + escape_text(self.title) + "}"]
        meta = "Derivation \\texttt{" + escape_text(self.name) + "}"
        if self.claim:
            meta += ", claim \\texttt{" + escape_text(self.claim) + "}"
        out.append(meta + ".")
        if self.summary:
            out.append(prose_tex(self.summary))
        for k, st in enumerate(self.steps, 1):
            kind = self._SCOPE_TEX[st.scope]
            out.append(f"\\paragraph{{{k}. {escape_text(st.name)}}} ({kind}) " + prose_tex(st.why))
            out.append("\\begin{equation*}\n" + latex(st.statement) + "\n\\end{equation*}")
            if st.check is not None:
                out.append("\\emph{Check:} " + prose_tex(st.check.describe()) + ".")
            if st.evidence is not None:
                out.append("\\emph{Second evidence:} " + prose_tex(st.evidence.describe()) + ".")
        body = "\n\n".join(out) + "\n"
        if not standalone:
            return body
        return PREAMBLE + "\\begin{document}\n\n" + body + "\n\\end{document}\n"

    def markdown(self) -> str:
        """Markdown with ``$$`` display math (and the verification status when checked)."""
        out = [f"## {self.title}", f"Derivation `{self.name}`" + (f", claim `{self.claim}`" if self.claim else "")]
        if self.verified is not None:
            out[-1] += f" — {'verified' if self.verified else 'FAILED'} ({self.seconds:.2f} s)"
        if self.summary:
            out.append(prose_md(self.summary))
        for k, st in enumerate(self.steps, 1):
            out.append(f"**{k}. {st.name}** ({self._SCOPE_TEX[st.scope]}) " + prose_md(st.why))
            out.append("$$\n" + latex(st.statement) + "\n$$")
            if st.check is not None:
                v = st.verified
                status = "" if v is None else (" — ok" if v else f" — FAILED: {st.detail()}")
                out.append(f"*Check:* {prose_md(st.check.describe())}{status}")
            if st.evidence is not None:
                out.append(f"*Second evidence:* {prose_md(st.evidence.describe())}")
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
            rows.append((k, st.name, st.scope, stat, Markup(prose_html(st.why)), Markup(prose_html((st.statement,)))))
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
        d = Derivation(self.name, self.title, self.claim)
        res = self.fn(d, **options)
        return d if res is None else res

    __call__ = build


def derivation(
    name: str, title: str, claim: str | None = None, ci: dict[str, Any] | None = None
) -> Callable[[Callable[..., Any]], DerivationSpec]:
    """Decorator registering a derivation builder ``fn(d: Derivation, **options) -> None``; ``ci``: the
    options of the test suite's run (smaller sweeps; ``attsvm derive --check`` runs the full defaults)."""

    def wrap(fn: Callable[..., Any]) -> DerivationSpec:
        return DerivationSpec(name, title, claim, fn, getattr(fn, "__module__", ""), dict(ci or {}))

    return wrap
