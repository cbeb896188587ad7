r"""Prompt-attention SVMs of 2306.13596 (THEORY §2): prompt SVM, head SVM and the relaxed prompt SVM.

.. math:: p^{mm}_\alpha=\arg\min\|p\|_2\ \text{s.t.}\ p^\top(x_{i\alpha_i}-x_{it})\ge1\ (t\ne\alpha_i),

.. math:: v^{mm}=\arg\min\|v\|_2\ \text{s.t.}\ Y_iv^\top x_{i\alpha_i}\ge1,\qquad
   \mathcal S=\{i:Y_iv^{mm\top}x_{i\alpha_i}=1\},

and the relaxed prompt SVM: as $p^{mm}$ but with margin $\ge1$ for $i\in\mathcal S$ and $\ge0$ for $i\notin\mathcal S$.

Each is $\min\frac12\|u\|^2$ s.t. $Fu\ge b$ (cvxpy + Clarabel): KKT $u=F^\top\lambda$, $\lambda\ge0$,
$\lambda_j(F_ju-b_j)=0$, and $\|u\|^2=b^\top\lambda$; ``objective`` is $\|u\|_2^2$ (as for the Frobenius
Att-SVM). Infeasible: Farkas $\mu\ge0$, $F^\top\mu=0$, $b^\top\mu=1$. The vectors are returned in ``extra``
(``"p"`` or ``"v"``); ``W`` is None.
"""

from __future__ import annotations

import numpy as np

from ..data import Dataset
from ..errors import InputError, SolverError
from ..tolerances import tol
from .budget import estimate, require
from .cvx import farkas_lp, linear_kkt, solve
from .frobenius import certify_fro
from .scaling import normalised, unscale_solution
from .solution import SVMSolution

_KKT_KEYS = ("primal_feasibility", "dual_feasibility", "complementary_slackness", "stationarity", "duality_gap")


def _qp(F: np.ndarray, b: np.ndarray, what: str):
    """min ½|u|² s.t. F u ≥ b. Returns ("optimal", u, lam, kkt) or ("infeasible", mu, resid)."""
    import cvxpy as cp

    if F.shape[0] == 0:  # no constraints: u = 0
        u0 = np.zeros(F.shape[1])
        return "optimal", u0, np.zeros(0), dict.fromkeys(_KKT_KEYS, 0.0)
    u = cp.Variable(F.shape[1])
    con = F @ u >= b
    status = solve(cp.Problem(cp.Minimize(0.5 * cp.sum_squares(u)), [con]), what)
    if status == "infeasible":
        res = farkas_lp(F, b)
        if res is None:
            raise SolverError(f"{what}: solver reports infeasible but no Farkas certificate exists")
        mu = res[0]
        return "infeasible", mu, float(np.abs(F.T @ mu).max() / max(mu.sum(), 1e-300))
    uv = np.asarray(u.value)
    lam = np.maximum(np.asarray(con.dual_value, dtype=float).ravel(), 0.0)
    obj = float(uv @ uv)
    scale = max(obj, 1e-300)
    kkt = linear_kkt(F @ uv, lam, b, np.abs(uv - F.T @ lam).max() / max(np.abs(uv).max(), 1e-300), scale)
    kkt["dual_feasibility"] = float(max(0.0, -np.min(con.dual_value)))
    kkt["duality_gap"] = float(abs(obj - b @ lam) / scale)
    return "optimal", uv, lam, kkt


def _check(ds: Dataset, alpha) -> np.ndarray:
    if ds.batched or ds.kind not in ("cross", "self"):
        raise InputError("prompt/head SVMs take a single cross- or self-attention data set")
    if alpha is None:
        return np.asarray(ds.selection)
    a = np.asarray(alpha)
    if a.shape != (ds.n,) or a.dtype.kind not in "iu" or np.any(a < 0) or np.any(a >= ds.T):
        raise InputError(f"field 'alpha' must be {ds.n} integer token indices in [0,{ds.T})")
    return a.astype(np.int64)


def _prompt_rows(ds: Dataset, a: np.ndarray):
    keep = np.arange(ds.T)[None, :] != a[:, None]
    i, t = np.nonzero(keep)
    return ds.X[i, a[i]] - ds.X[i, t], i, t


def _prompt_program(ds: Dataset, a: np.ndarray, b_row: np.ndarray, program: str, extra: dict) -> SVMSolution:
    F, i, t = _prompt_rows(ds, a)
    b = b_row[i]
    out = _qp(F, b, f"{program} SVM")
    grid = lambda v, fill=0.0: _grid(ds, i, t, v, fill)  # noqa: E731
    if out[0] == "infeasible":
        _, mu, resid = out
        return SVMSolution(
            "infeasible", "l2", program, a, None, None, kkt={"farkas_residual": resid},
            certificate={"kind": "farkas", "verified": resid <= tol("kkt")}, farkas=grid(mu), extra=extra,
        )  # fmt: skip
    _, p, lam, kkt = out
    mg = F @ p
    margins = grid(mg, np.nan)
    support = [(int(i[j]), int(t[j])) for j in np.flatnonzero(np.abs(mg - b) <= tol("active"))]
    extra = dict(extra, p=p)
    return SVMSolution(
        "optimal", "l2", program, a, None, float(p @ p), margins, grid(lam), support, kkt=kkt,
        certificate={"kind": "kkt-float", "verified": bool(max(kkt.values()) <= tol("kkt"))}, extra=extra,
    )  # fmt: skip


def _grid(ds: Dataset, i: np.ndarray, t: np.ndarray, v: np.ndarray, fill: float) -> np.ndarray:
    out = np.full((ds.n, ds.T), fill)
    out[i, t] = v
    return out


def _rescaled(ds: Dataset, program: str, fn, *args) -> SVMSolution:
    """Run ``fn(ds', *args)`` on the exactly rescaled data (:mod:`.scaling`: $p$, $v$ scale with $X$ only) and map
    the solution back; the memory estimate is checked first."""
    require(estimate(ds, "fro", program), f"the {program} SVM of this data set")
    scaled, scale = normalised(ds)
    return unscale_solution(fn(scaled, *args), scale)


def solve_prompt(ds: Dataset, alpha=None) -> SVMSolution:
    r"""Prompt SVM $p^{mm}_\alpha$ (in ``extra["p"]``); margins/multipliers on the (n,T) grid. With no constraints
    ($T=1$) $p=0$."""
    a = _check(ds, alpha)
    return _rescaled(ds, "prompt", lambda d2: _prompt_program(d2, a, np.ones(d2.n), "prompt", {}))


def certify_prompt(ds: Dataset, alpha=None) -> dict:
    r"""Exact rational $p^{mm}_\alpha$: the prompt SVM is the Frobenius Att-SVM with the constant query $z_i=e_1$
    ($\langle W,(x_{i\alpha_i}-x_{it})e_1^\top\rangle=(x_{i\alpha_i}-x_{it})^\top We_1$, and the minimum-norm $W$
    is $[p^{mm}_\alpha,0,\dots,0]$), so :func:`attsvm.svm.certify_fro` proves it. Returns that certificate with
    ``"p"``: the exact entries (``"p/q"`` strings; ``None`` unless ``verified``)."""
    a = _check(ds, alpha)
    Z = np.zeros((ds.n, ds.d))
    Z[:, 0] = 1.0
    return _first_column(certify_fro(Dataset(ds.X, ds.Y, Z, ds.v), a), "p")


def certify_head(ds: Dataset, alpha=None) -> dict:
    r"""Exact rational $v^{mm}$ (head SVM of $\alpha$): the head SVM is the Frobenius Att-SVM of the data with the
    two tokens $u_i=Y_ix_{i\alpha_i}$ and $0$, label 1, selection 0 and the constant query $z_i=e_1$
    ($\langle W,(u_i-0)e_1^\top\rangle=u_i^\top We_1$; the minimum-norm $W$ is $[v^{mm},0,\dots,0]$), so
    :func:`attsvm.svm.certify_fro` proves it. Returns that certificate with ``"v"``: the exact entries (``"p/q"``
    strings; ``None`` unless ``verified``)."""
    a = _check(ds, alpha)
    X2 = np.zeros((ds.n, 2, ds.d))
    X2[:, 0] = ds.Y[:, None] * ds.X[np.arange(ds.n), a]
    Z = np.zeros((ds.n, ds.d))
    Z[:, 0] = 1.0
    return _first_column(
        certify_fro(Dataset(X2, np.ones(ds.n), Z, np.ones(ds.d), alpha=np.zeros(ds.n, dtype=np.int64))), "v"
    )


def _first_column(cert: dict, key: str) -> dict:
    """A Frobenius certificate of a vector program encoded with the query $e_1$: the certificate with ``key`` the
    exact first column of its $W$ (None unless verified and written)."""
    W = cert.get("W")
    return dict(cert, **{key: None if not cert.get("verified") or W is None else [row[0] for row in W]})


def solve_head(ds: Dataset, alpha=None) -> SVMSolution:
    r"""Head SVM $v^{mm}$ (in ``extra["v"]``) with support set $\mathcal S$ (``extra["S"]``, sorted input indices).

    ``margins`` / ``multipliers`` are (n,): $Y_iv^\top x_{i\alpha_i}$ and $\lambda_i$."""
    a = _check(ds, alpha)
    return _rescaled(ds, "head", _solve_head, a)


def _solve_head(ds: Dataset, a: np.ndarray) -> SVMSolution:
    F = ds.Y[:, None] * ds.X[np.arange(ds.n), a]
    out = _qp(F, np.ones(ds.n), "head SVM")
    if out[0] == "infeasible":
        _, mu, resid = out
        return SVMSolution(
            "infeasible", "l2", "head", a, None, None, kkt={"farkas_residual": resid},
            certificate={"kind": "farkas", "verified": resid <= tol("kkt")}, farkas=mu,
        )  # fmt: skip
    _, v, lam, kkt = out
    mg = F @ v
    S = np.flatnonzero(np.abs(mg - 1.0) <= tol("active"))
    return SVMSolution(
        "optimal", "l2", "head", a, None, float(v @ v), mg, lam, [(int(j), int(a[j])) for j in S], kkt=kkt,
        certificate={"kind": "kkt-float", "verified": bool(max(kkt.values()) <= tol("kkt"))},
        extra={"v": v, "S": [int(j) for j in S]},
    )  # fmt: skip


def solve_relaxed_prompt(ds: Dataset, alpha=None, S=None) -> SVMSolution:
    r"""Relaxed prompt SVM: margin $\ge1$ for $i\in\mathcal S$, $\ge0$ otherwise ($\mathcal S$ from
    :func:`solve_head` unless given). ``extra``: ``"p"``, ``"S"``."""
    a = _check(ds, alpha)
    return _rescaled(ds, "relaxed", _solve_relaxed, a, S)


def _solve_relaxed(ds: Dataset, a: np.ndarray, S) -> SVMSolution:
    if S is None:
        head = _solve_head(ds, a)
        if head.status != "optimal":
            raise InputError("relaxed prompt SVM: the head SVM is infeasible, so the support set S is undefined")
        S = head.extra["S"]
    S = [int(j) for j in S]
    if any(j < 0 or j >= ds.n for j in S):
        raise InputError(f"field 'S' must hold input indices in [0,{ds.n})")
    b_row = np.zeros(ds.n)
    b_row[S] = 1.0
    return _prompt_program(ds, a, b_row, "relaxed", {"S": S})
