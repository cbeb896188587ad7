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
on the replayed case with ``case.kit`` in a confirming precision (:mod:`attsvm.kit`), so the same code decides the
failure with independent arithmetic (:mod:`attsvm.ball`, :mod:`attsvm.highprec`, exact SVM certificates, the
replays of GD). In order:

1. **Ball arithmetic (rigorous).** The re-run in arb balls of :data:`BALL_PRECS` bits (the second only when the
   first cannot decide). The margin is an enclosure of the exact margin: it lies strictly below 0 → ``confirmed``
   (``how="rigorous"``); at or above 0 → ``cleared`` (a margin that is exactly 0 decides by ``ok``: a strict
   inequality fails at its boundary); a ball that contains 0, a helper without an enclosure
   (:class:`~attsvm.kit.Undecidable`) or an error → the next step.
2. **High precision, not rigorous.** mpmath at :data:`AUTO_DPS` digits. It confirms only a margin that is
   negative at both precisions, stable to 10 significant digits, **and** below ``-``:data:`AUTO_RESOLVED` — a
   margin of 0, or one the two precisions do not resolve, is ``unconfirmed``. It clears a margin that is stable
   and ``>= 0``.

A re-run must compute through the kit: the confirming case's data and draws are of the confirming precision and
its kit is strict (:class:`~attsvm.claims.case.ConfirmingData`), so a float64 value handed to ``k.scalar`` /
``k.array`` raises :class:`~attsvm.kit.Bypass` and a margin that is a plain float is refused: both leave the
failure ``unconfirmed``, with a message saying where. A hand-written ``confirm`` wins when present; its
``Outcome.how`` says how it decided (``"rigorous"``/``"exact"`` for balls or rationals, else high precision).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from .api import Claim, Outcome, outcome_error

STATUSES = ("confirmed", "cleared", "unconfirmed")
HOW_LABELS = {"rigorous": "ball arithmetic"}  # an Outcome's ``how`` as reports name it
BALL_PRECS = (256, 1024)  # the automatic confirmation's rigorous re-runs, in bits
AUTO_DPS = (50, 100)  # its high-precision fallback, in digits
AUTO_AGREE = 1e-10  # the two margins agree to 10 significant digits (relative to the margin itself)
AUTO_RESOLVED = 1e-25  # a high-precision margin confirms only below -AUTO_RESOLVED (10^(-50/2): resolved at 50 digits)
RIGOROUS = ("rigorous", "exact")  # how values that prove the sign


@dataclass
class Confirmation:
    status: str  # one of STATUSES
    reason: str
    outcome: Outcome | None
    how: str = "high precision"
    by: str = "confirmer"  # "confirmer" (hand-written) or "automatic" (the conclusion re-run with the kit)
    bits: int | None = None  # the ball precision that decided (automatic, rigorous)

    @property
    def rigorous(self) -> bool:
        """Whether the decision rests on a proved sign (ball arithmetic or exact rationals)."""
        return self.how in RIGOROUS

    @property
    def method(self) -> str:
        """How a confirmation decided, for reports: ``ball arithmetic, 256 bits (automatic, rigorous)``, ..."""
        if self.by == "automatic":
            if self.rigorous:
                return f"ball arithmetic, {self.bits} bits (automatic: the conclusion re-run with case.kit; rigorous)"
            return (
                f"{AUTO_DPS[0]} digits (automatic: the conclusion re-run with case.kit, stable at {AUTO_DPS[1]}; "
                "high precision, not rigorous)"
            )
        label = HOW_LABELS.get(self.how, self.how)
        return f"{label} (confirm; {'rigorous' if self.rigorous else 'not rigorous'})"

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
    """Re-run ``claim``'s conclusion on the replayed ``case`` in ball arithmetic, then (only when balls cannot
    decide) at high precision (module docstring)."""
    f64 = f"float64 margin {fmt(outcome.margin)}"
    decided, notes = _by_balls(claim, case, outcome, f64)
    if decided is not None:
        return decided
    return _by_high_precision(claim, case, outcome, f64, notes)


def _unconfirmed(f64: str, why: str, out: Outcome | None = None) -> Confirmation:
    return Confirmation("unconfirmed", f"automatic confirmation: {why} ({f64})", out, by="automatic")


def _rerun(claim: Claim, case: Any) -> Outcome:
    """The conclusion on the confirming ``case``, with the kit's working precision set."""
    with case.kit.context():
        return claim.conclusion(case)


def _by_balls(claim: Claim, case: Any, outcome: Outcome, f64: str) -> tuple[Confirmation | None, list[str]]:
    """Step 1: the rigorous re-runs. ``(confirmation, [])`` when balls decided (or found a bypass), else
    ``(None, notes)`` saying why they could not."""
    from .. import kit
    from ..serial import jsonable
    from .search import error_line

    notes: list[str] = []
    for bits in BALL_PRECS:
        replay = case.replayed(precision="ball", prec=bits)
        try:
            out = _rerun(claim, replay)
        except KeyboardInterrupt:
            raise
        except kit.Bypass as exc:
            return _unconfirmed(f64, f"the conclusion bypasses the kit: {error_line(exc)}"), []
        except kit.Undecidable as exc:
            notes.append(f"balls ({bits} bits): {exc}")
            continue
        except Exception as exc:
            notes.append(f"balls ({bits} bits): the re-run raised {error_line(exc)}")
            break
        if not isinstance(out, Outcome):
            notes.append(f"balls ({bits} bits): the re-run returned {type(out).__name__}, not an Outcome")
            break
        if out.inconclusive:
            notes.append(f"balls ({bits} bits): the re-run is inconclusive: {out.inconclusive}")
            break
        m = out.margin
        if not kit.is_ball(m):
            where = f"a {type(m).__name__}, not a ball"
            return _unconfirmed(
                f64,
                f"the margin of the ball re-run is {where}: the conclusion does not compute through case.kit (use "
                "the kit, or write a confirm)",
            ), []
        exact_zero = m.is_zero()
        negative = bool(m < 0) or (exact_zero and not out.ok)
        nonnegative = bool(m > 0) or (exact_zero and bool(out.ok))
        if not (negative or nonnegative):
            notes.append(f"balls ({bits} bits): the margin {m.str(5, radius=True)} contains 0")
            continue
        if negative and bool(out.ok):
            return _unconfirmed(f64, f"the ball re-run says ok=True with a margin proved negative ({m.str(5)})"), []
        detail = jsonable(out.detail)
        detail.update({"margin_ball": m.str(30, radius=True), "bits": bits, "float64": jsonable(outcome.detail)})
        bound = float(m.upper()) if negative else float(m.lower())
        if negative:
            bound = min(bound, 0.0)
        else:
            bound = max(bound, 0.0)
        c = Outcome(ok=not negative, margin=bound, detail=detail, how="rigorous")
        text = f"ball margin {m.str(8, radius=True)} ({bits} bits, automatic, rigorous)"
        if negative:
            return Confirmation("confirmed", f"confirmed: {text}", c, "rigorous", by="automatic", bits=bits), []
        return Confirmation("cleared", f"{f64} cleared: {text}", c, "rigorous", by="automatic", bits=bits), []
    return None, notes


def _by_high_precision(claim: Claim, case: Any, outcome: Outcome, f64: str, notes: list[str]) -> Confirmation:
    """Step 2: the 50- and 100-digit re-runs (labelled high precision, not rigorous)."""
    import mpmath

    from .. import kit
    from ..highprec import signed_float
    from ..serial import jsonable
    from .search import error_line

    why_not_balls = "; ".join(notes) if notes else "no ball re-run"

    def unconfirmed(why: str, out: Outcome | None = None) -> Confirmation:
        return _unconfirmed(f64, f"{why} [{why_not_balls}]", out)

    runs = []
    for dps in AUTO_DPS:
        replay = case.replayed(precision="mp", dps=dps)
        try:
            with mpmath.workdps(dps):
                out = _rerun(claim, replay)
        except KeyboardInterrupt:
            raise
        except kit.Bypass as exc:
            return unconfirmed(f"the conclusion bypasses the kit: {error_line(exc)}")
        except kit.Undecidable as exc:
            return unconfirmed(f"undecidable at {dps} digits: {exc}")
        except Exception as exc:
            return unconfirmed(
                f"the {dps}-digit re-run raised {error_line(exc)} (compute through case.kit, or write a confirm)"
            )
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
        unresolved = max(abs(m_lo), abs(m_hi)) <= AUTO_RESOLVED
    text = f"{mpmath.nstr(m_lo, 12)} at {AUTO_DPS[0]} digits, {mpmath.nstr(m_hi, 12)} at {AUTO_DPS[1]}"
    if bool(lo.ok) != bool(hi.ok) or unstable:
        return unconfirmed(f"the margin is not stable: {text}")
    if not hi.ok and unresolved:
        return unconfirmed(
            f"the sign is not resolved: the margin ({text}) is not below -{AUTO_RESOLVED:g}, so it may be a rounding "
            "artefact of the working precision"
        )
    detail = jsonable(hi.detail)
    detail.update({f"margin_{AUTO_DPS[0]}": mpmath.nstr(m_lo, 30), f"margin_{AUTO_DPS[1]}": mpmath.nstr(m_hi, 30)})
    detail["float64"] = jsonable(outcome.detail)
    detail["why_not_balls"] = why_not_balls
    c = Outcome(ok=bool(hi.ok), margin=signed_float(m_hi), detail=detail, how="high precision")
    text = (
        f"{AUTO_DPS[0]}-digit margin {mpmath.nstr(m_lo, 8)} (automatic, stable at {AUTO_DPS[1]} digits; high "
        f"precision, not rigorous: {why_not_balls})"
    )
    if c.ok:
        return Confirmation("cleared", f"{f64} cleared: {text}", c, "high precision", by="automatic")
    return Confirmation("confirmed", f"confirmed: {text}", c, "high precision", by="automatic")
