r"""The summaries of an iterate — **one definition**, in numpy, for both kernels (torch and fused), for a recorded
row and for a result's final fields alike, so that recording a trajectory changes no reported number.

Of an iterate with log-softmax $\log s$ (B,N,T), outputs $u$ (B,N) and primary parameter $P$ ($W$, $KQ^\top$,
$\mathrm{diag}(k\odot q)$, or $p$):

* ``loss`` $\frac1N\sum_i\ell(u_i)$ (:func:`attsvm.model.loss_value`; ``nll``: $-\log u_i$);
* ``norm`` $\|P\|_F$ (scale-safe, :func:`attsvm.norms.frobenius_norm`);
* ``selection`` $\arg\max_ts_{it}$; ``max_softmax`` $\max_ts_{it}$;
* ``stuck``: the selection differs from $\mathrm{opt}_i$ while the softmax is *saturated*,
  $1-\max_ts_{it}<10^{-8}$ (:data:`SATURATED`), computed as $\log\sum_{t\ne\arg\max}s_{it}<\log10^{-8}$ so
  that it is exact far past underflow (such an input contributes only $e^{-c\|W\|}$ to the gradient);
* ``corr:NAME`` $\mathrm{corr}(P,T)$ per target (:func:`attsvm.model.corr`, scale-safe).

A :class:`Recorder` preallocates $R=\lfloor\text{steps}/k\rfloor+1$ rows (iterates $0,k,2k,\dots$) and fills them;
memory is $O(R\cdot B\cdot N)$ (plus $O(R\cdot B\cdot d^2)$ with ``record_params``,
:func:`~attsvm.gd.spec.trajectory_bytes`).
"""

from __future__ import annotations

import math

import numpy as np

from ..model import corr, loss_value
from ..norms import frobenius_norm

__all__ = ["SATURATED", "Recorder", "fields", "record_row", "selection_stats"]

SATURATED = 1e-8


def selection_stats(logs: np.ndarray, opt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``(selection, max_softmax, stuck)`` of a log-softmax (B,N,T) (module docstring)."""
    sel = np.argmax(logs, axis=-1)
    mx = np.take_along_axis(logs, sel[..., None], -1)[..., 0]
    rest = logs.copy()
    np.put_along_axis(rest, sel[..., None], -np.inf, -1)
    top = np.max(rest, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        lse = np.where(np.isfinite(top[..., 0]), top[..., 0] + np.log(np.sum(np.exp(rest - top), -1)), -np.inf)
    return sel, np.exp(mx), (sel != opt) & (lse < math.log(SATURATED))


def fields(logs: np.ndarray, u: np.ndarray, primary: np.ndarray, opt: np.ndarray, loss: str) -> dict[str, np.ndarray]:
    """The summaries ``loss``, ``norm``, ``selection``, ``log_softmax``, ``max_softmax``, ``stuck`` of one iterate
    (module docstring): a result's final fields, and (without ``log_softmax``) a record row's."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        lv = -np.log(u) if loss == "nll" else loss_value(u, loss)
    sel, mxs, stuck = selection_stats(logs, opt)
    B = primary.shape[0]
    return {
        "loss": np.mean(lv, axis=-1),
        "norm": frobenius_norm(primary.reshape(B, -1), axis=-1),
        "selection": sel,
        "log_softmax": logs,
        "max_softmax": mxs,
        "stuck": stuck,
    }


def record_row(
    values: dict[str, np.ndarray],
    primary: np.ndarray,
    targets: dict[str, np.ndarray],
    params: dict[str, np.ndarray] | None = None,
    with_W: bool = False,
) -> dict[str, np.ndarray]:
    """A trajectory row: the :func:`fields` ``values`` of the iterate, ``corr:NAME`` against each target (the
    primary parameter's shape), and with ``params`` the parameters (``with_W``: the primary $W$ too)."""
    row = dict(values)
    nd = primary.ndim - 1
    for name, t in targets.items():
        row[f"corr:{name}"] = corr(primary, t, ndim=nd)
    if params is not None:
        row.update(params)
        if with_W:
            row["W"] = primary
    return row


class Recorder:
    """Fills trajectory rows every ``every`` steps (iterate 0 included), numpy arrays preallocated for all rows."""

    def __init__(self, every: int, steps: int, B: int, N: int, names: list[str], param_shapes: dict) -> None:
        self.every = int(every)
        R = steps // self.every + 1
        self.rows = 0
        self.data: dict[str, np.ndarray] = {
            "step": np.zeros(R, dtype=np.int64),
            "loss": np.zeros((R, B)),
            "norm": np.zeros((R, B)),
            "selection": np.zeros((R, B, N), dtype=np.int64),
            "max_softmax": np.zeros((R, B, N)),
            "stuck": np.zeros((R, B, N), dtype=bool),
        }
        for name in names:
            self.data[f"corr:{name}"] = np.zeros((R, B))
        for k, shp in param_shapes.items():
            self.data[k] = np.zeros((R, B, *shp))

    def due(self, k: int) -> bool:
        """Whether iterate ``k`` is recorded."""
        return k % self.every == 0

    def add(self, k: int, values: dict[str, np.ndarray]) -> None:
        """Fill the next row with iterate ``k``'s ``values`` (keys this recorder keeps; others ignored)."""
        r = self.rows
        self.data["step"][r] = k
        for key, val in values.items():
            if key in self.data:
                self.data[key][r] = val
        self.rows += 1

    def result(self) -> dict[str, np.ndarray]:
        """Rows filled so far (a run where every data set stopped early has fewer rows)."""
        return {k: v[: self.rows].copy() for k, v in self.data.items()}
