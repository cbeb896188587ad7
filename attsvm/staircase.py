r"""Stage detection in a trajectory of component magnitudes: *staircases* (incremental learning).

Input: records $i=0,\dots,R-1$ at steps $s_0<s_1<\dots<s_{R-1}$ and nonnegative magnitudes $m_{ij}$ of $r$ components
(e.g. $|k_jq_j|$ of diagonal attention, or the singular values of $KQ^\top-K_0Q_0^\top$). The defining rule, with a
relative level $\theta$ (``rel``, default 0.1) and a stage resolution $\rho$ (``window``, default 0.1):

* **scale** $M=\max_{i,j}m_{ij}$ — the largest magnitude anywhere in the trajectory (for a growing trajectory the
  final largest); nothing is active when $M=0$. Multiplying every $m_{ij}$ by $c>0$ changes nothing.
* **active**: component $j$ is active at record $i$ iff $m_{ij}\ge\theta M$; ``active[i]`` counts them.
* **onset** $t_j$: the step $s_i$ of the first record where $j$ is active ($-1$: never).
* **stages**: with the elapsed times $\tau_j=t_j-s_0$ of the components that switch on, sorted
  $\tau_{(1)}\le\tau_{(2)}\le\dots\le\tau_{(K)}$, two consecutive onsets belong to **one stage** (they switch on
  *together*) iff $\tau_{(k+1)}-\tau_{(k)}\le\rho\,\tau_{(k)}$ — a relative window, so the rule does not depend on the
  unit of time and suits stages whose lengths grow like $\log(1/\alpha)$ (their ratios stay fixed as
  $\alpha\to0$). Two onsets at the same record are always together.
* **one at a time**: no two consecutive onsets together. **Stage lengths**: $\tau_{(1)}$, then
  $\tau_{(k+1)}-\tau_{(k)}$.

:func:`detect` applies the rule; :func:`affine_fit` fits onsets against $\log(1/\alpha)$ (least squares) and says how
far the points are from a line (plain numpy, float64). The trajectories of the claims ``kq-diag-incremental`` /
``kq-incremental-rank`` and of the experiment ``rank_dynamics``: :func:`small_start` (one direction at every scale
$\alpha$), :func:`recorded_run` (plain GD recorded on a geometric-ish grid, :func:`record_plan`) and
:func:`magnitudes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError

if TYPE_CHECKING:
    from .data import Dataset

#: default relative level $\theta$: active when at least this fraction of the largest magnitude
REL = 0.1
#: default stage resolution $\rho$: consecutive onsets closer than $\rho$ times the earlier elapsed time are together
WINDOW = 0.1
EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Staircase:
    """What :func:`detect` found (module docstring): ``onsets`` (r,) steps, -1 for a component that never switches
    on; ``order`` the components that switch on, by onset (ties by index); ``active`` (R,) the count per record;
    ``together`` the pairs ``(a, b)`` of consecutive components of ``order`` that switch on in one stage;
    ``stage_lengths`` (K,) elapsed steps of each stage; ``scale`` $M$; ``rel`` $\\theta$; ``window`` $\\rho$."""

    steps: np.ndarray
    onsets: np.ndarray
    order: np.ndarray
    active: np.ndarray
    together: tuple[tuple[int, int], ...]
    stage_lengths: np.ndarray
    scale: float
    rel: float
    window: float

    @property
    def one_at_a_time(self) -> bool:
        """No two components switch on in one stage."""
        return not self.together

    @property
    def stages(self) -> int:
        """The number of components that switch on."""
        return int(self.order.size)

    def separation(self) -> float:
        r"""The smallest $(\tau_{(k+1)}-\tau_{(k)})/\tau_{(k)}$ over consecutive onsets (inf with fewer than two, or
        when the earlier one is at the start): above ``window`` iff one at a time."""
        tau = self.onsets[self.order].astype(float) - float(self.steps[0])
        if tau.size < 2:
            return float("inf")
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(tau[:-1] > 0, np.diff(tau) / tau[:-1], np.where(np.diff(tau) > 0, np.inf, 0.0))
        return float(np.min(r))


def detect(magnitudes: np.ndarray, steps: np.ndarray, rel: float = REL, window: float = WINDOW) -> Staircase:
    """Apply the staircase rule (module docstring) to ``magnitudes`` (R, r) recorded at ``steps`` (R,)."""
    m = np.asarray(magnitudes, dtype=np.float64)
    s = np.asarray(steps)
    if m.ndim != 2 or s.ndim != 1 or m.shape[0] != s.shape[0] or m.shape[0] == 0:
        raise InputError(f"magnitudes must be (R, r) with steps (R,), got {m.shape} and {s.shape}")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise InputError("magnitudes must be finite and nonnegative")
    if np.any(np.diff(s) <= 0):
        raise InputError("steps must increase strictly")
    if not (0 < rel < 1) or not window >= 0:
        raise InputError(f"need 0 < rel < 1 and window >= 0, got rel={rel!r}, window={window!r}")
    M = float(m.max())
    on = m >= rel * M if M > 0 else np.zeros(m.shape, dtype=bool)
    first = np.argmax(on, axis=0)
    ever = on.any(axis=0)
    onsets = np.where(ever, s[first], -1).astype(np.int64)
    idx = np.flatnonzero(ever)
    order = idx[np.lexsort((idx, onsets[idx]))]
    tau = onsets[order].astype(np.float64) - float(s[0])
    together = tuple(
        (int(order[k]), int(order[k + 1]))
        for k in range(order.size - 1)
        if tau[k + 1] - tau[k] <= window * tau[k]  # equal onsets included (0 <= window * tau)
    )
    lengths = np.diff(np.concatenate([[0.0], tau])) if tau.size else np.zeros(0)
    return Staircase(
        steps=s, onsets=onsets, order=order, active=on.sum(axis=1), together=together, stage_lengths=lengths,
        scale=M, rel=float(rel), window=float(window),
    )  # fmt: skip


@dataclass(frozen=True)
class AffineFit:
    r"""Least-squares line $y\approx a+bx$: ``slope`` $b$, ``intercept`` $a$, ``residual`` the largest
    $|y-a-bx|$ relative to the spread $\max y-\min y$ (at least float64's epsilon times $\max|y|$; 0 for points
    on a line, up to rounding)."""

    slope: float
    intercept: float
    residual: float


def affine_fit(x: np.ndarray, y: np.ndarray) -> AffineFit:
    """Fit ``y`` against ``x`` (at least two distinct ``x``)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or np.unique(x).size < 2:
        raise InputError("affine_fit needs two 1-d arrays of one length with at least two distinct x")
    A = np.stack([np.ones_like(x), x], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    res = float(np.abs(y - a - b * x).max())
    spread = max(float(y.max() - y.min()), EPS * float(np.abs(y).max()))
    rel = res / spread if spread > 0 else 0.0  # spread 0: every y is 0, on the line y = 0
    return AffineFit(slope=float(b), intercept=float(a), residual=rel)


def incremental_rule(
    mags: list, steps: np.ndarray, alphas: tuple, rel: float = REL, window: float = WINDOW, lin: float = 0.1
) -> dict:
    r"""The incremental-learning rule of one run (claims ``kq-diag-incremental``, ``kq-incremental-rank``) on its
    magnitudes (R, r) at each initial scale of ``alphas`` (one array per scale, recorded at ``steps``): it passes
    when (i) at every scale the components switch on one at a time (:func:`detect`); (ii) the $K$ stages every
    scale reaches switch on the same components in the same order; (iii) each of these $K$ onsets is affine in
    $\log(1/\alpha)$ (:func:`affine_fit` residual at most ``lin``) with a positive slope. Undecided (``ok`` None)
    when no scale has two stages or some scale has none. Returns ``ok``, ``margin``
    ($\min(\text{separation}-\rho,\ \text{lin}-\text{residual})$; -1 for a wrong order or a slope $\le0$; 0 for
    a pair exactly at the window's edge), ``why`` and the onsets, slopes and residuals behind it."""
    scs = [detect(m, steps, rel=rel, window=window) for m in mags]
    if max(s.stages for s in scs) < 2:
        return {"ok": None, "margin": float("nan"), "why": "fewer than two stages at every alpha", "stages": 1}
    if min(s.stages for s in scs) == 0:
        return {"ok": None, "margin": float("nan"), "why": "no active component at some alpha", "stages": 0}
    K = min(s.stages for s in scs)
    same = all(np.array_equal(s.order[:K], scs[0].order[:K]) for s in scs)
    x = np.log(1.0 / np.asarray(alphas, dtype=np.float64))
    fits = [affine_fit(x, np.array([float(s.onsets[s.order[k]]) for s in scs])) for k in range(K)]
    sep = min(s.separation() for s in scs) - window
    lin_m = lin - max(f.residual for f in fits)
    slopes = [f.slope for f in fits]
    apart = all(s.one_at_a_time for s in scs)
    ok = apart and same and min(slopes) > 0 and lin_m >= 0
    why = []
    if not apart:
        why.append("together at " + ", ".join(f"alpha={a:g}" for a, s in zip(alphas, scs) if not s.one_at_a_time))
    if not same:
        why.append("order differs across alpha")
    if min(slopes) <= 0:
        why.append("an onset does not grow with log(1/alpha)")
    if lin_m < 0:
        why.append(f"onsets not affine in log(1/alpha) (residual {max(f.residual for f in fits):.3f})")
    margin = min(sep, lin_m) if same and min(slopes) > 0 else -1.0
    return {
        "ok": bool(ok),
        "margin": float(margin) if ok or margin <= 0 else 0.0,  # 0: a pair exactly at the window's edge
        "why": "; ".join(why) or "passes",
        "stages": [s.stages for s in scs],
        "common": K,
        "order": scs[0].order[:K].tolist(),
        "onsets": [s.onsets[s.order].tolist() for s in scs],
        "slopes": slopes,
        "residuals": [f.residual for f in fits],
        "alphas_together": [a for a, s in zip(alphas, scs) if not s.one_at_a_time],
    }


# ------------------------------------------------------------------ trajectories to detect stages in
def small_start(param: str, B: int, d: int, seed: int, alpha: float) -> dict[str, np.ndarray]:
    r"""The initial point of every run of a batch at scale $\alpha$: $\alpha$ times one seeded standard normal draw
    per data set (:func:`attsvm.gd.initial_params`, ``"random"`` at scale 1; ``param`` ``"diag"``: $k,q$ (B,d),
    ``"KQ"``: $K,Q$ (B,d,d)) — the same direction at every $\alpha$, so that only the scale changes."""
    from .gd import initial_params

    return {k: alpha * v for k, v in initial_params(param, "random", B, d, d, seed, init_scale=1.0).items()}


def record_plan(steps: int) -> list[tuple[int, int, int]]:
    r"""Segments ``(start, stop, every)`` of the records: to ``steps/12`` every ``steps/3000``, to ``steps/3`` every
    ``steps/600``, to ``steps`` every ``steps/150`` — about 500 records, spaced at most 2% of the elapsed steps from
    step ``steps/60`` on and 10% from ``steps/300`` on (the default stage window is 10%), where a uniform spacing that
    fine would record 3000."""
    s1, s2 = steps // 12, steps // 3
    return [(0, s1, max(1, s1 // 250)), (s1, s2, max(1, (s2 - s1) // 150)), (s2, steps, max(1, (steps - s2) // 100))]


def recorded_run(
    ds: Dataset, param: str, init: dict, lr: float, steps: int
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    r"""Plain GD (``algo="gd"``, constant ``lr``) from ``init`` for ``steps`` steps, recorded on :func:`record_plan`:
    one engine run per segment, each from the last iterate of the one before (plain GD has no other state, so the
    chain is the one run, bit for bit). Returns ``(record steps (R,), {factor: (R, B, ...)})``."""
    from .gd import run

    names = ("k", "q") if param == "diag" else ("K", "Q")
    cur = {k: np.asarray(v) for k, v in init.items()}
    at, rec = [], {k: [] for k in names}
    for a, b, every in record_plan(steps):
        r = run(ds, param=param, algo="gd", lr=lr, steps=b - a, init=cur, record_every=every, record_params=True)
        tr = r.trajectory
        keep = np.ones(len(tr["step"]), dtype=bool) if a == 0 else tr["step"] > 0
        at.append(tr["step"][keep] + a)
        for k in names:
            rec[k].append(tr[k][keep])
        cur = {names[0]: r.K, names[1]: r.Q}
    return np.concatenate(at), {k: np.concatenate(v) for k, v in rec.items()}


def magnitudes(param: str, params: dict, init: dict) -> np.ndarray:
    r"""Component magnitudes per record, (R, ..., r): $|k_jq_j-k_{0j}q_{0j}|$ (``diag``) or the singular values of
    $KQ^\top-K_0Q_0^\top$, largest first (``KQ``). ``params``: the recorded factors, leading axes (R, ...);
    ``init``: the initial ones (...)."""
    if param == "diag":
        return np.abs(params["k"] * params["q"] - init["k"] * init["q"])
    W0 = np.einsum("...ij,...kj->...ik", init["K"], init["Q"])
    W = np.einsum("...ij,...kj->...ik", params["K"], params["Q"])
    return np.linalg.svd(W - W0, compute_uv=False)
