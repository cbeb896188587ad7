r"""Empirical claims: one batched sweep of $B$ runs, a success rate and its Wilson 95% interval.

The claim's conclusion receives ``case.batch`` (a batched :class:`~attsvm.data.Dataset` from
:func:`attsvm.strategies.batch`; ``case.runs`` its size, also when the claim builds its own runs) and returns
``Outcome(runs=...)`` (``ok`` and ``margin`` optional): one boolean per run (``None`` or NaN: an undecided run,
left out of the count), or ``run_margins=...``: one real margin $m_b$ per run, run $b$ succeeding iff $m_b\ge 0$.
:func:`run_table` validates them: exactly ``case.runs`` entries; booleans (never numbers read as truth
values: 0.3 or -0.5 in ``runs`` is an error); finite margins; ``runs`` and ``run_margins`` agreeing where both
are given; ``ok``, when given, true iff every decided run succeeds, and ``margin`` on its side. Anything else is an
error in the claim (exit 1 with its id). With $k$ successes among $N$ decided runs and the Wilson interval
$[\ell,u]$: $\ell\ge$ ``rate`` → verified; $u<$ ``rate`` → refuted (confirmed by the claim's confirmer on the
first failing run); otherwise inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .api import Claim, Outcome, outcome_error
from .case import Case


@dataclass
class SweepResult:
    runs: int
    successes: int
    decided: int
    outcome: Outcome | None
    case: Case | None
    failing_index: int | None
    error: str | None = None
    margins: np.ndarray | None = None  # per-run margins, when the outcome gave them

    @property
    def failing_margin(self) -> float | None:
        """The first failing run's margin: its ``run_margins`` entry, else the outcome's ``margin``."""
        if self.failing_index is None or self.outcome is None:
            return None
        if self.margins is not None:
            return float(self.margins[self.failing_index])
        return float(self.outcome.margin)


class RunsError(ValueError):
    """An empirical outcome whose runs are not what :func:`run_table` accepts (an error in the claim)."""


def _entries(x: Any, name: str, n: int) -> list[Any]:
    """The entries of a 1-D ``runs`` / ``run_margins`` value of length ``n``."""
    if isinstance(x, (str, bytes, dict)) or np.ndim(x) != 1:
        raise RunsError(f"Outcome.{name} must be a 1-D sequence with one entry per run, got {type(x).__name__}")
    vals = list(np.asarray(x, dtype=object).reshape(-1))
    if len(vals) != n:
        raise RunsError(f"Outcome.{name} has {len(vals)} entries for a sweep of {n} runs (case.runs)")
    return vals


def _undecided(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and np.isnan(v))


def run_table(out: Outcome, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(ok, decided, margins)`` of the ``n`` runs of an empirical outcome (``margins`` None without
    ``run_margins``); raises :class:`RunsError` naming the first problem (module docstring)."""
    ok = np.zeros(n, dtype=bool)
    decided = np.zeros(n, dtype=bool)
    margins = None
    if out.runs is not None:
        for b, v in enumerate(_entries(out.runs, "runs", n)):
            if _undecided(v):
                continue
            if not isinstance(v, (bool, np.bool_)):
                raise RunsError(
                    f"Outcome.runs[{b}] is {v!r} ({type(v).__name__}): runs are booleans (None for an undecided "
                    "run); per-run margins go in Outcome.run_margins"
                )
            ok[b], decided[b] = bool(v), True
    if out.run_margins is not None:
        margins = np.full(n, np.nan)
        for b, v in enumerate(_entries(out.run_margins, "run_margins", n)):
            if _undecided(v):
                continue
            if isinstance(v, (bool, np.bool_, str, bytes, complex, np.complexfloating)):
                raise RunsError(f"Outcome.run_margins[{b}] is {v!r}: a run's margin is a real number (NaN: undecided)")
            try:
                m = float(v)
            except (TypeError, ValueError):
                raise RunsError(f"Outcome.run_margins[{b}] is {v!r}: not a real number") from None
            if not np.isfinite(m):
                raise RunsError(f"Outcome.run_margins[{b}] is {m}: a decided run's margin must be finite")
            margins[b] = m
        by_margin = ~np.isnan(margins)
        if out.runs is not None:
            clash = np.nonzero((by_margin != decided) | (by_margin & ((margins >= 0) != ok)))[0]
            if clash.size:
                b = int(clash[0])
                raise RunsError(
                    f"Outcome.runs[{b}]={out.runs[b]!r} disagrees with run_margins[{b}]={out.run_margins[b]!r} "
                    "(a run succeeds iff its margin is >= 0)"
                )
        ok, decided = margins >= 0, by_margin
    failing = int(np.sum(decided & ~ok))
    if out.ok is not None and bool(out.ok) != (failing == 0):
        said = f"{failing} of {int(decided.sum())} decided runs fail" if failing else "no decided run fails"
        raise RunsError(f"Outcome.ok={bool(out.ok)} disagrees with its runs ({said}); ok must mean every run succeeds")
    m = float(out.margin)
    if (failing and m > 0) or (not failing and m < 0):
        said = f"{failing} decided runs fail" if failing else "no decided run fails"
        raise RunsError(f"Outcome.margin={m:.6g} is on the wrong side ({said}): the margin is the failing case's")
    return ok, decided, margins


def run_sweep(
    claim: Claim, *, runs: int, seed: int = 0, budget: float = 1.0, device: str = "cpu", constants: Any = None
) -> SweepResult:
    """One batched sweep of ``runs`` runs of an empirical claim (``constants``: the run's shared
    :class:`~.case.Constants`, default a fresh one)."""
    from .. import strategies as strategies_mod
    from .search import error_line

    name, params = strategies_mod.split_hypotheses(claim.hypotheses)
    batch = strategies_mod.batch(name, runs, seed=seed, **params) if name is not None else None
    consts = claim.new_constants() if constants is None else constants
    case = Case(batch=batch, hypotheses=consts, seed=seed, device=device, budget=budget, runs=runs)
    try:
        out = claim.conclusion(case)
    except Exception as exc:
        return SweepResult(runs, 0, 0, None, case, None, error=error_line(exc))
    bad = outcome_error(out, empirical=True)
    if bad is None and not out.inconclusive:
        try:
            ok, decided, margins = run_table(out, runs)
        except RunsError as exc:
            bad = str(exc)
    if bad is not None:
        return SweepResult(runs, 0, 0, None, case, None, error=f"conclusion {bad}")
    if out.inconclusive:
        return SweepResult(runs, 0, 0, out, case, None)
    fail = np.nonzero(decided & ~ok)[0]
    first = int(fail[0]) if fail.size else None
    res = SweepResult(runs, int((ok & decided).sum()), int(decided.sum()), out, case, first)
    res.margins = margins
    return res


def failing_case(sweep: SweepResult) -> Case:
    """The case of the first failing run (``data`` = that run's data set, ``batch`` kept, ``index`` = run)."""
    c = sweep.case
    b = sweep.failing_index
    data = c.batch[b] if (c.batch is not None and b is not None) else None
    return Case(
        data=data,
        batch=c.batch,
        hypotheses=c.hypotheses,
        seed=c.seed,
        device=c.device,
        budget=c.budget,
        index=b or 0,
        runs=c.runs,
    )
