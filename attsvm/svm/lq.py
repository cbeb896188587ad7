r"""ℓq Att-SVM: the entrywise-ℓq attention SVM, the implicit bias of ℓq mirror descent (THEORY §2, 2410.14581).

.. math:: W^{mm}_{q,\alpha}=\arg\min\|W\|_q\quad\text{s.t.}\quad\langle W,A_{it}\rangle\ge1,\qquad
   \|W\|_q=\Big(\sum_{ab}|W_{ab}|^q\Big)^{1/q},\ q>1.

Dual: $\max_{\lambda\ge0}\mathbf 1^\top\lambda$ s.t. $\|M\|_{q^*}\le1$, $M=\sum_j\lambda_jA_j$, $1/q+1/q^*=1$.
KKT: $M\in\partial\|W\|_q$, i.e. $\|M\|_{q^*}\le1$ and $\langle M,W\rangle=\|W\|_q$; complementary slackness;
$\mathbf 1^\top\lambda=\|W\|_q$ (zero duality gap). Solved with cvxpy + Clarabel (power cones), constraints
as one vectorised expression.
"""

from __future__ import annotations

import numpy as np

from ..data import Dataset
from ..errors import InputError, SolverError
from ..norms import entrywise_norm
from ..tolerances import tol
from .budget import estimate, require
from .constraints import build, program_of
from .cvx import margins_expr, solve
from .dual import solve_dual
from .farkas import farkas_from_ray, infeasible_solution, proved_infeasible, zero_feature_certificate
from .scaling import normalised, unscale_solution
from .solution import SVMSolution

#: above this many constraints, infeasibility is first decided by the Frobenius dual (feasibility is norm-free)
LARGE = 200

#: entrywise $\|W\|_q$ (:func:`attsvm.norms.entrywise_norm`)
lq_norm = entrywise_norm


def solve_lq(ds: Dataset, q: float, alpha=None) -> SVMSolution:
    r"""Solve ℓq Att-SVM($\alpha$) for $q>1$ (single data set; sequence/causal via the flat view).

    ``multipliers`` are the constraint duals $\lambda$; ``kkt`` holds ``primal_feasibility``,
    ``dual_feasibility``, ``complementary_slackness``, ``dual_norm`` ($\|M\|_{q^*}-1$, should be $\le0$),
    ``stationarity`` ($|\langle M,W\rangle-\|W\|_q|/\|W\|_q$) and ``duality_gap``. Infeasible: Farkas
    certificate in ``farkas``. Very large or small data are rescaled exactly first (:mod:`.scaling`); with no
    constraints ($T=1$) $W=0$."""
    try:
        q = float(q)
    except (TypeError, ValueError) as exc:
        raise InputError("field 'q' must be a number > 1") from exc
    if not q > 1 or not np.isfinite(q):
        raise InputError(f"field 'q' must be a finite number > 1, got {q}")
    if q > Q_MAX:  # cvxpy approximates the exponent by a rational; beyond this it breaks down (1/0 at q = 1e308)
        raise InputError(f"field 'q' must be at most {Q_MAX:g} (for larger q use the l_inf limit), got {q:g}")
    if ds.batched:
        raise InputError("solve_lq takes a single data set (iterate over the batch)")
    require(estimate(ds, "lq", "attsvm"), "lq Att-SVM of this data set")
    scaled, scale = normalised(ds)
    return unscale_solution(_solve_lq(scaled, q, alpha), scale)


Q_MAX = 1e3  # the largest exponent solved (cvxpy's power cone of a rational approximation of q)


def _solve_lq(ds: Dataset, q: float, alpha) -> SVMSolution:
    import cvxpy as cp

    cons = build(ds, alpha)
    program = program_of(ds.kind)
    a = np.asarray(cons.alpha)
    d = ds.d
    if cons.m == 0:  # no constraints (T = 1): W = 0 is the minimum-norm point
        kkt = dict.fromkeys(
            ("primal_feasibility", "dual_feasibility", "complementary_slackness", "dual_norm", "stationarity"), 0.0
        )
        kkt["duality_gap"] = 0.0
        return SVMSolution(
            "optimal", "lq", program, a, np.zeros((d, d)), 0.0, cons.to_grid(np.zeros(0), np.nan),
            cons.to_grid(np.zeros(0)), kkt=kkt, certificate={"kind": "kkt-float", "verified": True, "lower": 0.0,
            "upper": 0.0, "reason": "no constraints"}, extra={"q": q},
        )  # fmt: skip
    zero = zero_feature_certificate(cons)
    if zero is None and cons.m > LARGE:  # large: the (fast) Frobenius dual's ray decides infeasibility first
        try:
            zero = farkas_from_ray(ds, cons, solve_dual(cons.D, cons.Zc))
        except SolverError:
            zero = None
    if zero is not None:  # infeasible, exactly (a constraint 0 >= 1, or the Frobenius ray)
        return infeasible_solution(cons, "lq", program, a, *zero, extra={"q": q})
    W = cp.Variable((d, d))
    con = margins_expr(cons.D, W, cons.Zc) >= 1
    prob = cp.Problem(cp.Minimize(cp.pnorm(cp.vec(W, order="F"), q)), [con])
    status = solve(prob, f"lq Att-SVM (q={q})")
    if status == "infeasible":
        mu, cert = proved_infeasible(ds, cons, f"lq Att-SVM (q={q})")
        return infeasible_solution(cons, "lq", program, a, mu, cert, extra={"q": q})
    Wv = np.asarray(W.value)
    lam = np.maximum(np.asarray(con.dual_value, dtype=float).ravel(), 0.0)
    mg = cons.margins(Wv)
    if 0 < mg.min() < 1:  # interior-point solutions are feasible only to ~1e-9: rescale onto the feasible set,
        Wv = Wv / mg.min()  # so that the objective is the norm of a feasible point (an upper bound)
        mg = cons.margins(Wv)
    obj = lq_norm(Wv, q)
    M = cons.combine(lam)
    qs = q / (q - 1.0)
    dn = lq_norm(M, qs)
    dual = float(lam.sum())
    kkt = {
        "primal_feasibility": float(max(0.0, 1.0 - mg.min())),
        "dual_feasibility": float(max(0.0, -np.min(con.dual_value))),
        "complementary_slackness": float(np.abs(lam * (mg - 1.0)).max() / max(dual, 1e-300)),
        "dual_norm": float(dn - 1.0),
        "stationarity": float(abs(np.sum(M * Wv) - obj) / max(obj, 1e-300)),
        "duality_gap": float(abs(obj - dual) / max(obj, 1e-300)),
    }
    margins = cons.to_grid(mg, np.nan)
    support = [(int(i), int(t)) for i, t in np.argwhere(np.abs(margins - 1.0) <= tol("active"))]
    ok = max(kkt["primal_feasibility"], kkt["dual_norm"], kkt["stationarity"], kkt["duality_gap"]) <= tol("kkt")
    cert = {"kind": "kkt-float", "verified": bool(ok), "lower": dual / max(dn, 1e-300), "upper": obj}
    return SVMSolution(
        "optimal", "lq", program, a, Wv, obj, margins, cons.to_grid(lam), support,
        kkt=kkt, certificate=cert, extra={"q": q},
    )  # fmt: skip
