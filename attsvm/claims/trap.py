r"""Stuck inputs and traps of GD on $W$ (THEORY §4 ``gd-global-equal-scores``, §5 "Stuck inputs").

An input is *wrong* at an iterate when its selection $\alpha_i=\arg\max_ts_{it}\ne\mathrm{opt}_i$. With $W'$ the
Att-SVM solution of the *other* inputs (selection opt), a wrong input's *deficit* is

.. math:: \mathrm{deficit}_i=\max_{t\ne\mathrm{opt}_i}(x_{it}-x_{i,\mathrm{opt}_i})^\top W'z_i .

Along $R\,W'/\|W'\|$ its $s_{i,\mathrm{opt}_i}\approx e^{-R\rho\,\mathrm{deficit}_i}$ while the others' gradient
weights are $e^{-R\rho}$ ($\rho=1/\|W'\|$), so its share of the gradient is $e^{-R\rho(\mathrm{deficit}_i-1)}$: a
**trap** (self-consistent, no escape) iff every deficit exceeds 1.

* :func:`trap_analysis` — the :class:`Trap` of one iterate; :func:`trap_sets` — every subset that could trap;
* :func:`trap_sweep` — batched engine runs from several initial points, each judged by :func:`trap_margin`;
* :func:`trap_replay` — a trapped end state replayed at 50 digits (:func:`attsvm.highprec.replay`) next to
  the engine, with the wrong inputs' gradient shares (:func:`attsvm.highprec.gradient_shares`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from ..data import Dataset
from ..model import corr


@dataclass
class Trap:
    r"""Stuck-input analysis at an iterate: ``wrong`` inputs, ``W_rest`` ($W'$ of the others, None when
    infeasible), one ``deficit`` per wrong input, ``corr_rest`` $=\mathrm{corr}(W,W')$, ``corr_global``
    $=\mathrm{corr}(W,W^{mm})$; ``trapped``: some wrong input, $W'$ exists and every deficit $>1$."""

    wrong: list[int]
    W_rest: np.ndarray | None
    deficit: list[float]
    corr_rest: float
    corr_global: float

    @property
    def trapped(self) -> bool:
        return bool(self.wrong) and self.W_rest is not None and min(self.deficit) > 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "wrong_inputs": self.wrong,
            "deficit": self.deficit,
            "corr_W_rest": self.corr_rest,
            "corr_W_mm": self.corr_global,
            "trapped": self.trapped,
        }


def _deficits(ds: Dataset, Wr: np.ndarray, inputs) -> list[float]:
    opt = ds.opt
    return [
        max(float((ds.X[i, t] - ds.X[i, opt[i]]) @ Wr @ ds.Z[i]) for t in range(ds.T) if t != opt[i]) for i in inputs
    ]


def _rest(ds: Dataset, wrong) -> np.ndarray | None:
    keep = np.setdiff1d(np.arange(ds.n), wrong)
    if keep.size == 0:
        return None
    from ..svm.frobenius import wmm  # the solvers load on first use

    return wmm(Dataset(ds.X[keep], ds.Y[keep], ds.Z[keep], ds.v, alpha=ds.opt[keep]))


def trap_analysis(ds: Dataset, W: np.ndarray, log_s: np.ndarray) -> Trap:
    """:class:`Trap` of one (cross-attention) data set at iterate ``W`` with log-softmax ``log_s`` (n,T)."""
    wrong = [int(i) for i in np.nonzero(np.argmax(log_s, axis=-1) != ds.opt)[0]]
    from ..svm.frobenius import wmm

    Wmm = wmm(ds.with_alpha(None) if ds.alpha is not None else ds)
    cg = float(corr(W, Wmm)) if Wmm is not None else float("nan")
    if not wrong:
        return Trap([], Wmm, [], cg, cg)
    Wr = _rest(ds, wrong)
    if Wr is None:
        return Trap(wrong, None, [], float("nan"), cg)
    return Trap(wrong, Wr, _deficits(ds, Wr, wrong), float(corr(W, Wr)), cg)


def trap_sets(ds: Dataset) -> list[tuple[list[int], list[float]]]:
    r"""Every *trap set* of one data set: a non-empty proper subset $S$ of inputs such that $W'$ of the others
    exists and every $i\in S$ has deficit $>1$. Returns ``[(S, deficits), ...]`` ($2^n-2$ small solves)."""
    out = []
    for size in range(1, ds.n):
        for S in combinations(range(ds.n), size):
            Wr = _rest(ds, list(S))
            if Wr is None:
                continue
            dz = _deficits(ds, Wr, S)
            if min(dz) > 1.0:
                out.append((list(S), dz))
    return out


def trap_margin(
    ds: Dataset, W: np.ndarray, ls_end: np.ndarray, ls_mid: np.ndarray, norm: float, corr_trap: float, log_s_trap: float
) -> tuple[float | None, bool, Trap]:
    r"""``(margin, trapped, Trap)`` of one run ending at ``W`` (log-softmax ``ls_end``; ``ls_mid`` halfway).

    Trapped: a :class:`Trap` with $\mathrm{corr}(W,W')\ge$ ``corr_trap`` and $>\mathrm{corr}(W,W^{mm})$, every
    wrong input's $\log s_{i,\mathrm{opt}_i}<$ ``log_s_trap`` and falling; margin $1-\min\mathrm{deficit}<0$.
    Every input on its optimal token: margin $1+\tanh(\min_i\text{logit gap}/\max(1,\|W\|))>1$. Otherwise
    $\max(|1-\min\mathrm{deficit}|,10^{-3})$; ``None`` when undecidable ($W'$ or $W^{mm}$ missing)."""
    t = trap_analysis(ds, W, ls_end)
    opt = ds.opt
    if not t.wrong:
        top = ls_end.copy()
        np.put_along_axis(top, opt[:, None], -np.inf, axis=-1)
        gap = np.take_along_axis(ls_end, opt[:, None], -1)[:, 0] - top.max(-1)
        return 1.0 + float(np.tanh(gap.min() / max(1.0, norm))), False, t
    if t.W_rest is None or not np.isfinite(t.corr_global):
        return None, False, t
    lso_end = np.array([ls_end[i, opt[i]] for i in t.wrong])
    lso_mid = np.array([ls_mid[i, opt[i]] for i in t.wrong])
    trapped = (
        t.trapped
        and t.corr_rest >= corr_trap
        and t.corr_rest > t.corr_global
        and bool(np.all(lso_end < log_s_trap))
        and bool(np.all(lso_end < lso_mid))
    )
    m = 1.0 - min(t.deficit) if t.deficit else 0.0
    return (m if trapped else max(abs(m), 1e-3)), trapped, t


def trap_sweep(
    batch: Dataset, W0: np.ndarray, *, algo: str, lr: Any, steps: int, corr_trap: float, log_s_trap: float
) -> list[dict[str, Any]]:
    r"""Run ``algo`` (``ngd``/``gd``, ``lr`` a number or ``"1/L"``) for ``steps`` steps from each initial point of
    ``W0`` (k, d, d) on every data set of ``batch`` — one batched :func:`attsvm.gd.run` of B·k runs, halved to
    read the log-softmax at ``steps//2`` — and judge each run with :func:`trap_margin`. Returns per data set
    ``ok`` (no trapped run; None if undecidable), ``margin`` and the detail of its worst run (with ``W_end``)."""
    from ..gd import run

    B, k = batch.batch_size, W0.shape[0]
    big = Dataset.stack([batch[b] for b in range(B) for _ in range(k)])
    Ws = np.broadcast_to(W0[None], (B, k, *W0.shape[1:])).reshape(B * k, *W0.shape[1:])
    mid = int(steps) // 2
    r1 = run(big, param="W", algo=algo, lr=lr, steps=mid, init=Ws)
    r2 = run(big, param="W", algo=algo, lr=lr, steps=int(steps) - mid, init=r1.W)
    out: list[dict[str, Any]] = []
    for b in range(B):
        ds = batch[b]
        best: dict[str, Any] = {"ok": None, "margin": None}
        for j in range(k):
            q = b * k + j
            m, _, t = trap_margin(
                ds, r2.W[q], r2.log_softmax[q], r1.log_softmax[q], float(r2.norm[q]), corr_trap, log_s_trap
            )
            if m is None:
                continue
            if best["margin"] is None or m < best["margin"]:
                best = {
                    "ok": m >= 0,
                    "margin": float(m),
                    "init": j,
                    "init_norm": float(np.linalg.norm(W0[j])),
                    "norm_end": float(r2.norm[q]),
                    "W_end": r2.W[q].tolist(),
                    **t.to_json(),
                }
        out.append(best)
    return out


def trap_replay(ds: Dataset, W_end: Any, wrong: list[int], *, algo: str, lr: Any, steps: int) -> dict[str, Any]:
    r"""Replay ``steps`` steps from the float64 end state ``W_end`` at 50 digits (:func:`attsvm.highprec.replay`,
    the engine's step size) next to the engine; re-check the trap at the replayed state. Returns ``rel`` (relative
    difference of the two end points), the ``wrong`` inputs' $\log_{10}$ gradient shares at the start and end
    of the replay, whether they fell, the deficits and whether the trap survives."""
    from .. import highprec as hp
    from ..gd import run

    W = np.asarray(W_end, dtype=np.float64)
    ref = run(ds, param="W", algo=algo, lr=lr, steps=int(steps), init=W)
    rep = hp.replay(ds, W, param="W", algo=algo, lr=float(ref.lr[0]), steps=int(steps))
    Wm = rep.array("W")
    rel = float(np.linalg.norm(Wm - ref.W[0]) / np.linalg.norm(ref.W[0]))
    start = [float(x) for x in hp.gradient_shares(ds, W)]
    end = [float(x) for x in hp.gradient_shares(ds, rep.final["W"])]
    t = trap_analysis(ds, Wm, ref.log_softmax[0])
    return {
        "replay_steps": int(steps),
        "mp_vs_float64_rel": rel,
        "log10_share_start": [start[i] for i in wrong],
        "log10_share_end": [end[i] for i in wrong],
        "share_falling": bool(all(end[i] < start[i] for i in wrong)),
        "deficit": t.deficit,
        "trapped": bool(t.trapped and t.wrong == list(wrong)),
    }
