"""Next-token prediction (Li, Huang, Ildiz, Rawat, Oymak, arXiv 2403.08081; THEORY §7): next-token data
(:mod:`.data`), its seeded generators (:mod:`.generate`) and the token-priority graphs (:mod:`.graph`).
numpy only."""

from __future__ import annotations

from .data import NTPData, from_mapping
from .generate import GRAPHS, VOCABS, ntp, plant_cycle, vocabulary
from .graph import (
    GraphConstraints,
    PriorityGraphs,
    graph_constraints,
    priority_graphs,
    strongly_connected_components,
    top_scc_mask,
)

__all__ = [
    "GRAPHS",
    "VOCABS",
    "GraphConstraints",
    "NTPData",
    "PriorityGraphs",
    "from_mapping",
    "graph_constraints",
    "ntp",
    "plant_cycle",
    "priority_graphs",
    "strongly_connected_components",
    "top_scc_mask",
    "vocabulary",
]
