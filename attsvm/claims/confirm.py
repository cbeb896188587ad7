r"""Confirmation: re-evaluate a float64 failure at high precision before calling a claim refuted.

THEORY §5: *a failing float64 check is not yet a counterexample.* The claim's ``confirm`` function
receives a replaying copy of the failing case (its draws return the recorded values) and the float64
:class:`~attsvm.claims.api.Outcome`, and recomputes the failing quantity in mpmath (≥ 50 digits), exact
rationals or ball arithmetic. Decision (:class:`Confirmation` ``.status``):

==================================================  ============================================================
confirmer result                                    status
==================================================  ============================================================
a valid ``Outcome`` with ``ok=False``               ``confirmed``: the failure survives (a counterexample)
a valid ``Outcome`` with ``ok=True``                ``cleared``: a rounding artefact; the example counts as
                                                    decided at high precision and the search goes on
no confirmer, it raised, returned no ``Outcome``,   ``unconfirmed``: a float64 failure nobody cleared — never
an invalid one, or an inconclusive one              a pass (verdict ``inconclusive: unconfirmed failure``)
==================================================  ============================================================
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from .api import Claim, Outcome, outcome_error

STATUSES = ("confirmed", "cleared", "unconfirmed")


@dataclass
class Confirmation:
    status: str  # one of STATUSES
    reason: str
    outcome: Outcome | None
    how: str = "high precision"

    @property
    def confirmed(self) -> bool:
        return self.status == "confirmed"


def fmt(x: Any) -> str:
    """A number for a reason line (6 significant digits), anything else as ``str``."""
    try:
        return f"{float(x):.6g}"
    except (TypeError, ValueError):
        return str(x)


def confirm(claim: Claim, case: Any, outcome: Outcome) -> Confirmation:
    """Run ``claim``'s confirmer on the failing ``case`` (replayed) and classify the result."""
    f64 = f"float64 margin {fmt(outcome.margin)}"
    if claim.confirmer is None:
        return Confirmation("unconfirmed", f"no confirmer ({f64})", None)
    replay = case.replayed() if hasattr(case, "replayed") else case
    try:
        c = claim.confirmer(replay, outcome)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a confirmer that cannot decide must not refute, nor clear
        msg = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return Confirmation("unconfirmed", f"confirmer raised {msg} ({f64})", None)
    bad = outcome_error(c)
    if bad is not None:
        return Confirmation("unconfirmed", f"confirmer {bad} ({f64})", c if isinstance(c, Outcome) else None)
    how = c.how or "high precision"
    if c.inconclusive:
        return Confirmation("unconfirmed", f"confirmer inconclusive: {c.inconclusive} ({f64})", c, how)
    if c.ok:
        return Confirmation("cleared", f"{f64} cleared: {how} margin {fmt(c.margin)}", c, how)
    return Confirmation("confirmed", f"confirmed: {how} margin {fmt(c.margin)}", c, how)
