r"""Per-iterate summaries and memory-bounded trajectories.

Summaries of an iterate with log-softmax $\log s$ (B,N,T):

* ``selection`` $\arg\max_ts_{it}$; ``max_softmax`` $\max_ts_{it}$;
* ``stuck``: the selection differs from $\mathrm{opt}_i$ while the softmax is *saturated*,
  $1-\max_ts_{it}<10^{-8}$ (:data:`SATURATED`), computed as $\log\sum_{t\ne\arg\max}s_{it}<\log10^{-8}$ so
  that it is exact far past underflow (such an input contributes only $e^{-c\|W\|}$ to the gradient).

A :class:`Recorder` preallocates $R=\lfloor\text{steps}/k\rfloor+1$ rows (iterates $0,k,2k,\dots$) on the
device and fills them; memory is $O(R\cdot B\cdot N)$ (plus $O(R\cdot B\cdot d^2)$ with ``record_params``).

Rates of a recorded quantity $y$ (e.g. $1-\mathrm{corr}(W_t,W^{mm})$) against the step $t$:
:func:`fit_power` ($y\approx Ct^{-p}$) and :func:`fit_log_rate` ($y\approx C(\log t)^{-q}$).
"""

from __future__ import annotations

import math

import numpy as np
import torch

SATURATED = 1e-8


def summaries(logs: torch.Tensor, opt: torch.Tensor):
    """``(selection, max_softmax, stuck, log(1 - max s))`` of a log-softmax (B,N,T)."""
    mx, sel = logs.max(dim=-1)
    rest = logs.scatter(-1, sel.unsqueeze(-1), float("-inf")).logsumexp(-1)
    stuck = (sel != opt) & (rest < math.log(SATURATED))
    return sel, torch.exp(mx), stuck, rest


class Recorder:
    """Fills trajectory rows every ``every`` steps (iterate 0 included)."""

    def __init__(self, every: int, steps: int, B: int, N: int, names: list[str], param_shapes: dict, like):
        self.every = int(every)
        R = steps // self.every + 1
        kw = {"dtype": like.dtype, "device": like.device}
        self.rows = 0
        self.data: dict[str, torch.Tensor] = {
            "step": torch.zeros(R, dtype=torch.int64),
            "loss": torch.zeros(R, B, **kw),
            "norm": torch.zeros(R, B, **kw),
            "selection": torch.zeros(R, B, N, dtype=torch.int64, device=like.device),
            "max_softmax": torch.zeros(R, B, N, **kw),
            "stuck": torch.zeros(R, B, N, dtype=torch.bool, device=like.device),
        }
        for name in names:
            self.data[f"corr:{name}"] = torch.zeros(R, B, **kw)
        for k, shp in param_shapes.items():
            self.data[k] = torch.zeros(R, B, *shp, **kw)

    def due(self, k: int) -> bool:
        return k % self.every == 0

    def add(self, k: int, values: dict[str, torch.Tensor]) -> None:
        r = self.rows
        self.data["step"][r] = k
        for key, val in values.items():
            if key in self.data:
                self.data[key][r] = val
        self.rows += 1

    def result(self) -> dict[str, np.ndarray]:
        """Rows filled so far as numpy arrays (a run where every data set stopped early has fewer rows)."""
        return {k: v[: self.rows].cpu().numpy() for k, v in self.data.items()}


def fit_power(t: np.ndarray, y: np.ndarray) -> float:
    r"""Least-squares exponent $p$ of $y\approx Ct^{-p}$ (log-log fit over positive entries; NaN if fewer than 2)."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    ok = (t > 0) & (y > 0) & np.isfinite(y)
    return _decay_exponent(np.log(t[ok]), y[ok])


def fit_log_rate(t: np.ndarray, y: np.ndarray) -> float:
    r"""Least-squares exponent $q$ of $y\approx C(\log t)^{-q}$ (fit of $\log y$ against $\log\log t$)."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    ok = (t > 1) & (y > 0) & np.isfinite(y)
    return _decay_exponent(np.log(np.log(t[ok])), y[ok])


def _decay_exponent(x: np.ndarray, y: np.ndarray) -> float:
    r"""Minus the least-squares slope of $\log y$ against ``x`` (NaN with fewer than two points)."""
    return float("nan") if x.size < 2 else float(-np.polyfit(x, np.log(y), 1)[0])
