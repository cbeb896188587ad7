r"""Confirmation: re-evaluate a float64 failure at high precision before calling a claim refuted.

THEORY §5: *a failing float64 check is not yet a counterexample.* The claim's ``confirm`` function
receives a replaying copy of the failing case (its draws return the recorded values) and the float64
:class:`~attsvm.claims.api.Outcome`, and recomputes the failing quantity in mpmath (≥ 50 digits) or
exact rationals. Decision:

==========================================  =================================================
confirmer result                            verdict
==========================================  =================================================
``ok=False`` (failure survives)             ``refuted``, ``confirmed=True``
``ok=True``                                 ``inconclusive: numerical`` (both values reported)
``inconclusive=reason`` or it raised        ``inconclusive: unconfirmed (reason)``
no confirmer                                ``inconclusive: unconfirmed``
==========================================  =================================================
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from .api import Claim, Outcome


@dataclass
class Confirmation:
    verdict: str
    reason: str
    confirmed: bool
    outcome: Outcome | None


def _fmt(x: Any) -> str:
    try:
        return f"{float(x):.6g}"
    except (TypeError, ValueError):
        return str(x)


def confirm(claim: Claim, case: Any, outcome: Outcome) -> Confirmation:
    """Run ``claim``'s confirmer on the failing ``case`` and decide refuted vs inconclusive."""
    if claim.confirmer is None:
        return Confirmation(
            "inconclusive", f"unconfirmed: no confirmer (float64 margin {_fmt(outcome.margin)})", False, None
        )
    replay = case.replayed() if hasattr(case, "replayed") else case
    try:
        c = claim.confirmer(replay, outcome)
    except Exception as exc:  # a confirmer that cannot decide must not refute
        msg = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return Confirmation("inconclusive", f"unconfirmed: confirmer raised {msg}", False, None)
    if not isinstance(c, Outcome):
        return Confirmation("inconclusive", "unconfirmed: confirmer did not return an Outcome", False, None)
    if c.inconclusive:
        return Confirmation("inconclusive", f"unconfirmed: {c.inconclusive}", False, c)
    if c.ok:
        reason = f"numerical: float64 margin {_fmt(outcome.margin)}, high precision margin {_fmt(c.margin)}"
        return Confirmation("inconclusive", reason, False, c)
    return Confirmation("refuted", f"confirmed: high precision margin {_fmt(c.margin)}", True, c)
