r"""Shared helpers of the §4 convergence claims (THEORY §4): GD runs, selections, stuck inputs, rates,
and a high-precision (mpmath) replay of short trajectories.

The log-domain gradient direction
---------------------------------
With $c_i=\ell'(u_i)/n<0$ and $s_i=\mathbb S(a_i)$, the gradient (claim ``grad-closed-form``) is a
sum over token *pairs* with non-negative weights,

.. math::
    \nabla\mathcal L(W)=-\sum_i\sum_{t<\tau}\underbrace{|c_i|\,s_{it}s_{i\tau}}_{w_{it\tau}}
    (\gamma_{it}-\gamma_{i\tau})(x_{it}-x_{i\tau})z_i^\top ,

so $\log w_{it\tau}=\log|c_i|+\log s_{it}+\log s_{i\tau}$ is available from the log-softmax even when
$w$ underflows. Factoring out $M=\max\log w$ gives $\nabla\mathcal L=e^{M}\tilde G$ with $\tilde G$ of
order one: its direction is what normalised GD needs (THEORY §5, "Underflow"), and
$M_i-M$ ($M_i$ the largest log-weight of input $i$) is the log of input $i$'s share of the gradient
(THEORY §5, "Stuck inputs"). Pairs with bit-equal scores contribute exactly zero (Assumption B).

:func:`ngd_reference` / :func:`gd_reference` are small numpy steppers used as *references* for the
high-precision replay (:func:`mp_replay`) and the stuck-input analysis at small size; the claims run
the batched engine :func:`attsvm.gd.run` for their sweeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data import Dataset
from ..model import Arrays, log_softmax, logits, scores, smoothness_constant

__all__ = [
    "LogGrad",
    "log_gradient",
    "ngd_reference",
    "gd_reference",
    "selection_of",
    "stuck_inputs",
    "corr",
    "fit_power",
    "fit_log_rate",
    "mp_replay",
    "mp_log_shares",
    "wmm_batch",
    "wmm_single",
    "Trap",
    "trap_analysis",
    "equal_scores_sweep",
    "confirm_trap",
    "trap_sets",
    "locally_optimal",
    "run_W",
    "log_lipschitz_step",
]


# ---------------------------------------------------------------------- log-domain gradient
@dataclass
class LogGrad:
    r"""$\nabla\mathcal L=e^{\texttt{log\_scale}}\,\texttt{G}$; ``log_share`` (..., n): $M_i-M$ (``-inf`` for
    an input with no contribution); ``log_s`` (..., n, T) the log-softmax."""

    G: np.ndarray
    log_scale: np.ndarray
    log_share: np.ndarray
    log_s: np.ndarray


def _log_abs_dloss(u: np.ndarray) -> np.ndarray:
    r"""$\log|\ell'(u)|=-\mathrm{logaddexp}(0,u)$ for the logistic loss."""
    return -np.logaddexp(0.0, u)


def log_gradient(A: Arrays, W: np.ndarray) -> LogGrad:
    """Log-domain gradient of the logistic loss for cross-attention arrays (batched over leading axes)."""
    ls = log_softmax(logits(A.X, W, A.Z), A.mask)
    g = scores(A.X, A.Y, A.v)
    n = g.shape[-2]
    u = np.sum(np.exp(ls) * g, axis=-1)
    lc = _log_abs_dloss(u) - np.log(n)
    dg = g[..., :, None] - g[..., None, :]  # (..., n, T, T)
    lw = lc[..., None, None] + ls[..., :, None] + ls[..., None, :]
    lw = np.where(dg == 0.0, -np.inf, lw)
    M_i = np.max(lw, axis=(-2, -1))  # (..., n)
    M = np.max(M_i, axis=-1)  # (...)
    Mfin = np.where(np.isfinite(M), M, 0.0)
    r = np.sum(np.exp(lw - Mfin[..., None, None, None]) * dg, axis=-1)  # (..., n, T): r_it e^{-M}|c_i|
    xr = np.einsum("...nt,...ntd->...nd", r, A.X)
    G = -np.einsum("...nd,...ne->...de", xr, A.Z)
    return LogGrad(G, M, M_i - Mfin[..., None], ls)


def log_lipschitz_step(ds: Dataset) -> np.ndarray:
    r"""$\eta=1/L_W$ (claim ``smoothness-bound``), one per data set."""
    return 1.0 / np.asarray(smoothness_constant(ds))


@dataclass
class RefRun:
    """Result of a reference run: final ``W``, and a trajectory of (step, norm, log_s, log_share)."""

    W: np.ndarray
    steps: np.ndarray
    norm: np.ndarray
    log_s: np.ndarray
    log_share: np.ndarray
    Ws: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


def _run(ds: Dataset, W0: np.ndarray, steps: int, record_every: int, update) -> RefRun:
    A = Arrays.of(ds)
    W = np.array(W0, dtype=np.float64)
    rec: dict[str, list] = {"k": [], "norm": [], "ls": [], "sh": [], "W": []}
    for k in range(steps + 1):
        lg = log_gradient(A, W)
        if k % record_every == 0 or k == steps:
            rec["k"].append(k)
            rec["norm"].append(np.linalg.norm(W, axis=(-2, -1)))
            rec["ls"].append(lg.log_s)
            rec["sh"].append(lg.log_share)
            rec["W"].append(W.copy())
        if k == steps:
            break
        W = update(W, lg)
    return RefRun(
        W,
        np.array(rec["k"]),
        np.stack(rec["norm"]),
        np.stack(rec["ls"]),
        np.stack(rec["sh"]),
        np.stack(rec["W"]),
    )


def ngd_reference(ds: Dataset, W0: np.ndarray, steps: int, lr: float = 0.1, record_every: int = 100) -> RefRun:
    r"""Normalised GD $W_{k+1}=W_k-\eta\tilde G/\|\tilde G\|_F$ with the log-domain direction (numpy)."""

    def upd(W, lg):
        nrm = np.linalg.norm(lg.G, axis=(-2, -1), keepdims=True)
        return W - lr * lg.G / np.where(nrm > 0, nrm, 1.0)

    return _run(ds, W0, steps, record_every, upd)


def gd_reference(ds: Dataset, W0: np.ndarray, steps: int, lr: Any = None, record_every: int = 100) -> RefRun:
    r"""Plain GD $W_{k+1}=W_k-\eta\nabla\mathcal L(W_k)$, $\eta=1/L_W$ by default (numpy)."""
    eta = log_lipschitz_step(ds) if lr is None else np.asarray(lr, dtype=np.float64)
    eta = np.asarray(eta)[..., None, None]

    def upd(W, lg):
        return W - eta * np.exp(lg.log_scale)[..., None, None] * lg.G

    return _run(ds, W0, steps, record_every, upd)


# ---------------------------------------------------------------------- selections and stuck inputs
def selection_of(log_s: np.ndarray) -> np.ndarray:
    r"""The selection GD ended on: $\alpha_i=\arg\max_ts_{it}$."""
    return np.argmax(log_s, axis=-1)


def stuck_inputs(ds: Dataset, log_s: np.ndarray, level: float = np.log(0.5)) -> np.ndarray:
    r"""Inputs saturated on a non-optimal token: $\alpha_i\ne\mathrm{opt}_i$ and $\log s_{i\alpha_i}>$ ``level``."""
    a = selection_of(log_s)
    top = np.take_along_axis(log_s, a[..., None], -1)[..., 0]
    return (a != ds.opt) & (top > level)


def corr(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    r"""$\mathrm{corr}(A,B)=\langle A,B\rangle/(\|A\|_F\|B\|_F)$ over the last two axes."""
    num = np.sum(A * B, axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / (np.linalg.norm(A, axis=(-2, -1)) * np.linalg.norm(B, axis=(-2, -1)))


def fit_power(t: np.ndarray, y: np.ndarray) -> float:
    r"""Least-squares exponent $p$ of $y\approx Ct^{-p}$ (log-log fit over positive entries)."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    ok = (t > 0) & (y > 0) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan")
    slope = np.polyfit(np.log(t[ok]), np.log(y[ok]), 1)[0]
    return float(-slope)


def fit_log_rate(t: np.ndarray, y: np.ndarray) -> float:
    r"""Least-squares exponent $q$ of $y\approx C(\log t)^{-q}$ (fit of $\log y$ against $\log\log t$)."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    ok = (t > 1) & (y > 0) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan")
    return float(-np.polyfit(np.log(np.log(t[ok])), np.log(y[ok]), 1)[0])


# ---------------------------------------------------------------------- SVM solutions (engine)
def wmm_batch(ds: Dataset, alpha: np.ndarray | None = None):
    r"""$W^{mm}_\alpha$ for every data set of a batch via :func:`attsvm.svm.solve_fro_batch`.

    Returns ``(W (B,d,d), feasible (B,))``."""
    from .. import svm

    b = ds if alpha is None else ds.with_alpha(np.asarray(alpha))
    res = svm.solve_fro_batch(b)
    return np.asarray(res.W), np.asarray(res.feasible, dtype=bool)


def wmm_single(ds: Dataset, alpha: np.ndarray | None = None) -> np.ndarray | None:
    r"""$W^{mm}_\alpha$ of one data set (:func:`attsvm.svm.solve_fro`: KKT-checked, Farkas-verified when
    infeasible); ``None`` when Att-SVM($\alpha$) is infeasible. A solver failure raises ``SolverError``."""
    from ..svm import solve_fro

    sol = solve_fro(ds, None if alpha is None else np.asarray(alpha))
    return None if sol.status != "optimal" else np.asarray(sol.W)


@dataclass
class Trap:
    r"""Stuck-input analysis at a final iterate (THEORY §4, ``gd-global-equal-scores``).

    ``wrong``: inputs whose selection $\alpha_i=\arg\max_ts_{it}\ne\mathrm{opt}_i$; ``W_rest``: the Att-SVM
    solution $W'$ of the *other* inputs (selection opt); ``deficit`` (per wrong input):
    $\max_{t\ne\mathrm{opt}_i}(x_{it}-x_{i,\mathrm{opt}_i})^\top W'z_i$. Along $R\,W'/\|W'\|$ the wrong input's
    $s_{i,\mathrm{opt}_i}\approx e^{-R\rho\,\mathrm{deficit}_i}$ while the others' gradient weights are
    $e^{-R\rho}$ ($\rho=1/\|W'\|$), so its share of the gradient is $e^{-R\rho(\mathrm{deficit}_i-1)}$: a
    *trap* (self-consistent, no escape) iff every deficit exceeds 1."""

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


def trap_analysis(ds: Dataset, W: np.ndarray, log_s: np.ndarray) -> Trap:
    """:class:`Trap` of one (cross-attention) data set at iterate ``W`` with log-softmax ``log_s`` (n,T)."""
    opt = ds.opt
    a = selection_of(log_s)
    wrong = [int(i) for i in np.nonzero(a != opt)[0]]
    Wmm = wmm_single(ds.with_alpha(None) if ds.alpha is not None else ds)
    cg = float(corr(W, Wmm)) if Wmm is not None else float("nan")
    if not wrong:
        return Trap([], Wmm, [], cg, cg)
    keep = np.setdiff1d(np.arange(ds.n), wrong)
    if keep.size == 0:
        return Trap(wrong, None, [], float("nan"), cg)
    sub = Dataset(ds.X[keep], ds.Y[keep], ds.Z[keep], ds.v, alpha=opt[keep])
    Wr = wmm_single(sub)
    if Wr is None:
        return Trap(wrong, None, [], float("nan"), cg)
    dz = []
    for i in wrong:
        gaps = [(ds.X[i, t] - ds.X[i, opt[i]]) @ Wr @ ds.Z[i] for t in range(ds.T) if t != opt[i]]
        dz.append(float(max(gaps)))
    return Trap(wrong, Wr, dz, float(corr(W, Wr)), cg)


# ---------------------------------------------------------------------- mpmath replay
def _mp_state(ds: Dataset, dps: int):
    import mpmath as mp

    A = Arrays.of(ds)
    n, T, d = A.X.shape[-3:]
    X = [[[mp.mpf(float(A.X[i, t, k])) for k in range(d)] for t in range(T)] for i in range(n)]
    Z = [[mp.mpf(float(A.Z[i, k])) for k in range(d)] for i in range(n)]
    v = [mp.mpf(float(A.v[k])) for k in range(d)]
    Y = [mp.mpf(float(A.Y[i])) for i in range(n)]
    g = [[Y[i] * mp.fsum(v[k] * X[i][t][k] for k in range(d)) for t in range(T)] for i in range(n)]
    return X, Z, g, n, T, d


def _mp_grad_parts(X, Z, g, n, T, d, W):
    """Per-input gradient matrices (exact definition, mpmath) and log-softmax; returns (parts, log_s)."""
    import mpmath as mp

    parts, logs = [], []
    for i in range(n):
        Wz = [mp.fsum(W[a][b] * Z[i][b] for b in range(d)) for a in range(d)]
        a = [mp.fsum(X[i][t][k] * Wz[k] for k in range(d)) for t in range(T)]
        m = max(a)
        lse = m + mp.log(mp.fsum(mp.exp(at - m) for at in a))
        s = [mp.exp(at - lse) for at in a]
        logs.append([at - lse for at in a])
        u = mp.fsum(s[t] * g[i][t] for t in range(T))
        c = -1 / (1 + mp.exp(u)) / n
        # r_t = s_t * sum_tau s_tau (g_t - g_tau)  (definition of (diag(s) - s s^T) gamma, pairwise)
        r = [s[t] * mp.fsum(s[tau] * (g[i][t] - g[i][tau]) for tau in range(T)) for t in range(T)]
        xr = [mp.fsum(X[i][t][k] * r[t] for t in range(T)) for k in range(d)]
        parts.append([[c * xr[a_] * Z[i][b] for b in range(d)] for a_ in range(d)])
    return parts, logs


def mp_log_shares(ds: Dataset, W: np.ndarray, dps: int = 50) -> tuple[np.ndarray, np.ndarray]:
    r"""At high precision: $\log_{10}(\|\nabla_i\|_F/\|\nabla\mathcal L\|_F)$ per input ($\nabla_i$ its term of
    the gradient), and $\log_{10}s_{it}$. Single data set, W taken as exact."""
    import mpmath as mp

    with mp.workdps(dps):
        X, Z, g, n, T, d = _mp_state(ds, dps)
        Wm = [[mp.mpf(float(W[a, b])) for b in range(d)] for a in range(d)]
        parts, logs = _mp_grad_parts(X, Z, g, n, T, d, Wm)
        tot = [[mp.fsum(p[a][b] for p in parts) for b in range(d)] for a in range(d)]
        fn = lambda M: mp.sqrt(mp.fsum(M[a][b] ** 2 for a in range(d) for b in range(d)))  # noqa: E731
        nt = fn(tot)
        sh = [float(mp.log10(fn(p) / nt)) if fn(p) != 0 else -np.inf for p in parts]
        ls = [[float(x / mp.log(10)) for x in row] for row in logs]
    return np.array(sh), np.array(ls)


def mp_replay(
    ds: Dataset, W0: np.ndarray, steps: int, lr: float = 0.1, normalised: bool = True, dps: int = 50
) -> dict[str, Any]:
    r"""Replay ``steps`` (normalised) GD steps from ``W0`` at ``dps`` digits with the gradient computed from
    its definition in mpmath (no float64 code). Returns the final W (float64), the per-step
    $\log_{10}$ gradient shares of each input and $\log_{10}s_{i,\mathrm{opt}_i}$."""
    import mpmath as mp

    opt = ds.opt
    with mp.workdps(dps):
        X, Z, g, n, T, d = _mp_state(ds, dps)
        W = [[mp.mpf(float(W0[a, b])) for b in range(d)] for a in range(d)]
        shares, lsopt = [], []
        for _ in range(steps + 1):
            parts, logs = _mp_grad_parts(X, Z, g, n, T, d, W)
            G = [[mp.fsum(p[a][b] for p in parts) for b in range(d)] for a in range(d)]
            nG = mp.sqrt(mp.fsum(G[a][b] ** 2 for a in range(d) for b in range(d)))
            pn = [mp.sqrt(mp.fsum(p[a][b] ** 2 for a in range(d) for b in range(d))) for p in parts]
            shares.append([float(mp.log10(x / nG)) if x != 0 else -np.inf for x in pn])
            lsopt.append([float(logs[i][int(opt[i])] / mp.log(10)) for i in range(n)])
            if len(shares) > steps:
                break
            scale = lr / nG if normalised else lr
            W = [[W[a][b] - scale * G[a][b] for b in range(d)] for a in range(d)]
        Wf = np.array([[float(W[a][b]) for b in range(d)] for a in range(d)])
    return {"W": Wf, "log10_share": np.array(shares), "log10_s_opt": np.array(lsopt)}


# ---------------------------------------------------------------------- gd-global-equal-scores
def _trap_margin(ds: Dataset, W: np.ndarray, ls_end: np.ndarray, ls_mid: np.ndarray, norm: float, h: dict):
    r"""``(margin, trapped, Trap)`` of one run: margin $1-\min\mathrm{deficit}<0$ for a trapped run; $>1$ when
    every input selects its optimal token ($1+\tanh(\min_i\text{logit gap}/\|W\|)$); ``None`` when undecidable."""
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
        and t.corr_rest >= h["corr_trap"]
        and t.corr_rest > t.corr_global
        and bool(np.all(lso_end < h["log_s_trap"]))
        and bool(np.all(lso_end < lso_mid))
    )
    m = 1.0 - min(t.deficit) if t.deficit else 0.0
    return (m if trapped else max(abs(m), 1e-3)), trapped, t


def equal_scores_sweep(batch: Dataset, W0: np.ndarray, h: dict) -> dict[str, Any]:
    r"""Run ``h["algo"]`` from the initial points ``W0`` (k, d, d) on every data set of ``batch`` (one batched
    reference run of B·k runs) and judge each run with the trap test. Returns per data set: ``ok``
    (no trapped run; None if undecidable), ``margin``, and the detail of its worst run (with ``W_end``)."""
    B, k = batch.batch_size, W0.shape[0]
    big = Dataset.stack([batch[b] for b in range(B) for _ in range(k)])
    Ws = np.broadcast_to(W0[None], (B, k, *W0.shape[1:])).reshape(B * k, *W0.shape[1:])
    steps = int(h["steps"])
    if h["algo"] == "ngd":
        r = ngd_reference(big, Ws, steps, lr=float(h["lr"]), record_every=max(1, steps // 2))
    else:
        lr = None if h["lr"] == "1/L" else float(h["lr"])
        r = gd_reference(big, Ws, steps, lr=lr, record_every=max(1, steps // 2))
    mid = len(r.steps) // 2
    out: list[dict[str, Any]] = []
    for b in range(B):
        ds = batch[b]
        best: dict[str, Any] = {"ok": None, "margin": None}
        for j in range(k):
            q = b * k + j
            m, trapped, t = _trap_margin(ds, r.W[q], r.log_s[-1][q], r.log_s[mid][q], float(r.norm[-1][q]), h)
            if m is None:
                continue
            if best["margin"] is None or m < best["margin"]:
                best = {
                    "ok": m >= 0,
                    "margin": float(m),
                    "init": j,
                    "init_norm": float(np.linalg.norm(W0[j])),
                    "norm_end": float(r.norm[-1][q]),
                    "W_end": r.W[q].tolist(),
                    **t.to_json(),
                }
        out.append(best)
    return {"runs": out}


def confirm_trap(ds: Dataset, detail: dict, h: dict) -> dict[str, Any]:
    r"""Replay the float64 end state ``detail["W_end"]`` for ``h["replay_steps"]`` steps in mpmath (50 digits,
    gradient from its definition) next to the float64 reference; re-check the trap at the replayed state.
    Returns ``rel`` (relative difference of the two end points), the wrong inputs' $\log_{10}$ gradient
    shares at the start and end of the replay, and whether the trap survives."""
    W = np.array(detail["W_end"])
    L = int(h["replay_steps"])
    ngd = h["algo"] == "ngd"
    if ngd:
        lr = float(h["lr"])
        ref = ngd_reference(ds, W, L, lr=lr, record_every=L)
    else:
        lr = float(log_lipschitz_step(ds)) if h["lr"] == "1/L" else float(h["lr"])
        ref = gd_reference(ds, W, L, lr=lr, record_every=L)
    mp = mp_replay(ds, W, L, lr=lr, normalised=ngd, dps=50)
    rel = float(np.linalg.norm(mp["W"] - ref.W) / np.linalg.norm(ref.W))
    wrong = list(detail["wrong_inputs"])
    sh = mp["log10_share"][:, wrong]
    t = trap_analysis(ds, mp["W"], ref.log_s[-1])
    return {
        "replay_steps": L,
        "mp_vs_float64_rel": rel,
        "log10_share_start": sh[0].tolist(),
        "log10_share_end": sh[-1].tolist(),
        "share_falling": bool(np.all(sh[-1] < sh[0])),
        "deficit": t.deficit,
        "trapped": bool(t.trapped and t.wrong == wrong),
    }


def trap_sets(ds: Dataset) -> list[tuple[list[int], list[float]]]:
    r"""Every *trap set* of one data set: a non-empty proper subset $S$ of inputs such that the Att-SVM $W'$
    of the others (selection opt) exists and every $i\in S$ has deficit
    $\max_{t\ne\mathrm{opt}_i}(x_{it}-x_{i,\mathrm{opt}_i})^\top W'z_i>1$. Returns ``[(S, deficits), ...]``
    ($2^n-2$ small solves: for small n only)."""
    from itertools import combinations

    n, opt = ds.n, ds.opt
    out = []
    for size in range(1, n):
        for S in combinations(range(n), size):
            keep = np.setdiff1d(np.arange(n), S)
            Wr = wmm_single(Dataset(ds.X[keep], ds.Y[keep], ds.Z[keep], ds.v, alpha=opt[keep]))
            if Wr is None:
                continue
            dz = [
                max(float((ds.X[i, t] - ds.X[i, opt[i]]) @ Wr @ ds.Z[i]) for t in range(ds.T) if t != opt[i]) for i in S
            ]
            if min(dz) > 1.0:
                out.append((list(S), dz))
    return out


def locally_optimal(ds: Dataset, alpha: np.ndarray) -> tuple[bool | None, np.ndarray | None]:
    r"""Is $\alpha$ locally optimal (THEORY §2: $\gamma_{i\alpha_i}>\gamma_{it}$ for every SVM-neighbour
    $t\in\mathcal T_i$, margin within ``tol('active')`` of 1)? Returns ``(flag, W^mm_alpha)``; ``(None, None)``
    when Att-SVM($\alpha$) is infeasible."""
    from ..svm.constraints import build
    from ..tolerances import tol

    alpha = np.asarray(alpha)
    W = wmm_single(ds, alpha)
    if W is None:
        return None, None
    c = build(ds, alpha)
    marg = c.to_grid(c.margins(W), fill=np.inf)
    g = ds.scores.reshape(marg.shape)
    ga = np.take_along_axis(g, alpha.reshape(-1)[:, None], -1)
    sup = np.abs(marg - 1.0) <= tol("active")
    return bool(np.all(~sup | (ga > g))), W


def run_W(ds: Dataset, h: dict, W0: Any = "zero", record_every: int | None = None) -> RefRun:
    r"""One batched run on $W$ as the hypotheses say: ``algo`` (``ngd``/``gd``), ``lr`` (number or ``"1/L"``),
    ``steps``; ``engine="reference"`` (numpy log-domain stepper of this module, default) or ``"torch"``
    (:func:`attsvm.gd.run`; the two agree to ~1e-13, see the tests)."""
    B = ds.batch_size or 1
    d = ds.d
    steps = int(h["steps"])
    rec = record_every or max(1, steps // 10)
    if isinstance(W0, str) and W0 == "zero":
        W0 = np.zeros((B, d, d)) if ds.batched else np.zeros((d, d))
    algo, lr = h.get("algo", "ngd"), h.get("lr", 0.1)
    if h.get("engine", "reference") == "torch":
        from .. import gd

        res = gd.run(
            ds, param="W", algo=algo, lr=lr, steps=steps, init=np.asarray(W0), record_every=rec, record_params=True
        )
        tr = res.trajectory  # records first: norm (R,B), W (R,B,d,d); only the final log-softmax is kept
        return RefRun(res.W, tr["step"], tr["norm"], res.log_softmax[None], np.zeros(0), tr["W"], extra={"result": res})
    if algo == "ngd":
        return ngd_reference(ds, W0, steps, lr=float(lr), record_every=rec)
    return gd_reference(ds, W0, steps, lr=None if lr == "1/L" else float(lr), record_every=rec)
