r"""Branch and bound: prove $m(\theta)>0$ for every $\theta$ in a region $\mathcal R\subset\mathbb R^p$ (one data
set).

Start from the region's bounding box and keep a first-in first-out queue of boxes $B=[\ell,u]$ (exact dyadic
endpoints). For each box:

1. if the region provably misses $B$ (:meth:`Region.excludes`): the leaf is *outside*;
2. evaluate the margin at the centre $c$ in balls: if $\sup[m](c)<0$ and $c\in\mathcal R$ (proved), $c$ is a
   counterexample: the statement is *refuted* (the sign of $m(c)$ is established by the enclosure, not by
   rounding);
3. evaluate the margin on the whole box with forward-mode jets: a value enclosure $[m](B)$ (naive) and a gradient
   enclosure $[\nabla m](B)$; the centred mean-value form
   $$m(B)\subseteq m(c)+\textstyle\sum_j[\partial_jm](B)\,[\ell_j-c_j,\,u_j-c_j]$$
   (method ``"mean-value"``, the default; ``"naive"`` uses $[m](B)$ alone) gives a rigorous lower bound
   $\underline m(B)$: if $\underline m(B)>0$ the leaf is *proved*;
4. otherwise split $B$ at the midpoint of the coordinate $j$ maximising $(u_j-\ell_j)\,\sup|[\partial_jm](B)|$ (the
   most influential one; the widest when there is no gradient), unless the box budget is spent: then the leaf is
   *unresolved*.

The result is ``proved`` when every leaf is proved or outside, ``refuted`` with a counterexample point, else
``unresolved`` (budget spent, or a box where the margin could not be evaluated). Every leaf keeps its path (one
bit per split, 0 = lower half) and the split coordinates along it, so the leaves can be shown to tile the root box
exactly (:mod:`attsvm.prove.certificate`). The order of work is fixed, so the result depends only on the statement,
the data, the region and the budget.

**Rounds** (the parallel prover, ``pool=``). Steps 2–4 of a box are a pure function of the box (:func:`decide`: the
leaf's decision and, for a split, the coordinate). The queue is worked in rounds: take the next $K$ boxes of the
queue in its order ($K$ = :data:`CHUNK`, fixed: it does not depend on the number of workers; fewer when the queue is
shorter), decide in this process which of them are *outside* and which the budget still allows (counting in queue
order), evaluate those in parallel (the workers of an :class:`attsvm.pool.Pool`, results merged by index), then
apply the decisions in queue order exactly as the one-box loop does: the budget counts in that order, children go
to the back of the queue (after every box of the round, as they would one box at a time), and the first refuted box
in that order ends the proof: the boxes of the round after it go back to the front of the queue, in order, and
become *not reached* with the rest of the queue, as in the one-box loop (their evaluations are dropped). Every box
taken in a round is ahead of every child of the round, so this is the one-box loop reordered only in *when* a
decision is computed, never in which decisions are applied: the leaves, their order, the status, the counterexample
and the box count are those of the one-box loop, for any number of workers. The one-box loop itself (no pool, or
``-n 1``) is a round of one box with the decision computed in this process.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..ball import jet
from ..ball.numbers import workprec
from .boxes import as_box, centre, split

METHODS = ("mean-value", "naive")
STATUSES = ("proved", "refuted", "unresolved")
#: the boxes of one round of the parallel prover (module docstring; a constant, so the rounds do not depend on the
#: number of workers)
CHUNK = 64


@dataclass
class Leaf:
    r"""One leaf box: ``path`` (``"0110"``: lower/upper half at each split), ``splits`` (the coordinate split at
    each level), the exact box ``lo``/``hi``, its ``status`` (``proved`` / ``outside`` / ``unresolved`` /
    ``refuted``), and the enclosures that decided it: ``centre`` $[m](c)$, ``gradient`` $[\nabla m](B)$,
    ``value`` $[m](B)$ and ``lower`` $\underline m(B)$ (balls; None where not computed)."""

    path: str
    splits: tuple[int, ...]
    lo: tuple[Fraction, ...]
    hi: tuple[Fraction, ...]
    status: str
    centre: Any = None
    gradient: Any = None
    value: Any = None
    lower: Any = None
    note: str = ""

    @property
    def depth(self) -> int:
        return len(self.path)


@dataclass
class Proof:
    """The result of :func:`prove`."""

    status: str
    leaves: list[Leaf]
    root: tuple[tuple[Fraction, ...], tuple[Fraction, ...]]
    method: str
    boxes: int
    seconds: float
    counterexample: Leaf | None = None
    reason: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def depth(self) -> int:
        """The deepest leaf."""
        return max((lf.depth for lf in self.leaves), default=0)


def _upper_abs(g: Any) -> float:
    r"""A float upper bound of $\sup|g|$ for a ball ``g`` (inf when not finite)."""
    if not g.is_finite():
        return float("inf")
    return float(abs(g.mid()) + g.rad()) if hasattr(g, "rad") else float("inf")


def split_coordinate(lo: tuple, hi: tuple, gradient: Any = None) -> int:
    r"""The coordinate to split: the largest width times $\sup|\partial_jm|$, or the widest without a gradient."""
    widths = [float(b - a) for a, b in zip(lo, hi)]
    if gradient is not None:
        scores = [w * _upper_abs(g) for w, g in zip(widths, gradient)]
        if all(np.isfinite(s) for s in scores) and max(scores) > 0:
            return int(np.argmax(scores))
    return int(np.argmax(widths))


@dataclass
class Decision:
    r"""What the evaluation of one box decided (:func:`decide`): ``status`` ``"refuted"`` (the centre is a point of
    the region where $\sup[m](c)<0$), ``"proved"`` ($\underline m(B)>0$) or ``"split"`` (at coordinate ``split``),
    with the enclosures it computed: ``centre`` $[m](c)$, ``gradient`` $[\nabla m](B)$, ``value`` $[m](B)$ and
    ``lower`` $\underline m(B)$ (balls; None where not computed; a split keeps none)."""

    status: str
    centre: Any = None
    gradient: Any = None
    value: Any = None
    lower: Any = None
    split: int | None = None


def decide(margin: Callable[[np.ndarray], Any], region: Any, lo: tuple, hi: tuple, method: str) -> Decision:
    r"""Steps 2–4 of the module docstring for the box $[\ell,u]$ (``lo``, ``hi``) that the region does not exclude:
    the margin at the centre in balls (refuted when $\sup[m](c)<0$ and $c\in\mathcal R$), on the box in jets, the
    lower bound of ``method``, and proved or the coordinate to split (:func:`split_coordinate`). A pure function of
    the box (at the working precision of the caller's :func:`~attsvm.ball.numbers.workprec`)."""
    c = centre(lo, hi)
    m_c = margin(jet.point(c))
    m_c = None if m_c is None else jet.value(m_c)
    if m_c is not None and m_c < 0 and region.contains_box(c, c):
        return Decision("refuted", centre=m_c)
    m_b = margin(jet.variables(lo, hi))
    grad = None if m_b is None else jet.gradient(m_b, len(lo))
    lower = None
    if m_b is not None and m_c is not None:
        if method == "naive":
            lower = jet.value(m_b)
        else:
            lower = jet.lower_bound(m_c, m_b, lo, hi)
    if lower is not None and lower > 0:
        return Decision("proved", m_c, grad, jet.value(m_b), lower)
    return Decision("split", split=split_coordinate(lo, hi, grad))


def prove(
    margin: Callable[[np.ndarray], Any],
    region: Any,
    *,
    max_boxes: int = 20000,
    method: str = "mean-value",
    prec: int = 256,
    progress: Callable[[int, int], None] | None = None,
    pool: Any = None,
    source: Any = None,
    chunk: int = CHUNK,
) -> Proof:
    r"""Branch and bound (module docstring). ``margin(theta)`` evaluates the margin on an object array of ``p``
    entries — plain balls at a point, or jets on a box — and returns a ball or a jet (None: it could not be
    evaluated there). ``region``: an :mod:`attsvm.prove.regions` region. ``max_boxes``: the budget of boxes
    evaluated (a count: the result does not depend on the machine). ``progress(boxes, queued)`` after each box
    counted.

    ``pool`` (an :class:`attsvm.pool.Pool`) with ``source`` (a picklable description of the margin that a worker
    rebuilds, :class:`attsvm.prove.parallel.ClaimSource`): the boxes are decided in rounds of ``chunk`` boxes by
    the pool's workers (module docstring: the same result as without a pool). Without a pool: one box at a time
    in this process."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if pool is not None and source is None:
        raise ValueError("a parallel proof needs the source of its margin (source=)")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    t0 = time.perf_counter()
    root = as_box(*region.bounding_box())
    queue: deque = deque([(root[0], root[1], "", ())])
    leaves: list[Leaf] = []
    boxes = 0
    size = 1 if pool is None else chunk
    with workprec(prec):
        while queue:
            batch = [queue.popleft() for _ in range(min(size, len(queue)))]
            kinds = _plan(region, batch, boxes, max_boxes)
            decided: list[Any] = []
            if pool is not None:
                from .parallel import decide_all

                todo = [(lo, hi) for (lo, hi, _, _), kind in zip(batch, kinds) if kind == "evaluate"]
                decided = decide_all(pool, source, todo, method, prec)
            k = 0
            for i, ((lo, hi, path, splits), kind) in enumerate(zip(batch, kinds)):
                if kind == "outside":
                    leaves.append(Leaf(path, splits, lo, hi, "outside"))
                    continue
                if kind == "budget":
                    leaves.append(Leaf(path, splits, lo, hi, "unresolved", note="box budget spent"))
                    continue
                boxes += 1
                if progress is not None:
                    progress(boxes, len(queue) + len(batch) - i - 1)
                if pool is None:
                    d = decide(margin, region, lo, hi, method)
                else:
                    d, k = decided[k], k + 1
                    if isinstance(d, BaseException):  # raised where the one-box loop would raise it
                        raise d
                if d.status == "refuted":
                    note = "the margin at the centre is < 0"
                    leaf = Leaf(path, splits, lo, hi, "refuted", centre=d.centre, note=note)
                    leaves.append(leaf)
                    queue.extendleft(reversed(batch[i + 1 :]))  # the rest of the round: first in the queue again
                    return _result("refuted", leaves, queue, root, method, boxes, t0, leaf)
                if d.status == "proved":
                    leaves.append(Leaf(path, splits, lo, hi, "proved", d.centre, d.gradient, d.value, d.lower))
                    continue
                (l1, h1), (l2, h2) = split(lo, hi, d.split)
                queue.append((l1, h1, path + "0", (*splits, d.split)))
                queue.append((l2, h2, path + "1", (*splits, d.split)))
    status = "proved" if all(lf.status in ("proved", "outside") for lf in leaves) else "unresolved"
    return _result(status, leaves, queue, root, method, boxes, t0, None)


def _plan(region: Any, batch: list, boxes: int, max_boxes: int) -> list[str]:
    """For each box of a round, in queue order: ``"outside"`` (the region excludes it), ``"budget"`` (the budget is
    spent when its turn comes) or ``"evaluate"`` (counting the boxes evaluated before it in the round)."""
    kinds = []
    for lo, hi, _, _ in batch:
        if region.excludes(lo, hi):
            kinds.append("outside")
        elif boxes >= max_boxes:
            kinds.append("budget")
        else:
            boxes += 1
            kinds.append("evaluate")
    return kinds


def _result(status, leaves, queue, root, method, boxes, t0, cx) -> Proof:
    for lo, hi, path, splits in queue:  # refuted early: the boxes never reached stay unresolved
        leaves.append(Leaf(path, splits, lo, hi, "unresolved", note="not reached"))
    counts = {s: sum(lf.status == s for lf in leaves) for s in ("proved", "outside", "unresolved", "refuted")}
    reason = {
        "proved": f"{counts['proved']} boxes proved, {counts['outside']} outside the region",
        "refuted": "a point of the region where the margin's enclosure lies below 0",
        "unresolved": f"{counts['unresolved']} boxes unresolved within the budget of {boxes} boxes",
    }[status]
    return Proof(status, leaves, root, method, boxes, time.perf_counter() - t0, cx, reason, counts)
