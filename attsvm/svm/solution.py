r"""The result object every convex program of :mod:`attsvm.svm` returns.

A solution is never trusted without its residuals: ``kkt`` holds named KKT residuals (primal
feasibility, dual feasibility, complementary slackness, stationarity, and program-specific ones),
``certificate`` says how optimality was proved (``kind``: ``"exact-rational"``, ``"arb-enclosure"``,
``"duality-gap"``, ``"kkt-float"``, ...) and whether the proof went through (``verified``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..serial import jsonable as _serial_jsonable


@dataclass
class SVMSolution:
    """Solution of one attention SVM (single data set).

    ``margins`` (N, T): $\\langle W, A_{it}\\rangle$ with NaN at $(i,\\alpha_i)$ and at invisible tokens;
    ``multipliers`` (N, T): dual variables $\\lambda_{it}$ (0 at $(i,\\alpha_i)$);
    ``support``: list of $(i,t)$ with margin within ``tol('active')`` of 1 (the SVM-neighbours $\\mathcal T_i$);
    ``farkas`` (N, T): when infeasible, $\\mu\\ge0$, $\\mu\\ne0$ with $\\sum\\mu_{it}A_{it}=0$.
    """

    status: str  # "optimal" | "infeasible"
    norm: str  # "fro" | "nuc" | "lq" | "l2" (prompt/head)
    program: str  # "attsvm" | "gensvm" | "seq" | "causal" | "prompt" | "head" | "relaxed"
    alpha: np.ndarray | None
    W: np.ndarray | None
    objective: float | None
    margins: np.ndarray | None = None
    multipliers: np.ndarray | None = None
    support: list[tuple[int, int]] = field(default_factory=list)
    locally_optimal: bool | None = None
    delta: float | None = None
    kkt: dict[str, float] = field(default_factory=dict)
    certificate: dict[str, Any] = field(default_factory=dict)
    farkas: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def margin_min(self) -> float | None:
        if self.margins is None:
            return None
        return float(np.nanmin(self.margins))

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"

    def to_json(self) -> dict[str, Any]:
        """The ``attsvm solve --json`` object."""
        tl = lambda a: None if a is None else np.asarray(a).tolist()  # noqa: E731
        out: dict[str, Any] = {
            "status": self.status,
            "norm": self.norm,
            "program": self.program,
            "alpha": tl(self.alpha),
            "W": tl(self.W),
            "objective": self.objective,
            "margin_min": self.margin_min,
            "support": [[int(i), int(t)] for i, t in self.support],
            "locally_optimal": self.locally_optimal,
            "delta": self.delta,
            "kkt": {k: float(v) for k, v in self.kkt.items()},
            "certificate": _json(self.certificate),
        }
        if self.status == "infeasible":
            out["farkas"] = tl(self.farkas)
        for k, v in self.extra.items():
            out[k] = _json(v)
        return out


def _json(x: Any) -> Any:
    """Strict JSON values (non-finite floats become null)."""
    return _serial_jsonable(x, nonfinite="null")
