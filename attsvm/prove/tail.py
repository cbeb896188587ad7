r"""Unbounded regions: the compact part by boxes, the rest by a declared tail lemma.

A region statement over an unbounded cone, written ``cone:MU,R,inf``,

.. math::
    m(W)>0\quad\text{for every }W\in\mathcal C_{\mu,R}(W^\circ)
    =\{W:\ \|W\|_F\ge R,\ \mathrm{corr}(W,W^\circ)\ge1-\mu\},

is proved as two statements about the same cone (same $\mu$, same axis):

* the **compact part** $R\le\|W\|_F\le R_1$ (``cone:MU,R,R1``) by branch and bound (:mod:`attsvm.prove.bnb`);
* the **tail** $\|W\|_F\ge R_1$ by the claim's declared tail lemma (``hypotheses["tail"]``: the id of a claim in the
  same collection whose conclusion, run on the data in balls with the region ``cone:MU,R,R1``, returns a margin whose
  enclosure lies above 0 exactly when its closed-form bound proves the statement on the tail; it draws nothing).

$R_1$ is the first of $2R,4R,8R,\dots$ (at most :data:`DOUBLINGS` doublings) at which the tail lemma's enclosure is
above 0, so the proof depends only on the claim, the data, the region and the budget. The report says which lemma
closed which part; the certificate carries both (the tail's claim, $R_1$, $\mu$ and its enclosure), and
``attsvm prove --verify`` re-checks the tail lemma in balls at twice the precision besides the compact part's
leaves (the tail has no box: its arithmetic is the kit's closed form, not an independent one).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..errors import InputError

DOUBLINGS = 12  # R1 = R * 2^k, k = 1 .. DOUBLINGS


@dataclass
class TailProof:
    """The tail lemma's result: the lemma's id, the radius ``R1`` it closed from, its margin's enclosure (a ball),
    the cone's $\\mu$ it used, and ``status`` (``proved`` / ``unresolved``) with a reason."""

    claim: str
    R1: Fraction | None
    margin: Any
    mu: float | None
    status: str
    reason: str

    def describe(self) -> str:
        if self.status != "proved":
            return f"the tail ‖W‖_F ≥ R₁ not closed by {self.claim}: {self.reason}"
        return f"‖W‖_F ≥ {self.R1} by the tail lemma {self.claim} (margin {self.margin.str(5, radius=False)} > 0)"


def cone_parts(spec: str | None) -> tuple[str, str, str] | None:
    """``(MU, R, R1)`` as written in a spec ``cone:MU,R,R1`` (None for any other spec)."""
    if spec is None:
        return None
    kind, _, rest = str(spec).strip().partition(":")
    parts = [t.strip() for t in rest.split(",")]
    if kind.strip().lower() != "cone" or len(parts) != 3:
        return None
    return parts[0], parts[1], parts[2]


def unbounded(spec: str | None) -> tuple[str, str] | None:
    """``(MU, R)`` of a spec ``cone:MU,R,inf`` (None for any other spec)."""
    parts = cone_parts(spec)
    if parts is None or parts[2].lower() not in ("inf", "∞"):
        return None
    return parts[0], parts[1]


def tail_claim_of(claim: Any, claims: list[Any]) -> Any:
    """The tail lemma ``claim`` declares (``hypotheses["tail"]``), found among ``claims``; an InputError when it
    declares none or the id is not there."""
    tid = claim.hypotheses.get("tail")
    if not tid:
        raise InputError(f"claim {claim.id} declares no tail lemma (hypotheses['tail']): give a bounded region")
    found = [c for c in claims if c.id == tid]
    if not found:
        raise InputError(f"claim {claim.id}: its tail lemma {tid!r} is not among the claims given")
    return found[0]


def tail_margin(tail: Any, data: Any, spec: str, prec: int) -> tuple[Any, dict[str, Any], str | None]:
    """The tail lemma's outcome on ``data`` in balls for the region ``spec``: ``(margin ball or None, detail,
    inconclusive reason or None)``."""
    from .statement import constants_with, run_in_balls

    out = run_in_balls(tail, data, constants_with(tail, spec), prec)
    if getattr(out, "inconclusive", None):
        return None, dict(out.detail or {}), str(out.inconclusive)
    return out.margin, dict(out.detail or {}), None


def close_tail(tail: Any, data: Any, mu_spec: str, R: str, prec: int = 256) -> TailProof:
    """Find the first $R_1=2^kR$ ($k\\le$ :data:`DOUBLINGS`) at which ``tail``'s margin is proved above 0."""
    from .boxes import fraction_text
    from .certificate import qparse

    r0 = qparse(R, "R")
    last = "no radius tried"
    for k in range(1, DOUBLINGS + 1):
        R1 = r0 * 2**k
        m, detail, why = tail_margin(tail, data, f"cone:{mu_spec},{R},{fraction_text(R1)}", prec)
        if why is not None:
            return TailProof(tail.id, None, None, None, "unresolved", f"the tail lemma is inconclusive: {why}")
        if m is not None and m > 0:
            return TailProof(tail.id, R1, m, detail.get("mu"), "proved", "")
        last = f"at R₁ = {fraction_text(R1)} its margin is {m.str(5, radius=False) if m is not None else 'none'}"
        if "why" in detail:
            last += f" ({detail['why']})"
    return TailProof(tail.id, None, None, None, "unresolved", f"no R₁ ≤ {r0 * 2**DOUBLINGS} closes it; {last}")


def record(tp: TailProof) -> dict[str, Any]:
    """The certificate's ``tail`` entry: the lemma's id, ``R1`` (exact text), ``mu`` and the margin's enclosure as
    exact decimal endpoints."""
    from .boxes import fraction_text
    from .statement import ball_text

    return {
        "claim": tp.claim,
        "R1": None if tp.R1 is None else fraction_text(tp.R1),
        "mu": tp.mu,
        "margin": ball_text(tp.margin),
        "status": tp.status,
        "text": tp.describe(),
    }


def recheck(entry: Any, claims: list[Any], data: Any, mu_spec: str, R: str, R1: Fraction, prec: int) -> str | None:
    """Re-decide a certificate's tail entry (None when it holds): the lemma is the declared one, its ``R1`` is the
    compact part's upper radius, and its margin, recomputed in balls at ``prec`` bits, lies above 0 for the same
    cone ($\\mu$ as the compact part's)."""
    from .certificate import qparse

    if not isinstance(entry, dict) or "claim" not in entry or "R1" not in entry:
        return "the tail entry is malformed"
    found = [c for c in claims if c.id == entry["claim"]]
    if not found:
        return f"its tail lemma {entry['claim']!r} is not among the claims"
    if qparse(entry["R1"], "tail.R1") != R1:
        return f"the tail starts at {entry['R1']}, not at the compact part's R₁ = {R1}"
    m, detail, why = tail_margin(found[0], data, f"cone:{mu_spec},{R},{entry['R1']}", prec)
    if why is not None:
        return f"the tail lemma {entry['claim']} is inconclusive on this data: {why}"
    if not (m is not None and m > 0):
        return f"the tail lemma {entry['claim']}'s margin is not above 0 ({m})"
    return None


def compact_part(claim: Any, claims: list[Any], data: Any, spec: str | None) -> tuple[str | None, TailProof | None]:
    """The region the boxes prove, and the tail proof: ``(spec, None)`` for a bounded ``spec``; for ``cone:MU,R,inf``
    the claim's tail lemma (found among ``claims``) closed on ``data`` (:func:`close_tail`) and the compact part
    ``cone:MU,R,R1`` — or, when the tail does not close, ``(None, the unresolved TailProof)``."""
    from .boxes import fraction_text

    ub = unbounded(spec)
    if ub is None:
        return spec, None
    tp = close_tail(tail_claim_of(claim, claims), data, *ub)
    if tp.status != "proved":
        return None, tp
    return f"cone:{ub[0]},{ub[1]},{fraction_text(tp.R1)}", tp


def cone_mismatch(tail_mu: Any, region: Any) -> str | None:
    """Why a tail proof and the compact part's region do not join (None when they do): the tail lemma must have used
    the same cone ($\\mu$) as the boxes (a region without a $\\mu$, a reduction to the radius, states its own cone)."""
    mu = getattr(region, "mu", None)
    if tail_mu is None or (mu is not None and Fraction(tail_mu) != mu):
        return f"the tail lemma used another cone (mu {tail_mu})"
    return None
