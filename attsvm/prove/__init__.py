r"""Proved region statements: "$m(\theta)>0$ for every $\theta$ in a region", for one data set, by branch and bound
over boxes with ball arithmetic (issue 26, THEORY "Region statements").

:mod:`attsvm.prove.boxes` — exact boxes (Fraction endpoints), their exact halving and the exact extremes over a box
of $\|\theta-c\|^2$ and $\langle\theta,w\rangle$; :mod:`attsvm.prove.regions` — the regions (box, ball, annulus,
the cone $\mathcal C_{\mu,R}(W^\circ)\cap\{\|\theta\|\le R_1\}$) with rigorous exclusion / containment tests for
boxes, sampling through a case, exact records and the command-line spelling; :mod:`attsvm.prove.frame` — the exact
orthogonal frame $M$ along a cone's axis, in whose coordinates $\vartheta$ ($W=M\vartheta$) a cone is proved.
"""

from __future__ import annotations

from .boxes import as_box, centre, dist_sq_range, dot_range, fraction_text, split, to_fraction
from .frame import Frame
from .regions import KINDS, Annulus, Ball, Box, Cone, Region, from_dict, parse

__all__ = [
    "Region",
    "Box",
    "Ball",
    "Annulus",
    "Cone",
    "Frame",
    "KINDS",
    "parse",
    "from_dict",
    "split",
    "centre",
    "as_box",
    "to_fraction",
    "fraction_text",
    "dist_sq_range",
    "dot_range",
]
