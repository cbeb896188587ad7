r"""The Claim API: a statement of THEORY as an executable object.

A claim file (``proofs/claims/*.py`` or any user file) defines module-level claims with the
:func:`claim` decorator. The decorated function evaluates the *conclusion* on one generated case and
returns an :class:`Outcome` with a numeric ``margin`` (how far from failing; ``margin < 0`` fails)::

    from attsvm.claims import claim, Outcome

    @claim(
        id="grad-closed-form",
        title="The closed-form gradient equals central differences",
        origin="derived",
        source="THEORY §3",
        hypotheses={"data": "paper", "n": (1, 4), "T": (2, 5), "d": (1, 4)},
    )
    def grad_closed_form(case):
        W = case.draw_matrix(case.data.d, case.data.d, scale=3.0)
        ...
        return Outcome(ok=err <= tol, margin=tol - err, detail={"err": err})

    @grad_closed_form.confirm
    def _(case, outcome):            # re-evaluate the failing computation at high precision (mpmath)
        ...
        return Outcome(...)

Hypotheses are *data*: ``hypotheses["data"]`` names a strategy of :mod:`attsvm.strategies` and the
other keys parametrise it (size ranges, flags). Tightening a hypothesis is a one-line edit.

``kind="universal"`` claims are searched by Hypothesis (``target()`` on the margin) for a budget of
examples; on failure the case is shrunk, then re-evaluated by the claim's ``confirm`` function at high
precision. Only a failure that survives is ``refuted``. ``kind="empirical"`` claims receive a *batch* of
runs (``case.batch``) and return per-run outcomes (``Outcome.runs``: bool array); the verdict compares
the success rate's confidence interval with ``rate``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

ORIGINS = ("paper", "reconstructed", "derived", "conjecture", "empirical", "expected-false")
KINDS = ("universal", "empirical")
EXPECTATIONS = ("true", "false", "inconclusive")
HOW = ("float64", "high precision", "exact", "rigorous")  # how an example was decided


@dataclass
class Outcome:
    r"""Result of evaluating a conclusion on one case.

    ``ok``: the conclusion held; ``margin``: distance from failing (>= 0 iff ok, by convention);
    ``detail``: numbers for the report (JSON-serialisable); ``runs``: for empirical claims, one bool per run
    of the batch (``None`` for an undecided run); ``run_margins``: instead of (or beside) ``runs``, one real
    margin per run, a run succeeding iff its margin is $\ge 0$ (NaN: undecided); ``inconclusive``: set to a
    reason when the case could not be decided (e.g. solver trouble,
    GD not converged in budget) — such a case is neither a pass nor a failure; ``how``: how the outcome was
    decided (one of :data:`HOW`; default ``"float64"`` for a conclusion, ``"high precision"`` for a confirmer;
    set ``"exact"`` / ``"rigorous"`` when the decision rests on exact rationals or ball arithmetic).

    A decided outcome must be consistent (:func:`outcome_error`): ``margin`` finite, ``margin >= 0`` when ``ok``
    and ``margin <= 0`` when not (0 is the boundary: a strict inequality fails there with ``ok=False``). An
    empirical outcome may leave ``ok`` out (it is then whether every decided run succeeds); when given, ``ok`` and
    ``margin`` are used, so they must agree with its runs
    (:func:`attsvm.claims.empirical.run_table`): ``ok`` iff every decided run succeeds, ``margin`` on ``ok``'s side
    (the failing case's margin in the report).
    """

    ok: bool | None = None
    margin: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)
    runs: Any = None
    run_margins: Any = None
    inconclusive: str | None = None
    how: str | None = None


def outcome_error(out: Any, *, empirical: bool = False) -> str | None:
    """Why ``out`` is not a valid :class:`Outcome` (None when it is).

    Decided outcomes need a bool ``ok`` and a real, finite ``margin`` on the side ``ok`` says (>= 0 when ok,
    <= 0 when not); empirical ones also ``runs`` or ``run_margins`` (checked against the batch by
    :func:`attsvm.claims.empirical.run_table`), universal ones neither; ``how`` must be one of :data:`HOW`. An
    inconclusive outcome needs a non-empty reason."""
    import math

    import numpy as np

    if not isinstance(out, Outcome):
        return f"returned {type(out).__name__}, not an Outcome"
    if out.how is not None and out.how not in HOW:
        return f"Outcome.how must be one of {HOW}, got {out.how!r}"
    if out.inconclusive is not None:
        return None if str(out.inconclusive).strip() else "Outcome.inconclusive must be a non-empty reason"
    if empirical and out.runs is None and out.run_margins is None:
        return "empirical conclusion returned no runs (Outcome.runs or Outcome.run_margins)"
    if not empirical and (out.runs is not None or out.run_margins is not None):
        return "a universal conclusion returned per-run results (Outcome.runs / run_margins are for kind='empirical')"
    if not isinstance(out.ok, (bool, np.bool_)) and not (empirical and out.ok is None):
        return f"Outcome.ok must be a bool, got {type(out.ok).__name__}"
    m = out.margin
    try:
        if isinstance(m, (bool, str, bytes, complex, np.complexfloating)):
            raise TypeError
        float(m)
    except (TypeError, ValueError):
        return f"Outcome.margin must be a real number, got {m!r}"
    if not math.isfinite(float(m)):
        return f"Outcome.margin must be finite, got {float(m)!r}"
    if out.ok is not None and ((bool(out.ok) and float(m) < 0) or (not out.ok and float(m) > 0)):
        return f"Outcome.ok={bool(out.ok)} disagrees with margin={float(m):.6g} (ok must mean margin >= 0)"
    return None


#: the lists of :func:`collecting` blocks now open (innermost last); every Claim created is appended to each
_COLLECTING: list[list[Any]] = []


@contextmanager
def collecting() -> Iterator[list[Claim]]:
    """Collect every :class:`Claim` created inside the block (in creation order), whatever name it is bound to
    or whether it is bound at all: discovery loads a claim file inside one, so that a claim whose function name
    is later rebound cannot vanish (:mod:`.discover`)."""
    made: list[Claim] = []
    _COLLECTING.append(made)
    try:
        yield made
    finally:
        del _COLLECTING[next(i for i, m in enumerate(_COLLECTING) if m is made)]


@dataclass(repr=False)
class Claim:
    """A statement with id, origin, source, hypotheses, dependencies and its conclusion."""

    id: str
    title: str
    origin: str
    source: str
    hypotheses: dict[str, Any]
    conclusion: Callable[[Any], Outcome]
    params: dict[str, Any] = field(default_factory=dict)  # the claim's own constants (steps, lr, loss, ...)
    depends: tuple[str, ...] = ()
    kind: str = "universal"
    rate: float | None = None  # empirical: required success rate
    examples: int | None = None  # default budget (universal: Hypothesis examples; empirical: runs)
    confirmer: Callable[[Any, Outcome], Outcome] | None = None
    module: str | None = None  # file it was discovered in
    notes: str = ""
    # A settled finding pinned in the claim file (like a strict xfail): ``finding`` says what the checker
    # established, with the evidence's location; ``expect`` ("true"|"false"|"inconclusive") then overrides the
    # expectation derived from ``origin``. If the verdict ever changes, ``attsvm check`` exits 1 and flags it.
    expect: str | None = None
    finding: str = ""
    ci_examples: int | None = None  # examples (universal) or runs (empirical) of the CI run (tests, --budget ci)
    line: int | None = None  # the line of its definition in its file (default: the conclusion's first line)

    def __post_init__(self) -> None:
        if self.line is None:
            code = getattr(self.conclusion, "__code__", None)
            self.line = None if code is None else int(code.co_firstlineno)
        for made in _COLLECTING:
            made.append(self)
        if self.origin not in ORIGINS:
            raise ValueError(f"claim {self.id}: origin must be one of {ORIGINS}")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {KINDS}")
        if self.kind == "empirical" and self.rate is None:
            raise ValueError(f"claim {self.id}: empirical claims need a rate")
        if self.expect is not None and self.expect not in EXPECTATIONS:
            raise ValueError(f"claim {self.id}: expect must be one of {EXPECTATIONS}")
        if self.ci_examples is not None and not (isinstance(self.ci_examples, int) and self.ci_examples >= 1):
            raise ValueError(f"claim {self.id}: ci_examples must be a positive int")
        if self.expect is not None and not self.finding:
            raise ValueError(f"claim {self.id}: an overridden expectation needs its finding")

    @property
    def case_hypotheses(self) -> dict[str, Any]:
        """What a case sees as ``case.hypotheses``: the strategy's parameters and the claim's ``params``."""
        return {**self.hypotheses, **self.params}

    def new_constants(self, region: str | None = None, params: dict[str, Any] | None = None) -> Any:
        """A fresh :class:`~attsvm.claims.case.Constants` of :attr:`case_hypotheses` for one run of this claim: every
        case of the run shares it, so the run can tell an undeclared read or a never-read ``params`` entry.

        ``region``: a region spec in place of the declared ``hypotheses["region"]`` (``attsvm check/prove --region``);
        ``params``: values in place of declared params of the same names (``--set KEY=VALUE``; any other name is an
        InputError)."""
        from ..errors import InputError
        from .case import Constants

        values = self.case_hypotheses
        for key, val in (params or {}).items():
            if key not in self.params:
                declared = ", ".join(sorted(self.params)) or "none"
                raise InputError(f"claim {self.id} has no param {key!r} (its params: {declared})")
            values[key] = val
        if region is not None:
            values["region"] = region
        return Constants(values, params=tuple(self.params))

    @property
    def expected(self) -> str:
        """``"false"`` for expected-false controls and pinned refutations, ``"inconclusive"`` when pinned so
        (``expect``), else ``"true"``."""
        if self.expect is not None:
            return self.expect
        return "false" if self.origin == "expected-false" else "true"

    def confirm(self, fn: Callable[[Any, Outcome], Outcome]) -> Callable[[Any, Outcome], Outcome]:
        """Decorator: register the high-precision re-evaluation of a failing case."""
        self.confirmer = fn
        return fn

    def __call__(self, case: Any) -> Outcome:
        return self.conclusion(case)

    def __repr__(self) -> str:
        return f"Claim(id={self.id!r}, origin={self.origin!r}, kind={self.kind!r}, title={self.title!r})"

    def _repr_html_(self) -> str:
        """Id and statement, origin, kind and expectation, the source, the hypotheses (the data strategy and its
        parameters), the claim's own constants, dependencies, budgets, the file and the notes."""
        from .. import html

        hyp = html.rows_table(["key", "value"], [[k, html.code(repr(v))] for k, v in self.hypotheses.items()])
        fields = [
            ("statement", self.title),
            ("origin", self.origin),
            ("kind", self.kind + (f", required success rate {self.rate:g}" if self.rate is not None else "")),
            ("expected verdict", {"true": "verified", "false": "refuted"}.get(self.expected, self.expected)),
            ("source", self.source or None),
            ("constants", ", ".join(f"{k}={v!r}" for k, v in self.params.items()) or None),
            ("depends on", ", ".join(self.depends) or None),
            ("examples" if self.kind == "universal" else "runs", self.examples),
            ("CI budget", self.ci_examples),
            ("finding (pinned)", self.finding or None),
            ("file", html.code(self.module) if self.module else None),
            ("notes", self.notes or None),
        ]
        return html.card("Claim", (html.code(self.id),), fields, [("hypotheses", hyp)])


def claim(
    *,
    id: str,
    title: str,
    origin: str,
    source: str = "",
    hypotheses: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    depends: tuple[str, ...] | list[str] = (),
    kind: str = "universal",
    rate: float | None = None,
    examples: int | None = None,
    notes: str = "",
    seconds: Any = None,
    expect: str | None = None,
    finding: str = "",
    ci_examples: int | None = None,
) -> Callable[[Callable[[Any], Outcome]], Claim]:
    """Decorator turning a conclusion function into a :class:`Claim` (see module docstring)."""
    if seconds is not None:
        raise ValueError(
            f"claim {id}: seconds= is gone: a search budget is a count (examples=N), so that a verdict does not "
            "depend on the machine's speed (a wall-clock limit is attsvm check --time-limit S)"
        )

    def wrap(fn: Callable[[Any], Outcome]) -> Claim:
        return Claim(
            id=id,
            title=title,
            origin=origin,
            source=source,
            hypotheses=dict(hypotheses or {}),
            conclusion=fn,
            params=dict(params or {}),
            depends=tuple(depends),
            kind=kind,
            rate=rate,
            examples=examples,
            expect=expect,
            finding=finding,
            ci_examples=ci_examples,
            module=fn.__module__,
            notes=notes or (fn.__doc__ or "").strip(),
        )

    return wrap
