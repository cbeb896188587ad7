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

**Budgets are counts.** The search runs ``examples`` examples and, after the first failure, at most
``shrinks`` shrink calls; both are counts, so for a given claim, seed and budget the examples, the verdict and the
shrunk counterexample are the same on any machine and under any load (nothing here reads a clock to decide).
Once the shrink count is spent the next call aborts the Hypothesis run (a ``BaseException``; Hypothesis may
re-raise it as "inconsistent data generation", which is then ignored). Only a wall-clock ``time_limit`` that a
user sets reads the clock: an unfinished search that reaches it ends ``timed_out`` (the verdict
``inconclusive: time limit``, never ``verified``), and a shrink it cuts short is reported the same way.

**Ctrl-C.** A ``KeyboardInterrupt`` always ends the search and propagates to the caller (the CLI prints
``error: interrupted``, exit 130): the claim code's exceptions are caught as ``Exception`` only, an interrupt
that Hypothesis wrapped into one of its exception groups is unwrapped and re-raised, and while the search runs
a SIGINT is also remembered, so that an interrupt swallowed on the way (in a finaliser, in a library) still
stops the search at the next example.

**Confirmation during the search.** A float64 failure is confirmed at once (:func:`~.confirm.confirm`). A
*cleared* failure (a rounding artefact) counts as an example decided at high precision and the search goes
on; a *confirmed* or *unconfirmed* failure is shrunk. After shrinking, the smallest failing cases (smallest
$(n,T,d)$, then the simplest numbers) are confirmed in order and the smallest confirmed one is kept; if none
is confirmed the smallest failing case is kept as an *unconfirmed failure*. Every outcome is validated
(:func:`~.api.outcome_error`): an invalid one is an error in the claim. Cases whose outcome is
``inconclusive`` (or whose solver raised :class:`~attsvm.errors.SolverError`) count as neither pass nor
failure; any other exception in the claim code stops the search with an ``error`` (a claim error is a bug to
report, not a counterexample).
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .api import Claim, Outcome, outcome_error
from .case import Case, ReplayError
from .confirm import Confirmation, confirm


class _Failed(Exception):
    """Raised inside the Hypothesis test on a failing case (so that Hypothesis shrinks it)."""


class _OutOfTime(BaseException):
    """Aborts the Hypothesis run when the shrink count or the user's time limit is spent (a BaseException, so
    Hypothesis does not treat it as a test failure; returning early instead would make its data generation
    inconsistent)."""


SHRUNK_TO_CONFIRM = 4  # after shrinking, confirm at most this many of the smallest failing cases
DEFAULT_SHRINKS = 500  # shrink calls after the first failure at budget 1.0 (a count: the same on every machine)


@dataclass
class SearchResult:
    examples: int = 0  # cases evaluated while searching (before the first kept failure, inclusive)
    shrink_calls: int = 0
    worst_margin: float | None = None  # the least margin of the search's examples and of the reported failure
    inconclusive: int = 0
    inconclusive_reasons: Counter = field(default_factory=Counter)
    decided: Counter = field(default_factory=Counter)  # how -> decided examples (float64, high precision, ...)
    cleared: int = 0  # float64 failures cleared at high precision
    failures: int = 0
    minimal: tuple[Case, Outcome] | None = None
    confirmation: Confirmation | None = None  # of ``minimal``
    error: str | None = None
    error_case: Case | None = None
    timed_out: bool = False  # the user's wall-clock time limit ended the search or its shrinking
    exhausted: bool = False  # Hypothesis stopped early, every distinct case tried (e.g. a claim without draws)
    data_sets: list = field(default_factory=list)  # the first distinct data sets of decided passing examples (keep=)


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


def interrupted_in(exc: BaseException) -> bool:
    """Whether ``exc`` is, wraps (an exception group, a cause or context) or was raised by a KeyboardInterrupt."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return True
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return False


@contextlib.contextmanager
def _sigint_remembered():
    """While the block runs, SIGINT raises KeyboardInterrupt as usual *and* sets ``state["yes"]`` (main thread
    with the default handler only; elsewhere the flag stays False and nothing changes)."""
    state = {"yes": False}
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is not signal.default_int_handler:
        yield state
        return

    def handler(signum, frame):
        state["yes"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _no_local_constants():
    """Make the search depend only on the seed, not on which modules happen to be imported.

    Hypothesis mixes literal constants harvested from every *loaded local module* into its draws, so the same
    seed gave different examples in ``attsvm check`` and inside the test suite. While a claim is searched, the
    harvest is replaced by an empty set, and the cache of permitted constants (``CONSTANTS_CACHE``, which an earlier
    Hypothesis run in the process — a test, another claim's search — fills with its local constants) by a fresh
    one, so that a search does not depend on what ran before it (best effort: on a Hypothesis without these hooks
    nothing changes)."""
    try:
        from hypothesis.internal.conjecture import providers as _prov

        original, cache = _prov._get_local_constants, _prov.CONSTANTS_CACHE
        empty = type(_prov._local_constants)(
            integers=type(_prov._local_constants.integers)(),
            floats=type(_prov._local_constants.floats)(key=_prov.float_to_int),
            bytes=type(_prov._local_constants.bytes)(),
            strings=type(_prov._local_constants.strings)(),
        )
        fresh = type(cache)(cache.max_size)
    except Exception:  # pragma: no cover - other Hypothesis versions
        yield
        return
    _prov._get_local_constants = lambda: empty
    _prov.CONSTANTS_CACHE = fresh
    try:
        yield
    finally:
        _prov._get_local_constants = original
        _prov.CONSTANTS_CACHE = cache


@contextlib.contextmanager
def _no_shrink_clock():
    """Make shrinking end by our count alone: Hypothesis also stops a shrink after ``MAX_SHRINKING_SECONDS`` (300 s)
    of wall time, which a slow or loaded machine could reach with another counterexample as the result. While a
    claim is searched that limit is lifted (best effort: on a Hypothesis without it nothing changes); the shrink
    count (``shrinks``) bounds the work instead."""
    try:
        from hypothesis.internal.conjecture import engine as _engine

        original = _engine.MAX_SHRINKING_SECONDS
    except Exception:  # pragma: no cover - other Hypothesis versions
        yield
        return
    _engine.MAX_SHRINKING_SECONDS = math.inf
    try:
        yield
    finally:
        _engine.MAX_SHRINKING_SECONDS = original


def run_search(
    claim: Claim,
    *,
    examples: int,
    seed: int = 0,
    budget: float = 1.0,
    device: str = "cpu",
    shrinks: int = DEFAULT_SHRINKS,
    time_limit: float | None = None,
    constants: Any = None,
    on_example: Any = None,
    keep: int = 0,
    data: Any = None,
) -> SearchResult:
    """Search ``claim`` for a failing case with Hypothesis (see module docstring). ``constants``: the
    :class:`~.case.Constants` every case of the run shares (default: a fresh one of the claim). ``keep``: how many
    distinct data sets of passing examples to keep in ``data_sets`` (for proving on them, ``attsvm check --prove``).
    ``data``: one data set every case uses (``attsvm check --data FILE``): the search then draws only what the
    conclusion draws (its parameters), not the data."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings, target
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    from .. import strategies as strategies_mod
    from ..errors import InfeasibleError, SolverError

    strategy = strategies_mod.for_hypotheses(claim.hypotheses) if data is None else st.just(data)
    res = SearchResult()
    consts = claim.new_constants() if constants is None else constants
    # the user's time limit (if any) starts after the first example (which pays for imports: torch, sympy, cvxpy)
    clock = {"deadline": math.inf}
    counter = {"i": 0}
    aborted = {"yes": False}
    shrunk: list[tuple[tuple, int, Case, Outcome]] = []  # failing cases met while shrinking

    def stop_with_error(msg: str, case: Case) -> None:
        res.error, res.error_case = msg, case
        aborted["yes"] = True
        raise _OutOfTime from None

    def test(data) -> None:
        if sigint["yes"]:  # an earlier Ctrl-C was swallowed somewhere: stop now
            raise KeyboardInterrupt
        if time_limit is not None and time.perf_counter() > clock["deadline"]:
            res.timed_out = aborted["yes"] = True
            raise _OutOfTime
        if res.minimal is not None and res.shrink_calls >= shrinks:
            aborted["yes"] = True
            raise _OutOfTime
        counter["i"] += 1
        ds = data.draw(strategy) if strategy is not None else None
        case = Case(
            data=ds,
            hypotheses=consts,
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
        except (Exception, SystemExit) as exc:  # never KeyboardInterrupt: Ctrl-C ends the search
            if _is_hypothesis_control(exc):
                raise
            stop_with_error(error_line(exc), case)
        bad = outcome_error(out)
        if bad is not None:
            stop_with_error(f"conclusion {bad}", case)
        if searching:
            res.examples += 1
            if res.examples == 1 and time_limit is not None:
                clock["deadline"] = time.perf_counter() + time_limit
        else:
            res.shrink_calls += 1
        if on_example is not None:
            on_example(res)
        if out.inconclusive:
            if searching:
                res.inconclusive += 1
                res.inconclusive_reasons[str(out.inconclusive)] += 1
            return
        m = float(out.margin)
        if searching and (res.worst_margin is None or m < res.worst_margin):
            res.worst_margin = m
        target(-m, label="-margin")
        if out.ok:
            if searching:
                res.decided[out.how or "float64"] += 1
                if len(res.data_sets) < keep and ds is not None and all(ds is not x for x in res.data_sets):
                    if not any(_same_data(ds, x) for x in res.data_sets):
                        res.data_sets.append(ds)
            return
        res.failures += 1
        if searching:
            c = confirm(claim, case, out)
            if c.status == "cleared":
                res.cleared += 1
                res.decided[c.how] += 1
                return
            res.minimal, res.confirmation = (case, out), c
        else:
            shrunk.append((complexity(case), len(shrunk), case, out))
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
    sigint = {"yes": False}
    try:
        with _sigint_remembered() as sigint, _no_local_constants(), _no_shrink_clock():
            wrapped()
    except (_Failed, _OutOfTime):
        pass
    except Exception as exc:
        if sigint["yes"] or interrupted_in(exc):  # a Ctrl-C that Hypothesis wrapped into an exception group
            raise KeyboardInterrupt from exc
        # Hypothesis records the abort in its data tree and may report it as flaky data generation: that is
        # our own abort, not the claim's; anything else (a nondeterministic claim, ...) is an error.
        if not aborted["yes"] and res.minimal is None and res.error is None:
            res.error = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    if sigint["yes"]:
        raise KeyboardInterrupt
    if res.minimal is not None and shrunk:
        _keep_smallest_confirmed(claim, res, shrunk)
    if res.minimal is not None:  # the worst margin includes the reported (shrunk) counterexample's
        m = float(res.minimal[1].margin)
        res.worst_margin = m if res.worst_margin is None else min(res.worst_margin, m)
    res.exhausted = res.minimal is None and res.error is None and not res.timed_out and res.examples < int(examples)
    return res


def _same_data(a: Any, b: Any) -> bool:
    """Whether two data sets are the same (arrays equal bit for bit)."""
    import numpy as np

    da, db = a.to_dict(), b.to_dict()
    return da.keys() == db.keys() and all(np.array_equal(np.asarray(da[k]), np.asarray(db[k])) for k in da)


def _keep_smallest_confirmed(claim: Claim, res: SearchResult, shrunk: list) -> None:
    """Replace ``res.minimal`` by the smallest shrunk failing case that is confirmed; when the search's own
    failure was unconfirmed and no smaller one is confirmed, by the smallest unconfirmed one."""
    first_key = complexity(res.minimal[0])
    smaller = sorted((x for x in shrunk if x[0] < first_key), key=lambda x: (x[0], x[1]))
    fallback = None
    for _, _, case, out in smaller[:SHRUNK_TO_CONFIRM]:
        c = confirm(claim, case, out)
        if c.confirmed:
            res.minimal, res.confirmation = (case, out), c
            return
        if c.status == "unconfirmed" and fallback is None:
            fallback = (case, out), c
    if fallback is not None and not res.confirmation.confirmed:
        res.minimal, res.confirmation = fallback
