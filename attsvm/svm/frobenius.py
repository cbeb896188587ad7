r"""Frobenius Att-SVM of a data set: the working-set dual solver (:mod:`.dual`), made total.

Primal (THEORY §2): $W^{mm}_\alpha=\arg\min\|W\|_F$ s.t. $\langle W,A_j\rangle\ge1$, $A_j=D_jz_j^\top$;
dual $\max_{\lambda\ge0}\mathbf 1^\top\lambda-\frac12\lambda^\top G\lambda$ with $W=\sum_j\lambda_jA_j$ and
$\|W\|_F^2=\mathbf 1^\top\lambda$ (the ``objective``). :func:`solve_fro` turns every status of
:func:`~attsvm.svm.dual.solve_dual` into a verdict: ``"optimal"`` (KKT-checked), or infeasible with an exact
Farkas vector (:mod:`.farkas`), or the cvxpy+Clarabel reference (:mod:`.reference`) when the working set was
inaccurate; ``certify=True`` adds the exact certificate (:mod:`.certificate`). The data are first rescaled
exactly by powers of two when their entries are very large or very small (:mod:`.scaling`), and the memory
the solve needs is checked before anything is allocated (:mod:`.budget`). With no constraints ($T=1$) the
answer is $W^{mm}=0$, objective 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..data import Dataset
from ..errors import InfeasibleError, InputError, SolverError
from ..tolerances import tol
from .blas import blas_threads
from .budget import estimate, require
from .certificate import apply_certificate, certify_solution
from .constraints import Constraints, build
from .dual import DualResult, kkt_residuals, margins_of, solve_dual
from .farkas import confirm_infeasible, farkas_certificate, max_margin_point
from .reference import solve_reference_constraints
from .scaling import normalised, rescale_solution, unscale_certificate, unscale_solution
from .solution import SVMSolution
from .support import gap_from, locally_optimal_from, support_mask

__all__ = ["FroBatch", "certify_fro", "solve_fro", "solve_fro_batch", "wmm"]


# ---------------------------------------------------------------------------------------------- public API
def _solution_from(
    ds: Dataset, c: Constraints, r: DualResult | None, alpha, program: str, mu: np.ndarray | None = None
) -> SVMSolution:
    a = np.asarray(c.alpha).reshape(-1)
    if mu is not None:
        mu_exact, cert = confirm_infeasible(ds, c, mu)
        if mu_exact is not None:
            return SVMSolution(
                status="infeasible",
                norm="fro",
                program=program,
                alpha=np.asarray(c.alpha),
                W=None,
                objective=None,
                farkas=c.to_grid(mu_exact),
                certificate=cert,
            )
        r = _fallback(c)  # feasibility proved exactly: the float Farkas vector was a rounding artefact
    lam = np.where(r.lam > 0, r.lam, 0.0)
    W = r.W
    marg = margins_of(c.D, c.Zc, W)
    grid = c.to_grid(marg, fill=np.nan)
    sup = support_mask(grid)
    scores = ds.scores.reshape(-1, ds.T)
    lopt = locally_optimal_from(scores, a, sup)
    delta = gap_from(grid, sup)
    kkt = kkt_residuals(lam, marg, W, c.D, c.Zc)
    ok = all(v <= tol("kkt") for v in kkt.values())
    return SVMSolution(
        status="optimal",
        norm="fro",
        program=program,
        alpha=np.asarray(c.alpha),
        W=W,
        objective=float(np.sum(W * W)),
        margins=grid,
        multipliers=c.to_grid(lam),
        support=[(int(i), int(t)) for i, t in np.argwhere(sup)],
        locally_optimal=lopt,
        delta=None if not np.isfinite(delta) else float(delta),
        kkt=kkt,
        certificate={"kind": "kkt-float", "verified": bool(ok)},
        extra={"iterations": r.iterations, "active_set_size": int(r.passive.size)},
    )


def _solve_constraints(c: Constraints) -> tuple[DualResult | None, np.ndarray | None]:
    """Solve one data set's constraints: (result, None) when feasible, (None, mu) when infeasible."""
    try:
        r = solve_dual(c.D, c.Zc, row=c.row)
    except SolverError:
        mu = farkas_certificate(c, None)
        if mu is not None:
            return None, mu
        return _fallback(c), None
    if r.status == "optimal":
        return r, None
    mu = farkas_certificate(c, r.ray)
    if mu is None:  # the LP proves feasibility: the working set was inaccurate, use the reference
        return _fallback(c), None
    return None, mu


def _fallback(c: Constraints) -> DualResult:
    r"""The cvxpy+Clarabel reference, warm-starting a final working-set polish from its support.

    Called only once the Farkas LP has proved feasibility. If Clarabel then reports infeasible or fails (a
    barely-feasible instance: huge $\|W^{mm}\|$), the program is re-solved with the right-hand side scaled
    to the instance's max-margin LP value (:func:`~attsvm.svm.reference.solve_reference_constraints`);
    if that fails too, :class:`SolverError` - never a verdict that contradicts the LP."""
    try:
        Wr, lam, _ = solve_reference_constraints(c)
    except (InfeasibleError, SolverError) as exc:
        t, _ = max_margin_point(c)
        if not t > 0:
            raise SolverError(
                f"Att-SVM feasibility undecided: Farkas LP finds none, max-margin LP gives {t:.3g}"
            ) from exc
        try:
            Wr, lam, _ = solve_reference_constraints(c, rhs=t)
        except (InfeasibleError, SolverError) as exc2:
            raise SolverError(
                f"barely feasible Att-SVM (max normalised margin {t:.2e}) not solved: {exc}; rescaled: {exc2}"
            ) from exc2
    marg = margins_of(c.D, c.Zc, Wr)
    try:  # polish: seed the working set with the reference's active constraints
        r = solve_dual(c.D, c.Zc, init=np.flatnonzero(np.abs(marg - 1.0) <= 1e-6))
        if r.status == "optimal":
            return r
    except SolverError:
        pass
    return DualResult(lam, Wr, marg, "optimal", None, 0, np.flatnonzero(lam > 0))


def solve_fro(ds: Dataset, alpha: np.ndarray | None = None, certify: bool = False, program: str = "attsvm"):
    r"""Frobenius Att-SVM($\alpha$) of one data set (default $\alpha$ = ``ds.selection``).

    Returns an :class:`SVMSolution`: ``status`` ``"optimal"`` with $W^{mm}_\alpha$, ``objective``
    $\|W^{mm}_\alpha\|_F^2=\mathbf 1^\top\lambda$, margins, multipliers, support tokens, local optimality,
    $\delta_\alpha$ and named KKT residuals; or ``"infeasible"`` with a verified Farkas certificate in ``farkas``.
    ``certify=True`` adds the exact rational certificate (:func:`certify_fro`) and takes the support from its exact
    active set. Very large or small data are solved after an exact power-of-two rescaling and mapped back
    (:func:`attsvm.svm.scaling.unscale_solution`); a problem that would not fit in memory is refused
    (:class:`InputError`, :mod:`attsvm.svm.budget`).
    """
    if ds.batched:
        raise InputError("solve_fro takes a single data set; use solve_fro_batch for a batch")
    require(estimate(ds, "fro", "attsvm", certify), "Frobenius Att-SVM of this data set")
    scaled, scale = normalised(ds)
    return unscale_solution(_solve_fro(scaled, alpha, certify, program), scale)


def _solve_fro(ds: Dataset, alpha: np.ndarray | None, certify: bool, program: str) -> SVMSolution:
    c = build(ds, alpha)
    r, mu = _solve_constraints(c)
    sol = _solution_from(ds, c, r, alpha, program, mu)
    if certify and sol.status == "optimal":
        apply_certificate(ds, c, sol)
    return sol


def certify_fro(ds: Dataset, alpha: np.ndarray | None = None, sol: SVMSolution | None = None) -> dict:
    r"""Prove (or fail to prove) that ``sol`` (default: a fresh :func:`solve_fro`) is the exact Att-SVM($\alpha$)
    optimum of ``ds``: :func:`attsvm.svm.certificate.certify_solution` (keys ``kind``, ``verified``, ``active``,
    ``multipliers``, ``W``, ``min_other_margin``, ``repairs``, ``seconds``; exact ``"p/q"`` strings). Rescaled data
    (:mod:`.scaling`) are certified in their exact rescaled form and the exact values mapped back."""
    t0 = time.perf_counter()
    scaled, scale = normalised(ds)
    c = build(scaled, alpha)
    given = None if sol is None else rescale_solution(sol, scale)
    if given is None:
        given = _solve_fro(scaled, alpha, False, "attsvm")
    return unscale_certificate(certify_solution(scaled, c, given, t0), scale.k(), 2)


def wmm(ds: Dataset, alpha: np.ndarray | None = None) -> np.ndarray | None:
    r"""$W^{mm}_\alpha$ (d, d) of one data set by :func:`solve_fro` (KKT-checked), or ``None`` when Att-SVM($\alpha$)
    is infeasible (Farkas-verified). For local optimality and $\delta_\alpha$ use the full :func:`solve_fro`."""
    sol = solve_fro(ds, alpha)
    return None if sol.status != "optimal" else np.asarray(sol.W)


@dataclass
class FroBatch:
    r"""Frobenius Att-SVM of a batch: ``W`` (B,d,d) (NaN where infeasible), ``objective`` (B,)
    ($\|W\|_F^2$, inf where infeasible), ``feasible`` (B,), ``margins`` (B,N,T) and ``multipliers``
    (B,N,T) (NaN at $\alpha_i$ / invisible tokens), ``farkas`` (B,N,T) (zeros where feasible).
    ``.solution(b)`` gives the full :class:`SVMSolution` of item ``b``."""

    W: np.ndarray
    objective: np.ndarray
    feasible: np.ndarray
    margins: np.ndarray
    multipliers: np.ndarray
    farkas: np.ndarray
    _solutions: list

    def solution(self, b: int) -> SVMSolution:
        return self._solutions[b]

    def __len__(self) -> int:
        return len(self._solutions)


def solve_fro_batch(ds_batch: Dataset, alpha: np.ndarray | None = None, program: str = "attsvm") -> FroBatch:
    r"""Solve Att-SVM($\alpha_b$) for every item of a batch (constraints built once, vectorised, for the whole
    batch; one working-set solve per item). ``alpha``: (B, N) or None (each item's selection). The batch is
    rescaled as a whole (:mod:`.scaling`); a value of an item that is not representable in float64 after mapping
    back is refused (:class:`InputError`)."""
    if not ds_batch.batched:
        raise InputError("solve_fro_batch takes a batch (leading axis B); use solve_fro for one data set")
    require(estimate(ds_batch[0], "fro", "attsvm") * ds_batch.batch_size, "Frobenius Att-SVM of this batch")
    scaled, scale = normalised(ds_batch)
    cb = build(scaled, alpha)
    B = ds_batch.batch_size
    N, T, d = cb.n_rows, cb.T, ds_batch.d
    Ws = np.full((B, d, d), np.nan)
    obj = np.full(B, np.inf)
    feas = np.zeros(B, dtype=bool)
    margins = np.full((B, N, T), np.nan)
    mult = np.full((B, N, T), np.nan)
    fk = np.zeros((B, N, T))
    sols = []
    with blas_threads(1):
        for b in range(B):
            c = Constraints(cb.D[b], cb.Zc[b], cb.row, cb.tok[b], N, T, cb.alpha[b])
            r, mu = _solve_constraints(c)
            sol = unscale_solution(_solution_from(scaled[b], c, r, None, program, mu), scale)
            if sol.extra.get("unrepresentable"):
                raise InputError(
                    f"batch item {b}: {', '.join(sol.extra['unrepresentable'])} not representable in float64"
                )
            sols.append(sol)
            if sol.status == "optimal":
                Ws[b], obj[b], feas[b] = sol.W, sol.objective, True
                margins[b] = sol.margins
                mult[b] = np.where(np.isnan(sol.margins), np.nan, sol.multipliers)
            else:
                fk[b] = sol.farkas
    return FroBatch(Ws, obj, feas, margins, mult, fk, sols)
