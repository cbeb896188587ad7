r"""Feasibility of Att-SVM($\alpha$) and Farkas certificates (THEORY §2, Gordan's alternative).

Att-SVM($\alpha$) is infeasible iff there is $\mu\ge0$, $\mu\ne0$ with $\sum_j\mu_jA_j=0$,
$A_j=D_jz_j^\top$ (equivalently: the dual $\max_{\lambda\ge0}\mathbf 1^\top\lambda-\frac12\lambda^\top G\lambda$
is unbounded, and $\mu$ is a direction of unboundedness, $G\mu=0$, $\mathbf 1^\top\mu>0$).

Certificates come from the working-set solver's diverging direction when it verifies, otherwise from the
LP $\{\mu\ge0:\ \sum_j\mu_jD_j(Q^\top z_j)^\top=0,\ \mathbf 1^\top\mu=1\}$ solved by HiGHS, with $Q$ an
orthonormal basis of $\mathrm{span}\{z_j\}$ (so only $d\cdot\mathrm{rank}(Z)$ equalities). A certificate is
accepted only if its relative residual $\|\sum_j\mu_jA_j\|_F/\sum_j\mu_j\|A_j\|_F\le$ ``tol('kkt')``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy.optimize import linprog

from ..data import Dataset
from ..errors import SolverError
from ..tolerances import tol
from .constraints import Constraints, build
from .dual import DualResult, solve_dual
from .exact import exact_features, fmpz_matrix, to_integers
from .scaling import normalised
from .solution import SVMSolution


def farkas_residual(c: Constraints, mu: np.ndarray) -> float:
    r"""$\|\sum_j\mu_jA_j\|_F/\sum_j\mu_j\|A_j\|_F$ (0 is an exact certificate)."""
    mu = np.asarray(mu, dtype=float)
    S = c.D.T @ (mu[:, None] * c.Zc)
    scale = float(np.sum(mu * np.linalg.norm(c.D, axis=1) * np.linalg.norm(c.Zc, axis=1)))
    return float(np.linalg.norm(S)) / max(scale, np.finfo(float).tiny)


def zero_feature_certificate(c: Constraints) -> tuple[np.ndarray, dict] | None:
    r"""The trivial exact Farkas vector $\mu=e_j$ when some feature vanishes, $A_j=D_jz_j^\top=0$ (a token equal to the
    selected one, $x_{it}=x_{i\alpha_i}$, or $z_i=0$; a float difference is exactly zero iff the floats are equal):
    the constraint reads $0\ge1$. Returns ``(mu, certificate)`` or None."""
    zero = ~np.any(c.D != 0, axis=1) | ~np.any(c.Zc != 0, axis=1)
    if not np.any(zero):
        return None
    j = int(np.flatnonzero(zero)[0])
    mu = np.zeros(c.m)
    mu[j] = 1.0
    i, t = int(c.row[j]), int(np.asarray(c.tok).reshape(-1)[j])
    return mu, {
        "kind": "farkas-exact",
        "verified": True,
        "residual": 0.0,
        "reason": f"A_({i},{t}) = 0: the constraint reads 0 >= 1",
    }


def farkas_lp(c: Constraints) -> np.ndarray | None:
    """A Farkas vector ``mu`` (m,) with sum 1 from an LP (HiGHS), or None when the LP is infeasible
    (then Att-SVM is feasible). Any other LP status raises :class:`SolverError`."""
    D, Zc = c.D, c.Zc
    U, sv, _ = np.linalg.svd(Zc.T, full_matrices=False)
    r = int(np.sum(sv > tol("rank") * max(sv.max(initial=0.0), np.finfo(float).tiny)))
    Zq = Zc @ U[:, :r]  # (m, r) coordinates of each z_j in an orthonormal basis of span{z}
    F = (D[:, :, None] * Zq[:, None, :]).reshape(D.shape[0], -1)  # (m, d*r)
    A_eq = np.vstack([F.T, np.ones((1, D.shape[0]))])
    b_eq = np.zeros(A_eq.shape[0])
    b_eq[-1] = 1.0
    res = linprog(np.zeros(D.shape[0]), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if res.status == 2:
        return None
    if res.status != 0:
        raise SolverError(f"Farkas LP (HiGHS) ended with status {res.status}: {res.message}")
    return np.maximum(np.asarray(res.x, dtype=float), 0.0)


def max_margin_point(c: Constraints) -> tuple[float, np.ndarray]:
    r"""$(t^\ast,W)$ with $t^\ast=\max\{t:\ \langle W,A_j\rangle\ge t\ \forall j,\ \|W\|_{\max}\le1\}$ by an LP (HiGHS):
    positive iff Att-SVM is feasible, and small when it is barely so ($\|W^{mm}\|_F\ge1/(d\,t^\ast)$). A status
    other than optimal raises :class:`SolverError`."""
    A = (c.D[:, :, None] * c.Zc[:, None, :]).reshape(c.D.shape[0], -1)
    m, k = A.shape
    cost = np.zeros(k + 1)
    cost[-1] = -1.0
    res = linprog(
        cost,
        A_ub=np.hstack([-A, np.ones((m, 1))]),
        b_ub=np.zeros(m),
        bounds=[(-1.0, 1.0)] * k + [(None, None)],
        method="highs",
    )
    if res.status != 0:
        raise SolverError(f"max-margin LP (HiGHS) ended with status {res.status}: {res.message}")
    d = c.D.shape[1]
    return float(-res.fun), np.asarray(res.x[:k], dtype=float).reshape(d, d)


def farkas_certificate(c: Constraints, ray: np.ndarray | None = None) -> np.ndarray | None:
    """A verified Farkas vector (m,), normalised to sum 1: the given ``ray`` if it verifies, else the LP's.
    None when the LP proves feasibility. Raises :class:`SolverError` if no certificate verifies."""
    if ray is not None and np.all(ray >= 0) and ray.sum() > 0:
        mu = ray / ray.sum()
        if farkas_residual(c, mu) <= tol("kkt"):
            return mu
    mu = farkas_lp(c)
    if mu is None:
        return None
    if farkas_residual(c, mu) > tol("kkt"):
        raise SolverError(f"Farkas certificate does not verify (residual {farkas_residual(c, mu):.2e})")
    return mu


def exact_farkas(c: Constraints, Dint: np.ndarray, Zint: np.ndarray, mu: np.ndarray) -> np.ndarray | None:
    r"""An exact Farkas vector on the support of the float ``mu``, or None.

    ``Dint``, ``Zint`` are the constraints' exact integer data (:func:`~attsvm.svm.exact.exact_features`:
    the binary floats themselves after a common power-of-two scaling, so
    $A_j\propto D^{\mathbb Z}_j(z^{\mathbb Z}_j)^\top$).
    The integer null space $\mathcal N$ of $[\mathrm{vec}A_j]_{j\in S}$, $S=\{j:\mu_j>10^{-9}\max\mu\}$,
    is computed exactly (FLINT). A nonnegative nonzero $\mu^\ast\in\mathcal N$ - the basis vector up to sign
    when $\dim\mathcal N=1$, otherwise the rational rounding of the least-squares fit of ``mu`` - proves
    infeasibility: $\sum_j\mu^\ast_jA_j=0$ holds exactly. Returns $\mu^\ast/\mathbf 1^\top\mu^\ast$ as floats."""
    mu = np.asarray(mu, dtype=float)
    S = np.flatnonzero(mu > 1e-9 * mu.max(initial=0.0))
    if S.size == 0:
        return None
    d = Dint.shape[1]
    vecA = (Dint[S][:, :, None] * Zint[S][:, None, :]).reshape(S.size, d * d)  # rows vec(A_j), exact ints
    N, nullity = fmpz_matrix(vecA.T).nullspace()
    if nullity == 0:
        return None
    basis = [[int(N[r, k]) for r in range(S.size)] for k in range(nullity)]
    if nullity == 1:
        vec = [Fraction(x) for x in basis[0]]
        if all(x <= 0 for x in vec):
            vec = [-x for x in vec]
    else:
        Bf = np.array(basis, dtype=float).T  # (|S|, nullity)
        coef, *_ = np.linalg.lstsq(Bf, mu[S], rcond=None)
        cf = [Fraction(float(x)).limit_denominator(10**12) for x in coef]
        vec = [sum(cf[k] * basis[k][r] for k in range(nullity)) for r in range(S.size)]
    if any(x < 0 for x in vec) or not any(x > 0 for x in vec):
        return None
    total = sum(vec)
    out = np.zeros_like(mu)
    out[S] = [float(x / total) for x in vec]
    return out


def feasible_witness(c: Constraints, Dint: np.ndarray, Zint: np.ndarray) -> bool:
    r"""Whether the max-margin LP's $W$ (:func:`max_margin_point`) has every margin $>0$ in exact arithmetic on
    the exact integer data ``Dint``, ``Zint`` - a proof of feasibility."""
    t, W = max_margin_point(c)
    if not t > 0:
        return False
    Wi, _ = to_integers(W)
    margins = np.sum(Dint.dot(Wi) * Zint, axis=1)  # exact Python integers (object arrays)
    return all(x > 0 for x in margins.tolist())


def confirm_infeasible(ds: Dataset, c: Constraints, mu: np.ndarray) -> tuple[np.ndarray | None, dict]:
    r"""Settle a float infeasibility verdict exactly. ``(mu_exact, certificate)`` when an exact Farkas vector
    exists on the support of ``mu`` (:func:`exact_farkas`); ``(None, {})`` when an exactly-verified feasible
    point exists instead (:func:`feasible_witness`: the float verdict was a rounding artefact of a barely
    feasible instance); :class:`SolverError` when neither is found (undecided in float64)."""
    Dint, _, Zint, _ = exact_features(ds, c)
    ex = exact_farkas(c, Dint, Zint, mu)
    if ex is not None:
        return ex, {"kind": "farkas-exact", "verified": True, "residual": farkas_residual(c, ex)}
    if feasible_witness(c, Dint, Zint):
        return None, {}
    raise SolverError(
        f"Att-SVM feasibility undecided in float64: a Farkas vector with residual {farkas_residual(c, mu):.1e} "
        "has no exact counterpart on its support, and no feasible point verifies exactly"
    )


def proved_infeasible(ds: Dataset, c: Constraints, what: str) -> tuple[np.ndarray, dict]:
    r"""For a solver that reported Att-SVM($\alpha$) infeasible (any norm: feasibility does not depend on it): the
    exact Farkas vector (m,) and its certificate, or :class:`SolverError` when the report is not borne out."""
    mu = farkas_lp(c)
    if mu is None:
        raise SolverError(f"{what}: solver reports infeasible but no Farkas certificate exists")
    mu, cert = confirm_infeasible(ds, c, mu)
    if mu is None:
        raise SolverError(f"{what}: solver reports infeasible, but a feasible point verifies exactly")
    return mu, cert


def farkas_from_ray(ds: Dataset, c: Constraints, r: DualResult) -> tuple[np.ndarray, dict] | None:
    r"""An exact Farkas vector ``(mu, certificate)`` from a Frobenius dual result ``r`` whose status is ``"ray"`` or
    ``"diverged"`` (its ray verified or the LP's, then made exact: :func:`confirm_infeasible`); None when there is
    none or float64 cannot decide. Feasibility of Att-SVM($\alpha$) does not depend on the norm, so the norm
    programs use this before their own solvers on large instances."""
    if r.status not in ("ray", "diverged"):
        return None
    try:
        mu = farkas_certificate(c, r.ray)
        if mu is None:
            return None
        mu_exact, cert = confirm_infeasible(ds, c, mu)
    except SolverError:
        return None
    return None if mu_exact is None else (mu_exact, cert)


def feasibility(ds: Dataset, alpha: np.ndarray | None = None) -> tuple[bool, np.ndarray | None]:
    r"""Is Att-SVM($\alpha$) feasible? Returns ``(True, None)`` or ``(False, mu)`` with the Farkas
    multipliers ``mu`` (N, T) ($\mu\ge0$, zero at $(i,\alpha_i)$, $\sum\mu A=0$ exactly: :func:`confirm_infeasible`;
    :class:`SolverError` when float64 cannot decide). Feasibility and $\mu$ do not change under a rescaling of
    the data, so very large or small data are decided on their exact power-of-two rescaling (:mod:`.scaling`).
    With no constraints ($T=1$) the program is feasible."""
    ds, _ = normalised(ds)
    c = build(ds, alpha)
    if c.m == 0:
        return True, None
    zero = zero_feature_certificate(c)
    if zero is not None:
        return False, c.to_grid(zero[0])
    try:
        r = solve_dual(c.D, c.Zc)
        ray = r.ray if r.status == "ray" else None
        if r.status == "optimal":
            return True, None
    except SolverError:
        ray = None
    mu = farkas_certificate(c, ray)
    if mu is None:
        return True, None
    mu, _ = confirm_infeasible(ds, c, mu)
    if mu is None:  # a barely feasible instance: exactly verified feasible point
        return True, None
    return False, c.to_grid(mu)


def infeasible_solution(
    cons: Constraints, norm: str, program: str, alpha: np.ndarray, mu: np.ndarray, cert: dict, extra: dict | None = None
) -> SVMSolution:
    r"""The ``"infeasible"`` :class:`~attsvm.svm.solution.SVMSolution` of ``norm``'s program, carrying the Farkas
    certificate ``cert`` (with its ``residual``) and $\mu$ on the (n, T) grid of ``cons``."""
    return SVMSolution(
        "infeasible", norm, program, alpha, None, None, kkt={"farkas_residual": cert["residual"]}, certificate=cert,
        farkas=cons.to_grid(mu), extra={} if extra is None else extra,
    )  # fmt: skip
