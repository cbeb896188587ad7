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

from .. import html
from ..norms import entrywise_norm, frobenius_norm, matrix_norms, nuclear_norm
from ..serial import jsonable
from ..tables import Math, matrix_tex, norm_label, number, vector_math

#: ``objective`` of each program (the optimal value of the program as it is solved; = the dual value)
OBJECTIVE_FORMULAS = {
    "fro": "||W||_F^2 = 1^T lambda",
    "nuc": "||W||_* = 1^T lambda",
    "lq": "||W||_q = 1^T lambda",
    "l1": "||W||_1 = 1^T lambda",
    "linf": "||W||_max = 1^T lambda",
    "spec": "||W||_2 = 1^T lambda",
    "prompt": "||p||_2^2 = 1^T lambda",
    "relaxed": "||p||_2^2 = b^T lambda",
    "head": "||v||_2^2 = 1^T lambda",
}
#: the printed name of the minimised norm, by ``norm`` (and by program for the vector programs)
NORM_LABELS = {"fro": "||W||_F", "nuc": "||W||_*", "lq": "||W||_q", "l1": "||W||_1", "linf": "||W||_max",
               "spec": "||W||_2", "prompt": "||p||_2", "relaxed": "||p||_2", "head": "||v||_2"}  # fmt: skip
#: the same norms for the printer (:func:`attsvm.tables.norm_label`): (kind, variable)
_NORM_MATH = {"fro": ("F", "W"), "nuc": ("*", "W"), "lq": ("q", "W"), "l1": ("1", "W"), "linf": (r"\max", "W"),
              "spec": ("2", "W"), "prompt": ("2", "p"), "relaxed": ("2", "p"), "head": ("2", "v")}  # fmt: skip
#: entrywise norms the printer has no kind for: $\|W\|$ with this subscript
_SUBSCRIPT = {"1": "_1", r"\max": r"_{\max}"}


def _norm_tex(kind: str, var: str) -> str:
    r"""$\|W\|_F$, $\|W\|_1$, $\|W\|_{\max}$, ... for the HTML/LaTeX displays."""
    if kind in _SUBSCRIPT:
        return norm_label("", var) + _SUBSCRIPT[kind]
    return norm_label(kind, var)


@dataclass(repr=False)
class SVMSolution:
    """Solution of one attention SVM (single data set).

    ``margins`` (N, T): $\\langle W, A_{it}\\rangle$ with NaN at $(i,\\alpha_i)$ and at invisible tokens;
    ``multipliers`` (N, T): dual variables $\\lambda_{it}$ (0 at $(i,\\alpha_i)$);
    ``support``: list of $(i,t)$ with margin within ``tol('active')`` of 1 (the SVM-neighbours $\\mathcal T_i$);
    ``farkas`` (N, T): when infeasible, $\\mu\\ge0$, $\\mu\\ne0$ with $\\sum\\mu_{it}A_{it}=0$.
    """

    status: str  # "optimal" | "infeasible"
    norm: str  # "fro" | "nuc" | "lq" | "l1" | "linf" | "spec" | "l2" (prompt/head)
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
        """The smallest margin; None when there is none (infeasible, or no constraints)."""
        if self.margins is None:
            return None
        m = np.asarray(self.margins, dtype=float)
        m = m[~np.isnan(m)]
        return float(m.min()) if m.size else None

    @property
    def _key(self) -> str:
        return self.program if self.program in ("prompt", "relaxed", "head") else self.norm

    @property
    def norm_kind(self) -> str:
        """``"fro"``, ``"nuc"``, ``"lq(q)"``, ``"l1"``, ``"linf"``, ``"spec"`` or ``"l2"``."""
        if self.norm == "lq" and self.extra.get("q") is not None:
            return f"lq({float(self.extra['q']):g})"
        return self.norm

    @property
    def norm_label(self) -> str:
        """The printed name of the minimised norm (``||W||_F``, ``||W||_*``, ``||W||_q``, ``||W||_1``, ``||W||_max``,
        ``||W||_2`` (spectral), ``||p||_2``, ``||v||_2``)."""
        return NORM_LABELS.get(self._key, f"||W|| ({self.norm})")

    @property
    def objective_formula(self) -> str:
        """What ``objective`` is, as a formula (``OBJECTIVE_FORMULAS``)."""
        return OBJECTIVE_FORMULAS.get(self._key, "||W||_F^2 = 1^T lambda")

    @property
    def norm_value(self) -> float | None:
        r"""The minimised norm of the solution, evaluated from it ($\|W\|_F$, $\|W\|_\star$, $\|W\|_q$,
        $\|W\|_1$, $\|W\|_{\max}$, the spectral $\|W\|_2$, $\|p\|_2$ or $\|v\|_2$); None when infeasible (or not a
        float64)."""
        if self.status != "optimal":
            return None
        if self._key in ("prompt", "relaxed", "head"):
            u = self.extra.get("v" if self._key == "head" else "p")
            val = None if u is None else frobenius_norm(u)
        elif self.W is None:
            val = None
        elif self.norm == "nuc":
            val = nuclear_norm(self.W)
        elif self.norm == "lq":
            val = entrywise_norm(self.W, float(self.extra.get("q", 2.0)))
        elif self.norm in ("l1", "linf", "spec"):
            val = float(matrix_norms(self.W, self.norm))
        else:
            val = frobenius_norm(self.W)
        return val if val is not None and np.isfinite(val) else None

    @property
    def norm_sq(self) -> float | None:
        """The squared norm, where it is the program's objective (Frobenius, Gen-SVM, prompt, relaxed, head): the
        ``objective``; None for the norm programs (nuclear, ℓq, ℓ1, ℓ∞, spectral) and where
        infeasible/unrepresentable."""
        if self.status != "optimal" or self.norm not in ("fro", "l2"):
            return None
        return self.objective

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"

    # ------------------------------------------------------------------ display
    @property
    def _variable(self) -> tuple[str, np.ndarray | None]:
        """The solution's variable: ``("W", W)``, or ``("p", p)`` / ``("v", v)`` for the vector programs."""
        if self._key in ("prompt", "relaxed", "head"):
            name = "v" if self._key == "head" else "p"
            u = self.extra.get(name)
            return name, None if u is None else np.asarray(u, dtype=float)
        return "W", None if self.W is None else np.asarray(self.W, dtype=float)

    @property
    def _certificate_text(self) -> str:
        c = self.certificate or {}
        if not c:
            return "none (float KKT residuals only)"
        state = {True: "verified", False: "NOT verified"}.get(c.get("verified"), "not checked")
        return f"{c.get('kind', '?')}, {state}"

    def __repr__(self) -> str:
        nv = self.norm_value
        norm = "" if nv is None else f", {self.norm_label}={nv:.6g}"
        mm = self.margin_min
        margin = "" if mm is None else f", margin_min={mm:.6g}"
        return (
            f"SVMSolution(program={self.program!r}, norm={self.norm_kind!r}, status={self.status!r}{norm}{margin}, "
            f"certificate={self._certificate_text!r}, support={len(self.support)})"
        )

    def _repr_html_(self) -> str:
        """Program and norm, status, the norm's value, the smallest margin, the certificate, the active
        constraints, the largest KKT residual, and the solution (or the Farkas multipliers) abbreviated."""
        kind, var = _NORM_MATH.get(self._key, ("F", "W"))
        nv = self.norm_value
        worst = max(self.kkt.items(), key=lambda kv: abs(kv[1])) if self.kkt else None
        constraints = None if self.margins is None else int(np.sum(~np.isnan(np.asarray(self.margins, dtype=float))))
        objective = None if self.objective is None else f"{number(self.objective, 6)} ({self.objective_formula})"
        fields = [
            ("status", html.badge(self.status)),
            ("norm", None if nv is None else Math(_norm_tex(kind, var) + "=" + number(nv, 6))),
            ("objective", objective),
            ("smallest margin", self.margin_min),
            ("certificate", self._certificate_text),
            ("active constraints", f"{len(self.support)}" + ("" if constraints is None else f" of {constraints}")),
            ("largest KKT residual", None if worst is None else f"{number(worst[1])} ({worst[0]})"),
            ("locally optimal", self.locally_optimal),
            ("neighbour gap delta", self.delta),
            ("alpha", None if self.alpha is None else Math(vector_math(self.alpha, 4, 8))),
        ]
        name, val = self._variable
        sections = []
        if val is not None:
            sections.append((name, html.array(val)))
        if self.status == "infeasible" and self.farkas is not None:
            sections.append(("Farkas multipliers mu (infeasibility certificate)", html.array(self.farkas)))
        return html.card("SVMSolution", f"{self.program}, norm {self.norm_kind}", fields, sections)

    def _repr_latex_(self) -> str | None:
        r"""$W=\begin{pmatrix}\cdots\end{pmatrix}$ (abbreviated) and the norm's value; None when infeasible."""
        name, val = self._variable
        if val is None:
            return None
        kind, var = _NORM_MATH.get(self._key, ("F", "W"))
        nv = self.norm_value
        tail = "" if nv is None else r",\qquad " + _norm_tex(kind, var) + "=" + number(nv, 6)
        return "$$" + name + "=" + matrix_tex(val, 4, 6, 6) + tail + "$$"

    def to_json(self) -> dict[str, Any]:
        """The ``attsvm solve --json`` object."""
        tl = lambda a: None if a is None else np.asarray(a).tolist()  # noqa: E731
        out: dict[str, Any] = {
            "status": self.status,
            "norm": self.norm_value,
            "norm_sq": self.norm_sq,
            "norm_kind": self.norm_kind,
            "program": self.program,
            "alpha": tl(self.alpha),
            "W": tl(self.W),
            "objective": self.objective,
            "objective_formula": self.objective_formula,
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
    return jsonable(x, nonfinite="null")
