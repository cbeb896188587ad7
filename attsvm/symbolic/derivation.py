r"""Derivations: named steps, each with its statement, its justification and its exact check.

A derivation is built by a function decorated with :func:`derivation`::

    @derivation(name="softmax-jacobian", title="The Jacobian of the softmax", claim="grad-closed-form")
    def softmax_jacobian(d: Derivation) -> None:
        d.premise("definition", Chain(s_t, "=", e_t / sum_e), "definition of the softmax")
        d.step("jacobian", Chain(ds_da, "=", J), "differentiate the quotient", Equal(ds_da, J, "cancel"))

Building is cheap (checks are lazy); :meth:`Derivation.verify` runs every check. A derivation renders
to LaTeX (fragment or standalone document), to Markdown, and in Jupyter (``_repr_latex_``); all math in
the output comes from :func:`attsvm.symbolic.printer.latex`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .checks import Check, CheckResult
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


@dataclass
class Step:
    """One step: ``statement`` (a :class:`~attsvm.symbolic.printer.Chain` or sympy object), ``why`` (prose:
    a string or a sequence of strings and sympy objects), ``check`` (None for a premise)."""

    name: str
    statement: Any
    why: Prose
    check: Check | None = None
    result: CheckResult | None = None
    seconds: float = 0.0

    @property
    def premise(self) -> bool:
        return self.check is None


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

    def step(self, name: str, statement: Any, why: Prose, check: Check) -> Step:
        """A step whose statement sympy re-verifies with ``check``."""
        if not isinstance(check, Check):
            raise TypeError(f"step {name!r}: check must be a Check, got {type(check).__name__}")
        st = Step(name, statement, why, check)
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
            try:
                st.result = st.check.run()
            except Exception as exc:  # a crashing check is a failed check, with the reason
                st.result = CheckResult(False, f"check raised {type(exc).__name__}: {exc}")
            st.seconds = time.perf_counter() - t
            ok = ok and st.result.ok
        self.verified = ok
        self.seconds = time.perf_counter() - t0
        return ok

    @property
    def checked_steps(self) -> list[Step]:
        return [s for s in self.steps if s.check is not None]

    def failures(self) -> list[tuple[str, str]]:
        return [(s.name, s.result.detail) for s in self.steps if s.result is not None and not s.result.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "claim": self.claim,
            "verified": self.verified,
            "steps": len(self.steps),
            "checked_steps": len(self.checked_steps),
            "seconds": round(self.seconds, 3),
            "failures": [{"step": n, "detail": d} for n, d in self.failures()],
        }

    # rendering -----------------------------------------------------------
    def _prose_tex(self, why: Prose) -> str:
        parts = [why] if isinstance(why, str) else list(why)
        return "".join(escape_text(p) if isinstance(p, str) else "$" + latex(p) + "$" for p in parts)

    def _prose_md(self, why: Prose) -> str:
        parts = [why] if isinstance(why, str) else list(why)
        return "".join(p if isinstance(p, str) else "$" + latex(p) + "$" for p in parts)

    def latex(self, standalone: bool = False) -> str:
        """LaTeX: a fragment (``\\section*`` and the steps) or a standalone ``article`` document."""
        out = ["\\section*{" + escape_text(self.title) + "}"]
        meta = "Derivation \\texttt{" + escape_text(self.name) + "}"
        if self.claim:
            meta += ", claim \\texttt{" + escape_text(self.claim) + "}"
        out.append(meta + ".")
        if self.summary:
            out.append(self._prose_tex(self.summary))
        for k, st in enumerate(self.steps, 1):
            kind = "premise" if st.premise else "step"
            out.append(f"\\paragraph{{{k}. {escape_text(st.name)}}} ({kind}) " + self._prose_tex(st.why))
            out.append("\\begin{equation*}\n" + latex(st.statement) + "\n\\end{equation*}")
            if st.check is not None:
                out.append("\\emph{Check:} " + escape_text(st.check.describe()) + ".")
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
            out.append(self._prose_md(self.summary))
        for k, st in enumerate(self.steps, 1):
            kind = "premise" if st.premise else "step"
            out.append(f"**{k}. {st.name}** ({kind}) " + self._prose_md(st.why))
            out.append("$$\n" + latex(st.statement) + "\n$$")
            if st.check is not None:
                status = "" if st.result is None else (" — ok" if st.result.ok else f" — FAILED: {st.result.detail}")
                out.append(f"*Check:* {st.check.describe()}{status}")
        return "\n\n".join(out) + "\n"

    def _repr_latex_(self) -> str:
        lines = [latex(st.statement) for st in self.steps]
        return "$$\\begin{aligned}" + " \\\\ ".join("&" + ln for ln in lines) + "\\end{aligned}$$"


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
