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


def prove(
    margin: Callable[[np.ndarray], Any],
    region: Any,
    *,
    max_boxes: int = 20000,
    method: str = "mean-value",
    prec: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> Proof:
    r"""Branch and bound (module docstring). ``margin(theta)`` evaluates the margin on an object array of ``p``
    entries — plain balls at a point, or jets on a box — and returns a ball or a jet (None: it could not be
    evaluated there). ``region``: an :mod:`attsvm.prove.regions` region. ``max_boxes``: the budget of boxes
    evaluated (a count: the result does not depend on the machine)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    t0 = time.perf_counter()
    root = as_box(*region.bounding_box())
    queue: deque = deque([(root[0], root[1], "", ())])
    leaves: list[Leaf] = []
    boxes = 0
    with workprec(prec):
        while queue:
            lo, hi, path, splits = queue.popleft()
            if region.excludes(lo, hi):
                leaves.append(Leaf(path, splits, lo, hi, "outside"))
                continue
            if boxes >= max_boxes:
                leaves.append(Leaf(path, splits, lo, hi, "unresolved", note="box budget spent"))
                continue
            boxes += 1
            if progress is not None:
                progress(boxes, len(queue))
            c = centre(lo, hi)
            m_c = margin(jet.point(c))
            m_c = None if m_c is None else jet.value(m_c)
            if m_c is not None and m_c < 0 and region.contains_box(c, c):
                leaf = Leaf(path, splits, lo, hi, "refuted", centre=m_c, note="the margin at the centre is < 0")
                leaves.append(leaf)
                return _result("refuted", leaves, queue, root, method, boxes, t0, leaf)
            m_b = margin(jet.variables(lo, hi))
            grad = None if m_b is None else jet.gradient(m_b, len(lo))
            lower = None
            if m_b is not None and m_c is not None:
                if method == "naive":
                    lower = jet.value(m_b)
                else:
                    lower = jet.lower_bound(m_c, m_b, lo, hi)
            if lower is not None and lower > 0:
                leaves.append(Leaf(path, splits, lo, hi, "proved", m_c, grad, jet.value(m_b), lower))
                continue
            j = split_coordinate(lo, hi, grad)
            (l1, h1), (l2, h2) = split(lo, hi, j)
            queue.append((l1, h1, path + "0", (*splits, j)))
            queue.append((l2, h2, path + "1", (*splits, j)))
    status = "proved" if all(lf.status in ("proved", "outside") for lf in leaves) else "unresolved"
    return _result(status, leaves, queue, root, method, boxes, t0, None)


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
