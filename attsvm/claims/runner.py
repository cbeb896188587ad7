r"""The check job: run claims in dependency order, each within its budget, and decide verdicts.

**Budget.** A scale $b$ (``case.budget``): named ``ci`` (0.2), ``default`` (1.0), ``thorough`` (5.0), or a
positive number; ``ATTSVM_CHECK_BUDGET`` sets it when the CLI does not. A universal claim runs
$\max(5,\mathrm{round}(b\cdot E))$ Hypothesis examples ($E$ = the claim's ``examples``, default 100) but stops
searching $b\cdot S$ seconds after its first example ($S$ = the claim's ``seconds``, default 15; shrinking
gets another $\max(10, S)$ seconds) and reports how many examples it actually ran. An empirical claim runs
$\max(8,\mathrm{round}(b\cdot E))$ runs ($E$ default 50) in one batched sweep; its "worst margin" is the
observed success rate minus the required rate. ``examples=N`` (CLI ``--examples N``) fixes the count and lifts
the time cap. At the ``ci`` budget a claim's own ``ci_examples`` (when set) is the count.

**Evidence.** Always (not only after a timeout): fewer than :data:`MIN_DECIDED` decided examples (runs), or
more than :data:`MAX_UNDECIDED_FRACTION` of them undecidable, is ``inconclusive``, never ``verified`` (one
decided example suffices when Hypothesis tried every distinct case, e.g. a claim that draws nothing). The
result records how each example was decided (``float64``, ``high precision`` — a float64 failure cleared by the
confirmer —, ``exact``, ``rigorous``).

Entry points: :func:`run_claim` (one claim → :class:`~attsvm.claims.verdict.ClaimResult`), :func:`check`
(many claims, progress, counterexample files) and :func:`replay` (re-evaluate a saved counterexample).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputError
from .api import Claim, Outcome, outcome_error
from .case import Case
from .confirm import confirm
from .report import Report
from .verdict import ClaimResult, decided_text, rate_verdict

BUDGETS = {"ci": 0.2, "default": 1.0, "thorough": 5.0}
DEFAULT_EXAMPLES = {"universal": 100, "empirical": 50}
DEFAULT_SECONDS = 15.0
MAX_UNDECIDED_FRACTION = 0.25  # more undecidable examples than this fraction -> inconclusive verdict
MIN_DECIDED = 3  # fewer decided examples (runs) than this -> inconclusive, never verified


def resolve_budget(budget: str | float | None = None) -> float:
    """A budget name or number (None: ``$ATTSVM_CHECK_BUDGET`` or ``default``) as a positive float."""
    if budget is None:
        budget = os.environ.get("ATTSVM_CHECK_BUDGET") or "default"
    if isinstance(budget, str):
        if budget in BUDGETS:
            return BUDGETS[budget]
        try:
            budget = float(budget)
        except ValueError:
            raise InputError(f"budget must be one of {sorted(BUDGETS)} or a positive number, got {budget!r}") from None
    b = float(budget)
    if not (b > 0 and math.isfinite(b)):
        raise InputError(f"budget must be positive, got {budget!r}")
    return b


def validate(claim: Claim) -> None:
    """Check that ``claim``'s hypotheses select a known strategy with known parameters (else InputError)."""
    from .. import strategies as strategies_mod

    try:
        strategies_mod.split_hypotheses(claim.hypotheses)
    except InputError as exc:
        raise InputError(f"claim {claim.id} ({claim.module}): {exc}") from exc
    if claim.kind == "empirical" and not 0 < float(claim.rate) <= 1:
        raise InputError(f"claim {claim.id}: rate must lie in (0, 1], got {claim.rate}")


def examples_for(claim: Claim, budget: str | float, examples: int | None = None) -> int | None:
    """The fixed example count of a run: ``examples`` if given, else the claim's ``ci_examples`` at the ``ci``
    budget (None: the budget-scaled count with its time cap)."""
    if examples is not None:
        return int(examples)
    if claim.ci_examples is not None and resolve_budget(budget) == BUDGETS["ci"]:
        return int(claim.ci_examples)
    return None


def universal_examples(claim: Claim, budget: float) -> int:
    """The budget-scaled example count of a universal claim's search (``examples`` or the default, at least 5)."""
    return max(5, int(round(budget * (claim.examples or DEFAULT_EXAMPLES["universal"]))))


def _evidence(decided: int, undecided: int, what: str, reasons: Any = None, exhausted: bool = False) -> str | None:
    """The reason a result without failures is not ``verified`` (None when the evidence suffices). When the
    search space was ``exhausted`` (every distinct case was tried) one decided example is enough."""
    total = decided + undecided
    if total == 0:
        return f"no {what} ran (time budget too small)"
    need = 1 if exhausted else MIN_DECIDED
    if decided < need:
        return f"too few decided {what}: {decided} (need {need})"
    if undecided > MAX_UNDECIDED_FRACTION * total:
        top = f" (e.g. {reasons.most_common(1)[0][0]})" if reasons else ""
        return f"undecidable cases: {undecided}/{total} {what} undecidable{top}, more than {MAX_UNDECIDED_FRACTION:.0%}"
    return None


def _apply(res: ClaimResult, c: Any) -> None:
    """Set ``res``'s verdict from the :class:`~.confirm.Confirmation` of its failing case."""
    res.confirm_outcome = c.outcome
    res.confirmed_by, res.confirmation_method = c.by, c.method
    if c.confirmed:
        res.verdict, res.confirmed, res.confirmed_how, res.reason = "refuted", True, c.how, c.reason
    elif c.status == "cleared":
        res.verdict, res.reason = "inconclusive", f"failure cleared: {c.reason}"
    else:
        res.verdict, res.unconfirmed, res.reason = "inconclusive", True, f"unconfirmed failure: {c.reason}"


def _base(claim: Claim, **kw: Any) -> ClaimResult:
    return ClaimResult(
        id=claim.id,
        title=claim.title,
        origin=claim.origin,
        expected=claim.expected,
        kind=claim.kind,
        verdict="inconclusive",
        finding=claim.finding,
        module=claim.module,
        **kw,
    )


def run_claim(
    claim: Claim,
    *,
    examples: int | None = None,
    seed: int = 0,
    budget: str | float = 1.0,
    device: str = "cpu",
    seconds: float | None = None,
    out: str | os.PathLike | None = None,
    on_example: Callable[[Any], None] | None = None,
    allow_inconclusive: bool = False,
    db: Any = None,
) -> ClaimResult:
    """Check one claim; return its :class:`ClaimResult` (saving a failing case under ``out`` if given).

    ``db``: a :class:`~.database.Database` — its stored failures of a universal claim are replayed first, and a
    failing case found is stored (None: no database)."""
    b = resolve_budget(budget)
    validate(claim)
    examples = examples_for(claim, b, examples)
    t0 = time.perf_counter()
    hit = db.replay(claim, budget=b, device=device) if db is not None and claim.kind == "universal" else None
    if hit is not None:
        res = _base(claim, seed=int(hit.case.seed), budget=b, examples=1, worst_margin=float(hit.outcome.margin))
        res.case, res.outcome = hit.case, hit.outcome
        _apply(res, hit.confirmation)
        res.reason += f" (replayed from the counterexample database: {hit.path})"
        res.detail = {"from_database": str(hit.path)}
    elif claim.kind == "empirical":
        res = _run_empirical(claim, examples, seed, b, device)
    else:
        res = _run_universal(claim, examples, seed, b, device, seconds, on_example)
    if db is not None and claim.kind == "universal" and hit is None and res.outcome is not None:
        db.store(res)
    res.seconds = time.perf_counter() - t0
    res.allow_inconclusive = bool(allow_inconclusive)
    failing = res.outcome is not None or res.error is not None  # a failure, or the case the claim broke on
    if out is not None and res.case is not None and failing and res.verdict != "verified":
        from .counterexample import save

        path = save(res, out)
        res.counterexample = None if path is None else str(path)
    return res


def _run_universal(claim, examples, seed, b, device, seconds, on_example) -> ClaimResult:
    from .search import run_search

    if examples is not None:
        n = int(examples)
        cap = seconds
    else:
        n = universal_examples(claim, b)
        cap = seconds if seconds is not None else b * (getattr(claim, "seconds", None) or DEFAULT_SECONDS)
    # shrinking always has a finite cap (also with --examples, which only lifts the search cap)
    shrink = max(10.0, cap if cap is not None else b * (getattr(claim, "seconds", None) or DEFAULT_SECONDS))
    sr = run_search(
        claim, examples=n, seed=seed, budget=b, device=device, seconds=cap, shrink_seconds=shrink, on_example=on_example
    )
    res = _base(claim, seed=seed, budget=b, examples=sr.examples, worst_margin=sr.worst_margin)
    res.inconclusive_cases = sr.inconclusive
    res.decided = dict(sr.decided)
    res.detail = {
        "shrink_calls": sr.shrink_calls,
        "failures": sr.failures,
        "cleared": sr.cleared,
        "timed_out": sr.timed_out,
    }
    if sr.error is not None:
        res.error = sr.error
        res.reason = f"error: {sr.error}"
        res.case = sr.error_case
        return res
    if sr.minimal is not None:
        res.case, res.outcome = sr.minimal
        _apply(res, sr.confirmation)
        return res
    decided = sum(sr.decided.values())
    lacking = _evidence(decided, sr.inconclusive, "examples", sr.inconclusive_reasons, sr.exhausted)
    if lacking is not None:
        res.reason = lacking
        return res
    res.verdict = "verified"
    res.reason = f"no failure in {decided} decided examples ({decided_text(sr.decided)})"
    if sr.inconclusive:
        res.reason += f", {sr.inconclusive} undecidable"
    if sr.timed_out:
        res.reason += " (time budget reached)"
    if sr.exhausted:
        res.reason += " (every distinct case tried)"
    return res


def _run_empirical(claim, examples, seed, b, device) -> ClaimResult:
    from .empirical import failing_case, run_sweep

    runs = int(examples) if examples is not None else max(8, int(round(b * (claim.examples or 50))))
    sw = run_sweep(claim, runs=runs, seed=seed, budget=b, device=device)
    res = _base(claim, seed=seed, budget=b, examples=sw.runs)
    if sw.error is not None:
        res.error = sw.error
        res.reason = f"error: {sw.error}"
        return res
    out = sw.outcome
    if out.inconclusive:
        res.reason = f"inconclusive: {out.inconclusive}"
        return res
    res.decided = {out.how or "float64": sw.decided}
    verdict, reason, lo, hi = rate_verdict(sw.successes, sw.decided, float(claim.rate))
    lacking = _evidence(sw.decided, sw.runs - sw.decided, "runs")
    if lacking is not None and verdict == "verified":
        verdict, reason = "inconclusive", f"{lacking}; {reason}"
    res.rate = {"successes": sw.successes, "decided": sw.decided, "runs": sw.runs, "lo": lo, "hi": hi}
    res.rate["required"] = claim.rate
    res.worst_margin = (sw.successes / sw.decided - float(claim.rate)) if sw.decided else None  # observed - required
    res.inconclusive_cases = sw.runs - sw.decided
    res.verdict, res.reason = verdict, reason
    res.detail = {"outcome": out.detail}
    if sw.failing_index is not None:
        res.case = failing_case(sw)
        res.outcome = Outcome(ok=False, margin=out.margin, detail={"run": sw.failing_index, **(out.detail or {})})
    if verdict == "refuted":  # the rate is below the requirement: its failing run must be confirmed too
        rate_reason = res.reason
        _apply(res, confirm(claim, res.case, res.outcome))
        res.reason = f"{rate_reason}; run {sw.failing_index} {res.reason}"
    return res


# ---------------------------------------------------------------------- the check job
class Progress:
    """Progress on a stream: one line per finished claim; on a TTY also a spinner with the running example
    count, redrawn by a background thread (so it moves during long single examples and sweeps too)."""

    def __init__(self, stream=None, total: int = 0):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total
        self.done = 0
        self._examples = 0
        self._current = ""
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def start(self, claim: Claim) -> None:
        self._current = claim.id
        self._examples = 0
        self._t0 = time.perf_counter()
        if self.tty and self._stop is None:
            self._stop = threading.Event()
            threading.Thread(target=self._spin, args=(self._stop,), daemon=True).start()

    def _spin(self, stop: threading.Event) -> None:
        k = 0
        while not stop.wait(0.2):
            k += 1
            ch = "|/-\\"[k % 4]
            msg = (
                f"\r{ch} [{self.done + 1}/{self.total}] {self._current}: "
                f"{self._examples} examples, {time.perf_counter() - self._t0:.0f}s"
            )
            with self._lock:
                self.stream.write(msg[:150].ljust(80))
                self.stream.flush()

    def example(self, sr: Any) -> None:
        self._examples = getattr(sr, "examples", self._examples)

    def finish(self, res: ClaimResult) -> None:
        self.done += 1
        mark = "ok " if res.matches else "!! "
        line = (
            f"[{self.done}/{self.total}] {mark}{res.id}: {res.verdict}"
            f" ({res.examples} examples, {res.seconds:.1f}s){' - ' + res.reason if res.reason else ''}"
        )
        with self._lock:
            if self.tty:
                self.stream.write("\r" + " " * 80 + "\r")
            self.stream.write(line[:240] + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None


def check(
    claims: list[Claim],
    *,
    examples: int | None = None,
    seed: int = 0,
    budget: str | float | None = None,
    device: str = "cpu",
    out: str | os.PathLike | None = "attsvm-counterexamples",
    seconds: float | None = None,
    progress: Progress | None = None,
    allow_inconclusive: bool = False,
    db: Any = None,
) -> Report:
    """Run ``claims`` (dependency order); save failing cases under ``out`` (checked writable first: an
    :class:`~attsvm.errors.InputError` before anything runs); report progress; ``db`` the counterexample database
    (:func:`run_claim`). Returns a :class:`~attsvm.claims.report.Report` (a list of the results, rendered as a
    table in Jupyter, with the exit code ``attsvm check`` would give)."""
    from .discover import dependency_order

    b = resolve_budget(budget)
    ordered = dependency_order(claims)
    for c in ordered:  # bad hypotheses are bad input: say so before running anything
        validate(c)
    if out is not None:  # so is a counterexample folder that cannot be written (the CLI names it --out)
        from ..outputs import check_output_dir

        check_output_dir(out, "out")
    if progress is not None:
        progress.total = len(ordered)
    results = []
    try:
        for c in ordered:
            if progress is not None:
                progress.start(c)
            r = run_claim(
                c,
                examples=examples,
                seed=seed,
                budget=b,
                device=device,
                seconds=seconds,
                out=out,
                on_example=progress.example if progress is not None else None,
                allow_inconclusive=allow_inconclusive,
                db=db,
            )
            done = {x.id: x for x in results}
            broken = [d for d in c.depends if d in done and done[d].verdict == "refuted" and done[d].expected == "true"]
            if broken:
                r.reason += f" [depends on refuted {', '.join(broken)}]"
                r.detail["depends_refuted"] = broken
            results.append(r)
            if progress is not None:
                progress.finish(r)
    finally:
        if progress is not None:
            progress.close()
    return Report(results, seed=seed, budget=budget, device=device)


def replay(claim: Claim, npz: str | os.PathLike, *, device: str = "cpu") -> ClaimResult:
    """Re-evaluate a saved counterexample of ``claim`` (its data set and recorded draws) and confirm it."""
    from .counterexample import decode_draw, load

    ds, info = load(npz, claim.id)  # checked (counterexample.validate): the fields below have their types
    draws = decode_draw(info["draws"])
    seed = info["seed"]
    b = float(info["budget"])
    t0 = time.perf_counter()
    res = _base(claim, seed=seed, budget=b, examples=1)
    if claim.kind == "empirical":
        case = Case(data=ds, hypotheses=claim.case_hypotheses, seed=seed, device=device, budget=b, replay=draws)
        out = Outcome(ok=False, margin=(info.get("outcome") or {}).get("margin") or 0.0, detail={"replayed": True})
        res.case, res.outcome = case, out
        _apply(res, confirm(claim, case, out))
    else:
        case = Case(
            data=ds,
            hypotheses=claim.case_hypotheses,
            seed=seed,
            device=device,
            budget=b,
            index=info["index"],
            replay=draws,
        )
        out = claim.conclusion(case)
        bad = outcome_error(out)
        if bad is not None:
            res.error, res.reason = f"conclusion {bad}", f"error: conclusion {bad}"
            res.seconds = time.perf_counter() - t0
            return res
        res.worst_margin = float(out.margin)
        res.case, res.outcome = case, out
        if out.inconclusive:
            res.reason = f"inconclusive: {out.inconclusive}"
        elif out.ok:
            res.verdict = "verified"
            res.reason = "the saved case passes now"
        else:
            _apply(res, confirm(claim, case, out))
    res.seconds = time.perf_counter() - t0
    res.counterexample = str(Path(npz))
    return res
