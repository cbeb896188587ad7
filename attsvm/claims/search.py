r"""The Hypothesis driver for universal claims.

For a claim with conclusion $c$ and data strategy $S$ (selected by its hypotheses) the search runs

.. code-block:: python

    @settings(max_examples=N, database=None, deadline=None, derandomize=False)
    @seed(S)
    @given(st.data())
    def search(data):
        case = Case(data=data.draw(S), hypothesis_data=data, ...)
        out = c(case)
        target(-out.margin)          # push towards failure
        if not out.ok: raise Failed  # Hypothesis shrinks the failing case

within a time budget: once the search seconds (or, after the first failure, the shrink seconds) are
spent, the next call aborts the Hypothesis run (a ``BaseException``; Hypothesis may re-raise it as
"inconsistent data generation", which is then ignored). Every failing case is recorded;
the minimal one (smallest $(n,T,d)$, then the simplest numbers) is kept for confirmation. Cases whose
outcome is ``inconclusive`` (or whose solver raised :class:`~attsvm.errors.SolverError`) count as
neither pass nor failure; any other exception in the claim code stops the search with an ``error``
(a claim error is a bug to report, not a counterexample).
"""

from __future__ import annotations

import contextlib
import math
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .api import Claim, Outcome
from .case import Case, ReplayError


class _Failed(Exception):
    """Raised inside the Hypothesis test on a failing case (so that Hypothesis shrinks it)."""


class _OutOfTime(BaseException):
    """Aborts the Hypothesis run when the time budget is spent (a BaseException, so Hypothesis does not
    treat it as a test failure; returning early instead would make its data generation inconsistent)."""


@dataclass
class SearchResult:
    examples: int = 0  # cases evaluated before the first failure (inclusive)
    shrink_calls: int = 0
    worst_margin: float | None = None
    inconclusive: int = 0
    inconclusive_reasons: Counter = field(default_factory=Counter)
    failures: int = 0
    minimal: tuple[Case, Outcome] | None = None
    error: str | None = None
    error_case: Case | None = None
    timed_out: bool = False


def complexity(case: Case) -> tuple:
    """Sort key of a case: sizes first, then the magnitude of the numbers (smaller is simpler)."""
    ds = case.data
    if ds is None:
        sizes: tuple = ()
        mag = 0.0
    else:
        sizes = (ds.n, ds.T, ds.d, ds.K or 0)
        mag = float(sum(np.abs(np.asarray(a, dtype=float)).sum() for a in (ds.X, ds.Z, ds.v)))
    for d in case.draws:
        try:
            mag += float(np.abs(np.asarray(d, dtype=float)).sum())
        except (TypeError, ValueError):
            pass
    return (*sizes, len(case.draws), mag)


def error_line(exc: BaseException) -> str:
    """``Type: message (at file:line)`` with the innermost frame of the traceback."""
    msg = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        f = tb[-1]
        msg += f" (at {f.filename}:{f.lineno})"
    return msg


def _is_hypothesis_control(exc: BaseException) -> bool:
    mod = type(exc).__module__ or ""
    return mod.startswith("hypothesis")


@contextlib.contextmanager
def _no_local_constants():
    """Make the search depend only on the seed, not on which modules happen to be imported.

    Hypothesis mixes literal constants harvested from every *loaded local module* into its draws, so the same
    seed gave different examples in ``attsvm check`` and inside the test suite. While a claim is searched, the
    harvest is replaced by an empty set (best effort: on a Hypothesis without this hook nothing changes)."""
    try:
        from hypothesis.internal.conjecture import providers as _prov

        original = _prov._get_local_constants
        empty = type(_prov._local_constants)(
            integers=type(_prov._local_constants.integers)(),
            floats=type(_prov._local_constants.floats)(key=_prov.float_to_int),
            bytes=type(_prov._local_constants.bytes)(),
            strings=type(_prov._local_constants.strings)(),
        )
    except Exception:  # pragma: no cover - other Hypothesis versions
        yield
        return
    _prov._get_local_constants = lambda: empty
    try:
        yield
    finally:
        _prov._get_local_constants = original


def run_search(
    claim: Claim,
    *,
    examples: int,
    seed: int = 0,
    budget: float = 1.0,
    device: str = "cpu",
    seconds: float | None = None,
    shrink_seconds: float | None = None,
    on_example: Any = None,
) -> SearchResult:
    """Search ``claim`` for a failing case with Hypothesis (see module docstring)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings, target
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    from .. import strategies as strategies_mod
    from ..errors import InfeasibleError, SolverError

    strategy = strategies_mod.for_hypotheses(claim.hypotheses)
    res = SearchResult()
    # the clock starts after the first example (which pays for imports: torch, sympy, cvxpy)
    clock = {"deadline": math.inf}
    shrink_state = {"deadline": math.inf, "best_key": None}
    counter = {"i": 0}
    aborted = {"yes": False}

    def test(data) -> None:
        now = time.perf_counter()
        if res.minimal is None and now > clock["deadline"]:
            res.timed_out = aborted["yes"] = True
            raise _OutOfTime
        if res.minimal is not None and now > shrink_state["deadline"]:
            aborted["yes"] = True
            raise _OutOfTime
        counter["i"] += 1
        ds = data.draw(strategy) if strategy is not None else None
        case = Case(
            data=ds,
            hypotheses=claim.case_hypotheses,
            seed=seed,
            device=device,
            budget=budget,
            index=counter["i"],
            hypothesis_data=data,
        )
        searching = res.minimal is None
        try:
            out = claim.conclusion(case)
        except (SolverError, InfeasibleError, ReplayError) as exc:
            out = Outcome(
                ok=True, inconclusive=f"solver: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            )
        except BaseException as exc:
            if _is_hypothesis_control(exc) or isinstance(exc, KeyboardInterrupt):
                raise
            res.error = error_line(exc)
            res.error_case = case
            aborted["yes"] = True
            raise _OutOfTime from None
        if not isinstance(out, Outcome):
            res.error = f"conclusion returned {type(out).__name__}, expected Outcome"
            res.error_case = case
            aborted["yes"] = True
            raise _OutOfTime
        if searching:
            res.examples += 1
            if res.examples == 1 and seconds is not None:
                clock["deadline"] = time.perf_counter() + seconds
        else:
            res.shrink_calls += 1
        if on_example is not None:
            on_example(res)
        if out.inconclusive:
            if searching:
                res.inconclusive += 1
                res.inconclusive_reasons[str(out.inconclusive)] += 1
            return
        m = float(out.margin) if out.margin is not None else math.nan
        if not math.isnan(m):
            if searching and (res.worst_margin is None or m < res.worst_margin):
                res.worst_margin = m
            target(-m if math.isfinite(m) else (-1e300 if m > 0 else 1e300), label="-margin")
        if not out.ok:
            res.failures += 1
            key = complexity(case)
            if shrink_state["best_key"] is None or key <= shrink_state["best_key"]:
                shrink_state["best_key"] = key
                res.minimal = (case, out)
                if res.worst_margin is None or (not math.isnan(m) and m < res.worst_margin):
                    res.worst_margin = m
            if shrink_state["deadline"] == math.inf:
                shrink_state["deadline"] = time.perf_counter() + (
                    math.inf if shrink_seconds is None else shrink_seconds
                )
            raise _Failed(claim.id)

    wrapped = settings(
        max_examples=max(1, int(examples)),
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
    )(hseed(int(seed))(given(st.data())(test)))
    try:
        with _no_local_constants():
            wrapped()
    except (_Failed, _OutOfTime):
        pass
    except Exception as exc:
        # Hypothesis records the abort in its data tree and may report it as flaky data generation: that is
        # our own abort, not the claim's; anything else (a nondeterministic claim, ...) is an error.
        if not aborted["yes"] and res.minimal is None and res.error is None:
            res.error = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    return res
