r"""The result of a GD run (:class:`GDResult`) and its stop reasons, as plain data (numpy; no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import html
from ..tables import CDOTS, Math, keep, norm_label, number, vector_math
from .init import PARAMETERISATIONS
from .spec import Settings

STOP_REASONS = ("steps", "underflow", "target_corr", "non-finite")
#: what a ``non-finite`` stop found, by code (0: nothing)
NONFINITE = ("", "parameters overflowed", "logits overflowed", "loss overflowed")


@dataclass(repr=False)
class GDResult:
    """Final iterate and summaries (numpy, leading batch axis B; N = flat rows, one per query)."""

    param: str
    algo: str
    W: np.ndarray | None  # (B,d,d); K Q^T for KQ, diag(k q) for diag; None for p / vp
    K: np.ndarray | None  # (B,d,m) for KQ; the diagonal factor k (B,d) for diag
    Q: np.ndarray | None  # (B,d,m) for KQ; the diagonal factor q (B,d) for diag
    p: np.ndarray | None
    v: np.ndarray | None
    loss: np.ndarray  # (B,)
    norm: np.ndarray  # (B,) ||W||_F (or ||p||)
    selection: np.ndarray  # (B,N)
    log_softmax: np.ndarray  # (B,N,T)
    max_softmax: np.ndarray  # (B,N)
    stuck: np.ndarray  # (B,N) bool
    steps: np.ndarray  # (B,) int
    stop_reason: list[str]
    trajectory: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    lr: np.ndarray | None = None  # (B,) step sizes used
    nonfinite: list[str] = field(default_factory=list)  # (B,) what a "non-finite" stop found ("" otherwise)
    nonfinite_step: np.ndarray | None = None  # (B,) int: the update that produced it (-1 otherwise)
    settings: Settings | None = None  # how the steps were taken (algo, norm, schedule, Adam's betas / eps, ...)
    kernel: str = "torch"  # what computed them: "torch" or "fused" (module docstring, "Kernels")
    W1: np.ndarray | None = None  # (B,d,d) twolayer: layer 1 (W is then W2, the top layer)
    W2: np.ndarray | None = None  # (B,d,d) twolayer: layer 2 (the same array as W)

    @property
    def B(self) -> int:
        return int(self.loss.shape[0])

    def params(self, b: int) -> dict[str, np.ndarray]:
        """Parameters of run ``b`` as a dict (keys W, K, Q, p, v, W1, W2 when present)."""
        keys = ("W", "K", "Q", "p", "v", "W1", "W2")
        return {k: getattr(self, k)[b] for k in keys if getattr(self, k) is not None}

    # ------------------------------------------------------------------ display
    def _stop_text(self, b: int) -> str:
        why = self.stop_reason[b]
        if why == "non-finite" and self.nonfinite and self.nonfinite[b]:
            at = "" if self.nonfinite_step is None else f" at update {int(self.nonfinite_step[b])}"
            why += f" ({self.nonfinite[b]}{at})"
        return why

    def __repr__(self) -> str:
        def short(a: Any) -> str:
            head = ", ".join(str(number(x, 6)) for x in np.asarray(a).ravel()[:4])
            return "[" + head + (", ..." if self.B > 4 else "") + "]"

        return (
            f"GDResult(param={self.param!r}, algo={self.algo!r}, B={self.B}, steps={short(self.steps)}, "
            f"stop_reason={self.stop_reason[:4]}{' ...' if self.B > 4 else ''}, loss={short(self.loss)}, "
            f"norm={short(self.norm)})"
        )

    def _repr_html_(self) -> str:
        r"""Parameterisation and algorithm; for one run its steps, stop reason, final loss, norm, the selection
        reached ($\arg\max_t s_{it}$ per query), stuck queries and the final iterate abbreviated; for a batch a
        table with one row per run (abbreviated)."""
        nl = norm_label("F", "W") if PARAMETERISATIONS[self.param].attention else norm_label("2", "p")
        rows = []
        for b in keep(self.B, 8):
            if b is None:
                rows.append([CDOTS] * 8)
                continue
            rows.append(
                [
                    b,
                    int(self.steps[b]),
                    self._stop_text(b),
                    float(self.loss[b]),
                    float(self.norm[b]),
                    Math(vector_math(self.selection[b], 4, 8)),
                    f"{int(np.sum(self.stuck[b]))} of {self.stuck.shape[-1]}",
                    float(np.min(self.max_softmax[b])),
                ]
            )
        if self.B == 1:
            r = rows[0]
            fields = [
                ("steps", r[1]),
                ("stop reason", r[2]),
                ("final loss", r[3]),
                ("norm", Math(nl + "=" + number(r[4], 6))),
                ("selection reached", r[5]),
                ("stuck queries", r[6]),
                ("smallest max softmax", r[7]),
                ("step size", None if self.lr is None else float(self.lr[0])),
                ("seconds", round(float(self.seconds), 3)),
            ]
            name = "W" if self.W is not None else ("p" if self.p is not None else None)
            sections = [] if name is None else [(f"final {name}", html.array(getattr(self, name)[0]))]
        else:
            fields = [("runs", self.B), ("seconds", round(float(self.seconds), 3))]
            head = ["run", "steps", "stop reason", "final loss", Math(nl), "selection reached", "stuck", "min max s"]
            sections = [("runs", html.rows_table(head, rows))]
        return html.card("GDResult", f"parameterisation {self.param}, algorithm {self.algo}", fields, sections)
