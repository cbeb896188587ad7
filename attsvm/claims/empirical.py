r"""Empirical claims: one batched sweep of $B$ runs, a success rate and its Wilson 95% interval.

The claim's conclusion receives ``case.batch`` (a batched :class:`~attsvm.data.Dataset` from
:func:`attsvm.strategies.batch`) and returns ``Outcome(runs=...)``: one boolean per run (``None``/NaN
entries are undecided runs and are left out of the count). With $k$ successes among $N$ decided runs
and the Wilson interval $[\ell,u]$: $\ell\ge$ ``rate`` → verified; $u<$ ``rate`` → refuted (confirmed by
the claim's confirmer on the first failing run when it has one); otherwise inconclusive.
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


def decided_runs(runs: Any, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ok, decided)`` boolean arrays from an ``Outcome.runs`` value."""
    arr = np.asarray(runs, dtype=object).reshape(-1)
    decided = np.array([r is not None and not (isinstance(r, float) and np.isnan(r)) for r in arr], dtype=bool)
    ok = np.array([bool(r) if d else False for r, d in zip(arr, decided)], dtype=bool)
    return ok, decided


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
    case = Case(batch=batch, hypotheses=consts, seed=seed, device=device, budget=budget)
    try:
        out = claim.conclusion(case)
    except Exception as exc:
        return SweepResult(runs, 0, 0, None, case, None, error=error_line(exc))
    bad = outcome_error(out, empirical=True)
    if bad is not None:
        return SweepResult(runs, 0, 0, None, case, None, error=f"conclusion {bad}")
    ok, decided = decided_runs(out.runs)
    fail = np.nonzero(decided & ~ok)[0]
    return SweepResult(len(ok), int(ok.sum()), int(decided.sum()), out, case, int(fail[0]) if fail.size else None)


def failing_case(sweep: SweepResult) -> Case:
    """The case of the first failing run (``data`` = that run's data set, ``batch`` kept, ``index`` = run)."""
    c = sweep.case
    b = sweep.failing_index
    data = c.batch[b] if (c.batch is not None and b is not None) else None
    return Case(
        data=data, batch=c.batch, hypotheses=c.hypotheses, seed=c.seed, device=c.device, budget=c.budget, index=b or 0
    )
