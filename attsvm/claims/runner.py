r"""The check job: run claims in dependency order, each within its budget, and decide verdicts.

**Budget.** A scale $b$ (``case.budget``): named ``ci`` (0.2), ``default`` (1.0), ``thorough`` (5.0), or a
positive number; ``ATTSVM_CHECK_BUDGET`` sets it when the CLI does not. Budgets are **counts**, never seconds: a
universal claim runs $\max(5,\mathrm{round}(b\cdot E))$ Hypothesis examples ($E$ = the claim's ``examples``,
default 100) and, after a failure, at most $\max(200,\mathrm{round}(b\cdot 500))$ shrink calls; an empirical claim
runs $\max(8,\mathrm{round}(b\cdot E))$ runs ($E$ default 50) in one batched sweep; its "worst margin" is the
observed success rate minus the required rate. ``examples=N`` (CLI ``--examples N``) fixes the count. At the ``ci``
budget a claim's own ``ci_examples`` (when set) is the count. So a verdict depends on the claim, the seed and the
budget, never on the machine's speed or load. ``time_limit`` (CLI ``--time-limit S``, off by default) is the one
clock: a universal search it cuts short is ``inconclusive: time limit``, never ``verified``.

**Constants.** Every case of one run shares one :class:`~.case.Constants` (``case.hypotheses``): a read of an
undeclared constant, or a ``params`` entry that no case read, is an error in the claim (exit 1 with its id). A
constant read only by the claim's ``confirm`` (which runs only on a failure) counts as read when the confirmer's
source names it.

**Evidence.** Always (not only after a timeout): fewer than :data:`MIN_DECIDED` decided examples (runs), or
more than :data:`MAX_UNDECIDED_FRACTION` of them undecidable, is ``inconclusive``, never ``verified`` (one
decided example suffices when Hypothesis tried every distinct case, e.g. a claim that draws nothing). The
result records how each example was decided (``float64``, ``high precision`` — a float64 failure cleared by the
confirmer —, ``exact``, ``rigorous``).

**Parallel checks** (``check(..., workers=N)``, ``attsvm check -n N``; ``cluster=`` a Dask cluster). Each claim is
one task of an :class:`attsvm.pool.Pool`: its whole run (database replay, search, shrinking and confirmation, or
the sweep and its confirmation, and the saving of its counterexample) happens in one worker process, which
finds the claim by its file and id (:class:`ClaimTask`; a claim that is not in a file travels pickled) and
sends back its :class:`~attsvm.claims.verdict.ClaimResult`. A claim's run depends only on the claim, the seed
and the budget, never on the claims run before it in the same process, so the results are those of the serial
run; they are listed in the dependency order, and the ``[depends on refuted ...]`` note is added once all are in,
as serially. Claims start longest first by the durations the counterexample database recorded
(:func:`schedule`). Only the ``seconds`` fields (and a user's ``time_limit``) depend on the machine.

**Proofs in a parallel check** (``--prove``, :func:`prove_on`). Pools are never nested: a claim's run in a worker
proves its region statement there with the one-box loop (its boxes in that worker, the other workers busy with other
claims). When the check has a single claim and it declares a region, nothing runs beside it, so it runs in this
process and the workers decide its proofs' boxes instead (:mod:`attsvm.prove.bnb`'s rounds, on the check's pool; the
claim must still be one that could travel, as in any parallel check). Either way the proofs, like every result, are
those of the serial check.

Entry points: :func:`run_claim` (one claim → :class:`~attsvm.claims.verdict.ClaimResult`), :func:`check`
(many claims, progress, counterexample files; serially or in parallel) and :func:`replay` (re-evaluate a saved
counterexample).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import pickle
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputError
from .api import Claim, Outcome, outcome_error
from .case import Case
from .confirm import confirm
from .report import Report
from .verdict import ClaimResult, decided_text, jsonable, rate_verdict

BUDGETS = {"ci": 0.2, "default": 1.0, "thorough": 5.0}
DEFAULT_EXAMPLES = {"universal": 100, "empirical": 50}
MAX_UNDECIDED_FRACTION = 0.25  # more undecidable examples than this fraction -> inconclusive verdict
MIN_DECIDED = 3  # fewer decided examples (runs) than this -> inconclusive, never verified
PROVE_DATA = 3  # check --prove: the distinct data sets of a region claim's search that are proved


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


def takes_data(claim: Claim) -> None:
    """An :class:`~attsvm.errors.InputError` unless ``claim`` can run on a given data set (``attsvm check --data``):
    a universal claim whose search draws one (an empirical claim sweeps runs; a claim without a data strategy draws
    none)."""
    from .. import strategies

    if claim.kind != "universal" or strategies.for_hypotheses(claim.hypotheses) is None:
        raise InputError(f"--data: claim {claim.id} draws no data set (a given data set applies to claims that do)")


def examples_for(claim: Claim, budget: str | float, examples: int | None = None) -> int | None:
    """The fixed example count of a run: ``examples`` if given, else the claim's ``ci_examples`` at the ``ci``
    budget (None: the budget-scaled count)."""
    if examples is not None:
        return int(examples)
    if claim.ci_examples is not None and resolve_budget(budget) == BUDGETS["ci"]:
        return int(claim.ci_examples)
    return None


def universal_examples(claim: Claim, budget: float) -> int:
    """The budget-scaled example count of a universal claim's search (``examples`` or the default, at least 5)."""
    return max(5, int(round(budget * (claim.examples or DEFAULT_EXAMPLES["universal"]))))


def shrink_calls(budget: float) -> int:
    """The budget-scaled count of shrink calls after a failure (at least 200)."""
    from .search import DEFAULT_SHRINKS

    return max(200, int(round(budget * DEFAULT_SHRINKS)))


def constants_problem(claim: Claim, consts: Any, decided: bool = True) -> str | None:
    """The error in ``claim`` that the reads of one run show (module docstring), or None (``decided``: whether any
    case of the run got past the premises, :meth:`~.case.Constants.problem`)."""
    named: list[str] = []
    if claim.confirmer is not None:  # a confirm that did not run: the names its source uses count as read
        import inspect

        try:
            src = inspect.getsource(claim.confirmer)
        except (OSError, TypeError):
            src = ""
        named = [k for k in consts.params if repr(k) in src or f'"{k}"' in src]
    return consts.problem(also_read=named, decided=decided)


def _evidence(decided: int, undecided: int, what: str, reasons: Any = None, exhausted: bool = False) -> str | None:
    """The reason a result without failures is not ``verified`` (None when the evidence suffices). When the
    search space was ``exhausted`` (every distinct case was tried) one decided example is enough."""
    total = decided + undecided
    if total == 0:
        return f"no {what} ran"
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
    time_limit: float | None = None,
    out: str | os.PathLike | None = None,
    on_example: Callable[[Any], None] | None = None,
    allow_inconclusive: bool = False,
    db: Any = None,
    prove: int | None = None,
    prove_workers: Any = None,
    data: Any = None,
    region: str | None = None,
    tail: dict[str, Any] | None = None,
) -> ClaimResult:
    """Check one claim; return its :class:`ClaimResult` (saving a failing case under ``out`` if given).

    ``prove``: a box budget — a universal claim that declares a region (``hypotheses["region"]``) and passes its
    search is then proved on the first :data:`PROVE_DATA` distinct data sets of its search (:func:`prove_on`);
    ``prove_workers``: an open :class:`~attsvm.pool.Pool` of the caller whose workers decide the boxes (None: in
    this process; never given inside a pool's worker).

    ``data``: one data set every case of a universal claim uses (``attsvm check --data``; the search draws only the
    parameters; the database is neither read nor written). ``region``: a spec in place of the claim's declared
    region (``--region``); ``tail``: the record (:func:`attsvm.prove.tail.record`) of the tail lemma that closes
    ``region``'s unbounded rest (``--region cone:MU,R,inf``; ``region`` is then the compact part), reported beside
    each proof — when it did not close, the claim is not proved and says why.

    ``db``: a :class:`~.database.Database` — its stored failures of a universal claim are replayed first, and a
    failing case found is stored (None: no database). ``time_limit``: the user's wall-clock limit of a universal
    search in seconds (None: none; module docstring)."""
    b = resolve_budget(budget)
    validate(claim)
    examples = examples_for(claim, b, examples)
    t0 = time.perf_counter()
    consts = claim.new_constants(region)
    if data is not None:
        takes_data(claim)
        db = None  # its stored failures are on other data sets; a failure here is saved under out
    hit = db.replay(claim, budget=b, device=device) if db is not None and claim.kind == "universal" else None
    if hit is not None:
        res = _base(claim, seed=int(hit.case.seed), budget=b, examples=1, worst_margin=float(hit.outcome.margin))
        res.case, res.outcome = hit.case, hit.outcome
        _apply(res, hit.confirmation)
        res.reason += f" (replayed from the counterexample database: {hit.path})"
        res.detail = {"from_database": str(hit.path)}
    elif claim.kind == "empirical":
        res = _run_empirical(claim, examples, seed, b, device, consts)
    else:
        keep = PROVE_DATA if prove and "region" in claim.hypotheses else 0
        res = _run_universal(claim, examples, seed, b, device, time_limit, on_example, consts, keep, data)
        if keep and res.verdict == "verified" and res.error is None:
            if tail is not None and tail.get("status") != "proved":
                res.detail.pop("data_sets", None)
                res.reason += f"; not proved: {tail.get('text')} (verdict by sampling on {region})"
            else:
                prove_on(claim, res, int(prove), workers=prove_workers, region=region, tail=tail)
    decided = claim.kind != "universal" or res.outcome is not None or sum(res.decided.values()) > 0
    problem = None if hit is not None else constants_problem(claim, consts, decided)
    if problem is not None and res.error is None:
        res.verdict, res.error, res.reason = "inconclusive", problem, f"error: {problem}"
    if db is not None and claim.kind == "universal" and hit is None and res.outcome is not None:
        db.store(res)
    if data is not None:
        res.reason += f" [on the given data set {_describe_data(data)}]"
    res.seconds = time.perf_counter() - t0
    res.allow_inconclusive = bool(allow_inconclusive)
    failing = res.outcome is not None or res.error is not None  # a failure, or the case the claim broke on
    if out is not None and res.case is not None and failing and res.verdict != "verified":
        from .counterexample import save

        path = save(res, out)
        res.counterexample = None if path is None else str(path)
    return res


def prove_on(
    claim: Claim,
    res: ClaimResult,
    boxes: int,
    workers: Any = None,
    region: str | None = None,
    tail: dict[str, Any] | None = None,
) -> None:
    """Prove ``claim``'s region statement on the data sets its search kept (``res.detail["data_sets"]``), each
    within ``boxes`` boxes (:func:`attsvm.prove.statement.prove_claim`; ``workers``: an open
    :class:`~attsvm.pool.Pool` for the boxes, or None: in this process), and set ``res``: ``proved`` when every one
    is proved (for those data sets and regions, named in ``res.proofs``); ``refuted`` (rigorous) when the prover
    finds a point of a region whose margin's enclosure is below 0; otherwise it stays ``verified`` (by sampling),
    with the proofs that did not close named. The result does not depend on ``workers``. ``region``, ``tail``: as
    in :func:`run_claim` (a proved tail is named beside each proof, and must use the boxes' cone)."""
    from ..prove.statement import StatementError, prove_claim
    from ..prove.tail import cone_mismatch

    sets = res.detail.pop("data_sets", [])
    proofs = []
    for ds in sets:
        try:
            rp = prove_claim(claim, ds, region=region, max_boxes=boxes, workers=workers)
            why = None if tail is None else cone_mismatch(tail.get("mu"), rp.region)
            if why is not None:
                raise StatementError(f"{tail.get('claim')}: {why}")
        except (StatementError, InputError) as exc:
            res.error = str(exc)
            res.verdict, res.reason = "inconclusive", f"error: {exc}"
            return
        proofs.append(rp)
    res.proofs = [
        {
            "data": _describe_data(rp.data),
            "region": rp.region.describe() + ("" if tail is None else f"; {tail['text']}"),
            "status": rp.status,
            "boxes": rp.proof.boxes,
            "leaves": len(rp.proof.leaves),
            "depth": rp.proof.depth,
            "seconds": round(rp.seconds, 3),
            "method": rp.proof.method,
            "reason": rp.proof.reason,
            **({} if tail is None else {"tail": tail}),
        }
        for rp in proofs
    ]
    bad = [rp for rp in proofs if rp.status == "refuted"]
    if bad:
        rp = bad[0]
        res.verdict, res.confirmed, res.confirmed_how, res.confirmed_by = "refuted", True, "rigorous", "prover"
        res.confirmation_method = "ball-arithmetic branch and bound (a point of the region)"
        res.reason = f"proved false on {_describe_data(rp.data)}: {rp.proof.reason} ({rp.region.describe()})"
        return
    done = sum(rp.status == "proved" for rp in proofs)
    if proofs and done == len(proofs):
        res.verdict = "proved"
        res.reason = (
            f"proved on the {done} data set(s) of the search named in the report ({res.proofs[0]['region']}; "
            f"{sum(rp.proof.boxes for rp in proofs)} boxes); {res.reason}"
        )
    else:
        res.reason += f"; proved on {done} of {len(proofs)} data sets within {boxes} boxes each (verdict by sampling)"


def _describe_data(ds: Any) -> str:
    """``n=2, T=3, d=2, sha256 1a2b3c4d`` (the digest of the data arrays' bytes)."""
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for k, v in sorted(ds.to_dict().items()):
        h.update(k.encode())
        h.update(np.ascontiguousarray(np.asarray(v)).tobytes() if v is not None and k != "kind" else str(v).encode())
    return f"n={ds.n}, T={ds.T}, d={ds.d}, sha256 {h.hexdigest()[:8]}"


def _run_universal(claim, examples, seed, b, device, time_limit, on_example, consts, keep=0, data=None) -> ClaimResult:
    from .search import run_search

    n = int(examples) if examples is not None else universal_examples(claim, b)
    sr = run_search(
        claim,
        examples=n,
        seed=seed,
        budget=b,
        device=device,
        shrinks=shrink_calls(b),
        time_limit=time_limit,
        constants=consts,
        on_example=on_example,
        keep=keep,
        data=data,
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
        if sr.timed_out and not res.confirmed:
            res.reason += " (time limit reached while shrinking)"
        return res
    decided = sum(sr.decided.values())
    if sr.timed_out:  # the user's wall-clock limit: an unfinished search is never verified
        res.reason = (
            f"time limit: the search stopped after {sr.examples} of {n} examples "
            f"({decided} decided, no failure); rerun without --time-limit"
        )
        return res
    lacking = _evidence(decided, sr.inconclusive, "examples", sr.inconclusive_reasons, sr.exhausted)
    if lacking is not None:
        res.reason = lacking
        return res
    res.verdict = "verified"
    res.reason = f"no failure in {decided} decided examples ({decided_text(sr.decided)})"
    if sr.inconclusive:
        res.reason += f", {sr.inconclusive} undecidable"
    if sr.exhausted:
        res.reason += " (every distinct case tried)"
    if keep:
        res.detail["data_sets"] = sr.data_sets
    return res


def _run_empirical(claim, examples, seed, b, device, consts) -> ClaimResult:
    from .empirical import failing_case, run_sweep

    runs = int(examples) if examples is not None else max(8, int(round(b * (claim.examples or 50))))
    sw = run_sweep(claim, runs=runs, seed=seed, budget=b, device=device, constants=consts)
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
        res.outcome = Outcome(
            ok=False, margin=sw.failing_margin, detail={"run": sw.failing_index, **(out.detail or {})}
        )
    if verdict == "refuted":  # the rate is below the requirement: its failing run must be confirmed too
        rate_reason = res.reason
        _apply(res, confirm(claim, res.case, res.outcome))
        res.reason = f"{rate_reason}; run {sw.failing_index} {res.reason}"
    return res


# ---------------------------------------------------------------------- the check job
class Progress:
    """Progress on a stream: one line per finished claim; on a TTY also a spinner with the running example
    count, redrawn by a background thread (so it moves during long single examples and sweeps too). In a
    parallel run (:meth:`start_parallel`) the lines come in completion order (``[k/N]``: the k-th finished) and
    the spinner shows how many claims are running and the time since the start."""

    def __init__(self, stream=None, total: int = 0):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total
        self.done = 0
        self.workers = 0  # > 0: a parallel run of this many workers
        self._examples = 0
        self._current = ""
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def start(self, claim: Claim) -> None:
        self._current = claim.id
        self._examples = 0
        self._t0 = time.perf_counter()
        self._spinner()

    def start_parallel(self, workers: int) -> None:
        """A parallel run of ``workers`` workers begins (the claims' own example counts are not seen here)."""
        self.workers = max(1, int(workers))
        self._t0 = time.perf_counter()
        self._spinner()

    def _spinner(self) -> None:
        if self.tty and self._stop is None:
            self._stop = threading.Event()
            threading.Thread(target=self._spin, args=(self._stop,), daemon=True).start()

    def _spin(self, stop: threading.Event) -> None:
        k = 0
        while not stop.wait(0.2):
            k += 1
            ch = "|/-\\"[k % 4]
            if self.workers:
                running = min(self.workers, self.total - self.done)
                msg = f"\r{ch} [{self.done}/{self.total} done] {running} running, {time.perf_counter() - self._t0:.0f}s"
            else:
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
    time_limit: float | None = None,
    progress: Progress | None = None,
    allow_inconclusive: bool = False,
    db: Any = None,
    workers: int | str | None = None,
    cluster: str | None = None,
    prove: int | None = None,
    data: Any = None,
    regions: dict[str, str] | None = None,
    tails: dict[str, dict[str, Any]] | None = None,
) -> Report:
    """Run ``claims`` (dependency order); save failing cases under ``out`` (checked writable first: an
    :class:`~attsvm.errors.InputError` before anything runs); report progress; ``db`` the counterexample database
    (:func:`run_claim`). Returns a :class:`~attsvm.claims.report.Report` (a list of the results, rendered as a
    table in Jupyter, with the exit code ``attsvm check`` would give).

    ``workers`` (an int, a digit string or ``"auto"``: :func:`attsvm.pool.workers_of`) > 1, or ``cluster``
    (``"local"``, ``"local:N"``, ``"tcp://HOST:PORT"``: :func:`attsvm.pool.check_cluster`), run the claims in
    parallel (module docstring: the same results, in the same order); giving both is bad input
    (:class:`~attsvm.pool.Pool`). One worker (``None``, 1) without a cluster is the serial loop in this process.
    ``prove`` (a box budget, :func:`run_claim`) with a single region claim and a pool: the claim runs in this process
    and the pool's workers decide its proofs' boxes (module docstring). ``data``, and per claim id ``regions`` and
    ``tails``: :func:`run_claim`'s ``data``, ``region`` and ``tail``."""
    from ..pool import Pool
    from .discover import dependency_order

    pool = Pool(workers, cluster)  # validated before anything runs; started only for a parallel check
    b = resolve_budget(budget)
    ordered = dependency_order(claims)
    for c in ordered:  # bad hypotheses are bad input: say so before running anything
        validate(c)
        if data is not None:
            takes_data(c)
    if out is not None:  # so is a counterexample folder that cannot be written (the CLI names it --out)
        from ..outputs import check_output_dir

        check_output_dir(out, "out")
    if progress is not None:
        progress.total = len(ordered)
    options = dict(  # of run_claim, for every claim (serially, or sent to the workers in a ClaimTask)
        examples=examples,
        seed=seed,
        budget=b,
        device=device,
        time_limit=time_limit,
        out=None if out is None else str(out),
        allow_inconclusive=allow_inconclusive,
        prove=prove,
        data=data,
    )
    each = [{**options, "region": (regions or {}).get(c.id), "tail": (tails or {}).get(c.id)} for c in ordered]
    if pool.kind == "serial":
        results = _check_serial(ordered, each, progress, db)
    elif prove and len(ordered) == 1 and ordered[0].kind == "universal" and "region" in ordered[0].hypotheses:
        # one region claim: it runs here and the workers decide its proofs' boxes (no pool inside a worker)
        task_of(ordered[0], each[0], db)  # a claim that could not travel: InputError, as in any parallel check
        with pool:
            results = _check_serial(ordered, [{**each[0], "prove_workers": pool}], progress, db)
    else:
        tasks = [task_of(c, o, db) for c, o in zip(ordered, each)]  # one that cannot travel: InputError, nothing ran
        results = _check_parallel(ordered, tasks, pool, progress, db)
    if db is not None and hasattr(db, "record_durations"):
        db.record_durations(results)
    return Report(results, seed=seed, budget=budget, device=device)


def _depends_refuted(c: Claim, r: ClaimResult, done: dict[str, ClaimResult]) -> None:
    """Note in ``r`` the dependencies of ``c`` (among the results ``done`` before it) that a true claim's refutation
    broke."""
    broken = [d for d in c.depends if d in done and done[d].verdict == "refuted" and done[d].expected == "true"]
    if broken:
        r.reason += f" [depends on refuted {', '.join(broken)}]"
        r.detail["depends_refuted"] = broken


def _check_serial(ordered, each, progress, db):
    results: list[ClaimResult] = []
    try:
        for c, options in zip(ordered, each):
            if progress is not None:
                progress.start(c)
            r = run_claim(c, **options, on_example=progress.example if progress is not None else None, db=db)
            _depends_refuted(c, r, {x.id: x for x in results})
            results.append(r)
            if progress is not None:
                progress.finish(r)
    finally:
        if progress is not None:
            progress.close()
    return results


def _check_parallel(ordered, tasks, pool, progress, db):
    known = db.durations() if db is not None and hasattr(db, "durations") else {}
    order = schedule(ordered, known)
    try:
        with pool:
            if progress is not None:
                progress.start_parallel(pool.size)
            got = pool.map(
                run_claim_task,
                [tasks[i] for i in order],
                on_result=None if progress is None else (lambda k, r: progress.finish(r)),
                chunk=1,  # claims are long: one per task, longest first (two long ones never share a worker)
            )
    finally:
        if progress is not None:
            progress.close()
    results: list[ClaimResult] = [None] * len(ordered)  # type: ignore[list-item]
    for k, i in enumerate(order):
        results[i] = got[k]
    for i, (c, r) in enumerate(zip(ordered, results)):  # once all are in: the serial note, in the serial order
        _depends_refuted(c, r, {x.id: x for x in results[:i]})
    return results


# ---------------------------------------------------------------------- parallel tasks
def schedule(claims: list[Claim], durations: dict[str, float]) -> list[int]:
    """The order in which a parallel check starts ``claims`` (indices into the list): longest first by
    ``durations`` (claim id -> seconds of its last run, :meth:`~.database.Database.durations`); claims without a
    record come before them, in their own order (an unknown claim may be a long one). The order changes only when
    each claim starts, never a result."""
    unknown = [i for i, c in enumerate(claims) if c.id not in durations]
    known = sorted((i for i, c in enumerate(claims) if c.id in durations), key=lambda i: (-durations[claims[i].id], i))
    return unknown + known


def _canonical(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((repr(k), _canonical(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_canonical(v) for v in x)
    if isinstance(x, (set, frozenset)):
        return tuple(sorted(repr(_canonical(v)) for v in x))
    if callable(x):
        return f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', type(x).__name__)}"
    return repr(x)


def fingerprint(claim: Claim) -> str:
    """A digest of everything that defines ``claim`` but its file path: id, hypotheses, constants, budgets,
    expectation, ... and the qualified names of its conclusion and confirmer (a worker checks that the claim it
    imported is the one it was sent)."""
    fields = [(f.name, _canonical(getattr(claim, f.name))) for f in dataclasses.fields(claim) if f.name != "module"]
    return hashlib.sha256(repr(fields).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class ClaimTask:
    """One claim's run in a worker process of a parallel :func:`check`: the claim id and its file (the worker
    imports it, :func:`claim_in_file`), or the claim itself when it is not in a file and pickles; its
    :func:`fingerprint`; the options of :func:`run_claim`; the counterexample database (or None)."""

    id: str
    file: str | None
    claim: Claim | None
    fingerprint: str
    options: dict[str, Any]
    db: Any = None
    cwd: str = ""  # the parent's working folder (relative --out / --db paths mean the same folder in the worker)


def claim_in_file(file: str | os.PathLike, claim_id: str) -> Claim:
    """The claim ``claim_id`` of the claim file ``file`` (:func:`~.discover.load_file`; InputError if absent)."""
    from .discover import load_file

    for c in load_file(Path(file)):
        if c.id == claim_id:
            return c
    raise InputError(f"{file}: no claim {claim_id!r} (was the file edited during the run?)")


def travelling(claim: Claim, refusal: str) -> tuple[str | None, Claim | None]:
    """How ``claim`` reaches a worker process: ``(its file, None)`` when it is the object its file defines (the
    worker imports the file, :func:`claim_in_file`), else ``(None, claim)`` when it pickles; otherwise an
    :class:`~attsvm.errors.InputError` ``"claim ID: " + refusal`` (a claim changed after discovery, or defined
    outside a claim file)."""
    if claim.module and Path(claim.module).is_file():
        try:
            found = claim_in_file(claim.module, claim.id)
        except InputError:
            found = None
        if found is claim:
            return str(claim.module), None
    try:
        pickle.dumps(claim)
    except Exception:  # noqa: BLE001 - pickle raises many types
        raise InputError(f"claim {claim.id}: {refusal}") from None
    return None, claim


def task_of(claim: Claim, options: dict[str, Any], db: Any = None) -> ClaimTask:
    """The :class:`ClaimTask` of ``claim``: by file and id when ``claim`` is the object its file defines, else the
    claim itself when it pickles; otherwise an :class:`~attsvm.errors.InputError` (:func:`travelling`: run it with
    ``workers=1``)."""
    fp = fingerprint(claim)
    file, obj = travelling(
        claim,
        "a parallel check runs claims found in claim files (attsvm.claims.discover), and this one is not the claim "
        "its file defines nor can it be pickled; run it with -n 1",
    )
    return ClaimTask(claim.id, file, obj, fp, dict(options), db, os.getcwd())


def run_claim_task(task: ClaimTask) -> ClaimResult:
    """Run one :class:`ClaimTask` (in a worker process): find the claim, check its fingerprint, :func:`run_claim`
    it (with one OpenBLAS thread, :func:`attsvm.svm.blas.blas_threads`; the pool gives torch one thread) and return
    the result ready to travel (:func:`portable`)."""
    from ..svm.blas import blas_threads

    paths = (task.options.get("out"), getattr(task.db, "path", None))
    relative = [str(p) for p in paths if p and not Path(p).is_absolute()]
    if relative and task.cwd and os.path.realpath(os.getcwd()) != os.path.realpath(task.cwd):
        raise InputError(
            f"a worker runs in {os.getcwd()}, not in {task.cwd}: give --out and --db as absolute paths on a file "
            f"system the workers share (relative: {', '.join(relative)})"
        )
    claim = task.claim if task.claim is not None else claim_in_file(task.file, task.id)
    if fingerprint(claim) != task.fingerprint:
        raise InputError(f"claim {task.id}: the worker found another claim in {task.file} than the one it was sent")
    with blas_threads(1), warnings.catch_warnings():  # one BLAS thread per worker too (spinning threads cost 10-100x)
        # A Dask worker's own threads use the global `random` module while a search runs; Hypothesis notices that
        # the global state moved during a draw and warns. Its draws come from its own seeded generator, and no claim
        # uses the global one, so the results do not change.
        warnings.filterwarnings("ignore", message="Do not use the `random` module inside strategies")
        return portable(run_claim(claim, db=task.db, **task.options))


def _picklable(detail: Any) -> Any:
    """``detail`` with each value that does not pickle replaced by its :func:`~.verdict.jsonable` form."""
    if not isinstance(detail, dict):
        try:
            pickle.dumps(detail)
            return detail
        except Exception:  # noqa: BLE001
            return jsonable(detail)
    out = {}
    for k, v in detail.items():
        try:
            pickle.dumps(v)
            out[k] = v
        except Exception:  # noqa: BLE001
            out[k] = jsonable(v)
    return out


def portable(res: ClaimResult) -> ClaimResult:
    """``res`` ready to be pickled back to the parent process. The case travels without its Hypothesis data
    (:class:`~.case.Case` pickles so); a value of an outcome's ``detail`` that does not pickle (a function, an open
    file) is replaced by its JSON form — what the JSON report shows of it anyway."""
    try:
        pickle.dumps(res)
        return res
    except Exception:  # noqa: BLE001
        pass
    for o in (res.outcome, res.confirm_outcome):
        if o is not None:
            o.detail = _picklable(o.detail)
    res.detail = _picklable(res.detail)
    return res


def replay(claim: Claim, npz: str | os.PathLike, *, device: str = "cpu") -> ClaimResult:
    r"""Re-evaluate a saved counterexample of ``claim`` (its data set and recorded draws) and say whether it still
    fails: verdict ``reproduced`` (the failure is confirmed again, with how) or ``not reproduced`` (it passes, is
    cleared, cannot be confirmed, is inconclusive), never a verified/refuted verdict drawn from one example.

    A universal claim's conclusion is re-run on the saved case, then confirmed; an empirical claim's saved run
    (its index, the sweep's size) is re-decided by its confirmer."""
    from .counterexample import decode_draw, load

    ds, info = load(npz, claim.id)  # checked (counterexample.validate): the fields below have their types
    draws = decode_draw(info["draws"])
    seed = info["seed"]
    b = float(info["budget"])
    t0 = time.perf_counter()
    res = _base(claim, seed=seed, budget=b, examples=1)
    res.verdict = "not reproduced"
    res.detail = {"replayed": str(Path(npz))}
    case = Case(
        data=ds,
        hypotheses=claim.new_constants(info.get("region")),
        seed=seed,
        device=device,
        budget=b,
        index=info["index"],
        replay=draws,
        runs=info.get("runs"),
    )
    if claim.kind == "empirical":
        saved = (info.get("outcome") or {}).get("margin")
        out = Outcome(ok=False, margin=min(0.0, float(saved)) if saved is not None else 0.0, detail={"replayed": True})
    else:
        try:
            out = claim.conclusion(case)
        except Exception as exc:
            from .search import error_line

            out, bad = None, error_line(exc)
        else:
            bad = outcome_error(out)
            bad = None if bad is None else f"conclusion {bad}"
        if bad is not None:
            res.error, res.reason = bad, f"error: {bad}"
            res.seconds = time.perf_counter() - t0
            return res
        res.worst_margin = None if out.inconclusive else float(out.margin)
        if out.inconclusive:
            res.reason = f"the saved case is inconclusive now ({out.inconclusive})"
        elif out.ok:
            res.reason = f"the saved case passes now (float64 margin {out.margin:.6g} >= 0)"
        res.case, res.outcome = case, out
        if out.inconclusive or out.ok:
            res.seconds = time.perf_counter() - t0
            return res
    res.case, res.outcome = case, out
    _apply(res, confirm(claim, case, out))
    if res.confirmed:
        res.verdict = "reproduced"
        res.reason = f"the saved case still fails; {res.reason}"
        res.counterexample = str(Path(npz))
    else:
        res.reason = f"the saved case fails in float64 but the failure is not confirmed ({res.reason})"
        res.verdict = "not reproduced"
    res.seconds = time.perf_counter() - t0
    return res
