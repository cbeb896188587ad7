r"""Provenance: what produced an artefact, and exactly what was checked in that run.

Every artefact attsvm writes — the check's reports (JSON, Markdown, LaTeX), a derivation's LaTeX, a figure's
caption and manifest, a counterexample file — carries one :class:`Provenance` block:

$$\mathrm{prov} = (\text{tool},\ \text{attsvm version},\ \text{date},\ \text{seed},\ \text{budget},\
\text{checks})$$

``checks`` lists the checks that *ran* in the run that wrote the artefact (a claim's search, an identity check
of a derivation step, an experiment's recheck), each as one line; an artefact that ran none says so ("no check
ran in this run: nothing"), so a page never reads as checked when it was not. The date is today's UTC date, or that of
``SOURCE_DATE_EPOCH`` when it is set (the reproducible-builds convention: goldens and byte-identical reruns).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from .serial import tex_escape

NONE_RAN = "nothing (no check ran)"


def today() -> str:
    """``YYYY-MM-DD`` (UTC) of ``SOURCE_DATE_EPOCH`` when set (an integer count of seconds), else of now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    t = float(time.time())
    if epoch:
        try:
            t = float(int(epoch))
        except ValueError:
            pass
    return time.strftime("%Y-%m-%d", time.gmtime(t))


@dataclass(frozen=True)
class Provenance:
    """The provenance block of one artefact: the ``tool`` (command) that wrote it, the attsvm ``version``, the
    ``date``, the ``seed`` and ``budget`` of the run (None where the tool has none), and the ``checks`` that ran.
    """

    tool: str
    seed: int | None = None
    budget: str | None = None
    checks: tuple[str, ...] = ()
    version: str = __version__
    date: str = field(default_factory=today)

    @classmethod
    def of(cls, tool: str, *, seed: Any = None, budget: Any = None, checks: Iterable[str] = ()) -> Provenance:
        """A block for ``tool`` (the budget as given, e.g. ``1`` or ``"ci"``, kept as text)."""
        return cls(tool, None if seed is None else int(seed), None if budget is None else f"{budget}", tuple(checks))

    def to_dict(self) -> dict[str, Any]:
        """The block as JSON: ``{"tool", "attsvm", "date", "seed", "budget", "checks"}``."""
        return {
            "tool": self.tool,
            "attsvm": self.version,
            "date": self.date,
            "seed": self.seed,
            "budget": self.budget,
            "checks": list(self.checks),
        }

    def head(self) -> str:
        """One line: ``attsvm 0.1.0, attsvm check, 2026-12-04, seed 0, budget 1``."""
        parts = [f"attsvm {self.version}", self.tool, self.date]
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        if self.budget is not None:
            parts.append(f"budget {self.budget}")
        return ", ".join(parts)

    def checks_text(self) -> str:
        """The checks as one sentence (``NONE_RAN`` when none ran)."""
        return "; ".join(self.checks) if self.checks else NONE_RAN

    def text(self) -> str:
        """Plain text: ``Provenance: <head>. Checked in this run: <checks>.``"""
        return f"Provenance: {self.head()}. Checked in this run: {self.checks_text()}."

    def markdown(self) -> str:
        """A Markdown block (a heading-less paragraph and a list of the checks)."""
        lines = [f"**Provenance.** {self.head()}."]
        if self.checks:
            lines += ["", "Checked in this run:", ""] + [f"- {c}" for c in self.checks]
        else:
            lines += ["", f"Checked in this run: {NONE_RAN}."]
        return "\n".join(lines)

    def latex(self) -> str:
        """A LaTeX paragraph (text mode, escaped): the head, then the checks as an itemised list."""
        head = tex_escape(self.head()).replace("/", r"/\allowbreak{}")  # a long path may break after a slash
        out = [r"\par\medskip\noindent\textbf{Provenance.} " + head + "."]
        if self.checks:
            out += [r"Checked in this run:", r"\begin{itemize}"]
            out += [r"\item " + tex_escape(c) for c in self.checks]
            out += [r"\end{itemize}"]
        else:
            out.append(r"Checked in this run: " + tex_escape(NONE_RAN) + ".")
        return "\n".join(out)
