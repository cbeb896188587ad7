r"""Rates of a recorded quantity $y$ (e.g. $1-\mathrm{corr}(W_t,W^{mm})$) against the step $t$: :func:`fit_power`
($y\approx Ct^{-p}$) and :func:`fit_log_rate` ($y\approx C(\log t)^{-q}$). The recorded rows themselves are
:mod:`.summary`'s (:class:`~attsvm.gd.summary.Recorder`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_log_rate", "fit_power"]


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
