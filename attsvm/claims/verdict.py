r"""Verdicts: the result of checking one claim, and whether it matches the claim's expectation.

``proved`` (``attsvm check --prove``): a region statement proved by ball-arithmetic branch and bound on the
data sets its search drew (named in the result's ``proofs``) — above ``verified``: enough decided examples (or
runs), none failing after confirmation; ``refuted``: a failure that
survived the high-precision re-evaluation (or an empirical rate whose Wilson upper bound lies below the
required rate, with a confirmed failing run); ``inconclusive``: anything else, with a ``reason``
(``unconfirmed failure``: a float64 failure that nobody cleared; ``too few decided examples``; ``undecidable
cases``: too large a fraction of undecidable cases; ``rate``: the interval straddles the threshold).

**Exit policy** (:attr:`ClaimResult.matches`; ``attsvm check`` exits 0 iff every result matches):

* an error in the claim code or an invalid ``Outcome`` never matches;
* an unconfirmed failure never matches (not even with ``--allow-inconclusive``);
* expected ``true``: only ``verified`` or ``proved`` matches; expected ``false``: only a *confirmed* ``refuted``;
* expected ``inconclusive`` (pinned in the claim file with its ``finding``, like a strict xfail): only
  ``inconclusive`` matches — a pin that is now verified or refuted is stale and fails;
* ``--allow-inconclusive`` (exploratory runs): an ``inconclusive`` verdict other than an unconfirmed failure
  matches whatever the expectation.

**Replays** (``attsvm check --replay FILE``) have their own two verdicts (:data:`REPLAYED`), never a
verified/refuted drawn from one example: ``reproduced`` (the saved case fails again and the failure is confirmed;
matches) or ``not reproduced`` (it passes, is cleared, is unconfirmed or inconclusive; exit 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..serial import jsonable  # noqa: F401  (re-exported)

VERDICTS = ("proved", "verified", "refuted", "inconclusive")
REPLAYED = ("reproduced", "not reproduced")  # the verdicts of a replay of a saved counterexample
SHORT_HOW = {"float64": "f64", "high precision": "hp", "exact": "exact", "rigorous": "ball"}


def decided_text(decided: dict[str, int], short: bool = False) -> str:
    """How many examples (runs) were decided, and how: ``"97 float64 + 3 high precision"``, or with ``short``
    ``"97 f64 + 3 hp"`` (f64: float64 with its margin, hp: a float64 failure cleared at high precision, exact:
    exact rationals, ball: ball arithmetic)."""
    names = SHORT_HOW if short else {}
    return " + ".join(f"{v} {names.get(k, k)}" for k, v in decided.items() if v) or "0"


@dataclass(repr=False)
class ClaimResult:
    """Everything ``attsvm check`` reports about one claim."""

    id: str
    title: str
    origin: str
    expected: str
    kind: str
    verdict: str
    reason: str = ""
    examples: int = 0
    worst_margin: float | None = None
    counterexample: str | None = None
    confirmed: bool = False
    seconds: float = 0.0
    seed: int = 0
    budget: float = 1.0
    module: str | None = None
    inconclusive_cases: int = 0
    error: str | None = None
    rate: dict[str, Any] | None = None  # empirical: successes, runs, lo, hi, required
    case: Any = None  # the minimal failing Case (not serialised)
    outcome: Any = None  # its float64 Outcome
    confirm_outcome: Any = None  # the confirmer's Outcome
    detail: dict[str, Any] = field(default_factory=dict)
    finding: str = ""  # a settled finding pinned in the claim file (Claim.finding)
    decided: dict[str, int] = field(default_factory=dict)  # how -> decided examples / runs
    unconfirmed: bool = False  # a float64 failure that was not cleared at high precision
    confirmed_how: str | None = None  # how the counterexample was confirmed (high precision, exact, ...)
    confirmed_by: str | None = None  # "confirmer" (hand-written) or "automatic" (the conclusion re-run with the kit)
    confirmation_method: str | None = None  # e.g. "50 digits (automatic: ..., stable at 100)", "exact (confirm)"
    allow_inconclusive: bool = False
    proofs: list[dict[str, Any]] | None = None  # check --prove: one record per data set proved (or not)

    @property
    def sizes(self) -> dict[str, int] | None:
        """The failing case's sizes ``{"n", "T", "d"}`` (and ``K`` for sequence data); None without a case."""
        ds = getattr(self.case, "data", None) if self.case is not None else None
        if ds is None:
            return None
        out = {"n": int(ds.n), "T": int(ds.T), "d": int(ds.d)}
        if ds.K is not None:
            out["K"] = int(ds.K)
        return out

    @property
    def sizes_text(self) -> str | None:
        """``"n=2, T=3, d=2"`` (and ``K``) of the failing case; None without a case."""
        sz = self.sizes
        return None if sz is None else ", ".join(f"{k}={v}" for k, v in sz.items())

    @property
    def matches(self) -> bool:
        """Whether the verdict is the expected one (the exit policy of the module docstring)."""
        return self.mismatch is None

    @property
    def mismatch(self) -> str | None:
        """Why the verdict does not match its expectation (None when it does)."""
        if self.error is not None:
            return f"error in the claim: {self.error}"
        if self.verdict in REPLAYED:
            return None if self.verdict == "reproduced" else "the saved counterexample is not reproduced"
        if self.unconfirmed:
            return "a float64 failure was not cleared at high precision"
        if self.verdict == "inconclusive" and self.allow_inconclusive:
            return None
        want = {"true": "verified", "false": "refuted", "inconclusive": "inconclusive"}[self.expected]
        if self.verdict != want and not (want == "verified" and self.verdict == "proved"):
            return f"expected {want}, got {self.verdict}"
        if want == "refuted" and not self.confirmed:
            return "refuted without a confirmed counterexample"
        return None

    def __repr__(self) -> str:
        cx = f", counterexample={self.counterexample!r}" if self.counterexample else ""
        return (
            f"ClaimResult(id={self.id!r}, verdict={self.verdict!r}, expected={self.expected!r}, "
            f"matches={self.matches}, examples={self.examples}, confirmed={self.confirmed}{cx})"
        )

    def _repr_html_(self) -> str:
        """The verdict in colour, the reason, the examples, the counterexample as tables of its data, ...
        (:func:`attsvm.claims.report.result_html`)."""
        from .report import result_html

        return result_html(self)

    def to_json(self) -> dict[str, Any]:
        """The per-claim object of ``attsvm check --json``."""
        out = {
            "id": self.id,
            "origin": self.origin,
            "expected": self.expected,
            "verdict": self.verdict,
            "reason": self.reason,
            "examples": int(self.examples),
            "worst_margin": _num(self.worst_margin),
            "counterexample": self.counterexample,
            "confirmed": bool(self.confirmed),
            "seconds": round(float(self.seconds), 3),
            "title": self.title,
            "kind": self.kind,
            "matches": self.matches,
            "seed": self.seed,
            "inconclusive_cases": int(self.inconclusive_cases),
            "decided": {k: int(v) for k, v in self.decided.items()},
            "unconfirmed_failure": bool(self.unconfirmed),
            "confirmed_how": self.confirmed_how,
            "confirmed_by": self.confirmed_by,
            "confirmation_method": self.confirmation_method,
            "counterexample_sizes": self.sizes,
            "mismatch": self.mismatch,
            "finding": self.finding or None,
        }
        if self.rate is not None:
            out["rate"] = jsonable(self.rate)
        if self.proofs is not None:
            out["proofs"] = jsonable(self.proofs)
        if self.error is not None:
            out["error"] = self.error
        if self.outcome is not None:
            out["failure"] = {"margin": _num(self.outcome.margin), "detail": jsonable(self.outcome.detail)}
        if self.confirm_outcome is not None:
            c = self.confirm_outcome
            out["confirmation"] = {
                "ok": bool(c.ok),
                "margin": _num(c.margin),
                "detail": jsonable(c.detail),
                "inconclusive": c.inconclusive,
            }
        return out


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    r"""Wilson score interval for $k$ successes in $n$ trials (95% by default):
    $\frac{\hat p+\frac{z^2}{2n}\pm z\sqrt{\hat p(1-\hat p)/n+z^2/(4n^2)}}{1+z^2/n}$."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_verdict(k: int, n: int, rate: float) -> tuple[str, str, float, float]:
    """``(verdict, reason, lo, hi)`` for an empirical success count against the required ``rate``."""
    lo, hi = wilson(k, n)
    if n == 0:
        return "inconclusive", "no decided runs", lo, hi
    if lo >= rate:
        return "verified", f"{k}/{n} runs, 95% CI [{lo:.3f}, {hi:.3f}] >= {rate}", lo, hi
    if hi < rate:
        return "refuted", f"{k}/{n} runs, 95% CI [{lo:.3f}, {hi:.3f}] < {rate}", lo, hi
    return "inconclusive", f"rate: {k}/{n} runs, 95% CI [{lo:.3f}, {hi:.3f}] straddles {rate}", lo, hi


def _num(x: Any) -> float | None:
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else (None if math.isnan(f) else (1e308 if f > 0 else -1e308))
