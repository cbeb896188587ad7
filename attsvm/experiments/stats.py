"""Statistics the specs report: :func:`summary` of a set of runs, :func:`corr_trajectory` of a recorded
trajectory against its SVM targets."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def corr_trajectory(Ws: np.ndarray, targets: np.ndarray) -> np.ndarray:
    r"""$\mathrm{corr}(W_k^{(b)},W_\circ^{(b)})$ (:func:`attsvm.model.corr`) for a recorded trajectory ``Ws``
    (R, B, ...) and targets (B, ...). Zero matrices give NaN (no direction)."""
    from ..model import corr

    Ws = np.asarray(Ws, dtype=float)
    return corr(Ws, np.asarray(targets, dtype=float)[None], ndim=Ws.ndim - 2)


def summary(x: Iterable[float]) -> dict[str, float | int | None]:
    """mean / std / min / max / count of the finite values."""
    a = np.asarray(list(x), dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"mean": None, "std": None, "min": None, "max": None, "count": 0}
    return {
        "mean": float(a.mean()),
        "std": float(a.std()),
        "min": float(a.min()),
        "max": float(a.max()),
        "count": int(a.size),
    }
