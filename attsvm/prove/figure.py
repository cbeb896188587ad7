r"""A 2-D slice of a proof's leaf boxes: the leaves that meet the plane $\{\theta:\theta_k=a_k,\ k\notin\{i,j\}\}$,
drawn in the coordinates $(\theta_i,\theta_j)$ and coloured by how each was decided (proved, outside the region,
unresolved, refuted), with the region's trace on the plane where it has a closed form (ball, annulus)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

COLOURS = {"proved": "#4c9a2a", "outside": "#d9d9d9", "unresolved": "#d62728", "refuted": "#000000"}


def slice_leaves(leaves: Sequence[Any], dims: tuple[int, int], at: Sequence[Fraction]) -> list[Any]:
    """The leaves whose box contains the plane's point in every coordinate but ``dims`` (``at``: the values of
    all coordinates; those of ``dims`` are ignored)."""
    i, j = dims
    out = []
    for lf in leaves:
        if all(lf.lo[k] <= at[k] <= lf.hi[k] for k in range(len(at)) if k not in (i, j)):
            out.append(lf)
    return out


def slice_figure(
    proof: Any, region: Any, dims: tuple[int, int] = (0, 1), at: Sequence[Any] | None = None, title: str = ""
) -> Any:
    """A matplotlib figure of :func:`slice_leaves` of ``proof`` (:class:`attsvm.prove.bnb.Proof`) in the plane
    through ``at`` (default the origin), with a legend of the leaf counts by status."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Rectangle

    p = len(proof.root[0])
    at = [Fraction(0)] * p if at is None else [Fraction(x) for x in at]
    i, j = dims
    shown = slice_leaves(proof.leaves, dims, at)
    fig, ax = plt.subplots(figsize=(4.2, 4.2))
    counts: dict[str, int] = {}
    for lf in shown:
        counts[lf.status] = counts.get(lf.status, 0) + 1
        x0, x1, y0, y1 = (float(lf.lo[i]), float(lf.hi[i]), float(lf.lo[j]), float(lf.hi[j]))
        ax.add_patch(
            Rectangle((x0, y0), x1 - x0, y1 - y0, facecolor=COLOURS[lf.status], edgecolor="white", linewidth=0.3)
        )
    rest = sum(float(at[k]) ** 2 for k in range(p) if k not in (i, j))
    kind = region.describe()
    for r in _radii(region):
        if r * r > rest:
            ax.add_patch(Circle((0, 0), np.sqrt(r * r - rest), fill=False, edgecolor="black", linewidth=0.8))
    ax.set_xlim(float(proof.root[0][i]), float(proof.root[1][i]))
    ax.set_ylim(float(proof.root[0][j]), float(proof.root[1][j]))
    ax.set_aspect("equal")
    framed = getattr(region, "frame", None) is not None  # boxes in a frame's coordinates, not W's entries
    ax.set_xlabel(rf"$\vartheta_{{{i}}}$" if framed else coordinate_name(i, p))
    ax.set_ylabel(rf"$\vartheta_{{{j}}}$" if framed else coordinate_name(j, p))
    handles = [Rectangle((0, 0), 1, 1, facecolor=COLOURS[s]) for s in COLOURS if s in counts]
    ax.legend(handles, [f"{s} ({counts[s]})" for s in COLOURS if s in counts], loc="upper right", fontsize=7)
    ax.set_title(title or f"{kind}: leaves meeting the slice", fontsize=9)
    fig.tight_layout()
    return fig


def coordinate_name(k: int, p: int) -> str:
    """``$w_{jk}$`` (1-based) for the entries of a square $W$ flattened row-major, else ``$\theta_k$``."""
    d = int(round(p**0.5))
    if d * d == p:
        return rf"$w_{{{k // d + 1}{k % d + 1}}}$"
    return rf"$\theta_{{{k}}}$"


def _radii(region: Any) -> list[float]:
    """The radii of the region's spheres about the origin (ball, annulus, cone's R and R1), for the trace (none
    for a framed region: its spheres are ellipsoids in the frame's coordinates)."""
    if getattr(region, "frame", None) is not None:
        return []
    d = region.to_dict()
    out = []
    for key in ("radius", "r0", "r1", "R", "R1"):
        if key in d and d.get("centre") is None:
            try:
                out.append(float(Fraction(d[key])))
            except (TypeError, ValueError):
                pass
    return [r for r in out if r > 0]
