r"""How far an optimizer's iterate is from the max-margin solution of a norm $N$ (THEORY §6): the measures of the
optimizer claims, on attention data and on the multiclass controls (:mod:`attsvm.multiclass`).

For a selection $\alpha$ with Att-SVM constraints $\langle W,A_{it}\rangle\ge1$ and $m(W)=\min_{it}\langle
W,A_{it}\rangle$:

* the **excess** $e_N(W)=\|W/m(W)\|_N/\mathrm{OPT}_N(\alpha)-1$ ($+\infty$ when $m(W)\le0$), 0 exactly when $W$'s
  direction solves the $N$-program, whichever of its solutions a solver returns (:func:`excess`);
* the **normalised-margin gap** $\Delta(W)=\gamma^\star-m(W)/\|W\|_N$, $\gamma^\star=1/\mathrm{OPT}_N$, along a
  trajectory, its fitted exponent $p$ in $\Delta_k\approx Ck^{-p}$ (:func:`gap_exponent`) and the growth of
  $\Delta_k\sqrt k/(\log k+n)$, the form of the proved rate $O((\log k+n)/\sqrt k)$ of normalised steepest and
  momentum descent with $\eta_k\propto k^{-1/2}$ (Fan, Schmidt, Thrampoulidis, arXiv 2502.04664) (:func:`rate_growth`);
* the **confirmation** of a failing run (:func:`confirm_excess`): the run replayed at 50 digits
  (:func:`attsvm.highprec.replay`, every algorithm written again from its definition) must agree with float64 to
  ``tol("replay_rtol")`` — or, where float64's rounding was amplified along the run (sign flips of Adam's and
  Signum's steps do that), with a second replay at 70 digits, so that the 50-digit run is the exact one to that
  tolerance —, and its excess, computed at 50 digits against an *upper bound* of $\mathrm{OPT}_N$,
  must still exceed ``eps``: the solver's point $\hat W$, taken as exact, bounds $\mathrm{OPT}_N\le\|\hat W\|_N/
  m(\hat W)$ whenever $m(\hat W)>0$ (every strictly feasible point does), so an inaccurate solve only makes the
  confirmation harder, never easier.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .data import Dataset
from .norms import matrix_norms
from .svm.constraints import build
from .tolerances import tol

__all__ = ["confirm_excess", "excess", "gap_exponent", "gaps", "optimum", "rate_growth"]


def optimum(ds: Dataset, alpha: Any, norm: str) -> float | None:
    r"""$\mathrm{OPT}_N(\alpha)=\|W^{mm}\|_N/m(W^{mm})$ from the float solve of the $N$-program, or ``None`` when it
    is infeasible, not solved, or its KKT residual exceeds ``tol("kkt")`` (the run is then undecided)."""
    from . import svm

    sol = svm.solve(ds, alpha, norm=norm)
    if sol.status != "optimal" or max(sol.kkt.values(), default=0.0) > tol("kkt"):
        return None
    m = float(build(ds, alpha).margins(sol.W).min())
    return float(matrix_norms(sol.W, norm)) / m if m > 0 else None


def excess(ds: Dataset, alpha: Any, W: np.ndarray, norm: str, opt: float) -> float:
    r"""$e_N(W)$ (module docstring); $+\infty$ when $W$ does not satisfy every constraint of $\alpha$ strictly."""
    m = float(build(ds, alpha).margins(np.asarray(W)).min())
    return float(matrix_norms(np.asarray(W), norm)) / m / opt - 1.0 if m > 0 else float(np.inf)


def gaps(ds: Dataset, alpha: Any, Ws: np.ndarray, norm: str, opt: float) -> np.ndarray:
    r"""$\Delta(W_r)=1/\mathrm{OPT}_N-m(W_r)/\|W_r\|_N$ for a stack of iterates ``Ws`` (R, d, d)."""
    m = build(ds, alpha).margins(np.asarray(Ws)).min(-1)
    return 1.0 / opt - m / np.maximum(matrix_norms(np.asarray(Ws), norm), 1e-300)


def gap_exponent(k: np.ndarray, gap: np.ndarray) -> float | None:
    r"""The least-squares exponent $p$ of $\Delta_k\approx Ck^{-p}$ (log-log fit), ``None`` unless every gap is
    positive (a zero or negative gap is the end of the selection's change or rounding, not a rate)."""
    k, gap = np.asarray(k, dtype=float), np.asarray(gap, dtype=float)
    if len(k) < 3 or not np.all(gap > 0):
        return None
    return float(-np.polyfit(np.log(k), np.log(gap), 1)[0])


def rate_growth(k: np.ndarray, gap: np.ndarray, n: int) -> float:
    r"""$s_{k_{\rm end}}/s_{k_0}$ with $s_k=\Delta_k\sqrt k/(\log k+n)$ over the records ``k`` (the proved rate's
    form: bounded when the rate holds)."""
    k, gap = np.asarray(k, dtype=float), np.asarray(gap, dtype=float)
    s = gap * np.sqrt(k) / (np.log(k) + n)
    return float(s[-1] / s[0])


def _norm50(W: list, norm: str):
    import mpmath as mp

    flat = [x for row in W for x in row]
    if norm == "linf":
        return max(abs(x) for x in flat)
    if norm == "l1":
        return mp.fsum(abs(x) for x in flat)
    if norm == "fro":
        return mp.sqrt(mp.fsum(x * x for x in flat))
    if norm == "spec":
        sv = mp.svd_r(mp.matrix(W), compute_uv=False)
        return max(sv[i] for i in range(sv.rows))
    raise ValueError(f"no 50-digit norm {norm!r}")


def confirm_excess(
    run_data: Any,
    svm_data: Dataset,
    W0: np.ndarray,
    *,
    norm: str,
    eps: float,
    lr: float,
    steps: int,
    loss: str = "logistic",
    alpha: Any = None,
    every: int | None = None,
    **settings: Any,
) -> dict[str, Any]:
    r"""Confirm that the run from ``W0`` on ``run_data`` ends with excess above ``eps`` (module docstring).

    ``svm_data`` holds the constraints ($=$ ``run_data`` for attention data; the :func:`~attsvm.multiclass.as_attention`
    encoding for a multiclass control, with ``alpha`` its labels); ``alpha`` ``None``: the replayed iterate's own
    selection. Returns a dict: ``ok`` (``False``: confirmed), ``margin`` ($\mathrm{eps}-e_N$ at 50 digits), or
    ``inconclusive`` with the reason, and the evidence; where the excess was decided, also ``alpha`` (the selection
    measured) and, with ``every``, ``records``: the same replay's iterates every ``every`` steps as
    :func:`replayed_records` returns them (``(steps, iterates, relative difference from float64)``), so a rate
    measured on them needs no second replay."""
    import mpmath as mp

    from . import highprec as hp
    from . import svm

    rep, res = _replay(run_data, W0, lr=lr, steps=steps, every=every, loss=loss, **settings)
    ref = res.W[0]
    W_mp = rep.array("W")
    rel = float(np.linalg.norm(W_mp - ref) / np.linalg.norm(ref))
    rel70 = None
    if rel > tol("replay_rtol"):  # float64 rounding was amplified along the run: is the 50-digit run itself exact?
        W70 = hp.replay(run_data, W0, param="W", lr=lr, steps=steps, loss=loss, dps=70, **settings).array("W")
        rel70 = float(np.linalg.norm(W_mp - W70) / np.linalg.norm(W70))
        if rel70 > tol("replay_rtol"):
            return {"ok": True, "inconclusive": f"the 50- and 70-digit replays disagree (relative {rel70:.1e})"}
    if alpha is None:
        H = hp.data(svm_data)
        alpha = np.argmax(hp.to_numpy(hp.logits(H.X, rep.final["W"], H.Z)), axis=-1)
    sol = svm.solve(svm_data, alpha, norm=norm)
    if sol.status != "optimal":
        return {
            "ok": True,
            "inconclusive": f"the {norm}-Att-SVM of the replayed selection is not solved ({sol.status})",
        }
    with mp.workdps(hp.DPS):
        c = build(svm_data, alpha)
        A0, A1 = (hp.as_mp(x) for x in (c.D, c.Zc))
        d = len(A0[0])

        def ratio(W: list):  # ||W||_N / m(W) at 50 digits, None when m(W) <= 0
            marg = min(mp.fsum(A0[j][p] * W[p][q] * A1[j][q] for p in range(d) for q in range(d)) for j in range(c.m))
            return _norm50(W, norm) / marg if marg > 0 else None

        upper = ratio(hp.as_mp(sol.W))  # any feasible point bounds OPT_N from above: the solver's, taken as exact
        if upper is None:
            return {"ok": True, "inconclusive": "the solver's point is not strictly feasible at 50 digits"}
        r = ratio(rep.final["W"])
        if r is None:
            return {"ok": False, "margin": -1.0, "how": "the replayed W does not satisfy its selection's constraints"}
        e = r / upper - 1
        m = mp.mpf(eps) - e
    return {
        "ok": bool(m >= 0),
        "margin": float(m),
        "excess_lower_bound_50_digits": float(e),
        "replay_rel": rel,
        **({"replay_50_vs_70": rel70} if rel70 is not None else {}),
        "opt_upper": float(upper),
        "alpha": np.asarray(alpha),
        **({"records": _records(rep, res)} if every is not None else {}),
    }


def _replay(run_data: Any, W0: np.ndarray, *, lr: float, steps: int, every: int | None, loss: str, **settings: Any):
    """The 50-digit replay and the float64 run from ``W0``, both recording every ``every`` steps (``None``: none)."""
    from . import gd
    from . import highprec as hp

    rec = {} if every is None else {"record_every": every}
    rep = hp.replay(run_data, W0, param="W", lr=lr, steps=steps, loss=loss, **rec, **settings)
    res = gd.run(run_data, param="W", lr=lr, steps=steps, init=W0, loss=loss, record_params=every is not None,
                 **rec, **settings)  # fmt: skip
    return rep, res


def _records(rep: Any, res: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """``(steps, 50-digit iterates rounded to float64, largest relative difference of the float64 records)``."""
    Ws = np.stack([rep.array("W", j) for j in range(len(rep.recorded))])
    ref = np.asarray(res.trajectory["W"])[:, 0]
    k = np.asarray(res.trajectory["step"], dtype=float)
    nrm = np.maximum(np.linalg.norm(Ws.reshape(len(Ws), -1), axis=-1), 1e-300)
    rel = float(np.max(np.linalg.norm((ref - Ws).reshape(len(Ws), -1), axis=-1) / nrm))
    return k, Ws, rel


def replayed_records(
    run_data: Any, W0: np.ndarray, *, lr: float, steps: int, every: int, loss: str = "logistic", **settings: Any
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""The run from ``W0`` replayed at 50 digits with its iterates recorded every ``every`` steps (rounded to
    float64, (R, d, d)), the recorded steps (R,), and the largest relative difference from the float64 engine's
    records (how far rounding moved the float64 run)."""
    return _records(*_replay(run_data, W0, lr=lr, steps=steps, every=every, loss=loss, **settings))
