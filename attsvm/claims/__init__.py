"""Executable claims: the API (:mod:`.api`), discovery, search, confirmation, verdicts, reports.

Stable entry points: :func:`discover` (claim files by path → claims), :func:`run_claim` (one claim →
:class:`ClaimResult`), :func:`check` (many claims with progress and counterexample files).

Beside them, what claim files share that is no part of an engine: :mod:`.trap`, the stuck inputs and traps of GD on
$W$ (``gd-global-equal-scores``; imported on use, it runs the GD engine, the Att-SVM solver and the 50-digit replay).
"""

from .api import ORIGINS, Claim, Outcome, claim
from .case import Case
from .discover import discover, select
from .report import Report
from .runner import BUDGETS, check, replay, resolve_budget, run_claim
from .verdict import ClaimResult, wilson

__all__ = [
    "BUDGETS",
    "ORIGINS",
    "Case",
    "Claim",
    "ClaimResult",
    "Outcome",
    "Report",
    "check",
    "claim",
    "discover",
    "replay",
    "resolve_budget",
    "run_claim",
    "select",
    "wilson",
]
