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

**Written once.** A universal claim without a ``confirm`` is confirmed *automatically*: its conclusion is re-run
on the replayed case with ``case.kit`` at high precision (:mod:`attsvm.kit`: mpmath at 50 digits, then at 100),
so the same code decides the failure with independent arithmetic (:mod:`attsvm.highprec`, exact SVM
certificates, the 50-digit GD replay). The two re-runs must agree (same ``ok``, margins equal to 10 significant
digits) and their margins must be ``mpmath`` numbers — a float margin means the conclusion bypassed
the kit, and the failure stays unconfirmed. A hand-written ``confirm`` wins when present.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from .api import Claim, Outcome, outcome_error

STATUSES = ("confirmed", "cleared", "unconfirmed")
HOW_LABELS = {"rigorous": "ball arithmetic"}  # an Outcome's ``how`` as reports name it
AUTO_DPS = (50, 100)  # the automatic confirmation's two precisions
AUTO_AGREE = 1e-10  # the two margins agree to 10 significant digits (relative to the margin itself)


@dataclass
class Confirmation:
    status: str  # one of STATUSES
    reason: str
    outcome: Outcome | None
    how: str = "high precision"
    by: str = "confirmer"  # "confirmer" (hand-written) or "automatic" (the conclusion re-run with the kit)

    @property
    def method(self) -> str:
        """How a confirmation decided, for reports: ``50 digits (automatic, stable at 100)``, ``exact``, ..."""
        if self.by == "automatic":
            return f"{AUTO_DPS[0]} digits (automatic: the conclusion re-run with case.kit, stable at {AUTO_DPS[1]})"
        return HOW_LABELS.get(self.how, self.how) + " (confirm)"

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
    """Run ``claim``'s confirmer on the failing ``case`` (replayed) and classify the result (without one: the
    automatic confirmation of the module docstring)."""
    f64 = f"float64 margin {fmt(outcome.margin)}"
    if claim.confirmer is None:
        if claim.kind == "universal" and hasattr(case, "replayed"):
            return auto_confirm(claim, case, outcome)
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


def auto_confirm(claim: Claim, case: Any, outcome: Outcome) -> Confirmation:
    """Re-run ``claim``'s conclusion on the replayed ``case`` with the high-precision kit (module docstring)."""
    import mpmath

    from .. import kit
    from ..highprec import signed_float
    from ..serial import jsonable

    f64 = f"float64 margin {fmt(outcome.margin)}"

    def unconfirmed(why: str, out: Outcome | None = None) -> Confirmation:
        return Confirmation("unconfirmed", f"automatic confirmation: {why} ({f64})", out, by="automatic")

    runs = []
    for dps in AUTO_DPS:
        replay = case.replayed(precision="mp", dps=dps)
        try:
            with mpmath.workdps(dps):
                out = claim.conclusion(replay)
        except KeyboardInterrupt:
            raise
        except kit.Undecidable as exc:
            return unconfirmed(f"undecidable at {dps} digits: {exc}")
        except Exception as exc:
            msg = traceback.format_exception_only(type(exc), exc)[-1].strip()
            return unconfirmed(f"the {dps}-digit re-run raised {msg} (compute through case.kit, or write a confirm)")
        bad = outcome_error(out)
        if bad is not None:
            return unconfirmed(f"the {dps}-digit re-run {bad}")
        if out.inconclusive:
            return unconfirmed(f"the {dps}-digit re-run is inconclusive: {out.inconclusive}", out)
        if not kit.is_high_precision(out.margin):
            return unconfirmed(
                f"the margin of the {dps}-digit re-run is a {type(out.margin).__name__}, not an mpmath number: the "
                "conclusion does not compute through case.kit (use the kit, or write a confirm)"
            )
        runs.append(out)
    lo, hi = runs
    m_lo, m_hi = lo.margin, hi.margin
    with mpmath.workdps(AUTO_DPS[1]):
        unstable = abs(m_lo - m_hi) > AUTO_AGREE * abs(m_hi)
    if bool(lo.ok) != bool(hi.ok) or unstable:
        return unconfirmed(
            f"the margin is not stable: {mpmath.nstr(m_lo, 12)} at {AUTO_DPS[0]} digits, "
            f"{mpmath.nstr(m_hi, 12)} at {AUTO_DPS[1]}"
        )
    detail = jsonable(hi.detail)
    detail.update({f"margin_{AUTO_DPS[0]}": mpmath.nstr(m_lo, 30), f"margin_{AUTO_DPS[1]}": mpmath.nstr(m_hi, 30)})
    detail["float64"] = jsonable(outcome.detail)
    c = Outcome(ok=bool(hi.ok), margin=signed_float(m_hi), detail=detail, how="high precision")
    text = f"{AUTO_DPS[0]}-digit margin {mpmath.nstr(m_lo, 8)} (automatic, stable at {AUTO_DPS[1]} digits)"
    if c.ok:
        return Confirmation("cleared", f"{f64} cleared: {text}", c, "high precision", by="automatic")
    return Confirmation("confirmed", f"confirmed: {text}", c, "high precision", by="automatic")
